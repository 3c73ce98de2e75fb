//! Chapter example, Farquhar (2022) *Understanding approximation for Bayesian inference in
//! neural networks*, ch. 5 §5.1: continual learning as Bayesian updating.
//!
//! Single-head split tasks (classes (0, 1), then (2, 3), … (8, 9)) on one ten-class MLP, with
//! the library's loop ([`run_sequence`]): VCL (each task's posterior made the next prior),
//! VCL with 40 k-center coreset images per task, and "coreset only" (the initial prior every
//! task, the coresets fine-tuned on before testing). The thesis's finding: VCL alone forgets
//! every earlier task (average accuracy ≈ 100, 50, 33, 25, 20 %), and the coreset does the
//! heavy lifting. Runs on MNIST when its files are found, else on built-in 8×8 images.
//!
//! `cargo run --release --example farquhar_ch5_continual`

use bnn_burn::continual::{ContinualConfig, ContinualTask, Propagation, run_sequence};
use bnn_burn::host::to_vec;
use bnn_burn::likelihood::Categorical;
use bnn_burn::nets::{Classifier, MlpConfig};
use bnn_burn::posterior::PosteriorConfig;
use bnn_burn::predict::{Predict, PredictMode};
use bnn_burn::prelude::WeightConfig;
use bnn_burn::train::{TrainConfig, train, train_built};
use bnn_burn::training_device;
use bnn_datasets::continual::{SPLIT_PAIRS, split_tasks};
use bnn_datasets::{ImageSet, MnistFamily, Normalization};
use bnn_examples::{pattern_images, quick_mnist};
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor};
use std::error::Error;

/// A split sequence trained by mean-field VI.
struct SplitTasks {
    tasks: Vec<(ImageSet, ImageSet)>,
    norm: Normalization,
    epochs: usize,
    /// Coreset only: the fine-tune keeps the model's own (initial) prior.
    reset: bool,
    device: Device,
}

impl SplitTasks {
    fn xy(&self, set: &ImageSet, rows: &[usize]) -> (Tensor<2>, Tensor<1, Int>) {
        let b = set.batch(rows, &self.norm, &self.device);
        (b.images.reshape([rows.len(), set.image_size()]), b.labels)
    }

    fn config(&self, epochs: usize, seed: u64) -> TrainConfig {
        TrainConfig::new(epochs)
            .with_batch_size(128)
            .with_learning_rate(1e-3)
            .with_seed(seed)
            .with_progress(false)
    }
}

impl ContinualTask<Classifier> for SplitTasks {
    type Error = Box<dyn Error>;

    fn tasks(&self) -> usize {
        self.tasks.len()
    }

    fn inputs(&self, task: usize) -> (Vec<f64>, usize) {
        let set = &self.tasks[task].0;
        let rows: Vec<usize> = (0..set.len()).collect();
        let x = set.normalized(&rows, &self.norm);
        (x.into_iter().map(f64::from).collect(), set.image_size())
    }

    fn fit(
        &mut self,
        task: usize,
        start: Option<Classifier>,
        rows: &[usize],
    ) -> Result<Classifier, Box<dyn Error>> {
        let data = self.xy(&self.tasks[task].0, rows);
        let config = self.config(self.epochs, task as u64);
        Ok(match start {
            Some(net) => train(net, data, &config)?.0,
            None => {
                let width = self.tasks[task].0.image_size();
                let build = move |d: &Device| {
                    MlpConfig::new(width, vec![256, 256], 10)
                        .with_weights(WeightConfig::of(PosteriorConfig::mean_field()))
                        .init(Categorical, d)
                };
                train_built(build, data, &config)?.0
            }
        })
    }

    fn next_prior(&mut self, _: usize, model: Classifier) -> Result<Classifier, Box<dyn Error>> {
        Ok(model.with_posterior_as_prior()?)
    }

    fn fine_tune(
        &mut self,
        model: &Classifier,
        coresets: &[(usize, Vec<usize>)],
    ) -> Result<Classifier, Box<dyn Error>> {
        let start = match self.reset {
            true => model.clone(),
            false => model.clone().with_posterior_as_prior()?,
        };
        let (xs, ys): (Vec<_>, Vec<_>) = coresets
            .iter()
            .map(|(t, rows)| self.xy(&self.tasks[*t].0, rows))
            .unzip();
        let config = self.config(5 * self.epochs, 100);
        Ok(train(start, (Tensor::cat(xs, 0), Tensor::cat(ys, 0)), &config)?.0)
    }

    fn evaluate(&mut self, model: &Classifier, task: usize) -> Result<f64, Box<dyn Error>> {
        let set = &self.tasks[task].1;
        let rows: Vec<usize> = (0..set.len()).collect();
        let (x, _) = self.xy(set, &rows);
        let pred = model
            .clone()
            .valid()
            .predict(x.inner(), PredictMode::Samples(10))?;
        let hits = to_vec(pred.predicted_class().float())
            .iter()
            .zip(&set.labels)
            .filter(|(p, y)| **p as u8 == **y)
            .count();
        Ok(100.0 * hits as f64 / set.len() as f64)
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    bnn_burn::device::keep_freed_memory();
    let (train_set, test_set, norm, epochs, name) = match quick_mnist(10_000, 2_000) {
        Some((train, test, _)) => (train, test, MnistFamily::Mnist.normalization(), 5, "MNIST"),
        None => (
            pattern_images(20_000, 0.1, 1)?,
            pattern_images(500, 0.1, 2)?,
            Normalization::unit(1),
            10,
            "built-in 8×8 images",
        ),
    };
    let tasks: Vec<(ImageSet, ImageSet)> = split_tasks(&train_set, &SPLIT_PAIRS)
        .into_iter()
        .zip(split_tasks(&test_set, &SPLIT_PAIRS))
        .collect();
    println!(
        "== Single-head split {name}: 5 tasks, MLP 256-256 mean-field, {epochs} epochs per task\n"
    );
    println!("| strategy | average accuracy % after tasks 1…5 | final per task |");
    println!("|---|---|---|");
    for (label, config) in [
        ("VCL", ContinualConfig::vcl()),
        ("VCL + coreset 40", ContinualConfig::vcl().with_coreset(40)),
        (
            "coreset only",
            ContinualConfig::vcl()
                .with_coreset(40)
                .with_propagation(Propagation::Reset),
        ),
    ] {
        let device = training_device();
        device.seed(0);
        let mut seq = SplitTasks {
            tasks: tasks.clone(),
            norm: norm.clone(),
            epochs,
            reset: config.propagation == Propagation::Reset,
            device,
        };
        let (_, history) = run_sequence(config, &mut seq)?;
        let fmt = |v: &[f64]| {
            v.iter()
                .map(|a| format!("{a:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "| {label} | {} | {} |",
            fmt(&history.average()),
            fmt(history.scores.last().map_or(&[][..], |r| &r[..]))
        );
    }
    println!(
        "\nVCL keeps only the latest task (the thesis: about 100, 50, 33, 25, 20 %); the \
         coresets bring the earlier tasks back."
    );
    Ok(())
}
