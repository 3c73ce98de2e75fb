//! Checkpoints that travel between backends: `tests/fixtures/checkpoints/` holds, for each
//! backend, three models saved on it and their predictions there; every backend loads every
//! backend's files and predicts the same within 10⁻⁵. CI runs the suite on flex, ndarray and
//! wgpu, so each file is read on all three. `write_fixtures` (ignored) writes the selected
//! backend's files: `BNN_BURN_BACKEND=<name> cargo test … write_fixtures -- --ignored`.

use super::*;
use crate::layers::Pool;
use crate::likelihood::{Categorical, GaussianLikelihood, GaussianLikelihoodConfig, LogitRule};
use crate::nets::{
    Classifier, ConvNetConfig, ConvSpec, ImageClassifier, MlpConfig, MomentConfig, Regressor,
};
use crate::predict::{Predict, PredictMode};
use crate::testing::{seeded, test_device, to_vec};
use burn::tensor::{Device, Tensor};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/checkpoints")
}

fn regressor(device: &Device) -> Regressor {
    let likelihood: GaussianLikelihood = GaussianLikelihoodConfig::new()
        .with_noise_std(0.3)
        .init(device)
        .unwrap();
    MlpConfig::new(3, vec![16, 16], 1)
        .init(likelihood, device)
        .unwrap()
}

/// Class probabilities by moments with the probit rule: deterministic, unlike the default's
/// draws of the logits.
fn probit() -> MomentConfig {
    MomentConfig::new().with_predict_logits(LogitRule::Probit)
}

fn classifier(device: &Device) -> Classifier {
    let mut net = MlpConfig::new(3, vec![16], 4)
        .init(Categorical, device)
        .unwrap();
    net.moments = probit();
    net
}

fn conv(device: &Device) -> ImageClassifier {
    let pool = Pool::Max {
        kernel: 2,
        stride: 2,
    };
    let convs = vec![ConvSpec::new(3, 3).with_pool(Some(pool))];
    let mut net = ConvNetConfig::new([1, 8, 8], convs, MlpConfig::new(27, vec![8], 3))
        .init(Categorical, device)
        .unwrap();
    net.moments = probit();
    net
}

/// Inputs from a formula, the same on every backend: `rows` rows of `width` values in (−2, 2).
fn inputs(rows: usize, width: usize) -> Vec<f32> {
    (0..rows * width)
        .map(|i| 2.0 * ((i as f32 * 0.731 + 0.17).sin()))
        .collect()
}

/// Each model's predictive by moment propagation (deterministic: no draws) on fixed inputs,
/// flattened: the regressor's means and variances, the classifiers' probabilities.
fn predictions(
    (r, c, k): (&Regressor, &Classifier, &ImageClassifier),
    device: &Device,
) -> BTreeMap<String, Vec<f64>> {
    let flat = |rows, width| Tensor::<1>::from_floats(inputs(rows, width).as_slice(), device);
    let x = flat(6, 3).reshape([6, 3]);
    let images = flat(4, 64).reshape([4, 1, 8, 8]);
    let g = r.predict(x.clone(), PredictMode::Moments).unwrap();
    let mut out = BTreeMap::new();
    out.insert("regressor.mean".into(), to_vec(g.mean()));
    out.insert("regressor.variance".into(), to_vec(g.variance()));
    let p = c.predict(x, PredictMode::Moments).unwrap();
    out.insert("classifier.probs".into(), to_vec(p.mean()));
    let p = k.predict(images, PredictMode::Moments).unwrap();
    out.insert("conv.probs".into(), to_vec(p.mean()));
    out
}

fn file(backend: &str, model: &str) -> PathBuf {
    fixtures().join(format!("{backend}-{model}.bnnckpt"))
}

/// Writes the selected backend's three checkpoints and their predictions.
#[test]
#[ignore = "writes the fixtures of the selected backend"]
fn write_fixtures() {
    let device = test_device();
    let backend = crate::backend_name();
    let _guard = seeded(&device, 1);
    let models = (regressor(&device), classifier(&device), conv(&device));
    std::fs::create_dir_all(fixtures()).unwrap();
    save_checkpoint(&models.0, file(backend, "regressor")).unwrap();
    save_checkpoint(&models.1, file(backend, "classifier")).unwrap();
    save_checkpoint(&models.2, file(backend, "conv")).unwrap();
    let predicted = predictions((&models.0, &models.1, &models.2), &device);
    let json = serde_json::to_string_pretty(&predicted).unwrap();
    std::fs::write(fixtures().join(format!("{backend}.json")), json).unwrap();
}

/// Every backend's checkpoints load on the selected backend, and predict what they predicted
/// where they were saved, within 10⁻⁵ (relative to values above 1).
#[test]
fn checkpoints_of_every_backend_load_here_and_predict_the_same() {
    let device = test_device();
    let _guard = seeded(&device, 2);
    for backend in ["flex", "ndarray", "wgpu"] {
        let saved = fixtures().join(format!("{backend}.json"));
        let text =
            std::fs::read_to_string(&saved).unwrap_or_else(|e| panic!("{}: {e}", saved.display()));
        let expected: BTreeMap<String, Vec<f64>> = serde_json::from_str(&text).unwrap();
        // Fresh models (other parameters), then the saved ones loaded into them.
        let r = load_checkpoint(regressor(&device), file(backend, "regressor")).unwrap();
        let c = load_checkpoint(classifier(&device), file(backend, "classifier")).unwrap();
        let k = load_checkpoint(conv(&device), file(backend, "conv")).unwrap();
        let here = predictions((&r, &c, &k), &device);
        assert_eq!(
            here.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>()
        );
        for (name, values) in &here {
            let want = &expected[name];
            assert_eq!(values.len(), want.len(), "{backend}: {name}");
            for (i, (a, b)) in values.iter().zip(want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                    "saved on {backend}, loaded on {}: {name}[{i}] = {a}, saved {b}",
                    crate::backend_name()
                );
            }
        }
    }
}

/// A checkpoint of another architecture, and one whose format is newer than this library's,
/// are errors that say so.
#[test]
fn another_architecture_or_a_newer_format_is_a_clear_error() {
    let device = test_device();
    let _guard = seeded(&device, 3);
    let err = load_checkpoint(classifier(&device), file("flex", "regressor")).unwrap_err();
    assert!(matches!(err.problem, CheckpointProblem::Record(_)), "{err}");
    let message = err.to_string();
    assert!(message.contains("flex-regressor.bnnckpt"), "{message}");
    // The same file, its trailer stamped with the next format version.
    let mut bytes = std::fs::read(file("flex", "regressor")).unwrap();
    let at = bytes.len() - 24 + 7;
    bytes[at] += 1;
    let newer = std::env::temp_dir().join(format!("bnn-burn-newer-{}.bnnckpt", std::process::id()));
    std::fs::write(&newer, &bytes).unwrap();
    let err = load_checkpoint(regressor(&device), &newer).unwrap_err();
    let _ = std::fs::remove_file(&newer);
    assert!(err.to_string().contains("newer"), "{err}");
}
