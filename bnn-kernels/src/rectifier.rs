//! The CPU kernels of the fused rectifier moment rules, `(E f, Var f) ↦ (E h, Var h)` for
//! `h = relu(f)`, `f ~ N(μ, v)`, and their backward passes, one pass each over `f32` slices.
//! Gaussian rule (Frey & Hinton 1999; Wu et al. 2019): `E h = μΦ(a) + sφ(a)`, `Var h = s²g(a)`,
//! `a = μ/s`. VBP's gate (Haußmann 2021 eqs. 3.5–3.8): `E h = pμ`, `Var h = pv + p(1 − p)μ²`,
//! `p = σ(C·μ)`. The composition in bnn-burn's `layers` is the reference they are tested against.
//! Gradients, the tail approximation and its cut-off: the book's *Fused kernels* page.

// Fixed-size block loops index several arrays at once: that is what LLVM vectorises.
#![allow(clippy::needless_range_loop)]

use crate::simd::{BLOCK, Shared, exp, load, multiversion, par_chunks, store};

/// Which rectifier moment rule a fused kernel applies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RectifierRule {
    /// The exact Gaussian moments of `relu(f)` (CLT/DVI).
    Gaussian,
    /// VBP's gate `p = σ(C·E f)` with sharpness `C`.
    Gate(f32),
}

/// Which output of a rule a backward pass differentiates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RectifierOutput {
    /// `E h`.
    Mean,
    /// `Var h`.
    Var,
}

/// Added to the pre-activation variance before its square root, as in
/// bnn-burn's `layers::VAR_EPS`.
const VAR_EPS: f32 = 1e-8;
/// The clamp of `a = μ/s` (as the reference composition).
const A_MAX: f32 = 40.0;
/// `a²/2` beyond which `φ(a)` and the tail `Φ(−|a|)` are taken as 0 (`|a| > 8.94`).
const TAIL_Z2: f32 = 40.0;
/// The clamp of the gate's logit `C·μ`.
const GATE_MAX: f32 = 40.0;
const INV_SQRT_2PI: f32 = 0.398_942_3;

/// Numerical Recipes' coefficients of `P(t)` in `erfc z = t·exp(−z² + P(t))`.
pub const ERFC: [f32; 10] = [
    -1.265_512_2,
    1.000_023_7,
    0.374_091_96,
    0.096_784_18,
    -0.186_288_06,
    0.278_868_07,
    -1.135_204,
    1.488_515_9,
    -0.822_152_2,
    0.170_872_77,
];

/// What the Gaussian rule needs of one element: `(s, a, Φ(a), Φ(−a), φ(a))`.
#[inline(always)]
pub fn standardise(mean: f32, var: f32) -> (f32, f32, f32, f32, f32) {
    let s = (var.max(0.0) + VAR_EPS).sqrt();
    let a = (mean / s).clamp(-A_MAX, A_MAX);
    let z2 = 0.5 * a * a;
    let t = 1.0 / (1.0 + std::f32::consts::FRAC_1_SQRT_2 * 0.5 * a.abs());
    let mut p = ERFC[9];
    for c in ERFC[..9].iter().rev() {
        p = p * t + c;
    }
    let inside = z2 < TAIL_Z2;
    let e = exp(-z2.min(TAIL_Z2));
    let (e, tail_factor) = if inside {
        (e, 0.5 * t * exp(p))
    } else {
        (0.0, 0.0)
    };
    let tail = tail_factor * e;
    let pdf = INV_SQRT_2PI * e;
    let (cdf, cdf_neg) = if a < 0.0 {
        (tail, 1.0 - tail)
    } else {
        (1.0 - tail, tail)
    };
    (s, a, cdf, cdf_neg, pdf)
}

/// `g(a) = Φ + a²ΦΦ̄ + aφ(1 − 2Φ) − φ² = Var h / s²` of the Gaussian rule, at least 0, from
/// [`standardise`]'s `(a, Φ, Φ̄, φ)`.
#[inline(always)]
pub fn var_ratio(a: f32, c: f32, q: f32, p: f32) -> f32 {
    (c + a * a * c * q + a * p * (1.0 - 2.0 * c) - p * p).max(0.0)
}

/// `(E h, Var h)` of one element under `rule`.
#[inline(always)]
fn forward(rule: RectifierRule, mean: f32, var: f32) -> (f32, f32) {
    match rule {
        RectifierRule::Gaussian => {
            let (s, a, c, q, p) = standardise(mean, var);
            let m = mean * c + s * p;
            (m, s * s * var_ratio(a, c, q, p))
        }
        RectifierRule::Gate(gate) => {
            let p = 1.0 / (1.0 + exp(-(gate * mean).clamp(-GATE_MAX, GATE_MAX)));
            (p * mean, p * var + p * (1.0 - p) * mean * mean)
        }
    }
}

/// `(dμ, dv)` of one element for the output gradient `g` of `output`.
#[inline(always)]
fn backward(
    rule: RectifierRule,
    output: RectifierOutput,
    mean: f32,
    var: f32,
    g: f32,
) -> (f32, f32) {
    match rule {
        RectifierRule::Gaussian => {
            let (s, _, c, q, p) = standardise(mean, var);
            let (dmu, ds) = match output {
                RectifierOutput::Mean => (g * c, g * p),
                RectifierOutput::Var => {
                    let m = mean * c + s * p;
                    (g * 2.0 * m * q, g * 2.0 * (s * c - m * p))
                }
            };
            // s = √(max(v, 0) + ε): no gradient to a negative variance.
            let dv = if var >= 0.0 { ds * 0.5 / s } else { 0.0 };
            (dmu, dv)
        }
        RectifierRule::Gate(gate) => {
            let p = 1.0 / (1.0 + exp(-(gate * mean).clamp(-GATE_MAX, GATE_MAX)));
            let pq = p * (1.0 - p);
            // p' of the unclamped gate at the clamped p (below 2·10⁻¹⁸·C where they differ).
            let dp = gate * pq;
            match output {
                RectifierOutput::Mean => (g * (p + mean * dp), 0.0),
                RectifierOutput::Var => (
                    g * (var * dp + dp * (1.0 - 2.0 * p) * mean * mean + 2.0 * pq * mean),
                    g * p,
                ),
            }
        }
    }
}

multiversion! {
    /// [`rectifier`] over one range.
    fn forward_range(rule: RectifierRule, mean: &[f32], var: &[f32], out_mean: &mut [f32],
                     out_var: &mut [f32]) {
        for (k, om) in out_mean.chunks_mut(BLOCK).enumerate() {
            let (a, len) = (k * BLOCK, om.len());
            let (m, v) = (load(&mean[a..a + len], 0.0), load(&var[a..a + len], 1.0));
            let (mut ym, mut yv) = ([0f32; BLOCK], [0f32; BLOCK]);
            // One loop per rule, so that each vectorises without a branch inside.
            match rule {
                RectifierRule::Gaussian => for j in 0..BLOCK {
                    (ym[j], yv[j]) = forward(RectifierRule::Gaussian, m[j], v[j]);
                },
                RectifierRule::Gate(c) => for j in 0..BLOCK {
                    (ym[j], yv[j]) = forward(RectifierRule::Gate(c), m[j], v[j]);
                },
            }
            store(om, &ym);
            store(&mut out_var[a..a + len], &yv);
        }
    }
}

multiversion! {
    /// [`rectifier_backward`] over one range.
    fn backward_range(rule: RectifierRule, output: RectifierOutput, mean: &[f32], var: &[f32],
                      grad: &[f32], dmean: &mut [f32], dvar: &mut [f32]) {
        for (k, dm) in dmean.chunks_mut(BLOCK).enumerate() {
            let (a, len) = (k * BLOCK, dm.len());
            let (m, v) = (load(&mean[a..a + len], 0.0), load(&var[a..a + len], 1.0));
            let g = load(&grad[a..a + len], 0.0);
            let (mut gm, mut gv) = ([0f32; BLOCK], [0f32; BLOCK]);
            // One loop per rule and output, so that each vectorises without a branch inside.
            macro_rules! each {
                ($rule:expr, $output:expr) => {
                    for j in 0..BLOCK {
                        (gm[j], gv[j]) = backward($rule, $output, m[j], v[j], g[j]);
                    }
                };
            }
            match (rule, output) {
                (RectifierRule::Gaussian, RectifierOutput::Mean) => {
                    each!(RectifierRule::Gaussian, RectifierOutput::Mean)
                }
                (RectifierRule::Gaussian, RectifierOutput::Var) => {
                    each!(RectifierRule::Gaussian, RectifierOutput::Var)
                }
                (RectifierRule::Gate(c), RectifierOutput::Mean) => {
                    each!(RectifierRule::Gate(c), RectifierOutput::Mean)
                }
                (RectifierRule::Gate(c), RectifierOutput::Var) => {
                    each!(RectifierRule::Gate(c), RectifierOutput::Var)
                }
            }
            store(dm, &gm);
            store(&mut dvar[a..a + len], &gv);
        }
    }
}

/// Checks that every slice has the length of the first.
fn same_lengths(what: &str, lens: &[usize]) {
    assert!(
        lens.iter().all(|&l| l == lens[0]),
        "{what}: slices of different lengths {lens:?}"
    );
}

/// `(out_mean, out_var) = (E h, Var h)` of `h = relu(f)`, `f ~ N(mean, var)` elementwise, by
/// `rule` (module docs).
pub fn rectifier(
    rule: RectifierRule,
    mean: &[f32],
    var: &[f32],
    out_mean: &mut [f32],
    out_var: &mut [f32],
) {
    same_lengths(
        "rectifier",
        &[mean.len(), var.len(), out_mean.len(), out_var.len()],
    );
    let (om, ov) = (Shared::new(out_mean), Shared::new(out_var));
    par_chunks(mean.len(), |a, b| {
        // SAFETY: disjoint ranges.
        let (om, ov) = unsafe { (om.range(a, b), ov.range(a, b)) };
        forward_range(rule, &mean[a..b], &var[a..b], om, ov);
    });
}

/// `(dmean, dvar) = grad·∂output/∂(mean, var)` of [`rectifier`]'s `output`.
pub fn rectifier_backward(
    rule: RectifierRule,
    output: RectifierOutput,
    mean: &[f32],
    var: &[f32],
    grad: &[f32],
    dmean: &mut [f32],
    dvar: &mut [f32],
) {
    same_lengths(
        "rectifier_backward",
        &[mean.len(), var.len(), grad.len(), dmean.len(), dvar.len()],
    );
    let (dm, dv) = (Shared::new(dmean), Shared::new(dvar));
    par_chunks(mean.len(), |a, b| {
        // SAFETY: disjoint ranges.
        let (dm, dv) = unsafe { (dm.range(a, b), dv.range(a, b)) };
        backward_range(rule, output, &mean[a..b], &var[a..b], &grad[a..b], dm, dv);
    });
}
