//! The method catalogue: named weight models used by every harness (quickstart, toy, uci,
//! mnist, perf), a name for tables and the command line and the [`WeightConfig`] of every
//! layer. A name is fixed by its constructor, so the same name is the same posterior family,
//! estimator and prior everywhere (a harness may set the task's hyperparameters, such as the
//! drop rate). The settings are the benchmarks' (N(0, 1) priors, ρ₀ = −5, Gal's length-scales).

use bnn_burn::Prior;
use bnn_burn::layers::{Estimator, WeightConfig};
use bnn_burn::posterior::PosteriorConfig;

/// A named weight model.
#[derive(Debug, Clone)]
pub struct Method {
    /// Name in tables, legends and on the command line.
    pub name: &'static str,
    /// The weight model of every layer.
    pub weights: WeightConfig,
}

impl Method {
    /// A method of `posterior` under an N(0, 1) prior.
    fn new(name: &'static str, posterior: PosteriorConfig, estimator: Estimator) -> Self {
        Self {
            name,
            weights: WeightConfig::of(posterior).with_estimator(estimator),
        }
    }

    /// A point estimate (MAP) under an N(0, σ₀²) prior.
    pub fn map(prior_std: f64) -> Self {
        let mut m = Self::new(
            "MAP",
            PosteriorConfig::point(),
            Estimator::Reparameterization,
        );
        m.weights.prior = Prior::gaussian(prior_std);
        m
    }

    /// Mean-field Gaussian with the given estimator: MFVI, MFVI-LRT or MFVI-Flipout.
    pub fn mean_field(estimator: Estimator) -> Self {
        let name = match estimator {
            Estimator::Reparameterization => "MFVI",
            Estimator::LocalReparameterization => "MFVI-LRT",
            Estimator::Flipout => "MFVI-Flipout",
        };
        Self::new(name, PosteriorConfig::mean_field(), estimator)
    }

    /// Radial (reparameterisation).
    pub fn radial() -> Self {
        Self::new(
            "Radial",
            PosteriorConfig::radial(),
            Estimator::Reparameterization,
        )
    }

    /// Gal's MC dropout: drop rate `p` on every layer input (per-example masks), prior
    /// length-scale `l` (prior N(0, 1/l²)).
    pub fn mc_dropout(p: f64, length_scale: f64) -> Self {
        let mut m = Self::new(
            "MC dropout",
            PosteriorConfig::mc_dropout(p),
            Estimator::LocalReparameterization,
        );
        m.weights.prior = Prior::from_length_scale(length_scale);
        m
    }

    /// DropConnect: drop rate `p` on every weight, one mask per sample.
    pub fn drop_connect(p: f64, length_scale: f64) -> Self {
        let mut m = Self::new(
            "DropConnect",
            PosteriorConfig::drop_connect(p),
            Estimator::Reparameterization,
        );
        m.weights.prior = Prior::from_length_scale(length_scale);
        m
    }

    /// Low-rank plus diagonal Gaussian of rank `rank` per tensor (Brack 2022).
    pub fn low_rank(rank: usize) -> Self {
        Self::new(
            "Low-rank",
            PosteriorConfig::low_rank(rank),
            Estimator::Reparameterization,
        )
    }
}
