//! Post-hoc calibration on held-out data: temperature scaling of class probabilities (Guo et al.
//! 2017) and split-conformal prediction (Vovk et al. 2005; Romano et al. 2020's adaptive sets):
//! regression intervals `μ ± q̂ σ` from any predictive's mean and standard deviation, and class
//! sets by cumulative probability, each covering a fresh point with probability `≥ 1 − α`.

use crate::error::ConfigError;
use crate::host::{to_labels, to_vec};
use crate::predict::{ClassPrediction, ClassSamples, GaussianPrediction};
use burn::tensor::{Int, Tensor, TensorData};

/// A temperature `T > 0` for class probabilities: every draw's `p_s` becomes
/// `p_s^{1/T} / Σ_c p_{s,c}^{1/T}` (for a softmax, the logits divided by `T`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TemperatureScaling {
    /// `T` (`> 1` softens over-confident predictions).
    pub temperature: f64,
}

/// `[S, B, C]` probabilities and their dimensions.
fn samples_of(pred: &ClassPrediction) -> Result<(Vec<f64>, [usize; 3]), ConfigError> {
    match pred {
        ClassPrediction::Samples(s) => Ok((to_vec(s.probs.clone()), s.probs.dims())),
        ClassPrediction::Dirichlet(_) => Err(ConfigError {
            config: "TemperatureScaling",
            field: "prediction",
            value: "a Dirichlet prediction".into(),
            expected: "class probability draws (a Dirichlet's concentrations are its own scale)",
        }),
    }
}

/// The mean over draws of the tempered probabilities, `[B, C]`, from `ln p` `[S, B, C]`.
fn tempered_mean(log_p: &[f64], [s, b, c]: [usize; 3], inv_t: f64) -> Vec<f64> {
    let mut mean = vec![0.0; b * c];
    for k in 0..s {
        for i in 0..b {
            let row = &log_p[(k * b + i) * c..(k * b + i + 1) * c];
            let top = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max) * inv_t;
            let z: f64 = row.iter().map(|l| (l * inv_t - top).exp()).sum();
            for (j, l) in row.iter().enumerate() {
                mean[i * c + j] += (l * inv_t - top).exp() / z / s as f64;
            }
        }
    }
    mean
}

impl TemperatureScaling {
    /// The `T ∈ [e⁻⁴, e⁴]` that minimises the NLL of `pred`'s tempered predictive on the
    /// held-out `labels` (golden-section search over `ln T`).
    ///
    /// # Errors
    /// A Dirichlet prediction, or labels that do not match the rows.
    pub fn fit(pred: &ClassPrediction, labels: Tensor<1, Int>) -> Result<Self, ConfigError> {
        let (p, dims) = samples_of(pred)?;
        let labels = to_labels(labels);
        check_rows("TemperatureScaling", labels.len(), dims[1])?;
        let log_p: Vec<f64> = p.iter().map(|v| v.max(1e-30).ln()).collect();
        let c = dims[2];
        let nll = |log_t: f64| {
            let mean = tempered_mean(&log_p, dims, (-log_t).exp());
            -labels
                .iter()
                .enumerate()
                .map(|(i, &y)| mean[i * c + y].max(1e-300).ln())
                .sum::<f64>()
        };
        Ok(Self {
            temperature: super::golden_min(nll, -4.0, 4.0, 60).exp(),
        })
    }

    /// `pred` with every draw tempered (its decomposition kept: the draws stay draws).
    ///
    /// # Errors
    /// A Dirichlet prediction.
    pub fn apply(&self, pred: &ClassPrediction) -> Result<ClassPrediction, ConfigError> {
        let (p, [s, b, c]) = samples_of(pred)?;
        let inv_t = 1.0 / self.temperature;
        let mut out = Vec::with_capacity(p.len());
        for row in p.chunks(c) {
            let logs: Vec<f64> = row.iter().map(|v| v.max(1e-30).ln() * inv_t).collect();
            let top = logs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = logs.iter().map(|l| (l - top).exp()).sum();
            out.extend(logs.iter().map(|l| ((l - top).exp() / z) as f32));
        }
        let device = match pred {
            ClassPrediction::Samples(x) => x.probs.device(),
            ClassPrediction::Dirichlet(d) => d.alpha.device(),
        };
        Ok(ClassPrediction::Samples(ClassSamples {
            probs: Tensor::from_data(TensorData::new(out, [s, b, c]), &device),
        }))
    }
}

fn check_rows(config: &'static str, targets: usize, rows: usize) -> Result<(), ConfigError> {
    match targets == rows && rows > 0 {
        true => Ok(()),
        false => Err(ConfigError {
            config,
            field: "targets",
            value: format!("{targets} targets for {rows} predictions"),
            expected: "one target per predicted row, at least one",
        }),
    }
}

fn check_alpha(config: &'static str, alpha: f64) -> Result<(), ConfigError> {
    match alpha > 0.0 && alpha < 1.0 {
        true => Ok(()),
        false => Err(ConfigError {
            config,
            field: "alpha",
            value: alpha.to_string(),
            expected: "a miscoverage in (0, 1)",
        }),
    }
}

/// Means, standard deviations and targets of a regression prediction, on the host.
type Columns = (Vec<f64>, Vec<f64>, Vec<f64>);

/// Split-conformal regression intervals `μ ± q̂ σ` (normalised residual scores `|y − μ|/σ`,
/// `μ` and `σ²` the predictive's mean and total variance).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConformalRegression {
    /// The calibrated multiple `q̂` of the predictive standard deviation.
    pub quantile: f64,
    /// The miscoverage `α`.
    pub alpha: f64,
}

impl ConformalRegression {
    /// Calibrates on held-out targets `y [B, 1]` (one target dimension).
    ///
    /// # Errors
    /// `α` outside (0, 1), several target dimensions, or targets that do not match the rows.
    pub fn fit(pred: &GaussianPrediction, y: Tensor<2>, alpha: f64) -> Result<Self, ConfigError> {
        check_alpha("ConformalRegression", alpha)?;
        let (mu, sd, y) = Self::columns(pred, y)?;
        let scores = mu
            .iter()
            .zip(&sd)
            .zip(&y)
            .map(|((m, s), v)| (v - m).abs() / s.max(1e-300))
            .collect();
        Ok(Self {
            quantile: crate::metrics::conformal_quantile(scores, alpha),
            alpha,
        })
    }

    fn columns(pred: &GaussianPrediction, y: Tensor<2>) -> Result<Columns, ConfigError> {
        let [b, d] = y.dims();
        if d != 1 {
            return Err(ConfigError {
                config: "ConformalRegression",
                field: "targets",
                value: format!("{d} target dimensions"),
                expected: "one target dimension",
            });
        }
        let mu = to_vec(pred.mean());
        check_rows("ConformalRegression", b, mu.len())?;
        let sd = to_vec(pred.variance()).into_iter().map(f64::sqrt).collect();
        Ok((mu, sd, to_vec(y)))
    }

    /// The intervals `(lower, upper)` per row.
    pub fn intervals(&self, pred: &GaussianPrediction) -> Vec<(f64, f64)> {
        let mu = to_vec(pred.mean());
        let sd = to_vec(pred.variance());
        mu.iter()
            .zip(sd)
            .map(|(m, v)| (m - self.quantile * v.sqrt(), m + self.quantile * v.sqrt()))
            .collect()
    }

    /// The fraction of rows of `y [B, 1]` inside their intervals.
    ///
    /// # Errors
    /// Targets that do not match the rows.
    pub fn coverage(&self, pred: &GaussianPrediction, y: Tensor<2>) -> Result<f64, ConfigError> {
        let (mu, sd, y) = Self::columns(pred, y)?;
        let inside = mu
            .iter()
            .zip(&sd)
            .zip(&y)
            .filter(|((m, s), v)| (*v - *m).abs() <= self.quantile * *s)
            .count();
        Ok(inside as f64 / y.len() as f64)
    }
}

/// Split-conformal class sets by cumulative probability (adaptive prediction sets, Romano et
/// al. 2020, randomised): the score of a class `c` is the predictive mass of the classes more
/// probable than it plus `u·p̄_c`, `u ~ U(0, 1)` per row; a set holds the classes whose score is
/// at most `q̂`. The `u` come from a seeded host stream, so sets are reproducible.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConformalSets {
    /// The calibrated score `q̂`.
    pub quantile: f64,
    /// The miscoverage `α`.
    pub alpha: f64,
}

/// The randomised scores of every class of every row, `[B, C]` row-major.
fn aps_scores(p: &[f64], c: usize, seed: u64) -> Vec<f64> {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    p.chunks(c)
        .flat_map(|row| {
            let u: f64 = rng.random();
            row.iter()
                .map(|&pc| row.iter().filter(|&&q| q > pc).sum::<f64>() + u * pc)
                .collect::<Vec<_>>()
        })
        .collect()
}

impl ConformalSets {
    /// Calibrates on held-out `labels`, the randomisation drawn from `seed`.
    ///
    /// # Errors
    /// `α` outside (0, 1), or labels that do not match the rows.
    pub fn fit(
        pred: &ClassPrediction,
        labels: Tensor<1, Int>,
        alpha: f64,
        seed: u64,
    ) -> Result<Self, ConfigError> {
        check_alpha("ConformalSets", alpha)?;
        let labels = to_labels(labels);
        let (p, c) = Self::means(pred);
        check_rows("ConformalSets", labels.len(), p.len() / c)?;
        let all = aps_scores(&p, c, seed);
        let scores = labels
            .iter()
            .enumerate()
            .map(|(i, &y)| all[i * c + y])
            .collect();
        Ok(Self {
            quantile: crate::metrics::conformal_quantile(scores, alpha),
            alpha,
        })
    }

    fn means(pred: &ClassPrediction) -> (Vec<f64>, usize) {
        let mean = pred.mean();
        let c = mean.dims()[1];
        (to_vec(mean), c)
    }

    /// The set of classes per row (most probable first), the randomisation drawn from `seed`
    /// (use another seed than calibration's).
    pub fn sets(&self, pred: &ClassPrediction, seed: u64) -> Vec<Vec<usize>> {
        let (p, c) = Self::means(pred);
        let scores = aps_scores(&p, c, seed);
        p.chunks(c)
            .zip(scores.chunks(c))
            .map(|(row, s)| {
                let mut set: Vec<usize> = (0..c).filter(|&k| s[k] <= self.quantile).collect();
                set.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
                set
            })
            .collect()
    }

    /// The fraction of rows whose label is in its set, and the mean set size.
    ///
    /// # Errors
    /// Labels that do not match the rows.
    pub fn coverage(
        &self,
        pred: &ClassPrediction,
        labels: Tensor<1, Int>,
        seed: u64,
    ) -> Result<(f64, f64), ConfigError> {
        let labels = to_labels(labels);
        let sets = self.sets(pred, seed);
        check_rows("ConformalSets", labels.len(), sets.len())?;
        let covered = sets
            .iter()
            .zip(&labels)
            .filter(|(s, y)| s.contains(y))
            .count();
        let size = sets.iter().map(Vec::len).sum::<usize>() as f64 / sets.len() as f64;
        Ok((covered as f64 / sets.len() as f64, size))
    }
}
