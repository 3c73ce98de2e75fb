//! `bnn-bench`: the one front door for the experiments of bnn-burn.

use bnn_bench::{
    alloc, data_load, depeweg, lv_mnist, mnist, perf, perf_models, perf_pool, perf_predict,
    quickstart, toy, uci,
};

#[global_allocator]
static ALLOCATOR: alloc::CountingAllocator = alloc::CountingAllocator;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

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

/// What makes a process a worker of another run (set by the runner, hidden from `--help`).
#[derive(clap::Args, Debug, Clone, Default)]
struct WorkerArgs {
    /// The one task this worker runs.
    #[arg(long, hide = true, requires = "worker_parent")]
    worker_task: Option<String>,
    /// The process whose folder it writes into.
    #[arg(long, hide = true, requires = "worker_task")]
    worker_parent: Option<u32>,
}

impl WorkerArgs {
    fn worker(self) -> Option<bnn_bench::runner::Worker> {
        Some(bnn_bench::runner::Worker {
            task: self.worker_task?,
            parent: self.worker_parent?,
        })
    }
}

#[derive(Subcommand)]
enum Command {
    /// Train mean-field, radial and MC-dropout nets on the built-in heteroscedastic toy
    /// (y = 7 sin x + 3|cos(x/2)| ε, n = 1000) and report test NLL/RMSE plus a figure of the
    /// predictive mean with aleatoric and epistemic ±2σ bands. Needs no files.
    Quickstart {
        /// Output folder for the table (Markdown, JSON) and the figure (SVG).
        #[arg(long, default_value = "runs/quickstart")]
        out: PathBuf,
        /// Seed for data, initialisation and training.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Training epochs per method.
        #[arg(long, default_value_t = 1500)]
        epochs: usize,
    },
    /// What a prediction costs by moment propagation against Monte Carlo through the same
    /// trained nets (MFVI-LRT, VBP; MLP 1-200-200-1 on the cubic toy), with each one's test LL.
    PerfPredict {
        /// Output folder for perf-predict.md and perf-predict.json.
        #[arg(long, default_value = "runs/perf-predict")]
        out: PathBuf,
        /// Seed of data, initialisation and training.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Training epochs per method.
        #[arg(long, default_value_t = 300)]
        epochs: usize,
        /// Monte Carlo draws of the sampled prediction.
        #[arg(long, default_value_t = 100)]
        samples: usize,
        /// Timed repetitions of each prediction (the median is reported).
        #[arg(long, default_value_t = 11)]
        rounds: usize,
    },
    /// What max pooling by moments costs, forward and backward, by the fused kernel against the
    /// composition of burn ops, on the pooled LeNet5's poolings and an overlapping 3×3 one.
    PerfPool {
        /// Output folder for perf-pool.md and perf-pool.json.
        #[arg(long, default_value = "runs/perf-pool")]
        out: PathBuf,
        /// Timed repetitions of each path per pooling (the median is reported).
        #[arg(long, default_value_t = 9)]
        rounds: usize,
        /// Seed of the inputs.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Batch size of the maps (the pooled LeNet5 trains with 100).
        #[arg(long, default_value_t = 100)]
        batch: usize,
    },
    /// Milliseconds per training step and peak heap of the MLP 784-400-400-10 (batch 128) and
    /// LeNet5 (batch 100), Adam, for burn's deterministic layers and every posterior family,
    /// beside the PyTorch peers.
    Perf {
        /// Output folder for perf.md and perf.json.
        #[arg(long, default_value = "runs/perf")]
        out: PathBuf,
        /// Timed steps per round (after 5 warm-up steps).
        #[arg(long, default_value_t = 100)]
        steps: usize,
        /// Rounds, interleaved across workloads; the median round and the median per-round
        /// ratios are reported.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Seed of the device RNG.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Python with torch and bayesian-torch for the peer programs
        /// [default: $HOME/.venvs/peer/bin/python].
        #[arg(long)]
        peer_python: Option<PathBuf>,
        /// Folder of the MLP peer programs [default: ../shared/peer beside the workspace].
        #[arg(long)]
        peer_dir: Option<PathBuf>,
        /// Threads given to the peers (match the cores burn uses).
        #[arg(long, default_value_t = 2)]
        threads: usize,
        /// Only these posterior families (MFVI, MFVI-LRT, MFVI-Flipout, Radial, "MC dropout",
        /// DropConnect, "DropConnect, Gaussian masks", Low-rank, "MFVI, scale-mixture prior",
        /// "Radial, scale-mixture prior", "MAP (point weights)", "MAP, train-time dropout 0.5",
        /// "MFVI black-box α = 1, K = 4", "BEDL-PAC (CLT moments)", "DVI (CLT moments, ELBO)",
        /// "MFVI, posterior as prior (VCL)", "Low-rank, posterior as prior (VCL)"); repeatable.
        /// The deterministic baselines always run.
        #[arg(long = "method")]
        methods: Vec<String>,
        /// Architectures (mlp, lenet5); repeatable [default: both].
        #[arg(long = "net")]
        nets: Vec<String>,
        /// Kernel paths of the Bayesian rows: fused (the training loop's default), reference
        /// (burn ops and burn's Adam) or both.
        #[arg(long, default_value = "fused")]
        kernels: String,
    },
    /// The UCI regression protocol (Hernández-Lobato & Adams 2015; Gal 2016): 9 sets, the fixed
    /// 90/10 splits, one hidden layer of 50 units (100 for protein), test LL and RMSE in
    /// original units, mean ± s.e. over splits, beside the published columns.
    Uci {
        /// Methods (MAP, "MC dropout", MFVI, MFVI-LRT, Radial, Low-rank, VBP, CLT, DVI, BEDL,
        /// BEDL-PAC, BEDL-Hyper, BNN, "BNN+LV VB", "BNN+LV α=0.5", "BNN+LV α=1"); repeatable
        /// [default: all].
        #[arg(long = "method")]
        methods: Vec<String>,
        /// Data sets: a name (boston, concrete, energy, kin8nm, naval, power, protein, wine,
        /// yacht) or the path of a folder of your own in the UCI_Datasets layout (its table has
        /// no published columns); repeatable [default: the 9].
        #[arg(long = "dataset")]
        datasets: Vec<String>,
        /// Splits per data set [default: the protocol's 20 (5 for protein); 3 with --quick].
        #[arg(long)]
        splits: Option<usize>,
        /// Training epochs [default: the protocol's n_epochs, raised to 8000 optimiser steps, at
        /// most 10 × n_epochs; MC dropout: Gal's 100 × n_epochs; capped at ~1500 steps with
        /// --quick].
        #[arg(long)]
        epochs: Option<usize>,
        /// Seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// 3 splits and at most ~1500 optimiser steps per fit.
        #[arg(long)]
        quick: bool,
        /// Output folder for uci.md, uci.json and uci.svg.
        #[arg(long, default_value = "runs/uci")]
        out: PathBuf,
        /// Worker processes, each running one (data set, method) row at a time; the numbers do
        /// not depend on it (every split has its own seed).
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        /// Reuse the finished rows in --out/rows (and an interrupted row's finished splits)
        /// computed under the same seed, budget, split count and data; rows there of other
        /// data sets or methods are kept in the new report.
        #[arg(long)]
        resume: bool,
        /// Folder holding uci/ [default: BNN_DATA_DIR, then ../shared/data, then the cache].
        #[arg(long)]
        data_dir: Option<PathBuf>,
        #[command(flatten)]
        worker: WorkerArgs,
    },
    /// BNN+LV on MNIST with the amortised encoder (Depeweg 2019 §6.1): a standard model (and
    /// rotated test images), labels 1↔7 swapped with p = 1/3, and 75 % of classes 0, 6, 8, 9
    /// removed; per-class aleatoric and epistemic entropy, and whether each rises where the
    /// thesis says it does.
    LvMnist {
        /// Training epochs per model (the thesis: 150).
        #[arg(long, default_value_t = 3)]
        epochs: usize,
        /// Training images (the first ones), before any subsampling.
        #[arg(long, default_value_t = 10_000)]
        train_images: usize,
        /// Test images (the first ones).
        #[arg(long, default_value_t = 2_000)]
        test_images: usize,
        /// Joint draws of weights and latents per step (K of the energy).
        #[arg(long, default_value_t = 5)]
        train_samples: usize,
        /// Weight draws of the decomposition.
        #[arg(long, default_value_t = 10)]
        n_w: usize,
        /// Prior-latent draws per weight draw.
        #[arg(long, default_value_t = 10)]
        n_z: usize,
        /// Seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Output folder for lv-mnist.md, lv-mnist.json and lv-mnist.svg.
        #[arg(long, default_value = "runs/lv-mnist")]
        out: PathBuf,
        /// Folder holding mnist/ [default: BNN_DATA_DIR, then ../shared/data, then the cache].
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Depeweg (2019) Tables 5.1 / 5.2: BNN (α = 1) and BNN+LV under black-box α (VB, ½, 1) on
    /// seven UCI sets, the heteroscedastic and bimodal toys and wet-chicken; 5 random 90/10
    /// splits, 2 × 50 ReLU (2 × 20 on the toys), beside the published columns with z-scores.
    /// Every finished split is saved as it ends (`--resume` skips it).
    Depeweg {
        /// Data sets (boston, power, concrete, energy, kin8nm, naval, wine, heteroscedastic,
        /// bimodal, wet-chicken); repeatable [default: the 10].
        #[arg(long = "dataset")]
        datasets: Vec<String>,
        /// Models ("BNN", "BNN+LV VB", "BNN+LV α=0.5", "BNN+LV α=1"; `alpha` for `α`);
        /// repeatable [default: the 4].
        #[arg(long = "model")]
        models: Vec<String>,
        /// Random 90/10 splits per set [default: 5; 2 with --quick].
        #[arg(long)]
        splits: Option<usize>,
        /// Training epochs [default: the thesis's 5000; 100 with --quick].
        #[arg(long)]
        epochs: Option<usize>,
        /// Adam's learning rate (the thesis: 1e-3).
        #[arg(long, default_value_t = 1e-3)]
        lr: f64,
        /// Minibatches per epoch: the batch is ⌈N/batches⌉ (the thesis's code: 25).
        #[arg(long, default_value_t = 25)]
        batches: usize,
        /// Joint draws of weights and latents per training step (K of the energy; the
        /// thesis's code advises at least 15, 25 on CPUs, and uses 50).
        #[arg(long, default_value_t = 25)]
        train_samples: usize,
        /// Draws of the test predictive mixture [default: 200; 100 with --quick]; each split also
        /// scores the same net under 25 times as many (a second, less biased LL estimate).
        #[arg(long)]
        test_draws: Option<usize>,
        /// Seed of data, splits and training.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// 2 splits, 100 epochs, 100 test draws.
        #[arg(long)]
        quick: bool,
        /// Output folder for depeweg.md, depeweg.json and rows/.
        #[arg(long, default_value = "runs/depeweg")]
        out: PathBuf,
        /// Folder holding uci/ [default: BNN_DATA_DIR, then ../shared/data, then the cache].
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Reuse the finished splits in --out/rows with the same budget, seed and data.
        #[arg(long)]
        resume: bool,
        /// Write depeweg.md and depeweg.json from the finished rows in --out (this budget and
        /// seed) and train nothing.
        #[arg(long)]
        report_only: bool,
        /// Worker processes, each running one split at a time; the numbers do not depend on it
        /// (every split has its own seed).
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        #[command(flatten)]
        worker: WorkerArgs,
    },
    /// One UCI report from the rows of several `uci` run records (uci.json), with no training:
    /// a later record's row replaces the same (data set, method) row of an earlier one.
    UciReport {
        /// Output folder for uci.md, uci.json and uci.svg.
        #[arg(long)]
        out: PathBuf,
        /// Run records, in order of precedence (later wins).
        #[arg(required = true)]
        records: Vec<PathBuf>,
    },
    /// MNIST classification with out-of-distribution sets (Fashion-MNIST, uniform noise,
    /// inverted MNIST, MNIST rotated in 45° steps): every method as an MLP 784-400-400-10 and
    /// as the strided LeNet5 (Haußmann 2021); error, NLL, ECE, Brier, OOD AUROC of entropy and
    /// mutual information per set, entropy-ECDF area, misclassification AUROC, error and
    /// entropy per angle; reliability diagrams, entropy histograms, rotation curves.
    Mnist {
        /// Methods (MAP, "MC dropout", MFVI-LRT, Radial, VBP, DVI, CLT, DVI-sampled, EDL, BEDL,
        /// BEDL-PAC); repeatable [default: all]. DVI-sampled is Table 5.2's DVI: the sampled
        /// softmax over 20 draws, prior precision 10.
        #[arg(long = "method")]
        methods: Vec<String>,
        /// Architectures (mlp, lenet5; lenet5-pool: the max-pooling LeNet5 without padding;
        /// lenet5-sensoy: the net of Sensoy et al.'s EDL code, padded, pooled, dropout 0.5 on
        /// the 500 units; conv96: Haußmann 2021 Table 5.3's two 96-channel stride-2
        /// convolutions and the read-out); repeatable [default: mlp and lenet5; lenet5 for
        /// cifar5].
        #[arg(long = "arch")]
        archs: Vec<String>,
        /// Training epochs [default: 10; 2 with --quick].
        #[arg(long)]
        epochs: Option<usize>,
        /// Seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// 10 000 training, 2 000 test and 2 000 OOD images, 2 epochs.
        #[arg(long)]
        quick: bool,
        /// Posterior samples per prediction.
        #[arg(long, default_value_t = 20)]
        samples: usize,
        /// Training minibatch size [default: 100, the thesis's; Sensoy et al.'s EDL code: 1000].
        #[arg(long, default_value_t = mnist::BATCH_SIZE)]
        batch_size: usize,
        /// Output folder for mnist.md, mnist.json, reliability.svg and entropy.svg.
        #[arg(long, default_value = "runs/mnist")]
        out: PathBuf,
        /// Folder holding mnist/, fashion-mnist/ (and cifar-10-batches-bin/ for cifar5)
        /// [default: BNN_DATA_DIR, then ../shared/data, then the cache].
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Reuse the finished rows in --out/rows computed under the same seed, epochs, samples,
        /// batch size and data; rows there of other architectures or methods are kept in the
        /// new report; a row stopped part-way continues from its last saved epoch
        /// (--out/state/, saved every minute).
        #[arg(long)]
        resume: bool,
        /// The set trained and tested on: mnist or fashion-mnist (the other is the first OOD
        /// set), or cifar5 (CIFAR-10's classes 0–4; OOD: its classes 5–9; the CIFAR LeNet5
        /// 192/192/1000 only; the binary files cifar-10-batches-bin/{data_batch_1..5,
        /// test_batch}.bin under --data-dir, from
        /// https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz).
        #[arg(long, default_value = "mnist")]
        train_set: String,
        /// Worker processes, each training one (architecture, method) row at a time; the
        /// numbers do not depend on it (every row has its own seed).
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        #[command(flatten)]
        worker: WorkerArgs,
    },
    /// The decomposition pictures: every method on the heteroscedastic and bimodal toys of
    /// Depeweg (2019) §6.1.3, predictive mean with ±2σ aleatoric and total bands, one figure.
    Toy {
        /// Methods (MAP, "MC dropout", MFVI-LRT, Radial, BNN+LV: also its entropy-form figure
        /// toy-lv.svg and the wet-chicken maps wet-chicken.svg); repeatable [default: all].
        #[arg(long = "method")]
        methods: Vec<String>,
        /// Training epochs [default: 2000; 300 with --quick].
        #[arg(long)]
        epochs: Option<usize>,
        /// Seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// 300 epochs per fit.
        #[arg(long)]
        quick: bool,
        /// Output folder for toy.md, toy.json and toy.svg.
        #[arg(long, default_value = "runs/toy")]
        out: PathBuf,
        /// Reuse the finished fits in --out/rows of the same seed and budget.
        #[arg(long)]
        resume: bool,
        /// Worker processes, each running one fit at a time; the numbers do not depend on it
        /// (every fit has its own seed).
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        #[command(flatten)]
        worker: WorkerArgs,
    },
    /// Wall time and peak heap of loading every real data set (MNIST, Fashion-MNIST from gzip
    /// IDX; the 9 UCI sets with a split), beside the size of the data itself.
    Data {
        /// Output folder for data.md and data.json.
        #[arg(long, default_value = "runs/data")]
        out: PathBuf,
        /// Folder holding mnist/, fashion-mnist/ and uci/ [default: BNN_DATA_DIR, then
        /// ../shared/data, then the user cache].
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Loads per data set; the median time is reported.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
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
    // `uci --jobs N` starts this binary as its workers, and this command line runs their rows.
    bnn_bench::runner::allow_worker_processes();
    let result = match cli.command {
        Command::Quickstart { out, seed, epochs } => quickstart::run(&out, seed, epochs),
        Command::PerfPredict {
            out,
            seed,
            epochs,
            samples,
            rounds,
        } => perf_predict::run(&perf_predict::PredictOptions {
            out,
            seed,
            epochs,
            samples,
            rounds,
        })
        .map(|_| ()),
        Command::PerfPool {
            out,
            rounds,
            seed,
            batch,
        } => perf_pool::run(&perf_pool::PoolOptions {
            out,
            rounds,
            seed,
            batch,
        })
        .map(|_| ()),
        Command::Perf {
            out,
            steps,
            rounds,
            seed,
            peer_python,
            peer_dir,
            threads,
            methods,
            nets,
            kernels,
        } => {
            let parsed = perf_models::parse_nets(&nets)
                .and_then(|n| Ok((n, perf_models::parse_kernels(&kernels)?)));
            let (nets, kernels) = match parsed {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("{e}");
                    std::process::exit(2);
                }
            };
            let options = perf::PerfOptions {
                steps,
                rounds,
                seed,
                out,
                peer_python: peer_python.or_else(|| {
                    std::env::var_os("HOME")
                        .map(|h| PathBuf::from(h).join(".venvs/peer/bin/python"))
                }),
                peer_dir: peer_dir.unwrap_or_else(|| {
                    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/peer")
                }),
                threads,
                methods,
                nets,
                kernels,
            };
            perf::run(&options).map(|_| ())
        }
        Command::Uci {
            methods,
            datasets,
            splits,
            epochs,
            seed,
            quick,
            out,
            data_dir,
            jobs,
            resume,
            worker,
        } => datasets
            .iter()
            .map(|d| uci::DataSet::parse(d))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.into())
            .and_then(|mut datasets| {
                if datasets.is_empty() {
                    datasets = bnn_datasets::UciDataset::ALL
                        .map(uci::DataSet::Builtin)
                        .to_vec();
                }
                uci::run(&uci::UciOptions {
                    datasets,
                    methods,
                    splits,
                    epochs,
                    seed,
                    quick,
                    out,
                    data_dir,
                    jobs,
                    resume,
                    worker: worker.worker(),
                })
                .map(|_| ())
            }),
        Command::Depeweg {
            datasets,
            models,
            splits,
            epochs,
            lr,
            batches,
            train_samples,
            test_draws,
            seed,
            quick,
            out,
            data_dir,
            resume,
            report_only,
            jobs,
            worker,
        } => depeweg::run(&depeweg::DepewegOptions {
            datasets,
            models,
            splits: splits.unwrap_or(if quick { 2 } else { 5 }),
            budget: depeweg::DepewegBudget {
                epochs: epochs.unwrap_or(if quick { 100 } else { 5000 }),
                learning_rate: lr,
                batches,
                train_samples,
                test_draws: test_draws.unwrap_or(if quick { 100 } else { 200 }),
            },
            seed,
            out,
            data_dir,
            resume,
            report_only,
            jobs,
            worker: worker.worker(),
        })
        .map(|_| ()),
        Command::LvMnist {
            epochs,
            train_images,
            test_images,
            train_samples,
            n_w,
            n_z,
            seed,
            out,
            data_dir,
        } => lv_mnist::run(&lv_mnist::LvMnistOptions {
            epochs,
            train_images,
            test_images,
            train_samples,
            n_w,
            n_z,
            seed,
            out,
            data_dir,
        })
        .map(|_| ()),
        Command::UciReport { out, records } => uci::combine(&records, &out).map(|_| ()),
        Command::Mnist {
            methods,
            archs,
            epochs,
            seed,
            quick,
            samples,
            batch_size,
            out,
            data_dir,
            resume,
            train_set,
            jobs,
            worker,
        } => archs
            .iter()
            .map(|a| a.parse::<mnist::Arch>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.into())
            .and_then(|archs| Ok((archs, mnist::parse_family(&train_set)?)))
            .and_then(|(archs, family)| {
                mnist::run(&mnist::MnistOptions {
                    methods,
                    archs,
                    epochs,
                    seed,
                    quick,
                    prediction_samples: samples,
                    batch_size,
                    out,
                    data_dir,
                    resume,
                    family,
                    jobs,
                    worker: worker.worker(),
                })
                .map(|_| ())
            }),
        Command::Toy {
            methods,
            epochs,
            seed,
            quick,
            out,
            resume,
            jobs,
            worker,
        } => toy::run(&toy::ToyOptions {
            methods,
            epochs,
            seed,
            quick,
            out,
            resume,
            jobs,
            worker: worker.worker(),
        })
        .map(|_| ()),
        Command::Data {
            out,
            data_dir,
            rounds,
        } => data_load::run(
            &bnn_datasets::DataRoot::new(data_dir.as_deref()),
            rounds,
            &out,
        )
        .map(|_| ()),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
