//! Priors over weights, with the KL divergence from a mean-field Gaussian posterior.
//!
//! * [`Prior::Gaussian`] `N(μ₀, σ₀²)`: closed-form KL,
//!   `KL(N(μ,σ²) ‖ N(μ₀,σ₀²)) = ln(σ₀/σ) + (σ² + (μ−μ₀)²)/(2σ₀²) − ½` per weight.
//! * [`Prior::ScaleMixture`] `π N(0,σ₁²) + (1−π) N(0,σ₂²)` (Blundell et al. 2015, eq. 7): no
//!   closed form, so the KL is a Monte Carlo estimate `(1/S) Σ_s [ln q(w_s) − ln p(w_s)]` with
//!   the prior density evaluated in log space (a two-term logsumexp).

use crate::error::{Check, ConfigError};
use crate::special::HALF_LN_2PI;
use burn::config::Config;
use burn::tensor::{Distribution, Tensor};

/// A factorised prior over the weights of a layer.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum Prior {
    /// Independent Gaussians `N(mean, std²)`.
    Gaussian {
        /// Prior mean μ₀.
        mean: f64,
        /// Prior standard deviation σ₀ (> 0).
        std: f64,
    },
    /// Scale mixture `pi · N(0, sigma1²) + (1 − pi) · N(0, sigma2²)` (Blundell et al. 2015).
    ScaleMixture {
        /// Weight of the first component, in (0, 1).
        pi: f64,
        /// Standard deviation of the first (wide) component (> 0).
        sigma1: f64,
        /// Standard deviation of the second (narrow) component (> 0).
        sigma2: f64,
    },
}

impl Default for Prior {
    /// The unit Gaussian `N(0, 1)`.
    fn default() -> Self {
        Prior::Gaussian {
            mean: 0.0,
            std: 1.0,
        }
    }
}

impl Prior {
    /// A zero-mean Gaussian prior with standard deviation `std`.
    pub fn gaussian(std: f64) -> Self {
        Prior::Gaussian { mean: 0.0, std }
    }

    /// Checks the hyperparameters; `config` names the configuration holding this prior.
    pub fn validate(&self, config: &'static str) -> Result<(), ConfigError> {
        let check = Check(config);
        match *self {
            Prior::Gaussian { mean, std } => {
                check.finite("prior.mean", mean)?;
                check.positive("prior.std", std)
            }
            Prior::ScaleMixture { pi, sigma1, sigma2 } => {
                check.open_unit("prior.pi", pi)?;
                check.positive("prior.sigma1", sigma1)?;
                check.positive("prior.sigma2", sigma2)
            }
        }
    }

    /// Elementwise `ln p(w)`.
    pub fn log_prob<const D: usize>(&self, w: Tensor<D>) -> Tensor<D> {
        match *self {
            Prior::Gaussian { mean, std } => gaussian_log_prob(w, mean, std),
            Prior::ScaleMixture { pi, sigma1, sigma2 } => {
                let a = gaussian_log_prob(w.clone(), 0.0, sigma1) + pi.ln();
                let b = gaussian_log_prob(w, 0.0, sigma2) + (1.0 - pi).ln();
                let max = a.clone().max_pair(b.clone()).detach();
                ((a - max.clone()).exp() + (b - max.clone()).exp()).log() + max
            }
        }
    }

    /// `KL(q ‖ p)` summed over all entries, for `q = N(mu, sigma²)` elementwise.
    ///
    /// Closed form for a Gaussian prior; for the scale mixture a Monte Carlo estimate from
    /// `samples` fresh reparameterised draws (unbiased, differentiable in `mu` and `sigma`).
    pub fn kl_mean_field<const D: usize>(
        &self,
        mu: Tensor<D>,
        sigma: Tensor<D>,
        samples: usize,
    ) -> Tensor<1> {
        match *self {
            // Σ[(σ² + (μ−μ₀)²)/(2σ₀²) − ln σ] + n(ln σ₀ − ½): three reductions of whole
            // tensors and scalar arithmetic, the fewest tensor passes for a training step.
            Prior::Gaussian { mean, std } => {
                let n = mu.dims().iter().product::<usize>() as f64;
                let centred = if mean == 0.0 { mu } else { mu - mean };
                let quadratic = sigma.clone().square().sum() + centred.square().sum();
                let log_sigma = sigma.log().sum();
                (quadratic / (2.0 * std * std) - log_sigma + n * (std.ln() - 0.5)).reshape([1])
            }
            Prior::ScaleMixture { .. } => {
                let samples = samples.max(1);
                let mut total: Option<Tensor<1>> = None;
                for _ in 0..samples {
                    let eps = mu.random_like(Distribution::Normal(0.0, 1.0));
                    let w = mu.clone() + sigma.clone() * eps.clone();
                    // ln q(w) = −ε²/2 − ln σ − ½ ln 2π.
                    let log_q = eps.square() * (-0.5) - sigma.clone().log() - HALF_LN_2PI;
                    let term = (log_q - self.log_prob(w)).sum().reshape([1]);
                    total = Some(match total {
                        Some(t) => t + term,
                        None => term,
                    });
                }
                total.expect("at least one sample") / samples as f64
            }
        }
    }
}

/// Elementwise `ln N(w; mean, std²)`.
pub fn gaussian_log_prob<const D: usize>(w: Tensor<D>, mean: f64, std: f64) -> Tensor<D> {
    ((w - mean) / std).square() * (-0.5) - (std.ln() + HALF_LN_2PI)
}

pub use crate::posterior::KlDivergence;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{seeded, test_device, to_vec};

    /// Closed-form KL against a 1e5-sample Monte Carlo estimate of E_q[ln q − ln p].
    #[test]
    fn gaussian_kl_matches_monte_carlo() {
        let device = test_device();
        let _guard = seeded(&device, 7);
        let prior = Prior::Gaussian {
            mean: 0.3,
            std: 0.8,
        };
        let mus = [-1.0f32, 0.0, 0.5, 2.0];
        let sigmas = [0.1f32, 0.5, 1.0, 2.5];
        for (&m, &s) in mus.iter().zip(&sigmas) {
            let exact = to_vec(prior.kl_mean_field(
                Tensor::<1>::from_floats([m], &device),
                Tensor::<1>::from_floats([s], &device),
                1,
            ))[0];
            let n = 100_000;
            let eps = Tensor::<1>::random([n], Distribution::Normal(0.0, 1.0), &device);
            let w = eps.clone() * s + m;
            let log_q = eps.square() * (-0.5) - ((s as f64).ln() + HALF_LN_2PI);
            let diff = log_q - prior.log_prob(w);
            let mc = to_vec(diff.clone().mean())[0];
            let sd = to_vec(diff.var(0))[0].sqrt();
            let se = sd / (n as f64).sqrt();
            assert!(
                (mc - exact).abs() < 4.0 * se + 1e-4,
                "mu {m} sigma {s}: closed form {exact}, MC {mc} ± {se}"
            );
        }
    }

    #[test]
    fn scale_mixture_kl_is_unbiased() {
        let device = test_device();
        let _guard = seeded(&device, 11);
        let prior = Prior::ScaleMixture {
            pi: 0.5,
            sigma1: 1.0,
            sigma2: (-6.0f64).exp(),
        };
        // 2000 weights with the same posterior: the per-weight estimate averages over them.
        let n = 2000;
        let mu = Tensor::<1>::full([n], 0.05, &device);
        let sigma = Tensor::<1>::full([n], 0.02, &device);
        let est = to_vec(prior.kl_mean_field(mu, sigma, 50))[0] / n as f64;
        // Reference from a direct 1e5-sample estimate of the same expectation.
        let eps = Tensor::<1>::random([100_000], Distribution::Normal(0.0, 1.0), &device);
        let w = eps.clone() * 0.02 + 0.05;
        let log_q = eps.square() * (-0.5) - ((0.02f64).ln() + HALF_LN_2PI);
        let diff = log_q - prior.log_prob(w);
        let reference = to_vec(diff.clone().mean())[0];
        let se = to_vec(diff.var(0))[0].sqrt() / (100_000f64).sqrt();
        // The estimate averages 1e5 draws too (2000 weights x 50 samples).
        assert!(
            (est - reference).abs() < 6.0 * se,
            "mixture KL per weight {est} vs reference {reference} (se {se})"
        );
    }

    #[test]
    fn mixture_log_prob_is_stable_far_in_the_tail() {
        let device = test_device();
        let prior = Prior::ScaleMixture {
            pi: 0.25,
            sigma1: 1.0,
            sigma2: 1e-3,
        };
        let w = Tensor::<1>::from_floats([0.0, 5.0, 40.0], &device);
        let got = to_vec(prior.log_prob(w));
        // f64 reference in log space too: at w = 40 the narrow component is exp(-8e8).
        let expect = |x: f64| {
            let a = 0.25f64.ln() - 0.5 * x * x - HALF_LN_2PI;
            let b = 0.75f64.ln() - 0.5 * (x / 1e-3).powi(2) - 1e-3f64.ln() - HALF_LN_2PI;
            let m = a.max(b);
            m + ((a - m).exp() + (b - m).exp()).ln()
        };
        for (g, x) in got.iter().zip([0.0, 5.0, 40.0]) {
            let r = expect(x);
            assert!(
                g.is_finite() && (g - r).abs() < 1e-4 * r.abs().max(1.0),
                "{g} vs {r}"
            );
        }
    }

    #[test]
    fn invalid_priors_are_rejected_with_field_names() {
        let err = Prior::gaussian(0.0).validate("TestConfig").unwrap_err();
        assert_eq!(err.field, "prior.std");
        assert!(err.to_string().contains("> 0"), "{err}");
        let err = Prior::ScaleMixture {
            pi: 1.5,
            sigma1: 1.0,
            sigma2: 0.1,
        }
        .validate("TestConfig")
        .unwrap_err();
        assert_eq!(err.field, "prior.pi");
    }
}
