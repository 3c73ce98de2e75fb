//! A user crate runs the UCI protocol on a method of its own through `uci::run_with`: the same
//! splits, standardisation and reports as the built-in methods. Needs no shared files.

mod common;

use bnn_bench::uci::{self, DataSet, PreparedSplit, SplitOutcome, UciMethod, UciOptions};
use std::error::Error;

/// A Gaussian at the training targets' mean and standard deviation, in original units.
struct Constant;

impl UciMethod for Constant {
    fn name(&self) -> &'static str {
        "Constant"
    }

    fn run(&self, split: &PreparedSplit) -> Result<SplitOutcome, Box<dyn Error>> {
        // The standardised training targets have mean 0 and std 1: a prediction of
        // N(0, 1) there is N(mean, std²) in original units.
        let (mean, std) = (split.y_scaler.mean[0], split.y_scaler.std[0]);
        let n = split.test_y.len() as f64;
        let z2: f64 = split
            .test_y
            .iter()
            .map(|y| ((y - mean) / std).powi(2))
            .sum();
        Ok(SplitOutcome {
            test_ll: -z2 / (2.0 * n) - std.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln(),
            test_rmse: std * (z2 / n).sqrt(),
            coverage_90: None,
            conformal_coverage_90: None,
            k_hat: None,
            detail: String::new(),
        })
    }
}

/// The constant predictor's test LL on split `k` of the set `write_set` writes, from its files
/// alone: train rows `i mod 5 ≠ k`, population standard deviation.
fn expected_ll(dir: &std::path::Path, k: usize) -> f64 {
    let text = std::fs::read_to_string(dir.join("data/data.txt")).unwrap();
    let y: Vec<f64> = text
        .lines()
        .map(|l| l.split_whitespace().nth(2).unwrap().parse().unwrap())
        .collect();
    let (test, train): (Vec<usize>, Vec<usize>) = (0..y.len()).partition(|i| i % 5 == k);
    let mean = train.iter().map(|&i| y[i]).sum::<f64>() / train.len() as f64;
    let var = train.iter().map(|&i| (y[i] - mean).powi(2)).sum::<f64>() / train.len() as f64;
    test.iter()
        .map(|&i| {
            -0.5 * (y[i] - mean).powi(2) / var - 0.5 * (2.0 * std::f64::consts::PI * var).ln()
        })
        .sum::<f64>()
        / test.len() as f64
}

#[test]
fn a_users_own_method_runs_under_the_protocol() {
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
    let base = std::env::temp_dir().join(format!("bnn-uci-own-method-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let set = base.join("myLinearSet");
    common::write_set(&set);
    let out = base.join("out");
    let mut options = UciOptions {
        datasets: vec![DataSet::parse(set.to_str().unwrap()).unwrap()],
        methods: vec![],
        splits: Some(2),
        epochs: None,
        exp: bnn_bench::runner::ExperimentArgs {
            seed: 0,
            quick: false,
        },
        data_dir: None,
        run: bnn_bench::runner::RunnerOptions::new(&out),
    };
    let rows = uci::run_with(&options, vec![Box::new(Constant)]).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].method, "Constant");
    for (k, split) in rows[0].splits.iter().enumerate() {
        let want = expected_ll(&set, k);
        assert!(
            (split.test_ll - want).abs() < 1e-9,
            "split {k}: {} vs {want}",
            split.test_ll
        );
    }
    let mean = (expected_ll(&set, 0) + expected_ll(&set, 1)) / 2.0;
    let md = std::fs::read_to_string(out.join("uci.md")).unwrap();
    assert!(
        md.contains("| Constant |") && md.contains(&format!("| {mean:.3} ± ")),
        "{md}"
    );

    // Before any work: a name none of the methods has (the error lists the user's), two
    // methods of one name, and worker processes from a program that is not the bnn-bench
    // binary. None of them creates the output folder.
    let fresh = base.join("never");
    options.run.out = fresh.clone();
    let refused = |options: &UciOptions, methods: Vec<Box<dyn UciMethod>>, wanted: &[&str]| {
        let err = uci::run_with(options, methods).unwrap_err().to_string();
        assert!(wanted.iter().all(|w| err.contains(w)), "{err}");
    };
    options.methods = vec!["MFVI".into()];
    refused(
        &options,
        vec![Box::new(Constant)],
        &["\"MFVI\"", "Constant"],
    );
    options.methods = vec![];
    let twice: Vec<Box<dyn UciMethod>> = vec![Box::new(Constant), Box::new(Constant)];
    refused(&options, twice, &["two methods are named \"Constant\""]);
    options.run.jobs = 2;
    refused(
        &options,
        vec![Box::new(Constant)],
        &["--jobs 2", "allow_worker_processes"],
    );
    assert!(!fresh.exists());
    let _ = std::fs::remove_dir_all(&base);
}
