//! Chapter example, Haußmann (2021) *Bayesian neural networks for probabilistic machine
//! learning*, ch. 4: the CLT-BNN, the predictor of its active-learning loop.
//!
//! Mean-field Gaussian weights; the exact Gaussian moments of every ReLU are propagated through
//! all layers (the "CLT trick"), giving logits `f_c ~ N(g_c(x), h_c(x))`, and the multi-label
//! probit likelihood `y_c ~ Ber(Φ(f_c))` has the closed-form predictive
//! `p(y_c = 1 | x) = Φ(g_c / √(1 + h_c))` (eq. 4.4): the predictive entropy that ranks the pool
//! costs one deterministic pass. This example checks it against Monte Carlo through sampled
//! weights of the same trained net (per-image agreement, OOD separation, time):
//!
//! 1. two moons, test points vs a ring far from the data;
//! 2. MNIST (quick budget) vs Fashion-MNIST, when the files are found (`../shared/data`,
//!    `BNN_DATA_DIR`, or `~/.cache/bnn-burn/data`; else a message names the missing file).
//!
//! `cargo run --release --example haussmann_ch4_clt`

use bnn_burn::host::{labels, matrix, to_vec};
use bnn_burn::likelihood::{LogitRule, MultiLabelProbit};
use bnn_burn::metrics::{accuracy, auroc, mean};
use bnn_burn::nets::{ConvNetConfig, MlpConfig, MomentConfig};
use bnn_burn::predict::{Predict, PredictMode};
use bnn_burn::recipes::moment_weights;
use bnn_burn::train::{Inference, TrainConfig, train};
use bnn_burn::training_device;
use bnn_datasets::MnistFamily;
use bnn_examples::{MoonsTask, flat, moons_task, predict_images, quick_mnist};
use burn::module::Module;
use std::error::Error;
use std::time::Instant;

/// Weight draws of the Monte Carlo predictive.
const S: usize = 50;

fn main() -> Result<(), Box<dyn Error>> {
    // Freed memory stays with the process: no heap trimming between training steps.
    bnn_burn::device::keep_freed_memory();
    two_moons()?;
    mnist()?;
    Ok(())
}

/// CLT moments, trained with the reference code's plug-in probit loss, predicting by the exact
/// per-class marginals.
fn clt() -> MomentConfig {
    MomentConfig::clt()
        .with_train_logits(LogitRule::Probit)
        .with_predict_logits(LogitRule::Probit)
}

/// Prints the comparison table of the entropies of `(moments, samples)` on the in- and
/// out-of-distribution sets, with the prediction times.
fn report(inn: [&[f64]; 2], out: [&[f64]; 2], ms: [f64; 2], out_name: &str) {
    println!("| predictive | mean H (test) | mean H ({out_name}) | AUROC | time ms |");
    println!("|---|---:|---:|---:|---:|");
    for (k, name) in ["closed form (moments)", "Monte Carlo, S = 50"]
        .iter()
        .enumerate()
    {
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.0} |",
            mean(inn[k]),
            mean(out[k]),
            auroc(inn[k], out[k]),
            ms[k]
        );
    }
    let both = |k: usize| [inn[k], out[k]].concat();
    println!(
        "per-input correlation of the two entropies: {:.3}; closed form {:.0}× faster\n",
        bnn_burn::metrics::pearson(&both(0), &both(1)),
        ms[1] / ms[0].max(1e-9)
    );
}

fn two_moons() -> Result<(), Box<dyn Error>> {
    let device = training_device();
    let plain = device.clone().inner();
    let MoonsTask {
        train: train_set,
        test: test_set,
        far,
        sx,
    } = moons_task()?;
    device.seed(3);
    let net = MlpConfig::new(2, vec![50, 50], 2)
        .with_weights(moment_weights(10.0))
        .init(MultiLabelProbit, &device)?
        .with_moments(clt())?;
    let config = TrainConfig::new(200)
        .with_inference(Inference::Moments)
        .with_batch_size(100)
        .with_learning_rate(3e-3)
        .with_seed(3)
        .with_progress(false);
    let x = matrix(&sx.transform(&flat(&train_set.x)), 2, &device);
    let (net, _) = train(net, (x, labels(&train_set.label, &device)), &config)?;
    let net = net.valid();
    let mut entropies = Vec::new();
    let mut ms = [0.0; 2];
    let mut probs = Vec::new();
    for pts in [&test_set.x, &far] {
        let x = matrix(&sx.transform(&flat(pts)), 2, &plain);
        for (k, mode) in [PredictMode::Moments, PredictMode::Samples(S)]
            .into_iter()
            .enumerate()
        {
            let t0 = Instant::now();
            let pred = net.predict(x.clone(), mode)?;
            let h = to_vec(pred.entropy());
            ms[k] += t0.elapsed().as_secs_f64() * 1e3;
            if probs.is_empty() {
                probs = to_vec(pred.mean());
            }
            entropies.push(h);
        }
    }
    println!("== CLT-BNN: two moons, 2-50-50-2 ReLU net, multi-label probit, prior α = 10");
    println!(
        "test accuracy {:.3} (closed-form predictive)",
        accuracy(&probs, 2, &test_set.label)
    );
    report(
        [&entropies[0], &entropies[1]],
        [&entropies[2], &entropies[3]],
        ms,
        "far ring",
    );
    Ok(())
}

fn mnist() -> Result<(), Box<dyn Error>> {
    let (epochs, n_train, n_test) = (10, 10_000, 2_000);
    let Some((train_set, test_set, fashion)) = quick_mnist(n_train, n_test) else {
        return Ok(());
    };
    let device = training_device();
    let plain = device.clone().inner();
    device.seed(0);
    println!(
        "== CLT-BNN on MNIST: strided LeNet5, multi-label probit, prior α = 10, {n_train} \
         training images, {epochs} epochs, Adam 10⁻³, batch 100; OOD: Fashion-MNIST"
    );
    let [c, h, w] = train_set.shape();
    let all: Vec<usize> = (0..train_set.len()).collect();
    let batch = train_set.batch(&all, &MnistFamily::Mnist.normalization(), &device);
    let net = ConvNetConfig::lenet5([c, h, w], 10)
        .with_weights(moment_weights(10.0))
        .init(MultiLabelProbit, &device)?
        .with_moments(clt())?;
    let config = TrainConfig::new(epochs)
        .with_inference(Inference::Moments)
        .with_batch_size(100)
        .with_learning_rate(1e-3)
        .with_seed(0);
    let (net, _) = train(net, (batch.images, batch.labels), &config)?;
    let net = net.valid();
    let mut ms = [0.0; 2];
    let mut sets = Vec::new();
    // Each set normalised with its own statistics, as in the thesis code.
    for (set, family) in [
        (&test_set, MnistFamily::Mnist),
        (&fashion, MnistFamily::FashionMnist),
    ] {
        for (k, mode) in [PredictMode::Moments, PredictMode::Samples(S)]
            .into_iter()
            .enumerate()
        {
            let t0 = Instant::now();
            sets.push(predict_images(&net, set, family, mode, &plain)?);
            ms[k] += t0.elapsed().as_secs_f64() * 1e3;
        }
    }
    let labels: Vec<usize> = test_set.labels.iter().map(|&l| l as usize).collect();
    println!(
        "MNIST test error {:.2} % (closed form), {:.2} % (Monte Carlo)",
        100.0 * (1.0 - accuracy(&sets[0].probs, 10, &labels)),
        100.0 * (1.0 - accuracy(&sets[1].probs, 10, &labels)),
    );
    report(
        [&sets[0].entropy, &sets[1].entropy],
        [&sets[2].entropy, &sets[3].entropy],
        ms,
        "Fashion-MNIST",
    );
    Ok(())
}
