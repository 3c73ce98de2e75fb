//! BNN+LV on MNIST with the amortised encoder (Depeweg 2019 §6.1): which part of the predictive
//! entropy, aleatoric `E_W H[y*|W]` or epistemic `I(y*; W)`, rises when the data change. Three
//! models (standard, labels 1 ↔ 7 swapped with probability ⅓, 75 % of classes 0, 6, 8, 9 removed),
//! each `[784 (+ z), 150, 150, 150, 10]` under black-box α = 1 with the encoder `[784 + 10, 100,
//! 2]`; the decomposition in closed form over classes ([`BnnLv::decompose_classes`]). The budget
//! fits a CPU and the report says so. Results: the book's *Latent-variable BNNs* page.

use crate::experiment;
use bnn_burn::host::{labels, to_vec};
use bnn_burn::latent::{EncoderConfig, LatentConfig};
use bnn_burn::likelihood::Categorical;
use bnn_burn::metrics::{auroc, mean};
use bnn_burn::nets::{BnnLv, BnnLvConfig, ClassDecomposition, MlpConfig};
use bnn_burn::objective::AlphaConfig;
use bnn_burn::predict::{Predict, PredictMode};
use bnn_burn::recipes::depeweg_weights;
use bnn_burn::train::{TrainConfig, Trainer};
use bnn_burn::training_device;
use bnn_datasets::{DataRoot, ImageSet, MnistFamily, Normalization, Split};
use burn::module::Module;
use burn::tensor::{Device, Tensor};
use std::error::Error;
use std::path::PathBuf;

mod harness;
mod report;
#[cfg(test)]
mod tests;

pub use report::*;

/// Classes of MNIST.
const CLASSES: usize = 10;

/// Test images per decomposition pass.
const CHUNK: usize = 500;

/// The classes whose labels the label-noise model swaps (the thesis: 1 ↔ 7, p = ⅓).
pub const SWAPPED: (u8, u8, f64) = (1, 7, 1.0 / 3.0);

/// The classes the subsampled model sees less of, and the fraction of their images removed.
pub const SUBSAMPLED: ([u8; 4], f64) = ([0, 6, 8, 9], 0.75);

/// Options of one `lv-mnist` run (the `bnn-bench lv-mnist` command line; its defaults are
/// [`LvMnistOptions::quick`]'s budget).
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct LvMnistOptions {
    /// Training epochs per model (the thesis: 150).
    #[arg(long, default_value_t = 3)]
    pub epochs: usize,
    /// Training images (the first ones), before any subsampling.
    #[arg(long, default_value_t = 10_000)]
    pub train_images: usize,
    /// Test images (the first ones).
    #[arg(long, default_value_t = 2_000)]
    pub test_images: usize,
    /// Joint draws of weights and latents per step (K of the energy).
    #[arg(long, default_value_t = 5)]
    pub train_samples: usize,
    /// Weight draws of the decomposition.
    #[arg(long, default_value_t = 10)]
    pub n_w: usize,
    /// Prior-latent draws per weight draw.
    #[arg(long, default_value_t = 10)]
    pub n_z: usize,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Folder holding mnist/ [default: BNN_DATA_DIR, then ../shared/data, then the cache].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The output folder, resuming (the finished models in `out/rows` of this budget and
    /// data) and worker processes (one model each at a time).
    #[serde(flatten)]
    #[command(flatten)]
    pub run: crate::runner::RunnerOptions,
}

impl LvMnistOptions {
    /// The quick budget: 10 000 training and 2 000 test images, 3 epochs, `K = 5`,
    /// 10 × 10 decomposition draws.
    pub fn quick(out: PathBuf) -> Self {
        Self {
            epochs: 3,
            train_images: 10_000,
            test_images: 2_000,
            train_samples: 5,
            n_w: 10,
            n_z: 10,
            seed: 0,
            data_dir: None,
            run: crate::runner::RunnerOptions::new(out),
        }
    }

    /// Checks every count before any work; the error names the flag.
    pub fn validate(&self) -> Result<(), String> {
        for (flag, v) in [
            ("--epochs", self.epochs),
            ("--train-images", self.train_images),
            ("--test-images", self.test_images),
            ("--train-samples", self.train_samples),
            ("--n-w", self.n_w),
            ("--n-z", self.n_z),
        ] {
            if v == 0 {
                return Err(format!("{flag} must be at least 1"));
            }
        }
        Ok(())
    }
}

/// One class's test images under one model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClassRow {
    /// The class.
    pub class: usize,
    /// Its test images.
    pub n: usize,
    /// Test error on them, %.
    pub error_pct: f64,
    /// Mean aleatoric entropy (nats).
    pub aleatoric: f64,
    /// Mean epistemic entropy (mutual information, nats).
    pub epistemic: f64,
}

/// The test images rotated by one angle, under the standard model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AngleRow {
    /// Counter-clockwise rotation, degrees.
    pub degrees: f64,
    /// Test error, %.
    pub error_pct: f64,
    /// Mean aleatoric entropy.
    pub aleatoric: f64,
    /// Mean epistemic entropy.
    pub epistemic: f64,
}

/// One model's results.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ScenarioResult {
    /// "standard", "label noise 1↔7" or "subsampled 0,6,8,9".
    pub scenario: String,
    /// Training images after the change.
    pub n_train: usize,
    /// Test error, %.
    pub error_pct: f64,
    /// Test log-likelihood per image (the mixture predictive).
    pub log_likelihood: f64,
    /// AUROC of the total entropy for telling misclassified test images (the thesis: 0.98).
    pub misclassification_auroc: f64,
    /// Per class.
    pub classes: Vec<ClassRow>,
    /// Per rotation angle (the standard model only).
    pub rotations: Vec<AngleRow>,
    /// Training seconds.
    pub train_seconds: f64,
}

/// The thesis's three expected patterns, measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Findings {
    /// Label noise: mean aleatoric rise (over the standard model) of classes 1 and 7, and of
    /// the other classes.
    pub noise_aleatoric_rise: (f64, f64),
    /// Subsampling: mean epistemic rise of classes 0, 6, 8, 9, and of the other classes.
    pub subsample_epistemic_rise: (f64, f64),
    /// Rotation: mean epistemic at 45°–315° and at 0°.
    pub rotation_epistemic: (f64, f64),
}

impl Findings {
    /// Whether each pattern holds: (label noise, subsampling, rotation).
    pub fn holds(&self) -> (bool, bool, bool) {
        (
            self.noise_aleatoric_rise.0 > self.noise_aleatoric_rise.1,
            self.subsample_epistemic_rise.0 > self.subsample_epistemic_rise.1,
            self.rotation_epistemic.0 > self.rotation_epistemic.1,
        )
    }
}

/// The three models' results and what they show.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LvMnistReport {
    /// The run's options.
    pub options: LvMnistOptions,
    /// Standard, label noise, subsampled.
    pub scenarios: Vec<ScenarioResult>,
    /// The patterns.
    pub findings: Findings,
    /// Backend.
    pub backend: String,
    /// Revision.
    pub revision: String,
    /// Wall seconds.
    pub wall_seconds: f64,
}

/// Loads MNIST from `options.data_dir` (or the default search) and runs [`run_on`]. A count
/// of images above what the split holds runs on the whole split, and the report says so.
///
/// # Errors
/// Bad options (before any work), missing files, an unwritable or held output folder, a failed
/// fit.
pub fn run(options: &LvMnistOptions) -> Result<LvMnistReport, Box<dyn Error>> {
    options.validate()?;
    let root = DataRoot::new(options.data_dir.as_deref());
    let train = MnistFamily::Mnist.load(Split::Train, &root)?;
    let test = MnistFamily::Mnist.load(Split::Test, &root)?;
    run_on(
        options,
        &train.first(options.train_images),
        &test.first(options.test_images),
    )
}

/// Trains the three models on `train` and scores them on `test` (a task of the bench's runner
/// each, [`crate::runner`]); writes `lv-mnist.md`, `lv-mnist.json` and `lv-mnist.svg` into
/// `options.out`. The report's image counts are those of `train` and `test`.
///
/// # Errors
/// As [`run`].
pub fn run_on(
    options: &LvMnistOptions,
    train: &ImageSet,
    test: &ImageSet,
) -> Result<LvMnistReport, Box<dyn Error>> {
    options.validate()?;
    let mut ran = options.clone();
    for (flag, asked, used) in [
        ("--train-images", &mut ran.train_images, train.len()),
        ("--test-images", &mut ran.test_images, test.len()),
    ] {
        if *asked != used {
            eprintln!("[lv-mnist] {flag} {asked}: the split holds {used}; all {used} are used");
            *asked = used;
        }
    }
    let (a, b, p) = SWAPPED;
    let (classes, drop) = SUBSAMPLED;
    let seed = |name: &str| experiment::derive(options.seed, &["lv-mnist", name], 0);
    let sets = vec![
        ("standard".to_string(), train.clone()),
        (
            format!("label noise {a}↔{b}"),
            train.with_swapped_labels(a, b, p, seed("noise"))?,
        ),
        (
            format!("subsampled {}", classes.map(|c| c.to_string()).join(",")),
            train.with_classes_subsampled(&classes, drop, seed("subsample"))?,
        ),
    ];
    options.run.check()?;
    let harness = harness::LvMnistHarness::new(&ran, sets, test);
    crate::runner::run(&harness, &options.run)?;
    harness
        .report
        .take()
        .ok_or_else(|| "lv-mnist: no report was written".into())
}

/// Trains one scenario's model on `set`, scores it on `test` (the standard one also on the
/// rotated test images) and names it `name`.
fn run_scenario(
    k: usize,
    name: &str,
    set: &ImageSet,
    test: &ImageSet,
    options: &LvMnistOptions,
) -> Result<ScenarioResult, Box<dyn Error>> {
    eprintln!(
        "[lv-mnist] {name}: training {} epochs on {} images",
        options.epochs,
        set.len()
    );
    let seed = experiment::derive(options.seed, &["lv-mnist", name], 0);
    let (net, train_seconds) = fit(set, options, seed)?;
    let device = training_device().inner();
    let angles: &[f64] = if k == 0 {
        &[45.0, 90.0, 135.0, 180.0, 225.0, 270.0, 315.0]
    } else {
        &[]
    };
    let r = score(&net, name, set.len(), test, angles, options, &device)?;
    Ok(ScenarioResult { train_seconds, ..r })
}

/// The MNIST normalisation of the thesis code, the images flattened to `[n, 784]`.
fn images(set: &ImageSet, indices: &[usize], device: &Device) -> Tensor<2> {
    let pixels = set.normalized(indices, &Normalization::mnist());
    Tensor::<1>::from_floats(pixels.as_slice(), device).reshape([indices.len(), set.image_size()])
}

/// Trains one model; returns it without autodiff and the training seconds.
fn fit(
    set: &ImageSet,
    options: &LvMnistOptions,
    seed: u64,
) -> Result<(BnnLv<Categorical>, f64), Box<dyn Error>> {
    let device = training_device();
    let n = set.len();
    let all: Vec<usize> = (0..n).collect();
    let x = images(set, &all, &device);
    let ys: Vec<usize> = set.labels.iter().map(|&l| l as usize).collect();
    let y = labels(&ys, &device);
    let build = |d: &Device| {
        BnnLvConfig::new(
            MlpConfig::new(set.image_size(), vec![150, 150, 150], CLASSES)
                .with_weights(depeweg_weights(1.0)),
        )
        .with_latent(LatentConfig::new().with_encoder(Some(EncoderConfig::new(CLASSES))))
        .init(Categorical, n, d)
    };
    let config = TrainConfig::new(options.epochs)
        .with_batch_size(250)
        .with_learning_rate(1e-3)
        .with_train_samples(options.train_samples)
        .with_seed(seed);
    let (net, report) = Trainer::new(config)
        .with_objective(AlphaConfig::new().with_alpha(1.0).init()?)
        .build_and_fit(build, (x, y))?;
    Ok((net.valid(), report.seconds))
}

/// Per-image predictions of a set: predicted class, log-likelihood of the label, and the
/// decomposition.
struct Scored {
    predicted: Vec<usize>,
    log_likelihood: Vec<f64>,
    parts: Vec<ClassDecomposition>,
}

fn score_set(
    net: &BnnLv<Categorical>,
    set: &ImageSet,
    options: &LvMnistOptions,
    device: &Device,
) -> Result<Scored, Box<dyn Error>> {
    let mut s = Scored {
        predicted: Vec::with_capacity(set.len()),
        log_likelihood: Vec::with_capacity(set.len()),
        parts: Vec::with_capacity(set.len()),
    };
    let indices: Vec<usize> = (0..set.len()).collect();
    for chunk in indices.chunks(CHUNK) {
        let x = images(set, chunk, device);
        let ys: Vec<usize> = chunk.iter().map(|&i| set.labels[i] as usize).collect();
        let pred = net.predict(x.clone(), PredictMode::Samples(options.n_w * options.n_z))?;
        let probs = to_vec(pred.mean());
        s.predicted.extend(probs.chunks(CLASSES).map(|p| {
            (0..CLASSES)
                .max_by(|&a, &b| p[a].total_cmp(&p[b]))
                .unwrap_or(0)
        }));
        s.log_likelihood
            .extend(to_vec(pred.log_prob(labels(&ys, device))));
        s.parts
            .extend(net.decompose_classes(x, options.n_w, options.n_z)?);
    }
    Ok(s)
}

fn error_pct(predicted: &[usize], set: &ImageSet, rows: &[usize]) -> f64 {
    let wrong = rows
        .iter()
        .filter(|&&i| predicted[i] != set.labels[i] as usize)
        .count();
    100.0 * wrong as f64 / rows.len().max(1) as f64
}

fn score(
    net: &BnnLv<Categorical>,
    name: &str,
    n_train: usize,
    test: &ImageSet,
    angles: &[f64],
    options: &LvMnistOptions,
    device: &Device,
) -> Result<ScenarioResult, Box<dyn Error>> {
    let s = score_set(net, test, options, device)?;
    let all: Vec<usize> = (0..test.len()).collect();
    let classes = (0..CLASSES)
        .map(|c| {
            let rows: Vec<usize> = all
                .iter()
                .copied()
                .filter(|&i| test.labels[i] as usize == c)
                .collect();
            ClassRow {
                class: c,
                n: rows.len(),
                error_pct: error_pct(&s.predicted, test, &rows),
                aleatoric: mean(
                    &rows
                        .iter()
                        .map(|&i| s.parts[i].aleatoric)
                        .collect::<Vec<_>>(),
                ),
                epistemic: mean(
                    &rows
                        .iter()
                        .map(|&i| s.parts[i].epistemic)
                        .collect::<Vec<_>>(),
                ),
            }
        })
        .collect();
    let wrong: Vec<f64> = all
        .iter()
        .filter(|&&i| s.predicted[i] != test.labels[i] as usize)
        .map(|&i| s.parts[i].total)
        .collect();
    let right: Vec<f64> = all
        .iter()
        .filter(|&&i| s.predicted[i] == test.labels[i] as usize)
        .map(|&i| s.parts[i].total)
        .collect();
    let parts_mean = |s: &Scored, f: fn(&ClassDecomposition) -> f64| {
        mean(&s.parts.iter().map(f).collect::<Vec<_>>())
    };
    let mut rotations = Vec::new();
    if !angles.is_empty() {
        rotations.push(AngleRow {
            degrees: 0.0,
            error_pct: error_pct(&s.predicted, test, &all),
            aleatoric: parts_mean(&s, |p| p.aleatoric),
            epistemic: parts_mean(&s, |p| p.epistemic),
        });
    }
    for &degrees in angles {
        let rotated = test.rotated(degrees);
        let r = score_set(net, &rotated, options, device)?;
        rotations.push(AngleRow {
            degrees,
            error_pct: error_pct(&r.predicted, &rotated, &all),
            aleatoric: parts_mean(&r, |p| p.aleatoric),
            epistemic: parts_mean(&r, |p| p.epistemic),
        });
    }
    let result = ScenarioResult {
        scenario: name.to_string(),
        n_train,
        error_pct: error_pct(&s.predicted, test, &all),
        log_likelihood: mean(&s.log_likelihood),
        misclassification_auroc: if wrong.is_empty() || right.is_empty() {
            f64::NAN
        } else {
            auroc(&right, &wrong)
        },
        classes,
        rotations,
        train_seconds: 0.0,
    };
    for (field, v) in [
        ("test error", result.error_pct),
        ("test log-likelihood", result.log_likelihood),
    ] {
        experiment::check_finite(name, field, v)?;
    }
    for c in &result.classes {
        experiment::check_finite(name, "aleatoric entropy", c.aleatoric)?;
        experiment::check_finite(name, "epistemic entropy", c.epistemic)?;
    }
    Ok(result)
}
