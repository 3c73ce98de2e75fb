//! The library's modules form a DAG in one order, from the base types up to training and the
//! paper recipes: a module may use (`crate::…` in its code, tests and comments aside) only
//! modules before it. An edge that points up fails this test unless `UPWARD` lists it with what
//! will remove it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The modules in dependency order: each may use those before it.
const ORDER: [&str; 29] = [
    "error",
    "host",
    "reduce",
    "linalg",
    "integrity",
    "metrics",
    "device",
    "special",
    "batch",
    "fused",
    "dist",
    "posterior",
    "layers",
    "predict",
    "likelihood",
    "step",
    "objective",
    "latent",
    "nets",
    "convert",
    "train",
    "posthoc",
    "gp",
    "inference",
    "recipes",
    "active",
    "continual",
    "rollout",
    "sde",
];

/// Edges that still point up the order, to be removed; each with what removes it. None is
/// left: a new one is a design change, to be made on purpose here (with what will remove it).
const UPWARD: [(&str, &str, &str); 0] = [];

/// Items re-exported at the crate root, by the module that defines them.
const ROOT_ITEMS: [(&str, &str); 8] = [
    ("ConfigError", "error"),
    ("Prior", "dist"),
    ("KlDivergence", "posterior"),
    ("device", "device"),
    ("training_device", "device"),
    ("backend_name", "device"),
    ("BACKEND_ENV", "device"),
    ("BackendKind", "device"),
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `text` without comments and without the items under `#[cfg(test)]`.
fn code_of(text: &str) -> String {
    let no_comments: String = text
        .lines()
        .map(|l| match l.trim_start().starts_with("//") {
            true => "",
            false => l.split(" //").next().unwrap_or(""),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = String::new();
    let mut rest = no_comments.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let (semi, brace) = (after.find(';'), after.find('{'));
        let end = match (semi, brace) {
            (Some(s), Some(b)) if s < b => s + 1,
            (Some(s), None) => s + 1,
            (_, Some(b)) => {
                let mut depth = 0usize;
                let mut end = after.len();
                for (i, c) in after[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, None) => after.len(),
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Every `crate::x` a module's code names, by top-level module: `module → {used}`.
fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        if name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        let rel = file.strip_prefix(&src).unwrap();
        let module = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if module == "lib" || module == "testing" {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let mut rest = code.as_str();
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let ident: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let used = ROOT_ITEMS
                .iter()
                .find(|(item, _)| *item == ident)
                .map_or(ident.clone(), |(_, m)| m.to_string());
            if used != module && used != "testing" && !used.is_empty() {
                edges.entry(module.clone()).or_default().insert(used);
            }
        }
    }
    edges
}

#[test]
fn the_module_graph_follows_the_order() {
    let edges = edges();
    assert!(edges.len() >= 12, "{edges:?}");
    let rank = |m: &str| {
        ORDER
            .iter()
            .position(|o| *o == m)
            .unwrap_or_else(|| panic!("module `{m}` is not in ORDER: place it there"))
    };
    let mut upward = BTreeSet::new();
    for (from, used) in &edges {
        for to in used {
            if rank(to) > rank(from) {
                upward.insert((from.clone(), to.clone()));
            }
        }
    }
    for (from, to) in &upward {
        assert!(
            UPWARD.iter().any(|(a, b, _)| a == from && b == to),
            "`{from}` uses `{to}`, which comes after it in ORDER"
        );
    }
    for (a, b, _) in UPWARD {
        assert!(
            upward.contains(&(a.to_string(), b.to_string())),
            "`{a}` no longer uses `{b}`: take the edge off UPWARD"
        );
    }
}

#[test]
fn test_code_and_comments_are_not_edges() {
    let text = "use crate::a::X;\n// crate::b\n/// [`crate::c`]\n#[cfg(test)]\nmod tests {\n    use crate::d;\n    fn f() { if x { crate::e } }\n}\n#[cfg(test)]\nuse crate::f;\nfn g() { crate::h::y() } // crate::i\n";
    let code = code_of(text);
    for kept in ["crate::a", "crate::h"] {
        assert!(code.contains(kept), "{code}");
    }
    for dropped in [
        "crate::b", "crate::c", "crate::d", "crate::e", "crate::f", "crate::i",
    ] {
        assert!(!code.contains(dropped), "{dropped} in {code}");
    }
}
