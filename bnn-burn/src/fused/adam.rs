//! [`FusedAdam`]: Adam and AdamW as a burn [`Optimizer`] whose per-tensor step is one fused
//! kernel (in place on Flex when the buffers are not shared). It keeps burn's records
//! ([`AdamState`], [`AdamWState`]), so checkpoints move between it and burn's `Adam`/`AdamW`.

// burn marks its NdArray backend deprecated; the project still offers it as a feature.
#![allow(deprecated)]

use super::cpu::CpuTensor;
use super::elementwise::{self, AdamStep};

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, Scalar, backend_extension};
use burn::optim::{
    AdamState, AdamWState, AdaptiveMomentumState, LearningRate, ModuleOptimizer, Optimizer,
};
use burn::tensor::{Device, Tensor};

/// Adam with burn's `Adam` numerics, one fused pass per parameter tensor (Kingma & Ba 2015):
/// `m ← β₁m + (1−β₁)g`, `v ← β₂v + (1−β₂)g²`, `p ← p − lr·√(1−β₂ᵗ)/(1−β₁ᵗ)·m/(√v + ε√(1−β₂ᵗ))`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FusedAdam {
    /// First-moment decay β₁.
    pub beta_1: f32,
    /// Second-moment decay β₂.
    pub beta_2: f32,
    /// Denominator floor ε.
    pub epsilon: f32,
}

/// AdamW with burn's `AdamW` numerics, one fused pass per parameter tensor (Loshchilov & Hutter
/// 2019): `p ← p(1 − lr·λ) − lr·m̂/(√v̂ + ε)`, `m̂ = m/(1−β₁ᵗ)`, `v̂ = v/(1−β₂ᵗ)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FusedAdamW {
    /// First-moment decay β₁.
    pub beta_1: f32,
    /// Second-moment decay β₂.
    pub beta_2: f32,
    /// Denominator floor ε.
    pub epsilon: f32,
    /// Decoupled weight decay λ.
    pub weight_decay: f32,
}

impl FusedAdam {
    /// The optimiser over a whole module.
    pub fn init(self) -> ModuleOptimizer {
        ModuleOptimizer::from(self)
    }
}

impl FusedAdamW {
    /// The optimiser over a whole module.
    pub fn init(self) -> ModuleOptimizer {
        ModuleOptimizer::from(self)
    }
}

/// The optimiser's kernel. No autodiff op: a step runs on the inner tensors.
#[backend_extension(Flex: cfg(feature = "flex"), NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"))]
pub trait AdamKernels: Backend {
    /// One Adam or AdamW step: `(param, moment_1, moment_2)` after it.
    fn fused_adam(
        param: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        moment_1: FloatTensor<Self>,
        moment_2: FloatTensor<Self>,
        step: AdamStep,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let (b1, b2) = (step.beta_1, step.beta_2);
        let m = Self::float_add(
            Self::float_mul_scalar(moment_1, Scalar::from(b1)),
            Self::float_mul_scalar(grad.clone(), Scalar::from(1.0 - b1)),
        );
        let g2 = Self::float_mul(grad.clone(), grad);
        let v = Self::float_add(
            Self::float_mul_scalar(moment_2, Scalar::from(b2)),
            Self::float_mul_scalar(g2, Scalar::from(1.0 - b2)),
        );
        let elementwise::AdamCoefficients {
            step_size,
            denom_scale,
            eps,
            keep,
        } = step.coefficients();
        let denom = Self::float_add_scalar(
            Self::float_sqrt(Self::float_mul_scalar(v.clone(), Scalar::from(denom_scale))),
            Scalar::from(eps),
        );
        let update = Self::float_div(
            Self::float_mul_scalar(m.clone(), Scalar::from(step_size)),
            denom,
        );
        let kept = Self::float_mul_scalar(param, Scalar::from(keep));
        (Self::float_sub(kept, update), m, v)
    }
}

#[cfg(feature = "wgpu")]
impl AdamKernels for burn::backend::Cube {}

/// The CPU backends' step: in place where a buffer is unshared.
macro_rules! cpu_kernels {
    ($backend:ty) => {
        impl AdamKernels for $backend {
            fn fused_adam(
                param: FloatTensor<Self>,
                grad: FloatTensor<Self>,
                moment_1: FloatTensor<Self>,
                moment_2: FloatTensor<Self>,
                step: AdamStep,
            ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
                let g = grad.values();
                let mut m_out = None;
                let mut v_out = None;
                let param = param.rewrite(|p| {
                    let m = moment_1.rewrite(|m| {
                        let v = moment_2.rewrite(|v| elementwise::adam(p, &g, m, v, step));
                        v_out = Some(v);
                    });
                    m_out = Some(m);
                });
                (param, m_out.expect("written"), v_out.expect("written"))
            }
        }
    };
}

for_cpu_backends!(cpu_kernels);

/// One step of either: `(param, momentum)` after it.
fn update<const D: usize>(
    lr: LearningRate,
    (beta_1, beta_2, epsilon): (f32, f32, f32),
    decoupled_decay: Option<f32>,
    tensor: Tensor<D>,
    grad: Tensor<D>,
    momentum: Option<AdaptiveMomentumState<D>>,
) -> (Tensor<D>, AdaptiveMomentumState<D>) {
    let (m, v, time) = match momentum {
        Some(s) => (s.moment_1, s.moment_2, s.time + 1),
        None => (tensor.zeros_like(), tensor.zeros_like(), 1),
    };
    let step = AdamStep {
        lr: lr as f32,
        beta_1,
        beta_2,
        epsilon,
        time: time as i32,
        decoupled_decay,
    };
    let (p, m, v) = <Dispatch as AdamKernels>::fused_adam(
        tensor.into_dispatch(),
        grad.into_dispatch(),
        m.into_dispatch(),
        v.into_dispatch(),
        step,
    );
    let state =
        AdaptiveMomentumState::new(time, Tensor::from_dispatch(m), Tensor::from_dispatch(v));
    (Tensor::from_dispatch(p), state)
}

impl Optimizer for FusedAdam {
    type State<const D: usize> = AdamState<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<AdamState<D>>,
    ) -> (Tensor<D>, Option<AdamState<D>>) {
        let hyper = (self.beta_1, self.beta_2, self.epsilon);
        let (p, momentum) = update(lr, hyper, None, tensor, grad, state.map(|s| s.momentum));
        (p, Some(AdamState::new(momentum)))
    }

    fn to_device<const D: usize>(mut state: AdamState<D>, device: &Device) -> AdamState<D> {
        state.momentum = state.momentum.to_device(device);
        state
    }
}

impl Optimizer for FusedAdamW {
    type State<const D: usize> = AdamWState<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<AdamWState<D>>,
    ) -> (Tensor<D>, Option<AdamWState<D>>) {
        let hyper = (self.beta_1, self.beta_2, self.epsilon);
        let decay = Some(self.weight_decay);
        let (p, momentum) = update(lr, hyper, decay, tensor, grad, state.map(|s| s.momentum));
        (p, Some(AdamWState::new(momentum)))
    }

    fn to_device<const D: usize>(mut state: AdamWState<D>, device: &Device) -> AdamWState<D> {
        state.momentum = state.momentum.to_device(device);
        state
    }
}
