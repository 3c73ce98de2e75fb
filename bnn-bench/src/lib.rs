//! The experiments of bnn-burn as a library: the method catalogue ([`catalogue::Method`]), the
//! UCI protocol ([`uci`]: [`uci::UciMethod`], [`uci::run_with`]), MNIST with OOD sets ([`mnist`]),
//! the toys ([`toy`]), Depeweg's tables ([`depeweg`]) and HMC on BNN+LV ([`lv_hmc`]), active
//! and continual learning ([`active`], [`continual`]), Brack's eight schools ([`eight_schools`]), Farquhar's Iris, make_moons
//! and in-between studies ([`iris_covariance`], [`moons_hmc`], [`in_between`]), the quick start,
//! the performance benchmarks ([`perf`]), the runner every harness shares ([`runner`]), the
//! tables of the README and the book ([`tables`]) and the ledger of paper tables
//! ([`published`]). The `bnn-bench` binary is a thin command line over these modules; a user
//! crate runs the same protocols on its own methods (the book's *UCI benchmark* page has one).

#![warn(missing_docs)]

pub mod active;
pub mod alloc;
pub mod catalogue;
pub mod continual;
pub mod control;
pub mod decomposition;
pub mod depeweg;
pub mod dynamics;
pub mod eight_schools;
pub mod experiment;
pub mod in_between;
pub mod iris_covariance;
pub mod lv_hmc;
pub mod lv_mnist;
pub mod mnist;
pub mod moons_hmc;
pub mod perf;
pub mod plots;
pub mod published;
pub mod quickstart;
pub mod runner;
pub mod tables;
pub mod toy;
pub mod uci;

// The library's own tests measure heap use too (`perf`, `data`).
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: alloc::CountingAllocator = alloc::CountingAllocator;

/// The book's pages that use the data crate or the bench, their Rust blocks compiled (and run,
/// but for `no_run` ones that need the UCI files) as doctests exactly as printed.
#[cfg(doctest)]
pub mod book {
    #[doc = include_str!("../../book/src/getting-started.md")]
    pub struct GettingStarted;
    #[doc = include_str!("../../book/src/data.md")]
    pub struct Data;
    #[doc = include_str!("../../book/src/benchmarks/uci.md")]
    pub struct BenchmarksUci;
    #[doc = include_str!("../../book/src/benchmarks/mnist.md")]
    pub struct BenchmarksMnist;
    #[doc = include_str!("../../book/src/benchmarks/toys.md")]
    pub struct BenchmarksToys;
    #[doc = include_str!("../../book/src/benchmarks/depeweg.md")]
    pub struct BenchmarksDepeweg;
    #[doc = include_str!("../../book/src/benchmarks/eight-schools.md")]
    pub struct BenchmarksEightSchools;
    #[doc = include_str!("../../book/src/benchmarks/iris-covariance.md")]
    pub struct BenchmarksIrisCovariance;
    #[doc = include_str!("../../book/src/benchmarks/moons-hmc.md")]
    pub struct BenchmarksMoonsHmc;
    #[doc = include_str!("../../book/src/benchmarks/in-between.md")]
    pub struct BenchmarksInBetween;
    #[doc = include_str!("../../book/src/benchmarks/lv-hmc.md")]
    pub struct BenchmarksLvHmc;
    #[doc = include_str!("../../book/src/benchmarks/active.md")]
    pub struct BenchmarksActive;
    #[doc = include_str!("../../book/src/benchmarks/continual.md")]
    pub struct BenchmarksContinual;
    #[doc = include_str!("../../book/src/benchmarks/control.md")]
    pub struct BenchmarksControl;
    #[doc = include_str!("../../book/src/benchmarks/dynamics.md")]
    pub struct BenchmarksDynamics;
    #[doc = include_str!("../../book/src/benchmarks/performance.md")]
    pub struct BenchmarksPerformance;
    #[doc = include_str!("../../book/src/examples.md")]
    pub struct Examples;
    #[doc = include_str!("../../book/src/reproducibility.md")]
    pub struct Reproducibility;
}
