//! Dense linear algebra on small symmetric positive-definite matrices, from differentiable burn
//! ops: the `k × k` capacitance matrices of low-rank Gaussians (`k` is a rank, a handful).
//! Cost is `O(k)` tensor operations per factorisation, independent of the weight count.

pub mod dense;

use burn::tensor::{Int, Tensor};

/// `[k, 1]` column with ones in rows `>= j`.
fn lower_mask(k: usize, j: usize, device: &burn::tensor::Device) -> Tensor<2> {
    Tensor::<1, Int>::arange(0..k as i64, device)
        .greater_equal_elem(j as i64)
        .float()
        .reshape([k, 1])
}

/// The lower Cholesky factor `L` of an SPD `a [k, k]` (`a = L Lᵀ`), column by column:
/// `L[:, j] = (a[:, j] − L[:, :j] L[j, :j]ᵀ) / √(·)_jj`, rows above `j` zero.
pub fn cholesky(a: Tensor<2>) -> Tensor<2> {
    let [k, k2] = a.dims();
    assert_eq!(k, k2, "cholesky: a {k}x{k2} matrix is not square");
    let device = a.device();
    let mut columns: Vec<Tensor<2>> = Vec::with_capacity(k);
    for j in 0..k {
        let mut v = a.clone().slice([0..k, j..j + 1]);
        if j > 0 {
            let l = Tensor::cat(columns.clone(), 1);
            let lj = l.clone().slice([j..j + 1, 0..j]);
            v = v - l.matmul(lj.transpose());
        }
        let d = v.clone().slice([j..j + 1, 0..1]).sqrt();
        columns.push(v / d * lower_mask(k, j, &device));
    }
    Tensor::cat(columns, 1)
}

/// `ln det(L Lᵀ) = 2 Σ ln L_jj` from a Cholesky factor (one element).
pub fn cholesky_log_det(l: Tensor<2>) -> Tensor<1> {
    let [k, _] = l.dims();
    let eye = Tensor::<2>::eye(k, &l.device());
    let diag = (l * eye).sum_dim(1);
    diag.log().sum() * 2.0
}

/// `L⁻¹ b` for lower-triangular `L [k, k]` and `b [k, n]` (forward substitution), `[k, n]`.
pub fn solve_lower(l: Tensor<2>, b: Tensor<2>) -> Tensor<2> {
    let [k, n] = b.dims();
    let mut rows: Vec<Tensor<2>> = Vec::with_capacity(k);
    for j in 0..k {
        let mut r = b.clone().slice([j..j + 1, 0..n]);
        if j > 0 {
            let lj = l.clone().slice([j..j + 1, 0..j]);
            r = r - lj.matmul(Tensor::cat(rows.clone(), 0));
        }
        rows.push(r / l.clone().slice([j..j + 1, j..j + 1]));
    }
    Tensor::cat(rows, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{test_device, to_vec};

    #[test]
    fn factor_log_det_and_solve_match_host_arithmetic() {
        let device = test_device();
        // a = B Bᵀ + I for a fixed B: SPD, 3×3.
        let b = [[1.0, 0.5, -0.3], [0.2, 1.5, 0.7], [-0.4, 0.1, 0.9]];
        let mut a = [[0.0f64; 3]; 3];
        for i in 0..3 {
            for j in 0..3 {
                a[i][j] = (0..3).map(|m| b[i][m] * b[j][m]).sum::<f64>() + f64::from(i == j);
            }
        }
        let at = Tensor::<1>::from_floats(
            a.iter()
                .flatten()
                .map(|v| *v as f32)
                .collect::<Vec<_>>()
                .as_slice(),
            &device,
        )
        .reshape([3, 3]);
        let l = cholesky(at);
        let lv = to_vec(l.clone());
        // L Lᵀ reproduces a, L is lower triangular.
        for i in 0..3 {
            for j in 0..3 {
                let llt: f64 = (0..3).map(|m| lv[i * 3 + m] * lv[j * 3 + m]).sum();
                assert!(
                    (llt - a[i][j]).abs() < 1e-5,
                    "({i},{j}) {llt} vs {}",
                    a[i][j]
                );
                if j > i {
                    assert_eq!(lv[i * 3 + j], 0.0);
                }
            }
        }
        // det by cofactors.
        let det = a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1])
            - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
            + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
        let ld = to_vec(cholesky_log_det(l.clone()))[0];
        assert!((ld - det.ln()).abs() < 1e-5, "{ld} vs {}", det.ln());
        // L (L⁻¹ r) = r.
        let r = Tensor::<2>::from_floats([[1.0, -2.0], [0.5, 0.0], [3.0, 1.0]], &device);
        let z = solve_lower(l.clone(), r.clone());
        let back = to_vec(l.matmul(z));
        for (x, y) in back.iter().zip(to_vec(r)) {
            assert!((x - y).abs() < 1e-5);
        }
    }
}
