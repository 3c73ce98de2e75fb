use super::*;
use std::path::PathBuf;

/// A reference trajectory: per step the setpoint, the action, the draws and the Markov state.
struct Reference {
    header: Vec<String>,
    rows: Vec<Vec<f64>>,
}

fn reference(k: usize) -> Reference {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!(
        "tests/fixtures/industrial_benchmark/trajectory_{k}.csv"
    ));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| l.split(',').map(|v| v.parse::<f64>().unwrap()).collect())
        .collect();
    Reference { header, rows }
}

impl Reference {
    fn column(&self, name: &str) -> usize {
        self.header.iter().position(|h| h == name).unwrap()
    }
}

/// The draws of a reference row; its Bernoulli outcomes as uniforms that reproduce them.
fn noise(r: &Reference, row: &[f64]) -> IbNoise {
    let at = |name: &str| row[r.column(name)];
    let switch = |b: f64| if b == 1.0 { 0.0 } else { 1.0 };
    let saturated = at("alpha_normal");
    IbNoise {
        exponential: [at("e_g"), at("e_v")],
        uniform: [at("u_g"), at("u_v")],
        switch: [switch(at("b_g")), switch(at("b_v"))],
        saturated: if saturated.is_nan() { 0.0 } else { saturated },
        consumption: at("consumption_normal"),
    }
}

#[test]
fn the_port_replays_the_reference_trajectories() {
    let mut saturated_steps = 0;
    for k in 0..6 {
        let r = reference(k);
        let first = r.column("o0");
        assert_eq!(r.header.len() - first, MARKOV_VALUES);
        let p = r.rows[0][r.column("p")];
        let mut ib = IndustrialBenchmark::with_noise(p, &noise(&r, &r.rows[0])).unwrap();
        for (t, row) in r.rows.iter().enumerate() {
            if t > 0 {
                let a = [row[1], row[2], row[3]];
                let cost = ib.step_with(a, &noise(&r, row));
                assert_eq!(cost, ib.state().cost);
            }
            saturated_steps += usize::from(!row[r.column("alpha_normal")].is_nan());
            for (j, (ours, theirs)) in ib.state().values().iter().zip(&row[first..]).enumerate() {
                assert!(
                    (ours - theirs).abs() <= 1e-9 * (1.0 + theirs.abs()),
                    "trajectory {k}, step {t}, {}: {ours} vs the reference's {theirs}",
                    r.header[first + j]
                );
            }
        }
    }
    // The fixtures reach the fatigue's saturated branch (its extra draw) many times.
    assert!(saturated_steps > 100, "{saturated_steps}");
}

#[test]
fn setpoints_outside_the_range_are_named() {
    let mut rng = StdRng::seed_from_u64(1);
    for p in [-1.0, 100.5, f64::NAN] {
        let e = IndustrialBenchmark::new(p, &mut rng)
            .unwrap_err()
            .to_string();
        assert!(e.contains("setpoint"), "{e}");
    }
}

#[test]
fn the_exponential_draws_have_scale_a_tenth() {
    // Mean 0.1 and s.d. 0.1: 20 000 draws give the mean to 0.1/√20 000 ≈ 7·10⁻⁴.
    let mut rng = StdRng::seed_from_u64(3);
    let n = 10_000;
    let sum: f64 = (0..n)
        .map(|_| IbNoise::draw(&mut rng).exponential.iter().sum::<f64>())
        .sum();
    let mean = sum / (2 * n) as f64;
    assert!(
        (mean - 0.1).abs() < 5.0 * 0.1 / ((2 * n) as f64).sqrt(),
        "{mean}"
    );
}

#[test]
fn random_trajectories_steer_by_their_actions_and_embed_to_sixty_one_columns() {
    let t = IndustrialBenchmark::random_trajectories(&[10.0, 70.0], 2, 40, 5).unwrap();
    assert_eq!(t.len(), 4);
    for traj in &t {
        assert_eq!(traj.costs.len(), 40);
        assert!(traj.costs.iter().all(|c| c.is_finite() && *c > 0.0));
        for i in 1..40 {
            let want = IndustrialBenchmark::steer(traj.steerings[i - 1], traj.actions[i]);
            assert_eq!(traj.steerings[i], want);
        }
    }
    assert_eq!(t[0].setpoint, 10.0);
    assert_eq!(t[3].setpoint, 70.0);
    assert_ne!(t[0].costs, t[1].costs);

    let data = time_embedding(&t, 15).unwrap();
    assert_eq!(data.n_features, 61);
    assert_eq!(data.y.len(), 4 * 25);
    // Row 0 of trajectory 1 is the data's row 25: t = 15.
    let row = &data.x[25 * 61..26 * 61];
    let tr = &t[1];
    assert_eq!(row[0], 10.0);
    assert_eq!(row[1], tr.steerings[1][0]);
    assert_eq!(row[15], tr.steerings[15][0]);
    assert_eq!(row[16], tr.steerings[1][1]);
    assert_eq!(row[45], tr.steerings[15][2]);
    assert_eq!(row[46], tr.costs[0]);
    assert_eq!(row[60], tr.costs[14]);
    assert_eq!(data.y[25], tr.costs[15]);
    assert!(time_embedding(&t, 40).is_err());
}

#[test]
fn the_cost_transform_inverts_and_needs_positive_costs() {
    let costs = [120.0, 180.0, 400.0, 250.0];
    let tr = CostTransform::fit(&costs).unwrap();
    for c in costs {
        let v = tr.forward(c);
        assert!(v.is_finite());
        assert!((tr.inverse(v) - c).abs() < 1e-9 * c, "{c}");
    }
    // Monotone, and the training range maps inside the open interval.
    assert!(tr.forward(120.0) < tr.forward(180.0));
    // Costs beyond the range's margins saturate (finite) instead of leaving the real line.
    for c in [0.0, 50.0, 1e4, -3.0] {
        assert!(tr.forward(c).is_finite(), "{c}");
    }
    assert!(tr.forward(1e4) > tr.forward(400.0) && tr.forward(50.0) < tr.forward(120.0));
    assert!(CostTransform::fit(&[]).is_err());
    let e = CostTransform::fit(&[3.0, -1.0]).unwrap_err().to_string();
    assert!(e.contains("cost 1"), "{e}");
}

/// The behaviour policy keeps velocity and gain near [40, 60] (eqs. 7.37–7.39), where uniform
/// exploration wanders over [0, 100].
#[test]
fn the_behaviour_policy_keeps_velocity_and_gain_near_the_middle() {
    let share = |e: Exploration| {
        let t = IndustrialBenchmark::trajectories(&[30.0, 80.0], 2, 600, e, 7).unwrap();
        let (mut inside, mut all) = (0, 0);
        for traj in &t {
            for s in &traj.steerings[100..] {
                all += 2;
                inside += usize::from((35.0..=65.0).contains(&s[0]));
                inside += usize::from((35.0..=65.0).contains(&s[1]));
            }
        }
        inside as f64 / all as f64
    };
    let behaviour = share(Exploration::Behaviour);
    assert!(behaviour > 0.95, "{behaviour}");
    assert!(share(Exploration::Uniform) < 0.8);
}
