//! Every moment rule against Monte Carlo through the same Gaussian input (10⁶ draws, `f64` on
//! the host), with tolerances from the sample size: 5 standard errors of the sample mean
//! (`√(Var/n)`) and of the sample variance (`√((m₄ − Var²)/n)`), plus the `f32` rounding of
//! the rule's own evaluation.

use super::*;
use crate::testing::{SampleMoments, host_normals as normals, sample_moments, test_device, to_vec};
use rand::{RngExt, SeedableRng, rngs::StdRng};

const N: usize = 1_000_000;

/// Sample mean, variance and their standard errors of `h(i)` over `n` draws.
fn monte_carlo(n: usize, h: impl FnMut(usize) -> f64) -> SampleMoments {
    sample_moments(&(0..n).map(h).collect::<Vec<_>>())
}

/// The grid: `s ∈ {0.1, 1, 3}`, `a = μ/s ∈ {−10, …, 10}`.
fn grid() -> Vec<(f64, f64)> {
    let ratios = [-10.0, -3.0, -1.0, -0.2, 0.0, 0.2, 1.0, 3.0, 10.0];
    [0.1, 1.0, 3.0]
        .iter()
        .flat_map(|&s| ratios.iter().map(move |&a| (a * s, s)))
        .collect()
}

/// The rule's moments on the whole grid at once, on the device.
fn rule_on_grid(points: &[(f64, f64)], rule: impl Fn(Moments<1>) -> Moments<1>) -> Vec<(f64, f64)> {
    let device = test_device();
    let mean: Vec<f32> = points.iter().map(|p| p.0 as f32).collect();
    let var: Vec<f32> = points.iter().map(|p| (p.1 * p.1) as f32).collect();
    let m = Moments::new(
        Tensor::<1>::from_floats(mean.as_slice(), &device),
        Tensor::<1>::from_floats(var.as_slice(), &device),
    );
    let out = rule(m);
    to_vec(out.mean).into_iter().zip(to_vec(out.var)).collect()
}

/// Checks `rule` against `h(f, u)` with `f ~ N(μ, s²)` and `u ~ U(0, 1)` independent.
fn check(
    name: &str,
    rule: impl Fn(Moments<1>) -> Moments<1>,
    h: impl Fn(f64, f64, f64) -> f64,
    seed: u64,
) {
    let points = grid();
    let got = rule_on_grid(&points, rule);
    let eps = normals(N, seed);
    let mut rng = StdRng::seed_from_u64(seed + 1);
    let uniforms: Vec<f64> = (0..N).map(|_| rng.random()).collect();
    for (&(mu, s), &(mean, var)) in points.iter().zip(&got) {
        let mc = monte_carlo(N, |i| h(mu + s * eps[i], uniforms[i], mu));
        // f32 evaluation of the rule: relative 1e-5 of the input's scale.
        let scale = mu.abs() + s;
        let mean_tol = 5.0 * mc.mean_se + 1e-5 * scale;
        let var_tol = 5.0 * mc.var_se + 1e-5 * scale * scale;
        assert!(
            (mean - mc.mean).abs() <= mean_tol,
            "{name} at μ = {mu}, s = {s}: mean {mean} vs Monte Carlo {} (tolerance {mean_tol:.2e})",
            mc.mean
        );
        assert!(
            (var - mc.var).abs() <= var_tol,
            "{name} at μ = {mu}, s = {s}: variance {var} vs Monte Carlo {} (tolerance {var_tol:.2e})",
            mc.var
        );
    }
}

fn sigmoid_f64(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

#[test]
fn relu_moments_match_monte_carlo() {
    check("relu", relu_moments, |f, _, _| f.max(0.0), 1);
}

#[test]
fn leaky_relu_moments_match_monte_carlo() {
    check(
        "leaky relu",
        |m| leaky_relu_moments(m, 0.1),
        |f, _, _| if f > 0.0 { f } else { 0.1 * f },
        2,
    );
}

#[test]
fn elu_and_selu_moments_match_monte_carlo() {
    check(
        "elu",
        |m| elu_moments(m, 0.7),
        |f, _, _| if f > 0.0 { f } else { 0.7 * f.exp_m1() },
        3,
    );
    let (lambda, alpha) = SELU;
    check(
        "selu",
        |m| Activation::Selu.moments(m, MomentRule::Clt).unwrap(),
        |f, _, _| lambda * if f > 0.0 { f } else { alpha * f.exp_m1() },
        4,
    );
}

#[test]
fn softplus_moments_match_monte_carlo() {
    check(
        "softplus",
        |m| Activation::Softplus.moments(m, MomentRule::Clt).unwrap(),
        |f, _, _| f.max(0.0) + (-f.abs()).exp().ln_1p(),
        7,
    );
}

#[test]
fn cos_moments_match_monte_carlo() {
    check(
        "cos",
        |m| Activation::Cos.moments(m, MomentRule::Clt).unwrap(),
        |f, _, _| f.cos(),
        8,
    );
}

#[test]
fn vbp_gates_match_monte_carlo_of_their_bernoulli_model() {
    // VBP's model: h = f·z with z ~ Ber(σ(C·E[f])) independent of f.
    for c in [1.0, 100.0] {
        check(
            "VBP relu",
            |m| {
                Activation::Relu
                    .moments(m, MomentRule::Vbp { gate: c })
                    .unwrap()
            },
            move |f, u, mu| if u < sigmoid_f64(c * mu) { f } else { 0.0 },
            5,
        );
        check(
            "VBP leaky relu",
            |m| leaky_relu_vbp_moments(m, 0.2, c),
            move |f, u, mu| {
                let z = if u < sigmoid_f64(c * mu) { 1.0 } else { 0.0 };
                f * (0.2 + 0.8 * z)
            },
            6,
        );
    }
}

#[test]
fn vbp_matches_clt_far_from_zero() {
    // §3.5: the two rules agree for |μ| ≫ s (the gate is then 0 or 1).
    let device = test_device();
    let m = || {
        Moments::new(
            Tensor::<1>::from_floats([-8.0, 8.0], &device),
            Tensor::<1>::from_floats([1.0, 1.0], &device),
        )
    };
    let vbp = relu_vbp_moments(m(), 100.0);
    let clt = relu_moments(m());
    for (a, b) in to_vec(vbp.mean).iter().zip(to_vec(clt.mean)) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
    for (a, b) in to_vec(vbp.var).iter().zip(to_vec(clt.var)) {
        assert!((a - b).abs() < 1e-4, "{a} vs {b}");
    }
}

#[test]
fn identity_passes_moments_and_tanh_is_refused() {
    let device = test_device();
    let m = Moments::new(
        Tensor::<1>::from_floats([1.5], &device),
        Tensor::<1>::from_floats([0.25], &device),
    );
    let out = Activation::Identity
        .moments(m.clone(), MomentRule::Clt)
        .unwrap();
    assert_eq!(to_vec(out.mean), vec![1.5]);
    assert_eq!(to_vec(out.var), vec![0.25]);
    let err = Activation::Tanh.moments(m, MomentRule::Clt).unwrap_err();
    assert!(err.to_string().contains("tanh has no moment rule"), "{err}");
}

#[test]
fn clark_max_of_two_gaussians_is_exact() {
    // For two independent Gaussians Clark's mean and variance are exact.
    let cases = [
        (0.0, 1.0, 0.0, 1.0),
        (1.0, 0.5, -0.5, 2.0),
        (3.0, 0.1, 2.9, 0.3),
        (-4.0, 1.0, 4.0, 1.0),
    ];
    let device = test_device();
    let col = |f: fn(&(f64, f64, f64, f64)) -> f64| {
        let v: Vec<f32> = cases.iter().map(|c| f(c) as f32).collect();
        Tensor::<1>::from_floats(v.as_slice(), &device)
    };
    let a = Moments::new(col(|c| c.0), col(|c| c.1 * c.1));
    let b = Moments::new(col(|c| c.2), col(|c| c.3 * c.3));
    let got = max_moments(a, b);
    let (mean, var) = (to_vec(got.mean), to_vec(got.var));
    let e1 = normals(N, 7);
    let e2 = normals(N, 8);
    for (i, &(ma, sa, mb, sb)) in cases.iter().enumerate() {
        let mc = monte_carlo(N, |k| (ma + sa * e1[k]).max(mb + sb * e2[k]));
        let scale = ma.abs().max(mb.abs()) + sa + sb;
        assert!(
            (mean[i] - mc.mean).abs() <= 5.0 * mc.mean_se + 1e-5 * scale,
            "case {i}: mean {} vs {}",
            mean[i],
            mc.mean
        );
        assert!(
            (var[i] - mc.var).abs() <= 5.0 * mc.var_se + 1e-5 * scale * scale,
            "case {i}: variance {} vs {}",
            var[i],
            mc.var
        );
    }
}

#[test]
fn pooled_moments_reduce_to_pooling_without_variance_and_average_exactly() {
    let device = test_device();
    let x: Vec<f32> = (0..32).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let mean = Tensor::<1>::from_floats(x.as_slice(), &device).reshape([1, 1, 2, 4, 4]);
    let var = mean.clone().abs() * 0.1 + 0.5;
    for pool in [
        Pool::Max {
            kernel: 2,
            stride: 2,
        },
        Pool::Avg {
            kernel: 2,
            stride: 2,
        },
        Pool::Max {
            kernel: 3,
            stride: 1,
        },
    ] {
        for kernels in [Kernels::Reference, Kernels::Fused] {
            pooled_moments_reduce_to_pooling(pool, kernels, &mean, &var);
        }
    }
}

fn pooled_moments_reduce_to_pooling(
    pool: Pool,
    kernels: Kernels,
    mean: &Tensor<5>,
    var: &Tensor<5>,
) {
    let det = pool.moments_by(Moments::new(mean.clone(), mean.zeros_like()), kernels);
    let det_dims = det.dims();
    let want = to_vec(pool.forward(mean.clone()));
    for (g, w) in to_vec(det.mean).iter().zip(&want) {
        assert!((g - w).abs() < 1e-3, "{kernels:?} {pool:?}: {g} vs {w}");
    }
    assert!(
        to_vec(det.var).iter().all(|v| *v < 1e-6),
        "{kernels:?} {pool:?}"
    );
    let noisy = pool.moments_by(Moments::new(mean.clone(), var.clone()), kernels);
    assert_eq!(noisy.dims(), det_dims);
    if let Pool::Avg { .. } = pool {
        // Σ var / k⁴ over each window.
        let want = to_vec(
            Pool::Avg {
                kernel: 2,
                stride: 2,
            }
            .forward(var.clone()),
        );
        for (g, w) in to_vec(noisy.var).iter().zip(&want) {
            assert!((g - w / 4.0).abs() < 1e-6, "{g} vs {}", w / 4.0);
        }
    }
}

#[test]
fn max_pool_moments_match_monte_carlo_of_a_window() {
    // One 2×2 window: Clark's recursion is an approximation beyond two inputs (the running
    // maximum is not Gaussian). In ascending order of the means, for four comparable inputs, its
    // mean is within 1 % and its variance within 10 % (measured against 10⁶ draws).
    let device = test_device();
    let (mus, sds) = ([0.5f64, 0.0, -0.3, 0.2], [1.0f64, 0.5, 0.8, 0.3]);
    let to_t = |v: [f64; 4]| {
        let f: Vec<f32> = v.iter().map(|x| *x as f32).collect();
        Tensor::<1>::from_floats(f.as_slice(), &device).reshape([1, 1, 1, 2, 2])
    };
    let got = Pool::Max {
        kernel: 2,
        stride: 2,
    }
    .moments(Moments::new(to_t(mus), to_t(sds.map(|s| s * s))));
    let eps: Vec<Vec<f64>> = (0..4).map(|j| normals(N, 20 + j)).collect();
    let mc = monte_carlo(N, |k| {
        (0..4)
            .map(|j| mus[j] + sds[j] * eps[j][k])
            .fold(f64::NEG_INFINITY, f64::max)
    });
    let (mean, var) = (to_vec(got.mean)[0], to_vec(got.var)[0]);
    assert!(
        (mean - mc.mean).abs() < 0.01 * mc.mean.abs() + 5.0 * mc.mean_se,
        "{mean} vs {}",
        mc.mean
    );
    assert!((var - mc.var).abs() < 0.1 * mc.var, "{var} vs {}", mc.var);
}

#[test]
fn extreme_inputs_give_finite_moments() {
    let device = test_device();
    let means = [-1e4f32, -1e4, 1e4, 1e4, 0.0, 0.0, 3.0, -3.0];
    let vars = [0.0f32, 1e8, 0.0, 1e8, 0.0, 1e-30, 1e-12, 1e4];
    let m = || {
        Moments::new(
            Tensor::<1>::from_floats(means, &device),
            Tensor::<1>::from_floats(vars, &device),
        )
    };
    let fused = |rule| {
        let (mean, var) = crate::fused::rectifier_moments(m().mean, m().var, rule);
        Moments::new(mean, var)
    };
    // The fused max pooling over 2×2 maps holding each input and its mirror image, certain,
    // twice.
    let fused_max = {
        let n = means.len();
        let maps = |a: Tensor<1>, b: Tensor<1>| {
            let pair = Tensor::stack::<2>(vec![a, b], 1);
            Tensor::cat(vec![pair.clone(), pair], 1).reshape([n, 2, 2])
        };
        let (mean, var) = crate::fused::max_pool_moments(
            maps(m().mean, m().mean.flip([0])),
            maps(m().var, m().var.zeros_like()),
            2,
            2,
        );
        Moments::new(mean.reshape([n]), var.reshape([n]))
    };
    let rules: [(&str, Moments<1>); 10] = [
        ("fused max", fused_max),
        ("fused relu", fused(crate::fused::RectifierRule::Gaussian)),
        ("fused vbp", fused(crate::fused::RectifierRule::Gate(100.0))),
        ("relu", relu_moments(m())),
        ("leaky", leaky_relu_moments(m(), 0.1)),
        ("elu", elu_moments(m(), 1.0)),
        ("vbp", relu_vbp_moments(m(), 100.0)),
        ("vbp leaky", leaky_relu_vbp_moments(m(), 0.1, 100.0)),
        (
            "max",
            max_moments(m(), Moments::deterministic(m().mean.flip([0]))),
        ),
        (
            "selu",
            Activation::Selu.moments(m(), MomentRule::Clt).unwrap(),
        ),
    ];
    for (name, out) in rules {
        let (mean, var) = (to_vec(out.mean), to_vec(out.var));
        for i in 0..means.len() {
            assert!(
                mean[i].is_finite() && var[i].is_finite() && var[i] >= 0.0,
                "{name} at μ = {}, var = {}: mean {}, variance {}",
                means[i],
                vars[i],
                mean[i],
                var[i]
            );
        }
    }
    // The limits: relu of a certain input is the input, of a certainly negative one 0.
    let relu = relu_moments(m());
    let mean = to_vec(relu.mean);
    assert!((mean[2] - 1e4).abs() < 1e-2 && mean[0].abs() < 1e-6);
}

#[test]
fn max_pool_moments_and_their_gradients_match_a_fold_window_by_window() {
    // The pooled moments gather every window at once (a reshape without overlap, an unfold
    // with it) and sort it, by burn ops on the device or in the fused kernel. The reference
    // finds each window's entries and their ascending order on the host: the same values and,
    // through autodiff, the same gradients, with any crop, overlap or gap between windows.
    // With tied means the fused kernel's sort is stable, as the host's. Two cases have ties:
    // windows whose top row holds two equal means, just above the bottom row's, with
    // different variances; and blank windows, every mean exactly 0 (a background), where the
    // fold's first step meets `a = 0` exactly. (burn's argsort is not stable, so the
    // composition is checked without ties only.)
    let device = crate::training_device();
    let (s, b, c) = (2, 1, 2);
    // (kernel, stride, side): 2×2 tiling, with a crop, 3×3 tiling, overlapping, with gaps.
    let geometries = [(2, 2, 6), (2, 2, 7), (3, 3, 6), (3, 1, 5), (2, 3, 7)];
    let mut cases: Vec<_> = [Kernels::Reference, Kernels::Fused]
        .into_iter()
        .flat_map(|k| {
            geometries.map(|(kernel, stride, side)| (k, kernel, stride, side, "distinct"))
        })
        .collect();
    cases.push((Kernels::Fused, 2, 2, 6, "tied top rows"));
    cases.push((Kernels::Fused, 3, 2, 7, "blank"));
    for (kernels, kernel, stride, side, ties) in cases {
        let pool = Pool::Max { kernel, stride };
        let dims = [s, b, c, side, side];
        let count = dims.iter().product::<usize>();
        // Distinct means (no ties for the sort) from −2 to 2; for 2×2 windows, tied top rows
        // (3 to 3.5) above distinct bottom rows (2.5 to 3); or all 0. Variances from 0.05 to 1.
        let mean: Vec<f32> = (0..count)
            .map(|i| {
                let (plane, row, col) = (i / (side * side), i / side % side, i % side);
                let distinct = ((i * 37 + 11) % 101) as f32 / 101.0;
                match (ties, row % 2) {
                    ("distinct", _) => distinct * 4.0 - 2.0,
                    ("blank", _) => 0.0,
                    (_, 0) => 3.0 + ((plane * 97 + row * 13 + col / 2 * 7) % 11) as f32 / 20.0,
                    _ => 2.5 + distinct / 2.0,
                }
            })
            .collect();
        let var: Vec<f32> = (0..count)
            .map(|i| 0.05 + ((i * 53 + 7) % 97) as f32 / 100.0)
            .collect();
        let leaf = |v: &[f32]| {
            Tensor::<1>::from_floats(v, &device)
                .reshape(dims)
                .require_grad()
        };
        let (m, v) = (leaf(&mean), leaf(&var));
        let out = pool.moments_by(Moments::new(m.clone(), v.clone()), kernels);
        let o = pool.output_side(side).unwrap();
        let cells = s * b * c * o * o;
        // Distinct weights per cell and output, so that a misplaced gradient shows.
        let weights = |shift: usize| {
            let w: Vec<f32> = (0..cells)
                .map(|i| 0.5 + ((i * 29 + shift) % 31) as f32 / 31.0)
                .collect();
            Tensor::<1>::from_floats(w.as_slice(), &device)
        };
        let (wm, wv) = (weights(3), weights(17));
        let loss = (out.mean.clone().reshape([cells]) * wm.clone()).sum()
            + (out.var.clone().reshape([cells]) * wv.clone()).sum();
        let grads = loss.backward();
        let (got_dm, got_dv) = (
            to_vec(m.grad(&grads).unwrap()),
            to_vec(v.grad(&grads).unwrap()),
        );
        let (got_mean, got_var) = (to_vec(out.mean), to_vec(out.var));

        // The reference: the windows and their ascending order found on the host, entry rank
        // by entry rank `r`, each rank's entries picked out of the flat inputs by `select`.
        let (m2, v2) = (leaf(&mean), leaf(&var));
        let flat = |t: &Tensor<5>| t.clone().reshape([count]);
        let mut ranked: Vec<Vec<i64>> = vec![Vec::with_capacity(cells); kernel * kernel];
        for plane in 0..s * b * c {
            for y in 0..o {
                for x in 0..o {
                    let mut window: Vec<usize> = (0..kernel * kernel)
                        .map(|e| {
                            let (row, col) = (y * stride + e / kernel, x * stride + e % kernel);
                            (plane * side + row) * side + col
                        })
                        .collect();
                    window.sort_by(|p, q| mean[*p].total_cmp(&mean[*q]));
                    for (r, i) in window.into_iter().enumerate() {
                        ranked[r].push(i as i64);
                    }
                }
            }
        }
        let pick = |t: &Tensor<5>, r: usize| {
            let idx = Tensor::<1, burn::tensor::Int>::from_ints(ranked[r].as_slice(), &device);
            flat(t).select(0, idx)
        };
        let mut acc = Moments::new(pick(&m2, 0), pick(&v2, 0));
        for r in 1..kernel * kernel {
            acc = max_moments(Moments::new(pick(&m2, r), pick(&v2, r)), acc);
        }
        let (ref_mean, ref_var) = (acc.mean, acc.var);
        let ref_loss = (ref_mean.clone() * wm).sum() + (ref_var.clone() * wv).sum();
        let ref_grads = ref_loss.backward();
        let close = |what: &str, got: &[f64], want: &[f64]| {
            assert_eq!(got.len(), want.len(), "{what}");
            for (i, (g, w)) in got.iter().zip(want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "{kernels:?} {pool:?} on {side}×{side} (ties: {ties}), {what}[{i}]: {g} vs {w}"
                );
            }
        };
        close("mean", &got_mean, &to_vec(ref_mean));
        close("var", &got_var, &to_vec(ref_var));
        close("∂/∂mean", &got_dm, &to_vec(m2.grad(&ref_grads).unwrap()));
        close("∂/∂var", &got_dv, &to_vec(v2.grad(&ref_grads).unwrap()));
    }
}
