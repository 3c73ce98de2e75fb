//! Mean-field Gaussian posterior (Bayes by Backprop, Blundell et al. 2015): every weight has an
//! independent `q(w) = N(μ, σ²)`, `σ = softplus(ρ)`; `H[q] = Σ ln σ + n(½ ln 2π + ½)`.

use super::scale::location_scale_family;
use super::scale::{LocScalePath, ScaleNoise};
use super::{
    FastPath, LocationScale, PosteriorDist, PosteriorFamily, ScaleInit, TensorSpec, Unsupported,
    WeightPosterior, numel, row,
};
use crate::dist::gaussian_log_density;
use crate::error::ConfigError;
use crate::special::HALF_LN_2PI;
use burn::tensor::{Distribution, Tensor};

location_scale_family!(
    "mean-field",
    MeanFieldNoise,
    /// Configuration of the mean-field family.
    MeanFieldConfig,
    MeanFieldPosterior,
    MeanFieldDist
);

/// Mean-field draws on the fused kernels: `w = μ + σ⊙ε`.
#[derive(Debug, Clone, Copy)]
pub struct MeanFieldNoise;

impl ScaleNoise for MeanFieldNoise {
    const FACTORISED: bool = true;

    fn var_scale(_: usize) -> f32 {
        1.0
    }

    fn entropy_constant(n: usize) -> f64 {
        n as f64 * (0.5 + HALF_LN_2PI)
    }

    fn draw_scales<const D: usize>(_: &Tensor<D>, _: u64, draws: usize) -> Vec<f32> {
        vec![1.0; draws]
    }
}

impl<const D: usize> MeanFieldDist<D> {
    /// `σ²`.
    fn marginal(sigma: &Tensor<D>) -> Tensor<D> {
        sigma.clone().square()
    }

    /// `σ ⊙ ε`, `ε ~ N(0, I)`, `[n, numel]`.
    fn spread(&self, n: usize) -> Tensor<2> {
        let shape = [n, numel(self.mu.dims())];
        crate::device::uses_generator();
        let eps = Tensor::random(shape, Distribution::Normal(0.0, 1.0), &self.mu.device());
        row(self.sigma.clone()) * eps
    }

    /// `Σ ln N(w; μ, σ²)` per draw, `[S]`.
    fn log_density(&self, w: Tensor<2>) -> Tensor<1> {
        let s = w.dims()[0];
        let var = row(self.sigma.clone()).square();
        gaussian_log_density(w, row(self.mu.clone()), var)
            .sum_dim(1)
            .reshape([s])
    }

    /// `Σ ln σ + n(½ ln 2π + ½)`.
    fn differential_entropy(&self) -> Tensor<1> {
        let n = numel(self.mu.dims()) as f64;
        self.sigma.clone().log().sum() + n * (HALF_LN_2PI + 0.5)
    }
}
