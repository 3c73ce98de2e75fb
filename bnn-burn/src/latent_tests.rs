use super::*;
use crate::testing::{test_device, to_vec};

fn table(rows: usize) -> LatentTable {
    LatentConfig::new()
        .with_d_latent(2)
        .init(rows, 3, &test_device().autodiff())
        .unwrap()
}

/// Gradients for the table's two parameters (and one foreign id the step must leave alone).
fn grads_for(t: &LatentTable, g_mean: Tensor<2>, g_logit: Tensor<2>) -> GradientsParams {
    let mut grads = GradientsParams::new();
    grads.register(t.mean.id, g_mean);
    grads.register(t.logit.id, g_logit);
    grads
}

#[test]
fn the_table_starts_near_the_prior_with_variances_inside_zero_gamma() {
    let t = table(5);
    assert_eq!((t.rows(), t.d_latent(), t.gamma), (5, 2, 3.0));
    let (m, v) = t.rows_of(crate::host::labels(&[0, 4], &t.mean.device()));
    assert!(to_vec(m).iter().all(|&x| x == 0.0));
    let v = to_vec(v);
    // 10⁻⁶ + sigmoid(5)·(3 − 2·10⁻⁶) = 2.97992…
    assert!(v.iter().all(|&x| (x - 2.979_921).abs() < 1e-5), "{v:?}");
    let extreme = to_vec(t.variance_of(Tensor::from_floats([[-200.0, 200.0]], &t.mean.device())));
    assert!(extreme[0] > 0.0 && extreme[1] < 3.0, "{extreme:?}");
    // KL(N(m, v) ‖ N(0, γ)) = ½ Σ (v/γ + m²/γ − 1 − ln(v/γ)).
    let device = t.mean.device();
    let kl = to_vec(t.kl(
        Tensor::from_floats([[0.5, -1.0]], &device),
        Tensor::from_floats([[0.3, 6.0]], &device),
    ))[0];
    let want: f64 = [(0.5f64, 0.3f64), (-1.0, 6.0)]
        .iter()
        .map(|&(m, v)| 0.5 * (v / 3.0 + m * m / 3.0 - 1.0 - (v / 3.0).ln()))
        .sum();
    assert!((kl - want).abs() < 1e-5, "{kl} vs {want}");
}

/// Adam's first step moves every touched element by the step size against the gradient's sign
/// (`m̂/√v̂ = ±1`), here `lr·N/B`; rows outside the batch do not move, and a later step of one row
/// uses that row's own step count.
#[test]
fn the_sparse_step_moves_only_the_batch_rows_by_adam() {
    let t = table(6);
    let g_mean = Tensor::<2>::from_floats(
        [
            [1.0, -2.0],
            [0.0, 0.0],
            [0.5, 0.5],
            [3.0, -3.0],
            [0.0, 0.0],
            [9.0, 9.0],
        ],
        &t.mean.device(),
    )
    .inner();
    let g_logit = g_mean.clone() * -1.0;
    let mut grads = grads_for(&t, g_mean.clone(), g_logit.clone());
    let (lr, rows) = (0.01, [0usize, 2, 3]);
    let t = t.sparse_step(&mut grads, &rows, lr);
    assert!(grads.is_empty(), "the table's gradients are taken out");
    let step = lr * 6.0 / 3.0;
    let mean = to_vec(t.mean.val());
    let logit = to_vec(t.logit.val());
    let want_mean = [
        -step, step, 0.0, 0.0, -step, -step, -step, step, 0.0, 0.0, 0.0, 0.0,
    ];
    for i in 0..12 {
        assert!((mean[i] - want_mean[i]).abs() < 1e-6, "mean {i}: {mean:?}");
        let want_logit = 5.0 - want_mean[i];
        assert!((logit[i] - want_logit).abs() < 1e-6, "logit {i}: {logit:?}");
    }
    assert!(t.mean.val().is_require_grad() && t.logit.val().is_require_grad());
    assert_eq!(t.adam.steps, vec![1, 0, 1, 1, 0, 0]);
    // Row 5 (never touched) now gets its own first step: again exactly the step size, although
    // the other rows are on their second.
    let mut grads = grads_for(&t, g_mean, g_logit);
    let t = t.sparse_step(&mut grads, &[5, 0], lr);
    let mean = to_vec(t.mean.val());
    assert!((mean[10] + lr * 3.0).abs() < 1e-6, "{mean:?}");
    assert_eq!(t.adam.steps, vec![2, 0, 1, 1, 0, 1]);
    assert_eq!(to_vec(t.mean.val())[2..4], [0.0, 0.0]);
}

/// A grown table keeps its rows' `q(z_n)`; the new rows start where a fresh table starts, and
/// every row takes its next Adam step as a fresh row does (the optimiser starts afresh).
#[test]
fn a_grown_table_keeps_its_rows_and_starts_the_new_ones_fresh() {
    let t = table(3);
    let device = t.mean.device();
    let g = Tensor::<2>::from_floats([[1.0, -1.0], [2.0, 2.0], [0.0, 0.0]], &device).inner();
    let mut grads = grads_for(&t, g.clone(), g);
    let t = t.sparse_step(&mut grads, &[0, 1], 0.01);
    let (mean, logit) = (to_vec(t.mean.val()), to_vec(t.logit.val()));
    let grown = t.with_rows(5, 5.0).unwrap();
    assert_eq!((grown.rows(), grown.d_latent()), (5, 2));
    let (m, l) = (to_vec(grown.mean.val()), to_vec(grown.logit.val()));
    assert_eq!(m[..6], mean[..]);
    assert_eq!(l[..6], logit[..]);
    assert_eq!(m[6..], [0.0; 4]);
    assert_eq!(l[6..], [5.0; 4]);
    assert_eq!(grown.adam.steps, vec![0; 5]);
    assert!(grown.adam.moments.iter().all(|m| *m == 0.0));
    assert!(grown.mean.val().is_require_grad());
    // Rows 0 and 4 both take a first step: each moves by exactly the step size.
    let g = Tensor::<2>::from_floats(
        [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [-1.0, 1.0]],
        &device,
    )
    .inner();
    let mut grads = grads_for(&grown, g.clone(), g);
    let stepped = grown.sparse_step(&mut grads, &[0, 4], 0.01);
    let step = 0.01 * 5.0 / 2.0;
    let m = to_vec(stepped.mean.val());
    assert!(
        (m[8] - step).abs() < 1e-6 && (m[9] + step).abs() < 1e-6,
        "{m:?}"
    );
    assert!((m[0] - mean[0] + step).abs() < 1e-6, "{m:?}");
    assert_eq!(stepped.adam.steps, vec![1, 0, 0, 0, 1]);
    assert_eq!(table(4).with_rows(2, 5.0).unwrap_err().field, "rows");
    assert_eq!(
        table(4).with_rows(6, f64::NAN).unwrap_err().field,
        "init_logit"
    );
}

/// `learning_rate_scale` scales the table's step (here the first, `scale·lr·N/B` exactly).
#[test]
fn the_learning_rate_scale_scales_the_table_step() {
    let t = LatentConfig::new()
        .with_learning_rate_scale(0.1)
        .init(4, 3, &test_device().autodiff())
        .unwrap();
    let device = t.mean.device();
    let g = Tensor::<2>::from_floats([[1.0], [-1.0], [2.0], [0.0]], &device).inner();
    let mut grads = grads_for(&t, g.clone(), g);
    let t = t.sparse_step(&mut grads, &[0, 1], 0.01);
    let step = 0.1 * 0.01 * 4.0 / 2.0;
    let mean = to_vec(t.mean.val());
    assert!(
        (mean[0] + step).abs() < 1e-7 && (mean[1] - step).abs() < 1e-7,
        "{mean:?}"
    );
    assert_eq!(mean[2..], [0.0, 0.0]);
}

#[test]
fn bad_latent_configs_name_the_field() {
    let device = test_device();
    let field = |c: LatentConfig, rows| c.init(rows, 2, &device).unwrap_err().field;
    assert_eq!(field(LatentConfig::new(), 0), "rows");
    assert_eq!(field(LatentConfig::new().with_d_latent(0), 3), "d_latent");
    assert_eq!(
        field(LatentConfig::new().with_prior_variance(Some(0.0)), 3),
        "prior_variance"
    );
    assert_eq!(
        field(LatentConfig::new().with_init_logit(f64::NAN), 3),
        "init_logit"
    );
    assert_eq!(field(LatentConfig::new().with_beta_2(1.0), 3), "beta_2");
    assert_eq!(
        field(LatentConfig::new().with_learning_rate_scale(0.0), 3),
        "learning_rate_scale"
    );
}
