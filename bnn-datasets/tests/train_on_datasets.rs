//! The library's own data types train a bnn-burn model directly, through burn's `Dataset` and
//! `Batcher` traits: no conversion of `Vec<f64>` to tensors by hand.

use bnn_burn::layers::{Estimator, WeightConfig};
use bnn_burn::likelihood::{Categorical, GaussianLikelihoodConfig};
use bnn_burn::nets::{ConvNetConfig, ConvSpec, MlpConfig};
use bnn_burn::posterior::PosteriorConfig;
use bnn_burn::train::{DatasetSource, TrainConfig, train};
use bnn_datasets::burn_data::{ImageBatcher, RegressionBatcher};
use bnn_datasets::images::{ImageSet, Normalization};
use bnn_datasets::toy;

#[test]
fn regression_data_trains_through_its_batcher() {
    let device = bnn_burn::training_device();
    let _guard = bnn_burn::testing::seeded(&device, 0);
    let set = toy::cubic(200, 1);
    let data = bnn_datasets::RegressionData::new(set.x.clone(), set.y.clone(), 1, 1).unwrap();
    let (sx, sy) = data.fit_standardizers().unwrap();
    let data = data.standardized(&sx, &sy).unwrap();
    let weights = WeightConfig::of(PosteriorConfig::mean_field())
        .with_estimator(Estimator::LocalReparameterization);
    let likelihood = GaussianLikelihoodConfig::new().init(&device).unwrap();
    let model = MlpConfig::new(1, vec![32], 1)
        .with_weights(weights)
        .init(likelihood, &device)
        .unwrap();
    let config = TrainConfig::new(60)
        .with_batch_size(32)
        .with_learning_rate(1e-2)
        .with_progress(false);
    let (_, report) = train(model, DatasetSource::new(data, RegressionBatcher), &config).unwrap();
    let (first, last) = (report.history[0].nll, report.history[59].nll);
    assert!(last < first - 0.5, "NLL {first} → {last}");
}

#[test]
fn an_image_set_trains_through_its_batcher() {
    let device = bnn_burn::training_device();
    let _guard = bnn_burn::testing::seeded(&device, 1);
    // Bright left half (class 0) or right half (class 1), 8×8.
    let n = 64;
    let pixels: Vec<u8> = (0..n * 64)
        .map(|k| {
            let (i, c) = (k / 64, k % 8);
            if (c < 4) == (i % 2 == 0) { 220 } else { 20 }
        })
        .collect();
    let labels: Vec<u8> = (0..n).map(|i| (i % 2) as u8).collect();
    let images = ImageSet::new(pixels, labels, [1, 8, 8], 2).unwrap();
    let convs = vec![ConvSpec::new(4, 3).with_stride(2)];
    let model = ConvNetConfig::new([1, 8, 8], convs, MlpConfig::new(36, vec![], 2))
        .with_weights(WeightConfig::of(PosteriorConfig::point()))
        .init(Categorical, &device)
        .unwrap();
    let source = DatasetSource::new(images, ImageBatcher::new(Normalization::unit(1)));
    let config = TrainConfig::new(20)
        .with_batch_size(16)
        .with_learning_rate(1e-2)
        .with_progress(false);
    let (_, report) = train(model, source, &config).unwrap();
    assert!(report.history[19].nll < 0.1, "{:?}", report.history[19]);
}
