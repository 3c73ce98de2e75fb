//! The `bnn-bench perf` command line.

use super::*;

/// The `bnn-bench perf` command line ([`PerfArgs::options`] resolves it).
#[derive(Debug, Clone, clap::Args)]
pub struct PerfArgs {
    /// Output folder for perf.md and perf.json.
    #[arg(long, default_value = "runs/perf")]
    pub out: PathBuf,
    /// Timed steps per round (after 5 warm-up steps).
    #[arg(long, default_value_t = 100)]
    pub steps: usize,
    /// Rounds, interleaved across workloads; the median round and the median per-round ratios
    /// are reported.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Seed of the device RNG.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Python with torch and bayesian-torch for the peer programs
    /// [default: $HOME/.venvs/peer/bin/python].
    #[arg(long)]
    pub peer_python: Option<PathBuf>,
    /// Folder of the MLP peer programs [default: ../shared/peer beside the workspace].
    #[arg(long)]
    pub peer_dir: Option<PathBuf>,
    /// Threads given to the peers (match the cores burn uses).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Only these posterior families (MFVI, MFVI-LRT, MFVI-Flipout, Radial, "MC dropout",
    /// DropConnect, "DropConnect, Gaussian masks", Low-rank, "MFVI, scale-mixture prior",
    /// "Radial, scale-mixture prior", "MAP (point weights)", "MAP, train-time dropout 0.5",
    /// "MFVI black-box alpha = 1, K = 4", "BEDL-PAC (CLT moments)", "DVI (CLT moments, ELBO)",
    /// "MFVI, posterior as prior (VCL)", "Low-rank, posterior as prior (VCL)"); repeatable.
    /// The deterministic baselines always run.
    #[arg(long = "method")]
    pub methods: Vec<String>,
    /// Architectures (mlp, lenet5); repeatable [default: both].
    #[arg(long = "net")]
    pub nets: Vec<String>,
    /// Kernel paths of the Bayesian rows: fused (the training loop's default), reference (burn
    /// ops and burn's Adam) or both.
    #[arg(long, default_value = "fused")]
    pub kernels: String,
}

impl PerfArgs {
    /// The options: architectures and kernel paths parsed, the peers' defaults filled in.
    ///
    /// # Errors
    /// An unknown architecture or kernel path, naming the flag.
    pub fn options(self) -> Result<PerfOptions, Box<dyn Error>> {
        Ok(PerfOptions {
            nets: models::parse_nets(&self.nets)?,
            kernels: models::parse_kernels(&self.kernels)?,
            steps: self.steps,
            rounds: self.rounds,
            seed: self.seed,
            out: self.out,
            peer_python: self.peer_python.or_else(default_peer_python),
            peer_dir: self.peer_dir.unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/peer")
            }),
            threads: self.threads,
            methods: self.methods,
        })
    }
}

/// `$HOME/.venvs/peer/bin/python`, the peers' Python of `../shared/peer/README.md`.
pub fn default_peer_python() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".venvs/peer/bin/python"))
}
