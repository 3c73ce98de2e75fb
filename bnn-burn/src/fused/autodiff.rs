//! [`FusedOps`]: the differentiable fused ops. Without gradient tracking they are the inner
//! backend's forward kernels; under `Autodiff` each is one graph node whose backward is the
//! hand-written kernel of [`FusedKernels`]. Most regenerate their `ε` from the key; the draws of
//! [`FusedOps::sample_op`] keep a tape of `ε·dσ/dρ` ([`Tape`]) instead, which makes their
//! backward pass products and sums only.

// burn marks its NdArray backend deprecated; the project still offers it as a feature.
#![allow(deprecated)]

use super::DropoutNoise;
use super::conv::ConvGeometry;
use super::elementwise::{SigmaRule, Tape};
use super::ext::{DrawSpec, FusedKernels, LocScaleTensors, PriorTensors};
use super::mixture::MixtureKl;
use super::rectifier::{RectifierOutput, RectifierRule};
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::autodiff::{Autodiff, NodeId};
use burn::backend::tensor::FloatTensor;
use burn::backend::{AutodiffBackend, Backend, backend_extension};

/// The differentiable fused ops (see the tensor-level functions of [`super`]).
#[backend_extension(Flex: cfg(feature = "flex"), NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"), Autodiff)]
pub trait FusedOps: Backend {
    /// `(w, kl)` of [`FusedKernels::fused_sample`]; `kl` is a constant (its gradient reaches
    /// `μ, ρ` only through `fold`, added in the backward pass of `w`). The prior is a constant.
    fn sample_op(
        #[extension_type] q: LocScaleTensors<Self>,
        draws: DrawSpec,
        #[extension_type] prior: PriorTensors<Self>,
        fold: Option<f32>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// `(out, kl)` of [`FusedKernels::fused_sample_ratio`]: draws and their log-ratios in one
    /// differentiable output; `kl` is a constant (so is the prior).
    fn sample_ratio_op(
        #[extension_type] q: LocScaleTensors<Self>,
        key: u64,
        draws: usize,
        #[extension_type] prior: PriorTensors<Self>,
        kl: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// `(var, kl)` of [`FusedKernels::fused_moments`], `kl` a constant as in
    /// [`FusedOps::sample_op`].
    fn moments_op(
        #[extension_type] q: LocScaleTensors<Self>,
        var_scale: f32,
        #[extension_type] prior: PriorTensors<Self>,
        fold: Option<f32>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// [`FusedKernels::fused_kl`], differentiable in `μ` and `ρ` (the prior is a constant).
    fn kl_op(
        #[extension_type] q: LocScaleTensors<Self>,
        #[extension_type] prior: PriorTensors<Self>,
    ) -> FloatTensor<Self>;

    /// [`FusedKernels::fused_quadratic`], differentiable in `w`.
    fn quadratic_op(w: FloatTensor<Self>, center: f32, coef: f32) -> FloatTensor<Self>;

    /// [`FusedKernels::fused_noise`].
    fn noise_op(mean: FloatTensor<Self>, var: FloatTensor<Self>, key: u64) -> FloatTensor<Self>;

    /// [`FusedKernels::fused_flip`].
    fn flip_op(x: FloatTensor<Self>, key: u64, inner: usize) -> FloatTensor<Self>;

    /// [`FusedKernels::fused_dropout`].
    fn dropout_op(x: FloatTensor<Self>, key: u64, p: f64, noise: DropoutNoise)
    -> FloatTensor<Self>;

    /// [`FusedKernels::fused_max_pool`]'s `[2, rows, H', W']` moments, differentiable (one
    /// graph node, one backward pass for both).
    fn max_pool_op(
        means: FloatTensor<Self>,
        vars: FloatTensor<Self>,
        kernel: usize,
        stride: usize,
    ) -> FloatTensor<Self>;

    /// [`FusedKernels::fused_conv`], differentiable in `x` and `w`.
    fn conv_op(x: FloatTensor<Self>, w: FloatTensor<Self>, g: ConvGeometry) -> FloatTensor<Self>;

    /// [`FusedKernels::fused_matmul`], differentiable in `x` and `w`.
    fn matmul_op(x: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self>;

    /// [`FusedKernels::fused_add_factor_draws`], differentiable in the base and the factor (`z`
    /// is a constant).
    fn add_factor_draws_op(
        base: FloatTensor<Self>,
        factor: FloatTensor<Self>,
        z: Vec<f32>,
    ) -> FloatTensor<Self>;

    /// [`FusedKernels::fused_factor_kl`]'s value, differentiable in the factor and `ρ` (the
    /// per-weight prior is a constant).
    fn factor_kl_op(
        factor: FloatTensor<Self>,
        rho: FloatTensor<Self>,
        rule: SigmaRule,
        scale: f64,
        #[extension_type] prior: PriorTensors<Self>,
    ) -> FloatTensor<Self>;

    /// [`FusedKernels::fused_mixture_kl`], differentiable in `μ` and `ρ` (the draws are
    /// regenerated from the key in the backward pass).
    fn mixture_kl_op(
        mu: FloatTensor<Self>,
        rho: FloatTensor<Self>,
        kl: MixtureKl,
    ) -> FloatTensor<Self>;

    /// `(E h, Var h)` of [`FusedKernels::fused_rectifier`], both differentiable (two graph
    /// nodes, each with its own backward pass).
    fn rectifier_op(
        mean: FloatTensor<Self>,
        var: FloatTensor<Self>,
        rule: RectifierRule,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);
}

/// The inner backends: forward kernels only.
macro_rules! inner_ops {
    ($backend:ty) => {
        impl FusedOps for $backend {
            fn sample_op(
                q: LocScaleTensors<Self>,
                draws: DrawSpec,
                prior: PriorTensors<Self>,
                _fold: Option<f32>,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let (w, value, ..) = Self::fused_sample(q, draws, prior, Tape::Off);
                (w, value)
            }

            fn sample_ratio_op(
                q: LocScaleTensors<Self>,
                key: u64,
                draws: usize,
                prior: PriorTensors<Self>,
                kl: bool,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                Self::fused_sample_ratio(q, key, draws, prior, kl)
            }

            fn moments_op(
                q: LocScaleTensors<Self>,
                var_scale: f32,
                prior: PriorTensors<Self>,
                _fold: Option<f32>,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                Self::fused_moments(q, var_scale, prior)
            }

            fn kl_op(q: LocScaleTensors<Self>, prior: PriorTensors<Self>) -> FloatTensor<Self> {
                Self::fused_kl(q, prior)
            }

            fn noise_op(
                mean: FloatTensor<Self>,
                var: FloatTensor<Self>,
                key: u64,
            ) -> FloatTensor<Self> {
                Self::fused_noise(mean, var, key)
            }

            fn quadratic_op(w: FloatTensor<Self>, center: f32, coef: f32) -> FloatTensor<Self> {
                Self::fused_quadratic(w, center, coef)
            }

            fn flip_op(x: FloatTensor<Self>, key: u64, inner: usize) -> FloatTensor<Self> {
                Self::fused_flip(x, key, inner)
            }

            fn dropout_op(
                x: FloatTensor<Self>,
                key: u64,
                p: f64,
                noise: DropoutNoise,
            ) -> FloatTensor<Self> {
                Self::fused_dropout(x, key, p, noise)
            }

            fn rectifier_op(
                mean: FloatTensor<Self>,
                var: FloatTensor<Self>,
                rule: RectifierRule,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                Self::fused_rectifier(mean, var, rule)
            }

            fn max_pool_op(
                means: FloatTensor<Self>,
                vars: FloatTensor<Self>,
                kernel: usize,
                stride: usize,
            ) -> FloatTensor<Self> {
                Self::fused_max_pool(means, vars, kernel, stride)
            }

            fn conv_op(
                x: FloatTensor<Self>,
                w: FloatTensor<Self>,
                g: ConvGeometry,
            ) -> FloatTensor<Self> {
                Self::fused_conv(x, w, g)
            }

            fn matmul_op(x: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self> {
                Self::fused_matmul(x, w)
            }

            fn add_factor_draws_op(
                base: FloatTensor<Self>,
                factor: FloatTensor<Self>,
                z: Vec<f32>,
            ) -> FloatTensor<Self> {
                Self::fused_add_factor_draws(base, factor, z)
            }

            fn factor_kl_op(
                factor: FloatTensor<Self>,
                rho: FloatTensor<Self>,
                rule: SigmaRule,
                scale: f64,
                prior: PriorTensors<Self>,
            ) -> FloatTensor<Self> {
                Self::fused_factor_kl(factor, rho, rule, scale, prior).0
            }

            fn mixture_kl_op(
                mu: FloatTensor<Self>,
                rho: FloatTensor<Self>,
                kl: MixtureKl,
            ) -> FloatTensor<Self> {
                Self::fused_mixture_kl(mu, rho, kl)
            }
        }
    };
}

#[cfg(feature = "flex")]
inner_ops!(burn::backend::Flex);
#[cfg(feature = "ndarray")]
inner_ops!(burn::backend::NdArray);
#[cfg(feature = "wgpu")]
inner_ops!(burn::backend::Cube);

/// Registers `grad` for a parent node when it is tracked.
macro_rules! register {
    ($grads:expr, $node:expr, $grad:expr) => {
        if let Some(node) = $node {
            $grads.register::<B>(node.id, $grad);
        }
    };
}

/// The inner primitives of a prior (a constant: its graph nodes are not followed).
fn inner_prior<B: Backend, C: CheckpointStrategy>(
    prior: PriorTensors<Autodiff<B, C>>,
) -> PriorTensors<B> {
    match prior {
        PriorTensors::Off => PriorTensors::Off,
        PriorTensors::Scalar(terms) => PriorTensors::Scalar(terms),
        PriorTensors::PerWeight { terms, mean, std } => PriorTensors::PerWeight {
            terms,
            mean: mean.into_primitive(),
            std: std.into_primitive(),
        },
    }
}

/// The inner primitives of a location-scale argument (clones: the graph keeps the originals).
fn inner_q<B: Backend, C: CheckpointStrategy>(
    q: &LocScaleTensors<Autodiff<B, C>>,
) -> LocScaleTensors<B> {
    LocScaleTensors {
        mu: q.mu.primitive().clone(),
        rho: q.rho.primitive().clone(),
        rule: q.rule,
    }
}

#[derive(Debug)]
struct SampleBackward;

impl<B: FusedKernels> Backward<B, 2> for SampleBackward {
    /// `μ`, the forward pass's tape ([`Tape`]), `center`, the fold's weight and the prior.
    type State = (
        FloatTensor<B>,
        FloatTensor<B>,
        bool,
        Option<f32>,
        PriorTensors<B>,
    );

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [node_mu, node_rho] = ops.parents;
        let dw = grads.consume::<B>(&ops.node);
        let (mu, tape, center, fold, prior) = ops.state;
        let (dmu, drho) = B::fused_sample_backward(dw, tape, mu, center, fold, prior);
        register!(grads, node_mu, dmu);
        register!(grads, node_rho, drho);
    }
}

#[derive(Debug)]
struct SampleRatioBackward;

impl<B: FusedKernels> Backward<B, 2> for SampleRatioBackward {
    /// The posterior, the key, the number of draws and the prior.
    type State = (LocScaleTensors<B>, u64, usize, PriorTensors<B>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [node_mu, node_rho] = ops.parents;
        let dout = grads.consume::<B>(&ops.node);
        let (q, key, draws, prior) = ops.state;
        let (dmu, drho) = B::fused_sample_ratio_backward(dout, q, key, draws, prior);
        register!(grads, node_mu, dmu);
        register!(grads, node_rho, drho);
    }
}

#[derive(Debug)]
struct MomentsBackward;

impl<B: FusedKernels> Backward<B, 2> for MomentsBackward {
    /// The posterior, the variance's scale, the fold's weight and the prior.
    type State = (LocScaleTensors<B>, f32, Option<f32>, PriorTensors<B>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [node_mu, node_rho] = ops.parents;
        let dvar = grads.consume::<B>(&ops.node);
        let (q, var_scale, fold, prior) = ops.state;
        let (dmu, drho) = B::fused_moments_backward(dvar, q, var_scale, fold, prior);
        if let Some(dmu) = dmu {
            register!(grads, node_mu, dmu);
        }
        register!(grads, node_rho, drho);
    }
}

#[derive(Debug)]
struct KlBackward;

impl<B: FusedKernels> Backward<B, 2> for KlBackward {
    /// The posterior and the prior.
    type State = (LocScaleTensors<B>, PriorTensors<B>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [node_mu, node_rho] = ops.parents;
        let g = grads.consume::<B>(&ops.node);
        let (q, prior) = ops.state;
        let (dmu, drho) = B::fused_kl_backward(g, q, prior);
        register!(grads, node_mu, dmu);
        register!(grads, node_rho, drho);
    }
}

#[derive(Debug)]
struct QuadraticBackward;

impl<B: FusedKernels> Backward<B, 1> for QuadraticBackward {
    type State = (FloatTensor<B>, f32, f32);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [node_w] = ops.parents;
        let g = grads.consume::<B>(&ops.node);
        let (w, center, coef) = ops.state;
        register!(
            grads,
            node_w,
            B::fused_quadratic_backward(g, w, center, coef)
        );
    }
}

#[derive(Debug)]
struct NoiseBackward;

impl<B: FusedKernels> Backward<B, 2> for NoiseBackward {
    type State = (FloatTensor<B>, u64);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [node_mean, node_var] = ops.parents;
        let dy = grads.consume::<B>(&ops.node);
        let (var, key) = ops.state;
        register!(
            grads,
            node_var,
            B::fused_noise_backward(dy.clone(), var, key)
        );
        register!(grads, node_mean, dy);
    }
}

#[derive(Debug)]
struct FlipBackward;

impl<B: FusedKernels> Backward<B, 1> for FlipBackward {
    type State = (u64, usize);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [node_x] = ops.parents;
        let dy = grads.consume::<B>(&ops.node);
        let (key, inner) = ops.state;
        register!(grads, node_x, B::fused_flip(dy, key, inner));
    }
}

#[derive(Debug)]
struct DropoutBackward;

impl<B: FusedKernels> Backward<B, 1> for DropoutBackward {
    type State = (u64, f64, DropoutNoise);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [node_x] = ops.parents;
        let dy = grads.consume::<B>(&ops.node);
        let (key, p, noise) = ops.state;
        register!(grads, node_x, B::fused_dropout(dy, key, p, noise));
    }
}

/// The backward pass of one output of [`FusedOps::rectifier_op`].
#[derive(Debug)]
struct RectifierBackward(RectifierOutput);

impl<B: FusedKernels> Backward<B, 2> for RectifierBackward {
    type State = (FloatTensor<B>, FloatTensor<B>, RectifierRule);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [node_mean, node_var] = ops.parents;
        let g = grads.consume::<B>(&ops.node);
        let (mean, var, rule) = ops.state;
        let (dmean, dvar) = B::fused_rectifier_backward(mean, var, g, rule, self.0);
        register!(grads, node_mean, dmean);
        register!(grads, node_var, dvar);
    }
}

/// The backward pass of [`FusedOps::max_pool_op`].
#[derive(Debug)]
struct MaxPoolBackward;

impl<B: FusedKernels> Backward<B, 2> for MaxPoolBackward {
    type State = (FloatTensor<B>, FloatTensor<B>, usize, usize);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [node_means, node_vars] = ops.parents;
        let g = grads.consume::<B>(&ops.node);
        let (means, vars, kernel, stride) = ops.state;
        let (dmeans, dvars) = B::fused_max_pool_backward(means, vars, g, kernel, stride);
        register!(grads, node_means, dmeans);
        register!(grads, node_vars, dvars);
    }
}

/// The backward pass of [`FusedOps::conv_op`].
#[derive(Debug)]
struct ConvBackward;

impl<B: FusedKernels> Backward<B, 2> for ConvBackward {
    type State = (FloatTensor<B>, FloatTensor<B>, ConvGeometry);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let parents = ops.parents.map(|p| p.map(|node| node.id));
        let dy = grads.consume::<B>(&ops.node);
        let (x, w, g) = ops.state;
        let wanted = parents.map(|p| p.is_some());
        let (dx, dw) = B::fused_conv_backward(x, w, dy, g, wanted);
        register_tracked::<B>(grads, parents, [dx, dw]);
    }
}

#[derive(Debug)]
struct MatmulBackward;

impl<B: FusedKernels> Backward<B, 2> for MatmulBackward {
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let parents = ops.parents.map(|p| p.map(|node| node.id));
        let dy = grads.consume::<B>(&ops.node);
        let (x, w) = ops.state;
        let wanted = parents.map(|p| p.is_some());
        let (dx, dw) = B::fused_matmul_backward(x, w, dy, wanted);
        register_tracked::<B>(grads, parents, [dx, dw]);
    }
}

#[derive(Debug)]
struct FactorDrawsBackward;

impl<B: FusedKernels> Backward<B, 2> for FactorDrawsBackward {
    type State = Vec<f32>;

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [node_base, node_factor] = ops.parents;
        let dy = grads.consume::<B>(&ops.node);
        register!(
            grads,
            node_factor,
            B::fused_factor_draws_backward(dy.clone(), ops.state)
        );
        register!(grads, node_base, dy);
    }
}

#[derive(Debug)]
struct MixtureKlBackward;

impl<B: FusedKernels> Backward<B, 2> for MixtureKlBackward {
    /// `μ`, `ρ` and the settings (the draws' key among them).
    type State = (FloatTensor<B>, FloatTensor<B>, MixtureKl);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [node_mu, node_rho] = ops.parents;
        let dvalue = grads.consume::<B>(&ops.node);
        let (mu, rho, kl) = ops.state;
        let (dmu, drho) = B::fused_mixture_kl_backward(mu, rho, kl, dvalue);
        register!(grads, node_mu, dmu);
        register!(grads, node_rho, drho);
    }
}

#[derive(Debug)]
struct FactorKlBackward;

impl<B: FusedKernels> Backward<B, 2> for FactorKlBackward {
    /// The factor, `ρ`, the rule, `A⁻¹`, the scale and the prior.
    type State = (
        FloatTensor<B>,
        FloatTensor<B>,
        SigmaRule,
        Vec<f32>,
        f64,
        PriorTensors<B>,
    );

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [node_factor, node_rho] = ops.parents;
        let dvalue = grads.consume::<B>(&ops.node);
        let (factor, rho, rule, inv, scale, prior) = ops.state;
        let (df, drho) = B::fused_factor_kl_backward(factor, rho, rule, inv, scale, prior, dvalue);
        register!(grads, node_factor, df);
        register!(grads, node_rho, drho);
    }
}

/// Registers the gradients a backward kernel computed, which it does for tracked parents only.
fn register_tracked<B: Backend>(
    grads: &mut Gradients,
    parents: [Option<NodeId>; 2],
    values: [Option<FloatTensor<B>>; 2],
) {
    for (id, value) in parents.into_iter().zip(values) {
        if let (Some(id), Some(value)) = (id, value) {
            grads.register::<B>(id, value);
        }
    }
}

impl<B: FusedKernels, C: CheckpointStrategy> FusedOps for Autodiff<B, C> {
    fn sample_op(
        q: LocScaleTensors<Self>,
        draws: DrawSpec,
        prior: PriorTensors<Self>,
        fold: Option<f32>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let prior = inner_prior(prior);
        let fold = fold.filter(|_| prior.terms().is_some());
        match SampleBackward
            .prepare::<C>([q.mu.node(), q.rho.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let keep = if fold.is_some() {
                    Tape::DrawsAndKl
                } else {
                    Tape::Draws
                };
                let center = draws.center;
                let (w, value, tape) = B::fused_sample(inner_q(&q), draws, prior.clone(), keep);
                let tape = tape.expect("a tape was asked for");
                // The backward pass reads the prior only for a folded KL.
                let prior = if fold.is_some() {
                    prior
                } else {
                    PriorTensors::Off
                };
                let w = prep.finish((q.mu.into_primitive(), tape, center, fold, prior), w);
                (w, Self::from_inner(value))
            }
            OpsKind::UnTracked(prep) => {
                let (w, value, ..) = B::fused_sample(inner_q(&q), draws, prior, Tape::Off);
                (prep.finish(w), Self::from_inner(value))
            }
        }
    }

    fn sample_ratio_op(
        q: LocScaleTensors<Self>,
        key: u64,
        draws: usize,
        prior: PriorTensors<Self>,
        kl: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let prior = inner_prior(prior);
        let inner = inner_q(&q);
        let (out, value) = B::fused_sample_ratio(inner.clone(), key, draws, prior.clone(), kl);
        let out = match SampleRatioBackward
            .prepare::<C>([q.mu.node(), q.rho.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((inner, key, draws, prior), out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        };
        (out, Self::from_inner(value))
    }

    fn moments_op(
        q: LocScaleTensors<Self>,
        var_scale: f32,
        prior: PriorTensors<Self>,
        fold: Option<f32>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let prior = inner_prior(prior);
        let inner = inner_q(&q);
        let (var, value) = B::fused_moments(inner.clone(), var_scale, prior.clone());
        let fold = fold.filter(|_| prior.terms().is_some());
        // The backward pass reads the prior only for a folded KL.
        let prior = if fold.is_some() {
            prior
        } else {
            PriorTensors::Off
        };
        let var = match MomentsBackward
            .prepare::<C>([q.mu.node(), q.rho.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((inner, var_scale, fold, prior), var),
            OpsKind::UnTracked(prep) => prep.finish(var),
        };
        (var, Self::from_inner(value))
    }

    fn kl_op(q: LocScaleTensors<Self>, prior: PriorTensors<Self>) -> FloatTensor<Self> {
        let prior = inner_prior(prior);
        let inner = inner_q(&q);
        let value = B::fused_kl(inner.clone(), prior.clone());
        match KlBackward
            .prepare::<C>([q.mu.node(), q.rho.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((inner, prior), value),
            OpsKind::UnTracked(prep) => prep.finish(value),
        }
    }

    fn quadratic_op(w: FloatTensor<Self>, center: f32, coef: f32) -> FloatTensor<Self> {
        let value = B::fused_quadratic(w.primitive().clone(), center, coef);
        match QuadraticBackward
            .prepare::<C>([w.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((w.into_primitive(), center, coef), value),
            OpsKind::UnTracked(prep) => prep.finish(value),
        }
    }

    fn noise_op(mean: FloatTensor<Self>, var: FloatTensor<Self>, key: u64) -> FloatTensor<Self> {
        let y = B::fused_noise(mean.primitive().clone(), var.primitive().clone(), key);
        match NoiseBackward
            .prepare::<C>([mean.node(), var.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((var.into_primitive(), key), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn flip_op(x: FloatTensor<Self>, key: u64, inner: usize) -> FloatTensor<Self> {
        let y = B::fused_flip(x.primitive().clone(), key, inner);
        match FlipBackward
            .prepare::<C>([x.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((key, inner), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn dropout_op(
        x: FloatTensor<Self>,
        key: u64,
        p: f64,
        noise: DropoutNoise,
    ) -> FloatTensor<Self> {
        let y = B::fused_dropout(x.primitive().clone(), key, p, noise);
        match DropoutBackward
            .prepare::<C>([x.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((key, p, noise), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn rectifier_op(
        mean: FloatTensor<Self>,
        var: FloatTensor<Self>,
        rule: RectifierRule,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (m, v) = B::fused_rectifier(mean.primitive().clone(), var.primitive().clone(), rule);
        let node = |output: RectifierOutput, y: FloatTensor<B>| match RectifierBackward(output)
            .prepare::<C>([mean.node(), var.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                prep.finish((mean.primitive().clone(), var.primitive().clone(), rule), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        };
        (
            node(RectifierOutput::Mean, m),
            node(RectifierOutput::Var, v),
        )
    }

    fn max_pool_op(
        means: FloatTensor<Self>,
        vars: FloatTensor<Self>,
        kernel: usize,
        stride: usize,
    ) -> FloatTensor<Self> {
        let y = B::fused_max_pool(
            means.primitive().clone(),
            vars.primitive().clone(),
            kernel,
            stride,
        );
        match MaxPoolBackward
            .prepare::<C>([means.node(), vars.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(
                (
                    means.primitive().clone(),
                    vars.primitive().clone(),
                    kernel,
                    stride,
                ),
                y,
            ),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn conv_op(x: FloatTensor<Self>, w: FloatTensor<Self>, g: ConvGeometry) -> FloatTensor<Self> {
        let y = B::fused_conv(x.primitive().clone(), w.primitive().clone(), g);
        match ConvBackward
            .prepare::<C>([x.node(), w.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((x.into_primitive(), w.into_primitive(), g), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn matmul_op(x: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self> {
        let y = B::fused_matmul(x.primitive().clone(), w.primitive().clone());
        match MatmulBackward
            .prepare::<C>([x.node(), w.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((x.into_primitive(), w.into_primitive()), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn add_factor_draws_op(
        base: FloatTensor<Self>,
        factor: FloatTensor<Self>,
        z: Vec<f32>,
    ) -> FloatTensor<Self> {
        let nodes = [base.node(), factor.node()];
        // The backward pass needs neither tensor's values: the base's buffer is written in place
        // where it is not shared.
        let y =
            B::fused_add_factor_draws(base.into_primitive(), factor.into_primitive(), z.clone());
        match FactorDrawsBackward
            .prepare::<C>(nodes)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(z, y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn factor_kl_op(
        factor: FloatTensor<Self>,
        rho: FloatTensor<Self>,
        rule: SigmaRule,
        scale: f64,
        prior: PriorTensors<Self>,
    ) -> FloatTensor<Self> {
        let prior = inner_prior(prior);
        let (value, inv) = B::fused_factor_kl(
            factor.primitive().clone(),
            rho.primitive().clone(),
            rule,
            scale,
            prior.clone(),
        );
        match FactorKlBackward
            .prepare::<C>([factor.node(), rho.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let state = (
                    factor.into_primitive(),
                    rho.into_primitive(),
                    rule,
                    inv,
                    scale,
                    prior,
                );
                prep.finish(state, value)
            }
            OpsKind::UnTracked(prep) => prep.finish(value),
        }
    }

    fn mixture_kl_op(
        mu: FloatTensor<Self>,
        rho: FloatTensor<Self>,
        kl: MixtureKl,
    ) -> FloatTensor<Self> {
        let (m, r) = (mu.primitive().clone(), rho.primitive().clone());
        let value = B::fused_mixture_kl(m, r, kl.clone());
        match MixtureKlBackward
            .prepare::<C>([mu.node(), rho.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                prep.finish((mu.into_primitive(), rho.into_primitive(), kl), value)
            }
            OpsKind::UnTracked(prep) => prep.finish(value),
        }
    }
}
