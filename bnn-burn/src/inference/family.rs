//! Variational families over a flat vector `θ ∈ ℝᴰ`: every per-tensor posterior family of
//! [`crate::posterior`] on a `[D]` tensor (mean-field, radial, low-rank, full-rank), and the
//! normalizing flows of [`super::flows`] on top of one.

use crate::error::ConfigError;
use crate::posterior::{PosteriorDist, PosteriorFamily, TensorSpec, Unsupported, WeightPosterior};
use burn::module::Module;
use burn::tensor::{Device, Tensor};

/// A learnable distribution `q(θ)` over a flat vector, for the ELBO and importance sampling.
pub trait FlatFamily: Module {
    /// The dimension `D`.
    fn dim(&self) -> usize;

    /// `n` reparameterised draws `[n, D]` and `ln q` of each, `[n]`.
    ///
    /// # Errors
    /// When `q` has no density (a point mass, a dropout mask).
    fn sample_log_q(&self, n: usize) -> Result<(Tensor<2>, Tensor<1>), Unsupported>;
}

impl<P: WeightPosterior<1>> FlatFamily for P {
    fn dim(&self) -> usize {
        self.shape()[0]
    }

    fn sample_log_q(&self, n: usize) -> Result<(Tensor<2>, Tensor<1>), Unsupported> {
        self.dist().sample_with_log_q(n)
    }
}

/// `family`'s posterior over a flat `D`-vector, centred on `mean` (`[D]`, on the device to train
/// on).
///
/// # Errors
/// When `family` does not validate.
pub fn flat<F: PosteriorFamily>(
    family: &F,
    mean: Tensor<1>,
) -> Result<F::Posterior<1>, ConfigError> {
    family.validate()?;
    let spec = TensorSpec {
        shape: mean.dims(),
        input_axis: None,
    };
    Ok(family.init(mean, &spec))
}

/// [`flat`] centred on zero.
///
/// # Errors
/// When `family` does not validate.
pub fn flat_at_zero<F: PosteriorFamily>(
    family: &F,
    dim: usize,
    device: &Device,
) -> Result<F::Posterior<1>, ConfigError> {
    flat(family, Tensor::zeros([dim], device))
}
