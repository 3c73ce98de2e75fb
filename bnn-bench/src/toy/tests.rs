//! Tests of the toy harness.

use super::*;

#[test]
fn density_split_separates_dense_and_empty_regions() {
    let curves = Curves {
        x: vec![0.0, 1.0, 2.0],
        mean: vec![0.0; 3],
        aleatoric_std: vec![1.0, 1.0, 1.0],
        total_std: vec![1.25f64.sqrt(), 1.0, 5f64.sqrt()],
    };
    // All training inputs near 0: grid point 0 is dense, 1 and 2 are empty.
    let (dense, sparse, ale) = density_split(&curves, &[0.0, 0.1, -0.1]);
    assert!((dense - 0.5).abs() < 1e-12, "{dense}");
    assert!((sparse - 1.0).abs() < 1e-12, "{sparse}");
    assert!((ale - 1.0).abs() < 1e-12);
}

/// A user's own methods run through [`run_with`] under their own names and settings (a
/// point estimate has no epistemic band, a dropout posterior has one), without BNN+LV
/// unless selected; bad catalogues and names are refused before the folder is made.
#[test]
fn a_users_methods_run_alone_and_bad_catalogues_are_refused() {
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
    let dir = std::env::temp_dir().join(format!("bnn-toy-own-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    let own = || {
        vec![
            Method {
                name: "Point, sd 3",
                ..Method::map(3.0)
            },
            Method {
                name: "Dropout 0.2",
                ..Method::mc_dropout(0.2, 0.1)
            },
        ]
    };
    let options = ToyOptions {
        methods: vec!["point, SD 3".into(), "Dropout 0.2".into()],
        epochs: Some(20),
        exp: crate::runner::ExperimentArgs {
            seed: 0,
            quick: true,
        },
        run: crate::runner::RunnerOptions::new(&dir),
    };
    for (methods, names, expected) in [
        (
            vec![Method::map(1.0), Method::map(2.0)],
            vec![],
            "two methods are named \"MAP\"",
        ),
        (
            vec![Method {
                name: "bnn+lv",
                ..Method::map(1.0)
            }],
            vec![],
            "a method is named \"bnn+lv\"",
        ),
        (
            own(),
            vec!["MFVI".to_string()],
            "known: \"Point, sd 3\", Dropout 0.2, BNN+LV",
        ),
    ] {
        let err = run_with(
            &ToyOptions {
                methods: names,
                ..options.clone()
            },
            methods,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(expected), "{err}");
        assert!(!dir.exists(), "{err}: the folder was made");
    }
    let results = run_with(&options, own()).unwrap();
    let names: Vec<_> = results
        .iter()
        .map(|r| (r.toy.as_str(), r.row.method.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("heteroscedastic", "Point, sd 3"),
            ("heteroscedastic", "Dropout 0.2"),
            ("bimodal", "Point, sd 3"),
            ("bimodal", "Dropout 0.2"),
        ]
    );
    for r in &results {
        assert!(r.row.test_ll.is_finite(), "{} {}", r.toy, r.row.method);
        if r.row.method == "Point, sd 3" {
            assert!(r.epistemic_dense < 1e-3 && r.epistemic_sparse < 1e-3);
        } else {
            assert!(r.epistemic_dense > 1e-3, "{} {}", r.toy, r.epistemic_dense);
        }
    }
    let svg = std::fs::read_to_string(dir.join("toy.svg")).unwrap();
    assert!(svg.contains("bimodal: Dropout 0.2") && !svg.contains("BNN+LV"));
    assert!(!dir.join("wet-chicken.svg").exists());
    std::fs::remove_dir_all(dir).ok();
}

/// A short run: every method on both toys, the files are written, and the Bayesian
/// methods' epistemic band is wider where there are no training inputs than where they
/// are dense, while the point estimate has none.
#[test]
fn every_method_draws_both_toys_and_epistemic_grows_away_from_data() {
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
    let dir = std::env::temp_dir().join(format!("bnn-toy-test-{}", std::process::id()));
    let options = ToyOptions {
        methods: vec![],
        epochs: Some(150),
        exp: crate::runner::ExperimentArgs {
            seed: 0,
            quick: true,
        },
        run: crate::runner::RunnerOptions::new(&dir),
    };
    let results = run(&options).unwrap();
    assert_eq!(results.len(), 2 * (methods().len() + 1));
    for r in &results {
        assert!(r.row.test_ll.is_finite(), "{} {}", r.toy, r.row.method);
        if r.row.method == "MAP" {
            assert!(r.epistemic_dense < 1e-3 && r.epistemic_sparse < 1e-3);
        } else {
            assert!(
                r.epistemic_sparse > r.epistemic_dense,
                "{} {}: sparse {} dense {}",
                r.toy,
                r.row.method,
                r.epistemic_sparse,
                r.epistemic_dense
            );
        }
    }
    let svg = std::fs::read_to_string(dir.join("toy.svg")).unwrap();
    assert!(svg.contains("heteroscedastic: BNN+LV"));
    let lv = std::fs::read_to_string(dir.join("toy-lv.svg")).unwrap();
    assert!(lv.contains("bimodal: BNN+LV, entropy") && lv.contains("I(y*; W)"));
    // The wet-chicken maps: one decomposition per state of the 11 × 11 quick grid, finite,
    // its variance form adding up. (The thesis's finding, epistemic highest in the
    // waterfall's corner, needs a longer fit than this test's: the full run's toy.md.)
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("toy.json")).unwrap()).unwrap();
    let wet = &record["wet_chicken"];
    let parts = wet["parts"].as_array().unwrap();
    assert_eq!((parts.len(), wet["side"].as_u64()), (121, Some(11)));
    for p in parts {
        let f = |k: &str| p[k].as_f64().unwrap();
        assert!(f("aleatoric_entropy").is_finite() && f("epistemic_entropy").is_finite());
        let sum = f("aleatoric_variance") + f("epistemic_variance");
        assert!((f("total_variance") - sum).abs() <= 1e-9 * sum.abs().max(1.0));
        assert!(f("aleatoric_variance") > 0.0);
    }
    assert!(
        std::fs::read_to_string(dir.join("wet-chicken.svg"))
            .unwrap()
            .contains("epistemic entropy")
    );
    // The same seed gives the same numbers.
    let again = run(&ToyOptions {
        methods: vec!["Radial".into()],
        ..options.clone()
    })
    .unwrap();
    let first: Vec<_> = results
        .iter()
        .filter(|r| r.row.method == "Radial")
        .collect();
    for (a, b) in again.iter().zip(first) {
        assert_eq!(
            (a.row.test_ll, a.epistemic_sparse),
            (b.row.test_ll, b.epistemic_sparse)
        );
    }
    let svg = std::fs::read_to_string(dir.join("toy.svg")).unwrap();
    assert!(svg.contains("polygon") && svg.contains("bimodal: Radial"));

    assert!(
        std::fs::read_to_string(dir.join("toy.md"))
            .unwrap()
            .contains("oracle LL")
    );
    std::fs::remove_dir_all(dir).ok();
}
