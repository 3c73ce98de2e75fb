use super::*;
use clap::Parser;

fn row(depth: usize, family: &str, seed: usize, ce: f64) -> Row {
    Row {
        depth,
        family: family.into(),
        seed,
        weights: 35,
        params: 70,
        epochs: 100,
        best_epoch: 70,
        test_ce: ce,
        test_ce_100: ce,
        test_accuracy: 0.9,
        train_elbo: -1.0,
        dropped_draws: 0,
        seconds: 1.0,
    }
}

#[test]
fn a_cell_keeps_the_best_seeds_and_the_verdict_follows_the_thesis() {
    // Depth 1: full lower by far (the claim holds); depth 2: full lower by far (the claim,
    // equality, fails). The worst seed of each cell (a failed run) is left out by --best 3.
    let mut rows = Vec::new();
    for (depth, full_ce) in [(1, 0.2), (2, 0.2)] {
        for (i, ce) in [0.40, 0.41, 0.39, 5.0].into_iter().enumerate() {
            rows.push(row(depth, "diagonal", i, ce));
            rows.push(row(
                depth,
                "full",
                i,
                if ce > 1.0 { ce } else { full_ce + ce - 0.4 },
            ));
        }
    }
    let c = cell(&rows, 1, "diagonal", 3).unwrap();
    assert_eq!(c.seeds, 4);
    assert!((c.ce.0 - 0.40).abs() < 1e-12, "{}", c.ce.0);
    let se = c.ce.1.unwrap();
    assert!((se - (0.0001f64 / 3.0).sqrt()).abs() < 1e-9, "{se}");
    let md = table(&rows, 3);
    let full_lines: Vec<&str> = md.lines().filter(|l| l.contains("| full |")).collect();
    assert!(full_lines[0].ends_with("| yes |"), "{md}");
    assert!(full_lines[1].ends_with("| no |"), "{md}");
    assert!(cell(&rows, 3, "full", 3).is_none());
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    o: IrisCovarianceOptions,
}

#[test]
fn bad_options_are_named_before_any_work() {
    let parse = |args: &[&str]| {
        let mut all = vec!["iris", "--out", "unused"];
        all.extend_from_slice(args);
        Cli::parse_from(all).o.check()
    };
    assert!(parse(&[]).is_ok());
    let err = parse(&["--seeds", "5"]).unwrap_err();
    assert!(parse(&["--seeds", "10"]).is_ok());
    assert!(err.contains("--best 10"), "{err}");
    let err = parse(&["--family", "low-rank"]).unwrap_err();
    assert!(err.contains("--family"), "{err}");
    let err = parse(&["--depth", "0"]).unwrap_err();
    assert!(err.contains("--depth 0"), "{err}");
}

#[test]
fn the_networks_have_the_printed_widths_and_a_full_fit_runs() {
    let device = bnn_burn::training_device();
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 103);
    let counts: Vec<usize> = (1..=4)
        .map(|d| network(d, &device).unwrap().flat_layout().numel())
        .collect();
    // 4 → 4ᴸ → 3 with biases: 20 + 20(L − 1) + 15.
    assert_eq!(counts, vec![35, 55, 75, 95]);
    let dir = std::env::temp_dir().join(format!("bnn-iris-{}", std::process::id()));
    let out = dir.to_str().unwrap();
    let cli = Cli::parse_from([
        "iris", "--depth", "1", "--seeds", "2", "--best", "1", "--epochs", "200", "--out", out,
    ]);
    let rows = run(&cli.o).unwrap();
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert!(r.test_ce.is_finite() && r.test_ce_100.is_finite(), "{r:?}");
        assert_eq!(r.params, if r.family == "full" { 35 + 35 * 35 } else { 70 });
    }
    // 200 epochs of AMSGrad at 10⁻³ move the fit: every 100-draw cross-entropy is below the
    // uniform predictive's ln 3.
    assert!(rows.iter().all(|r| r.test_ce_100 < 3f64.ln()), "{rows:?}");
    let md = std::fs::read_to_string(dir.join("iris-covariance.md")).unwrap();
    // One kept seed has no standard error: no verdict.
    assert!(
        md.lines()
            .any(|l| l.contains("| full |") && l.ends_with("|  |  |")),
        "{md}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
