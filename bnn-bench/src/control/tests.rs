use super::*;
use bnn_datasets::industrial::Exploration;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    o: ControlOptions,
}

fn parse(args: &[&str]) -> ControlOptions {
    let mut all = vec!["control"];
    all.extend_from_slice(args);
    Cli::parse_from(all).o
}

#[test]
fn bad_options_are_named_and_every_column_runs_a_small_search() {
    for (args, flag) in [
        (
            &["--out", "x", "--column", "gaussian-process"][..],
            "--column",
        ),
        (&["--out", "x", "--runs", "0"][..], "--runs 0"),
        (
            &["--out", "x", "--transitions", "10"][..],
            "--transitions 10",
        ),
        (&["--out", "x", "--policy-lr", "0"][..], "--policy-lr 0"),
    ] {
        let err = parse(args).check().unwrap_err();
        assert!(err.contains(flag), "{err}");
    }
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 111);
    let dir = std::env::temp_dir().join(format!("bnn-control-{}", std::process::id()));
    let o = parse(&[
        "--out",
        dir.to_str().unwrap(),
        "--quick",
        "--runs",
        "1",
        "--transitions",
        "200",
        "--epochs",
        "3",
        "--policy-epochs",
        "1",
        "--samples",
        "4",
        "--eval-runs",
        "20",
        "--eval-steps",
        "20",
    ]);
    let rows = run(&o).unwrap();
    assert_eq!(rows.len(), COLUMNS.len());
    for r in &rows {
        // Rewards per step lie in [−5, 0]; the model's roll-out cost in [0, 5T].
        for v in [r.reward, r.reward_before, r.reward_random] {
            assert!((-5.0..=0.0).contains(&v), "{r:?}");
        }
        assert!((0.0..=25.0).contains(&r.model_cost.0), "{r:?}");
        assert_eq!(r.skipped, 0);
    }
    // Every column's untrained policy and random paddling meet the same river.
    assert!(
        rows.iter()
            .all(|r| r.reward_random == rows[0].reward_random)
    );
    let md = std::fs::read_to_string(dir.join("control.md")).unwrap();
    for c in &COLUMNS {
        assert!(md.contains(c.name), "{md}");
    }
    assert!(!md.contains("not run"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The table compares with the thesis in combined standard errors.
#[test]
fn the_table_shows_the_difference_in_standard_errors() {
    let row = |run: usize, reward: f64| Row {
        column: "alpha-0.5".into(),
        run,
        reward,
        reward_before: -3.0,
        reward_random: -3.5,
        model_cost: (10.0, 9.0),
        skipped: 0,
        train_seconds: 1.0,
        search_seconds: 1.0,
    };
    // Mean −2.40, s.e. 0.02/√3 = 0.0115 (values −2.42, −2.40, −2.38); thesis −2.37 ± 0.01:
    // (−2.40 + 2.37) / √(0.0115² + 0.01²) = −1.96.
    let md = table(
        &[row(0, -2.42), row(1, -2.40), row(2, -2.38)],
        Benchmark::WetChicken,
        Some(-2.354),
    );
    assert!(
        md.contains("| BNN+LV α=0.5 | 3 | -2.40 ± 0.01 | -2.37 ± 0.01 | -2.0 |"),
        "{md}"
    );
    assert!(md.contains("| best policy (value iteration on the true river) | – | -2.35 |"));
}

/// `--wet-data uniform-states` draws independent states over the whole river (a quarter of
/// them with x > 3.75), where one trajectory from the origin rarely goes (under 5 % there);
/// the default keeps the record's run key.
#[test]
fn wet_chicken_data_start_along_a_trajectory_or_uniformly() {
    let world = WetChicken::default();
    let share = |kind| {
        let (x, delta, starts) = transitions(&world, 2000, kind, 5);
        assert_eq!((x.len(), delta.len(), starts.len()), (8000, 4000, 4000));
        starts.chunks(2).filter(|s| s[0] > 3.75).count() as f64 / 2000.0
    };
    // Binomial s.e. of a share near ¼ from 2000 draws: about 0.01.
    let uniform = share(WetData::UniformStates);
    assert!((uniform - 0.25).abs() < 0.04, "{uniform}");
    assert!(share(WetData::Trajectory) < 0.05);
    let key = |args: &[&str]| {
        let o = parse(args);
        ControlHarness { options: &o, world }.run_key()
    };
    assert!(key(&["--out", "x"]).get("wet_data").is_none());
    assert_eq!(
        key(&["--out", "x", "--wet-data", "uniform-states"])["wet_data"],
        "UniformStates"
    );
}

/// The Industrial Benchmark's data: model rows and start states of the embedding, the change
/// of the transformed cost consistent with the next row's last cost.
#[test]
fn industrial_data_embed_the_transformed_costs() {
    use industrial::{D_STATE, WINDOW};
    let d = industrial::data(1, 40, Exploration::Uniform, 3).unwrap();
    let rows = d.x.len() / D_STATE;
    assert_eq!(rows, 10 * (40 - WINDOW));
    assert_eq!(d.delta.len(), rows);
    assert_eq!(d.starts.len() / D_STATE, 10 * (40 - WINDOW + 1));
    let per = 40 - WINDOW;
    for i in 0..rows - 1 {
        if (i + 1) % per == 0 {
            continue; // the next row is another trajectory's
        }
        let (now, next) = (&d.x[i * D_STATE..], &d.x[(i + 1) * D_STATE..]);
        assert!((d.delta[i] - (next[D_STATE - 1] - now[D_STATE - 1])).abs() < 1e-12);
        // The start state of the same step (a trajectory has one more start than rows)
        // holds the row's steerings and the costs up to that step's.
        let j = (i / per) * (per + 1) + i % per + 1;
        let start = &d.starts[j * D_STATE..(j + 1) * D_STATE];
        assert_eq!(&start[..1 + 3 * WINDOW], &now[..1 + 3 * WINDOW]);
        assert_eq!(start[D_STATE - 1], next[D_STATE - 1]);
    }
    assert!(industrial::data(1, WINDOW, Exploration::Uniform, 3).is_err());
}

/// One embedded roll-out step: steerings shift and move by the benchmark's rule, the cost
/// history shifts and gains the model's drawn change, and the step's cost is in the system's
/// units.
#[test]
fn the_industrial_transition_moves_steerings_by_rule_and_costs_by_the_model() {
    use bnn_burn::rollout::Dynamics;
    use industrial::{D_STATE, WINDOW};
    let device = bnn_burn::device();
    let _guard = bnn_burn::testing::seeded(&device, 112);
    let net = MlpConfig::new(D_STATE, vec![8], 1)
        .with_weights(WeightConfig::of(PosteriorConfig::point()))
        .init(fixed_noise(1e-6, 1, &device).unwrap(), &device)
        .unwrap();
    let data = industrial::data(1, 30, Exploration::Uniform, 4).unwrap();
    let s: Vec<f64> = data.starts[..2 * D_STATE].to_vec();
    let a = [0.5, -1.0, 0.25, -0.3, 1.0, 0.0];
    let draw = net.dynamics(1);
    let state = matrix(&s, D_STATE, &device).reshape([1, 2, D_STATE]);
    let action = matrix(&a, 3, &device).reshape([1, 2, 3]);
    device.seed(9);
    let (next, cost) = industrial::transition(data.transform)(&draw, state, action);
    let (next, cost) = (to_vec(next), to_vec(cost));
    let steps = bnn_datasets::industrial::IndustrialBenchmark::steering_steps();
    for b in 0..2 {
        let (s, n) = (
            &s[b * D_STATE..(b + 1) * D_STATE],
            &next[b * D_STATE..(b + 1) * D_STATE],
        );
        assert_eq!(n[0], s[0]);
        let mut input = vec![s[0]];
        for j in 0..3 {
            let h = &s[1 + j * WINDOW..1 + (j + 1) * WINDOW];
            let moved = (h[WINDOW - 1] + steps[j] * a[b * 3 + j]).clamp(0.0, 100.0);
            let nh = &n[1 + j * WINDOW..1 + (j + 1) * WINDOW];
            for t in 0..WINDOW - 1 {
                assert!((nh[t] - h[t + 1]).abs() < 1e-4, "{b} {j} {t}");
            }
            assert!((nh[WINDOW - 1] - moved).abs() < 1e-4, "{b} {j}: {moved}");
            input.extend_from_slice(nh);
        }
        let c = &s[1 + 3 * WINDOW..];
        input.extend_from_slice(c);
        // A point net with 10⁻⁶ noise: its draw is its function.
        let f = to_vec(draw.predict(matrix(&input, D_STATE, &device).reshape([1, 1, D_STATE])));
        let want = c[WINDOW - 1] + f[0];
        assert!(
            (n[D_STATE - 1] - want).abs() < 1e-3,
            "{} vs {want}",
            n[D_STATE - 1]
        );
        for t in 0..WINDOW - 1 {
            assert!((n[1 + 3 * WINDOW + t] - c[t + 1]).abs() < 1e-4);
        }
        let units = data.transform.inverse(n[D_STATE - 1]);
        assert!(
            (cost[b] - units).abs() < 1e-3 * units,
            "{} vs {units}",
            cost[b]
        );
    }
}

#[test]
fn every_column_runs_a_small_industrial_search() {
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 113);
    let dir = std::env::temp_dir().join(format!("bnn-control-ib-{}", std::process::id()));
    let o = parse(&[
        "--benchmark",
        "industrial",
        "--out",
        dir.to_str().unwrap(),
        "--quick",
        "--runs",
        "1",
        "--steps",
        "40",
        "--epochs",
        "2",
        "--train-samples",
        "2",
        "--horizon",
        "3",
        "--samples",
        "2",
        "--policy-starts",
        "50",
        "--eval-runs",
        "2",
        "--eval-steps",
        "10",
    ]);
    let rows = run(&o).unwrap();
    assert_eq!(rows.len(), COLUMNS.len());
    for r in &rows {
        // Costs per step of the benchmark are in the hundreds.
        for v in [r.reward, r.reward_before, r.reward_random] {
            assert!((-2000.0..0.0).contains(&v), "{r:?}");
        }
        assert!(r.model_cost.0 > 0.0 && r.model_cost.0.is_finite(), "{r:?}");
    }
    let md = std::fs::read_to_string(dir.join("control.md")).unwrap();
    assert!(md.contains("Industrial Benchmark"), "{md}");
    assert!(md.contains("-171.1 ± 2.1"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);
    let err = parse(&["--benchmark", "industrial", "--out", "x", "--steps", "15"])
        .check()
        .unwrap_err();
    assert!(err.contains("--steps 15"), "{err}");
}

#[derive(Parser)]
struct RiskCli {
    #[command(flatten)]
    o: risk::RiskOptions,
}

fn parse_risk(args: &[&str]) -> risk::RiskOptions {
    let mut all = vec!["risk"];
    all.extend_from_slice(args);
    RiskCli::parse_from(all).o
}

/// The small grid of the risk tests: β ∈ {0, 4}, γ = 0, quick budgets, into `dir`.
fn small_risk(dir: &std::path::Path) -> risk::RiskOptions {
    let out = dir.to_str().unwrap();
    let args = "--quick --beta 0 --beta 4 --gamma 0 --steps 40 --policy-starts 4";
    let mut all = vec!["--out", out];
    all.extend(args.split(' '));
    parse_risk(&all)
}

/// A small risk grid runs end to end: every (β, γ) gets a policy scored on the true benchmark,
/// the report holds the table and both figures; bad options are named first.
#[test]
fn the_risk_grid_scores_every_policy_by_cost_and_model_bias() {
    for (args, flag) in [
        (&["--out", "x", "--beta=-1"][..], "--beta -1"),
        (&["--out", "x", "--rollouts", "1"][..], "--rollouts 1"),
        (&["--out", "x", "--alpha", "2"][..], "--alpha 2"),
        (&["--out", "x", "--steps", "10"][..], "--steps 10"),
    ] {
        let err = parse_risk(args).check().unwrap_err();
        assert!(err.contains(flag), "{err}");
    }
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 114);
    let dir = std::env::temp_dir().join(format!("bnn-risk-{}", std::process::id()));
    let o = small_risk(&dir);
    let rows = risk::run(&o).unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r.points.len(), 2);
    assert!(r.behaviour_cost > 0.0 && r.behaviour_cost.is_finite());
    for p in &r.points {
        assert!(p.true_cost > 0.0 && p.model_cost > 0.0, "{p:?}");
        assert!(p.model_bias >= 0.0 && p.model_bias.is_finite(), "{p:?}");
        assert_eq!(p.curves.0.len(), 5);
        assert_eq!(p.paths.len(), 4);
        // The bias is the squared gap of the first start's curves plus the others'.
        let first: f64 = p
            .curves
            .0
            .iter()
            .zip(&p.curves.1)
            .map(|(a, b)| (a - b).powi(2))
            .sum();
        assert!(p.model_bias * 2.0 >= first - 1e-6, "{p:?}");
    }
    let md = std::fs::read_to_string(dir.join("risk.md")).unwrap();
    assert!(md.contains("| 4 | 0 | 1 |"), "{md}");
    // The frontier column counts the runs whose frontier has the point.
    let frontier = risk::on_frontier(&r.points);
    let line = md.lines().find(|l| l.starts_with("| 4 | 0 | 1 |")).unwrap();
    let at = r.points.iter().position(|p| p.beta == 4.0).unwrap();
    let want = format!("| {} of 1 |", usize::from(frontier[at]));
    assert!(line.ends_with(&want), "{line}");
    assert!(dir.join("frontier.svg").exists() && dir.join("rollouts.svg").exists());
    let _ = std::fs::remove_dir_all(&dir);
    // A grid without Fig. 7.6's pairs has no roll-out figure, and finishes.
    let mut o = small_risk(&dir);
    (o.betas, o.gammas) = (vec![1.0], vec![1.0]);
    assert_eq!(risk::run(&o).unwrap()[0].points.len(), 1);
    assert!(dir.join("frontier.svg").exists() && !dir.join("rollouts.svg").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A policy is on its run's frontier unless another has both a cost and a bias at most its
/// own, one of them lower; ties on both keep both.
#[test]
fn the_frontier_keeps_the_policies_no_other_dominates() {
    let point = |true_cost: f64, model_bias: f64| risk::Point {
        beta: 0.0,
        gamma: 0.0,
        true_cost,
        model_bias,
        model_cost: true_cost,
        curves: (vec![], vec![]),
        paths: vec![],
        skipped: 0,
        search_seconds: 0.0,
    };
    let points = [
        point(184.6, 34428.0), // dominated by the next
        point(179.1, 5915.0),  // the lowest cost
        point(180.1, 3607.0),
        point(183.4, 1701.0), // the lowest bias
        point(183.3, 1822.0),
        point(181.7, 2935.0),
        point(180.4, 4391.0), // dominated by (180.1, 3607)
        point(180.1, 3607.0), // a tie with the third: both kept
        point(179.1, 6000.0), // the same cost as the second, more bias
    ];
    assert_eq!(
        risk::on_frontier(&points),
        [false, true, true, true, true, true, false, true, false]
    );
}

/// An interrupted risk run resumes at its next policy: the saved model and finished points are
/// taken as saved, and the missing point is the one an uninterrupted run computes, bit for bit.
#[test]
fn a_resumed_risk_run_starts_at_its_next_policy() {
    use crate::runner::{Harness, TaskContext};
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 115);
    let dir = std::env::temp_dir().join(format!("bnn-risk-resume-{}", std::process::id()));
    let o = small_risk(&dir);
    let harness = risk::RiskHarness::new(&o);
    let task = risk::Task { run: 0 };
    let context = TaskContext {
        state: dir.join("state"),
        resume: true,
    };
    let whole = harness.run_task(&task, &context).unwrap();
    assert!(context.state.join("model.bpk").is_file());
    let mut first = whole.points[0].clone();
    first.true_cost = 1234.5;
    context.save_part("points", &vec![first]).unwrap();
    let resumed = harness.run_task(&task, &context).unwrap();
    assert_eq!(resumed.points.len(), 2);
    assert_eq!(resumed.points[0].true_cost, 1234.5);
    assert_eq!(resumed.train_seconds, whole.train_seconds);
    let (a, b) = (&whole.points[1], &resumed.points[1]);
    assert_eq!((a.beta, a.gamma), (b.beta, b.gamma));
    assert_eq!(
        (a.true_cost, a.model_bias, a.model_cost),
        (b.true_cost, b.model_bias, b.model_cost)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
