//! One task sequence of images on the library's loop ([`run_sequence`]): an MLP trained task
//! by task, its coresets' fine-tune, and every task's test accuracy after each.

use super::*;
use bnn_burn::continual::{ContinualConfig, ContinualTask, Propagation, run_sequence};
use bnn_burn::nets::{Bnn, MlpBody, MlpConfig};
use bnn_burn::posthoc::{LaplaceStructure, NetworkLaplace, NetworkLaplaceConfig, PriorPrecision};
use bnn_burn::predict::{ClassPrediction, Predict, PredictMode};
use bnn_burn::train::{TrainConfig, train, train_built};
use bnn_burn::{host, training_device};
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor};

/// The hidden widths (VCL's MNIST networks: two layers of 256).
pub const HIDDEN: [usize; 2] = [256, 256];

/// Test images per prediction pass.
const CHUNK: usize = 1_000;

/// The network of a sequence.
type Net<L> = Bnn<MlpBody, L>;

/// How the last task's model becomes the next prior.
type MakePrior<L> = fn(&ImageSequence<'_, L>, usize, Net<L>) -> Result<Net<L>, Box<dyn Error>>;

/// One sequence's data, settings and side records.
pub(crate) struct ImageSequence<'a, L: Likelihood> {
    pub(crate) tasks: &'a [TaskData],
    pub(crate) norm: &'a Normalization,
    pub(crate) method: &'a Method,
    pub(crate) likelihood: L,
    /// Evaluate each task on its own classes only (multi-head).
    pub(crate) multi_head: bool,
    pub(crate) options: &'a ContinualOptions,
    pub(crate) seed: u64,
    pub(crate) prior: MakePrior<L>,
    /// Whether the coresets' fine-tune starts from the posterior made the prior (VCL) or keeps
    /// the model's own prior (coreset only: the initial one).
    pub(crate) tune_from_posterior: bool,
    pub(crate) device: Device,
    /// Test-time-knowledge accuracy, `[t][s]` as the loop's scores.
    pub(crate) known_task: Vec<Vec<f64>>,
    /// The first task's model's mean predictive entropy on the second task's test images.
    pub(crate) second_task_entropy: Option<f64>,
}

impl<L> ImageSequence<'_, L>
where
    L: Likelihood<Target = Tensor<1, Int>, Prediction = ClassPrediction> + Clone,
{
    fn config(&self, epochs: usize, learning_rate: f64, step: u64) -> TrainConfig {
        let o = self.options;
        TrainConfig::new(epochs)
            .with_batch_size(o.batch_size)
            .with_learning_rate(learning_rate)
            .with_seed(experiment::derive(self.seed, &["continual"], step))
            .with_progress(false)
    }

    /// Flattened normalised images and labels of `rows` of `set`.
    fn xy(&self, set: &ImageSet, rows: &[usize]) -> (Tensor<2>, Tensor<1, Int>) {
        let b = set.batch(rows, self.norm, &self.device);
        let n = rows.len();
        (b.images.reshape([n, set.image_size()]), b.labels)
    }

    /// The class prediction of `model` on `set`'s test images, chunk by chunk.
    fn predict(&self, model: &Net<L>, set: &ImageSet) -> Result<Tensor<3>, Box<dyn Error>> {
        let net = model.clone().valid();
        let plain = self.device.clone().inner();
        let mut probs = Vec::new();
        for start in (0..set.len()).step_by(CHUNK) {
            let rows: Vec<usize> = (start..set.len().min(start + CHUNK)).collect();
            let b = set.batch(&rows, self.norm, &plain);
            let x = b.images.reshape([rows.len(), set.image_size()]);
            match net.predict(x, PredictMode::Samples(self.options.samples))? {
                ClassPrediction::Samples(s) => probs.push(s.probs),
                ClassPrediction::Dirichlet(_) => return Err("a sampled class prediction".into()),
            }
        }
        Ok(Tensor::cat(probs, 1))
    }
}

/// `(accuracy over all classes, accuracy over the task's own classes)`, % of `labels`, from
/// per-draw probabilities `[S, B, C]`: a head's prediction is its columns renormalised per draw.
pub(crate) fn accuracies(probs: Tensor<3>, labels: &[u8], classes: &[u8]) -> (f64, f64) {
    let [s, b, c] = probs.dims();
    let p = host::to_vec(probs);
    let (mut all, mut own) = (0usize, 0usize);
    let mut mean = vec![0.0; c];
    let mut head = vec![0.0; c];
    for (i, &y) in labels.iter().enumerate().take(b) {
        mean.fill(0.0);
        head.fill(0.0);
        for d in 0..s {
            let row = &p[(d * b + i) * c..(d * b + i + 1) * c];
            let z: f64 = classes
                .iter()
                .map(|&k| row[k as usize])
                .sum::<f64>()
                .max(1e-300);
            for k in 0..c {
                mean[k] += row[k];
            }
            for &k in classes {
                head[k as usize] += row[k as usize] / z;
            }
        }
        let argmax = |v: &[f64], among: &mut dyn Iterator<Item = usize>| {
            among
                .max_by(|&a, &b| v[a].total_cmp(&v[b]).then(b.cmp(&a)))
                .expect("a class")
        };
        all += usize::from(argmax(&mean, &mut (0..c)) == y as usize);
        own += usize::from(argmax(&head, &mut classes.iter().map(|&k| k as usize)) == y as usize);
    }
    let pct = |k: usize| 100.0 * k as f64 / b as f64;
    (pct(all), pct(own))
}

impl<L> ContinualTask<Net<L>> for ImageSequence<'_, L>
where
    L: Likelihood<Target = Tensor<1, Int>, Prediction = ClassPrediction> + Clone,
{
    type Error = Box<dyn Error>;

    fn tasks(&self) -> usize {
        self.tasks.len()
    }

    fn inputs(&self, task: usize) -> (Vec<f64>, usize) {
        let set = &self.tasks[task].train;
        let rows: Vec<usize> = (0..set.len()).collect();
        let x = set.normalized(&rows, self.norm);
        (x.into_iter().map(f64::from).collect(), set.image_size())
    }

    fn fit(
        &mut self,
        task: usize,
        start: Option<Net<L>>,
        rows: &[usize],
    ) -> Result<Net<L>, Box<dyn Error>> {
        let data = self.xy(&self.tasks[task].train, rows);
        let o = self.options;
        let config = self.config(o.epochs(), o.learning_rate, task as u64);
        let model = match start {
            Some(net) => train(net, data, &config)?.0,
            None => {
                let width = self.tasks[task].train.image_size();
                let weights = self.method.weights.clone();
                let likelihood = self.likelihood.clone();
                let build = move |d: &Device| {
                    MlpConfig::new(width, HIDDEN.to_vec(), CLASSES)
                        .with_weights(weights)
                        .init(likelihood, d)
                };
                train_built(build, data, &config)?.0
            }
        };
        if task == 0 && self.tasks.len() > 1 {
            let probs = self.predict(&model, &self.tasks[1].test)?;
            let entropy =
                ClassPrediction::Samples(bnn_burn::predict::ClassSamples { probs }).entropy();
            self.second_task_entropy = Some(bnn_burn::metrics::mean(&host::to_vec(entropy)));
        }
        Ok(model)
    }

    fn next_prior(&mut self, task: usize, model: Net<L>) -> Result<Net<L>, Box<dyn Error>> {
        (self.prior)(self, task, model)
    }

    fn fine_tune(
        &mut self,
        model: &Net<L>,
        coresets: &[(usize, Vec<usize>)],
    ) -> Result<Net<L>, Box<dyn Error>> {
        let last = coresets.last().map_or(0, |c| c.0);
        let start = match self.tune_from_posterior {
            true => (self.prior)(self, last, model.clone())?,
            false => model.clone(),
        };
        let (xs, ys): (Vec<_>, Vec<_>) = coresets
            .iter()
            .map(|(t, rows)| self.xy(&self.tasks[*t].train, rows))
            .unzip();
        let data = (Tensor::cat(xs, 0), Tensor::cat(ys, 0));
        let o = self.options;
        let config = self.config(
            o.coreset_epochs(),
            o.coreset_learning_rate,
            1_000 + last as u64,
        );
        Ok(train(start, data, &config)?.0)
    }

    fn evaluate(&mut self, model: &Net<L>, task: usize) -> Result<f64, Box<dyn Error>> {
        let set = &self.tasks[task].test;
        let probs = self.predict(model, set)?;
        let (all, own) = accuracies(probs, &set.labels, &self.tasks[task].classes);
        // The loop scores tasks 0..=t after task t: task 0 opens row t.
        if task == 0 {
            self.known_task.push(Vec::new());
        }
        if let Some(row) = self.known_task.last_mut() {
            row.push(own);
        }
        Ok(if self.multi_head { own } else { all })
    }
}

/// VCL's step: the posterior made the prior.
pub(crate) fn posterior_prior<L: Likelihood>(
    _: &ImageSequence<'_, L>,
    _: usize,
    model: Net<L>,
) -> Result<Net<L>, Box<dyn Error>> {
    Ok(model.with_posterior_as_prior()?)
}

/// EWC's step: a diagonal Laplace (GGN = Fisher) on task `task`'s training images, its
/// curvature times `λ_EWC` plus the N(0, 1) prior's precision as the next prior's precision.
pub(crate) fn ewc_prior(
    seq: &ImageSequence<'_, Categorical>,
    task: usize,
    model: Net<Categorical>,
) -> Result<Net<Categorical>, Box<dyn Error>> {
    let set = &seq.tasks[task].train;
    let rows: Vec<usize> = (0..set.len()).collect();
    let (x, y) = seq.xy(set, &rows);
    let config = NetworkLaplaceConfig::new()
        .with_structure(LaplaceStructure::Diagonal)
        .with_prior_precision(PriorPrecision::Fixed { value: 1.0 });
    // On the plain device: the prior's tensors become the next model's tracked leaves.
    let laplace = NetworkLaplace::fit(model.valid(), x.inner(), y.inner(), &config)?;
    Ok(laplace.posterior_as_prior(seq.options.ewc_lambda)?.train())
}

/// Runs one sequence of `tasks` as `task` says and returns its row.
pub(crate) fn run_one(
    options: &ContinualOptions,
    tasks: &[TaskData],
    norm: &Normalization,
    task: &Task,
) -> Result<ContinualRow, Box<dyn Error>> {
    let started = std::time::Instant::now();
    let method = task.method.method(task.family);
    let config = match task.method {
        Strategy::Vcl | Strategy::Ewc => ContinualConfig::vcl(),
        Strategy::VclCoreset => ContinualConfig::vcl().with_coreset(options.coreset),
        Strategy::CoresetOnly => ContinualConfig::vcl()
            .with_coreset(options.coreset)
            .with_propagation(Propagation::Reset),
    };
    let seed = experiment::derive(options.exp.seed, &[&task.id()], 0);
    let multi_head = task.heads == Heads::Multi;
    let device = training_device();
    macro_rules! sequence {
        ($lik:expr, $prior:expr) => {{
            let mut seq = ImageSequence {
                tasks,
                norm,
                method: &method,
                likelihood: $lik,
                multi_head,
                options,
                seed,
                prior: $prior,
                tune_from_posterior: config.propagation == Propagation::Posterior,
                device: device.clone(),
                known_task: Vec::new(),
                second_task_entropy: None,
            };
            let (_, history) = run_sequence(config, &mut seq)?;
            (history, seq.known_task, seq.second_task_entropy)
        }};
    }
    let (history, known_task, entropy) = match (task.method, multi_head) {
        (Strategy::Ewc, false) => sequence!(Categorical, ewc_prior),
        (Strategy::Ewc, true) => return Err("EWC runs single-head only".into()),
        (_, false) => sequence!(Categorical, posterior_prior),
        (_, true) => sequence!(TaskHeads::new(2), posterior_prior),
    };
    Ok(ContinualRow {
        task: task.clone(),
        scores: history.scores,
        known_task,
        second_task_entropy: entropy,
        train_images: tasks.iter().map(|t| t.train.len()).collect(),
        seconds: started.elapsed().as_secs_f64(),
    })
}
