//! Stochastic layers: posteriors over weights that are sampled in every forward pass.

mod ops;
mod param;

pub mod mean_field;

pub use mean_field::{
    Estimator, MeanFieldConv2d, MeanFieldConv2dConfig, MeanFieldLinear, MeanFieldLinearConfig,
};
pub use ops::Conv2dGeometry;
pub(crate) use ops::check_channels;
pub use param::PosteriorParam;
pub mod radial;
pub use radial::{RadialConv2d, RadialConv2dConfig, RadialLinear, RadialLinearConfig};
pub mod dropout;
pub use dropout::{
    DropConnectConv2d, DropConnectLinear, DropoutConv2dConfig, DropoutLinearConfig, DropoutNoise,
    McDropout, McDropoutConfig, McDropoutConv2d, McDropoutLinear, model_precision,
    prior_length_scale_for_weight_decay, weight_decay_for_prior,
};
