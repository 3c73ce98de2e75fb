//! A user's own table: CSV, TSV, semicolon- or whitespace-separated text, with or without a
//! header row, read into a [`RegressionData`] or a [`ClassificationData`] by column name or
//! position. Every bad field is an error naming the file, line and column.

use crate::error::DataError;
use crate::table::{ClassificationData, RegressionData};
use crate::uci::{excerpt, fields, lines, parse_error, parse_number};
use std::path::{Path, PathBuf};

/// How fields are separated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delimiter {
    /// From the first line: a comma, else a tab, else a semicolon, else whitespace.
    Auto,
    /// `,` (double quotes around a field that holds one; `""` inside them is a quote).
    Comma,
    /// `\t`.
    Tab,
    /// `;`.
    Semicolon,
    /// Runs of spaces and tabs (UCI's `data.txt`).
    Whitespace,
}

/// Whether the first row names the columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// A header when a column holds text in the first row and a number in the second.
    Auto,
    /// The first row names the columns.
    Present,
    /// Every row is data; columns are named by position (`"1"`, `"2"`, …).
    Absent,
}

/// A column, by name (as the header gives it), by 0-based position, or the last one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Column {
    /// The header's name.
    Name(String),
    /// 0-based position.
    Index(usize),
    /// The last column.
    Last,
}

impl From<&str> for Column {
    fn from(name: &str) -> Self {
        Self::Name(name.to_string())
    }
}

impl From<usize> for Column {
    fn from(index: usize) -> Self {
        Self::Index(index)
    }
}

/// Reads delimited text tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableReader {
    /// How fields are separated (default: [`Delimiter::Auto`]).
    pub delimiter: Delimiter,
    /// Whether the first row names the columns (default: [`Header::Auto`]).
    pub header: Header,
}

impl Default for TableReader {
    fn default() -> Self {
        Self::new()
    }
}

impl TableReader {
    /// A reader that detects the delimiter and the header.
    pub fn new() -> Self {
        Self {
            delimiter: Delimiter::Auto,
            header: Header::Auto,
        }
    }

    /// With the delimiter `d`.
    pub fn with_delimiter(mut self, d: Delimiter) -> Self {
        self.delimiter = d;
        self
    }

    /// With the header rule `h`.
    pub fn with_header(mut self, h: Header) -> Self {
        self.header = h;
        self
    }

    /// Reads the table in `path`.
    ///
    /// # Errors
    /// [`DataError::Io`] when the file cannot be read; then as [`TableReader::parse`].
    pub fn read(&self, path: impl AsRef<Path>) -> Result<TextTable, DataError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| DataError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        self.parse(&bytes, path)
    }

    /// Parses `bytes` as the table of `path` (the name errors give). Blank lines are skipped; a
    /// row of another field count than the first, an unclosed quote or invalid UTF-8 is an
    /// error naming the line.
    ///
    /// # Errors
    /// [`DataError::Empty`] without data rows, [`DataError::Parse`] as above.
    pub fn parse(&self, bytes: &[u8], path: &Path) -> Result<TextTable, DataError> {
        let rows = lines(bytes, path)?;
        let Some(&(_, first)) = rows.first() else {
            return Err(DataError::Empty {
                what: path.display().to_string(),
            });
        };
        let delimiter = match self.delimiter {
            Delimiter::Auto => [
                (',', Delimiter::Comma),
                ('\t', Delimiter::Tab),
                (';', Delimiter::Semicolon),
            ]
            .into_iter()
            .find(|(c, _)| first.contains(*c))
            .map_or(Delimiter::Whitespace, |(_, d)| d),
            d => d,
        };
        let mut split = Vec::with_capacity(rows.len());
        for &(line, text) in &rows {
            split.push((line, split_fields(text, delimiter, path, line)?));
        }
        let width = split[0].1.len();
        for (line, row) in &split {
            if row.len() != width {
                return Err(parse_error(
                    path,
                    *line,
                    format!("{} (as in the first row)", fields(width)),
                    fields(row.len()),
                ));
            }
        }
        let has_header = match self.header {
            Header::Present => true,
            Header::Absent => false,
            // A header when a column's first field is not a number and its second is (a
            // label column of names is text in every row).
            Header::Auto => {
                let number = |f: &String| f.parse::<f64>().is_ok();
                match split.get(1) {
                    Some((_, second)) => split[0]
                        .1
                        .iter()
                        .zip(second)
                        .any(|(a, b)| !number(a) && number(b)),
                    None => !split[0].1.iter().all(number),
                }
            }
        };
        let columns = match has_header {
            true => split.remove(0).1,
            false => (1..=width).map(|c| c.to_string()).collect(),
        };
        if split.is_empty() {
            return Err(DataError::Empty {
                what: format!("{} (a header without data rows)", path.display()),
            });
        }
        Ok(TextTable {
            path: path.to_path_buf(),
            columns,
            rows: split,
        })
    }
}

/// The fields of one line.
fn split_fields(
    text: &str,
    delimiter: Delimiter,
    path: &Path,
    line: usize,
) -> Result<Vec<String>, DataError> {
    let text = text.trim_end_matches('\r');
    let sep = match delimiter {
        Delimiter::Whitespace | Delimiter::Auto => {
            return Ok(text.split_whitespace().map(str::to_string).collect());
        }
        Delimiter::Comma => ',',
        Delimiter::Tab => '\t',
        Delimiter::Semicolon => ';',
    };
    quoted_fields(text, sep)
        .map_err(|(expected, found)| parse_error(path, line, expected.into(), excerpt(&found)))
}

/// The fields of one comma-separated line: double quotes around a field that holds a comma, a
/// `""` inside them standing for one quote; spaces around a field are dropped.
///
/// # Errors
/// A quoted field that is not closed.
pub fn csv_fields(line: &str) -> Result<Vec<String>, String> {
    quoted_fields(line, ',')
        .map_err(|(expected, found)| format!("expected {expected}, found {found:?}"))
}

/// The fields of `text` separated by `sep`, with CSV quoting; the error is what was expected
/// and the rest of the line from where it was not found.
fn quoted_fields(text: &str, sep: char) -> Result<Vec<String>, (&'static str, String)> {
    let mut out = Vec::new();
    let mut field = String::new();
    let mut chars = text.char_indices().peekable();
    // Inside quotes; after a closing quote (only spaces or the separator may follow).
    let (mut quoted, mut closed) = (false, false);
    while let Some((i, c)) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek().map(|p| p.1) == Some('"') => {
                field.push('"');
                chars.next();
            }
            (true, '"') => (quoted, closed) = (false, true),
            (true, c) => field.push(c),
            (false, c) if c == sep => {
                let f = std::mem::take(&mut field);
                out.push(if closed { f } else { f.trim().to_string() });
                closed = false;
            }
            (false, c) if closed && !c.is_whitespace() => {
                return Err(("a separator after a quoted field", text[i..].to_string()));
            }
            (false, '"') if field.trim().is_empty() => {
                field.clear();
                quoted = true;
            }
            (false, c) => field.push(c),
        }
    }
    if quoted {
        return Err(("a closing double quote", "the line's end".into()));
    }
    out.push(match closed {
        true => field,
        false => field.trim().to_string(),
    });
    Ok(out)
}

/// A table of text fields with named columns, read by [`TableReader`].
#[derive(Debug, Clone, PartialEq)]
pub struct TextTable {
    /// The file it came from.
    pub path: PathBuf,
    /// Column names: the header's, or `"1"`, `"2"`, … without one.
    pub columns: Vec<String>,
    /// Data rows with their 1-based line numbers.
    rows: Vec<(usize, Vec<String>)>,
}

impl TextTable {
    /// Number of data rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are no data rows (never, for a table [`TableReader`] returned).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The 0-based position of `column`.
    ///
    /// # Errors
    /// [`DataError::OutOfRange`] naming the file and the columns it has.
    pub fn position(&self, column: &Column) -> Result<usize, DataError> {
        let found = match column {
            Column::Name(name) => self.columns.iter().position(|c| c == name),
            Column::Index(i) => (*i < self.columns.len()).then_some(*i),
            Column::Last => Some(self.columns.len() - 1),
        };
        found.ok_or_else(|| DataError::OutOfRange {
            what: format!("column of {}", self.path.display()),
            expected: format!(
                "a name among {} or a position below {}",
                self.columns.join(", "),
                self.columns.len()
            ),
            found: match column {
                Column::Name(n) => format!("{n:?}"),
                Column::Index(i) => i.to_string(),
                Column::Last => "the last".into(),
            },
        })
    }

    /// Positions of `features`, or of every column but `taken` when `None`.
    fn feature_positions(
        &self,
        features: Option<&[Column]>,
        taken: &[usize],
    ) -> Result<Vec<usize>, DataError> {
        let positions = match features {
            Some(cols) => cols
                .iter()
                .map(|c| self.position(c))
                .collect::<Result<Vec<_>, _>>()?,
            None => (0..self.columns.len())
                .filter(|c| !taken.contains(c))
                .collect(),
        };
        if let Some(p) = positions.iter().find(|p| taken.contains(p)) {
            return Err(DataError::OutOfRange {
                what: format!("features of {}", self.path.display()),
                expected: "columns other than the targets".into(),
                found: format!("{:?}, a target", self.columns[*p]),
            });
        }
        if positions.is_empty() {
            return Err(DataError::Shape {
                what: format!("features of {}", self.path.display()),
                expected: "at least one input column".into(),
                found: "none".into(),
            });
        }
        Ok(positions)
    }

    /// The numbers of columns `positions`, row-major.
    fn numbers(&self, positions: &[usize]) -> Result<Vec<f64>, DataError> {
        let mut out = Vec::with_capacity(self.rows.len() * positions.len());
        for (line, row) in &self.rows {
            for &p in positions {
                out.push(
                    parse_number(&row[p], &self.path, *line, p + 1).map_err(|e| match e {
                        DataError::Parse { expected, .. } => parse_error(
                            &self.path,
                            *line,
                            format!("{expected} (column {:?})", self.columns[p]),
                            excerpt(&row[p]),
                        ),
                        e => e,
                    })?,
                );
            }
        }
        Ok(out)
    }

    /// A regression table of `targets` from `features` (every other column when `None`).
    ///
    /// # Errors
    /// An unknown column, a feature that is a target, no feature, or a field that is not a
    /// finite number within f32's range (named by line and column).
    pub fn regression(
        &self,
        targets: &[Column],
        features: Option<&[Column]>,
    ) -> Result<RegressionData, DataError> {
        let t = targets
            .iter()
            .map(|c| self.position(c))
            .collect::<Result<Vec<_>, _>>()?;
        if t.is_empty() {
            return Err(DataError::Shape {
                what: format!("targets of {}", self.path.display()),
                expected: "at least one target column".into(),
                found: "none".into(),
            });
        }
        let f = self.feature_positions(features, &t)?;
        RegressionData::new(self.numbers(&f)?, self.numbers(&t)?, f.len(), t.len())
    }

    /// A classification table of the labels in `label` from `features` (every other column
    /// when `None`), with the class names: labels that are all non-negative integers are
    /// their own classes (`0..=max`); other labels are numbered in sorted order.
    ///
    /// # Errors
    /// As [`TextTable::regression`]; an empty label names its line.
    pub fn classification(
        &self,
        label: &Column,
        features: Option<&[Column]>,
    ) -> Result<(ClassificationData, Vec<String>), DataError> {
        let l = self.position(label)?;
        let f = self.feature_positions(features, &[l])?;
        let raw: Vec<&str> = self.rows.iter().map(|(_, r)| r[l].as_str()).collect();
        if let Some(i) = raw.iter().position(|s| s.is_empty()) {
            return Err(parse_error(
                &self.path,
                self.rows[i].0,
                format!("a class label in column {:?}", self.columns[l]),
                "an empty field".into(),
            ));
        }
        let integers: Option<Vec<usize>> = raw.iter().map(|s| s.parse::<usize>().ok()).collect();
        let (labels, names) = match integers {
            Some(ints) => {
                let n = ints.iter().max().map_or(0, |m| m + 1);
                (ints, (0..n).map(|c| c.to_string()).collect::<Vec<_>>())
            }
            None => {
                let mut names: Vec<String> = raw.iter().map(|s| s.to_string()).collect();
                names.sort();
                names.dedup();
                let labels = raw
                    .iter()
                    .map(|s| names.binary_search_by(|n| n.as_str().cmp(s)).unwrap_or(0))
                    .collect();
                (labels, names)
            }
        };
        let data = ClassificationData::new(self.numbers(&f)?, labels, f.len(), names.len())?;
        Ok((data, names))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, reader: TableReader) -> Result<TextTable, DataError> {
        reader.parse(text.as_bytes(), Path::new("my.csv"))
    }

    #[test]
    fn a_csv_with_a_header_reads_by_name_and_by_position() {
        let t = parse("x1,x2,y\n1,2,3.5\n\n4,5e-1,-6\r\n", TableReader::new()).unwrap();
        assert_eq!(t.columns, ["x1", "x2", "y"]);
        assert_eq!(t.len(), 2);
        let d = t.regression(&["y".into()], None).unwrap();
        assert_eq!((d.x, d.y), (vec![1.0, 2.0, 4.0, 0.5], vec![3.5, -6.0]));
        let d = t
            .regression(&[Column::Index(0)], Some(&[Column::Last]))
            .unwrap();
        assert_eq!((d.x, d.y), (vec![3.5, -6.0], vec![1.0, 4.0]));
    }

    #[test]
    fn whitespace_tables_without_a_header_name_columns_by_position() {
        let t = parse("1 2  3\n4\t5 6\n", TableReader::new()).unwrap();
        assert_eq!(t.columns, ["1", "2", "3"]);
        let d = t.regression(&[Column::Last], None).unwrap();
        assert_eq!((d.n_features, d.y), (2, vec![3.0, 6.0]));
        // Told there is a header, the first row names the columns.
        let t = parse(
            "a b c\n1 2 3\n",
            TableReader::new().with_header(Header::Present),
        )
        .unwrap();
        assert_eq!(t.columns, ["a", "b", "c"]);
    }

    #[test]
    fn quoted_fields_semicolons_and_tabs() {
        let t = parse(
            "\"name, full\",x,class\n\"a \"\"b\"\"\",1.5,setosa\n",
            TableReader::new(),
        )
        .unwrap();
        assert_eq!(t.columns, ["name, full", "x", "class"]);
        assert_eq!(t.rows[0].1[0], "a \"b\"");
        let t = parse("a;b\n1;2\n", TableReader::new()).unwrap();
        assert_eq!(t.columns, ["a", "b"]);
        let t = parse("a\tb\n1\t2\n", TableReader::new()).unwrap();
        assert_eq!(t.columns, ["a", "b"]);
        let err = parse("a,b\n\"1,2\n", TableReader::new()).unwrap_err();
        assert!(err.to_string().contains("line 2") && err.to_string().contains("quote"));
    }

    #[test]
    fn csv_fields_split_with_quotes() {
        assert_eq!(csv_fields("a,b,,c").unwrap(), ["a", "b", "", "c"]);
        assert_eq!(
            csv_fields(r#""x, y"," say ""hi"" ", z"#).unwrap(),
            ["x, y", r#" say "hi" "#, "z"]
        );
        assert!(csv_fields(r#""open"#).is_err());
        let err = csv_fields(r#""a"b,c"#).unwrap_err();
        assert!(err.contains("separator") && err.contains("b,c"), "{err}");
    }

    #[test]
    fn class_labels_are_integers_or_sorted_names() {
        let t = parse(
            "x,species\n1,virginica\n2,setosa\n3,virginica\n",
            TableReader::new(),
        )
        .unwrap();
        let (d, names) = t.classification(&"species".into(), None).unwrap();
        assert_eq!(names, ["setosa", "virginica"]);
        assert_eq!((d.labels, d.n_classes), (vec![1, 0, 1], 2));
        // Without a header, a label column of names is not taken for one.
        let t = parse(
            "5.1,3.5,setosa
4.9,3.0,versicolor
",
            TableReader::new(),
        )
        .unwrap();
        assert_eq!((t.len(), t.columns.len()), (2, 3));
        let (d, _) = t.classification(&Column::Last, None).unwrap();
        assert_eq!((d.x, d.labels), (vec![5.1, 3.5, 4.9, 3.0], vec![0, 1]));
        let t = parse("x,c\n1,2\n2,0\n", TableReader::new()).unwrap();
        let (d, names) = t.classification(&Column::Last, None).unwrap();
        assert_eq!((d.labels, d.n_classes, names.len()), (vec![2, 0], 3, 3));
    }

    #[test]
    fn bad_tables_are_errors_naming_file_line_and_column() {
        let err = |text: &str| parse(text, TableReader::new()).unwrap_err().to_string();
        let e = err("a,b\n1,2\n3\n");
        assert!(
            e.contains("my.csv") && e.contains("line 3") && e.contains("2 fields"),
            "{e}"
        );
        assert!(err("").contains("empty"));
        assert!(err("a,b\n").contains("without data rows"));
        let t = parse("a,b\n1,NA\n2,1e300\n", TableReader::new()).unwrap();
        let e = t.regression(&["b".into()], None).unwrap_err().to_string();
        assert!(
            e.contains("line 2") && e.contains("column \"b\"") && e.contains("'NA'"),
            "{e}"
        );
        let e = t.regression(&["c".into()], None).unwrap_err().to_string();
        assert!(e.contains("\"c\"") && e.contains("a, b"), "{e}");
        let e = t
            .regression(&["a".into()], Some(&["a".into()]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("a target"), "{e}");
        let t = parse("x,c\n1,\n", TableReader::new()).unwrap();
        let e = t.classification(&"c".into(), None).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("empty"), "{e}");
    }
}
