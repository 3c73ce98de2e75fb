//! Convergence diagnostics of Markov chains (Vehtari et al. 2021, "Rank-normalization,
//! folding, and localization"): split-`R̂` on rank-normalised and folded draws, bulk effective
//! sample size by Geyer's initial monotone sequence, and the Monte Carlo standard error.

/// The summary of one parameter over several chains.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ParamSummary {
    /// The posterior mean estimate.
    pub mean: f64,
    /// The posterior standard deviation estimate.
    pub sd: f64,
    /// The Monte Carlo standard error of the mean, `sd/√ESS_mean`.
    pub mcse: f64,
    /// The effective sample size of the mean (raw draws, split chains).
    pub ess_mean: f64,
    /// The bulk effective sample size (rank-normalised split chains).
    pub ess_bulk: f64,
    /// The rank-normalised split-`R̂`: the larger of the bulk and the folded one.
    pub rhat: f64,
}

/// Mean, sd, MCSE, ESS and `R̂` of one parameter from its `chains` (equal lengths ≥ 4).
///
/// # Panics
/// If there are no chains, or their lengths differ or are below 4.
pub fn summarise(chains: &[Vec<f64>]) -> ParamSummary {
    let all: Vec<f64> = chains.iter().flatten().copied().collect();
    let n = all.len() as f64;
    let mean = all.iter().sum::<f64>() / n;
    let sd = (all.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let split = split_chains(chains);
    let ess_mean = ess(&split);
    ParamSummary {
        mean,
        sd,
        mcse: sd / ess_mean.sqrt(),
        ess_mean,
        ess_bulk: ess(&rank_normalise(&split)),
        rhat: rhat(chains),
    }
}

/// The largest [`rhat`] over the entries of per-draw vectors, `per_chain[chain][draw][entry]`
/// (a network's outputs on a grid: the function-level `R̂`, which symmetries of the weights do
/// not inflate); 0 for vectors of no entries.
///
/// # Panics
/// As [`rhat`], or if a chain's vectors are shorter than its first one's.
pub fn max_rhat(per_chain: &[Vec<Vec<f64>>]) -> f64 {
    let width = per_chain
        .first()
        .and_then(|c| c.first())
        .map_or(0, Vec::len);
    (0..width)
        .map(|i| {
            let chains: Vec<Vec<f64>> = per_chain
                .iter()
                .map(|c| c.iter().map(|v| v[i]).collect())
                .collect();
            rhat(&chains)
        })
        .fold(0.0, f64::max)
}

/// The rank-normalised split-`R̂` (Vehtari et al. 2021 §4.2): the larger of the split-`R̂` of
/// the normal scores of the draws' ranks and of their distances to the median.
pub fn rhat(chains: &[Vec<f64>]) -> f64 {
    let split = split_chains(chains);
    let bulk = split_rhat(&rank_normalise(&split));
    let all: Vec<f64> = split.iter().flatten().copied().collect();
    let median = quantile(&all, 0.5);
    let folded: Vec<Vec<f64>> = split
        .iter()
        .map(|c| c.iter().map(|x| (x - median).abs()).collect())
        .collect();
    bulk.max(split_rhat(&rank_normalise(&folded)))
}

/// Each chain cut in two halves (an odd middle draw dropped).
fn split_chains(chains: &[Vec<f64>]) -> Vec<Vec<f64>> {
    assert!(!chains.is_empty(), "no chains");
    let n = chains[0].len();
    assert!(
        n >= 4 && chains.iter().all(|c| c.len() == n),
        "chains need equal lengths ≥ 4"
    );
    let half = n / 2;
    chains
        .iter()
        .flat_map(|c| [c[..half].to_vec(), c[n - half..].to_vec()])
        .collect()
}

/// `R̂ = √(((n−1)/n W + B/n)/W)` of (already split) chains (Gelman et al. 2013 eq. 11.4).
fn split_rhat(chains: &[Vec<f64>]) -> f64 {
    let (m, n) = (chains.len() as f64, chains[0].len() as f64);
    let means: Vec<f64> = chains.iter().map(|c| c.iter().sum::<f64>() / n).collect();
    let grand = means.iter().sum::<f64>() / m;
    let b = n / (m - 1.0) * means.iter().map(|x| (x - grand).powi(2)).sum::<f64>();
    let w = chains
        .iter()
        .zip(&means)
        .map(|(c, mu)| c.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / (n - 1.0))
        .sum::<f64>()
        / m;
    if w == 0.0 {
        return if b == 0.0 { 1.0 } else { f64::INFINITY };
    }
    (((n - 1.0) / n * w + b / n) / w).sqrt()
}

/// The normal scores `Φ⁻¹((r − 3/8)/(S + 1/4))` of the pooled ranks (ties get their average).
fn rank_normalise(chains: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let all: Vec<f64> = chains.iter().flatten().copied().collect();
    let s = all.len();
    let mut order: Vec<usize> = (0..s).collect();
    order.sort_by(|&a, &b| all[a].total_cmp(&all[b]));
    let mut ranks = vec![0.0; s];
    let mut i = 0;
    while i < s {
        let mut j = i;
        while j + 1 < s && all[order[j + 1]] == all[order[i]] {
            j += 1;
        }
        let average = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            ranks[k] = average;
        }
        i = j + 1;
    }
    let scores: Vec<f64> = ranks
        .iter()
        .map(|r| normal_quantile((r - 0.375) / (s as f64 + 0.25)))
        .collect();
    scores.chunks(chains[0].len()).map(|c| c.to_vec()).collect()
}

/// The `p`-quantile of `xs` (linear interpolation between order statistics).
fn quantile(xs: &[f64], p: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let h = (v.len() - 1) as f64 * p;
    let (lo, frac) = (h.floor() as usize, h - h.floor());
    v[lo] + frac * (v[(lo + 1).min(v.len() - 1)] - v[lo])
}

/// The effective sample size of (already split) chains: `m n / τ̂`, `τ̂ = −1 + 2 Σ ρ̂_t` over
/// Geyer's initial positive, monotone sequence of paired autocorrelations, the within-chain
/// autocovariances combined as in Gelman et al. (2013 eq. 11.7). Capped at `m n log₁₀(m n)`
/// (antithetic chains) as Stan caps it.
pub fn ess(chains: &[Vec<f64>]) -> f64 {
    let (m, n) = (chains.len(), chains[0].len());
    let acov: Vec<Vec<f64>> = chains.iter().map(|c| autocovariance(c)).collect();
    let means: Vec<f64> = chains
        .iter()
        .map(|c| c.iter().sum::<f64>() / n as f64)
        .collect();
    let nf = n as f64;
    let mean_var = acov.iter().map(|a| a[0]).sum::<f64>() / m as f64 * nf / (nf - 1.0);
    let mut var_plus = mean_var * (nf - 1.0) / nf;
    if m > 1 {
        let grand = means.iter().sum::<f64>() / m as f64;
        var_plus += means.iter().map(|x| (x - grand).powi(2)).sum::<f64>() / (m as f64 - 1.0);
    }
    if var_plus <= 0.0 || !var_plus.is_finite() {
        return f64::NAN;
    }
    let rho =
        |t: usize| 1.0 - (mean_var - acov.iter().map(|a| a[t]).sum::<f64>() / m as f64) / var_plus;
    // Pairs Γ_k = ρ_{2k} + ρ_{2k+1} while positive, made monotone.
    let mut tau = -1.0;
    let mut previous = f64::INFINITY;
    let mut t = 0;
    while t + 1 < n {
        let pair = rho(t) + rho(t + 1);
        if pair.is_nan() || pair <= 0.0 {
            break;
        }
        let pair = pair.min(previous);
        tau += 2.0 * pair;
        previous = pair;
        t += 2;
    }
    let total = (m * n) as f64;
    let cap = total * total.log10();
    if tau <= 0.0 {
        cap
    } else {
        (total / tau).min(cap)
    }
}

/// The biased autocovariances `γ_t = Σ_i (x_i − x̄)(x_{i+t} − x̄)/n`, `t < n`, by FFT.
fn autocovariance(x: &[f64]) -> Vec<f64> {
    let n = x.len();
    let mean = x.iter().sum::<f64>() / n as f64;
    let size = (2 * n).next_power_of_two();
    let mut re: Vec<f64> = x.iter().map(|v| v - mean).collect();
    re.resize(size, 0.0);
    let mut im = vec![0.0; size];
    fft(&mut re, &mut im, false);
    for (r, i) in re.iter_mut().zip(im.iter_mut()) {
        *r = *r * *r + *i * *i;
        *i = 0.0;
    }
    fft(&mut re, &mut im, true);
    re.truncate(n);
    re.iter().map(|v| v / (size as f64 * n as f64)).collect()
}

/// In-place radix-2 FFT (unnormalised; `inverse` flips the sign of the exponent).
fn fft(re: &mut [f64], im: &mut [f64], inverse: bool) {
    let n = re.len();
    let mut j = 0;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j |= bit;
        if i < j {
            re.swap(i, j);
            im.swap(i, j);
        }
    }
    let sign = if inverse { 1.0 } else { -1.0 };
    let mut len = 2;
    while len <= n {
        let angle = sign * std::f64::consts::TAU / len as f64;
        for start in (0..n).step_by(len) {
            for k in 0..len / 2 {
                let (s, c) = (angle * k as f64).sin_cos();
                let (a, b) = (start + k, start + k + len / 2);
                let tr = re[b] * c - im[b] * s;
                let ti = re[b] * s + im[b] * c;
                re[b] = re[a] - tr;
                im[b] = im[a] - ti;
                re[a] += tr;
                im[a] += ti;
            }
        }
        len <<= 1;
    }
}

/// `Φ⁻¹(p)` for `p ∈ (0, 1)` (Acklam's rational approximation, relative error < 1.2·10⁻⁹).
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}
