//! Farquhar (2022) App. C.1: active learning's bias on a linear model. The pool is 5 + 48 + 48
//! points of eq. C.1's density with eq. C.2's targets; the model is least squares `y = a + b x`,
//! weighted by the risk's per-row weights. Each trajectory labels one random point, then one
//! point per round by `q(i) ∝ exp(β s_i)` over [`DistanceScorer`]'s scores, to `M` points.

use super::ActiveOptions;
use crate::experiment;
use crate::uci::fmt_mean_se;
use bnn_burn::active::{
    Acquisition, ActiveConfig, ActiveError, ActiveHistory, ActiveLearning, ActiveTask,
    DistanceScorer, Selection, lure_weights, pure_weights,
};
use bnn_burn::host::{matrix, to_vec};
use bnn_burn::predict::{Predict, PredictError, PredictMode};
use bnn_datasets::toy::{active_linear_pool, active_linear_population};
use burn::module::{Module, Param};
use burn::tensor::Tensor;
use std::collections::BTreeMap;
use std::error::Error;

/// Points of the pool (5 + 48 + 48).
pub const POOL: usize = 101;
/// Points of the population the test error is taken over (the thesis: 10 100).
const POPULATION: usize = 10_100;

/// `(plain, PURE, LURE)` values of one quantity.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Estimates {
    /// Under the plain mean `R̃`.
    pub plain: f64,
    /// Under `R_PURE`'s weights.
    pub pure: f64,
    /// Under `R_LURE`'s weights.
    pub lure: f64,
}

/// One trajectory's values at each reported `M`.
#[derive(Debug, Clone, PartialEq)]
pub struct Trajectory {
    /// The three risk estimates of the fixed model (the pool's least-squares fit).
    pub estimates: Vec<Estimates>,
    /// The population MSE of the fits weighted by each risk.
    pub test_mse: Vec<Estimates>,
}

/// Count, mean and sum of squared deviations of a sample, mergeable across blocks (Chan et
/// al.'s pairwise update).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Running {
    /// Values.
    pub n: usize,
    /// Their mean.
    pub mean: f64,
    /// `Σ (x − mean)²`.
    pub m2: f64,
}

impl Running {
    /// Adds one value.
    pub fn push(&mut self, x: f64) {
        self.merge(&Running {
            n: 1,
            mean: x,
            m2: 0.0,
        });
    }

    /// Adds another sample's summary.
    pub fn merge(&mut self, o: &Running) {
        let n = self.n + o.n;
        if n == 0 {
            return;
        }
        let delta = o.mean - self.mean;
        self.mean += delta * o.n as f64 / n as f64;
        self.m2 += o.m2 + delta * delta * (self.n * o.n) as f64 / n as f64;
        self.n = n;
    }

    /// The sample standard deviation.
    pub fn sd(&self) -> f64 {
        (self.m2 / (self.n.max(2) - 1) as f64).sqrt()
    }

    /// The standard error of the mean.
    pub fn se(&self) -> f64 {
        self.sd() / (self.n.max(1) as f64).sqrt()
    }
}

/// A quantity's summaries under the three risks.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Summaries {
    /// Under `R̃`.
    pub plain: Running,
    /// Under `R_PURE`.
    pub pure: Running,
    /// Under `R_LURE`.
    pub lure: Running,
}

impl Summaries {
    fn push(&mut self, e: &Estimates) {
        self.plain.push(e.plain);
        self.pure.push(e.pure);
        self.lure.push(e.lure);
    }

    /// Adds another block's summaries.
    pub fn merge_with(&mut self, o: &Summaries) {
        self.plain.merge(&o.plain);
        self.pure.merge(&o.pure);
        self.lure.merge(&o.lure);
    }

    fn each(&self) -> [&Running; 3] {
        [&self.plain, &self.pure, &self.lure]
    }
}

/// A block of trajectories, summarised per reported `M`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinearRow {
    /// The block's index.
    pub block: usize,
    /// The reported `M`s.
    pub checkpoints: Vec<usize>,
    /// The fixed model's risk estimates, per `M`.
    pub estimates: Vec<Summaries>,
    /// The weighted fits' population MSE, per `M`.
    pub test_mse: Vec<Summaries>,
}

impl LinearRow {
    /// The summaries of `trajectories`.
    pub fn of(block: usize, checkpoints: Vec<usize>, trajectories: &[Trajectory]) -> Self {
        let k = checkpoints.len();
        let (mut estimates, mut test_mse) =
            (vec![Summaries::default(); k], vec![Summaries::default(); k]);
        for t in trajectories {
            for i in 0..k {
                estimates[i].push(&t.estimates[i]);
                test_mse[i].push(&t.test_mse[i]);
            }
        }
        Self {
            block,
            checkpoints,
            estimates,
            test_mse,
        }
    }
}

/// A line `y = a + b x` as a module the loop can hold.
#[derive(Module, Debug)]
pub struct Line {
    coef: Param<Tensor<1>>,
}

impl Line {
    fn new(a: f64, b: f64) -> Self {
        Self {
            coef: Param::from_tensor(Tensor::from_data([a, b], &bnn_burn::device())),
        }
    }
    fn ab(&self) -> (f64, f64) {
        let v = to_vec(self.coef.val());
        (v[0], v[1])
    }
}

impl Predict for Line {
    type Input = Tensor<2>;
    type Prediction = Tensor<2>;

    fn predict(&self, x: Tensor<2>, _: PredictMode) -> Result<Tensor<2>, PredictError> {
        let (a, b) = self.ab();
        Ok(x * b + a)
    }
}

/// Weighted least squares of `y` on `[1, x]` over `rows`, `weights` one per row (`None`: all
/// 1); a constant at the weighted mean where `x` does not vary.
pub(super) fn fit_line(
    x: &[f64],
    y: &[f64],
    rows: &[usize],
    weights: Option<&[f64]>,
) -> (f64, f64) {
    let (mut s0, mut s1, mut s2, mut t0, mut t1) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (m, r) in rows.iter().enumerate() {
        let w = weights.map_or(1.0, |w| w[m]);
        s0 += w;
        s1 += w * x[*r];
        s2 += w * x[*r] * x[*r];
        t0 += w * y[*r];
        t1 += w * x[*r] * y[*r];
    }
    let det = s0 * s2 - s1 * s1;
    if det <= 1e-12 * s0 * s0 {
        return (t0 / s0, 0.0);
    }
    let b = (s0 * t1 - s1 * t0) / det;
    ((t0 - b * s1) / s0, b)
}

/// The pool, the population's moments, and the fixed model the estimators score.
pub struct LinearToy {
    x: Vec<f64>,
    y: Vec<f64>,
    /// `E[1, x, x², y, xy, y²]` over the population.
    moments: [f64; 6],
    /// Each pool point's loss under the pool's least-squares fit.
    losses: Vec<f64>,
    /// The pool's mean loss under that fit: what every risk estimate estimates.
    pub truth: f64,
    /// The population MSE of that fit (the best a line does with every label).
    pub optimal_test_mse: f64,
}

impl LinearToy {
    /// The pool and population of `seed`.
    pub fn new(seed: u64) -> Self {
        let pool = active_linear_pool(
            [5, 48, 48],
            experiment::derive(seed, &["active", "pool"], 0),
        );
        let population =
            active_linear_population(POPULATION, experiment::derive(seed, &["active", "test"], 0));
        let n = population.x.len() as f64;
        let e = |f: &dyn Fn(f64, f64) -> f64| {
            population
                .x
                .iter()
                .zip(&population.y)
                .map(|(x, y)| f(*x, *y))
                .sum::<f64>()
                / n
        };
        let moments = [
            1.0,
            e(&|x, _| x),
            e(&|x, _| x * x),
            e(&|_, y| y),
            e(&|x, y| x * y),
            e(&|_, y| y * y),
        ];
        let all: Vec<usize> = (0..pool.x.len()).collect();
        let (a, b) = fit_line(&pool.x, &pool.y, &all, None);
        let losses: Vec<f64> = pool
            .x
            .iter()
            .zip(&pool.y)
            .map(|(x, y)| (y - a - b * x).powi(2))
            .collect();
        let truth = losses.iter().sum::<f64>() / losses.len() as f64;
        let mut toy = Self {
            x: pool.x,
            y: pool.y,
            moments,
            losses,
            truth,
            optimal_test_mse: 0.0,
        };
        toy.optimal_test_mse = toy.test_mse(a, b);
        toy
    }

    /// `E[(y − a − b x)²]` over the population, from its moments.
    fn test_mse(&self, a: f64, b: f64) -> f64 {
        let [_, ex, exx, ey, exy, eyy] = self.moments;
        eyy - 2.0 * a * ey - 2.0 * b * exy + a * a + 2.0 * a * b * ex + b * b * exx
    }

    /// Trajectory `index`: the loop to `budget` labels, then every reported `M`'s values.
    ///
    /// # Errors
    /// The loop's failures.
    pub fn trajectory(
        &self,
        index: u64,
        temperature: f64,
        budget: usize,
        checkpoints: &[usize],
    ) -> Result<Trajectory, Box<dyn Error>> {
        let config = ActiveConfig::new(1, 1, budget).with_seed(experiment::derive(
            0,
            &["active", "linear"],
            index,
        ));
        let mut acquisition =
            Acquisition::new(&DistanceScorer, Selection::Boltzmann { temperature });
        let pool = matrix(&self.x, 1, &bnn_burn::device());
        let (_, history) = ActiveLearning::new(config).run(
            &mut acquisition,
            pool,
            &mut LinearTask { toy: self },
        )?;
        let (rows, q) = (history.rows(), history.q());
        let n = self.x.len();
        let mut estimates = Vec::with_capacity(checkpoints.len());
        let mut test_mse = Vec::with_capacity(checkpoints.len());
        for &m in checkpoints {
            let (rows, q) = (&rows[..m], &q[..m]);
            let (pure, lure) = (pure_weights(n, q)?, lure_weights(n, q)?);
            let risk = |w: Option<&[f64]>| {
                rows.iter()
                    .enumerate()
                    .map(|(i, r)| w.map_or(1.0, |w| w[i]) * self.losses[*r])
                    .sum::<f64>()
                    / m as f64
            };
            estimates.push(Estimates {
                plain: risk(None),
                pure: risk(Some(&pure)),
                lure: risk(Some(&lure)),
            });
            let mse = |w: Option<&[f64]>| {
                let (a, b) = fit_line(&self.x, &self.y, rows, w);
                self.test_mse(a, b)
            };
            test_mse.push(Estimates {
                plain: mse(None),
                pure: mse(Some(&pure)),
                lure: mse(Some(&lure)),
            });
        }
        Ok(Trajectory {
            estimates,
            test_mse,
        })
    }
}

/// The loop's side: least squares on the labelled rows, the population MSE as the metric.
struct LinearTask<'a> {
    toy: &'a LinearToy,
}

impl ActiveTask<Line> for LinearTask<'_> {
    fn fit(
        &mut self,
        _: usize,
        rows: &[usize],
        weights: Option<&[f64]>,
        _: Option<Line>,
    ) -> Result<Line, ActiveError> {
        let (a, b) = fit_line(&self.toy.x, &self.toy.y, rows, weights);
        Ok(Line::new(a, b))
    }

    fn evaluate(
        &mut self,
        model: &Line,
        _: &ActiveHistory,
    ) -> Result<BTreeMap<String, f64>, ActiveError> {
        let (a, b) = model.ab();
        Ok(BTreeMap::from([(
            "test_mse".to_string(),
            self.toy.test_mse(a, b),
        )]))
    }
}

/// Every block's summaries merged, per reported `M`: `(estimates, test MSE)`.
fn merged(rows: &[LinearRow]) -> (Vec<Summaries>, Vec<Summaries>) {
    let k = rows.first().map_or(0, |r| r.checkpoints.len());
    let (mut e, mut t) = (vec![Summaries::default(); k], vec![Summaries::default(); k]);
    for r in rows {
        for i in 0..k {
            e[i].merge_with(&r.estimates[i]);
            t[i].merge_with(&r.test_mse[i]);
        }
    }
    (e, t)
}

/// Per reported `M`: each estimator's mean minus the pool's risk (± s.e., and in s.e.), its
/// spread, and the test MSE of each weighted fit.
pub fn linear_table(rows: &[LinearRow], truth: f64, optimal: f64) -> String {
    let Some(first) = rows.first() else {
        return "(no rows)\n".to_string();
    };
    let (estimates, test_mse) = merged(rows);
    let n = estimates.first().map_or(0, |s| s.plain.n);
    let mut md = format!(
        "{n} trajectories; the pool's risk of the fixed model is {truth:.5}, the best line's test \
         MSE {optimal:.5}.\n\n| M | R̃ − R | PURE − R | LURE − R | sd R̃ / PURE / LURE | test MSE \
         R̃ | test MSE PURE | test MSE LURE |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for (k, m) in first.checkpoints.iter().enumerate() {
        let bias: Vec<String> = estimates[k]
            .each()
            .iter()
            .map(|r| {
                let (d, se) = (r.mean - truth, r.se());
                format!("{} ({:+.1} s.e.)", fmt_mean_se(d, Some(se), 5), d / se)
            })
            .collect();
        let sds: Vec<String> = estimates[k]
            .each()
            .iter()
            .map(|r| format!("{:.4}", r.sd()))
            .collect();
        let mse: Vec<String> = test_mse[k]
            .each()
            .iter()
            .map(|r| fmt_mean_se(r.mean, Some(r.se()), 5))
            .collect();
        md.push_str(&format!(
            "| {m} | {} | {} | {} | {} | {} | {} | {} |\n",
            bias[0],
            bias[1],
            bias[2],
            sds.join(" / "),
            mse[0],
            mse[1],
            mse[2]
        ));
    }
    md
}

/// The report.
pub fn markdown(rows: &[LinearRow], toy: &LinearToy, o: &ActiveOptions, wall: f64) -> String {
    let mut md = format!(
        "# Active learning's bias on a linear model (Farquhar 2022 App. C.1, Fig. 5.4)\n\n\
         A pool of {POOL} points (5 + 48 + 48 from eq. C.1's density, eq. C.2's targets); one \
         random point, then one per round by `q(i) ∝ exp({} s_i)` over the total squared \
         distance to the labelled points normalised to [0, 1], to M = {}. The risk estimates \
         score a fixed model (the pool's least-squares line): unbiased estimators have a mean \
         within about 2 s.e. of the pool's risk R. The test MSE is over {POPULATION} population \
         points, of lines fitted with each risk's weights. Mean ± standard error over \
         trajectories.\n\n",
        o.temperature, o.budget
    );
    md.push_str(&linear_table(rows, toy.truth, toy.optimal_test_mse));
    md.push_str(&format!("\nWall time {wall:.0} s.\n"));
    md
}
