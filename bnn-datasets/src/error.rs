//! The error type of every loader and transform: it says what is wrong, where (file, line,
//! byte offset), what was expected and what was found, so that a user can act on it.

use std::path::PathBuf;

/// A data-loading or data-shape error.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// No rows where some were needed.
    #[error("{what} is empty: at least one row is needed")]
    Empty {
        /// What was empty.
        what: String,
    },
    /// A size that does not fit.
    #[error("{what}: expected {expected}, found {found}")]
    Shape {
        /// What has the wrong size.
        what: String,
        /// What was expected.
        expected: String,
        /// What was found.
        found: String,
    },
    /// A NaN or infinite value.
    #[error("{what}: non-finite value {value} at row {row}, column {column}")]
    NonFinite {
        /// Where.
        what: String,
        /// Row index (0-based).
        row: usize,
        /// Column index (0-based).
        column: usize,
        /// The value found.
        value: f64,
    },
    /// A data file that is not where any of the searched roots would put it.
    #[error(
        "data file {file} not found; looked in:\n{}\nDownload it from {url} (or set BNN_DATA_DIR \
         to the folder that holds it, or pass --data-dir)",
        tried.iter().map(|p| format!("  {}", p.display())).collect::<Vec<_>>().join("\n")
    )]
    Missing {
        /// The file, relative to the data root.
        file: String,
        /// Every full path tried, in order.
        tried: Vec<PathBuf>,
        /// Where to get it.
        url: String,
    },
    /// A folder given as a data set that does not hold one.
    #[error("{}: not a data set folder: expected {expected}", dir.display())]
    NotADataSet {
        /// The folder.
        dir: PathBuf,
        /// What the folder should hold.
        expected: String,
    },
    /// An operating-system error while reading a file.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A binary file whose bytes do not follow its format.
    #[error("{}: at byte offset {offset}: expected {expected}, found {found}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// Byte offset of the problem (for gzip files, in the decompressed stream).
        offset: u64,
        /// What was expected.
        expected: String,
        /// What was found.
        found: String,
    },
    /// A text file with a bad line.
    #[error("{}: line {line}: expected {expected}, found {found}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What was expected.
        expected: String,
        /// What was found.
        found: String,
    },
    /// An argument outside its range (e.g. a split number past `n_splits`).
    #[error("{what}: {found} is out of range; expected {expected}")]
    OutOfRange {
        /// Which argument.
        what: String,
        /// The allowed range.
        expected: String,
        /// The value given.
        found: String,
    },
}
