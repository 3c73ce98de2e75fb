//! `bnn-bench dynamics`: Haußmann (2021) Table 6.1, the stochastic Lorenz attractor learned by
//! a Bayesian neural SDE ([`bnn_burn::sde`]) under E-Bayes and E-PAC-Bayes, with one of the
//! three equations known up to a noisy parameter (the hybrid drift of eq. 6.5) or none, and
//! the true equations alone with noisy parameters (row v). Every repetition simulates its own
//! data; the score is the test MSE of the paths' mean on the held-out sequences.

#[cfg(test)]
mod tests;

use crate::experiment;
use crate::runner::{self, Finished, Harness, ReportInput, TaskContext};
use bnn_burn::host::{matrix, to_vec};
use bnn_burn::layers::{Activation, WeightConfig};
use bnn_burn::metrics::mean_and_standard_error;
use bnn_burn::nets::{MlpConfig, Regressor};
use bnn_burn::posterior::PosteriorConfig;
use bnn_burn::sde::{NeuralSde, PriorDrift, SdeData, SdeFitConfig, SdeObjective, fit};
use bnn_burn::training_device;
use bnn_datasets::dynamics::{Lorenz, SdePath};
use burn::module::Module;
use burn::tensor::{Device, Tensor};
use std::error::Error;
use std::time::Instant;

/// A row of Table 6.1: what the known drift covers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Knowledge {
    /// The table's name.
    pub name: &'static str,
    /// Short name for flags and ids.
    pub key: &'static str,
    /// The known equations (ζ's, κ's, ρ's).
    pub known: [bool; 3],
    /// Whether a network learns the rest (row v has none).
    pub learned: bool,
    /// The thesis's test MSE ± s.e. (50 repetitions) under E-Bayes(-Hybrid) and
    /// E-PAC-Bayes(-Hybrid).
    pub published: [Option<(f64, f64)>; 2],
}

/// The rows, in the table's order.
pub const ROWS: [Knowledge; 5] = [
    Knowledge {
        name: "none",
        key: "none",
        known: [false; 3],
        learned: true,
        published: [Some((29.20, 0.19)), Some((29.05, 0.23))],
    },
    Knowledge {
        name: "γ = [1, 0, 0], ζ ~ N(10, 1)",
        key: "zeta",
        known: [true, false, false],
        learned: true,
        published: [Some((27.58, 0.17)), Some((27.42, 0.16))],
    },
    Knowledge {
        name: "γ = [0, 1, 0], κ ~ N(28, 1)",
        key: "kappa",
        known: [false, true, false],
        learned: true,
        published: [Some((15.87, 0.46)), Some((15.06, 0.35))],
    },
    Knowledge {
        name: "γ = [0, 0, 1], ρ ~ N(2.67, 1)",
        key: "rho",
        known: [false, false, true],
        learned: true,
        published: [Some((27.82, 0.26)), Some((28.37, 0.21))],
    },
    Knowledge {
        name: "(v) true dynamics, noisy parameters",
        key: "full",
        known: [true; 3],
        learned: false,
        published: [Some((16.40, 2.31)), None],
    },
];

/// The objectives, the table's columns.
pub const OBJECTIVES: [(&str, &str); 2] = [("e-bayes", "E-Bayes"), ("e-pac-bayes", "E-PAC-Bayes")];

/// The bound's δ of E-PAC-Bayes (the thesis's code).
const DELTA: f64 = 0.05;

/// Options of one `dynamics` run.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct DynamicsOptions {
    /// Rows of Table 6.1 (none, zeta, kappa, rho, full); repeatable [default: all].
    #[arg(long = "knowledge")]
    pub knowledge: Vec<String>,
    /// Objectives (e-bayes, e-pac-bayes); repeatable [default: both].
    #[arg(long = "objective")]
    pub objectives: Vec<String>,
    /// Repetitions, each on its own simulated attractor and noisy parameters (the thesis: 50)
    /// [default: 10; 2 with --quick].
    #[arg(long)]
    pub repetitions: Option<usize>,
    /// Training epochs (the thesis: 100) [default: 100; 2 with --quick].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Sampled paths per trajectory and step [default: 8].
    #[arg(long, default_value_t = 8)]
    pub samples: usize,
    /// Trajectories per step (the thesis's code: 4).
    #[arg(long, default_value_t = 4)]
    pub batch_size: usize,
    /// Adam's learning rate (the thesis: 10⁻³).
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f64,
    /// Hidden softplus layers of the drift network (the thesis's code: 3 of 100).
    #[arg(long, default_value_t = 3)]
    pub layers: usize,
    /// Units per hidden layer [default: 100; 8 with --quick].
    #[arg(long)]
    pub hidden: Option<usize>,
    /// Sampled paths of each test prediction [default: 32].
    #[arg(long, default_value_t = 32)]
    pub test_samples: usize,
    /// The seed, and `quick`: the small budget.
    #[serde(flatten)]
    #[command(flatten)]
    pub exp: runner::ExperimentArgs,
    /// The output folder, resuming, worker processes.
    #[serde(flatten)]
    #[command(flatten)]
    pub run: runner::RunnerOptions,
}

impl DynamicsOptions {
    fn repetitions(&self) -> usize {
        self.repetitions.unwrap_or(self.exp.quick_or(2, 10))
    }
    fn epochs(&self) -> usize {
        self.epochs.unwrap_or(self.exp.quick_or(2, 100))
    }
    fn hidden(&self) -> usize {
        self.hidden.unwrap_or(self.exp.quick_or(8, 100))
    }
    fn rows(&self) -> Vec<Knowledge> {
        ROWS.iter()
            .filter(|r| self.knowledge.is_empty() || self.knowledge.iter().any(|k| k == r.key))
            .copied()
            .collect()
    }
    fn objectives(&self) -> Vec<&'static str> {
        OBJECTIVES
            .iter()
            .map(|o| o.0)
            .filter(|k| self.objectives.is_empty() || self.objectives.iter().any(|o| o == k))
            .collect()
    }

    /// Checks every choice before any work.
    fn check(&self) -> Result<(), String> {
        for k in &self.knowledge {
            if !ROWS.iter().any(|r| r.key == k) {
                let keys: Vec<&str> = ROWS.iter().map(|r| r.key).collect();
                return Err(format!("--knowledge {k:?}: use one of {keys:?}"));
            }
        }
        for o in &self.objectives {
            if !OBJECTIVES.iter().any(|(k, _)| k == o) {
                return Err(format!("--objective {o:?}: use e-bayes or e-pac-bayes"));
            }
        }
        for (flag, v) in [
            ("--repetitions", self.repetitions()),
            ("--epochs", self.epochs()),
            ("--samples", self.samples),
            ("--batch-size", self.batch_size),
            ("--hidden", self.hidden()),
            ("--test-samples", self.test_samples),
        ] {
            if v == 0 {
                return Err(format!("{flag} 0: at least 1"));
            }
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(format!("--lr {}: a finite positive learning rate", self.lr));
        }
        Ok(())
    }
}

/// One repetition of one row under one objective.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// The row's key.
    pub knowledge: String,
    /// The objective's key.
    pub objective: String,
    /// The repetition.
    pub repetition: usize,
}

/// What one task measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// The row's key.
    pub knowledge: String,
    /// The objective's key.
    pub objective: String,
    /// The repetition.
    pub repetition: usize,
    /// Test MSE of the sampled paths' mean against the test sequences (all times after the
    /// start, all coordinates); `None` when the paths diverged (a non-finite state).
    pub test_mse: Option<f64>,
    /// The last epoch's mean loss (`None` for row v, which trains nothing).
    pub final_loss: Option<f64>,
    /// Seconds of training.
    pub train_seconds: f64,
}

/// The known equations of a row with their noisy parameters: `γ∘r(h)` on `[S, N, 3]`.
struct KnownLorenz {
    known: [bool; 3],
    zeta: f64,
    kappa: f64,
    rho: f64,
}

impl PriorDrift for KnownLorenz {
    fn drift(&self, h: Tensor<3>, _t: f64) -> Tensor<3> {
        let [s, n, _] = h.dims();
        let at = |j: usize| h.clone().narrow(2, j, 1);
        let (x, y, z) = (at(0), at(1), at(2));
        let zero = || Tensor::<3>::zeros([s, n, 1], &h.device());
        let parts = vec![
            match self.known[0] {
                true => (y.clone() - x.clone()) * self.zeta,
                false => zero(),
            },
            match self.known[1] {
                true => x.clone() * (z.clone().neg() + self.kappa) - y.clone(),
                false => zero(),
            },
            match self.known[2] {
                true => x * y - z * self.rho,
                false => zero(),
            },
        ];
        Tensor::cat(parts, 2)
    }
}

/// Sequences as `[N, len, 3]` on a grid starting at 0.
fn observed(paths: &[SdePath], device: &Device) -> SdeData {
    let len = paths[0].len();
    let values: Vec<f64> = paths.iter().flat_map(|p| p.states.clone()).collect();
    let t0 = paths[0].times[0];
    SdeData {
        times: paths[0].times.iter().map(|t| t - t0).collect(),
        observed: matrix(&values, 3, device).reshape([paths.len(), len, 3]),
    }
}

/// The harness.
pub struct DynamicsHarness<'a> {
    options: &'a DynamicsOptions,
}

impl DynamicsHarness<'_> {
    fn run_one(&self, task: &Task) -> Result<Row, Box<dyn Error>> {
        let o = self.options;
        let knowledge = runner::of_task(&ROWS, "knowledge", |r| r.key == task.knowledge);
        let rep = task.repetition as u64;
        // Data and noisy parameters depend on the repetition only: every row and objective
        // of a repetition sees the same attractor.
        let data_seed = experiment::derive(o.exp.seed, &["dynamics", "data"], rep);
        let system = Lorenz::default();
        let (train, test) = system.thesis_splits(data_seed);
        let mut noise = bnn_burn::host::HostNormals::new(data_seed ^ 0x5eed);
        let prior = KnownLorenz {
            known: knowledge.known,
            zeta: system.zeta + noise.next(),
            kappa: system.kappa + noise.next(),
            rho: system.rho + noise.next(),
        };
        let seed = experiment::derive(
            o.exp.seed,
            &["dynamics", &task.knowledge, &task.objective],
            rep,
        );
        let device = training_device();
        device.seed(seed);
        let diffusion = vec![system.diffusion; 3];
        let any_known = knowledge.known.iter().any(|k| *k);
        let started = Instant::now();
        let (net, final_loss) = if knowledge.learned {
            let net = MlpConfig::new(4, vec![o.hidden(); o.layers], 3)
                .with_activation(Activation::Softplus)
                .init_regressor(&device)?;
            let objective = match task.objective.as_str() {
                "e-bayes" => SdeObjective::EBayes,
                _ => SdeObjective::EPacBayes { delta: DELTA },
            };
            let config = SdeFitConfig::new(o.epochs())
                .with_batch_size(o.batch_size)
                .with_samples(o.samples)
                .with_learning_rate(o.lr)
                .with_objective(objective)
                .with_seed(seed);
            let known: Option<&dyn PriorDrift> = any_known.then_some(&prior as &dyn PriorDrift);
            let (net, report) = fit(net, &diffusion, known, &observed(&train, &device), &config)?;
            (net, report.epoch_losses.last().copied())
        } else {
            let zero = MlpConfig::new(4, vec![], 3)
                .with_weights(
                    WeightConfig::of(PosteriorConfig::point())
                        .with_initializer(burn::nn::Initializer::Zeros),
                )
                .init_regressor(&device)?;
            (zero, None)
        };
        let train_seconds = started.elapsed().as_secs_f64();
        let test_mse = test_mse(
            &net.valid(),
            &diffusion,
            any_known.then_some(&prior),
            &test,
            o,
        );
        Ok(Row {
            knowledge: task.knowledge.clone(),
            objective: task.objective.clone(),
            repetition: task.repetition,
            test_mse,
            final_loss,
            train_seconds,
        })
    }
}

/// The test MSE: from each test sequence's first observation, the mean of `test_samples`
/// paths against the sequence at every later time and coordinate.
fn test_mse(
    net: &Regressor,
    diffusion: &[f64],
    prior: Option<&KnownLorenz>,
    test: &[SdePath],
    o: &DynamicsOptions,
) -> Option<f64> {
    let device = net.devices()[0].clone();
    let data = observed(test, &device);
    let [n, len, d] = data.observed.dims();
    let mut sde = NeuralSde::new(net, diffusion.to_vec());
    if let Some(p) = prior {
        sde = sde.with_prior(p);
    }
    let h0 = data.observed.clone().narrow(1, 0, 1).reshape([n, d]);
    let paths = sde.paths(h0, &data.times, o.test_samples);
    let mean = paths
        .states
        .mean_dim(0)
        .reshape([n, len, d])
        .narrow(1, 1, len - 1);
    let truth = data.observed.narrow(1, 1, len - 1);
    let mse = to_vec((mean - truth).square().mean())[0];
    mse.is_finite().then_some(mse)
}

impl Harness for DynamicsHarness<'_> {
    type Task = Task;
    type Row = Row;

    const NAME: &'static str = "dynamics";
    const FORMAT: u32 = 1;

    fn tasks(&self) -> Vec<Task> {
        let o = self.options;
        let mut tasks = Vec::new();
        for row in o.rows() {
            for objective in o.objectives() {
                // Row v trains nothing: one objective stands for both.
                if !row.learned && objective != OBJECTIVES[0].0 {
                    continue;
                }
                for repetition in 0..o.repetitions() {
                    tasks.push(Task {
                        knowledge: row.key.to_string(),
                        objective: objective.to_string(),
                        repetition,
                    });
                }
            }
        }
        tasks
    }

    fn task_id(&self, t: &Task) -> String {
        format!("{} / {} / {}", t.knowledge, t.objective, t.repetition)
    }

    fn run_key(&self) -> serde_json::Value {
        let o = self.options;
        serde_json::json!({
            "seed": o.exp.seed,
            "epochs": o.epochs(),
            "samples": o.samples,
            "batch_size": o.batch_size,
            "lr": o.lr,
            "layers": o.layers,
            "hidden": o.hidden(),
            "test_samples": o.test_samples,
        })
    }

    fn task_key(&self, _: &Task) -> serde_json::Value {
        serde_json::json!({})
    }

    fn run_task(&self, task: &Task, _: &TaskContext) -> Result<Row, Box<dyn Error>> {
        self.run_one(task)
    }

    fn describe(&self, f: &Finished<Task, Row>) -> String {
        let r = &f.row;
        let mse = r
            .test_mse
            .map_or("diverged".to_string(), |m| format!("{m:.2}"));
        format!(
            "[dynamics] {} / {} / {}: test MSE {mse}; {:.0} s",
            r.knowledge, r.objective, r.repetition, r.train_seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let rows = run.rows();
        let md = markdown(&rows, self.options, run.wall_seconds);
        run.write_report(self.options, serde_json::json!({}), &md)
    }
}

/// Table 6.1: per row and objective the test MSE (mean ± s.e. over the repetitions whose
/// paths stayed finite, and how many diverged) beside the thesis's (± s.e. over 50) and their
/// difference in combined standard errors (positive: ours lower, better).
pub fn table(rows: &[Row]) -> String {
    let mut md = String::from(
        "| prior knowledge | objective | repetitions | test MSE | diverged | thesis | \
         difference (s.e.) |\n|---|---|---:|---:|---:|---:|---:|\n",
    );
    for k in &ROWS {
        for (c, (key, name)) in OBJECTIVES.iter().enumerate() {
            let all: Vec<Option<f64>> = rows
                .iter()
                .filter(|r| r.knowledge == k.key && r.objective == *key)
                .map(|r| r.test_mse)
                .collect();
            if all.is_empty() {
                continue;
            }
            let mine: Vec<f64> = all.iter().flatten().copied().collect();
            let diverged = all.len() - mine.len();
            let (m, se) = match mine.is_empty() {
                true => (f64::NAN, None),
                false => mean_and_standard_error(&mine),
            };
            let (published, diff) = match k.published[c] {
                Some((pm, pse)) => (
                    format!("{pm:.2} ± {pse:.2}"),
                    se.map_or("–".to_string(), |s| {
                        format!("{:+.1}", (pm - m) / (s * s + pse * pse).sqrt())
                    }),
                ),
                None => ("–".to_string(), "–".to_string()),
            };
            let name = match k.learned {
                true => (*name).to_string(),
                false => "none trained".to_string(),
            };
            let score = match mine.is_empty() {
                true => "–".to_string(),
                false => crate::uci::fmt_mean_se(m, se, 2),
            };
            md.push_str(&format!(
                "| {} | {name} | {} | {score} | {diverged} | {published} | {diff} |\n",
                k.name,
                all.len(),
            ));
        }
    }
    md
}

/// The report.
fn markdown(rows: &[Row], o: &DynamicsOptions, wall: f64) -> String {
    format!(
        "# Neural SDEs on the stochastic Lorenz attractor (Haußmann 2021 Table 6.1)\n\n\
         Each repetition simulates the attractor (2·10⁵ Euler–Maruyama steps of 10⁻⁴, every \
         100th kept; 20 training sequences of 50 observations, 10 test sequences of 100) and \
         draws the known parameters from N(true, 1). The drift network ({} softplus layers of \
         {} on [h, t], mean-field) is trained for {} epochs by Adam at {} on minibatches of {} \
         sequences with {} paths each; the known equations join it as the hybrid drift. Test \
         MSE: the mean of {} paths from each test sequence's first observation against the \
         sequence. The thesis's ± is a standard error over 50 repetitions; ours over the \
         repetitions shown.\n\n{}\nWall time {wall:.0} s.\n",
        o.layers,
        o.hidden(),
        o.epochs(),
        o.lr,
        o.batch_size,
        o.samples,
        o.test_samples,
        table(rows)
    )
}

/// Runs the grid.
///
/// # Errors
/// Bad options (before any work), a fit's error, a report that cannot be written.
pub fn run(options: &DynamicsOptions) -> Result<Vec<Row>, Box<dyn Error>> {
    options.check()?;
    let harness = DynamicsHarness { options };
    let done = runner::run(&harness, &options.run)?;
    Ok(done.into_iter().map(|d| d.row).collect())
}
