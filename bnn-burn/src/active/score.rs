//! Acquisition scores of the pool's rows under the current model: a classifier's entropy,
//! BALD or variation ratio, the CLT-BNN's closed-form entropy and BALD, BNN+LV's epistemic or
//! total entropy by k-NN estimates, and the model-free distance to the labelled rows.

use super::ActiveError;
use crate::batch::Batch;
use crate::dist::Moments;
use crate::host::to_vec;
use crate::likelihood::MultiLabelProbit;
use crate::nets::{Bnn, Body, LatentRegressor};
use crate::predict::{ClassPrediction, GaussianPrediction, Predict, PredictMode};
use crate::special::{gauss_hermite, normal_log_cdf};
use burn::module::Module;
use burn::tensor::{Int, Tensor};

/// One score per row of the pool under a model (higher: more wanted).
pub trait Scorer<M: Predict> {
    /// The score's name in records and tables.
    fn name(&self) -> String;

    /// One score per row of `pool`, in its order; `labelled` holds the labelled rows' inputs
    /// (for scores of diversity or distance to what is labelled).
    ///
    /// # Errors
    /// The model's prediction failing, or estimates it cannot make.
    fn scores(
        &self,
        model: &M,
        pool: M::Input,
        labelled: M::Input,
    ) -> Result<Vec<f64>, ActiveError>;
}

/// `pool`'s rows in chunks of `chunk`, each as its own batch.
fn chunks<X: Batch>(pool: X, chunk: usize) -> impl Iterator<Item = X> {
    let n = pool.len();
    (0..n).step_by(chunk.max(1)).map(move |start| {
        let end = (start + chunk.max(1)).min(n);
        let device = pool.device();
        pool.rows(Tensor::<1, Int>::arange(start as i64..end as i64, &device))
    })
}

/// A classifier's uncertainty per input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ClassScore {
    /// Predictive entropy `H[p̄]` (max entropy).
    Entropy,
    /// The mutual information `H[p̄] − E[H[π]]` (BALD, Houlsby et al. 2011).
    Bald,
    /// Variation ratio `1 − f/S` (Gal 2016).
    VariationRatio,
}

/// [`ClassScore`] of a classifier's predictions in `mode`, `chunk` rows at a time. Give it a
/// model off the autodiff graph (`.valid()`): a tracked model's predictions pile up in the
/// graph when no backward pass consumes them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassScorer {
    /// What is scored.
    pub score: ClassScore,
    /// How the model predicts (draws for BALD and the variation ratio).
    pub mode: PredictMode,
    /// Pool rows per prediction.
    pub chunk: usize,
}

impl ClassScorer {
    /// `score` under `mode`, 1 024 rows at a time.
    pub fn new(score: ClassScore, mode: PredictMode) -> Self {
        Self {
            score,
            mode,
            chunk: 1024,
        }
    }
}

impl<M> Scorer<M> for ClassScorer
where
    M: Predict<Prediction = ClassPrediction>,
    M::Input: Batch,
{
    fn name(&self) -> String {
        match self.score {
            ClassScore::Entropy => "max-entropy",
            ClassScore::Bald => "BALD",
            ClassScore::VariationRatio => "variation ratio",
        }
        .to_string()
    }

    fn scores(&self, model: &M, pool: M::Input, _: M::Input) -> Result<Vec<f64>, ActiveError> {
        let mut out = Vec::with_capacity(pool.len());
        for x in chunks(pool, self.chunk) {
            let p = model.predict(x, self.mode)?;
            out.extend(to_vec(match self.score {
                ClassScore::Entropy => p.entropy(),
                ClassScore::Bald => p.epistemic_entropy(),
                ClassScore::VariationRatio => match &p {
                    ClassPrediction::Samples(s) => s.variation_ratio(),
                    ClassPrediction::Dirichlet(_) => {
                        return Err(ActiveError::Unsupported(
                            "the variation ratio needs sampled class probabilities, not a \
                             Dirichlet",
                        ));
                    }
                },
            }));
        }
        Ok(out)
    }
}

/// A Gaussian regression's uncertainty per input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RegressionScore {
    /// The entropy of the moment-matched predictive, `½ Σ_d ln(2πe Var[y_d])`: exact for a
    /// Gaussian predictive (a GP, a Bayesian linear model), an upper bound for a mixture.
    /// Depeweg 2019 §6.4's acquisition for its GP.
    Entropy,
    /// The epistemic variance `Σ_d Var_w[E[y_d | w]]`.
    EpistemicVariance,
}

/// [`RegressionScore`] of a regression's predictions in `mode`, `chunk` rows at a time (a model
/// off the autodiff graph, as for [`ClassScorer`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RegressionScorer {
    /// What is scored.
    pub score: RegressionScore,
    /// How the model predicts.
    pub mode: PredictMode,
    /// Pool rows per prediction.
    pub chunk: usize,
}

impl RegressionScorer {
    /// `score` under `mode`, 1 024 rows at a time.
    pub fn new(score: RegressionScore, mode: PredictMode) -> Self {
        Self {
            score,
            mode,
            chunk: 1024,
        }
    }
}

impl<M> Scorer<M> for RegressionScorer
where
    M: Predict<Prediction = GaussianPrediction>,
    M::Input: Batch,
{
    fn name(&self) -> String {
        match self.score {
            RegressionScore::Entropy => "H[y*] (Gaussian)",
            RegressionScore::EpistemicVariance => "Var[E[y* | w]]",
        }
        .to_string()
    }

    fn scores(&self, model: &M, pool: M::Input, _: M::Input) -> Result<Vec<f64>, ActiveError> {
        let mut out = Vec::with_capacity(pool.len());
        for x in chunks(pool, self.chunk) {
            let p = model.predict(x, self.mode)?;
            let per_dim = match self.score {
                RegressionScore::Entropy => {
                    (p.variance().log() + (2.0 * std::f64::consts::PI * std::f64::consts::E).ln())
                        * 0.5
                }
                RegressionScore::EpistemicVariance => p.epistemic_variance(),
            };
            out.extend(to_vec(per_dim.sum_dim(1)));
        }
        Ok(out)
    }
}

/// BNN+LV's entropies of `y*` by the k-NN estimator (Depeweg 2019 §6.4): the epistemic part
/// `I(W; y*)` (eq. 6.3) or the total `H[y*]`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LatentScorer {
    /// `true`: `I(W; y*)`; `false`: `H[y*]`.
    pub epistemic: bool,
    /// Weight draws.
    pub n_w: usize,
    /// Latent draws per weight draw.
    pub n_z: usize,
    /// The estimator's neighbour (the thesis: 500 × 500, `k = 25`).
    pub k: usize,
    /// Pool rows per decomposition.
    pub chunk: usize,
}

impl LatentScorer {
    /// `I(W; y*)` (`epistemic`) or `H[y*]` with the thesis's 500 × 500 draws and `k = 25`.
    pub fn new(epistemic: bool) -> Self {
        Self {
            epistemic,
            n_w: 500,
            n_z: 500,
            k: 25,
            chunk: 64,
        }
    }
}

impl Scorer<LatentRegressor> for LatentScorer {
    fn name(&self) -> String {
        if self.epistemic { "I(W; y*)" } else { "H[y*]" }.to_string()
    }

    fn scores(
        &self,
        model: &LatentRegressor,
        pool: Tensor<2>,
        _: Tensor<2>,
    ) -> Result<Vec<f64>, ActiveError> {
        // Off the autodiff graph, as `CltScorer`.
        let model = model.clone().valid();
        let mut out = Vec::with_capacity(pool.dims()[0]);
        for x in chunks(pool, self.chunk) {
            out.extend(
                model
                    .decompose(x.plain(), self.n_w, self.n_z, self.k)?
                    .into_iter()
                    .map(|d| {
                        if self.epistemic {
                            d.epistemic_entropy
                        } else {
                            d.total_entropy
                        }
                    }),
            );
        }
        Ok(out)
    }
}

/// The total squared distance of each pool row to the labelled rows, `Σ_j ‖x_i − x_j‖²`,
/// over its largest value in the pool (so scores lie in [0, 1]): Farquhar 2022 App. C.1's
/// geometric heuristic, which needs no model. All zero when every distance is.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DistanceScorer;

impl<M: Predict<Input = Tensor<2>>> Scorer<M> for DistanceScorer {
    fn name(&self) -> String {
        "quadratic distance".to_string()
    }

    fn scores(&self, _: &M, pool: Tensor<2>, labelled: Tensor<2>) -> Result<Vec<f64>, ActiveError> {
        let d = pool.dims()[1];
        let (p, l) = (to_vec(pool), to_vec(labelled));
        // Σ_j ‖x − x_j‖² = L‖x‖² − 2 x·Σ_j x_j + Σ_j ‖x_j‖².
        let count = (l.len() / d.max(1)) as f64;
        let mut sum = vec![0.0; d];
        let mut squares = 0.0;
        for row in l.chunks(d.max(1)) {
            for (s, v) in sum.iter_mut().zip(row) {
                *s += v;
            }
            squares += row.iter().map(|v| v * v).sum::<f64>();
        }
        let raw: Vec<f64> = p
            .chunks(d.max(1))
            .map(|x| {
                let norm: f64 = x.iter().map(|v| v * v).sum();
                let dot: f64 = x.iter().zip(&sum).map(|(a, b)| a * b).sum();
                (count * norm - 2.0 * dot + squares).max(0.0)
            })
            .collect();
        let top = raw.iter().cloned().fold(0.0, f64::max);
        Ok(raw
            .into_iter()
            .map(|v| if top > 0.0 { v / top } else { 0.0 })
            .collect())
    }
}

/// The CLT-BNN's closed-form scores (Haußmann 2021 ch. 4). Under the multi-label probit each
/// class's marginal `p_c = Φ(g_c/√(1 + h_c))` is exact for logits `f_c ~ N(g_c, h_c)`, so max
/// entropy is `Σ_c H_b(p_c)` (the reference code's sum of binary entropies) and BALD is
/// `Σ_c [H_b(p_c) − E H_b(Φ(f_c))]`, the expectation by Gauss–Hermite (the thesis samples it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CltScorer {
    /// `true`: BALD; `false`: max entropy.
    pub bald: bool,
    /// Gauss–Hermite nodes of BALD's expectation.
    pub nodes: usize,
    /// Pool rows per moment pass.
    pub chunk: usize,
}

impl CltScorer {
    /// BALD (`bald`) or max entropy, 32 nodes, 1 024 rows at a time.
    pub fn new(bald: bool) -> Self {
        Self {
            bald,
            nodes: 32,
            chunk: 1024,
        }
    }
}

impl<B: Body> Scorer<Bnn<B, MultiLabelProbit>> for CltScorer
where
    B::Input: Batch,
{
    fn name(&self) -> String {
        if self.bald {
            "CLT BALD"
        } else {
            "CLT max-entropy"
        }
        .to_string()
    }

    fn scores(
        &self,
        model: &Bnn<B, MultiLabelProbit>,
        pool: B::Input,
        _: B::Input,
    ) -> Result<Vec<f64>, ActiveError> {
        // Off the autodiff graph: predictions of a tracked model that no backward pass
        // consumes pile up in the graph, and each round's scoring would be slower.
        let model = model.clone().valid();
        let mut out = Vec::with_capacity(pool.len());
        for x in chunks(pool, self.chunk) {
            let m = model.predictive_moments(x.plain())?;
            out.extend(to_vec(clt_scores(m, self.bald, self.nodes)));
        }
        Ok(out)
    }
}

/// The binary entropy of `Φ(z)` per entry, from log-cdfs: finite in both tails.
fn probit_entropy(z: Tensor<2>) -> Tensor<2> {
    let lp = normal_log_cdf(z.clone());
    let lq = normal_log_cdf(-z);
    -(lp.clone().exp() * lp + lq.clone().exp() * lq)
}

/// [`CltScorer`]'s scores of logit moments `[B, C]`, `[B]`.
pub(crate) fn clt_scores(m: Moments<2>, bald: bool, nodes: usize) -> Tensor<1> {
    let h = m.var.clamp_min(0.0);
    let total = probit_entropy(m.mean.clone() / (h.clone() + 1.0).sqrt());
    let per_class = if bald {
        let (z, w) = gauss_hermite(nodes.max(1));
        let sd = h.sqrt();
        let mut expected = total.zeros_like();
        for (z, w) in z.iter().zip(&w) {
            expected = expected + probit_entropy(m.mean.clone() + sd.clone() * *z) * *w;
        }
        // I(y_c; f_c) ≥ 0: rounding aside.
        (total - expected).clamp_min(0.0)
    } else {
        total
    };
    per_class.sum_dim(1).squeeze_dim(1)
}
