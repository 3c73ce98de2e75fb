use super::*;
use crate::posterior::{FullRankConfig, MeanFieldConfig, ScaleInit};
use crate::testing::{HostNormals, offset_seed, seeded, to_vec};
use burn::module::Module;
use burn::module::Param;
use burn::tensor::Tensor;
use rand::{RngExt, SeedableRng, rngs::StdRng};

/// `points` rows of `d` host normals scaled by `scale`, as f64 rows.
fn host_points(points: usize, d: usize, scale: f64, seed: u64) -> Vec<Vec<f64>> {
    let mut z = HostNormals::new(offset_seed(seed));
    (0..points)
        .map(|_| (0..d).map(|_| scale * z.next()).collect())
        .collect()
}

/// Closed-form host values and gradients agree with the tensor densities and autodiff.
fn check_target<T: LogDensity>(target: &T, scale: f64, seed: u64) {
    let d = target.dim();
    for theta in host_points(5, d, scale, seed) {
        let mut grad = vec![0.0; d];
        let lp = target.value_and_grad(&theta, &mut grad);
        let mut grad_t = vec![0.0; d];
        let lp_t = autodiff_value_and_grad(target, &theta, &mut grad_t);
        assert!(
            (lp - lp_t).abs() < 1e-4 * lp.abs().max(1.0),
            "{lp} vs {lp_t} at {theta:?}"
        );
        for (g, gt) in grad.iter().zip(&grad_t) {
            assert!(
                (g - gt).abs() < 1e-3 * g.abs().max(1.0),
                "gradient {grad:?} vs autodiff {grad_t:?} at {theta:?}"
            );
        }
    }
}

#[test]
fn targets_host_gradients_match_their_tensor_densities_under_autodiff() {
    check_target(&EightSchools::default(), 1.5, 1);
    check_target(&EightSchools::centred(), 1.5, 4);
    check_target(&Funnel::neal(4), 1.0, 2);
    let cov = vec![2.0, 0.6, 0.1, 0.6, 1.0, -0.3, 0.1, -0.3, 0.5];
    check_target(
        &GaussianTarget::new(vec![1.0, -2.0, 0.5], cov).unwrap(),
        1.0,
        3,
    );
    // The Gaussian target is normalised: its density at the mean is (2π)^{-D/2} det Σ^{-1/2}.
    let g = GaussianTarget::new(vec![0.0; 2], vec![4.0, 0.0, 0.0, 1.0]).unwrap();
    let mut grad = [0.0; 2];
    let lp = g.value_and_grad(&[0.0, 0.0], &mut grad);
    assert!((lp - (-(2.0 * std::f64::consts::PI).ln() - 2f64.ln() * 1.0)).abs() < 1e-12);
    let bad = GaussianTarget::new(vec![0.0; 2], vec![1.0, 2.0, 2.0, 1.0]).unwrap_err();
    assert_eq!(bad.field, "covariance");
}

#[test]
fn eight_schools_log_evidence_agrees_with_importance_sampling_from_the_prior() {
    // p(y) = E_{μ,τ ~ prior}[Π_j N(y_j; μ, σ_j² + τ²)], θ̃ integrated out; the quadrature of
    // `log_evidence` integrates μ in closed form instead, so the two share no code path.
    let m = EightSchools::default();
    let mut rng = StdRng::seed_from_u64(offset_seed(7));
    let mut z = HostNormals::new(offset_seed(8));
    let n = 400_000;
    let lik: Vec<f64> = (0..n)
        .map(|_| {
            let mu = 5.0 * z.next();
            let u: f64 = rng.random();
            let tau = 5.0 * (std::f64::consts::FRAC_PI_2 * u).tan();
            m.y.iter()
                .zip(&m.sigma)
                .map(|(y, s)| {
                    let v = s * s + tau * tau;
                    -0.5 * (y - mu).powi(2) / v - 0.5 * (2.0 * std::f64::consts::PI * v).ln()
                })
                .sum::<f64>()
                .exp()
        })
        .collect();
    let mean = lik.iter().sum::<f64>() / n as f64;
    let se = (lik.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / n as f64 / n as f64).sqrt();
    let exact = m.log_evidence();
    // The delta method: se(ln mean) = se / mean.
    let tol = 4.0 * se / mean;
    assert!(
        (mean.ln() - exact).abs() < tol,
        "quadrature {exact} vs prior IS {} ± {}",
        mean.ln(),
        se / mean
    );
}

/// `n` draws of a generalised Pareto of shape `k`, scale 1 (inverse CDF).
fn gpd_draws(n: usize, k: f64, seed: u64) -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(offset_seed(seed));
    (0..n)
        .map(|_| {
            let u: f64 = rng.random();
            ((-k * (1.0 - u).ln()).exp() - 1.0) / k
        })
        .collect()
}

#[test]
fn k_hat_recovers_the_shape_of_pareto_tails() {
    // The fit itself, on exact GPD draws: the MLE's asymptotic sd is (1 + k)/√n.
    let n = 20_000;
    for (i, k) in [0.2, 0.5, 0.9].into_iter().enumerate() {
        let (k_hat, sigma) = gpd_fit(&gpd_draws(n, k, 11 + i as u64));
        let tol = 4.0 * (1.0 + k) / (n as f64).sqrt();
        assert!((k_hat - k).abs() < tol, "k = {k}: fitted {k_hat} (± {tol})");
        assert!((sigma - 1.0).abs() < 0.1, "k = {k}: σ = {sigma}");
    }
    // PSIS on ratios whose tail is Pareto of shape k (w = U^{−k}): above any threshold the
    // exceedances are GPD with shape k; the tail holds M = 3√S draws.
    let s = 100_000;
    let mut rng = StdRng::seed_from_u64(offset_seed(21));
    for k in [0.3, 0.6, 0.9] {
        let ratios: Vec<f64> = (0..s)
            .map(|_| -k * (1.0 - rng.random::<f64>()).ln())
            .collect();
        let fit = psis(&ratios).unwrap();
        let m = fit.tail_len as f64;
        assert_eq!(fit.tail_len, 949);
        let tol = 4.0 * (1.0 + k) / m.sqrt();
        assert!((fit.k_hat - k).abs() < tol, "k = {k}: k̂ {}", fit.k_hat);
        let total: f64 = fit.log_weights.iter().map(|w| w.exp()).sum();
        assert!((total - 1.0).abs() < 1e-9);
        // Smoothing keeps the ratios' order.
        let mut order: Vec<usize> = (0..s).collect();
        order.sort_by(|&a, &b| ratios[a].total_cmp(&ratios[b]));
        for pair in order.windows(2) {
            let (a, b) = (fit.log_weights[pair[0]], fit.log_weights[pair[1]]);
            assert!(a <= b + 1e-12, "smoothed weights out of order: {a} > {b}");
        }
    }
    assert_eq!(KHatBand::of(0.3), KHatBand::Good);
    assert_eq!(KHatBand::of(0.6), KHatBand::Acceptable);
    assert_eq!(KHatBand::of(0.7), KHatBand::Unreliable);
}

#[test]
fn psis_rejects_bad_ratios_and_keeps_equal_ones() {
    assert_eq!(
        psis(&[0.0; 5]).unwrap_err(),
        PsisError::TooFew { min: 10, got: 5 }
    );
    let mut r = vec![0.5; 20];
    r[3] = f64::NAN;
    assert!(matches!(
        psis(&r).unwrap_err(),
        PsisError::NotFinite { index: 3, .. }
    ));
    r[3] = f64::INFINITY;
    assert!(matches!(
        psis(&r).unwrap_err(),
        PsisError::NotFinite { index: 3, .. }
    ));
    // q ∝ p: every ratio equal, nothing to fit, uniform weights.
    let fit = psis(&[1.25; 50]).unwrap();
    assert_eq!(fit.k_hat, f64::NEG_INFINITY);
    assert_eq!(fit.band(), KHatBand::Good);
    for w in &fit.log_weights {
        assert!((w + 50f64.ln()).abs() < 1e-12);
    }
    // A zero weight (−∞) is a valid ratio.
    let mut r: Vec<f64> = (0..40).map(|i| i as f64 * 0.01).collect();
    r[0] = f64::NEG_INFINITY;
    let fit = psis(&r).unwrap();
    assert_eq!(fit.log_weights[0], f64::NEG_INFINITY);
    assert!(fit.k_hat.is_finite());
}

/// `ln |det J|` of a 3 × 3 matrix (rows).
fn log_abs_det3(j: &[Vec<f64>]) -> f64 {
    let det = j[0][0] * (j[1][1] * j[2][2] - j[1][2] * j[2][1])
        - j[0][1] * (j[1][0] * j[2][2] - j[1][2] * j[2][0])
        + j[0][2] * (j[1][0] * j[2][1] - j[1][1] * j[2][0]);
    det.abs().ln()
}

#[test]
fn every_flow_log_det_equals_the_log_det_of_its_autodiff_jacobian() {
    let device = crate::training_device();
    let _guard = seeded(&device, 31);
    let (d, s) = (3, 4);
    for kind in [
        FlowKind::Planar,
        FlowKind::Radial,
        FlowKind::Iaf { hidden: 8 },
    ] {
        let mut flow = FlowConfig::new(kind, 2)
            .with_init_std(0.7)
            .init(d, &device)
            .unwrap();
        if kind == FlowKind::Radial {
            // Radial steps start at the identity (β = 0): one expands, one contracts.
            for (step, b) in flow.steps.iter_mut().zip([1.0f32, -2.0]) {
                if let FlowStep::Radial(r) = step {
                    r.alpha = Param::from_tensor(Tensor::from_floats([0.3], &device));
                    r.beta = Param::from_tensor(Tensor::from_floats([b], &device));
                }
            }
        }
        for (k, step) in flow.steps.iter().enumerate() {
            let z0: Vec<f64> = host_points(s, d, 1.0, 40 + k as u64)
                .concat()
                .into_iter()
                .collect();
            let z = || crate::host::matrix(&z0, d, &device).require_grad();
            let log_det = to_vec(step.forward(z()).1);
            // Row i of each draw's Jacobian: the gradient of Σ_s out[s, i] (a fresh forward
            // pass per row: burn's tape is consumed by a backward pass).
            let rows: Vec<Vec<f64>> = (0..d)
                .map(|i| {
                    let z = z();
                    let out = step.forward(z.clone()).0;
                    let g = out.slice([0..s, i..i + 1]).sum().backward();
                    to_vec(z.grad(&g).unwrap())
                })
                .collect();
            for n in 0..s {
                let jac: Vec<Vec<f64>> = (0..d)
                    .map(|i| (0..d).map(|j| rows[i][n * d + j]).collect())
                    .collect();
                let exact = log_abs_det3(&jac);
                assert!(
                    (exact - log_det[n]).abs() < 1e-4 * exact.abs().max(1.0),
                    "{} step {k}, draw {n}: log det {} vs autodiff {exact}",
                    kind.name(),
                    log_det[n]
                );
                if let FlowKind::Iaf { .. } = kind {
                    // Autoregressive in the step's order (1..D, reversed on odd steps):
                    // output i depends only on the entries before it.
                    for (i, row) in jac.iter().enumerate() {
                        for (j, &entry) in row.iter().enumerate() {
                            let (oi, oj) = if k % 2 == 1 { (d - i, d - j) } else { (i, j) };
                            if oj > oi {
                                assert_eq!(entry, 0.0, "step {k}: ∂out_{i}/∂z_{j}");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn full_rank_vi_reaches_the_exact_gaussian_posterior_and_mean_field_cannot() {
    let device = crate::training_device();
    let _guard = seeded(&device, 5);
    let mean = vec![1.0, -1.0, 0.5];
    let cov = vec![1.0, 0.8, 0.3, 0.8, 1.0, 0.2, 0.3, 0.2, 0.5];
    let target = GaussianTarget::new(mean.clone(), cov.clone()).unwrap();
    let config = ViConfig::new()
        .with_iterations(3000)
        .with_samples(32)
        .with_learning_rate(0.02);
    let scale = ScaleInit::new().with_rho(0.0).with_rho_std(0.0);
    let full = flat_at_zero(&FullRankConfig::new().with_scale(scale), 3, &device).unwrap();
    let fitted = fit(&target, full, &config).unwrap();
    // A second phase at a tenth of the rate settles Adam's noise around the optimum.
    let fine = config.clone().with_learning_rate(0.002).with_seed(6);
    let fitted = fit(&target, fitted.family, &fine).unwrap();
    use crate::posterior::{PosteriorDist, WeightPosterior};
    let q = fitted.family.valid().dist();
    let mu = to_vec(q.mean());
    let l = to_vec(q.tril.clone());
    // Σ_q = L Lᵀ against Σ; the optimum is exact, the rest is Adam's noise at this rate.
    for i in 0..3 {
        assert!((mu[i] - mean[i]).abs() < 0.03, "mean {mu:?} vs {mean:?}");
        for j in 0..3 {
            let c: f64 = (0..3).map(|m| l[i * 3 + m] * l[j * 3 + m]).sum();
            assert!(
                (c - cov[i * 3 + j]).abs() < 0.03,
                "Σ[{i},{j}] = {c} vs {}",
                cov[i * 3 + j]
            );
        }
    }
    // The target is normalised: the optimal ELBO is 0, every ratio 0, k̂ far below 0.5.
    let report = evaluate(&target, &fitted.family, 20_000).unwrap();
    assert!(
        report.elbo > -0.02 && report.elbo <= 4.0 * report.elbo_se,
        "{report:?}"
    );
    assert!(report.psis.k_hat < 0.5, "k̂ {}", report.psis.k_hat);
    assert!(report.log_evidence.abs() < 0.01);
    // Mean-field cannot express the 0.8 correlation: its ELBO stays below by the KL between
    // the exact posterior and its best diagonal fit (½ ln det diag(Σ⁻¹)⁻¹ / det Σ > 0.3 nats).
    let diag = flat_at_zero(&MeanFieldConfig::new().with_scale(scale), 3, &device).unwrap();
    let fitted = fit(&target, diag, &config).unwrap();
    let report = evaluate(&target, &fitted.family, 20_000).unwrap();
    assert!(report.elbo < -0.3, "mean-field ELBO {}", report.elbo);
}

#[test]
fn normal_quantile_matches_known_values() {
    for (p, z) in [
        (0.5, 0.0),
        (0.975, 1.959_963_984_540_054),
        (0.025, -1.959_963_984_540_054),
        (1e-10, -6.361_340_902_404_056),
        (0.999, 3.090_232_306_167_813_6),
    ] {
        let got = normal_quantile(p);
        assert!(
            (got - z).abs() < 1e-8 * z.abs().max(1.0),
            "Φ⁻¹({p}) = {got}, not {z}"
        );
    }
}

/// `m` AR(1) chains `x_t = φ x_{t−1} + √(1−φ²) ε_t` of length `n`, each started at `shift_c`.
fn ar1_chains(m: usize, n: usize, phi: f64, shift: &[f64], seed: u64) -> Vec<Vec<f64>> {
    let mut z = HostNormals::new(offset_seed(seed));
    (0..m)
        .map(|c| {
            let mut x = z.next();
            (0..n)
                .map(|_| {
                    x = phi * x + (1.0 - phi * phi).sqrt() * z.next();
                    x + shift[c]
                })
                .collect()
        })
        .collect()
}

#[test]
fn ess_and_rhat_agree_with_ar1_theory_and_flag_disagreeing_chains() {
    // An AR(1) chain's integrated autocorrelation time is (1 + φ)/(1 − φ).
    let (m, n) = (4, 20_000);
    for phi in [0.0, 0.5, 0.9] {
        let chains = ar1_chains(m, n, phi, &[0.0; 4], offset_seed(50));
        let s = summarise(&chains);
        let tau = (1.0 + phi) / (1.0 - phi);
        let expected = (m * n) as f64 / tau;
        // τ̂ sums about M = 5τ lags: its relative sd is about √(2(2M + 1)/(m n)).
        let tol = 4.0 * (2.0 * (10.0 * tau + 1.0) / (m * n) as f64).sqrt();
        assert!(
            (s.ess_mean / expected - 1.0).abs() < tol,
            "φ = {phi}: ESS {} vs {expected}",
            s.ess_mean
        );
        assert!((s.ess_bulk / expected - 1.0).abs() < tol, "{s:?}");
        assert!(s.rhat < 1.01, "φ = {phi}: R̂ {}", s.rhat);
        assert!((s.mcse - s.sd / s.ess_mean.sqrt()).abs() < 1e-12);
    }
    // One chain shifted by one standard deviation: R̂ ≈ √(1 + Var(means)/W) ≈ 1.1.
    let chains = ar1_chains(m, 2000, 0.5, &[0.0, 0.0, 0.0, 1.0], offset_seed(51));
    assert!(rhat(&chains) > 1.05, "R̂ {}", rhat(&chains));
    // Equal spread, different scale: only the folded R̂ sees it.
    let mut chains = ar1_chains(m, 2000, 0.0, &[0.0; 4], offset_seed(52));
    for x in &mut chains[3] {
        *x *= 3.0;
    }
    assert!(rhat(&chains) > 1.05, "folded R̂ {}", rhat(&chains));
    // max_rhat over entries: the mixed entry's R̂ and the scaled one's, the larger wins.
    let mixed = ar1_chains(m, 2000, 0.0, &[0.0; 4], offset_seed(53));
    let per_chain: Vec<Vec<Vec<f64>>> = (0..m)
        .map(|c| (0..2000).map(|i| vec![mixed[c][i], chains[c][i]]).collect())
        .collect();
    assert_eq!(max_rhat(&per_chain), rhat(&mixed).max(rhat(&chains)));
    assert_eq!(max_rhat(&per_chain), rhat(&chains));
    assert_eq!(max_rhat(&vec![vec![vec![]; 4]; 4]), 0.0);
}

/// Means within 4 MCSE, standard deviations within 4 of their standard errors
/// (`sd/√(2 ESS)`), R̂ below 1.01, and no divergences.
fn check_recovers(run: &McmcRun, mean: &[f64], sd: &[f64], what: &str) {
    for (i, s) in run.summary().iter().enumerate() {
        assert!(
            (s.mean - mean[i]).abs() < 4.0 * s.mcse,
            "{what}: mean[{i}] {} vs {} (MCSE {})",
            s.mean,
            mean[i],
            s.mcse
        );
        let sd_se = sd[i] / (2.0 * s.ess_bulk).sqrt();
        assert!(
            (s.sd - sd[i]).abs() < 4.0 * sd_se,
            "{what}: sd[{i}] {} vs {} (± {sd_se})",
            s.sd,
            sd[i]
        );
        assert!(s.rhat < 1.01, "{what}: R̂[{i}] {}", s.rhat);
    }
}

#[test]
fn nuts_and_hmc_recover_a_correlated_gaussian() {
    let mean = vec![1.0, -2.0, 0.5];
    // sds 3, 1, 0.3 with correlations 0.9, 0.5, 0.3.
    let sd = [3.0, 1.0, 0.3];
    let corr = [[1.0, 0.9, 0.5], [0.9, 1.0, 0.3], [0.5, 0.3, 1.0]];
    let cov: Vec<f64> = (0..9)
        .map(|k| corr[k / 3][k % 3] * sd[k / 3] * sd[k % 3])
        .collect();
    let target = GaussianTarget::new(mean.clone(), cov).unwrap();
    let config = McmcConfig::new()
        .with_warmup(500)
        .with_draws(2000)
        .with_seed(offset_seed(3));
    let run = sample(&target, &config, None).unwrap();
    assert_eq!(run.divergences(), 0);
    check_recovers(&run, &mean, &sd, "NUTS");
    // Dual averaging aims the iterates at 0.8; the averaged step it keeps is a little smaller.
    let accept = run.mean_accept();
    assert!((0.75..0.97).contains(&accept), "accept {accept}");
    let hmc = config.with_sampler(Sampler::Hmc { steps: 20 });
    let run = sample(&target, &hmc, None).unwrap();
    check_recovers(&run, &mean, &sd, "HMC");
}

#[test]
fn nuts_recovers_a_funnels_margin_and_flags_neals_neck() {
    // v ~ N(0, s²) whatever the dimension; at s = 1.5 a high target acceptance reaches the neck.
    let target = Funnel { dim: 3, scale: 1.5 };
    let config = McmcConfig::new()
        .with_warmup(1000)
        .with_draws(4000)
        .with_target_accept(0.95)
        .with_seed(offset_seed(4));
    let run = sample(&target, &config, None).unwrap();
    let v = summarise(&run.param(0));
    assert!(v.mean.abs() < 4.0 * v.mcse, "{v:?}");
    let sd_se = 1.5 / (2.0 * v.ess_bulk).sqrt();
    assert!((v.sd - 1.5).abs() < 4.0 * sd_se, "{v:?}");
    // R̂ itself fluctuates by about 1/√ESS: at a few hundred effective draws, 1.02.
    assert!(v.rhat < 1.02, "{v:?}");
    // At Neal's s = 3 the neck is out of reach of one step size: the run reports divergences.
    let run = sample(&Funnel::neal(3), &config.with_target_accept(0.8), None).unwrap();
    assert!(run.divergences() > 0);
}

#[test]
fn samplers_reject_bad_settings_and_unusable_starts() {
    let target = Funnel::neal(3);
    let err = sample(&target, &McmcConfig::new().with_draws(2), None).unwrap_err();
    assert!(err.to_string().contains("draws"), "{err}");
    let err = sample(&target, &McmcConfig::new().with_target_accept(1.0), None).unwrap_err();
    assert!(err.to_string().contains("target_accept"), "{err}");
    let err = sample(&target, &McmcConfig::new(), Some(&[0.0; 2])).unwrap_err();
    assert!(matches!(
        err,
        McmcError::InitLength {
            got: 2,
            expected: 3
        }
    ));
    let err = sample(&target, &McmcConfig::new(), Some(&[f64::NAN; 3])).unwrap_err();
    assert!(err.to_string().contains("no initial point"), "{err}");
}

/// A target whose "minibatches" are the whole target: exact gradients.
struct Exact(GaussianTarget);

impl Minibatches for Exact {
    type Target = GaussianTarget;
    fn draw(&self, _: usize, _: &mut HostNormals) -> GaussianTarget {
        self.0.clone()
    }
}

#[test]
fn sgld_settles_on_its_discretised_stationary_law_and_sghmc_near_the_target() {
    // On N(0, σ²) SGLD is the AR(1) θ' = (1 − ε/(2σ²)) θ + √ε z, whose stationary variance is
    // σ²/(1 − ε/(4σ²)): 11 % above σ² at ε = 0.4, σ = 1.
    let sd = [1.0, 2.0];
    let target = Exact(GaussianTarget::new(vec![0.0, 0.0], vec![1.0, 0.0, 0.0, 4.0]).unwrap());
    let eps = 0.4;
    let config = SgMcmcConfig::new(eps)
        .with_burn_in(1000)
        .with_draws(90_000)
        .with_thin(1)
        .with_seed(offset_seed(60));
    let run = sg_sample(&target, &[0.0, 0.0], &config).unwrap();
    for (i, s) in sd.iter().enumerate() {
        let chain = vec![run.draws.iter().map(|d| d[i]).collect::<Vec<_>>()];
        let summary = summarise(&chain);
        let expected = s * s / (1.0 - eps / (4.0 * s * s));
        let var = summary.sd * summary.sd;
        let var_se = var * (2.0 / summary.ess_mean).sqrt();
        assert!(
            (var - expected).abs() < 4.0 * var_se,
            "entry {i}: variance {var} vs {expected} (± {var_se})"
        );
        if i == 0 {
            assert!(var - s * s > 4.0 * var_se, "the bias is visible: {var}");
        }
    }
    let sghmc = SgMcmcConfig {
        step_size: 0.01,
        ..config.clone()
    }
    .with_sampler(SgSampler::Sghmc { friction: 0.1 })
    .with_thin(5)
    .with_draws(20_000);
    let run = sg_sample(&target, &[0.0, 0.0], &sghmc).unwrap();
    for (i, s) in sd.iter().enumerate() {
        let chain = vec![run.draws.iter().map(|d| d[i]).collect::<Vec<_>>()];
        let summary = summarise(&chain);
        assert!(summary.mean.abs() < 4.0 * summary.mcse, "{summary:?}");
        assert!((summary.sd / s - 1.0).abs() < 0.1, "entry {i}: {summary:?}");
    }
    let bad = sg_sample(&target, &[0.0], &config).unwrap_err();
    assert!(matches!(
        bad,
        SgMcmcError::InitLength {
            got: 1,
            expected: 2
        }
    ));
    let zero = SgMcmcConfig {
        step_size: 0.0,
        ..config
    };
    let err = sg_sample(&target, &[0.0, 0.0], &zero).unwrap_err();
    assert!(err.to_string().contains("step_size"), "{err}");
}

/// A linear-Gaussian network (no hidden layer, point weights, fixed noise) on `n` rows, and its
/// exact posterior over (w₁, w₂, b): precision `A = ΦᵀΦ/σ² + I/s₀²`, mean `A⁻¹Φᵀy/σ²`.
fn linear_problem(n: usize, device: &burn::tensor::Device) -> LinearProblem {
    let (net, x, y, mean, cov) =
        linear_problem_with(n, crate::posterior::PosteriorConfig::point(), device);
    let sd = (0..3).map(|r| cov[r * 3 + r].sqrt()).collect();
    (net, x, y, mean, sd)
}

/// A network, its inputs and targets, and two vectors (the exact posterior's mean and sds, or
/// its mean and covariance).
type LinearProblem = (
    crate::nets::Regressor,
    Tensor<2>,
    Tensor<2>,
    Vec<f64>,
    Vec<f64>,
);

/// [`linear_problem`] with weights of `family`, and the exact covariance (row-major 3 × 3).
fn linear_problem_with(
    n: usize,
    family: crate::posterior::PosteriorConfig,
    device: &burn::tensor::Device,
) -> LinearProblem {
    use crate::layers::WeightConfig;
    use crate::likelihood::{GaussianLikelihoodConfig, NoiseFit};
    let sigma = 0.5;
    let likelihood = GaussianLikelihoodConfig::new()
        .with_noise_std(sigma)
        .with_fit(NoiseFit::Fixed)
        .init(device)
        .unwrap();
    let net = crate::nets::MlpConfig::new(2, vec![], 1)
        .with_weights(WeightConfig::of(family))
        .init(likelihood, device)
        .unwrap();
    let z = crate::host::host_normals(3 * n, offset_seed(70));
    let phi: Vec<[f64; 3]> = (0..n).map(|i| [z[3 * i], z[3 * i + 1], 1.0]).collect();
    let y: Vec<f64> = (0..n)
        .map(|i| 0.8 * phi[i][0] - 0.5 * phi[i][1] + 0.3 + sigma * z[3 * i + 2])
        .collect();
    let mut a = vec![0.0; 9];
    let mut rhs = [0.0; 3];
    for (p, t) in phi.iter().zip(&y) {
        for r in 0..3 {
            rhs[r] += p[r] * t / (sigma * sigma);
            for c in 0..3 {
                a[r * 3 + c] += p[r] * p[c] / (sigma * sigma);
            }
        }
    }
    let prior_std = 1.0; // the default prior, N(0, 1)
    for r in 0..3 {
        a[r * 3 + r] += 1.0 / (prior_std * prior_std);
    }
    let mut l = a.clone();
    crate::linalg::dense::cholesky(&mut l, 3).unwrap();
    let cov = crate::linalg::dense::inverse_from_cholesky(&l, 3);
    let mean: Vec<f64> = (0..3)
        .map(|r| (0..3).map(|c| cov[r * 3 + c] * rhs[c]).sum())
        .collect();
    let x: Vec<f64> = phi.iter().flat_map(|p| [p[0], p[1]]).collect();
    (
        net,
        crate::host::matrix(&x, 2, device),
        crate::host::matrix(&y, 1, device),
        mean,
        cov,
    )
}

#[test]
fn a_linear_networks_log_joint_is_the_closed_form_and_nuts_on_it_finds_the_exact_posterior() {
    let device = crate::training_device();
    let _guard = seeded(&device, 71);
    let (net, x, y, mean, sd) = linear_problem(40, &device);
    let target = BnnTarget::new(net.clone(), x.clone(), y.clone()).unwrap();
    assert_eq!(target.dim(), 3);
    // The log joint at a few points against the host formula (weights then bias, as the layout
    // has them).
    let xs = to_vec(x.clone());
    let ys = to_vec(y.clone());
    let prior_std = 1.0; // the default prior, N(0, 1)
    // The tempered target divides the likelihood by T.
    let tempered = target.clone().with_temperature(4.0).unwrap();
    for t in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let e = target.clone().with_temperature(t).unwrap_err();
        assert_eq!(e.field, "temperature");
    }
    for theta in host_points(3, 3, 1.0, 72) {
        let (mut lik, mut prior) = (0.0, 0.0);
        for (i, t) in ys.iter().enumerate() {
            let f = theta[0] * xs[2 * i] + theta[1] * xs[2 * i + 1] + theta[2];
            lik += -0.5 * ((t - f) / 0.5).powi(2) - 0.5f64.ln() - crate::special::HALF_LN_2PI;
        }
        for v in &theta {
            prior += -0.5 * (v / prior_std).powi(2) - prior_std.ln() - crate::special::HALF_LN_2PI;
        }
        let mut grad = vec![0.0; 3];
        let lp = lik + prior;
        let got = target.value_and_grad(&theta, &mut grad);
        assert!((got - lp).abs() < 1e-3 * lp.abs().max(1.0), "{got} vs {lp}");
        let lp = lik / 4.0 + prior;
        let got = tempered.value_and_grad(&theta, &mut grad);
        assert!(
            (got - lp).abs() < 1e-3 * lp.abs().max(1.0),
            "T = 4: {got} vs {lp}"
        );
    }
    // NUTS from the autodiff gradients recovers the exact Gaussian posterior.
    let config = McmcConfig::new()
        .with_warmup(300)
        .with_draws(400)
        .with_seed(offset_seed(73));
    let run = sample(&target, &config, None).unwrap();
    check_recovers(&run, &mean, &sd, "NUTS on a linear network");
    // Its samples predict as a network-level posterior: the predictive mean at the data is
    // Φ·E[θ].
    let posterior = SampledPosterior::new(net.valid(), &run.pooled()).unwrap();
    let pred = crate::posthoc::predict_network(
        &posterior,
        x.clone().inner(),
        crate::predict::PredictMode::Samples(400),
    )
    .unwrap();
    let mu = to_vec(pred.mean());
    for i in 0..5 {
        let expected = mean[0] * xs[2 * i] + mean[1] * xs[2 * i + 1] + mean[2];
        assert!(
            (mu[i] - expected).abs() < 0.05,
            "row {i}: {} vs {expected}",
            mu[i]
        );
    }
    // SGLD on minibatches of 10 rows, at a step small against the posterior's scale, lands
    // near the same posterior mean (its bias and noise are what 0.1 sd allows).
    let sg = SgMcmcConfig::new(2e-4)
        .with_batch_size(10)
        .with_burn_in(2000)
        .with_draws(2000)
        .with_thin(5)
        .with_seed(offset_seed(74));
    let run = sg_sample(&target, &mean, &sg).unwrap();
    for i in 0..3 {
        let m = run.draws.iter().map(|d| d[i]).sum::<f64>() / run.draws.len() as f64;
        assert!(
            (m - mean[i]).abs() < 0.3 * sd[i] + 0.02,
            "θ{i}: {m} vs {}",
            mean[i]
        );
    }
}

#[test]
fn network_check_gives_the_closed_form_elbo_and_evidence_of_a_linear_network() {
    use crate::posterior::{AnyPosterior, PosteriorConfig, PosteriorDist, WeightPosterior};
    let device = crate::device();
    let _guard = seeded(&device, 75);
    let n = 40;
    let (mut net, x, y, mean, cov) = linear_problem_with(n, PosteriorConfig::mean_field(), &device);
    // q: independent Gaussians at the exact posterior's means and marginal sds.
    let sd: Vec<f64> = (0..3).map(|r| cov[r * 3 + r].sqrt()).collect();
    let set = |p: &mut AnyPosterior<2>, m: &[f64], s: &[f64]| {
        let AnyPosterior::MeanField(q) = p else {
            unreachable!()
        };
        let rho: Vec<f64> = s.iter().map(|s| q.loc.param.rho_of(*s)).collect();
        q.loc.mu = Param::from_tensor(crate::host::matrix(m, 1, &device));
        q.loc.rho = Param::from_tensor(crate::host::matrix(&rho, 1, &device));
    };
    set(&mut net.head.params.weight, &mean[..2], &sd[..2]);
    let Some(AnyPosterior::MeanField(b)) = net.head.params.bias.as_mut() else {
        unreachable!()
    };
    b.loc.mu = Param::from_tensor(Tensor::from_floats([mean[2] as f32], &device));
    let rho = b.loc.param.rho_of(sd[2]);
    b.loc.rho = Param::from_tensor(Tensor::from_floats([rho as f32], &device));
    let q_mean = to_vec(net.head.params.weight.dist().mean());
    assert!((q_mean[1] - mean[1]).abs() < 1e-5);
    let report = network_check(&net, x.clone(), y.clone(), 20_000).unwrap();
    // The ELBO of a Gaussian q in closed form: E_q ln p(y|θ) + E_q ln p(θ) + H[q].
    let (xs, ys) = (to_vec(x), to_vec(y));
    let sigma2 = 0.25;
    let mut elbo = 0.0;
    for i in 0..n {
        let phi = [xs[2 * i], xs[2 * i + 1], 1.0];
        let f: f64 = (0..3).map(|j| phi[j] * mean[j]).sum();
        let var: f64 = (0..3).map(|j| phi[j] * phi[j] * sd[j] * sd[j]).sum();
        elbo += -0.5 * (2.0 * std::f64::consts::PI * sigma2).ln()
            - ((ys[i] - f).powi(2) + var) / (2.0 * sigma2);
    }
    for j in 0..3 {
        elbo += -crate::special::HALF_LN_2PI - 0.5 * (mean[j] * mean[j] + sd[j] * sd[j]);
        elbo += 0.5 * (2.0 * std::f64::consts::PI * std::f64::consts::E * sd[j] * sd[j]).ln();
    }
    assert!(
        (report.elbo - elbo).abs() < 4.0 * report.elbo_se + 1e-3,
        "ELBO {} ± {} vs {elbo}",
        report.elbo,
        report.elbo_se
    );
    // The evidence: y ~ N(0, σ²I + Φ Φᵀ) (unit priors).
    let mut k = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            let (a, b) = (
                [xs[2 * i], xs[2 * i + 1], 1.0],
                [xs[2 * j], xs[2 * j + 1], 1.0],
            );
            k[i * n + j] =
                (0..3).map(|m| a[m] * b[m]).sum::<f64>() + if i == j { sigma2 } else { 0.0 };
        }
    }
    let mut l = k;
    crate::linalg::dense::cholesky(&mut l, n).unwrap();
    let inv = crate::linalg::dense::inverse_from_cholesky(&l, n);
    let quad: f64 = (0..n)
        .map(|i| (0..n).map(|j| ys[i] * inv[i * n + j] * ys[j]).sum::<f64>())
        .sum();
    let evidence = -0.5 * quad
        - 0.5 * crate::linalg::dense::cholesky_log_det(&l, n)
        - n as f64 * crate::special::HALF_LN_2PI;
    assert!(report.elbo < evidence, "{} vs {evidence}", report.elbo);
    assert!(report.psis.k_hat < 0.7, "k̂ {}", report.psis.k_hat);
    assert!(
        (report.log_evidence - evidence).abs() < 0.02,
        "IS evidence {} vs {evidence}",
        report.log_evidence
    );
    // Point weights have no density.
    let (point, x, y, _, _) = linear_problem(n, &device);
    assert!(matches!(
        network_check(&point, x, y, 100).unwrap_err(),
        ViError::Unsupported(_)
    ));
}

/// `N(0, 1)` on `θ₀ < cut` and `ln p̃ = −∞` beyond: a density whose ratio leaves f32's range
/// on a known share of a Gaussian `q`'s draws.
struct Truncated {
    cut: f64,
}

impl LogDensity for Truncated {
    fn dim(&self) -> usize {
        1
    }

    fn log_density(&self, theta: Tensor<2>) -> Tensor<1> {
        let s = theta.dims()[0];
        let beyond = theta.clone().greater_elem(self.cut).reshape([s]);
        let lp = (theta.square() * -0.5).reshape([s]);
        lp.mask_fill(beyond, f64::NEG_INFINITY)
    }
}

#[test]
fn vi_leaves_out_draws_beyond_f32s_range_counts_them_and_stops_when_none_is_left() {
    use crate::posterior::{PosteriorDist, WeightPosterior};
    let device = crate::training_device();
    let _guard = seeded(&device, 7);
    let scale = ScaleInit::new().with_rho(0.0).with_rho_std(0.0);
    let q = flat_at_zero(&MeanFieldConfig::new().with_scale(scale), 1, &device).unwrap();
    let sigma = to_vec(q.valid().dist().marginal_variance().unwrap())[0].sqrt();
    // A rate too small to move q: each draw lands beyond the cut with probability
    // P(z > cut/σ); the count is binomial over every draw of the fit.
    let (iterations, samples, p) = (200, 50, 0.075);
    let cut = sigma * normal_quantile(1.0 - p);
    let config = ViConfig::new()
        .with_iterations(iterations)
        .with_samples(samples)
        .with_learning_rate(1e-9);
    // Nearly every step leaves a draw out: by default that is an unstable fit.
    match fit(&Truncated { cut }, q.clone(), &config) {
        Err(ViError::Unstable { steps: 100, .. }) => {}
        other => panic!("expected Unstable after 100 steps, got {other:?}"),
    }
    let config = config.with_max_irregular(0.5);
    let fitted = fit(&Truncated { cut }, q.clone(), &config).unwrap();
    assert!(fitted.elbo_trace.iter().all(|v| v.is_finite()));
    let n = (iterations * samples) as f64;
    let expected = n * p;
    let sd = (n * p * (1.0 - p)).sqrt();
    let got = fitted.dropped_draws as f64;
    assert!(
        (got - expected).abs() < 5.0 * sd,
        "dropped {got}, expected {expected:.0} ± {sd:.0}"
    );
    // A cut below every draw leaves none: the first step's estimate is not finite.
    match fit(&Truncated { cut: -1e3 }, q, &config) {
        Err(ViError::NotFinite { iteration: 0, .. }) => {}
        other => panic!("expected NotFinite at iteration 0, got {other:?}"),
    }
}

#[test]
fn gradient_entries_that_are_not_finite_are_zeroed_and_counted() {
    let device = crate::training_device();
    let _guard = seeded(&device, 8);
    let q = flat_at_zero(&MeanFieldConfig::new(), 3, &device).unwrap();
    let c = Tensor::<1>::from_floats([1.0, f32::NAN, f32::INFINITY], &device);
    let loss = (q.loc.mu.val() * c).sum();
    let mut grads = burn::optim::GradientsParams::from_grads(loss.backward(), &q);
    let mut sanitise = vi::Sanitise {
        grads: &mut grads,
        non_finite: None,
        norm_sq: None,
    };
    q.visit(&mut sanitise);
    assert_eq!(to_vec(sanitise.non_finite.unwrap()), vec![2.0]);
    // The norm is the kept entries'.
    assert_eq!(to_vec(sanitise.norm_sq.unwrap()), vec![1.0]);
    let g = to_vec(grads.get::<1>(q.loc.mu.id).unwrap());
    assert_eq!(g, vec![1.0, 0.0, 0.0]);
}

#[test]
fn full_rank_log_q_from_the_noise_equals_the_density_at_the_draws() {
    use crate::posterior::{PosteriorDist, WeightPosterior};
    let device = crate::device();
    let _guard = seeded(&device, 9);
    let q = flat_at_zero(&FullRankConfig::new(), 4, &device).unwrap();
    // A well-conditioned L with off-diagonal entries, where the solve is exact enough.
    let raw = Tensor::<2>::random(
        [4, 4],
        burn::tensor::Distribution::Normal(0.0, 0.3),
        &device,
    );
    let q = crate::posterior::FullRankPosterior {
        scale_tril: Param::from_tensor(raw),
        ..q
    };
    let dist = q.dist();
    let (w, log_q) = dist.sample_with_log_q(64).unwrap();
    let direct = to_vec(dist.log_q(w).unwrap());
    for (a, b) in to_vec(log_q).iter().zip(&direct) {
        assert!((a - b).abs() < 1e-3 * (1.0 + b.abs()), "{a} vs {b}");
    }
}

#[test]
fn clipping_bounds_each_step_and_the_trace_keeps_the_norms_before_it() {
    let device = crate::training_device();
    let _guard = seeded(&device, 10);
    // A target far from q: the gradient on μ is about 100 at the start.
    let target = GaussianTarget::new(vec![100.0], vec![1.0]).unwrap();
    let q = flat_at_zero(&MeanFieldConfig::new(), 1, &device).unwrap();
    let config = ViConfig::new()
        .with_iterations(10)
        .with_samples(8)
        .with_learning_rate(1.0)
        .with_optimizer(crate::train::OptimizerConfig::Sgd {
            momentum: 0.0,
            nesterov: false,
        })
        .with_max_grad_norm(Some(0.1));
    let fitted = fit(&target, q, &config).unwrap();
    // SGD moves μ by lr·(clipped gradient) ≤ 0.1 per step.
    let mu = to_vec(fitted.family.loc.mu.val())[0];
    assert!(mu > 0.5 && mu <= 1.0 + 1e-4, "μ = {mu}");
    assert_eq!(fitted.grad_norm_trace.len(), 10);
    assert!(
        fitted.grad_norm_trace.iter().all(|&n| n > 90.0),
        "{:?}",
        fitted.grad_norm_trace
    );
}

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
    crate::linalg::dense::cholesky(&mut l, m).unwrap();
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

/// A linear BNN+LV `y = w₀x + w₁z + b + ε` (no hidden layer, `σ = 0.5`, `γ = 1`) for `n` rows.
fn linear_latent_model(n: usize, device: &burn::tensor::Device) -> crate::nets::LatentRegressor {
    use crate::layers::WeightConfig;
    use crate::likelihood::{GaussianLikelihoodConfig, NoiseFit};
    let likelihood = GaussianLikelihoodConfig::new()
        .with_noise_std(0.5)
        .with_fit(NoiseFit::Fixed)
        .init(device)
        .unwrap();
    let mlp = crate::nets::MlpConfig::new(1, vec![], 1)
        .with_weights(WeightConfig::of(crate::posterior::PosteriorConfig::point()));
    crate::nets::BnnLvConfig::new(mlp)
        .init(likelihood, n, device)
        .unwrap()
}

#[test]
fn the_latent_log_joint_is_the_closed_form() {
    let device = crate::training_device();
    let _guard = seeded(&device, 81);
    let n = 6;
    let model = linear_latent_model(n, &device);
    let xs = crate::host::host_normals(n, offset_seed(82));
    let ys = crate::host::host_normals(n, offset_seed(83));
    let target = LatentTarget::new(
        model.clone(),
        crate::host::matrix(&xs, 1, &device),
        crate::host::matrix(&ys, 1, &device),
    )
    .unwrap();
    assert_eq!(target.dim(), 3 + n);
    assert_eq!(target.current().len(), 3 + n);
    let normal = |v: f64, m: f64, s: f64| {
        -0.5 * ((v - m) / s).powi(2) - s.ln() - crate::special::HALF_LN_2PI
    };
    for theta in host_points(4, 3 + n, 1.0, 84) {
        // Weights (w₀ on x, w₁ on z), then the bias, then the latents.
        let (w0, w1, b) = (theta[0], theta[1], theta[2]);
        let mut lp: f64 = theta[..3].iter().map(|v| normal(*v, 0.0, 1.0)).sum();
        for i in 0..n {
            let z = theta[3 + i];
            lp += normal(z, 0.0, 1.0) + normal(ys[i], w0 * xs[i] + w1 * z + b, 0.5);
        }
        let mut grad = vec![0.0; 3 + n];
        let got = target.value_and_grad(&theta, &mut grad);
        assert!((got - lp).abs() < 1e-4 * lp.abs().max(1.0), "{got} vs {lp}");
    }
    check_target(&target, 1.0, 85);
    // Chains on threads of their own, the model's noise a learned parameter: only θ is tracked,
    // so the chains' autodiff graphs stay apart (a tracked noise shared by both can deadlock).
    let mlp = crate::nets::MlpConfig::new(1, vec![3], 1);
    let learned = crate::nets::BnnLvConfig::new(mlp)
        .init_regressor(n, &device)
        .unwrap();
    let threaded = LatentTarget::new(
        learned,
        crate::host::matrix(&xs, 1, &device),
        crate::host::matrix(&ys, 1, &device),
    )
    .unwrap();
    // Shallow trees: the threads are the point, and a deep tree's thousand host-driven
    // gradients cost minutes where every op is a dispatch (wgpu).
    let config = McmcConfig::new()
        .with_sampler(Sampler::Nuts { max_depth: 4 })
        .with_warmup(20)
        .with_draws(10)
        .with_chains(2)
        .with_seed(offset_seed(86));
    let run = sample(&threaded, &config, Some(&threaded.current())).unwrap();
    assert_eq!(run.chains.len(), 2);
    // Bad data are named.
    let e = LatentTarget::new(
        model,
        crate::host::matrix(&xs, 1, &device),
        crate::host::matrix(&ys[..n - 1], 1, &device),
    )
    .unwrap_err();
    assert_eq!(e.field, "input");
}

#[test]
fn decompositions_under_given_weights_separate_the_weights_spread_from_the_noise() {
    let device = crate::device();
    let _guard = seeded(&device, 86);
    let model = linear_latent_model(4, &device);
    // Every weight draw the same (w₀ = 1, w₁ = 2, b = 0): no epistemic part, and the aleatoric
    // variance is w₁²γ + σ² = 4.25.
    let (n_w, n_z) = (40, 300);
    let same: Vec<f64> = (0..n_w).flat_map(|_| [1.0, 2.0, 0.0]).collect();
    let x = crate::host::matrix(&[0.0, 1.5], 1, &device);
    let parts = model
        .decompose_samples(x.clone(), crate::host::matrix(&same, 3, &device), n_z, 25)
        .unwrap();
    for p in &parts {
        // The unbiased epistemic estimate of a constant has sd ≈ (V/n_z)·√(2/(n_w − 1)).
        let sd = 4.25 / n_z as f64 * (2.0 / (n_w - 1) as f64).sqrt();
        assert!(p.epistemic_variance.abs() < 5.0 * sd, "{p:?}");
        // The pooled variance of n_w·n_z draws: relative sd √(2/(n_w n_z)).
        let rel = (2.0 / (n_w * n_z) as f64).sqrt();
        assert!(
            (p.aleatoric_variance / 4.25 - 1.0).abs() < 5.0 * rel,
            "{p:?}"
        );
        assert!(p.epistemic_entropy.abs() < 0.05, "{p:?}");
    }
    // Biases alternating ±1: the epistemic variance is their spread, n_w/(n_w − 1).
    let split: Vec<f64> = (0..n_w)
        .flat_map(|w| [1.0, 2.0, if w % 2 == 0 { 1.0 } else { -1.0 }])
        .collect();
    let parts = model
        .decompose_samples(x.clone(), crate::host::matrix(&split, 3, &device), n_z, 25)
        .unwrap();
    // The cross term of the ±1 and each draw's inner-mean error `e` (variance V/n_z) dominates
    // the estimate's error: sd ≈ 2√(n_w V/n_z)/(n_w − 1).
    let expected = n_w as f64 / (n_w - 1) as f64;
    let sd = 2.0 * (n_w as f64 * 4.25 / n_z as f64).sqrt() / (n_w - 1) as f64;
    for p in &parts {
        assert!((p.epistemic_variance - expected).abs() < 5.0 * sd, "{p:?}");
        assert!(p.epistemic_entropy > 0.05, "{p:?}");
    }
    // Weights of the wrong width are named.
    let err = model
        .decompose_samples(x, crate::host::matrix(&[1.0, 2.0], 2, &device), n_z, 25)
        .unwrap_err();
    assert!(err.to_string().contains("weights"), "{err}");
}

/// A network's joint draws carry `ln q` from their own noise: on a well-conditioned full-rank
/// layer it equals the density of the draws by the triangular solve.
#[test]
fn network_draws_with_log_q_agree_with_the_layers_densities() {
    let device = crate::device();
    let _guard = seeded(&device, 87);
    for family in [
        crate::posterior::PosteriorConfig::FullRank(FullRankConfig::new()),
        crate::posterior::PosteriorConfig::mean_field(),
    ] {
        let (net, _, _, _, _) = linear_problem_with(10, family, &device);
        let (draws, log_q) = net.draws_with_log_q(50).unwrap();
        let expected = to_vec(net.head.params.log_q(&draws[0]).unwrap());
        for (a, b) in to_vec(log_q).iter().zip(&expected) {
            assert!((a - b).abs() < 1e-3 * b.abs().max(1.0), "{a} vs {b}");
        }
    }
}
