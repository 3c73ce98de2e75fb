//! A run stopped after any epoch and resumed ends bit for bit where an uninterrupted run ends;
//! a state that does not belong to the run is refused before any training.

use crate::layers::{Estimator, WeightConfig};
use crate::likelihood::GaussianLikelihoodConfig;
use crate::nets::{BnnLvConfig, MlpConfig, Regressor};
use crate::objective::AlphaConfig;
use crate::posterior::PosteriorConfig;
use crate::testing::{seeded, test_device};
use crate::train::{
    DecayGroup, EarlyStoppingConfig, LrGroup, Model, TrainConfig, TrainError, TrainReport, Trainer,
};
use burn::module::{Module, ModuleVisitor, Param, ParamGroup};
use burn::tensor::{Device, Distribution, Tensor};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A fresh folder under the system's temp folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("bnn-burn-resume-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn data(device: &Device) -> (Tensor<2>, Tensor<2>) {
    let x = Tensor::<2>::random([96, 1], Distribution::Uniform(-2.0, 2.0), device);
    let y = x.clone() * 2.0 + Tensor::<2>::random([96, 1], Distribution::Normal(0.0, 0.1), device);
    (x, y)
}

fn regressor(device: &Device) -> Regressor {
    let likelihood = GaussianLikelihoodConfig::new()
        .with_noise_std(0.5)
        .init(device)
        .unwrap();
    MlpConfig::new(1, vec![8], 1)
        .with_weights(
            WeightConfig::of(PosteriorConfig::mean_field())
                .with_estimator(Estimator::LocalReparameterization),
        )
        .init(likelihood, device)
        .unwrap()
}

fn config(epochs: usize) -> TrainConfig {
    TrainConfig::new(epochs)
        .with_batch_size(32)
        .with_learning_rate(1e-2)
        .with_train_samples(2)
        .with_seed(5)
        .with_progress(false)
        // A weight-decay group chosen by path selects the same parameters after a resume.
        .with_decay_groups(vec![DecayGroup::dense_weights(0.01)])
}

/// Every float parameter's bits.
fn bits<M: Module>(model: &M) -> Vec<u32> {
    struct Bits(Vec<u32>);
    impl ModuleVisitor for Bits {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<D>>) {
            let v = p.val().into_data().try_into_vec::<f32>().unwrap();
            self.0.extend(v.iter().map(|x| x.to_bits()));
        }
    }
    let mut b = Bits(Vec::new());
    model.visit(&mut b);
    b.0
}

/// Trains a fresh regressor (its own initial draw, which a resumed run replaces) for `epochs`,
/// resuming from `dir` when given; the data are drawn the same every time.
fn run(epochs: usize, dir: Option<&Path>, init_seed: u64) -> (Vec<u32>, TrainReport) {
    let device = test_device().autodiff();
    let _guard = seeded(&device, 1);
    let data = data(&device);
    device.seed(init_seed);
    let model = regressor(&device);
    let trainer = Trainer::new(config(epochs));
    let trainer = match dir {
        Some(d) => trainer.with_resume(d, Duration::ZERO),
        None => trainer,
    };
    let (model, report) = trainer.fit(model, data).unwrap();
    (bits(&model), report)
}

#[test]
fn a_resumed_run_ends_bit_for_bit_where_an_uninterrupted_one_ends() {
    let (whole, whole_report) = run(5, None, 11);
    let dir = TempDir::new("regressor");
    // Stopped after 2 epochs; resumed from a model initialised differently.
    let (first, _) = run(2, Some(&dir.0), 11);
    assert_ne!(first, whole);
    let (resumed, report) = run(5, Some(&dir.0), 99);
    assert_eq!(resumed, whole);
    assert_eq!(report.history, whole_report.history);
    // Only the last state's files are kept.
    let mut files: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["model-00005.bpk", "optim-00005.bpk", "state.json"],
        "{files:?}"
    );
    // A finished run returns its model without training again.
    let (again, report) = run(5, Some(&dir.0), 7);
    assert_eq!(again, whole);
    assert_eq!(report.history.len(), 5);
}

/// BNN+LV keeps its latent table's Adam state outside burn's optimiser: it is saved too.
#[test]
fn a_resumed_latent_variable_run_keeps_its_local_optimiser_state() {
    let run = |epochs: usize, dir: Option<&Path>| {
        let device = test_device().autodiff();
        let _guard = seeded(&device, 2);
        let x = Tensor::<2>::random([64, 2], Distribution::Normal(0.0, 1.0), &device);
        // A learnable target, and the noise starting at its scale: a well-conditioned run, as
        // the test is about resumption, not fitting. (On pure noise from BNN+LV's default
        // noise, 0.08, the objective per point is ~100 and swings 2× between minibatches.)
        let y = x.clone().sum_dim(1)
            + Tensor::<2>::random([64, 1], Distribution::Normal(0.0, 0.1), &device);
        let weights = WeightConfig::of(PosteriorConfig::mean_field())
            .with_estimator(Estimator::Reparameterization);
        let net = BnnLvConfig::new(MlpConfig::new(2, vec![6], 1).with_weights(weights))
            .with_noise_std(1.0)
            .init_regressor(64, &device)
            .unwrap();
        let trainer =
            Trainer::new(config(epochs)).with_objective(AlphaConfig::new().init().unwrap());
        let trainer = match dir {
            Some(d) => trainer.with_resume(d, Duration::ZERO),
            None => trainer,
        };
        let (net, _) = trainer.fit(net, (x, y)).unwrap();
        (bits(&net), net.local_state())
    };
    let whole = run(4, None);
    let dir = TempDir::new("latent");
    run(1, Some(&dir.0));
    assert!(dir.0.join("local-00001.json").is_file());
    let resumed = run(4, Some(&dir.0));
    assert!(!whole.1.is_empty());
    assert_eq!(resumed, whole);
}

fn resume_error(result: Result<(Regressor, TrainReport), TrainError>) -> String {
    match result {
        Err(e @ TrainError::Resume { .. }) => e.to_string(),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("resumed"),
    }
}

#[test]
fn a_state_of_another_run_or_a_stateful_callback_is_refused_before_training() {
    let dir = TempDir::new("refused");
    run(3, Some(&dir.0), 1);
    let device = test_device().autodiff();
    // The data `run` trained on (the state binds their content).
    let _guard = seeded(&device, 1);
    let fixed = data(&device);
    let fit = |config: TrainConfig| {
        Trainer::new(config)
            .with_resume(&dir.0, Duration::ZERO)
            .fit(regressor(&device), fixed.clone())
    };
    let err = resume_error(fit(config(6).with_batch_size(16)));
    assert!(
        err.contains("another run") && err.contains("state.json"),
        "{err}"
    );
    let err = resume_error(fit(config(2)));
    assert!(
        err.contains("trained 3 epochs, more than the 2 asked"),
        "{err}"
    );
    let err = resume_error(fit(
        config(6).with_early_stopping(Some(EarlyStoppingConfig::new()))
    ));
    assert!(err.contains("callback"), "{err}");
    // A group chosen by id misses the resumed parameters, which keep their saved ids: a
    // learning-rate group and a weight-decay group alike.
    type WithGroup = fn(TrainConfig, ParamGroup) -> TrainConfig;
    let lr: WithGroup = |c, g| c.with_param_groups(vec![LrGroup::new(g, 0.0)]);
    let decay: WithGroup = |c, g| c.with_decay_groups(vec![DecayGroup::new(g, 0.1)]);
    for (kind, with_group) in [("learning-rate", lr), ("weight-decay", decay)] {
        let grouped = TempDir::new(kind);
        let fit_grouped = |epochs: usize| {
            let model = regressor(&device);
            let group = ParamGroup::ids_from_module(model.likelihood.clone());
            Trainer::new(with_group(config(epochs), group))
                .with_resume(&grouped.0, Duration::ZERO)
                .fit(model, fixed.clone())
        };
        fit_grouped(1).unwrap();
        let err = resume_error(fit_grouped(2));
        let want = format!("a {kind} group selects parameters by id");
        assert!(
            err.contains(&want) && err.contains("by module path"),
            "{err}"
        );
    }
    // A damaged state file is named.
    std::fs::write(dir.0.join("state.json"), "{").unwrap();
    let err = resume_error(fit(config(6)));
    assert!(err.contains("state.json"), "{err}");
    // A folder that is a file.
    let file = dir.0.join("state.json");
    let err = resume_error(
        Trainer::new(config(2))
            .with_resume(&file, Duration::ZERO)
            .fit(regressor(&device), fixed.clone()),
    );
    assert!(err.contains("state.json"), "{err}");
}

/// Another data set of the same size (one target changed) is refused: the state binds the
/// data's content, not only its size.
#[test]
fn a_state_is_not_continued_on_other_data_of_the_same_size() {
    let dir = TempDir::new("other-data");
    run(2, Some(&dir.0), 1);
    let device = test_device().autodiff();
    let _guard = seeded(&device, 1);
    let (x, y) = data(&device);
    let mut values = y.clone().into_data().try_into_vec::<f32>().unwrap();
    values[17] += 1.0;
    let y = Tensor::<2>::from_data(burn::tensor::TensorData::new(values, [96, 1]), &device);
    let err = resume_error(
        Trainer::new(config(4))
            .with_resume(&dir.0, Duration::ZERO)
            .fit(regressor(&device), (x, y)),
    );
    assert!(
        err.contains("another run") && err.contains("data "),
        "{err}"
    );
}

/// A flipped bit in any file of a saved state, or a file missing, is refused by name before
/// any training; an intact state still resumes.
#[test]
fn a_damaged_saved_state_is_refused_naming_the_file() {
    let dir = TempDir::new("damaged");
    run(2, Some(&dir.0), 1);
    let device = test_device().autodiff();
    let _guard = seeded(&device, 1);
    let fixed = data(&device);
    let fit = || {
        Trainer::new(config(4))
            .with_resume(&dir.0, Duration::ZERO)
            .fit(regressor(&device), fixed.clone())
    };
    for name in ["model-00002.bpk", "optim-00002.bpk", "state.json"] {
        let path = dir.0.join(name);
        let good = std::fs::read(&path).unwrap();
        // A bit in the middle of the file (the tensors' bytes, or a digit of the history).
        let mut bad = good.clone();
        let at = bad.len() / 2;
        bad[at] ^= 0x04;
        std::fs::write(&path, &bad).unwrap();
        let err = resume_error(fit());
        assert!(
            err.contains(name) && (err.contains("damaged") || err.contains("checksum")),
            "{name}: {err}"
        );
        // A file state.json lists but the folder lacks (without state.json itself there is
        // no saved state, and training starts afresh).
        if name != "state.json" {
            std::fs::remove_file(&path).unwrap();
            let err = resume_error(fit());
            assert!(err.contains(name), "{name} missing: {err}");
        }
        std::fs::write(&path, &good).unwrap();
    }
    drop(_guard);
    // Intact again: it resumes.
    let _ = run(4, Some(&dir.0), 1);
}
