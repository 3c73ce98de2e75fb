//! Published MNIST numbers for the `mnist` table, transcribed from Haußmann (2021) via
//! `spec/haussmann-thesis.md`. All use the strided LeNet5 (20/50 5×5 stride-2 convolutions,
//! dense 500) with Adam at lr 10⁻³.

/// One published method: MNIST test error (%) and, where reported, the area under the ECDF of
/// predictive entropies on Fashion-MNIST (↓, log 10 − mean entropy).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PublishedMnist {
    /// Method as printed.
    pub method: &'static str,
    /// MNIST test error in %.
    pub error_pct: f64,
    /// Fashion-MNIST entropy-ECDF area, when the table has it.
    pub ecdf_area: Option<f64>,
    /// Where the number comes from.
    pub source: &'static str,
}

const TABLE_5_2: &str = "Haußmann 2021 Table 5.2 (1 training epoch in the thesis code)";
const TABLE_3_2: &str = "Haußmann 2021 Table 3.2 (100 epochs, mean of 5 runs)";

/// The published rows, Table 5.2 then Table 3.2.
pub fn all() -> Vec<PublishedMnist> {
    let t52 = |method, error_pct, area| PublishedMnist {
        method,
        error_pct,
        ecdf_area: Some(area),
        source: TABLE_5_2,
    };
    let t32 = |method, error_pct| PublishedMnist {
        method,
        error_pct,
        ecdf_area: None,
        source: TABLE_3_2,
    };
    vec![
        t52("MC dropout", 1.12, 0.429),
        t52("VarOut", 1.47, 1.381),
        t52("DVI", 0.72, 1.318),
        t52("EDL", 1.08, 0.132),
        t52("BEDL", 0.81, 1.512),
        t52("BEDL-PAC", 0.66, 0.055),
        t32("VarOut", 1.12),
        t32("DVI", 0.97),
        t32("VBP", 0.85),
    ]
}
