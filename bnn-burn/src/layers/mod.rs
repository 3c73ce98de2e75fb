//! Stochastic layers: posteriors over weights that are sampled in every forward pass.

mod activation;
mod conv;
mod estimator;
mod linear;
mod ops;
mod param;
mod pass;
mod pool;
mod weights;

pub use activation::Activation;
pub use conv::{BayesianConv2d, BayesianConv2dConfig};
pub use linear::{BayesianLinear, BayesianLinearConfig};
pub use pass::{LayerDraw, Pass};
pub use pool::Pool;
pub use weights::WeightConfig;

pub mod mean_field;

pub use estimator::Estimator;
pub use mean_field::{
    MeanFieldConv2d, MeanFieldConv2dConfig, MeanFieldLinear, MeanFieldLinearConfig,
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

#[cfg(test)]
mod tests;
