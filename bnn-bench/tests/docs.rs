//! The docs' rules: the README is a landing page without commit ids, every book page is in
//! the book's summary and runs as a doctest, and the book builds where mdbook is installed.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Words of 7 to 40 hex digits with a letter and a digit: what a commit id looks like.
fn commit_like_ids(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| (7..=40).contains(&w.len()))
        .filter(|w| {
            w.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        })
        .filter(|w| {
            w.chars().any(|c| c.is_ascii_digit()) && w.chars().any(|c| c.is_ascii_alphabetic())
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn the_readme_is_a_landing_page_without_commit_ids() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; the landing page keeps to 250"
    );
    let ids = commit_like_ids(&readme);
    assert!(ids.is_empty(), "README.md names commit-like ids: {ids:?}");
    assert_eq!(
        commit_like_ids("built at 96b5e2f, seed 1234567"),
        ["96b5e2f"]
    );
}

/// Every page under `book/src` (but the summary and the linked assets), relative to it.
fn book_pages() -> Vec<String> {
    let base = root().join("book/src");
    bnn_bench::tables::book_pages(&root())
        .iter()
        .map(|p| {
            p.strip_prefix(&base)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        })
        .filter(|rel| rel != "SUMMARY.md")
        .collect()
}

#[test]
fn every_book_page_is_in_the_summary_and_runs_as_a_doctest() {
    let summary = std::fs::read_to_string(root().join("book/src/SUMMARY.md")).unwrap();
    let doctests = ["bnn-burn/src/lib.rs", "bnn-bench/src/lib.rs"]
        .map(|f| std::fs::read_to_string(root().join(f)).unwrap())
        .concat();
    let pages = book_pages();
    assert!(pages.len() >= 10, "{pages:?}");
    for page in &pages {
        assert!(
            summary.contains(&format!("({page})")),
            "{page} is not in SUMMARY.md"
        );
        assert!(
            doctests.contains(&format!("include_str!(\"../../book/src/{page}\")")),
            "{page} is not included as a doctest module"
        );
    }
}

/// Like the README, no page of the book names a commit: run histories live in the records
/// and `CHANGELOG.md`.
#[test]
fn book_pages_name_no_commits() {
    for page in book_pages() {
        let text = std::fs::read_to_string(root().join("book/src").join(&page)).unwrap();
        let ids = commit_like_ids(&text);
        assert!(ids.is_empty(), "{page} names commit-like ids: {ids:?}");
    }
}

/// `mdbook build` where mdbook is installed (`cargo install mdbook`); skipped otherwise.
#[test]
fn the_book_builds() {
    let out = std::env::temp_dir().join(format!("bnn-book-{}", std::process::id()));
    let status = std::process::Command::new("mdbook")
        .arg("build")
        .arg(root().join("book"))
        .arg("--dest-dir")
        .arg(&out)
        .output();
    match status {
        Err(e) => eprintln!("SKIPPED: mdbook is not installed ({e})"),
        Ok(o) => {
            let log = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "mdbook build failed:\n{log}");
            assert!(!log.contains("[WARN]") && !log.contains("[ERROR]"), "{log}");
            assert!(out.join("methods/evidential.html").exists());
            let _ = std::fs::remove_dir_all(&out);
        }
    }
}

/// The tables generated from the records (`bnn-bench results`) are what the records give.
#[test]
fn generated_tables_match_the_records() {
    let differ = bnn_bench::tables::regenerate(&root(), true).unwrap();
    assert!(
        differ.is_empty(),
        "generated tables differ from the records (run `cargo run -p bnn-bench -- results`): {differ:?}"
    );
}

/// Module docs say what and why in a few lines and link the book, where the derivations are:
/// at most 10 lines of `//!` in every source file of the three crates.
#[test]
fn module_docs_are_short() {
    let files: Vec<PathBuf> = ["bnn-burn/src", "bnn-bench/src", "bnn-datasets/src"]
        .iter()
        .flat_map(|krate| {
            bnn_bench::tables::files_under(&root().join(krate), |p| {
                p.extension().is_some_and(|e| e == "rs")
            })
        })
        .collect();
    assert!(files.len() > 50, "{files:?}");
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let n = text.lines().take_while(|l| l.starts_with("//!")).count();
            (n > 10).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "module docs over 10 lines: {long:?}");
}

/// `assets/` holds the run records and figures, nothing else: a report is rebuilt from the
/// records, and the book's tables are generated from them.
#[test]
fn assets_hold_records_and_figures() {
    const KINDS: [&str; 5] = ["json", "jsonl", "log", "svg", "png"];
    let files = bnn_bench::tables::files_under(&root().join("assets"), |_| true);
    assert!(files.len() > 100, "{}", files.len());
    let other: Vec<String> = files
        .iter()
        .filter(|f| {
            !f.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| KINDS.contains(&e))
        })
        .filter(|f| {
            // A report a local run wrote and git ignores is not part of the repository.
            !std::process::Command::new("git")
                .args(["check-ignore", "-q"])
                .arg(f)
                .current_dir(root())
                .status()
                .is_ok_and(|s| s.success())
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(other.is_empty(), "not a record or a figure: {other:?}");
}

/// Every Rust block of the README and the book runs as a doctest: none is compile-only or
/// skipped.
#[test]
fn every_rust_block_runs() {
    let mut pages = vec![root().join("README.md")];
    pages.extend(bnn_bench::tables::book_pages(&root()));
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        for fence in text.lines().filter(|l| l.starts_with("```rust")) {
            assert!(
                fence.trim_end() == "```rust",
                "{}: `{fence}` does not run; make the block run or make it a `text` block",
                page.display()
            );
        }
    }
}
