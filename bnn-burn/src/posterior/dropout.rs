//! Dropout masks as a variational family (Gal 2016 ch. 3): `W = M ⊙ z`, `E[z] = 1`, Bernoulli
//! `z ~ Bern(1−p)/(1−p)` or Gaussian `z ~ N(1, p/(1−p))`, on input units (MC dropout) or on every
//! weight (DropConnect). The noise stays on at prediction. The KL is Gal's weight decay
//! `(1−p)/(2σ₀²) ‖M − μ₀‖²` plus a constant, i.e. `λ = l²(1−p)/(2Nτ)` for the length-scale `l`
//! ([`weight_decay_for_prior`]). More: the book's *MC dropout* page.

use super::{PosteriorDist, PosteriorFamily, TensorSpec, Unsupported, WeightPosterior, numel, row};
use crate::dist::WeightPrior;
use crate::error::{Check, ConfigError};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{Distribution, Tensor};

pub use crate::fused::DropoutNoise;

/// What a dropout mask covers.
#[derive(Config, Debug, PartialEq, Eq, Copy)]
pub enum DropoutMask {
    /// One mask entry per input unit (MC dropout on the layer input).
    Units,
    /// One mask entry per weight (DropConnect).
    Weights,
}

/// Weight decay `λ = l²(1−p)/(2Nτ)` that makes dropout training equal to VI with the prior
/// `N(0, I/l²)` (Gal 2016, §3.2), for `N` training points and model precision `τ`.
pub fn weight_decay_for_prior(length_scale: f64, p: f64, n_train: usize, tau: f64) -> f64 {
    length_scale * length_scale * (1.0 - p) / (2.0 * n_train as f64 * tau)
}

/// The prior length-scale `l = sqrt(2Nτλ/(1−p))` implied by weight decay `λ`.
pub fn prior_length_scale_for_weight_decay(lambda: f64, p: f64, n_train: usize, tau: f64) -> f64 {
    (2.0 * n_train as f64 * tau * lambda / (1.0 - p)).sqrt()
}

/// Model precision `τ = (1−p) l² / (2Nλ)` implied by a weight decay (Gal 2016, §3.3).
pub fn model_precision(length_scale: f64, p: f64, n_train: usize, lambda: f64) -> f64 {
    (1.0 - p) * length_scale * length_scale / (2.0 * n_train as f64 * lambda)
}

/// Dropout that stays active at prediction time: `x ⊙ z` with fresh noise for every element.
#[derive(Module, Debug, Copy)]
pub struct McDropout {
    /// Drop probability `p ∈ [0, 1)`.
    pub p: f64,
    /// Noise distribution.
    #[module(skip)]
    pub noise: DropoutNoise,
}

impl McDropout {
    /// Unit-mean noise shaped like `like`.
    pub fn noise_like<const D: usize>(&self, like: &Tensor<D>) -> Tensor<D> {
        let keep = 1.0 - self.p;
        crate::device::uses_generator();
        match self.noise {
            DropoutNoise::Bernoulli => like.random_like(Distribution::Bernoulli(keep)) / keep,
            DropoutNoise::Gaussian => {
                like.random_like(Distribution::Normal(1.0, (self.p / keep).sqrt()))
            }
        }
    }

    /// `x ⊙ z`, fresh `z` for every element and call.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        if self.p == 0.0 {
            return input;
        }
        let noise = self.noise_like(&input);
        input * noise
    }

    /// [`Self::forward`] with the masks of the fused dropout kernel from `key` when given
    /// (`crate::fused::dropout`: one pass forward and one backward, the masks regenerated),
    /// else from burn's generator.
    pub fn forward_keyed<const D: usize>(&self, input: Tensor<D>, key: Option<u64>) -> Tensor<D> {
        match key {
            Some(key) if self.p > 0.0 => crate::fused::dropout(input, key, self.p, self.noise),
            _ => self.forward(input),
        }
    }
}

/// Configuration of the dropout family.
#[derive(Config, Debug, PartialEq)]
pub struct DropoutConfig {
    /// Drop probability `p ∈ [0, 1)`.
    pub p: f64,
    /// Noise distribution.
    #[config(default = "DropoutNoise::Bernoulli")]
    pub noise: DropoutNoise,
    /// Units (MC dropout) or weights (DropConnect).
    #[config(default = "DropoutMask::Units")]
    pub mask: DropoutMask,
}

/// The dropout family's parameters of one tensor: the weights `M` and the mask.
#[derive(Module, Debug)]
pub struct DropoutPosterior<const D: usize> {
    /// `M`, the mean of `q`.
    pub weight: Param<Tensor<D>>,
    /// The mask distribution.
    pub dropout: McDropout,
    /// What the mask covers.
    #[module(skip)]
    pub mask: DropoutMask,
    /// Axis of the input units (unit masks act along it).
    #[module(skip)]
    pub input_axis: Option<usize>,
}

/// The dropout distribution of one tensor for one step.
#[derive(Debug, Clone)]
pub struct DropoutDist<const D: usize> {
    weight: Tensor<D>,
    dropout: McDropout,
    mask: DropoutMask,
    input_axis: Option<usize>,
}

impl PosteriorFamily for DropoutConfig {
    type Posterior<const D: usize> = DropoutPosterior<D>;

    fn name(&self) -> &'static str {
        match self.mask {
            DropoutMask::Units => "MC dropout",
            DropoutMask::Weights => "DropConnect",
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        Check("DropoutConfig").probability("p", self.p)
    }

    fn init<const D: usize>(&self, mean: Tensor<D>, spec: &TensorSpec<D>) -> DropoutPosterior<D> {
        DropoutPosterior {
            weight: Param::from_tensor(mean),
            dropout: McDropout {
                p: self.p,
                noise: self.noise,
            },
            mask: self.mask,
            input_axis: spec.input_axis,
        }
    }

    fn for_bias(&self) -> Self {
        Self { p: 0.0, ..*self }
    }

    fn point_estimate(&self) -> Option<Self> {
        Some(self.for_bias())
    }
}

impl<const D: usize> WeightPosterior<D> for DropoutPosterior<D> {
    type Dist = DropoutDist<D>;

    fn dist(&self) -> DropoutDist<D> {
        DropoutDist {
            weight: self.weight.val(),
            dropout: self.dropout,
            mask: self.mask,
            input_axis: self.input_axis,
        }
    }

    fn shape(&self) -> [usize; D] {
        self.weight.dims()
    }

    fn is_point(&self) -> bool {
        self.dropout.p == 0.0
    }

    fn unit_noise(&self) -> Option<McDropout> {
        (self.mask == DropoutMask::Units && self.input_axis.is_some()).then_some(self.dropout)
    }
}

impl<const D: usize> DropoutDist<D> {
    /// `n` masks, `[n, numel]`: one entry per input unit broadcast over the other axes, or one
    /// per weight.
    fn masks(&self, n: usize) -> Tensor<2> {
        let shape = self.weight.dims();
        let total = numel(shape);
        let device = self.weight.device();
        let like = |dims: [usize; 4]| Tensor::<4>::zeros(dims, &device);
        match (self.mask, self.input_axis) {
            (DropoutMask::Units, Some(axis)) => {
                let outer: usize = shape[..axis].iter().product();
                let inner: usize = shape[axis + 1..].iter().product();
                let units = self.dropout.noise_like(&like([n, 1, shape[axis], 1]));
                units
                    .expand([n, outer, shape[axis], inner])
                    .reshape([n, total])
            }
            _ => self
                .dropout
                .noise_like(&like([n, 1, 1, total]))
                .reshape([n, total]),
        }
    }
}

impl<const D: usize> PosteriorDist<D> for DropoutDist<D> {
    fn family(&self) -> &'static str {
        "dropout"
    }

    fn mean(&self) -> Tensor<D> {
        self.weight.clone()
    }

    fn marginal_variance(&self) -> Option<Tensor<D>> {
        let p = self.dropout.p;
        Some(self.weight.clone().square() * (p / (1.0 - p)))
    }

    /// `n` draws `M ⊙ z_s`. DropConnect masks come from the fused dropout kernel
    /// (`crate::fused::dropout`: the counter-based generator, one pass forward and one
    /// backward, keyed from burn's device generator); unit masks (one entry per input unit,
    /// broadcast over the weights) from burn's generator.
    fn sample(&self, n: usize) -> Tensor<2> {
        let total = numel(self.weight.dims());
        let rows = row(self.weight.clone()).expand([n, total]);
        if self.dropout.p == 0.0 {
            return rows;
        }
        if self.mask == DropoutMask::Weights {
            let key = crate::fused::KeySource::default().next(&self.weight.device());
            return crate::fused::dropout(rows, key, self.dropout.p, self.dropout.noise);
        }
        rows * self.masks(n)
    }

    fn log_q(&self, _w: Tensor<2>) -> Result<Tensor<1>, Unsupported> {
        Err(Unsupported {
            family: "dropout posterior",
            what: "a dropout mask distribution has no density ln q(w) (its mass sits on points)",
        })
    }

    fn entropy(&self) -> Tensor<1> {
        Tensor::zeros([1], &self.weight.device())
    }

    /// Gaussian prior: Gal's `(1−p)/(2σ₀²)‖M − μ₀‖²` plus `Σ ln(σ₀√(2π))`, which is the prior
    /// cross-entropy of the point `μ₀ + √(1−p)(M − μ₀)`. Other priors: the Monte Carlo prior
    /// cross-entropy of the masked weights.
    fn kl(&self, prior: &WeightPrior<D>) -> Tensor<1> {
        match prior {
            WeightPrior::Gaussian(g) => {
                let scale = (1.0 - self.dropout.p).sqrt();
                g.point_cross_entropy(self.weight.clone(), scale)
            }
            WeightPrior::ScaleMixture(_) => prior.cross_entropy(self),
        }
    }

    fn scaled_point(&self) -> Option<(Tensor<D>, f64)> {
        Some((self.weight.clone(), (1.0 - self.dropout.p).sqrt()))
    }
}
