//! Convolutional Bayesian classifiers: a stack of 2-D convolutions followed by dense layers,
//! every layer of the posterior family chosen by [`LayerKind`], such as the strided LeNet5 of
//! Haußmann (2021, Table 3.4): `Conv5×5(20, s2) → Conv5×5(50, s2) → Linear(800→500) →
//! Linear(500→C)`, ReLU everywhere, no pooling, no padding.

use crate::error::{Check, ConfigError};
use crate::layers::{
    Conv2dGeometry, DropConnectConv2d, DropoutConv2dConfig, McDropoutConv2d, MeanFieldConv2d,
    MeanFieldConv2dConfig, RadialConv2d, RadialConv2dConfig, check_channels,
};
use crate::model::{LayerKind, StochasticLinear, gaussian_penalty};
use crate::objective::Categorical;
use crate::prior::KlDivergence;
use crate::uncertainty::ClassPrediction;
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::activation::relu;
use burn::tensor::module::conv2d;
use burn::tensor::{Device, Distribution, Int, Tensor};

/// A point-estimate convolution whose "KL" is the negative log Gaussian prior (MAP):
/// `‖K‖² / (2σ₀²)`.
#[derive(Module, Debug)]
pub struct MapConv2d {
    /// `[C_out, C_in, kH, kW]` kernel.
    pub weight: Param<Tensor<4>>,
    /// `[C_out]` bias (no prior).
    pub bias: Param<Tensor<1>>,
    /// Stride, padding, dilation.
    #[module(skip)]
    pub geometry: Conv2dGeometry,
    /// Prior standard deviation σ₀.
    pub prior_std: f64,
}

impl KlDivergence for MapConv2d {
    fn kl(&self) -> Tensor<1> {
        gaussian_penalty(self.weight.val(), self.prior_std)
    }
}

/// One convolution of a [`BayesianConvNet`], of any family.
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum StochasticConv2d {
    /// Point estimate.
    Map(MapConv2d),
    /// Mean-field Gaussian.
    MeanField(MeanFieldConv2d),
    /// Radial.
    Radial(RadialConv2d),
    /// MC dropout on the layer input.
    McDropout(McDropoutConv2d),
    /// DropConnect on the kernel.
    DropConnect(DropConnectConv2d),
}

impl StochasticConv2d {
    /// A `C_in → C_out` convolution of family `kind` with a square `kernel`.
    pub fn new(
        kind: &LayerKind,
        channels: [usize; 2],
        kernel: usize,
        geometry: Conv2dGeometry,
        device: &Device,
    ) -> Result<Self, ConfigError> {
        let kernel_size = [kernel, kernel];
        Ok(match *kind {
            LayerKind::Deterministic { prior_std } => {
                let check = Check("LayerKind::Deterministic");
                check.positive("prior_std", prior_std)?;
                check.at_least_one("kernel", kernel)?;
                geometry.validate("StochasticConv2d")?;
                let [cin, cout] = channels;
                let he = (2.0 / (cin * kernel * kernel) as f64).sqrt();
                StochasticConv2d::Map(MapConv2d {
                    weight: Param::from_tensor(Tensor::random(
                        [cout, cin, kernel, kernel],
                        Distribution::Normal(0.0, he),
                        device,
                    )),
                    bias: Param::from_tensor(Tensor::zeros([cout], device)),
                    geometry,
                    prior_std,
                })
            }
            LayerKind::MeanField {
                estimator,
                prior,
                rho_init,
            } => StochasticConv2d::MeanField(
                MeanFieldConv2dConfig::new(channels, kernel_size)
                    .with_geometry(geometry)
                    .with_estimator(estimator)
                    .with_prior(prior)
                    .with_rho_init(rho_init)
                    .init(device)?,
            ),
            LayerKind::Radial { prior, rho_init } => StochasticConv2d::Radial(
                RadialConv2dConfig::new(channels, kernel_size)
                    .with_geometry(geometry)
                    .with_prior(prior)
                    .with_rho_init(rho_init)
                    .init(device)?,
            ),
            LayerKind::McDropout {
                p,
                noise,
                length_scale,
            } => StochasticConv2d::McDropout(
                DropoutConv2dConfig::new(channels, kernel_size, p)
                    .with_geometry(geometry)
                    .with_noise(noise)
                    .with_length_scale(length_scale)
                    .init_mc_dropout(device)?,
            ),
            LayerKind::DropConnect { p, length_scale } => StochasticConv2d::DropConnect(
                DropoutConv2dConfig::new(channels, kernel_size, p)
                    .with_geometry(geometry)
                    .with_length_scale(length_scale)
                    .init_drop_connect(device)?,
            ),
        })
    }

    /// `S` samples: `[S, B, C_in, H, W]` → `[S, B, C_out, H', W']`.
    pub fn forward_samples(&self, x: Tensor<5>) -> Tensor<5> {
        match self {
            StochasticConv2d::Map(l) => {
                check_channels("MapConv2d", &x.dims(), l.weight.dims()[1], 2);
                let [s, b, c, h, w] = x.dims();
                let y = conv2d(
                    x.reshape([s * b, c, h, w]),
                    l.weight.val(),
                    Some(l.bias.val()),
                    l.geometry.options(),
                );
                let [_, o, ho, wo] = y.dims();
                y.reshape([s, b, o, ho, wo])
            }
            StochasticConv2d::MeanField(l) => l.forward_samples(x),
            StochasticConv2d::Radial(l) => l.forward_samples(x),
            StochasticConv2d::McDropout(l) => l.forward_samples(x),
            StochasticConv2d::DropConnect(l) => l.forward_samples(x),
        }
    }
}

impl KlDivergence for StochasticConv2d {
    fn kl(&self) -> Tensor<1> {
        match self {
            StochasticConv2d::Map(l) => l.kl(),
            StochasticConv2d::MeanField(l) => l.kl(),
            StochasticConv2d::Radial(l) => l.kl(),
            StochasticConv2d::McDropout(l) => l.kl(),
            StochasticConv2d::DropConnect(l) => l.kl(),
        }
    }
}

/// One convolution of a [`BayesianConvNetConfig`]: square kernel, stride, no padding.
#[derive(Config, Debug, PartialEq)]
pub struct ConvSpec {
    /// Output channels.
    pub out_channels: usize,
    /// Kernel side.
    pub kernel: usize,
    /// Stride (both axes).
    #[config(default = 1)]
    pub stride: usize,
}

/// Configuration of a [`BayesianConvNet`].
#[derive(Config, Debug)]
pub struct BayesianConvNetConfig {
    /// Input `[channels, height, width]`.
    pub input: [usize; 3],
    /// Convolutions, input to output (ReLU after each).
    pub convs: Vec<ConvSpec>,
    /// Hidden dense widths after flattening (ReLU after each).
    pub hidden: Vec<usize>,
    /// Number of classes (logits).
    pub n_classes: usize,
    /// Posterior family of every layer.
    pub layer: LayerKind,
}

impl BayesianConvNetConfig {
    /// The strided LeNet5 of Haußmann (2021, Table 3.4) for `[C, H, W]` images: 28×28 →
    /// 12×12×20 → 4×4×50 = 800 → 500 → `n_classes`.
    pub fn lenet5(input: [usize; 3], n_classes: usize, layer: LayerKind) -> Self {
        Self::new(
            input,
            vec![
                ConvSpec::new(20, 5).with_stride(2),
                ConvSpec::new(50, 5).with_stride(2),
            ],
            vec![500],
            n_classes,
            layer,
        )
    }

    /// `[C, H, W]` after the convolutions, or an error naming the layer that leaves no pixels.
    pub fn feature_shape(&self) -> Result<[usize; 3], ConfigError> {
        let check = Check("BayesianConvNetConfig");
        let [mut c, mut h, mut w] = self.input;
        check.at_least_one("input[0]", c)?;
        for spec in &self.convs {
            check.at_least_one("convs.out_channels", spec.out_channels)?;
            check.at_least_one("convs.kernel", spec.kernel)?;
            check.at_least_one("convs.stride", spec.stride)?;
            check.at_least_one(
                "input (height after a convolution; the image is smaller than the kernel)",
                (h + 1).saturating_sub(spec.kernel),
            )?;
            check.at_least_one(
                "input (width after a convolution; the image is smaller than the kernel)",
                (w + 1).saturating_sub(spec.kernel),
            )?;
            h = (h - spec.kernel) / spec.stride + 1;
            w = (w - spec.kernel) / spec.stride + 1;
            c = spec.out_channels;
        }
        Ok([c, h, w])
    }

    /// The network.
    pub fn init(&self, device: &Device) -> Result<BayesianConvNet, ConfigError> {
        let check = Check("BayesianConvNetConfig");
        check.at_least_one("n_classes", self.n_classes)?;
        for h in &self.hidden {
            check.at_least_one("hidden", *h)?;
        }
        let [cf, hf, wf] = self.feature_shape()?;
        let mut cin = self.input[0];
        let mut convs = Vec::with_capacity(self.convs.len());
        for spec in &self.convs {
            let geometry = Conv2dGeometry::new().with_stride([spec.stride, spec.stride]);
            convs.push(StochasticConv2d::new(
                &self.layer,
                [cin, spec.out_channels],
                spec.kernel,
                geometry,
                device,
            )?);
            cin = spec.out_channels;
        }
        let mut widths = vec![cf * hf * wf];
        widths.extend(&self.hidden);
        widths.push(self.n_classes);
        let dense = widths
            .windows(2)
            .map(|w| StochasticLinear::new(&self.layer, w[0], w[1], device))
            .collect::<Result<_, _>>()?;
        Ok(BayesianConvNet {
            convs,
            dense,
            input: self.input,
        })
    }
}

/// Convolutions then dense layers, every one of one posterior family; ReLU between layers.
#[derive(Module, Debug)]
pub struct BayesianConvNet {
    /// Convolutions, input to output.
    pub convs: Vec<StochasticConv2d>,
    /// Dense layers after flattening; the last gives the logits.
    pub dense: Vec<StochasticLinear>,
    /// Input `[channels, height, width]`.
    #[module(skip)]
    pub input: [usize; 3],
}

impl BayesianConvNet {
    /// `S` stochastic passes in one call: `[B, C, H, W]` → `[S, B, n_classes]` logits.
    ///
    /// # Panics
    /// If the images are not `[C, H, W]` as configured (both shapes are named), or `samples`
    /// is 0.
    pub fn forward_samples(&self, x: Tensor<4>, samples: usize) -> Tensor<3> {
        assert!(
            samples >= 1,
            "BayesianConvNet::forward_samples needs samples >= 1"
        );
        let [b, c, h, w] = x.dims();
        assert!(
            [c, h, w] == self.input,
            "BayesianConvNet: input shape {:?} does not match the configured images [B, {}, {}, \
             {}]",
            x.dims(),
            self.input[0],
            self.input[1],
            self.input[2]
        );
        let mut z = x.unsqueeze::<5>().repeat_dim(0, samples);
        for conv in &self.convs {
            z = relu(conv.forward_samples(z));
        }
        let [_, _, cf, hf, wf] = z.dims();
        let mut h = z.reshape([samples, b, cf * hf * wf]);
        let last = self.dense.len() - 1;
        for (i, layer) in self.dense.iter().enumerate() {
            h = layer.forward_samples(h);
            if i < last {
                h = relu(h);
            }
        }
        h
    }
}

impl KlDivergence for BayesianConvNet {
    fn kl(&self) -> Tensor<1> {
        let device = self.devices()[0].clone();
        let convs = self
            .convs
            .iter()
            .fold(Tensor::zeros([1], &device), |acc, l| acc + l.kl());
        self.dense.iter().fold(convs, |acc, l| acc + l.kl())
    }
}

/// A Bayesian image classifier: convolutional network plus categorical likelihood. Inputs are
/// `[B, C, H, W]` images, targets class indices `[B]`.
#[derive(Module, Debug)]
pub struct ImageClassifier {
    /// The network (outputs logits).
    pub net: BayesianConvNet,
}

impl ImageClassifier {
    /// Class probabilities of `S` samples `[S, B, C]`.
    pub fn predict(&self, x: Tensor<4>, samples: usize) -> ClassPrediction {
        Categorical.predict(self.net.forward_samples(x, samples))
    }
}

impl KlDivergence for ImageClassifier {
    fn kl(&self) -> Tensor<1> {
        self.net.kl()
    }
}

impl crate::train::Supervised for ImageClassifier {
    type Input = Tensor<4>;
    type Target = Tensor<1, Int>;

    fn nll(&self, x: Tensor<4>, y: Tensor<1, Int>, samples: usize) -> Tensor<2> {
        Categorical.nll(self.net.forward_samples(x, samples), y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::{DropoutNoise, Estimator};
    use crate::testing::seeded;
    use crate::train::{TrainConfig, train};
    use crate::{Prior, device, training_device};

    fn kinds() -> Vec<LayerKind> {
        vec![
            LayerKind::Deterministic { prior_std: 1.0 },
            LayerKind::MeanField {
                estimator: Estimator::LocalReparameterization,
                prior: Prior::gaussian(1.0),
                rho_init: -5.0,
            },
            LayerKind::MeanField {
                estimator: Estimator::Reparameterization,
                prior: Prior::gaussian(1.0),
                rho_init: -5.0,
            },
            LayerKind::Radial {
                prior: Prior::gaussian(1.0),
                rho_init: -5.0,
            },
            LayerKind::McDropout {
                p: 0.2,
                noise: DropoutNoise::Bernoulli,
                length_scale: 1e-2,
            },
            LayerKind::DropConnect {
                p: 0.2,
                length_scale: 1e-2,
            },
        ]
    }

    #[test]
    fn lenet5_has_the_thesis_shapes_for_every_family() {
        let _guard = seeded(&device(), 0);
        let d = device();
        for kind in kinds() {
            let config = BayesianConvNetConfig::lenet5([1, 28, 28], 10, kind);
            assert_eq!(config.feature_shape().unwrap(), [50, 4, 4]);
            let net = config.init(&d).unwrap();
            // 20·1·25 + 20, 50·20·25 + 50, 800·500 + 500, 500·10 + 10 weights (twice for the
            // posterior families that keep a scale per weight).
            let weights = 520 + 25_050 + 400_500 + 5_010;
            let n = net.num_params();
            assert!(n == weights || n == 2 * weights, "{}: {n}", kind.name());
            let x = Tensor::<4>::random([3, 1, 28, 28], Distribution::Normal(0.0, 1.0), &d);
            assert_eq!(
                net.forward_samples(x, 2).dims(),
                [2, 3, 10],
                "{}",
                kind.name()
            );
            assert!(crate::host::to_vec(net.kl())[0] >= 0.0);
        }
    }

    #[test]
    fn an_image_smaller_than_a_kernel_is_a_config_error() {
        let config = BayesianConvNetConfig::lenet5(
            [1, 8, 8],
            10,
            LayerKind::Deterministic { prior_std: 1.0 },
        );
        let err = config.init(&device()).unwrap_err().to_string();
        assert!(
            err.contains("BayesianConvNetConfig") && err.contains("kernel"),
            "{err}"
        );
    }

    #[test]
    #[should_panic(expected = "input shape [2, 3, 28, 28]")]
    fn wrong_image_shape_names_both_shapes() {
        let net = BayesianConvNetConfig::lenet5(
            [1, 28, 28],
            10,
            LayerKind::Deterministic { prior_std: 1.0 },
        )
        .init(&device())
        .unwrap();
        net.forward_samples(Tensor::zeros([2, 3, 28, 28], &device()), 1);
    }

    /// Two classes of 8×8 images (a bright left or right half) are learned by every family,
    /// and the posterior families stay stochastic at prediction.
    #[test]
    fn every_family_learns_a_two_class_image_task() {
        let _guard = seeded(&device(), 1);
        let d = training_device();
        let n = 128;
        let mut pixels = vec![0f32; n * 64];
        let mut labels = vec![0i64; n];
        for i in 0..n {
            labels[i] = (i % 2) as i64;
            for r in 0..8 {
                for c in 0..8 {
                    let bright = (c < 4) == (i % 2 == 0);
                    let noise = (((i * 64 + r * 8 + c) * 2_654_435_761) % 1000) as f32 / 1000.0;
                    pixels[i * 64 + r * 8 + c] = if bright { 1.0 } else { 0.0 } + 0.5 * noise;
                }
            }
        }
        let x = Tensor::<1>::from_floats(pixels.as_slice(), &d).reshape([n, 1, 8, 8]);
        let y = Tensor::<1, Int>::from_ints(labels.as_slice(), &d);
        for kind in kinds() {
            let net = BayesianConvNetConfig::new(
                [1, 8, 8],
                vec![ConvSpec::new(4, 3).with_stride(2)],
                vec![16],
                2,
                kind,
            )
            .init(&d)
            .unwrap();
            let config = TrainConfig::new(30)
                .with_batch_size(32)
                .with_learning_rate(1e-2)
                .with_progress(false);
            let (model, _) = train(ImageClassifier { net }, x.clone(), y.clone(), &config).unwrap();
            let model = model.valid();
            let pred = model.predict(x.clone().without_autodiff(), 8);
            let probs = crate::host::to_vec(pred.predictive());
            let correct = (0..n)
                .filter(|&i| (probs[2 * i + 1] > 0.5) == (labels[i] == 1))
                .count();
            assert!(correct >= n * 95 / 100, "{}: {correct}/{n}", kind.name());
        }
    }
}
