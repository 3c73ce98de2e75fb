//! Fisher's Iris (1936; the UCI copy as scikit-learn ships it): 150 flowers, 4 measurements
//! (sepal and petal length and width, cm), 3 species of 50. Built in (`data/iris.csv`), so it
//! needs no files: the data of Farquhar (2022) Table A.3's full- against diagonal-covariance VI.

use crate::DataError;
use crate::table::ClassificationData;
use rand::SeedableRng;
use rand::seq::SliceRandom;

/// The species, in label order.
pub const SPECIES: [&str; 3] = ["setosa", "versicolor", "virginica"];

/// The 150 rows, in the file's order.
pub fn iris() -> ClassificationData {
    let text = include_str!("../data/iris.csv");
    let mut x = Vec::with_capacity(600);
    let mut labels = Vec::with_capacity(150);
    for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split(',').collect();
        x.extend(
            fields[..4]
                .iter()
                .map(|v| v.parse::<f64>().expect("a shipped number")),
        );
        labels.push(fields[4].parse().expect("a shipped label"));
    }
    ClassificationData::new(x, labels, 4, 3).expect("the shipped table is well formed")
}

/// A random split into `train` rows and the rest (Farquhar 2022: 100 and 50), reproducible
/// from `seed`.
///
/// # Errors
/// [`DataError::OutOfRange`] when `train` is not in `1..150`.
pub fn iris_split(
    train: usize,
    seed: u64,
) -> Result<(ClassificationData, ClassificationData), DataError> {
    let data = iris();
    if train == 0 || train >= data.len() {
        return Err(DataError::OutOfRange {
            what: "Iris training rows".into(),
            expected: format!("1..{}", data.len()),
            found: train.to_string(),
        });
    }
    let mut order: Vec<usize> = (0..data.len()).collect();
    order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
    Ok((data.select(&order[..train])?, data.select(&order[train..])?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iris_has_150_rows_50_per_species_and_splits_without_overlap() {
        let data = iris();
        assert_eq!((data.len(), data.n_features, data.n_classes), (150, 4, 3));
        for c in 0..3 {
            assert_eq!(data.labels.iter().filter(|&&l| l == c).count(), 50);
        }
        // The first flower: 5.1, 3.5, 1.4, 0.2, setosa.
        assert_eq!(data.row(0), &[5.1, 3.5, 1.4, 0.2]);
        let (train, test) = iris_split(100, 0).unwrap();
        assert_eq!((train.len(), test.len()), (100, 50));
        let key = |d: &ClassificationData, i: usize| format!("{:?}{}", d.row(i), d.labels[i]);
        let mut all: Vec<String> = (0..100).map(|i| key(&train, i)).collect();
        all.extend((0..50).map(|i| key(&test, i)));
        let mut expected: Vec<String> = (0..150).map(|i| key(&data, i)).collect();
        all.sort();
        expected.sort();
        assert_eq!(all, expected);
        assert_eq!(iris_split(100, 0).unwrap().1, test);
        assert!(iris_split(150, 0).is_err());
    }
}
