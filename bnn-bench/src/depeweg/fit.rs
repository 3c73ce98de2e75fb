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
        noise_std: noise * y_std,
        wide,
    })
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
