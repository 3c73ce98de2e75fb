//! The variational parameters of one weight (or bias) tensor: a mean `μ` and an unconstrained
//! scale `ρ` with `σ = softplus(ρ)` (Blundell et al. 2015; Farquhar 2022, App. B.3).
//!
//! The same parameters serve the mean-field Gaussian posterior (`w = μ + σ ⊙ ε`) and the radial
//! posterior (`w = μ + σ ⊙ (ε/‖ε‖)·r`, Farquhar 2022 eq. 4.6), which differ only in the noise.

use crate::prior::Prior;
use crate::special::softplus;
use burn::module::{Module, Param};
use burn::tensor::{Device, Distribution, Tensor};

/// Mean and softplus-scale of a factorised posterior over one tensor.
#[derive(Module, Debug)]
pub struct PosteriorParam<const D: usize> {
    /// Posterior mean `μ`.
    pub mu: Param<Tensor<D>>,
    /// Unconstrained scale `ρ`; the standard deviation is `softplus(ρ)`.
    pub rho: Param<Tensor<D>>,
}

impl<const D: usize> PosteriorParam<D> {
    /// `μ ~ N(0, mu_std²)` (0 gives zeros), `ρ ~ N(rho_init, rho_std²)`.
    pub fn init(
        shape: [usize; D],
        mu_std: f64,
        rho_init: f64,
        rho_std: f64,
        device: &Device,
    ) -> Self {
        let mu = if mu_std > 0.0 {
            Tensor::random(shape, Distribution::Normal(0.0, mu_std), device)
        } else {
            Tensor::zeros(shape, device)
        };
        let rho = if rho_std > 0.0 {
            Tensor::random(shape, Distribution::Normal(rho_init, rho_std), device)
        } else {
            Tensor::full(shape, rho_init, device)
        };
        Self {
            mu: Param::from_tensor(mu),
            rho: Param::from_tensor(rho),
        }
    }

    /// The shape of the underlying tensor.
    pub fn dims(&self) -> [usize; D] {
        self.mu.dims()
    }

    /// Number of entries `D` of the tensor (the radial block dimension).
    pub fn numel(&self) -> usize {
        self.dims().iter().product()
    }

    /// `σ = softplus(ρ)`.
    pub fn sigma(&self) -> Tensor<D> {
        softplus(self.rho.val())
    }

    /// `μ` and `σ` evaluated once, to share between a forward pass and the KL of one step.
    pub fn posterior(&self) -> Posterior<D> {
        Posterior {
            mu: self.mu.val(),
            sigma: self.sigma(),
        }
    }

    /// One Gaussian draw `μ + σ ⊙ ε`.
    pub fn sample_gaussian(&self) -> Tensor<D> {
        self.posterior().sample_gaussian()
    }

    /// `S` independent Gaussian draws stacked on a new leading axis (`E = D + 1`).
    pub fn sample_gaussian_n<const E: usize>(&self, samples: usize) -> Tensor<E> {
        self.posterior().sample_gaussian_n(samples)
    }

    /// `S` radial draws (see [`Posterior::sample_radial_n`]).
    pub fn sample_radial_n<const E: usize>(&self, samples: usize) -> Tensor<E> {
        self.posterior().sample_radial_n(samples)
    }

    /// One radial draw (the `S = 1` case of [`Self::sample_radial_n`]).
    pub fn sample_radial<const E: usize>(&self) -> Tensor<D> {
        self.posterior().sample_radial::<E>()
    }

    /// `KL(N(μ, σ²) ‖ prior)` summed over the tensor (see [`Prior::kl_mean_field`]).
    pub fn kl_gaussian(&self, prior: &Prior, mc_samples: usize) -> Tensor<1> {
        self.posterior().kl_gaussian(prior, mc_samples)
    }
}

/// The posterior tensors of one step: `μ` and `σ = softplus(ρ)`, evaluated once so that the
/// forward pass and the KL share one softplus and one backward through it.
#[derive(Debug, Clone)]
pub struct Posterior<const D: usize> {
    /// Mean `μ`.
    pub mu: Tensor<D>,
    /// Standard deviation `σ`.
    pub sigma: Tensor<D>,
}

impl<const D: usize> Posterior<D> {
    /// The shape of the tensor.
    pub fn dims(&self) -> [usize; D] {
        self.mu.dims()
    }

    /// Number of entries (the radial block dimension).
    pub fn numel(&self) -> usize {
        self.dims().iter().product()
    }

    /// One Gaussian draw `μ + σ ⊙ ε`.
    pub fn sample_gaussian(&self) -> Tensor<D> {
        let eps = self.mu.random_like(Distribution::Normal(0.0, 1.0));
        self.mu.clone() + self.sigma.clone() * eps
    }

    /// `S` independent Gaussian draws stacked on a new leading axis (`E = D + 1`).
    pub fn sample_gaussian_n<const E: usize>(&self, samples: usize) -> Tensor<E> {
        let eps = Tensor::<E>::random(
            self.stacked_shape::<E>(samples),
            Distribution::Normal(0.0, 1.0),
            &self.mu.device(),
        );
        self.mu.clone().unsqueeze::<E>() + self.sigma.clone().unsqueeze::<E>() * eps
    }

    /// `S` radial draws `μ + σ ⊙ (ε_s/‖ε_s‖)·r_s`, one direction and one radius per sample,
    /// the norm taken over the whole tensor (one radial block per tensor and sample).
    pub fn sample_radial_n<const E: usize>(&self, samples: usize) -> Tensor<E> {
        let device = self.mu.device();
        let shape = self.stacked_shape::<E>(samples);
        let eps = Tensor::<E>::random(shape, Distribution::Normal(0.0, 1.0), &device);
        let norm = eps
            .clone()
            .reshape([samples as i64, -1])
            .square()
            .sum_dim(1)
            .sqrt();
        let r = Tensor::<2>::random([samples, 1], Distribution::Normal(0.0, 1.0), &device);
        let mut bshape = [1usize; E];
        bshape[0] = samples;
        let scale = (r / norm).reshape(bshape);
        self.mu.clone().unsqueeze::<E>() + self.sigma.clone().unsqueeze::<E>() * eps * scale
    }

    /// One radial draw (the `S = 1` case of [`Self::sample_radial_n`]).
    pub fn sample_radial<const E: usize>(&self) -> Tensor<D> {
        self.sample_radial_n::<E>(1).squeeze_dim(0)
    }

    /// `KL(N(μ, σ²) ‖ prior)` summed over the tensor (see [`Prior::kl_mean_field`]).
    pub fn kl_gaussian(&self, prior: &Prior, mc_samples: usize) -> Tensor<1> {
        prior.kl_mean_field(self.mu.clone(), self.sigma.clone(), mc_samples)
    }

    fn stacked_shape<const E: usize>(&self, samples: usize) -> [usize; E] {
        assert_eq!(
            E,
            D + 1,
            "a stacked draw has one more axis than the parameter"
        );
        let mut shape = [samples; E];
        shape[1..].copy_from_slice(&self.dims());
        shape
    }
}
