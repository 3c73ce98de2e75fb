//! Chapter example, Brack (2022) ch. 5, Table 5.1: variational families on the eight-schools
//! model (non-centred, 10 unconstrained parameters). Mean-field, full-rank, and planar, radial
//! and IAF flows on a mean-field base, each fitted by the ELBO; then each `q` judged by its ELBO
//! and PSIS `k̂` from fresh draws, beside the published values and the exact log evidence (the
//! ELBO's ceiling).
//!
//! `cargo run --release --example brack_ch5_eight_schools [-- --steps 4,8 --iterations 5000
//! --model centred]`
//! (the bench's `eight-schools` harness runs the whole table with replicates).

use bnn_burn::inference::{
    EightSchools, FlatFamily, FlowConfig, FlowKind, LogDensity, ViConfig, evaluate, fit,
    flat_at_zero,
};
use bnn_burn::posterior::{FullRankConfig, MeanFieldConfig, ScaleInit};
use bnn_burn::training_device;
use std::error::Error;

/// Brack (2022) Table 5.1: (family, K, ELBO, k̂).
const PUBLISHED: [(&str, usize, f64, f64); 14] = [
    ("mean-field", 0, -33.41, 0.87),
    ("full-rank", 0, -32.60, 0.82),
    ("planar", 4, -33.31, 0.84),
    ("planar", 8, -32.93, 0.80),
    ("planar", 16, -32.25, 0.73),
    ("planar", 32, -31.84, 0.65),
    ("radial", 4, -37.73, 0.90),
    ("radial", 8, -37.66, 0.89),
    ("radial", 16, -34.46, 0.84),
    ("radial", 32, -32.36, 0.74),
    ("IAF", 4, -31.53, 0.57),
    ("IAF", 8, -31.53, 0.59),
    ("IAF", 16, -31.61, 0.54),
    ("IAF", 32, -31.67, 0.50),
];

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() -> Result<(), Box<dyn Error>> {
    let steps: Vec<usize> = arg("--steps")
        .unwrap_or_else(|| "4,8".into())
        .split(',')
        .map(|s| s.trim().parse())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--steps: a comma-separated list of flow lengths ({e})"))?;
    let iterations: usize = arg("--iterations")
        .map(|s| s.parse())
        .transpose()
        .map_err(|e| format!("--iterations: a whole number ({e})"))?
        .unwrap_or(5000);
    let lr: f64 = arg("--lr")
        .map(|s| s.parse())
        .transpose()
        .map_err(|e| format!("--lr: a number ({e})"))?
        .unwrap_or(5e-3);
    let model = match arg("--model").as_deref() {
        None | Some("non-centred") => EightSchools::default(),
        Some("centred") => EightSchools::centred(),
        Some(other) => return Err(format!("--model {other}: use centred or non-centred").into()),
    };
    let device = training_device();
    println!(
        "eight schools ({}): D = {}, ln p(y) = {:.2} (exact; every ELBO lies below it)\n",
        if model.centred {
            "centred"
        } else {
            "non-centred"
        },
        model.dim(),
        model.log_evidence()
    );
    println!(
        "{:<11} {:>3} {:>7} {:>9} {:>9} {:>6} {:>6} {:>6}",
        "family", "K", "params", "ELBO", "published", "k̂", "pub.", "secs"
    );
    let config = ViConfig::new()
        .with_iterations(iterations)
        .with_samples(32)
        .with_learning_rate(lr)
        .with_seed(1);
    let scale = ScaleInit::new().with_rho(0.0).with_rho_std(0.0);
    let mut fits: Vec<(&str, usize)> = vec![("mean-field", 0), ("full-rank", 0)];
    for kind in ["planar", "radial", "IAF"] {
        fits.extend(steps.iter().map(|&k| (kind, k)));
    }
    for (family, k) in fits {
        let start = std::time::Instant::now();
        device.seed(7);
        let (params, report) = match family {
            "mean-field" => {
                let q = flat_at_zero(&MeanFieldConfig::new().with_scale(scale), 10, &device)?;
                run(&model, q, &config)?
            }
            "full-rank" => {
                let q = flat_at_zero(&FullRankConfig::new().with_scale(scale), 10, &device)?;
                run(&model, q, &config)?
            }
            kind => {
                let kind = match kind {
                    "planar" => FlowKind::Planar,
                    "radial" => FlowKind::Radial,
                    _ => FlowKind::Iaf { hidden: 110 },
                };
                let q = FlowConfig::new(kind, k).init(10, &device)?;
                run(&model, q, &config)?
            }
        };
        let published = PUBLISHED
            .iter()
            .find(|p| p.0 == family && p.1 == k)
            .expect("a published row");
        println!(
            "{:<11} {:>3} {:>7} {:>9.2} {:>9.2} {:>6.2} {:>6.2} {:>6.1}",
            family,
            if k == 0 { "–".into() } else { k.to_string() },
            params,
            report.0,
            published.2,
            report.1,
            published.3,
            start.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// Fits `q`, then its parameter count, ELBO and `k̂` from 100 000 fresh draws.
fn run<Q: FlatFamily>(
    model: &EightSchools,
    q: Q,
    config: &ViConfig,
) -> Result<(usize, (f64, f64)), Box<dyn Error>> {
    let params = q.num_params();
    let fitted = fit(model, q, config)?;
    let report = evaluate(model, &fitted.family, 100_000)?;
    Ok((params, (report.elbo, report.psis.k_hat)))
}
