//! [`FusedOps`]: the differentiable fused ops. Without gradient tracking they are the inner
//! backend's forward kernels; under `Autodiff` each is one graph node, the same `Node` for all,
//! whose state (an `Adjoint`) calls the hand-written backward kernel of [`FusedKernels`]. Most
//! regenerate their `ε` from the key; the draws of [`FusedOps::sample_op`] keep a tape of
//! `ε·dσ/dρ` ([`Tape`]) instead, which makes their backward pass products and sums only.

// burn marks its NdArray backend deprecated; the project still offers it as a feature.
#![allow(deprecated)]

use super::DropoutNoise;
use super::conv::ConvGeometry;
use super::elementwise::{SigmaRule, Tape};
use super::ext::{DrawSpec, FusedKernels, LocScaleTensors, PriorTensors};
use super::mixture::MixtureKl;
use super::rectifier::{RectifierOutput, RectifierRule};
use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, NodeGuard, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{AutodiffBackend, Backend, backend_extension};
use std::marker::PhantomData;

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

/// A fused op's backward pass as data: what it keeps of the forward pass, and how the gradient
/// `g` of its output becomes its `N` parents' (`wanted[i]`: parent `i` is tracked; the others'
/// entries may be `None`).
trait Adjoint<B: Backend, const N: usize>: Clone + Send + std::fmt::Debug + 'static {
    fn grads(self, g: FloatTensor<B>, wanted: [bool; N]) -> [Option<FloatTensor<B>>; N];
}

/// The one autodiff node of the fused ops: its state is the op's [`Adjoint`].
#[derive(Debug)]
struct Node<S>(PhantomData<fn() -> S>);

impl<B: FusedKernels, S: Adjoint<B, N>, const N: usize> Backward<B, N> for Node<S> {
    type State = S;

    fn backward(self, ops: Ops<S, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let parents = ops.parents.map(|p| p.map(|node| node.id));
        let g = grads.consume::<B>(&ops.node);
        let values = ops.state.grads(g, parents.map(|p| p.is_some()));
        for (id, value) in parents.into_iter().zip(values) {
            if let (Some(id), Some(value)) = (id, value) {
                grads.register::<B>(id, value);
            }
        }
    }
}

/// `out` as one graph node over `parents` whose backward pass is `state()` (built only when a
/// parent is tracked).
fn node<B, C, S, const N: usize>(
    parents: [NodeGuard; N],
    out: FloatTensor<B>,
    state: impl FnOnce() -> S,
) -> FloatTensor<Autodiff<B, C>>
where
    B: FusedKernels,
    C: CheckpointStrategy,
    S: Adjoint<B, N>,
{
    match Node::<S>(PhantomData)
        .prepare::<C>(parents)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(state(), out),
        OpsKind::UnTracked(prep) => prep.finish(out),
    }
}

/// [`FusedOps::sample_op`]'s: `μ`, the forward pass's tape ([`Tape`]), `center`, the fold's
/// weight and the prior.
#[derive(Debug, Clone)]
struct SampleAdjoint<B: Backend> {
    mu: FloatTensor<B>,
    tape: FloatTensor<B>,
    center: bool,
    fold: Option<f32>,
    prior: PriorTensors<B>,
}

impl<B: FusedKernels> Adjoint<B, 2> for SampleAdjoint<B> {
    fn grads(self, dw: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let Self {
            mu,
            tape,
            center,
            fold,
            prior,
        } = self;
        let (dmu, drho) = B::fused_sample_backward(dw, tape, mu, center, fold, prior);
        [Some(dmu), Some(drho)]
    }
}

/// [`FusedOps::sample_ratio_op`]'s: the posterior, the key, the number of draws and the prior.
#[derive(Debug, Clone)]
struct SampleRatioAdjoint<B: Backend> {
    q: LocScaleTensors<B>,
    key: u64,
    draws: usize,
    prior: PriorTensors<B>,
}

impl<B: FusedKernels> Adjoint<B, 2> for SampleRatioAdjoint<B> {
    fn grads(self, dout: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let (dmu, drho) =
            B::fused_sample_ratio_backward(dout, self.q, self.key, self.draws, self.prior);
        [Some(dmu), Some(drho)]
    }
}

/// [`FusedOps::moments_op`]'s: the posterior, the variance's scale, the fold's weight and the
/// prior.
#[derive(Debug, Clone)]
struct MomentsAdjoint<B: Backend> {
    q: LocScaleTensors<B>,
    var_scale: f32,
    fold: Option<f32>,
    prior: PriorTensors<B>,
}

impl<B: FusedKernels> Adjoint<B, 2> for MomentsAdjoint<B> {
    fn grads(self, dvar: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let (dmu, drho) =
            B::fused_moments_backward(dvar, self.q, self.var_scale, self.fold, self.prior);
        [dmu, Some(drho)]
    }
}

/// [`FusedOps::kl_op`]'s: the posterior and the prior.
#[derive(Debug, Clone)]
struct KlAdjoint<B: Backend> {
    q: LocScaleTensors<B>,
    prior: PriorTensors<B>,
}

impl<B: FusedKernels> Adjoint<B, 2> for KlAdjoint<B> {
    fn grads(self, g: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let (dmu, drho) = B::fused_kl_backward(g, self.q, self.prior);
        [Some(dmu), Some(drho)]
    }
}

/// [`FusedOps::quadratic_op`]'s: the point and the term's centre and coefficient.
#[derive(Debug, Clone)]
struct QuadraticAdjoint<B: Backend> {
    w: FloatTensor<B>,
    center: f32,
    coef: f32,
}

impl<B: FusedKernels> Adjoint<B, 1> for QuadraticAdjoint<B> {
    fn grads(self, g: FloatTensor<B>, _: [bool; 1]) -> [Option<FloatTensor<B>>; 1] {
        [Some(B::fused_quadratic_backward(
            g,
            self.w,
            self.center,
            self.coef,
        ))]
    }
}

/// [`FusedOps::noise_op`]'s: the variance and the key (the mean's gradient is `dy`).
#[derive(Debug, Clone)]
struct NoiseAdjoint<B: Backend> {
    var: FloatTensor<B>,
    key: u64,
}

impl<B: FusedKernels> Adjoint<B, 2> for NoiseAdjoint<B> {
    fn grads(self, dy: FloatTensor<B>, [_, var]: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let dvar = var.then(|| B::fused_noise_backward(dy.clone(), self.var, self.key));
        [Some(dy), dvar]
    }
}

/// [`FusedOps::flip_op`]'s: the key and the group size (the signs are their own adjoint).
#[derive(Debug, Clone)]
struct FlipAdjoint {
    key: u64,
    inner: usize,
}

impl<B: FusedKernels> Adjoint<B, 1> for FlipAdjoint {
    fn grads(self, dy: FloatTensor<B>, _: [bool; 1]) -> [Option<FloatTensor<B>>; 1] {
        [Some(B::fused_flip(dy, self.key, self.inner))]
    }
}

/// [`FusedOps::dropout_op`]'s: the key, the rate and the noise (the mask is its own adjoint).
#[derive(Debug, Clone)]
struct DropoutAdjoint {
    key: u64,
    p: f64,
    noise: DropoutNoise,
}

impl<B: FusedKernels> Adjoint<B, 1> for DropoutAdjoint {
    fn grads(self, dy: FloatTensor<B>, _: [bool; 1]) -> [Option<FloatTensor<B>>; 1] {
        [Some(B::fused_dropout(dy, self.key, self.p, self.noise))]
    }
}

/// One output of [`FusedOps::rectifier_op`]: the input moments, the rule and which output.
#[derive(Debug, Clone)]
struct RectifierAdjoint<B: Backend> {
    mean: FloatTensor<B>,
    var: FloatTensor<B>,
    rule: RectifierRule,
    output: RectifierOutput,
}

impl<B: FusedKernels> Adjoint<B, 2> for RectifierAdjoint<B> {
    fn grads(self, g: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let (dmean, dvar) =
            B::fused_rectifier_backward(self.mean, self.var, g, self.rule, self.output);
        [Some(dmean), Some(dvar)]
    }
}

/// [`FusedOps::max_pool_op`]'s: the input moments and the window.
#[derive(Debug, Clone)]
struct MaxPoolAdjoint<B: Backend> {
    means: FloatTensor<B>,
    vars: FloatTensor<B>,
    kernel: usize,
    stride: usize,
}

impl<B: FusedKernels> Adjoint<B, 2> for MaxPoolAdjoint<B> {
    fn grads(self, g: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let (dmeans, dvars) =
            B::fused_max_pool_backward(self.means, self.vars, g, self.kernel, self.stride);
        [Some(dmeans), Some(dvars)]
    }
}

/// [`FusedOps::conv_op`]'s: the images, the kernel and the geometry.
#[derive(Debug, Clone)]
struct ConvAdjoint<B: Backend> {
    x: FloatTensor<B>,
    w: FloatTensor<B>,
    g: ConvGeometry,
}

impl<B: FusedKernels> Adjoint<B, 2> for ConvAdjoint<B> {
    fn grads(self, dy: FloatTensor<B>, wanted: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let (dx, dw) = B::fused_conv_backward(self.x, self.w, dy, self.g, wanted);
        [dx, dw]
    }
}

/// [`FusedOps::matmul_op`]'s: the two factors.
#[derive(Debug, Clone)]
struct MatmulAdjoint<B: Backend> {
    x: FloatTensor<B>,
    w: FloatTensor<B>,
}

impl<B: FusedKernels> Adjoint<B, 2> for MatmulAdjoint<B> {
    fn grads(self, dy: FloatTensor<B>, wanted: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let (dx, dw) = B::fused_matmul_backward(self.x, self.w, dy, wanted);
        [dx, dw]
    }
}

/// [`FusedOps::add_factor_draws_op`]'s: the draws' `z` (the base's gradient is `dy`).
#[derive(Debug, Clone)]
struct FactorDrawsAdjoint {
    z: Vec<f32>,
}

impl<B: FusedKernels> Adjoint<B, 2> for FactorDrawsAdjoint {
    fn grads(self, dy: FloatTensor<B>, [_, factor]: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let df = factor.then(|| B::fused_factor_draws_backward(dy.clone(), self.z));
        [Some(dy), df]
    }
}

/// [`FusedOps::mixture_kl_op`]'s: `μ`, `ρ` and the settings (the draws' key among them).
#[derive(Debug, Clone)]
struct MixtureKlAdjoint<B: Backend> {
    mu: FloatTensor<B>,
    rho: FloatTensor<B>,
    kl: MixtureKl,
}

impl<B: FusedKernels> Adjoint<B, 2> for MixtureKlAdjoint<B> {
    fn grads(self, g: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let (dmu, drho) = B::fused_mixture_kl_backward(self.mu, self.rho, self.kl, g);
        [Some(dmu), Some(drho)]
    }
}

/// [`FusedOps::factor_kl_op`]'s: the factor, `ρ`, the rule, `A⁻¹`, the scale and the prior.
#[derive(Debug, Clone)]
struct FactorKlAdjoint<B: Backend> {
    factor: FloatTensor<B>,
    rho: FloatTensor<B>,
    rule: SigmaRule,
    inv: Vec<f32>,
    scale: f64,
    prior: PriorTensors<B>,
}

impl<B: FusedKernels> Adjoint<B, 2> for FactorKlAdjoint<B> {
    fn grads(self, g: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let Self {
            factor,
            rho,
            rule,
            inv,
            scale,
            prior,
        } = self;
        let (df, drho) = B::fused_factor_kl_backward(factor, rho, rule, inv, scale, prior, g);
        [Some(df), Some(drho)]
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
        let parents = [q.mu.node(), q.rho.node()];
        // The forward pass keeps a tape only when the backward pass will run.
        match Node::<SampleAdjoint<B>>(PhantomData)
            .prepare::<C>(parents)
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
                let state = SampleAdjoint {
                    mu: q.mu.into_primitive(),
                    tape: tape.expect("a tape was asked for"),
                    center,
                    fold,
                    // The backward pass reads the prior only for a folded KL.
                    prior: if fold.is_some() {
                        prior
                    } else {
                        PriorTensors::Off
                    },
                };
                (prep.finish(state, w), Self::from_inner(value))
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
        let state = || SampleRatioAdjoint {
            q: inner,
            key,
            draws,
            prior,
        };
        let out = node::<B, C, _, 2>([q.mu.node(), q.rho.node()], out, state);
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
        let state = || MomentsAdjoint {
            q: inner,
            var_scale,
            fold,
            // The backward pass reads the prior only for a folded KL.
            prior: if fold.is_some() {
                prior
            } else {
                PriorTensors::Off
            },
        };
        let var = node::<B, C, _, 2>([q.mu.node(), q.rho.node()], var, state);
        (var, Self::from_inner(value))
    }

    fn kl_op(q: LocScaleTensors<Self>, prior: PriorTensors<Self>) -> FloatTensor<Self> {
        let prior = inner_prior(prior);
        let inner = inner_q(&q);
        let value = B::fused_kl(inner.clone(), prior.clone());
        let state = || KlAdjoint { q: inner, prior };
        node::<B, C, _, 2>([q.mu.node(), q.rho.node()], value, state)
    }

    fn quadratic_op(w: FloatTensor<Self>, center: f32, coef: f32) -> FloatTensor<Self> {
        let value = B::fused_quadratic(w.primitive().clone(), center, coef);
        let state = || QuadraticAdjoint {
            w: w.primitive().clone(),
            center,
            coef,
        };
        node::<B, C, _, 1>([w.node()], value, state)
    }

    fn noise_op(mean: FloatTensor<Self>, var: FloatTensor<Self>, key: u64) -> FloatTensor<Self> {
        let y = B::fused_noise(mean.primitive().clone(), var.primitive().clone(), key);
        let state = || NoiseAdjoint {
            var: var.primitive().clone(),
            key,
        };
        node::<B, C, _, 2>([mean.node(), var.node()], y, state)
    }

    fn flip_op(x: FloatTensor<Self>, key: u64, inner: usize) -> FloatTensor<Self> {
        let y = B::fused_flip(x.primitive().clone(), key, inner);
        node::<B, C, _, 1>([x.node()], y, || FlipAdjoint { key, inner })
    }

    fn dropout_op(
        x: FloatTensor<Self>,
        key: u64,
        p: f64,
        noise: DropoutNoise,
    ) -> FloatTensor<Self> {
        let y = B::fused_dropout(x.primitive().clone(), key, p, noise);
        node::<B, C, _, 1>([x.node()], y, || DropoutAdjoint { key, p, noise })
    }

    fn rectifier_op(
        mean: FloatTensor<Self>,
        var: FloatTensor<Self>,
        rule: RectifierRule,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (m, v) = B::fused_rectifier(mean.primitive().clone(), var.primitive().clone(), rule);
        let output = |output: RectifierOutput, y: FloatTensor<B>| {
            let state = || RectifierAdjoint {
                mean: mean.primitive().clone(),
                var: var.primitive().clone(),
                rule,
                output,
            };
            node::<B, C, _, 2>([mean.node(), var.node()], y, state)
        };
        (
            output(RectifierOutput::Mean, m),
            output(RectifierOutput::Var, v),
        )
    }

    fn max_pool_op(
        means: FloatTensor<Self>,
        vars: FloatTensor<Self>,
        kernel: usize,
        stride: usize,
    ) -> FloatTensor<Self> {
        let (m, v) = (means.primitive().clone(), vars.primitive().clone());
        let y = B::fused_max_pool(m.clone(), v.clone(), kernel, stride);
        let state = || MaxPoolAdjoint {
            means: m,
            vars: v,
            kernel,
            stride,
        };
        node::<B, C, _, 2>([means.node(), vars.node()], y, state)
    }

    fn conv_op(x: FloatTensor<Self>, w: FloatTensor<Self>, g: ConvGeometry) -> FloatTensor<Self> {
        let y = B::fused_conv(x.primitive().clone(), w.primitive().clone(), g);
        let parents = [x.node(), w.node()];
        let state = || ConvAdjoint {
            x: x.into_primitive(),
            w: w.into_primitive(),
            g,
        };
        node::<B, C, _, 2>(parents, y, state)
    }

    fn matmul_op(x: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self> {
        let y = B::fused_matmul(x.primitive().clone(), w.primitive().clone());
        let parents = [x.node(), w.node()];
        let state = || MatmulAdjoint {
            x: x.into_primitive(),
            w: w.into_primitive(),
        };
        node::<B, C, _, 2>(parents, y, state)
    }

    fn add_factor_draws_op(
        base: FloatTensor<Self>,
        factor: FloatTensor<Self>,
        z: Vec<f32>,
    ) -> FloatTensor<Self> {
        let parents = [base.node(), factor.node()];
        // The backward pass needs neither tensor's values: the base's buffer is written in place
        // where it is not shared.
        let y =
            B::fused_add_factor_draws(base.into_primitive(), factor.into_primitive(), z.clone());
        node::<B, C, _, 2>(parents, y, || FactorDrawsAdjoint { z })
    }

    fn factor_kl_op(
        factor: FloatTensor<Self>,
        rho: FloatTensor<Self>,
        rule: SigmaRule,
        scale: f64,
        prior: PriorTensors<Self>,
    ) -> FloatTensor<Self> {
        let prior = inner_prior(prior);
        let (f, r) = (factor.primitive().clone(), rho.primitive().clone());
        let (value, inv) = B::fused_factor_kl(f.clone(), r.clone(), rule, scale, prior.clone());
        let state = || FactorKlAdjoint {
            factor: f,
            rho: r,
            rule,
            inv,
            scale,
            prior,
        };
        node::<B, C, _, 2>([factor.node(), rho.node()], value, state)
    }

    fn mixture_kl_op(
        mu: FloatTensor<Self>,
        rho: FloatTensor<Self>,
        kl: MixtureKl,
    ) -> FloatTensor<Self> {
        let (m, r) = (mu.primitive().clone(), rho.primitive().clone());
        let value = B::fused_mixture_kl(m.clone(), r.clone(), kl.clone());
        let state = || MixtureKlAdjoint { mu: m, rho: r, kl };
        node::<B, C, _, 2>([mu.node(), rho.node()], value, state)
    }
}
