use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    o: DynamicsOptions,
}

fn parse(args: &[&str]) -> DynamicsOptions {
    let mut all = vec!["dynamics"];
    all.extend_from_slice(args);
    Cli::parse_from(all).o
}

/// Bad flags are named before any work; a small run fills every row it asks for (a test
/// error, or `None` where the paths diverged), and row v trains nothing.
#[test]
fn bad_options_are_named_and_a_small_run_scores_every_row() {
    for (args, flag) in [
        (&["--out", "x", "--knowledge", "sigma"][..], "--knowledge"),
        (&["--out", "x", "--objective", "elbo"][..], "--objective"),
        (&["--out", "x", "--samples", "0"][..], "--samples 0"),
        (&["--out", "x", "--lr", "0"][..], "--lr 0"),
    ] {
        let err = parse(args).check().unwrap_err();
        assert!(err.contains(flag), "{err}");
    }
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 115);
    let dir = std::env::temp_dir().join(format!("bnn-dynamics-{}", std::process::id()));
    let o = parse(&[
        "--out",
        dir.to_str().unwrap(),
        "--quick",
        "--repetitions",
        "1",
        "--knowledge",
        "none",
        "--knowledge",
        "kappa",
        "--knowledge",
        "full",
        "--samples",
        "2",
        "--test-samples",
        "4",
    ]);
    let rows = run(&o).unwrap();
    // none under the six methods, kappa under the four SDE methods, full once.
    assert_eq!(rows.len(), 11);
    for r in &rows {
        assert!(r.test_mse.is_none_or(|m| m.is_finite() && m > 0.0), "{r:?}");
        assert_eq!(r.test_mse.is_some(), r.test_ll.is_some(), "{r:?}");
        let sgld = r.objective == "d-bnn-sgld";
        if !sgld {
            assert_eq!(r.final_loss.is_none(), r.knowledge == "full", "{r:?}");
        }
        // Theorem 1's bound after every variational SDE fit: positive.
        let trained_sde = r.knowledge != "full" && !is_forecaster(&r.objective) && !sgld;
        assert_eq!(r.risk_bound.is_some(), trained_sde, "{r:?}");
        assert!(r.risk_bound.is_none_or(|b| b > 0.0), "{r:?}");
    }
    assert!(
        rows.iter()
            .any(|r| r.objective == "vlstm" && r.test_mse.is_some())
    );
    // The black box and the true equations stay finite over the test horizon.
    for k in ["none", "full"] {
        assert!(
            rows.iter()
                .filter(|r| r.knowledge == k)
                .all(|r| r.test_mse.is_some())
        );
    }
    let md = std::fs::read_to_string(dir.join("dynamics.md")).unwrap();
    assert!(md.contains("| none | E-Bayes | 1 |"), "{md}");
    assert!(md.contains("none trained"), "{md}");
    assert!(md.contains("| none | variational LSTM | 1 |"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The known drift is Lorenz's equations where γ says so and 0 elsewhere.
#[test]
fn the_known_drift_is_masked_lorenz() {
    let device = bnn_burn::device();
    let h = matrix(&[1.0, 2.0, 3.0], 3, &device).reshape([1, 1, 3]);
    let prior = KnownLorenz {
        known: [true, false, true],
        zeta: 10.0,
        kappa: 28.0,
        rho: 2.0,
    };
    let f = to_vec(prior.drift(h, 0.0));
    // ζ(y − x) = 10; the second is masked; xy − ρz = 2 − 6 = −4.
    assert_eq!(f, [10.0, 0.0, -4.0]);
}

/// The scores of sampled paths: the mean's squared error and a Gaussian of the paths' mean
/// and (unbiased) variance.
#[test]
fn path_scores_are_the_mean_error_and_the_gaussian_log_likelihood() {
    let device = bnn_burn::device();
    // Two samples, one sequence, one time, one coordinate: 1 and 3; the truth 4.
    let paths = matrix(&[1.0, 3.0], 1, &device).reshape([2, 1, 1, 1]);
    let truth = matrix(&[4.0], 1, &device).reshape([1, 1, 1]);
    let (mse, ll) = path_scores(paths, truth);
    // Mean 2, variance ((1 − 2)² + (3 − 2)²)/1 = 2.
    assert!((mse.unwrap() - 4.0).abs() < 1e-6);
    let want = -0.5 * (4.0 / 2.0 + (2.0 * 2.0 * std::f64::consts::PI).ln());
    assert!((ll.unwrap() - want).abs() < 1e-5);
    let nan = matrix(&[1.0, f64::NAN], 1, &device).reshape([2, 1, 1, 1]);
    let truth = matrix(&[4.0], 1, &device).reshape([1, 1, 1]);
    assert_eq!(path_scores(nan, truth), (None, None));
}

/// Table 6.3's run: every method timed, E-Bayes the unit; bad settings named first.
#[test]
fn every_method_of_table_6_3_is_timed() {
    let dir = std::env::temp_dir().join(format!("bnn-perf-sde-{}", std::process::id()));
    let mut o = costs::SdeCostOptions {
        out: dir.clone(),
        rounds: 0,
        hidden: 4,
        seed: 3,
    };
    assert!(costs::run(&o).unwrap_err().to_string().contains("--rounds"));
    o.rounds = 1;
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 116);
    let rows = costs::run(&o).unwrap();
    assert_eq!(rows.len(), 8);
    assert!(rows.iter().all(|r| r.ms_per_iteration > 0.0), "{rows:?}");
    assert_eq!(rows[0].ratio, 1.0);
    let md = std::fs::read_to_string(dir.join("perf-sde.md")).unwrap();
    assert!(md.contains("| D-BNN (SGLD) | O(MTF + MTDL + W) |"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);
}
