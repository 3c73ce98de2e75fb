//! The `uci` table's published columns (`uci.csv`): each a test LL and a test RMSE cell per
//! data set, stored as `(mean, standard error)`. A column whose source printed standard
//! deviations over the protocol's splits is converted (`sd/√n`) and says so.

use super::{Column, Spread};
use bnn_datasets::UciDataset;

/// `(mean, standard error)` over splits; `None` where the source has no entry.
pub type Cell = Option<(f64, f64)>;

/// One published column, with its cells in [`UciDataset::ALL`]'s order (boston, concrete,
/// energy, kin8nm, naval, power, protein, wine, yacht).
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedColumn {
    /// The column's name, source, ± and errata.
    pub column: Column,
    /// Test log-likelihood per data set.
    pub test_ll: [Cell; 9],
    /// Test RMSE per data set.
    pub test_rmse: [Cell; 9],
}

impl PublishedColumn {
    /// How the report's source line describes the column's `±`.
    pub fn describe_spread(&self) -> &'static str {
        match self.column.spread {
            Spread::StandardError => "± as printed (standard errors)",
            Spread::StandardDeviation => {
                "printed ± are standard deviations over splits, shown here divided by √20 (√5 for \
                 protein)"
            }
        }
    }
}

/// Every published column of the `uci` table, in `columns.csv`'s order.
///
/// # Panics
/// On a cell of an unknown data set or metric, or a standard-deviation cell without its split
/// count: the shipped files are checked by the tests.
pub fn all() -> Vec<PublishedColumn> {
    let cells = super::read("uci.csv");
    super::columns("uci")
        .into_iter()
        .map(|column| {
            let mut p = PublishedColumn {
                column,
                test_ll: [None; 9],
                test_rmse: [None; 9],
            };
            for r in cells.iter().filter(|r| r.text("column") == p.column.name) {
                let set: UciDataset = r
                    .text("dataset")
                    .parse()
                    .unwrap_or_else(|e| panic!("uci.csv line {}: {e}", r.line));
                let i = UciDataset::ALL
                    .iter()
                    .position(|d| *d == set)
                    .expect("one of 9");
                let (mean, pm) = (
                    r.number("mean").expect("a mean"),
                    r.number("pm").expect("a ±"),
                );
                let se = match p.column.spread {
                    Spread::StandardError => pm,
                    Spread::StandardDeviation => {
                        let n = r
                            .number("splits")
                            .unwrap_or_else(|| panic!("uci.csv line {}: no splits", r.line));
                        pm / n.sqrt()
                    }
                };
                match r.text("metric") {
                    "test_ll" => p.test_ll[i] = Some((mean, se)),
                    "test_rmse" => p.test_rmse[i] = Some((mean, se)),
                    m => panic!("uci.csv line {}: metric {m:?}", r.line),
                }
            }
            p
        })
        .collect()
}
