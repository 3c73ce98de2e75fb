//! A run's records survive what happens to real runs: `kill -9` at any point (then `--resume`
//! ends with the numbers of an uninterrupted run), a second run into the same folder, a damaged
//! record, data that changed under a folder, a disk without room, a killed parent of worker
//! processes. Every run here is `bnn-bench uci` on a small set of the user's (no shared files).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A fresh folder for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bnn-faults-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `bnn-bench uci` on `set` with three methods, two splits and `epochs`, into `out`.
fn command(set: &Path, out: &Path, epochs: usize, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bnn-bench"));
    c.args(["uci", "--dataset"])
        .arg(set)
        .args(["--method", "MAP", "--method", "MFVI", "--method", "Radial"])
        .args(["--splits", "2", "--epochs", &epochs.to_string(), "--out"])
        .arg(out)
        .args(extra)
        .stdin(Stdio::null());
    c
}

fn finished(output: Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(output.status.success(), "{stderr}");
    stderr
}

/// The test LLs and RMSEs of every row of `out/uci.json`, as bits.
fn numbers(out: &Path) -> Vec<(String, Vec<(u64, u64)>)> {
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("uci.json")).unwrap()).unwrap();
    record["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let splits = r["splits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    (
                        s["test_ll"].as_f64().unwrap().to_bits(),
                        s["test_rmse"].as_f64().unwrap().to_bits(),
                    )
                })
                .collect();
            (r["method"].as_str().unwrap().to_string(), splits)
        })
        .collect()
}

/// A small pseudo-random stream for the kill times (its own seed, shifted by the suite's).
fn uniform(state: &mut u64) -> f64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*state >> 11) as f64 / (1u64 << 53) as f64
}

#[test]
fn kill_9_at_random_points_then_resume_ends_with_the_uninterrupted_numbers() {
    let dir = scratch("kill");
    let set = dir.join("mySet");
    common::write_set(&set);
    let epochs = 60;
    let t0 = Instant::now();
    finished(
        command(&set, &dir.join("whole"), epochs, &[])
            .output()
            .unwrap(),
    );
    let whole = numbers(&dir.join("whole"));
    let duration = t0.elapsed().as_secs_f64();
    assert_eq!(whole.len(), 3);
    let offset: u64 = std::env::var("BNN_BURN_TEST_SEED_OFFSET")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut state = 17 + offset;
    for round in 0..5 {
        let out = dir.join(format!("killed-{round}"));
        // Killed somewhere in the run: in a split, between splits, while writing a row.
        let at = Duration::from_secs_f64(duration * (0.05 + 0.9 * uniform(&mut state)));
        let mut child = command(&set, &out, epochs, &[])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(at);
        let _ = child.kill();
        let _ = child.wait();
        // Killed a second time while resuming, then resumed to the end.
        let mut again = command(&set, &out, epochs, &["--resume"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(at / 2);
        let _ = again.kill();
        let _ = again.wait();
        finished(command(&set, &out, epochs, &["--resume"]).output().unwrap());
        assert_eq!(numbers(&out), whole, "killed at {at:?}, then resumed");
        // No training state or temporary file is left behind.
        assert!(!out.join("state").exists(), "round {round}");
        for entry in std::fs::read_dir(out.join("rows")).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(!name.starts_with('.'), "{name} left in rows/");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_second_run_into_a_held_folder_is_refused_and_the_lock_dies_with_its_holder() {
    let dir = scratch("lock");
    let set = dir.join("mySet");
    common::write_set(&set);
    let out = dir.join("out");
    let mut first = command(&set, &out, 100_000, &[])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The lock file names its holder once the run holds the folder.
    let lock = out.join(".bnn-bench.lock");
    let t0 = Instant::now();
    while std::fs::read_to_string(&lock).map_or(true, |t| t.lines().count() < 3) {
        assert!(t0.elapsed() < Duration::from_secs(60), "never locked");
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = command(&set, &out, 2, &["--resume"]).output().unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success());
    assert!(
        err.contains("another run is writing into this folder")
            && err.contains(&format!("process {}", first.id()))
            && err.contains("--epochs 100000"),
        "{err}"
    );
    // `kill -9` of the holder frees the folder: the next run may take it.
    first.kill().unwrap();
    first.wait().unwrap();
    finished(command(&set, &out, 2, &[]).output().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_damaged_row_is_set_aside_and_other_data_is_not_resumed() {
    let dir = scratch("damaged");
    let set = dir.join("mySet");
    common::write_set(&set);
    let out = dir.join("out");
    finished(command(&set, &out, 20, &[]).output().unwrap());
    let whole = numbers(&out);
    // One flipped digit in one row's record.
    let rows: Vec<PathBuf> = std::fs::read_dir(out.join("rows"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("MFVI"))
        .collect();
    let [row] = &rows[..] else { panic!("{rows:?}") };
    let text = std::fs::read_to_string(row).unwrap();
    let at = text.find("\"test_ll\": ").unwrap() + 12;
    let digit = text.as_bytes()[at];
    let flipped = if digit == b'7' { '8' } else { '7' };
    let mut bad = text.clone();
    bad.replace_range(at..at + 1, &flipped.to_string());
    std::fs::write(row, bad).unwrap();
    let err = finished(command(&set, &out, 20, &["--resume"]).output().unwrap());
    assert!(
        err.contains("damaged") && err.contains("2 of 3 tasks finished before"),
        "{err}"
    );
    assert!(
        err.contains("MFVI split 1/2"),
        "MFVI was not run again: {err}"
    );
    assert_eq!(numbers(&out), whole);
    let mut aside = row.as_os_str().to_owned();
    aside.push(".damaged");
    assert!(PathBuf::from(aside).is_file());

    // The same set with one value changed: nothing is reused.
    let data = set.join("data/data.txt");
    let text = std::fs::read_to_string(&data).unwrap();
    let changed = text.replacen('1', "2", 1);
    std::fs::write(&data, changed).unwrap();
    let err = finished(command(&set, &out, 20, &["--resume"]).output().unwrap());
    assert!(err.contains("0 of 3 tasks finished before"), "{err}");
    assert_ne!(numbers(&out), whole);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tmpfs of `size` at `dir` for the closure, where the machine lets this process mount one
/// (root in a sandbox that allows it); `None` otherwise.
fn on_tmpfs<T>(dir: &Path, size: &str, f: impl FnOnce() -> T) -> Option<T> {
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        return None;
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    let _ = Command::new("umount").arg(dir).status();
    Some(result.unwrap_or_else(|e| std::panic::resume_unwind(e)))
}

#[test]
fn a_disk_without_room_is_refused_before_work_and_never_cuts_a_record() {
    let dir = scratch("full");
    let set = dir.join("mySet");
    common::write_set(&set);
    let disk = dir.join("disk");
    std::fs::create_dir_all(&disk).unwrap();
    let ran = on_tmpfs(&disk, "2m", || {
        let out = disk.join("out");
        let output = command(&set, &out, 2, &[]).output().unwrap();
        let err = String::from_utf8_lossy(&output.stderr).to_string();
        assert!(!output.status.success());
        assert!(
            err.contains(&out.display().to_string()) && err.contains("MiB free"),
            "{err}"
        );
        assert!(!out.join("rows").exists());
        // A record replaced on a full disk: the error names the file and the old one stays.
        let record = disk.join("record.json");
        bnn_burn::integrity::write_atomic(&record, b"{\"old\": 1}").unwrap();
        let filler = disk.join("filler");
        let _ = std::fs::write(&filler, vec![0u8; 4 << 20]);
        let big = vec![b' '; 1 << 20];
        let err = bnn_burn::integrity::write_atomic(&record, &big).unwrap_err();
        assert!(
            err.to_string().contains("record.json")
                && err.kind() == std::io::ErrorKind::StorageFull,
            "{err}"
        );
        assert_eq!(std::fs::read(&record).unwrap(), b"{\"old\": 1}");
        let names: Vec<String> = std::fs::read_dir(&disk)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
    });
    if ran.is_none() {
        eprintln!("SKIPPED: this machine does not let the test mount a tmpfs");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The ids of the processes whose parent is `pid` (Linux's /proc).
fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
                // The parent is the 2nd field after the command's closing parenthesis.
                s.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

#[test]
#[cfg(target_os = "linux")]
fn workers_end_when_their_parent_is_killed() {
    let dir = scratch("orphans");
    let set = dir.join("mySet");
    common::write_set(&set);
    let out = dir.join("out");
    let mut parent = command(&set, &out, 100_000, &["--jobs", "2"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let workers = loop {
        let c = children(parent.id());
        if c.len() == 2 {
            break c;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "no workers started");
        std::thread::sleep(Duration::from_millis(20));
    };
    parent.kill().unwrap();
    parent.wait().unwrap();
    let t0 = Instant::now();
    while workers
        .iter()
        .any(|w| Path::new(&format!("/proc/{w}")).exists() && !zombie(*w))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "workers {workers:?} outlived their parent"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether process `pid` has ended and waits for its parent to collect it.
fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}
