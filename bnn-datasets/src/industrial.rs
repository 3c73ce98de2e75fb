//! The Industrial Benchmark (Hein et al. 2017; Depeweg 2019 §4.3.2): a port of its public
//! Python reference (`industrial-benchmark-python` 2.0), tested step by step against that
//! reference's trajectories, and the thesis's data protocol (random exploration per setpoint,
//! the 15-step time embedding, the log–logit cost transform).

use crate::error::DataError;
use crate::table::RegressionData;
use crate::toy::standard_normal;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::f64::consts::PI;

/// Number of values in [`IbState::values`].
pub const MARKOV_VALUES: usize = 29;

/// The hidden Markov state of the benchmark (the reference's `state`, setpoint included).
#[derive(Debug, Clone, PartialEq)]
pub struct IbState {
    /// Setpoint `p` (held constant: the reference's stationary mode, as the thesis uses it).
    pub setpoint: f64,
    /// Velocity `v ∈ [0, 100]` (steered).
    pub velocity: f64,
    /// Gain `g ∈ [0, 100]` (steered).
    pub gain: f64,
    /// Shift `h ∈ [0, 100]` (steered).
    pub shift: f64,
    /// Fatigue `f` (observed).
    pub fatigue: f64,
    /// Consumption `c` (observed).
    pub consumption: f64,
    /// Cost `3f + c` (the reward is its negative).
    pub cost: f64,
    /// The last ten operational costs, oldest first.
    pub operational_costs: [f64; 10],
    /// The current operational cost `exp((2p + 2.5g + 4v)/100)`.
    pub current_operational_cost: f64,
    /// Basic fatigue, without its bifurcation.
    pub basic_fatigue: f64,
    /// The delayed operational cost (the buffer's convolution).
    pub delayed_operational_cost: f64,
    /// Hidden gain fatigue.
    pub hidden_gain: f64,
    /// Hidden velocity fatigue.
    pub hidden_velocity: f64,
    /// Effective shift, the goldstone's position, in `[−1.5, 1.5]`.
    pub effective_shift: f64,
    /// The goldstone's domain (±1).
    pub domain: i32,
    /// The goldstone's system response (+1 advantageous, −1 disadvantageous).
    pub response: i32,
    /// The goldstone's angle index in `−6..=6`.
    pub phi: i32,
    /// Effective gain.
    pub effective_gain: f64,
    /// Effective velocity.
    pub effective_velocity: f64,
    /// Miscalibration, the goldstone penalty.
    pub miscalibration: f64,
    first: bool,
}

impl IbState {
    /// The state before the reference constructor's first step.
    fn initial(setpoint: f64) -> Self {
        Self {
            setpoint,
            velocity: 50.0,
            gain: 50.0,
            shift: 50.0,
            fatigue: 0.0,
            consumption: 0.0,
            cost: 0.0,
            operational_costs: [0.0; 10],
            current_operational_cost: 0.0,
            basic_fatigue: 0.0,
            delayed_operational_cost: 0.0,
            hidden_gain: 0.0,
            hidden_velocity: 0.0,
            effective_shift: 0.0,
            domain: 1,
            response: 1,
            phi: 0,
            effective_gain: 0.0,
            effective_velocity: 0.0,
            miscalibration: 0.0,
            first: true,
        }
    }

    /// The observable state `[p, v, g, h, f, c]`.
    pub fn observation(&self) -> [f64; 6] {
        [
            self.setpoint,
            self.velocity,
            self.gain,
            self.shift,
            self.fatigue,
            self.consumption,
        ]
    }

    /// The Markov state in the reference's order: the cost buffer, then `coc, fb, oc, hg, hv,
    /// he, domain, response, phi, ge, ve, MC, v, g, h, f, c, cost, reward`.
    pub fn values(&self) -> [f64; MARKOV_VALUES] {
        let mut out = [0.0; MARKOV_VALUES];
        out[..10].copy_from_slice(&self.operational_costs);
        out[10..].copy_from_slice(&[
            self.current_operational_cost,
            self.basic_fatigue,
            self.delayed_operational_cost,
            self.hidden_gain,
            self.hidden_velocity,
            self.effective_shift,
            self.domain as f64,
            self.response as f64,
            self.phi as f64,
            self.effective_gain,
            self.effective_velocity,
            self.miscalibration,
            self.velocity,
            self.gain,
            self.shift,
            self.fatigue,
            self.consumption,
            self.cost,
            -self.cost,
        ]);
        out
    }
}

/// The random draws of one step, in the reference's order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IbNoise {
    /// Exponential draws (scale 0.1) of the gain's and the velocity's fatigue noise.
    pub exponential: [f64; 2],
    /// Uniform draws on `[0, 1)` scaling the gain's and the velocity's fatigue noise.
    pub uniform: [f64; 2],
    /// Uniform draws deciding the gain's and the velocity's Bernoulli switches: a switch is on
    /// when its draw is below the effective gain (velocity) clipped to `[0.001, 0.999]`.
    pub switch: [f64; 2],
    /// The `N(2.4, 0.4²)` draw of the fatigue's amplification once a hidden fatigue saturates.
    pub saturated: f64,
    /// The standard normal draw of the consumption's noise.
    pub consumption: f64,
}

impl IbNoise {
    /// Fresh draws.
    pub fn draw(rng: &mut StdRng) -> Self {
        let exponential = [
            -0.1 * (1.0 - rng.random::<f64>()).ln(),
            -0.1 * (1.0 - rng.random::<f64>()).ln(),
        ];
        Self {
            exponential,
            uniform: [rng.random(), rng.random()],
            switch: [rng.random(), rng.random()],
            saturated: 2.4 + 0.4 * standard_normal(rng),
            consumption: standard_normal(rng),
        }
    }
}

/// One of the goldstone's 13 penalty functions: the normalised, linearly biased Goldstone
/// potential at angle `φ`, its radius transformed so that its minimum lies at `opt`.
#[derive(Debug, Clone, Copy)]
struct Penalty {
    phi: f64,
    opt: f64,
    min: f64,
}

/// The normalised Goldstone potential's constants `(α, β, κ)`.
fn nlgp_constants() -> (f64, f64, f64) {
    let u0 = (1.0 + 2f64.sqrt()).cbrt() / 3f64.sqrt();
    let r0 = u0 + 1.0 / (3.0 * u0);
    let k = 8.0 * (2.0f64 / 27.0).sqrt();
    let lambda = 2.0 * r0 * r0 - r0.powi(4) + k * r0;
    (2.0 / lambda, 1.0 / lambda, -k / lambda)
}

fn polar_nlgp(r: f64, phi: f64) -> f64 {
    let (alpha, beta, kappa) = nlgp_constants();
    let rsq = r * r;
    -alpha * rsq + beta * rsq * rsq + kappa * phi.sin() * r
}

/// The radius along `φ` where the potential is smallest.
fn global_minimum_radius(phi: f64) -> f64 {
    let (_, beta, kappa) = nlgp_constants();
    let qh = kappa * phi.sin().abs() / (8.0 * beta);
    let sign = if phi.sin() < 0.0 { -1.0 } else { 1.0 };
    if qh <= -(1.0f64 / 27.0).sqrt() {
        let u = (-sign * qh + (qh * qh - 1.0 / 27.0).sqrt()).cbrt();
        u + 1.0 / (3.0 * u)
    } else {
        sign * (4.0f64 / 3.0).sqrt() * (1.0 / 3.0 * (-qh * 27f64.sqrt()).acos()).cos()
    }
}

impl Penalty {
    fn new(phi: f64, max_required_step: f64) -> Self {
        let phi = phi.rem_euclid(2.0 * PI);
        let mut opt = phi.sin().abs().max(max_required_step);
        if phi >= PI {
            opt = -opt;
        }
        Self {
            phi,
            opt,
            min: global_minimum_radius(phi),
        }
    }

    fn value(&self, r: f64) -> f64 {
        let (opt, min) = (self.opt.abs(), self.min.abs());
        let radius = if r.abs() <= opt {
            r * min / opt
        } else {
            let exponent = (2.0 - opt) / (2.0 - min);
            let scaling = (2.0 - min) / (2.0 - opt).powf(exponent);
            signum(r) * (min + scaling * (r.abs() - opt).powf(exponent))
        };
        polar_nlgp(radius, self.phi)
    }
}

/// NumPy's `sign`: 0 at 0.
fn signum(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// The goldstone's largest angle index (24 steps per turn / 4).
const STRONGEST: i32 = 6;

/// The Industrial Benchmark at a fixed setpoint (Hein et al. 2017), as its Python reference
/// computes it: steerings `v, g, h` moved by actions in `[−1, 1]³`, fatigue with bifurcating
/// hidden dynamics, a delayed operational cost and the goldstone miscalibration; cost `3f + c`.
#[derive(Debug, Clone)]
pub struct IndustrialBenchmark {
    state: IbState,
    penalties: Vec<Penalty>,
    max_required_step: f64,
}

impl IndustrialBenchmark {
    /// A benchmark at `setpoint`, after the reference constructor's zero-action step.
    ///
    /// # Errors
    /// [`DataError::OutOfRange`] naming `setpoint` unless it is in `[0, 100]`.
    pub fn new(setpoint: f64, rng: &mut StdRng) -> Result<Self, DataError> {
        let noise = IbNoise::draw(rng);
        Self::with_noise(setpoint, &noise)
    }

    /// A benchmark at `setpoint` whose constructor step uses `noise`.
    ///
    /// # Errors
    /// As [`IndustrialBenchmark::new`].
    pub fn with_noise(setpoint: f64, noise: &IbNoise) -> Result<Self, DataError> {
        if !(0.0..=100.0).contains(&setpoint) {
            return Err(DataError::OutOfRange {
                what: "setpoint".into(),
                expected: "a value in [0, 100]".into(),
                found: setpoint.to_string(),
            });
        }
        let max_required_step = (15.0 / 180.0 * PI).sin();
        let penalties = (-STRONGEST..=STRONGEST)
            .map(|i| Penalty::new((i * 2) as f64 * PI / 24.0, max_required_step))
            .collect();
        let mut ib = Self {
            state: IbState::initial(setpoint),
            penalties,
            max_required_step,
        };
        ib.step_with([0.0; 3], noise);
        Ok(ib)
    }

    /// The hidden Markov state.
    pub fn state(&self) -> &IbState {
        &self.state
    }

    /// One step under `action` (clipped to `[−1, 1]³`) with fresh draws; the step's cost.
    pub fn step(&mut self, action: [f64; 3], rng: &mut StdRng) -> f64 {
        let noise = IbNoise::draw(rng);
        self.step_with(action, &noise)
    }

    /// One step under `action` with the given draws; the step's cost.
    pub fn step_with(&mut self, action: [f64; 3], noise: &IbNoise) -> f64 {
        self.add_action(action);
        self.update_fatigue(noise);
        self.update_operational_cost();
        self.update_goldstone();
        let s = &mut self.state;
        let hidden = s.delayed_operational_cost - 25.0 * (s.miscalibration - 1.0);
        s.consumption = hidden - noise.consumption * (1.0 + 0.005 * hidden);
        s.cost = 3.0 * s.fatigue + s.consumption;
        s.cost
    }

    /// How far a unit action moves each steering: `(1, 10, 5.75…)`, the last
    /// `(sin 15° / 0.9) · 100 / 5`.
    pub fn steering_steps() -> [f64; 3] {
        [1.0, 10.0, ((15.0 / 180.0 * PI).sin() / 0.9) * 100.0 / 5.0]
    }

    /// The steerings after `action` from `(v, g, h)`: each moved by its
    /// [`IndustrialBenchmark::steering_steps`] times its action (clipped to `[−1, 1]`), then
    /// clipped to `[0, 100]`.
    pub fn steer(steerings: [f64; 3], action: [f64; 3]) -> [f64; 3] {
        let steps = Self::steering_steps();
        [0, 1, 2].map(|j| (steerings[j] + steps[j] * action[j].clamp(-1.0, 1.0)).clamp(0.0, 100.0))
    }

    fn add_action(&mut self, action: [f64; 3]) {
        let s = &mut self.state;
        [s.velocity, s.gain, s.shift] = Self::steer([s.velocity, s.gain, s.shift], action);
        s.effective_shift = (5.0 * s.shift / 100.0 - 0.02 * s.setpoint - 1.5).clamp(-1.5, 1.5);
    }

    fn update_fatigue(&mut self, noise: &IbNoise) {
        const TOLERANCE: f64 = 0.05;
        const START: f64 = 1.2;
        const MAX: f64 = 5.0;
        let s = &mut self.state;
        let (v, g, p) = (s.velocity, s.gain, s.setpoint);
        let (eff_v, eff_g) = effective_action(v, g, p);
        s.effective_gain = eff_g;
        s.effective_velocity = eff_v;
        let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
        let mut noise_g = 2.0 * (sigmoid(noise.exponential[0]) - 0.5);
        let mut noise_v = 2.0 * (sigmoid(noise.exponential[1]) - 0.5);
        let on = |u: f64, p: f64| if u < p.clamp(0.001, 0.999) { 1.0 } else { 0.0 };
        noise_g += (1.0 - noise_g) * noise.uniform[0] * on(noise.switch[0], eff_g) * eff_g;
        noise_v += (1.0 - noise_v) * noise.uniform[1] * on(noise.switch[1], eff_v) * eff_v;
        let hidden = |h: f64, eff: f64, n: f64| {
            if eff <= TOLERANCE {
                eff
            } else if h >= START {
                MAX.min(1.1 * h)
            } else {
                0.9 * h + n / 3.0
            }
        };
        s.hidden_gain = hidden(s.hidden_gain, eff_g, noise_g);
        s.hidden_velocity = hidden(s.hidden_velocity, eff_v, noise_v);
        let alpha = if s.hidden_velocity.max(s.hidden_gain) == MAX {
            sigmoid(noise.saturated)
        } else {
            noise_v.max(noise_g)
        };
        let basic = (30000.0 / (5.0 * v + 100.0) - 0.01 * (g * g)).max(0.0);
        s.fatigue = basic * (1.0 + 2.0 * alpha) / 3.0;
        s.basic_fatigue = basic;
    }

    fn update_operational_cost(&mut self) {
        const KERNEL: [f64; 5] = [0.11111, 0.22222, 0.33333, 0.22222, 0.11111];
        let s = &mut self.state;
        let costs = 2.0 * s.setpoint + 2.5 * s.gain + 4.0 * s.velocity;
        let o = (costs / 100.0).exp();
        s.current_operational_cost = o;
        if s.first {
            s.operational_costs = [o; 10];
            s.first = false;
        } else {
            s.operational_costs.rotate_left(1);
            s.operational_costs[9] = o;
        }
        s.delayed_operational_cost = s
            .operational_costs
            .iter()
            .zip(KERNEL)
            .map(|(o, k)| o * k)
            .sum();
    }

    /// The goldstone's state transition and penalty at the effective shift.
    fn update_goldstone(&mut self) {
        let safe = self.max_required_step / 2.0;
        let s = &mut self.state;
        let position = s.effective_shift;
        let inside = position.abs() <= safe;
        let old = s.domain;
        if !inside {
            s.domain = signum(position) as i32;
        }
        if s.domain != old {
            s.response = 1;
        }
        s.phi += if inside {
            -(signum(s.phi as f64) as i32)
        } else if s.phi == -s.domain * STRONGEST {
            0
        } else {
            s.response * signum(position) as i32
        };
        if s.phi.abs() >= STRONGEST {
            s.response = -1;
            s.phi = 2 * STRONGEST - (s.phi + 4 * STRONGEST).rem_euclid(4 * STRONGEST);
        }
        if s.phi == 0 && inside {
            (s.domain, s.phi, s.response) = (1, 0, 1);
        }
        let penalty = &self.penalties[(STRONGEST + s.phi) as usize];
        s.miscalibration = -penalty.value(position);
    }

    /// `per_setpoint` trajectories of `steps` steps at each setpoint under uniform random
    /// actions `2U − 1` (the thesis's exploration: 7 × 1 000 steps at 10, 20, …, 100 to train).
    ///
    /// # Errors
    /// As [`IndustrialBenchmark::new`], for the first setpoint out of range.
    pub fn random_trajectories(
        setpoints: &[f64],
        per_setpoint: usize,
        steps: usize,
        seed: u64,
    ) -> Result<Vec<IbTrajectory>, DataError> {
        Self::trajectories(setpoints, per_setpoint, steps, Exploration::Uniform, seed)
    }

    /// `per_setpoint` trajectories of `steps` steps at each setpoint under `exploration`.
    ///
    /// # Errors
    /// As [`IndustrialBenchmark::new`], for the first setpoint out of range.
    pub fn trajectories(
        setpoints: &[f64],
        per_setpoint: usize,
        steps: usize,
        exploration: Exploration,
        seed: u64,
    ) -> Result<Vec<IbTrajectory>, DataError> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut out = Vec::with_capacity(setpoints.len() * per_setpoint);
        for &p in setpoints {
            for _ in 0..per_setpoint {
                let mut ib = Self::new(p, &mut rng)?;
                let mut t = IbTrajectory {
                    setpoint: p,
                    ..IbTrajectory::default()
                };
                for _ in 0..steps {
                    let s = ib.state();
                    let a = exploration.action([s.velocity, s.gain, s.shift], &mut rng);
                    t.push(&mut ib, a, &mut rng);
                }
                out.push(t);
            }
        }
        Ok(out)
    }
}

/// How exploration data is gathered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exploration {
    /// Uniform random actions `2U − 1` (§7.1.4).
    Uniform,
    /// The risk experiment's behaviour policy (Depeweg 2019 eqs. 7.37–7.39): velocity and gain
    /// pushed back by `z ~ N(0.5, 1/3)` when below 40 or above 60 and uniform on `[−1, 1]`
    /// between; the shift uniform. The data stay near `v, g ∈ [40, 60]`.
    Behaviour,
}

impl Exploration {
    /// An action from the steerings `(v, g, h)`.
    pub fn action(&self, steerings: [f64; 3], rng: &mut StdRng) -> [f64; 3] {
        let uniform = |rng: &mut StdRng| 2.0 * rng.random::<f64>() - 1.0;
        match self {
            Self::Uniform => [0; 3].map(|_| uniform(rng)),
            Self::Behaviour => {
                let back = |x: f64, rng: &mut StdRng| {
                    let z = 0.5 + standard_normal(rng) / 3f64.sqrt();
                    if x < 40.0 {
                        z
                    } else if x > 60.0 {
                        -z
                    } else {
                        uniform(rng)
                    }
                };
                [
                    back(steerings[0], rng),
                    back(steerings[1], rng),
                    uniform(rng),
                ]
            }
        }
    }
}

/// The effective velocity and gain of the steerings at setpoint `p`, each scaled to `[0, 1]`.
fn effective_action(v: f64, g: f64, p: f64) -> (f64, f64) {
    let a = |a: f64| a + 101.0 - p;
    let b = |b: f64| b + 1.0 + p;
    let velocity = |a: f64, b: f64| (b + 1.0) / a;
    let (lo, hi) = (velocity(a(100.0), b(0.0)), velocity(a(0.0), b(100.0)));
    let eff_v = (velocity(a(v), b(g)) - lo) / (hi - lo);
    let (lo, hi) = (1.0 / b(100.0), 1.0 / b(0.0));
    let eff_g = (1.0 / b(g) - lo) / (hi - lo);
    (eff_v, eff_g)
}

/// One trajectory of the benchmark: each step's action, the steerings after it and its cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IbTrajectory {
    /// The setpoint `p`.
    pub setpoint: f64,
    /// Actions `(Δv, Δg, Δh)`.
    pub actions: Vec<[f64; 3]>,
    /// Steerings `(v, g, h)` after each action.
    pub steerings: Vec<[f64; 3]>,
    /// Costs `3f + c` of each step.
    pub costs: Vec<f64>,
}

impl IbTrajectory {
    /// One step of `ib` under `action`, appended; its cost.
    pub fn push(
        &mut self,
        ib: &mut IndustrialBenchmark,
        action: [f64; 3],
        rng: &mut StdRng,
    ) -> f64 {
        let cost = ib.step(action, rng);
        let s = ib.state();
        self.actions.push(action);
        self.steerings.push([s.velocity, s.gain, s.shift]);
        self.costs.push(cost);
        cost
    }
}

/// Inputs of the time embedding (Depeweg 2019 eqs. 5.1–5.4): `p`, then `v`, `g` and `h` at
/// `t − w + 1 … t`, then the cost at `t − w … t − 1`; `1 + 4w` columns (61 for `w = 15`).
pub fn embed(setpoint: f64, steerings: &[[f64; 3]], costs: &[f64]) -> Vec<f64> {
    let w = costs.len();
    assert_eq!(steerings.len(), w, "embed: {w} costs need {w} steerings");
    let mut x = Vec::with_capacity(1 + 4 * w);
    x.push(setpoint);
    for k in 0..3 {
        x.extend(steerings.iter().map(|s| s[k]));
    }
    x.extend_from_slice(costs);
    x
}

/// The regression task of the time embedding with window `w` (15 in the thesis): at each step
/// `t ≥ w` of each trajectory, inputs [`embed`]`(p, steerings[t−w+1..=t], costs[t−w..t])` and
/// the target `costs[t]` (the reward's negative: RMSE and log-likelihood are the same).
///
/// # Errors
/// [`DataError::Empty`] when no trajectory is longer than `w`.
pub fn time_embedding(
    trajectories: &[IbTrajectory],
    w: usize,
) -> Result<RegressionData, DataError> {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for t in trajectories {
        for i in w..t.costs.len() {
            x.extend(embed(
                t.setpoint,
                &t.steerings[i + 1 - w..=i],
                &t.costs[i - w..i],
            ));
            y.push(t.costs[i]);
        }
    }
    if y.is_empty() {
        return Err(DataError::Empty {
            what: format!("the industrial benchmark's time embedding of window {w}"),
        });
    }
    RegressionData::new(x, y, 1 + 4 * w, 1)
}

/// The thesis's cost transform for the policy chapter (Depeweg 2019 §7.1.4): a log, then a
/// logit of the log cost scaled into `(0, 1)`:
/// `c' = logit((ln(1 + c) − a)/(b − a))`, `a = ln(1 + 0.95 min c)`, `b = ln(1 + 1.05 max c)`
/// over the training costs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostTransform {
    /// `ln(1 + 0.95 min c)`.
    pub low: f64,
    /// `ln(1 + 1.05 max c)`.
    pub high: f64,
}

impl CostTransform {
    /// The transform of the training costs `costs`.
    ///
    /// # Errors
    /// [`DataError::Empty`] for no costs; [`DataError::OutOfRange`] naming the cost when one is
    /// not positive and finite (the log–logit needs `c > 0`).
    pub fn fit(costs: &[f64]) -> Result<Self, DataError> {
        if costs.is_empty() {
            return Err(DataError::Empty {
                what: "the costs of the cost transform".into(),
            });
        }
        if let Some((i, c)) = costs
            .iter()
            .enumerate()
            .find(|(_, c)| !(c.is_finite() && **c > 0.0))
        {
            return Err(DataError::OutOfRange {
                what: format!("cost {i} of the cost transform"),
                expected: "a positive, finite cost".into(),
                found: c.to_string(),
            });
        }
        let min = costs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = costs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Ok(Self {
            low: (1.0 + 0.95 * min).ln(),
            high: (1.0 + 1.05 * max).ln(),
        })
    }

    /// `c'` of a cost; costs beyond the training range's margins saturate at `logit(10⁻⁶)`
    /// and `logit(1 − 10⁻⁶)` instead of leaving the real line.
    pub fn forward(&self, cost: f64) -> f64 {
        let u = (((1.0 + cost.max(0.0)).ln() - self.low) / (self.high - self.low))
            .clamp(1e-6, 1.0 - 1e-6);
        (u / (1.0 - u)).ln()
    }

    /// The cost of a transformed value (the inverse of [`CostTransform::forward`]).
    pub fn inverse(&self, value: f64) -> f64 {
        let u = 1.0 / (1.0 + (-value).exp());
        (self.low + (self.high - self.low) * u).exp() - 1.0
    }
}

#[cfg(test)]
#[path = "industrial_tests.rs"]
mod tests;
