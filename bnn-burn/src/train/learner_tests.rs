use super::*;
use crate::likelihood::{Categorical, GaussianLikelihood, GaussianLikelihoodConfig};
use crate::nets::{Classifier, MlpConfig, Regressor};
use crate::objective::ElboConfig;
use crate::testing::{seeded, to_vec};
use crate::train::{OptimizerConfig, TrainConfig, train};
use burn::module::Module;
use burn::optim::lr_scheduler::constant::ConstantLr;
use burn::tensor::{Device, Distribution, Tensor};
use burn::train::logger::InMemoryMetricLogger;
use burn::train::metric::{AccuracyMetric, Adaptor, LossInput, LossMetric};
use burn::train::{ExecutionStrategy, Learner, MultiDeviceOptim, SupervisedTraining};

fn regressor(device: &Device) -> Regressor {
    let likelihood: GaussianLikelihood = GaussianLikelihoodConfig::new()
        .with_noise_std(0.5)
        .init(device)
        .unwrap();
    MlpConfig::new(1, vec![32], 1)
        .init(likelihood, device)
        .unwrap()
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("bnn-burn-learner-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

type Training<M> = SupervisedTraining<Learnable<M>>;

/// Trains with burn-train's Learner under `strategy`, minibatches of `batch` shuffled by `seed`,
/// Adam at 10⁻², the metrics `metrics` registers; returns the trained model.
#[allow(clippy::too_many_arguments)]
fn learn<M, D>(
    learnable: Learnable<M>,
    (data, valid): (D, D),
    epochs: usize,
    strategy: ExecutionStrategy,
    (batch, seed): (usize, u64),
    name: &str,
    metrics: impl FnOnce(Training<M>) -> Training<M>,
) -> M
where
    M: Model + ModuleDisplay + Predict<Input = <M as Model>::Input>,
    M::Prediction: Validation<<M as Model>::Target>,
    <M as Model>::Input: Send + std::fmt::Debug + 'static,
    <M as Model>::Target: Send + std::fmt::Debug + 'static,
    D: TrainData<Input = <M as Model>::Input, Target = <M as Model>::Target>
        + Send
        + Sync
        + 'static,
{
    let (train_loader, valid_loader) = learnable.loaders(data, valid, batch, seed).unwrap();
    let dir = temp_dir(name);
    let training = SupervisedTraining::new(&dir, train_loader, valid_loader)
        .num_epochs(epochs)
        .with_training_strategy(strategy.into())
        .with_metric_logger(InMemoryMetricLogger::new())
        .with_application_logger(None);
    let result = metrics(training).launch(Learner::new(
        learnable,
        OptimizerConfig::adam().init(Kernels::Fused),
        ConstantLr::new(1e-2),
    ));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(result.error.is_none(), "{:?}", result.error);
    result.model.model
}

/// The regression runs' dashboard.
fn regression_metrics<M>(training: Training<M>) -> Training<M>
where
    Learnable<M>: burn::train::LearnerModel,
    M: Model + ModuleDisplay,
    <Learnable<M> as TrainStep>::Output: Adaptor<LossInput> + Adaptor<TermsInput>,
    <Learnable<M> as InferenceStep>::Output: Adaptor<TermsInput>,
{
    training
        .metric_train_numeric(LossMetric::new())
        .metric_train_numeric(TermMetric::nll())
        .metric_train_numeric(TermMetric::kl())
        .metric_valid_numeric(TermMetric::nll())
}

const EPOCHS: usize = 200;
const SAMPLES: usize = 4;
const SEEDS: u64 = 4;

/// The ELBOs on the training data of the library's loop, the Learner on one device and the
/// Learner on two devices, `SEEDS` runs each from the same initial parameters (seeds differ
/// in shuffling and noise), with the ELBO of the initial parameters.
fn three_paths() -> [Vec<f64>; 3] {
    let device = crate::testing::test_device().autodiff();
    let guard = seeded(&device, 11);
    let data = crate::testing::sine(&device, 256);
    let valid = crate::testing::sine(&device, 64);
    let initial = regressor(&device);
    let config = TrainConfig::new(EPOCHS)
        .with_batch_size(32)
        .with_learning_rate(1e-2)
        .with_train_samples(SAMPLES)
        .with_progress(false);
    let plain = |(x, y): (Tensor<2>, Tensor<2>)| (x.inner(), y.inner());
    let mut paths = [Vec::new(), Vec::new(), Vec::new()];
    for seed in 0..SEEDS {
        let (m, _) = train(
            initial.clone(),
            data.clone(),
            &config.clone().with_seed(seed),
        )
        .unwrap();
        paths[0].push(crate::testing::full_batch_elbo(
            &m.valid(),
            plain(data.clone()),
            256,
        ));
        // The Learner's training steps key their own noise; its validation predictive draws
        // from the device's generator, on this thread.
        let config = LearnableConfig::new()
            .with_seed(seed)
            .with_train_samples(SAMPLES);
        let learnable = config.init(initial.clone()).unwrap();
        let single = ExecutionStrategy::single(device.clone());
        let m = learn(
            learnable,
            (data.clone(), valid.clone()),
            EPOCHS,
            single,
            (32, seed),
            "single",
            regression_metrics,
        );
        paths[1].push(crate::testing::full_batch_elbo(
            &m,
            plain(data.clone()),
            256,
        ));
        let devices = vec![device.clone(), device.clone()];
        let learnable = config.init(initial.clone()).unwrap().with_devices(&devices);
        let counter = learnable.clone();
        let multi = ExecutionStrategy::multi(devices, MultiDeviceOptim::OptimMainDevice);
        let m = learn(
            learnable,
            (data.clone(), valid.clone()),
            EPOCHS,
            multi,
            (16, seed),
            "multi",
            regression_metrics,
        );
        // 16 minibatches an epoch, each stepped once, on one of the two devices.
        assert_eq!(counter.steps(), 16 * EPOCHS as u64);
        paths[2].push(crate::testing::full_batch_elbo(
            &m,
            plain(data.clone()),
            256,
        ));
    }
    drop(guard);
    paths
}

/// The Learner and the library's loop minimise the same ELBO with the same optimiser, learning
/// rate and rows per optimiser step, from the same initial parameters: on one device (batches
/// of 32) or two (burn's `MultiDevice` strategy, batches of 16 on each, their gradients reduced
/// into one step; here the test device twice, whose threads, gradient transfer and `step_multi`
/// are the code that runs on two GPUs), the mean final ELBO over 4 seeds agrees with the
/// loop's within 4 combined standard errors (the seeds' spread, about 0.05 nats per example
/// after 200 epochs of 4-draw steps, is Adam's jitter around the optimum).
#[test]
fn the_learner_reaches_the_loops_elbo_on_one_device_or_two() {
    let paths = three_paths();
    let m = crate::testing::sample_moments(&paths[0]);
    let (ours, ours_se) = (m.mean, m.mean_se);
    for path in [1, 2] {
        let m = crate::testing::sample_moments(&paths[path]);
        let (theirs, theirs_se) = (m.mean, m.mean_se);
        let bound = 4.0 * (ours_se.powi(2) + theirs_se.powi(2)).sqrt();
        assert!(
            (theirs - ours).abs() < bound,
            "path {path}: the Learner's ELBO {:?} vs the loop's {:?}",
            paths[path],
            paths[0]
        );
    }
}

/// No two (device, step) pairs share a noise key, and a key depends only on the seed, the
/// device's place in the strategy and its own step count.
#[test]
fn noise_keys_never_repeat_across_devices_or_steps() {
    let mut keys = std::collections::HashSet::new();
    for ordinal in 0..4 {
        for step in 0..10_000 {
            assert!(keys.insert(noise_key(7, ordinal, step)));
        }
    }
    assert_eq!(noise_key(7, 1, 5), noise_key(7, 1, 5));
    assert_ne!(noise_key(7, 1, 5), noise_key(8, 1, 5));
}

/// A classifier on the Learner with burn's accuracy and the library's ECE and NLL on its
/// dashboard: two Gaussian blobs, which it must separate.
#[test]
fn a_classifier_trains_with_accuracy_and_calibration_metrics() {
    let device = crate::testing::test_device().autodiff();
    let guard = seeded(&device, 31);
    let blobs = |n: usize| {
        let labels: Vec<usize> = (0..n).map(|i| i % 2).collect();
        let centres: Vec<f32> = labels
            .iter()
            .map(|&l| if l == 0 { -1.5 } else { 1.5 })
            .collect();
        let centre = Tensor::<1>::from_floats(centres.as_slice(), &device).reshape([n, 1]);
        let x = Tensor::<2>::random([n, 2], Distribution::Normal(0.0, 1.0), &device) + centre;
        (x, crate::host::labels(&labels, &device))
    };
    let (train_data, valid_data) = (blobs(256), blobs(128));
    let model: Classifier = MlpConfig::new(2, vec![16], 2)
        .init(Categorical, &device)
        .unwrap();
    let learnable = LearnableConfig::new().init(model).unwrap();
    let model = learn(
        learnable,
        (train_data, valid_data.clone()),
        15,
        ExecutionStrategy::single(device.clone()),
        (32, 0),
        "classifier",
        |training| {
            training
                .metric_train_numeric(LossMetric::new())
                .metric_valid_numeric(AccuracyMetric::new())
                .metric_valid_numeric(EceMetric::new())
                .metric_valid_numeric(TermMetric::nll())
        },
    );
    drop(guard);
    let _guard = seeded(&device, 32);
    let (x, labels) = valid_data;
    let prediction = model.predict(x.inner(), PredictMode::Samples(32)).unwrap();
    let accuracy = crate::testing::accuracy(prediction.predicted_class(), labels.inner());
    // The blobs' Bayes accuracy is Φ(1.5) = 0.93; 128 rows give a standard error of 0.02.
    assert!(accuracy > 0.85, "accuracy {accuracy}");
}

/// An objective whose KL weight changes with the epoch needs the epoch's length.
#[test]
fn an_annealed_objective_needs_the_epoch_length() {
    let device = crate::testing::test_device().autodiff();
    let _guard = seeded(&device, 41);
    let annealed = || {
        ElboConfig::new()
            .with_kl_schedule(crate::objective::KlSchedule::Anneal { epochs: 10 })
            .init()
            .unwrap()
    };
    let err = LearnableConfig::new()
        .init_with(regressor(&device), annealed())
        .unwrap_err();
    assert_eq!(err.field, "batches_per_epoch");
    let learnable = LearnableConfig::new()
        .with_batches_per_epoch(Some(4))
        .init_with(regressor(&device), annealed())
        .unwrap();
    assert_eq!(learnable.epoch(), 0);
    learnable.setup.counters[0].store(9, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(learnable.epoch(), 2);
}

/// BNN+LV on the Learner: its latent table moves by its own sparse Adam (each row's step count
/// is the number of minibatches that held it) and only by it (after two steps no mean has
/// moved more than two of its steps, `scale·lr·N/B` each, which a dense Adam step of `lr` on
/// top would exceed).
#[test]
fn bnn_lv_steps_its_latents_with_its_own_optimiser_on_the_learner() {
    use crate::layers::{Estimator, WeightConfig};
    use crate::nets::{BnnLvConfig, LatentRegressor};
    use crate::posterior::PosteriorConfig;
    let device = crate::testing::test_device().autodiff();
    let guard = seeded(&device, 51);
    let (x, y) = crate::testing::sine(&device, 32);
    let x = Tensor::cat(vec![x.clone(), x * 0.5], 1);
    let weights = WeightConfig::of(PosteriorConfig::mean_field())
        .with_estimator(Estimator::Reparameterization);
    let config = BnnLvConfig::new(MlpConfig::new(2, vec![8], 1).with_weights(weights));
    let step = config.latent.learning_rate_scale * 1e-2 * 32.0 / 8.0;
    let model: LatentRegressor = config.init_regressor(32, &device).unwrap();
    let table = |m: &LatentRegressor| m.latents.table().expect("a latent table").clone();
    let before = to_vec(table(&model).mean.val());
    let learnable = LearnableConfig::new().init(model).unwrap();
    let trained = learn(
        learnable,
        ((x.clone(), y.clone()), (x, y)),
        2,
        ExecutionStrategy::single(device.clone()),
        (8, 0),
        "bnn-lv",
        |training| training.metric_train_numeric(LossMetric::new()),
    );
    drop(guard);
    let after = table(&trained);
    assert_eq!(after.adam_state().counts, vec![2; 32]);
    let moved = to_vec(after.mean.val())
        .iter()
        .zip(&before)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(
        moved > step && moved <= 2.0 * step * 1.001,
        "largest move of a latent mean: {moved}; two steps: {}",
        2.0 * step
    );
}

/// burn's checkpointers save the model and the fused Adam at every epoch; a run resumed at an
/// epoch starts from the model saved there (resumed with no epoch left, it predicts exactly as
/// the run that saved it) and trains on; burn's early stopping ends a run whose validation NLL
/// stops improving (a learning rate of 0) long before its last epoch.
#[test]
fn the_learner_checkpoints_resumes_and_stops_early() {
    use burn::train::metric::store::{Aggregate, Direction, Split};
    use burn::train::{MetricEarlyStoppingStrategy, StoppingCondition};
    let device = crate::testing::test_device().autodiff();
    let _guard = seeded(&device, 12);
    let data = crate::testing::sine(&device, 128);
    let valid = crate::testing::sine(&device, 32);
    let initial = regressor(&device);
    let dir = temp_dir("checkpoints");
    let run = |model: Regressor, epochs: usize, resume: Option<usize>, lr: f64, early: bool| {
        let learnable = LearnableConfig::new().with_seed(3).init(model).unwrap();
        let (train_loader, valid_loader) = learnable
            .loaders(data.clone(), valid.clone(), 32, 3)
            .unwrap();
        let mut training = SupervisedTraining::new(&dir, train_loader, valid_loader)
            .num_epochs(epochs)
            .with_default_checkpointers()
            .with_application_logger(None)
            .metric_train_numeric(LossMetric::new())
            .metric_valid_numeric(TermMetric::nll());
        if let Some(epoch) = resume {
            training = training.checkpoint(epoch);
        }
        if early {
            training = training.early_stopping(MetricEarlyStoppingStrategy::new(
                &TermMetric::nll(),
                Aggregate::Mean,
                Direction::Lowest,
                Split::Valid,
                StoppingCondition::NoImprovementSince { n_epochs: 1 },
            ));
        }
        let result = training.launch(Learner::new(
            learnable,
            OptimizerConfig::adam().init(Kernels::Fused),
            ConstantLr::new(lr),
        ));
        assert!(result.error.is_none(), "{:?}", result.error);
        result.model.model
    };
    let saved = |name: &str, epoch: usize| {
        dir.join("checkpoint")
            .join(format!("{name}-{epoch}.bpk"))
            .exists()
    };
    let means = |m: &Regressor| {
        let x = Tensor::<2>::from_floats([[-1.0], [0.5], [1.5]], &device).inner();
        to_vec(m.predict(x, PredictMode::Moments).unwrap().mean())
    };

    let trained = run(initial.clone(), 3, None, 1e-2, false);
    assert!(saved("model", 3) && saved("optim", 3) && saved("scheduler", 3));
    // Resumed at its last epoch from other initial parameters: the saved model, exactly.
    let other = regressor(&device);
    assert_ne!(means(&other.valid()), means(&trained));
    let resumed = run(other.clone(), 3, Some(3), 1e-2, false);
    assert_eq!(means(&resumed), means(&trained));
    // Resumed and trained on: two more epochs from the saved model and optimiser.
    let on = run(other, 5, Some(3), 1e-2, false);
    assert!(saved("model", 5));
    assert_ne!(means(&on), means(&trained));

    let _ = std::fs::remove_dir_all(&dir);
    run(initial, 40, None, 0.0, true);
    let epochs = (1..=40).filter(|&e| saved("model", e)).max().unwrap();
    assert!(epochs < 40, "early stopping let all {epochs} epochs run");
    let _ = std::fs::remove_dir_all(&dir);
}
