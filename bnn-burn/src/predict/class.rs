//! Classification predictions: probability samples or Dirichlet parameters, and their entropy
//! and variance decompositions into aleatoric and epistemic parts.

use super::P_FLOOR;
use crate::reduce::{mean_dim, sum_dim};
use crate::special::digamma;
use burn::tensor::{Int, Tensor};

/// `−Σ_c p_c ln p_c` over the last axis (kept with size 1).
fn entropy_last_dim<const D: usize>(p: Tensor<D>) -> Tensor<D> {
    (p.clone() * p.clamp_min(P_FLOOR).log())
        .sum_dim(D - 1)
        .neg()
}

/// Class probabilities of `S` posterior draws.
#[derive(Debug, Clone)]
pub struct ClassSamples {
    /// `p_s(c | x_b)`, `[S, B, C]`; rows sum to one.
    pub probs: Tensor<3>,
}

/// A Dirichlet over class probabilities per input (evidential models, Sensoy et al. 2018).
#[derive(Debug, Clone)]
pub struct DirichletPrediction {
    /// Concentrations `α > 0`, `[B, C]`.
    pub alpha: Tensor<2>,
    /// The network outputs `f` behind `α = g(f)`, `[B, C]`, when the head keeps them: they
    /// break ties between classes of equal evidence in [`ClassPrediction::predicted_class`].
    /// Every evidence function `g` is non-decreasing, so `f` ranks the classes as `α` does
    /// wherever the `α_c` differ; ReLU evidence gives every class with `f_c ≤ 0` the same
    /// `α_c = 1`, and `f` still ranks them (Sensoy et al.'s code predicts `argmax f`).
    pub outputs: Option<Tensor<2>>,
}

impl DirichletPrediction {
    /// The Dirichlets of `alpha`, without outputs to break ties.
    pub fn new(alpha: Tensor<2>) -> Self {
        Self {
            alpha,
            outputs: None,
        }
    }
}

/// A classification prediction.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum ClassPrediction {
    /// Probability samples.
    Samples(ClassSamples),
    /// Dirichlet parameters.
    Dirichlet(DirichletPrediction),
}

impl ClassSamples {
    /// From logits `[S, B, C]` (softmax over classes).
    pub fn from_logits(logits: Tensor<3>) -> Self {
        Self {
            probs: burn::tensor::activation::softmax(logits, 2),
        }
    }

    fn batch(&self) -> usize {
        self.probs.dims()[1]
    }

    /// Variation ratio `1 − f/S`, `f` the count of the modal sampled label, `[B]` (Gal 2016).
    pub fn variation_ratio(&self) -> Tensor<1> {
        let [s, b, c] = self.probs.dims();
        let labels = self.probs.clone().argmax(2).reshape([s, b]);
        let counts = sum_dim(labels.one_hot::<3>(c).float(), 0).reshape([b, c]);
        counts
            .max_dim(1)
            .reshape([b])
            .div_scalar(s as f64)
            .neg()
            .add_scalar(1.0)
    }
}

impl DirichletPrediction {
    fn total(&self) -> Tensor<2> {
        self.alpha.clone().sum_dim(1)
    }
}

impl ClassPrediction {
    /// From logits of `S` draws.
    pub fn from_logits(logits: Tensor<3>) -> Self {
        Self::Samples(ClassSamples::from_logits(logits))
    }

    /// Predictive probabilities `p̄ = E[π]`, `[B, C]`.
    pub fn mean(&self) -> Tensor<2> {
        match self {
            Self::Samples(s) => mean_dim(s.probs.clone(), 0).squeeze_dim(0),
            Self::Dirichlet(d) => d.alpha.clone() / d.total(),
        }
    }

    /// The scores whose row-wise maximum is the predicted class, `[B, C]`: the predictive
    /// probabilities `p̄`, or for a Dirichlet that kept its outputs, the outputs `f`, which
    /// rank the classes as `α` (so as `p̄`) wherever the `α_c` differ and also where they tie
    /// ([`DirichletPrediction::outputs`]).
    pub fn decision_scores(&self) -> Tensor<2> {
        match self {
            Self::Dirichlet(DirichletPrediction {
                outputs: Some(f), ..
            }) => f.clone(),
            _ => self.mean(),
        }
    }

    /// The predicted class `argmax_c` of [`ClassPrediction::decision_scores`], `[B]`: always a
    /// class of the largest `p̄_c`. Exact ties, such as the uniform `p̄` of an evidential head
    /// that has no evidence for any class, fall to the outputs when the head kept them, else
    /// to the first such class.
    pub fn predicted_class(&self) -> Tensor<1, Int> {
        let scores = self.decision_scores();
        let b = scores.dims()[0];
        scores.argmax(1).reshape([b])
    }

    /// Total (predictive) entropy `H[p̄]`, `[B]`.
    pub fn entropy(&self) -> Tensor<1> {
        entropy_last_dim(self.mean()).squeeze_dim(1)
    }

    /// Aleatoric entropy `E[H[π]]`, `[B]`: the average entropy of the draws, or for a Dirichlet
    /// `ψ(α₀ + 1) − Σ_c (α_c/α₀) ψ(α_c + 1)`.
    pub fn aleatoric_entropy(&self) -> Tensor<1> {
        match self {
            Self::Samples(s) => mean_dim(entropy_last_dim(s.probs.clone()), 0).reshape([s.batch()]),
            Self::Dirichlet(d) => {
                let a0 = d.total();
                let weighted = (d.alpha.clone() / a0.clone()) * digamma(d.alpha.clone() + 1.0);
                (digamma(a0 + 1.0) - weighted.sum_dim(1)).squeeze_dim(1)
            }
        }
    }

    /// Epistemic entropy, the mutual information `I[y, π] = H[p̄] − E[H[π]]` (BALD), `[B]`;
    /// clamped at 0 where rounding makes the difference negative.
    pub fn epistemic_entropy(&self) -> Tensor<1> {
        (self.entropy() - self.aleatoric_entropy()).clamp_min(0.0)
    }

    /// Aleatoric variance `E[π_c(1 − π_c)]` per class, `[B, C]`.
    pub fn aleatoric_variance(&self) -> Tensor<2> {
        match self {
            Self::Samples(s) => {
                let p = s.probs.clone();
                mean_dim(p.clone() * (p.neg() + 1.0), 0).squeeze_dim(0)
            }
            Self::Dirichlet(d) => {
                let a0 = d.total();
                let p = self.mean();
                p.clone() * (p.neg() + 1.0) * a0.clone() / (a0 + 1.0)
            }
        }
    }

    /// Epistemic variance `Var[π_c]` per class (population form over draws), `[B, C]`.
    pub fn epistemic_variance(&self) -> Tensor<2> {
        match self {
            Self::Samples(s) => {
                let p = s.probs.clone();
                let m = mean_dim(p.clone(), 0);
                mean_dim((p - m).square(), 0).squeeze_dim(0)
            }
            Self::Dirichlet(d) => {
                let p = self.mean();
                p.clone() * (p.neg() + 1.0) / (d.total() + 1.0)
            }
        }
    }

    /// `ln p̄(y_b | x_b)` of integer labels `[B]`, `[B]`.
    pub fn log_prob(&self, labels: Tensor<1, Int>) -> Tensor<1> {
        let b = labels.dims()[0];
        self.mean()
            .gather(1, labels.reshape([b, 1]))
            .clamp_min(P_FLOOR)
            .log()
            .reshape([b])
    }

    /// The probability samples, when the prediction has them.
    pub fn samples(&self) -> Option<&ClassSamples> {
        match self {
            Self::Samples(s) => Some(s),
            Self::Dirichlet(_) => None,
        }
    }
}

#[cfg(test)]
#[path = "class_tests.rs"]
mod tests;
