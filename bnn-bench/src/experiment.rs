//! What every experiment shares: per-run seeds, the git revision, the JSON run record, and
//! picking methods by name.

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

/// The short git revision of the workspace, or "unknown" outside a checkout. Read once per
/// process: a long run records the revision it started from, even if the checkout moves on.
pub fn git_revision() -> String {
    static REVISION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    REVISION
        .get_or_init(|| {
            std::process::Command::new("git")
                .args(["rev-parse", "--short", "HEAD"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_else(|| "unknown".into())
        })
        .clone()
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

/// The entries of `all` named by `names` (case-insensitive), in the order given; all of them
/// when `names` is empty. An unknown name is an error listing the known ones.
pub fn select<'a, T>(
    all: &'a [T],
    names: &[String],
    name_of: impl Fn(&T) -> &str,
) -> Result<Vec<&'a T>, String> {
    if names.is_empty() {
        return Ok(all.iter().collect());
    }
    names
        .iter()
        .map(|name| {
            all.iter()
                .find(|m| name_of(m).eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    let known: Vec<_> = all.iter().map(&name_of).collect();
                    format!("unknown method {name:?}; known: {}", known.join(", "))
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
