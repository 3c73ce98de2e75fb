//! Published MNIST, Fashion-MNIST and CIFAR-5 numbers for the `mnist` table, transcribed from
//! Haußmann (2021) via `spec/haussmann-thesis.md`. Tables 5.2 and 3.2 use the strided LeNet5
//! (20/50 5×5 stride-2 convolutions, dense 500; on CIFAR 192/192, dense 1000), Table 5.3 two
//! 5×5 stride-2 convolutions of 96 channels and the read-out; all with Adam at lr 10⁻³.

use crate::mnist::{Arch, TrainSet};

/// One published method: test error (%) on its training family and, where reported, the
/// run-to-run standard deviation, the test log-likelihood, and the area under the ECDF of
/// predictive entropies on Fashion-MNIST (↓, log 10 − mean entropy).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PublishedMnist {
    /// Method as printed.
    pub method: &'static str,
    /// Our catalogue's method trained as the published one was (usually `method`; Table 5.2's
    /// DVI is [`crate::methods::Method::dvi_sampled`]).
    pub counterpart: &'static str,
    /// The task trained and tested on.
    pub family: TrainSet,
    /// The published net: [`Arch::LeNet5`] (the strided one) or [`Arch::Conv96`].
    pub net: Arch,
    /// Test error in %.
    pub error_pct: f64,
    /// Standard deviation of the error over the published runs (5 in Table 3.2), when printed.
    pub error_std: Option<f64>,
    /// Test log-likelihood per image (nats), when printed.
    pub log_likelihood: Option<f64>,
    /// The first OOD set's entropy-ECDF area, when the table has it.
    pub ecdf_area: Option<f64>,
    /// Where the number comes from.
    pub source: &'static str,
}

const TABLE_5_2: &str = "Haußmann 2021 Table 5.2 (1 training epoch in the thesis code)";
const TABLE_5_2_CIFAR: &str = "Haußmann 2021 Table 5.2 (40 training epochs in the thesis code)";
const TABLE_3_2: &str = "Haußmann 2021 Table 3.2 (100 epochs, mean ± sd of 5 runs)";
const TABLE_5_3: &str = "Haußmann 2021 Table 5.3 (96/96 strided convolutions, 50 epochs)";

/// The published rows: Table 5.2, Table 3.2 (MNIST, then Fashion-MNIST), Table 5.3's MNIST
/// column (its CIFAR column is on all ten CIFAR-10 classes, which the bench does not train), then
/// Table 5.2's CIFAR-5 rows.
pub fn all() -> Vec<PublishedMnist> {
    let t52 = |method, error_pct, area| PublishedMnist {
        method,
        counterpart: method,
        family: TrainSet::Mnist,
        net: Arch::LeNet5,
        error_pct,
        error_std: None,
        log_likelihood: None,
        ecdf_area: Some(area),
        source: TABLE_5_2,
    };
    let cifar = |method, error_pct, area| PublishedMnist {
        family: TrainSet::Cifar5,
        source: TABLE_5_2_CIFAR,
        ..t52(method, error_pct, area)
    };
    let t32 = |family, method, error_pct, sd, ll| PublishedMnist {
        method,
        counterpart: method,
        family,
        net: Arch::LeNet5,
        error_pct,
        error_std: Some(sd),
        log_likelihood: Some(ll),
        ecdf_area: None,
        source: TABLE_3_2,
    };
    let t53 = |method, error_pct| PublishedMnist {
        net: Arch::Conv96,
        ecdf_area: None,
        source: TABLE_5_3,
        ..t52(method, error_pct, 0.0)
    };
    // Table 5.2's DVI is the thesis code's `DVINet`: trained by the sampled softmax, α = 10.
    let dvi = |p: PublishedMnist| PublishedMnist {
        counterpart: "DVI-sampled",
        ..p
    };
    use TrainSet::{FashionMnist, Mnist};
    vec![
        t52("MC dropout", 1.12, 0.429),
        t52("VarOut", 1.47, 1.381),
        dvi(t52("DVI", 0.72, 1.318)),
        t52("EDL", 1.08, 0.132),
        t52("BEDL", 0.81, 1.512),
        t52("BEDL-PAC", 0.66, 0.055),
        t32(Mnist, "VarOut", 1.12, 0.05, -0.03),
        t32(Mnist, "DVI", 0.97, 0.06, -0.03),
        t32(Mnist, "VBP", 0.85, 0.06, -0.03),
        t32(FashionMnist, "VarOut", 10.81, 0.24, -0.30),
        t32(FashionMnist, "DVI", 10.33, 0.07, -0.29),
        t32(FashionMnist, "VBP", 10.10, 0.16, -0.28),
        t53("BEDL", 0.91),
        t53("BEDL-PAC", 0.63),
        cifar("MC dropout", 18.36, 0.946),
        cifar("VarOut", 33.94, 0.673),
        dvi(cifar("DVI", 23.32, 1.251)),
        cifar("EDL", 20.34, 0.451),
        cifar("BEDL", 24.38, 1.253),
        cifar("BEDL-PAC", 20.02, 0.083),
    ]
}
