use super::*;
use clap::Parser;

#[test]
fn widths_give_about_a_thousand_weights() {
    let widths: Vec<usize> = (1..=4).map(|d| width_for(d, 1000)).collect();
    assert_eq!(widths, vec![250, 30, 21, 18]);
    for d in 1..=10 {
        let w = width_for(d, 1000);
        let count = (d - 1) * w * w + 4 * w;
        assert!(
            (count as f64 - 1000.0).abs() < 0.15 * 1000.0,
            "{d}: {w} → {count}"
        );
    }
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    o: MoonsHmcOptions,
}

#[test]
fn bad_options_are_named_and_a_small_grid_runs() {
    let parse = |args: &[&str]| {
        let mut all = vec!["moons"];
        all.extend_from_slice(args);
        Cli::parse_from(all).o
    };
    let err = parse(&["--out", "x", "--activation", "tanh"])
        .check()
        .unwrap_err();
    assert!(err.contains("--activation"), "{err}");
    let err = parse(&["--out", "x", "--block", "1000"])
        .check()
        .unwrap_err();
    assert!(err.contains("--block 1000"), "{err}");
    let err = parse(&["--out", "x", "--depth", "11"]).check().unwrap_err();
    assert!(err.contains("--depth 11"), "{err}");
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 104);
    let dir = std::env::temp_dir().join(format!("bnn-moons-{}", std::process::id()));
    let o = parse(&[
        "--out",
        dir.to_str().unwrap(),
        "--activation",
        "relu",
        "--depth",
        "1",
        "--weights",
        "40",
        "--warmup",
        "40",
        "--draws",
        "40",
        "--block",
        "5",
        "--vi-iterations",
        "300",
        "--train-rows",
        "100",
        "--test-rows",
        "100",
    ]);
    let rows = run(&o).unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!((r.width, r.dim), (10, 10 * 2 + 10 + 10 * 2 + 2));
    // Ten ReLU units separate the moons well beyond chance, and the draws move.
    assert!(r.accuracy > 75.0, "{r:?}");
    assert!(r.acceptance > 20.0 && r.acceptance <= 100.0, "{r:?}");
    assert!(
        r.blocks.iter().all(|b| b.e_kl.is_finite() && b.e_kl >= 0.0),
        "{r:?}"
    );
    let md = std::fs::read_to_string(dir.join("moons-hmc.md")).unwrap();
    assert!(md.contains("| relu | 1 | 10 |"), "{md}");
    std::fs::remove_dir_all(&dir).unwrap();
}
