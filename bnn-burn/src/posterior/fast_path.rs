//! A family's fast path: what its tensor's draws, marginal variances and KL are on the fused
//! kernels ([`crate::fused`]). Each family's file implements [`FastPath`] (mean-field and radial
//! through [`LocScalePath`] and their [`ScaleNoise`], low-rank adding its factor) and returns it
//! from [`WeightPosterior::fast_path`](super::WeightPosterior::fast_path); the layers' estimators
//! call it for any family that has one, and the composition of burn ops for the others.

use crate::dist::WeightPrior;
use crate::fused::{FusedPrior, KlTerms, MixtureTerms};
use burn::tensor::Tensor;

/// How the kernels compute a tensor's KL under its prior ([`FastPath::kl_plan`]).
#[derive(Debug, Clone)]
pub enum FusedKl {
    /// In closed form under a prior with scalar Gaussian parameters: the kernels' terms and the
    /// constant, `KL = Σ terms + constant`; folded into the draws' backward pass when asked.
    Closed(KlTerms, f64),
    /// Under a prior with a mean and a standard deviation per entry: the kernels' terms per
    /// weight, the prior's entries (flat) and the constant; folded when asked.
    PerWeight {
        /// The kernels' terms.
        terms: KlTerms,
        /// The prior's mean and standard deviation, flat.
        prior: Box<[Tensor<1>; 2]>,
        /// `KL − Σ terms`.
        constant: f64,
    },
    /// Under a scale mixture: the Monte Carlo KL of the prior's terms over this many draws of
    /// the family's own, differentiable on its own (never folded; it takes a key of its own).
    Mixture(MixtureTerms, usize),
}

impl FusedKl {
    /// Whether the KL draws (a scale mixture's): the pass then gives it a key of its own.
    pub fn needs_key(&self) -> bool {
        matches!(self, FusedKl::Mixture(..))
    }

    /// The kernels' prior argument and the constant of a KL that can fold into a draw's or a
    /// variance's backward pass; `None` for a scale mixture's.
    pub(crate) fn foldable(&self) -> Option<(FusedPrior, f64)> {
        match self {
            FusedKl::Closed(terms, c) => Some((
                FusedPrior {
                    terms: *terms,
                    per_weight: None,
                },
                *c,
            )),
            FusedKl::PerWeight {
                terms,
                prior,
                constant,
            } => Some((
                FusedPrior {
                    terms: *terms,
                    per_weight: Some((**prior).clone()),
                },
                *constant,
            )),
            FusedKl::Mixture(..) => None,
        }
    }
}

/// The KL a draw or a variance is asked for: its plan, the weight it folds into the backward
/// pass with (`None`: its own graph), and the key of a plan that draws ([`FusedKl::needs_key`]).
#[derive(Debug, Clone, Copy)]
pub struct KlRequest<'a> {
    /// What the KL is.
    pub plan: &'a FusedKl,
    /// The fold's weight.
    pub fold: Option<f32>,
    /// The KL's own key.
    pub key: Option<u64>,
}

/// A tensor's draws, variances and KL on the fused kernels.
pub trait FastPath<const D: usize> {
    /// `E[w]`.
    fn mean(&self) -> Tensor<D>;

    /// How the kernels compute the KL to `prior`, with each `ln σ²` clamped to `range` inside it
    /// when given; `None` where they do not (the layer then takes it from burn ops).
    fn kl_plan(&self, prior: &WeightPrior<D>, range: Option<(f64, f64)>) -> Option<FusedKl>;

    /// `n` draws `[n, numel]` from stream `key` (of `w − μ` when `center`) and, when asked, the
    /// KL (folded into the draws' backward pass by its weight, or on its own).
    fn draws(
        &self,
        n: usize,
        center: bool,
        key: u64,
        kl: Option<KlRequest<'_>>,
    ) -> (Tensor<2>, Option<Tensor<1>>);

    /// The marginal variance `Var[w]` and, when asked, the KL as in [`Self::draws`].
    fn variance(&self, kl: Option<KlRequest<'_>>) -> (Tensor<D>, Option<Tensor<1>>);

    /// The KL of `plan` on its own graph (`key`: a drawing plan's).
    fn kl(&self, plan: &FusedKl, key: Option<u64>) -> Tensor<1>;

    /// `n` draws `[n, numel]` with their `ln q(w_s) − ln p(w_s)` `[n]` under `plan`'s prior (a
    /// closed-form or per-weight one) and, when `kl`, the KL as a value; `None` (the default)
    /// for a family whose kernels have no such draws.
    fn draws_with_log_ratio(
        &self,
        n: usize,
        plan: &FusedKl,
        kl: bool,
        key: u64,
    ) -> Option<(Tensor<2>, Tensor<1>, Option<Tensor<1>>)> {
        let _ = (n, plan, kl, key);
        None
    }

    /// Whether [`Self::draws_with_log_ratio`] gives draws (asked before any key is taken).
    fn has_log_ratio(&self) -> bool {
        false
    }
}
