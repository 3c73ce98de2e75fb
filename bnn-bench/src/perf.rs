//! `bnn-bench perf`: milliseconds per training step and peak heap of the MLP 784-400-400-10
//! (batch 128) and of LeNet5 (MNIST-sized inputs, batch 100), Adam, for burn's deterministic
//! layers (with burn's Adam and with the fused Adam) and every posterior family (fused kernels,
//! and optionally the reference composition), with the PyTorch peer programs of
//! `../shared/peer` run in the same invocation so that ratios compare like with like.
//!
//! The MLP workload matches the peers exactly: random inputs `[128, 784]` and targets
//! `[128, 10]`, loss `mean (o − y)² + KL / 60000`, one posterior sample per step, 5 warm-up
//! steps, then the mean over `steps` steps; the whole measurement is repeated `rounds` times and
//! the median round is reported.

use crate::alloc;
use crate::methods::Method;
use crate::perf_models::{Bayesian, Deterministic, Net, inputs};
use bnn_burn::fused::Kernels;
use bnn_burn::layers::Estimator;
use bnn_burn::train::OptimizerConfig;
use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::Tensor;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const WARMUP: usize = 5;

/// Settings of one `perf` run.
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
    /// Folder holding the peer programs.
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
    /// The architecture (`None` for the peers, which run the MLP).
    pub net: Option<Net>,
    /// What was run.
    pub method: String,
    /// Milliseconds per step of the median round.
    pub ms_per_step: f64,
    /// Every round's ms/step.
    pub rounds_ms: Vec<f64>,
    /// Peak heap bytes above the bytes live before the model was built (burn runs only).
    pub peak_heap_bytes: Option<usize>,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        0.5 * (s[n / 2 - 1] + s[n / 2])
    }
}

/// Times `rounds × steps` optimiser steps of `model` under `loss`, after `WARMUP` steps.
fn measure<M: Module>(
    (net, method): (Net, String),
    mut model: M,
    mut optim: ModuleOptimizer,
    loss: impl Fn(&M) -> Tensor<1>,
    options: &PerfOptions,
    base_bytes: usize,
) -> PerfRow {
    let device = model.devices()[0].clone();
    let mut step = |model: M| {
        let l = loss(&model);
        let grads = GradientsParams::from_grads(l.backward(), &model);
        optim.step(1e-3, model, grads)
    };
    for _ in 0..WARMUP {
        model = step(model);
    }
    let _ = device.sync();
    let mut rounds_ms = Vec::with_capacity(options.rounds);
    for _ in 0..options.rounds {
        let start = Instant::now();
        for _ in 0..options.steps {
            model = step(model);
        }
        let _ = device.sync();
        rounds_ms.push(start.elapsed().as_secs_f64() * 1e3 / options.steps as f64);
    }
    let peak = alloc::peak_bytes().saturating_sub(base_bytes);
    let row = PerfRow {
        net: Some(net),
        method,
        ms_per_step: median(&rounds_ms),
        rounds_ms,
        peak_heap_bytes: Some(peak),
    };
    eprintln!(
        "{:<10} {:<42} {:>8.2} ms/step   peak heap {:>7.1} MiB",
        if net == Net::Mlp { "MLP" } else { "LeNet5" },
        row.method,
        row.ms_per_step,
        peak as f64 / (1 << 20) as f64
    );
    row
}

/// The posterior families measured, with the settings the benchmarks use.
pub fn bayesian_methods() -> Vec<Method> {
    vec![
        Method::mean_field(Estimator::Reparameterization),
        Method::mean_field(Estimator::LocalReparameterization),
        Method::mean_field(Estimator::Flipout),
        Method::radial(),
        Method::mc_dropout(0.1, 1.0),
        Method::drop_connect(0.1, 1.0),
        Method::low_rank(2),
    ]
}

/// The deterministic baselines: burn's layers with burn's Adam (the "deterministic burn step")
/// and with the fused Adam the training loop uses.
pub const BASELINE: &str = "burn deterministic + burn Adam";
/// See [`BASELINE`].
pub const BASELINE_FUSED_ADAM: &str = "burn deterministic + fused Adam";

/// Checks `options` before any work: counts, and every method name known.
fn validate(options: &PerfOptions) -> Result<(), Box<dyn Error>> {
    if options.steps == 0 || options.rounds == 0 {
        return Err("perf: --steps and --rounds must be at least 1".into());
    }
    let known: Vec<&str> = bayesian_methods().iter().map(|m| m.name).collect();
    for m in &options.methods {
        if !known.iter().any(|k| k.eq_ignore_ascii_case(m)) {
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
    std::fs::create_dir_all(&options.out)
        .map_err(|e| format!("perf: cannot create --out {}: {e}", options.out.display()))?;
    let device = bnn_burn::training_device();
    eprintln!(
        "perf: backend {}, {} rounds × {} steps",
        bnn_burn::backend_name(),
        options.rounds,
        options.steps
    );
    let wanted = |name: &str| {
        options.methods.is_empty() || options.methods.iter().any(|m| m.eq_ignore_ascii_case(name))
    };
    let mut rows = Vec::new();
    for &net in &options.nets {
        device.seed(options.seed);
        let (x, y) = inputs(net, &device);
        let baselines = [
            (BASELINE, AdamConfig::new().init()),
            (
                BASELINE_FUSED_ADAM,
                OptimizerConfig::adam().init(Kernels::Fused),
            ),
        ];
        for (name, optim) in baselines {
            device.seed(options.seed);
            alloc::reset_peak();
            let base = alloc::live_bytes();
            let model = Deterministic::new(net, &device);
            let loss = |m: &Deterministic| m.loss(&x, y.clone());
            rows.push(measure(
                (net, name.into()),
                model,
                optim,
                loss,
                options,
                base,
            ));
        }
        for method in bayesian_methods().into_iter().filter(|m| wanted(m.name)) {
            for &kernels in &options.kernels {
                device.seed(options.seed);
                alloc::reset_peak();
                let base = alloc::live_bytes();
                let model = Bayesian::new(net, method.weights.clone(), &device)?;
                let name = match kernels {
                    Kernels::Fused => method.name.to_string(),
                    Kernels::Reference => format!("{} (reference)", method.name),
                };
                let optim = OptimizerConfig::adam().init(kernels);
                let loss = |m: &Bayesian| m.loss(&x, y.clone(), kernels);
                rows.push(measure((net, name), model, optim, loss, options, base));
            }
        }
    }
    let mut peer_notes = Vec::new();
    match &options.peer_python {
        Some(python) if python.exists() => {
            for script in ["torch_mfvi_mlp.py", "bayesian_torch_mlp.py"] {
                let path = options.peer_dir.join(script);
                match run_peer(python, &path, options) {
                    Ok(row) => rows.push(row),
                    Err(e) => peer_notes.push(e),
                }
            }
        }
        Some(python) => peer_notes.push(format!(
            "peer programs skipped: no Python interpreter at {} (see ../shared/peer/README.md)",
            python.display()
        )),
        None => peer_notes.push("peer programs skipped (--peer-python not given)".into()),
    }
    for note in &peer_notes {
        eprintln!("{note}");
    }

    write_report(options, &rows, &peer_notes)?;
    Ok(rows)
}

/// Runs one peer program `rounds` times and parses its `ms/step`.
fn run_peer(python: &Path, script: &Path, options: &PerfOptions) -> Result<PerfRow, String> {
    let mut rounds_ms = Vec::new();
    for _ in 0..options.rounds {
        let output = Command::new(python)
            .arg(script)
            .arg(options.threads.to_string())
            .output()
            .map_err(|e| format!("could not start {}: {e}", python.display()))?;
        let text = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            return Err(format!(
                "{} failed: {}",
                script.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        let ms = text
            .split(',')
            .find_map(|part| part.trim().strip_suffix("ms/step"))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .ok_or_else(|| format!("no 'ms/step' in the output of {}: {text}", script.display()))?;
        rounds_ms.push(ms);
    }
    let name = script
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let row = PerfRow {
        net: None,
        method: format!("peer: {name} ({} threads)", options.threads),
        ms_per_step: median(&rounds_ms),
        rounds_ms,
        peak_heap_bytes: None,
    };
    eprintln!("{:<34} {:>8.2} ms/step", row.method, row.ms_per_step);
    Ok(row)
}

/// `perf.md`: one table per architecture, each row's ratio to both deterministic baselines and
/// (MLP) to bayesian-torch; and `perf.json` with every round.
fn write_report(
    options: &PerfOptions,
    rows: &[PerfRow],
    notes: &[String],
) -> Result<(), Box<dyn Error>> {
    let torch_bt = rows
        .iter()
        .find(|r| r.method.contains("bayesian_torch"))
        .map(|r| r.ms_per_step);
    let mut table = format!(
        "# Training-step benchmark\n\nAdam, one posterior sample per step, loss = mean squared error \
         + KL/60000, random inputs and targets. Backend `{}`; median of {} rounds of {} steps after \
         {WARMUP} warm-up steps; ratios are of medians measured in this run. Bayesian rows run the \
         fused kernels and fused Adam (the training loop's default) unless marked reference (burn \
         ops, burn's Adam). Peak heap: the most bytes live at once during the run, above those live \
         before the model was built.\n",
        bnn_burn::backend_name(),
        options.rounds,
        options.steps
    );
    for &net in &options.nets {
        let of_net: Vec<&PerfRow> = rows
            .iter()
            .filter(|r| r.net == Some(net) || (r.net.is_none() && net == Net::Mlp))
            .collect();
        let base = |name: &str| {
            of_net
                .iter()
                .find(|r| r.method == name)
                .map(|r| r.ms_per_step)
        };
        let (det, det_fused) = (base(BASELINE), base(BASELINE_FUSED_ADAM));
        table.push_str(&format!(
            "\n## {}\n\n| method | ms/step | × det. (burn Adam) | × det. (fused Adam) | \
             × bayesian-torch | peak heap (MiB) |\n|---|---:|---:|---:|---:|---:|\n",
            net.name()
        ));
        let ratio = |r: &PerfRow, d: Option<f64>| {
            d.map(|d| format!("{:.2}", r.ms_per_step / d))
                .unwrap_or_else(|| "–".into())
        };
        for r in of_net {
            let heap = r
                .peak_heap_bytes
                .map(|b| format!("{:.1}", b as f64 / (1 << 20) as f64))
                .unwrap_or_else(|| "–".into());
            let vs_bt = if net == Net::Mlp {
                ratio(r, torch_bt)
            } else {
                "–".into()
            };
            table.push_str(&format!(
                "| {} | {:.2} | {} | {} | {} | {} |\n",
                r.method,
                r.ms_per_step,
                ratio(r, det),
                ratio(r, det_fused),
                vs_bt,
                heap
            ));
        }
    }
    for note in notes {
        table.push_str(&format!("\n{note}\n"));
    }
    std::fs::write(options.out.join("perf.md"), &table)?;
    let record = serde_json::json!({
        "experiment": "perf",
        "backend": bnn_burn::backend_name(),
        "nets": options.nets,
        "kernels": options.kernels,
        "steps": options.steps,
        "rounds": options.rounds,
        "warmup": WARMUP,
        "seed": options.seed,
        "peer_threads": options.threads,
        "rows": rows,
        "notes": notes,
        "library_version": env!("CARGO_PKG_VERSION"),
    });
    std::fs::write(
        options.out.join("perf.json"),
        serde_json::to_string_pretty(&record)?,
    )?;
    println!("{table}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_measures_every_method_and_writes_its_report() {
        // The heap counter is process-wide: hold the lock every training test holds, so no
        // other test allocates or frees inside the measurement.
        let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
        let dir = std::env::temp_dir().join(format!("bnn-perf-test-{}", std::process::id()));
        let options = PerfOptions {
            steps: 1,
            rounds: 1,
            seed: 0,
            out: dir.clone(),
            peer_python: None,
            peer_dir: dir.clone(),
            threads: 2,
            methods: vec![],
            nets: vec![Net::Mlp],
            kernels: vec![Kernels::Fused, Kernels::Reference],
        };
        let rows = run(&options).unwrap();
        assert_eq!(rows.len(), 2 + 2 * bayesian_methods().len());
        for r in &rows {
            assert!(r.ms_per_step > 0.0 && r.ms_per_step.is_finite(), "{r:?}");
            // Three weight matrices alone are 1.4 MiB of f32; Adam keeps two more copies.
            assert!(r.peak_heap_bytes.unwrap() > 1 << 20, "{r:?}");
        }
        let table = std::fs::read_to_string(dir.join("perf.md")).unwrap();
        assert!(table.contains("MFVI-LRT (reference)") && table.contains(BASELINE));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_lenet5_workload_runs_and_bad_options_are_refused_before_any_work() {
        let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
        let dir = std::env::temp_dir().join(format!("bnn-perf-lenet-{}", std::process::id()));
        let mut options = PerfOptions {
            steps: 1,
            rounds: 1,
            seed: 0,
            out: dir.clone(),
            peer_python: None,
            peer_dir: dir.clone(),
            threads: 2,
            methods: vec!["mfvi".into()],
            nets: vec![Net::LeNet5],
            kernels: vec![Kernels::Fused],
        };
        let rows = run(&options).unwrap();
        assert_eq!(rows.len(), 3);
        assert!(
            rows.iter()
                .all(|r| r.net == Some(Net::LeNet5) && r.ms_per_step > 0.0)
        );
        options.methods = vec!["MFVI".into(), "Bogus".into()];
        let err = run(&options).unwrap_err().to_string();
        assert!(err.contains("'Bogus'") && err.contains("MFVI-LRT"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
