//! Chapter example, Depeweg (2019) ch. 6.3: sensitivity analysis of a BNN+LV. How strongly does
//! each input move the predictive mean, the epistemic std and the aleatoric std (eqs. 3.27–3.33)?
//! `I_i = mean_n |∂q(x_n)/∂x_{n,i}|` for `q` the mean, `√Var_W E[y|W]` and `√E_W Var(y|W)`, by
//! autodiff with respect to the inputs with every sampled `W`, `z` held fixed.
//!
//! The 2-D toy of §6.3.1: `y = 7 sin x₁ + 3|cos(x₂/2)| ε`, `x₁ = Exp(rate ½) − 4` (dense on
//! the left, sparse on the right), `x₂ ~ U[−4, 4]`, n = 500. By design `x₁` drives the mean and,
//! through its skewed density, the epistemic part; `x₂` drives only the noise: the thesis finds
//! `x₁` on top of the epistemic and `x₂` on top of the aleatoric sensitivity.
//!
//! Budget: the thesis's: 2 × 20 ReLU, black-box α = 1, 5 000 epochs at Adam 10⁻³, batch N/25,
//! K = 25, 5 repeats (~5 min per repeat in a release build on 2 cores); `DRAWS` × `DRAWS`
//! draws for the sensitivities (the thesis: 200 × 200). Inputs and target standardised: the
//! sensitivities are per input std, in target stds.
//!
//! The budget matters for the aleatoric order. At α = 1 the energy's local factor cancels in
//! expectation (`E_q[p(y|z) p(z)/q(z)] = ∫ p(y|z) p(z) dz`), so each row of the latent table
//! gets an almost pure-noise gradient, and its Adam step is `lr·N/B`: at 10⁻² and B = N/25,
//! 0.25 per step, a random walk. At that rate (1 000 epochs) the learned aleatoric std came out
//! flat in x₂ and the order held in 0 of 5 repeats; at the thesis's 10⁻³ it follows
//! `3|cos(x₂/2)|`.
//!
//! `cargo run --release --example depeweg_ch6_sensitivity`

use bnn_burn::host::matrix;
use bnn_burn::metrics::mean_and_standard_error;
use bnn_burn::nets::{BnnLvConfig, MlpConfig, Sensitivity};
use bnn_burn::objective::AlphaConfig;
use bnn_burn::recipes::depeweg_weights;
use bnn_burn::train::{TrainConfig, Trainer};
use bnn_burn::training_device;
use bnn_datasets::toy;
use std::error::Error;

const EPOCHS: usize = 5000;
const REPEATS: u64 = 5;
const DRAWS: usize = 100;

fn main() -> Result<(), Box<dyn Error>> {
    // Freed memory stays with the process: no heap trimming between training steps.
    bnn_burn::device::keep_freed_memory();
    let mut runs: Vec<Sensitivity> = Vec::new();
    for r in 0..REPEATS {
        let data = toy::sensitivity_2d(500, 40 + r);
        let (sx, sy) = data.fit_standardizers()?;
        let std = data.standardized(&sx, &sy)?;
        let device = training_device();
        device.seed(50 + r);
        let x = matrix(&std.x, 2, &device);
        let y = matrix(&std.y, 1, &device);
        let config = TrainConfig::new(EPOCHS)
            .with_batch_size(std.len().div_ceil(25))
            .with_learning_rate(1e-3)
            .with_train_samples(25)
            .with_seed(50 + r)
            .with_progress(false);
        let mlp = MlpConfig::new(2, vec![20, 20], 1).with_weights(depeweg_weights(1.0));
        let net = BnnLvConfig::new(mlp).init_regressor(std.len(), &device)?;
        let (net, _) = Trainer::new(config)
            .with_objective(AlphaConfig::new().with_alpha(1.0).init()?)
            .fit(net, (x.clone(), y))?;
        // The trained model stays on the autodiff device: the sensitivities differentiate it.
        let s = net.sensitivity(x, DRAWS, DRAWS)?;
        println!(
            "repeat {}: mean {:.3} / {:.3}, epistemic {:.3} / {:.3}, aleatoric {:.3} / {:.3} (x₁ / x₂)",
            r + 1,
            s.mean[0],
            s.mean[1],
            s.epistemic[0],
            s.epistemic[1],
            s.aleatoric[0],
            s.aleatoric[1]
        );
        runs.push(s);
    }
    println!(
        "\n== Sensitivities over {REPEATS} repeats (mean ± s.e.), 2-D toy, {EPOCHS} epochs =="
    );
    println!("| quantity | x₁ | x₂ | larger (expected) | repeats with the expected order |");
    println!("|---|---:|---:|---|---:|");
    type Pick = fn(&Sensitivity) -> &Vec<f64>;
    let rows: [(&str, Pick, usize); 3] = [
        ("predictive mean", |s| &s.mean, 0),
        ("epistemic std", |s| &s.epistemic, 0),
        ("aleatoric std", |s| &s.aleatoric, 1),
    ];
    for (name, pick, expected) in rows {
        let v = |i: usize| runs.iter().map(|s| pick(s)[i]).collect::<Vec<_>>();
        let se = |x: &[f64]| {
            let (m, se) = mean_and_standard_error(x);
            (m, se.expect("five repeats"))
        };
        let (a, b) = (se(&v(0)), se(&v(1)));
        let larger = if a.0 > b.0 { "x₁" } else { "x₂" };
        let right = runs
            .iter()
            .filter(|s| pick(s)[expected] > pick(s)[1 - expected])
            .count();
        println!(
            "| {name} | {:.3} ± {:.3} | {:.3} ± {:.3} | {larger} ({}) | {right} of {REPEATS} |",
            a.0,
            a.1,
            b.0,
            b.1,
            ["x₁", "x₂"][expected]
        );
    }
    Ok(())
}
