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
    // Our MFVI cell, then only "–" in the published columns.
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert!(cells[3].contains('±'), "{row}");
    assert!(
        cells[4..]
            .iter()
            .filter(|c| !c.is_empty())
            .all(|c| *c == "–"),
        "{row}"
    );
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
