//! The random-feature GP against Bayesian linear regression's closed form, against the exact GP
//! it approximates, and its evidence's choice of lengthscales.

use super::*;
use crate::predict::Predict;
use crate::rollout::Dynamics;
use crate::testing::{seeded, test_device};

/// `n` rows of `d` inputs uniform on `[−2, 2]` from `seed`.
fn inputs(n: usize, d: usize, seed: u64) -> Vec<f64> {
    let mut rng = HostNormals::new(seed);
    (0..n * d).map(|_| 4.0 * rng.uniform() - 2.0).collect()
}

/// `sin(2x₁) + 0.1 ε` for each row of `x`.
fn targets(x: &[f64], d: usize, seed: u64) -> Vec<f64> {
    let mut rng = HostNormals::new(seed);
    x.chunks(d)
        .map(|r| (2.0 * r[0]).sin() + 0.1 * rng.next())
        .collect()
}

/// Output `j`'s posterior mean and variance of `f(x*)` from the features `ψ*` of `x*`, in the
/// eigenbasis: `c = Vᵀψ*`, mean `Σ c m̃`, variance `Σ c²/(βλ + α)`.
fn predictive(fit: &Fit, j: usize, psi: &[f64]) -> (f64, f64) {
    let (m, v, out) = (psi.len(), &fit.vectors, &fit.outputs[j]);
    let c: Vec<f64> = (0..m)
        .map(|col| (0..m).map(|a| v[a * m + col] * psi[a]).sum())
        .collect();
    let mean = c.iter().zip(&out.mean).map(|(c, w)| c * w).sum();
    let var = c
        .iter()
        .zip(&fit.lambda)
        .map(|(c, l)| c * c / (out.beta * l + out.alpha))
        .sum();
    (mean, var)
}

/// The network's draws `f(x*) + ε` at `x*` match the closed-form predictive of the regression
/// (mean `ψ*ᵀm`, variance `ψ*ᵀA⁻¹ψ* + 1/β`) within five standard errors of 20 000 draws: the
/// features, the posterior's mean and factor and the noise are where the roll-outs read them.
#[test]
fn the_network_draws_the_regressions_predictive() {
    let device = test_device();
    let _guard = seeded(&device, 3);
    let (n, m) = (40, 30);
    let x = inputs(n, 1, 1);
    let y = targets(&x, 1, 2);
    let config = RandomFeatureGpConfig::new().with_features(m).with_seed(5);
    let gp = config
        .fit(matrix(&x, 1, &device), matrix(&y, 1, &device))
        .expect("fit");
    let draws = Draws::new(1, m, 5);
    let fit = fit_at(&draws, &x, &y, [1, 1], &gp.lengthscales);
    let out = &fit.outputs[0];
    let test = [-1.5, 0.3, 1.9];
    let psi = draws.design(&test, 1, &gp.lengthscales);
    let k = 20_000;
    let batch = Tensor::<2>::from_floats([[-1.5], [0.3], [1.9]], &device)
        .unsqueeze_dim::<3>(0)
        .repeat_dim(0, k);
    let samples = to_vec(gp.model.dynamics(k).predict(batch));
    for (t, row) in psi.chunks(m).enumerate() {
        let (mean, var_f) = predictive(&fit, 0, row);
        let var = var_f + 1.0 / out.beta;
        let got: Vec<f64> = (0..k).map(|i| samples[i * test.len() + t]).collect();
        let g_mean = got.iter().sum::<f64>() / k as f64;
        let g_var = got.iter().map(|s| (s - g_mean).powi(2)).sum::<f64>() / (k - 1) as f64;
        let (se_mean, se_var) = ((var / k as f64).sqrt(), var * (2.0 / k as f64).sqrt());
        assert!(
            (g_mean - mean).abs() < 5.0 * se_mean,
            "x* = {}: mean {g_mean} vs {mean} (s.e. {se_mean:.2e})",
            test[t]
        );
        assert!(
            (g_var - var).abs() < 5.0 * se_var,
            "x* = {}: variance {g_var} vs {var} (s.e. {se_var:.2e})",
            test[t]
        );
    }
    // By moments the full-rank layer's couplings enter exactly: the closed form itself.
    let by_moments = gp
        .model
        .predict(
            Tensor::<2>::from_floats([[-1.5], [0.3], [1.9]], &device),
            crate::predict::PredictMode::Moments,
        )
        .expect("moments");
    let (means, vars) = (to_vec(by_moments.mean()), to_vec(by_moments.variance()));
    for (t, row) in psi.chunks(m).enumerate() {
        let (mean, var_f) = predictive(&fit, 0, row);
        let var = var_f + 1.0 / out.beta;
        assert!(
            (means[t] - mean).abs() < 1e-4 * (1.0 + mean.abs()),
            "{means:?}"
        );
        assert!((vars[t] - var).abs() < 1e-3 * var, "{vars:?} vs {var}");
    }
}

/// With 800 features the posterior is the exact GP's under the same kernel
/// `s² exp(−½(x − x')²/ℓ²)` and noise: the mean within 0.1 and the variance of `f` within
/// `0.1 s²` at every test point, one of them far from the data (targets of scale 1, noise 0.3;
/// the features' error shrinks as `M^{−1/2}`).
#[test]
fn many_features_give_the_exact_gps_posterior() {
    let device = test_device();
    let _guard = seeded(&device, 4);
    let (n, m) = (25, 800);
    let x = inputs(n, 1, 11);
    let mut rng = HostNormals::new(12);
    let y: Vec<f64> = x
        .iter()
        .map(|v| (2.0 * v).sin() + 0.3 * rng.next())
        .collect();
    let gp = RandomFeatureGpConfig::new()
        .with_features(m)
        .with_lengthscales(vec![0.4, 0.6, 1.0])
        .with_seed(13)
        .fit(matrix(&x, 1, &device), matrix(&y, 1, &device))
        .expect("fit");
    let (l, s, sn) = (gp.lengthscales[0], gp.signal_std[0], gp.noise_std[0]);
    let kernel = |a: f64, b: f64| s * s * (-0.5 * ((a - b) / l).powi(2)).exp();
    let mut gram: Vec<f64> = (0..n * n)
        .map(|i| kernel(x[i / n], x[i % n]) + if i / n == i % n { sn * sn } else { 0.0 })
        .collect();
    dense::cholesky(&mut gram, n).expect("a positive definite kernel");
    let inverse = dense::inverse_from_cholesky(&gram, n);
    let weights: Vec<f64> = (0..n)
        .map(|i| (0..n).map(|j| inverse[i * n + j] * y[j]).sum())
        .collect();
    let draws = Draws::new(1, m, 13);
    let fit = fit_at(&draws, &x, &y, [1, 1], &gp.lengthscales);
    let test = [-1.7, -0.4, 0.5, 1.2, 3.5];
    let psi = draws.design(&test, 1, &gp.lengthscales);

    for (t, row) in psi.chunks(m).enumerate() {
        let k_star: Vec<f64> = (0..n).map(|i| kernel(test[t], x[i])).collect();
        let exact: f64 = k_star.iter().zip(&weights).map(|(k, w)| k * w).sum();
        let exact_var = s * s
            - (0..n)
                .map(|i| {
                    (0..n)
                        .map(|j| k_star[i] * inverse[i * n + j] * k_star[j])
                        .sum::<f64>()
                })
                .sum::<f64>();
        let (ours, ours_var) = predictive(&fit, 0, row);
        assert!(
            (ours - exact).abs() < 0.1 && (ours_var - exact_var).abs() < 0.1 * s * s,
            "x* = {}: random features {ours} (variance {ours_var}), exact GP {exact} \
             ({exact_var}; ℓ = {l}, s = {s}, σ = {sn})",
            test[t]
        );
    }
}

/// ARD: for `y = sin(2x₁) + 0.1ε` with an irrelevant `x₂`, the evidence gives `x₂` a longer
/// lengthscale than `x₁` (at least 4, the grid's long end), `x₁` one that resolves the sine,
/// and a noise near 0.1.
#[test]
fn the_evidence_finds_the_relevant_input_and_the_noise() {
    let device = test_device();
    let _guard = seeded(&device, 6);
    let n = 200;
    let x = inputs(n, 2, 21);
    let y = targets(&x, 2, 22);
    let gp = RandomFeatureGpConfig::new()
        .with_features(150)
        .fit(matrix(&x, 2, &device), matrix(&y, 1, &device))
        .expect("fit");
    let [l1, l2] = [gp.lengthscales[0], gp.lengthscales[1]];
    assert!(l1 <= 1.5 && l2 >= 4.0, "lengthscales {l1}, {l2}");
    let noise = gp.noise_std[0];
    assert!((0.07..0.14).contains(&noise), "noise {noise}");
}

#[test]
fn bad_settings_and_data_are_refused_by_name() {
    let device = test_device();
    let x = matrix(&[0.0, 1.0, 2.0], 1, &device);
    let y = matrix(&[0.0, 1.0, 0.5], 1, &device);
    let field = |c: RandomFeatureGpConfig, x: &Tensor<2>, y: &Tensor<2>| {
        c.fit(x.clone(), y.clone()).expect_err("refused").field
    };
    assert_eq!(
        field(RandomFeatureGpConfig::new().with_features(0), &x, &y),
        "features"
    );
    let negative = RandomFeatureGpConfig::new().with_lengthscales(vec![1.0, -1.0]);
    assert_eq!(field(negative, &x, &y), "lengthscales");
    let short = matrix(&[0.0, 1.0], 1, &device);
    assert_eq!(field(RandomFeatureGpConfig::new(), &x, &short), "data");
}
