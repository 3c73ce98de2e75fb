//! Chapter example, Gal (2016) *Uncertainty in Deep Learning*, §3.4.2: Bayesian recurrent
//! networks by variational dropout, one mask per sequence on the inputs and the hidden state,
//! the same at every step (Gal & Ghahramani 2016), beside an LSTM without dropout and a
//! mean-field LSTM (weights drawn once per sequence).
//!
//! Data: the stochastic Lotka–Volterra system of Haußmann (2021) ch. 6 on [0, 10], observed
//! every 0.01; the first half gives next-step windows of up to 20 steps (the first ones
//! shorter: padded batches). Each LSTM forecasts 200 steps from t = 5 after the 20 steps
//! before it, feeding back its own draws (the mean plus the learned noise), 200 samples: the
//! mean squared error of the mean path (comparable to `haussmann_ch6_bnsde`'s), the mean
//! predictive log-likelihood of the true path and how often it lies inside the 3-sd band.
//!
//! `cargo run --release --example gal_ch3_variational_rnn`

use bnn_burn::batch::Sequences;
use bnn_burn::host::to_vec;
use bnn_burn::layers::WeightConfig;
use bnn_burn::likelihood::GaussianLikelihood;
use bnn_burn::nets::{Bnn, Cell, RecurrentBody, RecurrentConfig};
use bnn_burn::posterior::PosteriorConfig;
use bnn_burn::train::{TrainConfig, train};
use bnn_burn::training_device;
use bnn_datasets::dynamics::{LotkaVolterra, SdePath};
use bnn_datasets::sequences::SequenceData;
use burn::module::Module;
use burn::tensor::{Distribution, Tensor};
use std::error::Error;

/// Longest context window.
const WINDOW: usize = 20;
/// Forecast horizon (steps of 0.01).
const HORIZON: usize = 200;
/// Sampled forecasts.
const SAMPLES: usize = 200;

type Forecaster = Bnn<RecurrentBody, GaussianLikelihood>;

fn main() -> Result<(), Box<dyn Error>> {
    bnn_burn::device::keep_freed_memory();
    let device = training_device();
    let plain = device.clone().inner();
    let system = LotkaVolterra::default();
    let path = system.simulate(1);
    let half = path.len() / 2;
    // Standardise each dimension by the training half's mean and std.
    let first_half = path.window(0, half);
    let (mean, std) = moments(&first_half);
    let scaled = |p: &SdePath| SdePath {
        states: p
            .states
            .iter()
            .enumerate()
            .map(|(i, v)| (v - mean[i % 2]) / std[i % 2])
            .collect(),
        ..p.clone()
    };
    let windows = SequenceData::next_step(&[scaled(&first_half)], 5, WINDOW, 1)?;
    let batch = windows.batch(&device);
    let data = (
        Sequences {
            values: batch.values,
            mask: batch.mask,
        },
        batch.targets,
    );
    println!(
        "== Stochastic Lotka–Volterra: {} next-step windows of 5 to {WINDOW} steps from t ∈ \
         [0, 5]; forecasts of {HORIZON} steps from t = 5",
        windows.len()
    );
    let context = scaled(&path.window(half - WINDOW, WINDOW));
    let context = Sequences::full(
        Tensor::<1>::from_floats(context.states.as_slice(), &plain).reshape([1, WINDOW, 2]),
    );
    let truth = path.window(half, HORIZON + 1);

    let models: [(&str, WeightConfig, f64); 3] = [
        ("LSTM", WeightConfig::of(PosteriorConfig::point()), 0.0),
        (
            "variational LSTM (p = 0.1)",
            WeightConfig::of(PosteriorConfig::point()),
            0.1,
        ),
        (
            "mean-field LSTM",
            WeightConfig::of(PosteriorConfig::mean_field()),
            0.0,
        ),
    ];
    println!(
        "\n| model | train s | MSE over {HORIZON} steps | mean predictive LL | inside ±3 sd | x at \
         t = 5.5, 6, 7 (mean ± 3 sd; true) |"
    );
    println!("|---|---:|---:|---:|---:|---|");
    for (name, weights, p) in models {
        device.seed(7);
        let net = RecurrentConfig::new(2, 32, 2)
            .with_cell(Cell::Lstm)
            .with_weights(weights)
            .with_input_dropout(p)
            .with_hidden_dropout(p)
            .init_regressor(&device)?;
        let config = TrainConfig::new(60)
            .with_batch_size(32)
            .with_learning_rate(3e-3)
            .with_seed(7);
        let (net, report) = train(net, data.clone(), &config)?;
        let net: Forecaster = net.valid();
        let paths = sampled_forecast(&net, context.clone());
        // paths: [S, 1, HORIZON, 2] in standardised units.
        let at = |s: usize, k: usize, j: usize| paths[(s * HORIZON + k) * 2 + j] * std[j] + mean[j];
        let (mut mse, mut ll, mut inside) = (0.0, 0.0, 0usize);
        let mut band = Vec::new();
        for k in 0..HORIZON {
            for j in 0..2 {
                let xs: Vec<f64> = (0..SAMPLES).map(|s| at(s, k, j)).collect();
                let m = xs.iter().sum::<f64>() / SAMPLES as f64;
                let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / SAMPLES as f64;
                let y = truth.state(k + 1)[j];
                mse += (m - y).powi(2);
                let var = var.max(1e-12);
                ll += -0.5 * ((2.0 * std::f64::consts::PI * var).ln() + (y - m).powi(2) / var);
                inside += usize::from((y - m).abs() <= 3.0 * var.sqrt());
                if j == 0 && [49, 99, 199].contains(&k) {
                    band.push(format!("{m:.2} ± {:.2} ({y:.2})", 3.0 * var.sqrt()));
                }
            }
        }
        let n = (2 * HORIZON) as f64;
        println!(
            "| {name} | {:.0} | {:.3} | {:.2} | {:.0} % | {} |",
            report.seconds,
            mse / n,
            ll / n,
            100.0 * inside as f64 / n,
            band.join("; ")
        );
    }
    println!(
        "\nEach sample is one network, its masks or weights held for the whole forecast; the \
         predictive log-likelihood is that of a Gaussian with the samples' mean and variance."
    );
    Ok(())
}

/// Per-dimension mean and standard deviation of a path's states.
fn moments(path: &SdePath) -> ([f64; 2], [f64; 2]) {
    let n = path.len() as f64;
    let mut mean = [0.0; 2];
    let mut var = [0.0; 2];
    for j in 0..2 {
        mean[j] = (0..path.len()).map(|k| path.state(k)[j]).sum::<f64>() / n;
        var[j] = (0..path.len())
            .map(|k| (path.state(k)[j] - mean[j]).powi(2))
            .sum::<f64>()
            / n;
    }
    (mean, var.map(f64::sqrt))
}

/// `SAMPLES` forecast paths that feed back a draw of the next state, the predicted mean plus
/// the likelihood's learned noise (ancestral sampling): the draws, flattened
/// `[S, 1, HORIZON, 2]`.
fn sampled_forecast(net: &Forecaster, context: Sequences) -> Vec<f64> {
    let noise_std = net.likelihood.noise_std().reshape([1, 1, 2]);
    let device = context.values.device();
    let mut path = Vec::with_capacity(HORIZON);
    net.forecast_with(context, HORIZON, SAMPLES, |mean| {
        let eps = Tensor::<3>::random(mean.dims(), Distribution::Normal(0.0, 1.0), &device);
        let next = mean + eps * noise_std.clone();
        path.push(next.clone());
        next
    });
    to_vec(Tensor::stack::<4>(path, 2))
}
