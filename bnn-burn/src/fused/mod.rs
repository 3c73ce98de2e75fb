//! Fused kernels: the elementwise work of a stochastic layer's training step in one pass per
//! tensor, with hand-written backward passes, through burn's backend extensions.
//!
//! One file per op family holds all of it: the arguments, the kernels trait (its default bodies
//! on burn primitives are the reference and wgpu's; Flex and NdArray run the slice kernels of
//! `bnn-kernels`), the differentiable ops with their autodiff nodes, and the tensor functions.
//! The noise is counter-based (Philox4x32-10 and Box–Muller), so a backward pass regenerates it.
//! [`Kernels::Reference`] keeps the composition of burn ops. Every op: the book's *Fused kernels*
//! page; adding one: *Extending*.

/// Runs `$m!(backend)` for each CPU backend (Flex, NdArray) under its feature: their kernels.
macro_rules! for_cpu_backends {
    ($m:ident) => {
        #[cfg(feature = "flex")]
        $m!(burn::backend::Flex);
        #[cfg(feature = "ndarray")]
        $m!(burn::backend::NdArray);
    };
}

/// One table of differentiable ops: each entry, an op's signature with its forward on the inner
/// backends (`inner`) and its graph node under `Autodiff` (`autodiff`), generates the ops trait
/// (a backend extension), its implementations for Flex, NdArray and Cube, and `Autodiff<B, C>`'s
/// for any `B` with the family's kernels. Types are `Name` or `Name<Param>` (the extension's
/// macro reads them as written), a return also a tuple.
macro_rules! fused_ops {
    (
        $(#[$doc:meta])*
        pub trait $ops:ident for $kernels:ident {
            $(
                $(#[$fdoc:meta])*
                fn $name:ident($($(#[$attr:ident])* $arg:ident: $t:ident $(<$g:ident>)?),* $(,)?)
                    -> $r:tt $(<$rg:ident>)?;
                inner $inner:block
                autodiff $autodiff:block
            )*
        }
    ) => {
        $(#[$doc])*
        #[backend_extension(Flex: cfg(feature = "flex"), NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"), Autodiff)]
        pub trait $ops: Backend {
            $($(#[$fdoc])* fn $name($($(#[$attr])* $arg: $t $(<$g>)?),*) -> $r $(<$rg>)?;)*
        }

        $crate::fused::fused_ops!(@inner $ops, Flex, "flex" $(, $name($($arg: $t $(<$g>)?),*) -> $r $(<$rg>)? $inner)*);
        $crate::fused::fused_ops!(@inner $ops, NdArray, "ndarray" $(, $name($($arg: $t $(<$g>)?),*) -> $r $(<$rg>)? $inner)*);
        $crate::fused::fused_ops!(@inner $ops, Cube, "wgpu" $(, $name($($arg: $t $(<$g>)?),*) -> $r $(<$rg>)? $inner)*);

        impl<B: $kernels, C: CheckpointStrategy> $ops for Autodiff<B, C> {
            $(fn $name($($arg: $t $(<$g>)?),*) -> $r $(<$rg>)? $autodiff)*
        }
    };
    (@inner $ops:ident, $backend:ident, $feature:literal
        $(, $name:ident($($arg:ident: $t:ident $(<$g:ident>)?),*) -> $r:tt $(<$rg:ident>)? $inner:block)*) => {
        #[cfg(feature = $feature)]
        impl $ops for burn::backend::$backend {
            $(
                #[allow(unused_variables)]
                fn $name($($arg: $t $(<$g>)?),*) -> $r $(<$rg>)? $inner
            )*
        }
    };
}
pub(crate) use fused_ops;

mod adam;
mod args;
mod autodiff;
mod cpu;
mod draws;
mod kl;
mod masks;
mod moments;
mod products;
mod propagation;

pub(crate) use bnn_kernels::{clark, conv, elementwise, factor, mixture, rectifier, rng};

pub(crate) use adam::{FusedAdam, FusedAdamW};
pub(crate) use args::{DrawSpec, FusedPrior, LocScale};
pub use conv::ConvGeometry;
#[cfg(test)]
pub(crate) use draws::normal_like;
pub(crate) use draws::{add_factor_draws, sample, sample_log_ratio, squared_norms};
pub(crate) use elementwise::{KlTerms, SigmaRule};
pub(crate) use kl::{factor_kl, kl, mixture_kl, quadratic};
pub(crate) use masks::{dropout, flip};
pub(crate) use mixture::MixtureTerms;
pub(crate) use moments::{moments, noise};
pub(crate) use products::{batched_matmul, conv2d, conv2d_per_sample, matmul};
pub(crate) use propagation::{max_pool_moments, rectifier_moments};
pub(crate) use rectifier::RectifierRule;

use burn::tensor::{Device, Distribution, Tensor};

/// What every op family's file uses.
mod prelude {
    pub(super) use super::args::*;
    pub(super) use super::autodiff::{Adjoint, Node, inner_prior, inner_q, node};
    pub(super) use super::conv::{self, ConvGeometry};
    pub(super) use super::cpu::*;
    pub(super) use super::draws::{DrawKernels, scaled_normal};
    pub(super) use super::elementwise::{self, KlTerms, SigmaRule, Tape, VAR_FLOOR};
    pub(super) use super::kl::{
        centred, finish_backward, kl_mu_gradient, kl_sigma_gradient, kl_sum, kl_terms_sum,
    };
    pub(super) use super::mixture::{self, MixtureKl, MixtureTerms};
    pub(super) use super::rectifier::{self, RectifierOutput, RectifierRule};
    pub(super) use super::{DropoutNoise, inner_dispatch};
    pub(super) use super::{clark, factor};
    pub(super) use burn::backend::AutodiffBackend;
    pub(super) use burn::backend::autodiff::Autodiff;
    pub(super) use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
    pub(super) use burn::backend::autodiff::ops::{Backward, OpsKind};
    pub(super) use burn::backend::tensor::FloatTensor;
    pub(super) use burn::backend::{
        Backend, BoolDType, Dispatch, ExtensionType, FloatDType, Scalar, TensorMetadata,
        backend_extension, try_read_sync,
    };
    pub(super) use burn::tensor::ops::ConvOptions;
    pub(super) use burn::tensor::{Shape, Slice, Tensor, TensorData};
    pub(super) use std::mem::MaybeUninit;
}

/// Which implementation a training step uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Kernels {
    /// The fused ops and the fused optimiser.
    #[default]
    Fused,
    /// The composition of burn ops and burn's optimisers: the reference the fused path is tested
    /// against.
    Reference,
}

pub use bnn_kernels::DropoutNoise;

/// Stream keys for one pass: a base key drawn from burn's device generator on first use, then a
/// new key per op.
#[derive(Debug, Default, Clone)]
pub(crate) struct KeySource {
    base: Option<u64>,
    next: u64,
}

impl KeySource {
    /// Keys derived from `base` instead of the device's generator.
    pub fn keyed(base: u64) -> Self {
        Self {
            base: Some(rng::mix(base)),
            next: 0,
        }
    }

    /// The next key.
    pub fn next(&mut self, device: &Device) -> u64 {
        let base = *self.base.get_or_insert_with(|| {
            crate::device::uses_generator();
            let bits = Tensor::<1>::random([2], Distribution::Default, device)
                .into_data()
                .try_into_vec_as::<f32>()
                .expect("f32 draws");
            rng::mix(((bits[0].to_bits() as u64) << 32) | bits[1].to_bits() as u64)
        });
        self.next += 1;
        rng::mix(base ^ rng::mix(self.next))
    }
}

/// The inner (non-autodiff) version of `t` for the kernels that take no gradient.
fn inner_dispatch<const D: usize>(t: &Tensor<D>) -> burn::backend::DispatchTensor {
    t.clone().inner().into_dispatch()
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
