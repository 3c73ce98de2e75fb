//! What the integration tests share: a small data set of the user's in the UCI_Datasets layout.

use std::path::Path;

/// A small set in the layout: y = 2 x₀ − x₁ + noise, 80 rows, 2 splits of 64/16.
pub fn write_set(dir: &Path) {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut rows = String::new();
    let mut state = 12345u64;
    let mut unit = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    for _ in 0..80 {
        let (a, b) = (unit() * 4.0 - 2.0, unit() * 4.0 - 2.0);
        let y = 2.0 * a - b + 0.1 * (unit() - 0.5);
        rows += &format!("{a} {b} {y}\n");
    }
    let files = [
        ("data.txt", rows),
        ("index_features.txt", "0\n1\n".into()),
        ("index_target.txt", "2\n".into()),
        ("n_splits.txt", "2\n".into()),
        ("n_hidden.txt", "10\n".into()),
        ("n_epochs.txt", "40\n".into()),
        ("dropout_rates.txt", "0.01\n0.05\n".into()),
        ("tau_values.txt", "10\n100\n".into()),
    ];
    for (name, text) in files {
        std::fs::write(data.join(name), text).unwrap();
    }
    for k in 0..2 {
        let (test, train): (Vec<usize>, Vec<usize>) = (0..80).partition(|i| i % 5 == k);
        let lines = |v: Vec<usize>| v.iter().map(|i| format!("{i}\n")).collect::<String>();
        std::fs::write(data.join(format!("index_train_{k}.txt")), lines(train)).unwrap();
        std::fs::write(data.join(format!("index_test_{k}.txt")), lines(test)).unwrap();
    }
}
