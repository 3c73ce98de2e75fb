//! Haußmann (2021) Tables 4.1–4.2, reduced: active learning on MNIST or Fashion-MNIST with the
//! CLT-BNN (strided LeNet5, multi-label probit, prior α = 10), from 50 random labels to 400 by 5
//! per round, acquired at random, by max entropy, BALD, thinned max entropy or RAL (and its two
//! ablations); the test error after every round, its average over the curve and its last value.

use super::ActiveOptions;
use crate::experiment;
use crate::runner::{Finished, Harness, ReportInput, TaskContext};
use crate::uci::fmt_mean_se;
use bnn_burn::active::{
    Acquisition, ActiveConfig, ActiveError, ActiveHistory, ActiveLearning, ActiveTask, CltScorer,
    Ral, RalConfig, Retrain, Selection,
};
use bnn_burn::host::to_vec;
use bnn_burn::likelihood::{LogitRule, MultiLabelProbit};
use bnn_burn::metrics::mean_and_standard_error;
use bnn_burn::nets::{Bnn, ConvBody, ConvNetConfig, MomentConfig};
use bnn_burn::predict::{Predict, PredictMode};
use bnn_burn::recipes::moment_weights;
use bnn_burn::train::{Inference, TrainConfig, train};
use bnn_burn::training_device;
use bnn_datasets::{ImageSet, MnistFamily, Normalization};
use burn::module::Module;
use burn::tensor::Device;
use std::collections::BTreeMap;
use std::error::Error;

/// The acquisitions of Tables 4.1 and 4.2.
pub const ACQUISITIONS: [&str; 7] = [
    "random",
    "maxent",
    "bald",
    "ral",
    "maxent-thinned",
    "ral-nograd",
    "ral-reinit",
];

/// Table 4.1's MNIST and Fashion-MNIST columns and Table 4.2's rows: (data set, acquisition,
/// average error %, its sd, final error %, its sd), mean ± standard deviation over 5 runs.
pub const PUBLISHED: [(&str, &str, f64, f64, f64, f64); 11] = [
    ("mnist", "random", 19.01, 1.55, 10.41, 2.28),
    ("mnist", "maxent", 19.81, 2.10, 8.61, 1.25),
    ("mnist", "bald", 17.22, 1.33, 6.91, 0.23),
    ("mnist", "ral", 16.38, 0.79, 6.81, 0.99),
    ("fashion", "random", 28.70, 0.61, 24.64, 0.48),
    ("fashion", "maxent", 30.43, 1.48, 25.72, 1.28),
    ("fashion", "bald", 30.93, 0.97, 26.85, 0.49),
    ("fashion", "ral", 28.51, 0.71, 23.69, 0.73),
    ("fashion", "maxent-thinned", 29.81, 1.59, 24.53, 1.58),
    ("fashion", "ral-nograd", 28.57, 0.54, 24.75, 0.67),
    ("fashion", "ral-reinit", 28.90, 0.10, 24.12, 0.99),
];

/// One run of one acquisition.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MnistTask {
    /// The acquisition.
    pub acquisition: String,
    /// The run: its pool, initial labels and model seeds.
    pub run: usize,
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MnistRow {
    /// The run.
    pub task: MnistTask,
    /// `(labels, test error %)` after every round.
    pub curve: Vec<(usize, f64)>,
    /// The mean of the curve's errors (Table 4.1's "Average").
    pub average_error: f64,
    /// The error at the last round ("Final").
    pub final_error: f64,
    /// RAL's mean reward per episode (empty for the fixed rules).
    pub rewards: Vec<f64>,
    /// Wall seconds.
    pub seconds: f64,
}

/// The data of the study: the pool's images and labels and the test images.
pub struct MnistStudy<'a> {
    options: &'a ActiveOptions,
    family: MnistFamily,
    train: ImageSet,
    test: ImageSet,
    digest: String,
}

impl<'a> MnistStudy<'a> {
    /// The study of `options` on `train` (the pool is drawn from it) and `test`.
    pub fn new(
        options: &'a ActiveOptions,
        family: MnistFamily,
        train: ImageSet,
        test: ImageSet,
    ) -> Self {
        Self {
            options,
            family,
            digest: experiment::image_digest([&train, &test]),
            train,
            test,
        }
    }

    /// The CLT rules of the thesis's code: the plug-in probit loss and predictive.
    fn clt() -> MomentConfig {
        MomentConfig::clt()
            .with_train_logits(LogitRule::Probit)
            .with_predict_logits(LogitRule::Probit)
    }

    /// One run: its pool rows of the training images, then the loop.
    fn run_one(&self, task: &MnistTask, ctx: &TaskContext) -> Result<MnistRow, Box<dyn Error>> {
        let started = std::time::Instant::now();
        let o = self.options;
        let seed = experiment::derive(o.exp.seed, &["active", "mnist"], task.run as u64);
        let mut rng = bnn_burn::host::HostNormals::new(seed);
        let pool_size = o.pool().min(self.train.len());
        let pool_rows = rng.choose_distinct(self.train.len(), pool_size);
        let pool_set = self.train.select(&pool_rows);
        let norm = self.family.normalization();
        let device = training_device();
        let all: Vec<usize> = (0..pool_set.len()).collect();
        let pool = pool_set.batch(&all, &norm, &device).images;
        let labels: Vec<usize> = pool_set.labels.iter().map(|l| *l as usize).collect();
        let rounds = (o.mnist_budget() - o.initial()).div_ceil(o.per_round()) + 1;
        let mut fit = CltTask {
            pool: &pool_set,
            test: &self.test,
            norm: &norm,
            device: device.clone(),
            seed,
            rounds,
            options: o,
        };
        let config = ActiveConfig::new(o.initial(), o.per_round(), o.mnist_budget())
            .with_retrain(Retrain::Warm)
            .with_seed(seed);
        // Every round is saved in the task's state folder; a resumed run continues it.
        if !ctx.resume {
            let _ = std::fs::remove_dir_all(&ctx.state);
        }
        let looped = ActiveLearning::new(config).with_state(&ctx.state);
        let maxent = CltScorer::new(false);
        let bald = CltScorer::new(true);
        let ral = |learn: bool, reinit: bool| -> Result<Ral, ActiveError> {
            let config = RalConfig {
                learn,
                reinit,
                kl_weight: 1.0 / (rounds - 1).max(1) as f64,
                seed,
                ..RalConfig::default()
            };
            Ral::new(config, 10, labels.clone(), &device)
        };
        let fixed = |name: &str| -> Option<Acquisition<'_, Net>> {
            Some(match name {
                "random" => Acquisition::random(),
                "maxent" => Acquisition::new(&maxent, Selection::Top),
                "bald" => Acquisition::new(&bald, Selection::Top),
                "maxent-thinned" => Acquisition::new(
                    &maxent,
                    Selection::Thinned {
                        every: 20,
                        from: 1000,
                    },
                ),
                _ => return None,
            })
        };
        let (history, rewards) = match (task.acquisition.as_str(), fixed(&task.acquisition)) {
            (_, Some(mut a)) => (looped.run(&mut a, pool, &mut fit)?.1, Vec::new()),
            (name @ ("ral" | "ral-nograd" | "ral-reinit"), None) => {
                let mut r = ral(name != "ral-nograd", name == "ral-reinit")?;
                let h = looped.run(&mut r, pool, &mut fit)?.1;
                let rewards = r
                    .episodes()
                    .iter()
                    .map(|e| bnn_burn::metrics::mean(&e.rewards))
                    .collect();
                (h, rewards)
            }
            (other, None) => return Err(format!("--acquisition {other}: unknown").into()),
        };
        let curve = history.curve("error");
        let errors: Vec<f64> = curve.iter().map(|c| c.1).collect();
        Ok(MnistRow {
            task: task.clone(),
            average_error: bnn_burn::metrics::mean(&errors),
            final_error: *errors.last().unwrap_or(&f64::NAN),
            curve,
            rewards,
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}

/// The classifier.
type Net = Bnn<ConvBody, MultiLabelProbit>;

/// The CLT-BNN's side of the loop: warm-started training on the labelled pool rows, the test
/// error by the closed-form predictive.
struct CltTask<'a> {
    pool: &'a ImageSet,
    test: &'a ImageSet,
    norm: &'a Normalization,
    device: Device,
    seed: u64,
    rounds: usize,
    options: &'a ActiveOptions,
}

impl ActiveTask<Net> for CltTask<'_> {
    fn fit(
        &mut self,
        round: usize,
        rows: &[usize],
        _: Option<&[f64]>,
        warm: Option<Net>,
    ) -> Result<Net, ActiveError> {
        let o = self.options;
        let net = match warm {
            Some(n) => n,
            None => {
                self.device.seed(self.seed);
                let [c, h, w] = self.pool.shape();
                ConvNetConfig::lenet5([c, h, w], 10)
                    .with_weights(moment_weights(10.0))
                    .init(MultiLabelProbit, &self.device)?
                    .with_moments(MnistStudy::clt())?
            }
        };
        let b = self.pool.batch(rows, self.norm, &self.device);
        // The thesis's code lowers the rate linearly over the episodes.
        let decay = (self.rounds - round.min(self.rounds - 1)) as f64 / self.rounds as f64;
        let config = TrainConfig::new(o.mnist_epochs())
            .with_inference(Inference::Moments)
            .with_batch_size(o.mnist_batch_size())
            .with_learning_rate(o.mnist_learning_rate() * decay)
            .with_seed(self.seed ^ round as u64)
            .with_progress(false);
        Ok(train(net, (b.images, b.labels), &config)?.0)
    }

    fn evaluate(
        &mut self,
        model: &Net,
        _: &ActiveHistory,
    ) -> Result<BTreeMap<String, f64>, ActiveError> {
        let net = model.clone().valid();
        let plain = self.device.clone().inner();
        let mut wrong = 0usize;
        let rows: Vec<usize> = (0..self.test.len()).collect();
        for chunk in rows.chunks(1000) {
            let b = self.test.batch(chunk, self.norm, &plain);
            let p = net.predict(b.images, PredictMode::Moments)?;
            let predicted = to_vec(p.predicted_class().float());
            wrong += predicted
                .iter()
                .zip(chunk)
                .filter(|(p, r)| **p as u8 != self.test.labels[**r])
                .count();
        }
        let error = 100.0 * wrong as f64 / self.test.len() as f64;
        Ok(BTreeMap::from([("error".to_string(), error)]))
    }
}

impl Harness for MnistStudy<'_> {
    type Task = MnistTask;
    type Row = MnistRow;

    const NAME: &'static str = "active";
    const FORMAT: u32 = 2;

    fn tasks(&self) -> Vec<MnistTask> {
        let o = self.options;
        let mut out = Vec::new();
        for run in 0..o.runs {
            for a in o.acquisitions() {
                out.push(MnistTask {
                    acquisition: a.clone(),
                    run,
                });
            }
        }
        out
    }

    fn task_id(&self, t: &MnistTask) -> String {
        format!(
            "{} / {} / run {}",
            o_name(self.family),
            t.acquisition,
            t.run
        )
    }

    fn run_key(&self) -> serde_json::Value {
        let o = self.options;
        serde_json::json!({
            "seed": o.exp.seed,
            "study": o.study,
            "dataset": o_name(self.family),
            "pool": o.pool(),
            "initial": o.initial(),
            "per_round": o.per_round(),
            "budget": o.mnist_budget(),
            "epochs": o.mnist_epochs(),
            "batch_size": o.mnist_batch_size(),
            "learning_rate": o.mnist_learning_rate(),
            "data": self.digest,
        })
    }

    fn task_key(&self, _: &MnistTask) -> serde_json::Value {
        serde_json::json!({})
    }

    fn run_task(&self, task: &MnistTask, ctx: &TaskContext) -> Result<MnistRow, Box<dyn Error>> {
        self.run_one(task, ctx)
    }

    fn describe(&self, f: &Finished<MnistTask, MnistRow>) -> String {
        format!(
            "[active] {}: average error {:.2} %, final {:.2} % ({:.0} s)",
            f.id, f.row.average_error, f.row.final_error, f.seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let rows = run.rows();
        let mut md = format!(
            "# Active learning with the CLT-BNN on {} (Haußmann 2021 Tables 4.1–4.2, reduced)\n\n\
             A pool of {} training images per run, {} random labels, then {} per round to {}; \
             the strided LeNet5 CLT-BNN warm-started, {} epochs per round at batch {} (Adam {}, \
             lowered linearly over the rounds); test error on {} images. Ours: mean ± standard \
             error over runs; the thesis: mean ± standard deviation over 5 runs.\n\n",
            o_name(self.family),
            self.options.pool(),
            self.options.initial(),
            self.options.per_round(),
            self.options.mnist_budget(),
            self.options.mnist_epochs(),
            self.options.mnist_batch_size(),
            self.options.mnist_learning_rate(),
            self.test.len(),
        );
        md.push_str(&table(&rows, o_name(self.family)));
        md.push_str(&format!("\nWall time {:.0} s.\n", run.wall_seconds));
        run.write_report(self.options, serde_json::json!({}), &md)
    }
}

/// The data set's name in records and tables.
fn o_name(family: MnistFamily) -> &'static str {
    match family {
        MnistFamily::Mnist => "mnist",
        MnistFamily::FashionMnist => "fashion",
    }
}

/// Average and final error per acquisition beside the thesis's, with `z`: the difference in
/// combined standard errors ([`crate::uci::z_score`], positive where ours is lower; the thesis's
/// standard deviation over 5 runs taken to a standard error by `√5`).
pub fn table(rows: &[MnistRow], dataset: &str) -> String {
    let mut md = String::from(
        "| acquisition | runs | average error % | thesis | z | final error % | thesis | z |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for a in ACQUISITIONS {
        let runs: Vec<&MnistRow> = rows.iter().filter(|r| r.task.acquisition == a).collect();
        if runs.is_empty() {
            continue;
        }
        let published = PUBLISHED.iter().find(|p| p.0 == dataset && p.1 == a);
        let cells = |f: fn(&MnistRow) -> f64, thesis: Option<(f64, f64)>| {
            let v: Vec<f64> = runs.iter().map(|r| f(r)).collect();
            let ours = mean_and_standard_error(&v);
            let z = thesis
                .and_then(|(m, sd)| crate::uci::z_score(ours, (m, sd / 5f64.sqrt()), false))
                .map_or("–".to_string(), |z| format!("{z:+.1}"));
            let thesis = thesis.map_or("–".to_string(), |(m, sd)| format!("{m:.2} ± {sd:.2}"));
            format!("{} | {thesis} | {z}", fmt_mean_se(ours.0, ours.1, 2))
        };
        md.push_str(&format!(
            "| {a} | {} | {} | {} |\n",
            runs.len(),
            cells(|r| r.average_error, published.map(|p| (p.2, p.3))),
            cells(|r| r.final_error, published.map(|p| (p.4, p.5))),
        ));
    }
    md.push('\n');
    md.push_str(&paired_table(rows));
    md
}

/// Each acquisition's errors less random's in the same run (the same pool, initial labels and
/// seeds), mean ± standard error over the runs both have: pairing removes the spread between
/// runs that the unpaired columns carry.
pub fn paired_table(rows: &[MnistRow]) -> String {
    let mut md = String::from(
        "| acquisition | paired runs | average − random | final − random |\n\
         |---|---:|---:|---:|\n",
    );
    let random = |run: usize| {
        rows.iter()
            .find(|r| r.task.acquisition == "random" && r.task.run == run)
    };
    for a in ACQUISITIONS.iter().filter(|a| **a != "random") {
        let pairs: Vec<(&MnistRow, &MnistRow)> = rows
            .iter()
            .filter(|r| r.task.acquisition == *a)
            .filter_map(|r| random(r.task.run).map(|b| (r, b)))
            .collect();
        if pairs.is_empty() {
            continue;
        }
        let cell = |f: fn(&MnistRow) -> f64| {
            let d: Vec<f64> = pairs.iter().map(|(r, b)| f(r) - f(b)).collect();
            let (m, se) = mean_and_standard_error(&d);
            fmt_mean_se(m, se, 2)
        };
        md.push_str(&format!(
            "| {a} | {} | {} | {} |\n",
            pairs.len(),
            cell(|r| r.average_error),
            cell(|r| r.final_error)
        ));
    }
    md
}
