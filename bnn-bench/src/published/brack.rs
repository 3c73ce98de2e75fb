//! Brack (2022) Table 5.1 (`brack.csv`): ELBO and PSIS k̂ of variational families on the
//! eight-schools model, mean and standard deviation over replicates, as printed.

/// One printed row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Published {
    /// The ELBO's mean and standard deviation (`None`: one run).
    pub elbo: (f64, Option<f64>),
    /// `k̂`'s mean and standard deviation.
    pub k_hat: (f64, Option<f64>),
    /// The family's parameter count.
    pub params: usize,
}

/// The printed row of `family` with `steps` flow steps (0 for the Gaussian families).
pub fn row(family: &str, steps: usize) -> Option<Published> {
    super::read("brack.csv")
        .iter()
        .find(|r| r.text("family") == family && r.number("steps") == Some(steps as f64))
        .map(|r| Published {
            elbo: (r.number("elbo").expect("an ELBO"), r.number("elbo_sd")),
            k_hat: (r.number("k_hat").expect("a k̂"), r.number("k_hat_sd")),
            params: r.number("params").expect("a count") as usize,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_printed_row_reads_and_the_column_is_described() {
        let families = ["mean-field", "full-rank", "planar", "radial", "IAF"];
        let mut rows = 0;
        for family in families {
            for steps in [0, 4, 8, 16, 32] {
                if let Some(p) = row(family, steps) {
                    rows += 1;
                    assert!(p.elbo.0 < 0.0 && p.k_hat.0 > 0.0 && p.params > 0);
                    // Replicates (and their sds) for the flows only.
                    assert_eq!(p.elbo.1.is_some(), steps > 0, "{family} {steps}");
                }
            }
        }
        assert_eq!(rows, 14);
        let columns = super::super::columns("eight-schools");
        assert_eq!(columns.len(), 1);
        assert_eq!(columns[0].spread, super::super::Spread::StandardDeviation);
    }
}
