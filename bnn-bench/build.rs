//! Stamps the bench with the git revision it is built from (`BNN_BENCH_REVISION`), so that a
//! run record names the code that produced its numbers: the checkout's `HEAD` at run time can
//! be a later commit (a binary built before a commit, or kept while the checkout moves on).
//! `+dirty` marks a build from uncommitted changes to the code; `unknown` a build outside a git
//! checkout (a crate tarball) or without `git`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What goes into the binary: the crates it links and the workspace's manifests.
const CODE: [&str; 5] = [
    "bnn-burn",
    "bnn-bench",
    "bnn-datasets",
    "Cargo.toml",
    "Cargo.lock",
];

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest
        .parent()
        .expect("the bench sits in the workspace")
        .to_path_buf();
    let revision = match git(&root, &["rev-parse", "--short", "HEAD"]) {
        Some(rev) => {
            let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--"];
            status.extend(CODE);
            match git(&root, &status) {
                Some(changes) if !changes.is_empty() => format!("{rev}+dirty"),
                _ => rev,
            }
        }
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=BNN_BENCH_REVISION={revision}");

    // Stamp again when HEAD moves (a checkout, a commit on the current branch) or the code
    // changes (the dirty mark). Naming these paths replaces cargo's default (any file of this
    // package), so the bench's own sources are among them. Only paths that exist: cargo takes a
    // missing one as changed and would stamp (and rebuild the bench) on every build. The
    // branch's ref is watched through its folder, which also sees the loose ref appear when the
    // ref was packed.
    let mut watched: Vec<PathBuf> = CODE.iter().map(|p| root.join(p)).collect();
    for path in ["HEAD", "packed-refs"] {
        if let Some(p) = git(&root, &["rev-parse", "--git-path", path]) {
            watched.push(root.join(p));
        }
    }
    if let Some(branch) = git(&root, &["symbolic-ref", "-q", "HEAD"])
        && let Some(p) = git(&root, &["rev-parse", "--git-path", &branch])
        && let Some(folder) = root.join(p).parent()
    {
        watched.push(folder.to_path_buf());
    }
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
