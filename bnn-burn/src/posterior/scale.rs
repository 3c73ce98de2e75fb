//! What the Gaussian-based families share: the unconstrained scale `ρ` (σ = softplus(ρ), Blundell
//! et al. 2015; Farquhar 2022 App. B.3, or ρ = ln σ², Haußmann 2021's VBP code), its
//! initialisation, and the location-scale parameters `(μ, ρ)`.

use crate::dist::WeightPrior;
use crate::error::{Check, ConfigError};
use crate::fused::KlTerms;
use crate::special::{HALF_LN_2PI, softplus};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{Distribution, Tensor};

/// How the unconstrained parameter `ρ` of a location-scale family gives its scale `σ`. The
/// choice matters beyond the initial value: Adam's steps are of about `lr` in `ρ` whatever its
/// gradient's size, so it sets how fast the variances move.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum ScaleParam {
    /// `σ = softplus(ρ)` (Blundell et al. 2015; Farquhar 2022 App. B.3). For small σ,
    /// `ρ ≈ ln σ = ½ ln σ²`.
    Softplus,
    /// `ρ = ln σ²`, `σ = exp(ρ/2)` (Kingma et al. 2015; the `logsig2` of Haußmann 2021's VBP
    /// code): a step in `ρ` moves `ln σ²` half as far as under [`Self::Softplus`] near σ = 0.
    LogVariance,
    /// `σ² = bound·sigmoid(ρ)` (Depeweg 2019 eq. 3.20, `bound` = the prior variance `λ`): the
    /// variance can never reach the prior's, so black-box α's tied site `f(W)` stays finite.
    /// Evaluated as `σ = exp(½(ln bound − softplus(−ρ)))`.
    SigmoidVariance {
        /// The variance's upper bound `λ > 0`.
        bound: f64,
    },
}

impl ScaleParam {
    /// `σ(ρ)` elementwise.
    pub fn sigma<const D: usize>(self, rho: Tensor<D>) -> Tensor<D> {
        match self {
            Self::Softplus => softplus(rho),
            Self::LogVariance => (rho * 0.5).exp(),
            Self::SigmoidVariance { bound } => ((softplus(rho.neg()) - bound.ln()) * -0.5).exp(),
        }
    }

    /// The fused kernels' form of this parameterisation.
    pub fn sigma_rule(self) -> crate::fused::SigmaRule {
        use crate::fused::SigmaRule;
        match self {
            Self::Softplus => SigmaRule::Softplus,
            Self::LogVariance => SigmaRule::LogVariance,
            Self::SigmoidVariance { bound } => SigmaRule::SigmoidVariance {
                ln_bound: bound.ln() as f32,
            },
        }
    }

    /// `σ(ρ)` of one value.
    pub fn sigma_of(self, rho: f64) -> f64 {
        match self {
            Self::Softplus => crate::special::softplus_scalar(rho),
            Self::LogVariance => (0.5 * rho).exp(),
            Self::SigmoidVariance { bound } => {
                (0.5 * (bound.ln() - crate::special::softplus_scalar(-rho))).exp()
            }
        }
    }

    /// The `ρ` whose scale is `sigma > 0`.
    pub fn rho_of(self, sigma: f64) -> f64 {
        match self {
            Self::Softplus => crate::special::inverse_softplus(sigma),
            Self::LogVariance => 2.0 * sigma.ln(),
            // logit(σ²/bound); σ² ≥ bound has no ρ (infinite).
            Self::SigmoidVariance { bound } => {
                let r = sigma * sigma / bound;
                r.ln() - (-r).ln_1p()
            }
        }
    }
}

/// The unconstrained scale: its parameterisation `σ(ρ)` and initialisation
/// `ρ ~ N(rho, rho_std²)`; the one sub-configuration every scale-carrying family validates the
/// same way.
#[derive(Config, Debug, PartialEq, Copy)]
pub struct ScaleInit {
    /// Mean of the initial `ρ` (softplus: −5 gives σ ≈ 0.0067, Farquhar uses −4 to −6;
    /// log-variance: −9 gives σ² = e⁻⁹ as in Haußmann's VBP code).
    #[config(default = -5.0)]
    pub rho: f64,
    /// Standard deviation of the jitter on the initial `ρ` (0 for a constant).
    #[config(default = 0.1)]
    pub rho_std: f64,
    /// How `ρ` gives `σ` (softplus by default).
    #[config(default = "ScaleParam::Softplus")]
    pub param: ScaleParam,
}

impl ScaleInit {
    /// Checks `rho` is finite and `rho_std` finite and ≥ 0; `config` names the holder.
    pub fn validate(&self, config: &'static str) -> Result<(), ConfigError> {
        let check = Check(config);
        check.finite("scale.rho", self.rho)?;
        if let ScaleParam::SigmoidVariance { bound } = self.param {
            check.positive("scale.param.bound", bound)?;
        }
        check.non_negative("scale.rho_std", self.rho_std)
    }

    /// An initial `ρ` of `shape`.
    pub fn rho<const D: usize>(
        &self,
        shape: [usize; D],
        device: &burn::tensor::Device,
    ) -> Tensor<D> {
        if self.rho_std > 0.0 {
            crate::device::uses_generator();
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
    /// Unconstrained scale; `σ = param(ρ)`.
    pub rho: Param<Tensor<D>>,
    /// How `ρ` gives `σ`.
    #[module(skip)]
    pub param: ScaleParam,
}

impl<const D: usize> LocationScale<D> {
    /// `μ = mean`, `ρ` drawn by `scale`.
    pub fn init(mean: Tensor<D>, scale: &ScaleInit) -> Self {
        let rho = scale.rho(mean.dims(), &mean.device());
        Self {
            mu: Param::from_tensor(mean),
            rho: Param::from_tensor(rho),
            param: scale.param,
        }
    }

    /// `(μ, σ)` evaluated once.
    pub fn evaluate(&self) -> (Tensor<D>, Tensor<D>) {
        (self.mu.val(), self.param.sigma(self.rho.val()))
    }

    /// `μ`, `ρ` and the parameterisation for the fused kernels.
    pub fn fused(&self, radial: bool) -> Option<FusedScale<D>> {
        Some(FusedScale {
            mu: self.mu.val(),
            rho: self.rho.val(),
            radial,
            param: self.param,
            factor: None,
        })
    }
}

/// What the fused kernels ([`crate::fused`]) read of a location-scale posterior: `μ`, `ρ`, how
/// `ρ` gives `σ`, and whether the draws are radial (`w = μ + σ⊙(ε/‖ε‖)·r`), mean-field
/// (`w = μ + σ⊙ε`) or low-rank (`w = μ + σ⊙ε + F z`, Brack 2022 §3: the mean-field kernels
/// and a `k`-column product). The sampling, moment and KL kernels (`crate::fused::sample`,
/// `crate::fused::moments`, `crate::fused::kl`) and the black-box α draws
/// (`crate::fused::sample_log_ratio`) take every [`ScaleParam`] ([`FusedScale::sigma_rule`]).
#[derive(Debug, Clone)]
pub struct FusedScale<const D: usize> {
    /// Posterior mean `μ`.
    pub mu: Tensor<D>,
    /// Unconstrained scale `ρ`.
    pub rho: Tensor<D>,
    /// Radial (Farquhar 2022 eq. 4.6) rather than mean-field.
    pub radial: bool,
    /// How `ρ` gives `σ`.
    pub param: ScaleParam,
    /// The low-rank factor of `q(w) = N(μ, F Fᵀ + diag σ²)` ([`super::LowRankPosterior`]);
    /// `None` for mean-field and radial.
    pub factor: Option<FusedFactor>,
}

/// A low-rank factor as the fused path reads it: `F = scale · stored`, `stored [numel, k]` the
/// parameter (the scale is applied to the `k`-sized quantities, not to `F`).
#[derive(Debug, Clone)]
pub struct FusedFactor {
    /// The stored factor `F / c`.
    pub stored: Tensor<2>,
    /// `c`.
    pub scale: f64,
}

impl<const D: usize> FusedScale<D> {
    /// The kernels' form of [`Self::param`].
    pub fn sigma_rule(&self) -> crate::fused::SigmaRule {
        self.param.sigma_rule()
    }

    /// Number of weights.
    pub fn numel(&self) -> usize {
        self.mu.shape().num_elements()
    }

    /// `Var[w]/σ²`: 1 for mean-field, `1/n` for radial.
    pub fn var_scale(&self) -> f32 {
        if self.radial {
            1.0 / self.numel() as f32
        } else {
            1.0
        }
    }

    /// The per-element KL terms and the constant with `KL(q ‖ p) = Σ terms + constant`, for a
    /// prior with scalar Gaussian parameters `N(μ₀, σ₀²)` (`None` for any other prior):
    /// mean-field `n(ln σ₀ − ½)`; radial `n(ln σ₀ + ½ ln 2π) + c_n` with `c_n` the constant of
    /// [`radial_entropy_constant`](super::radial_entropy_constant). With a low-rank factor these
    /// are the diagonal's terms; the layers add the factor's (`½‖F‖²/σ₀² − ½ ln det A`).
    pub fn kl_terms(&self, prior: &WeightPrior<D>) -> Option<(KlTerms, f64)> {
        let WeightPrior::Gaussian(g) = prior else {
            return None;
        };
        let (mean, std) = g.scalars()?;
        let (mean, std) = (&mean, &std);
        let n = self.numel() as f64;
        let inv_var = 1.0 / (std * std);
        let terms = KlTerms::new(
            *mean as f32,
            inv_var as f32,
            (inv_var * self.var_scale() as f64) as f32,
        );
        let constant = n * (std.ln() + HALF_LN_2PI) - self.entropy_constant();
        Some((terms, constant))
    }

    /// `H[q] − Σ ln σ`, the entropy's constant (without a low-rank factor): mean-field
    /// `n(1 + ln 2π)/2`; radial `−c_n` of
    /// [`radial_entropy_constant`](super::radial_entropy_constant).
    pub fn entropy_constant(&self) -> f64 {
        if self.radial {
            -super::radial_entropy_constant(self.numel())
        } else {
            self.numel() as f64 * (0.5 + HALF_LN_2PI)
        }
    }

    /// The factor `c_s` of each of `n` draws `w_s = μ + σ⊙ε_s·c_s` under stream `key`: 1 for
    /// mean-field; `r_s/‖ε_s‖` for radial, `r_s ~ N(0, 1)` from its own sub-stream.
    pub fn draw_scales(&self, key: u64, n: usize) -> Vec<f32> {
        if !self.radial {
            return vec![1.0; n];
        }
        let norms = crate::fused::squared_norms(&self.mu, key, n);
        norms
            .iter()
            .enumerate()
            .map(|(s, squared)| {
                let mut r = [0f32; 1];
                crate::fused::elementwise::normals(key, u32::MAX - s as u32, &mut r);
                r[0] / squared.sqrt()
            })
            .collect()
    }
}

/// The configuration, module and per-step distribution of a `(μ, ρ)` family. Mean-field and
/// radial differ only in the noise they draw around `μ`: each file invokes this and writes the
/// distribution's `marginal(σ)`, `spread(n)` (draws of `w − μ`), `log_density(w)` and
/// `differential_entropy()`.
macro_rules! location_scale_family {
    ($name:literal, $radial:expr, $(#[$doc:meta])* $config:ident, $posterior:ident, $dist:ident) => {
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

            fn factorised_gaussian(&self) -> bool {
                !$radial
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

            fn fused(&self) -> Option<FusedScale<D>> {
                self.loc.fused($radial)
            }
        }
    };
}
pub(crate) use location_scale_family;
