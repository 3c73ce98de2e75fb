//! Chapter example, Haußmann (2021) *Bayesian neural networks for probabilistic machine
//! learning*, ch. 5: Bayesian evidential deep learning with the PAC-Bayes regulariser.
//!
//! Four classifiers with a Dirichlet over the class probabilities or a dropout posterior, and
//! how they treat inputs unlike the training data:
//! - **EDL** (Sensoy et al. 2018): a MAP net whose outputs are evidence, `α = relu(f) + 1`, the
//!   squared-error Bayes risk, `KL(Dir(α̃) ‖ Dir(1))` annealed over 10 epochs, and their code's
//!   L2 penalty `0.005·‖W‖²/2` on the dense weights;
//! - **EDL, softplus**: the same MAP net and annealed KL with the library's default head,
//!   `α = softplus(f) + 1` and the data term `E[ln π_y] = ψ(α_y) − ψ(α₀)`, no L2 penalty (where
//!   Sensoy's ReLU evidence switches off for many inputs at this budget, this head keeps
//!   learning);
//! - **BEDL-PAC** (§5.3): weights integrated out by CLT moments, `α = exp(f)`, the marginal
//!   `ln E[softmax(f)_y]` over 5 sampled outputs, and the PAC-Bayes bound of eq. 5.10 (`δ = 0.1`)
//!   as the objective, reported on the training set after fitting;
//! - **MC dropout** (Gal 2016), the baseline.
//!
//! 1. two moons, test points vs a ring far from the data;
//! 2. MNIST (quick budget) vs Fashion-MNIST when the files are found (`../shared/data`,
//!    `BNN_DATA_DIR`, or `~/.cache/bnn-burn/data`; else a message names the missing file).
//!
//! Each part prints the in-distribution error, the OOD sets' entropy-ECDF area (↓: `ln C − mean
//! entropy`, Table 5.2's measure) and the entropy histograms of both sets, one row per method,
//! and draws the histograms as a figure, one panel per method
//! (`runs/haussmann_ch5_bedl_ood/{moons,mnist}-entropy.svg`, or under `BNN_EXAMPLE_OUT`).
//!
//! `cargo run --release --example haussmann_ch5_bedl_ood`

use bnn_burn::host::{labels, matrix, to_labels, to_vec};
use bnn_burn::layers::WeightConfig;
use bnn_burn::likelihood::{
    Categorical, DirichletRegulariser, EdlLoss, Evidence, EvidentialConfig, LogitRule,
};
use bnn_burn::metrics::{accuracy_of, entropy_ecdf_area, mean};
use bnn_burn::nets::{ConvNetConfig, MlpConfig, MomentConfig};
use bnn_burn::objective::{PacBayes, PacBayesConfig};
use bnn_burn::posterior::PosteriorConfig;
use bnn_burn::predict::{ClassPrediction, Predict, PredictMode};
use bnn_burn::recipes::moment_weights;
use bnn_burn::train::{Inference, TrainConfig, Trainer};
use bnn_burn::{Prior, training_device};
use bnn_datasets::MnistFamily;
use bnn_examples::{MoonsTask, flat, moons_task, predict_images, quick_mnist};
use burn::module::Module;
use std::error::Error;

/// Draws of the sampled predictives (MC dropout's weights, BEDL-PAC's outputs).
const S: usize = 50;
/// Bins of the printed entropy histograms over `[0, ln C]`.
const BINS: usize = 10;
/// Bins of the drawn entropy histograms.
const FIGURE_BINS: usize = 20;

fn main() -> Result<(), Box<dyn Error>> {
    // Freed memory stays with the process: no heap trimming between training steps.
    bnn_burn::device::keep_freed_memory();
    let out = std::env::var_os("BNN_EXAMPLE_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "runs/haussmann_ch5_bedl_ood".into());
    std::fs::create_dir_all(&out)
        .map_err(|e| format!("BNN_EXAMPLE_OUT {}: cannot create it ({e})", out.display()))?;
    two_moons(&out)?;
    mnist(&out)?;
    Ok(())
}

/// Counts of `values` in `bins` equal bins of `[0, max]`, as fractions.
fn fractions(values: &[f64], max: f64, bins: usize) -> Vec<f64> {
    let mut counts = vec![0usize; bins];
    for &v in values {
        counts[((v / max * bins as f64).max(0.0) as usize).min(bins - 1)] += 1;
    }
    let n = values.len().max(1) as f64;
    counts.into_iter().map(|c| c as f64 / n).collect()
}

/// The entropy histograms as an SVG, one panel per method: the test inputs' (blue) against the
/// OOD inputs' (red, drawn half-transparent over them), fraction of inputs per bin of
/// `[0, ln C]`. Refuses non-finite entropies.
fn entropy_figure(
    path: &std::path::Path,
    rows: &[Row],
    classes: usize,
    out_name: &str,
) -> Result<(), Box<dyn Error>> {
    let max = (classes as f64).ln();
    let (pw, ph, m) = (300.0, 220.0, 40.0);
    let width = pw * rows.len() as f64;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" \
         fill=\"white\"/>\n",
        ph + 20.0
    );
    for (k, (method, _, inn, out)) in rows.iter().enumerate() {
        if let Some(bad) = inn.iter().chain(out).find(|v| !v.is_finite()) {
            return Err(format!(
                "{}: an entropy of {} is {bad}",
                path.display(),
                method.name()
            )
            .into());
        }
        let (x0, y0) = (k as f64 * pw + m, 30.0);
        let (w, h) = (pw - m - 10.0, ph - 60.0);
        let (fin, fout) = (
            fractions(inn, max, FIGURE_BINS),
            fractions(out, max, FIGURE_BINS),
        );
        let top = fin.iter().chain(&fout).copied().fold(0.05, f64::max);
        svg += &format!(
            "<text x=\"{}\" y=\"18\" text-anchor=\"middle\">{}</text>\n",
            x0 + w / 2.0,
            method.name()
        );
        for (fracs, colour) in [(&fin, "#1f5fbf"), (&fout, "#d62728")] {
            for (b, f) in fracs.iter().enumerate() {
                let bw = w / FIGURE_BINS as f64;
                let bh = h * f / top;
                svg += &format!(
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" \
                     fill=\"{colour}\" fill-opacity=\"0.55\"/>\n",
                    x0 + b as f64 * bw,
                    y0 + h - bh,
                    bw,
                    bh
                );
            }
        }
        svg += &format!(
            "<line x1=\"{x0}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"black\"/>\n\
             <line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{0}\" stroke=\"black\"/>\n\
             <text x=\"{x0}\" y=\"{2}\">0</text>\n\
             <text x=\"{1}\" y=\"{2}\" text-anchor=\"end\">ln {classes}</text>\n\
             <text x=\"{3}\" y=\"{2}\" text-anchor=\"middle\">predictive entropy</text>\n\
             <text x=\"{4}\" y=\"{y0}\" text-anchor=\"end\">{top:.2}</text>\n",
            y0 + h,
            x0 + w,
            y0 + h + 14.0,
            x0 + w / 2.0,
            x0 - 3.0,
        );
    }
    svg += &format!(
        "<text x=\"{m}\" y=\"{}\"><tspan fill=\"#1f5fbf\">■ test inputs</tspan> \
         <tspan fill=\"#d62728\">■ {out_name} (OOD)</tspan>, fraction per bin</text>\n</svg>\n",
        ph + 12.0
    );
    std::fs::write(path, svg).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("figure: {}", path.display());
    Ok(())
}

/// The four methods of the comparison.
#[derive(Clone, Copy)]
enum Method {
    Edl,
    EdlSoftplus,
    BedlPac,
    McDropout,
}

impl Method {
    const ALL: [Method; 4] = [
        Method::Edl,
        Method::EdlSoftplus,
        Method::BedlPac,
        Method::McDropout,
    ];

    fn name(self) -> &'static str {
        match self {
            Method::Edl => "EDL",
            Method::EdlSoftplus => "EDL, softplus",
            Method::BedlPac => "BEDL-PAC",
            Method::McDropout => "MC dropout",
        }
    }

    fn weights(self) -> WeightConfig {
        match self {
            Method::Edl | Method::EdlSoftplus => {
                WeightConfig::of(PosteriorConfig::point()).with_prior(Prior::gaussian(1.0))
            }
            Method::BedlPac => moment_weights(1.0),
            Method::McDropout => WeightConfig::of(PosteriorConfig::mc_dropout(0.2))
                .with_estimator(bnn_burn::layers::Estimator::LocalReparameterization)
                .with_prior(Prior::from_length_scale(1e-2)),
        }
    }

    fn mode(self) -> PredictMode {
        match self {
            Method::Edl | Method::EdlSoftplus => PredictMode::Samples(1),
            Method::BedlPac => PredictMode::Moments,
            Method::McDropout => PredictMode::Samples(S),
        }
    }
}

/// BEDL-PAC's head and moments, and its objective.
fn bedl_pac() -> (EvidentialConfig, MomentConfig, PacBayes) {
    let head = EvidentialConfig::new()
        .with_evidence(Evidence::Exp)
        .with_loss(EdlLoss::LogMarginal)
        .with_regulariser(DirichletRegulariser::Full);
    let moments = MomentConfig::clt()
        .with_train_logits(LogitRule::SampledMarginal { samples: 5 })
        .with_predict_logits(LogitRule::Sampled { samples: S });
    let pac = PacBayesConfig::new().init().expect("the thesis's settings");
    (head, moments, pac)
}

/// The four methods' nets on `net`'s architecture (built by `build` with the method's
/// weights and head), trained on `(x, y)` with `config`: each as a boxed predictor. BEDL-PAC's
/// bound on the training set is printed.
macro_rules! fit_all {
    ($build:expr, $x:expr, $y:expr, $config:expr, $device:expr) => {{
        let mut out: Vec<Box<dyn Predict<Input = _, Prediction = ClassPrediction>>> = Vec::new();
        for method in Method::ALL {
            $device.seed(7);
            match method {
                Method::Edl => {
                    let head = EvidentialConfig::sensoy();
                    let net = $build(method.weights()).init(head.init(), &$device)?;
                    let config = $config
                        .clone()
                        .with_decay_groups(vec![EvidentialConfig::sensoy_decay()]);
                    let trainer = Trainer::new(config).with_objective(head.objective()?);
                    out.push(Box::new(
                        trainer.fit(net, ($x.clone(), $y.clone()))?.0.valid(),
                    ));
                }
                Method::EdlSoftplus => {
                    let head = EvidentialConfig::new();
                    let net = $build(method.weights()).init(head.init(), &$device)?;
                    let trainer = Trainer::new($config.clone()).with_objective(head.objective()?);
                    out.push(Box::new(
                        trainer.fit(net, ($x.clone(), $y.clone()))?.0.valid(),
                    ));
                }
                Method::BedlPac => {
                    let (head, moments, pac) = bedl_pac();
                    let net = $build(method.weights())
                        .init(head.init(), &$device)?
                        .with_moments(moments)?;
                    let config = $config.clone().with_inference(Inference::Moments);
                    let trainer = Trainer::new(config).with_objective(pac);
                    let net = trainer.fit(net, ($x.clone(), $y.clone()))?.0.valid();
                    let plain = $device.clone().inner();
                    let bound = net.pac_bound(
                        $x.clone().to_device(&plain),
                        $y.clone().to_device(&plain),
                        &pac,
                        Inference::Moments,
                        S,
                    )?;
                    println!(
                        "BEDL-PAC on its training set: risk −E[p(y|x)] {:.4}, mean KL {:.2}, \
                         bound {:.4} (the thesis's (ln max B)/N = 1 makes it vacuous)",
                        bound.empirical_risk, bound.kl, bound.bound
                    );
                    out.push(Box::new(net));
                }
                Method::McDropout => {
                    let net = $build(method.weights()).init(Categorical, &$device)?;
                    let trainer = Trainer::new($config.clone());
                    out.push(Box::new(
                        trainer.fit(net, ($x.clone(), $y.clone()))?.0.valid(),
                    ));
                }
            }
        }
        out
    }};
}

/// One method's predictions: its predicted test classes, its test and OOD entropies.
type Row = (Method, Vec<usize>, Vec<f64>, Vec<f64>);

/// Prints the error, the OOD entropy-ECDF area and both entropy histograms of each method.
fn report(rows: &[Row], labels: &[usize], classes: usize, out_name: &str) {
    let max = (classes as f64).ln();
    let histogram = |h: &[f64]| {
        let mut counts = [0usize; BINS];
        for &v in h {
            let k = ((v / max * BINS as f64) as usize).min(BINS - 1);
            counts[k] += 1;
        }
        counts
            .iter()
            .map(|&n| format!("{:>3}", (100.0 * n as f64 / h.len() as f64).round()))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!(
        "| method | test error % | mean H (test) | mean H ({out_name}) | ECDF area ({out_name}) ↓ |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (method, predicted, inn, out) in rows {
        println!(
            "| {} | {:.2} | {:.3} | {:.3} | {:.3} |",
            method.name(),
            100.0 * (1.0 - accuracy_of(predicted, labels)),
            mean(inn),
            mean(out),
            entropy_ecdf_area(out, classes)
        );
    }
    println!("entropy histograms, % of inputs per tenth of [0, ln {classes}]:");
    for (method, _, inn, out) in rows {
        println!("  {:<13} test      {}", method.name(), histogram(inn));
        println!("  {:<13} {out_name:<9} {}", "", histogram(out));
    }
    println!();
}

fn two_moons(dir: &std::path::Path) -> Result<(), Box<dyn Error>> {
    let device = training_device();
    let plain = device.clone().inner();
    let MoonsTask {
        train: train_set,
        test: test_set,
        far,
        sx,
    } = moons_task()?;
    println!(
        "== Two moons, 2-50-50-2 ReLU nets, 200 epochs, Adam 3·10⁻³; OOD: a ring far from the data"
    );
    let x = matrix(&sx.transform(&flat(&train_set.x)), 2, &device);
    let y = labels(&train_set.label, &device);
    let config = TrainConfig::new(200)
        .with_batch_size(100)
        .with_learning_rate(3e-3)
        .with_seed(7)
        .with_progress(false);
    let build = |weights: WeightConfig| MlpConfig::new(2, vec![50, 50], 2).with_weights(weights);
    let nets = fit_all!(build, x, y, config, device);
    let mut rows = Vec::new();
    for (method, net) in Method::ALL.into_iter().zip(&nets) {
        let predict = |pts: &[[f64; 2]]| {
            let pred = net.predict(matrix(&sx.transform(&flat(pts)), 2, &plain), method.mode())?;
            Ok::<_, Box<dyn Error>>((to_labels(pred.predicted_class()), to_vec(pred.entropy())))
        };
        let (predicted, inn) = predict(&test_set.x)?;
        let (_, out) = predict(&far)?;
        rows.push((method, predicted, inn, out));
    }
    report(&rows, &test_set.label, 2, "far ring");
    entropy_figure(&dir.join("moons-entropy.svg"), &rows, 2, "far ring")?;
    Ok(())
}

fn mnist(dir: &std::path::Path) -> Result<(), Box<dyn Error>> {
    let (epochs, n_train, n_test) = (5, 10_000, 2_000);
    let Some((train_set, test_set, fashion)) = quick_mnist(n_train, n_test) else {
        return Ok(());
    };
    let device = training_device();
    let plain = device.clone().inner();
    println!(
        "== MNIST: strided LeNet5, {n_train} training images, {epochs} epochs, Adam 10⁻³, batch \
         100; OOD: {n_test} Fashion-MNIST test images"
    );
    let [c, h, w] = train_set.shape();
    let all: Vec<usize> = (0..train_set.len()).collect();
    let batch = train_set.batch(&all, &MnistFamily::Mnist.normalization(), &device);
    let config = TrainConfig::new(epochs)
        .with_batch_size(100)
        .with_learning_rate(1e-3)
        .with_seed(7)
        .with_progress(false);
    let build = |weights: WeightConfig| ConvNetConfig::lenet5([c, h, w], 10).with_weights(weights);
    let nets = fit_all!(build, batch.images, batch.labels, config, device);
    let labels: Vec<usize> = test_set.labels.iter().map(|&l| l as usize).collect();
    let mut rows = Vec::new();
    for (method, net) in Method::ALL.into_iter().zip(&nets) {
        let inn = predict_images(
            net.as_ref(),
            &test_set,
            MnistFamily::Mnist,
            method.mode(),
            &plain,
        )?;
        let out = predict_images(
            net.as_ref(),
            &fashion,
            MnistFamily::FashionMnist,
            method.mode(),
            &plain,
        )?;
        rows.push((method, inn.predicted, inn.entropy, out.entropy));
    }
    report(&rows, &labels, 10, "Fashion");
    entropy_figure(&dir.join("mnist-entropy.svg"), &rows, 10, "Fashion-MNIST")?;
    Ok(())
}
