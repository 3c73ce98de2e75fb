//! Spatial pooling between convolutions, on activations with a leading sample axis.

use burn::config::Config;
use burn::tensor::Tensor;
use burn::tensor::module::{avg_pool2d, max_pool2d};
use burn::tensor::ops::{AvgPoolOptions, MaxPoolOptions};

/// A square pooling window.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum Pool {
    /// Maximum over each window.
    Max {
        /// Window side.
        kernel: usize,
        /// Stride (both axes).
        stride: usize,
    },
    /// Mean over each window.
    Avg {
        /// Window side.
        kernel: usize,
        /// Stride (both axes).
        stride: usize,
    },
}

impl Pool {
    /// Window side and stride.
    pub fn geometry(&self) -> (usize, usize) {
        match *self {
            Pool::Max { kernel, stride } | Pool::Avg { kernel, stride } => (kernel, stride),
        }
    }

    /// The output side for an input side (floor mode), if the window fits.
    pub fn output_side(&self, side: usize) -> Option<usize> {
        let (kernel, stride) = self.geometry();
        (kernel >= 1 && stride >= 1 && side >= kernel).then(|| (side - kernel) / stride + 1)
    }

    /// Pools `[S, B, C, H, W]` → `[S, B, C, H', W']`.
    pub fn forward(&self, x: Tensor<5>) -> Tensor<5> {
        let [s, b, c, h, w] = x.dims();
        let folded = x.reshape([s * b, c, h, w]);
        let y = match *self {
            Pool::Max { kernel, stride } => max_pool2d(
                folded,
                MaxPoolOptions::new([kernel, kernel]).with_stride([stride, stride]),
            ),
            Pool::Avg { kernel, stride } => avg_pool2d(
                folded,
                AvgPoolOptions::new([kernel, kernel]).with_stride([stride, stride]),
            ),
        };
        let [_, _, ho, wo] = y.dims();
        y.reshape([s, b, c, ho, wo])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{test_device, to_vec};

    #[test]
    fn max_and_average_pooling_over_two_by_two_windows() {
        let device = test_device();
        let x = Tensor::<1>::from_floats(
            [
                1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0,
                16.0,
            ],
            &device,
        )
        .reshape([1, 1, 1, 4, 4]);
        let max = Pool::Max {
            kernel: 2,
            stride: 2,
        };
        assert_eq!(to_vec(max.forward(x.clone())), vec![6.0, 8.0, 14.0, 16.0]);
        let avg = Pool::Avg {
            kernel: 2,
            stride: 2,
        };
        assert_eq!(to_vec(avg.forward(x)), vec![3.5, 5.5, 11.5, 13.5]);
        assert_eq!(max.output_side(4), Some(2));
        assert_eq!(max.output_side(1), None);
    }
}
