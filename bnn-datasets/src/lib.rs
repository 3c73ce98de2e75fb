//! # bnn-datasets
//!
//! Every data set of the bnn-burn experiments: seeded generators that need no files ([`toy`],
//! [`dynamics`], the Industrial Benchmark in [`industrial`]), Fisher's Iris built in
//! ([`iris`]), loaders for UCI ([`uci`]), MNIST and Fashion-MNIST ([`images`], [`idx`]; their
//! continual-learning tasks in [`continual`]) and CIFAR ([`cifar`]), a user's own delimited
//! table ([`delimited`]), in-memory tables ([`table`]), padded sequences ([`sequences`]), a
//! [`Standardizer`] and burn `Dataset`s and batchers ([`burn_data`]). Files are looked for
//! through one [`DataRoot`]; every error names the file, the line or byte offset, what was
//! expected and what was found ([`DataError`]). Guide: the book's *Data* page.
#![warn(missing_docs)]

pub mod burn_data;
pub mod cifar;
pub mod continual;
pub mod delimited;
pub mod dynamics;
pub mod error;
pub mod idx;
pub mod images;
pub mod industrial;
pub mod iris;
pub mod root;
pub mod sequences;
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
