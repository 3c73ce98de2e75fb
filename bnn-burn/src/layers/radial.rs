//! Radial BNN layers (Farquhar, Osborne & Gal 2020; Farquhar 2022 §4.2, eq. 4.6):
//! `w = μ + σ ⊙ (ε/‖ε‖)·r`, `ε ~ N(0, I_D)`, `r ~ N(0, 1)`, one direction and radius per
//! layer tensor (the weight and the bias are separate blocks) and per Monte Carlo sample.
//!
//! The marginal variance of one weight is `σ²/D`, so radial `σ` values are not comparable with
//! mean-field ones. The KL splits into the entropy term (eq. 4.8, exact constant below) and the
//! prior cross-entropy (closed form for a Gaussian prior, Monte Carlo otherwise).

use super::ops::{
    Conv2dGeometry, check_channels, check_last_dim, conv2d_per_sample, linear_per_sample,
};
use super::param::{Posterior, PosteriorParam};
use crate::error::{Check, ConfigError};
use crate::prior::{KlDivergence, Prior};
use crate::special::{EULER_GAMMA, HALF_LN_2PI, lgamma_scalar};
use burn::config::Config;
use burn::module::Module;
use burn::tensor::module::{conv2d, linear};
use burn::tensor::{Device, Tensor};

/// `ln S_D`, `S_D = 2π^{D/2}/Γ(D/2)` the surface area of the unit sphere in `R^D`.
fn ln_unit_sphere_area(d: f64) -> f64 {
    std::f64::consts::LN_2 + 0.5 * d * std::f64::consts::PI.ln() - lgamma_scalar(0.5 * d)
}

/// `E_q[ln q(w)] + Σ ln σ` for one radial block of dimension `D`:
/// `ln 2 − ½ ln 2π − ½ − ln S_D + (D−1)(γ + ln 2)/2`, with `S_D = 2π^{D/2}/Γ(D/2)` the area of
/// the unit sphere (the density of `v = u·|r|` is `2φ(‖v‖)/(S_D ‖v‖^{D−1})`).
pub fn radial_entropy_constant(d: usize) -> f64 {
    let d = d as f64;
    let ln_sphere = ln_unit_sphere_area(d);
    std::f64::consts::LN_2 - HALF_LN_2PI - 0.5 - ln_sphere
        + (d - 1.0) * (EULER_GAMMA + std::f64::consts::LN_2) / 2.0
}

/// `ln q(w_s)` of a radial block at stacked draws `w [S, ...]` (the density in Cartesian
/// coordinates, `v = (w − μ)/σ`): `ln 2 − ½ ln 2π − ‖v‖²/2 − ln S_D − (D−1) ln‖v‖ − Σ ln σ`.
/// Returns `[S]`.
pub fn radial_log_density<const D: usize, const E: usize>(
    w: Tensor<E>,
    mu: Tensor<D>,
    sigma: Tensor<D>,
) -> Tensor<1> {
    let s = w.dims()[0];
    let d = mu.dims().iter().product::<usize>() as f64;
    let v = (w - mu.unsqueeze::<E>()) / sigma.clone().unsqueeze::<E>();
    let norm_sq = v.reshape([s as i64, -1]).square().sum_dim(1).reshape([s]);
    let ln_sphere = ln_unit_sphere_area(d);
    let base = std::f64::consts::LN_2 - HALF_LN_2PI - ln_sphere;
    norm_sq.clone() * (-0.5) - norm_sq.log() * ((d - 1.0) / 2.0) + base - sigma.log().sum()
}

/// `KL(q ‖ p)` of one radial block: exact entropy term plus the prior cross-entropy.
fn radial_kl<const D: usize, const E: usize>(
    param: &Posterior<D>,
    prior: &Prior,
    mc_samples: usize,
) -> Tensor<1> {
    let d = param.numel();
    let sigma = param.sigma.clone();
    let neg_entropy = sigma.clone().log().sum().neg() + radial_entropy_constant(d);
    let cross_entropy = match *prior {
        // −E_q ln p = Σ ½ ln 2πσ₀² + ((μ−μ₀)² + σ²/D)/(2σ₀²): E[(w−μ)²] = σ²/D under q.
        Prior::Gaussian { mean, std } => {
            let quad = (param.mu.clone() - mean).square() + sigma.square() / d as f64;
            (quad / (2.0 * std * std)).sum() + d as f64 * (std.ln() + HALF_LN_2PI)
        }
        Prior::ScaleMixture { .. } => {
            let samples = mc_samples.max(1);
            let w = param.sample_radial_n::<E>(samples);
            prior.log_prob(w).sum().neg() / samples as f64
        }
    };
    (neg_entropy + cross_entropy).reshape([1])
}

/// Configuration of a [`RadialLinear`] layer.
#[derive(Config, Debug)]
pub struct RadialLinearConfig {
    /// Input width.
    pub d_input: usize,
    /// Output width.
    pub d_output: usize,
    /// Whether the layer has a (stochastic) bias.
    #[config(default = true)]
    pub bias: bool,
    /// Prior over weights and biases.
    #[config(default = "Prior::Gaussian { mean: 0.0, std: 1.0 }")]
    pub prior: Prior,
    /// Mean of the initial `ρ` (Farquhar uses −4 to −6).
    #[config(default = -5.0)]
    pub rho_init: f64,
    /// Standard deviation of the jitter on the initial `ρ` (the reference code uses 0.5).
    #[config(default = 0.1)]
    pub rho_init_std: f64,
    /// Monte Carlo samples for the cross-entropy when the prior has no closed form.
    #[config(default = 1)]
    pub kl_samples: usize,
}

/// A linear layer with a radial posterior over its weight matrix and bias.
#[derive(Module, Debug)]
pub struct RadialLinear {
    /// Radial posterior over the `[d_input, d_output]` weight (one block).
    pub weight: PosteriorParam<2>,
    /// Radial posterior over the bias (a separate block).
    pub bias: Option<PosteriorParam<1>>,
    /// Prior over weights and bias.
    #[module(skip)]
    pub prior: Prior,
    /// Monte Carlo samples for a cross-entropy without closed form.
    #[module(skip)]
    pub kl_samples: usize,
}

fn validate_common(
    check: &Check,
    prior: &Prior,
    rho_init: f64,
    kl_samples: usize,
) -> Result<(), ConfigError> {
    check.finite("rho_init", rho_init)?;
    check.at_least_one("kl_samples", kl_samples)?;
    prior.validate(check.0)
}

impl RadialLinearConfig {
    /// Checks every field; the error names the field and the allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = Check("RadialLinearConfig");
        check.at_least_one("d_input", self.d_input)?;
        check.at_least_one("d_output", self.d_output)?;
        validate_common(&check, &self.prior, self.rho_init, self.kl_samples)
    }

    /// A layer with He-initialised means `μ ~ N(0, 2/d_input)`.
    pub fn init(&self, device: &Device) -> Result<RadialLinear, ConfigError> {
        self.validate()?;
        let he = (2.0 / self.d_input as f64).sqrt();
        Ok(RadialLinear {
            weight: PosteriorParam::init(
                [self.d_input, self.d_output],
                he,
                self.rho_init,
                self.rho_init_std,
                device,
            ),
            bias: self.bias.then(|| {
                PosteriorParam::init(
                    [self.d_output],
                    0.0,
                    self.rho_init,
                    self.rho_init_std,
                    device,
                )
            }),
            prior: self.prior,
            kl_samples: self.kl_samples,
        })
    }
}

impl RadialLinear {
    /// Forward pass with one radial draw shared by all rows: `[..., d_input]` → `[..., d_output]`.
    ///
    /// # Panics
    /// If the last axis of `input` is not `d_input` (both shapes are named).
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        check_last_dim("RadialLinear", &input, self.weight.dims()[0]);
        let w = self.weight.sample_radial::<3>();
        let b = self.bias.as_ref().map(|b| b.sample_radial::<2>());
        linear(input, w, b)
    }

    /// `S` samples in one call: `[S, B, d_input]` → `[S, B, d_output]`, one radial draw per sample.
    pub fn forward_samples(&self, input: Tensor<3>) -> Tensor<3> {
        let (w, b) = self.posteriors();
        Self::forward_samples_with(input, &w, b.as_ref())
    }

    /// [`Self::forward_samples`] and [`KlDivergence::kl`] from one evaluation of `σ = softplus(ρ)`.
    pub fn forward_samples_kl(&self, input: Tensor<3>) -> (Tensor<3>, Tensor<1>) {
        let (w, b) = self.posteriors();
        let out = Self::forward_samples_with(input, &w, b.as_ref());
        (out, self.kl_with(&w, b.as_ref()))
    }

    fn posteriors(&self) -> (Posterior<2>, Option<Posterior<1>>) {
        (
            self.weight.posterior(),
            self.bias.as_ref().map(|b| b.posterior()),
        )
    }

    fn forward_samples_with(
        input: Tensor<3>,
        w: &Posterior<2>,
        b: Option<&Posterior<1>>,
    ) -> Tensor<3> {
        check_last_dim("RadialLinear", &input, w.dims()[0]);
        let s = input.dims()[0];
        linear_per_sample(
            input,
            w.sample_radial_n::<3>(s),
            b.map(|b| b.sample_radial_n::<2>(s)),
        )
    }

    fn kl_with(&self, w: &Posterior<2>, b: Option<&Posterior<1>>) -> Tensor<1> {
        let kl = radial_kl::<2, 3>(w, &self.prior, self.kl_samples);
        match b {
            Some(b) => kl + radial_kl::<1, 2>(b, &self.prior, self.kl_samples),
            None => kl,
        }
    }
}

impl KlDivergence for RadialLinear {
    fn kl(&self) -> Tensor<1> {
        let (w, b) = self.posteriors();
        self.kl_with(&w, b.as_ref())
    }
}

/// Configuration of a [`RadialConv2d`] layer.
#[derive(Config, Debug)]
pub struct RadialConv2dConfig {
    /// `[in_channels, out_channels]`.
    pub channels: [usize; 2],
    /// Kernel `[height, width]`.
    pub kernel_size: [usize; 2],
    /// Stride, padding and dilation.
    #[config(default = "Conv2dGeometry::new()")]
    pub geometry: Conv2dGeometry,
    /// Whether the layer has a (stochastic) bias.
    #[config(default = true)]
    pub bias: bool,
    /// Prior over kernel and bias.
    #[config(default = "Prior::Gaussian { mean: 0.0, std: 1.0 }")]
    pub prior: Prior,
    /// Mean of the initial `ρ`.
    #[config(default = -5.0)]
    pub rho_init: f64,
    /// Standard deviation of the jitter on the initial `ρ`.
    #[config(default = 0.1)]
    pub rho_init_std: f64,
    /// Monte Carlo samples for the cross-entropy when the prior has no closed form.
    #[config(default = 1)]
    pub kl_samples: usize,
}

/// A 2-D convolution with a radial posterior over its kernel (one block) and bias.
#[derive(Module, Debug)]
pub struct RadialConv2d {
    /// Radial posterior over the `[C_out, C_in, kH, kW]` kernel.
    pub weight: PosteriorParam<4>,
    /// Radial posterior over the bias.
    pub bias: Option<PosteriorParam<1>>,
    /// Stride, padding, dilation.
    #[module(skip)]
    pub geometry: Conv2dGeometry,
    /// Prior over kernel and bias.
    #[module(skip)]
    pub prior: Prior,
    /// Monte Carlo samples for a cross-entropy without closed form.
    #[module(skip)]
    pub kl_samples: usize,
}

impl RadialConv2dConfig {
    /// Checks every field; the error names the field and the allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = Check("RadialConv2dConfig");
        check.at_least_one("channels[0]", self.channels[0])?;
        check.at_least_one("channels[1]", self.channels[1])?;
        check.at_least_one("kernel_size", self.kernel_size[0].min(self.kernel_size[1]))?;
        self.geometry.validate("RadialConv2dConfig")?;
        validate_common(&check, &self.prior, self.rho_init, self.kl_samples)
    }

    /// A layer with He-initialised means `μ ~ N(0, 2/fan_in)`.
    pub fn init(&self, device: &Device) -> Result<RadialConv2d, ConfigError> {
        self.validate()?;
        let [cin, cout] = self.channels;
        let [kh, kw] = self.kernel_size;
        let he = (2.0 / (cin * kh * kw) as f64).sqrt();
        Ok(RadialConv2d {
            weight: PosteriorParam::init(
                [cout, cin, kh, kw],
                he,
                self.rho_init,
                self.rho_init_std,
                device,
            ),
            bias: self.bias.then(|| {
                PosteriorParam::init([cout], 0.0, self.rho_init, self.rho_init_std, device)
            }),
            geometry: self.geometry.clone(),
            prior: self.prior,
            kl_samples: self.kl_samples,
        })
    }
}

impl RadialConv2d {
    /// Forward pass with one radial kernel draw: `[B, C_in, H, W]` → `[B, C_out, H', W']`.
    ///
    /// # Panics
    /// If the input does not have `C_in` channels (both shapes are named).
    pub fn forward(&self, input: Tensor<4>) -> Tensor<4> {
        check_channels("RadialConv2d", &input.dims(), self.weight.dims()[1], 1);
        let w = self.weight.sample_radial::<5>();
        let b = self.bias.as_ref().map(|b| b.sample_radial::<2>());
        conv2d(input, w, b, self.geometry.options())
    }

    /// `S` samples in one call: `[S, B, C_in, H, W]` → `[S, B, C_out, H', W']`.
    pub fn forward_samples(&self, input: Tensor<5>) -> Tensor<5> {
        check_channels("RadialConv2d", &input.dims(), self.weight.dims()[1], 2);
        let s = input.dims()[0];
        let w = self.weight.sample_radial_n::<5>(s);
        let b = self.bias.as_ref().map(|b| b.sample_radial_n::<2>(s));
        conv2d_per_sample(input, w, b, &self.geometry.options())
    }
}

impl KlDivergence for RadialConv2d {
    fn kl(&self) -> Tensor<1> {
        let kl = radial_kl::<4, 5>(&self.weight.posterior(), &self.prior, self.kl_samples);
        match &self.bias {
            Some(b) => kl + radial_kl::<1, 2>(&b.posterior(), &self.prior, self.kl_samples),
            None => kl,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{seeded, test_device, to_vec};

    /// ‖(w − μ)/σ‖ = |r| with r ~ N(0,1): a half-normal, mean √(2/π), variance 1 − 2/π; and
    /// every coordinate of (w − μ)/σ has variance 1/D.
    #[test]
    fn normalised_deviation_has_the_distribution_of_abs_r() {
        let device = test_device();
        let _guard = seeded(&device, 21);
        let l = RadialLinearConfig::new(4, 5)
            .with_rho_init(-1.0)
            .init(&device)
            .unwrap();
        let n = 20_000;
        let w = l.weight.sample_radial_n::<3>(n);
        let v = (w - l.weight.mu.val().unsqueeze::<3>()) / l.weight.sigma().unsqueeze::<3>();
        let norms = to_vec(v.clone().reshape([n, 20]).square().sum_dim(1).sqrt());
        let mean = norms.iter().sum::<f64>() / n as f64;
        let var = norms.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n as f64 - 1.0);
        let (m, s2) = (
            (2.0 / std::f64::consts::PI).sqrt(),
            1.0 - 2.0 / std::f64::consts::PI,
        );
        // Half-normal: se of the mean sqrt(s2/n); variance of x² is 2, so se(var) ≈ sqrt(2/n) bound.
        assert!(
            (mean - m).abs() < 5.0 * (s2 / n as f64).sqrt(),
            "mean |r| {mean} vs {m}"
        );
        assert!(
            (var - s2).abs() < 5.0 * (2.0 / n as f64).sqrt(),
            "var |r| {var} vs {s2}"
        );
        // Per-coordinate variance 1/D = 0.05. A coordinate is u·r with u the coordinate of a
        // uniform unit vector (E[u⁴] = 3/(D(D+2))) and r ~ N(0,1) independent (E[r⁴] = 3), so
        // E[v⁴] = 9/(D(D+2)) and the standard error of the mean of v² is √((E[v⁴] − 1/D²)/n).
        let coord = to_vec(v.reshape([n, 20]).square().mean_dim(0));
        let se = ((9.0 / (20.0 * 22.0) - 0.05f64.powi(2)) / n as f64).sqrt();
        for c in coord {
            assert!(
                (c - 0.05).abs() < 5.0 * se,
                "coordinate variance {c} vs 1/D = 0.05"
            );
        }
    }

    /// The closed-form Gaussian cross-entropy matches −(1/S) Σ ln p(w_s) over radial draws, and
    /// the entropy constant matches a Monte Carlo average of the radial log-density.
    #[test]
    fn kl_terms_match_monte_carlo() {
        let device = test_device();
        let _guard = seeded(&device, 22);
        let prior = Prior::Gaussian {
            mean: 0.1,
            std: 0.7,
        };
        let l = RadialLinearConfig::new(3, 4)
            .with_rho_init(-0.5)
            .with_bias(false)
            .with_prior(prior)
            .init(&device)
            .unwrap();
        let n = 20_000;
        let w = l.weight.sample_radial_n::<3>(n);
        let log_p = to_vec(prior.log_prob(w.clone()).reshape([n, 12]).sum_dim(1));
        let log_q = to_vec(radial_log_density(w, l.weight.mu.val(), l.weight.sigma()));
        let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
        let se = |x: &[f64]| {
            let m = mean(x);
            (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() as f64 - 1.0)).sqrt()
                / (x.len() as f64).sqrt()
        };
        let kl_closed = to_vec(l.kl())[0];
        let neg_entropy = -to_vec(l.weight.sigma().log().sum())[0] + radial_entropy_constant(12);
        let cross_closed = kl_closed - neg_entropy;
        let cross_mc = -mean(&log_p);
        assert!(
            (cross_mc - cross_closed).abs() < 5.0 * se(&log_p),
            "cross-entropy MC {cross_mc} vs closed form {cross_closed}"
        );
        assert!(
            (mean(&log_q) - neg_entropy).abs() < 5.0 * se(&log_q),
            "E ln q: MC {} vs closed form {neg_entropy}",
            mean(&log_q)
        );
        // With D = 1 the radial posterior is the Gaussian: the constant is −½ ln 2πe.
        // (lgamma_scalar truncates its series at ~1e-11.)
        assert!((radial_entropy_constant(1) + HALF_LN_2PI + 0.5).abs() < 1e-10);
    }

    #[test]
    fn mixture_prior_kl_is_finite_and_differentiable() {
        let device = test_device().autodiff();
        let l = RadialConv2dConfig::new([2, 3], [3, 3])
            .with_prior(Prior::ScaleMixture {
                pi: 0.5,
                sigma1: 1.0,
                sigma2: 0.01,
            })
            .with_kl_samples(4)
            .init(&device)
            .unwrap();
        let x = Tensor::<4>::ones([2, 2, 5, 5], &device);
        let loss = l.forward(x).mean() + l.kl();
        let grads = loss.backward();
        let g = to_vec(l.weight.rho.grad(&grads).expect("rho gradient"));
        assert!(g.iter().all(|v| v.is_finite()) && g.iter().any(|v| *v != 0.0));
    }

    #[test]
    fn samples_differ_across_the_sample_axis_but_not_within_a_draw() {
        let device = test_device();
        let l = RadialConv2dConfig::new([1, 2], [2, 2])
            .with_rho_init(0.0)
            .init(&device)
            .unwrap();
        let x = Tensor::<4>::ones([2, 1, 3, 3], &device);
        let y = to_vec(l.forward(x.clone()));
        assert_eq!(y[..8], y[8..], "both examples share one kernel draw");
        let ys = to_vec(l.forward_samples(x.unsqueeze::<5>().repeat_dim(0, 2)));
        assert_ne!(
            ys[..16],
            ys[16..],
            "two samples must have different kernels"
        );
    }

    #[test]
    #[should_panic(expected = "expects 3 input channels")]
    fn wrong_channel_count_panics_with_both_shapes() {
        let device = test_device();
        let l = RadialConv2dConfig::new([3, 2], [2, 2])
            .init(&device)
            .unwrap();
        let _ = l.forward(Tensor::<4>::zeros([1, 2, 4, 4], &device));
    }
}
