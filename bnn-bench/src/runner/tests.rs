//! The runner on a harness of its own: which tasks run, which rows are reused, kept and
//! reported, and what is refused.

use super::*;
use std::cell::RefCell;

/// Tasks are names; a row is the name's length plus the harness's offset; `data` stands for
/// a digest of each task's data; `seed` for the run's settings.
struct Fake {
    tasks: Vec<&'static str>,
    data: Vec<(&'static str, u64)>,
    seed: u64,
    offset: usize,
    fail: Option<&'static str>,
    ran: RefCell<Vec<String>>,
    reported: RefCell<Vec<(String, usize)>>,
    wall: RefCell<f64>,
}

fn fake(tasks: &[&'static str]) -> Fake {
    Fake {
        tasks: tasks.to_vec(),
        data: Vec::new(),
        seed: 0,
        offset: 0,
        fail: None,
        ran: RefCell::new(Vec::new()),
        reported: RefCell::new(Vec::new()),
        wall: RefCell::new(0.0),
    }
}

impl Harness for Fake {
    type Task = String;
    type Row = usize;

    const NAME: &'static str = "fake";
    const FORMAT: u32 = 1;
    fn tasks(&self) -> Vec<String> {
        self.tasks.iter().map(|t| t.to_string()).collect()
    }
    fn task_id(&self, task: &String) -> String {
        task.clone()
    }
    fn run_key(&self) -> serde_json::Value {
        serde_json::json!({ "seed": self.seed })
    }
    fn task_key(&self, task: &String) -> serde_json::Value {
        let data = self.data.iter().find(|(t, _)| t == task).map_or(0, |d| d.1);
        serde_json::json!({ "data": data })
    }
    fn run_task(&self, task: &String, _: &TaskContext) -> Result<usize, Box<dyn Error>> {
        if self.fail == Some(task.as_str()) {
            return Err("it failed".into());
        }
        self.ran.borrow_mut().push(task.clone());
        if task == "slow" {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        Ok(task.len() + self.offset)
    }
    fn describe(&self, f: &Finished<String, usize>) -> String {
        format!("[fake] {} = {}", f.id, f.row)
    }
    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        *self.reported.borrow_mut() = run.rows.iter().map(|f| (f.id.clone(), f.row)).collect();
        *self.wall.borrow_mut() = run.wall_seconds;
        run.out.write("fake.md", b"report")?;
        Ok(())
    }
}

fn options(out: &Path, resume: bool) -> RunnerOptions {
    RunnerOptions {
        out: out.to_path_buf(),
        resume,
        jobs: 1,
        worker: None,
        report_only: false,
    }
}

fn ran(h: &Fake) -> Vec<String> {
    std::mem::take(&mut *h.ran.borrow_mut())
}

fn reported(h: &Fake) -> Vec<(String, usize)> {
    h.reported.borrow().clone()
}

/// The one record of task `id` in `out`.
fn record_of(out: &Path, id: &str) -> PathBuf {
    let stem = file_stem(id);
    let found: Vec<PathBuf> = std::fs::read_dir(out.join("rows"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(&stem) && name.ends_with(".json")
        })
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].clone()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bnn-runner-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn resume_reuses_only_rows_of_the_same_key_and_keeps_the_others() {
    let out = scratch("resume");
    let h = fake(&["a", "bb", "ccc"]);
    run(&h, &options(&out, false)).unwrap();
    assert_eq!(ran(&h), ["a", "bb", "ccc"]);
    assert_eq!(
        reported(&h),
        [("a".into(), 1), ("bb".into(), 2), ("ccc".into(), 3)]
    );
    // Resumed: nothing runs. Without --resume: everything runs again.
    run(&h, &options(&out, true)).unwrap();
    assert!(ran(&h).is_empty());
    run(&h, &options(&out, false)).unwrap();
    assert_eq!(ran(&h).len(), 3);
    // One task's data changed: only it runs again.
    let mut changed = fake(&["a", "bb", "ccc"]);
    changed.data = vec![("bb", 7)];
    run(&changed, &options(&out, true)).unwrap();
    assert_eq!(ran(&changed), ["bb"]);
    // A run of one task keeps the folder's others in its report (same settings)...
    let one = fake(&["a"]);
    run(&one, &options(&out, true)).unwrap();
    assert!(ran(&one).is_empty());
    let mut rows = reported(&one);
    rows.sort();
    assert_eq!(rows, [("a".into(), 1), ("bb".into(), 2), ("ccc".into(), 3)]);
    // ... but not under another seed, whose rows are not reused either.
    let mut other = fake(&["a"]);
    other.seed = 1;
    other.offset = 10;
    run(&other, &options(&out, true)).unwrap();
    assert_eq!(ran(&other), ["a"]);
    assert_eq!(reported(&other), [("a".into(), 11)]);
    // Reporting only: nothing runs; the finished rows of this run's key are reported.
    let report = RunnerOptions {
        report_only: true,
        ..options(&out, false)
    };
    let all = fake(&["a", "bb", "ccc", "dddd"]);
    let rows = run(&all, &report).unwrap();
    assert!(ran(&all).is_empty());
    // Rows of other keys stay beside a task's: "a" under seed 0 and "bb" on the first data are
    // still there; "dddd" never ran.
    assert_eq!(
        reported(&all),
        [("a".into(), 1), ("bb".into(), 2), ("ccc".into(), 3)]
    );
    assert_eq!(rows.len(), 3);
    // A report of reused rows counts their time: a 0.2 s task, reported alone.
    let slow = fake(&["slow"]);
    run(&slow, &options(&out, false)).unwrap();
    run(&slow, &report).unwrap();
    assert!(ran(&slow) == ["slow"] && *slow.wall.borrow() >= 0.2);
    // Files in rows/ that are not row records are left alone.
    std::fs::write(out.join("rows/notes.json"), "{}").unwrap();
    run(&all, &report).unwrap();
    assert!(out.join("rows/notes.json").is_file());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_damaged_row_is_set_aside_and_its_task_runs_again() {
    let out = scratch("damaged");
    let h = fake(&["a", "bb"]);
    run(&h, &options(&out, false)).unwrap();
    ran(&h);
    let path = record_of(&out, "bb");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"row\": 2", "\"row\": 3")).unwrap();
    run(&h, &options(&out, true)).unwrap();
    assert_eq!(ran(&h), ["bb"]);
    assert_eq!(reported(&h), [("a".into(), 1), ("bb".into(), 2)]);
    let mut aside = path.into_os_string();
    aside.push(".damaged");
    assert!(PathBuf::from(aside).is_file());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_runs_are_refused_before_work_and_a_failed_task_keeps_the_rows_before_it() {
    let out = scratch("refused");
    // One task twice, and worker processes from a program that cannot start them.
    let twice = fake(&["a", "a"]);
    let err = run(&twice, &options(&out, false)).unwrap_err().to_string();
    assert!(err.contains("\"a\" is asked for twice"), "{err}");
    let jobs = RunnerOptions {
        jobs: 2,
        ..options(&out, false)
    };
    if !worker_processes_allowed() {
        let err = run(&fake(&["a"]), &jobs).unwrap_err().to_string();
        assert!(err.contains("--jobs 2"), "{err}");
    }
    let zero = RunnerOptions {
        jobs: 0,
        ..options(&out, false)
    };
    assert!(run(&fake(&["a"]), &zero).is_err());
    assert!(!out.exists(), "nothing is written before the checks");
    // The second task fails: the first task's row is kept, and the error names the task.
    let mut failing = fake(&["a", "bb", "ccc"]);
    failing.fail = Some("bb");
    let err = run(&failing, &options(&out, false))
        .unwrap_err()
        .to_string();
    assert!(err.contains("bb: it failed"), "{err}");
    let key = key_of(&failing, &"bb".to_string());
    assert!(record_of(&out, "a").is_file() && !row_path(&out, "bb", &key).exists());
    let h = fake(&["a", "bb", "ccc"]);
    run(&h, &options(&out, true)).unwrap();
    assert_eq!(ran(&h), ["bb", "ccc"]);
    // A folder another run holds is refused, naming it; a file in its place too.
    let held = OutFolder::open(&out, "--out").unwrap();
    let err = run(&h, &options(&out, true)).unwrap_err().to_string();
    assert!(
        err.contains("another run is writing into this folder"),
        "{err}"
    );
    drop(held);
    run(&h, &options(&out, true)).unwrap();
    let file = out.join("fake.md");
    let err = run(&h, &options(&file, false)).unwrap_err().to_string();
    assert!(err.contains("is a file"), "{err}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn task_files_are_named_apart_even_when_their_names_read_alike() {
    let out = Path::new("out");
    let key = serde_json::json!({ "seed": 0 });
    let other = serde_json::json!({ "seed": 1 });
    assert_ne!(
        row_path(out, "MFVI, x", &key),
        row_path(out, "MFVI_ x", &key)
    );
    assert_ne!(row_path(out, "a", &key), row_path(out, "a", &other));
    assert_ne!(state_path(out, "a", &key), state_path(out, "a", &other));
    let long = "x".repeat(500);
    let name = row_path(out, &long, &key);
    assert!(name.file_name().unwrap().len() < 120, "{name:?}");
    for path in [name, row_path(out, "MFVI, x", &key)] {
        assert!(is_row_file(&path.file_name().unwrap().to_string_lossy()));
    }
    for other in ["notes.json", "boston__MAP__e40__1.json", "a-1234-abc.json"] {
        assert!(!is_row_file(other), "{other}");
    }
}

#[test]
fn the_output_folder_is_checked_before_work() {
    let dir = std::env::temp_dir().join(format!("bnn-bench-out-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // A missing folder (and its parents) is created; what is in it stays.
    let out = dir.join("a/b");
    drop(OutFolder::open(&out, "--out").unwrap());
    std::fs::write(out.join("kept.md"), "x").unwrap();
    drop(OutFolder::open(&out, "--out").unwrap());
    assert_eq!(std::fs::read_to_string(out.join("kept.md")).unwrap(), "x");
    // The folder holds what it held and the lock file.
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 2);
    // A file in place of the folder.
    let file = dir.join("file");
    std::fs::write(&file, "x").unwrap();
    let err = OutFolder::open(&file, "--out").unwrap_err();
    assert!(
        err.contains("--out")
            && err.contains(&file.display().to_string())
            && err.contains("is a file"),
        "{err}"
    );
    // A folder under a file cannot be created.
    let err = OutFolder::open(&file.join("sub"), "--out").unwrap_err();
    assert!(
        err.contains("cannot create") && err.contains("file/sub"),
        "{err}"
    );
    // A read-only folder (root ignores permissions: checked only when they bite).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let ro = dir.join("ro");
        std::fs::create_dir(&ro).unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
        if std::fs::write(ro.join("probe"), b"").is_err() {
            let err = OutFolder::open(&ro, "--out").unwrap_err();
            assert!(err.contains("cannot write") && err.contains("ro"), "{err}");
        }
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
