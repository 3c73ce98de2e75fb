//! Stochastic-gradient MCMC over minibatches: SGLD (Welling & Teh 2011) and SGHMC (Chen et al.
//! 2014), the baselines of Haußmann (2021) ch. 6, on a [`BnnTarget`] or any source of unbiased
//! log-density estimates ([`Minibatches`]). No Metropolis correction: the step size sets a bias.

use super::bnn::BnnTarget;
use super::target::LogDensity;
use crate::error::{Check, ConfigError};
use crate::host::HostNormals;
use crate::likelihood::Likelihood;
use crate::nets::Body;
use burn::config::Config;

/// Which dynamics.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum SgSampler {
    /// `θ ← θ + (ε/2) ∇ln p̃ + N(0, ε)`.
    Sgld,
    /// `v ← (1 − α) v + ε ∇ln p̃ + N(0, 2αε)`, `θ ← θ + v` (Chen et al. 2014 eq. 15, the
    /// gradient-noise estimate β̂ = 0).
    Sghmc {
        /// The friction `α ∈ (0, 1]`.
        friction: f64,
    },
}

/// The settings of [`sg_sample`].
#[derive(Config, Debug, PartialEq)]
pub struct SgMcmcConfig {
    /// The dynamics.
    #[config(default = "SgSampler::Sgld")]
    pub sampler: SgSampler,
    /// The step size `ε` (constant).
    pub step_size: f64,
    /// Rows per minibatch.
    #[config(default = 100)]
    pub batch_size: usize,
    /// Steps before the first kept draw.
    #[config(default = 1000)]
    pub burn_in: usize,
    /// Kept draws.
    #[config(default = 1000)]
    pub draws: usize,
    /// Steps between kept draws.
    #[config(default = 10)]
    pub thin: usize,
    /// The seed of the minibatches and the noise.
    #[config(default = 0)]
    pub seed: u64,
}

impl SgMcmcConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = Check("SgMcmcConfig");
        check.positive("step_size", self.step_size)?;
        check.at_least_one("batch_size", self.batch_size)?;
        check.at_least_one("draws", self.draws)?;
        check.at_least_one("thin", self.thin)?;
        if let SgSampler::Sghmc { friction } = self.sampler
            && !(friction > 0.0 && friction <= 1.0)
        {
            return Err(ConfigError {
                config: "SgMcmcConfig",
                field: "sampler.friction",
                value: friction.to_string(),
                expected: "a number in (0, 1]",
            });
        }
        Ok(())
    }
}

/// Unbiased estimates of a log density, one minibatch at a time.
pub trait Minibatches {
    /// The target of one minibatch.
    type Target: LogDensity;

    /// A minibatch of `batch_size` rows drawn with `rng`, its likelihood scaled to the whole.
    fn draw(&self, batch_size: usize, rng: &mut HostNormals) -> Self::Target;
}

impl<B: Body, L: Likelihood> Minibatches for BnnTarget<B, L> {
    type Target = BnnTarget<B, L>;

    /// Rows without replacement (a partial Fisher–Yates shuffle); the whole set when
    /// `batch_size` covers it.
    fn draw(&self, batch_size: usize, rng: &mut HostNormals) -> Self::Target {
        let n = self.rows();
        if batch_size >= n {
            return self.clone();
        }
        self.minibatch(&rng.choose_distinct(n, batch_size))
    }
}

/// Why a stochastic-gradient run stopped.
#[derive(Debug, thiserror::Error)]
pub enum SgMcmcError {
    /// A configuration field is out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The start has the wrong length.
    #[error("the start has {got} entries, the target {expected}")]
    InitLength {
        /// Its length.
        got: usize,
        /// The target's dimension.
        expected: usize,
    },
    /// The state stopped being finite.
    #[error("step {step}: the state is not finite; lower `step_size`")]
    NotFinite {
        /// The first step with a non-finite state or gradient.
        step: usize,
    },
}

/// The kept draws of a stochastic-gradient run.
#[derive(Debug, Clone)]
pub struct SgRun {
    /// The draws, `[draws][D]`.
    pub draws: Vec<Vec<f64>>,
    /// The minibatch estimate of `ln p̃` at the state each kept draw's step started from.
    pub log_density: Vec<f64>,
    /// Wall seconds.
    pub seconds: f64,
}

/// Runs SGLD or SGHMC from `init` on `source`'s minibatches.
///
/// # Errors
/// A configuration out of range, a start of the wrong length, or a state that stops being
/// finite (the error names the step).
pub fn sg_sample<M: Minibatches>(
    source: &M,
    init: &[f64],
    config: &SgMcmcConfig,
) -> Result<SgRun, SgMcmcError> {
    config.validate()?;
    let mut rng = HostNormals::new(config.seed);
    let mut target = source.draw(config.batch_size, &mut rng);
    let d = target.dim();
    if init.len() != d {
        return Err(SgMcmcError::InitLength {
            got: init.len(),
            expected: d,
        });
    }
    let start = web_time::Instant::now();
    let mut theta = init.to_vec();
    let mut velocity = vec![0.0; d];
    let mut grad = vec![0.0; d];
    let eps = config.step_size;
    let steps = config.burn_in + config.draws * config.thin;
    let mut run = SgRun {
        draws: Vec::with_capacity(config.draws),
        log_density: Vec::with_capacity(config.draws),
        seconds: 0.0,
    };
    for step in 0..steps {
        if step > 0 {
            target = source.draw(config.batch_size, &mut rng);
        }
        let lp = target.value_and_grad(&theta, &mut grad);
        if !lp.is_finite() || grad.iter().any(|g| !g.is_finite()) {
            return Err(SgMcmcError::NotFinite { step });
        }
        match config.sampler {
            SgSampler::Sgld => {
                let noise = eps.sqrt();
                for (t, g) in theta.iter_mut().zip(&grad) {
                    *t += 0.5 * eps * g + noise * rng.next();
                }
            }
            SgSampler::Sghmc { friction } => {
                let noise = (2.0 * friction * eps).sqrt();
                for ((t, v), g) in theta.iter_mut().zip(velocity.iter_mut()).zip(&grad) {
                    *v = (1.0 - friction) * *v + eps * g + noise * rng.next();
                    *t += *v;
                }
            }
        }
        if step >= config.burn_in && (step - config.burn_in + 1).is_multiple_of(config.thin) {
            run.draws.push(theta.clone());
            run.log_density.push(lp);
        }
    }
    run.seconds = start.elapsed().as_secs_f64();
    Ok(run)
}
