//! `bnn-bench uci --dataset PATH` runs the protocol on a folder of the user's in the
//! UCI_Datasets layout, with a table without published columns. Needs no shared files.

mod common;

use common::write_set;
use std::process::Command;

#[test]
fn the_protocol_runs_on_a_users_folder_without_published_columns() {
    let base = std::env::temp_dir().join(format!("bnn-uci-own-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let set = base.join("myLinearSet");
    write_set(&set);
    let out = base.join("out");
    let output = Command::new(env!("CARGO_BIN_EXE_bnn-bench"))
        .args(["uci", "--dataset"])
        .arg(&set)
        .args([
            "--method", "MFVI", "--splits", "2", "--epochs", "400", "--out",
        ])
        .arg(&out)
        .output()
        .expect("bnn-bench runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let md = std::fs::read_to_string(out.join("uci.md")).unwrap();
    let row = md
        .lines()
        .find(|l| l.starts_with("| myLinearSet |"))
        .unwrap_or_else(|| panic!("no row for the set:\n{md}"));
    // Our MFVI cell and no published columns (a user's set has none), nor their sources.
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert!(cells[3].contains('±'), "{row}");
    assert_eq!(cells.len(), 5, "{row}");
    assert!(!md.contains("Sources:") && !md.contains("PBP"), "{md}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("uci.json")).unwrap()).unwrap();
    let result = &record["results"][0];
    assert_eq!(result["dataset"]["name"], "myLinearSet");
    assert_eq!(result["splits"].as_array().unwrap().len(), 2);
    // A linear target is learnt: test RMSE well below the target's spread (≈ 2.6).
    let rmse = result["splits"][0]["test_rmse"].as_f64().unwrap();
    assert!(rmse < 1.3, "test RMSE {rmse}");
    // The row names the build that ran it, as the record and the report do.
    let built = record["git_revision"].as_str().unwrap().to_string();
    assert_eq!(result["revisions"], serde_json::json!([built]));
    assert!(
        md.contains(&format!("Built from revision `{built}`.")),
        "{md}"
    );

    // An interrupted row resumes from its finished splits: a run killed after its first
    // split leaves it in the task's state folder; planted there with a marker value (sealed
    // again, as the runner writes it), it is reused; split 2 runs again and gives the same
    // numbers.
    let first_run = result["splits"].clone();
    let interrupted = base.join("interrupted");
    let mut child = Command::new(env!("CARGO_BIN_EXE_bnn-bench"))
        .args(["uci", "--dataset"])
        .arg(&set)
        .args([
            "--method", "MFVI", "--splits", "2", "--epochs", "400", "--out",
        ])
        .arg(&interrupted)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let part = loop {
        let found = std::fs::read_dir(interrupted.join("state"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("split-0.json"))
            .find(|p| p.is_file());
        if let Some(p) = found {
            break p;
        }
        assert!(child.try_wait().unwrap().is_none(), "the run ended first");
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!interrupted.join("uci.json").exists());
    let planted = serde_json::json!({ "part": {
        "outcome": { "test_ll": 123.0, "test_rmse": 0.5, "detail": "" },
        "seconds": 1000.0,
        "revision": "0ldbu1d",
    }});
    std::fs::write(&part, bnn_burn::integrity::seal_json(&planted)).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_bnn-bench"))
        .args(["uci", "--dataset"])
        .arg(&set)
        .args([
            "--method", "MFVI", "--splits", "2", "--epochs", "400", "--resume", "--out",
        ])
        .arg(&interrupted)
        .output()
        .expect("bnn-bench runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("1 finished splits reused"), "{stderr}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(interrupted.join("uci.json")).unwrap())
            .unwrap();
    let resumed = &record["results"][0]["splits"];
    assert_eq!(resumed[0]["test_ll"], 123.0);
    assert_eq!(resumed[1], first_run[1]);
    // The row's time includes the reused split's recorded 1000 s.
    let seconds = record["results"][0]["seconds"].as_f64().unwrap();
    assert!(seconds > 1000.0, "row seconds {seconds}");
    // Both builds that ran its splits, the reused split's first.
    assert_eq!(
        record["results"][0]["revisions"],
        serde_json::json!(["0ldbu1d", built])
    );
    let md = std::fs::read_to_string(interrupted.join("uci.md")).unwrap();
    assert!(
        md.contains(&format!("`0ldbu1d` then `{built}`: myLinearSet / MFVI")),
        "{md}"
    );
    assert!(!interrupted.join("state").exists());

    // A folder that is not in the layout is an error naming it, before any training.
    let output = Command::new(env!("CARGO_BIN_EXE_bnn-bench"))
        .args(["uci", "--dataset"])
        .arg(&base)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("bnn-bench runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(&base.display().to_string()) && stderr.contains("data/data.txt"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// Runs `bnn-bench uci` on `set` with `args`; returns (success, stderr).
fn uci(set: &std::path::Path, args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_bnn-bench"))
        .args(["uci", "--dataset"])
        .arg(set)
        .args(args)
        .output()
        .expect("bnn-bench runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

/// A method needs only the files it uses: without Gal's grid files the other methods run and
/// MC dropout is refused before any work, naming the files; a τ grid written for other units
/// (a noise std far below the targets') is run, and the report says so.
#[test]
fn mc_dropout_alone_needs_the_grid_and_a_grid_in_other_units_is_reported() {
    let base = std::env::temp_dir().join(format!("bnn-uci-grid-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let set = base.join("noGrid");
    write_set(&set);
    std::fs::remove_file(set.join("data/tau_values.txt")).unwrap();
    let out = base.join("out");
    let out_arg = out.to_str().unwrap();
    let (ok, err) = uci(
        &set,
        &[
            "--method", "MFVI", "--splits", "1", "--epochs", "2", "--out", out_arg,
        ],
    );
    assert!(ok, "{err}");
    let dropout_out = base.join("dropout");
    let (ok, err) = uci(
        &set,
        &[
            "--method",
            "mc-dropout",
            "--out",
            dropout_out.to_str().unwrap(),
        ],
    );
    assert!(!ok);
    assert!(
        err.contains("tau_values.txt") && err.contains("noGrid") && err.contains("precision"),
        "{err}"
    );
    assert!(!dropout_out.exists(), "work started: {err}");
    // τ from 10¹⁰ to 10¹²: noise stds of 10⁻⁵ to 10⁻⁶ for targets of spread ≈ 2.6.
    std::fs::write(set.join("data/tau_values.txt"), "1e10\n1e12\n").unwrap();
    let (ok, err) = uci(
        &set,
        &[
            "--method",
            "MC dropout",
            "--splits",
            "1",
            "--epochs",
            "1",
            "--quick",
            "--out",
            out_arg,
        ],
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("warning: noGrid: MC dropout's τ grid"),
        "{err}"
    );
    let md = std::fs::read_to_string(out.join("uci.md")).unwrap();
    assert!(
        md.contains("## Warnings") && md.contains("targets' original units"),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(&base);
}
