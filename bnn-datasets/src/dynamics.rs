//! Simulated dynamical systems: the wet-chicken 2-D river (Depeweg 2019 §4.3.1) for
//! model-based RL, and stochastic Lotka–Volterra and Lorenz systems integrated by
//! Euler–Maruyama (Haußmann 2021 §6.4) for the SDE chapter.

use crate::table::RegressionData;
use crate::toy::standard_normal;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// The wet-chicken 2-D river (Depeweg 2019 §4.3.1, after Hans & Udluft 2009).
///
/// A canoeist at `(x, y) ∈ [0, w] × [0, l]` paddles with action `(a_x, a_y) ∈ [−1, 1]²`.
/// The stream drifts downriver with `v = 3x/w` and turbulence `s = 3.5 − v`:
/// `ŷ = y + (a_y − 1) + v + s τ`, `τ ~ U[−1, 1]`. Past the waterfall (`ŷ > l`) the canoe
/// restarts at the origin; `ŷ < 0` is clipped to 0; `x + a_x` is clipped to `[0, w]`.
/// The reward of a state is `−(l − y)`: the closer to the waterfall, the better.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WetChicken {
    /// River width `w` (5).
    pub width: f64,
    /// River length `l`, the waterfall's position (5).
    pub length: f64,
}

impl Default for WetChicken {
    fn default() -> Self {
        Self {
            width: 5.0,
            length: 5.0,
        }
    }
}

/// One wet-chicken transition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WetChickenStep {
    /// The next state `(x, y)`.
    pub next: [f64; 2],
    /// The reward of the state the step started from, `−(l − y)`.
    pub reward: f64,
    /// Whether the canoe went over the waterfall (and was reset to the origin).
    pub fell: bool,
}

impl WetChicken {
    /// Reward of a state: `−(l − y)`.
    pub fn reward(&self, state: [f64; 2]) -> f64 {
        -(self.length - state[1])
    }

    /// The step from `state` under `action` with turbulence draw `tau ∈ [−1, 1]`; actions are
    /// clipped to `[−1, 1]`.
    pub fn step_with(&self, state: [f64; 2], action: [f64; 2], tau: f64) -> WetChickenStep {
        let [x, y] = state;
        let (ax, ay) = (action[0].clamp(-1.0, 1.0), action[1].clamp(-1.0, 1.0));
        let v = 3.0 * x / self.width;
        let s = 3.5 - v;
        let y_hat = y + (ay - 1.0) + v + s * tau;
        let fell = y_hat > self.length;
        let next_y = if fell || y_hat < 0.0 { 0.0 } else { y_hat };
        let next_x = if fell || x + ax < 0.0 {
            0.0
        } else if x + ax > self.width {
            self.width
        } else {
            x + ax
        };
        WetChickenStep {
            next: [next_x, next_y],
            reward: self.reward(state),
            fell,
        }
    }

    /// The step with a fresh turbulence draw `τ ~ U[−1, 1]`.
    pub fn step(&self, state: [f64; 2], action: [f64; 2], rng: &mut StdRng) -> WetChickenStep {
        let tau = 2.0 * rng.random::<f64>() - 1.0;
        self.step_with(state, action, tau)
    }

    /// The average reward per step of `runs` canoeists from the origin over `steps` steps, all
    /// of a step's actions from `act` (states → actions, clipped to the box): a policy's
    /// score on the true river (the project's protocol; the thesis does not state its own).
    ///
    /// # Panics
    /// If `act` returns another number of actions than states, or `runs` or `steps` is 0.
    pub fn average_reward(
        &self,
        runs: usize,
        steps: usize,
        seed: u64,
        mut act: impl FnMut(&[[f64; 2]]) -> Vec<[f64; 2]>,
    ) -> f64 {
        assert!(
            runs > 0 && steps > 0,
            "average_reward: {runs} runs of {steps} steps"
        );
        let mut rng = StdRng::seed_from_u64(seed);
        let mut states = vec![[0.0, 0.0]; runs];
        let mut total = 0.0;
        for _ in 0..steps {
            let actions = act(&states);
            assert_eq!(
                actions.len(),
                runs,
                "average_reward: one action per canoeist"
            );
            for (s, a) in states.iter_mut().zip(actions) {
                let step = self.step(*s, a, &mut rng);
                total += step.reward;
                *s = step.next;
            }
        }
        total / (runs * steps) as f64
    }

    /// `n` transitions along one trajectory from the origin under the uniform random policy
    /// `a ~ U[−1, 1]²` (chapter 5 uses 2500, chapter 6 uses 7500).
    pub fn random_transitions(&self, n: usize, seed: u64) -> WetChickenTransitions {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut t = WetChickenTransitions::default();
        let mut s = [0.0, 0.0];
        for _ in 0..n {
            s = self.random_step(s, &mut t, &mut rng);
        }
        t
    }

    /// `n` independent transitions from states uniform on the river, `[0, w] × [0, l]`, under
    /// actions uniform on `[−1, 1]²`: inputs sampled uniformly in input space, as the pool and
    /// test sets of the active-learning study (Depeweg 2019 §6.4.3).
    pub fn uniform_transitions(&self, n: usize, seed: u64) -> WetChickenTransitions {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut t = WetChickenTransitions::default();
        for _ in 0..n {
            let s = [
                self.width * rng.random::<f64>(),
                self.length * rng.random::<f64>(),
            ];
            self.random_step(s, &mut t, &mut rng);
        }
        t
    }

    /// The river's best policy on a grid, by discounted value iteration: a reference that
    /// learned policies can be scored against ([`RiverPolicy`]).
    ///
    /// `V(s) = r(s) + γ max_a E_τ V(s')` on `cells × cells` nodes over `[0, w] × [0, l]`,
    /// `s'` by [`WetChicken::step_with`], `V(s')` interpolated bilinearly, `E_τ` by the
    /// midpoint rule over `grid.turbulence_nodes` values of `τ`, `a` over `action_levels²`
    /// evenly spaced actions. Stops when no value moves by more than `grid.tolerance`.
    ///
    /// # Panics
    /// If `cells` or `action_levels` is below 2, `turbulence_nodes` is 0, the discount is not
    /// in `(0, 1)` or the tolerance is not positive.
    pub fn optimal_policy(&self, grid: &RiverGrid) -> RiverPolicy {
        let RiverGrid {
            cells,
            action_levels,
            turbulence_nodes,
            discount,
            tolerance,
            max_iterations,
        } = *grid;
        assert!(
            cells >= 2
                && action_levels >= 2
                && turbulence_nodes > 0
                && discount > 0.0
                && discount < 1.0
                && tolerance > 0.0,
            "WetChicken::optimal_policy: {grid:?}"
        );
        let node = |i: usize, extent: f64| extent * i as f64 / (cells - 1) as f64;
        let level = |i: usize| -1.0 + 2.0 * i as f64 / (action_levels - 1) as f64;
        let actions: Vec<[f64; 2]> = (0..action_levels * action_levels)
            .map(|k| [level(k / action_levels), level(k % action_levels)])
            .collect();
        let taus: Vec<f64> = (0..turbulence_nodes)
            .map(|j| -1.0 + (2 * j + 1) as f64 / turbulence_nodes as f64)
            .collect();
        // Every (node, action)'s next states, as the four corners and weights of their cells.
        let corners = |v: f64, extent: f64| {
            let u = (v / extent * (cells - 1) as f64).clamp(0.0, (cells - 1) as f64);
            let i = (u.floor() as usize).min(cells - 2);
            (i, u - i as f64)
        };
        let mut next = Vec::with_capacity(cells * cells * actions.len() * taus.len());
        for ix in 0..cells {
            for iy in 0..cells {
                let s = [node(ix, self.width), node(iy, self.length)];
                for a in &actions {
                    for &tau in &taus {
                        let n = self.step_with(s, *a, tau).next;
                        let (i, fi) = corners(n[0], self.width);
                        let (j, fj) = corners(n[1], self.length);
                        next.push(((i * cells + j) as u32, fi as f32, fj as f32));
                    }
                }
            }
        }
        let reward: Vec<f64> = (0..cells * cells)
            .map(|c| self.reward([0.0, node(c % cells, self.length)]))
            .collect();
        let mut values = vec![0.0; cells * cells];
        let mut best = vec![0usize; cells * cells];
        let mut iterations = 0;
        let per_node = actions.len() * taus.len();
        while iterations < max_iterations {
            iterations += 1;
            let mut moved: f64 = 0.0;
            let mut updated = vec![0.0; cells * cells];
            for c in 0..cells * cells {
                let mut top = (f64::NEG_INFINITY, 0);
                for a in 0..actions.len() {
                    let at = c * per_node + a * taus.len();
                    let expected = next[at..at + taus.len()]
                        .iter()
                        .map(|&(k, fi, fj)| {
                            let (k, fi, fj) = (k as usize, fi as f64, fj as f64);
                            (1.0 - fi) * ((1.0 - fj) * values[k] + fj * values[k + 1])
                                + fi * ((1.0 - fj) * values[k + cells] + fj * values[k + cells + 1])
                        })
                        .sum::<f64>()
                        / taus.len() as f64;
                    if expected > top.0 {
                        top = (expected, a);
                    }
                }
                updated[c] = reward[c] + discount * top.0;
                best[c] = top.1;
                moved = moved.max((updated[c] - values[c]).abs());
            }
            values = updated;
            if moved < tolerance {
                break;
            }
        }
        RiverPolicy {
            cells,
            width: self.width,
            length: self.length,
            actions: best.iter().map(|&a| actions[a]).collect(),
            values,
            iterations,
        }
    }

    /// One step from `s` under a uniform random action, added to `t`; the next state.
    fn random_step(
        &self,
        s: [f64; 2],
        t: &mut WetChickenTransitions,
        rng: &mut StdRng,
    ) -> [f64; 2] {
        let a = [
            2.0 * rng.random::<f64>() - 1.0,
            2.0 * rng.random::<f64>() - 1.0,
        ];
        let step = self.step(s, a, rng);
        t.states.push(s);
        t.actions.push(a);
        t.next_states.push(step.next);
        t.rewards.push(step.reward);
        step.next
    }
}

/// Settings of [`WetChicken::optimal_policy`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RiverGrid {
    /// Grid nodes per axis.
    pub cells: usize,
    /// Actions per axis, evenly spaced over `[−1, 1]`.
    pub action_levels: usize,
    /// Values of `τ` in the expectation (midpoint rule).
    pub turbulence_nodes: usize,
    /// The discount `γ`.
    pub discount: f64,
    /// The largest change of a value at convergence.
    pub tolerance: f64,
    /// The most sweeps.
    pub max_iterations: usize,
}

impl Default for RiverGrid {
    /// 26 × 26 nodes (0.2 apart), 9 × 9 actions, 21 turbulence values, `γ = 0.95`: a finer
    /// grid (51 nodes) or a longer horizon (`γ = 0.98`) moves the average reward by about 0.01.
    fn default() -> Self {
        Self {
            cells: 26,
            action_levels: 9,
            turbulence_nodes: 21,
            discount: 0.95,
            tolerance: 1e-4,
            max_iterations: 5000,
        }
    }
}

/// A policy on a grid of river states ([`WetChicken::optimal_policy`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RiverPolicy {
    cells: usize,
    width: f64,
    length: f64,
    /// The action of every node, `x`-major (`node = ix · cells + iy`).
    pub actions: Vec<[f64; 2]>,
    /// The discounted value of every node.
    pub values: Vec<f64>,
    /// The sweeps value iteration took.
    pub iterations: usize,
}

impl RiverPolicy {
    /// The action of the node nearest `state`.
    pub fn act(&self, state: [f64; 2]) -> [f64; 2] {
        let index = |v: f64, extent: f64| {
            ((v / extent * (self.cells - 1) as f64).round() as usize).min(self.cells - 1)
        };
        let (ix, iy) = (
            index(state[0].max(0.0), self.width),
            index(state[1].max(0.0), self.length),
        );
        self.actions[ix * self.cells + iy]
    }
}

/// Transitions `(s, a) → (s', r)` of a wet-chicken trajectory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WetChickenTransitions {
    /// States `(x, y)`.
    pub states: Vec<[f64; 2]>,
    /// Actions `(a_x, a_y)`.
    pub actions: Vec<[f64; 2]>,
    /// Next states.
    pub next_states: Vec<[f64; 2]>,
    /// Rewards of the states.
    pub rewards: Vec<f64>,
}

impl WetChickenTransitions {
    /// Number of transitions.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// The regression task of the thesis: inputs `(x, y, a_x, a_y)`, targets the next state
    /// `(x', y')`.
    pub fn next_state_regression(&self) -> RegressionData {
        let x = self
            .states
            .iter()
            .zip(&self.actions)
            .flat_map(|(s, a)| [s[0], s[1], a[0], a[1]])
            .collect();
        let y = self.next_states.iter().flatten().copied().collect();
        RegressionData {
            x,
            y,
            n_features: 4,
            n_targets: 2,
        }
    }
}

/// A sampled path of a `dim`-dimensional process on a time grid.
#[derive(Debug, Clone, PartialEq)]
pub struct SdePath {
    /// Observation times.
    pub times: Vec<f64>,
    /// States, `[times.len(), dim]` row-major.
    pub states: Vec<f64>,
    /// State dimension.
    pub dim: usize,
}

impl SdePath {
    /// Number of observations.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// State at observation `k`.
    pub fn state(&self, k: usize) -> &[f64] {
        &self.states[k * self.dim..(k + 1) * self.dim]
    }

    /// Observations `start..start + len`.
    ///
    /// # Panics
    /// If the range passes the end.
    pub fn window(&self, start: usize, len: usize) -> SdePath {
        assert!(
            start + len <= self.len(),
            "window {start}..{} of a path of {} observations",
            start + len,
            self.len()
        );
        SdePath {
            times: self.times[start..start + len].to_vec(),
            states: self.states[start * self.dim..(start + len) * self.dim].to_vec(),
            dim: self.dim,
        }
    }

    /// `count` consecutive, non-overlapping sequences of `len` observations from `start`.
    ///
    /// # Panics
    /// If they pass the end.
    pub fn sequences(&self, start: usize, len: usize, count: usize) -> Vec<SdePath> {
        (0..count)
            .map(|i| self.window(start + i * len, len))
            .collect()
    }
}

/// The time grid and observation model of an Euler–Maruyama simulation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmSchedule {
    /// Integration step Δt.
    pub dt: f64,
    /// Number of steps.
    pub steps: usize,
    /// Keep every this many steps.
    pub record_every: usize,
    /// Standard deviation of Gaussian observation noise added to the kept states.
    pub obs_noise: f64,
}

impl EmSchedule {
    /// The thesis's grid: steps of 10⁻⁴, every 100th kept (observations 0.01 apart), no
    /// observation noise.
    pub fn thesis(steps: usize) -> Self {
        Self {
            dt: 1e-4,
            steps,
            record_every: 100,
            obs_noise: 0.0,
        }
    }
}

/// Euler–Maruyama for `dh = f(h, t) dt + diag(g) dW`:
/// `h_{k+1} = h_k + f(h_k, t_k) Δt + g ⊙ √Δt ξ_k`, `ξ_k ~ N(0, I)`, keeping every
/// `record_every`-th state (the first is `h0` at `t = 0`) and adding `N(0, obs_noise²)`
/// observation noise to the kept states.
///
/// # Panics
/// If `diffusion` and `h0` differ in length or `record_every` is 0.
pub fn euler_maruyama(
    drift: impl Fn(&[f64], f64, &mut [f64]),
    diffusion: &[f64],
    h0: &[f64],
    schedule: &EmSchedule,
    seed: u64,
) -> SdePath {
    let EmSchedule {
        dt,
        steps,
        record_every,
        obs_noise,
    } = *schedule;
    let dim = h0.len();
    assert_eq!(
        diffusion.len(),
        dim,
        "one diffusion scale per state dimension"
    );
    assert!(record_every > 0, "record_every must be positive");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut obs_rng = StdRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut h = h0.to_vec();
    let mut f = vec![0.0; dim];
    let n_obs = steps / record_every;
    let mut times = Vec::with_capacity(n_obs);
    let mut states = Vec::with_capacity(n_obs * dim);
    let sqrt_dt = dt.sqrt();
    for k in 0..steps {
        let t = k as f64 * dt;
        if k % record_every == 0 {
            times.push(t);
            states.extend(
                h.iter()
                    .map(|v| v + obs_noise * standard_normal(&mut obs_rng)),
            );
        }
        drift(&h, t, &mut f);
        for d in 0..dim {
            h[d] += f[d] * dt + diffusion[d] * sqrt_dt * standard_normal(&mut rng);
        }
    }
    SdePath { times, states, dim }
}

/// The stochastic Lotka–Volterra system of Haußmann (2021) §6.4.1:
/// `dx = (θ₁x − θ₂xy) dt + 0.2 dβ`, `dy = (−θ₃y + θ₄xy) dt + 0.3 dβ`, θ = (2, 1, 4, 1);
/// 10⁵ Euler–Maruyama steps of 10⁻⁴ on [0, 10], every 100th kept: 1000 observations 0.01
/// apart. The thesis does not state the initial state; the default (5, 3) lies on an orbit
/// around the fixed point (θ₃/θ₄, θ₁/θ₂) = (4, 2) that stays well inside the positive quadrant.
#[derive(Debug, Clone, PartialEq)]
pub struct LotkaVolterra {
    /// `(θ₁, θ₂, θ₃, θ₄)`.
    pub theta: [f64; 4],
    /// Diffusion scales of x and y.
    pub diffusion: [f64; 2],
    /// Initial state.
    pub h0: [f64; 2],
    /// Time grid and observation noise (none in the thesis).
    pub schedule: EmSchedule,
}

impl Default for LotkaVolterra {
    fn default() -> Self {
        Self {
            theta: [2.0, 1.0, 4.0, 1.0],
            diffusion: [0.2, 0.3],
            h0: [5.0, 3.0],
            schedule: EmSchedule::thesis(100_000),
        }
    }
}

impl LotkaVolterra {
    /// The drift `(θ₁x − θ₂xy, −θ₃y + θ₄xy)`.
    pub fn drift(&self, h: &[f64], out: &mut [f64]) {
        let [a, b, c, d] = self.theta;
        out[0] = a * h[0] - b * h[0] * h[1];
        out[1] = -c * h[1] + d * h[0] * h[1];
    }

    /// The first integral of the noise-free system, `θ₄x − θ₃ ln x + θ₂y − θ₁ ln y`, constant
    /// along its orbits.
    pub fn invariant(&self, h: &[f64]) -> f64 {
        let [a, b, c, d] = self.theta;
        d * h[0] - c * h[0].ln() + b * h[1] - a * h[1].ln()
    }

    /// One sampled path.
    pub fn simulate(&self, seed: u64) -> SdePath {
        euler_maruyama(
            |h, _, out| self.drift(h, out),
            &self.diffusion,
            &self.h0,
            &self.schedule,
            seed,
        )
    }

    /// The thesis's split: observations on [0, 5] for training and (5, 10] for test, each
    /// cut into 10 sequences of 50.
    pub fn thesis_splits(&self, seed: u64) -> (Vec<SdePath>, Vec<SdePath>) {
        let path = self.simulate(seed);
        let half = path.len() / 2;
        let len = half / 10;
        (path.sequences(0, len, 10), path.sequences(half, len, 10))
    }
}

/// The stochastic Lorenz system of Haußmann (2021) §6.4.2:
/// `dx = ζ(y − x) dt + dW`, `dy = (x(κ − z) − y) dt + dW`, `dz = (xy − ρz) dt + dW`,
/// ζ = 10, κ = 28, ρ = 8/3 (printed as 2.67), from (1, 1, 28); 2·10⁵ Euler–Maruyama steps of
/// 10⁻⁴, every 100th kept: 2000 observations 0.01 apart.
#[derive(Debug, Clone, PartialEq)]
pub struct Lorenz {
    /// ζ (Prandtl number, 10).
    pub zeta: f64,
    /// κ (Rayleigh number, 28).
    pub kappa: f64,
    /// ρ (8/3).
    pub rho: f64,
    /// Diffusion scale of every coordinate (1).
    pub diffusion: f64,
    /// Initial state.
    pub h0: [f64; 3],
    /// Time grid and observation noise (none in the thesis).
    pub schedule: EmSchedule,
}

impl Default for Lorenz {
    fn default() -> Self {
        Self {
            zeta: 10.0,
            kappa: 28.0,
            rho: 8.0 / 3.0,
            diffusion: 1.0,
            h0: [1.0, 1.0, 28.0],
            schedule: EmSchedule::thesis(200_000),
        }
    }
}

impl Lorenz {
    /// The drift `(ζ(y − x), x(κ − z) − y, xy − ρz)`.
    pub fn drift(&self, h: &[f64], out: &mut [f64]) {
        out[0] = self.zeta * (h[1] - h[0]);
        out[1] = h[0] * (self.kappa - h[2]) - h[1];
        out[2] = h[0] * h[1] - self.rho * h[2];
    }

    /// One sampled path.
    pub fn simulate(&self, seed: u64) -> SdePath {
        euler_maruyama(
            |h, _, out| self.drift(h, out),
            &[self.diffusion; 3],
            &self.h0,
            &self.schedule,
            seed,
        )
    }

    /// The thesis's split (its details section): the first half cut into 20 training
    /// sequences of 50, the second half into 10 test sequences of 100.
    pub fn thesis_splits(&self, seed: u64) -> (Vec<SdePath>, Vec<SdePath>) {
        self.splits(seed, (20, 50), (10, 100))
    }

    /// `train.0` consecutive training sequences of `train.1` observations from the start of the
    /// first half and `test.0` of `test.1` from the start of the second (the thesis's code: 20
    /// of 24 each, a 24-step horizon).
    ///
    /// # Panics
    /// If the sequences do not fit in their half.
    pub fn splits(
        &self,
        seed: u64,
        train: (usize, usize),
        test: (usize, usize),
    ) -> (Vec<SdePath>, Vec<SdePath>) {
        let path = self.simulate(seed);
        let half = path.len() / 2;
        assert!(
            train.0 * train.1 <= half && test.0 * test.1 <= half,
            "Lorenz::splits: {train:?} and {test:?} sequences in halves of {half}"
        );
        (
            path.sequences(0, train.1, train.0),
            path.sequences(half, test.1, test.0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two steps from the origin under a = (0, 0): rewards −5, then −(5 − E y₁) with
    /// y₁ = max(0, −1 + 3.5τ), E y₁ = ∫_{2/7}^1 (−1 + 3.5τ) dτ/2 = 25/56.
    #[test]
    fn the_average_reward_of_two_steps_is_its_closed_form() {
        let w = WetChicken::default();
        let runs = 20_000;
        let got = w.average_reward(runs, 2, 3, |s| vec![[0.0, 0.0]; s.len()]);
        let want = (-5.0 - (5.0 - 25.0 / 56.0)) / 2.0;
        // y₁'s std is below 0.9: the mean's s.e. is below 0.9 / √20000 / 2 ≈ 0.0032.
        assert!((got - want).abs() < 0.016, "{got} vs {want}");
        assert_eq!(
            w.average_reward(5, 1, 0, |s| vec![[1.0, 1.0]; s.len()]),
            -5.0
        );
    }

    /// The grid's policy beats every constant action and a hand-made threshold policy on the
    /// true river (average rewards: about −2.38 against −2.50 and at best −3.5).
    #[test]
    fn value_iteration_beats_constant_and_threshold_policies() {
        let w = WetChicken::default();
        let grid = RiverGrid {
            action_levels: 5,
            turbulence_nodes: 11,
            ..RiverGrid::default()
        };
        let policy = w.optimal_policy(&grid);
        assert!(policy.iterations < grid.max_iterations);
        // Values are discounted rewards in [−5, 0] / (1 − γ).
        assert!(policy.values.iter().all(|v| (-100.0..=0.0).contains(v)));
        let score = |act: &dyn Fn([f64; 2]) -> [f64; 2]| {
            w.average_reward(2000, 100, 7, |s| s.iter().map(|x| act(*x)).collect())
        };
        // A run's average has a std below 1: the s.e. of a score is below 1/√2000 ≈ 0.022.
        let best = score(&|s| policy.act(s));
        for ax in [-1.0, 0.0, 1.0] {
            for ay in [-1.0, 0.0, 1.0] {
                let constant = score(&|_| [ax, ay]);
                assert!(best > constant + 0.5, "{best} vs ({ax}, {ay}): {constant}");
            }
        }
        let hand = score(&|s| {
            let ay = if s[1] > 2.0 { -1.0 } else { 1.0 };
            [(3.5 - s[0]).clamp(-1.0, 1.0), ay]
        });
        assert!(best > hand + 0.05, "{best} vs {hand}");
        // Near the waterfall where the drift is strong, the policy back-paddles.
        assert_eq!(policy.act([4.0, 4.6])[1], -1.0);
    }

    #[test]
    fn wet_chicken_resets_at_the_waterfall_and_clips_at_the_banks() {
        let w = WetChicken::default();
        // x = 2 → v = 1.2, s = 2.3; from y = 4: ŷ = 4 + 0 + 1.2 + 2.3τ > 5 iff τ > −0.087.
        let fall = w.step_with([2.0, 4.0], [0.5, 1.0], 0.5);
        assert!(fall.fell);
        assert_eq!(fall.next, [0.0, 0.0]);
        assert_eq!(fall.reward, -1.0);
        let stay = w.step_with([2.0, 4.0], [0.5, 1.0], -0.2);
        assert!(!stay.fell);
        assert!((stay.next[1] - (4.0 + 1.2 - 0.46)).abs() < 1e-12);
        assert_eq!(stay.next[0], 2.5);
        // Upstream past the start: y clipped to 0, x still moves.
        let up = w.step_with([1.0, 0.5], [-0.5, -1.0], -1.0);
        assert_eq!(up.next, [0.5, 0.0]);
        // Banks: x + a_x is clipped to [0, w]; actions beyond ±1 are clipped.
        assert_eq!(w.step_with([4.8, 0.0], [1.0, 0.0], 0.0).next[0], 5.0);
        assert_eq!(w.step_with([0.3, 0.0], [-3.0, 0.0], 0.0).next[0], 0.0);
        assert_eq!(
            w.step_with([2.0, 1.0], [7.0, 0.0], 0.0),
            w.step_with([2.0, 1.0], [1.0, 0.0], 0.0)
        );
    }

    #[test]
    fn uniform_transitions_cover_the_river_and_follow_the_dynamics() {
        let w = WetChicken::default();
        let t = w.uniform_transitions(4000, 3);
        assert_eq!(t, w.uniform_transitions(4000, 3));
        let (xs, ys): (Vec<f64>, Vec<f64>) = t.states.iter().map(|s| (s[0], s[1])).unzip();
        for v in [&xs, &ys] {
            assert!(v.iter().all(|x| (0.0..=5.0).contains(x)));
            // U[0, 5]: mean 2.5, sd 5/√12 ≈ 1.44, s.e. of the mean ≈ 0.023.
            let m = v.iter().sum::<f64>() / v.len() as f64;
            assert!((m - 2.5).abs() < 0.1, "{m}");
        }
        assert!(t.actions.iter().flatten().all(|a| (-1.0..=1.0).contains(a)));
        // Every next state is the step from its own state (τ unknown: y' within ±s of ŷ's
        // centre, or a reset or a clip).
        for ((s, a), n) in t.states.iter().zip(&t.actions).zip(&t.next_states) {
            let v = 3.0 * s[0] / 5.0;
            let centre = s[1] + (a[1] - 1.0) + v;
            let ok = *n == [0.0, 0.0] || n[1] == 0.0 || (n[1] - centre).abs() <= 3.5 - v + 1e-9;
            assert!(ok, "{s:?} {a:?} → {n:?}");
        }
    }

    #[test]
    fn wet_chicken_turbulence_is_uniform_with_half_width_s() {
        // At x = 5 (v = 3, s = 0.5) from y = 1 with a = (0, 0): y' ~ U[2.5, 3.5].
        let w = WetChicken::default();
        let mut rng = StdRng::seed_from_u64(1);
        let n = 20_000;
        let ys: Vec<f64> = (0..n)
            .map(|_| w.step([5.0, 1.0], [0.0, 0.0], &mut rng).next[1])
            .collect();
        assert!(ys.iter().all(|y| (2.5..=3.5).contains(y)));
        let m = ys.iter().sum::<f64>() / n as f64;
        let v = ys.iter().map(|y| (y - m).powi(2)).sum::<f64>() / n as f64;
        // U[−½, ½]: variance 1/12, se of the mean sqrt(1/(12n)), of the variance ≈ sqrt(1/(180n)).
        assert!(
            (m - 3.0).abs() < 5.0 * (1.0 / (12.0 * n as f64)).sqrt(),
            "{m}"
        );
        assert!(
            (v - 1.0 / 12.0).abs() < 5.0 * (1.0 / (180.0 * n as f64)).sqrt(),
            "{v}"
        );
    }

    #[test]
    fn random_policy_transitions_chain_and_stay_in_the_river() {
        let w = WetChicken::default();
        let t = w.random_transitions(2500, 2);
        assert_eq!(t.len(), 2500);
        assert_eq!(t.states[0], [0.0, 0.0]);
        for k in 0..t.len() {
            for s in [t.states[k], t.next_states[k]] {
                assert!(
                    (0.0..=5.0).contains(&s[0]) && (0.0..=5.0).contains(&s[1]),
                    "{s:?}"
                );
            }
            assert!(t.actions[k].iter().all(|a| (-1.0..=1.0).contains(a)));
            assert_eq!(t.rewards[k], -(5.0 - t.states[k][1]));
            if k + 1 < t.len() {
                assert_eq!(t.next_states[k], t.states[k + 1]);
            }
        }
        // The random policy goes over the waterfall now and then.
        let falls = (0..t.len())
            .filter(|&k| t.next_states[k] == [0.0, 0.0] && t.states[k][1] > 0.0)
            .count();
        assert!(falls > 10, "{falls} falls");
        let r = t.next_state_regression();
        assert_eq!((r.len(), r.n_features, r.n_targets), (2500, 4, 2));
        assert_eq!(w.random_transitions(50, 3), w.random_transitions(50, 3));
    }

    #[test]
    fn euler_maruyama_increments_have_the_diffusion_variance() {
        // Fine path of a linear drift: (h_{k+1} − h_k − f(h_k)Δt)/√Δt ~ N(0, g²).
        let g = [0.5, 2.0];
        let dt = 1e-3;
        let p = euler_maruyama(
            |h, _, out| {
                out[0] = -h[0];
                out[1] = 1.0;
            },
            &g,
            &[1.0, 0.0],
            &EmSchedule {
                dt,
                steps: 20_001,
                record_every: 1,
                obs_noise: 0.0,
            },
            4,
        );
        assert_eq!(p.len(), 20_001);
        for (d, gd) in g.iter().enumerate() {
            let z: Vec<f64> = (0..p.len() - 1)
                .map(|k| {
                    let f = if d == 0 { -p.state(k)[0] } else { 1.0 };
                    (p.state(k + 1)[d] - p.state(k)[d] - f * dt) / dt.sqrt()
                })
                .collect();
            let n = z.len() as f64;
            let v = z.iter().map(|x| x * x).sum::<f64>() / n;
            let expect = gd * gd;
            assert!(
                (v / expect - 1.0).abs() < 5.0 * (2.0 / n).sqrt(),
                "dim {d}: {v}"
            );
        }
        assert!((p.times[10] - 10.0 * dt).abs() < 1e-15);
    }

    #[test]
    fn lotka_volterra_conserves_its_invariant_without_noise_and_uses_the_thesis_grid() {
        let quiet = LotkaVolterra {
            diffusion: [0.0, 0.0],
            ..LotkaVolterra::default()
        };
        let p = quiet.simulate(0);
        assert_eq!(p.len(), 1000);
        assert!((p.times[999] - 9.99).abs() < 1e-9);
        let v0 = quiet.invariant(p.state(0));
        for k in 0..p.len() {
            // Explicit Euler drifts by O(Δt) per unit time: ~1e-3 over t = 10.
            assert!((quiet.invariant(p.state(k)) - v0).abs() < 5e-3, "step {k}");
        }
        // It oscillates around the fixed point (4, 2): x crosses 4 several times.
        let crossings = (1..p.len())
            .filter(|&k| (p.state(k)[0] - 4.0).signum() != (p.state(k - 1)[0] - 4.0).signum())
            .count();
        assert!(crossings >= 6, "{crossings}");
        let (train, test) = LotkaVolterra::default().thesis_splits(5);
        assert_eq!((train.len(), test.len()), (10, 10));
        assert!(train.iter().chain(&test).all(|s| s.len() == 50));
        assert!((test[0].times[0] - 5.0).abs() < 1e-9);
        assert!(train.iter().all(|s| s.states.iter().all(|v| *v > 0.0)));
    }

    #[test]
    fn lorenz_paths_stay_on_the_attractor_and_visit_both_wings() {
        let l = Lorenz::default();
        let p = l.simulate(6);
        assert_eq!(p.len(), 2000);
        assert_eq!(p.state(0), &[1.0, 1.0, 28.0]);
        // The deterministic attractor lies in |x| < 20, |y| < 28, 0 < z < 50; unit noise
        // widens it slightly.
        for k in 0..p.len() {
            let s = p.state(k);
            assert!(
                s[0].abs() < 25.0 && s[1].abs() < 35.0 && s[2] > -5.0 && s[2] < 55.0,
                "{s:?}"
            );
        }
        let wing = |k: usize| p.state(k)[0] > 0.0;
        let switches = (1..p.len()).filter(|&k| wing(k) != wing(k - 1)).count();
        assert!(switches >= 4, "{switches} wing switches");
        // Long-run mean of z on the attractor is about κ − 1 − ... ≈ 23.5.
        let zbar = (500..p.len()).map(|k| p.state(k)[2]).sum::<f64>() / 1500.0;
        assert!((zbar - 23.5).abs() < 2.0, "mean z {zbar}");
        let (train, test) = l.thesis_splits(6);
        assert_eq!(
            (train.len(), train[0].len(), test.len(), test[0].len()),
            (20, 50, 10, 100)
        );
        assert_eq!(train[0].states, p.window(0, 50).states);
        // The code's sequences: 20 of 24 from the start of each half.
        let (train, test) = l.splits(6, (20, 24), (20, 24));
        assert_eq!((train.len(), train[19].len(), test.len()), (20, 24, 20));
        assert_eq!(test[1].states, p.window(1000 + 24, 24).states);
        // Observation noise is applied to the kept states only.
        let noisy = Lorenz {
            schedule: EmSchedule {
                obs_noise: 0.5,
                ..l.schedule
            },
            ..l.clone()
        }
        .simulate(6);
        let r: Vec<f64> = noisy
            .states
            .iter()
            .zip(&p.states)
            .map(|(a, b)| a - b)
            .collect();
        let v = r.iter().map(|x| x * x).sum::<f64>() / r.len() as f64;
        assert!(
            (v / 0.25 - 1.0).abs() < 5.0 * (2.0 / r.len() as f64).sqrt(),
            "{v}"
        );
    }
}
