//! `bnn-bench`: the one front door for the experiments of bnn-burn. The commands and their
//! dispatch only: each command's arguments are its harness's options (`--out`, `--resume`,
//! `--jobs` and `--report-only` shared by every harness, [`bnn_bench::runner::RunnerOptions`]).

use bnn_bench::{
    active, alloc, continual, control, depeweg, dynamics, eight_schools, in_between,
    iris_covariance, lv_hmc, lv_mnist, mnist, moons_hmc, perf, published, quickstart, runner,
    tables, toy, uci,
};
use clap::{Parser, Subcommand};

#[global_allocator]
static ALLOCATOR: alloc::CountingAllocator = alloc::CountingAllocator;

#[derive(Parser)]
#[command(
    name = "bnn-bench",
    version,
    about = "Experiments and benchmarks of bnn-burn"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train mean-field, radial and MC-dropout nets on the built-in heteroscedastic toy
    /// (y = 7 sin x + 3|cos(x/2)| ε, n = 1000) and report test NLL/RMSE plus a figure of the
    /// predictive mean with aleatoric and epistemic ±2σ bands. Needs no files.
    #[command(mut_arg("out", |a| a.default_value("runs/quickstart").required(false)))]
    Quickstart(quickstart::QuickstartOptions),
    /// What a prediction costs by moment propagation against Monte Carlo through the same
    /// trained nets (MFVI-LRT, VBP; MLP 1-200-200-1 on the cubic toy), with each one's test LL.
    PerfPredict(perf::predict::PredictOptions),
    /// What max pooling by moments costs, forward and backward, by the fused kernel against the
    /// composition of burn ops, on the pooled LeNet5's poolings and an overlapping 3×3 one.
    PerfPool(perf::pool::PoolOptions),
    /// Milliseconds per training step and peak heap of the MLP 784-400-400-10 (batch 128) and
    /// LeNet5 (batch 100), Adam, for burn's deterministic layers and every posterior family,
    /// beside the PyTorch peers.
    Perf(perf::PerfArgs),
    /// Last-layer and KFAC Laplace here and in laplace-torch, fitted to one MAP LeNet5 trained
    /// on MNIST: error, NLL, ECE and OOD AUROC of both, and the fit + predict time ratio.
    PerfLaplace(perf::laplace::LaplacePeerOptions),
    /// One MNIST epoch (60 000 images, LeNet5, MFVI-LRT by default) here and in
    /// bayesian-torch, alternated in one run: the wall-time ratio.
    PerfEpoch(perf::epoch::EpochOptions),
    /// Haußmann Table 6.3 measured: the training cost per iteration of E-Bayes, E-PAC-Bayes,
    /// their hybrids, D-BNN (VI), D-BNN (SGLD) and the LSTM forecasters on the Lorenz setting.
    PerfSde(dynamics::costs::SdeCostOptions),
    /// The UCI regression protocol (Hernández-Lobato & Adams 2015; Gal 2016): 9 sets, the fixed
    /// 90/10 splits, one hidden layer of 50 units (100 for protein), test LL and RMSE in
    /// original units, mean ± s.e. over splits, beside the published columns.
    #[command(mut_arg("out", |a| a.default_value("runs/uci").required(false)))]
    Uci(uci::UciOptions),
    /// BNN+LV on MNIST with the amortised encoder (Depeweg 2019 §6.1): a standard model (and
    /// rotated test images), labels 1↔7 swapped with p = 1/3, and 75 % of classes 0, 6, 8, 9
    /// removed; per-class aleatoric and epistemic entropy, and whether each rises where the
    /// thesis says it does.
    #[command(mut_arg("out", |a| a.default_value("runs/lv-mnist").required(false)))]
    LvMnist(lv_mnist::LvMnistOptions),
    /// Depeweg (2019) Tables 5.1 / 5.2: BNN (α = 1) and BNN+LV under black-box α (VB, ½, 1) on
    /// seven UCI sets, the heteroscedastic and bimodal toys and wet-chicken; 5 random 90/10
    /// splits, 2 × 50 ReLU (2 × 20 on the toys), beside the published columns with z-scores.
    /// Every finished split is saved as it ends (`--resume` skips it).
    #[command(mut_arg("out", |a| a.default_value("runs/depeweg").required(false)))]
    Depeweg(depeweg::DepewegArgs),
    /// Brack (2022) Table 5.1: mean-field, full-rank and planar/radial/IAF flows (K = 4–32) on
    /// the eight-schools model, centred and non-centred, each judged by its ELBO and PSIS k̂
    /// beside the printed table; NUTS as the reference of the posterior's moments.
    #[command(mut_arg("out", |a| a.default_value("runs/eight-schools").required(false)))]
    EightSchools(eight_schools::EightSchoolsOptions),
    /// Farquhar (2022) Fig. 3.11 / Table A.3: a full-covariance Gaussian over every weight of a
    /// small MLP against a diagonal one on Iris, 1–4 hidden layers of width 4, the best seeds
    /// of each cell by test cross-entropy.
    #[command(mut_arg("out", |a| a.default_value("runs/iris-covariance").required(false)))]
    IrisCovariance(iris_covariance::IrisCovarianceOptions),
    /// Farquhar (2022) Figs. 3.6/3.7: mean-field VI (Flipout) with one vs three hidden layers
    /// on a 1-D set with a gap, against NUTS on the same tempered posterior: the uncertainty
    /// each puts between the clusters.
    #[command(mut_arg("out", |a| a.default_value("runs/in-between").required(false)))]
    InBetween(in_between::InBetweenOptions),
    /// Depeweg (2019) Fig. 6.4, reduced: NUTS over BNN+LV's weights and latents as the ground
    /// truth of the uncertainty decomposition, beside the black-box α = 1 fit, on the
    /// heteroscedastic and bimodal toys.
    #[command(mut_arg("out", |a| a.default_value("runs/lv-hmc").required(false)))]
    LvHmc(lv_hmc::LvHmcOptions),
    /// Active learning on the library's loop: `--study linear` is Farquhar (2022) App. C.1's
    /// linear toy, the plain, PURE and LURE risks over many trajectories (Fig. 5.4); `mnist`
    /// Haußmann (2021) Tables 4.1–4.2; `depeweg` Depeweg (2019) Table 6.1; `farquhar` Farquhar
    /// (2022) Figs. 5.5–5.8 on unbalanced MNIST.
    #[command(mut_arg("out", |a| a.default_value("runs/active").required(false)))]
    Active(Box<active::ActiveOptions>),
    /// Continual learning on the library's loop (Farquhar 2022 §5.1): split and permuted
    /// MNIST, VCL with and without coresets, "coreset only" and EWC, single- or multi-head.
    #[command(mut_arg("out", |a| a.default_value("runs/continual").required(false)))]
    Continual(continual::ContinualOptions),
    /// Model-based policy search (Depeweg 2019 Table 7.1, wet-chicken or the Industrial
    /// Benchmark): the MLP, the MLP ensemble, the BNN and BNN+LV (VB, α = ½, α = 1) as
    /// dynamics models, policies searched by roll-outs through each and scored on the system.
    #[command(mut_arg("out", |a| a.default_value("runs/control").required(false)))]
    Control(control::ControlOptions),
    /// Risk-sensitive policy search on the Industrial Benchmark (Depeweg 2019 §7.2, Figs. 7.5a
    /// and 7.6): a BNN+LV on behaviour-policy data, a policy per (β, γ) under eq. 7.31, each
    /// scored on the true benchmark by its cost and its model bias.
    #[command(mut_arg("out", |a| a.default_value("runs/risk").required(false)))]
    Risk(control::risk::RiskOptions),
    /// Neural SDEs on the stochastic Lorenz attractor (Haußmann 2021 Table 6.1): E-Bayes and
    /// E-PAC-Bayes with one equation known up to a noisy parameter, or none.
    #[command(mut_arg("out", |a| a.default_value("runs/dynamics").required(false)))]
    Dynamics(dynamics::DynamicsOptions),
    /// Farquhar (2022) Table A.4 / Fig. 3.2, reduced: NUTS on make_moons for MLPs of growing
    /// depth at about 1 000 weights, the samples' accuracy and acceptance beside the table and
    /// how far the posterior is from mean-field (E_KL, E_W).
    #[command(mut_arg("out", |a| a.default_value("runs/moons-hmc").required(false)))]
    MoonsHmc(moons_hmc::MoonsHmcOptions),
    /// One UCI report from the rows of several `uci` run records (uci.json), with no training:
    /// a later record's row replaces the same (data set, method) row of an earlier one.
    UciReport(uci::UciReportArgs),
    /// MNIST classification with out-of-distribution sets (Fashion-MNIST, uniform noise,
    /// inverted MNIST, MNIST rotated in 45° steps): every method as an MLP 784-400-400-10 and
    /// as the strided LeNet5 (Haußmann 2021); error, NLL, ECE, Brier, OOD AUROC of entropy and
    /// mutual information per set, entropy-ECDF area, misclassification AUROC, error and
    /// entropy per angle; reliability diagrams, entropy histograms, rotation curves.
    #[command(mut_arg("out", |a| a.default_value("runs/mnist").required(false)))]
    Mnist(mnist::MnistOptions),
    /// The decomposition pictures: every method on the heteroscedastic and bimodal toys of
    /// Depeweg (2019) §6.1.3, predictive mean with ±2σ aleatoric and total bands, one figure.
    #[command(mut_arg("out", |a| a.default_value("runs/toy").required(false)))]
    Toy(toy::ToyOptions),
    /// Every table of the five works, with its status here, the command that runs it and the
    /// record it comes from (`--list`); `reproduce <table>` runs it (`--quick`: its small
    /// budget); `--markdown` prints the book's reproducibility page.
    Reproduce(published::ledger::ReproduceOptions),
    /// Rewrite every table of the README and the book that is generated from the run records
    /// in assets/ (`--check`: only list those that differ, and fail if any does).
    Results(tables::ResultsOptions),
    /// Wall time and peak heap of loading every real data set (MNIST, Fashion-MNIST from gzip
    /// IDX; the 9 UCI sets with a split), beside the size of the data itself.
    Data(perf::data::DataArgs),
}

fn main() {
    let cli = Cli::parse();
    // A bad BNN_BURN_BACKEND is an error before any work, not a panic in the middle of it.
    if let Err(e) = bnn_burn::device::try_selected_backend() {
        eprintln!("{e}");
        std::process::exit(2);
    }
    // Every command trains: glibc's heap trimming would return and fault in the pages a step
    // frees, step after step (on naval's BNN+LV step it was a third of the wall time).
    bnn_burn::device::keep_freed_memory();
    // `--jobs N` starts this binary as its workers, and this command line runs their tasks.
    runner::allow_worker_processes();
    let result: Result<(), Box<dyn std::error::Error>> = match cli.command {
        Command::Quickstart(o) => quickstart::run_with(&o),
        Command::PerfPredict(o) => perf::predict::run(&o).map(drop),
        Command::PerfPool(o) => perf::pool::run(&o).map(drop),
        Command::PerfEpoch(o) => perf::epoch::run(&o).map(drop),
        Command::PerfLaplace(o) => perf::laplace::run(&o).map(drop),
        Command::PerfSde(o) => dynamics::costs::run(&o).map(drop),
        Command::Perf(a) => a.options().and_then(|o| perf::run(&o).map(drop)),
        Command::Uci(o) => uci::run(&o).map(drop),
        Command::LvMnist(o) => lv_mnist::run(&o).map(drop),
        Command::Depeweg(a) => depeweg::run(&a.options()).map(drop),
        Command::EightSchools(o) => eight_schools::run(&o).map(drop),
        Command::IrisCovariance(o) => iris_covariance::run(&o).map(drop),
        Command::MoonsHmc(o) => moons_hmc::run(&o).map(drop),
        Command::InBetween(o) => in_between::run(&o).map(drop),
        Command::LvHmc(o) => lv_hmc::run(&o).map(drop),
        Command::Active(o) if o.study == "mnist" => active::run_mnist(&o).map(drop),
        Command::Active(o) if o.study == "depeweg" => active::run_depeweg(&o).map(drop),
        Command::Active(o) if o.study == "farquhar" => active::run_farquhar(&o).map(drop),
        Command::Active(o) => active::run(&o).map(drop),
        Command::Continual(o) => continual::run(&o).map(drop),
        Command::Control(o) => control::run(&o).map(drop),
        Command::Risk(o) => control::risk::run(&o).map(drop),
        Command::Dynamics(o) => dynamics::run(&o).map(drop),
        Command::UciReport(a) => uci::combine(&a.records, &a.out).map(drop),
        Command::Mnist(o) => mnist::run(&o).map(drop),
        Command::Toy(o) => toy::run(&o).map(drop),
        Command::Data(a) => a.run().map(drop),
        Command::Reproduce(o) => published::ledger::run(&o),
        Command::Results(o) => tables::run(&o),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
