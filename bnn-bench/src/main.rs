//! `bnn-bench`: the one front door for the experiments of bnn-burn.

mod quickstart;

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
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Quickstart { out, seed, epochs } => quickstart::run(&out, seed, epochs),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
