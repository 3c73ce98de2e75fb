//! Every bad input of `bnn-bench` is a clear error, naming the flag or path, before any training
//! (each of these commands would train for minutes if it got that far).

use std::path::{Path, PathBuf};
use std::process::Command;

fn uci_data_present() -> bool {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/uci/yacht");
    let env = std::env::var_os("BNN_DATA_DIR").map(|d| PathBuf::from(d).join("uci/yacht"));
    shared.exists() || env.is_some_and(|p| p.exists())
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bnn-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `bnn-bench args`, expects a failure and returns its stderr.
fn fails(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_bnn-bench"))
        .args(args)
        .output()
        .expect("bnn-bench runs");
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(
        !output.status.success(),
        "`bnn-bench {}` succeeded; stderr: {stderr}",
        args.join(" ")
    );
    stderr
}

#[test]
fn unknown_methods_are_errors_in_every_subcommand_naming_the_known_ones() {
    let dir = scratch("methods");
    let out = dir.to_str().unwrap();
    for (cmd, known) in [
        ("uci", "MC dropout"),
        ("mnist", "MFVI-LRT"),
        ("toy", "MAP"),
        ("perf", "MFVI"),
    ] {
        let err = fails(&[cmd, "--method", "NoSuchMethod", "--out", out]);
        assert!(
            err.contains("NoSuchMethod") && err.contains(known),
            "{cmd}: {err}"
        );
    }
    for (flag, known) in [("--model", "BNN+LV α=0.5"), ("--dataset", "wet-chicken")] {
        let err = fails(&["depeweg", flag, "NoSuchMethod", "--out", out]);
        assert!(
            err.contains("NoSuchMethod") && err.contains(known),
            "{flag}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_output_path_that_is_a_file_is_an_error_naming_it_in_every_subcommand() {
    let dir = scratch("out-file");
    let file = dir.join("results.md");
    std::fs::write(&file, "earlier results").unwrap();
    let f = file.to_str().unwrap();
    for args in [
        vec!["quickstart", "--out", f],
        vec!["toy", "--out", f],
        vec!["uci", "--dataset", "yacht", "--out", f],
        vec!["mnist", "--out", f],
        vec!["perf", "--out", f],
        vec!["data", "--out", f],
        vec!["depeweg", "--dataset", "bimodal", "--out", f],
    ] {
        let err = fails(&args);
        assert!(
            err.contains("--out") && err.contains(f) && err.contains("is a file"),
            "{args:?}: {err}"
        );
    }
    // The file is left as it was.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "earlier results");
    // A folder that cannot be created (under that file).
    let under = file.join("sub");
    let err = fails(&["toy", "--out", under.to_str().unwrap()]);
    assert!(
        err.contains("cannot create") && err.contains("results.md/sub"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn zero_counts_are_errors_naming_the_flag() {
    let dir = scratch("zero");
    let out = dir.to_str().unwrap();
    for (args, flag) in [
        (vec!["quickstart", "--epochs", "0"], "--epochs"),
        (vec!["toy", "--epochs", "0"], "--epochs"),
        (vec!["uci", "--epochs", "0"], "--epochs"),
        (vec!["uci", "--jobs", "0"], "--jobs"),
        (vec!["mnist", "--samples", "0"], "--samples"),
        (vec!["mnist", "--batch-size", "0"], "--batch-size"),
        (vec!["data", "--rounds", "0"], "--rounds"),
        (vec!["depeweg", "--epochs", "0"], "--epochs"),
        (vec!["depeweg", "--splits", "0"], "--splits"),
        (vec!["depeweg", "--train-samples", "1"], "--train-samples"),
        (vec!["depeweg", "--lr", "0"], "--lr"),
    ] {
        let mut args = args.clone();
        args.extend(["--out", out]);
        let err = fails(&args);
        assert!(err.contains(flag), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn uci_splits_outside_the_data_sets_range_are_errors_before_training() {
    if !uci_data_present() {
        eprintln!("SKIPPED: the UCI files are not in ../shared/data/uci (see its README)");
        return;
    }
    let dir = scratch("splits");
    for bad in ["0", "21", "1000"] {
        let err = fails(&[
            "uci",
            "--dataset",
            "yacht",
            "--splits",
            bad,
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert!(
            err.contains(&format!("--splits {bad}")) && err.contains("1 to 20"),
            "{err}"
        );
    }
    // No report was written.
    assert!(!dir.join("uci.md").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_backend_variable_is_an_error_naming_it_before_any_work() {
    let dir = scratch("backend");
    let out = dir.to_str().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_bnn-bench"))
        .args(["toy", "--out", out])
        .env(bnn_burn::BACKEND_ENV, "cuda")
        .output()
        .expect("bnn-bench runs");
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains(bnn_burn::BACKEND_ENV) && err.contains("\"cuda\""),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "wrote output");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every command of the ledger is a command line the binary takes (its flags and their values
/// parse: `--help` after them prints the command's help), and `reproduce` refuses a table that
/// has none, naming its status.
#[test]
fn every_ledger_command_parses_and_tables_without_one_are_refused() {
    for e in bnn_bench::published::ledger::all() {
        if e.command.is_empty() {
            continue;
        }
        let output = Command::new(env!("CARGO_BIN_EXE_bnn-bench"))
            .args(&e.command)
            .arg("--help")
            .output()
            .expect("bnn-bench runs");
        assert!(
            output.status.success(),
            "{}: `bnn-bench {}` does not parse: {}",
            e.table,
            e.command.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let err = fails(&["reproduce", "haussmann-3.3"]);
    assert!(err.contains("not runnable yet"), "{err}");
    let err = fails(&["reproduce", "no-such-table"]);
    assert!(
        err.contains("unknown table") && err.contains("haussmann-3.1"),
        "{err}"
    );
    let err = fails(&["reproduce"]);
    assert!(err.contains("--list"), "{err}");
}
