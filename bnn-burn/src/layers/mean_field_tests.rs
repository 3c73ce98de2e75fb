#![allow(clippy::needless_range_loop)] // parallel indexing of exact and sampled moments
use super::*;
use crate::testing::{seeded, test_device, to_vec};
use burn::module::Param;
use burn::tensor::Distribution;

/// A 3→2 layer with hand-set means and scales, so that output moments have a closed form.
fn layer(estimator: Estimator, device: &Device) -> MeanFieldLinear {
    let mut l = MeanFieldLinearConfig::new(3, 2)
        .with_estimator(estimator)
        .init(device)
        .unwrap();
    let mu = Tensor::<2>::from_floats([[0.5, -1.0], [2.0, 0.3], [-0.7, 0.8]], device);
    let rho = Tensor::<2>::from_floats([[-1.0, 0.0], [-2.0, 0.5], [0.2, -0.5]], device);
    l.weight.mu = Param::from_tensor(mu);
    l.weight.rho = Param::from_tensor(rho);
    let b = l.bias.as_mut().unwrap();
    b.mu = Param::from_tensor(Tensor::from_floats([0.1, -0.2], device));
    b.rho = Param::from_tensor(Tensor::from_floats([-1.5, -0.3], device));
    l
}

const X: [f32; 3] = [1.0, -0.5, 2.0];

/// Closed-form output mean and variance of the layer above at input `X`.
fn exact_moments(l: &MeanFieldLinear, device: &Device) -> (Vec<f64>, Vec<f64>) {
    let x = Tensor::<2>::from_floats([X], device);
    let b = l.bias.as_ref().unwrap();
    let mean = to_vec(linear(x.clone(), l.weight.mu.val(), Some(b.mu.val())));
    let var = to_vec(linear(
        x.square(),
        l.weight.sigma().square(),
        Some(b.sigma().square()),
    ));
    (mean, var)
}

/// Sample mean and variance per output column of `[N, 2]` draws.
fn moments(samples: Tensor<2>) -> (Vec<f64>, Vec<f64>) {
    let mean = to_vec(samples.clone().mean_dim(0));
    let var = to_vec(samples.var(0));
    (mean, var)
}

/// Draws are Gaussian, so the sample mean has s.e. sqrt(v/N) and the sample variance
/// s.e. v·sqrt(2/(N−1)); 5 standard errors keeps the false-failure rate below 1e-6.
fn assert_moments(name: &str, got: (Vec<f64>, Vec<f64>), exact: &(Vec<f64>, Vec<f64>), n: usize) {
    for j in 0..2 {
        let (m, v) = (exact.0[j], exact.1[j]);
        let se_mean = (v / n as f64).sqrt();
        let se_var = v * (2.0 / (n as f64 - 1.0)).sqrt();
        assert!(
            (got.0[j] - m).abs() < 5.0 * se_mean,
            "{name}: output {j} mean {} vs exact {m} (se {se_mean})",
            got.0[j]
        );
        assert!(
            (got.1[j] - v).abs() < 5.0 * se_var,
            "{name}: output {j} variance {} vs exact {v} (se {se_var})",
            got.1[j]
        );
    }
}

#[test]
fn every_estimator_has_the_weight_sampling_moments() {
    let device = test_device();
    let _guard = seeded(&device, 3);
    let n = 20_000;
    for estimator in [
        Estimator::Reparameterization,
        Estimator::LocalReparameterization,
        Estimator::Flipout,
    ] {
        let l = layer(estimator, &device);
        let exact = exact_moments(&l, &device);
        // Per-example estimators: N copies of the input in one batch.
        // Weight sampling: N independent samples via the sample axis.
        let x = Tensor::<2>::from_floats([X], &device);
        let draws = match estimator {
            Estimator::LocalReparameterization => l.forward(x.repeat_dim(0, n)),
            _ => l
                .forward_samples(x.unsqueeze::<3>().repeat_dim(0, n))
                .reshape([n, 2]),
        };
        assert_moments(&format!("{estimator:?}"), moments(draws), &exact, n);
    }
}

/// Within one forward pass Flipout rows share a perturbation but are uncorrelated (random
/// signs), so the batch mean is unbiased with standard error sqrt(v/N).
#[test]
fn flipout_rows_of_one_batch_are_unbiased_and_decorrelated() {
    let device = test_device();
    let _guard = seeded(&device, 4);
    let n = 20_000;
    let l = layer(Estimator::Flipout, &device);
    let exact = exact_moments(&l, &device);
    let x = Tensor::<2>::from_floats([X], &device);
    let (mean, _) = moments(l.forward(x.repeat_dim(0, n)));
    for j in 0..2 {
        let se = (exact.1[j] / n as f64).sqrt();
        assert!(
            (mean[j] - exact.0[j]).abs() < 5.0 * se,
            "Flipout batch mean {j}: {} vs {} (se {se})",
            mean[j],
            exact.0[j]
        );
    }
}

#[test]
fn reparameterization_shares_one_draw_across_the_batch() {
    let device = test_device();
    let l = layer(Estimator::Reparameterization, &device);
    let x = Tensor::<2>::from_floats([X, X], &device);
    let y = to_vec(l.forward(x));
    assert_eq!(
        y[0..2],
        y[2..4],
        "two identical rows must see the same weights"
    );
}

#[test]
fn gradients_reach_mu_and_rho_for_every_estimator() {
    let device = test_device().autodiff();
    for estimator in [
        Estimator::Reparameterization,
        Estimator::LocalReparameterization,
        Estimator::Flipout,
    ] {
        let l = MeanFieldLinearConfig::new(4, 3)
            .with_estimator(estimator)
            .init(&device)
            .unwrap();
        let x = Tensor::<2>::random([8, 4], Distribution::Normal(0.0, 1.0), &device);
        let loss = l.forward(x).square().mean() + l.kl() / 100.0;
        let grads = loss.backward();
        for (name, g) in [
            ("weight.mu", l.weight.mu.grad(&grads)),
            ("weight.rho", l.weight.rho.grad(&grads)),
        ] {
            let g = to_vec(g.unwrap_or_else(|| panic!("{estimator:?}: no gradient for {name}")));
            assert!(
                g.iter().all(|v| v.is_finite()) && g.iter().any(|v| *v != 0.0),
                "{estimator:?}: gradient of {name} is zero or not finite: {g:?}"
            );
        }
        let b = l.bias.as_ref().unwrap();
        assert!(
            b.rho.grad(&grads).is_some(),
            "{estimator:?}: no bias.rho gradient"
        );
    }
}

#[test]
#[should_panic(
    expected = "input shape [2, 5] has width 5 on its last axis, but the layer expects d_input = 3"
)]
fn wrong_input_width_names_both_shapes() {
    let device = test_device();
    let l = MeanFieldLinearConfig::new(3, 2).init(&device).unwrap();
    let _ = l.forward(Tensor::<2>::zeros([2, 5], &device));
}

#[test]
fn invalid_configuration_is_an_error_naming_the_field() {
    let device = test_device();
    let err = MeanFieldLinearConfig::new(3, 2)
        .with_prior(Prior::gaussian(-1.0))
        .init(&device)
        .unwrap_err();
    assert_eq!(err.field, "prior.std");
    assert!(err.to_string().contains("MeanFieldLinearConfig"), "{err}");
    let err = MeanFieldLinearConfig::new(3, 2)
        .with_kl_samples(0)
        .init(&device)
        .unwrap_err();
    assert_eq!(err.field, "kl_samples");
    let err = MeanFieldConv2dConfig::new([1, 2], [3, 3])
        .with_prior(Prior::gaussian(0.0))
        .init(&device)
        .unwrap_err();
    assert_eq!(err.field, "prior.std");
}

#[test]
fn conv_estimators_match_kernel_sampling_moments() {
    let device = test_device();
    let _guard = seeded(&device, 5);
    let mut l = MeanFieldConv2dConfig::new([2, 2], [2, 2])
        .with_rho_init(-1.0)
        .init(&device)
        .unwrap();
    l.bias = None;
    let x = Tensor::<4>::random([1, 2, 3, 3], Distribution::Normal(0.0, 1.0), &device);
    let options = l.geometry.options();
    let exact_mean = to_vec(conv2d(x.clone(), l.weight.mu.val(), None, options.clone()));
    let exact_var = to_vec(conv2d(
        x.clone().square(),
        l.weight.sigma().square(),
        None,
        options,
    ));
    let n = 8_000;
    for estimator in [
        Estimator::Reparameterization,
        Estimator::LocalReparameterization,
        Estimator::Flipout,
    ] {
        l.estimator = estimator;
        let draws = l
            .forward_samples(x.clone().unsqueeze::<5>().repeat_dim(0, n))
            .reshape([n, 8]);
        let mean = to_vec(draws.clone().mean_dim(0));
        let var = to_vec(draws.var(0));
        for j in 0..8 {
            let (m, v) = (exact_mean[j], exact_var[j]);
            let se_mean = (v / n as f64).sqrt();
            let se_var = v * (2.0 / (n as f64 - 1.0)).sqrt();
            assert!(
                (mean[j] - m).abs() < 5.0 * se_mean,
                "{estimator:?} mean {j}: {} vs {m}",
                mean[j]
            );
            assert!(
                (var[j] - v).abs() < 5.0 * se_var,
                "{estimator:?} var {j}: {} vs {v}",
                var[j]
            );
        }
    }
}

#[test]
fn kl_is_the_closed_form_sum_over_weights_and_bias() {
    let device = test_device();
    let l = layer(Estimator::Reparameterization, &device);
    let kl = to_vec(l.kl())[0];
    let mut expected = 0.0;
    let b = l.bias.as_ref().unwrap();
    for (mu, sigma) in [
        (to_vec(l.weight.mu.val()), to_vec(l.weight.sigma())),
        (to_vec(b.mu.val()), to_vec(b.sigma())),
    ] {
        for (m, s) in mu.iter().zip(&sigma) {
            expected += -s.ln() + (s * s + m * m) / 2.0 - 0.5;
        }
    }
    assert!(
        (kl - expected).abs() < 1e-4 * expected.abs(),
        "{kl} vs {expected}"
    );
}

#[test]
fn one_step_forward_and_kl_agree_with_the_separate_calls() {
    // Outputs are random (and the RNG is shared with tests running in parallel), so compare
    // the KL exactly and the output's shape; both paths run the same sampling code.
    let device = test_device();
    for estimator in [
        Estimator::Reparameterization,
        Estimator::LocalReparameterization,
        Estimator::Flipout,
    ] {
        let l = layer(estimator, &device);
        let x = Tensor::<3>::from_floats([[X, X]], &device);
        let (out, kl) = l.forward_samples_kl(x.clone());
        assert_eq!(out.dims(), l.forward_samples(x).dims());
        assert_eq!(to_vec(kl), to_vec(l.kl()), "{estimator:?}: same KL");
    }
}
