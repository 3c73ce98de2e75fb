//! Chapter example, Farquhar (2022) ch. 3, "Liberty or depth": does depth make mean-field
//! enough? Two small experiments of the chapter on built-in data:
//! 1. Iris (Fig. 3.11): a full-covariance Gaussian over every weight of an MLP, correlations
//!    across layers included, against a diagonal one, at one and two hidden layers.
//! 2. make_moons (Fig. 3.2): NUTS samples of ReLU networks at one and three hidden layers, and
//!    how far they are from mean-field (`E_KL`, beside its floor on shuffled draws).
//!
//! `cargo run --release --example farquhar_ch3_liberty_or_depth [-- --seeds 4 --draws 200]`
//! (the bench's `iris-covariance` and `moons-hmc` harnesses run the full protocols).

use bnn_burn::host::{HostNormals, matrix, to_vec};
use bnn_burn::inference::{
    BnnTarget, FlatFamily, FlatPosterior, LogDensity, McmcConfig, SampledPosterior, Sampler,
    ViConfig, ViTrainer, dependence, flat, sample,
};
use bnn_burn::layers::{Activation, FlatLayout, WeightConfig};
use bnn_burn::likelihood::Categorical;
use bnn_burn::nets::{Classifier, MlpConfig};
use bnn_burn::posterior::{FullRankConfig, MeanFieldConfig, PosteriorConfig, ScaleInit};
use bnn_burn::posthoc::{NetworkPosterior, predict_network};
use bnn_burn::predict::PredictMode;
use bnn_burn::train::OptimizerConfig;
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor};
use std::error::Error;

fn arg(name: &str, default: usize) -> Result<usize, String> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .filter(|&v| v > 0)
            .ok_or_else(|| format!("{name}: a whole number > 0")),
    }
}

/// An MLP of point weights (the families live over its flat weights), the prior `N(0, 1)`.
fn mlp(
    d_in: usize,
    hidden: Vec<usize>,
    classes: usize,
    activation: Activation,
    device: &Device,
) -> Result<Classifier, Box<dyn Error>> {
    Ok(MlpConfig::new(d_in, hidden, classes)
        .with_weights(WeightConfig::of(PosteriorConfig::point()))
        .with_activation(activation)
        .init(Categorical, device)?)
}

/// Labels as an integer tensor.
fn labels(l: &[usize], device: &Device) -> Tensor<1, Int> {
    let l: Vec<i64> = l.iter().map(|&v| v as i64).collect();
    Tensor::from_ints(l.as_slice(), device)
}

/// Test cross-entropy and accuracy of a network posterior from `draws` draws.
fn scores<P: NetworkPosterior<Likelihood = Categorical>>(
    posterior: &P,
    draws: usize,
    x: Tensor<2>,
    y: Tensor<1, Int>,
) -> Result<(f64, f64), Box<dyn Error>>
where
    P::Body: bnn_burn::nets::Body<Input = Tensor<2>>,
{
    let p = predict_network(posterior, x, PredictMode::Samples(draws))?;
    let ce = -to_vec(p.log_prob(y.clone()).mean())[0];
    let acc = to_vec(p.predicted_class().equal(y).float().mean())[0];
    Ok((ce, acc))
}

/// Trains `q` over `target`'s weights for `epochs` (AMSGrad 10⁻³, batches of 16, one draw).
fn train<Q: FlatFamily>(
    target: &BnnTarget<bnn_burn::nets::MlpBody, Categorical>,
    q: Q,
    epochs: usize,
    seed: u64,
) -> Result<Q, Box<dyn Error>> {
    use rand::SeedableRng;
    let config = ViConfig::new()
        .with_samples(1)
        .with_learning_rate(1e-3)
        .with_optimizer(OptimizerConfig::ams_grad())
        .with_seed(seed);
    let mut trainer = ViTrainer::new(q, &config)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for _ in 0..epochs {
        for batch in target.epoch(16, &mut rng) {
            trainer.step(&batch)?;
        }
    }
    Ok(trainer.finish()?.family)
}

fn iris(seeds: usize) -> Result<(), Box<dyn Error>> {
    println!("1. Iris: full- against diagonal-covariance VI (Farquhar Fig. 3.11)\n");
    let (train_set, test_set) = bnn_datasets::iris::iris_split(100, 0)?;
    let device = bnn_burn::training_device();
    let inner = bnn_burn::device();
    let (xt, yt) = (
        matrix(&test_set.x, 4, &inner),
        labels(&test_set.labels, &inner),
    );
    println!(
        "{:>6} {:>9} {:>8} {:>22} {:>11}",
        "layers", "family", "weights", "test CE (best half)", "accuracy"
    );
    for depth in [1, 2] {
        for family in ["diagonal", "full"] {
            let mut results = Vec::new();
            for seed in 0..seeds as u64 {
                device.seed(seed);
                let net = mlp(
                    4,
                    vec![4; depth],
                    3,
                    Activation::LeakyRelu { slope: 0.2 },
                    &device,
                )?;
                let x = matrix(&train_set.x, 4, &device);
                let target = BnnTarget::new(net, x, labels(&train_set.labels, &device))?;
                let mean = FlatLayout::flatten(target.net().mean_draw()).reshape([target.dim()]);
                let scale = ScaleInit::new().with_rho(-6.0).with_rho_std(0.5);
                let net = target.net().valid();
                let score = match family {
                    "diagonal" => {
                        let q = flat(&MeanFieldConfig::new().with_scale(scale), mean)?;
                        let q = train(&target, q, 300, seed)?.valid();
                        scores(&FlatPosterior::new(net, q)?, 100, xt.clone(), yt.clone())?
                    }
                    _ => {
                        let q = flat(&FullRankConfig::new().with_scale(scale), mean)?;
                        let q = train(&target, q, 300, seed)?.valid();
                        scores(&FlatPosterior::new(net, q)?, 100, xt.clone(), yt.clone())?
                    }
                };
                results.push(score);
            }
            // As the thesis: some initialisations fail to train; keep the better half.
            results.sort_by(|a, b| a.0.total_cmp(&b.0));
            let kept = &results[..results.len().div_ceil(2)];
            let n = kept.len() as f64;
            let ce = kept.iter().map(|r| r.0).sum::<f64>() / n;
            let acc = kept.iter().map(|r| r.1).sum::<f64>() / n;
            let weights = 4 * 4 + 4 + (depth - 1) * 20 + 4 * 3 + 3;
            println!(
                "{depth:>6} {family:>9} {weights:>8} {ce:>22.3} {:>10.1}%",
                100.0 * acc
            );
        }
    }
    println!(
        "\nThe thesis: the full covariance predicts better at one hidden layer, not from two on.\n"
    );
    Ok(())
}

fn moons(draws: usize) -> Result<(), Box<dyn Error>> {
    println!("2. make_moons: how mean-field are NUTS samples? (Farquhar Fig. 3.2)\n");
    let device = bnn_burn::training_device();
    let inner = bnn_burn::device();
    let data = |n, seed| {
        let d = bnn_datasets::toy::two_moons(n, 0.1, seed);
        let x: Vec<f64> = d.x.iter().flat_map(|p| [p[0], p[1]]).collect();
        (x, d.label)
    };
    let (x, y) = data(300, 0);
    let (xt, yt) = data(500, 1);
    println!(
        "{:>6} {:>6} {:>8} {:>9} {:>11} {:>7} {:>14}",
        "layers", "width", "weights", "accuracy", "acceptance", "max R̂", "E_KL (floor)"
    );
    // About 200 non-bias weights each: (L − 1)w² + 4w ≈ 200.
    for (depth, width) in [(1, 50), (3, 9)] {
        device.seed(7);
        let net = mlp(2, vec![width; depth], 2, Activation::Relu, &device)?;
        let target = BnnTarget::new(net, matrix(&x, 2, &device), labels(&y, &device))?;
        let config = McmcConfig::new()
            .with_sampler(Sampler::Nuts { max_depth: 6 })
            .with_warmup(draws)
            .with_draws(draws)
            .with_chains(2)
            .with_seed(7);
        let run = sample(&target, &config, Some(&target.current()))?;
        let pooled = run.pooled();
        let posterior = SampledPosterior::new(target.net().valid(), &pooled)?;
        let (_, acc) = scores(
            &posterior,
            pooled.len(),
            matrix(&xt, 2, &inner),
            labels(&yt, &inner),
        )?;
        let rhat = run.summary().iter().map(|s| s.rhat).fold(0.0, f64::max);
        let block: Vec<usize> = (0..20).map(|i| i * target.dim() / 20).collect();
        // Per chain, then averaged: two chains in two modes are not one dependent Gaussian.
        let mut rng = HostNormals::new(7);
        let (mut e_kl, mut floor) = (0.0, 0.0);
        for chain in &run.chains {
            let d = dependence(&chain.draws, &block, &mut rng)?;
            e_kl += d.e_kl / run.chains.len() as f64;
            floor += d.e_kl_null / run.chains.len() as f64;
        }
        println!(
            "{depth:>6} {width:>6} {:>8} {:>8.1}% {:>10.1}% {rhat:>7.3} {:>7.2} ({:.2})",
            target.dim(),
            100.0 * acc,
            100.0 * run.mean_accept(),
            e_kl,
            floor
        );
    }
    println!(
        "\nE_KL: KL between a Gaussian fitted to 20 weights' draws (per chain) and its \
         diagonal-precision counterpart; the floor is the same on draws shuffled per weight. \
         The thesis: large at one hidden layer, near zero from about three."
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let seeds = arg("--seeds", 4)?;
    let draws = arg("--draws", 200)?;
    if draws <= 20 {
        return Err("--draws: more than 20 (a chain's draws must outnumber a block)".into());
    }
    iris(seeds)?;
    moons(draws)
}
