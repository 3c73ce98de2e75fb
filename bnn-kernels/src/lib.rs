//! The CPU kernels of bnn-burn's fused ops, on `f32` slices and without burn: a stochastic layer's
//! draws, moments and KL terms, dropout and Flipout noise, Adam, the moment rules of rectifiers and
//! max pooling, the low-rank factor, the scale-mixture KL and convolution as `im2col`.
//!
//! Noise is counter-based (Philox4x32-10 and Box–Muller, [`rng`]): a backward pass regenerates
//! the draws of its forward pass. Every kernel works in 64-element blocks that LLVM vectorises
//! ([`simd`]), compiled for AVX-512, AVX2 or the baseline and chosen at run time, and runs in
//! parallel over fixed ranges, so results do not depend on the thread count. The tests check each
//! kernel against an `f64` evaluation of its formula; `cargo bench -p bnn-kernels` times them.

#![warn(missing_docs)]

pub mod clark;
pub mod conv;
pub mod elementwise;
pub mod factor;
pub mod mixture;
pub mod rectifier;
pub mod rng;
pub mod simd;

/// `½ ln 2π`.
pub const HALF_LN_2PI: f64 = 0.918_938_533_204_672_8;

/// The multiplicative noise of a dropout mask (the kernels draw both; bnn-burn's
/// `DropoutConfig` chooses one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum DropoutNoise {
    /// `z ~ Bern(1−p)`, scaled by `1/(1−p)` so that `E[z] = 1`.
    Bernoulli,
    /// `z ~ N(1, p/(1−p))`: the scaled Bernoulli's mean and variance.
    Gaussian,
}
