//! `bnn-bench perf-pool`: what max pooling by moments costs, forward and backward, by the fused
//! kernel (`bnn_burn::fused::max_pool_moments`) against the composition of burn ops
//! ([`Kernels::Reference`]), on the poolings of the pooled LeNet5 (BEDL and DVI on
//! `--arch lenet5-pool`) and an overlapping 3×3 one, with the largest difference between the
//! two paths' outputs and gradients.
//!
//! Each round runs both paths on the same inputs (moments of `[S, B, C, H, W]` maps, means
//! `N(0, 1)`, variances uniform on `[0.01, 1]`): the pooling, the loss `Σ E + ½ Σ Var`, its
//! backward pass, and a read-back of the gradients' sums. The ratio is the reference's median
//! over the fused path's median, measured in this run.

use bnn_burn::dist::Moments;
use bnn_burn::fused::Kernels;
use bnn_burn::host::to_vec;
use bnn_burn::layers::{MomentRule, Pass, Pool};
use burn::tensor::{Distribution, Tensor};
use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

/// Settings of one run.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct PoolOptions {
    /// Output folder for perf-pool.md and perf-pool.json.
    #[arg(long, default_value = "runs/perf-pool")]
    pub out: PathBuf,
    /// Timed repetitions of each path per pooling (the median is reported).
    #[arg(long, default_value_t = 9)]
    pub rounds: usize,
    /// Seed of the inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Batch size of the maps (the pooled LeNet5 trains with 100).
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
}

/// One pooling, timed both ways.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PoolRow {
    /// `[S, B, C, H, W]` of the input moments.
    pub input: [usize; 5],
    /// Window side.
    pub kernel: usize,
    /// Stride.
    pub stride: usize,
    /// Milliseconds of forward and backward by the composition of burn ops (median round).
    pub reference_ms: f64,
    /// Milliseconds of forward and backward by the fused kernel (median round).
    pub fused_ms: f64,
    /// `reference_ms / fused_ms`.
    pub speedup: f64,
    /// Largest `|fused − reference|` over the outputs' means and variances, relative to the
    /// largest magnitude of each.
    pub max_rel_diff_values: f64,
    /// The same over both inputs' gradients.
    pub max_rel_diff_grads: f64,
}

fn validate(o: &PoolOptions) -> Result<(), Box<dyn Error>> {
    for (flag, v) in [("--rounds", o.rounds), ("--batch", o.batch)] {
        if v == 0 {
            return Err(format!("{flag} must be at least 1").into());
        }
    }
    Ok(())
}

/// `[mean, var, ∂/∂mean, ∂/∂var]` of one path on `(mean, var)`.
fn run_once(pool: Pool, kernels: Kernels, mean: &Tensor<5>, var: &Tensor<5>) -> [Tensor<5>; 4] {
    let (m, v) = (mean.clone().require_grad(), var.clone().require_grad());
    let pass = Pass::train_moments(MomentRule::Clt).with_kernels(kernels);
    let out = pool.pass_moments(Moments::new(m.clone(), v.clone()), &pass);
    let loss = out.mean.clone().sum() + out.var.clone().sum() * 0.5;
    let grads = loss.backward();
    [
        out.mean.inner(),
        out.var.inner(),
        m.grad(&grads).expect("a gradient of the means"),
        v.grad(&grads).expect("a gradient of the variances"),
    ]
}

/// The largest `|a − b|` relative to the largest `|b|` (at least 1).
fn rel_diff(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(1f64, |s, x| s.max(x.abs()));
    a.iter()
        .zip(b)
        .fold(0f64, |d, (x, y)| d.max((x - y).abs() / scale))
}

/// Times every workload both ways, writes the report.
///
/// # Errors
/// Bad options (before any work), an unwritable `--out`, non-finite results.
pub fn run(o: &PoolOptions) -> Result<Vec<PoolRow>, Box<dyn Error>> {
    validate(o)?;
    let folder = crate::runner::OutFolder::open(&o.out, "--out")?;
    let start = Instant::now();
    let device = bnn_burn::training_device();
    device.seed(o.seed);
    let b = o.batch;
    let mut rows = Vec::new();
    for (input, kernel, stride) in [
        ([1, b, 20, 24, 24], 2, 2),
        ([1, b, 50, 8, 8], 2, 2),
        ([1, b, 20, 11, 11], 3, 2),
    ] {
        let pool = Pool::Max { kernel, stride };
        let mean = Tensor::<5>::random(input, Distribution::Normal(0.0, 1.0), &device);
        let var = Tensor::<5>::random(input, Distribution::Uniform(0.01, 1.0), &device);
        // One untimed call of each first: allocations warm up.
        let reference = run_once(pool, Kernels::Reference, &mean, &var).map(to_vec);
        let fused = run_once(pool, Kernels::Fused, &mean, &var).map(to_vec);
        if fused
            .iter()
            .chain(&reference)
            .flatten()
            .any(|x| !x.is_finite())
        {
            return Err(format!("perf-pool: non-finite moments or gradients on {input:?}").into());
        }
        let (mut t_ref, mut t_fused) = (Vec::new(), Vec::new());
        for _ in 0..o.rounds {
            for (kernels, times) in [
                (Kernels::Reference, &mut t_ref),
                (Kernels::Fused, &mut t_fused),
            ] {
                let start = Instant::now();
                // Read one sum of each gradient back, so that a lazy backend finishes the work
                // inside the timer (not the whole tensors: their copy would dilute the ratio).
                let [_, _, dm, dv] = run_once(pool, kernels, &mean, &var);
                to_vec(dm.sum() + dv.sum());
                times.push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
        let median = |t: &mut Vec<f64>| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        };
        let (reference_ms, fused_ms) = (median(&mut t_ref), median(&mut t_fused));
        let row = PoolRow {
            input,
            kernel,
            stride,
            reference_ms,
            fused_ms,
            speedup: reference_ms / fused_ms,
            max_rel_diff_values: rel_diff(&fused[0], &reference[0])
                .max(rel_diff(&fused[1], &reference[1])),
            max_rel_diff_grads: rel_diff(&fused[2], &reference[2])
                .max(rel_diff(&fused[3], &reference[3])),
        };
        eprintln!(
            "[{input:?}, {kernel}×{kernel} stride {stride}] reference {reference_ms:.1} ms, \
             fused {fused_ms:.1} ms: {:.2}×",
            row.speedup
        );
        rows.push(row);
    }
    write_report(&folder, o, &rows, start.elapsed().as_secs_f64())?;
    Ok(rows)
}

fn write_report(
    folder: &crate::runner::OutFolder,
    o: &PoolOptions,
    rows: &[PoolRow],
    wall: f64,
) -> Result<(), Box<dyn Error>> {
    let mut md = format!(
        "# Max pooling by moments: fused kernel vs composition of burn ops\n\n\
         Forward and backward of Clark's max over each window (the loss `Σ E + ½ Σ Var`, the \
         sums of its gradients read back), inputs `N(0, 1)` means and `U(0.01, 1)` variances, seed {seed}, \
         backend `{backend}`; median of {r} rounds, the two paths interleaved. Speed-up = \
         reference time / fused time in this run; differences relative to the largest \
         magnitude of each output or gradient.\n\n\
         | input `[S, B, C, H, W]` | window | reference (ms) | fused (ms) | speed-up | \
         largest difference, values | largest difference, gradients |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
        seed = o.seed,
        backend = bnn_burn::backend_name(),
        r = o.rounds,
    );
    for r in rows {
        md += &format!(
            "| {:?} | {k}×{k}, stride {} | {:.1} | {:.1} | {:.2}× | {:.1e} | {:.1e} |\n",
            r.input,
            r.stride,
            r.reference_ms,
            r.fused_ms,
            r.speedup,
            r.max_rel_diff_values,
            r.max_rel_diff_grads,
            k = r.kernel,
        );
    }
    folder.write("perf-pool.md", md.as_bytes())?;
    let record = crate::experiment::record("perf-pool", o, wall, &rows, serde_json::json!({}));
    folder.write_record("perf-pool.json", &record)?;
    println!("{md}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_options_are_refused_before_any_work() {
        let dir = std::env::temp_dir().join("bnn-perf-pool-bad");
        let o = PoolOptions {
            out: dir.clone(),
            rounds: 0,
            seed: 0,
            batch: 1,
        };
        let err = run(&o).unwrap_err().to_string();
        assert!(err.contains("--rounds"), "{err}");
        assert!(!dir.join("perf-pool.md").exists());
    }

    #[test]
    fn a_small_run_times_both_paths_and_they_agree() {
        let dir = std::env::temp_dir().join(format!("bnn-perf-pool-{}", std::process::id()));
        let o = PoolOptions {
            out: dir.clone(),
            rounds: 1,
            seed: 3,
            batch: 1,
        };
        let rows = run(&o).unwrap();
        assert_eq!(rows.len(), 3);
        for r in &rows {
            assert!(r.reference_ms > 0.0 && r.fused_ms > 0.0, "{r:?}");
            assert!(
                r.max_rel_diff_values < 1e-4 && r.max_rel_diff_grads < 1e-4,
                "{r:?}"
            );
        }
        assert!(
            std::fs::read_to_string(dir.join("perf-pool.md"))
                .unwrap()
                .contains("speed-up")
        );
        std::fs::remove_dir_all(dir).ok();
    }
}
