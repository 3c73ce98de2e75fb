//! The CPU kernels of a mean-field or radial Gaussian's KL from the scale-mixture prior of
//! Blundell et al. (2015, eq. 7), `p(w) = π N(w; 0, σ₁²) + (1 − π) N(w; 0, σ₂²)`, which has no
//! closed form: `KL(q ‖ p) = −H[q] + E_q[−ln p(w)]`, the entropy `Σ ln σ + const` exact and the
//! cross-entropy averaged over `S` reparameterised draws `w_s = μ + σ(ρ)·c_s·ε_s` (`ε_s`
//! sub-stream `s` of the op's key, regenerated in the backward pass, never stored; `c_s = 1` for
//! mean-field, `r_s/‖ε_s‖` for radial). One pass forward, one backward, `σ` evaluated once per
//! element for all draws. The kernels leave out the entropy's constant (the caller's, by family).

// Fixed-size block loops index several arrays at once: that is what LLVM vectorises.
#![allow(clippy::needless_range_loop)]

use crate::HALF_LN_2PI;
use crate::elementwise::{SigmaRule, Sigmas};
use crate::rng::{key_words, normal_block};
use crate::simd::{
    BLOCK, Shared, accumulate, load, log1p_exp_sigmoids, multiversion, par_chunks, store,
};

/// A scale-mixture prior's constants: its weighted components' log-densities are
/// `a_k(w) = ln_weight_k − ½w²/σ_k²`, and `ln p(w) = max(a₁, a₂) + ln(1 + e^{−|a₁ − a₂|})`. (The
/// log-sum-exp keeps the larger term apart: under a narrow component, `σ₂ = e⁻⁶` say, `a₂` is
/// −10⁴ at `|w| = 0.4`, and a sum such as `a₂ + softplus(a₁ − a₂)` would round `a₁` away.)
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixtureTerms {
    /// `ln π − ½ ln 2π − ln σ₁`.
    pub ln_weight1: f32,
    /// `ln(1 − π) − ½ ln 2π − ln σ₂`.
    pub ln_weight2: f32,
    /// `1/σ₁²`.
    pub inv_var1: f32,
    /// `1/σ₂²`.
    pub inv_var2: f32,
}

impl MixtureTerms {
    /// The terms of weight `pi` on `N(0, sigma1²)` and `1 − pi` on `N(0, sigma2²)`.
    pub fn new(pi: f64, sigma1: f64, sigma2: f64) -> Self {
        Self {
            ln_weight1: (pi.ln() - HALF_LN_2PI - sigma1.ln()) as f32,
            ln_weight2: ((1.0 - pi).ln() - HALF_LN_2PI - sigma2.ln()) as f32,
            inv_var1: sigma1.powi(-2) as f32,
            inv_var2: sigma2.powi(-2) as f32,
        }
    }

    /// `(ln p(w), d ln p/dw)`: with `r₁ = sigmoid(a₁ − a₂)` and `r₂ = sigmoid(a₂ − a₁)` the
    /// components' responsibilities at `w`, `d ln p/dw = −w(r₁/σ₁² + r₂/σ₂²)` (`r₂` formed
    /// apart: `(1 − r₁)/σ₂²` would turn `r₁`'s rounding into a large error where `σ₂` is
    /// small).
    #[inline(always)]
    pub fn log_density(self, w: f32) -> (f32, f32) {
        let half_w2 = 0.5 * w * w;
        let a1 = self.ln_weight1 - half_w2 * self.inv_var1;
        let a2 = self.ln_weight2 - half_w2 * self.inv_var2;
        let (log1p, r1, r2) = log1p_exp_sigmoids(a1 - a2);
        let lp = a1.max(a2) + log1p;
        (lp, -w * (r1 * self.inv_var1 + r2 * self.inv_var2))
    }
}

/// One scale-mixture KL's settings besides `μ` and `ρ`.
#[derive(Debug, Clone, PartialEq)]
pub struct MixtureKl {
    /// The key whose sub-streams `0..S` give the draws.
    pub key: u64,
    /// How `ρ` gives `σ`.
    pub rule: SigmaRule,
    /// The prior.
    pub prior: MixtureTerms,
    /// The factor `c_s` of each draw `w_s = μ + σ·c_s·ε_s` (1 for mean-field, `r_s/‖ε_s‖` for
    /// radial); its length is the number of draws `S` of the cross-entropy's average.
    pub scales: Vec<f32>,
}

/// The block index of element `start + a` (both multiples of the block size).
#[inline(always)]
fn block_of(start: usize, a: usize) -> u64 {
    ((start + a) / BLOCK) as u64
}

multiversion! {
    /// [`mixture_kl`] over a range starting at element `start`: `Σ −ln σ − (1/S)Σ_s ln p(w_s)`.
    fn mixture_kl_range(key: [u32; 2], start: usize, mu: &[f32], rho: &[f32], rule: SigmaRule,
                        t: MixtureTerms, scales: &[f32]) -> f64 {
        let mut eps = [0f32; BLOCK];
        let mut lanes = [0f32; 8];
        let mut total = 0f64;
        let inv_s = 1.0 / scales.len() as f32;
        for (k, (mc, rc)) in mu.chunks(BLOCK).zip(rho.chunks(BLOCK)).enumerate() {
            let (a, len) = (k * BLOCK, mc.len());
            let (m, r) = (load(mc, 0.0), load(rc, 0.0));
            let Sigmas { sigma, ln_sigma, .. } = rule.sigmas(&r, true);
            let mut lp = [0f32; BLOCK];
            for (s, &c) in scales.iter().enumerate() {
                normal_block(key, s as u32, block_of(start, a), &mut eps);
                for j in 0..BLOCK {
                    lp[j] += t.log_density(m[j] + sigma[j] * c * eps[j]).0;
                }
            }
            let mut q = [0f32; BLOCK];
            for j in 0..BLOCK {
                q[j] = -ln_sigma[j] - lp[j] * inv_s;
            }
            accumulate(&mut lanes, &q, len);
            if k % 64 == 63 {
                total += lanes.iter().map(|&x| f64::from(x)).sum::<f64>();
                lanes = [0.0; 8];
            }
        }
        total + lanes.iter().map(|&x| f64::from(x)).sum::<f64>()
    }
}

/// `KL(q ‖ p)` of `q` with draws `μ + σ(ρ)·c_s·ε_s` from the scale mixture of `kl` (`σ` by its
/// rule), less the constant of `−H[q]`: `−Σ ln σ − (1/S) Σ_s Σ_i ln p(μ_i + σ_i c_s ε_si)`,
/// `ε_s` sub-stream `s` of its key.
pub fn mixture_kl(mu: &[f32], rho: &[f32], kl: &MixtureKl) -> f64 {
    let n = mu.len();
    assert_eq!(rho.len(), n, "mixture_kl: μ and ρ lengths");
    assert!(!kl.scales.is_empty(), "mixture_kl: at least one draw");
    let key = key_words(kl.key);
    let parts = par_chunks(n, |a, b| {
        mixture_kl_range(key, a, &mu[a..b], &rho[a..b], kl.rule, kl.prior, &kl.scales)
    });
    parts.iter().sum::<f64>()
}

multiversion! {
    /// [`mixture_kl_backward`] over a range starting at element `start`.
    fn mixture_kl_backward_range(start: usize, mu: &[f32], rho: &[f32], kl: &MixtureKl, g: f32,
                                 dmu: &mut [f32], drho: &mut [f32]) {
        let (key, rule, t, scales) = (key_words(kl.key), kl.rule, kl.prior, &kl.scales[..]);
        let mut eps = [0f32; BLOCK];
        let scale = g / scales.len() as f32;
        for (k, (dm, dr)) in dmu.chunks_mut(BLOCK).zip(drho.chunks_mut(BLOCK)).enumerate() {
            let (a, len) = (k * BLOCK, dm.len());
            let (m, r) = (load(&mu[a..a + len], 0.0), load(&rho[a..a + len], 0.0));
            let Sigmas { sigma, dsigma, .. } = rule.sigmas(&r, false);
            let (mut psi, mut psi_eps) = ([0f32; BLOCK], [0f32; BLOCK]);
            for (s, &c) in scales.iter().enumerate() {
                normal_block(key, s as u32, block_of(start, a), &mut eps);
                for j in 0..BLOCK {
                    let ce = c * eps[j];
                    let d = t.log_density(m[j] + sigma[j] * ce).1;
                    psi[j] += d;
                    psi_eps[j] += d * ce;
                }
            }
            let (mut out_m, mut out_r) = ([0f32; BLOCK], [0f32; BLOCK]);
            for j in 0..BLOCK {
                out_m[j] = -scale * psi[j];
                out_r[j] = -dsigma[j] * (g / sigma[j] + scale * psi_eps[j]);
            }
            store(dm, &out_m);
            store(dr, &out_r);
        }
    }
}

/// The gradient of [`mixture_kl`] times `g`: `dμ_i = −(g/S) Σ_s ψ_si` and
/// `dρ_i = −σ'_i (g/σ_i + (g/S) Σ_s ψ_si c_s ε_si)`, `ψ = d ln p/dw` at `w_si`, `σ' = dσ/dρ`.
pub fn mixture_kl_backward(
    mu: &[f32],
    rho: &[f32],
    kl: &MixtureKl,
    g: f32,
    dmu: &mut [f32],
    drho: &mut [f32],
) {
    let n = mu.len();
    assert!(rho.len() == n && dmu.len() == n && drho.len() == n);
    let (sm, sr) = (Shared::new(dmu), Shared::new(drho));
    par_chunks(n, |a, b| {
        // SAFETY: disjoint ranges.
        let (dm, dr) = unsafe { (sm.range(a, b), sr.range(a, b)) };
        mixture_kl_backward_range(a, &mu[a..b], &rho[a..b], kl, g, dm, dr);
    });
}
