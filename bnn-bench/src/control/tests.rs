use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    o: ControlOptions,
}

fn parse(args: &[&str]) -> ControlOptions {
    let mut all = vec!["control"];
    all.extend_from_slice(args);
    Cli::parse_from(all).o
}

#[test]
fn bad_options_are_named_and_every_column_runs_a_small_search() {
    for (args, flag) in [
        (&["--out", "x", "--column", "gp"][..], "--column"),
        (&["--out", "x", "--runs", "0"][..], "--runs 0"),
        (
            &["--out", "x", "--transitions", "10"][..],
            "--transitions 10",
        ),
        (&["--out", "x", "--policy-lr", "0"][..], "--policy-lr 0"),
    ] {
        let err = parse(args).check().unwrap_err();
        assert!(err.contains(flag), "{err}");
    }
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 111);
    let dir = std::env::temp_dir().join(format!("bnn-control-{}", std::process::id()));
    let o = parse(&[
        "--out",
        dir.to_str().unwrap(),
        "--quick",
        "--runs",
        "1",
        "--transitions",
        "200",
        "--epochs",
        "3",
        "--policy-epochs",
        "1",
        "--samples",
        "4",
        "--eval-runs",
        "20",
        "--eval-steps",
        "20",
    ]);
    let rows = run(&o).unwrap();
    assert_eq!(rows.len(), COLUMNS.len());
    for r in &rows {
        // Rewards per step lie in [−5, 0]; the model's roll-out cost in [0, 5T].
        for v in [r.reward, r.reward_before, r.reward_random] {
            assert!((-5.0..=0.0).contains(&v), "{r:?}");
        }
        assert!((0.0..=25.0).contains(&r.model_cost.0), "{r:?}");
        assert_eq!(r.skipped, 0);
    }
    // Every column's untrained policy and random paddling meet the same river.
    assert!(
        rows.iter()
            .all(|r| r.reward_random == rows[0].reward_random)
    );
    let md = std::fs::read_to_string(dir.join("control.md")).unwrap();
    for c in &COLUMNS {
        assert!(md.contains(c.name), "{md}");
    }
    assert!(md.contains("not run (no GP"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The table compares with the thesis in combined standard errors.
#[test]
fn the_table_shows_the_difference_in_standard_errors() {
    let row = |run: usize, reward: f64| Row {
        column: "alpha-0.5".into(),
        run,
        reward,
        reward_before: -3.0,
        reward_random: -3.5,
        model_cost: (10.0, 9.0),
        skipped: 0,
        train_seconds: 1.0,
        search_seconds: 1.0,
    };
    // Mean −2.40, s.e. 0.02/√3 = 0.0115 (values −2.42, −2.40, −2.38); thesis −2.37 ± 0.01:
    // (−2.40 + 2.37) / √(0.0115² + 0.01²) = −1.96.
    let md = table(&[row(0, -2.42), row(1, -2.40), row(2, -2.38)]);
    assert!(
        md.contains("| BNN+LV α=0.5 | 3 | -2.40 ± 0.01 | -2.37 ± 0.01 | -2.0 |"),
        "{md}"
    );
}
