//! The CPU kernels of max pooling by moments: Clark's (1961) recursion over each window's
//! entries, sorted by mean, and its backward pass for both moments at once, each one pass over the
//! `[rows, H, W]` maps read in place ([`PoolMaps`]). The composition in
//! bnn-burn's `Pool::moments` is the reference they are tested against. The fold's formulas
//! and their gradients: the book's *Fused kernels* page.

// Fixed-size block loops index several arrays at once: that is what LLVM vectorises.
#![allow(clippy::needless_range_loop)]

use crate::rectifier::{standardise, var_ratio};
use crate::simd::{BLOCK, CHUNK, Shared, load, multiversion, store};
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

/// The geometry of a max pooling over `[rows, height, width]` maps: `kernel × kernel` windows
/// every `stride` cells, without padding, the outputs `[rows, out_height, out_width]` with
/// `out = (side − kernel)/stride + 1` (cells past the last whole window are not read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolMaps {
    /// Independent maps (`samples · batch · channels`).
    pub rows: usize,
    /// Each map's height.
    pub height: usize,
    /// Each map's width.
    pub width: usize,
    /// The window's side.
    pub kernel: usize,
    /// The step between windows.
    pub stride: usize,
}

impl PoolMaps {
    /// `kernel × kernel` windows every `stride` cells over maps of shape `[rows, height, width]`.
    ///
    /// # Panics
    /// If `dims` is not three sides, or the window does not fit them.
    pub fn of(dims: &[usize], kernel: usize, stride: usize) -> Self {
        let [rows, height, width] = dims else {
            panic!("max pooling takes [rows, height, width] maps, not {dims:?}");
        };
        let maps = Self {
            rows: *rows,
            height: *height,
            width: *width,
            kernel,
            stride,
        };
        maps.assert_fits("max pooling");
        maps
    }

    /// Panics, naming `what`, unless a window of at least one cell, with a step of at least
    /// one, fits the maps.
    fn assert_fits(&self, what: &str) {
        assert!(
            self.kernel >= 1
                && self.stride >= 1
                && self.kernel <= self.height
                && self.kernel <= self.width,
            "{what}: a {k}×{k} window (stride {s}) does not fit {h}×{w} maps",
            k = self.kernel,
            s = self.stride,
            h = self.height,
            w = self.width
        );
    }

    /// The outputs' shape, `[rows, out_height, out_width]`.
    pub fn out_dims(&self) -> [usize; 3] {
        [self.rows, self.out_height(), self.out_width()]
    }

    /// Windows down a map.
    pub fn out_height(&self) -> usize {
        (self.height - self.kernel) / self.stride + 1
    }

    /// Windows across a map.
    pub fn out_width(&self) -> usize {
        (self.width - self.kernel) / self.stride + 1
    }

    /// Windows in all: the outputs' length.
    pub fn windows(&self) -> usize {
        self.rows * self.out_height() * self.out_width()
    }

    /// Cells in all: the maps' length.
    pub fn cells(&self) -> usize {
        self.rows * self.height * self.width
    }

    /// Panics, naming `what`, unless the window fits the maps and the slices have the maps' and
    /// the outputs' lengths.
    fn check(&self, what: &str, maps: &[usize], outputs: &[usize]) {
        self.assert_fits(what);
        assert!(
            maps.iter().all(|&l| l == self.cells()),
            "{what}: map slices of lengths {maps:?}, expected {}",
            self.cells()
        );
        assert!(
            outputs.iter().all(|&l| l == self.windows()),
            "{what}: per-window slices of lengths {outputs:?}, expected {}",
            self.windows()
        );
    }

    /// Each lane's window `start + j` (`j < width`) as the offset of its first cell.
    #[inline(always)]
    fn bases(&self, start: usize, width: usize) -> [usize; BLOCK] {
        let (ho, wo) = (self.out_height(), self.out_width());
        let mut base = [0usize; BLOCK];
        for (j, b) in base.iter_mut().enumerate().take(width) {
            let q = start + j;
            let (row, cell) = (q / (ho * wo), q % (ho * wo));
            let (y, x) = (cell / wo, cell % wo);
            *b = (row * self.height + y * self.stride) * self.width + x * self.stride;
        }
        base
    }

    /// The offset of a window's entry `i` (row-major in the window) from its first cell.
    #[inline(always)]
    fn entry(&self, i: usize) -> usize {
        i / self.kernel * self.width + i % self.kernel
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

    /// The windows whose first cells are `base[..width]` (`width ≤ BLOCK`), gathered from the
    /// maps and sorted by mean; idle lanes hold `N(0, 1)`.
    #[inline(always)]
    fn load_sorted(
        &mut self,
        maps: &PoolMaps,
        means: &[f32],
        vars: &[f32],
        base: &[usize; BLOCK],
        width: usize,
    ) {
        for i in 0..self.m.len() {
            let off = maps.entry(i);
            let (m, v) = (&mut self.m[i], &mut self.v[i]);
            for j in 0..BLOCK {
                (m[j], v[j]) = if j < width {
                    (means[base[j] + off], vars[base[j] + off])
                } else {
                    (0.0, 1.0)
                };
            }
            self.at[i] = [i as u32; BLOCK];
        }
        sort_lanes(&mut self.m, &mut self.v, &mut self.at);
    }
}

multiversion! {
    /// [`max_pool`] over the windows `start..start + out_mean.len()`.
    fn forward_range(maps: PoolMaps, start: usize, means: &[f32], vars: &[f32],
                     out_mean: &mut [f32], out_var: &mut [f32]) {
        let k2 = maps.kernel * maps.kernel;
        let mut lanes = Lanes::new(k2);
        for (b, om) in out_mean.chunks_mut(BLOCK).enumerate() {
            let width = om.len();
            let base = maps.bases(start + b * BLOCK, width);
            lanes.load_sorted(&maps, means, vars, &base, width);
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
    /// [`max_pool_backward`] over the maps `first..` that `dmean` and `dvar` hold (zeroed),
    /// accumulating each window's gradients in window order.
    fn backward_range(maps: PoolMaps, first: usize, x: [&[f32]; 2], grad: [&[f32]; 2],
                      dmean: &mut [f32], dvar: &mut [f32]) {
        let ([means, vars], [grad_mean, grad_var]) = (x, grad);
        let k2 = maps.kernel * maps.kernel;
        let (per_map, map_cells) = (maps.out_height() * maps.out_width(), maps.height * maps.width);
        let (start, end) = (first * per_map, (first + dmean.len() / map_cells) * per_map);
        let origin = first * map_cells;
        let mut lanes = Lanes::new(k2);
        // The running moments after each entry, then the sorted entries' gradients.
        let (mut em, mut ev) = (vec![[0f32; BLOCK]; k2], vec![[0f32; BLOCK]; k2]);
        let (mut dm, mut dv) = (vec![[0f32; BLOCK]; k2], vec![[0f32; BLOCK]; k2]);
        let mut b0 = start;
        while b0 < end {
            let w = BLOCK.min(end - b0);
            let base = maps.bases(b0, w);
            lanes.load_sorted(&maps, means, vars, &base, w);
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
            let mut ge = load(&grad_mean[b0..b0 + w], 0.0);
            let mut gv = load(&grad_var[b0..b0 + w], 0.0);
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
            // Back to each entry's cell, window by window (overlapping windows add up in
            // window order, whatever the ranges).
            for j in 0..w {
                let cell = base[j] - origin;
                for i in 0..k2 {
                    let place = cell + maps.entry(at[i][j] as usize);
                    dmean[place] += dm[i][j];
                    dvar[place] += dv[i][j];
                }
            }
            b0 += w;
        }
    }
}

/// `(out_mean, out_var)` `[rows, out_height, out_width]`: the moments of the maximum of each
/// window's independent Gaussian entries by Clark's recursion over the entries sorted by mean
/// (module docs), read from the `[rows, height, width]` maps in place.
pub fn max_pool(
    maps: PoolMaps,
    means: &[f32],
    vars: &[f32],
    out_mean: &mut [f32],
    out_var: &mut [f32],
) {
    maps.check(
        "max_pool",
        &[means.len(), vars.len()],
        &[out_mean.len(), out_var.len()],
    );
    let n = maps.windows();
    let (om, ov) = (Shared::new(out_mean), Shared::new(out_var));
    (0..n.div_ceil(CHUNK)).into_par_iter().for_each(|c| {
        let (a, b) = (c * CHUNK, ((c + 1) * CHUNK).min(n));
        // SAFETY: disjoint ranges.
        let (om, ov) = unsafe { (om.range(a, b), ov.range(a, b)) };
        forward_range(maps, a, means, vars, om, ov);
    });
}

/// `(dmean, dvar)` `[rows, height, width]`: the gradients of `Σ grad_mean·E + grad_var·Var`
/// over [`max_pool`]'s outputs, each window's entries' gradients added to their cells (0 on
/// cells no window reads). Parallel over ranges of whole maps, so no two tasks touch one cell,
/// and the sums over overlapping windows run in window order: the same bits on any number of
/// threads.
pub fn max_pool_backward(
    maps: PoolMaps,
    means: &[f32],
    vars: &[f32],
    grad_mean: &[f32],
    grad_var: &[f32],
    dmean: &mut [f32],
    dvar: &mut [f32],
) {
    maps.check(
        "max_pool_backward",
        &[means.len(), vars.len(), dmean.len(), dvar.len()],
        &[grad_mean.len(), grad_var.len()],
    );
    dmean.fill(0.0);
    dvar.fill(0.0);
    let per_map = maps.out_height() * maps.out_width();
    let maps_per_task = (CHUNK / per_map).max(1);
    let cells = maps_per_task * maps.height * maps.width;
    dmean
        .par_chunks_mut(cells)
        .zip(dvar.par_chunks_mut(cells))
        .enumerate()
        .for_each(|(t, (dm, dv))| {
            let first = t * maps_per_task;
            backward_range(maps, first, [means, vars], [grad_mean, grad_var], dm, dv);
        });
}
