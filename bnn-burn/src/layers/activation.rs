//! Activations between layers; their moment rules for Gaussian inputs are in `moments.rs`
//! ([`Activation::moments`]).

use burn::config::Config;
use burn::tensor::Tensor;
use burn::tensor::activation;

/// A pointwise nonlinearity.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum Activation {
    /// `max(0, x)`.
    Relu,
    /// `x` for `x > 0`, `slope · x` below.
    LeakyRelu {
        /// Negative slope.
        slope: f64,
    },
    /// `x` for `x > 0`, `α(eˣ − 1)` below (Clevert et al. 2016).
    Elu {
        /// α.
        alpha: f64,
    },
    /// `tanh x`.
    Tanh,
    /// `λ·ELU_α(x)` with λ ≈ 1.0507, α ≈ 1.6733 (Klambauer et al. 2017).
    Selu,
    /// `x`.
    Identity,
    /// `ln(1 + eˣ)`: smooth and Lipschitz, the drift nets of Haußmann 2021 ch. 6.
    Softplus,
    /// `cos x`: random Fourier features (Rahimi & Recht 2007), the features of
    /// [`crate::gp::RandomFeatureGp`].
    Cos,
}

impl Activation {
    /// Applies the activation elementwise.
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        match *self {
            Activation::Relu => activation::relu(x),
            Activation::LeakyRelu { slope } => activation::leaky_relu(x, slope),
            Activation::Elu { alpha } => activation::elu(x, alpha),
            Activation::Tanh => activation::tanh(x),
            Activation::Selu => activation::selu(x),
            Activation::Identity => x,
            Activation::Softplus => crate::special::softplus(x),
            Activation::Cos => x.cos(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{test_device, to_vec};

    #[test]
    fn every_activation_has_its_pointwise_form() {
        let device = test_device();
        let xs = [-2.0f64, -0.5, 0.0, 0.7, 3.0];
        let x = Tensor::<1>::from_floats([-2.0, -0.5, 0.0, 0.7, 3.0], &device);
        type Reference = fn(f64) -> f64;
        let cases: [(Activation, Reference); 8] = [
            (Activation::Relu, |v| v.max(0.0)),
            (Activation::LeakyRelu { slope: 0.1 }, |v| {
                if v > 0.0 { v } else { 0.1 * v }
            }),
            (Activation::Elu { alpha: 0.5 }, |v| {
                if v > 0.0 { v } else { 0.5 * v.exp_m1() }
            }),
            (Activation::Tanh, f64::tanh),
            (Activation::Selu, |v| {
                let (l, a) = (1.050_700_987_355_480_5, 1.673_263_242_354_377_3);
                l * if v > 0.0 { v } else { a * v.exp_m1() }
            }),
            (Activation::Identity, |v| v),
            (Activation::Softplus, |v| {
                v.max(0.0) + (-v.abs()).exp().ln_1p()
            }),
            (Activation::Cos, f64::cos),
        ];
        for (act, f) in cases {
            let got = to_vec(act.forward(x.clone()));
            for (g, v) in got.iter().zip(xs) {
                assert!((g - f(v)).abs() < 1e-5, "{act:?}({v}) = {g}, want {}", f(v));
            }
        }
    }
}
