use super::*;
use crate::dist::{Prior, WeightPrior};
use crate::testing::{seeded, test_device, to_vec};
use burn::tensor::{Device, Distribution};

fn every_family() -> Vec<PosteriorConfig> {
    vec![
        PosteriorConfig::point(),
        PosteriorConfig::mean_field(),
        PosteriorConfig::radial(),
        PosteriorConfig::mc_dropout(0.3),
        PosteriorConfig::drop_connect(0.3),
        PosteriorConfig::low_rank(2),
        PosteriorConfig::full_rank(),
    ]
}

/// Scales of order 0.3–1 so that sampling error, not the mean, dominates the checks.
fn wide(config: PosteriorConfig) -> PosteriorConfig {
    let scale = ScaleInit::new().with_rho(0.0).with_rho_std(0.3);
    match config {
        PosteriorConfig::MeanField(c) => PosteriorConfig::MeanField(c.with_scale(scale)),
        PosteriorConfig::Radial(c) => PosteriorConfig::Radial(c.with_scale(scale)),
        PosteriorConfig::LowRank(c) => {
            PosteriorConfig::LowRank(c.with_scale(scale).with_factor_init_std(0.4))
        }
        PosteriorConfig::FullRank(c) => PosteriorConfig::FullRank(c.with_scale(scale)),
        other => other,
    }
}

fn posterior(config: &PosteriorConfig, device: &Device) -> AnyPosterior<2> {
    let mean = Tensor::<2>::random([3, 4], Distribution::Normal(0.0, 1.0), device);
    let spec = TensorSpec {
        shape: [3, 4],
        input_axis: Some(0),
    };
    config.init(mean, &spec)
}

fn column_moments(values: &[f64], n: usize, width: usize) -> (Vec<f64>, Vec<f64>) {
    let mut mean = vec![0.0; width];
    let mut var = vec![0.0; width];
    for r in values.chunks(width) {
        for (j, v) in r.iter().enumerate() {
            mean[j] += v / n as f64;
        }
    }
    for r in values.chunks(width) {
        for (j, v) in r.iter().enumerate() {
            var[j] += (v - mean[j]).powi(2) / (n - 1) as f64;
        }
    }
    (mean, var)
}

/// Every family's draws have its stated mean and marginal variance, entry by entry, to within
/// 5 standard errors of 20 000 draws (the variance's standard error from the sample fourth
/// moment).
#[test]
fn draws_match_the_mean_and_marginal_variance_of_every_family() {
    let device = test_device();
    let _guard = seeded(&device, 40);
    let n = 20_000;
    for config in every_family().into_iter().map(wide) {
        let q = posterior(&config, &device).dist();
        let draws = to_vec(q.sample(n));
        let (mean, var) = column_moments(&draws, n, 12);
        let want_mean = to_vec(q.mean());
        let want_var = to_vec(q.marginal_variance().expect("every family has one"));
        for j in 0..12 {
            let m4 = draws
                .chunks(12)
                .map(|r| (r[j] - mean[j]).powi(4))
                .sum::<f64>()
                / n as f64;
            let se_mean = (want_var[j] / n as f64).sqrt();
            let se_var = ((m4 - var[j] * var[j]).max(0.0) / n as f64).sqrt();
            let name = config.name();
            assert!(
                (mean[j] - want_mean[j]).abs() <= 5.0 * se_mean + 1e-6,
                "{name} entry {j}: mean {} vs {}",
                mean[j],
                want_mean[j]
            );
            assert!(
                (var[j] - want_var[j]).abs() <= 5.0 * se_var + 1e-6,
                "{name} entry {j}: variance {} vs {}",
                var[j],
                want_var[j]
            );
        }
    }
}

/// Where `ln q` exists, `E_q[ln q(w) − ln p(w)]` by 200 000 draws matches the KL, for a Gaussian
/// prior with tensor parameters and for the scale mixture; the entropy matches `−E_q ln q`
/// (5 standard errors: a few hundredths of a nat for mean-field and low-rank; ≈ 0.15 for radial,
/// whose `ln q` carries the high-variance `(n−1) ln‖v‖`).
#[test]
fn kl_and_entropy_match_monte_carlo_where_the_density_exists() {
    let device = test_device();
    let _guard = seeded(&device, 41);
    let n = 200_000;
    let tensor_prior = WeightPrior::gaussian(
        Tensor::<2>::random([3, 4], Distribution::Normal(0.2, 0.5), &device),
        Tensor::<2>::random([3, 4], Distribution::Uniform(0.5, 1.5), &device),
    );
    let mixture_draws = 4000;
    let mixture = Prior::ScaleMixture {
        pi: 0.5,
        sigma1: 1.0,
        sigma2: 0.1,
    }
    .weight_prior::<2>(mixture_draws, &device);
    for config in [
        PosteriorConfig::mean_field(),
        PosteriorConfig::radial(),
        PosteriorConfig::low_rank(2),
    ]
    .into_iter()
    .map(wide)
    {
        let q = posterior(&config, &device).dist();
        let w = q.sample(n);
        let log_q = to_vec(q.log_q(w.clone()).unwrap());
        for (label, prior) in [("tensor Gaussian", &tensor_prior), ("mixture", &mixture)] {
            let log_p = to_vec(prior.log_prob(w.clone()));
            let diff: Vec<f64> = log_q.iter().zip(&log_p).map(|(a, b)| a - b).collect();
            let (m, se) = crate::metrics::mean_and_standard_error(&diff);
            let se = se.expect("at least two draws");
            let kl = to_vec(q.kl(prior))[0];
            // The mixture's cross-entropy is itself a Monte Carlo average of `−ln p(w)` over
            // `mixture_draws` draws: its standard error, from the spread of `ln p` here, adds in
            // quadrature (the Gaussian's is closed form).
            let se_kl = if label == "mixture" {
                let (_, se_log_p) = crate::metrics::mean_and_standard_error(&log_p);
                let se_log_p = se_log_p.expect("at least two draws");
                se_log_p * (n as f64 / mixture_draws as f64).sqrt()
            } else {
                0.0
            };
            let tol = 5.0 * se.hypot(se_kl);
            assert!(
                (kl - m).abs() < tol,
                "{} / {label}: KL {kl} vs Monte Carlo {m} ± {se} (the KL's own ± {se_kl})",
                config.name()
            );
        }
        let (m, se) = crate::metrics::mean_and_standard_error(&log_q);
        let se = se.expect("at least two draws");
        let h = to_vec(q.entropy())[0];
        assert!(
            (h + m).abs() < 5.0 * se,
            "{}: H {h} vs {}",
            config.name(),
            -m
        );
    }
}

/// The low-rank KL and density against a dense f64 computation with the full covariance
/// `Σ = F Fᵀ + diag σ²` (Cholesky on the host).
#[test]
fn low_rank_kl_and_density_match_the_dense_closed_form() {
    let device = test_device();
    let _guard = seeded(&device, 42);
    let config = wide(PosteriorConfig::low_rank(3));
    let AnyPosterior::LowRank(lr) = posterior(&config, &device) else {
        unreachable!()
    };
    let d = lr.dist();
    let n = 12;
    let (mu, f, s) = (
        to_vec(d.mu.clone()),
        to_vec(d.factor.clone()),
        to_vec(d.sigma.clone()),
    );
    let mut sigma = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..n {
            sigma[i][j] = (0..3).map(|k| f[i * 3 + k] * f[j * 3 + k]).sum::<f64>()
                + if i == j { s[i] * s[i] } else { 0.0 };
        }
    }
    let chol = host_cholesky(&sigma);
    let log_det: f64 = (0..n).map(|i| 2.0 * chol[i][i].ln()).sum();
    // KL to N(μ₀, s₀² I) with μ₀ = 0.1, s₀ = 0.8.
    let (m0, s0) = (0.1, 0.8);
    let trace: f64 = (0..n).map(|i| sigma[i][i]).sum::<f64>() / (s0 * s0);
    let quad: f64 = mu.iter().map(|m| (m - m0).powi(2)).sum::<f64>() / (s0 * s0);
    let kl_dense = 0.5 * (trace + quad - n as f64 + 2.0 * n as f64 * f64::ln(s0) - log_det);
    let prior = Prior::Gaussian { mean: m0, std: s0 }.weight_prior::<2>(1, &device);
    let kl = to_vec(d.kl(&prior))[0];
    assert!(
        (kl - kl_dense).abs() < 1e-4 * kl_dense.abs().max(1.0),
        "{kl} vs {kl_dense}"
    );
    // ln q at one point: −½ rᵀΣ⁻¹r − ½ ln det Σ − (n/2) ln 2π, with Σ⁻¹r by two triangular solves.
    let w: Vec<f64> = (0..n)
        .map(|i| mu[i] + 0.3 * (i as f64 - 5.0) / 5.0)
        .collect();
    let r: Vec<f64> = w.iter().zip(&mu).map(|(a, b)| a - b).collect();
    let y = host_forward(&chol, &r);
    let dense = -0.5 * y.iter().map(|v| v * v).sum::<f64>()
        - 0.5 * log_det
        - n as f64 * crate::special::HALF_LN_2PI;
    let wt = Tensor::<1>::from_floats(
        w.iter().map(|v| *v as f32).collect::<Vec<_>>().as_slice(),
        &device,
    )
    .reshape([1, n]);
    let got = to_vec(d.log_q(wt).unwrap())[0];
    assert!((got - dense).abs() < 1e-3, "{got} vs {dense}");
}

/// The full-rank density, entropy and KL against a dense f64 computation with `Σ = L Lᵀ`, for a
/// factor with a random strict lower triangle.
#[test]
fn full_rank_kl_and_density_match_the_dense_closed_form() {
    let device = test_device();
    let _guard = seeded(&device, 43);
    let AnyPosterior::FullRank(mut fr) = posterior(&wide(PosteriorConfig::full_rank()), &device)
    else {
        unreachable!()
    };
    let n = 12;
    let off = Tensor::<2>::random([n, n], Distribution::Normal(0.0, 0.3), &device);
    fr.scale_tril = burn::module::Param::from_tensor(fr.scale_tril.val() + off.tril(-1));
    let d = fr.dist();
    let (mu, l) = (to_vec(d.mu.clone()), to_vec(d.tril.clone()));
    let chol: Vec<Vec<f64>> = (0..n).map(|i| l[i * n..(i + 1) * n].to_vec()).collect();
    for (i, row) in chol.iter().enumerate() {
        assert!(
            row[i] > 0.0 && row[i + 1..].iter().all(|v| *v == 0.0),
            "{row:?}"
        );
    }
    let log_det: f64 = (0..n).map(|i| 2.0 * chol[i][i].ln()).sum();
    let var: Vec<f64> = chol.iter().map(|r| r.iter().map(|v| v * v).sum()).collect();
    let got_var = to_vec(d.marginal_variance().unwrap());
    for (a, b) in got_var.iter().zip(&var) {
        assert!((a - b).abs() < 1e-5, "{got_var:?} vs {var:?}");
    }
    let entropy = 0.5 * log_det + n as f64 * (crate::special::HALF_LN_2PI + 0.5);
    assert!((to_vec(d.entropy())[0] - entropy).abs() < 1e-4);
    let (m0, s0) = (0.1, 0.8);
    let trace: f64 = var.iter().sum::<f64>() / (s0 * s0);
    let quad: f64 = mu.iter().map(|m| (m - m0).powi(2)).sum::<f64>() / (s0 * s0);
    let kl_dense = 0.5 * (trace + quad - n as f64 + 2.0 * n as f64 * f64::ln(s0) - log_det);
    let prior = Prior::Gaussian { mean: m0, std: s0 }.weight_prior::<2>(1, &device);
    let kl = to_vec(d.kl(&prior))[0];
    assert!((kl - kl_dense).abs() < 1e-4 * kl_dense.abs().max(1.0));
    let w: Vec<f64> = (0..n)
        .map(|i| mu[i] + 0.3 * (i as f64 - 5.0) / 5.0)
        .collect();
    let r: Vec<f64> = w.iter().zip(&mu).map(|(a, b)| a - b).collect();
    let y = host_forward(&chol, &r);
    let dense = -0.5 * y.iter().map(|v| v * v).sum::<f64>()
        - 0.5 * log_det
        - n as f64 * crate::special::HALF_LN_2PI;
    let wt = crate::host::matrix(&w, n, &device);
    let got = to_vec(d.log_q(wt).unwrap())[0];
    assert!((got - dense).abs() < 1e-3, "{got} vs {dense}");
}

fn host_cholesky(a: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let n = a.len();
    let mut l = vec![vec![0.0; n]; n];
    for j in 0..n {
        let s: f64 = (0..j).map(|m| l[j][m] * l[j][m]).sum();
        l[j][j] = (a[j][j] - s).sqrt();
        for i in j + 1..n {
            let s: f64 = (0..j).map(|m| l[i][m] * l[j][m]).sum();
            l[i][j] = (a[i][j] - s) / l[j][j];
        }
    }
    l
}

fn host_forward(l: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; b.len()];
    for i in 0..b.len() {
        let s: f64 = (0..i).map(|m| l[i][m] * y[m]).sum();
        y[i] = (b[i] - s) / l[i][i];
    }
    y
}

#[test]
fn shaped_draws_put_the_sample_axis_first() {
    let _guard = seeded(&test_device(), 101);
    let device = test_device();
    let q = posterior(&PosteriorConfig::mean_field(), &device).dist();
    let w: Tensor<3> = q.sample_shaped(5);
    assert_eq!(w.dims(), [5, 3, 4]);
}

/// A unit mask drops whole rows of a dense weight (input units); DropConnect drops entries.
#[test]
fn unit_masks_drop_rows_and_weight_masks_drop_entries() {
    let device = test_device();
    let _guard = seeded(&device, 43);
    let mean = Tensor::<2>::ones([16, 8], &device);
    let spec = TensorSpec {
        shape: [16, 8],
        input_axis: Some(0),
    };
    let units = PosteriorConfig::mc_dropout(0.5)
        .init(mean.clone(), &spec)
        .dist();
    let w = to_vec(units.sample(1));
    for r in w.chunks(8) {
        assert!(
            r.iter().all(|v| *v == r[0]),
            "a row shares one mask entry: {r:?}"
        );
    }
    assert!(w.chunks(8).any(|r| r[0] == 0.0) && w.chunks(8).any(|r| r[0] == 2.0));
    let weights = PosteriorConfig::drop_connect(0.5).init(mean, &spec).dist();
    let w = to_vec(weights.sample(1));
    assert!(
        w.chunks(8).any(|r| r.iter().any(|v| *v != r[0])),
        "entries vary within rows"
    );
}

/// Gal's KL is the weight decay `(1−p)/(2σ₀²)‖M‖²` plus `Σ ln(σ₀√2π)`; a bias (p = 0) and a
/// point estimate pay `−ln p(w)`.
#[test]
fn dropout_kl_is_gals_weight_decay_and_point_kl_is_the_negative_log_prior() {
    let device = test_device();
    let m = Tensor::<2>::from_floats([[0.5, -1.0], [2.0, 0.0]], &device);
    let spec = TensorSpec {
        shape: [2, 2],
        input_axis: Some(0),
    };
    let prior = Prior::from_length_scale(0.5).weight_prior::<2>(1, &device);
    let m2 = 0.25 + 1.0 + 4.0;
    let constant = 4.0 * (2.0f64.ln() + crate::special::HALF_LN_2PI);
    let dropout = PosteriorConfig::mc_dropout(0.1)
        .init(m.clone(), &spec)
        .dist();
    let kl = to_vec(dropout.kl(&prior))[0];
    let want = 0.9 * 0.25 / 2.0 * m2 + constant;
    assert!((kl - want).abs() < 1e-5, "{kl} vs {want}");
    // The same prior as tensors (no scalar shortcut) gives the same KL.
    let tensors = WeightPrior::gaussian(
        Tensor::<2>::zeros([2, 2], &device),
        Tensor::<2>::full([2, 2], 2.0, &device),
    );
    let kl_tensors = to_vec(dropout.kl(&tensors))[0];
    assert!((kl_tensors - want).abs() < 1e-5, "{kl_tensors} vs {want}");
    let point = PosteriorConfig::point().init(m, &spec).dist();
    let kl = to_vec(point.kl(&prior))[0];
    let want = 0.25 / 2.0 * m2 + constant;
    assert!((kl - want).abs() < 1e-5, "{kl} vs {want}");
    assert!((to_vec(point.kl(&tensors))[0] - want).abs() < 1e-5);
}

#[test]
fn dropout_noise_has_unit_mean_and_the_dropout_variance() {
    let device = test_device();
    let _guard = seeded(&device, 31);
    let n = 100_000;
    for noise in [DropoutNoise::Bernoulli, DropoutNoise::Gaussian] {
        let d = McDropout { p: 0.2, noise };
        let e = to_vec(d.forward(Tensor::<1>::ones([n], &device)));
        let (mean, se) = crate::metrics::mean_and_standard_error(&e);
        let se = se.expect("at least two draws");
        let var = se * se * n as f64;
        let alpha: f64 = 0.2 / 0.8;
        assert!(
            (mean - 1.0).abs() < 5.0 * (alpha / n as f64).sqrt(),
            "{noise:?}: mean {mean}"
        );
        // Var of the sample variance is (μ₄ − α²)/n with μ₄ ≤ 3α² + α for these noises.
        let se_var = ((3.0 * alpha * alpha + alpha) / n as f64).sqrt();
        assert!((var - alpha).abs() < 5.0 * se_var, "{noise:?}: var {var}");
    }
}

/// A trained posterior as the next prior: `KL(q ‖ from_posterior(q)) = 0` for mean-field; a
/// point mass cannot be a prior.
#[test]
fn a_posterior_becomes_the_next_prior() {
    let device = test_device();
    let _guard = seeded(&device, 44);
    let q = posterior(&wide(PosteriorConfig::mean_field()), &device).dist();
    let prior = WeightPrior::from_posterior(&q).unwrap();
    assert!(to_vec(q.kl(&prior))[0].abs() < 1e-4);
    let point = posterior(&PosteriorConfig::point(), &device).dist();
    let err = WeightPrior::from_posterior(&point).unwrap_err();
    assert!(
        err.to_string().contains("positive marginal variance"),
        "{err}"
    );
}

#[test]
fn invalid_family_settings_name_the_field() {
    let err = PosteriorConfig::mc_dropout(1.0).validate().unwrap_err();
    assert_eq!((err.config, err.field), ("DropoutConfig", "p"));
    let err = PosteriorConfig::low_rank(0).validate().unwrap_err();
    assert_eq!(err.field, "rank");
    let bad = ScaleInit::new().with_rho(f64::NAN);
    let err = PosteriorConfig::Radial(RadialConfig::new().with_scale(bad))
        .validate()
        .unwrap_err();
    assert_eq!((err.config, err.field), ("RadialConfig", "scale.rho"));
    let bad = ScaleInit::new().with_rho_std(-1.0);
    let err = PosteriorConfig::MeanField(MeanFieldConfig::new().with_scale(bad))
        .validate()
        .unwrap_err();
    assert_eq!(
        (err.config, err.field),
        ("MeanFieldConfig", "scale.rho_std")
    );
}

/// ‖(w − μ)/σ‖ of a radial draw is |r|, r ~ N(0, 1): a half-normal.
#[test]
fn radial_normalised_deviation_is_half_normal() {
    let device = test_device();
    let _guard = seeded(&device, 21);
    let q = posterior(&wide(PosteriorConfig::radial()), &device);
    let AnyPosterior::Radial(p) = q else {
        unreachable!()
    };
    let d = p.dist();
    let n = 20_000;
    let v = (d.sample(n) - row(d.mu.clone())) / row(d.sigma.clone());
    let norms = to_vec(v.square().sum_dim(1).sqrt());
    let (mean, se) = crate::metrics::mean_and_standard_error(&norms);
    let se = se.expect("at least two draws");
    let m = (2.0 / std::f64::consts::PI).sqrt();
    assert!((mean - m).abs() < 5.0 * se, "mean |r| {mean} vs {m}");
    // With one entry the radial posterior is the Gaussian: the constant is −½ ln 2πe.
    assert!((radial_entropy_constant(1) + crate::special::HALF_LN_2PI + 0.5).abs() < 1e-10);
}

/// The radial density is unbounded at `μ`, where an f32 draw of tiny radius can land: `ln q`
/// and its gradients stay finite there (the floor of `‖v‖²`), far above any ordinary draw's.
#[test]
fn radial_log_density_stays_finite_where_a_draw_rounds_to_the_mean() {
    let device = test_device().autodiff();
    let _guard = seeded(&device, 22);
    let mu = Tensor::<2>::random([3, 4], Distribution::Normal(0.0, 1.0), &device).require_grad();
    let sigma =
        Tensor::<2>::random([3, 4], Distribution::Uniform(0.1, 0.5), &device).require_grad();
    let d = RadialDist::new(mu.clone(), sigma.clone());
    let draws = Tensor::cat(vec![row(mu.clone()).detach(), d.sample(5).detach()], 0);
    let log_q = d.log_q(draws).unwrap();
    let values = to_vec(log_q.clone());
    assert!(values.iter().all(|v| v.is_finite()), "{values:?}");
    let ordinary = values[1..].iter().copied().fold(f64::MIN, f64::max);
    assert!(values[0] > ordinary + 100.0, "{values:?}");
    let grads = log_q.sum().backward();
    for (name, g) in [("μ", mu.grad(&grads)), ("σ", sigma.grad(&grads))] {
        let g = to_vec(g.expect("a gradient"));
        assert!(g.iter().all(|v| v.is_finite()), "d{name}: {g:?}");
    }
}

/// Under [`ScaleParam::LogVariance`], `ρ` is `ln σ²` in every location-scale family (σ = e^{ρ/2},
/// the low-rank factor's scale too), and the fused kernels read it as such
/// ([`crate::fused::SigmaRule::LogVariance`]); softplus stays the default.
#[test]
fn log_variance_scales_are_the_exponential_of_half_rho() {
    let _guard = seeded(&test_device(), 100);
    let device = test_device();
    let scale = ScaleInit::new()
        .with_param(ScaleParam::LogVariance)
        .with_rho(-3.0)
        .with_rho_std(0.5);
    assert_eq!(ScaleInit::new().param, ScaleParam::Softplus);
    let mean = Tensor::<2>::zeros([3, 4], &device);
    let spec = TensorSpec {
        shape: [3, 4],
        input_axis: Some(0),
    };
    let close = |sigma: Tensor<2>, rho: Tensor<2>| {
        for (s, r) in to_vec(sigma).into_iter().zip(to_vec(rho)) {
            assert!((s - (0.5 * r).exp()).abs() <= 1e-6 * s, "σ {s}, ρ {r}");
        }
    };
    let mf = MeanFieldConfig::new()
        .with_scale(scale)
        .init(mean.clone(), &spec);
    close(mf.dist().sigma, mf.loc.rho.val());
    let rule = |p: ScaleParam| p.sigma_rule();
    assert_eq!(rule(mf.loc.param), crate::fused::SigmaRule::LogVariance);
    let radial = RadialConfig::new()
        .with_scale(scale)
        .init(mean.clone(), &spec);
    close(radial.dist().sigma, radial.loc.rho.val());
    assert_eq!(rule(radial.loc.param), crate::fused::SigmaRule::LogVariance);
    let low = LowRankConfig::new()
        .with_scale(scale)
        .init(mean.clone(), &spec);
    close(low.dist().sigma, low.rho.val());
    assert!((low.factor_scale - (-1.5f64).exp()).abs() < 1e-12);
    let softplus = MeanFieldConfig::new().init(mean, &spec);
    assert_eq!(rule(softplus.loc.param), crate::fused::SigmaRule::Softplus);
    for param in [
        ScaleParam::Softplus,
        ScaleParam::LogVariance,
        ScaleParam::SigmoidVariance { bound: 5.0 },
    ] {
        for sigma in [1e-4, 0.3, 2.0] {
            let back = param.sigma_of(param.rho_of(sigma));
            assert!(
                (back - sigma).abs() <= 1e-12 * sigma.max(1.0),
                "{param:?} {sigma}"
            );
        }
    }
}

/// Depeweg's `σ² = λ·sigmoid(ρ)` (eq. 3.20): the code's `ρ = −10` gives `σ² = λ·4.54·10⁻⁵`, the
/// variance stays below `λ` for any `ρ`, the tensor and scalar forms agree, and a bound that is
/// not a positive number is refused with the field named.
#[test]
fn sigmoid_variances_stay_below_their_bound() {
    let device = test_device();
    let param = ScaleParam::SigmoidVariance { bound: 2.0 };
    let rho = Tensor::<1>::from_floats([-10.0, 0.0, 40.0, -60.0], &device);
    let sigma = to_vec(param.sigma(rho));
    let want = [
        2.0 * 4.539_786_870_243_44e-5,
        1.0,
        2.0,
        2.0 * (-60f64).exp(),
    ];
    for (s, w) in sigma.iter().zip(want) {
        assert!((s * s - w).abs() <= 1e-5 * w, "σ² {} vs {w}", s * s);
        assert!(s * s <= 2.0 * (1.0 + 1e-6), "σ² {} above the bound", s * s);
    }
    assert!((param.sigma_of(-10.0).powi(2) - want[0]).abs() < 1e-12);
    let err = MeanFieldConfig::new()
        .with_scale(ScaleInit::new().with_param(ScaleParam::SigmoidVariance { bound: 0.0 }))
        .validate()
        .unwrap_err();
    assert_eq!(err.field, "scale.param.bound");
}
