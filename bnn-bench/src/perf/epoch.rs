//! `bnn-bench perf-epoch`: one MNIST training epoch end to end (60 000 images, the strided
//! LeNet5, batch 100, Adam at 10⁻³, a shuffled pass) of a catalogue method (MFVI-LRT by
//! default), against the same epoch of bayesian-torch's mean-field LeNet5
//! (`xcheck/perf_peers.py epoch`: `Conv2dReparameterization`/`LinearReparameterization`,
//! cross-entropy plus KL/N), alternated round by round in one run. The ratio is the peer's
//! median epoch over ours; each round's own ratio is kept beside it.

use crate::catalogue::Method;
use crate::mnist::{Arch, conv_shape};
use bnn_burn::likelihood::Categorical;
use bnn_burn::train::TrainConfig;
use bnn_datasets::{DataRoot, MnistFamily, Split};
use burn::tensor::{Device, Int, Tensor};
use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

/// Settings of one run.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct EpochOptions {
    /// Output folder for perf-epoch.md and perf-epoch.json.
    #[arg(long, default_value = "runs/perf-epoch")]
    pub out: PathBuf,
    /// Rounds, each one epoch of ours then one of the peer's (the medians are reported).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// The catalogue method timed on our side (its MNIST settings).
    #[arg(long, default_value = "MFVI-LRT")]
    pub method: String,
    /// Folder holding `mnist/` (default: the shared data beside the workspace).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Python interpreter with torch and bayesian-torch (default `~/.venvs/peer/bin/python`).
    #[arg(long)]
    pub peer_python: Option<PathBuf>,
    /// Threads of the peer (burn's CPU backends use every core).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Seed of the initial weights, the shuffling and the noise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// One round: our epoch and the peer's, in seconds.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EpochRound {
    /// Our epoch's training seconds (the loop's own clock).
    pub ours_s: f64,
    /// The peer's epoch, as it reports it (its loop only).
    pub peer_s: f64,
    /// `peer_s / ours_s`.
    pub ratio: f64,
}

/// The record of one run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EpochRecord {
    /// The settings.
    pub options: EpochOptions,
    /// What ran on each side.
    pub ours: String,
    /// The peer.
    pub peer: String,
    /// Images in the epoch.
    pub images: usize,
    /// The rounds, in order.
    pub rounds: Vec<EpochRound>,
    /// Median of our epochs.
    pub ours_median_s: f64,
    /// Median of the peer's epochs.
    pub peer_median_s: f64,
    /// `peer_median_s / ours_median_s`: how many times faster our epoch is.
    pub ratio: f64,
    /// The revision measured.
    pub git_revision: String,
    /// Wall time of the run, loading included.
    pub wall_seconds: f64,
}

/// Checks the options and names what is missing before any work.
fn validate(o: &EpochOptions) -> Result<(PathBuf, Method), Box<dyn Error>> {
    if o.rounds == 0 {
        return Err("perf-epoch: --rounds must be at least 1".into());
    }
    if o.threads == 0 {
        return Err("perf-epoch: --threads must be at least 1".into());
    }
    let methods =
        crate::catalogue::available(crate::catalogue::Protocol::Mnist, &crate::mnist::SETTINGS);
    let method = methods
        .iter()
        .find(|m| m.name.eq_ignore_ascii_case(&o.method))
        .cloned()
        .ok_or_else(|| {
            let names: Vec<&str> = methods.iter().map(|m| m.name).collect();
            format!(
                "perf-epoch: --method {}: not an MNIST method (one of: {})",
                o.method,
                names.join(", ")
            )
        })?;
    if method.posthoc.is_some() || method.moments.is_some() {
        return Err(format!(
            "perf-epoch: --method {}: a sampled method (its peer is bayesian-torch's)",
            o.method
        )
        .into());
    }
    let python = o
        .peer_python
        .clone()
        .or_else(super::args::default_peer_python)
        .filter(|p| p.exists())
        .ok_or(
            "perf-epoch: --peer-python: no Python interpreter with torch and bayesian-torch \
                (set-up in xcheck/perf_peers.py)",
        )?;
    Ok((python, method))
}

/// Runs the rounds and writes `perf-epoch.json` and `perf-epoch.md` into `--out`.
///
/// # Errors
/// Bad options, missing MNIST files or peer, a failed epoch on either side.
pub fn run(o: &EpochOptions) -> Result<EpochRecord, Box<dyn Error>> {
    let start = Instant::now();
    let (python, method) = validate(o)?;
    let root = DataRoot::new(o.data_dir.as_deref());
    let family = MnistFamily::Mnist;
    let train = family.load(Split::Train, &root)?;
    let images_file = format!("{}/train-images-idx3-ubyte.gz", family.dir_name());
    let data_dir = root
        .locate(&images_file, "http://yann.lecun.com/exdb/mnist/")?
        .parent()
        .expect("a file inside mnist/")
        .to_path_buf();
    std::fs::create_dir_all(&o.out)?;
    let device = bnn_burn::training_device();
    let all: Vec<usize> = (0..train.len()).collect();
    let batch = train.batch(&all, &family.normalization(), &device);
    let (images, labels): (Tensor<4>, Tensor<1, Int>) = (batch.images, batch.labels);
    let [_, c, h, w] = images.dims();
    let shape = conv_shape(Arch::LeNet5, [c, h, w], 10).with_weights(method.weights.clone());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../xcheck/perf_peers.py");
    let peer_args = vec![
        "epoch".to_string(),
        "lenet5".to_string(),
        o.threads.to_string(),
        data_dir.display().to_string(),
    ];
    let mut rounds = Vec::new();
    for round in 0..o.rounds {
        let ours = our_epoch(&method, &shape, (&images, &labels), o.seed)?;
        let text = super::run_peer_program(&python, &script, &peer_args)?;
        let peer = super::peer_number(&text, "s/epoch", &script)?;
        eprintln!(
            "[perf-epoch] round {}/{}: ours {ours:.2} s, bayesian-torch {peer:.2} s ({:.2}×)",
            round + 1,
            o.rounds,
            peer / ours
        );
        rounds.push(EpochRound {
            ours_s: ours,
            peer_s: peer,
            ratio: peer / ours,
        });
    }
    let median =
        |f: fn(&EpochRound) -> f64| super::median(&rounds.iter().map(f).collect::<Vec<_>>());
    let (ours_median_s, peer_median_s) = (median(|r| r.ours_s), median(|r| r.peer_s));
    let record = EpochRecord {
        options: o.clone(),
        ours: format!(
            "{} on the strided LeNet5 (bnn-burn, fused kernels)",
            method.name
        ),
        peer: "bayesian-torch mean-field LeNet5 (Conv2dReparameterization, \
               LinearReparameterization)"
            .into(),
        images: train.len(),
        rounds,
        ours_median_s,
        peer_median_s,
        ratio: peer_median_s / ours_median_s,
        git_revision: crate::experiment::git_revision(),
        wall_seconds: start.elapsed().as_secs_f64(),
    };
    let json = serde_json::to_string_pretty(&record)?;
    std::fs::write(o.out.join("perf-epoch.json"), json)?;
    std::fs::write(o.out.join("perf-epoch.md"), report(&record))?;
    Ok(record)
}

/// One epoch of `method` from fresh weights, its training seconds.
fn our_epoch(
    method: &Method,
    shape: &bnn_burn::nets::ConvNetConfig,
    (images, labels): (&Tensor<4>, &Tensor<1, Int>),
    seed: u64,
) -> Result<f64, Box<dyn Error>> {
    let config = TrainConfig::new(1)
        .with_batch_size(100)
        .with_learning_rate(1e-3)
        .with_seed(seed);
    let build = |d: &Device| method.with_moments(shape.init(Categorical, d)?);
    let data = (images.clone(), labels.clone());
    let trainer = method.trainer(&config)?;
    let (_, report) = trainer.build_and_fit(build, data)?;
    Ok(report.seconds)
}

/// The Markdown report of a run.
pub fn report(r: &EpochRecord) -> String {
    let mut md = format!(
        "# One MNIST epoch\n\n{} images, batch 100, Adam 10⁻³; {} rounds, ours then the peer's \
         in each.\n\n| | seconds per epoch (median) | rounds |\n|---|---:|---|\n",
        r.images,
        r.rounds.len()
    );
    let list = |f: fn(&EpochRound) -> f64| {
        r.rounds
            .iter()
            .map(|x| format!("{:.2}", f(x)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    md += &format!(
        "| {} | {:.2} | {} |\n",
        r.ours,
        r.ours_median_s,
        list(|x| x.ours_s)
    );
    md += &format!(
        "| {} | {:.2} | {} |\n",
        r.peer,
        r.peer_median_s,
        list(|x| x.peer_s)
    );
    md += &format!(
        "\nbayesian-torch ÷ ours: {:.2} (per round: {}).\n",
        r.ratio,
        list(|x| x.ratio)
    );
    md
}
