use super::*;
use crate::host::{matrix, to_vec};
use crate::latent::LatentConfig;
use crate::layers::Activation;
use crate::nets::{BnnLvConfig, MlpConfig, Regressor};
use crate::testing::{seeded, test_device};

/// A BNN+LV on `[s (2), a (1)]` predicting `Δs (2)`, with a nearly silent latent and noise, so
/// a step's change is the drawn network's function.
fn model(device: &Device) -> LatentRegressor {
    use crate::posterior::{MeanFieldConfig, PosteriorConfig, ScaleInit};
    // σ = softplus(−1) ≈ 0.31: draws far apart.
    let wide = MeanFieldConfig::new().with_scale(ScaleInit::new().with_rho(-1.0).with_rho_std(0.0));
    let weights = crate::layers::WeightConfig::of(PosteriorConfig::MeanField(wide));
    // tanh: smooth, so finite differences do not straddle a kink.
    let body = MlpConfig::new(3, vec![8], 2)
        .with_weights(weights)
        .with_activation(Activation::Tanh);
    BnnLvConfig::new(body)
        .with_latent(LatentConfig::new().with_prior_variance(Some(1e-5)))
        .with_noise_std(1e-4)
        .init_regressor(10, device)
        .unwrap()
}

fn policy(device: &Device) -> Policy {
    PolicyConfig::new(2, vec![4], vec![-1.0], vec![1.0])
        .with_activation(Activation::Tanh)
        .init(device)
        .unwrap()
}

/// A draw is held over a roll-out: the same state gives the same change at every step under
/// draw `k`, and the draws differ from each other.
#[test]
fn a_draw_is_held_fixed_over_a_roll_out() {
    let device = test_device();
    let _guard = seeded(&device, 120);
    let m = model(&device);
    let draw = DynamicsDraw::new(&m, 3);
    assert_eq!(draw.samples(), 3);
    let s = matrix(&[0.3, -0.2, 0.3, -0.2, 0.3, -0.2], 2, &device).reshape([3, 1, 2]);
    let a = Tensor::<3>::full([3, 1, 1], 0.5, &device);
    let first = to_vec(draw.step(s.clone(), a.clone()) - s.clone());
    let second = to_vec(draw.step(s.clone(), a) - s);
    for (x, y) in first.iter().zip(&second) {
        assert!((x - y).abs() < 0.02, "{first:?} vs {second:?}");
    }
    // Draw k's change is first[2k..2k + 2]: compare draws 0 and 1, 1 and 2.
    let spread: f64 = (0..4).map(|j| (first[j] - first[j + 2]).abs()).sum();
    assert!(spread > 0.2, "the draws differ: {first:?}");
    assert!(draw.draws.iter().all(|d| !d.weight.is_require_grad()));
}

/// A point network with (almost) no noise, on `[s (2), a (1)]`.
fn point_net(device: &Device) -> Regressor {
    net(crate::posterior::PosteriorConfig::point(), device)
}

/// A network of the posterior family with (almost) no noise, on `[s (2), a (1)]`.
fn net(posterior: crate::posterior::PosteriorConfig, device: &Device) -> Regressor {
    use crate::likelihood::{GaussianLikelihoodConfig, NoiseFit};
    let likelihood = GaussianLikelihoodConfig::new()
        .with_d_output(2)
        .with_noise_std(1e-4)
        .with_fit(NoiseFit::Fixed)
        .init(device)
        .unwrap();
    MlpConfig::new(3, vec![8], 2)
        .with_weights(crate::layers::WeightConfig::of(posterior))
        .init(likelihood, device)
        .unwrap()
}

/// An ensemble's roll-out runs under one member, each member's share of the roll-outs is
/// binomial around `1/M`, and the state box holds whatever the members predict.
#[test]
fn an_ensemble_rolls_each_out_under_one_member_and_the_box_holds() {
    let device = test_device();
    let _guard = seeded(&device, 125);
    let members: Vec<Regressor> = (0..3).map(|_| point_net(&device)).collect();
    let ensemble = crate::posthoc::Ensemble::new(members.clone()).unwrap();
    let k = 300;
    let draw = ensemble.dynamics(k);
    let s = Tensor::<3>::full([k, 1, 2], 0.4, &device);
    let a = Tensor::<3>::full([k, 1, 1], -0.7, &device);
    let next = to_vec(draw.step(s.clone(), a.clone()));
    // Each member's own next state from one draw of it.
    let own: Vec<Vec<f64>> = members
        .iter()
        .map(|m| {
            to_vec(
                m.dynamics(1)
                    .step(s.clone().narrow(0, 0, 1), a.clone().narrow(0, 0, 1)),
            )
        })
        .collect();
    let mut counts = [0usize; 3];
    for row in next.chunks(2) {
        let m = own
            .iter()
            .position(|o| (o[0] - row[0]).abs() < 1e-3 && (o[1] - row[1]).abs() < 1e-3)
            .unwrap_or_else(|| panic!("{row:?} is no member's step: {own:?}"));
        counts[m] += 1;
    }
    // 100 ± 8.2 each: 5 standard deviations.
    for c in counts {
        assert!((c as f64 - 100.0).abs() < 41.0, "{counts:?}");
    }
    let boxed = to_vec(
        ensemble
            .dynamics(k)
            .with_state_box(&[0.35, 0.35], &[0.45, 0.45])
            .step(s, a),
    );
    // The corners are f32: 0.35 is 0.34999999.
    let outside: Vec<&f64> = boxed
        .iter()
        .filter(|v| !(0.35 - 1e-6..=0.45 + 1e-6).contains(*v))
        .collect();
    assert!(outside.is_empty(), "outside the box: {outside:?}");
}

/// A network without latents draws its weights once per roll-out: a point net's draws agree.
#[test]
fn a_point_nets_draws_agree_and_a_bnns_differ() {
    let device = test_device();
    let _guard = seeded(&device, 126);
    let s = Tensor::<3>::full([4, 1, 2], 0.2, &device);
    let a = Tensor::<3>::full([4, 1, 1], 0.5, &device);
    let point = to_vec(point_net(&device).dynamics(4).step(s.clone(), a.clone()));
    use crate::posterior::{MeanFieldConfig, PosteriorConfig, ScaleInit};
    let wide = MeanFieldConfig::new().with_scale(ScaleInit::new().with_rho(-1.0).with_rho_std(0.0));
    let bnn = net(PosteriorConfig::MeanField(wide), &device);
    let bnn = to_vec(bnn.dynamics(4).step(s, a));
    let spread = |v: &[f64]| (0..6).map(|j| (v[j] - v[j + 2]).abs()).sum::<f64>();
    assert!(spread(&point) < 1e-3, "{point:?}");
    assert!(spread(&bnn) > 0.2, "{bnn:?}");
}

/// A model on standardised data steps in the system's units: `s + m_y + s_y · f((x − m_x)/s_x)`.
#[test]
fn a_standardised_model_steps_in_the_systems_units() {
    let device = test_device();
    let _guard = seeded(&device, 127);
    let net = point_net(&device);
    let (mx, sx) = (vec![1.0, -2.0, 0.5], vec![2.0, 0.5, 4.0]);
    let (my, sy) = (vec![0.3, -0.1], vec![3.0, 0.2]);
    let scaled = Standardised {
        model: net.clone(),
        x: (mx.clone(), sx.clone()),
        y: (my.clone(), sy.clone()),
    };
    let (s, a) = ([1.5, -1.0], [0.7]);
    let tensor = |v: &[f64]| matrix(v, v.len(), &device).reshape([1, 1, v.len()]);
    let got = to_vec(scaled.dynamics(1).step(tensor(&s), tensor(&a)));
    let sn = [(s[0] - mx[0]) / sx[0], (s[1] - mx[1]) / sx[1]];
    let an = [(a[0] - mx[2]) / sx[2]];
    let f = to_vec(net.dynamics(1).step(tensor(&sn), tensor(&an)));
    for j in 0..2 {
        let want = s[j] + my[j] + sy[j] * (f[j] - sn[j]);
        assert!(
            (got[j] - want).abs() < 1e-3,
            "{got:?} vs output {j}: {want}"
        );
    }
}

/// The roll-out's gradient in the policy's parameters matches central finite differences under
/// the same latent and noise draws.
#[test]
fn the_roll_outs_gradient_matches_finite_differences() {
    let device = test_device().autodiff();
    let _guard = seeded(&device, 121);
    let m = model(&device);
    let draw = DynamicsDraw::new(&m, 3);
    let p = policy(&device);
    let start = matrix(&[0.5, -0.4, -0.3, 0.8], 2, &device);
    let loss = |p: &Policy| {
        device.seed(7);
        draw.unfold(
            |s| p.forward(s),
            start.clone(),
            4,
            |s| s.clone().square().sum_dim(2).squeeze_dim(2),
        )
        .mean()
    };
    let l = loss(&p);
    let grads = l.backward();
    let g = to_vec(p.layers[0].weight.grad(&grads).unwrap());
    let h = 1e-2;
    for index in [0, 3, 5] {
        let shifted = |sign: f64| {
            let mut q = p.clone();
            q.layers[0].weight = q.layers[0].weight.clone().map(|w| {
                let mut bump = vec![0.0; 8];
                bump[index] = sign * h;
                let d = w.device();
                w + matrix(&bump, 4, &d)
            });
            to_vec(loss(&q))[0]
        };
        let fd = (shifted(1.0) - shifted(-1.0)) / (2.0 * h);
        assert!(
            (fd - g[index]).abs() < 0.05 * g[index].abs().max(0.02),
            "weight {index}: backprop {} vs finite differences {fd}",
            g[index]
        );
    }
}

#[test]
fn the_policy_stays_in_its_box_and_bad_boxes_are_named() {
    let device = test_device();
    let _guard = seeded(&device, 122);
    let p = PolicyConfig::new(2, vec![4], vec![-2.0, 0.0], vec![2.0, 1.0])
        .init(&device)
        .unwrap();
    let s = matrix(&[100.0, -50.0, -80.0, 90.0, 0.0, 0.0], 2, &device);
    let a = to_vec(p.forward(s));
    for row in a.chunks(2) {
        assert!(
            (-2.0..=2.0).contains(&row[0]) && (0.0..=1.0).contains(&row[1]),
            "{a:?}"
        );
    }
    let bad = |low: Vec<f64>, high: Vec<f64>| {
        PolicyConfig::new(2, vec![4], low, high)
            .init(&device)
            .unwrap_err()
            .field
    };
    assert_eq!(bad(vec![1.0], vec![0.0]), "high");
    assert_eq!(bad(vec![0.0, 0.0], vec![1.0]), "high");
    assert_eq!(bad(vec![], vec![]), "low");
}

/// Eq. 7.33 on a random-effects system with known parts: `C = μ_t + σ_a a_m + σ_b b_mn`
/// gives `Σ_t μ_t + √(β² σ_a² + γ² σ_b²)` per step (up to the sampling error of `M`, `N`).
#[test]
fn the_risk_estimator_matches_its_closed_form() {
    let device = test_device();
    let _guard = seeded(&device, 123);
    let (m, n) = (300, 300);
    let mut rng = crate::host::HostNormals::new(9);
    let (sa, sb, mu) = (1.0, 2.0, [0.5, -1.0]);
    let mut c = Vec::with_capacity(m * n * 2);
    for _ in 0..m {
        let a = rng.next();
        for _ in 0..n {
            for m_t in mu {
                c.push(m_t + sa * a + sb * rng.next());
            }
        }
    }
    let costs = matrix(&c, 2, &device).reshape([m, n, 1, 2]);
    for (beta, gamma) in [(0.0, 0.0), (1.0, 0.5), (2.0, 0.0), (0.0, 1.0)] {
        let got = to_vec(risk_sensitive_cost(costs.clone(), beta, gamma))[0];
        // The estimator on the host, step by step.
        let mut exact = 0.0;
        for t in 0..2 {
            let at = |i: usize, j: usize| c[(i * n + j) * 2 + t];
            let rows: Vec<f64> = (0..m)
                .map(|i| (0..n).map(|j| at(i, j)).sum::<f64>() / n as f64)
                .collect();
            let grand = rows.iter().sum::<f64>() / m as f64;
            let epistemic = rows.iter().map(|r| (r - grand).powi(2)).sum::<f64>() / (m - 1) as f64;
            let aleatoric = (0..m)
                .map(|i| (0..n).map(|j| (at(i, j) - rows[i]).powi(2)).sum::<f64>())
                .sum::<f64>()
                / ((n - 1) * m) as f64;
            exact += grand + (beta * beta * epistemic + gamma * gamma * aleatoric).sqrt();
        }
        assert!(
            (got - exact).abs() < 1e-3 * (1.0 + exact.abs()),
            "{got} vs {exact}"
        );
        // The closed form: the sample's own mean (its error, σ_a/√M per step, is not the
        // estimator's), and √(β² σ_a² + γ² σ_b²) within its sampling error (σ_a's relative
        // error is √(1/(2M)) ≈ 4 %: 20 % is five of them).
        let spread = ((beta * sa) * (beta * sa) + (gamma * sb) * (gamma * sb)).sqrt();
        let want = c.iter().sum::<f64>() / (m * n) as f64 + 2.0 * spread;
        assert!(
            (got - want).abs() < 1e-4 + 0.2 * spread,
            "β {beta}, γ {gamma}: {got} vs {want}"
        );
    }
    assert_eq!(model_bias(&[1.0, 2.0], &[0.5, 2.5]), 0.5);
}

/// Policy search lowers the roll-outs' cost; bad settings are named; a cost that is never
/// finite stops the search.
/// Eq. 7.33 on roll-outs of a linear-Gaussian system: `s_{t+1} = s_t + b_m + ε`, the drift
/// `b_m ~ N(μ, σ_w²)` held per weight draw, `ε ~ N(0, σ²)` per step, cost `c = s`. Then
/// `Var_m E[c_t | b] = t² Var(b)` and `E_m Var(c_t | b) = t σ²`: the estimator equals
/// `Σ_t [s₀ + t b̄ + √(β² t² Var(b) + γ² t σ²)]` up to the noise's sampling error.
#[test]
fn the_risk_estimator_matches_a_linear_gaussian_systems_closed_form() {
    let device = test_device();
    let _guard = seeded(&device, 128);
    let (m, n, horizon) = (200, 200, 3);
    let (mu, sigma_w, sigma, s0) = (0.5, 0.3, 0.2, 1.0);
    let net = {
        use crate::likelihood::{GaussianLikelihoodConfig, NoiseFit};
        let likelihood = GaussianLikelihoodConfig::new()
            .with_noise_std(sigma)
            .with_fit(NoiseFit::Fixed)
            .init(&device)
            .unwrap();
        MlpConfig::new(2, vec![], 1)
            .init(likelihood, &device)
            .unwrap()
    };
    // The drifts, each repeated for its N roll-outs; no weight on s or a.
    let mut rng = crate::host::HostNormals::new(29);
    let drifts: Vec<f64> = (0..m).map(|_| mu + sigma_w * rng.next()).collect();
    let bias: Vec<f64> = drifts
        .iter()
        .flat_map(|b| std::iter::repeat_n(*b, n))
        .collect();
    let draws = vec![LayerDraw {
        weight: Tensor::zeros([m * n, 2], &device),
        bias: Some(matrix(&bias, 1, &device)),
    }];
    let draw = DynamicsDraw::with_draws(&net, draws);
    let start = Tensor::<2>::full([1, 1], s0, &device);
    let costs = draw
        .unfold(
            |s| s.zeros_like(),
            start,
            horizon,
            |s| s.clone().squeeze_dim(2),
        )
        .reshape([m, n, 1, horizon]);
    let mean_b = drifts.iter().sum::<f64>() / m as f64;
    let var_b = drifts.iter().map(|b| (b - mean_b).powi(2)).sum::<f64>() / (m - 1) as f64;
    for (beta, gamma) in [(0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (2.0, 3.0)] {
        let got = to_vec(risk_sensitive_cost(costs.clone(), beta, gamma))[0];
        let want: f64 = (1..=horizon)
            .map(|t| {
                let t = t as f64;
                s0 + t * mean_b
                    + (beta * beta * t * t * var_b + gamma * gamma * t * sigma * sigma).sqrt()
            })
            .sum();
        // The noise moves the mean by ≤ σ√T/√(MN) per step (0.0017) and the epistemic
        // variance by the noise's own spread per draw; the aleatoric variance's relative error
        // is √(2/(M(N − 1))) ≈ 0.7 %. Five of each, summed over the steps, stay below 0.05.
        assert!(
            (got - want).abs() < 0.05,
            "β {beta}, γ {gamma}: {got} vs {want}"
        );
    }
}

#[test]
fn policy_search_lowers_the_cost_and_guards_against_nan() {
    let device = test_device().autodiff();
    let _guard = seeded(&device, 124);
    let m = model(&device);
    let p = policy(&device);
    let starts = matrix(
        &(0..40)
            .map(|i| ((i * 7) % 11) as f64 / 5.0 - 1.0)
            .collect::<Vec<_>>(),
        2,
        &device,
    );
    let cost = |s: &Tensor<3>| s.clone().square().sum_dim(2).squeeze_dim(2);
    let config = PolicySearchConfig::new(3, 30)
        .with_batch_size(5)
        .with_samples(4)
        .with_learning_rate(1e-2);
    let (_, report) = policy_search(&m, p.clone(), starts.clone(), cost, &config).unwrap();
    assert_eq!(report.epoch_costs.len(), 30);
    assert_eq!(report.skipped, 0);
    let (first, last) = (report.epoch_costs[0], report.epoch_costs[29]);
    assert!(last < 0.9 * first, "epoch costs {:?}", report.epoch_costs);
    let bad = |c: PolicySearchConfig| match policy_search(&m, p.clone(), starts.clone(), cost, &c)
        .unwrap_err()
    {
        PolicySearchError::Config(e) => e.field,
        e => panic!("{e}"),
    };
    assert_eq!(bad(PolicySearchConfig::new(0, 1)), "horizon");
    assert_eq!(
        bad(PolicySearchConfig::new(2, 1).with_samples(0)),
        "samples"
    );
    assert_eq!(
        bad(PolicySearchConfig::new(2, 1).with_clip_norm(Some(0.0))),
        "clip_norm"
    );
    let boxed = |low: Vec<f64>, high: Vec<f64>| {
        PolicySearchConfig::new(2, 1).with_state_box(Some((low, high)))
    };
    assert_eq!(bad(boxed(vec![0.0], vec![1.0])), "state_box");
    assert_eq!(bad(boxed(vec![0.0, 2.0], vec![1.0, 1.0])), "state_box");
    let nan = |s: &Tensor<3>| s.clone().sum_dim(2).squeeze_dim(2) * f64::NAN;
    let err = policy_search(&m, p, starts, nan, &PolicySearchConfig::new(2, 1)).unwrap_err();
    assert!(
        matches!(err, PolicySearchError::Diverged { epoch: 0 }),
        "{err}"
    );
}

/// `unfold_with` under the Markov transition is `unfold` (same draws, same noise), and a
/// transition of another form (a state whose second part moves by the action alone and
/// whose first by the model) follows `predict`.
#[test]
fn a_transition_of_another_form_rolls_out_by_predict() {
    let device = test_device();
    let _guard = seeded(&device, 129);
    let m = model(&device);
    let draw = DynamicsDraw::new(&m, 2);
    let p = policy(&device);
    let start = matrix(&[0.5, -0.4, -0.3, 0.8], 2, &device);
    // burn initialises parameters lazily, from the generator, at their first use.
    let _ = p.forward(start.clone());
    let cost = |s: &Tensor<3>| s.clone().square().sum_dim(2).squeeze_dim(2);
    device.seed(3);
    let plain = to_vec(draw.unfold(|s| p.forward(s), start.clone(), 3, cost));
    device.seed(3);
    let with = to_vec(draw.unfold_with(
        |s| p.forward(s),
        start.clone(),
        3,
        |d, s, a| {
            let next = d.step(s, a);
            let c = cost(&next);
            (next, c)
        },
    ));
    assert_eq!(plain, with);
    // s = (u, w): w' = w + a (known), u' = u + f_1([u, w', a]) drawn.
    let costs = to_vec(draw.unfold_with(
        |s| p.forward(s),
        start.clone(),
        2,
        |d, s, a| {
            let [k, b, _] = s.dims();
            let u = s.clone().slice([0..k, 0..b, 0..1]);
            let w = s.slice([0..k, 0..b, 1..2]) + a.clone();
            let f = d.predict(Tensor::cat(vec![u.clone(), w.clone(), a], 2));
            let u = u + f.slice([0..k, 0..b, 0..1]);
            let c = w.clone().squeeze_dim(2);
            (Tensor::cat(vec![u, w], 2), c)
        },
    ));
    // The cost is the known part w after each step: w_0 + Σ actions, and the actions lie in
    // the box, so |w_t − w_0| ≤ t.
    for (i, c) in costs.iter().enumerate() {
        let (b, t) = ((i / 2) % 2, i % 2);
        let w0 = [-0.4, 0.8][b];
        assert!((c - w0).abs() <= (t + 1) as f64 + 1e-6, "{costs:?}");
    }
    // predict is the step's change without a box.
    device.seed(5);
    let s = matrix(&[0.3, -0.2, 0.1, 0.4], 2, &device).reshape([2, 1, 2]);
    let a = Tensor::<3>::full([2, 1, 1], 0.5, &device);
    let change = to_vec(draw.step(s.clone(), a.clone()) - s.clone());
    device.seed(5);
    let f = to_vec(draw.predict(Tensor::cat(vec![s, a], 2)));
    for (x, y) in change.iter().zip(&f) {
        assert!((x - y).abs() < 1e-5, "{change:?} vs {f:?}");
    }
}

/// A policy with state scales acts on `(s − m)/sd`; scales of the wrong length are named.
#[test]
fn a_policy_standardises_its_states() {
    let device = test_device();
    let _guard = seeded(&device, 130);
    let (mean, std) = (vec![10.0, -3.0], vec![5.0, 0.5]);
    let scaled = PolicyConfig::new(2, vec![4], vec![-1.0], vec![1.0])
        .with_state_scale(Some((mean.clone(), std.clone())))
        .init(&device)
        .unwrap();
    let mut plain = scaled.clone();
    plain.state_scale = None;
    let s = [12.0, -2.0, 0.0, 4.0];
    let z: Vec<f64> = s
        .iter()
        .enumerate()
        .map(|(i, v)| (v - mean[i % 2]) / std[i % 2])
        .collect();
    let got = to_vec(scaled.forward(matrix(&s, 2, &device)));
    let want = to_vec(plain.forward(matrix(&z, 2, &device)));
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() < 1e-6, "{got:?} vs {want:?}");
    }
    let bad = |scale: (Vec<f64>, Vec<f64>)| {
        PolicyConfig::new(2, vec![4], vec![-1.0], vec![1.0])
            .with_state_scale(Some(scale))
            .init(&device)
            .unwrap_err()
            .field
    };
    assert_eq!(bad((vec![0.0], vec![1.0])), "state_scale");
    assert_eq!(bad((vec![0.0, 0.0], vec![1.0, 0.0])), "state_scale");
}

/// Repeated draws: the `N` roll-outs of a weight draw share its network (same change without
/// latent and noise), the draws differ; a risk-sensitive search runs and its settings are
/// checked.
#[test]
fn repeated_draws_share_their_network_and_the_risk_search_runs() {
    let device = test_device().autodiff();
    let _guard = seeded(&device, 131);
    let m = model(&device);
    let draw = DynamicsDraw::new(&m, 3).repeated(4);
    assert_eq!(draw.samples(), 12);
    let s = Tensor::<3>::full([12, 1, 2], 0.3, &device);
    let a = Tensor::<3>::full([12, 1, 1], -0.2, &device);
    let change = to_vec(draw.step(s.clone(), a) - s);
    for g in 0..3 {
        for r in 1..4 {
            let (i, j) = (g * 4 * 2, (g * 4 + r) * 2);
            // Latent variance 10⁻⁵ and noise 10⁻⁴: within the group only those differ.
            assert!((change[i] - change[j]).abs() < 0.02, "{change:?}");
        }
    }
    assert!((change[0] - change[8]).abs() + (change[1] - change[9]).abs() > 0.05);

    let p = policy(&device);
    let starts = matrix(&[0.5, -0.4, -0.3, 0.8, 0.1, 0.1], 2, &device);
    let cost = |s: &Tensor<3>| s.clone().square().sum_dim(2).squeeze_dim(2);
    let risky = |beta: f64, rollouts: usize, samples: usize| {
        PolicySearchConfig::new(3, 2)
            .with_batch_size(3)
            .with_samples(samples)
            .with_risk(Some(RiskConfig::new(beta, 0.5).with_rollouts(rollouts)))
    };
    let (_, report) =
        policy_search(&m, p.clone(), starts.clone(), cost, &risky(2.0, 3, 4)).unwrap();
    assert!(report.epoch_costs.iter().all(|c| c.is_finite() && *c > 0.0));
    for bad in [risky(2.0, 1, 4), risky(2.0, 3, 1), risky(-1.0, 3, 4)] {
        match policy_search(&m, p.clone(), starts.clone(), cost, &bad).unwrap_err() {
            PolicySearchError::Config(e) => assert_eq!(e.field, "risk"),
            e => panic!("{e}"),
        }
    }
}

/// The `n` roll-outs of a repeated draw go through its network as one batch: the numbers of
/// the draw's weights copied once per roll-out (latents, noise and a per-draw noise scale
/// included, under the same generator).
#[test]
fn repeated_draws_batch_their_roll_outs_as_copies_would() {
    let device = test_device();
    let _guard = seeded(&device, 132);
    let m = BnnLvConfig::new(MlpConfig::new(3, vec![8], 2).with_activation(Activation::Tanh))
        .with_latent(LatentConfig::new().with_prior_variance(Some(1.0)))
        .with_noise_std(0.1)
        .init_regressor(10, &device)
        .unwrap();
    let (draws, n, b) = (3, 4, 2);
    let copy = |t: Tensor<2>| {
        let [k, d] = t.dims();
        t.unsqueeze_dim::<3>(1)
            .expand([k, n, d])
            .reshape([k * n, d])
    };
    let mut batched = DynamicsDraw::new(&m, draws).repeated(n);
    let noise = matrix(&[0.05, 0.1, 0.2, 0.3, 0.5, 0.8], 2, &device).unsqueeze_dim::<3>(1);
    let mut copies = DynamicsDraw {
        draws: batched
            .draws
            .iter()
            .map(|d| LayerDraw {
                weight: copy(d.weight.clone()),
                bias: d.bias.clone().map(copy),
            })
            .collect(),
        repeat: 1,
        ..batched.clone()
    };
    assert_eq!((batched.samples(), copies.samples()), (12, 12));
    let s = Tensor::<3>::random([12, b, 2], Distribution::Normal(0.0, 1.0), &device);
    let a = Tensor::<3>::random([12, b, 1], Distribution::Normal(0.0, 1.0), &device);
    let compare = |batched: &DynamicsDraw, copies: &DynamicsDraw| {
        device.seed(7);
        let x = to_vec(batched.step(s.clone(), a.clone()));
        device.seed(7);
        let y = to_vec(copies.step(s.clone(), a.clone()));
        for (p, q) in x.iter().zip(&y) {
            assert!((p - q).abs() < 1e-5, "{x:?}\nvs\n{y:?}");
        }
        x
    };
    let shared = compare(&batched, &copies);
    batched.noise_std = noise.clone();
    copies.noise_std = noise
        .unsqueeze_dim::<4>(1)
        .expand([draws, n, 1, 2])
        .reshape([draws * n, 1, 2]);
    let own = compare(&batched, &copies);
    // The per-draw scales moved the steps: the check above saw them.
    assert!(shared.iter().zip(&own).any(|(p, q)| (p - q).abs() > 0.05));
}
