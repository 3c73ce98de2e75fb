//! Evidential classification (Sensoy et al. 2018; Haußmann 2021 §5.2): the network's outputs
//! are evidence for a Dirichlet over the class probabilities, `π_n | x_n ~ Dir(α(f(x_n)))`,
//! `y_n | π_n ~ Cat(π_n)`, scored by one of three expectations under the Dirichlet, with the
//! per-row regulariser `KL(Dir(α̃_n) ‖ Dir(1))`, `α̃ = y + (1 − y)⊙α` (the true class's
//! evidence removed), as the row's local KL: the ELBO weights it by its schedule, Sensoy's
//! annealing `min(1, t/10)` being [`KlSchedule::Anneal`](crate::objective::KlSchedule) over 10
//! epochs ([`EvidentialConfig::objective`]).

use super::{Likelihood, LogitRule, check_label_count};
use crate::dist::Moments;
use crate::dist::dirichlet;
use crate::posterior::Unsupported;
use crate::predict::{ClassPrediction, ClassSamples, DirichletPrediction};
use crate::special::softplus;
use burn::config::Config;
use burn::module::Module;
use burn::tensor::activation::relu;
use burn::tensor::{Int, Tensor};

/// `|f|` above which [`Evidence::Exp`] clamps the outputs: `α ∈ [e⁻¹⁵, e¹⁵]`, where `f32`'s
/// digamma and log-gamma stay finite and the KL's cancellation stays below `10⁻²`.
const EXP_CLAMP: f64 = 15.0;

/// How the outputs `f` become concentrations `α`.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum Evidence {
    /// `α = relu(f) + 1` (Sensoy et al. 2018).
    ReluPlusOne,
    /// `α = exp(f)`, `f` clamped to `±15` (Haußmann 2021's BEDL).
    Exp,
    /// `α = softplus(f) + 1`.
    SoftplusPlusOne,
}

impl Evidence {
    /// `α(f)` elementwise.
    pub fn concentrations<const D: usize>(self, f: Tensor<D>) -> Tensor<D> {
        match self {
            Self::ReluPlusOne => relu(f) + 1.0,
            Self::Exp => f.clamp(-EXP_CLAMP, EXP_CLAMP).exp(),
            Self::SoftplusPlusOne => softplus(f) + 1.0,
        }
    }
}

/// Which Dirichlet each row's local KL to `Dir(1, …, 1)` is of.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum DirichletRegulariser {
    /// No local KL.
    None,
    /// `KL(Dir(α̃) ‖ Dir(1))`, `α̃ = y + (1 − y)⊙α`: the true class's evidence removed, so only
    /// misleading evidence is penalised (Sensoy et al. 2018 eq. 5; the default).
    RemoveTrueClass,
    /// `KL(Dir(α) ‖ Dir(1))` of the full concentrations: the PAC-Bayes regulariser of BEDL-PAC
    /// (Haußmann 2021 eq. 5.10; the reference code's `α`, not `α̃`).
    Full,
}

/// Which expectation under `Dir(α)` scores the label `y` (Sensoy et al. 2018 eqs. 3–5); the
/// log-likelihood is minus the loss.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum EdlLoss {
    /// `−E‖e_y − π‖² = −Σ_c [(e_{y,c} − p_c)² + p_c(1 − p_c)/(α₀ + 1)]` (eq. 5, the default).
    SquaredError,
    /// `ln E[π_y] = ln α_y − ln α₀` (type-II maximum likelihood, eq. 3).
    LogMarginal,
    /// `E[ln π_y] = ψ(α_y) − ψ(α₀)` (the cross-entropy Bayes risk, eq. 4).
    Digamma,
}

/// Configuration of [`Evidential`].
#[derive(Config, Debug)]
pub struct EvidentialConfig {
    /// How outputs become concentrations. The default is softplus: ReLU's zero gradient below 0
    /// lets the regulariser switch every class's evidence off for good (64 classes: see
    /// [`EvidentialConfig::sensoy`]).
    #[config(default = "Evidence::SoftplusPlusOne")]
    pub evidence: Evidence,
    /// The data term. The default is `E[ln π_y]`: the squared error's gradient shrinks as
    /// `1/α₀ ≥ 1/C`, so with many classes the regulariser wins and the evidence collapses.
    #[config(default = "EdlLoss::Digamma")]
    pub loss: EdlLoss,
    /// The row's local KL.
    #[config(default = "DirichletRegulariser::RemoveTrueClass")]
    pub regulariser: DirichletRegulariser,
    /// Epochs over which [`EvidentialConfig::objective`] anneals the regulariser's weight
    /// linearly from 0 to 1 (Sensoy et al. 2018: 10).
    #[config(default = 10)]
    pub warmup_epochs: usize,
}

/// λ of Sensoy et al. (2018)'s L2 penalty `λ‖W‖²/2` on the dense weights (their code's `lmb`);
/// see [`EvidentialConfig::sensoy_decay`].
pub const SENSOY_WEIGHT_DECAY: f64 = 0.005;

impl EvidentialConfig {
    /// Sensoy et al. (2018)'s head: ReLU evidence and the squared-error risk. With many classes
    /// it collapses once the regulariser weighs in: on 64 Gaussian clusters in 16 dimensions (a
    /// MAP MLP with 64 hidden units, 100 epochs, the regulariser annealed over 10) its test
    /// accuracy was 15–22 % with a mean total evidence of 1.5–1.7 (two seeds), against 97–100 %
    /// and 41–43 for the default head (softplus evidence, `E[ln π_y]`); ReLU with `E[ln π_y]`
    /// reached 59–67 %, softplus with the squared error 22–32 %. On ten MNIST-like classes it
    /// trains.
    pub fn sensoy() -> Self {
        Self::new()
            .with_evidence(Evidence::ReluPlusOne)
            .with_loss(EdlLoss::SquaredError)
    }

    /// The likelihood.
    pub fn init(&self) -> Evidential {
        Evidential {
            evidence: self.evidence,
            loss: self.loss,
            regulariser: self.regulariser,
        }
    }
}

/// The evidential (Dirichlet) head (module docs).
#[derive(Module, Debug)]
pub struct Evidential {
    /// How outputs become concentrations.
    #[module(skip)]
    pub evidence: Evidence,
    /// The data term.
    #[module(skip)]
    pub loss: EdlLoss,
    /// The row's local KL.
    #[module(skip)]
    pub regulariser: DirichletRegulariser,
}

impl Evidential {
    /// Concentrations of `S` draws, `[S·B, C]`.
    fn alpha(&self, out: Tensor<3>) -> Tensor<2> {
        let [s, b, c] = out.dims();
        self.evidence.concentrations(out.reshape([s * b, c]))
    }
}

/// The labels repeated for each of `s` draws, `[S·B]`.
fn repeated(labels: Tensor<1, Int>, s: usize) -> Tensor<1, Int> {
    let b = labels.dims()[0];
    labels.reshape([1, b]).repeat_dim(0, s).reshape([s * b])
}

impl Likelihood for Evidential {
    type Target = Tensor<1, Int>;
    type Prediction = ClassPrediction;

    fn outputs_per_target(&self) -> usize {
        1
    }

    fn log_likelihood(&self, out: Tensor<3>, labels: Tensor<1, Int>) -> Tensor<2> {
        let [s, b, c] = out.dims();
        check_label_count("Evidential", [s, b, c], labels.dims()[0]);
        let (alpha, labels) = (self.alpha(out), repeated(labels, s));
        let ll = match self.loss {
            EdlLoss::SquaredError => dirichlet::expected_squared_error(alpha, labels).neg(),
            EdlLoss::LogMarginal => dirichlet::log_marginal(alpha, labels),
            EdlLoss::Digamma => dirichlet::expected_log_prob(alpha, labels),
        };
        ll.reshape([s, b])
    }

    /// One draw: the Dirichlet itself (its closed-form decomposition). Several draws (a
    /// Bayesian body): the Dirichlet means `α/α₀` of the draws, as probability samples.
    fn predict(&self, out: Tensor<3>) -> ClassPrediction {
        let [s, b, c] = out.dims();
        let alpha = self.alpha(out.clone());
        if s == 1 {
            return ClassPrediction::Dirichlet(DirichletPrediction {
                alpha,
                outputs: Some(out.reshape([b, c])),
            });
        }
        let mean = alpha.clone() / alpha.sum_dim(1);
        ClassPrediction::Samples(ClassSamples {
            probs: mean.reshape([s, b, c]),
        })
    }

    /// The [`DirichletRegulariser`]'s KL, averaged over the draws.
    fn local_kl(&self, out: &Tensor<3>, labels: &Tensor<1, Int>) -> Option<Tensor<1>> {
        let [s, b, c] = out.dims();
        let alpha = self.alpha(out.clone());
        let alpha = match self.regulariser {
            DirichletRegulariser::None => return None,
            DirichletRegulariser::Full => alpha,
            DirichletRegulariser::RemoveTrueClass => {
                let onehot = repeated(labels.clone(), s).one_hot::<2>(c).float();
                onehot.clone() + (onehot.neg() + 1.0) * alpha
            }
        };
        let kl = dirichlet::kl_to_uniform(alpha).reshape([s, b]);
        Some(crate::reduce::mean_dim(kl, 0).reshape([b]))
    }

    /// Sampled logits only (`Sampled`, `SampledMarginal`): the draws' predictions. `Probit` and
    /// `Taylor` are refused (no evidential form).
    fn predict_moments(
        &self,
        out: Moments<2>,
        logits: LogitRule,
    ) -> Result<ClassPrediction, Unsupported> {
        Ok(self.predict(sampled(out, logits)?))
    }

    /// `Sampled`: the draws' average log-likelihood; `SampledMarginal`: the log of their average
    /// likelihood, BEDL's `ln E[p]` (Haußmann 2021 eq. 5.8; with `Exp` evidence and
    /// `LogMarginal`, `p(y | f) = softmax(f)_y`).
    fn expected_log_likelihood(
        &self,
        out: Moments<2>,
        labels: Tensor<1, Int>,
        logits: LogitRule,
    ) -> Result<Tensor<1>, Unsupported> {
        Ok(match logits {
            LogitRule::Sampled { samples } => {
                super::sampled_log_likelihood(self, out, labels, samples, false)
            }
            LogitRule::SampledMarginal { samples } => {
                super::sampled_log_likelihood(self, out, labels, samples, true)
            }
            LogitRule::Probit | LogitRule::Taylor => return Err(no_moment_form()),
        })
    }

    /// The local KL of sampled logits (BEDL-PAC averages it over 5 draws).
    fn expected_local_kl(
        &self,
        out: Moments<2>,
        labels: &Tensor<1, Int>,
        logits: LogitRule,
    ) -> Result<Option<Tensor<1>>, Unsupported> {
        Ok(self.local_kl(&sampled(out, logits)?, labels))
    }
}

/// Draws of Gaussian outputs for the sampled logit rules; the others have no evidential form.
fn sampled(out: Moments<2>, logits: LogitRule) -> Result<Tensor<3>, Unsupported> {
    match logits {
        LogitRule::Sampled { samples } | LogitRule::SampledMarginal { samples } => {
            Ok(super::sample_logits(out, samples))
        }
        LogitRule::Probit | LogitRule::Taylor => Err(no_moment_form()),
    }
}

/// The refusal of the logit rules without draws.
fn no_moment_form() -> Unsupported {
    Unsupported {
        family: "Evidential",
        what: "an evidential head under output moments needs sampled outputs: \
               LogitRule::Sampled or SampledMarginal",
    }
}

#[cfg(test)]
#[path = "evidential_tests.rs"]
mod tests;
