//! `bnn-bench perf-laplace`: our Laplace beside laplace-torch (Daxberger et al. 2021) on one
//! trained MAP LeNet5 (MNIST), in one run. The MAP net is trained here, its weights and the
//! normalised images are written for the peer (`xcheck/laplace_torch_mnist.py`), and both fit
//! a last-layer (full covariance) and a KFAC Laplace with `λ` by marginal likelihood, then
//! predict the MNIST test and Fashion-MNIST test images by the GLM predictive with the probit
//! approximation. Both sides' probabilities are scored by the same functions here (error, NLL,
//! ECE, OOD AUROC of the predictive entropy); the time ratio is ours over the peer's fit +
//! predict seconds, measured in this run.

use crate::mnist::{Arch, ECE_BINS, MnistData, TrainSet, conv_shape};
use bnn_burn::batch::Batch;
use bnn_burn::host::to_vec;
use bnn_burn::layers::{AnyLayerParams, LayerInfo, LayerKind, LayerVisitor};
use bnn_burn::likelihood::Categorical;
use bnn_burn::metrics::{accuracy_of, auroc, ece_of, entropies, nll, predicted_labels};
use bnn_burn::nets::{Bnn, ConvBody};
use bnn_burn::posterior::WeightPosterior;
use bnn_burn::posthoc::{LaplaceConfig, LastLayerLaplace, NetworkLaplace, NetworkLaplaceConfig};
use bnn_burn::predict::{ClassPrediction, Predict, PredictMode};
use bnn_burn::train::TrainConfig;
use bnn_datasets::{DataRoot, ImageSet, Normalization};
use burn::module::Module;
use burn::tensor::{Int, Tensor};
use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Images per prediction call.
const CHUNK: usize = 500;

/// Settings of one run.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct LaplacePeerOptions {
    /// Output folder for perf-laplace.md and perf-laplace.json.
    #[arg(long, default_value = "runs/perf-laplace")]
    pub out: PathBuf,
    /// Epochs of the MAP LeNet5 (Adam 10⁻³, batch 100).
    #[arg(long, default_value_t = 5)]
    pub epochs: usize,
    /// The seed, and `quick`: 10 000 training and 2 000 test and OOD images.
    #[serde(flatten)]
    #[command(flatten)]
    pub exp: crate::runner::ExperimentArgs,
    /// Folder holding mnist/ and fashion-mnist/ [default: BNN_DATA_DIR, then ../shared/data,
    /// then the cache].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Python with torch and laplace-torch [default: $HOME/.venvs/peer/bin/python].
    #[arg(long)]
    pub peer_python: Option<PathBuf>,
    /// The peer program [default: xcheck/laplace_torch_mnist.py in the workspace].
    #[arg(long)]
    pub peer_script: Option<PathBuf>,
    /// Predict only the first N test and OOD images on both sides [default: all]
    /// (laplace-torch's GLM predictive over every layer builds each image's full Jacobian).
    #[arg(long)]
    pub test_images: Option<usize>,
    /// Threads given to the peer (match the cores burn uses).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
}

/// One side's scores and seconds for one Laplace variant.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SideScores {
    /// Test error (%).
    pub error_pct: f64,
    /// Mean test NLL (nats).
    pub nll: f64,
    /// Expected calibration error ([`ECE_BINS`] bins).
    pub ece: f64,
    /// AUROC of the predictive entropy, MNIST test against Fashion-MNIST test.
    pub auroc_entropy: f64,
    /// The prior precision `λ` chosen.
    pub prior_precision: f64,
    /// Seconds of the fit (curvature and `λ`).
    pub fit_seconds: f64,
    /// Seconds of the predictions of both test sets.
    pub predict_seconds: f64,
}

/// A Laplace variant, both sides.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LaplacePeerRow {
    /// "last layer" or "KFAC".
    pub variant: String,
    /// This library.
    pub ours: SideScores,
    /// laplace-torch.
    pub peer: SideScores,
    /// Ours over the peer's fit + predict seconds.
    pub time_ratio: f64,
    /// Largest `|p_ours − p_peer|` over every test probability.
    pub max_prob_diff: f64,
}

fn validate(o: &LaplacePeerOptions) -> Result<(PathBuf, PathBuf), Box<dyn Error>> {
    if o.epochs == 0 {
        return Err("--epochs must be at least 1".into());
    }
    if o.test_images == Some(0) {
        return Err("--test-images must be at least 1".into());
    }
    if o.threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    let python = o
        .peer_python
        .clone()
        .or_else(super::args::default_peer_python)
        .ok_or("--peer-python: no default without HOME; give the peer's Python")?;
    if !python.is_file() {
        return Err(format!(
            "--peer-python: {} does not exist (set-up: python3 -m venv ~/.venvs/peer && \
             ~/.venvs/peer/bin/pip install torch laplace-torch)",
            python.display()
        )
        .into());
    }
    let script = o.peer_script.clone().unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../xcheck/laplace_torch_mnist.py")
    });
    if !script.is_file() {
        return Err(format!("--peer-script: {} does not exist", script.display()).into());
    }
    Ok((python, script))
}

/// Writes each layer of a point network for the peer: a manifest line per layer and its
/// weights, then bias, as little-endian f32 in `weights.f32` (torch's layouts: a dense weight
/// transposed to `[d_out, d_in]`, a kernel as `[C_out, C_in, kH, kW]`).
struct Export {
    manifest: Vec<serde_json::Value>,
    values: Vec<f32>,
}

impl LayerVisitor for Export {
    fn visit<const DW: usize>(&mut self, layer: LayerInfo, params: &AnyLayerParams<DW>) {
        let draw = params.mean_draw();
        let shape = params.weight.shape();
        let weight = to_vec(draw.weight);
        let bias = draw.bias.map(to_vec);
        let kind = match &layer.kind {
            LayerKind::Dense => {
                let (d_in, d_out) = (shape[0], shape[1]);
                for o in 0..d_out {
                    self.values
                        .extend((0..d_in).map(|i| weight[i * d_out + o] as f32));
                }
                serde_json::json!({"kind": "dense", "shape": [d_out, d_in]})
            }
            LayerKind::Conv2d(g) => {
                self.values.extend(weight.iter().map(|&v| v as f32));
                serde_json::json!({"kind": "conv", "shape": shape.to_vec(),
                    "stride": g.stride, "padding": g.padding, "dilation": g.dilation})
            }
        };
        if let Some(b) = &bias {
            self.values.extend(b.iter().map(|&v| v as f32));
        }
        let mut entry = kind;
        entry["bias"] = serde_json::json!(bias.is_some());
        self.manifest.push(entry);
    }
}

fn write_f32(path: &Path, values: &[f32]) -> Result<(), String> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(path, bytes).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

fn read_f32(path: &Path, len: usize) -> Result<Vec<f64>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    if bytes.len() != 4 * len {
        return Err(format!(
            "{}: {} bytes where {len} f32 values were expected",
            path.display(),
            bytes.len()
        ));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
        .collect())
}

/// Writes the net, the three image sets (normalised as the `mnist` harness normalises them)
/// and the labels into `dir`, with `manifest.json`.
fn export(
    net: &Bnn<ConvBody, Categorical>,
    data: &MnistData,
    dir: &Path,
) -> Result<(), Box<dyn Error>> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut layers = Export {
        manifest: Vec::new(),
        values: Vec::new(),
    };
    net.visit_layers(&mut layers);
    write_f32(&dir.join("weights.f32"), &layers.values)?;
    let mut sets = serde_json::Map::new();
    for (name, set, norm) in [
        ("train", &data.train, data.family.normalization()),
        ("test", &data.test, data.family.normalization()),
        ("ood", &data.ood, data.family.ood_normalization()),
    ] {
        let all: Vec<usize> = (0..set.len()).collect();
        write_f32(
            &dir.join(format!("{name}-images.f32")),
            &set.normalized(&all, &norm),
        )?;
        std::fs::write(dir.join(format!("{name}-labels.u8")), &set.labels)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        sets.insert(
            name.to_string(),
            serde_json::json!({"n": set.len(), "shape": set.shape()}),
        );
    }
    let manifest = serde_json::json!({
        "layers": layers.manifest,
        "activation": "relu",
        "classes": data.n_classes(),
        "sets": sets,
    });
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_string_pretty(&manifest)?,
    )
    .map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(())
}

/// Probabilities `[n·C]` of `model` on `set`, in chunks.
fn probabilities(
    model: &dyn Predict<Input = Tensor<4>, Prediction = ClassPrediction>,
    set: &ImageSet,
    norm: &Normalization,
) -> Result<Vec<f64>, Box<dyn Error>> {
    let device = bnn_burn::training_device().inner();
    let all: Vec<usize> = (0..set.len()).collect();
    let mut probs = Vec::with_capacity(set.len() * set.n_classes);
    for chunk in all.chunks(CHUNK) {
        let images = set.batch(chunk, norm, &device).images;
        probs.extend(to_vec(model.predict(images, PredictMode::Moments)?.mean()));
    }
    Ok(probs)
}

/// One side's scores from its test and OOD probabilities (error, NLL, ECE, OOD AUROC), with
/// its `(λ, fit seconds, predict seconds)`.
fn score(
    (test, ood): (&[f64], &[f64]),
    labels: &[usize],
    classes: usize,
    (prior_precision, fit_seconds, predict_seconds): (f64, f64, f64),
) -> SideScores {
    let predicted = predicted_labels(test, classes);
    let log_lik: Vec<f64> = labels
        .iter()
        .enumerate()
        .map(|(i, &y)| test[i * classes + y].max(f64::MIN_POSITIVE).ln())
        .collect();
    SideScores {
        error_pct: 100.0 * (1.0 - accuracy_of(&predicted, labels)),
        nll: nll(&log_lik),
        ece: ece_of(test, &predicted, classes, labels, ECE_BINS),
        auroc_entropy: auroc(&entropies(test, classes), &entropies(ood, classes)),
        prior_precision,
        fit_seconds,
        predict_seconds,
    }
}

/// The peer's output line: `{"fit_seconds", "predict_seconds", "prior_precision"}`.
#[derive(serde::Deserialize)]
struct PeerLine {
    fit_seconds: f64,
    predict_seconds: f64,
    prior_precision: f64,
}

fn run_peer(
    (python, script): (&Path, &Path),
    dir: &Path,
    variant: &str,
    threads: usize,
) -> Result<PeerLine, Box<dyn Error>> {
    let args = [
        dir.display().to_string(),
        variant.to_string(),
        threads.to_string(),
    ];
    let text = super::run_peer_program(python, script, &args)?;
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| format!("no JSON line in the output of {}: {text}", script.display()))?;
    Ok(serde_json::from_str(line)
        .map_err(|e| format!("{}: a bad JSON line '{line}': {e}", script.display()))?)
}

/// Trains the MAP net, fits both variants here and in the peer, writes the report.
///
/// # Errors
/// Bad options or a missing peer (before any work), missing data, an unwritable `--out`, a
/// failing fit or peer.
pub fn run(o: &LaplacePeerOptions) -> Result<Vec<LaplacePeerRow>, Box<dyn Error>> {
    let (python, script) = validate(o)?;
    let folder = crate::runner::OutFolder::open(&o.out, "--out")?;
    let start = Instant::now();
    let root = DataRoot::new(o.data_dir.as_deref());
    let mut data = MnistData::load(&root, o.exp.quick, TrainSet::Mnist)?;
    if let Some(n) = o.test_images {
        data.test = data.test.first(n.min(data.test.len()));
        data.ood = data.ood.first(n.min(data.ood.len()));
    }
    let classes = data.n_classes();
    let device = bnn_burn::training_device();
    let norm = data.family.normalization();
    let all: Vec<usize> = (0..data.train.len()).collect();
    let batch = data.train.batch(&all, &norm, &device);
    let methods =
        crate::catalogue::available(crate::catalogue::Protocol::Mnist, &crate::mnist::SETTINGS);
    let map = methods
        .iter()
        .find(|m| m.name == "MAP")
        .ok_or("the catalogue has no MAP entry")?;
    let config = TrainConfig::new(o.epochs)
        .with_batch_size(crate::mnist::BATCH_SIZE)
        .with_learning_rate(1e-3)
        .with_seed(o.exp.seed)
        .with_progress(true);
    let shape =
        conv_shape(Arch::LeNet5, data.train.shape(), classes).with_weights(map.weights.clone());
    eprintln!(
        "[perf-laplace] training the MAP LeNet5 for {} epochs on {} images",
        o.epochs,
        data.train.len()
    );
    let (net, _) = map.trainer(&config)?.build_and_fit(
        |d| shape.init(Categorical, d),
        (batch.images.clone(), batch.labels.clone()),
    )?;
    let net = net.valid();
    let scratch = folder.join("peer-inputs");
    export(&net, &data, &scratch)?;
    let x = Batch::plain(batch.images.inner());
    let y: Tensor<1, Int> = batch.labels.inner();
    let labels: Vec<usize> = data.test.labels.iter().map(|&l| usize::from(l)).collect();
    let ood_norm = data.family.ood_normalization();
    let mut rows = Vec::new();
    for variant in ["last-layer", "kfac"] {
        eprintln!("[perf-laplace] {variant}: fitting here");
        let t0 = Instant::now();
        let (model, lambda): (
            Box<dyn Predict<Input = Tensor<4>, Prediction = ClassPrediction>>,
            f64,
        ) = match variant {
            "last-layer" => {
                let fit = LastLayerLaplace::fit(
                    net.clone(),
                    x.clone(),
                    y.clone(),
                    &LaplaceConfig::new(),
                )?;
                let l = fit.prior_precision();
                (Box::new(fit), l)
            }
            _ => {
                let fit = NetworkLaplace::fit(
                    net.clone(),
                    x.clone(),
                    y.clone(),
                    &NetworkLaplaceConfig::new(),
                )?;
                let l = fit.prior_precision();
                (Box::new(fit), l)
            }
        };
        let fit_seconds = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let test = probabilities(model.as_ref(), &data.test, &norm)?;
        let ood = probabilities(model.as_ref(), &data.ood, &ood_norm)?;
        let predict_seconds = t1.elapsed().as_secs_f64();
        drop(model);
        let ours = score(
            (&test, &ood),
            &labels,
            classes,
            (lambda, fit_seconds, predict_seconds),
        );
        eprintln!("[perf-laplace] {variant}: laplace-torch");
        let line = run_peer((&python, &script), &scratch, variant, o.threads)?;
        let peer_test = read_f32(&scratch.join("probs-test.f32"), test.len())?;
        let peer_ood = read_f32(&scratch.join("probs-ood.f32"), ood.len())?;
        let peer = score(
            (&peer_test, &peer_ood),
            &labels,
            classes,
            (line.prior_precision, line.fit_seconds, line.predict_seconds),
        );
        let max_prob_diff = test
            .iter()
            .chain(&ood)
            .zip(peer_test.iter().chain(&peer_ood))
            .fold(0f64, |m, (a, b)| m.max((a - b).abs()));
        let row = LaplacePeerRow {
            variant: variant.to_string(),
            time_ratio: (ours.fit_seconds + ours.predict_seconds)
                / (peer.fit_seconds + peer.predict_seconds),
            ours,
            peer,
            max_prob_diff,
        };
        eprintln!(
            "[perf-laplace] {variant}: ours {:.1} + {:.1} s, laplace-torch {:.1} + {:.1} s: \
             {:.2}×; NLL {:.4} vs {:.4}",
            row.ours.fit_seconds,
            row.ours.predict_seconds,
            row.peer.fit_seconds,
            row.peer.predict_seconds,
            row.time_ratio,
            row.ours.nll,
            row.peer.nll
        );
        rows.push(row);
    }
    std::fs::remove_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    write_report(
        &folder,
        o,
        &rows,
        (data.train.len(), data.test.len()),
        start.elapsed().as_secs_f64(),
    )?;
    Ok(rows)
}

fn write_report(
    folder: &crate::runner::OutFolder,
    o: &LaplacePeerOptions,
    rows: &[LaplacePeerRow],
    (n_train, n_test): (usize, usize),
    wall: f64,
) -> Result<(), Box<dyn Error>> {
    let mut md = format!(
        "# Laplace beside laplace-torch on one MAP LeNet5\n\n\
         The strided LeNet5 trained by MAP for {e} epochs on {n_train} MNIST images (seed \
         {seed}, backend `{backend}`), then a Laplace fitted to it here and by laplace-torch \
         ({t} threads): `λ` by marginal likelihood, the GLM predictive with the probit \
         approximation on {n_test} MNIST and as many Fashion-MNIST test images. Both sides' probabilities \
         scored by the same code; time ratio = our fit + predict seconds over the peer's, in \
         this run.\n\n\
         | variant | side | error % | NLL | ECE | AUROC(H) | λ | fit (s) | predict (s) | ratio | \
         largest prob. difference |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        e = o.epochs,
        seed = o.exp.seed,
        backend = bnn_burn::backend_name(),
        t = o.threads,
    );
    for r in rows {
        for (side, s) in [("bnn-burn", &r.ours), ("laplace-torch", &r.peer)] {
            let (ratio, diff) = match side {
                "bnn-burn" => (
                    format!("{:.2}×", r.time_ratio),
                    format!("{:.1e}", r.max_prob_diff),
                ),
                _ => (String::new(), String::new()),
            };
            md += &format!(
                "| {} | {side} | {:.2} | {:.4} | {:.4} | {:.3} | {:.3} | {:.1} | {:.1} | {ratio} \
                 | {diff} |\n",
                r.variant,
                s.error_pct,
                s.nll,
                s.ece,
                s.auroc_entropy,
                s.prior_precision,
                s.fit_seconds,
                s.predict_seconds,
            );
        }
    }
    folder.write("perf-laplace.md", md.as_bytes())?;
    let record = crate::experiment::record("perf-laplace", o, wall, &rows, serde_json::json!({}));
    folder.write_record("perf-laplace.json", &record)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> LaplacePeerOptions {
        LaplacePeerOptions {
            out: PathBuf::from("unused"),
            epochs: 1,
            exp: crate::runner::ExperimentArgs {
                seed: 0,
                quick: true,
            },
            data_dir: None,
            peer_python: Some(PathBuf::from("/nonexistent/python")),
            peer_script: None,
            test_images: None,
            threads: 2,
        }
    }

    /// Bad options and a missing peer are refused before any work, naming the flag.
    #[test]
    fn validate_names_the_flag() {
        let err = |o: LaplacePeerOptions| validate(&o).unwrap_err().to_string();
        assert!(err(options()).contains("--peer-python"));
        assert!(
            err(LaplacePeerOptions {
                epochs: 0,
                ..options()
            })
            .contains("--epochs")
        );
        assert!(
            err(LaplacePeerOptions {
                test_images: Some(0),
                ..options()
            })
            .contains("--test-images")
        );
        let this = std::env::current_exe().unwrap();
        let msg = err(LaplacePeerOptions {
            peer_python: Some(this),
            peer_script: Some(PathBuf::from("/nonexistent/peer.py")),
            ..options()
        });
        assert!(msg.contains("--peer-script"), "{msg}");
    }

    /// The scores of a hand-computed case: two test rows (one wrong), two OOD rows.
    #[test]
    fn score_by_hand() {
        let test = [0.9, 0.1, 0.4, 0.6];
        let ood = [0.5, 0.5, 0.5, 0.5];
        let s = score((&test, &ood), &[0, 0], 2, (1.0, 0.0, 0.0));
        let (error, nll, ece, auroc) = (s.error_pct, s.nll, s.ece, s.auroc_entropy);
        assert!((error - 50.0).abs() < 1e-12);
        assert!((nll - -(0.9f64.ln() + 0.4f64.ln()) / 2.0).abs() < 1e-12);
        assert!(ece > 0.0 && ece < 1.0);
        // Every OOD row is at the largest entropy.
        assert!((auroc - 1.0).abs() < 1e-12);
    }
}
