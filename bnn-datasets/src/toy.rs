//! Seeded toy regression and classification sets that need no files.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// A 1-D regression sample: inputs and targets of equal length.
#[derive(Debug, Clone, PartialEq)]
pub struct Regression1d {
    /// Inputs.
    pub x: Vec<f64>,
    /// Targets.
    pub y: Vec<f64>,
}

/// A standard normal draw by Box–Muller from two uniforms.
pub fn standard_normal(rng: &mut StdRng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Noise scale of the heteroscedastic toy at `x`: `3 |cos(x/2)|`.
pub fn heteroscedastic_noise_std(x: f64) -> f64 {
    3.0 * (x / 2.0).cos().abs()
}

/// Mean of the heteroscedastic toy at `x`: `7 sin x`.
pub fn heteroscedastic_mean(x: f64) -> f64 {
    7.0 * x.sin()
}

/// The heteroscedastic toy of Depeweg (2019) eq. 4.1, chapter 5 version:
/// `y = 7 sin x + 3|cos(x/2)| ε`, `ε ~ N(0, 1)`, `x ~ U[−4, 4]`.
pub fn heteroscedastic(n: usize, seed: u64) -> Regression1d {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut x = Vec::with_capacity(n);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let xi = -4.0 + 8.0 * rng.random::<f64>();
        let eps = standard_normal(&mut rng);
        x.push(xi);
        y.push(heteroscedastic_mean(xi) + heteroscedastic_noise_std(xi) * eps);
    }
    Regression1d { x, y }
}

/// Average log-density of `data` under the true heteroscedastic model (the oracle test LL,
/// ≈ −1.57 for large samples of x ~ U[−4, 4]).
pub fn heteroscedastic_oracle_log_likelihood(data: &Regression1d) -> f64 {
    let total: f64 = data
        .x
        .iter()
        .zip(&data.y)
        .map(|(&x, &y)| {
            let s = heteroscedastic_noise_std(x);
            let z = (y - heteroscedastic_mean(x)) / s;
            -0.5 * z * z - s.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln()
        })
        .sum();
    total / data.x.len() as f64
}

/// The cubic toy of Hernández-Lobato & Adams (2015): `y = x³ + ε`, `ε ~ N(0, 3²)`,
/// `x ~ U[−4, 4]` (the paper uses `n = 20`).
pub fn cubic(n: usize, seed: u64) -> Regression1d {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut x = Vec::with_capacity(n);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let xi = -4.0 + 8.0 * rng.random::<f64>();
        x.push(xi);
        y.push(xi.powi(3) + CUBIC_NOISE_STD * standard_normal(&mut rng));
    }
    Regression1d { x, y }
}

/// Noise standard deviation of [`cubic`].
pub const CUBIC_NOISE_STD: f64 = 3.0;

/// A 2-D classification sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification2d {
    /// Points.
    pub x: Vec<[f64; 2]>,
    /// Labels in `0..n_classes`.
    pub label: Vec<usize>,
}

/// Two interleaved half circles: class 0 on the unit upper half circle around (0, 0), class 1 on
/// the lower half circle of radius 1 around (1, 0.5); every point gets isotropic Gaussian noise
/// of std `noise`. Classes alternate, so they are balanced.
pub fn two_moons(n: usize, noise: f64, seed: u64) -> Classification2d {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut x = Vec::with_capacity(n);
    let mut label = Vec::with_capacity(n);
    for i in 0..n {
        let t = std::f64::consts::PI * rng.random::<f64>();
        let class = i % 2;
        let (px, py) = if class == 0 {
            (t.cos(), t.sin())
        } else {
            (1.0 - t.cos(), 0.5 - t.sin())
        };
        x.push([
            px + noise * standard_normal(&mut rng),
            py + noise * standard_normal(&mut rng),
        ]);
        label.push(class);
    }
    Classification2d { x, label }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heteroscedastic_noise_has_the_stated_scale() {
        let d = heteroscedastic(200_000, 3);
        assert!(d.x.iter().all(|x| (-4.0..4.0).contains(x)));
        // Near x = 0 the noise std is 3; near x = ±π it is ~0. Check binned residual stds.
        for (centre, expect) in [(0.0, 3.0), (3.0, 3.0 * (1.5f64).cos().abs())] {
            let r: Vec<f64> =
                d.x.iter()
                    .zip(&d.y)
                    .filter(|(x, _)| (**x - centre).abs() < 0.05)
                    .map(|(x, y)| (y - heteroscedastic_mean(*x)) / heteroscedastic_noise_std(*x))
                    .collect();
            let var = r.iter().map(|v| v * v).sum::<f64>() / r.len() as f64;
            let se = (2.0 / r.len() as f64).sqrt();
            assert!(
                (var - 1.0).abs() < 5.0 * se,
                "standardised residual var {var} at {centre} ({expect})"
            );
        }
        let ll = heteroscedastic_oracle_log_likelihood(&d);
        assert!((ll + 1.57).abs() < 0.02, "oracle LL {ll}");
    }

    #[test]
    fn generators_are_seeded() {
        assert_eq!(heteroscedastic(10, 1), heteroscedastic(10, 1));
        assert_ne!(heteroscedastic(10, 1), heteroscedastic(10, 2));
    }

    #[test]
    fn cubic_residuals_have_variance_nine() {
        let d = cubic(100_000, 5);
        assert!(d.x.iter().all(|x| (-4.0..4.0).contains(x)));
        let n = d.x.len() as f64;
        let var =
            d.x.iter()
                .zip(&d.y)
                .map(|(x, y)| (y - x.powi(3)).powi(2))
                .sum::<f64>()
                / n;
        // Var of the sample variance of N(0, 9) is 2·81/n.
        let se = (2.0 * 81.0 / n).sqrt();
        assert!((var - 9.0).abs() < 5.0 * se, "residual variance {var}");
        assert_eq!(cubic(20, 0).x.len(), 20);
    }

    #[test]
    fn noiseless_moons_lie_on_their_circles_and_classes_balance() {
        let d = two_moons(1000, 0.0, 4);
        let centres = [[0.0, 0.0], [1.0, 0.5]];
        for (p, &c) in d.x.iter().zip(&d.label) {
            let r = ((p[0] - centres[c][0]).powi(2) + (p[1] - centres[c][1]).powi(2)).sqrt();
            assert!(
                (r - 1.0).abs() < 1e-12,
                "class {c} point {p:?} at radius {r}"
            );
            // Class 0 is the upper half of its circle, class 1 the lower half of its own.
            let above = p[1] >= centres[c][1] - 1e-12;
            assert_eq!(above, c == 0 || (p[1] - centres[c][1]).abs() < 1e-12);
        }
        assert_eq!(d.label.iter().filter(|&&c| c == 1).count(), 500);
        let noisy = two_moons(1000, 0.1, 4);
        assert_ne!(noisy, d);
        assert_eq!(two_moons(50, 0.1, 9), two_moons(50, 0.1, 9));
    }
}
