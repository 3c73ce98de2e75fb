//! Chapter example, Haußmann (2021) *Bayesian neural networks for probabilistic machine
//! learning*, ch. 4: active learning with the CLT-BNN, and RAL's learned acquisition.
//!
//! A CLT-BNN classifier (mean-field weights, moments through every ReLU, the multi-label probit)
//! labels a pool round by round on the library's loop (`bnn_burn::active`): at random, by its
//! closed-form max entropy and BALD, and by RAL (Alg. 1), a policy network that picks among
//! thinned top-entropy candidates and learns from each round's improvement in the picked rows'
//! likelihood. A short budget on MNIST when its files are found (a pool of 3 000, 20 → 120
//! labels by 5), else on built-in 8×8 pattern images; the bench's `active --study mnist` runs
//! Table 4.1's protocol.
//!
//! `cargo run --release --example haussmann_ch4_ral`

use bnn_burn::active::{
    Acquire, Acquisition, ActiveConfig, ActiveError, ActiveHistory, ActiveLearning, ActiveTask,
    CltScorer, Ral, RalConfig, Retrain, Selection,
};
use bnn_burn::host::{labels, matrix, to_vec};
use bnn_burn::likelihood::{LogitRule, MultiLabelProbit};
use bnn_burn::nets::{Bnn, MlpBody, MlpConfig, MomentConfig};
use bnn_burn::predict::{Predict, PredictMode};
use bnn_burn::recipes::moment_weights;
use bnn_burn::train::{Inference, TrainConfig, train};
use bnn_burn::training_device;
use bnn_datasets::{ImageSet, MnistFamily, Normalization};
use bnn_examples::{pattern_images, quick_mnist};
use burn::module::Module;
use burn::tensor::Device;
use std::collections::BTreeMap;
use std::error::Error;

type Net = Bnn<MlpBody, MultiLabelProbit>;

/// The classifier's side of the loop: warm-started moment training, test error.
struct Clt {
    x: Vec<f64>,
    y: Vec<usize>,
    test: (Vec<f64>, Vec<usize>),
    width: usize,
    device: Device,
}

impl ActiveTask<Net> for Clt {
    fn fit(
        &mut self,
        round: usize,
        rows: &[usize],
        _: Option<&[f64]>,
        warm: Option<Net>,
    ) -> Result<Net, ActiveError> {
        let net = match warm {
            Some(net) => net,
            None => {
                self.device.seed(0);
                MlpConfig::new(self.width, vec![100], 10)
                    .with_weights(moment_weights(10.0))
                    .init(MultiLabelProbit, &self.device)?
                    .with_moments(
                        MomentConfig::clt()
                            .with_train_logits(LogitRule::Probit)
                            .with_predict_logits(LogitRule::Probit),
                    )?
            }
        };
        let w = self.width;
        let x: Vec<f64> = rows
            .iter()
            .flat_map(|&r| self.x[r * w..(r + 1) * w].to_vec())
            .collect();
        let y: Vec<usize> = rows.iter().map(|&r| self.y[r]).collect();
        let config = TrainConfig::new(20)
            .with_inference(Inference::Moments)
            .with_batch_size(10)
            .with_learning_rate(1e-3)
            .with_seed(round as u64)
            .with_progress(false);
        let data = (matrix(&x, w, &self.device), labels(&y, &self.device));
        Ok(train(net, data, &config)?.0)
    }

    fn evaluate(
        &mut self,
        model: &Net,
        _: &ActiveHistory,
    ) -> Result<BTreeMap<String, f64>, ActiveError> {
        let plain = self.device.clone().inner();
        let x = matrix(&self.test.0, self.width, &plain);
        let p = model.clone().valid().predict(x, PredictMode::Moments)?;
        let predicted = to_vec(p.predicted_class().float());
        let wrong = predicted
            .iter()
            .zip(&self.test.1)
            .filter(|(p, y)| **p as usize != **y)
            .count();
        let error = 100.0 * wrong as f64 / self.test.1.len() as f64;
        Ok(BTreeMap::from([("error".to_string(), error)]))
    }
}

/// Flattened normalised images and their labels.
fn flat(set: &ImageSet, norm: &Normalization) -> (Vec<f64>, Vec<usize>) {
    let rows: Vec<usize> = (0..set.len()).collect();
    let x = set
        .normalized(&rows, norm)
        .into_iter()
        .map(f64::from)
        .collect();
    (x, set.labels.iter().map(|l| *l as usize).collect())
}

fn main() -> Result<(), Box<dyn Error>> {
    bnn_burn::device::keep_freed_memory();
    let (pool, test, norm, name) = match quick_mnist(3_000, 2_000) {
        Some((train, test, _)) => (train, test, MnistFamily::Mnist.normalization(), "MNIST"),
        None => (
            pattern_images(3_000, 0.15, 1)?,
            pattern_images(1_000, 0.15, 2)?,
            Normalization::unit(1),
            "built-in 8×8 images",
        ),
    };
    let (x, y) = flat(&pool, &norm);
    let width = pool.image_size();
    let device = training_device();
    println!(
        "== Active learning on {name}: CLT-BNN MLP {width}-100-10, a pool of {}, 20 random \
         labels then 5 per round to 120, warm-started, 20 epochs per round\n",
        pool.len()
    );
    println!("| acquisition | test error % at 20, 45, 70, 95, 120 labels | mean over the curve |");
    println!("|---|---|---:|");
    let maxent = CltScorer::new(false);
    let bald = CltScorer::new(true);
    let ral_config = RalConfig {
        top: 500,
        every: 10,
        kl_weight: 1.0 / 20.0,
        ..RalConfig::default()
    };
    let names = ["random", "max entropy", "BALD", "RAL"];
    for name in names {
        let mut task = Clt {
            x: x.clone(),
            y: y.clone(),
            test: flat(&test, &norm),
            width,
            device: device.clone(),
        };
        let mut fixed;
        let mut ral;
        let acquisition: &mut dyn Acquire<Net> = match name {
            "random" => {
                fixed = Acquisition::random();
                &mut fixed
            }
            "max entropy" => {
                fixed = Acquisition::new(&maxent, Selection::Top);
                &mut fixed
            }
            "BALD" => {
                fixed = Acquisition::new(&bald, Selection::Top);
                &mut fixed
            }
            _ => {
                ral = Ral::new(ral_config.clone(), 10, y.clone(), &device)?;
                &mut ral
            }
        };
        let config = ActiveConfig::new(20, 5, 120)
            .with_retrain(Retrain::Warm)
            .with_seed(1);
        let (_, history) =
            ActiveLearning::new(config).run(acquisition, matrix(&x, width, &device), &mut task)?;
        let curve = history.curve("error");
        let at: Vec<String> = curve
            .iter()
            .filter(|(n, _)| (n - 20) % 25 == 0)
            .map(|(_, e)| format!("{e:.1}"))
            .collect();
        let mean = curve.iter().map(|c| c.1).sum::<f64>() / curve.len() as f64;
        println!("| {name} | {} | {mean:.1} |", at.join(", "));
    }
    println!(
        "\nOne run each: the thesis's differences (Table 4.1) are a few points, averaged over 5 \
         runs of 70 rounds."
    );
    Ok(())
}
