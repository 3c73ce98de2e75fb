//! The task-sequence loop: VCL with and without coresets, "coreset only", EWC.

use super::coreset::k_center;
use crate::error::ConfigError;
use std::time::Instant;

/// What the next task starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Propagation {
    /// The last task's model made the prior ([`ContinualTask::next_prior`]): VCL, EWC.
    Posterior,
    /// A fresh model under the initial prior every task: "coreset only" (Farquhar 2022 §5.1).
    Reset,
}

/// The loop's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ContinualConfig {
    /// Coreset rows per task, chosen by [`k_center`] and held out of the task's training
    /// (VCL: 40 on MNIST); 0 for none.
    pub coreset: usize,
    /// What each task starts from.
    pub propagation: Propagation,
}

impl ContinualConfig {
    /// VCL: the posterior as the next prior, without a coreset.
    pub fn vcl() -> Self {
        Self {
            coreset: 0,
            propagation: Propagation::Posterior,
        }
    }

    /// With `k` coreset rows per task.
    pub fn with_coreset(mut self, k: usize) -> Self {
        self.coreset = k;
        self
    }

    /// With `propagation`.
    pub fn with_propagation(mut self, propagation: Propagation) -> Self {
        self.propagation = propagation;
        self
    }
}

/// The user's side of a task sequence.
pub trait ContinualTask<M> {
    /// The error of training and evaluation.
    type Error: From<ConfigError>;

    /// Tasks in the sequence.
    fn tasks(&self) -> usize;

    /// Task `task`'s training inputs for the coreset's distances: `(values, width)`, row-major.
    fn inputs(&self, task: usize) -> (Vec<f64>, usize);

    /// Trains on task `task`'s training rows `rows` from `start` (`None`: a new model under
    /// the initial prior).
    ///
    /// # Errors
    /// Whatever training refuses.
    fn fit(&mut self, task: usize, start: Option<M>, rows: &[usize]) -> Result<M, Self::Error>;

    /// The model that starts the next task under [`Propagation::Posterior`]: the posterior as
    /// the prior (VCL's [`crate::nets::Bnn::with_posterior_as_prior`]; EWC's
    /// [`crate::posthoc::NetworkLaplace::posterior_as_prior`]).
    ///
    /// # Errors
    /// A model whose posterior cannot be a prior.
    fn next_prior(&mut self, task: usize, model: M) -> Result<M, Self::Error>;

    /// A copy of `model` trained on the coresets so far, `(task, rows)` each, before testing
    /// (VCL's fine-tune); called only with a coreset.
    ///
    /// # Errors
    /// Whatever training refuses.
    fn fine_tune(&mut self, model: &M, coresets: &[(usize, Vec<usize>)]) -> Result<M, Self::Error>;

    /// `model`'s accuracy (or any score) on task `task`'s test data.
    ///
    /// # Errors
    /// Whatever evaluation refuses.
    fn evaluate(&mut self, model: &M, task: usize) -> Result<f64, Self::Error>;
}

/// What a sequence measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ContinualHistory {
    /// The settings.
    pub config: ContinualConfig,
    /// `scores[t][s]`: task `s`'s test score after training on tasks `0..=t` (`s ≤ t`).
    pub scores: Vec<Vec<f64>>,
    /// Each task's coreset rows (empty without a coreset).
    pub coresets: Vec<Vec<usize>>,
    /// Seconds per task, training and evaluation.
    pub seconds: Vec<f64>,
}

impl ContinualHistory {
    /// The mean score over the tasks seen, after each task.
    pub fn average(&self) -> Vec<f64> {
        self.scores
            .iter()
            .map(|row| row.iter().sum::<f64>() / row.len() as f64)
            .collect()
    }
}

/// Runs the task sequence: for each task, its coreset (if any) by k-center (from its first
/// row), training on its other rows from the start [`ContinualConfig::propagation`] gives, the
/// coresets' fine-tune (if any), and the test score of every task seen so far. Returns the last
/// task's model (before any fine-tune) and the history.
///
/// # Errors
/// No tasks, a coreset larger than a task, or the task's own failures.
pub fn run_sequence<M, T: ContinualTask<M>>(
    config: ContinualConfig,
    task: &mut T,
) -> Result<(M, ContinualHistory), T::Error> {
    let n_tasks = task.tasks();
    if n_tasks == 0 {
        return Err(ConfigError {
            config: "run_sequence",
            field: "tasks",
            value: "0".into(),
            expected: "at least one task",
        }
        .into());
    }
    let mut history = ContinualHistory {
        config,
        scores: Vec::with_capacity(n_tasks),
        coresets: Vec::with_capacity(n_tasks),
        seconds: Vec::with_capacity(n_tasks),
    };
    let mut carried: Option<M> = None;
    let mut last = None;
    for t in 0..n_tasks {
        let start = Instant::now();
        let (x, d) = task.inputs(t);
        let n = x.len().checked_div(d).unwrap_or(0);
        let coreset = if config.coreset > 0 {
            if config.coreset > n {
                return Err(ConfigError {
                    config: "ContinualConfig",
                    field: "coreset",
                    value: format!("{} rows of task {t}'s {n}", config.coreset),
                    expected: "at most each task's rows",
                }
                .into());
            }
            k_center(&x, d, config.coreset, 0)?
        } else {
            Vec::new()
        };
        let mut held = vec![false; n];
        for r in &coreset {
            held[*r] = true;
        }
        let rows: Vec<usize> = (0..n).filter(|r| !held[*r]).collect();
        history.coresets.push(coreset);
        let from = match config.propagation {
            Propagation::Posterior => carried.take(),
            Propagation::Reset => None,
        };
        let model = task.fit(t, from, &rows)?;
        let scored = if config.coreset > 0 {
            let sets: Vec<(usize, Vec<usize>)> =
                history.coresets.iter().cloned().enumerate().collect();
            Some(task.fine_tune(&model, &sets)?)
        } else {
            None
        };
        let judge = scored.as_ref().unwrap_or(&model);
        let scores = (0..=t)
            .map(|s| task.evaluate(judge, s))
            .collect::<Result<Vec<_>, _>>()?;
        history.scores.push(scores);
        history.seconds.push(start.elapsed().as_secs_f64());
        if t + 1 < n_tasks && config.propagation == Propagation::Posterior {
            carried = Some(task.next_prior(t, model)?);
        } else {
            last = Some(model);
        }
    }
    Ok((last.expect("the last task's model"), history))
}
