//! What every experiment shares: per-run seeds, the git revision, the JSON run record, and
//! picking methods by name, checking the output folder before work and numbers before reports.

use std::path::Path;

/// A checksum of image sets (each one's length, pixels and labels, in order), for a run key
/// that changes when the data do.
pub fn image_digest<'a>(sets: impl IntoIterator<Item = &'a bnn_datasets::ImageSet>) -> String {
    let mut digest = bnn_burn::integrity::Digest::new();
    for set in sets {
        digest
            .number(set.len() as u64)
            .update(&set.pixels)
            .update(&set.labels);
    }
    digest.hex()
}

/// A seed for one unit of an experiment (a data set, method and split; an architecture and
/// method), independent of which other units are in the run, so any row can be reproduced
/// alone. FNV-1a over the names (separated by a 0 byte), mixed with `seed` and `k`: stable
/// across runs and platforms.
pub fn derive(seed: u64, names: &[&str], k: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, name) in names.iter().enumerate() {
        let sep: &[u8] = if i == 0 { &[] } else { &[0] };
        for &b in sep.iter().chain(name.as_bytes()) {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ k.wrapping_mul(0xff51_afd7_ed55_8ccd)
}

/// `name` as a file name: ASCII letters, digits, `.`, `-` and `_` kept, `α` as `a`, anything
/// else `_`.
pub fn slug(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            'α' => 'a',
            c if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' => c,
            _ => '_',
        })
        .collect()
}

/// The short git revision the bench was built from (`+dirty` when built from uncommitted
/// changes to the code, `unknown` outside a git checkout): stamped by `build.rs`, so a record
/// names the code that produced it even when the checkout has moved on since the build.
pub fn git_revision() -> String {
    env!("BNN_BENCH_REVISION").to_string()
}

/// The revisions that produced a resumable piece of work whose state lives in `folder` (a
/// row's training state): the file `folder/revisions` lists them one per line, oldest first.
/// This build's revision is appended unless it is already the last line; the folder is created
/// when missing. Returns the list, this build's last.
pub fn note_revision(folder: &Path) -> Result<Vec<String>, String> {
    let path = folder.join("revisions");
    let mut revisions: Vec<String> = read_if_exists(&path)?
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    let this = git_revision();
    if revisions.last() != Some(&this) {
        revisions.push(this);
        std::fs::create_dir_all(folder).map_err(|e| format!("{}: {e}", folder.display()))?;
        std::fs::write(&path, revisions.join("\n") + "\n")
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(revisions)
}

/// `revisions` in their first order, each once: the builds a row's parts came from.
pub fn distinct(revisions: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in revisions {
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

/// A report's line on provenance: which builds produced its rows. `rows` gives each row's
/// label and revisions (empty: a row from a record written before rows kept them). One
/// revision for every row reads "Built from revision `X`."; otherwise each revision, or set of
/// revisions, is listed with the rows it produced.
pub fn revisions_line(rows: &[(String, Vec<String>)]) -> String {
    let mut groups: Vec<(&[String], Vec<&str>)> = Vec::new();
    for (label, revisions) in rows {
        match groups.iter_mut().find(|(r, _)| *r == revisions.as_slice()) {
            Some((_, labels)) => labels.push(label),
            None => groups.push((revisions, vec![label])),
        }
    }
    let named = |revisions: &[String]| match revisions {
        [] => "not recorded".to_string(),
        r => r
            .iter()
            .map(|r| format!("`{r}`"))
            .collect::<Vec<_>>()
            .join(" then "),
    };
    match groups.as_slice() {
        [] => String::new(),
        [([one], _)] => format!("Built from revision `{one}`."),
        _ => {
            let parts: Vec<String> = groups
                .iter()
                .map(|(revisions, labels)| format!("{}: {}", named(revisions), labels.join(", ")))
                .collect();
            format!(
                "Revisions of the rows (a row resumed across builds lists each): {}.",
                parts.join("; ")
            )
        }
    }
}

/// A run record: the experiment, its options, the git revision, backend, library version,
/// wall time and results, plus the experiment's own `extra` fields (a JSON object).
pub fn record(
    experiment: &str,
    options: &impl serde::Serialize,
    wall_seconds: f64,
    results: &impl serde::Serialize,
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut record = serde_json::json!({
        "experiment": experiment,
        "options": options,
        "git_revision": git_revision(),
        "backend": bnn_burn::backend_name(),
        "library_version": env!("CARGO_PKG_VERSION"),
        "wall_seconds": wall_seconds,
        "results": results,
    });
    if let (Some(r), serde_json::Value::Object(extra)) = (record.as_object_mut(), extra) {
        r.extend(extra);
    }
    record
}

/// The text of `path`, or `None` when it does not exist (a run with nothing to resume); any
/// other read error names the file.
pub fn read_if_exists(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: cannot read: {e}", path.display())),
    }
}

/// Appends `row` to `rows`, dropping the earlier row `same` matches: how the rows of several
/// records (a finished run, then an interrupted one; or `uci-report`'s inputs) are merged, a
/// later record's row winning.
pub fn replace_or_push<T>(rows: &mut Vec<T>, row: T, same: impl Fn(&T, &T) -> bool) {
    rows.retain(|r| !same(r, &row));
    rows.push(row);
}

/// Reports and plots refuse NaN and ±∞: `Err` naming the row and the field when `value` is not
/// finite.
pub fn check_finite(row: &str, field: &str, value: f64) -> Result<(), String> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(format!(
            "{row}: {field} is {value}; a report cannot show it (the run's record keeps the \
             finished rows)"
        ))
    }
}

/// Refuses a name given twice to a repeatable flag (up to case): `--dataset boston --dataset
/// Boston` would run the same rows twice.
pub fn refuse_repeats<'a>(
    flag: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<(), String> {
    let names: Vec<&str> = names.into_iter().collect();
    for (i, n) in names.iter().enumerate() {
        if names[..i].iter().any(|o| same_name(o, n)) {
            return Err(format!("{flag} {n:?} is given twice; give each once"));
        }
    }
    Ok(())
}

/// Whether two method names are the same on a command line: up to case, spaces, `-` and
/// `_`, with `alpha` for `α` (`"BNN+LV alpha=0.5"` is `"BNN+LV α=0.5"`, `mc-dropout` is
/// `"MC dropout"`).
pub fn same_name(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        s.to_lowercase()
            .replace("alpha", "α")
            .replace([' ', '-', '_'], "")
    };
    norm(a) == norm(b)
}

/// The entries of `all` named by `names` ([`same_name`]), in the order given; all of them when
/// `names` is empty. Two entries of one name (a user's catalogue beside the built-in one) are
/// an error, as is an unknown name (listing the known ones).
pub fn select<'a, T>(
    all: &'a [T],
    names: &[String],
    name_of: impl Fn(&T) -> &str,
) -> Result<Vec<&'a T>, String> {
    for (i, m) in all.iter().enumerate() {
        if all[..i].iter().any(|o| same_name(name_of(o), name_of(m))) {
            return Err(format!("two methods are named {:?}", name_of(m)));
        }
    }
    if names.is_empty() {
        return Ok(all.iter().collect());
    }
    names
        .iter()
        .map(|name| {
            all.iter()
                .find(|m| same_name(name_of(m), name))
                .ok_or_else(|| {
                    // A name that holds a comma is quoted, so that the list reads apart.
                    let known: Vec<String> = all
                        .iter()
                        .map(|m| match name_of(m) {
                            n if n.contains(',') => format!("{n:?}"),
                            n => n.to_string(),
                        })
                        .collect();
                    format!("unknown method {name:?}; known: {}", known.join(", "))
                })
        })
        .collect()
}

/// [`select`], where no name picks the entries `is_default` keeps (a harness's catalogue
/// defaults) rather than all of them.
///
/// # Errors
/// As [`select`].
pub fn select_or_defaults<'a, T>(
    all: &'a [T],
    names: &[String],
    name_of: impl Fn(&T) -> &str,
    is_default: impl Fn(&T) -> bool,
) -> Result<Vec<&'a T>, String> {
    let picked = select(all, names, name_of)?;
    Ok(match names.is_empty() {
        true => picked.into_iter().filter(|m| is_default(m)).collect(),
        false => picked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_name_the_revision_the_bench_was_built_from() {
        let stamped = git_revision();
        let head = std::process::Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        match head {
            // `cargo test` builds from the checkout it runs in: build.rs stamped the same HEAD
            // (and stamps again after a commit, which moves the branch's ref).
            Some(head) => assert_eq!(stamped.trim_end_matches("+dirty"), head),
            None => {
                eprintln!("not a git checkout (or no git): the stamp is {stamped}");
                assert!(!stamped.is_empty());
            }
        }
        let record = record("x", &0, 1.0, &0, serde_json::json!({ "extra": 1 }));
        assert_eq!(record["git_revision"], stamped.as_str());
        assert_eq!(record["extra"], 1);
    }

    #[test]
    fn a_resumed_row_lists_every_build_that_trained_it() {
        let dir = std::env::temp_dir().join(format!("bnn-revisions-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let this = git_revision();
        // A fresh folder: this build only, and the folder is created.
        assert_eq!(note_revision(&dir).unwrap(), vec![this.clone()]);
        // Resumed by the same build: not repeated.
        assert_eq!(note_revision(&dir).unwrap(), vec![this.clone()]);
        // Resumed after an older build had trained it: the older one first.
        std::fs::write(dir.join("revisions"), "0ldbu1d\n").unwrap();
        assert_eq!(
            note_revision(&dir).unwrap(),
            vec!["0ldbu1d".to_string(), this.clone()]
        );
        let _ = std::fs::remove_dir_all(&dir);

        let row = |label: &str, revs: &[&str]| {
            (
                label.to_string(),
                revs.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            revisions_line(&[row("a", &["x1"]), row("b", &["x1"])]),
            "Built from revision `x1`."
        );
        assert_eq!(
            revisions_line(&[row("a", &["x1"]), row("b", &["x0", "x1"]), row("c", &[])]),
            "Revisions of the rows (a row resumed across builds lists each): `x1`: a; \
             `x0` then `x1`: b; not recorded: c."
        );
        assert_eq!(distinct(["b", "a", "b"].map(String::from)), vec!["b", "a"]);
    }

    #[test]
    fn seeds_depend_on_every_part() {
        let a = derive(0, &["boston", "MFVI"], 3);
        assert_eq!(a, derive(0, &["boston", "MFVI"], 3));
        assert_ne!(a, derive(1, &["boston", "MFVI"], 3));
        assert_ne!(a, derive(0, &["boston", "MAP"], 3));
        assert_ne!(a, derive(0, &["boston", "MFVI"], 4));
        // The separator keeps ("ab", "c") and ("a", "bc") apart.
        assert_ne!(derive(0, &["ab", "c"], 0), derive(0, &["a", "bc"], 0));
    }

    #[test]
    fn reports_refuse_non_finite_numbers() {
        assert!(check_finite("boston / MAP", "test LL", -2.5).is_ok());
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let err = check_finite("boston / MAP", "test LL", v).unwrap_err();
            assert!(err.starts_with("boston / MAP: test LL is"), "{err}");
        }
    }

    #[test]
    fn select_keeps_the_order_given_and_names_the_known_ones() {
        let all = ["MAP", "MC dropout", "Radial"];
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(select(&all, &[], |s| s).unwrap().len(), 3);
        let picked = select(&all, &names(&["radial", "map"]), |s| s).unwrap();
        assert_eq!(picked, vec![&"Radial", &"MAP"]);
        let err = select(&all, &names(&["VBP"]), |s| s).unwrap_err();
        assert!(
            err.contains("\"VBP\"") && err.contains("MAP, MC dropout, Radial"),
            "{err}"
        );
        // ASCII for α, and spaces or hyphens as the user types them.
        let greek = ["BNN+LV α=0.5", "MC dropout"];
        let picked = select(&greek, &names(&["bnn+lv alpha=0.5", "mc-dropout"]), |s| s).unwrap();
        assert_eq!(picked, vec![&"BNN+LV α=0.5", &"MC dropout"]);
        // Names are unique up to case, selected or not.
        let twice = ["MAP", "Radial", "map"];
        let err = select(&twice, &names(&["Radial"]), |s| s).unwrap_err();
        assert_eq!(err, "two methods are named \"map\"");
        let err = select(
            &["MAP", "DropConnect, Gaussian masks"],
            &names(&["x"]),
            |s| s,
        );
        assert!(
            err.unwrap_err()
                .ends_with("known: MAP, \"DropConnect, Gaussian masks\"")
        );
        // No name: the defaults; a name: any entry.
        let short = |s: &&str| s.len() <= 3;
        let picked = select_or_defaults(&all, &[], |s| s, short).unwrap();
        assert_eq!(picked, vec![&"MAP"]);
        let picked = select_or_defaults(&all, &names(&["radial"]), |s| s, short).unwrap();
        assert_eq!(picked, vec![&"Radial"]);
    }
}
