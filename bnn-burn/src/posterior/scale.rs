//! What the Gaussian-based families share: the initial scale `ρ` (σ = softplus(ρ), Blundell et
//! al. 2015; Farquhar 2022 App. B.3) and the location-scale parameters `(μ, ρ)`.

use crate::error::{Check, ConfigError};
use crate::special::softplus;
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{Distribution, Tensor};

/// Initialisation of the unconstrained scale `ρ ~ N(rho, rho_std²)`, `σ = softplus(ρ)`: the one
/// sub-configuration every scale-carrying family validates the same way.
#[derive(Config, Debug, PartialEq, Copy)]
pub struct ScaleInit {
    /// Mean of the initial `ρ` (−5 gives σ ≈ 0.0067; Farquhar uses −4 to −6).
    #[config(default = -5.0)]
    pub rho: f64,
    /// Standard deviation of the jitter on the initial `ρ` (0 for a constant).
    #[config(default = 0.1)]
    pub rho_std: f64,
}

impl ScaleInit {
    /// Checks `rho` is finite and `rho_std` finite and ≥ 0; `config` names the holder.
    pub fn validate(&self, config: &'static str) -> Result<(), ConfigError> {
        let check = Check(config);
        check.finite("scale.rho", self.rho)?;
        check.non_negative("scale.rho_std", self.rho_std)
    }

    /// An initial `ρ` of `shape`.
    pub fn rho<const D: usize>(
        &self,
        shape: [usize; D],
        device: &burn::tensor::Device,
    ) -> Tensor<D> {
        if self.rho_std > 0.0 {
            Tensor::random(shape, Distribution::Normal(self.rho, self.rho_std), device)
        } else {
            Tensor::full(shape, self.rho, device)
        }
    }
}

/// Mean `μ` and unconstrained scale `ρ` of one tensor (mean-field and radial differ only in the
/// noise they draw around `μ`).
#[derive(Module, Debug)]
pub struct LocationScale<const D: usize> {
    /// Posterior mean `μ`.
    pub mu: Param<Tensor<D>>,
    /// Unconstrained scale; `σ = softplus(ρ)`.
    pub rho: Param<Tensor<D>>,
}

impl<const D: usize> LocationScale<D> {
    /// `μ = mean`, `ρ` drawn by `scale`.
    pub fn init(mean: Tensor<D>, scale: &ScaleInit) -> Self {
        let rho = scale.rho(mean.dims(), &mean.device());
        Self {
            mu: Param::from_tensor(mean),
            rho: Param::from_tensor(rho),
        }
    }

    /// `(μ, σ)` evaluated once.
    pub fn evaluate(&self) -> (Tensor<D>, Tensor<D>) {
        (self.mu.val(), softplus(self.rho.val()))
    }
}

/// The configuration, module and per-step distribution of a `(μ, ρ)` family. Mean-field and
/// radial differ only in the noise they draw around `μ`: each file invokes this and writes the
/// distribution's `marginal(σ)`, `spread(n)` (draws of `w − μ`), `log_density(w)` and
/// `differential_entropy()`.
macro_rules! location_scale_family {
    ($name:literal, $(#[$doc:meta])* $config:ident, $posterior:ident, $dist:ident) => {
        $(#[$doc])*
        #[derive(burn::config::Config, Debug, PartialEq)]
        pub struct $config {
            /// Initial scales.
            #[config(default = "ScaleInit::new()")]
            pub scale: ScaleInit,
        }

        #[doc = concat!("The ", $name, " family's parameters of one tensor.")]
        #[derive(burn::module::Module, Debug)]
        pub struct $posterior<const D: usize> {
            /// `μ` and `ρ`.
            pub loc: LocationScale<D>,
        }

        #[doc = concat!("The ", $name, " distribution of one tensor for one step.")]
        #[derive(Debug, Clone)]
        pub struct $dist<const D: usize> {
            /// Mean `μ`.
            pub mu: Tensor<D>,
            /// Scale `σ = softplus(ρ)`.
            pub sigma: Tensor<D>,
            /// Marginal variance, computed once per step (the forward pass and the KL share it).
            pub var: Tensor<D>,
        }

        impl<const D: usize> $dist<D> {
            /// The distribution of mean `mu` and scale `sigma`.
            pub fn new(mu: Tensor<D>, sigma: Tensor<D>) -> Self {
                let var = Self::marginal(&sigma);
                Self { mu, sigma, var }
            }
        }

        impl PosteriorFamily for $config {
            type Posterior<const D: usize> = $posterior<D>;

            fn name(&self) -> &'static str {
                $name
            }

            fn validate(&self) -> Result<(), ConfigError> {
                self.scale.validate(stringify!($config))
            }

            fn init<const D: usize>(&self, mean: Tensor<D>, _: &TensorSpec<D>) -> $posterior<D> {
                $posterior {
                    loc: LocationScale::init(mean, &self.scale),
                }
            }
        }

        impl<const D: usize> PosteriorDist<D> for $dist<D> {
            fn family(&self) -> &'static str {
                $name
            }

            fn mean(&self) -> Tensor<D> {
                self.mu.clone()
            }

            fn marginal_variance(&self) -> Option<Tensor<D>> {
                Some(self.var.clone())
            }

            fn sample(&self, n: usize) -> Tensor<2> {
                row(self.mu.clone()) + self.spread(n)
            }

            fn perturbation(&self, n: usize) -> Tensor<2> {
                self.spread(n)
            }

            fn log_q(&self, w: Tensor<2>) -> Result<Tensor<1>, Unsupported> {
                Ok(self.log_density(w))
            }

            fn entropy(&self) -> Tensor<1> {
                self.differential_entropy()
            }
        }

        impl<const D: usize> WeightPosterior<D> for $posterior<D> {
            type Dist = $dist<D>;

            fn dist(&self) -> $dist<D> {
                let (mu, sigma) = self.loc.evaluate();
                $dist::new(mu, sigma)
            }

            fn shape(&self) -> [usize; D] {
                self.loc.mu.dims()
            }
        }
    };
}
pub(crate) use location_scale_family;
