//! `bnn-bench perf`: milliseconds per training step and peak heap of the MLP 784-400-400-10
//! (batch 128) and LeNet5 (batch 100), for burn's deterministic layers and every posterior family
//! (fused kernels, and optionally the reference composition), with the PyTorch peers run in the
//! same interleaved rounds, so that ratios compare like with like. The method and the records:
//! the book's *Performance* page.

use crate::alloc;
use crate::catalogue::{Method, Protocol, Settings};
use bnn_burn::fused::Kernels;
use bnn_burn::layers::Estimator;
use bnn_burn::train::OptimizerConfig;
use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::Tensor;
use models::{Bayesian, Deterministic, MomentNet, Net, inputs};
use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

mod args;
pub mod data;
pub mod epoch;
pub mod laplace;
pub mod models;
pub mod pool;
pub mod predict;
mod report;
#[cfg(test)]
mod tests;

pub use args::PerfArgs;
use report::write_report;

const WARMUP: usize = 5;

/// Settings of one `perf` run.
#[derive(serde::Serialize)]
pub struct PerfOptions {
    /// Timed steps per round.
    pub steps: usize,
    /// Rounds; the median round is reported.
    pub rounds: usize,
    /// Seed of the device RNG (inputs, initialisation, noise).
    pub seed: u64,
    /// Output folder.
    pub out: PathBuf,
    /// Python interpreter with torch and bayesian-torch (skipped when absent).
    pub peer_python: Option<PathBuf>,
    /// Folder holding the MLP peer programs (the BEDL-PAC peer is the workspace's
    /// `xcheck/bedl_pac_torch.py`).
    pub peer_dir: PathBuf,
    /// Thread count passed to the peers (and reported; burn's CPU backends use all cores).
    pub threads: usize,
    /// Posterior families to run (names as in the table, case-insensitive); empty runs all.
    /// The deterministic baselines always run.
    pub methods: Vec<String>,
    /// The architectures.
    pub nets: Vec<Net>,
    /// The kernel paths of the Bayesian rows (fused: the training loop's default).
    pub kernels: Vec<Kernels>,
}

/// One measured workload.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PerfRow {
    /// The architecture (the peers' too).
    pub net: Net,
    /// What was run.
    pub method: String,
    /// Milliseconds per step of the median round.
    pub ms_per_step: f64,
    /// Every round's ms/step.
    pub rounds_ms: Vec<f64>,
    /// Peak heap bytes above the bytes live before the model was built (burn runs only).
    pub peak_heap_bytes: Option<usize>,
    /// Median over rounds of this row's time over the deterministic baseline's (burn Adam) in
    /// the same round.
    pub vs_deterministic: Option<f64>,
    /// The same against the deterministic baseline with the fused Adam.
    pub vs_deterministic_fused_adam: Option<f64>,
    /// The same against bayesian-torch (when the peers ran).
    pub vs_bayesian_torch: Option<f64>,
    /// The same against PyTorch's deterministic step (`xcheck/perf_peers.py torch`, when the
    /// peers ran).
    pub vs_torch: Option<f64>,
    /// The same against the PyTorch implementation of BEDL-PAC (`xcheck/bedl_pac_torch.py`;
    /// the [`BEDL_PAC`] rows, when the peers ran).
    pub vs_torch_bedl_pac: Option<f64>,
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        0.5 * (s[n / 2 - 1] + s[n / 2])
    }
}

/// One workload being timed: a model, its optimiser and its loss behind one `step` call, with the
/// peak heap of its warm-up.
struct Workload<'a> {
    net: Net,
    method: String,
    step: Box<dyn FnMut() + 'a>,
    sync: Box<dyn Fn() + 'a>,
    peak_heap_bytes: usize,
    rounds_ms: Vec<f64>,
}

/// Builds `model` (through `build`, after the heap counter is reset), runs `WARMUP` steps and
/// records the peak heap above the bytes live before `build` ran.
fn workload<'a, M: Module + 'a, E: Error + 'static>(
    (net, method): (Net, String),
    build: impl FnOnce() -> Result<M, E>,
    mut optim: ModuleOptimizer,
    loss: impl Fn(&M) -> Tensor<1> + 'a,
) -> Result<Workload<'a>, Box<dyn Error>> {
    alloc::reset_peak();
    let base = alloc::live_bytes();
    let mut model = Some(build()?);
    let device = model.as_ref().expect("built").devices()[0].clone();
    let mut step: Box<dyn FnMut() + 'a> = Box::new(move || {
        let m = model.take().expect("a model between steps");
        let l = loss(&m);
        let grads = GradientsParams::from_grads(l.backward(), &m);
        model = Some(optim.step(1e-3, m, grads));
    });
    for _ in 0..WARMUP {
        step();
    }
    let _ = device.sync();
    Ok(Workload {
        net,
        method,
        step,
        sync: Box::new(move || {
            let _ = device.sync();
        }),
        peak_heap_bytes: alloc::peak_bytes().saturating_sub(base),
        rounds_ms: Vec::new(),
    })
}

/// Times one round (`steps` steps) of `w`.
fn time_round(w: &mut Workload, steps: usize) {
    let start = Instant::now();
    for _ in 0..steps {
        (w.step)();
    }
    (w.sync)();
    w.rounds_ms
        .push(start.elapsed().as_secs_f64() * 1e3 / steps as f64);
}

/// The posterior families measured: the catalogue's perf methods
/// ([`crate::catalogue::ENTRIES`]) under [`SETTINGS`].
pub fn bayesian_methods() -> Vec<Method> {
    crate::catalogue::defaults(Protocol::Perf, &SETTINGS)
}

/// The benchmark's values of the catalogue's task settings: dropout and DropConnect at
/// p = 0.1 with length-scale 1, the moment methods at α = 10.
pub const SETTINGS: Settings = Settings {
    drop_rate: 0.1,
    length_scale: 1.0,
    moment_alpha: 10.0,
    sampled_dvi_alpha: 10.0,
};

/// The point-weight rows: MAP (bnn-burn's layers with point weights under the benches' `N(0, 1)`
/// prior) and the same with train-time dropout of half the dense layers' hidden units
/// ([`bnn_burn::nets::MlpConfig::dropout`]; the fused dropout kernel, or burn's generator on the
/// reference kernels), with the dropout rate.
pub fn point_methods() -> [(&'static str, f64); 2] {
    [(MAP, 0.0), (MAP_DROPOUT, 0.5)]
}
/// See [`point_methods`].
pub const MAP: &str = "MAP (point weights)";
/// See [`point_methods`].
pub const MAP_DROPOUT: &str = "MAP, train-time dropout 0.5";

/// The black-box α row: Depeweg's mean-field weights (`σ² = λ·sigmoid(ρ)`,
/// [`bnn_burn::recipes::depeweg_weights`]) trained by black-box α = 1 over
/// [`BLACK_BOX_DRAWS`] joint weight draws per step, each with its `ln q − ln p`: the fused
/// draws-with-ratios kernel against the composition of burn ops under `--kernels both`.
pub const BLACK_BOX: &str = "MFVI black-box α = 1, K = 4";
/// Joint weight draws per step of the [`BLACK_BOX`] row.
pub const BLACK_BOX_DRAWS: usize = 4;

/// The moment-propagation row: BEDL-PAC as the bench trains it (CLT moments through the body,
/// the evidential head, 5 draws of the logits' moments, the PAC-Bayes objective of eq. 5.10,
/// fused Adam) on random labels. Its peer is `xcheck/bedl_pac_torch.py time ARCH` on the same
/// net (`lenet5` or `mlp`).
pub const BEDL_PAC: &str = "BEDL-PAC (CLT moments)";

/// The moment-propagation row under the ELBO: DVI as the bench trains it on MNIST (CLT moments,
/// Taylor logits, the categorical head, the thesis's moment weights with `ln σ²` clamped inside
/// the KL, prior precision 100) on random labels, on either kernels.
pub const DVI_MOMENTS: &str = "DVI (CLT moments, ELBO)";

/// The continual-learning rows ([`continual_methods`]): MFVI (reparameterisation) whose prior
/// is a posterior, a mean and a standard deviation per weight
/// ([`bnn_burn::nets::Bnn::with_posterior_as_prior`] of the freshly initialised net: the next
/// task's model in variational continual learning), on either kernels.
pub const CONTINUAL: &str = "MFVI, posterior as prior (VCL)";
/// The low-rank plus diagonal Gaussian (rank 2, reparameterisation) under a posterior as its
/// prior, as [`CONTINUAL`].
pub const CONTINUAL_LOW_RANK: &str = "Low-rank, posterior as prior (VCL)";

/// The continual-learning rows: their names and families.
pub fn continual_methods() -> [(&'static str, Method); 2] {
    [
        (CONTINUAL, Method::mean_field(Estimator::Reparameterization)),
        (CONTINUAL_LOW_RANK, Method::low_rank(2)),
    ]
}

/// The deterministic baselines: burn's layers with burn's Adam (the "deterministic burn step")
/// and with the fused Adam the training loop uses.
pub const BASELINE: &str = "burn deterministic + burn Adam";
/// See [`BASELINE`].
pub const BASELINE_FUSED_ADAM: &str = "burn deterministic + fused Adam";

/// A row's name: the method's, marked `(reference)` on the composition of burn ops.
fn row_name(method: &str, kernels: Kernels) -> String {
    match kernels {
        Kernels::Fused => method.to_string(),
        Kernels::Reference => format!("{method} (reference)"),
    }
}

/// Checks `options` before any work: counts, and every method name known.
fn validate(options: &PerfOptions) -> Result<(), Box<dyn Error>> {
    if options.steps == 0 || options.rounds == 0 {
        return Err("perf: --steps and --rounds must be at least 1".into());
    }
    if options.threads == 0 {
        return Err("perf: --threads must be at least 1 (the peers' thread count)".into());
    }
    let mut known: Vec<&str> = bayesian_methods().iter().map(|m| m.name).collect();
    known.extend(point_methods().map(|(name, _)| name));
    known.push(BLACK_BOX);
    known.push(BEDL_PAC);
    known.push(DVI_MOMENTS);
    known.extend(continual_methods().map(|(name, _)| name));
    for m in &options.methods {
        if !known.iter().any(|k| crate::experiment::same_name(k, m)) {
            return Err(format!(
                "perf: unknown --method '{m}'; known methods: {}",
                known.join(", ")
            )
            .into());
        }
    }
    if options.nets.is_empty() || options.kernels.is_empty() {
        return Err("perf: --net and --kernels need at least one value".into());
    }
    Ok(())
}

/// Runs the benchmark and writes `perf.md` and `perf.json` to `options.out`.
pub fn run(options: &PerfOptions) -> Result<Vec<PerfRow>, Box<dyn Error>> {
    validate(options)?;
    let folder = crate::runner::OutFolder::open(&options.out, "--out")?;
    let start = Instant::now();
    let kept = bnn_burn::device::keep_freed_memory();
    let device = bnn_burn::training_device();
    eprintln!(
        "perf: backend {}, {} rounds × {} steps",
        bnn_burn::backend_name(),
        options.rounds,
        options.steps
    );
    let wanted = |name: &str| {
        options.methods.is_empty()
            || options
                .methods
                .iter()
                .any(|m| crate::experiment::same_name(m, name))
    };
    let python = match &options.peer_python {
        Some(python) if python.exists() => Some(python.clone()),
        _ => None,
    };
    let mut peer_notes = Vec::new();
    match &options.peer_python {
        Some(python) if python.exists() => {}
        Some(python) => peer_notes.push(format!(
            "peer programs skipped: no Python interpreter at {} (see ../shared/peer/README.md)",
            python.display()
        )),
        None => peer_notes.push("peer programs skipped (--peer-python not given)".into()),
    }
    // The BEDL-PAC row trains by moments on the fused kernels only.
    let bedl_pac = wanted(BEDL_PAC) && options.kernels.contains(&Kernels::Fused);
    let mut rows = Vec::new();
    for &net in &options.nets {
        device.seed(options.seed);
        let (x, y) = inputs(net, &device);
        let (x, y) = (&x, &y);
        let mut workloads = Vec::new();
        let baselines = [
            (BASELINE, AdamConfig::new().init()),
            (
                BASELINE_FUSED_ADAM,
                OptimizerConfig::adam().init(Kernels::Fused),
            ),
        ];
        for (name, optim) in baselines {
            device.seed(options.seed);
            let loss = move |m: &Deterministic| m.loss(x, y.clone());
            let build = || Ok::<_, bnn_burn::ConfigError>(Deterministic::new(net, &device));
            workloads.push(workload((net, name.into()), build, optim, loss)?);
            report_warmup(workloads.last().expect("pushed"));
        }
        for method in bayesian_methods().into_iter().filter(|m| wanted(m.name)) {
            for &kernels in &options.kernels {
                device.seed(options.seed);
                let name = row_name(method.name, kernels);
                let weights = method.weights.clone();
                let build = || Bayesian::new(net, weights, &device);
                let optim = OptimizerConfig::adam().init(kernels);
                let loss = move |m: &Bayesian| m.loss(x, y.clone(), kernels);
                workloads.push(workload((net, name), build, optim, loss)?);
                report_warmup(workloads.last().expect("pushed"));
            }
        }
        for (method, family) in continual_methods().into_iter().filter(|(m, _)| wanted(m)) {
            for &kernels in &options.kernels {
                device.seed(options.seed);
                let name = row_name(method, kernels);
                let weights = family.weights.clone();
                let build = || Bayesian::new(net, weights, &device)?.with_posterior_as_prior();
                let optim = OptimizerConfig::adam().init(kernels);
                let loss = move |m: &Bayesian| m.loss(x, y.clone(), kernels);
                workloads.push(workload((net, name), build, optim, loss)?);
                report_warmup(workloads.last().expect("pushed"));
            }
        }
        for (method, dropout) in point_methods().into_iter().filter(|(m, _)| wanted(m)) {
            for &kernels in &options.kernels {
                device.seed(options.seed);
                let name = row_name(method, kernels);
                let weights = Method::map(1.0).weights;
                let build = || Bayesian::with_dropout(net, weights, dropout, &device);
                let optim = OptimizerConfig::adam().init(kernels);
                let loss = move |m: &Bayesian| m.loss(x, y.clone(), kernels);
                workloads.push(workload((net, name), build, optim, loss)?);
                report_warmup(workloads.last().expect("pushed"));
            }
        }
        if wanted(BLACK_BOX) {
            for &kernels in &options.kernels {
                device.seed(options.seed);
                let name = row_name(BLACK_BOX, kernels);
                let build = || Bayesian::new(net, bnn_burn::recipes::depeweg_weights(1.0), &device);
                let optim = OptimizerConfig::adam().init(kernels);
                let loss = move |m: &Bayesian| {
                    m.black_box_loss(x, y.clone(), kernels, BLACK_BOX_DRAWS, 1.0)
                };
                workloads.push(workload((net, name), build, optim, loss)?);
                report_warmup(workloads.last().expect("pushed"));
            }
        }
        if bedl_pac {
            device.seed(options.seed);
            let labels = y.clone().argmax(1).squeeze_dim::<1>(1);
            let objective = match crate::catalogue::Method::bedl_pac().objective {
                crate::catalogue::TrainObjective::PacBayes(pac) => pac.init()?,
                _ => unreachable!("BEDL-PAC's objective is the PAC-Bayes bound"),
            };
            let build = || MomentNet::bedl_pac(net, &device);
            let optim = OptimizerConfig::adam().init(Kernels::Fused);
            let loss = move |m: &MomentNet| m.loss(x, labels.clone(), &objective, Kernels::Fused);
            workloads.push(workload((net, BEDL_PAC.into()), build, optim, loss)?);
            report_warmup(workloads.last().expect("pushed"));
        }
        if wanted(DVI_MOMENTS) {
            for &kernels in &options.kernels {
                device.seed(options.seed);
                let name = row_name(DVI_MOMENTS, kernels);
                let labels = y.clone().argmax(1).squeeze_dim::<1>(1);
                let objective = bnn_burn::objective::ElboConfig::new().init()?;
                let build = || MomentNet::dvi(net, &device);
                let optim = OptimizerConfig::adam().init(kernels);
                let loss = move |m: &MomentNet| m.loss(x, labels.clone(), &objective, kernels);
                workloads.push(workload((net, name), build, optim, loss)?);
                report_warmup(workloads.last().expect("pushed"));
            }
        }
        // The peers run in the same rounds, one process per round: on the MLP the two programs
        // of `--peer-dir`; on both nets PyTorch's deterministic step, bayesian-torch's on
        // LeNet5 (`xcheck/perf_peers.py`), and the PyTorch BEDL-PAC when its row runs.
        let xcheck = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../xcheck");
        let mut peers: Vec<Peer> = match (&python, net) {
            (Some(_), Net::Mlp) => ["torch_mfvi_mlp.py", "bayesian_torch_mlp.py"]
                .iter()
                .map(|script| Peer {
                    name: script.trim_end_matches(".py").to_string(),
                    script: options.peer_dir.join(script),
                    args: vec![],
                })
                .collect(),
            (Some(_), Net::LeNet5) => vec![Peer {
                name: "bayesian_torch_lenet5".into(),
                script: xcheck.join("perf_peers.py"),
                args: vec!["bayesian_torch".into(), "lenet5".into()],
            }],
            (None, _) => vec![],
        };
        if python.is_some() {
            let arch = net.peer_arch();
            peers.push(Peer {
                name: format!("{TORCH_DETERMINISTIC}_{arch}"),
                script: xcheck.join("perf_peers.py"),
                args: vec!["torch".into(), arch.into()],
            });
        }
        if python.is_some() && bedl_pac {
            peers.push(Peer {
                name: TORCH_BEDL_PAC.to_string(),
                script: xcheck.join("bedl_pac_torch.py"),
                args: vec!["time".to_string(), net.peer_arch().to_string()],
            });
        }
        let mut peer_rounds: Vec<Result<Vec<f64>, String>> =
            peers.iter().map(|_| Ok(vec![])).collect();
        // Interleaved rounds: every workload once per round, so that the machine's drift between
        // rounds moves all of them alike and a ratio is taken within one round.
        for round in 0..options.rounds {
            for w in workloads.iter_mut() {
                time_round(w, options.steps);
            }
            for (peer, times) in peers.iter().zip(peer_rounds.iter_mut()) {
                if let (Some(python), Ok(t)) = (&python, times.as_mut()) {
                    match peer_round(python, peer, options.threads) {
                        Ok(ms) => t.push(ms),
                        Err(e) => *times = Err(e),
                    }
                }
            }
            eprintln!(
                "{}: round {}/{} done",
                net.short_name(),
                round + 1,
                options.rounds
            );
        }
        let mut net_rows: Vec<PerfRow> = workloads
            .iter()
            .map(|w| PerfRow {
                net: w.net,
                method: w.method.clone(),
                ms_per_step: median(&w.rounds_ms),
                rounds_ms: w.rounds_ms.clone(),
                peak_heap_bytes: Some(w.peak_heap_bytes),
                vs_deterministic: None,
                vs_deterministic_fused_adam: None,
                vs_bayesian_torch: None,
                vs_torch: None,
                vs_torch_bedl_pac: None,
            })
            .collect();
        for (peer, times) in peers.iter().zip(peer_rounds) {
            match times {
                Ok(rounds_ms) => net_rows.push(PerfRow {
                    net,
                    method: format!("peer: {} ({} threads)", peer.name, options.threads),
                    ms_per_step: median(&rounds_ms),
                    rounds_ms,
                    peak_heap_bytes: None,
                    vs_deterministic: None,
                    vs_deterministic_fused_adam: None,
                    vs_bayesian_torch: None,
                    vs_torch: None,
                    vs_torch_bedl_pac: None,
                }),
                Err(e) => peer_notes.push(e),
            }
        }
        let rounds_of = |name: &str| {
            net_rows
                .iter()
                .find(|r| r.method == name || (name == "bayesian_torch" && r.method.contains(name)))
                .map(|r| r.rounds_ms.clone())
        };
        let (det, det_fused, bt) = (
            rounds_of(BASELINE),
            rounds_of(BASELINE_FUSED_ADAM),
            rounds_of("bayesian_torch"),
        );
        let rounds_containing = |name: &str| {
            net_rows
                .iter()
                .find(|r| r.method.contains(name))
                .map(|r| r.rounds_ms.clone())
        };
        let (torch_det, torch_bedl_pac) = (
            rounds_containing(TORCH_DETERMINISTIC),
            rounds_containing(TORCH_BEDL_PAC),
        );
        for r in net_rows.iter_mut() {
            r.vs_deterministic = det.as_ref().map(|d| round_ratio(&r.rounds_ms, d));
            r.vs_deterministic_fused_adam =
                det_fused.as_ref().map(|d| round_ratio(&r.rounds_ms, d));
            r.vs_bayesian_torch = bt.as_ref().map(|d| round_ratio(&r.rounds_ms, d));
            r.vs_torch = torch_det.as_ref().map(|d| round_ratio(&r.rounds_ms, d));
            if r.method == BEDL_PAC {
                r.vs_torch_bedl_pac = torch_bedl_pac
                    .as_ref()
                    .map(|d| round_ratio(&r.rounds_ms, d));
            }
            eprintln!(
                "{:<7} {:<42} {:>8.2} ms/step  ×det {}",
                net.short_name(),
                r.method,
                r.ms_per_step,
                r.vs_deterministic.map_or("–".into(), |v| format!("{v:.2}"))
            );
        }
        rows.extend(net_rows);
    }
    for note in &peer_notes {
        eprintln!("{note}");
    }

    let wall_seconds = start.elapsed().as_secs_f64();
    write_report(&folder, options, &rows, &peer_notes, kept, wall_seconds)?;
    Ok(rows)
}

/// The median of the per-round ratios `a[i] / b[i]`.
fn round_ratio(a: &[f64], b: &[f64]) -> f64 {
    let ratios: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b).collect();
    median(&ratios)
}

/// Prints a workload's warm-up peak heap as it is built.
fn report_warmup(w: &Workload) {
    eprintln!(
        "{:<7} {:<42} warmed up, peak heap {:>7.1} MiB",
        w.net.short_name(),
        w.method,
        w.peak_heap_bytes as f64 / (1 << 20) as f64
    );
}

/// The name of the PyTorch BEDL-PAC peer in the report.
const TORCH_BEDL_PAC: &str = "torch_bedl_pac";

/// The name of PyTorch's deterministic peer in the report, before its net (`_mlp`, `_lenet5`).
const TORCH_DETERMINISTIC: &str = "torch_deterministic";

/// A peer program: `python script args… threads`, printing `ms/step`.
struct Peer {
    name: String,
    script: PathBuf,
    args: Vec<String>,
}

/// Runs `python script args…` and returns its standard output, or an error naming the program
/// with its standard error.
pub(crate) fn run_peer_program(
    python: &Path,
    script: &Path,
    args: &[String],
) -> Result<String, String> {
    let output = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .map_err(|e| format!("could not start {}: {e}", python.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} {} failed: {}",
            script.display(),
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Runs one peer program once and parses its `ms/step`.
fn peer_round(python: &Path, peer: &Peer, threads: usize) -> Result<f64, String> {
    let script = &peer.script;
    let mut args = peer.args.clone();
    args.push(threads.to_string());
    let text = run_peer_program(python, script, &args)?;
    peer_number(&text, "ms/step", script)
}

/// The number before `unit` in a peer's comma-separated output (`…, 12.3 ms/step`).
pub(crate) fn peer_number(text: &str, unit: &str, script: &Path) -> Result<f64, String> {
    text.split(',')
        .find_map(|part| part.trim().strip_suffix(unit))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .ok_or_else(|| format!("no '{unit}' in the output of {}: {text}", script.display()))
}
