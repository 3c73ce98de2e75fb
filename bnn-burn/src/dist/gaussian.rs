//! The Gaussian log-density, written once: likelihood heads, predictive log-likelihoods, priors
//! and posterior densities all call [`gaussian_log_density`].

use crate::special::HALF_LN_2PI;
use burn::tensor::Tensor;

/// Elementwise `ln N(x; μ, v) = −(x − μ)²/(2v) − ½ ln v − ½ ln 2π`.
///
/// The three tensors broadcast against each other (burn's rules: equal rank, size-1 axes
/// stretch), so a `[1, n]` mean serves a `[S, n]` batch of draws.
pub fn gaussian_log_density<const D: usize>(
    x: Tensor<D>,
    mean: Tensor<D>,
    var: Tensor<D>,
) -> Tensor<D> {
    ((x - mean).square() / (var.clone() * 2.0) + var.log() * 0.5 + HALF_LN_2PI).neg()
}

/// `KL(N(m, diag v) ‖ N(0, γ I))` per row, summed over the last axis, `[B]`:
/// `½ Σ_d [(v_d + m_d²)/γ − 1 − ln(v_d/γ)]` (a latent's KL to its prior; BEDL's per-point
/// Gaussian regulariser, Haußmann 2021 §5.4, with `γ = α⁻¹`).
pub fn kl_to_centred(mean: Tensor<2>, var: Tensor<2>, prior_var: f64) -> Tensor<1> {
    let terms = (var.clone() + mean.square()) / prior_var - 1.0 - (var / prior_var).log();
    (terms.sum_dim(1) * 0.5).squeeze_dim(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{test_device, to_vec};

    #[test]
    fn matches_the_closed_form_and_broadcasts() {
        let device = test_device();
        let x = Tensor::<2>::from_floats([[0.0, 1.0], [2.0, -1.0]], &device);
        let mean = Tensor::<2>::from_floats([[0.5, 0.5]], &device);
        let var = Tensor::<2>::from_floats([[0.25, 4.0]], &device);
        let got = to_vec(gaussian_log_density(x, mean, var));
        let pdf = |x: f64, m: f64, v: f64| {
            (-(x - m).powi(2) / (2.0 * v)).exp() / (2.0 * std::f64::consts::PI * v).sqrt()
        };
        let want = [
            pdf(0.0, 0.5, 0.25).ln(),
            pdf(1.0, 0.5, 4.0).ln(),
            pdf(2.0, 0.5, 0.25).ln(),
            pdf(-1.0, 0.5, 4.0).ln(),
        ];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-5, "{g} vs {w}");
        }
    }

    /// `KL(N(m, v) ‖ N(0, γ))` against `E_q[ln q − ln p]` over 10⁵ host draws per row (two
    /// dimensions summed), 5 standard errors.
    #[test]
    fn kl_to_centred_matches_monte_carlo() {
        let device = test_device();
        let rows: [([f64; 2], [f64; 2]); 2] =
            [([0.3, -1.2], [0.5, 2.0]), ([2.0, 0.0], [0.01, 1.0])];
        let gamma = 1.5;
        let mean = Tensor::<2>::from_floats(rows.map(|r| r.0.map(|v| v as f32)), &device);
        let var = Tensor::<2>::from_floats(rows.map(|r| r.1.map(|v| v as f32)), &device);
        let got = to_vec(kl_to_centred(mean, var, gamma));
        let mut z = crate::testing::HostNormals::new(5);
        let ln_n = |x: f64, m: f64, v: f64| {
            -(x - m).powi(2) / (2.0 * v) - 0.5 * (std::f64::consts::TAU * v).ln()
        };
        for (i, (m, v)) in rows.iter().enumerate() {
            let draws: Vec<f64> = (0..100_000)
                .map(|_| {
                    (0..2)
                        .map(|d| {
                            let x = m[d] + v[d].sqrt() * z.next();
                            ln_n(x, m[d], v[d]) - ln_n(x, 0.0, gamma)
                        })
                        .sum()
                })
                .collect();
            let mc = crate::testing::sample_moments(&draws);
            assert!(
                (got[i] - mc.mean).abs() <= 5.0 * mc.mean_se + 1e-4,
                "row {i}: {} vs Monte Carlo {} ± {}",
                got[i],
                mc.mean,
                mc.mean_se
            );
        }
    }
}
