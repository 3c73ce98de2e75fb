use super::*;
use crate::testing::{seeded, test_device, to_vec};

#[test]
fn mixture_log_prob_is_stable_far_in_the_tail() {
    let device = test_device();
    let prior = Prior::ScaleMixture {
        pi: 0.25,
        sigma1: 1.0,
        sigma2: 1e-3,
    }
    .weight_prior::<1>(1, &device);
    let w = Tensor::<2>::from_floats([[0.0], [5.0], [40.0]], &device);
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

/// The closed-form Gaussian cross-entropy against a 1e5-draw Monte Carlo average of −ln p(w)
/// under `N(m, v)`, with a broadcast scalar prior and a tensor prior.
#[test]
fn gaussian_cross_entropy_matches_monte_carlo() {
    let device = test_device();
    let _guard = seeded(&device, 7);
    let point = crate::posterior::MeanFieldDist::new(
        Tensor::<1>::from_floats([-1.0, 0.0, 0.5, 2.0], &device),
        Tensor::<1>::from_floats([0.1, 0.5, 1.0, 2.5], &device),
    );
    let priors = [
        Prior::Gaussian {
            mean: 0.3,
            std: 0.8,
        }
        .weight_prior::<1>(1, &device),
        WeightPrior::gaussian(
            Tensor::<1>::from_floats([0.0, 1.0, -1.0, 0.5], &device),
            Tensor::<1>::from_floats([1.0, 0.5, 2.0, 0.7], &device),
        ),
    ];
    for prior in priors {
        let exact = to_vec(prior.cross_entropy(&point))[0];
        let n = 100_000;
        let draws = crate::posterior::PosteriorDist::sample(&point, n);
        let neg: Vec<f64> = to_vec(prior.log_prob(draws)).iter().map(|v| -v).collect();
        let (mc, se) = crate::metrics::mean_and_standard_error(&neg);
        let se = se.expect("at least two draws");
        assert!(
            (mc - exact).abs() < 5.0 * se,
            "closed form {exact}, MC {mc} ± {se}"
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
