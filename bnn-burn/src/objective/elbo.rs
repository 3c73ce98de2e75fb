//! The evidence lower bound, scaled per data point.
//!
//! `loss = mean_{s,b}[NLL_sb] + w(epoch) · KL / N_train  (= −ELBO / N for w = 1)`
//!
//! The NLL is averaged over the batch and the `S` training samples (an unbiased estimate of the
//! expected per-point NLL); the KL is the whole model's, divided by the training-set size, never
//! averaged per weight (Blundell et al. 2015; Farquhar 2022 §1.4 of the digest).

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
    /// Linear warm-up from 0 to 1 over `epochs` epochs (`min(1, (epoch+1)/epochs)`), as in
    /// Sønderby et al. 2016 and Sensoy et al. 2018.
    LinearWarmup {
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
        }
    }
}

/// Configuration of [`Elbo`].
#[derive(Config, Debug)]
pub struct ElboConfig {
    /// Number of training points `N`.
    pub n_train: usize,
    /// KL weight schedule.
    #[config(default = "KlSchedule::Constant { weight: 1.0 }")]
    pub kl_schedule: KlSchedule,
}

/// The three numbers of one ELBO evaluation, each a one-element tensor.
#[derive(Debug, Clone)]
pub struct ElboTerms {
    /// Mean NLL over the batch and the samples.
    pub nll: Tensor<1>,
    /// The model's total KL divergence.
    pub kl: Tensor<1>,
    /// `nll + w · kl / N`, the quantity to minimise.
    pub loss: Tensor<1>,
}

/// The negative ELBO per training point.
#[derive(Debug, Clone)]
pub struct Elbo {
    n_train: usize,
    kl_schedule: KlSchedule,
}

impl ElboConfig {
    /// Checks `n_train ≥ 1` and the schedule.
    pub fn init(&self) -> Result<Elbo, ConfigError> {
        let check = Check("ElboConfig");
        check.at_least_one("n_train", self.n_train)?;
        match self.kl_schedule {
            KlSchedule::Constant { weight } => check.finite("kl_schedule.weight", weight)?,
            KlSchedule::LinearWarmup { epochs } => {
                check.at_least_one("kl_schedule.epochs", epochs)?
            }
        }
        Ok(Elbo {
            n_train: self.n_train,
            kl_schedule: self.kl_schedule,
        })
    }
}

impl Elbo {
    /// Combines per-sample NLLs `[S, B]` and the model KL at `epoch`.
    pub fn terms(&self, nll: Tensor<2>, kl: Tensor<1>, epoch: usize) -> ElboTerms {
        let nll = nll.mean().reshape([1]);
        let weight = self.kl_schedule.weight(epoch) / self.n_train as f64;
        let loss = nll.clone() + kl.clone() * weight;
        ElboTerms { nll, kl, loss }
    }

    /// Training-set size `N`.
    pub fn n_train(&self) -> usize {
        self.n_train
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{test_device, to_vec};

    #[test]
    fn loss_is_mean_nll_plus_kl_over_n() {
        let device = test_device();
        let elbo = ElboConfig::new(200).init().unwrap();
        let nll = Tensor::<2>::from_floats([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]], &device);
        let kl = Tensor::<1>::from_floats([50.0], &device);
        let t = elbo.terms(nll, kl, 0);
        assert!((to_vec(t.nll)[0] - 3.0).abs() < 1e-6);
        assert!((to_vec(t.kl)[0] - 50.0).abs() < 1e-6);
        assert!((to_vec(t.loss)[0] - 3.25).abs() < 1e-6);
    }

    #[test]
    fn warmup_schedule_reaches_one() {
        let s = KlSchedule::LinearWarmup { epochs: 4 };
        let w: Vec<f64> = (0..6).map(|e| s.weight(e)).collect();
        assert_eq!(w, vec![0.25, 0.5, 0.75, 1.0, 1.0, 1.0]);
        assert_eq!(ElboConfig::new(0).init().unwrap_err().field, "n_train");
    }
}
