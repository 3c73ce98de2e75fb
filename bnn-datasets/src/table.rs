//! Plain in-memory tables, the form every loader and generator returns: row-major `f64` inputs
//! and targets for regression, inputs and class labels for classification. The bench uses them
//! directly; [`crate::burn_data`] wraps them as burn `Dataset`s.

use crate::error::DataError;
use crate::standardize::Standardizer;

/// A regression table: `x` is `[len, n_features]`, `y` is `[len, n_targets]`, both row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct RegressionData {
    /// Inputs, row-major.
    pub x: Vec<f64>,
    /// Targets, row-major.
    pub y: Vec<f64>,
    /// Input columns.
    pub n_features: usize,
    /// Target columns.
    pub n_targets: usize,
}

impl RegressionData {
    /// A table from row-major inputs and targets.
    ///
    /// # Errors
    /// [`DataError::Shape`] when a width is 0 or the two arrays do not hold the same number of
    /// whole rows.
    pub fn new(
        x: Vec<f64>,
        y: Vec<f64>,
        n_features: usize,
        n_targets: usize,
    ) -> Result<Self, DataError> {
        if n_features == 0
            || n_targets == 0
            || !x.len().is_multiple_of(n_features)
            || !y.len().is_multiple_of(n_targets)
            || x.len() / n_features != y.len() / n_targets
        {
            return Err(DataError::Shape {
                what: "RegressionData".into(),
                expected: format!(
                    "inputs of width {n_features} and targets of width {n_targets} with the same row count"
                ),
                found: format!("{} input values and {} target values", x.len(), y.len()),
            });
        }
        Ok(Self {
            x,
            y,
            n_features,
            n_targets,
        })
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.y.len() / self.n_targets
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    /// Inputs and targets of row `i`.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn row(&self, i: usize) -> (&[f64], &[f64]) {
        (
            &self.x[i * self.n_features..(i + 1) * self.n_features],
            &self.y[i * self.n_targets..(i + 1) * self.n_targets],
        )
    }

    /// The rows at `indices`, in that order.
    ///
    /// # Errors
    /// [`DataError::OutOfRange`] naming the first index past the end.
    pub fn select(&self, indices: &[usize]) -> Result<Self, DataError> {
        let n = self.len();
        if let Some(&bad) = indices.iter().find(|&&i| i >= n) {
            return Err(DataError::OutOfRange {
                what: "row index".into(),
                expected: format!("0..{n}"),
                found: bad.to_string(),
            });
        }
        let mut x = Vec::with_capacity(indices.len() * self.n_features);
        let mut y = Vec::with_capacity(indices.len() * self.n_targets);
        for &i in indices {
            let (xi, yi) = self.row(i);
            x.extend_from_slice(xi);
            y.extend_from_slice(yi);
        }
        Ok(Self {
            x,
            y,
            n_features: self.n_features,
            n_targets: self.n_targets,
        })
    }

    /// Standardizers of inputs and targets fitted on this table (call it on training data only).
    ///
    /// # Errors
    /// As [`Standardizer::fit`]: an empty table or a non-finite value.
    pub fn fit_standardizers(&self) -> Result<(Standardizer, Standardizer), DataError> {
        Ok((
            Standardizer::fit(&self.x, self.n_features)?,
            Standardizer::fit(&self.y, self.n_targets)?,
        ))
    }

    /// This table with inputs and targets mapped through `x_scaler` and `y_scaler`.
    ///
    /// # Errors
    /// [`DataError::Shape`] when a scaler's width differs from the table's.
    pub fn standardized(
        &self,
        x_scaler: &Standardizer,
        y_scaler: &Standardizer,
    ) -> Result<Self, DataError> {
        for (what, scaler, width) in [
            ("input scaler", x_scaler, self.n_features),
            ("target scaler", y_scaler, self.n_targets),
        ] {
            if scaler.width() != width {
                return Err(DataError::Shape {
                    what: what.into(),
                    expected: format!("width {width}"),
                    found: format!("width {}", scaler.width()),
                });
            }
        }
        Ok(Self {
            x: x_scaler.transform(&self.x),
            y: y_scaler.transform(&self.y),
            n_features: self.n_features,
            n_targets: self.n_targets,
        })
    }
}

impl From<crate::toy::Regression1d> for RegressionData {
    fn from(d: crate::toy::Regression1d) -> Self {
        Self {
            x: d.x,
            y: d.y,
            n_features: 1,
            n_targets: 1,
        }
    }
}

/// A classification table: `x` is `[len, n_features]` row-major, `labels` in `0..n_classes`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassificationData {
    /// Inputs, row-major.
    pub x: Vec<f64>,
    /// Class labels.
    pub labels: Vec<usize>,
    /// Input columns.
    pub n_features: usize,
    /// Number of classes.
    pub n_classes: usize,
}

impl ClassificationData {
    /// A table from row-major inputs and labels.
    ///
    /// # Errors
    /// [`DataError::Shape`] when the row counts differ, [`DataError::OutOfRange`] for a label
    /// not below `n_classes`.
    pub fn new(
        x: Vec<f64>,
        labels: Vec<usize>,
        n_features: usize,
        n_classes: usize,
    ) -> Result<Self, DataError> {
        if n_features == 0 || x.len() != labels.len() * n_features {
            return Err(DataError::Shape {
                what: "ClassificationData".into(),
                expected: format!("{} inputs of width {n_features}", labels.len()),
                found: format!("{} input values", x.len()),
            });
        }
        if let Some(&bad) = labels.iter().find(|&&c| c >= n_classes) {
            return Err(DataError::OutOfRange {
                what: "class label".into(),
                expected: format!("0..{n_classes}"),
                found: bad.to_string(),
            });
        }
        Ok(Self {
            x,
            labels,
            n_features,
            n_classes,
        })
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Inputs of row `i`.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn row(&self, i: usize) -> &[f64] {
        &self.x[i * self.n_features..(i + 1) * self.n_features]
    }

    /// The rows `indices`, in that order (the same classes).
    ///
    /// # Errors
    /// [`DataError::OutOfRange`] for an index past the table.
    pub fn select(&self, indices: &[usize]) -> Result<Self, DataError> {
        let n = self.len();
        if let Some(&bad) = indices.iter().find(|&&i| i >= n) {
            return Err(DataError::OutOfRange {
                what: "row index".into(),
                expected: format!("0..{n}"),
                found: bad.to_string(),
            });
        }
        Ok(Self {
            x: indices.iter().flat_map(|&i| self.row(i).to_vec()).collect(),
            labels: indices.iter().map(|&i| self.labels[i]).collect(),
            n_features: self.n_features,
            n_classes: self.n_classes,
        })
    }
}

impl From<crate::toy::Classification2d> for ClassificationData {
    fn from(d: crate::toy::Classification2d) -> Self {
        let n_classes = d.label.iter().max().map_or(0, |m| m + 1);
        Self {
            x: d.x.iter().flatten().copied().collect(),
            labels: d.label,
            n_features: 2,
            n_classes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_check_their_shapes_and_select_rows() {
        let d =
            RegressionData::new(vec![1., 2., 3., 4., 5., 6.], vec![10., 20., 30.], 2, 1).unwrap();
        assert_eq!(d.len(), 3);
        assert_eq!(d.row(1), (&[3., 4.][..], &[20.][..]));
        let s = d.select(&[2, 0]).unwrap();
        assert_eq!(s.x, vec![5., 6., 1., 2.]);
        assert_eq!(s.y, vec![30., 10.]);
        assert!(matches!(d.select(&[3]), Err(DataError::OutOfRange { .. })));
        assert!(RegressionData::new(vec![1., 2., 3.], vec![1., 2.], 2, 1).is_err());
        assert!(RegressionData::new(vec![1., 2.], vec![1., 2.], 2, 1).is_err());
        let (sx, sy) = d.fit_standardizers().unwrap();
        let z = d.standardized(&sx, &sy).unwrap();
        assert!(z.y.iter().sum::<f64>().abs() < 1e-12);
        assert!(d.standardized(&sy, &sy).is_err());
        assert!(ClassificationData::new(vec![0.; 4], vec![0, 2], 2, 2).is_err());
        assert!(ClassificationData::new(vec![0.; 3], vec![0, 1], 2, 2).is_err());
    }
}
