//! The method catalogue: named weight models used by every harness (quickstart, toy, uci,
//! mnist, perf), a name for tables and the command line and the [`WeightConfig`] of every
//! layer. A name is fixed by its constructor, so the same name is the same posterior family,
//! estimator and prior everywhere (a harness may set the task's hyperparameters, such as the
//! drop rate). The settings are the benchmarks' (N(0, 1) priors, ρ₀ = −5, Gal's length-scales).

use bnn_burn::layers::{Estimator, WeightConfig};
use bnn_burn::likelihood::{
    DirichletRegulariser, EdlLoss, Evidence, EvidentialConfig, GaussianLikelihoodConfig,
    Likelihood, LogitRule, NoiseFit, NoiseModel,
};
use bnn_burn::nets::{Bnn, Body, MlpConfig, MomentConfig, NoiseRefit, Regressor, moment_weights};
use bnn_burn::objective::{KlSchedule, PacBayesConfig, PacComplexity};
use bnn_burn::posterior::{DropoutConfig, DropoutMask, DropoutNoise, PosteriorConfig};
use bnn_burn::train::{DecayGroup, TrainConfig, Trainer};
use bnn_burn::{ConfigError, Prior};
use burn::tensor::{Device, Tensor};

/// BEDL's fixed observation precision β of the regression head (Haußmann 2021 §4.5: 100).
pub const BEDL_BETA: f64 = 100.0;

/// The precision α of the regression latent's prior `N(0, α⁻¹)` in BEDL-PAC's bound, in units
/// of the standardised targets (the thesis gives none; 1 is the targets' own scale, and the
/// prior precision of its VarOut baseline).
pub const BEDL_PRIOR_PRECISION: f64 = 1.0;

/// A PAC-Bayes configuration for a regressor: the classification default of the complexity
/// term, `(ln max B)/N ≤ 1`, becomes the thesis's bound for `N(y | h(x), β⁻¹)`,
/// `β/(2π)` with β = [`BEDL_BETA`] (Haußmann 2021 §5.3); any other choice is kept.
pub fn regression_pac(pac: &PacBayesConfig) -> PacBayesConfig {
    let mut pac = pac.clone();
    if pac.complexity == PacBayesConfig::new().complexity {
        pac.complexity = PacComplexity::Thesis {
            bound: BEDL_BETA / std::f64::consts::TAU,
        };
    }
    pac
}

/// A named weight model.
#[derive(Debug, Clone)]
pub struct Method {
    /// Name in tables, legends and on the command line.
    pub name: &'static str,
    /// The weight model of every layer.
    pub weights: WeightConfig,
    /// `Some`: the network trains and predicts by moment propagation instead of sampling (the
    /// constructors set [`MomentConfig::train`]).
    pub moments: Option<MomentConfig>,
    /// A regressor's noise: homoscedastic, or the network's log-variance output (DVI).
    pub noise: NoiseModel,
    /// A classifier's likelihood: softmax, the CLT-BNN's multi-label probit, or an evidential
    /// (Dirichlet) head.
    pub class_likelihood: ClassLikelihood,
    /// What training minimises.
    pub objective: TrainObjective,
    /// L2 penalties on parameter groups this method trains with (EDL's on the dense weights).
    pub decay: Vec<DecayGroup>,
}

/// The training objective of a method.
#[derive(Debug, Clone)]
pub enum TrainObjective {
    /// The ELBO with the run's KL schedule (the default).
    Elbo,
    /// The ELBO with its KL weight (the weights' and the rows' local KLs) annealed as Sensoy et
    /// al. (2018), `min(1, epoch/epochs)` (EDL: over 10 epochs; none in the first).
    Anneal {
        /// Epochs to full weight.
        epochs: usize,
    },
    /// Type-II maximum likelihood of the weights' `(μ, σ²)`, no KL (BEDL, Haußmann 2021 §5.1).
    EmpiricalBayes,
    /// The PAC-Bayes bound of eq. 5.10 (BEDL-PAC).
    PacBayes(PacBayesConfig),
}

/// The likelihood a classifier of a method uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClassLikelihood {
    /// `y ~ Cat(softmax f)` ([`bnn_burn::likelihood::Categorical`]).
    Softmax,
    /// `y_c ~ Ber(Φ(f_c))` per class of the one-hot label (Haußmann 2021 ch. 4;
    /// [`bnn_burn::likelihood::MultiLabelProbit`]).
    MultiLabelProbit,
    /// `π ~ Dir(α(f))`, `y ~ Cat(π)` ([`bnn_burn::likelihood::Evidential`]).
    Evidential {
        /// How outputs become concentrations.
        evidence: Evidence,
        /// The data term.
        loss: EdlLoss,
        /// The rows' local KL.
        regulariser: DirichletRegulariser,
    },
}

impl ClassLikelihood {
    /// The evidential head's configuration, for [`ClassLikelihood::Evidential`].
    pub fn evidential(&self) -> Option<EvidentialConfig> {
        match *self {
            Self::Evidential {
                evidence,
                loss,
                regulariser,
            } => Some(
                EvidentialConfig::new()
                    .with_evidence(evidence)
                    .with_loss(loss)
                    .with_regulariser(regulariser),
            ),
            _ => None,
        }
    }
}

impl Method {
    /// A method of `posterior` under an N(0, 1) prior.
    fn new(name: &'static str, posterior: PosteriorConfig, estimator: Estimator) -> Self {
        Self {
            name,
            weights: WeightConfig::of(posterior).with_estimator(estimator),
            moments: None,
            noise: NoiseModel::Homoscedastic,
            class_likelihood: ClassLikelihood::Softmax,
            objective: TrainObjective::Elbo,
            decay: Vec::new(),
        }
    }

    /// A mean-field net trained and predicted by moment propagation under the prior
    /// `N(0, 1/α)`, with Haußmann's initial variances (`ln σ² ≈ −9`, Haußmann 2021 §2.6).
    fn moment_method(name: &'static str, moments: MomentConfig, alpha: f64) -> Self {
        Self {
            name,
            weights: moment_weights(alpha),
            moments: Some(moments),
            noise: NoiseModel::Homoscedastic,
            class_likelihood: ClassLikelihood::Softmax,
            objective: TrainObjective::Elbo,
            decay: Vec::new(),
        }
    }

    /// VBP (Haußmann 2021 ch. 3): mean-field weights, the identity–Heaviside gate (C = 100),
    /// trained by moments (the regression noise refit after every epoch), prior precision `α`
    /// (10 for regression, 100 for classification in the thesis).
    pub fn vbp(alpha: f64) -> Self {
        Self::moment_method("VBP", MomentConfig::vbp(), alpha)
    }

    /// The CLT-BNN (Haußmann 2021 ch. 4): exact Gaussian ReLU moments, trained by moments, prior
    /// precision `α`. A regressor refits its noise like VBP's; a classifier uses the multi-label
    /// probit likelihood, trained with the reference code's plug-in loss and predicting by the
    /// exact per-class marginals `Φ(g/√(1 + h))` (eq. 4.4).
    pub fn clt(alpha: f64) -> Self {
        let moments = MomentConfig::clt()
            .with_train_logits(LogitRule::Probit)
            .with_predict_logits(LogitRule::Probit);
        let mut m = Self::moment_method("CLT", moments, alpha);
        m.class_likelihood = ClassLikelihood::MultiLabelProbit;
        m
    }

    /// DVI, diagonal (Wu et al. 2019): CLT moments and, for regression, the heteroscedastic
    /// log-variance head `y ~ N(μ(x), e^{ℓ(x)})` with its closed-form expected log-likelihood;
    /// trained by moments, prior precision `α`.
    pub fn dvi(alpha: f64) -> Self {
        let mut m = Self::moment_method("DVI", MomentConfig::clt(), alpha);
        m.noise = NoiseModel::LogVarianceHead;
        m
    }

    /// DVI as Haußmann (2021) Table 5.2 trains it (the thesis code's `DVINet`, §5.8): the
    /// diagonal DVI of [`Method::dvi`], its classifier trained by the sampled softmax
    /// `(1/S) Σ_s ln softmax(m + s∘ε_s)_y` over `S = 20` draws of the logits' moments
    /// ([`LogitRule::Sampled`]) in place of the Taylor loss, prior precision `α` (10 there).
    /// §5.8 says five draws for every sampling step; the code draws 20 here, as for BEDL.
    pub fn dvi_sampled(alpha: f64) -> Self {
        let mut m = Self::dvi(alpha);
        m.name = "DVI-sampled";
        m.moments = m
            .moments
            .map(|c| c.with_train_logits(LogitRule::Sampled { samples: 20 }));
        m
    }

    /// Whether the method trains and predicts by moments.
    pub fn predicts_by_moments(&self) -> bool {
        self.moments.is_some()
    }

    /// The MLP regressor of this method (its weights, moment settings and noise model). Its
    /// homoscedastic noise starts at σ = 1 and is held out of the gradient for a method trained
    /// by moments (β₀ = 1, refit in closed form by [`Method::regression_trainer`]); otherwise it
    /// is learned from `noise_std`. A log-variance head (DVI) predicts the noise per example;
    /// BEDL's evidential head its latent's variance, over a fixed `β⁻¹ = 1/`[`BEDL_BETA`].
    ///
    /// # Errors
    /// An invalid `mlp` or `noise_std`.
    pub fn regressor(
        &self,
        mlp: MlpConfig,
        noise_std: f64,
        device: &Device,
    ) -> Result<Regressor, ConfigError> {
        let likelihood = match (&self.moments, self.noise) {
            (_, NoiseModel::Evidential { .. }) => GaussianLikelihoodConfig::new()
                .with_noise_std(BEDL_BETA.sqrt().recip())
                .with_fit(NoiseFit::Fixed),
            (Some(_), _) => GaussianLikelihoodConfig::new()
                .with_noise_std(1.0)
                .with_fit(NoiseFit::Fixed),
            (None, _) => GaussianLikelihoodConfig::new().with_noise_std(noise_std),
        }
        .with_noise(self.noise)
        .init(device)?;
        let model = mlp
            .with_weights(self.weights.clone())
            .init(likelihood, device)?;
        self.with_moments(model)
    }

    /// `net` with this method's moment settings (unchanged for a method that samples).
    ///
    /// # Errors
    /// An invalid [`MomentConfig`].
    pub fn with_moments<B: Body, L: Likelihood>(
        &self,
        net: Bnn<B, L>,
    ) -> Result<Bnn<B, L>, ConfigError> {
        match &self.moments {
            Some(m) => net.with_moments(m.clone()),
            None => Ok(net),
        }
    }

    /// The trainer of a regressor of this method on `(x, y)`: its objective
    /// ([`Method::trainer`]; BEDL-PAC's complexity term is the thesis's regression bound
    /// `β/(2π)`, [`BEDL_BETA`]), and a method trained by moments with a homoscedastic noise
    /// refits it in closed form after every epoch ([`NoiseRefit`], Haußmann 2021 §3.2).
    ///
    /// # Errors
    /// An invalid PAC-Bayes configuration.
    pub fn regression_trainer(
        &self,
        config: TrainConfig,
        x: &Tensor<2>,
        y: &Tensor<2>,
    ) -> Result<Trainer<Regressor>, ConfigError> {
        let mut method = self.clone();
        if let TrainObjective::PacBayes(pac) = &mut method.objective {
            *pac = regression_pac(pac);
        }
        let trainer = method.trainer(&config)?;
        Ok(match (&self.moments, self.noise) {
            (Some(_), NoiseModel::Homoscedastic) => {
                trainer.with_callback(NoiseRefit::new(x.clone(), y.clone()))
            }
            _ => trainer,
        })
    }

    /// A trainer of `config` for this method's objective: the ELBO of `config.kl_schedule`, its
    /// annealing, no KL (empirical Bayes), or the PAC-Bayes bound.
    ///
    /// # Errors
    /// An invalid PAC-Bayes configuration.
    pub fn trainer<M: bnn_burn::train::Model>(
        &self,
        config: &TrainConfig,
    ) -> Result<Trainer<M>, ConfigError> {
        let config = config.clone().with_decay_groups(self.decay.clone());
        let with = |schedule| Trainer::new(config.clone().with_kl_schedule(schedule));
        Ok(match &self.objective {
            TrainObjective::Elbo => Trainer::new(config.clone()),
            TrainObjective::Anneal { epochs } => with(KlSchedule::Anneal { epochs: *epochs }),
            TrainObjective::EmpiricalBayes => with(KlSchedule::Constant { weight: 0.0 }),
            TrainObjective::PacBayes(pac) => {
                Trainer::new(config.clone()).with_objective(pac.init()?)
            }
        })
    }

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
            .with_kl_log_var_range(None)
            .with_hyperprior(Some(bnn_burn::dist::HyperPrior::new()));
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

    /// DropConnect with multiplicative Gaussian masks `z ~ N(1, p/(1−p))` on every weight (the
    /// Bernoulli mask's mean and variance; Gal 2016, §3.2), one mask per sample.
    pub fn gaussian_drop_connect(p: f64, length_scale: f64) -> Self {
        let mut m = Self::drop_connect(p, length_scale);
        m.name = "DropConnect, Gaussian masks";
        m.weights.posterior = PosteriorConfig::Dropout(
            DropoutConfig::new(p)
                .with_noise(DropoutNoise::Gaussian)
                .with_mask(DropoutMask::Weights),
        );
        m
    }

    /// MFVI (reparameterisation) under the scale-mixture prior of Blundell et al. (2015, eq. 7)
    /// with their `π = ½`, `σ₁ = 1`, `σ₂ = e⁻⁶`: a KL without closed form, one Monte Carlo draw
    /// of its cross-entropy per step.
    pub fn mean_field_scale_mixture() -> Self {
        Self::mean_field(Estimator::Reparameterization)
            .under_blundell_mixture("MFVI, scale-mixture prior")
    }

    /// Radial (reparameterisation) under Blundell's scale-mixture prior, as
    /// [`Self::mean_field_scale_mixture`] (Farquhar 2022, App. B.3, tried it for radial).
    pub fn radial_scale_mixture() -> Self {
        Self::radial().under_blundell_mixture("Radial, scale-mixture prior")
    }

    /// `self` named `name`, under the scale mixture `½ N(0, 1) + ½ N(0, e⁻¹²)` of Blundell et
    /// al. (2015).
    fn under_blundell_mixture(mut self, name: &'static str) -> Self {
        self.name = name;
        self.weights.prior = Prior::ScaleMixture {
            pi: 0.5,
            sigma1: 1.0,
            sigma2: (-6f64).exp(),
        };
        self
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
