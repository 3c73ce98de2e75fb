//! `bnn-bench eight-schools`: Brack (2022) Table 5.1. Variational families (mean-field,
//! full-rank, planar, radial and IAF flows of K steps on a mean-field base) fitted by the ELBO
//! to the eight-schools model, each judged by its ELBO and PSIS `k̂` from fresh draws, beside
//! the printed table; the model centred and non-centred; NUTS as the ground truth of the
//! posterior's moments, and the exact log evidence as the ELBO's ceiling.

use crate::experiment;
use crate::published::brack;
use crate::runner::{self, Finished, Harness, ReportInput, TaskContext};
use bnn_burn::inference::{
    EightSchools, FlatFamily, FlowConfig, FlowKind, LogDensity, McmcConfig, ParamSummary, ViConfig,
    evaluate, fit, flat_at_zero,
};
use bnn_burn::posterior::{FullRankConfig, MeanFieldConfig, ScaleInit};
use std::error::Error;

#[cfg(test)]
mod tests;

/// The families, in table order.
pub const FAMILIES: [&str; 5] = ["mean-field", "full-rank", "planar", "radial", "IAF"];
/// The two parameterisations.
pub const MODELS: [&str; 2] = ["centred", "non-centred"];
/// NUTS warm-up iterations per chain.
const NUTS_WARMUP: usize = 1000;
/// NUTS's target acceptance statistic (the eight schools' posterior has a funnel).
const NUTS_TARGET_ACCEPT: f64 = 0.9;

/// The IAF's MADE width: two hidden layers of 110 give 15 640 parameters per step, near the
/// printed counts (about 15 700 per step).
pub const IAF_HIDDEN: usize = 110;

/// The default gradient-norm clip of IAF fits: about the 99th percentile of the norms of
/// 32-step fits that ran without one (their median is about 4, their spikes above 10⁴).
pub const IAF_CLIP: f64 = 20.0;

/// Options of one `eight-schools` run.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct EightSchoolsOptions {
    /// Parameterisations (centred, non-centred); repeatable [default: both].
    #[arg(long = "model")]
    pub models: Vec<String>,
    /// Families (mean-field, full-rank, planar, radial, IAF); repeatable [default: all].
    #[arg(long = "family")]
    pub families: Vec<String>,
    /// Flow lengths K; repeatable [default: 4, 8, 16, 32].
    #[arg(long = "steps")]
    pub steps: Vec<usize>,
    /// Replicates (seeds) of every family [default: 3; 1 with --quick].
    #[arg(long)]
    pub replicates: Option<usize>,
    /// Adam steps per fit [default: 10 000; 1000 with --quick].
    #[arg(long)]
    pub iterations: Option<usize>,
    /// Draws per step of the ELBO's gradient.
    #[arg(long, default_value_t = 32)]
    pub samples: usize,
    /// Adam's learning rate.
    #[arg(long, default_value_t = 5e-3)]
    pub lr: f64,
    /// Adam's learning rate for IAF (deep stacks of MADEs diverge at the others' rate: a
    /// 32-step stack reached NaN within 3 steps at 5·10⁻³).
    #[arg(long, default_value_t = 1e-3)]
    pub iaf_lr: f64,
    /// The gradient-norm clip of IAF fits (a 32-step stack diverged without one on one of
    /// three seeds); 0: none.
    #[arg(long, default_value_t = IAF_CLIP)]
    pub iaf_clip: f64,
    /// Fresh draws of each fitted q for its ELBO and k̂ [default: 100 000; 10 000 with --quick].
    #[arg(long)]
    pub eval_draws: Option<usize>,
    /// NUTS draws per chain (4 chains, 1000 warm-up) [default: 5000; 500 with --quick].
    #[arg(long)]
    pub nuts_draws: Option<usize>,
    /// Also write each NUTS run's draws (`nuts-MODEL.json`) and each fit's log ratios
    /// (`ratios-MODEL-FAMILY-K-REPLICATE.json`) into this folder, for the peer check
    /// (`xcheck/eight_schools_numpyro.py`).
    #[arg(long)]
    pub dump: Option<std::path::PathBuf>,
    /// The peer's Python (with numpyro and arviz): adds a peer task per model, numpyro's NUTS
    /// on the same model and arviz's ESS and k̂ of the bench's draws and log ratios, in one run
    /// (set-up: python3 -m venv ~/.venvs/peer && ~/.venvs/peer/bin/pip install numpyro arviz).
    #[arg(long)]
    pub peer_python: Option<std::path::PathBuf>,
    /// The peer program [default: xcheck/eight_schools_numpyro.py].
    #[arg(long)]
    pub peer_script: Option<std::path::PathBuf>,
    /// The seed, and `quick`: the small budget.
    #[serde(flatten)]
    #[command(flatten)]
    pub exp: runner::ExperimentArgs,
    /// The output folder, resuming, worker processes.
    #[serde(flatten)]
    #[command(flatten)]
    pub run: runner::RunnerOptions,
}

impl EightSchoolsOptions {
    fn replicates(&self) -> usize {
        self.replicates
            .unwrap_or(if self.exp.quick { 1 } else { 3 })
    }
    fn iterations(&self) -> usize {
        self.iterations
            .unwrap_or(if self.exp.quick { 1000 } else { 10_000 })
    }
    fn eval_draws(&self) -> usize {
        self.eval_draws
            .unwrap_or(if self.exp.quick { 10_000 } else { 100_000 })
    }
    fn nuts_draws(&self) -> usize {
        self.nuts_draws
            .unwrap_or(if self.exp.quick { 500 } else { 5000 })
    }
    fn peer_script(&self) -> std::path::PathBuf {
        self.peer_script.clone().unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../xcheck/eight_schools_numpyro.py")
        })
    }
    fn steps(&self) -> Vec<usize> {
        match self.steps.is_empty() {
            true => vec![4, 8, 16, 32],
            false => self.steps.clone(),
        }
    }

    /// Checks every choice before any work.
    fn check(&self) -> Result<(), String> {
        for m in &self.models {
            if !MODELS.contains(&m.as_str()) {
                return Err(format!("--model {m:?}: use one of {MODELS:?}"));
            }
        }
        for f in &self.families {
            if !FAMILIES.contains(&f.as_str()) {
                return Err(format!("--family {f:?}: use one of {FAMILIES:?}"));
            }
        }
        if let Some(k) = self.steps.iter().find(|k| **k == 0) {
            return Err(format!("--steps {k}: a flow has at least one step"));
        }
        for (flag, v) in [
            ("--replicates", self.replicates()),
            ("--iterations", self.iterations()),
            ("--samples", self.samples),
        ] {
            if v == 0 {
                return Err(format!("{flag} 0: at least 1"));
            }
        }
        if self.eval_draws() < 100 {
            return Err(format!(
                "--eval-draws {}: at least 100 (PSIS fits the largest ratios)",
                self.eval_draws()
            ));
        }
        if self.nuts_draws() < 4 {
            return Err(format!("--nuts-draws {}: at least 4", self.nuts_draws()));
        }
        for (flag, lr) in [("--lr", self.lr), ("--iaf-lr", self.iaf_lr)] {
            if !(lr.is_finite() && lr > 0.0) {
                return Err(format!("{flag} {lr}: a number > 0"));
            }
        }
        if !(self.iaf_clip.is_finite() && self.iaf_clip >= 0.0) {
            return Err(format!("--iaf-clip {}: a number ≥ 0", self.iaf_clip));
        }
        if let Some(python) = &self.peer_python
            && !python.is_file()
        {
            return Err(format!(
                "--peer-python: {} does not exist (set-up: python3 -m venv ~/.venvs/peer && \
                 ~/.venvs/peer/bin/pip install numpyro arviz)",
                python.display()
            ));
        }
        if self.peer_python.is_some() && !self.peer_script().is_file() {
            return Err(format!(
                "--peer-script: {} does not exist",
                self.peer_script().display()
            ));
        }
        Ok(())
    }
}

/// One unit of work.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Task {
    /// One variational fit.
    Vi {
        /// The parameterisation.
        model: String,
        /// The family.
        family: String,
        /// The flow length (0 for mean-field and full-rank).
        steps: usize,
        /// The replicate.
        replicate: usize,
    },
    /// The NUTS reference of one parameterisation.
    Nuts {
        /// The parameterisation.
        model: String,
    },
    /// NUTS and a mean-field fit here, numpyro and arviz on the same model in the peer.
    Peer {
        /// The parameterisation.
        model: String,
    },
}

/// What a variational fit measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ViRow {
    /// The parameterisation.
    pub model: String,
    /// The family.
    pub family: String,
    /// The flow length (0 for mean-field and full-rank).
    pub steps: usize,
    /// The replicate.
    pub replicate: usize,
    /// The family's parameter count.
    pub params: usize,
    /// The ELBO from the fresh draws, and its Monte Carlo standard error.
    pub elbo: f64,
    /// Its standard error.
    pub elbo_se: f64,
    /// PSIS `k̂` of the fresh draws' log ratios.
    pub k_hat: f64,
    /// The importance-sampled log evidence from the same draws.
    pub log_evidence_is: f64,
    /// The mean ELBO estimate of the last 500 steps.
    pub final_train_elbo: f64,
    /// Training draws left out of their step for a ratio that was not finite.
    #[serde(default)]
    pub dropped_draws: usize,
    /// Training steps whose gradient had entries that were not finite (zeroed).
    #[serde(default)]
    pub zeroed_gradient_steps: usize,
    /// Seconds of fitting and evaluation.
    pub seconds: f64,
}

/// What the NUTS reference measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct NutsRow {
    /// The parameterisation.
    pub model: String,
    /// Per parameter (μ, ln τ, then the schools' θ̃ or θ).
    pub params: Vec<ParamSummary>,
    /// The schools' effects `θ_j = μ + τ θ̃_j` (non-centred) or `θ_j`, and `τ`.
    pub derived: Vec<(String, ParamSummary)>,
    /// Mean acceptance statistic.
    pub accept: f64,
    /// Divergent transitions.
    pub divergences: usize,
    /// Gradient evaluations of the kept draws.
    pub leapfrogs: usize,
    /// Wall seconds (4 chains in parallel).
    pub seconds: f64,
}

/// Per-entry summaries of one sampler's draws by arviz.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ArvizSummary {
    /// Posterior means.
    pub mean: Vec<f64>,
    /// Monte Carlo standard errors of the means.
    pub mcse: Vec<f64>,
    /// Bulk effective sample sizes.
    pub ess_bulk: Vec<f64>,
}

/// This bench's NUTS and PSIS beside numpyro's NUTS and arviz's PSIS, in one run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PeerRow {
    /// The parameterisation.
    pub model: String,
    /// Our NUTS draws, summarised by arviz.
    pub ours: ArvizSummary,
    /// numpyro's NUTS draws, summarised by arviz.
    pub theirs: ArvizSummary,
    /// Our NUTS wall time (4 chains in threads).
    pub ours_seconds: f64,
    /// numpyro's wall time (4 parallel chains; the second run, compiled).
    pub numpyro_seconds: f64,
    /// numpyro's first run, compilation included.
    pub numpyro_first_seconds: f64,
    /// Our divergent transitions.
    pub ours_divergences: usize,
    /// numpyro's divergent transitions.
    pub numpyro_divergences: usize,
    /// Our PSIS k̂ of a mean-field fit's log ratios.
    pub k_hat: f64,
    /// arviz's k̂ of the same log ratios.
    pub arviz_k_hat: f64,
    /// The peer's package versions.
    pub versions: String,
}

impl PeerRow {
    /// `|mean ours − mean numpyro| / √(MCSE² + MCSE²)` per entry.
    pub fn z(&self) -> Vec<f64> {
        (0..self.ours.mean.len())
            .map(|i| {
                (self.ours.mean[i] - self.theirs.mean[i]).abs()
                    / self.ours.mcse[i].hypot(self.theirs.mcse[i])
            })
            .collect()
    }

    /// Our slowest-mixing entry's ESS per second over numpyro's.
    pub fn ess_per_second_ratio(&self) -> f64 {
        let min = |v: &[f64]| v.iter().cloned().fold(f64::INFINITY, f64::min);
        (min(&self.ours.ess_bulk) / self.ours_seconds)
            / (min(&self.theirs.ess_bulk) / self.numpyro_seconds)
    }
}

/// A task's row.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum Row {
    /// A variational fit.
    Vi(ViRow),
    /// The NUTS reference.
    Nuts(NutsRow),
    /// The peer comparison.
    Peer(PeerRow),
}

fn model_of(name: &str) -> EightSchools {
    match name {
        "centred" => EightSchools::centred(),
        _ => EightSchools::default(),
    }
}

/// The harness.
pub struct EightSchoolsHarness<'a> {
    options: &'a EightSchoolsOptions,
}

impl EightSchoolsHarness<'_> {
    fn models(&self) -> Vec<String> {
        match self.options.models.is_empty() {
            true => MODELS.iter().map(|m| m.to_string()).collect(),
            false => self.options.models.clone(),
        }
    }

    fn families(&self) -> Vec<String> {
        match self.options.families.is_empty() {
            true => FAMILIES.iter().map(|m| m.to_string()).collect(),
            false => self.options.families.clone(),
        }
    }

    /// Writes `value` as `name` into the `--dump` folder, when there is one.
    fn dump(&self, name: &str, value: &impl serde::Serialize) -> Result<(), Box<dyn Error>> {
        if let Some(dir) = &self.options.dump {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("--dump {}: cannot create: {e}", dir.display()))?;
            let path = dir.join(name);
            std::fs::write(&path, serde_json::to_vec(value)?)
                .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
        }
        Ok(())
    }

    /// The task's scratch folder (its training-state folder, removed when its row is written).
    fn scratch(&self, context: &TaskContext) -> Result<std::path::PathBuf, String> {
        std::fs::create_dir_all(&context.state)
            .map_err(|e| format!("{}: cannot create: {e}", context.state.display()))?;
        Ok(context.state.clone())
    }

    /// Fits one family: its row, and the log ratios of its evaluation draws.
    fn fit_family(&self, task: &Task) -> Result<(ViRow, Vec<f64>), Box<dyn Error>> {
        let Task::Vi {
            model,
            family,
            steps,
            replicate,
        } = task
        else {
            unreachable!("a variational task")
        };
        let o = self.options;
        let target = model_of(model);
        let seed = experiment::derive(
            o.exp.seed,
            &[model, family, &steps.to_string()],
            *replicate as u64,
        );
        let device = bnn_burn::training_device();
        device.seed(seed);
        let config = ViConfig::new()
            .with_iterations(o.iterations())
            .with_samples(o.samples)
            .with_learning_rate(match family.as_str() {
                "IAF" => o.iaf_lr,
                _ => o.lr,
            })
            .with_max_grad_norm(match family.as_str() {
                "IAF" if o.iaf_clip > 0.0 => Some(o.iaf_clip),
                _ => None,
            })
            .with_seed(seed);
        let start = std::time::Instant::now();
        let scale = ScaleInit::new().with_rho(0.0).with_rho_std(0.0);
        let d = target.dim();
        let draws = o.eval_draws();
        let (params, m) = match family.as_str() {
            "mean-field" => {
                let q = flat_at_zero(&MeanFieldConfig::new().with_scale(scale), d, &device)?;
                measure(&target, q, &config, draws)?
            }
            "full-rank" => {
                let q = flat_at_zero(&FullRankConfig::new().with_scale(scale), d, &device)?;
                measure(&target, q, &config, draws)?
            }
            kind => {
                let kind = match kind {
                    "planar" => FlowKind::Planar,
                    "radial" => FlowKind::Radial,
                    _ => FlowKind::Iaf { hidden: IAF_HIDDEN },
                };
                let q = FlowConfig::new(kind, *steps).init(d, &device)?;
                measure(&target, q, &config, draws)?
            }
        };
        let row = ViRow {
            model: model.clone(),
            family: family.clone(),
            steps: *steps,
            replicate: *replicate,
            params,
            elbo: m.elbo,
            elbo_se: m.elbo_se,
            k_hat: m.k_hat,
            log_evidence_is: m.log_evidence,
            final_train_elbo: m.final_train_elbo,
            dropped_draws: m.dropped_draws,
            zeroed_gradient_steps: m.zeroed_gradient_steps,
            seconds: start.elapsed().as_secs_f64(),
        };
        Ok((row, m.log_ratios))
    }

    /// The NUTS settings of `model`'s reference (and of its peer task).
    fn nuts_config(&self, model: &str) -> McmcConfig {
        McmcConfig::new()
            .with_warmup(NUTS_WARMUP)
            .with_draws(self.options.nuts_draws())
            .with_target_accept(NUTS_TARGET_ACCEPT)
            .with_seed(experiment::derive(
                self.options.exp.seed,
                &[model, "NUTS"],
                0,
            ))
    }

    /// Our NUTS and a mean-field fit's log ratios beside numpyro and arviz.
    fn peer(&self, model: &str, context: &TaskContext) -> Result<PeerRow, Box<dyn Error>> {
        let python = self
            .options
            .peer_python
            .as_ref()
            .expect("a peer task has --peer-python");
        let target = model_of(model);
        let config = self.nuts_config(model);
        let run = bnn_burn::inference::sample(&target, &config, None)?;
        let (fitted, ratios) = self.fit_family(&Task::Vi {
            model: model.to_string(),
            family: "mean-field".into(),
            steps: 0,
            replicate: 0,
        })?;
        let input = serde_json::json!({
            "model": model,
            "warmup": config.warmup,
            "draws": config.draws,
            "chains": config.chains,
            "target_accept": config.target_accept,
            "seed": config.seed % (1 << 31),
            "ours": run.chains.iter().map(|c| c.draws.clone()).collect::<Vec<_>>(),
            "log_ratios": ratios,
        });
        let path = self.scratch(context)?.join("peer-input.json");
        std::fs::write(&path, serde_json::to_vec(&input)?)?;
        let script = self.options.peer_script();
        let text =
            crate::perf::run_peer_program(python, &script, &[path.to_string_lossy().to_string()])?;
        let line = text
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .ok_or_else(|| format!("{}: no JSON line in its output: {text}", script.display()))?;
        let peer: serde_json::Value = serde_json::from_str(line)?;
        let summary = |key: &str| -> Result<ArvizSummary, Box<dyn Error>> {
            Ok(serde_json::from_value(peer[key].clone())?)
        };
        let number = |key: &str| {
            peer[key]
                .as_f64()
                .ok_or_else(|| format!("the peer's output has no number {key:?}: {line}"))
        };
        Ok(PeerRow {
            model: model.to_string(),
            ours: summary("ours")?,
            theirs: summary("theirs")?,
            ours_seconds: run.seconds,
            numpyro_seconds: number("numpyro_seconds")?,
            numpyro_first_seconds: number("numpyro_first_seconds")?,
            ours_divergences: run.divergences(),
            numpyro_divergences: number("numpyro_divergences")? as usize,
            k_hat: fitted.k_hat,
            arviz_k_hat: number("arviz_k_hat")?,
            versions: format!(
                "numpyro {}, arviz {}, jax {}",
                peer["numpyro"].as_str().unwrap_or("?"),
                peer["arviz"].as_str().unwrap_or("?"),
                peer["jax"].as_str().unwrap_or("?")
            ),
        })
    }

    fn nuts(&self, model: &str) -> Result<NutsRow, Box<dyn Error>> {
        let target = model_of(model);
        let config = self.nuts_config(model);
        let run = bnn_burn::inference::sample(&target, &config, None)?;
        let draws: Vec<Vec<Vec<f64>>> = run.chains.iter().map(|c| c.draws.clone()).collect();
        self.dump(
            &format!("nuts-{model}.json"),
            &serde_json::json!({ "draws": draws, "seconds": run.seconds }),
        )?;
        let params = run.summary();
        let derived_chains = |f: &dyn Fn(&[f64]) -> f64| -> Vec<Vec<f64>> {
            run.chains
                .iter()
                .map(|c| c.draws.iter().map(|d| f(d)).collect())
                .collect()
        };
        let mut derived = vec![(
            "tau".to_string(),
            bnn_burn::inference::summarise(&derived_chains(&|d| d[1].exp())),
        )];
        for j in 0..8 {
            let centred = target.centred;
            let chains = derived_chains(&|d| match centred {
                true => d[2 + j],
                false => d[0] + d[1].exp() * d[2 + j],
            });
            derived.push((
                format!("theta_{}", j + 1),
                bnn_burn::inference::summarise(&chains),
            ));
        }
        Ok(NutsRow {
            model: model.to_string(),
            params,
            derived,
            accept: run.mean_accept(),
            divergences: run.divergences(),
            leapfrogs: run.leapfrogs(),
            seconds: run.seconds,
        })
    }
}

/// What [`measure`] returns besides the parameter count.
struct Measured {
    log_ratios: Vec<f64>,
    elbo: f64,
    elbo_se: f64,
    k_hat: f64,
    log_evidence: f64,
    final_train_elbo: f64,
    dropped_draws: usize,
    zeroed_gradient_steps: usize,
}

/// Fits `q`, then evaluates it by `draws` fresh draws.
fn measure<Q: FlatFamily>(
    target: &EightSchools,
    q: Q,
    config: &ViConfig,
    draws: usize,
) -> Result<(usize, Measured), Box<dyn Error>> {
    let params = q.num_params();
    let fitted = fit(target, q, config)?;
    let tail = &fitted.elbo_trace[fitted.elbo_trace.len().saturating_sub(500)..];
    let report = evaluate(target, &fitted.family, draws)?;
    Ok((
        params,
        Measured {
            log_ratios: report.log_ratios.clone(),
            elbo: report.elbo,
            elbo_se: report.elbo_se,
            k_hat: report.psis.k_hat,
            log_evidence: report.log_evidence,
            final_train_elbo: tail.iter().sum::<f64>() / tail.len() as f64,
            dropped_draws: fitted.dropped_draws,
            zeroed_gradient_steps: fitted.zeroed_gradient_steps,
        },
    ))
}

impl Harness for EightSchoolsHarness<'_> {
    type Task = Task;
    type Row = Row;

    const NAME: &'static str = "eight-schools";
    const FORMAT: u32 = 1;

    fn tasks(&self) -> Vec<Task> {
        let mut tasks = Vec::new();
        for model in self.models() {
            for family in self.families() {
                let steps = match family.as_str() {
                    "mean-field" | "full-rank" => vec![0],
                    _ => self.options.steps(),
                };
                for k in steps {
                    for replicate in 0..self.options.replicates() {
                        tasks.push(Task::Vi {
                            model: model.clone(),
                            family: family.clone(),
                            steps: k,
                            replicate,
                        });
                    }
                }
            }
            tasks.push(Task::Nuts {
                model: model.clone(),
            });
            if self.options.peer_python.is_some() {
                tasks.push(Task::Peer { model });
            }
        }
        tasks
    }

    fn task_id(&self, task: &Task) -> String {
        match task {
            Task::Vi {
                model,
                family,
                steps,
                replicate,
            } => format!("{model} / {family} K={steps} / {replicate}"),
            Task::Nuts { model } => format!("{model} / NUTS"),
            Task::Peer { model } => format!("{model} / numpyro and arviz"),
        }
    }

    fn run_key(&self) -> serde_json::Value {
        let o = self.options;
        serde_json::json!({
            "seed": o.exp.seed,
            "iterations": o.iterations(),
            "samples": o.samples,
            "lr": o.lr,
            "eval_draws": o.eval_draws(),
            "nuts_draws": o.nuts_draws(),
            "iaf_hidden": IAF_HIDDEN,
        })
    }

    fn task_key(&self, task: &Task) -> serde_json::Value {
        match task {
            Task::Vi { family, .. } if family == "IAF" => serde_json::json!({
                "iaf_lr": self.options.iaf_lr,
                "iaf_clip": self.options.iaf_clip,
            }),
            _ => serde_json::json!({}),
        }
    }

    fn run_task(&self, task: &Task, context: &TaskContext) -> Result<Row, Box<dyn Error>> {
        match task {
            Task::Vi {
                model,
                family,
                steps,
                replicate,
            } => {
                let (row, ratios) = self.fit_family(task)?;
                self.dump(
                    &format!("ratios-{model}-{family}-{steps}-{replicate}.json"),
                    &ratios,
                )?;
                Ok(Row::Vi(row))
            }
            Task::Nuts { model } => Ok(Row::Nuts(self.nuts(model)?)),
            Task::Peer { model } => Ok(Row::Peer(self.peer(model, context)?)),
        }
    }

    fn describe(&self, finished: &Finished<Task, Row>) -> String {
        match &finished.row {
            Row::Vi(r) => format!(
                "[eight-schools] {} / {} K={} / {}: ELBO {:.2} ± {:.2}, k̂ {:.2}, {:.0} s",
                r.model, r.family, r.steps, r.replicate, r.elbo, r.elbo_se, r.k_hat, r.seconds
            ),
            Row::Peer(r) => format!(
                "[eight-schools] {} / peer: ESS/s ratio {:.2}, max z {:.2}, k̂ {:.3} vs arviz {:.3}",
                r.model,
                r.ess_per_second_ratio(),
                r.z().iter().cloned().fold(0.0, f64::max),
                r.k_hat,
                r.arviz_k_hat
            ),
            Row::Nuts(r) => format!(
                "[eight-schools] {} / NUTS: τ {:.2} ± {:.2} (ESS {:.0}), {} divergences, {:.1} s",
                r.model,
                r.derived[0].1.mean,
                r.derived[0].1.mcse,
                r.derived[0].1.ess_bulk,
                r.divergences,
                r.seconds
            ),
        }
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let md = markdown(&run.rows(), self.options, run.wall_seconds)?;
        let extra = serde_json::json!({
            "log_evidence": EightSchools::default().log_evidence(),
            "iaf_hidden": IAF_HIDDEN,
        });
        run.write_report(self.options, extra, &md)
    }
}

/// Mean and sample standard deviation (0 for one value).
fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let sd = match xs.len() {
        1 => 0.0,
        _ => (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt(),
    };
    (mean, sd)
}

/// One table line per (family, K) of `model`: our mean ± sd over replicates beside the printed
/// row, and whether each ELBO is within 0.5 nats of it (or better) and each k̂ in its band.
pub fn table(rows: &[Row], model: &str) -> Result<String, String> {
    use bnn_burn::inference::KHatBand;
    let mut md = String::from(
        "| family | K | params (printed) | ELBO | printed | k̂ | printed | ELBO ≥ printed − 0.5 | \
         k̂ band as printed |\n|---|---:|---:|---:|---:|---:|---:|:---:|:---:|\n",
    );
    let mut keys: Vec<(String, usize)> = Vec::new();
    for r in rows {
        if let Row::Vi(v) = r
            && v.model == model
            && !keys.contains(&(v.family.clone(), v.steps))
        {
            keys.push((v.family.clone(), v.steps));
        }
    }
    keys.sort_by_key(|(f, k)| (FAMILIES.iter().position(|x| x == f), *k));
    for (family, steps) in keys {
        let reps: Vec<&ViRow> = rows
            .iter()
            .filter_map(|r| match r {
                Row::Vi(v) if v.model == model && v.family == family && v.steps == steps => Some(v),
                _ => None,
            })
            .collect();
        for v in &reps {
            let what = format!("{model} / {family} K={steps} / {}", v.replicate);
            experiment::check_finite(&what, "ELBO", v.elbo)?;
        }
        let (elbo, elbo_sd) = mean_sd(&reps.iter().map(|v| v.elbo).collect::<Vec<_>>());
        let (k, k_sd) = mean_sd(&reps.iter().map(|v| v.k_hat).collect::<Vec<_>>());
        let printed = brack::row(&family, steps);
        let pm = |sd: Option<f64>| sd.map_or(String::new(), |s| format!(" ± {s}"));
        let (p_elbo, p_k, p_params, elbo_ok, band_ok) = match printed {
            Some(p) => (
                format!("{:.2}{}", p.elbo.0, pm(p.elbo.1)),
                format!("{:.2}{}", p.k_hat.0, pm(p.k_hat.1)),
                p.params.to_string(),
                if elbo >= p.elbo.0 - 0.5 { "yes" } else { "no" },
                if KHatBand::of(k) == KHatBand::of(p.k_hat.0) {
                    "yes"
                } else {
                    "no"
                },
            ),
            None => ("–".into(), "–".into(), "–".into(), "–", "–"),
        };
        md.push_str(&format!(
            "| {family} | {} | {} ({p_params}) | {elbo:.2} ± {elbo_sd:.2} (n = {}) | {p_elbo} | \
             {k:.2} ± {k_sd:.2} | {p_k} | {elbo_ok} | {band_ok} |\n",
            if steps == 0 {
                "–".to_string()
            } else {
                steps.to_string()
            },
            reps[0].params,
            reps.len(),
        ));
    }
    Ok(md)
}

/// The NUTS reference table of `model`'s row.
pub fn nuts_table(row: &NutsRow) -> String {
    let mut md = format!(
        "NUTS, 4 chains: acceptance {:.2}, {} divergences, {} gradient evaluations in {:.1} s.\n\n\
         | quantity | mean | sd | MCSE | bulk ESS | R̂ |\n|---|---:|---:|---:|---:|---:|\n",
        row.accept, row.divergences, row.leapfrogs, row.seconds
    );
    let names = EightSchools::NAMES;
    let lines = names
        .iter()
        .take(2)
        .map(|n| n.to_string())
        .zip(row.params.iter().take(2).copied())
        .chain(row.derived.iter().cloned());
    for (name, s) in lines {
        md.push_str(&format!(
            "| {name} | {:.2} | {:.2} | {:.3} | {:.0} | {:.3} |\n",
            s.mean, s.sd, s.mcse, s.ess_bulk, s.rhat
        ));
    }
    md
}

/// The peer comparison of one model.
pub fn peer_table(p: &PeerRow) -> String {
    let z = p.z();
    let within = z.iter().filter(|z| **z < 2.0).count();
    let mut md = format!(
        "Peer ({}), one run on this machine: NUTS here {:.2} s, numpyro {:.2} s ({:.1} s with \
         compilation); divergences {} here, {} there. Posterior means within 2 MCSE of \
         numpyro's: {within} of {}; slowest-mixing entry's bulk ESS per second, here over \
         numpyro: {:.2}×. PSIS k̂ of a mean-field fit's log ratios: {:.4} here, {:.4} by arviz \
         (difference {:.4}).\n\n| entry | mean here | MCSE | ESS | mean numpyro | MCSE | ESS | \
         z |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
        p.versions,
        p.ours_seconds,
        p.numpyro_seconds,
        p.numpyro_first_seconds,
        p.ours_divergences,
        p.numpyro_divergences,
        z.len(),
        p.ess_per_second_ratio(),
        p.k_hat,
        p.arviz_k_hat,
        (p.k_hat - p.arviz_k_hat).abs()
    );
    for (i, name) in EightSchools::NAMES.iter().enumerate() {
        md.push_str(&format!(
            "| {name} | {:.3} | {:.3} | {:.0} | {:.3} | {:.3} | {:.0} | {:.2} |\n",
            p.ours.mean[i],
            p.ours.mcse[i],
            p.ours.ess_bulk[i],
            p.theirs.mean[i],
            p.theirs.mcse[i],
            p.theirs.ess_bulk[i],
            z[i]
        ));
    }
    md
}

fn markdown(rows: &[Row], o: &EightSchoolsOptions, wall: f64) -> Result<String, String> {
    let evidence = EightSchools::default().log_evidence();
    let mut md = format!(
        "# Eight schools: variational families (Brack 2022 Table 5.1)\n\n\
         Adam, {} steps at lr {} ({} for IAF, its gradient norm clipped at {}), {} draws per \
         step; ELBO and PSIS k̂ from {} fresh draws of \
         each fitted q; mean ± sd over replicates (the printed ± are sds over 3 replicates). \
         Flows on a mean-field base; IAF steps are MADEs with two hidden layers of {IAF_HIDDEN}. \
         The exact log evidence is ln p(y) = {evidence:.2}: no ELBO exceeds it. Seed {}{}, \
         backend `{}`, wall time {wall:.0} s.\n",
        o.iterations(),
        o.lr,
        o.iaf_lr,
        o.iaf_clip,
        o.samples,
        o.eval_draws(),
        o.exp.seed,
        if o.exp.quick { " (--quick)" } else { "" },
        bnn_burn::backend_name()
    );
    for model in MODELS {
        let has = |r: &Row| match r {
            Row::Vi(v) => v.model == model,
            Row::Nuts(n) => n.model == model,
            Row::Peer(p) => p.model == model,
        };
        if !rows.iter().any(has) {
            continue;
        }
        md.push_str(&format!("\n## {model}\n\n"));
        md.push_str(&table(rows, model)?);
        let dropped: Vec<String> = rows
            .iter()
            .filter_map(|r| match r {
                Row::Vi(v) if v.model == model && v.dropped_draws + v.zeroed_gradient_steps > 0 => {
                    Some(format!(
                        "{} K={} replicate {}: {} draws, {} steps",
                        v.family, v.steps, v.replicate, v.dropped_draws, v.zeroed_gradient_steps
                    ))
                }
                _ => None,
            })
            .collect();
        if !dropped.is_empty() {
            md.push_str(&format!(
                "\nTraining draws left out of their step for a log ratio beyond f32's range \
                 (of {} per fit), and steps whose gradient had entries that were not finite \
                 (zeroed): {}.\n",
                o.iterations() * o.samples,
                dropped.join("; ")
            ));
        }
        if let Some(Row::Nuts(n)) = rows
            .iter()
            .find(|r| matches!(r, Row::Nuts(n) if n.model == model))
        {
            md.push('\n');
            md.push_str(&nuts_table(n));
        }
        if let Some(Row::Peer(p)) = rows
            .iter()
            .find(|r| matches!(r, Row::Peer(p) if p.model == model))
        {
            md.push('\n');
            md.push_str(&peer_table(p));
        }
    }
    Ok(md)
}

/// Runs the table.
///
/// # Errors
/// Bad options (before any work), a fit's error, a report that cannot be written.
pub fn run(options: &EightSchoolsOptions) -> Result<Vec<Row>, Box<dyn Error>> {
    options.check()?;
    let harness = EightSchoolsHarness { options };
    let done = runner::run(&harness, &options.run)?;
    Ok(done.into_iter().map(|d| d.row).collect())
}
