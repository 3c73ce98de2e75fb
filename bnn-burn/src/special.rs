//! Tensor math that burn lacks: log-gamma, digamma, logsumexp, log-mean-exp, the standard
//! normal pdf / cdf / log-cdf, and Gauss–Hermite nodes for normal expectations.
//!
//! Every function is built from differentiable burn ops, so gradients flow through it on any
//! backend. Both branches of every `mask_where` stay finite for every input, so a branch that is
//! not selected can never leak a NaN into the backward pass.
//!
//! Accuracy (f32, against 30-digit references in the tests): `|err| <= 1e-5 * max(|ref|, 1)` for
//! lgamma and digamma on `[1e-4, 1e4]`, and relative error `<= 1e-5` for the normal functions
//! (the log-cdf stays accurate at `x = -30`, where the cdf itself underflows f32).

use burn::tensor::Tensor;

pub use bnn_kernels::HALF_LN_2PI;
/// Euler–Mascheroni constant γ.
pub const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// Below this argument lgamma and digamma shift by recurrence before the asymptotic series.
const SHIFT_BELOW: f64 = 8.0;

/// `ln Γ(x)` for `x > 0`.
///
/// Stirling's series `(z−½)ln z − z + ½ln 2π + 1/(12z) − 1/(360z³) + 1/(1260z⁵) − 1/(1680z⁷)`
/// for `z ≥ 8` (truncation error < 1e-11), and for `x < 8` the recurrence
/// `ln Γ(x) = ln Γ(x+8) − ln ∏_{i<8}(x+i)`.
pub fn lgamma<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    let small = x.clone().lower_elem(SHIFT_BELOW);
    // Clamped copies keep both branches finite whatever x is.
    let xs = x.clone().clamp_max(SHIFT_BELOW);
    let mut shift = (xs.clone() * (xs.clone() + 1.0)).log();
    for i in [2.0, 4.0, 6.0] {
        shift = shift + ((xs.clone() + i) * (xs.clone() + (i + 1.0))).log();
    }
    let z = x.mask_where(small.clone(), xs + SHIFT_BELOW);
    let inv = z.clone().recip();
    let inv2 = inv.clone().square();
    let series = inv.clone()
        * (((inv2.clone() * (-1.0 / 1680.0) + 1.0 / 1260.0) * inv2.clone() - 1.0 / 360.0) * inv2
            + 1.0 / 12.0);
    let stirling = (z.clone() - 0.5) * z.clone().log() - z + HALF_LN_2PI + series;
    stirling - shift * small.float()
}

/// Digamma `ψ(x) = d ln Γ(x) / dx` for `x > 0`.
///
/// Asymptotic series `ln z − 1/(2z) − 1/(12z²) + 1/(120z⁴) − 1/(252z⁶) + 1/(240z⁸)` for `z ≥ 8`,
/// and the recurrence `ψ(x) = ψ(x+8) − Σ_{i<8} 1/(x+i)` below.
pub fn digamma<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    let small = x.clone().lower_elem(SHIFT_BELOW);
    let xs = x.clone().clamp_max(SHIFT_BELOW);
    let mut shift = xs.clone().recip();
    for i in 1..8 {
        shift = shift + (xs.clone() + i as f64).recip();
    }
    let z = x.mask_where(small.clone(), xs + SHIFT_BELOW);
    let inv = z.clone().recip();
    let inv2 = inv.clone().square();
    let series = inv2.clone()
        * ((((inv2.clone() * (1.0 / 240.0) - 1.0 / 252.0) * inv2.clone() + 1.0 / 120.0) * inv2)
            - 1.0 / 12.0);
    let asym = z.log() - inv * 0.5 + series;
    asym - shift * small.float()
}

/// `log Σ_dim exp(x)`, keeping `dim` with size 1 (burn's `sum_dim` convention).
///
/// The maximum is subtracted first (and treated as a constant), so inputs of magnitude 1e4 and
/// more neither overflow nor underflow; a slice that is all `-inf` gives `-inf`, not NaN.
pub fn logsumexp<const D: usize>(x: Tensor<D>, dim: usize) -> Tensor<D> {
    let max = crate::reduce::max_dim(x.clone(), dim).detach();
    // An all -inf slice has max -inf; shifting by 0 there keeps exp(-inf - 0) = 0 and log 0 = -inf.
    let finite = max.clone().is_finite();
    let zeros = max.zeros_like();
    let max = zeros.mask_where(finite, max);
    crate::reduce::sum_dim((x - max.clone()).exp(), dim).log() + max
}

/// `log( (1/n) Σ_dim exp(x) )`, with `n` the size of `dim`; keeps `dim` with size 1.
///
/// The estimator of a log-marginal from `n` Monte Carlo log-likelihoods.
pub fn log_mean_exp<const D: usize>(x: Tensor<D>, dim: usize) -> Tensor<D> {
    let n = x.dims()[dim] as f64;
    logsumexp(x, dim) - n.ln()
}

/// Standard normal density `φ(x) = exp(−x²/2)/√(2π)`.
pub fn normal_pdf<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    normal_log_pdf(x).exp()
}

/// Standard normal log-density `−x²/2 − ½ ln 2π`.
pub fn normal_log_pdf<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    x.square() * (-0.5) - HALF_LN_2PI
}

/// `ln erfc(z)` for `z ≥ 0`, from the Chebyshev fit
/// `erfc(z) = t·exp(−z² + P(t))`, `t = 1/(1 + z/2)` (fractional error < 1.2e-7 for all z ≥ 0;
/// Press et al., *Numerical Recipes*, §6.2). Working in log space is what keeps the normal
/// log-cdf accurate far in the lower tail.
fn ln_erfc_nonneg<const D: usize>(z: Tensor<D>) -> Tensor<D> {
    const C: [f64; 10] = [
        -1.265_512_23,
        1.000_023_68,
        0.374_091_96,
        0.096_784_18,
        -0.186_288_06,
        0.278_868_07,
        -1.135_203_98,
        1.488_515_87,
        -0.822_152_23,
        0.170_872_77,
    ];
    let t = (z.clone() * 0.5 + 1.0).recip();
    // Horner's rule from the highest coefficient down.
    let mut poly = t.clone() * C[9];
    for c in C[1..9].iter().rev() {
        poly = (poly + *c) * t.clone();
    }
    let poly = poly + C[0];
    t.log() - z.square() + poly
}

/// Standard normal cdf `Φ(x)`.
pub fn normal_cdf<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    normal_log_cdf(x).exp()
}

/// `(Φ(x), Φ(−x))` from one evaluation of `erfc(|x|/√2)`: the smaller of the two is
/// `½ erfc(|x|/√2)` (accurate to its last digits far in the tail), the larger one minus it.
/// A third of the work of two [`normal_cdf`] calls, for the moment rules that need both.
///
/// `|x|` is formed as `x` with its negative entries negated, not by `abs`: autodiff's `abs`
/// has slope `sign(0) = 0` at `x = 0`, which would make `∂Φ/∂x` vanish there instead of being
/// `φ(0)`. Exact zeros are common in the moment rules (a ReLU unit whose mean is 0, a max-pool
/// window whose entries tie on a blank background).
pub fn normal_cdf_pair<const D: usize>(x: Tensor<D>) -> (Tensor<D>, Tensor<D>) {
    let negative = x.clone().lower_elem(0.0);
    let z = x.clone().mask_where(negative.clone(), x.neg()) * std::f64::consts::FRAC_1_SQRT_2;
    let tail = (ln_erfc_nonneg(z) - std::f64::consts::LN_2).exp();
    let body = tail.clone().neg() + 1.0;
    let lower = body.clone().mask_where(negative.clone(), tail.clone());
    let upper = tail.mask_where(negative, body);
    (lower, upper)
}

/// `ln Φ(x)`, accurate in both tails.
///
/// For `x < 0`: `ln Φ(x) = ln ½ + ln erfc(−x/√2)` evaluated in log space; for `x ≥ 0`:
/// `ln Φ(x) = ln(1 − ½ erfc(x/√2))`.
pub fn normal_log_cdf<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    let negative = x.clone().lower_elem(0.0);
    let scale = std::f64::consts::FRAC_1_SQRT_2;
    let lower = ln_erfc_nonneg((x.clone() * -scale).clamp_min(0.0)) - std::f64::consts::LN_2;
    let upper_tail = (ln_erfc_nonneg((x * scale).clamp_min(0.0)) - std::f64::consts::LN_2).exp();
    log1p(upper_tail.neg()).mask_where(negative, lower)
}

/// `softplus(x) = ln(1 + eˣ)` as `max(x, log1p(exp(min(x, 20))))`: four tensor operations.
///
/// For `x ≤ 20` the second argument is the exact softplus (which exceeds `x`); above, it is
/// `≈ 20 < x`, and `softplus(x) = x` to f32 precision. The gradient is `sigmoid(x)` below 20 and
/// 1 above. burn's `activation::softplus` takes seven operations (a β scaling, a mask and a
/// select), which matters for the posterior scales `σ = softplus(ρ)` evaluated every step.
pub fn softplus<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    log1p(x.clone().clamp_max(20.0).exp()).max_pair(x)
}

/// `ln(1 + y)` for `y > −1`, accurate for small `|y|` on every backend.
///
/// Where the tensor's backend has an accurate `log1p` ([`crate::device::accurate_log1p`]) it is
/// used.
/// Otherwise (Vulkan allows `ln` an absolute error of 2⁻²¹ near 1, so neither `ln(1 + y)` nor a
/// compensated form keeps small `y`) the series `Σ_{k=1}^{9} (−1)^{k+1} yᵏ/k` is used for
/// `|y| < 0.1` (truncation error `< |y|¹⁰/10 ≤ 10⁻¹¹`), and `ln(1 + y)` above.
pub fn log1p<const D: usize>(y: Tensor<D>) -> Tensor<D> {
    if crate::device::accurate_log1p(&y.device()) {
        return y.log1p();
    }
    let small = y.clone().abs().lower_elem(0.1);
    // The series runs on a clamped copy: unclamped, y⁹ overflows for y ≳ 10⁴ and the branch
    // that is not selected would put 0·∞ = NaN into the backward pass.
    let ys = y.clone().clamp(-0.1, 0.1);
    // Horner: y (1 − y (1/2 − y (1/3 − … − y/9))).
    let series = (1..=8).rev().fold(ys.ones_like() / 9.0, |acc, k| {
        acc.neg() * ys.clone() + 1.0 / k as f64
    }) * ys;
    (y + 1.0).log().mask_where(small, series)
}

/// `ln(eˢ − 1)`: the `ρ` whose softplus is `σ` (for initialising `σ = softplus(ρ)` at a given σ).
pub fn inverse_softplus(sigma: f64) -> f64 {
    assert!(sigma > 0.0, "inverse_softplus needs sigma > 0, got {sigma}");
    // expm1 keeps precision for small sigma; for large sigma ln(e^s - 1) = s + ln(1 - e^-s).
    if sigma > 20.0 {
        sigma + (-(-sigma).exp()).ln_1p()
    } else {
        sigma.exp_m1().ln()
    }
}

/// `softplus(ρ) = ln(1 + e^ρ)` on a scalar, overflow-safe.
pub fn softplus_scalar(rho: f64) -> f64 {
    if rho > 20.0 {
        rho + (-rho).exp().ln_1p()
    } else {
        rho.exp().ln_1p()
    }
}

/// Scalar `ln Γ(x)` in f64 (same series as [`lgamma`]); for constants computed on the host.
pub fn lgamma_scalar(x: f64) -> f64 {
    assert!(x > 0.0, "lgamma_scalar needs x > 0, got {x}");
    let mut shift = 0.0;
    let mut z = x;
    while z < SHIFT_BELOW {
        shift += z.ln();
        z += 1.0;
    }
    let inv = 1.0 / z;
    let inv2 = inv * inv;
    let series = inv * (((-inv2 / 1680.0 + 1.0 / 1260.0) * inv2 - 1.0 / 360.0) * inv2 + 1.0 / 12.0);
    (z - 0.5) * z.ln() - z + HALF_LN_2PI + series - shift
}

/// Scalar digamma `ψ(x) = d ln Γ(x)/dx` in f64 for `x > 0`: the recurrence
/// `ψ(x) = ψ(x + 1) − 1/x` up to `x ≥ 10`, then the asymptotic series
/// `ln x − 1/(2x) − 1/(12x²) + 1/(120x⁴) − 1/(252x⁶)` (error below 10⁻¹⁰ there).
pub fn digamma_scalar(x: f64) -> f64 {
    assert!(x > 0.0, "digamma_scalar needs x > 0, got {x}");
    let (mut z, mut shift) = (x, 0.0);
    while z < 10.0 {
        shift -= 1.0 / z;
        z += 1.0;
    }
    let inv2 = 1.0 / (z * z);
    z.ln() - 0.5 / z - inv2 * (1.0 / 12.0 - inv2 * (1.0 / 120.0 - inv2 / 252.0)) + shift
}

/// Gauss–Hermite rule of `n` nodes for the standard normal: `E[φ(Z)] ≈ Σ_k w_k φ(z_k)`, exact
/// for polynomials of degree below `2n`. Nodes (ascending) and weights by Golub–Welsch: the
/// eigenvalues of the Jacobi matrix of the probabilists' Hermite polynomials (off-diagonal
/// `√k`) and the squared first components of its eigenvectors.
///
/// # Panics
/// If `n` is 0.
pub fn gauss_hermite(n: usize) -> (Vec<f64>, Vec<f64>) {
    assert!(n > 0, "gauss_hermite: at least one node");
    let mut jacobi = vec![0.0; n * n];
    for k in 1..n {
        let b = (k as f64).sqrt();
        jacobi[(k - 1) * n + k] = b;
        jacobi[k * n + k - 1] = b;
    }
    let (nodes, vectors) = crate::linalg::dense::symmetric_eigen(jacobi, n);
    let weights = (0..n).map(|j| vectors[j] * vectors[j]).collect();
    (nodes, weights)
}

#[cfg(test)]
#[allow(clippy::excessive_precision)] // reference tables keep mpmath's digits
mod tests {
    use super::*;
    use crate::testing::{test_device, to_vec};
    use burn::tensor::Tensor;

    // References: mpmath at 30 digits.
    const LGAMMA: [(f64, f64); 17] = [
        (1e-4, 9.210_282_658_633_963),
        (1e-3, 6.907_178_885_383_853),
        (0.01, 4.599_479_878_042_022),
        (0.1, 2.252_712_651_734_206),
        (0.5, 0.572_364_942_924_700_1),
        (1.0, 0.0),
        (1.5, -0.120_782_237_635_245_22),
        (2.0, 0.0),
        (2.5, 0.284_682_870_472_919_2),
        (3.7, 1.428_072_326_665_388_1),
        (7.9, 8.324_265_868_008_81),
        (8.0, 8.525_161_361_065_415),
        (10.0, 12.801_827_480_081_469),
        (25.5, 56.389_167_643_719_944),
        (100.0, 359.134_205_369_575_4),
        (1234.5, 7_550.550_901_077_895),
        (1e4, 82_099.717_496_442_38),
    ];
    const DIGAMMA: [(f64, f64); 17] = [
        (1e-4, -10_000.577_051_183_514),
        (1e-3, -1_000.575_571_931_810_3),
        (0.01, -100.560_885_457_868_68),
        (0.1, -10.423_754_940_411_076),
        (0.5, -1.963_510_026_021_423_5),
        (1.0, -0.577_215_664_901_532_9),
        (1.5, 0.036_489_973_978_576_52),
        (2.0, 0.422_784_335_098_467_1),
        (2.5, 0.703_156_640_645_243_2),
        (3.7, 1.167_153_539_361_511_3),
        (7.9, 2.002_238_487_563_571),
        (8.0, 2.015_641_477_955_610_2),
        (10.0, 2.251_752_589_066_721),
        (25.5, 3.218_942_472_883_92),
        (100.0, 4.600_161_852_738_087),
        (1234.5, 7.118_016_231_827_998),
        (1e4, 9.210_290_371_142_849),
    ];
    const LOG_CDF: [(f64, f64); 11] = [
        (-30.0, -454.321_243_956_343_2),
        (-10.0, -53.231_285_150_512_47),
        (-5.0, -15.064_998_393_988_725),
        (-2.0, -3.783_184_333_682_032),
        (-1.0, -1.841_021_645_009_263_6),
        (-0.1, -0.776_154_592_730_273_3),
        (0.0, -std::f64::consts::LN_2),
        (0.5, -0.368_946_415_288_656_4),
        (1.0, -0.172_753_779_023_449_88),
        (3.0, -0.001_350_809_964_748_193_8),
        (6.0, -9.865_876_455_243_758e-10),
    ];

    fn eval(f: impl Fn(Tensor<1>) -> Tensor<1>, xs: &[f64]) -> Vec<f64> {
        let device = test_device();
        let x = Tensor::<1>::from_floats(
            xs.iter().map(|v| *v as f32).collect::<Vec<_>>().as_slice(),
            &device,
        );
        to_vec(f(x))
    }

    fn check(name: &str, got: &[f64], table: &[(f64, f64)], tol: impl Fn(f64) -> f64) {
        for (g, (x, r)) in got.iter().zip(table) {
            let err = (g - r).abs();
            assert!(
                err <= tol(*r),
                "{name}({x}) = {g}, reference {r}, error {err:e} > {:e}",
                tol(*r)
            );
        }
    }

    #[test]
    fn lgamma_matches_reference() {
        let xs: Vec<f64> = LGAMMA.iter().map(|p| p.0).collect();
        check("lgamma", &eval(lgamma, &xs), &LGAMMA, |r| {
            1e-5 * r.abs().max(1.0)
        });
    }

    #[test]
    fn digamma_scalar_matches_reference() {
        // ψ(1) = −γ, ψ(½) = −γ − 2 ln 2, ψ(25) = H₂₄ − γ.
        let gamma = 0.577_215_664_901_532_9;
        let h24: f64 = (1..25).map(|j| 1.0 / j as f64).sum();
        for (x, want) in [
            (1.0, -gamma),
            (0.5, -gamma - 2.0 * std::f64::consts::LN_2),
            (25.0, h24 - gamma),
            (1e4, (1e4f64).ln() - 0.5e-4 - 1.0 / 12e8),
        ] {
            assert!((digamma_scalar(x) - want).abs() < 1e-10, "ψ({x})");
        }
    }

    #[test]
    fn digamma_matches_reference() {
        let xs: Vec<f64> = DIGAMMA.iter().map(|p| p.0).collect();
        check("digamma", &eval(digamma, &xs), &DIGAMMA, |r| {
            1e-5 * r.abs().max(1.0)
        });
    }

    #[test]
    fn normal_log_cdf_matches_reference_in_both_tails() {
        let xs: Vec<f64> = LOG_CDF.iter().map(|p| p.0).collect();
        check("log_cdf", &eval(normal_log_cdf, &xs), &LOG_CDF, |r| {
            1e-5 * r.abs()
        });
        // The cdf itself, where it is representable in f32.
        let cdf = eval(normal_cdf, &xs[2..]);
        for (g, (x, r)) in cdf.iter().zip(&LOG_CDF[2..]) {
            let r = r.exp();
            assert!((g - r).abs() <= 1e-5 * r, "cdf({x}) = {g}, reference {r}");
        }
    }

    #[test]
    fn normal_cdf_pair_matches_the_cdf_on_both_sides() {
        let xs = [-30.0, -8.0, -1.5, -0.1, 0.0, 0.3, 2.0, 9.0, 30.0];
        let device = test_device();
        let floats: Vec<f32> = xs.iter().map(|x| *x as f32).collect();
        let (lower, upper) = normal_cdf_pair(Tensor::<1>::from_floats(floats.as_slice(), &device));
        let (lower, upper) = (to_vec(lower), to_vec(upper));
        let direct = eval(normal_cdf, &xs);
        let mirrored = eval(normal_cdf, &xs.map(|x| -x));
        for i in 0..xs.len() {
            // Relative in the tails, where each value is the small one of its pair.
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-5 * b.abs().max(1e-30);
            assert!(
                close(lower[i], direct[i]),
                "Φ({}) = {} vs {}",
                xs[i],
                lower[i],
                direct[i]
            );
            assert!(
                close(upper[i], mirrored[i]),
                "Φ(−{}) = {} vs {}",
                xs[i],
                upper[i],
                mirrored[i]
            );
        }
    }

    /// `∂Φ(x)/∂x = φ(x)` and `∂Φ(−x)/∂x = −φ(x)` on both sides and at exactly 0, where a
    /// gradient through autodiff's `abs` would be 0.
    #[test]
    fn normal_cdf_pair_has_the_density_as_its_slope_including_at_zero() {
        let xs: [f64; 5] = [-3.0, -0.4, 0.0, 0.7, 2.5];
        let device = test_device().autodiff();
        let floats: Vec<f32> = xs.iter().map(|x| *x as f32).collect();
        for side in 0..2 {
            let x = Tensor::<1>::from_floats(floats.as_slice(), &device).require_grad();
            let (lower, upper) = normal_cdf_pair(x.clone());
            let grads = if side == 0 { lower } else { upper }.sum().backward();
            let g = to_vec(x.grad(&grads).expect("Φ has a gradient"));
            for (i, x) in xs.iter().enumerate() {
                let pdf = (-x * x / 2.0f64).exp() / (2.0 * std::f64::consts::PI).sqrt();
                let want = if side == 0 { pdf } else { -pdf };
                assert!(
                    (g[i] - want).abs() <= 1e-5,
                    "side {side}: slope at {x} is {} vs {want}",
                    g[i]
                );
            }
        }
    }

    #[test]
    fn normal_pdf_matches_closed_form() {
        let xs = [-3.0, -0.5, 0.0, 1.0, 2.5];
        for (g, x) in eval(normal_pdf, &xs).iter().zip(xs) {
            let r = (-x * x / 2.0f64).exp() / (2.0 * std::f64::consts::PI).sqrt();
            assert!((g - r).abs() <= 1e-6 * r.max(1e-3), "pdf({x}) = {g} vs {r}");
        }
    }

    #[test]
    fn scalar_lgamma_matches_reference() {
        for (x, r) in LGAMMA {
            assert!((lgamma_scalar(x) - r).abs() <= 1e-11 * r.abs().max(1.0));
        }
    }

    #[test]
    fn logsumexp_is_stable_at_large_magnitude() {
        let device = test_device();
        let x = Tensor::<2>::from_floats(
            [
                [1e4, 1e4, 1e4 - 2.0],
                [-1e4, -1e4 - 1.0, -1e4 - 50.0],
                [f32::NEG_INFINITY; 3],
            ],
            &device,
        );
        let got = to_vec(logsumexp(x.clone(), 1));
        let r0 = 1e4 + (2.0 + (-2.0f64).exp()).ln();
        let r1 = -1e4 + (1.0 + (-1.0f64).exp() + (-50.0f64).exp()).ln();
        assert!((got[0] - r0).abs() <= 1e-5 * r0.abs(), "{} vs {r0}", got[0]);
        assert!((got[1] - r1).abs() <= 1e-5 * r1.abs(), "{} vs {r1}", got[1]);
        assert!(got[2] == f64::NEG_INFINITY, "all -inf row gave {}", got[2]);
        let lme = to_vec(log_mean_exp(x.slice([0..1, 0..3]), 1));
        assert!((lme[0] - (r0 - 3f64.ln())).abs() <= 1e-5 * r0);
    }

    #[test]
    fn log1p_keeps_the_digits_of_small_arguments() {
        let ys = [1e-12, 3e-8, -2e-6, 1e-3, 0.5, 10.0];
        for (g, y) in eval(log1p, &ys).iter().zip(ys) {
            let r = (y as f32 as f64).ln_1p();
            assert!(
                (g - r).abs() <= 1e-6 * r.abs(),
                "log1p({y}) = {g}, reference {r}"
            );
        }
    }

    #[test]
    fn softplus_matches_ln_one_plus_exp_and_its_gradient_is_the_sigmoid() {
        let xs = [-30.0, -5.0, -0.5, 0.0, 1.0, 19.0, 21.0, 60.0];
        for (g, x) in eval(softplus, &xs).iter().zip(xs) {
            let r = softplus_scalar(x);
            // 1e-5 relative: a GPU `exp` may be off by a few ULP × |x| (Vulkan's precision rule).
            assert!((g - r).abs() <= 1e-5 * r, "softplus({x}) = {g}, {r}");
        }
        let device = test_device().autodiff();
        let x = Tensor::<1>::from_floats([-5.0, 0.0, 3.0, 25.0], &device).require_grad();
        let grads = softplus(x.clone()).sum().backward();
        let g = to_vec(x.grad(&grads).expect("softplus has a gradient"));
        for (a, x) in g.iter().zip([-5.0f64, 0.0, 3.0, 25.0]) {
            let sigmoid = 1.0 / (1.0 + (-x).exp());
            assert!(
                (a - sigmoid).abs() < 1e-6,
                "softplus'({x}) = {a}, sigmoid = {sigmoid}"
            );
        }
    }

    #[test]
    fn special_functions_are_differentiable() {
        let device = test_device().autodiff();
        let x = Tensor::<1>::from_floats([0.7, 3.0, 12.0], &device).require_grad();
        let y = lgamma(x.clone()).sum();
        let grads = y.backward();
        let g = to_vec(x.grad(&grads).expect("lgamma has a gradient"));
        // d lgamma / dx = digamma.
        let d = eval(digamma, &[0.7, 3.0, 12.0]);
        for (a, b) in g.iter().zip(&d) {
            assert!((a - b).abs() < 1e-4, "lgamma'(x) = {a}, digamma = {b}");
        }
        let x = Tensor::<1>::from_floats([-4.0, 0.5], &device).require_grad();
        let grads = normal_log_cdf(x.clone()).sum().backward();
        let g = to_vec(x.grad(&grads).unwrap());
        // d/dx ln Φ(x) = φ(x)/Φ(x) (inverse Mills ratio); at -4 this is ≈ 4.2256.
        assert!((g[0] - 4.225_6).abs() < 1e-2, "dlogcdf(-4) = {}", g[0]);
        let r = (-0.125f64).exp() / (2.0 * std::f64::consts::PI).sqrt() / 0.691_462_461_274_013_1;
        assert!((g[1] - r).abs() < 1e-4, "dlogcdf(0.5) = {} vs {r}", g[1]);
    }

    #[test]
    fn inverse_softplus_round_trips() {
        for s in [1e-6, 0.01, 0.5, 3.0, 30.0] {
            let rho = inverse_softplus(s);
            assert!(
                (softplus_scalar(rho) - s).abs() <= 1e-12 * s.max(1.0),
                "sigma {s}"
            );
        }
    }

    /// The gradient of softplus is the logistic function everywhere, finite far in both tails
    /// (no branch of `log1p` or `softplus` leaks an infinity into the backward pass).
    #[test]
    fn softplus_gradient_is_the_logistic_function_on_every_backend() {
        let device = test_device().autodiff();
        let xs: Vec<f32> = (-200..=200).map(|i| i as f32 * 0.25).collect();
        let x = Tensor::<1>::from_floats(xs.as_slice(), &device).require_grad();
        let grads = softplus(x.clone()).sum().backward();
        let g = to_vec(x.grad(&grads).expect("gradient"));
        for (v, gv) in xs.iter().zip(g) {
            let want = 1.0 / (1.0 + (-(*v as f64)).exp());
            assert!(
                gv.is_finite() && (gv - want).abs() < 1e-6,
                "softplus'({v}) = {gv}, want {want}"
            );
        }
    }

    #[test]
    fn gauss_hermite_integrates_normal_moments_exactly_to_its_degree() {
        for n in [1, 2, 5, 20] {
            let (z, w) = gauss_hermite(n);
            assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12, "n = {n}");
            // E[Z^2k] = (2k − 1)!!, odd moments 0, for 2k < 2n.
            let mut double_factorial = 1.0;
            for k in 0..n {
                let even: f64 = z
                    .iter()
                    .zip(&w)
                    .map(|(z, w)| w * z.powi(2 * k as i32))
                    .sum();
                let odd: f64 = z
                    .iter()
                    .zip(&w)
                    .map(|(z, w)| w * z.powi(2 * k as i32 + 1))
                    .sum();
                assert!(
                    (even - double_factorial).abs() < 1e-9 * double_factorial,
                    "n = {n}: E[Z^{}] = {even}, want {double_factorial}",
                    2 * k
                );
                assert!(odd.abs() < 1e-9 * double_factorial.max(1.0), "n = {n}");
                double_factorial *= (2 * k + 1) as f64;
            }
        }
    }
}
