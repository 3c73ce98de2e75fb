//! Variational inference on a [`LogDensity`]: the ELBO `E_q[ln p̃(θ) − ln q(θ)]` maximised by
//! reparameterised Monte Carlo gradients, then judged by PSIS (Yao et al. 2018).

use super::bnn::BnnTarget;
use super::family::FlatFamily;
use super::psis::{Psis, PsisError, psis};
use super::target::LogDensity;
use crate::error::{Check, ConfigError};
use crate::fused::Kernels;
use crate::host::to_vec;
use crate::layers::FlatLayout;
use crate::likelihood::Likelihood;
use crate::nets::{Bnn, Body};
use crate::posterior::Unsupported;
use crate::train::OptimizerConfig;
use burn::config::Config;
use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

/// How to fit a [`FlatFamily`] to a [`LogDensity`].
#[derive(Config, Debug, PartialEq)]
pub struct ViConfig {
    /// Optimiser steps.
    #[config(default = 10_000)]
    pub iterations: usize,
    /// Draws per step for the ELBO's gradient.
    #[config(default = 16)]
    pub samples: usize,
    /// The learning rate.
    #[config(default = 1e-2)]
    pub learning_rate: f64,
    /// The optimiser.
    #[config(default = "OptimizerConfig::adam()")]
    pub optimizer: OptimizerConfig,
    /// The seed of the device's generator for the fit's draws.
    #[config(default = 0)]
    pub seed: u64,
    /// Clips the gradient's global norm to this before each update (`None`: no clipping;
    /// deep flows need it).
    #[config(default = "None")]
    pub max_grad_norm: Option<f64>,
    /// The share of steps that may leave out a draw or zero a gradient entry (beyond 10 in
    /// the first 1000) before the fit stops as unstable.
    #[config(default = 0.01)]
    pub max_irregular: f64,
}

impl ViConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = Check("ViConfig");
        check.at_least_one("iterations", self.iterations)?;
        check.at_least_one("samples", self.samples)?;
        check.positive("learning_rate", self.learning_rate)?;
        if let Some(c) = self.max_grad_norm {
            check.positive("max_grad_norm", c)?;
        }
        check.probability("max_irregular", self.max_irregular)?;
        self.optimizer.validate()
    }
}

/// Why a variational fit stopped.
#[derive(Debug, thiserror::Error)]
pub enum ViError {
    /// A configuration field is out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The family has no density.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// The target and the family disagree on `D`.
    #[error("the family is over {family} entries, the target over {target}")]
    Dimension {
        /// The family's `D`.
        family: usize,
        /// The target's `D`.
        target: usize,
    },
    /// The ELBO estimate stopped being finite.
    #[error(
        "the ELBO estimate is {value} at iteration {iteration}: lower `learning_rate` or raise `samples`"
    )]
    NotFinite {
        /// The first iteration whose estimate is not finite.
        iteration: usize,
        /// Its value.
        value: f64,
    },
    /// Too many steps left out a draw or zeroed a gradient entry.
    #[error(
        "{irregular} of the first {steps} steps left out a draw or zeroed a gradient entry \
         (more than `max_irregular`): lower `learning_rate`, set `max_grad_norm` or raise \
         `samples`"
    )]
    Unstable {
        /// The irregular steps.
        irregular: usize,
        /// Steps so far.
        steps: usize,
    },
    /// PSIS could not run on the evaluation's draws.
    #[error(transparent)]
    Psis(#[from] PsisError),
}

/// Iterations whose ELBO estimates are read back together (one device sync).
const READ_EVERY: usize = 100;

/// A fitted family and its per-iteration ELBO estimates (each from [`ViConfig::samples`] draws).
#[derive(Debug, Clone)]
pub struct ViFit<F> {
    /// The fitted family (on the device it was trained on).
    pub family: F,
    /// The ELBO estimate of every iteration.
    pub elbo_trace: Vec<f64>,
    /// Draws left out of their step because `ln p̃ − ln q` was not finite (an iteration
    /// with none finite stops the fit).
    pub dropped_draws: usize,
    /// Steps whose gradient had entries that were not finite, zeroed before the update.
    pub zeroed_gradient_steps: usize,
    /// The gradient's global norm at every step, before clipping.
    pub grad_norm_trace: Vec<f64>,
}

/// Maximises the ELBO of `family` (built on an autodiff device, e.g.
/// [`crate::training_device`]) for `target`, [`ViConfig::iterations`] steps of [`ViTrainer`].
///
/// # Errors
/// A configuration out of range, a family without density, mismatched dimensions, or an ELBO
/// estimate that is not finite (the error names the iteration).
pub fn fit<T: LogDensity, F: FlatFamily>(
    target: &T,
    family: F,
    config: &ViConfig,
) -> Result<ViFit<F>, ViError> {
    let mut trainer = ViTrainer::new(family, config)?;
    for _ in 0..config.iterations {
        trainer.step(target)?;
    }
    trainer.finish()
}

/// A variational fit one step at a time, for loops the caller owns: a new target per step
/// (minibatches, [`BnnTarget::epoch`]), a validation check between epochs. Each step draws
/// [`ViConfig::samples`] from `q` and takes one optimiser step on the ELBO estimate; the
/// estimates are read back in groups of 100, so a non-finite one is reported up to 100 steps
/// late ([`ViTrainer::finish`] checks the rest).
pub struct ViTrainer<F: FlatFamily> {
    family: Option<F>,
    optim: burn::optim::ModuleOptimizer,
    learning_rate: f64,
    samples: usize,
    max_grad_norm: Option<f64>,
    max_irregular: f64,
    trace: Vec<f64>,
    norms: Vec<f64>,
    /// Per pending step: the ELBO estimate, the draws kept, the gradient entries zeroed and
    /// the squared gradient norm, `[4]`.
    pending: Vec<Tensor<1>>,
    dropped: usize,
    zeroed: usize,
    irregular: usize,
}

impl<F: FlatFamily> ViTrainer<F> {
    /// A trainer of `family` (on an autodiff device) under `config`; seeds the family's device
    /// with [`ViConfig::seed`] ([`ViConfig::iterations`] is [`fit`]'s alone).
    ///
    /// # Errors
    /// A configuration out of range or a family without density.
    pub fn new(family: F, config: &ViConfig) -> Result<Self, ViError> {
        config.validate()?;
        family.sample_log_q(1)?;
        let device = family
            .devices()
            .first()
            .cloned()
            .unwrap_or_else(crate::training_device);
        crate::device::uses_generator();
        device.seed(config.seed);
        Ok(Self {
            family: Some(family),
            optim: config.optimizer.init(Kernels::Reference),
            learning_rate: config.learning_rate,
            samples: config.samples,
            max_grad_norm: config.max_grad_norm,
            max_irregular: config.max_irregular,
            trace: Vec::new(),
            norms: Vec::new(),
            pending: Vec::with_capacity(READ_EVERY),
            dropped: 0,
            zeroed: 0,
            irregular: 0,
        })
    }

    /// One optimiser step on the ELBO of `target`.
    ///
    /// # Errors
    /// Mismatched dimensions, or (every 100 steps) an ELBO estimate that is not finite.
    pub fn step<T: LogDensity + ?Sized>(&mut self, target: &T) -> Result<(), ViError> {
        let family = self.family.take().expect("a trainer holds its family");
        if family.dim() != target.dim() {
            let err = ViError::Dimension {
                family: family.dim(),
                target: target.dim(),
            };
            self.family = Some(family);
            return Err(err);
        }
        let (theta, log_q) = family.sample_log_q(self.samples)?;
        // A draw whose ratio overflows (a flow's tail event deep in a funnel's neck, where
        // `ln p̃` is below f32's range) is left out of the step, and counted.
        let ratio = target.log_density(theta) - log_q;
        let finite = ratio.clone().is_finite();
        let kept = finite.clone().float().sum();
        let elbo = ratio.mask_fill(finite.bool_not(), 0.0).sum() / kept.clone();
        let mut grads = GradientsParams::from_grads(elbo.clone().neg().backward(), &family);
        // A left-out draw can still leave 0·∞ = NaN in the backward pass (its intermediates
        // overflowed); such entries are zeroed, and the step counted.
        let mut sanitise = Sanitise {
            grads: &mut grads,
            non_finite: None,
            norm_sq: None,
        };
        family.visit(&mut sanitise);
        let device = elbo.device();
        let zero = || Tensor::<1>::zeros([1], &device);
        let non_finite = sanitise.non_finite.take().unwrap_or_else(zero);
        let norm_sq = sanitise.norm_sq.take().unwrap_or_else(zero);
        if let Some(c) = self.max_grad_norm {
            let factor = (norm_sq.clone().sqrt() + 1e-12)
                .recip()
                .mul_scalar(c)
                .clamp_max(1.0);
            family.visit(&mut Scale {
                grads: &mut grads,
                factor,
            });
        }
        self.pending.push(Tensor::cat(
            vec![elbo.detach(), kept, non_finite, norm_sq],
            0,
        ));
        self.family = Some(self.optim.step(self.learning_rate, family, grads));
        if self.pending.len() == READ_EVERY {
            self.flush()?;
        }
        Ok(())
    }

    /// Reads the pending steps back.
    fn flush(&mut self) -> Result<(), ViError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let stats = to_vec(Tensor::cat(std::mem::take(&mut self.pending), 0));
        let first = self.trace.len();
        for (i, step) in stats.chunks(4).enumerate() {
            let [value, kept, zeroed, norm_sq] = [step[0], step[1], step[2], step[3]];
            if !value.is_finite() {
                return Err(ViError::NotFinite {
                    iteration: first + i,
                    value,
                });
            }
            let dropped = self.samples - kept as usize;
            self.dropped += dropped;
            self.zeroed += usize::from(zeroed > 0.0);
            self.irregular += usize::from(dropped > 0 || zeroed > 0.0);
            self.trace.push(value);
            self.norms.push(norm_sq.sqrt());
        }
        let steps = self.trace.len();
        if self.irregular as f64 > self.max_irregular * steps.max(1000) as f64 {
            return Err(ViError::Unstable {
                irregular: self.irregular,
                steps,
            });
        }
        Ok(())
    }

    /// The family as it stands.
    pub fn family(&self) -> &F {
        self.family.as_ref().expect("a trainer holds its family")
    }

    /// Steps taken so far.
    pub fn steps(&self) -> usize {
        self.trace.len() + self.pending.len()
    }

    /// The fitted family and its ELBO trace.
    ///
    /// # Errors
    /// An ELBO estimate since the last read that is not finite.
    pub fn finish(mut self) -> Result<ViFit<F>, ViError> {
        self.flush()?;
        Ok(ViFit {
            family: self.family.take().expect("a trainer holds its family"),
            elbo_trace: self.trace,
            dropped_draws: self.dropped,
            zeroed_gradient_steps: self.zeroed,
            grad_norm_trace: self.norms,
        })
    }
}

/// Zeroes the entries of a module's gradients that are not finite, counting them and summing
/// the squares of the rest on the device.
pub(super) struct Sanitise<'a> {
    pub(super) grads: &'a mut GradientsParams,
    pub(super) non_finite: Option<Tensor<1>>,
    pub(super) norm_sq: Option<Tensor<1>>,
}

/// `a + b`, either absent.
fn add(a: Option<Tensor<1>>, b: Tensor<1>) -> Option<Tensor<1>> {
    Some(match a {
        Some(a) => a + b,
        None => b,
    })
}

impl burn::module::ModuleVisitor for Sanitise<'_> {
    fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<D>>) {
        let Some(g) = self.grads.remove::<D>(param.id) else {
            return;
        };
        let bad = g.clone().is_finite().bool_not();
        self.non_finite = add(self.non_finite.take(), bad.clone().float().sum());
        let g = g.mask_fill(bad, 0.0);
        self.norm_sq = add(self.norm_sq.take(), g.clone().square().sum());
        self.grads.register(param.id, g);
    }
}

/// Multiplies a module's gradients by `factor` (`[1]`).
struct Scale<'a> {
    grads: &'a mut GradientsParams,
    factor: Tensor<1>,
}

impl burn::module::ModuleVisitor for Scale<'_> {
    fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<D>>) {
        if let Some(g) = self.grads.remove::<D>(param.id) {
            let factor = self.factor.clone().reshape([1; D]);
            self.grads.register(param.id, g * factor);
        }
    }
}

/// The evaluation of a fitted `q` by `draws` fresh draws.
#[derive(Debug, Clone)]
pub struct ViReport {
    /// The ELBO estimate `mean(ln p̃ − ln q)`.
    pub elbo: f64,
    /// Its Monte Carlo standard error.
    pub elbo_se: f64,
    /// The importance-sampling estimate of `ln ∫ p̃` (the log evidence when `p̃` is a joint):
    /// `ln mean exp(ln p̃ − ln q)`.
    pub log_evidence: f64,
    /// PSIS of the log ratios: `k̂` and the smoothed weights.
    pub psis: Psis,
    /// The log ratios `ln p̃(θ_s) − ln q(θ_s)`, for cross-checks.
    pub log_ratios: Vec<f64>,
}

/// Draws per chunk of an evaluation.
const EVAL_CHUNK: usize = 4096;

/// ELBO, importance-sampled evidence and PSIS `k̂` of `family` for `target`, from `draws` draws
/// of the device's generator (in chunks, without autodiff).
///
/// # Errors
/// A family without density, mismatched dimensions, or ratios PSIS rejects (fewer than 10, NaN).
pub fn evaluate<T: LogDensity, F: FlatFamily>(
    target: &T,
    family: &F,
    draws: usize,
) -> Result<ViReport, ViError> {
    if family.dim() != target.dim() {
        return Err(ViError::Dimension {
            family: family.dim(),
            target: target.dim(),
        });
    }
    let q = family.valid();
    let mut log_ratios = Vec::with_capacity(draws);
    while log_ratios.len() < draws {
        let n = EVAL_CHUNK.min(draws - log_ratios.len());
        let (theta, log_q) = q.sample_log_q(n)?;
        log_ratios.extend(to_vec(target.log_density(theta) - log_q));
    }
    report(log_ratios)
}

/// ELBO, evidence and PSIS of log ratios `ln p̃(θ_s) − ln q(θ_s)`, `θ_s ~ q`.
fn report(log_ratios: Vec<f64>) -> Result<ViReport, ViError> {
    let psis = psis(&log_ratios)?;
    let n = log_ratios.len() as f64;
    let elbo = log_ratios.iter().sum::<f64>() / n;
    let var = log_ratios.iter().map(|r| (r - elbo).powi(2)).sum::<f64>() / (n - 1.0);
    let max = log_ratios.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let log_evidence = max + (log_ratios.iter().map(|r| (r - max).exp()).sum::<f64>() / n).ln();
    Ok(ViReport {
        elbo,
        elbo_se: (var / n).sqrt(),
        log_evidence,
        psis,
        log_ratios,
    })
}

/// Whether a trained network's variational posterior (per-layer families: mean-field, radial,
/// low-rank, full-rank) can be trusted on `(input, target)`: its ELBO, the importance-sampled
/// evidence and PSIS `k̂` of `draws` joint draws, the log joint from the layers' priors and the
/// likelihood ([`BnnTarget`]). Give a subset of the rows when the data are large: each chunk of
/// draws runs a forward pass over all of them.
///
/// # Errors
/// A layer without a density (point weights, dropout masks), data of mismatched lengths, or
/// ratios PSIS rejects.
pub fn network_check<B: Body, L: Likelihood>(
    net: &Bnn<B, L>,
    input: B::Input,
    target: L::Target,
    draws: usize,
) -> Result<ViReport, ViError> {
    let net = net.valid();
    let joint = BnnTarget::new(net.clone(), input, target)?;
    let chunk = (EVAL_CHUNK * 64 / joint.rows().max(1)).clamp(1, EVAL_CHUNK);
    let mut log_ratios = Vec::with_capacity(draws);
    while log_ratios.len() < draws {
        let n = chunk.min(draws - log_ratios.len());
        let (layers, log_q) = net.draws_with_log_q(n)?;
        let theta = FlatLayout::flatten(layers);
        log_ratios.extend(to_vec(joint.log_density(theta) - log_q));
    }
    report(log_ratios)
}
