//! Farquhar (2022) §5.2, Figs. 5.5–5.8, reduced: active learning's bias on unbalanced MNIST
//! (10 % random labels, class proportions 1 … 0.01), radial BNN against MC dropout (MLP
//! 784-50-10). BALD picks one row at a time by the Boltzmann proposal; every few labels,
//! models trained under R̃, R_PURE and R_LURE are tested, and the training-risk estimates are
//! set against the pool's risk. Active testing (Fig. 5.7): the LURE estimate of a fixed
//! model's test risk from a few labels picked by its predictive entropy, its MSE per family.

use super::ActiveOptions;
use crate::catalogue::Method;
use crate::experiment;
use crate::runner::{Finished, Harness, ReportInput, TaskContext};
use crate::uci::fmt_mean_se;
use bnn_burn::Prior;
use bnn_burn::active::{
    Acquisition, ActiveConfig, ActiveError, ActiveHistory, ActiveLearning, ActiveTask, ClassScore,
    ClassScorer, Risk, Selection, active_test,
};
use bnn_burn::host::{HostNormals, to_vec};
use bnn_burn::metrics::{mean, mean_and_standard_error};
use bnn_burn::nets::{Classifier, MlpConfig};
use bnn_burn::predict::{Predict, PredictMode};
use bnn_burn::train::TrainConfig;
use bnn_burn::training_device;
use bnn_datasets::{ImageSet, MnistFamily, Normalization};
use burn::module::Module;
use burn::tensor::Device;
use std::collections::BTreeMap;
use std::error::Error;

/// The posterior families compared.
pub const FAMILIES: [&str; 2] = ["radial", "mc-dropout"];

/// Kept fraction of each digit 0–9 (Farquhar 2022 App. C, Table C.1).
pub const PROPORTIONS: [f64; 10] = [1.0, 0.5, 0.5, 0.2, 0.2, 0.2, 0.1, 0.1, 0.01, 0.01];

/// The label-noise fraction of the unbalanced sets.
const RANDOM_LABELS: f64 = 0.1;
/// Labels picked by each active test.
pub const TEST_LABELS: [usize; 3] = [10, 30, 100];
/// Hidden units of the MLP (the thesis's alternative model).
const HIDDEN: usize = 50;
/// The seed stream of active testing's fixed model.
const FIXED_STREAM: u64 = u64::MAX;

/// One trajectory of one family.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FqTask {
    /// The posterior family.
    pub family: String,
    /// The trajectory: its data, initial rows and seeds.
    pub run: usize,
}

/// One evaluation along a trajectory.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FqEval {
    /// Labelled rows.
    pub labels: usize,
    /// Test NLL and accuracy (%) of the models trained under each risk (`plain`, `pure`,
    /// `lure`), the acquisition model's training-risk estimates `risk_plain` (R̃) and
    /// `risk_lure`, and its mean NLL over the whole pool `risk_pool` (R̂, what both estimate).
    pub metrics: BTreeMap<String, f64>,
}

/// Active testing at one number of test labels: the squared errors' mean over repeats.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TestingPoint {
    /// Test labels picked.
    pub labels: usize,
    /// MSE of the LURE estimate under the entropy proposal.
    pub lure: f64,
    /// MSE of the plain mean of the same picks (biased).
    pub plain: f64,
    /// MSE of the mean of as many uniformly drawn labels.
    pub uniform: f64,
}

/// What one trajectory measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FqRow {
    /// The trajectory.
    pub task: FqTask,
    /// The evaluations, every `evaluate_every` labels and at the end.
    pub evals: Vec<FqEval>,
    /// The fixed model's mean test NLL (what active testing estimates).
    pub test_risk: f64,
    /// Active testing's errors.
    pub testing: Vec<TestingPoint>,
    /// Wall seconds.
    pub seconds: f64,
}

/// The unbalanced set of run `run`: random labels, class proportions, then the pool of `pool`
/// images and the `extra` images active testing's model trains on, disjoint.
fn unbalanced(
    train: &ImageSet,
    pool: usize,
    extra: usize,
    seed: u64,
) -> Result<(ImageSet, ImageSet), Box<dyn Error>> {
    let set = train
        .with_random_labels(RANDOM_LABELS, seed)?
        .with_class_proportions(&PROPORTIONS, seed ^ 1)?;
    if set.len() < pool + extra {
        return Err(format!(
            "the unbalanced set has {} images: fewer than --pool {pool} + --test-train {extra}",
            set.len()
        )
        .into());
    }
    let mut rng = HostNormals::new(seed ^ 2);
    let rows = rng.choose_distinct(set.len(), pool + extra);
    Ok((set.select(&rows[..pool]), set.select(&rows[pool..])))
}

/// The method of `family`: radial under N(0, 0.25²) (Table C.1) or MC dropout (p = 0.5,
/// length-scale 1).
fn method(family: &str) -> Method {
    match family {
        "mc-dropout" => Method::mc_dropout(0.5, 1.0),
        _ => {
            let mut m = Method::radial();
            m.weights.prior = Prior::gaussian(0.25);
            m
        }
    }
}

/// The study's harness.
pub struct FqStudy<'a> {
    options: &'a ActiveOptions,
    family: MnistFamily,
    train: ImageSet,
    test: ImageSet,
    digest: String,
}

impl<'a> FqStudy<'a> {
    /// The study of `options` on `train` (the unbalanced pool is drawn from it) and `test`.
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

    fn run_one(&self, task: &FqTask, ctx: &TaskContext) -> Result<FqRow, Box<dyn Error>> {
        let started = std::time::Instant::now();
        let o = self.options;
        // The data and the initial rows depend on the run only: both families see them.
        let data_seed = experiment::derive(o.exp.seed, &["active", "farquhar"], task.run as u64);
        let model_seed = experiment::derive(data_seed, &[&task.family], 0);
        let (pool, extra) = unbalanced(&self.train, o.pool(), o.fq_test_train(), data_seed)?;
        let norm = self.family.normalization();
        let device = training_device();
        let width = pool.image_size();
        let flat = |set: &ImageSet, rows: &[usize], d: &Device| {
            let b = set.batch(rows, &norm, d);
            (b.images.reshape([rows.len(), width]), b.labels)
        };
        let all: Vec<usize> = (0..pool.len()).collect();
        // The loop's models are off the autodiff graph (`FqFit::fit`), the pool too.
        let (inputs, _) = flat(&pool, &all, &device.clone().inner());
        let mut fit = FqFit {
            pool: &pool,
            test: &self.test,
            norm: &norm,
            method: method(&task.family),
            seed: model_seed,
            options: o,
        };
        let config =
            ActiveConfig::new(o.initial(), o.per_round(), o.mnist_budget()).with_seed(data_seed);
        if !ctx.resume {
            let _ = std::fs::remove_dir_all(&ctx.state);
        }
        let looped = ActiveLearning::new(config).with_state(&ctx.state);
        let bald = ClassScorer::new(
            ClassScore::Bald,
            PredictMode::Samples(o.fq_acquisition_samples()),
        );
        let mut acquisition = Acquisition::new(
            &bald,
            Selection::Boltzmann {
                temperature: o.proposal_temperature,
            },
        );
        let (_, history) = looped.run(&mut acquisition, inputs, &mut fit)?;
        let evals = history
            .rounds
            .iter()
            .filter(|r| r.metrics.contains_key("nll_pure"))
            .map(|r| FqEval {
                labels: r.labels,
                metrics: r.metrics.clone(),
            })
            .collect();
        // Active testing: a model on the extra images (four times the steps of a round's
        // fit: it sees many more images), its losses and entropies on the test set.
        let rows: Vec<usize> = (0..extra.len()).collect();
        let fixed = fit.train(&extra, &rows, None, FIXED_STREAM)?;
        let p = fit.predictions(&fixed, &self.test)?;
        let test_risk = mean(&p.nll);
        let testing = active_testing(&p.nll, &p.entropy, o, model_seed)?;
        Ok(FqRow {
            task: task.clone(),
            evals,
            test_risk,
            testing,
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}

/// Active testing's MSEs at each of [`TEST_LABELS`] over `o.test_repeats` repeats: LURE and
/// the plain mean under `q ∝ entropy + floor`, and the mean of uniform picks.
fn active_testing(
    losses: &[f64],
    entropy: &[f64],
    o: &ActiveOptions,
    seed: u64,
) -> Result<Vec<TestingPoint>, Box<dyn Error>> {
    let truth = mean(losses);
    let mut out = Vec::new();
    for &m in TEST_LABELS.iter().filter(|&&m| m < losses.len()) {
        let (mut lure, mut plain, mut uniform) = (0.0, 0.0, 0.0);
        for r in 0..o.test_repeats {
            let mut rng = HostNormals::new(experiment::derive(seed, &["test"], r as u64));
            let proposal = Selection::Proportional {
                floor: o.test_floor * mean(entropy),
            };
            let t = active_test(proposal, entropy, m, |i| losses[i], &mut rng)?;
            lure += (t.lure - truth).powi(2);
            plain += (t.plain - truth).powi(2);
            let u = active_test(Selection::Random, entropy, m, |i| losses[i], &mut rng)?;
            uniform += (u.plain - truth).powi(2);
        }
        let n = o.test_repeats as f64;
        out.push(TestingPoint {
            labels: m,
            lure: lure / n,
            plain: plain / n,
            uniform: uniform / n,
        });
    }
    Ok(out)
}

/// The classifier's side of the loop: fits from scratch on the labelled pool rows, tests, and
/// every few labels the models under PURE and LURE and the risk estimates.
struct FqFit<'a> {
    pool: &'a ImageSet,
    test: &'a ImageSet,
    norm: &'a Normalization,
    method: Method,
    seed: u64,
    options: &'a ActiveOptions,
}

impl FqFit<'_> {
    /// A model of the family trained on `rows` of `set` for the options' steps, each row's
    /// term weighted by `weights`.
    fn train(
        &self,
        set: &ImageSet,
        rows: &[usize],
        weights: Option<Vec<f64>>,
        stream: u64,
    ) -> Result<Classifier, ActiveError> {
        let o = self.options;
        let device = training_device();
        let b = set.batch(rows, self.norm, &device);
        let width = set.image_size();
        let data = (b.images.reshape([rows.len(), width]), b.labels);
        let batch = o.fq_batch_size().min(rows.len());
        let steps = match stream {
            FIXED_STREAM => 4 * o.fq_steps(),
            _ => o.fq_steps(),
        };
        let epochs = (steps * batch).div_ceil(rows.len()).max(1);
        let config = TrainConfig::new(epochs)
            .with_batch_size(batch)
            .with_learning_rate(o.learning_rate.unwrap_or(5e-4))
            .with_seed(experiment::derive(self.seed, &["fit"], stream))
            .with_progress(false);
        let mut trainer = self.method.trainer(&config)?;
        if let Some(w) = weights {
            trainer = trainer.with_row_weights(w);
        }
        let weights = self.method.weights.clone();
        let build = move |d: &Device| {
            MlpConfig::new(width, vec![HIDDEN], 10)
                .with_weights(weights)
                .init_classifier(d)
        };
        Ok(trainer.build_and_fit(build, data)?.0)
    }

    /// Per-image NLL, predictive entropy and predicted class of `model` on `set`.
    fn predictions(
        &self,
        model: &Classifier,
        set: &ImageSet,
    ) -> Result<SetPredictions, ActiveError> {
        let net = model.clone().valid();
        let plain = training_device().inner();
        let mut out = SetPredictions::default();
        let rows: Vec<usize> = (0..set.len()).collect();
        for chunk in rows.chunks(1000) {
            let b = set.batch(chunk, self.norm, &plain);
            let x = b.images.reshape([chunk.len(), set.image_size()]);
            let p = net.predict(x, PredictMode::Samples(self.options.fq_predict_samples()))?;
            out.nll
                .extend(to_vec(p.log_prob(b.labels)).into_iter().map(|l| -l));
            out.entropy.extend(to_vec(p.entropy()));
            out.predicted.extend(
                to_vec(p.predicted_class().float())
                    .into_iter()
                    .map(|c| c as u8),
            );
        }
        Ok(out)
    }

    /// Test NLL and accuracy (%) of `model`.
    fn test_scores(&self, model: &Classifier) -> Result<(f64, f64), ActiveError> {
        let p = self.predictions(model, self.test)?;
        let right = p
            .predicted
            .iter()
            .zip(&self.test.labels)
            .filter(|(p, y)| p == y)
            .count();
        Ok((mean(&p.nll), 100.0 * right as f64 / self.test.len() as f64))
    }
}

/// [`FqFit::predictions`]: one entry per image.
#[derive(Default)]
struct SetPredictions {
    nll: Vec<f64>,
    entropy: Vec<f64>,
    predicted: Vec<u8>,
}

impl ActiveTask<Classifier> for FqFit<'_> {
    fn fit(
        &mut self,
        round: usize,
        rows: &[usize],
        weights: Option<&[f64]>,
        _: Option<Classifier>,
    ) -> Result<Classifier, ActiveError> {
        // Off the autodiff graph: BALD's predictions of a tracked model would pile up in it.
        Ok(self
            .train(self.pool, rows, weights.map(<[f64]>::to_vec), round as u64)?
            .valid())
    }

    fn evaluate(
        &mut self,
        model: &Classifier,
        history: &ActiveHistory,
    ) -> Result<BTreeMap<String, f64>, ActiveError> {
        let (nll, acc) = self.test_scores(model)?;
        let mut out = BTreeMap::from([
            ("nll_plain".to_string(), nll),
            ("acc_plain".to_string(), acc),
        ]);
        let labelled = history.rows();
        let o = self.options;
        let every = o.evaluate_every.max(1);
        let due = (labelled.len() - o.initial()).is_multiple_of(every)
            || labelled.len() >= o.mnist_budget();
        if !due || labelled.len() == o.initial() {
            return Ok(out);
        }
        let round = history.rounds.len() as u64;
        let lure = history.weights_under(Risk::Lure)?;
        for (name, risk, w) in [
            ("pure", Risk::Pure, history.weights_under(Risk::Pure)?),
            ("lure", Risk::Lure, lure.clone()),
        ] {
            let m = self.train(self.pool, &labelled, w, 1_000 * round + risk as u64)?;
            let (nll, acc) = self.test_scores(&m)?;
            out.insert(format!("nll_{name}"), nll);
            out.insert(format!("acc_{name}"), acc);
        }
        // The acquisition model's training-risk estimates against the pool's risk.
        let pool_nll = self.predictions(model, self.pool)?.nll;
        let picked: Vec<f64> = labelled.iter().map(|&r| pool_nll[r]).collect();
        let weighted = picked
            .iter()
            .zip(lure.unwrap_or_default())
            .map(|(l, w)| l * w)
            .sum::<f64>();
        out.insert("risk_plain".to_string(), mean(&picked));
        out.insert("risk_lure".to_string(), weighted / picked.len() as f64);
        out.insert("risk_pool".to_string(), mean(&pool_nll));
        Ok(out)
    }
}

impl Harness for FqStudy<'_> {
    type Task = FqTask;
    type Row = FqRow;

    const NAME: &'static str = "active";
    const FORMAT: u32 = 1;

    fn tasks(&self) -> Vec<FqTask> {
        let o = self.options;
        let mut out = Vec::new();
        for run in 0..o.runs {
            for family in o.fq_families() {
                out.push(FqTask { family, run });
            }
        }
        out
    }

    fn task_id(&self, t: &FqTask) -> String {
        format!("{} / {} / run {}", self.options.dataset, t.family, t.run)
    }

    fn run_key(&self) -> serde_json::Value {
        let o = self.options;
        serde_json::json!({
            "seed": o.exp.seed,
            "study": o.study,
            "dataset": o.dataset,
            "pool": o.pool(),
            "initial": o.initial(),
            "per_round": o.per_round(),
            "budget": o.mnist_budget(),
            "temperature": o.proposal_temperature,
            "every": o.evaluate_every,
            "steps": o.fq_steps(),
            "batch_size": o.fq_batch_size(),
            "learning_rate": o.learning_rate.unwrap_or(5e-4),
            "acquisition_samples": o.fq_acquisition_samples(),
            "predict_samples": o.fq_predict_samples(),
            "test_train": o.fq_test_train(),
            "test_floor": o.test_floor,
            "test_repeats": o.test_repeats,
            "test_images": self.test.len(),
            "data": self.digest,
        })
    }

    fn task_key(&self, _: &FqTask) -> serde_json::Value {
        serde_json::json!({})
    }

    fn run_task(&self, task: &FqTask, ctx: &TaskContext) -> Result<FqRow, Box<dyn Error>> {
        self.run_one(task, ctx)
    }

    fn describe(&self, f: &Finished<FqTask, FqRow>) -> String {
        let last = f.row.evals.last();
        let get = |k: &str| {
            last.and_then(|e| e.metrics.get(k))
                .copied()
                .unwrap_or(f64::NAN)
        };
        format!(
            "[active] {}: test NLL R̃ {:.3}, PURE {:.3}, LURE {:.3}; active-testing MSE {:.2e} \
             ({:.0} s)",
            f.id,
            get("nll_plain"),
            get("nll_pure"),
            get("nll_lure"),
            f.row.testing.last().map_or(f64::NAN, |t| t.lure),
            f.seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let o = self.options;
        let rows = run.rows();
        let mut md = format!(
            "# Active learning's bias on unbalanced {} (Farquhar 2022 Figs. 5.5–5.8, reduced)\n\n\
             A pool of {} images (10 % random labels, digits kept in proportions {:?}), {} \
             random labels then one per round to {} by BALD ({} draws) under q ∝ exp({}·BALD); \
             MLP 784-{HIDDEN}-10 fitted from scratch for {} steps; every {} labels, models \
             under R̃, R_PURE and R_LURE tested on {} images. Mean ± standard error over \
             runs.\n\n",
            o.dataset,
            o.pool(),
            PROPORTIONS,
            o.initial(),
            o.mnist_budget(),
            o.fq_acquisition_samples(),
            o.proposal_temperature,
            o.fq_steps(),
            o.evaluate_every,
            self.test.len(),
        );
        md.push_str(&risk_table(&rows));
        md.push('\n');
        md.push_str(&testing_table(&rows));
        md.push_str(&format!("\nWall time {:.0} s.\n", run.wall_seconds));
        run.write_report(o, serde_json::json!({}), &md)
    }
}

/// `mean ± s.e.` of `values` with `digits`, or a dash.
fn cell(values: &[f64], digits: usize) -> String {
    if values.is_empty() {
        return "–".to_string();
    }
    let (m, se) = mean_and_standard_error(values);
    fmt_mean_se(m, se, digits)
}

/// Figs. 5.5–5.6 and 5.8 at the last evaluation: test NLL and accuracy under each risk, and
/// the training-risk estimates' bias against the pool's risk.
pub fn risk_table(rows: &[FqRow]) -> String {
    let mut md = String::from(
        "| family | runs | labels | test NLL R̃ | PURE | LURE | accuracy % R̃ | PURE | LURE | \
         R̃ − R̂ | R_LURE − R̂ |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for family in FAMILIES {
        let runs: Vec<&FqEval> = rows
            .iter()
            .filter(|r| r.task.family == family)
            .filter_map(|r| r.evals.last())
            .collect();
        if runs.is_empty() {
            continue;
        }
        let col = |k: &str| -> Vec<f64> {
            runs.iter()
                .filter_map(|e| e.metrics.get(k).copied())
                .collect()
        };
        let diff = |k: &str| -> Vec<f64> {
            runs.iter()
                .filter_map(|e| Some(e.metrics.get(k)? - e.metrics.get("risk_pool")?))
                .collect()
        };
        md.push_str(&format!(
            "| {family} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            runs.len(),
            runs[0].labels,
            cell(&col("nll_plain"), 3),
            cell(&col("nll_pure"), 3),
            cell(&col("nll_lure"), 3),
            cell(&col("acc_plain"), 1),
            cell(&col("acc_pure"), 1),
            cell(&col("acc_lure"), 1),
            cell(&diff("risk_plain"), 3),
            cell(&diff("risk_lure"), 3),
        ));
    }
    md
}

/// Fig. 5.7: active testing's MSE per family and number of test labels.
pub fn testing_table(rows: &[FqRow]) -> String {
    let mut md = String::from(
        "| family | runs | test labels | MSE LURE | MSE plain mean | MSE uniform |\n\
         |---|---:|---:|---:|---:|---:|\n",
    );
    for family in FAMILIES {
        let runs: Vec<&FqRow> = rows.iter().filter(|r| r.task.family == family).collect();
        for m in TEST_LABELS {
            let pick = |f: fn(&TestingPoint) -> f64| -> Vec<f64> {
                runs.iter()
                    .filter_map(|r| r.testing.iter().find(|t| t.labels == m).map(f))
                    .collect()
            };
            let lure = pick(|t| t.lure);
            if lure.is_empty() {
                continue;
            }
            md.push_str(&format!(
                "| {family} | {} | {m} | {} | {} | {} |\n",
                lure.len(),
                cell(&lure, 4),
                cell(&pick(|t| t.plain), 4),
                cell(&pick(|t| t.uniform), 4),
            ));
        }
    }
    md
}

/// `(labels, value)` of `metric` at every evaluation that has it.
#[cfg(test)]
pub(crate) fn curve_of(row: &FqRow, metric: &str) -> Vec<(usize, f64)> {
    row.evals
        .iter()
        .filter_map(|e| e.metrics.get(metric).map(|v| (e.labels, *v)))
        .collect()
}
