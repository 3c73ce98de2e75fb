//! Chapter example, Depeweg (2019) *Modeling epistemic and aleatoric uncertainty with Bayesian
//! neural networks and latent variables*, ch. 7 §7.1: model-based policy search on wet-chicken.
//!
//! A BNN+LV (2 × 20, black-box α = 0.5, the noise fixed at Σ = 10⁻⁵ as in the thesis) learns
//! the river's change of state `Δ = s' − s` from 2 500 random transitions. A policy network
//! `[2, 20, 20, 2]` (tanh to the action box) is trained by Alg. 1 (`rollout::policy_search`):
//! roll-outs of `T = 5` steps under `K = 20` weight draws from minibatches of 10 start states,
//! the cost `l − y` summed, gradients through the frozen model. Then the policy runs on the
//! true river: the average reward per step of 1 000 canoeists over 200 steps, beside random
//! paddling and the policy before training (Table 7.1: −2.37 for α = 0.5; the evaluation
//! protocol is the project's). Roll-out states are clamped to the river. Last, the model's
//! bias: the searched policy and a hand-made one (to x = 3.5, back above y = 2) scored by the
//! search's own criterion, the mean cost of 5 steps from the data's states, in the model and on
//! the true river. Here the model is optimistic about the searched policy and pessimistic
//! about the hand-made one, so the search prefers the worse policy. Then why: the next state's
//! distribution at five states (as Fig. 7.2), the river's against the BNN+LV's and a point
//! MLP's (learned Gaussian noise) trained on the same transitions.
//!
//! `cargo run --release --example depeweg_ch7_policy_search`

use bnn_burn::host::{matrix, to_vec};
use bnn_burn::layers::WeightConfig;
use bnn_burn::likelihood::{GaussianLikelihoodConfig, NoiseFit};
use bnn_burn::nets::{BnnLvConfig, MlpConfig};
use bnn_burn::objective::AlphaConfig;
use bnn_burn::posterior::PosteriorConfig;
use bnn_burn::recipes::depeweg_weights;
use bnn_burn::rollout::{
    Dynamics, DynamicsDraw, Policy, PolicyConfig, PolicySearchConfig, policy_search,
};
use bnn_burn::train::{TrainConfig, Trainer};
use bnn_burn::training_device;
use bnn_datasets::dynamics::WetChicken;
use burn::module::Module;
use burn::tensor::{Device, Tensor};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::error::Error;

/// The policy's actions for `states`, on `device`.
fn actions(policy: &Policy, states: &[[f64; 2]], device: &Device) -> Vec<[f64; 2]> {
    let flat: Vec<f64> = states.iter().flatten().copied().collect();
    let a = to_vec(policy.forward(matrix(&flat, 2, device)));
    a.chunks(2).map(|c| [c[0], c[1]]).collect()
}

fn main() -> Result<(), Box<dyn Error>> {
    let world = WetChicken::default();
    let data = world.random_transitions(2_500, 1);
    let n = data.len();
    let x: Vec<f64> = data
        .states
        .iter()
        .zip(&data.actions)
        .flat_map(|(s, a)| [s[0], s[1], a[0], a[1]])
        .collect();
    let delta: Vec<f64> = data
        .states
        .iter()
        .zip(&data.next_states)
        .flat_map(|(s, t)| [t[0] - s[0], t[1] - s[1]])
        .collect();
    let device = training_device();
    let (xs, ys) = (matrix(&x, 4, &device), matrix(&delta, 2, &device));
    let mlp_data = (xs.clone(), ys.clone());

    println!("== Wet-chicken: BNN+LV 2 × 20 (α = 0.5, Σ = 10⁻⁵) on {n} random transitions");
    let started = std::time::Instant::now();
    let config = TrainConfig::new(1500)
        .with_batch_size(n.div_ceil(25))
        .with_learning_rate(3e-3)
        .with_train_samples(25)
        .with_seed(2)
        .with_progress(false);
    let likelihood = GaussianLikelihoodConfig::new()
        .with_d_output(2)
        .with_noise_std(1e-5_f64.sqrt())
        .with_fit(NoiseFit::Fixed);
    let build = |d: &Device| {
        let mlp = MlpConfig::new(4, vec![20, 20], 2).with_weights(depeweg_weights(1.0));
        BnnLvConfig::new(mlp).init(likelihood.init(d)?, n, d)
    };
    let (model, _) = Trainer::new(config)
        .with_objective(AlphaConfig::new().with_alpha(0.5).init()?)
        .build_and_fit(build, (xs, ys))?;
    println!("   trained in {:.0} s", started.elapsed().as_secs_f64());
    let policy =
        PolicyConfig::new(2, vec![20, 20], vec![-1.0, -1.0], vec![1.0, 1.0]).init(&device)?;
    let plain = device.clone().inner();
    let before = world.average_reward(1000, 200, 11, |s| {
        actions(&policy.clone().valid(), s, &plain)
    });
    let starts: Vec<f64> = data.states.iter().flatten().copied().collect();
    let starts = matrix(&starts, 2, &device);
    // The cost of a step: the distance to the waterfall, l − y of the next state.
    let cost = |s: &Tensor<3>| {
        let [k, b, _] = s.dims();
        (s.clone().narrow(2, 1, 1).neg() + world.length).reshape([k, b])
    };
    let search = PolicySearchConfig::new(5, 100)
        .with_batch_size(10)
        .with_samples(20)
        .with_learning_rate(1e-5)
        .with_state_box(Some((vec![0.0, 0.0], vec![world.width, world.length])))
        .with_seed(3);
    let started = std::time::Instant::now();
    let (policy, report) = policy_search(&model, policy, starts.clone(), cost, &search)?;
    println!(
        "   policy search: {} epochs of {} steps in {:.0} s; model cost per roll-out {:.2} → {:.2}",
        report.epoch_costs.len(),
        n.div_ceil(10),
        started.elapsed().as_secs_f64(),
        report.epoch_costs[0],
        report.epoch_costs[report.epoch_costs.len() - 1]
    );
    let trained = policy.valid();
    let after = world.average_reward(1000, 200, 11, |s| actions(&trained, s, &plain));
    let mut rng = StdRng::seed_from_u64(5);
    let random = world.average_reward(1000, 200, 11, |s| {
        s.iter()
            .map(|_| [rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0)])
            .collect()
    });
    println!("\n| policy on the true river | average reward per step |");
    println!("|---|---:|");
    println!("| random paddling | {random:.2} |");
    println!("| the policy before training | {before:.2} |");
    println!("| the policy after search | {after:.2} |");

    // The search's criterion in the model and on the true river, for the searched policy and
    // a hand-made threshold policy.
    let frozen = model.clone().valid();
    let hand = |s: Tensor<3>| {
        let x = s.clone().narrow(2, 0, 1);
        let y = s.narrow(2, 1, 1);
        let ax = (x.neg() + 3.5).clamp(-1.0, 1.0);
        let ay = ((y.neg() + 2.0) * 5.0).clamp(-1.0, 1.0);
        Tensor::cat(vec![ax, ay], 2)
    };
    let searched = |s: Tensor<3>| trained.forward(s);
    let in_model = |act: &dyn Fn(Tensor<3>) -> Tensor<3>| {
        let draw = frozen
            .dynamics(50)
            .with_state_box(&[0.0, 0.0], &[world.width, world.length]);
        let c = to_vec(draw.unfold(act, starts.clone().inner(), 5, cost));
        c.iter().sum::<f64>() / c.len() as f64
    };
    let on_river = |act: &dyn Fn(Tensor<3>) -> Tensor<3>| {
        let mut rng = StdRng::seed_from_u64(17);
        let mut states: Vec<[f64; 2]> = data
            .states
            .iter()
            .flat_map(|s| std::iter::repeat_n(*s, 20))
            .collect();
        let mut total = 0.0;
        for _ in 0..5 {
            let flat: Vec<f64> = states.iter().flatten().copied().collect();
            let a = to_vec(act(matrix(&flat, 2, &plain).unsqueeze_dim::<3>(0)));
            for (s, a) in states.iter_mut().zip(a.chunks(2)) {
                *s = world.step(*s, [a[0], a[1]], &mut rng).next;
                total += world.length - s[1];
            }
        }
        total / (5 * states.len()) as f64
    };
    let hand_reward = world.average_reward(1000, 200, 11, |s| {
        let flat: Vec<f64> = s.iter().flatten().copied().collect();
        let a = to_vec(hand(matrix(&flat, 2, &plain).unsqueeze_dim::<3>(0)));
        a.chunks(2).map(|c| [c[0], c[1]]).collect()
    });
    println!("\n| policy | 5-step cost in the model | on the true river | average reward |");
    println!("|---|---:|---:|---:|");
    println!(
        "| searched | {:.2} | {:.2} | {after:.2} |",
        in_model(&searched),
        on_river(&searched)
    );
    println!(
        "| hand-made | {:.2} | {:.2} | {hand_reward:.2} |",
        in_model(&hand),
        on_river(&hand)
    );

    // The next state at five (state, action) pairs: the share of resets to the origin and
    // the mean next y, on the river (20 000 steps) and in each model (50 draws × 200).
    let config = TrainConfig::new(1500)
        .with_batch_size(n.div_ceil(25))
        .with_learning_rate(1e-3)
        .with_seed(4)
        .with_progress(false);
    let build = |d: &Device| {
        MlpConfig::new(4, vec![20, 20], 2)
            .with_weights(WeightConfig::of(PosteriorConfig::point()))
            .init_regressor(d)
    };
    let (mlp, _) = Trainer::new(config).build_and_fit(build, mlp_data)?;
    let mlp = mlp.valid();
    let pairs = [
        ([2.5, 2.5], [0.0, 0.0]),
        ([2.0, 1.0], [1.0, 1.0]),
        ([4.5, 1.0], [0.0, 0.0]),
        ([4.0, 4.0], [0.0, 0.0]),
        ([5.0, 4.0], [1.0, 1.0]),
    ];
    let in_draws = |draw: DynamicsDraw<'_>, s: [f64; 2], a: [f64; 2]| {
        let (k, b) = (draw.samples(), 200);
        let states = matrix(&s.repeat(k * b), 2, &plain).reshape([k, b, 2]);
        let actions = matrix(&a.repeat(k * b), 2, &plain).reshape([k, b, 2]);
        let next = to_vec(draw.step(states, actions));
        summary(next.chunks(2).map(|c| [c[0], c[1]]))
    };
    let bounds = ([0.0, 0.0], [world.width, world.length]);
    println!("\n| state, action | river: resets, mean y' | BNN+LV | MLP |");
    println!("|---|---:|---:|---:|");
    for (s, a) in pairs {
        let mut rng = StdRng::seed_from_u64(19);
        let river = summary((0..20_000).map(|_| world.step(s, a, &mut rng).next));
        let lv = in_draws(
            frozen.dynamics(50).with_state_box(&bounds.0, &bounds.1),
            s,
            a,
        );
        let net = in_draws(mlp.dynamics(50).with_state_box(&bounds.0, &bounds.1), s, a);
        let cell = |(r, m): (f64, f64)| format!("{:.0} %, {m:.2}", 100.0 * r);
        println!(
            "| {s:?}, {a:?} | {} | {} | {} |",
            cell(river),
            cell(lv),
            cell(net)
        );
    }
    Ok(())
}

/// The share of next states at the origin (resets: both coordinates below 0.25) and the mean
/// next `y`.
fn summary(next: impl Iterator<Item = [f64; 2]>) -> (f64, f64) {
    let (mut resets, mut y, mut count) = (0.0, 0.0, 0.0);
    for s in next {
        resets += f64::from(u8::from(s[0] < 0.25 && s[1] < 0.25));
        y += s[1];
        count += 1.0;
    }
    (resets / count, y / count)
}
