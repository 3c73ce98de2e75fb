//! What the training loop trains on: tensors, or any burn `Dataset` with a `Batcher` (the
//! library's `RegressionData`, `ImageSet`, `ClassificationData` among them), gathered into
//! minibatches that carry their row indices and the training-set size.

use super::TrainError;
use crate::error::DataMismatch;
use crate::integrity::Digest;
use crate::objective::{StepRequest, StepTerms};
use crate::posterior::Unsupported;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::Dataset;
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor};
use std::marker::PhantomData;

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
    /// The same data without autodiff tracking (for evaluation).
    fn plain(self) -> Self;
    /// The first example that holds NaN or an infinity (`None` when every value is finite;
    /// integer data always is).
    fn first_non_finite(&self) -> Option<usize> {
        None
    }
    /// Feeds the examples' content (values, shape and type) to `digest`: what binds a saved
    /// training state to its data ([`super::Trainer::with_resume`]).
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
    ($kind:ty, $check_as_target:ident $(, $first_non_finite:ident, $max_abs:ident)?) => {
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
            fn plain(self) -> Self {
                self.without_autodiff()
            }
            $(fn first_non_finite(&self) -> Option<usize> {
                $first_non_finite(self)
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
    first_non_finite_row,
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

/// The first row (index on axis 0) of `x` with a NaN or an infinity.
fn first_non_finite_row<const D: usize>(x: &Tensor<D>) -> Option<usize> {
    crate::host::non_finite_per_row(x.clone())
        .iter()
        .position(|&count| count > 0.0)
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

/// What the training loop needs from a model: its terms for one minibatch.
pub trait Model: Module + 'static {
    /// Inputs.
    type Input: Batch;
    /// Targets.
    type Target: Batch;

    /// Checks that `input` and `target` fit the model (their widths, class labels, rows):
    /// training calls it before the first step. The default accepts anything.
    ///
    /// # Errors
    /// The first mismatch, naming the part and the row where there is one.
    fn check_data(&self, input: &Self::Input, target: &Self::Target) -> Result<(), DataMismatch> {
        let _ = (input, target);
        Ok(())
    }

    /// The log-likelihoods, KL and any requested extra terms of one minibatch.
    ///
    /// # Errors
    /// When the model cannot compute a requested term (e.g. `ln q` of a point estimate).
    fn step(
        &self,
        batch: Minibatch<Self::Input, Self::Target>,
        request: StepRequest,
    ) -> Result<StepTerms, Unsupported>;

    /// Parameters the model updates itself instead of the optimiser, after each step's backward
    /// pass (BNN+LV's per-row latents: [`crate::latent::LatentTable::sparse_step`]); it takes
    /// their gradients out of `grads`, so the optimiser leaves them alone. `rows` are the
    /// minibatch's rows and `learning_rate` the configured one. The default: nothing.
    fn local_update(
        self,
        _grads: &mut burn::optim::GradientsParams,
        _rows: &[usize],
        _learning_rate: f64,
    ) -> Self {
        self
    }

    /// The state of [`Model::local_update`]'s own optimiser, saved with a training state
    /// between epochs ([`super::Trainer::with_resume`]). The default: none.
    fn local_state(&self) -> LocalState {
        LocalState::default()
    }

    /// The model with a state from [`Model::local_state`] restored.
    ///
    /// # Errors
    /// When the state does not fit the model (the default accepts only an empty state).
    fn with_local_state(self, state: LocalState) -> Result<Self, String>
    where
        Self: Sized,
    {
        match state.is_empty() {
            true => Ok(self),
            false => Err("the model keeps no local optimiser state, but one was saved".into()),
        }
    }
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

/// A training set.
pub trait TrainData {
    /// Inputs of a minibatch.
    type Input: Batch;
    /// Targets of a minibatch.
    type Target: Batch;

    /// Number of examples.
    ///
    /// # Errors
    /// When inputs and targets disagree on it.
    fn len(&self) -> Result<usize, TrainError>;

    /// Whether there are no examples (or the parts disagree on their number).
    fn is_empty(&self) -> bool {
        self.len().is_ok_and(|n| n == 0)
    }

    /// The data on the training device (called once, before the first step).
    fn into_device(self, device: &Device) -> Self
    where
        Self: Sized;

    /// All examples at once, where they are held as tensors (checked against the model once
    /// before training, [`Model::check_data`]); `None` for data read lazily, whose minibatches
    /// are checked one by one.
    fn whole(&self) -> Option<(Self::Input, Self::Target)> {
        None
    }

    /// The first example whose inputs or targets hold NaN or an infinity, as the part's name
    /// (`"inputs"` or `"targets"`) and its row, checked once before the first step. `None`
    /// when all are finite, and for data read lazily (a [`DatasetSource`]: the loss of every
    /// step is still checked).
    fn first_non_finite(&self) -> Option<(&'static str, usize)> {
        None
    }

    /// The examples at `rows` (also given as the device tensor `index`), on `device`.
    ///
    /// # Errors
    /// When an example cannot be read.
    fn batch(
        &self,
        rows: &[usize],
        index: &Tensor<1, Int>,
        device: &Device,
    ) -> Result<(Self::Input, Self::Target), TrainError>;

    /// A digest of every example's content, as 16 hex digits: what binds a saved training
    /// state to its data ([`super::Trainer::with_resume`]). The default reads the data once, in
    /// batches of [`DIGEST_CHUNK`] rows.
    ///
    /// # Errors
    /// When an example cannot be read.
    fn digest(&self, device: &Device) -> Result<String, TrainError> {
        let n = self.len()?;
        let mut digest = Digest::new();
        digest.number(n as u64);
        let rows: Vec<usize> = (0..n).collect();
        for chunk in rows.chunks(DIGEST_CHUNK) {
            let index = crate::host::labels(chunk, device);
            let (input, target) = self.batch(chunk, &index, device)?;
            input.digest(&mut digest);
            target.digest(&mut digest);
        }
        Ok(digest.hex())
    }
}

/// Rows per batch of [`TrainData::digest`]'s default.
pub const DIGEST_CHUNK: usize = 1024;

impl<I: Batch, T: Batch> TrainData for (I, T) {
    type Input = I;
    type Target = T;

    fn len(&self) -> Result<usize, TrainError> {
        let (inputs, targets) = (self.0.len(), self.1.len());
        if inputs != targets {
            return Err(TrainError::LengthMismatch { inputs, targets });
        }
        Ok(inputs)
    }

    fn into_device(self, device: &Device) -> Self {
        (self.0.to(device), self.1.to(device))
    }

    fn whole(&self) -> Option<(I, T)> {
        Some((self.0.clone(), self.1.clone()))
    }

    fn first_non_finite(&self) -> Option<(&'static str, usize)> {
        let inputs = self.0.first_non_finite().map(|row| ("inputs", row));
        inputs.or_else(|| self.1.first_non_finite().map(|row| ("targets", row)))
    }

    fn batch(&self, _: &[usize], index: &Tensor<1, Int>, _: &Device) -> Result<(I, T), TrainError> {
        Ok((self.0.rows(index.clone()), self.1.rows(index.clone())))
    }

    fn digest(&self, _: &Device) -> Result<String, TrainError> {
        let mut digest = Digest::new();
        digest.number(self.len()? as u64);
        self.0.digest(&mut digest);
        self.1.digest(&mut digest);
        Ok(digest.hex())
    }
}

/// A burn [`Dataset`] and a [`Batcher`] whose batches convert into `(input, target)`: e.g.
/// `DatasetSource::new(regression_data, RegressionBatcher)` or
/// `DatasetSource::new(images, ImageBatcher::new(Normalization::mnist()))`.
pub struct DatasetSource<Ds, Bt, Item, Out, I, T> {
    dataset: Ds,
    batcher: Bt,
    types: Types<Item, Out, I, T>,
}

/// The item, batch, input and target types a [`DatasetSource`] converts between.
type Types<Item, Out, I, T> = PhantomData<fn() -> (Item, Out, I, T)>;

impl<Ds, Bt, Item, Out, I, T> DatasetSource<Ds, Bt, Item, Out, I, T>
where
    Ds: Dataset<Item>,
    Bt: Batcher<Item, Out>,
    Out: Into<(I, T)>,
{
    /// The source.
    pub fn new(dataset: Ds, batcher: Bt) -> Self {
        Self {
            dataset,
            batcher,
            types: PhantomData,
        }
    }
}

impl<Ds, Bt, Item, Out, I, T> TrainData for DatasetSource<Ds, Bt, Item, Out, I, T>
where
    Ds: Dataset<Item>,
    Bt: Batcher<Item, Out>,
    Out: Into<(I, T)>,
    I: Batch,
    T: Batch,
{
    type Input = I;
    type Target = T;

    fn len(&self) -> Result<usize, TrainError> {
        Ok(self.dataset.len())
    }

    fn into_device(self, _device: &Device) -> Self {
        self
    }

    fn batch(
        &self,
        rows: &[usize],
        _: &Tensor<1, Int>,
        device: &Device,
    ) -> Result<(I, T), TrainError> {
        let items = self.dataset.get_many(rows.to_vec()).map_err(|e| {
            let shown: Vec<_> = rows.iter().take(8).collect();
            let more = if rows.len() > 8 { ", …" } else { "" };
            TrainError::Data(format!("one of the dataset rows {shown:?}{more}: {e}"))
        })?;
        Ok(self.batcher.batch(items, device).into())
    }
}
