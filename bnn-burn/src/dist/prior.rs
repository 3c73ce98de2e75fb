//! Priors over weight tensors. [`Prior`] is the serialisable choice a layer configuration holds;
//! at initialisation it becomes a [`WeightPrior`] per tensor, with tensor parameters, so a
//! posterior, moment-matched ([`WeightPrior::from_posterior`]), can be the next task's prior
//! (VCL, Farquhar 2022 ch. 6). A Gaussian's cross-entropy is closed form for any posterior with a
//! marginal variance; Blundell et al.'s scale mixture (2015, eq. 7) is a Monte Carlo average in log
//! space. Guide: the book's *Posteriors and priors* page.

use crate::dist::gaussian_log_density;
use crate::error::{Check, ConfigError};
use crate::fused::Kernels;
use crate::special::{HALF_LN_2PI, logsumexp};
use burn::config::Config;
use burn::module::{
    Content, Devices, Module, ModuleDisplay, ModuleDisplayDefault, ModuleMapper, ModuleVisitor,
    Param,
};
use burn::tensor::{Device, Tensor};

/// A hyperprior over a mean-field posterior's own parameters, `p(μ_i) = N(0, α₀⁻¹)` and
/// `p(σ_i²) = InvGamma(a₀, b₀)` per weight: with it, a layer's term of the objective is
/// `−ln p(μ, σ²) = Σ_i [α₀μ_i²/2 − ½ ln(α₀/2π) + (a₀ + 1) ln σ_i² + b₀/σ_i² − a₀ ln b₀ + ln Γ(a₀)]`
/// in place of `KL(q ‖ p)`: empirical Bayes of the weights' `(μ, σ²)` with a hyperprior
/// (BEDL-Hyper, Haußmann 2021 §5.4; the thesis gives no values).
#[derive(Config, Debug, PartialEq, Copy)]
pub struct HyperPrior {
    /// `α₀` of the means' prior `N(0, α₀⁻¹)` (> 0).
    #[config(default = 1.0)]
    pub mean_precision: f64,
    /// Shape `a₀` of the variances' inverse gamma (> 0).
    #[config(default = 1.0)]
    pub shape: f64,
    /// Scale `b₀` of the variances' inverse gamma (> 0).
    #[config(default = 1.0)]
    pub scale: f64,
}

impl HyperPrior {
    /// Checks that every field is positive and finite; the error names it.
    pub fn validate(&self, config: &'static str) -> Result<(), crate::error::ConfigError> {
        let check = crate::error::Check(config);
        check.positive("prior.mean_precision", self.mean_precision)?;
        check.positive("prior.shape", self.shape)?;
        check.positive("prior.scale", self.scale)
    }

    /// `−ln p(μ, σ²)` summed over the entries (one element); without variances (a point bias)
    /// only the means' term.
    pub fn neg_log_density<const D: usize>(
        &self,
        mean: Tensor<D>,
        variance: Option<Tensor<D>>,
    ) -> Tensor<1> {
        let n = mean.shape().num_elements() as f64;
        let (alpha, a, b) = (self.mean_precision, self.shape, self.scale);
        let means =
            mean.square().sum() * (alpha / 2.0) + n * 0.5 * (std::f64::consts::TAU / alpha).ln();
        match variance {
            None => means,
            Some(v) => {
                let log_v = v.clone().log();
                let inv_gamma = (log_v * (a + 1.0) + v.recip() * b).sum()
                    + n * (crate::special::lgamma_scalar(a) - a * b.ln());
                means + inv_gamma
            }
        }
    }
}

/// The serialisable prior of a layer's weights: scalar hyperparameters shared by every entry,
/// and what the layer's term of the objective is under it (a KL, clamped or not, or a
/// hyperprior's density).
#[derive(Config, Debug, PartialEq, Copy)]
pub enum Prior {
    /// Independent Gaussians `N(mean, std²)`.
    Gaussian {
        /// Prior mean μ₀.
        mean: f64,
        /// Prior standard deviation σ₀ (> 0).
        std: f64,
    },
    /// Scale mixture `pi · N(0, sigma1²) + (1 − pi) · N(0, sigma2²)` (Blundell et al. 2015).
    ScaleMixture {
        /// Weight of the first component, in (0, 1).
        pi: f64,
        /// Standard deviation of the first (wide) component (> 0).
        sigma1: f64,
        /// Standard deviation of the second (narrow) component (> 0).
        sigma2: f64,
    },
    /// `N(mean, std²)` whose KL clamps each weight's `ln σ²` to `log_var_range = (lo, hi)`, so
    /// that it neither pulls a variance below `e^lo` up nor one above `e^hi` down
    /// (`KL = ½Σ[α(μ² + σ̃²) − 1 − ln ασ̃²]`, `σ̃² = e^{clamp(ln σ², lo, hi)}`; Haußmann's VBP
    /// code, `(−11, 11)`, 2021 §2.6 of the digest). Mean-field families only.
    ClampedGaussian {
        /// Prior mean μ₀.
        mean: f64,
        /// Prior standard deviation σ₀ (> 0).
        std: f64,
        /// `(lo, hi)`, finite, `lo < hi`.
        log_var_range: (f64, f64),
    },
    /// A hyperprior over a mean-field posterior's own parameters: the layer's term of the
    /// objective is its `−ln p(μ, σ²)` in place of `KL(q ‖ p)` ([`HyperPrior`]; BEDL-Hyper,
    /// Haußmann 2021 §5.4). Mean-field families only.
    Hyper(HyperPrior),
}

impl Default for Prior {
    /// The unit Gaussian `N(0, 1)`.
    fn default() -> Self {
        Prior::gaussian(1.0)
    }
}

impl Prior {
    /// A zero-mean Gaussian prior with standard deviation `std`.
    pub fn gaussian(std: f64) -> Self {
        Prior::Gaussian { mean: 0.0, std }
    }

    /// Gal's prior `N(0, I/l²)` of prior length-scale `l` (Gal 2016, §3.2): `σ₀ = 1/l`.
    pub fn from_length_scale(length_scale: f64) -> Self {
        Prior::gaussian(1.0 / length_scale)
    }

    /// This Gaussian with `ln σ²` clamped to `[lo, hi]` inside its KL
    /// ([`Prior::ClampedGaussian`]; a clamped one takes the new range). Only a Gaussian clamps:
    /// a scale mixture or a hyperprior is returned as it is.
    pub fn clamped(self, lo: f64, hi: f64) -> Self {
        match self {
            Prior::Gaussian { mean, std } | Prior::ClampedGaussian { mean, std, .. } => {
                Prior::ClampedGaussian {
                    mean,
                    std,
                    log_var_range: (lo, hi),
                }
            }
            other => other,
        }
    }

    /// The clamp of `ln σ²` inside the KL ([`Prior::ClampedGaussian`]).
    pub fn log_var_range(&self) -> Option<(f64, f64)> {
        match *self {
            Prior::ClampedGaussian { log_var_range, .. } => Some(log_var_range),
            _ => None,
        }
    }

    /// The hyperprior whose density replaces the KL ([`Prior::Hyper`]).
    pub fn hyperprior(&self) -> Option<HyperPrior> {
        match *self {
            Prior::Hyper(h) => Some(h),
            _ => None,
        }
    }

    /// Checks the hyperparameters; `config` names the configuration holding this prior.
    pub fn validate(&self, config: &'static str) -> Result<(), ConfigError> {
        let check = Check(config);
        match *self {
            Prior::Gaussian { mean, std } => {
                check.finite("prior.mean", mean)?;
                check.positive("prior.std", std)
            }
            Prior::ClampedGaussian {
                mean,
                std,
                log_var_range: (lo, hi),
            } => {
                check.finite("prior.mean", mean)?;
                check.positive("prior.std", std)?;
                if lo.is_finite() && hi.is_finite() && lo < hi {
                    Ok(())
                } else {
                    Err(ConfigError {
                        config,
                        field: "prior.log_var_range",
                        value: format!("({lo}, {hi})"),
                        expected: "finite (lo, hi) with lo < hi",
                    })
                }
            }
            Prior::Hyper(h) => h.validate(config),
            Prior::ScaleMixture { pi, sigma1, sigma2 } => {
                check.open_unit("prior.pi", pi)?;
                check.positive("prior.sigma1", sigma1)?;
                check.positive("prior.sigma2", sigma2)
            }
        }
    }

    /// The prior of one `D`-dimensional tensor: scalar parameters stored as broadcastable
    /// `[1; D]` tensors; `mc_samples` draws estimate a cross-entropy without closed form. A
    /// clamped Gaussian's is its Gaussian (the layer keeps the clamp); a hyperprior's, which
    /// plays no part in the objective, the unit Gaussian.
    pub fn weight_prior<const D: usize>(
        &self,
        mc_samples: usize,
        device: &Device,
    ) -> WeightPrior<D> {
        match *self {
            Prior::Gaussian { mean, std } | Prior::ClampedGaussian { mean, std, .. } => {
                WeightPrior::Gaussian(GaussianPrior::scalar(mean, std, device))
            }
            Prior::Hyper(_) => WeightPrior::Gaussian(GaussianPrior::scalar(0.0, 1.0, device)),
            Prior::ScaleMixture { pi, sigma1, sigma2 } => {
                WeightPrior::ScaleMixture(ScaleMixturePrior {
                    pi,
                    sigma1,
                    sigma2,
                    mc_samples: mc_samples.max(1),
                })
            }
        }
    }
}

/// An entrywise Gaussian `N(mean, std²)` whose parameters are tensors, either of the weight's
/// shape or `[1; D]` (broadcast). They are constants of the module: moved with it and saved in
/// its records (a checkpoint keeps the prior it was trained under), never trained.
#[derive(Debug, Clone)]
pub struct GaussianPrior<const D: usize> {
    mean: Param<Tensor<D>>,
    std: Param<Tensor<D>>,
    /// `(μ₀, σ₀)` when both are scalars: the cross-entropy then takes two reductions. Rebuilt
    /// from the tensors whenever they are mapped (a record loaded).
    scalar: Option<(f64, f64)>,
}

/// A constant of a module: a parameter that is saved with it and never receives a gradient.
fn constant<const D: usize>(t: Tensor<D>) -> Param<Tensor<D>> {
    Param::from_tensor(t).set_require_grad(false)
}

impl<const D: usize> GaussianPrior<D> {
    /// `N(mean, std²)` entrywise, each of the weight's shape or `[1; D]`.
    pub fn new(mean: Tensor<D>, std: Tensor<D>) -> Self {
        let (mean, std) = (constant(mean), constant(std));
        let scalar = scalar_of(&mean, &std);
        Self { mean, std, scalar }
    }

    /// `N(μ₀, σ₀²)` with scalar parameters, as `[1; D]` tensors on `device`.
    pub fn scalar(mean: f64, std: f64, device: &Device) -> Self {
        Self {
            mean: constant(Tensor::full([1; D], mean, device)),
            std: constant(Tensor::full([1; D], std, device)),
            scalar: Some((mean, std)),
        }
    }

    /// μ₀.
    pub fn mean(&self) -> Tensor<D> {
        self.mean.val()
    }

    /// σ₀.
    pub fn std(&self) -> Tensor<D> {
        self.std.val()
    }

    /// `(μ₀, σ₀)` when both are scalars.
    pub fn scalars(&self) -> Option<(f64, f64)> {
        self.scalar
    }
}

/// `(μ₀, σ₀)` of one-element tensors (read once, when the prior is built or loaded).
fn scalar_of<const D: usize>(
    mean: &Param<Tensor<D>>,
    std: &Param<Tensor<D>>,
) -> Option<(f64, f64)> {
    let (m, s) = (mean.val(), std.val());
    match m.shape().num_elements() == 1 && s.shape().num_elements() == 1 {
        true => Some((crate::host::to_vec(m)[0], crate::host::to_vec(s)[0])),
        false => None,
    }
}

const CONTAINER: &str = "Struct:GaussianPrior";

/// The two tensors as a module's fields `mean` and `std` (records name them so); no trainable
/// parameters.
impl<const D: usize> Module for GaussianPrior<D> {
    fn collect_devices(&self, devices: Devices) -> Devices {
        self.std.collect_devices(self.mean.collect_devices(devices))
    }

    fn fork(self, device: &Device) -> Self {
        Self {
            mean: self.mean.fork(device),
            std: self.std.fork(device),
            scalar: self.scalar,
        }
    }

    fn to_device(self, device: &Device) -> Self {
        Self {
            mean: self.mean.to_device(device),
            std: self.std.to_device(device),
            scalar: self.scalar,
        }
    }

    fn train(self) -> Self {
        Self {
            mean: self.mean.train(),
            std: self.std.train(),
            scalar: self.scalar,
        }
    }

    fn valid(&self) -> Self {
        Self {
            mean: self.mean.valid(),
            std: self.std.valid(),
            scalar: self.scalar,
        }
    }

    fn materialize(self) -> Self {
        Self {
            mean: self.mean.materialize(),
            std: self.std.materialize(),
            scalar: self.scalar,
        }
    }

    fn num_params(&self) -> usize {
        0
    }

    fn visit<V: ModuleVisitor>(&self, visitor: &mut V) {
        visitor.enter_module("mean", CONTAINER);
        self.mean.visit(visitor);
        visitor.exit_module("mean", CONTAINER);
        visitor.enter_module("std", CONTAINER);
        self.std.visit(visitor);
        visitor.exit_module("std", CONTAINER);
    }

    fn map<M: ModuleMapper>(self, mapper: &mut M) -> Self {
        mapper.enter_module("mean", CONTAINER);
        let mean = Module::map(self.mean, mapper);
        mapper.exit_module("mean", CONTAINER);
        mapper.enter_module("std", CONTAINER);
        let std = Module::map(self.std, mapper);
        mapper.exit_module("std", CONTAINER);
        let scalar = scalar_of(&mean, &std);
        Self { mean, std, scalar }
    }
}

impl<const D: usize> ModuleDisplayDefault for GaussianPrior<D> {
    fn content(&self, content: Content) -> Option<Content> {
        let text = match self.scalar {
            Some((m, s)) => format!("N({m}, {s}²)"),
            None => format!("N(μ₀, σ₀²) per weight, {:?}", self.mean.val().dims()),
        };
        content.add_formatted(&text).optional()
    }
}

impl<const D: usize> ModuleDisplay for GaussianPrior<D> {}

impl<const D: usize> GaussianPrior<D> {
    /// `E_q[−ln p(w)]` for a `q` with this entrywise `mean` and marginal variance `var` (`None`:
    /// a point mass): `Σ (v + (m − μ₀)²)/(2σ₀²) + Σ ln σ₀ + (n/2) ln 2π`.
    pub fn cross_entropy_moments(&self, mean: Tensor<D>, var: Option<Tensor<D>>) -> Tensor<1> {
        let n = mean.shape().num_elements() as f64;
        if let Some((m0, s0)) = self.scalar {
            let centred = if m0 == 0.0 { mean } else { mean - m0 };
            let quadratic = match var {
                Some(v) => centred.square().sum() + v.sum(),
                None => centred.square().sum(),
            };
            return quadratic / (2.0 * s0 * s0) + n * (s0.ln() + HALF_LN_2PI);
        }
        let centred = (mean - self.mean()).square();
        let spread = match var {
            Some(v) => v + centred,
            None => centred,
        };
        let std = self.std();
        let broadcast = n / std.shape().num_elements() as f64;
        (spread / (std.clone().square() * 2.0)).sum()
            + std.log().sum() * broadcast
            + n * HALF_LN_2PI
    }

    /// `−ln p(w')` at the point `w' = μ₀ + scale·(w − μ₀)` (MAP's penalty at `scale = 1`; Gal's
    /// dropout KL at `scale = √(1−p)`).
    pub fn point_cross_entropy(&self, w: Tensor<D>, scale: f64) -> Tensor<1> {
        let shrunk = match (self.scalar, scale) {
            (_, 1.0) => w,
            (Some((0.0, _)), _) => w * scale,
            _ => self.mean() + (w - self.mean()) * scale,
        };
        self.cross_entropy_moments(shrunk, None)
    }

    /// [`Self::point_cross_entropy`] on `kernels`: with scalar parameters on
    /// [`Kernels::Fused`], the quadratic term `scale²·Σ (w − μ₀)²/(2σ₀²)` is one fused op
    /// (`crate::fused::quadratic`: one pass forward, one backward); otherwise the composition
    /// of burn ops.
    pub(crate) fn point_cross_entropy_on(
        &self,
        w: Tensor<D>,
        scale: f64,
        kernels: Kernels,
    ) -> Tensor<1> {
        match (kernels, self.scalar) {
            (Kernels::Fused, Some((m0, s0))) => {
                let n = w.shape().num_elements() as f64;
                let coef = scale * scale / (2.0 * s0 * s0);
                crate::fused::quadratic(w, m0 as f32, coef as f32) + n * (s0.ln() + HALF_LN_2PI)
            }
            _ => self.point_cross_entropy(w, scale),
        }
    }
}

/// The scale-mixture prior of Blundell et al. (2015), with the number of posterior draws that
/// estimate its cross-entropy.
#[derive(Module, Debug, Copy)]
pub struct ScaleMixturePrior {
    /// Weight of the first component.
    pub pi: f64,
    /// Standard deviation of the first component.
    pub sigma1: f64,
    /// Standard deviation of the second component.
    pub sigma2: f64,
    /// Monte Carlo draws per cross-entropy estimate.
    pub mc_samples: usize,
}

/// The prior over one weight tensor.
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum WeightPrior<const D: usize> {
    /// Entrywise Gaussian with tensor parameters.
    Gaussian(GaussianPrior<D>),
    /// Two-component scale mixture.
    ScaleMixture(ScaleMixturePrior),
}

/// `[S, n]` or `[1, n]` view of a tensor for broadcasting against flat draws `[S, n]`.
fn row<const D: usize>(t: Tensor<D>) -> Tensor<2> {
    t.reshape([1, -1])
}

impl<const D: usize> WeightPrior<D> {
    /// A Gaussian prior with tensor mean and standard deviation (each of the weight's shape or
    /// `[1; D]`), e.g. centred on pretrained weights (MOPED-style priors).
    pub fn gaussian(mean: Tensor<D>, std: Tensor<D>) -> Self {
        WeightPrior::Gaussian(GaussianPrior::new(mean, std))
    }

    /// `ln p(w_s)` summed over the entries of each flat draw: `w [S, n]` → `[S]`.
    pub fn log_prob(&self, w: Tensor<2>) -> Tensor<1> {
        let s = w.dims()[0];
        let elementwise = match self {
            WeightPrior::Gaussian(g) => {
                gaussian_log_density(w, row(g.mean()), row(g.std()).square())
            }
            WeightPrior::ScaleMixture(m) => {
                let device = w.device();
                let zero = Tensor::<2>::zeros([1, 1], &device);
                let var = |sd: f64| Tensor::<2>::full([1, 1], sd * sd, &device);
                let a = gaussian_log_density(w.clone(), zero.clone(), var(m.sigma1)) + m.pi.ln();
                let b = gaussian_log_density(w, zero, var(m.sigma2)) + (1.0 - m.pi).ln();
                let both = Tensor::stack::<3>(vec![a, b], 0);
                logsumexp(both, 0).squeeze_dim(0)
            }
        };
        elementwise.sum_dim(1).reshape([s])
    }
}

/// What the fused kernels read of a prior for a KL: its cross-entropy's parameters. The
/// posterior family adds its entropy ([`crate::posterior::FastPath::kl_plan`]).
#[derive(Debug, Clone)]
pub enum PriorTerms {
    /// `N(μ₀, σ₀²)` for every entry.
    Scalar {
        /// `μ₀`.
        mean: f64,
        /// `σ₀`.
        std: f64,
    },
    /// A mean and a standard deviation per entry, flat, in the weight's order.
    PerWeight(Box<[Tensor<1>; 2]>),
    /// A scale mixture: its terms and the number of posterior draws of its Monte Carlo KL.
    Mixture(crate::fused::MixtureTerms, usize),
}

impl<const D: usize> WeightPrior<D> {
    /// The prior's terms for a tensor of `shape`: a Gaussian's scalars or, when its mean and
    /// standard deviation are tensors of `shape` or `[1; D]` (expanded), its entries; a scale
    /// mixture's terms. `None` for parameters of another shape.
    pub fn fused_terms(&self, shape: [usize; D]) -> Option<PriorTerms> {
        match self {
            WeightPrior::Gaussian(g) => match g.scalars() {
                Some((mean, std)) => Some(PriorTerms::Scalar { mean, std }),
                None => {
                    let flat = |t: Tensor<D>| match t.dims() {
                        d if d == shape => Some(t.reshape([-1])),
                        d if d.iter().all(|&n| n == 1) => Some(t.expand(shape).reshape([-1])),
                        _ => None,
                    };
                    let entries = [flat(g.mean())?, flat(g.std())?];
                    Some(PriorTerms::PerWeight(Box::new(entries)))
                }
            },
            WeightPrior::ScaleMixture(m) => Some(PriorTerms::Mixture(
                crate::fused::MixtureTerms::new(m.pi, m.sigma1, m.sigma2),
                m.mc_samples,
            )),
        }
    }
}

#[cfg(test)]
#[path = "prior_tests.rs"]
mod tests;
