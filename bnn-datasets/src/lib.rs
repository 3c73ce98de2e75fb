//! # bnn-datasets
//!
//! Data for the bnn-burn benchmarks and examples. Built-in generators need no files.
#![warn(missing_docs)]

pub mod error;
pub mod idx;
pub mod root;
pub mod standardize;
pub mod toy;

pub use error::DataError;
pub use root::DataRoot;
pub use standardize::Standardizer;
