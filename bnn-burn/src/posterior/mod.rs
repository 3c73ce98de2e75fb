//! Posteriors over weight tensors: one trait, one file per family.
//!
//! A [`PosteriorFamily`] config builds a [`WeightPosterior`] (the module holding a family's
//! variational parameters for one tensor); [`WeightPosterior::dist`] evaluates them once per step
//! into a [`PosteriorDist`], whose mean, marginal variance, samples, `ln q(w)`, entropy and KL to a
//! [`WeightPrior`] the layers and objectives use. Families: point, mean-field (Blundell et al.
//! 2015), radial (Farquhar 2022 eq. 4.6), dropout masks (Gal 2016 ch. 3), low-rank and full-rank
//! (Brack 2022 §3).
//! Adding one is a file and a line in `posterior_families!` below. Guide: the book's *Posteriors
//! and priors* page.

mod dropout;
mod fast_path;
mod full_rank;
mod low_rank;
mod mean_field;
mod point;
mod prior_terms;
mod radial;
mod scale;

pub use dropout::{
    DropoutConfig, DropoutDist, DropoutMask, DropoutNoise, DropoutPosterior, McDropout,
    model_precision, prior_length_scale_for_weight_decay, weight_decay_for_prior,
};
pub use fast_path::{FastPath, FusedKl, KlRequest};
pub use full_rank::{FullRankConfig, FullRankDist, FullRankPosterior};
pub use low_rank::{LowRankConfig, LowRankDist, LowRankPosterior};
pub use mean_field::MeanFieldNoise;
pub use mean_field::{MeanFieldConfig, MeanFieldDist, MeanFieldPosterior};
pub use point::{PointConfig, PointDist, PointPosterior};
pub use radial::RadialNoise;
pub use radial::{RadialConfig, RadialDist, RadialPosterior, radial_entropy_constant};
pub use scale::{LocScalePath, LocationScale, ScaleInit, ScaleNoise, ScaleParam};

use crate::dist::WeightPrior;
use crate::error::ConfigError;
use burn::config::Config;
use burn::module::Module;
use burn::tensor::Tensor;

/// A quantity a posterior family, an activation or a likelihood does not define (e.g. the
/// density of a point mass, the moments of tanh).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{family}: {what}")]
pub struct Unsupported {
    /// What cannot give it: a posterior family (`"point posterior"`), an activation, a
    /// likelihood.
    pub family: &'static str,
    /// What it cannot give, and why.
    pub what: &'static str,
}

/// The tensor a posterior lives on: its shape, and which axis indexes the layer's input units
/// (`None` for a bias). Dropout's unit masks act along that axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorSpec<const D: usize> {
    /// Shape of the weight tensor.
    pub shape: [usize; D],
    /// Axis of the input units (0 for a `[d_in, d_out]` dense weight, 1 for a `[C_out, C_in,
    /// kH, kW]` kernel), `None` for a bias.
    pub input_axis: Option<usize>,
}

/// `q(w)` over one tensor for one step, its tensors evaluated once.
///
/// Draws are flat: `sample(n)` returns `[n, numel]` in the row-major order of `shape`, which the
/// layer reshapes to `[n, ...shape]`.
pub trait PosteriorDist<const D: usize> {
    /// The family's name, for errors.
    fn family(&self) -> &'static str;

    /// `E_q[w]`, shaped like the weight.
    fn mean(&self) -> Tensor<D>;

    /// `Var_q[w]` entrywise, where the family defines one.
    fn marginal_variance(&self) -> Option<Tensor<D>>;

    /// A factor `G` `[numel, r]` of the covariance's part that couples weights
    /// (`Cov_q = diag(·) + G Gᵀ`, its diagonal inside [`Self::marginal_variance`]); `None`
    /// where the weights are uncorrelated. Moment propagation adds the couplings' share of a
    /// unit's variance from it.
    fn correlated_factor(&self) -> Option<Tensor<2>> {
        None
    }

    /// `n` independent reparameterised draws, `[n, numel]`.
    fn sample(&self, n: usize) -> Tensor<2>;

    /// `n` draws shaped `[n, ...shape]`, the sample axis first (`E = D + 1`).
    ///
    /// # Panics
    /// If `E` is not `D + 1`.
    fn sample_shaped<const E: usize>(&self, n: usize) -> Tensor<E>
    where
        Self: Sized,
    {
        assert_eq!(
            E,
            D + 1,
            "a stack of draws has one more axis than the weight"
        );
        let mut shape = [n; E];
        shape[1..].copy_from_slice(&self.mean().dims());
        self.sample(n).reshape(shape)
    }

    /// `n` draws of `w − E_q[w]`, `[n, numel]` (Flipout's shared perturbation).
    fn perturbation(&self, n: usize) -> Tensor<2> {
        self.sample(n) - self.mean().reshape([1, -1])
    }

    /// `ln q(w_s)` of flat draws `w [S, numel]`, `[S]` (black-box α needs it).
    ///
    /// # Errors
    /// When `q` has no density (a point mass, a dropout mask).
    fn log_q(&self, w: Tensor<2>) -> Result<Tensor<1>, Unsupported>;

    /// `n` reparameterised draws `[n, numel]` and `ln q` of each, `[n]`: the ELBO's pair. The
    /// default evaluates [`Self::log_q`] at the draws; a family whose density inverts its
    /// transformation (full-rank's triangular solve) uses the draws' own noise instead,
    /// `ln q = −½‖ε‖² − Σ ln σ − (n/2) ln 2π`: the same value and gradient, without the solve's
    /// loss of precision when `L` is ill-conditioned.
    ///
    /// # Errors
    /// When `q` has no density.
    fn sample_with_log_q(&self, n: usize) -> Result<(Tensor<2>, Tensor<1>), Unsupported> {
        let w = self.sample(n);
        let log_q = self.log_q(w.clone())?;
        Ok((w, log_q))
    }

    /// The differential entropy `H[q] = −E_q ln q(w)` (one element). The degenerate families
    /// (points, dropout masks) use 0: their KL is then the prior cross-entropy, MAP's penalty.
    fn entropy(&self) -> Tensor<1>;

    /// `KL(q ‖ p) = E_q[−ln p(w)] − H[q]` (one element): closed form where the prior's
    /// cross-entropy is, Monte Carlo otherwise (see [`WeightPrior::cross_entropy`]).
    fn kl(&self, prior: &WeightPrior<D>) -> Tensor<1> {
        prior.cross_entropy(self) - self.entropy()
    }

    /// `(w₀, c)` when this family's KL is, under a Gaussian prior, the prior cross-entropy of
    /// the point `μ₀ + c(w₀ − μ₀)` (a point mass: `c = 1`; Gal's dropout masks: `c = √(1 − p)`),
    /// which a pass on the fused kernels computes in one op; `None` (the default) otherwise.
    fn scaled_point(&self) -> Option<(Tensor<D>, f64)> {
        None
    }
}

/// A learnable distribution over one weight tensor.
pub trait WeightPosterior<const D: usize>: Module {
    /// The distribution of one step.
    type Dist: PosteriorDist<D>;

    /// Evaluates the parameters (e.g. `σ = softplus(ρ)`) into `q(w)` for one step.
    fn dist(&self) -> Self::Dist;

    /// Shape of the weight tensor.
    fn shape(&self) -> [usize; D];

    /// Whether `q` is a point mass (every draw equals the mean): layers then skip the noise.
    fn is_point(&self) -> bool {
        false
    }

    /// The multiplicative noise on the input units when `q` is `W = diag(z)·M` (dropout on the
    /// layer input): per-example draws are then `(x ⊙ z) M`, exact and cheap.
    fn unit_noise(&self) -> Option<McDropout> {
        None
    }

    /// The family's draws, variances and KL on the fused kernels ([`FastPath`]), evaluated for
    /// one pass; `None` (the default) keeps the layer on the composition of burn ops.
    fn fast_path(&self) -> Option<Box<dyn FastPath<D>>> {
        None
    }

    /// Whether `q` couples weights ([`PosteriorDist::correlated_factor`] is `Some`), known
    /// without evaluating it.
    fn is_correlated(&self) -> bool {
        false
    }
}

/// The configuration of one family: validation, initialisation around a given mean, a name.
pub trait PosteriorFamily: Clone {
    /// The module this family initialises for a `D`-dimensional tensor.
    type Posterior<const D: usize>: WeightPosterior<D>;

    /// Name for tables and errors.
    fn name(&self) -> &'static str;

    /// Checks every field; the error names the field and the allowed range.
    fn validate(&self) -> Result<(), ConfigError>;

    /// A posterior centred on `mean` (the layer draws it with its `Initializer`).
    fn init<const D: usize>(&self, mean: Tensor<D>, spec: &TensorSpec<D>) -> Self::Posterior<D>;

    /// The family used for the layer's bias (dropout does not drop biases).
    fn for_bias(&self) -> Self {
        self.clone()
    }

    /// This family's configuration of a point estimate (a tensor without noise), when it can
    /// express one: the run-time choice ([`PosteriorConfig`]) through its point family, the
    /// point family itself, dropout at rate 0. A layer with
    /// [`Bias::Point`](crate::layers::Bias::Point) needs it.
    fn point_estimate(&self) -> Option<Self> {
        None
    }

    /// Whether [`PosteriorDist::marginal_variance`] is defined (local reparameterisation and
    /// Flipout need it).
    fn has_marginal_variance(&self) -> bool {
        true
    }

    /// Whether `q` is a product of independent Gaussians given by its mean and marginal
    /// variance (the mean-field family), so that its KL to a Gaussian prior is a function of
    /// those two alone ([`crate::dist::Prior::ClampedGaussian`] and [`crate::dist::Prior::Hyper`] need it).
    fn factorised_gaussian(&self) -> bool {
        false
    }
}

/// Generates the serialisable [`PosteriorConfig`] and the runtime [`AnyPosterior`] from one list.
macro_rules! posterior_families {
    ($($(#[$doc:meta])* $variant:ident($config:ident => $module:ident),)*) => {
        /// The posterior family of a layer's weights: the user-facing, serialisable choice.
        #[derive(Config, Debug, PartialEq)]
        pub enum PosteriorConfig {
            $($(#[$doc])* $variant($config),)*
        }

        /// A posterior of any family, chosen at run time by a [`PosteriorConfig`].
        #[derive(Module, Debug)]
        #[allow(clippy::large_enum_variant)]
        pub enum AnyPosterior<const D: usize> {
            $($(#[$doc])* $variant($module<D>),)*
        }

        impl PosteriorFamily for PosteriorConfig {
            type Posterior<const D: usize> = AnyPosterior<D>;

            fn name(&self) -> &'static str {
                match self { $(Self::$variant(c) => c.name(),)* }
            }

            fn validate(&self) -> Result<(), ConfigError> {
                match self { $(Self::$variant(c) => c.validate(),)* }
            }

            fn init<const D: usize>(&self, mean: Tensor<D>, spec: &TensorSpec<D>) -> AnyPosterior<D> {
                match self { $(Self::$variant(c) => AnyPosterior::$variant(c.init(mean, spec)),)* }
            }

            fn for_bias(&self) -> Self {
                match self { $(Self::$variant(c) => Self::$variant(c.for_bias()),)* }
            }

            fn point_estimate(&self) -> Option<Self> {
                Some(Self::point())
            }

            fn has_marginal_variance(&self) -> bool {
                match self { $(Self::$variant(c) => c.has_marginal_variance(),)* }
            }

            fn factorised_gaussian(&self) -> bool {
                match self { $(Self::$variant(c) => c.factorised_gaussian(),)* }
            }
        }

        impl<const D: usize> WeightPosterior<D> for AnyPosterior<D> {
            type Dist = Box<dyn PosteriorDist<D>>;

            fn dist(&self) -> Self::Dist {
                match self { $(Self::$variant(p) => Box::new(p.dist()),)* }
            }

            fn shape(&self) -> [usize; D] {
                match self { $(Self::$variant(p) => p.shape(),)* }
            }

            fn is_point(&self) -> bool {
                match self { $(Self::$variant(p) => p.is_point(),)* }
            }

            fn unit_noise(&self) -> Option<McDropout> {
                match self { $(Self::$variant(p) => p.unit_noise(),)* }
            }

            fn fast_path(&self) -> Option<Box<dyn FastPath<D>>> {
                match self { $(Self::$variant(p) => p.fast_path(),)* }
            }

            fn is_correlated(&self) -> bool {
                match self { $(Self::$variant(p) => p.is_correlated(),)* }
            }
        }
    };
}

posterior_families! {
    /// Point estimate (MAP).
    Point(PointConfig => PointPosterior),
    /// Mean-field Gaussian.
    MeanField(MeanFieldConfig => MeanFieldPosterior),
    /// Radial.
    Radial(RadialConfig => RadialPosterior),
    /// Dropout masks (MC dropout, DropConnect).
    Dropout(DropoutConfig => DropoutPosterior),
    /// Low-rank plus diagonal Gaussian.
    LowRank(LowRankConfig => LowRankPosterior),
    /// Full-rank Gaussian (small tensors only: `n²` parameters).
    FullRank(FullRankConfig => FullRankPosterior),
}

impl PosteriorConfig {
    /// A point estimate (MAP).
    pub fn point() -> Self {
        Self::Point(PointConfig::new())
    }

    /// Mean-field Gaussian with ρ₀ = −5 (σ ≈ 0.0067).
    pub fn mean_field() -> Self {
        Self::MeanField(MeanFieldConfig::new())
    }

    /// Radial with ρ₀ = −5.
    pub fn radial() -> Self {
        Self::Radial(RadialConfig::new())
    }

    /// Gal's MC dropout: Bernoulli masks of drop rate `p` on every layer's input units.
    pub fn mc_dropout(p: f64) -> Self {
        Self::Dropout(DropoutConfig::new(p))
    }

    /// DropConnect: a Bernoulli mask of drop rate `p` on every weight.
    pub fn drop_connect(p: f64) -> Self {
        Self::Dropout(DropoutConfig::new(p).with_mask(DropoutMask::Weights))
    }

    /// Low-rank plus diagonal Gaussian of rank `rank` per tensor.
    pub fn low_rank(rank: usize) -> Self {
        Self::LowRank(LowRankConfig::new().with_rank(rank))
    }

    /// Full-rank Gaussian per tensor, with ρ₀ = −5 on the diagonal.
    pub fn full_rank() -> Self {
        Self::FullRank(FullRankConfig::new())
    }
}

impl<const D: usize> PosteriorDist<D> for Box<dyn PosteriorDist<D>> {
    fn family(&self) -> &'static str {
        (**self).family()
    }
    fn mean(&self) -> Tensor<D> {
        (**self).mean()
    }
    fn marginal_variance(&self) -> Option<Tensor<D>> {
        (**self).marginal_variance()
    }
    fn correlated_factor(&self) -> Option<Tensor<2>> {
        (**self).correlated_factor()
    }
    fn sample(&self, n: usize) -> Tensor<2> {
        (**self).sample(n)
    }
    fn perturbation(&self, n: usize) -> Tensor<2> {
        (**self).perturbation(n)
    }
    fn log_q(&self, w: Tensor<2>) -> Result<Tensor<1>, Unsupported> {
        (**self).log_q(w)
    }
    fn entropy(&self) -> Tensor<1> {
        (**self).entropy()
    }
    fn kl(&self, prior: &WeightPrior<D>) -> Tensor<1> {
        (**self).kl(prior)
    }
    fn scaled_point(&self) -> Option<(Tensor<D>, f64)> {
        (**self).scaled_point()
    }
}

/// A stochastic layer or model whose posterior has a KL divergence to its prior.
///
/// Layers implement it for their own parameters; models implement it as the sum over their
/// parts, so that an objective never needs to know a model's insides.
pub trait KlDivergence {
    /// `KL(q ‖ p)` summed over every parameter, as a one-element tensor (a Monte Carlo estimate
    /// where no closed form exists).
    fn kl(&self) -> Tensor<1>;
}

/// The number of entries of a shape.
pub(crate) fn numel<const D: usize>(shape: [usize; D]) -> usize {
    shape.iter().product()
}

/// A flat `[1, numel]` row of a weight-shaped tensor, to broadcast against draws `[n, numel]`.
pub(crate) fn row<const D: usize>(t: Tensor<D>) -> Tensor<2> {
    t.reshape([1, -1])
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
