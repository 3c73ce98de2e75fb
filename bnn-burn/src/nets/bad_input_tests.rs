//! A bad call is a typed error naming the argument (and the row), never a panic or a NaN:
//! class labels outside `0..C`, inputs of another width or image size, targets of another
//! width, no rows, a latent table of another size, and finite inputs that overflow.

use super::*;
use crate::error::DataMismatch;
use crate::layers::WeightConfig;
use crate::likelihood::{Categorical, GaussianLikelihoodConfig};
use crate::posterior::PosteriorConfig;
use crate::predict::{PredictError, PredictMode};
use crate::testing::seeded;
use crate::train::{TrainConfig, TrainError, train};
use crate::training_device;
use burn::tensor::{Distribution, Int, TensorData};

fn quiet(epochs: usize) -> TrainConfig {
    TrainConfig::new(epochs)
        .with_batch_size(8)
        .with_progress(false)
}

fn mismatch<T>(r: Result<T, TrainError>) -> DataMismatch {
    match r {
        Err(TrainError::Mismatch(m)) => m,
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("trained"),
    }
}

fn predict_mismatch<T>(r: Result<T, PredictError>) -> DataMismatch {
    match r {
        Err(PredictError::Mismatch(m)) => m,
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("predicted"),
    }
}

fn labels(values: &[i64], device: &burn::tensor::Device) -> Tensor<1, Int> {
    Tensor::from_data(TensorData::new(values.to_vec(), [values.len()]), device)
}

#[test]
fn class_labels_outside_the_classes_are_refused_naming_the_row() {
    let device = training_device();
    let _guard = seeded(&device, 0);
    let net = MlpConfig::new(3, vec![4], 5)
        .with_weights(WeightConfig::of(PosteriorConfig::mean_field()))
        .init(Categorical, &device)
        .unwrap();
    let x = Tensor::<2>::random([6, 3], Distribution::Normal(0.0, 1.0), &device);
    for (bad, row, label) in [
        (vec![0, 1, 2, 3, 5, 4], 4, 5),
        (vec![0, -1, 2, 3, 4, 4], 1, -1),
    ] {
        let m = mismatch(train(
            net.clone(),
            (x.clone(), labels(&bad, &device)),
            &quiet(1),
        ));
        assert_eq!(
            m,
            DataMismatch::Label {
                row,
                label,
                classes: 5
            }
        );
        let text = m.to_string();
        assert!(
            text.contains(&format!("row {row}")) && text.contains("5 classes"),
            "{text}"
        );
    }
    // Labels in range train.
    train(net, (x, labels(&[0, 1, 2, 3, 4, 4], &device)), &quiet(1)).unwrap();
}

#[test]
fn inputs_and_targets_of_another_shape_or_without_rows_are_refused() {
    let device = training_device();
    let _guard = seeded(&device, 1);
    let likelihood = GaussianLikelihoodConfig::new().init(&device).unwrap();
    let net = MlpConfig::new(3, vec![4], 1)
        .init(likelihood, &device)
        .unwrap();
    let normal =
        |shape: [usize; 2]| Tensor::<2>::random(shape, Distribution::Normal(0.0, 1.0), &device);
    // Inputs of width 4 for a net on 3.
    let m = mismatch(train(
        net.clone(),
        (normal([6, 4]), normal([6, 1])),
        &quiet(1),
    ));
    assert_eq!(
        m,
        DataMismatch::Shape {
            part: "inputs",
            expected: vec![3],
            found: vec![4]
        }
    );
    // Targets of width 2 for one output.
    let m = mismatch(train(
        net.clone(),
        (normal([6, 3]), normal([6, 2])),
        &quiet(1),
    ));
    assert!(
        matches!(
            m,
            DataMismatch::Shape {
                part: "targets",
                ..
            }
        ),
        "{m}"
    );
    // Prediction: no rows, another width.
    let plain = net.valid();
    let none = Tensor::<2>::zeros([0, 3], &device.clone().inner());
    let m = predict_mismatch(plain.predict(none, PredictMode::Samples(2)));
    assert_eq!(m, DataMismatch::Empty { part: "inputs" });
    let wide = Tensor::<2>::zeros([2, 5], &device.clone().inner());
    let m = predict_mismatch(plain.predict(wide, PredictMode::Samples(2)));
    assert!(
        m.to_string().contains("[5]") && m.to_string().contains("[3]"),
        "{m}"
    );
    // Training on no rows stays the trainer's own error.
    let err = train(net, (normal([0, 3]), normal([0, 1])), &quiet(1)).unwrap_err();
    assert!(matches!(err, TrainError::Empty), "{err}");
}

#[test]
fn images_of_another_size_are_refused_before_training() {
    let device = training_device();
    let _guard = seeded(&device, 2);
    let net = ConvNetConfig::lenet5([1, 28, 28], 10)
        .init(Categorical, &device)
        .unwrap();
    let x = Tensor::<4>::zeros([4, 1, 32, 32], &device);
    let m = mismatch(train(
        net.clone(),
        (x, labels(&[0, 1, 2, 3], &device)),
        &quiet(1),
    ));
    assert_eq!(
        m,
        DataMismatch::Shape {
            part: "inputs",
            expected: vec![1, 28, 28],
            found: vec![1, 32, 32]
        }
    );
    let m = predict_mismatch(net.valid().predict(
        Tensor::<4>::zeros([1, 3, 28, 28], &device.clone().inner()),
        PredictMode::Samples(1),
    ));
    assert!(m.to_string().contains("[3, 28, 28]"), "{m}");
}

#[test]
fn a_latent_table_of_another_size_is_refused() {
    let device = training_device();
    let _guard = seeded(&device, 3);
    let net = BnnLvConfig::new(MlpConfig::new(2, vec![4], 1))
        .init_regressor(10, &device)
        .unwrap();
    let x = Tensor::<2>::random([12, 2], Distribution::Normal(0.0, 1.0), &device);
    let y = Tensor::<2>::random([12, 1], Distribution::Normal(0.0, 1.0), &device);
    let m = mismatch(train(net, (x, y), &quiet(1)));
    assert_eq!(
        m,
        DataMismatch::Rows {
            part: "inputs",
            expected: 10,
            found: 12
        }
    );
}

#[test]
fn finite_inputs_that_overflow_are_named_not_returned_as_nan() {
    let device = training_device();
    let _guard = seeded(&device, 4);
    let likelihood = GaussianLikelihoodConfig::new().init(&device).unwrap();
    let net = MlpConfig::new(2, vec![8], 1)
        .init(likelihood, &device)
        .unwrap();
    let mut values = vec![0.5f32; 12];
    values[6] = 3.0e38;
    values[7] = -3.0e38;
    let x = Tensor::<2>::from_data(TensorData::new(values, [6, 2]), &device);
    let y = Tensor::<2>::zeros([6, 1], &device);
    // Training: refused before the first step, saying why and how large the inputs are.
    match train(net.clone(), (x.clone(), y), &quiet(1).with_batch_size(6)) {
        Err(e @ TrainError::Overflow { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("overflow") && text.contains("3.00e38"),
                "{text}"
            );
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("trained on overflowing inputs"),
    }
    // Prediction: the row is named.
    let plain = net.valid();
    match plain.predict(x.inner(), PredictMode::Samples(3)) {
        Err(PredictError::NonFiniteOutput { row }) => assert_eq!(row, 3),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("predicted NaN silently"),
    }
    // The other rows alone predict.
    let ok = Tensor::<2>::full([2, 2], 0.5, &device.clone().inner());
    plain.predict(ok, PredictMode::Samples(3)).unwrap();
}
