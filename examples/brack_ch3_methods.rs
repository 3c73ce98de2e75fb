//! Chapter example, Brack (2022) ch. 3, *Approximate inference for BNNs*: the methods of the
//! chapter on one model and one data set, side by side: MAP, last-layer and KFAC Laplace,
//! mean-field, low-rank and radial VI, a deep ensemble and MultiSWAG, on the two moons with a
//! 2-50-50-2 ReLU net. For each: test accuracy, NLL, ECE and its calibration curve, and the
//! predictive entropy on test points against points far from the data (with its AUROC). Then
//! MAP after temperature scaling and with split-conformal class sets, both calibrated on
//! held-out points.
//!
//! `cargo run --release --example brack_ch3_methods`

use bnn_burn::host::{matrix, to_vec};
use bnn_burn::layers::WeightConfig;
use bnn_burn::metrics::{auroc, ece, mean, nll, reliability_curve};
use bnn_burn::nets::{Classifier, MlpConfig};
use bnn_burn::posterior::PosteriorConfig;
use bnn_burn::posthoc::{
    ConformalSets, Ensemble, LaplaceConfig, LastLayerLaplace, NetworkLaplace, NetworkLaplaceConfig,
    Swag, SwagConfig, TemperatureScaling,
};
use bnn_burn::predict::{ClassPrediction, Predict, PredictMode};
use bnn_burn::train::{TrainConfig, train_built};
use bnn_burn::training_device;
use bnn_examples::{flat, moons_task};
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor, TensorData};
use std::error::Error;

/// The moons' noise: the classes overlap.
const NOISE: f64 = 0.3;

/// Posterior draws per prediction of the sampled methods.
const SAMPLES: usize = 50;

/// A boxed two-moons classifier.
type Model = Box<dyn Predict<Input = Tensor<2>, Prediction = ClassPrediction>>;

fn main() -> Result<(), Box<dyn Error>> {
    // Overlapping moons (noise 0.3), so that calibration has something to show.
    let mut task = moons_task()?;
    task.train = bnn_datasets::toy::two_moons(1000, NOISE, 10);
    task.test = bnn_datasets::toy::two_moons(1000, NOISE, 11);
    task.sx = bnn_datasets::Standardizer::fit(&flat(&task.train.x), 2)?;
    let device = training_device();
    let plain = device.clone().inner();
    let x = matrix(&task.sx.transform(&flat(&task.train.x)), 2, &device);
    let labels: Vec<i64> = task.train.label.iter().map(|&l| l as i64).collect();
    let y = Tensor::<1, Int>::from_data(TensorData::new(labels, [task.train.label.len()]), &device);
    let test_x = matrix(&task.sx.transform(&flat(&task.test.x)), 2, &plain);
    let far_x = matrix(&task.sx.transform(&flat(&task.far)), 2, &plain);
    let config = |seed: u64| {
        TrainConfig::new(200)
            .with_batch_size(100)
            .with_learning_rate(1e-2)
            .with_seed(seed)
            .with_progress(false)
    };
    let fit = |weights: WeightConfig, seed: u64| -> Result<Classifier, Box<dyn Error>> {
        let build = |d: &Device| {
            MlpConfig::new(2, vec![50, 50], 2)
                .with_weights(weights.clone())
                .init_classifier(d)
        };
        Ok(train_built(build, (x.clone(), y.clone()), &config(seed))?.0)
    };
    let point = || WeightConfig::of(PosteriorConfig::point());
    let map = fit(point(), 0)?;
    let swag = |seed: u64| -> Result<_, Box<dyn Error>> {
        let net = fit(point(), seed)?;
        let mut sgd = config(seed + 100);
        sgd.epochs = 60;
        let swag = SwagConfig::new()
            .with_rank(20)
            .with_every_steps(5)
            .with_skip_epochs(10);
        Ok(Swag::fit_at_posterior_rate(net, x.clone(), y.clone(), sgd, swag, 64)?.0)
    };
    let plain_y = y.clone().without_autodiff();
    let plain_x = x.clone().without_autodiff();
    let methods: Vec<(&str, Model, PredictMode)> = vec![
        ("MAP", Box::new(map.valid()), PredictMode::Samples(1)),
        (
            "Laplace (last layer)",
            Box::new(LastLayerLaplace::fit(
                map.valid(),
                plain_x.clone(),
                plain_y.clone(),
                &LaplaceConfig::new(),
            )?),
            PredictMode::Moments,
        ),
        (
            "Laplace (KFAC)",
            Box::new(NetworkLaplace::fit(
                map.valid(),
                plain_x,
                plain_y,
                &NetworkLaplaceConfig::new(),
            )?),
            PredictMode::Moments,
        ),
        (
            "MFVI",
            Box::new(fit(WeightConfig::of(PosteriorConfig::mean_field()), 0)?.valid()),
            PredictMode::Samples(SAMPLES),
        ),
        (
            "Low-rank",
            Box::new(fit(WeightConfig::of(PosteriorConfig::low_rank(2)), 0)?.valid()),
            PredictMode::Samples(SAMPLES),
        ),
        (
            "Radial",
            Box::new(fit(WeightConfig::of(PosteriorConfig::radial()), 0)?.valid()),
            PredictMode::Samples(SAMPLES),
        ),
        (
            "Deep ensemble (5)",
            Box::new(
                Ensemble::train(5, |m| fit(point(), 10 + m as u64).map(|n| n.valid()))
                    .map_err(|(_, e)| e)?,
            ),
            PredictMode::Samples(1),
        ),
        (
            "MultiSWAG (3)",
            Box::new(Ensemble::train(3, |m| swag(20 + m as u64)).map_err(|(_, e)| e)?),
            PredictMode::Samples(SAMPLES / 3),
        ),
    ];

    println!("== Two moons (noise {NOISE}), 2-50-50-2 ReLU net, 1 000 training and test points\n");
    println!("| method | accuracy | NLL | ECE | entropy test | entropy far | AUROC far |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let test_labels = &task.test.label;
    let mut curves = Vec::new();
    for (name, model, mode) in &methods {
        let test = model.predict(test_x.clone(), *mode)?;
        let far = model.predict(far_x.clone(), *mode)?;
        let probs = to_vec(test.mean());
        let acc = bnn_burn::metrics::accuracy(&probs, 2, test_labels);
        let ll: Vec<f64> = probs
            .chunks(2)
            .zip(test_labels)
            .map(|(p, &l)| p[l].max(1e-30).ln())
            .collect();
        let (h_in, h_far) = (to_vec(test.entropy()), to_vec(far.entropy()));
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            acc,
            nll(&ll),
            ece(&probs, 2, test_labels, 10),
            mean(&h_in),
            mean(&h_far),
            auroc(&h_in, &h_far)
        );
        curves.push((name, reliability_curve(&probs, 2, test_labels, 5)));
    }
    println!(
        "\nCalibration curves (5 confidence bins on [0, 1]: accuracy / mean confidence, count):\n"
    );
    for (name, bins) in curves {
        let cells: Vec<String> = bins
            .iter()
            .filter(|b| b.count > 0)
            .map(|b| format!("{:.2}/{:.2} ({})", b.accuracy, b.confidence, b.count))
            .collect();
        println!("- {name}: {}", cells.join(", "));
    }

    // Calibration of MAP on held-out points (a fresh draw of the moons), checked on the test set.
    let held = bnn_datasets::toy::two_moons(500, NOISE, 12);
    let held_x = matrix(&task.sx.transform(&flat(&held.x)), 2, &plain);
    let held_y: Vec<i64> = held.label.iter().map(|&l| l as i64).collect();
    let held_y = Tensor::<1, Int>::from_data(TensorData::new(held_y, [held.label.len()]), &plain);
    let test_y: Vec<i64> = test_labels.iter().map(|&l| l as i64).collect();
    let test_y = Tensor::<1, Int>::from_data(TensorData::new(test_y, [test_labels.len()]), &plain);
    let model = &methods[0].1;
    let on_held = model.predict(held_x, PredictMode::Samples(1))?;
    let on_test = model.predict(test_x, PredictMode::Samples(1))?;
    let t = TemperatureScaling::fit(&on_held, held_y.clone())?;
    let tempered = t.apply(&on_test)?;
    let ece_of = |p: &ClassPrediction| ece(&to_vec(p.mean()), 2, test_labels, 10);
    println!(
        "\nMAP, temperature T = {:.2} from 500 held-out points: test ECE {:.3} → {:.3}",
        t.temperature,
        ece_of(&on_test),
        ece_of(&tempered)
    );
    let sets = ConformalSets::fit(&on_held, held_y, 0.05, 1)?;
    let (coverage, size) = sets.coverage(&on_test, test_y, 2)?;
    println!(
        "MAP, conformal class sets at α = 0.05: test coverage {coverage:.3}, mean set size {size:.2}"
    );
    Ok(())
}
