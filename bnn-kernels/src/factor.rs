//! The CPU kernels of the low-rank factor (Brack 2022 §3, `q(w) = N(μ, F Fᵀ + diag σ²)`): its
//! draws `F z_s`, added in place to the diagonal's ([`add_factor_draws`]), and its share of the
//! KL, `½ Σ_i ‖F_i‖²/σ₀ᵢ² − ½ ln det(I + Fᵀ diag(1/v) F)` ([`factor_kl`]), each one pass over the
//! rows with its backward pass; the `k × k` Cholesky runs on the host. More: the book's *Fused
//! kernels* page.

// Fixed-size loops index several arrays at once: that is what LLVM vectorises.
#![allow(clippy::needless_range_loop)]

use crate::elementwise::{SigmaRule, Sigmas};
use crate::simd::{BLOCK, Shared, load, multiversion, par_chunks, store};

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
        *o += acc;
    }
}

multiversion! {
    /// `out[i] += F_i · z_s` over a range of rows.
    fn draws_range(f: &[f32], zs: &[f32], k: usize, out: &mut [f32]) {
        by_rank!(k, draws_rows(f, zs, k, out))
    }
}

/// Draws of a low-rank factor `F [n, k]` for `z [S, k]` added to `out` (`[S, n]`, the
/// diagonal's draws `μ + σ⊙ε_s`): `out[s·n + i] += Σ_j F_ij z_sj`, so that `out` holds
/// `w_s = μ + σ⊙ε_s + F z_s`.
pub fn add_factor_draws(f: &[f32], z: &[f32], k: usize, out: &mut [f32]) {
    let n = f.len() / k;
    let draws = z.len() / k;
    assert_eq!(
        out.len(),
        draws * n,
        "add_factor_draws: output of {draws} × {n}"
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

/// `dF_ij = Σ_s g[s·n + i] z_sj`, `[n, k]`: the factor's part of the backward pass of
/// [`add_factor_draws`] (the base's gradient is `g` itself).
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
fn gram_rows<const K: usize>(f: &[f32], var: &[f32], prec: &[f32], k: usize, acc: &mut [f64]) {
    let k = rank::<K>(k);
    // The upper triangle of `Σ F_i F_iᵀ / v_i` at `j·k + l`, `Σ p_i ‖F_i‖²` at `k·k`.
    let mut lanes = vec![[0f32; 8]; k * k + 1];
    let blocks = f
        .chunks(GRAM_BLOCK * k)
        .zip(var.chunks(GRAM_BLOCK).zip(prec.chunks(GRAM_BLOCK)));
    for (rows, (vars, precs)) in blocks {
        for l in lanes.iter_mut() {
            *l = [0.0; 8];
        }
        let full = vars.len() / 8 * 8;
        let groups = rows[..full * k]
            .chunks_exact(8 * k)
            .zip(vars.chunks_exact(8).zip(precs.chunks_exact(8)));
        for (group, (vs, ps)) in groups {
            let mut inv = [0f32; 8];
            for p in 0..8 {
                inv[p] = 1.0 / vs[p];
            }
            for j in 0..k {
                for l in j..k {
                    let lane = &mut lanes[j * k + l];
                    for p in 0..8 {
                        lane[p] += group[p * k + j] * group[p * k + l] * inv[p];
                    }
                }
                let lane = &mut lanes[k * k];
                for p in 0..8 {
                    lane[p] += group[p * k + j] * group[p * k + j] * ps[p];
                }
            }
        }
        let tail = rows[full * k..].chunks_exact(k).zip(&vars[full..]);
        for ((row, v), p) in tail.zip(&precs[full..]) {
            for j in 0..k {
                for l in j..k {
                    lanes[j * k + l][0] += row[j] * row[l] / v;
                }
                lanes[k * k][0] += row[j] * row[j] * p;
            }
        }
        for (a, lane) in acc.iter_mut().zip(&lanes) {
            *a += lane.iter().map(|&x| f64::from(x)).sum::<f64>();
        }
    }
}

multiversion! {
    /// The upper triangle of `Σ_i F_i F_iᵀ / v_i` and `Σ_i p_i ‖F_i‖²` over a range of rows,
    /// added to `acc` (`k·k + 1` entries).
    fn gram_range(f: &[f32], var: &[f32], prec: &[f32], k: usize, acc: &mut [f64]) {
        by_rank!(k, gram_rows(f, var, prec, k, acc))
    }
}

/// Rows per sub-range whose variances (and prior precisions) [`factor_kl`] and
/// [`factor_kl_backward`] compute into buffers (16 KiB each, in L1) before their pass over the
/// factor's rows.
const SUB: usize = 4096;

multiversion! {
    /// The prior's precisions `p_i = 1/σ₀ᵢ²` of a range of its standard deviations.
    fn precisions_range(std: &[f32], prec: &mut [f32]) {
        for (p, s) in prec.iter_mut().zip(std) {
            *p = 1.0 / (s * s);
        }
    }
}

/// The buffer of a sub-range's prior precisions: `1/σ₀ᵢ²` of `prior_std[range]` written into
/// `buf`, or `buf` as it is (ones, as the callers allocate it) when the prior's variance is one
/// for all rows (`x·1` is exact: the scalar prior's sums are those of an unweighted norm).
fn precisions<'a>(
    prior_std: Option<&[f32]>,
    range: std::ops::Range<usize>,
    buf: &'a mut [f32],
) -> &'a [f32] {
    let buf = &mut buf[..range.len()];
    if let Some(std) = prior_std {
        precisions_range(&std[range], buf);
    }
    buf
}

multiversion! {
    /// `v = σ(ρ)²` and, when given, `dv/dρ = 2σ·dσ/dρ` over a range, `σ` by `rule`.
    fn variances_range(rho: &[f32], rule: SigmaRule, var: &mut [f32], dvar: Option<&mut [f32]>) {
        let mut dvar = dvar;
        for (b, rc) in rho.chunks(BLOCK).enumerate() {
            let range = b * BLOCK..b * BLOCK + rc.len();
            let Sigmas { sigma, dsigma, .. } = rule.sigmas(&load(rc, 1.0), false);
            let (mut v, mut d) = ([0f32; BLOCK], [0f32; BLOCK]);
            for j in 0..BLOCK {
                v[j] = sigma[j] * sigma[j];
                d[j] = 2.0 * sigma[j] * dsigma[j];
            }
            store(&mut var[range.clone()], &v);
            if let Some(out) = dvar.as_deref_mut() {
                store(&mut out[range], &d);
            }
        }
    }
}

/// `(G, Σ_i p_i ‖F_i‖²)`: the Gram part `G = Fᵀ diag(1/v) F` (`[k, k]`, row-major, both
/// triangles) of a low-rank capacitance and the factor's squared Frobenius norm, its rows
/// weighted by the prior's precisions `p_i = 1/σ₀ᵢ²` of `prior_std` (`[n]`; `None`: `p_i = 1`),
/// for `F [n, k]` and the variances `v = σ(ρ)²` of `ρ [n]` (`σ` by `rule`): one pass over the
/// rows.
pub fn gram(
    f: &[f32],
    rho: &[f32],
    rule: SigmaRule,
    k: usize,
    prior_std: Option<&[f32]>,
) -> (Vec<f64>, f64) {
    let n = rho.len();
    assert_eq!(f.len(), n * k, "gram: a factor of {n} × {k}");
    if let Some(std) = prior_std {
        assert_eq!(std.len(), n, "gram: a prior of {} rows for {n}", std.len());
    }
    let partials = par_chunks(n, |a, b| {
        let mut acc = vec![0f64; k * k + 1];
        let (mut var, mut prec) = (vec![0f32; SUB.min(b - a)], vec![1f32; SUB.min(b - a)]);
        for start in (a..b).step_by(SUB) {
            let end = (start + SUB).min(b);
            let v = &mut var[..end - start];
            variances_range(&rho[start..end], rule, v, None);
            let p = precisions(prior_std, start..end, &mut prec);
            gram_range(&f[start * k..end * k], v, p, k, &mut acc);
        }
        acc
    });
    let total = |jl: usize| partials.iter().map(|p| p[jl]).sum::<f64>();
    let mut g = vec![0f64; k * k];
    for j in 0..k {
        for l in j..k {
            let t = total(j * k + l);
            g[j * k + l] = t;
            g[l * k + j] = t;
        }
    }
    (g, total(k * k))
}

/// `(ln det A, A⁻¹)` of the capacitance `A = I + c²G` (`[k, k]`, row-major) by its Cholesky
/// factor, in `f64` on the host. A pivot that is not positive (a `NaN` in `G`) gives a `NaN`
/// log-determinant, which the training loop refuses.
pub fn capacitance_solve(g: &[f64], k: usize, c2: f64) -> (f64, Vec<f64>) {
    // A = L Lᵀ, L lower triangular, row-major.
    let mut l = vec![0f64; k * k];
    let mut log_det = 0.0;
    for j in 0..k {
        for i in j..k {
            let a = f64::from(u8::from(i == j)) + c2 * g[i * k + j];
            let s = a - (0..j).map(|p| l[i * k + p] * l[j * k + p]).sum::<f64>();
            if i == j {
                if s.is_nan() || s <= 0.0 {
                    return (f64::NAN, vec![f64::NAN; k * k]);
                }
                l[j * k + j] = s.sqrt();
                log_det += 2.0 * l[j * k + j].ln();
            } else {
                l[i * k + j] = s / l[j * k + j];
            }
        }
    }
    // A⁻¹ = L⁻ᵀ L⁻¹: the columns of L⁻¹ by forward substitution, then the products.
    let mut inv_l = vec![0f64; k * k];
    for c in 0..k {
        for i in c..k {
            let rhs = f64::from(u8::from(i == c));
            let s = rhs - (c..i).map(|p| l[i * k + p] * inv_l[p * k + c]).sum::<f64>();
            inv_l[i * k + c] = s / l[i * k + i];
        }
    }
    let mut inv = vec![0f64; k * k];
    for i in 0..k {
        for j in 0..k {
            inv[i * k + j] = (i.max(j)..k)
                .map(|p| inv_l[p * k + i] * inv_l[p * k + j])
                .sum();
        }
    }
    (log_det, inv)
}

/// The factor's share of a low-rank Gaussian's KL from a diagonal Gaussian prior:
/// `½c² λ Σ_i ‖F_i‖²/σ₀ᵢ² − ½ ln det(I + c² Fᵀ diag(1/v) F)` for the stored factor `F [n, k]`
/// (the factor is `c·F`), `v = σ(ρ)²`, `λ = inv_prior_var` and the prior's standard deviation
/// per row `prior_std` (`None`: `σ₀ᵢ = 1`, so that a scalar prior passes `λ = 1/σ₀²`).
#[derive(Debug, Clone, Copy)]
pub struct FactorKl<'a> {
    /// `F`, `[n, k]` row-major.
    pub f: &'a [f32],
    /// The diagonal's `ρ`, `[n]`.
    pub rho: &'a [f32],
    /// `σ(ρ)`.
    pub rule: SigmaRule,
    /// The rank.
    pub k: usize,
    /// `c`.
    pub scale: f64,
    /// `λ`.
    pub inv_prior_var: f64,
    /// `σ₀ᵢ` per row (`[n]`).
    pub prior_std: Option<&'a [f32]>,
}

/// The [`FactorKl`] and what its backward pass keeps, `A⁻¹` (`[k, k]`) for
/// [`factor_kl_backward`].
pub fn factor_kl(kl: &FactorKl) -> (f64, Vec<f32>) {
    let c2 = kl.scale * kl.scale;
    let (g, sum_sq) = gram(kl.f, kl.rho, kl.rule, kl.k, kl.prior_std);
    let (log_det, inv) = capacitance_solve(&g, kl.k, c2);
    let value = 0.5 * c2 * kl.inv_prior_var * sum_sq - 0.5 * log_det;
    (value, inv.into_iter().map(|x| x as f32).collect())
}

/// What [`factor_kl_backward`]'s rows share: `[a, b, h]` and `A⁻¹` of rank `k`.
#[derive(Clone, Copy)]
struct RowCoefficients<'a> {
    coeffs: [f32; 3],
    inv: &'a [f32],
    k: usize,
}

#[inline(always)]
fn factor_kl_backward_rows<const K: usize>(
    f: &[f32],
    var: &[f32],
    prec: &[f32],
    c: RowCoefficients,
    df: &mut [f32],
    dvar: &mut [f32],
) {
    let (k, inv) = (rank::<K>(c.k), c.inv);
    let [a, b, h] = c.coeffs;
    let rows = f.chunks_exact(k).zip(df.chunks_exact_mut(k));
    let terms = var.iter().zip(prec).zip(dvar);
    for ((row, d), ((v, p), dv)) in rows.zip(terms) {
        let (r, ap) = (1.0 / v, a * p);
        let mut quad = 0.0;
        for l in 0..k {
            let mut fb = 0.0;
            for j in 0..k {
                fb += row[j] * inv[j * k + l];
            }
            quad += row[l] * fb;
            d[l] = ap * row[l] - b * fb * r;
        }
        *dv = h * quad * r * r;
    }
}

multiversion! {
    /// `dF_i = a p_i F_i − b (F_i A⁻¹)/v_i` and `dv_i = h (F_i A⁻¹ F_iᵀ)/v_i²` over a range of
    /// rows, `coeffs = [a, b, h]`, `p_i` the prior's precisions.
    fn factor_kl_backward_range(f: &[f32], var: &[f32], prec: &[f32], c: RowCoefficients,
                                df: &mut [f32], dvar: &mut [f32]) {
        by_rank!(c.k, factor_kl_backward_rows(f, var, prec, c, df, dvar))
    }
}

/// The backward pass of [`factor_kl`] for the upstream gradient `g`, with its `inv = A⁻¹`:
/// `dF_i = g c² (λ F_i/σ₀ᵢ² − F_i A⁻¹ / v_i)` and
/// `dρ_i = ½ g c² (F_i A⁻¹ F_iᵀ) / v_i² · dv_i/dρ_i`.
pub fn factor_kl_backward(kl: &FactorKl, inv: &[f32], g: f64, df: &mut [f32], drho: &mut [f32]) {
    let FactorKl {
        f, rho, rule, k, ..
    } = *kl;
    let gc2 = g * kl.scale * kl.scale;
    let c = RowCoefficients {
        coeffs: [
            (gc2 * kl.inv_prior_var) as f32,
            gc2 as f32,
            (0.5 * gc2) as f32,
        ],
        inv,
        k,
    };
    let (sf, sr) = (Shared::new(df), Shared::new(drho));
    par_chunks(rho.len(), |a, b| {
        let sub = SUB.min(b - a);
        let (mut var, mut dvar, mut prec) = (vec![0f32; sub], vec![0f32; sub], vec![1f32; sub]);
        for start in (a..b).step_by(SUB) {
            let end = (start + SUB).min(b);
            let (v, dv) = (&mut var[..end - start], &mut dvar[..end - start]);
            // SAFETY: disjoint ranges of rows.
            let (df, dr) = unsafe { (sf.range(start * k, end * k), sr.range(start, end)) };
            variances_range(&rho[start..end], rule, v, Some(dr));
            let p = precisions(kl.prior_std, start..end, &mut prec);
            factor_kl_backward_range(&f[start * k..end * k], v, p, c, df, dv);
            scale_range(dr, dv);
        }
    });
}

multiversion! {
    /// `d_i ← d_i · x_i` over a range.
    fn scale_range(d: &mut [f32], x: &[f32]) {
        for (d, x) in d.iter_mut().zip(x) {
            *d *= x;
        }
    }
}
