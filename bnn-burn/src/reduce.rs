//! Reductions along one axis that stay exact for long axes on every backend.
//!
//! burn 0.22.1's wgpu reductions along an axis (sum, mean, max) stop after 65 532 entries:
//! measured on lavapipe, the sum over an axis of 100 000 ones returns 65 532 and the mean
//! 0.655, while whole-tensor sums and the CPU backends are exact. The sample axis of a
//! prediction, or of sampled logits, can be that long. These helpers reduce an axis longer than
//! [`CHUNK`] in pieces and combine them; shorter axes go to burn unchanged.

use burn::tensor::Tensor;

/// The longest axis reduced in one burn call.
pub const CHUNK: usize = 32_768;

/// `Σ` along `dim` (kept with size 1).
pub fn sum_dim<const D: usize>(t: Tensor<D>, dim: usize) -> Tensor<D> {
    let n = t.dims()[dim];
    if n <= CHUNK {
        return t.sum_dim(dim);
    }
    (0..n)
        .step_by(CHUNK)
        .map(|start| {
            t.clone()
                .narrow(dim, start, CHUNK.min(n - start))
                .sum_dim(dim)
        })
        .reduce(|a, b| a + b)
        .expect("a long axis has pieces")
}

/// The mean along `dim` (kept with size 1).
pub fn mean_dim<const D: usize>(t: Tensor<D>, dim: usize) -> Tensor<D> {
    let n = t.dims()[dim];
    if n <= CHUNK {
        return t.mean_dim(dim);
    }
    sum_dim(t, dim) / n as f64
}

/// The maximum along `dim` (kept with size 1).
pub fn max_dim<const D: usize>(t: Tensor<D>, dim: usize) -> Tensor<D> {
    let n = t.dims()[dim];
    if n <= CHUNK {
        return t.max_dim(dim);
    }
    (0..n)
        .step_by(CHUNK)
        .map(|start| {
            t.clone()
                .narrow(dim, start, CHUNK.min(n - start))
                .max_dim(dim)
        })
        .reduce(|a, b| a.max_pair(b))
        .expect("a long axis has pieces")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{test_device, to_vec};
    use burn::tensor::TensorData;

    #[test]
    fn long_axes_reduce_exactly_on_every_backend() {
        let device = test_device();
        for n in [CHUNK, CHUNK + 1, 65_533, 100_000] {
            // Column 0 counts 0, 1, …, n − 1 (for the maximum); column 1 is i mod 7, whose
            // partial sums stay integers below 2²⁴, exact in f32 whatever the summation order.
            let data: Vec<f32> = (0..n).flat_map(|i| [i as f32, (i % 7) as f32]).collect();
            let t = Tensor::<2>::from_data(TensorData::new(data, [n, 2]), &device);
            let want_sum: f64 = (0..n).map(|i| (i % 7) as f64).sum();
            let sum = to_vec(sum_dim(t.clone(), 0));
            let mean = to_vec(mean_dim(t.clone(), 0));
            let max = to_vec(max_dim(t.clone(), 0));
            assert_eq!(sum[1], want_sum, "n = {n}: sum {sum:?}");
            let want_mean = want_sum / n as f64;
            assert!(
                (mean[1] - want_mean).abs() < 1e-6 * want_mean,
                "n = {n}: mean {mean:?}"
            );
            assert_eq!(max[0], (n - 1) as f64, "n = {n}: max {max:?}");
            // The transposed layout: the long axis last.
            let row = to_vec(sum_dim(t.transpose(), 1));
            assert_eq!(row[1], want_sum, "n = {n}: transposed sum {row:?}");
        }
    }
}
