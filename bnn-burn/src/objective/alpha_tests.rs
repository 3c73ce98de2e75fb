use super::*;
use crate::testing::{test_device, to_vec};
use burn::tensor::{Distribution, Tensor};

const K: usize = 3;
const B: usize = 4;

fn context(n_train: usize) -> StepContext {
    StepContext::new(0, n_train, B)
}

/// Per-draw log-likelihoods `[K, B]`, log-ratios `[K]` and latent log-ratios `[K, B]`.
fn values() -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let ll = (0..K * B)
        .map(|i| -0.3 - 0.7 * ((i * 5) % 7) as f64)
        .collect();
    let ratio = vec![35.0, 12.0, -4.0];
    let local = (0..K * B)
        .map(|i| 0.2 * ((i * 3) % 5) as f64 - 0.4)
        .collect();
    (ll, ratio, local)
}

fn terms(ll: &[f64], ratio: &[f64], local: Option<&[f64]>, kl: f64) -> StepTerms {
    let device = test_device();
    let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
    StepTerms {
        log_likelihood: Tensor::<1>::from_floats(f32s(ll).as_slice(), &device).reshape([K, B]),
        kl: crate::objective::KlTerm::new(Tensor::from_floats([kl as f32], &device)),
        local_kl: None,
        log_ratio: Some(Tensor::from_floats(f32s(ratio).as_slice(), &device)),
        local_log_ratio: local
            .map(|l| Tensor::<1>::from_floats(f32s(l).as_slice(), &device).reshape([K, B])),
    }
}

fn alpha(a: f64, elbo_below: f64, bound: AlphaBound) -> AlphaDivergence {
    AlphaConfig::new()
        .with_alpha(a)
        .with_elbo_below(elbo_below)
        .with_bound(bound)
        .init()
        .unwrap()
}

/// `−(1/(αB)) Σ_n ln (1/K) Σ_k exp(α a_{kn})` in `f64`.
fn energy_f64(a: &[f64], alpha: f64) -> f64 {
    (0..B)
        .map(|n| {
            let mean = (0..K).map(|k| (alpha * a[k * B + n]).exp()).sum::<f64>() / K as f64;
            -mean.ln() / (alpha * B as f64)
        })
        .sum()
}

#[test]
fn black_box_alpha_is_the_tied_energy_with_the_partitions_cancelled() {
    let (ll, ratio, local) = values();
    let n = 50;
    for a in [1.0, 0.5, 0.1] {
        let bb = alpha(a, 1e-3, AlphaBound::BlackBox);
        // Without latents: a_{kn} = ℓ_{kn} − r_k/N.
        let shifted: Vec<f64> = (0..K * B)
            .map(|i| ll[i] - ratio[i / B] / n as f64)
            .collect();
        let got = to_vec(
            bb.loss(terms(&ll, &ratio, None, 7.0), &context(n))
                .unwrap()
                .loss,
        )[0];
        let want = energy_f64(&shifted, a);
        assert!(
            (got - want).abs() < 1e-5 * want.abs(),
            "α = {a}: {got} vs {want}"
        );
        // With latents: a_{kn} = ℓ_{kn} − r_k/N − r^z_{kn} (one site per row, no 1/N).
        let with_z: Vec<f64> = (0..K * B).map(|i| shifted[i] - local[i]).collect();
        let got = to_vec(
            bb.loss(terms(&ll, &ratio, Some(&local), 7.0), &context(n))
                .unwrap()
                .loss,
        )[0];
        let want = energy_f64(&with_z, a);
        assert!(
            (got - want).abs() < 1e-5 * want.abs(),
            "α = {a}: {got} vs {want}"
        );
    }
    // The Rényi bound: the closed-form KL outside.
    let vr = alpha(0.5, 1e-3, AlphaBound::VariationalRenyi);
    let got = to_vec(
        vr.loss(terms(&ll, &ratio, None, 7.0), &context(n))
            .unwrap()
            .loss,
    )[0];
    let want = energy_f64(&ll, 0.5) + 7.0 / n as f64;
    assert!((got - want).abs() < 1e-5 * want.abs(), "{got} vs {want}");
}

/// `(1/α) ln mean_k e^{α a_k} = mean a + (α/2) Var a + O(α²)`: the energy approaches the ELBO with
/// the Monte Carlo KL, `mean NLL + mean_k r_k/N`, linearly in `α`; below `elbo_below` the exact
/// ELBO (closed-form KL) is used.
#[test]
fn as_alpha_goes_to_zero_the_energy_becomes_the_elbo() {
    let (ll, ratio, _) = values();
    let n = 50;
    let mc_elbo = -ll.iter().sum::<f64>() / (K * B) as f64
        + ratio.iter().sum::<f64>() / (K as f64 * n as f64);
    // The first-order gap, (α/2)·mean_n Var_k a_{kn}.
    let a: Vec<f64> = (0..K * B)
        .map(|i| ll[i] - ratio[i / B] / n as f64)
        .collect();
    let spread = (0..B)
        .map(|j| {
            let m = (0..K).map(|k| a[k * B + j]).sum::<f64>() / K as f64;
            (0..K).map(|k| (a[k * B + j] - m).powi(2)).sum::<f64>() / K as f64
        })
        .sum::<f64>()
        / B as f64;
    let mut gaps = Vec::new();
    for a in [0.1, 0.01] {
        let bb = alpha(a, 0.0, AlphaBound::BlackBox);
        assert!(!bb.is_exact_elbo());
        let got = to_vec(
            bb.loss(terms(&ll, &ratio, None, 7.0), &context(n))
                .unwrap()
                .loss,
        )[0];
        let gap = mc_elbo - got;
        assert!(
            (gap - a / 2.0 * spread).abs() < 0.2 * a / 2.0 * spread + 1e-4,
            "α = {a}: gap {gap}, first order {}",
            a / 2.0 * spread
        );
        gaps.push(gap);
    }
    assert!(gaps[1] < gaps[0] / 5.0, "{gaps:?}");
    // Depeweg's "VB", α = 10⁻⁶: the exact ELBO, closed-form KL 7.
    let vb = alpha(1e-6, 1e-3, AlphaBound::BlackBox);
    assert!(vb.is_exact_elbo() && !vb.needs_log_ratio());
    let got = to_vec(
        vb.loss(terms(&ll, &ratio, None, 7.0), &context(n))
            .unwrap()
            .loss,
    )[0];
    let elbo = -ll.iter().sum::<f64>() / (K * B) as f64 + 7.0 / n as f64;
    assert!((got - elbo).abs() < 1e-5, "{got} vs {elbo}");
    assert_eq!(vb.kl_weight(&context(n)), Some(1.0 / n as f64));
    assert_eq!(
        alpha(0.5, 1e-3, AlphaBound::BlackBox).kl_weight(&context(n)),
        None
    );
}

/// The tied site in the thesis's natural parameters (Depeweg eqs. 3.16, 3.18 with the digest's
/// `m²/(2v)` erratum), `log f(w) = (1/N)[(v − λ)/(2λv)·w² + (m/v)·w]` per weight, and the
/// log-partitions `ln Z_q = ½ ln 2πv + m²/(2v)`, `ln Z_0 = ½ ln 2πλ`, satisfy
/// `N·log f(w) − ln Z_q + ln Z_0 = ln q(w) − ln p(w)` for every `w`: the identity that cancels
/// the partitions in [`AlphaDivergence`]; its average over `q` is the closed-form KL.
#[test]
fn the_tied_site_and_partitions_reduce_to_the_log_ratio_and_the_kl() {
    let (lambda, n) = (1.3f64, 40.0f64);
    let ln_normal = |w: f64, m: f64, v: f64| {
        -0.5 * (2.0 * std::f64::consts::PI * v).ln() - (w - m).powi(2) / (2.0 * v)
    };
    for (m, v) in [(0.3, 0.01), (-1.2, 0.5), (0.0, 2.0)] {
        let log_z_q = 0.5 * (2.0 * std::f64::consts::PI * v).ln() + m * m / (2.0 * v);
        let log_z_0 = 0.5 * (2.0 * std::f64::consts::PI * lambda).ln();
        for w in [-2.0, -0.1, 0.0, 0.7, 3.0] {
            let log_f = ((v - lambda) / (2.0 * lambda * v) * w * w + m / v * w) / n;
            let lhs = n * log_f - log_z_q + log_z_0;
            let rhs = ln_normal(w, m, v) - ln_normal(w, 0.0, lambda);
            assert!(
                (lhs - rhs).abs() < 1e-12,
                "m {m}, v {v}, w {w}: {lhs} vs {rhs}"
            );
        }
        // E_q[N log f] − ln Z_q + ln Z_0 = KL(q ‖ p), the α → 0 limit's KL, with E_q w² = m² + v.
        let expected_n_log_f = (v - lambda) / (2.0 * lambda * v) * (m * m + v) + m * m / v;
        let kl = 0.5 * (v / lambda + m * m / lambda - 1.0 - (v / lambda).ln());
        assert!((expected_n_log_f - log_z_q + log_z_0 - kl).abs() < 1e-12);
    }
}

/// The library's per-draw `ln q(w_k) − ln p(w_k)` of a mean-field layer averages to its
/// closed-form KL within Monte Carlo error (4 standard errors of 4 000 draws), on the fused
/// kernels and on the composition of burn ops, for the softplus scale and Depeweg's
/// `σ² = λ·sigmoid(ρ)`, under the configuration's scalar prior and under a prior with a mean and
/// a standard deviation per weight; both kernels report the same closed-form KL.
#[test]
fn the_layers_log_ratio_averages_to_the_closed_form_kl() {
    use crate::fused::Kernels;
    use crate::layers::{BayesianLinearConfig, Estimator, Pass, WeightConfig};
    use crate::posterior::{MeanFieldConfig, PosteriorConfig, ScaleInit, ScaleParam};
    let device = test_device();
    let _guard = crate::testing::seeded(&device, 5);
    let draws = 4000;
    let params = [
        ScaleParam::Softplus,
        ScaleParam::SigmoidVariance { bound: 2.0 },
    ];
    for (param, per_weight) in params.into_iter().flat_map(|p| [(p, false), (p, true)]) {
        let mut layer = BayesianLinearConfig::new(3, 2)
            .with_weights(
                WeightConfig::of(PosteriorConfig::MeanField(
                    MeanFieldConfig::new()
                        .with_scale(ScaleInit::new().with_rho(-1.0).with_param(param)),
                ))
                .with_estimator(Estimator::Reparameterization),
            )
            .init(&device)
            .unwrap();
        if per_weight {
            crate::layers::tests::tensor_valued_priors(&mut layer.params, &device);
        }
        let mut kls = Vec::new();
        for kernels in [Kernels::Fused, Kernels::Reference] {
            let mut pass = Pass::train(draws, true).with_kernels(kernels);
            let x = Tensor::<3>::random([draws, 1, 3], Distribution::Default, &device);
            layer.run(x, &mut pass);
            let (kl, ratio) = pass.into_terms(&device);
            let (kl, ratio) = (to_vec(kl)[0], to_vec(ratio.unwrap().unwrap()));
            let mean = ratio.iter().sum::<f64>() / draws as f64;
            let sd =
                (ratio.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (draws - 1) as f64).sqrt();
            assert!(
                (mean - kl).abs() < 4.0 * sd / (draws as f64).sqrt(),
                "{param:?}, per-weight prior {per_weight}, {kernels:?}: mean log-ratio {mean} vs \
                 KL {kl} (sd {sd})"
            );
            kls.push(kl);
        }
        assert!(
            (kls[0] - kls[1]).abs() < 1e-5 * kls[1].abs(),
            "{param:?}, per-weight prior {per_weight}: KL {} (fused) vs {} (composition)",
            kls[0],
            kls[1]
        );
    }
}

#[test]
fn bad_alphas_name_the_field() {
    for bad in [0.0, -0.5, f64::NAN, f64::INFINITY] {
        let err = AlphaConfig::new().with_alpha(bad).init().unwrap_err();
        assert_eq!((err.config, err.field), ("AlphaConfig", "alpha"), "{bad}");
    }
    let err = AlphaConfig::new().with_elbo_below(-1.0).init().unwrap_err();
    assert_eq!(err.field, "elbo_below");
}

/// Row weights (w, 0, …, 0) with w = B stand for the first row alone: every bound's per-row
/// terms (the energy, the latents' ratios, the NLL) average as if the batch held that row.
#[test]
fn weighted_rows_average_like_the_rows_they_weigh() {
    let (ll, ratio, local) = values();
    let first = |v: &[f64]| (0..K).map(|k| v[k * B]).collect::<Vec<f64>>();
    let device = test_device();
    let mut w = vec![0.0f32; B];
    w[0] = B as f32;
    let weighted = StepContext {
        row_weights: Some(Tensor::from_floats(w.as_slice(), &device)),
        ..context(50)
    };
    for bound in [AlphaBound::BlackBox, AlphaBound::VariationalRenyi] {
        let o = alpha(0.5, 0.0, bound);
        let all = o
            .loss(terms(&ll, &ratio, Some(&local), 7.0), &weighted)
            .unwrap();
        let one = {
            let (ll1, local1) = (first(&ll), first(&local));
            let device = test_device();
            let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
            let t = StepTerms {
                log_likelihood: Tensor::<1>::from_floats(f32s(&ll1).as_slice(), &device)
                    .reshape([K, 1]),
                kl: crate::objective::KlTerm::new(Tensor::from_floats([7.0], &device)),
                local_kl: None,
                log_ratio: Some(Tensor::from_floats(f32s(&ratio).as_slice(), &device)),
                local_log_ratio: Some(
                    Tensor::<1>::from_floats(f32s(&local1).as_slice(), &device).reshape([K, 1]),
                ),
            };
            o.loss(t, &StepContext::new(0, 50, 1)).unwrap()
        };
        for (a, b) in [(all.loss, one.loss), (all.nll, one.nll)] {
            let (a, b) = (to_vec(a)[0], to_vec(b)[0]);
            assert!(
                (a - b).abs() < 1e-5 * (1.0 + b.abs()),
                "{bound:?}: {a} vs {b}"
            );
        }
    }
}
