//! CIFAR-10, binary version (Krizhevsky 2009): `cifar-10-batches-bin/data_batch_{1..5}.bin`
//! (training, 10 000 images each) and `test_batch.bin`. Each record is 3073 bytes: the label
//! (0–9), then 1024 red, 1024 green and 1024 blue pixels, rows of 32, i.e. `[3, 32, 32]`.
//!
//! CIFAR-5 (Haußmann 2021 §5.5): classes 0–4 are the in-distribution task, classes 5–9 the
//! out-of-distribution set; normalisation [`Normalization::cifar5`].

use crate::error::DataError;
use crate::images::{ImageSet, Normalization, Split};
use crate::root::DataRoot;
use std::path::Path;

/// Where the binary version can be downloaded.
pub const CIFAR10_URL: &str = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz";
/// Folder of the unpacked archive under the data root.
pub const CIFAR10_DIR: &str = "cifar-10-batches-bin";
/// Bytes per record: one label byte and a 3 × 32 × 32 image.
pub const RECORD: usize = 1 + 3 * 32 * 32;

/// Parses the records of one batch file; `path` only names the file in errors.
///
/// # Errors
/// [`DataError::Format`] for an empty file, a length that is not a whole number of 3073-byte
/// records (offset of the cut record), or a label byte above 9 (its offset).
pub fn parse_cifar_batch(bytes: &[u8], path: &Path) -> Result<ImageSet, DataError> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(RECORD) {
        let whole = bytes.len() / RECORD;
        return Err(DataError::Format {
            path: path.to_path_buf(),
            offset: (whole * RECORD) as u64,
            expected: format!("whole {RECORD}-byte records (1 label + 3×32×32 pixels)"),
            found: format!(
                "{} bytes: {whole} records and {} bytes over",
                bytes.len(),
                bytes.len() % RECORD
            ),
        });
    }
    let n = bytes.len() / RECORD;
    let mut pixels = Vec::with_capacity(n * (RECORD - 1));
    let mut labels = Vec::with_capacity(n);
    for (i, rec) in bytes.chunks_exact(RECORD).enumerate() {
        if rec[0] > 9 {
            return Err(DataError::Format {
                path: path.to_path_buf(),
                offset: (i * RECORD) as u64,
                expected: "a label byte in 0..=9".into(),
                found: rec[0].to_string(),
            });
        }
        labels.push(rec[0]);
        pixels.extend_from_slice(&rec[1..]);
    }
    ImageSet::new(pixels, labels, [3, 32, 32], 10)
}

/// Reads one batch file.
///
/// # Errors
/// [`DataError::Io`] when unreadable, else as [`parse_cifar_batch`].
pub fn read_cifar_batch(path: &Path) -> Result<ImageSet, DataError> {
    let bytes = std::fs::read(path).map_err(|source| DataError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_cifar_batch(&bytes, path)
}

/// File names of a split.
pub fn cifar10_files(split: Split) -> Vec<String> {
    match split {
        Split::Train => (1..=5).map(|k| format!("data_batch_{k}.bin")).collect(),
        Split::Test => vec!["test_batch.bin".into()],
    }
}

/// Loads a CIFAR-10 split (training: the 5 batches concatenated in order).
///
/// # Errors
/// [`DataError::Missing`] naming the first missing batch, the paths tried and the download
/// address; otherwise as [`read_cifar_batch`].
pub fn load_cifar10(split: Split, root: &DataRoot) -> Result<ImageSet, DataError> {
    let mut out: Option<ImageSet> = None;
    for name in cifar10_files(split) {
        let path = root.locate(&format!("{CIFAR10_DIR}/{name}"), CIFAR10_URL)?;
        let batch = read_cifar_batch(&path)?;
        match &mut out {
            None => out = Some(batch),
            Some(all) => {
                all.pixels.extend_from_slice(&batch.pixels);
                all.labels.extend_from_slice(&batch.labels);
            }
        }
    }
    Ok(out.expect("every split has at least one batch file"))
}

/// The CIFAR-5 task of one split: classes 0–4 (in-distribution, labels 0–4) and classes 5–9
/// (the out-of-distribution set, labels kept as 5–9).
#[derive(Debug, Clone, PartialEq)]
pub struct Cifar5 {
    /// Classes 0–4, with `n_classes = 5`.
    pub inliers: ImageSet,
    /// Classes 5–9.
    pub outliers: ImageSet,
}

impl Cifar5 {
    /// Splits a CIFAR-10 set into the CIFAR-5 task.
    pub fn from_cifar10(set: &ImageSet) -> Self {
        let mut inliers = set.with_classes(&[0, 1, 2, 3, 4]);
        inliers.n_classes = 5;
        Self {
            inliers,
            outliers: set.with_classes(&[5, 6, 7, 8, 9]),
        }
    }

    /// Loads a CIFAR-10 split and splits it.
    ///
    /// # Errors
    /// As [`load_cifar10`].
    pub fn load(split: Split, root: &DataRoot) -> Result<Self, DataError> {
        Ok(Self::from_cifar10(&load_cifar10(split, root)?))
    }

    /// The normalisation used with it.
    pub fn normalization() -> Normalization {
        Normalization::cifar5()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uci::tests::TempDir;

    /// A record in the real layout: label, then R, G, B planes of 32 × 32.
    fn record(label: u8, seed: u8) -> Vec<u8> {
        let mut r = vec![label];
        for c in 0..3u8 {
            r.extend((0..1024u32).map(|p| (p as u8).wrapping_mul(3).wrapping_add(c * 50 + seed)));
        }
        r
    }

    #[test]
    fn reads_generated_batches_in_the_real_layout() {
        let t = TempDir::new("cifar");
        let dir = t.0.join(CIFAR10_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        let mut label = 0u8;
        for k in 1..=5 {
            let mut bytes = Vec::new();
            for j in 0..4u8 {
                bytes.extend(record(label % 10, k * 10 + j));
                label += 1;
            }
            std::fs::write(dir.join(format!("data_batch_{k}.bin")), bytes).unwrap();
        }
        std::fs::write(
            dir.join("test_batch.bin"),
            [record(9, 1), record(4, 2)].concat(),
        )
        .unwrap();
        let root = DataRoot::from_roots(vec![t.0.clone()]);
        let train = load_cifar10(Split::Train, &root).unwrap();
        assert_eq!(train.len(), 20);
        assert_eq!(train.shape(), [3, 32, 32]);
        assert_eq!(train.labels[..12], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]);
        // Image 5 is record 2 of batch 2: the green plane starts at 1024 with value 50 + seed.
        let img = train.image(5);
        assert_eq!(img[1024], 50 + 21);
        assert_eq!(img[1], 3 + 21);
        let test = load_cifar10(Split::Test, &root).unwrap();
        assert_eq!(test.labels, vec![9, 4]);
        let c5 = Cifar5::from_cifar10(&train);
        assert_eq!(c5.inliers.len() + c5.outliers.len(), 20);
        assert!(c5.inliers.labels.iter().all(|&l| l < 5));
        assert!(c5.outliers.labels.iter().all(|&l| (5..10).contains(&l)));
        assert_eq!(c5.inliers.n_classes, 5);
        let norm = Cifar5::normalization();
        let x = c5.inliers.normalized(&[0], &norm);
        assert_eq!(x.len(), 3072);
        assert!(
            (x[1024] - (c5.inliers.image(0)[1024] as f32 / 255.0 - 0.4854) / 0.2415).abs() < 1e-6
        );
        // A missing batch names the file, the paths tried and the archive's address.
        std::fs::remove_file(dir.join("data_batch_3.bin")).unwrap();
        let e = load_cifar10(Split::Train, &root).unwrap_err().to_string();
        assert!(
            e.contains("data_batch_3.bin") && e.contains(CIFAR10_URL),
            "{e}"
        );
    }

    #[test]
    fn cut_records_and_bad_labels_name_the_offset() {
        let p = Path::new("data_batch_1.bin");
        let two = [record(1, 0), record(2, 0)].concat();
        let e = parse_cifar_batch(&two[..two.len() - 5], p)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("offset 3073") && e.contains("3068 bytes over"),
            "{e}"
        );
        let mut bad = two.clone();
        bad[RECORD] = 12;
        let e = parse_cifar_batch(&bad, p).unwrap_err().to_string();
        assert!(
            e.contains("offset 3073") && e.contains("12") && e.contains("data_batch_1.bin"),
            "{e}"
        );
        assert!(parse_cifar_batch(&[], p).is_err());
    }
}
