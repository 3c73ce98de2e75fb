//! The Dirichlet closed forms against quadrature (two classes: a Beta) and Monte Carlo (four
//! classes), the evidential head's regulariser and prediction, and a 64-class fit under the
//! default annealing.

use super::*;
use crate::dist::dirichlet;
use crate::host::{labels, matrix, to_labels, to_vec};
use crate::layers::WeightConfig;
use crate::nets::MlpConfig;
use crate::posterior::PosteriorConfig;
use crate::predict::{Predict, PredictMode};
use crate::special::lgamma_scalar;
use crate::testing::{HostNormals, golden_section, test_device};
use crate::train::{TrainConfig, Trainer};
use rand::{RngExt, SeedableRng, rngs::StdRng};

/// `E_{Beta(a, b)}[g(π)]` by the midpoint rule on `n` cells (a, b ≥ 1: a bounded density).
fn beta_expectation(a: f64, b: f64, g: impl Fn(f64) -> f64) -> f64 {
    let n = 200_000;
    let ln_norm = lgamma_scalar(a + b) - lgamma_scalar(a) - lgamma_scalar(b);
    (0..n)
        .map(|i| {
            let x = (i as f64 + 0.5) / n as f64;
            let density = (ln_norm + (a - 1.0) * x.ln() + (b - 1.0) * (1.0 - x).ln()).exp();
            density * g(x)
        })
        .sum::<f64>()
        / n as f64
}

/// A `Gamma(shape, 1)` draw for `shape ≥ 1` (Marsaglia and Tsang 2000).
fn gamma(shape: f64, normals: &mut HostNormals, uniform: &mut StdRng) -> f64 {
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let z = normals.next();
        let v = (1.0 + c * z).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u: f64 = uniform.random();
        if u.ln() < 0.5 * z * z + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

fn mean_and_se(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0);
    (m, (var / n).sqrt())
}

#[test]
fn dirichlet_closed_forms_match_beta_quadrature() {
    let device = test_device();
    for (a, b) in [(1.0, 1.0), (2.0, 5.0), (3.5, 1.2), (10.0, 4.0)] {
        let alpha = matrix(&[a, b], 2, &device);
        let ln_norm = lgamma_scalar(a + b) - lgamma_scalar(a) - lgamma_scalar(b);
        let ln_q = |x: f64| ln_norm + (a - 1.0) * x.ln() + (b - 1.0) * (1.0 - x).ln();
        // Dir(1, 1) is the uniform density 1 on the simplex, so the KL is E[ln q].
        let kl = beta_expectation(a, b, ln_q);
        let got = to_vec(dirichlet::kl_to_uniform(alpha.clone()))[0];
        assert!(
            (got - kl).abs() < 1e-4 * kl.abs().max(1.0),
            "KL Beta({a}, {b}): {got} vs {kl}"
        );
        // Label 0: π₀ ~ Beta(a, b), and ‖e₀ − π‖² = 2(1 − π₀)².
        let y = labels(&[0], &device);
        let se = beta_expectation(a, b, |x| 2.0 * (1.0 - x).powi(2));
        let got = to_vec(dirichlet::expected_squared_error(alpha.clone(), y.clone()))[0];
        assert!(
            (got - se).abs() < 1e-5,
            "E‖e − π‖², Beta({a}, {b}): {got} vs {se}"
        );
        if a > 1.0 {
            let log = beta_expectation(a, b, f64::ln);
            let got = to_vec(dirichlet::expected_log_prob(alpha.clone(), y.clone()))[0];
            assert!(
                (got - log).abs() < 1e-4,
                "E ln π, Beta({a}, {b}): {got} vs {log}"
            );
        }
        let got = to_vec(dirichlet::log_marginal(alpha, y))[0];
        assert!((got - (a / (a + b)).ln()).abs() < 1e-6);
    }
}

/// Four classes: the KL, the squared error and `E ln π_y` against 100 000 Dirichlet draws
/// (normalised Gamma draws), within 4 standard errors plus `f32` rounding.
#[test]
fn dirichlet_closed_forms_match_monte_carlo_with_four_classes() {
    let device = test_device();
    let alpha = [1.5, 2.0, 3.0, 6.0];
    let (y, n) = (2usize, 100_000);
    let (mut normals, mut uniform) = (HostNormals::new(3), StdRng::seed_from_u64(4));
    let a0: f64 = alpha.iter().sum();
    let ln_norm = lgamma_scalar(a0) - alpha.iter().map(|&a| lgamma_scalar(a)).sum::<f64>();
    let (mut kl, mut se, mut log) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let g: Vec<f64> = alpha
            .iter()
            .map(|&a| gamma(a, &mut normals, &mut uniform))
            .collect();
        let total: f64 = g.iter().sum();
        let pi: Vec<f64> = g.iter().map(|x| x / total).collect();
        let ln_q = ln_norm
            + alpha
                .iter()
                .zip(&pi)
                .map(|(a, p)| (a - 1.0) * p.ln())
                .sum::<f64>();
        kl.push(ln_q - lgamma_scalar(4.0));
        se.push(
            pi.iter()
                .enumerate()
                .map(|(c, p)| (if c == y { 1.0 } else { 0.0 } - p).powi(2))
                .sum(),
        );
        log.push(pi[y].ln());
    }
    let a = matrix(&alpha, 4, &device);
    let yl = labels(&[y], &device);
    for (name, got, draws) in [
        ("KL", to_vec(dirichlet::kl_to_uniform(a.clone()))[0], kl),
        (
            "E‖e − π‖²",
            to_vec(dirichlet::expected_squared_error(a.clone(), yl.clone()))[0],
            se,
        ),
        (
            "E ln π_y",
            to_vec(dirichlet::expected_log_prob(a.clone(), yl.clone()))[0],
            log,
        ),
    ] {
        let (m, s) = mean_and_se(&draws);
        assert!(
            (got - m).abs() < 4.0 * s + 1e-4 * m.abs().max(1.0),
            "{name}: {got} vs Monte Carlo {m} ± {s}"
        );
    }
}

#[test]
fn the_regulariser_ignores_the_true_class_and_predictions_are_dirichlets() {
    let device = test_device();
    let head = EvidentialConfig::sensoy().init();
    // ReLU evidence only on the true class: α̃ = (1, 1, 1), no penalty; on a wrong class, one.
    let out = Tensor::<3>::from_floats([[[5.0, -3.0, -3.0], [5.0, -3.0, -3.0]]], &device);
    let y = labels(&[0, 1], &device);
    let kl = to_vec(head.local_kl(&out, &y).expect("regularised"));
    assert!(kl[0].abs() < 1e-5, "{kl:?}");
    let expected = to_vec(dirichlet::kl_to_uniform(matrix(
        &[6.0, 1.0, 1.0],
        3,
        &device,
    )))[0];
    assert!(
        (kl[1] - expected).abs() < 1e-5 && kl[1] > 0.5,
        "{kl:?} vs {expected}"
    );
    assert!(
        EvidentialConfig::sensoy()
            .with_regulariser(DirichletRegulariser::None)
            .init()
            .local_kl(&out, &y)
            .is_none()
    );
    // Log-likelihoods of each data term, per draw and row.
    for loss in [
        EdlLoss::SquaredError,
        EdlLoss::LogMarginal,
        EdlLoss::Digamma,
    ] {
        let ll = EvidentialConfig::sensoy()
            .with_loss(loss)
            .init()
            .log_likelihood(out.clone(), y.clone());
        let v = to_vec(ll.clone());
        assert_eq!(ll.dims(), [1, 2]);
        assert!(
            v[0] > v[1],
            "{loss:?}: the true class's evidence scores higher: {v:?}"
        );
    }
    // One draw predicts the Dirichlet itself; its mean is α/α₀.
    let p = head.predict(out.clone());
    assert!(matches!(p, ClassPrediction::Dirichlet(_)));
    let mean = to_vec(p.mean());
    assert!((mean[0] - 0.75).abs() < 1e-6 && (mean[1] - 0.125).abs() < 1e-6);
    let two = Tensor::cat(vec![out.clone(), out], 0);
    assert!(matches!(head.predict(two), ClassPrediction::Samples(_)));
    // ReLU evidence: no evidence for any class (every output ≤ 0) is a uniform Dirichlet,
    // and the outputs decide the class where the first-index argmax of p̄ would say 0.
    let none = Tensor::<3>::from_floats([[[-3.0, -0.5, -2.0]], [[-1.0, 4.0, -2.0]]], &device)
        .reshape([1, 2, 3]);
    let sensoy = EvidentialConfig::sensoy().init().predict(none);
    let mean = to_vec(sensoy.mean());
    assert!(
        mean[..3].iter().all(|p| (p - 1.0 / 3.0).abs() < 1e-6),
        "{mean:?}"
    );
    assert_eq!(to_labels(sensoy.predicted_class()), vec![1, 1]);
    let first = to_labels(sensoy.mean().argmax(1).reshape([2]));
    assert_eq!(first[0], 0, "the tie the outputs break");
    // Without outputs, a Dirichlet decides by p̄ alone.
    let ClassPrediction::Dirichlet(d) = sensoy else {
        panic!("one draw predicts a Dirichlet")
    };
    let bare = ClassPrediction::Dirichlet(DirichletPrediction::new(d.alpha));
    assert_eq!(to_labels(bare.predicted_class()), first);
    // exp evidence stays finite for extreme outputs.
    let wild = Tensor::<3>::from_floats([[[1e4, -1e4, 0.0]]], &device);
    let exp = EvidentialConfig::new().with_evidence(Evidence::Exp).init();
    let y0 = labels(&[1], &device);
    let kl = to_vec(exp.local_kl(&wild, &y0).unwrap())[0];
    let ll = to_vec(exp.log_likelihood(wild, y0))[0];
    assert!(kl.is_finite() && ll.is_finite(), "KL {kl}, ll {ll}");
}

/// 64 well-separated classes (Gaussian clusters in 16 dimensions), a MAP MLP with the default
/// head (softplus evidence, `E[ln π_y]`, the regulariser annealed over 10 epochs): the fit
/// reaches full weight on the regulariser without the evidence collapsing to the uniform
/// Dirichlet.
#[test]
fn sixty_four_classes_converge_under_the_default_annealing() {
    let device = test_device().autodiff();
    let _guard = crate::testing::seeded(&device, 21);
    let (classes, d, per_class) = (64, 16, 16);
    let mut normals = HostNormals::new(5);
    let centres: Vec<f64> = (0..classes * d).map(|_| 3.0 * normals.next()).collect();
    let sample = |normals: &mut HostNormals| {
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for c in 0..classes {
            for _ in 0..per_class {
                x.extend((0..d).map(|j| centres[c * d + j] + normals.next()));
                y.push(c);
            }
        }
        (x, y)
    };
    let (x, y) = sample(&mut normals);
    let config = EvidentialConfig::new();
    let net = MlpConfig::new(d, vec![64], classes)
        .with_weights(WeightConfig::of(PosteriorConfig::point()))
        .init(config.init(), &device)
        .unwrap();
    let train = TrainConfig::new(100)
        .with_batch_size(128)
        .with_learning_rate(3e-3)
        .with_seed(21)
        .with_progress(false);
    let (net, _) = Trainer::new(train)
        .with_objective(config.objective().unwrap())
        .fit(net, (matrix(&x, d, &device), labels(&y, &device)))
        .unwrap();
    let net = net.valid();
    let (xt, yt) = sample(&mut normals);
    let pred = net
        .predict(
            matrix(&xt, d, &device.clone().inner()),
            PredictMode::Samples(1),
        )
        .unwrap();
    let ClassPrediction::Dirichlet(dir) = &pred else {
        panic!("one draw predicts a Dirichlet");
    };
    let alpha = to_vec(dir.alpha.clone());
    let mean = to_vec(pred.mean());
    let right = mean
        .chunks(classes)
        .zip(&yt)
        .filter(|(p, y)| (0..classes).max_by(|&a, &b| p[a].total_cmp(&p[b])) == Some(**y))
        .count();
    let accuracy = right as f64 / yt.len() as f64;
    let evidence = alpha.iter().sum::<f64>() / yt.len() as f64 - classes as f64;
    // Measured over training seeds 21 and 22: the default head 97 % and 100 % (evidence 41,
    // 43); Sensoy's head 15 % and 22 % (evidence 1.5, 1.7); ReLU with E[ln π_y] 59 % and 67 %;
    // softplus with the squared error 22 % and 32 %.
    assert!(accuracy > 0.85, "test accuracy {accuracy}");
    assert!(
        evidence > 10.0,
        "mean total evidence {evidence}: collapsed towards Dir(1)"
    );
}

/// BEDL-PAC end to end on three overlapping 2-D clusters: CLT moments through a mean-field MLP,
/// the evidential head with `exp` evidence, `ln E[p]` over 5 sampled outputs and the full
/// Dirichlet's KL, the thesis's PAC-Bayes objective. It learns the classes, and the bound on the
/// training rows with the reference code's tighter settings (one point's KL, `ln N / N`) is at
/// least the risk measured on fresh rows; the thesis's bound is above 0, vacuous.
#[test]
fn bedl_pac_learns_and_its_bound_holds_on_fresh_rows() {
    use crate::likelihood::LogitRule;
    use crate::nets::MomentConfig;
    use crate::objective::{PacBayesConfig, PacComplexity};
    use crate::recipes::moment_weights;
    let device = test_device().autodiff();
    let _guard = crate::testing::seeded(&device, 31);
    let centres = [(-2.0, 0.0), (2.0, 0.0), (0.0, 2.5)];
    let mut normals = HostNormals::new(8);
    let mut sample = |n: usize| {
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for i in 0..n {
            let c = i % 3;
            x.push(centres[c].0 + 1.2 * normals.next());
            x.push(centres[c].1 + 1.2 * normals.next());
            y.push(c);
        }
        (x, y)
    };
    let ((x, y), (xt, yt)) = (sample(600), sample(600));
    let head = EvidentialConfig::new()
        .with_evidence(Evidence::Exp)
        .with_loss(EdlLoss::LogMarginal)
        .with_regulariser(DirichletRegulariser::Full);
    let moments = MomentConfig::clt().with_train_logits(LogitRule::SampledMarginal { samples: 5 });
    let net = MlpConfig::new(2, vec![32], 3)
        .with_weights(moment_weights(100.0))
        .init(head.init(), &device)
        .unwrap()
        .with_moments(moments)
        .unwrap();
    // Trained on the thesis's objective; bounded with the reference code's tighter settings.
    let pac = PacBayesConfig::new().init().unwrap();
    let tight = PacBayesConfig::new()
        .with_complexity(PacComplexity::LogN)
        .with_kl(crate::objective::PacKl::Mean)
        .init()
        .unwrap();
    let train = TrainConfig::new(40)
        .with_inference(crate::step::Inference::Moments)
        .with_batch_size(50)
        .with_learning_rate(1e-2)
        .with_seed(31)
        .with_progress(false);
    let (net, _) = Trainer::new(train)
        .with_objective(pac)
        .fit(net, (matrix(&x, 2, &device), labels(&y, &device)))
        .unwrap();
    let net = net.valid();
    let plain = device.clone().inner();
    let (xt_t, yt_t) = (matrix(&xt, 2, &plain), labels(&yt, &plain));
    let on_train = net
        .pac_bound(
            matrix(&x, 2, &plain),
            labels(&y, &plain),
            &tight,
            crate::step::Inference::Moments,
            100,
        )
        .unwrap();
    let on_test = net
        .pac_bound(
            xt_t.clone(),
            yt_t,
            &tight,
            crate::step::Inference::Moments,
            100,
        )
        .unwrap();
    let pred = net.predict(xt_t, PredictMode::Moments).unwrap();
    let mean = to_vec(pred.mean());
    let right = mean
        .chunks(3)
        .zip(&yt)
        .filter(|(p, y)| (0..3).max_by(|&a, &b| p[a].total_cmp(&p[b])) == Some(**y))
        .count();
    let accuracy = right as f64 / yt.len() as f64;
    // The clusters overlap: the Bayes classifier gets about 90 % right.
    assert!(accuracy > 0.8, "test accuracy {accuracy}");
    assert!(
        on_train.bound >= on_test.empirical_risk,
        "bound {on_train:?} below the fresh rows' risk {}",
        on_test.empirical_risk
    );
    assert!(on_train.kl.is_finite() && on_train.kl > 0.0, "{on_train:?}");
    let vacuous = pac.risk_bound(on_train.empirical_risk, on_train.kl, x.len() / 2);
    assert!(vacuous > 0.0, "{vacuous}");
    println!(
        "train {on_train:?}, test risk {}, accuracy {accuracy}",
        on_test.empirical_risk
    );
}

/// `(−ln p_y, KL(Dir(α) ‖ Dir(1)))` of one row whose true class has logit `u` and whose other
/// `c − 1` classes have `v`, under `exp` evidence (`α = e^f`, `p_y = softmax(f)_y`).
fn symmetric_row(u: f64, v: f64, c: usize) -> (f64, f64) {
    use crate::special::digamma_scalar as psi;
    let (a, b, k) = (u.exp(), v.exp(), (c - 1) as f64);
    let a0 = a + k * b;
    let kl = lgamma_scalar(a0) - lgamma_scalar(a) - k * lgamma_scalar(b) - lgamma_scalar(c as f64)
        + (a - 1.0) * (psi(a) - psi(a0))
        + k * (b - 1.0) * (psi(b) - psi(a0));
    ((a0 / a).ln(), kl)
}

/// The fixed point of eq. 5.10 (the training set's KL, `(ln max B)/N = 1`) when every row is
/// free: each row minimises `−ln p_y + w·KL` with the weight `w = 1/(2√(KL + c))` that the
/// square root gives it, `c = (−ln δ)/N + 1`. Solved on the host: `(p_y, KL)`.
fn pac_fixed_point(c: usize, n: usize, delta: f64) -> (f64, f64) {
    let offset = -delta.ln() / n as f64 + 1.0;
    let mut w = 0.3;
    let (mut p, mut kl) = (0.0, 0.0);
    for _ in 0..60 {
        let row = |u: f64, v: f64| {
            let (nlp, kl) = symmetric_row(u, v, c);
            nlp + w * kl
        };
        let best_v = |u: f64| golden_section(|v| row(u, v), -6.0, 6.0);
        let u = golden_section(|u| row(u, best_v(u)), -6.0, 10.0);
        let (nlp, k) = symmetric_row(u, best_v(u), c);
        (p, kl) = ((-nlp).exp(), k);
        w = 1.0 / (2.0 * (kl + offset).sqrt());
    }
    (p, kl)
}

/// BEDL-PAC's objective (eq. 5.10, the thesis's constants) on free logits, one per row and
/// class, with no network in between: at its minimum every row sits at the per-row optimum of
/// `−ln p_y + w·KL(Dir(e^f) ‖ Dir(1))`, `w = 1/(2√(mean KL − ln δ/N + 1))`, solved on the host.
/// The loss's value is checked by hand in `objective::pac_bayes`; this checks its gradient
/// through the evidential head (the square root's weight on each row's KL, the Dirichlet KL
/// through lgamma and digamma). With ten classes the optimum holds every training point at
/// `p_y ≈ 0.28`: BEDL-PAC fits near-uniform Dirichlets by design (MNIST, N = 60 000: the
/// same solution gives p_y = 0.281, KL = 1.279; the bench's BEDL-PAC MNIST records have a
/// mean p_y of 0.277 to 0.282 and a mean KL of 1.249 to 1.300 on their training images).
#[test]
fn bedl_pac_holds_every_free_row_at_the_objectives_fixed_point() {
    use crate::objective::{Objective, PacBayesConfig, StepContext, StepTerms};
    let device = test_device().autodiff();
    let (c, n) = (10, 20);
    let head = EvidentialConfig::new()
        .with_evidence(Evidence::Exp)
        .with_loss(EdlLoss::LogMarginal)
        .with_regulariser(DirichletRegulariser::Full)
        .init();
    let pac = PacBayesConfig::new().init().unwrap();
    let y: Vec<usize> = (0..n).map(|i| i % c).collect();
    let y = labels(&y, &device);
    // Rows start apart (a fixed spread of logits), so they reach the optimum from different sides.
    let start: Vec<f32> = (0..n * c)
        .map(|i| ((i * 7919) % 23) as f32 / 11.0 - 1.0)
        .collect();
    let mut f = Tensor::<1>::from_floats(start.as_slice(), &device)
        .reshape([1, n, c])
        .require_grad();
    let context = StepContext::new(0, n, n);
    let objective = |f: Tensor<3>| {
        let terms = StepTerms {
            log_likelihood: head.log_likelihood(f.clone(), y.clone()),
            kl: crate::objective::KlTerm::new(Tensor::zeros([1], &device)),
            local_kl: head.local_kl(&f, &y),
            log_ratio: None,
            local_log_ratio: None,
        };
        pac.loss(terms, &context).unwrap()
    };
    // Gradient descent (it settles within 40 steps here); each row's gradient carries the
    // loss's 1/N, so the step is N.
    for _ in 0..80 {
        let grads = objective(f.clone()).loss.backward();
        let g = f.grad(&grads).expect("the logits have a gradient");
        f = Tensor::from_inner(f.inner() - g * n as f64).require_grad();
    }
    let (p, kl) = pac_fixed_point(c, n, 0.1);
    let fitted = f.inner();
    let prob = to_vec(head.log_likelihood(fitted.clone(), y.clone().inner()).exp());
    let row_kl = to_vec(head.local_kl(&fitted, &y.inner()).unwrap());
    for (i, (q, k)) in prob.iter().zip(&row_kl).enumerate() {
        assert!(
            (q - p).abs() < 2e-5 && (k - kl).abs() < 2e-4,
            "row {i}: p_y {q}, KL {k}; the fixed point: p_y {p}, KL {kl}"
        );
    }
    // Ten classes: the optimum is a near-uniform Dirichlet, at N = 20 as on MNIST's 60 000
    // images (an independent solution of the same equations gave 0.2809 and 1.2792 there).
    assert!(p > 0.2 && p < 0.4, "{p}");
    let (p, kl) = pac_fixed_point(c, 60_000, 0.1);
    assert!(
        (p - 0.2809).abs() < 1e-4 && (kl - 1.2792).abs() < 1e-4,
        "MNIST: p_y {p}, KL {kl}"
    );
}

/// BEDL-PAC's objective does not use the weights' KL, so the training loop asks the step not to
/// compute it (`StepRequest::weight_kl`): the step then reports a KL of 0, and the same data
/// terms and PAC loss as when it computes it, on the moment path (BEDL-PAC) and on the
/// sampling path (a mean-field net with the same head). The ELBO still asks for it.
#[test]
fn a_step_without_the_weight_kl_reports_zero_and_changes_nothing_else() {
    use crate::fused::Kernels;
    use crate::nets::MomentConfig;
    use crate::objective::{
        ElboConfig, Objective, PacBayesConfig, StepContext, StepRequest, StepTerms,
    };
    use crate::recipes::moment_weights;
    use crate::train::{Minibatch, Model};
    let device = test_device().autodiff();
    let pac = PacBayesConfig::new().init().unwrap();
    assert!(!pac.needs_weight_kl());
    assert!(ElboConfig::new().init().unwrap().needs_weight_kl());
    let head = || {
        EvidentialConfig::new()
            .with_evidence(Evidence::Exp)
            .with_loss(EdlLoss::LogMarginal)
            .with_regulariser(DirichletRegulariser::Full)
            .init()
    };
    let moments = MomentConfig::clt().with_train_logits(LogitRule::SampledMarginal { samples: 5 });
    let (moment_net, sampled_net) = {
        let _guard = crate::testing::seeded(&device, 5);
        let moment_net = MlpConfig::new(3, vec![16], 4)
            .with_weights(moment_weights(100.0))
            .init(head(), &device)
            .unwrap()
            .with_moments(moments)
            .unwrap();
        let sampled_net = MlpConfig::new(3, vec![16], 4)
            .with_weights(WeightConfig::of(PosteriorConfig::mean_field()))
            .init(head(), &device)
            .unwrap();
        (moment_net, sampled_net)
    };
    let batch = || Minibatch {
        input: matrix(
            &[0.3, -1.2, 0.8, 1.5, 0.1, -0.4, -0.7, 0.9, 2.0],
            3,
            &device,
        ),
        target: labels(&[0, 3, 1], &device),
        rows: labels(&[0, 1, 2], &device),
        n_train: 60,
    };
    let context = StepContext::new(0, 60, 3);
    // One step, same seed, with and without the weight KL: its KL, data terms and PAC loss.
    let run = |step: &dyn Fn(StepRequest) -> StepTerms, weight_kl: bool, kernels: Kernels| {
        let _guard = crate::testing::seeded(&device, 9);
        let terms = step(StepRequest {
            weight_kl,
            kernels,
            ..StepRequest::new(2)
        });
        let mut values = to_vec(terms.log_likelihood.clone());
        values.extend(to_vec(terms.local_kl.clone().expect("the head's local KL")));
        values.push(to_vec(pac.loss(terms.clone(), &context).unwrap().loss)[0]);
        (to_vec(terms.kl.value())[0], values)
    };
    let moment_step = |r: StepRequest| {
        let r = StepRequest {
            inference: crate::step::Inference::Moments,
            ..r
        };
        moment_net.step(batch(), r).unwrap()
    };
    let sampled_step = |r: StepRequest| sampled_net.step(batch(), r).unwrap();
    let steps: [(&str, &dyn Fn(StepRequest) -> StepTerms); 2] =
        [("moments", &moment_step), ("sampling", &sampled_step)];
    for kernels in [Kernels::Reference, Kernels::Fused] {
        for (name, step) in steps {
            let (kl_on, on) = run(step, true, kernels);
            let (kl_off, off) = run(step, false, kernels);
            assert!(
                kl_on > 0.0,
                "{name}, {kernels:?}: the collected KL is {kl_on}"
            );
            assert_eq!(
                kl_off, 0.0,
                "{name}, {kernels:?}: a KL was reported without being asked for"
            );
            // The data terms (log-likelihoods, local KLs) and the PAC loss. Every pair of runs
            // is the same ops but one: on the fused kernels the moment net's layers go back to
            // the composition of burn ops when they collect their KL (its clamp of ln σ² has
            // no fused form), where σ² = e^ρ against the kernel's (e^{ρ/2})². The two may
            // differ in the last bit, which the head's lgamma and digamma carry on: those
            // values agree to 10⁻⁶ relative (over seed offsets 1–60 they differed in 3 of 420
            // values, by at most 1.4·10⁻⁷; at offset 202 the exact comparison failed).
            if name == "moments" && kernels == Kernels::Fused {
                for (a, b) in on.iter().zip(&off) {
                    let gap = (a - b).abs() / a.abs().max(1.0);
                    assert!(gap < 1e-6, "{name}, {kernels:?}: {on:?} against {off:?}");
                }
            } else {
                assert_eq!(on, off, "{name}, {kernels:?}: data terms and PAC loss");
            }
        }
    }
}
