//! `bnn-bench uci` gives the same numbers with worker processes and when resumed from an
//! interrupted run, as without. Needs the UCI files (../shared/data); skips without them.

use std::path::{Path, PathBuf};
use std::process::Command;

fn data_present() -> bool {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/uci/yacht");
    let env = std::env::var_os("BNN_DATA_DIR").map(|d| PathBuf::from(d).join("uci/yacht"));
    shared.exists() || env.is_some_and(|p| p.exists())
}

/// Runs `bnn-bench uci` on two yacht rows; returns (test LLs per row, stderr).
fn run(out: &Path, extra: &[&str]) -> (Vec<Vec<f64>>, String) {
    run_methods(out, &["MAP", "Radial"], extra)
}

/// Runs `bnn-bench uci` on yacht with `methods`; returns (test LLs per row of the record,
/// stderr).
fn run_methods(out: &Path, methods: &[&str], extra: &[&str]) -> (Vec<Vec<f64>>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_bnn-bench"))
        .args(["uci", "--dataset", "yacht"])
        .args(methods.iter().flat_map(|m| ["--method", m]))
        .args(["--splits", "2", "--epochs", "3", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .expect("bnn-bench runs");
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(output.status.success(), "{stderr}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("uci.json")).unwrap()).unwrap();
    let lls = record["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["splits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["test_ll"].as_f64().unwrap())
                .collect()
        })
        .collect();
    (lls, stderr)
}

#[test]
fn workers_and_resume_give_the_same_numbers() {
    if !data_present() {
        eprintln!("SKIPPED: the UCI files are not in ../shared/data/uci (see its README)");
        return;
    }
    let base = std::env::temp_dir().join(format!("bnn-uci-workers-{}", std::process::id()));
    let (serial, _) = run(&base.join("serial"), &[]);
    assert_eq!(serial.len(), 2);
    let (parallel, _) = run(&base.join("parallel"), &["--jobs", "2"]);
    assert_eq!(serial, parallel);
    assert!(!base.join("parallel/state").exists());

    // An interrupted run that finished only its first row: the second row's record is gone.
    let resumed_dir = base.join("resumed");
    run(&resumed_dir, &[]);
    let radial: Vec<_> = std::fs::read_dir(resumed_dir.join("rows"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("Radial"))
        .collect();
    assert_eq!(radial.len(), 1, "{radial:?}");
    std::fs::remove_file(&radial[0]).unwrap();
    let (resumed, stderr) = run(&resumed_dir, &["--resume"]);
    assert!(stderr.contains("1 of 2 tasks finished before"), "{stderr}");
    assert!(
        !stderr.contains("[yacht] MAP split"),
        "MAP was rerun:\n{stderr}"
    );
    assert_eq!(serial, resumed);

    // A resumed run of one row in that finished folder reuses it and keeps the other row.
    let (again, stderr) = run_methods(&resumed_dir, &["Radial"], &["--resume"]);
    assert!(
        stderr.contains("1 of 1 tasks finished before")
            && stderr.contains("1 rows of other tasks in the folder kept"),
        "{stderr}"
    );
    assert_eq!(again, serial, "the MAP row was dropped or changed");
    assert!(
        std::fs::read_to_string(resumed_dir.join("uci.md"))
            .unwrap()
            .contains("MAP")
    );
    std::fs::remove_dir_all(base).ok();
}
