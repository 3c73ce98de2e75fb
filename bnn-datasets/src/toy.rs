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

/// An exponential draw with rate `lambda` (mean `1/lambda`).
pub fn exponential(rng: &mut StdRng, lambda: f64) -> f64 {
    let u: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
    -u.ln() / lambda
}

/// Component standard deviations of the chapter-6 input mixture of [`heteroscedastic_mixture`]
/// (the thesis's "σ1 = 2/5, σ2 = 0.9, σ3 = 2/5", read as standard deviations).
pub const HETEROSCEDASTIC_MIXTURE_STDS: [f64; 3] = [0.4, 0.9, 0.4];
/// Component means of the chapter-6 input mixture.
pub const HETEROSCEDASTIC_MIXTURE_MEANS: [f64; 3] = [-4.0, 0.0, 4.0];

/// The heteroscedastic toy with the non-uniform inputs of Depeweg (2019) §6.1.3: the same
/// `y = 7 sin x + 3|cos(x/2)| ε`, with `x` from an equal mixture of N(−4, 0.4²), N(0, 0.9²),
/// N(4, 0.4²) (the paper uses `n = 750`), so the data density, and with it the epistemic
/// uncertainty, varies along `x`.
pub fn heteroscedastic_mixture(n: usize, seed: u64) -> Regression1d {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut x = Vec::with_capacity(n);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let k = (rng.random::<f64>() * 3.0) as usize;
        let xi = HETEROSCEDASTIC_MIXTURE_MEANS[k.min(2)]
            + HETEROSCEDASTIC_MIXTURE_STDS[k.min(2)] * standard_normal(&mut rng);
        x.push(xi);
        y.push(
            heteroscedastic_mean(xi) + heteroscedastic_noise_std(xi) * standard_normal(&mut rng),
        );
    }
    Regression1d { x, y }
}

/// The two branch means of the bimodal toy at `x`: `(10 cos x, 10 sin x)`.
pub fn bimodal_branches(x: f64) -> (f64, f64) {
    (10.0 * x.cos(), 10.0 * x.sin())
}

fn bimodal_at(x: f64, rng: &mut StdRng) -> f64 {
    let (a, b) = bimodal_branches(x);
    let z = rng.random::<f64>() < 0.5;
    (if z { a } else { b }) + standard_normal(rng)
}

/// The bimodal toy of Depeweg (2019) eq. 4.2, chapter-5 version:
/// `y = z·10 cos x + (1 − z)·10 sin x + ε`, `z ~ Bern(½)`, `ε ~ N(0, 1)`, `x ~ U[−0.5, 2]`
/// (the paper uses `n = 2500`).
pub fn bimodal(n: usize, seed: u64) -> Regression1d {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut x = Vec::with_capacity(n);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let xi = -0.5 + 2.5 * rng.random::<f64>();
        x.push(xi);
        y.push(bimodal_at(xi, &mut rng));
    }
    Regression1d { x, y }
}

/// The bimodal toy with the chapter-6 inputs (Depeweg 2019 §6.1.3, `n = 750`): `x = −0.5 + e`,
/// `e ~ Exp(rate 2)` truncated to `x ≤ 2` by rejection, dense on the left.
pub fn bimodal_exponential(n: usize, seed: u64) -> Regression1d {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut x = Vec::with_capacity(n);
    let mut y = Vec::with_capacity(n);
    while x.len() < n {
        let xi = -0.5 + exponential(&mut rng, 2.0);
        if xi > 2.0 {
            continue;
        }
        x.push(xi);
        y.push(bimodal_at(xi, &mut rng));
    }
    Regression1d { x, y }
}

/// Average log-density of `data` under the true bimodal model: the oracle test LL
/// (≈ −2.02 for `x ~ U[−0.5, 2]`).
pub fn bimodal_oracle_log_likelihood(data: &Regression1d) -> f64 {
    let log_n = |r: f64| -0.5 * r * r - 0.5 * (2.0 * std::f64::consts::PI).ln();
    let total: f64 = data
        .x
        .iter()
        .zip(&data.y)
        .map(|(&x, &y)| {
            let (a, b) = bimodal_branches(x);
            let (la, lb) = (log_n(y - a), log_n(y - b));
            let m = la.max(lb);
            m + (0.5 * ((la - m).exp() + (lb - m).exp())).ln()
        })
        .sum();
    total / data.x.len() as f64
}

/// The 2-D sensitivity toy of Depeweg (2019) §6.3.1: `y = 7 sin x₁ + 3|cos(x₂/2)| ε` with
/// `x₁ = e − 4`, `e ~ Exp(rate 0.5)`, and `x₂ ~ U[−4, 4]` (the paper uses `n = 500`): `x₁`
/// drives the mean (and, through its skewed density, the epistemic uncertainty), `x₂` only the
/// noise.
pub fn sensitivity_2d(n: usize, seed: u64) -> crate::table::RegressionData {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut x = Vec::with_capacity(2 * n);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let x1 = exponential(&mut rng, 0.5) - 4.0;
        let x2 = -4.0 + 8.0 * rng.random::<f64>();
        x.extend([x1, x2]);
        y.push(
            heteroscedastic_mean(x1) + heteroscedastic_noise_std(x2) * standard_normal(&mut rng),
        );
    }
    crate::table::RegressionData {
        x,
        y,
        n_features: 2,
        n_targets: 1,
    }
}

/// Mean of the in-between toy at `x`: `sin(4(x − 4.3))`.
pub fn in_between_mean(x: f64) -> f64 {
    (4.0 * (x - 4.3)).sin()
}

/// Noise standard deviation of [`in_between`].
pub const IN_BETWEEN_NOISE_STD: f64 = 0.05;
/// The two input intervals of [`in_between`]; the gap (−1.4, 1.0) between them has no data.
pub const IN_BETWEEN_CLUSTERS: [(f64, f64); 2] = [(-2.0, -1.4), (1.0, 1.8)];

/// The 1-D set with a gap for in-between uncertainty (Farquhar 2022, Figs 3.6/3.7, after
/// Foong et al. 2019): `y = sin(4(x − 4.3)) + ε`, `ε ~ N(0, 0.05²)`, with `n_per_cluster`
/// points uniform in each of [−2, −1.4] and [1.0, 1.8] (the paper uses 750 each).
pub fn in_between(n_per_cluster: usize, seed: u64) -> Regression1d {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut x = Vec::with_capacity(2 * n_per_cluster);
    let mut y = Vec::with_capacity(2 * n_per_cluster);
    for (lo, hi) in IN_BETWEEN_CLUSTERS {
        for _ in 0..n_per_cluster {
            let xi = lo + (hi - lo) * rng.random::<f64>();
            x.push(xi);
            y.push(in_between_mean(xi) + IN_BETWEEN_NOISE_STD * standard_normal(&mut rng));
        }
    }
    Regression1d { x, y }
}

/// The active-learning toy's pool density (Farquhar 2022 App. C.1, eq. C.1): `(density,
/// interval)` pieces, 0.12 on [−1.2, −0.8] and 0.95 on each of [0, 0.5] and [1, 1.5].
pub const ACTIVE_LINEAR_PIECES: [(f64, (f64, f64)); 3] =
    [(0.12, (-1.2, -0.8)), (0.95, (0.0, 0.5)), (0.95, (1.0, 1.5))];

/// The active-learning toy's target (eq. C.2): `y = max(0, x)·(|x|^{3/2} + sin(20x)/4)`, no
/// noise.
pub fn active_linear_target(x: f64) -> f64 {
    x.max(0.0) * (x.abs().powf(1.5) + (20.0 * x).sin() / 4.0)
}

/// The active-learning toy's pool: `counts[k]` points uniform in piece `k` of
/// [`ACTIVE_LINEAR_PIECES`] (the thesis's N = 101 reads as 5 + 48 + 48: its "96 in each other
/// cluster" does not add up), targets by [`active_linear_target`].
pub fn active_linear_pool(counts: [usize; 3], seed: u64) -> Regression1d {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for (count, (_, (lo, hi))) in counts.into_iter().zip(ACTIVE_LINEAR_PIECES) {
        for _ in 0..count {
            let xi = lo + (hi - lo) * rng.random::<f64>();
            x.push(xi);
            y.push(active_linear_target(xi));
        }
    }
    Regression1d { x, y }
}

/// `n` independent draws from the pool's density (the thesis's risk is estimated on 10 100):
/// each piece with probability its density × width, renormalised (the printed pieces hold
/// 0.998 of the mass).
pub fn active_linear_population(n: usize, seed: u64) -> Regression1d {
    let mut rng = StdRng::seed_from_u64(seed);
    let mass: Vec<f64> = ACTIVE_LINEAR_PIECES
        .iter()
        .map(|(d, (lo, hi))| d * (hi - lo))
        .collect();
    let total: f64 = mass.iter().sum();
    let (mut x, mut y) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let u = rng.random::<f64>() * total;
        let mut k = 0;
        let mut acc = mass[0];
        while u >= acc && k + 1 < mass.len() {
            k += 1;
            acc += mass[k];
        }
        let (lo, hi) = ACTIVE_LINEAR_PIECES[k].1;
        let xi = lo + (hi - lo) * rng.random::<f64>();
        x.push(xi);
        y.push(active_linear_target(xi));
    }
    Regression1d { x, y }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_active_linear_toy_has_its_pieces_counts_and_masses() {
        let pool = active_linear_pool([5, 48, 48], 3);
        assert_eq!(pool.x.len(), 101);
        let inside = |k: usize, x: f64| {
            let (lo, hi) = ACTIVE_LINEAR_PIECES[k].1;
            (lo..=hi).contains(&x)
        };
        for (k, range) in [(0, 0..5), (1, 5..53), (2, 53..101)] {
            assert!(pool.x[range].iter().all(|x| inside(k, *x)), "piece {k}");
        }
        for (x, y) in pool.x.iter().zip(&pool.y) {
            assert_eq!(*y, active_linear_target(*x));
        }
        assert_eq!(active_linear_target(-1.0), 0.0);
        assert!((active_linear_target(1.0) - (1.0 + 20f64.sin() / 4.0)).abs() < 1e-12);
        // The population's pieces in proportion to density × width (0.048 : 0.475 : 0.475).
        let n = 20_000;
        let pop = active_linear_population(n, 4);
        let total = 0.048 + 0.475 + 0.475;
        for (k, mass) in [0.048, 0.475, 0.475].into_iter().enumerate() {
            let p = mass / total;
            let count = pop.x.iter().filter(|x| inside(k, **x)).count() as f64;
            let sd = (n as f64 * p * (1.0 - p)).sqrt();
            assert!(
                (count - n as f64 * p).abs() < 5.0 * sd,
                "piece {k}: {count}"
            );
        }
    }

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
    /// Mean and variance of a sample.
    fn mean_var(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        (
            m,
            v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0),
        )
    }

    #[test]
    fn mixture_inputs_have_the_three_components() {
        let d = heteroscedastic_mixture(60_000, 7);
        for (k, (&mu, &sd)) in HETEROSCEDASTIC_MIXTURE_MEANS
            .iter()
            .zip(&HETEROSCEDASTIC_MIXTURE_STDS)
            .enumerate()
        {
            // Points within 3 std of each mean: 99.73 % of the component, and less than 0.1 %
            // of a neighbour. A normal truncated at ±3σ has std 0.9865σ.
            let xs: Vec<f64> =
                d.x.iter()
                    .copied()
                    .filter(|x| (x - mu).abs() < 3.0 * sd)
                    .collect();
            let frac = xs.len() as f64 / 60_000.0;
            let se = (frac * (1.0 - frac) / 60_000.0).sqrt();
            assert!(
                (frac - 0.9973 / 3.0).abs() < 5.0 * se + 1e-3,
                "component {k}: {frac}"
            );
            let (m, v) = mean_var(&xs);
            assert!(
                (m - mu).abs() < 5.0 * sd / (xs.len() as f64).sqrt() + 2e-3,
                "{k}: mean {m}"
            );
            assert!(
                (v.sqrt() / (0.9865 * sd) - 1.0).abs() < 0.03,
                "{k}: std {}",
                v.sqrt()
            );
        }
        // Residuals keep the heteroscedastic noise law.
        let z: Vec<f64> =
            d.x.iter()
                .zip(&d.y)
                .map(|(x, y)| (y - heteroscedastic_mean(*x)) / heteroscedastic_noise_std(*x))
                .collect();
        let (_, v) = mean_var(&z);
        assert!((v - 1.0).abs() < 5.0 * (2.0 / z.len() as f64).sqrt(), "{v}");
    }

    #[test]
    fn bimodal_points_lie_on_two_equally_likely_branches() {
        let d = bimodal(100_000, 8);
        assert!(d.x.iter().all(|x| (-0.5..2.0).contains(x)));
        // Where the branches are more than 8 apart, each point is nearer its own branch.
        let mut near_cos = 0usize;
        let mut resid = Vec::new();
        for (&x, &y) in d.x.iter().zip(&d.y) {
            let (a, b) = bimodal_branches(x);
            if (a - b).abs() > 8.0 {
                let (ra, rb) = (y - a, y - b);
                if ra.abs() < rb.abs() {
                    near_cos += 1;
                    resid.push(ra);
                } else {
                    resid.push(rb);
                }
            }
        }
        let n = resid.len() as f64;
        let frac = near_cos as f64 / n;
        assert!(
            (frac - 0.5).abs() < 5.0 * (0.25 / n).sqrt(),
            "cos-branch share {frac}"
        );
        let (m, v) = mean_var(&resid);
        assert!(m.abs() < 5.0 / n.sqrt(), "residual mean {m}");
        // A residual past 4 would be assigned to the wrong branch: the truncation is < 1e-4.
        assert!(
            (v - 1.0).abs() < 5.0 * (2.0 / n).sqrt() + 1e-3,
            "residual var {v}"
        );
        let ll = bimodal_oracle_log_likelihood(&d);
        assert!((ll + 2.02).abs() < 0.02, "oracle LL {ll}");
    }

    #[test]
    fn exponential_inputs_are_truncated_and_dense_on_the_left() {
        let d = bimodal_exponential(50_000, 9);
        assert!(d.x.iter().all(|x| (-0.5..=2.0).contains(x)));
        // x + 0.5 ~ Exp(2) truncated at 2.5: P(x < 0) = (1 − e^{−1}) / (1 − e^{−5}).
        let p = (1.0 - (-1.0f64).exp()) / (1.0 - (-5.0f64).exp());
        let frac = d.x.iter().filter(|&&x| x < 0.0).count() as f64 / 50_000.0;
        assert!(
            (frac - p).abs() < 5.0 * (p * (1.0 - p) / 50_000.0).sqrt(),
            "{frac} vs {p}"
        );
    }

    #[test]
    fn sensitivity_toy_moves_the_mean_with_x1_and_the_noise_with_x2() {
        let d = sensitivity_2d(100_000, 10);
        assert_eq!((d.len(), d.n_features), (100_000, 2));
        let x1: Vec<f64> = d.x.chunks(2).map(|r| r[0]).collect();
        let (m, v) = mean_var(&x1);
        // Exp(0.5) − 4: mean −2, variance 4 (se of the variance ≈ sqrt(8·16/n)).
        assert!((m + 2.0).abs() < 5.0 * (4.0 / 1e5f64).sqrt(), "x1 mean {m}");
        assert!(
            (v - 4.0).abs() < 5.0 * (128.0 / 1e5f64).sqrt(),
            "x1 var {v}"
        );
        assert!(x1.iter().all(|&x| x >= -4.0));
        // Residual variance near x2 = 0 is 9 whatever x1 is, and ~0 near x2 = ±π.
        for (lo, hi) in [(-4.0, -2.0), (-2.0, 10.0)] {
            let r: Vec<f64> =
                d.x.chunks(2)
                    .zip(&d.y)
                    .filter(|(x, _)| x[1].abs() < 0.1 && (lo..hi).contains(&x[0]))
                    .map(|(x, y)| y - heteroscedastic_mean(x[0]))
                    .collect();
            let var = r.iter().map(|v| v * v).sum::<f64>() / r.len() as f64;
            // 3|cos(x2/2)| varies by < 0.4 % over |x2| < 0.1.
            assert!(
                (var / 9.0 - 1.0).abs() < 5.0 * (2.0 / r.len() as f64).sqrt() + 0.01,
                "x1 in [{lo}, {hi}): residual var {var} ({} points)",
                r.len()
            );
        }
        let near_pi: Vec<f64> =
            d.x.chunks(2)
                .zip(&d.y)
                .filter(|(x, _)| (x[1].abs() - std::f64::consts::PI).abs() < 0.05)
                .map(|(x, y)| (y - heteroscedastic_mean(x[0])).abs())
                .collect();
        assert!(
            near_pi.iter().all(|&r| r < 3.0 * 0.08 * 5.0),
            "noise near x2 = ±π"
        );
    }

    #[test]
    fn in_between_set_leaves_the_gap_empty() {
        let d = in_between(750, 11);
        assert_eq!(d.x.len(), 1500);
        assert!(
            d.x.iter()
                .all(|&x| (-2.0..-1.4).contains(&x) || (1.0..1.8).contains(&x))
        );
        assert_eq!(d.x.iter().filter(|&&x| x < 0.0).count(), 750);
        let r: Vec<f64> =
            d.x.iter()
                .zip(&d.y)
                .map(|(x, y)| (y - in_between_mean(*x)) / IN_BETWEEN_NOISE_STD)
                .collect();
        let (_, v) = mean_var(&r);
        assert!((v - 1.0).abs() < 5.0 * (2.0 / 1500.0f64).sqrt(), "{v}");
    }
}
