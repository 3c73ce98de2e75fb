//! Helpers shared by the crate's tests (and usable by downstream tests).
//!
//! burn's random number generator is global on some backends, so a test that needs a
//! reproducible draw takes [`seeded`], which serialises such tests and seeds the device.
//! Every test that draws from the device's generator or seeds it takes [`seeded`] too, even
//! one whose checks hold for any draw (a model's random initial weights, say): a draw or a
//! seed in a test running beside a seeded one would shift that test's stream, and its
//! outcome would then depend on the order the harness runs the tests in.

use burn::tensor::Device;
use std::sync::{Mutex, MutexGuard};

static RNG_LOCK: Mutex<()> = Mutex::new(());

/// The device the tests run on: the one the cargo features select.
pub fn test_device() -> Device {
    crate::device()
}

/// The environment variable that shifts every [`seeded`] seed by a number, so that the suite
/// can be run under other random streams (`BNN_BURN_TEST_SEED_OFFSET=1 cargo test`): a
/// statistical test must hold for any seed, not only for the one it names.
pub const SEED_OFFSET_ENV: &str = "BNN_BURN_TEST_SEED_OFFSET";

/// Holds the global RNG lock and seeds `device` with `seed` (plus [`SEED_OFFSET_ENV`]'s
/// value, when set); keep the guard alive while sampling.
///
/// # Panics
/// When [`SEED_OFFSET_ENV`] is set to something other than a whole number.
pub fn seeded(device: &Device, seed: u64) -> MutexGuard<'static, ()> {
    let guard = RNG_LOCK.lock().unwrap_or_else(|poison| poison.into_inner());
    device.seed(seed.wrapping_add(seed_offset()));
    guard
}

/// [`SEED_OFFSET_ENV`]'s value, 0 when unset.
fn seed_offset() -> u64 {
    match std::env::var(SEED_OFFSET_ENV) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{SEED_OFFSET_ENV}={v:?}: expected a whole number ≥ 0")),
        Err(_) => 0,
    }
}

pub use crate::host::to_vec;

/// Sample mean and (population) variance of `xs`, with their standard errors `√(Var/n)` and
/// `√((m₄ − Var²)/n)`: the tolerances of the Monte Carlo checks.
#[derive(Debug, Clone, Copy)]
pub struct SampleMoments {
    /// Sample mean.
    pub mean: f64,
    /// Sample variance (divided by `n`).
    pub var: f64,
    /// Standard error of the mean.
    pub mean_se: f64,
    /// Standard error of the variance.
    pub var_se: f64,
}

/// The [`SampleMoments`] of `xs` (in `f64`, two passes).
pub fn sample_moments(xs: &[f64]) -> SampleMoments {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let (mut m2, mut m4) = (0.0, 0.0);
    for x in xs {
        let d2 = (x - mean).powi(2);
        m2 += d2;
        m4 += d2 * d2;
    }
    let (var, m4) = (m2 / n, m4 / n);
    SampleMoments {
        mean,
        var,
        mean_se: (var / n).sqrt(),
        var_se: ((m4 - var * var).max(0.0) / n).sqrt(),
    }
}

/// `n` standard normal draws (Box–Muller in `f64`), reproducible from `seed`: the host side of
/// the Monte Carlo oracles, independent of the backend under test.
pub fn host_normals(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = HostNormals::new(seed);
    (0..n).map(|_| rng.next()).collect()
}

/// A stream of standard normal draws (Box–Muller in `f64`) from a seeded host generator.
pub struct HostNormals {
    rng: rand::rngs::StdRng,
    spare: Option<f64>,
}

impl HostNormals {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> Self {
        use rand::SeedableRng;
        Self {
            rng: rand::rngs::StdRng::seed_from_u64(seed),
            spare: None,
        }
    }

    /// The next draw.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> f64 {
        use rand::RngExt;
        if let Some(z) = self.spare.take() {
            return z;
        }
        let u1: f64 = 1.0 - self.rng.random::<f64>();
        let u2: f64 = self.rng.random();
        let r = (-2.0 * u1.ln()).sqrt();
        let t = std::f64::consts::TAU * u2;
        self.spare = Some(r * t.sin());
        r * t.cos()
    }
}
