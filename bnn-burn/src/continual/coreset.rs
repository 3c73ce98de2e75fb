//! The k-center coreset.

use crate::error::ConfigError;

/// `k` rows of `x` (`n × d`, row-major) by greedy k-center: row `first`, then repeatedly the
/// row farthest (Euclidean) from every row chosen so far, ties to the lower index (VCL's
/// coreset, Nguyen et al. 2018; within a factor 2 of the best covering radius). Rows in pick
/// order.
///
/// # Errors
/// `d` of 0 or not dividing `x`, `k` above the rows, `first` not a row, or a non-finite input.
pub fn k_center(x: &[f64], d: usize, k: usize, first: usize) -> Result<Vec<usize>, ConfigError> {
    let bad = |field, value: String, expected| ConfigError {
        config: "k_center",
        field,
        value,
        expected,
    };
    if d == 0 || !x.len().is_multiple_of(d) {
        return Err(bad(
            "d",
            format!("{d} for {} values", x.len()),
            "a width that divides the values",
        ));
    }
    let n = x.len() / d;
    if k > n {
        return Err(bad("k", format!("{k} of {n} rows"), "at most the rows"));
    }
    if k > 0 && first >= n {
        return Err(bad("first", format!("{first} of {n} rows"), "a row"));
    }
    if let Some(i) = x.iter().position(|v| !v.is_finite()) {
        return Err(bad(
            "x",
            format!("row {} holds {}", i / d, x[i]),
            "finite inputs",
        ));
    }
    let row = |i: usize| &x[i * d..(i + 1) * d];
    let dist2 = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(u, v)| (u - v).powi(2)).sum::<f64>();
    let mut chosen = Vec::with_capacity(k);
    let mut nearest = vec![f64::INFINITY; n];
    let mut current = first;
    for _ in 0..k {
        chosen.push(current);
        let c = row(current);
        for (i, m) in nearest.iter_mut().enumerate() {
            *m = m.min(dist2(row(i), c));
        }
        // The farthest row from the chosen set (chosen rows sit at 0).
        current = (0..n).fold(
            0,
            |best, i| if nearest[i] > nearest[best] { i } else { best },
        );
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The covering radius of `centres`: the largest distance from a row to its nearest centre.
    fn radius(x: &[f64], d: usize, centres: &[usize]) -> f64 {
        (0..x.len() / d)
            .map(|i| nearest_distance(x, d, i, centres))
            .fold(0.0, f64::max)
    }

    /// The distance from row `i` to its nearest row of `centres`.
    fn nearest_distance(x: &[f64], d: usize, i: usize, centres: &[usize]) -> f64 {
        centres
            .iter()
            .map(|c| {
                (0..d)
                    .map(|j| (x[i * d + j] - x[c * d + j]).powi(2))
                    .sum::<f64>()
            })
            .fold(f64::INFINITY, f64::min)
            .sqrt()
    }

    #[test]
    fn k_center_picks_the_farthest_row_each_time_within_twice_the_best_radius() {
        let mut rng = crate::host::HostNormals::new(8);
        let (n, d) = (14, 2);
        let x: Vec<f64> = (0..n * d).map(|_| rng.next()).collect();
        for k in 1..=4 {
            let c = k_center(&x, d, k, 3).unwrap();
            assert_eq!(c[0], 3);
            // Each pick is the farthest row from those before it: its distance to them is their
            // covering radius.
            for m in 1..k {
                let to_before = nearest_distance(&x, d, c[m], &c[..m]);
                assert!(
                    (to_before - radius(&x, d, &c[..m])).abs() < 1e-12,
                    "pick {m} of {c:?}"
                );
            }
            // Within twice the best radius over every k-subset (brute force).
            let mut best = f64::INFINITY;
            let mut subset = vec![0usize; k];
            fn each(
                n: usize,
                k: usize,
                start: usize,
                at: usize,
                s: &mut Vec<usize>,
                f: &mut dyn FnMut(&[usize]),
            ) {
                if at == k {
                    f(s);
                    return;
                }
                for i in start..n {
                    s[at] = i;
                    each(n, k, i + 1, at + 1, s, f);
                }
            }
            each(n, k, 0, 0, &mut subset, &mut |s| {
                best = best.min(radius(&x, d, s))
            });
            assert!(radius(&x, d, &c) <= 2.0 * best + 1e-12, "k = {k}");
        }
        // Distinct rows; bad input named.
        let all = k_center(&x, d, n, 0).unwrap();
        let mut sorted = all.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..n).collect::<Vec<_>>());
        for (k, first, d, field) in [(15, 0, 2, "k"), (2, 14, 2, "first"), (2, 0, 3, "d")] {
            assert_eq!(k_center(&x, d, k, first).unwrap_err().field, field);
        }
    }
}
