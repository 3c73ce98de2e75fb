//! `bnn-bench perf`: milliseconds per training step and peak heap of an MLP 784-400-400-10,
//! batch 128, Adam, for the deterministic burn `Linear` net and every posterior family, with the
//! PyTorch peer programs of `../shared/peer` run in the same invocation so that ratios compare
//! like with like.
//!
//! The workload matches the peers exactly: random inputs `[128, 784]` and targets `[128, 10]`,
//! loss `mean (o − y)² + KL / 60000`, one posterior sample per step, 5 warm-up steps, then the
//! mean over `steps` steps; the whole measurement is repeated `rounds` times and the median round
//! is reported.

use crate::alloc;
use crate::methods::Method;
use bnn_burn::layers::{Estimator, Pass};
use bnn_burn::likelihood::Categorical;
use bnn_burn::nets::{Classifier, MlpConfig};
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Distribution, Tensor};
use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const WIDTHS: [usize; 4] = [784, 400, 400, 10];
const BATCH: usize = 128;
const N_TRAIN: f64 = 60_000.0;
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
    /// The deterministic baseline always runs.
    pub methods: Vec<String>,
}

/// The deterministic baseline: three burn `Linear` layers with ReLU.
#[derive(Module, Debug)]
struct DeterministicMlp {
    layers: Vec<Linear>,
}

impl DeterministicMlp {
    fn new(device: &Device) -> Self {
        let layers = WIDTHS
            .windows(2)
            .map(|w| LinearConfig::new(w[0], w[1]).init(device))
            .collect();
        Self { layers }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let last = self.layers.len() - 1;
        self.layers.iter().enumerate().fold(x, |h, (i, l)| {
            let h = l.forward(h);
            if i < last { relu(h) } else { h }
        })
    }
}

/// One measured workload.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PerfRow {
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

/// Times `rounds × steps` Adam steps of `model` under `loss`, after `WARMUP` steps.
fn measure<M: Module>(
    method: &str,
    mut model: M,
    loss: impl Fn(&M, Tensor<2>, Tensor<2>) -> Tensor<1>,
    options: &PerfOptions,
    base_bytes: usize,
) -> PerfRow {
    let device = model.devices()[0].clone();
    let x = Tensor::<2>::random([BATCH, WIDTHS[0]], Distribution::Normal(0.0, 1.0), &device);
    let y = Tensor::<2>::random([BATCH, WIDTHS[3]], Distribution::Normal(0.0, 1.0), &device);
    let mut optim = AdamConfig::new().init();
    let mut step = |model: M| {
        let l = loss(&model, x.clone(), y.clone());
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
        method: method.to_string(),
        ms_per_step: median(&rounds_ms),
        rounds_ms,
        peak_heap_bytes: Some(peak),
    };
    eprintln!(
        "{:<34} {:>8.2} ms/step   peak heap {:>7.1} MiB",
        row.method,
        row.ms_per_step,
        peak as f64 / (1 << 20) as f64
    );
    row
}

/// The posterior families measured, with the settings the benchmarks use.
fn bayesian_methods() -> Vec<Method> {
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

/// `mean (o − y)² + KL/N` of one posterior draw; the KL comes from the same evaluation of the
/// posteriors as the forward pass (σ = softplus(ρ) once per step).
fn bayesian_loss(model: &Classifier, x: Tensor<2>, y: Tensor<2>) -> Tensor<1> {
    let mut pass = Pass::train(1, false);
    let out: Tensor<2> = model.forward(x, &mut pass).squeeze_dim(0);
    let (kl, _) = pass.into_terms(&out.device());
    (out - y).square().mean() + kl / N_TRAIN
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
        method: format!("peer: {name} ({} threads)", options.threads),
        ms_per_step: median(&rounds_ms),
        rounds_ms,
        peak_heap_bytes: None,
    };
    eprintln!("{:<34} {:>8.2} ms/step", row.method, row.ms_per_step);
    Ok(row)
}

/// Runs the benchmark and writes `perf.md` and `perf.json` to `options.out`.
pub fn run(options: &PerfOptions) -> Result<Vec<PerfRow>, Box<dyn Error>> {
    if options.steps == 0 || options.rounds == 0 {
        return Err("perf: --steps and --rounds must be at least 1".into());
    }
    let device = bnn_burn::training_device();
    eprintln!(
        "perf: MLP 784-400-400-10, batch {BATCH}, Adam, backend {}, {} rounds × {} steps",
        bnn_burn::backend_name(),
        options.rounds,
        options.steps
    );
    let mut rows = Vec::new();

    device.seed(options.seed);
    alloc::reset_peak();
    let base = alloc::live_bytes();
    let det = DeterministicMlp::new(&device);
    rows.push(measure(
        "burn Linear (deterministic)",
        det,
        |m: &DeterministicMlp, x, y| (m.forward(x) - y).square().mean(),
        options,
        base,
    ));

    let wanted = |name: &str| {
        options.methods.is_empty() || options.methods.iter().any(|m| m.eq_ignore_ascii_case(name))
    };
    for method in bayesian_methods().into_iter().filter(|m| wanted(m.name)) {
        device.seed(options.seed);
        alloc::reset_peak();
        let base = alloc::live_bytes();
        let model = MlpConfig::new(WIDTHS[0], WIDTHS[1..3].to_vec(), WIDTHS[3])
            .with_weights(method.weights)
            .init(Categorical, &device)?;
        rows.push(measure(method.name, model, bayesian_loss, options, base));
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

fn write_report(
    options: &PerfOptions,
    rows: &[PerfRow],
    notes: &[String],
) -> Result<(), Box<dyn Error>> {
    std::fs::create_dir_all(&options.out)?;
    let det = rows[0].ms_per_step;
    let torch_bt = rows
        .iter()
        .find(|r| r.method.contains("bayesian_torch"))
        .map(|r| r.ms_per_step);
    let mut table = format!(
        "# Training-step benchmark\n\nMLP 784-400-400-10, batch {BATCH}, Adam, one posterior sample per step, \
         loss = mean squared error + KL/60000. Backend `{}`; median of {} rounds of {} steps after {WARMUP} \
         warm-up steps. Peak heap: the most bytes live at once during the run, above those live before the \
         model was built.\n\n| method | ms/step | × deterministic burn | × bayesian-torch | peak heap (MiB) |\n\
         |---|---:|---:|---:|---:|\n",
        bnn_burn::backend_name(),
        options.rounds,
        options.steps
    );
    for r in rows {
        let vs_bt = torch_bt
            .map(|t| format!("{:.2}", r.ms_per_step / t))
            .unwrap_or_else(|| "–".into());
        let heap = r
            .peak_heap_bytes
            .map(|b| format!("{:.1}", b as f64 / (1 << 20) as f64))
            .unwrap_or_else(|| "–".into());
        table.push_str(&format!(
            "| {} | {:.2} | {:.2} | {} | {} |\n",
            r.method,
            r.ms_per_step,
            r.ms_per_step / det,
            vs_bt,
            heap
        ));
    }
    for note in notes {
        table.push_str(&format!("\n{note}\n"));
    }
    std::fs::write(options.out.join("perf.md"), &table)?;
    let record = serde_json::json!({
        "experiment": "perf",
        "backend": bnn_burn::backend_name(),
        "widths": WIDTHS,
        "batch": BATCH,
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
        };
        let rows = run(&options).unwrap();
        assert_eq!(rows.len(), 1 + bayesian_methods().len());
        for r in &rows {
            assert!(r.ms_per_step > 0.0 && r.ms_per_step.is_finite(), "{r:?}");
            // Three weight matrices alone are 1.4 MiB of f32; Adam keeps two more copies.
            assert!(r.peak_heap_bytes.unwrap() > 1 << 20, "{r:?}");
        }
        let table = std::fs::read_to_string(dir.join("perf.md")).unwrap();
        assert!(table.contains("MFVI-LRT") && table.contains("burn Linear"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
