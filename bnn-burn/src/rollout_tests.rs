use super::*;
use crate::host::{matrix, to_vec};
use crate::latent::LatentConfig;
use crate::nets::{BnnLvConfig, MlpConfig};
use crate::testing::{seeded, test_device};

/// A BNN+LV on `[s (2), a (1)]` predicting `Δs (2)`, with a nearly silent latent and noise, so
/// a step's change is the drawn network's function.
fn model(device: &Device) -> LatentRegressor {
    use crate::posterior::{MeanFieldConfig, PosteriorConfig, ScaleInit};
    // σ = softplus(−1) ≈ 0.31: draws far apart.
    let wide = MeanFieldConfig::new().with_scale(ScaleInit::new().with_rho(-1.0).with_rho_std(0.0));
    let weights = crate::layers::WeightConfig::of(PosteriorConfig::MeanField(wide));
    BnnLvConfig::new(MlpConfig::new(3, vec![8], 2).with_weights(weights))
        .with_latent(LatentConfig::new().with_prior_variance(Some(1e-5)))
        .with_noise_std(1e-4)
        .init_regressor(10, device)
        .unwrap()
}

fn policy(device: &Device) -> Policy {
    PolicyConfig::new(2, vec![4], vec![-1.0], vec![1.0])
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
