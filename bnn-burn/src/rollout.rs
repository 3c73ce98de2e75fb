//! Roll-outs through a learned stochastic dynamics model (Depeweg 2019 §7.1, Alg. 1): `K`
//! joint weight draws of a BNN+LV held fixed over a roll-out, a fresh latent `z ~ N(0, γ)` and
//! noise `ε ~ N(0, Σ)` at every step, the network predicting the change `Δ = s_{t+1} − s_t`.
//! The draws are constants, so gradients of the roll-out's cost reach the policy only
//! (eqs. 7.13–7.16); [`Policy`] is the deterministic policy network of the thesis's code.

use crate::error::{Check, ConfigError};
use crate::layers::{LayerDraw, Pass};
use crate::nets::LatentRegressor;
use burn::config::Config;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Distribution, Tensor};

/// `K` networks of a BNN+LV dynamics model, held fixed over roll-outs.
#[derive(Debug, Clone)]
pub struct DynamicsDraw<'a> {
    model: &'a LatentRegressor,
    draws: Vec<LayerDraw>,
    noise_std: Tensor<3>,
}

impl<'a> DynamicsDraw<'a> {
    /// `k` joint draws of `model`'s weights (detached: the model is frozen), with its noise
    /// scale `Σ^{1/2}`. The model must be on the device the roll-outs run on (the trained
    /// model for a policy trained by gradients).
    pub fn new(model: &'a LatentRegressor, k: usize) -> Self {
        crate::device::uses_generator();
        let draws = model
            .net
            .joint_draws(k)
            .into_iter()
            .map(|d| LayerDraw {
                weight: d.weight.detach(),
                bias: d.bias.map(|b| b.detach()),
            })
            .collect();
        Self::with_draws(model, draws)
    }

    /// The roll-outs under given joint draws (one [`LayerDraw`] per layer, `[K, numel]` each):
    /// MCMC samples, or draws shared by several roll-outs.
    pub fn with_draws(model: &'a LatentRegressor, draws: Vec<LayerDraw>) -> Self {
        let noise_std = model.net.likelihood.noise_std().detach().unsqueeze::<3>();
        Self {
            model,
            draws,
            noise_std,
        }
    }

    /// The draws `K`.
    pub fn samples(&self) -> usize {
        self.draws.first().map_or(0, LayerDraw::samples)
    }

    /// The next states `s + f([s, a], z; W_k) + ε`, `[K, B, d_s]`, from states and actions
    /// `[K, B, ·]` (roll-out `k` under draw `k`).
    ///
    /// # Panics
    /// If the states and actions do not hold `K` draws of the same rows, or `[s, a]` is not the
    /// model's input, or the model does not predict `d_s` outputs.
    pub fn step(&self, states: Tensor<3>, actions: Tensor<3>) -> Tensor<3> {
        let [k, b, _] = states.dims();
        assert_eq!(
            k,
            self.samples(),
            "DynamicsDraw::step: {k} roll-outs for {} draws",
            self.samples()
        );
        let device = states.device();
        let z = self.model.prior_latents(k, b, &device);
        let x = Tensor::cat(vec![states.clone(), actions], 2);
        let delta = self.model.forward_each(x, z, &mut Pass::fixed(&self.draws));
        assert_eq!(
            delta.dims(),
            states.dims(),
            "DynamicsDraw::step: the model predicts {:?} for states {:?}",
            delta.dims(),
            states.dims()
        );
        crate::device::uses_generator();
        let eps = Tensor::<3>::random(delta.dims(), Distribution::Normal(0.0, 1.0), &device);
        states + delta + eps * self.noise_std.clone()
    }

    /// `UNFOLD` (Alg. 1): every start state `[B, d_s]` rolled out `T = horizon` steps under each
    /// of the `K` draws by `policy` (states `[K, B, d_s]` → actions `[K, B, d_a]`), and the cost
    /// `cost(s_{t+1})` (`[K, B, d_s]` → `[K, B]`) of every step: `[K, B, T]`, differentiable in
    /// the policy's parameters.
    pub fn unfold(
        &self,
        policy: impl Fn(Tensor<3>) -> Tensor<3>,
        start: Tensor<2>,
        horizon: usize,
        cost: impl Fn(&Tensor<3>) -> Tensor<2>,
    ) -> Tensor<3> {
        let [b, d] = start.dims();
        let k = self.samples();
        let mut s = start.unsqueeze_dim::<3>(0).expand([k, b, d]);
        let mut costs = Vec::with_capacity(horizon);
        for _ in 0..horizon {
            let a = policy(s.clone());
            s = self.step(s, a);
            costs.push(cost(&s).unsqueeze_dim::<3>(2));
        }
        Tensor::cat(costs, 2)
    }
}

/// Configuration of a [`Policy`]: a deterministic ReLU network whose tanh outputs are scaled
/// to the action box (the thesis's code: `[d_s, 20, 20, d_a]`).
#[derive(Config, Debug)]
pub struct PolicyConfig {
    /// State dimensions.
    pub d_state: usize,
    /// Hidden widths.
    pub hidden: Vec<usize>,
    /// Lower corner of the action box (its length is `d_a`).
    pub low: Vec<f64>,
    /// Upper corner of the action box.
    pub high: Vec<f64>,
}

impl PolicyConfig {
    /// The policy on `device`.
    ///
    /// # Errors
    /// No state dimension, a zero width, or an empty box or one with `low ≥ high`.
    pub fn init(&self, device: &Device) -> Result<Policy, ConfigError> {
        let check = Check("PolicyConfig");
        check.at_least_one("d_state", self.d_state)?;
        for &h in &self.hidden {
            check.at_least_one("hidden", h)?;
        }
        check.at_least_one("low", self.low.len())?;
        if self.low.len() != self.high.len()
            || self
                .low
                .iter()
                .zip(&self.high)
                .any(|(l, h)| !(l.is_finite() && h.is_finite() && l < h))
        {
            return Err(ConfigError {
                config: "PolicyConfig",
                field: "high",
                value: format!("low {:?}, high {:?}", self.low, self.high),
                expected: "finite bounds with low < high, one pair per action",
            });
        }
        let mut widths = vec![self.d_state];
        widths.extend(&self.hidden);
        widths.push(self.low.len());
        crate::device::uses_generator();
        let layers = widths
            .windows(2)
            .map(|w| LinearConfig::new(w[0], w[1]).init(device))
            .collect();
        let centre: Vec<f64> = self
            .low
            .iter()
            .zip(&self.high)
            .map(|(l, h)| (l + h) / 2.0)
            .collect();
        let half: Vec<f64> = self
            .low
            .iter()
            .zip(&self.high)
            .map(|(l, h)| (h - l) / 2.0)
            .collect();
        Ok(Policy {
            layers,
            centre,
            half,
        })
    }
}

/// A deterministic policy `a = c + h · tanh(g(s))` inside the box `[c − h, c + h]`.
#[derive(Module, Debug)]
pub struct Policy {
    /// The layers, ReLU between them.
    pub layers: Vec<Linear>,
    /// The box's centre.
    #[module(skip)]
    pub centre: Vec<f64>,
    /// The box's half-widths.
    #[module(skip)]
    pub half: Vec<f64>,
}

impl Policy {
    /// Actions `[.., d_a]` for states `[.., d_s]`.
    pub fn forward<const D: usize>(&self, states: Tensor<D>) -> Tensor<D> {
        let last = self.layers.len() - 1;
        let mut h = states;
        for (i, layer) in self.layers.iter().enumerate() {
            h = layer.forward(h);
            if i < last {
                h = burn::tensor::activation::relu(h);
            }
        }
        let device = h.device();
        let shape = |v: &[f64]| {
            let mut dims = [1usize; D];
            dims[D - 1] = v.len();
            Tensor::<1>::from_floats(
                v.iter().map(|x| *x as f32).collect::<Vec<_>>().as_slice(),
                &device,
            )
            .reshape(dims)
        };
        burn::tensor::activation::tanh(h) * shape(&self.half) + shape(&self.centre)
    }
}

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;
