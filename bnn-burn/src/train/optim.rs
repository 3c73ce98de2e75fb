//! The optimiser and per-parameter-group learning rates of the training loop.

use crate::error::{Check, ConfigError};
use crate::fused::{FusedAdam, FusedAdamW, Kernels};
use burn::config::Config;
use burn::module::{Module, ModuleVisitor, Param, ParamGroup, ParamId};
use burn::optim::GradientsParams;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamConfig, AdamWConfig, ModuleOptimizer, SgdConfig};
use burn::tensor::Tensor;
use std::collections::HashMap;

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
    /// AMSGrad (Reddi et al. 2018): Adam whose denominator uses the running maximum of the
    /// second moments, so that step sizes never grow (the optimiser of Farquhar 2022 ch. 3).
    /// burn's on every [`Kernels`] choice.
    AmsGrad {
        /// First-moment decay.
        beta_1: f64,
        /// Second-moment decay.
        beta_2: f64,
        /// Denominator floor.
        epsilon: f64,
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

    /// AMSGrad with Adam's defaults (β = 0.9, 0.999; ε = 10⁻⁵).
    pub fn ams_grad() -> Self {
        Self::AmsGrad {
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
            }
            | Self::AmsGrad {
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
    /// (`FusedAdam`, `FusedAdamW`: burn's numerics and records) on [`Kernels::Fused`],
    /// burn's own on [`Kernels::Reference`]; AdamL2, AMSGrad and SGD are burn's on both.
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
            (
                Self::AmsGrad {
                    beta_1,
                    beta_2,
                    epsilon,
                },
                _,
            ) => AdamWConfig::new()
                .with_beta_1(beta_1 as f32)
                .with_beta_2(beta_2 as f32)
                .with_epsilon(epsilon as f32)
                .with_weight_decay(0.0)
                .with_amsgrad(true)
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

/// A coupled L2 penalty `λ‖θ‖²/2` on one group of parameters, added to the loss through its
/// gradient: `g ← g + λθ` for every parameter of the group before the optimiser's step, so it
/// works with every [`OptimizerConfig`] (Adam then scales it like the loss's own gradient).
/// Sensoy et al. (2018) train EDL so, with λ = 0.005 on the two dense layers' weights only.
/// Chosen by id or by module path (e.g. `ParamGroup::from_regex`); the last matching group
/// wins. Unlike [`OptimizerConfig::AdamL2`], which decays every parameter, the rest of the
/// model is left alone; unlike a prior's `−ln p(θ)/N`, it does not shrink with the training
/// set and no KL schedule anneals it.
#[derive(Config, Debug)]
pub struct DecayGroup {
    /// The parameters.
    pub group: ParamGroup,
    /// λ ≥ 0.
    pub weight_decay: f64,
}

impl DecayGroup {
    /// The weights, not the biases, of every dense layer of a [`crate::nets::Bnn`] or of the
    /// network of a [`crate::nets::BnnLv`] (the dense layers of its body, an MLP's or those
    /// after a conv net's flattening, and its head; never a latent encoder's): a point weight,
    /// or the mean `μ` of a distribution over it (never a scale), selected by module path (so a
    /// resumed run selects the same ones). Sensoy et al. (2018) decay EDL's dense weights so.
    pub fn dense_weights(weight_decay: f64) -> Self {
        let group = ParamGroup::from_regex(
            r"^(net\.)?(body\.(dense\.)?layers\.[0-9]+|head)\.params\.weight\.(.*\.)?(weight|mu)$",
        )
        .expect("a valid pattern");
        Self::new(group, weight_decay)
    }
}

/// Which parameters of a model the decay groups select, and their λ: the groups' matching (by
/// id, or by the module path joined with `.`; the last matching group wins) done once, not at
/// every step. Parameters with λ = 0 are left out.
pub(super) struct DecayPlan(HashMap<ParamId, f64>);

impl DecayPlan {
    /// The selection of `groups` in `model`.
    pub(super) fn new<M: Module>(model: &M, groups: &[DecayGroup]) -> Self {
        struct Select<'a> {
            groups: &'a [DecayGroup],
            path: Vec<String>,
            lambdas: HashMap<ParamId, f64>,
        }
        impl ModuleVisitor for Select<'_> {
            fn enter_module(&mut self, name: &str, _container_type: &str) {
                self.path.push(name.to_string());
            }
            fn exit_module(&mut self, _name: &str, _container_type: &str) {
                self.path.pop();
            }
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                let path = self.path.join(".");
                let lambda = self
                    .groups
                    .iter()
                    .rev()
                    .find(|g| g.group.matches(&param.id, Some(&path)))
                    .map(|g| g.weight_decay);
                if let Some(lambda) = lambda.filter(|&l| l != 0.0) {
                    self.lambdas.insert(param.id, lambda);
                }
            }
        }
        let mut select = Select {
            groups,
            path: Vec::new(),
            lambdas: HashMap::new(),
        };
        if !groups.is_empty() {
            model.visit(&mut select);
        }
        Self(select.lambdas)
    }

    /// λ of the parameter `id`, if selected.
    pub(super) fn lambda(&self, id: &ParamId) -> Option<f64> {
        self.0.get(id).copied()
    }

    /// Adds `λθ` to the gradient of every selected parameter of `model` (the model the plan
    /// was made for, or one with the same ids); parameters without a gradient stay without one.
    pub(super) fn apply<M: Module>(&self, model: &M, grads: &mut GradientsParams) {
        struct Decay<'a> {
            plan: &'a DecayPlan,
            grads: &'a mut GradientsParams,
        }
        impl ModuleVisitor for Decay<'_> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                let Some(lambda) = self.plan.lambda(&param.id) else {
                    return;
                };
                if let Some(grad) = self.grads.remove::<D>(param.id) {
                    let theta = param.val().inner().mul_scalar(lambda);
                    self.grads.register(param.id, grad + theta);
                }
            }
        }
        if !self.0.is_empty() {
            model.visit(&mut Decay { plan: self, grads });
        }
    }
}
