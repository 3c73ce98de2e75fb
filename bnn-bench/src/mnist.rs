//! `bnn-bench mnist`: train on MNIST, test on MNIST (in-distribution) and on Fashion-MNIST
//! (out-of-distribution), for every method as an MLP 784-400-400-10 and as the strided LeNet5
//! of Haußmann (2021, Table 3.4). Reports error %, NLL, ECE, Brier, the OOD AUROC of predictive
//! entropy and of mutual information, and the entropy-ECDF area of Haußmann §5 (Table 5.2),
//! with reliability diagrams and entropy histograms.

use crate::experiment;
use crate::methods::Method;
use crate::mnist_published;
use bnn_burn::host::to_vec;
use bnn_burn::layers::Estimator;
use bnn_burn::likelihood::Categorical;
use bnn_burn::metrics::{
    ReliabilityBin, accuracy, auroc, brier, ece, entropy_ecdf_area, nll, reliability_curve,
};
use bnn_burn::nets::{Classifier, ConvNetConfig, ImageClassifier, MlpConfig};
use bnn_burn::predict::{ClassPrediction, Predict, PredictError, PredictMode};
use bnn_burn::train::{TrainConfig, train};
use bnn_burn::training_device;
use bnn_datasets::{DataRoot, ImageSet, MnistFamily, Normalization, Split};
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor};
use std::error::Error;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

/// Classes of MNIST and Fashion-MNIST.
const N_CLASSES: usize = 10;
/// Bins of the reliability diagrams and the ECE (Guo et al. 2017).
pub const ECE_BINS: usize = 15;
/// Bins of the entropy histograms on `[0, ln 10]`.
pub const ENTROPY_BINS: usize = 40;
/// Images per prediction chunk (bounds memory at `S × chunk × activations`).
const CHUNK: usize = 500;

/// The network shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Arch {
    /// MLP 784-400-400-10 (Blundell et al. 2015; Farquhar 2022 §4.3).
    Mlp,
    /// Strided LeNet5: conv 20 and 50, 5×5, stride 2; dense 500 (Haußmann 2021 Table 3.4).
    LeNet5,
}

impl Arch {
    /// Both, in table order.
    pub const ALL: [Arch; 2] = [Arch::Mlp, Arch::LeNet5];

    /// Name in tables and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Mlp => "MLP 784-400-400-10",
            Arch::LeNet5 => "LeNet5 (strided)",
        }
    }
}

impl FromStr for Arch {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "mlp" => Ok(Arch::Mlp),
            "lenet5" | "lenet" => Ok(Arch::LeNet5),
            _ => Err(format!("unknown architecture {s:?}; known: mlp, lenet5")),
        }
    }
}

/// Every method, in table order, under its catalogue name ([`Method`]): MAP with a N(0, 1)
/// prior (the deterministic net); MC dropout with p = 0.2 on every layer input and Gal's
/// length-scale 10⁻²; mean-field with local reparameterisation (MFVI-LRT) and radial with
/// N(0, 1) priors and ρ₀ = −5.
pub fn methods() -> Vec<Method> {
    vec![
        Method::map(1.0),
        Method::mc_dropout(0.2, 1e-2),
        Method::mean_field(Estimator::LocalReparameterization),
        Method::radial(),
    ]
}

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
    /// Output folder.
    pub out: PathBuf,
    /// Data folder (default search when `None`).
    pub data_dir: Option<PathBuf>,
}

impl MnistOptions {
    fn epochs(&self) -> usize {
        self.epochs.unwrap_or(if self.quick { 2 } else { 10 })
    }
}

/// What one (architecture, method) run measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MnistResult {
    /// Architecture.
    pub arch: Arch,
    /// Method.
    pub method: String,
    /// Epochs trained.
    pub epochs: usize,
    /// Seed of this run.
    pub seed: u64,
    /// MNIST test error, %.
    pub error_pct: f64,
    /// MNIST test NLL per image (nats).
    pub nll: f64,
    /// Expected calibration error (15 bins).
    pub ece: f64,
    /// Brier score (sum over classes, mean over images).
    pub brier: f64,
    /// AUROC of predictive entropy, Fashion-MNIST (positive) vs MNIST test.
    pub auroc_entropy: f64,
    /// AUROC of mutual information (BALD), same sets.
    pub auroc_mi: f64,
    /// Area under the ECDF of predictive entropies on Fashion-MNIST over `[0, ln 10]` (↓).
    pub ecdf_area: f64,
    /// Mean predictive entropy on MNIST test.
    pub mean_entropy_in: f64,
    /// Mean predictive entropy on Fashion-MNIST.
    pub mean_entropy_out: f64,
    /// Training wall time, s.
    pub train_seconds: f64,
    /// Reliability diagram of the MNIST test predictions.
    pub reliability: Vec<ReliabilityBin>,
    /// Entropy histogram counts on `[0, ln 10]`, MNIST test.
    pub entropy_hist_in: Vec<usize>,
    /// Entropy histogram counts on `[0, ln 10]`, Fashion-MNIST.
    pub entropy_hist_out: Vec<usize>,
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
        Ok(())
    }
}

/// A trained model of either shape.
enum Trained {
    Mlp(Classifier),
    Conv(ImageClassifier),
}

impl Trained {
    fn predict(&self, images: Tensor<4>, samples: usize) -> Result<ClassPrediction, PredictError> {
        let mode = PredictMode::Samples(samples);
        match self {
            Trained::Mlp(m) => {
                let [b, c, h, w] = images.dims();
                m.predict(images.reshape([b, c * h * w]), mode)
            }
            Trained::Conv(m) => m.predict(images, mode),
        }
    }
}

/// Per-image predictive probabilities `[n, C]`, log-likelihoods of the labels, predictive
/// entropies and mutual informations.
struct Predictions {
    probs: Vec<f64>,
    log_likelihood: Vec<f64>,
    entropy: Vec<f64>,
    mi: Vec<f64>,
}

fn predict_set(
    model: &Trained,
    set: &ImageSet,
    norm: &Normalization,
    samples: usize,
    device: &Device,
) -> Result<Predictions, PredictError> {
    let mut p = Predictions {
        probs: Vec::with_capacity(set.len() * N_CLASSES),
        log_likelihood: Vec::with_capacity(set.len()),
        entropy: Vec::with_capacity(set.len()),
        mi: Vec::with_capacity(set.len()),
    };
    let indices: Vec<usize> = (0..set.len()).collect();
    for chunk in indices.chunks(CHUNK) {
        let batch = set.batch(chunk, norm, device);
        let pred = model.predict(batch.images, samples)?;
        p.probs.extend(to_vec(pred.mean()));
        p.log_likelihood.extend(to_vec(pred.log_prob(batch.labels)));
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

/// The image sets of a run: MNIST train and test, Fashion-MNIST test (OOD).
pub struct MnistData {
    /// Training images.
    pub train: ImageSet,
    /// In-distribution test images.
    pub test: ImageSet,
    /// Out-of-distribution images.
    pub ood: ImageSet,
}

impl MnistData {
    /// Loads the files (quick: the first 10 000 / 2 000 / 2 000 images).
    pub fn load(root: &DataRoot, quick: bool) -> Result<Self, Box<dyn Error>> {
        let train = MnistFamily::Mnist.load(Split::Train, root)?;
        let test = MnistFamily::Mnist.load(Split::Test, root)?;
        let ood = MnistFamily::FashionMnist.load(Split::Test, root)?;
        Ok(if quick {
            Self {
                train: train.first(10_000),
                test: test.first(2_000),
                ood: ood.first(2_000),
            }
        } else {
            Self { train, test, ood }
        })
    }
}

/// Trains one method on one architecture and measures it.
pub fn run_one(
    arch: Arch,
    method: &Method,
    data: &MnistData,
    epochs: usize,
    samples: usize,
    seed: u64,
) -> Result<MnistResult, Box<dyn Error>> {
    let device = training_device();
    device.seed(seed);
    let mnist = MnistFamily::Mnist.normalization();
    let all: Vec<usize> = (0..data.train.len()).collect();
    let batch = data.train.batch(&all, &mnist, &device);
    let labels: Tensor<1, Int> = batch.labels;
    let config = TrainConfig::new(epochs)
        .with_batch_size(100)
        .with_learning_rate(1e-3)
        .with_seed(seed)
        .with_progress(true);
    let [c, h, w] = data.train.shape();
    let t0 = Instant::now();
    let model = match arch {
        Arch::Mlp => {
            let net: Classifier = MlpConfig::new(c * h * w, vec![400, 400], N_CLASSES)
                .with_weights(method.weights.clone())
                .init(Categorical, &device)?;
            let x = batch.images.reshape([data.train.len(), c * h * w]);
            let (m, _) = train(net, (x, labels), &config)?;
            Trained::Mlp(m.valid())
        }
        Arch::LeNet5 => {
            let net: ImageClassifier = ConvNetConfig::lenet5([c, h, w], N_CLASSES)
                .with_weights(method.weights.clone())
                .init(Categorical, &device)?;
            let (m, _) = train(net, (batch.images, labels), &config)?;
            Trained::Conv(m.valid())
        }
    };
    let train_seconds = t0.elapsed().as_secs_f64();
    let plain = device.inner();
    let inn = predict_set(&model, &data.test, &mnist, samples, &plain)?;
    // Each set is normalised with its own statistics, as in the thesis code.
    let out = predict_set(
        &model,
        &data.ood,
        &MnistFamily::FashionMnist.normalization(),
        samples,
        &plain,
    )?;
    let labels: Vec<usize> = data.test.labels.iter().map(|&l| l as usize).collect();
    let max_entropy = (N_CLASSES as f64).ln();
    Ok(MnistResult {
        arch,
        method: method.name.to_string(),
        epochs,
        seed,
        error_pct: 100.0 * (1.0 - accuracy(&inn.probs, N_CLASSES, &labels)),
        nll: nll(&inn.log_likelihood),
        ece: ece(&inn.probs, N_CLASSES, &labels, ECE_BINS),
        brier: brier(&inn.probs, N_CLASSES, &labels),
        auroc_entropy: auroc(&inn.entropy, &out.entropy),
        auroc_mi: auroc(&inn.mi, &out.mi),
        ecdf_area: entropy_ecdf_area(&out.entropy, N_CLASSES),
        mean_entropy_in: bnn_burn::metrics::mean(&inn.entropy),
        mean_entropy_out: bnn_burn::metrics::mean(&out.entropy),
        train_seconds,
        reliability: reliability_curve(&inn.probs, N_CLASSES, &labels, ECE_BINS),
        entropy_hist_in: histogram(&inn.entropy, max_entropy, ENTROPY_BINS),
        entropy_hist_out: histogram(&out.entropy, max_entropy, ENTROPY_BINS),
    })
}

/// Runs every selected (architecture, method) and writes `mnist.json`, `mnist.md`,
/// `reliability.svg` and `entropy.svg` to `options.out`.
pub fn run(options: &MnistOptions) -> Result<Vec<MnistResult>, Box<dyn Error>> {
    let start = Instant::now();
    crate::experiment::git_revision();
    let all = methods();
    let selected = experiment::select(&all, &options.methods, |m| m.name)?;
    let archs = if options.archs.is_empty() {
        Arch::ALL.to_vec()
    } else {
        options.archs.clone()
    };
    if options.prediction_samples == 0 {
        return Err("--samples must be at least 1".into());
    }
    if options.epochs == Some(0) {
        return Err("--epochs must be at least 1".into());
    }
    experiment::prepare_out(&options.out)?;
    let root = DataRoot::new(options.data_dir.as_deref());
    let data = MnistData::load(&root, options.quick)?;
    let epochs = options.epochs();
    let mut results = Vec::new();
    for &arch in &archs {
        for method in &selected {
            let seed = experiment::derive(options.seed, &[arch.name(), method.name], 0);
            eprintln!(
                "[mnist] {} / {}: training {} epochs on {} images",
                arch.name(),
                method.name,
                epochs,
                data.train.len()
            );
            let r = run_one(
                arch,
                method,
                &data,
                epochs,
                options.prediction_samples,
                seed,
            )?;
            eprintln!(
                "[mnist] {} / {}: error {:.2} %, NLL {:.4}, ECE {:.4}, AUROC(H) {:.3}, \
                 AUROC(MI) {:.3}, ECDF area {:.3} ({:.0} s)",
                arch.name(),
                method.name,
                r.error_pct,
                r.nll,
                r.ece,
                r.auroc_entropy,
                r.auroc_mi,
                r.ecdf_area,
                r.train_seconds
            );
            results.push(r);
        }
    }
    let wall = start.elapsed().as_secs_f64();
    write_report(options, &data, &results, wall)?;
    Ok(results)
}

/// The Markdown report: our table, then the published rows.
pub fn markdown(
    options: &MnistOptions,
    data: &MnistData,
    results: &[MnistResult],
    wall: f64,
) -> String {
    let mut md = format!(
        "# MNIST: classification, calibration and OOD (Fashion-MNIST)\n\n\
         {} training, {} MNIST test and {} Fashion-MNIST test images{}; {} epochs, Adam lr 10⁻³, \
         batch 100, 1 training sample; {} prediction samples (1 for MAP, the deterministic net); \
         seed {}, backend `{}`, wall time {:.0} s.\n\n\
         | architecture | method | error % | NLL | ECE | Brier | AUROC entropy | AUROC MI | \
         ECDF area ↓ | mean H in | mean H out | train s |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        data.train.len(),
        data.test.len(),
        data.ood.len(),
        if options.quick { " (--quick)" } else { "" },
        options.epochs(),
        options.prediction_samples,
        options.seed,
        bnn_burn::backend_name(),
        wall
    );
    for r in results {
        md.push_str(&format!(
            "| {} | {} | {:.2} | {:.4} | {:.4} | {:.4} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | \
             {:.0} |\n",
            r.arch.name(),
            r.method,
            r.error_pct,
            r.nll,
            r.ece,
            r.brier,
            r.auroc_entropy,
            r.auroc_mi,
            r.ecdf_area,
            r.mean_entropy_in,
            r.mean_entropy_out,
            r.train_seconds
        ));
    }
    md.push_str(
        "\nECDF area: the area under the empirical CDF of predictive entropies on the OOD set \
         over [0, ln 10] = ln 10 − mean entropy (Haußmann 2021 §5.7); 0 when every OOD \
         prediction is uniform, 2.303 when every one is certain. AUROC: OOD images are the \
         positives, scored by predictive entropy or by mutual information.\n\n\
         ## Published (strided LeNet5)\n\n| method | MNIST error % | Fashion-MNIST ECDF area ↓ | \
         source |\n|---|---:|---:|---|\n",
    );
    for p in mnist_published::all() {
        md.push_str(&format!(
            "| {} | {:.2} | {} | {} |\n",
            p.method,
            p.error_pct,
            p.ecdf_area
                .map(|a| format!("{a:.3}"))
                .unwrap_or_else(|| "–".into()),
            p.source
        ));
    }
    md
}

fn write_report(
    options: &MnistOptions,
    data: &MnistData,
    results: &[MnistResult],
    wall: f64,
) -> Result<(), Box<dyn Error>> {
    for r in results {
        r.check()?;
    }
    std::fs::create_dir_all(&options.out)?;
    let md = markdown(options, data, results, wall);
    std::fs::write(options.out.join("mnist.md"), &md)?;
    let record = experiment::record(
        "mnist",
        options,
        wall,
        &results,
        serde_json::json!({
            "epochs": options.epochs(),
            "n_train": data.train.len(),
            "n_test": data.test.len(),
            "n_ood": data.ood.len(),
        }),
    );
    std::fs::write(
        options.out.join("mnist.json"),
        serde_json::to_string_pretty(&record)?,
    )?;
    plot_reliability(&options.out.join("reliability.svg"), results)?;
    plot_entropy(&options.out.join("entropy.svg"), results)?;
    println!("{md}");
    Ok(())
}

type Area<'a> =
    plotters::drawing::DrawingArea<plotters::prelude::SVGBackend<'a>, plotters::coord::Shift>;

/// A white SVG with one panel per result: one row per architecture, one column per method.
/// Returns the root (to present) and the results' panels, in result order.
fn panel_grid<'a>(
    path: &'a Path,
    results: &[MnistResult],
) -> Result<(Area<'a>, Vec<Area<'a>>), Box<dyn Error>> {
    use plotters::prelude::*;
    let mut archs = Vec::new();
    let mut methods: Vec<&str> = Vec::new();
    for r in results {
        if !archs.contains(&r.arch) {
            archs.push(r.arch);
        }
        if !methods.contains(&r.method.as_str()) {
            methods.push(&r.method);
        }
    }
    let (rows, cols) = (archs.len().max(1), methods.len().max(1));
    let root = SVGBackend::new(path, (300 * cols as u32, 300 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let cells = root.split_evenly((rows, cols));
    let panels = results
        .iter()
        .map(|r| {
            let row = archs.iter().position(|a| *a == r.arch).unwrap_or(0);
            let col = methods.iter().position(|m| *m == r.method).unwrap_or(0);
            cells[row * cols + col].clone()
        })
        .collect();
    Ok((root, panels))
}

/// Reliability diagrams: accuracy per confidence bin against the diagonal.
fn plot_reliability(path: &Path, results: &[MnistResult]) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;
    let (root, panels) = panel_grid(path, results)?;
    for (r, area) in results.iter().zip(&panels) {
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{} {} (ECE {:.3})", short(r.arch), r.method, r.ece),
                ("sans-serif", 14),
            )
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(35)
            .build_cartesian_2d(0f64..1f64, 0f64..1f64)?;
        chart
            .configure_mesh()
            .x_desc("confidence")
            .y_desc("accuracy")
            .disable_mesh()
            .draw()?;
        chart.draw_series(r.reliability.iter().filter(|b| b.count > 0).map(|b| {
            Rectangle::new(
                [(b.lower, 0.0), (b.upper, b.accuracy)],
                BLUE.mix(0.6).filled(),
            )
        }))?;
        chart.draw_series(LineSeries::new(
            [(0.0, 0.0), (1.0, 1.0)],
            BLACK.stroke_width(1),
        ))?;
    }
    root.present()?;
    Ok(())
}

fn short(arch: Arch) -> &'static str {
    match arch {
        Arch::Mlp => "MLP",
        Arch::LeNet5 => "LeNet5",
    }
}

/// Predictive-entropy histograms, MNIST test (blue) against Fashion-MNIST (red), as densities.
fn plot_entropy(path: &Path, results: &[MnistResult]) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;
    let (root, panels) = panel_grid(path, results)?;
    let max_h = (N_CLASSES as f64).ln();
    let width = max_h / ENTROPY_BINS as f64;
    let density = |h: &[usize]| -> Vec<f64> {
        let n = h.iter().sum::<usize>().max(1) as f64;
        h.iter().map(|&c| c as f64 / (n * width)).collect()
    };
    for (k, (r, area)) in results.iter().zip(&panels).enumerate() {
        let (din, dout) = (density(&r.entropy_hist_in), density(&r.entropy_hist_out));
        // Clip the y axis so the in-distribution spike at 0 does not flatten the OOD bars.
        let top = dout.iter().copied().fold(1.0, f64::max) * 1.2;
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!(
                    "{} {} (AUROC {:.3})",
                    short(r.arch),
                    r.method,
                    r.auroc_entropy
                ),
                ("sans-serif", 14),
            )
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(35)
            .build_cartesian_2d(0f64..max_h, 0f64..top)?;
        chart
            .configure_mesh()
            .x_desc("predictive entropy (nats)")
            .y_desc("density")
            .disable_mesh()
            .draw()?;
        for (d, color, label) in [
            (&din, BLUE, "MNIST test (in)"),
            (&dout, RED, "Fashion-MNIST (OOD)"),
        ] {
            chart
                .draw_series(d.iter().enumerate().map(|(i, &v)| {
                    let x0 = i as f64 * width;
                    Rectangle::new(
                        [(x0, 0.0), (x0 + width, v.min(top))],
                        color.mix(0.4).filled(),
                    )
                }))?
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.mix(0.4).filled())
                });
        }
        if k == 0 {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
        }
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_bins_cover_the_range_and_keep_every_value() {
        let h = histogram(&[0.0, 0.1, 0.5, 0.99, 1.0, 1.5], 1.0, 4);
        assert_eq!(h, vec![2, 0, 1, 3]);
    }

    #[test]
    fn arch_names_parse() {
        assert_eq!("MLP".parse::<Arch>().unwrap(), Arch::Mlp);
        assert_eq!("lenet5".parse::<Arch>().unwrap(), Arch::LeNet5);
        assert!("resnet".parse::<Arch>().unwrap_err().contains("lenet5"));
    }

    /// A tiny synthetic "MNIST" (two shapes of 28×28 images) runs end to end for every
    /// method and both architectures, writes its files, and scores the in-distribution set
    /// better than chance.
    #[test]
    fn a_small_run_writes_its_table_and_figures() {
        let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
        let make = |n: usize, shift: usize| {
            let mut pixels = vec![0u8; n * 784];
            let mut labels = vec![0u8; n];
            for i in 0..n {
                let class = (i % 2) as u8;
                labels[i] = class;
                for r in 4..24 {
                    // Class 0: a vertical bar; class 1: a horizontal bar; at one of 5
                    // positions.
                    let at = 11 + (i / 2 + shift) % 5;
                    let (rr, cc) = if class == 0 { (r, at) } else { (at, r) };
                    pixels[i * 784 + rr * 28 + cc] = 255;
                }
            }
            ImageSet::new(pixels, labels, [1, 28, 28], 10).unwrap()
        };
        let data = MnistData {
            train: make(200, 0),
            test: make(40, 1),
            ood: {
                let mut s = make(40, 0);
                s.pixels
                    .iter_mut()
                    .enumerate()
                    .for_each(|(i, p)| *p = (i * 37 % 256) as u8);
                s
            },
        };
        let dir = std::env::temp_dir().join(format!("bnn-mnist-test-{}", std::process::id()));
        let options = MnistOptions {
            methods: vec![],
            archs: vec![],
            epochs: Some(5),
            seed: 0,
            quick: true,
            prediction_samples: 4,
            out: dir.clone(),
            data_dir: None,
        };
        let mut results = Vec::new();
        for arch in Arch::ALL {
            for m in methods() {
                let r = run_one(arch, &m, &data, 5, 4, 1).unwrap();
                assert!(
                    r.error_pct < 30.0,
                    "{} {}: {}",
                    arch.name(),
                    m.name,
                    r.error_pct
                );
                assert!(r.ecdf_area >= 0.0 && r.ecdf_area <= 10f64.ln() + 1e-9);
                assert_eq!(r.entropy_hist_in.iter().sum::<usize>(), 40);
                results.push(r);
            }
        }
        // The same seed gives the same numbers.
        let again = run_one(Arch::LeNet5, &methods()[3], &data, 5, 4, 1).unwrap();
        let first = &results[Arch::ALL.len() * methods().len() - 1];
        assert_eq!(
            (again.error_pct, again.nll, again.ecdf_area, again.auroc_mi),
            (first.error_pct, first.nll, first.ecdf_area, first.auroc_mi)
        );
        write_report(&options, &data, &results, 1.0).unwrap();
        let md = std::fs::read_to_string(dir.join("mnist.md")).unwrap();
        assert!(md.contains("| LeNet5 (strided) | Radial |") && md.contains("BEDL-PAC"));
        for f in ["mnist.json", "reliability.svg", "entropy.svg"] {
            assert!(dir.join(f).metadata().unwrap().len() > 100, "{f}");
        }
        std::fs::remove_dir_all(dir).ok();
    }
}
