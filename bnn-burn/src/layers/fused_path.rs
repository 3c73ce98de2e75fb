//! The three estimators on the fused kernels ([`crate::fused`]): the same distributions as
//! [`super::estimator`]'s composition of burn ops, with `σ`, the noise, the draw and the KL in one
//! pass per tensor each way. Mean-field and radial tensors under a Gaussian prior (scalar or per
//! weight, `ln σ²` clamped or not) or a scale mixture, low-rank tensors with their factor's ops,
//! and black-box α's draws with their log-ratios take it; a tensor whose KL the kernels do not
//! compute keeps its draws here and takes the KL from burn ops ([`LayerParams::kl_on`]).
//! Everything else, and [`Kernels::Reference`], runs the composition.
//!
//! Which tensor takes which path, in detail: the book's *Fused kernels* page.

use super::estimator::{Estimator, WeightOp};
use super::params::LayerParams;
use super::pass::Pass;
use crate::dist::WeightPrior;
use crate::fused::{self, DrawSpec, FusedPrior, Kernels, KlTerms, LocScale, MixtureTerms};
use crate::posterior::{FusedFactor, FusedScale, PosteriorDist, WeightPosterior};
use crate::special::HALF_LN_2PI;
use burn::tensor::Tensor;

/// How the fused kernels compute a tensor's KL.
#[derive(Clone)]
enum FusedKl {
    /// In closed form under a prior with scalar Gaussian parameters: the kernels' terms and the
    /// constant (`FusedScale::kl_terms`), folded into the draw's backward pass when asked.
    Closed(KlTerms, f64),
    /// A mean-field or radial tensor under a scale-mixture prior: [`fused::mixture_kl`] with its
    /// prior's terms and number of draws, differentiable on its own (never folded).
    Mixture(MixtureTerms, usize),
    /// A mean-field, radial or low-rank tensor under a Gaussian prior with a mean and a
    /// standard deviation per entry (of the weight's shape): the kernels' terms per weight
    /// ([`KlTerms::per_weight`], clamped where the layer clamps `ln σ²`), folded when asked, or
    /// [`fused::kl`]; with the constant.
    Tensor {
        terms: KlTerms,
        /// The prior's mean and standard deviation, flat.
        prior: Box<[Tensor<1>; 2]>,
        constant: f64,
    },
}

/// A Gaussian prior with a mean and a standard deviation of the tensor's shape, or of shape
/// `[1; D]` ([`WeightPrior::gaussian`] takes either; such a one is expanded to the tensor's
/// shape): the two, flat, and the constant `n·½ ln 2π − (H[q] − Σ ln σ)` its KL adds to the
/// per-weight terms ([`KlTerms::per_weight`]). `None` for another prior (a scalar one, a
/// mixture).
fn per_weight_prior<const D: usize>(
    scale: &FusedScale<D>,
    prior: &WeightPrior<D>,
) -> Option<([Tensor<1>; 2], f64)> {
    let WeightPrior::Gaussian(g) = prior else {
        return None;
    };
    let shape = scale.mu.dims();
    let flat = |t: &Tensor<D>| match t.dims() {
        d if d == shape => Some(t.clone().reshape([-1])),
        d if d.iter().all(|&n| n == 1) => Some(t.clone().expand(shape).reshape([-1])),
        _ => None,
    };
    let constant = scale.numel() as f64 * HALF_LN_2PI - scale.entropy_constant();
    Some(([flat(&g.mean())?, flat(&g.std())?], constant))
}

/// A tensor's KL terms summed on the kernels ([`fused::kl`]), differentiable on their own: under
/// a scalar prior or a per-weight one (its mean and standard deviation, flat); without the
/// constant.
fn terms_kl<const D: usize>(
    s: &FusedScale<D>,
    terms: KlTerms,
    per_weight: Option<&[Tensor<1>; 2]>,
) -> Tensor<1> {
    let prior = FusedPrior {
        terms,
        per_weight: per_weight.cloned(),
    };
    fused::kl(loc_scale(s), prior)
}

/// A tensor's `μ`, `ρ` and `σ` rule as the kernels take them.
fn loc_scale<const D: usize>(s: &FusedScale<D>) -> LocScale<D> {
    LocScale {
        mu: s.mu.clone(),
        rho: s.rho.clone(),
        rule: s.sigma_rule(),
    }
}

/// One tensor's fused view, with its KL when the pass collects the KL.
struct Fusable<const D: usize> {
    scale: FusedScale<D>,
    kl: Option<FusedKl>,
}

impl<const D: usize> Fusable<D> {
    /// `None` when the family has no fused kernels (draws and moments take any
    /// [`crate::posterior::ScaleParam`]) or the KL none: under a low-rank posterior a scale
    /// mixture, a tensor-valued prior whose parameters have neither the weight's shape nor
    /// `[1; D]` (expanded to the weight's, [`per_weight_prior`]), or a clamp of `ln σ²`
    /// (`log_var_range`, [`crate::layers::WeightConfig::kl_log_var_range`]) on anything but a
    /// mean-field tensor under a Gaussian prior, scalar or per weight (the composition takes the
    /// mean-field KL at the clamped marginal variances, which is the kernels' clamped KL there).
    fn of<P: WeightPosterior<D>>(
        posterior: &P,
        prior: Option<&WeightPrior<D>>,
        collect_kl: bool,
        log_var_range: Option<(f64, f64)>,
    ) -> Option<Self> {
        let scale = posterior.fused()?;
        let kl = match (collect_kl, prior) {
            (true, Some(p)) => Some(match (scale.kl_terms(p), p, log_var_range) {
                (Some((terms, c)), _, None) => FusedKl::Closed(terms, c),
                (Some((terms, c)), _, Some(range)) if !scale.radial && scale.factor.is_none() => {
                    FusedKl::Closed(terms.with_log_var_range(range, scale.var_scale().into()), c)
                }
                (None, WeightPrior::ScaleMixture(m), None) if scale.factor.is_none() => {
                    FusedKl::Mixture(MixtureTerms::new(m.pi, m.sigma1, m.sigma2), m.mc_samples)
                }
                (None, p, range)
                    if range.is_none() || (scale.factor.is_none() && !scale.radial) =>
                {
                    let (prior, constant) = per_weight_prior(&scale, p)?;
                    let terms = KlTerms::per_weight(scale.var_scale());
                    FusedKl::Tensor {
                        terms: match range {
                            Some(range) => {
                                terms.with_log_var_range(range, scale.var_scale().into())
                            }
                            None => terms,
                        },
                        prior: Box::new(prior),
                        constant,
                    }
                }
                _ => return None,
            }),
            _ => None,
        };
        Some(Self { scale, kl })
    }

    /// A key for the KL's own draws when it has them (a scale-mixture prior), taken from the
    /// pass only then, so that every other pass keeps its sequence of keys.
    fn kl_key(&self, pass: &mut Pass, device: &burn::tensor::Device) -> Option<u64> {
        matches!(&self.kl, Some(FusedKl::Mixture(..))).then(|| pass.next_key(device))
    }

    /// The scale-mixture KL of [`FusedKl::Mixture`] under `key`: `draws` of the family's own
    /// (radial: each with its radius over its norm, [`FusedScale::draw_scales`]).
    fn mixture_kl(&self, t: MixtureTerms, draws: usize, key: Option<u64>) -> Tensor<1> {
        let s = &self.scale;
        let key = key.expect("Fusable::kl_key gives a mixture's KL its key");
        let (mu, rho, rule) = (s.mu.clone(), s.rho.clone(), s.sigma_rule());
        let scales = s.draw_scales(key, draws);
        fused::mixture_kl(mu, rho, rule, t, key, scales, s.entropy_constant())
    }

    /// The kernels' terms, per-weight prior and constant of a KL that folds into the draws' or
    /// the moments' passes (closed form, or per weight), `None` for another or none.
    fn foldable(&self) -> Option<(FusedPrior, f64)> {
        match &self.kl {
            Some(FusedKl::Closed(terms, c)) => Some((
                FusedPrior {
                    terms: *terms,
                    per_weight: None,
                },
                *c,
            )),
            Some(FusedKl::Tensor {
                terms,
                prior,
                constant,
            }) => Some((
                FusedPrior {
                    terms: *terms,
                    per_weight: Some((**prior).clone()),
                },
                *constant,
            )),
            _ => None,
        }
    }

    /// The KL, if collected, differentiable on its own: for a pass that does not fold it, and
    /// for a scale mixture (`kl_key`: [`Self::kl_key`]).
    fn own_kl(&self, kl_key: Option<u64>) -> Option<Tensor<1>> {
        let s = &self.scale;
        match self.kl.as_ref()? {
            FusedKl::Closed(terms, c) => Some(terms_kl(s, *terms, None) + *c),
            FusedKl::Tensor {
                terms,
                prior,
                constant,
            } => Some(terms_kl(s, *terms, Some(prior)) + *constant),
            FusedKl::Mixture(t, draws) => Some(self.mixture_kl(*t, *draws, kl_key)),
        }
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
        let s = &self.scale;
        let draws = DrawSpec {
            key,
            scales: s.draw_scales(key, n),
            center,
        };
        let (w, kl) = match (self.foldable(), fold) {
            (Some((prior, c)), Some(_)) => {
                let (w, value) = fused::sample(loc_scale(s), draws, Some(prior), fold);
                (w, Some(value + c))
            }
            _ => {
                let (w, _) = fused::sample(loc_scale(s), draws, None, None);
                (w, self.own_kl(kl_key))
            }
        };
        match &s.factor {
            Some(factor) => (
                add_factor_draws(w, factor, key),
                kl.map(|kl| kl + self.factor_kl(factor)),
            ),
            None => (w, kl),
        }
    }

    /// The marginal variance and the KL, if collected (`kl_key`: [`Self::kl_key`]).
    fn moments(&self, fold: Option<f32>, kl_key: Option<u64>) -> (Tensor<D>, Option<Tensor<1>>) {
        let s = &self.scale;
        let var_scale = s.var_scale();
        let (var, kl) = match (self.foldable(), fold) {
            (Some((prior, c)), Some(_)) => {
                let (var, value) = fused::moments(loc_scale(s), var_scale, Some(prior), fold);
                (var, Some(value + c))
            }
            _ => {
                let (var, _) = fused::moments(loc_scale(s), var_scale, None, None);
                (var, self.own_kl(kl_key))
            }
        };
        match &s.factor {
            Some(factor) => {
                let shape = var.dims();
                let c2 = factor.scale * factor.scale;
                let rows = factor.stored.clone().square().sum_dim(1).reshape(shape) * c2;
                let kl = kl.map(|kl| kl + self.factor_kl(factor));
                (var + rows, kl)
            }
            None => (var, kl),
        }
    }

    /// The low-rank factor's part of the KL ([`fused::factor_kl`], differentiable in `F` and
    /// `ρ`) under the scalar prior's `1/σ₀²` or the per-weight prior's `σ₀ᵢ`. The diagonal's
    /// terms are in the kernels' KL.
    fn factor_kl(&self, factor: &FusedFactor) -> Tensor<1> {
        let (terms, per_weight) = match &self.kl {
            Some(FusedKl::Closed(terms, _)) => (terms, None),
            Some(FusedKl::Tensor { terms, prior, .. }) => (terms, Some((**prior).clone())),
            _ => unreachable!("a low-rank tensor's KL is collected in closed form or not at all"),
        };
        let s = &self.scale;
        let prior = FusedPrior {
            terms: *terms,
            per_weight,
        };
        let (stored, rho) = (factor.stored.clone(), s.rho.clone());
        fused::factor_kl(stored, rho, s.sigma_rule(), factor.scale, prior)
    }
}

/// `w_s + F z_s` for the diagonal's draws `w [n, numel]` and `z_s ~ N(0, I_k)` (sub-stream
/// [`FACTOR_STREAM`] of `key`): the low-rank factor's share of `w_s − μ` added.
fn add_factor_draws(w: Tensor<2>, factor: &FusedFactor, key: u64) -> Tensor<2> {
    fused::add_factor_draws(w, factor.stored.clone(), factor.scale, key, FACTOR_STREAM)
}

/// The sub-stream of a draw's key that gives the low-rank factor's `z` (the diagonal's `ε_s`
/// take sub-streams `0..n`, a radial draw's radii `u32::MAX − s`; a low-rank tensor is never
/// radial).
const FACTOR_STREAM: u32 = u32::MAX;

/// A bias's mean and, when it has a variance, its fused view.
type FusedBias = (Option<Tensor<1>>, Option<Fusable<1>>);

/// A layer's bias on the fused kernels: its mean, and its fused view when it has a variance. A
/// point bias ([`crate::layers::WeightConfig::point_bias`]) has no noise and no KL term: its
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
            Some((Some(fusable.scale.mu.clone()), Some(fusable)))
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
            let mean = op.apply(x.clone(), weight.scale.mu.clone(), mean_b);
            let var = op.apply(x.square(), var_w, var_b);
            fused::noise(mean, var, pass.next_key(&device))
        }
        Estimator::Flipout => {
            let mean = op.apply(x.clone(), weight.scale.mu.clone(), mean_b);
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

/// One mean-field tensor's draws with their log-ratios to its scalar Gaussian prior.
struct RatioDraws<const D: usize> {
    scale: FusedScale<D>,
    terms: KlTerms,
    /// A per-weight prior's mean and standard deviation, flat.
    per_weight: Option<[Tensor<1>; 2]>,
    kl_constant: f64,
}

impl<const D: usize> RatioDraws<D> {
    /// `None` for a radial, low-rank or point posterior, or a prior that is neither a Gaussian
    /// with scalar parameters nor one with a mean and a standard deviation of the weight's
    /// shape.
    fn of<P: WeightPosterior<D>>(posterior: &P, prior: &WeightPrior<D>) -> Option<Self> {
        let scale = posterior
            .fused()
            .filter(|s| !s.radial && s.factor.is_none())?;
        let (terms, per_weight, kl_constant) = match scale.kl_terms(prior) {
            Some((terms, c)) => (terms, None, c),
            None => {
                let (per_weight, c) = per_weight_prior(&scale, prior)?;
                (KlTerms::per_weight(1.0), Some(per_weight), c)
            }
        };
        Some(Self {
            scale,
            terms,
            per_weight,
            kl_constant,
        })
    }

    /// The KL with `ln σ²` clamped to `range` inside it (the kernels' clamped terms, as
    /// [`Fusable::of`] takes them), as a value: the draws' log-ratios do not clamp.
    fn clamped_kl(&self, range: (f64, f64)) -> Tensor<1> {
        let s = &self.scale;
        let terms = self.terms.with_log_var_range(range, s.var_scale().into());
        terms_kl(s, terms, self.per_weight.as_ref()).detach() + self.kl_constant
    }

    /// `n` draws `[n, numel]`, their log-ratios `[n]` and (when `kl`) the KL as a value.
    fn draw(&self, n: usize, kl: bool, key: u64) -> (Tensor<2>, Tensor<1>, Option<Tensor<1>>) {
        let s = &self.scale;
        let prior = FusedPrior {
            terms: self.terms,
            per_weight: self.per_weight.clone(),
        };
        let (w, ratio, value) = fused::sample_log_ratio(loc_scale(s), key, n, prior, kl);
        (w, ratio, kl.then(|| value + self.kl_constant))
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
    // The kernels' KL of the draws is unclamped: a clamped one is taken on its own.
    let clamp = params.kl_log_var_range.filter(|_| collect);
    let weight = RatioDraws::of(&params.weight, &params.weight_prior)?;
    let bias = match &params.bias {
        None => None,
        Some(b) => Some(RatioDraws::of(b, params.bias_prior.as_ref()?)?),
    };
    let device = x.device();
    let samples = x.dims()[0];
    let with_kl = collect && clamp.is_none();
    let (w, mut ratio, mut kl) = weight.draw(samples, with_kl, pass.next_key(&device));
    let mut y = op.apply_per_sample(x.clone(), w);
    if let Some(b) = &bias {
        let (draws, r, k) = b.draw(samples, with_kl, pass.next_key(&device));
        y = op.add_bias(y, draws);
        ratio = ratio + r;
        kl = kl.zip(k).map(|(a, b)| a + b);
    }
    if let Some(range) = clamp {
        kl = Some(match &bias {
            Some(b) => weight.clamped_kl(range) + b.clamped_kl(range),
            None => weight.clamped_kl(range),
        });
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
    let device = weight.scale.mu.device();
    let (w_var, w_kl) = weight.moments(fold, weight.kl_key(pass, &device));
    let (b_var, b_kl) = match bias {
        Some(b) => {
            let (var, kl) = b.moments(fold, b.kl_key(pass, &device));
            (Some(var), kl)
        }
        None => (None, None),
    };
    let w_mean = weight.scale.mu;
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
