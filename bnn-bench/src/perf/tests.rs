//! Tests of the training-step benchmark.

use super::*;

#[test]
fn perf_measures_every_method_and_writes_its_report() {
    // The heap counter is process-wide: hold the lock every training test holds, so no
    // other test allocates or frees inside the measurement.
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
    let dir = std::env::temp_dir().join(format!("bnn-perf-test-{}", std::process::id()));
    let options = PerfOptions {
        steps: 1,
        rounds: 1,
        seed: 0,
        out: dir.clone(),
        peer_python: None,
        peer_dir: dir.clone(),
        threads: 2,
        methods: vec![],
        nets: vec![Net::Mlp],
        kernels: vec![Kernels::Fused, Kernels::Reference],
    };
    let rows = run(&options).unwrap();
    // The baselines, then every family, the continual-learning rows, the two point-weight
    // rows, the black-box α row and the DVI row on both kernels, and the BEDL-PAC row (fused
    // only).
    let on_both = bayesian_methods().len() + continual_methods().len() + point_methods().len() + 2;
    assert_eq!(rows.len(), 2 + 2 * on_both + 1);
    for r in &rows {
        assert!(r.ms_per_step > 0.0 && r.ms_per_step.is_finite(), "{r:?}");
        // Three weight matrices alone are 1.4 MiB of f32; Adam keeps two more copies.
        assert!(r.peak_heap_bytes.unwrap() > 1 << 20, "{r:?}");
    }
    let table = std::fs::read_to_string(dir.join("perf.md")).unwrap();
    assert!(table.contains("MFVI-LRT (reference)") && table.contains(BASELINE));
    assert!(table.contains(&format!("{MAP_DROPOUT} (reference)")) && table.contains(MAP));
    assert!(
        table.contains(&format!("{BLACK_BOX} (reference)")) && table.contains(BEDL_PAC),
        "{table}"
    );
    assert!(
        table.contains(&format!("{DVI_MOMENTS} (reference)"))
            && table.contains(&format!("{CONTINUAL} (reference)"))
            && table.contains(&format!("{CONTINUAL_LOW_RANK} (reference)")),
        "{table}"
    );
    // Both the table and the record name the build's revision.
    let revision = crate::experiment::git_revision();
    assert!(table.contains(&format!("revision `{revision}`")), "{table}");
    let json = std::fs::read_to_string(dir.join("perf.json")).unwrap();
    let record: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(record["git_revision"], revision.as_str());
    assert_eq!(record["results"].as_array().unwrap().len(), rows.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_lenet5_workload_runs_and_bad_options_are_refused_before_any_work() {
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
    let dir = std::env::temp_dir().join(format!("bnn-perf-lenet-{}", std::process::id()));
    let mut options = PerfOptions {
        steps: 1,
        rounds: 1,
        seed: 0,
        out: dir.clone(),
        peer_python: None,
        peer_dir: dir.clone(),
        threads: 2,
        methods: vec!["mfvi".into(), BEDL_PAC.to_lowercase()],
        nets: vec![Net::LeNet5],
        kernels: vec![Kernels::Fused],
    };
    let rows = run(&options).unwrap();
    assert_eq!(rows.len(), 4);
    assert!(
        rows.iter()
            .all(|r| r.net == Net::LeNet5 && r.ms_per_step > 0.0)
    );
    options.methods = vec!["MFVI".into(), "Bogus".into()];
    let err = run(&options).unwrap_err().to_string();
    assert!(err.contains("'Bogus'") && err.contains("MFVI-LRT"), "{err}");
    options.methods = vec!["MFVI".into()];
    options.threads = 0;
    let err = run(&options).unwrap_err().to_string();
    assert!(err.contains("--threads"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn median_of_even_and_odd_counts() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
}

/// `perf-epoch` names a bad flag before loading data or starting the peer.
#[test]
fn perf_epoch_refuses_bad_options_by_name() {
    let options = |rounds: usize, method: &str, python: &str| epoch::EpochOptions {
        out: std::env::temp_dir().join("bnn-perf-epoch-refused"),
        rounds,
        method: method.into(),
        data_dir: None,
        peer_python: Some(python.into()),
        threads: 2,
        seed: 0,
    };
    let err = |o| epoch::run(&o).unwrap_err().to_string();
    assert!(err(options(0, "MFVI-LRT", "/no/python")).contains("--rounds"));
    let bogus = err(options(1, "Bogus", "/no/python"));
    assert!(bogus.contains("--method Bogus"), "{bogus}");
    let moments = err(options(1, "VBP", "/no/python"));
    assert!(moments.contains("a sampled method"), "{moments}");
    let python = err(options(1, "mfvi-lrt", "/no/python"));
    assert!(python.contains("--peer-python"), "{python}");
    assert!(!options(1, "MFVI-LRT", "/").out.exists());
}
