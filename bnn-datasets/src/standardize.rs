//! Per-column standardisation fitted on training data only: `z = (x − mean) / std`, with the
//! inverse transform so that predictions and metrics are reported in original units.

use crate::error::DataError;

/// Column means and standard deviations of a row-major `[n, width]` table.
///
/// A column with zero variance gets `std = 1`, so it maps to zeros instead of NaN.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Standardizer {
    /// Column means.
    pub mean: Vec<f64>,
    /// Column standard deviations (population, `1/n`), never zero.
    pub std: Vec<f64>,
}

impl Standardizer {
    /// Fits on `data`, row-major with `width` columns.
    ///
    /// # Errors
    /// [`DataError::Empty`] without rows, [`DataError::Shape`] if the length is not a multiple of
    /// `width`, [`DataError::NonFinite`] for a NaN or infinite entry (naming its row and column).
    pub fn fit(data: &[f64], width: usize) -> Result<Self, DataError> {
        if width == 0 || data.is_empty() {
            return Err(DataError::Empty {
                what: "Standardizer::fit input".into(),
            });
        }
        if !data.len().is_multiple_of(width) {
            return Err(DataError::Shape {
                what: "Standardizer::fit input".into(),
                expected: format!("a multiple of the width {width}"),
                found: format!("{} values", data.len()),
            });
        }
        if let Some(i) = data.iter().position(|v| !v.is_finite()) {
            return Err(DataError::NonFinite {
                what: "Standardizer::fit input".into(),
                row: i / width,
                column: i % width,
                value: data[i],
            });
        }
        let n = (data.len() / width) as f64;
        let mut mean = vec![0.0; width];
        for row in data.chunks(width) {
            for (m, v) in mean.iter_mut().zip(row) {
                *m += v;
            }
        }
        mean.iter_mut().for_each(|m| *m /= n);
        let mut var = vec![0.0; width];
        for row in data.chunks(width) {
            for ((s, v), m) in var.iter_mut().zip(row).zip(&mean) {
                *s += (v - m) * (v - m);
            }
        }
        let std = var
            .into_iter()
            .map(|s| {
                let sd = (s / n).sqrt();
                if sd > 0.0 && sd.is_finite() { sd } else { 1.0 }
            })
            .collect();
        Ok(Self { mean, std })
    }

    /// Number of columns.
    pub fn width(&self) -> usize {
        self.mean.len()
    }

    /// `(x − mean) / std`, row-major.
    ///
    /// # Panics
    /// If `data.len()` is not a multiple of the fitted width (a programming error).
    pub fn transform(&self, data: &[f64]) -> Vec<f64> {
        self.map(data, |v, m, s| (v - m) / s)
    }

    /// `z · std + mean`, row-major: back to original units.
    pub fn inverse(&self, data: &[f64]) -> Vec<f64> {
        self.map(data, |v, m, s| v * s + m)
    }

    /// Scales standard deviations (not locations) back to original units: `σ · std`.
    pub fn inverse_scale(&self, data: &[f64]) -> Vec<f64> {
        self.map(data, |v, _, s| v * s)
    }

    /// `−Σ_d ln std_d`: added to a log-density of standardised targets it gives the
    /// log-density in original units (change of variables).
    pub fn log_jacobian(&self) -> f64 {
        -self.std.iter().map(|s| s.ln()).sum::<f64>()
    }

    fn map(&self, data: &[f64], f: impl Fn(f64, f64, f64) -> f64) -> Vec<f64> {
        let w = self.width();
        assert!(
            data.len().is_multiple_of(w),
            "Standardizer: {} values are not rows of the fitted width {w}",
            data.len()
        );
        data.iter()
            .enumerate()
            .map(|(i, &v)| f(v, self.mean[i % w], self.std[i % w]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standardised_columns_have_zero_mean_unit_std_and_invert() {
        // Two columns: 1, 2, 3, 4 and 10, 10, 10, 10 (constant).
        let data = [1.0, 10.0, 2.0, 10.0, 3.0, 10.0, 4.0, 10.0];
        let s = Standardizer::fit(&data, 2).unwrap();
        assert_eq!(s.mean, vec![2.5, 10.0]);
        assert!((s.std[0] - 1.25f64.sqrt()).abs() < 1e-15);
        assert_eq!(s.std[1], 1.0, "zero variance gets std 1");
        let z = s.transform(&data);
        assert!((z[0] + 1.5 / 1.25f64.sqrt()).abs() < 1e-12);
        assert_eq!(z[1], 0.0);
        let back = s.inverse(&z);
        for (a, b) in back.iter().zip(&data) {
            assert!((a - b).abs() < 1e-12);
        }
        assert_eq!(s.inverse_scale(&[2.0, 3.0]), vec![2.0 * s.std[0], 3.0]);
        assert!((s.log_jacobian() + s.std[0].ln()).abs() < 1e-15);
    }

    #[test]
    fn bad_input_is_an_error_naming_the_place() {
        assert!(matches!(
            Standardizer::fit(&[], 3),
            Err(DataError::Empty { .. })
        ));
        assert!(matches!(
            Standardizer::fit(&[1.0, 2.0, 3.0], 2),
            Err(DataError::Shape { .. })
        ));
        let e = Standardizer::fit(&[1.0, 2.0, f64::NAN, 4.0], 2).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("row 1") && msg.contains("column 0"), "{msg}");
    }
}
