use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    o: LvHmcOptions,
}

fn parse(args: &[&str]) -> LvHmcOptions {
    let mut all = vec!["lv-hmc"];
    all.extend_from_slice(args);
    Cli::parse_from(all).o
}

#[test]
fn bad_options_are_named_and_a_small_run_decomposes_both_ways() {
    for (args, flag) in [
        (&["--out", "x", "--toy", "sine"][..], "--toy"),
        (&["--out", "x", "--hidden", "0"][..], "--hidden 0"),
        (&["--out", "x", "--n-w", "2000"][..], "--n-w 2000"),
        (&["--out", "x", "--k", "300"][..], "--k 300"),
    ] {
        let err = parse(args).check().unwrap_err();
        assert!(err.contains(flag), "{err}");
    }
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 107);
    let dir = std::env::temp_dir().join(format!("bnn-lv-hmc-{}", std::process::id()));
    let o = parse(&[
        "--out",
        dir.to_str().unwrap(),
        "--quick",
        "--toy",
        "bimodal",
        "--hidden",
        "3",
        "--epochs",
        "5",
        "--warmup",
        "10",
        "--draws",
        "10",
        "--max-depth",
        "4",
    ]);
    let rows = run(&o).unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    // [x, z] → 3 → 3 → 1, and one latent per training row.
    assert_eq!((r.weights, r.latents), (2 * 3 + 3 + 3 * 3 + 3 + 3 + 1, 750));
    for c in [&r.alpha, &r.hmc] {
        assert_eq!(c.epistemic_entropy.len(), GRID_POINTS);
        assert!(c.aleatoric_entropy.iter().all(|v| v.is_finite()), "{c:?}");
    }
    assert!(r.acceptance > 0.0 && r.acceptance <= 100.0, "{r:?}");
    assert!(
        r.max_rhat_f.is_some_and(|v| v.is_finite() && v > 0.5),
        "{r:?}"
    );
    let md = std::fs::read_to_string(dir.join("lv-hmc.md")).unwrap();
    assert!(md.contains("| bimodal | 3 | 25 + 750 | NUTS |"), "{md}");
    assert!(dir.join("lv-hmc.svg").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn functions_at_the_prior_latent_mean_are_in_original_units() {
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 108);
    let t = toys(0).into_iter().find(|t| t.name == "bimodal").unwrap();
    let train: RegressionData = t.train.clone().into();
    let fit = lv::fit(&train, 3, 1, 5).unwrap();
    let p = fit.model.net.flat_layout().numel();
    // Every weight 0: the standardised output is 0, the targets' mean in original units; the
    // head's bias (the layout's last entry) at 1 adds one target std.
    let zero = vec![0.0; p];
    let mut bias = zero.clone();
    bias[p - 1] = 1.0;
    let x = [-1.0, 0.0, 2.5];
    let f = fit.functions(&x, &[zero, bias]).unwrap();
    let (m, s) = (fit.sy.mean[0], fit.sy.std[0]);
    for (a, b) in f[0].iter().zip(&f[1]) {
        assert!((a - m).abs() < 1e-5 * (1.0 + m.abs()), "{f:?}");
        assert!((b - m - s).abs() < 1e-5 * (1.0 + m.abs() + s), "{f:?}");
    }
    let err = fit
        .functions(&x, &[vec![0.0; p + 1]])
        .unwrap_err()
        .to_string();
    assert!(err.contains("weight row"), "{err}");
}
