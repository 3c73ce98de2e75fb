//! The tables and image sets as burn `Dataset`s, with batchers for burn's `DataLoader`
//! ([`ImageBatcher`] normalises `u8` images per batch). A loop over MNIST with burn's
//! `DataLoaderBuilder`: the book's *Data* page.

use crate::images::{ImageSet, Normalization, extend_normalized};
use crate::table::{ClassificationData, RegressionData};
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::{Dataset, DatasetError};
use burn::tensor::{Device, Int, Tensor, TensorData};

fn out_of_range(index: usize, len: usize) -> DatasetError {
    DatasetError::new(crate::DataError::OutOfRange {
        what: "dataset index".into(),
        expected: format!("0..{len}"),
        found: index.to_string(),
    })
}

/// One regression row as `f32`.
#[derive(Debug, Clone, PartialEq)]
pub struct RegressionItem {
    /// Inputs.
    pub x: Vec<f32>,
    /// Targets.
    pub y: Vec<f32>,
}

impl Dataset<RegressionItem> for RegressionData {
    fn get(&self, index: usize) -> Result<RegressionItem, DatasetError> {
        if index >= self.len() {
            return Err(out_of_range(index, self.len()));
        }
        let (x, y) = self.row(index);
        Ok(RegressionItem {
            x: x.iter().map(|&v| v as f32).collect(),
            y: y.iter().map(|&v| v as f32).collect(),
        })
    }

    fn len(&self) -> usize {
        RegressionData::len(self)
    }
}

/// A batch of regression rows: `x` is `[B, n_features]`, `y` is `[B, n_targets]`.
#[derive(Debug, Clone)]
pub struct RegressionBatch {
    /// Inputs.
    pub x: Tensor<2>,
    /// Targets.
    pub y: Tensor<2>,
}

/// `(x, y)`: what a training loop over a burn `Dataset` takes (bnn-burn's `DatasetSource`).
impl From<RegressionBatch> for (Tensor<2>, Tensor<2>) {
    fn from(batch: RegressionBatch) -> Self {
        (batch.x, batch.y)
    }
}

/// Stacks [`RegressionItem`]s into a [`RegressionBatch`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RegressionBatcher;

impl Batcher<RegressionItem, RegressionBatch> for RegressionBatcher {
    fn batch(&self, items: Vec<RegressionItem>, device: &Device) -> RegressionBatch {
        let b = items.len();
        let (dx, dy) = items.first().map_or((0, 0), |i| (i.x.len(), i.y.len()));
        let mut x = Vec::with_capacity(b * dx);
        let mut y = Vec::with_capacity(b * dy);
        for item in items {
            assert!(
                item.x.len() == dx && item.y.len() == dy,
                "RegressionBatcher: items of widths ({}, {}) and ({dx}, {dy}) in one batch",
                item.x.len(),
                item.y.len()
            );
            x.extend(item.x);
            y.extend(item.y);
        }
        RegressionBatch {
            x: Tensor::from_data(TensorData::new(x, [b, dx]), device),
            y: Tensor::from_data(TensorData::new(y, [b, dy]), device),
        }
    }
}

/// One classification row.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassificationItem {
    /// Inputs.
    pub x: Vec<f32>,
    /// Class.
    pub label: usize,
}

impl Dataset<ClassificationItem> for ClassificationData {
    fn get(&self, index: usize) -> Result<ClassificationItem, DatasetError> {
        if index >= self.len() {
            return Err(out_of_range(index, self.len()));
        }
        Ok(ClassificationItem {
            x: self.row(index).iter().map(|&v| v as f32).collect(),
            label: self.labels[index],
        })
    }

    fn len(&self) -> usize {
        ClassificationData::len(self)
    }
}

/// A batch of classification rows: `x` is `[B, n_features]`, `labels` is `[B]`.
#[derive(Debug, Clone)]
pub struct ClassificationBatch {
    /// Inputs.
    pub x: Tensor<2>,
    /// Classes.
    pub labels: Tensor<1, Int>,
}

/// `(x, labels)`.
impl From<ClassificationBatch> for (Tensor<2>, Tensor<1, Int>) {
    fn from(batch: ClassificationBatch) -> Self {
        (batch.x, batch.labels)
    }
}

/// Stacks [`ClassificationItem`]s into a [`ClassificationBatch`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ClassificationBatcher;

impl Batcher<ClassificationItem, ClassificationBatch> for ClassificationBatcher {
    fn batch(&self, items: Vec<ClassificationItem>, device: &Device) -> ClassificationBatch {
        let b = items.len();
        let d = items.first().map_or(0, |i| i.x.len());
        let mut x = Vec::with_capacity(b * d);
        let mut labels = Vec::with_capacity(b);
        for item in items {
            assert_eq!(item.x.len(), d, "ClassificationBatcher: mixed input widths");
            x.extend(item.x);
            labels.push(item.label as i64);
        }
        ClassificationBatch {
            x: Tensor::from_data(TensorData::new(x, [b, d]), device),
            labels: Tensor::from_data(TensorData::new(labels, [b]), device),
        }
    }
}

/// One image, still `u8`, with its shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageItem {
    /// Pixels `[C, H, W]` row-major.
    pub pixels: Vec<u8>,
    /// `[C, H, W]`.
    pub shape: [usize; 3],
    /// Class.
    pub label: u8,
}

impl Dataset<ImageItem> for ImageSet {
    fn get(&self, index: usize) -> Result<ImageItem, DatasetError> {
        if index >= self.len() {
            return Err(out_of_range(index, self.len()));
        }
        Ok(ImageItem {
            pixels: self.image(index).to_vec(),
            shape: self.shape(),
            label: self.labels[index],
        })
    }

    fn len(&self) -> usize {
        ImageSet::len(self)
    }
}

/// A batch of normalised images `[B, C, H, W]` with labels `[B]`.
#[derive(Debug, Clone)]
pub struct ImageBatch {
    /// Normalised pixels.
    pub images: Tensor<4>,
    /// Classes.
    pub labels: Tensor<1, Int>,
}

/// `(images, labels)`.
impl From<ImageBatch> for (Tensor<4>, Tensor<1, Int>) {
    fn from(batch: ImageBatch) -> Self {
        (batch.images, batch.labels)
    }
}

/// Turns `u8` [`ImageItem`]s into a normalised `f32` [`ImageBatch`]: `(p/255 − mean_c)/std_c`.
#[derive(Debug, Clone)]
pub struct ImageBatcher {
    tables: Vec<[f32; 256]>,
}

impl ImageBatcher {
    /// A batcher applying `norm`.
    pub fn new(norm: Normalization) -> Self {
        Self {
            tables: norm.tables(),
        }
    }
}

impl Batcher<ImageItem, ImageBatch> for ImageBatcher {
    fn batch(&self, items: Vec<ImageItem>, device: &Device) -> ImageBatch {
        let b = items.len();
        let shape = items.first().map_or([self.tables.len(), 0, 0], |i| i.shape);
        assert_eq!(
            shape[0],
            self.tables.len(),
            "ImageBatcher: a {}-channel normalisation for {}-channel images",
            self.tables.len(),
            shape[0]
        );
        let plane = shape[1] * shape[2];
        let mut x = Vec::with_capacity(b * shape.iter().product::<usize>());
        let mut labels = Vec::with_capacity(b);
        for item in items {
            assert_eq!(item.shape, shape, "ImageBatcher: mixed image shapes");
            extend_normalized(&mut x, &item.pixels, plane, &self.tables);
            labels.push(item.label as i64);
        }
        ImageBatch {
            images: Tensor::from_data(
                TensorData::new(x, [b, shape[0], shape[1], shape[2]]),
                device,
            ),
            labels: Tensor::from_data(TensorData::new(labels, [b]), device),
        }
    }
}

impl ImageSet {
    /// The images at `indices` as a normalised batch, without going through a `DataLoader`.
    ///
    /// # Panics
    /// If an index is past the end or `norm` has another channel count.
    pub fn batch(&self, indices: &[usize], norm: &Normalization, device: &Device) -> ImageBatch {
        let x = self.normalized(indices, norm);
        let labels: Vec<i64> = indices.iter().map(|&i| self.labels[i] as i64).collect();
        ImageBatch {
            images: Tensor::from_data(
                TensorData::new(x, [indices.len(), self.channels, self.height, self.width]),
                device,
            ),
            labels: Tensor::from_data(TensorData::new(labels, [indices.len()]), device),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::data::dataloader::DataLoaderBuilder;

    fn device() -> Device {
        bnn_burn::device::device()
    }

    fn to_f32(t: Tensor<4>) -> Vec<f32> {
        t.into_data().try_into_vec_as::<f32>().unwrap()
    }

    #[test]
    fn regression_rows_flow_through_a_shuffled_data_loader() {
        let x: Vec<f64> = (0..20).map(|v| v as f64).collect();
        let y: Vec<f64> = (0..10).map(|v| 100.0 + v as f64).collect();
        let data = RegressionData::new(x, y, 2, 1).unwrap();
        assert!(Dataset::<RegressionItem>::get(&data, 10).is_err());
        let loader = DataLoaderBuilder::new(RegressionBatcher)
            .batch_size(4)
            .shuffle(3)
            .set_device(device())
            .build(data);
        let mut seen = Vec::new();
        let mut sizes = Vec::new();
        for batch in loader.iter() {
            let batch = batch.unwrap();
            let [b, d] = batch.x.dims();
            assert_eq!(d, 2);
            sizes.push(b);
            let xs = batch.x.into_data().try_into_vec_as::<f32>().unwrap();
            let ys = batch.y.into_data().try_into_vec_as::<f32>().unwrap();
            for (row, y) in xs.chunks(2).zip(ys) {
                // Row r holds (2r, 2r + 1) and target 100 + r: rows stay intact.
                let r = row[0] / 2.0;
                assert_eq!((row[1], y), (2.0 * r + 1.0, 100.0 + r));
                seen.push(r as usize);
            }
        }
        sizes.sort();
        assert_eq!(sizes, vec![2, 4, 4]);
        seen.sort();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn images_stay_u8_and_are_normalised_per_batch() {
        let set = ImageSet::new(
            (0..3 * 2 * 2 * 2).map(|v| (v * 10) as u8).collect(),
            vec![1, 4, 9],
            [2, 2, 2],
            10,
        )
        .unwrap();
        let norm = Normalization::new(vec![0.1, 0.2], vec![0.5, 0.25]).unwrap();
        let loader = DataLoaderBuilder::new(ImageBatcher::new(norm.clone()))
            .batch_size(3)
            .set_device(device())
            .build(set.clone());
        let batch = loader.iter().next().unwrap().unwrap();
        assert_eq!(batch.images.dims(), [3, 2, 2, 2]);
        assert_eq!(
            batch.labels.into_data().try_into_vec_as::<i64>().unwrap(),
            vec![1, 4, 9]
        );
        let got = to_f32(batch.images);
        // Pixel 5 is image 0, channel 1, value 50.
        assert!((got[5] - (50.0 / 255.0 - 0.2) / 0.25).abs() < 1e-6);
        let direct = set.batch(&[0, 1, 2], &norm, &device());
        assert_eq!(to_f32(direct.images), got);
        let c = ClassificationData::new(vec![1.0, 2.0, 3.0, 4.0], vec![0, 1], 2, 2).unwrap();
        let cb = ClassificationBatcher.batch(
            vec![
                Dataset::<ClassificationItem>::get(&c, 1).unwrap(),
                Dataset::<ClassificationItem>::get(&c, 0).unwrap(),
            ],
            &device(),
        );
        assert_eq!(
            cb.x.into_data().try_into_vec_as::<f32>().unwrap(),
            vec![3.0, 4.0, 1.0, 2.0]
        );
        assert_eq!(
            cb.labels.into_data().try_into_vec_as::<i64>().unwrap(),
            vec![1, 0]
        );
    }
}
