//! The gradient estimators of a stochastic layer, written once for every posterior family and for
//! both the dense and the convolutional layer (through [`WeightOp`]): reparameterisation (one draw
//! per sample, shared by the batch), local reparameterisation (Kingma et al. 2015: per-example
//! pre-activations `N(x ∗ E[w], x² ∗ Var[w])`, exact for factorised Gaussians) and Flipout (Wen et
//! al. 2018: one perturbation per sample, decorrelated by random signs). Guide: the book's
//! *Estimators* page.

use super::params::LayerParams;
use super::pass::Pass;
use crate::dist::WeightPrior;
use crate::fused::Kernels;
use crate::posterior::{McDropout, MeanFieldDist};
use crate::posterior::{PosteriorDist, Unsupported, WeightPosterior, row};
use burn::config::Config;
use burn::tensor::{Distribution, Tensor};

/// Added to sampled variances before the square root so that its gradient stays finite (a
/// sampling layer's pre-activations here, Gaussian logits in
/// [`crate::likelihood`]'s sampled rules).
pub(crate) const VAR_FLOOR: f64 = 1e-16;

/// How a stochastic layer draws its output.
#[derive(Config, Debug, PartialEq, Eq, Copy)]
pub enum Estimator {
    /// One weight sample per Monte Carlo sample, shared by the batch (masks on input units,
    /// MC dropout, are drawn per example under every estimator).
    Reparameterization,
    /// Per-example pre-activations from the marginal moments (Kingma et al. 2015).
    LocalReparameterization,
    /// Sign-flipped shared perturbation, decorrelated per example (Wen et al. 2018).
    Flipout,
}

/// The weight-bearing operation of a layer (`x W` or a convolution) on activations with a
/// leading sample axis `[S, B, ...]`.
pub(crate) trait WeightOp<const DX: usize, const DW: usize> {
    /// Shape of the weight tensor.
    fn weight_shape(&self) -> [usize; DW];
    /// The operation with one weight (and bias `[out]`) for every sample, in one op.
    fn apply(&self, x: Tensor<DX>, w: Tensor<DW>, b: Option<Tensor<1>>) -> Tensor<DX>;
    /// The operation with one flat weight draw `[S, numel]` per sample.
    fn apply_per_sample(&self, x: Tensor<DX>, w: Tensor<2>) -> Tensor<DX>;
    /// Adds a bias `[1, out]` (shared) or `[S, out]` (one per sample).
    fn add_bias(&self, y: Tensor<DX>, b: Tensor<2>) -> Tensor<DX>;
    /// Random ±1 per sample, example and input unit, broadcast over the rest.
    fn input_signs(&self, x: &Tensor<DX>) -> Tensor<DX>;
    /// Random ±1 per sample, example and output unit.
    fn output_signs(&self, y: &Tensor<DX>) -> Tensor<DX>;
    /// How many consecutive elements of an activation of shape `dims` share one Flipout sign
    /// (1 for dense layers, the spatial size for convolutions).
    fn sign_group(&self, dims: [usize; DX]) -> usize;
    /// `Σ_r (x ∗ G_r)²` per output, `G_r` column `r` of a factor `[numel, r]` shaped as the
    /// weight: the variance that weights coupled by `G Gᵀ` give the output at input `x`.
    /// `None` where the operation has no such rule (convolutions).
    fn coupled_variance(&self, _x: Tensor<DX>, _factor: Tensor<2>) -> Option<Tensor<DX>> {
        None
    }
}

/// The evaluated posteriors of one layer for one pass.
struct Evaluated<W: PosteriorDist<DW>, B: PosteriorDist<1>, const DW: usize> {
    weight: W,
    bias: Option<B>,
    weight_point: bool,
    bias_point: bool,
    unit_noise: Option<McDropout>,
    /// The fused kernels' stream key of the unit masks (Bernoulli masks on the fused path).
    unit_noise_key: Option<u64>,
}

/// Weight draws `[S, numel]` and bias draws `[S, out]`, when the estimator made them.
type Draws = Option<(Tensor<2>, Option<Tensor<2>>)>;

/// The layer's output under `pass`, adding its training terms (KL, log-ratio) to the pass.
pub(crate) fn run<W, B, const DW: usize, const DX: usize>(
    params: &LayerParams<W, B, DW>,
    op: &impl WeightOp<DX, DW>,
    x: Tensor<DX>,
    pass: &mut Pass,
) -> Tensor<DX>
where
    W: WeightPosterior<DW>,
    B: WeightPosterior<1>,
{
    if let Some(draw) = pass.next_draw() {
        if draw.samples() == 1 {
            let w = draw.weight.clone().reshape(op.weight_shape());
            return op.apply(x, w, draw.bias.clone().map(|b| b.reshape([-1])));
        }
        let y = op.apply_per_sample(x, draw.weight.clone());
        return match &draw.bias {
            Some(b) => op.add_bias(y, b.clone()),
            None => y,
        };
    }
    if let Some(y) = super::fused_path::run(params, op, &x, pass) {
        return y;
    }
    let unit_noise = params.weight.unit_noise();
    // Unit masks are drawn per example under every estimator (Gal's MC dropout), unless the
    // pass needs whole-weight draws for their log-ratios.
    let unit_noise_key = match unit_noise {
        Some(d) if pass.kernels() == Kernels::Fused && d.p > 0.0 && !pass.wants_log_ratio() => {
            Some(pass.next_key(&x.device()))
        }
        _ => None,
    };
    let q = Evaluated {
        weight: params.weight.dist(),
        bias: params.bias.as_ref().map(|b| b.dist()),
        weight_point: params.weight.is_point(),
        bias_point: params.bias.as_ref().is_none_or(|b| b.is_point()),
        unit_noise,
        unit_noise_key,
    };
    let want_draws = pass.wants_log_ratio();
    let (y, draws) = forward(&q, params.estimator, op, x, want_draws);
    if pass.collects_kl() {
        pass.add_kl(layer_kl(&q.weight, q.bias.as_ref(), params, pass.kernels()));
    }
    if want_draws {
        match draws.map(|d| log_ratio(&q, params, d)) {
            Some(Ok(ratio)) => pass.add_log_ratio(ratio),
            Some(Err(why)) => pass.fail(why),
            None => pass.fail(Unsupported {
                family: q.weight.family(),
                what: "this posterior's ln q(w) − ln p(w) needs one weight draw per sample: \
                       use Estimator::Reparameterization",
            }),
        }
    }
    y
}

/// `KL(q ‖ p)` of a layer's weight and bias from their evaluated posteriors (one element), or
/// under a hyperprior ([`crate::dist::Prior::Hyper`]) their `−ln p(μ, σ²)`;
/// on `kernels` where they compute it (a point or dropout masks under a Gaussian prior,
/// [`PosteriorDist::scaled_point`]).
pub(crate) fn layer_kl<W, B, const DW: usize>(
    weight: &W::Dist,
    bias: Option<&B::Dist>,
    params: &LayerParams<W, B, DW>,
    kernels: Kernels,
) -> Tensor<1>
where
    W: WeightPosterior<DW>,
    B: WeightPosterior<1>,
{
    if let Some(h) = &params.hyperprior {
        let moments = |b: &B::Dist| (b.mean(), b.marginal_variance());
        let weight = (weight.mean(), weight.marginal_variance());
        return hyperprior_term(h, weight, bias.map(moments), params.bias_prior.is_some());
    }
    let range = params.kl_log_var_range;
    let kl = kl_with(weight, &params.weight_prior, range, kernels);
    match (bias, &params.bias_prior) {
        (Some(b), Some(p)) => kl + kl_with(b, p, range, kernels),
        _ => kl,
    }
}

/// A hyperprior's `−ln p(μ, σ²)` of a layer from the means and marginal variances (`None`: a
/// point) of its weight and bias; a bias without a prior term (a point bias,
/// [`Bias::Point`](super::Bias::Point)) has none here either.
pub(crate) fn hyperprior_term<const DW: usize>(
    h: &crate::dist::HyperPrior,
    (w_mean, w_var): (Tensor<DW>, Option<Tensor<DW>>),
    bias: Option<(Tensor<1>, Option<Tensor<1>>)>,
    bias_has_prior: bool,
) -> Tensor<1> {
    let w = h.neg_log_density(w_mean, w_var);
    match bias {
        Some((mean, var)) if bias_has_prior => w + h.neg_log_density(mean, var),
        _ => w,
    }
}

/// `KL(q ‖ p)` on `kernels`, with `ln σ²` clamped inside it when `range` is given.
fn kl_with<const D: usize, Q: PosteriorDist<D> + ?Sized>(
    q: &Q,
    prior: &WeightPrior<D>,
    range: Option<(f64, f64)>,
    kernels: Kernels,
) -> Tensor<1> {
    match range {
        Some(range) => clamped_gaussian_kl(q, prior, range),
        None => match (prior, q.scaled_point()) {
            (WeightPrior::Gaussian(g), Some((w, scale))) => {
                g.point_cross_entropy_on(w, scale, kernels)
            }
            _ => q.kl(prior),
        },
    }
}

/// `KL(q ‖ p)` of a factorised Gaussian `q` with each `ln σ²` clamped to `[lo, hi]`: the
/// mean-field KL of `q̃ = N(μ, e^{clamp(ln σ², lo, hi)})` (Haußmann's VBP code). A point mass
/// (no variance) keeps its exact KL.
fn clamped_gaussian_kl<const D: usize, Q: PosteriorDist<D> + ?Sized>(
    q: &Q,
    prior: &WeightPrior<D>,
    (lo, hi): (f64, f64),
) -> Tensor<1> {
    let Some(var) = q.marginal_variance() else {
        return q.kl(prior);
    };
    let sigma = (var.log().clamp(lo, hi) * 0.5).exp();
    MeanFieldDist::new(q.mean(), sigma).kl(prior)
}

/// `ln q(w_s) − ln p(w_s)` of the draws of weight and bias, `[S]`.
fn log_ratio<W, B, const DW: usize>(
    q: &Evaluated<W::Dist, B::Dist, DW>,
    params: &LayerParams<W, B, DW>,
    (w, b): (Tensor<2>, Option<Tensor<2>>),
) -> Result<Tensor<1>, Unsupported>
where
    W: WeightPosterior<DW>,
    B: WeightPosterior<1>,
{
    if params.hyperprior.is_some() {
        return Err(Unsupported {
            family: q.weight.family(),
            what: "a hyperprior over the posterior's parameters has no per-draw ln q(w) − ln p(w): \
                   train it with the ELBO's KL term (a prior other than Prior::Hyper for \
                   black-box α)",
        });
    }
    let mut ratio = q.weight.log_q(w.clone())? - params.weight_prior.log_prob(w);
    if let (Some(bd), Some(b), Some(p)) = (&q.bias, b, &params.bias_prior) {
        ratio = ratio + bd.log_q(b.clone())? - p.log_prob(b);
    }
    Ok(ratio)
}

/// The estimator's output, and the weight draws when it made (or was asked for) them.
fn forward<W, B, const DW: usize, const DX: usize>(
    q: &Evaluated<W, B, DW>,
    estimator: Estimator,
    op: &impl WeightOp<DX, DW>,
    x: Tensor<DX>,
    want_draws: bool,
) -> (Tensor<DX>, Draws)
where
    W: PosteriorDist<DW>,
    B: PosteriorDist<1>,
{
    // Masks on input units are drawn per example, whatever the estimator: the input masked
    // element by element is Gal's MC dropout exactly (one mask shared by a minibatch is not).
    if q.unit_noise.is_some() && !want_draws {
        return (q.local(op, x), None);
    }
    let point = q.weight_point && q.bias_point;
    // Points draw only to report their missing density; other estimators never draw.
    let draw = match estimator {
        Estimator::Reparameterization => !point || want_draws,
        _ => point && want_draws,
    };
    if !draw {
        let y = match estimator {
            _ if point => q.mean_output(op, x),
            Estimator::Flipout => q.flipout(op, x),
            _ => q.local(op, x),
        };
        return (y, None);
    }
    let s = x.dims()[0];
    let w = q.weight.sample(s);
    let b = q.bias.as_ref().map(|b| b.sample(s));
    let mut y = op.apply_per_sample(x, w.clone());
    if let Some(b) = &b {
        y = op.add_bias(y, b.clone());
    }
    (y, Some((w, b)))
}

impl<W: PosteriorDist<DW>, B: PosteriorDist<1>, const DW: usize> Evaluated<W, B, DW> {
    fn mean_output<const DX: usize>(
        &self,
        op: &impl WeightOp<DX, DW>,
        x: Tensor<DX>,
    ) -> Tensor<DX> {
        op.apply(x, self.weight.mean(), self.bias.as_ref().map(|b| b.mean()))
    }

    fn local<const DX: usize>(&self, op: &impl WeightOp<DX, DW>, x: Tensor<DX>) -> Tensor<DX> {
        let bias_mean = self.bias.as_ref().map(|b| b.mean());
        // A stochastic bias adds its variance to the pre-activations' (through `apply`'s bias).
        let bias_var = match (&self.bias, self.bias_point) {
            (Some(bd), false) => Some(
                bd.marginal_variance()
                    .expect("validated as for the weights"),
            ),
            _ => None,
        };
        let (mean, var) = match self.unit_noise {
            Some(dropout) => {
                let x = dropout.forward_keyed(x, self.unit_noise_key);
                let mean = op.apply(x, self.weight.mean(), bias_mean);
                let var = bias_var.map(|v| op.add_bias(mean.zeros_like(), row(v)));
                (mean, var)
            }
            None if self.weight_point => {
                let mean = op.apply(x, self.weight.mean(), bias_mean);
                let var = bias_var.map(|v| op.add_bias(mean.zeros_like(), row(v)));
                (mean, var)
            }
            None => {
                let v = self
                    .weight
                    .marginal_variance()
                    .expect("WeightConfig::validate admits only families with a marginal variance");
                let var = op.apply(x.clone().square(), v, bias_var);
                (op.apply(x, self.weight.mean(), bias_mean), Some(var))
            }
        };
        match var {
            Some(v) => {
                crate::device::uses_generator();
                let eps = mean.random_like(Distribution::Normal(0.0, 1.0));
                mean + (v + VAR_FLOOR).sqrt() * eps
            }
            None => mean,
        }
    }

    fn flipout<const DX: usize>(&self, op: &impl WeightOp<DX, DW>, x: Tensor<DX>) -> Tensor<DX> {
        let s = x.dims()[0];
        let mean = self.mean_output(op, x.clone());
        let signs_in = op.input_signs(&x);
        let mut perturbation = op.apply_per_sample(x * signs_in, self.weight.perturbation(s));
        if let (Some(bd), false) = (&self.bias, self.bias_point) {
            perturbation = op.add_bias(perturbation, bd.perturbation(s));
        }
        let signs_out = op.output_signs(&perturbation);
        mean + perturbation * signs_out
    }
}
