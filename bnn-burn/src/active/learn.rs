//! [`ActiveLearning`]: the pool-based loop, its records and its resume.

use super::ActiveError;
use super::score::Scorer;
use super::select::{Pick, Selection, select};
use super::weights::{lure_weights, pure_weights};
use crate::batch::Batch;
use crate::error::ConfigError;
use crate::host::HostNormals;
use crate::integrity::{Digest, open_json, seal_json, write_atomic};
use crate::predict::Predict;
use crate::train::{load_checkpoint, save_checkpoint};
use burn::module::Module;
use burn::tensor::{Int, Tensor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What the training data term of each round estimates (Farquhar 2022 eqs. 5.7–5.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Risk {
    /// The plain mean over the labelled rows, `R̃` (biased under an active selection).
    Plain,
    /// `R_PURE`: every row weighted by [`pure_weights`].
    Pure,
    /// `R_LURE`: every row weighted by [`lure_weights`].
    Lure,
}

/// How each round's model is trained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Retrain {
    /// A new model on all labelled rows (Depeweg 2019 §6.4).
    Scratch,
    /// The last round's model trained on (Haußmann 2021 ch. 4).
    Warm,
}

/// The loop's sizes and policies.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ActiveConfig {
    /// Rows labelled at random before the first acquisition (the same for every acquisition
    /// under one seed).
    pub initial: usize,
    /// Rows acquired per round.
    pub per_round: usize,
    /// Labelled rows at the end (the last round acquires what is left of it).
    pub budget: usize,
    /// The risk the training data term estimates.
    pub risk: Risk,
    /// How each round's model is trained.
    pub retrain: Retrain,
    /// Seed of the initial rows and of every round's random picks.
    pub seed: u64,
    /// The rows labelled before the first acquisition, when they are given (a training set
    /// at hand, as in Depeweg 2019 §6.4) rather than drawn at random; `initial` is their count.
    #[serde(default)]
    pub initial_rows: Option<Vec<usize>>,
}

impl ActiveConfig {
    /// `initial` random rows, then `per_round` per round until `budget`; the plain risk,
    /// retraining from scratch, seed 0.
    pub fn new(initial: usize, per_round: usize, budget: usize) -> Self {
        Self {
            initial,
            per_round,
            budget,
            risk: Risk::Plain,
            retrain: Retrain::Scratch,
            seed: 0,
            initial_rows: None,
        }
    }

    /// Starts from the labelled rows `rows` (rows of the data) instead of `initial` random
    /// ones; `initial` becomes their count. Their `q` is recorded as 1 (they were not
    /// acquired), so only the plain risk can be trained on them.
    pub fn with_initial_rows(mut self, rows: Vec<usize>) -> Self {
        self.initial = rows.len();
        self.initial_rows = Some(rows);
        self
    }

    /// With the risk `risk`.
    pub fn with_risk(mut self, risk: Risk) -> Self {
        self.risk = risk;
        self
    }

    /// With the retraining policy `retrain`.
    pub fn with_retrain(mut self, retrain: Retrain) -> Self {
        self.retrain = retrain;
        self
    }

    /// With the seed `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Checks the sizes against a pool of `n` rows.
    ///
    /// # Errors
    /// No initial rows or none per round, not `initial ≤ budget ≤ n`, or given initial rows
    /// that repeat or leave the data, or come with an unbiased risk.
    pub fn validate(&self, n: usize) -> Result<(), ConfigError> {
        let bad = |field, value: String, expected| ConfigError {
            config: "ActiveConfig",
            field,
            value,
            expected,
        };
        if self.initial == 0 {
            return Err(bad("initial", "0".into(), "at least 1 row"));
        }
        if self.per_round == 0 {
            return Err(bad("per_round", "0".into(), "at least 1 row"));
        }
        if let Some(rows) = &self.initial_rows {
            let mut seen = vec![false; n];
            for &r in rows {
                if r >= n || std::mem::replace(&mut seen[r], true) {
                    return Err(bad(
                        "initial_rows",
                        format!("row {r} (pool {n})"),
                        "distinct rows of the data",
                    ));
                }
            }
            if rows.len() != self.initial {
                return Err(bad(
                    "initial",
                    self.initial.to_string(),
                    "the count of initial_rows",
                ));
            }
            if self.risk != Risk::Plain {
                return Err(bad(
                    "risk",
                    format!("{:?}", self.risk),
                    "Plain with given initial rows (their q is not a proposal's)",
                ));
            }
        }
        if self.budget < self.initial || self.budget > n {
            return Err(bad(
                "budget",
                format!("{} (initial {}, pool {n})", self.budget, self.initial),
                "between the initial rows and the pool's size",
            ));
        }
        Ok(())
    }
}

/// What the user's side of the loop does: train on the labelled rows, and measure a model.
pub trait ActiveTask<M> {
    /// A model of round `round` trained on `rows` (rows of the data in pick order: their
    /// labels are revealed), each row's data term weighted by `weights` (`None`: the plain
    /// mean; the [`crate::train::Trainer::with_row_weights`] of a burn-side trainer), from
    /// `warm` (the last round's model) under [`Retrain::Warm`]. A resumed run calls it again
    /// for the last round saved, so it should be seeded by its arguments.
    ///
    /// # Errors
    /// Whatever training refuses.
    fn fit(
        &mut self,
        round: usize,
        rows: &[usize],
        weights: Option<&[f64]>,
        warm: Option<M>,
    ) -> Result<M, ActiveError>;

    /// The metrics of a round's model (test error, log-likelihood, …), finite. `history`
    /// holds every round so far, this one last (its metrics still empty): the labelled rows
    /// with their `q`s, so that an evaluation can estimate risks on them or train comparison
    /// models under other risks ([`ActiveHistory::weights_under`]; Farquhar 2022 Figs.
    /// 5.5–5.8).
    ///
    /// # Errors
    /// Whatever evaluation refuses.
    fn evaluate(
        &mut self,
        model: &M,
        history: &ActiveHistory,
    ) -> Result<BTreeMap<String, f64>, ActiveError>;
}

/// What a round's acquisition sees: the last round's model, every row of the data, and which
/// rows are left in the pool and which are labelled (rows of the data, labelled ones in pick
/// order).
pub struct AcquireContext<'a, M: Predict> {
    /// The model trained on the labelled rows.
    pub model: &'a M,
    /// The inputs of every row of the data.
    pub data: &'a M::Input,
    /// The pool's rows, ascending.
    pub left: &'a [usize],
    /// The labelled rows, in pick order.
    pub labelled: &'a [usize],
}

impl<M: Predict> AcquireContext<'_, M> {
    /// The inputs of `rows` (rows of the data), in their order.
    pub fn rows(&self, rows: &[usize]) -> M::Input
    where
        M::Input: Batch,
    {
        let idx: Vec<i64> = rows.iter().map(|r| *r as i64).collect();
        self.data.clone().rows(Tensor::<1, Int>::from_data(
            idx.as_slice(),
            &self.data.device(),
        ))
    }
}

/// How a round's rows are acquired: a fixed rule ([`Acquisition`]), or a policy that learns
/// from every round it picked for (RAL, [`super::Ral`]).
pub trait Acquire<M: Predict> {
    /// The name in records.
    fn name(&self) -> String;

    /// `k` distinct rows of `ctx.left`, each with the probability `q` it had among the rows left
    /// when it was picked.
    ///
    /// # Errors
    /// Scoring failures, or settings the pool cannot meet.
    fn acquire(
        &mut self,
        ctx: &AcquireContext<'_, M>,
        k: usize,
        rng: &mut HostNormals,
    ) -> Result<Vec<Pick>, ActiveError>;

    /// Called after each acquired round is trained: `model` is trained on every labelled row,
    /// `picks` are the round's. A learning acquisition updates itself; the default does
    /// nothing.
    ///
    /// # Errors
    /// The update's failures.
    fn learn(&mut self, _model: &M, _data: &M::Input, _picks: &[Pick]) -> Result<(), ActiveError> {
        Ok(())
    }

    /// Writes what it learned into the run's state folder (before the history names the
    /// round); the default keeps nothing.
    ///
    /// # Errors
    /// A file that cannot be written.
    fn save(&self, _dir: &Path) -> Result<(), ActiveError> {
        Ok(())
    }

    /// Reads back what [`Acquire::save`] wrote, when a run resumes.
    ///
    /// # Errors
    /// A damaged or missing file.
    fn load(&mut self, _dir: &Path) -> Result<(), ActiveError> {
        Ok(())
    }
}

/// A fixed acquisition rule: a scorer (none for random picks) and a selection.
pub struct Acquisition<'a, M: Predict> {
    scorer: Option<&'a dyn Scorer<M>>,
    selection: Selection,
}

impl<'a, M: Predict> Acquisition<'a, M> {
    /// Rows uniformly at random.
    pub fn random() -> Self {
        Self {
            scorer: None,
            selection: Selection::Random,
        }
    }

    /// Rows by `selection` over `scorer`'s scores.
    pub fn new(scorer: &'a dyn Scorer<M>, selection: Selection) -> Self {
        Self {
            scorer: Some(scorer),
            selection,
        }
    }
}

impl<M: Predict> Acquire<M> for Acquisition<'_, M>
where
    M::Input: Batch,
{
    /// The scorer's name and the selection's.
    fn name(&self) -> String {
        let selection = match self.selection {
            Selection::Random => "random".to_string(),
            Selection::Top => "top".to_string(),
            Selection::Thinned { every, from } => format!("every {every} of the top {from}"),
            Selection::Boltzmann { temperature } => format!("Boltzmann T = {temperature}"),
            Selection::Proportional { floor } => format!("proportional, floor {floor}"),
        };
        match self.scorer {
            Some(s) => format!("{} ({selection})", s.name()),
            None => selection,
        }
    }

    fn acquire(
        &mut self,
        ctx: &AcquireContext<'_, M>,
        k: usize,
        rng: &mut HostNormals,
    ) -> Result<Vec<Pick>, ActiveError> {
        let scores = match self.scorer {
            Some(s) => Some(s.scores(ctx.model, ctx.rows(ctx.left), ctx.rows(ctx.labelled))?),
            None if self.selection.needs_scores() => {
                return Err(ConfigError {
                    config: "Acquisition",
                    field: "scorer",
                    value: "none".into(),
                    expected: "a scorer for a selection that reads scores",
                }
                .into());
            }
            None => None,
        };
        Ok(select(self.selection, ctx.left, scores.as_deref(), k, rng)?)
    }
}

/// One round: the rows it acquired, and its model's metrics.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Round {
    /// 0 for the initial random rows.
    pub round: usize,
    /// Labelled rows after it.
    pub labels: usize,
    /// The rows acquired, in pick order, with their `q`.
    pub picks: Vec<Pick>,
    /// The model's metrics after training on every labelled row.
    pub metrics: BTreeMap<String, f64>,
    /// Seconds scoring the pool.
    pub score_seconds: f64,
    /// Seconds training and evaluating.
    pub fit_seconds: f64,
}

/// A run's record: its settings and every round.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ActiveHistory {
    /// The loop's settings.
    pub config: ActiveConfig,
    /// [`Acquisition::name`].
    pub acquisition: String,
    /// Rows of the data (the pool at the start).
    pub pool: usize,
    /// A checksum of the pool's inputs (a resumed run must see the same).
    pub inputs: String,
    /// The rounds so far.
    pub rounds: Vec<Round>,
}

impl ActiveHistory {
    /// The labelled rows in pick order.
    pub fn rows(&self) -> Vec<usize> {
        self.picks().map(|p| p.row).collect()
    }

    /// `q` of every labelled row, in pick order.
    pub fn q(&self) -> Vec<f64> {
        self.picks().map(|p| p.q).collect()
    }

    fn picks(&self) -> impl Iterator<Item = &Pick> {
        self.rounds.iter().flat_map(|r| r.picks.iter())
    }

    /// The rows' weights under the run's [`Risk`] (`None` for the plain mean).
    ///
    /// # Errors
    /// A `q` outside `(0, 1]` (a hand-edited record).
    pub fn weights(&self) -> Result<Option<Vec<f64>>, ConfigError> {
        self.weights_under(self.config.risk)
    }

    /// The rows' weights under `risk`, whatever the run trains with (`None` for the plain
    /// mean).
    ///
    /// # Errors
    /// A `q` outside `(0, 1]`; an unbiased risk over given initial rows (their `q` is not a
    /// proposal's).
    pub fn weights_under(&self, risk: Risk) -> Result<Option<Vec<f64>>, ConfigError> {
        if risk != Risk::Plain && self.config.initial_rows.is_some() {
            return Err(ConfigError {
                config: "ActiveHistory",
                field: "risk",
                value: format!("{risk:?}"),
                expected: "Plain with given initial rows (their q is not a proposal's)",
            });
        }
        let q = self.q();
        Ok(match risk {
            Risk::Plain => None,
            Risk::Pure => Some(pure_weights(self.pool, &q)?),
            Risk::Lure => Some(lure_weights(self.pool, &q)?),
        })
    }

    /// `(labels, value)` of `metric` after every round that has it.
    pub fn curve(&self, metric: &str) -> Vec<(usize, f64)> {
        self.rounds
            .iter()
            .filter_map(|r| r.metrics.get(metric).map(|v| (r.labels, *v)))
            .collect()
    }

    /// Whether the budget is labelled.
    pub fn done(&self) -> bool {
        self.rounds
            .last()
            .is_some_and(|r| r.labels >= self.config.budget)
    }
}

/// The pool-based active-learning loop: round 0 labels [`ActiveConfig::initial`] random
/// rows and trains; every later round scores the pool with the last model, acquires
/// [`ActiveConfig::per_round`] rows, retrains and evaluates, until the budget is labelled.
pub struct ActiveLearning {
    config: ActiveConfig,
    state: Option<PathBuf>,
}

/// The history file in a state folder.
const HISTORY: &str = "active.json";

impl ActiveLearning {
    /// The loop under `config`, keeping nothing on disk.
    pub fn new(config: ActiveConfig) -> Self {
        Self {
            config,
            state: None,
        }
    }

    /// Saves the history after every round in `dir` (and, under [`Retrain::Warm`], the
    /// round's model), and resumes from it: a run with the same settings, acquisition and pool
    /// continues after the last round saved; anything else is refused, naming the file.
    pub fn with_state(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state = Some(dir.into());
        self
    }

    /// Runs the loop over the rows of `pool` (the inputs of every row of the data; the labels
    /// stay with `task`) and returns the last model and the history.
    ///
    /// # Errors
    /// Settings out of range (before any training), a state folder of another run, or the
    /// failures of scoring, training and evaluation.
    pub fn run<M, A, T>(
        &self,
        acquisition: &mut A,
        pool: M::Input,
        task: &mut T,
    ) -> Result<(M, ActiveHistory), ActiveError>
    where
        M: Predict + Module,
        M::Input: Batch,
        A: Acquire<M> + ?Sized,
        T: ActiveTask<M>,
    {
        let c = &self.config;
        let n = pool.len();
        c.validate(n)?;
        let mut digest = Digest::new();
        pool.digest(&mut digest);
        let fresh = ActiveHistory {
            config: c.clone(),
            acquisition: acquisition.name(),
            pool: n,
            inputs: digest.hex(),
            rounds: Vec::new(),
        };
        let mut history = match self.load(&fresh)? {
            Some(h) => h,
            None => fresh,
        };
        let mut model = match history.rounds.last() {
            None => {
                // Round 0: the given rows (q = 1), or uniform picks (q = 1/(rows left)).
                let picks = match &c.initial_rows {
                    Some(rows) => rows
                        .iter()
                        .map(|&row| Pick {
                            row,
                            q: 1.0,
                            score: None,
                        })
                        .collect(),
                    None => {
                        let all: Vec<usize> = (0..n).collect();
                        let mut rng = HostNormals::new(c.seed);
                        select(Selection::Random, &all, None, c.initial, &mut rng)?
                    }
                };
                self.round(
                    &mut history,
                    picks,
                    0.0,
                    None,
                    task,
                    None::<Learner<'_, M, A>>,
                )?
            }
            Some(last) => {
                let round = last.round;
                if let Some(dir) = &self.state {
                    acquisition.load(dir)?;
                }
                let weights = history.weights()?;
                let model = task.fit(round, &history.rows(), weights.as_deref(), None)?;
                match (&self.state, c.retrain) {
                    (Some(dir), Retrain::Warm) => load_checkpoint(model, model_path(dir, round))?,
                    _ => model,
                }
            }
        };
        while !history.done() {
            let labelled = history.rows();
            let mut taken = vec![false; n];
            for r in &labelled {
                taken[*r] = true;
            }
            let left: Vec<usize> = (0..n).filter(|r| !taken[*r]).collect();
            let k = c.per_round.min(c.budget - labelled.len());
            let start = Instant::now();
            let round = history.rounds.len();
            let mut rng = HostNormals::new(round_seed(c.seed, round));
            let ctx = AcquireContext {
                model: &model,
                data: &pool,
                left: &left,
                labelled: &labelled,
            };
            let picks = acquisition.acquire(&ctx, k, &mut rng)?;
            check_picks(&picks, &taken, k)?;
            let score_seconds = start.elapsed().as_secs_f64();
            let warm = (c.retrain == Retrain::Warm).then_some(model);
            let learner = Learner {
                acquisition: &mut *acquisition,
                data: &pool,
            };
            model = self.round(
                &mut history,
                picks,
                score_seconds,
                warm,
                task,
                Some(learner),
            )?;
        }
        Ok((model, history))
    }

    /// Adds `picks` as the next round, trains and evaluates, lets the acquisition learn from
    /// it, records and saves.
    fn round<M: Predict + Module, A: Acquire<M> + ?Sized, T: ActiveTask<M>>(
        &self,
        history: &mut ActiveHistory,
        picks: Vec<Pick>,
        score_seconds: f64,
        warm: Option<M>,
        task: &mut T,
        learner: Option<Learner<'_, M, A>>,
    ) -> Result<M, ActiveError> {
        let round = history.rounds.len();
        let start = Instant::now();
        // The round joins the history before training (its rows and weights are the
        // history's); a failure leaves it unsaved.
        history.rounds.push(Round {
            round,
            labels: history.rows().len() + picks.len(),
            picks,
            metrics: BTreeMap::new(),
            score_seconds,
            fit_seconds: 0.0,
        });
        let weights = history.weights()?;
        let model = task.fit(round, &history.rows(), weights.as_deref(), warm)?;
        let metrics = task.evaluate(&model, history)?;
        if let Some((metric, value)) = metrics.iter().find(|(_, v)| !v.is_finite()) {
            return Err(ActiveError::NonFinite {
                round,
                metric: metric.clone(),
                value: *value,
            });
        }
        let last = history.rounds.last_mut().expect("the round just added");
        last.metrics = metrics;
        if let Some(l) = learner {
            l.acquisition.learn(&model, l.data, &last.picks)?;
            if let Some(dir) = &self.state {
                std::fs::create_dir_all(dir).map_err(|e| ActiveError::State {
                    path: dir.display().to_string(),
                    problem: e.to_string(),
                })?;
                l.acquisition.save(dir)?;
            }
        }
        last.fit_seconds = start.elapsed().as_secs_f64();
        self.save(history, &model)?;
        Ok(model)
    }

    /// The saved history of this run, if the state folder has one.
    fn load(&self, fresh: &ActiveHistory) -> Result<Option<ActiveHistory>, ActiveError> {
        let Some(dir) = &self.state else {
            return Ok(None);
        };
        let path = dir.join(HISTORY);
        let state = |problem: String| ActiveError::State {
            path: path.display().to_string(),
            problem,
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(state(e.to_string())),
        };
        let value = open_json(&text).map_err(|e| state(e.to_string()))?;
        let saved: ActiveHistory =
            serde_json::from_value(value).map_err(|e| state(e.to_string()))?;
        for (what, differs) in [
            ("settings", saved.config != fresh.config),
            ("acquisition", saved.acquisition != fresh.acquisition),
            ("pool size", saved.pool != fresh.pool),
            ("pool inputs", saved.inputs != fresh.inputs),
        ] {
            if differs {
                return Err(state(format!(
                    "its {what} differ from this run's: another run's state (use another \
                     folder, or delete it to start over)"
                )));
            }
        }
        Ok((!saved.rounds.is_empty()).then_some(saved))
    }

    /// Writes the round's model (warm start) and then the history, each whole or not at all.
    fn save<M: Module>(&self, history: &ActiveHistory, model: &M) -> Result<(), ActiveError> {
        let Some(dir) = &self.state else {
            return Ok(());
        };
        let path = dir.join(HISTORY);
        let state = |problem: String| ActiveError::State {
            path: path.display().to_string(),
            problem,
        };
        std::fs::create_dir_all(dir).map_err(|e| state(e.to_string()))?;
        let round = history.rounds.len() - 1;
        if self.config.retrain == Retrain::Warm {
            save_checkpoint(model, model_path(dir, round))?;
        }
        let value = serde_json::to_value(history).map_err(|e| state(e.to_string()))?;
        write_atomic(&path, seal_json(&value).as_bytes()).map_err(|e| state(e.to_string()))?;
        if round > 0 && self.config.retrain == Retrain::Warm {
            // The history now names this round: the last one's model is no longer needed.
            let _ = std::fs::remove_file(model_path(dir, round - 1));
        }
        Ok(())
    }
}

/// The acquisition of a round and the data, for its [`Acquire::learn`].
struct Learner<'a, M: Predict, A: ?Sized> {
    acquisition: &'a mut A,
    data: &'a M::Input,
}

/// Refuses an acquisition's picks that are not `k` distinct rows of the pool with `q` in
/// `(0, 1]`.
fn check_picks(picks: &[Pick], taken: &[bool], k: usize) -> Result<(), ConfigError> {
    let bad = |value: String| ConfigError {
        config: "Acquire::acquire",
        field: "picks",
        value,
        expected: "k distinct rows of the pool, each with q in (0, 1]",
    };
    if picks.len() != k {
        return Err(bad(format!("{} picks for k = {k}", picks.len())));
    }
    let mut seen = std::collections::BTreeSet::new();
    for p in picks {
        if p.row >= taken.len() || taken[p.row] || !seen.insert(p.row) {
            return Err(bad(format!("row {}", p.row)));
        }
        if !(p.q > 0.0 && p.q <= 1.0) {
            return Err(bad(format!("q = {} for row {}", p.q, p.row)));
        }
    }
    Ok(())
}

/// The warm-start model of `round` in `dir`.
fn model_path(dir: &Path, round: usize) -> PathBuf {
    dir.join(format!("model-{round}.bpk"))
}

/// Round `round`'s seed of random picks.
fn round_seed(seed: u64, round: usize) -> u64 {
    seed ^ (round as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}
