//! Chapter example, Farquhar (2022) ch. 4 / Farquhar et al. (2020), *Radial Bayesian Neural
//! Networks*: mean-field Gaussian vs radial posteriors.
//!
//! 1. The "soap bubble": a D-dimensional mean-field Gaussian puts its samples at distance
//!    ≈ σ√D from the mean (and ≈ σ√(2D) from each other), while radial samples
//!    `w = μ + σ ⊙ (ε/‖ε‖)·r` stay at distance |r| σ whatever D is.
//! 2. The consequence for learning: the variance of the Monte Carlo gradient of the expected
//!    log-likelihood, as the posterior scale σ grows, for both families on the same net and batch.
//! 3. Training both from a small and from a large initial σ on the heteroscedastic toy, five
//!    seeds each (test LL mean ± s.e. and per seed: one run alone can fail by chance).
//!
//! `cargo run --release --example mfvi_vs_radial`

use bnn_burn::host::{matrix, to_vec};
use bnn_burn::layers::WeightConfig;
use bnn_burn::likelihood::{GaussianLikelihoodConfig, HeteroscedasticGaussian};
use bnn_burn::metrics::{mean, mean_and_standard_error};
use bnn_burn::nets::MlpConfig;
use bnn_burn::posterior::{
    AnyPosterior, MeanFieldConfig, MeanFieldDist, PosteriorConfig, PosteriorDist, RadialConfig,
    RadialDist, ScaleInit,
};
use bnn_burn::predict::{Predict, PredictMode};
use bnn_burn::special::inverse_softplus;
use bnn_burn::train::{TrainConfig, gradient_noise, train};
use bnn_burn::{device, training_device};
use bnn_datasets::Standardizer;
use bnn_datasets::toy;
use burn::module::{Module, ParamGroup};
use burn::tensor::Tensor;
use std::error::Error;

/// The two families, initial ρ given, N(0, 1) priors, reparameterisation.
fn families(rho: f64) -> [(&'static str, WeightConfig); 2] {
    let scale = ScaleInit::new().with_rho(rho);
    [
        (
            "MFVI",
            WeightConfig::of(PosteriorConfig::MeanField(
                MeanFieldConfig::new().with_scale(scale),
            )),
        ),
        (
            "Radial",
            WeightConfig::of(PosteriorConfig::Radial(
                RadialConfig::new().with_scale(scale),
            )),
        ),
    ]
}

fn main() -> Result<(), Box<dyn Error>> {
    // Freed memory stays with the process: no heap trimming between training steps.
    bnn_burn::device::keep_freed_memory();
    soap_bubble();
    gradient_variance()?;
    training()?;
    Ok(())
}

/// Mean distance of samples from the mean and between consecutive samples, σ = 1.
fn soap_bubble() {
    let device = device();
    device.seed(0);
    const S: usize = 200;
    println!("== 1. Where the samples lie (σ = 1, {S} samples per row)\n");
    println!("| D | MFVI ‖w−μ‖ | MFVI ‖w−w'‖ | radial ‖w−μ‖ | radial ‖w−w'‖ | σ√D |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for d in [10usize, 100, 1_000, 10_000, 100_000] {
        let (mu, sigma) = (
            Tensor::<1>::zeros([d], &device),
            Tensor::<1>::ones([d], &device),
        );
        let gaussian = MeanFieldDist::new(mu.clone(), sigma.clone());
        let radial = RadialDist::new(mu, sigma);
        let stats = |w: Tensor<2>| {
            let radius = mean(&to_vec(w.clone().square().sum_dim(1).sqrt()));
            let a = w.clone().slice([0..S - 1, 0..d]);
            let b = w.slice([1..S, 0..d]);
            let spread = mean(&to_vec((a - b).square().sum_dim(1).sqrt()));
            (radius, spread)
        };
        let (gr, gs) = stats(gaussian.sample(S));
        let (rr, rs) = stats(radial.sample(S));
        println!(
            "| {d} | {gr:.2} | {gs:.2} | {rr:.2} | {rs:.2} | {:.2} |",
            (d as f64).sqrt()
        );
    }
    println!(
        "\nRadial: E‖w−μ‖ = σ E|r| = σ√(2/π) ≈ 0.80σ and E‖w−w'‖² = 2σ², whatever D. \
         MFVI: ‖w−μ‖ ≈ σ√D and ‖w−w'‖ ≈ σ√(2D).\n"
    );
}

/// Variance over noise draws of ∂(mean NLL)/∂μ of the middle 200×200 layer.
fn gradient_variance() -> Result<(), Box<dyn Error>> {
    const DRAWS: usize = 30;
    let device = training_device();
    let data = toy::heteroscedastic(128, 0);
    let sx = Standardizer::fit(&data.x, 1)?;
    let sy = Standardizer::fit(&data.y, 1)?;
    let x = matrix(&sx.transform(&data.x), 1, &device);
    let y = matrix(&sy.transform(&data.y), 1, &device);
    println!("== 2. Gradient noise: 1-200-200-1 net, one batch of 128, {DRAWS} noise draws\n");
    println!("Noise-to-signal ratio of the gradient of the mean NLL with respect to the middle");
    println!("layer's 40 000 means, E‖g − ḡ‖² / ‖ḡ‖² (same μ for both families at each σ):\n");
    println!("| σ | MFVI | radial |");
    println!("|---:|---:|---:|");
    for sigma in [0.01, 0.03, 0.1, 0.3, 1.0] {
        let rho = inverse_softplus(sigma);
        let mut row = Vec::new();
        for (_, weights) in families(rho) {
            device.seed(11);
            let likelihood = GaussianLikelihoodConfig::new()
                .with_noise_std(0.5)
                .init(&device)?;
            let model = MlpConfig::new(1, vec![200, 200], 1)
                .with_weights(weights)
                .init(likelihood, &device)?;
            let mu = match &model.body.layers[1].params.weight {
                AnyPosterior::MeanField(p) => &p.loc.mu,
                AnyPosterior::Radial(p) => &p.loc.mu,
                _ => unreachable!("only the two families are compared"),
            };
            // E‖g − ḡ‖² / ‖ḡ‖² over the layer: total gradient variance relative to its signal.
            let group = ParamGroup::from_ids(vec![mu.id]);
            row.push(gradient_noise(&model, &x, &y, DRAWS, Some(&group)).ratio);
        }
        println!("| {sigma} | {:.3e} | {:.3e} |", row[0], row[1]);
    }
    println!(
        "\nWith {DRAWS} draws the ratio cannot exceed about {DRAWS} (the estimated mean ḡ is noise \
         itself there): a value near {DRAWS} means the gradient is indistinguishable from noise.\n"
    );
    Ok(())
}

/// Test LL and RMSE after training from a small and a large initial σ, over [`SEEDS`] seeds
/// (one training run can fail on its own: the table gives each configuration's spread).
fn training() -> Result<(), Box<dyn Error>> {
    const EPOCHS: usize = 400;
    const SEEDS: u64 = 5;
    let device = training_device();
    let plain = device.clone().inner();
    let train_set = toy::heteroscedastic(1000, 0);
    let test_set = toy::heteroscedastic(1000, 1);
    let sx = Standardizer::fit(&train_set.x, 1)?;
    let sy = Standardizer::fit(&train_set.y, 1)?;
    let x = matrix(&sx.transform(&train_set.x), 1, &device);
    let y = matrix(&sy.transform(&train_set.y), 1, &device);
    let x_test = matrix(&sx.transform(&test_set.x), 1, &plain);
    let y_test = sy.transform(&test_set.y);
    println!(
        "== 3. Training from small and large initial σ: heteroscedastic toy (n = 1000), \
         1-100-100-2 net with a heteroscedastic head, {EPOCHS} epochs, unit Gaussian prior; \
         seeds 0 to {} (initial weights, minibatches and draws)\n",
        SEEDS - 1
    );
    println!(
        "| initial σ | family | test LL, mean ± s.e. | test LL per seed | median test RMSE | \
         mean final KL/N |"
    );
    println!("|---:|---|---:|---|---:|---:|");
    for sigma in [0.0067, 0.3] {
        let rho = inverse_softplus(sigma);
        for (name, weights) in families(rho) {
            let (mut lls, mut errs, mut kls) = (Vec::new(), Vec::new(), Vec::new());
            for seed in 0..SEEDS {
                device.seed(seed);
                let model = MlpConfig::new(1, vec![100, 100], 1)
                    .with_weights(weights.clone())
                    .init(HeteroscedasticGaussian, &device)?;
                let config = TrainConfig::new(EPOCHS)
                    .with_batch_size(100)
                    .with_learning_rate(3e-3)
                    .with_seed(seed);
                let (model, report) = train(model, (x.clone(), y.clone()), &config)?;
                let model = model.valid();
                let pred = model.predict(x_test.clone(), PredictMode::Samples(200))?;
                let scores = pred.scores(matrix(&y_test, 1, &plain), &sy.std);
                lls.push(scores.log_likelihood);
                errs.push(scores.rmse);
                kls.push(report.history.last().map(|e| e.kl).unwrap_or(f64::NAN) / 1000.0);
            }
            let (ll, se) = mean_and_standard_error(&lls);
            let se = se.expect("five seeds");
            let each = lls.iter().map(|v| format!("{v:.2}")).collect::<Vec<_>>();
            errs.sort_by(f64::total_cmp);
            let median_err = errs[errs.len() / 2];
            println!(
                "| {sigma} | {name} | {ll:.3} ± {se:.3} | {} | {median_err:.3} | {:.3} |",
                each.join(", "),
                mean(&kls)
            );
        }
    }
    println!(
        "\ntrue-model test LL: {:.3}",
        toy::heteroscedastic_oracle_log_likelihood(&test_set)
    );
    Ok(())
}
