use super::*;
use crate::fused::Kernels;
use crate::posterior::{
    DropoutConfig, DropoutMask, DropoutNoise, KlDivergence, MeanFieldConfig, MeanFieldPosterior,
    PosteriorConfig, PosteriorDist, PosteriorFamily, ScaleInit, WeightPosterior,
};
use crate::testing::{seeded, test_device, to_vec};
use burn::tensor::{Distribution, Tensor};

/// Posterior scales of order 0.3 so that the noise, not the mean, dominates.
fn wide(config: PosteriorConfig) -> PosteriorConfig {
    let scale = ScaleInit::new().with_rho(-1.0).with_rho_std(0.2);
    match config {
        PosteriorConfig::MeanField(c) => PosteriorConfig::MeanField(c.with_scale(scale)),
        PosteriorConfig::Radial(c) => PosteriorConfig::Radial(c.with_scale(scale)),
        PosteriorConfig::LowRank(c) => {
            PosteriorConfig::LowRank(c.with_scale(scale).with_factor_init_std(0.3))
        }
        other => other,
    }
}

fn weights(posterior: PosteriorConfig, estimator: Estimator) -> WeightConfig {
    WeightConfig::of(wide(posterior)).with_estimator(estimator)
}

const ESTIMATORS: [Estimator; 3] = [
    Estimator::Reparameterization,
    Estimator::LocalReparameterization,
    Estimator::Flipout,
];

/// Host moments of `y = x·w + b` for independent entries: `Σ x E[w] + E[b]`, `Σ x² Var[w] + Var[b]`.
fn analytic(x: &[f64], layer: &BayesianLinear) -> (Vec<f64>, Vec<f64>) {
    let [din, dout] = layer.shape();
    let wd = layer.params.weight.dist();
    let (m, v) = (to_vec(wd.mean()), to_vec(wd.marginal_variance().unwrap()));
    let bd = layer.params.bias.as_ref().unwrap().dist();
    let (bm, bv) = (to_vec(bd.mean()), to_vec(bd.marginal_variance().unwrap()));
    let mean = (0..dout)
        .map(|j| (0..din).map(|i| x[i] * m[i * dout + j]).sum::<f64>() + bm[j])
        .collect();
    let var = (0..dout)
        .map(|j| (0..din).map(|i| x[i] * x[i] * v[i * dout + j]).sum::<f64>() + bv[j])
        .collect();
    (mean, var)
}

/// The input at which the output-moment tests evaluate a `[5, 3]` layer.
const PROBE: [f64; 5] = [0.8, -1.2, 0.3, 2.0, -0.5];

/// [`PROBE`] as `n` samples of a one-example batch, `[n, 1, 5]`.
fn probe_input(n: usize, device: &burn::tensor::Device) -> Tensor<3> {
    Tensor::<1>::from_floats(PROBE, device)
        .reshape([1, 1, PROBE.len()])
        .repeat_dim(0, n)
}

/// Every estimator of every family with independent weights reproduces the analytic mean and
/// variance of each output, to 5 standard errors of 5 000 samples (enough to see a variance
/// 10 % off).
#[test]
fn every_estimator_matches_the_output_moments_of_every_family() {
    let device = test_device();
    let _guard = seeded(&device, 50);
    let (n, (din, dout)) = (5_000, (PROBE.len(), 3));
    let (x, input) = (PROBE, probe_input(n, &device));
    let gaussian = |mask| {
        PosteriorConfig::Dropout(
            DropoutConfig::new(0.3)
                .with_noise(DropoutNoise::Gaussian)
                .with_mask(mask),
        )
    };
    for posterior in [
        PosteriorConfig::mean_field(),
        PosteriorConfig::radial(),
        PosteriorConfig::mc_dropout(0.3),
        PosteriorConfig::drop_connect(0.3),
        gaussian(DropoutMask::Units),
        gaussian(DropoutMask::Weights),
        PosteriorConfig::point(),
    ] {
        for (estimator, kernels) in ESTIMATORS
            .into_iter()
            .flat_map(|e| [(e, Kernels::Fused), (e, Kernels::Reference)])
        {
            let layer = BayesianLinearConfig::new(din, dout)
                .with_weights(weights(posterior.clone(), estimator))
                .init(&device)
                .unwrap();
            let pass = &mut Pass::predict(n).with_kernels(kernels);
            let y = to_vec(layer.run(input.clone(), pass));
            let what = format!("{posterior:?} {estimator:?} {kernels:?}");
            check_output_moments(&x, &layer, &y, &what);
        }
    }
}

/// The sample mean and variance of each output column of `y` (`n` rows of the layer's outputs
/// at `x`) against [`analytic`], to 5 standard errors (the variance's from the fourth moment).
fn check_output_moments(x: &[f64], layer: &BayesianLinear, y: &[f64], what: &str) {
    check_moments(analytic(x, layer), y, what);
}

/// The sample mean and variance of each output column of `y` against `(mean, var)`, to 5
/// standard errors.
fn check_moments((mean, var): (Vec<f64>, Vec<f64>), y: &[f64], what: &str) {
    let dout = mean.len();
    let n = y.len() / dout;
    for j in 0..dout {
        let col: Vec<f64> = y.chunks(dout).map(|r| r[j]).collect();
        let (m, se) = crate::metrics::mean_and_standard_error(&col);
        let se = se.expect("at least two draws");
        let v = se * se * n as f64;
        let m4 = col.iter().map(|c| (c - m).powi(4)).sum::<f64>() / n as f64;
        let se_v = ((m4 - v * v).max(0.0) / n as f64).sqrt();
        assert!(
            (m - mean[j]).abs() <= 5.0 * se + 1e-5,
            "{what} output {j}: mean {m} vs {}",
            mean[j]
        );
        assert!(
            (v - var[j]).abs() <= 5.0 * se_v + 1e-5,
            "{what} output {j}: var {v} vs {}",
            var[j]
        );
    }
}

/// Low-rank weights (`w = μ + σ⊙ε + F z`) through every estimator, on the fused kernels
/// (checked) and on the composition: reparameterisation keeps the factor's correlations, so
/// `Var y_j = Σ_i x_i² σ_ij² + Σ_k (Σ_i x_i F_(ij)k)² + Var b_j`; the local estimator and
/// Flipout (whose random input signs cancel the cross terms) give `Σ_i x_i² Var w_ij + Var b_j`.
/// 5 s.e. of 5 000 samples; the factor's share of the variance is about half.
#[test]
fn low_rank_layers_match_the_output_moments_with_and_without_the_correlations() {
    let device = test_device();
    let _guard = seeded(&device, 53);
    let (n, (din, dout)) = (5_000, (PROBE.len(), 3));
    let (x, input) = (PROBE, probe_input(n, &device));
    for estimator in ESTIMATORS {
        for kernels in [Kernels::Fused, Kernels::Reference] {
            let layer = BayesianLinearConfig::new(din, dout)
                .with_weights(weights(PosteriorConfig::low_rank(2), estimator))
                .init(&device)
                .unwrap();
            let what = format!("low-rank {estimator:?} {kernels:?}");
            let pass = &mut Pass::predict(n).with_kernels(kernels);
            let op = super::linear::LinearOp::new(layer.shape(), pass);
            let fused = super::fused_path::run(&layer.params, &op, &input, pass).is_some();
            assert_eq!(
                fused,
                kernels == Kernels::Fused,
                "{what}: the fused kernels ran"
            );
            let (mean, mut var) = analytic(&x, &layer);
            if estimator == Estimator::Reparameterization {
                let crate::posterior::AnyPosterior::LowRank(w) = &layer.params.weight else {
                    unreachable!("a low-rank weight")
                };
                let f = to_vec(w.dist().factor);
                let k = f.len() / (din * dout);
                for (j, v) in var.iter_mut().enumerate() {
                    for r in 0..k {
                        let row = |i: usize| f[(i * dout + j) * k + r];
                        *v -= (0..din).map(|i| (x[i] * row(i)).powi(2)).sum::<f64>();
                        *v += (0..din).map(|i| x[i] * row(i)).sum::<f64>().powi(2);
                    }
                }
            }
            let y = to_vec(layer.run(input.clone(), &mut Pass::predict(n).with_kernels(kernels)));
            check_moments((mean, var), &y, &what);
        }
    }
}

/// Sampling passes run on the fused kernels for every estimator under each parameterisation of
/// `σ` (softplus; log-variance, as in the moment methods' [`crate::recipes::moment_weights`];
/// Depeweg's sigmoid variance, [`crate::recipes::depeweg_weights`]) with a point bias, with the
/// analytic output moments (5 s.e. of 5 000 samples) and the bias adding no variance.
#[test]
fn sampling_runs_on_the_fused_kernels_under_every_scale_with_a_point_bias() {
    use crate::posterior::ScaleParam;
    let device = test_device();
    let _guard = seeded(&device, 52);
    let (n, (din, dout)) = (5_000, (PROBE.len(), 3));
    let (x, input) = (PROBE, probe_input(n, &device));
    for param in [
        ScaleParam::Softplus,
        ScaleParam::LogVariance,
        ScaleParam::SigmoidVariance { bound: 0.5 },
    ] {
        for estimator in ESTIMATORS {
            let scale = ScaleInit::new()
                .with_param(param)
                .with_rho(-1.0)
                .with_rho_std(0.2);
            let config = WeightConfig::of(PosteriorConfig::MeanField(
                MeanFieldConfig::new().with_scale(scale),
            ))
            .with_estimator(estimator)
            .with_bias(Bias::Point);
            let mut layer = BayesianLinearConfig::new(din, dout)
                .with_weights(config)
                .init(&device)
                .unwrap();
            // A bias away from its initial zeros, so that a dropped one shows in the means.
            let Some(crate::posterior::AnyPosterior::Point(b)) = &mut layer.params.bias else {
                unreachable!("Bias::Point gives a point bias")
            };
            b.weight =
                burn::module::Param::from_tensor(Tensor::from_floats([0.5, -1.0, 2.0], &device));
            let what = format!("{param:?} {estimator:?}, point bias");
            let pass = &mut Pass::predict(n);
            let op = super::linear::LinearOp::new(layer.shape(), pass);
            let fused = super::fused_path::run(&layer.params, &op, &input, pass).is_some();
            assert!(fused, "{what}: the fused kernels ran");
            let y = to_vec(layer.run(input.clone(), &mut Pass::predict(n)));
            check_output_moments(&x, &layer, &y, &what);
        }
    }
}

/// Reparameterisation shares one weight draw across the batch; the local estimator and Flipout
/// give every example its own noise; masks on input units (MC dropout) are drawn per example
/// under every estimator.
#[test]
fn per_example_noise_only_where_the_estimator_gives_it() {
    let device = test_device();
    let _guard = seeded(&device, 51);
    // 32 inputs: two examples share a dropout mask with probability 2⁻³².
    let x = Tensor::<3>::ones([1, 4, 32], &device);
    for estimator in ESTIMATORS {
        for posterior in [
            PosteriorConfig::mean_field(),
            PosteriorConfig::mc_dropout(0.5),
        ] {
            let layer = BayesianLinearConfig::new(32, 8)
                .with_weights(weights(posterior.clone(), estimator))
                .init(&device)
                .unwrap();
            let y = to_vec(layer.forward_samples(x.clone()));
            let same = y[..8] == y[8..16];
            let shared = estimator == Estimator::Reparameterization
                && posterior == PosteriorConfig::mean_field();
            assert_eq!(same, shared, "{posterior:?} {estimator:?}");
        }
    }
}

#[test]
fn a_fixed_draw_gives_the_same_network_every_call() {
    let device = test_device();
    let _guard = seeded(&device, 52);
    let layer = BayesianLinearConfig::new(3, 2)
        .with_weights(weights(PosteriorConfig::mean_field(), Estimator::Flipout))
        .init(&device)
        .unwrap();
    let x = Tensor::<3>::random([1, 5, 3], Distribution::Normal(0.0, 1.0), &device);
    let draw = [layer.params.draw()];
    let run = |d: &[LayerDraw]| to_vec(layer.run(x.clone(), &mut Pass::fixed(d)));
    assert_eq!(run(&draw), run(&draw));
    assert_ne!(run(&draw), run(&[layer.params.draw()]));
}

/// `ln q − ln p` of the weight draws comes from the reparameterisation estimator; the local
/// estimator and a point estimate say why they cannot give it.
#[test]
fn the_log_ratio_needs_weight_draws_and_a_density() {
    let _guard = seeded(&test_device(), 104);
    let device = test_device();
    let x = Tensor::<3>::ones([4, 2, 3], &device);
    let terms = |posterior: PosteriorConfig, estimator| {
        let layer = BayesianLinearConfig::new(3, 2)
            .with_weights(weights(posterior, estimator))
            .init(&device)
            .unwrap();
        let mut pass = Pass::train(4, true);
        layer.run(x.clone(), &mut pass);
        pass.into_terms(&device)
    };
    let (kl, ratio) = terms(PosteriorConfig::mean_field(), Estimator::Reparameterization);
    assert_eq!(ratio.unwrap().unwrap().dims(), [4]);
    assert!(to_vec(kl)[0].is_finite());
    let (_, ratio) = terms(
        PosteriorConfig::mean_field(),
        Estimator::LocalReparameterization,
    );
    assert!(
        ratio
            .unwrap_err()
            .to_string()
            .contains("Reparameterization")
    );
    let (_, ratio) = terms(PosteriorConfig::point(), Estimator::Reparameterization);
    assert!(ratio.unwrap_err().to_string().contains("no density"));
}

/// Black-box α's pass (the draws with their `ln q − ln p`) runs on the fused kernels under a
/// tensor-valued prior, of the weight's shape or `[1; D]`, as under a scalar one (checked;
/// `objective::alpha`'s tests compare the ratios with the composition's), with one ratio per
/// draw and the same KL as the layer's own.
#[test]
fn black_box_alpha_draws_run_on_the_kernels_under_a_tensor_valued_prior() {
    let _guard = seeded(&test_device(), 105);
    let device = test_device();
    let x = Tensor::<3>::random([4, 2, 5], Distribution::Normal(0.0, 1.0), &device);
    for prior in [PriorKind::Scalar, PriorKind::Tensor, PriorKind::Broadcast] {
        let mut layer = BayesianLinearConfig::new(5, 3)
            .with_weights(weights(
                PosteriorConfig::mean_field(),
                Estimator::Reparameterization,
            ))
            .init(&device)
            .unwrap();
        match prior {
            PriorKind::Tensor => tensor_valued_priors(&mut layer.params, &device),
            PriorKind::Broadcast => broadcast_priors(&mut layer.params, &device),
            _ => {}
        }
        let mut pass = Pass::train(4, true);
        let op = super::linear::LinearOp::new(layer.shape(), &pass);
        let y = super::fused_path::run(&layer.params, &op, &x, &mut pass);
        assert!(y.is_some(), "{prior:?} prior: the fused kernels ran");
        let (kl, ratio) = pass.into_terms(&device);
        assert_eq!(ratio.unwrap().unwrap().dims(), [4]);
        let (kl, own) = (to_vec(kl)[0], to_vec(layer.kl())[0]);
        assert!(
            (kl - own).abs() <= 1e-5 * own.abs(),
            "{prior:?} prior: KL {kl} vs {own}"
        );
    }
}

/// Black-box α's pass on a layer whose KL clamps `ln σ²` (Haußmann's VBP code) stays on the
/// kernels: the same outputs and `ln q − ln p` as the same layer without the clamp under the
/// same seed (the ratios do not clamp), and the clamped KL as the composition of burn ops gives
/// it (`layer.kl()`), under a scalar and a tensor-valued prior, with the clamp holding about
/// half the variances (`ln σ²` about −2.3 ± 0.34, clamped to `[−2.3, 0]`).
#[test]
fn black_box_alpha_draws_stay_on_the_kernels_when_the_kl_clamps() {
    let device = test_device();
    for tensor_prior in [false, true] {
        let guard = seeded(&device, 106);
        let config = weights(PosteriorConfig::mean_field(), Estimator::Reparameterization);
        let config = config.clone().with_prior(config.prior.clamped(-2.3, 0.0));
        let mut layer = BayesianLinearConfig::new(5, 3)
            .with_weights(config)
            .init(&device)
            .unwrap();
        if tensor_prior {
            tensor_valued_priors(&mut layer.params, &device);
        }
        let x = Tensor::<3>::random([4, 2, 5], Distribution::Normal(0.0, 1.0), &device);
        drop(guard);
        let mut unclamped = layer.clone();
        unclamped.params.kl_log_var_range = None;
        let run = |layer: &BayesianLinear| {
            let _guard = seeded(&device, 107);
            let mut pass = Pass::train(4, true);
            let op = super::linear::LinearOp::new(layer.shape(), &pass);
            let y = super::fused_path::run(&layer.params, &op, &x, &mut pass);
            let y = y.unwrap_or_else(|| panic!("tensor prior {tensor_prior}: the kernels ran"));
            let (kl, ratio) = pass.into_terms(&device);
            (to_vec(y), to_vec(ratio.unwrap().unwrap()), to_vec(kl)[0])
        };
        let (y, ratio, kl) = run(&layer);
        let (y_free, ratio_free, kl_free) = run(&unclamped);
        assert_eq!(y, y_free, "tensor prior {tensor_prior}: the same draws");
        assert_eq!(
            ratio, ratio_free,
            "tensor prior {tensor_prior}: the same ratios"
        );
        let own = to_vec(layer.kl())[0];
        assert!(
            (kl - own).abs() <= 1e-5 * own.abs(),
            "tensor prior {tensor_prior}: KL {kl} vs the composition's {own}"
        );
        assert!(
            (kl - kl_free).abs() >= 0.02 * kl_free.abs(),
            "tensor prior {tensor_prior}: the clamp holds (KL {kl} vs {kl_free} unclamped)"
        );
    }
}

#[test]
fn a_statically_typed_layer_and_the_posterior_as_the_next_prior() {
    let _guard = seeded(&test_device(), 101);
    let device = test_device();
    let family = MeanFieldConfig::new().with_scale(ScaleInit::new().with_rho(-1.0));
    let layer: BayesianLinear<MeanFieldPosterior<2>, MeanFieldPosterior<1>> =
        BayesianLinearConfig::new(4, 3)
            .init_with(&family, &device)
            .unwrap();
    assert!(to_vec(layer.kl())[0] > 1.0);
    let params = layer.params.with_posterior_as_prior().unwrap();
    assert!(to_vec(params.kl())[0].abs() < 1e-4, "KL(q ‖ q) = 0");
    let point = BayesianLinearConfig::new(4, 3)
        .with_weights(WeightConfig::of(PosteriorConfig::point()))
        .init(&device)
        .unwrap();
    assert!(point.params.with_posterior_as_prior().is_err());
}

/// `½ Σ ln v_i − ½ ln det(F Fᵀ + diag σ²)`, `v_i = σ_i² + ‖F_i‖²`: the KL from a low-rank
/// Gaussian to the diagonal Gaussian of its own marginals, i.e. the information its
/// correlations carry, in `f64` from the full covariance's Cholesky factor on the host.
fn correlation_information<const D: usize>(q: crate::posterior::LowRankDist<D>) -> f64 {
    let (sigma, f) = (to_vec(q.sigma), to_vec(q.factor));
    let (n, k) = (sigma.len(), f.len() / sigma.len());
    let cov = |i: usize, j: usize| {
        let shared: f64 = (0..k).map(|r| f[i * k + r] * f[j * k + r]).sum();
        shared + if i == j { sigma[i] * sigma[i] } else { 0.0 }
    };
    let mut l = vec![0f64; n * n];
    let mut log_det = 0.0;
    for j in 0..n {
        for i in j..n {
            let s = cov(i, j) - (0..j).map(|p| l[i * n + p] * l[j * n + p]).sum::<f64>();
            if i == j {
                l[j * n + j] = s.sqrt();
                log_det += s.ln();
            } else {
                l[i * n + j] = s / l[j * n + j];
            }
        }
    }
    let log_marginals: f64 = (0..n).map(|i| cov(i, i).ln()).sum();
    0.5 * (log_marginals - log_det)
}

/// A low-rank layer whose prior is its own posterior, moment-matched (`N(μ, diag v)`, `v_i =
/// σ_i² + ‖F_i‖²`, as variational continual learning takes the last task's posterior), has
/// `KL = ½ Σ ln v_i − ½ ln det Σ` (weight and bias each; [`correlation_information`]): a
/// training pass gives it on the fused kernels (the per-weight terms and the factor's share
/// under the per-row `σ₀`; the route asserted), folded or not, and on the composition of burn
/// ops, for every estimator, within `f32` rounding of sums over 15 weights.
#[test]
fn a_low_rank_layers_kl_to_its_own_marginals_is_its_correlations_information() {
    use crate::posterior::AnyPosterior;
    let device = test_device().autodiff();
    let _guard = seeded(&test_device(), 62);
    for estimator in ESTIMATORS {
        let mut layer = BayesianLinearConfig::new(4, 3)
            .with_weights(weights(PosteriorConfig::low_rank(2), estimator))
            .init(&device)
            .unwrap();
        layer.params = layer.params.clone().with_posterior_as_prior().unwrap();
        assert_eq!(
            super::fused_path::kl_on_kernels(&layer.params),
            Some(true),
            "{estimator:?}: the KL on the kernels"
        );
        let AnyPosterior::LowRank(w) = &layer.params.weight else {
            unreachable!("a low-rank weight")
        };
        let Some(AnyPosterior::LowRank(b)) = &layer.params.bias else {
            unreachable!("a low-rank bias")
        };
        let expected = correlation_information(w.dist()) + correlation_information(b.dist());
        assert!(expected > 0.05, "{estimator:?}: information {expected}");
        let x = Tensor::<3>::random([1, 2, 4], Distribution::Normal(0.0, 1.0), &device);
        let passes: [(&str, &dyn Fn() -> Pass<'static>); 3] = [
            ("fused", &|| Pass::train(1, false)),
            ("fused, folded", &|| Pass::train(1, false).fold_kl(0.3)),
            ("composition", &|| {
                Pass::train(1, false).with_kernels(Kernels::Reference)
            }),
        ];
        for (what, make) in passes {
            let mut pass = make();
            let _ = layer.run(x.clone(), &mut pass);
            let (kl, _) = pass.into_terms(&device);
            let kl = to_vec(kl)[0];
            assert!(
                (kl - expected).abs() <= 1e-5,
                "{estimator:?} {what}: KL {kl} vs {expected}"
            );
        }
    }
}

#[test]
fn invalid_layer_configs_name_the_field() {
    let device = test_device();
    let err = BayesianLinearConfig::new(0, 3).init(&device).unwrap_err();
    assert_eq!((err.config, err.field), ("BayesianLinearConfig", "d_input"));
    let err = BayesianConv2dConfig::new([1, 2], [0, 3])
        .init(&device)
        .unwrap_err();
    assert_eq!(err.field, "kernel_size");
    let bad = WeightConfig::of(PosteriorConfig::mc_dropout(1.5));
    let err = BayesianLinearConfig::new(2, 2)
        .with_weights(bad)
        .init(&device)
        .unwrap_err();
    assert_eq!((err.config, err.field), ("DropoutConfig", "p"));
    let bad = WeightConfig::new().with_kl_samples(0);
    let err = BayesianConv2dConfig::new([1, 2], [3, 3])
        .with_weights(bad)
        .init(&device)
        .unwrap_err();
    assert_eq!(
        (err.config, err.field),
        ("BayesianConv2dConfig", "weights.kl_samples")
    );
}

#[test]
#[should_panic(expected = "input shape [1, 2, 4] has width 4")]
fn a_wrong_input_width_names_both_shapes() {
    let _guard = seeded(&test_device(), 103);
    let device = test_device();
    let layer = BayesianLinearConfig::new(3, 2).init(&device).unwrap();
    layer.forward_samples(Tensor::zeros([1, 2, 4], &device));
}

#[test]
#[should_panic(expected = "expects 3 input channels")]
fn a_wrong_channel_count_names_both_shapes() {
    let _guard = seeded(&test_device(), 102);
    let device = test_device();
    let layer = BayesianConv2dConfig::new([3, 2], [2, 2])
        .init(&device)
        .unwrap();
    layer.forward(Tensor::zeros([1, 2, 4, 4], &device));
}

/// Every parameter's gradient of `loss`, in the module's visiting order.
fn param_grads<M: burn::module::Module>(loss: Tensor<1>, m: &M) -> Vec<f64> {
    module_grads(&mut loss.backward(), m)
}

/// Every gradient of `m`'s parameters in `grads`, in the module's visiting order.
fn module_grads<M: burn::module::Module>(grads: &mut burn::tensor::Gradients, m: &M) -> Vec<f64> {
    struct Collect<'a>(&'a burn::optim::GradientsParams, Vec<f64>);
    impl burn::module::ModuleVisitor for Collect<'_> {
        fn visit_float<const D: usize>(&mut self, p: &burn::module::Param<Tensor<D>>) {
            if let Some(g) = self.0.get::<D>(p.id) {
                self.1.extend(to_vec(g));
            }
        }
    }
    let grads = burn::optim::GradientsParams::from_module(grads, m);
    let mut collect = Collect(&grads, Vec::new());
    m.visit(&mut collect);
    collect.1
}

/// A [`crate::dist::Moments::deterministic`] input skips the `Var[h] ∗ E[w]²` weight operation.
/// For a dense and a convolutional layer with Bayesian weights and biases, the moments are the
/// closed form (`Σ x E[w] + E[b]`, `Σ x² Var[w] + Var[b]`, checked on the host for the dense
/// layer), and the moments and every parameter's gradient equal those of the same input given
/// as `Moments::new(x, 0)`, which runs all three operations.
#[test]
fn a_deterministic_input_skips_a_weight_operation_and_changes_nothing() {
    use crate::dist::Moments;
    let device = test_device().autodiff();
    let _guard = seeded(&test_device(), 61);
    let rule = crate::layers::MomentRule::Clt;
    let config = weights(
        PosteriorConfig::mean_field(),
        Estimator::LocalReparameterization,
    );
    // `a`: from the deterministic input; `b`: what it must equal.
    let close = |a: &[f64], b: &[f64], what: &str| {
        assert_eq!(a.len(), b.len(), "{what}: lengths");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-6 * x.abs().max(y.abs()).max(1e-3),
                "{what}[{i}]: {x} vs {y}"
            );
        }
    };
    // Dense: [1, 4, 3] → [1, 4, 2].
    let dense = BayesianLinearConfig::new(3, 2)
        .with_weights(config.clone())
        .init(&device)
        .unwrap();
    let x = Tensor::<3>::random([1, 4, 3], Distribution::Normal(0.0, 1.0), &device);
    let c = Tensor::<3>::random([1, 4, 2], Distribution::Normal(0.0, 1.0), &device);
    let run = |m: Moments<3>| {
        let out = dense.moments(m, &mut Pass::moments(rule)).unwrap();
        let loss = (out.mean.clone() * c.clone() + out.var.clone() * c.clone().square()).sum();
        (to_vec(out.mean), to_vec(out.var), param_grads(loss, &dense))
    };
    let det = run(Moments::deterministic(x.clone()));
    let full = run(Moments::new(x.clone(), x.zeros_like()));
    let xs = to_vec(x);
    for row in 0..4 {
        let (mean, var) = analytic(&xs[row * 3..row * 3 + 3], &dense);
        close(
            &det.0[row * 2..row * 2 + 2],
            &mean,
            "dense mean, deterministic input vs closed form",
        );
        close(
            &det.1[row * 2..row * 2 + 2],
            &var,
            "dense variance, deterministic input vs closed form",
        );
    }
    close(
        &det.0,
        &full.0,
        "dense mean, deterministic input vs explicit zero variance",
    );
    close(
        &det.1,
        &full.1,
        "dense variance, deterministic input vs explicit zero variance",
    );
    assert!(det.2.len() > 12, "weights and bias have gradients");
    close(
        &det.2,
        &full.2,
        "dense gradients, deterministic input vs explicit zero variance",
    );
    // Convolution: [1, 3, 2, 5, 5] → [1, 3, 4, 2, 2] (3×3 kernel, stride 2).
    let conv = BayesianConv2dConfig::new([2, 4], [3, 3])
        .with_geometry(Conv2dGeometry::new().with_stride([2, 2]))
        .with_weights(config)
        .init(&device)
        .unwrap();
    let x = Tensor::<5>::random([1, 3, 2, 5, 5], Distribution::Normal(0.0, 1.0), &device);
    let c = Tensor::<5>::random([1, 3, 4, 2, 2], Distribution::Normal(0.0, 1.0), &device);
    let run = |m: Moments<5>| {
        let out = conv.moments(m, &mut Pass::moments(rule)).unwrap();
        let loss = (out.mean.clone() * c.clone() + out.var.clone() * c.clone().square()).sum();
        (to_vec(out.mean), to_vec(out.var), param_grads(loss, &conv))
    };
    let det = run(Moments::deterministic(x.clone()));
    let full = run(Moments::new(x.clone(), x.zeros_like()));
    assert!(
        det.1.iter().all(|v| *v > 0.0),
        "Bayesian weights and bias: positive variance"
    );
    close(
        &det.0,
        &full.0,
        "conv mean, deterministic input vs explicit zero variance",
    );
    close(
        &det.1,
        &full.1,
        "conv variance, deterministic input vs explicit zero variance",
    );
    assert!(det.2.len() > 2 * 72, "weights and bias have gradients");
    close(
        &det.2,
        &full.2,
        "conv gradients, deterministic input vs explicit zero variance",
    );
}

/// A 2×2 kernel on a 2×2 image is a dot product: its single output has the analytic moments
/// under every estimator (per-element input dropout for MC dropout, Gal's Bayesian CNN).
#[test]
fn convolution_estimators_match_the_output_moments() {
    let device = test_device();
    let _guard = seeded(&device, 53);
    let n = 5_000;
    let x = [0.5, -1.0, 1.5, 0.7, -0.3, 1.1, 0.2, -0.8];
    let input = Tensor::<1>::from_floats(x, &device)
        .reshape([1, 1, 2, 2, 2])
        .repeat_dim(0, n);
    let cases = [
        (PosteriorConfig::mean_field(), ESTIMATORS.to_vec()),
        (PosteriorConfig::radial(), ESTIMATORS.to_vec()),
        (PosteriorConfig::drop_connect(0.3), ESTIMATORS.to_vec()),
        (
            PosteriorConfig::mc_dropout(0.3),
            vec![Estimator::LocalReparameterization],
        ),
    ];
    for (posterior, estimators) in cases {
        for (estimator, kernels) in estimators
            .into_iter()
            .flat_map(|e| [(e, Kernels::Fused), (e, Kernels::Reference)])
        {
            let layer = BayesianConv2dConfig::new([2, 1], [2, 2])
                .with_weights(weights(posterior.clone(), estimator))
                .init(&device)
                .unwrap();
            let pass = &mut Pass::predict(n).with_kernels(kernels);
            let y = to_vec(layer.run(input.clone(), pass));
            let wd = layer.params.weight.dist();
            let (m, v) = (to_vec(wd.mean()), to_vec(wd.marginal_variance().unwrap()));
            let bd = layer.params.bias.as_ref().unwrap().dist();
            let want_mean = (0..8).map(|i| x[i] * m[i]).sum::<f64>() + to_vec(bd.mean())[0];
            let want_var = (0..8).map(|i| x[i] * x[i] * v[i]).sum::<f64>()
                + to_vec(bd.marginal_variance().unwrap())[0];
            let (mean, se) = crate::metrics::mean_and_standard_error(&y);
            let se = se.expect("at least two draws");
            let var = se * se * n as f64;
            let m4 = y.iter().map(|c| (c - mean).powi(4)).sum::<f64>() / n as f64;
            let se_v = ((m4 - var * var).max(0.0) / n as f64).sqrt();
            let what = format!("{posterior:?} {estimator:?} {kernels:?}");
            assert!(
                (mean - want_mean).abs() <= 5.0 * se,
                "{what}: mean {mean} vs {want_mean}"
            );
            assert!(
                (var - want_var).abs() <= 5.0 * se_v,
                "{what}: var {var} vs {want_var}"
            );
        }
    }
}

/// Flipout decorrelates the examples of a batch: for two identical inputs the outputs'
/// correlation over 5 000 samples is within 5/√n of 0 (reparameterisation: exactly 1).
#[test]
fn flipout_outputs_of_identical_examples_are_uncorrelated() {
    let device = test_device();
    let _guard = seeded(&device, 54);
    let n = 5_000;
    let layer = BayesianLinearConfig::new(4, 1)
        .with_weights(weights(PosteriorConfig::mean_field(), Estimator::Flipout))
        .init(&device)
        .unwrap();
    let x = Tensor::<3>::ones([n, 2, 4], &device);
    let y = to_vec(layer.forward_samples(x));
    let (a, b): (Vec<f64>, Vec<f64>) = y.chunks(2).map(|p| (p[0], p[1])).unzip();
    let (ma, mb) = (crate::metrics::mean(&a), crate::metrics::mean(&b));
    let cov: f64 = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - ma) * (y - mb))
        .sum::<f64>();
    let norm = (a.iter().map(|x| (x - ma).powi(2)).sum::<f64>()
        * b.iter().map(|y| (y - mb).powi(2)).sum::<f64>())
    .sqrt();
    let corr = cov / norm;
    assert!(corr.abs() < 5.0 / (n as f64).sqrt(), "correlation {corr}");
}

/// The priors a layer test can give: the configuration's scalar Gaussian, tensor-valued
/// Gaussians set after initialisation ([`tensor_valued_priors`]), or a hyperprior in place of
/// the KL.
#[derive(Clone, Copy, Debug, PartialEq)]
enum PriorKind {
    Scalar,
    Tensor,
    /// A tensor-valued Gaussian of shape `[1; D]` ([`broadcast_priors`]).
    Broadcast,
    Hyper,
}

/// Replaces the priors of a layer's weight and (when it has one) bias by Gaussians of shape
/// `[1; D]` (mean −0.2, standard deviation 0.5), the broadcast form
/// [`crate::dist::WeightPrior::gaussian`] takes beside the weight's own shape.
fn broadcast_priors<W, B, const D: usize>(
    params: &mut super::params::LayerParams<W, B, D>,
    device: &burn::tensor::Device,
) where
    W: crate::posterior::WeightPosterior<D>,
    B: crate::posterior::WeightPosterior<1>,
{
    use crate::dist::WeightPrior;
    fn gaussian<const N: usize>(device: &burn::tensor::Device) -> WeightPrior<N> {
        WeightPrior::gaussian(
            Tensor::full([1; N], -0.2, device),
            Tensor::full([1; N], 0.5, device),
        )
    }
    params.weight_prior = gaussian(device);
    if params.bias_prior.is_some() {
        params.bias_prior = Some(gaussian(device));
    }
}

/// Replaces the priors of a layer's weight and (when it has one) bias by Gaussians with a mean
/// and a standard deviation per entry, as [`crate::dist::WeightPrior::from_posterior`] or a
/// MOPED-style prior give: means `N(0.1, 0.3²)`, standard deviations `U(0.4, 1)`.
pub(crate) fn tensor_valued_priors<W, B, const D: usize>(
    params: &mut super::params::LayerParams<W, B, D>,
    device: &burn::tensor::Device,
) where
    W: crate::posterior::WeightPosterior<D>,
    B: crate::posterior::WeightPosterior<1>,
{
    use crate::dist::WeightPrior;
    fn gaussian<const N: usize>(
        shape: [usize; N],
        device: &burn::tensor::Device,
    ) -> WeightPrior<N> {
        WeightPrior::gaussian(
            Tensor::random(shape, Distribution::Normal(0.1, 0.3), device),
            Tensor::random(shape, Distribution::Uniform(0.4, 1.0), device),
        )
    }
    params.weight_prior = gaussian(params.weight.shape(), device);
    if let (Some(b), Some(_)) = (&params.bias, &params.bias_prior) {
        params.bias_prior = Some(gaussian(b.shape(), device));
    }
}

/// The KL a training pass collects, and its gradient, are the same on the fused kernels (folded
/// into the sampling kernel's backward, or as their own op) as on the composition of burn ops,
/// for every estimator, mean-field (also with `ln σ²` clamped inside the KL, the clamp holding
/// some variances on each side), radial and low-rank (the factor's terms differentiable beside
/// the folded diagonal's), dense and convolutional, with every parameter's gradient; under
/// tensor-valued priors (per-weight terms on the kernels for mean-field, clamped or not, radial
/// and low-rank, whose factor's share takes the per-row `σ₀`), also of the broadcast shape
/// `[1; D]` (expanded to the weight's on the kernels), and a hyperprior (its density
/// from burn ops beside the kernels' draws; which of the two routes a layer's KL takes is
/// asserted); and for the families that keep the composition's draws
/// but take their prior term from one fused op ([`crate::fused::quadratic`]): points (MAP's
/// `−ln p(w)`), MC dropout and DropConnect (Gal's `(1−p)/(2σ₀²)‖M − μ₀‖²`), biases included.
#[test]
fn fused_kl_and_its_gradient_match_the_reference_for_every_estimator() {
    let device = test_device().autodiff();
    let _guard = seeded(&test_device(), 55);
    let weight = 0.3;
    // σ = softplus(ρ), ρ ~ N(−3, 1): ln σ² from about −10 to −1.3, clamped to [−7, −5].
    let spread = PosteriorConfig::MeanField(
        MeanFieldConfig::new().with_scale(ScaleInit::new().with_rho(-3.0).with_rho_std(1.0)),
    );
    use PriorKind::{Broadcast, Hyper, Scalar, Tensor as TensorPrior};
    for (posterior, sampled, range, prior) in [
        (PosteriorConfig::mean_field(), true, None, Scalar),
        (spread.clone(), true, Some((-7.0, -5.0)), Scalar),
        (spread.clone(), true, Some((-7.0, -5.0)), TensorPrior),
        (spread, true, Some((-7.0, -5.0)), Broadcast),
        (PosteriorConfig::radial(), true, None, Scalar),
        (PosteriorConfig::low_rank(2), true, None, Scalar),
        (PosteriorConfig::mean_field(), true, None, TensorPrior),
        (PosteriorConfig::radial(), true, None, TensorPrior),
        (PosteriorConfig::low_rank(2), true, None, TensorPrior),
        (PosteriorConfig::mean_field(), true, None, Broadcast),
        (PosteriorConfig::radial(), true, None, Broadcast),
        (PosteriorConfig::low_rank(2), true, None, Broadcast),
        (PosteriorConfig::mean_field(), true, None, Hyper),
        (PosteriorConfig::point(), false, None, Scalar),
        (PosteriorConfig::mc_dropout(0.3), false, None, Scalar),
        (PosteriorConfig::drop_connect(0.2), false, None, Scalar),
    ] {
        for estimator in ESTIMATORS {
            let gaussian = crate::dist::Prior::Gaussian {
                mean: 0.1,
                std: 0.7,
            };
            let prior_config = match (prior == Hyper, range) {
                (true, _) => crate::dist::Prior::Hyper(crate::dist::HyperPrior::new()),
                (false, Some((lo, hi))) => gaussian.clamped(lo, hi),
                (false, None) => gaussian,
            };
            let config = weights(posterior.clone(), estimator).with_prior(prior_config);
            let mut dense = BayesianLinearConfig::new(5, 3)
                .with_weights(config.clone())
                .init(&device)
                .unwrap();
            let mut conv = BayesianConv2dConfig::new([2, 3], [2, 2])
                .with_weights(config)
                .init(&device)
                .unwrap();
            if prior == TensorPrior {
                tensor_valued_priors(&mut dense.params, &device);
                tensor_valued_priors(&mut conv.params, &device);
            }
            if prior == Broadcast {
                broadcast_priors(&mut dense.params, &device);
                broadcast_priors(&mut conv.params, &device);
            }
            let on_kernels = [
                super::fused_path::kl_on_kernels(&dense.params),
                super::fused_path::kl_on_kernels(&conv.params),
            ];
            assert_eq!(
                on_kernels,
                [sampled.then_some(prior != Hyper); 2],
                "{posterior:?} {prior:?} {estimator:?}: the KL's route (dense, conv)"
            );
            let x = Tensor::<3>::random([2, 4, 5], Distribution::Normal(0.0, 1.0), &device);
            let xc = Tensor::<5>::random([2, 4, 2, 3, 3], Distribution::Normal(0.0, 1.0), &device);
            // loss = 0·Σ y + λ·KL: only the KL's gradient, through whichever route the pass takes.
            let run = |make: &dyn Fn() -> Pass<'static>| {
                let mut pass = make();
                let op = super::linear::LinearOp::new(dense.shape(), &pass);
                let fused = super::fused_path::run(&dense.params, &op, &x, &mut make());
                assert_eq!(
                    fused.is_some(),
                    sampled && pass.kernels() == Kernels::Fused,
                    "{posterior:?} {prior:?} {estimator:?}: the fused sampling kernels ran"
                );
                let y =
                    dense.run(x.clone(), &mut pass).sum() + conv.run(xc.clone(), &mut pass).sum();
                let (kl, _) = pass.into_terms(&device);
                let loss = y * 0.0 + kl.clone() * weight;
                let mut grads = loss.backward();
                let mut g = module_grads(&mut grads, &dense);
                g.extend(module_grads(&mut grads, &conv));
                (to_vec(kl)[0], g)
            };
            let (kl_ref, g_ref) = run(&|| Pass::train(2, false).with_kernels(Kernels::Reference));
            let passes: [&dyn Fn() -> Pass<'static>; 2] = [&|| Pass::train(2, false), &|| {
                Pass::train(2, false).fold_kl(weight)
            }];
            for make in passes {
                let (kl, g) = run(make);
                let what = format!("{posterior:?} {prior:?} {estimator:?}");
                assert!(
                    (kl - kl_ref).abs() <= 1e-5 * kl_ref.abs(),
                    "{what}: KL {kl} vs {kl_ref}"
                );
                assert_eq!(g.len(), g_ref.len(), "{what}: gradients");
                let scale = g_ref.iter().fold(0f64, |m, v| m.max(v.abs()));
                let err = g
                    .iter()
                    .zip(&g_ref)
                    .fold(0f64, |m, (a, b)| m.max((a - b).abs()));
                assert!(
                    scale > 0.0 && err <= 1e-5 * scale,
                    "{what}: gradient error {err} of {scale}"
                );
            }
        }
    }
}

/// Under Blundell's scale-mixture prior a mean-field or radial layer runs on the fused kernels
/// (checked) for every estimator, and so do a low-rank layer's draws (its KL, which the kernels
/// do not compute, from burn ops). A pass that folds the Gaussian KL's gradient into the draws
/// leaves the mixture's KL and its gradient as they are (bit for bit those of a pass that does
/// not). The fused mixture KL (mean-field, radial), an average over `kl_samples` draws, has the
/// mean of the composition's estimate (the means of 300 passes each within 5 standard errors
/// of their difference).
#[test]
fn a_scale_mixture_prior_runs_on_the_fused_kernels_with_an_unbiased_kl() {
    let device = test_device().autodiff();
    let _guard = seeded(&test_device(), 58);
    let prior = crate::dist::Prior::ScaleMixture {
        pi: 0.25,
        sigma1: 1.0,
        sigma2: 0.1,
    };
    // Each pass is a dispatch chain: on wgpu (lavapipe in CI) fewer passes, the bound the same
    // five standard errors of their own.
    let passes = if crate::backend_name() == "wgpu" {
        100
    } else {
        300
    };
    let families = [
        PosteriorConfig::mean_field(),
        PosteriorConfig::radial(),
        PosteriorConfig::low_rank(2),
    ];
    for (family, estimator) in families
        .iter()
        .flat_map(|f| ESTIMATORS.map(|e| (f.clone(), e)))
    {
        let config = weights(family.clone(), estimator)
            .with_prior(prior)
            .with_kl_samples(2);
        let estimator = format!("{} {estimator:?}", family.name());
        let layer = BayesianLinearConfig::new(5, 3)
            .with_weights(config)
            .init(&device)
            .unwrap();
        let x = Tensor::<3>::random([2, 4, 5], Distribution::Normal(0.0, 1.0), &device);
        let mut pass = Pass::train(2, false);
        let op = super::linear::LinearOp::new(layer.shape(), &pass);
        let fused = super::fused_path::run(&layer.params, &op, &x, &mut pass);
        assert!(fused.is_some(), "{estimator}: the fused kernels ran");
        let run = |make: &dyn Fn() -> Pass<'static>| {
            let mut pass = make();
            let y = layer.run(x.clone(), &mut pass).sum();
            let (kl, _) = pass.into_terms(&device);
            let mut grads = (y * 0.0 + kl.clone() * 0.3).backward();
            (to_vec(kl)[0], module_grads(&mut grads, &layer))
        };
        let seeded_run = |fold: bool| {
            test_device().seed(7);
            run(&move || {
                let pass = Pass::train(2, false);
                if fold { pass.fold_kl(0.3) } else { pass }
            })
        };
        let (plain, folded) = (seeded_run(false), seeded_run(true));
        assert_eq!(
            plain, folded,
            "{estimator}: folding changed the mixture's KL"
        );
        assert!(
            plain.1.iter().any(|g| *g != 0.0),
            "{estimator}: a KL gradient"
        );
        if matches!(family, PosteriorConfig::LowRank(_)) {
            // Its KL is the composition's own estimator on both kernels: nothing to compare.
            continue;
        }
        let estimates = |kernels: Kernels| -> Vec<f64> {
            (0..passes)
                .map(|_| run(&move || Pass::train(2, false).with_kernels(kernels)).0)
                .collect()
        };
        let fused = crate::testing::sample_moments(&estimates(Kernels::Fused));
        let reference = crate::testing::sample_moments(&estimates(Kernels::Reference));
        let se = fused.mean_se.hypot(reference.mean_se);
        assert!(
            (fused.mean - reference.mean).abs() <= 5.0 * se,
            "{estimator}: mean KL {} (fused) vs {} (composition), s.e. {se}",
            fused.mean,
            reference.mean
        );
    }
}

/// A moment layer's outputs, KL and gradients (every parameter's and the input moments') are
/// the same on the fused moment kernels as on the composition of burn ops, dense and
/// convolutional, under each scale parameterisation, radial, and Haußmann's moment weights
/// (point biases, clamped KL), with the clamp holding about half the variances or none, under
/// tensor-valued priors (clamped or not) and under BEDL-Hyper's hyperprior (its density from
/// burn ops): without the KL, with it, and with it folded into the kernels' backward. Every
/// case takes the fused kernels (checked, so that the test cannot pass by comparing the
/// composition with itself).
#[test]
fn moment_layers_on_the_fused_kernels_match_the_composition() {
    use crate::dist::Moments;
    use crate::posterior::ScaleParam;
    let device = test_device().autodiff();
    let _guard = seeded(&test_device(), 67);
    let lambda = 0.3;
    let prior = crate::dist::Prior::Gaussian {
        mean: 0.1,
        std: 0.7,
    };
    let scaled = |param: ScaleParam, rho: f64| {
        let scale = ScaleInit::new()
            .with_param(param)
            .with_rho(rho)
            .with_rho_std(0.2);
        WeightConfig::of(PosteriorConfig::MeanField(
            MeanFieldConfig::new().with_scale(scale),
        ))
        .with_estimator(Estimator::LocalReparameterization)
        .with_prior(prior)
    };
    let hyper = crate::recipes::moment_weights(10.0)
        .with_prior(crate::dist::Prior::Hyper(crate::dist::HyperPrior::new()));
    let cases = [
        ("softplus", scaled(ScaleParam::Softplus, -1.0)),
        (
            "softplus, tensor-valued priors",
            scaled(ScaleParam::Softplus, -1.0),
        ),
        ("moment weights, hyperprior (BEDL-Hyper)", hyper),
        ("log-variance", scaled(ScaleParam::LogVariance, -2.0)),
        (
            "sigmoid variance",
            scaled(ScaleParam::SigmoidVariance { bound: 0.5 }, -1.0),
        ),
        (
            "log-variance, point bias",
            scaled(ScaleParam::LogVariance, -2.0).with_bias(Bias::Point),
        ),
        (
            "radial",
            weights(
                PosteriorConfig::radial(),
                Estimator::LocalReparameterization,
            )
            .with_prior(prior),
        ),
        ("moment weights", crate::recipes::moment_weights(10.0)),
        // ln σ² = ρ around the lower bound: the clamp holds about half of them.
        (
            "log-variance, clamped",
            scaled(ScaleParam::LogVariance, -11.0).with_prior(prior.clamped(-11.0, 11.0)),
        ),
        // ln σ² ≈ 2ρ for ρ ≪ 0 (softplus ρ ≈ e^ρ).
        (
            "softplus, clamped",
            scaled(ScaleParam::Softplus, -5.5).with_prior(prior.clamped(-11.0, 11.0)),
        ),
        (
            "softplus, clamped, tensor-valued priors",
            scaled(ScaleParam::Softplus, -5.5).with_prior(prior.clamped(-11.0, 11.0)),
        ),
    ];
    let close = |a: &[f64], b: &[f64], what: &str| {
        assert_eq!(a.len(), b.len(), "{what}: lengths");
        let scale = b.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-6);
        let err = a.iter().zip(b).fold(0f64, |m, (x, y)| m.max((x - y).abs()));
        assert!(err <= 2e-5 * scale, "{what}: error {err} of {scale}");
    };
    let rule = crate::layers::MomentRule::Clt;
    for (name, config) in cases {
        let mut dense = BayesianLinearConfig::new(5, 3)
            .with_weights(config.clone())
            .init(&device)
            .unwrap();
        let mut conv = BayesianConv2dConfig::new([2, 3], [2, 2])
            .with_weights(config.clone())
            .init(&device)
            .unwrap();
        if name.contains("tensor-valued") {
            tensor_valued_priors(&mut dense.params, &device);
            tensor_valued_priors(&mut conv.params, &device);
        }
        let input = |dims: Vec<usize>| {
            let m = Tensor::<1>::random(
                [dims.iter().product::<usize>()],
                Distribution::Normal(0.0, 1.0),
                &device,
            );
            let v = Tensor::<1>::random(
                [dims.iter().product::<usize>()],
                Distribution::Uniform(0.1, 1.0),
                &device,
            );
            (m, v, dims)
        };
        let (xm, xv, xd) = input(vec![1, 4, 5]);
        let (cm, cv, cd) = input(vec![1, 2, 2, 3, 3]);
        for (collect, fold) in [(false, false), (true, false), (true, true)] {
            let run = |kernels: Kernels| {
                let pass = || {
                    let p = Pass::train_moments(rule)
                        .with_kernels(kernels)
                        .collecting_kl(collect);
                    if fold { p.fold_kl(lambda) } else { p }
                };
                let fused = super::fused_path::moment_params(&dense.params, &mut pass()).is_some();
                let mut pass = pass();
                let leaf = |t: &Tensor<1>| t.clone().require_grad();
                let (xm, xv, cm, cv) = (leaf(&xm), leaf(&xv), leaf(&cm), leaf(&cv));
                let dense_in = Moments::new(
                    xm.clone().reshape([xd[0], xd[1], xd[2]]),
                    xv.clone().reshape([xd[0], xd[1], xd[2]]),
                );
                let conv_in = Moments::new(
                    cm.clone().reshape([cd[0], cd[1], cd[2], cd[3], cd[4]]),
                    cv.clone().reshape([cd[0], cd[1], cd[2], cd[3], cd[4]]),
                );
                let a = dense.moments(dense_in, &mut pass).unwrap();
                let b = conv.moments(conv_in, &mut pass).unwrap();
                let (kl, _) = pass.into_terms(&device);
                let outputs = [
                    to_vec(a.mean.clone()),
                    to_vec(a.var.clone()),
                    to_vec(b.mean.clone()),
                    to_vec(b.var.clone()),
                ]
                .concat();
                // Distinct weights on every output, so that a misplaced gradient shows.
                let weigh = |t: Tensor<1>, shift: usize| {
                    let n = t.dims()[0];
                    let w: Vec<f32> = (0..n)
                        .map(|i| 0.5 + ((i * 7 + shift) % 13) as f32 / 13.0)
                        .collect();
                    (t * Tensor::<1>::from_floats(w.as_slice(), &device)).sum()
                };
                let flat = |t: Tensor<3>| t.reshape([-1]);
                let flat5 = |t: Tensor<5>| t.reshape([-1]);
                let loss = weigh(flat(a.mean), 0)
                    + weigh(flat(a.var), 1)
                    + weigh(flat5(b.mean), 2)
                    + weigh(flat5(b.var), 3)
                    + kl.clone() * lambda;
                let mut grads = loss.backward();
                let mut g = Vec::new();
                for t in [&xm, &xv, &cm, &cv] {
                    g.extend(to_vec(t.grad(&grads).expect("input gradient")));
                }
                let mut p = module_grads(&mut grads, &dense);
                p.extend(module_grads(&mut grads, &conv));
                (fused, outputs, to_vec(kl)[0], g, p)
            };
            let what = format!("{name}, KL collected {collect}, folded {fold}");
            let (fused_ref, out_ref, kl_ref, g_ref, p_ref) = run(Kernels::Reference);
            let (fused, out, kl, g, p) = run(Kernels::Fused);
            assert!(!fused_ref, "{what}: the reference composes burn ops");
            assert!(fused, "{what}: the fused kernels ran");
            close(&out, &out_ref, &format!("{what}: moments"));
            assert!(
                (kl - kl_ref).abs() <= 1e-5 * kl_ref.abs(),
                "{what}: KL {kl} vs {kl_ref}"
            );
            assert_eq!(kl == 0.0, !collect, "{what}: KL {kl}");
            close(&g, &g_ref, &format!("{what}: input gradients"));
            close(&p, &p_ref, &format!("{what}: parameter gradients"));
        }
    }
}

/// The KL with `ln σ²` clamped (Haußmann's VBP code): equal to the closed form at the clamped
/// variances (a host f64 oracle), with no KL gradient on the `ρ` of a clamped variance and the
/// exact KL's gradient on the others; within the range it is the exact KL. Bad ranges, families
/// and priors name the field.
#[test]
fn the_clamped_kl_is_the_closed_form_at_the_clamped_variances() {
    let device = test_device().autodiff();
    let _guard = seeded(&test_device(), 56);
    let (alpha, lo, hi) = (10.0f64, -11.0, 11.0);
    // ρ around softplus⁻¹(e^{−5.5}) ± 1.5: about half the variances fall below e^{−11}.
    let scale = ScaleInit::new()
        .with_rho(crate::special::inverse_softplus((-5.5f64).exp()))
        .with_rho_std(1.5);
    let config = WeightConfig::of(PosteriorConfig::MeanField(
        MeanFieldConfig::new().with_scale(scale),
    ))
    .with_prior(crate::dist::Prior::gaussian(1.0 / alpha.sqrt()));
    let clamped = BayesianLinearConfig::new(6, 4)
        .with_weights(config.clone().with_prior(config.prior.clamped(lo, hi)))
        .init(&device)
        .unwrap();
    let mut exact = clamped.clone();
    exact.params.kl_log_var_range = None;
    let kl_and_rho_grad = |l: &BayesianLinear| {
        let kl = l.kl();
        let grads = kl.clone().backward();
        let rho = mean_field_loc(&l.params.weight).rho.val();
        (to_vec(kl)[0], to_vec(rho.grad(&grads).unwrap()))
    };
    // The host oracle: ½Σ[α(μ² + σ̃²) − 1 − ln ασ̃²] over weight and bias.
    let oracle = |posterior: &dyn PosteriorDist<2>| -> (f64, Vec<bool>) {
        let (m, v) = (
            to_vec(posterior.mean()),
            to_vec(posterior.marginal_variance().unwrap()),
        );
        let inside = v.iter().map(|v| v.ln() > lo && v.ln() < hi).collect();
        let kl = m
            .iter()
            .zip(&v)
            .map(|(m, v)| {
                let v = v.ln().clamp(lo, hi).exp();
                0.5 * (alpha * (m * m + v) - 1.0 - (alpha * v).ln())
            })
            .sum();
        (kl, inside)
    };
    let wd = clamped.params.weight.dist();
    let (mut want, inside) = oracle(&wd);
    let bd = clamped.params.bias.as_ref().unwrap().dist();
    let bias_2d = crate::posterior::MeanFieldDist::new(
        bd.mean().reshape([1, -1]),
        bd.marginal_variance().unwrap().sqrt().reshape([1, -1]),
    );
    want += oracle(&bias_2d).0;
    let clamped_count = inside.iter().filter(|i| !**i).count();
    assert!(
        clamped_count > 3 && clamped_count < inside.len() - 3,
        "{clamped_count} of {} variances clamped: the test needs both kinds",
        inside.len()
    );
    let (kl, grad) = kl_and_rho_grad(&clamped);
    assert!((kl - want).abs() <= 1e-4 * want.abs(), "KL {kl} vs {want}");
    let (kl_exact, grad_exact) = kl_and_rho_grad(&exact);
    assert!(kl_exact > kl + 1.0, "the clamp must change the KL here");
    for ((g, g_exact), inside) in grad.iter().zip(&grad_exact).zip(&inside) {
        match inside {
            true => assert!((g - g_exact).abs() <= 1e-4 * g_exact.abs().max(1e-3)),
            false => assert_eq!(*g, 0.0),
        }
    }
    // A range holding every variance gives the exact KL.
    let mut wide = clamped.clone();
    wide.params.kl_log_var_range = Some((-100.0, 100.0));
    let (kl_wide, _) = kl_and_rho_grad(&wide);
    assert!((kl_wide - kl_exact).abs() <= 1e-5 * kl_exact.abs());

    let clamped_prior = config.prior.clamped(lo, hi);
    for (weights, field, expected) in [
        (
            config.clone().with_prior(config.prior.clamped(3.0, -3.0)),
            "prior.log_var_range",
            "finite (lo, hi) with lo < hi",
        ),
        (
            config
                .clone()
                .with_posterior(PosteriorConfig::radial())
                .with_prior(clamped_prior),
            "weights.prior",
            "a Gaussian or scale-mixture prior, or a mean-field family",
        ),
    ] {
        let err = BayesianLinearConfig::new(2, 2)
            .with_weights(weights)
            .init(&device)
            .unwrap_err();
        assert_eq!((err.field, err.expected), (field, expected));
    }
    // Only a Gaussian clamps.
    let mixture = crate::dist::Prior::ScaleMixture {
        pi: 0.5,
        sigma1: 1.0,
        sigma2: 0.1,
    };
    assert_eq!(mixture.clamped(lo, hi), mixture);
}

/// Under a hyperprior (BEDL-Hyper) the layer's term is `−ln p(μ, σ²)` of weight and bias
/// against a host oracle, its gradient in the means is `α₀μ`, a training pass collects the
/// same term on the fused and the reference kernels (the fused ones step aside), black-box α's
/// per-draw ratio is refused, and bad settings name the field.
#[test]
fn a_hyperprior_replaces_the_kl_by_its_negative_log_density() {
    let device = test_device().autodiff();
    let _guard = seeded(&test_device(), 57);
    let h = crate::dist::HyperPrior::new()
        .with_mean_precision(2.0)
        .with_shape(1.5)
        .with_scale(0.3);
    let config = weights(
        PosteriorConfig::mean_field(),
        Estimator::LocalReparameterization,
    )
    .with_prior(crate::dist::Prior::Hyper(h));
    let layer = BayesianLinearConfig::new(4, 3)
        .with_weights(config.clone())
        .init(&device)
        .unwrap();
    let oracle = |m: Vec<f64>, v: Vec<f64>| -> f64 {
        m.iter()
            .zip(&v)
            .map(|(m, v)| {
                2.0 * m * m / 2.0 - 0.5 * (2.0 / std::f64::consts::TAU).ln()
                    + 2.5 * v.ln()
                    + 0.3 / v
                    - 1.5 * 0.3f64.ln()
                    + crate::special::lgamma_scalar(1.5)
            })
            .sum()
    };
    let (wd, bd) = (
        layer.params.weight.dist(),
        layer.params.bias.as_ref().unwrap().dist(),
    );
    let want = oracle(to_vec(wd.mean()), to_vec(wd.marginal_variance().unwrap()))
        + oracle(to_vec(bd.mean()), to_vec(bd.marginal_variance().unwrap()));
    let term = layer.kl();
    let got = to_vec(term.clone())[0];
    assert!((got - want).abs() <= 1e-4 * want.abs(), "{got} vs {want}");
    let grads = term.backward();
    let mu = mean_field_loc(&layer.params.weight).mu.val();
    let (g, m) = (to_vec(mu.grad(&grads).unwrap()), to_vec(mu.clone()));
    for (g, m) in g.iter().zip(&m) {
        assert!(
            (g - 2.0 * m).abs() <= 1e-5 * (1.0 + m.abs()),
            "∂/∂μ {g} vs α₀μ {}",
            2.0 * m
        );
    }
    let x = Tensor::<3>::random([2, 5, 4], Distribution::Normal(0.0, 1.0), &device);
    for kernels in [Kernels::Fused, Kernels::Reference] {
        let mut pass = Pass::train(2, false).with_kernels(kernels);
        let _ = layer.run(x.clone(), &mut pass);
        let (kl, _) = pass.into_terms(&device);
        let kl = to_vec(kl)[0];
        assert!(
            (kl - got).abs() <= 1e-5 * got.abs(),
            "{kernels:?}: {kl} vs {got}"
        );
    }
    let bb = BayesianLinearConfig::new(4, 3)
        .with_weights(
            weights(PosteriorConfig::mean_field(), Estimator::Reparameterization)
                .with_prior(crate::dist::Prior::Hyper(h)),
        )
        .init(&device)
        .unwrap();
    for kernels in [Kernels::Fused, Kernels::Reference] {
        let mut pass = Pass::train(2, true).with_kernels(kernels);
        let _ = bb.run(x.clone(), &mut pass);
        let (_, ratio) = pass.into_terms(&device);
        let why = ratio.expect_err("black-box α under a hyperprior must be refused");
        assert!(why.what.contains("hyperprior"), "{kernels:?}: {}", why.what);
    }
    for (weights, field) in [
        (
            config
                .clone()
                .with_prior(crate::dist::Prior::Hyper(h.with_scale(0.0))),
            "prior.scale",
        ),
        (
            config
                .clone()
                .with_posterior(PosteriorConfig::point())
                .with_estimator(Estimator::Reparameterization),
            "weights.prior",
        ),
    ] {
        let err = BayesianLinearConfig::new(2, 2)
            .with_weights(weights)
            .init(&device)
            .unwrap_err();
        assert_eq!(err.field, field);
    }
}

/// A point bias ([`Bias::Point`], Haußmann's VBP code) is a point estimate without
/// a prior: the layer's KL is its weight's alone, the bias adds no variance to the output
/// moments, it is trained, and a family that cannot express a point is refused naming the field.
#[test]
fn a_point_bias_has_no_noise_and_no_prior_term() {
    let _guard = seeded(&test_device(), 100);
    let device = test_device();
    let config = |point_bias| {
        BayesianLinearConfig::new(3, 2).with_weights(
            weights(
                PosteriorConfig::mean_field(),
                Estimator::LocalReparameterization,
            )
            .with_bias(if point_bias {
                Bias::Point
            } else {
                Bias::Posterior
            }),
        )
    };
    let point = config(true).init(&device).unwrap();
    let bayes = config(false).init(&device).unwrap();
    assert!(matches!(
        point.params.bias,
        Some(crate::posterior::AnyPosterior::Point(_))
    ));
    assert!(point.params.bias_prior.is_none() && bayes.params.bias_prior.is_some());
    let weight_kl =
        |l: &BayesianLinear| to_vec(l.params.weight.dist().kl(&l.params.weight_prior))[0];
    let (kl_point, kl_bayes) = (to_vec(point.kl())[0], to_vec(bayes.kl())[0]);
    assert!((kl_point - weight_kl(&point)).abs() <= 1e-5 * kl_point.abs().max(1.0));
    let bias_kl = to_vec(
        bayes.params.bias.as_ref().unwrap().dist().kl(bayes
            .params
            .bias_prior
            .as_ref()
            .expect("a Bayesian bias has a prior")),
    )[0];
    assert!(bias_kl > 1e-3, "the bias posterior differs from its prior");
    assert!(
        (kl_bayes - weight_kl(&bayes) - bias_kl).abs() <= 1e-5 * kl_bayes.abs().max(1.0),
        "a Bayesian bias adds its own KL term: {kl_bayes} = {} + {bias_kl}",
        weight_kl(&bayes)
    );
    // At x = 0 only the bias can make the output uncertain.
    let zero = crate::dist::Moments::deterministic(Tensor::<3>::zeros([1, 4, 3], &device));
    let rule = crate::layers::MomentRule::Clt;
    let var = |l: &BayesianLinear| {
        let m = l.moments(zero.clone(), &mut Pass::moments(rule)).unwrap();
        to_vec(m.var).into_iter().fold(0.0f64, f64::max)
    };
    assert_eq!(var(&point), 0.0);
    assert!(var(&bayes) > 0.0);
    let ad = test_device().autodiff();
    let trained = config(true).init(&ad).unwrap();
    let x = Tensor::<3>::random([1, 4, 3], Distribution::Normal(0.0, 1.0), &ad);
    let grads = trained.run(x, &mut Pass::train(1, false)).sum().backward();
    let Some(crate::posterior::AnyPosterior::Point(b)) = &trained.params.bias else {
        unreachable!()
    };
    assert!(b.weight.grad(&grads).is_some(), "the point bias is trained");
    // Continual learning leaves a point bias without a prior.
    let next = point.params.with_posterior_as_prior().unwrap();
    assert!(next.bias_prior.is_none());
    let err = BayesianLinearConfig::new(3, 2)
        .with_weights(WeightConfig::new().with_bias(Bias::Point))
        .init_with(&MeanFieldConfig::new(), &device)
        .unwrap_err();
    assert_eq!(err.field, "weights.bias");
}

/// Sensoy's initialiser: weights and biases from a normal truncated at ±2 std, std
/// `√2/√a` with `a` the first TensorFlow axis (input width; kernel height; bias length). The
/// truncated normal's standard deviation is `0.8796·std`; over n means its sample standard
/// deviation has a relative s.e. of about `√(0.6/n)` (kurtosis of the truncated normal 2.6).
#[test]
fn the_tf_truncated_normal_initialiser_follows_the_first_axis() {
    let device = test_device();
    let _guard = seeded(&device, 5);
    let weights =
        WeightConfig::of(PosteriorConfig::point()).with_initializer(MeanInit::TfTruncatedNormal {
            gain: std::f64::consts::SQRT_2,
        });
    let check = |values: Vec<f64>, first: usize, what: &str| {
        let std = (2.0 / first as f64).sqrt();
        let n = values.len() as f64;
        let sd = (values.iter().map(|v| v * v).sum::<f64>() / n).sqrt();
        let max = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        assert!(
            max <= 2.0 * std * (1.0 + 1e-6),
            "{what}: max |w| {max} > 2·{std}"
        );
        let rel = (0.6 / n).sqrt();
        assert!(
            (sd / (0.8796 * std) - 1.0).abs() < 5.0 * rel,
            "{what}: sd {sd} against {}",
            0.8796 * std
        );
    };
    let dense = BayesianLinearConfig::new(300, 400)
        .with_weights(weights.clone())
        .init(&device)
        .unwrap();
    let draw = dense.params.draw();
    check(to_vec(draw.weight), 300, "dense weight");
    check(to_vec(draw.bias.unwrap()), 400, "dense bias");
    let conv = BayesianConv2dConfig::new([30, 40], [5, 5])
        .with_weights(weights.clone())
        .init(&device)
        .unwrap();
    let draw = conv.params.draw();
    check(to_vec(draw.weight), 5, "kernel");
    check(to_vec(draw.bias.unwrap()), 40, "conv bias");
    let err = BayesianLinearConfig::new(2, 2)
        .with_weights(weights.with_initializer(MeanInit::TfTruncatedNormal { gain: 0.0 }))
        .init(&device)
        .unwrap_err();
    assert_eq!(err.field, "weights.initializer.gain");
}

/// The `(μ, ρ)` of a mean-field weight.
fn mean_field_loc(p: &crate::posterior::AnyPosterior<2>) -> &crate::posterior::LocationScale<2> {
    match p {
        crate::posterior::AnyPosterior::MeanField(p) => &p.loc,
        _ => panic!("a mean-field weight"),
    }
}

/// A dense layer's moments keep the couplings of low-rank and full-rank weights: at
/// independent Gaussian inputs they match 20 000 draws of inputs and weights together (5 s.e.),
/// on the fused kernels and the composition; a convolution refuses them by name.
#[test]
fn coupled_weights_enter_a_dense_layers_moments_and_a_convolution_refuses_them() {
    use crate::dist::Moments;
    let device = test_device();
    let _guard = seeded(&device, 62);
    let rule = crate::layers::MomentRule::Clt;
    let (n, din, dout) = (20_000, PROBE.len(), 3);
    let in_std = [0.5, 0.3, 0.7, 0.4, 0.6];
    let row = |v: [f64; 5]| Tensor::<1>::from_floats(v, &device).reshape([1, 1, din]);
    for posterior in [PosteriorConfig::low_rank(2), PosteriorConfig::full_rank()] {
        for kernels in [Kernels::Fused, Kernels::Reference] {
            let what = format!("{posterior:?} {kernels:?}");
            let layer = BayesianLinearConfig::new(din, dout)
                .with_weights(weights(posterior.clone(), Estimator::Reparameterization))
                .init(&device)
                .unwrap();
            let m = Moments::new(row(PROBE), row(in_std).square());
            let out = layer
                .moments(m, &mut Pass::moments(rule).with_kernels(kernels))
                .unwrap();
            let noise = Tensor::<3>::random([n, 1, din], Distribution::Normal(0.0, 1.0), &device);
            let h = probe_input(n, &device) + noise * row(in_std);
            let y = to_vec(layer.run(h, &mut Pass::predict(n).with_kernels(kernels)));
            check_moments((to_vec(out.mean), to_vec(out.var)), &y, &what);
        }
    }
    // Without the couplings the low-rank layer's variance is far off: the check above sees them.
    let layer = BayesianLinearConfig::new(din, dout)
        .with_weights(weights(
            PosteriorConfig::low_rank(2),
            Estimator::Reparameterization,
        ))
        .init(&device)
        .unwrap();
    let out = layer
        .moments(Moments::deterministic(row(PROBE)), &mut Pass::moments(rule))
        .unwrap();
    let (_, marginal) = analytic(&PROBE, &layer);
    let gap: f64 = to_vec(out.var)
        .iter()
        .zip(&marginal)
        .map(|(a, b)| (a - b).abs() / b)
        .sum();
    assert!(gap > 0.3, "{gap}");
    let conv = BayesianConv2dConfig::new([2, 1], [2, 2])
        .with_weights(weights(
            PosteriorConfig::low_rank(2),
            Estimator::Reparameterization,
        ))
        .init(&device)
        .unwrap();
    let x = Tensor::<5>::random([1, 1, 2, 3, 3], Distribution::Normal(0.0, 1.0), &device);
    let err = conv
        .moments(Moments::deterministic(x), &mut Pass::moments(rule))
        .unwrap_err();
    assert!(err.what.contains("convolution"), "{}", err.what);
}
