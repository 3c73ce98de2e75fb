//! Tests of the lv-mnist harness.

use super::*;

/// Ten classes of bars at distinct angles and positions: the three models train, every
/// number is finite, the files are written, and bad counts are refused before any work.
#[test]
fn a_small_run_writes_its_report_and_refuses_bad_counts() {
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
    let make = |n: usize, shift: usize| {
        let mut pixels = vec![0u8; n * 784];
        let mut classes = vec![0u8; n];
        for i in 0..n {
            let c = i % CLASSES;
            classes[i] = c as u8;
            let at = 4 + 2 * c + (i / CLASSES + shift) % 2;
            for r in 4..24 {
                let (rr, cc) = if c.is_multiple_of(2) {
                    (r, at)
                } else {
                    (at, r)
                };
                pixels[i * 784 + rr * 28 + cc] = 255;
            }
        }
        ImageSet::new(pixels, classes, [1, 28, 28], CLASSES).unwrap()
    };
    let dir = std::env::temp_dir().join(format!("bnn-lv-mnist-{}", std::process::id()));
    let options = LvMnistOptions {
        epochs: 2,
        train_images: 400,
        test_images: 100,
        train_samples: 2,
        n_w: 3,
        n_z: 2,
        ..LvMnistOptions::quick(dir.clone())
    };
    let report = run_on(&options, &make(400, 0), &make(100, 1)).unwrap();
    assert_eq!(report.scenarios.len(), 3);
    assert_eq!(report.scenarios[0].rotations.len(), 8);
    assert!(report.scenarios[2].n_train < 400);
    for s in &report.scenarios {
        assert!(s.error_pct.is_finite() && s.log_likelihood.is_finite());
        assert_eq!(s.classes.iter().map(|c| c.n).sum::<usize>(), 100);
        assert!(
            s.classes
                .iter()
                .all(|c| c.aleatoric >= 0.0 && c.epistemic > -1e-6)
        );
    }
    for f in ["lv-mnist.md", "lv-mnist.json", "lv-mnist.svg"] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    let md = std::fs::read_to_string(dir.join("lv-mnist.md")).unwrap();
    assert!(md.contains("The thesis's patterns"), "{md}");
    let bad = LvMnistOptions {
        n_z: 0,
        ..options.clone()
    };
    assert!(
        run_on(&bad, &make(10, 0), &make(10, 0))
            .unwrap_err()
            .to_string()
            .contains("--n-z")
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// The patterns compare each group's change against the rest's.
#[test]
fn findings_compare_the_changed_classes_with_the_rest() {
    let scenario = |alea: [f64; 10], epi: [f64; 10]| ScenarioResult {
        scenario: String::new(),
        n_train: 1,
        error_pct: 0.0,
        log_likelihood: 0.0,
        misclassification_auroc: 0.5,
        classes: (0..CLASSES)
            .map(|c| ClassRow {
                class: c,
                n: 1,
                error_pct: 0.0,
                aleatoric: alea[c],
                epistemic: epi[c],
            })
            .collect(),
        rotations: vec![],
        train_seconds: 0.0,
    };
    let mut base = scenario([0.1; 10], [0.2; 10]);
    base.rotations = vec![
        AngleRow {
            degrees: 0.0,
            error_pct: 1.0,
            aleatoric: 0.1,
            epistemic: 0.1,
        },
        AngleRow {
            degrees: 90.0,
            error_pct: 50.0,
            aleatoric: 0.3,
            epistemic: 0.5,
        },
    ];
    let mut noisy = [0.1; 10];
    noisy[1] = 0.5;
    noisy[7] = 0.3;
    let mut sparse = [0.2; 10];
    sparse[8] = 0.6;
    let f = findings(&[
        base,
        scenario(noisy, [0.2; 10]),
        scenario([0.1; 10], sparse),
    ]);
    assert!((f.noise_aleatoric_rise.0 - 0.3).abs() < 1e-12);
    assert!(f.noise_aleatoric_rise.1.abs() < 1e-12);
    assert!((f.subsample_epistemic_rise.0 - 0.1).abs() < 1e-12);
    assert_eq!(f.rotation_epistemic, (0.5, 0.1));
    assert_eq!(f.holds(), (true, true, true));
}
