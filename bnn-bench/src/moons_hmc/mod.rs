//! `bnn-bench moons-hmc`: Farquhar (2022) Table A.4 / Fig. 3.2 on a reduced grid. NUTS on
//! make_moons for MLPs of growing depth at about 1 000 weights (ReLU, LeakyReLU 0.5 / 0.95,
//! linear): the samples' test accuracy and acceptance beside the table, and how far the
//! posterior is from mean-field (`E_KL`, `E_W` on blocks of weights,
//! [`bnn_burn::inference::dependence`]), which the thesis finds large at one hidden layer and
//! near zero from about three.

#[cfg(test)]
mod tests;

use crate::experiment;
use crate::published::farquhar;
use crate::runner::{self, Finished, Harness, ReportInput, TaskContext};
use bnn_burn::host::HostNormals;
use bnn_burn::inference::{
    BnnTarget, Dependence, LogDensity, McmcConfig, SampledPosterior, Sampler, ViConfig, dependence,
    fit, flat, sample,
};
use bnn_burn::layers::{Activation, FlatLayout, WeightConfig};
use bnn_burn::likelihood::Categorical;
use bnn_burn::nets::{Classifier, MlpConfig};
use bnn_burn::posterior::{MeanFieldConfig, PosteriorConfig, ScaleInit};
use bnn_burn::posthoc::predict_network;
use bnn_burn::predict::PredictMode;
use burn::module::Module;
use burn::nn::Initializer;
use burn::tensor::{Int, Tensor};
use std::error::Error;

/// The activations, in table order.
pub const ACTIVATIONS: [&str; 4] = ["relu", "leaky-0.5", "leaky-0.95", "linear"];

/// Options of one `moons-hmc` run.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct MoonsHmcOptions {
    /// Activations (relu, leaky-0.5, leaky-0.95, linear); repeatable [default: all].
    #[arg(long = "activation")]
    pub activations: Vec<String>,
    /// Hidden layers (1–10); repeatable [default: 1, 2, 3, 4; 1, 3 with --quick].
    #[arg(long = "depth")]
    pub depths: Vec<usize>,
    /// Non-bias weights each network is sized for (the width solves for it).
    #[arg(long, default_value_t = 1000)]
    pub weights: usize,
    /// NUTS chains.
    #[arg(long, default_value_t = 2)]
    pub chains: usize,
    /// Warm-up iterations per chain [default: 500; 100 with --quick].
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Kept draws per chain [default: 500; 100 with --quick].
    #[arg(long)]
    pub draws: Option<usize>,
    /// NUTS's tree depth at most (2^depth leapfrog steps per draw).
    #[arg(long, default_value_t = 8)]
    pub max_depth: usize,
    /// Mean-field VI steps whose mean starts the chains (the thesis starts at the MFVI optimum).
    #[arg(long, default_value_t = 2000)]
    pub vi_iterations: usize,
    /// Noise of make_moons.
    #[arg(long, default_value_t = 0.1)]
    pub noise: f64,
    /// Training points.
    #[arg(long, default_value_t = 500)]
    pub train_rows: usize,
    /// Test points.
    #[arg(long, default_value_t = 1000)]
    pub test_rows: usize,
    /// Weights per block of the mean-field analysis [default: 50; 20 with --quick]: fewer
    /// than a chain's draws, or the covariance is singular.
    #[arg(long)]
    pub block: Option<usize>,
    /// Random blocks per network.
    #[arg(long, default_value_t = 3)]
    pub blocks: usize,
    /// The seed, and `quick`: the small budget.
    #[serde(flatten)]
    #[command(flatten)]
    pub exp: runner::ExperimentArgs,
    /// The output folder, resuming, worker processes.
    #[serde(flatten)]
    #[command(flatten)]
    pub run: runner::RunnerOptions,
}

impl MoonsHmcOptions {
    fn activations(&self) -> Vec<String> {
        match self.activations.is_empty() {
            true => ACTIVATIONS.iter().map(|s| s.to_string()).collect(),
            false => self.activations.clone(),
        }
    }
    fn depths(&self) -> Vec<usize> {
        match (self.depths.is_empty(), self.exp.quick) {
            (false, _) => self.depths.clone(),
            (true, false) => vec![1, 2, 3, 4],
            (true, true) => vec![1, 3],
        }
    }
    fn warmup(&self) -> usize {
        self.warmup
            .unwrap_or(if self.exp.quick { 100 } else { 500 })
    }
    fn draws(&self) -> usize {
        self.draws.unwrap_or(if self.exp.quick { 100 } else { 500 })
    }
    fn block(&self) -> usize {
        self.block.unwrap_or(if self.exp.quick { 20 } else { 50 })
    }

    /// Checks every choice before any work.
    fn check(&self) -> Result<(), String> {
        for a in &self.activations {
            if !ACTIVATIONS.contains(&a.as_str()) {
                return Err(format!("--activation {a:?}: use one of {ACTIVATIONS:?}"));
            }
        }
        if let Some(d) = self.depths.iter().find(|d| **d == 0 || **d > 10) {
            return Err(format!("--depth {d}: 1 to 10 hidden layers"));
        }
        for (flag, v) in [
            ("--weights", self.weights),
            ("--chains", self.chains),
            ("--draws", self.draws()),
            ("--max-depth", self.max_depth),
            ("--train-rows", self.train_rows),
            ("--test-rows", self.test_rows),
            ("--block", self.block()),
            ("--blocks", self.blocks),
        ] {
            if v == 0 {
                return Err(format!("{flag} 0: at least 1"));
            }
        }
        if self.block() >= self.draws() {
            return Err(format!(
                "--block {}: fewer than a chain's draws (--draws {}), or the block's \
                 covariance is singular",
                self.block(),
                self.draws()
            ));
        }
        if !(self.noise.is_finite() && self.noise >= 0.0) {
            return Err(format!("--noise {}: a number ≥ 0", self.noise));
        }
        Ok(())
    }
}

/// The width of `depth` hidden layers giving about `weights` non-bias weights between 2
/// inputs and 2 classes: the integer nearest the root of `(L − 1)w² + 4w = weights`.
pub fn width_for(depth: usize, weights: usize) -> usize {
    let (a, b, c) = ((depth - 1) as f64, 4.0, -(weights as f64));
    let w = match depth {
        1 => -c / b,
        _ => (-b + (b * b - 4.0 * a * c).sqrt()) / (2.0 * a),
    };
    let count = |w: usize| ((depth - 1) * w * w + 4 * w) as f64;
    let (lo, hi) = (w.floor().max(1.0) as usize, w.ceil().max(1.0) as usize);
    match (count(lo) - weights as f64).abs() <= (count(hi) - weights as f64).abs() {
        true => lo,
        false => hi,
    }
}

/// The activation and He gain of a name of [`ACTIVATIONS`].
pub fn activation(name: &str) -> (Activation, f64) {
    match name {
        "relu" => (Activation::Relu, 2f64.sqrt()),
        "linear" => (Activation::Identity, 1.0),
        _ => {
            let slope: f64 = name
                .trim_start_matches("leaky-")
                .parse()
                .expect("a checked activation");
            (
                Activation::LeakyRelu { slope },
                (2.0 / (1.0 + slope * slope)).sqrt(),
            )
        }
    }
}

/// The network of `activation` with `depth` hidden layers of `width`: point weights (the
/// sampler's), He means, the prior `N(0, 1)` (the thesis's prior precision 1).
pub fn network(
    activation_name: &str,
    depth: usize,
    width: usize,
    device: &burn::tensor::Device,
) -> Result<Classifier, Box<dyn Error>> {
    let (act, gain) = activation(activation_name);
    let weights = WeightConfig::of(PosteriorConfig::point()).with_initializer(
        bnn_burn::layers::MeanInit::Burn(Initializer::KaimingNormal {
            gain,
            fan_out_only: false,
        }),
    );
    Ok(MlpConfig::new(2, vec![width; depth], 2)
        .with_weights(weights)
        .with_activation(act)
        .init(Categorical, device)?)
}

/// One network.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// A name of [`ACTIVATIONS`].
    pub activation: String,
    /// Hidden layers.
    pub depth: usize,
}

/// What one network's chains measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// The activation.
    pub activation: String,
    /// Hidden layers.
    pub depth: usize,
    /// Hidden width.
    pub width: usize,
    /// All weights, biases included (the sampler's dimension).
    pub dim: usize,
    /// Test accuracy of the samples' predictive, percent.
    pub accuracy: f64,
    /// Test accuracy of the mean-field fit that started the chains, percent.
    pub vi_accuracy: f64,
    /// Mean acceptance statistic of the kept iterations, percent.
    pub acceptance: f64,
    /// Divergent iterations, all chains.
    pub divergences: usize,
    /// The largest split-R̂ over weights.
    pub max_rhat: f64,
    /// The smallest bulk ESS over weights.
    pub min_ess: f64,
    /// Leapfrog steps of the kept iterations, all chains.
    pub leapfrogs: usize,
    /// `E_KL` and `E_W` of each random block of weights.
    pub blocks: Vec<Dependence>,
    /// Seconds of sampling.
    pub nuts_seconds: f64,
    /// Seconds in all.
    pub seconds: f64,
}

impl Row {
    /// The mean `E_KL` and `E_W` over blocks, and their shuffled floors.
    pub fn dependence(&self) -> Dependence {
        mean_dependence(&self.blocks)
    }
}

/// The entrywise mean of `d`.
fn mean_dependence(d: &[Dependence]) -> Dependence {
    let n = d.len().max(1) as f64;
    let mean = |f: fn(&Dependence) -> f64| d.iter().map(f).sum::<f64>() / n;
    Dependence {
        e_kl: mean(|b| b.e_kl),
        e_w: mean(|b| b.e_w),
        e_kl_null: mean(|b| b.e_kl_null),
        e_w_null: mean(|b| b.e_w_null),
    }
}

/// The harness.
pub struct MoonsHmcHarness<'a> {
    options: &'a MoonsHmcOptions,
}

/// make_moons points as tensors on `device`.
fn moons(
    n: usize,
    noise: f64,
    seed: u64,
    device: &burn::tensor::Device,
) -> (Tensor<2>, Tensor<1, Int>) {
    let d = bnn_datasets::toy::two_moons(n, noise, seed);
    let x: Vec<f64> = d.x.iter().flat_map(|p| [p[0], p[1]]).collect();
    let labels: Vec<i64> = d.label.iter().map(|&l| l as i64).collect();
    (
        bnn_burn::host::matrix(&x, 2, device),
        Tensor::<1, Int>::from_ints(labels.as_slice(), device),
    )
}

/// Test accuracy (percent) of a network posterior's predictive from all its draws.
fn accuracy<P: bnn_burn::posthoc::NetworkPosterior<Likelihood = Categorical>>(
    posterior: &P,
    draws: usize,
    test: &(Tensor<2>, Tensor<1, Int>),
) -> Result<f64, Box<dyn Error>>
where
    P::Body: bnn_burn::nets::Body<Input = Tensor<2>>,
{
    let p = predict_network(posterior, test.0.clone(), PredictMode::Samples(draws))?;
    let hits = p.predicted_class().equal(test.1.clone()).float().mean();
    Ok(100.0 * bnn_burn::host::to_vec(hits)[0])
}

impl Harness for MoonsHmcHarness<'_> {
    type Task = Task;
    type Row = Row;

    const NAME: &'static str = "moons-hmc";
    const FORMAT: u32 = 2;

    fn tasks(&self) -> Vec<Task> {
        runner::grid(
            &self.options.activations(),
            &self.options.depths(),
            |a, d| Task {
                activation: a.clone(),
                depth: *d,
            },
        )
    }

    fn task_id(&self, t: &Task) -> String {
        format!("{} / {} layers", t.activation, t.depth)
    }

    fn run_key(&self) -> serde_json::Value {
        let o = self.options;
        serde_json::json!({
            "seed": o.exp.seed,
            "weights": o.weights,
            "chains": o.chains,
            "warmup": o.warmup(),
            "draws": o.draws(),
            "max_depth": o.max_depth,
            "vi_iterations": o.vi_iterations,
            "noise": o.noise,
            "train_rows": o.train_rows,
            "test_rows": o.test_rows,
            "block": o.block(),
            "blocks": o.blocks,
        })
    }

    fn task_key(&self, _: &Task) -> serde_json::Value {
        serde_json::json!({})
    }

    fn run_task(&self, task: &Task, _: &TaskContext) -> Result<Row, Box<dyn Error>> {
        let o = self.options;
        let start = std::time::Instant::now();
        let seed = experiment::derive(
            o.exp.seed,
            &["moons-hmc", &task.activation, &task.depth.to_string()],
            0,
        );
        let device = bnn_burn::training_device();
        device.seed(seed);
        let width = width_for(task.depth, o.weights);
        let net = network(&task.activation, task.depth, width, &device)?;
        let (x, y) = moons(o.train_rows, o.noise, o.exp.seed, &device);
        let test = moons(o.test_rows, o.noise, o.exp.seed + 1, &bnn_burn::device());
        let target = BnnTarget::new(net, x, y)?;
        let dim = target.dim();
        // The chains start at a mean-field fit's mean, as the thesis's.
        let mean = FlatLayout::flatten(target.net().mean_draw()).reshape([dim]);
        let scale = ScaleInit::new().with_rho(-5.0).with_rho_std(0.0);
        let q = flat(&MeanFieldConfig::new().with_scale(scale), mean)?;
        let vi = ViConfig::new()
            .with_iterations(o.vi_iterations)
            .with_samples(4)
            .with_learning_rate(1e-2)
            .with_seed(seed);
        let fitted = fit(&target, q, &vi)?;
        let net = target.net().valid();
        let vi_posterior =
            bnn_burn::inference::FlatPosterior::new(net.clone(), fitted.family.valid())?;
        let vi_accuracy = accuracy(&vi_posterior, 100, &test)?;
        let init = bnn_burn::host::to_vec(fitted.family.loc.mu.val());
        let config = McmcConfig::new()
            .with_sampler(Sampler::Nuts {
                max_depth: o.max_depth,
            })
            .with_warmup(o.warmup())
            .with_draws(o.draws())
            .with_chains(o.chains)
            .with_seed(seed);
        let run = sample(&target, &config, Some(&init))?;
        let pooled = run.pooled();
        let posterior = SampledPosterior::new(net, &pooled)?;
        let accuracy = accuracy(&posterior, pooled.len(), &test)?;
        let summary = run.summary();
        let mut rng = HostNormals::new(seed ^ 0xb10c);
        let mut blocks = Vec::with_capacity(o.blocks);
        for _ in 0..o.blocks {
            let block = rng.choose_distinct(dim, o.block());
            // Per chain, then averaged: chains in different modes would otherwise make the
            // between-mode gap look like dependence (the thesis keeps one mixture component).
            let per_chain = run
                .chains
                .iter()
                .map(|c| dependence(&c.draws, &block, &mut rng))
                .collect::<Result<Vec<_>, _>>()?;
            blocks.push(mean_dependence(&per_chain));
        }
        Ok(Row {
            activation: task.activation.clone(),
            depth: task.depth,
            width,
            dim,
            accuracy,
            vi_accuracy,
            acceptance: 100.0 * run.mean_accept(),
            divergences: run.divergences(),
            max_rhat: summary.iter().map(|s| s.rhat).fold(0.0, f64::max),
            min_ess: summary
                .iter()
                .map(|s| s.ess_bulk)
                .fold(f64::INFINITY, f64::min),
            leapfrogs: run.leapfrogs(),
            blocks,
            nuts_seconds: run.seconds,
            seconds: start.elapsed().as_secs_f64(),
        })
    }

    fn describe(&self, f: &Finished<Task, Row>) -> String {
        let r = &f.row;
        let d = r.dependence();
        format!(
            "[moons-hmc] {} / {} layers (width {}): accuracy {:.1} %, acceptance {:.1} %, \
             E_KL {:.2} (floor {:.2}), E_W {:.3} (floor {:.3}), R̂ ≤ {:.3}, {:.0} s",
            r.activation,
            r.depth,
            r.width,
            r.accuracy,
            r.acceptance,
            d.e_kl,
            d.e_kl_null,
            d.e_w,
            d.e_w_null,
            r.max_rhat,
            r.seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let md = markdown(&run.rows(), self.options, run.wall_seconds);
        run.write_report(self.options, serde_json::json!({}), &md)
    }
}

/// Our cells beside the printed ones, then the mean-field errors by depth.
pub fn table(rows: &[Row]) -> String {
    let mut md = String::from(
        "| activation | hidden layers | width | weights | accuracy % | printed | acceptance % | \
         printed | MFVI start accuracy % | divergences | max R̂ | min ESS | E_KL (floor) | \
         E_W (floor) |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by_key(|r| (ACTIVATIONS.iter().position(|a| *a == r.activation), r.depth));
    for r in sorted {
        let (acc, rate) = farquhar::hmc_cell(&r.activation, r.depth)
            .map_or((String::from("–"), String::from("–")), |(a, b)| {
                (format!("{a:.1}"), format!("{b:.1}"))
            });
        let d = r.dependence();
        md.push_str(&format!(
            "| {} | {} | {} | {} | {:.1} | {acc} | {:.1} | {rate} | {:.1} | {} | {:.3} | {:.0} | \
             {:.2} ({:.2}) | {:.3} ({:.3}) |\n",
            r.activation,
            r.depth,
            r.width,
            r.dim,
            r.accuracy,
            r.acceptance,
            r.vi_accuracy,
            r.divergences,
            r.max_rhat,
            r.min_ess,
            d.e_kl,
            d.e_kl_null,
            d.e_w,
            d.e_w_null
        ));
    }
    md
}

/// The report.
fn markdown(rows: &[Row], o: &MoonsHmcOptions, wall: f64) -> String {
    let mut md = format!(
        "# NUTS on make_moons across depth (Farquhar 2022 Table A.4 / Fig. 3.2, reduced)\n\n\
         make_moons, {} training and {} test points, noise {}; MLPs at about {} non-bias \
         weights, the prior N(0, 1). NUTS (tree depth ≤ {}) with {} chains of {} warm-up and {} \
         kept iterations from the mean of a mean-field fit ({} steps). The thesis ran 20 \
         restarts of 10 000 burn-in steps and 1 000 samples 100 leapfrog steps apart, on 1–10 \
         layers. E_KL = KL(q̂_full ‖ q̂_diag) and E_W = W₂(p, q̂_diag) − W₂(p, q̂_full) \
         (Farquhar eqs. 3.2–3.3) on {} random blocks of {} weights, per chain and averaged (one \
         Gaussian fitted to a chain's draws; the thesis takes the top component of a \
         BIC-chosen mixture over all weights); \
         the floor in brackets is the same statistic with each weight's draws shuffled \
         independently, what finite draws alone give. The thesis finds both errors large at \
         one hidden layer and near zero from about three.\n\n",
        o.train_rows,
        o.test_rows,
        o.noise,
        o.weights,
        o.max_depth,
        o.chains,
        o.warmup(),
        o.draws(),
        o.vi_iterations,
        o.blocks,
        o.block()
    );
    md.push_str(&table(rows));
    md.push_str(&format!("\nWall time {wall:.0} s.\n"));
    md
}

/// Runs the grid.
///
/// # Errors
/// Bad options (before any work), a sampler's error, a report that cannot be written.
pub fn run(options: &MoonsHmcOptions) -> Result<Vec<Row>, Box<dyn Error>> {
    options.check()?;
    let harness = MoonsHmcHarness { options };
    let done = runner::run(&harness, &options.run)?;
    Ok(done.into_iter().map(|d| d.row).collect())
}
