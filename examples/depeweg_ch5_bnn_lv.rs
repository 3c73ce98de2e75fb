//! Chapter example, Depeweg (2019) *Modeling epistemic and aleatoric uncertainty with Bayesian
//! neural networks and latent variables*, ch. 5: BNN+LV against a BNN on the two stochastic
//! toys of Table 5.1, under black-box α.
//!
//! A latent input `z_n ~ N(0, γ)` per data point (`γ` = the input dimension), its `q(z_n)` in a
//! table updated sparsely, Depeweg's weights (`σ² = λ·sigmoid(ρ)`, `ρ₀ = −10`, means
//! `N(0, 0.1²)`), 2 × 20 ReLU units, the energy of eq. 3.15. At prediction `z*` comes from the
//! prior: the predictive is a mixture of 200 Gaussians, scored by its test log-likelihood.
//!
//! Protocol as the thesis (§5.1): 5 random 90/10 splits, standardised on the training rows, LL
//! in original units, mean ± standard error. Budget (the thesis: 5 000 epochs at Adam 10⁻³):
//! `EPOCHS` epochs at 10⁻², batch N/25, 8 draws per step.
//!
//! `cargo run --release --example depeweg_ch5_bnn_lv`

use bnn_burn::host::matrix;
use bnn_burn::metrics::{mean, mean_and_standard_error};
use bnn_burn::nets::{BnnLvConfig, MlpConfig};
use bnn_burn::objective::AlphaConfig;
use bnn_burn::predict::{GaussianPrediction, Predict, PredictMode};
use bnn_burn::recipes::depeweg_weights;
use bnn_burn::train::{TrainConfig, Trainer};
use bnn_burn::training_device;
use bnn_datasets::Standardizer;
use bnn_datasets::toy::{self, Regression1d};
use burn::module::Module;
use std::error::Error;

const EPOCHS: usize = 300;
const SPLITS: u64 = 5;
const TEST_DRAWS: usize = 200;

/// A model of the comparison: a BNN or a BNN+LV, and its `α`.
#[derive(Clone, Copy)]
struct Model {
    name: &'static str,
    latent: bool,
    alpha: f64,
    /// Test LL of the thesis (Tables 5.1, 5.2: mean ± s.e.) on heteroscedastic, bimodal.
    published: [(f64, f64); 2],
}

const MODELS: [Model; 3] = [
    Model {
        name: "BNN, α = 1",
        latent: false,
        alpha: 1.0,
        published: [(-1.69, 0.05), (-2.39, 0.17)],
    },
    Model {
        name: "BNN+LV, α = 0.5",
        latent: true,
        alpha: 0.5,
        published: [(-1.68, 0.05), (-2.07, 0.01)],
    },
    Model {
        name: "BNN+LV, α = 1",
        latent: true,
        alpha: 1.0,
        published: [(-1.67, 0.06), (-2.07, 0.02)],
    },
];

fn main() -> Result<(), Box<dyn Error>> {
    // Freed memory stays with the process: no heap trimming between training steps.
    bnn_burn::device::keep_freed_memory();
    let sets: [(&str, Regression1d, f64); 2] = [
        (
            "heteroscedastic (n = 1000)",
            toy::heteroscedastic(1000, 11),
            -1.57,
        ),
        ("bimodal (n = 2500)", toy::bimodal(2500, 12), -2.02),
    ];
    println!(
        "== Depeweg Table 5.1/5.2 toy rows: test LL (mean ± s.e. over {SPLITS} random 90/10 \
         splits), {EPOCHS} epochs (the thesis: 5 000); z = (ours − published)/√(s.e.² + s.e.²)"
    );
    println!("| data | model | test LL | published | z | test RMSE |");
    println!("|---|---|---:|---:|---:|---:|");
    for (k, (name, data, oracle)) in sets.iter().enumerate() {
        for model in MODELS {
            let (mut lls, mut rmses) = (Vec::new(), Vec::new());
            for split in 0..SPLITS {
                let (ll, rmse) = run(model, data, split)?;
                lls.push(ll);
                rmses.push(rmse);
            }
            let (m, se) = mean_and_standard_error(&lls);
            let se = se.expect("five splits");
            let (pm, pse) = model.published[k];
            let z = (m - pm) / (se * se + pse * pse).sqrt();
            println!(
                "| {name} | {} | {m:.3} ± {se:.3} | {pm:.2} ± {pse:.2} | {z:+.1} | {:.2} |",
                model.name,
                mean(&rmses)
            );
        }
        println!("| {name} | the true model | {oracle:.2} | | | |");
    }
    Ok(())
}

/// Trains `model` on split `split` of `data`; test LL (original units) and RMSE.
fn run(model: Model, data: &Regression1d, split: u64) -> Result<(f64, f64), Box<dyn Error>> {
    // A random 90/10 split (a fixed permutation per split index).
    let n = data.x.len();
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64 ^ split;
    for i in (1..n).rev() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        order.swap(i, ((state >> 33) % (i as u64 + 1)) as usize);
    }
    let n_test = n / 10;
    let pick = |rows: &[usize], v: &[f64]| rows.iter().map(|&i| v[i]).collect::<Vec<_>>();
    let (test, train) = order.split_at(n_test);
    let (x_train, y_train) = (pick(train, &data.x), pick(train, &data.y));
    let (x_test, y_test) = (pick(test, &data.x), pick(test, &data.y));
    let sx = Standardizer::fit(&x_train, 1)?;
    let sy = Standardizer::fit(&y_train, 1)?;

    let device = training_device();
    device.seed(100 + split);
    let x = matrix(&sx.transform(&x_train), 1, &device);
    let y = matrix(&sy.transform(&y_train), 1, &device);
    let plain = device.clone().inner();
    let xt = matrix(&sx.transform(&x_test), 1, &plain);
    let yt = matrix(&sy.transform(&y_test), 1, &plain);
    let config = TrainConfig::new(EPOCHS)
        .with_batch_size(train.len().div_ceil(25))
        .with_learning_rate(1e-2)
        .with_train_samples(8)
        .with_seed(100 + split)
        .with_progress(false);
    let objective = AlphaConfig::new().with_alpha(model.alpha).init()?;
    let mlp = MlpConfig::new(1, vec![20, 20], 1).with_weights(depeweg_weights(1.0));
    let prediction: GaussianPrediction = if model.latent {
        let net = BnnLvConfig::new(mlp).init_regressor(train.len(), &device)?;
        let (net, _) = Trainer::new(config)
            .with_objective(objective)
            .fit(net, (x, y))?;
        net.valid().predict(xt, PredictMode::Samples(TEST_DRAWS))?
    } else {
        let net = mlp.init_regressor(&device)?;
        let (net, _) = Trainer::new(config)
            .with_objective(objective)
            .fit(net, (x, y))?;
        net.valid().predict(xt, PredictMode::Samples(TEST_DRAWS))?
    };
    let scores = prediction.scores(yt, &sy.std);
    Ok((scores.log_likelihood, scores.rmse))
}
