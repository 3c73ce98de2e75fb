//! The images of a run: the training task's train and test sets and the OOD sets.

use super::*;

/// The image sets of a run: train and test images of one task (MNIST unless
/// [`MnistData::load`] asks for another), and the out-of-distribution sets: the task's OOD
/// images ([`TrainSet::ood_name`]), uniform noise and pixel-inverted test images (rotated test
/// images are made from `test` per angle, [`ROTATION_ANGLES`]).
pub struct MnistData {
    /// The task of `train` and `test`.
    pub family: TrainSet,
    /// Training images.
    pub train: ImageSet,
    /// In-distribution test images.
    pub test: ImageSet,
    /// The task's OOD test images (normalised with their own statistics, as the thesis code).
    pub ood: ImageSet,
    /// Uniform-noise images, as many as `ood` (seeded).
    pub noise: ImageSet,
    /// The test images with inverted pixels.
    pub inverted: ImageSet,
}

/// Seed of the uniform-noise OOD images.
const NOISE_SEED: u64 = 0x006e_6f69_7365;

/// Rotations of the MNIST test images (45° steps; 0° is the test set itself): error and
/// entropy per angle, as Depeweg (2019, §6.1) and Haußmann (2021, ch. 5) use rotation.
pub const ROTATION_ANGLES: [f64; 8] = [0.0, 45.0, 90.0, 135.0, 180.0, 225.0, 270.0, 315.0];

impl MnistData {
    /// The sets of a run from MNIST train/test and the Fashion-MNIST OOD images; noise and
    /// inverted images are derived (noise: as many as `ood`, shaped like `test`).
    ///
    /// # Errors
    /// Test or OOD images of another size than the training images (a net trained on one size
    /// cannot score the other: refused before any training), or none of one set.
    pub fn new(train: ImageSet, test: ImageSet, ood: ImageSet) -> Result<Self, Box<dyn Error>> {
        for (name, set) in [("training", &train), ("test", &test), ("OOD", &ood)] {
            if set.is_empty() {
                return Err(format!("the {name} images: none (at least one is needed)").into());
            }
            if set.shape() != train.shape() {
                return Err(format!(
                    "the {name} images are {:?} (channels, height, width), the training images \
                     {:?}: a net trained on one size cannot score the other",
                    set.shape(),
                    train.shape()
                )
                .into());
            }
        }
        let noise = ImageSet::uniform_noise(ood.len(), test.shape(), test.n_classes, NOISE_SEED)?;
        let inverted = test.inverted();
        Ok(Self {
            family: TrainSet::Mnist,
            train,
            test,
            ood,
            noise,
            inverted,
        })
    }

    /// Loads the files of `family`: for MNIST and Fashion-MNIST the other family's test split
    /// is the first OOD set; for CIFAR-5 the CIFAR-10 test images of classes 5–9 (quick: the
    /// first 10 000 / 2 000 / 2 000 images).
    pub fn load(root: &DataRoot, quick: bool, family: TrainSet) -> Result<Self, Box<dyn Error>> {
        let (train, test, ood) = match family {
            TrainSet::Mnist | TrainSet::FashionMnist => {
                let (own, other) = match family {
                    TrainSet::Mnist => (MnistFamily::Mnist, MnistFamily::FashionMnist),
                    _ => (MnistFamily::FashionMnist, MnistFamily::Mnist),
                };
                (
                    own.load(Split::Train, root)?,
                    own.load(Split::Test, root)?,
                    other.load(Split::Test, root)?,
                )
            }
            TrainSet::Cifar5 => {
                let test = Cifar5::load(Split::Test, root)?;
                (
                    Cifar5::load(Split::Train, root)?.inliers,
                    test.inliers,
                    test.outliers,
                )
            }
        };
        let data = if quick {
            Self::new(train.first(10_000), test.first(2_000), ood.first(2_000))
        } else {
            Self::new(train, test, ood)
        }?;
        Ok(Self { family, ..data })
    }

    /// The name of the training task and of its OOD set, as printed.
    pub fn names(&self) -> (&'static str, &'static str) {
        (self.family.name(), self.family.ood_name())
    }

    /// Classes of the training task.
    pub fn n_classes(&self) -> usize {
        self.test.n_classes
    }
}

/// What an `mnist` run trains and tests on (`--train-set`), and its first OOD set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TrainSet {
    /// MNIST; OOD: Fashion-MNIST's test split.
    Mnist,
    /// Fashion-MNIST; OOD: MNIST's test split.
    FashionMnist,
    /// CIFAR-10's classes 0–4; OOD: its classes 5–9 (Haußmann 2021 Table 5.2's CIFAR-5).
    Cifar5,
}

impl TrainSet {
    /// "MNIST", "Fashion-MNIST" or "CIFAR-5".
    pub fn name(self) -> &'static str {
        match self {
            Self::Mnist => "MNIST",
            Self::FashionMnist => "Fashion-MNIST",
            Self::Cifar5 => "CIFAR-5",
        }
    }

    /// The name of the first OOD set.
    pub fn ood_name(self) -> &'static str {
        match self {
            Self::Mnist => "Fashion-MNIST",
            Self::FashionMnist => "MNIST",
            Self::Cifar5 => "CIFAR classes 5–9",
        }
    }

    /// The training set's normalisation (the thesis code's constants).
    pub fn normalization(self) -> Normalization {
        match self {
            Self::Mnist => MnistFamily::Mnist.normalization(),
            Self::FashionMnist => MnistFamily::FashionMnist.normalization(),
            Self::Cifar5 => Cifar5::normalization(),
        }
    }

    /// Test images of the published tables' runs: 10 000 (MNIST, Fashion-MNIST), 5 000
    /// (CIFAR-10's test images of classes 0–4).
    pub fn published_test_images(self) -> usize {
        match self {
            Self::Cifar5 => 5_000,
            _ => 10_000,
        }
    }

    /// The first OOD set's normalisation: its own family's for MNIST and Fashion-MNIST (as
    /// the thesis code), the training set's for CIFAR's other classes.
    pub fn ood_normalization(self) -> Normalization {
        match self {
            Self::Mnist => MnistFamily::FashionMnist.normalization(),
            Self::FashionMnist => MnistFamily::Mnist.normalization(),
            Self::Cifar5 => Cifar5::normalization(),
        }
    }
}

/// The task named by `--train-set`.
///
/// # Errors
/// A name other than `mnist`, `fashion-mnist` and `cifar5`, naming the flag.
pub fn parse_family(name: &str) -> Result<TrainSet, String> {
    match name.to_ascii_lowercase().as_str() {
        "mnist" => Ok(TrainSet::Mnist),
        "fashion-mnist" | "fashion" | "fashionmnist" => Ok(TrainSet::FashionMnist),
        "cifar5" | "cifar-5" => Ok(TrainSet::Cifar5),
        _ => Err(format!(
            "--train-set {name:?}: expected mnist, fashion-mnist or cifar5"
        )),
    }
}
