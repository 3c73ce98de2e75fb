//! Run bookkeeping shared by the experiments: per-run seeds and the git revision.

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
}
