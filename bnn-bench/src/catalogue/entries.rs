//! The catalogue's entries: every built-in method once, with the harnesses that run it by
//! default. Adding a method is one entry here; each harness's list is [`defaults`].

use super::*;

/// A harness that runs catalogue methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// The two toys of the decomposition figure.
    Toy,
    /// The UCI regression protocol.
    Uci,
    /// The MNIST/OOD protocol.
    Mnist,
    /// The speed benchmark (`perf`).
    Perf,
}

/// A harness's values of the hyperparameters that belong to its task rather than to a method.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Drop rate `p` of MC dropout and DropConnect.
    pub drop_rate: f64,
    /// Prior length-scale `l` of MC dropout and DropConnect (prior N(0, 1/l²)).
    pub length_scale: f64,
    /// Prior precision α of the moment methods (VBP, DVI, CLT).
    pub moment_alpha: f64,
    /// Prior precision α of DVI-sampled.
    pub sampled_dvi_alpha: f64,
}

/// One built-in method.
pub struct Entry {
    /// The method's name ([`Method::name`] of what `make` returns).
    pub name: &'static str,
    /// The harnesses that run it when no `--method` is given.
    pub runs_in: &'static [Protocol],
    /// Whether it is a regression method too (EDL's head and DVI-sampled's loss are a
    /// classifier's alone).
    pub regression: bool,
    /// The method under a harness's settings.
    pub make: fn(&Settings) -> Method,
}

use Protocol::{Mnist, Perf, Toy, Uci};

/// Every built-in method, in table order.
pub const ENTRIES: &[Entry] = &[
    Entry {
        name: "MAP",
        runs_in: &[Toy, Uci, Mnist],
        regression: true,
        make: |_| Method::map(1.0),
    },
    Entry {
        name: "MC dropout",
        runs_in: &[Toy, Uci, Mnist, Perf],
        regression: true,
        make: |s| Method::mc_dropout(s.drop_rate, s.length_scale),
    },
    Entry {
        name: "MFVI",
        runs_in: &[Uci, Perf],
        regression: true,
        make: |_| Method::mean_field(Estimator::Reparameterization),
    },
    Entry {
        name: "MFVI-LRT",
        runs_in: &[Toy, Uci, Mnist, Perf],
        regression: true,
        make: |_| Method::mean_field(Estimator::LocalReparameterization),
    },
    Entry {
        name: "MFVI-LRT (EB prior)",
        runs_in: &[Uci],
        regression: true,
        make: |_| Method {
            name: "MFVI-LRT (EB prior)",
            empirical_bayes_prior: Some(0.0),
            ..Method::mean_field(Estimator::LocalReparameterization)
        },
    },
    Entry {
        name: "MFVI-LRT (late EB prior)",
        runs_in: &[Uci],
        regression: true,
        make: |_| Method {
            name: "MFVI-LRT (late EB prior)",
            empirical_bayes_prior: Some(0.5),
            ..Method::mean_field(Estimator::LocalReparameterization)
        },
    },
    Entry {
        name: "MFVI-Flipout",
        runs_in: &[Perf],
        regression: true,
        make: |_| Method::mean_field(Estimator::Flipout),
    },
    Entry {
        name: "Radial",
        runs_in: &[Toy, Uci, Mnist, Perf],
        regression: true,
        make: |_| Method::radial(),
    },
    Entry {
        name: "Low-rank",
        runs_in: &[Uci, Perf],
        regression: true,
        make: |_| Method::low_rank(2),
    },
    Entry {
        name: "DropConnect",
        runs_in: &[Perf],
        regression: true,
        make: |s| Method::drop_connect(s.drop_rate, s.length_scale),
    },
    Entry {
        name: "DropConnect, Gaussian masks",
        runs_in: &[Perf],
        regression: true,
        make: |s| Method::gaussian_drop_connect(s.drop_rate, s.length_scale),
    },
    Entry {
        name: "MFVI, scale-mixture prior",
        runs_in: &[Perf],
        regression: true,
        make: |_| Method::mean_field_scale_mixture(),
    },
    Entry {
        name: "Radial, scale-mixture prior",
        runs_in: &[Perf],
        regression: true,
        make: |_| Method::radial_scale_mixture(),
    },
    Entry {
        name: "VBP",
        runs_in: &[Uci, Mnist],
        regression: true,
        make: |s| Method::vbp(s.moment_alpha),
    },
    Entry {
        name: "DVI",
        runs_in: &[Uci, Mnist],
        regression: true,
        make: |s| Method::dvi(s.moment_alpha),
    },
    Entry {
        name: "CLT",
        runs_in: &[Uci, Mnist],
        regression: true,
        make: |s| Method::clt(s.moment_alpha),
    },
    Entry {
        name: "DVI-sampled",
        runs_in: &[Mnist],
        regression: false,
        make: |s| Method::dvi_sampled(s.sampled_dvi_alpha),
    },
    Entry {
        name: "EDL",
        runs_in: &[Mnist],
        regression: false,
        make: |_| Method::edl(),
    },
    Entry {
        name: "BEDL",
        runs_in: &[Uci, Mnist],
        regression: true,
        make: |_| Method::bedl(),
    },
    Entry {
        name: "BEDL-PAC",
        runs_in: &[Uci, Mnist],
        regression: true,
        make: |_| Method::bedl_pac(),
    },
    Entry {
        name: "BEDL-Hyper",
        runs_in: &[Uci],
        regression: true,
        make: |_| Method::bedl_hyper(),
    },
    Entry {
        name: "Deep ensemble",
        runs_in: &[Uci, Mnist],
        regression: true,
        make: |_| Method::posthoc("Deep ensemble", PostHoc::Ensemble { members: 5 }),
    },
    Entry {
        name: "SWAG",
        runs_in: &[Uci, Mnist],
        regression: true,
        make: |_| Method::swag("SWAG", 1),
    },
    Entry {
        name: "MultiSWAG",
        runs_in: &[Uci, Mnist],
        regression: true,
        make: |_| Method::swag("MultiSWAG", 5),
    },
    Entry {
        name: "Laplace (last layer)",
        runs_in: &[Uci, Mnist],
        regression: true,
        make: |_| Method::posthoc("Laplace (last layer)", PostHoc::LastLayerLaplace),
    },
    Entry {
        name: "Laplace (KFAC)",
        runs_in: &[Uci, Mnist],
        regression: true,
        make: |_| Method::posthoc("Laplace (KFAC)", PostHoc::KfacLaplace { per_layer: false }),
    },
    Entry {
        name: "Laplace (KFAC, λ per layer)",
        runs_in: &[Uci],
        regression: true,
        make: |_| {
            Method::posthoc(
                "Laplace (KFAC, λ per layer)",
                PostHoc::KfacLaplace { per_layer: true },
            )
        },
    },
];

/// The entry named `name` ([`crate::experiment::same_name`]) under `settings`.
pub fn named(name: &str, settings: &Settings) -> Option<Method> {
    ENTRIES
        .iter()
        .find(|e| crate::experiment::same_name(e.name, name))
        .map(|e| (e.make)(settings))
}

/// Every entry `protocol` can run, under its `settings`, in table order: what it runs when
/// asked by name (UCI's regression protocol: the regression methods).
pub fn available(protocol: Protocol, settings: &Settings) -> Vec<Method> {
    ENTRIES
        .iter()
        .filter(|e| e.regression || !matches!(protocol, Protocol::Uci | Protocol::Toy))
        .map(|e| (e.make)(settings))
        // Post-hoc methods run where the harness builds them.
        .filter(|m| m.posthoc.is_none() || matches!(protocol, Protocol::Uci | Protocol::Mnist))
        .collect()
}

/// Whether `protocol` runs the entry named `name` by default.
pub fn runs_by_default(protocol: Protocol, name: &str) -> bool {
    ENTRIES
        .iter()
        .any(|e| e.name == name && e.runs_in.contains(&protocol))
}

/// The methods `protocol` runs by default, under its `settings`, in table order.
pub fn defaults(protocol: Protocol, settings: &Settings) -> Vec<Method> {
    ENTRIES
        .iter()
        .filter(|e| e.runs_in.contains(&protocol))
        .map(|e| (e.make)(settings))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: Settings = Settings {
        drop_rate: 0.1,
        length_scale: 1.0,
        moment_alpha: 10.0,
        sampled_dvi_alpha: 10.0,
    };

    #[test]
    fn every_entry_makes_the_method_it_names_and_runs_somewhere() {
        for (i, e) in ENTRIES.iter().enumerate() {
            assert_eq!((e.make)(&SETTINGS).name, e.name);
            assert!(!e.runs_in.is_empty(), "{} runs nowhere", e.name);
            let later = &ENTRIES[i + 1..];
            assert!(
                later
                    .iter()
                    .all(|o| !crate::experiment::same_name(o.name, e.name)),
                "two entries are named {}",
                e.name
            );
        }
    }

    #[test]
    fn a_harness_runs_the_entries_that_name_it_with_its_settings() {
        let toy = defaults(Protocol::Toy, &SETTINGS);
        let names: Vec<_> = toy.iter().map(|m| m.name).collect();
        assert_eq!(names, ["MAP", "MC dropout", "MFVI-LRT", "Radial"]);
        let other = Settings {
            drop_rate: 0.3,
            ..SETTINGS
        };
        let dropout = |s: &Settings| {
            defaults(Protocol::Toy, s)
                .into_iter()
                .find(|m| m.name == "MC dropout")
                .unwrap()
                .weights
                .posterior
        };
        assert_ne!(
            format!("{:?}", dropout(&SETTINGS)),
            format!("{:?}", dropout(&other))
        );
    }
}
