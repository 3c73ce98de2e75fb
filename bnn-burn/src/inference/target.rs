//! Unnormalised log densities over a flat parameter vector, the models of reference inference:
//! the eight-schools model (Rubin 1981, non-centred), correlated Gaussians and Neal's funnel.

use crate::host::to_vec;
use crate::special::{HALF_LN_2PI, softplus};
use burn::tensor::{Device, Tensor};

/// `ln p̃(θ)`, an unnormalised log density over `θ ∈ ℝᴰ` (a posterior up to its evidence).
///
/// Variational fits evaluate it on batches of draws through burn ops, so that autodiff gives
/// the reparameterisation gradient; samplers call [`Self::value_and_grad`] at one point.
pub trait LogDensity {
    /// The dimension `D` of `θ`.
    fn dim(&self) -> usize;

    /// `ln p̃(θ_s)` for each row of `theta [S, D]`, `[S]`; differentiable in `theta`, on its
    /// device.
    fn log_density(&self, theta: Tensor<2>) -> Tensor<1>;

    /// `ln p̃(θ)` at one point, with its gradient written to `grad` (length `D`).
    ///
    /// The default takes one autodiff pass of [`Self::log_density`] on [`Self::device`] (in
    /// `f32`); targets with a closed-form gradient override it (in `f64`).
    fn value_and_grad(&self, theta: &[f64], grad: &mut [f64]) -> f64 {
        autodiff_value_and_grad(self, theta, grad)
    }

    /// The device [`Self::value_and_grad`]'s default evaluates on.
    fn device(&self) -> Device {
        crate::device()
    }
}

/// `ln p̃(θ)` and its gradient by one autodiff pass of `target`'s tensor density on its
/// [`LogDensity::device`] (in `f32`): [`LogDensity::value_and_grad`]'s default, and the check of
/// the closed forms that override it.
pub fn autodiff_value_and_grad<T: LogDensity + ?Sized>(
    target: &T,
    theta: &[f64],
    grad: &mut [f64],
) -> f64 {
    let device = target.device().autodiff();
    let floats: Vec<f32> = theta.iter().map(|&v| v as f32).collect();
    let x = Tensor::<1>::from_floats(floats.as_slice(), &device)
        .reshape([1, theta.len()])
        .require_grad();
    let lp = target.log_density(x.clone());
    let grads = lp.clone().sum().backward();
    let g = to_vec(x.grad(&grads).expect("θ requires its gradient"));
    grad.copy_from_slice(&g);
    to_vec(lp)[0]
}

/// Column `j` of `theta [S, D]`, as `[S, 1]`.
fn column(theta: &Tensor<2>, j: usize) -> Tensor<2> {
    let s = theta.dims()[0];
    theta.clone().slice([0..s, j..j + 1])
}

/// The eight-schools model (Rubin 1981; Brack 2022 Table 5.1): `μ ~ N(0, 5²)`,
/// `τ ~ HalfCauchy(5)`, `θ_j ~ N(μ, τ²)`, `y_j ~ N(θ_j, σ_j²)`, over 10 unconstrained
/// parameters, the log-Jacobian `ln τ` included. Non-centred (the default): `θ = (μ, ln τ,
/// θ̃₁..₈)` with `θ_j = μ + τ θ̃_j`, `θ̃_j ~ N(0, 1)`; centred: `θ = (μ, ln τ, θ₁..₈)`, whose
/// funnel between `ln τ` and the `θ_j` is hard for Gaussian families. Both have the same
/// evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct EightSchools {
    /// Whether `θ` holds the schools' effects `θ_j` (centred) or `θ̃_j` (non-centred).
    pub centred: bool,
    /// The schools' estimated effects `y_j`.
    pub y: [f64; 8],
    /// Their standard errors `σ_j`.
    pub sigma: [f64; 8],
    /// The prior standard deviation of `μ` (5).
    pub mu_scale: f64,
    /// The half-Cauchy scale of `τ` (5).
    pub tau_scale: f64,
}

impl Default for EightSchools {
    fn default() -> Self {
        Self {
            centred: false,
            y: [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0],
            sigma: [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0],
            mu_scale: 5.0,
            tau_scale: 5.0,
        }
    }
}

impl EightSchools {
    /// The centred model.
    pub fn centred() -> Self {
        Self {
            centred: true,
            ..Self::default()
        }
    }

    /// The parameters' names, in `θ`'s order.
    pub const NAMES: [&'static str; 10] = [
        "mu", "log_tau", "theta_1", "theta_2", "theta_3", "theta_4", "theta_5", "theta_6",
        "theta_7", "theta_8",
    ];

    /// The log evidence `ln p(y)`: `μ` and `θ̃` integrated in closed form
    /// (`y_j | μ, τ ~ N(μ, σ_j² + τ²)`), `ln τ` by the trapezoid rule on a fine grid.
    pub fn log_evidence(&self) -> f64 {
        let (lo, hi, n) = (-20.0f64, 12.0f64, 64_001);
        let h = (hi - lo) / (n - 1) as f64;
        let terms: Vec<f64> = (0..n)
            .map(|i| {
                let v = lo + h * i as f64;
                let w: f64 = if i == 0 || i == n - 1 { 0.5 } else { 1.0 };
                self.log_likelihood_given_tau(v.exp()) + self.log_prior_log_tau(v) + w.ln()
            })
            .collect();
        let max = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        max + terms.iter().map(|t| (t - max).exp()).sum::<f64>().ln() + h.ln()
    }

    /// `ln p(y | τ)` with `μ` integrated out.
    fn log_likelihood_given_tau(&self, tau: f64) -> f64 {
        let var: Vec<f64> = self.sigma.iter().map(|s| s * s + tau * tau).collect();
        let prior_var = self.mu_scale * self.mu_scale;
        let precision = 1.0 / prior_var + var.iter().map(|v| 1.0 / v).sum::<f64>();
        let weighted = self.y.iter().zip(&var).map(|(y, v)| y / v).sum::<f64>();
        let mean = weighted / precision;
        let quad = self.y.iter().zip(&var).map(|(y, v)| y * y / v).sum::<f64>();
        -var.iter().map(|v| v.ln()).sum::<f64>() * 0.5
            - 8.0 * HALF_LN_2PI
            - 0.5 * prior_var.ln()
            - 0.5 * precision.ln()
            - 0.5 * (quad - mean * mean * precision)
    }

    /// `ln p(ln τ = v)`: the half-Cauchy density of `τ = eᵛ` times the Jacobian `eᵛ`.
    fn log_prior_log_tau(&self, v: f64) -> f64 {
        let s = self.tau_scale;
        let z = 2.0 * (v - s.ln());
        // ln(1 + e^z), stable.
        let log1p_exp = if z > 30.0 { z } else { z.exp().ln_1p() };
        (2.0 / std::f64::consts::PI).ln() - s.ln() - log1p_exp + v
    }
}

impl LogDensity for EightSchools {
    fn dim(&self) -> usize {
        10
    }

    fn log_density(&self, theta: Tensor<2>) -> Tensor<1> {
        let [s, d] = theta.dims();
        assert_eq!(d, 10, "eight schools: θ has 10 entries, got {d}");
        let device = theta.device();
        let mu = column(&theta, 0);
        let v = column(&theta, 1);
        let tilde = theta.slice([0..s, 2..10]);
        let f = |xs: &[f64]| {
            Tensor::<1>::from_floats(
                xs.iter().map(|&x| x as f32).collect::<Vec<_>>().as_slice(),
                &device,
            )
            .reshape([1, 8])
        };
        let (y, sigma) = (f(&self.y), f(&self.sigma));
        let log_norm_y: f64 = self.sigma.iter().map(|s| s.ln() + HALF_LN_2PI).sum();
        let (log_prior_tilde, resid) = if self.centred {
            // (θ − μ)·e^{−v}, not (θ − μ)/τ: the quotient's backward squares τ, which
            // underflows in the funnel's neck (v ≲ −44 in f32) and turns the gradient to NaN.
            let z = (tilde.clone() - mu.clone()) * v.clone().neg().exp();
            let lp = z.square().sum_dim(1) * -0.5 - v.clone() * 8.0 - 8.0 * HALF_LN_2PI;
            (lp, (y - tilde) / sigma)
        } else {
            let lp = tilde.clone().square().sum_dim(1) * -0.5 - 8.0 * HALF_LN_2PI;
            (lp, (y - (mu.clone() + v.clone().exp() * tilde)) / sigma)
        };
        let ms = self.mu_scale;
        let log_prior_mu = mu.square() * (-0.5 / (ms * ms)) - (ms.ln() + HALF_LN_2PI);
        let ts = self.tau_scale;
        let log_prior_v = (softplus((v.clone() - ts.ln()) * 2.0).neg() + v)
            + ((2.0 / std::f64::consts::PI).ln() - ts.ln());
        let log_lik = resid.square().sum_dim(1) * -0.5 - log_norm_y;
        (log_prior_mu + log_prior_v + log_prior_tilde + log_lik).reshape([s])
    }

    fn value_and_grad(&self, theta: &[f64], grad: &mut [f64]) -> f64 {
        let (mu, v) = (theta[0], theta[1]);
        let tau = v.exp();
        let (ms, ts) = (self.mu_scale, self.tau_scale);
        let sigmoid = 1.0 / (1.0 + (-2.0 * (v - ts.ln())).exp());
        let mut lp = -0.5 * mu * mu / (ms * ms) - ms.ln() - HALF_LN_2PI + self.log_prior_log_tau(v);
        grad[0] = -mu / (ms * ms);
        grad[1] = 1.0 - 2.0 * sigmoid;
        for j in 0..8 {
            let t = theta[2 + j];
            let s2 = self.sigma[j] * self.sigma[j];
            lp -= self.sigma[j].ln() + 2.0 * HALF_LN_2PI;
            if self.centred {
                let (z, r) = ((t - mu) / tau, self.y[j] - t);
                lp += -0.5 * z * z - v - 0.5 * r * r / s2;
                grad[0] += z / tau;
                grad[1] += z * z - 1.0;
                grad[2 + j] = -z / tau + r / s2;
            } else {
                let r = self.y[j] - mu - tau * t;
                lp += -0.5 * t * t - 0.5 * r * r / s2;
                grad[0] += r / s2;
                grad[1] += r * tau * t / s2;
                grad[2 + j] = -t + r * tau / s2;
            }
        }
        lp
    }
}

/// A Gaussian `N(m, Σ)` as a target: the oracle of samplers and of full-rank VI.
#[derive(Debug, Clone, PartialEq)]
pub struct GaussianTarget {
    /// The mean `m`.
    pub mean: Vec<f64>,
    /// The covariance `Σ`, row-major `D × D`, symmetric positive definite.
    pub covariance: Vec<f64>,
    /// `Σ⁻¹`, row-major.
    precision: Vec<f64>,
    /// `−½ ln det(2πΣ)`.
    log_norm: f64,
}

impl GaussianTarget {
    /// `N(mean, covariance)`.
    ///
    /// # Errors
    /// When `covariance` is not `D × D` or not positive definite.
    pub fn new(mean: Vec<f64>, covariance: Vec<f64>) -> Result<Self, crate::ConfigError> {
        let d = mean.len();
        let bad = |expected| crate::ConfigError {
            config: "GaussianTarget",
            field: "covariance",
            value: format!("{} entries for D = {d}", covariance.len()),
            expected,
        };
        if covariance.len() != d * d {
            return Err(bad("a row-major D × D matrix"));
        }
        let mut l = covariance.clone();
        crate::linalg::dense::cholesky(&mut l, d)
            .map_err(|_| bad("a symmetric positive-definite matrix"))?;
        let log_det = crate::linalg::dense::cholesky_log_det(&l, d);
        Ok(Self {
            precision: crate::linalg::dense::inverse_from_cholesky(&l, d),
            log_norm: -0.5 * log_det - d as f64 * HALF_LN_2PI,
            mean,
            covariance,
        })
    }
}

impl LogDensity for GaussianTarget {
    fn dim(&self) -> usize {
        self.mean.len()
    }

    fn log_density(&self, theta: Tensor<2>) -> Tensor<1> {
        let [s, d] = theta.dims();
        let device = theta.device();
        let m = crate::host::matrix(&self.mean, d, &device);
        let p = crate::host::matrix(&self.precision, d, &device);
        let r = theta - m;
        let quad = (r.clone().matmul(p) * r).sum_dim(1).reshape([s]);
        quad * -0.5 + self.log_norm
    }

    fn value_and_grad(&self, theta: &[f64], grad: &mut [f64]) -> f64 {
        let d = self.mean.len();
        let r: Vec<f64> = theta.iter().zip(&self.mean).map(|(t, m)| t - m).collect();
        let mut quad = 0.0;
        for i in 0..d {
            let pr: f64 = (0..d).map(|j| self.precision[i * d + j] * r[j]).sum();
            grad[i] = -pr;
            quad += r[i] * pr;
        }
        -0.5 * quad + self.log_norm
    }
}

/// Neal's funnel (Neal 2003): `v ~ N(0, s²)`, `x_i | v ~ N(0, eᵛ)`, `θ = (v, x₁..x_{D−1})`.
/// Its margin of `v` is `N(0, s²)`: the test of samplers on varying curvature. At Neal's
/// `s = 3` the neck (`v ≪ 0`) defeats a fixed step size; divergences then say so.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Funnel {
    /// `D` (≥ 2).
    pub dim: usize,
    /// The standard deviation `s` of `v` (Neal's 3).
    pub scale: f64,
}

impl Funnel {
    /// Neal's funnel over `dim` entries (`s = 3`).
    pub fn neal(dim: usize) -> Self {
        Self { dim, scale: 3.0 }
    }
}

impl LogDensity for Funnel {
    fn dim(&self) -> usize {
        self.dim
    }

    fn log_density(&self, theta: Tensor<2>) -> Tensor<1> {
        let [s, d] = theta.dims();
        let v = column(&theta, 0);
        let x = theta.slice([0..s, 1..d]);
        let k = (d - 1) as f64;
        let lp_v = v.clone().square() * (-0.5 / (self.scale * self.scale))
            - (self.scale.ln() + HALF_LN_2PI);
        let lp_x = (x.square() * v.clone().neg().exp()).sum_dim(1) * -0.5
            - v * (0.5 * k)
            - k * HALF_LN_2PI;
        (lp_v + lp_x).reshape([s])
    }

    fn value_and_grad(&self, theta: &[f64], grad: &mut [f64]) -> f64 {
        let v = theta[0];
        let k = (self.dim - 1) as f64;
        let e = (-v).exp();
        let s2 = self.scale * self.scale;
        let sq: f64 = theta[1..].iter().map(|x| x * x).sum();
        grad[0] = -v / s2 + 0.5 * sq * e - 0.5 * k;
        for (g, x) in grad[1..].iter_mut().zip(&theta[1..]) {
            *g = -x * e;
        }
        -0.5 * v * v / s2
            - self.scale.ln()
            - HALF_LN_2PI
            - 0.5 * sq * e
            - 0.5 * k * v
            - k * HALF_LN_2PI
    }
}
