//! The networks `bnn-bench perf` times: the MLP 784-400-400-10 (batch 128) of the PyTorch peers
//! and the strided LeNet5 of Haußmann (2021, Table 3.4) on MNIST-sized inputs (batch 100), each
//! as burn's deterministic layers and as a `bnn-burn` network of every posterior family.

use bnn_burn::fused::Kernels;
use bnn_burn::layers::Pass;
use bnn_burn::layers::WeightConfig;
use bnn_burn::likelihood::{Categorical, Evidential};
use bnn_burn::nets::{Bnn, Body, ConvNetConfig, MlpConfig};
use bnn_burn::objective::{
    AlphaConfig, Inference, KlTerm, Objective, StepContext, StepRequest, StepTerms,
};
use bnn_burn::train::{Minibatch, Model};
use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Distribution, Int, Tensor};

/// Training-set size the KL is divided by (MNIST's).
pub const N_TRAIN: f64 = 60_000.0;

/// A timed architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Net {
    /// MLP 784-400-400-10, batch 128, inputs `[128, 784]`.
    Mlp,
    /// LeNet5 (conv 20×5×5/2, conv 50×5×5/2, 800-500-10), batch 100, inputs `[100, 1, 28, 28]`.
    LeNet5,
}

impl Net {
    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Net::Mlp => "MLP 784-400-400-10, batch 128",
            Net::LeNet5 => "LeNet5 on 28×28 images, batch 100",
        }
    }

    /// Its name in progress lines.
    pub fn short_name(self) -> &'static str {
        match self {
            Net::Mlp => "MLP",
            Net::LeNet5 => "LeNet5",
        }
    }

    /// Its name in the peer programs' arguments.
    pub fn peer_arch(self) -> &'static str {
        match self {
            Net::Mlp => "mlp",
            Net::LeNet5 => "lenet5",
        }
    }

    fn batch(self) -> usize {
        match self {
            Net::Mlp => 128,
            Net::LeNet5 => 100,
        }
    }
}

/// `--net` values (`mlp`, `lenet5`; none: both).
pub fn parse_nets(names: &[String]) -> Result<Vec<Net>, Box<dyn std::error::Error>> {
    if names.is_empty() {
        return Ok(vec![Net::Mlp, Net::LeNet5]);
    }
    names
        .iter()
        .map(|n| match n.to_ascii_lowercase().as_str() {
            "mlp" => Ok(Net::Mlp),
            "lenet5" => Ok(Net::LeNet5),
            _ => Err(format!("perf: unknown --net '{n}'; known: mlp, lenet5").into()),
        })
        .collect()
}

/// The `--kernels` value (`fused`, `reference`, `both`).
pub fn parse_kernels(name: &str) -> Result<Vec<Kernels>, Box<dyn std::error::Error>> {
    match name.to_ascii_lowercase().as_str() {
        "fused" => Ok(vec![Kernels::Fused]),
        "reference" => Ok(vec![Kernels::Reference]),
        "both" => Ok(vec![Kernels::Fused, Kernels::Reference]),
        _ => Err(format!("perf: unknown --kernels '{name}'; known: fused, reference, both").into()),
    }
}

/// Inputs and targets of one architecture: random, as the peers use.
pub enum Inputs {
    /// `[B, 784]`.
    Flat(Tensor<2>),
    /// `[B, 1, 28, 28]`.
    Images(Tensor<4>),
}

/// Random inputs and targets `[B, 10]` for `net`.
pub fn inputs(net: Net, device: &Device) -> (Inputs, Tensor<2>) {
    let b = net.batch();
    let normal = Distribution::Normal(0.0, 1.0);
    let x = match net {
        Net::Mlp => Inputs::Flat(Tensor::random([b, 784], normal, device)),
        Net::LeNet5 => Inputs::Images(Tensor::random([b, 1, 28, 28], normal, device)),
    };
    (x, Tensor::random([b, 10], normal, device))
}

/// burn's own deterministic layers with ReLU: the baseline.
#[derive(Module, Debug)]
pub struct Deterministic {
    convs: Vec<Conv2d>,
    dense: Vec<Linear>,
}

impl Deterministic {
    /// The deterministic version of `net`.
    pub fn new(net: Net, device: &Device) -> Self {
        let (convs, widths) = match net {
            Net::Mlp => (vec![], vec![784, 400, 400, 10]),
            Net::LeNet5 => (
                vec![
                    Conv2dConfig::new([1, 20], [5, 5])
                        .with_stride([2, 2])
                        .init(device),
                    Conv2dConfig::new([20, 50], [5, 5])
                        .with_stride([2, 2])
                        .init(device),
                ],
                vec![800, 500, 10],
            ),
        };
        let dense = widths
            .windows(2)
            .map(|w| LinearConfig::new(w[0], w[1]).init(device))
            .collect();
        Self { convs, dense }
    }

    /// `mean (o − y)²`.
    pub fn loss(&self, x: &Inputs, y: Tensor<2>) -> Tensor<1> {
        let mut h = match x {
            Inputs::Flat(x) => x.clone(),
            Inputs::Images(x) => {
                let maps = self.convs.iter().fold(x.clone(), |h, c| relu(c.forward(h)));
                maps.flatten(1, 3)
            }
        };
        let last = self.dense.len() - 1;
        for (i, l) in self.dense.iter().enumerate() {
            h = l.forward(h);
            if i < last {
                h = relu(h);
            }
        }
        (h - y).square().mean()
    }
}

/// A `bnn-burn` network of either architecture.
#[derive(Module, Debug)]
pub enum Bayesian {
    /// The MLP.
    Mlp(Bnn<bnn_burn::nets::MlpBody, Categorical>),
    /// LeNet5.
    LeNet5(Bnn<bnn_burn::nets::ConvBody, Categorical>),
}

impl Bayesian {
    /// `net` with `weights` in every layer.
    pub fn new(
        net: Net,
        weights: WeightConfig,
        device: &Device,
    ) -> Result<Self, bnn_burn::error::ConfigError> {
        Self::with_dropout(net, weights, 0.0, device)
    }

    /// `net` with `weights` in every layer and train-time dropout of rate `dropout` on the
    /// hidden units of its dense layers ([`MlpConfig::dropout`]).
    pub fn with_dropout(
        net: Net,
        weights: WeightConfig,
        dropout: f64,
        device: &Device,
    ) -> Result<Self, bnn_burn::error::ConfigError> {
        Ok(match net {
            Net::Mlp => Bayesian::Mlp(
                MlpConfig::new(784, vec![400, 400], 10)
                    .with_weights(weights)
                    .with_dropout(dropout)
                    .init(Categorical, device)?,
            ),
            Net::LeNet5 => {
                let mut config = ConvNetConfig::lenet5([1, 28, 28], 10).with_weights(weights);
                config.dense.dropout = dropout;
                Bayesian::LeNet5(config.init(Categorical, device)?)
            }
        })
    }

    /// The same network with its posterior as its prior
    /// ([`bnn_burn::nets::Bnn::with_posterior_as_prior`]).
    ///
    /// # Errors
    /// When a layer has point weights.
    pub fn with_posterior_as_prior(self) -> Result<Self, bnn_burn::error::ConfigError> {
        Ok(match self {
            Bayesian::Mlp(m) => Bayesian::Mlp(m.with_posterior_as_prior()?),
            Bayesian::LeNet5(m) => Bayesian::LeNet5(m.with_posterior_as_prior()?),
        })
    }

    /// `mean (o − y)² + KL/N` of one posterior draw, the KL from the same evaluation of the
    /// posteriors as the forward pass; on the fused kernels the KL's gradient is folded into the
    /// sampling kernels, as the training loop does for the ELBO.
    pub fn loss(&self, x: &Inputs, y: Tensor<2>, kernels: Kernels) -> Tensor<1> {
        let mut pass = Pass::train(1, false).with_kernels(kernels);
        if kernels == Kernels::Fused {
            pass = pass.fold_kl(1.0 / N_TRAIN);
        }
        let out = match (self, x) {
            (Bayesian::Mlp(m), Inputs::Flat(x)) => forward(m, x.clone(), &mut pass),
            (Bayesian::LeNet5(m), Inputs::Images(x)) => forward(m, x.clone(), &mut pass),
            _ => unreachable!("inputs are made for their network"),
        };
        let (kl, _) = pass.into_terms(&out.device());
        (out - y).square().mean() + kl / N_TRAIN
    }
}

impl Bayesian {
    /// Black-box α (Depeweg 2019 eq. 3.15) over `draws` joint weight draws shared by the batch:
    /// `−(1/(αB)) Σ_n [logsumexp_k α(ℓ_nk − r_k/N) − ln K]` with `ℓ_nk = −Σ_j (o_nkj − y_nj)²`
    /// and the layers' per-draw `r_k = ln q(W_k) − ln p(W_k)`, through the library's objective.
    ///
    /// # Panics
    /// If the layers cannot give `r_k` (the method's weights must be drawn per sample).
    pub fn black_box_loss(
        &self,
        x: &Inputs,
        y: Tensor<2>,
        kernels: Kernels,
        draws: usize,
        alpha: f64,
    ) -> Tensor<1> {
        let mut pass = Pass::train(draws, true).with_kernels(kernels);
        let out = match (self, x) {
            (Bayesian::Mlp(m), Inputs::Flat(x)) => m.forward(x.clone(), &mut pass),
            (Bayesian::LeNet5(m), Inputs::Images(x)) => m.forward(x.clone(), &mut pass),
            _ => unreachable!("inputs are made for their network"),
        };
        let [s, b, k] = out.dims();
        let ll = (out - y.unsqueeze_dim::<3>(0).expand([s, b, k]))
            .square()
            .sum_dim(2)
            .squeeze_dim::<2>(2)
            .neg();
        let (kl, ratio) = pass.into_terms(&ll.device());
        let terms = StepTerms {
            log_likelihood: ll,
            kl: KlTerm::new(kl),
            local_kl: None,
            log_ratio: Some(
                ratio
                    .expect("weights drawn per sample")
                    .expect("a pass that asked for the ratio"),
            ),
            local_log_ratio: None,
        };
        let context = StepContext::new(0, N_TRAIN as usize, b);
        AlphaConfig::new()
            .with_alpha(alpha)
            .init()
            .expect("a valid α")
            .loss(terms, &context)
            .expect("black-box α folds no KL")
            .loss
    }
}

fn forward<B: Body>(model: &Bnn<B, Categorical>, x: B::Input, pass: &mut Pass) -> Tensor<2> {
    model.forward(x, pass).squeeze_dim(0)
}

/// A network of either architecture trained by moments as the bench trains BEDL-PAC
/// ([`crate::catalogue::Method::bedl_pac`]: the evidential head, `α = exp(f)`, CLT moments through
/// the body, 5 draws of the logits' moments, the PAC-Bayes objective of eq. 5.10) or DVI
/// ([`crate::catalogue::Method::dvi`] with MNIST's prior precision 100: the categorical head, CLT
/// moments, Taylor logits, the ELBO over the thesis's moment weights, whose KL clamps `ln σ²`).
#[derive(Module, Debug)]
pub enum MomentNet {
    /// The MLP, BEDL-PAC.
    Mlp(Bnn<bnn_burn::nets::MlpBody, Evidential>),
    /// LeNet5, BEDL-PAC.
    LeNet5(Bnn<bnn_burn::nets::ConvBody, Evidential>),
    /// The MLP, DVI.
    DviMlp(Bnn<bnn_burn::nets::MlpBody, Categorical>),
    /// LeNet5, DVI.
    DviLeNet5(Bnn<bnn_burn::nets::ConvBody, Categorical>),
}

impl MomentNet {
    /// `net` with BEDL-PAC's weights, head and moment configuration.
    pub fn bedl_pac(net: Net, device: &Device) -> Result<Self, bnn_burn::error::ConfigError> {
        let method = crate::catalogue::Method::bedl_pac();
        let head = || {
            method
                .class_likelihood
                .evidential()
                .expect("BEDL-PAC has an evidential head")
                .init()
        };
        Ok(match net {
            Net::Mlp => MomentNet::Mlp(
                method.with_moments(
                    MlpConfig::new(784, vec![400, 400], 10)
                        .with_weights(method.weights.clone())
                        .init(head(), device)?,
                )?,
            ),
            Net::LeNet5 => MomentNet::LeNet5(
                method.with_moments(
                    ConvNetConfig::lenet5([1, 28, 28], 10)
                        .with_weights(method.weights.clone())
                        .init(head(), device)?,
                )?,
            ),
        })
    }

    /// `net` with DVI's weights and moment configuration and the categorical head (MNIST's
    /// prior precision, 100).
    pub fn dvi(net: Net, device: &Device) -> Result<Self, bnn_burn::error::ConfigError> {
        let method = crate::catalogue::Method::dvi(100.0);
        Ok(match net {
            Net::Mlp => MomentNet::DviMlp(
                method.with_moments(
                    MlpConfig::new(784, vec![400, 400], 10)
                        .with_weights(method.weights.clone())
                        .init(Categorical, device)?,
                )?,
            ),
            Net::LeNet5 => MomentNet::DviLeNet5(
                method.with_moments(
                    ConvNetConfig::lenet5([1, 28, 28], 10)
                        .with_weights(method.weights.clone())
                        .init(Categorical, device)?,
                )?,
            ),
        })
    }

    /// The training loop's loss for one minibatch: the model's moment step under `objective`
    /// on `kernels`, requested as the training loop requests it (the KL's weight folded into
    /// the kernels where the objective has one).
    pub fn loss(
        &self,
        x: &Inputs,
        labels: Tensor<1, Int>,
        objective: &dyn Objective,
        kernels: Kernels,
    ) -> Tensor<1> {
        fn terms<M: Model<Target = Tensor<1, Int>>>(
            m: &M,
            input: M::Input,
            target: Tensor<1, Int>,
            request: StepRequest,
        ) -> StepTerms {
            let b = target.dims()[0];
            let rows = Tensor::<1, Int>::arange(0..b as i64, &target.device());
            let batch = Minibatch {
                input,
                target,
                rows,
                n_train: N_TRAIN as usize,
            };
            m.step(batch, request)
                .expect("the moment nets train by moments")
        }
        let context = StepContext::new(0, N_TRAIN as usize, labels.dims()[0]);
        let request = StepRequest {
            inference: Inference::Moments,
            weight_kl: objective.needs_weight_kl(),
            kl_fold: objective.kl_weight(&context),
            kernels,
            ..StepRequest::new(1)
        };
        let terms = match (self, x) {
            (MomentNet::Mlp(m), Inputs::Flat(x)) => terms(m, x.clone(), labels, request),
            (MomentNet::LeNet5(m), Inputs::Images(x)) => terms(m, x.clone(), labels, request),
            (MomentNet::DviMlp(m), Inputs::Flat(x)) => terms(m, x.clone(), labels, request),
            (MomentNet::DviLeNet5(m), Inputs::Images(x)) => terms(m, x.clone(), labels, request),
            _ => unreachable!("inputs are made for their network"),
        };
        objective
            .loss(terms, &context)
            .expect("the request folded the objective's own KL weight")
            .loss
    }
}
