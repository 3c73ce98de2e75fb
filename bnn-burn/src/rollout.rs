//! Roll-outs through a learned stochastic dynamics model (Depeweg 2019 §7.1, Alg. 1): `K`
//! joint weight draws of a BNN+LV held fixed over a roll-out, a fresh latent `z ~ N(0, γ)` and
//! noise `ε ~ N(0, Σ)` at every step, the network predicting the change `Δ = s_{t+1} − s_t`.
//! The draws are constants, so gradients of the roll-out's cost reach the policy only
//! (eqs. 7.13–7.16): [`policy_search`] trains the deterministic [`Policy`] by them;
//! [`risk_sensitive_cost`] weighs epistemic against aleatoric risk (eqs. 7.31–7.33).

use crate::error::{Check, ConfigError};
use crate::layers::{Activation, LayerDraw, Pass};
use crate::nets::{LatentRegressor, Regressor};
use crate::posthoc::Ensemble;
use burn::config::Config;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Distribution, Tensor};

/// A learned dynamics model that roll-outs can draw from: `K` networks held fixed over a
/// roll-out, each predicting the change of state (Depeweg 2019 §7.1 and its baselines, §7.1.3).
pub trait Dynamics {
    /// `k` networks for `k` roll-outs, off the model's graph (the model is frozen).
    fn dynamics(&self, k: usize) -> DynamicsDraw<'_>;
}

/// BNN+LV (eq. 7.7): joint weight draws, a fresh latent and noise every step.
impl Dynamics for LatentRegressor {
    fn dynamics(&self, k: usize) -> DynamicsDraw<'_> {
        DynamicsDraw::new(self, k)
    }
}

/// A BNN without latents (Table 7.1's BNN column), or a point network (the MLP column, with
/// the validation error as its fixed noise): weight draws and Gaussian noise.
impl Dynamics for Regressor {
    fn dynamics(&self, k: usize) -> DynamicsDraw<'_> {
        DynamicsDraw::of_net(self, k)
    }
}

/// An ensemble (eq. 7.27): a member drawn uniformly for every roll-out, its posterior mean.
impl Dynamics for Ensemble<Regressor> {
    fn dynamics(&self, k: usize) -> DynamicsDraw<'_> {
        DynamicsDraw::of_members(self.members(), k)
    }
}

/// A dynamics model trained on standardised data, rolled out in the system's units
/// ([`DynamicsDraw::with_scales`]).
#[derive(Debug, Clone)]
pub struct Standardised<M> {
    /// The model, on standardised inputs and changes.
    pub model: M,
    /// Mean and std of each input column of `[s, a]`.
    pub x: (Vec<f64>, Vec<f64>),
    /// Mean and std of each change `Δs`.
    pub y: (Vec<f64>, Vec<f64>),
}

impl<M: Dynamics> Dynamics for Standardised<M> {
    fn dynamics(&self, k: usize) -> DynamicsDraw<'_> {
        self.model
            .dynamics(k)
            .with_scales(&self.x.0, &self.x.1, &self.y.0, &self.y.1)
    }
}

/// `K` networks of a dynamics model, held fixed over roll-outs.
#[derive(Debug, Clone)]
pub struct DynamicsDraw<'a> {
    net: &'a Regressor,
    latent: Option<&'a LatentRegressor>,
    /// `M` draws, each held for `repeat` roll-outs in a row (`K = M · repeat`).
    draws: Vec<LayerDraw>,
    repeat: usize,
    /// `[1, 1, d_s]`, or `[M, 1, d_s]` for one noise per draw.
    noise_std: Tensor<3>,
    bounds: Option<(Tensor<3>, Tensor<3>)>,
    /// Inputs' mean and std, outputs' mean and std, `[1, 1, ·]` each.
    scales: Option<[Tensor<3>; 4]>,
}

impl<'a> DynamicsDraw<'a> {
    /// `k` joint draws of a BNN+LV's weights (detached: the model is frozen), with its noise
    /// scale `Σ^{1/2}` and a fresh `z ~ N(0, γ)` per step. The model must be on the device the
    /// roll-outs run on (the trained model for a policy trained by gradients).
    pub fn new(model: &'a LatentRegressor, k: usize) -> Self {
        let mut draw = Self::of_net(&model.net, k);
        draw.latent = Some(model);
        draw
    }

    /// `k` joint draws of a network without latents, with its noise.
    pub fn of_net(net: &'a Regressor, k: usize) -> Self {
        crate::device::uses_generator();
        // Drawn off the autodiff graph: draws of the tracked parameters, detached but never
        // backpropagated, would pile up in the graph step after step.
        let draws = net.clone().valid().joint_draws(k);
        Self::with_draws(net, draws)
    }

    /// Roll-out `k` under member `m_k ~ U{1..M}`'s posterior mean and noise. The members share
    /// one architecture.
    ///
    /// # Panics
    /// If `members` is empty or the members' layers differ in shape.
    pub fn of_members(members: &'a [Regressor], k: usize) -> Self {
        assert!(!members.is_empty(), "DynamicsDraw::of_members: no members");
        let device = members[0].devices()[0].clone();
        crate::device::uses_generator();
        let picks = Tensor::<1>::random(
            [k],
            Distribution::Uniform(0.0, members.len() as f64),
            &device,
        );
        let picks: Vec<usize> = crate::host::to_vec(picks)
            .iter()
            .map(|u| (*u as usize).min(members.len() - 1))
            .collect();
        let index = crate::host::labels(&picks, &device.clone().inner());
        let plain: Vec<_> = members.iter().map(|m| m.clone().valid()).collect();
        let stacked: Vec<Vec<LayerDraw>> = plain.iter().map(|m| m.mean_draw()).collect();
        let layers = stacked[0].len();
        let draws = (0..layers)
            .map(|l| {
                let weight = Tensor::cat(stacked.iter().map(|d| d[l].weight.clone()).collect(), 0);
                let bias = stacked[0][l].bias.as_ref().map(|_| {
                    Tensor::cat(
                        stacked
                            .iter()
                            .map(|d| d[l].bias.clone().expect("the members share a layout"))
                            .collect(),
                        0,
                    )
                });
                LayerDraw {
                    weight: weight.select(0, index.clone()),
                    bias: bias.map(|b| b.select(0, index.clone())),
                }
            })
            .collect();
        let noise: Tensor<2> =
            Tensor::stack(plain.iter().map(|m| m.likelihood.noise_std()).collect(), 0);
        let noise = noise.select(0, index).unsqueeze_dim::<3>(1);
        let mut draw = Self::with_draws(&members[0], draws);
        draw.noise_std = constant(noise, device.is_autodiff());
        draw
    }

    /// The roll-outs under given joint draws of `net` (one [`LayerDraw`] per layer,
    /// `[K, numel]` each, off the graph): MCMC samples, or draws shared by several roll-outs.
    pub fn with_draws(net: &'a Regressor, draws: Vec<LayerDraw>) -> Self {
        let device = net.devices()[0].clone();
        let likelihood = net.likelihood.clone().valid();
        let noise_std = constant(likelihood.noise_std(), device.is_autodiff()).unsqueeze::<3>();
        Self {
            net,
            latent: None,
            draws: lift(draws, &device),
            repeat: 1,
            noise_std,
            bounds: None,
            scales: None,
        }
    }

    /// States clamped to the box `[low, high]` after every step: the system's known range (the
    /// river's banks and waterfall), which a model's draws may overstep.
    ///
    /// # Panics
    /// If the corners' lengths differ or `low > high` somewhere.
    pub fn with_state_box(mut self, low: &[f64], high: &[f64]) -> Self {
        assert!(
            low.len() == high.len() && low.iter().zip(high).all(|(l, h)| l <= h),
            "DynamicsDraw::with_state_box: low {low:?}, high {high:?}"
        );
        let device = self.noise_std.device();
        self.bounds = Some((row(low, &device), row(high, &device)));
        self
    }

    /// A model trained on standardised data: inputs `x` (`[s, a]` for a step) enter as
    /// `(x − m_x)/s_x` (latent columns as they are) and outputs (the change for a step) leave
    /// as `m_y + s_y · (f + ε)`, so roll-outs run in the system's units.
    ///
    /// # Panics
    /// If the means and stds differ in length or a scale is not positive (widths are checked
    /// at each step).
    pub fn with_scales(
        mut self,
        x_mean: &[f64],
        x_std: &[f64],
        y_mean: &[f64],
        y_std: &[f64],
    ) -> Self {
        assert!(
            x_mean.len() == x_std.len()
                && y_mean.len() == y_std.len()
                && x_std.iter().chain(y_std).all(|s| *s > 0.0),
            "DynamicsDraw::with_scales: means and positive stds of equal lengths (x: {} means, \
             {x_std:?}; y: {} means, {y_std:?})",
            x_mean.len(),
            y_mean.len()
        );
        let device = self.noise_std.device();
        self.scales = Some([
            row(x_mean, &device),
            row(x_std, &device),
            row(y_mean, &device),
            row(y_std, &device),
        ]);
        self
    }

    /// Each of the `M` draws held for `n` roll-outs in a row (roll-outs `m·n .. m·n + n` under
    /// draw `m`; `K = M·n`): eq. 7.33's `N` roll-outs per weight draw, which differ by their
    /// latents and noise only. The `n` roll-outs of a draw go through its network as one batch.
    ///
    /// # Panics
    /// If `n` is 0.
    pub fn repeated(mut self, n: usize) -> Self {
        assert!(n > 0, "DynamicsDraw::repeated: n = 0");
        self.repeat *= n;
        self
    }

    /// The roll-outs `K`: the draws times the roll-outs per draw.
    pub fn samples(&self) -> usize {
        self.draws.first().map_or(0, LayerDraw::samples) * self.repeat
    }

    /// Draws of the model's output `f(x; W_k) + ε` (a fresh `z` joins `x` for a BNN+LV)
    /// for inputs `[K, B, d_x]` in the system's units, through the scales if set: `[K, B, d_y]`,
    /// roll-out `k` under draw `k`. The building block of [`DynamicsDraw::step`] and of
    /// transitions of other forms ([`policy_search_with`]).
    ///
    /// # Panics
    /// If the inputs do not hold `K` draws' rows, or are not the model's input (with the
    /// scales' width when set).
    pub fn predict(&self, inputs: Tensor<3>) -> Tensor<3> {
        let [k, b, d_x] = inputs.dims();
        assert_eq!(
            k,
            self.samples(),
            "DynamicsDraw: {k} roll-outs for {} draws",
            self.samples()
        );
        let device = inputs.device();
        // Roll-outs `m·n + j` under draw `m`, as rows `j·B + b` of draw `m`'s batch.
        let (m, rows) = (k / self.repeat, self.repeat * b);
        let mut x = inputs.reshape([m, rows, d_x]);
        if let Some([mean, std, ..]) = &self.scales {
            let dims = x.dims();
            assert_eq!(
                mean.dims()[2],
                dims[2],
                "DynamicsDraw: input scales of {} columns for inputs of {}",
                mean.dims()[2],
                dims[2]
            );
            x = (x - mean.clone().expand(dims)) / std.clone().expand(dims);
        }
        if let Some(model) = self.latent {
            x = Tensor::cat(vec![x, model.prior_latents(m, rows, &device)], 2);
        }
        assert_eq!(
            x.dims()[2],
            self.net.body.d_input,
            "DynamicsDraw: inputs (and latents) of {} columns for a model on {}",
            x.dims()[2],
            self.net.body.d_input
        );
        let mut pass = Pass::fixed(&self.draws);
        let f = self
            .net
            .head
            .run(self.net.body.propagate(x, &mut pass), &mut pass);
        crate::device::uses_generator();
        let eps = Tensor::<3>::random(f.dims(), Distribution::Normal(0.0, 1.0), &device);
        let mut out = f + eps * self.noise_std.clone();
        if let Some([_, _, mean, std]) = &self.scales {
            let dims = out.dims();
            out = out * std.clone().expand(dims) + mean.clone().expand(dims);
        }
        let d_y = out.dims()[2];
        out.reshape([k, b, d_y])
    }

    /// The next states `s + f([s, a, z]; W_k) + ε` (no `z` without latents), `[K, B, d_s]`,
    /// from states and actions `[K, B, ·]` (roll-out `k` under draw `k`), clamped to the state
    /// box if one is set.
    ///
    /// # Panics
    /// As [`DynamicsDraw::predict`] for the inputs `[s, a]`, and if the model does not predict
    /// `d_s` outputs.
    pub fn step(&self, states: Tensor<3>, actions: Tensor<3>) -> Tensor<3> {
        let change = self.predict(Tensor::cat(vec![states.clone(), actions], 2));
        assert_eq!(
            change.dims(),
            states.dims(),
            "DynamicsDraw::step: the model predicts {:?} for states {:?}",
            change.dims(),
            states.dims()
        );
        let next = states + change;
        match &self.bounds {
            Some((low, high)) => {
                let dims = next.dims();
                next.max_pair(low.clone().expand(dims))
                    .min_pair(high.clone().expand(dims))
            }
            None => next,
        }
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
        self.unfold_with(policy, start, horizon, markov(cost))
    }

    /// [`DynamicsDraw::unfold`] with a transition of another form: `transition(self, s, a)`
    /// gives the next states and the step's cost `[K, B]` (e.g. a time-embedded state whose
    /// known parts move by the action and whose learned part by [`DynamicsDraw::predict`]).
    pub fn unfold_with(
        &self,
        policy: impl Fn(Tensor<3>) -> Tensor<3>,
        start: Tensor<2>,
        horizon: usize,
        transition: impl Fn(&Self, Tensor<3>, Tensor<3>) -> (Tensor<3>, Tensor<2>),
    ) -> Tensor<3> {
        let [b, d] = start.dims();
        let k = self.samples();
        let mut s = start.unsqueeze_dim::<3>(0).expand([k, b, d]);
        let mut costs = Vec::with_capacity(horizon);
        for _ in 0..horizon {
            let a = policy(s.clone());
            let (next, cost) = transition(self, s, a);
            s = next;
            costs.push(cost.unsqueeze_dim::<3>(2));
        }
        Tensor::cat(costs, 2)
    }
}

/// The Markov transition `s' = step(s, a)` with the cost `cost(s')`.
fn markov(
    cost: impl Fn(&Tensor<3>) -> Tensor<2>,
) -> impl Fn(&DynamicsDraw<'_>, Tensor<3>, Tensor<3>) -> (Tensor<3>, Tensor<2>) {
    move |draw, s, a| {
        let next = draw.step(s, a);
        let c = cost(&next);
        (next, c)
    }
}

/// `v` as a `[1, …, 1, len]` tensor on `device`, to broadcast over the last axis.
fn row<const D: usize>(v: &[f64], device: &Device) -> Tensor<D> {
    let mut dims = [1usize; D];
    dims[D - 1] = v.len();
    Tensor::<1>::from_floats(
        v.iter().map(|x| *x as f32).collect::<Vec<_>>().as_slice(),
        device,
    )
    .reshape(dims)
}

/// Draws taken off the graph, as constants on `device` (autodiff or not).
fn lift(draws: Vec<LayerDraw>, device: &Device) -> Vec<LayerDraw> {
    let autodiff = device.is_autodiff();
    draws
        .into_iter()
        .map(|d| LayerDraw {
            weight: constant(d.weight, autodiff),
            bias: d.bias.map(|b| constant(b, autodiff)),
        })
        .collect()
}

/// `t` (off the graph) as a constant on the autodiff device when `autodiff`.
fn constant<const D: usize>(t: Tensor<D>, autodiff: bool) -> Tensor<D> {
    match autodiff {
        true => Tensor::from_inner(t),
        false => t,
    }
}

/// Configuration of a [`Policy`]: a deterministic network (ReLU by default) whose tanh outputs
/// are scaled to the action box (the thesis's code: `[d_s, 20, 20, d_a]`).
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
    /// Activation between the hidden layers.
    #[config(default = "Activation::Relu")]
    pub activation: Activation,
    /// Mean and std of each state dimension: states enter as `(s − m)/sd` (a system whose
    /// states differ in scale by orders); `None`: as they are.
    #[config(default = "None")]
    pub state_scale: Option<(Vec<f64>, Vec<f64>)>,
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
        if let Some((mean, std)) = &self.state_scale
            && (mean.len() != self.d_state
                || std.len() != self.d_state
                || !mean.iter().all(|m| m.is_finite())
                || !std.iter().all(|s| s.is_finite() && *s > 0.0))
        {
            return Err(ConfigError {
                config: "PolicyConfig",
                field: "state_scale",
                value: format!("{} means, stds {std:?}", mean.len()),
                expected: "d_state finite means and d_state positive, finite stds",
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
            activation: self.activation,
            state_scale: self.state_scale.clone(),
        })
    }
}

/// A deterministic policy `a = c + h · tanh(g(s))` inside the box `[c − h, c + h]`.
#[derive(Module, Debug)]
pub struct Policy {
    /// The layers, the activation between them.
    pub layers: Vec<Linear>,
    /// The box's centre.
    #[module(skip)]
    pub centre: Vec<f64>,
    /// The box's half-widths.
    #[module(skip)]
    pub half: Vec<f64>,
    /// Activation between the hidden layers.
    #[module(skip)]
    pub activation: Activation,
    /// Mean and std the states are standardised by, if any.
    #[module(skip)]
    pub state_scale: Option<(Vec<f64>, Vec<f64>)>,
}

impl Policy {
    /// Actions `[.., d_a]` for states `[.., d_s]`.
    pub fn forward<const D: usize>(&self, states: Tensor<D>) -> Tensor<D> {
        let last = self.layers.len() - 1;
        let mut h = match &self.state_scale {
            Some((mean, std)) => {
                let device = states.device();
                (states - row::<D>(mean, &device)) / row::<D>(std, &device)
            }
            None => states,
        };
        for (i, layer) in self.layers.iter().enumerate() {
            h = layer.forward(h);
            if i < last {
                h = self.activation.forward(h);
            }
        }
        let device = h.device();
        burn::tensor::activation::tanh(h) * row::<D>(&self.half, &device)
            + row::<D>(&self.centre, &device)
    }
}

/// Settings of [`policy_search`] (Depeweg 2019 Alg. 1; the thesis's wet-chicken run: `T = 5`,
/// `K = 20`, 10 start states, 100 epochs, Adam at 10⁻⁵).
#[derive(Config, Debug)]
pub struct PolicySearchConfig {
    /// Roll-out steps `T`.
    pub horizon: usize,
    /// Passes over the start states; one step per minibatch.
    pub epochs: usize,
    /// Start states per step, drawn uniformly from the given ones.
    #[config(default = 10)]
    pub batch_size: usize,
    /// Weight draws `K` per step (a fresh set every step).
    #[config(default = 20)]
    pub samples: usize,
    /// Adam's learning rate.
    #[config(default = 1e-3)]
    pub learning_rate: f64,
    /// The gradients' global norm is clipped to this (the reference code: 10); `None`: no clip.
    #[config(default = "Some(10.0)")]
    pub clip_norm: Option<f64>,
    /// Seed of the start-state draws and of the device generator (draws, latents, noise).
    #[config(default = 0)]
    pub seed: u64,
    /// The states' box `(low, high)`, the roll-outs' states clamped to it after every step
    /// ([`DynamicsDraw::with_state_box`]); `None`: unbounded.
    #[config(default = "None")]
    pub state_box: Option<(Vec<f64>, Vec<f64>)>,
    /// The risk-sensitive cost of eq. 7.31 instead of the mean: `samples` weight draws `M`,
    /// each held for `rollouts` roll-outs `N`; `None`: Alg. 1's mean cost.
    #[config(default = "None")]
    pub risk: Option<RiskConfig>,
}

/// Weights of [`risk_sensitive_cost`] in a policy search (Depeweg 2019 §7.2).
#[derive(Config, Debug, PartialEq)]
pub struct RiskConfig {
    /// `β`, the weight of the epistemic risk (model bias).
    pub beta: f64,
    /// `γ`, the weight of the aleatoric risk (noise aversion).
    pub gamma: f64,
    /// Roll-outs `N` per weight draw (the thesis: 25).
    #[config(default = 25)]
    pub rollouts: usize,
}

/// What [`policy_search`] did: the mean roll-out cost of every epoch's steps, and the steps
/// skipped for a cost or gradient that was not finite.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PolicySearchReport {
    /// Mean over the epoch's steps of `Σ_t` cost averaged over draws and start states.
    pub epoch_costs: Vec<f64>,
    /// Steps skipped by the NaN guard.
    pub skipped: usize,
    /// Wall seconds of every epoch.
    pub epoch_seconds: Vec<f64>,
}

/// Why a policy search could not run.
#[derive(Debug, thiserror::Error)]
pub enum PolicySearchError {
    /// A setting out of range (the field named).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Every step of an epoch was skipped: the roll-outs diverge.
    #[error("policy search: every step of epoch {epoch} had a non-finite cost or gradient")]
    Diverged {
        /// The epoch.
        epoch: usize,
    },
}

/// Alg. 1: Adam on the policy's parameters to minimise the mean over start states (a
/// minibatch of `starts [N, d_s]` per step) and `K` fresh weight draws of `Σ_t cost(s_t)`,
/// by backpropagation through the roll-outs of the frozen `model` (or, with
/// [`PolicySearchConfig::risk`], the risk-sensitive cost of eq. 7.31). A step whose cost or
/// gradient is not finite is skipped (the reference code's NaN guard); the gradients' global
/// norm is clipped.
///
/// # Errors
/// Settings out of range, no start states, or an epoch whose every step was skipped.
pub fn policy_search(
    model: &impl Dynamics,
    policy: Policy,
    starts: Tensor<2>,
    cost: impl Fn(&Tensor<3>) -> Tensor<2>,
    config: &PolicySearchConfig,
) -> Result<(Policy, PolicySearchReport), PolicySearchError> {
    policy_search_with(model, policy, starts, markov(cost), config)
}

/// [`policy_search`] through a transition of another form ([`DynamicsDraw::unfold_with`]):
/// `transition(draw, s, a)` gives the next states and the step's cost. The config's state box
/// applies to the draws' [`DynamicsDraw::step`].
///
/// # Errors
/// As [`policy_search`].
pub fn policy_search_with(
    model: &impl Dynamics,
    mut policy: Policy,
    starts: Tensor<2>,
    transition: impl Fn(&DynamicsDraw<'_>, Tensor<3>, Tensor<3>) -> (Tensor<3>, Tensor<2>),
    config: &PolicySearchConfig,
) -> Result<(Policy, PolicySearchReport), PolicySearchError> {
    use burn::optim::{AdamConfig, GradientsParams};
    let check = Check("PolicySearchConfig");
    check.at_least_one("horizon", config.horizon)?;
    check.at_least_one("epochs", config.epochs)?;
    check.at_least_one("batch_size", config.batch_size)?;
    check.at_least_one("samples", config.samples)?;
    check.positive("learning_rate", config.learning_rate)?;
    if let Some(c) = config.clip_norm {
        check.positive("clip_norm", c)?;
    }
    let [n, d] = starts.dims();
    if let Some((low, high)) = &config.state_box
        && (low.len() != d
            || high.len() != d
            || low
                .iter()
                .zip(high)
                .any(|(l, h)| l.partial_cmp(h).is_none_or(|o| o.is_gt())))
    {
        return Err(ConfigError {
            config: "PolicySearchConfig",
            field: "state_box",
            value: format!("low {low:?}, high {high:?}"),
            expected: "one bound pair per state dimension with low <= high",
        }
        .into());
    }
    check.at_least_one("starts", n)?;
    if let Some(r) = &config.risk
        && (r.rollouts < 2
            || config.samples < 2
            || !(r.beta.is_finite() && r.beta >= 0.0 && r.gamma.is_finite() && r.gamma >= 0.0))
    {
        return Err(ConfigError {
            config: "PolicySearchConfig",
            field: "risk",
            value: format!("{r:?} with {} samples", config.samples),
            expected: "finite β, γ ≥ 0, and at least 2 roll-outs and 2 samples",
        }
        .into());
    }
    // Small variances multiplied together underflow to subnormals, which x86 runs tens of
    // times slower: flush them, as training does.
    let _flushed = crate::device::SubnormalsFlushed::enter();
    let device = starts.device();
    crate::device::uses_generator();
    device.seed(config.seed);
    let mut rng = crate::host::HostNormals::new(config.seed);
    let mut optim = AdamConfig::new().init();
    let steps = n.div_ceil(config.batch_size);
    let mut report = PolicySearchReport {
        epoch_costs: Vec::with_capacity(config.epochs),
        skipped: 0,
        epoch_seconds: Vec::with_capacity(config.epochs),
    };
    for epoch in 0..config.epochs {
        let started = std::time::Instant::now();
        let mut costs = Vec::with_capacity(steps);
        for _ in 0..steps {
            let rows: Vec<usize> = (0..config.batch_size)
                .map(|_| ((rng.uniform() * n as f64) as usize).min(n - 1))
                .collect();
            let batch = starts
                .clone()
                .select(0, crate::host::labels(&rows, &device));
            let mut draw = model.dynamics(config.samples);
            if let Some(r) = &config.risk {
                draw = draw.repeated(r.rollouts);
            }
            if let Some((low, high)) = &config.state_box {
                draw = draw.with_state_box(low, high);
            }
            let unfolded =
                draw.unfold_with(|s| policy.forward(s), batch, config.horizon, &transition);
            let loss = match &config.risk {
                Some(r) => {
                    let [_, b, t] = unfolded.dims();
                    let c = unfolded.reshape([config.samples, r.rollouts, b, t]);
                    risk_sensitive_cost(c, r.beta, r.gamma)
                }
                None => unfolded.sum_dim(2).mean(),
            };
            let value = crate::host::to_vec(loss.clone())[0];
            let mut grads = GradientsParams::from_grads(loss.backward(), &policy);
            let norm = policy.gradient_norm(&grads);
            if !(value.is_finite() && norm.is_finite()) {
                report.skipped += 1;
                continue;
            }
            if let Some(c) = config.clip_norm.filter(|c| norm > *c) {
                grads = policy.scale_gradients(grads, c / norm);
            }
            costs.push(value);
            policy = optim.step(config.learning_rate, policy, grads);
        }
        if costs.is_empty() {
            return Err(PolicySearchError::Diverged { epoch });
        }
        report.epoch_costs.push(crate::metrics::mean(&costs));
        report.epoch_seconds.push(started.elapsed().as_secs_f64());
    }
    Ok((policy, report))
}

impl Policy {
    /// The global norm of the policy's gradients in `grads`.
    fn gradient_norm(&self, grads: &burn::optim::GradientsParams) -> f64 {
        let mut total = 0.0;
        for l in &self.layers {
            if let Some(g) = grads.get::<2>(l.weight.id) {
                total += crate::host::to_vec(g.square().sum())[0];
            }
            if let Some(g) = l.bias.as_ref().and_then(|b| grads.get::<1>(b.id)) {
                total += crate::host::to_vec(g.square().sum())[0];
            }
        }
        total.sqrt()
    }

    /// `grads` with the policy's gradients times `factor`.
    fn scale_gradients(
        &self,
        mut grads: burn::optim::GradientsParams,
        factor: f64,
    ) -> burn::optim::GradientsParams {
        for l in &self.layers {
            if let Some(g) = grads.remove::<2>(l.weight.id) {
                grads.register(l.weight.id, g * factor);
            }
            if let Some(b) = &l.bias
                && let Some(g) = grads.remove::<1>(b.id)
            {
                grads.register(b.id, g * factor);
            }
        }
        grads
    }
}

/// The risk-sensitive cost of Depeweg 2019 eq. 7.31, by the estimator of eq. 7.33 (its missing
/// "+" restored): for costs `C [M, N, B, T]` of `N` roll-outs under each of `M` weight draws
/// from `B` start states, `Σ_t [ mean C_t + √(β² Var_m(mean_n C_t) + γ² mean_m Var_n C_t) ]`,
/// averaged over the start states, `[1]` and differentiable. `β` weighs the epistemic risk
/// (an estimate of model bias, eq. 7.36), `γ` the aleatoric one; `β = γ = 0` is Alg. 1's
/// risk-neutral cost. Variances are the samples' (divided by `M − 1`, `N − 1`).
///
/// # Panics
/// If `M` or `N` is below 2.
pub fn risk_sensitive_cost(costs: Tensor<4>, beta: f64, gamma: f64) -> Tensor<1> {
    let [m, n, _, _] = costs.dims();
    assert!(
        m >= 2 && n >= 2,
        "risk_sensitive_cost: M = {m}, N = {n}: both at least 2"
    );
    let mean_n = costs.clone().mean_dim(1); // [M, 1, B, T]
    let mean = mean_n.clone().mean_dim(0); // [1, 1, B, T]
    let epistemic = (mean_n.clone() - mean.clone())
        .square()
        .sum_dim(0)
        .div_scalar((m - 1) as f64);
    let aleatoric = (costs - mean_n)
        .square()
        .sum_dim(1)
        .div_scalar((n - 1) as f64)
        .mean_dim(0);
    let spread = (epistemic * (beta * beta) + aleatoric * (gamma * gamma))
        .clamp_min(0.0)
        .add_scalar(1e-12)
        .sqrt();
    (mean + spread).sum_dim(3).mean()
}

/// Model bias, Depeweg 2019 eq. 7.34: `Σ_t (E_true[c_t] − E_model[c_t])²` for the mean cost
/// curves of the true system and of the model under one policy.
///
/// # Panics
/// If the curves differ in length.
pub fn model_bias(true_costs: &[f64], model_costs: &[f64]) -> f64 {
    assert_eq!(
        true_costs.len(),
        model_costs.len(),
        "model_bias: cost curves of different horizons"
    );
    true_costs
        .iter()
        .zip(model_costs)
        .map(|(a, b)| (a - b) * (a - b))
        .sum()
}

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;
