//! α-divergence objectives, per training point (Depeweg 2019 §2.3.3, §3.1.2; Hernández-Lobato et
//! al. 2016; Li & Gal 2017).
//!
//! Black-box α, with tied sites whose log-partitions cancel (Depeweg eq. 3.15):
//! `E/N = −(1/(αB)) Σ_{n∈S} [logsumexp_k α(ℓ_{nk} − r_k/N − r^z_{nk}) − ln K]`,
//! `r_k = ln q(W_k) − ln p(W_k)`. The variational Rényi bound keeps the closed-form KLs outside
//! the `logsumexp`. As `α → 0` both are the ELBO; below [`AlphaConfig::elbo_below`] the exact ELBO
//! is taken. The derivation: the book's *Objectives* page.

use super::{KlFoldMismatch, Loss, Objective, StepContext, StepTerms};
use crate::error::{Check, ConfigError};
use crate::special::log_mean_exp;
use burn::config::Config;
use burn::tensor::Tensor;

/// Which α-objective [`AlphaDivergence`] minimises.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum AlphaBound {
    /// Black-box α with tied factors (Hernández-Lobato et al. 2016; Depeweg eqs. 2.35, 3.15).
    BlackBox,
    /// The variational Rényi bound of Li & Gal (2017): closed-form KL outside the `logsumexp`.
    VariationalRenyi,
}

/// Configuration of [`AlphaDivergence`].
#[derive(Config, Debug)]
pub struct AlphaConfig {
    /// `α > 0`: 1 (inclusive, mass-covering), ½ (Hellinger), → 0 (VB).
    #[config(default = 0.5)]
    pub alpha: f64,
    /// Below this `α` the exact ELBO (closed-form KL) replaces the α-energy, whose `f32`
    /// `logsumexp` of `α·ℓ` loses its digits there (Depeweg's "VB" is `α = 10⁻⁶`).
    #[config(default = 1e-3)]
    pub elbo_below: f64,
    /// Black-box α or the variational Rényi bound.
    #[config(default = "AlphaBound::BlackBox")]
    pub bound: AlphaBound,
}

impl AlphaConfig {
    /// Checks `alpha` (finite, > 0) and `elbo_below` (finite, ≥ 0); the error names the field.
    pub fn init(&self) -> Result<AlphaDivergence, ConfigError> {
        let check = Check("AlphaConfig");
        check.positive("alpha", self.alpha)?;
        check.non_negative("elbo_below", self.elbo_below)?;
        Ok(AlphaDivergence {
            alpha: self.alpha,
            exact_elbo: self.alpha < self.elbo_below,
            bound: self.bound,
        })
    }
}

/// An α-divergence objective per training point (module docs).
#[derive(Debug, Clone, Copy)]
pub struct AlphaDivergence {
    alpha: f64,
    exact_elbo: bool,
    bound: AlphaBound,
}

impl AlphaDivergence {
    /// `α`.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Whether this `α` runs as the exact ELBO ([`AlphaConfig::elbo_below`]).
    pub fn is_exact_elbo(&self) -> bool {
        self.exact_elbo
    }

    /// `−(1/(αB)) Σ_n [logsumexp_k α·a_{kn} − ln K]` for `a` of shape `[K, B]`.
    fn energy(&self, a: Tensor<2>, context: &StepContext) -> Tensor<1> {
        let b = a.dims()[1];
        let per_row = log_mean_exp(a * self.alpha, 0).reshape([b]);
        context.row_mean(per_row) / -self.alpha
    }
}

impl Objective for AlphaDivergence {
    fn name(&self) -> &'static str {
        match (self.exact_elbo, self.bound) {
            (true, _) => "ELBO (α → 0)",
            (false, AlphaBound::BlackBox) => "black-box α",
            (false, AlphaBound::VariationalRenyi) => "variational Rényi",
        }
    }

    fn needs_log_ratio(&self) -> bool {
        !self.exact_elbo && self.bound == AlphaBound::BlackBox
    }

    /// `1/N` where the global KL enters linearly (the ELBO path and the Rényi bound).
    fn kl_weight(&self, context: &StepContext) -> Option<f64> {
        (!self.needs_log_ratio()).then(|| 1.0 / context.n_train as f64)
    }

    /// # Panics
    /// Black-box α on terms without [`StepTerms::log_ratio`] (the training loop requests it
    /// through [`Objective::needs_log_ratio`]).
    fn loss(&self, terms: StepTerms, context: &StepContext) -> Result<Loss, KlFoldMismatch> {
        let n = context.n_train as f64;
        let ll = terms.log_likelihood;
        let nll = context.row_mean(super::elbo::per_row_nll(ll.clone()));
        let local_mean = |local: Option<Tensor<1>>| local.map(|l| context.row_mean(l));
        let loss = if self.exact_elbo {
            let mut loss = nll.clone() + terms.kl.weighted(1.0 / n)?;
            if let Some(local) = local_mean(terms.local_kl) {
                loss = loss + local;
            }
            loss
        } else {
            match self.bound {
                AlphaBound::BlackBox => {
                    let [k, b] = ll.dims();
                    let ratio = terms
                        .log_ratio
                        .expect("black-box α needs the per-draw log-ratio (needs_log_ratio)");
                    let mut a = ll - ratio.reshape([k, 1]).expand([k, b]) / n;
                    // Latents without per-draw ratios: their closed-form KL, outside.
                    let mut outside = None;
                    match (terms.local_log_ratio, terms.local_kl) {
                        (Some(local), _) => a = a - local,
                        (None, local_kl) => outside = local_mean(local_kl),
                    }
                    let energy = self.energy(a, context);
                    match outside {
                        Some(local) => energy + local,
                        None => energy,
                    }
                }
                AlphaBound::VariationalRenyi => {
                    let mut loss = self.energy(ll, context) + terms.kl.weighted(1.0 / n)?;
                    if let Some(local) = local_mean(terms.local_kl) {
                        loss = loss + local;
                    }
                    loss
                }
            }
        };
        Ok(Loss {
            loss,
            nll,
            kl: terms.kl.value(),
        })
    }
}

#[cfg(test)]
#[path = "alpha_tests.rs"]
mod tests;
