//! The gradient estimators of a stochastic layer, written once for every posterior family and
//! for both the dense and the convolutional layer (through [`WeightOp`]).
//!
//! * **Reparameterisation**: one weight draw per Monte Carlo sample, shared by the batch.
//! * **Local reparameterisation** (Kingma et al. 2015): per-example pre-activations
//!   `N(x ∗ E[w], x² ∗ Var[w])` from the posterior's mean and marginal variance: exact for
//!   factorised Gaussians, a moment-matched Gaussian otherwise (radial, low-rank, DropConnect).
//!   A family whose draws are `diag(z)·M` (dropout on input units) gets its exact per-example
//!   draw instead, the input masked per element (Gal's MC dropout).
//! * **Flipout** (Wen et al. 2018): one perturbation `ΔW = w − E[w]` per sample, decorrelated
//!   across examples by random signs on inputs and outputs, `y = x ∗ E[w] + ((x ⊙ s) ∗ ΔW) ⊙ r`;
//!   exact for sign-symmetric perturbations (mean-field, radial), first two moments otherwise.

use super::pass::{LayerDraw, Pass};
use crate::dist::WeightPrior;
use crate::posterior::{PosteriorDist, Unsupported, WeightPosterior, row};
use burn::config::Config;
use burn::tensor::{Distribution, Tensor};

/// Added to sampled variances before the square root so that its gradient stays finite.
const VAR_FLOOR: f64 = 1e-16;

/// How a stochastic layer draws its output.
#[derive(Config, Debug, PartialEq, Eq, Copy)]
pub enum Estimator {
    /// One weight sample per Monte Carlo sample, shared by the batch.
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
    /// The operation with one weight for every sample.
    fn apply(&self, x: Tensor<DX>, w: Tensor<DW>) -> Tensor<DX>;
    /// The operation with one flat weight draw `[S, numel]` per sample.
    fn apply_per_sample(&self, x: Tensor<DX>, w: Tensor<2>) -> Tensor<DX>;
    /// Adds a bias `[1, out]` (shared) or `[S, out]` (one per sample).
    fn add_bias(&self, y: Tensor<DX>, b: Tensor<2>) -> Tensor<DX>;
    /// Random ±1 per sample, example and input unit, broadcast over the rest.
    fn input_signs(&self, x: &Tensor<DX>) -> Tensor<DX>;
    /// Random ±1 per sample, example and output unit.
    fn output_signs(&self, y: &Tensor<DX>) -> Tensor<DX>;
}

/// A layer's posteriors and priors, borrowed for one pass.
pub(crate) struct Stochastic<'a, W, B, const DW: usize> {
    pub weight: &'a W,
    pub bias: Option<&'a B>,
    pub weight_prior: &'a WeightPrior<DW>,
    pub bias_prior: Option<&'a WeightPrior<1>>,
    pub estimator: Estimator,
}

impl<W: WeightPosterior<DW>, B: WeightPosterior<1>, const DW: usize> Stochastic<'_, W, B, DW> {
    /// One sampled weight and bias, `[1, numel]` each.
    pub fn draw(&self) -> LayerDraw {
        LayerDraw {
            weight: self.weight.dist().sample(1),
            bias: self.bias.map(|b| b.dist().sample(1)),
        }
    }

    /// `KL(q ‖ p)` of weight and bias (one element).
    pub fn kl(&self) -> Tensor<1> {
        let kl = self.weight.dist().kl(self.weight_prior);
        match (self.bias, self.bias_prior) {
            (Some(b), Some(p)) => kl + b.dist().kl(p),
            _ => kl,
        }
    }

    /// The layer's output under `pass`, adding its training terms to the pass.
    pub fn run<const DX: usize>(
        &self,
        op: &impl WeightOp<DX, DW>,
        x: Tensor<DX>,
        pass: &mut Pass,
    ) -> Tensor<DX> {
        if let Some(draw) = pass.next_draw() {
            let y = op.apply(x, draw.weight.clone().reshape(op.weight_shape()));
            return match &draw.bias {
                Some(b) => op.add_bias(y, b.clone()),
                None => y,
            };
        }
        let wd = self.weight.dist();
        let bd = self.bias.map(|b| b.dist());
        let want_draws = pass.wants_log_ratio();
        let (y, draws) = self.forward(op, x, &wd, bd.as_ref(), want_draws);
        if pass.collects_kl() {
            let mut kl = wd.kl(self.weight_prior);
            if let (Some(bd), Some(p)) = (&bd, self.bias_prior) {
                kl = kl + bd.kl(p);
            }
            pass.add_kl(kl);
        }
        if want_draws {
            match draws.map(|d| self.log_ratio(&wd, bd.as_ref(), d)) {
                Some(Ok(ratio)) => pass.add_log_ratio(ratio),
                Some(Err(why)) => pass.fail(why),
                None => pass.fail(Unsupported {
                    family: wd.family(),
                    what: "ln q(w) − ln p(w) needs one weight draw per sample: use \
                           Estimator::Reparameterization",
                }),
            }
        }
        y
    }

    /// `ln q(w_s) − ln p(w_s)` of the draws of weight and bias, `[S]`.
    fn log_ratio(
        &self,
        wd: &W::Dist,
        bd: Option<&B::Dist>,
        (w, b): (Tensor<2>, Option<Tensor<2>>),
    ) -> Result<Tensor<1>, Unsupported> {
        let mut ratio = wd.log_q(w.clone())? - self.weight_prior.log_prob(w);
        if let (Some(bd), Some(b), Some(p)) = (bd, b, self.bias_prior) {
            ratio = ratio + bd.log_q(b.clone())? - p.log_prob(b);
        }
        Ok(ratio)
    }

    /// The estimator's output, and the weight draws when it made (or was asked for) them.
    #[allow(clippy::type_complexity)]
    fn forward<const DX: usize>(
        &self,
        op: &impl WeightOp<DX, DW>,
        x: Tensor<DX>,
        wd: &W::Dist,
        bd: Option<&B::Dist>,
        want_draws: bool,
    ) -> (Tensor<DX>, Option<(Tensor<2>, Option<Tensor<2>>)>) {
        let s = x.dims()[0];
        let bias_point = self.bias.is_none_or(|b| b.is_point());
        let point = self.weight.is_point() && bias_point;
        // Points draw only to report their missing density; other estimators never draw.
        let draw = match self.estimator {
            Estimator::Reparameterization => !point || want_draws,
            _ => point && want_draws,
        };
        if !draw {
            let y = match self.estimator {
                _ if point => self.mean_output(op, x, wd, bd),
                Estimator::Flipout => self.flipout(op, x, wd, bd, bias_point),
                _ => self.local(op, x, wd, bd, bias_point),
            };
            return (y, None);
        }
        let w = wd.sample(s);
        let b = bd.map(|b| b.sample(s));
        let mut y = op.apply_per_sample(x, w.clone());
        if let Some(b) = &b {
            y = op.add_bias(y, b.clone());
        }
        (y, Some((w, b)))
    }

    fn mean_output<const DX: usize>(
        &self,
        op: &impl WeightOp<DX, DW>,
        x: Tensor<DX>,
        wd: &W::Dist,
        bd: Option<&B::Dist>,
    ) -> Tensor<DX> {
        let y = op.apply(x, wd.mean());
        match bd {
            Some(bd) => op.add_bias(y, row(bd.mean())),
            None => y,
        }
    }

    fn local<const DX: usize>(
        &self,
        op: &impl WeightOp<DX, DW>,
        x: Tensor<DX>,
        wd: &W::Dist,
        bd: Option<&B::Dist>,
        bias_point: bool,
    ) -> Tensor<DX> {
        let (mut mean, mut var) = match self.weight.unit_noise() {
            Some(dropout) => (op.apply(dropout.forward(x), wd.mean()), None),
            None if self.weight.is_point() => (op.apply(x, wd.mean()), None),
            None => {
                let v = wd
                    .marginal_variance()
                    .expect("WeightConfig::validate admits only families with a marginal variance");
                (
                    op.apply(x.clone(), wd.mean()),
                    Some(op.apply(x.square(), v)),
                )
            }
        };
        if let Some(bd) = bd {
            mean = op.add_bias(mean, row(bd.mean()));
            if !bias_point {
                let bv = row(bd
                    .marginal_variance()
                    .expect("validated as for the weights"));
                let base = var.unwrap_or_else(|| mean.zeros_like());
                var = Some(op.add_bias(base, bv));
            }
        }
        match var {
            Some(v) => {
                let eps = mean.random_like(Distribution::Normal(0.0, 1.0));
                mean + (v + VAR_FLOOR).sqrt() * eps
            }
            None => mean,
        }
    }

    fn flipout<const DX: usize>(
        &self,
        op: &impl WeightOp<DX, DW>,
        x: Tensor<DX>,
        wd: &W::Dist,
        bd: Option<&B::Dist>,
        bias_point: bool,
    ) -> Tensor<DX> {
        let s = x.dims()[0];
        let mean = self.mean_output(op, x.clone(), wd, bd);
        let signs_in = op.input_signs(&x);
        let mut perturbation = op.apply_per_sample(x * signs_in, wd.perturbation(s));
        if let (Some(bd), false) = (bd, bias_point) {
            perturbation = op.add_bias(perturbation, bd.perturbation(s));
        }
        let signs_out = op.output_signs(&perturbation);
        mean + perturbation * signs_out
    }
}
