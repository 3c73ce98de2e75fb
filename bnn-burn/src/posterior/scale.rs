//! What the Gaussian-based families share: the unconstrained scale `ρ` (σ = softplus(ρ), Blundell
//! et al. 2015; Farquhar 2022 App. B.3, or ρ = ln σ², Haußmann 2021's VBP code), its
//! initialisation, and the location-scale parameters `(μ, ρ)`.

use super::fast_path::{FastPath, FusedKl, KlRequest};
use crate::dist::{PriorTerms, WeightPrior};
use crate::error::{Check, ConfigError};
use crate::fused::{self, DrawSpec, KlTerms, LocScale};
use crate::special::{HALF_LN_2PI, softplus};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{Distribution, Tensor};
use std::marker::PhantomData;

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
}

/// What distinguishes a location-scale family's draws `w_s = μ + σ⊙c_s·ε_s` on the fused
/// kernels: mean-field's (`c_s = 1`, [`MeanFieldNoise`](super::mean_field::MeanFieldNoise)) or
/// radial's ([`RadialNoise`](super::radial::RadialNoise)).
pub trait ScaleNoise: 'static {
    /// A product of independent Gaussians: its KL may clamp `ln σ²`
    /// ([`crate::dist::Prior::ClampedGaussian`]), and its draws have log-ratios on
    /// the kernels.
    const FACTORISED: bool;

    /// `Var[w]/σ²` of a tensor of `n` entries.
    fn var_scale(n: usize) -> f32;

    /// `H[q] − Σ ln σ` of a tensor of `n` entries.
    fn entropy_constant(n: usize) -> f64;

    /// `c_s` of each of `draws` draws of a tensor like `like` from stream `key`.
    fn draw_scales<const D: usize>(like: &Tensor<D>, key: u64, draws: usize) -> Vec<f32>;
}

/// The fast path of a `(μ, ρ)` family whose draws are `μ + σ(ρ)⊙c_s·ε_s`, `c_s` by `N`: the
/// sampling, moment and KL kernels (`fused::sample`, `fused::moments`, `fused::kl`) take every
/// [`ScaleParam`].
#[derive(Debug, Clone)]
pub struct LocScalePath<const D: usize, N> {
    mu: Tensor<D>,
    rho: Tensor<D>,
    param: ScaleParam,
    noise: PhantomData<fn() -> N>,
}

impl<const D: usize, N: ScaleNoise> LocScalePath<D, N> {
    /// The path of `(μ, ρ)`, evaluated once for the pass.
    pub fn new(mu: Tensor<D>, rho: Tensor<D>, param: ScaleParam) -> Self {
        Self {
            mu,
            rho,
            param,
            noise: PhantomData,
        }
    }

    /// `μ`, `ρ` and the `σ` rule as the kernels take them.
    pub(super) fn loc_scale(&self) -> LocScale<D> {
        LocScale {
            mu: self.mu.clone(),
            rho: self.rho.clone(),
            rule: self.param.sigma_rule(),
        }
    }

    fn numel(&self) -> usize {
        self.mu.shape().num_elements()
    }
}

impl<const D: usize, N: ScaleNoise> FastPath<D> for LocScalePath<D, N> {
    fn mean(&self) -> Tensor<D> {
        self.mu.clone()
    }

    /// Mean-field `KL = Σ terms + n(ln σ₀ − ½)` under `N(μ₀, σ₀²)`; radial's constant is
    /// `n(ln σ₀ + ½ ln 2π) + c_n` ([`radial_entropy_constant`](super::radial_entropy_constant)).
    /// A clamp needs a factorised family; a scale mixture, no clamp.
    fn kl_plan(&self, prior: &WeightPrior<D>, range: Option<(f64, f64)>) -> Option<FusedKl> {
        if range.is_some() && !N::FACTORISED {
            return None;
        }
        let n = self.numel();
        let var_scale = N::var_scale(n);
        let clamp = |terms: KlTerms| match range {
            Some(range) => terms.with_log_var_range(range, var_scale.into()),
            None => terms,
        };
        let entropy = N::entropy_constant(n);
        Some(match prior.fused_terms(self.mu.dims())? {
            PriorTerms::Scalar { mean, std } => {
                let inv_var = 1.0 / (std * std);
                let var_term = (inv_var * f64::from(var_scale)) as f32;
                let terms = KlTerms::new(mean as f32, inv_var as f32, var_term);
                FusedKl::Closed(clamp(terms), n as f64 * (std.ln() + HALF_LN_2PI) - entropy)
            }
            PriorTerms::PerWeight(prior) => FusedKl::PerWeight {
                terms: clamp(KlTerms::per_weight(var_scale)),
                prior,
                constant: n as f64 * HALF_LN_2PI - entropy,
            },
            PriorTerms::Mixture(terms, draws) if range.is_none() => FusedKl::Mixture(terms, draws),
            PriorTerms::Mixture(..) => return None,
        })
    }

    fn draws(
        &self,
        n: usize,
        center: bool,
        key: u64,
        kl: Option<KlRequest<'_>>,
    ) -> (Tensor<2>, Option<Tensor<1>>) {
        let spec = DrawSpec {
            key,
            scales: N::draw_scales(&self.mu, key, n),
            center,
        };
        match kl.and_then(|r| r.plan.foldable().zip(r.fold)) {
            Some(((prior, c), fold)) => {
                let (w, value) = fused::sample(self.loc_scale(), spec, Some(prior), Some(fold));
                (w, Some(value + c))
            }
            None => {
                let (w, _) = fused::sample(self.loc_scale(), spec, None, None);
                (w, kl.map(|r| self.kl(r.plan, r.key)))
            }
        }
    }

    fn variance(&self, kl: Option<KlRequest<'_>>) -> (Tensor<D>, Option<Tensor<1>>) {
        let var_scale = N::var_scale(self.numel());
        match kl.and_then(|r| r.plan.foldable().zip(r.fold)) {
            Some(((prior, c), fold)) => {
                let q = self.loc_scale();
                let (var, value) = fused::moments(q, var_scale, Some(prior), Some(fold));
                (var, Some(value + c))
            }
            None => {
                let (var, _) = fused::moments(self.loc_scale(), var_scale, None, None);
                (var, kl.map(|r| self.kl(r.plan, r.key)))
            }
        }
    }

    fn kl(&self, plan: &FusedKl, key: Option<u64>) -> Tensor<1> {
        match (plan.foldable(), plan) {
            (Some((prior, c)), _) => fused::kl(self.loc_scale(), prior) + c,
            (None, FusedKl::Mixture(terms, draws)) => {
                let key = key.expect("a scale mixture's KL has a key of its own");
                let scales = N::draw_scales(&self.mu, key, *draws);
                let (mu, rho, rule) = (self.mu.clone(), self.rho.clone(), self.param.sigma_rule());
                let entropy = N::entropy_constant(self.numel());
                fused::mixture_kl(mu, rho, rule, *terms, key, scales, entropy)
            }
            (None, _) => unreachable!("only a scale mixture's KL does not fold"),
        }
    }

    fn draws_with_log_ratio(
        &self,
        n: usize,
        plan: &FusedKl,
        kl: bool,
        key: u64,
    ) -> Option<(Tensor<2>, Tensor<1>, Option<Tensor<1>>)> {
        let (prior, c) = plan.foldable().filter(|_| N::FACTORISED)?;
        let (w, ratio, value) = fused::sample_log_ratio(self.loc_scale(), key, n, prior, kl);
        Some((w, ratio, kl.then(|| value + c)))
    }

    fn has_log_ratio(&self) -> bool {
        N::FACTORISED
    }
}

/// The configuration, module and per-step distribution of a `(μ, ρ)` family. Mean-field and
/// radial differ only in the noise they draw around `μ`: each file invokes this and writes the
/// distribution's `marginal(σ)`, `spread(n)` (draws of `w − μ`), `log_density(w)` and
/// `differential_entropy()`.
macro_rules! location_scale_family {
    ($name:literal, $noise:ty, $(#[$doc:meta])* $config:ident, $posterior:ident, $dist:ident) => {
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
                <$noise as ScaleNoise>::FACTORISED
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

            fn fast_path(&self) -> Option<Box<dyn FastPath<D>>> {
                let (mu, rho) = (self.loc.mu.val(), self.loc.rho.val());
                Some(Box::new(LocScalePath::<D, $noise>::new(mu, rho, self.loc.param)))
            }
        }
    };
}
pub(crate) use location_scale_family;
