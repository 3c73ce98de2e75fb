//! Tests of the protocol, the methods, the report and the CLI checks.

use super::*;
use crate::published::Spread;
use bnn_datasets::toy;

fn meta() -> UciMeta {
    UciMeta {
        n_splits: 1,
        n_hidden: 20,
        n_epochs: 40,
        dropout_rates: vec![0.01, 0.1],
        tau_values: vec![0.5, 2.0],
    }
}

/// Every registered method fits a small noisy sine well above a constant predictor's LL,
/// and the same seed gives the same numbers (checked on a short run of each).
#[test]
fn every_method_beats_the_constant_predictor_and_is_reproducible() {
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
    let train_raw: RegressionData = toy::heteroscedastic(300, 1).into();
    let test_raw: RegressionData = toy::heteroscedastic(200, 2).into();
    let (sx, sy) = train_raw.fit_standardizers().unwrap();
    let meta = meta();
    let boston = DataSet::Builtin(UciDataset::Boston);
    let split = PreparedSplit {
        dataset: &boston,
        k: 0,
        train: train_raw.standardized(&sx, &sy).unwrap(),
        test_x: sx.transform(&test_raw.x),
        test_y: test_raw.y.clone(),
        y_scaler: sy.clone(),
        meta: &meta,
        budget: Budget {
            epochs: 60,
            batch_size: 32,
            learning_rate: 1e-2,
            test_passes: 100,
        },
        seed: 3,
    };
    // A Gaussian at the training mean and std: the LL any fit must beat.
    let constant_ll = bnn_burn::metrics::mean(
        &test_raw
            .y
            .iter()
            .map(|y| {
                let z = (y - sy.mean[0]) / sy.std[0];
                -0.5 * z * z - sy.std[0].ln() - 0.5 * (2.0 * std::f64::consts::PI).ln()
            })
            .collect::<Vec<_>>(),
    );
    // The split with another epoch budget (a `PreparedSplit` owns its rows).
    let with_epochs = |epochs| PreparedSplit {
        budget: Budget {
            epochs,
            ..split.budget
        },
        train: split.train.clone(),
        test_x: split.test_x.clone(),
        test_y: split.test_y.clone(),
        y_scaler: split.y_scaler.clone(),
        ..split
    };
    for m in registry() {
        // A latent input starts at its prior, as noise the net must learn to use or ignore:
        // BNN+LV needs more steps than the others to leave the constant predictor behind.
        let full = with_epochs(if m.name().starts_with("BNN+LV") {
            200
        } else {
            60
        });
        let a = m.run(&full).unwrap();
        assert!(
            a.test_ll > constant_ll + 0.3 && a.test_rmse < 0.8 * sy.std[0],
            "{}: LL {} (constant {constant_ll}), RMSE {} (std {})",
            m.name(),
            a.test_ll,
            a.test_rmse,
            sy.std[0]
        );
        // Every registry method measures its intervals; a fitted one covers most targets.
        let cover = a.coverage_90.expect("coverage measured");
        assert!(
            (0.5..=1.0).contains(&cover),
            "{}: coverage {cover}",
            m.name()
        );
        // Reproducibility, on two short runs of the same split and seed: they take the same
        // kinds of steps, noise refits and test passes as the full run and must agree to the
        // bit, at a fraction of a second full run's cost.
        let short = with_epochs(3);
        let (b, c) = (m.run(&short).unwrap(), m.run(&short).unwrap());
        assert!(b.test_ll.is_finite(), "{}: {}", m.name(), b.test_ll);
        assert_eq!(
            (b.test_ll, b.test_rmse),
            (c.test_ll, c.test_rmse),
            "{}",
            m.name()
        );
    }
}

fn protein_options(quick: bool) -> UciOptions {
    UciOptions {
        datasets: vec![UciDataset::Protein.into()],
        methods: vec![],
        splits: None,
        epochs: None,
        exp: crate::runner::ExperimentArgs { seed: 0, quick },
        data_dir: None,
        run: crate::runner::RunnerOptions::new("x"),
    }
}

#[test]
fn gal_protocol_budget_and_grid_edges() {
    let meta = meta();
    let mut o = protein_options(false);
    // 100 × n_epochs at batch 128, Adam 10⁻³, T = 10 000.
    let b = GalDropout.budget(&UciDataset::Protein.into(), &meta, 41_157, &o);
    assert_eq!(
        (b.epochs, b.batch_size, b.learning_rate, b.test_passes),
        (4_000, 128, 1e-3, 10_000)
    );
    o.exp.quick = true;
    let b = GalDropout.budget(&UciDataset::Protein.into(), &meta, 41_157, &o);
    assert_eq!((b.epochs, b.test_passes), (4, 1_000));
    o.epochs = Some(7);
    assert_eq!(
        GalDropout
            .budget(&UciDataset::Boston.into(), &meta, 455, &o)
            .epochs,
        7
    );
    let grid = [0.25, 0.5, 1.0];
    assert!(on_grid_edge(0.25, &grid) && on_grid_edge(1.0, &grid));
    assert!(!on_grid_edge(0.5, &grid) && !on_grid_edge(0.5, &[0.5]));
}

#[test]
fn quick_budgets_cap_the_steps_and_tables_carry_the_published_columns() {
    let meta = meta();
    let mut o = protein_options(true);
    let b = budget(&UciDataset::Protein.into(), &meta, 41_157, &o);
    assert_eq!(b.batch_size, 256);
    assert!(b.epochs * 41_157usize.div_ceil(256) <= 1500 || b.epochs == 4);
    o.exp.quick = false;
    // 161 steps per epoch: 50 epochs reach 8000 steps, above n_epochs = 40.
    assert_eq!(
        budget(&UciDataset::Protein.into(), &meta, 41_157, &o).epochs,
        50
    );
    // Yacht: 18 steps per epoch would need 445 epochs; capped at 10 × n_epochs.
    assert_eq!(
        budget(&UciDataset::Yacht.into(), &meta, 277, &o).epochs,
        400
    );
    // Methods trained by moments: 10 × n_epochs at Haußmann's learning rate, one pass to test.
    let vbp = BayesianFit {
        method: crate::catalogue::Method::vbp(HAUSSMANN_REGRESSION_ALPHA),
        train_samples: 1,
        early_stopping: None,
    };
    let b = vbp.budget(&UciDataset::Kin8nm.into(), &meta, 7373, &o);
    assert_eq!(
        (b.epochs, b.batch_size, b.learning_rate, b.test_passes),
        (400, 64, 1e-2, 1)
    );
    // Large sets keep the protocol's n_epochs when that already exceeds 8000 steps.
    assert_eq!(
        budget(&UciDataset::Kin8nm.into(), &meta, 30_000, &o).epochs,
        40
    );
    let r = MethodResult {
        method: "MAP".into(),
        dataset: UciDataset::Yacht.into(),
        budget: b,
        // Two splits: a single one has no standard error, hence no z.
        splits: vec![
            SplitOutcome {
                test_ll: -1.0,
                test_rmse: 0.5,
                coverage_90: None,
                conformal_coverage_90: None,
                k_hat: None,
                detail: String::new(),
            };
            2
        ],
        seconds: 1.0,
        revisions: vec!["r1".into()],
    };
    let md = markdown(&o, std::slice::from_ref(&r), 1.0);
    assert!(md.contains("| yacht |") && md.contains("-1.63 ± 0.02") && md.contains("PBP"));
    assert!(md.contains("Gal & Ghahramani 2016"));
    // MAP has no published counterpart: no difference table.
    assert!(!md.contains("combined standard errors"));
    // VBP's counterpart (Haußmann's Table 3.1) has a test LL but no RMSE: a z table for the LL
    // only, in one column.
    let vbp = MethodResult {
        method: "VBP".into(),
        ..r
    };
    let mut map = vbp.clone();
    map.method = "MAP".into();
    let mut vbp_long = vbp.clone();
    vbp_long.budget.epochs = 4000;
    let md = markdown(&o, &[vbp, map.clone()], 1.0);
    assert!(md.contains("Test log-likelihood:") && md.contains("VBP vs VBP (Haußmann)"));
    assert!(!md.contains("Test RMSE:"), "{md}");
    assert!(!md.contains(" ep.)"), "{md}");
    // A row trained for another epoch count than the set's other rows says so in its cell.
    let md = markdown(&o, &[vbp_long, map.clone(), map], 1.0);
    assert!(md.contains("-1.000 ± 0.000 (4000 ep.)"), "{md}");
}

#[test]
fn splits_outside_the_data_sets_range_are_errors_naming_the_flag() {
    let mut o = protein_options(false);
    assert_eq!(splits_of(&o, &UciDataset::Boston.into(), 20), Ok(20));
    o.exp.quick = true;
    assert_eq!(splits_of(&o, &UciDataset::Boston.into(), 20), Ok(3));
    assert_eq!(splits_of(&o, &UciDataset::Protein.into(), 2), Ok(2));
    o.splits = Some(5);
    assert_eq!(splits_of(&o, &UciDataset::Protein.into(), 5), Ok(5));
    for bad in [0, 6, 1000] {
        o.splits = Some(bad);
        let err = splits_of(&o, &UciDataset::Protein.into(), 5).unwrap_err();
        assert!(
            err.contains(&format!("--splits {bad}")) && err.contains("1 to 5"),
            "{err}"
        );
    }
}

#[test]
fn reports_refuse_nan_rows_and_rows_without_splits() {
    let row = |ll: Vec<f64>| MethodResult {
        method: "MAP".into(),
        dataset: UciDataset::Wine.into(),
        budget: budget(
            &UciDataset::Wine.into(),
            &meta(),
            1439,
            &protein_options(false),
        ),
        splits: ll
            .into_iter()
            .map(|test_ll| SplitOutcome {
                test_ll,
                test_rmse: 0.6,
                coverage_90: None,
                conformal_coverage_90: None,
                k_hat: None,
                detail: String::new(),
            })
            .collect(),
        seconds: 1.0,
        revisions: vec!["r1".into()],
    };
    assert!(check_results(&[row(vec![-1.0, -0.9])]).is_ok());
    let err = check_results(&[row(vec![-1.0, f64::NAN])]).unwrap_err();
    assert!(err.contains("wine / MAP split 2: test LL is NaN"), "{err}");
    let err = check_results(&[row(vec![])]).unwrap_err();
    assert!(err.contains("no splits"), "{err}");
}

#[test]
fn data_sets_are_names_or_folders_and_old_records_still_read() {
    assert_eq!(
        DataSet::parse("kin8nm").unwrap(),
        DataSet::Builtin(UciDataset::Kin8nm)
    );
    let err = DataSet::parse("no/such/folder").unwrap_err();
    assert!(err.contains("--dataset") && err.contains("yacht"), "{err}");
    // Records written before folders existed name the set by its variant.
    let old: DataSet = serde_json::from_str("\"PowerPlant\"").unwrap();
    assert_eq!(old, DataSet::Builtin(UciDataset::PowerPlant));
    let folder = DataSet::Folder {
        name: "mine".into(),
        path: "/data/mine".into(),
    };
    let text = serde_json::to_string(&folder).unwrap();
    assert_eq!(serde_json::from_str::<DataSet>(&text).unwrap(), folder);
    // A user's set gets the batch size of the built-in sets of its size.
    for (d, n) in [
        (UciDataset::Boston, 455),
        (UciDataset::Concrete, 927),
        (UciDataset::Energy, 691),
        (UciDataset::Kin8nm, 7373),
        (UciDataset::Naval, 10_741),
        (UciDataset::PowerPlant, 8611),
        (UciDataset::Protein, 41_157),
        (UciDataset::Wine, 1439),
        (UciDataset::Yacht, 277),
    ] {
        assert_eq!(batch_size(&folder, n), batch_size(&d.into(), n), "{d}");
    }
}

#[test]
fn z_scores_are_signed_so_that_positive_is_better() {
    let rounding = 0.01f64.powi(2) / 12.0;
    let z = z_score((-2.0, Some(0.03)), (-2.1, 0.04), true).unwrap();
    assert!((z - 0.1 / (0.0025 + rounding).sqrt()).abs() < 1e-12, "{z}");
    let z = z_score((3.0, Some(0.3)), (2.6, 0.4), false).unwrap();
    assert!((z + 0.4 / (0.25 + rounding).sqrt()).abs() < 1e-12, "{z}");
    // A published `0.00 ± 0.00` is known to ±0.005: ours at 0.002 is within a standard error.
    let z = z_score((0.002, Some(0.0001)), (0.0, 0.0), false).unwrap();
    assert!(z < 0.0 && z > -1.0, "{z}");
}

/// A boston row of `method` under `o` with these test LLs, one split each (RMSE 3).
fn boston_row(o: &UciOptions, method: &str, ll: &[f64]) -> MethodResult {
    MethodResult {
        method: method.into(),
        dataset: UciDataset::Boston.into(),
        budget: budget(&UciDataset::Boston.into(), &meta(), 455, o),
        splits: ll
            .iter()
            .map(|&test_ll| SplitOutcome {
                test_ll,
                test_rmse: 3.0,
                coverage_90: None,
                conformal_coverage_90: None,
                k_hat: None,
                detail: String::new(),
            })
            .collect(),
        seconds: 1.0,
        revisions: vec!["r1".into()],
    }
}

/// A single split has a mean but no standard error: its cell reads `± –` (not `± 0.00`), it
/// gets no z-score (a zero standard error would inflate it), and the header says "1 split".
#[test]
fn a_single_split_has_no_standard_error_and_no_z_score() {
    assert_eq!(z_score((-2.0, None), (-2.1, 0.04), true), None);
    let mut o = protein_options(false);
    o.splits = Some(1);
    let row = |method: &str, ll: &[f64]| boston_row(&o, method, ll);
    let md = markdown(&o, &[row("MC dropout", &[-2.3])], 1.0);
    assert!(md.contains("1 split per set,"), "{md}");
    assert!(
        md.contains("| -2.300 ± – |") && md.contains("| 3.000 ± – |"),
        "{md}"
    );
    assert!(
        !md.contains("± 0.00 |") && !md.contains("± 0.000 |"),
        "{md}"
    );
    // No z for the row, so no z table at all; two splits bring it back.
    assert!(!md.contains("vs MC dropout (Gal, updated)"), "{md}");
    o.splits = Some(2);
    let md = markdown(&o, &[boston_row(&o, "MC dropout", &[-2.3, -2.5])], 1.0);
    assert!(
        md.contains("2 splits per set,") && md.contains("| -2.400 ± 0.100 |"),
        "{md}"
    );
    assert!(
        md.contains("| MC dropout vs MC dropout (Gal, updated) |"),
        "{md}"
    );
}

/// Gal & Ghahramani 2016's ± are standard deviations over splits: stored divided by √20
/// (√5 for protein), and the report says so.
#[test]
fn published_standard_deviations_are_converted_and_labelled() {
    let gal16 = uci_published::all()
        .into_iter()
        .find(|p| p.column.name == "MC dropout (Gal 2016)")
        .expect("the 2016 column");
    assert_eq!(gal16.column.spread, Spread::StandardDeviation);
    let (m, se) = gal16.test_ll[0].unwrap();
    assert_eq!(m, -2.46);
    assert!((se - 0.25 / 20f64.sqrt()).abs() < 1e-12);
    // Power before protein (Haußmann's Table 5.1 swaps them).
    assert_eq!(gal16.test_ll[5].unwrap().0, -2.80);
    assert_eq!(gal16.test_ll[6].unwrap().0, -2.89);
    let (_, se_protein) = gal16.test_rmse[6].unwrap();
    assert!((se_protein - 0.04 / 5f64.sqrt()).abs() < 1e-12);

    let o = protein_options(false);
    let row = |method: &str, ll: &[f64]| boston_row(&o, method, ll);
    let md = markdown(
        &o,
        &[
            row("MC dropout", &[-2.3, -2.5]),
            row("Radial", &[-2.6, -2.6]),
        ],
        1.0,
    );
    assert!(md.contains("standard deviations over splits, shown here divided by √20"));
    // MC dropout −2.40 ± 0.10 vs Gal's −2.40 ± 0.04: z = 0; Radial's standard error is 0,
    // so z = (−2.60 + 2.58)/0.05 = −0.4.
    assert!(
        md.contains("| MC dropout vs MC dropout (Gal, updated) |"),
        "{md}"
    );
    assert!(md.contains("| boston | +0.0 | -0.4 |"), "{md}");
}

#[test]
fn records_of_several_runs_combine_into_one_report_later_rows_winning() {
    let dir = std::env::temp_dir().join(format!("bnn-uci-combine-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let o = protein_options(false);
    let row = |d: UciDataset, method: &str, ll: f64| MethodResult {
        method: method.into(),
        dataset: d.into(),
        budget: budget(&d.into(), &meta(), 455, &o),
        splits: vec![SplitOutcome {
            test_ll: ll,
            test_rmse: 3.0,
            coverage_90: None,
            conformal_coverage_90: None,
            k_hat: None,
            detail: String::new(),
        }],
        seconds: 1.0,
        revisions: vec!["r1".into()],
    };
    let write = |name: &str, rows: &[MethodResult]| {
        let path = dir.join(name);
        std::fs::write(&path, record(&o, rows, 10.0).to_string()).unwrap();
        path
    };
    let a = write(
        "a.json",
        &[
            row(UciDataset::Boston, "MAP", -2.7),
            row(UciDataset::Boston, "MC dropout", -9.0),
        ],
    );
    let mut later = row(UciDataset::Boston, "MC dropout", -2.5);
    later.revisions = vec!["r2".into()];
    let b = write("b.json", &[later]);
    let out = dir.join("out");
    let rows = combine(&[a.clone(), b], &out).unwrap();
    assert_eq!(rows.len(), 2);
    let md = std::fs::read_to_string(out.join("uci.md")).unwrap();
    assert!(md.contains("-2.500 ± –") && !md.contains("-9.000"), "{md}");
    // Each row keeps the build that produced it.
    assert!(
        md.contains("`r1`: boston / MAP; `r2`: boston / MC dropout."),
        "{md}"
    );
    assert!(md.contains("wall time 20 s"), "{md}");
    // A file that is not a uci record is named, and nothing is written.
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"experiment\": \"mnist\"}").unwrap();
    let out2 = dir.join("out2");
    let err = combine(&[a, bad.clone()], &out2).unwrap_err().to_string();
    assert!(err.contains(&bad.display().to_string()), "{err}");
    assert!(!out2.join("uci.md").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Finite numbers too far apart for an axis (a fit that ran away to −1e308) do not hang the
/// figure: its panel says it cannot be drawn, and the tables and record keep the numbers.
#[test]
fn a_figure_refuses_finite_numbers_it_cannot_draw() {
    let o = protein_options(false);
    let mut far = boston_row(&o, "MAP", &[-1e308, 1e308]);
    far.splits[1].test_rmse = 1.0;
    let t0 = std::time::Instant::now();
    let svg = plot(&[far, boston_row(&o, "MC dropout", &[-2.5, -2.4])]).unwrap();
    assert!(t0.elapsed() < std::time::Duration::from_secs(10));
    assert!(svg.contains("cannot be drawn"), "{svg}");
}

/// The registry is the catalogue's UCI entries then Depeweg's models; `--method` may name any
/// regression entry (a classifier's alone, such as EDL, is not one); MC dropout runs Gal's
/// protocol and a point estimate stops early.
#[test]
fn the_registry_is_the_catalogues_uci_entries_and_any_regression_entry_runs_by_name() {
    let names = |v: &[Box<dyn UciMethod>]| v.iter().map(|m| m.name()).collect::<Vec<_>>();
    let registry = registry();
    assert_eq!(
        names(&registry),
        [
            "MAP",
            "MC dropout",
            "MFVI",
            "MFVI-LRT",
            "MFVI-LRT (EB prior)",
            "MFVI-LRT (late EB prior)",
            "Radial",
            "Low-rank",
            "VBP",
            "DVI",
            "CLT",
            "BEDL",
            "BEDL-PAC",
            "BEDL-Hyper",
            "Deep ensemble",
            "SWAG",
            "MultiSWAG",
            "Laplace (last layer)",
            "Laplace (KFAC)",
            "Laplace (KFAC, λ per layer)",
            "BNN",
            "BNN+LV VB",
            "BNN+LV α=0.5",
            "BNN+LV α=1",
        ]
    );
    let every = every_method();
    let every_names = names(&every);
    for extra in ["MFVI-Flipout", "DropConnect", "MFVI, scale-mixture prior"] {
        assert!(every_names.contains(&extra), "{extra}");
    }
    assert!(!every_names.contains(&"EDL") && !every_names.contains(&"DVI-sampled"));
    let picked = crate::experiment::select_or_defaults(
        &every,
        &[],
        |m| m.name(),
        |m| registry.iter().any(|r| r.name() == m.name()),
    )
    .unwrap();
    assert_eq!(picked.len(), registry.len());
    // MC dropout is Gal's grid protocol: his budget, and his grid files are required.
    let o = protein_options(false);
    let budget = |m: &dyn UciMethod| {
        let b = m.budget(&UciDataset::Protein.into(), &meta(), 41_157, &o);
        (b.epochs, b.batch_size, b.test_passes)
    };
    let gal = protocol_method(Method::mc_dropout(0.05, GAL_LENGTH_SCALE));
    assert_eq!(budget(gal.as_ref()), budget(&GalDropout));
    let drop_connect = protocol_method(Method::drop_connect(0.05, GAL_LENGTH_SCALE));
    assert_ne!(budget(drop_connect.as_ref()), budget(&GalDropout));
}
