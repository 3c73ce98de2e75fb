use super::*;
use crate::continual::tests::toy_family;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    o: ActiveOptions,
}

fn parse(args: &[&str]) -> ActiveOptions {
    let mut all = vec!["active"];
    all.extend_from_slice(args);
    Cli::parse_from(all).o
}

#[test]
fn bad_options_are_named_and_the_linear_toy_debiases_its_risk() {
    for (args, flag) in [
        (&["--out", "x", "--study", "iris"][..], "--study"),
        (
            &["--out", "x", "--trajectories", "1"][..],
            "--trajectories 1",
        ),
        (&["--out", "x", "--block", "0"][..], "--block 0"),
        (&["--out", "x", "--temperature=-1"][..], "--temperature"),
        (&["--out", "x", "--budget", "102"][..], "--budget 102"),
        (&["--out", "x", "--every", "0"][..], "--every 0"),
    ] {
        let err = parse(args).check().unwrap_err();
        assert!(err.contains(flag), "{err}");
    }
    let dir = std::env::temp_dir().join(format!("bnn-active-bench-{}", std::process::id()));
    let o = parse(&[
        "--out",
        dir.to_str().unwrap(),
        "--trajectories",
        "300",
        "--block",
        "150",
        "--budget",
        "30",
        "--temperature",
        "8",
    ]);
    let rows = run(&o).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].checkpoints, [10, 20, 30]);
    let toy = linear::LinearToy::new(0);
    // At M = 30: the plain mean is biased by many standard errors, LURE and PURE are not
    // (4 s.e.: three estimators × three Ms checked at once).
    let mut at30 = Summaries::default();
    for r in &rows {
        at30.merge_with(&r.estimates[2]);
    }
    let z = |r: &Running| (r.mean - toy.truth) / r.se();
    assert_eq!(at30.plain.n, 300);
    assert!(z(&at30.plain).abs() > 6.0, "plain z {}", z(&at30.plain));
    assert!(z(&at30.lure).abs() < 4.0, "LURE z {}", z(&at30.lure));
    assert!(z(&at30.pure).abs() < 4.0, "PURE z {}", z(&at30.pure));
    let md = std::fs::read_to_string(dir.join("active.md")).unwrap();
    assert!(md.contains("| 30 |"), "{md}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn least_squares_recovers_a_line_and_weights_move_it() {
    let x = [0.0, 1.0, 2.0, 3.0];
    let y = [1.0, 3.0, 5.0, 7.0];
    let (a, b) = linear::fit_line(&x, &y, &[0, 1, 2, 3], None);
    assert!((a - 1.0).abs() < 1e-12 && (b - 2.0).abs() < 1e-12);
    // Off the line at x = 3: weighting that row up pulls the fit towards it.
    let y = [1.0, 3.0, 5.0, 9.0];
    let plain = linear::fit_line(&x, &y, &[0, 1, 2, 3], None);
    let heavy = linear::fit_line(&x, &y, &[0, 1, 2, 3], Some(&[1.0, 1.0, 1.0, 10.0]));
    assert!(heavy.1 > plain.1);
    // One point: the constant through it.
    assert_eq!(linear::fit_line(&x, &y, &[2], None), (5.0, 0.0));
}

#[test]
fn merged_summaries_equal_the_whole_samples() {
    let x: Vec<f64> = (0..57)
        .map(|i| ((i * 37) % 11) as f64 * 0.3 - 1.0)
        .collect();
    let (mut whole, mut a, mut b) = (Running::default(), Running::default(), Running::default());
    for (i, v) in x.iter().enumerate() {
        whole.push(*v);
        if i < 20 { a.push(*v) } else { b.push(*v) }
    }
    a.merge(&b);
    let (m, se) = bnn_burn::metrics::mean_and_standard_error(&x);
    assert_eq!(a.n, 57);
    assert!((a.mean - m).abs() < 1e-12 && (whole.mean - m).abs() < 1e-12);
    assert!((a.se() - se.unwrap()).abs() < 1e-12 && (whole.se() - se.unwrap()).abs() < 1e-12);
}

#[test]
fn the_mnist_studys_bad_options_are_named_before_any_work() {
    for (args, flag) in [
        (&["--dataset", "cifar"][..], "--dataset cifar"),
        (&["--acquisition", "coreset"][..], "--acquisition coreset"),
        (&["--runs", "0"][..], "--runs 0"),
        (&["--labels", "50"][..], "--labels 50"),
        (&["--labels", "20000"][..], "--labels 20000"),
        (&["--learning-rate", "0"][..], "--learning-rate"),
    ] {
        let mut all = vec!["--out", "x", "--study", "mnist"];
        all.extend_from_slice(args);
        let err = run_mnist(&parse(&all)).unwrap_err().to_string();
        assert!(err.contains(flag), "{args:?}: {err}");
    }
    // The published rows are Table 4.1's and 4.2's: the four acquisitions on both sets, the
    // ablations on Fashion-MNIST.
    assert_eq!(PUBLISHED.iter().filter(|p| p.0 == "mnist").count(), 4);
    assert!(PUBLISHED.iter().all(|p| ACQUISITIONS.contains(&p.1)));
}

#[test]
fn the_mnist_table_sets_each_acquisition_beside_the_thesis_and_beside_random_in_its_run() {
    let row = |acquisition: &str, run, average_error, final_error| MnistRow {
        task: MnistTask {
            acquisition: acquisition.into(),
            run,
        },
        curve: vec![(400, final_error)],
        average_error,
        final_error,
        rewards: Vec::new(),
        seconds: 1.0,
    };
    let rows = [
        row("ral", 0, 28.0, 23.0),
        row("ral", 1, 29.0, 24.0),
        row("ral-reinit", 0, 30.0, 25.0),
    ];
    let md = mnist_table(&rows, "fashion");
    // RAL: mean 28.5 ± 0.5 against 28.51 ± 0.71/√5, rounding 0.01/√12 beside them.
    let se = 0.5f64.hypot(0.71 / 5f64.sqrt()).hypot(0.01 / 12f64.sqrt());
    let z = (28.51 - 28.5) / se;
    let ral = md.lines().find(|l| l.starts_with("| ral |")).unwrap();
    assert!(
        ral.contains(&format!("| 28.50 ± 0.50 | 28.51 ± 0.71 | {z:+.1} |")),
        "{ral}"
    );
    // One run has no standard error, so no z; acquisitions without rows are left out.
    let reinit = md
        .lines()
        .find(|l| l.starts_with("| ral-reinit |"))
        .unwrap();
    assert!(reinit.contains("| 28.90 ± 0.10 | – |"), "{reinit}");
    assert_eq!(md.lines().take_while(|l| !l.is_empty()).count(), 4, "{md}");
    // Paired with random's rows of the same run: run 1 only here.
    let rows = [
        rows[0].clone(),
        rows[1].clone(),
        row("random", 1, 30.5, 26.0),
        row("random", 2, 40.0, 40.0),
    ];
    let paired = paired_table(&rows);
    assert!(
        paired.contains("| ral | 1 | -1.50 ± – | -2.00 ± – |"),
        "{paired}"
    );
    assert!(!paired.contains("| random |") && !paired.contains("ral-reinit"));
    assert!(mnist_table(&rows, "fashion").ends_with(&paired));
}

#[test]
fn the_depeweg_studys_bad_options_are_named_before_any_work() {
    for (args, flag) in [
        (&["--problem", "lorenz"][..], "--problem lorenz"),
        (&["--acquisition", "bald"][..], "--acquisition bald"),
        (&["--retrain", "often"][..], "--retrain often"),
        (&["--iterations", "0"][..], "--iterations 0"),
        (&["--iterations", "200"][..], "--iterations 200"),
        (&["--draws", "5", "--neighbour", "5"][..], "--draws 5"),
        (&["--learning-rate", "0"][..], "--learning-rate"),
    ] {
        let mut all = vec!["--out", "x", "--study", "depeweg"];
        all.extend_from_slice(args);
        let err = run_depeweg(&parse(&all)).unwrap_err().to_string();
        assert!(err.contains(flag), "{args:?}: {err}");
    }
    assert!(LV_PUBLISHED.iter().all(|p| PROBLEMS.contains(&p.0)));
}

/// A small run on the heteroscedastic toy: the given training rows come first, each round
/// acquires from the uniform pool, a resumed run returns the finished rows unchanged.
#[test]
fn the_depeweg_study_starts_from_its_training_set_and_acquires_from_the_pool() {
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 109);
    let dir = std::env::temp_dir().join(format!("bnn-active-depeweg-{}", std::process::id()));
    let args = [
        "--out",
        dir.to_str().unwrap(),
        "--study",
        "depeweg",
        "--problem",
        "heteroscedastic",
        "--acquisition",
        "epistemic",
        "--acquisition",
        "random",
        "--acquisition",
        "gp",
        "--runs",
        "1",
        "--train-points",
        "60",
        "--pool",
        "30",
        "--iterations",
        "2",
        "--per-round",
        "3",
        "--epochs",
        "40",
        "--round-epochs",
        "10",
        "--draws",
        "10",
        "--neighbour",
        "3",
    ];
    let rows = run_depeweg(&parse(&args)).unwrap();
    assert_eq!(rows.len(), 3);
    for r in &rows {
        let labels: Vec<usize> = r.curve.iter().map(|c| c.0).collect();
        assert_eq!(labels, [60, 63, 66], "{:?}", r.task);
        assert!(r.curve.iter().all(|c| c.1.is_finite()));
        assert_eq!(r.acquired.len(), 6);
        // The pool is uniform on [−4, 4].
        assert!(r.acquired.iter().all(|x| x.len() == 1 && x[0].abs() <= 4.0));
        assert!(r.pick_distance > 0.0 && r.oracle_ll.is_some());
    }
    assert_ne!(rows[0].acquired, rows[1].acquired);
    let mut resumed = args.to_vec();
    resumed.push("--resume");
    let again = run_depeweg(&parse(&resumed)).unwrap();
    assert_eq!(again, rows);
    let md = std::fs::read_to_string(dir.join("active.md")).unwrap();
    assert!(md.contains("| heteroscedastic | epistemic | 1 |"), "{md}");
    assert!(
        md.contains("| heteroscedastic | gp | 1 |") && md.contains("-2.09 ± 0.02"),
        "{md}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_farquhar_studys_bad_options_are_named_before_any_work() {
    for (args, flag) in [
        (&["--dataset", "cifar"][..], "--dataset cifar"),
        (&["--family", "ensemble"][..], "--family ensemble"),
        (&["--evaluate-every", "0"][..], "--evaluate-every 0"),
        (&["--labels", "5"][..], "--labels 5"),
        (&["--proposal-temperature=-1"][..], "--proposal-temperature"),
        (&["--steps", "0"][..], "--steps 0"),
    ] {
        let mut all = vec!["--out", "x", "--study", "farquhar"];
        all.extend_from_slice(args);
        let err = parse(&all).check_farquhar().unwrap_err();
        assert!(err.contains(flag), "{args:?}: {err}");
    }
}

/// A small trajectory per family on toy images: one label per round, the three risks' models
/// every 3 labels, the risk estimates beside the pool's, and active testing's errors.
#[test]
fn the_farquhar_study_evaluates_the_three_risks_and_active_testing() {
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 110);
    let dir = std::env::temp_dir().join(format!("bnn-active-farquhar-{}", std::process::id()));
    let o = parse(&[
        "--out",
        dir.to_str().unwrap(),
        "--study",
        "farquhar",
        "--quick",
        "--runs",
        "1",
        "--pool",
        "60",
        "--test-train",
        "40",
        "--test-images",
        "150",
        "--initial",
        "4",
        "--labels",
        "10",
        "--steps",
        "20",
        "--test-repeats",
        "50",
    ]);
    let family = bnn_datasets::MnistFamily::Mnist;
    let rows = run_farquhar_on(&o, family, toy_family(3000, 1), toy_family(200, 2)).unwrap();
    assert_eq!(rows.len(), 2);
    for r in &rows {
        let labels: Vec<usize> = farquhar::curve_of(r, "nll_lure")
            .iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(labels, [7, 10], "{:?}", r.task);
        let last = &r.evals.last().unwrap().metrics;
        for k in [
            "nll_plain",
            "nll_pure",
            "nll_lure",
            "risk_plain",
            "risk_lure",
        ] {
            assert!(last[k].is_finite() && last[k] >= 0.0, "{k}: {last:?}");
        }
        assert!(last["risk_pool"] > 0.0);
        assert!((0.0..=100.0).contains(&last["acc_plain"]));
        // Active testing at 10, 30 and 100 of the 150 test images.
        assert_eq!(r.testing.len(), 3);
        assert!(r.testing.iter().all(|t| t.lure >= 0.0 && t.uniform > 0.0));
        assert!(r.test_risk > 0.0);
    }
    let md = std::fs::read_to_string(dir.join("active.md")).unwrap();
    assert!(
        md.contains("| radial | 1 | 10 |") && md.contains("| mc-dropout | 1 | 30 |"),
        "{md}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
