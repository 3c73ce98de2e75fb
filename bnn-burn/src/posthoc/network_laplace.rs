//! Laplace over every layer of a point network (MacKay 1992; Ritter et al. 2018; Daxberger et
//! al. 2021): `N(θ*, (H + λI)⁻¹)` with `H` the GGN of the log-likelihood, diagonal or
//! Kronecker-factored per layer (KFAC: `H_l ≈ A_l ⊗ G_l / N`, `A` the inputs' and `G` the output
//! gradients' second moments; convolutions as in Grosse & Martens 2016). The per-example inputs
//! and output gradients come from one recording pass per factor of the outputs' curvature
//! ([`crate::layers::Pass::recording`]).

use super::NetworkPosterior;
use super::laplace::{
    LaplaceError, OutputCurvature, PriorPrecision, best_prior_precision, check_fit, eigen_log_det,
    evidence_terms,
};
use crate::batch::Batch;
use crate::dist::Moments;
use crate::dist::WeightPrior;
use crate::error::ConfigError;
use crate::layers::{AnyLayerParams, LayerDraw, LayerInfo, LayerKind, Pass, Recorded};
use crate::likelihood::Likelihood;
use crate::linalg::dense;
use crate::nets::{Bnn, Body};
use crate::posterior::Unsupported;
use burn::config::Config;
use burn::module::Module;
use burn::tensor::module::unfold4d;
use burn::tensor::ops::UnfoldOptions;
use burn::tensor::{Distribution, Int, Tensor};

/// The structure of the curvature per layer.
#[derive(Config, Debug, PartialEq, Eq, Copy)]
pub enum LaplaceStructure {
    /// One precision per weight.
    Diagonal,
    /// `A ⊗ G` per layer (KFAC).
    Kfac,
}

/// How the outputs' curvature `Λ` enters.
#[derive(Config, Debug, PartialEq, Eq, Copy)]
pub enum CurvatureEstimate {
    /// The exact GGN: one backward pass per output (`Λ = Σ_j r_j r_jᵀ`).
    Ggn,
    /// One draw `r` with `E[r rᵀ] = Λ` per example (the Monte Carlo Fisher): one backward pass.
    MonteCarlo,
}

/// Configuration of [`NetworkLaplace::fit`].
#[derive(Config, Debug, PartialEq)]
pub struct NetworkLaplaceConfig {
    /// Diagonal or Kronecker-factored.
    #[config(default = "LaplaceStructure::Kfac")]
    pub structure: LaplaceStructure,
    /// Exact GGN or its Monte Carlo estimate.
    #[config(default = "CurvatureEstimate::Ggn")]
    pub curvature: CurvatureEstimate,
    /// The prior precision.
    #[config(default = "PriorPrecision::MarginalLikelihood")]
    pub prior_precision: PriorPrecision,
    /// Rows per pass.
    #[config(default = 256)]
    pub batch_size: usize,
}

/// What is known of a layer before the data pass.
#[derive(Debug, Clone)]
struct LayerShape {
    kind: LayerKind,
    /// The weight's shape.
    weight: Vec<usize>,
    bias: bool,
}

impl LayerShape {
    /// `(input width incl. the bias row, output width)` of the layer's `A` and `G`.
    fn factor_dims(&self) -> (usize, usize) {
        let extra = usize::from(self.bias);
        match self.kind {
            LayerKind::Dense => (self.weight[0] + extra, self.weight[1]),
            LayerKind::Conv2d(_) => (
                self.weight[1..].iter().product::<usize>() + extra,
                self.weight[0],
            ),
        }
    }

    /// Per-example gradients of one layer as a matrix `[B, d_in (+1), d_out]` (dense: the outer
    /// products; convolutions: summed over positions), from its record and probe gradient.
    fn per_example(&self, rec: &Recorded, g: Tensor<2>) -> PerExample {
        let b = g.dims()[0];
        match &self.kind {
            LayerKind::Dense => {
                let a = with_ones(rec.input.clone(), self.bias, 1);
                PerExample::Dense { a, g }
            }
            LayerKind::Conv2d(geometry) => {
                let [c, h, w] = [rec.input_shape[0], rec.input_shape[1], rec.input_shape[2]];
                let x = rec.input.clone().reshape([b, c, h, w]);
                let options =
                    UnfoldOptions::new(geometry.stride, geometry.padding, geometry.dilation);
                let u = unfold4d(x, [self.weight[2], self.weight[3]], options);
                let [_, ckk, l] = u.dims();
                let u = with_ones(u.swap_dims(1, 2).reshape([b * l, ckk]), self.bias, 1).reshape([
                    b,
                    l,
                    ckk + usize::from(self.bias),
                ]);
                let co = self.weight[0];
                let g = g.reshape([b, co, l]);
                PerExample::Conv { u, g }
            }
        }
    }
}

/// A layer's per-example inputs and output gradients.
enum PerExample {
    /// `a [B, d_in (+1)]`, `g [B, d_out]`.
    Dense { a: Tensor<2>, g: Tensor<2> },
    /// Patches `u [B, L, C·kh·kw (+1)]`, `g [B, C_out, L]`.
    Conv { u: Tensor<3>, g: Tensor<3> },
}

impl PerExample {
    /// The per-example gradient matrices `[B, d_in (+1), d_out]`.
    fn gradients(&self) -> Tensor<3> {
        match self {
            Self::Dense { a, g } => {
                a.clone().unsqueeze_dim::<3>(2) * g.clone().unsqueeze_dim::<3>(1)
            }
            Self::Conv { u, g } => u.clone().swap_dims(1, 2).matmul(g.clone().swap_dims(1, 2)),
        }
    }

    /// `Σ_n (∂ℓ_n/∂M)²`, the diagonal GGN's share, `[d_in (+1), d_out]` (dense: `(a²)ᵀ g²`, without
    /// the per-example outer products).
    fn squared_gradients(&self) -> Tensor<2> {
        match self {
            Self::Dense { a, g } => a.clone().square().transpose().matmul(g.clone().square()),
            Self::Conv { .. } => self.gradients().square().sum_dim(0).squeeze_dim(0),
        }
    }

    /// `Σ_{i,o} J_io² W_io` per example, `[B]`, for weights `W` on the gradient matrix, in the
    /// bases `u` (inputs) and `v` (outputs) when given (KFAC's eigenbases).
    fn weighted_square(
        &self,
        weights: &Tensor<2>,
        bases: Option<(&Tensor<2>, &Tensor<2>)>,
    ) -> Tensor<1> {
        match self {
            Self::Dense { a, g } => {
                let (a, g) = match bases {
                    Some((u, v)) => (a.clone().matmul(u.clone()), g.clone().matmul(v.clone())),
                    None => (a.clone(), g.clone()),
                };
                (a.square().matmul(weights.clone()) * g.square())
                    .sum_dim(1)
                    .squeeze_dim(1)
            }
            Self::Conv { .. } => {
                let jac = self.gradients();
                let jac = match bases {
                    Some((u, v)) => u
                        .clone()
                        .transpose()
                        .unsqueeze::<3>()
                        .matmul(jac)
                        .matmul(v.clone().unsqueeze::<3>()),
                    None => jac,
                };
                let [b, di, d_o] = jac.dims();
                (jac.square() * weights.clone().unsqueeze::<3>())
                    .reshape([b, di * d_o])
                    .sum_dim(1)
                    .squeeze_dim(1)
            }
        }
    }

    /// `Σ_n ã ãᵀ` (convolutions: over positions too).
    fn input_moment(&self) -> Tensor<2> {
        let a = match self {
            Self::Dense { a, .. } => a.clone(),
            Self::Conv { u, .. } => {
                let [b, l, d] = u.dims();
                u.clone().reshape([b * l, d])
            }
        };
        a.clone().transpose().matmul(a)
    }

    /// `Σ_n g gᵀ` (convolutions: over positions, divided by their count).
    fn output_moment(&self) -> Tensor<2> {
        match self {
            Self::Dense { g, .. } => g.clone().transpose().matmul(g.clone()),
            Self::Conv { u, g } => {
                let [b, l, _] = u.dims();
                let co = g.dims()[1];
                let g = g.clone().swap_dims(1, 2).reshape([b * l, co]);
                g.clone().transpose().matmul(g) / l as f64
            }
        }
    }
}

/// `[x, 1]` along `dim` of a matrix when `bias`.
fn with_ones(x: Tensor<2>, bias: bool, dim: usize) -> Tensor<2> {
    match bias {
        true => {
            let mut shape = x.dims();
            shape[dim] = 1;
            let ones = Tensor::ones(shape, &x.device());
            Tensor::cat(vec![x, ones], dim)
        }
        false => x,
    }
}

/// A layer's posterior.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
enum LayerPosterior {
    /// Variances of the weight matrix `[d_in (+1), d_out]` (bias as the last row).
    Diagonal { var: Tensor<2> },
    /// `A = U diag(a) Uᵀ`, `G = V diag(g) Vᵀ`, and `1/(a_i g_j/N + λ)` as `[d_in (+1), d_out]`.
    Kfac {
        u: Tensor<2>,
        v: Tensor<2>,
        inv: Tensor<2>,
    },
}

/// What the data pass accumulated for one layer.
#[allow(clippy::large_enum_variant)]
enum Accumulated {
    Diagonal(Tensor<2>),
    Kfac(Tensor<2>, Tensor<2>),
}

/// A Laplace posterior over every layer of a point network.
#[derive(Debug, Clone)]
pub struct NetworkLaplace<B: Body, L: Likelihood> {
    net: Bnn<B, L>,
    shapes: Vec<LayerShape>,
    /// The MAP weights as matrices `[d_in (+1), d_out]` per layer.
    means: Vec<Tensor<2>>,
    posteriors: Vec<LayerPosterior>,
    /// `λ_l` per layer (all equal unless chosen per layer).
    prior_precisions: Vec<f64>,
    log_marginal_likelihood: f64,
}

/// The matrix `[d_in (+1), d_out]` of a layer's draw `[n, …]` per draw, `[n, d_in (+1), d_out]`.
fn draw_matrix(shape: &LayerShape, d: &LayerDraw) -> Tensor<3> {
    let n = d.samples();
    let (din, dout) = shape.factor_dims();
    let rows = din - usize::from(shape.bias);
    let w = match shape.kind {
        LayerKind::Dense => d.weight.clone().reshape([n, rows, dout]),
        LayerKind::Conv2d(_) => d.weight.clone().reshape([n, dout, rows]).swap_dims(1, 2),
    };
    match &d.bias {
        Some(b) => Tensor::cat(vec![w, b.clone().reshape([n, 1, dout])], 1),
        None => w,
    }
}

/// The layer draw of matrices `[n, d_in (+1), d_out]`.
fn matrix_draw(shape: &LayerShape, m: Tensor<3>) -> LayerDraw {
    let [n, din, dout] = m.dims();
    let rows = din - usize::from(shape.bias);
    let w = m.clone().slice([0..n, 0..rows, 0..dout]);
    let weight = match shape.kind {
        LayerKind::Dense => w.reshape([n, rows * dout]),
        LayerKind::Conv2d(_) => w.swap_dims(1, 2).reshape([n, rows * dout]),
    };
    let bias = shape
        .bias
        .then(|| m.slice([0..n, rows..din, 0..dout]).reshape([n, dout]));
    LayerDraw { weight, bias }
}

struct Shapes(Vec<LayerShape>);

impl crate::layers::LayerVisitor for Shapes {
    fn visit<const DW: usize>(&mut self, layer: LayerInfo, params: &AnyLayerParams<DW>) {
        self.0.push(LayerShape {
            kind: layer.kind,
            weight: params.shape().to_vec(),
            bias: params.bias.is_some(),
        });
    }
}

impl<B: Body, L: OutputCurvature> NetworkLaplace<B, L> {
    /// Fits the posterior of every layer of `net` (all point estimates) on the training data.
    ///
    /// # Errors
    /// A network with stochastic layers, data that do not fit it, a likelihood without a
    /// closed-form curvature, or an invalid configuration.
    pub fn fit(
        net: Bnn<B, L>,
        input: B::Input,
        target: L::Target,
        config: &NetworkLaplaceConfig,
    ) -> Result<Self, LaplaceError> {
        check_fit(
            &net,
            &input,
            &target,
            config.batch_size,
            config.prior_precision,
        )?;
        let device = net.devices()[0].clone();
        let tracked = net.clone().train();
        let mut shapes = Shapes(Vec::new());
        net.visit_layers(&mut shapes);
        let shapes = shapes.0;
        let draws: Vec<LayerDraw> = tracked
            .mean_draw()
            .into_iter()
            .map(|d| LayerDraw {
                weight: d.weight.detach(),
                bias: d.bias.map(|b| b.detach()),
            })
            .collect();
        let n = input.len();
        let mut acc: Vec<Option<Accumulated>> = shapes.iter().map(|_| None).collect();
        let mut log_likelihood = 0.0;
        let train_device = tracked.devices()[0].clone();
        for start in (0..n).step_by(config.batch_size) {
            let end = (start + config.batch_size).min(n);
            let rows = Tensor::<1, Int>::arange(start as i64..end as i64, &device);
            let x = input.rows(rows.clone()).to(&train_device);
            let y = target.rows(rows);
            let out = tracked
                .forward(x.clone(), &mut Pass::fixed(&draws))
                .detach();
            log_likelihood += crate::host::to_vec(
                net.likelihood
                    .log_likelihood(out.clone().to_device(&device), y)
                    .sum(),
            )[0];
            let f = out.squeeze_dim::<2>(0);
            let factors = match config.curvature {
                CurvatureEstimate::Ggn => tracked.likelihood.curvature_factors(f)?,
                CurvatureEstimate::MonteCarlo => vec![tracked.likelihood.curvature_sample(f)?],
            };
            for (j, r) in factors.into_iter().enumerate() {
                for (l, per) in per_example_pass(&tracked, &shapes, &draws, x.clone(), r)
                    .into_iter()
                    .enumerate()
                {
                    let add = match config.structure {
                        LaplaceStructure::Diagonal => {
                            Accumulated::Diagonal(per.squared_gradients())
                        }
                        LaplaceStructure::Kfac => {
                            // `A` is the same in every factor's pass: counted once.
                            let g = per.output_moment();
                            let a = match j {
                                0 => per.input_moment(),
                                _ => Tensor::zeros([1, 1], &g.device()),
                            };
                            Accumulated::Kfac(a, g)
                        }
                    };
                    acc[l] = Some(match (acc[l].take(), add) {
                        (None, add) => add,
                        (Some(Accumulated::Diagonal(h)), Accumulated::Diagonal(d)) => {
                            Accumulated::Diagonal(h + d)
                        }
                        (Some(Accumulated::Kfac(a, g)), Accumulated::Kfac(da, dg)) => {
                            let a = if j == 0 { a + da } else { a };
                            Accumulated::Kfac(a, g + dg)
                        }
                        _ => unreachable!("one structure per fit"),
                    });
                }
            }
        }
        let means: Vec<Tensor<2>> = shapes
            .iter()
            .zip(net.mean_draw())
            .map(|(s, d)| draw_matrix(s, &d).squeeze_dim(0))
            .collect();
        let norm2: Vec<f64> = means
            .iter()
            .map(|m| crate::host::to_vec(m.clone().square().sum())[0])
            .collect();
        let sizes: Vec<usize> = means
            .iter()
            .map(|m| m.dims().iter().product::<usize>())
            .collect();
        let p: usize = sizes.iter().sum();
        // The curvature's eigenvalues per layer (diagonal: the entries; KFAC: a_i g_j / N).
        let mut eigen = Vec::with_capacity(p);
        let mut factored = Vec::with_capacity(shapes.len());
        for (layer, (shape, a)) in shapes.iter().zip(acc).enumerate() {
            let (din, dout) = shape.factor_dims();
            let finite = |v: Vec<f64>| match v.iter().all(|x| x.is_finite()) {
                true => Ok(v),
                false => Err(LaplaceError::NonFiniteCurvature { layer }),
            };
            match a.expect("every layer accumulated") {
                Accumulated::Diagonal(h) => {
                    let h = h.to_device(&device);
                    eigen.extend(finite(crate::host::to_vec(h.clone()))?);
                    factored.push((h, None));
                }
                Accumulated::Kfac(a, g) => {
                    let a = finite(crate::host::to_vec(a))?;
                    let g = finite(crate::host::to_vec(g))?;
                    let (av, au) = dense::symmetric_eigen(sym(a, din), din);
                    let (gv, gu) = dense::symmetric_eigen(sym(g, dout), dout);
                    let vals: Vec<f64> = av
                        .iter()
                        .flat_map(|ai| {
                            gv.iter()
                                .map(move |gj| ai.max(0.0) * gj.max(0.0) / n as f64)
                        })
                        .collect();
                    eigen.extend(vals.iter().copied());
                    let vals = crate::host::matrix(&vals, dout, &device);
                    let u = crate::host::matrix(&au, din, &device);
                    let v = crate::host::matrix(&gu, dout, &device);
                    factored.push((vals, Some((u, v))));
                }
            }
        }
        // Each layer's eigenvalues, in `eigen`'s order.
        let mut blocks = Vec::with_capacity(sizes.len());
        let mut at = 0;
        for &size in &sizes {
            blocks.push(&eigen[at..at + size]);
            at += size;
        }
        let prior_precisions = match config.prior_precision {
            PriorPrecision::Fixed { value } => vec![value; sizes.len()],
            PriorPrecision::MarginalLikelihood => {
                let total: f64 = norm2.iter().sum();
                vec![best_prior_precision(&eigen, total, p); sizes.len()]
            }
            PriorPrecision::MarginalLikelihoodPerLayer => blocks
                .iter()
                .zip(&norm2)
                .map(|(e, &n2)| best_prior_precision(e, n2, e.len()))
                .collect(),
        };
        let evidence: f64 = blocks
            .iter()
            .zip(&norm2)
            .zip(&prior_precisions)
            .map(|((e, &n2), &l)| evidence_terms(l, n2, e.len(), eigen_log_det(e, l)))
            .sum();
        let log_marginal_likelihood = log_likelihood + evidence;
        let posteriors = factored
            .into_iter()
            .zip(&prior_precisions)
            .map(|((h, uv), &lambda)| {
                let inv = (h.clamp_min(0.0) + lambda).recip();
                match uv {
                    None => LayerPosterior::Diagonal { var: inv },
                    Some((u, v)) => LayerPosterior::Kfac { u, v, inv },
                }
            })
            .collect();
        Ok(Self {
            net,
            shapes,
            means,
            posteriors,
            prior_precisions,
            log_marginal_likelihood,
        })
    }
}

/// A symmetrised `n × n` matrix (the f32 products are symmetric up to rounding).
fn sym(h: Vec<f64>, n: usize) -> Vec<f64> {
    let mut out = h.clone();
    for i in 0..n {
        for j in 0..n {
            out[i * n + j] = 0.5 * (h[i * n + j] + h[j * n + i]);
        }
    }
    out
}

/// One recording pass and the backward pass of `Σ_n r_nᵀ f_n`: every layer's per-example
/// inputs and output gradients.
fn per_example_pass<B: Body, L: Likelihood>(
    net: &Bnn<B, L>,
    shapes: &[LayerShape],
    draws: &[LayerDraw],
    x: B::Input,
    r: Tensor<2>,
) -> Vec<PerExample> {
    let mut pass = Pass::fixed(draws).recording();
    let f = net.forward(x, &mut pass).squeeze_dim::<2>(0);
    let grads = (f * r.detach()).sum().backward();
    let recorded = pass.into_recorded();
    assert_eq!(recorded.len(), shapes.len(), "one record per layer");
    recorded
        .iter()
        .zip(shapes)
        .map(|(rec, shape)| {
            let g = rec
                .probe
                .grad(&grads)
                .unwrap_or_else(|| rec.probe.zeros_like());
            shape.per_example(rec, g.detach())
        })
        .collect()
}

impl<B: Body, L: Likelihood> NetworkLaplace<B, L> {
    /// The prior precision `λ` in use: the shared one, or with one per layer their geometric
    /// mean weighted by the layers' parameter counts.
    pub fn prior_precision(&self) -> f64 {
        let first = self.prior_precisions[0];
        if self.prior_precisions.iter().all(|&l| l == first) {
            return first;
        }
        let sizes = self
            .means
            .iter()
            .map(|m| m.dims().iter().product::<usize>());
        let (log_sum, count) = sizes
            .zip(&self.prior_precisions)
            .fold((0.0, 0usize), |(s, c), (n, l)| {
                (s + n as f64 * l.ln(), c + n)
            });
        (log_sum / count as f64).exp()
    }

    /// `λ_l` per layer, in forward order (all equal unless chosen per layer).
    pub fn prior_precisions(&self) -> &[f64] {
        &self.prior_precisions
    }

    /// The Laplace log marginal likelihood at `λ` (nats, over the training set).
    pub fn log_marginal_likelihood(&self) -> f64 {
        self.log_marginal_likelihood
    }

    /// The posterior covariance of layer `layer`'s parameters, `[P_l, P_l]`, ordered as the
    /// matrix `[d_in (+1), d_out]` row-major (dense: the weight then the bias; a convolution's
    /// inputs are its `C_in·kh·kw` patch entries). Dense in `P_l²`: for small layers.
    ///
    /// # Panics
    /// If `layer` is not a layer index.
    pub fn layer_covariance(&self, layer: usize) -> Tensor<2> {
        let [din, dout] = self.means[layer].dims();
        let p = din * dout;
        match &self.posteriors[layer] {
            LayerPosterior::Diagonal { var } => {
                let eye = Tensor::<2>::eye(p, &var.device());
                eye * var.clone().reshape([1, p])
            }
            LayerPosterior::Kfac { u, v, inv } => {
                // (U ⊗ V) diag(inv) (U ⊗ V)ᵀ, with (U ⊗ V)[(i,o),(a,b)] = U[i,a] V[o,b].
                let kron = (u.clone().reshape([din, 1, din, 1])
                    * v.clone().reshape([1, dout, 1, dout]))
                .reshape([p, p]);
                (kron.clone() * inv.clone().reshape([1, p])).matmul(kron.transpose())
            }
        }
    }
}

impl<B: Body, L: Likelihood> NetworkLaplace<B, L> {
    /// The point network with every layer's prior `N(θ*, (w·H + λ)⁻¹)` per weight, `H` the
    /// diagonal curvature and `λ` the layer's prior precision: the next task's prior in
    /// continual learning. `w = 1` is this Laplace posterior itself (Laplace propagation,
    /// online EWC); EWC's `λ_EWC` is `w` (Kirkpatrick et al. 2017, eq. 3: the penalty
    /// `(w/2) Σ_i H_i (θ_i − θ*_i)²` on the summed log-likelihood, the objective's KL/N
    /// dividing it by the next task's N). A point bias without a prior stays without one.
    ///
    /// # Errors
    /// A Kronecker-factored fit (not diagonal), or `w` not finite and ≥ 0.
    pub fn posterior_as_prior(&self, curvature_weight: f64) -> Result<Bnn<B, L>, LaplaceError> {
        if !(curvature_weight.is_finite() && curvature_weight >= 0.0) {
            return Err(ConfigError {
                config: "NetworkLaplace::posterior_as_prior",
                field: "curvature_weight",
                value: curvature_weight.to_string(),
                expected: "a finite number ≥ 0",
            }
            .into());
        }
        let mut stds = Vec::with_capacity(self.shapes.len());
        for ((shape, post), lambda) in self
            .shapes
            .iter()
            .zip(&self.posteriors)
            .zip(&self.prior_precisions)
        {
            let LayerPosterior::Diagonal { var } = post else {
                return Err(Unsupported {
                    family: "Kronecker-factored Laplace",
                    what: "a per-weight prior: fit with LaplaceStructure::Diagonal",
                }
                .into());
            };
            // H = 1/var − λ, clipped at 0 against rounding.
            let h = (var.clone().recip() - *lambda).clamp_min(0.0);
            let std = (h * curvature_weight + *lambda).recip().sqrt();
            stds.push(matrix_draw(shape, std.unsqueeze::<3>()));
        }
        Ok(self
            .net
            .clone()
            .map_layers(&mut LaplacePrior { stds, at: 0 })?)
    }
}

/// Sets layer `at`'s priors to Gaussians at its weights with the standard deviations `stds`.
struct LaplacePrior {
    stds: Vec<LayerDraw>,
    at: usize,
}

impl crate::layers::LayerMapper for LaplacePrior {
    fn map<const DW: usize>(
        &mut self,
        _: LayerInfo,
        mut params: AnyLayerParams<DW>,
    ) -> Result<AnyLayerParams<DW>, ConfigError> {
        let std = &self.stds[self.at];
        self.at += 1;
        let mean = params.mean_draw();
        let shape = params.shape();
        params.weight_prior = WeightPrior::gaussian(
            mean.weight.reshape(shape),
            std.weight.clone().reshape(shape),
        );
        if let (Some(b), Some(sb), Some(_)) = (mean.bias, &std.bias, &params.bias_prior) {
            let n = b.dims()[1];
            params.bias_prior = Some(WeightPrior::gaussian(
                b.reshape([n]),
                sb.clone().reshape([n]),
            ));
        }
        Ok(params)
    }
}

impl<B: Body, L: Likelihood> NetworkPosterior for NetworkLaplace<B, L> {
    type Body = B;
    type Likelihood = L;

    fn network(&self) -> &Bnn<B, L> {
        &self.net
    }

    fn joint_draws(&self, n: usize) -> Vec<LayerDraw> {
        crate::device::uses_generator();
        self.shapes
            .iter()
            .zip(&self.means)
            .zip(&self.posteriors)
            .map(|((shape, mean), post)| {
                let [din, dout] = mean.dims();
                let z = Tensor::<3>::random(
                    [n, din, dout],
                    Distribution::Normal(0.0, 1.0),
                    &mean.device(),
                );
                let delta = match post {
                    LayerPosterior::Diagonal { var } => z * var.clone().sqrt().unsqueeze::<3>(),
                    LayerPosterior::Kfac { u, v, inv } => {
                        let scaled = z * inv.clone().sqrt().unsqueeze::<3>();
                        u.clone()
                            .unsqueeze::<3>()
                            .matmul(scaled)
                            .matmul(v.clone().transpose().unsqueeze::<3>())
                    }
                };
                matrix_draw(shape, mean.clone().unsqueeze::<3>() + delta)
            })
            .collect()
    }

    /// `E f = f(x; θ*)`, `Var f_k = Σ_l J_lk Σ_l J_lkᵀ` from one recording pass per output.
    fn linearised(&self, input: B::Input) -> Result<Moments<2>, Unsupported> {
        let tracked = self.net.clone().train();
        let draws: Vec<LayerDraw> = self
            .net
            .mean_draw()
            .into_iter()
            .map(|d| LayerDraw {
                weight: d.weight.detach().train(),
                bias: d.bias.map(|b| b.detach().train()),
            })
            .collect();
        let device = self.means[0].device();
        let x = input.to(&tracked.devices()[0]);
        let mean = tracked
            .forward(x.clone(), &mut Pass::fixed(&draws))
            .detach()
            .squeeze_dim::<2>(0);
        let [b, k] = mean.dims();
        let eye = Tensor::<2>::eye(k, &mean.device());
        let mut vars = Vec::with_capacity(k);
        for j in 0..k {
            let r = eye.clone().slice([j..j + 1, 0..k]).expand([b, k]);
            let per = per_example_pass(&tracked, &self.shapes, &draws, x.clone(), r);
            let mut var = Tensor::<1>::zeros([b], &device);
            for (p, post) in per.iter().zip(&self.posteriors) {
                let v = match post {
                    LayerPosterior::Diagonal { var } => p.weighted_square(var, None),
                    LayerPosterior::Kfac { u, v, inv } => p.weighted_square(inv, Some((u, v))),
                };
                var = var + v.to_device(&device);
            }
            vars.push(var.unsqueeze_dim::<2>(1));
        }
        Ok(Moments::new(
            mean.to_device(&device),
            Tensor::cat(vars, 1).clamp_min(0.0),
        ))
    }
}

super::network_predict!(NetworkLaplace);
