//! A diagonal Gaussian over an activation tensor: the state that moment propagation carries
//! through a network in place of samples (Haußmann 2021 §3.1; Wu et al. 2019).

use burn::tensor::Tensor;

/// `h ~ N(mean, diag var)`, elementwise independent (the covariances between units are dropped,
/// the approximation every layer of a moment-propagating net makes).
///
/// Built by [`Moments::new`], or by [`Moments::deterministic`] for a network's input, whose
/// variance is known to be 0 so that a layer can skip the terms it would multiply (see
/// [`Moments::is_deterministic`]). The mark follows the constructor, not the values: to give an
/// input a variance (input noise, say), build it with [`Moments::new`] rather than assigning
/// `var` of a deterministic one.
#[derive(Debug, Clone)]
pub struct Moments<const D: usize> {
    /// `E[h]`.
    pub mean: Tensor<D>,
    /// `Var[h] ≥ 0`, shaped like the mean.
    pub var: Tensor<D>,
    /// `var` is exactly 0 by construction ([`Moments::deterministic`]).
    deterministic: bool,
}

impl<const D: usize> Moments<D> {
    /// Mean and variance of the same shape.
    ///
    /// # Panics
    /// If the shapes differ (both are named).
    pub fn new(mean: Tensor<D>, var: Tensor<D>) -> Self {
        assert_eq!(
            mean.dims(),
            var.dims(),
            "Moments: mean and variance must have the same shape"
        );
        Self {
            mean,
            var,
            deterministic: false,
        }
    }

    /// A deterministic input: `var = 0`, marked so that a layer skips the terms it multiplies
    /// (a weight layer's `Var[h] ∗ E[w]²`, one of its three weight operations).
    pub fn deterministic(x: Tensor<D>) -> Self {
        let var = x.zeros_like();
        Self {
            mean: x,
            var,
            deterministic: true,
        }
    }

    /// Whether the variance is exactly 0 by construction: built by [`Moments::deterministic`]
    /// (and reshaped). Moments built by [`Moments::new`] answer `false` whatever their values.
    pub fn is_deterministic(&self) -> bool {
        self.deterministic
    }

    /// `E[h²] = Var[h] + E[h]²`.
    pub fn second_moment(&self) -> Tensor<D> {
        self.var.clone() + self.mean.clone().square()
    }

    /// `E[(y − h)²] = (y − E h)² + Var h` for targets `y` of the same shape: the data term of
    /// a Gaussian likelihood's expectation (Haußmann 2021 eq. 3.5).
    pub fn expected_squared_error(&self, y: Tensor<D>) -> Tensor<D> {
        (y - self.mean.clone()).square() + self.var.clone()
    }

    /// Shape of the activation.
    pub fn dims(&self) -> [usize; D] {
        self.mean.dims()
    }

    /// Both tensors reshaped (e.g. flattening feature maps before a dense layer).
    pub fn reshape<const E: usize>(self, shape: [usize; E]) -> Moments<E> {
        Moments {
            mean: self.mean.reshape(shape),
            var: self.var.reshape(shape),
            deterministic: self.deterministic,
        }
    }
}
