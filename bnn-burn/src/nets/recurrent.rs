//! Recurrent bodies (Gal 2016 §3.4.2; Gal & Ghahramani 2016): an RNN, GRU or LSTM cell whose
//! input and recurrent weight matrices are Bayesian linear layers of any posterior family,
//! drawn once per sample and held along the sequence, with Gal's variational dropout: one mask
//! per sequence and sample on the input and one on the hidden state of every gate, the same at
//! every step and fresh in every pass. Prediction samples as every body does, so the
//! predictive decomposition is unchanged. More: the book's *Variational RNNs* page.

use super::{Bnn, Body};
use crate::batch::Sequences;
use crate::error::{Check, ConfigError, DataMismatch};
use crate::layers::{
    BayesianLinear, BayesianLinearConfig, LayerDraw, LayerInfo, LayerKind, LayerMapper,
    LayerVisitor, Pass, WeightConfig,
};
use crate::likelihood::Likelihood;
use burn::config::Config;
use burn::module::Module;
use burn::tensor::activation::sigmoid;
use burn::tensor::{Device, Distribution, Tensor};

/// The recurrent cell.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum Cell {
    /// `h' = tanh(W_x x + W_h h + b)` (Elman).
    Rnn,
    /// Gated recurrent unit (Cho et al. 2014): reset `r`, update `z`, candidate
    /// `n = tanh(W_xn x + b_n + r ⊙ W_hn h)`, `h' = (1 − z) ⊙ n + z ⊙ h`.
    Gru,
    /// Long short-term memory (Hochreiter & Schmidhuber 1997): gates `i, f, o = σ(·)`,
    /// candidate `g = tanh(·)`, `c' = f ⊙ c + i ⊙ g`, `h' = o ⊙ tanh(c')`.
    Lstm,
}

impl Cell {
    /// Gates `G` whose pre-activations the weight matrices stack: 1, 3 or 4.
    pub fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }
}

/// Configuration of a recurrent [`Bnn`]: a [`RecurrentBody`] whose last hidden state feeds the
/// head (one prediction per sequence: the next step of a forecaster, a class).
#[derive(Config, Debug)]
pub struct RecurrentConfig {
    /// Input width per step.
    pub d_input: usize,
    /// Hidden units `H`.
    pub d_hidden: usize,
    /// Target dimensions (regression) or classes (classification).
    pub d_output: usize,
    /// The cell.
    #[config(default = "Cell::Lstm")]
    pub cell: Cell,
    /// Weight model of the input, recurrent and head layers (the recurrent layer has no bias).
    #[config(default = "WeightConfig::new()")]
    pub weights: WeightConfig,
    /// Gal's variational dropout on the inputs: drop probability `p_x ∈ [0, 1)` of a mask per
    /// sequence, sample and gate, tied across steps. 0 (default): none.
    #[config(default = 0.0)]
    pub input_dropout: f64,
    /// The same on the hidden state entering every gate, `p_h ∈ [0, 1)`.
    #[config(default = 0.0)]
    pub hidden_dropout: f64,
}

/// A recurrent body: the input layer `[d_input, G·H]` (with the bias) and the recurrent layer
/// `[H, G·H]` of the cell's `G` gates, and the variational-dropout rates. Its features are the
/// hidden state after each sequence's last step, `[S, B, H]`.
#[derive(Module, Debug)]
pub struct RecurrentBody {
    /// Input weights `W_x` and bias, gates side by side.
    pub input: BayesianLinear,
    /// Recurrent weights `W_h`, gates side by side.
    pub recurrent: BayesianLinear,
    /// The cell.
    #[module(skip)]
    pub cell: Cell,
    /// Input dropout `p_x` ([`RecurrentConfig::input_dropout`]).
    #[module(skip)]
    pub input_dropout: f64,
    /// Hidden-state dropout `p_h` ([`RecurrentConfig::hidden_dropout`]).
    #[module(skip)]
    pub hidden_dropout: f64,
}

impl RecurrentConfig {
    /// The network with `likelihood`; its head maps the `H` hidden units to
    /// `d_output × outputs_per_target` outputs.
    pub fn init<L: Likelihood>(
        &self,
        likelihood: L,
        device: &Device,
    ) -> Result<Bnn<RecurrentBody, L>, ConfigError> {
        let check = Check("RecurrentConfig");
        check.at_least_one("d_input", self.d_input)?;
        check.at_least_one("d_hidden", self.d_hidden)?;
        check.at_least_one("d_output", self.d_output)?;
        check.probability("input_dropout", self.input_dropout)?;
        check.probability("hidden_dropout", self.hidden_dropout)?;
        let gates = self.cell.gates() * self.d_hidden;
        let input = BayesianLinearConfig::new(self.d_input, gates)
            .with_weights(self.weights.clone())
            .init(device)?;
        let recurrent = BayesianLinearConfig::new(self.d_hidden, gates)
            .with_weights(self.weights.clone().with_bias(crate::layers::Bias::None))
            .init(device)?;
        let head = BayesianLinearConfig::new(
            self.d_hidden,
            self.d_output * likelihood.outputs_per_target(),
        )
        .with_weights(self.weights.clone())
        .init(device)?;
        let body = RecurrentBody {
            input,
            recurrent,
            cell: self.cell,
            input_dropout: self.input_dropout,
            hidden_dropout: self.hidden_dropout,
        };
        Ok(Bnn::new(body, head, likelihood))
    }

    /// A regressor with a Gaussian likelihood of learned noise (σ₀ = 1 on standardised
    /// targets), as [`super::MlpConfig::init_regressor`].
    pub fn init_regressor(
        &self,
        device: &Device,
    ) -> Result<Bnn<RecurrentBody, crate::likelihood::GaussianLikelihood>, ConfigError> {
        let likelihood = crate::likelihood::GaussianLikelihoodConfig::new()
            .with_d_output(self.d_output)
            .init(device)?;
        self.init(likelihood, device)
    }
}

/// One pass's network over a batch of sequences, held along them: the weight draws
/// (`[S, G, d, H]`, `[S, G, H, H]`, bias `[S, G, 1, H]`), the variational-dropout masks
/// (`[S, G, B, d]`, `[S, G, B, H]`, scaled by `1/(1−p)`) and the state. [`RecurrentBody::begin`]
/// makes it; [`RecurrentState::step`] advances it, so a forecaster can feed its own
/// predictions back under the same draw ([`Bnn::forecast`]).
#[derive(Debug, Clone)]
pub struct RecurrentState {
    cell: Cell,
    w_x: Tensor<4>,
    b_x: Option<Tensor<4>>,
    w_h: Tensor<4>,
    z_x: Option<Tensor<4>>,
    z_h: Option<Tensor<4>>,
    /// The hidden state `[S, B, H]`.
    pub h: Tensor<3>,
    /// The LSTM's cell state `[S, B, H]` (`None` for the other cells).
    pub c: Option<Tensor<3>>,
}

impl RecurrentBody {
    /// Input width.
    pub fn d_input(&self) -> usize {
        self.input.shape()[0]
    }

    /// Hidden units `H`.
    pub fn d_hidden(&self) -> usize {
        self.recurrent.shape()[0]
    }

    /// The state at the start of `batch` sequences under `pass`: its `S` weight draws (from
    /// the pass's fixed draws when it holds them, otherwise drawn once here, with the layers'
    /// KL and log-ratio added to the pass), fresh dropout masks, and zero states.
    pub fn begin(&self, batch: usize, pass: &mut Pass, device: &Device) -> RecurrentState {
        let s = pass.samples();
        let (g, d, h) = (self.cell.gates(), self.d_input(), self.d_hidden());
        let input = hold(&self.input, s, pass);
        let recurrent = hold(&self.recurrent, s, pass);
        // Flat `[S, d·G·H]` (row-major `[d, G·H]`) → `[S, G, d, H]`.
        let per_gate = |w: Tensor<2>, rows: usize| {
            let draws = w.dims()[0];
            w.reshape([draws, rows, g, h])
                .swap_dims(1, 2)
                .expand([s, g, rows, h])
        };
        let w_x = per_gate(input.weight, d);
        let w_h = per_gate(recurrent.weight, h);
        let b_x = input.bias.map(|b| {
            let draws = b.dims()[0];
            b.reshape([draws, g, 1, h]).expand([s, g, 1, h])
        });
        let mask = |p: f64, width: usize| {
            (p > 0.0).then(|| {
                crate::device::uses_generator();
                Tensor::<4>::random(
                    [s, g, batch, width],
                    Distribution::Bernoulli(1.0 - p),
                    device,
                ) / (1.0 - p)
            })
        };
        RecurrentState {
            cell: self.cell,
            w_x,
            b_x,
            w_h,
            z_x: mask(self.input_dropout, d),
            z_h: mask(self.hidden_dropout, h),
            h: Tensor::zeros([s, batch, h], device),
            c: (self.cell == Cell::Lstm).then(|| Tensor::zeros([s, batch, h], device)),
        }
    }

    /// Every step's hidden state, `[S, B, T, H]` (after a sequence's end, mask 0, the state
    /// stays at its last step's), and the state after the last step.
    ///
    /// # Panics
    /// If the input width is not `d_input` or the mask is not `[B, T]`.
    pub fn run(&self, x: Sequences, pass: &mut Pass) -> (Tensor<4>, RecurrentState) {
        self.assert_input(&x);
        let [b, t, _] = x.dims();
        let mut state = self.begin(b, pass, &x.values.device());
        let projected = state.project(x.values.unsqueeze_dim(0));
        let [s, g, _, _, h] = projected.dims();
        let mut states = Vec::with_capacity(t);
        for k in 0..t {
            let xk = projected.clone().narrow(3, k, 1).reshape([s, g, b, h]);
            let mk = x.mask.clone().narrow(1, k, 1).reshape([b]);
            states.push(state.advance(xk, Some(mk)));
        }
        (Tensor::stack(states, 2), state)
    }

    fn assert_input(&self, x: &Sequences) {
        if let Err(e) = self.check_input(x) {
            panic!("RecurrentBody: {e}");
        }
    }
}

/// The layer's `S` weight draws for a whole sequence: the pass's fixed draw, or a fresh one
/// whose KL (and, when the pass wants it, `ln q(w) − ln p(w)`) goes to the pass.
fn hold(layer: &BayesianLinear, samples: usize, pass: &mut Pass) -> LayerDraw {
    if let Some(draw) = pass.next_draw() {
        return draw.clone();
    }
    let params = &layer.params;
    let draw = params.draws(samples);
    if pass.collects_kl() {
        pass.add_kl(params.kl_on(pass.kernels()));
    }
    if pass.wants_log_ratio() {
        match params.log_q(&draw) {
            Ok(log_q) => pass.add_log_ratio(log_q - params.log_prior(&draw)),
            Err(why) => pass.fail(why),
        }
    }
    draw
}

impl RecurrentState {
    /// Inputs `[S or 1, B, T, d]` through the masked input weights: `[S, G, B, T, H]`.
    fn project(&self, x: Tensor<4>) -> Tensor<5> {
        let [s, g, d, h] = self.w_x.dims();
        let [_, b, t, _] = x.dims();
        let x = x.unsqueeze_dim::<5>(1);
        let x = match &self.z_x {
            Some(z) => x * z.clone().unsqueeze_dim::<5>(3),
            None => x.expand([s, g, b, t, d]),
        };
        let mut y = x.reshape([s, g, b * t, d]).matmul(self.w_x.clone());
        if let Some(bias) = &self.b_x {
            y = y + bias.clone();
        }
        y.reshape([s, g, b, t, h])
    }

    /// One step on inputs `[S or 1, B, d]` of every sequence: the new hidden state `[S, B, H]`.
    pub fn step(&mut self, x: Tensor<3>) -> Tensor<3> {
        let [s, g, _, h] = self.w_x.dims();
        let b = x.dims()[1];
        let projected = self.project(x.unsqueeze_dim(2)).reshape([s, g, b, h]);
        self.advance(projected, None)
    }

    /// The cell's update from the projected inputs `[S, G, B, H]`; where `mask [B]` is 0 the
    /// state is kept.
    fn advance(&mut self, x: Tensor<4>, mask: Option<Tensor<1>>) -> Tensor<3> {
        let [s, g, b, h] = x.dims();
        let hidden = self.h.clone().unsqueeze_dim::<4>(1);
        let hidden = match &self.z_h {
            Some(z) => hidden * z.clone(),
            None => hidden.expand([s, g, b, h]),
        };
        let r = hidden.matmul(self.w_h.clone());
        let gate = |t: &Tensor<4>, k: usize| t.clone().narrow(1, k, 1).reshape([s, b, h]);
        let (h_new, c_new) = match self.cell {
            Cell::Rnn => ((gate(&x, 0) + gate(&r, 0)).tanh(), None),
            Cell::Gru => {
                let reset = sigmoid(gate(&x, 0) + gate(&r, 0));
                let update = sigmoid(gate(&x, 1) + gate(&r, 1));
                let candidate = (gate(&x, 2) + reset * gate(&r, 2)).tanh();
                let h = candidate.clone() + update * (self.h.clone() - candidate);
                (h, None)
            }
            Cell::Lstm => {
                let pre = x + r;
                let c = self.c.clone().expect("an LSTM state holds its cell state");
                let c = sigmoid(gate(&pre, 1)) * c + sigmoid(gate(&pre, 0)) * gate(&pre, 2).tanh();
                (sigmoid(gate(&pre, 3)) * c.clone().tanh(), Some(c))
            }
        };
        let keep = |new: Tensor<3>, old: Tensor<3>| match &mask {
            Some(m) => {
                let m = m.clone().reshape([1, b, 1]);
                old.clone() + (new - old) * m
            }
            None => new,
        };
        self.h = keep(h_new, self.h.clone());
        if let (Some(new), Some(old)) = (c_new, self.c.take()) {
            self.c = Some(keep(new, old));
        }
        self.h.clone()
    }
}

impl Body for RecurrentBody {
    type Input = Sequences;

    fn features(&self, x: Sequences, pass: &mut Pass) -> Tensor<3> {
        self.run(x, pass).1.h
    }

    fn feature_dim(&self) -> usize {
        self.d_hidden()
    }

    /// Point weights without variational dropout: one draw is the whole posterior.
    fn is_point(&self) -> bool {
        self.input_dropout == 0.0
            && self.hidden_dropout == 0.0
            && self.input.params.is_point()
            && self.recurrent.params.is_point()
    }

    fn check_input(&self, x: &Sequences) -> Result<(), DataMismatch> {
        let [b, t, d] = x.dims();
        if d != self.d_input() || t == 0 {
            return Err(DataMismatch::Shape {
                part: "inputs",
                expected: vec![t.max(1), self.d_input()],
                found: vec![t, d],
            });
        }
        if x.mask.dims() != [b, t] {
            return Err(DataMismatch::Shape {
                part: "sequence mask",
                expected: vec![t],
                found: x.mask.dims()[1..].to_vec(),
            });
        }
        Ok(())
    }

    fn visit_layers<V: LayerVisitor>(&self, visitor: &mut V) {
        for (index, layer) in [&self.input, &self.recurrent].into_iter().enumerate() {
            let info = LayerInfo {
                index,
                kind: LayerKind::Dense,
            };
            visitor.visit(info, &layer.params);
        }
    }

    fn map_layers<M: LayerMapper>(mut self, mapper: &mut M) -> Result<Self, ConfigError> {
        for (index, layer) in [&mut self.input, &mut self.recurrent]
            .into_iter()
            .enumerate()
        {
            let info = LayerInfo {
                index,
                kind: LayerKind::Dense,
            };
            layer.params = mapper.map(info, layer.params.clone())?;
        }
        Ok(self)
    }
}

impl<L: Likelihood> Bnn<RecurrentBody, L> {
    /// `samples` forecasts of `horizon` steps after each context sequence: the head's outputs
    /// `[S, B, horizon, k]` (the likelihood's parameters per step). Each sample is one network
    /// (weights, head and dropout masks drawn once) run over the context, then fed its own
    /// predicted mean, the head's first `d_input` outputs, as the next input.
    ///
    /// # Panics
    /// If the context does not fit the body, `samples` or `horizon` is 0, or the head has
    /// fewer outputs than the body has inputs.
    pub fn forecast(&self, context: Sequences, horizon: usize, samples: usize) -> Tensor<4> {
        let d = self.body.d_input();
        let [_, k] = self.head.shape();
        assert!(
            k >= d,
            "forecast: a head of {k} outputs cannot feed {d} inputs back"
        );
        self.forecast_with(context, horizon, samples, |y| y.narrow(2, 0, d))
    }

    /// [`Self::forecast`] with `next` turning each step's head outputs `[S, B, k]` into the
    /// next inputs `[S, B, d_input]` (e.g. a draw of the likelihood's noise added to the
    /// mean: ancestral sampling of a stochastic process).
    ///
    /// # Panics
    /// If the context does not fit the body, `samples` or `horizon` is 0, or `next` returns
    /// another shape.
    pub fn forecast_with(
        &self,
        context: Sequences,
        horizon: usize,
        samples: usize,
        mut next: impl FnMut(Tensor<3>) -> Tensor<3>,
    ) -> Tensor<4> {
        assert!(
            samples > 0 && horizon > 0,
            "forecast: {samples} samples over {horizon} steps"
        );
        let mut pass = Pass::predict(samples);
        let (_, mut state) = self.body.run(context, &mut pass);
        let head = [self.head.params.draws(samples)];
        let mut outputs = Vec::with_capacity(horizon);
        for _ in 0..horizon {
            let y = self.head.run(state.h.clone(), &mut Pass::fixed(&head));
            let x = next(y.clone());
            let [s, b, _] = y.dims();
            assert_eq!(
                x.dims(),
                [s, b, self.body.d_input()],
                "forecast: the next inputs"
            );
            state.step(x);
            outputs.push(y);
        }
        Tensor::stack(outputs, 2)
    }
}

#[cfg(test)]
#[path = "recurrent_tests.rs"]
mod tests;
