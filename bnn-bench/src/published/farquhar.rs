//! Farquhar (2022) Table A.4 (`farquhar.csv`): NUTS on make_moons, the samples' test accuracy
//! and acceptance rate per activation and depth, as printed (percent).

/// The printed `(accuracy, acceptance)` of `activation` at `depth` hidden layers, in percent.
pub fn hmc_cell(activation: &str, depth: usize) -> Option<(f64, f64)> {
    super::read("farquhar.csv")
        .iter()
        .find(|r| r.text("activation") == activation && r.number("depth") == Some(depth as f64))
        .map(|r| {
            (
                r.number("accuracy").expect("an accuracy"),
                r.number("acceptance").expect("an acceptance rate"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_printed_cell_reads() {
        let mut cells = 0;
        for activation in ["relu", "leaky-0.5", "leaky-0.95", "linear"] {
            for depth in 1..=10 {
                let (acc, rate) = hmc_cell(activation, depth).expect("a printed cell");
                assert!(acc > 70.0 && acc < 100.0 && rate > 30.0 && rate < 90.0);
                cells += 1;
            }
        }
        assert_eq!(cells, 40);
        assert_eq!(hmc_cell("relu", 11), None);
        assert_eq!(super::super::columns("moons-hmc").len(), 1);
    }
}
