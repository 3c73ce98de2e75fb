//! The output folder of a run: held by one run at a time (a lock the operating system releases
//! when the process ends, however it ends), written by temporary file and rename, and checked
//! for room before any work.

use bnn_burn::integrity::{self, IntegrityError};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The lock file's name inside an output folder.
pub const LOCK_FILE: &str = ".bnn-bench.lock";

/// An output folder this process holds: no other run writes into it until it is dropped.
#[derive(Debug)]
pub struct OutFolder {
    path: PathBuf,
    /// Holds the lock; `None` for a worker, which writes under its parent's lock.
    _lock: Option<File>,
}

impl OutFolder {
    /// Creates `path` (with its parents) when missing, checks that it can be written, and
    /// takes its lock. `flag` names the option the folder came from in errors (`--out`).
    ///
    /// # Errors
    /// A file in place of the folder, a folder that cannot be created or written, or one that
    /// another run holds (its process id and command are named).
    pub fn open(path: &Path, flag: &str) -> Result<Self, String> {
        if path.exists() && !path.is_dir() {
            return Err(format!(
                "{flag} {}: is a file, not a folder; give a folder for the results",
                path.display()
            ));
        }
        std::fs::create_dir_all(path)
            .map_err(|e| format!("{flag} {}: cannot create the folder: {e}", path.display()))?;
        let lock_path = path.join(LOCK_FILE);
        let mut lock = File::options()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&lock_path)
            .map_err(|e| format!("{flag} {}: cannot write in the folder: {e}", path.display()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&lock_path).unwrap_or_default();
                return Err(format!(
                    "{flag} {}: another run is writing into this folder ({}); wait for it to \
                     finish, or give another folder",
                    path.display(),
                    describe_holder(&holder)
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(format!(
                    "{flag} {}: cannot lock the folder: {e}",
                    path.display()
                ));
            }
        }
        let command: Vec<String> = std::env::args().collect();
        let holder = format!(
            "{}\n{}\n{}\n",
            std::process::id(),
            unix_seconds(),
            command.join(" ")
        );
        lock.set_len(0)
            .and_then(|()| lock.write_all(holder.as_bytes()))
            .and_then(|()| lock.flush())
            .map_err(|e| format!("{flag} {}: cannot write in the folder: {e}", path.display()))?;
        // Temporary files of a run killed while writing: no writer holds them now.
        for dir in [path.to_path_buf(), path.join("rows")] {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') && name.contains(".tmp-") {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        Ok(Self {
            path: path.to_path_buf(),
            _lock: Some(lock),
        })
    }

    /// A folder that a parent process holds (a worker's): no lock is taken.
    ///
    /// # Errors
    /// When the folder does not exist or holds no lock file (no run holds it).
    pub fn held_by_parent(path: &Path) -> Result<Self, String> {
        if !path.join(LOCK_FILE).is_file() {
            return Err(format!(
                "{}: a worker writes only into a folder its parent run holds",
                path.display()
            ));
        }
        Ok(Self {
            path: path.to_path_buf(),
            _lock: None,
        })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `name` inside the folder.
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }

    /// Writes `bytes` to `name` (a path inside the folder; its folders are created) whole, or
    /// leaves the file as it was.
    ///
    /// # Errors
    /// The file named, with the system's reason ("No space left on device").
    pub fn write(&self, name: impl AsRef<Path>, bytes: &[u8]) -> Result<(), String> {
        let path = self.path.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("{}: cannot create the folder: {e}", parent.display()))?;
        }
        integrity::write_atomic(&path, bytes).map_err(|e| e.to_string())
    }

    /// Writes the JSON object `record` to `name`, sealed with its checksum
    /// ([`integrity::seal_json`]).
    ///
    /// # Errors
    /// As [`OutFolder::write`].
    pub fn write_record(
        &self,
        name: impl AsRef<Path>,
        record: &serde_json::Value,
    ) -> Result<(), String> {
        self.write(name, integrity::seal_json(record).as_bytes())
    }

    /// Checks that the folder's file system has `bytes` free, before any work.
    ///
    /// # Errors
    /// Naming the folder, the room needed and the room there is.
    pub fn check_room(&self, bytes: u64) -> Result<(), String> {
        match free_bytes(&self.path) {
            Some(free) if free < bytes => Err(format!(
                "{}: {} free, and this run needs about {} for its records and training states; \
                 free some space or give another folder",
                self.path.display(),
                size(free),
                size(bytes)
            )),
            _ => Ok(()),
        }
    }
}

/// Seconds since the Unix epoch.
fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The holder a lock file names (process id, start time, command line), in words.
fn describe_holder(text: &str) -> String {
    let mut lines = text.lines();
    match (
        lines.next(),
        lines.next().and_then(|s| s.parse::<u64>().ok()),
        lines.next(),
    ) {
        (Some(pid), Some(started), Some(command)) => format!(
            "process {pid}, running for {} s: {command}",
            unix_seconds().saturating_sub(started)
        ),
        _ => "a process that is starting".into(),
    }
}

/// How a record read back from disk turned out.
#[derive(Debug)]
pub enum ReadRecord {
    /// No such file.
    Missing,
    /// The record, its checksum verified (or a record written before records carried one).
    Intact(serde_json::Value),
    /// The file is damaged, cut short or not JSON: why.
    Damaged(String),
}

/// Reads a record written by [`OutFolder::write_record`]. A record without a checksum is read
/// as intact only when `legacy` (a run record written before they carried one).
///
/// # Errors
/// A file that exists but cannot be read (the path named).
pub fn read_record(path: &Path, legacy: bool) -> Result<ReadRecord, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ReadRecord::Missing),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return Ok(ReadRecord::Damaged("not UTF-8 text".into()));
        }
        Err(e) => return Err(format!("{}: cannot read: {e}", path.display())),
    };
    Ok(match integrity::open_json(&text) {
        Ok(v) => ReadRecord::Intact(v),
        Err(IntegrityError::Unsealed(_)) if legacy => match serde_json::from_str(&text) {
            Ok(v) => ReadRecord::Intact(v),
            Err(e) => ReadRecord::Damaged(format!("not JSON ({e})")),
        },
        Err(e) => ReadRecord::Damaged(e.to_string()),
    })
}

/// Moves a damaged file aside (`NAME.damaged`), so that nothing is lost and the work it held
/// is done again.
pub fn set_aside(path: &Path) -> PathBuf {
    let mut aside = path.as_os_str().to_owned();
    aside.push(".damaged");
    let aside = PathBuf::from(aside);
    let _ = std::fs::rename(path, &aside);
    aside
}

/// Free bytes for an unprivileged writer on the file system holding `path`.
#[cfg(unix)]
fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `stat` a valid, writable statvfs.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut stat) };
    (rc == 0).then(|| stat.f_bavail as u64 * stat.f_frsize as u64)
}

#[cfg(not(unix))]
fn free_bytes(_: &Path) -> Option<u64> {
    None
}

/// `bytes` in MiB or GiB.
fn size(bytes: u64) -> String {
    let mib = bytes as f64 / (1u64 << 20) as f64;
    if mib >= 1024.0 {
        format!("{:.1} GiB", mib / 1024.0)
    } else {
        format!("{mib:.1} MiB")
    }
}
