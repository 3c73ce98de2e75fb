//! Deep ensembles (Lakshminarayanan et al. 2017; Brack 2022 eq. 3.16): `M` networks trained
//! from their own seeds, the predictive their equal-weight mixture
//! `p(y | x) = (1/M) Σ_m p(y | x, θ_m)`. Members may be of any family (MAP, MC dropout,
//! mean-field, radial: Farquhar's radial ensembles) or post-hoc posteriors themselves
//! (MultiSWAG is an ensemble of [`super::Swag`]s).

use crate::error::ConfigError;
use crate::predict::{
    ClassPrediction, ClassSamples, GaussianMoments, GaussianPrediction, GaussianSamples, Predict,
    PredictError, PredictMode,
};
use burn::tensor::Tensor;

/// An equal-weight mixture of trained models.
#[derive(Debug, Clone)]
pub struct Ensemble<M> {
    members: Vec<M>,
}

impl<M> Ensemble<M> {
    /// The ensemble of `members`.
    ///
    /// # Errors
    /// When `members` is empty.
    pub fn new(members: Vec<M>) -> Result<Self, ConfigError> {
        match members.is_empty() {
            true => Err(ConfigError {
                config: "Ensemble",
                field: "members",
                value: "0".into(),
                expected: "at least one member",
            }),
            false => Ok(Self { members }),
        }
    }

    /// Trains `count` members in turn, member `m` from `train(m)` (give each its own seed).
    ///
    /// # Errors
    /// The first member's training error, with its index.
    pub fn train<E>(
        count: usize,
        mut train: impl FnMut(usize) -> Result<M, E>,
    ) -> Result<Self, (usize, E)> {
        let members = (0..count)
            .map(|m| train(m).map_err(|e| (m, e)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { members })
    }

    /// Trains `count` members on up to `threads` threads at once, member `m` from `train(m)`;
    /// the members keep their order, so a seed per index gives the same ensemble as
    /// [`Ensemble::train`] (on the CPU backends each thread's kernels share one thread pool).
    ///
    /// # Errors
    /// The error of the lowest-indexed member that failed, with its index.
    pub fn train_parallel<E: Send>(
        count: usize,
        threads: usize,
        train: impl Fn(usize) -> Result<M, E> + Sync,
    ) -> Result<Self, (usize, E)>
    where
        M: Send,
    {
        let threads = threads.clamp(1, count.max(1));
        let mut slots: Vec<Option<Result<M, E>>> = (0..count).map(|_| None).collect();
        std::thread::scope(|scope| {
            let train = &train;
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    scope.spawn(move || {
                        (t..count)
                            .step_by(threads)
                            .map(|m| (m, train(m)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for handle in handles {
                for (m, result) in handle.join().expect("an ensemble member's thread panicked") {
                    slots[m] = Some(result);
                }
            }
        });
        let members = slots
            .into_iter()
            .enumerate()
            .map(|(m, slot)| slot.expect("every member trained").map_err(|e| (m, e)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { members })
    }

    /// The members.
    pub fn members(&self) -> &[M] {
        &self.members
    }

    /// The members, moved out.
    pub fn into_members(self) -> Vec<M> {
        self.members
    }
}

/// Predictions that pool into an equal-weight mixture.
pub trait Pool: Sized {
    /// The mixture `(1/M) Σ_m p_m` of `parts` (at least one).
    ///
    /// # Errors
    /// When the parts cannot be pooled (different draws per part, or a form without a mixture).
    fn pool(parts: Vec<Self>, mode: PredictMode) -> Result<Self, PredictError>;
}

fn unpoolable(mode: PredictMode, reason: &'static str) -> PredictError {
    PredictError::Unsupported {
        model: "Ensemble",
        mode,
        reason,
    }
}

/// The common draw count of `parts`, or an error when they differ (a mixture of equal weights
/// needs as many draws from each).
fn equal_draws(counts: impl Iterator<Item = usize>, mode: PredictMode) -> Result<(), PredictError> {
    let counts: Vec<usize> = counts.collect();
    match counts.windows(2).all(|w| w[0] == w[1]) {
        true => Ok(()),
        false => Err(unpoolable(
            mode,
            "its members returned different numbers of draws (point members give one, sampled \
             members n): make every member of the same kind",
        )),
    }
}

impl Pool for GaussianPrediction {
    /// Draws are concatenated; moment forms pool by the law of total variance:
    /// `μ = (1/M) Σ μ_m`, epistemic `(1/M) Σ (v_m + μ_m²) − μ²`, aleatoric `(1/M) Σ a_m`.
    fn pool(parts: Vec<Self>, mode: PredictMode) -> Result<Self, PredictError> {
        if parts.iter().all(|p| matches!(p, Self::Samples(_))) {
            let samples: Vec<GaussianSamples> = parts
                .into_iter()
                .map(|p| match p {
                    Self::Samples(s) => s,
                    Self::Moments(_) => unreachable!(),
                })
                .collect();
            equal_draws(samples.iter().map(|s| s.mean.dims()[0]), mode)?;
            let (mean, var) = samples.into_iter().map(|s| (s.mean, s.var)).unzip();
            return Ok(Self::Samples(GaussianSamples {
                mean: Tensor::cat(mean, 0),
                var: Tensor::cat(var, 0),
            }));
        }
        let m = parts.len() as f64;
        let mut moments = Vec::with_capacity(parts.len());
        for p in parts {
            match p {
                Self::Moments(g) => moments.push(g),
                Self::Samples(_) => {
                    return Err(unpoolable(
                        mode,
                        "its members predicted in different forms (draws and moments)",
                    ));
                }
            }
        }
        let mean = stack_mean(moments.iter().map(|g| g.mean.clone()), m);
        let second = stack_mean(
            moments
                .iter()
                .map(|g| g.epistemic_var.clone() + g.mean.clone().square()),
            m,
        );
        let aleatoric_var = stack_mean(moments.iter().map(|g| g.aleatoric_var.clone()), m);
        Ok(Self::Moments(GaussianMoments {
            epistemic_var: (second - mean.clone().square()).clamp_min(0.0),
            mean,
            aleatoric_var,
        }))
    }
}

fn stack_mean(parts: impl Iterator<Item = Tensor<2>>, m: f64) -> Tensor<2> {
    parts.reduce(|a, b| a + b).expect("at least one member") / m
}

impl Pool for ClassPrediction {
    /// Probability draws are concatenated (the mixture's mean is their mean); Dirichlet forms
    /// have no pooled Dirichlet and are refused.
    fn pool(parts: Vec<Self>, mode: PredictMode) -> Result<Self, PredictError> {
        let mut probs = Vec::with_capacity(parts.len());
        for p in parts {
            match p {
                Self::Samples(s) => probs.push(s.probs),
                Self::Dirichlet(_) => {
                    return Err(unpoolable(
                        mode,
                        "a mixture of Dirichlet predictions is not a Dirichlet: ensemble \
                         evidential members by their sampled probabilities instead",
                    ));
                }
            }
        }
        equal_draws(probs.iter().map(|p| p.dims()[0]), mode)?;
        Ok(Self::Samples(ClassSamples {
            probs: Tensor::cat(probs, 0),
        }))
    }
}

impl<M: Predict> Predict for Ensemble<M>
where
    M::Input: Clone,
    M::Prediction: Pool,
{
    type Input = M::Input;
    type Prediction = M::Prediction;

    /// Every member predicts in `mode` (`Samples(n)`: `n` draws each, one for a point member);
    /// the predictions pool into the equal-weight mixture ([`Pool`]).
    fn predict(&self, input: M::Input, mode: PredictMode) -> Result<M::Prediction, PredictError> {
        let parts = self
            .members
            .iter()
            .map(|m| m.predict(input.clone(), mode))
            .collect::<Result<Vec<_>, _>>()?;
        M::Prediction::pool(parts, mode)
    }
}
