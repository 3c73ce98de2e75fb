//! Every kernel against an `f64` evaluation of its formula: the noise from Philox and
//! Box–Muller in `f64`, the draws, KL terms and moments from their definitions, the gradients
//! from their derivatives (or central differences where the derivative is long), Adam from its
//! update rule, the rectifier and Clark's max from the Gaussian cdf, the low-rank KL from a
//! determinant by elimination and the convolution from its sum. Lengths cross several parallel
//! chunks and end in a partial block.

// The f64 loops index several arrays at once, as the formulas do.
#![allow(clippy::needless_range_loop)]

use bnn_kernels::clark::{self, PoolMaps};
use bnn_kernels::conv::{self, ConvGeometry};
use bnn_kernels::elementwise::{
    self, AdamStep, Draws, Grads, KlTerms, LocScale, PerWeight, Prior, SigmaRule, Tape,
};
use bnn_kernels::mixture::{self, MixtureKl, MixtureTerms};
use bnn_kernels::rectifier::{self, RectifierOutput, RectifierRule};
use bnn_kernels::rng::{key_words, philox};
use bnn_kernels::simd::Out;
use bnn_kernels::{DropoutNoise, factor};

/// Three parallel chunks (16 Ki elements each) and a partial block.
const N: usize = 3 * 16_384 + 37;

/// The `f64` formulas.
mod oracle {
    use super::*;

    /// Element `i` of sub-stream `stream` of `key`: block `i / 64`; its first 32 elements come
    /// from words 0 and 1 of the Philox outputs of counters `16·block + p` (`p = i mod 16`), its
    /// last 32 from words 2 and 3; the first 16 of each half are `r cos θ`, the next `r sin θ`,
    /// with `u₁ = (⌊a/2⁸⌋ + 1)/2²⁴`, `u₂ = ⌊b/2⁸⌋/2²⁴`, `r = √(−2 ln u₁)`, `θ = 2πu₂`.
    pub fn normal(key: u64, stream: u32, i: usize) -> f64 {
        let (block, j) = ((i / 64) as u64, i % 64);
        let (half, p, sine) = (j / 32, j % 16, (j % 32) >= 16);
        let c = block * 16 + p as u64;
        let r = philox([c as u32, (c >> 32) as u32, stream, 0], key_words(key));
        let (a, b) = (r[2 * half], r[2 * half + 1]);
        let u1 = ((a >> 8) + 1) as f64 / 16_777_216.0;
        let u2 = (b >> 8) as f64 / 16_777_216.0;
        let radius = (-2.0 * u1.ln()).sqrt();
        let theta = 2.0 * std::f64::consts::PI * u2;
        radius * if sine { theta.sin() } else { theta.cos() }
    }

    pub fn normals(key: u64, stream: u32, n: usize) -> Vec<f64> {
        (0..n).map(|i| normal(key, stream, i)).collect()
    }

    pub fn softplus(x: f64) -> f64 {
        x.max(0.0) + (-x.abs()).exp().ln_1p()
    }

    pub fn sigmoid(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    /// `(σ, dσ/dρ)` of one `ρ` under `rule`.
    pub fn sigma(rule: SigmaRule, rho: f64) -> (f64, f64) {
        match rule {
            SigmaRule::Softplus => (softplus(rho), sigmoid(rho)),
            SigmaRule::LogVariance => {
                let s = (0.5 * rho).exp();
                (s, 0.5 * s)
            }
            SigmaRule::SigmoidVariance { ln_bound } => {
                let s = (0.5 * (ln_bound as f64 - softplus(-rho))).exp();
                (s, 0.5 * s * sigmoid(-rho))
            }
        }
    }

    /// One weight's KL terms `½(σ̃²·ivs + (μ − μ₀)²·ivm)/σ₀² − ln σ̃ + ln σ₀` and their
    /// `(∂/∂μ, ∂/∂σ)` (0 in `σ` where the clamp holds), `σ̃` clamped to `terms.sigma_range`.
    pub fn kl(t: KlTerms, mu: f64, sigma: f64, prior: (f64, f64)) -> (f64, f64, f64) {
        let (m0, s0) = prior;
        let (lo, hi) = (t.sigma_range.0 as f64, t.sigma_range.1 as f64);
        let st = sigma.clamp(lo, hi);
        let (ivs, ivm, prec) = (t.inv_var_sigma as f64, t.inv_var_mu as f64, 1.0 / (s0 * s0));
        let c = mu - m0;
        let value = 0.5 * (st * st * ivs + c * c * ivm) * prec - st.ln() + s0.ln();
        let dsigma = if sigma >= lo && sigma <= hi {
            st * ivs * prec - 1.0 / st
        } else {
            0.0
        };
        (value, c * ivm * prec, dsigma)
    }

    /// The standard normal density.
    pub fn pdf(x: f64) -> f64 {
        (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
    }

    /// The standard normal cdf: `½ + φ(x)·Σ x^(2n+1)/(2n+1)!!` for `0 ≤ x ≤ 6`, `1 − Φ(−x)` on
    /// `[−6, 0)`, and beyond ±6 the continued fraction of the Mills ratio,
    /// `Φ(−z) = φ(z)/(z + 1/(z + 2/(z + …)))`.
    pub fn cdf(x: f64) -> f64 {
        let tail = |z: f64| {
            let mut f = z;
            for k in (1..=60).rev() {
                f = z + k as f64 / f;
            }
            pdf(z) / f
        };
        if x < -6.0 {
            return tail(-x);
        }
        if x > 6.0 {
            return 1.0 - tail(x);
        }
        if x < 0.0 {
            return 1.0 - cdf(-x);
        }
        let (mut term, mut sum) = (x, x);
        for n in 1..500 {
            term *= x * x / (2 * n + 1) as f64;
            sum += term;
            if term <= 1e-17 * sum {
                break;
            }
        }
        0.5 + pdf(x) * sum
    }

    /// `(E max, Var max)` of two independent Gaussians `N(ma, va)`, `N(mb, vb)` (exact).
    pub fn max2(ma: f64, va: f64, mb: f64, vb: f64) -> (f64, f64) {
        let theta = (va + vb).sqrt();
        let a = (ma - mb) / theta;
        let (c, cn, p) = (cdf(a), cdf(-a), pdf(a));
        let mean = ma * c + mb * cn + theta * p;
        let second = (ma * ma + va) * c + (mb * mb + vb) * cn + (ma + mb) * theta * p;
        (mean, second - mean * mean)
    }

    /// `ln det` of a symmetric positive-definite `[k, k]` matrix by Gaussian elimination.
    pub fn log_det(mut a: Vec<f64>, k: usize) -> f64 {
        let mut total = 0.0;
        for c in 0..k {
            let pivot = a[c * k + c];
            total += pivot.ln();
            for r in c + 1..k {
                let f = a[r * k + c] / pivot;
                for j in c..k {
                    a[r * k + j] -= f * a[c * k + j];
                }
            }
        }
        total
    }
}

/// Reproducible inputs in `[lo, hi)`.
fn uniform(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            lo + (hi - lo) * ((s >> 40) as f32 / 16_777_216.0)
        })
        .collect()
}

/// The largest `|got − want| / (abs + rel·|want|)`: at most 1 when every element is within
/// its tolerance.
fn worst(got: &[f32], want: &[f64], abs: f64, rel: f64) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(&g, &w)| (g as f64 - w).abs() / (abs + rel * w.abs()))
        .fold(0.0, f64::max)
}

/// Asserts that `got` is within `abs + rel·|want|` of `want`, element by element.
fn assert_close(what: &str, got: &[f32], want: &[f64], abs: f64, rel: f64) {
    let w = worst(got, want, abs, rel);
    let at = (0..got.len())
        .find(|&i| worst(&got[i..i + 1], &want[i..i + 1], abs, rel) == w)
        .unwrap_or(0);
    assert!(
        w <= 1.0,
        "{what}: {w:.2} × the tolerance ({abs:e} + {rel:e}·|want|) at element {at}: {} against {}",
        got[at],
        want[at]
    );
}

fn assert_sum(what: &str, got: f64, want: f64, rel: f64) {
    assert!(
        (got - want).abs() <= rel * want.abs().max(1.0),
        "{what}: {got} against {want}"
    );
}

#[test]
fn normals_are_philox_and_box_muller_and_standard() {
    for (key, stream) in [(7u64, 0u32), (0x1234_5678_9abc, 5)] {
        let mut got = vec![0f32; N];
        elementwise::normals(key, stream, &mut got);
        let want = oracle::normals(key, stream, N);
        // sincos within 10⁻⁶ and ln within 2·10⁻⁷ relative (the SIMD approximations).
        assert_close("normals", &got, &want, 2e-6, 2e-6);
        let n = N as f64;
        let mean = want.iter().sum::<f64>() / n;
        let var = want.iter().map(|z| (z - mean).powi(2)).sum::<f64>() / n;
        assert!(mean.abs() < 5.0 / n.sqrt(), "mean {mean}");
        assert!((var - 1.0).abs() < 5.0 * (2.0 / n).sqrt(), "variance {var}");
        let sq = elementwise::squared_norm(key, stream, N);
        assert_sum("‖ε‖²", sq, want.iter().map(|z| z * z).sum(), 1e-5);
    }
    // Streams and keys are distinct sequences.
    let (a, b) = (oracle::normals(7, 0, 64), oracle::normals(7, 1, 64));
    assert!(a.iter().zip(&b).all(|(x, y)| x != y));
}

/// The rules with inputs where each is sensible.
fn rules() -> [(SigmaRule, f32, f32); 3] {
    [
        (SigmaRule::Softplus, -6.0, 1.0),
        (SigmaRule::LogVariance, -12.0, 1.0),
        (SigmaRule::SigmoidVariance { ln_bound: 0.5 }, -6.0, 4.0),
    ]
}

#[test]
fn sample_draws_kl_and_gradients_match_their_formulas() {
    let mu = uniform(N, 1, -0.5, 0.5);
    let (prior_mean, prior_std) = (uniform(N, 4, -0.2, 0.2), uniform(N, 5, 0.3, 2.0));
    let scales = [1.0f32, 0.7];
    let dw = uniform(2 * N, 6, -1.0, 1.0);
    let (key, weight) = (99u64, 0.3f32);
    let eps = [oracle::normals(key, 0, N), oracle::normals(key, 1, N)];
    for (rule, lo, hi) in rules() {
        let rho = uniform(N, 2, lo, hi);
        let plain = KlTerms::new(0.1, 2.0, 0.5);
        let clamped = plain.with_log_var_range((-5.0, -1.0), 1.0);
        for (terms, per_weight) in [
            (plain, false),
            (clamped, false),
            (KlTerms::per_weight(1.0), true),
        ] {
            for center in [false, true] {
                let pw = per_weight.then_some(PerWeight {
                    mean: &prior_mean,
                    std: &prior_std,
                });
                let mut out = vec![0f32; 2 * N];
                let mut tape = vec![0f32; 3 * N];
                let q = LocScale {
                    mu: &mu,
                    rho: &rho,
                    rule,
                };
                let draws = Draws {
                    key,
                    scales: &scales,
                    center,
                };
                let prior = Prior {
                    terms,
                    per_weight: pw,
                };
                let kl = elementwise::sample(
                    q,
                    draws,
                    Some(prior),
                    Tape::DrawsAndKl,
                    &mut out,
                    &mut tape,
                );
                let (mut want, mut want_kl) = (vec![0f64; 2 * N], 0.0);
                let (mut dmu, mut drho) = (vec![0f64; N], vec![0f64; N]);
                for i in 0..N {
                    let (m, (s, ds)) = (mu[i] as f64, oracle::sigma(rule, rho[i] as f64));
                    let prior = if per_weight {
                        (prior_mean[i] as f64, prior_std[i] as f64)
                    } else {
                        (terms.mean as f64, 1.0)
                    };
                    let (k, dk_mu, dk_sigma) = oracle::kl(terms, m, s, prior);
                    want_kl += k;
                    dmu[i] = weight as f64 * dk_mu;
                    drho[i] = weight as f64 * dk_sigma * ds;
                    for d in 0..2 {
                        let e = scales[d] as f64 * eps[d][i];
                        want[d * N + i] = if center { 0.0 } else { m } + s * e;
                        let g = dw[d * N + i] as f64;
                        if !center {
                            dmu[i] += g;
                        }
                        drho[i] += g * e * ds;
                    }
                }
                let what = format!(
                    "{rule:?}, clamped {}, per weight {per_weight}, centred {center}",
                    terms.is_clamped()
                );
                assert_close(&format!("draws ({what})"), &out, &want, 1e-6, 1e-5);
                assert_sum(&format!("KL ({what})"), kl, want_kl, 1e-5);
                elementwise::sample_backward(
                    &dw,
                    2,
                    center,
                    &mu,
                    Some((prior, weight)),
                    &mut tape,
                    &mut [],
                );
                assert_close(&format!("dρ ({what})"), &tape[..N], &drho, 1e-5, 1e-4);
                assert_close(&format!("dμ ({what})"), &tape[2 * N..], &dmu, 1e-5, 1e-4);
            }
        }
    }
}

#[test]
fn sample_ratio_draws_and_log_ratios_match_their_formulas() {
    let (mu, rho) = (uniform(N, 11, -0.5, 0.5), uniform(N, 12, -4.0, 0.0));
    let (m0, s0) = (uniform(N, 13, -0.3, 0.3), uniform(N, 14, 0.5, 1.5));
    let (key, draws, rule) = (5u64, 3, SigmaRule::Softplus);
    let terms = KlTerms::per_weight(1.0);
    let pw = Some(PerWeight {
        mean: &m0,
        std: &s0,
    });
    let mut out = vec![0f32; draws * N + draws];
    let q = LocScale {
        mu: &mu,
        rho: &rho,
        rule,
    };
    let prior = Prior {
        terms,
        per_weight: pw,
    };
    let kl = elementwise::sample_ratio(key, q, draws, prior, &mut out, true);
    let (mut want, mut ratios, mut want_kl) = (vec![0f64; draws * N], vec![0f64; draws], 0.0);
    let dw = uniform(draws * N, 15, -1.0, 1.0);
    let dr = [0.5f32, -0.25, 1.0];
    let (mut dmu, mut drho) = (vec![0f64; N], vec![0f64; N]);
    for s in 0..draws {
        let eps = oracle::normals(key, s as u32, N);
        for i in 0..N {
            let (sig, ds) = oracle::sigma(rule, rho[i] as f64);
            let (p_mean, p_std) = (m0[i] as f64, s0[i] as f64);
            let w = mu[i] as f64 + sig * eps[i];
            want[s * N + i] = w;
            let c = (w - p_mean) / (p_std * p_std);
            ratios[s] += 0.5 * ((w - p_mean).powi(2) / (p_std * p_std) - eps[i] * eps[i])
                - sig.ln()
                + p_std.ln();
            let g = dw[s * N + i] as f64 + dr[s] as f64 * c;
            dmu[i] += g;
            drho[i] += ds * (g * eps[i] - dr[s] as f64 / sig);
            if s == 0 {
                want_kl += oracle::kl(terms, mu[i] as f64, sig, (p_mean, p_std)).0;
            }
        }
    }
    assert_close("draws", &out[..draws * N], &want, 1e-6, 1e-5);
    for s in 0..draws {
        assert_sum("log-ratio", out[draws * N + s] as f64, ratios[s], 1e-5);
    }
    assert_sum("KL", kl, want_kl, 1e-5);
    let (mut gmu, mut grho) = (vec![0f32; N], vec![0f32; N]);
    let grads = Grads {
        mu: &mut gmu,
        rho: &mut grho,
    };
    elementwise::sample_ratio_backward(key, q, prior, &dw, &dr, grads);
    assert_close("dμ", &gmu, &dmu, 1e-5, 1e-4);
    assert_close("dρ", &grho, &drho, 1e-5, 1e-4);
}

#[test]
fn moments_and_the_kl_match_their_formulas() {
    let mu = uniform(N, 21, -0.5, 0.5);
    let (m0, s0) = (uniform(N, 22, -0.3, 0.3), uniform(N, 23, 0.5, 1.5));
    let dvar = uniform(N, 24, -1.0, 1.0);
    let (var_scale, weight) = (0.25f32, 0.7f32);
    for (rule, lo, hi) in rules() {
        let rho = uniform(N, 25, lo, hi);
        let terms = KlTerms::new(0.05, 1.5, 1.5 * var_scale);
        let mut var = vec![0f32; N];
        let q = LocScale {
            mu: &mu,
            rho: &rho,
            rule,
        };
        let out = Some(Out::as_uninit(&mut var[..]));
        let kl = elementwise::moments(q, var_scale, out, Some(Prior::scalar(terms)));
        let (mut want, mut want_kl) = (vec![0f64; N], 0.0);
        let (mut dmu, mut drho) = (vec![0f64; N], vec![0f64; N]);
        for i in 0..N {
            let (s, ds) = oracle::sigma(rule, rho[i] as f64);
            want[i] = s * s * var_scale as f64;
            let (k, dk_mu, dk_sigma) = oracle::kl(terms, mu[i] as f64, s, (0.05, 1.0));
            want_kl += k;
            dmu[i] = weight as f64 * dk_mu;
            drho[i] =
                dvar[i] as f64 * 2.0 * s * ds * var_scale as f64 + weight as f64 * dk_sigma * ds;
        }
        assert_close(&format!("variances ({rule:?})"), &var, &want, 1e-12, 1e-5);
        assert_sum(&format!("KL ({rule:?})"), kl, want_kl, 1e-5);
        let (mut gmu, mut grho) = (vec![0f32; N], vec![0f32; N]);
        let fold = Some((Prior::scalar(terms), weight));
        let (dm, dr) = (Out::as_uninit(&mut gmu[..]), Out::as_uninit(&mut grho[..]));
        elementwise::moments_backward(Some(&dvar), q, var_scale, fold, Some(dm), dr);
        assert_close(&format!("dμ ({rule:?})"), &gmu, &dmu, 1e-6, 1e-4);
        assert_close(&format!("dρ ({rule:?})"), &grho, &drho, 1e-5, 1e-4);

        // The KL against a prior per weight, and its gradient scaled by g.
        let t = KlTerms::per_weight(1.0);
        let prior = Prior {
            terms: t,
            per_weight: Some(PerWeight {
                mean: &m0,
                std: &s0,
            }),
        };
        let got = elementwise::kl(q, prior);
        let (mut want, mut dmu, mut drho) = (0.0, vec![0f64; N], vec![0f64; N]);
        let g = 2.5;
        for i in 0..N {
            let (s, ds) = oracle::sigma(rule, rho[i] as f64);
            let (k, dk_mu, dk_sigma) = oracle::kl(t, mu[i] as f64, s, (m0[i] as f64, s0[i] as f64));
            want += k;
            (dmu[i], drho[i]) = (g * dk_mu, g * dk_sigma * ds);
        }
        assert_sum(&format!("per-weight KL ({rule:?})"), got, want, 1e-5);
        let (mut gmu, mut grho) = (vec![0f32; N], vec![0f32; N]);
        let grads = Grads {
            mu: &mut gmu,
            rho: &mut grho,
        };
        elementwise::kl_backward(g as f32, q, prior, grads);
        assert_close("per-weight dμ", &gmu, &dmu, 1e-5, 1e-4);
        assert_close("per-weight dρ", &grho, &drho, 1e-5, 1e-4);
    }
}

#[test]
fn local_noise_and_its_variance_gradient_match_their_formulas() {
    let (mean, var) = (uniform(N, 31, -1.0, 1.0), uniform(N, 32, 1e-4, 2.0));
    let eps = oracle::normals(17, 0, N);
    let mut out = vec![0f32; N];
    elementwise::noise(17, &mean, &var, &mut out, false);
    let want: Vec<f64> = (0..N)
        .map(|i| mean[i] as f64 + (var[i] as f64).sqrt() * eps[i])
        .collect();
    assert_close("y", &out, &want, 1e-6, 1e-5);
    let dy = uniform(N, 33, -1.0, 1.0);
    elementwise::noise(17, &dy, &var, &mut out, true);
    let want: Vec<f64> = (0..N)
        .map(|i| dy[i] as f64 * eps[i] / (2.0 * (var[i] as f64).sqrt()))
        .collect();
    assert_close("dvar", &out, &want, 1e-6, 1e-5);
}

#[test]
fn dropout_masks_come_from_the_mask_stream_at_the_rate() {
    let x = uniform(N, 41, 0.5, 1.5);
    let (key, p) = (23u64, 0.3);
    let mut out = vec![0f32; N];
    elementwise::dropout(key, &x, p, DropoutNoise::Bernoulli, &mut out);
    let threshold = (p * 4_294_967_296.0).round() as u32;
    let scale = (1.0 / (1.0 - p)) as f32;
    let mut kept = 0usize;
    for i in 0..N {
        // Element j of block b: word j / 16 of the Philox output of counter 16b + j mod 16.
        let (b, j) = ((i / 64) as u64, i % 64);
        let c = 16 * b + (j % 16) as u64;
        let word = philox([c as u32, (c >> 32) as u32, 0, 2], key_words(key))[j / 16];
        let keep = word >= threshold;
        kept += keep as usize;
        assert_eq!(out[i], if keep { x[i] * scale } else { 0.0 }, "element {i}");
    }
    let n = N as f64;
    let rate = kept as f64 / n;
    assert!(
        (rate - (1.0 - p)).abs() < 5.0 * (p * (1.0 - p) / n).sqrt(),
        "kept {rate}"
    );

    elementwise::dropout(key, &x, p, DropoutNoise::Gaussian, &mut out);
    let eps = oracle::normals(key, 0, N);
    let sd = (p / (1.0 - p)).sqrt();
    let want: Vec<f64> = (0..N).map(|i| x[i] as f64 * (1.0 + sd * eps[i])).collect();
    assert_close("Gaussian dropout", &out, &want, 1e-6, 1e-5);
}

#[test]
fn flipout_signs_are_the_bits_of_the_sign_stream() {
    let key = 31u64;
    for inner in [1usize, 3, 400] {
        let n = inner * (300 * 128 / inner.min(128) + 7);
        let x = uniform(n, 51, -1.0, 1.0);
        let mut out = vec![0f32; n];
        elementwise::flip(key, &x, inner, &mut out);
        let mut plus = 0usize;
        for (i, (&o, &xi)) in out.iter().zip(&x).enumerate() {
            let g = i / inner;
            let bits = philox([(g / 128) as u32, 0, 0, 1], key_words(key));
            let sign = if (bits[(g % 128) / 32] >> (g % 32)) & 1 == 1 {
                1.0
            } else {
                -1.0
            };
            assert_eq!(o, xi * sign, "element {i} (groups of {inner})");
            plus += (sign > 0.0) as usize;
        }
        let rate = plus as f64 / n as f64;
        let groups = (n / inner) as f64;
        assert!(
            (rate - 0.5).abs() < 5.0 * 0.5 / groups.sqrt(),
            "{rate} positive"
        );
    }
}

#[test]
fn adam_and_adamw_match_their_update_rules() {
    let p0 = uniform(N, 61, -1.0, 1.0);
    let g = uniform(N, 62, -0.1, 0.1);
    let (m0, v0) = (uniform(N, 63, -0.01, 0.01), uniform(N, 64, 0.0, 1e-3));
    for decay in [None, Some(0.01f32)] {
        let step = AdamStep {
            lr: 1e-3,
            beta_1: 0.9,
            beta_2: 0.999,
            epsilon: 1e-8,
            time: 7,
            decoupled_decay: decay,
        };
        let (mut p, mut m, mut v) = (p0.clone(), m0.clone(), v0.clone());
        elementwise::adam(&mut p, &g, &mut m, &mut v, step);
        let (b1, b2, lr, eps) = (0.9f64, 0.999f64, 1e-3f64, 1e-8f64);
        let (bc1, bc2) = (1.0 - b1.powi(7), 1.0 - b2.powi(7));
        let mut update = vec![0f64; N];
        for i in 0..N {
            let gi = g[i] as f64;
            let mi = b1 * m0[i] as f64 + (1.0 - b1) * gi;
            let vi = b2 * v0[i] as f64 + (1.0 - b2) * gi * gi;
            let pi = p0[i] as f64;
            let next = match decay {
                None => pi - lr * bc2.sqrt() / bc1 * mi / (vi.sqrt() + eps * bc2.sqrt()),
                Some(l) => pi * (1.0 - lr * l as f64) - lr * (mi / bc1) / ((vi / bc2).sqrt() + eps),
            };
            update[i] = next - pi;
        }
        // The update, not the parameter: its rounding is that of the step, not of p.
        let got: Vec<f32> = p.iter().zip(&p0).map(|(a, b)| a - b).collect();
        assert_close(&format!("update ({decay:?})"), &got, &update, 2e-7, 1e-3);
    }
}

/// Means and variances where the rectifier's and Clark's rules are exercised: the tails (|a| up
/// to 8), the middle and tiny variances.
fn moment_inputs(n: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mean = uniform(n, seed, -2.0, 2.0);
    let log_var = uniform(n, seed + 1, -6.0, 1.0);
    (mean, log_var.iter().map(|l| l.exp()).collect())
}

/// Central differences of `f` at element `i` of `x` (step `h·max(1, |x_i|)`).
fn central(f: &dyn Fn(&[f64]) -> f64, x: &[f64], i: usize, h: f64) -> f64 {
    let step = h * x[i].abs().max(1.0);
    let (mut up, mut down) = (x.to_vec(), x.to_vec());
    up[i] += step;
    down[i] -= step;
    (f(&up) - f(&down)) / (2.0 * step)
}

#[test]
fn rectifier_moments_and_gradients_match_the_gaussian_formulas() {
    let (mean, var) = moment_inputs(N, 71);
    let eps = 1e-8; // the kernels' floor under the variance
    let gaussian = |m: f64, v: f64| {
        let s = (v + eps).sqrt();
        let a = m / s;
        let (c, p) = (oracle::cdf(a), oracle::pdf(a));
        let e = m * c + s * p;
        (e, (m * m + s * s) * c + m * s * p - e * e)
    };
    let gate = |m: f64, v: f64| {
        let p = oracle::sigmoid(3.0 * m);
        (p * m, p * v + p * (1.0 - p) * m * m)
    };
    type Rule<'a> = &'a dyn Fn(f64, f64) -> (f64, f64);
    let rules: [(RectifierRule, Rule); 2] = [
        (RectifierRule::Gaussian, &gaussian),
        (RectifierRule::Gate(3.0), &gate),
    ];
    for (rule, f) in rules {
        let (mut em, mut ev) = (vec![0f32; N], vec![0f32; N]);
        rectifier::rectifier(rule, &mean, &var, &mut em, &mut ev);
        let want: Vec<(f64, f64)> = (0..N).map(|i| f(mean[i] as f64, var[i] as f64)).collect();
        let (wm, wv): (Vec<f64>, Vec<f64>) = want.into_iter().unzip();
        // Numerical Recipes' erfc (1.2·10⁻⁷ relative) in f32; Var h = s²g(a) loses digits to
        // cancellation where a ≫ 0 (g → 1 from sums of order a²), hence the variance's scale.
        assert_close(&format!("E h ({rule:?})"), &em, &wm, 1e-6, 1e-5);
        let scale: Vec<f64> = var.iter().map(|&v| v as f64).collect();
        let wv_err = ev
            .iter()
            .zip(&wv)
            .zip(&scale)
            .map(|((&g, &w), &s)| (g as f64 - w).abs() / (1e-6 + 1e-4 * s))
            .fold(0.0, f64::max);
        assert!(
            wv_err <= 1.0,
            "Var h ({rule:?}): {wv_err:.2} × the tolerance"
        );

        // Gradients at a subset, by central differences of the f64 rule.
        for output in [RectifierOutput::Mean, RectifierOutput::Var] {
            let grad = uniform(N, 77, -1.0, 1.0);
            let (mut dm, mut dv) = (vec![0f32; N], vec![0f32; N]);
            rectifier::rectifier_backward(rule, output, &mean, &var, &grad, &mut dm, &mut dv);
            for i in (0..N).step_by(997) {
                let pick = |x: &[f64]| {
                    let (e, v) = f(x[0], x[1]);
                    grad[i] as f64
                        * if output == RectifierOutput::Mean {
                            e
                        } else {
                            v
                        }
                };
                let x = [mean[i] as f64, var[i] as f64];
                let want_m = central(&pick, &x, 0, 1e-6);
                let want_v = central(&pick, &x, 1, 1e-4 * (var[i] as f64).min(1.0));
                let tol = |w: f64| 1e-3 * (1.0 + w.abs());
                assert!(
                    (dm[i] as f64 - want_m).abs() <= tol(want_m),
                    "∂/∂mean ({rule:?}, {output:?}) at {i}: {} against {want_m}",
                    dm[i]
                );
                assert!(
                    (dv[i] as f64 - want_v).abs() <= tol(want_v),
                    "∂/∂var ({rule:?}, {output:?}) at {i}: {} against {want_v}",
                    dv[i]
                );
            }
        }
    }
}

#[test]
fn max_pool_by_moments_is_clarks_recursion_and_exact_for_two_entries() {
    // 2×2 windows, stride 2, over [rows, 6, 6] maps.
    let maps = PoolMaps::of(&[700, 6, 6], 2, 2);
    let cells = 700 * 36;
    let (means, vars) = moment_inputs(cells, 81);
    let [rows, oh, ow] = maps.out_dims();
    let (mut om, mut ov) = (vec![0f32; rows * oh * ow], vec![0f32; rows * oh * ow]);
    clark::max_pool(maps, &means, &vars, &mut om, &mut ov);
    // Clark's fold over the window's entries by ascending mean, in f64.
    let window = |r: usize, y: usize, x: usize| -> Vec<(f64, f64)> {
        let mut e: Vec<(f64, f64)> = (0..2)
            .flat_map(|dy| (0..2).map(move |dx| (dy, dx)))
            .map(|(dy, dx)| {
                let at = r * 36 + (2 * y + dy) * 6 + 2 * x + dx;
                (means[at] as f64, vars[at] as f64)
            })
            .collect();
        e.sort_by(|a, b| a.0.total_cmp(&b.0));
        e
    };
    let fold = |e: &[(f64, f64)]| {
        e[1..]
            .iter()
            .fold(e[0], |(m, v), &(mb, vb)| oracle::max2(mb, vb, m, v))
    };
    let (mut wm, mut wv) = (vec![0f64; om.len()], vec![0f64; ov.len()]);
    for r in 0..rows {
        for y in 0..oh {
            for x in 0..ow {
                let (m, v) = fold(&window(r, y, x));
                let o = (r * oh + y) * ow + x;
                (wm[o], wv[o]) = (m, v);
            }
        }
    }
    assert_close("E max", &om, &wm, 1e-5, 1e-5);
    assert_close("Var max", &ov, &wv, 1e-5, 1e-3);

    // Two entries far below the others: Clark's step is then the exact max of the other two.
    let (mut m2, mut v2) = (means.clone(), vars.clone());
    for r in 0..700 {
        for y in 0..6 {
            for x in 0..6 {
                if y % 2 == 1 {
                    m2[r * 36 + y * 6 + x] = -100.0;
                    v2[r * 36 + y * 6 + x] = 1e-6;
                }
            }
        }
    }
    clark::max_pool(maps, &m2, &v2, &mut om, &mut ov);
    for r in 0..rows {
        for y in 0..oh {
            for x in 0..ow {
                let at = |dx: usize| r * 36 + 2 * y * 6 + 2 * x + dx;
                let (a, b) = (at(0), at(1));
                let (m, v) = oracle::max2(m2[a] as f64, v2[a] as f64, m2[b] as f64, v2[b] as f64);
                let o = (r * oh + y) * ow + x;
                assert!(
                    (om[o] as f64 - m).abs() <= 1e-5 * (1.0 + m.abs()),
                    "E max of two at {o}"
                );
                assert!(
                    (ov[o] as f64 - v).abs() <= 1e-5 + 1e-3 * v,
                    "Var max of two at {o}"
                );
            }
        }
    }

    // The backward pass against central differences of the f64 fold, on a few windows.
    let (gm, gv) = (
        uniform(om.len(), 85, -1.0, 1.0),
        uniform(om.len(), 86, -1.0, 1.0),
    );
    let (mut dm, mut dv) = (vec![0f32; cells], vec![0f32; cells]);
    clark::max_pool_backward(maps, &means, &vars, &gm, &gv, &mut dm, &mut dv);
    for o in (0..om.len()).step_by(313) {
        let (r, y, x) = (o / (oh * ow), (o / ow) % oh, o % ow);
        let at: Vec<usize> = (0..4)
            .map(|e| r * 36 + (2 * y + e / 2) * 6 + 2 * x + e % 2)
            .collect();
        let x0: Vec<f64> = at
            .iter()
            .flat_map(|&a| [means[a] as f64, vars[a] as f64])
            .collect();
        let objective = |p: &[f64]| {
            let mut e: Vec<(f64, f64)> = (0..4).map(|k| (p[2 * k], p[2 * k + 1])).collect();
            e.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (m, v) = fold(&e);
            gm[o] as f64 * m + gv[o] as f64 * v
        };
        for (k, &a) in at.iter().enumerate() {
            let want_m = central(&objective, &x0, 2 * k, 1e-6);
            let want_v = central(&objective, &x0, 2 * k + 1, 1e-4 * x0[2 * k + 1].min(1.0));
            assert!(
                (dm[a] as f64 - want_m).abs() <= 1e-3 * (1.0 + want_m.abs()),
                "∂/∂mean at {a}: {} against {want_m}",
                dm[a]
            );
            assert!(
                (dv[a] as f64 - want_v).abs() <= 1e-3 * (1.0 + want_v.abs()),
                "∂/∂var at {a}: {} against {want_v}",
                dv[a]
            );
        }
    }
}

#[test]
fn the_scale_mixture_kl_matches_its_monte_carlo_formula() {
    let n = 2 * 16_384 + 5;
    let (mu, rho) = (uniform(n, 91, -0.3, 0.3), uniform(n, 92, -5.0, -1.0));
    let (pi, s1, s2) = (0.25f64, 1.0f64, (-6.0f64).exp());
    let kl = MixtureKl {
        key: 41,
        rule: SigmaRule::Softplus,
        prior: MixtureTerms::new(pi, s1, s2),
        scales: vec![1.0, 0.8],
    };
    let got = mixture::mixture_kl(&mu, &rho, &kl);
    // ln p(w) by log-sum-exp: the narrow component underflows alone at large |w|.
    let ln_p = |w: f64| {
        let a1 = pi.ln() - s1.ln() - 0.5 * w * w / (s1 * s1);
        let a2 = (1.0 - pi).ln() - s2.ln() - 0.5 * w * w / (s2 * s2);
        let top = a1.max(a2);
        top + ((a1 - top).exp() + (a2 - top).exp()).ln() - bnn_kernels::HALF_LN_2PI
    };
    let mut want = 0.0;
    let eps: Vec<Vec<f64>> = (0..2).map(|s| oracle::normals(41, s, n)).collect();
    for i in 0..n {
        let (s, _) = oracle::sigma(SigmaRule::Softplus, rho[i] as f64);
        want -= s.ln();
        for d in 0..2 {
            want -= ln_p(mu[i] as f64 + s * kl.scales[d] as f64 * eps[d][i]) / 2.0;
        }
    }
    assert_sum("mixture KL", got, want, 1e-5);

    // Its gradient by central differences of the f64 formula (the noise held fixed).
    let (mut dmu, mut drho) = (vec![0f32; n], vec![0f32; n]);
    mixture::mixture_kl_backward(&mu, &rho, &kl, 1.5, &mut dmu, &mut drho);
    for i in (0..n).step_by(1009) {
        let term = |p: &[f64]| {
            let (s, _) = oracle::sigma(SigmaRule::Softplus, p[1]);
            let cross: f64 = (0..2)
                .map(|d| ln_p(p[0] + s * kl.scales[d] as f64 * eps[d][i]))
                .sum();
            1.5 * (-s.ln() - cross / 2.0)
        };
        let x = [mu[i] as f64, rho[i] as f64];
        let (wm, wr) = (central(&term, &x, 0, 1e-6), central(&term, &x, 1, 1e-6));
        assert!(
            (dmu[i] as f64 - wm).abs() <= 1e-3 * (1.0 + wm.abs()),
            "dμ at {i}: {} against {wm}",
            dmu[i]
        );
        assert!(
            (drho[i] as f64 - wr).abs() <= 1e-3 * (1.0 + wr.abs()),
            "dρ at {i}: {} against {wr}",
            drho[i]
        );
    }
}

#[test]
fn the_low_rank_factor_draws_and_kl_match_dense_algebra() {
    let (n, k, draws) = (16_384 + 77, 3, 2);
    let f = uniform(n * k, 101, -0.05, 0.05);
    let rho = uniform(n, 102, -4.0, -1.0);
    let z = uniform(draws * k, 103, -1.0, 1.0);
    let base = uniform(draws * n, 104, -1.0, 1.0);
    let mut out = base.clone();
    factor::add_factor_draws(&f, &z, k, &mut out);
    let want: Vec<f64> = (0..draws * n)
        .map(|at| {
            let (s, i) = (at / n, at % n);
            base[at] as f64
                + (0..k)
                    .map(|j| f[i * k + j] as f64 * z[s * k + j] as f64)
                    .sum::<f64>()
        })
        .collect();
    assert_close("F z", &out, &want, 1e-6, 1e-5);

    // ½c²λ Σ ‖F_i‖²/σ₀ᵢ² − ½ ln det(I + c² Fᵀ diag(1/v) F).
    let std = uniform(n, 105, 0.5, 2.0);
    let (scale, lambda) = (1.5f64, 0.8f64);
    let kl = factor::FactorKl {
        f: &f,
        rho: &rho,
        rule: SigmaRule::Softplus,
        k,
        scale,
        inv_prior_var: lambda,
        prior_std: Some(&std),
    };
    let (value, _) = factor::factor_kl(&kl);
    let mut a = vec![0f64; k * k];
    let mut sq = 0.0;
    for i in 0..n {
        let v = oracle::sigma(SigmaRule::Softplus, rho[i] as f64).0.powi(2);
        for j in 0..k {
            sq += (f[i * k + j] as f64).powi(2) / (std[i] as f64).powi(2);
            for l in 0..k {
                a[j * k + l] += scale * scale * f[i * k + j] as f64 * f[i * k + l] as f64 / v;
            }
        }
    }
    for j in 0..k {
        a[j * k + j] += 1.0;
    }
    let want = 0.5 * scale * scale * lambda * sq - 0.5 * oracle::log_det(a, k);
    assert_sum("factor KL", value, want, 1e-6);
}

#[test]
fn im2col_times_the_kernel_is_the_direct_convolution() {
    let g = ConvGeometry {
        input: [2, 3, 9, 8],
        kernel: [3, 2],
        stride: [2, 1],
        padding: [1, 2],
        dilation: [1, 2],
    };
    let [n, c, h, w] = g.input;
    let [ho, wo] = g.output();
    let outc = 4;
    let x = uniform(n * c * h * w, 111, -1.0, 1.0);
    let weight = uniform(outc * g.columns(), 112, -1.0, 1.0);
    let mut cols = vec![0f32; n * g.cells() * g.columns()];
    conv::im2col(&x, &g, &mut cols);
    for b in 0..n {
        for o in 0..outc {
            for y in 0..ho {
                for xo in 0..wo {
                    let mut direct = 0f64;
                    for ci in 0..c {
                        for ky in 0..3 {
                            for kx in 0..2 {
                                let iy = (y * 2 + ky) as isize - 1;
                                let ix = (xo + 2 * kx) as isize - 2;
                                if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < w {
                                    let xi = x[((b * c + ci) * h + iy as usize) * w + ix as usize];
                                    direct += xi as f64
                                        * weight[o * g.columns() + (ci * 3 + ky) * 2 + kx] as f64;
                                }
                            }
                        }
                    }
                    let row = b * g.cells() + y * wo + xo;
                    let product: f64 = (0..g.columns())
                        .map(|col| {
                            cols[row * g.columns() + col] as f64
                                * weight[o * g.columns() + col] as f64
                        })
                        .sum();
                    assert!(
                        (product - direct).abs() < 1e-9,
                        "output ({b}, {o}, {y}, {xo})"
                    );
                }
            }
        }
    }
}
