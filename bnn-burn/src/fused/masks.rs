//! Multiplicative noise that is its own adjoint: Flipout's random signs per group (`flip`) and
//! dropout's unit-mean masks, Bernoulli or Gaussian (`dropout`).

// burn marks its NdArray backend deprecated; the project still offers it as a feature.
#![allow(deprecated)]

use super::prelude::*;

/// The masks' kernels (each mask is its own backward pass).
#[backend_extension(Flex: cfg(feature = "flex"), NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"))]
pub trait MaskKernels: Backend {
    /// `x ⊙ s`, `s` random ±1 per group of `inner` consecutive elements (its own adjoint).
    fn fused_flip(x: FloatTensor<Self>, key: u64, inner: usize) -> FloatTensor<Self> {
        let shape = x.shape();
        let n = shape.num_elements();
        let mut signs = vec![0f32; n];
        elementwise::flip(key, &vec![1.0; n], inner, &mut signs);
        let signs = uploaded::<Self>(signs, shape, &x.device());
        Self::float_mul(x, signs)
    }

    /// `x ⊙ z`, unit-mean noise `z` of variance `p/(1−p)` per element, Bernoulli
    /// (`z ∈ {0, 1/(1−p)}`) or Gaussian (its own adjoint; [`elementwise::dropout`]).
    fn fused_dropout(
        x: FloatTensor<Self>,
        key: u64,
        p: f64,
        noise: DropoutNoise,
    ) -> FloatTensor<Self> {
        let shape = x.shape();
        let n = shape.num_elements();
        let mut mask = vec![0f32; n];
        elementwise::dropout(key, &vec![1.0; n], p, noise, &mut mask);
        let mask = uploaded::<Self>(mask, shape, &x.device());
        Self::float_mul(x, mask)
    }
}

#[cfg(feature = "wgpu")]
impl MaskKernels for burn::backend::Cube {}

/// The CPU backends' kernels: slices in, slices out.
macro_rules! cpu_kernels {
    ($backend:ty) => {
        impl MaskKernels for $backend {
            fn fused_flip(x: FloatTensor<Self>, key: u64, inner: usize) -> FloatTensor<Self> {
                let shape = x.shape();
                let x = x.values();
                let y = written(shape.num_elements(), |y| {
                    elementwise::flip(key, &x, inner, y)
                });
                <FloatTensor<Self>>::from_values(y, shape)
            }

            fn fused_dropout(
                x: FloatTensor<Self>,
                key: u64,
                p: f64,
                noise: DropoutNoise,
            ) -> FloatTensor<Self> {
                let shape = x.shape();
                let x = x.values();
                let y = written(shape.num_elements(), |y| {
                    elementwise::dropout(key, &x, p, noise, y)
                });
                <FloatTensor<Self>>::from_values(y, shape)
            }
        }
    };
}

for_cpu_backends!(cpu_kernels);

fused_ops! {
    /// The masks as differentiable ops.
    pub trait MaskOps for MaskKernels {
        /// [`MaskKernels::fused_flip`].
        fn flip_op(x: FloatTensor<Self>, key: u64, inner: usize) -> FloatTensor<Self>;
        inner {
            Self::fused_flip(x, key, inner)
        }
        autodiff {
            let y = B::fused_flip(x.primitive().clone(), key, inner);
            node::<B, C, _, 1>([x.node()], y, || FlipAdjoint { key, inner })
        }

        /// [`MaskKernels::fused_dropout`].
        fn dropout_op(x: FloatTensor<Self>, key: u64, p: f64, noise: DropoutNoise)
            -> FloatTensor<Self>;
        inner {
            Self::fused_dropout(x, key, p, noise)
        }
        autodiff {
            let y = B::fused_dropout(x.primitive().clone(), key, p, noise);
            node::<B, C, _, 1>([x.node()], y, || DropoutAdjoint { key, p, noise })
        }
    }
}

/// [`MaskOps::flip_op`]'s: the key and the group size (the signs are their own adjoint).
#[derive(Debug, Clone)]
struct FlipAdjoint {
    key: u64,
    inner: usize,
}

impl<B: MaskKernels> Adjoint<B, 1> for FlipAdjoint {
    fn grads(self, dy: FloatTensor<B>, _: [bool; 1]) -> [Option<FloatTensor<B>>; 1] {
        [Some(B::fused_flip(dy, self.key, self.inner))]
    }
}

/// [`MaskOps::dropout_op`]'s: the key, the rate and the noise (the mask is its own adjoint).
#[derive(Debug, Clone)]
struct DropoutAdjoint {
    key: u64,
    p: f64,
    noise: DropoutNoise,
}

impl<B: MaskKernels> Adjoint<B, 1> for DropoutAdjoint {
    fn grads(self, dy: FloatTensor<B>, _: [bool; 1]) -> [Option<FloatTensor<B>>; 1] {
        [Some(B::fused_dropout(dy, self.key, self.p, self.noise))]
    }
}

/// `x ⊙ s`: a random sign of `key` per group of `inner` consecutive elements (Flipout).
pub(crate) fn flip<const D: usize>(x: Tensor<D>, key: u64, inner: usize) -> Tensor<D> {
    Tensor::from_dispatch(<Dispatch as MaskOps>::flip_op(
        x.into_dispatch(),
        key,
        inner,
    ))
}

/// `x ⊙ z`: dropout noise of rate `p` per element from `key` (MC dropout's and DropConnect's
/// masks; the backward regenerates them): inverted Bernoulli, `z ∈ {0, 1/(1−p)}` kept with
/// probability `1 − p`, or Gaussian, `z ~ N(1, p/(1−p))` (Gal 2016, §3.2).
pub(crate) fn dropout<const D: usize>(
    x: Tensor<D>,
    key: u64,
    p: f64,
    noise: DropoutNoise,
) -> Tensor<D> {
    Tensor::from_dispatch(<Dispatch as MaskOps>::dropout_op(
        x.into_dispatch(),
        key,
        p,
        noise,
    ))
}
