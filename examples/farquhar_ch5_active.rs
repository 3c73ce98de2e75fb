//! Chapter example, Farquhar (2022) *Understanding approximation for Bayesian inference in
//! neural networks*, ch. 5 §5.2: the statistical bias of active learning, and active testing.
//!
//! A radial BNN (MLP, one hidden layer of 50) learns an unbalanced pool (10 % random labels,
//! digits kept in proportions 1 … 0.01) on the library's loop (`bnn_burn::active`): one label
//! per round, picked by BALD under the stochastic proposal `q(i) ∝ exp(T·BALD_i)`, each pick's
//! `q` recorded. At the end, models trained under the plain mean R̃ and the unbiased R_PURE
//! and R_LURE (eqs. 5.7–5.8, per-row weights of the ELBO's data term) are tested. Then active
//! testing: a fixed model's test risk estimated from a few labels picked by its predictive
//! entropy, unbiased by LURE's weights, against as many uniform labels. MNIST when its files
//! are found, else built-in 8×8 pattern images; the bench's `active --study farquhar` runs the
//! trajectories of Figs. 5.5–5.8.
//!
//! `cargo run --release --example farquhar_ch5_active`

use bnn_burn::Prior;
use bnn_burn::active::{
    Acquisition, ActiveConfig, ActiveError, ActiveHistory, ActiveLearning, ActiveTask, ClassScore,
    ClassScorer, Risk, Selection, active_test,
};
use bnn_burn::host::{HostNormals, to_vec};
use bnn_burn::nets::{Classifier, MlpConfig};
use bnn_burn::posterior::PosteriorConfig;
use bnn_burn::predict::{Predict, PredictMode};
use bnn_burn::prelude::WeightConfig;
use bnn_burn::train::{TrainConfig, Trainer};
use bnn_burn::training_device;
use bnn_datasets::{ImageSet, MnistFamily, Normalization};
use bnn_examples::{pattern_images, quick_mnist};
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor};
use std::collections::BTreeMap;
use std::error::Error;

/// Farquhar 2022 App. C's class proportions for digits 0–9.
const PROPORTIONS: [f64; 10] = [1.0, 0.5, 0.5, 0.2, 0.2, 0.2, 0.1, 0.1, 0.01, 0.01];

/// The classifier's side of the loop: a radial MLP from scratch on the labelled rows (each
/// row's term weighted as the loop says), tested by NLL and accuracy.
struct Radial {
    pool: ImageSet,
    test: ImageSet,
    norm: Normalization,
    device: Device,
}

impl Radial {
    fn xy(&self, set: &ImageSet, rows: &[usize], device: &Device) -> (Tensor<2>, Tensor<1, Int>) {
        let b = set.batch(rows, &self.norm, device);
        (b.images.reshape([rows.len(), set.image_size()]), b.labels)
    }

    /// A radial MLP trained for 300 steps on `rows` of `set`, weighted by `weights`.
    fn train(
        &self,
        set: &ImageSet,
        rows: &[usize],
        weights: Option<Vec<f64>>,
        seed: u64,
    ) -> Result<Classifier, ActiveError> {
        let batch = 16.min(rows.len());
        let config = TrainConfig::new((300 * batch).div_ceil(rows.len()))
            .with_batch_size(batch)
            .with_learning_rate(5e-4)
            .with_seed(seed)
            .with_progress(false);
        let mut trainer = Trainer::new(config);
        if let Some(w) = weights {
            trainer = trainer.with_row_weights(w);
        }
        let width = set.image_size();
        let build = move |d: &Device| {
            let mut weights = WeightConfig::of(PosteriorConfig::radial());
            weights.prior = Prior::gaussian(0.25);
            MlpConfig::new(width, vec![50], 10)
                .with_weights(weights)
                .init_classifier(d)
        };
        Ok(trainer
            .build_and_fit(build, self.xy(set, rows, &self.device))?
            .0)
    }

    /// Per-image NLL and predictive entropy of `model` on `set`.
    fn losses(
        &self,
        model: &Classifier,
        set: &ImageSet,
    ) -> Result<(Vec<f64>, Vec<f64>), ActiveError> {
        let plain = self.device.clone().inner();
        let rows: Vec<usize> = (0..set.len()).collect();
        let (x, y) = self.xy(set, &rows, &plain);
        let p = model.clone().valid().predict(x, PredictMode::Samples(20))?;
        let nll = to_vec(p.log_prob(y)).into_iter().map(|l| -l).collect();
        Ok((nll, to_vec(p.entropy())))
    }

    /// Test NLL and accuracy (%).
    fn scores(&self, model: &Classifier) -> Result<(f64, f64), ActiveError> {
        let plain = self.device.clone().inner();
        let rows: Vec<usize> = (0..self.test.len()).collect();
        let (x, y) = self.xy(&self.test, &rows, &plain);
        let p = model.clone().valid().predict(x, PredictMode::Samples(20))?;
        let nll = -to_vec(p.log_prob(y)).iter().sum::<f64>() / rows.len() as f64;
        let predicted = to_vec(p.predicted_class().float());
        let right = predicted
            .iter()
            .zip(&self.test.labels)
            .filter(|(p, y)| **p as u8 == **y)
            .count();
        Ok((nll, 100.0 * right as f64 / rows.len() as f64))
    }
}

impl ActiveTask<Classifier> for Radial {
    fn fit(
        &mut self,
        round: usize,
        rows: &[usize],
        weights: Option<&[f64]>,
        _: Option<Classifier>,
    ) -> Result<Classifier, ActiveError> {
        // Off the autodiff graph for BALD's predictions.
        Ok(self
            .train(&self.pool, rows, weights.map(<[f64]>::to_vec), round as u64)?
            .valid())
    }

    fn evaluate(
        &mut self,
        model: &Classifier,
        _: &ActiveHistory,
    ) -> Result<BTreeMap<String, f64>, ActiveError> {
        let (nll, accuracy) = self.scores(model)?;
        Ok(BTreeMap::from([
            ("nll".to_string(), nll),
            ("accuracy".to_string(), accuracy),
        ]))
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    bnn_burn::device::keep_freed_memory();
    let (train, test, norm, name) = match quick_mnist(20_000, 2_000) {
        Some((train, test, _)) => (train, test, MnistFamily::Mnist.normalization(), "MNIST"),
        None => (
            pattern_images(8_000, 0.2, 1)?,
            pattern_images(1_000, 0.2, 2)?,
            Normalization::unit(1),
            "built-in 8×8 images",
        ),
    };
    let unbalanced = train
        .with_random_labels(0.1, 3)?
        .with_class_proportions(&PROPORTIONS, 4)?;
    let mut rng = HostNormals::new(5);
    let rows = rng.choose_distinct(unbalanced.len(), 1_500);
    let (pool, extra) = (
        unbalanced.select(&rows[..1_000]),
        unbalanced.select(&rows[1_000..]),
    );
    let device = training_device();
    let mut task = Radial {
        pool,
        test,
        norm,
        device,
    };
    println!(
        "== Active learning's bias on unbalanced {name}: radial MLP {}-50-10, a pool of 1 000, \
         10 random labels then 1 per round to 40 by BALD under q ∝ exp(10⁴·BALD)\n",
        task.pool.image_size()
    );
    let bald = ClassScorer::new(ClassScore::Bald, PredictMode::Samples(40));
    let mut acquisition = Acquisition::new(&bald, Selection::Boltzmann { temperature: 1e4 });
    let config = ActiveConfig::new(10, 1, 40).with_seed(6);
    let (model, history) = ActiveLearning::new(config).run(
        &mut acquisition,
        {
            let rows: Vec<usize> = (0..task.pool.len()).collect();
            task.xy(&task.pool, &rows, &task.device.clone().inner()).0
        },
        &mut task,
    )?;
    let labelled = history.rows();
    println!("| training risk | test NLL | accuracy % |");
    println!("|---|---:|---:|");
    let (nll, acc) = task.scores(&model)?;
    println!("| R̃ (plain mean) | {nll:.3} | {acc:.1} |");
    for (label, risk) in [("R_PURE", Risk::Pure), ("R_LURE", Risk::Lure)] {
        let weights = history.weights_under(risk)?;
        let m = task.train(&task.pool, &labelled, weights, 1_000)?;
        let (nll, acc) = task.scores(&m)?;
        println!("| {label} | {nll:.3} | {acc:.1} |");
    }
    // The plain training risk against the pool's: acquired rows are not a uniform sample.
    let (pool_nll, _) = task.losses(&model, &task.pool)?;
    let picked: Vec<f64> = labelled.iter().map(|&r| pool_nll[r]).collect();
    let lure = history.weights_under(Risk::Lure)?.unwrap_or_default();
    println!(
        "\nAt the acquisition model: R̃ = {:.3}, R_LURE = {:.3}, the pool's mean NLL R̂ = {:.3}\n",
        picked.iter().sum::<f64>() / picked.len() as f64,
        picked.iter().zip(&lure).map(|(l, w)| l * w).sum::<f64>() / picked.len() as f64,
        pool_nll.iter().sum::<f64>() / pool_nll.len() as f64,
    );

    // Active testing: one model on the 500 other images, its test risk from 30 labels.
    let rows: Vec<usize> = (0..extra.len()).collect();
    let fixed = task.train(&extra, &rows, None, 2_000)?;
    let (losses, entropy) = task.losses(&fixed, &task.test)?;
    let truth = losses.iter().sum::<f64>() / losses.len() as f64;
    let floor = 0.1 * entropy.iter().sum::<f64>() / entropy.len() as f64;
    let (mut scored, mut uniform) = (0.0, 0.0);
    let repeats = 1_000;
    for r in 0..repeats {
        let mut rng = HostNormals::new(100 + r);
        let t = active_test(
            Selection::Proportional { floor },
            &entropy,
            30,
            |i| losses[i],
            &mut rng,
        )?;
        scored += (t.lure - truth).powi(2) / repeats as f64;
        let u = active_test(Selection::Random, &entropy, 30, |i| losses[i], &mut rng)?;
        uniform += (u.plain - truth).powi(2) / repeats as f64;
    }
    println!(
        "Active testing of a fixed model (test NLL {truth:.3} on {} images), 30 labels, {repeats} \
         repeats:\n  MSE of R_LURE under q ∝ entropy: {scored:.5}\n  MSE of the mean of 30 uniform \
         labels: {uniform:.5}",
        losses.len()
    );
    Ok(())
}
