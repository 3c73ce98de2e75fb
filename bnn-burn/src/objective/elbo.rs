//! The evidence lower bound, scaled per data point.
//!
//! `loss = mean_{s,b}[−ln p(y_b | w_s)] + w(epoch) · (KL/N + mean_b KL_b)  (= −ELBO/N for w = 1)`
//!
//! The NLL is averaged over the batch (under the rows' weights, [`StepContext::row_mean`]) and
//! the `S` training draws (an unbiased estimate of the expected per-point NLL); the global KL is the whole model's, divided by the training-set size,
//! never averaged per weight (Blundell et al. 2015; Farquhar 2022 §1.4 of the digest). Local KLs
//! of per-row latents are averaged over the batch.

use super::{KlFoldMismatch, Loss, Objective, StepContext, StepTerms};
use crate::error::{Check, ConfigError};
use burn::config::Config;
use burn::tensor::Tensor;

/// Weight on the KL term as a function of the epoch (0-based).
#[derive(Config, Debug, PartialEq, Copy)]
pub enum KlSchedule {
    /// A constant weight (1 is the ELBO; other values are a documented non-Bayesian tweak).
    Constant {
        /// The weight.
        weight: f64,
    },
    /// Linear warm-up to 1 over `epochs` epochs, `min(1, (epoch+1)/epochs)` (Sønderby et al.
    /// 2016): the first epoch already has weight `1/epochs`.
    LinearWarmup {
        /// Epochs to reach full weight.
        epochs: usize,
    },
    /// Sensoy et al. (2018)'s annealing `min(1, epoch/epochs)`: weight 0 through the first
    /// epoch, full weight from epoch `epochs` on.
    Anneal {
        /// Epochs to reach full weight.
        epochs: usize,
    },
}

impl KlSchedule {
    /// The weight at `epoch`.
    pub fn weight(&self, epoch: usize) -> f64 {
        match *self {
            KlSchedule::Constant { weight } => weight,
            KlSchedule::LinearWarmup { epochs } => ((epoch + 1) as f64 / epochs as f64).min(1.0),
            KlSchedule::Anneal { epochs } => (epoch as f64 / epochs as f64).min(1.0),
        }
    }

    /// Checks the weight is finite and ≥ 0, or the warm-up at least one epoch.
    pub fn validate(&self, config: &'static str) -> Result<(), ConfigError> {
        let check = Check(config);
        match *self {
            KlSchedule::Constant { weight } => check.non_negative("kl_schedule.weight", weight),
            KlSchedule::LinearWarmup { epochs } | KlSchedule::Anneal { epochs } => {
                check.at_least_one("kl_schedule.epochs", epochs)
            }
        }
    }
}

/// Configuration of [`Elbo`].
#[derive(Config, Debug)]
pub struct ElboConfig {
    /// KL weight schedule.
    #[config(default = "KlSchedule::Constant { weight: 1.0 }")]
    pub kl_schedule: KlSchedule,
}

/// The negative ELBO per training point.
#[derive(Debug, Clone, Copy)]
pub struct Elbo {
    kl_schedule: KlSchedule,
}

impl ElboConfig {
    /// Checks the schedule.
    pub fn init(&self) -> Result<Elbo, ConfigError> {
        self.kl_schedule.validate("ElboConfig")?;
        Ok(Elbo {
            kl_schedule: self.kl_schedule,
        })
    }
}

impl Objective for Elbo {
    fn name(&self) -> &'static str {
        "ELBO"
    }

    /// `w(epoch)/N`: the loss is linear in the KL.
    fn kl_weight(&self, context: &StepContext) -> Option<f64> {
        Some(self.kl_schedule.weight(context.epoch) / context.n_train as f64)
    }

    fn loss(&self, terms: StepTerms, context: &StepContext) -> Result<Loss, KlFoldMismatch> {
        let nll = context.row_mean(per_row_nll(terms.log_likelihood));
        let weight = self.kl_schedule.weight(context.epoch);
        let mut loss = nll.clone() + terms.kl.weighted(weight / context.n_train as f64)?;
        if let Some(local) = terms.local_kl {
            loss = loss + context.row_mean(local) * weight;
        }
        Ok(Loss {
            loss,
            nll,
            kl: terms.kl.value(),
        })
    }
}

/// `−(1/S) Σ_s ln p(y_b | w_s)` per row, `[B]`, from `[S, B]`.
pub(crate) fn per_row_nll(log_likelihood: Tensor<2>) -> Tensor<1> {
    let b = log_likelihood.dims()[1];
    crate::reduce::mean_dim(log_likelihood, 0)
        .reshape([b])
        .neg()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{test_device, to_vec};
    use burn::tensor::Tensor;

    #[test]
    fn loss_is_mean_nll_plus_kl_over_n_plus_mean_local_kl() {
        let device = test_device();
        let elbo = ElboConfig::new().init().unwrap();
        let ll = Tensor::<2>::from_floats([[-1.0, -2.0, -3.0], [-3.0, -4.0, -5.0]], &device);
        let terms = StepTerms {
            log_likelihood: ll,
            kl: crate::objective::KlTerm::new(Tensor::<1>::from_floats([50.0], &device)),
            local_kl: None,
            log_ratio: None,
            local_log_ratio: None,
        };
        let context = StepContext::new(0, 200, 3);
        let t = elbo.loss(terms.clone(), &context).unwrap();
        assert!((to_vec(t.nll)[0] - 3.0).abs() < 1e-6);
        assert!((to_vec(t.kl)[0] - 50.0).abs() < 1e-6);
        assert!((to_vec(t.loss)[0] - 3.25).abs() < 1e-6);
        let local = StepTerms {
            local_kl: Some(Tensor::<1>::from_floats([0.5, 1.0, 1.5], &device)),
            ..terms
        };
        assert!((to_vec(elbo.loss(local, &context).unwrap().loss)[0] - 4.25).abs() < 1e-6);
        // Row weights (2, 0, 1): NLL (2·2 + 0·3 + 1·4)/3 = 8/3; local KL (2·0.5 + 1·1.5)/3.
        let weighted = StepContext {
            row_weights: Some(Tensor::<1>::from_floats([2.0, 0.0, 1.0], &device)),
            ..context
        };
        let t = elbo.loss(local_terms(&device), &weighted).unwrap();
        assert!((to_vec(t.nll)[0] - 8.0 / 3.0).abs() < 1e-6);
        let expected = 8.0 / 3.0 + 0.25 + 2.5 / 3.0;
        assert!((to_vec(t.loss)[0] - expected).abs() < 1e-5);
    }

    fn local_terms(device: &burn::tensor::Device) -> StepTerms {
        StepTerms {
            log_likelihood: Tensor::<2>::from_floats(
                [[-1.0, -2.0, -3.0], [-3.0, -4.0, -5.0]],
                device,
            ),
            kl: crate::objective::KlTerm::new(Tensor::<1>::from_floats([50.0], device)),
            local_kl: Some(Tensor::<1>::from_floats([0.5, 1.0, 1.5], device)),
            log_ratio: None,
            local_log_ratio: None,
        }
    }

    #[test]
    fn warmup_schedule_reaches_one() {
        let s = KlSchedule::LinearWarmup { epochs: 4 };
        let w: Vec<f64> = (0..6).map(|e| s.weight(e)).collect();
        assert_eq!(w, vec![0.25, 0.5, 0.75, 1.0, 1.0, 1.0]);
        let s = KlSchedule::Anneal { epochs: 4 };
        let w: Vec<f64> = (0..6).map(|e| s.weight(e)).collect();
        assert_eq!(w, vec![0.0, 0.25, 0.5, 0.75, 1.0, 1.0]);
        let err = ElboConfig::new()
            .with_kl_schedule(KlSchedule::Anneal { epochs: 0 })
            .init()
            .unwrap_err();
        assert_eq!(err.field, "kl_schedule.epochs");
        let err = ElboConfig::new()
            .with_kl_schedule(KlSchedule::LinearWarmup { epochs: 0 })
            .init()
            .unwrap_err();
        assert_eq!(err.field, "kl_schedule.epochs");
    }
}
