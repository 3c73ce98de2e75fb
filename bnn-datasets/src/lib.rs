//! # bnn-datasets
//!
//! Data for the bnn-burn benchmarks and examples. Built-in generators need no files.
#![warn(missing_docs)]

pub mod toy;
