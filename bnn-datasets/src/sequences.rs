//! Sequences for recurrent models: windows cut from multivariate series, each with its target,
//! padded into batches of one length with a mask of the real steps; a burn `Dataset` and
//! [`SequenceBatcher`] for burn's `DataLoader`. Guide: the book's *Variational RNNs* page.

use crate::DataError;
use crate::dynamics::SdePath;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::{Dataset, DatasetError};
use burn::tensor::{Device, Tensor, TensorData};

/// One sequence of `len` steps of `dim` values (row-major) and its target.
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceItem {
    /// The steps, `[len, dim]` row-major.
    pub steps: Vec<f32>,
    /// Steps in the sequence.
    pub len: usize,
    /// The target (the next step of a forecaster, a label's one-hot, …).
    pub target: Vec<f32>,
}

/// Sequences of `dim` values per step, of any lengths, each with a target of `target_dim`.
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceData {
    /// Values per step.
    pub dim: usize,
    /// Values per target.
    pub target_dim: usize,
    items: Vec<SequenceItem>,
}

impl SequenceData {
    /// No sequences yet.
    pub fn new(dim: usize, target_dim: usize) -> Self {
        Self {
            dim,
            target_dim,
            items: Vec::new(),
        }
    }

    /// Adds a sequence of `steps` (`[len, dim]` row-major, `len ≥ 1`) with its `target`.
    ///
    /// # Errors
    /// [`DataError::Shape`] for steps that are not whole rows of `dim` or a target of another
    /// width; [`DataError::Empty`] for no steps; [`DataError::NonFinite`] naming the sequence
    /// and the value.
    pub fn push(&mut self, steps: &[f64], target: &[f64]) -> Result<(), DataError> {
        let row = self.items.len();
        if steps.is_empty() {
            return Err(DataError::Empty {
                what: format!("sequence {row}"),
            });
        }
        if self.dim == 0 || !steps.len().is_multiple_of(self.dim) || target.len() != self.target_dim
        {
            return Err(DataError::Shape {
                what: format!("sequence {row}"),
                expected: format!(
                    "steps of {} values and a target of {}",
                    self.dim, self.target_dim
                ),
                found: format!("{} values and a target of {}", steps.len(), target.len()),
            });
        }
        let mut values = steps.iter().chain(target);
        if let Some(column) = values.clone().position(|v| !v.is_finite()) {
            return Err(DataError::NonFinite {
                what: "sequence values, then the target".into(),
                row,
                column,
                value: *values.nth(column).expect("the position found"),
            });
        }
        self.items.push(SequenceItem {
            steps: steps.iter().map(|&v| v as f32).collect(),
            len: steps.len() / self.dim,
            target: target.iter().map(|&v| v as f32).collect(),
        });
        Ok(())
    }

    /// Next-step windows of `paths`: for every end `e` from `min_len` on, every `stride`
    /// steps, the window of the (at most `max_len`) states before `e` and the state at `e` as
    /// its target. The first windows of a path are shorter than `max_len`: sequences of
    /// different lengths.
    ///
    /// # Errors
    /// [`DataError::Shape`] for `min_len` 0 or above `max_len`, `stride` 0, or paths of
    /// different dimensions; [`DataError::Empty`] when no path is long enough.
    pub fn next_step(
        paths: &[SdePath],
        min_len: usize,
        max_len: usize,
        stride: usize,
    ) -> Result<Self, DataError> {
        if min_len == 0 || min_len > max_len || stride == 0 {
            return Err(DataError::Shape {
                what: "next-step windows".into(),
                expected: "1 <= min_len <= max_len and a positive stride".into(),
                found: format!("min_len {min_len}, max_len {max_len}, stride {stride}"),
            });
        }
        let dim = paths.first().map_or(0, |p| p.dim);
        let mut data = Self::new(dim, dim);
        for (i, path) in paths.iter().enumerate() {
            if path.dim != dim {
                return Err(DataError::Shape {
                    what: format!("path {i}"),
                    expected: format!("{dim} dimensions"),
                    found: path.dim.to_string(),
                });
            }
            for end in (min_len..path.len()).step_by(stride) {
                let start = end.saturating_sub(max_len);
                data.push(&path.states[start * dim..end * dim], path.state(end))?;
            }
        }
        if data.is_empty() {
            return Err(DataError::Empty {
                what: format!("next-step windows of at least {min_len} steps"),
            });
        }
        Ok(data)
    }

    /// Sequences held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Sequence `i`.
    pub fn item(&self, i: usize) -> &SequenceItem {
        &self.items[i]
    }

    /// Every sequence as one padded batch.
    pub fn batch(&self, device: &Device) -> SequenceBatch {
        SequenceBatcher.batch(self.items.clone(), device)
    }
}

impl Dataset<SequenceItem> for SequenceData {
    fn get(&self, index: usize) -> Result<SequenceItem, DatasetError> {
        self.items.get(index).cloned().ok_or_else(|| {
            DatasetError::new(DataError::OutOfRange {
                what: "sequence index".into(),
                expected: format!("0..{}", self.len()),
                found: index.to_string(),
            })
        })
    }

    fn len(&self) -> usize {
        self.items.len()
    }
}

/// Padded sequences: `values [B, T, d]` (zeros after a sequence's end), `mask [B, T]` (1 at a
/// sequence's steps, 0 at padding) with `T` the longest, and `targets [B, k]`. bnn-burn's
/// recurrent bodies take `Sequences { values, mask }`.
#[derive(Debug, Clone)]
pub struct SequenceBatch {
    /// The steps, `[B, T, d]`.
    pub values: Tensor<3>,
    /// 1 at steps, 0 at padding, `[B, T]`.
    pub mask: Tensor<2>,
    /// The targets, `[B, k]`.
    pub targets: Tensor<2>,
}

/// Pads [`SequenceItem`]s to the longest among them.
#[derive(Debug, Clone, Copy, Default)]
pub struct SequenceBatcher;

impl Batcher<SequenceItem, SequenceBatch> for SequenceBatcher {
    /// # Panics
    /// On items of different widths (a [`SequenceData`] holds only one).
    fn batch(&self, items: Vec<SequenceItem>, device: &Device) -> SequenceBatch {
        let b = items.len();
        let t = items.iter().map(|i| i.len).max().unwrap_or(0);
        let d = items.first().map_or(0, |i| i.steps.len() / i.len.max(1));
        let k = items.first().map_or(0, |i| i.target.len());
        let mut values = vec![0f32; b * t * d];
        let mut mask = vec![0f32; b * t];
        let mut targets: Vec<f32> = Vec::with_capacity(b * k);
        for (row, item) in items.iter().enumerate() {
            assert!(
                item.steps.len() == item.len * d && item.target.len() == k,
                "SequenceBatcher: items of widths ({d}, {k}) and ({}, {}) in one batch",
                item.steps.len() / item.len.max(1),
                item.target.len()
            );
            values[row * t * d..][..item.len * d].copy_from_slice(&item.steps);
            mask[row * t..][..item.len].fill(1.0);
            targets.extend(&item.target);
        }
        SequenceBatch {
            values: Tensor::from_data(TensorData::new(values, [b, t, d]), device),
            mask: Tensor::from_data(TensorData::new(mask, [b, t]), device),
            targets: Tensor::from_data(TensorData::new(targets, [b, k]), device),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn to_vec<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().try_into_vec_as::<f32>().unwrap()
    }

    fn path(len: usize) -> SdePath {
        SdePath {
            times: (0..len).map(|k| k as f64).collect(),
            states: (0..2 * len).map(|v| v as f64).collect(),
            dim: 2,
        }
    }

    #[test]
    fn next_step_windows_grow_to_their_length_then_slide() {
        let data = SequenceData::next_step(&[path(6)], 2, 3, 1).unwrap();
        // Ends 2, 3, 4, 5: windows [0, 2), [0, 3), [1, 4), [2, 5).
        assert_eq!(data.len(), 4);
        let lens: Vec<usize> = (0..4).map(|i| data.item(i).len).collect();
        assert_eq!(lens, [2, 3, 3, 3]);
        assert_eq!(data.item(2).steps, [2., 3., 4., 5., 6., 7.]);
        assert_eq!(data.item(2).target, [8., 9.]);
        let strided = SequenceData::next_step(&[path(6), path(4)], 1, 2, 2).unwrap();
        assert_eq!(strided.len(), 3 + 2);
    }

    #[test]
    fn a_batch_pads_to_the_longest_and_masks_the_padding() {
        let device = Default::default();
        let data = SequenceData::next_step(&[path(5)], 1, 3, 2).unwrap();
        // Ends 1 and 3: lengths 1 and 3.
        let batch = data.batch(&device);
        assert_eq!(batch.values.dims(), [2, 3, 2]);
        assert_eq!(to_vec(batch.mask), [1., 0., 0., 1., 1., 1.]);
        assert_eq!(
            to_vec(batch.values),
            [0., 1., 0., 0., 0., 0., 0., 1., 2., 3., 4., 5.]
        );
        assert_eq!(to_vec(batch.targets), [2., 3., 6., 7.]);
    }

    #[test]
    fn bad_sequences_and_settings_are_named() {
        let mut data = SequenceData::new(2, 1);
        let err = data.push(&[1., 2., 3.], &[0.]).unwrap_err();
        assert!(err.to_string().contains("sequence 0"), "{err}");
        let err = data.push(&[], &[0.]).unwrap_err();
        assert!(err.to_string().contains("sequence 0"), "{err}");
        data.push(&[1., 2.], &[0.]).unwrap();
        let err = data.push(&[1., f64::NAN], &[0.]).unwrap_err();
        assert!(
            matches!(
                err,
                DataError::NonFinite {
                    row: 1,
                    column: 1,
                    ..
                }
            ),
            "{err}"
        );
        let err = SequenceData::next_step(&[path(4)], 0, 3, 1).unwrap_err();
        assert!(err.to_string().contains("min_len 0"), "{err}");
        let err = SequenceData::next_step(&[path(2)], 3, 3, 1).unwrap_err();
        assert!(err.to_string().contains("at least 3"), "{err}");
        assert!(data.get(5).is_err());
    }
}
