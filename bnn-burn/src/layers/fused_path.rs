//! The three estimators on the fused kernels ([`crate::fused`]), for location-scale families
//! (mean-field, radial) under a prior with scalar Gaussian parameters: the same distributions as
//! [`super::estimator`]'s composition of burn ops, with `σ`, the noise, the draw and the KL in
//! one pass per tensor forward and one backward.
//!
//! Anything else (another family or prior, a pass that needs `ln q − ln p` of its draws, or
//! [`Kernels::Reference`]) goes back to the composition.

use super::estimator::{Estimator, WeightOp};
use super::params::LayerParams;
use super::pass::Pass;
use crate::dist::WeightPrior;
use crate::fused::{self, Kernels, KlTerms};
use crate::posterior::{FusedScale, WeightPosterior};
use burn::tensor::Tensor;

/// One tensor's fused view, with its KL terms when the pass collects the KL.
struct Fusable<const D: usize> {
    scale: FusedScale<D>,
    kl: Option<(KlTerms, f64)>,
}

impl<const D: usize> Fusable<D> {
    /// `None` when the family has no fused kernels or the prior no closed-form terms.
    fn of<P: WeightPosterior<D>>(
        posterior: &P,
        prior: Option<&WeightPrior<D>>,
        collect_kl: bool,
    ) -> Option<Self> {
        let scale = posterior.fused()?;
        let kl = match (collect_kl, prior) {
            (true, Some(p)) => Some(scale.kl_terms(p)?),
            _ => None,
        };
        Some(Self { scale, kl })
    }

    /// `n` draws `[n, numel]` (of `w − μ` when `center`) and the KL, if collected.
    fn draw(
        &self,
        n: usize,
        center: bool,
        fold: Option<f32>,
        key: u64,
    ) -> (Tensor<2>, Option<Tensor<1>>) {
        let s = &self.scale;
        let scales = s.draw_scales(key, n);
        let (mu, rho) = (s.mu.clone(), s.rho.clone());
        match (self.kl, fold) {
            (Some((terms, c)), Some(_)) => {
                let (w, value) = fused::sample(mu, rho, key, &scales, center, Some(terms), fold);
                (w, Some(value + c))
            }
            (Some((terms, c)), None) => {
                let (w, _) =
                    fused::sample(mu.clone(), rho.clone(), key, &scales, center, None, None);
                (w, Some(fused::kl(mu, rho, terms) + c))
            }
            (None, _) => (
                fused::sample(mu, rho, key, &scales, center, None, None).0,
                None,
            ),
        }
    }

    /// The marginal variance and the KL, if collected.
    fn moments(&self, fold: Option<f32>) -> (Tensor<D>, Option<Tensor<1>>) {
        let s = &self.scale;
        let (mu, rho, var_scale) = (s.mu.clone(), s.rho.clone(), s.var_scale());
        match (self.kl, fold) {
            (Some((terms, c)), Some(_)) => {
                let (var, value) = fused::moments(mu, rho, var_scale, Some(terms), fold);
                (var, Some(value + c))
            }
            (Some((terms, c)), None) => {
                let (var, _) = fused::moments(mu.clone(), rho.clone(), var_scale, None, None);
                (var, Some(fused::kl(mu, rho, terms) + c))
            }
            (None, _) => (fused::moments(mu, rho, var_scale, None, None).0, None),
        }
    }
}

/// The layer's output on the fused kernels, or `None` when they do not apply.
pub(crate) fn run<W, B, const DW: usize, const DX: usize>(
    params: &LayerParams<W, B, DW>,
    op: &impl WeightOp<DX, DW>,
    x: &Tensor<DX>,
    pass: &mut Pass,
) -> Option<Tensor<DX>>
where
    W: WeightPosterior<DW>,
    B: WeightPosterior<1>,
{
    if pass.kernels() != Kernels::Fused || pass.wants_log_ratio() {
        return None;
    }
    let collect = pass.collects_kl();
    if collect && params.kl_log_var_range.is_some() {
        return None; // the fused kernels compute the exact KL
    }
    let weight = Fusable::of(&params.weight, Some(&params.weight_prior), collect)?;
    let bias = match &params.bias {
        None => None,
        Some(b) => Some(Fusable::of(b, params.bias_prior.as_ref(), collect)?),
    };
    let x = x.clone();
    let fold = pass.kl_fold().map(|w| w as f32);
    let device = x.device();
    let samples = x.dims()[0];
    let mut kls = Vec::new();
    let y = match params.estimator {
        Estimator::Reparameterization => {
            let (w, kl) = weight.draw(samples, false, fold, pass.next_key(&device));
            kls.extend(kl);
            let mut y = op.apply_per_sample(x, w);
            if let Some(b) = &bias {
                let (b, kl) = b.draw(samples, false, fold, pass.next_key(&device));
                kls.extend(kl);
                y = op.add_bias(y, b);
            }
            y
        }
        Estimator::LocalReparameterization => {
            let (var_w, kl) = weight.moments(fold);
            kls.extend(kl);
            let (mean_b, var_b) = match &bias {
                Some(b) => {
                    let (var, kl) = b.moments(fold);
                    kls.extend(kl);
                    (Some(b.scale.mu.clone()), Some(var))
                }
                None => (None, None),
            };
            let mean = op.apply(x.clone(), weight.scale.mu.clone(), mean_b);
            let var = op.apply(x.square(), var_w, var_b);
            fused::noise(mean, var, pass.next_key(&device))
        }
        Estimator::Flipout => {
            let mean_b = bias.as_ref().map(|b| b.scale.mu.clone());
            let mean = op.apply(x.clone(), weight.scale.mu.clone(), mean_b);
            let (delta, kl) = weight.draw(samples, true, fold, pass.next_key(&device));
            kls.extend(kl);
            let group = op.sign_group(x.dims());
            let flipped = fused::flip(x, pass.next_key(&device), group);
            let mut perturbation = op.apply_per_sample(flipped, delta);
            if let Some(b) = &bias {
                let (delta, kl) = b.draw(samples, true, fold, pass.next_key(&device));
                kls.extend(kl);
                perturbation = op.add_bias(perturbation, delta);
            }
            let group = op.sign_group(perturbation.dims());
            mean + fused::flip(perturbation, pass.next_key(&device), group)
        }
    };
    if let Some(kl) = kls.into_iter().reduce(|a, b| a + b) {
        pass.add_kl(kl);
    }
    Some(y)
}
