//! Chapter example, Gal (2016) *Uncertainty in Deep Learning*, ch. 3: MC dropout.
//!
//! 1. Regression on the cubic toy (`y = x³ + ε`, `ε ~ N(0, 3²)`, 20 training points). Dropout
//!    training with a Gaussian likelihood of precision τ and the prior length-scale `l` is VI
//!    with weight decay `λ = l²(1−p)/(2Nτ)`. As in Gal's protocol, the dropout rate p and τ are
//!    chosen by grid search on held-out data, using his predictive log-likelihood
//!    `logsumexp_t(−τ/2 ‖y − f_t(x)‖²) − ln T − ½ ln 2π + ½ ln τ` over T stochastic passes.
//! 2. Classification on two moons: predictive entropy, mutual information (BALD) and variation
//!    ratio, on test points and on far-away inputs, and how well each separates the two.
//!
//! `cargo run --release --example mc_dropout`

use bnn_burn::Prior;
use bnn_burn::host::{labels, matrix, to_vec};
use bnn_burn::layers::{Estimator, WeightConfig};
use bnn_burn::likelihood::{Categorical, GaussianLikelihoodConfig, NoiseFit};
use bnn_burn::metrics::{accuracy, auroc, interval_coverage, mean};
use bnn_burn::nets::{Classifier, MlpConfig, Regressor};
use bnn_burn::posterior::{PosteriorConfig, weight_decay_for_prior};
use bnn_burn::predict::{Predict, PredictMode};
use bnn_burn::train::{TrainConfig, train};
use bnn_burn::training_device;
use bnn_datasets::Standardizer;
use bnn_datasets::toy::{self, CUBIC_NOISE_STD};
use bnn_examples::{MoonsTask, flat, moons_task};
use burn::module::Module;
use burn::tensor::Device;
use std::error::Error;

/// Stochastic passes at prediction time.
const T: usize = 200;
/// Prior length-scale of every layer (prior `N(0, 1/l²)` on standardised data).
const LENGTH_SCALE: f64 = 1.0;

fn main() -> Result<(), Box<dyn Error>> {
    // Freed memory stays with the process: no heap trimming between training steps.
    bnn_burn::device::keep_freed_memory();
    regression()?;
    classification()?;
    Ok(())
}

/// MC dropout of rate `p` on every layer input (per-example masks), prior `N(0, 1/l²)`.
fn dropout(p: f64) -> WeightConfig {
    WeightConfig::of(PosteriorConfig::mc_dropout(p))
        .with_estimator(Estimator::LocalReparameterization)
        .with_prior(Prior::from_length_scale(LENGTH_SCALE))
}

/// A 1-50-1 MC dropout regressor whose Gaussian noise is fixed at precision `tau`.
fn dropout_regressor(p: f64, tau: f64, device: &Device) -> Result<Regressor, Box<dyn Error>> {
    let likelihood = GaussianLikelihoodConfig::new()
        .with_noise_std(tau.powf(-0.5))
        .with_fit(NoiseFit::Fixed)
        .init(device)?;
    Ok(MlpConfig::new(1, vec![50], 1)
        .with_weights(dropout(p))
        .init(likelihood, device)?)
}

fn regression() -> Result<(), Box<dyn Error>> {
    let device = training_device();
    let plain = device.clone().inner();
    let train_set = toy::cubic(20, 1);
    let valid_set = toy::cubic(20, 2);
    let test_set = toy::cubic(1000, 3);
    let sx = Standardizer::fit(&train_set.x, 1)?;
    let sy = Standardizer::fit(&train_set.y, 1)?;
    let x = matrix(&sx.transform(&train_set.x), 1, &device);
    let y = matrix(&sy.transform(&train_set.y), 1, &device);
    let n = train_set.x.len();

    // Gal's predictive log-likelihood in original units, its RMSE, and the 95 % coverage.
    let evaluate = |model: &Regressor, set: &toy::Regression1d| -> Result<_, Box<dyn Error>> {
        let x = matrix(&sx.transform(&set.x), 1, &plain);
        let pred = model.predict(x, PredictMode::Samples(T))?;
        let y_std = sy.transform(&set.y);
        let scores = pred.scores(matrix(&y_std, 1, &plain), &sy.std);
        let m = to_vec(pred.mean());
        let sd: Vec<f64> = to_vec(pred.variance()).iter().map(|v| v.sqrt()).collect();
        let coverage = interval_coverage(&m, &sd, &y_std, 0.95);
        Ok((scores.log_likelihood, scores.rmse, coverage))
    };

    println!("== MC dropout regression: cubic toy, 20 training points, 1-50-1 ReLU net");
    println!("grid search on 20 held-out points (T = {T} passes):\n");
    println!("|   p  |    τ   | weight decay λ | validation LL |");
    println!("|------|--------|----------------|---------------|");
    let mut best: Option<(f64, f64, f64, Regressor)> = None;
    for p in [0.005, 0.05, 0.1] {
        for tau in [10.0, 30.0, 100.0, 300.0] {
            device.seed(7);
            let model = dropout_regressor(p, tau, &device)?;
            let config = TrainConfig::new(2000)
                .with_batch_size(n)
                .with_learning_rate(3e-3)
                .with_seed(7);
            let (model, _) = train(model, (x.clone(), y.clone()), &config)?;
            let model = model.valid();
            let (ll, ..) = evaluate(&model, &valid_set)?;
            let lambda = weight_decay_for_prior(LENGTH_SCALE, p, n, tau);
            println!("| {p:>4} | {tau:>6} | {lambda:>14.2e} | {ll:>13.3} |");
            if best.as_ref().is_none_or(|b| ll > b.0) {
                best = Some((ll, p, tau, model));
            }
        }
    }
    let (_, p, tau, model) = best.expect("the grid is not empty");
    let (ll, err, coverage) = evaluate(&model, &test_set)?;
    let oracle = -CUBIC_NOISE_STD.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln() - 0.5;
    println!("\nchosen p = {p}, τ = {tau}; on 1000 test points:");
    println!("  test log-likelihood (Gal's estimator)  {ll:.3}   (true model: {oracle:.3})");
    println!("  test RMSE                              {err:.3}   (noise std: {CUBIC_NOISE_STD})");
    println!("  95 % predictive interval coverage      {coverage:.3}");

    // Predictive std = sqrt(1/τ + Var_t[f_t(x)]): τ⁻¹ is the aleatoric floor, the rest grows
    // away from the data (the training inputs lie in [−4, 4]).
    let probe = [-6.0, -2.0, 0.0, 2.0, 6.0];
    let pred = model.predict(
        matrix(&sx.transform(&probe), 1, &plain),
        PredictMode::Samples(T),
    )?;
    let total = sy.inverse_scale(
        &to_vec(pred.variance())
            .iter()
            .map(|v| v.sqrt())
            .collect::<Vec<_>>(),
    );
    let epistemic = sy.inverse_scale(
        &to_vec(pred.epistemic_variance())
            .iter()
            .map(|v| v.sqrt())
            .collect::<Vec<_>>(),
    );
    println!("\n|    x | predictive std | epistemic std (dropout spread) |");
    println!("|------|----------------|--------------------------------|");
    for ((x, t), e) in probe.iter().zip(&total).zip(&epistemic) {
        println!("| {x:>4} | {t:>14.2} | {e:>30.2} |");
    }
    println!(
        "aleatoric std τ^(-1/2) in original units: {:.2}\n",
        tau.powf(-0.5) * sy.std[0]
    );
    Ok(())
}

fn classification() -> Result<(), Box<dyn Error>> {
    let device = training_device();
    let plain = device.clone().inner();
    let MoonsTask {
        train: train_set,
        test: test_set,
        far,
        sx,
    } = moons_task()?;

    device.seed(3);
    let model: Classifier = MlpConfig::new(2, vec![100, 100], 2)
        .with_weights(dropout(0.1))
        .init(Categorical, &device)?;
    let config = TrainConfig::new(200)
        .with_batch_size(100)
        .with_learning_rate(3e-3)
        .with_seed(3);
    let x = matrix(&sx.transform(&flat(&train_set.x)), 2, &device);
    let (model, _) = train(model, (x, labels(&train_set.label, &device)), &config)?;
    let model = model.valid();

    let measures = |pts: &[[f64; 2]]| -> Result<_, Box<dyn Error>> {
        let x = matrix(&sx.transform(&flat(pts)), 2, &plain);
        let pred = model.predict(x, PredictMode::Samples(T))?;
        let samples = pred.samples().ok_or("MC dropout predicts samples")?;
        Ok((
            to_vec(pred.mean()),
            [
                to_vec(pred.entropy()),
                to_vec(pred.epistemic_entropy()),
                to_vec(samples.variation_ratio()),
            ],
        ))
    };
    let (probs, inside) = measures(&test_set.x)?;
    let (_, outside) = measures(&far)?;
    println!("== MC dropout classification: two moons, 2-100-100-2 ReLU net, p = 0.1, T = {T}");
    println!(
        "test accuracy {:.3}\n",
        accuracy(&probs, 2, &test_set.label)
    );
    println!("| measure | mean on test points | mean far from the data | AUROC (far vs test) |");
    println!("|---|---:|---:|---:|");
    for (name, (i, o)) in [
        "predictive entropy",
        "mutual information (BALD)",
        "variation ratio",
    ]
    .iter()
    .zip(inside.iter().zip(&outside))
    {
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} |",
            mean(i),
            mean(o),
            auroc(i, o)
        );
    }
    println!(
        "(AUROC: the chance that a far input scores higher than a test point; 0.5 is no \
         separation. A ReLU net's logits grow linearly away from the data, so far out most \
         dropout masks agree on a class.)"
    );
    Ok(())
}
