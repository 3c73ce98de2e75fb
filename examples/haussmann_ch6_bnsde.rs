//! Chapter example, Haußmann (2021) *Bayesian neural networks for probabilistic machine
//! learning*, ch. 6: a Bayesian neural SDE learns the stochastic Lotka–Volterra system, as a
//! black box and as a hybrid beside the known equations with noisy parameters (Fig. 6.3).
//!
//! Data: the system on [0, 10] observed every 0.01 (`bnn_datasets::dynamics::LotkaVolterra`),
//! the first half cut into 10 training sequences of 50. Both models learn a drift network
//! (4 × 50 ReLU on `[h, t]`, mean-field) by E-Bayes (`sde::fit`), the diffusion known; the
//! hybrid adds the true equations with parameters drawn from N(θ, 0.5²). Then each predicts
//! 200 steps from the first test observation (t = 5): the mean and 3 standard deviations of
//! 200 sampled paths beside the true path, and the mean squared error over the 200 steps.
//!
//! `cargo run --release --example haussmann_ch6_bnsde`

use bnn_burn::host::{matrix, to_vec};
use bnn_burn::nets::{MlpConfig, Regressor};
use bnn_burn::sde::{NeuralSde, PriorDrift, SdeData, SdeFitConfig, fit};
use bnn_burn::training_device;
use bnn_datasets::dynamics::LotkaVolterra;
use burn::module::Module;
use burn::tensor::{Device, Tensor};
use std::error::Error;

/// The Lotka–Volterra equations with given parameters, as a known drift.
struct Equations([f64; 4]);

impl PriorDrift for Equations {
    fn drift(&self, h: Tensor<3>, _t: f64) -> Tensor<3> {
        let [a, b, c, d] = self.0;
        let x = h.clone().narrow(2, 0, 1);
        let y = h.narrow(2, 1, 1);
        let xy = x.clone() * y.clone();
        Tensor::cat(vec![x * a - xy.clone() * b, y * (-c) + xy * d], 2)
    }
}

fn drift_net(device: &Device) -> Result<Regressor, Box<dyn Error>> {
    Ok(MlpConfig::new(3, vec![50; 4], 2).init_regressor(device)?)
}

fn main() -> Result<(), Box<dyn Error>> {
    let system = LotkaVolterra::default();
    let path = system.simulate(1);
    let half = path.len() / 2;
    let device = training_device();
    let sequences = path.sequences(0, half / 10, 10);
    let len = sequences[0].len();
    let values: Vec<f64> = sequences.iter().flat_map(|s| s.states.clone()).collect();
    let t0 = sequences[0].times[0];
    let data = SdeData {
        times: sequences[0].times.iter().map(|t| t - t0).collect(),
        observed: matrix(&values, 2, &device).reshape([sequences.len(), len, 2]),
    };
    let diffusion = system.diffusion.to_vec();
    let mut noise = bnn_burn::host::HostNormals::new(3);
    let noisy = system.theta.map(|t| t + 0.5 * noise.next());
    let known = Equations(noisy);
    println!(
        "== Stochastic Lotka–Volterra: {} training sequences of {len}; the hybrid's parameters \
         {noisy:.2?} (true {:?})",
        sequences.len(),
        system.theta
    );
    let config = SdeFitConfig::new(50)
        .with_batch_size(2)
        .with_samples(8)
        .with_learning_rate(1e-3)
        .with_obs_std(0.25)
        .with_seed(4);
    let mut models = Vec::new();
    for (name, prior) in [
        ("black box", None),
        ("hybrid", Some(&known as &dyn PriorDrift)),
    ] {
        device.seed(5);
        let started = std::time::Instant::now();
        let (net, report) = fit(drift_net(&device)?, &diffusion, prior, &data, &config)?;
        println!(
            "   {name}: E-Bayes loss {:.1} → {:.1} in {:.0} s",
            report.epoch_losses[0],
            report.epoch_losses[report.epoch_losses.len() - 1],
            started.elapsed().as_secs_f64()
        );
        models.push((name, net.valid(), prior));
    }

    // 200 steps from the first test observation.
    let steps = 200;
    let start = &path.states[2 * half..2 * half + 2];
    let truth = &path.states[2 * half..2 * (half + steps + 1)];
    let times: Vec<f64> = (0..=steps).map(|k| 0.01 * k as f64).collect();
    let samples = 200;
    println!("\n| model | MSE over {steps} steps | x at t = 5 + 0.5, 1, 2 (mean ± 3 sd; true) |");
    println!("|---|---:|---|");
    for (name, net, prior) in &models {
        let mut sde = NeuralSde::new(net, diffusion.clone());
        if let Some(p) = prior {
            sde = sde.with_prior(*p);
        }
        let h0 = matrix(start, 2, &device.clone().inner());
        let paths = to_vec(sde.paths(h0, &times, samples).states);
        // paths: [S, 1, steps + 1, 2]
        let at = |s: usize, k: usize, j: usize| paths[(s * (steps + 1) + k) * 2 + j];
        let mut mse = 0.0;
        for k in 1..=steps {
            for j in 0..2 {
                let m = (0..samples).map(|s| at(s, k, j)).sum::<f64>() / samples as f64;
                mse += (m - truth[2 * k + j]).powi(2);
            }
        }
        mse /= (2 * steps) as f64;
        let band = |k: usize| {
            let xs: Vec<f64> = (0..samples).map(|s| at(s, k, 0)).collect();
            let m = xs.iter().sum::<f64>() / samples as f64;
            let sd = (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / samples as f64).sqrt();
            format!("{m:.2} ± {:.2} ({:.2})", 3.0 * sd, truth[2 * k])
        };
        println!(
            "| {name} | {mse:.3} | {}; {}; {} |",
            band(50),
            band(100),
            band(200)
        );
    }
    Ok(())
}
