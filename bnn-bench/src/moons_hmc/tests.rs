use super::analysis::{assign, dependence, w2};
use super::*;
use clap::Parser;

/// Every permutation of `0..n`.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

#[test]
fn the_assignment_is_the_cheapest_permutation_and_w2_in_one_dimension_matches_sorting() {
    let mut rng = HostNormals::new(5);
    for n in [1, 2, 5, 6] {
        for _ in 0..20 {
            let cost: Vec<f64> = (0..n * n).map(|_| rng.uniform() * 10.0).collect();
            let a = assign(&cost, n);
            let total = |p: &[usize]| (0..n).map(|i| cost[i * n + p[i]]).sum::<f64>();
            let best = permutations(n)
                .iter()
                .map(|p| total(p))
                .fold(f64::INFINITY, f64::min);
            assert!((total(&a) - best).abs() < 1e-9, "{} vs {best}", total(&a));
        }
    }
    // In one dimension the optimal coupling pairs the sorted points.
    let a: Vec<Vec<f64>> = (0..50).map(|_| vec![rng.next()]).collect();
    let b: Vec<Vec<f64>> = (0..50).map(|_| vec![2.0 * rng.next() + 1.0]).collect();
    let mut sa: Vec<f64> = a.iter().map(|p| p[0]).collect();
    let mut sb: Vec<f64> = b.iter().map(|p| p[0]).collect();
    sa.sort_by(f64::total_cmp);
    sb.sort_by(f64::total_cmp);
    let sorted = (sa
        .iter()
        .zip(&sb)
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        / 50.0)
        .sqrt();
    assert!((w2(&a, &b) - sorted).abs() < 1e-12);
}

/// `n` draws of `N(0, Σ)` for `Σ = L Lᵀ` (row-major lower `l`, `m × m`).
fn gaussian_draws(l: &[f64], m: usize, n: usize, rng: &mut HostNormals) -> Vec<Vec<f64>> {
    (0..n)
        .map(|_| {
            let e: Vec<f64> = (0..m).map(|_| rng.next()).collect();
            (0..m)
                .map(|i| (0..=i).map(|j| l[i * m + j] * e[j]).sum())
                .collect()
        })
        .collect()
}

#[test]
fn the_mean_field_errors_vanish_for_independent_weights_and_match_the_closed_form_otherwise() {
    let (m, n) = (4, 600);
    let mut rng = HostNormals::new(11);
    let block: Vec<usize> = (0..m).collect();
    // Independent weights of unequal scales: E_KL's estimate is the sampling noise of the
    // off-diagonal covariance, about m(m − 1)/(4n) nats; E_W near 0.
    let mut l = vec![0.0; m * m];
    for i in 0..m {
        l[i * m + i] = 0.5 + i as f64;
    }
    let d = dependence(&gaussian_draws(&l, m, n, &mut rng), &block, &mut rng).unwrap();
    assert!(d.e_kl < 0.02 && d.e_kl_null < 0.02, "{d:?}");
    assert!(d.e_w.abs() < 0.1, "{d:?}");
    // Equicorrelated ρ = 0.8 with unit variances: Λ_ii = (1 + (m − 2)ρ)/((1 − ρ)(1 + (m − 1)ρ)),
    // KL = ½[m Λ_ii − m − m ln Λ_ii − ln det Σ], det Σ = (1 − ρ)^(m−1) (1 + (m − 1)ρ).
    let rho: f64 = 0.8;
    let mut cov = vec![rho; m * m];
    for i in 0..m {
        cov[i * m + i] = 1.0;
    }
    let mut l = cov.clone();
    bnn_burn::linalg::dense::cholesky(&mut l, m).unwrap();
    let mf = m as f64;
    let lambda = (1.0 + (mf - 2.0) * rho) / ((1.0 - rho) * (1.0 + (mf - 1.0) * rho));
    let log_det = (mf - 1.0) * (1.0 - rho).ln() + (1.0 + (mf - 1.0) * rho).ln();
    let exact = 0.5 * (mf * lambda - mf - mf * lambda.ln() - log_det);
    let d = dependence(&gaussian_draws(&l, m, n, &mut rng), &block, &mut rng).unwrap();
    assert!((d.e_kl - exact).abs() < 0.1 * exact, "{d:?} vs {exact}");
    assert!(d.e_w > 0.2, "{d:?}");
    // Shuffling each weight's draws removes the dependence: the floor is noise.
    assert!(d.e_kl_null < 0.02, "{d:?}");
    // A block as large as the draws has a singular covariance.
    let err = dependence(&gaussian_draws(&l, m, m, &mut rng), &block, &mut rng).unwrap_err();
    assert!(err.to_string().contains("cannot fit"), "{err}");
}

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
