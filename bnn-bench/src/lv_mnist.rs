//! BNN+LV on MNIST with the amortised encoder (Depeweg 2019 §6.1): which part of the
//! predictive entropy, aleatoric `E_W H[y*|W]` or epistemic `I(y*; W)`, rises when the data
//! change.
//!
//! Three models, each `[784 (+ z), 150, 150, 150, 10]` ReLU/softmax with Depeweg's weights under
//! black-box α = 1 and the encoder `g(x, y) → (m, v)` of `[784 + 10, 100, 2]` (the thesis):
//! - **standard**: the training images as they are; scored on the test images and on the test
//!   images rotated in 45° steps (the thesis: epistemic rises with rotation);
//! - **label noise**: labels 1 ↔ 7 swapped with probability ⅓ (the thesis: aleatoric rises for
//!   classes 1 and 7);
//! - **subsampled**: 75 % of the images of classes 0, 6, 8, 9 removed (the thesis: epistemic
//!   rises for those classes).
//!
//! Every test image's decomposition is closed form over classes from `n_w` weight draws with
//! `n_z` prior latents each ([`BnnLv::decompose_classes`]). The thesis trains 150 epochs
//! (Adam 10⁻³, batch 250); this runs a budget that fits a CPU (`--epochs`, `--train-images`)
//! and says so in its report.

use crate::experiment;
use bnn_burn::host::{labels, to_vec};
use bnn_burn::latent::{EncoderConfig, LatentConfig};
use bnn_burn::likelihood::Categorical;
use bnn_burn::metrics::{auroc, mean};
use bnn_burn::nets::{BnnLv, BnnLvConfig, ClassDecomposition, MlpConfig, depeweg_weights};
use bnn_burn::objective::AlphaConfig;
use bnn_burn::predict::{Predict, PredictMode};
use bnn_burn::train::{TrainConfig, Trainer};
use bnn_burn::training_device;
use bnn_datasets::{DataRoot, ImageSet, MnistFamily, Normalization, Split};
use burn::module::Module;
use burn::tensor::{Device, Tensor};
use std::error::Error;
use std::path::PathBuf;

/// Classes of MNIST.
const CLASSES: usize = 10;

/// Test images per decomposition pass.
const CHUNK: usize = 500;

/// The classes whose labels the label-noise model swaps (the thesis: 1 ↔ 7, p = ⅓).
pub const SWAPPED: (u8, u8, f64) = (1, 7, 1.0 / 3.0);

/// The classes the subsampled model sees less of, and the fraction of their images removed.
pub const SUBSAMPLED: ([u8; 4], f64) = ([0, 6, 8, 9], 0.75);

/// Options of one `lv-mnist` run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LvMnistOptions {
    /// Training epochs per model.
    pub epochs: usize,
    /// Training images (the first ones of the training split) before any subsampling.
    pub train_images: usize,
    /// Test images (the first ones of the test split).
    pub test_images: usize,
    /// Joint draws of weights and latents per step (`K` of the energy).
    pub train_samples: usize,
    /// Weight draws of the decomposition.
    pub n_w: usize,
    /// Prior-latent draws per weight draw.
    pub n_z: usize,
    /// Seed.
    pub seed: u64,
    /// Output folder.
    pub out: PathBuf,
    /// Data folder (default search when `None`).
    pub data_dir: Option<PathBuf>,
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
            out,
            data_dir: None,
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
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
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

/// Loads MNIST from `options.data_dir` (or the default search) and runs [`run_on`].
///
/// # Errors
/// Bad options (before any work), missing files, an unwritable output folder, a failed fit.
pub fn run(options: &LvMnistOptions) -> Result<LvMnistReport, Box<dyn Error>> {
    options.validate()?;
    experiment::prepare_out(&options.out)?;
    let root = DataRoot::new(options.data_dir.as_deref());
    let train = MnistFamily::Mnist.load(Split::Train, &root)?;
    let test = MnistFamily::Mnist.load(Split::Test, &root)?;
    run_on(
        options,
        &train.first(options.train_images),
        &test.first(options.test_images),
    )
}

/// Trains the three models on `train` and scores them on `test`; writes `lv-mnist.md`,
/// `lv-mnist.json` and `lv-mnist.svg` into `options.out`.
///
/// # Errors
/// As [`run`].
pub fn run_on(
    options: &LvMnistOptions,
    train: &ImageSet,
    test: &ImageSet,
) -> Result<LvMnistReport, Box<dyn Error>> {
    options.validate()?;
    experiment::prepare_out(&options.out)?;
    let start = std::time::Instant::now();
    let revision = experiment::git_revision();
    let (a, b, p) = SWAPPED;
    let (classes, drop) = SUBSAMPLED;
    let seed = |name: &str| experiment::derive(options.seed, &["lv-mnist", name], 0);
    let sets = [
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
    let mut scenarios = Vec::new();
    for (k, (name, set)) in sets.iter().enumerate() {
        eprintln!(
            "[lv-mnist] {name}: training {} epochs on {} images",
            options.epochs,
            set.len()
        );
        let (net, train_seconds) = fit(set, options, seed(name))?;
        let device = training_device().inner();
        let angles: &[f64] = if k == 0 {
            &[45.0, 90.0, 135.0, 180.0, 225.0, 270.0, 315.0]
        } else {
            &[]
        };
        let r = score(&net, name, set.len(), test, angles, options, &device)?;
        eprintln!(
            "[lv-mnist] {name}: error {:.2} %, LL {:.4}, misclassification AUROC {:.3} ({:.0} s)",
            r.error_pct, r.log_likelihood, r.misclassification_auroc, train_seconds
        );
        scenarios.push(ScenarioResult { train_seconds, ..r });
    }
    let findings = findings(&scenarios);
    let report = LvMnistReport {
        options: options.clone(),
        scenarios,
        findings,
        backend: bnn_burn::backend_name().to_string(),
        revision,
        wall_seconds: start.elapsed().as_secs_f64(),
    };
    std::fs::write(
        options.out.join("lv-mnist.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    std::fs::write(options.out.join("lv-mnist.md"), markdown(&report))?;
    plot(&options.out.join("lv-mnist.svg"), &report)?;
    Ok(report)
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
    device.seed(seed);
    let n = set.len();
    let all: Vec<usize> = (0..n).collect();
    let x = images(set, &all, &device);
    let ys: Vec<usize> = set.labels.iter().map(|&l| l as usize).collect();
    let y = labels(&ys, &device);
    let net = BnnLvConfig::new(
        MlpConfig::new(set.image_size(), vec![150, 150, 150], CLASSES)
            .with_weights(depeweg_weights(1.0)),
    )
    .with_latent(LatentConfig::new().with_encoder(Some(EncoderConfig::new(CLASSES))))
    .init(Categorical, n, &device)?;
    let config = TrainConfig::new(options.epochs)
        .with_batch_size(250)
        .with_learning_rate(1e-3)
        .with_train_samples(options.train_samples)
        .with_seed(seed);
    let (net, report) = Trainer::new(config)
        .with_objective(AlphaConfig::new().with_alpha(1.0).init()?)
        .fit(net, (x, y))?;
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

/// The patterns of [`Findings`] from the three scenarios (standard first).
pub fn findings(scenarios: &[ScenarioResult]) -> Findings {
    let rise = |k: usize, part: fn(&ClassRow) -> f64, group: &[u8]| {
        let (mut inside, mut outside) = (Vec::new(), Vec::new());
        for (base, other) in scenarios[0].classes.iter().zip(&scenarios[k].classes) {
            let d = part(other) - part(base);
            match group.contains(&(base.class as u8)) {
                true => inside.push(d),
                false => outside.push(d),
            }
        }
        (mean(&inside), mean(&outside))
    };
    let rotations = &scenarios[0].rotations;
    let turned: Vec<f64> = rotations
        .iter()
        .filter(|r| r.degrees != 0.0)
        .map(|r| r.epistemic)
        .collect();
    Findings {
        noise_aleatoric_rise: rise(1, |c| c.aleatoric, &[SWAPPED.0, SWAPPED.1]),
        subsample_epistemic_rise: rise(2, |c| c.epistemic, &SUBSAMPLED.0),
        rotation_epistemic: (
            mean(&turned),
            rotations.first().map(|r| r.epistemic).unwrap_or(f64::NAN),
        ),
    }
}

/// The Markdown report.
pub fn markdown(report: &LvMnistReport) -> String {
    let o = &report.options;
    let mut md = format!(
        "# BNN+LV on MNIST: aleatoric and epistemic entropy (Depeweg 2019 §6.1)\n\n\
         `[784 (+ z), 150, 150, 150, 10]` ReLU/softmax, Depeweg's weights, black-box α = 1, the \
         amortised encoder `[784 + 10, 100, 2]`; Adam 10⁻³, batch 250, K = {} joint draws per \
         step, **{} epochs** (the thesis: 150) on the first {} training images; {} test images; \
         decomposition from {} weight draws × {} prior latents (closed form over classes); \
         seed {}, backend `{}`, revision {}, wall {:.0} s.\n\n\
         | model | training images | error % | test LL | misclassification AUROC (total H) | \
         train s |\n|---|---:|---:|---:|---:|---:|\n",
        o.train_samples,
        o.epochs,
        o.train_images,
        o.test_images,
        o.n_w,
        o.n_z,
        o.seed,
        report.backend,
        report.revision,
        report.wall_seconds
    );
    for s in &report.scenarios {
        md += &format!(
            "| {} | {} | {:.2} | {:.4} | {:.3} | {:.0} |\n",
            s.scenario,
            s.n_train,
            s.error_pct,
            s.log_likelihood,
            s.misclassification_auroc,
            s.train_seconds
        );
    }
    md += "\nThe thesis: test accuracy 0.98 and a misclassification AUROC of 0.98 for the \
           standard model (150 epochs).\n\n## Per class: aleatoric / epistemic entropy (nats)\n\n\
           | class |";
    for s in &report.scenarios {
        md += &format!(" {} |", s.scenario);
    }
    md += "\n|---|";
    md += &"---:|".repeat(report.scenarios.len());
    md += "\n";
    for c in 0..CLASSES {
        md += &format!("| {c} |");
        for s in &report.scenarios {
            let r = &s.classes[c];
            md += &format!(" {:.3} / {:.3} |", r.aleatoric, r.epistemic);
        }
        md += "\n";
    }
    md += "\n## Rotated test images (standard model)\n\n| rotation | error % | aleatoric | \
           epistemic |\n|---:|---:|---:|---:|\n";
    for r in &report.scenarios[0].rotations {
        md += &format!(
            "| {}° | {:.1} | {:.3} | {:.3} |\n",
            r.degrees, r.error_pct, r.aleatoric, r.epistemic
        );
    }
    let f = &report.findings;
    let (noise, subsample, rotation) = f.holds();
    let yes = |b: bool| if b { "holds" } else { "**does not hold**" };
    md += &format!(
        "\n## The thesis's patterns\n\n\
         | change | expected | measured | |\n|---|---|---|---|\n\
         | labels {a}↔{b} swapped (p = ⅓) | aleatoric rises for {a} and {b} more than for the \
         rest | +{:.3} for {a}, {b} vs {:+.3} for the rest | {} |\n\
         | 75 % of classes 0, 6, 8, 9 removed | epistemic rises for those more than for the \
         rest | {:+.3} vs {:+.3} | {} |\n\
         | test images rotated 45°–315° | epistemic rises | {:.3} (rotated) vs {:.3} (upright) \
         | {} |\n",
        f.noise_aleatoric_rise.0,
        f.noise_aleatoric_rise.1,
        yes(noise),
        f.subsample_epistemic_rise.0,
        f.subsample_epistemic_rise.1,
        yes(subsample),
        f.rotation_epistemic.0,
        f.rotation_epistemic.1,
        yes(rotation),
        a = SWAPPED.0,
        b = SWAPPED.1,
    );
    md
}

/// Three panels: per-class aleatoric entropy (standard vs label noise), per-class epistemic
/// entropy (standard vs subsampled), and both parts against the rotation angle.
fn plot(path: &std::path::Path, report: &LvMnistReport) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1200, 380)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 3));
    let s = &report.scenarios;
    let per_class = |area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
                     title: &str,
                     part: fn(&ClassRow) -> f64,
                     other: &ScenarioResult|
     -> Result<(), Box<dyn Error>> {
        let top = s[0]
            .classes
            .iter()
            .chain(&other.classes)
            .map(part)
            .fold(0.0f64, f64::max)
            .max(1e-3)
            * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(45)
            .build_cartesian_2d(-0.5f64..9.5f64, 0f64..top)?;
        chart
            .configure_mesh()
            .x_desc("class")
            .y_desc("nats")
            .x_labels(10)
            .disable_mesh()
            .draw()?;
        for (k, (sc, color)) in [(&s[0], BLUE), (other, RED)].into_iter().enumerate() {
            let dx = -0.2 + 0.4 * k as f64;
            chart
                .draw_series(sc.classes.iter().map(|c| {
                    let x = c.class as f64 + dx;
                    Rectangle::new(
                        [(x - 0.18, 0.0), (x + 0.18, part(c))],
                        color.mix(0.7).filled(),
                    )
                }))?
                .label(sc.scenario.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 4), (x + 10, y + 4)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
        Ok(())
    };
    per_class(
        &panels[0],
        "aleatoric entropy per class",
        |c| c.aleatoric,
        &s[1],
    )?;
    per_class(
        &panels[1],
        "epistemic entropy per class",
        |c| c.epistemic,
        &s[2],
    )?;
    let rot = &s[0].rotations;
    let top = rot
        .iter()
        .map(|r| r.aleatoric.max(r.epistemic))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.1;
    let mut chart = ChartBuilder::on(&panels[2])
        .caption("rotated test images", ("sans-serif", 15))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(45)
        .build_cartesian_2d(0f64..315f64, 0f64..top)?;
    chart
        .configure_mesh()
        .x_desc("rotation (degrees)")
        .y_desc("nats")
        .disable_mesh()
        .draw()?;
    for (name, color, part) in [
        (
            "aleatoric",
            BLUE,
            (|r: &AngleRow| r.aleatoric) as fn(&AngleRow) -> f64,
        ),
        ("epistemic", RED, |r: &AngleRow| r.epistemic),
    ] {
        chart
            .draw_series(LineSeries::new(
                rot.iter().map(|r| (r.degrees, part(r))),
                color.stroke_width(2),
            ))?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten classes of bars at distinct angles and positions: the three models train, every
    /// number is finite, the files are written, and bad counts are refused before any work.
    #[test]
    fn a_small_run_writes_its_report_and_refuses_bad_counts() {
        let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
        let make = |n: usize, shift: usize| {
            let mut pixels = vec![0u8; n * 784];
            let mut classes = vec![0u8; n];
            for i in 0..n {
                let c = i % CLASSES;
                classes[i] = c as u8;
                let at = 4 + 2 * c + (i / CLASSES + shift) % 2;
                for r in 4..24 {
                    let (rr, cc) = if c.is_multiple_of(2) {
                        (r, at)
                    } else {
                        (at, r)
                    };
                    pixels[i * 784 + rr * 28 + cc] = 255;
                }
            }
            ImageSet::new(pixels, classes, [1, 28, 28], CLASSES).unwrap()
        };
        let dir = std::env::temp_dir().join(format!("bnn-lv-mnist-{}", std::process::id()));
        let options = LvMnistOptions {
            epochs: 2,
            train_images: 400,
            test_images: 100,
            train_samples: 2,
            n_w: 3,
            n_z: 2,
            ..LvMnistOptions::quick(dir.clone())
        };
        let report = run_on(&options, &make(400, 0), &make(100, 1)).unwrap();
        assert_eq!(report.scenarios.len(), 3);
        assert_eq!(report.scenarios[0].rotations.len(), 8);
        assert!(report.scenarios[2].n_train < 400);
        for s in &report.scenarios {
            assert!(s.error_pct.is_finite() && s.log_likelihood.is_finite());
            assert_eq!(s.classes.iter().map(|c| c.n).sum::<usize>(), 100);
            assert!(
                s.classes
                    .iter()
                    .all(|c| c.aleatoric >= 0.0 && c.epistemic > -1e-6)
            );
        }
        for f in ["lv-mnist.md", "lv-mnist.json", "lv-mnist.svg"] {
            assert!(dir.join(f).is_file(), "{f}");
        }
        let md = std::fs::read_to_string(dir.join("lv-mnist.md")).unwrap();
        assert!(md.contains("The thesis's patterns"), "{md}");
        let bad = LvMnistOptions {
            n_z: 0,
            ..options.clone()
        };
        assert!(
            run_on(&bad, &make(10, 0), &make(10, 0))
                .unwrap_err()
                .to_string()
                .contains("--n-z")
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The patterns compare each group's change against the rest's.
    #[test]
    fn findings_compare_the_changed_classes_with_the_rest() {
        let scenario = |alea: [f64; 10], epi: [f64; 10]| ScenarioResult {
            scenario: String::new(),
            n_train: 1,
            error_pct: 0.0,
            log_likelihood: 0.0,
            misclassification_auroc: 0.5,
            classes: (0..CLASSES)
                .map(|c| ClassRow {
                    class: c,
                    n: 1,
                    error_pct: 0.0,
                    aleatoric: alea[c],
                    epistemic: epi[c],
                })
                .collect(),
            rotations: vec![],
            train_seconds: 0.0,
        };
        let mut base = scenario([0.1; 10], [0.2; 10]);
        base.rotations = vec![
            AngleRow {
                degrees: 0.0,
                error_pct: 1.0,
                aleatoric: 0.1,
                epistemic: 0.1,
            },
            AngleRow {
                degrees: 90.0,
                error_pct: 50.0,
                aleatoric: 0.3,
                epistemic: 0.5,
            },
        ];
        let mut noisy = [0.1; 10];
        noisy[1] = 0.5;
        noisy[7] = 0.3;
        let mut sparse = [0.2; 10];
        sparse[8] = 0.6;
        let f = findings(&[
            base,
            scenario(noisy, [0.2; 10]),
            scenario([0.1; 10], sparse),
        ]);
        assert!((f.noise_aleatoric_rise.0 - 0.3).abs() < 1e-12);
        assert!(f.noise_aleatoric_rise.1.abs() < 1e-12);
        assert!((f.subsample_epistemic_rise.0 - 0.1).abs() < 1e-12);
        assert_eq!(f.rotation_epistemic, (0.5, 0.1));
        assert_eq!(f.holds(), (true, true, true));
    }
}
