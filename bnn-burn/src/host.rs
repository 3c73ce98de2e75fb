//! Moving data between host vectors and tensors: what the bench, the examples and the training
//! loop use to feed `f64` tables and labels to a model and to read results back.

use burn::tensor::{Device, Int, Tensor, TensorData};

/// A row-major `[values.len() / width, width]` float tensor from `f64` values (stored as f32).
///
/// # Panics
/// If `width` is 0 or does not divide `values.len()` (both numbers are named).
pub fn matrix(values: &[f64], width: usize, device: &Device) -> Tensor<2> {
    assert!(
        width > 0 && values.len().is_multiple_of(width),
        "host::matrix: {} values do not form rows of width {width}",
        values.len()
    );
    let data: Vec<f32> = values.iter().map(|v| *v as f32).collect();
    Tensor::from_data(TensorData::new(data, [values.len() / width, width]), device)
}

/// An integer tensor `[n]` of class labels or row indices.
pub fn labels(values: &[usize], device: &Device) -> Tensor<1, Int> {
    let data: Vec<i64> = values.iter().map(|&v| v as i64).collect();
    Tensor::from_data(TensorData::new(data, [values.len()]), device)
}

/// The tensor's values as `f64`, row-major.
///
/// # Panics
/// On a device that cannot read back synchronously (WebGPU in a browser): use
/// [`to_vec_async`] there.
pub fn to_vec<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    t.into_data()
        .try_into_vec_as::<f64>()
        .expect("float tensor converts to f64")
}

/// [`to_vec`], awaiting the read: what a browser's WebGPU device needs.
pub async fn to_vec_async<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    t.into_data_async()
        .await
        .expect("a tensor of this device reads back")
        .try_into_vec_as::<f64>()
        .expect("float tensor converts to f64")
}

/// How many entries of each row (index on axis 0) of `x` are NaN or infinite, as floats `[N]`,
/// not read back. By the backends' own `is_nan`/`is_inf` (`x − x`, which is NaN exactly there
/// on the CPU backends, is folded to 0 on wgpu), as floats (boolean tensors do not read back
/// alike on every backend).
pub(crate) fn non_finite_counts<const D: usize>(x: Tensor<D>) -> Tensor<1> {
    let n = x.dims()[0];
    let rest = x.shape().num_elements() / n.max(1);
    x.reshape([n, rest])
        .is_finite()
        .bool_not()
        .float()
        .sum_dim(1)
        .reshape([n])
}

/// [`non_finite_counts`], read back.
pub(crate) fn non_finite_per_row<const D: usize>(x: Tensor<D>) -> Vec<f64> {
    match x.dims()[0] {
        0 => Vec::new(),
        _ => to_vec(non_finite_counts(x)),
    }
}

/// The index of the first positive count.
pub(crate) fn first_positive(counts: &[f64]) -> Option<usize> {
    counts.iter().position(|&c| c > 0.0)
}

/// The values of an integer tensor of class labels or indices (`≥ 0`), as `usize`.
///
/// # Panics
/// On a negative value.
pub fn to_labels(t: Tensor<1, Int>) -> Vec<usize> {
    t.into_data()
        .try_into_vec_as::<i64>()
        .expect("integer tensor converts to i64")
        .into_iter()
        .map(|v| usize::try_from(v).expect("host::to_labels: a negative label"))
        .collect()
}

/// `n` standard normal draws (Box–Muller in `f64`), reproducible from `seed`: the host side of
/// the Monte Carlo oracles of the tests, independent of the backend under test.
pub fn host_normals(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = HostNormals::new(seed);
    (0..n).map(|_| rng.next()).collect()
}

/// A stream of standard normal draws (Box–Muller in `f64`) from a seeded host generator: the
/// samplers' momenta and the tests' oracles.
pub struct HostNormals {
    rng: rand::rngs::StdRng,
    spare: Option<f64>,
}

impl HostNormals {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> Self {
        use rand::SeedableRng;
        Self {
            rng: rand::rngs::StdRng::seed_from_u64(seed),
            spare: None,
        }
    }

    /// A uniform draw on `[0, 1)` from the same generator.
    pub fn uniform(&mut self) -> f64 {
        use rand::RngExt;
        self.rng.random()
    }

    /// The next draw.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> f64 {
        use rand::RngExt;
        if let Some(z) = self.spare.take() {
            return z;
        }
        let u1: f64 = 1.0 - self.rng.random::<f64>();
        let u2: f64 = self.rng.random();
        let r = (-2.0 * u1.ln()).sqrt();
        let t = std::f64::consts::TAU * u2;
        self.spare = Some(r * t.sin());
        r * t.cos()
    }

    /// `m` distinct indices of `0..n` (all `n` when `m ≥ n`), in the order drawn: a partial
    /// Fisher–Yates shuffle taking one uniform per index.
    pub fn choose_distinct(&mut self, n: usize, m: usize) -> Vec<usize> {
        let m = m.min(n);
        let mut all: Vec<usize> = (0..n).collect();
        for i in 0..m {
            let j = i + ((self.uniform() * (n - i) as f64) as usize).min(n - i - 1);
            all.swap(i, j);
        }
        all.truncate(m);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distinct indices in range, each index equally likely to be chosen.
    #[test]
    fn distinct_choices_are_distinct_and_uniform() {
        let mut rng = HostNormals::new(3);
        assert_eq!(rng.choose_distinct(4, 9).len(), 4);
        let mut counts = [0usize; 10];
        let trials = 4000;
        for _ in 0..trials {
            let c = rng.choose_distinct(10, 3);
            let mut sorted = c.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 3, "{c:?}");
            for i in c {
                counts[i] += 1;
            }
        }
        // Each index is chosen with probability 3/10: binomial sd √(n p (1 − p)) ≈ 29.
        for c in counts {
            assert!((c as f64 - 1200.0).abs() < 5.0 * 29.0, "{counts:?}");
        }
    }

    /// NaN and both infinities count, on every backend (`x − x` did not find them on wgpu),
    /// per row of any rank; a finite extreme does not.
    #[test]
    fn non_finite_entries_are_counted_per_row() {
        let device = crate::testing::test_device();
        let values = [
            0.0,
            f64::NAN,
            3.0,
            f64::from(f32::MAX),
            -1.0,
            2.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        let x = matrix(&values, 4, &device).reshape([2, 2, 2]);
        assert_eq!(non_finite_per_row(x), vec![1.0, 2.0]);
        let clean = matrix(&[1.0, -1e30], 1, &device);
        assert_eq!(non_finite_per_row(clean), vec![0.0, 0.0]);
    }
}
