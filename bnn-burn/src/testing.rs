//! Helpers shared by the crate's tests (and usable by downstream tests).
//!
//! burn's random number generator is global on some backends, so a test that needs a
//! reproducible draw takes [`seeded`], which serialises such tests and seeds the device.
//! Every test that draws from the device's generator or seeds it takes [`seeded`] too, even
//! one whose checks hold for any draw (a model's random initial weights, say): a draw or a
//! seed in a test running beside a seeded one would shift that test's stream, and its
//! outcome would then depend on the order the harness runs the tests in.

use burn::tensor::Device;
use std::cell::Cell;
use std::sync::{Mutex, MutexGuard};

static RNG_LOCK: Mutex<()> = Mutex::new(());

thread_local! {
    /// Whether this thread holds [`RNG_LOCK`] through a [`Seeded`] guard.
    static HOLDS_RNG_LOCK: Cell<bool> = const { Cell::new(false) };
}

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
/// In this crate's own tests, and in the tests of a crate that enables the `testing` feature
/// (on the threads the test harness names after each test), every draw from the device's
/// generator and every seeding of it made by the library (a model's initial weights, a
/// sampled forward pass, the training loop's per-epoch seeds) first checks that the calling
/// thread holds this lock, and panics naming the rule when it does not: a test that forgets
/// the lock fails every time, instead of making another test's outcome depend on the
/// harness's order.
///
/// # Panics
/// When [`SEED_OFFSET_ENV`] is set to something other than a whole number.
pub fn seeded(device: &Device, seed: u64) -> Seeded {
    let lock = RNG_LOCK.lock().unwrap_or_else(|poison| poison.into_inner());
    HOLDS_RNG_LOCK.with(|h| h.set(true));
    let guard = Seeded { _lock: lock };
    device.seed(seed.wrapping_add(seed_offset()));
    guard
}

/// The guard [`seeded`] returns: the global RNG lock, held until it drops.
#[must_use = "the RNG lock is released when the guard drops: bind it (`let _guard = …`)"]
pub struct Seeded {
    _lock: MutexGuard<'static, ()>,
}

impl Drop for Seeded {
    fn drop(&mut self) {
        HOLDS_RNG_LOCK.with(|h| h.set(false));
    }
}

/// Panics unless the calling thread holds [`seeded`]'s lock: the check behind
/// [`crate::device::uses_generator`] (in this crate's tests, and on the test harness's threads
/// with the `testing` feature).
#[track_caller]
pub(crate) fn assert_holds_rng_lock() {
    if !HOLDS_RNG_LOCK.with(Cell::get) {
        panic!(
            "this test draws from (or seeds) the device's generator without holding the RNG \
             lock: take `let _guard = testing::seeded(&device, seed);` before building, \
             sampling or training a model (see the `testing` module's docs)"
        );
    }
}

/// `seed` shifted by [`SEED_OFFSET_ENV`]'s value: the seed of a host-side stream (a sampler's,
/// a host oracle's) that must move with the suite's offset like [`seeded`]'s.
pub fn offset_seed(seed: u64) -> u64 {
    seed.wrapping_add(seed_offset())
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

/// The minimiser of `f` on `[lo, hi]` by golden-section search, to 10⁻¹⁰ (`f` unimodal
/// there): host oracles of the optima that tests train to.
pub fn golden_section(f: impl Fn(f64) -> f64, mut lo: f64, mut hi: f64) -> f64 {
    let g = (5f64.sqrt() - 1.0) / 2.0;
    let (mut x1, mut x2) = (hi - g * (hi - lo), lo + g * (hi - lo));
    let (mut f1, mut f2) = (f(x1), f(x2));
    while hi - lo > 1e-10 {
        if f1 < f2 {
            (hi, x2, f2) = (x2, x1, f1);
            x1 = hi - g * (hi - lo);
            f1 = f(x1);
        } else {
            (lo, x1, f1) = (x1, x2, f2);
            x2 = lo + g * (hi - lo);
            f2 = f(x2);
        }
    }
    (lo + hi) / 2.0
}

pub use crate::host::{HostNormals, host_normals};

/// `y = sin(2x) + ε`, `ε ~ N(0, 0.1²)`, `x ~ U(−2, 2)`: `n` rows of a one-input regression.
pub fn sine(device: &Device, n: usize) -> (burn::tensor::Tensor<2>, burn::tensor::Tensor<2>) {
    use burn::tensor::{Distribution, Tensor};
    let x = Tensor::<2>::random([n, 1], Distribution::Uniform(-2.0, 2.0), device);
    let noise = Tensor::<2>::random([n, 1], Distribution::Normal(0.0, 0.1), device);
    let y = (x.clone() * 2.0).sin() + noise;
    (x, y)
}

/// The ELBO per example (`mean NLL + KL/N`) of `model` on all of `(x, y)`, averaged over
/// `draws` draws: what the training loops minimise, for comparing two ways of training.
pub fn full_batch_elbo<M>(
    model: &M,
    (x, y): (burn::tensor::Tensor<2>, burn::tensor::Tensor<2>),
    draws: usize,
) -> f64
where
    M: crate::step::Model<Input = burn::tensor::Tensor<2>, Target = burn::tensor::Tensor<2>>,
{
    use crate::objective::{ElboConfig, Objective, StepContext, StepRequest};
    let n = x.dims()[0];
    let device = x.device();
    let batch = crate::batch::Minibatch {
        input: x,
        target: y,
        rows: crate::host::labels(&(0..n).collect::<Vec<_>>(), &device),
        n_train: n,
    };
    let terms = model.step(batch, StepRequest::new(draws)).unwrap();
    let loss = ElboConfig::new()
        .init()
        .unwrap()
        .loss(terms, &StepContext::new(0, n, n))
        .unwrap();
    to_vec(loss.loss)[0]
}

/// The fraction of `predicted` labels equal to `labels`.
pub fn accuracy(
    predicted: burn::tensor::Tensor<1, burn::tensor::Int>,
    labels: burn::tensor::Tensor<1, burn::tensor::Int>,
) -> f64 {
    to_vec(predicted.equal(labels).float().mean())[0]
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// `src` without its comments and the contents of its string literals; char literals
    /// (`'"'`, `'{'`, `'\''`) are kept whole, a lifetime's quote is left alone.
    fn code_only(src: &str) -> String {
        let b = src.as_bytes();
        let (mut out, mut i) = (Vec::with_capacity(b.len()), 0);
        while i < b.len() {
            match b[i] {
                b'/' if b.get(i + 1) == Some(&b'/') => {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                    continue;
                }
                b'/' if b.get(i + 1) == Some(&b'*') => {
                    i += 2;
                    while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                        i += 1;
                    }
                    i += 1;
                }
                b'"' => {
                    i += 1;
                    while i < b.len() && b[i] != b'"' {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                    out.extend_from_slice(b"\"\"");
                }
                b'\'' if b.get(i + 2) == Some(&b'\'') => {
                    out.extend_from_slice(&b[i..i + 3]);
                    i += 2;
                }
                b'\'' if b.get(i + 1) == Some(&b'\\') => {
                    let end = (i + 2..b.len())
                        .find(|&j| b[j] == b'\'')
                        .unwrap_or(b.len() - 1);
                    out.extend_from_slice(&b[i..=end]);
                    i = end;
                }
                c => out.push(c),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The byte index just past the `}` that closes the `{` at `open` in [`code_only`]'s
    /// output (no strings or comments left; char literals skipped); `None` when unbalanced.
    fn closing_brace(code: &[u8], open: usize) -> Option<usize> {
        let (mut depth, mut i) = (0usize, open);
        while i < code.len() {
            match code[i] {
                b'\'' if code.get(i + 2) == Some(&b'\'') => i += 2,
                b'\'' if code.get(i + 1) == Some(&b'\\') => {
                    i += 2;
                    while i < code.len() && code[i] != b'\'' {
                        i += 1;
                    }
                }
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        None
    }

    /// `(name, body)` of every `#[test]` function in `src`, the bodies as [`code_only`] gives
    /// them.
    fn test_bodies(src: &str) -> Vec<(String, String)> {
        let src = code_only(src);
        let mut out = Vec::new();
        let mut from = 0;
        while let Some(at) = src[from..].find("#[test]") {
            let start = from + at;
            let fn_at = start
                + src[start..]
                    .find("fn ")
                    .expect("a #[test] is followed by a fn");
            let name: String = src[fn_at + 3..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let open = fn_at + src[fn_at..].find('{').expect("a test fn has a body");
            let close = closing_brace(src.as_bytes(), open)
                .unwrap_or_else(|| panic!("unbalanced braces in the body of {name}"));
            out.push((name, src[open..close].to_string()));
            from = close;
        }
        out
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("readable source folder") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn the_scanner_finds_test_bodies_past_strings_and_comments() {
        let src = "fn helper() { draw() }\n#[test]\nfn a() { let s = \"}{\"; \
                   // }\n let c = '}'; b(); }\n#[test]\nfn b_two() { f::<'_>(); }\n";
        let bodies = test_bodies(src);
        let names: Vec<&str> = bodies.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b_two"]);
        assert!(bodies[0].1.ends_with("b(); }"), "{:?}", bodies[0].1);
        assert_eq!(bodies[1].1, "{ f::<'_>(); }");
        assert_eq!(
            code_only("a(\"x.seed(\", '\"'); // y.seed(\nb()"),
            "a(\"\", '\"'); \nb()"
        );
    }

    /// The library's own draws are checked at run time ([`super::assert_holds_rng_lock`]);
    /// a test's direct draws (`Tensor::random`, `random_like`, `device.seed`) are burn's and
    /// cannot be, so this reads the crate's sources: a test whose body draws takes the lock.
    #[test]
    fn every_test_that_draws_directly_takes_the_rng_lock() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&root, &mut files);
        let (mut scanned, mut offenders) = (0, Vec::new());
        for file in files {
            let src = std::fs::read_to_string(&file).expect("readable source");
            for (name, body) in test_bodies(&src) {
                scanned += 1;
                let draws = ["::random(", ".random_like(", ".seed("]
                    .iter()
                    .any(|d| body.contains(d));
                if draws && !body.contains("seeded(") {
                    let at = file.strip_prefix(&root).unwrap_or(&file);
                    offenders.push(format!("src/{}: {name}", at.display()));
                }
            }
        }
        assert!(
            scanned > 100,
            "found only {scanned} tests under {}",
            root.display()
        );
        assert!(
            offenders.is_empty(),
            "tests that draw without `testing::seeded`: {offenders:#?}"
        );
    }
}
