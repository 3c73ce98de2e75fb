//! Bayesian neural SDEs (Haußmann 2021 ch. 6): `dh = (f_θ(h, t) + γ∘r(h, t)) dt + G dW`
//! (eq. 6.5), a drift network over `[h, t]` beside an optional known drift, a constant
//! diagonal diffusion `G`. Paths by Euler–Maruyama, batched over samples × trajectories, each
//! sample under one joint draw of the network's weights held along its path
//! (`θ^s ~ p_φ(θ)`, reparameterised: gradients reach `φ`), with the path part of the process
//! KL (Lemma 1) accumulated on the way. More: the book's *Neural SDEs* page.

use crate::error::{Check, ConfigError};
use crate::host::HostNormals;
use crate::inference::{LogDensity, Minibatches};
use crate::layers::{FlatLayout, LayerDraw, Pass};
use crate::likelihood::Likelihood;
use crate::nets::{Bnn, MlpBody};
use crate::posterior::KlDivergence;
use burn::config::Config;
use burn::tensor::{Distribution, Tensor};

/// A known drift `γ∘r_ξ(h, t)` (eq. 6.5; its mask `γ` applied inside): states `[S, N, D]` at
/// time `t` → their drift `[S, N, D]`.
pub trait PriorDrift {
    /// The drift at states `h` and time `t`.
    fn drift(&self, h: Tensor<3>, t: f64) -> Tensor<3>;
}

/// The SDE `dh = (f_θ(h, t) + γ∘r(h, t)) dt + G dW` with `f_θ` a Bayesian MLP on `[h, t]`
/// (`D + 1` inputs, `D` outputs) and `G = diag(diffusion)`.
#[derive(Clone)]
pub struct NeuralSde<'a, L: Likelihood> {
    /// The drift network `f_θ`; its likelihood is not used.
    pub net: &'a Bnn<MlpBody, L>,
    /// The diagonal of `G`, `D` positive entries.
    pub diffusion: Vec<f64>,
    /// The known part of the drift, if any (the hybrid model).
    pub prior: Option<&'a dyn PriorDrift>,
}

/// Paths of a [`NeuralSde`].
#[derive(Debug, Clone)]
pub struct Paths {
    /// States `[S, N, K + 1, D]`: sample, trajectory, time (`h_0` first), dimension.
    pub states: Tensor<4>,
    /// The path part of the process KL (Lemma 1, discretised) per sample and trajectory,
    /// `Σ_k ½ f_θ(h_k, t_k)ᵀ (GGᵀ)⁻¹ f_θ(h_k, t_k) Δt_k`, `[S, N]`: the learned drift only
    /// (the known part cancels between the two processes).
    pub drift_energy: Tensor<2>,
}

impl<'a, L: Likelihood> NeuralSde<'a, L> {
    /// The SDE of drift network `net` and diffusion `G = diag(diffusion)`, without a known
    /// drift.
    ///
    /// # Panics
    /// If a diffusion entry is not finite and positive, or the network does not map `D + 1`
    /// inputs to `D` outputs for `D` diffusion entries.
    pub fn new(net: &'a Bnn<MlpBody, L>, diffusion: Vec<f64>) -> Self {
        let d = diffusion.len();
        assert!(
            d > 0 && diffusion.iter().all(|g| g.is_finite() && *g > 0.0),
            "NeuralSde: diffusion {diffusion:?}: finite positive entries"
        );
        let [_, d_out] = net.head.shape();
        assert!(
            net.body.d_input == d + 1 && d_out == d,
            "NeuralSde: a drift network on {} inputs with {d_out} outputs for {d} states (it \
             takes [h, t]: {} inputs, {d} outputs)",
            net.body.d_input,
            d + 1
        );
        Self {
            net,
            diffusion,
            prior: None,
        }
    }

    /// The same SDE with the known drift `prior` added (the hybrid model, eq. 6.5).
    pub fn with_prior(mut self, prior: &'a dyn PriorDrift) -> Self {
        self.prior = Some(prior);
        self
    }

    /// The state dimension `D`.
    pub fn dim(&self) -> usize {
        self.diffusion.len()
    }

    /// `samples` paths from each start state `h0 [N, D]` at `times` (`t_0 < … < t_K`): a
    /// joint draw of the network's weights per sample, held along the path (on the
    /// network's graph: reparameterised), and fresh Brownian increments.
    ///
    /// # Panics
    /// As [`NeuralSde::paths_with`].
    pub fn paths(&self, h0: Tensor<2>, times: &[f64], samples: usize) -> Paths {
        assert!(samples > 0, "NeuralSde::paths: 0 samples");
        let [n, d] = h0.dims();
        let device = h0.device();
        let draws = self.net.joint_draws(samples);
        let dw = increments([samples, n, d], times, &device);
        self.paths_with(&draws, h0, times, dw)
    }

    /// Euler–Maruyama under given network draws (one [`LayerDraw`] per layer, `S` draws each)
    /// and Brownian increments `ΔW [S, N, K, D]` (`ΔW_k ~ N(0, Δt_k)`):
    /// `h_{k+1} = h_k + (f_θ(h_k, t_k) + γ∘r(h_k, t_k)) Δt_k + G ΔW_k`.
    ///
    /// # Panics
    /// If `times` has fewer than 2 entries or does not increase, or the shapes of `h0`, the
    /// draws and the increments disagree (each is named).
    pub fn paths_with(
        &self,
        draws: &[LayerDraw],
        h0: Tensor<2>,
        times: &[f64],
        increments: Tensor<4>,
    ) -> Paths {
        assert!(
            times.len() >= 2 && times.windows(2).all(|w| w[1] > w[0] && w[0].is_finite()),
            "NeuralSde: times {times:?}: at least two, increasing"
        );
        let [n, d] = h0.dims();
        assert_eq!(
            d,
            self.dim(),
            "NeuralSde: start states of {d} dimensions for {} diffusion entries",
            self.dim()
        );
        let s = draws.first().map_or(0, LayerDraw::samples);
        let k = times.len() - 1;
        assert_eq!(
            increments.dims(),
            [s, n, k, d],
            "NeuralSde: increments {:?} for {s} draws, {n} trajectories, {k} steps, {d} \
             dimensions",
            increments.dims()
        );
        let device = h0.device();
        let g = Tensor::<1>::from_floats(self.diffusion.as_slice(), &device)
            .reshape([1, 1, d])
            .expand([s, n, d]);
        let inv_g2 = g.clone().square().recip();
        let mut h = h0.unsqueeze_dim::<3>(0).expand([s, n, d]);
        let mut states = vec![h.clone()];
        let mut energy = Tensor::<2>::zeros([s, n], &device);
        for (step, w) in times.windows(2).enumerate() {
            let (t, dt) = (w[0], w[1] - w[0]);
            let time = Tensor::<3>::full([s, n, 1], t, &device);
            let mut pass = Pass::fixed(draws);
            let input = Tensor::cat(vec![h.clone(), time], 2);
            let f = self
                .net
                .head
                .run(self.net.body.propagate(input, &mut pass), &mut pass);
            energy = energy
                + (f.clone().square() * inv_g2.clone())
                    .sum_dim(2)
                    .reshape([s, n])
                    * (0.5 * dt);
            let mut drift = f;
            if let Some(prior) = self.prior {
                drift = drift + prior.drift(h.clone(), t);
            }
            let dw = increments.clone().narrow(2, step, 1).reshape([s, n, d]);
            h = h + drift * dt + dw * g.clone();
            states.push(h.clone());
        }
        Paths {
            states: Tensor::stack(states, 2),
            drift_energy: energy,
        }
    }
}

impl Paths {
    /// `ln Π_k N(y_k | h_k, σ²I)` of observations `y [N, K + 1, D]` at the paths' times after
    /// the start (the start is the first observation), per sample and trajectory, `[S, N]`.
    ///
    /// # Panics
    /// If `observed` is not `[N, K + 1, D]` or `std` is not positive.
    pub fn gaussian_log_likelihood(&self, observed: Tensor<3>, std: f64) -> Tensor<2> {
        let [s, n, times, d] = self.states.dims();
        assert!(std.is_finite() && std > 0.0, "Paths: observation std {std}");
        assert_eq!(
            observed.dims(),
            [n, times, d],
            "Paths: observations {:?} for {n} trajectories, {times} times, {d} dimensions",
            observed.dims()
        );
        let k = times - 1;
        let y = observed
            .narrow(1, 1, k)
            .unsqueeze_dim::<4>(0)
            .expand([s, n, k, d]);
        let h = self.states.clone().narrow(2, 1, k);
        let squared = (y - h).square().sum_dim(3).sum_dim(2).reshape([s, n]);
        let constant = (k * d) as f64 * (std.ln() + 0.5 * (2.0 * std::f64::consts::PI).ln());
        squared * (-0.5 / (std * std)) - constant
    }

    /// The path part of the process KL summed over trajectories and averaged over samples,
    /// `[1]`; with the weights' `KL(p_φ ‖ p)` added it is Lemma 1's KL of the trajectories.
    pub fn process_kl(&self) -> Tensor<1> {
        let [s, _] = self.drift_energy.dims();
        self.drift_energy.clone().sum_dim(1).sum() / s as f64
    }
}

/// E-Bayes' objective, the simulated marginal log-likelihood per trajectory:
/// `(1/N) Σ_n ln (1/S) Σ_s exp(ℓ_{s,n})` for log-likelihoods `ℓ [S, N]` of `S` sampled paths
/// (Haußmann 2021 §6.2; a log-mean-exp over samples, stable for any magnitude).
pub fn simulated_log_marginal(log_likelihood: Tensor<2>) -> Tensor<1> {
    crate::special::log_mean_exp(log_likelihood, 0).mean()
}

/// Jensen's lower bound of [`simulated_log_marginal`], `(1/(SN)) Σ_{s,n} ℓ_{s,n}`: the data
/// term of eq. 6.15 and of E-PAC-Bayes (Algorithm 2).
pub fn expected_log_likelihood(log_likelihood: Tensor<2>) -> Tensor<1> {
    log_likelihood.mean()
}

/// E-PAC-Bayes' loss (Algorithm 2; eq. 6.16 with its sign corrected): `−mll + C_δ`,
/// `C_δ = √((KL + ln(2√N/δ)) / (2N))` for `N` trajectories (the code's constant; Theorem 1's
/// is `ln(4√N/δ)`, [`pac_bayes_complexity`]).
///
/// # Panics
/// If `n` is 0 or `delta` is not in `(0, 1)`.
pub fn pac_bayes_loss(mll: Tensor<1>, kl: Tensor<1>, n: usize, delta: f64) -> Tensor<1> {
    mll.neg() + pac_bayes_complexity(kl, n, delta, 2.0)
}

/// D-BNN (VI)'s loss, the thesis's variational baseline: the negative ELBO per trajectory,
/// `−(1/(SN)) Σ_{s,n} ℓ_{s,n} + KL(p_φ ‖ p)/N`, the weights' KL without the path term.
///
/// # Panics
/// If `n` is 0.
pub fn elbo_loss(log_likelihood: Tensor<2>, weight_kl: Tensor<1>, n: usize) -> Tensor<1> {
    assert!(n > 0, "elbo_loss: N = 0");
    expected_log_likelihood(log_likelihood).neg() + weight_kl / n as f64
}

/// Theorem 1's bound (eq. 6.15) on the expected risk `E_Q[R] ∈ [0, 1]` of paths,
/// `R = 1 − Π_k p(y_k | h_k)/B̄` with `B̄` the likelihood's maximum:
/// `−(1/(SN)) Σ ℓ_{s,n} + ln B̄ + C_{δ/2} + √(ln(2N/δ)/(2S))`, `C` with `ln(4√N/δ)`, from the
/// log-likelihoods `ℓ [S, N]` of `S` paths per trajectory, the process KL and `ln B̄`.
/// Above 1 it is vacuous.
///
/// # Panics
/// If `N` or `S` is 0 or `delta` is not in `(0, 1)`.
pub fn risk_bound(log_likelihood: Tensor<2>, kl: Tensor<1>, delta: f64, log_max: f64) -> f64 {
    let [s, n] = log_likelihood.dims();
    assert!(s > 0 && n > 0, "risk_bound: {s} samples, {n} trajectories");
    let complexity = pac_bayes_complexity(kl, n, delta / 2.0, 4.0);
    let empirical = expected_log_likelihood(log_likelihood).neg() + log_max;
    let sampling = ((2.0 * n as f64 / delta).ln() / (2.0 * s as f64)).sqrt();
    crate::host::to_vec(empirical + complexity)[0] + sampling
}

/// `C_δ = √((KL + ln(c√N/δ)) / (2N))`: Theorem 1's complexity term (`c = 4`; Algorithm 2's
/// code uses `c = 2`).
///
/// # Panics
/// If `n` is 0, `delta` is not in `(0, 1)` or `c` is not positive.
pub fn pac_bayes_complexity(kl: Tensor<1>, n: usize, delta: f64, c: f64) -> Tensor<1> {
    assert!(
        n > 0 && delta > 0.0 && delta < 1.0 && c > 0.0,
        "pac_bayes_complexity: N = {n}, δ = {delta}, c = {c}"
    );
    let n = n as f64;
    ((kl + (c * n.sqrt() / delta).ln()) / (2.0 * n)).sqrt()
}

/// The objective [`fit`] minimises (Haußmann 2021 §6.2).
#[derive(Config, Debug, PartialEq, Copy)]
pub enum SdeObjective {
    /// E-Bayes: `−` [`simulated_log_marginal`], type-II maximum likelihood of `φ`.
    EBayes,
    /// E-PAC-Bayes (Algorithm 2): [`pac_bayes_loss`] of [`expected_log_likelihood`] and the
    /// process KL (path term and weight KL) over the data's `N` trajectories.
    EPacBayes {
        /// The bound's confidence `δ` (the code: 0.05).
        delta: f64,
    },
    /// D-BNN (VI): [`elbo_loss`], the ELBO of the weights alone.
    Elbo,
}

/// Settings of [`fit`] (the thesis's Lorenz code: batches of 4 trajectories, Adam at 10⁻³,
/// 100 epochs, unit observation noise).
#[derive(Config, Debug)]
pub struct SdeFitConfig {
    /// Passes over the trajectories.
    pub epochs: usize,
    /// Trajectories per step.
    #[config(default = 4)]
    pub batch_size: usize,
    /// Sampled paths `S` per trajectory and step, each under its own weight draw.
    #[config(default = 8)]
    pub samples: usize,
    /// Adam's learning rate.
    #[config(default = 1e-3)]
    pub learning_rate: f64,
    /// The Gaussian observation noise's std `σ` of [`Paths::gaussian_log_likelihood`].
    #[config(default = 1.0)]
    pub obs_std: f64,
    /// The objective.
    #[config(default = "SdeObjective::EBayes")]
    pub objective: SdeObjective,
    /// Seed of the batches and of the device generator (weight draws, increments).
    #[config(default = 0)]
    pub seed: u64,
}

/// Observed trajectories on a shared time grid: `observed [N, K + 1, D]` at `times`.
#[derive(Debug, Clone)]
pub struct SdeData {
    /// Observation times `t_0 < … < t_K`.
    pub times: Vec<f64>,
    /// The trajectories; each path starts at its first observation.
    pub observed: Tensor<3>,
}

/// What [`fit`] did: the mean loss and the wall seconds of every epoch, and Theorem 1's bound
/// after training.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SdeFitReport {
    /// Mean loss of the epoch's steps.
    pub epoch_losses: Vec<f64>,
    /// Wall seconds of every epoch.
    pub epoch_seconds: Vec<f64>,
    /// [`risk_bound`] at δ = 0.05 of the trained model on all training trajectories
    /// ([`SdeFitConfig::samples`] paths each), whatever the objective.
    pub risk_bound: f64,
}

/// The confidence of the bound [`fit`] reports.
pub const REPORT_DELTA: f64 = 0.05;

/// Trains the drift network `net` of the SDE with diffusion `diffusion` (and the known drift
/// `prior`, if any) on `data` by Adam: every step simulates [`SdeFitConfig::samples`] paths
/// from the first observation of each trajectory in a minibatch and minimises the objective.
///
/// # Errors
/// Settings out of range (the field named), data whose shape does not fit the network, or a
/// loss that is not finite (the epoch named).
pub fn fit<L: Likelihood>(
    mut net: Bnn<MlpBody, L>,
    diffusion: &[f64],
    prior: Option<&dyn PriorDrift>,
    data: &SdeData,
    config: &SdeFitConfig,
) -> Result<(Bnn<MlpBody, L>, SdeFitReport), ConfigError> {
    use burn::optim::{AdamConfig, GradientsParams};
    let check = Check("SdeFitConfig");
    check.at_least_one("epochs", config.epochs)?;
    check.at_least_one("batch_size", config.batch_size)?;
    check.at_least_one("samples", config.samples)?;
    check.positive("learning_rate", config.learning_rate)?;
    check.positive("obs_std", config.obs_std)?;
    if let SdeObjective::EPacBayes { delta } = config.objective {
        check.open_unit("objective.delta", delta)?;
    }
    let [n, times, d] = data.observed.dims();
    if times != data.times.len() || times < 2 || d != diffusion.len() {
        return Err(ConfigError {
            config: "SdeData",
            field: "observed",
            value: format!(
                "{:?} at {} times with {} diffusion entries",
                data.observed.dims(),
                data.times.len(),
                diffusion.len()
            ),
            expected: "[N, K + 1, D] at K + 1 >= 2 times, D diffusion entries",
        });
    }
    check.at_least_one("trajectories", n)?;
    let _flushed = crate::device::SubnormalsFlushed::enter();
    let device = data.observed.device();
    crate::device::uses_generator();
    device.seed(config.seed);
    let mut rng = crate::host::HostNormals::new(config.seed);
    let mut optim = AdamConfig::new().init();
    let steps = n.div_ceil(config.batch_size);
    let mut report = SdeFitReport {
        epoch_losses: Vec::with_capacity(config.epochs),
        epoch_seconds: Vec::with_capacity(config.epochs),
        risk_bound: f64::NAN,
    };
    let simulate = |net: &Bnn<MlpBody, L>, observed: Tensor<3>| {
        let rows = observed.dims()[0];
        let h0 = observed.clone().narrow(1, 0, 1).reshape([rows, d]);
        let mut sde = NeuralSde::new(net, diffusion.to_vec());
        if let Some(p) = prior {
            sde = sde.with_prior(p);
        }
        let paths = sde.paths(h0, &data.times, config.samples);
        let ll = paths.gaussian_log_likelihood(observed, config.obs_std);
        (paths, ll)
    };
    for epoch in 0..config.epochs {
        let started = std::time::Instant::now();
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = ((rng.uniform() * (i + 1) as f64) as usize).min(i);
            order.swap(i, j);
        }
        let mut losses = Vec::with_capacity(steps);
        for rows in order.chunks(config.batch_size) {
            let index = crate::host::labels(rows, &device);
            let (paths, ll) = simulate(&net, data.observed.clone().select(0, index));
            let loss = match config.objective {
                SdeObjective::EBayes => simulated_log_marginal(ll).neg(),
                SdeObjective::EPacBayes { delta } => {
                    let scale = n as f64 / rows.len() as f64;
                    let kl = paths.process_kl() * scale + net.kl();
                    pac_bayes_loss(expected_log_likelihood(ll), kl, n, delta)
                }
                SdeObjective::Elbo => elbo_loss(ll, net.kl(), n),
            };
            let value = crate::host::to_vec(loss.clone())[0];
            if !value.is_finite() {
                return Err(ConfigError {
                    config: "fit",
                    field: "loss",
                    value: format!("{value} at epoch {epoch}"),
                    expected: "a finite loss: lower the learning rate or the horizon",
                });
            }
            let grads = GradientsParams::from_grads(loss.backward(), &net);
            net = optim.step(config.learning_rate, net, grads);
            losses.push(value);
        }
        report.epoch_losses.push(crate::metrics::mean(&losses));
        report.epoch_seconds.push(started.elapsed().as_secs_f64());
    }
    // Theorem 1 after training, on every trajectory: ln B̄ of K·D Gaussian coordinates.
    let (paths, ll) = simulate(&net, data.observed.clone().detach());
    let kl = (paths.process_kl() + net.kl()).detach();
    let std = config.obs_std;
    let log_max =
        -(((times - 1) * d) as f64) * (std.ln() + 0.5 * (2.0 * std::f64::consts::PI).ln());
    report.risk_bound = risk_bound(ll.detach(), kl, REPORT_DELTA, log_max);
    Ok((net, report))
}

/// D-BNN (SGLD)'s target (Look & Kandemir 2019; the baseline of Haußmann 2021 §6.4): the log
/// posterior of the drift network's flat weights `θ` ([`FlatLayout`]),
/// `ln p(θ) + (N/B) Σ_n ln (1/S) Σ_s p(y_n | H^s(θ))` over a minibatch of `B` of the `N`
/// trajectories, each likelihood simulated by `S` paths with fresh Brownian increments at
/// every evaluation (an estimate, biased in the log). [`crate::inference::sg_sample`] runs
/// SGLD or SGHMC on it; [`SdeTarget::paths`] simulates under the kept draws.
#[derive(Clone)]
pub struct SdeTarget<'a, L: Likelihood> {
    sde: NeuralSde<'a, L>,
    data: SdeData,
    samples: usize,
    obs_std: f64,
    scale: f64,
    layout: FlatLayout,
}

impl<'a, L: Likelihood> SdeTarget<'a, L> {
    /// The target of `sde`'s drift network on all of `data`, `samples` paths per trajectory
    /// and observation noise `obs_std`; the network lives on an autodiff device.
    ///
    /// # Panics
    /// If `samples` is 0, `obs_std` is not positive, or the data do not fit the SDE.
    pub fn new(sde: NeuralSde<'a, L>, data: SdeData, samples: usize, obs_std: f64) -> Self {
        assert!(
            samples > 0 && obs_std > 0.0,
            "SdeTarget: {samples} samples, observation std {obs_std}"
        );
        let [_, times, d] = data.observed.dims();
        assert!(
            times == data.times.len() && d == sde.dim(),
            "SdeTarget: observations {:?} at {} times for {} dimensions",
            data.observed.dims(),
            data.times.len(),
            sde.dim()
        );
        let layout = sde.net.flat_layout();
        Self {
            sde,
            data,
            samples,
            obs_std,
            scale: 1.0,
            layout,
        }
    }

    /// The layout of `θ` (the network's layers in forward order).
    pub fn layout(&self) -> &FlatLayout {
        &self.layout
    }

    /// One path per row of `theta [M, D]` from each trajectory's first observation of `h0`
    /// `[N, D]` at `times`: `[M, N, K + 1, D]`.
    pub fn paths(&self, theta: Tensor<2>, h0: Tensor<2>, times: &[f64]) -> Paths {
        let m = theta.dims()[0];
        let [n, d] = h0.dims();
        let draws = self.layout.split(theta);
        let dw = increments([m, n, d], times, &h0.device());
        self.sde.paths_with(&draws, h0, times, dw)
    }
}

/// Brownian increments `ΔW_k ~ N(0, Δt_k)` at `times`, `[M, N, K, D]`.
fn increments(shape: [usize; 3], times: &[f64], device: &burn::tensor::Device) -> Tensor<4> {
    let [m, n, d] = shape;
    let k = times.len().saturating_sub(1);
    crate::device::uses_generator();
    let unit = Tensor::<4>::random([m, n, k, d], Distribution::Normal(0.0, 1.0), device);
    if k == 0 {
        return unit;
    }
    let root_dt: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]).sqrt()).collect();
    let scale = Tensor::<1>::from_floats(root_dt.as_slice(), device).reshape([1, 1, k, 1]);
    unit * scale.expand([m, n, k, d])
}

impl<L: Likelihood> LogDensity for SdeTarget<'_, L> {
    fn dim(&self) -> usize {
        self.layout.numel()
    }

    fn log_density(&self, theta: Tensor<2>) -> Tensor<1> {
        let [r, p] = theta.dims();
        let s = self.samples;
        let [n, _, d] = self.data.observed.dims();
        let device = theta.device();
        // Each row's weights for its S paths.
        let expanded = theta
            .clone()
            .unsqueeze_dim::<3>(1)
            .expand([r, s, p])
            .reshape([r * s, p]);
        let draws = self.layout.split(expanded);
        let h0 = self.data.observed.clone().narrow(1, 0, 1).reshape([n, d]);
        let dw = increments([r * s, n, d], &self.data.times, &device);
        let paths = self.sde.paths_with(&draws, h0, &self.data.times, dw);
        let ll = paths
            .gaussian_log_likelihood(self.data.observed.clone(), self.obs_std)
            .reshape([r, s, n]);
        let marginal = crate::special::log_mean_exp(ll, 1).sum_dim(2).reshape([r]);
        let prior = self.sde.net.log_prior_draws(&self.layout.split(theta));
        marginal * self.scale + prior
    }

    fn device(&self) -> burn::tensor::Device {
        self.data.observed.device()
    }
}

impl<'a, L: Likelihood> Minibatches for SdeTarget<'a, L> {
    type Target = SdeTarget<'a, L>;

    /// `batch_size` trajectories without replacement, the likelihood scaled by `N/B`.
    fn draw(&self, batch_size: usize, rng: &mut HostNormals) -> Self::Target {
        let n = self.data.observed.dims()[0];
        if batch_size >= n {
            return self.clone();
        }
        let rows = rng.choose_distinct(n, batch_size);
        let index = crate::host::labels(&rows, &self.data.observed.device());
        let mut batch = self.clone();
        batch.data.observed = self.data.observed.clone().select(0, index);
        batch.scale = n as f64 / batch_size as f64;
        batch
    }
}

#[cfg(test)]
#[path = "sde_tests.rs"]
mod tests;
