use super::*;
use crate::layers::{Estimator, WeightConfig};
use crate::likelihood::{Categorical, GaussianLikelihood, GaussianLikelihoodConfig};
use crate::nets::{MlpConfig, Regressor};
use crate::posterior::{MeanFieldConfig, PosteriorConfig, ScaleInit};
use crate::testing::{sample_moments, seeded, test_device, to_vec};
use crate::train::{TrainConfig, train};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{Linear, LinearConfig, Relu};
use burn::tensor::{Device, Distribution};

/// A plain burn MLP, as a user writes one.
#[derive(Module, Debug)]
struct Mlp {
    fc1: Linear,
    fc2: Linear,
    relu: Relu,
}

impl Forward for Mlp {
    type Input = Tensor<2>;
    fn apply(&self, x: Tensor<2>) -> Tensor<2> {
        self.forward(x)
    }
}

impl Forward for Cnn {
    type Input = Tensor<2>;
    fn apply(&self, x: Tensor<2>) -> Tensor<2> {
        self.forward(x)
    }
}

impl Mlp {
    fn new(d_in: usize, hidden: usize, d_out: usize, device: &Device) -> Self {
        Self {
            fc1: LinearConfig::new(d_in, hidden).init(device),
            fc2: LinearConfig::new(hidden, d_out).init(device),
            relu: Relu::new(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.fc2.forward(self.relu.forward(self.fc1.forward(x)))
    }
}

/// A plain burn CNN on 8×8 images given flat: a convolution, max pooling, a dense layer.
#[derive(Module, Debug)]
struct Cnn {
    conv: Conv2d,
    pool: MaxPool2d,
    fc: Linear,
    relu: Relu,
}

impl Cnn {
    fn new(device: &Device) -> Self {
        Self {
            conv: Conv2dConfig::new([1, 4], [3, 3]).init(device),
            pool: MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
            fc: LinearConfig::new(4 * 3 * 3, 3).init(device),
            relu: Relu::new(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let b = x.dims()[0];
        let h = self
            .relu
            .forward(self.conv.forward(x.reshape([b, 1, 8, 8])));
        self.fc.forward(self.pool.forward(h).reshape([b, 36]))
    }
}

fn gaussian(device: &Device) -> GaussianLikelihood {
    GaussianLikelihoodConfig::new()
        .with_noise_std(0.5)
        .init(device)
        .unwrap()
}

/// Every `Linear` and `Conv2d` weight and bias by default, no other parameter; `paths` narrows
/// the choice; a choice of nothing is an error naming the field.
#[test]
fn conversion_chooses_linear_and_conv_parameters() {
    let device = test_device().autodiff();
    let _guard = seeded(&device, 1);
    let cnn = ConvertConfig::new().convert(Cnn::new(&device)).unwrap();
    let (kl, n) = converted_kl(&cnn);
    assert_eq!(n, 4, "conv and fc, weight and bias each");
    assert!(to_vec(kl.unwrap())[0] > 0.0);
    let only_fc = ConvertConfig::new()
        .with_paths(vec!["fc".into()])
        .convert(Cnn::new(&device))
        .unwrap();
    assert_eq!(converted_kl(&only_fc).1, 2);
    let err = ConvertConfig::new()
        .with_types(vec!["Embedding".into()])
        .convert(Cnn::new(&device))
        .unwrap_err();
    assert_eq!(err.field, "types");
    let err = ConvertConfig::new()
        .with_prior_std(0.0)
        .convert(Cnn::new(&device))
        .unwrap_err();
    assert_eq!(err.field, "prior_std");
}

/// Each forward pass draws new weights around the means, with the configured spread: over 4000
/// passes, the output of one unit has the mean of the mean weights and the variance
/// `Σ_j x_j² σ² + σ²` of a linear layer.
#[test]
fn every_forward_pass_draws_new_weights() {
    let device = test_device();
    let _guard = seeded(&device, 2);
    let sigma = 0.1;
    let net = ConvertConfig::new()
        .with_init_rho(crate::special::inverse_softplus(sigma))
        .convert(LinearConfig::new(3, 1).init(&device))
        .unwrap();
    let x = Tensor::<2>::from_floats([[1.0, -2.0, 0.5]], &device);
    let draws: Vec<f64> = (0..4000)
        .map(|_| to_vec(net.forward(x.clone()))[0])
        .collect();
    // The output of the means: x·μ_w + μ_b (burn's weight is [d_in, d_out]).
    let (w, b) = (
        to_vec(net.weight.base()),
        to_vec(net.bias.as_ref().unwrap().base()),
    );
    let mean = w[0] - 2.0 * w[1] + 0.5 * w[2] + b[0];
    let m = crate::testing::sample_moments(&draws);
    assert!(
        (m.mean - mean).abs() < 4.0 * m.mean_se,
        "mean {} ± {} vs {mean}",
        m.mean,
        m.mean_se
    );
    let var = sigma * sigma * (1.0 + 4.0 + 0.25 + 1.0);
    // The sample variance of 4000 Gaussian draws has a relative s.e. of √(2/3999) ≈ 0.022.
    assert!(
        (m.var / var - 1.0).abs() < 4.0 * (2.0f64 / 3999.0).sqrt(),
        "variance {} vs {var}",
        m.var
    );
}

/// MOPED: the means are the trained weights, σ = δ|w|, and the prior is centred on them.
#[test]
fn moped_centres_posterior_and_prior_on_the_weights() {
    let device = test_device();
    let _guard = seeded(&device, 3);
    let linear = LinearConfig::new(4, 3).init(&device);
    let w = to_vec(linear.weight.val());
    let net = ConvertConfig::new()
        .with_moped(Some(0.1))
        .convert(linear)
        .unwrap();
    let b = net
        .weight
        .reparameterization::<BayesianParam<MeanField>>()
        .unwrap();
    assert_eq!(to_vec(net.weight.base()), w);
    assert_eq!(to_vec(b.prior.mean()), w);
    for (s, w) in to_vec(b.sigma()).iter().zip(&w) {
        let want = (0.1 * w.abs()).max(1e-6);
        assert!((s - want).abs() < 1e-4 * want, "σ {s} for w {w}");
    }
}

/// The KL of a converted layer is the mean-field posterior's KL to its prior, in closed form:
/// `Σ ln(σ₀/σ) + (σ² + μ²)/(2σ₀²) − ½`.
#[test]
fn the_kl_is_the_closed_form() {
    let device = test_device();
    let _guard = seeded(&device, 4);
    let net = ConvertConfig::new()
        .with_prior_std(0.5)
        .with_init_rho(crate::special::inverse_softplus(0.2))
        .convert(LinearConfig::new(5, 2).init(&device))
        .unwrap();
    let mut mu = to_vec(net.weight.base());
    mu.extend(to_vec(net.bias.as_ref().unwrap().base()));
    let expected: f64 = mu
        .iter()
        .map(|m| (0.5f64 / 0.2).ln() + (0.04 + m * m) / (2.0 * 0.25) - 0.5)
        .sum();
    let kl = to_vec(converted_kl(&net).0.unwrap())[0];
    assert!(
        (kl - expected).abs() < 1e-4 * expected,
        "{kl} vs {expected}"
    );
}

/// Moments and per-draw log-ratios need what a converted module does not keep: errors that say
/// so, not a silent fallback.
#[test]
fn moments_and_log_ratios_are_refused() {
    let device = test_device().autodiff();
    let _guard = seeded(&device, 5);
    let net = ConvertConfig::new()
        .convert(Mlp::new(2, 8, 1, &device))
        .unwrap();
    let model = Converted::new(net, gaussian(&device));
    let x = Tensor::<2>::random([4, 2], Distribution::Normal(0.0, 1.0), &device);
    let err = model.predict(x.clone(), PredictMode::Moments).unwrap_err();
    assert!(err.to_string().contains("Samples"), "{err}");
    let batch = Minibatch {
        input: x.clone(),
        target: Tensor::<2>::zeros([4, 1], &device),
        rows: crate::host::labels(&[0, 1, 2, 3], &device),
        n_train: 4,
    };
    let moments = StepRequest {
        inference: crate::step::Inference::Moments,
        ..StepRequest::new(1)
    };
    assert!(model.step(batch.clone(), moments).is_err());
    let ratio = StepRequest {
        log_ratio: true,
        ..StepRequest::new(1)
    };
    assert!(model.step(batch, ratio).is_err());
}

/// A burn `nn::Linear` MLP, converted, trains as the library's `Bnn` of the same family
/// (mean-field, one reparameterised draw per forward pass, the same prior, initial σ and
/// likelihood) does: over 4 seeds each, their mean ELBOs on the training data after 200 epochs
/// agree within 4 combined standard errors.
#[test]
fn a_converted_burn_mlp_trains_as_a_bnn_of_its_family() {
    let device = test_device().autodiff();
    let _guard = seeded(&device, 6);
    let data = crate::testing::sine(&device, 256);
    let plain = |(x, y): &(Tensor<2>, Tensor<2>)| (x.clone().inner(), y.clone().inner());
    let config = TrainConfig::new(200)
        .with_batch_size(32)
        .with_learning_rate(1e-2)
        .with_progress(false);
    let scale = ScaleInit::new().with_rho(-3.0).with_rho_std(0.0);
    let weights = WeightConfig::of(PosteriorConfig::MeanField(
        MeanFieldConfig::new().with_scale(scale),
    ))
    .with_estimator(Estimator::Reparameterization);
    let (mut converted, mut native) = (Vec::new(), Vec::new());
    for seed in 0..4 {
        let config = config.clone().with_seed(seed);
        let net = ConvertConfig::new()
            .convert(Mlp::new(1, 32, 1, &device))
            .unwrap();
        let model = Converted::new(net, gaussian(&device));
        let (model, _) = train(model, data.clone(), &config).unwrap();
        converted.push(crate::testing::full_batch_elbo(
            &model.valid(),
            plain(&data),
            256,
        ));
        let bnn: Regressor = MlpConfig::new(1, vec![32], 1)
            .with_weights(weights.clone())
            .init(gaussian(&device), &device)
            .unwrap();
        let (bnn, _) = train(bnn, data.clone(), &config).unwrap();
        native.push(crate::testing::full_batch_elbo(
            &bnn.valid(),
            plain(&data),
            256,
        ));
    }
    let (ours, theirs) = (sample_moments(&converted), sample_moments(&native));
    let ((a, sa), (b, sb)) = ((ours.mean, ours.mean_se), (theirs.mean, theirs.mean_se));
    assert!(
        (a - b).abs() < 4.0 * (sa * sa + sb * sb).sqrt(),
        "converted {converted:?} vs Bnn {native:?}"
    );
}

/// A converted burn CNN (convolution, max pooling, dense layer) learns to tell three patterns
/// of 8×8 images apart: a bright left half, a bright right half, a bright top half, in noise.
#[test]
fn a_converted_burn_cnn_learns_images() {
    let device = test_device().autodiff();
    let _guard = seeded(&device, 7);
    let images = |n: usize| {
        let labels: Vec<usize> = (0..n).map(|i| i % 3).collect();
        let mut pixels = Vec::with_capacity(n * 64);
        for &label in &labels {
            for r in 0..8 {
                for c in 0..8 {
                    let on = match label {
                        0 => c < 4,
                        1 => c >= 4,
                        _ => r < 4,
                    };
                    pixels.push(if on { 1.0f32 } else { 0.0 });
                }
            }
        }
        let clean = Tensor::<1>::from_floats(pixels.as_slice(), &device).reshape([n, 64]);
        let noise = Tensor::<2>::random([n, 64], Distribution::Normal(0.0, 0.5), &device);
        (clean + noise, crate::host::labels(&labels, &device))
    };
    let (train_data, (x, labels)) = (images(300), images(150));
    let net = ConvertConfig::new().convert(Cnn::new(&device)).unwrap();
    let model = Converted::new(net, Categorical);
    let config = TrainConfig::new(30)
        .with_batch_size(30)
        .with_learning_rate(1e-2)
        .with_progress(false);
    let (model, _) = train(model, train_data, &config).unwrap();
    let prediction = model
        .valid()
        .predict(x.inner(), PredictMode::Samples(16))
        .unwrap();
    let accuracy = crate::testing::accuracy(prediction.predicted_class(), labels.inner());
    // Each image's mean differs from the others' by 32 pixels of 1 in noise of 0.5: separable
    // with near certainty; 150 rows give a standard error of at most 0.04.
    assert!(accuracy > 0.9, "accuracy {accuracy}");
}
