//! Table 7.1's Industrial Benchmark row (Depeweg 2019 §7.1.4): models of the transformed
//! cost's change from the 61-column time embedding, roll-outs whose steerings move by the
//! benchmark's known rule and whose cost by the model, and the thesis code's evaluation.

use bnn_burn::host::{matrix, to_vec};
use bnn_burn::rollout::{DynamicsDraw, Policy};
use bnn_datasets::industrial::{
    CostTransform, Exploration, IbTrajectory, IndustrialBenchmark, embed,
};
use burn::tensor::{Device, Tensor};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::error::Error;

/// The setpoints of the thesis's data, 10, 20, …, 100.
pub const SETPOINTS: [f64; 10] = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0];
/// The time embedding's window (eqs. 5.1–5.4: 15 steps).
pub const WINDOW: usize = 15;
/// Columns of a state and of a model input: `p`, 15 each of `v, g, h` and of the cost.
pub const D_STATE: usize = 1 + 4 * WINDOW;

/// A run's data: model rows `x_t = [p, v/g/h(t−14..t), c'(t−15..t−1)]` with the change
/// `c'_t − c'_{t−1}`, policy start states `X_t = [p, v/g/h(t−14..t), c'(t−14..t)]`, the cost
/// transform of the training costs, and column scales of both.
pub struct IbData {
    /// Model inputs, `D_STATE` columns.
    pub x: Vec<f64>,
    /// Changes of the transformed cost.
    pub delta: Vec<f64>,
    /// Policy start states, `D_STATE` columns.
    pub starts: Vec<f64>,
    /// The cost transform.
    pub transform: CostTransform,
}

/// Mean and std of each of `d` columns (a std of 0 becomes 1).
pub fn column_scales(rows: &[f64], d: usize) -> (Vec<f64>, Vec<f64>) {
    let n = (rows.len() / d).max(1) as f64;
    let mut mean = vec![0.0; d];
    for r in rows.chunks(d) {
        for (m, v) in mean.iter_mut().zip(r) {
            *m += v / n;
        }
    }
    let mut var = vec![0.0; d];
    for r in rows.chunks(d) {
        for ((s, v), m) in var.iter_mut().zip(r).zip(&mean) {
            *s += (v - m) * (v - m) / n;
        }
    }
    let std = var
        .into_iter()
        .map(|v| if v > 1e-16 { v.sqrt() } else { 1.0 })
        .collect();
    (mean, std)
}

/// `v` (rows of the scales' width) standardised column by column.
pub fn standardise(v: &[f64], (mean, std): &(Vec<f64>, Vec<f64>)) -> Vec<f64> {
    v.iter()
        .enumerate()
        .map(|(i, v)| (v - mean[i % mean.len()]) / std[i % std.len()])
        .collect()
}

/// `count` of the data's start states drawn uniformly (with replacement), flat.
pub fn pick_starts(data: &IbData, count: usize, seed: u64) -> Vec<f64> {
    let n = data.starts.len() / D_STATE;
    let mut rng = bnn_burn::host::HostNormals::new(seed);
    (0..count.min(n))
        .flat_map(|_| {
            let i = ((rng.uniform() * n as f64) as usize).min(n - 1);
            data.starts[i * D_STATE..(i + 1) * D_STATE].to_vec()
        })
        .collect()
}

/// The state `[p, v/g/h, c']` of a trajectory's last 15 steps (costs transformed).
pub fn state_of(t: &IbTrajectory, transform: &CostTransform) -> Vec<f64> {
    let c: Vec<f64> = t.costs[t.costs.len() - WINDOW..]
        .iter()
        .map(|c| transform.forward(*c))
        .collect();
    embed(t.setpoint, &t.steerings[t.steerings.len() - WINDOW..], &c)
}

/// The run's data from `per_setpoint` trajectories of `steps` steps at each setpoint under
/// `exploration`.
///
/// # Errors
/// Trajectories too short for the window, or costs the transform cannot take.
pub fn data(
    per_setpoint: usize,
    steps: usize,
    exploration: Exploration,
    seed: u64,
) -> Result<IbData, Box<dyn Error>> {
    if steps <= WINDOW {
        return Err(format!("--steps {steps}: more than the window of {WINDOW}").into());
    }
    let trajectories =
        IndustrialBenchmark::trajectories(&SETPOINTS, per_setpoint, steps, exploration, seed)?;
    let all: Vec<f64> = trajectories.iter().flat_map(|t| t.costs.clone()).collect();
    let transform = CostTransform::fit(&all)?;
    let (mut x, mut delta, mut starts) = (Vec::new(), Vec::new(), Vec::new());
    for t in &trajectories {
        let c: Vec<f64> = t.costs.iter().map(|c| transform.forward(*c)).collect();
        for i in WINDOW..steps {
            x.extend(embed(
                t.setpoint,
                &t.steerings[i + 1 - WINDOW..=i],
                &c[i - WINDOW..i],
            ));
            delta.push(c[i] - c[i - 1]);
        }
        for i in WINDOW - 1..steps {
            starts.extend(state(t, &c, i));
        }
    }
    Ok(IbData {
        x,
        delta,
        starts,
        transform,
    })
}

/// The state `X_i` of trajectory `t` (transformed costs `c`) after step `i ≥ 14`.
fn state(t: &IbTrajectory, c: &[f64], i: usize) -> Vec<f64> {
    embed(
        t.setpoint,
        &t.steerings[i + 1 - WINDOW..=i],
        &c[i + 1 - WINDOW..=i],
    )
}

/// The roll-out's transition on states `[K, B, 61]` under actions `[K, B, 3]`: each steering
/// moves by its known rule (clipped to `[0, 100]`), the model draws the transformed cost's
/// change from the shifted embedding, and the step's cost is the new cost in the system's
/// units.
pub fn transition(
    transform: CostTransform,
) -> impl Fn(&DynamicsDraw<'_>, Tensor<3>, Tensor<3>) -> (Tensor<3>, Tensor<2>) {
    move |draw, s, a| {
        let [k, b, _] = s.dims();
        let steps = IndustrialBenchmark::steering_steps();
        let mut parts = vec![s.clone().narrow(2, 0, 1)];
        for (j, step) in steps.iter().enumerate() {
            let history = s.clone().narrow(2, 1 + j * WINDOW, WINDOW);
            let last = history.clone().narrow(2, WINDOW - 1, 1);
            let next = (last + a.clone().narrow(2, j, 1) * *step).clamp(0.0, 100.0);
            parts.push(Tensor::cat(vec![history.narrow(2, 1, WINDOW - 1), next], 2));
        }
        let costs = s.narrow(2, 1 + 3 * WINDOW, WINDOW);
        let mut input = parts.clone();
        input.push(costs.clone());
        let change = draw.predict(Tensor::cat(input, 2));
        let cost = costs.clone().narrow(2, WINDOW - 1, 1) + change;
        parts.push(costs.narrow(2, 1, WINDOW - 1));
        parts.push(cost.clone());
        let span = transform.high - transform.low;
        let units = (burn::tensor::activation::sigmoid(cost) * span + transform.low).exp() - 1.0;
        (Tensor::cat(parts, 2), units.reshape([k, b]))
    }
}

/// A benchmark at setpoint `p` after a warm-up of `15 + U{0..49}` steps under `exploration`,
/// and its history.
///
/// # Errors
/// A setpoint the benchmark refuses.
pub fn warmed_up(
    p: f64,
    exploration: Exploration,
    rng: &mut StdRng,
) -> Result<(IndustrialBenchmark, IbTrajectory), Box<dyn Error>> {
    let mut ib = IndustrialBenchmark::new(p, rng)?;
    let mut t = IbTrajectory {
        setpoint: p,
        ..IbTrajectory::default()
    };
    for _ in 0..WINDOW + rng.random_range(0..50) {
        let s = ib.state();
        let a = exploration.action([s.velocity, s.gain, s.shift], rng);
        t.push(&mut ib, a, rng);
    }
    Ok((ib, t))
}

/// `steps` steps of every system under `act` (their states `[n, 61]` → actions), all systems
/// stepped in turn at each step: the costs, `[system][step]`.
pub fn run_policy(
    systems: &mut [(IndustrialBenchmark, IbTrajectory)],
    transform: &CostTransform,
    steps: usize,
    rng: &mut StdRng,
    mut act: impl FnMut(&[f64]) -> Vec<[f64; 3]>,
) -> Vec<Vec<f64>> {
    let mut costs = vec![Vec::with_capacity(steps); systems.len()];
    for _ in 0..steps {
        let states: Vec<f64> = systems
            .iter()
            .flat_map(|(_, t)| state_of(t, transform))
            .collect();
        let actions = act(&states);
        assert_eq!(actions.len(), systems.len(), "run_policy: one action each");
        for (((ib, t), a), c) in systems.iter_mut().zip(actions).zip(costs.iter_mut()) {
            c.push(t.push(ib, a, rng));
        }
    }
    costs
}

/// The thesis code's evaluation: at every setpoint `runs` benchmarks, a random warm-up of
/// `15 + U{0..49}` steps, then `steps` steps of `act` (states `[n, 61]` → actions); the mean
/// cost of those steps over all benchmarks.
///
/// # Errors
/// A benchmark that cannot be built.
pub fn evaluate(
    transform: &CostTransform,
    runs: usize,
    steps: usize,
    seed: u64,
    act: impl FnMut(&[f64]) -> Vec<[f64; 3]>,
) -> Result<f64, Box<dyn Error>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut systems = Vec::with_capacity(SETPOINTS.len() * runs);
    for &p in &SETPOINTS {
        for _ in 0..runs {
            systems.push(warmed_up(p, Exploration::Uniform, &mut rng)?);
        }
    }
    let costs = run_policy(&mut systems, transform, steps, &mut rng, act);
    // Summed step by step, system by system.
    let mut total = 0.0;
    for t in 0..steps {
        for c in &costs {
            total += c[t];
        }
    }
    Ok(total / (steps * systems.len()) as f64)
}

/// A policy's actions for states `[n, 61]`, on `device`.
pub fn actions(policy: &Policy, states: &[f64], device: &Device) -> Vec<[f64; 3]> {
    let a = to_vec(policy.forward(matrix(states, D_STATE, device)));
    a.chunks(3).map(|c| [c[0], c[1], c[2]]).collect()
}
