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
}
