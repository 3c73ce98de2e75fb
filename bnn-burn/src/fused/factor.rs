//! The CPU kernels of the low-rank factor (Brack 2022 §3: `q(w) = N(μ, F Fᵀ + diag σ²)`,
//! `F [n, k]` row-major): its draws `F z_s` ([`factor_draws`]) and the Gram part
//! `Fᵀ diag(1/v) F` of its capacitance ([`capacitance`]), each with its backward pass.
//!
//! Each is one pass over the rows, parallel over ranges of rows. The rank is a compile-time
//! constant for `k ≤ 4` (the loops over a row unroll, and LLVM vectorises across rows), a
//! run-time one above. The Gram sums run in eight `f32` lanes per entry over blocks of rows and
//! add the blocks in `f64`.

// Fixed-size loops index several arrays at once: that is what LLVM vectorises.
#![allow(clippy::needless_range_loop)]

use super::simd::{Shared, multiversion, par_chunks};

/// Calls `$f::<K>` for the ranks `1..=4`, `$f::<0>` (the run-time rank) above.
macro_rules! by_rank {
    ($k:expr, $f:ident($($arg:expr),*)) => {
        match $k {
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            4 => $f::<4>($($arg),*),
            _ => $f::<0>($($arg),*),
        }
    };
}

/// The rank: `K`, or `k` when `K` is 0.
#[inline(always)]
fn rank<const K: usize>(k: usize) -> usize {
    if K == 0 { k } else { K }
}

#[inline(always)]
fn draws_rows<const K: usize>(f: &[f32], zs: &[f32], k: usize, out: &mut [f32]) {
    let k = rank::<K>(k);
    for (o, row) in out.iter_mut().zip(f.chunks_exact(k)) {
        let mut acc = 0.0;
        for j in 0..k {
            acc += row[j] * zs[j];
        }
        *o = acc;
    }
}

multiversion! {
    /// `out[i] = F_i · z_s` over a range of rows.
    fn draws_range(f: &[f32], zs: &[f32], k: usize, out: &mut [f32]) {
        by_rank!(k, draws_rows(f, zs, k, out))
    }
}

/// Draws of a low-rank factor `F [n, k]` for `z [S, k]`: `out[s·n + i] = Σ_j F_ij z_sj`,
/// `[S, n]` (`w_s − μ − σ⊙ε_s = F z_s`).
pub fn factor_draws(f: &[f32], z: &[f32], k: usize, out: &mut [f32]) {
    let n = f.len() / k;
    let draws = z.len() / k;
    assert_eq!(
        out.len(),
        draws * n,
        "factor_draws: output of {draws} × {n}"
    );
    let shared = Shared::new(out);
    par_chunks(n, |a, b| {
        for (s, zs) in z.chunks_exact(k).enumerate() {
            // SAFETY: ranges of rows are disjoint in every draw's row of `out`.
            let o = unsafe { shared.range(s * n + a, s * n + b) };
            draws_range(&f[a * k..b * k], zs, k, o);
        }
    });
}

#[inline(always)]
fn draws_backward_rows<const K: usize>(
    g: &[f32],
    zs: &[f32],
    k: usize,
    first: bool,
    df: &mut [f32],
) {
    let k = rank::<K>(k);
    for (row, gi) in df.chunks_exact_mut(k).zip(g) {
        for j in 0..k {
            let term = gi * zs[j];
            row[j] = if first { term } else { row[j] + term };
        }
    }
}

multiversion! {
    /// `dF_i (+)= g_si z_s` over a range of rows (`first`: written, not added).
    fn draws_backward_range(g: &[f32], zs: &[f32], k: usize, first: bool, df: &mut [f32]) {
        by_rank!(k, draws_backward_rows(g, zs, k, first, df))
    }
}

/// `dF_ij = Σ_s g[s·n + i] z_sj`, `[n, k]`: the backward pass of [`factor_draws`].
pub fn factor_draws_backward(g: &[f32], z: &[f32], k: usize, df: &mut [f32]) {
    let draws = z.len() / k;
    let n = df.len() / k;
    assert_eq!(
        g.len(),
        draws * n,
        "factor_draws_backward: gradient of {draws} × {n}"
    );
    let shared = Shared::new(df);
    par_chunks(n, |a, b| {
        // SAFETY: disjoint ranges of rows.
        let d = unsafe { shared.range(a * k, b * k) };
        for (s, zs) in z.chunks_exact(k).enumerate() {
            draws_backward_range(&g[s * n + a..s * n + b], zs, k, s == 0, d);
        }
    });
}

/// Rows per `f32` block of the Gram sums (each lane sums `GRAM_BLOCK / 8` terms).
const GRAM_BLOCK: usize = 1024;

#[inline(always)]
fn gram_rows<const K: usize>(f: &[f32], var: &[f32], k: usize, acc: &mut [f64]) {
    let k = rank::<K>(k);
    let mut lanes = vec![[0f32; 8]; k * k];
    for (rows, vars) in f.chunks(GRAM_BLOCK * k).zip(var.chunks(GRAM_BLOCK)) {
        for l in lanes.iter_mut() {
            *l = [0.0; 8];
        }
        let full = vars.len() / 8 * 8;
        for (group, vs) in rows[..full * k]
            .chunks_exact(8 * k)
            .zip(vars.chunks_exact(8))
        {
            for j in 0..k {
                for l in j..k {
                    let lane = &mut lanes[j * k + l];
                    for p in 0..8 {
                        lane[p] += group[p * k + j] * group[p * k + l] / vs[p];
                    }
                }
            }
        }
        for (row, v) in rows[full * k..].chunks_exact(k).zip(&vars[full..]) {
            for j in 0..k {
                for l in j..k {
                    lanes[j * k + l][0] += row[j] * row[l] / v;
                }
            }
        }
        for (a, lane) in acc.iter_mut().zip(&lanes) {
            *a += lane.iter().map(|&x| f64::from(x)).sum::<f64>();
        }
    }
}

multiversion! {
    /// The upper triangle of `Σ_i F_i F_iᵀ / v_i` over a range of rows, added to `acc`.
    fn gram_range(f: &[f32], var: &[f32], k: usize, acc: &mut [f64]) {
        by_rank!(k, gram_rows(f, var, k, acc))
    }
}

/// The Gram part of a low-rank capacitance, `G = Fᵀ diag(1/v) F` (`[k, k]`, row-major), for
/// `F [n, k]` and variances `v [n]`: one pass over the rows.
pub fn capacitance(f: &[f32], var: &[f32], k: usize) -> Vec<f32> {
    let n = var.len();
    assert_eq!(f.len(), n * k, "capacitance: a factor of {n} × {k}");
    let partials = par_chunks(n, |a, b| {
        let mut acc = vec![0f64; k * k];
        gram_range(&f[a * k..b * k], &var[a..b], k, &mut acc);
        acc
    });
    let mut gram = vec![0f32; k * k];
    for j in 0..k {
        for l in j..k {
            let total: f64 = partials.iter().map(|p| p[j * k + l]).sum();
            gram[j * k + l] = total as f32;
            gram[l * k + j] = total as f32;
        }
    }
    gram
}

#[inline(always)]
fn gram_backward_rows<const K: usize>(
    f: &[f32],
    var: &[f32],
    m: &[f32],
    k: usize,
    df: &mut [f32],
    dvar: &mut [f32],
) {
    let k = rank::<K>(k);
    let rows = f.chunks_exact(k).zip(df.chunks_exact_mut(k));
    for ((row, d), (v, dv)) in rows.zip(var.iter().zip(dvar)) {
        let inv = 1.0 / v;
        let mut dot = 0.0;
        for l in 0..k {
            let mut dl = 0.0;
            for j in 0..k {
                dl += row[j] * m[j * k + l];
            }
            let dl = dl * inv;
            d[l] = dl;
            dot += row[l] * dl;
        }
        *dv = -0.5 * dot * inv;
    }
}

multiversion! {
    /// `dF_i = F_i M / v_i`, `dv_i = −½ F_i·dF_i / v_i` over a range of rows.
    fn gram_backward_range(f: &[f32], var: &[f32], m: &[f32], k: usize, df: &mut [f32],
                           dvar: &mut [f32]) {
        by_rank!(k, gram_backward_rows(f, var, m, k, df, dvar))
    }
}

/// The backward pass of [`capacitance`] for `dG` (`[k, k]`): with `M = dG + dGᵀ`,
/// `dF_i = F_i M / v_i` and `dv_i = −½ (F_i · dF_i) / v_i`.
pub fn capacitance_backward(
    f: &[f32],
    var: &[f32],
    dgram: &[f32],
    k: usize,
    df: &mut [f32],
    dvar: &mut [f32],
) {
    let m: Vec<f32> = (0..k * k)
        .map(|jl| dgram[jl] + dgram[(jl % k) * k + jl / k])
        .collect();
    let (sf, sv) = (Shared::new(df), Shared::new(dvar));
    par_chunks(var.len(), |a, b| {
        // SAFETY: disjoint ranges of rows.
        let (df, dv) = unsafe { (sf.range(a * k, b * k), sv.range(a, b)) };
        gram_backward_range(&f[a * k..b * k], &var[a..b], &m, k, df, dv);
    });
}
