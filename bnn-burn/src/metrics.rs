//! Evaluation metrics on host values (`f64`), computed exactly after prediction.
//!
//! Classification inputs are row-major probabilities `probs[b * C + c]` with `n_classes = C`.
//! OOD metrics treat the out-of-distribution set as the positive class and expect scores that
//! are larger for "more uncertain" (entropy, mutual information).

use std::cmp::Ordering;

/// Negative mean of per-point log-likelihoods.
pub fn nll(log_likelihoods: &[f64]) -> f64 {
    -mean(log_likelihoods)
}

/// Arithmetic mean (NaN for an empty slice).
pub fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Pearson correlation `cov(a, b)/(sd(a)·sd(b))` of two equally long series (NaN when either
/// is constant or empty).
pub fn pearson(a: &[f64], b: &[f64]) -> f64 {
    let (ma, mb) = (mean(a), mean(b));
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va * vb).sqrt()
}

/// Mean and standard error `sd/√n` (the UCI tables' `±`), `sd` the sample standard deviation
/// `√(Σ(x − x̄)²/(n − 1))`. The standard error is `None` for fewer than two values, where no
/// sample standard deviation exists (the mean is NaN for none).
pub fn mean_and_standard_error(x: &[f64]) -> (f64, Option<f64>) {
    let m = mean(x);
    if x.len() < 2 {
        return (m, None);
    }
    let var = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() - 1) as f64;
    (m, Some((var / x.len() as f64).sqrt()))
}

/// Root-mean-square error of row-major predictions of `D = target_std.len()` dimensions, each
/// multiplied by its `target_std[d]` to report standardised predictions in original units
/// (pass `&[1.0]` for values already in original units):
/// `sqrt((1/(B·D)) Σ_{b,d} s_d² (ŷ_bd − y_bd)²)`.
///
/// # Panics
/// If the slices differ in length or are not rows of `D` values.
pub fn rmse(pred: &[f64], target: &[f64], target_std: &[f64]) -> f64 {
    let d = target_std.len();
    assert!(
        pred.len() == target.len() && d > 0 && pred.len().is_multiple_of(d),
        "rmse: {} predictions for {} targets in rows of {d}",
        pred.len(),
        target.len()
    );
    let sse: f64 = pred
        .iter()
        .zip(target)
        .enumerate()
        .map(|(i, (p, t))| (target_std[i % d] * (p - t)).powi(2))
        .sum();
    (sse / pred.len() as f64).sqrt()
}

/// A log-density of standardised targets `y' = (y − m)/s` turned into one of original targets:
/// `ln p(y) = ln p(y') − Σ_d ln s_d`.
pub fn log_likelihood_in_original_units(ll_standardised: f64, target_std: &[f64]) -> f64 {
    ll_standardised - target_std.iter().map(|s| s.ln()).sum::<f64>()
}

fn rows(probs: &[f64], n_classes: usize) -> std::slice::Chunks<'_, f64> {
    assert!(
        n_classes > 0 && probs.len().is_multiple_of(n_classes),
        "probabilities of length {} are not rows of {n_classes} classes",
        probs.len()
    );
    probs.chunks(n_classes)
}

/// The first largest entry of `row` and its value (`(0, −∞)` for an empty row).
pub fn argmax(row: &[f64]) -> (usize, f64) {
    row.iter()
        .copied()
        .enumerate()
        .fold((0, f64::NEG_INFINITY), |best, (i, p)| {
            if p > best.1 { (i, p) } else { best }
        })
}

/// The first most probable class of every row (`argmax` of each row of `probs`).
pub fn predicted_labels(probs: &[f64], n_classes: usize) -> Vec<usize> {
    rows(probs, n_classes).map(|row| argmax(row).0).collect()
}

/// Fraction of rows whose most probable class is the label.
pub fn accuracy(probs: &[f64], n_classes: usize, labels: &[usize]) -> f64 {
    accuracy_of(&predicted_labels(probs, n_classes), labels)
}

/// Fraction of rows whose predicted class is the label (a model's own decisions, e.g.
/// [`ClassPrediction::predicted_class`](crate::predict::ClassPrediction::predicted_class),
/// which breaks an evidential head's ties by its outputs).
pub fn accuracy_of(predicted: &[usize], labels: &[usize]) -> f64 {
    assert_eq!(predicted.len(), labels.len(), "one prediction per label");
    let correct = predicted.iter().zip(labels).filter(|(p, l)| p == l).count();
    correct as f64 / labels.len() as f64
}

/// Error rate of each true class `c`: the share of rows labelled `c` whose most probable class
/// is another, `e_c = #{n : y_n = c, argmax p_n ≠ c} / #{n : y_n = c}`; `None` for a class
/// without rows. A class the model never predicts shows `e_c = 1`.
pub fn class_errors(probs: &[f64], n_classes: usize, labels: &[usize]) -> Vec<Option<f64>> {
    class_errors_of(&predicted_labels(probs, n_classes), n_classes, labels)
}

/// [`class_errors`] of given predicted classes.
pub fn class_errors_of(
    predicted: &[usize],
    n_classes: usize,
    labels: &[usize],
) -> Vec<Option<f64>> {
    assert_eq!(predicted.len(), labels.len(), "one prediction per label");
    let mut wrong = vec![0usize; n_classes];
    let mut seen = vec![0usize; n_classes];
    for (&p, &l) in predicted.iter().zip(labels) {
        assert!(l < n_classes, "label {l} is not one of {n_classes} classes");
        seen[l] += 1;
        if p != l {
            wrong[l] += 1;
        }
    }
    wrong
        .iter()
        .zip(&seen)
        .map(|(&w, &n)| (n > 0).then(|| w as f64 / n as f64))
        .collect()
}

/// Multi-class Brier score `mean_b Σ_c (p_bc − 1[y_b = c])²`.
pub fn brier(probs: &[f64], n_classes: usize, labels: &[usize]) -> f64 {
    let total: f64 = rows(probs, n_classes)
        .zip(labels)
        .map(|(row, &l)| {
            row.iter()
                .enumerate()
                .map(|(c, p)| (p - if c == l { 1.0 } else { 0.0 }).powi(2))
                .sum::<f64>()
        })
        .sum();
    total / labels.len() as f64
}

/// One bin of a reliability diagram.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReliabilityBin {
    /// Lower edge of the confidence bin.
    pub lower: f64,
    /// Upper edge.
    pub upper: f64,
    /// Mean confidence (max probability) of the rows in the bin.
    pub confidence: f64,
    /// Accuracy of those rows.
    pub accuracy: f64,
    /// Number of rows.
    pub count: usize,
}

/// Reliability-diagram data: rows binned by confidence into `bins` equal-width bins on [0, 1]
/// (a confidence of exactly 1 falls in the last bin). Empty bins have count 0.
pub fn reliability_curve(
    probs: &[f64],
    n_classes: usize,
    labels: &[usize],
    bins: usize,
) -> Vec<ReliabilityBin> {
    reliability_curve_of(
        probs,
        &predicted_labels(probs, n_classes),
        n_classes,
        labels,
        bins,
    )
}

/// [`reliability_curve`] of given predicted classes: a row's confidence is the probability of
/// its predicted class (its largest when the prediction is a most probable class, as
/// [`ClassPrediction::predicted_class`](crate::predict::ClassPrediction::predicted_class)'s).
pub fn reliability_curve_of(
    probs: &[f64],
    predicted: &[usize],
    n_classes: usize,
    labels: &[usize],
    bins: usize,
) -> Vec<ReliabilityBin> {
    assert!(bins > 0, "reliability_curve needs at least one bin");
    assert_eq!(predicted.len(), labels.len(), "one prediction per label");
    let mut conf = vec![0.0; bins];
    let mut hits = vec![0.0; bins];
    let mut count = vec![0usize; bins];
    for ((row, &pred), &l) in rows(probs, n_classes).zip(predicted).zip(labels) {
        let c = row[pred];
        let i = ((c * bins as f64) as usize).min(bins - 1);
        conf[i] += c;
        hits[i] += if pred == l { 1.0 } else { 0.0 };
        count[i] += 1;
    }
    (0..bins)
        .map(|i| {
            let n = count[i].max(1) as f64;
            ReliabilityBin {
                lower: i as f64 / bins as f64,
                upper: (i + 1) as f64 / bins as f64,
                confidence: conf[i] / n,
                accuracy: hits[i] / n,
                count: count[i],
            }
        })
        .collect()
}

/// Expected calibration error `Σ_m (|B_m|/n) |acc(B_m) − conf(B_m)|` over `bins` equal-width
/// confidence bins (15 is the usual choice, Guo et al. 2017).
pub fn ece(probs: &[f64], n_classes: usize, labels: &[usize], bins: usize) -> f64 {
    ece_of(
        probs,
        &predicted_labels(probs, n_classes),
        n_classes,
        labels,
        bins,
    )
}

/// [`ece`] of given predicted classes ([`reliability_curve_of`]).
pub fn ece_of(
    probs: &[f64],
    predicted: &[usize],
    n_classes: usize,
    labels: &[usize],
    bins: usize,
) -> f64 {
    let n = labels.len() as f64;
    reliability_curve_of(probs, predicted, n_classes, labels, bins)
        .iter()
        .map(|b| b.count as f64 / n * (b.accuracy - b.confidence).abs())
        .sum()
}

/// Entropy `−Σ p ln p` of each row.
pub fn entropies(probs: &[f64], n_classes: usize) -> Vec<f64> {
    rows(probs, n_classes)
        .map(|row| {
            -row.iter()
                .filter(|p| **p > 0.0)
                .map(|p| p * p.ln())
                .sum::<f64>()
        })
        .collect()
}

/// Area under the empirical CDF of OOD predictive entropies on `[0, ln C]`
/// (Haußmann 2021 §5; `spec/haussmann-thesis.md` §4.5): `ln C − mean(H)`, lower is better,
/// 0 when every OOD prediction is uniform. Entropies are clipped to `[0, ln C]`.
pub fn entropy_ecdf_area(entropies: &[f64], n_classes: usize) -> f64 {
    let max = (n_classes as f64).ln();
    max - mean(
        &entropies
            .iter()
            .map(|h| h.clamp(0.0, max))
            .collect::<Vec<_>>(),
    )
}

/// Ranks (1-based) with ties given their average rank.
fn average_ranks(values: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..values.len()).collect();
    idx.sort_by(|&a, &b| values[a].partial_cmp(&values[b]).unwrap_or(Ordering::Equal));
    let mut ranks = vec![0.0; values.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && values[idx[j + 1]] == values[idx[i]] {
            j += 1;
        }
        let r = (i + j) as f64 / 2.0 + 1.0;
        for k in &idx[i..=j] {
            ranks[*k] = r;
        }
        i = j + 1;
    }
    ranks
}

/// Area under the ROC curve for separating `out` (positives) from `inn` (negatives) by score,
/// ties counted one half (the Mann–Whitney statistic).
pub fn auroc(inn: &[f64], out: &[f64]) -> f64 {
    let all: Vec<f64> = out.iter().chain(inn).copied().collect();
    let ranks = average_ranks(&all);
    let (np, nn) = (out.len() as f64, inn.len() as f64);
    let rank_sum: f64 = ranks[..out.len()].iter().sum();
    (rank_sum - np * (np + 1.0) / 2.0) / (np * nn)
}

/// Scored examples sorted by descending score, with tied scores grouped; each group is
/// `(positives, negatives)`.
fn threshold_groups(inn: &[f64], out: &[f64]) -> Vec<(f64, f64)> {
    let mut scored: Vec<(f64, bool)> = out
        .iter()
        .map(|s| (*s, true))
        .chain(inn.iter().map(|s| (*s, false)))
        .collect();
    scored.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(Ordering::Equal));
    let mut groups = Vec::new();
    let mut i = 0;
    while i < scored.len() {
        let (mut tp, mut fp) = (0.0, 0.0);
        let mut j = i;
        while j < scored.len() && scored[j].0 == scored[i].0 {
            if scored[j].1 {
                tp += 1.0
            } else {
                fp += 1.0
            }
            j += 1;
        }
        groups.push((tp, fp));
        i = j;
    }
    groups
}

/// Area under the precision–recall curve with OOD as positive (average precision, the
/// step-wise sum `Σ (R_k − R_{k−1}) P_k` over thresholds).
pub fn aupr(inn: &[f64], out: &[f64]) -> f64 {
    let np = out.len() as f64;
    let (mut tp, mut fp, mut area) = (0.0, 0.0, 0.0);
    for (gtp, gfp) in threshold_groups(inn, out) {
        tp += gtp;
        fp += gfp;
        area += gtp / np * (tp / (tp + fp));
    }
    area
}

/// False-positive rate (in-distribution flagged as OOD) at the first threshold reaching 95 %
/// true-positive rate on the OOD set.
pub fn fpr_at_95_tpr(inn: &[f64], out: &[f64]) -> f64 {
    let (np, nn) = (out.len() as f64, inn.len() as f64);
    let (mut tp, mut fp) = (0.0, 0.0);
    for (gtp, gfp) in threshold_groups(inn, out) {
        tp += gtp;
        fp += gfp;
        if tp / np >= 0.95 {
            return fp / nn;
        }
    }
    1.0
}

/// Fraction of targets inside the central `level` interval `mean ± z σ` of Gaussian predictive
/// marginals (e.g. `level = 0.95` gives `z = 1.96`).
pub fn interval_coverage(mean: &[f64], std: &[f64], target: &[f64], level: f64) -> f64 {
    assert!(
        level > 0.0 && level < 1.0,
        "coverage level must be in (0, 1), got {level}"
    );
    let z = normal_quantile(0.5 + level / 2.0);
    let inside = mean
        .iter()
        .zip(std)
        .zip(target)
        .filter(|((m, s), y)| (*y - *m).abs() <= z * *s)
        .count();
    inside as f64 / target.len() as f64
}

/// Fraction of probability-integral-transform values `F(y)` (the predictive CDF at each target)
/// inside the central interval of probability `level`, `|F(y) − ½| ≤ level/2`: the same as
/// [`interval_coverage`] for a Gaussian predictive, and defined for any continuous one (a
/// mixture of draws).
pub fn pit_coverage(pit: &[f64], level: f64) -> f64 {
    assert!(
        level > 0.0 && level < 1.0,
        "coverage level must be in (0, 1), got {level}"
    );
    let inside = pit
        .iter()
        .filter(|f| (*f - 0.5).abs() <= level / 2.0)
        .count();
    inside as f64 / pit.len() as f64
}

/// The split-conformal quantile of calibration `scores` at miscoverage `α`: the
/// `⌈(n + 1)(1 − α)⌉`-th smallest score (infinite when that rank passes `n`: too few
/// calibration points for this `α`; Angelopoulos & Bates 2023, §1).
pub fn conformal_quantile(mut scores: Vec<f64>, alpha: f64) -> f64 {
    let n = scores.len();
    let rank = ((n as f64 + 1.0) * (1.0 - alpha)).ceil() as usize;
    if rank > n {
        return f64::INFINITY;
    }
    scores.sort_by(f64::total_cmp);
    scores[rank.max(1) - 1]
}

/// Split-conformal coverage at `level` from PIT values `F(y)`, calibrated on the even-numbered
/// rows and measured on the odd-numbered ones: the score `|F(y) − ½|` makes the interval
/// `{y : |F(y) − ½| ≤ q̂}` (conformal by the predictive CDF, Chernozhukov et al. 2021), which
/// covers at least `level` of exchangeable fresh rows whatever the predictive. `None` with
/// fewer than two rows.
pub fn conformal_pit_coverage(pit: &[f64], level: f64) -> Option<f64> {
    assert!(
        level > 0.0 && level < 1.0,
        "coverage level must be in (0, 1), got {level}"
    );
    if pit.len() < 2 {
        return None;
    }
    let score = |f: &f64| (f - 0.5).abs();
    let calibration = pit.iter().step_by(2).map(score).collect();
    let q = conformal_quantile(calibration, 1.0 - level);
    let held: Vec<f64> = pit.iter().skip(1).step_by(2).map(score).collect();
    Some(held.iter().filter(|&&s| s <= q).count() as f64 / held.len() as f64)
}

/// Standard normal quantile by bisection on `Φ` (erfc-based, ~1e-12 accuracy).
fn normal_quantile(p: f64) -> f64 {
    let (mut lo, mut hi) = (-40.0, 40.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if standard_normal_cdf(mid) < p {
            lo = mid
        } else {
            hi = mid
        }
    }
    0.5 * (lo + hi)
}

/// `Φ(x)` in f64, from [`erfc`].
pub(crate) fn standard_normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// Complementary error function in f64: the Maclaurin series of erf below 3 (absolute error
/// ~1e-13 after cancellation) and the continued fraction
/// `erfc x = e^{−x²}/√π · 1/(x + ½/(x + 1/(x + 3/2/(x + …))))` above.
fn erfc(x: f64) -> f64 {
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 3.0 {
        // erf by its Maclaurin series: Σ (−1)ⁿ x^{2n+1} / (n! (2n+1)) · 2/√π.
        let mut term = x;
        let mut sum = x;
        let x2 = x * x;
        for n in 1..200 {
            term *= -x2 / n as f64;
            let add = term / (2 * n + 1) as f64;
            sum += add;
            if add.abs() < 1e-17 {
                break;
            }
        }
        1.0 - sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // Continued fraction (Lentz) for erfc at large x.
        let mut f = 0.0;
        for k in (1..60).rev() {
            f = (k as f64 / 2.0) / (x + f);
        }
        (-x * x).exp() / (std::f64::consts::PI.sqrt() * (x + f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A predictive twice too narrow covers about 59 % of its nominal 90 % interval; split
    /// conformal calibration on half the rows brings the other half's coverage to 0.90 within
    /// its binomial band (plus the rank's upward step of at most `1/(n_cal + 1)`).
    #[test]
    fn conformal_pit_coverage_repairs_a_too_narrow_predictive() {
        let n = 20_000;
        let z = crate::testing::host_normals(n, 21);
        // y ~ N(0, 1) under a predictive N(0, 0.5²): F(y) = Φ(2y).
        let pit: Vec<f64> = z
            .iter()
            .map(|&y| 0.5 * erfc(-2.0 * y / std::f64::consts::SQRT_2))
            .collect();
        let raw = pit_coverage(&pit, 0.9);
        assert!((raw - 0.59).abs() < 0.02, "{raw}");
        let held = (n / 2) as f64;
        let band = 4.0 * (0.9 * 0.1 / held).sqrt();
        let got = conformal_pit_coverage(&pit, 0.9).unwrap();
        assert!(got > 0.9 - band && got < 0.9 + band + 1.0 / held, "{got}");
        assert_eq!(conformal_pit_coverage(&pit[..1], 0.9), None);
        // Too few calibration rows for the level: an infinite quantile covers everything.
        assert_eq!(conformal_pit_coverage(&pit[..6], 0.9), Some(1.0));
    }

    #[test]
    fn ece_on_a_hand_computed_case() {
        // 4 rows, 2 classes, 2 bins. Confidences 0.9, 0.8 (bin 1), 0.6, 0.7 (bin 1); with 2
        // bins everything ≥ 0.5 lands in bin 1: conf = 0.75, accuracy = 2/4 → ECE = 0.25.
        let probs = [0.9, 0.1, 0.2, 0.8, 0.6, 0.4, 0.3, 0.7];
        let labels = [0, 1, 1, 0];
        assert!((ece(&probs, 2, &labels, 2) - 0.25).abs() < 1e-12);
        // With 10 bins: bins 0.9 (acc 1), 0.8 (acc 1), 0.6 (acc 0), 0.7 (acc 0):
        // ECE = ¼(0.1 + 0.2 + 0.6 + 0.7) = 0.4.
        assert!((ece(&probs, 2, &labels, 10) - 0.4).abs() < 1e-12);
        let curve = reliability_curve(&probs, 2, &labels, 10);
        assert_eq!(curve.iter().map(|b| b.count).sum::<usize>(), 4);
        assert!((accuracy(&probs, 2, &labels) - 0.5).abs() < 1e-12);
        // Labels 0 (rows 1, 4) get 0 and 1; labels 1 (rows 2, 3) get 1 and 0.
        assert_eq!(class_errors(&probs, 2, &labels), vec![Some(0.5), Some(0.5)]);
        let never_zero = [0.2, 0.5, 0.3, 0.1, 0.1, 0.8];
        assert_eq!(
            class_errors(&never_zero, 3, &[0, 0]),
            vec![Some(1.0), None, None]
        );
        let b = brier(&probs, 2, &labels);
        let expect = (2.0 * 0.01 + 2.0 * 0.04 + 2.0 * 0.36 + 2.0 * 0.49) / 4.0;
        assert!((b - expect).abs() < 1e-12);
    }

    #[test]
    fn given_decisions_score_ties_as_decided() {
        // Row 2 is a three-way tie; its model decided class 2 (e.g. by an evidential head's
        // outputs), where the first-index argmax says 0.
        let probs = [0.8, 0.1, 0.1, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0];
        let labels = [0, 2];
        assert_eq!(predicted_labels(&probs, 3), vec![0, 0]);
        assert!((accuracy(&probs, 3, &labels) - 0.5).abs() < 1e-12);
        let decided = [0, 2];
        assert!((accuracy_of(&decided, &labels) - 1.0).abs() < 1e-12);
        assert_eq!(
            class_errors(&probs, 3, &labels),
            vec![Some(0.0), None, Some(1.0)]
        );
        assert_eq!(
            class_errors_of(&decided, 3, &labels),
            vec![Some(0.0), None, Some(0.0)]
        );
        // Both rows right, confidences 0.8 and 1/3 (10 bins): ECE = ½(0.2 + 2/3).
        let e = ece_of(&probs, &decided, 3, &labels, 10);
        assert!((e - 0.5 * (0.2 + 2.0 / 3.0)).abs() < 1e-12, "{e}");
        // The first-index decisions get row 2 wrong: ECE = ½(0.2 + 1/3).
        let e = ece(&probs, 3, &labels, 10);
        assert!((e - 0.5 * (0.2 + 1.0 / 3.0)).abs() < 1e-12, "{e}");
        let curve = reliability_curve_of(&probs, &decided, 3, &labels, 10);
        assert_eq!(curve[3].count, 1);
        assert!((curve[3].accuracy - 1.0).abs() < 1e-12);
    }

    #[test]
    fn auroc_on_hand_computed_cases() {
        assert_eq!(auroc(&[0.1, 0.2], &[0.8, 0.9]), 1.0);
        assert_eq!(auroc(&[0.8, 0.9], &[0.1, 0.2]), 0.0);
        // out = {0.5, 0.3}, in = {0.4, 0.3}: pairs (0.5>0.4)=1, (0.5>0.3)=1, (0.3<0.4)=0,
        // (0.3=0.3)=½ → 2.5/4.
        assert!((auroc(&[0.4, 0.3], &[0.5, 0.3]) - 0.625).abs() < 1e-12);
        assert!((aupr(&[0.1, 0.2], &[0.8, 0.9]) - 1.0).abs() < 1e-12);
        // Ranking out, in, out: AP = ½·1 + ½·(2/3).
        assert!((aupr(&[0.5], &[0.9, 0.1]) - (0.5 + 1.0 / 3.0)).abs() < 1e-12);
        assert_eq!(fpr_at_95_tpr(&[0.1, 0.2], &[0.8, 0.9]), 0.0);
        assert_eq!(fpr_at_95_tpr(&[0.5, 0.6], &[0.55, 0.9]), 0.5);
    }

    #[test]
    fn entropy_ecdf_area_on_hand_computed_cases() {
        let ln10 = 10f64.ln();
        // Uniform predictions on OOD: area 0. Confident ones: area ln C.
        let uniform = vec![0.1; 20];
        let h = entropies(&uniform, 10);
        assert!(entropy_ecdf_area(&h, 10).abs() < 1e-12);
        let mut confident = vec![0.0; 20];
        confident[3] = 1.0;
        confident[10 + 7] = 1.0;
        assert!((entropy_ecdf_area(&entropies(&confident, 10), 10) - ln10).abs() < 1e-12);
        // ECDF of {0.5, 1.5} on [0, ln 10]: ∫F = (ln10 − 0.5)/2 + (ln10 − 1.5)/2.
        let area = entropy_ecdf_area(&[0.5, 1.5], 10);
        assert!((area - (ln10 - 1.0)).abs() < 1e-12);
    }

    #[test]
    fn coverage_and_quantiles() {
        assert!((normal_quantile(0.975) - 1.959_963_984_540_054).abs() < 1e-9);
        let mean = [0.0; 4];
        let std = [1.0; 4];
        let y = [0.5, -1.9, 2.5, -3.0];
        assert_eq!(interval_coverage(&mean, &std, &y, 0.95), 0.5);
        assert_eq!(pit_coverage(&[0.05, 0.5, 0.951, 0.0], 0.9), 0.5);
        let (m, se) = mean_and_standard_error(&[1.0, 2.0, 3.0, 4.0]);
        let se = se.expect("four values have a standard error");
        assert!((m - 2.5).abs() < 1e-12 && (se - (5.0f64 / 12.0).sqrt()).abs() < 1e-12);
        // One value has a mean but no standard error (not a zero one); none has neither.
        assert_eq!(mean_and_standard_error(&[-2.5]), (-2.5, None));
        let (m, se) = mean_and_standard_error(&[]);
        assert!(m.is_nan() && se.is_none());
        assert!((rmse(&[1.0, 3.0], &[0.0, 3.0], &[2.0]) - 2.0f64.sqrt()).abs() < 1e-12);
        // Two dimensions with their own scales: errors (1, 0) and (0, 2), scales (3, 1).
        let r = rmse(&[1.0, 0.0, 0.0, 2.0], &[0.0; 4], &[3.0, 1.0]);
        assert!((r - (13.0f64 / 4.0).sqrt()).abs() < 1e-12);
    }
}
