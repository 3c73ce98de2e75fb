use super::*;
use crate::layers::{Pass, WeightConfig};
use crate::likelihood::{GaussianLikelihoodConfig, NoiseFit};
use crate::linalg::dense;
use crate::nets::{ConvNetConfig, MlpConfig, Regressor};
use crate::posterior::{AnyPosterior, PointPosterior, PosteriorConfig};
use crate::predict::{ClassPrediction, GaussianPrediction, Predict, PredictMode};
use crate::testing::{host_normals, seeded, to_vec};
use crate::train::{Callback, EpochStats, Flow, OptimizerConfig, TrainConfig, TrainError, Trainer};
use crate::{device, training_device};
use burn::module::{Module, Param};
use burn::tensor::{Distribution, Int, TensorData};
use std::sync::{Arc, Mutex};

fn point() -> WeightConfig {
    WeightConfig::of(PosteriorConfig::point())
}

fn regressor(d: usize, hidden: Vec<usize>, noise: f64, dev: &burn::tensor::Device) -> Regressor {
    let likelihood = GaussianLikelihoodConfig::new()
        .with_noise_std(noise)
        .with_fit(NoiseFit::Fixed)
        .init(dev)
        .unwrap();
    MlpConfig::new(d, hidden, 1)
        .with_weights(point())
        .init(likelihood, dev)
        .unwrap()
}

/// A mean-field regressor with one hidden layer.
fn mean_field_regressor(d: usize, hidden: usize, dev: &burn::tensor::Device) -> Regressor {
    MlpConfig::new(d, vec![hidden], 1)
        .with_weights(WeightConfig::of(PosteriorConfig::mean_field()))
        .init_regressor(dev)
        .unwrap()
}

fn matrix(values: &[f64], rows: usize, cols: usize, dev: &burn::tensor::Device) -> Tensor<2> {
    let data: Vec<f32> = values.iter().map(|&v| v as f32).collect();
    Tensor::from_data(TensorData::new(data, [rows, cols]), dev)
}

/// `S` stacked joint draws run in one pass give what each draw gives alone.
#[test]
fn stacked_network_draws_match_one_draw_at_a_time() {
    let dev = device();
    let _guard = seeded(&dev, 3);
    let mlp = MlpConfig::new(3, vec![5, 4], 2)
        .with_weights(WeightConfig::of(PosteriorConfig::mean_field()))
        .init_regressor(&dev)
        .unwrap();
    let conv = ConvNetConfig::lenet5([1, 28, 28], 10)
        .init(crate::likelihood::Categorical, &dev)
        .unwrap();
    let singles: Vec<Vec<LayerDraw>> = (0..3).map(|_| mlp.draw_layers()).collect();
    let x = Tensor::<2>::random([4, 3], Distribution::Normal(0.0, 1.0), &dev);
    check_stacked(&singles, |d| mlp.forward_draws(x.clone(), d));
    let singles: Vec<Vec<LayerDraw>> = (0..2).map(|_| conv.draw_layers()).collect();
    let x = Tensor::<4>::random([2, 1, 28, 28], Distribution::Normal(0.0, 1.0), &dev);
    check_stacked(&singles, |d| conv.forward_draws(x.clone(), d));
}

fn check_stacked(singles: &[Vec<LayerDraw>], forward: impl Fn(&[LayerDraw]) -> Tensor<3>) {
    let layers = singles[0].len();
    let stacked: Vec<LayerDraw> = (0..layers)
        .map(|l| LayerDraw {
            weight: Tensor::cat(singles.iter().map(|d| d[l].weight.clone()).collect(), 0),
            bias: singles[0][l].bias.as_ref().map(|_| {
                Tensor::cat(
                    singles.iter().map(|d| d[l].bias.clone().unwrap()).collect(),
                    0,
                )
            }),
        })
        .collect();
    let together = to_vec(forward(&stacked));
    let apart: Vec<f64> = singles.iter().flat_map(|d| to_vec(forward(d))).collect();
    assert_eq!(together.len(), apart.len());
    for (a, b) in together.iter().zip(&apart) {
        assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
    }
}

impl<B: Body, L: crate::likelihood::Likelihood> Bnn<B, L> {
    /// One draw of every layer, for these tests.
    fn draw_layers(&self) -> Vec<LayerDraw> {
        let mut draws = self.body.draw();
        draws.push(self.head.params.draws(1));
        draws
    }
}

/// The layer visitor sees every layer in forward order with its kind and ids; the mapper
/// rebuilds them (here: the posterior as the prior, as `with_posterior_as_prior` does).
#[test]
fn the_layer_visitor_walks_every_layer_in_forward_order() {
    let dev = device();
    let _guard = seeded(&dev, 4);
    let net = ConvNetConfig::lenet5([1, 28, 28], 10)
        .with_weights(WeightConfig::of(PosteriorConfig::mean_field()))
        .init(crate::likelihood::Categorical, &dev)
        .unwrap();
    struct Seen(Vec<(usize, bool, usize, usize)>);
    impl crate::layers::LayerVisitor for Seen {
        fn visit<const DW: usize>(
            &mut self,
            layer: crate::layers::LayerInfo,
            params: &crate::layers::AnyLayerParams<DW>,
        ) {
            let conv = matches!(layer.kind, crate::layers::LayerKind::Conv2d(_));
            let ids = params.ids();
            self.0
                .push((layer.index, conv, ids.weight.len(), ids.bias.len()));
        }
    }
    let mut seen = Seen(Vec::new());
    net.visit_layers(&mut seen);
    // Two convolutions, the dense layer and the head; mean-field: μ and ρ per tensor.
    assert_eq!(
        seen.0,
        vec![
            (0, true, 2, 2),
            (1, true, 2, 2),
            (2, false, 2, 2),
            (3, false, 2, 2)
        ]
    );
    assert_eq!(net.layer_count(), 4);
    // KL to its own posterior: 0 up to the f32 sums over 431k weights.
    let before = to_vec(crate::posterior::KlDivergence::kl(&net))[0];
    let mapped = net.with_posterior_as_prior().unwrap();
    let kl = to_vec(crate::posterior::KlDivergence::kl(&mapped))[0];
    assert!(
        kl.abs() < 1e-5 * before,
        "KL to its own posterior: {kl} (to N(0, 1): {before})"
    );
}

/// An ensemble's prediction is the equal-weight mixture: its epistemic variance is the
/// variance between members' means, its aleatoric part their mean noise variance, by draws
/// and by moments alike.
#[test]
fn an_ensembles_decomposition_is_the_variance_between_its_members() {
    let dev = device();
    let _guard = seeded(&dev, 5);
    let noise = [0.5, 1.0, 2.0];
    let members: Vec<Regressor> = noise
        .iter()
        .map(|&s| regressor(2, vec![8], s, &dev))
        .collect();
    let x = Tensor::<2>::random([6, 2], Distribution::Normal(0.0, 1.0), &dev);
    let means: Vec<Vec<f64>> = members
        .iter()
        .map(|m| {
            to_vec(
                m.predict(x.clone(), PredictMode::Samples(1))
                    .unwrap()
                    .mean(),
            )
        })
        .collect();
    let ensemble = Ensemble::new(members.clone()).unwrap();
    for mode in [PredictMode::Samples(5), PredictMode::Moments] {
        let p = ensemble.predict(x.clone(), mode).unwrap();
        if mode == PredictMode::Samples(5) {
            assert!(matches!(&p, GaussianPrediction::Samples(s) if s.mean.dims()[0] == 3));
        }
        let (mean, epi, ale) = (
            to_vec(p.mean()),
            to_vec(p.epistemic_variance()),
            to_vec(p.aleatoric_variance()),
        );
        for b in 0..6 {
            let mu: Vec<f64> = means.iter().map(|m| m[b]).collect();
            let avg = mu.iter().sum::<f64>() / 3.0;
            let var = mu.iter().map(|v| (v - avg).powi(2)).sum::<f64>() / 3.0;
            let noise_var = noise.iter().map(|s| s * s).sum::<f64>() / 3.0;
            assert!((mean[b] - avg).abs() < 1e-5, "{mode:?}");
            assert!(
                (epi[b] - var).abs() < 1e-4 * (1.0 + var),
                "{mode:?}: {} vs {var}",
                epi[b]
            );
            assert!((ale[b] - noise_var).abs() < 1e-4, "{mode:?}");
        }
    }
    // Members of different kinds give different draw counts: refused, not silently weighted.
    let sampled = mean_field_regressor(2, 8, &dev);
    let mixed = Ensemble::new(vec![members[0].clone(), sampled]).unwrap();
    let err = mixed.predict(x, PredictMode::Samples(4)).unwrap_err();
    assert!(
        err.to_string().contains("different numbers of draws"),
        "{err}"
    );
    assert!(Ensemble::<Regressor>::new(Vec::new()).is_err());
}

/// Members trained in parallel threads are the members trained in turn, in order.
#[test]
fn parallel_members_are_the_sequential_members() {
    let dev = device();
    let _guard = seeded(&dev, 6);
    let build = |m: usize| -> Result<Vec<f64>, ()> { Ok(vec![m as f64; 3]) };
    let seq = Ensemble::train(5, build).unwrap();
    let par = Ensemble::train_parallel(5, 2, build).unwrap();
    assert_eq!(seq.members(), par.members());
    let err = Ensemble::train_parallel(4, 3, |m| if m == 2 { Err("bad") } else { Ok(m) });
    assert_eq!(err.unwrap_err(), (2, "bad"));
}

/// Linear-Gaussian data: `y = X̃ w + ε` with the features `X̃ = [x, 1]`.
struct LinearGaussian {
    x: Vec<f64>,
    y: Vec<f64>,
    n: usize,
    d: usize,
    noise: f64,
}

impl LinearGaussian {
    fn new(n: usize, d: usize, noise: f64, seed: u64) -> Self {
        let x = host_normals(n * d, seed);
        let e = host_normals(n, seed + 1);
        let w: Vec<f64> = (0..d).map(|j| 0.8 - 0.5 * j as f64).collect();
        let y = (0..n)
            .map(|i| dense::dot(&x[i * d..(i + 1) * d], &w) + 0.3 + noise * e[i])
            .collect();
        Self { x, y, n, d, noise }
    }

    fn features(&self) -> Vec<f64> {
        let p = self.d + 1;
        let mut f = vec![1.0; self.n * p];
        for i in 0..self.n {
            f[i * p..i * p + self.d].copy_from_slice(&self.x[i * self.d..(i + 1) * self.d]);
        }
        f
    }

    /// The exact posterior precision `X̃ᵀX̃/σ² + λI` and mean.
    fn posterior(&self, lambda: f64) -> (Vec<f64>, Vec<f64>) {
        let p = self.d + 1;
        let f = self.features();
        let s2 = self.noise * self.noise;
        let mut a = vec![0.0; p * p];
        let mut rhs = vec![0.0; p];
        for i in 0..self.n {
            let row = &f[i * p..(i + 1) * p];
            for r in 0..p {
                rhs[r] += row[r] * self.y[i] / s2;
                for c in 0..p {
                    a[r * p + c] += row[r] * row[c] / s2;
                }
            }
        }
        for r in 0..p {
            a[r * p + r] += lambda;
        }
        let mut l = a.clone();
        dense::cholesky(&mut l, p).unwrap();
        let cov = dense::inverse_from_cholesky(&l, p);
        let mean = (0..p)
            .map(|r| dense::dot(&cov[r * p..(r + 1) * p], &rhs))
            .collect();
        (a, mean)
    }

    /// `ln N(y; 0, σ²I + X̃X̃ᵀ/λ)`.
    fn log_evidence(&self, lambda: f64) -> f64 {
        let (n, p) = (self.n, self.d + 1);
        let f = self.features();
        let mut k = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                k[i * n + j] = dense::dot(&f[i * p..(i + 1) * p], &f[j * p..(j + 1) * p]) / lambda;
            }
            k[i * n + i] += self.noise * self.noise;
        }
        let mut l = k.clone();
        dense::cholesky(&mut l, n).unwrap();
        let inv = dense::inverse_from_cholesky(&l, n);
        let quad: f64 = (0..n)
            .map(|i| self.y[i] * dense::dot(&inv[i * n..(i + 1) * n], &self.y))
            .sum();
        -0.5 * quad
            - 0.5 * dense::cholesky_log_det(&l, n)
            - 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln()
    }

    fn tensors(&self, dev: &burn::tensor::Device) -> (Tensor<2>, Tensor<2>) {
        (
            matrix(&self.x, self.n, self.d, dev),
            matrix(&self.y, self.n, 1, dev),
        )
    }

    /// A regressor without hidden layers whose head is `w`.
    fn net_at(&self, w: &[f64], dev: &burn::tensor::Device) -> Regressor {
        let mut net = regressor(self.d, vec![], self.noise, dev);
        let weight = matrix(&w[..self.d], self.d, 1, dev);
        let bias = Tensor::<1>::from_data(TensorData::new(vec![w[self.d] as f32], [1]), dev);
        net.head.params.weight = AnyPosterior::Point(PointPosterior {
            weight: Param::from_tensor(weight),
        });
        net.head.params.bias = Some(AnyPosterior::Point(PointPosterior {
            weight: Param::from_tensor(bias),
        }));
        net
    }
}

/// On a linear-Gaussian model last-layer Laplace is exact: its covariance is the posterior's,
/// its log marginal likelihood the evidence, and its linearised predictive the Gaussian
/// process with kernel `x̃ᵀx̃'/λ`.
#[test]
fn last_layer_laplace_is_exact_on_a_linear_gaussian_model() {
    let dev = device();
    let _guard = seeded(&dev, 7);
    let data = LinearGaussian::new(40, 2, 0.4, 70);
    let lambda = 2.0;
    let (precision, mean) = data.posterior(lambda);
    let net = data.net_at(&mean, &dev);
    let (x, y) = data.tensors(&dev);
    let config = LaplaceConfig::new()
        .with_prior_precision(PriorPrecision::Fixed { value: lambda })
        .with_batch_size(16);
    let laplace = LastLayerLaplace::fit(net, x, y, &config).unwrap();
    let p = data.d + 1;
    let mut l = precision.clone();
    dense::cholesky(&mut l, p).unwrap();
    let exact_cov = dense::inverse_from_cholesky(&l, p);
    let cov = to_vec(laplace.covariance());
    for (a, b) in cov.iter().zip(&exact_cov) {
        assert!((a - b).abs() < 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
    }
    let evidence = data.log_evidence(lambda);
    let got = laplace.log_marginal_likelihood();
    assert!(
        (got - evidence).abs() < 1e-3 * evidence.abs(),
        "{got} vs {evidence}"
    );
    // The GLM predictive at new inputs: k(x*, x*) − k*ᵀ (K + σ²I)⁻¹ k*.
    let test = LinearGaussian::new(5, 2, 0.4, 90);
    let (xt, _) = test.tensors(&dev);
    let m = laplace.linearised(xt.clone()).unwrap();
    let var = to_vec(m.var);
    let (ft, f) = (test.features(), data.features());
    let n = data.n;
    let mut kk = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            kk[i * n + j] = dense::dot(&f[i * p..(i + 1) * p], &f[j * p..(j + 1) * p]) / lambda;
        }
        kk[i * n + i] += data.noise * data.noise;
    }
    dense::cholesky(&mut kk, n).unwrap();
    let kinv = dense::inverse_from_cholesky(&kk, n);
    for t in 0..5 {
        let xs = &ft[t * p..(t + 1) * p];
        let ks: Vec<f64> = (0..n)
            .map(|i| dense::dot(xs, &f[i * p..(i + 1) * p]) / lambda)
            .collect();
        let quad: f64 = (0..n)
            .map(|i| ks[i] * dense::dot(&kinv[i * n..(i + 1) * n], &ks))
            .sum();
        let gp = dense::dot(xs, xs) / lambda - quad;
        assert!((var[t] - gp).abs() < 1e-3 * gp, "{} vs {gp}", var[t]);
    }
    // Moments mode is that predictive; its epistemic part is the GLM variance.
    let pred = laplace.predict(xt, PredictMode::Moments).unwrap();
    let epi = to_vec(pred.epistemic_variance());
    assert!(epi.iter().zip(&var).all(|(a, b)| (a - b).abs() < 1e-6));
}

/// The marginal-likelihood `λ` is the maximiser of the reported log marginal likelihood, and
/// Monte Carlo head draws have the posterior's covariance.
#[test]
fn laplace_prior_precision_and_draws() {
    let dev = device();
    let _guard = seeded(&dev, 8);
    let data = LinearGaussian::new(60, 2, 0.5, 80);
    let (_, mean) = data.posterior(1.0);
    let net = data.net_at(&mean, &dev);
    let (x, y) = data.tensors(&dev);
    let fit = |prior| {
        let config = LaplaceConfig::new().with_prior_precision(prior);
        LastLayerLaplace::fit(net.clone(), x.clone(), y.clone(), &config).unwrap()
    };
    let best = fit(PriorPrecision::MarginalLikelihood);
    let lambda = best.prior_precision();
    assert!(lambda > 1e-6 && lambda < 1e6, "{lambda}");
    for factor in [0.8, 1.25] {
        let other = fit(PriorPrecision::Fixed {
            value: lambda * factor,
        });
        assert!(other.log_marginal_likelihood() < best.log_marginal_likelihood());
    }
    // Draws of the head: the sample covariance within 5 standard errors of Σ.
    let n = 20_000;
    let draws = best.joint_draws(n);
    let head = draws.last().unwrap();
    let theta = Tensor::cat(vec![head.weight.clone(), head.bias.clone().unwrap()], 1);
    let p = 3;
    let values = to_vec(theta);
    let cov = to_vec(best.covariance());
    let avg = check_covariance(&values, n, p, |i, j| cov[i * p + j]);
    for i in 0..p {
        assert!((avg[i] - mean[i]).abs() < 5.0 * (cov[i * p + i] / n as f64).sqrt());
    }
}

/// For a softmax head the curvature is the exact GGN `Σ_n x̃x̃ᵀ ⊗ (diag p − p pᵀ)`.
#[test]
fn laplace_curvature_of_a_softmax_head_is_the_exact_ggn() {
    let dev = device();
    let _guard = seeded(&dev, 9);
    let (n, d, k) = (5, 2, 3);
    let net = MlpConfig::new(d, vec![], k)
        .with_weights(point())
        .init_classifier(&dev)
        .unwrap();
    let xs = host_normals(n * d, 91);
    let labels: Vec<i64> = (0..n as i64).map(|i| i % k as i64).collect();
    let x = matrix(&xs, n, d, &dev);
    let y = Tensor::<1, Int>::from_data(TensorData::new(labels, [n]), &dev);
    let logits = to_vec(net.forward(x.clone(), &mut Pass::predict(1)));
    let lambda = 1.0;
    let config = LaplaceConfig::new().with_prior_precision(PriorPrecision::Fixed { value: lambda });
    let laplace = LastLayerLaplace::fit(net, x, y, &config).unwrap();
    let p = (d + 1) * k;
    let mut h = vec![0.0; p * p];
    for i in 0..n {
        let f = &logits[i * k..(i + 1) * k];
        let z: f64 = f.iter().map(|v| v.exp()).sum();
        let pr: Vec<f64> = f.iter().map(|v| v.exp() / z).collect();
        let mut phi = xs[i * d..(i + 1) * d].to_vec();
        phi.push(1.0);
        for (f1, a1) in phi.iter().enumerate() {
            for (f2, a2) in phi.iter().enumerate() {
                for k1 in 0..k {
                    for k2 in 0..k {
                        let lam = if k1 == k2 { pr[k1] } else { 0.0 } - pr[k1] * pr[k2];
                        h[(f1 * k + k1) * p + f2 * k + k2] += a1 * a2 * lam;
                    }
                }
            }
        }
    }
    let mut l = to_vec(laplace.covariance());
    dense::cholesky(&mut l, p).unwrap();
    let precision = dense::inverse_from_cholesky(&l, p);
    for i in 0..p {
        for j in 0..p {
            let want = h[i * p + j] + if i == j { lambda } else { 0.0 };
            let got = precision[i * p + j];
            assert!(
                (got - want).abs() < 1e-3 * (1.0 + want.abs()),
                "{i},{j}: {got} vs {want}"
            );
        }
    }
}

/// Laplace refuses what it cannot fit, naming it.
#[test]
fn laplace_refuses_stochastic_networks_and_bad_settings() {
    let dev = device();
    let _guard = seeded(&dev, 10);
    let data = LinearGaussian::new(10, 2, 0.5, 5);
    let (x, y) = data.tensors(&dev);
    let sampled = mean_field_regressor(2, 4, &dev);
    let err = LastLayerLaplace::fit(sampled, x.clone(), y.clone(), &LaplaceConfig::new());
    assert!(err.unwrap_err().to_string().contains("point network"));
    let net = regressor(2, vec![4], 0.5, &dev);
    let bad = LaplaceConfig::new().with_prior_precision(PriorPrecision::Fixed { value: -1.0 });
    let err = LastLayerLaplace::fit(net.clone(), x.clone(), y.clone(), &bad).unwrap_err();
    assert!(err.to_string().contains("prior_precision"), "{err}");
    let wide = Tensor::<2>::zeros([10, 3], &dev);
    let err = LastLayerLaplace::fit(net, wide, y, &LaplaceConfig::new()).unwrap_err();
    assert!(matches!(err, LaplaceError::Mismatch(_)), "{err}");
}

/// Per-layer prior precisions maximise the KFAC evidence over a larger set than one shared `λ`,
/// so the evidence is at least the shared one's; on a net of one layer they are the shared `λ`.
#[test]
fn per_layer_prior_precisions_raise_the_evidence() {
    let dev = device();
    let _guard = seeded(&dev, 15);
    let n = 40;
    let xs = Tensor::<2>::random([n, 2], Distribution::Normal(0.0, 1.0), &dev);
    let labels = Tensor::<1, Int>::from_data(
        TensorData::new((0..n as i64).map(|i| i % 3).collect::<Vec<_>>(), [n]),
        &dev,
    );
    let net = |hidden: Vec<usize>| {
        MlpConfig::new(2, hidden, 3)
            .with_weights(point())
            .init_classifier(&dev)
            .unwrap()
    };
    let fit = |net: &crate::nets::Classifier, prior| {
        let config = NetworkLaplaceConfig::new().with_prior_precision(prior);
        NetworkLaplace::fit(net.clone(), xs.clone(), labels.clone(), &config).unwrap()
    };
    let two = net(vec![8]);
    let shared = fit(&two, PriorPrecision::MarginalLikelihood);
    let per = fit(&two, PriorPrecision::MarginalLikelihoodPerLayer);
    let (a, b) = (
        shared.log_marginal_likelihood(),
        per.log_marginal_likelihood(),
    );
    assert!(b >= a - 1e-9 * a.abs(), "per layer {b} < shared {a}");
    let lambdas = per.prior_precisions();
    assert_eq!(lambdas.len(), 2);
    assert!(lambdas.iter().all(|l| l.is_finite() && *l > 0.0));
    assert!((lambdas[0] / lambdas[1] - 1.0).abs() > 1e-3, "{lambdas:?}");
    assert_eq!(shared.prior_precisions().len(), 2);
    assert_eq!(shared.prior_precisions()[0], shared.prior_precision());
    let one = net(vec![]);
    let one_shared = fit(&one, PriorPrecision::MarginalLikelihood);
    let one_per = fit(&one, PriorPrecision::MarginalLikelihoodPerLayer);
    assert_eq!(one_shared.prior_precision(), one_per.prior_precision());
    assert_eq!(
        one_shared.log_marginal_likelihood(),
        one_per.log_marginal_likelihood()
    );
}

/// Collinear features and a tiny noise scale: `H ≈ 10⁹` on most directions and 0 on one, which
/// f32 rounding leaves indefinite. The fit still succeeds: the covariance is finite and positive
/// semi-definite, exact where `H` is large, and no wider than the prior `1/λ` on the null one.
#[test]
fn laplace_survives_a_curvature_that_rounding_leaves_indefinite() {
    let dev = device();
    let _guard = seeded(&dev, 11);
    let (n, noise, lambda) = (2_000, 1e-6, 1.0);
    let mut data = LinearGaussian::new(n, 3, noise, 12);
    for i in 0..n {
        data.x[i * 3 + 2] = data.x[i * 3] + data.x[i * 3 + 1];
    }
    let (x, y) = data.tensors(&dev);
    let net = data.net_at(&[0.5, -0.2, 0.3, 0.1], &dev);
    let config = LaplaceConfig::new()
        .with_prior_precision(PriorPrecision::Fixed { value: lambda })
        .with_batch_size(256);
    let laplace = LastLayerLaplace::fit(net, x, y, &config).unwrap();
    let cov = to_vec(laplace.covariance());
    let p = 4;
    assert!(cov.iter().all(|v| v.is_finite()));
    let quad = |v: &[f64]| -> f64 {
        (0..p)
            .map(|i| v[i] * (0..p).map(|j| cov[i * p + j] * v[j]).sum::<f64>())
            .sum()
    };
    // The null direction of the features: at most the prior's variance, and positive.
    let s = 3f64.sqrt().recip();
    let null = quad(&[s, s, -s, 0.0]);
    assert!(null > 0.0 && null <= 1.0 / lambda + 1e-9, "{null}");
    // A well-determined direction: the bias, with variance ≈ σ²/n.
    let bias = quad(&[0.0, 0.0, 0.0, 1.0]);
    let want = noise * noise / n as f64;
    assert!((bias / want - 1.0).abs() < 0.1, "{bias} vs {want}");
    let draws = laplace.joint_draws(16);
    let head = draws.last().unwrap();
    assert!(to_vec(head.weight.clone()).iter().all(|v| v.is_finite()));
}

/// The eigen path of the posterior factor: an indefinite `H` has its negative eigenvalue
/// clipped at 0, so `Σ = V diag(1/(max(e, 0) + λ)) Vᵀ`.
#[test]
fn the_posterior_factor_clips_negative_rounding() {
    // H = Q diag(-5, 2) Qᵀ with Q a rotation by 30°.
    let (c, s) = (30f64.to_radians().cos(), 30f64.to_radians().sin());
    let h = [
        -5.0 * c * c + 2.0 * s * s,
        (-5.0 - 2.0) * c * s,
        (-5.0 - 2.0) * c * s,
        -5.0 * s * s + 2.0 * c * c,
    ];
    let lambda = 0.5;
    let (inverse, log_det) = super::laplace::posterior_factor(&h, 2, lambda, None).unwrap();
    let cov = |i: usize, j: usize| {
        (0..2)
            .map(|k| inverse[k * 2 + i] * inverse[k * 2 + j])
            .sum()
    };
    let e = [1.0 / lambda, 1.0 / (2.0 + lambda)];
    let want = [
        e[0] * c * c + e[1] * s * s,
        (e[0] - e[1]) * c * s,
        e[0] * s * s + e[1] * c * c,
    ];
    let got: [f64; 3] = [cov(0, 0), cov(0, 1), cov(1, 1)];
    for (a, b) in got.iter().zip(want) {
        assert!((a - b).abs() < 1e-12, "{got:?} vs {want:?}");
    }
    let want_log_det = lambda.ln() + (2.0 + lambda).ln();
    assert!((log_det - want_log_det).abs() < 1e-12);
}

/// Checks the sample covariance of `n` draws of `p` values against `want(i, j)` within five
/// standard errors (`σ_i σ_j √(2/n)`); returns the sample means.
fn check_covariance(
    values: &[f64],
    n: usize,
    p: usize,
    want: impl Fn(usize, usize) -> f64,
) -> Vec<f64> {
    let avg: Vec<f64> = (0..p)
        .map(|j| (0..n).map(|s| values[s * p + j]).sum::<f64>() / n as f64)
        .collect();
    for i in 0..p {
        for j in 0..p {
            let c = (0..n)
                .map(|s| (values[s * p + i] - avg[i]) * (values[s * p + j] - avg[j]))
                .sum::<f64>()
                / (n - 1) as f64;
            let se = (want(i, i) * want(j, j)).sqrt() * (2.0 / n as f64).sqrt();
            assert!(
                (c - want(i, j)).abs() < 5.0 * se + 1e-9,
                "{i},{j}: {c} vs {}",
                want(i, j)
            );
        }
    }
    avg
}

/// Records each epoch's flat weights.
struct Recorder(Arc<Mutex<Vec<Vec<f64>>>>);

impl Callback<Regressor> for Recorder {
    fn on_epoch_end(&mut self, model: &Regressor, _: &EpochStats) -> Result<Flow, TrainError> {
        let flat: Vec<f64> = model
            .mean_draw()
            .into_iter()
            .flat_map(|d| {
                let mut v = to_vec(d.weight);
                v.extend(d.bias.map(to_vec).unwrap_or_default());
                v
            })
            .collect();
        self.0.lock().unwrap().push(flat);
        Ok(Flow::Continue)
    }
}

/// SWAG's moments are the iterates' running moments and its last `K` deviations; its draws
/// have the covariance `½(Σ_diag + D̂D̂ᵀ/(K − 1))`.
#[test]
fn swag_collects_the_iterates_moments_and_samples_their_covariance() {
    let dev = training_device();
    let _guard = seeded(&dev, 11);
    let data = LinearGaussian::new(64, 2, 0.5, 110);
    let (x, y) = data.tensors(&dev);
    let net = regressor(2, vec![3], 0.5, &dev);
    let config = TrainConfig::new(8)
        .with_batch_size(8)
        .with_learning_rate(0.05)
        .with_optimizer(OptimizerConfig::Sgd {
            momentum: 0.0,
            nesterov: false,
        })
        .with_progress(false);
    let record = Arc::new(Mutex::new(Vec::new()));
    let swag_config = SwagConfig::new().with_rank(4).with_skip_epochs(1);
    let trainer = Trainer::new(config).with_callback(Recorder(record.clone()));
    let swag = Swag::fit(net, trainer, (x.clone(), y), swag_config).unwrap();
    let iterates: Vec<Vec<f64>> = record.lock().unwrap()[1..].to_vec();
    let m = swag.moments();
    assert_eq!(m.count, 7);
    let p = iterates[0].len();
    let mut running = vec![0.0; p];
    let mut deviations = Vec::new();
    for (i, it) in iterates.iter().enumerate() {
        for j in 0..p {
            running[j] = (running[j] * i as f64 + it[j]) / (i + 1) as f64;
        }
        if i > 0 {
            deviations.push((0..p).map(|j| it[j] - running[j]).collect::<Vec<f64>>());
        }
    }
    let sq: Vec<f64> = (0..p)
        .map(|j| iterates.iter().map(|it| it[j] * it[j]).sum::<f64>() / 7.0)
        .collect();
    let close = |a: &[f64], b: &[f64]| {
        a.iter()
            .zip(b)
            .all(|(u, v)| (u - v).abs() < 1e-5 * (1.0 + v.abs()))
    };
    assert!(close(&to_vec(m.mean.clone()), &running));
    assert!(close(&to_vec(m.sq_mean.clone()), &sq));
    let kept: Vec<Vec<f64>> = m.deviations.iter().map(|d| to_vec(d.clone())).collect();
    assert_eq!(kept.len(), 4);
    for (a, b) in kept.iter().zip(&deviations[deviations.len() - 4..]) {
        assert!(close(a, b));
    }
    // Sample covariance of the joint draws against ½(Σ_diag + D̂D̂ᵀ/(K − 1)).
    let n = 20_000;
    let draws = swag.joint_draws(n);
    let flat: Vec<Tensor<2>> = draws
        .into_iter()
        .flat_map(|d| std::iter::once(d.weight).chain(d.bias))
        .collect();
    let values = to_vec(Tensor::cat(flat, 1));
    let diag = to_vec(m.diagonal_variance());
    let want = |i: usize, j: usize| {
        let low: f64 = kept.iter().map(|d| d[i] * d[j]).sum::<f64>() / 3.0;
        0.5 * (if i == j { diag[i] } else { 0.0 } + low)
    };
    check_covariance(&values, n, p, want);
    // Its prediction runs through the usual types.
    let pred = swag.predict(x.valid(), PredictMode::Samples(16)).unwrap();
    assert!(
        to_vec(pred.epistemic_variance())
            .iter()
            .all(|v| v.is_finite() && *v > 0.0)
    );
}

/// SWAG refuses a network with stochastic layers, naming the fix.
#[test]
fn swag_refuses_a_stochastic_network() {
    let dev = training_device();
    let _guard = seeded(&dev, 12);
    let data = LinearGaussian::new(16, 2, 0.5, 120);
    let (x, y) = data.tensors(&dev);
    let net = mean_field_regressor(2, 3, &dev);
    let config = TrainConfig::new(2).with_progress(false);
    let err = Swag::fit(net, Trainer::new(config), (x, y), SwagConfig::new()).unwrap_err();
    assert!(err.to_string().contains("point network"), "{err}");
}

/// Mandt et al.'s SGD rate (capped where the stiffest direction would be wider than the
/// posterior) from minibatch gradients matches the one from the exact per-example gradient
/// covariance of a linear-Gaussian model.
#[test]
fn the_sgd_posterior_rate_matches_the_exact_gradient_covariance() {
    let dev = training_device();
    let _guard = seeded(&dev, 13);
    let data = LinearGaussian::new(200, 2, 0.5, 130);
    let (_, mean) = data.posterior(1e-6);
    let net = data.net_at(&mean, &dev);
    let (x, y) = data.tensors(&dev);
    let (b, p) = (10, 3);
    let got = sgd_posterior_learning_rate(&net, &x, &y, b, 400).unwrap();
    let f = data.features();
    let s2 = data.noise * data.noise;
    let grads: Vec<Vec<f64>> = (0..data.n)
        .map(|i| {
            let row = &f[i * p..(i + 1) * p];
            let r = data.y[i] - dense::dot(row, &mean);
            row.iter().map(|v| -r * v / s2).collect()
        })
        .collect();
    let avg: Vec<f64> = (0..p)
        .map(|j| grads.iter().map(|g| g[j]).sum::<f64>() / data.n as f64)
        .collect();
    let trace: f64 = grads
        .iter()
        .map(|g| {
            g.iter()
                .zip(&avg)
                .map(|(a, m)| (a - m).powi(2))
                .sum::<f64>()
        })
        .sum::<f64>()
        / (data.n - 1) as f64;
    let mut cov = vec![0.0; p * p];
    for g in &grads {
        for i in 0..p {
            for j in 0..p {
                cov[i * p + j] += (g[i] - avg[i]) * (g[j] - avg[j]) / (data.n - 1) as f64;
            }
        }
    }
    let top = *dense::symmetric_eigenvalues(cov, p).last().unwrap();
    let (bf, nf) = (b as f64, data.n as f64);
    // The net's prior is N(0, 1): p₀ = 1.
    let want = (2.0 * bf * p as f64 / (nf * trace)).min(2.0 * bf / (nf * top + 1.0));
    // 400 batches estimate tr C to about √(2/400) ≈ 7 % (more with heavy-tailed gradients).
    assert!((got / want - 1.0).abs() < 0.25, "{got} vs {want}");
    let point = mean_field_regressor(2, 3, &dev);
    assert!(sgd_posterior_learning_rate(&point, &x, &y, b, 4).is_err());
    assert!(sgd_posterior_learning_rate(&net, &x, &y, 500, 4).is_err());
}

/// Per-layer Jacobians `[K, P_l]` of one example's outputs, in each layer's matrix order
/// (`[d_in (+1), d_out]` row-major), by one backward pass per output, and the outputs.
fn exact_jacobians<B: Body>(
    net: &Bnn<B, crate::likelihood::Categorical>,
    x: B::Input,
    shapes: &[(Vec<usize>, bool)],
) -> (Vec<Vec<Vec<f64>>>, Vec<f64>) {
    let tracked = net.clone().train();
    let k = net.head.shape()[1];
    let out = to_vec(tracked.forward(x.clone(), &mut Pass::predict(1)));
    let mut per_layer: Vec<Vec<Vec<f64>>> = shapes.iter().map(|_| Vec::new()).collect();
    for j in 0..k {
        let f = tracked.forward(x.clone(), &mut Pass::predict(1));
        let grads = f.slice([0..1, 0..1, j..j + 1]).sum().backward();
        let mut flat = Vec::new();
        tracked.visit_layers(&mut super::swag::PointGradients(&grads, &mut flat));
        let flat = to_vec(Tensor::cat(flat, 0));
        let mut at = 0;
        for (l, (shape, bias)) in shapes.iter().enumerate() {
            let numel: usize = shape.iter().product();
            let w = &flat[at..at + numel];
            at += numel;
            let row = match shape.len() {
                2 => {
                    let mut r = w.to_vec();
                    let dout = shape[1];
                    let bias_vals = &flat[at..at + if *bias { dout } else { 0 }];
                    r.extend_from_slice(bias_vals);
                    at += if *bias { dout } else { 0 };
                    r
                }
                _ => {
                    let (co, ckk) = (shape[0], numel / shape[0]);
                    let bias_vals = &flat[at..at + if *bias { co } else { 0 }];
                    let rows = ckk + usize::from(*bias);
                    let mut r = vec![0.0; rows * co];
                    for o in 0..co {
                        for c in 0..ckk {
                            r[c * co + o] = w[o * ckk + c];
                        }
                        if *bias {
                            r[ckk * co + o] = bias_vals[o];
                        }
                    }
                    at += if *bias { co } else { 0 };
                    r
                }
            };
            per_layer[l].push(row);
        }
    }
    (per_layer, out)
}

/// The exact GGN block `Σ_n J_nᵀ (diag p − p pᵀ) J_n` of each layer, and the Jacobians of the
/// first example.
fn exact_ggn<B: Body>(
    net: &Bnn<B, crate::likelihood::Categorical>,
    inputs: &[B::Input],
    shapes: &[(Vec<usize>, bool)],
) -> Vec<Vec<f64>> {
    let mut blocks: Vec<Vec<f64>> = Vec::new();
    for x in inputs {
        let (jac, f) = exact_jacobians(net, x.clone(), shapes);
        let z: f64 = f.iter().map(|v| v.exp()).sum();
        let p: Vec<f64> = f.iter().map(|v| v.exp() / z).collect();
        let k = p.len();
        for (l, j) in jac.iter().enumerate() {
            let pl = j[0].len();
            if blocks.len() <= l {
                blocks.push(vec![0.0; pl * pl]);
            }
            for a in 0..k {
                for b in 0..k {
                    let lam = if a == b { p[a] } else { 0.0 } - p[a] * p[b];
                    for r in 0..pl {
                        let jr = j[a][r] * lam;
                        for c in 0..pl {
                            blocks[l][r * pl + c] += jr * j[b][c];
                        }
                    }
                }
            }
        }
    }
    blocks
}

fn layer_shapes<B: Body, L: crate::likelihood::Likelihood>(
    net: &Bnn<B, L>,
) -> Vec<(Vec<usize>, bool)> {
    struct S(Vec<(Vec<usize>, bool)>);
    impl crate::layers::LayerVisitor for S {
        fn visit<const DW: usize>(
            &mut self,
            _: crate::layers::LayerInfo,
            params: &crate::layers::AnyLayerParams<DW>,
        ) {
            self.0
                .push((params.shape().to_vec(), params.bias.is_some()));
        }
    }
    let mut s = S(Vec::new());
    net.visit_layers(&mut s);
    s.0
}

fn tiny_conv(dev: &burn::tensor::Device) -> crate::nets::ImageClassifier {
    let convs = vec![
        crate::nets::ConvSpec::new(2, 3)
            .with_stride(2)
            .with_padding(1),
    ];
    ConvNetConfig::new(
        [1, 5, 5],
        convs,
        MlpConfig::new(18, vec![4], 3).with_weights(point()),
    )
    .init(crate::likelihood::Categorical, dev)
    .unwrap()
}

/// Whole-network Laplace: the diagonal is the exact GGN's diagonal (dense and convolutional
/// layers), KFAC on one example is a dense layer's exact GGN block, and the linearised
/// predictive is `J Σ Jᵀ`.
#[test]
fn network_laplace_matches_the_exact_ggn_and_the_linearised_variance() {
    let dev = device();
    let _guard = seeded(&dev, 14);
    let lambda = 0.7;
    let fixed = PriorPrecision::Fixed { value: lambda };
    let mlp = MlpConfig::new(2, vec![3], 3)
        .with_weights(point())
        .init_classifier(&dev)
        .unwrap();
    let conv = tiny_conv(&dev);
    let xs = Tensor::<2>::random([6, 2], Distribution::Normal(0.0, 1.0), &dev);
    let images = Tensor::<4>::random([4, 1, 5, 5], Distribution::Normal(0.0, 1.0), &dev);
    let labels = |n: usize| Tensor::<1, Int>::from_data(TensorData::new(vec![0i64; n], [n]), &dev);
    let close = |got: f64, want: f64, what: &str| {
        assert!(
            (got - want).abs() < 2e-3 * (1.0 + want.abs()),
            "{what}: {got} vs {want}"
        );
    };
    // Diagonal, on both nets.
    let diag = NetworkLaplaceConfig::new()
        .with_structure(LaplaceStructure::Diagonal)
        .with_prior_precision(fixed);
    let rows = |x: &Tensor<2>, n| {
        (0..n)
            .map(|i| x.clone().slice([i..i + 1, 0..2]))
            .collect::<Vec<_>>()
    };
    let fit = NetworkLaplace::fit(mlp.clone(), xs.clone(), labels(6), &diag).unwrap();
    let shapes = layer_shapes(&mlp);
    let ggn = exact_ggn(&mlp, &rows(&xs, 6), &shapes);
    check_diagonal(&ggn, |l| to_vec(fit.layer_covariance(l)), lambda);
    let img_rows: Vec<Tensor<4>> = (0..4)
        .map(|i| images.clone().slice([i..i + 1, 0..1, 0..5, 0..5]))
        .collect();
    let fit_conv = NetworkLaplace::fit(conv.clone(), images.clone(), labels(4), &diag).unwrap();
    let conv_shapes = layer_shapes(&conv);
    let ggn = exact_ggn(&conv, &img_rows, &conv_shapes);
    check_diagonal(&ggn, |l| to_vec(fit_conv.layer_covariance(l)), lambda);
    // KFAC on one example: each dense layer's block is exact.
    let kfac = NetworkLaplaceConfig::new().with_prior_precision(fixed);
    let one = xs.clone().slice([0..1, 0..2]);
    let fit_one = NetworkLaplace::fit(mlp.clone(), one.clone(), labels(1), &kfac).unwrap();
    let ggn = exact_ggn(&mlp, &[one], &shapes);
    for (l, block) in ggn.iter().enumerate() {
        let p = (block.len() as f64).sqrt() as usize;
        let mut chol = to_vec(fit_one.layer_covariance(l));
        dense::cholesky(&mut chol, p).unwrap();
        let precision = dense::inverse_from_cholesky(&chol, p);
        for i in 0..p {
            for j in 0..p {
                let want = block[i * p + j] + if i == j { lambda } else { 0.0 };
                close(precision[i * p + j], want, "KFAC block");
            }
        }
    }
    // The linearised variance is Σ_l J_l Σ_l J_lᵀ, for KFAC on the MLP and diagonal on the conv net.
    let fit_kfac = NetworkLaplace::fit(mlp.clone(), xs.clone(), labels(6), &kfac).unwrap();
    check_linearised(&fit_kfac, &mlp, rows(&xs, 2), &shapes);
    check_linearised(&fit_conv, &conv, img_rows[..2].to_vec(), &conv_shapes);
}

/// Each layer's posterior precision diagonal minus `λ` is the GGN's diagonal.
fn check_diagonal(ggn: &[Vec<f64>], covariance: impl Fn(usize) -> Vec<f64>, lambda: f64) {
    for (l, block) in ggn.iter().enumerate() {
        let cov = covariance(l);
        let p = (block.len() as f64).sqrt() as usize;
        for i in 0..p {
            let (got, want) = (1.0 / cov[i * p + i] - lambda, block[i * p + i]);
            assert!(
                (got - want).abs() < 2e-3 * (1.0 + want.abs()),
                "layer {l}: {got} vs {want}"
            );
        }
    }
}

/// What the linearised check needs of a fit.
trait LinearisedVar<I> {
    fn variance(&self, x: I) -> Vec<f64>;
    fn covariance(&self, layer: usize) -> Vec<f64>;
}

impl<B: Body> LinearisedVar<B::Input> for NetworkLaplace<B, crate::likelihood::Categorical> {
    fn variance(&self, x: B::Input) -> Vec<f64> {
        to_vec(self.linearised(x).unwrap().var)
    }
    fn covariance(&self, layer: usize) -> Vec<f64> {
        to_vec(self.layer_covariance(layer))
    }
}

fn check_linearised<B: Body>(
    fit: &dyn LinearisedVar<B::Input>,
    net: &Bnn<B, crate::likelihood::Categorical>,
    rows: Vec<B::Input>,
    shapes: &[(Vec<usize>, bool)],
) {
    for x in rows {
        let got = fit.variance(x.clone());
        let (jac, _) = exact_jacobians(net, x, shapes);
        let k = got.len();
        for j in 0..k {
            let mut want = 0.0;
            for (l, jl) in jac.iter().enumerate() {
                let cov = fit.covariance(l);
                let p = jl[j].len();
                for a in 0..p {
                    want += jl[j][a] * dense::dot(&cov[a * p..(a + 1) * p], &jl[j]);
                }
            }
            assert!(
                (got[j] - want).abs() < 2e-3 * (1e-3 + want),
                "output {j}: {} vs {want}",
                got[j]
            );
        }
    }
}

/// The Monte Carlo Fisher's curvature is the GGN in expectation: one example repeated 4 000
/// times gives 4 000 times its GGN diagonal within the draws' error.
#[test]
fn the_monte_carlo_fisher_estimates_the_ggn() {
    let dev = device();
    let _guard = seeded(&dev, 15);
    let mlp = MlpConfig::new(2, vec![3], 3)
        .with_weights(point())
        .init_classifier(&dev)
        .unwrap();
    let one = Tensor::<2>::random([1, 2], Distribution::Normal(0.0, 1.0), &dev);
    let n = 4000;
    let many = one.clone().repeat_dim(0, n);
    let labels = Tensor::<1, Int>::zeros([n], &dev);
    let lambda = 1e-3;
    let config = NetworkLaplaceConfig::new()
        .with_structure(LaplaceStructure::Diagonal)
        .with_curvature(CurvatureEstimate::MonteCarlo)
        .with_prior_precision(PriorPrecision::Fixed { value: lambda })
        .with_batch_size(1000);
    let fit = NetworkLaplace::fit(mlp.clone(), many, labels, &config).unwrap();
    let shapes = layer_shapes(&mlp);
    let ggn = exact_ggn(&mlp, &[one], &shapes);
    let (mut got, mut want) = (0.0, 0.0);
    for (l, block) in ggn.iter().enumerate() {
        let cov = to_vec(fit.layer_covariance(l));
        let p = (block.len() as f64).sqrt() as usize;
        for i in 0..p {
            got += 1.0 / cov[i * p + i] - lambda;
            want += n as f64 * block[i * p + i];
        }
    }
    // A sum over 4 000 draws of r rᵀ: a few per cent of error.
    assert!((got / want - 1.0).abs() < 0.1, "{got} vs {want}");
}

/// Labels drawn from `softmax(z)` for logits `z ~ N(0, 2²)`, `[n, c]`, from a host stream.
fn calibrated_classes(n: usize, c: usize, seed: u64) -> (Vec<f64>, Vec<i64>) {
    use rand::{RngExt, SeedableRng};
    let z: Vec<f64> = host_normals(n * c, seed).iter().map(|v| 2.0 * v).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed + 1);
    let labels = z
        .chunks(c)
        .map(|row| {
            let total: f64 = row.iter().map(|v| v.exp()).sum();
            let u: f64 = rng.random::<f64>() * total;
            let mut acc = 0.0;
            row.iter()
                .position(|v| {
                    acc += v.exp();
                    acc >= u
                })
                .unwrap_or(c - 1) as i64
        })
        .collect();
    (z, labels)
}

fn class_prediction(
    z: &[f64],
    n: usize,
    c: usize,
    scale: f64,
    dev: &burn::tensor::Device,
) -> ClassPrediction {
    let logits = matrix(&z.iter().map(|v| v * scale).collect::<Vec<_>>(), n, c, dev);
    ClassPrediction::from_logits(logits.unsqueeze::<3>())
}

/// Temperature scaling recovers the factor by which over-confident logits were scaled, and
/// its tempered prediction is then calibrated.
#[test]
fn temperature_scaling_undoes_a_known_overconfidence() {
    let dev = device();
    let (n, c) = (4000, 5);
    let (z, labels) = calibrated_classes(n, c, 160);
    let pred = class_prediction(&z, n, c, 3.0, &dev);
    let y = Tensor::<1, Int>::from_data(TensorData::new(labels.clone(), [n]), &dev);
    let t = TemperatureScaling::fit(&pred, y.clone()).unwrap();
    assert!((t.temperature / 3.0 - 1.0).abs() < 0.1, "{}", t.temperature);
    let tempered = t.apply(&pred).unwrap();
    let truth = class_prediction(&z, n, c, 1.0, &dev);
    let (a, b) = (to_vec(tempered.mean()), to_vec(truth.mean()));
    let gap = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    assert!(gap < 0.1, "largest probability gap {gap}");
    let dirichlet = ClassPrediction::Dirichlet(crate::predict::DirichletPrediction::new(
        Tensor::ones([2, 3], &dev),
    ));
    assert!(TemperatureScaling::fit(&dirichlet, y.slice(0..2)).is_err());
}

/// Split-conformal intervals cover fresh points at `1 − α` whatever the predictive's width
/// (here four times too narrow), within the binomial band of calibration and test sizes; class
/// sets cover at `≥ 1 − α`.
#[test]
fn conformal_intervals_and_sets_cover_fresh_data() {
    let dev = device();
    let alpha = 0.1;
    let (n_cal, n_test) = (2000, 4000);
    let make = |n: usize, seed: u64| {
        let x = host_normals(n, seed);
        let e = host_normals(n, seed + 1);
        let y: Vec<f64> = x.iter().zip(&e).map(|(a, b)| a + b).collect();
        let pred = GaussianPrediction::Moments(crate::predict::GaussianMoments {
            mean: matrix(&x, n, 1, &dev),
            aleatoric_var: Tensor::full([n, 1], 0.0625, &dev),
            epistemic_var: Tensor::zeros([n, 1], &dev),
        });
        (pred, matrix(&y, n, 1, &dev))
    };
    let (cal, y_cal) = make(n_cal, 170);
    let (test, y_test) = make(n_test, 180);
    let conformal = ConformalRegression::fit(&cal, y_cal, alpha).unwrap();
    // |ε|/0.25 has its 90 % quantile at 4 · 1.645.
    assert!(
        (conformal.quantile / (4.0 * 1.6449) - 1.0).abs() < 0.1,
        "{}",
        conformal.quantile
    );
    let coverage = conformal.coverage(&test, y_test.clone()).unwrap();
    let band = 4.0 * (alpha * (1.0 - alpha) * (1.0 / n_cal as f64 + 1.0 / n_test as f64)).sqrt();
    assert!((coverage - (1.0 - alpha)).abs() < band, "{coverage}");
    let raw = test.clone();
    let naive = ConformalRegression {
        quantile: 1.6449,
        alpha,
    };
    assert!(
        naive.coverage(&raw, y_test).unwrap() < 0.5,
        "the uncalibrated width under-covers"
    );
    assert!(ConformalRegression::fit(&cal, matrix(&[1.0], 1, 1, &dev), alpha).is_err());
    assert!(ConformalRegression::fit(&cal, Tensor::zeros([n_cal, 1], &dev), 1.5).is_err());
    // Class sets.
    let c = 6;
    let (z, labels) = calibrated_classes(n_cal + n_test, c, 190);
    let pred = class_prediction(&z[..n_cal * c], n_cal, c, 1.0, &dev);
    let fresh = class_prediction(&z[n_cal * c..], n_test, c, 1.0, &dev);
    let y = |l: &[i64]| Tensor::<1, Int>::from_data(TensorData::new(l.to_vec(), [l.len()]), &dev);
    let sets = ConformalSets::fit(&pred, y(&labels[..n_cal]), alpha, 1).unwrap();
    let (coverage, size) = sets.coverage(&fresh, y(&labels[n_cal..]), 2).unwrap();
    assert!((coverage - (1.0 - alpha)).abs() < band, "{coverage}");
    assert!(size > 1.0 && size < c as f64, "{size}");
    let loose = ConformalSets::fit(&pred, y(&labels[..n_cal]), 0.3, 1).unwrap();
    assert!(loose.coverage(&fresh, y(&labels[n_cal..]), 2).unwrap().1 < size);
    // Confident, correct predictions give one class per set, not all of them.
    let sure = class_prediction(&z[..n_cal * c], n_cal, c, 1e3, &dev);
    let argmax: Vec<i64> = z[..n_cal * c]
        .chunks(c)
        .map(|r| (0..c).max_by(|&a, &b| r[a].total_cmp(&r[b])).unwrap() as i64)
        .collect();
    let tight = ConformalSets::fit(&sure, y(&argmax), alpha, 3).unwrap();
    let (cov, size) = tight.coverage(&sure, y(&argmax), 4).unwrap();
    assert!(
        size <= 1.0 + 1e-9 && cov > 1.0 - alpha - band,
        "{cov} {size}"
    );
}

/// A diagonal Laplace's posterior as the next prior: `N(θ*, (w·H + λ)⁻¹)` per weight, so the
/// point network's log prior falls by `½ (w H_jj + λ) δ²` when weight `j` moves by `δ`, with
/// `H_jj = Σ_n x̃_nj²/σ²` on a linear-Gaussian head (EWC's penalty with its Fisher).
#[test]
fn a_diagonal_laplace_becomes_an_ewc_prior_with_the_hand_computed_fisher() {
    let dev = device();
    let _guard = seeded(&dev, 9);
    let data = LinearGaussian::new(30, 2, 0.5, 80);
    let lambda = 2.0;
    let (_, mean) = data.posterior(lambda);
    let net = data.net_at(&mean, &dev);
    let (x, y) = data.tensors(&dev);
    let config = NetworkLaplaceConfig::new()
        .with_structure(LaplaceStructure::Diagonal)
        .with_prior_precision(PriorPrecision::Fixed { value: lambda });
    let laplace = NetworkLaplace::fit(net, x, y, &config).unwrap();
    let p = data.d + 1;
    let f = data.features();
    let h: Vec<f64> = (0..p)
        .map(|j| (0..data.n).map(|i| f[i * p + j].powi(2)).sum::<f64>() / data.noise.powi(2))
        .collect();
    for w in [0.0, 1.0, 5.0] {
        let prior = laplace.posterior_as_prior(w).unwrap();
        let at = prior.mean_draw();
        let base = to_vec(prior.log_prior_draws(&at))[0];
        let delta = 0.1;
        for (j, hj) in h.iter().enumerate() {
            let mut moved: Vec<LayerDraw> = at.clone();
            let unit = |k: usize, len: usize| {
                let mut v = vec![0.0; len];
                v[k] = delta;
                matrix(&v, 1, len, &dev)
            };
            if j < data.d {
                moved[0].weight = moved[0].weight.clone() + unit(j, data.d);
            } else {
                let b = moved[0].bias.clone().expect("a bias");
                moved[0].bias = Some(b + unit(0, 1));
            }
            let drop = base - to_vec(prior.log_prior_draws(&moved))[0];
            let want = 0.5 * (w * hj + lambda) * delta * delta;
            assert!(
                (drop - want).abs() < 2e-3 * want.max(1e-2),
                "w {w}, j {j}: {drop} vs {want}"
            );
        }
    }
    let kfac = NetworkLaplace::fit(
        data.net_at(&mean, &dev),
        data.tensors(&dev).0,
        data.tensors(&dev).1,
        &NetworkLaplaceConfig::new().with_prior_precision(PriorPrecision::Fixed { value: lambda }),
    )
    .unwrap();
    assert!(matches!(
        kfac.posterior_as_prior(1.0),
        Err(LaplaceError::Unsupported(_))
    ));
    assert!(matches!(
        laplace.posterior_as_prior(f64::NAN),
        Err(LaplaceError::Config(_))
    ));
}
