use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    o: InBetweenOptions,
}

fn parse(args: &[&str]) -> InBetweenOptions {
    let mut all = vec!["in-between"];
    all.extend_from_slice(args);
    Cli::parse_from(all).o
}

#[test]
fn the_gap_summary_reads_the_grid() {
    let x = grid();
    assert_eq!(x.len(), GRID.2);
    assert!((x[1] - x[0] - 0.05).abs() < 1e-12);
    // sd 1 on the data and at the gap's ends, 3 at the gap's middle, 2 elsewhere in the gap.
    let std: Vec<f64> = x
        .iter()
        .map(|&v| match v {
            v if (v + 0.2).abs() < 1e-9 => 3.0,
            v if v > -1.4 + 1e-9 && v < 1.0 - 1e-9 => 2.0,
            _ => 1.0,
        })
        .collect();
    let s = Curve {
        mean: vec![0.0; x.len()],
        std,
    }
    .summary();
    // 47 grid points lie strictly inside (−1.4, 1.0): one at 3, the rest at 2.
    assert!(
        (s.gap_std - (3.0 + 46.0 * 2.0) / 47.0).abs() < 1e-12,
        "{s:?}"
    );
    assert_eq!(s.gap_max_std, 3.0);
    assert_eq!(s.data_std, 1.0);
    assert!((s.foong_ratio - 9.0 / 2.0).abs() < 1e-12, "{s:?}");
}

#[test]
fn curves_are_the_draws_mean_and_sample_sd() {
    let f = vec![vec![1.0, 0.0], vec![3.0, 0.0], vec![5.0, 0.0]];
    let c = curve_of(&f);
    assert_eq!(c.mean, vec![3.0, 0.0]);
    assert_eq!(c.std, vec![2.0, 0.0]);
}

#[test]
fn bad_options_are_named_and_a_small_run_measures_both_methods() {
    for (args, flag) in [
        (&["--out", "x", "--depth", "0"][..], "--depth 0"),
        (&["--out", "x", "--temperature", "0"][..], "--temperature"),
        (&["--out", "x", "--draws", "3"][..], "--draws 3"),
        (&["--out", "x", "--width", "0"][..], "--width"),
    ] {
        let err = parse(args).check().unwrap_err();
        assert!(err.contains(flag), "{err}");
    }
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 106);
    let dir = std::env::temp_dir().join(format!("bnn-in-between-{}", std::process::id()));
    let o = parse(&[
        "--out",
        dir.to_str().unwrap(),
        "--depth",
        "1",
        "--width",
        "8",
        "--per-cluster",
        "40",
        "--epochs",
        "40",
        "--batch-size",
        "20",
        "--lr",
        "0.01",
        "--warmup",
        "30",
        "--draws",
        "30",
        "--max-depth",
        "5",
    ]);
    let rows = run(&o).unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r.dim, 8 + 8 + 8 + 1);
    for (s, c) in [(&r.vi_summary, &r.vi), (&r.nuts_summary, &r.nuts)] {
        assert_eq!(c.mean.len(), GRID.2);
        assert!(c.std.iter().all(|v| v.is_finite() && *v >= 0.0), "{c:?}");
        assert!(s.gap_std > 0.0 && s.foong_ratio.is_finite(), "{s:?}");
    }
    assert!(r.acceptance > 20.0 && r.acceptance <= 100.0, "{r:?}");
    assert!(r.max_rhat_f >= 0.9, "{r:?}");
    let md = std::fs::read_to_string(dir.join("in-between.md")).unwrap();
    assert!(md.contains("| 1 | 25 | NUTS |"), "{md}");
    assert!(dir.join("in-between.svg").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
