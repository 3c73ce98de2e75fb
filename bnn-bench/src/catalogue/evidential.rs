//! The evidential family: EDL (Sensoy et al. 2018) and Haußmann (2021) ch. 5's BEDL, BEDL-PAC
//! and BEDL-Hyper.

use super::*;

impl Method {
    /// EDL as Sensoy et al. (2018) ran it (Haußmann 2021 Table 5.2's EDL row: the official
    /// code): a MAP net, ReLU evidence, the squared-error risk, `KL(Dir(α̃) ‖ Dir(1))` annealed
    /// over 10 epochs from 0 (so a 1-epoch run, the thesis code's MNIST budget, has none), and
    /// the code's L2 penalty `0.005·‖W‖²/2` on the dense layers' weights only
    /// ([`EvidentialConfig::sensoy_decay`]), as the official code has it.
    pub fn edl() -> Self {
        let mut m = Self::map(1.0);
        m.name = "EDL";
        let head = EvidentialConfig::sensoy();
        m.class_likelihood = ClassLikelihood::Evidential {
            evidence: head.evidence,
            loss: head.loss,
            regulariser: head.regulariser,
        };
        m.objective = TrainObjective::Anneal {
            epochs: head.warmup_epochs,
        };
        m.decay = vec![EvidentialConfig::sensoy_decay()];
        m
    }

    /// BEDL (Haußmann 2021 §5.1–5.2): per-point weights integrated out by CLT moments,
    /// `α = exp(f)`, trained by the marginal `ln E[softmax(f)_y]` over 20 sampled outputs
    /// (eq. 5.8), type-II maximum likelihood of the weights' `(μ, σ²)` (no KL), Haußmann's
    /// initial variances (`ln σ² ≈ −9`); predicts from 100 sampled outputs. A regressor has
    /// the two-output head of §5.4 ([`NoiseModel::Evidential`], β = [`BEDL_BETA`]), trained by
    /// its sampling-free marginal.
    pub fn bedl() -> Self {
        Self::evidential_moments(
            "BEDL",
            20,
            DirichletRegulariser::None,
            TrainObjective::EmpiricalBayes,
        )
    }

    /// BEDL-PAC (Haußmann 2021 §5.3): BEDL with 5 sampled outputs and the PAC-Bayes bound of
    /// eq. 5.10 over the rows' full Dirichlets (`δ = 0.1`, the thesis's `(ln max B)/N ≤ 1`); a
    /// regressor's bound is over its latent means' Gaussians `N(0, 1/`[`BEDL_PRIOR_PRECISION`]`)`
    /// with `(ln max B)/N ≤ β/(2π)` (§5.4).
    pub fn bedl_pac() -> Self {
        Self::evidential_moments(
            "BEDL-PAC",
            5,
            DirichletRegulariser::Full,
            TrainObjective::PacBayes(PacBayesConfig::new()),
        )
    }

    /// BEDL-Hyper (Haußmann 2021 §5.4, the ablation): BEDL with the hyperprior
    /// `p(μ_i) = N(0, 1)`, `p(σ_i²) = InvGamma(1, 1)` on its weights' parameters, maximising
    /// `Σ_n ln p(y_n | x_n) + ln p(μ, σ²)` ([`bnn_burn::dist::HyperPrior`]; the thesis gives
    /// no values, these are the defaults).
    pub fn bedl_hyper() -> Self {
        let mut m = Self::evidential_moments(
            "BEDL-Hyper",
            20,
            DirichletRegulariser::None,
            TrainObjective::Elbo,
        );
        // The hyperprior replaces the KL, and with it the KL's clamp of ln σ².
        m.weights = m
            .weights
            .with_prior(bnn_burn::Prior::Hyper(bnn_burn::dist::HyperPrior::new()));
        m
    }

    fn evidential_moments(
        name: &'static str,
        samples: usize,
        regulariser: DirichletRegulariser,
        objective: TrainObjective,
    ) -> Self {
        // Predicts by the default `MomentConfig::predict_logits` (sampled outputs).
        let moments = MomentConfig::clt().with_train_logits(LogitRule::SampledMarginal { samples });
        let mut m = Self::moment_method(name, moments, 1.0);
        m.class_likelihood = ClassLikelihood::Evidential {
            evidence: Evidence::Exp,
            loss: EdlLoss::LogMarginal,
            regulariser,
        };
        m.noise = NoiseModel::Evidential {
            prior_precision: BEDL_PRIOR_PRECISION,
        };
        m.objective = objective;
        m
    }
}
