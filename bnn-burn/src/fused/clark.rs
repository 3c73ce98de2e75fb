//! The CPU kernels of max pooling by moments: Clark's (1961) recursion over each window's
//! entries, sorted by mean, and its backward pass, each one pass over `f32` slices (vectorised
//! over blocks of windows, parallel over 16 Ki-window ranges). The composition of burn ops in
//! [`crate::layers::Pool::moments`] (an argsort, a gather, then some forty ops per entry, and as
//! many again backward) is the reference they are tested against.
//!
//! The windows come entry-major, `[k², n]`: entry `i` of window `j` at `i·n + j`. Per window
//! the entries are sorted by ascending mean (a stable odd–even transposition sort: ties keep
//! their order), then folded, `M ← max(E_i, M)`, by [`max_moments`](crate::layers::max_moments)'s
//! formulas: with `d = μ_A − μ_B`, `s = √(max(v_A + v_B, 0) + 10⁻⁸)`, `a = d/s`,
//! `E = μ_B + dΦ(a) + sφ(a)`, `Var = max(0, v_B + s²·max(g(a), 0) − 2v_BΦ(a))` (`g` as the
//! rectifier's, [`super::rectifier`]).
//!
//! **Backward.** The pass recomputes the fold, keeping the running moments, and walks it back.
//! With `r = dΦ + sφ` and output gradients `(ḡ_E, ḡ_V)` (`ḡ_V = 0` where the clamp bit):
//! `ḡ_d = ḡ_EΦ + ḡ_V(2rΦ̄ − 2v_Bφ/s)`, `ḡ_s = ḡ_Eφ + ḡ_V(2(sΦ − rφ) + 2v_Bφa/s)`,
//! `ḡ_{v_A} = ḡ_s/(2s)` (0 for a negative `v_A + v_B`), and then
//! `∂/∂μ_A = ḡ_d`, `∂/∂μ_B = ḡ_E − ḡ_d`, `∂/∂v_B = ḡ_{v_A} + ḡ_V(1 − 2Φ)`. The gradients go
//! back to each entry's place in the window, so no sort or scatter is left to autodiff.

// Fixed-size block loops index several arrays at once: that is what LLVM vectorises.
#![allow(clippy::needless_range_loop)]

use super::rectifier::{RectifierOutput, standardise, var_ratio};
use super::simd::{BLOCK, CHUNK, Shared, load, multiversion, store};
use rayon::prelude::*;

/// `(E, Var)` of `max(A, B)` for independent Gaussians (module docs).
#[inline(always)]
fn step(ma: f32, va: f32, mb: f32, vb: f32) -> (f32, f32) {
    let d = ma - mb;
    let (s, a, c, q, p) = standardise(d, va + vb);
    let var = vb + s * s * var_ratio(a, c, q, p) - 2.0 * vb * c;
    (mb + d * c + s * p, var.max(0.0))
}

/// `(∂/∂μ_A, ∂/∂v_A, ∂/∂μ_B, ∂/∂v_B)` of `ge·E + gv·Var` of [`step`].
#[inline(always)]
fn step_backward(ma: f32, va: f32, mb: f32, vb: f32, ge: f32, gv: f32) -> (f32, f32, f32, f32) {
    let (d, sum) = (ma - mb, va + vb);
    let (s, a, c, q, p) = standardise(d, sum);
    let r = d * c + s * p;
    // The output clamp `max(0, ·)` passes its gradient where its input is not below 0.
    let raw = vb + s * s * var_ratio(a, c, q, p) - 2.0 * vb * c;
    let gv = if raw >= 0.0 { gv } else { 0.0 };
    let gd = ge * c + gv * (2.0 * r * q - 2.0 * vb * p / s);
    let gs = ge * p + gv * (2.0 * (s * c - r * p) + 2.0 * vb * p * a / s);
    // s = √(max(v_A + v_B, 0) + ε): no gradient to a negative sum.
    let gsum = if sum >= 0.0 { gs * 0.5 / s } else { 0.0 };
    (gd, gsum, ge - gd, gsum + gv * (1.0 - 2.0 * c))
}

/// Sorts each lane's entries by ascending mean, carrying the variances and the entries' places:
/// an odd–even transposition sort (`k²` rounds of compare-exchanges of neighbours, stable).
#[inline(always)]
fn sort_lanes(m: &mut [[f32; BLOCK]], v: &mut [[f32; BLOCK]], at: &mut [[u32; BLOCK]]) {
    let k2 = m.len();
    for round in 0..k2 {
        let mut i = round % 2;
        while i + 1 < k2 {
            let (ml, mr) = m.split_at_mut(i + 1);
            let (vl, vr) = v.split_at_mut(i + 1);
            let (al, ar) = at.split_at_mut(i + 1);
            let (m0, m1, v0, v1, a0, a1) = (
                &mut ml[i], &mut mr[0], &mut vl[i], &mut vr[0], &mut al[i], &mut ar[0],
            );
            for j in 0..BLOCK {
                let swap = m0[j] > m1[j];
                let (x, y) = (m0[j], m1[j]);
                (m0[j], m1[j]) = if swap { (y, x) } else { (x, y) };
                let (x, y) = (v0[j], v1[j]);
                (v0[j], v1[j]) = if swap { (y, x) } else { (x, y) };
                let (x, y) = (a0[j], a1[j]);
                (a0[j], a1[j]) = if swap { (y, x) } else { (x, y) };
            }
            i += 2;
        }
    }
}

/// One block of windows, one lane each: every entry's mean and variance and its place in the
/// window.
struct Lanes {
    m: Vec<[f32; BLOCK]>,
    v: Vec<[f32; BLOCK]>,
    at: Vec<[u32; BLOCK]>,
}

impl Lanes {
    fn new(k2: usize) -> Self {
        Self {
            m: vec![[0f32; BLOCK]; k2],
            v: vec![[0f32; BLOCK]; k2],
            at: vec![[0u32; BLOCK]; k2],
        }
    }

    /// The windows `start..start + width` (`width ≤ BLOCK`) of entry-major `[k², n]` slices,
    /// sorted by mean.
    #[inline(always)]
    fn load_sorted(&mut self, means: &[f32], vars: &[f32], n: usize, start: usize, width: usize) {
        for i in 0..self.m.len() {
            let row = i * n + start;
            self.m[i] = load(&means[row..row + width], 0.0);
            self.v[i] = load(&vars[row..row + width], 1.0);
            self.at[i] = [i as u32; BLOCK];
        }
        sort_lanes(&mut self.m, &mut self.v, &mut self.at);
    }
}

multiversion! {
    /// [`max_windows`] over the windows `start..start + out_mean.len()`.
    fn forward_range(n: usize, start: usize, means: &[f32], vars: &[f32], out_mean: &mut [f32],
                     out_var: &mut [f32]) {
        let k2 = means.len() / n;
        let mut lanes = Lanes::new(k2);
        for (b, om) in out_mean.chunks_mut(BLOCK).enumerate() {
            let width = om.len();
            lanes.load_sorted(means, vars, n, start + b * BLOCK, width);
            let (m, v) = (&lanes.m, &lanes.v);
            let (mut em, mut ev) = (m[0], v[0]);
            for i in 1..k2 {
                for j in 0..BLOCK {
                    (em[j], ev[j]) = step(m[i][j], v[i][j], em[j], ev[j]);
                }
            }
            store(om, &em);
            store(&mut out_var[b * BLOCK..b * BLOCK + width], &ev);
        }
    }
}

multiversion! {
    /// [`max_windows_backward`] over the windows `start..start + width`.
    fn backward_range(n: usize, start: usize, width: usize, output: RectifierOutput,
                      means: &[f32], vars: &[f32], grad: &[f32], dmean: Shared, dvar: Shared) {
        let k2 = means.len() / n;
        let mut lanes = Lanes::new(k2);
        // The running moments after each entry, then the sorted entries' gradients.
        let (mut em, mut ev) = (vec![[0f32; BLOCK]; k2], vec![[0f32; BLOCK]; k2]);
        let (mut dm, mut dv) = (vec![[0f32; BLOCK]; k2], vec![[0f32; BLOCK]; k2]);
        let (mut om, mut ov) = (vec![[0f32; BLOCK]; k2], vec![[0f32; BLOCK]; k2]);
        let mut b0 = 0;
        while b0 < width {
            let w = BLOCK.min(width - b0);
            lanes.load_sorted(means, vars, n, start + b0, w);
            let (m, v, at) = (&lanes.m, &lanes.v, &lanes.at);
            (em[0], ev[0]) = (m[0], v[0]);
            for i in 1..k2 {
                let (mut ei, mut vi) = ([0f32; BLOCK], [0f32; BLOCK]);
                let (ma, va, mb, vb) = (&m[i], &v[i], &em[i - 1], &ev[i - 1]);
                for j in 0..BLOCK {
                    (ei[j], vi[j]) = step(ma[j], va[j], mb[j], vb[j]);
                }
                (em[i], ev[i]) = (ei, vi);
            }
            let g = load(&grad[start + b0..start + b0 + w], 0.0);
            let (mut ge, mut gv) = match output {
                RectifierOutput::Mean => (g, [0f32; BLOCK]),
                RectifierOutput::Var => ([0f32; BLOCK], g),
            };
            for i in (1..k2).rev() {
                let (mut da, mut dva) = ([0f32; BLOCK], [0f32; BLOCK]);
                let (ma, va, mb, vb) = (&m[i], &v[i], &em[i - 1], &ev[i - 1]);
                for j in 0..BLOCK {
                    (da[j], dva[j], ge[j], gv[j]) =
                        step_backward(ma[j], va[j], mb[j], vb[j], ge[j], gv[j]);
                }
                (dm[i], dv[i]) = (da, dva);
            }
            (dm[0], dv[0]) = (ge, gv);
            // Back to each entry's place in its window.
            for i in 0..k2 {
                for j in 0..w {
                    let place = at[i][j] as usize;
                    om[place][j] = dm[i][j];
                    ov[place][j] = dv[i][j];
                }
            }
            for i in 0..k2 {
                let row = i * n + start + b0;
                // SAFETY: the ranges of parallel calls are disjoint windows (of every row).
                let (rm, rv) = unsafe { (dmean.range(row, row + w), dvar.range(row, row + w)) };
                store(rm, &om[i]);
                store(rv, &ov[i]);
            }
            b0 += w;
        }
    }
}

/// Checks the windows' shapes: `[k², n]` inputs and `[n]` per-window slices (no windows: no
/// entries).
fn check(what: &str, entries: usize, windows: usize, lens: &[usize]) {
    let fills = if windows == 0 {
        entries == 0
    } else {
        entries > 0 && entries.is_multiple_of(windows)
    };
    assert!(
        fills,
        "{what}: {entries} entries do not fill {windows} windows"
    );
    assert!(
        lens.iter().all(|&l| l == windows),
        "{what}: per-window slices of lengths {lens:?}, expected {windows}"
    );
}

/// `(out_mean, out_var)`: the moments of the maximum of each window's independent Gaussian
/// entries by Clark's recursion over the entries sorted by mean (module docs); `means`, `vars`
/// are entry-major `[k², n]`, the outputs `[n]`.
pub fn max_windows(means: &[f32], vars: &[f32], out_mean: &mut [f32], out_var: &mut [f32]) {
    let n = out_mean.len();
    check("max_windows", means.len(), n, &[out_var.len()]);
    assert_eq!(
        means.len(),
        vars.len(),
        "max_windows: means and variances differ in length"
    );
    let (om, ov) = (Shared::new(out_mean), Shared::new(out_var));
    (0..n.div_ceil(CHUNK)).into_par_iter().for_each(|c| {
        let (a, b) = (c * CHUNK, ((c + 1) * CHUNK).min(n));
        // SAFETY: disjoint ranges.
        let (om, ov) = unsafe { (om.range(a, b), ov.range(a, b)) };
        forward_range(n, a, means, vars, om, ov);
    });
}

/// `(dmean, dvar) = grad·∂output/∂(means, vars)` of [`max_windows`]'s `output`, entry-major
/// `[k², n]` as its inputs.
pub fn max_windows_backward(
    output: RectifierOutput,
    means: &[f32],
    vars: &[f32],
    grad: &[f32],
    dmean: &mut [f32],
    dvar: &mut [f32],
) {
    let n = grad.len();
    check("max_windows_backward", means.len(), n, &[]);
    assert!(
        [vars.len(), dmean.len(), dvar.len()]
            .iter()
            .all(|&l| l == means.len()),
        "max_windows_backward: slices of different lengths"
    );
    let (dm, dv) = (Shared::new(dmean), Shared::new(dvar));
    (0..n.div_ceil(CHUNK)).into_par_iter().for_each(|c| {
        let (a, b) = (c * CHUNK, ((c + 1) * CHUNK).min(n));
        backward_range(n, a, b - a, output, means, vars, grad, dm, dv);
    });
}
