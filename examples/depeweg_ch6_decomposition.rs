//! Chapter example, Depeweg (2019) ch. 6.1: the decomposition of a BNN+LV's predictive
//! uncertainty into its aleatoric part (the latent input `z` and the noise) and its epistemic
//! part (the weights `W`), on the two chapter-6 toys whose inputs are unevenly spread.
//!
//! Variance form (law of total variance, eq. 3.25): `Var[y*] = E_W[Var(y*|W)] + Var_W(E[y*|W])`.
//! Entropy form (eqs. 3.23–3.24): `H[y*] = E_W H[y*|W] + I(y*; W)`, each entropy by the
//! Kozachenko–Leonenko k-NN estimator (k = 25) over nested draws (W × z).
//!
//! The thesis's findings (§6.1): on the heteroscedastic toy the aleatoric part follows the true
//! noise `3|cos(x/2)|` and the epistemic part grows where the data are sparse; on the bimodal toy
//! the aleatoric part is lowest where the two branches cross (x ≈ 0.79) and the epistemic part
//! grows with x, where the exponential inputs thin out. The example prints both forms on a grid
//! beside the true aleatoric std and the local data count.
//!
//! Budget: the thesis's: 2 × 20 ReLU, black-box α = 1, 5 000 epochs at Adam 10⁻³, batch N/25,
//! K = 25 (~5 min per toy in a release build on 2 cores); 200 × 200 draws for the decomposition
//! (the thesis: 500 × 500). At 10⁻² the latent table's per-row step `lr·N/B` is 0.25, and the
//! rows random-walk (see `depeweg_ch6_sensitivity`).
//!
//! `cargo run --release --example depeweg_ch6_decomposition`

use bnn_burn::host::matrix;
use bnn_burn::nets::{BnnLvConfig, Decomposition, LatentRegressor, MlpConfig};
use bnn_burn::objective::AlphaConfig;
use bnn_burn::recipes::depeweg_weights;
use bnn_burn::train::{TrainConfig, Trainer};
use bnn_burn::training_device;
use bnn_datasets::Standardizer;
use bnn_datasets::toy::{self, Regression1d};
use burn::module::Module;
use std::error::Error;

const EPOCHS: usize = 5000;
const N_W: usize = 200;
const N_Z: usize = 200;
const K: usize = 25;

struct Toy {
    name: &'static str,
    data: Regression1d,
    grid: Vec<f64>,
    /// The true aleatoric std at x.
    true_std: fn(f64) -> f64,
}

fn main() -> Result<(), Box<dyn Error>> {
    // Freed memory stays with the process: no heap trimming between training steps.
    bnn_burn::device::keep_freed_memory();
    let toys = [
        Toy {
            name: "heteroscedastic (750 points, x from a 3-Gaussian mixture)",
            data: toy::heteroscedastic_mixture(750, 21),
            grid: (0..=16).map(|i| -6.0 + 0.75 * i as f64).collect(),
            true_std: toy::heteroscedastic_noise_std,
        },
        Toy {
            name: "bimodal (750 points, x = −0.5 + Exp(2), truncated at 2)",
            data: toy::bimodal_exponential(750, 22),
            grid: (0..=12).map(|i| -0.5 + 0.25 * i as f64).collect(),
            // Two equally likely branches 10 cos x and 10 sin x plus N(0, 1).
            true_std: |x| (1.0 + 25.0 * (x.cos() - x.sin()).powi(2)).sqrt(),
        },
    ];
    for t in &toys {
        let (model, sx, sy) = train(&t.data, 7)?;
        let plain = model.devices()[0].clone();
        let xg = matrix(&sx.transform(&t.grid), 1, &plain);
        let s = sy.std[0];
        let parts: Vec<Decomposition> = model.decompose(xg, N_W, N_Z, K)?;
        println!("\n== {} ({EPOCHS} epochs) ==", t.name);
        println!(
            "|    x | data ±0.25 | true ale. std | ale. std | epi. std | H[y*] | E_W H[y*|W] | I(y*; W) |"
        );
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (x, p) in t.grid.iter().zip(&parts) {
            let near = t.data.x.iter().filter(|v| (*v - x).abs() <= 0.25).count();
            // Back to original units: std × s, entropies + ln s (the mutual information keeps).
            println!(
                "| {x:5.2} | {near:4} | {:6.2} | {:6.2} | {:6.2} | {:6.3} | {:6.3} | {:6.3} |",
                (t.true_std)(*x),
                p.aleatoric_variance.sqrt() * s,
                p.epistemic_variance.max(0.0).sqrt() * s,
                p.total_entropy + s.ln(),
                p.aleatoric_entropy + s.ln(),
                p.epistemic_entropy
            );
        }
        let corr = bnn_burn::metrics::pearson(
            &t.grid.iter().map(|x| (t.true_std)(*x)).collect::<Vec<_>>(),
            &parts
                .iter()
                .map(|p| p.aleatoric_variance.sqrt() * s)
                .collect::<Vec<_>>(),
        );
        println!(
            "correlation of the aleatoric std with the true noise std over the grid: {corr:.2}"
        );
    }
    Ok(())
}

/// Trains the BNN+LV on `data` (standardised with its own statistics).
fn train(
    data: &Regression1d,
    seed: u64,
) -> Result<(LatentRegressor, Standardizer, Standardizer), Box<dyn Error>> {
    let sx = Standardizer::fit(&data.x, 1)?;
    let sy = Standardizer::fit(&data.y, 1)?;
    let device = training_device();
    device.seed(seed);
    let x = matrix(&sx.transform(&data.x), 1, &device);
    let y = matrix(&sy.transform(&data.y), 1, &device);
    let n = data.x.len();
    let config = TrainConfig::new(EPOCHS)
        .with_batch_size(n.div_ceil(25))
        .with_learning_rate(1e-3)
        .with_train_samples(25)
        .with_seed(seed)
        .with_progress(false);
    let mlp = MlpConfig::new(1, vec![20, 20], 1).with_weights(depeweg_weights(1.0));
    let net = BnnLvConfig::new(mlp).init_regressor(n, &device)?;
    let (net, _) = Trainer::new(config)
        .with_objective(AlphaConfig::new().with_alpha(1.0).init()?)
        .fit(net, (x, y))?;
    Ok((net.valid(), sx, sy))
}
