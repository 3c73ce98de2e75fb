//! One pass through a network: how many Monte Carlo samples it carries, whether the weights are
//! drawn afresh or held fixed, and which training terms the layers add up on the way.
//!
//! Every network has one forward loop; prediction, a training step and a fixed network draw are
//! the same loop with a different [`Pass`].

use super::MomentRule;
use crate::fused::{Kernels, KeySource};
use crate::posterior::Unsupported;
use burn::tensor::Tensor;

/// Sampled weight tensors and biases of a layer, held fixed across forward calls: one draw for
/// roll-outs and SDE paths, or `S` joint draws of a network-level posterior (SWAG, Laplace).
#[derive(Debug, Clone)]
pub struct LayerDraw {
    /// Flat weight draws, `[S, numel]`.
    pub weight: Tensor<2>,
    /// Flat bias draws, `[S, d_out]`.
    pub bias: Option<Tensor<2>>,
}

impl LayerDraw {
    /// Draws in this layer draw (`S`).
    pub fn samples(&self) -> usize {
        self.weight.dims()[0]
    }
}

/// How a network's weights lie in one flat vector `θ` (`P` entries): its layers in forward
/// order, each weight (row-major) then its bias. The seam between network draws
/// ([`LayerDraw`]s) and samplers or families over `θ` (SWAG's moments, MCMC, full covariance).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlatLayout(pub Vec<(usize, Option<usize>)>);

impl FlatLayout {
    /// The layout of `draws` (one per layer).
    pub fn of(draws: &[LayerDraw]) -> Self {
        Self(
            draws
                .iter()
                .map(|d| (d.weight.dims()[1], d.bias.as_ref().map(|b| b.dims()[1])))
                .collect(),
        )
    }

    /// `P`, the entries of `θ`.
    pub fn numel(&self) -> usize {
        self.0.iter().map(|(w, b)| w + b.unwrap_or(0)).sum()
    }

    /// `draws` as flat rows `θ`, `[S, P]` (detached).
    pub fn flatten(draws: Vec<LayerDraw>) -> Tensor<2> {
        let mut parts = Vec::with_capacity(2 * draws.len());
        for d in draws {
            parts.push(d.weight.detach());
            if let Some(b) = d.bias {
                parts.push(b.detach());
            }
        }
        Tensor::cat(parts, 1)
    }

    /// Rows `θ [S, P]` as one draw per layer (slices: gradients flow back to `θ`).
    ///
    /// # Panics
    /// If `θ` does not have `P` columns.
    pub fn split(&self, theta: Tensor<2>) -> Vec<LayerDraw> {
        let [n, p] = theta.dims();
        assert_eq!(
            p,
            self.numel(),
            "θ has {p} entries, the layout {}",
            self.numel()
        );
        let mut at = 0;
        let mut take = |k: usize| {
            let t = theta.clone().slice([0..n, at..at + k]);
            at += k;
            t
        };
        self.0
            .iter()
            .map(|&(w, b)| LayerDraw {
                weight: take(w),
                bias: b.map(&mut take),
            })
            .collect()
    }
}

/// What a recording pass keeps of one layer ([`Pass::recording`]): its input, and a zero leaf
/// added to its output whose gradient is the loss's gradient in the layer's outputs.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The layer's input, `[S·B, …]` flattened per example (detached).
    pub input: Tensor<2>,
    /// The input's shape per example (`[d_in]`, or `[C, H, W]`).
    pub input_shape: Vec<usize>,
    /// The zero leaf added to the output, `[S·B, numel of one output]`; its gradient after a
    /// backward pass is `∂loss/∂output` per example.
    pub probe: Tensor<2>,
    /// The output's shape per example (`[d_out]`, or `[C, H, W]`).
    pub output_shape: Vec<usize>,
}

/// The state of one pass through a network.
#[derive(Debug)]
pub struct Pass<'a> {
    samples: usize,
    fixed: Option<&'a [LayerDraw]>,
    next: usize,
    collect_kl: bool,
    training: bool,
    want_log_ratio: bool,
    kl: Option<Tensor<1>>,
    log_ratio: Option<Tensor<1>>,
    failure: Option<Unsupported>,
    kernels: Kernels,
    keys: KeySource,
    kl_fold: Option<f64>,
    moment_rule: MomentRule,
    recorded: Option<Vec<Recorded>>,
}

impl<'a> Pass<'a> {
    fn new(samples: usize, collect_kl: bool, want_log_ratio: bool) -> Self {
        assert!(samples >= 1, "a pass needs at least one sample");
        Self {
            samples,
            fixed: None,
            next: 0,
            collect_kl,
            training: collect_kl,
            want_log_ratio,
            kl: None,
            log_ratio: None,
            failure: None,
            kernels: Kernels::default(),
            keys: KeySource::default(),
            kl_fold: None,
            moment_rule: MomentRule::Clt,
            recorded: None,
        }
    }

    /// Prediction: `samples` fresh posterior draws, no training terms.
    pub fn predict(samples: usize) -> Self {
        Self::new(samples, false, false)
    }

    /// A training step: `samples` draws; the KL is summed over layers, and with `log_ratio` the
    /// per-sample `ln q(w_s) − ln p(w_s)` too (black-box α needs it).
    pub fn train(samples: usize, log_ratio: bool) -> Self {
        Self::new(samples, true, log_ratio)
    }

    /// Moment propagation for prediction: layers map a diagonal Gaussian activation to the next
    /// ([`crate::dist::Moments`]), rectifiers by `rule`; no sampling, no training terms.
    pub fn moments(rule: MomentRule) -> Self {
        Self {
            moment_rule: rule,
            ..Self::new(1, false, false)
        }
    }

    /// A training step by moment propagation (VBP, CLT, DVI): as [`Pass::moments`], with the
    /// layers' KL summed.
    pub fn train_moments(rule: MomentRule) -> Self {
        Self {
            moment_rule: rule,
            ..Self::new(1, true, false)
        }
    }

    /// The rectifiers' moment rule of a moment pass.
    pub fn moment_rule(&self) -> MomentRule {
        self.moment_rule
    }

    /// One pass with every layer's weights taken from `draws`, in layer order; it carries as
    /// many samples as the draws hold (`S` joint draws of a network, [`LayerDraw::samples`]).
    ///
    /// # Panics
    /// If `draws` is empty or its layers hold different numbers of draws.
    pub fn fixed(draws: &'a [LayerDraw]) -> Self {
        let samples = draws.first().map_or(0, LayerDraw::samples);
        assert!(
            draws.iter().all(|d| d.samples() == samples),
            "a network draw holds the same number of draws for every layer"
        );
        Self {
            fixed: Some(draws),
            ..Self::new(samples, false, false)
        }
    }

    /// The same pass recording every layer's input and a gradient probe on its output
    /// ([`Recorded`], in forward order): the per-example quantities of curvature estimates
    /// (Laplace's GGN and KFAC factors). Needs an autodiff device for the probes' gradients.
    pub fn recording(mut self) -> Self {
        self.recorded = Some(Vec::new());
        self
    }

    /// The records of a [`Pass::recording`] pass (empty for another pass).
    pub fn into_recorded(self) -> Vec<Recorded> {
        self.recorded.unwrap_or_default()
    }

    /// The layer's input to keep for [`Pass::probe`], when the pass records (otherwise `None`,
    /// so that a plain pass holds no second reference to its activations).
    pub(crate) fn keep_input<const D: usize>(&self, x: &Tensor<D>) -> Option<Tensor<D>> {
        self.recorded.as_ref().map(|_| x.clone())
    }

    /// A layer's output, with a gradient probe added when the pass records and kept `input`.
    pub(crate) fn probe<const D: usize>(
        &mut self,
        input: Option<Tensor<D>>,
        output: Tensor<D>,
    ) -> Tensor<D> {
        let (Some(recorded), Some(input)) = (self.recorded.as_mut(), input) else {
            return output;
        };
        let (xd, yd) = (input.dims(), output.dims());
        let rows = xd[0] * xd[1];
        let probe = Tensor::<2>::zeros([rows, yd[2..].iter().product::<usize>()], &output.device())
            .require_grad();
        recorded.push(Recorded {
            input: input.clone().detach().reshape([rows as i64, -1]),
            input_shape: xd[2..].to_vec(),
            probe: probe.clone(),
            output_shape: yd[2..].to_vec(),
        });
        output + probe.reshape(yd)
    }

    /// The same pass on `kernels` (the fused ops by default; [`Kernels::Reference`] composes
    /// burn ops).
    pub fn with_kernels(mut self, kernels: Kernels) -> Self {
        self.kernels = kernels;
        self
    }

    /// The same pass with the fused kernels' noise keyed by `key`
    /// ([`crate::step::StepRequest::noise_key`]); `None` leaves it to the device's generator.
    pub fn with_noise_key(mut self, key: Option<u64>) -> Self {
        if let Some(key) = key {
            self.keys = KeySource::keyed(key);
        }
        self
    }

    /// The same pass with the layers' KL collected only when `collect` (a training pass for an
    /// objective that has no use for it, [`crate::objective::Objective::needs_weight_kl`],
    /// skips it: the terms then carry a KL of 0). A pass that does not collect it is unchanged.
    pub fn collecting_kl(mut self, collect: bool) -> Self {
        self.collect_kl &= collect;
        self
    }

    /// The same pass for an objective whose loss is `… + weight·KL`, linear in the collected
    /// KL: layers on the fused kernels then add `weight·∇KL` inside their sampling kernel's
    /// backward pass and report their KL as a constant (one pass instead of two; an autodiff
    /// node has one differentiable output). The loss's value is unchanged; its gradient is
    /// right only if the objective really adds `weight·KL`.
    pub fn fold_kl(mut self, weight: f64) -> Self {
        self.kl_fold = Some(weight);
        self
    }

    pub(crate) fn kernels(&self) -> Kernels {
        self.kernels
    }

    pub(crate) fn kl_fold(&self) -> Option<f64> {
        self.kl_fold.filter(|_| self.collect_kl)
    }

    /// A fresh stream key for one fused op.
    pub(crate) fn next_key(&mut self, device: &burn::tensor::Device) -> u64 {
        self.keys.next(device)
    }

    /// Monte Carlo samples carried by the pass (the leading axis of its activations).
    pub fn samples(&self) -> usize {
        self.samples
    }

    /// The next layer's fixed draw, if the pass holds a network draw.
    pub(crate) fn next_draw(&mut self) -> Option<&'a LayerDraw> {
        let draws = self.fixed?;
        let draw = draws.get(self.next).unwrap_or_else(|| {
            panic!(
                "a network draw of {} layers was used on a network with more layers",
                draws.len()
            )
        });
        self.next += 1;
        Some(draw)
    }

    pub(crate) fn collects_kl(&self) -> bool {
        self.collect_kl
    }

    /// Whether this is a training step ([`Pass::train`], [`Pass::train_moments`]): train-only
    /// regularisers such as [`crate::nets::MlpConfig::dropout`] act only then.
    pub fn is_training(&self) -> bool {
        self.training
    }

    pub(crate) fn wants_log_ratio(&self) -> bool {
        self.want_log_ratio && self.failure.is_none()
    }

    pub(crate) fn add_kl(&mut self, kl: Tensor<1>) {
        self.kl = Some(match self.kl.take() {
            Some(k) => k + kl,
            None => kl,
        });
    }

    pub(crate) fn add_log_ratio(&mut self, ratio: Tensor<1>) {
        self.log_ratio = Some(match self.log_ratio.take() {
            Some(r) => r + ratio,
            None => ratio,
        });
    }

    pub(crate) fn fail(&mut self, why: Unsupported) {
        self.failure.get_or_insert(why);
    }

    /// The summed KL (zero for a network without stochastic layers) and, when requested, the
    /// per-sample log-ratio `[S]` or the reason a layer could not give it.
    pub fn into_terms(
        self,
        device: &burn::tensor::Device,
    ) -> (Tensor<1>, Result<Option<Tensor<1>>, Unsupported>) {
        let kl = self.kl.unwrap_or_else(|| Tensor::zeros([1], device));
        let ratio = match self.failure {
            Some(why) => Err(why),
            None => Ok(self.log_ratio),
        };
        (kl, ratio)
    }
}
