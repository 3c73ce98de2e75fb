//! The PAC-Bayes objective of BEDL-PAC (Haußmann 2021 §5.3, eq. 5.10; Germain et al. 2009 Thm
//! 2.1): `−(1/N) Σ_n ln p(y_n | x_n) + √((KL(Q ‖ P) − ln δ)/N + (ln max B)/N)`, with `Q` the rows'
//! latents (`KL(Q ‖ P) = Σ_n KL_n`, [`PacKl`]) and the weights fitted by type-II maximum
//! likelihood. The complexity term is the thesis's bound or the reference code's `ln N / N`
//! ([`PacComplexity`]). Where the bound holds the training points, and the tests that train free
//! rows to those fixed points: the book's *Objectives* page.

use super::{KlFoldMismatch, Loss, Objective, StepContext, StepTerms};
use crate::error::{Check, ConfigError};
use burn::config::Config;

/// The term `(ln max B)/N` inside the square root.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum PacComplexity {
    /// The thesis's bound on `(ln max B)/N`: 1 for classification, `β/(2π)` for regression
    /// with a Gaussian likelihood of precision `β`.
    Thesis {
        /// The bound (≥ 0).
        bound: f64,
    },
    /// The reference code's `ln B := ln N`, i.e. `ln N / N`.
    LogN,
}

/// What `KL(Q ‖ P)` in the bound is, from the rows' local KLs `KL_n`.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum PacKl {
    /// The KL of the product over the training set, `Σ_n KL_n`, estimated as `N·mean_b KL_b`
    /// (eq. 5.10 with `Q = Π_n Q_n`, `P = Π_n P_n`; the regressor's `P = Π_n N(λ_n | 0, α⁻¹)`
    /// of §5.4 says so): the regulariser is `√(mean KL + (−ln δ + ln max B)/N)`.
    Sum,
    /// One point's KL, `mean_b KL_b` (the reference code): the regulariser is
    /// `√((mean KL − ln δ)/N + (ln max B)/N)`, `N` times weaker in the KL.
    Mean,
}

/// Configuration of [`PacBayes`].
#[derive(Config, Debug)]
pub struct PacBayesConfig {
    /// The bound holds with probability `1 − δ`, `δ ∈ (0, 1)` (the thesis: 0.1).
    #[config(default = 0.1)]
    pub delta: f64,
    /// `(ln max B)/N`; the default is the thesis's classification bound, 1.
    #[config(default = "PacComplexity::Thesis { bound: 1.0 }")]
    pub complexity: PacComplexity,
    /// `KL(Q ‖ P)`: the training set's (the thesis) or one point's (the reference code).
    #[config(default = "PacKl::Sum")]
    pub kl: PacKl,
}

impl PacBayesConfig {
    /// Checks `delta ∈ (0, 1)` and a finite bound ≥ 0; the error names the field.
    pub fn init(&self) -> Result<PacBayes, ConfigError> {
        let check = Check("PacBayesConfig");
        check.open_unit("delta", self.delta)?;
        if let PacComplexity::Thesis { bound } = self.complexity {
            check.non_negative("complexity.bound", bound)?;
        }
        Ok(PacBayes {
            delta: self.delta,
            complexity: self.complexity,
            kl: self.kl,
        })
    }
}

/// The PAC-Bayes objective (module docs).
#[derive(Debug, Clone, Copy)]
pub struct PacBayes {
    delta: f64,
    complexity: PacComplexity,
    kl: PacKl,
}

impl PacBayes {
    /// The constant `−ln δ/N + (ln max B)/N` under the square root.
    fn offset(&self, n: usize) -> f64 {
        let n = n as f64;
        let complexity = match self.complexity {
            PacComplexity::Thesis { bound } => bound,
            PacComplexity::LogN => n.ln() / n,
        };
        -self.delta.ln() / n + complexity
    }

    /// `KL(Q ‖ P)/N` from the rows' mean local KL.
    fn kl_per_point(&self, mean_kl: f64, n: usize) -> f64 {
        match self.kl {
            PacKl::Sum => mean_kl,
            PacKl::Mean => mean_kl / n as f64,
        }
    }

    /// The regulariser `√((KL(Q ‖ P) − ln δ)/N + (ln max B)/N)` for the rows' mean local KL
    /// and `N` points.
    pub fn regulariser(&self, mean_kl: f64, n: usize) -> f64 {
        (self.kl_per_point(mean_kl.max(0.0), n) + self.offset(n)).sqrt()
    }

    /// The bound on the expected risk `E_Q[R]` given the empirical risk `R_D` (minus the mean
    /// likelihood of the training points, in `[−1, 0]` for classes) and the KL, eq. 5.10's
    /// middle line: `R_D + √((KL − ln δ)/N + (ln max B)/N)`.
    pub fn risk_bound(&self, empirical_risk: f64, kl: f64, n: usize) -> f64 {
        empirical_risk + self.regulariser(kl, n)
    }
}

impl Objective for PacBayes {
    fn name(&self) -> &'static str {
        "PAC-Bayes (BEDL-PAC)"
    }

    /// False: the bound regularises the rows' local KL; the weights are fitted by type-II
    /// maximum likelihood, so their KL is not part of the loss.
    fn needs_weight_kl(&self) -> bool {
        false
    }

    /// `mean NLL + √((mean_b KL_b − ln δ)/N + (ln max B)/N)`; `Loss::kl` reports the mean
    /// local KL.
    ///
    /// # Panics
    /// Terms without [`StepTerms::local_kl`]: the bound needs the rows' latent (an evidential
    /// head with a [`DirichletRegulariser`](crate::likelihood::DirichletRegulariser)).
    fn loss(&self, terms: StepTerms, context: &StepContext) -> Result<Loss, KlFoldMismatch> {
        let nll = context.row_mean(super::elbo::per_row_nll(terms.log_likelihood));
        let kl = context.row_mean(terms.local_kl.expect(
            "the PAC-Bayes objective needs the rows' local KL: an evidential head with a \
             Dirichlet regulariser",
        ));
        let per_point = match self.kl {
            PacKl::Sum => kl.clone().clamp_min(0.0),
            PacKl::Mean => kl.clone().clamp_min(0.0) / context.n_train as f64,
        };
        let regulariser = (per_point + self.offset(context.n_train)).sqrt();
        Ok(Loss {
            loss: nll.clone() + regulariser,
            nll,
            kl,
        })
    }
}

/// The PAC-Bayes bound of Haußmann (2021) eq. 5.10 on a data set of `N` rows (the training
/// set, after fitting): the empirical risk `R_D = −(1/N) Σ_n p(y_n | x_n)` (minus the mean
/// predictive probability of the label, in `[−1, 0]`; for regression the predictive density of
/// the target in the model's units, in `[−max p, 0]`), the rows' mean local KL, and
/// `R_D + √((KL − ln δ)/N + (ln max B)/N)`, which bounds the expected risk on new data with
/// probability `1 − δ` when the rows were not used to fit the prior.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PacBound {
    /// `R_D`.
    pub empirical_risk: f64,
    /// The rows' mean local KL.
    pub kl: f64,
    /// The bound on the expected risk.
    pub bound: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{test_device, to_vec};
    use burn::tensor::Tensor;

    fn terms(ll: &[f32], local: Option<&[f32]>) -> StepTerms {
        let device = test_device();
        StepTerms {
            log_likelihood: Tensor::<1>::from_floats(ll, &device).reshape([1, ll.len()]),
            kl: crate::objective::KlTerm::new(Tensor::from_floats([123.0], &device)),
            local_kl: local.map(|l| Tensor::from_floats(l, &device)),
            log_ratio: None,
            local_log_ratio: None,
        }
    }

    /// The loss is eq. 5.10 by hand, under both complexity terms; the weights' KL plays no part.
    #[test]
    fn the_loss_is_the_bound_of_eq_5_10() {
        let context = StepContext::new(0, 1000, 2);
        let t = || terms(&[-0.2, -0.6], Some(&[3.0, 5.0]));
        let nll = 0.4;
        for (complexity, c, kl, kl_over_n) in [
            (
                PacComplexity::Thesis { bound: 1.0 },
                1.0,
                PacKl::Mean,
                4.0 / 1000.0,
            ),
            (
                PacComplexity::LogN,
                1000f64.ln() / 1000.0,
                PacKl::Mean,
                4.0 / 1000.0,
            ),
            (PacComplexity::Thesis { bound: 1.0 }, 1.0, PacKl::Sum, 4.0),
        ] {
            let pac = PacBayesConfig::new()
                .with_complexity(complexity)
                .with_kl(kl)
                .init()
                .unwrap();
            let loss = pac.loss(t(), &context).unwrap();
            let want = nll + (kl_over_n - 0.1f64.ln() / 1000.0 + c).sqrt();
            let got = to_vec(loss.loss)[0];
            assert!(
                (got - want).abs() < 1e-6,
                "{complexity:?}, {kl:?}: {got} vs {want}"
            );
            assert!((to_vec(loss.kl)[0] - 4.0).abs() < 1e-6);
            assert!((pac.regulariser(4.0, 1000) - (want - nll)).abs() < 1e-9);
        }
    }

    #[test]
    fn bad_settings_name_the_field_and_missing_latents_are_named() {
        for bad in [0.0, 1.0, -0.1, f64::NAN] {
            let err = PacBayesConfig::new().with_delta(bad).init().unwrap_err();
            assert_eq!(err.field, "delta", "{bad}");
        }
        let err = PacBayesConfig::new()
            .with_complexity(PacComplexity::Thesis { bound: -1.0 })
            .init()
            .unwrap_err();
        assert_eq!(err.field, "complexity.bound");
        let pac = PacBayesConfig::new().init().unwrap();
        let context = StepContext::new(0, 10, 2);
        let panic =
            std::panic::catch_unwind(|| pac.loss(terms(&[-0.1, -0.2], None), &context).unwrap());
        let message = panic.unwrap_err();
        let text = message
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| message.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        assert!(text.contains("local KL"), "{text}");
    }
}
