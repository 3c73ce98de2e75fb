//! The `mnist` table's published rows (`mnist.csv`): Haußmann (2021) Tables 5.2, 3.2 and 5.3.

use crate::mnist::{Arch, TrainSet};

/// One published method: test error (%) on its task and, where reported, the run-to-run
/// standard deviation, the test log-likelihood, and the area under the ECDF of predictive
/// entropies on the first OOD set (↓).
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedMnist {
    /// Method as printed.
    pub method: String,
    /// Our catalogue's method trained as the published one was (usually `method`; Table 5.2's
    /// DVI is [`crate::catalogue::Method::dvi_sampled`]).
    pub counterpart: String,
    /// The task trained and tested on.
    pub family: TrainSet,
    /// The published net: [`Arch::LeNet5`] (the strided one) or [`Arch::Conv96`].
    pub net: Arch,
    /// Test error in %.
    pub error_pct: f64,
    /// Standard deviation of the error over the published runs, when printed.
    pub error_std: Option<f64>,
    /// Test log-likelihood per image (nats), when printed.
    pub log_likelihood: Option<f64>,
    /// The first OOD set's entropy-ECDF area, when the table has it.
    pub ecdf_area: Option<f64>,
    /// Where the number comes from (its column of `columns.csv`, in words).
    pub source: String,
}

/// The published rows, in `mnist.csv`'s order.
///
/// # Panics
/// On a task or net the bench does not know: the shipped file is checked by the tests.
pub fn all() -> Vec<PublishedMnist> {
    let sources = super::columns("mnist");
    super::read("mnist.csv")
        .into_iter()
        .map(|r| {
            let key = r.text("source");
            let source = sources
                .iter()
                .find(|c| c.name == key)
                .map_or_else(|| key.to_string(), |c| c.source.clone());
            PublishedMnist {
                method: r.text("method").to_string(),
                counterpart: r.text("counterpart").to_string(),
                family: crate::mnist::parse_family(r.text("task"))
                    .unwrap_or_else(|e| panic!("mnist.csv: {e}")),
                net: r
                    .text("net")
                    .parse()
                    .unwrap_or_else(|e| panic!("mnist.csv: {e}")),
                error_pct: r.number("error_pct").expect("an error"),
                error_std: r.number("error_sd"),
                log_likelihood: r.number("log_likelihood"),
                ecdf_area: r.number("ecdf_area"),
                source,
            }
        })
        .collect()
}
