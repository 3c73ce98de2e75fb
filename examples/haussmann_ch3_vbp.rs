//! Chapter example, Haußmann (2021) *Bayesian neural networks for probabilistic machine
//! learning*, ch. 3: variance back-propagation (VBP), a sampling-free Bayesian net.
//!
//! Mean-field Gaussian weights, trained and predicted by propagating each unit's mean and
//! variance (the linear rule `E[x]·μ_w`, `E[x²]·σ²_w + Var[x]·μ_w²`, and VBP's ReLU gate
//! `p = σ(C·E[f])`, `E[h] = p E[f]`, `Var[h] = p Var[f] + p(1−p) E[f]²`). The loss is the closed
//! form `β/2 Σ[(y − E f)² + Var f] + KL/N`, and the noise precision β is refit in closed form
//! after every epoch (Proposition 1): no sample is drawn in training or prediction.
//!
//! 1. Regression on the cubic toy (`y = x³ + ε`, 100 training points): VBP and CLT moments
//!    against 100-sample Monte Carlo through the same trained net (test log-likelihood, time).
//! 2. MNIST, quick budget (the thesis: 100 epochs, Table 3.2): the strided LeNet5 trained by
//!    VBP, test error and log-likelihood. Skipped with a message when the MNIST files are not
//!    found (`../shared/data`, `BNN_DATA_DIR`, or `~/.cache/bnn-burn/data`).
//!
//! `cargo run --release --example haussmann_ch3_vbp`

use bnn_burn::host::{matrix, to_vec};
use bnn_burn::likelihood::{Categorical, GaussianLikelihoodConfig, NoiseFit};
use bnn_burn::metrics::{accuracy, mean};
use bnn_burn::nets::{ConvNetConfig, MlpConfig, MomentConfig, NoiseRefit, Regressor};
use bnn_burn::predict::{Predict, PredictMode};
use bnn_burn::recipes::moment_weights;
use bnn_burn::train::{Inference, TrainConfig, Trainer, train};
use bnn_burn::training_device;
use bnn_datasets::toy::{self, CUBIC_NOISE_STD};
use bnn_datasets::{MnistFamily, Standardizer};
use bnn_examples::{predict_images, quick_mnist};
use burn::module::Module;
use std::error::Error;
use std::time::Instant;

/// Training points of the cubic toy.
const N_TRAIN: usize = 100;

fn main() -> Result<(), Box<dyn Error>> {
    // Freed memory stays with the process: no heap trimming between training steps.
    bnn_burn::device::keep_freed_memory();
    regression()?;
    mnist()?;
    Ok(())
}

fn regression() -> Result<(), Box<dyn Error>> {
    let device = training_device();
    let plain = device.clone().inner();
    let train_set = toy::cubic(N_TRAIN, 1);
    let test_set = toy::cubic(1000, 3);
    let sx = Standardizer::fit(&train_set.x, 1)?;
    let sy = Standardizer::fit(&train_set.y, 1)?;
    let x = matrix(&sx.transform(&train_set.x), 1, &device);
    let y = matrix(&sy.transform(&train_set.y), 1, &device);
    let x_test = matrix(&sx.transform(&test_set.x), 1, &plain);
    let y_test = matrix(&sy.transform(&test_set.y), 1, &plain);
    let oracle = -CUBIC_NOISE_STD.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln() - 0.5;

    println!(
        "== VBP regression: cubic toy, {N_TRAIN} training points, 1-50-1 ReLU net, prior α = 10"
    );
    println!("| rule | prediction | test LL | RMSE | predict ms | noise std |");
    println!("|------|------------|--------:|-----:|-----------:|----------:|");
    for (name, moments) in [("VBP", MomentConfig::vbp()), ("CLT", MomentConfig::clt())] {
        device.seed(7);
        // β₀ = 1 on the standardised targets, then refit in closed form after every epoch.
        let likelihood = GaussianLikelihoodConfig::new()
            .with_noise_std(1.0)
            .with_fit(NoiseFit::Fixed)
            .init(&device)?;
        let net: Regressor = MlpConfig::new(1, vec![50], 1)
            .with_weights(moment_weights(10.0))
            .init(likelihood, &device)?
            .with_moments(moments)?;
        let config = TrainConfig::new(3000)
            .with_inference(Inference::Moments)
            .with_batch_size(N_TRAIN)
            .with_learning_rate(1e-2)
            .with_seed(7)
            .with_progress(false);
        let (net, _) = Trainer::new(config)
            .with_callback(NoiseRefit::new(x.clone(), y.clone()))
            .fit(net, (x.clone(), y.clone()))?;
        let net = net.valid();
        let noise = to_vec(net.likelihood.noise_std())[0] * sy.std[0];
        for (how, mode) in [
            ("moments", PredictMode::Moments),
            ("100 samples", PredictMode::Samples(100)),
        ] {
            let t0 = Instant::now();
            let pred = net.predict(x_test.clone(), mode)?;
            let scores = pred.scores(y_test.clone(), &sy.std);
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            println!(
                "| {name} | {how} | {:.3} | {:.2} | {ms:.1} | {noise:.2} |",
                scores.log_likelihood, scores.rmse
            );
        }
    }
    println!(
        "the true model's test LL: {oracle:.3} (noise std {CUBIC_NOISE_STD}). CLT's moments are \
         the exact per-unit moments of the sampled net (only covariances dropped): its two rows \
         agree. VBP's gate is an approximation of the ReLU that the sampled net does not make: \
         a net trained by VBP is a model of its moment predictive, and sampling it is worse.\n"
    );
    Ok(())
}

fn mnist() -> Result<(), Box<dyn Error>> {
    let (epochs, n_train, n_test) = (10, 10_000, 2_000);
    let Some((train_set, test_set, _)) = quick_mnist(n_train, n_test) else {
        return Ok(());
    };
    let device = training_device();
    device.seed(0);
    println!(
        "== VBP on MNIST: strided LeNet5, prior α = 100, {n_train} training images, {epochs} \
         epochs (quick; the thesis trains 100), Adam 10⁻³, batch 100"
    );
    let [c, h, w] = train_set.shape();
    let all: Vec<usize> = (0..train_set.len()).collect();
    let batch = train_set.batch(&all, &MnistFamily::Mnist.normalization(), &device);
    let net = ConvNetConfig::lenet5([c, h, w], 10)
        .with_weights(moment_weights(100.0))
        .init(Categorical, &device)?
        .with_moments(MomentConfig::vbp())?;
    let config = TrainConfig::new(epochs)
        .with_inference(Inference::Moments)
        .with_batch_size(100)
        .with_learning_rate(1e-3)
        .with_seed(0);
    let t0 = Instant::now();
    let (net, _) = train(net, (batch.images, batch.labels), &config)?;
    let seconds = t0.elapsed().as_secs_f64();
    let net = net.valid();
    let p = predict_images(
        &net,
        &test_set,
        MnistFamily::Mnist,
        PredictMode::Moments,
        &device.inner(),
    )?;
    let labels: Vec<usize> = test_set.labels.iter().map(|&l| l as usize).collect();
    let error = 100.0 * (1.0 - accuracy(&p.probs, 10, &labels));
    println!(
        "test error {error:.2} %, test LL {:.3} on {n_test} test images; trained in {seconds:.0} s \
         (Table 3.2, 100 epochs: error 0.85 %, LL −0.03)",
        mean(&p.log_likelihood)
    );
    Ok(())
}
