//! `bnn-bench lv-hmc`: Depeweg (2019) Fig. 6.4, reduced. NUTS on BNN+LV (weights and every
//! training row's latent) as the ground truth of the uncertainty decomposition, beside the
//! black-box α = 1 fit it starts from, on the heteroscedastic and bimodal toys and small
//! networks. The thesis: HMC's epistemic entropy is lower and more peaked than α = 1's, and on
//! the heteroscedastic toy both follow the data's density.

#[cfg(test)]
mod tests;

use crate::experiment;
use crate::runner::{self, Finished, Harness, ReportInput, TaskContext};
use crate::toy::lv::{self, Draws};
use crate::toy::{Toy, toys};
use bnn_burn::host::matrix;
use bnn_burn::inference::{LatentTarget, LogDensity, McmcConfig, Sampler, max_rhat, sample};
use bnn_burn::metrics::{mean, pearson};
use bnn_burn::nets::Decomposition;
use bnn_datasets::RegressionData;
use burn::module::Module;
use std::error::Error;

/// The toys, in figure order.
pub const TOYS: [&str; 2] = ["heteroscedastic", "bimodal"];
/// Grid points of the curves.
const GRID_POINTS: usize = 61;
/// Half-width of the window that counts training inputs around a grid point (the density).
const WINDOW: f64 = 0.25;

/// Options of one `lv-hmc` run.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct LvHmcOptions {
    /// Toys (heteroscedastic, bimodal); repeatable [default: both].
    #[arg(long = "toy")]
    pub toys: Vec<String>,
    /// Units of each of the two hidden layers; repeatable [default: 10, 20; 10 with --quick]
    /// (the thesis's HMC: 10–40).
    #[arg(long = "hidden")]
    pub hidden: Vec<usize>,
    /// Epochs of the α = 1 fit [default: 2000, as `toy`; 100 with --quick].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// NUTS chains.
    #[arg(long, default_value_t = 2)]
    pub chains: usize,
    /// Warm-up iterations per chain [default: 500; 30 with --quick].
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Kept draws per chain [default: 500; 30 with --quick].
    #[arg(long)]
    pub draws: Option<usize>,
    /// NUTS's tree depth at most.
    #[arg(long, default_value_t = 8)]
    pub max_depth: usize,
    /// Weight draws of each decomposition (the samples thinned evenly to this many)
    /// [default: 200; 20 with --quick].
    #[arg(long)]
    pub n_w: Option<usize>,
    /// Latent draws per weight draw [default: 200; 40 with --quick].
    #[arg(long)]
    pub n_z: Option<usize>,
    /// The k-NN entropy's neighbour [default: 25; 10 with --quick].
    #[arg(long)]
    pub k: Option<usize>,
    /// The seed, and `quick`: the small budget.
    #[serde(flatten)]
    #[command(flatten)]
    pub exp: runner::ExperimentArgs,
    /// The output folder, resuming, worker processes.
    #[serde(flatten)]
    #[command(flatten)]
    pub run: runner::RunnerOptions,
}

impl LvHmcOptions {
    fn toys(&self) -> Vec<String> {
        match self.toys.is_empty() {
            true => TOYS.iter().map(|s| s.to_string()).collect(),
            false => self.toys.clone(),
        }
    }
    fn hidden(&self) -> Vec<usize> {
        match (self.hidden.is_empty(), self.exp.quick) {
            (false, _) => self.hidden.clone(),
            (true, false) => vec![10, 20],
            (true, true) => vec![10],
        }
    }
    fn epochs(&self) -> usize {
        self.epochs.unwrap_or(self.exp.quick_or(100, 2000))
    }
    fn warmup(&self) -> usize {
        self.warmup.unwrap_or(self.exp.quick_or(30, 500))
    }
    fn draws(&self) -> usize {
        self.draws.unwrap_or(self.exp.quick_or(30, 500))
    }
    fn decomposition(&self) -> Draws {
        Draws {
            n_w: self.n_w.unwrap_or(self.exp.quick_or(20, 200)),
            n_z: self.n_z.unwrap_or(self.exp.quick_or(40, 200)),
            k: self.k.unwrap_or(self.exp.quick_or(10, 25)),
        }
    }

    /// Checks every choice before any work.
    fn check(&self) -> Result<(), String> {
        for t in &self.toys {
            if !TOYS.contains(&t.as_str()) {
                return Err(format!("--toy {t:?}: use one of {TOYS:?}"));
            }
        }
        if let Some(h) = self.hidden.iter().find(|h| **h == 0 || **h > 100) {
            return Err(format!("--hidden {h}: 1 to 100 units"));
        }
        let d = self.decomposition();
        for (flag, v) in [
            ("--epochs", self.epochs()),
            ("--chains", self.chains),
            ("--max-depth", self.max_depth),
            ("--k", d.k),
        ] {
            if v == 0 {
                return Err(format!("{flag} 0: at least 1"));
            }
        }
        if self.draws() < 4 {
            return Err(format!("--draws {}: at least 4 (split-R̂)", self.draws()));
        }
        if d.n_w < 2 || d.n_w > self.chains * self.draws() {
            return Err(format!(
                "--n-w {}: at least 2 and at most the kept draws ({})",
                d.n_w,
                self.chains * self.draws()
            ));
        }
        if d.k >= d.n_z {
            return Err(format!("--k {}: below --n-z ({})", d.k, d.n_z));
        }
        Ok(())
    }
}

/// One toy and network size.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// A name of [`TOYS`].
    pub toy: String,
    /// Units of each hidden layer.
    pub hidden: usize,
}

/// A decomposition's curves on the grid, original units.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Curves {
    /// `I(y*; W)` per grid point.
    pub epistemic_entropy: Vec<f64>,
    /// `E_W H[y* | W]` per grid point.
    pub aleatoric_entropy: Vec<f64>,
    /// `Var_W E[y* | W]` per grid point.
    pub epistemic_variance: Vec<f64>,
}

impl Curves {
    fn of(parts: &[Decomposition]) -> Self {
        Self {
            epistemic_entropy: parts.iter().map(|p| p.epistemic_entropy).collect(),
            aleatoric_entropy: parts.iter().map(|p| p.aleatoric_entropy).collect(),
            epistemic_variance: parts.iter().map(|p| p.epistemic_variance).collect(),
        }
    }
}

/// What one toy and size measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// The toy.
    pub toy: String,
    /// Units of each hidden layer.
    pub hidden: usize,
    /// Network weights.
    pub weights: usize,
    /// Latents (one per training row).
    pub latents: usize,
    /// The grid.
    pub x: Vec<f64>,
    /// Training inputs within ±0.25 of each grid point.
    pub density: Vec<f64>,
    /// The α = 1 fit's curves.
    pub alpha: Curves,
    /// NUTS's curves.
    pub hmc: Curves,
    /// The fit's noise std `√Σ` (NUTS keeps it), original units.
    pub noise_std: f64,
    /// Mean acceptance statistic, percent.
    pub acceptance: f64,
    /// Divergent iterations, all chains.
    pub divergences: usize,
    /// The largest split-R̂ over weights and latents.
    pub max_rhat: f64,
    /// The smallest bulk ESS over weights and latents.
    pub min_ess: f64,
    /// The largest split-R̂ of the network's function at the latent's prior mean,
    /// `f(x, z = 0; W)`, over the grid (rows of format 1 lack it).
    #[serde(default)]
    pub max_rhat_f: Option<f64>,
    /// Seconds of the fit.
    pub fit_seconds: f64,
    /// Seconds of NUTS.
    pub nuts_seconds: f64,
}

impl Row {
    /// `ln(1 + count)` of the training inputs near each grid point.
    fn log_density(&self) -> Vec<f64> {
        self.density.iter().map(|c| c.ln_1p()).collect()
    }
    /// Correlation of a curve with the log density (negative: it follows the data).
    pub fn density_correlation(&self, c: &Curves) -> f64 {
        pearson(&c.epistemic_entropy, &self.log_density())
    }
    /// The largest over the mean of a curve's epistemic entropy: how peaked it is.
    pub fn peakedness(c: &Curves) -> f64 {
        let m = mean(&c.epistemic_entropy);
        c.epistemic_entropy.iter().cloned().fold(0.0, f64::max) / m.max(1e-300)
    }
}

/// The harness.
pub struct LvHmcHarness<'a> {
    options: &'a LvHmcOptions,
    toys: Vec<Toy>,
}

impl LvHmcHarness<'_> {
    fn toy(&self, name: &str) -> &Toy {
        runner::of_task(&self.toys, "toy", |t| t.name == name)
    }
}

/// The grid of `t`'s plotted range.
fn grid(t: &Toy) -> Vec<f64> {
    (0..GRID_POINTS)
        .map(|i| t.x_range.0 + (t.x_range.1 - t.x_range.0) * i as f64 / (GRID_POINTS - 1) as f64)
        .collect()
}

impl Harness for LvHmcHarness<'_> {
    type Task = Task;
    type Row = Row;

    const NAME: &'static str = "lv-hmc";
    const FORMAT: u32 = 2;

    fn tasks(&self) -> Vec<Task> {
        runner::grid(&self.options.toys(), &self.options.hidden(), |t, h| Task {
            toy: t.clone(),
            hidden: *h,
        })
    }

    fn task_id(&self, t: &Task) -> String {
        format!("{} / {} units", t.toy, t.hidden)
    }

    fn run_key(&self) -> serde_json::Value {
        let o = self.options;
        let d = o.decomposition();
        serde_json::json!({
            "seed": o.exp.seed,
            "epochs": o.epochs(),
            "chains": o.chains,
            "warmup": o.warmup(),
            "draws": o.draws(),
            "max_depth": o.max_depth,
            "n_w": d.n_w,
            "n_z": d.n_z,
            "k": d.k,
        })
    }

    fn task_key(&self, _: &Task) -> serde_json::Value {
        serde_json::json!({})
    }

    fn run_task(&self, task: &Task, _: &TaskContext) -> Result<Row, Box<dyn Error>> {
        let o = self.options;
        let t = self.toy(&task.toy);
        let seed = experiment::derive(o.exp.seed, &["lv-hmc", t.name], task.hidden as u64);
        let train: RegressionData = t.train.clone().into();
        let fit = lv::fit(&train, task.hidden, o.epochs(), seed)?;
        let x = grid(t);
        let d = o.decomposition();
        let alpha = fit.decompose(&x, d)?;
        // NUTS on the fit's model (its noise held), in the standardised units it was fitted in.
        let device = bnn_burn::training_device();
        device.seed(seed ^ 0x4c56);
        let std = train.standardized(&fit.sx, &fit.sy)?;
        let target = LatentTarget::new(
            fit.model.clone().train(),
            matrix(&std.x, std.n_features, &device),
            matrix(&std.y, 1, &device),
        )?;
        let start = target.current();
        let config = McmcConfig::new()
            .with_sampler(Sampler::Nuts {
                max_depth: o.max_depth,
            })
            .with_warmup(o.warmup())
            .with_draws(o.draws())
            .with_chains(o.chains)
            .with_seed(seed);
        let run = sample(&target, &config, Some(&start))?;
        let p = target.layout().numel();
        let pooled = run.pooled();
        let weights: Vec<Vec<f64>> = (0..d.n_w)
            .map(|i| pooled[i * pooled.len() / d.n_w][..p].to_vec())
            .collect();
        let hmc = fit.decompose_samples(&x, &weights, d)?;
        let per_chain = run
            .chains
            .iter()
            .map(|c| {
                let w: Vec<Vec<f64>> = c.draws.iter().map(|t| t[..p].to_vec()).collect();
                fit.functions(&x, &w)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let max_rhat_f = max_rhat(&per_chain);
        let summary = run.summary();
        let density = x
            .iter()
            .map(|g| {
                t.train
                    .x
                    .iter()
                    .filter(|v| (*v - g).abs() <= WINDOW)
                    .count() as f64
            })
            .collect();
        Ok(Row {
            toy: task.toy.clone(),
            hidden: task.hidden,
            weights: p,
            latents: target.dim() - p,
            x,
            density,
            alpha: Curves::of(&alpha),
            hmc: Curves::of(&hmc),
            noise_std: fit.noise_std(),
            acceptance: 100.0 * run.mean_accept(),
            divergences: run.divergences(),
            max_rhat: summary.iter().map(|s| s.rhat).fold(0.0, f64::max),
            min_ess: summary
                .iter()
                .map(|s| s.ess_bulk)
                .fold(f64::INFINITY, f64::min),
            max_rhat_f: Some(max_rhat_f),
            fit_seconds: fit.seconds,
            nuts_seconds: run.seconds,
        })
    }

    fn describe(&self, f: &Finished<Task, Row>) -> String {
        let r = &f.row;
        format!(
            "[lv-hmc] {} / {} units: mean epistemic entropy α = 1 {:.3}, NUTS {:.3}; \
             acceptance {:.0} %, R̂ ≤ {:.2}, R̂_f ≤ {:.2}, {:.0} + {:.0} s",
            r.toy,
            r.hidden,
            mean(&r.alpha.epistemic_entropy),
            mean(&r.hmc.epistemic_entropy),
            r.acceptance,
            r.max_rhat,
            r.max_rhat_f.unwrap_or(f64::NAN),
            r.fit_seconds,
            r.nuts_seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let rows = run.rows();
        let md = markdown(&rows, self.options, run.wall_seconds);
        crate::plots::write_svg(run.out, "lv-hmc.svg", |p| plot(p, &rows))?;
        run.write_report(self.options, serde_json::json!({}), &md)
    }
}

/// Per toy and size: the epistemic entropy of each method, its peak over its mean, and how it
/// follows the data's density; then the thesis's claim checked.
pub fn table(rows: &[Row]) -> String {
    let mut md = String::from(
        "| toy | hidden | weights + latents | method | mean I(y*; W) | peak / mean | corr. with \
         ln density | mean E_W H[y*|W] |\n|---|---:|---:|---|---:|---:|---:|---:|\n",
    );
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by_key(|r| (TOYS.iter().position(|t| *t == r.toy), r.hidden));
    let mut lower = 0;
    for r in &sorted {
        for (method, c) in [("α = 1", &r.alpha), ("NUTS", &r.hmc)] {
            md.push_str(&format!(
                "| {} | {} | {} + {} | {method} | {:.3} | {:.2} | {:+.2} | {:.3} |\n",
                r.toy,
                r.hidden,
                r.weights,
                r.latents,
                mean(&c.epistemic_entropy),
                Row::peakedness(c),
                r.density_correlation(c),
                mean(&c.aleatoric_entropy)
            ));
        }
        lower += usize::from(mean(&r.hmc.epistemic_entropy) < mean(&r.alpha.epistemic_entropy));
    }
    md.push_str(&format!(
        "\nNUTS's epistemic entropy is below α = 1's on {lower} of {} toy × size cells (the \
         thesis: HMC lower and more peaked, α = 1 over-estimates).\n",
        sorted.len()
    ));
    md
}

/// The sampler's health.
fn sampler_table(rows: &[Row]) -> String {
    let mut md = String::from(
        "| toy | hidden | noise std | acceptance % | divergences | max R̂ | max R̂ f | min ESS | fit s \
         | NUTS s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        md.push_str(&format!(
            "| {} | {} | {:.3} | {:.1} | {} | {:.3} | {} | {:.0} | {:.0} | {:.0} |\n",
            r.toy,
            r.hidden,
            r.noise_std,
            r.acceptance,
            r.divergences,
            r.max_rhat,
            r.max_rhat_f.map_or("–".to_string(), |v| format!("{v:.3}")),
            r.min_ess,
            r.fit_seconds,
            r.nuts_seconds
        ));
    }
    md
}

/// The report.
fn markdown(rows: &[Row], o: &LvHmcOptions, wall: f64) -> String {
    let d = o.decomposition();
    let mut md = format!(
        "# NUTS as the ground truth of BNN+LV's decomposition (Depeweg 2019 Fig. 6.4, reduced)\n\n\
         BNN+LV with two hidden ReLU layers, fitted by black-box α = 1 ({} epochs, as `toy`), \
         then NUTS over its weights and every training row's latent (the noise held at the \
         fit's), {} chains of {} warm-up and {} kept iterations from the fit's means, tree depth \
         ≤ {}. Both decompositions use {} weight draws (NUTS's samples thinned evenly) × {} \
         prior latents, k-NN entropies with k = {}, on {GRID_POINTS} points of each toy's \
         range. `I(y*; W)` is the epistemic entropy; its correlation with the log count of \
         training inputs within ±{WINDOW} is negative where it follows the data. The thesis \
         ran 500 000 burn-in and 200 000 HMC steps on 10–40 units.\n\n",
        o.epochs(),
        o.chains,
        o.warmup(),
        o.draws(),
        o.max_depth,
        d.n_w,
        d.n_z,
        d.k
    );
    md.push_str(&table(rows));
    md.push_str("\n## The sampler\n\n");
    md.push_str(&sampler_table(rows));
    md.push_str(&format!(
        "\n![Epistemic entropy of each method](lv-hmc.svg)\n\nWall time {wall:.0} s.\n"
    ));
    md
}

/// One panel per toy: each size's epistemic entropy, α = 1 solid and NUTS dashed.
fn plot(path: &std::path::Path, rows: &[Row]) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;
    let names: Vec<&str> = TOYS
        .iter()
        .copied()
        .filter(|t| rows.iter().any(|r| r.toy == *t))
        .collect();
    let cols = names.len().max(1);
    let root = SVGBackend::new(path, (480 * cols as u32, 360)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut sizes: Vec<usize> = rows.iter().map(|r| r.hidden).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for (area, name) in root.split_evenly((1, cols)).iter().zip(&names) {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.toy == *name).collect();
        let top = mine
            .iter()
            .flat_map(|r| {
                r.alpha
                    .epistemic_entropy
                    .iter()
                    .chain(&r.hmc.epistemic_entropy)
            })
            .cloned()
            .fold(0.0, f64::max);
        let top = crate::plots::axis_top(top, 0.1, 0.1)?;
        let (lo, hi) = (mine[0].x[0], mine[0].x[mine[0].x.len() - 1]);
        let mut chart = ChartBuilder::on(area)
            .caption(*name, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(45)
            .build_cartesian_2d(lo..hi, 0.0..top)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("x")
            .y_desc("I(y*; W), nats")
            .draw()?;
        for r in &mine {
            let i = sizes.iter().position(|s| *s == r.hidden).unwrap_or(0);
            let color = Palette99::pick(i).to_rgba();
            let line = |c: &Curves| -> Vec<(f64, f64)> {
                r.x.iter()
                    .zip(&c.epistemic_entropy)
                    .map(|(x, v)| (*x, v.clamp(0.0, top)))
                    .collect()
            };
            chart
                .draw_series(LineSeries::new(line(&r.alpha), color.stroke_width(2)))?
                .label(format!("α = 1, {} units", r.hidden))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], color));
            chart
                .draw_series(DashedLineSeries::new(
                    line(&r.hmc),
                    6,
                    4,
                    color.stroke_width(2),
                ))?
                .label(format!("NUTS, {} units", r.hidden))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 12, y)], color.stroke_width(1))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Runs the grid.
///
/// # Errors
/// Bad options (before any work), a fit's or sampler's error, a report that cannot be written.
pub fn run(options: &LvHmcOptions) -> Result<Vec<Row>, Box<dyn Error>> {
    options.check()?;
    let harness = LvHmcHarness {
        options,
        toys: toys(options.exp.seed),
    };
    let done = runner::run(&harness, &options.run)?;
    Ok(done.into_iter().map(|d| d.row).collect())
}
