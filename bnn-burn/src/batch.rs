//! Rows of data: the [`Batch`] trait that gathers examples into minibatches (tensors implement
//! it), the [`Minibatch`] a step sees (its rows' indices and `N`), and [`LocalState`], the
//! host-side state of a model's own optimiser. Base types: every layer above may use them.

use crate::error::DataMismatch;
use crate::integrity::Digest;
use burn::tensor::{Device, Int, Tensor};

/// Rows of data that can be gathered into minibatches (the first axis indexes examples).
pub trait Batch: Clone {
    /// Number of examples.
    fn len(&self) -> usize;
    /// Whether there are no examples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The examples at `indices`, in that order.
    fn rows(&self, indices: Tensor<1, Int>) -> Self;
    /// The same data on `device`.
    fn to(self, device: &Device) -> Self;
    /// The device the data are on.
    fn device(&self) -> Device;
    /// The same data without autodiff tracking (for evaluation).
    fn plain(self) -> Self;
    /// How many NaN or infinite values each example holds, `[N]`, on the data's device, not
    /// read back (`None` for integer data, always finite).
    fn non_finite_counts(&self) -> Option<Tensor<1>> {
        None
    }
    /// The first example that holds NaN or an infinity (`None` when every value is finite).
    fn first_non_finite(&self) -> Option<usize> {
        let counts = crate::host::to_vec(self.non_finite_counts()?);
        crate::host::first_positive(&counts)
    }
    /// Feeds the examples' content (values, shape and type) to `digest`: what binds a saved
    /// training state to its data ([`crate::train::Trainer::with_resume`]).
    fn digest(&self, digest: &mut Digest);

    /// The largest magnitude among the values (`None` for integer data).
    fn max_abs(&self) -> Option<f64> {
        None
    }

    /// Checks the examples as a model's targets of `size` per row: float rows of that width,
    /// integer rows class labels below it. The default accepts anything.
    ///
    /// # Errors
    /// [`DataMismatch::Shape`] for rows of another width, [`DataMismatch::Label`] for a label
    /// outside `0..size` (naming the first such row).
    fn check_as_target(&self, size: usize) -> Result<(), DataMismatch> {
        let _ = size;
        Ok(())
    }
}

macro_rules! tensor_batch {
    ($kind:ty, $check_as_target:ident $(, $non_finite_counts:ident, $max_abs:ident)?) => {
        impl<const D: usize> Batch for Tensor<D, $kind> {
            fn len(&self) -> usize {
                self.dims()[0]
            }
            fn rows(&self, indices: Tensor<1, Int>) -> Self {
                self.clone().select(0, indices)
            }
            fn to(self, device: &Device) -> Self {
                self.to_device(device)
            }
            fn device(&self) -> Device {
                Tensor::device(self)
            }
            fn plain(self) -> Self {
                self.without_autodiff()
            }
            $(fn non_finite_counts(&self) -> Option<Tensor<1>> {
                $non_finite_counts(self.clone())
            })?
            fn digest(&self, digest: &mut Digest) {
                let data = self.clone().into_data();
                digest.text(&format!("{:?} {:?}", data.dtype(), data.shape()));
                digest.update(data.as_bytes());
            }
            fn check_as_target(&self, size: usize) -> Result<(), DataMismatch> {
                $check_as_target(self, size)
            }
            $(fn max_abs(&self) -> Option<f64> {
                $max_abs(self)
            })?
        }
    };
}
tensor_batch!(
    burn::tensor::Float,
    target_width,
    non_finite_counts,
    largest_magnitude
);

/// The largest `|x|` of a float tensor.
fn largest_magnitude<const D: usize>(x: &Tensor<D>) -> Option<f64> {
    crate::host::to_vec(x.clone().abs().max()).first().copied()
}
tensor_batch!(Int, class_labels);

/// Float targets: rows of `width` values.
fn target_width<const D: usize>(y: &Tensor<D>, width: usize) -> Result<(), DataMismatch> {
    let dims = y.dims();
    match D == 2 && dims[1] == width {
        true => Ok(()),
        false => Err(DataMismatch::Shape {
            part: "targets",
            expected: vec![width],
            found: dims[1..].to_vec(),
        }),
    }
}

/// Integer targets: one class label per row, below `classes`.
fn class_labels<const D: usize>(y: &Tensor<D, Int>, classes: usize) -> Result<(), DataMismatch> {
    if D != 1 {
        return Err(DataMismatch::Shape {
            part: "targets",
            expected: vec![],
            found: y.dims()[1..].to_vec(),
        });
    }
    let labels = y
        .clone()
        .into_data()
        .try_into_vec_as::<i64>()
        .unwrap_or_default();
    match labels
        .iter()
        .position(|&l| l < 0 || l as u64 >= classes as u64)
    {
        None => Ok(()),
        Some(row) => Err(DataMismatch::Label {
            row,
            label: labels[row],
            classes,
        }),
    }
}

/// [`crate::host::non_finite_counts`] for [`Batch::non_finite_counts`] (`None` without rows).
fn non_finite_counts<const D: usize>(x: Tensor<D>) -> Option<Tensor<1>> {
    (x.dims()[0] > 0).then(|| crate::host::non_finite_counts(x))
}

/// One minibatch: inputs, targets, the rows they came from and the training-set size `N`
/// (models with per-row latent tables look their rows up by index).
#[derive(Debug, Clone)]
pub struct Minibatch<I, T> {
    /// Inputs.
    pub input: I,
    /// Targets.
    pub target: T,
    /// Row indices into the training data, `[B]`.
    pub rows: Tensor<1, Int>,
    /// Training examples `N`.
    pub n_train: usize,
}

/// The host-side state of a model's own optimiser (e.g. BNN+LV's per-row Adam moments and step
/// counts), as plain vectors.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LocalState {
    /// Floating-point state (moments).
    pub floats: Vec<f32>,
    /// Counters (steps).
    pub counts: Vec<u32>,
}

impl LocalState {
    /// Whether there is no state.
    pub fn is_empty(&self) -> bool {
        self.floats.is_empty() && self.counts.is_empty()
    }
}

/// Sequences of equal or different lengths, padded to one length `T`: values `[B, T, d]` and a
/// mask `[B, T]` (1 at a sequence's steps, 0 after its end). Recurrent bodies read it
/// ([`crate::nets::RecurrentBody`]); a sequence's steps come first, padding after.
#[derive(Debug, Clone)]
pub struct Sequences {
    /// The values, `[B, T, d]` (padding: any finite value).
    pub values: Tensor<3>,
    /// 1 where a sequence has a step, 0 at padding, `[B, T]`.
    pub mask: Tensor<2>,
}

impl Sequences {
    /// Sequences that all run the full length `T` (a mask of ones).
    pub fn full(values: Tensor<3>) -> Self {
        let [b, t, _] = values.dims();
        let mask = Tensor::ones([b, t], &values.device());
        Self { values, mask }
    }

    /// `[B, T, d]`.
    pub fn dims(&self) -> [usize; 3] {
        self.values.dims()
    }
}

impl Batch for Sequences {
    fn len(&self) -> usize {
        self.values.dims()[0]
    }
    fn rows(&self, indices: Tensor<1, Int>) -> Self {
        Self {
            values: self.values.clone().select(0, indices.clone()),
            mask: self.mask.clone().select(0, indices),
        }
    }
    fn to(self, device: &Device) -> Self {
        Self {
            values: self.values.to_device(device),
            mask: self.mask.to_device(device),
        }
    }
    fn device(&self) -> Device {
        self.values.device()
    }
    fn plain(self) -> Self {
        Self {
            values: self.values.without_autodiff(),
            mask: self.mask.without_autodiff(),
        }
    }
    fn non_finite_counts(&self) -> Option<Tensor<1>> {
        non_finite_counts(self.values.clone())
    }
    fn digest(&self, digest: &mut Digest) {
        self.values.digest(digest);
        self.mask.digest(digest);
    }
    fn max_abs(&self) -> Option<f64> {
        largest_magnitude(&self.values)
    }
}
