//! One fit: a BNN or BNN+LV by black-box α on a split, scored by its test mixture.

use super::*;

/// The test mixture of [`run`]'s second LL estimate has this many times the budget's draws.
pub const WIDE_DRAWS_FACTOR: usize = 25;

/// One fit's scores, in original units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FitScores {
    /// Test LL per point of the budget's `test_draws`-draw mixture.
    pub test_ll: f64,
    /// Test RMSE of the predictive mean (the same draws).
    pub test_rmse: f64,
    /// Fraction of test targets inside their central 90 % predictive interval (the same draws).
    pub coverage_90: f64,
    /// The same after split-conformal calibration on half the test rows
    /// ([`bnn_burn::predict::RegressionScores::conformal_coverage_90`]).
    pub conformal_coverage_90: Option<f64>,
    /// Learned noise std `√Σ`.
    pub noise_std: f64,
    /// `Some((T, LL))`: the test LL of the mixture of `T` draws of the same trained net, its
    /// first `test_draws` those of `test_ll` (`ln (1/T) Σ_t p_t(y)` is biased low by an amount
    /// that shrinks with `T`, most for spiky predictives such as wine's).
    pub wide: Option<(usize, f64)>,
}

/// Fits `model` on one split and scores the test rows. `train`, `test` are in original units;
/// the standardisation is fitted here on `train` ([`fit_standardised`]); `wide_draws > 0` adds
/// the LL of a mixture of that many draws ([`FitScores::wide`]).
///
/// # Errors
/// Shapes, a diverged fit (the trainer's check), a non-finite score.
pub fn fit_and_score(
    model: &DepewegModel,
    hidden: &[usize],
    train: &RegressionData,
    test: &RegressionData,
    budget: &DepewegBudget,
    seed: u64,
    wide_draws: usize,
) -> Result<FitScores, Box<dyn Error>> {
    let (sx, sy) = train.fit_standardizers()?;
    fit_standardised(
        model,
        hidden,
        &train.standardized(&sx, &sy)?,
        &sx.transform(&test.x),
        &sy.transform(&test.y),
        sy.std[0],
        budget,
        seed,
        wide_draws,
    )
}

/// Fits `model` (a 2-layer-or-other MLP of `hidden` ReLU units with Depeweg's weights,
/// [`depeweg_weights`]; with a latent input when `model.latent`) by black-box α on standardised
/// training rows, and scores standardised test rows by the `budget.test_draws`-draw mixture.
/// `y_std` is the target's training std: LL, RMSE and noise std come back in original units.
/// `wide_draws > budget.test_draws` adds the LL of the mixture of `wide_draws` draws, the first
/// `budget.test_draws` of them the budget's, the rest drawn after in chunks.
///
/// # Errors
/// Shapes, a diverged fit (the trainer's check), a non-finite score.
#[allow(clippy::too_many_arguments)]
pub fn fit_standardised(
    model: &DepewegModel,
    hidden: &[usize],
    train: &RegressionData,
    test_x: &[f64],
    test_y: &[f64],
    y_std: f64,
    budget: &DepewegBudget,
    seed: u64,
    wide_draws: usize,
) -> Result<FitScores, Box<dyn Error>> {
    if model.members > 0 {
        return fit_ensemble(model, hidden, train, test_x, test_y, y_std, budget, seed);
    }
    let d = train.n_features;
    let device = training_device();
    let x = matrix(&train.x, d, &device);
    let y = matrix(&train.y, 1, &device);
    let plain = device.clone().inner();
    let xt = matrix(test_x, d, &plain);
    let yt = matrix(test_y, 1, &plain);
    let n = train.len();
    let config = TrainConfig::new(budget.epochs)
        .with_batch_size(n.div_ceil(budget.batches).max(1))
        .with_learning_rate(budget.learning_rate)
        .with_train_samples(budget.train_samples)
        .with_seed(seed)
        .with_progress(false);
    let objective = AlphaConfig::new().with_alpha(model.alpha).init()?;
    let mlp = MlpConfig::new(d, hidden.to_vec(), 1).with_weights(depeweg_weights(1.0));
    let draws = budget.test_draws;
    // The budget's mixture, then (when asked) the wide one: its first draws those, the rest
    // drawn after in chunks and accumulated.
    type Scores = (RegressionScores, Option<(usize, f64)>);
    let score = |net: &dyn Predict<Input = Tensor<2>, Prediction = GaussianPrediction>|
     -> Result<Scores, Box<dyn Error>> {
        let mut acc = MixtureAccumulator::new(yt.clone());
        let add = |k: usize, acc: &mut MixtureAccumulator| -> Result<(), Box<dyn Error>> {
            let GaussianPrediction::Samples(s) = net.predict(xt.clone(), PredictMode::Samples(k))?
            else {
                return Err("a sampled prediction returned moments".into());
            };
            acc.add(&s);
            Ok(())
        };
        let rest: Vec<usize> = wide_chunks(wide_draws, draws, test_y.len(), hidden, d).collect();
        // The budget's mixture in one pass where it fits (as it always ran: one pass draws
        // otherwise than chunks do), else in chunks.
        let widest = hidden.iter().copied().chain([d]).max().unwrap_or(1);
        let one_pass = draws.saturating_mul(test_y.len()).saturating_mul(widest);
        let scores = if one_pass <= ONE_PASS_ELEMENTS {
            let first = net.predict(xt.clone(), PredictMode::Samples(draws))?;
            let scores = first.scores(yt.clone(), &[y_std]);
            if !rest.is_empty() {
                let GaussianPrediction::Samples(s) = first else {
                    return Err("a sampled prediction returned moments".into());
                };
                acc.add(&s);
            }
            scores
        } else {
            for k in wide_chunks(draws, 0, test_y.len(), hidden, d) {
                add(k, &mut acc)?;
            }
            acc.scores(&[y_std])
        };
        if rest.is_empty() {
            return Ok((scores, None));
        }
        for k in rest {
            add(k, &mut acc)?;
        }
        Ok((scores, Some((acc.draws(), acc.scores(&[y_std]).log_likelihood))))
    };
    let ((scores, wide), noise) = if model.latent {
        let build = |d: &burn::tensor::Device| BnnLvConfig::new(mlp).init_regressor(n, d);
        let (net, _) = Trainer::new(config)
            .with_objective(objective)
            .build_and_fit(build, (x, y))?;
        let net = net.valid();
        (score(&net)?, to_vec(net.net.likelihood.noise_std())[0])
    } else {
        let (net, _) = Trainer::new(config)
            .with_objective(objective)
            .build_and_fit(|d| mlp.init_regressor(d), (x, y))?;
        let net = net.valid();
        (score(&net)?, to_vec(net.likelihood.noise_std())[0])
    };
    Ok(FitScores {
        test_ll: scores.log_likelihood,
        test_rmse: scores.rmse,
        coverage_90: scores.coverage_90,
        conformal_coverage_90: scores.conformal_coverage_90,
        noise_std: noise * y_std,
        wide,
    })
}

/// Adam's learning rate of the MLPs (§5.2: 10⁻⁴ for the MLP and the ensemble).
pub const ENSEMBLE_LEARNING_RATE: f64 = 1e-4;

/// Epochs without a better validation MSE before a member stops (the thesis gives none).
pub const ENSEMBLE_PATIENCE: usize = 100;

/// Fraction of a member's training rows it validates on (the thesis gives none).
pub const ENSEMBLE_VALIDATION: f64 = 0.1;

/// Depeweg's MLP ensemble (eqs. 2.51–2.55): `model.members` MLPs of `hidden` ReLU units, each
/// trained on MSE (a Gaussian of fixed unit noise on the standardised targets, N(0, 1) weights)
/// by Adam at [`ENSEMBLE_LEARNING_RATE`] in minibatches of `N/budget.batches`, early-stopped on
/// its own random [`ENSEMBLE_VALIDATION`] of the rows (its seed's), and given its best
/// validation MSE as its noise variance; the test LL is the members' equal-weight mixture.
#[allow(clippy::too_many_arguments)]
fn fit_ensemble(
    model: &DepewegModel,
    hidden: &[usize],
    train: &RegressionData,
    test_x: &[f64],
    test_y: &[f64],
    y_std: f64,
    budget: &DepewegBudget,
    seed: u64,
) -> Result<FitScores, Box<dyn Error>> {
    use bnn_burn::layers::WeightConfig;

    use bnn_burn::posterior::PosteriorConfig;
    use bnn_burn::posthoc::Ensemble;
    use bnn_burn::train::EarlyStoppingConfig;
    let d = train.n_features;
    let device = training_device();
    let x = matrix(&train.x, d, &device);
    let y = matrix(&train.y, 1, &device);
    let n = train.len();
    let mlp = MlpConfig::new(d, hidden.to_vec(), 1)
        .with_weights(WeightConfig::of(PosteriorConfig::point()));
    let mut noise = Vec::with_capacity(model.members);
    let ensemble = Ensemble::train(model.members, |m| -> Result<_, Box<dyn Error>> {
        let config = TrainConfig::new(budget.epochs)
            .with_batch_size(n.div_ceil(budget.batches).max(1))
            .with_learning_rate(ENSEMBLE_LEARNING_RATE)
            .with_seed(experiment::derive(seed, &["member"], m as u64))
            .with_early_stopping(Some(
                EarlyStoppingConfig::new()
                    .with_validation_fraction(ENSEMBLE_VALIDATION)
                    .with_patience(ENSEMBLE_PATIENCE),
            ))
            .with_progress(false);
        let (net, mse) = early_stopped_mlp(&mlp, (x.clone(), y.clone()), config)?;
        noise.push(mse.max(0.0).sqrt() * y_std);
        Ok(net.valid())
    })
    .map_err(|(m, e)| format!("ensemble member {m}: {e}"))?;
    let plain = device.inner();
    let xt = matrix(test_x, d, &plain);
    let yt = matrix(test_y, 1, &plain);
    let scores = ensemble
        .predict(xt, PredictMode::Samples(1))?
        .scores(yt, &[y_std]);
    Ok(FitScores {
        test_ll: scores.log_likelihood,
        test_rmse: scores.rmse,
        coverage_90: scores.coverage_90,
        conformal_coverage_90: scores.conformal_coverage_90,
        noise_std: bnn_burn::metrics::mean(&noise),
        wide: None,
    })
}

/// A point MLP trained under unit noise with early stopping (`config` holds the validation
/// split), then given its validation error as fixed noise (the MLP baselines of Depeweg 2019
/// §2.4.1 and eq. 7.26). The validation NLL under unit noise on `d` outputs is
/// `(d/2) ln 2π + ½ Σ_j MSE_j`: every output gets `√(mean_j MSE_j)`. Returns the net and
/// that mean MSE (not clamped).
///
/// # Errors
/// The trainer's, or a `config` without early stopping.
pub(crate) fn early_stopped_mlp(
    mlp: &MlpConfig,
    data: (Tensor<2>, Tensor<2>),
    config: TrainConfig,
) -> Result<(bnn_burn::nets::Regressor, f64), Box<dyn Error>> {
    use bnn_burn::likelihood::{GaussianLikelihoodConfig, NoiseFit};
    let d = mlp.d_output;
    let noise = |std: f64, device: &burn::tensor::Device| {
        GaussianLikelihoodConfig::new()
            .with_d_output(d)
            .with_noise_std(std)
            .with_fit(NoiseFit::Fixed)
            .init(device)
    };
    let build = |device: &burn::tensor::Device| mlp.init(noise(1.0, device)?, device);
    let (mut net, report) = Trainer::new(config).build_and_fit(build, data)?;
    let val = report.history[report.best_epoch]
        .val_nll
        .ok_or("an MLP trained without its validation split")?;
    let mse = 2.0 * (val - 0.5 * d as f64 * (2.0 * std::f64::consts::PI).ln()) / d as f64;
    let device = net.devices()[0].clone();
    net.likelihood = noise(mse.max(1e-12).sqrt(), &device)?;
    Ok((net, mse))
}

/// Activations of the widest layer a single test pass of the budget's draws may hold (1.6 GB
/// of `f32`); above it the draws go through in chunks.
const ONE_PASS_ELEMENTS: usize = 400_000_000;

/// The chunk sizes of the draws after the first `first` up to `wide` in all, each holding at
/// most `PASS_CHUNK_ELEMENTS` activations of the widest layer over `rows` test rows
/// ([`crate::uci::draws_per_chunk`]).
fn wide_chunks(
    wide: usize,
    first: usize,
    rows: usize,
    hidden: &[usize],
    d: usize,
) -> impl Iterator<Item = usize> {
    let widest = hidden.iter().copied().chain([d]).max().unwrap_or(1);
    let chunk = crate::uci::draws_per_chunk(widest, rows);
    let rest = wide.saturating_sub(first);
    (0..rest.div_ceil(chunk)).map(move |i| chunk.min(rest - i * chunk))
}
