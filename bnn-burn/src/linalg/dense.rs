//! Dense symmetric matrices in `f64` on the host, row-major: the Cholesky factor, the inverse and
//! the eigenvalues of a posterior precision (Laplace's `P × P` curvature of a last layer).

/// The lower Cholesky factor of the SPD `a` (`n × n`, row-major) in place; the upper triangle is
/// zeroed.
///
/// # Errors
/// The first pivot that is not positive (the matrix is not positive definite).
pub fn cholesky(a: &mut [f64], n: usize) -> Result<(), usize> {
    assert_eq!(
        a.len(),
        n * n,
        "cholesky: {} values for a {n}x{n} matrix",
        a.len()
    );
    for i in 0..n {
        for j in 0..=i {
            let (ri, rj) = (i * n, j * n);
            let s = a[ri + j] - dot(&a[ri..ri + j], &a[rj..rj + j]);
            if i == j {
                if s.is_nan() || s <= 0.0 {
                    return Err(i);
                }
                a[ri + i] = s.sqrt();
            } else {
                a[ri + j] = s / a[rj + j];
            }
        }
        a[i * n + i + 1..(i + 1) * n].fill(0.0);
    }
    Ok(())
}

/// `Σ x_i y_i` with four accumulators (the compiler vectorises it).
pub fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (xc, yc) = (x.chunks_exact(4), y.chunks_exact(4));
    let tail: f64 = xc
        .remainder()
        .iter()
        .zip(yc.remainder())
        .map(|(a, b)| a * b)
        .sum();
    for (a, b) in xc.zip(yc) {
        for k in 0..4 {
            acc[k] += a[k] * b[k];
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// `ln det(L Lᵀ) = 2 Σ ln L_ii` of a Cholesky factor.
pub fn cholesky_log_det(l: &[f64], n: usize) -> f64 {
    2.0 * (0..n).map(|i| l[i * n + i].ln()).sum::<f64>()
}

/// `L⁻¹` of a lower-triangular `L` (row-major), lower-triangular.
pub fn lower_inverse(l: &[f64], n: usize) -> Vec<f64> {
    let mut inv = vec![0.0; n * n];
    // Column j of L⁻¹ solves L x = e_j; kept transposed (row j of `t`) for contiguous dots.
    let mut t = vec![0.0; n * n];
    for j in 0..n {
        let x = &mut t[j * n..(j + 1) * n];
        x[j] = 1.0 / l[j * n + j];
        for i in j + 1..n {
            let s = dot(&l[i * n + j..i * n + i], &x[j..i]);
            x[i] = -s / l[i * n + i];
        }
    }
    for j in 0..n {
        for i in j..n {
            inv[i * n + j] = t[j * n + i];
        }
    }
    inv
}

/// `(L Lᵀ)⁻¹ = L⁻ᵀ L⁻¹` from a Cholesky factor: the covariance of a precision `L Lᵀ`.
pub fn inverse_from_cholesky(l: &[f64], n: usize) -> Vec<f64> {
    let li = lower_inverse(l, n);
    // Row-major `L⁻¹`: its column k is entries `li[r·n + k]`, r ≥ k. Transposed rows make every
    // product a contiguous dot: (L⁻ᵀL⁻¹)_{ij} = Σ_{r ≥ max(i,j)} li[r,i] li[r,j].
    let mut cols = vec![0.0; n * n];
    for r in 0..n {
        for k in 0..=r {
            cols[k * n + r] = li[r * n + k];
        }
    }
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let v = dot(&cols[i * n + i..(i + 1) * n], &cols[j * n + i..(j + 1) * n]);
            out[i * n + j] = v;
            out[j * n + i] = v;
        }
    }
    out
}

/// The eigenvalues of the symmetric `a` (`n × n`, row-major), ascending: Householder reduction
/// to tridiagonal form, then the implicit QL iteration with Wilkinson shifts (Golub & Van Loan
/// 2013, §8.3).
///
/// # Panics
/// If `a` holds NaN or an infinity.
pub fn symmetric_eigenvalues(mut a: Vec<f64>, n: usize) -> Vec<f64> {
    assert_eq!(
        a.len(),
        n * n,
        "symmetric_eigenvalues: not an {n}x{n} matrix"
    );
    assert!(
        a.iter().all(|v| v.is_finite()),
        "symmetric_eigenvalues: a non-finite entry"
    );
    let (mut d, mut e) = tridiagonalise(&mut a, n, None);
    tridiagonal_ql(&mut d, &mut e, None);
    d.sort_by(f64::total_cmp);
    d
}

/// The eigenvalues (ascending) and eigenvectors of the symmetric `a`: `(λ, V)` with `V`
/// row-major and its column `j` the unit eigenvector of `λ_j`, so `a = V diag(λ) Vᵀ`.
///
/// # Panics
/// If `a` holds NaN or an infinity.
pub fn symmetric_eigen(mut a: Vec<f64>, n: usize) -> (Vec<f64>, Vec<f64>) {
    assert_eq!(a.len(), n * n, "symmetric_eigen: not an {n}x{n} matrix");
    assert!(
        a.iter().all(|v| v.is_finite()),
        "symmetric_eigen: a non-finite entry"
    );
    let mut q = vec![0.0; n * n];
    for i in 0..n {
        q[i * n + i] = 1.0;
    }
    let (mut d, mut e) = tridiagonalise(&mut a, n, Some(&mut q));
    tridiagonal_ql(&mut d, &mut e, Some(&mut q));
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| d[i].total_cmp(&d[j]));
    let values = order.iter().map(|&i| d[i]).collect();
    let mut vectors = vec![0.0; n * n];
    for (new, &old) in order.iter().enumerate() {
        for r in 0..n {
            vectors[r * n + new] = q[r * n + old];
        }
    }
    (values, vectors)
}

/// Householder reduction of `a` to a symmetric tridiagonal matrix: its diagonal and its
/// sub-diagonal (`e[i]` couples rows `i` and `i + 1`; the last entry 0). `a` is overwritten;
/// with `q`, the reflections are applied on its right (`q ← q H_k`), so that starting from the
/// identity it ends as `Q` with `a = Q T Qᵀ`.
fn tridiagonalise(a: &mut [f64], n: usize, mut q: Option<&mut [f64]>) -> (Vec<f64>, Vec<f64>) {
    let mut e = vec![0.0; n];
    let mut v = vec![0.0; n];
    let mut p = vec![0.0; n];
    for k in 0..n.saturating_sub(2) {
        // The reflector that zeroes column k below row k + 1.
        // The column is scaled by its largest entry first: a trailing block that decays into
        // subnormal numbers would otherwise square to zero and divide to NaN.
        let col: Vec<f64> = (k + 1..n).map(|i| a[i * n + k]).collect();
        let big = col.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        if big == 0.0 {
            e[k] = 0.0;
            continue;
        }
        let m = n - k - 1;
        let v = &mut v[..m];
        for (vi, ci) in v.iter_mut().zip(&col) {
            *vi = ci / big;
        }
        let unit_alpha = dot(v, v).sqrt();
        let sign = if col[0] >= 0.0 { 1.0 } else { -1.0 };
        v[0] += sign * unit_alpha;
        let vnorm2 = dot(v, v);
        e[k] = -sign * unit_alpha * big;
        // A ← H A H on the trailing block, H = I − 2 v vᵀ / (vᵀv): with p = A v · 2/(vᵀv) and
        // w = p − v (vᵀp)/(vᵀv), A ← A − v wᵀ − w vᵀ.
        let beta = 2.0 / vnorm2;
        let p = &mut p[..m];
        for (i, pi) in p.iter_mut().enumerate() {
            let row = (k + 1 + i) * n + k + 1;
            *pi = beta * dot(&a[row..row + m], v);
        }
        let kappa = dot(v, p) * beta / 2.0;
        for (pi, vi) in p.iter_mut().zip(v.iter()) {
            *pi -= kappa * vi;
        }
        for i in 0..m {
            let row = (k + 1 + i) * n + k + 1;
            let (vi, wi) = (v[i], p[i]);
            for j in 0..m {
                a[row + j] -= vi * p[j] + wi * v[j];
            }
        }
        if let Some(q) = q.as_deref_mut() {
            for r in 0..n {
                let row = &mut q[r * n + k + 1..(r + 1) * n];
                let t = beta * dot(row, v);
                for (x, vj) in row.iter_mut().zip(v.iter()) {
                    *x -= t * vj;
                }
            }
        }
    }
    let d = (0..n).map(|i| a[i * n + i]).collect();
    if n >= 2 {
        e[n - 2] = a[(n - 1) * n + n - 2];
    }
    (d, e)
}

/// The eigenvalues of the symmetric tridiagonal matrix with diagonal `d` and sub-diagonal `e`,
/// into `d` (implicit QL with Wilkinson shifts; `e` is destroyed); with `z`, every rotation is
/// applied to its columns as well (its eigenvectors, when `z` holds the reduction's `Q`).
fn tridiagonal_ql(d: &mut [f64], e: &mut [f64], mut z: Option<&mut [f64]>) {
    let n = d.len();
    // An off-diagonal entry this small against the whole matrix is dropped (an eigenvalue error
    // of the same size), so that blocks of zeros and graded spectra converge.
    let scale = (0..n)
        .map(|i| d[i].abs() + e[i].abs())
        .fold(0.0f64, f64::max);
    let floor = f64::EPSILON * scale;
    for l in 0..n {
        let mut iterations = 0;
        loop {
            let mut m = l;
            while m + 1 < n {
                let dd = d[m].abs() + d[m + 1].abs();
                if e[m].abs() <= f64::EPSILON * dd || e[m].abs() <= floor {
                    break;
                }
                m += 1;
            }
            if m == l {
                break;
            }
            iterations += 1;
            assert!(iterations <= 200, "tridiagonal QL did not converge");
            let mut g = (d[l + 1] - d[l]) / (2.0 * e[l]);
            let mut r = g.hypot(1.0);
            g = d[m] - d[l] + e[l] / (g + r.copysign(g));
            let (mut s, mut c, mut p) = (1.0, 1.0, 0.0);
            let mut i = m;
            let mut underflow = false;
            while i > l {
                i -= 1;
                let f = s * e[i];
                let b = c * e[i];
                r = f.hypot(g);
                e[i + 1] = r;
                if r == 0.0 {
                    d[i + 1] -= p;
                    e[m] = 0.0;
                    underflow = true;
                    break;
                }
                s = f / r;
                c = g / r;
                g = d[i + 1] - p;
                r = (d[i] - g) * s + 2.0 * c * b;
                p = s * r;
                d[i + 1] = g + p;
                g = c * r - b;
                if let Some(z) = z.as_deref_mut() {
                    for k in 0..n {
                        let f = z[k * n + i + 1];
                        z[k * n + i + 1] = s * z[k * n + i] + c * f;
                        z[k * n + i] = c * z[k * n + i] - s * f;
                    }
                }
            }
            if underflow {
                continue;
            }
            d[l] -= p;
            e[l] = g;
            e[m] = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A random SPD matrix `M Mᵀ + n I` from a fixed linear congruential stream.
    fn spd(n: usize) -> Vec<f64> {
        let mut state = 12345u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let m: Vec<f64> = (0..n * n).map(|_| next()).collect();
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                a[i * n + j] = dot(&m[i * n..(i + 1) * n], &m[j * n..(j + 1) * n]);
            }
            a[i * n + i] += 0.5;
        }
        a
    }

    fn matmul(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
        let mut c = vec![0.0; n * n];
        for i in 0..n {
            for k in 0..n {
                for j in 0..n {
                    c[i * n + j] += a[i * n + k] * b[k * n + j];
                }
            }
        }
        c
    }

    #[test]
    fn cholesky_inverse_and_log_det_agree_with_the_matrix() {
        for n in [1, 2, 7, 33] {
            let a = spd(n);
            let mut l = a.clone();
            cholesky(&mut l, n).unwrap();
            let lt: Vec<f64> = (0..n * n).map(|k| l[(k % n) * n + k / n]).collect();
            let back = matmul(&l, &lt, n);
            let inv = inverse_from_cholesky(&l, n);
            let eye = matmul(&a, &inv, n);
            for i in 0..n {
                for j in 0..n {
                    assert!((back[i * n + j] - a[i * n + j]).abs() < 1e-10);
                    let want = if i == j { 1.0 } else { 0.0 };
                    assert!((eye[i * n + j] - want).abs() < 1e-9, "{n}: {i},{j}");
                }
            }
            // ln det = Σ ln λ_i.
            let eig = symmetric_eigenvalues(a, n);
            let from_eig: f64 = eig.iter().map(|v| v.ln()).sum();
            assert!((cholesky_log_det(&l, n) - from_eig).abs() < 1e-9 * n as f64);
        }
    }

    #[test]
    fn eigenvalues_of_known_matrices() {
        // diag(3, 1, 2) rotated in the (0, 1) plane: eigenvalues unchanged.
        let (c, s) = (0.6f64, 0.8f64);
        let a = vec![
            3.0 * c * c + s * s,
            (3.0 - 1.0) * c * s,
            0.0,
            (3.0 - 1.0) * c * s,
            3.0 * s * s + c * c,
            0.0,
            0.0,
            0.0,
            2.0,
        ];
        let eig = symmetric_eigenvalues(a, 3);
        for (got, want) in eig.iter().zip([1.0, 2.0, 3.0]) {
            assert!((got - want).abs() < 1e-12, "{eig:?}");
        }
        // The path graph's Laplacian-like tridiagonal 2, −1: eigenvalues 2 − 2 cos(kπ/(n+1)).
        let n = 40;
        let mut t = vec![0.0; n * n];
        for i in 0..n {
            t[i * n + i] = 2.0;
            if i + 1 < n {
                t[i * n + i + 1] = -1.0;
                t[(i + 1) * n + i] = -1.0;
            }
        }
        let eig = symmetric_eigenvalues(t, n);
        for (k, got) in eig.iter().enumerate() {
            let want = 2.0 - 2.0 * ((k + 1) as f64 * std::f64::consts::PI / (n + 1) as f64).cos();
            assert!((got - want).abs() < 1e-11, "{k}: {got} vs {want}");
        }
        // A rank-one matrix u uᵀ: one eigenvalue ‖u‖², the rest 0.
        let u = [1.0, -2.0, 0.5, 3.0, 0.0];
        let a: Vec<f64> = (0..25).map(|k| u[k / 5] * u[k % 5]).collect();
        let eig = symmetric_eigenvalues(a, 5);
        assert!((eig[4] - 14.25).abs() < 1e-12 && eig[..4].iter().all(|v| v.abs() < 1e-12));
    }

    #[test]
    fn eigenvectors_rebuild_the_matrix_and_are_orthonormal() {
        for n in [1, 2, 5, 30] {
            let a = spd(n);
            let (values, v) = symmetric_eigen(a.clone(), n);
            assert!(values.windows(2).all(|w| w[0] <= w[1]));
            let eig = symmetric_eigenvalues(a.clone(), n);
            assert!(values.iter().zip(&eig).all(|(x, y)| (x - y).abs() < 1e-10));
            for i in 0..n {
                for j in 0..n {
                    let back: f64 = (0..n)
                        .map(|k| v[i * n + k] * values[k] * v[j * n + k])
                        .sum();
                    assert!((back - a[i * n + j]).abs() < 1e-9, "{n}: {i},{j}");
                    let gram: f64 = (0..n).map(|k| v[k * n + i] * v[k * n + j]).sum();
                    let want = if i == j { 1.0 } else { 0.0 };
                    assert!((gram - want).abs() < 1e-10);
                }
            }
        }
    }

    #[test]
    fn zero_blocks_and_graded_spectra_converge() {
        // A Gram matrix of rank 2 in 40 dimensions with entries from 1e-8 to 1e4.
        let n = 40;
        let u: Vec<f64> = (0..n).map(|i| 10f64.powi(i as i32 % 7 - 3)).collect();
        let v: Vec<f64> = (0..n).map(|i| if i % 3 == 0 { 1.0 } else { 0.0 }).collect();
        let a: Vec<f64> = (0..n * n)
            .map(|k| u[k / n] * u[k % n] + v[k / n] * v[k % n])
            .collect();
        let eig = symmetric_eigenvalues(a.clone(), n);
        let trace: f64 = (0..n).map(|i| a[i * n + i]).sum();
        assert!((eig.iter().sum::<f64>() - trace).abs() < 1e-8 * trace);
        assert!(
            eig[..n - 2].iter().all(|e| e.abs() < 1e-6 * trace),
            "{eig:?}"
        );
        // Eigenvalues scale with the matrix down to subnormal squares (a reduction whose
        // trailing block decays that far once divided by zero and returned NaN).
        let n = 12;
        let a = spd(n);
        let eig = symmetric_eigenvalues(a.clone(), n);
        for tiny in [1e-150, 1e-160, 1e-200] {
            let small: Vec<f64> = a.iter().map(|x| x * tiny).collect();
            let (scaled, _) = symmetric_eigen(small, n);
            for (s, e) in scaled.iter().zip(&eig) {
                assert!(
                    (s / tiny - e).abs() < 1e-10 * e.abs(),
                    "{tiny:e}: {s:e} vs {e}"
                );
            }
        }
        let zeros = vec![0.0; 25];
        assert_eq!(symmetric_eigenvalues(zeros, 5), vec![0.0; 5]);
    }

    #[test]
    fn a_matrix_that_is_not_positive_definite_names_its_pivot() {
        let mut a = vec![1.0, 2.0, 2.0, 1.0];
        assert_eq!(cholesky(&mut a, 2), Err(1));
    }
}
