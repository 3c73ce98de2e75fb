//! The PAC-Bayes bound of a trained network on a data set ([`Bnn::pac_bound`]), from the
//! objective's constants ([`PacBayes`]): here, above the objectives, so that they do not
//! depend on networks.

use super::{Bnn, Body};
use crate::batch::Batch;
use crate::host::to_vec;
use crate::layers::Pass;
use crate::likelihood::{Likelihood, LogitRule};
use crate::objective::{Inference, PacBayes, PacBound};
use crate::posterior::Unsupported;
use crate::predict::PredictiveLogProb;

impl<B: Body, L: Likelihood> Bnn<B, L>
where
    L::Prediction: PredictiveLogProb<L::Target>,
{
    /// [`PacBound`] of `objective` on the rows `x` with targets `y`, predicted as the net was
    /// trained (`inference`): by moments, `samples` draws of the Gaussian outputs (a
    /// regressor's moments are used as they are), or `samples` draws of the weights.
    ///
    /// # Errors
    /// A body without moment rules under [`Inference::Moments`].
    pub fn pac_bound(
        &self,
        x: B::Input,
        y: L::Target,
        objective: &PacBayes,
        inference: Inference,
        samples: usize,
    ) -> Result<PacBound, Unsupported> {
        self.pac_bound_chunked([(x, y)], objective, inference, samples)
    }

    /// [`Bnn::pac_bound`] over a data set given in chunks of rows (a training set too large
    /// for one pass): the risk and the KL are averaged over every row.
    ///
    /// # Errors
    /// A body without moment rules under [`Inference::Moments`].
    ///
    /// # Panics
    /// No rows.
    pub fn pac_bound_chunked(
        &self,
        chunks: impl IntoIterator<Item = (B::Input, L::Target)>,
        objective: &PacBayes,
        inference: Inference,
        samples: usize,
    ) -> Result<PacBound, Unsupported> {
        let (mut n, mut p_sum, mut kl_sum) = (0, 0.0, 0.0);
        for (x, y) in chunks {
            let rows = y.len();
            let (prediction, kl) = if inference == Inference::Moments {
                let out = self.predictive_moments(x)?;
                let rule = LogitRule::Sampled { samples };
                let kl = self.likelihood.expected_local_kl(out.clone(), &y, rule)?;
                (self.likelihood.predict_moments(out, rule)?, kl)
            } else {
                let out = self.forward(x, &mut Pass::predict(samples));
                let kl = self.likelihood.local_kl(&out, &y);
                (self.likelihood.predict(out), kl)
            };
            p_sum += to_vec(prediction.log_prob(y).exp().sum())[0];
            kl_sum += kl.map_or(0.0, |k| to_vec(k.sum())[0]);
            n += rows;
        }
        assert!(n > 0, "Bnn::pac_bound: no rows");
        let (empirical_risk, kl) = (-p_sum / n as f64, kl_sum / n as f64);
        Ok(PacBound {
            empirical_risk,
            kl,
            bound: objective.risk_bound(empirical_risk, kl, n),
        })
    }
}
