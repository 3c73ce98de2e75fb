//! Hamiltonian Monte Carlo on a [`LogDensity`]: static HMC and the No-U-Turn sampler with
//! multinomial trajectory sampling and the generalised U-turn criterion (Hoffman & Gelman 2014;
//! Betancourt 2017 §A), step size by dual averaging (Hoffman & Gelman 2014 Alg. 5) and a
//! diagonal mass matrix from Stan's windowed warm-up. Chains run in parallel threads.

use super::diagnostics::{ParamSummary, summarise};
use super::target::LogDensity;
use crate::error::{Check, ConfigError};
use crate::host::HostNormals;
use burn::config::Config;

/// Which trajectory.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum Sampler {
    /// The No-U-Turn sampler, trees of at most `2^max_depth` leapfrog steps.
    Nuts {
        /// The deepest tree.
        max_depth: usize,
    },
    /// HMC with a Metropolis correction, the number of leapfrog steps of each proposal drawn
    /// uniformly from `1..=2·steps − 1` (Neal 2011 §5.4: a fixed trajectory length can be
    /// periodic on a Gaussian and never mix).
    Hmc {
        /// The mean number of leapfrog steps per proposal.
        steps: usize,
    },
}

/// The settings of [`sample`].
#[derive(Config, Debug, PartialEq)]
pub struct McmcConfig {
    /// The trajectory.
    #[config(default = "Sampler::Nuts { max_depth: 10 }")]
    pub sampler: Sampler,
    /// Warm-up iterations per chain (adaptation; discarded).
    #[config(default = 1000)]
    pub warmup: usize,
    /// Kept draws per chain.
    #[config(default = 1000)]
    pub draws: usize,
    /// Chains, run in parallel threads.
    #[config(default = 4)]
    pub chains: usize,
    /// The mean acceptance statistic dual averaging aims at.
    #[config(default = 0.8)]
    pub target_accept: f64,
    /// Adapt a diagonal mass matrix in Stan's windows (otherwise the identity).
    #[config(default = true)]
    pub adapt_mass: bool,
    /// Initial points are uniform in `(−init_radius, init_radius)ᴰ`.
    #[config(default = 2.0)]
    pub init_radius: f64,
    /// The seed; chain `c` uses a stream derived from it.
    #[config(default = 0)]
    pub seed: u64,
}

impl McmcConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = Check("McmcConfig");
        if self.draws < 4 {
            return Err(ConfigError {
                config: "McmcConfig",
                field: "draws",
                value: self.draws.to_string(),
                expected: "at least 4 draws per chain (split-R̂ halves each chain)",
            });
        }
        check.at_least_one("chains", self.chains)?;
        check.positive("init_radius", self.init_radius)?;
        if !(self.target_accept > 0.0 && self.target_accept < 1.0) {
            return Err(ConfigError {
                config: "McmcConfig",
                field: "target_accept",
                value: self.target_accept.to_string(),
                expected: "a number in (0, 1)",
            });
        }
        match self.sampler {
            Sampler::Nuts { max_depth } => check.at_least_one("sampler.max_depth", max_depth),
            Sampler::Hmc { steps } => check.at_least_one("sampler.steps", steps),
        }
    }
}

/// Why sampling could not start.
#[derive(Debug, thiserror::Error)]
pub enum McmcError {
    /// A configuration field is out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No initial point with a finite density and gradient was found.
    #[error(
        "chain {chain}: no initial point with a finite log density and gradient in 100 tries (init_radius {radius}); pass `init` or a smaller `init_radius`"
    )]
    Init {
        /// The chain.
        chain: usize,
        /// The radius tried.
        radius: f64,
    },
    /// An initial point of the wrong length.
    #[error("the initial point has {got} entries, the target {expected}")]
    InitLength {
        /// Its length.
        got: usize,
        /// The target's dimension.
        expected: usize,
    },
}

/// One chain's kept draws and statistics.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Chain {
    /// The draws, `[draws][D]`.
    pub draws: Vec<Vec<f64>>,
    /// `ln p̃` of each draw.
    pub log_density: Vec<f64>,
    /// The acceptance statistic of each iteration (NUTS: the mean over its tree).
    pub accept: Vec<f64>,
    /// Leapfrog steps (gradient evaluations) of each iteration.
    pub leapfrogs: Vec<usize>,
    /// Iterations whose trajectory diverged (energy error above 1000).
    pub divergences: usize,
    /// The adapted step size.
    pub step_size: f64,
    /// The adapted inverse mass matrix's diagonal.
    pub inv_mass: Vec<f64>,
}

/// The chains of one [`sample`] call.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct McmcRun {
    /// Every chain.
    pub chains: Vec<Chain>,
    /// Wall time of warm-up and sampling, all chains together.
    pub seconds: f64,
}

impl McmcRun {
    /// Entry `i` of every chain's draws.
    pub fn param(&self, i: usize) -> Vec<Vec<f64>> {
        self.chains
            .iter()
            .map(|c| c.draws.iter().map(|d| d[i]).collect())
            .collect()
    }

    /// [`summarise`] of every entry.
    pub fn summary(&self) -> Vec<ParamSummary> {
        let d = self.chains[0].draws[0].len();
        (0..d).map(|i| summarise(&self.param(i))).collect()
    }

    /// The mean acceptance statistic over chains and kept iterations.
    pub fn mean_accept(&self) -> f64 {
        let all: Vec<f64> = self.chains.iter().flat_map(|c| c.accept.clone()).collect();
        all.iter().sum::<f64>() / all.len() as f64
    }

    /// Gradient evaluations of the kept iterations, all chains.
    pub fn leapfrogs(&self) -> usize {
        self.chains.iter().flat_map(|c| c.leapfrogs.iter()).sum()
    }

    /// Divergent iterations, all chains.
    pub fn divergences(&self) -> usize {
        self.chains.iter().map(|c| c.divergences).sum()
    }

    /// Every kept draw of every chain, `[chains × draws][D]`.
    pub fn pooled(&self) -> Vec<Vec<f64>> {
        self.chains.iter().flat_map(|c| c.draws.clone()).collect()
    }
}

/// Draws from `target` by HMC or NUTS, [`McmcConfig::chains`] chains in parallel threads, each
/// from `init` (or a random point).
///
/// # Errors
/// A configuration out of range, an `init` of the wrong length, or no finite initial point.
pub fn sample<T: LogDensity + Sync>(
    target: &T,
    config: &McmcConfig,
    init: Option<&[f64]>,
) -> Result<McmcRun, McmcError> {
    config.validate()?;
    let d = target.dim();
    if let Some(init) = init
        && init.len() != d
    {
        return Err(McmcError::InitLength {
            got: init.len(),
            expected: d,
        });
    }
    let start = web_time::Instant::now();
    let chains = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..config.chains)
            .map(|c| scope.spawn(move || run_chain(target, config, init, c)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a chain's thread panicked"))
            .collect::<Result<Vec<_>, _>>()
    })?;
    Ok(McmcRun {
        chains,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// A point of phase space.
#[derive(Debug, Clone)]
struct Point {
    q: Vec<f64>,
    p: Vec<f64>,
    grad: Vec<f64>,
    log_density: f64,
}

/// The Hamiltonian system of one chain: the target and the diagonal metric.
struct System<'a, T> {
    target: &'a T,
    inv_mass: Vec<f64>,
}

impl<T: LogDensity> System<'_, T> {
    fn kinetic(&self, p: &[f64]) -> f64 {
        0.5 * p
            .iter()
            .zip(&self.inv_mass)
            .map(|(p, m)| p * p * m)
            .sum::<f64>()
    }

    fn energy(&self, x: &Point) -> f64 {
        -x.log_density + self.kinetic(&x.p)
    }

    /// One leapfrog step of size `eps` (negative: backwards in time).
    fn leapfrog(&self, x: &Point, eps: f64) -> Point {
        let mut p: Vec<f64> =
            x.p.iter()
                .zip(&x.grad)
                .map(|(p, g)| p + 0.5 * eps * g)
                .collect();
        let q: Vec<f64> =
            x.q.iter()
                .zip(&p)
                .zip(&self.inv_mass)
                .map(|((q, p), m)| q + eps * m * p)
                .collect();
        let mut grad = vec![0.0; q.len()];
        let log_density = self.target.value_and_grad(&q, &mut grad);
        for (p, g) in p.iter_mut().zip(&grad) {
            *p += 0.5 * eps * g;
        }
        Point {
            q,
            p,
            grad,
            log_density,
        }
    }

    /// `p♯ = M⁻¹ p`.
    fn sharp(&self, p: &[f64]) -> Vec<f64> {
        p.iter().zip(&self.inv_mass).map(|(p, m)| p * m).collect()
    }

    /// The generalised U-turn: the trajectory from `left` to `right` with summed momentum `rho`
    /// has turned when either end's velocity points against `rho`.
    fn turned(&self, left: &Point, right: &Point, rho: &[f64]) -> bool {
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        dot(&self.sharp(&left.p), rho) <= 0.0 || dot(&self.sharp(&right.p), rho) <= 0.0
    }
}

/// A NUTS subtree (its points in time order from `left` to `right`).
struct Tree {
    left: Point,
    right: Point,
    proposal: Point,
    /// `ln Σ exp(−H)` over its points, relative to the initial energy.
    log_weight: f64,
    /// `Σ p` over its points.
    rho: Vec<f64>,
    turning: bool,
    diverging: bool,
    accept_sum: f64,
    leapfrogs: usize,
}

fn log_add(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    if m == f64::NEG_INFINITY {
        m
    } else {
        m + ((a - m).exp() + (b - m).exp()).ln()
    }
}

fn add(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

/// Energy errors above this are divergences (Stan's threshold).
const MAX_ENERGY_ERROR: f64 = 1000.0;

impl<T: LogDensity> System<'_, T> {
    /// A subtree of `2^depth` leapfrog steps from `from` in direction `dir` (±1).
    fn build(
        &self,
        from: &Point,
        dir: f64,
        depth: usize,
        eps: f64,
        h0: f64,
        rng: &mut HostNormals,
    ) -> Tree {
        if depth == 0 {
            let x = self.leapfrog(from, dir * eps);
            let error = self.energy(&x) - h0;
            let diverging = error.is_nan() || error > MAX_ENERGY_ERROR;
            let accept = if error.is_nan() {
                0.0
            } else {
                (-error).exp().min(1.0)
            };
            return Tree {
                left: x.clone(),
                right: x.clone(),
                rho: x.p.clone(),
                proposal: x,
                log_weight: if error.is_nan() {
                    f64::NEG_INFINITY
                } else {
                    -error
                },
                turning: false,
                diverging,
                accept_sum: accept,
                leapfrogs: 1,
            };
        }
        let first = self.build(from, dir, depth - 1, eps, h0, rng);
        if first.turning || first.diverging {
            return first;
        }
        let edge = if dir > 0.0 { &first.right } else { &first.left };
        let second = self.build(edge, dir, depth - 1, eps, h0, rng);
        let accept_sum = first.accept_sum + second.accept_sum;
        let leapfrogs = first.leapfrogs + second.leapfrogs;
        if second.turning || second.diverging {
            return Tree {
                turning: second.turning,
                diverging: second.diverging,
                accept_sum,
                leapfrogs,
                ..first
            };
        }
        let log_weight = log_add(first.log_weight, second.log_weight);
        // Multinomial sampling within a subtree: the second half's proposal with its share.
        let take_second = rng.uniform() < (second.log_weight - log_weight).exp();
        let (earlier, later) = if dir > 0.0 {
            (first, second)
        } else {
            (second, first)
        };
        let proposal = match (take_second, dir > 0.0) {
            (true, true) | (false, false) => later.proposal.clone(),
            _ => earlier.proposal.clone(),
        };
        self.merge(earlier, later, proposal, log_weight, accept_sum, leapfrogs)
    }

    /// Two adjacent subtrees (in time order) as one, with the U-turn checks across their
    /// boundary (Stan's three checks).
    fn merge(
        &self,
        earlier: Tree,
        later: Tree,
        proposal: Point,
        log_weight: f64,
        accept_sum: f64,
        leapfrogs: usize,
    ) -> Tree {
        let rho = add(&earlier.rho, &later.rho);
        let turning = self.turned(&earlier.left, &later.right, &rho)
            || self.turned(
                &earlier.left,
                &later.left,
                &add(&earlier.rho, &later.left.p),
            )
            || self.turned(
                &earlier.right,
                &later.right,
                &add(&earlier.right.p, &later.rho),
            );
        Tree {
            left: earlier.left,
            right: later.right,
            proposal,
            log_weight,
            rho,
            turning,
            diverging: false,
            accept_sum,
            leapfrogs,
        }
    }

    /// One NUTS transition from `x`: the new point, its acceptance statistic, leapfrog count
    /// and whether it diverged.
    fn nuts(
        &self,
        x: &Point,
        eps: f64,
        max_depth: usize,
        rng: &mut HostNormals,
    ) -> (Point, f64, usize, bool) {
        let (start, h0) = self.refreshed(x, rng);
        let mut tree = Tree {
            left: start.clone(),
            right: start.clone(),
            rho: start.p.clone(),
            proposal: start,
            log_weight: 0.0,
            turning: false,
            diverging: false,
            accept_sum: 0.0,
            leapfrogs: 0,
        };
        let (mut accept_sum, mut leapfrogs, mut diverged) = (0.0, 0, false);
        for depth in 0..max_depth {
            let dir = if rng.uniform() < 0.5 { -1.0 } else { 1.0 };
            let edge = if dir > 0.0 { &tree.right } else { &tree.left };
            let new = self.build(edge, dir, depth, eps, h0, rng);
            accept_sum += new.accept_sum;
            leapfrogs += new.leapfrogs;
            if new.diverging {
                diverged = true;
                break;
            }
            if new.turning {
                break;
            }
            // Biased progressive sampling: the new subtree's proposal with probability
            // min(1, w_new / w_old).
            let proposal = if rng.uniform() < (new.log_weight - tree.log_weight).exp() {
                new.proposal.clone()
            } else {
                tree.proposal.clone()
            };
            let log_weight = log_add(tree.log_weight, new.log_weight);
            let (earlier, later) = if dir > 0.0 { (tree, new) } else { (new, tree) };
            tree = self.merge(earlier, later, proposal, log_weight, 0.0, 0);
            if tree.turning {
                break;
            }
        }
        let accept = accept_sum / leapfrogs.max(1) as f64;
        (tree.proposal, accept, leapfrogs, diverged)
    }

    /// One HMC transition of `1..=2·steps − 1` leapfrog steps with a Metropolis correction.
    fn hmc(
        &self,
        x: &Point,
        eps: f64,
        steps: usize,
        rng: &mut HostNormals,
    ) -> (Point, f64, usize, bool) {
        let (start, h0) = self.refreshed(x, rng);
        let steps = 1 + (rng.uniform() * (2 * steps - 1) as f64) as usize;
        let mut y = start.clone();
        for _ in 0..steps {
            y = self.leapfrog(&y, eps);
        }
        let error = self.energy(&y) - h0;
        let accept = if error.is_nan() {
            0.0
        } else {
            (-error).exp().min(1.0)
        };
        let diverged = error.is_nan() || error > MAX_ENERGY_ERROR;
        let next = if rng.uniform() < accept { y } else { start };
        (next, accept, steps, diverged)
    }

    /// `x` with a fresh momentum `p ~ N(0, M)`, and its energy.
    fn refreshed(&self, x: &Point, rng: &mut HostNormals) -> (Point, f64) {
        let mut start = x.clone();
        start.p = self
            .inv_mass
            .iter()
            .map(|m| rng.next() / m.sqrt())
            .collect();
        let h0 = self.energy(&start);
        (start, h0)
    }

    /// Hoffman & Gelman (2014) Alg. 4: double or halve `eps` until one leapfrog step's
    /// acceptance crosses ½.
    fn reasonable_step(&self, x: &Point, mut eps: f64, rng: &mut HostNormals) -> f64 {
        let (start, h0) = self.refreshed(x, rng);
        let log_accept = |eps: f64| {
            let e = h0 - self.energy(&self.leapfrog(&start, eps));
            if e.is_nan() { f64::NEG_INFINITY } else { e }
        };
        let direction = if log_accept(eps) > 0.5f64.ln() {
            1.0
        } else {
            -1.0
        };
        for _ in 0..100 {
            let a = log_accept(eps);
            if direction * a <= -direction * 2f64.ln() {
                break;
            }
            eps *= 2f64.powf(direction);
        }
        eps
    }
}

/// Dual averaging of `ln ε` (Hoffman & Gelman 2014 Alg. 5; γ = 0.05, t₀ = 10, κ = 0.75).
struct DualAveraging {
    mu: f64,
    log_eps: f64,
    log_eps_bar: f64,
    h_bar: f64,
    t: f64,
    delta: f64,
}

impl DualAveraging {
    fn new(eps: f64, delta: f64) -> Self {
        Self {
            mu: (10.0 * eps).ln(),
            log_eps: eps.ln(),
            log_eps_bar: 0.0,
            h_bar: 0.0,
            t: 0.0,
            delta,
        }
    }

    fn update(&mut self, accept: f64) {
        self.t += 1.0;
        let w = 1.0 / (self.t + 10.0);
        self.h_bar = (1.0 - w) * self.h_bar + w * (self.delta - accept);
        self.log_eps = self.mu - self.t.sqrt() / 0.05 * self.h_bar;
        let eta = self.t.powf(-0.75);
        self.log_eps_bar = eta * self.log_eps + (1.0 - eta) * self.log_eps_bar;
    }
}

/// The ends of Stan's slow adaptation windows within `warmup` iterations (initial buffer 75,
/// windows from 25 doubling, terminal buffer 50; scaled by 15/75/10 % for short warm-ups).
fn mass_windows(warmup: usize) -> Vec<(usize, usize)> {
    let (mut init, mut term, mut base) = (75, 50, 25);
    if warmup < 20 {
        return Vec::new();
    }
    if init + term + base > warmup {
        init = warmup * 15 / 100;
        term = warmup / 10;
        base = warmup - init - term;
    }
    let end_slow = warmup - term;
    let mut windows = Vec::new();
    let (mut start, mut size) = (init, base);
    while start < end_slow {
        let mut end = (start + size).min(end_slow);
        if end + 2 * size > end_slow {
            end = end_slow;
        }
        windows.push((start, end));
        start = end;
        size *= 2;
    }
    windows
}

/// Stream `c` of `seed`.
fn chain_seed(seed: u64, c: usize) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((c as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9))
}

fn run_chain<T: LogDensity>(
    target: &T,
    config: &McmcConfig,
    init: Option<&[f64]>,
    c: usize,
) -> Result<Chain, McmcError> {
    let d = target.dim();
    let mut rng = HostNormals::new(chain_seed(config.seed, c));
    let mut system = System {
        target,
        inv_mass: vec![1.0; d],
    };
    let mut x = None;
    for _ in 0..100 {
        let q: Vec<f64> = match init {
            Some(init) => init.to_vec(),
            None => (0..d)
                .map(|_| config.init_radius * (2.0 * rng.uniform() - 1.0))
                .collect(),
        };
        let mut grad = vec![0.0; d];
        let log_density = target.value_and_grad(&q, &mut grad);
        if log_density.is_finite() && grad.iter().all(|g| g.is_finite()) {
            x = Some(Point {
                q,
                p: vec![0.0; d],
                grad,
                log_density,
            });
            break;
        }
        if init.is_some() {
            break;
        }
    }
    let mut x = x.ok_or(McmcError::Init {
        chain: c,
        radius: config.init_radius,
    })?;
    let transition =
        |system: &System<'_, T>, x: &Point, eps: f64, rng: &mut HostNormals| match config.sampler {
            Sampler::Nuts { max_depth } => system.nuts(x, eps, max_depth, rng),
            Sampler::Hmc { steps } => system.hmc(x, eps, steps, rng),
        };
    let mut eps = system.reasonable_step(&x, 1.0, &mut rng);
    let mut adapt = DualAveraging::new(eps, config.target_accept);
    let windows = if config.adapt_mass {
        mass_windows(config.warmup)
    } else {
        Vec::new()
    };
    let mut window = 0;
    let (mut count, mut mean, mut m2) = (0.0, vec![0.0; d], vec![0.0; d]);
    for i in 0..config.warmup {
        let (next, accept, _, _) = transition(&system, &x, eps, &mut rng);
        x = next;
        adapt.update(accept);
        eps = adapt.log_eps.exp();
        if let Some(&(start, end)) = windows.get(window)
            && i >= start
        {
            // Welford's running variance of the window's draws.
            count += 1.0;
            for j in 0..d {
                let delta = x.q[j] - mean[j];
                mean[j] += delta / count;
                m2[j] += delta * (x.q[j] - mean[j]);
            }
            if i + 1 == end {
                let n = count;
                system.inv_mass = m2
                    .iter()
                    .map(|s| (n / (n + 5.0)) * (s / (n - 1.0)) + 1e-3 * (5.0 / (n + 5.0)))
                    .collect();
                (count, mean, m2) = (0.0, vec![0.0; d], vec![0.0; d]);
                window += 1;
                eps = system.reasonable_step(&x, eps, &mut rng);
                adapt = DualAveraging::new(eps, config.target_accept);
            }
        }
    }
    if config.warmup > 0 {
        eps = adapt.log_eps_bar.exp();
    }
    let mut chain = Chain {
        draws: Vec::with_capacity(config.draws),
        log_density: Vec::with_capacity(config.draws),
        accept: Vec::with_capacity(config.draws),
        leapfrogs: Vec::with_capacity(config.draws),
        divergences: 0,
        step_size: eps,
        inv_mass: system.inv_mass.clone(),
    };
    for _ in 0..config.draws {
        let (next, accept, leapfrogs, diverged) = transition(&system, &x, eps, &mut rng);
        x = next;
        chain.draws.push(x.q.clone());
        chain.log_density.push(x.log_density);
        chain.accept.push(accept);
        chain.leapfrogs.push(leapfrogs);
        chain.divergences += usize::from(diverged);
    }
    Ok(chain)
}
