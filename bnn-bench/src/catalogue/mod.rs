//! The method catalogue: named weight models used by every harness (quickstart, toy, uci,
//! mnist, perf), a name for tables and the command line and the [`WeightConfig`] of every
//! layer. A name is fixed by its constructor, so the same name is the same posterior family,
//! estimator and prior everywhere (a harness sets the task's hyperparameters, such as the
//! drop rate: [`Settings`]). The settings are the benchmarks' (N(0, 1) priors, ρ₀ = −5, Gal's
//! length-scales). [`ENTRIES`] lists every built-in method once, with the harnesses that run
//! it by default ([`defaults`]).

use bnn_burn::layers::{Estimator, WeightConfig};

mod entries;
mod evidential;
mod moments;
mod variational;
use bnn_burn::likelihood::{
    DirichletRegulariser, EdlLoss, Evidence, EvidentialConfig, GaussianLikelihoodConfig,
    Likelihood, LogitRule, NoiseFit, NoiseModel,
};
use bnn_burn::nets::{Bnn, Body, MlpConfig, MomentConfig, NoiseRefit, Regressor};
use bnn_burn::objective::{KlSchedule, PacBayesConfig, PacComplexity};
use bnn_burn::posterior::{DropoutConfig, DropoutMask, DropoutNoise, PosteriorConfig};
use bnn_burn::recipes::moment_weights;
use bnn_burn::train::{DecayGroup, EmpiricalBayesPrior, Inference, TrainConfig, Trainer};
use bnn_burn::{ConfigError, Prior};
use burn::tensor::{Device, Tensor};
pub use entries::{
    ENTRIES, Entry, Protocol, Settings, available, defaults, named, runs_by_default,
};

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
    /// `Some`: the network trains and predicts by moment propagation instead of sampling, by
    /// these rules ([`Method::inference`] tells the trainer).
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
    /// A post-hoc posterior built on the trained networks (`None`: the network is the model).
    pub posthoc: Option<PostHoc>,
    /// `Some(f)`: every layer's prior scale set to the ELBO's optimum after every epoch from the
    /// fraction `f` of the budget on ([`bnn_burn::train::EmpiricalBayesPrior`]; regressors).
    pub empirical_bayes_prior: Option<f64>,
}

/// A post-hoc posterior over networks trained as the method's weights say
/// ([`bnn_burn::posthoc`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PostHoc {
    /// `members` networks from their own seeds, pooled (deep ensembles).
    Ensemble {
        /// Networks.
        members: usize,
    },
    /// SWAG after the fit: SGD at Mandt et al.'s posterior rate, moments once per epoch, rank
    /// `rank`; `members > 1` pools that many (MultiSWAG).
    Swag {
        /// Deviation columns `K`.
        rank: usize,
        /// SWAG posteriors pooled.
        members: usize,
    },
    /// Last-layer Laplace, `λ` by the marginal likelihood, the GLM predictive.
    LastLayerLaplace,
    /// KFAC Laplace over every layer (exact GGN factors), `λ` by the marginal likelihood (one
    /// per layer when `per_layer`), the GLM predictive.
    KfacLaplace {
        /// One `λ_l` per layer ([`bnn_burn::posthoc::PriorPrecision::MarginalLikelihoodPerLayer`]).
        per_layer: bool,
    },
}

/// The prior precision of [`PostHoc::KfacLaplace`]: by marginal likelihood, shared or per layer.
pub fn kfac_prior(per_layer: bool) -> bnn_burn::posthoc::PriorPrecision {
    use bnn_burn::posthoc::PriorPrecision;
    match per_layer {
        true => PriorPrecision::MarginalLikelihoodPerLayer,
        false => PriorPrecision::MarginalLikelihood,
    }
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
            posthoc: None,
            empirical_bayes_prior: None,
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
            posthoc: None,
            empirical_bayes_prior: None,
        }
    }

    /// Whether the method trains and predicts by moments.
    pub fn predicts_by_moments(&self) -> bool {
        self.moments.is_some()
    }

    /// How the method's training steps carry the posterior: by moments where it has moment
    /// rules, else by sampling.
    pub fn inference(&self) -> Inference {
        match self.predicts_by_moments() {
            true => Inference::Moments,
            false => Inference::Sampled,
        }
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
    /// refits it in closed form after every epoch ([`NoiseRefit`], Haußmann 2021 §3.2); a
    /// method with [`Method::empirical_bayes_prior`] sets its prior scales after its epochs.
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
        let mut trainer = method.trainer(&config)?;
        if let Some(start) = self.empirical_bayes_prior {
            let from = (start * config.epochs as f64) as usize;
            trainer = trainer.with_callback(EmpiricalBayesPrior::new().from_epoch(from));
        }
        Ok(match (&self.moments, self.noise) {
            (Some(_), NoiseModel::Homoscedastic) => {
                trainer.with_callback(NoiseRefit::new(x.clone(), y.clone()))
            }
            _ => trainer,
        })
    }

    /// A trainer of `config` for this method's objective: the ELBO of `config.kl_schedule`, its
    /// annealing, no KL (empirical Bayes), or the PAC-Bayes bound; by moments for a method
    /// with moment rules ([`Method::inference`]).
    ///
    /// # Errors
    /// An invalid PAC-Bayes configuration.
    pub fn trainer<M: bnn_burn::train::Model>(
        &self,
        config: &TrainConfig,
    ) -> Result<Trainer<M>, ConfigError> {
        let config = config
            .clone()
            .with_decay_groups(self.decay.clone())
            .with_inference(self.inference());
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
}
