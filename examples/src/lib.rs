//! Helpers shared by the chapter examples: the quick MNIST sets (or a message saying which
//! file is missing and where to get it) and batched image predictions.

use bnn_burn::host::to_vec;
use bnn_burn::predict::{ClassPrediction, Predict, PredictError, PredictMode};
use bnn_datasets::{DataRoot, ImageSet, MnistFamily, Split};
use burn::tensor::{Device, Tensor};

/// The first `train` MNIST training images, the first `test` MNIST test images and the first
/// `test` Fashion-MNIST test images; `None` (after printing which file is missing and where
/// to get it) when the files are not in any data folder.
pub fn quick_mnist(train: usize, test: usize) -> Option<(ImageSet, ImageSet, ImageSet)> {
    let root = DataRoot::default();
    let load = || -> Result<_, bnn_datasets::DataError> {
        Ok((
            MnistFamily::Mnist.load(Split::Train, &root)?.first(train),
            MnistFamily::Mnist.load(Split::Test, &root)?.first(test),
            MnistFamily::FashionMnist
                .load(Split::Test, &root)?
                .first(test),
        ))
    };
    match load() {
        Ok(sets) => Some(sets),
        Err(e) => {
            println!("(MNIST part skipped: {e})\n");
            None
        }
    }
}

/// Per-image predictions of `set`, 500 images at a time.
pub struct ImagePredictions {
    /// Predictive probabilities, `[n, C]` row-major.
    pub probs: Vec<f64>,
    /// Predicted classes ([`ClassPrediction::predicted_class`]: a most probable class, an
    /// evidential head's ties broken by its outputs).
    pub predicted: Vec<usize>,
    /// `ln p̄(y | x)` of the labels.
    pub log_likelihood: Vec<f64>,
    /// Predictive entropies.
    pub entropy: Vec<f64>,
}

/// Predicts every image of `set` (normalised as `family`'s) in `mode`.
///
/// # Errors
/// When the model cannot predict in `mode`.
pub fn predict_images(
    model: &(impl Predict<Input = Tensor<4>, Prediction = ClassPrediction> + ?Sized),
    set: &ImageSet,
    family: MnistFamily,
    mode: PredictMode,
    device: &Device,
) -> Result<ImagePredictions, PredictError> {
    let norm = family.normalization();
    let mut out = ImagePredictions {
        probs: Vec::new(),
        predicted: Vec::new(),
        log_likelihood: Vec::new(),
        entropy: Vec::new(),
    };
    let indices: Vec<usize> = (0..set.len()).collect();
    for chunk in indices.chunks(500) {
        let batch = set.batch(chunk, &norm, device);
        let pred = model.predict(batch.images, mode)?;
        out.probs.extend(to_vec(pred.mean()));
        out.predicted
            .extend(bnn_burn::host::to_labels(pred.predicted_class()));
        out.log_likelihood
            .extend(to_vec(pred.log_prob(batch.labels)));
        out.entropy.extend(to_vec(pred.entropy()));
    }
    Ok(out)
}

/// `[x, y]` points as one row-major `Vec` (for `matrix(·, 2, ·)`).
pub fn flat(points: &[[f64; 2]]) -> Vec<f64> {
    points.iter().flatten().copied().collect()
}

/// 1 000 inputs far from the two moons: a ring of radius 3 to 5 around the data's centre.
pub fn far_ring() -> Vec<[f64; 2]> {
    (0..1000)
        .map(|k| {
            let angle = k as f64 * 2.0 * std::f64::consts::PI / 1000.0;
            let radius = 3.0 + 0.5 * (k % 5) as f64;
            [0.5 + radius * angle.cos(), 0.25 + radius * angle.sin()]
        })
        .collect()
}

/// The two-moons task of the examples: 1 000 training and 1 000 test points (noise 0.1), the
/// far ring, and the inputs' standardiser fitted on the training points.
pub struct MoonsTask {
    /// Training points.
    pub train: bnn_datasets::toy::Classification2d,
    /// Test points.
    pub test: bnn_datasets::toy::Classification2d,
    /// Inputs far from the data ([`far_ring`]).
    pub far: Vec<[f64; 2]>,
    /// Standardiser of the inputs.
    pub sx: bnn_datasets::Standardizer,
}

/// The two-moons task (seeds 10 and 11).
///
/// # Errors
/// Never for these generated points; kept for the standardiser's signature.
pub fn moons_task() -> Result<MoonsTask, bnn_datasets::DataError> {
    let train = bnn_datasets::toy::two_moons(1000, 0.1, 10);
    let test = bnn_datasets::toy::two_moons(1000, 0.1, 11);
    let sx = bnn_datasets::Standardizer::fit(&flat(&train.x), 2)?;
    Ok(MoonsTask {
        train,
        test,
        far: far_ring(),
        sx,
    })
}

/// Built-in images for the examples without MNIST: each of the ten classes a fixed random 8×8
/// pattern (seed 7), each image its class's pattern with a fraction `flip` of the pixels flipped
/// (seeded by `seed`), label `i % 10`.
///
/// # Errors
/// Never for these sizes; kept for [`ImageSet::new`]'s signature.
pub fn pattern_images(n: usize, flip: f64, seed: u64) -> Result<ImageSet, bnn_datasets::DataError> {
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};
    let mut rng = StdRng::seed_from_u64(7);
    let templates: Vec<Vec<bool>> = (0..10)
        .map(|_| (0..64).map(|_| rng.random_bool(0.3)).collect())
        .collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut pixels, mut labels) = (Vec::new(), Vec::new());
    for i in 0..n {
        let label = (i % 10) as u8;
        for &on in &templates[label as usize] {
            pixels.push(if on != rng.random_bool(flip) { 255 } else { 0 });
        }
        labels.push(label);
    }
    ImageSet::new(pixels, labels, [1, 8, 8], 10)
}
