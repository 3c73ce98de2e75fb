//! What the training loop trains on: tensors, or any burn `Dataset` with a `Batcher` (the
//! library's `RegressionData`, `ImageSet`, `ClassificationData` among them), gathered into
//! minibatches that carry their row indices and the training-set size.

use super::TrainError;
pub use crate::batch::{Batch, LocalState, Minibatch};
use crate::integrity::Digest;
pub use crate::step::Model;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::Dataset;
use burn::tensor::{Device, Int, Tensor};
use std::marker::PhantomData;

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

/// `data` on `device`, checked before any work: no value that is NaN or infinite (the error
/// names the part and the row), and widths, class labels and rows that fit `model` where the
/// data are tensors. Returns whether the data are read lazily, so that each minibatch must be
/// checked against the model as it is read.
///
/// # Errors
/// [`TrainError::NonFiniteData`], or the model's [`Model::check_data`] error.
pub(crate) fn checked_on<M, D>(data: D, model: &M, device: &Device) -> Result<(D, bool), TrainError>
where
    M: Model,
    D: TrainData<Input = M::Input, Target = M::Target>,
{
    let data = data.into_device(device);
    if let Some((part, row)) = data.first_non_finite() {
        return Err(TrainError::NonFiniteData { part, row });
    }
    let whole = data.whole();
    if let Some((x, y)) = &whole {
        model.check_data(x, y)?;
    }
    let lazy = whole.is_none();
    drop(whole);
    Ok((data, lazy))
}

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
