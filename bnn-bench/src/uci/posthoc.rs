//! Post-hoc methods under the UCI protocol: the MAP fit of [`protocol_method`] (early stopped
//! on 10 % of the training rows), then a deep ensemble of such fits, SWAG or MultiSWAG from
//! them, or last-layer Laplace on one.

use super::*;
use crate::catalogue::PostHoc;
use bnn_burn::posthoc::{
    Ensemble, LaplaceConfig, LastLayerLaplace, NetworkLaplace, NetworkLaplaceConfig, Swag,
    SwagConfig,
};

/// Epochs of SWAG's SGD phase after the MAP fit, and the first of them skipped.
pub const SWAG_EPOCHS: usize = 50;
/// The first epochs of SWAG's SGD phase, not collected (the iterates settle at the new rate).
pub const SWAG_SKIP_EPOCHS: usize = 10;
/// Minibatches that estimate the gradient noise behind SWAG's SGD rate.
pub const SWAG_RATE_BATCHES: usize = 64;

/// A post-hoc method of the catalogue ([`Method::posthoc`]) under the protocol.
pub struct PostHocFit {
    /// The method: its weights are the networks', its `posthoc` the transform.
    pub method: Method,
    /// What is built on the networks.
    pub posthoc: PostHoc,
}

impl PostHocFit {
    /// The early-stopped MAP fit of member `m` (seeded from the split's seed and `m`), on the
    /// autodiff device, with its best epoch.
    fn member(
        &self,
        split: &PreparedSplit,
        m: usize,
    ) -> Result<(Regressor, usize), Box<dyn Error>> {
        let early = Some(EarlyStoppingConfig::new().with_patience(20));
        let seed = split.seed.wrapping_add(1_000_003 * m as u64);
        fit(&self.method, &split.train, split, None, 1, early, seed)
    }

    /// SWAG from member `m`'s MAP fit, with the SGD rate used.
    fn swag(
        &self,
        split: &PreparedSplit,
        m: usize,
        rank: usize,
    ) -> Result<
        (
            Swag<bnn_burn::nets::MlpBody, bnn_burn::likelihood::GaussianLikelihood>,
            f64,
        ),
        Box<dyn Error>,
    > {
        let (map, _) = self.member(split, m)?;
        let device = training_device();
        let mut net = map.train();
        // SWAG's posterior is over the weights: the noise stays at its MAP value (SGD on ln σ at
        // the weights' rate, with its own gradient noise, drifts the fit away from the mode).
        net.likelihood.fit = NoiseFit::Fixed;
        let d = split.train.n_features;
        let x = matrix(&split.train.x, d, &device);
        let y = matrix(&split.train.y, 1, &device);
        let config = TrainConfig::new(SWAG_EPOCHS)
            .with_batch_size(split.budget.batch_size)
            .with_seed(split.seed.wrapping_add(7 + m as u64))
            .with_progress(false);
        let swag = SwagConfig::new()
            .with_rank(rank)
            .with_skip_epochs(SWAG_SKIP_EPOCHS);
        Ok(Swag::fit_at_posterior_rate(
            net,
            x,
            y,
            config,
            swag,
            SWAG_RATE_BATCHES,
        )?)
    }
}

impl UciMethod for PostHocFit {
    fn name(&self) -> &'static str {
        self.method.name
    }

    fn run(&self, split: &PreparedSplit) -> Result<SplitOutcome, Box<dyn Error>> {
        let widest = split.meta.n_hidden.max(split.train.n_features);
        let (scores, detail) = match self.posthoc {
            PostHoc::Ensemble { members } => {
                let ensemble = Ensemble::train(members, |m| self.member(split, m).map(|f| f.0))
                    .map_err(|(m, e)| format!("member {m}: {e}"))?;
                let noise: Vec<String> = ensemble
                    .members()
                    .iter()
                    .map(|m| {
                        format!(
                            "{:.3}",
                            to_vec(m.likelihood.noise_std())[0] * split.y_scaler.std[0]
                        )
                    })
                    .collect();
                let scores = evaluate_predictive(&ensemble, false, 1, widest, split)?;
                (
                    scores,
                    format!(
                        "{members} MAP members, learned noise std {}",
                        noise.join(" ")
                    ),
                )
            }
            PostHoc::Swag { rank, members } => {
                let mut rates = Vec::new();
                let ensemble = Ensemble::train(members, |m| {
                    self.swag(split, m, rank).map(|(s, rate)| {
                        rates.push(format!("{rate:.2e}"));
                        s
                    })
                })
                .map_err(|(m, e)| format!("member {m}: {e}"))?;
                let passes = split.budget.test_passes.max(1).div_ceil(members);
                let scores = evaluate_predictive(&ensemble, false, passes, widest, split)?;
                (scores, format!("K = {rank}, SGD rate {}", rates.join(" ")))
            }
            PostHoc::LastLayerLaplace | PostHoc::KfacLaplace { .. } => {
                let (map, best) = self.member(split, 0)?;
                let device = map.devices()[0].clone();
                let d = split.train.n_features;
                let x = matrix(&split.train.x, d, &device);
                let y = matrix(&split.train.y, 1, &device);
                let (scores, lambda, what) = match self.posthoc {
                    PostHoc::LastLayerLaplace => {
                        let fit = LastLayerLaplace::fit(map, x, y, &LaplaceConfig::new())?;
                        let scores = evaluate_predictive(&fit, true, 1, widest, split)?;
                        (
                            scores,
                            format!("λ = {:.3}", fit.prior_precision()),
                            "last layer",
                        )
                    }
                    PostHoc::KfacLaplace { per_layer } => {
                        let config = NetworkLaplaceConfig::new()
                            .with_prior_precision(crate::catalogue::kfac_prior(per_layer));
                        let fit = NetworkLaplace::fit(map, x, y, &config)?;
                        let scores = evaluate_predictive(&fit, true, 1, widest, split)?;
                        let lambdas: Vec<String> = fit
                            .prior_precisions()
                            .iter()
                            .map(|l| format!("{l:.3}"))
                            .collect();
                        let lambda = match per_layer {
                            true => format!("λ per layer {}", lambdas.join(" ")),
                            false => format!("λ = {:.3}", fit.prior_precision()),
                        };
                        (scores, lambda, "KFAC, exact GGN factors")
                    }
                    _ => unreachable!("a Laplace method"),
                };
                let detail = format!(
                    "{what}, {lambda} by marginal likelihood, GLM predictive, best validation \
                     epoch {best}"
                );
                (scores, detail)
            }
        };
        Ok(SplitOutcome {
            test_ll: scores.log_likelihood,
            test_rmse: scores.rmse,
            coverage_90: Some(scores.coverage_90),
            conformal_coverage_90: scores.conformal_coverage_90,
            k_hat: None,
            detail,
        })
    }
}
