//! The convolutional body: Bayesian convolutions (each followed by the activation and an
//! optional pooling), flattened into Bayesian dense layers. The strided LeNet5 of Haußmann
//! (2021, Table 3.4) is [`ConvNetConfig::lenet5`]: `Conv5×5(20, s2) → Conv5×5(50, s2) →
//! Linear(800→500) → Linear(500→C)`, ReLU everywhere, no pooling, no padding; the pooled
//! LeNet5 of Sensoy et al. (2018)'s EDL code is [`ConvNetConfig::lenet5_pooled`].

use super::{Bnn, Body, MlpBody, MlpConfig};
use crate::dist::Moments;
use crate::error::{Check, ConfigError, DataMismatch};
use crate::layers::{
    BayesianConv2d, BayesianConv2dConfig, Conv2dGeometry, LayerInfo, LayerKind, LayerMapper,
    LayerVisitor, MeanInit, Pass, Pool, WeightConfig,
};
use crate::likelihood::Likelihood;
use crate::posterior::Unsupported;
use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Device, Tensor};

/// One convolution of a [`ConvNetConfig`]: square kernel, stride, zero padding, optional pool.
#[derive(Config, Debug, PartialEq)]
pub struct ConvSpec {
    /// Output channels.
    pub out_channels: usize,
    /// Kernel side.
    pub kernel: usize,
    /// Stride (both axes).
    #[config(default = 1)]
    pub stride: usize,
    /// Zero padding on every side.
    #[config(default = 0)]
    pub padding: usize,
    /// Pooling after the activation.
    #[config(default = "None")]
    pub pool: Option<Pool>,
}

/// Configuration of a convolutional [`Bnn`]: convolutions, then the dense layers of `dense`
/// on the flattened maps. `dense` also sets the weight model and activation of every
/// convolution; its `d_input` must be the flattened width ([`conv_features`]).
#[derive(Config, Debug)]
pub struct ConvNetConfig {
    /// Input `[channels, height, width]`.
    pub input: [usize; 3],
    /// Convolutions, input to output.
    pub convs: Vec<ConvSpec>,
    /// The dense layers after flattening, and every layer's weights and activation.
    pub dense: MlpConfig,
}

/// `[C, H, W]` after the convolutions and pools of `convs` on `input` images, or an error
/// naming the first layer that leaves no pixels.
pub fn conv_features(input: [usize; 3], convs: &[ConvSpec]) -> Result<[usize; 3], ConfigError> {
    let check = Check("ConvNetConfig");
    let [mut c, mut h, mut w] = input;
    check.at_least_one("input[0]", c)?;
    for spec in convs {
        check.at_least_one("convs.out_channels", spec.out_channels)?;
        check.at_least_one("convs.kernel", spec.kernel)?;
        check.at_least_one("convs.stride", spec.stride)?;
        let side = |n: usize| (n + 2 * spec.padding + 1).checked_sub(spec.kernel);
        let (Some(hh), Some(ww)) = (side(h), side(w)) else {
            return Err(ConfigError {
                config: "ConvNetConfig",
                field: "input",
                value: format!("{input:?}"),
                expected: "images at least as large as every kernel (the image is smaller than \
                           a kernel)",
            });
        };
        check.at_least_one("input (the image is smaller than a kernel)", hh.min(ww))?;
        h = (hh - 1) / spec.stride + 1;
        w = (ww - 1) / spec.stride + 1;
        c = spec.out_channels;
        if let Some(pool) = &spec.pool {
            let (Some(ph), Some(pw)) = (pool.output_side(h), pool.output_side(w)) else {
                return Err(ConfigError {
                    config: "ConvNetConfig",
                    field: "convs.pool",
                    value: format!("{pool:?} on {h}x{w} maps"),
                    expected: "a pooling window no larger than the maps and stride >= 1",
                });
            };
            (h, w) = (ph, pw);
        }
    }
    Ok([c, h, w])
}

/// A convolution, then the activation, then an optional pooling.
#[derive(Module, Debug)]
pub struct ConvBlock {
    /// The convolution.
    pub conv: BayesianConv2d,
    /// Pooling after the activation.
    #[module(skip)]
    pub pool: Option<Pool>,
}

/// Convolution blocks, then dense layers on the flattened maps.
#[derive(Module, Debug)]
pub struct ConvBody {
    /// Convolution blocks, input to output.
    pub blocks: Vec<ConvBlock>,
    /// Dense layers after flattening (the same loop as an MLP body).
    pub dense: MlpBody,
    /// Input `[channels, height, width]`.
    #[module(skip)]
    pub input: [usize; 3],
}

impl ConvNetConfig {
    /// The strided LeNet5 of Haußmann (2021, Table 3.4) for `[C, H, W]` images: 28×28 →
    /// 12×12×20 → 4×4×50 = 800 → 500 → `n_classes`.
    pub fn lenet5(input: [usize; 3], n_classes: usize) -> Self {
        Self::strided_lenet(input, [20, 50], vec![500], n_classes)
    }

    /// The pooled LeNet5 of Louizos & Welling (2017) and of Sensoy et al. (2018)'s EDL code,
    /// on which Haußmann (2021, Table 5.2) ran EDL: two 5×5 stride-1 convolutions of 20 and 50
    /// channels, each followed by ReLU and a 2×2 max pooling, then a dense layer of 500:
    /// 28×28 → 24×24×20 → 12×12 → 8×8×50 → 4×4×50 = 800 → 500 → `n_classes`. (Sensoy's code
    /// pads and drops half the 500 units while training: [`Self::lenet5_sensoy`].)
    pub fn lenet5_pooled(input: [usize; 3], n_classes: usize) -> Self {
        Self::pooled_lenet(input, 0, n_classes)
    }

    /// The LeNet5 of Sensoy et al. (2018)'s EDL code, on which Haußmann (2021, Table 5.2) ran
    /// EDL with "the official code and hyperparameters": [`Self::lenet5_pooled`] with zero
    /// padding 2 (TensorFlow's `SAME`), dropout of half the 500 units while training
    /// ([`MlpConfig::dropout`]) and his initialiser
    /// ([`MeanInit::TfTruncatedNormal`] with gain √2, which [`Self::with_weights`] replaces
    /// with the new weights' own): 28×28 → 28×28×20 → 14×14 → 14×14×50 → 7×7×50 = 2450 → 500 →
    /// `n_classes`.
    pub fn lenet5_sensoy(input: [usize; 3], n_classes: usize) -> Self {
        let mut net = Self::pooled_lenet(input, 2, n_classes);
        net.dense.dropout = 0.5;
        net.dense.weights.initializer = MeanInit::TfTruncatedNormal {
            gain: std::f64::consts::SQRT_2,
        };
        net
    }

    /// Two 5×5 stride-1 convolutions of 20 and 50 channels with zero `padding`, each followed
    /// by a 2×2 max pooling, then a dense layer of 500 units.
    fn pooled_lenet(input: [usize; 3], padding: usize, n_classes: usize) -> Self {
        let pool = Pool::Max {
            kernel: 2,
            stride: 2,
        };
        let convs = [20, 50]
            .map(|c| {
                ConvSpec::new(c, 5)
                    .with_padding(padding)
                    .with_pool(Some(pool))
            })
            .to_vec();
        let width = conv_features(input, &convs).map_or(0, |[c, h, w]| c * h * w);
        Self::new(input, convs, MlpConfig::new(width, vec![500], n_classes))
    }

    /// Two 5×5 stride-2 convolutions of `channels`, then dense layers of `hidden` units (none:
    /// the read-out straight on the maps).
    fn strided_lenet(
        input: [usize; 3],
        channels: [usize; 2],
        hidden: Vec<usize>,
        n_classes: usize,
    ) -> Self {
        let convs = channels
            .map(|c| ConvSpec::new(c, 5).with_stride(2))
            .to_vec();
        // An input too small for the kernels leaves 0 here; `init` names the geometry error.
        let width = conv_features(input, &convs).map_or(0, |[c, h, w]| c * h * w);
        Self::new(input, convs, MlpConfig::new(width, hidden, n_classes))
    }

    /// The strided LeNet5 of Haußmann (2021, §3.5 and Table 5.2) for colour images: two 5×5
    /// stride-2 convolutions of 192 channels and a dense layer of 1000, 32×32 → 14×14 → 5×5×192
    /// = 4800 → 1000 → `n_classes`.
    pub fn lenet5_cifar(input: [usize; 3], n_classes: usize) -> Self {
        Self::strided_lenet(input, [192, 192], vec![1000], n_classes)
    }

    /// The net Haußmann (2021, Table 5.3 and §5.8.2.3) trains with BEDL and BEDL-PAC beside
    /// the convolutional GP kernels of Garriga-Alonso et al. (2019): two 5×5 stride-2
    /// convolutions of 96 channels, then the linear read-out, with no dense hidden layer:
    /// 28×28 → 12×12×96 → 4×4×96 = 1536 → `n_classes` (32×32 colour: 5×5×96 = 2400). §5.8.2.3
    /// prints "a stride of 5", the table's caption stride 2; a 5×5 kernel at stride 5 would
    /// leave a 1×1 map of the 28×28 images after the second layer, so stride 2 is taken.
    pub fn conv96(input: [usize; 3], n_classes: usize) -> Self {
        Self::strided_lenet(input, [96, 96], vec![], n_classes)
    }

    /// The same network with `weights` in every layer.
    pub fn with_weights(mut self, weights: WeightConfig) -> Self {
        self.dense.weights = weights;
        self
    }

    /// `[C, H, W]` after the convolutions and pools.
    pub fn feature_shape(&self) -> Result<[usize; 3], ConfigError> {
        conv_features(self.input, &self.convs)
    }

    /// The most values one image holds in any layer: the input, each convolution's output
    /// before its pooling, each dense layer's. What a prediction's memory grows with, per
    /// image and draw.
    ///
    /// # Errors
    /// As [`ConvNetConfig::feature_shape`].
    pub fn widest_activation(&self) -> Result<usize, ConfigError> {
        let [c, h, w] = self.input;
        let mut widest = c * h * w;
        for i in 0..self.convs.len() {
            let mut upto: Vec<ConvSpec> = self.convs[..=i].to_vec();
            upto[i].pool = None;
            let [c, h, w] = conv_features(self.input, &upto)?;
            widest = widest.max(c * h * w);
        }
        let dense = self
            .dense
            .hidden
            .iter()
            .copied()
            .chain([self.dense.d_output]);
        Ok(dense.fold(widest, usize::max))
    }

    /// An [`ImageClassifier`](super::ImageClassifier) over the dense part's `d_output`
    /// classes (softmax likelihood).
    pub fn init_classifier(&self, device: &Device) -> Result<super::ImageClassifier, ConfigError> {
        self.init(crate::likelihood::Categorical, device)
    }

    /// The network with `likelihood`.
    pub fn init<L: Likelihood>(
        &self,
        likelihood: L,
        device: &Device,
    ) -> Result<Bnn<ConvBody, L>, ConfigError> {
        let [cf, hf, wf] = self.feature_shape()?;
        if self.dense.d_input != cf * hf * wf {
            return Err(ConfigError {
                config: "ConvNetConfig",
                field: "dense.d_input",
                value: format!(
                    "{} (the convolutions give {cf}x{hf}x{wf} = {} features)",
                    self.dense.d_input,
                    cf * hf * wf
                ),
                expected: "the width of the flattened convolution output (see conv_features)",
            });
        }
        let mut cin = self.input[0];
        let mut blocks = Vec::with_capacity(self.convs.len());
        for spec in &self.convs {
            let geometry = Conv2dGeometry::new()
                .with_stride([spec.stride; 2])
                .with_padding([spec.padding; 2]);
            let conv = BayesianConv2dConfig::new([cin, spec.out_channels], [spec.kernel; 2])
                .with_geometry(geometry)
                .with_weights(self.dense.weights.clone())
                .init(device)?;
            blocks.push(ConvBlock {
                conv,
                pool: spec.pool,
            });
            cin = spec.out_channels;
        }
        let Bnn {
            body: dense,
            head,
            likelihood,
            moments,
        } = self.dense.init(likelihood, device)?;
        let body = ConvBody {
            blocks,
            dense,
            input: self.input,
        };
        let mut net = Bnn::new(body, head, likelihood);
        net.moments = moments;
        Ok(net)
    }
}

impl ConvBody {
    /// Inside a forward pass, a shape the entry points' checks let through is a bug.
    fn assert_input(&self, x: &Tensor<4>) {
        let [_, c, h, w] = x.dims();
        assert!(
            [c, h, w] == self.input,
            "ConvBody: input shape {:?} does not match the configured images [B, {}, {}, {}]",
            x.dims(),
            self.input[0],
            self.input[1],
            self.input[2]
        );
    }
}

impl Body for ConvBody {
    type Input = Tensor<4>;

    fn features(&self, x: Tensor<4>, pass: &mut Pass) -> Tensor<3> {
        self.assert_input(&x);
        let b = x.dims()[0];
        let s = pass.samples();
        let mut z = x.unsqueeze::<5>().repeat_dim(0, s);
        for block in &self.blocks {
            z = self.dense.activation.forward(block.conv.run(z, pass));
            if let Some(pool) = &block.pool {
                z = pool.forward(z);
            }
        }
        let [_, _, cf, hf, wf] = z.dims();
        self.dense.propagate(z.reshape([s, b, cf * hf * wf]), pass)
    }

    fn feature_moments(&self, x: Tensor<4>, pass: &mut Pass) -> Result<Moments<3>, Unsupported> {
        self.assert_input(&x);
        let b = x.dims()[0];
        let mut m = Moments::deterministic(x.unsqueeze::<5>());
        for block in &self.blocks {
            m = self
                .dense
                .activation
                .pass_moments(block.conv.moments(m, pass)?, pass)?;
            if let Some(pool) = &block.pool {
                m = pool.pass_moments(m, pass);
            }
        }
        let [_, _, cf, hf, wf] = m.dims();
        self.dense
            .propagate_moments(m.reshape([1, b, cf * hf * wf]), pass)
    }

    fn feature_dim(&self) -> usize {
        self.dense.feature_dim()
    }

    fn check_input(&self, x: &Tensor<4>) -> Result<(), DataMismatch> {
        let [_, c, h, w] = x.dims();
        match [c, h, w] == self.input {
            true => Ok(()),
            false => Err(DataMismatch::Shape {
                part: "inputs",
                expected: self.input.to_vec(),
                found: vec![c, h, w],
            }),
        }
    }

    fn visit_layers<V: LayerVisitor>(&self, visitor: &mut V) {
        for (index, block) in self.blocks.iter().enumerate() {
            let kind = LayerKind::Conv2d(block.conv.geometry.clone());
            visitor.visit(LayerInfo { index, kind }, &block.conv.params);
        }
        self.dense.visit_from(self.blocks.len(), visitor);
    }

    fn map_layers<M: LayerMapper>(mut self, mapper: &mut M) -> Result<Self, ConfigError> {
        for (index, block) in self.blocks.iter_mut().enumerate() {
            let kind = LayerKind::Conv2d(block.conv.geometry.clone());
            block.conv.params = mapper.map(LayerInfo { index, kind }, block.conv.params.clone())?;
        }
        self.dense = self.dense.map_from(self.blocks.len(), mapper)?;
        Ok(self)
    }
}
