//! Radial posterior (Farquhar, Osborne & Gal 2020; Farquhar 2022 §4.2, eq. 4.6):
//! `w = μ + σ ⊙ (ε/‖ε‖)·r`, `ε ~ N(0, I_n)`, `r ~ N(0, 1)`, one direction and one radius per
//! tensor and draw (a layer's weight and bias are separate blocks).
//!
//! The marginal variance of one weight is `σ²/n`, so radial σ values are not comparable with
//! mean-field ones. The entropy is `Σ ln σ` minus the exact constant of eq. 4.8
//! ([`radial_entropy_constant`]); the prior cross-entropy is closed form for a Gaussian prior.

use super::scale::location_scale_family;
use super::scale::{LocScalePath, ScaleNoise};
use super::{
    FastPath, LocationScale, PosteriorDist, PosteriorFamily, ScaleInit, TensorSpec, Unsupported,
    WeightPosterior, numel, row,
};
use crate::error::ConfigError;
use crate::special::{EULER_GAMMA, HALF_LN_2PI, lgamma_scalar};
use burn::tensor::{Distribution, Tensor};

/// `ln S_n`, `S_n = 2π^{n/2}/Γ(n/2)` the surface area of the unit sphere in `Rⁿ`.
fn ln_unit_sphere_area(n: f64) -> f64 {
    std::f64::consts::LN_2 + 0.5 * n * std::f64::consts::PI.ln() - lgamma_scalar(0.5 * n)
}

/// `E_q[ln q(w)] + Σ ln σ` for one radial block of dimension `n`:
/// `ln 2 − ½ ln 2π − ½ − ln S_n + (n−1)(γ + ln 2)/2` (the density of `v = u·|r|` is
/// `2φ(‖v‖)/(S_n ‖v‖^{n−1})`).
pub fn radial_entropy_constant(n: usize) -> f64 {
    let n = n as f64;
    std::f64::consts::LN_2 - HALF_LN_2PI - 0.5 - ln_unit_sphere_area(n)
        + (n - 1.0) * (EULER_GAMMA + std::f64::consts::LN_2) / 2.0
}

location_scale_family!(
    "radial",
    RadialNoise,
    /// Configuration of the radial family.
    RadialConfig,
    RadialPosterior,
    RadialDist
);

/// Radial draws on the fused kernels: `w_s = μ + σ⊙ε_s·r_s/‖ε_s‖`, `r_s ~ N(0, 1)` from
/// sub-stream `u32::MAX − s` of the draw's key; `Var[w] = σ²/n`.
#[derive(Debug, Clone, Copy)]
pub struct RadialNoise;

impl ScaleNoise for RadialNoise {
    const FACTORISED: bool = false;

    fn var_scale(n: usize) -> f32 {
        1.0 / n as f32
    }

    fn entropy_constant(n: usize) -> f64 {
        -radial_entropy_constant(n)
    }

    fn draw_scales<const D: usize>(like: &Tensor<D>, key: u64, draws: usize) -> Vec<f32> {
        let norms = crate::fused::squared_norms(like, key, draws);
        norms
            .iter()
            .enumerate()
            .map(|(s, squared)| {
                let mut r = [0f32; 1];
                crate::fused::elementwise::normals(key, u32::MAX - s as u32, &mut r);
                r[0] / squared.sqrt()
            })
            .collect()
    }
}

impl<const D: usize> RadialDist<D> {
    fn n(&self) -> usize {
        numel(self.mu.dims())
    }

    /// `σ²/n`: a radial draw spreads `σ²` over the `n` coordinates of the block.
    fn marginal(sigma: &Tensor<D>) -> Tensor<D> {
        sigma.clone().square() / numel(sigma.dims()) as f64
    }

    /// `σ ⊙ (ε/‖ε‖)·r`, one direction and radius per draw, `[n, numel]`.
    fn spread(&self, n: usize) -> Tensor<2> {
        let device = self.mu.device();
        crate::device::uses_generator();
        let eps = Tensor::<2>::random([n, self.n()], Distribution::Normal(0.0, 1.0), &device);
        let norm = eps.clone().square().sum_dim(1).sqrt();
        let r = Tensor::<2>::random([n, 1], Distribution::Normal(0.0, 1.0), &device);
        row(self.sigma.clone()) * eps * (r / norm)
    }

    /// `ln q(w) = ln 2 − ½ ln 2π − ‖v‖²/2 − ln S_n − (n−1) ln‖v‖ − Σ ln σ`, `v = (w − μ)/σ`.
    ///
    /// The density is unbounded at `w = μ`, and an f32 draw whose radius is below the f32
    /// resolution of `μ/σ` rounds to `μ` in every coordinate (for `|μ| ≈ σ`, a radius ≲ 10⁻⁷:
    /// about one draw in 10⁷): `‖v‖²` is floored at the
    /// smallest normal f32, so `ln q` and its gradient stay finite on every draw (there, about
    /// `44 (n − 1)` nats and a zero gradient in `‖v‖`).
    fn log_density(&self, w: Tensor<2>) -> Tensor<1> {
        let s = w.dims()[0];
        let n = self.n() as f64;
        let v = (w - row(self.mu.clone())) / row(self.sigma.clone());
        let norm_sq = v
            .square()
            .sum_dim(1)
            .reshape([s])
            .clamp_min(f32::MIN_POSITIVE as f64);
        let base = std::f64::consts::LN_2 - HALF_LN_2PI - ln_unit_sphere_area(n);
        norm_sq.clone() * (-0.5) - norm_sq.log() * ((n - 1.0) / 2.0) + base
            - self.sigma.clone().log().sum()
    }

    /// `Σ ln σ` minus the exact constant of eq. 4.8.
    fn differential_entropy(&self) -> Tensor<1> {
        self.sigma.clone().log().sum() - radial_entropy_constant(self.n())
    }
}
