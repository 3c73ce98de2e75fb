//! Error values for invalid configurations.

use std::fmt;

/// A configuration value outside its allowed range.
///
/// Returned by every `XxxConfig::init` / `validate` in this crate, so that the caller learns
/// which field is wrong, what it held, and what would be accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// The configuration type, e.g. `MeanFieldLinearConfig`.
    pub config: &'static str,
    /// The offending field, e.g. `prior.std`.
    pub field: &'static str,
    /// The value that was given, formatted.
    pub value: String,
    /// The allowed range in words, e.g. `a finite number > 0`.
    pub expected: &'static str,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: `{}` = {} is invalid; expected {}",
            self.config, self.field, self.value, self.expected
        )
    }
}

impl std::error::Error for ConfigError {}

/// Small helpers to state range checks in one line each.
pub(crate) struct Check(pub &'static str);

impl Check {
    /// `value` must be finite and strictly positive.
    pub fn positive(&self, field: &'static str, value: f64) -> Result<(), ConfigError> {
        if value.is_finite() && value > 0.0 {
            Ok(())
        } else {
            Err(self.err(field, value, "a finite number > 0"))
        }
    }

    /// `value` must be finite.
    pub fn finite(&self, field: &'static str, value: f64) -> Result<(), ConfigError> {
        if value.is_finite() {
            Ok(())
        } else {
            Err(self.err(field, value, "a finite number"))
        }
    }

    /// `value` must be finite and `>= 0`.
    pub fn non_negative(&self, field: &'static str, value: f64) -> Result<(), ConfigError> {
        if value.is_finite() && value >= 0.0 {
            Ok(())
        } else {
            Err(self.err(field, value, "a finite number >= 0"))
        }
    }

    /// `value` must lie in `[0, 1)` (a drop probability).
    pub fn probability(&self, field: &'static str, value: f64) -> Result<(), ConfigError> {
        if value.is_finite() && (0.0..1.0).contains(&value) {
            Ok(())
        } else {
            Err(self.err(field, value, "a probability in [0, 1)"))
        }
    }

    /// `value` must lie in the open interval `(0, 1)`.
    pub fn open_unit(&self, field: &'static str, value: f64) -> Result<(), ConfigError> {
        if value.is_finite() && value > 0.0 && value < 1.0 {
            Ok(())
        } else {
            Err(self.err(field, value, "a number in the open interval (0, 1)"))
        }
    }

    /// A count that must be at least one.
    pub fn at_least_one(&self, field: &'static str, value: usize) -> Result<(), ConfigError> {
        if value >= 1 {
            Ok(())
        } else {
            Err(ConfigError {
                config: self.0,
                field,
                value: value.to_string(),
                expected: "an integer >= 1",
            })
        }
    }

    fn err(&self, field: &'static str, value: f64, expected: &'static str) -> ConfigError {
        ConfigError {
            config: self.0,
            field,
            value: format!("{value}"),
            expected,
        }
    }
}

/// Data that does not fit a model, named by its part (inputs or targets) and, where there is
/// one, its row. Returned before any work by training ([`crate::train::TrainError::Mismatch`])
/// and prediction ([`crate::predict::PredictError::Mismatch`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataMismatch {
    /// No rows.
    #[error("the {part} have no rows: give at least one")]
    Empty {
        /// `"inputs"` or `"targets"`.
        part: &'static str,
    },
    /// Rows of another shape than the model takes.
    #[error(
        "the {part} have rows of shape {found:?}, and the model takes rows of shape {expected:?}"
    )]
    Shape {
        /// `"inputs"` or `"targets"`.
        part: &'static str,
        /// The shape of a row the model takes.
        expected: Vec<usize>,
        /// The shape of the rows given.
        found: Vec<usize>,
    },
    /// A class label outside the model's classes.
    #[error(
        "target row {row} (0-based) holds the class label {label}, and the model has {classes} \
         classes (labels 0 to {})",
        classes.saturating_sub(1)
    )]
    Label {
        /// The first such row.
        row: usize,
        /// Its label.
        label: i64,
        /// The model's classes.
        classes: usize,
    },
    /// Another number of rows than a per-row table holds (BNN+LV's latents).
    #[error(
        "the {part} have {found} rows, and the model's per-row latent table holds {expected}: \
         build the model for this training set (BnnLvConfig::init with {found} rows)"
    )]
    Rows {
        /// `"inputs"`.
        part: &'static str,
        /// Rows of the table.
        expected: usize,
        /// Rows given.
        found: usize,
    },
}
