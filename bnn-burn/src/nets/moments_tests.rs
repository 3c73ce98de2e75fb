//! Whole networks: moments against Monte Carlo through sampled weights of the same posterior,
//! and training by moments.

use super::*;
use crate::layers::{Estimator, WeightConfig};
use crate::likelihood::{Categorical, GaussianLikelihoodConfig, LogitRule};
use crate::nets::{MlpConfig, Regressor};
use crate::posterior::{
    MeanFieldConfig, PosteriorConfig, PosteriorDist, ScaleInit, WeightPosterior,
};
use crate::predict::{Predict, PredictMode};
use crate::testing::{sample_moments, seeded, to_vec};
use crate::train::Inference;
use crate::train::{TrainConfig, train};
use crate::{device, training_device};
use burn::module::Module;
use burn::tensor::{Distribution, Int, Tensor};

/// A mean-field regressor with wide posteriors (σ = softplus(−1) ≈ 0.31), so that the moments
/// are far from a point estimate's.
fn wide_regressor(hidden: Vec<usize>) -> Regressor {
    let family = PosteriorConfig::MeanField(
        MeanFieldConfig::new().with_scale(ScaleInit::new().with_rho(-1.0).with_rho_std(0.0)),
    );
    MlpConfig::new(3, hidden, 1)
        .with_weights(WeightConfig::of(family).with_estimator(Estimator::LocalReparameterization))
        .init_regressor(&device())
        .unwrap()
}

/// Weight draws of the Monte Carlo oracle: the mean's standard error is 0.3 % of the predictive
/// sd, the variance's about 0.5 % of the variance.
const DRAWS: usize = 100_000;

/// A layer's weight and bias means and variances on the host: `([din·dout], [dout])` each,
/// row-major `[din, dout]`.
struct HostLayer {
    din: usize,
    dout: usize,
    w: (Vec<f64>, Vec<f64>),
    b: (Vec<f64>, Vec<f64>),
}

impl HostLayer {
    fn of(layer: &crate::layers::BayesianLinear) -> Self {
        let [din, dout] = layer.shape();
        let wd = layer.params.weight.dist();
        let bd = layer.params.bias.as_ref().unwrap().dist();
        HostLayer {
            din,
            dout,
            w: (to_vec(wd.mean()), to_vec(wd.marginal_variance().unwrap())),
            b: (to_vec(bd.mean()), to_vec(bd.marginal_variance().unwrap())),
        }
    }
}

/// Per input: the moments' (mean, variance) and Monte Carlo's (mean, variance, s.e. of each)
/// over `n` draws of every weight of the (mean-field, ReLU) net, drawn and applied on the host in
/// `f64`: an oracle that shares nothing with the backend's code but the posterior's parameters.
fn moments_and_monte_carlo(net: &Regressor, n: usize, seed: u64) -> Vec<[f64; 6]> {
    assert_eq!(net.body.activation, crate::layers::Activation::Relu);
    let inputs = [
        [0.5, -1.0, 2.0],
        [0.0, 0.0, 0.0],
        [-1.5, 0.3, 0.8],
        [2.0, 2.0, -2.0],
    ];
    let x = Tensor::<2>::from_floats(inputs, &device());
    let m = net.predictive_moments(x).unwrap();
    let (mean, var) = (to_vec(m.mean), to_vec(m.var));
    let layers: Vec<HostLayer> = net
        .body
        .layers
        .iter()
        .chain(std::iter::once(&net.head))
        .map(HostLayer::of)
        .collect();
    let mut z = crate::testing::HostNormals::new(seed);
    let mut draw = |(m, v): &(Vec<f64>, Vec<f64>)| -> Vec<f64> {
        m.iter()
            .zip(v)
            .map(|(m, v)| m + v.sqrt() * z.next())
            .collect()
    };
    let mut outputs = vec![Vec::with_capacity(n); inputs.len()];
    for _ in 0..n {
        // One draw of the whole net, shared by the inputs.
        let mut h: Vec<Vec<f64>> = inputs.iter().map(|x| x.to_vec()).collect();
        for (l, layer) in layers.iter().enumerate() {
            let (w, b) = (draw(&layer.w), draw(&layer.b));
            for a in &mut h {
                *a = (0..layer.dout)
                    .map(|j| {
                        let f = (0..layer.din)
                            .map(|i| a[i] * w[i * layer.dout + j])
                            .sum::<f64>()
                            + b[j];
                        if l + 1 < layers.len() { f.max(0.0) } else { f }
                    })
                    .collect();
            }
        }
        for (out, a) in outputs.iter_mut().zip(&h) {
            out.push(a[0]);
        }
    }
    outputs
        .iter()
        .enumerate()
        .map(|(i, xs)| {
            let mc = sample_moments(xs);
            [mean[i], var[i], mc.mean, mc.var, mc.mean_se, mc.var_se]
        })
        .collect()
}

#[test]
fn one_hidden_layer_moments_are_exact_against_monte_carlo() {
    // Deterministic input, one hidden layer, mean-field weights: the hidden units are
    // independent Gaussians before the ReLU, so mean and variance are exact.
    let _guard = seeded(&device(), 11);
    let net = wide_regressor(vec![16]);
    for (i, [mean, var, mc_mean, mc_var, mean_se, var_se]) in
        moments_and_monte_carlo(&net, DRAWS, 11)
            .into_iter()
            .enumerate()
    {
        assert!(
            (mean - mc_mean).abs() <= 5.0 * mean_se + 1e-5,
            "input {i}: mean {mean} vs Monte Carlo {mc_mean} ± {mean_se}"
        );
        assert!(
            (var - mc_var).abs() <= 5.0 * var_se + 1e-5,
            "input {i}: variance {var} vs Monte Carlo {mc_var} ± {var_se}"
        );
    }
}

#[test]
fn three_layer_moments_against_monte_carlo_report_the_dropped_covariances() {
    // Two hidden layers: the second layer's pre-activations share the first layer's units, so
    // they are correlated and not Gaussian; the diagonal moments drop that. The gap is
    // reported; bounded here at 10 % of the predictive sd on the mean and 10 % on the variance
    // (measured with the f64 host oracle: ≤ 0.013 sd on the mean and ≤ 2.1 % on the variance).
    let _guard = seeded(&device(), 12);
    let net = wide_regressor(vec![16, 16]);
    for (i, [mean, var, mc_mean, mc_var, mean_se, var_se]) in
        moments_and_monte_carlo(&net, DRAWS, 12)
            .into_iter()
            .enumerate()
    {
        let sd = mc_var.sqrt();
        eprintln!(
            "input {i}: mean {mean:.4} vs MC {mc_mean:.4} ± {mean_se:.4} (gap {:.3} sd); \
             variance {var:.4} vs MC {mc_var:.4} ± {var_se:.4} (gap {:+.1} %)",
            (mean - mc_mean) / sd,
            100.0 * (var - mc_var) / mc_var
        );
        assert!(
            (mean - mc_mean).abs() <= 0.1 * sd + 5.0 * mean_se,
            "input {i}"
        );
        assert!(
            (var - mc_var).abs() <= 0.1 * mc_var + 5.0 * var_se,
            "input {i}"
        );
    }
}

#[test]
fn a_sampling_trained_net_predicts_by_moments_as_by_samples() {
    let _guard = seeded(&device(), 13);
    let net = wide_regressor(vec![16]);
    let x = Tensor::<2>::random([8, 3], Distribution::Normal(0.0, 1.0), &device());
    let m = net.predict(x.clone(), PredictMode::Moments).unwrap();
    let s = net.predict(x, PredictMode::Samples(20_000)).unwrap();
    let (mm, sm) = (to_vec(m.mean()), to_vec(s.mean()));
    let (mv, sv) = (to_vec(m.variance()), to_vec(s.variance()));
    for i in 0..mm.len() {
        // 20 000 draws: the mean's s.e. is √(v/20000) < 0.01·√v.
        assert!(
            (mm[i] - sm[i]).abs() <= 5.0 * (sv[i] / 20_000.0).sqrt(),
            "{i}"
        );
        assert!(
            (mv[i] - sv[i]).abs() <= 0.05 * sv[i],
            "{i}: {} vs {}",
            mv[i],
            sv[i]
        );
    }
    // The aleatoric part is the likelihood's noise, the epistemic one the propagated variance.
    let noise = to_vec(net.likelihood.noise_std())[0].powi(2);
    assert!(
        to_vec(m.aleatoric_variance())
            .iter()
            .all(|v| (v - noise).abs() < 1e-5)
    );
}

#[test]
fn classifier_logit_rules_give_distributions() {
    let _guard = seeded(&device(), 14);
    let d = device();
    let x = Tensor::<2>::random([5, 4], Distribution::Normal(0.0, 1.0), &d);
    for (rule, draws) in [
        (LogitRule::Probit, 1),
        (LogitRule::Taylor, 1),
        (LogitRule::Sampled { samples: 7 }, 7),
    ] {
        let net = MlpConfig::new(4, vec![8], 3)
            .init(Categorical, &d)
            .unwrap()
            .with_moments(MomentConfig::new().with_predict_logits(rule))
            .unwrap();
        let p = net.predict(x.clone(), PredictMode::Moments).unwrap();
        assert_eq!(p.samples().unwrap().probs.dims(), [draws, 5, 3], "{rule:?}");
        let sums = to_vec(p.mean().sum_dim(1));
        assert!(
            sums.iter().all(|s| (s - 1.0).abs() < 1e-5),
            "{rule:?}: {sums:?}"
        );
    }
}

#[test]
fn taylor_expected_log_softmax_matches_monte_carlo_for_small_variance() {
    // The delta method is second order: for logit variances ≤ 0.1 its error is O(v²), below
    // 10⁻³ here; Monte Carlo with 10⁵ draws has a standard error < 10⁻³.
    let _guard = seeded(&device(), 15);
    let d = device();
    let mean = Tensor::<2>::from_floats([[1.0, -0.5, 0.3], [0.0, 2.0, -1.0]], &d);
    let var = Tensor::<2>::from_floats([[0.1, 0.05, 0.02], [0.08, 0.1, 0.01]], &d);
    let labels = Tensor::<1, Int>::from_ints([0, 2], &d);
    let taylor = Categorical
        .expected_log_likelihood(
            Moments::new(mean.clone(), var.clone()),
            labels.clone(),
            LogitRule::Taylor,
        )
        .unwrap();
    let mc = Categorical
        .expected_log_likelihood(
            Moments::new(mean, var),
            labels,
            LogitRule::Sampled { samples: 100_000 },
        )
        .unwrap();
    for (t, m) in to_vec(taylor).iter().zip(to_vec(mc)) {
        assert!((t - m).abs() < 5e-3, "Taylor {t} vs Monte Carlo {m}");
    }
}

#[test]
fn training_by_moments_fits_a_regression_and_never_samples() {
    let _guard = seeded(&device(), 16);
    let dev = training_device();
    let n = 128;
    let x = Tensor::<2>::random([n, 1], Distribution::Uniform(-2.0, 2.0), &dev);
    let y =
        x.clone().sin() * 2.0 + Tensor::<2>::random([n, 1], Distribution::Normal(0.0, 0.1), &dev);
    for moments in [MomentConfig::vbp(), MomentConfig::clt()] {
        let likelihood = GaussianLikelihoodConfig::new().init(&dev).unwrap();
        let net = MlpConfig::new(1, vec![32], 1)
            .with_weights(WeightConfig::of(PosteriorConfig::mean_field()))
            .init(likelihood, &dev)
            .unwrap()
            .with_moments(moments.clone())
            .unwrap();
        let before = net
            .valid()
            .predict(x.clone().without_autodiff(), PredictMode::Moments)
            .unwrap();
        let config = TrainConfig::new(50)
            .with_inference(Inference::Moments)
            .with_batch_size(64)
            .with_learning_rate(0.03)
            .with_progress(false);
        let (net, report) = train(net, (x.clone(), y.clone()), &config).unwrap();
        let after = net
            .valid()
            .predict(x.clone().without_autodiff(), PredictMode::Moments)
            .unwrap();
        let ll = |p: &crate::predict::GaussianPrediction| {
            to_vec(p.log_prob(y.clone().without_autodiff()).mean())[0]
        };
        let (ll0, ll1) = (ll(&before), ll(&after));
        assert!(
            ll1.is_finite() && ll1 > ll0 + 0.5,
            "{moments:?}: train LL {ll0} → {ll1}"
        );
        assert!(report.history.iter().all(|e| e.loss.is_finite()));
    }
}

#[test]
fn noise_refit_sets_the_type_two_maximum_likelihood_noise_every_epoch() {
    use crate::train::Trainer;
    let _guard = seeded(&device(), 17);
    let dev = training_device();
    let n = 96;
    let x = Tensor::<2>::random([n, 2], Distribution::Uniform(-2.0, 2.0), &device());
    let y = x.clone().sum_dim(1).cos()
        + Tensor::<2>::random([n, 1], Distribution::Normal(0.0, 0.2), &device());
    let likelihood = GaussianLikelihoodConfig::new().init(&dev).unwrap();
    let net = MlpConfig::new(2, vec![16], 1)
        .init(likelihood, &dev)
        .unwrap()
        .with_moments(MomentConfig::vbp())
        .unwrap();
    let config = TrainConfig::new(8)
        .with_inference(Inference::Moments)
        .with_batch_size(32)
        .with_learning_rate(0.01)
        .with_progress(false);
    let (net, _) = Trainer::new(config)
        .with_callback(NoiseRefit::new(x.clone(), y.clone()))
        .fit(net, (x.clone(), y.clone()))
        .unwrap();
    let net = net.valid();
    assert_eq!(net.likelihood.fit, crate::likelihood::NoiseFit::Fixed);
    // The last refit used the parameters after the last step, which are the returned ones.
    let m = net.predictive_moments(x).unwrap();
    let want = to_vec(((y - m.mean).square() + m.var).mean())[0];
    let got = to_vec(net.likelihood.noise_std())[0].powi(2);
    assert!(
        (got - want).abs() < 1e-4 * want,
        "σ² = {got}, closed form {want}"
    );
}

#[test]
fn log_variance_head_expected_log_likelihood_matches_monte_carlo() {
    // y ~ N(f, e^ℓ) with f ~ N(μ_f, v_f), ℓ ~ N(μ_ℓ, v_ℓ) independent: the closed form against
    // 10⁵ host draws (f64), 5 standard errors.
    use crate::likelihood::NoiseModel;
    use crate::testing::{HostNormals, sample_moments};
    let d = device();
    let lik = GaussianLikelihoodConfig::new()
        .with_noise(NoiseModel::LogVarianceHead)
        .init(&d)
        .unwrap();
    assert_eq!(lik.outputs_per_target(), 2);
    // Rows: (μ_f, μ_ℓ) and (v_f, v_ℓ); targets y.
    let cases: [([f64; 2], [f64; 2], f64); 3] = [
        ([0.3, -1.0], [0.2, 0.3], 0.8),
        ([-1.0, 0.5], [0.05, 0.8], -2.5),
        ([2.0, -3.0], [1.0, 0.01], 2.1),
    ];
    let mean = Tensor::<2>::from_floats(cases.map(|c| [c.0[0] as f32, c.0[1] as f32]), &d);
    let var = Tensor::<2>::from_floats(cases.map(|c| [c.1[0] as f32, c.1[1] as f32]), &d);
    let y = Tensor::<2>::from_floats(cases.map(|c| [c.2 as f32]), &d);
    let out = Moments::new(mean, var);
    let ell = to_vec(
        lik.expected_log_likelihood(out.clone(), y, LogitRule::Taylor)
            .unwrap(),
    );
    let crate::predict::GaussianPrediction::Moments(p) =
        lik.predict_moments(out, LogitRule::Taylor).unwrap()
    else {
        panic!("a moment prediction")
    };
    let (aleatoric, epistemic) = (to_vec(p.aleatoric_var), to_vec(p.epistemic_var));
    let mut z = HostNormals::new(31);
    for (i, ((mf, ml), (vf, vl), y)) in cases
        .iter()
        .map(|c| ((c.0[0], c.0[1]), (c.1[0], c.1[1]), c.2))
        .enumerate()
    {
        let n = 100_000;
        let (mut lls, mut noise) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            let f: f64 = mf + vf.sqrt() * z.next();
            let l: f64 = ml + vl.sqrt() * z.next();
            lls.push(-0.5 * (std::f64::consts::TAU.ln() + l + (y - f).powi(2) * (-l).exp()));
            noise.push(l.exp());
        }
        let (mc, mc_noise) = (sample_moments(&lls), sample_moments(&noise));
        assert!(
            (ell[i] - mc.mean).abs() <= 5.0 * mc.mean_se + 1e-5,
            "row {i}: closed form {} vs Monte Carlo {} ± {}",
            ell[i],
            mc.mean,
            mc.mean_se
        );
        assert!(
            (aleatoric[i] - mc_noise.mean).abs() <= 5.0 * mc_noise.mean_se + 1e-5,
            "row {i}: E[e^ℓ] {} vs Monte Carlo {}",
            aleatoric[i],
            mc_noise.mean
        );
        assert!((epistemic[i] - vf).abs() < 1e-6);
    }
}

#[test]
fn dvi_trains_a_heteroscedastic_regression_by_moments() {
    // Noise sd 0.05 for x < 0 and 0.5 above: the log-variance head learns the difference.
    use crate::likelihood::NoiseModel;
    let _guard = seeded(&device(), 18);
    let dev = training_device();
    let n = 256;
    let x = Tensor::<2>::random([n, 1], Distribution::Uniform(-2.0, 2.0), &dev);
    let sd = x.clone().greater_elem(0.0).float() * 0.45 + 0.05;
    let y =
        x.clone().sin() + Tensor::<2>::random([n, 1], Distribution::Normal(0.0, 1.0), &dev) * sd;
    let likelihood = GaussianLikelihoodConfig::new()
        .with_noise(NoiseModel::LogVarianceHead)
        .init(&dev)
        .unwrap();
    let net = MlpConfig::new(1, vec![32], 1)
        .with_weights(WeightConfig::of(PosteriorConfig::mean_field()))
        .init(likelihood, &dev)
        .unwrap()
        .with_moments(MomentConfig::clt())
        .unwrap();
    assert_eq!(net.head.shape()[1], 2);
    // 150 epochs: at 60 the head had not left a constant variance (≈ 0.4 on both sides) on 3
    // of 101 seed offsets; at 150 the ratio below is at least 7.8 on all 101.
    let config = TrainConfig::new(150)
        .with_inference(Inference::Moments)
        .with_batch_size(64)
        .with_learning_rate(0.02)
        .with_progress(false);
    let (net, report) = train(net, (x, y), &config).unwrap();
    assert!(report.history.iter().all(|e| e.loss.is_finite()));
    let probe = Tensor::<2>::from_floats([[-1.5], [-1.0], [1.0], [1.5]], &device());
    let p = net.valid().predict(probe, PredictMode::Moments).unwrap();
    let noise = to_vec(p.aleatoric_variance());
    assert!(
        noise[2].min(noise[3]) > 4.0 * noise[0].max(noise[1]),
        "aleatoric variances {noise:?}: the right half is 100× noisier"
    );
}

/// Impossible moment settings are refused when set, naming the field.
#[test]
fn invalid_moment_configs_name_the_field() {
    let _guard = seeded(&device(), 100);
    let net = || {
        MlpConfig::new(2, vec![4], 1)
            .init_regressor(&device())
            .unwrap()
    };
    let field = |config: MomentConfig| net().with_moments(config).unwrap_err().field;
    assert_eq!(
        field(MomentConfig::new().with_rule(MomentRule::Vbp { gate: 0.0 })),
        "rule.gate"
    );
    assert_eq!(
        field(MomentConfig::new().with_rule(MomentRule::Vbp { gate: f64::NAN })),
        "rule.gate"
    );
    let none = LogitRule::Sampled { samples: 0 };
    assert_eq!(
        field(MomentConfig::new().with_predict_logits(none)),
        "predict_logits.samples"
    );
    assert_eq!(
        field(MomentConfig::vbp().with_train_logits(none)),
        "train_logits.samples"
    );
    assert!(net().with_moments(MomentConfig::vbp()).is_ok());
}

/// The CLT-BNN (Haußmann 2021 ch. 4): CLT moments and the multi-label probit likelihood,
/// trained by moments with the reference code's plug-in loss, separates three Gaussian blobs.
#[test]
fn clt_probit_classifier_trains_by_moments() {
    use crate::likelihood::MultiLabelProbit;
    let _guard = seeded(&device(), 23);
    let dev = training_device();
    let per_class = 100;
    let centres = [(-2.0, 0.0), (2.0, 0.0), (0.0, 2.5)];
    let mut xs = Vec::new();
    let mut labels = Vec::new();
    let noise = crate::testing::host_normals(2 * per_class * centres.len(), 24);
    for (c, (cx, cy)) in centres.iter().enumerate() {
        for i in 0..per_class {
            let k = 2 * (c * per_class + i);
            xs.extend([
                (cx + 0.7 * noise[k]) as f32,
                (cy + 0.7 * noise[k + 1]) as f32,
            ]);
            labels.push(c as i64);
        }
    }
    let n = labels.len();
    let x = Tensor::<2>::from_data(burn::tensor::TensorData::new(xs, [n, 2]), &device());
    let y = Tensor::<1, Int>::from_ints(labels.as_slice(), &device());
    let net = MlpConfig::new(2, vec![16], 3)
        .init(MultiLabelProbit, &dev)
        .unwrap()
        .with_moments(MomentConfig::clt().with_train_logits(LogitRule::Probit))
        .unwrap();
    let config = TrainConfig::new(15)
        .with_inference(Inference::Moments)
        .with_batch_size(32)
        .with_learning_rate(0.02)
        .with_progress(false);
    let (net, _) = train(net, (x.clone(), y.clone()), &config).unwrap();
    let p = net.valid().predict(x, PredictMode::Moments).unwrap();
    let predicted = to_vec(p.mean().argmax(1).float());
    let labels = to_vec(y.float());
    let accuracy = predicted
        .iter()
        .zip(&labels)
        .filter(|(a, b)| a == b)
        .count() as f64
        / n as f64;
    assert!(accuracy > 0.9, "training accuracy {accuracy}");
}
