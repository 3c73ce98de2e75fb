//! Shared mechanics of the Bayesian layers: the convolution with one kernel draw per Monte Carlo
//! sample, random signs, the convolution geometry, and the input checks that name both shapes.

use burn::tensor::Tensor;
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;

/// Panics with both shapes named if `input`'s last axis is not `d_input`.
pub(crate) fn check_last_dim<const D: usize>(layer: &str, input: &Tensor<D>, d_input: usize) {
    let dims = input.dims();
    assert!(
        dims[D - 1] == d_input,
        "{layer}: input shape {dims:?} has width {} on its last axis, but the layer expects \
         d_input = {d_input} (weight shape [{d_input}, d_output])",
        dims[D - 1],
    );
}

/// Panics with both shapes named if a `[B, C, H, W]` input does not have `channels` channels.
pub(crate) fn check_channels(layer: &str, dims: &[usize], channels: usize, axis: usize) {
    assert!(
        dims[axis] == channels,
        "{layer}: input shape {dims:?} has {} channels on axis {axis}, but the layer expects \
         {channels} input channels",
        dims[axis],
    );
}

/// Convolution with one weight draw per sample, as a single grouped convolution.
///
/// `x [S, B, C, H, W]`, `w [S, O, C/g, k, k]`, `b [S, O]` → `[S, B, O, H', W']`. The samples are
/// stacked along channels (`[B, S·C, H, W]`) and convolved with `S·g` groups.
pub(crate) fn conv2d_per_sample(
    x: Tensor<5>,
    w: Tensor<5>,
    b: Option<Tensor<2>>,
    options: &ConvOptions<2>,
) -> Tensor<5> {
    let [s, batch, c, h, wd] = x.dims();
    let [_, o, cg, kh, kw] = w.dims();
    let x = x.swap_dims(0, 1).reshape([batch, s * c, h, wd]);
    let w = w.reshape([s * o, cg, kh, kw]);
    let b = b.map(|b| b.reshape([s * o]));
    let mut opts = options.clone();
    opts.groups *= s;
    let y = conv2d(x, w, b, opts);
    let [_, _, ho, wo] = y.dims();
    y.reshape([batch, s, o, ho, wo]).swap_dims(0, 1)
}

/// A tensor of independent random signs ±1 shaped like `shape_of`.
pub(crate) fn random_signs<const D: usize>(shape_of: &Tensor<D>) -> Tensor<D> {
    crate::device::uses_generator();
    shape_of
        .random_like(burn::tensor::Distribution::Bernoulli(0.5))
        .mul_scalar(2.0)
        .sub_scalar(1.0)
}

/// Convolution geometry shared by the Conv2d layers (stride, padding, dilation; one group).
#[derive(burn::config::Config, Debug, PartialEq)]
pub struct Conv2dGeometry {
    /// Stride in (height, width).
    #[config(default = "[1, 1]")]
    pub stride: [usize; 2],
    /// Zero padding in (height, width), applied on both sides.
    #[config(default = "[0, 0]")]
    pub padding: [usize; 2],
    /// Dilation in (height, width).
    #[config(default = "[1, 1]")]
    pub dilation: [usize; 2],
}

impl Conv2dGeometry {
    pub(crate) fn options(&self) -> ConvOptions<2> {
        ConvOptions::new(self.stride, self.padding, self.dilation, 1)
    }

    pub(crate) fn validate(&self, config: &'static str) -> Result<(), crate::ConfigError> {
        let check = crate::error::Check(config);
        for (field, v) in [
            ("geometry.stride", self.stride),
            ("geometry.dilation", self.dilation),
        ] {
            check.at_least_one(field, v[0].min(v[1]))?;
        }
        Ok(())
    }
}
