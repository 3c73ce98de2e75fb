//! `bnn-bench iris-covariance`: Farquhar (2022) Fig. 3.11 / Table A.3. A full-covariance
//! Gaussian over every weight of a small MLP (across layers) against a diagonal one, on Iris,
//! 1–4 hidden layers of width 4: the full covariance is better at one hidden layer, the two
//! equal from two on (the thesis's reading of its figure, which prints no numbers).

use crate::experiment;
use crate::runner::{self, Finished, Harness, ReportInput, TaskContext};
use crate::uci::{MeanSe, fmt_mean_se};
use bnn_burn::inference::{
    BnnTarget, FlatFamily, FlatPosterior, LogDensity, ViConfig, ViTrainer, flat,
};
use bnn_burn::layers::FlatLayout;
use bnn_burn::layers::{Activation, WeightConfig};
use bnn_burn::likelihood::Categorical;
use bnn_burn::metrics::mean_and_standard_error;
use bnn_burn::nets::{Classifier, MlpBody, MlpConfig};
use bnn_burn::posterior::{FullRankConfig, MeanFieldConfig, PosteriorConfig, ScaleInit};
use bnn_burn::posthoc::predict_network;
use bnn_burn::predict::PredictMode;
use bnn_burn::train::OptimizerConfig;
use bnn_datasets::ClassificationData;
use burn::module::Module;
use burn::nn::Initializer;
use burn::tensor::{Int, Tensor};
use rand::SeedableRng;
use std::error::Error;

#[cfg(test)]
mod tests;

/// The two families, in table order.
pub const FAMILIES: [&str; 2] = ["diagonal", "full"];
/// Hidden width (Table A.3).
pub const WIDTH: usize = 4;
/// Training rows (Table A.3: 100 train, 50 test).
pub const TRAIN_ROWS: usize = 100;
/// LeakyReLU's negative slope: the reference code's He gain `√1.92` is He's for slope 0.2.
pub const SLOPE: f64 = 0.2;
/// `ρ₀` of the initial scales, `σ₀ = softplus(−6) ≈ 0.0025` (Table A.3), jittered per weight
/// by `N(0, 0.5²)` as in the reference code.
const RHO: f64 = -6.0;
/// The jitter of `ρ₀`.
const RHO_STD: f64 = 0.5;
/// Draws of the 100-sample test cross-entropy.
const EVAL_SAMPLES: usize = 100;

/// Options of one `iris-covariance` run.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct IrisCovarianceOptions {
    /// Hidden layers; repeatable [default: 1, 2, 3, 4].
    #[arg(long = "depth")]
    pub depths: Vec<usize>,
    /// Families (diagonal, full); repeatable [default: both].
    #[arg(long = "family")]
    pub families: Vec<String>,
    /// Seeds (initialisations) per depth and family [default: 100, as the thesis; 4 with
    /// --quick].
    #[arg(long)]
    pub seeds: Option<usize>,
    /// The best seeds (lowest test cross-entropy) each cell reports [default: 10; 2 with
    /// --quick], as the thesis's "best 10 of 100".
    #[arg(long)]
    pub best: Option<usize>,
    /// Epochs at most [default: 1000; 100 with --quick].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Epochs without a better test cross-entropy before stopping.
    #[arg(long, default_value_t = 30)]
    pub patience: usize,
    /// Minibatch rows.
    #[arg(long, default_value_t = 16)]
    pub batch_size: usize,
    /// AMSGrad's learning rate.
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f64,
    /// Weight draws of the test cross-entropy that early stopping monitors (the thesis: 1).
    #[arg(long, default_value_t = 1)]
    pub monitor_draws: usize,
    /// The seed, and `quick`: the small budget.
    #[serde(flatten)]
    #[command(flatten)]
    pub exp: runner::ExperimentArgs,
    /// The output folder, resuming, worker processes.
    #[serde(flatten)]
    #[command(flatten)]
    pub run: runner::RunnerOptions,
}

impl IrisCovarianceOptions {
    fn depths(&self) -> Vec<usize> {
        match self.depths.is_empty() {
            true => vec![1, 2, 3, 4],
            false => self.depths.clone(),
        }
    }
    fn families(&self) -> Vec<String> {
        match self.families.is_empty() {
            true => FAMILIES.iter().map(|s| s.to_string()).collect(),
            false => self.families.clone(),
        }
    }
    fn seeds(&self) -> usize {
        self.seeds.unwrap_or(if self.exp.quick { 4 } else { 100 })
    }
    fn best(&self) -> usize {
        self.best.unwrap_or(if self.exp.quick { 2 } else { 10 })
    }
    fn epochs(&self) -> usize {
        self.epochs
            .unwrap_or(if self.exp.quick { 100 } else { 1000 })
    }

    /// Checks every choice before any work.
    fn check(&self) -> Result<(), String> {
        if let Some(d) = self.depths.iter().find(|d| **d == 0 || **d > 8) {
            return Err(format!("--depth {d}: 1 to 8 hidden layers"));
        }
        for f in &self.families {
            if !FAMILIES.contains(&f.as_str()) {
                return Err(format!("--family {f:?}: use one of {FAMILIES:?}"));
            }
        }
        for (flag, v) in [
            ("--seeds", self.seeds()),
            ("--best", self.best()),
            ("--epochs", self.epochs()),
            ("--patience", self.patience),
            ("--batch-size", self.batch_size),
            ("--monitor-draws", self.monitor_draws),
        ] {
            if v == 0 {
                return Err(format!("{flag} 0: at least 1"));
            }
        }
        if self.best() > self.seeds() {
            return Err(format!(
                "--best {}: at most --seeds ({})",
                self.best(),
                self.seeds()
            ));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(format!("--lr {}: a number > 0", self.lr));
        }
        Ok(())
    }
}

/// One fit.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// Hidden layers.
    pub depth: usize,
    /// `diagonal` or `full`.
    pub family: String,
    /// The seed's index.
    pub seed: usize,
}

/// What one fit measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// Hidden layers.
    pub depth: usize,
    /// `diagonal` or `full`.
    pub family: String,
    /// The seed's index.
    pub seed: usize,
    /// The network's weights `D`.
    pub weights: usize,
    /// The family's parameters (`2D` or `D + D²`).
    pub params: usize,
    /// Epochs run (the last one the one that ran out of patience, or the budget).
    pub epochs: usize,
    /// The epoch whose family was kept (best test cross-entropy).
    pub best_epoch: usize,
    /// Test cross-entropy of the kept family, one weight draw per test row as in the thesis
    /// (fresh draws, not the ones that chose the epoch).
    pub test_ce: f64,
    /// Test cross-entropy of the kept family's predictive from 100 draws.
    pub test_ce_100: f64,
    /// Test accuracy of the 100-draw predictive.
    pub test_accuracy: f64,
    /// The mean minibatch ELBO estimate (per training row) of the kept epoch.
    pub train_elbo: f64,
    /// Training draws left out of their step for a log ratio beyond f32's range.
    pub dropped_draws: usize,
    /// Seconds.
    pub seconds: f64,
}

/// The harness.
pub struct IrisCovarianceHarness<'a> {
    options: &'a IrisCovarianceOptions,
    train: ClassificationData,
    test: ClassificationData,
}

/// Inputs and labels as tensors on `device`.
fn tensors(
    data: &ClassificationData,
    device: &burn::tensor::Device,
) -> (Tensor<2>, Tensor<1, Int>) {
    let x = bnn_burn::host::matrix(&data.x, data.n_features, device);
    let labels: Vec<i64> = data.labels.iter().map(|&l| l as i64).collect();
    (x, Tensor::<1, Int>::from_ints(labels.as_slice(), device))
}

/// The network: `depth` hidden layers of [`WIDTH`], LeakyReLU, point weights (the family
/// lives over its flat vector), He-initialised means, the prior `N(0, 1)`.
pub fn network(depth: usize, device: &burn::tensor::Device) -> Result<Classifier, Box<dyn Error>> {
    let weights = WeightConfig::of(PosteriorConfig::point()).with_initializer(
        bnn_burn::layers::MeanInit::Burn(Initializer::KaimingNormal {
            gain: (2.0 / (1.0 + SLOPE * SLOPE)).sqrt(),
            fan_out_only: false,
        }),
    );
    Ok(MlpConfig::new(4, vec![WIDTH; depth], 3)
        .with_weights(weights)
        .with_activation(Activation::LeakyRelu { slope: SLOPE })
        .init(Categorical, device)?)
}

/// Test cross-entropy and accuracy of `family` over `net`'s weights from `samples` draws.
fn test_metrics<Q: FlatFamily>(
    net: &Classifier,
    family: Q,
    test: &(Tensor<2>, Tensor<1, Int>),
    samples: usize,
) -> Result<(f64, f64), Box<dyn Error>> {
    let posterior = FlatPosterior::new(net.clone(), family)?;
    let prediction = predict_network(&posterior, test.0.clone(), PredictMode::Samples(samples))?;
    let ce = -bnn_burn::host::to_vec(prediction.log_prob(test.1.clone()).mean())[0];
    let correct = prediction
        .predicted_class()
        .equal(test.1.clone())
        .float()
        .mean();
    Ok((ce, bnn_burn::host::to_vec(correct)[0]))
}

impl IrisCovarianceHarness<'_> {
    /// Trains one family by minibatch epochs with early stopping on the test cross-entropy
    /// (one draw per row, as the thesis monitors it), keeping the best epoch's family.
    fn fit<Q: FlatFamily>(
        &self,
        task: &Task,
        family: Q,
        target: &BnnTarget<MlpBody, Categorical>,
        seed: u64,
    ) -> Result<Row, Box<dyn Error>> {
        let o = self.options;
        let start = std::time::Instant::now();
        let device = bnn_burn::device();
        let net = target.net().valid();
        let test = tensors(&self.test, &device);
        let params = family.num_params();
        let config = ViConfig::new()
            .with_samples(1)
            .with_learning_rate(o.lr)
            .with_optimizer(OptimizerConfig::ams_grad())
            .with_seed(seed);
        let mut trainer = ViTrainer::new(family, &config)?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        // (test cross-entropy, epoch, family, the epoch's first and last step)
        let mut best: Option<(f64, usize, Q, std::ops::Range<usize>)> = None;
        let mut epochs = 0;
        for epoch in 0..o.epochs() {
            epochs = epoch + 1;
            let first = trainer.steps();
            for batch in target.epoch(o.batch_size, &mut rng) {
                trainer.step(&batch)?;
            }
            let q = trainer.family().valid();
            let (ce, _) = test_metrics(&net, q.clone(), &test, o.monitor_draws)?;
            match &best {
                Some(b) if ce >= b.0 => {
                    if epoch - b.1 >= o.patience {
                        break;
                    }
                }
                _ => best = Some((ce, epoch, q, first..trainer.steps())),
            }
        }
        let fitted = trainer.finish()?;
        let (_, best_epoch, q, steps) = best.expect("at least one epoch ran");
        let trace = &fitted.elbo_trace[steps.clone()];
        let train_elbo = trace.iter().sum::<f64>() / (trace.len() * target.rows()) as f64;
        let (test_ce, _) = test_metrics(&net, q.clone(), &test, 1)?;
        let (test_ce_100, test_accuracy) = test_metrics(&net, q, &test, EVAL_SAMPLES)?;
        Ok(Row {
            depth: task.depth,
            family: task.family.clone(),
            seed: task.seed,
            weights: target.dim(),
            params,
            epochs,
            best_epoch: best_epoch + 1,
            test_ce,
            test_ce_100,
            test_accuracy,
            train_elbo,
            dropped_draws: fitted.dropped_draws,
            seconds: start.elapsed().as_secs_f64(),
        })
    }
}

impl Harness for IrisCovarianceHarness<'_> {
    type Task = Task;
    type Row = Row;

    const NAME: &'static str = "iris-covariance";
    const FORMAT: u32 = 1;

    fn tasks(&self) -> Vec<Task> {
        let mut tasks = Vec::new();
        for depth in self.options.depths() {
            for family in self.options.families() {
                for seed in 0..self.options.seeds() {
                    tasks.push(Task {
                        depth,
                        family: family.clone(),
                        seed,
                    });
                }
            }
        }
        tasks
    }

    fn task_id(&self, t: &Task) -> String {
        format!("{} layers / {} / {}", t.depth, t.family, t.seed)
    }

    fn run_key(&self) -> serde_json::Value {
        let o = self.options;
        serde_json::json!({
            "seed": o.exp.seed,
            "epochs": o.epochs(),
            "patience": o.patience,
            "batch_size": o.batch_size,
            "lr": o.lr,
            "train_rows": TRAIN_ROWS,
        })
    }

    fn task_key(&self, _: &Task) -> serde_json::Value {
        // The thesis's single draw keys as before the option existed.
        match self.options.monitor_draws {
            1 => serde_json::json!({}),
            n => serde_json::json!({ "monitor_draws": n }),
        }
    }

    fn run_task(&self, task: &Task, _: &TaskContext) -> Result<Row, Box<dyn Error>> {
        let seed = experiment::derive(
            self.options.exp.seed,
            &["iris-covariance", &task.family, &task.depth.to_string()],
            task.seed as u64,
        );
        let device = bnn_burn::training_device();
        device.seed(seed);
        let net = network(task.depth, &device)?;
        let (x, y) = tensors(&self.train, &device);
        let target = BnnTarget::new(net, x, y)?;
        let mean = FlatLayout::flatten(target.net().mean_draw()).reshape([target.dim()]);
        let scale = ScaleInit::new().with_rho(RHO).with_rho_std(RHO_STD);
        match task.family.as_str() {
            "diagonal" => {
                let q = flat(&MeanFieldConfig::new().with_scale(scale), mean)?;
                self.fit(task, q, &target, seed)
            }
            _ => {
                let q = flat(&FullRankConfig::new().with_scale(scale), mean)?;
                self.fit(task, q, &target, seed)
            }
        }
    }

    fn describe(&self, f: &Finished<Task, Row>) -> String {
        let r = &f.row;
        format!(
            "[iris-covariance] {} layers / {} / {}: test CE {:.3} (100 draws {:.3}, acc {:.2}), \
             {} epochs, {:.1} s",
            r.depth,
            r.family,
            r.seed,
            r.test_ce,
            r.test_ce_100,
            r.test_accuracy,
            r.epochs,
            r.seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let md = markdown(&run.rows(), self.options, run.wall_seconds);
        let extra =
            serde_json::json!({ "best": self.options.best(), "seeds": self.options.seeds() });
        run.write_report(self.options, extra, &md)
    }
}

/// One cell of the figure: the `best` rows of `depth` and `family` by test cross-entropy.
pub struct Cell {
    /// Seeds run.
    pub seeds: usize,
    /// Test cross-entropy (one draw) of the best seeds: mean and standard error.
    pub ce: MeanSe,
    /// The same seeds' 100-draw cross-entropy.
    pub ce_100: MeanSe,
    /// The same seeds' accuracy.
    pub accuracy: MeanSe,
    /// The median over every seed of the one-draw cross-entropy.
    pub median_all: f64,
}

/// The cell of `depth` and `family`, `None` without rows.
pub fn cell(rows: &[Row], depth: usize, family: &str, best: usize) -> Option<Cell> {
    let mut r: Vec<&Row> = rows
        .iter()
        .filter(|r| r.depth == depth && r.family == family)
        .collect();
    if r.is_empty() {
        return None;
    }
    r.sort_by(|a, b| a.test_ce.total_cmp(&b.test_ce));
    let median_all = r[r.len() / 2].test_ce;
    let seeds = r.len();
    let kept = &r[..best.min(seeds)];
    let col = |f: fn(&Row) -> f64| {
        mean_and_standard_error(&kept.iter().map(|r| f(r)).collect::<Vec<_>>())
    };
    Some(Cell {
        seeds,
        ce: col(|r| r.test_ce),
        ce_100: col(|r| r.test_ce_100),
        accuracy: col(|r| r.test_accuracy),
        median_all,
    })
}

/// The figure as a table, with the thesis's two claims checked: the full covariance lower at
/// one hidden layer, the two within two standard errors of each other from two on.
pub fn table(rows: &[Row], best: usize) -> String {
    let mut md = String::from(
        "| hidden layers | weights | family | seeds | test CE (best) | 100-draw CE | accuracy | \
         median CE (all) | full − diagonal (s.e.) | as the thesis |\n\
         |---:|---:|---|---:|---:|---:|---:|---:|---:|:---:|\n",
    );
    let mut depths: Vec<usize> = rows.iter().map(|r| r.depth).collect();
    depths.sort_unstable();
    depths.dedup();
    for depth in depths {
        let weights = rows
            .iter()
            .find(|r| r.depth == depth)
            .map_or(0, |r| r.weights);
        let diag = cell(rows, depth, "diagonal", best);
        let full = cell(rows, depth, "full", best);
        let verdict = match (&diag, &full) {
            (Some(d), Some(f)) if d.ce.1.is_some() && f.ce.1.is_some() => {
                let se = (d.ce.1.unwrap_or(0.0).powi(2) + f.ce.1.unwrap_or(0.0).powi(2)).sqrt();
                let z = (f.ce.0 - d.ce.0) / se.max(1e-12);
                let holds = match depth {
                    1 => z < -2.0,
                    _ => z.abs() <= 2.0,
                };
                Some((format!("{:+.3} ({z:+.1})", f.ce.0 - d.ce.0), holds))
            }
            _ => None,
        };
        for (family, c) in [("diagonal", &diag), ("full", &full)] {
            let Some(c) = c else { continue };
            let (diff, holds) = match (&verdict, family) {
                (Some((d, h)), "full") => (d.clone(), if *h { "yes" } else { "no" }),
                _ => (String::new(), ""),
            };
            md.push_str(&format!(
                "| {depth} | {weights} | {family} | {} | {} | {} | {} | {:.3} | {diff} | {holds} |\n",
                c.seeds,
                fmt_mean_se(c.ce.0, c.ce.1, 3),
                fmt_mean_se(c.ce_100.0, c.ce_100.1, 3),
                fmt_mean_se(c.accuracy.0, c.accuracy.1, 3),
                c.median_all
            ));
        }
    }
    md
}

/// The report.
fn markdown(rows: &[Row], o: &IrisCovarianceOptions, wall: f64) -> String {
    let dropped: usize = rows.iter().map(|r| r.dropped_draws).sum();
    let mut md = format!(
        "# Iris: full- vs diagonal-covariance VI across depth (Farquhar 2022 Fig. 3.11)\n\n\
         An MLP of 1–4 hidden layers × {WIDTH} (LeakyReLU {SLOPE}), prior N(0, 1), a Gaussian \
         over all its weights: diagonal, or full covariance across layers. AMSGrad at {}, \
         batch {}, one training draw, at most {} epochs with patience {} on the test \
         cross-entropy ({} draws); {TRAIN_ROWS} training and 50 test rows. Each cell keeps the best {} of \
         its seeds by test cross-entropy (one draw per row, fresh draws of the kept epoch; \
         mean ± standard error over those seeds), as the thesis kept the best 10 of 100. The \
         thesis's claim: full covariance better at one hidden layer (z < −2 here), the two \
         equal from two on (|z| ≤ 2).\n\n",
        o.lr,
        o.batch_size,
        o.epochs(),
        o.patience,
        o.monitor_draws,
        o.best()
    );
    md.push_str(&table(rows, o.best()));
    if dropped > 0 {
        md.push_str(&format!(
            "\n{dropped} training draws were left out of their step for a log ratio beyond \
             f32's range.\n"
        ));
    }
    md.push_str(&format!("\nWall time {wall:.0} s.\n"));
    md
}

/// Runs the figure's grid.
///
/// # Errors
/// Bad options (before any work), a fit's error, a report that cannot be written.
pub fn run(options: &IrisCovarianceOptions) -> Result<Vec<Row>, Box<dyn Error>> {
    options.check()?;
    let (train, test) = bnn_datasets::iris::iris_split(TRAIN_ROWS, options.exp.seed)?;
    let harness = IrisCovarianceHarness {
        options,
        train,
        test,
    };
    let done = runner::run(&harness, &options.run)?;
    Ok(done.into_iter().map(|d| d.row).collect())
}
