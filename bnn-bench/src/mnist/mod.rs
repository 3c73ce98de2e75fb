//! `bnn-bench mnist`: train on MNIST, test on MNIST (in-distribution) and on out-of-distribution
//! sets (the Fashion-MNIST test split, uniform noise, pixel-inverted MNIST, MNIST rotated in 45°
//! steps), for every method as an MLP 784-400-400-10 and as the strided LeNet5 of Haußmann
//! (2021, Table 3.4). Reports error %, NLL, ECE, Brier, the OOD AUROC of predictive entropy and
//! of mutual information per OOD set, the entropy-ECDF area of Haußmann §5 (Table 5.2), the
//! misclassification-detection AUROC of entropy, and error and entropy per rotation angle, with
//! reliability diagrams, entropy histograms and the rotation curves.
use crate::experiment;
use crate::methods::{ClassLikelihood, Method, TrainObjective};
use crate::mnist_published;
use bnn_burn::host::to_vec;
use bnn_burn::layers::Estimator;
use bnn_burn::likelihood::{Categorical, Likelihood, MultiLabelProbit};
use bnn_burn::metrics::{
    ReliabilityBin, accuracy_of, auroc, brier, class_errors_of, ece_of, entropy_ecdf_area, nll,
    reliability_curve_of,
};
use bnn_burn::nets::{Bnn, Body, ConvNetConfig, MlpConfig};
use bnn_burn::objective::{PacComplexity, PacKl};
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

mod harness;
mod plots;
mod report;
#[cfg(test)]
mod tests;

pub use harness::MnistTask;

use plots::*;
pub use report::*;

/// Bins of the reliability diagrams and the ECE (Guo et al. 2017).
pub const ECE_BINS: usize = 15;

/// Bins of the entropy histograms on `[0, ln 10]`.
pub const ENTROPY_BINS: usize = 40;

/// Images per prediction chunk (bounds memory at `S × chunk × activations`).
const CHUNK: usize = 500;

/// Activations a prediction chunk may hold of its widest layer (`S × images × width`, 400 MB
/// of `f32`): a chunk of [`CHUNK`] images shrinks to stay below it.
const PREDICT_ELEMENTS: usize = 100_000_000;

/// The widest layer's activations per image of `arch` on `[c, h, w]` images, an upper bound
/// (a convolution's outputs at most its channels × the input's pixels).
fn widest_activation(arch: Arch, [c, h, w]: [usize; 3]) -> usize {
    let first_channels = match (arch, c) {
        (Arch::Mlp, _) => return (c * h * w).max(400),
        (Arch::Conv96, _) => 96,
        (Arch::LeNet5, 3) => 192,
        _ => 20,
    };
    (first_channels * h * w).max(c * h * w).max(1000)
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

/// Every method, in table order, under its catalogue name ([`Method`]): MAP with a N(0, 1)
/// prior (the deterministic net); MC dropout with p = 0.2 on every layer input and Gal's
/// length-scale 10⁻²; mean-field with local reparameterisation (MFVI-LRT) and radial with
/// N(0, 1) priors and ρ₀ = −5; and the sampling-free methods of Haußmann (2021) Table 3.2 and
/// ch. 4 with its prior precision α = 100, trained and predicted by moment propagation: VBP
/// (softmax, Taylor loss, 100 logit draws for the prediction), DVI (the same with exact ReLU
/// moments) and CLT (multi-label probit, closed-form predictive); DVI as Table 5.2 trains it
/// (DVI-sampled: the sampled softmax over 20 draws, α = [`TABLE_5_2_DVI_PRIOR_PRECISION`]);
/// then EDL, BEDL and BEDL-PAC.
pub fn methods() -> Vec<Method> {
    vec![
        Method::map(1.0),
        Method::mc_dropout(0.2, 1e-2),
        Method::mean_field(Estimator::LocalReparameterization),
        Method::radial(),
        Method::vbp(MOMENT_PRIOR_PRECISION),
        Method::dvi(MOMENT_PRIOR_PRECISION),
        Method::clt(MOMENT_PRIOR_PRECISION),
        Method::dvi_sampled(TABLE_5_2_DVI_PRIOR_PRECISION),
        Method::edl(),
        Method::bedl(),
        Method::bedl_pac(),
    ]
}

/// The prior precision α of the moment methods on MNIST (Haußmann 2021 §3.5: α = 100 for every
/// classification method).
pub const MOMENT_PRIOR_PRECISION: f64 = 100.0;

/// The prior precision α of Table 5.2's DVI (Haußmann 2021 §5.8: the thesis code's `DVINet`
/// defaults to 10, where Table 3.2's methods have 100).
pub const TABLE_5_2_DVI_PRIOR_PRECISION: f64 = 10.0;

/// The training minibatch size of the protocol (Haußmann 2021 §3.5 and Table 5.2).
pub const BATCH_SIZE: usize = 100;

/// Options of one `mnist` run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MnistOptions {
    /// Method names (empty: all).
    pub methods: Vec<String>,
    /// Architectures (empty: both).
    pub archs: Vec<Arch>,
    /// Training epochs (default 10; 2 with `--quick`).
    pub epochs: Option<usize>,
    /// Seed.
    pub seed: u64,
    /// Quick mode: 10 000 training images, 2 000 test and OOD images, 2 epochs.
    pub quick: bool,
    /// Posterior samples per prediction.
    pub prediction_samples: usize,
    /// Training minibatch size ([`BATCH_SIZE`] in the protocol).
    pub batch_size: usize,
    /// Output folder.
    pub out: PathBuf,
    /// Data folder (default search when `None`).
    pub data_dir: Option<PathBuf>,
    /// Reuse the finished rows in `out/rows` computed under the same seed, epochs, prediction
    /// samples, batch size and data (and continue a row's saved training state); rows there of
    /// other architectures or methods are kept in the new records.
    pub resume: bool,
    /// The set trained and tested on; its first OOD set is [`TrainSet::ood_name`]'s.
    pub family: TrainSet,
    /// Worker processes, each training one (architecture, method) row at a time (see
    /// [`crate::runner::allow_worker_processes`]).
    pub jobs: usize,
    /// Set in a worker process: the one row it runs for its parent ([`crate::runner`]).
    #[serde(skip)]
    pub worker: Option<crate::runner::Worker>,
}

impl MnistOptions {
    fn epochs(&self) -> usize {
        self.epochs.unwrap_or(if self.quick { 2 } else { 10 })
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
    /// The revisions the bench that trained and scored the row was built from (several when
    /// its training state was resumed by other builds, the scoring build last; empty in records
    /// written before they were kept).
    #[serde(default)]
    pub revisions: Vec<String>,
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

/// A trained classifier of either shape and either class likelihood, and how it predicts
/// (by moments for a method trained by moments, else by `samples` posterior draws).
struct Trained {
    net: Box<dyn Predict<Input = Tensor<4>, Prediction = ClassPrediction>>,
    mode: PredictMode,
    /// Images per prediction ([`images_per_chunk`]).
    chunk: usize,
}

impl Trained {
    fn predict(&self, images: Tensor<4>) -> Result<ClassPrediction, PredictError> {
        self.net.predict(images, self.mode)
    }
}

/// An MLP classifier fed flattened images.
struct Flattened<M>(M);

impl<M: Predict<Input = Tensor<2>>> Predict for Flattened<M> {
    type Input = Tensor<4>;
    type Prediction = M::Prediction;

    fn predict(&self, images: Tensor<4>, mode: PredictMode) -> Result<M::Prediction, PredictError> {
        let [b, c, h, w] = images.dims();
        self.0.predict(images.reshape([b, c * h * w]), mode)
    }
}

/// How often a row's training state is saved (and always after its last epoch).
const STATE_INTERVAL: Duration = Duration::from_secs(60);

/// A boxed classifier of flattened or whole images.
type Classifier = Box<dyn Predict<Input = Tensor<4>, Prediction = ClassPrediction>>;

/// A trained classifier, its training seconds over every process that trained it, and for a
/// method trained on a PAC-Bayes bound the bound's terms on the training images.
type Fitted = (Classifier, f64, Option<PacTrain>);

/// Rows per chunk of the PAC-Bayes bound over the training images.
const PAC_CHUNK: usize = 2_000;

/// The PAC-Bayes bound of `net` on `(x, labels)` in chunks, for a method trained on one: under
/// the training objective's settings and under the reference code's (`ln N / N`, one point's
/// KL), from 100 sampled outputs as the bench predicts.
fn pac_bounds<B, L>(
    method: &Method,
    net: &Bnn<B, L>,
    x: impl Fn(std::ops::Range<usize>) -> B::Input,
    labels: &Tensor<1, Int>,
) -> Result<Option<PacTrain>, Box<dyn Error>>
where
    B: Body,
    L: Likelihood<Target = Tensor<1, Int>, Prediction = ClassPrediction>,
{
    let TrainObjective::PacBayes(pac) = &method.objective else {
        return Ok(None);
    };
    let code = pac
        .clone()
        .with_complexity(PacComplexity::LogN)
        .with_kl(PacKl::Mean)
        .init()?;
    let n = labels.dims()[0];
    let chunks = (0..n).step_by(PAC_CHUNK).map(|start| {
        let rows = start..(start + PAC_CHUNK).min(n);
        (x(rows.clone()), labels.clone().slice(rows))
    });
    let b = net.pac_bound_chunked(chunks, &code, 100)?;
    let bound = pac.init()?.risk_bound(b.empirical_risk, b.kl, n);
    Ok(Some(PacTrain {
        risk: b.empirical_risk,
        kl: b.kl,
        bound,
        bound_code: b.bound,
    }))
}

/// [`PacReport`]'s terms from the training images.
#[derive(Debug, Clone, Copy)]
struct PacTrain {
    risk: f64,
    kl: f64,
    bound: f64,
    bound_code: f64,
}

/// Trains `method` as `arch` with the class likelihood `likelihood` on `(images, labels)` of
/// `classes` classes, saving its training state in `state` (and resuming from it) when given ([`Fitted`]).
fn fit<L>(
    arch: Arch,
    method: &Method,
    likelihood: L,
    (images, labels, classes): (Tensor<4>, Tensor<1, Int>, usize),
    config: &TrainConfig,
    state: Option<&Path>,
    device: &Device,
) -> Result<Fitted, Box<dyn Error>>
where
    L: Likelihood<Target = Tensor<1, Int>, Prediction = ClassPrediction>,
{
    fn trainer<M: Model>(
        method: &Method,
        config: &TrainConfig,
        state: Option<&Path>,
    ) -> Result<Trainer<M>, bnn_burn::ConfigError> {
        let t = method.trainer(config)?;
        Ok(match state {
            Some(dir) => t.with_resume(dir, STATE_INTERVAL),
            None => t,
        })
    }
    let [n, c, h, w] = images.dims();
    let plain = || images.clone().without_autodiff();
    let plain_labels = labels.clone().without_autodiff();
    Ok(match arch {
        Arch::Mlp => {
            let net = MlpConfig::new(c * h * w, vec![400, 400], classes)
                .with_weights(method.weights.clone())
                .init(likelihood, device)?;
            let net = method.with_moments(net)?;
            let flat = images.clone().reshape([n, c * h * w]);
            let (m, report) = trainer(method, config, state)?.fit(net, (flat, labels))?;
            let m = m.valid();
            let x = |rows: std::ops::Range<usize>| {
                let b = rows.len();
                plain().slice(rows).reshape([b, c * h * w])
            };
            let pac = pac_bounds(method, &m, x, &plain_labels)?;
            (Box::new(Flattened(m)), report.seconds, pac)
        }
        Arch::LeNet5 | Arch::LeNet5Pooled | Arch::LeNet5Sensoy | Arch::Conv96 => {
            // The thesis's strided LeNet5: 20/50/500 on grey images, 192/192/1000 on colour;
            // the pooled ones 20/50/500 on either; Table 5.3's 96/96 on either.
            let shape = match (arch, c) {
                (Arch::Conv96, _) => ConvNetConfig::conv96([c, h, w], classes),
                (Arch::LeNet5Pooled, _) => ConvNetConfig::lenet5_pooled([c, h, w], classes),
                (Arch::LeNet5Sensoy, _) => ConvNetConfig::lenet5_sensoy([c, h, w], classes),
                (_, 1) => ConvNetConfig::lenet5([c, h, w], classes),
                _ => ConvNetConfig::lenet5_cifar([c, h, w], classes),
            };
            let mut weights = method.weights.clone();
            if arch == Arch::LeNet5Sensoy {
                // Sensoy's initialiser comes with his net.
                weights.tf_truncated_normal = shape.dense.weights.tf_truncated_normal;
            }
            let net = shape.with_weights(weights).init(likelihood, device)?;
            let net = method.with_moments(net)?;
            let (m, report) = trainer(method, config, state)?.fit(net, (images.clone(), labels))?;
            let m = m.valid();
            let x = |rows: std::ops::Range<usize>| plain().slice(rows);
            let pac = pac_bounds(method, &m, x, &plain_labels)?;
            (Box::new(m), report.seconds, pac)
        }
    })
}

/// Per-image predictive probabilities `[n, C]`, log-likelihoods of the labels (none for a set
/// whose labels are not the model's classes, such as CIFAR's classes 5–9), predictive
/// entropies and mutual informations.
struct Predictions {
    probs: Vec<f64>,
    /// The model's predicted classes ([`ClassPrediction::predicted_class`]: a most probable
    /// class, ties broken by an evidential head's outputs).
    ///
    /// [`ClassPrediction::predicted_class`]: bnn_burn::predict::ClassPrediction::predicted_class
    predicted: Vec<usize>,
    log_likelihood: Vec<f64>,
    entropy: Vec<f64>,
    mi: Vec<f64>,
}

fn predict_set(
    model: &Trained,
    set: &ImageSet,
    norm: &Normalization,
    device: &Device,
) -> Result<Predictions, PredictError> {
    let mut p = Predictions {
        probs: Vec::with_capacity(set.len() * set.n_classes),
        predicted: Vec::with_capacity(set.len()),
        log_likelihood: Vec::with_capacity(set.len()),
        entropy: Vec::with_capacity(set.len()),
        mi: Vec::with_capacity(set.len()),
    };
    let indices: Vec<usize> = (0..set.len()).collect();
    for chunk in indices.chunks(model.chunk) {
        let batch = set.batch(chunk, norm, device);
        let pred = model.predict(batch.images)?;
        let mean = pred.mean();
        let classes = mean.dims()[1];
        p.probs.extend(to_vec(mean));
        p.predicted
            .extend(bnn_burn::host::to_labels(pred.predicted_class()));
        if chunk.iter().all(|&i| usize::from(set.labels[i]) < classes) {
            p.log_likelihood.extend(to_vec(pred.log_prob(batch.labels)));
        }
        p.entropy.extend(to_vec(pred.entropy()));
        p.mi.extend(to_vec(pred.epistemic_entropy()));
    }
    Ok(p)
}

/// Counts of `values` in `bins` equal bins on `[0, max]` (the top edge goes in the last bin).
pub fn histogram(values: &[f64], max: f64, bins: usize) -> Vec<usize> {
    let mut h = vec![0; bins];
    for v in values {
        let i = ((v / max * bins as f64).max(0.0) as usize).min(bins - 1);
        h[i] += 1;
    }
    h
}

/// The image sets of a run: train and test images of one task (MNIST unless
/// [`MnistData::load`] asks for another), and the out-of-distribution sets: the task's OOD
/// images ([`TrainSet::ood_name`]), uniform noise and pixel-inverted test images (rotated test
/// images are made from `test` per angle, [`ROTATION_ANGLES`]).
pub struct MnistData {
    /// The task of `train` and `test`.
    pub family: TrainSet,
    /// Training images.
    pub train: ImageSet,
    /// In-distribution test images.
    pub test: ImageSet,
    /// The task's OOD test images (normalised with their own statistics, as the thesis code).
    pub ood: ImageSet,
    /// Uniform-noise images, as many as `ood` (seeded).
    pub noise: ImageSet,
    /// The test images with inverted pixels.
    pub inverted: ImageSet,
}

/// Seed of the uniform-noise OOD images.
const NOISE_SEED: u64 = 0x006e_6f69_7365;

/// Rotations of the MNIST test images (45° steps; 0° is the test set itself): error and
/// entropy per angle, as Depeweg (2019, §6.1) and Haußmann (2021, ch. 5) use rotation.
pub const ROTATION_ANGLES: [f64; 8] = [0.0, 45.0, 90.0, 135.0, 180.0, 225.0, 270.0, 315.0];

impl MnistData {
    /// The sets of a run from MNIST train/test and the Fashion-MNIST OOD images; noise and
    /// inverted images are derived (noise: as many as `ood`, shaped like `test`).
    pub fn new(train: ImageSet, test: ImageSet, ood: ImageSet) -> Result<Self, Box<dyn Error>> {
        let noise = ImageSet::uniform_noise(ood.len(), test.shape(), test.n_classes, NOISE_SEED)?;
        let inverted = test.inverted();
        Ok(Self {
            family: TrainSet::Mnist,
            train,
            test,
            ood,
            noise,
            inverted,
        })
    }

    /// Loads the files of `family`: for MNIST and Fashion-MNIST the other family's test split
    /// is the first OOD set; for CIFAR-5 the CIFAR-10 test images of classes 5–9 (quick: the
    /// first 10 000 / 2 000 / 2 000 images).
    pub fn load(root: &DataRoot, quick: bool, family: TrainSet) -> Result<Self, Box<dyn Error>> {
        let (train, test, ood) = match family {
            TrainSet::Mnist | TrainSet::FashionMnist => {
                let (own, other) = match family {
                    TrainSet::Mnist => (MnistFamily::Mnist, MnistFamily::FashionMnist),
                    _ => (MnistFamily::FashionMnist, MnistFamily::Mnist),
                };
                (
                    own.load(Split::Train, root)?,
                    own.load(Split::Test, root)?,
                    other.load(Split::Test, root)?,
                )
            }
            TrainSet::Cifar5 => {
                let test = Cifar5::load(Split::Test, root)?;
                (
                    Cifar5::load(Split::Train, root)?.inliers,
                    test.inliers,
                    test.outliers,
                )
            }
        };
        let data = if quick {
            Self::new(train.first(10_000), test.first(2_000), ood.first(2_000))
        } else {
            Self::new(train, test, ood)
        }?;
        Ok(Self { family, ..data })
    }

    /// The name of the training task and of its OOD set, as printed.
    pub fn names(&self) -> (&'static str, &'static str) {
        (self.family.name(), self.family.ood_name())
    }

    /// Classes of the training task.
    pub fn n_classes(&self) -> usize {
        self.test.n_classes
    }
}

/// What an `mnist` run trains and tests on (`--train-set`), and its first OOD set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TrainSet {
    /// MNIST; OOD: Fashion-MNIST's test split.
    Mnist,
    /// Fashion-MNIST; OOD: MNIST's test split.
    FashionMnist,
    /// CIFAR-10's classes 0–4; OOD: its classes 5–9 (Haußmann 2021 Table 5.2's CIFAR-5).
    Cifar5,
}

impl TrainSet {
    /// "MNIST", "Fashion-MNIST" or "CIFAR-5".
    pub fn name(self) -> &'static str {
        match self {
            Self::Mnist => "MNIST",
            Self::FashionMnist => "Fashion-MNIST",
            Self::Cifar5 => "CIFAR-5",
        }
    }

    /// The name of the first OOD set.
    pub fn ood_name(self) -> &'static str {
        match self {
            Self::Mnist => "Fashion-MNIST",
            Self::FashionMnist => "MNIST",
            Self::Cifar5 => "CIFAR classes 5–9",
        }
    }

    /// The training set's normalisation (the thesis code's constants).
    pub fn normalization(self) -> Normalization {
        match self {
            Self::Mnist => MnistFamily::Mnist.normalization(),
            Self::FashionMnist => MnistFamily::FashionMnist.normalization(),
            Self::Cifar5 => Cifar5::normalization(),
        }
    }

    /// Test images of the published tables' runs: 10 000 (MNIST, Fashion-MNIST), 5 000
    /// (CIFAR-10's test images of classes 0–4).
    pub fn published_test_images(self) -> usize {
        match self {
            Self::Cifar5 => 5_000,
            _ => 10_000,
        }
    }

    /// The first OOD set's normalisation: its own family's for MNIST and Fashion-MNIST (as
    /// the thesis code), the training set's for CIFAR's other classes.
    pub fn ood_normalization(self) -> Normalization {
        match self {
            Self::Mnist => MnistFamily::FashionMnist.normalization(),
            Self::FashionMnist => MnistFamily::Mnist.normalization(),
            Self::Cifar5 => Cifar5::normalization(),
        }
    }
}

/// The task named by `--train-set`.
///
/// # Errors
/// A name other than `mnist`, `fashion-mnist` and `cifar5`, naming the flag.
pub fn parse_family(name: &str) -> Result<TrainSet, String> {
    match name.to_ascii_lowercase().as_str() {
        "mnist" => Ok(TrainSet::Mnist),
        "fashion-mnist" | "fashion" | "fashionmnist" => Ok(TrainSet::FashionMnist),
        "cifar5" | "cifar-5" => Ok(TrainSet::Cifar5),
        _ => Err(format!(
            "--train-set {name:?}: expected mnist, fashion-mnist or cifar5"
        )),
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

/// How long and how one row trains, and how many samples its predictions average.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowBudget {
    /// Training epochs.
    pub epochs: usize,
    /// Training minibatch size.
    pub batch_size: usize,
    /// Posterior samples per prediction.
    pub samples: usize,
    /// Seed of the initialisation, the minibatches and the noise.
    pub seed: u64,
}

/// Trains one method on one architecture and measures it.
pub fn run_one(
    arch: Arch,
    method: &Method,
    data: &MnistData,
    budget: RowBudget,
    state: Option<&Path>,
) -> Result<MnistResult, Box<dyn Error>> {
    let RowBudget {
        epochs,
        batch_size,
        samples,
        seed,
    } = budget;
    // Noted before training, so that a run interrupted and resumed by another build names
    // both.
    let revisions = match state {
        Some(folder) => experiment::note_revision(folder)?,
        None => vec![experiment::git_revision()],
    };
    let device = training_device();
    device.seed(seed);
    // Each set is normalised with its own family's statistics, as in the thesis code.
    let norm = data.family.normalization();
    let classes = data.n_classes();
    let all: Vec<usize> = (0..data.train.len()).collect();
    let batch = data.train.batch(&all, &norm, &device);
    let labels: Tensor<1, Int> = batch.labels;
    let config = TrainConfig::new(epochs)
        .with_batch_size(batch_size)
        .with_learning_rate(1e-3)
        .with_seed(seed)
        .with_progress(true);
    let data_xy = (batch.images, labels, classes);
    let (net, train_seconds, pac_train) = match method.class_likelihood {
        ClassLikelihood::Softmax => {
            fit(arch, method, Categorical, data_xy, &config, state, &device)?
        }
        ClassLikelihood::MultiLabelProbit => fit(
            arch,
            method,
            MultiLabelProbit,
            data_xy,
            &config,
            state,
            &device,
        )?,
        ClassLikelihood::Evidential { .. } => {
            let head = method
                .class_likelihood
                .evidential()
                .expect("an evidential method")
                .init();
            fit(arch, method, head, data_xy, &config, state, &device)?
        }
    };
    let mode = if method.predicts_by_moments() {
        PredictMode::Moments
    } else {
        PredictMode::Samples(samples)
    };
    let draws = match mode {
        PredictMode::Samples(s) => s,
        PredictMode::Moments => 1,
    };
    let model = Trained {
        net,
        mode,
        chunk: images_per_chunk(draws, widest_activation(arch, data.train.shape())),
    };
    let plain = device.inner();
    let inn = predict_set(&model, &data.test, &norm, &plain)?;
    let out = predict_set(&model, &data.ood, &data.family.ood_normalization(), &plain)?;
    let labels: Vec<usize> = data.test.labels.iter().map(|&l| l as usize).collect();
    let max_entropy = (classes as f64).ln();
    let score = |set: &str, p: &Predictions| OodScore {
        set: set.to_string(),
        auroc_entropy: auroc(&inn.entropy, &p.entropy),
        auroc_mi: auroc(&inn.mi, &p.mi),
        ecdf_area: entropy_ecdf_area(&p.entropy, classes),
        mean_entropy: bnn_burn::metrics::mean(&p.entropy),
        aupr_entropy: Some(bnn_burn::metrics::aupr(&inn.entropy, &p.entropy)),
        fpr95_entropy: Some(bnn_burn::metrics::fpr_at_95_tpr(&inn.entropy, &p.entropy)),
    };
    let noise = predict_set(&model, &data.noise, &norm, &plain)?;
    let inverted = predict_set(&model, &data.inverted, &norm, &plain)?;
    let (name, ood_name) = data.names();
    let ood_sets = vec![
        score(ood_name, &out),
        score("uniform noise", &noise),
        score(&format!("inverted {name}"), &inverted),
    ];
    let mut rotations = Vec::with_capacity(ROTATION_ANGLES.len());
    for &degrees in &ROTATION_ANGLES {
        let rotated;
        let p = if degrees == 0.0 {
            &inn
        } else {
            rotated = predict_set(&model, &data.test.rotated(degrees), &norm, &plain)?;
            &rotated
        };
        rotations.push(RotationScore {
            degrees,
            error_pct: 100.0 * (1.0 - accuracy_of(&p.predicted, &labels)),
            mean_entropy: bnn_burn::metrics::mean(&p.entropy),
            auroc_entropy: auroc(&inn.entropy, &p.entropy),
        });
    }
    Ok(MnistResult {
        arch,
        method: method.name.to_string(),
        epochs,
        seed,
        error_pct: 100.0 * (1.0 - accuracy_of(&inn.predicted, &labels)),
        class_error_pct: class_errors_of(&inn.predicted, classes, &labels)
            .into_iter()
            .map(|e| e.map(|e| 100.0 * e))
            .collect(),
        nll: nll(&inn.log_likelihood),
        ece: ece_of(&inn.probs, &inn.predicted, classes, &labels, ECE_BINS),
        brier: brier(&inn.probs, classes, &labels),
        auroc_entropy: auroc(&inn.entropy, &out.entropy),
        auroc_mi: auroc(&inn.mi, &out.mi),
        ecdf_area: entropy_ecdf_area(&out.entropy, classes),
        mean_entropy_in: bnn_burn::metrics::mean(&inn.entropy),
        mean_entropy_out: bnn_burn::metrics::mean(&out.entropy),
        misclassification_auroc: misclassification_auroc(&inn.predicted, &labels, &inn.entropy),
        ood_sets,
        rotations,
        train_seconds,
        reliability: reliability_curve_of(&inn.probs, &inn.predicted, classes, &labels, ECE_BINS),
        entropy_hist_in: histogram(&inn.entropy, max_entropy, ENTROPY_BINS),
        entropy_hist_out: histogram(&out.entropy, max_entropy, ENTROPY_BINS),
        pac: pac_train.map(|t| PacReport {
            train_risk: t.risk,
            kl: t.kl,
            bound: t.bound,
            bound_code: t.bound_code,
            test_risk: -bnn_burn::metrics::mean(
                &inn.log_likelihood
                    .iter()
                    .map(|l| l.exp())
                    .collect::<Vec<_>>(),
            ),
        }),
        revisions,
    })
}

/// Runs every selected (architecture, method) of [`methods`] and writes `mnist.json`,
/// `mnist.md`, `reliability.svg` and `entropy.svg` to `options.out` ([`run_with`]).
///
/// # Errors
/// Those of [`run_with`].
pub fn run(options: &MnistOptions) -> Result<Vec<MnistResult>, Box<dyn Error>> {
    run_with(options, methods())
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
    let runner = options.runner();
    runner.check()?;
    let all = methods;
    experiment::refuse_repeats("--method", options.methods.iter().map(String::as_str))?;
    experiment::refuse_repeats("--arch", options.archs.iter().map(|a| a.name()))?;
    let selected = experiment::select(&all, &options.methods, |m| m.name)?;
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
    let data = MnistData::load(&root, options.quick, options.family)?;
    for &arch in &archs {
        check_prediction_memory(
            options.prediction_samples,
            widest_activation(arch, data.train.shape()),
        )?;
    }
    let harness = harness::MnistHarness::new(options, selected, archs, data);
    let rows = crate::runner::run(&harness, &runner)?;
    Ok(rows.into_iter().map(|f| f.row).collect())
}

impl MnistOptions {
    /// How the runner carries the run out.
    pub fn runner(&self) -> crate::runner::RunnerOptions {
        crate::runner::RunnerOptions {
            out: self.out.clone(),
            resume: self.resume,
            jobs: self.jobs,
            worker: self.worker.clone(),
            report_only: false,
        }
    }
}
