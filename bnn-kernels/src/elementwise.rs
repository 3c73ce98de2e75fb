//! The kernels of a stochastic layer's weights, on `f32` slices: draws, moments, KL terms, noise,
//! dropout, Flipout signs and Adam. Each is one pass over its inputs, in fixed 64-element blocks
//! (vectorised), parallel over 16 Ki-element ranges. bnn-burn's fused ops call them on its CPU
//! backends; their burn-op compositions are the reference.

// Fixed-size block loops index several arrays at once: that is what LLVM vectorises.
#![allow(clippy::needless_range_loop)]

use crate::DropoutNoise;
use crate::rng::{key_words, mask_words, normal_block, sign_bits, sign_of};
use crate::simd::{
    BLOCK, LnSum, Out, Shared, accumulate, exp, ln, load, multiversion, par_chunks,
    softplus_sigmoid, store, store_out,
};
use std::mem::MaybeUninit;

/// Floor under a sampled variance before its square root (keeps the gradient finite).
pub const VAR_FLOOR: f32 = 1e-16;

/// The Gaussian prior terms of a location-scale KL, per element:
/// `½(σ̃²·inv_var_sigma + (μ − mean)²·inv_var_mu) − ln σ̃` (the family adds its constant), with
/// `σ̃ = clamp(σ, sigma_range)`: `σ` itself unless the terms are clamped
/// ([`KlTerms::with_log_var_range`]), and no gradient in `σ` where the clamp holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KlTerms {
    /// Prior mean `μ₀`.
    pub mean: f32,
    /// `1/σ₀²`.
    pub inv_var_mu: f32,
    /// `1/(d·σ₀²)` where the marginal variance is `σ²/d` (1 for mean-field, `n` for radial).
    pub inv_var_sigma: f32,
    /// `[ln σ_min, ln σ_max]` of the clamp, `[−∞, ∞]` for none.
    pub ln_sigma_range: (f32, f32),
    /// `[σ_min, σ_max]`, the exponentials of [`KlTerms::ln_sigma_range`].
    pub sigma_range: (f32, f32),
}

impl KlTerms {
    /// The terms that a [`PerWeight`] prior scales into `KL(q ‖ N(μ₀, σ₀²))` less its
    /// constant, for a marginal variance `σ²·var_scale`: `inv_var_mu = 1`,
    /// `inv_var_sigma = var_scale`.
    pub const fn per_weight(var_scale: f32) -> Self {
        Self::new(0.0, 1.0, var_scale)
    }

    /// [`KlTerms::ln_sigma_range`] without a clamp.
    const NO_CLAMP: (f32, f32) = (f32::NEG_INFINITY, f32::INFINITY);

    /// The terms of the prior `N(mean, 1/inv_var_mu)` for a marginal variance `σ²/d`
    /// (`inv_var_sigma = inv_var_mu/d`), unclamped.
    pub const fn new(mean: f32, inv_var_mu: f32, inv_var_sigma: f32) -> Self {
        Self {
            mean,
            inv_var_mu,
            inv_var_sigma,
            ln_sigma_range: Self::NO_CLAMP,
            sigma_range: (0.0, f32::INFINITY),
        }
    }

    /// The terms with the marginal variance's `ln(σ²·var_scale)` clamped to `[lo, hi]` inside
    /// the KL (Haußmann's VBP code clamps `ln σ²` to `[−11, 11]`;
    /// bnn-burn's `WeightConfig::kl_log_var_range`): `ln σ` to
    /// `[½(lo − ln var_scale), ½(hi − ln var_scale)]`.
    pub fn with_log_var_range(self, (lo, hi): (f64, f64), var_scale: f64) -> Self {
        let (lo, hi) = (0.5 * (lo - var_scale.ln()), 0.5 * (hi - var_scale.ln()));
        Self {
            ln_sigma_range: (lo as f32, hi as f32),
            sigma_range: (lo.exp() as f32, hi.exp() as f32),
            ..self
        }
    }

    /// Whether `σ` is clamped inside the KL.
    pub fn is_clamped(&self) -> bool {
        self.ln_sigma_range != Self::NO_CLAMP
    }

    /// `∂/∂σ` of one element's terms, `σ̃·inv_var_sigma·π₀ − 1/σ̃` inside the clamp's range and
    /// 0 where it holds (`σ` at a bound counts as inside); `π₀` is 1 under scalar terms and
    /// `1/σ₀ᵢ²` under a per-weight prior ([`PerWeight`]).
    #[inline(always)]
    fn sigma_gradient(&self, sigma: f32, precision: f32) -> f32 {
        let (low, high) = self.sigma_range;
        let slope = sigma * self.inv_var_sigma * precision - 1.0 / sigma;
        if sigma >= low && sigma <= high {
            slope
        } else {
            0.0
        }
    }
}

/// A Gaussian prior with a mean `μ₀ᵢ` and a standard deviation `σ₀ᵢ` per weight (flat, of the
/// weight's length), which makes the [`KlTerms`] per weight:
/// `½(σ̃²·inv_var_sigma + (μ − μ₀ᵢ)²·inv_var_mu)/σ₀ᵢ² − ln σ̃ + ln σ₀ᵢ` (the terms' own `mean`
/// is not used). With `inv_var_mu = 1` and `inv_var_sigma = var_scale`
/// ([`KlTerms::per_weight`]) that is `KL(q ‖ N(μ₀, σ₀²))` less its constant: a trained
/// posterior as the next task's prior (bnn-burn's `WeightPrior::from_posterior`).
#[derive(Debug, Clone, Copy)]
pub struct PerWeight<'a> {
    /// `μ₀`.
    pub mean: &'a [f32],
    /// `σ₀`.
    pub std: &'a [f32],
}

impl<'a> PerWeight<'a> {
    /// The prior of the weights `a..b`.
    fn range(self, a: usize, b: usize) -> Self {
        Self {
            mean: &self.mean[a..b],
            std: &self.std[a..b],
        }
    }

    /// Checks the prior's lengths against the weight's `n`.
    fn check(self, n: usize) {
        assert!(
            self.mean.len() == n && self.std.len() == n,
            "a per-weight prior of {} means and {} standard deviations for {n} weights",
            self.mean.len(),
            self.std.len()
        );
    }
}

/// A location-scale posterior's parameters: `μ`, `ρ` and how `σ` follows from `ρ`.
#[derive(Debug, Clone, Copy)]
pub struct LocScale<'a> {
    /// `μ`.
    pub mu: &'a [f32],
    /// `ρ`, as long as `μ`.
    pub rho: &'a [f32],
    /// `σ(ρ)`.
    pub rule: SigmaRule,
}

impl<'a> LocScale<'a> {
    /// The weights `a..b`.
    fn range(self, a: usize, b: usize) -> Self {
        Self {
            mu: &self.mu[a..b],
            rho: &self.rho[a..b],
            ..self
        }
    }

    /// The number of weights (checks that `ρ` is as long as `μ`).
    fn len(self) -> usize {
        assert_eq!(
            self.mu.len(),
            self.rho.len(),
            "a posterior of {} means and {} scales",
            self.mu.len(),
            self.rho.len()
        );
        self.mu.len()
    }
}

/// The Gaussian prior of a KL: its [`KlTerms`], per weight under `per_weight`.
#[derive(Debug, Clone, Copy)]
pub struct Prior<'a> {
    /// The terms (their mean and `1/σ₀²` unless per weight).
    pub terms: KlTerms,
    /// A mean and a standard deviation per weight.
    pub per_weight: Option<PerWeight<'a>>,
}

impl<'a> Prior<'a> {
    /// The prior of scalar `terms`.
    pub const fn scalar(terms: KlTerms) -> Self {
        Self {
            terms,
            per_weight: None,
        }
    }

    /// The prior of the weights `a..b`.
    fn range(self, a: usize, b: usize) -> Self {
        Self {
            per_weight: self.per_weight.map(|p| p.range(a, b)),
            ..self
        }
    }

    /// Checks a per-weight prior's lengths against the weight's `n`.
    fn check(self, n: usize) {
        if let Some(p) = self.per_weight {
            p.check(n);
        }
    }

    /// Elements `a..a + len` of the prior ([`PriorBlock::of`]).
    #[inline(always)]
    fn block<const LN: bool>(&self, a: usize, len: usize) -> PriorBlock {
        PriorBlock::of::<LN>(&self.terms, self.per_weight, a, len)
    }
}

/// Gradients of a location-scale posterior's parameters.
#[derive(Debug)]
pub struct Grads<'a> {
    /// `dμ`.
    pub mu: &'a mut [f32],
    /// `dρ`.
    pub rho: &'a mut [f32],
}

/// The draws of [`sample`]: `w_s = [μ] + σ·scales[s]·ε_s`, `ε_s` sub-stream `s` of `key`.
#[derive(Debug, Clone, Copy)]
pub struct Draws<'a> {
    /// The noise's key.
    pub key: u64,
    /// One factor per draw (1 for mean-field, `r_s/‖ε_s‖` for radial).
    pub scales: &'a [f32],
    /// Leaves `μ` out of the draws (`w_s = σ·scales[s]·ε_s`).
    pub center: bool,
}

/// One draw over one range of [`sample`].
#[derive(Clone, Copy)]
struct DrawRange {
    key: [u32; 2],
    stream: u32,
    start: usize,
    scale: f32,
    center: bool,
}

/// One block's prior per element: `μ₀`, `1/σ₀²` and `ln σ₀` ([`PerWeight`]), or under scalar
/// terms their mean with 1 and 0 (the terms carry `1/σ₀²`, the caller adds `ln σ₀`), which
/// leaves the scalar terms' arithmetic bit for bit as it is without a per-weight prior.
struct PriorBlock {
    mean: [f32; BLOCK],
    precision: [f32; BLOCK],
    ln_std: [f32; BLOCK],
}

impl PriorBlock {
    /// Elements `a..a + len` of the prior (`ln σ₀` only when `LN`, zeros otherwise).
    #[inline(always)]
    fn of<const LN: bool>(
        terms: &KlTerms,
        per_weight: Option<PerWeight>,
        a: usize,
        len: usize,
    ) -> Self {
        let Some(p) = per_weight else {
            return Self {
                mean: [terms.mean; BLOCK],
                precision: [1.0; BLOCK],
                ln_std: [0.0; BLOCK],
            };
        };
        // Padding lanes get σ₀ = 1: finite terms that are never summed.
        let std = load(&p.std[a..a + len], 1.0);
        let mut block = Self {
            mean: load(&p.mean[a..a + len], 0.0),
            precision: [0.0; BLOCK],
            ln_std: [0.0; BLOCK],
        };
        for j in 0..BLOCK {
            block.precision[j] = 1.0 / (std[j] * std[j]);
        }
        if LN {
            for j in 0..BLOCK {
                block.ln_std[j] = ln(std[j]);
            }
        }
        block
    }
}

/// Sums eight lanes (and a running `f64` total) into one `f64`.
fn lanes_total(lanes: &[f32; 8]) -> f64 {
    lanes.iter().map(|&x| x as f64).sum()
}

/// The Gaussian KL terms of one block but their `− ln σ̃`, with `σ̃` clamped as [`KlTerms`] says:
/// `(½(σ̃²·inv_var_sigma + (μ − μ₀)²·inv_var_mu)·π₀ + ln σ₀, σ̃)` for the block's prior
/// `μ₀, π₀ = 1/σ₀², ln σ₀` ([`PriorBlock`]; under scalar terms `π₀ = 1` and the caller adds the
/// constants once). [`KlSum`] takes `Σ ln σ̃` from `σ̃`.
#[inline(always)]
fn kl_terms(
    m: &[f32; BLOCK],
    sigma: &[f32; BLOCK],
    p: KlTerms,
    prior: &PriorBlock,
) -> ([f32; BLOCK], [f32; BLOCK]) {
    let (low, high) = p.sigma_range;
    let (mut t, mut clamped) = ([0f32; BLOCK], [0f32; BLOCK]);
    for j in 0..BLOCK {
        // max/min rather than clamp: no check of the bounds per element, and it vectorises.
        let (s, c) = (sigma[j].max(low).min(high), m[j] - prior.mean[j]);
        let quad = 0.5 * (s * s * p.inv_var_sigma + c * c * p.inv_var_mu) * prior.precision[j];
        t[j] = quad + prior.ln_std[j];
        clamped[j] = s;
    }
    (t, clamped)
}

/// A range's running sum of KL terms ([`kl_terms`]): all but `− ln σ̃` in 8 `f32` lanes, added
/// to an `f64` every 64 blocks, and `Σ ln σ̃` by [`LnSum`] (no logarithm per weight).
#[derive(Default)]
struct KlSum {
    lanes: [f32; 8],
    total: f64,
    blocks: usize,
    ln: LnSum,
}

impl KlSum {
    /// Adds the block's first `len` terms.
    #[inline(always)]
    fn add(
        &mut self,
        m: &[f32; BLOCK],
        sigma: &[f32; BLOCK],
        p: KlTerms,
        prior: &PriorBlock,
        len: usize,
    ) {
        let (t, clamped) = kl_terms(m, sigma, p, prior);
        accumulate(&mut self.lanes, &t, len);
        self.ln.add(&clamped, len);
        self.blocks += 1;
        if self.blocks.is_multiple_of(64) {
            self.total += lanes_total(&self.lanes);
            self.lanes = [0.0; 8];
        }
    }

    /// The sum so far.
    fn total(&self) -> f64 {
        self.total + lanes_total(&self.lanes) - self.ln.total()
    }
}

/// What the forward pass of [`sample`] keeps for its backward pass.
///
/// Element `i` of draw `s`'s row is `scales[s]·ε_si·dσ_i/dρ_i`, the factor of `∂w_si/∂ρ_i`; the
/// KL's row holds `(σ_i/(dσ₀²) − 1/σ_i)·dσ_i/dρ_i` (0 where the KL's clamp holds:
/// [`KlTerms::with_log_var_range`]), that of `∂KL/∂ρ_i`. With them the backward
/// pass is products and sums only: regenerating `ε` and evaluating `σ(ρ)` and its derivative
/// again (a Philox block, Box–Muller, an exponential and a logarithm per weight) cost as much as
/// the forward pass. The backward pass writes the gradients over the rows ([`sample_backward`]),
/// so the tape costs memory only between the two passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tape {
    /// Nothing: no gradient is taken.
    Off,
    /// A row per draw: `[S, n]`.
    Draws,
    /// A row per draw, then the KL's row: `[S + 1, n]` (the KL's terms are needed).
    DrawsAndKl,
}

impl Tape {
    /// Rows of `n` weights the tape has for `draws` draws.
    pub fn rows(self, draws: usize) -> usize {
        match self {
            Self::Off => 0,
            Self::Draws => draws,
            Self::DrawsAndKl => draws + 1,
        }
    }
}

multiversion! {
    /// Forward of one sample over a range starting at element `start`: `out = [μ] + σ·s·ε`, the
    /// draw's tape row `s·ε·dσ/dρ` into `tape` and the KL's `∂KL/∂σ·dσ/dρ`
    /// (`KlTerms::sigma_gradient`, per weight under `per_weight`) into `kl_tape` when given.
    fn sample_range(d: DrawRange, q: LocScale, kl: Option<Prior>, out: &mut [MaybeUninit<f32>],
                    tape: Option<&mut [MaybeUninit<f32>]>,
                    kl_tape: Option<&mut [MaybeUninit<f32>]>) -> f64 {
        let (mut tape, mut kl_tape) = (tape, kl_tape);
        let DrawRange { key, stream, start, scale, center } = d;
        let (mu, rho, rule) = (q.mu, q.rho, q.rule);
        let mut eps = [0f32; BLOCK];
        let mut sum = KlSum::default();
        for (k, o) in out.chunks_mut(BLOCK).enumerate() {
            let (a, len) = (k * BLOCK, o.len());
            normal_block(key, stream, ((start + a) / BLOCK) as u64, &mut eps);
            let (m, r) = (load(&mu[a..a + len], 0.0), load(&rho[a..a + len], 0.0));
            // Branch-free loops (the KL terms in a loop of their own) so each vectorises.
            let Sigmas { sigma, dsigma, .. } = rule.sigmas(&r, false);
            let mut w = [0f32; BLOCK];
            for j in 0..BLOCK {
                let base = if center { 0.0 } else { m[j] };
                w[j] = base + sigma[j] * scale * eps[j];
            }
            store_out(o, &w);
            if let Some(t) = tape.as_deref_mut() {
                let mut row = [0f32; BLOCK];
                for j in 0..BLOCK {
                    row[j] = scale * eps[j] * dsigma[j];
                }
                store_out(&mut t[a..a + len], &row);
            }
            if let Some(kl) = kl {
                let (p, prior) = (kl.terms, kl.block::<true>(a, len));
                if let Some(t) = kl_tape.as_deref_mut() {
                    // Padding lanes have ρ = 0, so σ > 0 there too.
                    let mut row = [0f32; BLOCK];
                    for j in 0..BLOCK {
                        row[j] = p.sigma_gradient(sigma[j], prior.precision[j]) * dsigma[j];
                    }
                    store_out(&mut t[a..a + len], &row);
                }
                sum.add(&m, &sigma, p, &prior, len);
            }
        }
        sum.total()
    }
}

/// `out[s] = [μ] + σ(ρ)·scales[s]·ε_s` for every draw `s` ([`Draws`]; `out` is `[S, n]`
/// flat); returns the summed KL terms (0 without `kl`). `tape` (`[Tape::rows, n]` flat;
/// [`Tape::DrawsAndKl`] needs `kl`) receives the rows [`sample_backward`] needs.
pub fn sample(
    q: LocScale,
    draws: Draws,
    kl: Option<Prior>,
    keep: Tape,
    out: &mut [impl Out],
    tape: &mut [impl Out],
) -> f64 {
    let (out, tape) = (Out::as_uninit(out), Out::as_uninit(tape));
    let n = q.len();
    if let Some(p) = kl {
        p.check(n);
    }
    let count = draws.scales.len();
    assert_eq!(out.len(), n * count);
    assert_eq!(tape.len(), n * keep.rows(count), "the tape of {keep:?}");
    assert!(
        keep != Tape::DrawsAndKl || kl.is_some(),
        "the KL's tape row needs the KL's terms"
    );
    let shared = Shared::out(out);
    let taped = Shared::out(tape);
    let key = key_words(draws.key);
    let mut total = 0.0;
    for (s, &scale) in draws.scales.iter().enumerate() {
        let kl = if s == 0 { kl } else { None };
        total += par_chunks(n, |a, b| {
            // SAFETY: the ranges of one sample are disjoint, in the draws and in the tape (a
            // draw's row, and the KL's row on the first draw only).
            let o = unsafe { shared.out_range(s * n + a, s * n + b) };
            let row = (keep != Tape::Off).then(|| unsafe { taped.out_range(s * n + a, s * n + b) });
            let kl_row = (keep == Tape::DrawsAndKl && s == 0)
                .then(|| unsafe { taped.out_range(count * n + a, count * n + b) });
            let d = DrawRange {
                key,
                stream: s as u32,
                start: a,
                scale,
                center: draws.center,
            };
            sample_range(d, q.range(a, b), kl.map(|p| p.range(a, b)), o, row, kl_row)
        })
        .into_iter()
        .sum::<f64>();
    }
    total
}

multiversion! {
    /// Backward of [`sample`] over one range, in place: `dws` holds the range of each draw's
    /// gradient, `rows` of each draw's tape row (the first becomes `dρ`), `kl_row` the KL's (it
    /// becomes `dμ`); without a KL, `dmu` receives `dμ` unless it is empty.
    fn sample_backward_range(dws: &[&[f32]], rows: &mut [&mut [f32]], center: bool, mu: &[f32],
                             fold: Option<(Prior, f32)>, kl_row: Option<&mut [f32]>,
                             dmu: &mut [f32]) {
        let mut kl_row = kl_row;
        for a in (0..mu.len()).step_by(BLOCK) {
            let len = BLOCK.min(mu.len() - a);
            let mut sum_dw = [0f32; BLOCK];
            let mut dr = [0f32; BLOCK];
            for (dw, row) in dws.iter().zip(rows.iter()) {
                let d = load(&dw[a..a + len], 0.0);
                let t = load(&row[a..a + len], 0.0);
                for j in 0..BLOCK {
                    sum_dw[j] += d[j];
                    dr[j] += d[j] * t[j];
                }
            }
            let mut dm = if center { [0f32; BLOCK] } else { sum_dw };
            if let (Some((prior, w)), Some(k)) = (fold, kl_row.as_deref_mut()) {
                let m = load(&mu[a..a + len], 0.0);
                let t = load(&k[a..a + len], 0.0);
                let (p, block) = (prior.terms, prior.block::<false>(a, len));
                for j in 0..BLOCK {
                    dm[j] += w * (m[j] - block.mean[j]) * p.inv_var_mu * block.precision[j];
                    dr[j] += w * t[j];
                }
                store(&mut k[a..a + len], &dm);
            } else if !dmu.is_empty() {
                store(&mut dmu[a..a + len], &dm);
            }
            store(&mut rows[0][a..a + len], &dr);
        }
    }
}

/// `(dμ, dρ)` of [`sample`] given `dw` (`[S, n]` flat), written over the forward pass's tape,
/// plus `weight × ∇KL` when `fold` is `Some((prior, weight))` (the tape then
/// [`Tape::DrawsAndKl`]; the prior as in the forward pass): `dμ = Σ_s dw_s + w(μ − μ₀)/σ₀²`
/// (without the sum when `center`), `dρ = Σ_s dw_s·t_s + w·t_KL`, with the tape's rows `t_s`
/// of the draws and `t_KL` of the KL.
///
/// `dρ` is written over the first row of `tape`, `dμ` over its KL row when there is a KL and
/// into `dmu` otherwise (`n` elements, or empty to skip it: one uncentred draw's `dμ` is `dw`).
pub fn sample_backward(
    dw: &[f32],
    draws: usize,
    center: bool,
    mu: &[f32],
    fold: Option<(Prior, f32)>,
    tape: &mut [f32],
    dmu: &mut [f32],
) {
    let n = mu.len();
    if let Some((p, _)) = fold {
        p.check(n);
    }
    assert_eq!(dw.len(), n * draws);
    let keep = if fold.is_some() {
        Tape::DrawsAndKl
    } else {
        Tape::Draws
    };
    assert_eq!(tape.len(), n * keep.rows(draws), "the tape of {keep:?}");
    assert!(
        dmu.is_empty() || (dmu.len() == n && fold.is_none()),
        "dμ goes over the KL's row when there is one"
    );
    let (st, sm) = (Shared::new(tape), Shared::new(dmu));
    let has_dmu = !dmu.is_empty();
    par_chunks(n, |a, b| {
        let dws: Vec<&[f32]> = (0..draws).map(|s| &dw[s * n + a..s * n + b]).collect();
        // SAFETY: every task takes the range `a..b` of each row: disjoint across tasks.
        let mut rows: Vec<&mut [f32]> = (0..draws)
            .map(|s| unsafe { st.range(s * n + a, s * n + b) })
            .collect();
        let kl_row = fold
            .is_some()
            .then(|| unsafe { st.range(draws * n + a, draws * n + b) });
        let dm: &mut [f32] = if has_dmu {
            unsafe { sm.range(a, b) }
        } else {
            &mut []
        };
        let fold = fold.map(|(p, w)| (p.range(a, b), w));
        sample_backward_range(&dws, &mut rows, center, &mu[a..b], fold, kl_row, dm);
    });
}

/// `σ`, `ln σ` and `dσ/dρ` of one block of `ρ` ([`SigmaRule::sigmas`]).
pub struct Sigmas {
    /// `σ`.
    pub sigma: [f32; BLOCK],
    /// `ln σ` (zeros unless asked for).
    pub ln_sigma: [f32; BLOCK],
    /// `dσ/dρ`.
    pub dsigma: [f32; BLOCK],
}

/// How a location-scale posterior's `σ` follows from its unconstrained `ρ`, for [`sample`],
/// [`sample_ratio`], [`moments`] and the KL: the three scale parametrisations (bnn-burn's `ScaleParam`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SigmaRule {
    /// `σ = softplus(ρ)`.
    Softplus,
    /// `ln σ² = ρ`.
    LogVariance,
    /// `σ² = e^{ln_bound}·sigmoid(ρ)`, i.e. `ln σ = ½(ln_bound − softplus(−ρ))` (Depeweg 2019
    /// eq. 3.20).
    SigmoidVariance {
        /// `ln λ` of the variance's upper bound `λ`.
        ln_bound: f32,
    },
}

impl SigmaRule {
    /// `(σ, ln σ, dσ/dρ)` of one `ρ`.
    #[inline(always)]
    pub fn eval(self, rho: f32) -> (f32, f32, f32) {
        match self {
            Self::Softplus => {
                let (sp, sig) = softplus_sigmoid(rho);
                (sp, ln(sp), sig)
            }
            Self::LogVariance => {
                let ln_sigma = 0.5 * rho;
                let sigma = exp(ln_sigma);
                (sigma, ln_sigma, 0.5 * sigma)
            }
            Self::SigmoidVariance { ln_bound } => {
                // softplus(−ρ) and sigmoid(−ρ).
                let (sp, sig) = softplus_sigmoid(-rho);
                let ln_sigma = 0.5 * (ln_bound - sp);
                let sigma = exp(ln_sigma);
                (sigma, ln_sigma, 0.5 * sigma * sig)
            }
        }
    }

    /// `σ`, `dσ/dρ` and, when `ln`, `ln σ` (zeros otherwise) of one block.
    #[inline(always)]
    pub fn sigmas(self, r: &[f32; BLOCK], ln: bool) -> Sigmas {
        let mut s = Sigmas {
            sigma: [0.0; BLOCK],
            ln_sigma: [0.0; BLOCK],
            dsigma: [0.0; BLOCK],
        };
        if ln {
            self.block::<true>(r, &mut s.sigma, &mut s.ln_sigma, &mut s.dsigma);
        } else {
            self.block::<false>(r, &mut s.sigma, &mut s.ln_sigma, &mut s.dsigma);
        }
        s
    }

    /// `σ`, `ln σ` (when `LN`) and `dσ/dρ` of one block. The rule is matched once per block, so
    /// that each arm is a loop of one formula, which LLVM vectorises (a match per element keeps
    /// it scalar).
    #[inline(always)]
    fn block<const LN: bool>(
        self,
        r: &[f32; BLOCK],
        sigma: &mut [f32; BLOCK],
        ln_sigma: &mut [f32; BLOCK],
        dsigma: &mut [f32; BLOCK],
    ) {
        macro_rules! each {
            ($rule:expr) => {
                for j in 0..BLOCK {
                    let (s, ln_s, d) = $rule.eval(r[j]);
                    sigma[j] = s;
                    if LN {
                        ln_sigma[j] = ln_s;
                    }
                    dsigma[j] = d;
                }
            };
        }
        match self {
            Self::Softplus => each!(Self::Softplus),
            Self::LogVariance => each!(Self::LogVariance),
            Self::SigmoidVariance { ln_bound } => each!(Self::SigmoidVariance { ln_bound }),
        }
    }
}

multiversion! {
    /// Forward of [`sample_ratio`] over a range starting at element `start`: every draw's
    /// `w_s = μ + σ·ε_s` into `outs[s]`, each draw's sum of the log-ratio terms
    /// `½((w − μ₀)²/σ₀² − ε²) − ln σ` (`+ ln σ₀` per weight) into `ratios[s]`; returns the
    /// range's sum of the KL terms (0 unless `kl`). `σ` is evaluated once per element for all
    /// draws.
    fn sample_ratio_range(key: [u32; 2], start: usize, q: LocScale, p: Prior,
                          outs: &mut [&mut [f32]], ratios: &mut [f64], kl: bool) -> f64 {
        let (mu, rho, rule, prior) = (q.mu, q.rho, q.rule, p.terms);
        let mut eps = [0f32; BLOCK];
        let mut kl_sum = KlSum::default();
        for (k, (mc, rc)) in mu.chunks(BLOCK).zip(rho.chunks(BLOCK)).enumerate() {
            let (a, len) = (k * BLOCK, mc.len());
            let (m, r) = (load(mc, 0.0), load(rc, 0.0));
            let Sigmas { sigma, ln_sigma, .. } = rule.sigmas(&r, true);
            let p0 = p.block::<true>(a, len);
            for (s, (o, ratio)) in outs.iter_mut().zip(ratios.iter_mut()).enumerate() {
                normal_block(key, s as u32, ((start + a) / BLOCK) as u64, &mut eps);
                let mut w = [0f32; BLOCK];
                let mut t = [0f32; BLOCK];
                for j in 0..BLOCK {
                    w[j] = m[j] + sigma[j] * eps[j];
                    let c = w[j] - p0.mean[j];
                    let quad = c * c * prior.inv_var_mu * p0.precision[j];
                    t[j] = 0.5 * (quad - eps[j] * eps[j]) - ln_sigma[j] + p0.ln_std[j];
                }
                store(&mut o[a..a + len], &w);
                let mut lanes = [0f32; 8];
                accumulate(&mut lanes, &t, len);
                *ratio += lanes_total(&lanes);
            }
            if kl {
                kl_sum.add(&m, &sigma, prior, &p0, len);
            }
        }
        kl_sum.total()
    }
}

/// Mean-field draws with their log-ratios to a Gaussian prior `N(μ₀, σ₀²)` (`prior.mean`,
/// `prior.inv_var_mu = 1/σ₀²`; per weight under `per_weight` with [`KlTerms::per_weight`]'s
/// terms), for black-box α's per-draw `ln q(W_s) − ln p(W_s)`:
/// `out` (`[S·n + S]` flat) holds the draws `w_s = μ + σ(ρ)·ε_s` (stream `s` of `key`) row by
/// row, then the `S` ratios
/// `r_s = Σ_i [½((w_si − μ₀)²/σ₀² − ε_si²) − ln σ_i + ln σ₀]`.
/// Returns the KL terms' sum `Σ ½(σ²/σ₀² + (μ − μ₀)²/σ₀²) − ln σ` when `kl` (else 0; `+ ln σ₀`
/// per weight).
pub fn sample_ratio(
    key: u64,
    q: LocScale,
    draws: usize,
    prior: Prior,
    out: &mut [f32],
    kl: bool,
) -> f64 {
    let n = q.len();
    prior.check(n);
    assert_eq!(out.len(), draws * (n + 1));
    let (w, ratios) = out.split_at_mut(draws * n);
    let shared = Shared::new(w);
    let key = key_words(key);
    let parts = par_chunks(n, |a, b| {
        // SAFETY: the ranges `[s·n + a, s·n + b)` are disjoint across draws and across ranges.
        let mut outs: Vec<&mut [f32]> = (0..draws)
            .map(|s| unsafe { shared.range(s * n + a, s * n + b) })
            .collect();
        let mut sums = vec![0f64; draws];
        let (q, p) = (q.range(a, b), prior.range(a, b));
        let kl_sum = sample_ratio_range(key, a, q, p, &mut outs, &mut sums, kl);
        (sums, kl_sum)
    });
    // `ln σ₀` of scalar terms (per weight it is in the sums, and `inv_var_mu = 1`).
    let ln_sigma0 = -0.5 * (prior.terms.inv_var_mu as f64).ln();
    let mut totals = vec![n as f64 * ln_sigma0; draws];
    let mut kl_total = 0.0;
    for (sums, k) in parts {
        for (t, s) in totals.iter_mut().zip(sums) {
            *t += s;
        }
        kl_total += k;
    }
    for (r, t) in ratios.iter_mut().zip(totals) {
        *r = t as f32;
    }
    kl_total
}

multiversion! {
    /// Backward of [`sample_ratio`] over one range (`dw` starts at the range).
    fn sample_ratio_backward_range(key: [u32; 2], start: usize, q: LocScale, p: Prior,
                                   dws: &[&[f32]], dr: &[f32], grads: Grads) {
        let (mu, rho, rule, prior) = (q.mu, q.rho, q.rule, p.terms);
        let Grads { mu: dmu, rho: drho } = grads;
        let mut eps = [0f32; BLOCK];
        let dr_total: f32 = dr.iter().sum();
        for (k, (dm_out, dr_out)) in dmu.chunks_mut(BLOCK).zip(drho.chunks_mut(BLOCK)).enumerate() {
            let (a, len) = (k * BLOCK, dm_out.len());
            let (m, r) = (load(&mu[a..a + len], 0.0), load(&rho[a..a + len], 0.0));
            let Sigmas { sigma, dsigma, .. } = rule.sigmas(&r, false);
            let p0 = p.block::<false>(a, len);
            let mut g_mu = [0f32; BLOCK];
            let mut g_sigma = [0f32; BLOCK];
            for (s, &g) in dr.iter().enumerate() {
                normal_block(key, s as u32, ((start + a) / BLOCK) as u64, &mut eps);
                let d = load(&dws[s][a..a + len], 0.0);
                for j in 0..BLOCK {
                    let c = (m[j] + sigma[j] * eps[j] - p0.mean[j]) * prior.inv_var_mu
                        * p0.precision[j];
                    g_mu[j] += d[j] + g * c;
                    g_sigma[j] += (d[j] + g * c) * eps[j];
                }
            }
            let mut dr_block = [0f32; BLOCK];
            for j in 0..BLOCK {
                dr_block[j] = (g_sigma[j] - dr_total / sigma[j]) * dsigma[j];
            }
            store(dm_out, &g_mu);
            store(dr_out, &dr_block);
        }
    }
}

/// `(dμ, dρ)` of [`sample_ratio`] given the gradients of its draws `dw` (`[S·n]`, row by row)
/// and of its ratios `dr` (`[S]`): with `c_s = (w_s − μ₀)/σ₀²`,
/// `dμ = Σ_s (dw_s + dr_s·c_s)`, `dρ = σ'(ρ)·[Σ_s (dw_s + dr_s·c_s)·ε_s − (Σ_s dr_s)/σ]`
/// (`μ₀, σ₀` per weight under `per_weight`).
pub fn sample_ratio_backward(
    key: u64,
    q: LocScale,
    prior: Prior,
    dw: &[f32],
    dr: &[f32],
    grads: Grads,
) {
    let n = q.len();
    prior.check(n);
    assert_eq!(dw.len(), n * dr.len());
    assert!(
        grads.mu.len() == n && grads.rho.len() == n,
        "gradients of {n} weights"
    );
    let (sm, sr) = (Shared::new(grads.mu), Shared::new(grads.rho));
    let key = key_words(key);
    par_chunks(n, |a, b| {
        // SAFETY: disjoint ranges.
        let (mu, rho) = unsafe { (sm.range(a, b), sr.range(a, b)) };
        let dws: Vec<&[f32]> = (0..dr.len()).map(|s| &dw[s * n + a..s * n + b]).collect();
        let (q, p) = (q.range(a, b), prior.range(a, b));
        sample_ratio_backward_range(key, a, q, p, &dws, dr, Grads { mu, rho });
    });
}

multiversion! {
    /// `var = σ²·var_scale` (when `var` is given) and the summed KL terms over one range, `σ` by
    /// `rule`.
    fn moments_range(q: LocScale, var_scale: f32, var: Option<&mut [MaybeUninit<f32>]>,
                     kl: Option<Prior>) -> f64 {
        let (mu, rho, rule) = (q.mu, q.rho, q.rule);
        let mut var = var;
        let mut sum = KlSum::default();
        for (k, (mc, rc)) in mu.chunks(BLOCK).zip(rho.chunks(BLOCK)).enumerate() {
            let len = mc.len();
            let r = load(rc, 0.0);
            let Sigmas { sigma, .. } = rule.sigmas(&r, false);
            if let Some(out) = var.as_deref_mut() {
                let mut v = [0f32; BLOCK];
                for j in 0..BLOCK {
                    v[j] = sigma[j] * sigma[j] * var_scale;
                }
                store_out(&mut out[k * BLOCK..k * BLOCK + len], &v);
            }
            if let Some(kl) = kl {
                let prior = kl.block::<true>(k * BLOCK, len);
                sum.add(&load(mc, 0.0), &sigma, kl.terms, &prior, len);
            }
        }
        sum.total()
    }
}

/// `var = σ(ρ)²·var_scale` (when given) and the summed KL terms
/// `Σ ½(σ²·inv_var_sigma + (μ − μ₀)²/σ₀²) − ln σ` (per weight under a [`PerWeight`] prior).
pub fn moments(
    q: LocScale,
    var_scale: f32,
    var: Option<&mut [MaybeUninit<f32>]>,
    kl: Option<Prior>,
) -> f64 {
    let n = q.len();
    if let Some(p) = kl {
        p.check(n);
    }
    let shared = var.map(|v| {
        assert_eq!(v.len(), n, "moments: the variances' length");
        Shared::out(v)
    });
    par_chunks(n, |a, b| {
        // SAFETY: disjoint ranges.
        let v = shared.map(|s| unsafe { s.out_range(a, b) });
        moments_range(q.range(a, b), var_scale, v, kl.map(|p| p.range(a, b)))
    })
    .into_iter()
    .sum()
}

multiversion! {
    /// `(dμ, dρ)` of [`moments`] over one range; `dμ` is written only with `kl`.
    fn moments_backward_range(dvar: Option<&[f32]>, q: LocScale, var_scale: f32,
                              fold: Option<(Prior, f32)>,
                              dmu: Option<&mut [MaybeUninit<f32>]>,
                              drho: &mut [MaybeUninit<f32>]) {
        let (mu, rho, rule) = (q.mu, q.rho, q.rule);
        let mut dmu = dmu;
        for (k, dr_out) in drho.chunks_mut(BLOCK).enumerate() {
            let (a, len) = (k * BLOCK, dr_out.len());
            let d = dvar.map(|d| load(&d[a..a + len], 0.0)).unwrap_or([0.0; BLOCK]);
            let r = load(&rho[a..a + len], 0.0);
            let Sigmas { sigma, dsigma, .. } = rule.sigmas(&r, false);
            // Branch-free loops (a test per element keeps them scalar).
            let mut dr = [0f32; BLOCK];
            for j in 0..BLOCK {
                dr[j] = 2.0 * sigma[j] * var_scale * d[j];
            }
            let kl = fold.map(|(p, w)| (p.terms, w));
            let prior = fold.map(|(p, _)| p.block::<false>(a, len));
            if let (Some((p, w)), Some(prior)) = (kl, &prior) {
                for j in 0..BLOCK {
                    dr[j] += w * p.sigma_gradient(sigma[j], prior.precision[j]);
                }
            }
            for j in 0..BLOCK {
                dr[j] *= dsigma[j];
            }
            store_out(dr_out, &dr);
            if let Some(out) = dmu.as_deref_mut() {
                let mut dm = [0f32; BLOCK];
                if let (Some((p, w)), Some(prior)) = (kl, &prior) {
                    let m = load(&mu[a..a + len], 0.0);
                    for j in 0..BLOCK {
                        dm[j] = w * (m[j] - prior.mean[j]) * p.inv_var_mu * prior.precision[j];
                    }
                }
                store_out(&mut out[a..a + len], &dm);
            }
        }
    }
}

/// `(dμ, dρ)` of [`moments`] given `dvar`, plus `weight × ∇KL` when `fold` is
/// `Some((prior, weight))` (the KL's own gradient when `dvar` is `None`). Without a fold,
/// `∂var/∂μ = 0`, written as zeros into `dmu` when it is given. Both outputs are written in
/// full ([`Out`]).
pub fn moments_backward(
    dvar: Option<&[f32]>,
    q: LocScale,
    var_scale: f32,
    fold: Option<(Prior, f32)>,
    dmu: Option<&mut [MaybeUninit<f32>]>,
    drho: &mut [MaybeUninit<f32>],
) {
    let n = q.len();
    if let Some((p, _)) = fold {
        p.check(n);
    }
    assert_eq!(drho.len(), n, "moments_backward: dρ's length");
    assert!(
        dmu.as_ref().is_none_or(|d| d.len() == n),
        "moments_backward: dμ's length"
    );
    let (sm, sr) = (dmu.map(Shared::out), Shared::out(drho));
    par_chunks(n, |a, b| {
        // SAFETY: disjoint ranges.
        let (dm, dr) = unsafe { (sm.map(|s| s.out_range(a, b)), sr.out_range(a, b)) };
        let d = dvar.map(|d| &d[a..b]);
        let fold = fold.map(|(p, w)| (p.range(a, b), w));
        moments_backward_range(d, q.range(a, b), var_scale, fold, dm, dr);
    });
}

/// The KL terms of `q` against `prior`, `Σ ½(σ̃²·inv_var_sigma + (μ − μ₀)²·inv_var_mu) − ln σ̃`
/// (`/σ₀²` and `+ ln σ₀` per weight under a [`PerWeight`] prior; `σ` by `rule`, clamped as the
/// terms say), summed in a fixed order: [`moments`]' KL without the variances.
pub fn kl(q: LocScale, prior: Prior) -> f64 {
    moments(q, 1.0, None, Some(prior))
}

/// `g·∇` [`kl`]: `dμ = g(μ − μ₀)·inv_var_mu[/σ₀²]`,
/// `dρ = g(σ̃·inv_var_sigma[/σ₀²] − 1/σ̃)·dσ/dρ` (0 where the clamp holds; the prior is a
/// constant).
pub fn kl_backward(g: f32, q: LocScale, prior: Prior, grads: Grads) {
    let (dmu, drho) = (Out::as_uninit(grads.mu), Out::as_uninit(grads.rho));
    moments_backward(None, q, 1.0, Some((prior, g)), Some(dmu), drho);
}

multiversion! {
    /// `Σ (w − center)²` over one range.
    fn squared_distance_range(w: &[f32], center: f32) -> f64 {
        let mut lanes = [0f32; 8];
        let mut total = 0f64;
        for (k, wc) in w.chunks(BLOCK).enumerate() {
            let x = load(wc, center);
            let mut sq = [0f32; BLOCK];
            for j in 0..BLOCK {
                let c = x[j] - center;
                sq[j] = c * c;
            }
            accumulate(&mut lanes, &sq, wc.len());
            if k % 64 == 63 {
                total += lanes_total(&lanes);
                lanes = [0.0; 8];
            }
        }
        total + lanes_total(&lanes)
    }
}

/// `Σ_i (w_i − center)²`, summed in a fixed order (reproducible whatever the thread count): a
/// Gaussian prior's quadratic term at a point.
pub fn squared_distance(w: &[f32], center: f32) -> f64 {
    par_chunks(w.len(), |a, b| squared_distance_range(&w[a..b], center))
        .into_iter()
        .sum()
}

multiversion! {
    /// `out = scale·(w − center)` over one range.
    fn scaled_offset_range(w: &[f32], center: f32, scale: f32, out: &mut [f32]) {
        for (o, wc) in out.chunks_mut(BLOCK).zip(w.chunks(BLOCK)) {
            let x = load(wc, center);
            let mut d = [0f32; BLOCK];
            for j in 0..BLOCK {
                d[j] = scale * (x[j] - center);
            }
            store(o, &d);
        }
    }
}

/// `out_i = scale·(w_i − center)`: the gradient of `(scale/2)·Σ (w − center)²`.
pub fn scaled_offset(w: &[f32], center: f32, scale: f32, out: &mut [f32]) {
    let shared = Shared::new(out);
    par_chunks(w.len(), |a, b| {
        // SAFETY: disjoint ranges.
        let o = unsafe { shared.range(a, b) };
        scaled_offset_range(&w[a..b], center, scale, o);
    });
}

multiversion! {
    /// `y = mean + √(var + floor)·ε` or, with `backward`,
    /// `dvar = dy·ε/(2√(var + floor))` (`first = dy`) over one range.
    fn noise_range(key: [u32; 2], start: usize, first: &[f32], var: &[f32], out: &mut [f32],
                   backward: bool) {
        let mut eps = [0f32; BLOCK];
        for (k, o) in out.chunks_mut(BLOCK).enumerate() {
            let (a, len) = (k * BLOCK, o.len());
            normal_block(key, 0, ((start + a) / BLOCK) as u64, &mut eps);
            let (f, v) = (load(&first[a..a + len], 0.0), load(&var[a..a + len], 0.0));
            let mut y = [0f32; BLOCK];
            for j in 0..BLOCK {
                let sd = (v[j] + VAR_FLOOR).sqrt();
                y[j] = if backward { f[j] * eps[j] * 0.5 / sd } else { f[j] + sd * eps[j] };
            }
            store(o, &y);
        }
    }
}

/// `out = mean + √(var + floor)·ε` (`backward = false`), or its variance gradient
/// `out = dy·ε/(2√(var + floor))` with `first = dy` (`backward = true`).
pub fn noise(key: u64, first: &[f32], var: &[f32], out: &mut [f32], backward: bool) {
    let shared = Shared::new(out);
    let key = key_words(key);
    par_chunks(first.len(), |a, b| {
        // SAFETY: disjoint ranges.
        let o = unsafe { shared.range(a, b) };
        noise_range(key, a, &first[a..b], &var[a..b], o, backward);
    });
}

/// The keep threshold of a drop rate: word `u` keeps its element when `u ≥ round(p·2³²)`, with
/// probability `1 − p` to within `2⁻³²`.
fn keep_threshold(p: f64) -> u32 {
    assert!((0.0..1.0).contains(&p), "dropout: rate {p} outside [0, 1)");
    (p * 4_294_967_296.0).round().min(u32::MAX as f64) as u32
}

multiversion! {
    /// [`dropout`] over one range starting at element `start` (a multiple of the block size).
    fn dropout_range(key: [u32; 2], start: usize, x: &[f32], threshold: u32, scale: f32,
                     out: &mut [f32]) {
        let mut words = [0u32; BLOCK];
        for (k, o) in out.chunks_mut(BLOCK).enumerate() {
            let (a, len) = (k * BLOCK, o.len());
            mask_words(key, ((start + a) / BLOCK) as u64, &mut words);
            let v = load(&x[a..a + len], 0.0);
            let mut y = [0f32; BLOCK];
            for j in 0..BLOCK {
                y[j] = if words[j] >= threshold { v[j] * scale } else { 0.0 };
            }
            store(o, &y);
        }
    }
}

multiversion! {
    /// Gaussian [`dropout`] over one range starting at element `start` (a multiple of the block
    /// size): `x·(1 + sd·ε)`.
    fn gaussian_dropout_range(key: [u32; 2], start: usize, x: &[f32], sd: f32, out: &mut [f32]) {
        let mut eps = [0f32; BLOCK];
        for (k, o) in out.chunks_mut(BLOCK).enumerate() {
            let (a, len) = (k * BLOCK, o.len());
            normal_block(key, 0, ((start + a) / BLOCK) as u64, &mut eps);
            let v = load(&x[a..a + len], 0.0);
            let mut y = [0f32; BLOCK];
            for j in 0..BLOCK {
                y[j] = v[j] * (1.0 + sd * eps[j]);
            }
            store(o, &y);
        }
    }
}

/// `out[i] = x[i]·z_i` with unit-mean noise of variance `p/(1−p)` from `key` (Gal 2016, §3.2;
/// its own adjoint): `Bernoulli` keeps element `i` with probability `1 − p` by word `i` of
/// `key`'s mask stream, `z_i ∈ {0, 1/(1−p)}` (inverted dropout); `Gaussian` takes
/// `z_i = 1 + √(p/(1−p))·ε_i`, `ε_i` element `i` of `key`'s normal stream.
pub fn dropout(key: u64, x: &[f32], p: f64, noise: DropoutNoise, out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "dropout: input and output lengths");
    let threshold = keep_threshold(p);
    let scale = (1.0 / (1.0 - p)) as f32;
    let sd = (p / (1.0 - p)).sqrt() as f32;
    let shared = Shared::new(out);
    let key = key_words(key);
    par_chunks(x.len(), |a, b| {
        // SAFETY: disjoint ranges.
        let o = unsafe { shared.range(a, b) };
        match noise {
            DropoutNoise::Bernoulli => dropout_range(key, a, &x[a..b], threshold, scale, o),
            DropoutNoise::Gaussian => gaussian_dropout_range(key, a, &x[a..b], sd, o),
        }
    });
}

/// `out[i] = x[i]·s(⌊i/inner⌋)`, `s` a ±1 stream of `key` (its own adjoint).
pub fn flip(key: u64, x: &[f32], inner: usize, out: &mut [f32]) {
    assert!(
        inner > 0 && x.len().is_multiple_of(inner),
        "flip: groups of {inner} in {}",
        x.len()
    );
    let shared = Shared::new(out);
    let key = key_words(key);
    // One Philox output holds the signs of 128 consecutive groups: a task takes whole words.
    let per_word = 128 * inner;
    let words = x.len().div_ceil(per_word);
    par_chunks(words, |wa, wb| {
        let (a, b) = (wa * per_word, (wb * per_word).min(x.len()));
        // SAFETY: disjoint ranges (whole words).
        let o = unsafe { shared.range(a, b) };
        for (w, (o, x)) in o
            .chunks_mut(per_word)
            .zip(x[a..b].chunks(per_word))
            .enumerate()
        {
            let bits = sign_bits(key, (wa + w) as u64);
            if inner == 1 {
                flip_groups(&bits, x, o);
            } else {
                for (g, (o, x)) in o.chunks_mut(inner).zip(x.chunks(inner)).enumerate() {
                    let s = sign_of(&bits, g);
                    for (o, &x) in o.iter_mut().zip(x) {
                        *o = x * s;
                    }
                }
            }
        }
    });
}

multiversion! {
    /// `out[i] = x[i]·(±1)` with the sign of bit `i` of `bits` (`x` at most 128 long).
    fn flip_groups(bits: &[u32; 4], x: &[f32], out: &mut [f32]) {
        for (i, (o, &x)) in out.iter_mut().zip(x).enumerate() {
            // Bit 1 keeps the sign, bit 0 flips it: xor the float's sign bit.
            let flip = (!(bits[i / 32] >> (i % 32)) & 1) << 31;
            *o = f32::from_bits(x.to_bits() ^ flip);
        }
    }
}

multiversion! {
    /// `ε` of sub-stream `stream` over one range starting at element `start`.
    fn normals_range(key: [u32; 2], stream: u32, start: usize, out: &mut [f32]) {
        let mut eps = [0f32; BLOCK];
        for (k, o) in out.chunks_mut(BLOCK).enumerate() {
            normal_block(key, stream, ((start + k * BLOCK) / BLOCK) as u64, &mut eps);
            store(o, &eps);
        }
    }
}

/// `out = ε`, sub-stream `stream` of `key`.
pub fn normals(key: u64, stream: u32, out: &mut [f32]) {
    let n = out.len();
    let shared = Shared::new(out);
    let key = key_words(key);
    par_chunks(n, |a, b| {
        // SAFETY: disjoint ranges.
        let o = unsafe { shared.range(a, b) };
        normals_range(key, stream, a, o);
    });
}

multiversion! {
    /// `Σ ε²` over elements `start..start + len` of sub-stream `stream`.
    fn squared_norm_range(key: [u32; 2], stream: u32, start: usize, len: usize) -> f64 {
        let mut eps = [0f32; BLOCK];
        let mut lanes = [0f32; 8];
        let mut total = 0f64;
        for (k, a) in (0..len).step_by(BLOCK).enumerate() {
            normal_block(key, stream, ((start + a) / BLOCK) as u64, &mut eps);
            let mut sq = [0f32; BLOCK];
            for j in 0..BLOCK {
                sq[j] = eps[j] * eps[j];
            }
            accumulate(&mut lanes, &sq, (len - a).min(BLOCK));
            if k % 64 == 63 {
                total += lanes_total(&lanes);
                lanes = [0.0; 8];
            }
        }
        total + lanes_total(&lanes)
    }
}

/// `Σ_i ε_i²` over the first `n` elements of sub-stream `stream` of `key` (radial's norms), in
/// a fixed order (reproducible whatever the thread count).
pub fn squared_norm(key: u64, stream: u32, n: usize) -> f64 {
    let key = key_words(key);
    par_chunks(n, |a, b| squared_norm_range(key, stream, a, b - a))
        .into_iter()
        .sum()
}

/// The constants of one Adam or AdamW step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamStep {
    /// Learning rate.
    pub lr: f32,
    /// First-moment decay.
    pub beta_1: f32,
    /// Second-moment decay.
    pub beta_2: f32,
    /// Denominator floor.
    pub epsilon: f32,
    /// Step count after this step (1 for the first).
    pub time: i32,
    /// Decoupled weight decay (AdamW's numerics when `Some`, Adam's when `None`).
    pub decoupled_decay: Option<f32>,
}

/// The four numbers of one update, `p ← p·keep − step_size·m/(√(v·denom_scale) + eps)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamCoefficients {
    /// Multiplies the first moment: `lr·√(1−β₂ᵗ)/(1−β₁ᵗ)` (Adam) or `lr/(1−β₁ᵗ)` (AdamW).
    pub step_size: f32,
    /// Multiplies the second moment under the root: 1 (Adam) or `1/(1−β₂ᵗ)` (AdamW).
    pub denom_scale: f32,
    /// Added to the root: `ε·√(1−β₂ᵗ)` (Adam) or `ε` (AdamW).
    pub eps: f32,
    /// Multiplies the parameter: 1 (Adam) or `1 − lr·λ` (AdamW).
    pub keep: f32,
}

impl AdamStep {
    /// The step's [`AdamCoefficients`], with the bias corrections of step `time` folded in.
    pub fn coefficients(&self) -> AdamCoefficients {
        let (bc1, bc2) = (
            1.0 - self.beta_1.powi(self.time),
            1.0 - self.beta_2.powi(self.time),
        );
        match self.decoupled_decay {
            None => AdamCoefficients {
                step_size: self.lr * bc2.sqrt() / bc1,
                denom_scale: 1.0,
                eps: self.epsilon * bc2.sqrt(),
                keep: 1.0,
            },
            Some(decay) => AdamCoefficients {
                step_size: self.lr / bc1,
                denom_scale: 1.0 / bc2,
                eps: self.epsilon,
                keep: 1.0 - self.lr * decay,
            },
        }
    }
}

multiversion! {
    fn adam_range(p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], b1: f32, b2: f32,
                  c: AdamCoefficients) {
        let AdamCoefficients { step_size, denom_scale, eps, keep } = c;
        for i in 0..p.len() {
            let gi = g[i];
            let mi = b1 * m[i] + (1.0 - b1) * gi;
            let vi = b2 * v[i] + (1.0 - b2) * gi * gi;
            m[i] = mi;
            v[i] = vi;
            p[i] = p[i] * keep - step_size * mi / ((vi * denom_scale).sqrt() + eps);
        }
    }
}

/// One Adam (burn's `Adam`) or AdamW (burn's `AdamW`) update in place.
///
/// Adam: `p −= lr·√(1−β₂ᵗ)/(1−β₁ᵗ)·m/(√v + ε√(1−β₂ᵗ))`; AdamW: `p ← p(1 − lr·λ) −
/// lr·m̂/(√v̂ + ε)` with `m̂ = m/(1−β₁ᵗ)`, `v̂ = v/(1−β₂ᵗ)`.
pub fn adam(p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], step: AdamStep) {
    let c = step.coefficients();
    let (sp, sm, sv) = (Shared::new(p), Shared::new(m), Shared::new(v));
    par_chunks(g.len(), |a, b| {
        // SAFETY: disjoint ranges.
        let (p, m, v) = unsafe { (sp.range(a, b), sm.range(a, b), sv.range(a, b)) };
        let (b1, b2) = (step.beta_1, step.beta_2);
        adam_range(p, &g[a..b], m, v, b1, b2, c);
    });
}
