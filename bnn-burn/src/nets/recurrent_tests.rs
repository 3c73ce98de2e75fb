use super::*;
use crate::host::HostNormals;
use crate::host::to_vec;
use crate::layers::Estimator;
use crate::likelihood::{Categorical, GaussianLikelihoodConfig, NoiseFit};
use crate::posterior::{KlDivergence, PosteriorConfig};
use crate::predict::{Predict, PredictMode};
use crate::step::Model;
use crate::testing::seeded;
use crate::train::{TrainConfig, train};
use crate::{device, training_device};

/// A fixed draw (`samples` equal rows) of a layer of `rows × cols` weights.
fn draw(weight: &[f64], bias: Option<&[f64]>, samples: usize, d: &Device) -> LayerDraw {
    let rows = |v: &[f64]| {
        let row = Tensor::<1>::from_floats(v, d).reshape([1, v.len()]);
        row.repeat_dim(0, samples)
    };
    LayerDraw {
        weight: rows(weight),
        bias: bias.map(rows),
    }
}

fn identity(n: usize) -> Vec<f64> {
    (0..n * n)
        .map(|i| if i / n == i % n { 1.0 } else { 0.0 })
        .collect()
}

/// `[S, B, T, H]` as host rows `v[s][b][t][h]`.
fn host4(x: Tensor<4>) -> Vec<Vec<Vec<Vec<f64>>>> {
    let [s, b, t, h] = x.dims();
    let v = to_vec(x);
    (0..s)
        .map(|i| {
            (0..b)
                .map(|j| {
                    (0..t)
                        .map(|k| v[((i * b + j) * t + k) * h..][..h].to_vec())
                        .collect()
                })
                .collect()
        })
        .collect()
}

fn rnn(input_dropout: f64, hidden_dropout: f64, width: usize, d: &Device) -> RecurrentBody {
    RecurrentConfig::new(width, width, 1)
        .with_cell(Cell::Rnn)
        .with_weights(WeightConfig::of(PosteriorConfig::point()))
        .with_input_dropout(input_dropout)
        .with_hidden_dropout(hidden_dropout)
        .init(Categorical, d)
        .unwrap()
        .body
}

#[test]
fn input_masks_are_tied_across_steps_and_fresh_across_sequences_samples_and_passes() {
    let d = device();
    let _guard = seeded(&d, 3);
    let (h, s, b, t) = (64, 3, 4, 5);
    let body = rnn(0.5, 0.0, h, &d);
    // W_x = I, no bias, W_h = 0: h_t = tanh(x_t ⊙ z), so with x = 1 a unit is 0 exactly
    // where the mask drops it.
    let draws = [
        draw(&identity(h), Some(&vec![0.0; h]), s, &d),
        draw(&vec![0.0; h * h], None, s, &d),
    ];
    let x = Sequences::full(Tensor::ones([b, t, h], &d));
    let dropped = |pass: &mut Pass| -> Vec<Vec<Vec<Vec<bool>>>> {
        let states = host4(body.run(x.clone(), pass).0);
        states
            .iter()
            .map(|si| {
                si.iter()
                    .map(|bi| {
                        bi.iter()
                            .map(|ti| ti.iter().map(|v| *v == 0.0).collect())
                            .collect()
                    })
                    .collect()
            })
            .collect()
    };
    let first = dropped(&mut Pass::fixed(&draws));
    for (i, si) in first.iter().enumerate() {
        for (j, bi) in si.iter().enumerate() {
            for step in bi {
                assert_eq!(step, &bi[0], "sample {i}, sequence {j}: the mask changed");
            }
            let n_dropped = bi[0].iter().filter(|z| **z).count();
            // Binomial(64, ½): 4.5 standard deviations either side.
            assert!((14..=50).contains(&n_dropped), "{n_dropped} of 64 dropped");
        }
    }
    let masks: Vec<&Vec<bool>> = first.iter().flatten().map(|bi| &bi[0]).collect();
    for a in 0..masks.len() {
        for c in a + 1..masks.len() {
            assert_ne!(masks[a], masks[c], "two sequences or samples share a mask");
        }
    }
    let second = dropped(&mut Pass::fixed(&draws));
    assert_ne!(first[0][0][0], second[0][0][0], "a new pass kept the masks");
}

#[test]
fn hidden_masks_are_tied_across_steps() {
    let d = device();
    let _guard = seeded(&d, 4);
    let (h, s, b, t) = (64, 2, 3, 6);
    let body = rnn(0.0, 0.5, h, &d);
    // W_x = 0, bias 1, W_h = I: h_1 = tanh 1 everywhere; afterwards a unit whose recurrent
    // input is dropped stays at tanh 1 and a kept one grows past it.
    let draws = [
        draw(&vec![0.0; h * h], Some(&vec![1.0; h]), s, &d),
        draw(&identity(h), None, s, &d),
    ];
    let x = Sequences::full(Tensor::zeros([b, t, h], &d));
    let states = host4(body.run(x, &mut Pass::fixed(&draws)).0);
    let base = 1f64.tanh();
    for si in &states {
        for bi in si {
            let stuck: Vec<bool> = bi[1].iter().map(|v| (v - base).abs() < 1e-6).collect();
            assert!(stuck.iter().any(|z| *z) && !stuck.iter().all(|z| *z));
            for step in &bi[2..] {
                let now: Vec<bool> = step.iter().map(|v| (v - base).abs() < 1e-6).collect();
                assert_eq!(now, stuck, "the recurrent mask changed between steps");
            }
        }
    }
}

#[test]
fn every_gate_has_its_own_mask_at_the_configured_rate() {
    let d = device();
    let _guard = seeded(&d, 5);
    for cell in [Cell::Rnn, Cell::Gru, Cell::Lstm] {
        let net = RecurrentConfig::new(200, 50, 1)
            .with_cell(cell)
            .with_input_dropout(0.3)
            .with_hidden_dropout(0.6)
            .init(Categorical, &d)
            .unwrap();
        let state = net.body.begin(7, &mut Pass::predict(2), &d);
        let g = cell.gates();
        let z_x = state.z_x.clone().unwrap();
        let z_h = state.z_h.clone().unwrap();
        assert_eq!(z_x.dims(), [2, g, 7, 200]);
        assert_eq!(z_h.dims(), [2, g, 7, 50]);
        for (z, p) in [(z_x, 0.3), (z_h, 0.6)] {
            let v = to_vec(z.clone());
            let kept = v.iter().filter(|x| **x > 0.0).count() as f64 / v.len() as f64;
            let se = (p * (1.0 - p) / v.len() as f64).sqrt();
            assert!(
                (kept - (1.0 - p)).abs() < 5.0 * se,
                "kept {kept} at p = {p}"
            );
            assert!(
                v.iter()
                    .all(|x| *x == 0.0 || (x - 1.0 / (1.0 - p)).abs() < 1e-5)
            );
            if g > 1 {
                let first = to_vec(z.clone().narrow(1, 0, 1));
                let second = to_vec(z.narrow(1, 1, 1));
                assert_ne!(first, second, "{cell:?}: two gates share a mask");
            }
        }
    }
}

/// The cell's update in f64 on the host: `W_x [d, G·H]`, `b [G·H]`, `W_h [H, G·H]`, gate `k`
/// in columns `k·H..(k+1)·H`; inputs `[T][d]`; returns every `h_t`.
fn host_cell(cell: Cell, w_x: &[f64], b: &[f64], w_h: &[f64], xs: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let d = xs[0].len();
    let gh = b.len();
    let h_n = gh / cell.gates();
    let (mut h, mut c) = (vec![0.0; h_n], vec![0.0; h_n]);
    let mut out = Vec::new();
    for x in xs {
        let px: Vec<f64> = (0..gh)
            .map(|j| b[j] + (0..d).map(|i| x[i] * w_x[i * gh + j]).sum::<f64>())
            .collect();
        let ph: Vec<f64> = (0..gh)
            .map(|j| (0..h_n).map(|i| h[i] * w_h[i * gh + j]).sum::<f64>())
            .collect();
        let at = |k: usize, u: usize| (px[k * h_n + u], ph[k * h_n + u]);
        h = (0..h_n)
            .map(|u| match cell {
                Cell::Rnn => (at(0, u).0 + at(0, u).1).tanh(),
                Cell::Gru => {
                    let r = sig(at(0, u).0 + at(0, u).1);
                    let z = sig(at(1, u).0 + at(1, u).1);
                    let n = (at(2, u).0 + r * at(2, u).1).tanh();
                    (1.0 - z) * n + z * h[u]
                }
                Cell::Lstm => {
                    let pre = |k| at(k, u).0 + at(k, u).1;
                    c[u] = sig(pre(1)) * c[u] + sig(pre(0)) * pre(2).tanh();
                    sig(pre(3)) * c[u].tanh()
                }
            })
            .collect();
        out.push(h.clone());
    }
    out
}

#[test]
fn each_cell_matches_its_equations_on_the_host() {
    let d = device();
    let _guard = seeded(&d, 6);
    let mut rng = HostNormals::new(6);
    let (d_in, h, t) = (3, 4, 5);
    for cell in [Cell::Rnn, Cell::Gru, Cell::Lstm] {
        let gh = cell.gates() * h;
        let mut normals =
            |n: usize, scale: f64| -> Vec<f64> { (0..n).map(|_| scale * rng.next()).collect() };
        let (w_x, b, w_h) = (
            normals(d_in * gh, 0.7),
            normals(gh, 0.3),
            normals(h * gh, 0.5),
        );
        let xs: Vec<Vec<f64>> = (0..t).map(|_| normals(d_in, 1.0)).collect();
        let body = RecurrentConfig::new(d_in, h, 1)
            .with_cell(cell)
            .init(Categorical, &d)
            .unwrap()
            .body;
        let draws = [draw(&w_x, Some(&b), 1, &d), draw(&w_h, None, 1, &d)];
        let flat: Vec<f64> = xs.iter().flatten().copied().collect();
        let x = Tensor::<1>::from_floats(flat.as_slice(), &d).reshape([1, t, d_in]);
        let got = host4(body.run(Sequences::full(x), &mut Pass::fixed(&draws)).0);
        let want = host_cell(cell, &w_x, &b, &w_h, &xs);
        for k in 0..t {
            for u in 0..h {
                let (g, w) = (got[0][0][k][u], want[k][u]);
                assert!(
                    (g - w).abs() < 1e-5,
                    "{cell:?} step {k} unit {u}: {g} vs {w}"
                );
            }
        }
    }
}

#[test]
fn padding_after_a_sequence_keeps_its_last_state() {
    let d = device();
    let _guard = seeded(&d, 7);
    let net = RecurrentConfig::new(2, 8, 1).init(Categorical, &d).unwrap();
    let draws = net.body.draw();
    let x = Tensor::<3>::random([2, 6, 2], Distribution::Normal(0.0, 1.0), &d);
    // Sequence 0 has 4 steps, sequence 1 all 6.
    let mask = Tensor::<1>::from_floats([1., 1., 1., 1., 0., 0., 1., 1., 1., 1., 1., 1.], &d)
        .reshape([2, 6]);
    let padded = Sequences {
        values: x.clone(),
        mask,
    };
    let short = Sequences::full(x.clone().narrow(0, 0, 1).narrow(1, 0, 4));
    let features = |input: Sequences| to_vec(net.body.features(input, &mut Pass::fixed(&draws)));
    let both = features(padded);
    let alone = features(short);
    for u in 0..8 {
        assert!((both[u] - alone[u]).abs() < 1e-6, "unit {u}");
    }
    let full = features(Sequences::full(x.narrow(0, 1, 1)));
    for u in 0..8 {
        assert!((both[8 + u] - full[u]).abs() < 1e-6, "unit {u}");
    }
}

#[test]
fn a_training_step_collects_every_layers_kl_once() {
    let d = training_device();
    let _guard = seeded(&d, 8);
    let net = RecurrentConfig::new(2, 6, 1)
        .with_cell(Cell::Gru)
        .init_regressor(&d)
        .unwrap();
    let x = Sequences::full(Tensor::random(
        [5, 7, 2],
        Distribution::Normal(0.0, 1.0),
        &d,
    ));
    let mut pass = Pass::train(3, true);
    let out = net.forward(x, &mut pass);
    assert_eq!(out.dims(), [3, 5, 1]);
    let (kl, ratio) = pass.into_terms(&d);
    let want = to_vec(net.kl())[0];
    assert!((to_vec(kl)[0] - want).abs() < 1e-3 * want.abs());
    let ratio = ratio.unwrap().expect("a log-ratio per sample");
    assert_eq!(ratio.dims(), [3]);
    assert!(to_vec(ratio).iter().all(|r| r.is_finite()));
}

#[test]
fn the_forecast_feeds_its_predictions_back_under_one_draw() {
    let d = device();
    let _guard = seeded(&d, 9);
    let net = RecurrentConfig::new(2, 8, 2)
        .with_weights(WeightConfig::of(PosteriorConfig::point()))
        .init_regressor(&d)
        .unwrap();
    let context = Tensor::<3>::random([3, 5, 2], Distribution::Normal(0.0, 1.0), &d);
    let forecast = net.forecast(Sequences::full(context.clone()), 3, 2);
    assert_eq!(forecast.dims(), [2, 3, 3, 2]);
    // A point network: step k is the one-step prediction after the context and the k
    // predictions before it.
    let mut inputs = context;
    for k in 0..3 {
        let next = net.forward(Sequences::full(inputs.clone()), &mut Pass::predict(1));
        let got = forecast
            .clone()
            .narrow(2, k, 1)
            .narrow(0, 1, 1)
            .reshape([3, 1, 2]);
        let next = next.reshape([3, 1, 2]);
        let gap = to_vec((got - next.clone()).abs().max())[0];
        assert!(gap < 1e-5, "step {k}: {gap}");
        inputs = Tensor::cat(vec![inputs, next], 1);
    }
    // With dropout every sample is its own network, held over the horizon.
    let net = RecurrentConfig::new(2, 8, 2)
        .with_weights(WeightConfig::of(PosteriorConfig::point()))
        .with_input_dropout(0.3)
        .init_regressor(&d)
        .unwrap();
    let f = to_vec(net.forecast(Sequences::full(Tensor::ones([1, 4, 2], &d)), 2, 2));
    assert_ne!(f[..4], f[4..], "two samples gave one forecast");
}

#[test]
fn bad_recurrent_settings_and_inputs_are_named() {
    let d = device();
    let _guard = seeded(&d, 12);
    let err = RecurrentConfig::new(2, 4, 1)
        .with_hidden_dropout(1.0)
        .init(Categorical, &d)
        .unwrap_err();
    assert_eq!(err.field, "hidden_dropout");
    let err = RecurrentConfig::new(2, 0, 1)
        .init(Categorical, &d)
        .unwrap_err();
    assert_eq!(err.field, "d_hidden");
    let net = RecurrentConfig::new(2, 4, 1).init_regressor(&d).unwrap();
    let wide = Sequences::full(Tensor::zeros([3, 5, 4], &d));
    let err = net
        .check_data(&wide, &Tensor::zeros([3, 1], &d))
        .unwrap_err();
    assert!(err.to_string().contains("inputs"), "{err}");
    let bad_mask = Sequences {
        values: Tensor::zeros([3, 5, 2], &d),
        mask: Tensor::ones([3, 4], &d),
    };
    let err = net
        .check_data(&bad_mask, &Tensor::zeros([3, 1], &d))
        .unwrap_err();
    assert!(err.to_string().contains("mask"), "{err}");
}

/// `n` windows of `t` steps of a noisy sine (two phase-shifted channels) and the next value.
fn sine_windows(n: usize, t: usize, offset: usize, d: &Device) -> (Sequences, Tensor<2>) {
    let mut rng = HostNormals::new(offset as u64);
    let value = |k: usize, c: usize| ((k as f64) * 0.3 + c as f64).sin();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for i in 0..n {
        let start = offset + 3 * i;
        for k in start..start + t {
            for c in 0..2 {
                x.push(value(k, c) + 0.05 * rng.next());
            }
        }
        for c in 0..2 {
            y.push(value(start + t, c) + 0.05 * rng.next());
        }
    }
    let x = Tensor::<1>::from_floats(x.as_slice(), d).reshape([n, t, 2]);
    let y = Tensor::<1>::from_floats(y.as_slice(), d).reshape([n, 2]);
    (Sequences::full(x), y)
}

#[test]
fn a_variational_lstm_learns_to_forecast_a_sine_and_decomposes_its_uncertainty() {
    let d = training_device();
    let _guard = seeded(&d, 10);
    let (x, y) = sine_windows(120, 8, 0, &d);
    let likelihood = GaussianLikelihoodConfig::new()
        .with_d_output(2)
        .with_noise_std(0.1)
        .with_fit(NoiseFit::Fixed)
        .init(&d)
        .unwrap();
    let net = RecurrentConfig::new(2, 16, 2)
        .with_weights(
            WeightConfig::of(PosteriorConfig::point())
                .with_estimator(Estimator::Reparameterization),
        )
        .with_input_dropout(0.1)
        .with_hidden_dropout(0.1)
        .init(likelihood, &d)
        .unwrap();
    let config = TrainConfig::new(150)
        .with_batch_size(40)
        .with_learning_rate(1e-2)
        .with_seed(10);
    let (net, _) = train(net, (x, y), &config).unwrap();
    let plain = d.clone().inner();
    let (tx, ty) = sine_windows(40, 8, 500, &plain);
    let net = net.valid();
    let pred = net.predict(tx.clone(), PredictMode::Samples(30)).unwrap();
    let mse = to_vec((pred.mean() - ty.clone()).square().mean())[0];
    // Predicting the last observed value instead (the persistence forecast).
    let last = tx.values.clone().narrow(1, 7, 1).reshape([40, 2]);
    let persistence = to_vec((last - ty).square().mean())[0];
    assert!(
        mse < 0.25 * persistence,
        "MSE {mse} vs persistence {persistence}"
    );
    let epistemic = to_vec(pred.epistemic_variance().mean())[0];
    let aleatoric = to_vec(pred.aleatoric_variance().mean())[0];
    assert!(
        epistemic > 0.0 && (aleatoric - 0.01).abs() < 1e-6,
        "epistemic {epistemic}, aleatoric {aleatoric}"
    );
}

#[test]
fn every_family_runs_a_recurrent_body() {
    let d = device();
    let _guard = seeded(&d, 11);
    for weights in crate::nets::tests::families() {
        for cell in [Cell::Rnn, Cell::Gru, Cell::Lstm] {
            let net = RecurrentConfig::new(3, 5, 2)
                .with_cell(cell)
                .with_weights(weights.clone())
                .with_hidden_dropout(0.2)
                .init(Categorical, &d)
                .unwrap();
            let x = Sequences::full(Tensor::random(
                [4, 6, 3],
                Distribution::Normal(0.0, 1.0),
                &d,
            ));
            let out = net.forward(x, &mut Pass::predict(2));
            assert_eq!(out.dims(), [2, 4, 2]);
            assert!(to_vec(out).iter().all(|v| v.is_finite()));
        }
    }
}
