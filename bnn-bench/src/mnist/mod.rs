//! `bnn-bench mnist`: train on MNIST, test on MNIST (in-distribution) and on out-of-distribution
//! sets (the Fashion-MNIST test split, uniform noise, pixel-inverted MNIST, MNIST rotated in 45°
//! steps), for every method as an MLP 784-400-400-10 and as the strided LeNet5 of Haußmann
//! (2021, Table 3.4). Reports error %, NLL, ECE, Brier, the OOD AUROC of predictive entropy and
//! of mutual information per OOD set, the entropy-ECDF area of Haußmann §5 (Table 5.2), the
//! misclassification-detection AUROC of entropy, and error and entropy per rotation angle, with
//! reliability diagrams, entropy histograms and the rotation curves.
use crate::catalogue::{ClassLikelihood, Method, PostHoc, Protocol, Settings, TrainObjective};
use crate::experiment;
use bnn_burn::host::to_vec;
use bnn_burn::likelihood::{Categorical, Likelihood, MultiLabelProbit};
use bnn_burn::metrics::{
    ReliabilityBin, accuracy_of, auroc, brier, class_errors_of, ece_of, entropy_ecdf_area, nll,
    reliability_curve_of,
};
use bnn_burn::nets::{Bnn, Body, ConvNetConfig, MlpConfig};
use bnn_burn::objective::{PacComplexity, PacKl};
use bnn_burn::posthoc::{
    Ensemble, LaplaceConfig, LastLayerLaplace, NetworkLaplace, NetworkLaplaceConfig, Swag,
    SwagConfig,
};
use bnn_burn::predict::{ClassPrediction, Predict, PredictError, PredictMode};
use bnn_burn::train::{Model, TrainConfig, Trainer};
use bnn_burn::training_device;
use bnn_datasets::cifar::Cifar5;
use bnn_datasets::{DataRoot, ImageSet, MnistFamily, Normalization, Split};
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor};
use std::error::Error;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

mod data;
mod fit;
mod harness;
mod plots;
mod report;
#[cfg(test)]
mod tests;

pub use data::*;
pub use fit::*;

pub use harness::MnistTask;

use plots::*;
pub use report::*;

/// Bins of the reliability diagrams and the ECE (Guo et al. 2017).
pub const ECE_BINS: usize = 15;

/// Bins of the entropy histograms on `[0, ln 10]`.
pub const ENTROPY_BINS: usize = 40;

/// Images per prediction chunk (bounds memory at `S × chunk × activations`).
const CHUNK: usize = 500;

/// Activations a prediction chunk may hold of its widest layer (`S × images × width`, 1.6 GB
/// of `f32`): a chunk of [`CHUNK`] images shrinks to stay below it. Every architecture keeps
/// [`CHUNK`] at the protocol's 20 samples (the CIFAR LeNet5's 37 632 values per image the
/// widest), so such runs draw as they always did.
const PREDICT_ELEMENTS: usize = 400_000_000;

/// The convolutional net of `arch` on `[c, h, w]` images of `classes` classes: the thesis's
/// strided LeNet5 (20/50/500 on grey images, 192/192/1000 on colour), the pooled ones
/// (20/50/500 on either), Table 5.3's 96/96 on either.
pub(crate) fn conv_shape(arch: Arch, [c, h, w]: [usize; 3], classes: usize) -> ConvNetConfig {
    match (arch, c) {
        (Arch::Conv96, _) => ConvNetConfig::conv96([c, h, w], classes),
        (Arch::LeNet5Pooled, _) => ConvNetConfig::lenet5_pooled([c, h, w], classes),
        (Arch::LeNet5Sensoy, _) => ConvNetConfig::lenet5_sensoy([c, h, w], classes),
        (_, 1) => ConvNetConfig::lenet5([c, h, w], classes),
        _ => ConvNetConfig::lenet5_cifar([c, h, w], classes),
    }
}

/// The most values one image holds in any layer of `arch` on `[c, h, w]` images.
fn widest_activation(arch: Arch, [c, h, w]: [usize; 3]) -> usize {
    match arch {
        Arch::Mlp => (c * h * w).max(400),
        _ => conv_shape(arch, [c, h, w], 10)
            .widest_activation()
            .unwrap_or(c * h * w),
    }
}

/// Images per prediction chunk for `samples` draws of `arch`: [`CHUNK`], fewer where the
/// draws' activations would pass [`PREDICT_ELEMENTS`].
fn images_per_chunk(samples: usize, widest: usize) -> usize {
    CHUNK
        .min(PREDICT_ELEMENTS / samples.saturating_mul(widest).max(1))
        .max(1)
}

/// Refuses a sample count whose draws of one image's widest layer alone pass
/// [`PREDICT_ELEMENTS`] (a prediction holds every draw at once), before any work.
fn check_prediction_memory(samples: usize, widest: usize) -> Result<(), String> {
    let most = PREDICT_ELEMENTS / widest.max(1);
    if samples > most {
        return Err(format!(
            "--samples {samples}: a prediction holds every draw of an image's activations at \
             once ({widest} per draw here), and more than {most} draws would pass {} MB; give \
             at most {most}",
            PREDICT_ELEMENTS * 4 / 1_000_000
        ));
    }
    Ok(())
}

/// The network shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Arch {
    /// MLP 784-400-400-10 (Blundell et al. 2015; Farquhar 2022 §4.3).
    Mlp,
    /// Strided LeNet5: conv 20 and 50, 5×5, stride 2; dense 500 (Haußmann 2021 Table 3.4).
    LeNet5,
    /// Pooled LeNet5: conv 20 and 50, 5×5, stride 1, each followed by a 2×2 max pooling;
    /// dense 500 (Louizos & Welling 2017; Sensoy et al. 2018's EDL code without its padding
    /// and dropout).
    LeNet5Pooled,
    /// Sensoy et al. (2018)'s EDL LeNet5: the pooled one with `SAME` padding (7×7×50 = 2450 →
    /// 500) and dropout of half the 500 units while training
    /// ([`ConvNetConfig::lenet5_sensoy`]).
    LeNet5Sensoy,
    /// Haußmann (2021) Table 5.3's net: two 5×5 stride-2 convolutions of 96 channels and the
    /// linear read-out (1536 → 10; [`ConvNetConfig::conv96`]).
    Conv96,
}

impl Arch {
    /// The default architectures, in table order (the pooled LeNet5 runs when asked for).
    pub const ALL: [Arch; 2] = [Arch::Mlp, Arch::LeNet5];

    /// Name in tables and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Mlp => "MLP 784-400-400-10",
            Arch::LeNet5 => "LeNet5 (strided)",
            Arch::LeNet5Pooled => "LeNet5 (max pooling)",
            Arch::LeNet5Sensoy => "LeNet5 (Sensoy: padded, pooled, dropout)",
            Arch::Conv96 => "Conv 96/96 (strided, Table 5.3)",
        }
    }
}

impl FromStr for Arch {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "mlp" => Ok(Arch::Mlp),
            "lenet5" | "lenet" => Ok(Arch::LeNet5),
            "lenet5-pool" | "lenet5-pooled" => Ok(Arch::LeNet5Pooled),
            "lenet5-sensoy" => Ok(Arch::LeNet5Sensoy),
            "conv96" => Ok(Arch::Conv96),
            _ => Err(format!(
                "unknown architecture {s:?}; known: mlp, lenet5, lenet5-pool, lenet5-sensoy, \
                 conv96"
            )),
        }
    }
}

/// Every method the catalogue runs here by default, in table order ([`crate::catalogue::ENTRIES`]),
/// under the protocol's [`SETTINGS`]: MAP with a N(0, 1) prior (the deterministic net); MC
/// dropout with p = 0.2 on every layer input and Gal's length-scale 10⁻²; mean-field with local
/// reparameterisation (MFVI-LRT) and radial with N(0, 1) priors and ρ₀ = −5; and the
/// sampling-free methods of Haußmann (2021) Table 3.2 and ch. 4 with its prior precision
/// α = 100, trained and predicted by moment propagation: VBP (softmax, Taylor loss, 100 logit
/// draws for the prediction), DVI (the same with exact ReLU moments) and CLT (multi-label
/// probit, closed-form predictive); DVI as Table 5.2 trains it (DVI-sampled: the sampled
/// softmax over 20 draws, α = [`TABLE_5_2_DVI_PRIOR_PRECISION`]); then EDL, BEDL and BEDL-PAC.
pub fn methods() -> Vec<Method> {
    crate::catalogue::defaults(Protocol::Mnist, &SETTINGS)
}

/// The protocol's values of the catalogue's task settings.
pub const SETTINGS: Settings = Settings {
    drop_rate: 0.2,
    length_scale: 1e-2,
    moment_alpha: MOMENT_PRIOR_PRECISION,
    sampled_dvi_alpha: TABLE_5_2_DVI_PRIOR_PRECISION,
};

/// The prior precision α of the moment methods on MNIST (Haußmann 2021 §3.5: α = 100 for every
/// classification method).
pub const MOMENT_PRIOR_PRECISION: f64 = 100.0;

/// The prior precision α of Table 5.2's DVI (Haußmann 2021 §5.8: the thesis code's `DVINet`
/// defaults to 10, where Table 3.2's methods have 100).
pub const TABLE_5_2_DVI_PRIOR_PRECISION: f64 = 10.0;

/// The training minibatch size of the protocol (Haußmann 2021 §3.5 and Table 5.2).
pub const BATCH_SIZE: usize = 100;

/// Options of one `mnist` run (the `bnn-bench mnist` command line).
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct MnistOptions {
    /// Methods: any of the catalogue's, by name; repeatable [default: MAP, "MC dropout",
    /// MFVI-LRT, Radial, VBP, DVI, CLT, DVI-sampled, EDL, BEDL, BEDL-PAC, "Deep ensemble", SWAG,
    /// MultiSWAG, "Laplace (last layer)", "Laplace (KFAC)"]. DVI-sampled is
    /// Table 5.2's DVI: the sampled softmax over 20 draws, prior precision 10.
    #[arg(long = "method")]
    pub methods: Vec<String>,
    /// Architectures (mlp, lenet5; lenet5-pool: the max-pooling LeNet5 without padding;
    /// lenet5-sensoy: the net of Sensoy et al.'s EDL code, padded, pooled, dropout 0.5 on the
    /// 500 units; conv96: Haußmann 2021 Table 5.3's two 96-channel stride-2 convolutions and
    /// the read-out); repeatable [default: mlp and lenet5; lenet5 for cifar5].
    #[arg(long = "arch")]
    pub archs: Vec<Arch>,
    /// Training epochs [default: 10; 2 with --quick].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// The seed, and `quick`: the small budget (see the command's help).
    #[serde(flatten)]
    #[command(flatten)]
    pub exp: crate::runner::ExperimentArgs,
    /// Posterior samples per prediction.
    #[arg(long = "samples", default_value_t = 20)]
    pub prediction_samples: usize,
    /// Training minibatch size (the thesis's: 100; Sensoy et al.'s EDL code: 1000).
    #[arg(long, default_value_t = BATCH_SIZE)]
    pub batch_size: usize,
    /// Folder holding mnist/, fashion-mnist/ (and cifar-10-batches-bin/ for cifar5)
    /// [default: BNN_DATA_DIR, then ../shared/data, then the cache].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The set trained and tested on: mnist or fashion-mnist (the other is the first OOD set),
    /// or cifar5 (CIFAR-10's classes 0–4; OOD: its classes 5–9; the CIFAR LeNet5 192/192/1000
    /// only; the binary files cifar-10-batches-bin/{data_batch_1..5, test_batch}.bin under
    /// --data-dir, from <https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz>).
    #[arg(long = "train-set", default_value = "mnist", value_parser = parse_family)]
    pub family: TrainSet,
    /// The output folder, resuming and worker processes. With `resume`, the finished rows in
    /// `out/rows` computed under the same seed, epochs, prediction samples, batch size and data
    /// are reused (and a row's saved training state continued); rows there of other
    /// architectures or methods are kept in the new records. Workers train one (architecture,
    /// method) row at a time ([`crate::runner::allow_worker_processes`]).
    #[serde(flatten)]
    #[command(flatten)]
    pub run: crate::runner::RunnerOptions,
}

impl MnistOptions {
    fn epochs(&self) -> usize {
        self.epochs.unwrap_or(if self.exp.quick { 2 } else { 10 })
    }
}

/// What one (architecture, method) run measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct MnistResult {
    /// Architecture.
    pub arch: Arch,
    /// Method.
    pub method: String,
    /// Epochs trained.
    pub epochs: usize,
    /// Seed of this run.
    pub seed: u64,
    /// Test error on the training family's test images (MNIST unless `--train-set`), %.
    pub error_pct: f64,
    /// Test error of each true class, % (`None`: no test image of the class); a class the
    /// net never predicts shows 100 (empty in records written before it was measured).
    #[serde(default)]
    pub class_error_pct: Vec<Option<f64>>,
    /// Test NLL per image (nats).
    pub nll: f64,
    /// Expected calibration error (15 bins).
    pub ece: f64,
    /// Brier score (sum over classes, mean over images).
    pub brier: f64,
    /// AUROC of predictive entropy, the other family's test images (positive) vs the test
    /// images.
    pub auroc_entropy: f64,
    /// AUROC of mutual information (BALD), same sets.
    pub auroc_mi: f64,
    /// Area under the ECDF of predictive entropies on the other family's test images over
    /// `[0, ln 10]` (↓).
    pub ecdf_area: f64,
    /// Mean predictive entropy on the test images.
    pub mean_entropy_in: f64,
    /// Mean predictive entropy on the other family's test images.
    pub mean_entropy_out: f64,
    /// AUROC of predictive entropy for detecting misclassified test images.
    pub misclassification_auroc: Option<f64>,
    /// OOD detection on every OOD set (the other family, uniform noise, inverted images).
    pub ood_sets: Vec<OodScore>,
    /// Error and entropy on the test images per rotation angle.
    pub rotations: Vec<RotationScore>,
    /// Training wall time, s.
    pub train_seconds: f64,
    /// Reliability diagram of the test predictions.
    pub reliability: Vec<ReliabilityBin>,
    /// Entropy histogram counts on `[0, ln 10]`, test images.
    pub entropy_hist_in: Vec<usize>,
    /// Entropy histogram counts on `[0, ln 10]`, the other family's test images.
    pub entropy_hist_out: Vec<usize>,
    /// A method trained on a PAC-Bayes bound (BEDL-PAC): the bound on the training images
    /// beside the test images' risk.
    #[serde(default)]
    pub pac: Option<PacReport>,
    /// Temperature scaling and conformal class sets fitted on half of the test images and
    /// scored on the other half (absent from records written before they were measured).
    #[serde(default)]
    pub calibration: Option<CalibrationReport>,
    /// The revisions the bench that trained and scored the row was built from (several when
    /// its training state was resumed by other builds, the scoring build last; empty in records
    /// written before they were kept).
    #[serde(default)]
    pub revisions: Vec<String>,
}

/// Post-hoc calibration of a row ([`bnn_burn::posthoc::TemperatureScaling`],
/// [`bnn_burn::posthoc::ConformalSets`]): fitted on the even-numbered test images, scored on
/// the odd-numbered ones beside the raw predictive on the same images.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CalibrationReport {
    /// Test images that calibrate.
    pub calibration_images: usize,
    /// Test images scored.
    pub scored_images: usize,
    /// NLL per scored image of the raw predictive.
    pub nll_raw: f64,
    /// ECE (15 bins) of the raw predictive on the scored images.
    pub ece_raw: f64,
    /// The tempered predictive (`None`: a Dirichlet head, which has no draws to temper).
    pub tempered: Option<Tempered>,
    /// The conformal sets' miscoverage `α`.
    pub conformal_alpha: f64,
    /// The fraction of scored images whose label is in its set (nominal `1 − α`).
    pub conformal_coverage: f64,
    /// The mean set size.
    pub conformal_set_size: f64,
}

/// A temperature and the scores of the tempered predictive.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tempered {
    /// The fitted `T`.
    pub temperature: f64,
    /// NLL per scored image.
    pub nll: f64,
    /// ECE (15 bins) on the scored images.
    pub ece: f64,
}

/// The PAC-Bayes bound of a run (Haußmann 2021 eq. 5.10): risks are `−mean p̄(y | x)` of the
/// labels, in `[−1, 0]`.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct PacReport {
    /// The training images' empirical risk.
    pub train_risk: f64,
    /// The training images' mean local KL.
    pub kl: f64,
    /// The bound under the training objective's settings.
    pub bound: f64,
    /// The bound under the reference code's tighter settings (`ln N / N`, one point's KL).
    pub bound_code: f64,
    /// The risk measured on the test images.
    pub test_risk: f64,
}

impl MnistResult {
    /// Refuses non-finite metrics before a report or plot shows them: the error names the
    /// architecture, method and metric.
    pub fn check(&self) -> Result<(), String> {
        let row = format!("{} / {}", self.arch.name(), self.method);
        for (field, v) in [
            ("test error", self.error_pct),
            ("NLL", self.nll),
            ("ECE", self.ece),
            ("Brier score", self.brier),
            ("AUROC (entropy)", self.auroc_entropy),
            ("AUROC (mutual information)", self.auroc_mi),
            ("entropy-ECDF area", self.ecdf_area),
            ("mean entropy (MNIST)", self.mean_entropy_in),
            ("mean entropy (Fashion-MNIST)", self.mean_entropy_out),
        ] {
            crate::experiment::check_finite(&row, field, v)?;
        }
        if let Some(a) = self.misclassification_auroc {
            crate::experiment::check_finite(&row, "AUROC (misclassified)", a)?;
        }
        for (c, e) in self.class_error_pct.iter().enumerate() {
            if let Some(e) = e {
                crate::experiment::check_finite(&row, &format!("class {c} test error"), *e)?;
            }
        }
        if let Some(p) = &self.pac {
            for (field, v) in [
                ("PAC-Bayes train risk", p.train_risk),
                ("PAC-Bayes KL", p.kl),
                ("PAC-Bayes bound", p.bound),
                ("PAC-Bayes bound (code)", p.bound_code),
                ("PAC-Bayes test risk", p.test_risk),
            ] {
                crate::experiment::check_finite(&row, field, v)?;
            }
        }
        for o in &self.ood_sets {
            for (field, v) in [
                ("AUROC (entropy)", o.auroc_entropy),
                ("AUROC (mutual information)", o.auroc_mi),
                ("entropy-ECDF area", o.ecdf_area),
                ("mean entropy", o.mean_entropy),
            ] {
                crate::experiment::check_finite(&format!("{row} on {}", o.set), field, v)?;
            }
        }
        for r in &self.rotations {
            let at = format!("{row} rotated {}°", r.degrees);
            crate::experiment::check_finite(&at, "test error", r.error_pct)?;
            crate::experiment::check_finite(&at, "mean entropy", r.mean_entropy)?;
            crate::experiment::check_finite(&at, "AUROC (entropy)", r.auroc_entropy)?;
        }
        Ok(())
    }
}

/// OOD detection on one set: MNIST test images are the negatives, the set's the positives.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct OodScore {
    /// The OOD set.
    pub set: String,
    /// AUROC of predictive entropy.
    pub auroc_entropy: f64,
    /// AUROC of mutual information.
    pub auroc_mi: f64,
    /// Entropy-ECDF area over `[0, ln 10]` (↓; Haußmann 2021 §5.7).
    pub ecdf_area: f64,
    /// Mean predictive entropy on the set.
    pub mean_entropy: f64,
    /// Area under the precision–recall curve of predictive entropy, the set's images positive
    /// (absent from records written before it was measured).
    #[serde(default)]
    pub aupr_entropy: Option<f64>,
    /// False-positive rate of predictive entropy at 95 % true-positive rate (↓).
    #[serde(default)]
    pub fpr95_entropy: Option<f64>,
}

/// The MNIST test images rotated by one angle.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RotationScore {
    /// Counter-clockwise rotation, degrees.
    pub degrees: f64,
    /// Test error on the rotated images, %.
    pub error_pct: f64,
    /// Mean predictive entropy.
    pub mean_entropy: f64,
    /// AUROC of predictive entropy, rotated (positive) vs upright test images.
    pub auroc_entropy: f64,
}

/// AUROC of predictive entropy for detecting misclassified test images (the positives), from
/// the predicted classes; `None` when every image or none is misclassified.
pub fn misclassification_auroc(
    predicted: &[usize],
    labels: &[usize],
    entropy: &[f64],
) -> Option<f64> {
    let (mut right, mut wrong) = (Vec::new(), Vec::new());
    for ((p, l), &h) in predicted.iter().zip(labels).zip(entropy) {
        if p == l { right.push(h) } else { wrong.push(h) }
    }
    (!right.is_empty() && !wrong.is_empty()).then(|| auroc(&right, &wrong))
}

/// Runs every selected (architecture, method) of [`methods`] and writes `mnist.json`,
/// `mnist.md`, `reliability.svg` and `entropy.svg` to `options.out` ([`run_with`]).
///
/// # Errors
/// Those of [`run_with`].
pub fn run(options: &MnistOptions) -> Result<Vec<MnistResult>, Box<dyn Error>> {
    // Any catalogue entry by name; without names, those it runs here by default.
    let is_default = |m: &Method| crate::catalogue::runs_by_default(Protocol::Mnist, m.name);
    run_among(
        options,
        crate::catalogue::available(Protocol::Mnist, &SETTINGS),
        is_default,
    )
}

/// [`run`] on `methods` in place of the built-in ones: a user's own catalogue entries (a
/// [`Method`] is a named configuration of weights, objective and likelihood, e.g.
/// `Method { name: "MFVI, σ₀ = 0.1", ..Method::mean_field(…) }` with another prior), alone or
/// beside [`methods`]' under the same data, budgets, OOD sets, resuming and reports.
/// `options.methods` selects among them by name (case-insensitive; empty: all).
///
/// # Errors
/// Before any work: two methods of one name, a name in `options.methods` that none has, a
/// name or architecture given twice, bad options or data, an output folder that cannot be
/// written or that another run holds; then a method's training error (the rows finished so far
/// stay in `out`; `--resume` continues).
pub fn run_with(
    options: &MnistOptions,
    methods: Vec<Method>,
) -> Result<Vec<MnistResult>, Box<dyn Error>> {
    run_among(options, methods, |_| true)
}

/// [`run_with`], where no `--method` runs the methods `is_default` keeps.
fn run_among(
    options: &MnistOptions,
    methods: Vec<Method>,
    is_default: impl Fn(&Method) -> bool,
) -> Result<Vec<MnistResult>, Box<dyn Error>> {
    let runner = &options.run;
    runner.check()?;
    let all = methods;
    experiment::refuse_repeats("--method", options.methods.iter().map(String::as_str))?;
    experiment::refuse_repeats("--arch", options.archs.iter().map(|a| a.name()))?;
    let selected = experiment::select_or_defaults(&all, &options.methods, |m| m.name, is_default)?;
    let archs = match (options.archs.is_empty(), options.family) {
        (true, TrainSet::Cifar5) => vec![Arch::LeNet5],
        (true, _) => Arch::ALL.to_vec(),
        (false, _) => options.archs.clone(),
    };
    if options.family == TrainSet::Cifar5 && archs.contains(&Arch::Mlp) {
        return Err(
            "--arch mlp: CIFAR-5 runs the convolutional nets only (--arch lenet5, lenet5-pool, \
             lenet5-sensoy or conv96)"
                .into(),
        );
    }
    if options.prediction_samples == 0 {
        return Err("--samples must be at least 1".into());
    }
    if options.batch_size == 0 {
        return Err("--batch-size must be at least 1".into());
    }
    if options.epochs == Some(0) {
        return Err("--epochs must be at least 1".into());
    }
    let root = DataRoot::new(options.data_dir.as_deref());
    let data = MnistData::load(&root, options.exp.quick, options.family)?;
    for &arch in &archs {
        check_prediction_memory(
            options.prediction_samples,
            widest_activation(arch, data.train.shape()),
        )?;
    }
    let harness = harness::MnistHarness::new(options, selected, archs, data);
    let rows = crate::runner::run(&harness, runner)?;
    Ok(rows.into_iter().map(|f| f.row).collect())
}
