//! `bnn-bench data`: wall time and peak heap of loading every real data set, beside the size
//! of the data itself (the `u8` pixels for images, the `f64` tables for UCI).

use crate::alloc;
use bnn_datasets::images::{MnistFamily, Split};
use bnn_datasets::uci::{UciData, UciDataset};
use bnn_datasets::{DataError, DataRoot};
use std::error::Error;
use std::path::Path;
use std::time::Instant;

/// One measured load.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadRow {
    /// What was loaded.
    pub what: String,
    /// Median wall time over the rounds, milliseconds.
    pub ms: f64,
    /// Bytes of the loaded data (pixels + labels, or the f64 tables).
    pub data_bytes: usize,
    /// Most heap bytes live at once during the load, above those live before it.
    pub peak_heap_bytes: usize,
    /// Heap bytes still live after the load, while the data is held.
    pub held_bytes: usize,
}

/// Times `load` over `rounds` runs; memory from the first.
fn measure<T>(
    what: String,
    rounds: usize,
    size: impl Fn(&T) -> usize,
    load: impl Fn() -> Result<T, DataError>,
) -> Result<LoadRow, DataError> {
    let mut times = Vec::new();
    let mut row = None;
    for _ in 0..rounds.max(1) {
        let before = alloc::live_bytes();
        alloc::reset_peak();
        let t0 = Instant::now();
        let data = load()?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        if row.is_none() {
            row = Some((
                size(&data),
                alloc::peak_bytes().saturating_sub(before),
                alloc::live_bytes().saturating_sub(before),
            ));
        }
        drop(data);
    }
    times.sort_by(f64::total_cmp);
    let (data_bytes, peak_heap_bytes, held_bytes) = row.expect("at least one round");
    Ok(LoadRow {
        what,
        ms: times[times.len() / 2],
        data_bytes,
        peak_heap_bytes,
        held_bytes,
    })
}

/// The `bnn-bench data` command line.
#[derive(Debug, Clone, clap::Args)]
pub struct DataArgs {
    /// Output folder for data.md and data.json.
    #[arg(long, default_value = "runs/data")]
    pub out: std::path::PathBuf,
    /// Folder holding mnist/, fashion-mnist/ and uci/ [default: BNN_DATA_DIR, then
    /// ../shared/data, then the user cache].
    #[arg(long)]
    pub data_dir: Option<std::path::PathBuf>,
    /// Loads per data set; the median time is reported.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
}

impl DataArgs {
    /// [`run`] with these arguments.
    ///
    /// # Errors
    /// As [`run`].
    pub fn run(&self) -> Result<Vec<LoadRow>, Box<dyn Error>> {
        run(
            &DataRoot::new(self.data_dir.as_deref()),
            self.rounds,
            &self.out,
        )
    }
}

/// Measures every data set found under `root` and writes `data.md` and `data.json` to `out`.
pub fn run(root: &DataRoot, rounds: usize, out: &Path) -> Result<Vec<LoadRow>, Box<dyn Error>> {
    if rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    let folder = crate::runner::OutFolder::open(out, "--out")?;
    let mut rows = Vec::new();
    for family in [MnistFamily::Mnist, MnistFamily::FashionMnist] {
        for split in [Split::Train, Split::Test] {
            let what = format!("{} {split:?} (IDX, gzip)", family.dir_name());
            eprintln!("loading {what}");
            rows.push(measure(
                what,
                rounds,
                |s: &bnn_datasets::ImageSet| s.pixels.len() + s.labels.len(),
                || family.load(split, root),
            )?);
        }
    }
    for d in UciDataset::ALL {
        eprintln!("loading UCI {d}");
        rows.push(measure(
            format!("UCI {d} (all rows + split 0)"),
            rounds,
            |(u, _): &(UciData, _)| (u.data.x.len() + u.data.y.len()) * 8,
            || {
                let u = UciData::load(d, root)?;
                let s = u.split(0)?;
                Ok((u, s))
            },
        )?);
    }
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    let mut md = format!(
        "# Data loading\n\nMedian of {rounds} loads (release build); heap from the first load: the most \
         bytes live at once above those live before it, and those still held afterwards.\n\n\
         | data | ms | data (MiB) | peak heap (MiB) | peak / data | held (MiB) |\n|---|---:|---:|---:|---:|---:|\n"
    );
    for r in &rows {
        md.push_str(&format!(
            "| {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            r.what,
            r.ms,
            mib(r.data_bytes),
            mib(r.peak_heap_bytes),
            r.peak_heap_bytes as f64 / r.data_bytes.max(1) as f64,
            mib(r.held_bytes)
        ));
    }
    folder.write("data.md", md.as_bytes())?;
    let record = serde_json::json!({
        "experiment": "data",
        "rounds": rounds,
        "roots": root.roots().iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "rows": rows,
        "library_version": env!("CARGO_PKG_VERSION"),
    });
    folder.write_record("data.json", &record)?;
    println!("{md}");
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_without_the_files_is_an_error_naming_the_first_missing_file() {
        let dir = std::env::temp_dir().join(format!("bnn-data-cmd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("out");
        let e = run(&DataRoot::new(Some(&dir)), 1, &out)
            .unwrap_err()
            .to_string();
        assert!(e.contains("mnist/train-images-idx3-ubyte.gz"), "{e}");
        // The output folder was checked first; no report was written.
        assert!(out.is_dir() && !out.join("data.md").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
