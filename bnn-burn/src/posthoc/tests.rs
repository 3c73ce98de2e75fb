use super::*;
use crate::layers::{Pass, WeightConfig};
use crate::likelihood::{GaussianLikelihoodConfig, NoiseFit};
use crate::linalg::dense;
use crate::nets::{ConvNetConfig, MlpConfig, Regressor};
use crate::posterior::{AnyPosterior, PointPosterior, PosteriorConfig};
use crate::predict::{GaussianPrediction, Predict, PredictMode};
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

/// Mandt et al.'s SGD rate from minibatch gradients matches the one from the exact
/// per-example gradient covariance of a linear-Gaussian model.
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
    let want = 2.0 * b as f64 * p as f64 / (data.n as f64 * trace);
    // 400 batches estimate tr C to about √(2/400) ≈ 7 % (more with heavy-tailed gradients).
    assert!((got / want - 1.0).abs() < 0.25, "{got} vs {want}");
    let point = mean_field_regressor(2, 3, &dev);
    assert!(sgd_posterior_learning_rate(&point, &x, &y, b, 4).is_err());
    assert!(sgd_posterior_learning_rate(&net, &x, &y, 500, 4).is_err());
}
