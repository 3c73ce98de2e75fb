//! `bnn-bench perf-sde`: Haußmann (2021) Table 6.3 measured, the training cost per iteration
//! of each method on the Lorenz setting of Table 6.1 (the code's 20 sequences of 24, batches
//! of 4, 8 paths, 3 × 100 softplus units), in one run: the median over epochs of an epoch's
//! seconds over its steps (D-BNN (SGLD): the chain's seconds over its steps; the LSTMs: the
//! training's seconds over its steps), and the ratio to E-Bayes.

use super::{KnownLorenz, hybrid, observed};
use crate::experiment;
use bnn_burn::batch::Sequences;
use bnn_burn::host::to_vec;
use bnn_burn::inference::{SgMcmcConfig, sg_sample};
use bnn_burn::layers::{Activation, FlatLayout, WeightConfig};
use bnn_burn::nets::{Cell, MlpConfig, RecurrentConfig, Regressor};
use bnn_burn::posterior::PosteriorConfig;
use bnn_burn::sde::{NeuralSde, PriorDrift, SdeFitConfig, SdeObjective, SdeTarget, fit};
use bnn_burn::train::{TrainConfig, train};
use bnn_burn::training_device;
use bnn_datasets::dynamics::Lorenz;
use bnn_datasets::sequences::SequenceData;
use burn::tensor::Device;
use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

/// Settings of one run.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct SdeCostOptions {
    /// Output folder for perf-sde.md and perf-sde.json.
    #[arg(long, default_value = "runs/perf-sde")]
    pub out: PathBuf,
    /// Timed epochs per method after one untimed one (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Units per hidden layer of the drift network.
    #[arg(long, default_value_t = 100)]
    pub hidden: usize,
    /// Seed of the data and the generators.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// One method's cost.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CostRow {
    /// The method.
    pub method: String,
    /// Table 6.3's complexity of it.
    pub complexity: String,
    /// Milliseconds per iteration.
    pub ms_per_iteration: f64,
    /// Over E-Bayes's.
    pub ratio: f64,
}

/// Table 6.3's methods: name, complexity, what runs.
const METHODS: [(&str, &str); 8] = [
    ("E-Bayes", "O(2MTF + MTDL)"),
    ("E-PAC-Bayes", "O(2MTF + MTDL + W + TMD³)"),
    ("E-Bayes-Hybrid (κ known)", "O(2MTF + MTDL + MTP)"),
    (
        "E-PAC-Bayes-Hybrid (κ known)",
        "O(2MTF + MTDL + W + TMD³ + MTP)",
    ),
    ("D-BNN (VI)", "O(2MTF + MTDL + W)"),
    ("D-BNN (SGLD)", "O(MTF + MTDL + W)"),
    ("LSTM", "–"),
    ("variational LSTM", "–"),
];

/// The median of `xs`.
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Times every method, writes the report.
///
/// # Errors
/// Bad options (before any work), an unwritable `--out`, a method's error.
pub fn run(o: &SdeCostOptions) -> Result<Vec<CostRow>, Box<dyn Error>> {
    if o.rounds == 0 || o.hidden == 0 {
        return Err("--rounds and --hidden: at least 1".into());
    }
    let folder = crate::runner::OutFolder::open(&o.out, "--out")?;
    let start = Instant::now();
    let device = training_device();
    device.seed(o.seed);
    let system = Lorenz::default();
    let (train_paths, _) = system.splits(o.seed, (20, 24), (20, 24));
    let data = observed(&train_paths, &device);
    let diffusion = vec![system.diffusion; 3];
    let known = KnownLorenz {
        known: [false, true, false],
        zeta: system.zeta,
        kappa: system.kappa,
        rho: system.rho,
    };
    let (batch, samples, epochs) = (4, 8, o.rounds + 1);
    let steps = train_paths.len().div_ceil(batch);
    let drift = |d: &Device, weights: WeightConfig| -> Result<Regressor, Box<dyn Error>> {
        Ok(MlpConfig::new(4, vec![o.hidden; 3], 3)
            .with_activation(Activation::Softplus)
            .with_weights(weights)
            .init_regressor(d)?)
    };
    let mut ms = Vec::new();
    for (i, (name, _)) in METHODS.iter().enumerate() {
        let per_iteration = match i {
            0..=4 => {
                let objective = match i {
                    0 | 2 => SdeObjective::EBayes,
                    4 => SdeObjective::Elbo,
                    _ => SdeObjective::EPacBayes { delta: 0.05 },
                };
                let prior = matches!(i, 2 | 3).then_some(&known as &dyn PriorDrift);
                let config = SdeFitConfig::new(epochs)
                    .with_batch_size(batch)
                    .with_samples(samples)
                    .with_objective(objective)
                    .with_seed(o.seed);
                let net = drift(&device, WeightConfig::new())?;
                let (_, report) = fit(net, &diffusion, prior, &data, &config)?;
                median(report.epoch_seconds[1..].to_vec()) / steps as f64
            }
            5 => {
                let net = drift(&device, WeightConfig::of(PosteriorConfig::point()))?;
                let target = SdeTarget::new(
                    hybrid(NeuralSde::new(&net, diffusion.clone()), None),
                    data.clone(),
                    samples,
                    1.0,
                );
                let init = to_vec(FlatLayout::flatten(net.mean_draw()));
                let chain = |n: usize| -> Result<f64, Box<dyn Error>> {
                    let config = SgMcmcConfig::new(3e-6)
                        .with_batch_size(batch)
                        .with_burn_in(n - 1)
                        .with_draws(1)
                        .with_thin(1)
                        .with_seed(o.seed);
                    Ok(sg_sample(&target, &init, &config)?.seconds)
                };
                // The difference of two chains leaves their start-up out.
                let (short, long) = (chain(steps)?, chain(epochs * steps)?);
                (long - short) / ((epochs - 1) * steps) as f64
            }
            _ => {
                let scale = super::Scale::of(&train_paths);
                let scaled: Vec<_> = train_paths.iter().map(|p| scale.apply(p)).collect();
                let windows = SequenceData::next_step(&scaled, 1, 23, 1)?;
                let b = windows.batch(&device);
                let seqs = (
                    Sequences {
                        values: b.values,
                        mask: b.mask,
                    },
                    b.targets,
                );
                let p = if i == 7 { super::LSTM_DROPOUT } else { 0.0 };
                let net = RecurrentConfig::new(3, super::LSTM_UNITS, 3)
                    .with_cell(Cell::Lstm)
                    .with_weights(WeightConfig::of(PosteriorConfig::point()))
                    .with_input_dropout(p)
                    .with_hidden_dropout(p)
                    .init_regressor(&device)?;
                let lstm_steps = windows.len().div_ceil(32);
                let config = TrainConfig::new(epochs)
                    .with_batch_size(32)
                    .with_seed(o.seed)
                    .with_progress(false);
                let (_, report) = train(net, seqs, &config)?;
                report.seconds / (epochs * lstm_steps) as f64
            }
        };
        eprintln!(
            "[perf-sde] {name}: {:.1} ms per iteration",
            per_iteration * 1e3
        );
        ms.push(per_iteration * 1e3);
    }
    let rows: Vec<CostRow> = METHODS
        .iter()
        .zip(&ms)
        .map(|((method, complexity), &m)| CostRow {
            method: method.to_string(),
            complexity: complexity.to_string(),
            ms_per_iteration: m,
            ratio: m / ms[0],
        })
        .collect();
    let wall = start.elapsed().as_secs_f64();
    let md = format!(
        "# Training cost per iteration (Haußmann 2021 Table 6.3)\n\n\
         Lorenz, 20 training sequences of 24 (T = 23 steps), minibatches of 4, M = 8 paths, a \
         drift network of 3 × {} softplus units on [h, t] (D = 3); backend `{}`, revision \
         `{}`. One iteration: a minibatch's paths, loss, backward pass and update.\n\n{}\n\
         Wall time {wall:.0} s.\n",
        o.hidden,
        bnn_burn::backend_name(),
        experiment::git_revision(),
        table(&rows)
    );
    folder.write("perf-sde.md", md.as_bytes())?;
    let record = experiment::record("perf-sde", o, wall, &rows, serde_json::json!({}));
    folder.write_record("perf-sde.json", &record)?;
    println!("{md}");
    Ok(rows)
}

/// Table 6.3 with the measured costs.
pub fn table(rows: &[CostRow]) -> String {
    let mut md = String::from(
        "| method | complexity (Table 6.3) | ms per iteration | over E-Bayes |\n\
         |---|---|---:|---:|\n",
    );
    for r in rows {
        md += &format!(
            "| {} | {} | {:.1} | {:.2}× |\n",
            r.method, r.complexity, r.ms_per_iteration, r.ratio
        );
    }
    md
}
