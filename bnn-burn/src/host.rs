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
pub fn to_vec<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    t.into_data()
        .try_into_vec_as::<f64>()
        .expect("float tensor converts to f64")
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
