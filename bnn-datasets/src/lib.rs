//! # bnn-datasets
//!
//! Every data set of the bnn-burn experiments:
//!
//! - built-in, seeded generators that need no files: the toy regressions of Depeweg (2019)
//!   and Farquhar (2022) ([`toy`]), two moons, the wet-chicken river and the stochastic
//!   Lotka–Volterra and Lorenz systems ([`dynamics`]);
//! - loaders for the real files: the 9 UCI regression sets with their fixed splits ([`uci`]),
//!   MNIST and Fashion-MNIST from IDX ([`images`], [`idx`]), CIFAR-10 / CIFAR-5 ([`cifar`]);
//! - a user's own CSV, TSV or whitespace table, by column name or position ([`delimited`]);
//! - plain in-memory tables ([`table`]), a training-data [`Standardizer`], and burn `Dataset`
//!   and `Batcher` implementations ([`burn_data`]): images stay `u8` until they are batched.
//!
//! Files are looked for through one [`DataRoot`]: an explicit folder, else `BNN_DATA_DIR`, else
//! `../shared/data` beside the workspace, else the user cache. Every error names the file, the
//! line or byte offset, what was expected and what was found ([`DataError`]).
#![warn(missing_docs)]

pub mod burn_data;
pub mod cifar;
pub mod delimited;
pub mod dynamics;
pub mod error;
pub mod idx;
pub mod images;
pub mod root;
pub mod standardize;
pub mod table;
pub mod toy;
pub mod uci;

pub use delimited::{Column, Delimiter, Header, TableReader, TextTable};
pub use error::DataError;
pub use images::{ImageSet, MnistFamily, Normalization, Split};
pub use root::DataRoot;
pub use standardize::Standardizer;
pub use table::{ClassificationData, RegressionData};
pub use uci::{UciData, UciDataset};
