//! `bnn-bench in-between`: Farquhar (2022) Figs. 3.6/3.7, Table A.1. Mean-field VI (Flipout)
//! on a 1-D set with a gap between two clusters, one vs three hidden layers of 100, against
//! NUTS on the same tempered posterior: how much uncertainty each puts in the gap. The thesis:
//! one layer shows little, three layers show much (less than HMC). Foong et al.'s bound for one
//! mean-field layer, `Var f(x) ≤ Var f(a) + Var f(b)` between `a` and `b`, is checked too.

#[cfg(test)]
mod tests;

use crate::experiment;
use crate::runner::{self, Finished, Harness, ReportInput, TaskContext};
use bnn_burn::error::ConfigError;
use bnn_burn::host::{matrix, to_vec};
use bnn_burn::inference::{BnnTarget, LogDensity, McmcConfig, Sampler, max_rhat, sample};
use bnn_burn::layers::{Activation, Estimator, FlatLayout, WeightConfig};
use bnn_burn::likelihood::{GaussianLikelihoodConfig, NoiseFit};
use bnn_burn::metrics::rmse;
use bnn_burn::nets::{MlpConfig, Regressor};
use bnn_burn::objective::KlSchedule;
use bnn_burn::posterior::{MeanFieldConfig, PosteriorConfig, ScaleInit};
use bnn_burn::predict::{Predict, PredictMode};
use bnn_burn::train::{OptimizerConfig, TrainConfig, Trainer};
use bnn_datasets::toy::{IN_BETWEEN_CLUSTERS, IN_BETWEEN_NOISE_STD, in_between, in_between_mean};
use burn::module::Module;
use burn::nn::Initializer;
use std::error::Error;

/// LeakyReLU's negative slope (TensorFlow's default; the thesis names no slope).
pub const SLOPE: f64 = 0.2;
/// The plotted and measured inputs: `[−3, 3]` in steps of 0.05.
pub const GRID: (f64, f64, usize) = (-3.0, 3.0, 121);
/// Weight draws of the mean-field predictive on the grid.
const VI_DRAWS: usize = 1000;

/// Options of one `in-between` run.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct InBetweenOptions {
    /// Hidden layers; repeatable [default: 1, 3].
    #[arg(long = "depth")]
    pub depths: Vec<usize>,
    /// Units a hidden layer (Table A.1: 100).
    #[arg(long, default_value_t = 100)]
    pub width: usize,
    /// Training points in each cluster (the thesis: 750).
    #[arg(long, default_value_t = 750)]
    pub per_cluster: usize,
    /// Epochs of the mean-field fit [default: 6000, as Table A.1; 300 with --quick].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Minibatch rows.
    #[arg(long, default_value_t = 250)]
    pub batch_size: usize,
    /// AMSGrad's learning rate.
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f64,
    /// The temperature `T` of the posterior `p(D | θ)^{1/T} p(θ)`, both for VI (its KL weighted
    /// by `T`) and for NUTS (Table A.1: 65).
    #[arg(long, default_value_t = 65.0)]
    pub temperature: f64,
    /// NUTS chains.
    #[arg(long, default_value_t = 2)]
    pub chains: usize,
    /// Warm-up iterations per chain [default: 500; 30 with --quick].
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Kept draws per chain [default: 500; 30 with --quick].
    #[arg(long)]
    pub draws: Option<usize>,
    /// NUTS's tree depth at most (2^depth leapfrog steps per draw).
    #[arg(long, default_value_t = 7)]
    pub max_depth: usize,
    /// The seed, and `quick`: the small budget.
    #[serde(flatten)]
    #[command(flatten)]
    pub exp: runner::ExperimentArgs,
    /// The output folder, resuming, worker processes.
    #[serde(flatten)]
    #[command(flatten)]
    pub run: runner::RunnerOptions,
}

impl InBetweenOptions {
    fn depths(&self) -> Vec<usize> {
        match self.depths.is_empty() {
            true => vec![1, 3],
            false => self.depths.clone(),
        }
    }
    fn epochs(&self) -> usize {
        self.epochs
            .unwrap_or(if self.exp.quick { 300 } else { 6000 })
    }
    fn warmup(&self) -> usize {
        self.warmup.unwrap_or(if self.exp.quick { 30 } else { 500 })
    }
    fn draws(&self) -> usize {
        self.draws.unwrap_or(if self.exp.quick { 30 } else { 500 })
    }

    /// Checks every choice before any work.
    fn check(&self) -> Result<(), String> {
        if let Some(d) = self.depths.iter().find(|d| **d == 0 || **d > 6) {
            return Err(format!("--depth {d}: 1 to 6 hidden layers"));
        }
        for (flag, v) in [
            ("--epochs", self.epochs()),
            ("--batch-size", self.batch_size),
            ("--width", self.width),
            ("--per-cluster", self.per_cluster),
            ("--chains", self.chains),
            ("--max-depth", self.max_depth),
        ] {
            if v == 0 {
                return Err(format!("{flag} 0: at least 1"));
            }
        }
        // Split-R̂ needs at least 4 draws a chain.
        if self.draws() < 4 {
            return Err(format!("--draws {}: at least 4", self.draws()));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(format!("--lr {}: a number > 0", self.lr));
        }
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Err(format!("--temperature {}: a number > 0", self.temperature));
        }
        Ok(())
    }
}

/// The grid's inputs.
pub fn grid() -> Vec<f64> {
    let (lo, hi, n) = GRID;
    (0..n)
        .map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
        .collect()
}

/// A posterior's function on the grid: the mean and standard deviation of `f(x)` over its
/// weights (the epistemic part; the noise is 0.05 everywhere).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Curve {
    /// `E f(x)` on [`grid`].
    pub mean: Vec<f64>,
    /// `sd f(x)` on [`grid`].
    pub std: Vec<f64>,
}

/// How much of a curve's uncertainty lies in the gap.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GapSummary {
    /// Mean `sd f` over the grid points inside the gap `(−1.4, 1.0)`.
    pub gap_std: f64,
    /// The largest `sd f` there.
    pub gap_max_std: f64,
    /// Mean `sd f` over the grid points inside the clusters.
    pub data_std: f64,
    /// Foong et al.'s ratio `max_gap Var f(x) / (Var f(a) + Var f(b))` at the gap's ends `a`,
    /// `b`: at most 1 for one mean-field hidden layer (their Theorem 1).
    pub foong_ratio: f64,
}

impl Curve {
    /// Its [`GapSummary`].
    pub fn summary(&self) -> GapSummary {
        let x = grid();
        let (a, b) = (IN_BETWEEN_CLUSTERS[0].1, IN_BETWEEN_CLUSTERS[1].0);
        let eps = 1e-9;
        let gap: Vec<usize> = (0..x.len())
            .filter(|&i| x[i] > a + eps && x[i] < b - eps)
            .collect();
        let data: Vec<usize> = (0..x.len())
            .filter(|&i| {
                IN_BETWEEN_CLUSTERS
                    .iter()
                    .any(|(lo, hi)| x[i] >= lo - eps && x[i] <= hi + eps)
            })
            .collect();
        let nearest = |t: f64| {
            (0..x.len())
                .min_by(|&i, &j| (x[i] - t).abs().total_cmp(&(x[j] - t).abs()))
                .expect("a grid")
        };
        let mean = |idx: &[usize]| idx.iter().map(|&i| self.std[i]).sum::<f64>() / idx.len() as f64;
        let ends = self.std[nearest(a)].powi(2) + self.std[nearest(b)].powi(2);
        let gap_max_std = gap.iter().map(|&i| self.std[i]).fold(0.0, f64::max);
        GapSummary {
            gap_std: mean(&gap),
            gap_max_std,
            data_std: mean(&data),
            foong_ratio: gap_max_std.powi(2) / ends.max(1e-300),
        }
    }
}

/// The mean and standard deviation over draws of `f[s][i]` (draw `s`, grid point `i`).
fn curve_of(f: &[Vec<f64>]) -> Curve {
    let n = f.len() as f64;
    let points = f.first().map_or(0, Vec::len);
    let mut curve = Curve {
        mean: vec![0.0; points],
        std: vec![0.0; points],
    };
    for i in 0..points {
        let m = f.iter().map(|d| d[i]).sum::<f64>() / n;
        let v = f.iter().map(|d| (d[i] - m).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
        curve.mean[i] = m;
        curve.std[i] = v.sqrt();
    }
    curve
}

/// What the mean-field fit left: its curve, and its means as the samplers' start.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct ViPart {
    curve: Curve,
    /// Training RMSE of the predictive mean.
    train_rmse: f64,
    /// The weights' means, flat ([`FlatLayout`] order, biases included).
    means: Vec<f64>,
    seconds: f64,
}

/// One network depth.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// Hidden layers.
    pub depth: usize,
}

/// What one depth measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// Hidden layers.
    pub depth: usize,
    /// Weights, biases included.
    pub dim: usize,
    /// The mean-field fit's curve.
    pub vi: Curve,
    /// Its gap summary.
    pub vi_summary: GapSummary,
    /// Its training RMSE.
    pub vi_train_rmse: f64,
    /// NUTS's curve.
    pub nuts: Curve,
    /// Its gap summary.
    pub nuts_summary: GapSummary,
    /// Its training RMSE.
    pub nuts_train_rmse: f64,
    /// Mean acceptance statistic of the kept iterations, percent.
    pub acceptance: f64,
    /// Divergent iterations, all chains.
    pub divergences: usize,
    /// Leapfrog steps of the kept iterations, all chains.
    pub leapfrogs: usize,
    /// The largest split-R̂ of `f(x)` over the grid.
    pub max_rhat_f: f64,
    /// Seconds of the mean-field fit.
    pub vi_seconds: f64,
    /// Seconds of NUTS.
    pub nuts_seconds: f64,
}

/// The harness.
pub struct InBetweenHarness<'a> {
    options: &'a InBetweenOptions,
}

/// The mean-field network of Table A.1: `depth` hidden layers of `width`, LeakyReLU,
/// Flipout, the prior `N(0, 1)`, TensorFlow Probability's initial posterior (means
/// `N(0, 0.1²)`, `σ = softplus(N(−3, 0.1²))`, point biases as its `DenseFlipout`'s), the noise
/// fixed at 0.05.
pub fn vi_network(
    depth: usize,
    width: usize,
    device: &burn::tensor::Device,
) -> Result<Regressor, ConfigError> {
    let scale = ScaleInit::new().with_rho(-3.0).with_rho_std(0.1);
    let weights = WeightConfig::of(PosteriorConfig::MeanField(
        MeanFieldConfig::new().with_scale(scale),
    ))
    .with_estimator(Estimator::Flipout)
    .with_initializer(bnn_burn::layers::MeanInit::Burn(Initializer::Normal {
        mean: 0.0,
        std: 0.1,
    }))
    .with_bias(bnn_burn::layers::Bias::Point);
    network(depth, width, weights, device)
}

/// The network NUTS samples: the same layers with point weights, biases included in `θ`.
pub fn point_network(
    depth: usize,
    width: usize,
    device: &burn::tensor::Device,
) -> Result<Regressor, ConfigError> {
    network(
        depth,
        width,
        WeightConfig::of(PosteriorConfig::point()),
        device,
    )
}

fn network(
    depth: usize,
    width: usize,
    weights: WeightConfig,
    device: &burn::tensor::Device,
) -> Result<Regressor, ConfigError> {
    let noise = GaussianLikelihoodConfig::new()
        .with_noise_std(IN_BETWEEN_NOISE_STD)
        .with_fit(NoiseFit::Fixed)
        .init(device)?;
    MlpConfig::new(1, vec![width; depth], 1)
        .with_weights(weights)
        .with_activation(Activation::LeakyRelu { slope: SLOPE })
        .init(noise, device)
}

/// `f` of each flat draw (rows of `theta`) on `x` through `net`'s layout, `[draws][x]`.
fn functions(net: &Regressor, theta: &[Vec<f64>], x: &[f64]) -> Vec<Vec<f64>> {
    let device = net.devices()[0].clone();
    let layout = net.flat_layout();
    let input = matrix(x, 1, &device);
    let mut out = Vec::with_capacity(theta.len());
    // In chunks, so that a long chain's activations stay small.
    for chunk in theta.chunks(100) {
        let flat: Vec<f64> = chunk.iter().flatten().copied().collect();
        let t = matrix(&flat, layout.numel(), &device);
        let f = to_vec(net.forward_draws(input.clone(), &layout.split(t)));
        out.extend(f.chunks(x.len()).map(<[f64]>::to_vec));
    }
    out
}

impl InBetweenHarness<'_> {
    /// The mean-field fit (Table A.1's optimiser and budget), its curve and means.
    fn fit_vi(&self, task: &Task, seed: u64) -> Result<ViPart, Box<dyn Error>> {
        let o = self.options;
        let start = std::time::Instant::now();
        let data = in_between(o.per_cluster, o.exp.seed);
        let device = bnn_burn::training_device();
        let x = matrix(&data.x, 1, &device);
        let y = matrix(&data.y, 1, &device);
        let config = TrainConfig::new(o.epochs())
            .with_batch_size(o.batch_size)
            .with_learning_rate(o.lr)
            .with_optimizer(OptimizerConfig::ams_grad())
            .with_kl_schedule(KlSchedule::Constant {
                weight: o.temperature,
            })
            .with_seed(seed)
            .with_progress(false);
        let (depth, width) = (task.depth, o.width);
        let (net, _) =
            Trainer::new(config).build_and_fit(|d| vi_network(depth, width, d), (x, y))?;
        let net = net.valid();
        let plain = net.devices()[0].clone();
        let g = grid();
        let p = net.predict(matrix(&g, 1, &plain), PredictMode::Samples(VI_DRAWS))?;
        let curve = Curve {
            mean: to_vec(p.mean()),
            std: to_vec(p.epistemic_variance())
                .into_iter()
                .map(f64::sqrt)
                .collect(),
        };
        let fit = net.predict(matrix(&data.x, 1, &plain), PredictMode::Samples(100))?;
        Ok(ViPart {
            curve,
            train_rmse: rmse(&to_vec(fit.mean()), &data.y, &[1.0]),
            means: to_vec(FlatLayout::flatten(net.mean_draw())),
            seconds: start.elapsed().as_secs_f64(),
        })
    }
}

impl Harness for InBetweenHarness<'_> {
    type Task = Task;
    type Row = Row;

    const NAME: &'static str = "in-between";
    const FORMAT: u32 = 1;

    fn tasks(&self) -> Vec<Task> {
        self.options
            .depths()
            .into_iter()
            .map(|depth| Task { depth })
            .collect()
    }

    fn task_id(&self, t: &Task) -> String {
        format!("{} layers", t.depth)
    }

    fn run_key(&self) -> serde_json::Value {
        let o = self.options;
        serde_json::json!({
            "seed": o.exp.seed,
            "width": o.width,
            "per_cluster": o.per_cluster,
            "epochs": o.epochs(),
            "batch_size": o.batch_size,
            "lr": o.lr,
            "temperature": o.temperature,
            "chains": o.chains,
            "warmup": o.warmup(),
            "draws": o.draws(),
            "max_depth": o.max_depth,
        })
    }

    fn task_key(&self, _: &Task) -> serde_json::Value {
        serde_json::json!({})
    }

    fn run_task(&self, task: &Task, context: &TaskContext) -> Result<Row, Box<dyn Error>> {
        let o = self.options;
        let seed = experiment::derive(o.exp.seed, &["in-between", &task.depth.to_string()], 0);
        let vi = match context.part::<ViPart>("vi")? {
            Some(part) => part,
            None => {
                let part = self.fit_vi(task, seed)?;
                context.save_part("vi", &part)?;
                part
            }
        };
        let device = bnn_burn::training_device();
        device.seed(seed ^ 0x4e);
        let net = point_network(task.depth, o.width, &device)?;
        let data = in_between(o.per_cluster, o.exp.seed);
        let target = BnnTarget::new(
            net,
            matrix(&data.x, 1, &device),
            matrix(&data.y, 1, &device),
        )?
        .with_temperature(o.temperature)?;
        if target.dim() != vi.means.len() {
            return Err(format!(
                "the mean-field fit has {} weights, the sampler's network {}",
                vi.means.len(),
                target.dim()
            )
            .into());
        }
        let config = McmcConfig::new()
            .with_sampler(Sampler::Nuts {
                max_depth: o.max_depth,
            })
            .with_warmup(o.warmup())
            .with_draws(o.draws())
            .with_chains(o.chains)
            .with_seed(seed);
        let run = sample(&target, &config, Some(&vi.means))?;
        let net = target.net().valid();
        let g = grid();
        let per_chain: Vec<Vec<Vec<f64>>> = run
            .chains
            .iter()
            .map(|c| functions(&net, &c.draws, &g))
            .collect();
        let pooled: Vec<Vec<f64>> = per_chain.iter().flatten().cloned().collect();
        let nuts = curve_of(&pooled);
        let max_rhat_f = max_rhat(&per_chain);
        let fit = functions(&net, &run.pooled(), &data.x);
        let nuts_train_rmse = rmse(&curve_of(&fit).mean, &data.y, &[1.0]);
        Ok(Row {
            depth: task.depth,
            dim: target.dim(),
            vi_summary: vi.curve.summary(),
            vi: vi.curve,
            vi_train_rmse: vi.train_rmse,
            nuts_summary: nuts.summary(),
            nuts,
            nuts_train_rmse,
            acceptance: 100.0 * run.mean_accept(),
            divergences: run.divergences(),
            leapfrogs: run.leapfrogs(),
            max_rhat_f,
            vi_seconds: vi.seconds,
            nuts_seconds: run.seconds,
        })
    }

    fn describe(&self, f: &Finished<Task, Row>) -> String {
        let r = &f.row;
        format!(
            "[in-between] {} layers: gap sd f MFVI {:.3} / NUTS {:.3} (data {:.3} / {:.3}), \
             Foong ratio {:.2} / {:.2}, acceptance {:.0} %, R̂_f ≤ {:.2}, {:.0} + {:.0} s",
            r.depth,
            r.vi_summary.gap_std,
            r.nuts_summary.gap_std,
            r.vi_summary.data_std,
            r.nuts_summary.data_std,
            r.vi_summary.foong_ratio,
            r.nuts_summary.foong_ratio,
            r.acceptance,
            r.max_rhat_f,
            r.vi_seconds,
            r.nuts_seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let rows = run.rows();
        let md = markdown(&rows, self.options, run.wall_seconds);
        let data = in_between(self.options.per_cluster, self.options.exp.seed);
        crate::plots::write_svg(run.out, "in-between.svg", |p| plot(p, &rows, &data))?;
        run.write_report(self.options, serde_json::json!({}), &md)
    }
}

/// The gap's uncertainty per depth and method, and the thesis's three claims checked.
pub fn table(rows: &[Row]) -> String {
    let mut md = String::from(
        "| hidden layers | weights | method | mean sd f in the gap | largest | mean sd f on the \
         data | gap / data | Foong ratio | training RMSE |\n\
         |---:|---:|---|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by_key(|r| r.depth);
    for r in &sorted {
        for (method, s, rmse) in [
            ("MFVI (Flipout)", &r.vi_summary, r.vi_train_rmse),
            ("NUTS", &r.nuts_summary, r.nuts_train_rmse),
        ] {
            md.push_str(&format!(
                "| {} | {} | {method} | {:.3} | {:.3} | {:.3} | {:.1} | {:.2} | {:.3} |\n",
                r.depth,
                r.dim,
                s.gap_std,
                s.gap_max_std,
                s.data_std,
                s.gap_std / s.data_std.max(1e-300),
                s.foong_ratio,
                rmse
            ));
        }
    }
    let one = sorted.iter().find(|r| r.depth == 1);
    let three = sorted.iter().find(|r| r.depth == 3);
    if let (Some(one), Some(three)) = (one, three) {
        let yes = |b: bool| if b { "yes" } else { "no" };
        md.push_str(&format!(
            "\nThe thesis's reading, checked: three layers put more uncertainty in the gap than \
             one (MFVI {:.3} vs {:.3}): {}; less than NUTS at three layers ({:.3} vs {:.3}): {}; \
             one mean-field layer within Foong et al.'s bound (ratio {:.2} ≤ 1): {}.\n",
            three.vi_summary.gap_std,
            one.vi_summary.gap_std,
            yes(three.vi_summary.gap_std > one.vi_summary.gap_std),
            three.vi_summary.gap_std,
            three.nuts_summary.gap_std,
            yes(three.vi_summary.gap_std < three.nuts_summary.gap_std),
            one.vi_summary.foong_ratio,
            yes(one.vi_summary.foong_ratio <= 1.0)
        ));
    }
    md
}

/// The sampler's health per depth.
fn sampler_table(rows: &[Row]) -> String {
    let mut md = String::from(
        "| hidden layers | acceptance % | divergences | leapfrog steps | max R̂ of f(x) | MFVI s | \
         NUTS s |\n|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        md.push_str(&format!(
            "| {} | {:.1} | {} | {} | {:.3} | {:.0} | {:.0} |\n",
            r.depth,
            r.acceptance,
            r.divergences,
            r.leapfrogs,
            r.max_rhat_f,
            r.vi_seconds,
            r.nuts_seconds
        ));
    }
    md
}

/// The report.
fn markdown(rows: &[Row], o: &InBetweenOptions, wall: f64) -> String {
    let mut md = format!(
        "# In-between uncertainty: one vs three hidden layers (Farquhar 2022 Figs. 3.6/3.7)\n\n\
         `y = sin(4(x − 4.3)) + ε`, `ε ~ N(0, 0.05²)`, {} points in each of [−2, −1.4] \
         and [1.0, 1.8]; MLPs of {} LeakyReLU ({SLOPE}) units a layer, the prior N(0, 1), the \
         noise fixed at 0.05. Mean-field VI with Flipout: AMSGrad at {}, batch {}, one draw, {} \
         epochs, the KL weighted by the temperature {} (the posterior `p(D | θ)^(1/T) p(θ)`). \
         NUTS (tree depth ≤ {}) on the same tempered posterior, {} chains of {} warm-up and {} \
         kept iterations from the mean-field means. `sd f` is the standard deviation of the \
         network's output over the posterior on a grid of [−3, 3]; the gap is (−1.4, 1.0). \
         Foong et al.'s ratio `max Var f(x) / (Var f(−1.4) + Var f(1.0))` over the gap is at \
         most 1 for one mean-field hidden layer.\n\n",
        o.per_cluster,
        o.width,
        o.lr,
        o.batch_size,
        o.epochs(),
        o.temperature,
        o.max_depth,
        o.chains,
        o.warmup(),
        o.draws()
    );
    md.push_str(&table(rows));
    md.push_str("\n## The sampler\n\n");
    md.push_str(&sampler_table(rows));
    md.push_str(&format!(
        "\n![The predictive of each method](in-between.svg)\n\nWall time {wall:.0} s.\n"
    ));
    md
}

/// One panel per depth: the data, the true function, and each method's `E f ± 2 sd f`.
fn plot(
    path: &std::path::Path,
    rows: &[Row],
    data: &bnn_datasets::toy::Regression1d,
) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by_key(|r| r.depth);
    let cols = sorted.len().max(1);
    let root = SVGBackend::new(path, (460 * cols as u32, 380)).into_drawing_area();
    root.fill(&WHITE)?;
    let g = grid();
    let (lo, hi) = (-3.0, 3.0);
    for (area, r) in root.split_evenly((1, cols)).iter().zip(&sorted) {
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{} hidden layer(s)", r.depth), ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(40)
            .build_cartesian_2d(GRID.0..GRID.1, lo..hi)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("x")
            .y_desc("y")
            .draw()?;
        let band = |c: &Curve| {
            let mut p: Vec<(f64, f64)> = g
                .iter()
                .enumerate()
                .map(|(i, x)| (*x, (c.mean[i] + 2.0 * c.std[i]).clamp(lo, hi)))
                .collect();
            p.extend(
                g.iter()
                    .enumerate()
                    .rev()
                    .map(|(i, x)| (*x, (c.mean[i] - 2.0 * c.std[i]).clamp(lo, hi))),
            );
            p
        };
        let nuts_color = RGBColor(100, 149, 237);
        let vi_color = RGBColor(255, 140, 0);
        chart
            .draw_series(std::iter::once(Polygon::new(
                band(&r.nuts),
                nuts_color.mix(0.35),
            )))?
            .label("NUTS ± 2 sd f")
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 12, y + 5)], nuts_color.filled())
            });
        chart
            .draw_series(std::iter::once(Polygon::new(
                band(&r.vi),
                vi_color.mix(0.45),
            )))?
            .label("MFVI ± 2 sd f")
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], vi_color.filled()));
        chart.draw_series(
            data.x
                .iter()
                .zip(&data.y)
                .step_by(10)
                .map(|(x, y)| Circle::new((*x, *y), 1, BLACK.mix(0.5).filled())),
        )?;
        chart
            .draw_series(LineSeries::new(
                g.iter().map(|x| (*x, in_between_mean(*x))),
                BLACK.mix(0.5).stroke_width(1),
            ))?
            .label("sin(4(x − 4.3))")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], BLACK.mix(0.5)));
        chart.draw_series(LineSeries::new(
            g.iter().zip(&r.vi.mean).map(|(x, m)| (*x, m.clamp(lo, hi))),
            vi_color.stroke_width(2),
        ))?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Runs both depths.
///
/// # Errors
/// Bad options (before any work), a fit's or sampler's error, a report that cannot be written.
pub fn run(options: &InBetweenOptions) -> Result<Vec<Row>, Box<dyn Error>> {
    options.check()?;
    let harness = InBetweenHarness { options };
    let done = runner::run(&harness, &options.run)?;
    Ok(done.into_iter().map(|d| d.row).collect())
}
