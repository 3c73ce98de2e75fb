use super::*;
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
