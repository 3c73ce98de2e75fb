//! Property tests: random and mutated bytes fed to the IDX, CIFAR and UCI parsers give an
//! error or a result whose shape agrees with its own header — never a panic, never a silently
//! wrong shape. Cases are drawn from a seeded generator, so a failure is reproducible from the
//! printed case number.

use bnn_datasets::cifar::{RECORD, parse_cifar_batch};
use bnn_datasets::idx::parse_idx;
use bnn_datasets::uci::{UciData, UciDataset, parse_indices, parse_table};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::path::{Path, PathBuf};

const CASES: usize = 3000;

fn idx_bytes(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        b.extend_from_slice(&d.to_be_bytes());
    }
    b.extend_from_slice(data);
    b
}

/// One random edit: flip, overwrite, insert or delete a byte, truncate, or append.
fn mutate(bytes: &mut Vec<u8>, rng: &mut StdRng) {
    let n = bytes.len();
    match rng.random_range(0..6u32) {
        0 if n > 0 => {
            let i = rng.random_range(0..n);
            bytes[i] ^= 1 << rng.random_range(0..8u32);
        }
        1 if n > 0 => {
            let i = rng.random_range(0..n);
            bytes[i] = rng.random();
        }
        2 => {
            let i = rng.random_range(0..=n);
            bytes.insert(i, rng.random());
        }
        3 if n > 0 => {
            bytes.remove(rng.random_range(0..n));
        }
        4 => bytes.truncate(rng.random_range(0..=n)),
        _ => bytes.extend((0..rng.random_range(1..8usize)).map(|_| rng.random::<u8>())),
    }
}

/// The header an IDX byte string claims, if it has a complete one.
fn claimed(bytes: &[u8]) -> Option<(Vec<usize>, usize)> {
    if bytes.len() < 4 {
        return None;
    }
    let nd = bytes[3] as usize;
    let header = 4 + 4 * nd;
    if bytes.len() < header {
        return None;
    }
    let dims = bytes[4..header]
        .chunks(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    Some((dims, header))
}

#[test]
fn idx_parser_never_panics_and_never_returns_a_shape_its_bytes_do_not_hold() {
    let mut rng = StdRng::seed_from_u64(1);
    let p = Path::new("fuzz.idx");
    let good = idx_bytes(&[3, 4, 5], &(0..60).collect::<Vec<u8>>());
    for case in 0..CASES {
        let bytes = if case % 3 == 0 {
            let len = rng.random_range(0..64usize);
            let mut b: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            // Half the random strings get a valid magic so the size logic is exercised.
            if case % 2 == 0 && b.len() >= 4 {
                b[..3].copy_from_slice(&[0, 0, 8]);
                b[3] %= 4;
            }
            b
        } else {
            let mut b = good.clone();
            for _ in 0..rng.random_range(1..4usize) {
                mutate(&mut b, &mut rng);
            }
            b
        };
        match std::panic::catch_unwind(|| parse_idx(&bytes, p)) {
            Err(_) => panic!("case {case}: parse_idx panicked on {bytes:?}"),
            Ok(Err(e)) => assert!(e.to_string().contains("fuzz.idx"), "case {case}: {e}"),
            Ok(Ok(a)) => {
                let (dims, header) = claimed(&bytes).expect("an accepted file has a header");
                assert_eq!(a.dims, dims, "case {case}");
                assert_eq!(
                    a.data.len(),
                    a.dims.iter().product::<usize>(),
                    "case {case}"
                );
                assert_eq!(a.data, bytes[header..], "case {case}");
            }
        }
    }
    // Any strict prefix and any extension of a valid file is an error.
    for cut in 0..good.len() {
        assert!(parse_idx(&good[..cut], p).is_err(), "prefix of {cut} bytes");
    }
    assert!(parse_idx(&[good.clone(), vec![0]].concat(), p).is_err());
}

#[test]
fn cifar_parser_never_panics_and_keeps_whole_records() {
    let mut rng = StdRng::seed_from_u64(2);
    let p = Path::new("data_batch_1.bin");
    let mut good = Vec::new();
    for l in 0..3u8 {
        good.push(l);
        good.extend((0..RECORD - 1).map(|i| i as u8));
    }
    for case in 0..300 {
        let mut b = good.clone();
        for _ in 0..rng.random_range(1..3usize) {
            mutate(&mut b, &mut rng);
        }
        match std::panic::catch_unwind(|| parse_cifar_batch(&b, p)) {
            Err(_) => panic!("case {case}: panicked"),
            Ok(Err(_)) => {}
            Ok(Ok(s)) => {
                assert_eq!(s.len() * RECORD, b.len(), "case {case}");
                assert!(s.labels.iter().all(|&l| l < 10));
            }
        }
    }
}

/// A valid UCI table: `rows` lines of `width` numbers.
fn table_text(rng: &mut StdRng, rows: usize, width: usize) -> String {
    let mut s = String::new();
    for _ in 0..rows {
        let fields: Vec<String> = (0..width)
            .map(|_| format!("{:.3}", rng.random::<f64>() * 200.0 - 100.0))
            .collect();
        s.push_str(&fields.join(if rng.random::<bool>() { " " } else { "\t" }));
        s.push('\n');
    }
    s
}

#[test]
fn uci_table_parser_never_panics_and_returns_whole_finite_rows() {
    let mut rng = StdRng::seed_from_u64(3);
    let p = Path::new("data.txt");
    for case in 0..CASES {
        let text = table_text(&mut rng, 6, 4);
        let mut b = text.clone().into_bytes();
        for _ in 0..rng.random_range(1..4usize) {
            mutate(&mut b, &mut rng);
        }
        match std::panic::catch_unwind(|| parse_table(&b, p)) {
            Err(_) => panic!(
                "case {case}: parse_table panicked on {:?}",
                String::from_utf8_lossy(&b)
            ),
            Ok(Err(e)) => assert!(e.to_string().contains("data.txt"), "case {case}: {e}"),
            Ok(Ok((values, width))) => {
                assert!(
                    width > 0 && values.len().is_multiple_of(width),
                    "case {case}"
                );
                assert!(values.iter().all(|v| v.is_finite()), "case {case}");
                // Rows are the non-blank lines, each with `width` fields.
                let text = String::from_utf8(b.clone()).expect("accepted text is UTF-8");
                let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
                assert_eq!(values.len() / width, lines.len(), "case {case}");
                assert!(lines.iter().all(|l| l.split_whitespace().count() == width));
            }
        }
        // Removing one field of one row is always an error naming that row's line.
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        let r = rng.random_range(1..lines.len());
        let mut f: Vec<&str> = lines[r].split_whitespace().collect();
        f.pop();
        lines[r] = f.join(" ");
        let e = parse_table(lines.join("\n").as_bytes(), p)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("line {}", r + 1)), "case {case}: {e}");
    }
}

#[test]
fn uci_index_parser_and_loader_never_panic_on_mutated_files() {
    let mut rng = StdRng::seed_from_u64(4);
    let p = Path::new("index_train_0.txt");
    for case in 0..CASES {
        let mut b = b"0\n1\n2\n3\n4\n5\n6\n7\n".to_vec();
        for _ in 0..rng.random_range(1..4usize) {
            mutate(&mut b, &mut rng);
        }
        match std::panic::catch_unwind(|| parse_indices(&b, p, 10)) {
            Err(_) => panic!("case {case}: parse_indices panicked"),
            Ok(Err(_)) => {}
            Ok(Ok(ix)) => assert!(ix.iter().all(|&i| i < 10), "case {case}"),
        }
    }
    // Whole-folder loads with one mutated file: an error, or rows and splits that are whole.
    let dir: PathBuf = std::env::temp_dir().join(format!("bnn-uci-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files = |rng: &mut StdRng| {
        vec![
            ("data.txt", table_text(rng, 10, 4)),
            ("index_features.txt", "0\n1\n2\n".to_string()),
            ("index_target.txt", "3\n".to_string()),
            ("index_train_0.txt", "0\n1\n2\n3\n4\n5\n6\n7\n".to_string()),
            ("index_test_0.txt", "8\n9\n".to_string()),
            ("n_splits.txt", "1\n".to_string()),
            ("n_hidden.txt", "50\n".to_string()),
            ("n_epochs.txt", "40\n".to_string()),
            ("dropout_rates.txt", "0.005\n0.01\n".to_string()),
            ("tau_values.txt", "0.1\n0.2\n".to_string()),
        ]
    };
    for case in 0..400 {
        let fs = files(&mut rng);
        let target = rng.random_range(0..fs.len());
        for (k, (name, text)) in fs.iter().enumerate() {
            let mut b = text.clone().into_bytes();
            if k == target {
                for _ in 0..rng.random_range(1..3usize) {
                    mutate(&mut b, &mut rng);
                }
            }
            std::fs::write(dir.join(name), b).unwrap();
        }
        let result = std::panic::catch_unwind(|| {
            UciData::load_dir(UciDataset::Yacht, &dir).map(|d| (d.clone(), d.split(0)))
        });
        match result {
            Err(_) => panic!("case {case}: load panicked (mutated {})", fs[target].0),
            Ok(Err(_)) => {}
            Ok(Ok((d, split))) => {
                assert_eq!(d.data.x.len(), d.len() * d.data.n_features, "case {case}");
                if let Ok(s) = split {
                    assert!(
                        s.train_indices
                            .iter()
                            .chain(&s.test_indices)
                            .all(|&i| i < d.len())
                    );
                    assert_eq!(s.train.len(), s.train_indices.len());
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
