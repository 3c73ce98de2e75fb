//! Normalizing flows on a Gaussian base (Brack 2022 §3, Table 5.1): `θ = f_K ∘ … ∘ f_1(z₀)`,
//! `z₀ ~ q₀`, `ln q(θ) = ln q₀(z₀) − Σ_k ln |det ∂f_k/∂z|`. Planar and radial flows (Rezende &
//! Mohamed 2015 eqs. 10–14) and inverse-autoregressive flows (Kingma et al. 2016, their gated
//! update) whose gate and shift come from a MADE (Germain et al. 2015), the order reversed
//! between steps.

use super::family::FlatFamily;
use crate::error::{Check, ConfigError};
use crate::posterior::{MeanFieldConfig, MeanFieldPosterior, ScaleInit, Unsupported};
use crate::special::softplus;
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Distribution, Tensor};

/// The kind of each flow step.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum FlowKind {
    /// `f(z) = z + û tanh(wᵀz + b)`, `û` constrained so that `f` is invertible.
    Planar,
    /// `f(z) = z + β (z − z₀)/(α + ‖z − z₀‖)`, `α > 0`, `β ≥ −α`.
    Radial,
    /// `f(z) = σ ⊙ z + (1 − σ) ⊙ m`, `σ = sigmoid(s)`, `(m, s)` from a MADE with two hidden
    /// layers of `z`'s earlier entries (Kingma et al. 2016's numerically stable step).
    Iaf {
        /// Width of each of the MADE's two hidden layers.
        hidden: usize,
    },
}

impl FlowKind {
    /// The name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::Planar => "planar",
            Self::Radial => "radial",
            Self::Iaf { .. } => "IAF",
        }
    }
}

/// A stack of `steps` flows of one kind on a mean-field Gaussian base.
#[derive(Config, Debug, PartialEq)]
pub struct FlowConfig {
    /// The kind of every step.
    pub kind: FlowKind,
    /// The number of steps `K`.
    pub steps: usize,
    /// The base's initial scale (`ρ₀ = 0`: σ ≈ 0.69).
    #[config(default = "ScaleInit::new().with_rho(0.0).with_rho_std(0.0)")]
    pub base_scale: ScaleInit,
    /// The standard deviation of the steps' random initial parameters.
    #[config(default = 0.1)]
    pub init_std: f64,
}

impl FlowConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = Check("FlowConfig");
        check.at_least_one("steps", self.steps)?;
        check.non_negative("init_std", self.init_std)?;
        if let FlowKind::Iaf { hidden } = self.kind {
            check.at_least_one("kind.hidden", hidden)?;
        }
        self.base_scale.validate("FlowConfig")
    }

    /// The flow over `dim` entries on `device`, the base centred on zero.
    ///
    /// # Errors
    /// When a field is out of range, or an IAF has `dim < 2`.
    pub fn init(&self, dim: usize, device: &Device) -> Result<Flow, ConfigError> {
        self.validate()?;
        if matches!(self.kind, FlowKind::Iaf { .. }) && dim < 2 {
            return Err(ConfigError {
                config: "FlowConfig",
                field: "kind",
                value: format!("Iaf over {dim} entry"),
                expected: "a flow other than IAF for one entry (an autoregressive step needs two)",
            });
        }
        let base = super::family::flat_at_zero(
            &MeanFieldConfig::new().with_scale(self.base_scale),
            dim,
            device,
        )?;
        crate::device::uses_generator();
        let normal = |shape: [usize; 1]| {
            Tensor::<1>::random(shape, Distribution::Normal(0.0, self.init_std), device)
        };
        let steps = (0..self.steps)
            .map(|k| match self.kind {
                FlowKind::Planar => FlowStep::Planar(Planar {
                    u: Param::from_tensor(normal([dim])),
                    w: Param::from_tensor(normal([dim])),
                    b: Param::from_tensor(Tensor::zeros([1], device)),
                }),
                FlowKind::Radial => FlowStep::Radial(Radial {
                    z0: Param::from_tensor(normal([dim])),
                    alpha: Param::from_tensor(Tensor::zeros([1], device)),
                    beta: Param::from_tensor(Tensor::zeros([1], device)),
                }),
                FlowKind::Iaf { hidden } => FlowStep::Iaf(Iaf::init(
                    dim,
                    hidden,
                    k % 2 == 1,
                    (self.init_std, self.steps),
                    device,
                )),
            })
            .collect();
        Ok(Flow { base, steps })
    }
}

/// A normalizing flow: a mean-field base and its steps.
#[derive(Module, Debug)]
pub struct Flow {
    /// The base `q₀`.
    pub base: MeanFieldPosterior<1>,
    /// The steps, applied in order.
    pub steps: Vec<FlowStep>,
}

/// One step of a [`Flow`].
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum FlowStep {
    /// A planar step.
    Planar(Planar),
    /// A radial step.
    Radial(Radial),
    /// An inverse-autoregressive step.
    Iaf(Iaf),
}

impl FlowStep {
    /// `f(z)` and `ln |det ∂f/∂z|` per row, for `z [S, D]`.
    pub fn forward(&self, z: Tensor<2>) -> (Tensor<2>, Tensor<1>) {
        match self {
            Self::Planar(p) => p.forward(z),
            Self::Radial(r) => r.forward(z),
            Self::Iaf(i) => i.forward(z),
        }
    }
}

impl FlatFamily for Flow {
    fn dim(&self) -> usize {
        self.base.loc.mu.dims()[0]
    }

    fn sample_log_q(&self, n: usize) -> Result<(Tensor<2>, Tensor<1>), Unsupported> {
        let (mut z, mut log_q) = self.base.sample_log_q(n)?;
        for step in &self.steps {
            let (next, log_det) = step.forward(z);
            z = next;
            log_q = log_q - log_det;
        }
        Ok((z, log_q))
    }
}

/// A planar step (Rezende & Mohamed 2015 eq. 10, with their App. A.1 constraint
/// `û = u + (m(wᵀu) − wᵀu) w/‖w‖²`, `m(x) = −1 + softplus(x)`, so that `wᵀû > −1`).
#[derive(Module, Debug)]
pub struct Planar {
    /// `u`, `[D]`.
    pub u: Param<Tensor<1>>,
    /// `w`, `[D]`.
    pub w: Param<Tensor<1>>,
    /// `b`, `[1]`.
    pub b: Param<Tensor<1>>,
}

impl Planar {
    /// `f(z) = z + û tanh(wᵀz + b)`; `ln |det| = ln(1 + (1 − tanh²) wᵀû)`.
    pub fn forward(&self, z: Tensor<2>) -> (Tensor<2>, Tensor<1>) {
        let [s, d] = z.dims();
        let (u, w) = (self.u.val(), self.w.val());
        let wu = (w.clone() * u.clone()).sum();
        let w_sq = w.clone().square().sum();
        let u_hat = u + w.clone() * ((softplus(wu.clone()) - 1.0 - wu) / w_sq);
        let w_u_hat = (w.clone() * u_hat.clone()).sum().reshape([1, 1]);
        let a = z.clone().matmul(w.reshape([d, 1])) + self.b.val().reshape([1, 1]);
        let h = a.tanh();
        let slope = h.clone().square().neg() + 1.0;
        let out = z + h * u_hat.reshape([1, d]);
        let log_det = (slope * w_u_hat + 1.0).log().reshape([s]);
        (out, log_det)
    }
}

/// A radial step (Rezende & Mohamed 2015 eq. 14), `α = softplus(α')`, `β = −α + softplus(β')`
/// (their App. A.2: `β ≥ −α` keeps it invertible).
#[derive(Module, Debug)]
pub struct Radial {
    /// The centre `z₀`, `[D]`.
    pub z0: Param<Tensor<1>>,
    /// `α'`, `[1]`.
    pub alpha: Param<Tensor<1>>,
    /// `β'`, `[1]`.
    pub beta: Param<Tensor<1>>,
}

impl Radial {
    /// `f(z) = z + β h (z − z₀)`, `h = 1/(α + r)`, `r = ‖z − z₀‖`;
    /// `ln |det| = (D − 1) ln(1 + βh) + ln(1 + βh − βr h²)`.
    pub fn forward(&self, z: Tensor<2>) -> (Tensor<2>, Tensor<1>) {
        let [s, d] = z.dims();
        let alpha = softplus(self.alpha.val()).reshape([1, 1]);
        // α' = β' = 0 (the initial values) give α = ln 2 and β = 0: the identity.
        let beta = softplus(self.beta.val()).reshape([1, 1]) - alpha.clone();
        let diff = z.clone() - self.z0.val().reshape([1, d]);
        let r = diff.clone().square().sum_dim(1).sqrt();
        let h = (alpha + r.clone()).recip();
        let bh = beta.clone() * h.clone();
        let out = z + diff * bh.clone();
        let log_det =
            (bh.clone() + 1.0).log() * (d as f64 - 1.0) + (bh.clone() + 1.0 - bh * h * r).log();
        (out, log_det.reshape([s]))
    }
}

/// An inverse-autoregressive step: a MADE with two ReLU hidden layers gives the shift `m` and
/// gate logit `s` of each entry from the entries before it in the step's order.
#[derive(Module, Debug)]
pub struct Iaf {
    /// The MADE's weights `[in, out]`, input to output.
    pub weights: Vec<Param<Tensor<2>>>,
    /// Their biases.
    pub biases: Vec<Param<Tensor<1>>>,
    /// The autoregressive masks, row-major like the weights.
    #[module(skip)]
    masks: Vec<Vec<f32>>,
    /// Added to the gate logits: `ln(4K)` for a stack of `K`, so that the gates start at
    /// `4K/(4K + 1)` and the whole stack near the identity (their product ≈ e^{−1/4}).
    #[module(skip)]
    gate_bias: f64,
}

impl Iaf {
    /// A step over `dim` entries, order `1..D` (reversed when `reverse`), hidden width `hidden`;
    /// the output layer starts near zero, so the step starts near the identity.
    fn init(
        dim: usize,
        hidden: usize,
        reverse: bool,
        (init_std, steps): (f64, usize),
        device: &Device,
    ) -> Self {
        let input: Vec<usize> = (0..dim)
            .map(|i| if reverse { dim - i } else { i + 1 })
            .collect();
        let hidden_degrees: Vec<usize> = (0..hidden).map(|j| j % (dim - 1) + 1).collect();
        let output: Vec<usize> = input.iter().chain(&input).copied().collect();
        let mask = |from: &[usize], to: &[usize], strict: bool| -> Vec<f32> {
            let mut m = Vec::with_capacity(from.len() * to.len());
            for &a in from {
                for &b in to {
                    m.push(f32::from(u8::from(if strict { b > a } else { b >= a })));
                }
            }
            m
        };
        let masks = vec![
            mask(&input, &hidden_degrees, false),
            mask(&hidden_degrees, &hidden_degrees, false),
            mask(&hidden_degrees, &output, true),
        ];
        let shapes = [(dim, hidden), (hidden, hidden), (hidden, 2 * dim)];
        let weights = shapes
            .iter()
            .enumerate()
            .map(|(l, &(i, o))| {
                // He initialisation on the hidden layers; the output layer at `init_std/√H`,
                // so that every step starts near the identity whatever its width (a deep stack
                // of steps each scaling by e^O(1) overflows before the first update).
                let std = match l < 2 {
                    true => (2.0 / i as f64).sqrt(),
                    false => init_std / (hidden as f64).sqrt(),
                };
                Param::from_tensor(Tensor::random(
                    [i, o],
                    Distribution::Normal(0.0, std),
                    device,
                ))
            })
            .collect();
        let biases = shapes
            .iter()
            .map(|&(_, o)| Param::from_tensor(Tensor::zeros([o], device)))
            .collect();
        Self {
            weights,
            biases,
            masks,
            gate_bias: (4.0 * steps as f64).ln(),
        }
    }

    /// `f(z) = σ ⊙ z + (1 − σ) ⊙ m`, `σ = sigmoid(s + ln 4K)`; `ln |det| = Σ_i ln σ_i`.
    pub fn forward(&self, z: Tensor<2>) -> (Tensor<2>, Tensor<1>) {
        let [s, d] = z.dims();
        let device = z.device();
        let mut h = z.clone();
        for (l, (w, b)) in self.weights.iter().zip(&self.biases).enumerate() {
            let w = w.val();
            let [i, o] = w.dims();
            let mask = Tensor::<1>::from_floats(self.masks[l].as_slice(), &device).reshape([i, o]);
            h = h.matmul(w * mask) + b.val().reshape([1, o]);
            if l + 1 < self.weights.len() {
                h = relu(h);
            }
        }
        let shift = h.clone().slice([0..s, 0..d]);
        // ln σ = −softplus(−(s + b)), stable for logits of either sign.
        let log_gate = softplus((h.slice([0..s, d..2 * d]) + self.gate_bias).neg()).neg();
        let gate = log_gate.clone().exp();
        let out = gate.clone() * z + (gate.neg() + 1.0) * shift;
        (out, log_gate.sum_dim(1).reshape([s]))
    }
}
