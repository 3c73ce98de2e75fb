//! Bayesian layers over any posterior family: [`BayesianLinear`] and [`BayesianConv2d`], their
//! shared weight model ([`WeightConfig`]), the gradient [`Estimator`]s, activations and pooling
//! with their moment rules ([`MomentRule`]),
//! and the [`Pass`] that carries samples, fixed draws and training terms through a network.

mod activation;
mod conv;
mod estimator;
mod fused_path;
mod linear;
mod moments;
pub(crate) mod ops;
mod params;
mod pass;
mod pool;
pub(crate) mod visit;
mod weights;

pub use activation::Activation;
pub use conv::{BayesianConv2d, BayesianConv2dConfig};
pub use estimator::Estimator;
pub(crate) use estimator::VAR_FLOOR;
pub use linear::{BayesianLinear, BayesianLinearConfig};
pub use moments::{
    MomentRule, VAR_EPS, elu_moments, leaky_relu_moments, leaky_relu_vbp_moments, max_moments,
    relu_moments, relu_vbp_moments,
};
pub use ops::Conv2dGeometry;
pub use params::LayerParams;
pub use pass::{FlatLayout, LayerDraw, Pass, Recorded};
pub use pool::Pool;
pub use visit::{AnyLayerParams, LayerIds, LayerInfo, LayerKind, LayerMapper, LayerVisitor};
pub use weights::{Bias, MeanInit, WeightConfig};

#[cfg(test)]
pub(crate) mod tests;
