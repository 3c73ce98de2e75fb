//! What the CPU kernels share: branch-free `f32` approximations of `exp`, `ln`, `ln(1 + t)` and
//! `sincos` that LLVM vectorises (std's call into libm one element at a time), the run-time
//! choice of instruction set, and the parallel driver over fixed-size chunks.
//!
//! Accuracy (tested below against `f64`): `exp` and `ln` within 2·10⁻⁷ relative, `softplus`
//! within 3·10⁻⁷ relative, `sincos(2πu)` within 10⁻⁶ absolute.

// Fixed-size block loops index several arrays at once: that is what LLVM vectorises.
#![allow(clippy::needless_range_loop)]

use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Elements per inner block: the kernels work on `[f32; BLOCK]` arrays so that every inner loop
/// has a constant trip count (and vectorises).
pub const BLOCK: usize = 64;

/// Elements per parallel task (a multiple of [`BLOCK`], so a task never splits a noise block).
pub const CHUNK: usize = 256 * BLOCK;

/// Added to `x` with `|x| < 2²²`, leaves `round(x)` in the low mantissa bits of the sum: rounds
/// and converts to an integer without a float-to-integer instruction, which x86 has no vector
/// form of for Rust's saturating `as` (LLVM would go back to one element at a time).
const ROUND_SHIFT: f32 = 12_582_912.0; // 1.5·2²³

/// `(round(x), round(x) as i32)` for `|x| < 2²²` (ties to even).
#[inline(always)]
fn round_int(x: f32) -> (f32, i32) {
    let shifted = x + ROUND_SHIFT;
    let k = shifted - ROUND_SHIFT;
    (k, shifted.to_bits() as i32 - ROUND_SHIFT.to_bits() as i32)
}

/// `a·b + c` with one rounding. The AVX2 and AVX-512 versions of the kernels run it as one FMA
/// instruction; the baseline version calls libm's `fmaf`, which rounds the same way, so every
/// version still gives the same bits.
#[inline(always)]
fn fma(a: f32, b: f32, c: f32) -> f32 {
    a.mul_add(b, c)
}

/// `eˣ`, for `x` clamped to `[−87, 88]` (the normal `f32` range): `2ᵏ·e^r`, `|r| ≤ ln 2 / 2`,
/// `e^r` by its Taylor polynomial to degree 7.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let (k, ki) = round_int(x * std::f32::consts::LOG2_E);
    // r = x − k ln 2 in two parts (Cody–Waite) so that r keeps its low bits.
    let r = fma(-k, 1.428_606_8e-6, fma(-k, 0.693_145_75, x));
    // Estrin's scheme: pairs of terms in parallel, so the dependency chain is 3 FMAs deep instead
    // of Horner's 7 (the loops are latency-bound).
    let (r2, r4) = (r * r, (r * r) * (r * r));
    let low = fma(r2, fma(r, 1.0 / 6.0, 0.5), 1.0 + r);
    let high = fma(
        r2,
        fma(r, 1.0 / 5040.0, 1.0 / 720.0),
        fma(r, 1.0 / 120.0, 1.0 / 24.0),
    );
    fma(r4, high, low) * f32::from_bits(((ki + 127) as u32) << 23)
}

/// `2·atanh(s) = 2(s + s³/3 + … + s¹³/13)`, for `|s| ≤ 1/3` (the next term is below 1.4·10⁻⁸
/// of the sum).
#[inline(always)]
fn two_atanh(s: f32) -> f32 {
    let z = s * s;
    let (z2, z4) = (z * z, (z * z) * (z * z));
    let low = fma(z2, fma(z, 1.0 / 7.0, 1.0 / 5.0), fma(z, 1.0 / 3.0, 1.0));
    let high = fma(z2, 1.0 / 13.0, fma(z, 1.0 / 11.0, 1.0 / 9.0));
    2.0 * s * fma(z4, high, low)
}

/// `2·atanh(s) = 2(s + s³/3 + … + s⁹/9)`, for `|s| ≤ 3 − 2√2 ≈ 0.172` (the next term is below
/// 2·10⁻⁹ of the sum): `ln`'s range.
#[inline(always)]
fn two_atanh_short(s: f32) -> f32 {
    let z = s * s;
    let z2 = z * z;
    let low = fma(z, 1.0 / 3.0, 1.0);
    let high = fma(z2, 1.0 / 9.0, fma(z, 1.0 / 7.0, 1.0 / 5.0));
    2.0 * s * fma(z2, high, low)
}

/// `(m, e)` with `x = m·2ᵉ`, `m ∈ [1, 2)`, for positive normal `x`.
#[inline(always)]
fn split(x: f32) -> (f32, i32) {
    let bits = x.to_bits();
    (
        f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000),
        ((bits >> 23) as i32) - 127,
    )
}

/// `ln x` for positive `x` (subnormals are raised to the smallest normal): `x = m·2ᵉ` with
/// `m ∈ [√½, √2)`, `ln m = 2 atanh((m − 1)/(m + 1))`.
#[inline(always)]
pub fn ln(x: f32) -> f32 {
    // m in [1, 2); move the upper part [√2, 2) down to [√½, 1).
    let (mut m, mut e) = split(x.max(f32::MIN_POSITIVE));
    let high = m > std::f32::consts::SQRT_2;
    m = if high { m * 0.5 } else { m };
    e += high as i32;
    fma(
        e as f32,
        std::f32::consts::LN_2,
        two_atanh_short((m - 1.0) / (m + 1.0)),
    )
}

/// `(softplus ρ, sigmoid ρ)` sharing one exponential: `softplus ρ = max(ρ, 0) + ln(1 + t)`,
/// `t = e^{−|ρ|} ∈ (0, 1]`, with `ln(1 + t) = 2 atanh(t/(2 + t))` (no cancellation for tiny `t`).
#[inline(always)]
pub fn softplus_sigmoid(rho: f32) -> (f32, f32) {
    let (log1p, sigmoid, _) = log1p_exp_sigmoids(rho);
    (rho.max(0.0) + log1p, sigmoid)
}

/// `(ln(1 + e^{−|x|}), sigmoid x, sigmoid(−x))` sharing one exponential: the softplus of `x`
/// less `max(x, 0)`, kept apart where that maximum is large (a log-sum-exp of two terms,
/// `max + ln(1 + e^{−|d|})`), and both sigmoids to full relative accuracy (`1 − sigmoid x`
/// would lose the small one).
#[inline(always)]
pub fn log1p_exp_sigmoids(x: f32) -> (f32, f32, f32) {
    let t = exp(-x.abs());
    let inv = 1.0 / (1.0 + t);
    let (big, small) = (inv, t * inv);
    let (pos, neg) = if x >= 0.0 { (big, small) } else { (small, big) };
    (two_atanh(t / (2.0 + t)), pos, neg)
}

/// `(sin 2πu, cos 2πu)`: quadrant reduction, then Taylor polynomials on `[−π/4, π/4]`.
#[inline(always)]
pub fn sincos_2pi(u: f32) -> (f32, f32) {
    let (q, qi) = round_int(u * 4.0);
    let x = (u * 4.0 - q) * std::f32::consts::FRAC_PI_2;
    let z = x * x;
    let z2 = z * z;
    let s = x * fma(
        z2,
        fma(z2, 1.0 / 362_880.0, fma(z, -1.0 / 5040.0, 1.0 / 120.0)),
        fma(z, -1.0 / 6.0, 1.0),
    );
    let c = fma(
        z2,
        fma(z2, 1.0 / 40_320.0, fma(z, -1.0 / 720.0, 1.0 / 24.0)),
        fma(z, -0.5, 1.0),
    );
    // Rotate by q quarter turns: (sin, cos) → (cos, −sin) → (−sin, −cos) → (−cos, sin).
    let q = qi as u32;
    let (a, b) = if q & 1 == 1 { (c, s) } else { (s, c) };
    let sin = f32::from_bits(a.to_bits() ^ ((q & 2) << 30));
    let cos = f32::from_bits(b.to_bits() ^ (((q + 1) & 2) << 30));
    (sin, cos)
}

/// Whether the AVX-512 versions run (x86-64 with AVX-512 F/DQ/VL/BW).
#[cfg(target_arch = "x86_64")]
pub fn has_avx512() -> bool {
    use std::sync::OnceLock;
    static YES: OnceLock<bool> = OnceLock::new();
    *YES.get_or_init(|| {
        std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512dq")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512bw")
    })
}

/// Whether the AVX2 + FMA versions run.
#[cfg(target_arch = "x86_64")]
pub fn has_avx2() -> bool {
    use std::sync::OnceLock;
    static YES: OnceLock<bool> = OnceLock::new();
    *YES.get_or_init(|| {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    })
}

/// Defines `fn $name(args) -> ret` that runs `body` compiled for AVX-512, AVX2 + FMA
/// or the baseline, whichever the CPU has. Rust never contracts `a·b + c` into an FMA (explicit
/// [`fma`] calls round once in every version), so every version gives the same bits.
macro_rules! multiversion {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$doc])*
        fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn generic($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")]
                unsafe fn avx512($($arg: $ty),*) $(-> $ret)? { generic($($arg),*) }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? { generic($($arg),*) }
                if $crate::simd::has_avx512() {
                    // SAFETY: the CPU has every feature the function was compiled for.
                    return unsafe { avx512($($arg),*) };
                }
                if $crate::simd::has_avx2() {
                    // SAFETY: as above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            generic($($arg),*)
        }
    };
}
pub(crate) use multiversion;

/// Runs `f(start, end)` over `0..n` split into [`CHUNK`]-sized ranges, in parallel, and returns
/// the results in range order (so sums reduce in a fixed order: reproducible).
pub fn par_chunks<R: Send>(n: usize, f: impl Fn(usize, usize) -> R + Sync) -> Vec<R> {
    let chunks = n.div_ceil(CHUNK).max(1);
    if chunks == 1 {
        return vec![f(0, n)];
    }
    (0..chunks)
        .into_par_iter()
        .map(|c| f(c * CHUNK, ((c + 1) * CHUNK).min(n)))
        .collect()
}

/// A mutable slice handed to parallel tasks that each write a disjoint range of it.
#[derive(Clone, Copy)]
pub struct Shared(*mut f32, usize);

// SAFETY: tasks write disjoint ranges (checked in `range`), so no element is shared.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// The whole of `s`.
    pub fn new(s: &mut [f32]) -> Self {
        Shared(s.as_mut_ptr(), s.len())
    }

    /// The whole of an output `s` (written, never read: [`Out`]).
    pub fn out(s: &mut [MaybeUninit<f32>]) -> Self {
        Shared(s.as_mut_ptr().cast(), s.len())
    }

    /// Elements `a..b` of an output, for writing only ([`Shared::out`]).
    ///
    /// # Safety
    /// Ranges used at the same time must not overlap.
    pub unsafe fn out_range<'a>(self, a: usize, b: usize) -> &'a mut [MaybeUninit<f32>] {
        assert!(
            a <= b && b <= self.1,
            "range {a}..{b} outside 0..{}",
            self.1
        );
        // SAFETY: in bounds (checked); disjointness is the caller's promise; any memory is a
        // valid `MaybeUninit<f32>`.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(a).cast(), b - a) }
    }

    /// `&mut s[a..b]`.
    ///
    /// # Safety
    /// Ranges used at the same time must not overlap.
    pub unsafe fn range<'a>(self, a: usize, b: usize) -> &'a mut [f32] {
        assert!(
            a <= b && b <= self.1,
            "range {a}..{b} outside 0..{}",
            self.1
        );
        // SAFETY: in bounds (checked); disjointness is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(a), b - a) }
    }
}

/// `src` (at most [`BLOCK`] elements) copied into a fixed-size block, padded with `pad`.
#[inline(always)]
pub fn load(src: &[f32], pad: f32) -> [f32; BLOCK] {
    // A whole block: a fixed-size copy (vector moves, not a call to memcpy).
    if let Ok(full) = <&[f32; BLOCK]>::try_from(src) {
        return *full;
    }
    let mut a = [pad; BLOCK];
    a[..src.len()].copy_from_slice(src);
    a
}

/// An element of an output a kernel writes and does not read: `f32` (initialised), or
/// `MaybeUninit<f32>` (a buffer's spare capacity, so that it need not be zeroed first). Kernels
/// taking `&mut [impl Out]` write every element of it with a value.
pub trait Out: Sized {
    /// The elements, for writing.
    fn as_uninit(s: &mut [Self]) -> &mut [MaybeUninit<f32>];
}

impl Out for MaybeUninit<f32> {
    fn as_uninit(s: &mut [Self]) -> &mut [MaybeUninit<f32>] {
        s
    }
}

impl Out for f32 {
    fn as_uninit(s: &mut [Self]) -> &mut [MaybeUninit<f32>] {
        // SAFETY: same layout; the view is private to the kernels, which write only
        // initialised values through it (never `MaybeUninit::uninit()`), so `s` stays
        // initialised.
        unsafe { &mut *(s as *mut [f32] as *mut [MaybeUninit<f32>]) }
    }
}

/// The first `dst.len()` elements of `a` into the output `dst`.
#[inline(always)]
pub fn store_out(dst: &mut [MaybeUninit<f32>], a: &[f32; BLOCK]) {
    // A whole block: a fixed-size copy (vector moves, not a call to memcpy).
    if let Ok(full) = <&mut [MaybeUninit<f32>; BLOCK]>::try_from(&mut *dst) {
        *full = a.map(MaybeUninit::new);
        return;
    }
    let n = dst.len();
    assert!(n <= BLOCK);
    // SAFETY: `n` elements of `a` into `n` of `dst`; they do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(a.as_ptr(), dst.as_mut_ptr().cast::<f32>(), n) };
}

/// The first `dst.len()` elements of `a` into `dst`.
#[inline(always)]
pub fn store(dst: &mut [f32], a: &[f32; BLOCK]) {
    store_out(Out::as_uninit(dst), a);
}

/// Adds `t[..len]` to 8 independent lane sums (a reduction LLVM keeps vectorised).
#[inline(always)]
pub fn accumulate(lanes: &mut [f32; 8], t: &[f32; BLOCK], len: usize) {
    let mut t = *t;
    for x in t.iter_mut().skip(len) {
        *x = 0.0;
    }
    for i in 0..BLOCK / 8 {
        for l in 0..8 {
            lanes[l] += t[8 * i + l];
        }
    }
}

/// `Σ ln x` over blocks of positive `x`, as 8 lanes of mantissa products and exponent sums
/// (`x = m·2ᵉ`, `m ∈ [1, 2)`): integer and product work per element and one logarithm per lane
/// at the end, in place of a logarithm per element. Each lane's product is renormalised after
/// every block (8 factors below 2 each), so it never overflows; subnormal `x` count as the
/// smallest normal, as in [`ln`].
#[derive(Debug, Clone, Copy)]
pub struct LnSum {
    mant: [f32; 8],
    exp: [i32; 8],
}

impl Default for LnSum {
    fn default() -> Self {
        Self {
            mant: [1.0; 8],
            exp: [0; 8],
        }
    }
}

impl LnSum {
    /// Adds `ln x[j]` for `j < len` (the block's padding is left out).
    #[inline(always)]
    pub fn add(&mut self, x: &[f32; BLOCK], len: usize) {
        let (mut m, mut e) = ([1f32; BLOCK], [0i32; BLOCK]);
        for j in 0..BLOCK {
            (m[j], e[j]) = split(x[j].max(f32::MIN_POSITIVE));
        }
        for j in len..BLOCK {
            (m[j], e[j]) = (1.0, 0);
        }
        for i in 0..BLOCK / 8 {
            for l in 0..8 {
                self.mant[l] *= m[8 * i + l];
                self.exp[l] += e[8 * i + l];
            }
        }
        for l in 0..8 {
            let (m, e) = split(self.mant[l]);
            self.mant[l] = m;
            self.exp[l] += e;
        }
    }

    /// The sum so far.
    pub fn total(&self) -> f64 {
        (0..8)
            .map(|l| f64::from(self.exp[l]) * std::f64::consts::LN_2 + f64::from(self.mant[l]).ln())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approximations_match_f64() {
        for i in 0..40_000 {
            let x = -80.0 + i as f32 * 0.004;
            let e = (x as f64).exp();
            assert!(((exp(x) as f64 - e) / e).abs() < 2e-7, "exp({x})");
            let (sp, sig) = softplus_sigmoid(x);
            let sp64 = (x as f64).exp().ln_1p();
            let sig64 = 1.0 / (1.0 + (-x as f64).exp());
            assert!(((sp as f64 - sp64) / sp64).abs() < 3e-7, "softplus({x})");
            assert!(((sig as f64 - sig64) / sig64).abs() < 3e-7, "sigmoid({x})");
        }
        for i in 1..100_000 {
            let u = i as f32 / 100_000.0;
            let (s, c) = sincos_2pi(u);
            let a = std::f64::consts::TAU * u as f64;
            assert!((s as f64 - a.sin()).abs() < 1e-6 && (c as f64 - a.cos()).abs() < 1e-6);
            let l = (u as f64).ln();
            assert!(
                (ln(u) as f64 - l).abs() < 2e-7 * l.abs().max(1.0),
                "ln({u})"
            );
            let big = u * 1e6;
            assert!(((ln(big) as f64 - (big as f64).ln()) / (big as f64).ln()).abs() < 2e-7);
        }
    }

    #[test]
    fn ln_sum_matches_the_sum_of_f64_logarithms() {
        // 10⁵ values over 60 binades in blocks with a ragged tail, a zero and a subnormal among
        // them (counted as the smallest normal, as `ln` does).
        let n = 100_003;
        let mut x: Vec<f32> = (0..n)
            .map(|i| (((i * 7919) % 6007) as f32 / 100.0 - 30.0).exp2() * 1.37)
            .collect();
        (x[5], x[77]) = (0.0, 1e-40);
        let mut sum = LnSum::default();
        for c in x.chunks(BLOCK) {
            sum.add(&load(c, 123.0), c.len());
        }
        let want: f64 = x
            .iter()
            .map(|&v| f64::from(v.max(f32::MIN_POSITIVE)).ln())
            .sum();
        let err = (sum.total() - want).abs();
        // A rounding of 2⁻²⁴ per product, about n/8 products per lane.
        assert!(
            err < 1e-7 * n as f64,
            "Σ ln x: {} vs {want} ({err})",
            sum.total()
        );
    }
}
