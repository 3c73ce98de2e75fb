//! Task sequences of continual learning (Farquhar 2022 §5.1; Nguyen et al. 2018): permuted
//! images (task 0 as it is, every later task one fixed seeded permutation of the pixel
//! positions) and split class pairs ((0, 1), (2, 3), … (8, 9)).

use crate::error::DataError;
use crate::images::ImageSet;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// The class pairs of split MNIST and split Fashion-MNIST, task by task.
pub const SPLIT_PAIRS: [[u8; 2]; 5] = [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]];

/// A seeded uniform permutation of `0..n` (Fisher–Yates).
pub fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng.random_range(0..=i);
        p.swap(i, j);
    }
    p
}

/// `set` with every image's pixel positions permuted: output position `k` takes input position
/// `perm[k]` of each channel.
///
/// # Errors
/// [`DataError::Shape`] when `perm` is not a permutation of the `H · W` positions.
pub fn permute_pixels(set: &ImageSet, perm: &[usize]) -> Result<ImageSet, DataError> {
    let hw = set.height * set.width;
    let mut seen = vec![false; hw];
    let valid = perm.len() == hw
        && perm
            .iter()
            .all(|&p| p < hw && !std::mem::replace(&mut seen[p], true));
    if !valid {
        return Err(DataError::Shape {
            what: "pixel permutation".into(),
            expected: format!(
                "a permutation of the {hw} positions of a {}×{} image",
                set.height, set.width
            ),
            found: format!("{} entries", perm.len()),
        });
    }
    let mut pixels = Vec::with_capacity(set.pixels.len());
    for i in 0..set.len() {
        for channel in set.image(i).chunks(hw) {
            pixels.extend(perm.iter().map(|&p| channel[p]));
        }
    }
    Ok(ImageSet {
        pixels,
        ..set.clone()
    })
}

/// The `tasks` tasks of permuted `set`: task 0 unpermuted, task `t` permuted by
/// [`permutation`] of seed `seed + t`, so a training and a test set with one seed share each
/// task's permutation.
pub fn permuted_tasks(set: &ImageSet, tasks: usize, seed: u64) -> Vec<ImageSet> {
    let hw = set.height * set.width;
    (0..tasks)
        .map(|t| match t {
            0 => set.clone(),
            _ => permute_pixels(set, &permutation(hw, seed.wrapping_add(t as u64)))
                .expect("a permutation of the image's positions"),
        })
        .collect()
}

/// The split tasks of `set`: for each pair, its images of those two classes (labels kept).
pub fn split_tasks(set: &ImageSet, pairs: &[[u8; 2]]) -> Vec<ImageSet> {
    pairs.iter().map(|p| set.with_classes(p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten 2×3 images, image `i` of label `i` with pixels `10 i + position`.
    fn tiny() -> ImageSet {
        let pixels: Vec<u8> = (0..10u8)
            .flat_map(|i| (0..6u8).map(move |p| 10 * i + p))
            .collect();
        ImageSet::new(pixels, (0..10).collect(), [1, 2, 3], 10).unwrap()
    }

    #[test]
    fn permuted_tasks_share_seeded_permutations_and_the_first_is_unpermuted() {
        let set = tiny();
        let tasks = permuted_tasks(&set, 3, 7);
        assert_eq!(tasks[0], set);
        for (t, task) in tasks.iter().enumerate().skip(1) {
            let perm = permutation(6, 7 + t as u64);
            for i in 0..set.len() {
                let want: Vec<u8> = perm.iter().map(|&p| set.image(i)[p]).collect();
                assert_eq!(task.image(i), &want[..]);
            }
            assert_eq!(task.labels, set.labels);
            // The same seed gives the test set the same permutation.
            assert_eq!(permuted_tasks(&set, 3, 7)[t], *task);
        }
        assert_ne!(tasks[1], tasks[2]);
        let mut sorted = permutation(50, 3);
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert!(permute_pixels(&set, &[0, 1, 2, 3, 4, 4]).is_err());
        assert!(permute_pixels(&set, &[0, 1, 2]).is_err());
    }

    #[test]
    fn split_tasks_hold_their_two_classes() {
        let tasks = split_tasks(&tiny(), &SPLIT_PAIRS);
        assert_eq!(tasks.len(), 5);
        for (t, task) in tasks.iter().enumerate() {
            assert_eq!(task.labels, vec![2 * t as u8, 2 * t as u8 + 1]);
        }
    }
}
