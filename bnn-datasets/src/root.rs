//! Where data files are looked for, shared by every loader.
//!
//! An explicit folder (e.g. `--data-dir`) is used alone. Otherwise the roots are tried in
//! order: the `BNN_DATA_DIR` environment variable, `../shared/data` beside the workspace (and
//! beside the current directory), then the user cache folder (`$XDG_CACHE_HOME/bnn-burn/data`
//! or `~/.cache/bnn-burn/data`). A missing file is an error listing every path tried and the
//! public address of the file.

use crate::error::DataError;
use std::path::{Path, PathBuf};

/// Environment variable naming a data folder.
pub const DATA_DIR_ENV: &str = "BNN_DATA_DIR";

/// The data roots to search.
#[derive(Debug, Clone, PartialEq)]
pub struct DataRoot {
    roots: Vec<PathBuf>,
}

impl DataRoot {
    /// `explicit` alone when given, else the default search order.
    pub fn new(explicit: Option<&Path>) -> Self {
        match explicit {
            Some(p) => Self {
                roots: vec![p.to_path_buf()],
            },
            None => Self::default(),
        }
    }

    /// Exactly these roots, in this order.
    pub fn from_roots(roots: Vec<PathBuf>) -> Self {
        Self { roots }
    }

    /// The roots, in search order.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The first `root/relative` that exists.
    ///
    /// # Errors
    /// [`DataError::Missing`] listing every path tried and `url`.
    pub fn locate(&self, relative: &str, url: &str) -> Result<PathBuf, DataError> {
        let tried: Vec<PathBuf> = self.roots.iter().map(|r| r.join(relative)).collect();
        tried
            .iter()
            .find(|p| p.exists())
            .cloned()
            .ok_or_else(|| DataError::Missing {
                file: relative.to_string(),
                tried,
                url: url.to_string(),
            })
    }
}

impl Default for DataRoot {
    fn default() -> Self {
        let mut roots = Vec::new();
        if let Some(dir) = std::env::var_os(DATA_DIR_ENV).filter(|d| !d.is_empty()) {
            roots.push(PathBuf::from(dir));
        }
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        roots.push(workspace.join("../shared/data"));
        roots.push(PathBuf::from("../shared/data"));
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
        if let Some(c) = cache {
            roots.push(c.join("bnn-burn/data"));
        }
        roots.dedup();
        Self { roots }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_root_holding_the_file_and_lists_all_when_missing() {
        let base = std::env::temp_dir().join(format!("bnn-root-{}", std::process::id()));
        let (a, b) = (base.join("a"), base.join("b"));
        std::fs::create_dir_all(b.join("mnist")).unwrap();
        std::fs::write(b.join("mnist/f.gz"), b"x").unwrap();
        let root = DataRoot::from_roots(vec![a.clone(), b.clone()]);
        assert_eq!(
            root.locate("mnist/f.gz", "u").unwrap(),
            b.join("mnist/f.gz")
        );
        let e = root
            .locate("mnist/g.gz", "https://example.org/g")
            .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&a.join("mnist/g.gz").display().to_string()),
            "{msg}"
        );
        assert!(
            msg.contains(&b.join("mnist/g.gz").display().to_string()),
            "{msg}"
        );
        assert!(msg.contains("https://example.org/g") && msg.contains("BNN_DATA_DIR"));
        // An explicit folder is the only one searched.
        assert_eq!(DataRoot::new(Some(&a)).roots(), std::slice::from_ref(&a));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn the_default_order_ends_with_shared_data_and_the_cache() {
        let roots = DataRoot::default();
        let names: Vec<String> = roots
            .roots()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        assert!(
            names.iter().any(|n| n.ends_with("shared/data")),
            "{names:?}"
        );
    }
}
