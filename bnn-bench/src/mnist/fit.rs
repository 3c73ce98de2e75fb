//! Training one row and scoring it on every set.

use super::*;
use bnn_burn::host::labels as labels_on;

/// A trained classifier of either shape and either class likelihood, and how it predicts
/// (by moments for a method trained by moments, else by `samples` posterior draws).
struct Trained {
    net: Box<dyn Predict<Input = Tensor<4>, Prediction = ClassPrediction>>,
    mode: PredictMode,
    /// Images per prediction ([`images_per_chunk`]).
    chunk: usize,
}

impl Trained {
    fn predict(&self, images: Tensor<4>) -> Result<ClassPrediction, PredictError> {
        self.net.predict(images, self.mode)
    }
}

/// An MLP classifier fed flattened images.
struct Flattened<M>(M);

impl<M: Predict<Input = Tensor<2>>> Predict for Flattened<M> {
    type Input = Tensor<4>;
    type Prediction = M::Prediction;

    fn predict(&self, images: Tensor<4>, mode: PredictMode) -> Result<M::Prediction, PredictError> {
        let [b, c, h, w] = images.dims();
        self.0.predict(images.reshape([b, c * h * w]), mode)
    }
}

/// How often a row's training state is saved (and always after its last epoch).
const STATE_INTERVAL: Duration = Duration::from_secs(60);

/// A boxed classifier of flattened or whole images.
type Classifier = Box<dyn Predict<Input = Tensor<4>, Prediction = ClassPrediction>>;

/// A trained classifier, its training seconds over every process that trained it, and for a
/// method trained on a PAC-Bayes bound the bound's terms on the training images.
type Fitted = (Classifier, f64, Option<PacTrain>);

/// Rows per chunk of the PAC-Bayes bound over the training images.
const PAC_CHUNK: usize = 2_000;

/// The PAC-Bayes bound of `net` on `(x, labels)` in chunks, for a method trained on one: under
/// the training objective's settings and under the reference code's (`ln N / N`, one point's
/// KL), from 100 sampled outputs as the bench predicts.
fn pac_bounds<B, L>(
    method: &Method,
    net: &Bnn<B, L>,
    x: impl Fn(std::ops::Range<usize>) -> B::Input,
    labels: &Tensor<1, Int>,
) -> Result<Option<PacTrain>, Box<dyn Error>>
where
    B: Body,
    L: Likelihood<Target = Tensor<1, Int>, Prediction = ClassPrediction>,
{
    let TrainObjective::PacBayes(pac) = &method.objective else {
        return Ok(None);
    };
    let code = pac
        .clone()
        .with_complexity(PacComplexity::LogN)
        .with_kl(PacKl::Mean)
        .init()?;
    let n = labels.dims()[0];
    let chunks = (0..n).step_by(PAC_CHUNK).map(|start| {
        let rows = start..(start + PAC_CHUNK).min(n);
        (x(rows.clone()), labels.clone().slice(rows))
    });
    let b = net.pac_bound_chunked(chunks, &code, method.inference(), 100)?;
    let bound = pac.init()?.risk_bound(b.empirical_risk, b.kl, n);
    Ok(Some(PacTrain {
        risk: b.empirical_risk,
        kl: b.kl,
        bound,
        bound_code: b.bound,
    }))
}

/// [`PacReport`]'s terms from the training images.
#[derive(Debug, Clone, Copy)]
struct PacTrain {
    risk: f64,
    kl: f64,
    bound: f64,
    bound_code: f64,
}

/// Trains `method` as `arch` with the class likelihood `likelihood` on `(images, labels)` of
/// `classes` classes, built from the training seed ([`Trainer::build_and_fit`]), saving its
/// training state in `state` (and resuming from it) when given ([`Fitted`]).
fn fit<L>(
    arch: Arch,
    method: &Method,
    likelihood: L,
    (images, labels, classes): (Tensor<4>, Tensor<1, Int>, usize),
    config: &TrainConfig,
    state: Option<&Path>,
) -> Result<Fitted, Box<dyn Error>>
where
    L: Likelihood<Target = Tensor<1, Int>, Prediction = ClassPrediction>,
{
    fn trainer<M: Model>(
        method: &Method,
        config: &TrainConfig,
        state: Option<&Path>,
    ) -> Result<Trainer<M>, bnn_burn::ConfigError> {
        let t = method.trainer(config)?;
        Ok(match state {
            Some(dir) => t.with_resume(dir, STATE_INTERVAL),
            None => t,
        })
    }
    let [n, c, h, w] = images.dims();
    let plain = || images.clone().without_autodiff();
    let plain_labels = labels.clone().without_autodiff();
    Ok(match arch {
        Arch::Mlp => {
            let build = |d: &Device| {
                let net = MlpConfig::new(c * h * w, vec![400, 400], classes)
                    .with_weights(method.weights.clone())
                    .init(likelihood, d)?;
                method.with_moments(net)
            };
            let flat = images.clone().reshape([n, c * h * w]);
            let (m, report) =
                trainer(method, config, state)?.build_and_fit(build, (flat, labels))?;
            let m = m.valid();
            let x = |rows: std::ops::Range<usize>| {
                let b = rows.len();
                plain().slice(rows).reshape([b, c * h * w])
            };
            let pac = pac_bounds(method, &m, x, &plain_labels)?;
            (Box::new(Flattened(m)), report.seconds, pac)
        }
        Arch::LeNet5 | Arch::LeNet5Pooled | Arch::LeNet5Sensoy | Arch::Conv96 => {
            let shape = conv_shape(arch, [c, h, w], classes);
            let mut weights = method.weights.clone();
            if arch == Arch::LeNet5Sensoy {
                // Sensoy's initialiser comes with his net.
                weights.initializer = shape.dense.weights.initializer.clone();
            }
            let build =
                |d: &Device| method.with_moments(shape.with_weights(weights).init(likelihood, d)?);
            let data = (images.clone(), labels);
            let (m, report) = trainer(method, config, state)?.build_and_fit(build, data)?;
            let m = m.valid();
            let x = |rows: std::ops::Range<usize>| plain().slice(rows);
            let pac = pac_bounds(method, &m, x, &plain_labels)?;
            (Box::new(m), report.seconds, pac)
        }
    })
}

/// Epochs of SWAG's SGD phase after a MAP fit on the image sets; moments collected twice per
/// epoch after the first [`SWAG_SKIP_EPOCHS`] (20 iterates, the rank's 20 columns).
pub const SWAG_EPOCHS: usize = 12;
/// The first epochs of SWAG's SGD phase, not collected.
pub const SWAG_SKIP_EPOCHS: usize = 2;

/// A post-hoc method's model on `arch` ([`Method::posthoc`]): its MAP members trained as
/// [`fit`] trains one (member `m` from seed `seed + m`, its state in `state/member-m`), then
/// pooled (deep ensemble), continued by SGD into SWAG (pooled: MultiSWAG), or given a Laplace
/// posterior (last layer, or KFAC over every layer with the exact GGN).
fn fit_posthoc(
    arch: Arch,
    method: &Method,
    post: PostHoc,
    (images, labels, classes): (Tensor<4>, Tensor<1, Int>, usize),
    config: &TrainConfig,
    state: Option<&Path>,
) -> Result<Fitted, Box<dyn Error>> {
    let [n, c, h, w] = images.dims();
    match arch {
        Arch::Mlp => {
            let build = |d: &Device| {
                MlpConfig::new(c * h * w, vec![400, 400], classes)
                    .with_weights(method.weights.clone())
                    .init(Categorical, d)
            };
            let flat = images.reshape([n, c * h * w]);
            let (model, seconds) =
                posthoc_model(method, post, build, (flat, labels), config, state)?;
            Ok((Box::new(Flattened(model)), seconds, None))
        }
        _ => {
            let shape = conv_shape(arch, [c, h, w], classes).with_weights(method.weights.clone());
            let build = |d: &Device| shape.init(Categorical, d);
            let (model, seconds) =
                posthoc_model(method, post, build, (images, labels), config, state)?;
            Ok((model, seconds, None))
        }
    }
}

/// A boxed classifier of a body's inputs.
type BoxedPredict<I> = Box<dyn Predict<Input = I, Prediction = ClassPrediction>>;

/// A post-hoc model and its training seconds.
type Posthoc<I> = (BoxedPredict<I>, f64);

/// [`fit_posthoc`] on one body: the members, then the post-hoc model and the training seconds.
fn posthoc_model<B: Body>(
    method: &Method,
    post: PostHoc,
    build: impl Fn(&Device) -> Result<Bnn<B, Categorical>, bnn_burn::ConfigError>,
    (x, labels): (B::Input, Tensor<1, Int>),
    config: &TrainConfig,
    state: Option<&Path>,
) -> Result<Posthoc<B::Input>, Box<dyn Error>>
where
    B::Input: 'static,
{
    let member = |m: usize| -> Result<(Bnn<B, Categorical>, f64), Box<dyn Error>> {
        let config = config.clone().with_seed(config.seed.wrapping_add(m as u64));
        let mut trainer = method.trainer(&config)?;
        if let Some(dir) = state {
            trainer = trainer.with_resume(dir.join(format!("member-{m}")), STATE_INTERVAL);
        }
        let (net, report) = trainer.build_and_fit(&build, (x.clone(), labels.clone()))?;
        Ok((net, report.seconds))
    };
    let plain_x = bnn_burn::batch::Batch::plain(x.clone());
    let plain_labels = labels.clone().without_autodiff();
    let mut seconds = 0.0;
    let model: BoxedPredict<B::Input> = match post {
        PostHoc::Ensemble { members } => {
            let mut nets = Vec::with_capacity(members);
            for m in 0..members {
                let (net, s) = member(m)?;
                seconds += s;
                nets.push(net.valid());
            }
            Box::new(Ensemble::new(nets)?)
        }
        PostHoc::Swag { rank, members } => {
            let mut posteriors = Vec::with_capacity(members);
            for m in 0..members {
                let (net, s) = member(m)?;
                let start = std::time::Instant::now();
                let steps = labels.dims()[0].div_ceil(config.batch_size);
                let mut sgd = config
                    .clone()
                    .with_seed(config.seed.wrapping_add(1000 + m as u64));
                sgd.epochs = SWAG_EPOCHS;
                let swag = SwagConfig::new()
                    .with_rank(rank)
                    .with_every_steps((steps / 2).max(1))
                    .with_skip_epochs(SWAG_SKIP_EPOCHS);
                let (posterior, _) =
                    Swag::fit_at_posterior_rate(net, x.clone(), labels.clone(), sgd, swag, 64)?;
                posteriors.push(posterior);
                seconds += s + start.elapsed().as_secs_f64();
            }
            Box::new(Ensemble::new(posteriors)?)
        }
        PostHoc::LastLayerLaplace => {
            let (net, s) = member(0)?;
            let start = std::time::Instant::now();
            let fit =
                LastLayerLaplace::fit(net.valid(), plain_x, plain_labels, &LaplaceConfig::new())?;
            seconds += s + start.elapsed().as_secs_f64();
            Box::new(fit)
        }
        PostHoc::KfacLaplace { per_layer } => {
            let (net, s) = member(0)?;
            let start = std::time::Instant::now();
            let config = NetworkLaplaceConfig::new()
                .with_prior_precision(crate::catalogue::kfac_prior(per_layer));
            let fit = NetworkLaplace::fit(net.valid(), plain_x, plain_labels, &config)?;
            seconds += s + start.elapsed().as_secs_f64();
            Box::new(fit)
        }
    };
    Ok((model, seconds))
}

/// Per-image predictive probabilities `[n, C]`, log-likelihoods of the labels (none for a set
/// whose labels are not the model's classes, such as CIFAR's classes 5–9), predictive
/// entropies and mutual informations.
struct Predictions {
    probs: Vec<f64>,
    /// The model's predicted classes ([`ClassPrediction::predicted_class`]: a most probable
    /// class, ties broken by an evidential head's outputs).
    ///
    /// [`ClassPrediction::predicted_class`]: bnn_burn::predict::ClassPrediction::predicted_class
    predicted: Vec<usize>,
    log_likelihood: Vec<f64>,
    entropy: Vec<f64>,
    mi: Vec<f64>,
    /// The whole set's prediction, when asked for (post-hoc calibration).
    kept: Option<ClassPrediction>,
}

/// The chunks' predictions of one set as one (draws or Dirichlets joined along the rows).
fn joined(chunks: Vec<ClassPrediction>) -> Option<ClassPrediction> {
    use bnn_burn::predict::{ClassSamples, DirichletPrediction};
    let first = chunks.first()?;
    Some(match first {
        ClassPrediction::Samples(_) => ClassPrediction::Samples(ClassSamples {
            probs: Tensor::cat(
                chunks
                    .into_iter()
                    .map(|c| match c {
                        ClassPrediction::Samples(s) => s.probs,
                        ClassPrediction::Dirichlet(_) => unreachable!("one model, one kind"),
                    })
                    .collect(),
                1,
            ),
        }),
        ClassPrediction::Dirichlet(_) => {
            let (alpha, outputs): (Vec<_>, Vec<_>) = chunks
                .into_iter()
                .map(|c| match c {
                    ClassPrediction::Dirichlet(d) => (d.alpha, d.outputs),
                    ClassPrediction::Samples(_) => unreachable!("one model, one kind"),
                })
                .unzip();
            let outputs: Option<Vec<_>> = outputs.into_iter().collect();
            ClassPrediction::Dirichlet(DirichletPrediction {
                alpha: Tensor::cat(alpha, 0),
                outputs: outputs.map(|o| Tensor::cat(o, 0)),
            })
        }
    })
}

/// The rows `rows` of a prediction that lives on `device`.
fn rows_of(pred: &ClassPrediction, rows: &[usize], device: &Device) -> ClassPrediction {
    use bnn_burn::predict::{ClassSamples, DirichletPrediction};
    let ids = labels_on(rows, device);
    match pred {
        ClassPrediction::Samples(s) => ClassPrediction::Samples(ClassSamples {
            probs: s.probs.clone().select(1, ids),
        }),
        ClassPrediction::Dirichlet(d) => ClassPrediction::Dirichlet(DirichletPrediction {
            alpha: d.alpha.clone().select(0, ids.clone()),
            outputs: d.outputs.clone().map(|o| o.select(0, ids)),
        }),
    }
}

/// The miscoverage of the conformal class sets the bench reports (MNIST's errors are near 1 %,
/// so sets at 5 % would mostly be empty or single).
pub const CONFORMAL_ALPHA: f64 = 0.01;

/// Post-hoc calibration of a row's test predictions: the even-numbered test images calibrate
/// (a temperature, a conformal quantile), the odd-numbered ones are scored raw and calibrated.
fn calibrate(
    pred: &ClassPrediction,
    labels: &[usize],
    classes: usize,
    seed: u64,
) -> Result<CalibrationReport, Box<dyn Error>> {
    use bnn_burn::posthoc::{ConformalSets, TemperatureScaling};
    let device = match pred {
        ClassPrediction::Samples(s) => s.probs.device(),
        ClassPrediction::Dirichlet(d) => d.alpha.device(),
    };
    let (cal, scored): (Vec<usize>, Vec<usize>) = (0..labels.len()).partition(|i| i % 2 == 0);
    let pick = |rows: &[usize]| rows.iter().map(|&i| labels[i]).collect::<Vec<usize>>();
    let (cal_labels, scored_labels) = (pick(&cal), pick(&scored));
    let (cal_pred, scored_pred) = (
        rows_of(pred, &cal, &device),
        rows_of(pred, &scored, &device),
    );
    let scores = |p: &ClassPrediction| -> (f64, f64) {
        let probs = to_vec(p.mean());
        let predicted = bnn_burn::host::to_labels(p.predicted_class());
        let ll = to_vec(p.log_prob(labels_on(&scored_labels, &device)));
        (
            nll(&ll),
            ece_of(&probs, &predicted, classes, &scored_labels, ECE_BINS),
        )
    };
    let (nll_raw, ece_raw) = scores(&scored_pred);
    let tempered = match pred {
        ClassPrediction::Samples(_) => {
            let t = TemperatureScaling::fit(&cal_pred, labels_on(&cal_labels, &device))?;
            let (nll, ece) = scores(&t.apply(&scored_pred)?);
            Some(Tempered {
                temperature: t.temperature,
                nll,
                ece,
            })
        }
        ClassPrediction::Dirichlet(_) => None,
    };
    let sets = ConformalSets::fit(
        &cal_pred,
        labels_on(&cal_labels, &device),
        CONFORMAL_ALPHA,
        seed,
    )?;
    let (coverage, set_size) = sets.coverage(
        &scored_pred,
        labels_on(&scored_labels, &device),
        seed.wrapping_add(1),
    )?;
    Ok(CalibrationReport {
        calibration_images: cal.len(),
        scored_images: scored.len(),
        nll_raw,
        ece_raw,
        tempered,
        conformal_alpha: CONFORMAL_ALPHA,
        conformal_coverage: coverage,
        conformal_set_size: set_size,
    })
}

fn predict_set(
    model: &Trained,
    set: &ImageSet,
    norm: &Normalization,
    device: &Device,
    keep: bool,
) -> Result<Predictions, PredictError> {
    let mut kept = Vec::new();
    let mut p = Predictions {
        probs: Vec::with_capacity(set.len() * set.n_classes),
        predicted: Vec::with_capacity(set.len()),
        log_likelihood: Vec::with_capacity(set.len()),
        entropy: Vec::with_capacity(set.len()),
        mi: Vec::with_capacity(set.len()),
        kept: None,
    };
    let indices: Vec<usize> = (0..set.len()).collect();
    for chunk in indices.chunks(model.chunk) {
        let batch = set.batch(chunk, norm, device);
        let pred = model.predict(batch.images)?;
        let mean = pred.mean();
        let classes = mean.dims()[1];
        p.probs.extend(to_vec(mean));
        p.predicted
            .extend(bnn_burn::host::to_labels(pred.predicted_class()));
        if chunk.iter().all(|&i| usize::from(set.labels[i]) < classes) {
            p.log_likelihood.extend(to_vec(pred.log_prob(batch.labels)));
        }
        p.entropy.extend(to_vec(pred.entropy()));
        p.mi.extend(to_vec(pred.epistemic_entropy()));
        if keep {
            kept.push(pred);
        }
    }
    p.kept = joined(kept);
    Ok(p)
}

/// Counts of `values` in `bins` equal bins on `[0, max]` (the top edge goes in the last bin).
pub fn histogram(values: &[f64], max: f64, bins: usize) -> Vec<usize> {
    let mut h = vec![0; bins];
    for v in values {
        let i = ((v / max * bins as f64).max(0.0) as usize).min(bins - 1);
        h[i] += 1;
    }
    h
}

/// How long and how one row trains, and how many samples its predictions average.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowBudget {
    /// Training epochs.
    pub epochs: usize,
    /// Training minibatch size.
    pub batch_size: usize,
    /// Posterior samples per prediction.
    pub samples: usize,
    /// Seed of the initialisation, the minibatches and the noise.
    pub seed: u64,
}

/// Trains one method on one architecture and measures it.
pub fn run_one(
    arch: Arch,
    method: &Method,
    data: &MnistData,
    budget: RowBudget,
    state: Option<&Path>,
) -> Result<MnistResult, Box<dyn Error>> {
    let RowBudget {
        epochs,
        batch_size,
        samples,
        seed,
    } = budget;
    // Noted before training, so that a run interrupted and resumed by another build names
    // both.
    let revisions = match state {
        Some(folder) => experiment::note_revision(folder)?,
        None => vec![experiment::git_revision()],
    };
    let device = training_device();
    // Each set is normalised with its own family's statistics, as in the thesis code.
    let norm = data.family.normalization();
    let classes = data.n_classes();
    let all: Vec<usize> = (0..data.train.len()).collect();
    let batch = data.train.batch(&all, &norm, &device);
    let labels: Tensor<1, Int> = batch.labels;
    let config = TrainConfig::new(epochs)
        .with_batch_size(batch_size)
        .with_learning_rate(1e-3)
        .with_seed(seed)
        .with_progress(true);
    let data_xy = (batch.images, labels, classes);
    let (net, train_seconds, pac_train) = match (method.posthoc, method.class_likelihood) {
        (Some(post), ClassLikelihood::Softmax) => {
            fit_posthoc(arch, method, post, data_xy, &config, state)?
        }
        (Some(_), _) => {
            return Err(format!(
                "{}: a post-hoc method needs the softmax likelihood",
                method.name
            )
            .into());
        }
        (None, _) => match method.class_likelihood {
            ClassLikelihood::Softmax => fit(arch, method, Categorical, data_xy, &config, state)?,
            ClassLikelihood::MultiLabelProbit => {
                fit(arch, method, MultiLabelProbit, data_xy, &config, state)?
            }
            ClassLikelihood::Evidential { .. } => {
                let head = method
                    .class_likelihood
                    .evidential()
                    .expect("an evidential method")
                    .init();
                fit(arch, method, head, data_xy, &config, state)?
            }
        },
    };
    let linearised = matches!(
        method.posthoc,
        Some(PostHoc::LastLayerLaplace | PostHoc::KfacLaplace { .. })
    );
    let mode = if method.predicts_by_moments() || linearised {
        PredictMode::Moments
    } else {
        PredictMode::Samples(samples)
    };
    let draws = match mode {
        PredictMode::Samples(s) => s,
        PredictMode::Moments => 1,
    };
    let model = Trained {
        net,
        mode,
        chunk: images_per_chunk(draws, widest_activation(arch, data.train.shape())),
    };
    let plain = device.inner();
    let mut inn = predict_set(&model, &data.test, &norm, &plain, true)?;
    let out = predict_set(
        &model,
        &data.ood,
        &data.family.ood_normalization(),
        &plain,
        false,
    )?;
    let labels: Vec<usize> = data.test.labels.iter().map(|&l| l as usize).collect();
    let calibration = match inn.kept.take() {
        Some(pred) if labels.len() >= 2 => Some(calibrate(&pred, &labels, classes, seed)?),
        _ => None,
    };
    let max_entropy = (classes as f64).ln();
    let score = |set: &str, p: &Predictions| OodScore {
        set: set.to_string(),
        auroc_entropy: auroc(&inn.entropy, &p.entropy),
        auroc_mi: auroc(&inn.mi, &p.mi),
        ecdf_area: entropy_ecdf_area(&p.entropy, classes),
        mean_entropy: bnn_burn::metrics::mean(&p.entropy),
        aupr_entropy: Some(bnn_burn::metrics::aupr(&inn.entropy, &p.entropy)),
        fpr95_entropy: Some(bnn_burn::metrics::fpr_at_95_tpr(&inn.entropy, &p.entropy)),
    };
    let noise = predict_set(&model, &data.noise, &norm, &plain, false)?;
    let inverted = predict_set(&model, &data.inverted, &norm, &plain, false)?;
    let (name, ood_name) = data.names();
    let ood_sets = vec![
        score(ood_name, &out),
        score("uniform noise", &noise),
        score(&format!("inverted {name}"), &inverted),
    ];
    let mut rotations = Vec::with_capacity(ROTATION_ANGLES.len());
    for &degrees in &ROTATION_ANGLES {
        let rotated;
        let p = if degrees == 0.0 {
            &inn
        } else {
            rotated = predict_set(&model, &data.test.rotated(degrees), &norm, &plain, false)?;
            &rotated
        };
        rotations.push(RotationScore {
            degrees,
            error_pct: 100.0 * (1.0 - accuracy_of(&p.predicted, &labels)),
            mean_entropy: bnn_burn::metrics::mean(&p.entropy),
            auroc_entropy: auroc(&inn.entropy, &p.entropy),
        });
    }
    Ok(MnistResult {
        arch,
        method: method.name.to_string(),
        epochs,
        seed,
        error_pct: 100.0 * (1.0 - accuracy_of(&inn.predicted, &labels)),
        class_error_pct: class_errors_of(&inn.predicted, classes, &labels)
            .into_iter()
            .map(|e| e.map(|e| 100.0 * e))
            .collect(),
        nll: nll(&inn.log_likelihood),
        ece: ece_of(&inn.probs, &inn.predicted, classes, &labels, ECE_BINS),
        brier: brier(&inn.probs, classes, &labels),
        auroc_entropy: auroc(&inn.entropy, &out.entropy),
        auroc_mi: auroc(&inn.mi, &out.mi),
        ecdf_area: entropy_ecdf_area(&out.entropy, classes),
        mean_entropy_in: bnn_burn::metrics::mean(&inn.entropy),
        mean_entropy_out: bnn_burn::metrics::mean(&out.entropy),
        misclassification_auroc: misclassification_auroc(&inn.predicted, &labels, &inn.entropy),
        ood_sets,
        rotations,
        train_seconds,
        reliability: reliability_curve_of(&inn.probs, &inn.predicted, classes, &labels, ECE_BINS),
        entropy_hist_in: histogram(&inn.entropy, max_entropy, ENTROPY_BINS),
        entropy_hist_out: histogram(&out.entropy, max_entropy, ENTROPY_BINS),
        pac: pac_train.map(|t| PacReport {
            train_risk: t.risk,
            kl: t.kl,
            bound: t.bound,
            bound_code: t.bound_code,
            test_risk: -bnn_burn::metrics::mean(
                &inn.log_likelihood
                    .iter()
                    .map(|l| l.exp())
                    .collect::<Vec<_>>(),
            ),
        }),
        calibration,
        revisions,
    })
}
