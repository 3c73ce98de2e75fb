//! The three estimators on the fused kernels ([`crate::fused`]): the same distributions as
//! [`super::estimator`]'s composition of burn ops, with `σ`, the noise, the draw and the KL in one
//! pass per tensor each way. A tensor takes it when its family has a fast path
//! ([`WeightPosterior::fast_path`]: mean-field, radial, low-rank), with its KL on the kernels
//! where the family's [`FastPath::kl_plan`] gives one for its prior, from burn ops
//! ([`LayerParams::kl_on`]) otherwise. Everything else, and [`Kernels::Reference`], runs the
//! composition. Which tensor takes which path: the book's *Fused kernels* page.

use super::estimator::{Estimator, WeightOp};
use super::params::LayerParams;
use super::pass::Pass;
use crate::dist::WeightPrior;
use crate::fused::{self, Kernels};
use crate::posterior::{FastPath, FusedKl, KlRequest, PosteriorDist, WeightPosterior};
use burn::tensor::Tensor;

/// One tensor's fast path ([`WeightPosterior::fast_path`]), with its KL's plan when the pass
/// collects the KL.
struct Fusable<const D: usize> {
    path: Box<dyn FastPath<D>>,
    kl: Option<FusedKl>,
}

impl<const D: usize> Fusable<D> {
    /// `None` when the family has no fast path, or the pass collects the KL and the kernels do
    /// not compute it under `prior` ([`FastPath::kl_plan`]; `log_var_range`: the layer's clamp
    /// of `ln σ²`, [`crate::dist::Prior::ClampedGaussian`]).
    fn of<P: WeightPosterior<D>>(
        posterior: &P,
        prior: Option<&WeightPrior<D>>,
        collect_kl: bool,
        log_var_range: Option<(f64, f64)>,
    ) -> Option<Self> {
        let path = posterior.fast_path()?;
        let kl = match (collect_kl, prior) {
            (true, Some(p)) => Some(path.kl_plan(p, log_var_range)?),
            _ => None,
        };
        Some(Self { path, kl })
    }

    /// A key for the KL's own draws when it has them (a scale-mixture prior), taken from the
    /// pass only then, so that every other pass keeps its sequence of keys.
    fn kl_key(&self, pass: &mut Pass, device: &burn::tensor::Device) -> Option<u64> {
        self.kl
            .as_ref()
            .filter(|plan| plan.needs_key())
            .map(|_| pass.next_key(device))
    }

    /// The KL this view is asked for, folded by `fold` where it can be.
    fn request(&self, fold: Option<f32>, key: Option<u64>) -> Option<KlRequest<'_>> {
        self.kl.as_ref().map(|plan| KlRequest { plan, fold, key })
    }

    /// `n` draws `[n, numel]` (of `w − μ` when `center`) and the KL, if collected (`kl_key`:
    /// [`Self::kl_key`]).
    fn draw(
        &self,
        n: usize,
        center: bool,
        fold: Option<f32>,
        key: u64,
        kl_key: Option<u64>,
    ) -> (Tensor<2>, Option<Tensor<1>>) {
        self.path.draws(n, center, key, self.request(fold, kl_key))
    }

    /// The marginal variance and the KL, if collected (`kl_key`: [`Self::kl_key`]).
    fn moments(&self, fold: Option<f32>, kl_key: Option<u64>) -> (Tensor<D>, Option<Tensor<1>>) {
        self.path.variance(self.request(fold, kl_key))
    }
}

/// A bias's mean and, when it has a variance, its fused view.
type FusedBias = (Option<Tensor<1>>, Option<Fusable<1>>);

/// A layer's bias on the fused kernels: its mean, and its fused view when it has a variance. A
/// point bias ([`crate::layers::Bias::Point`]) has no noise and no KL term: its
/// mean only. `None` (the composition) when the bias has no fused kernels, or is a point under a
/// prior whose term the pass collects.
fn fused_bias<W, B, const DW: usize>(
    params: &LayerParams<W, B, DW>,
    collect: bool,
) -> Option<FusedBias>
where
    W: WeightPosterior<DW>,
    B: WeightPosterior<1>,
{
    match &params.bias {
        None => Some((None, None)),
        Some(b) if b.is_point() => {
            if collect && params.bias_prior.is_some() {
                return None;
            }
            Some((Some(b.dist().mean()), None))
        }
        Some(b) => {
            let range = params.kl_log_var_range;
            let fusable = Fusable::of(b, params.bias_prior.as_ref(), collect, range)?;
            Some((Some(fusable.path.mean()), Some(fusable)))
        }
    }
}

/// A layer's fused views: its weight's, its bias's mean and (when it has a variance) its
/// bias's, and whether the pass's KL is left to the composition of burn ops.
struct Views<const DW: usize> {
    weight: Fusable<DW>,
    bias_mean: Option<Tensor<1>>,
    bias: Option<Fusable<1>>,
    /// The pass collects the KL, and the kernels do not compute it (a hyperprior, or what
    /// [`Fusable::of`] refuses): the draws and variances stay on the kernels, and the layer's KL
    /// is [`LayerParams::kl_on`]'s burn ops, never folded.
    composed_kl: bool,
}

impl<const DW: usize> Views<DW> {
    /// The views with the KL on the kernels where [`Fusable::of`] gives its terms for weight
    /// and bias, else without it (`composed_kl` when `collect`); `None` (the composition) when
    /// a tensor has no fused kernels.
    fn of<W, B>(params: &LayerParams<W, B, DW>, collect: bool) -> Option<Self>
    where
        W: WeightPosterior<DW>,
        B: WeightPosterior<1>,
    {
        let range = params.kl_log_var_range;
        let views = |collect: bool| {
            let prior = Some(&params.weight_prior);
            let weight = Fusable::of(&params.weight, prior, collect, range)?;
            let (bias_mean, bias) = fused_bias(params, collect)?;
            Some(Self {
                weight,
                bias_mean,
                bias,
                composed_kl: false,
            })
        };
        // The kernels compute the KL, not a hyperprior's density.
        let kernels_kl = collect && params.hyperprior.is_none();
        match kernels_kl.then(|| views(true)).flatten() {
            Some(v) => Some(v),
            None => views(false).map(|v| Self {
                composed_kl: collect,
                ..v
            }),
        }
    }
}

/// Whether a training pass that collects the KL takes it from the kernels (`Some(true)`), or
/// draws on the kernels and takes the layer's KL from burn ops (`Some(false)`); `None` when the
/// layer's draws leave the kernels.
#[cfg(test)]
pub(crate) fn kl_on_kernels<W, B, const DW: usize>(params: &LayerParams<W, B, DW>) -> Option<bool>
where
    W: WeightPosterior<DW>,
    B: WeightPosterior<1>,
{
    Views::of(params, true).map(|v| !v.composed_kl)
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
    if pass.kernels() != Kernels::Fused {
        return None;
    }
    if pass.wants_log_ratio() {
        return run_log_ratio(params, op, x, pass);
    }
    let Views {
        weight,
        bias_mean: mean_b,
        bias,
        composed_kl,
    } = Views::of(params, pass.collects_kl())?;
    let x = x.clone();
    let fold = pass.kl_fold().map(|w| w as f32);
    let device = x.device();
    let samples = x.dims()[0];
    let mut kls = Vec::new();
    let y = match params.estimator {
        Estimator::Reparameterization => {
            let key = pass.next_key(&device);
            let kl_key = weight.kl_key(pass, &device);
            let (w, kl) = weight.draw(samples, false, fold, key, kl_key);
            kls.extend(kl);
            let y = op.apply_per_sample(x, w);
            match (&bias, mean_b) {
                (Some(b), _) => {
                    let key = pass.next_key(&device);
                    let kl_key = b.kl_key(pass, &device);
                    let (b, kl) = b.draw(samples, false, fold, key, kl_key);
                    kls.extend(kl);
                    op.add_bias(y, b)
                }
                (None, Some(point)) => op.add_bias(y, point.unsqueeze_dim(0)),
                (None, None) => y,
            }
        }
        Estimator::LocalReparameterization => {
            let (var_w, kl) = weight.moments(fold, weight.kl_key(pass, &device));
            kls.extend(kl);
            let var_b = bias.as_ref().map(|b| {
                let (var, kl) = b.moments(fold, b.kl_key(pass, &device));
                kls.extend(kl);
                var
            });
            let mean = op.apply(x.clone(), weight.path.mean(), mean_b);
            let var = op.apply(x.square(), var_w, var_b);
            fused::noise(mean, var, pass.next_key(&device))
        }
        Estimator::Flipout => {
            let mean = op.apply(x.clone(), weight.path.mean(), mean_b);
            let key = pass.next_key(&device);
            let kl_key = weight.kl_key(pass, &device);
            let (delta, kl) = weight.draw(samples, true, fold, key, kl_key);
            kls.extend(kl);
            let group = op.sign_group(x.dims());
            let flipped = fused::flip(x, pass.next_key(&device), group);
            let mut perturbation = op.apply_per_sample(flipped, delta);
            if let Some(b) = &bias {
                let key = pass.next_key(&device);
                let kl_key = b.kl_key(pass, &device);
                let (delta, kl) = b.draw(samples, true, fold, key, kl_key);
                kls.extend(kl);
                perturbation = op.add_bias(perturbation, delta);
            }
            let group = op.sign_group(perturbation.dims());
            mean + fused::flip(perturbation, pass.next_key(&device), group)
        }
    };
    if composed_kl {
        kls.push(params.kl_on(pass.kernels()));
    }
    if let Some(kl) = kls.into_iter().reduce(|a, b| a + b) {
        pass.add_kl(kl);
    }
    Some(y)
}

/// One tensor's draws with their log-ratios: its fast path, its prior's plan, and the plan
/// with `ln σ²` clamped when the layer clamps it (whose KL is a value apart: the draws'
/// log-ratios do not clamp).
struct RatioDraws<const D: usize> {
    path: Box<dyn FastPath<D>>,
    plan: FusedKl,
    clamped: Option<FusedKl>,
}

impl<const D: usize> RatioDraws<D> {
    /// `None` for a family without log-ratio draws on the kernels (radial, low-rank, point), or
    /// a prior whose KL does not fold (a scale mixture, parameters of another shape).
    fn of<P: WeightPosterior<D>>(
        posterior: &P,
        prior: &WeightPrior<D>,
        clamp: Option<(f64, f64)>,
    ) -> Option<Self> {
        let path = posterior.fast_path().filter(|p| p.has_log_ratio())?;
        let plan = path
            .kl_plan(prior, None)
            .filter(|p| p.foldable().is_some())?;
        let clamped = match clamp {
            Some(range) => Some(path.kl_plan(prior, Some(range))?),
            None => None,
        };
        Some(Self {
            path,
            plan,
            clamped,
        })
    }

    /// `n` draws `[n, numel]`, their log-ratios `[n]` and (when `kl`) the KL as a value, with
    /// `ln σ²` clamped inside it where the layer clamps it.
    fn draw(&self, n: usize, kl: bool, key: u64) -> (Tensor<2>, Tensor<1>, Option<Tensor<1>>) {
        let with_kl = kl && self.clamped.is_none();
        let (w, ratio, value) = self
            .path
            .draws_with_log_ratio(n, &self.plan, with_kl, key)
            .expect("RatioDraws::of checked the family");
        let value = match &self.clamped {
            Some(plan) if kl => Some(self.path.kl(plan, None).detach()),
            _ => value,
        };
        (w, ratio, value)
    }
}

/// The reparameterisation estimator's output for black-box α: one fused draw per sample of the
/// weight and the bias with their `ln q − ln p`, added to the pass, and the KL as a value (with
/// `ln σ²` clamped inside it where the layer clamps it, [`RatioDraws::clamped_kl`]); `None`
/// (the composition) for another estimator, a hyperprior, a folded KL, or a tensor
/// [`RatioDraws`] refuses.
fn run_log_ratio<W, B, const DW: usize, const DX: usize>(
    params: &LayerParams<W, B, DW>,
    op: &impl WeightOp<DX, DW>,
    x: &Tensor<DX>,
    pass: &mut Pass,
) -> Option<Tensor<DX>>
where
    W: WeightPosterior<DW>,
    B: WeightPosterior<1>,
{
    let collect = pass.collects_kl();
    if params.estimator != Estimator::Reparameterization
        || params.hyperprior.is_some()
        || pass.kl_fold().is_some()
    {
        return None;
    }
    let clamp = params.kl_log_var_range.filter(|_| collect);
    let weight = RatioDraws::of(&params.weight, &params.weight_prior, clamp)?;
    let bias = match &params.bias {
        None => None,
        Some(b) => Some(RatioDraws::of(b, params.bias_prior.as_ref()?, clamp)?),
    };
    let device = x.device();
    let samples = x.dims()[0];
    let (w, mut ratio, mut kl) = weight.draw(samples, collect, pass.next_key(&device));
    let mut y = op.apply_per_sample(x.clone(), w);
    if let Some(b) = &bias {
        let (draws, r, k) = b.draw(samples, collect, pass.next_key(&device));
        y = op.add_bias(y, draws);
        ratio = ratio + r;
        kl = kl.zip(k).map(|(a, b)| a + b);
    }
    pass.add_log_ratio(ratio);
    if let Some(kl) = kl {
        pass.add_kl(kl);
    }
    Some(y)
}

/// What the linear moment rule reads of a layer's parameters: the means and marginal variances
/// of its weight and bias (`None` for no bias, or no variance: a point tensor).
pub(crate) struct MomentParams<const DW: usize> {
    /// `E[w]`.
    pub(crate) w_mean: Tensor<DW>,
    /// `Var[w]`.
    pub(crate) w_var: Option<Tensor<DW>>,
    /// `E[b]`.
    pub(crate) b_mean: Option<Tensor<1>>,
    /// `Var[b]`.
    pub(crate) b_var: Option<Tensor<1>>,
}

/// The moment rule's parameters on the fused kernels: each variance `σ(ρ)²·c` in one pass
/// forward and one backward ([`fused::moments`], any [`crate::posterior::ScaleParam`]), the
/// layer's KL added to the pass when it collects it (folded into the same backward pass when it
/// asks; a KL the kernels do not compute comes from burn ops, [`Views::of`]). `None` (the
/// composition) for [`Kernels::Reference`], or a weight without fused kernels (a point
/// estimate, another family). A point bias without a prior has no variance and no KL term.
pub(crate) fn moment_params<W, B, const DW: usize>(
    params: &LayerParams<W, B, DW>,
    pass: &mut Pass,
) -> Option<MomentParams<DW>>
where
    W: WeightPosterior<DW>,
    B: WeightPosterior<1>,
{
    if pass.kernels() != Kernels::Fused {
        return None;
    }
    let Views {
        weight,
        bias_mean: b_mean,
        bias,
        composed_kl,
    } = Views::of(params, pass.collects_kl())?;
    let fold = pass.kl_fold().map(|w| w as f32);
    let w_mean = weight.path.mean();
    let device = w_mean.device();
    let (w_var, w_kl) = weight.moments(fold, weight.kl_key(pass, &device));
    let (b_var, b_kl) = match bias {
        Some(b) => {
            let (var, kl) = b.moments(fold, b.kl_key(pass, &device));
            (Some(var), kl)
        }
        None => (None, None),
    };
    // A hyperprior's density reads the kernels' variances; another KL is burn ops of its own.
    let composed = composed_kl.then(|| match &params.hyperprior {
        Some(h) => {
            let bias = b_mean.clone().map(|m| (m, b_var.clone()));
            let weight = (w_mean.clone(), Some(w_var.clone()));
            super::estimator::hyperprior_term(h, weight, bias, params.bias_prior.is_some())
        }
        None => params.kl_on(pass.kernels()),
    });
    if let Some(kl) = [w_kl, b_kl, composed]
        .into_iter()
        .flatten()
        .reduce(|a, b| a + b)
    {
        pass.add_kl(kl);
    }
    Some(MomentParams {
        w_mean,
        w_var: Some(w_var),
        b_mean,
        b_var,
    })
}
