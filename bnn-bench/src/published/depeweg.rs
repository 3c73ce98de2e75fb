//! The `depeweg` table's published cells (`depeweg.csv`): Depeweg (2019) Tables 5.1 and 5.2,
//! mean ± standard error over 5 splits, in the targets' units (naval's printed ×100 undone).

/// One published cell pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Published {
    /// Test LL, mean ± s.e.
    pub ll: (f64, f64),
    /// Test RMSE, mean ± s.e., in the targets' units.
    pub rmse: (f64, f64),
}

/// The published cells of model column `model` on set `set`, when the tables have them.
pub fn cells(set: &str, model: &str) -> Option<Published> {
    let rows = super::read("depeweg.csv");
    let cell = |metric: &str| {
        rows.iter()
            .find(|r| {
                r.text("column") == model && r.text("dataset") == set && r.text("metric") == metric
            })
            .map(|r| {
                let scale = r.number("scale").unwrap_or(1.0);
                (
                    r.number("mean").expect("a mean") * scale,
                    r.number("pm").expect("a ±") * scale,
                )
            })
    };
    Some(Published {
        ll: cell("test_ll")?,
        rmse: cell("test_rmse")?,
    })
}
