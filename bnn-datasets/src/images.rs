//! Image classification sets held as `u8` pixels (channel-major `[C, H, W]` per image) with
//! `u8` labels; they become normalised `f32` only per batch: `(p/255 − mean_c) / std_c`.
//!
//! MNIST and Fashion-MNIST are read from the IDX files of their publishers (raw or gzip).
//! Transforms for the papers' experiments: class subsets, the first `k` images, rotation by an
//! angle (Depeweg 2019 §6.1; the rotation experiments of the evidential chapter), central
//! occlusion, label noise between two classes and class subsampling (Depeweg §6.1).

use crate::error::DataError;
use crate::idx::{IdxArray, read_idx};
use crate::root::DataRoot;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::path::{Path, PathBuf};

/// Per-channel normalisation `(p/255 − mean_c) / std_c`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Normalization {
    /// Channel means on the `[0, 1]` pixel scale.
    pub mean: Vec<f32>,
    /// Channel standard deviations on the `[0, 1]` pixel scale, positive.
    pub std: Vec<f32>,
}

impl Normalization {
    /// A normalisation with one mean and one std per channel.
    ///
    /// # Errors
    /// [`DataError::Shape`] when the lengths differ or are 0, [`DataError::OutOfRange`] for a
    /// non-finite mean or a std that is not finite and positive.
    pub fn new(mean: Vec<f32>, std: Vec<f32>) -> Result<Self, DataError> {
        if mean.is_empty() || mean.len() != std.len() {
            return Err(DataError::Shape {
                what: "Normalization".into(),
                expected: "one mean and one std per channel".into(),
                found: format!("{} means and {} stds", mean.len(), std.len()),
            });
        }
        if let Some(m) = mean.iter().find(|m| !m.is_finite()) {
            return Err(DataError::OutOfRange {
                what: "Normalization mean".into(),
                expected: "a finite number".into(),
                found: m.to_string(),
            });
        }
        if let Some(s) = std.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
            return Err(DataError::OutOfRange {
                what: "Normalization std".into(),
                expected: "a finite positive number".into(),
                found: s.to_string(),
            });
        }
        Ok(Self { mean, std })
    }

    /// MNIST: mean 0.1307, std 0.3081 (the constants of the PyTorch examples used by the
    /// papers' code).
    pub fn mnist() -> Self {
        Self {
            mean: vec![0.1307],
            std: vec![0.3081],
        }
    }

    /// Fashion-MNIST: mean 0.28604, std 0.35302 (Haußmann 2021, BEDL code).
    pub fn fashion_mnist() -> Self {
        Self {
            mean: vec![0.28604],
            std: vec![0.35302],
        }
    }

    /// CIFAR-5 (classes 0–4 of CIFAR-10): means (0.4905, 0.4854, 0.4514), stds
    /// (0.2454, 0.2415, 0.2620) (Haußmann 2021, BEDL code).
    pub fn cifar5() -> Self {
        Self {
            mean: vec![0.4905, 0.4854, 0.4514],
            std: vec![0.2454, 0.2415, 0.2620],
        }
    }

    /// Pixels in `[0, 1]`, no centring.
    pub fn unit(channels: usize) -> Self {
        Self {
            mean: vec![0.0; channels],
            std: vec![1.0; channels],
        }
    }

    /// Number of channels.
    pub fn channels(&self) -> usize {
        self.mean.len()
    }

    /// A 256-entry lookup table per channel: entry `p` is `(p/255 − mean_c)/std_c`.
    pub(crate) fn tables(&self) -> Vec<[f32; 256]> {
        self.mean
            .iter()
            .zip(&self.std)
            .map(|(&m, &s)| std::array::from_fn(|p| (p as f32 / 255.0 - m) / s))
            .collect()
    }
}

/// Train or test part of a data set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Split {
    /// The training part.
    Train,
    /// The test part.
    Test,
}

/// Images of one shape with their labels.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageSet {
    /// Pixels, image after image, each `[channels, height, width]` row-major.
    pub pixels: Vec<u8>,
    /// One label per image.
    pub labels: Vec<u8>,
    /// Channels per image.
    pub channels: usize,
    /// Rows per image.
    pub height: usize,
    /// Columns per image.
    pub width: usize,
    /// Number of classes of the labels' alphabet (labels are below it).
    pub n_classes: usize,
}

impl ImageSet {
    /// An image set from its parts.
    ///
    /// # Errors
    /// [`DataError::Shape`] when the pixel count is not `labels.len() · C · H · W` or a size
    /// is 0; [`DataError::OutOfRange`] for a label not below `n_classes`.
    pub fn new(
        pixels: Vec<u8>,
        labels: Vec<u8>,
        [channels, height, width]: [usize; 3],
        n_classes: usize,
    ) -> Result<Self, DataError> {
        let size = channels * height * width;
        if size == 0 || pixels.len() != labels.len() * size {
            return Err(DataError::Shape {
                what: "ImageSet".into(),
                expected: format!(
                    "{} images of {channels}×{height}×{width} = {} bytes",
                    labels.len(),
                    labels.len() * size
                ),
                found: format!("{} bytes", pixels.len()),
            });
        }
        if let Some(&bad) = labels.iter().find(|&&l| l as usize >= n_classes) {
            return Err(DataError::OutOfRange {
                what: "image label".into(),
                expected: format!("0..{n_classes}"),
                found: bad.to_string(),
            });
        }
        Ok(Self {
            pixels,
            labels,
            channels,
            height,
            width,
            n_classes,
        })
    }

    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no images.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Bytes per image, `C · H · W`.
    pub fn image_size(&self) -> usize {
        self.channels * self.height * self.width
    }

    /// `[C, H, W]`.
    pub fn shape(&self) -> [usize; 3] {
        [self.channels, self.height, self.width]
    }

    /// Pixels of image `i`.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn image(&self, i: usize) -> &[u8] {
        let s = self.image_size();
        &self.pixels[i * s..(i + 1) * s]
    }

    /// The images at `indices`, in that order.
    ///
    /// # Panics
    /// If an index is past the end (both numbers are named).
    pub fn select(&self, indices: &[usize]) -> Self {
        let s = self.image_size();
        let mut pixels = Vec::with_capacity(indices.len() * s);
        let mut labels = Vec::with_capacity(indices.len());
        for &i in indices {
            assert!(i < self.len(), "image index {i} >= {}", self.len());
            pixels.extend_from_slice(self.image(i));
            labels.push(self.labels[i]);
        }
        Self {
            pixels,
            labels,
            ..*self
        }
    }

    /// The first `k` images (all of them when `k >= len()`).
    pub fn first(&self, k: usize) -> Self {
        let k = k.min(self.len());
        Self {
            pixels: self.pixels[..k * self.image_size()].to_vec(),
            labels: self.labels[..k].to_vec(),
            ..*self
        }
    }

    /// The images whose label is in `classes` (labels are kept as they are).
    pub fn with_classes(&self, classes: &[u8]) -> Self {
        let keep: Vec<usize> = (0..self.len())
            .filter(|&i| classes.contains(&self.labels[i]))
            .collect();
        self.select(&keep)
    }

    /// Every image rotated by `degrees` counter-clockwise (as displayed, rows downwards) about
    /// its centre, with bilinear interpolation and black outside the source. Multiples of 90°
    /// are exact permutations of the pixels.
    pub fn rotated(&self, degrees: f64) -> Self {
        let (h, w) = (self.height, self.width);
        let (sin, cos) = degrees.to_radians().sin_cos();
        // Snap tiny trigonometric residue so multiples of 90° hit pixel centres exactly.
        let snap = |v: f64| if v.abs() < 1e-12 { 0.0 } else { v };
        let (sin, cos) = (snap(sin), snap(cos));
        let (cy, cx) = ((h as f64 - 1.0) / 2.0, (w as f64 - 1.0) / 2.0);
        // For each output pixel, its source position and bilinear weights, shared by all images.
        let mut taps: Vec<[(usize, f64); 4]> = Vec::with_capacity(h * w);
        for y in 0..h {
            for x in 0..w {
                let (dx, dy) = (x as f64 - cx, y as f64 - cy);
                let sx = cx + cos * dx - sin * dy;
                let sy = cy + sin * dx + cos * dy;
                let (x0, y0) = (sx.floor(), sy.floor());
                let (fx, fy) = (sx - x0, sy - y0);
                let mut tap = [(0usize, 0.0f64); 4];
                for (k, (oy, ox, wgt)) in [
                    (0.0, 0.0, (1.0 - fx) * (1.0 - fy)),
                    (0.0, 1.0, fx * (1.0 - fy)),
                    (1.0, 0.0, (1.0 - fx) * fy),
                    (1.0, 1.0, fx * fy),
                ]
                .into_iter()
                .enumerate()
                {
                    let (px, py) = (x0 + ox, y0 + oy);
                    if px >= 0.0 && py >= 0.0 && px < w as f64 && py < h as f64 && wgt > 0.0 {
                        tap[k] = (py as usize * w + px as usize, wgt);
                    }
                }
                taps.push(tap);
            }
        }
        let plane = h * w;
        let mut pixels = vec![0u8; self.pixels.len()];
        for (src, dst) in self
            .pixels
            .chunks_exact(plane)
            .zip(pixels.chunks_exact_mut(plane))
        {
            for (d, tap) in dst.iter_mut().zip(&taps) {
                let v: f64 = tap.iter().map(|&(i, wgt)| wgt * src[i] as f64).sum();
                *d = v.round().clamp(0.0, 255.0) as u8;
            }
        }
        Self {
            pixels,
            labels: self.labels.clone(),
            ..*self
        }
    }

    /// Every image with only the central square `[lo, hi) × [lo, hi)` kept and the rest black
    /// (the occlusion levels of Depeweg 2019 §6.1 are (7, 21), (10, 18), (11, 17), (12, 16)).
    ///
    /// # Errors
    /// [`DataError::OutOfRange`] unless `lo < hi <= min(height, width)`.
    pub fn occluded(&self, lo: usize, hi: usize) -> Result<Self, DataError> {
        if lo >= hi || hi > self.height.min(self.width) {
            return Err(DataError::OutOfRange {
                what: "occlusion window".into(),
                expected: format!("lo < hi <= {}", self.height.min(self.width)),
                found: format!("({lo}, {hi})"),
            });
        }
        let mut out = self.clone();
        let w = self.width;
        for plane in out.pixels.chunks_exact_mut(self.height * w) {
            for (i, p) in plane.iter_mut().enumerate() {
                let (y, x) = (i / w, i % w);
                if !(lo..hi).contains(&y) || !(lo..hi).contains(&x) {
                    *p = 0;
                }
            }
        }
        Ok(out)
    }

    /// Every pixel inverted, `255 − p` (white digits on black become black on white): an
    /// out-of-distribution set with the labels and shapes of the original.
    pub fn inverted(&self) -> Self {
        let mut out = self.clone();
        for p in &mut out.pixels {
            *p = 255 - *p;
        }
        out
    }

    /// `n` images of independent uniform pixels in `0..=255`, shaped `[C, H, W]`, all labelled
    /// 0 (an out-of-distribution set; the labels only fill the type), seeded.
    ///
    /// # Errors
    /// As [`ImageSet::new`] for a zero size or `n_classes`.
    pub fn uniform_noise(
        n: usize,
        shape: [usize; 3],
        n_classes: usize,
        seed: u64,
    ) -> Result<Self, DataError> {
        let mut rng = StdRng::seed_from_u64(seed);
        let size = shape.iter().product::<usize>();
        let pixels = (0..n * size).map(|_| rng.random::<u8>()).collect();
        Self::new(pixels, vec![0; n], shape, n_classes)
    }

    /// Label noise: each image of class `a` becomes `b`, and each of class `b` becomes `a`,
    /// with probability `p` (Depeweg 2019 §6.1 flips 1 ↔ 7 with p = 1/3).
    ///
    /// # Errors
    /// [`DataError::OutOfRange`] unless `0 ≤ p ≤ 1` and both classes are below `n_classes`.
    pub fn with_swapped_labels(&self, a: u8, b: u8, p: f64, seed: u64) -> Result<Self, DataError> {
        if !(0.0..=1.0).contains(&p) {
            return Err(DataError::OutOfRange {
                what: "label-swap probability".into(),
                expected: "[0, 1]".into(),
                found: p.to_string(),
            });
        }
        self.check_classes(&[a, b])?;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut out = self.clone();
        for l in &mut out.labels {
            let u: f64 = rng.random();
            if (*l == a || *l == b) && u < p {
                *l = if *l == a { b } else { a };
            }
        }
        Ok(out)
    }

    /// Drops each image of a class in `classes` with probability `drop` (Depeweg 2019 §6.1
    /// removes 75 % of classes 0, 6, 8, 9).
    ///
    /// # Errors
    /// [`DataError::OutOfRange`] unless `0 ≤ drop ≤ 1` and the classes are below `n_classes`.
    pub fn with_classes_subsampled(
        &self,
        classes: &[u8],
        drop: f64,
        seed: u64,
    ) -> Result<Self, DataError> {
        if !(0.0..=1.0).contains(&drop) {
            return Err(DataError::OutOfRange {
                what: "class drop fraction".into(),
                expected: "[0, 1]".into(),
                found: drop.to_string(),
            });
        }
        self.check_classes(classes)?;
        let mut rng = StdRng::seed_from_u64(seed);
        let keep: Vec<usize> = (0..self.len())
            .filter(|&i| {
                let u: f64 = rng.random();
                !classes.contains(&self.labels[i]) || u >= drop
            })
            .collect();
        Ok(self.select(&keep))
    }

    /// Label noise over every class: each label is replaced, with probability `fraction`, by a
    /// class drawn uniformly from all of them (so it may stay), as Farquhar 2022 App. C's
    /// unbalanced MNIST randomises 10 % of the labels.
    ///
    /// # Errors
    /// [`DataError::OutOfRange`] unless `0 ≤ fraction ≤ 1`.
    pub fn with_random_labels(&self, fraction: f64, seed: u64) -> Result<Self, DataError> {
        if !(0.0..=1.0).contains(&fraction) {
            return Err(DataError::OutOfRange {
                what: "random-label fraction".into(),
                expected: "[0, 1]".into(),
                found: fraction.to_string(),
            });
        }
        let mut rng = StdRng::seed_from_u64(seed);
        let mut out = self.clone();
        for l in &mut out.labels {
            let u: f64 = rng.random();
            let class = rng.random_range(0..self.n_classes) as u8;
            if u < fraction {
                *l = class;
            }
        }
        Ok(out)
    }

    /// Keeps each image of class `c` with probability `keep[c]` (Farquhar 2022 App. C's
    /// unbalanced MNIST: 1, .5, .5, .2, .2, .2, .1, .1, .01, .01 for digits 0–9).
    ///
    /// # Errors
    /// [`DataError::OutOfRange`] unless there is one proportion in `[0, 1]` per class.
    pub fn with_class_proportions(&self, keep: &[f64], seed: u64) -> Result<Self, DataError> {
        if keep.len() != self.n_classes || keep.iter().any(|p| !(0.0..=1.0).contains(p)) {
            return Err(DataError::OutOfRange {
                what: "class proportions".into(),
                expected: format!("{} values in [0, 1]", self.n_classes),
                found: format!("{keep:?}"),
            });
        }
        let mut rng = StdRng::seed_from_u64(seed);
        let rows: Vec<usize> = (0..self.len())
            .filter(|&i| rng.random::<f64>() < keep[self.labels[i] as usize])
            .collect();
        Ok(self.select(&rows))
    }

    fn check_classes(&self, classes: &[u8]) -> Result<(), DataError> {
        match classes.iter().find(|&&c| c as usize >= self.n_classes) {
            Some(c) => Err(DataError::OutOfRange {
                what: "class".into(),
                expected: format!("0..{}", self.n_classes),
                found: c.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Normalised `f32` pixels of the images at `indices`, `[indices.len(), C, H, W]`
    /// row-major.
    ///
    /// # Panics
    /// If an index is past the end, or `norm` has another channel count.
    pub fn normalized(&self, indices: &[usize], norm: &Normalization) -> Vec<f32> {
        assert_eq!(
            norm.channels(),
            self.channels,
            "normalisation for {} channels applied to {}-channel images",
            norm.channels(),
            self.channels
        );
        let tables = norm.tables();
        let plane = self.height * self.width;
        let mut out = Vec::with_capacity(indices.len() * self.image_size());
        for &i in indices {
            assert!(i < self.len(), "image index {i} >= {}", self.len());
            extend_normalized(&mut out, self.image(i), plane, &tables);
        }
        out
    }

    /// Per-channel mean and (population) standard deviation of the pixels on the `[0, 1]`
    /// scale: what [`Normalization`] constants are computed from.
    pub fn pixel_mean_std(&self) -> (Vec<f64>, Vec<f64>) {
        let plane = self.height * self.width;
        let mut hist = vec![[0u64; 256]; self.channels];
        for (k, chan) in self.pixels.chunks_exact(plane).enumerate() {
            let h = &mut hist[k % self.channels];
            for &p in chan {
                h[p as usize] += 1;
            }
        }
        hist.iter()
            .map(|h| {
                let n: u64 = h.iter().sum();
                let n = n.max(1) as f64;
                let mean = h
                    .iter()
                    .enumerate()
                    .map(|(p, &c)| c as f64 * p as f64 / 255.0)
                    .sum::<f64>()
                    / n;
                let var = h
                    .iter()
                    .enumerate()
                    .map(|(p, &c)| c as f64 * (p as f64 / 255.0 - mean).powi(2))
                    .sum::<f64>()
                    / n;
                (mean, var.sqrt())
            })
            .unzip()
    }

    /// Number of images per class.
    pub fn class_counts(&self) -> Vec<usize> {
        let mut c = vec![0; self.n_classes];
        for &l in &self.labels {
            c[l as usize] += 1;
        }
        c
    }
}

/// Appends one `[C, plane]` image, channel by channel, through the per-channel lookup tables
/// of [`Normalization::tables`].
pub(crate) fn extend_normalized(
    out: &mut Vec<f32>,
    image: &[u8],
    plane: usize,
    tables: &[[f32; 256]],
) {
    for (chan, table) in image.chunks_exact(plane.max(1)).zip(tables) {
        out.extend(chan.iter().map(|&p| table[p as usize]));
    }
}

/// MNIST or Fashion-MNIST: the same IDX layout, 28 × 28 grey images, 10 classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum MnistFamily {
    /// Handwritten digits (LeCun, Cortes, Burges).
    Mnist,
    /// Zalando's clothing images (Xiao et al. 2017).
    FashionMnist,
}

impl MnistFamily {
    /// Folder name under the data root.
    pub fn dir_name(self) -> &'static str {
        match self {
            Self::Mnist => "mnist",
            Self::FashionMnist => "fashion-mnist",
        }
    }

    /// Where the files can be downloaded.
    pub fn url(self) -> &'static str {
        match self {
            Self::Mnist => {
                "https://ossci-datasets.s3.amazonaws.com/mnist/ (mirror of yann.lecun.com/exdb/mnist)"
            }
            Self::FashionMnist => {
                "https://github.com/zalandoresearch/fashion-mnist (data/fashion), or the Debian package dataset-fashion-mnist"
            }
        }
    }

    /// The papers' normalisation constants.
    pub fn normalization(self) -> Normalization {
        match self {
            Self::Mnist => Normalization::mnist(),
            Self::FashionMnist => Normalization::fashion_mnist(),
        }
    }

    /// IDX file names (images, labels) of a split, without the `.gz` suffix.
    pub fn file_names(split: Split) -> (&'static str, &'static str) {
        match split {
            Split::Train => ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
            Split::Test => ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
        }
    }

    /// Images in the split: 60 000 for training, 10 000 for test.
    pub fn expected_len(split: Split) -> usize {
        match split {
            Split::Train => 60_000,
            Split::Test => 10_000,
        }
    }

    /// Loads a split from the first data root that holds it (`<dir>/<name>.gz`, else the
    /// uncompressed `<dir>/<name>`).
    ///
    /// # Errors
    /// [`DataError::Missing`] listing the paths tried and the download address; otherwise as
    /// [`load_idx_pair`].
    pub fn load(self, split: Split, root: &DataRoot) -> Result<ImageSet, DataError> {
        let (images, labels) = Self::file_names(split);
        let find = |name: &str| -> Result<PathBuf, DataError> {
            let gz = format!("{}/{name}.gz", self.dir_name());
            root.locate(&gz, self.url()).or_else(|e| {
                root.locate(&format!("{}/{name}", self.dir_name()), self.url())
                    .map_err(|_| e)
            })
        };
        load_idx_pair(&find(images)?, &find(labels)?, 10)
    }
}

/// Reads an image IDX file `[n, H, W]` and a label IDX file `[n]` into an [`ImageSet`].
///
/// # Errors
/// [`DataError::Format`] for a corrupt file, images that are not 3-dimensional, labels that are
/// not 1-dimensional, a count mismatch between the two files (both named), or a label not
/// below `n_classes` (with its byte offset in the label file).
pub fn load_idx_pair(
    images: &Path,
    labels: &Path,
    n_classes: usize,
) -> Result<ImageSet, DataError> {
    let img = read_idx(images)?;
    let lab = read_idx(labels)?;
    let IdxArray { dims, data } = img;
    let [n, h, w] = dims[..] else {
        return Err(DataError::Format {
            path: images.to_path_buf(),
            offset: 3,
            expected: "3 dimensions (images × rows × columns)".into(),
            found: format!("{} dimensions {dims:?}", dims.len()),
        });
    };
    if lab.dims.len() != 1 {
        return Err(DataError::Format {
            path: labels.to_path_buf(),
            offset: 3,
            expected: "1 dimension (labels)".into(),
            found: format!("{} dimensions {:?}", lab.dims.len(), lab.dims),
        });
    }
    if lab.dims[0] != n {
        return Err(DataError::Format {
            path: labels.to_path_buf(),
            offset: 4,
            expected: format!("{n} labels, one per image of {}", images.display()),
            found: format!("{} labels", lab.dims[0]),
        });
    }
    if let Some(i) = lab.data.iter().position(|&l| l as usize >= n_classes) {
        return Err(DataError::Format {
            path: labels.to_path_buf(),
            offset: 8 + i as u64,
            expected: format!("a label in 0..{n_classes}"),
            found: lab.data[i].to_string(),
        });
    }
    if h == 0 || w == 0 {
        return Err(DataError::Format {
            path: images.to_path_buf(),
            offset: 8,
            expected: "images of at least 1×1 pixels".into(),
            found: format!("{h}×{w}"),
        });
    }
    ImageSet::new(data, lab.data, [1, h, w], n_classes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut b = vec![0, 0, 8, dims.len() as u8];
        for d in dims {
            b.extend_from_slice(&d.to_be_bytes());
        }
        b.extend_from_slice(data);
        b
    }

    /// Image and label files that disagree are errors naming the file, offset and both counts.
    #[test]
    fn idx_pairs_must_agree_in_count_dimensions_and_label_range() {
        let t = crate::uci::tests::TempDir::new("idx-pair");
        let (img, lab) = (t.0.join("images-idx3"), t.0.join("labels-idx1"));
        let write = |i: Vec<u8>, l: Vec<u8>| {
            std::fs::write(&img, i).unwrap();
            std::fs::write(&lab, l).unwrap();
        };
        write(idx(&[3, 2, 2], &[9; 12]), idx(&[3], &[0, 1, 2]));
        let s = load_idx_pair(&img, &lab, 10).unwrap();
        assert_eq!((s.len(), s.shape()), (3, [1, 2, 2]));
        let cases: Vec<(Vec<u8>, Vec<u8>, &[&str])> = vec![
            (
                idx(&[3, 2, 2], &[9; 12]),
                idx(&[2], &[0, 1]),
                &["labels-idx1", "3 labels", "found 2 labels", "images-idx3"],
            ),
            (
                idx(&[3, 2, 2], &[9; 12]),
                idx(&[3], &[0, 10, 2]),
                &["labels-idx1", "offset 9", "0..10", "found 10"],
            ),
            (
                idx(&[12], &[9; 12]),
                idx(&[12], &[0; 12]),
                &["images-idx3", "3 dimensions", "[12]"],
            ),
            (
                idx(&[3, 2, 2], &[9; 12]),
                idx(&[3, 1], &[0, 1, 2]),
                &["labels-idx1", "1 dimension"],
            ),
        ];
        for (i, l, needles) in cases {
            write(i, l);
            let e = load_idx_pair(&img, &lab, 10).unwrap_err().to_string();
            for n in needles {
                assert!(e.contains(n), "missing {n:?} in {e}");
            }
        }
    }

    fn set(pixels: Vec<u8>, labels: Vec<u8>, hw: usize) -> ImageSet {
        ImageSet::new(pixels, labels, [1, hw, hw], 10).unwrap()
    }

    #[test]
    fn inverted_and_noise_sets() {
        let s = set(vec![0, 10, 255, 128], vec![3], 2);
        assert_eq!(s.inverted().pixels, vec![255, 245, 0, 127]);
        assert_eq!(s.inverted().inverted(), s);
        let n = ImageSet::uniform_noise(2000, [1, 5, 5], 10, 7).unwrap();
        assert_eq!((n.len(), n.shape()), (2000, [1, 5, 5]));
        assert_eq!(n, ImageSet::uniform_noise(2000, [1, 5, 5], 10, 7).unwrap());
        // Uniform on 0..=255: mean 127.5, sd 73.9; 50 000 pixels give a s.e. of 0.33.
        let mean = n.pixels.iter().map(|&p| p as f64).sum::<f64>() / n.pixels.len() as f64;
        assert!((mean - 127.5).abs() < 5.0 * 0.33, "{mean}");
        assert!(ImageSet::uniform_noise(3, [1, 0, 5], 10, 7).is_err());
    }

    #[test]
    fn rotation_by_quarter_turns_permutes_pixels_and_is_counter_clockwise() {
        let img: Vec<u8> = (0..25).collect();
        let s = set(img.clone(), vec![3], 5);
        assert_eq!(s.rotated(0.0), s);
        assert_eq!(s.rotated(360.0), s);
        let r = s.rotated(90.0);
        // Counter-clockwise: the top-right pixel moves to the top-left corner.
        assert_eq!(r.pixels[0], img[4]);
        // out[y][x] = in[x][w-1-y] for a quarter turn counter-clockwise.
        for y in 0..5 {
            for x in 0..5 {
                assert_eq!(r.pixels[y * 5 + x], img[x * 5 + (4 - y)]);
            }
        }
        assert_eq!(r.rotated(-90.0), s);
        assert_eq!(
            s.rotated(180.0).pixels,
            img.iter().rev().copied().collect::<Vec<_>>()
        );
        // A generic angle keeps a centred blob's mass (bilinear interpolation) and the labels.
        let mut blob = vec![0u8; 28 * 28];
        for y in 10..18 {
            for x in 12..16 {
                blob[y * 28 + x] = 200;
            }
        }
        let b = set(blob.clone(), vec![7], 28);
        let r = b.rotated(45.0);
        let mass = |p: &[u8]| p.iter().map(|&v| v as f64).sum::<f64>();
        assert!((mass(&r.pixels) / mass(&blob) - 1.0).abs() < 0.05);
        assert_eq!(r.labels, vec![7]);
        assert_ne!(r.pixels, blob);
    }

    #[test]
    fn subsets_occlusion_and_label_transforms() {
        let pixels: Vec<u8> = (0..10 * 16).map(|i| (i % 251) as u8 + 1).collect();
        let labels: Vec<u8> = (0..10).collect();
        let s = set(pixels, labels, 4);
        assert_eq!(s.first(3).labels, vec![0, 1, 2]);
        assert_eq!(s.first(99).len(), 10);
        let sub = s.with_classes(&[7, 2]);
        assert_eq!(sub.labels, vec![2, 7]);
        assert_eq!(sub.image(1), s.image(7));
        let o = s.occluded(1, 3).unwrap();
        for i in 0..10 {
            for (k, &p) in o.image(i).iter().enumerate() {
                let (y, x) = (k / 4, k % 4);
                let inside = (1..3).contains(&y) && (1..3).contains(&x);
                assert_eq!(p, if inside { s.image(i)[k] } else { 0 });
            }
        }
        assert!(s.occluded(3, 3).is_err() && s.occluded(0, 5).is_err());
        // Label swap with p = 1 exchanges the two classes exactly; p = 0 changes nothing.
        let many = set(
            vec![0; 2000 * 16],
            (0..2000).map(|i| (i % 10) as u8).collect(),
            4,
        );
        let swapped = many.with_swapped_labels(1, 7, 1.0, 0).unwrap();
        for (a, b) in many.labels.iter().zip(&swapped.labels) {
            let expect = match a {
                1 => 7,
                7 => 1,
                x => *x,
            };
            assert_eq!(*b, expect);
        }
        assert_eq!(many.with_swapped_labels(1, 7, 0.0, 0).unwrap(), many);
        // With p = 1/3 about a third of the 200 ones become sevens (binomial se ≈ 6.7).
        let third = many.with_swapped_labels(1, 7, 1.0 / 3.0, 5).unwrap();
        let moved = many
            .labels
            .iter()
            .zip(&third.labels)
            .filter(|(a, b)| **a == 1 && **b == 7)
            .count() as f64;
        assert!((moved - 200.0 / 3.0).abs() < 5.0 * 6.7, "{moved}");
        let sub = many.with_classes_subsampled(&[0, 6], 0.75, 3).unwrap();
        let c = sub.class_counts();
        assert_eq!(c[1], 200);
        // 200 images each, keep probability 1/4: se = sqrt(200·3/16) ≈ 6.1.
        assert!((c[0] as f64 - 50.0).abs() < 5.0 * 6.1, "{c:?}");
        assert!(many.with_swapped_labels(1, 10, 0.5, 0).is_err());
        assert!(many.with_classes_subsampled(&[0], 1.5, 0).is_err());
    }

    #[test]
    fn random_labels_and_class_proportions_unbalance_a_set() {
        let n = 4000;
        let labels: Vec<u8> = (0..n).map(|i| (i % 10) as u8).collect();
        let many = set(vec![0; n * 4], labels, 2);
        // A label changes with probability 0.3 · 9/10 = 0.27: se = sqrt(n·0.27·0.73) ≈ 28.
        let noisy = many.with_random_labels(0.3, 1).unwrap();
        let changed = noisy
            .labels
            .iter()
            .zip(&many.labels)
            .filter(|(a, b)| a != b)
            .count();
        assert!(
            (changed as f64 - 0.27 * n as f64).abs() < 5.0 * 28.0,
            "{changed}"
        );
        assert_eq!(many.with_random_labels(0.0, 1).unwrap(), many);
        let keep = [1.0, 0.5, 0.5, 0.2, 0.2, 0.2, 0.1, 0.1, 0.01, 0.01];
        let c = many
            .with_class_proportions(&keep, 2)
            .unwrap()
            .class_counts();
        assert_eq!(c[0], 400);
        for (k, p) in keep.iter().enumerate().skip(1) {
            // 400 images, binomial: 5 standard errors.
            let se = (400.0 * p * (1.0 - p)).sqrt();
            assert!((c[k] as f64 - 400.0 * p).abs() <= 5.0 * se + 1.0, "{c:?}");
        }
        assert!(many.with_random_labels(1.5, 0).is_err());
        assert!(many.with_class_proportions(&keep[..9], 0).is_err());
    }

    #[test]
    fn normalisation_and_pixel_statistics() {
        let s = set(vec![0, 255, 0, 255], vec![0], 2);
        let norm = Normalization::new(vec![0.5], vec![0.25]).unwrap();
        assert_eq!(s.normalized(&[0], &norm), vec![-2.0, 2.0, -2.0, 2.0]);
        let (m, sd) = s.pixel_mean_std();
        assert!((m[0] - 0.5).abs() < 1e-12 && (sd[0] - 0.5).abs() < 1e-12);
        assert!(Normalization::new(vec![0.5], vec![0.0]).is_err());
        assert!(Normalization::new(vec![0.5, 0.1], vec![1.0]).is_err());
        assert!(ImageSet::new(vec![0; 5], vec![0], [1, 2, 2], 10).is_err());
        assert!(ImageSet::new(vec![0; 4], vec![10], [1, 2, 2], 10).is_err());
    }
}
