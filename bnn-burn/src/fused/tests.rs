//! Every fused op against the composition of burn ops it replaces (same ε), on the test backend;
//! the generator's statistics; the fused optimisers against burn's.

use super::elementwise::VAR_FLOOR;
use super::*;
use crate::posterior::ScaleParam;
use crate::special::softplus;
use crate::testing::{test_device, to_vec};
use burn::module::{Module, Param};
use burn::optim::{AdamConfig, AdamWConfig, GradientsParams};
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Distribution, TensorData};

/// Largest `|a − b|` over the largest `|b|`.
fn rel_err(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f64, |m, x| m.max(x.abs())).max(1e-30);
    a.iter().zip(b).fold(0f64, |m, (x, y)| m.max((x - y).abs())) / scale
}

const TERMS: KlTerms = KlTerms::new(0.1, 1.0 / 0.64, 1.0 / 0.64);

/// `μ`, `ρ` and the rule as the ops take them.
fn loc<const D: usize>(mu: &Tensor<D>, rho: &Tensor<D>, rule: SigmaRule) -> LocScale<D> {
    LocScale {
        mu: mu.clone(),
        rho: rho.clone(),
        rule,
    }
}

/// A prior of scalar terms, or per weight with `[μ₀, σ₀]`.
fn gauss(terms: KlTerms, per_weight: Option<[Tensor<1>; 2]>) -> FusedPrior {
    FusedPrior { terms, per_weight }
}

/// Draws of sub-streams `0..scales.len()` of `key`.
fn draw_spec(key: u64, scales: &[f32], center: bool) -> DrawSpec {
    DrawSpec {
        key,
        scales: scales.to_vec(),
        center,
    }
}

/// `Σ ½(σ²/(dσ₀²) + (μ−μ₀)²/σ₀²) − ln σ` composed of burn ops.
fn kl_reference<const D: usize>(mu: Tensor<D>, sigma: Tensor<D>, terms: KlTerms) -> Tensor<1> {
    let quad = sigma.clone().square() * terms.inv_var_sigma as f64
        + (mu - terms.mean as f64).square() * terms.inv_var_mu as f64;
    (quad * 0.5 - sigma.log()).sum()
}

/// A per-weight prior `(μ₀, σ₀)` for the `[13, 70]` parameters of [`params`], flat: means
/// `N(0.1, 0.3²)`, standard deviations `U(0.2, 1.5)`.
fn per_weight_prior(device: &Device) -> [Tensor<1>; 2] {
    let mean = Tensor::<1>::random([13 * 70], Distribution::Normal(0.1, 0.3), device);
    let std = Tensor::<1>::random([13 * 70], Distribution::Uniform(0.2, 1.5), device);
    [mean, std]
}

/// The KL terms of [`per_weight_prior`] by burn ops,
/// `Σ ½(σ²·var_scale + (μ − μ₀)²)/σ₀² − ln σ + ln σ₀` (`var_scale` the marginal variance's
/// scale).
fn per_weight_reference(
    mu: Tensor<2>,
    sigma: Tensor<2>,
    var_scale: f32,
    [mean, std]: &[Tensor<1>; 2],
) -> Tensor<1> {
    let (mean, std) = (
        mean.clone().reshape([13, 70]),
        std.clone().reshape([13, 70]),
    );
    let spread = sigma.clone().square() * f64::from(var_scale) + (mu - mean).square();
    (spread / (std.clone().square() * 2.0) - sigma.log() + std.log()).sum()
}

/// `(μ, ρ, R)` of shape `[13, 70]` (not a multiple of the 64-element block) on an autodiff device.
fn params() -> (Tensor<2>, Tensor<2>, Tensor<2>) {
    let device = test_device().autodiff();
    let mu = Tensor::<2>::random([13, 70], Distribution::Normal(0.0, 0.5), &device);
    let rho = Tensor::<2>::random([13, 70], Distribution::Normal(-3.0, 1.5), &device);
    let r = Tensor::<2>::random([3, 13 * 70], Distribution::Normal(0.0, 1.0), &device);
    (mu.require_grad(), rho.require_grad(), r)
}

fn grads_of(loss: Tensor<1>, mu: &Tensor<2>, rho: &Tensor<2>) -> (Vec<f64>, Vec<f64>) {
    let g = loss.backward();
    (
        to_vec(mu.grad(&g).expect("dμ")),
        to_vec(rho.grad(&g).expect("dρ")),
    )
}

/// Under each parameterisation of `σ`, centred or not: the draws, the KL and `dμ, dρ` of
/// `Σ w ⊙ R + λ·KL` (the KL folded into the draws' backward pass, whose tape then has the KL's
/// row; scalar terms, and a per-weight prior) and of `Σ w ⊙ R` alone (no KL: the draws' rows
/// only) against burn ops on the same `ε`.
#[test]
fn sample_and_its_folded_kl_match_the_composition_of_burn_ops() {
    let _guard = crate::testing::seeded(&test_device(), 11);
    let (mu, rho, r3) = params();
    let prior = per_weight_prior(&mu.device());
    let (key, weight) = (7u64, 0.37f32);
    let params = [
        ScaleParam::Softplus,
        ScaleParam::LogVariance,
        ScaleParam::SigmoidVariance { bound: 0.3 },
    ];
    let cases = params
        .into_iter()
        .flat_map(|p| [(p, false), (p, true)])
        .flat_map(|(p, c)| [(p, c, true), (p, c, false)])
        .flat_map(|(p, c, f)| [(p, c, f, 1), (p, c, f, 3)])
        .flat_map(|(p, c, f, n)| [(p, c, f, n, false), (p, c, f, n, true)])
        // A per-weight prior only matters to a KL: folded cases only.
        .filter(|&(.., f, _, per_weight)| f || !per_weight);
    // A radial-like variance scale under the per-weight prior.
    let var_scale = 0.25f32;
    for (param, center, folded, count, per_weight) in cases {
        let weight = if folded { weight } else { 0.0 };
        // One draw (whose `dμ` without a KL is `dw` itself) or three at different scales.
        let scales = &[1.0f32, 0.5, 2.0][..count];
        let r = r3.clone().narrow(0, 0, count);
        // Reference: w_s = [μ] + σ(ρ)·c_s·ε_s, loss = Σ w ⊙ R + λ·KL.
        let flat_mu = mu.clone().reshape([1, -1]);
        let sigma = param.sigma(rho.clone());
        let draws: Vec<Tensor<2>> = scales
            .iter()
            .enumerate()
            .map(|(s, &c)| {
                let eps = normal_like(&flat_mu, key, s as u32);
                let spread = sigma.clone().reshape([1, -1]) * eps * c as f64;
                if center {
                    spread
                } else {
                    flat_mu.clone() + spread
                }
            })
            .collect();
        let w_ref = Tensor::cat(draws, 0);
        let kl_ref = if per_weight {
            per_weight_reference(mu.clone(), sigma, var_scale, &prior)
        } else {
            kl_reference(mu.clone(), sigma, TERMS)
        };
        let terms = if per_weight {
            KlTerms::per_weight(var_scale)
        } else {
            TERMS
        };
        let loss_ref = (w_ref.clone() * r.clone()).sum() + kl_ref.clone() * weight as f64;
        let (dmu_ref, drho_ref) = grads_of(loss_ref, &mu, &rho);

        let (w, kl_value) = sample(
            loc(&mu, &rho, param.sigma_rule()),
            draw_spec(key, scales, center),
            folded.then(|| gauss(terms, per_weight.then(|| prior.clone()))),
            folded.then_some(weight),
        );
        let what = format!(
            "{param:?}, center = {center}, KL folded = {folded}, per-weight prior = {per_weight}, \
             {count} draws"
        );
        assert!(
            rel_err(&to_vec(w.clone()), &to_vec(w_ref)) < 1e-5,
            "{what}: w"
        );
        let kl_want = if folded { to_vec(kl_ref) } else { vec![0.0] };
        assert!(
            rel_err(&to_vec(kl_value.clone()), &kl_want) < 1e-5,
            "{what}: KL"
        );
        let loss = (w * r.clone()).sum() + kl_value * weight as f64;
        let (dmu, drho) = grads_of(loss, &mu, &rho);
        assert!(rel_err(&dmu, &dmu_ref) < 1e-5, "{what}: dμ");
        assert!(rel_err(&drho, &drho_ref) < 1e-5, "{what}: dρ");
    }
}

#[test]
fn moments_kl_noise_and_flip_match_the_composition_of_burn_ops() {
    let _guard = crate::testing::seeded(&test_device(), 12);
    let (mu, rho, _) = params();
    let prior = per_weight_prior(&mu.device());
    let var_scale = 0.25f32;
    let weight = 1.7f32;

    // Under each parameterisation of σ: moments with the folded KL, moments alone (μ gets no
    // gradient), then the differentiable KL on its own.
    let probe = Tensor::<2>::random([13, 70], Distribution::Normal(0.0, 1.0), &mu.device());
    for param in [
        ScaleParam::Softplus,
        ScaleParam::LogVariance,
        ScaleParam::SigmoidVariance { bound: 0.3 },
    ] {
        let rule = param.sigma_rule();
        // Each backward pass consumes its graph: the references are rebuilt for each.
        let var_ref = || param.sigma(rho.clone()).square() * var_scale as f64;
        let kl_ref = || kl_reference(mu.clone(), param.sigma(rho.clone()), TERMS);
        let loss_ref = (var_ref() * probe.clone()).sum() + kl_ref() * weight as f64;
        let (dmu_ref, drho_ref) = grads_of(loss_ref, &mu, &rho);
        let (var, value) = moments(
            loc(&mu, &rho, rule),
            var_scale,
            Some(gauss(TERMS, None)),
            Some(weight),
        );
        assert!(rel_err(&to_vec(var.clone()), &to_vec(var_ref())) < 1e-5);
        assert!(rel_err(&to_vec(value.clone()), &to_vec(kl_ref())) < 1e-5);
        let (dmu, drho) = grads_of(
            (var * probe.clone()).sum() + value * weight as f64,
            &mu,
            &rho,
        );
        assert!(rel_err(&dmu, &dmu_ref) < 1e-5, "{param:?}: dμ, folded");
        assert!(rel_err(&drho, &drho_ref) < 1e-5, "{param:?}: dρ, folded");

        // The same under a per-weight prior.
        let prior_kl_ref =
            || per_weight_reference(mu.clone(), param.sigma(rho.clone()), var_scale, &prior);
        let loss_ref = (var_ref() * probe.clone()).sum() + prior_kl_ref() * weight as f64;
        let (dmu_ref, drho_ref) = grads_of(loss_ref, &mu, &rho);
        let pw = gauss(KlTerms::per_weight(var_scale), Some(prior.clone()));
        let (var, value) = moments(loc(&mu, &rho, rule), var_scale, Some(pw), Some(weight));
        let err = rel_err(&to_vec(value.clone()), &to_vec(prior_kl_ref()));
        assert!(err < 1e-5, "{param:?}: per-weight KL, relative error {err}");
        let (dmu, drho) = grads_of(
            (var * probe.clone()).sum() + value * weight as f64,
            &mu,
            &rho,
        );
        let err = rel_err(&dmu, &dmu_ref);
        assert!(err < 1e-5, "{param:?}: dμ, per-weight prior folded: {err}");
        let err = rel_err(&drho, &drho_ref);
        assert!(err < 1e-5, "{param:?}: dρ, per-weight prior folded: {err}");

        let g = (var_ref() * probe.clone()).sum().backward();
        let drho_ref = to_vec(rho.grad(&g).expect("dρ"));
        let (var, value) = moments(loc(&mu, &rho, rule), var_scale, None, None);
        assert_eq!(to_vec(value), [0.0], "{param:?}: no KL asked");
        let g = (var * probe.clone()).sum().backward();
        assert!(
            mu.grad(&g).is_none(),
            "{param:?}: the variance does not depend on μ"
        );
        let drho = to_vec(rho.grad(&g).expect("dρ"));
        assert!(rel_err(&drho, &drho_ref) < 1e-5, "{param:?}: dρ");

        let (dmu_ref, drho_ref) = grads_of(kl_ref() * 3.0, &mu, &rho);
        let fused = kl(loc(&mu, &rho, rule), gauss(TERMS, None));
        assert!(rel_err(&to_vec(fused.clone()), &to_vec(kl_ref())) < 1e-5);
        let (dmu, drho) = grads_of(fused * 3.0, &mu, &rho);
        assert!(rel_err(&dmu, &dmu_ref) < 1e-5, "{param:?}: KL's dμ");
        assert!(rel_err(&drho, &drho_ref) < 1e-5, "{param:?}: KL's dρ");
    }

    // noise: mean + √(var + floor)·ε, through a square so that both inputs get gradients.
    let mean = mu.clone() * 2.0;
    let v = softplus(rho.clone());
    let eps = normal_like(&mean, 5, 0);
    let y_ref = mean + (v + VAR_FLOOR as f64).sqrt() * eps;
    let (dmu_ref, drho_ref) = grads_of(y_ref.clone().square().sum(), &mu, &rho);
    let y = noise(mu.clone() * 2.0, softplus(rho.clone()), 5);
    assert!(rel_err(&to_vec(y.clone()), &to_vec(y_ref)) < 1e-5);
    let (dmu, drho) = grads_of(y.square().sum(), &mu, &rho);
    assert!(rel_err(&dmu, &dmu_ref) < 1e-5 && rel_err(&drho, &drho_ref) < 1e-5);

    // flip: ±1 per group of `inner` elements, its own adjoint.
    let x = mu.clone().reshape([13, 7, 10]);
    let y = flip(x.clone(), 9, 10);
    let (xs, ys) = (to_vec(x.clone()), to_vec(y.clone()));
    for g in 0..13 * 7 {
        let sign = ys[g * 10] / xs[g * 10];
        assert!((sign.abs() - 1.0).abs() < 1e-6);
        for i in 0..10 {
            assert!((ys[g * 10 + i] - sign * xs[g * 10 + i]).abs() < 1e-6);
        }
    }
    let weights = Tensor::<3>::random([13, 7, 10], Distribution::Normal(0.0, 1.0), &x.device());
    let (dmu, _) = grads_of(
        (y.clone() * weights.clone()).sum() + rho.clone().sum() * 0.0,
        &mu,
        &rho,
    );
    let want = to_vec(flip(weights, 9, 10));
    assert!(rel_err(&dmu, &want) < 1e-6);
    let flips = ys.iter().zip(&xs).filter(|(y, x)| (*y / *x) < 0.0).count();
    assert!(flips > 300 && flips < 610, "{flips} of 910 flipped");
}

/// With `σ` clamped inside the KL ([`KlTerms::with_log_var_range`], a third of the `σ` below
/// the range and a third above): the KL op, the moments with the KL folded and one draw with
/// it folded (its tape's KL row), values and `dμ, dρ`, against burn ops on `clamp(σ)` (whose
/// gradient is 0 where the clamp holds), under each parameterisation of `σ`.
#[test]
fn the_clamped_kl_matches_the_composition_of_burn_ops() {
    let _guard = crate::testing::seeded(&test_device(), 13);
    let (mu, rho, r3) = params();
    let probe = Tensor::<2>::random([13, 70], Distribution::Normal(0.0, 1.0), &mu.device());
    let (key, weight) = (3u64, 0.8f32);
    for param in [
        ScaleParam::Softplus,
        ScaleParam::LogVariance,
        ScaleParam::SigmoidVariance { bound: 0.3 },
    ] {
        let rule = param.sigma_rule();
        // Bounds half-way between neighbouring σ at a third and two thirds of them.
        let mut sorted = to_vec(param.sigma(rho.clone()));
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let between = |i: usize| 0.5 * (sorted[i] + sorted[i + 1]);
        let (low, high) = (between(n / 3), between(2 * n / 3));
        let terms = TERMS.with_log_var_range((2.0 * low.ln(), 2.0 * high.ln()), 1.0);
        assert!(terms.is_clamped() && !TERMS.is_clamped());
        let sigma = || param.sigma(rho.clone());
        let kl_ref = || kl_reference(mu.clone(), sigma().clamp(low, high), TERMS);
        let check = |got: &[f64], want: &[f64], op: &str| {
            let err = rel_err(got, want);
            assert!(err < 1e-5, "{param:?}, {op}: relative error {err}");
        };

        let (dmu_ref, drho_ref) = grads_of(kl_ref() * 3.0, &mu, &rho);
        let value = kl(loc(&mu, &rho, rule), gauss(terms, None));
        let unclamped = to_vec(kl(loc(&mu, &rho, rule), gauss(TERMS, None)))[0];
        let want = to_vec(kl_ref());
        assert!(
            (want[0] - unclamped).abs() > 1e-2 * want[0].abs(),
            "the clamp matters"
        );
        check(&to_vec(value.clone()), &want, "KL");
        let (dmu, drho) = grads_of(value * 3.0, &mu, &rho);
        check(&dmu, &dmu_ref, "KL's dμ");
        check(&drho, &drho_ref, "KL's dρ");

        let loss_ref = (sigma().square() * probe.clone()).sum() + kl_ref() * weight as f64;
        let (dmu_ref, drho_ref) = grads_of(loss_ref, &mu, &rho);
        let (var, value) = moments(
            loc(&mu, &rho, rule),
            1.0,
            Some(gauss(terms, None)),
            Some(weight),
        );
        check(&to_vec(value.clone()), &want, "moments' KL");
        let (dmu, drho) = grads_of(
            (var * probe.clone()).sum() + value * weight as f64,
            &mu,
            &rho,
        );
        check(&dmu, &dmu_ref, "moments' dμ");
        check(&drho, &drho_ref, "moments' dρ");

        let flat_mu = mu.clone().reshape([1, -1]);
        let eps = normal_like(&flat_mu, key, 0);
        let r = r3.clone().narrow(0, 0, 1);
        let w_ref = flat_mu + sigma().reshape([1, -1]) * eps;
        let loss_ref = (w_ref * r.clone()).sum() + kl_ref() * weight as f64;
        let (dmu_ref, drho_ref) = grads_of(loss_ref, &mu, &rho);
        let (w, value) = sample(
            loc(&mu, &rho, rule),
            draw_spec(key, &[1.0], false),
            Some(gauss(terms, None)),
            Some(weight),
        );
        check(&to_vec(value.clone()), &want, "draw's KL");
        let (dmu, drho) = grads_of((w * r).sum() + value * weight as f64, &mu, &rho);
        check(&dmu, &dmu_ref, "draw's dμ");
        check(&drho, &drho_ref, "draw's dρ");
    }
}

/// The KL against a prior with a mean and a standard deviation per entry: value, `dμ` and `dρ`
/// of `3·KL` against burn ops under each parameterisation of `σ`, at the mean-field variance
/// (`var_scale` 1) and a radial one (`1/n`), with and without a clamp of `ln σ²` inside it; a
/// tracked prior gets no gradient (it is a constant), and a call on untracked `μ, ρ` gives the
/// same value.
#[test]
fn the_kl_to_a_tensor_valued_prior_matches_the_composition_of_burn_ops() {
    let _guard = crate::testing::seeded(&test_device(), 14);
    let (mu, rho, _) = params();
    let device = mu.device();
    let mean = Tensor::<2>::random([13, 70], Distribution::Normal(0.1, 0.3), &device);
    let std = Tensor::<2>::random([13, 70], Distribution::Uniform(0.2, 1.5), &device);
    let (tracked_mean, tracked_std) = (mean.clone().require_grad(), std.clone().require_grad());
    let params = [
        ScaleParam::Softplus,
        ScaleParam::LogVariance,
        ScaleParam::SigmoidVariance { bound: 0.3 },
    ];
    // `ln σ²` of `ρ ~ N(−3, 1.5)` spans about [−12, −1]: the clamp of the marginal variance
    // `ln(σ²c)` to `[−7, −3] + ln c` holds on both sides.
    let cases = params
        .into_iter()
        .flat_map(|p| [(p, 1.0f32), (p, 1.0 / 910.0)])
        .flat_map(|(p, c)| {
            let shift = f64::from(c).ln();
            [(p, c, None), (p, c, Some((-7.0 + shift, -3.0 + shift)))]
        });
    for (param, var_scale, clamp) in cases {
        let what = format!("{param:?}, variance scale {var_scale}, clamp {clamp:?}");
        let terms = KlTerms::per_weight(var_scale);
        let terms = match clamp {
            Some(range) => terms.with_log_var_range(range, var_scale.into()),
            None => terms,
        };
        let sigma = match clamp {
            Some(_) => {
                let (low, high) = terms.sigma_range;
                param.sigma(rho.clone()).clamp(low, high)
            }
            None => param.sigma(rho.clone()),
        };
        let spread =
            sigma.clone().square() * f64::from(var_scale) + (mu.clone() - mean.clone()).square();
        let reference =
            (spread / (std.clone().square() * 2.0) - sigma.log() + std.clone().log()).sum();
        let want = to_vec(reference.clone());
        let (dmu_ref, drho_ref) = grads_of(reference * 3.0, &mu, &rho);
        let rule = param.sigma_rule();
        let flat = |t: &Tensor<2>| t.clone().reshape([-1]);
        let (m0, s0) = (flat(&tracked_mean), flat(&tracked_std));
        let value = kl(loc(&mu, &rho, rule), gauss(terms, Some([m0, s0])));
        let err = rel_err(&to_vec(value.clone()), &want);
        assert!(err < 1e-5, "{what}: KL {:?} vs {want:?}", to_vec(value));
        let grads = (value * 3.0).backward();
        let (dmu, drho) = (
            to_vec(mu.grad(&grads).unwrap()),
            to_vec(rho.grad(&grads).unwrap()),
        );
        let err = rel_err(&dmu, &dmu_ref);
        assert!(err < 1e-5, "{what}: dμ relative error {err}");
        let err = rel_err(&drho, &drho_ref);
        assert!(err < 1e-5, "{what}: dρ relative error {err}");
        if clamp.is_some() {
            let held = drho.iter().filter(|&&d| d == 0.0).count();
            assert!(
                held > 50 && held < drho.len() - 50,
                "{what}: the clamp holds for {held} of {} weights",
                drho.len()
            );
        }
        assert!(tracked_mean.grad(&grads).is_none() && tracked_std.grad(&grads).is_none());
        let (m0, s0) = (flat(&tracked_mean), flat(&tracked_std));
        let (m, r) = (mu.clone().detach(), rho.clone().detach());
        let untracked = kl(loc(&m, &r, rule), gauss(terms, Some([m0, s0])));
        let tracked = kl(
            loc(&mu, &rho, rule),
            gauss(terms, Some([flat(&mean), flat(&std)])),
        );
        assert_eq!(to_vec(untracked), to_vec(tracked));
    }
}

#[test]
fn dropout_keeps_each_element_with_probability_one_minus_p_and_is_its_own_adjoint() {
    use crate::posterior::DropoutNoise::Bernoulli;
    let device = test_device().autodiff();
    let _guard = crate::testing::seeded(&test_device(), 3);
    // 10⁵ elements (not a multiple of the 64-element block), all ≠ 0.
    let (rows, cols) = (250, 401);
    let x =
        Tensor::<2>::random([rows, cols], Distribution::Uniform(0.5, 1.5), &device).require_grad();
    for p in [0.005, 0.1, 0.5] {
        let y = dropout(x.clone(), 17, p, Bernoulli);
        let (xs, ys) = (to_vec(x.clone()), to_vec(y.clone()));
        let scale = 1.0 / (1.0 - p);
        let mut kept = 0usize;
        for (a, b) in xs.iter().zip(&ys) {
            if *b != 0.0 {
                assert!(
                    (b / a - scale).abs() < 1e-5,
                    "kept element scaled by {}",
                    b / a
                );
                kept += 1;
            }
        }
        // Binomial(n, 1 − p): within 5 standard deviations.
        let n = (rows * cols) as f64;
        let sd = (n * p * (1.0 - p)).sqrt();
        assert!(
            (kept as f64 - n * (1.0 - p)).abs() < 5.0 * sd,
            "p = {p}: kept {kept} of {n}"
        );
        assert_masks_are_their_own_adjoints(&x, &y, &device);
        // Same key, same mask; another key, another mask.
        assert_eq!(to_vec(dropout(x.clone(), 17, p, Bernoulli)), ys);
        let other = to_vec(dropout(x.clone(), 18, p, Bernoulli));
        let both_dropped = ys
            .iter()
            .zip(&other)
            .filter(|(a, b)| **a == 0.0 && **b == 0.0)
            .count() as f64;
        // Independent masks drop an element in both with probability p².
        let sd = (n * p * p * (1.0 - p * p)).sqrt();
        assert!(
            (both_dropped - n * p * p).abs() < 5.0 * sd + 1.0,
            "p = {p}: {both_dropped} dropped by both keys"
        );
    }
    // Rate 0 keeps everything unchanged.
    assert_eq!(to_vec(dropout(x.clone(), 17, 0.0, Bernoulli)), to_vec(x));
}

/// Gaussian dropout noise `z = y/x` has mean 1 and variance `p/(1−p)`, the Bernoulli mask's
/// (sample mean and variance within 5 of their standard errors over 10⁵ elements), is normal
/// (its fourth standardised moment 3, within 5 standard errors), is its own adjoint, and is the
/// same for a key and independent across keys (the correlation of two keys' noise within 5 of
/// its standard error, `1/√n`).
#[test]
fn gaussian_dropout_noise_has_the_bernoulli_masks_mean_and_variance_and_is_its_own_adjoint() {
    use crate::posterior::DropoutNoise::Gaussian;
    let device = test_device().autodiff();
    let _guard = crate::testing::seeded(&test_device(), 4);
    let (rows, cols) = (250, 401);
    let n = (rows * cols) as f64;
    let x =
        Tensor::<2>::random([rows, cols], Distribution::Uniform(0.5, 1.5), &device).require_grad();
    let xs = to_vec(x.clone());
    let noise_of = |y: &Tensor<2>| -> Vec<f64> {
        to_vec(y.clone())
            .iter()
            .zip(&xs)
            .map(|(y, x)| y / x - 1.0)
            .collect()
    };
    for p in [0.005, 0.1, 0.5] {
        let var = p / (1.0 - p);
        let y = dropout(x.clone(), 17, p, Gaussian);
        let e = noise_of(&y);
        let mean = e.iter().sum::<f64>() / n;
        let m2 = e.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        let m4 = e.iter().map(|v| (v - mean).powi(4)).sum::<f64>() / n;
        assert!(
            mean.abs() < 5.0 * (var / n).sqrt(),
            "p = {p}: noise mean {mean}"
        );
        // Var of the sample variance of a normal: 2σ⁴/n; of the kurtosis estimate: 24/n.
        assert!(
            (m2 - var).abs() < 5.0 * var * (2.0 / n).sqrt(),
            "p = {p}: noise variance {m2}, want {var}"
        );
        let kurtosis = m4 / (m2 * m2);
        assert!(
            (kurtosis - 3.0).abs() < 5.0 * (24.0 / n).sqrt(),
            "p = {p}: kurtosis {kurtosis}"
        );
        assert_masks_are_their_own_adjoints(&x, &y, &device);
        assert_eq!(to_vec(dropout(x.clone(), 17, p, Gaussian)), to_vec(y));
        let other = noise_of(&dropout(x.clone(), 18, p, Gaussian));
        let corr = e.iter().zip(&other).map(|(a, b)| a * b).sum::<f64>() / (n * var);
        assert!(
            corr.abs() < 5.0 / n.sqrt(),
            "p = {p}: two keys correlate {corr}"
        );
    }
    assert_eq!(to_vec(dropout(x.clone(), 17, 0.0, Gaussian)), to_vec(x));
}

/// The gradient of `Σ y ⊙ r` for `y = x ⊙ z` is `r ⊙ z`: the same mask (`z = y/x`).
fn assert_masks_are_their_own_adjoints(x: &Tensor<2>, y: &Tensor<2>, device: &Device) {
    let r = Tensor::<2>::random(y.dims(), Distribution::Normal(0.0, 1.0), device);
    let grads = (y.clone() * r.clone()).sum().backward();
    let dx = to_vec(x.grad(&grads).expect("x's gradient"));
    let (xs, ys) = (to_vec(x.clone()), to_vec(y.clone()));
    let want: Vec<f64> = to_vec(r)
        .iter()
        .zip(ys.iter().zip(&xs))
        .map(|(r, (y, x))| r * y / x)
        .collect();
    assert!(rel_err(&dx, &want) < 1e-5);
}

#[test]
fn squared_norms_are_those_of_the_streams_the_sample_op_draws() {
    let like = Tensor::<2>::zeros([13, 70], &test_device());
    let norms = squared_norms(&like, 21, 3);
    assert_eq!(norms.len(), 3);
    for (s, &got) in norms.iter().enumerate() {
        let eps = to_vec(normal_like(&like, 21, s as u32));
        let want: f64 = eps.iter().map(|e| e * e).sum();
        assert!(
            ((got as f64 - want) / want).abs() < 1e-5,
            "draw {s}: {got} vs {want}"
        );
    }
    // ‖ε‖² ~ χ²(910): within 6 standard deviations (√(2·910) ≈ 43) of its mean.
    assert!(norms.iter().all(|&x| (x - 910.0).abs() < 6.0 * 43.0));
}

#[test]
fn same_key_same_numbers_new_key_new_numbers() {
    let _guard = crate::testing::seeded(&test_device(), 100);
    let (mu, rho, _) = params();
    let draw = |key| {
        to_vec(
            sample(
                loc(&mu, &rho, SigmaRule::Softplus),
                draw_spec(key, &[1.0], false),
                None,
                None,
            )
            .0,
        )
    };
    assert_eq!(draw(3), draw(3));
    assert_ne!(draw(3), draw(4));
}

/// Mean, variance, excess kurtosis and lag-1 correlation of `x`.
fn moments_of(x: &[f32]) -> (f64, f64, f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n;
    let c: Vec<f64> = x.iter().map(|&v| v as f64 - mean).collect();
    let var = c.iter().map(|v| v * v).sum::<f64>() / n;
    let kurt = c.iter().map(|v| v.powi(4)).sum::<f64>() / n / (var * var) - 3.0;
    let lag1 = c.windows(2).map(|w| w[0] * w[1]).sum::<f64>() / (n - 1.0) / var;
    (mean, var, kurt, lag1)
}

#[test]
fn the_generator_passes_moment_checks_and_streams_are_independent() {
    const N: usize = 1 << 20;
    // Standard errors at n = 2²⁰: mean 1/√n ≈ 9.8e-4, variance √(2/n) ≈ 1.4e-3, excess kurtosis
    // √(24/n) ≈ 4.8e-3, lag-1 correlation 1/√n. The tolerances are 5 standard errors.
    let se = 1.0 / (N as f64).sqrt();
    let draw = |key: u64, stream: u32| {
        let mut v = vec![0f32; N];
        elementwise::normals(key, stream, &mut v);
        v
    };
    let base = draw(1, 0);
    let (mean, var, kurt, lag1) = moments_of(&base);
    assert!(mean.abs() < 5.0 * se, "mean {mean}");
    assert!((var - 1.0).abs() < 5.0 * 2f64.sqrt() * se, "variance {var}");
    assert!(
        kurt.abs() < 5.0 * 24f64.sqrt() * se,
        "excess kurtosis {kurt}"
    );
    assert!(lag1.abs() < 5.0 * se, "lag-1 correlation {lag1}");
    // Another seed, another sub-stream (a second draw of a layer), another step's key: each
    // uncorrelated with the first (|r| < 5/√n).
    for other in [draw(2, 0), draw(1, 1), draw(rng::mix(1), 0)] {
        let r = base
            .iter()
            .zip(&other)
            .map(|(&x, &y)| x as f64 * y as f64)
            .sum::<f64>()
            / N as f64;
        assert!(r.abs() < 5.0 * se, "cross-correlation {r}");
        assert_ne!(other[..8], base[..8]);
    }
    // Chunked, threaded generation is the same stream as a short sequential draw.
    let mut short = vec![0f32; 1000];
    elementwise::normals(1, 0, &mut short);
    assert_eq!(short[..], base[..1000]);
}

#[test]
fn a_pass_draws_distinct_reproducible_keys_from_the_device_seed() {
    let device = test_device();
    let keys = |seed| {
        let _guard = crate::testing::seeded(&device, seed);
        let mut source = KeySource::default();
        (0..4).map(|_| source.next(&device)).collect::<Vec<_>>()
    };
    let a = keys(5);
    assert_eq!(a, keys(5));
    assert_ne!(a, keys(6));
    let mut unique = a.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 4);
}

#[derive(Module, Debug)]
struct Two {
    a: Param<Tensor<2>>,
    b: Param<Tensor<1>>,
}

impl Two {
    /// Standard normal `a: [rows, cols]`, then `b: [cols]`.
    fn random(rows: usize, cols: usize, device: &burn::tensor::Device) -> Self {
        let normal = Distribution::Normal(0.0, 1.0);
        Self {
            a: Param::from_tensor(Tensor::random([rows, cols], normal, device)),
            b: Param::from_tensor(Tensor::random([cols], normal, device)),
        }
    }
}

#[test]
fn fused_adam_and_adamw_follow_burns_optimisers_and_records() {
    let device = test_device().autodiff();
    let _guard = crate::testing::seeded(&test_device(), 13);
    let model = Two::random(40, 30, &device);
    let target = Tensor::<2>::random([40, 30], Distribution::Normal(0.0, 1.0), &device);
    let run = |mut optim: burn::optim::ModuleOptimizer, mut m: Two| {
        for _ in 0..3 {
            let loss = (m.a.val() * m.b.val().unsqueeze() - target.clone())
                .square()
                .sum();
            let grads = GradientsParams::from_grads(loss.backward(), &m);
            m = optim.step(0.01, m, grads);
        }
        (to_vec(m.a.val()), to_vec(m.b.val()))
    };
    let pairs = [
        (
            FusedAdam {
                beta_1: 0.9,
                beta_2: 0.999,
                epsilon: 1e-5,
            }
            .init(),
            AdamConfig::new().init(),
        ),
        (
            FusedAdamW {
                beta_1: 0.8,
                beta_2: 0.99,
                epsilon: 1e-6,
                weight_decay: 0.3,
            }
            .init(),
            AdamWConfig::new()
                .with_beta_1(0.8)
                .with_beta_2(0.99)
                .with_epsilon(1e-6)
                .with_weight_decay(0.3)
                .init(),
        ),
    ];
    for (fused, burn_optim) in pairs {
        let (fa, fb) = run(fused, model.clone());
        let (ra, rb) = run(burn_optim, model.clone());
        assert!(rel_err(&fa, &ra) < 1e-5 && rel_err(&fb, &rb) < 1e-5);
    }
    // The record is burn's: one fused step, its record loaded into burn's Adam, a second step
    // there, equals two steps of burn's Adam.
    let step = |optim: &mut burn::optim::ModuleOptimizer, m: Two| {
        let loss = (m.a.val() - target.clone()).square().sum();
        let grads = GradientsParams::from_grads(loss.backward(), &m);
        optim.step(0.01, m, grads)
    };
    let mut fused = FusedAdam {
        beta_1: 0.9,
        beta_2: 0.999,
        epsilon: 1e-5,
    }
    .init();
    let once = step(&mut fused, model.clone());
    let mut resumed = AdamConfig::new().init().load_record(fused.to_record());
    let twice = step(&mut resumed, once);
    let mut reference = AdamConfig::new().init();
    let first = step(&mut reference, model.clone());
    let want = step(&mut reference, first);
    assert!(rel_err(&to_vec(twice.a.val()), &to_vec(want.a.val())) < 1e-5);
}

/// `OptimizerConfig::AdamL2` on either kernel choice steps as burn's plain Adam on the loss
/// plus `λ‖θ‖²/2` (over every parameter), and differs from plain Adam and from AdamW.
#[test]
fn adam_l2_is_adam_on_the_loss_plus_half_lambda_times_the_squared_norm() {
    use crate::train::OptimizerConfig;
    let device = test_device().autodiff();
    let _guard = crate::testing::seeded(&test_device(), 17);
    let lambda = 0.3;
    let model = Two::random(20, 10, &device);
    let target = Tensor::<2>::random([20, 10], Distribution::Normal(0.0, 1.0), &device);
    let run = |mut optim: burn::optim::ModuleOptimizer, penalty: f64| {
        let mut m = model.clone();
        for _ in 0..3 {
            let fit = (m.a.val() * m.b.val().unsqueeze() - target.clone())
                .square()
                .sum();
            let norm = m.a.val().square().sum() + m.b.val().square().sum();
            let loss = fit + norm.mul_scalar(penalty / 2.0);
            let grads = GradientsParams::from_grads(loss.backward(), &m);
            m = optim.step(0.05, m, grads);
        }
        let mut v = to_vec(m.a.val());
        v.extend(to_vec(m.b.val()));
        v
    };
    let want = run(AdamConfig::new().init(), lambda);
    for kernels in [Kernels::Fused, Kernels::Reference] {
        let got = run(OptimizerConfig::adam_l2(lambda).init(kernels), 0.0);
        assert!(rel_err(&got, &want) < 1e-5, "{kernels:?}");
    }
    let plain = run(AdamConfig::new().init(), 0.0);
    let decoupled = run(
        OptimizerConfig::AdamW {
            beta_1: 0.9,
            beta_2: 0.999,
            epsilon: 1e-5,
            weight_decay: lambda,
        }
        .init(Kernels::Reference),
        0.0,
    );
    assert!(rel_err(&plain, &want) > 1e-3 && rel_err(&decoupled, &want) > 1e-3);
    assert!(
        OptimizerConfig::adam_l2(-1.0)
            .validate()
            .unwrap_err()
            .to_string()
            .contains("weight_decay")
    );
}

/// Pre-activation moments `(μ, v)`: a grid over `μ/s` from −10⁵ to 10⁵ (|μ/s| up to 10 and
/// far beyond, variances from 10⁻¹² to 100, `μ = 0` exactly among them), then 1 000 random
/// pairs.
fn rectifier_inputs() -> (Vec<f32>, Vec<f32>) {
    let (mut means, mut vars) = (Vec::new(), Vec::new());
    for mu in [
        -1e3f32, -30.0, -8.0, -5.0, -2.0, -0.5, 0.0, 1e-6, 0.3, 1.0, 2.0, 5.0, 9.0, 30.0, 1e3,
    ] {
        for var in [1e-12f32, 1e-4, 0.01, 1.0, 4.0, 100.0] {
            means.push(mu);
            vars.push(var);
        }
    }
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut uniform = move || {
        state = crate::fused::rng::mix(state);
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    for _ in 0..1000 {
        means.push((uniform() - 0.5) * 8.0);
        vars.push((10f32).powf((uniform() - 0.7) * 6.0));
    }
    (means, vars)
}

/// The fused rectifier rules (`E h`, `Var h` and both gradients) against the reference
/// compositions of burn ops (`relu_moments`, `relu_vbp_moments`) on the same inputs, element by
/// element: errors within `2·10⁻⁵` of the value plus the scale it is computed at (`|μ| + s`
/// for the mean, `s² + |μ|s` for the variance, where the reference's `g(a)` cancels; 1 or
/// `1/s` for the gradients), `f32` round-off of two different evaluations of `Φ` and `φ`.
#[test]
fn rectifier_moments_and_gradients_match_the_composition_of_burn_ops() {
    use crate::dist::Moments;
    use crate::layers::{relu_moments, relu_vbp_moments};
    let device = test_device().autodiff();
    let (means, vars) = rectifier_inputs();
    let n = means.len();
    // Output gradients of either sign.
    let (r_mean, r_var): (Vec<f32>, Vec<f32>) = (0..n)
        .map(|i| (((i * 7) % 5) as f32 - 2.0, ((i * 3) % 7) as f32 - 3.0))
        .unzip();
    for (rule, name) in [
        (RectifierRule::Gaussian, "gaussian"),
        (RectifierRule::Gate(100.0), "gate C = 100"),
        (RectifierRule::Gate(1.0), "gate C = 1"),
    ] {
        let run = |fused: bool| {
            let mu = Tensor::<1>::from_floats(means.as_slice(), &device).require_grad();
            let var = Tensor::<1>::from_floats(vars.as_slice(), &device).require_grad();
            let (m, v) = if fused {
                rectifier_moments(mu.clone(), var.clone(), rule)
            } else {
                let input = Moments::new(mu.clone(), var.clone());
                let out = match rule {
                    RectifierRule::Gaussian => relu_moments(input),
                    RectifierRule::Gate(c) => relu_vbp_moments(input, c as f64),
                };
                (out.mean, out.var)
            };
            let loss = (m.clone() * Tensor::from_floats(r_mean.as_slice(), &device)
                + v.clone() * Tensor::from_floats(r_var.as_slice(), &device))
            .sum();
            let g = loss.backward();
            [
                to_vec(m),
                to_vec(v),
                to_vec(mu.grad(&g).expect("dμ")),
                to_vec(var.grad(&g).expect("dv")),
            ]
        };
        let (got, want) = (run(true), run(false));
        for i in 0..n {
            let (mu, var) = (means[i] as f64, vars[i] as f64);
            let s = (var + 1e-8).sqrt();
            let scales = [
                mu.abs() + s,
                s * s + mu.abs() * s,
                (want[2][i].abs()).max(1.0),
                (want[3][i].abs()).max(1.0 / s),
            ];
            for (k, what) in ["E h", "Var h", "dμ", "dv"].iter().enumerate() {
                let (g, w) = (got[k][i], want[k][i]);
                assert!(
                    g.is_finite() && (g - w).abs() <= 2e-5 * (scales[k] + w.abs()),
                    "{name}, μ = {mu}, v = {var}: {what} fused {g} vs reference {w}"
                );
            }
        }
    }
}

/// The draws and their `ln q − ln p` (black-box α) against the family's and the prior's
/// densities by burn ops, under a scalar and a per-weight Gaussian prior: draws, ratios, the KL,
/// and `dμ, dρ` against their closed forms in `f64`.
#[test]
fn draws_with_log_ratios_match_the_posterior_and_prior_densities() {
    use crate::dist::{Prior, WeightPrior};
    use crate::posterior::{MeanFieldDist, PosteriorDist, ScaleParam};
    let _guard = crate::testing::seeded(&test_device(), 12);
    let (mu, rho, r) = params();
    let (draws, key, n) = (3usize, 9u64, 13 * 70);
    let weights = Tensor::<1>::random([draws], Distribution::Normal(0.0, 1.0), &mu.device());
    let (mean0, std0) = (0.1, 0.8);
    let scalar = Prior::Gaussian {
        mean: mean0,
        std: std0,
    }
    .weight_prior::<2>(1, &mu.device());
    let per_weight = per_weight_prior(&mu.device());
    let tensor = WeightPrior::gaussian(
        per_weight[0].clone().reshape([13, 70]),
        per_weight[1].clone().reshape([13, 70]),
    );
    let params = [
        ScaleParam::Softplus,
        ScaleParam::LogVariance,
        ScaleParam::SigmoidVariance { bound: 2.0 },
    ];
    let cases = params.into_iter().flat_map(|p| [(p, false), (p, true)]);
    for (param, by_weight) in cases {
        let what = format!("{param:?}, per-weight prior = {by_weight}");
        let prior = if by_weight { &tensor } else { &scalar };
        // The prior's mean and standard deviation of each weight.
        let (m0, s0) = if by_weight {
            (to_vec(per_weight[0].clone()), to_vec(per_weight[1].clone()))
        } else {
            (vec![mean0; n], vec![std0; n])
        };
        // Reference: the family's density and the prior's, on the same ε, composed of burn ops.
        let sigma = param.sigma(rho.clone());
        let flat_mu = mu.clone().reshape([1, -1]);
        let w_ref = Tensor::cat(
            (0..draws)
                .map(|s| {
                    let eps = normal_like(&flat_mu, key, s as u32);
                    flat_mu.clone() + sigma.clone().reshape([1, -1]) * eps
                })
                .collect(),
            0,
        );
        let q = MeanFieldDist::new(mu.clone(), sigma.clone());
        let ratio_ref = q.log_q(w_ref.clone()).expect("a density") - prior.log_prob(w_ref.clone());
        let inv_var = (1.0 / (std0 * std0)) as f32;
        let kl_terms = if by_weight {
            KlTerms::per_weight(1.0)
        } else {
            KlTerms::new(mean0 as f32, inv_var, inv_var)
        };
        let kl_ref = if by_weight {
            per_weight_reference(mu.clone(), sigma, 1.0, &per_weight)
        } else {
            kl_reference(mu.clone(), sigma, kl_terms)
        };
        let loss_ref =
            (w_ref.clone() * r.clone()).sum() + (ratio_ref.clone() * weights.clone()).sum();
        let (dmu_ref, drho_ref) = grads_of(loss_ref, &mu, &rho);

        let rule = param.sigma_rule();
        let pw = by_weight.then(|| per_weight.clone());
        let (w, ratio, kl) =
            sample_log_ratio(loc(&mu, &rho, rule), key, draws, gauss(kl_terms, pw), true);
        assert_eq!(w.dims(), [draws, n]);
        assert!(
            rel_err(&to_vec(w.clone()), &to_vec(w_ref)) < 1e-5,
            "w, {what}"
        );
        // Ratios are sums of 910 terms of either sign: compared to the size of the terms.
        let (got, want) = (to_vec(ratio.clone()), to_vec(ratio_ref));
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() < 1e-4 * n as f64, "r {a} vs {b}, {what}");
        }
        assert!(rel_err(&to_vec(kl), &to_vec(kl_ref)) < 1e-5, "KL, {what}");
        let loss = (w * r.clone()).sum() + (ratio * weights.clone()).sum();
        let (dmu, drho) = grads_of(loss, &mu, &rho);
        // dμ in closed form (f64): `ln q(μ + σε)` does not depend on μ along the path, so
        // `dμ_i = Σ_s r_si + Σ_s c_s (w_si − μ₀)/σ₀²`. The burn-op reference gets it from two
        // autodiff terms of size |ε|/σ that cancel, which in f32 leaves errors of order
        // 10⁻⁷·|ε|/σ: up to 10⁻⁴ of dμ's scale for the smallest softplus scales (σ ≈ 10⁻⁴).
        let (mu_h, sigma_h, r_h, c_h) = (
            to_vec(mu.clone()),
            to_vec(param.sigma(rho.clone())),
            to_vec(r.clone()),
            to_vec(weights.clone()),
        );
        // dρ likewise: along the path `ln q = −Σ ln σ − ε²/2 + const`, so
        // `dσ_i = Σ_s r_si ε_si + Σ_s c_s (−1/σ_i + (w_si − μ₀) ε_si/σ₀²)`, times `dσ/dρ`.
        let rho_h = to_vec(rho.clone());
        let mut dmu_exact = vec![0.0; n];
        let mut dsigma_exact = vec![0.0; n];
        for (s, c) in c_h.iter().enumerate() {
            let eps = to_vec(normal_like(&flat_mu, key, s as u32));
            for i in 0..n {
                let w = mu_h[i] + sigma_h[i] * eps[i];
                let prec = 1.0 / (s0[i] * s0[i]);
                dmu_exact[i] += r_h[s * n + i] + c * (w - m0[i]) * prec;
                dsigma_exact[i] +=
                    r_h[s * n + i] * eps[i] + c * (-1.0 / sigma_h[i] + (w - m0[i]) * eps[i] * prec);
            }
        }
        let logistic = |x: f64| 1.0 / (1.0 + (-x).exp());
        let drho_exact: Vec<f64> = (0..n)
            .map(|i| {
                let dsigma_drho = match param {
                    ScaleParam::Softplus => logistic(rho_h[i]),
                    ScaleParam::LogVariance => 0.5 * sigma_h[i],
                    ScaleParam::SigmoidVariance { .. } => 0.5 * sigma_h[i] * logistic(-rho_h[i]),
                };
                dsigma_exact[i] * dsigma_drho
            })
            .collect();
        let e_mu = rel_err(&dmu, &dmu_exact);
        assert!(
            e_mu < 1e-5,
            "dμ, {what}: {e_mu:.3e} against the closed form"
        );
        let e_ref = rel_err(&dmu_ref, &dmu_exact);
        assert!(e_ref < 1e-3, "dμ of the reference, {what}: {e_ref:.3e}");
        let e_rho = rel_err(&drho, &drho_exact);
        assert!(
            e_rho < 1e-5,
            "dρ, {what}: {e_rho:.3e} against the closed form"
        );
        let e_rho_ref = rel_err(&drho_ref, &drho_exact);
        assert!(
            e_rho_ref < 1e-3,
            "dρ of the reference, {what}: {e_rho_ref:.3e}"
        );
    }
}

/// `[rows, height, width]` maps of means and variances (10⁻⁴ to 10): random means and, with
/// `ties`, tied ones (every seventh cell repeats its neighbour's mean) and blank maps (every
/// eleventh, all means 0).
fn pool_inputs(rows: usize, cells: usize, seed: u64, ties: bool) -> (Vec<f32>, Vec<f32>) {
    let mut state = seed;
    let mut uniform = move || {
        state = crate::fused::rng::mix(state);
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    let (mut means, mut vars) = (vec![0f32; rows * cells], vec![0f32; rows * cells]);
    for i in 0..rows * cells {
        means[i] = if ties && (i / cells) % 11 == 5 {
            0.0
        } else if ties && i % 7 == 3 {
            means[i - 1]
        } else {
            (uniform() - 0.5) * 8.0
        };
        vars[i] = (10f32).powf(uniform() * 5.0 - 4.0);
    }
    (means, vars)
}

/// The max-pool kernels, read in place over enough maps for several parallel ranges (forward
/// and backward) and a partial last block, give for each window what a call on that window
/// alone gives (one lane of one block), and each cell's gradient is the sum over the windows
/// that read it, in window order, bit for bit: the windows' offsets in the maps (with a crop,
/// a gap or an overlap between windows), the ranges, and the scatter of the gradients to their
/// cells.
#[test]
fn max_pool_over_many_ranges_matches_each_window_alone() {
    use super::clark::{PoolMaps, max_pool, max_pool_backward};
    let chunk = bnn_kernels::simd::CHUNK;
    // (side, kernel, stride): a crop, an overlap, a gap.
    for (side, kernel, stride) in [(9, 2, 2), (7, 3, 2), (8, 2, 3)] {
        let per_map = ((side - kernel) / stride + 1usize).pow(2);
        let rows = 2 * chunk / per_map + 3;
        let maps = PoolMaps {
            rows,
            height: side,
            width: side,
            kernel,
            stride,
        };
        let (n, cells) = (maps.windows(), side * side);
        let (means, vars) = pool_inputs(rows, cells, 41 + side as u64, true);
        // Output gradients of either sign, both at once and each alone.
        let grad: Vec<f32> = (0..n).map(|j| ((j * 13) % 7) as f32 - 3.0).collect();
        let grad2: Vec<f32> = (0..n).map(|j| ((j * 5) % 9) as f32 - 4.0).collect();
        let zeros = vec![0f32; n];
        let cases = [(&grad, &grad2), (&grad, &zeros), (&zeros, &grad2)];
        let (mut m, mut v) = (vec![0f32; n], vec![0f32; n]);
        max_pool(maps, &means, &vars, &mut m, &mut v);
        let full = cases.map(|(gm, gv)| {
            let (mut dm, mut dv) = (vec![f32::NAN; rows * cells], vec![f32::NAN; rows * cells]);
            max_pool_backward(maps, &means, &vars, gm, gv, &mut dm, &mut dv);
            (dm, dv)
        });
        // One window alone: its k×k cells as a map of its own.
        let single = PoolMaps {
            rows: 1,
            height: kernel,
            width: kernel,
            kernel,
            stride: kernel,
        };
        // Maps at the start, around the range boundaries (the backward's ranges are whole
        // maps, `tasks` each; the forward's are `chunk` windows, which may end inside a map),
        // at the end, blank ones (every eleventh) and every 97th.
        let tasks = chunk / per_map;
        let mut picks = vec![0, 5, tasks - 1, tasks, tasks + 1, 2 * tasks, rows - 1];
        picks.extend([2 * chunk / per_map, 2 * chunk / per_map + 1]);
        picks.extend((0..rows).step_by(97));
        picks.sort_unstable();
        picks.dedup();
        for r in picks {
            let wo = maps.out_width();
            let mut sums = vec![vec![0f32; cells]; 2 * cases.len()];
            for q in 0..per_map {
                let (y, x) = (q / wo, q % wo);
                let place = |e: usize| {
                    r * cells + (y * stride + e / kernel) * side + x * stride + e % kernel
                };
                let pick = |t: &[f32]| {
                    (0..kernel * kernel)
                        .map(|e| t[place(e)])
                        .collect::<Vec<f32>>()
                };
                let (wm, wv) = (pick(&means), pick(&vars));
                let (mut m1, mut v1) = ([0f32], [0f32]);
                max_pool(single, &wm, &wv, &mut m1, &mut v1);
                let j = r * per_map + q;
                assert_eq!(
                    (m[j], v[j]),
                    (m1[0], v1[0]),
                    "{maps:?}: window {j}, moments"
                );
                for (k, (gm, gv)) in cases.iter().enumerate() {
                    let (mut dm1, mut dv1) = (vec![0f32; wm.len()], vec![0f32; wm.len()]);
                    max_pool_backward(single, &wm, &wv, &[gm[j]], &[gv[j]], &mut dm1, &mut dv1);
                    for e in 0..wm.len() {
                        let cell = place(e) - r * cells;
                        sums[2 * k][cell] += dm1[e];
                        sums[2 * k + 1][cell] += dv1[e];
                    }
                }
            }
            for k in 0..cases.len() {
                let map = |t: &[f32]| t[r * cells..(r + 1) * cells].to_vec();
                assert_eq!(
                    map(&full[k].0),
                    sums[2 * k],
                    "{maps:?}: map {r}, ∂/∂means, case {k}"
                );
                assert_eq!(
                    map(&full[k].1),
                    sums[2 * k + 1],
                    "{maps:?}: map {r}, ∂/∂vars, case {k}"
                );
            }
        }
    }
    // No maps (an empty batch): nothing to do, no panic.
    let empty = PoolMaps {
        rows: 0,
        height: 4,
        width: 4,
        kernel: 2,
        stride: 2,
    };
    max_pool(empty, &[], &[], &mut [], &mut []);
    max_pool_backward(empty, &[], &[], &[], &[], &mut [], &mut []);
}

/// A window larger than the maps, or a stride of 0, is refused before any work, naming both.
#[test]
fn max_pool_moments_refuse_a_window_that_does_not_fit() {
    let device = test_device();
    for (kernel, stride) in [(5, 1), (2, 0), (0, 1)] {
        let maps = || Tensor::<3>::zeros([2, 4, 4], &device);
        let err = std::panic::catch_unwind(|| max_pool_moments(maps(), maps(), kernel, stride))
            .expect_err("refused");
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains(&format!("{kernel}×{kernel} window (stride {stride})"))
                && msg.contains("4×4 maps"),
            "{msg}"
        );
    }
}

/// The fused max pooling (values and both gradients) against the composition of burn ops
/// ([`crate::layers::Pool::moments`]) on windows of mixed scales: means to ±300, variances
/// from 10⁻⁴ to 100, 2×2 and 3×3 windows, within `2·10⁻⁵` of the scale each is computed at
/// (as the rectifier's test: two evaluations of `Φ` and `φ`). Much smaller variances beside
/// these are left out: where one entry dominates, `Var = v_B + s²g − 2v_BΦ` cancels to its
/// `v_A`, and the sign of a result near 0 (the clamp's, so whether its gradient passes) is
/// then round-off, differently in the two evaluations.
#[test]
fn max_pool_moments_match_the_composition_of_burn_ops_at_mixed_scales() {
    use crate::dist::Moments;
    use crate::layers::Pool;
    let device = test_device().autodiff();
    for (kernel, stride, side) in [(2, 2, 8), (3, 2, 9)] {
        let pool = Pool::Max { kernel, stride };
        let dims = [1, 2, 3, side, side];
        let count: usize = dims.iter().product();
        let (mut means, vars) = pool_inputs(1, count, 7 + kernel as u64, false);
        // Every third map position far out, so that windows mix scales.
        for (i, x) in means.iter_mut().enumerate() {
            if i % 3 == 0 {
                *x *= 75.0;
            }
        }
        let vars: Vec<f32> = vars
            .iter()
            .enumerate()
            .map(|(i, v)| if i % 4 == 0 { *v } else { v * 10.0 })
            .collect();
        let o = pool.output_side(side).unwrap();
        let cells = 2 * 3 * o * o;
        let weights = |shift: usize| {
            let w: Vec<f32> = (0..cells)
                .map(|i| ((i * 7 + shift) % 5) as f32 - 2.0)
                .collect();
            Tensor::<1>::from_floats(w.as_slice(), &device)
        };
        let run = |kernels: Kernels| {
            let leaf = |v: &[f32]| {
                Tensor::<1>::from_floats(v, &device)
                    .reshape(dims)
                    .require_grad()
            };
            let (m, v) = (leaf(&means), leaf(&vars));
            let out = pool.moments_by(Moments::new(m.clone(), v.clone()), kernels);
            let loss = (out.mean.clone().reshape([cells]) * weights(1)).sum()
                + (out.var.clone().reshape([cells]) * weights(3)).sum();
            let g = loss.backward();
            [
                to_vec(out.mean),
                to_vec(out.var),
                to_vec(m.grad(&g).expect("dμ")),
                to_vec(v.grad(&g).expect("dv")),
            ]
        };
        let (got, want) = (run(Kernels::Fused), run(Kernels::Reference));
        for (k, what) in ["E", "Var", "∂/∂mean", "∂/∂var"].iter().enumerate() {
            let scale = want[k].iter().fold(1f64, |a, w| a.max(w.abs()));
            for (i, (g, w)) in got[k].iter().zip(&want[k]).enumerate() {
                assert!(
                    g.is_finite() && (g - w).abs() <= 2e-5 * scale,
                    "{pool:?}: {what}[{i}] fused {g} vs reference {w} (scale {scale})"
                );
            }
        }
    }
}

/// [`conv2d`] against burn's `conv2d`: values, `∂x` and `∂w` of `Σ R ⊙ y` over strides,
/// padding, dilation, non-square kernels and windows that overlap or skip cells, and with an
/// input that takes no gradient (its `∂x` is then not computed: the weight's must still be).
#[test]
fn conv2d_and_its_gradients_match_burns_convolution() {
    let _guard = crate::testing::seeded(&test_device(), 23);
    let device = test_device().autodiff();
    // (input [N, C, H, W], kernel [O, kh, kw], [stride, padding, dilation])
    type Case = ([usize; 4], [usize; 3], [[usize; 2]; 3]);
    let cases: [Case; 5] = [
        ([3, 1, 28, 28], [4, 5, 5], [[2, 2], [0, 0], [1, 1]]), // the strided LeNet5's first layer
        ([2, 3, 12, 12], [5, 5, 5], [[2, 2], [0, 0], [1, 1]]), // its second layer, smaller
        ([2, 2, 9, 8], [3, 3, 2], [[1, 2], [1, 2], [1, 1]]),   // padding wider than some windows
        ([1, 2, 11, 10], [2, 3, 3], [[2, 1], [2, 1], [2, 3]]), // dilated, padded
        ([4, 3, 6, 7], [6, 1, 1], [[1, 1], [0, 0], [1, 1]]),   // 1×1
    ];
    for (input, [o, kh, kw], [stride, padding, dilation]) in cases {
        let options = ConvOptions::new(stride, padding, dilation, 1);
        let x = Tensor::<4>::random(input, Distribution::Normal(0.0, 1.0), &device);
        let w = Tensor::<4>::random(
            [o, input[1], kh, kw],
            Distribution::Normal(0.0, 0.3),
            &device,
        );
        let reference = burn::tensor::module::conv2d(x.clone(), w.clone(), None, options.clone());
        let r = reference.random_like(Distribution::Normal(0.0, 1.0));
        for x_tracked in [true, false] {
            let (x, w) = (x.clone().detach(), w.clone().detach().require_grad());
            let x = if x_tracked { x.require_grad() } else { x };
            let want = burn::tensor::module::conv2d(x.clone(), w.clone(), None, options.clone());
            let got = conv2d(x.clone(), w.clone(), &options);
            assert_eq!(got.dims(), want.dims(), "{input:?}: output shape");
            let err = rel_err(&to_vec(got.clone()), &to_vec(want.clone()));
            assert!(err < 1e-5, "{input:?}: values differ by {err:.2e} of scale");
            let g_want = (want * r.clone()).sum().backward();
            let g_got = (got * r.clone()).sum().backward();
            let dw = rel_err(
                &to_vec(w.grad(&g_got).expect("dw")),
                &to_vec(w.grad(&g_want).expect("dw of burn's")),
            );
            assert!(dw < 1e-5, "{input:?}: ∂w differs by {dw:.2e} of scale");
            if x_tracked {
                let dx = rel_err(
                    &to_vec(x.grad(&g_got).expect("dx")),
                    &to_vec(x.grad(&g_want).expect("dx of burn's")),
                );
                assert!(dx < 1e-5, "{input:?}: ∂x differs by {dx:.2e} of scale");
            } else {
                assert!(
                    x.grad(&g_got).is_none(),
                    "an untracked input got a gradient"
                );
            }
        }
    }
}

/// `conv2d_per_sample` against burn's convolution grouped by sample (the layers' composition):
/// values, `∂x` and `∂w` (or none for an untracked input) within 10⁻⁵ of scale, for one and
/// three samples on the strided LeNet5's layers, a padded geometry and a dilated one. The unit
/// tests' chunk of 4 096 unfolded elements splits these into chunks of one sample, of two and
/// one (`[2, 2, 12, 12]`), and one chunk of all samples (the dilated case).
#[test]
fn conv2d_per_sample_and_its_gradients_match_burns_grouped_convolution() {
    let _guard = crate::testing::seeded(&test_device(), 37);
    let device = test_device().autodiff();
    // (S, input [B, C, H, W], kernel [O, kh, kw], [stride, padding, dilation])
    type Case = (usize, [usize; 4], [usize; 3], [[usize; 2]; 3]);
    let cases: [Case; 6] = [
        (3, [2, 1, 28, 28], [4, 5, 5], [[2, 2], [0, 0], [1, 1]]),
        (1, [2, 3, 12, 12], [5, 5, 5], [[2, 2], [0, 0], [1, 1]]),
        (3, [2, 3, 12, 12], [5, 5, 5], [[2, 2], [0, 0], [1, 1]]),
        (3, [2, 2, 12, 12], [4, 5, 5], [[2, 2], [0, 0], [1, 1]]),
        (2, [2, 2, 9, 8], [3, 3, 2], [[1, 2], [1, 2], [1, 1]]),
        (4, [1, 2, 11, 10], [2, 3, 3], [[2, 1], [2, 1], [2, 3]]),
    ];
    for (samples, [b, c, h, wd], [o, kh, kw], [stride, padding, dilation]) in cases {
        let options = ConvOptions::new(stride, padding, dilation, 1);
        let dims = [samples, b, c, h, wd];
        let x = Tensor::<1>::random(
            [dims.iter().product::<usize>()],
            Distribution::Normal(0.0, 1.0),
            &device,
        );
        let w = Tensor::<5>::random(
            [samples, o, c, kh, kw],
            Distribution::Normal(0.0, 0.3),
            &device,
        );
        let flat = |y: Tensor<5>| y.reshape([-1]);
        compare_products(
            x,
            w,
            &format!(
                "{samples} samples of {:?} by [{o}, {c}, {kh}, {kw}]",
                [b, c, h, wd]
            ),
            |x, w| flat(conv2d_per_sample(x.reshape(dims), w, &options)),
            |x, w| {
                flat(crate::layers::ops::conv2d_per_sample(
                    x.reshape(dims),
                    w,
                    None,
                    &options,
                ))
            },
        );
    }
}

#[test]
#[should_panic(expected = "sample counts")]
fn conv2d_per_sample_refuses_kernels_for_another_number_of_samples() {
    let device = test_device();
    conv2d_per_sample(
        Tensor::<5>::zeros([3, 1, 2, 8, 8], &device),
        Tensor::<5>::zeros([2, 4, 2, 3, 3], &device),
        &ConvOptions::new([1, 1], [0, 0], [1, 1], 1),
    );
}

#[test]
#[should_panic(expected = "channels")]
fn conv2d_refuses_an_input_with_other_channels_than_the_kernel() {
    let device = test_device();
    let x = Tensor::<4>::zeros([1, 2, 8, 8], &device);
    let w = Tensor::<4>::zeros([3, 4, 3, 3], &device);
    conv2d(x, w, &ConvOptions::new([1, 1], [0, 0], [1, 1], 1));
}

/// `matmul` against burn's: values, `∂w` and `∂x` (or none for an untracked input), within
/// 10⁻⁵ of scale, on a small product, one with leading axes, and one large enough to run threaded
/// (`m·n·k` above 192³); with `w` tracked or not, and with `w` a transposed view (not contiguous).
#[test]
fn matmul_and_its_gradients_match_burns_matmul() {
    let _guard = crate::testing::seeded(&test_device(), 29);
    let device = test_device().autodiff();
    // ([leading axes of x], k, n)
    let cases: [(&[usize], usize, usize); 3] =
        [(&[5], 7, 3), (&[2, 3, 4], 6, 5), (&[300], 300, 120)];
    for (lead, k, n) in cases {
        let x_dims: Vec<usize> = lead.iter().copied().chain([k]).collect();
        let count: usize = x_dims.iter().product();
        let rows = count / k;
        let x = Tensor::<1>::random([count], Distribution::Normal(0.0, 1.0), &device);
        let w = Tensor::<2>::random([n, k], Distribution::Normal(0.0, 0.3), &device);
        // x as [rows, k] for one leading axis, as given for more; w as the transpose of the leaf.
        let ours = |x: Tensor<1>, w: Tensor<2>| match lead.len() {
            1 => matmul(x.reshape([rows, k]), w.transpose()).reshape([rows * n]),
            _ => {
                let x3 = x.reshape([lead[0] * lead[1], lead[2], k]);
                let y: Tensor<3> = matmul(x3, w.transpose());
                y.reshape([rows * n])
            }
        };
        let burns = |x: Tensor<1>, w: Tensor<2>| {
            x.reshape([rows, k])
                .matmul(w.transpose())
                .reshape([rows * n])
        };
        compare_products(x, w, &format!("{x_dims:?} × [{k}, {n}]"), ours, burns);
    }
}

/// `batched_matmul` against burn's batched `matmul`, as above, on batches that take each of the
/// Flex product's three schedules: serial, threaded over the samples (four or more samples, or
/// two whose products are small, totalling `m·n·k ≥ 128³`), and threaded inside gemm (each
/// product `≥ 192³`, fewer than four samples); `w_s` is a transposed view of a `[S, n, k]` leaf.
#[test]
fn batched_matmul_and_its_gradients_match_burns_matmul() {
    let _guard = crate::testing::seeded(&test_device(), 31);
    let device = test_device().autodiff();
    // (S, rows, k, n)
    for [s, rows, k, n] in [
        [3, 5, 7, 4],
        [4, 64, 130, 70],
        [2, 100, 100, 120],
        [2, 200, 200, 180],
    ] {
        let x = Tensor::<1>::random([s * rows * k], Distribution::Normal(0.0, 1.0), &device);
        let w = Tensor::<3>::random([s, n, k], Distribution::Normal(0.0, 0.3), &device);
        let (x_dims, out) = ([s, rows, k], [s * rows * n]);
        compare_products(
            x,
            w,
            &format!("[{s}, {rows}, {k}] × [{s}, {k}, {n}]"),
            |x, w| batched_matmul(x.reshape(x_dims), w.swap_dims(1, 2)).reshape(out),
            |x, w| x.reshape(x_dims).matmul(w.swap_dims(1, 2)).reshape(out),
        );
    }
}

/// The low-rank factor's KL share `½c²λ Σ_i ‖F_i‖²/σ₀ᵢ² − ½ ln det(I + c² Fᵀ diag(σ(ρ)⁻²) F)`
/// against its composition of burn ops (`σ` by the rule, the product, and the Cholesky of
/// [`crate::linalg`]), with `ρ`, the factor or both tracked (values, `∂ρ`, `∂F`), for every
/// `σ` rule, with and without the prior's term (without it, `∂F` is the log-determinant's
/// alone), under a scalar prior (`σ₀ᵢ = 1`) and under one with a standard deviation per row
/// (`λ = 1`); and the factor's draws `F z_s` against burn's `c·z Fᵀ` with the same `z` (values,
/// `∂F`), and the draws added to a base `w_s + F z_s` against burn's `w + c·z Fᵀ` (values, `∂w`,
/// `∂F`, a base the caller still holds left as it was). Ranks 1–3 (compiled for their rank) and
/// 6 (a run-time rank), one to three draws, and a factor of more rows than one parallel chunk
/// (several partial sums, several sub-ranges of variances).
#[test]
fn low_rank_kl_and_draws_and_their_gradients_match_burns_composition() {
    use crate::linalg::{cholesky, cholesky_log_det};
    let _guard = crate::testing::seeded(&test_device(), 32);
    let device = test_device().autodiff();
    let c = 0.7;
    let params = [
        ScaleParam::Softplus,
        ScaleParam::LogVariance,
        ScaleParam::SigmoidVariance { bound: 1.6 },
    ];
    for [n, k, draws] in [[7, 1, 1], [300, 2, 3], [40_000, 3, 1], [50, 6, 2]] {
        let f = Tensor::<2>::random([n, k], Distribution::Normal(0.0, 0.5), &device);
        let rho = Tensor::<1>::random([n], Distribution::Uniform(-1.5, 0.5), &device);
        // A prior with a mean (which the factor's share does not read) and a standard
        // deviation per row.
        let per_weight = [
            Tensor::<1>::random([n], Distribution::Normal(0.1, 0.3), &device),
            Tensor::<1>::random([n], Distribution::Uniform(0.2, 1.5), &device),
        ];
        let cases = params
            .into_iter()
            .zip([0.0, 2.0, 0.3])
            .map(|(param, inv_prior_var)| (param, inv_prior_var, None))
            .chain(params.map(|param| (param, 1.0, Some(per_weight.clone()))));
        for (param, inv_prior_var, prior) in cases {
            let rule = param.sigma_rule();
            let precision = match &prior {
                Some([_, std]) => std.clone().square().recip().reshape([n, 1]) * inv_prior_var,
                None => Tensor::<2>::full([n, 1], inv_prior_var, &device),
            };
            let label = match prior {
                Some(_) => "per-row σ₀".to_string(),
                None => format!("1/σ₀² = {inv_prior_var}"),
            };
            compare_products(
                rho.clone(),
                f.clone(),
                &format!("factor KL of [{n}, {k}], {rule:?}, {label}"),
                |rho, f| {
                    let terms = KlTerms::new(0.0, inv_prior_var as f32, 1.0);
                    factor_kl(f, rho, rule, c, gauss(terms, prior.clone()))
                },
                |rho, f| {
                    let var = param.sigma(rho).square().reshape([n, 1]);
                    let gram = f.clone().transpose().matmul(f.clone() / var) * (c * c);
                    let l = cholesky(gram + Tensor::eye(k, &f.device()));
                    let norm = (f.square() * precision.clone()).sum();
                    norm * (0.5 * c * c) - cholesky_log_det(l) * 0.5
                },
            );
        }
        // `z`: the fused op draws the same numbers itself.
        let (key, stream) = (0x5eed + n as u64, 9);
        let mut z = vec![0f32; draws * k];
        elementwise::normals(key, stream, &mut z);
        let z = Tensor::<2>::from_data(TensorData::new(z, [draws, k]), &device);
        let base = Tensor::<1>::random([draws * n], Distribution::Normal(0.0, 1.0), &device);
        let kept = to_vec(base.clone());
        compare_products(
            base.clone(),
            f,
            &format!("draws of [{n}, {k}], {draws} draws"),
            |w, f| {
                add_factor_draws(w.reshape([draws, n]), f, 0.7, key, stream).reshape([draws * n])
            },
            |w, f| w + (z.clone().matmul(f.transpose()) * 0.7).reshape([draws * n]),
        );
        assert_eq!(
            to_vec(base),
            kept,
            "a base still held elsewhere is not written"
        );
    }
}

/// The scale-mixture KL `−H[q] + (1/S)Σ_s −ln p(μ + σ(ρ)ε_s)` against its composition by burn
/// ops at the same draws (the mixture's `WeightPrior::log_prob`, the entropy's closed form),
/// with `ρ`, `μ` or both tracked (values, `∂ρ`, `∂μ`), for every `σ` rule: one to three draws,
/// mean-field (each draw's factor `c_s = 1`) and radial-like factors (`c_s ≠ 1`), one partial
/// block, and more elements than one parallel chunk; and under Blundell's
/// `σ₂ = e⁻⁶` with weights of order 1, where the narrow component's log-density is −10⁴ to −10⁵
/// (a log-density formed as a difference of such terms loses the wide component's value).
#[test]
fn mixture_kl_and_its_gradients_match_burns_composition() {
    use crate::special::HALF_LN_2PI;
    let _guard = crate::testing::seeded(&test_device(), 34);
    let device = test_device().autodiff();
    let params = [
        ScaleParam::Softplus,
        ScaleParam::LogVariance,
        ScaleParam::SigmoidVariance { bound: 1.6 },
    ];
    let cases: [(usize, &[f32], _, _); 6] = [
        (7, &[1.0], (0.3, 1.2, 0.08), 0.3),
        (300, &[1.0; 3], (0.3, 1.2, 0.08), 0.3),
        (40_000, &[1.0; 2], (0.3, 1.2, 0.08), 0.3),
        (300, &[1.0; 2], (0.5, 1.0, (-6f64).exp()), 1.0),
        (300, &[0.4, 2.5, -1.3], (0.3, 1.2, 0.08), 0.3),
        (40_000, &[0.7, 1.6], (0.3, 1.2, 0.08), 0.3),
    ];
    for (n, scales, (pi, sigma1, sigma2), spread) in cases {
        let draws = scales.len();
        let prior =
            crate::dist::Prior::ScaleMixture { pi, sigma1, sigma2 }.weight_prior::<2>(1, &device);
        let t = MixtureTerms::new(pi, sigma1, sigma2);
        let mu = Tensor::<1>::random([n], Distribution::Normal(0.0, spread), &device);
        let rho = Tensor::<1>::random([n], Distribution::Uniform(-4.0, -1.0), &device);
        let key = 0xabc + n as u64;
        let mut eps = vec![0f32; draws * n];
        for (s, row) in eps.chunks_mut(n).enumerate() {
            elementwise::normals(key, s as u32, row);
            row.iter_mut().for_each(|e| *e *= scales[s]);
        }
        // Any constant: the op adds it as given (here mean-field's).
        let entropy_constant = n as f64 * (HALF_LN_2PI + 0.5);
        let eps = Tensor::<2>::from_data(TensorData::new(eps, [draws, n]), &device);
        for param in params {
            let rule = param.sigma_rule();
            let what = format!(
                "mixture KL of {n} weights, draws' factors {scales:?}, σ₂ = {sigma2:.4}, {rule:?}"
            );
            let ours =
                |rho, mu| mixture_kl(mu, rho, rule, t, key, scales.to_vec(), entropy_constant);
            let burns = |rho: Tensor<1>, mu: Tensor<1>| {
                let sigma = param.sigma(rho);
                let w = mu.reshape([1, n]) + sigma.clone().reshape([1, n]) * eps.clone();
                let cross = prior.log_prob(w).mean().neg();
                cross - sigma.log().sum() - entropy_constant
            };
            // Under σ₂ = e⁻⁶ the gradient of a weight near 0 is `ψ ≈ −w/σ₂²` times `ε`, summed
            // over draws that can cancel: f32's rounding of `w = μ + σε` alone moved `∂ρ` by up
            // to 3·10⁻⁵ of scale from an f64 oracle, the composition's as much as this op's
            // (8 seeds, 300 weights, 2 draws, σ by the sigmoid rule), so 10⁻⁴ there.
            let tol = if sigma2 < 0.01 { 1e-4 } else { 1e-5 };
            compare_products_within(tol, rho.clone(), mu.clone(), &what, ours, burns);
        }
    }
}

/// `∂KL/∂μ` of the scale-mixture KL weight by weight, one draw (so no draws' terms cancel),
/// against `−d ln p/dw` at `w = μ + σε` in f64 from the same `ε` and the prior's f32 constants:
/// within 2·10⁻⁵ of each weight's own value. The gradient spans `1/σ₁²` to `1/σ₂²` (to
/// 9·10⁶) times the weight, so a check relative to the largest gradient cannot see a per-cent
/// error on the weights where the narrow component's responsibility `r₂` is 10⁻⁷–10⁻⁵, which
/// taking `r₂` as `1 − r₁` makes (`r₁`'s rounding, 6·10⁻⁸, times `1/σ₂²`): that form is
/// 0.9 % off here on the CPU kernels and 1.8 % on the default body (lavapipe), where the right
/// one is at most 3.3·10⁻⁶ off on flex, ndarray and wgpu. The weights are spread
/// log-uniformly over 10⁻³·⁵–3, across both components and the crossover between them.
#[test]
fn mixture_kl_gradient_matches_an_f64_oracle_weight_by_weight() {
    let device = test_device().autodiff();
    let n = 4000;
    let priors = [
        (0.5, 1.0, (-6f64).exp()),
        (0.25, (-1f64).exp(), (-8f64).exp()),
        (0.3, 1.2, 0.08),
    ];
    // A fixed sweep: `μ` of alternating sign, `|μ|` log-uniform over 10⁻³·⁵–10⁰·⁵.
    let mu: Vec<f32> = (0..n)
        .map(|i| {
            let u = -3.5 + 4.0 * (i as f64 + 0.5) / n as f64;
            let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
            (sign * 10f64.powf(u)) as f32
        })
        .collect();
    // `σ` of 10⁻⁴ to 10⁻³ of `|μ|`, so that `μ + σε` never cancels.
    let rho: Vec<f32> = mu
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let sigma = m.abs() as f64 * 10f64.powf(-4.0 + (i % 7) as f64 / 6.0);
            sigma.exp_m1().ln() as f32
        })
        .collect();
    let key = 0x5eed_u64;
    let mut eps = vec![0f32; n];
    elementwise::normals(key, 0, &mut eps);
    for (pi, sigma1, sigma2) in priors {
        let t = MixtureTerms::new(pi, sigma1, sigma2);
        let leaf = Tensor::<1>::from_data(TensorData::new(mu.clone(), [n]), &device).require_grad();
        let rho_t = Tensor::<1>::from_data(TensorData::new(rho.clone(), [n]), &device);
        let kl = mixture_kl(
            leaf.clone(),
            rho_t,
            SigmaRule::Softplus,
            t,
            key,
            vec![1.0],
            0.0,
        );
        let got = to_vec(leaf.grad(&kl.backward()).expect("∂μ"));
        let (lw1, lw2) = (t.ln_weight1 as f64, t.ln_weight2 as f64);
        let (iv1, iv2) = (t.inv_var1 as f64, t.inv_var2 as f64);
        let worst = worst_relative(&got, |i| {
            let sigma = (rho[i] as f64).exp().ln_1p();
            let w = mu[i] as f64 + sigma * eps[i] as f64;
            let d = (lw1 - 0.5 * w * w * iv1) - (lw2 - 0.5 * w * w * iv2);
            let (r1, r2) = (1.0 / (1.0 + (-d).exp()), 1.0 / (1.0 + d.exp()));
            w * (r1 * iv1 + r2 * iv2)
        });
        let i = worst.1;
        assert!(
            worst.0 <= 2e-5,
            "π = {pi}, σ₁ = {sigma1:.4}, σ₂ = {sigma2:.2e}: ∂μ[{i}] = {} at μ = {} is {:.2e} off",
            got[i],
            mu[i],
            worst.0
        );
    }
}

/// `quadratic` (a Gaussian prior's term at a point) against an f64 oracle over 40 001 weights
/// (several parallel ranges, a partial last block): the value within 10⁻⁵, and each weight's
/// gradient `2·coef·g·(w − center)` (through an outer factor `g`) within 2·10⁻⁶ of its own
/// size; no gradient reaches an untracked input.
#[test]
fn quadratic_and_its_gradient_match_an_f64_oracle() {
    let device = test_device().autodiff();
    let n = 40_001;
    let (center, coef, g) = (0.1f32, 0.8f32, 1.7f64);
    // A fixed sweep around the centre, no weight equal to it.
    let w: Vec<f32> = (0..n)
        .map(|i| {
            let u = (i as f64 + 0.5) / n as f64;
            (f64::from(center) + 2.0 * (u - 0.5) + 0.3 * (37.0 * u).sin()) as f32
        })
        .collect();
    let leaf = Tensor::<1>::from_data(TensorData::new(w.clone(), [n]), &device).require_grad();
    let value = quadratic(leaf.clone(), center, coef);
    let got_value = to_vec(value.clone())[0];
    let got = to_vec(leaf.grad(&(value * g).backward()).expect("∂w"));
    let offsets: Vec<f64> = w
        .iter()
        .map(|&x| f64::from(x) - f64::from(center))
        .collect();
    let want_value = f64::from(coef) * offsets.iter().map(|c| c * c).sum::<f64>();
    assert!(
        (got_value - want_value).abs() <= 1e-5 * want_value,
        "value {got_value} vs {want_value}"
    );
    let worst = worst_relative(&got, |i| 2.0 * f64::from(coef) * g * offsets[i]);
    let i = worst.1;
    assert!(
        worst.0 <= 2e-6,
        "∂w[{i}] = {} at w = {} is {:.2e} off",
        got[i],
        w[i],
        worst.0
    );
    let untracked = Tensor::<1>::from_data(TensorData::new(w, [n]), &device);
    let other = Tensor::<1>::from_data([1.0f32], &device).require_grad();
    let grads = (quadratic(untracked.clone(), center, coef) * other.clone()).backward();
    assert!(untracked.grad(&grads).is_none());
    let d_other = to_vec(other.grad(&grads).expect("∂ of the factor"))[0];
    assert!((d_other - want_value).abs() <= 1e-5 * want_value);
}

/// The largest `|got_i − want(i)|/|want(i)|` over `got` and its index.
fn worst_relative(got: &[f64], want: impl Fn(usize) -> f64) -> (f64, usize) {
    got.iter().enumerate().fold((0.0, 0), |worst, (i, g)| {
        let w = want(i);
        let err = (g - w).abs() / w.abs();
        if err > worst.0 { (err, i) } else { worst }
    })
}

/// `ours(x, w)` against `burns(x, w)` (both flattened) with `x`, `w` or both tracked: values,
/// `∂x` and `∂w` within 10⁻⁵ of scale, no gradient for an untracked leaf.
fn compare_products<const DW: usize>(
    x: Tensor<1>,
    w: Tensor<DW>,
    what: &str,
    ours: impl Fn(Tensor<1>, Tensor<DW>) -> Tensor<1>,
    burns: impl Fn(Tensor<1>, Tensor<DW>) -> Tensor<1>,
) {
    compare_products_within(1e-5, x, w, what, ours, burns);
}

/// [`compare_products`] with gradients within `tol` of scale.
fn compare_products_within<const DW: usize>(
    tol: f64,
    x: Tensor<1>,
    w: Tensor<DW>,
    what: &str,
    ours: impl Fn(Tensor<1>, Tensor<DW>) -> Tensor<1>,
    burns: impl Fn(Tensor<1>, Tensor<DW>) -> Tensor<1>,
) {
    let all = [(true, true), (false, true), (true, false)];
    compare_products_tracking(tol, x, w, what, &all, ours, burns);
}

/// [`compare_products_within`] for the given `(x tracked, w tracked)` cases.
fn compare_products_tracking<const DW: usize>(
    tol: f64,
    x: Tensor<1>,
    w: Tensor<DW>,
    what: &str,
    tracking: &[(bool, bool)],
    ours: impl Fn(Tensor<1>, Tensor<DW>) -> Tensor<1>,
    burns: impl Fn(Tensor<1>, Tensor<DW>) -> Tensor<1>,
) {
    for &(x_tracked, w_tracked) in tracking {
        let leaf_x = if x_tracked {
            x.clone().detach().require_grad()
        } else {
            x.clone().detach()
        };
        let leaf_w = if w_tracked {
            w.clone().detach().require_grad()
        } else {
            w.clone().detach()
        };
        let want = burns(leaf_x.clone(), leaf_w.clone());
        let got = ours(leaf_x.clone(), leaf_w.clone());
        let what = format!("{what}, tracked x {x_tracked}, w {w_tracked}");
        let err = rel_err(&to_vec(got.clone()), &to_vec(want.clone()));
        assert!(err < 1e-5, "{what}: values differ by {err:.2e} of scale");
        let r = want.random_like(Distribution::Normal(0.0, 1.0));
        let g_want = (want * r.clone()).sum().backward();
        let g_got = (got * r).sum().backward();
        check_grad(
            tol,
            x_tracked,
            leaf_x.grad(&g_got),
            leaf_x.grad(&g_want),
            &format!("{what}: ∂x"),
        );
        check_grad(
            tol,
            w_tracked,
            leaf_w.grad(&g_got),
            leaf_w.grad(&g_want),
            &format!("{what}: ∂w"),
        );
    }
}

/// A tracked leaf's gradient within `tol` of scale of the reference's; none for an untracked one.
fn check_grad<const D: usize>(
    tol: f64,
    tracked: bool,
    got: Option<Tensor<D>>,
    want: Option<Tensor<D>>,
    what: &str,
) {
    if !tracked {
        assert!(got.is_none(), "{what}: an untracked leaf got a gradient");
        return;
    }
    let err = rel_err(
        &to_vec(got.expect("gradient")),
        &to_vec(want.expect("reference")),
    );
    assert!(err < tol, "{what}: differs by {err:.2e} of scale");
}

#[test]
#[should_panic(expected = "sample counts")]
fn batched_matmul_refuses_weights_for_another_number_of_samples() {
    let device = test_device();
    batched_matmul(
        Tensor::<3>::zeros([3, 2, 4], &device),
        Tensor::<3>::zeros([2, 4, 5], &device),
    );
}

#[test]
#[should_panic(expected = "features")]
fn matmul_refuses_an_input_of_another_width() {
    let device = test_device();
    matmul(
        Tensor::<2>::zeros([3, 4], &device),
        Tensor::<2>::zeros([5, 2], &device),
    );
}
