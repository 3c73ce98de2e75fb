//! The optimiser and per-parameter-group learning rates of the training loop.

use crate::error::{Check, ConfigError};
use crate::fused::{FusedAdam, FusedAdamW, Kernels};
use burn::config::Config;
use burn::module::ParamGroup;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamConfig, AdamWConfig, ModuleOptimizer, SgdConfig};

/// The optimiser.
#[derive(Config, Debug, PartialEq)]
pub enum OptimizerConfig {
    /// Adam (Kingma & Ba 2015).
    Adam {
        /// First-moment decay.
        beta_1: f64,
        /// Second-moment decay.
        beta_2: f64,
        /// Denominator floor.
        epsilon: f64,
    },
    /// Adam with the L2 penalty `λ‖θ‖²/2` added to the loss: `g ← g + λθ` before the moments
    /// (coupled weight decay; Sensoy et al. 2018 train EDL so, with λ = 0.005). Unlike a
    /// prior's `−ln p(θ)/N`, the penalty does not shrink with the training set and no KL
    /// schedule anneals it. burn's Adam on every [`Kernels`] choice.
    AdamL2 {
        /// First-moment decay.
        beta_1: f64,
        /// Second-moment decay.
        beta_2: f64,
        /// Denominator floor.
        epsilon: f64,
        /// The L2 coefficient λ.
        weight_decay: f64,
    },
    /// AdamW: Adam with decoupled weight decay (Loshchilov & Hutter 2019).
    AdamW {
        /// First-moment decay.
        beta_1: f64,
        /// Second-moment decay.
        beta_2: f64,
        /// Denominator floor.
        epsilon: f64,
        /// Decoupled weight decay.
        weight_decay: f64,
    },
    /// Stochastic gradient descent with (Nesterov) momentum.
    Sgd {
        /// Momentum factor (0 for plain SGD).
        momentum: f64,
        /// Nesterov momentum.
        nesterov: bool,
    },
}

impl Default for OptimizerConfig {
    fn default() -> Self {
        Self::adam()
    }
}

impl OptimizerConfig {
    /// Adam with burn's defaults (β = 0.9, 0.999; ε = 10⁻⁵).
    pub fn adam() -> Self {
        Self::Adam {
            beta_1: 0.9,
            beta_2: 0.999,
            epsilon: 1e-5,
        }
    }

    /// Adam with burn's defaults and the L2 penalty `λ‖θ‖²/2` ([`Self::AdamL2`]).
    pub fn adam_l2(weight_decay: f64) -> Self {
        Self::AdamL2 {
            beta_1: 0.9,
            beta_2: 0.999,
            epsilon: 1e-5,
            weight_decay,
        }
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = Check("OptimizerConfig");
        let betas = |b1: f64, b2: f64, eps: f64| {
            check.probability("beta_1", b1)?;
            check.probability("beta_2", b2)?;
            check.positive("epsilon", eps)
        };
        match *self {
            Self::Adam {
                beta_1,
                beta_2,
                epsilon,
            } => betas(beta_1, beta_2, epsilon),
            Self::AdamL2 {
                beta_1,
                beta_2,
                epsilon,
                weight_decay,
            }
            | Self::AdamW {
                beta_1,
                beta_2,
                epsilon,
                weight_decay,
            } => {
                betas(beta_1, beta_2, epsilon)?;
                check.non_negative("weight_decay", weight_decay)
            }
            Self::Sgd { momentum, .. } => check.probability("momentum", momentum),
        }
    }

    /// The optimiser over a whole module: Adam and AdamW as one fused pass per tensor
    /// ([`FusedAdam`], [`FusedAdamW`]: burn's numerics and records) on [`Kernels::Fused`],
    /// burn's own on [`Kernels::Reference`]; AdamL2 and SGD are burn's on both.
    pub fn init(&self, kernels: Kernels) -> ModuleOptimizer {
        match (self.clone(), kernels) {
            (
                Self::Adam {
                    beta_1,
                    beta_2,
                    epsilon,
                },
                Kernels::Fused,
            ) => FusedAdam {
                beta_1: beta_1 as f32,
                beta_2: beta_2 as f32,
                epsilon: epsilon as f32,
            }
            .init(),
            (
                Self::AdamW {
                    beta_1,
                    beta_2,
                    epsilon,
                    weight_decay,
                },
                Kernels::Fused,
            ) => FusedAdamW {
                beta_1: beta_1 as f32,
                beta_2: beta_2 as f32,
                epsilon: epsilon as f32,
                weight_decay: weight_decay as f32,
            }
            .init(),
            (
                Self::Adam {
                    beta_1,
                    beta_2,
                    epsilon,
                },
                _,
            ) => AdamConfig::new()
                .with_beta_1(beta_1 as f32)
                .with_beta_2(beta_2 as f32)
                .with_epsilon(epsilon as f32)
                .init(),
            (
                Self::AdamL2 {
                    beta_1,
                    beta_2,
                    epsilon,
                    weight_decay,
                },
                _,
            ) => AdamConfig::new()
                .with_beta_1(beta_1 as f32)
                .with_beta_2(beta_2 as f32)
                .with_epsilon(epsilon as f32)
                .with_weight_decay(Some(WeightDecayConfig::new(weight_decay as f32)))
                .init(),
            (
                Self::AdamW {
                    beta_1,
                    beta_2,
                    epsilon,
                    weight_decay,
                },
                _,
            ) => AdamWConfig::new()
                .with_beta_1(beta_1 as f32)
                .with_beta_2(beta_2 as f32)
                .with_epsilon(epsilon as f32)
                .with_weight_decay(weight_decay as f32)
                .init(),
            (Self::Sgd { momentum, nesterov }, _) => {
                let momentum = (momentum > 0.0).then(|| {
                    MomentumConfig::new()
                        .with_momentum(momentum)
                        .with_dampening(0.0)
                        .with_nesterov(nesterov)
                });
                SgdConfig::new().with_momentum(momentum).init()
            }
        }
    }
}

/// A learning rate for one group of parameters: chosen by id
/// (`ParamGroup::ids_from_module(model.likelihood.clone())`) or by module path.
#[derive(Config, Debug)]
pub struct LrGroup {
    /// The parameters.
    pub group: ParamGroup,
    /// Their learning rate (overrides the base rate; the last matching group wins).
    pub learning_rate: f64,
}
