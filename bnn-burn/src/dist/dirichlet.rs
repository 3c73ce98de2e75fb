//! Closed forms of the Dirichlet over class probabilities `π ~ Dir(α)`, `α₀ = Σ_c α_c`, for
//! evidential classifiers (Sensoy et al. 2018 eqs. 3–5; Haußmann 2021 §5.2–5.3).
//!
//! Every function takes concentrations `α > 0` of shape `[B, C]` and returns one value per row,
//! `[B]`; all are built from differentiable burn ops ([`crate::special`]'s `lgamma`, `digamma`).
//! In `f32` the KL loses absolute accuracy as `α₀` grows (its log-gamma terms are of size
//! `α₀ ln α₀` and cancel): about `10⁻⁵·α₀ ln α₀`.

use crate::special::{digamma, lgamma, lgamma_scalar};
use burn::tensor::{Int, Tensor};

/// `α₀ = Σ_c α_c`, `[B, 1]`.
fn total(alpha: &Tensor<2>) -> Tensor<2> {
    alpha.clone().sum_dim(1)
}

/// `α_y` of each row's label `y`, `[B]`.
fn of_label(alpha: Tensor<2>, labels: Tensor<1, Int>) -> Tensor<1> {
    let b = alpha.dims()[0];
    alpha.gather(1, labels.reshape([b, 1])).reshape([b])
}

/// `KL(Dir(α) ‖ Dir(1, …, 1))` per row:
/// `ln Γ(α₀) − ln Γ(C) − Σ_c ln Γ(α_c) + Σ_c (α_c − 1)(ψ(α_c) − ψ(α₀))`
/// (the regulariser of Sensoy et al. 2018 eq. 5 and of BEDL-PAC, Haußmann 2021 eq. 5.10).
pub fn kl_to_uniform(alpha: Tensor<2>) -> Tensor<1> {
    let [b, c] = alpha.dims();
    let a0 = total(&alpha);
    let spread = (alpha.clone() - 1.0) * (digamma(alpha.clone()) - digamma(a0.clone()));
    let value = lgamma(a0) - lgamma(alpha).sum_dim(1) + spread.sum_dim(1);
    value.reshape([b]) - lgamma_scalar(c as f64)
}

/// `E_{Dir(α)} ‖e_y − π‖² = Σ_c (e_{y,c} − p_c)² + p_c(1 − p_c)/(α₀ + 1)`, `p = α/α₀`: the
/// squared-error Bayes risk of Sensoy et al. (2018, eq. 5).
pub fn expected_squared_error(alpha: Tensor<2>, labels: Tensor<1, Int>) -> Tensor<1> {
    let [b, c] = alpha.dims();
    let a0 = total(&alpha);
    let p = alpha / a0.clone();
    let onehot = labels.one_hot::<2>(c).float();
    let risk = (onehot - p.clone()).square() + p.clone() * (p.neg() + 1.0) / (a0 + 1.0);
    risk.sum_dim(1).reshape([b])
}

/// `E_{Dir(α)}[ln π_y] = ψ(α_y) − ψ(α₀)`: minus the cross-entropy Bayes risk of Sensoy et al.
/// (2018, eq. 4).
pub fn expected_log_prob(alpha: Tensor<2>, labels: Tensor<1, Int>) -> Tensor<1> {
    let b = alpha.dims()[0];
    let a0 = total(&alpha).reshape([b]);
    digamma(of_label(alpha, labels)) - digamma(a0)
}

/// `ln E_{Dir(α)}[π_y] = ln α_y − ln α₀`: the log marginal likelihood of the label (type-II
/// maximum likelihood, Sensoy et al. 2018 eq. 3).
pub fn log_marginal(alpha: Tensor<2>, labels: Tensor<1, Int>) -> Tensor<1> {
    let b = alpha.dims()[0];
    let a0 = total(&alpha).reshape([b]);
    of_label(alpha, labels).log() - a0.log()
}
