//! Published numbers beside the bench's tables, as data files in `bnn-bench/published/`
//! (compiled in, so the binary needs no files): `columns.csv` names every published column's
//! source, what its ± is and its errata; `uci.csv`, `depeweg.csv` and `mnist.csv` hold the
//! numbers as printed (`brack.csv`: the eight-schools table). One loader ([`read`]) reads them all; [`uci`], [`depeweg`] and
//! [`mnist`] give each table its typed view. Adding a published column is a data-file edit.

use bnn_datasets::delimited::csv_fields;

pub mod brack;
pub mod depeweg;
pub mod farquhar;
pub mod ledger;
pub mod mnist;
pub mod uci;

/// The data files, by name.
const FILES: [(&str, &str); 7] = [
    ("columns.csv", include_str!("../../published/columns.csv")),
    ("ledger.csv", include_str!("../../published/ledger.csv")),
    ("uci.csv", include_str!("../../published/uci.csv")),
    ("depeweg.csv", include_str!("../../published/depeweg.csv")),
    ("mnist.csv", include_str!("../../published/mnist.csv")),
    ("brack.csv", include_str!("../../published/brack.csv")),
    ("farquhar.csv", include_str!("../../published/farquhar.csv")),
];

/// One row of a data file: its fields by the header's names.
#[derive(Debug, Clone)]
pub struct Row {
    file: &'static str,
    line: usize,
    fields: Vec<(String, String)>,
}

impl Row {
    /// The text of `field` (empty when the cell is).
    ///
    /// # Panics
    /// When the file has no such column: a shipped file that does not match its loader.
    pub fn text(&self, field: &str) -> &str {
        self.fields
            .iter()
            .find(|(k, _)| k == field)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("{}: no column {field:?}", self.file))
    }

    /// `field` as a number; `None` when the cell is empty.
    ///
    /// # Panics
    /// When the cell is not a number (naming the file and line).
    pub fn number(&self, field: &str) -> Option<f64> {
        let t = self.text(field);
        (!t.is_empty()).then(|| {
            t.parse().unwrap_or_else(|_| {
                panic!(
                    "{} line {}: {field} {t:?} is not a number",
                    self.file, self.line
                )
            })
        })
    }
}

/// The rows of data file `name` (lines starting with `#` are comments; the first other line
/// is the header; fields are comma-separated, quoted with `"` where they hold a comma, a `""`
/// inside quotes standing for one quote).
///
/// # Panics
/// On an unknown file or a malformed line: the shipped files are checked by the tests.
pub fn read(name: &str) -> Vec<Row> {
    let (file, text) = FILES
        .iter()
        .find(|(f, _)| *f == name)
        .unwrap_or_else(|| panic!("no published data file {name:?}"));
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty());
    let header = match lines.next() {
        Some((_, h)) => csv_fields(h).unwrap_or_else(|e| panic!("{file} header: {e}")),
        None => return Vec::new(),
    };
    lines
        .map(|(i, l)| {
            let values = csv_fields(l).unwrap_or_else(|e| panic!("{file} line {}: {e}", i + 1));
            assert_eq!(
                values.len(),
                header.len(),
                "{file} line {}: {} fields where the header has {}",
                i + 1,
                values.len(),
                header.len()
            );
            Row {
                file,
                line: i + 1,
                fields: header.iter().cloned().zip(values).collect(),
            }
        })
        .collect()
}

/// What a published `±` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// A standard error.
    StandardError,
    /// A standard deviation (over splits or runs).
    StandardDeviation,
}

/// One published column's description (`columns.csv`).
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// The column's name in its table.
    pub name: String,
    /// Where its numbers come from.
    pub source: String,
    /// What its printed `±` is.
    pub spread: Spread,
    /// Our methods that implement it.
    pub counterparts: Vec<String>,
    /// Known errata and caveats of the source.
    pub errata: String,
}

/// The published columns of `table` (uci, depeweg, mnist), in file order.
///
/// # Panics
/// On a `pm` other than `se` and `sd`.
pub fn columns(table: &str) -> Vec<Column> {
    read("columns.csv")
        .into_iter()
        .filter(|r| r.text("table") == table)
        .map(|r| Column {
            name: r.text("column").to_string(),
            source: r.text("source").to_string(),
            spread: match r.text("pm") {
                "se" => Spread::StandardError,
                "sd" => Spread::StandardDeviation,
                other => panic!("columns.csv line {}: pm {other:?} (se or sd)", r.line),
            },
            counterparts: r
                .text("counterparts")
                .split(';')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            errata: r.text("errata").to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_data_file_reads_and_every_cell_names_a_described_column() {
        for table in ["uci", "depeweg", "mnist"] {
            let names: Vec<String> = columns(table).into_iter().map(|c| c.name).collect();
            assert!(!names.is_empty(), "{table}");
            let (file, key) = match table {
                "mnist" => ("mnist.csv", "source"),
                t => (if t == "uci" { "uci.csv" } else { "depeweg.csv" }, "column"),
            };
            for r in read(file) {
                assert!(
                    names.iter().any(|n| n == r.text(key)),
                    "{file} line {}: {:?} is not a column of columns.csv",
                    r.line,
                    r.text(key)
                );
            }
        }
    }
}
