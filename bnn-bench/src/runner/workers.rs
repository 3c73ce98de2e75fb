//! Worker processes: the running executable started again with its own arguments and one task
//! to run (`--worker PID:TASK`). A worker writes its row into the parent's
//! folder under the parent's lock, and ends when its parent is gone.

use super::RunnerOptions;
use std::error::Error;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Whether this program runs a task when started with `--worker`.
static ALLOWED: AtomicBool = AtomicBool::new(false);

/// Lets [`super::run`] start worker processes (`jobs` above 1). A worker is the running
/// executable started with the arguments this process was started with, plus
/// `--worker PID:TASK`: its command line must then run that one task with
/// the same options ([`Worker`]). The `bnn-bench` binary calls this first; a program whose
/// command line does not do that leaves it uncalled, and `jobs` above 1 is an error before any
/// work.
pub fn allow_worker_processes() {
    ALLOWED.store(true, Ordering::Relaxed);
}

/// Whether [`allow_worker_processes`] was called.
pub fn worker_processes_allowed() -> bool {
    ALLOWED.load(Ordering::Relaxed)
}

/// What a worker process was started to do: the hidden flag `--worker PID:TASK` the runner
/// adds to a worker's command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worker {
    /// The id of its one task.
    pub task: String,
    /// Its parent's process id: the worker ends when the parent is gone.
    pub parent: u32,
}

impl Worker {
    /// `PID:TASK`, as the runner writes it.
    ///
    /// # Errors
    /// Text that is not a process id, a colon and a task id.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (pid, task) = s
            .split_once(':')
            .ok_or_else(|| format!("--worker {s:?}: expected PID:TASK"))?;
        let parent = pid
            .parse()
            .map_err(|_| format!("--worker {s:?}: {pid:?} is not a process id"))?;
        Ok(Self {
            task: task.to_string(),
            parent,
        })
    }

    /// Ends this process as soon as its parent is gone (a run killed with `kill -9` leaves no
    /// worker behind): checked now, then every quarter second on a thread of its own.
    pub fn watch_parent(&self) {
        #[cfg(unix)]
        {
            let parent = self.parent;
            let gone = move || std::os::unix::process::parent_id() != parent;
            if gone() {
                eprintln!("worker: its parent process {parent} is gone; stopping");
                std::process::exit(3);
            }
            std::thread::spawn(move || {
                loop {
                    std::thread::sleep(Duration::from_millis(250));
                    if gone() {
                        eprintln!("worker: its parent process {parent} is gone; stopping");
                        std::process::exit(3);
                    }
                }
            });
        }
    }
}

/// Runs the tasks `todo` (indices into `ids`) in up to `options.jobs` workers; `read_back(i)`
/// takes task `i`'s row when its worker ends. A failed worker stops the others.
pub(super) fn run_in_workers(
    ids: &[String],
    todo: &[usize],
    options: &RunnerOptions,
    name: &str,
    read_back: &mut dyn FnMut(usize) -> Result<(), Box<dyn Error>>,
) -> Result<(), Box<dyn Error>> {
    let mut queue = todo.iter().copied();
    let mut running: Vec<(usize, Child)> = Vec::new();
    let stop_all = |running: &mut Vec<(usize, Child)>| {
        for (_, child) in running.iter_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        running.clear();
    };
    loop {
        while running.len() < options.jobs {
            let Some(i) = queue.next() else { break };
            match spawn(&ids[i]) {
                Ok(child) => running.push((i, child)),
                Err(e) => {
                    stop_all(&mut running);
                    return Err(
                        format!("[{name}] could not start the worker for {}: {e}", ids[i]).into(),
                    );
                }
            }
        }
        if running.is_empty() {
            return Ok(());
        }
        let mut k = 0;
        while k < running.len() {
            match running[k].1.try_wait() {
                Ok(None) => k += 1,
                Ok(Some(status)) => {
                    let (i, _) = running.swap_remove(k);
                    if !status.success() {
                        stop_all(&mut running);
                        return Err(format!(
                            "[{name}] the worker for {} failed ({status}); the rows finished so \
                             far are in the folder (rerun with --resume)",
                            ids[i]
                        )
                        .into());
                    }
                    if let Err(e) = read_back(i) {
                        stop_all(&mut running);
                        return Err(e);
                    }
                }
                Err(e) => {
                    stop_all(&mut running);
                    return Err(e.into());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// This executable with this process's arguments and one task.
fn spawn(task: &str) -> std::io::Result<Child> {
    Command::new(std::env::current_exe()?)
        .args(std::env::args_os().skip(1))
        .arg("--worker")
        .arg(format!("{}:{task}", std::process::id()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
}
