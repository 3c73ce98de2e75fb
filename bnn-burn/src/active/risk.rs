//! Active testing (Farquhar 2022 §5.2): a fixed model's test risk from a few actively chosen
//! test labels, unbiased by LURE's weights.

use super::select::{Pick, Selection, select};
use super::weights::lure_weights;
use crate::error::ConfigError;
use crate::host::HostNormals;

/// An active test's picks and estimates.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ActiveTest {
    /// The test rows labelled, in pick order, with their `q`.
    pub picks: Vec<Pick>,
    /// Their losses, in pick order.
    pub losses: Vec<f64>,
    /// `R_LURE`: unbiased for the test pool's mean loss.
    pub lure: f64,
    /// The plain mean of the picked losses (biased towards what the scores favour).
    pub plain: f64,
}

/// Labels `m` rows of a test pool of `scores.len()` rows, one at a time by `selection` over
/// `scores` (fixed: the model does not change), reads each picked row's loss with `loss`, and
/// estimates the pool's mean loss by `R_LURE`. Scores that track the loss (a classifier's
/// predictive entropy for its cross-entropy) make the estimate's variance small; a stochastic
/// selection keeps it unbiased.
///
/// # Errors
/// `m` of 0 or above the pool, scores not finite, a selection out of range, or a loss that is
/// not finite (its row named).
pub fn active_test(
    selection: Selection,
    scores: &[f64],
    m: usize,
    mut loss: impl FnMut(usize) -> f64,
    rng: &mut HostNormals,
) -> Result<ActiveTest, ConfigError> {
    let n = scores.len();
    let pool: Vec<usize> = (0..n).collect();
    let picks = select(selection, &pool, Some(scores), m, rng)?;
    let mut losses = Vec::with_capacity(m);
    for p in &picks {
        let l = loss(p.row);
        if !l.is_finite() {
            return Err(ConfigError {
                config: "active_test",
                field: "loss",
                value: format!("loss({}) = {l}", p.row),
                expected: "finite losses",
            });
        }
        losses.push(l);
    }
    let q: Vec<f64> = picks.iter().map(|p| p.q).collect();
    let weights = lure_weights(n, &q)?;
    let mf = m as f64;
    Ok(ActiveTest {
        lure: losses.iter().zip(&weights).map(|(l, w)| l * w).sum::<f64>() / mf,
        plain: losses.iter().sum::<f64>() / mf,
        picks,
        losses,
    })
}
