//! Last-layer Laplace (MacKay 1992; Daxberger et al. 2021; Brack 2022 eqs. 3.8–3.9): a point
//! network's head weights get `N(θ*, (H + λI)⁻¹)`, `H = Σ_n J_nᵀ Λ_n J_n` the exact generalised
//! Gauss–Newton of the log-likelihood in the head's parameters (the features held fixed), `λ`
//! the prior precision, by marginal likelihood or given. The predictive is Monte Carlo over head
//! draws or linearised: `f ~ N(f(x; θ*), J Σ Jᵀ)` (the GLM predictive, probit for classes).

use super::NetworkPosterior;
use crate::batch::Batch;
use crate::dist::Moments;
use crate::error::ConfigError;
use crate::layers::LayerDraw;
use crate::likelihood::{Categorical, GaussianLikelihood, Likelihood};
use crate::linalg::dense;
use crate::nets::{Bnn, Body};
use crate::posterior::Unsupported;
use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Distribution, Int, Tensor};

/// How the prior precision `λ` of the head's weights is set.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum PriorPrecision {
    /// A given `λ > 0`.
    Fixed {
        /// `λ`.
        value: f64,
    },
    /// The `λ` that maximises the Laplace marginal likelihood
    /// `ln p(D) ≈ ln p(D | θ*) − ½λ‖θ*‖² + (P/2) ln λ − ½ ln det(H + λI)`, over `λ ∈ [1e-6, 1e6]`
    /// (from the eigenvalues of `H`, so every `λ` costs `O(P)`).
    MarginalLikelihood,
    /// One `λ_l` per layer, each maximising its layer's terms of the marginal likelihood: with
    /// a block-diagonal `H` (KFAC, diagonal) the evidence separates over layers. A last-layer
    /// Laplace has one layer, so this is [`Self::MarginalLikelihood`] there.
    MarginalLikelihoodPerLayer,
}

/// Configuration of [`LastLayerLaplace::fit`].
#[derive(Config, Debug, PartialEq)]
pub struct LaplaceConfig {
    /// The prior precision.
    #[config(default = "PriorPrecision::MarginalLikelihood")]
    pub prior_precision: PriorPrecision,
    /// Rows per pass when the curvature is accumulated.
    #[config(default = 512)]
    pub batch_size: usize,
}

/// Why a Laplace approximation could not be fitted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LaplaceError {
    /// A configuration value is out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The likelihood or the network has no closed-form curvature here.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// The data do not fit the network.
    #[error(transparent)]
    Mismatch(#[from] crate::error::DataMismatch),
    /// The curvature of a layer holds NaN or an infinity (its outputs or gradients overflowed).
    #[error(
        "the curvature of layer {layer} (0-based) holds NaN or an infinity: check the network's \
         outputs on the data"
    )]
    NonFiniteCurvature {
        /// The layer.
        layer: usize,
    },
    /// `H + λI` has no positive factor even with `H`'s rounding clipped (a non-finite
    /// eigenvalue).
    #[error(
        "the posterior precision H + λI is not positive definite at eigenvalue {pivot}, even \
         with the curvature's negative rounding clipped; check the noise scale and the \
         network's outputs on the data"
    )]
    NotPositiveDefinite {
        /// The failing pivot or eigenvalue.
        pivot: usize,
    },
}

/// The curvature of `−ln p(y | f)` in the outputs `f` that Laplace needs: its GGN
/// `Λ_n = diag(a_n) − u_n u_nᵀ` per example (exact for these likelihoods), as that form, as
/// factors `Λ = Σ_j r_j r_jᵀ` (the backward passes of the whole-network GGN), or as one draw `r`
/// with `E[r rᵀ] = Λ` (the Monte Carlo Fisher).
pub trait OutputCurvature: Likelihood {
    /// `(a [B, k], u [B, k] or None)` at outputs `f [B, k]`.
    ///
    /// # Errors
    /// When the likelihood has no closed form here.
    fn output_curvature(&self, f: Tensor<2>)
    -> Result<(Tensor<2>, Option<Tensor<2>>), Unsupported>;

    /// `k` factors `r_j [B, k]` with `Λ_n = Σ_j r_nj r_njᵀ`.
    ///
    /// # Errors
    /// When the likelihood has no closed form here.
    fn curvature_factors(&self, f: Tensor<2>) -> Result<Vec<Tensor<2>>, Unsupported>;

    /// One draw `r [B, k]` with `E[r rᵀ] = Λ`: the gradient of `−ln p(ŷ | f)` at a target drawn
    /// from the model.
    ///
    /// # Errors
    /// When the likelihood has no closed form here.
    fn curvature_sample(&self, f: Tensor<2>) -> Result<Tensor<2>, Unsupported>;
}

fn homoscedastic(l: &GaussianLikelihood) -> Result<Tensor<2>, Unsupported> {
    match l.has_variance_head() {
        true => Err(Unsupported {
            family: "GaussianLikelihood with a variance head",
            what: "Laplace is implemented for homoscedastic Gaussian and categorical likelihoods",
        }),
        false => Ok((l.log_std.val().detach() * (-2.0)).exp().unsqueeze::<2>()),
    }
}

impl OutputCurvature for GaussianLikelihood {
    /// `Λ = diag(1/σ²)`.
    fn output_curvature(
        &self,
        f: Tensor<2>,
    ) -> Result<(Tensor<2>, Option<Tensor<2>>), Unsupported> {
        Ok((homoscedastic(self)?.expand(f.dims()), None))
    }

    /// `r_j = e_j/σ_j`.
    fn curvature_factors(&self, f: Tensor<2>) -> Result<Vec<Tensor<2>>, Unsupported> {
        let std = homoscedastic(self)?.sqrt();
        let [b, k] = f.dims();
        let eye = Tensor::<2>::eye(k, &f.device());
        Ok((0..k)
            .map(|j| (eye.clone().slice([j..j + 1, 0..k]) * std.clone()).expand([b, k]))
            .collect())
    }

    /// `r = ε/σ`, `ε ~ N(0, I)`.
    fn curvature_sample(&self, f: Tensor<2>) -> Result<Tensor<2>, Unsupported> {
        let std = homoscedastic(self)?.sqrt();
        crate::device::uses_generator();
        Ok(Tensor::random(f.dims(), Distribution::Normal(0.0, 1.0), &f.device()) * std)
    }
}

impl OutputCurvature for Categorical {
    /// `Λ = diag(p) − p pᵀ`, `p = softmax(f)`.
    fn output_curvature(
        &self,
        f: Tensor<2>,
    ) -> Result<(Tensor<2>, Option<Tensor<2>>), Unsupported> {
        let p = burn::tensor::activation::softmax(f, 1);
        Ok((p.clone(), Some(p)))
    }

    /// `r_j = √p_j (e_j − p)`: `Σ_j p_j (e_j − p)(e_j − p)ᵀ = diag(p) − p pᵀ`.
    fn curvature_factors(&self, f: Tensor<2>) -> Result<Vec<Tensor<2>>, Unsupported> {
        let p = burn::tensor::activation::softmax(f, 1).detach();
        let [b, k] = p.dims();
        let eye = Tensor::<2>::eye(k, &p.device());
        Ok((0..k)
            .map(|j| {
                let pj = p.clone().slice([0..b, j..j + 1]);
                (eye.clone().slice([j..j + 1, 0..k]).expand([b, k]) - p.clone()) * pj.sqrt()
            })
            .collect())
    }

    /// `r = p − onehot(ŷ)`, `ŷ ~ Cat(p)`.
    fn curvature_sample(&self, f: Tensor<2>) -> Result<Tensor<2>, Unsupported> {
        let p = burn::tensor::activation::softmax(f, 1).detach();
        let [b, k] = p.dims();
        crate::device::uses_generator();
        let c = p.clone().cumsum(1);
        let total = c.clone().slice([0..b, k - 1..k]);
        let u = Tensor::<2>::random([b, 1], Distribution::Default, &p.device()) * total;
        let below = (c.clone() - p.clone()).lower(u.clone()).float();
        let onehot = c.greater_equal(u).float() * below;
        Ok(p - onehot)
    }
}

/// Refuses a batch size of 0 and a fixed prior precision that is not finite and positive.
fn check_config(batch_size: usize, prior: PriorPrecision) -> Result<(), LaplaceError> {
    if batch_size == 0 {
        return Err(ConfigError {
            config: "LaplaceConfig",
            field: "batch_size",
            value: "0".into(),
            expected: "at least 1",
        }
        .into());
    }
    if let PriorPrecision::Fixed { value } = prior
        && !(value > 0.0 && value.is_finite())
    {
        return Err(ConfigError {
            config: "LaplaceConfig",
            field: "prior_precision",
            value: value.to_string(),
            expected: "a finite λ > 0",
        }
        .into());
    }
    Ok(())
}

/// The checks before a Laplace fit: the configuration, a point network, data that fit it.
pub(super) fn check_fit<B: Body, L: Likelihood>(
    net: &Bnn<B, L>,
    input: &B::Input,
    target: &L::Target,
    batch_size: usize,
    prior: PriorPrecision,
) -> Result<(), LaplaceError> {
    check_config(batch_size, prior)?;
    if !net.is_point() {
        return Err(Unsupported {
            family: "Laplace",
            what: "fits a point network (train it as MAP, WeightConfig with the point \
                   posterior)",
        }
        .into());
    }
    use crate::step::Model;
    net.check_data(input, target)?;
    Ok(())
}

/// A last-layer Laplace posterior over a point network's head.
#[derive(Debug, Clone)]
pub struct LastLayerLaplace<B: Body, L: Likelihood> {
    net: Bnn<B, L>,
    /// `θ*` in `(feature, output)` order, the bias as the last feature, `[1, P]`.
    theta: Tensor<2>,
    /// `L⁻¹` with `L⁻ᵀ L⁻¹ = (H + λI)⁻¹` (the Cholesky factor's inverse), `[P, P]`: a draw is
    /// `θ* + z L⁻¹`.
    inverse_factor: Tensor<2>,
    /// The covariance blocks of each output, `Σ_kk`, `[k, F + 1, F + 1]`.
    blocks: Tensor<3>,
    prior_precision: f64,
    log_marginal_likelihood: f64,
    bias: bool,
}

/// What the curvature pass gathered, on the host.
struct Curvature {
    h: Vec<f64>,
    theta: Vec<f64>,
    log_likelihood: f64,
}

impl<B: Body, L: OutputCurvature> LastLayerLaplace<B, L> {
    /// Fits the posterior of `net`'s head (every layer a point estimate) on the training data.
    ///
    /// # Errors
    /// A network with stochastic layers, data that do not fit it, a likelihood without a
    /// closed-form curvature, or a non-finite curvature.
    pub fn fit(
        net: Bnn<B, L>,
        input: B::Input,
        target: L::Target,
        config: &LaplaceConfig,
    ) -> Result<Self, LaplaceError> {
        check_fit(
            &net,
            &input,
            &target,
            config.batch_size,
            config.prior_precision,
        )?;
        let curvature = Self::curvature(&net, input, target, config.batch_size)?;
        let p = curvature.theta.len();
        let norm2 = dense::dot(&curvature.theta, &curvature.theta);
        let (lambda, eigen) = match config.prior_precision {
            PriorPrecision::Fixed { value } => (value, None),
            PriorPrecision::MarginalLikelihood | PriorPrecision::MarginalLikelihoodPerLayer => {
                let eig = dense::symmetric_eigenvalues(curvature.h.clone(), p);
                (best_prior_precision(&eig, norm2, p), Some(eig))
            }
        };
        let (inverse, log_det) = posterior_factor(&curvature.h, p, lambda, eigen.as_deref())?;
        let log_marginal_likelihood =
            curvature.log_likelihood + evidence_terms(lambda, norm2, p, log_det);
        let device = net.devices()[0].clone();
        let inverse_factor = crate::host::matrix(&inverse, p, &device);
        let [_, k] = net.head.shape();
        let features = p / k;
        // Σ = L⁻ᵀ L⁻¹; the block of output j: columns (f, j) of L⁻¹, then their Gram matrix.
        let per_output = inverse_factor
            .clone()
            .reshape([p, features, k])
            .permute([2, 0, 1]);
        let blocks = per_output.clone().transpose().matmul(per_output);
        Ok(Self {
            theta: crate::host::matrix(&curvature.theta, p, &device),
            bias: net.head.params.bias.is_some(),
            net,
            inverse_factor,
            blocks,
            prior_precision: lambda,
            log_marginal_likelihood,
        })
    }

    /// `H`, `θ*` and `Σ_n ln p(y_n | f_n)` from batches of `batch_size` rows.
    fn curvature(
        net: &Bnn<B, L>,
        input: B::Input,
        target: L::Target,
        batch_size: usize,
    ) -> Result<Curvature, LaplaceError> {
        let device = net.devices()[0].clone();
        let n = input.len();
        let [f_in, k] = net.head.shape();
        let bias = net.head.params.bias.is_some();
        let features = f_in + usize::from(bias);
        let p = features * k;
        // Each batch's sum in f32 on the device, the running total in f64 on the host: with a
        // tiny noise scale `H` is many orders above `λ`, and f32 totals would swamp it.
        let mut total = vec![0.0f64; p * p];
        let mut log_likelihood = 0.0;
        for start in (0..n).step_by(batch_size) {
            let end = (start + batch_size).min(n);
            let rows = Tensor::<1, Int>::arange(start as i64..end as i64, &device);
            let x = input.rows(rows.clone());
            let y = target.rows(rows);
            let features = net.features(x, 1).detach();
            let phi = augmented(features.clone().squeeze_dim::<2>(0), bias);
            let b = end - start;
            let out = net
                .head
                .run(features, &mut crate::layers::Pass::predict(1))
                .detach();
            log_likelihood +=
                crate::host::to_vec(net.likelihood.log_likelihood(out.clone(), y).sum())[0];
            let f = out.squeeze_dim::<2>(0).detach();
            let (a, u) = net.likelihood.output_curvature(f)?;
            // Σ_n φφᵀ ⊗ diag(a_n): for output j, Φᵀ diag(a_·j) Φ, placed at (f₁ j, f₂ j).
            let weighted = phi.clone().unsqueeze_dim::<3>(0).repeat_dim(0, k)
                * a.clone().transpose().unsqueeze_dim::<3>(2);
            let mut h = Tensor::<2>::zeros([p, p], &device);
            let diag_blocks = weighted
                .transpose()
                .matmul(phi.clone().unsqueeze_dim::<3>(0));
            // [k, F, F] → [F, k, F, k] with zeros off the output diagonal.
            let eye = Tensor::<2>::eye(k, &device);
            let blocks = diag_blocks.permute([1, 0, 2]).unsqueeze_dim::<4>(3)
                * eye.clone().reshape([1, k, 1, k]);
            h = h + blocks.reshape([p, p]);
            if let Some(u) = u {
                // − Σ_n (φ_n ⊗ u_n)(φ_n ⊗ u_n)ᵀ.
                let outer = (phi.unsqueeze_dim::<3>(2) * u.unsqueeze_dim::<3>(1)).reshape([b, p]);
                h = h - outer.clone().transpose().matmul(outer);
            }
            for (t, v) in total.iter_mut().zip(crate::host::to_vec(h)) {
                *t += v;
            }
        }
        let theta = head_vector(net);
        if !total.iter().all(|v| v.is_finite()) {
            return Err(LaplaceError::NonFiniteCurvature { layer: 0 });
        }
        let h = total;
        // Symmetrise (the f32 products are symmetric up to rounding).
        let mut hs = vec![0.0; p * p];
        for i in 0..p {
            for j in 0..p {
                hs[i * p + j] = 0.5 * (h[i * p + j] + h[j * p + i]);
            }
        }
        Ok(Curvature {
            h: hs,
            theta,
            log_likelihood,
        })
    }
}

impl<B: Body, L: Likelihood> LastLayerLaplace<B, L> {
    /// The prior precision `λ` in use.
    pub fn prior_precision(&self) -> f64 {
        self.prior_precision
    }

    /// The Laplace log marginal likelihood at `λ` (nats, over the training set).
    pub fn log_marginal_likelihood(&self) -> f64 {
        self.log_marginal_likelihood
    }

    /// The posterior covariance of the head's parameters `[P, P]`, `(feature, output)` order,
    /// the bias as the last feature.
    pub fn covariance(&self) -> Tensor<2> {
        self.inverse_factor
            .clone()
            .transpose()
            .matmul(self.inverse_factor.clone())
    }
}

/// `[φ, 1]` when the head has a bias, `[B, F (+1)]`.
fn augmented(phi: Tensor<2>, bias: bool) -> Tensor<2> {
    match bias {
        true => {
            let ones = Tensor::ones([phi.dims()[0], 1], &phi.device());
            Tensor::cat(vec![phi, ones], 1)
        }
        false => phi,
    }
}

/// The head's MAP parameters in `(feature, output)` order, the bias last.
fn head_vector<B: Body, L: Likelihood>(net: &Bnn<B, L>) -> Vec<f64> {
    let draw = net.head.params.mean_draw();
    let mut theta = crate::host::to_vec(draw.weight);
    if let Some(b) = draw.bias {
        theta.extend(crate::host::to_vec(b));
    }
    theta
}

/// `(L⁻¹, ln det(H + λI))` with `L⁻ᵀ L⁻¹ = (H + λI)⁻¹`. By Cholesky; when rounding has left
/// `H` indefinite (a curvature far above `λ`), from `H = V diag(e) Vᵀ` with `e` clipped at 0:
/// `L⁻¹ = diag((e + λ)^{-1/2}) Vᵀ`. `eig`: `H`'s eigenvalues when already known.
pub(super) fn posterior_factor(
    h: &[f64],
    p: usize,
    lambda: f64,
    eig: Option<&[f64]>,
) -> Result<(Vec<f64>, f64), LaplaceError> {
    let mut factor = h.to_vec();
    for i in 0..p {
        factor[i * p + i] += lambda;
    }
    if dense::cholesky(&mut factor, p).is_ok() {
        let log_det = match eig {
            Some(eig) => eigen_log_det(eig, lambda),
            None => dense::cholesky_log_det(&factor, p),
        };
        return Ok((dense::lower_inverse(&factor, p), log_det));
    }
    let (e, v) = dense::symmetric_eigen(h.to_vec(), p);
    let mut inverse = vec![0.0; p * p];
    for j in 0..p {
        let precision = e[j].max(0.0) + lambda;
        if !(precision > 0.0 && precision.is_finite()) {
            return Err(LaplaceError::NotPositiveDefinite { pivot: j });
        }
        let scale = precision.sqrt().recip();
        for i in 0..p {
            inverse[j * p + i] = scale * v[i * p + j];
        }
    }
    Ok((inverse, eigen_log_det(&e, lambda)))
}

/// The `λ` in `[1e-6, 1e6]` that maximises `(P/2) ln λ − ½λ‖θ‖² − ½ Σ ln(e_i + λ)`: a grid over
/// `ln λ`, then golden-section search around its best point.
pub(super) fn best_prior_precision(eig: &[f64], norm2: f64, p: usize) -> f64 {
    let objective = |log_lambda: f64| {
        let lambda = log_lambda.exp();
        evidence_terms(lambda, norm2, p, eigen_log_det(eig, lambda))
    };
    let (lo, hi) = (1e-6f64.ln(), 1e6f64.ln());
    let steps = 120;
    let grid: Vec<f64> = (0..=steps)
        .map(|i| lo + (hi - lo) * i as f64 / steps as f64)
        .collect();
    let best = (0..=steps)
        .max_by(|&a, &b| objective(grid[a]).total_cmp(&objective(grid[b])))
        .expect("a grid");
    let (a, b) = (grid[best.saturating_sub(1)], grid[(best + 1).min(steps)]);
    super::golden_min(|x| -objective(x), a, b, 80).exp()
}

/// `ln det(H + λI) = Σ ln(e_i + λ)` from the eigenvalues of `H` (negative rounding clipped).
pub(super) fn eigen_log_det(eig: &[f64], lambda: f64) -> f64 {
    eig.iter().map(|e| (e.max(0.0) + lambda).ln()).sum()
}

/// The Laplace log evidence beside `ln p(D | θ*)`: `−½λ‖θ*‖² + (P/2) ln λ − ½ ln det(H + λI)`.
pub(super) fn evidence_terms(lambda: f64, norm2: f64, p: usize, log_det: f64) -> f64 {
    -0.5 * lambda * norm2 + 0.5 * p as f64 * lambda.ln() - 0.5 * log_det
}

impl<B: Body, L: Likelihood> NetworkPosterior for LastLayerLaplace<B, L> {
    type Body = B;
    type Likelihood = L;

    fn network(&self) -> &Bnn<B, L> {
        &self.net
    }

    fn joint_draws(&self, n: usize) -> Vec<LayerDraw> {
        crate::device::uses_generator();
        let device = self.theta.device();
        let p = self.theta.dims()[1];
        let [f_in, k] = self.net.head.shape();
        let z = Tensor::<2>::random([n, p], Distribution::Normal(0.0, 1.0), &device);
        let theta = self.theta.clone() + z.matmul(self.inverse_factor.clone());
        let mut draws: Vec<LayerDraw> = self
            .net
            .mean_draw()
            .into_iter()
            .map(|d| LayerDraw {
                weight: d.weight.repeat_dim(0, n),
                bias: d.bias.map(|b| b.repeat_dim(0, n)),
            })
            .collect();
        let head = draws.last_mut().expect("a head");
        head.weight = theta.clone().slice([0..n, 0..f_in * k]);
        head.bias = self.bias.then(|| theta.slice([0..n, f_in * k..p]));
        draws
    }

    /// `E f = f(x; θ*)`, `Var f_j = φ̃ᵀ Σ_jj φ̃`.
    fn linearised(&self, input: B::Input) -> Result<Moments<2>, Unsupported> {
        let features = self.net.features(input, 1);
        let mean = self
            .net
            .head
            .run(features.clone(), &mut crate::layers::Pass::predict(1))
            .squeeze_dim::<2>(0);
        let phi = augmented(features.squeeze_dim::<2>(0), self.bias);
        let b = phi.dims()[0];
        let k = self.blocks.dims()[0];
        let phis = phi.unsqueeze_dim::<3>(0).repeat_dim(0, k);
        let var = (phis.clone().matmul(self.blocks.clone()) * phis)
            .sum_dim(2)
            .reshape([k, b])
            .transpose();
        Ok(Moments::new(mean, var.clamp_min(0.0)))
    }
}

super::network_predict!(LastLayerLaplace);
