use super::*;
use crate::host::{HostNormals, matrix, to_vec};
use crate::predict::{Predict, PredictError, PredictMode};
use crate::testing::test_device;
use burn::module::{Module, Param};
use burn::tensor::Tensor;
use std::collections::BTreeMap;

/// A model of one number, which warm fits increase by one and cold fits set to one: its
/// value counts the fits since the last cold one.
#[derive(Module, Debug)]
struct Counter {
    fits: Param<Tensor<1>>,
}

impl Counter {
    fn value(&self) -> f64 {
        to_vec(self.fits.val())[0]
    }
}

impl Predict for Counter {
    type Input = Tensor<2>;
    type Prediction = Tensor<2>;

    fn predict(&self, input: Tensor<2>, _: PredictMode) -> Result<Tensor<2>, PredictError> {
        Ok(input)
    }
}

/// Scores each row by its first input column.
struct FirstColumn;

impl Scorer<Counter> for FirstColumn {
    fn name(&self) -> String {
        "first column".into()
    }
    fn scores(
        &self,
        model: &Counter,
        pool: Tensor<2>,
        _: Tensor<2>,
    ) -> Result<Vec<f64>, ActiveError> {
        let [n, d] = pool.dims();
        let x = model.predict(pool, PredictMode::Samples(1))?;
        Ok(to_vec(x).chunks(d).take(n).map(|r| r[0]).collect())
    }
}

/// Records every fit's rows and weights, and reports the weighted and plain means of a known
/// loss per row; fails at round `fail_at` when set.
struct Recorder {
    losses: Vec<f64>,
    fits: Vec<(usize, Vec<usize>, Option<Vec<f64>>)>,
    last: Vec<usize>,
    last_weights: Option<Vec<f64>>,
    fail_at: Option<usize>,
    metric: f64,
}

impl Recorder {
    fn new(losses: Vec<f64>) -> Self {
        Self {
            losses,
            fits: Vec::new(),
            last: Vec::new(),
            last_weights: None,
            fail_at: None,
            metric: 0.0,
        }
    }
}

impl ActiveTask<Counter> for Recorder {
    fn fit(
        &mut self,
        round: usize,
        rows: &[usize],
        weights: Option<&[f64]>,
        warm: Option<Counter>,
    ) -> Result<Counter, ActiveError> {
        if self.fail_at == Some(round) {
            return Err(ActiveError::Task("stopped".into()));
        }
        self.fits
            .push((round, rows.to_vec(), weights.map(<[f64]>::to_vec)));
        self.last = rows.to_vec();
        self.last_weights = weights.map(<[f64]>::to_vec);
        let fits = warm.map_or(1.0, |m| m.value() + 1.0);
        Ok(Counter {
            fits: Param::from_tensor(Tensor::from_data([fits], &test_device())),
        })
    }

    fn evaluate(
        &mut self,
        model: &Counter,
        _: &ActiveHistory,
    ) -> Result<BTreeMap<String, f64>, ActiveError> {
        let l: Vec<f64> = self.last.iter().map(|r| self.losses[*r]).collect();
        let plain = l.iter().sum::<f64>() / l.len() as f64;
        let weighted = match &self.last_weights {
            Some(w) => l.iter().zip(w).map(|(l, w)| l * w).sum::<f64>() / l.len() as f64,
            None => plain,
        };
        Ok(BTreeMap::from([
            ("plain".to_string(), plain),
            ("weighted".to_string(), weighted),
            ("fits".to_string(), model.value()),
            ("metric".to_string(), self.metric),
        ]))
    }
}

/// `n` rows whose single input is the row number scaled to [0, 1).
fn pool(n: usize) -> Tensor<2> {
    let x: Vec<f64> = (0..n).map(|i| i as f64 / n as f64).collect();
    matrix(&x, 1, &test_device())
}

fn strip_seconds(h: &ActiveHistory) -> ActiveHistory {
    let mut h = h.clone();
    for r in &mut h.rounds {
        r.score_seconds = 0.0;
        r.fit_seconds = 0.0;
    }
    h
}

#[test]
fn the_loop_labels_each_row_once_and_passes_the_picks_q_as_weights() {
    // Acquisition::random draws on the host; the lock keeps the source scan's rule simple.
    let _guard = crate::testing::seeded(&test_device(), 41);
    let n = 40;
    let config = ActiveConfig::new(5, 4, 23)
        .with_risk(Risk::Lure)
        .with_seed(9);
    let scorer = FirstColumn;
    let mut first_initial = None;
    for mut acquisition in [
        Acquisition::random(),
        Acquisition::new(&scorer, Selection::Top),
        Acquisition::new(&scorer, Selection::Boltzmann { temperature: 3.0 }),
        Acquisition::new(&scorer, Selection::Thinned { every: 2, from: 20 }),
    ] {
        let mut task = Recorder::new(vec![1.0; n]);
        let (_, h) = ActiveLearning::new(config.clone())
            .run(&mut acquisition, pool(n), &mut task)
            .unwrap();
        // 5, then 4 per round, the last round the 2 left of the budget.
        let labels: Vec<usize> = h.rounds.iter().map(|r| r.labels).collect();
        assert_eq!(labels, [5, 9, 13, 17, 21, 23], "{}", acquisition.name());
        let rows = h.rows();
        let mut sorted = rows.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 23, "no row twice: {rows:?}");
        assert!(rows.iter().all(|r| *r < n));
        // Every fit saw the labelled rows so far and the weights of their q's.
        for (round, fit_rows, weights) in &task.fits {
            let upto = h.rounds[*round].labels;
            assert_eq!(fit_rows[..], rows[..upto]);
            let q: Vec<f64> = h.q()[..upto].to_vec();
            assert_eq!(weights.as_deref(), Some(&lure_weights(n, &q).unwrap()[..]));
        }
        // The initial rows are the same for every acquisition under one seed, picked
        // uniformly (q = 1/(rows left)).
        let first: Vec<f64> = h.rounds[0].picks.iter().map(|p| p.q).collect();
        assert_eq!(
            first,
            (0..5).map(|m| 1.0 / (n - m) as f64).collect::<Vec<_>>()
        );
        let initial = first_initial.get_or_insert_with(|| h.rounds[0].picks.clone());
        assert_eq!(&h.rounds[0].picks, initial);
        // Each round's q is the selection's among the rows left.
        let left: Vec<usize> = (0..n).filter(|r| !rows[..5].contains(r)).collect();
        let r1 = &h.rounds[1].picks;
        match acquisition.name().as_str() {
            "random" => assert_eq!(r1[0].q, 1.0 / left.len() as f64),
            "first column (top)" => {
                assert!(r1.iter().all(|p| p.q == 1.0));
                let top: Vec<usize> = left.iter().rev().take(4).copied().collect();
                assert_eq!(r1.iter().map(|p| p.row).collect::<Vec<_>>(), top);
            }
            "first column (Boltzmann T = 3)" => {
                let s: Vec<f64> = left.iter().map(|r| *r as f64 / n as f64).collect();
                let q = boltzmann_probabilities(&s, 3.0).unwrap();
                let i = left.iter().position(|r| *r == r1[0].row).unwrap();
                assert!((r1[0].q - q[i]).abs() < 1e-6, "{r1:?} vs {q:?}"); // f32 inputs
            }
            _ => assert_eq!(r1[0].q, 1.0 / 10.0),
        }
    }
}

#[test]
fn a_stopped_run_resumes_to_the_uninterrupted_history_and_model() {
    let n = 30;
    let scorer = FirstColumn;
    let mut acquisition = Acquisition::new(&scorer, Selection::Boltzmann { temperature: 1.0 });
    let dir = std::env::temp_dir().join(format!("bnn-active-{}", std::process::id()));
    for retrain in [Retrain::Scratch, Retrain::Warm] {
        let _ = std::fs::remove_dir_all(&dir);
        let config = ActiveConfig::new(3, 2, 13)
            .with_retrain(retrain)
            .with_seed(4);
        let (whole_model, whole) = ActiveLearning::new(config.clone())
            .run(&mut acquisition, pool(n), &mut Recorder::new(vec![0.0; n]))
            .unwrap();
        let looped = ActiveLearning::new(config.clone()).with_state(&dir);
        let mut stopped = Recorder::new(vec![0.0; n]);
        stopped.fail_at = Some(3);
        let err = looped
            .run(&mut acquisition, pool(n), &mut stopped)
            .unwrap_err();
        assert!(err.to_string().contains("stopped"), "{err}");
        let mut resumed = Recorder::new(vec![0.0; n]);
        let (model, h) = looped.run(&mut acquisition, pool(n), &mut resumed).unwrap();
        assert_eq!(strip_seconds(&h), strip_seconds(&whole), "{retrain:?}");
        assert_eq!(model.value(), whole_model.value(), "{retrain:?}");
        // Labels 3, 5, …, 13: rounds 0..=5. The restore refits round 2 once, then 3..=5 train.
        let rounds: Vec<usize> = resumed.fits.iter().map(|f| f.0).collect();
        assert_eq!(rounds, [2, 3, 4, 5]);
        if retrain == Retrain::Warm {
            assert_eq!(model.value(), 6.0, "six warm fits");
            assert!(dir.join("model-5.bpk").exists() && !dir.join("model-4.bpk").exists());
        }
        // A finished run refits its last round only; other settings are refused by name.
        let mut again = Recorder::new(vec![0.0; n]);
        looped.run(&mut acquisition, pool(n), &mut again).unwrap();
        assert_eq!(again.fits.len(), 1);
        let other = ActiveLearning::new(config.clone().with_seed(5)).with_state(&dir);
        let err = other
            .run(&mut acquisition, pool(n), &mut Recorder::new(vec![0.0; n]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("active.json") && err.contains("settings"),
            "{err}"
        );
        let err = looped
            .run(
                &mut acquisition,
                pool(n + 1),
                &mut Recorder::new(vec![0.0; n + 1]),
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("pool size"), "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Given initial rows are round 0's labels (in their order, `q = 1`); the acquisitions
/// then pick from the rest.
#[test]
fn given_initial_rows_are_labelled_first_and_never_picked_again() {
    let _guard = crate::testing::seeded(&test_device(), 43);
    let n = 12;
    let scorer = FirstColumn;
    let mut task = Recorder::new(vec![0.0; n]);
    let config = ActiveConfig::new(1, 2, 7).with_initial_rows(vec![11, 2, 5]);
    let (_, history) = ActiveLearning::new(config)
        .run(
            &mut Acquisition::new(&scorer, Selection::Top),
            pool(n),
            &mut task,
        )
        .unwrap();
    assert_eq!(task.fits[0].1, vec![11, 2, 5]);
    assert!(history.rounds[0].picks.iter().all(|p| p.q == 1.0));
    // The top of the first column among the rows left: 10, 9, then 8, 7.
    assert_eq!(history.rows(), vec![11, 2, 5, 10, 9, 8, 7]);
    assert_eq!(history.rounds.len(), 3);
}

#[test]
fn bad_settings_and_non_finite_metrics_are_named_before_or_at_their_round() {
    let _guard = crate::testing::seeded(&test_device(), 42);
    let n = 10;
    let scorer = FirstColumn;
    for (config, field) in [
        (ActiveConfig::new(0, 1, 5), "initial"),
        (ActiveConfig::new(2, 0, 5), "per_round"),
        (ActiveConfig::new(6, 1, 5), "budget"),
        (ActiveConfig::new(2, 1, 11), "budget"),
        (
            ActiveConfig::new(1, 1, 5).with_initial_rows(vec![3, 10]),
            "initial_rows",
        ),
        (
            ActiveConfig::new(1, 1, 5).with_initial_rows(vec![3, 3]),
            "initial_rows",
        ),
        (
            ActiveConfig::new(1, 1, 5)
                .with_initial_rows(vec![3, 4])
                .with_risk(Risk::Lure),
            "risk",
        ),
    ] {
        let mut task = Recorder::new(vec![0.0; n]);
        let err = ActiveLearning::new(config)
            .run(&mut Acquisition::random(), pool(n), &mut task)
            .unwrap_err();
        assert!(
            matches!(&err, ActiveError::Config(c) if c.field == field),
            "{err}"
        );
        assert!(
            task.fits.is_empty(),
            "nothing trains before the settings are checked"
        );
    }
    let mut task = Recorder::new(vec![0.0; n]);
    task.metric = f64::NAN;
    let err = ActiveLearning::new(ActiveConfig::new(2, 1, 5))
        .run(
            &mut Acquisition::new(&scorer, Selection::Top),
            pool(n),
            &mut task,
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("round 0") && err.contains("`metric`"), "{err}");
}

#[test]
fn the_loops_lure_and_pure_risks_are_unbiased_and_the_plain_mean_is_not() {
    // A pool of N rows with known losses; a Boltzmann acquisition favouring high losses picks
    // M rows per trajectory. Over trajectories the weighted means match the pool's mean loss
    // within 4 standard errors; the plain mean is above it by many.
    let n = 24;
    let losses: Vec<f64> = (0..n)
        .map(|i| (i as f64 / n as f64).powi(2) * 3.0)
        .collect();
    let truth = losses.iter().sum::<f64>() / n as f64;
    let x = matrix(&losses, 1, &test_device());
    let scorer = FirstColumn;
    let mut acquisition = Acquisition::new(&scorer, Selection::Boltzmann { temperature: 1.5 });
    let trajectories = 1500;
    for risk in [Risk::Lure, Risk::Pure] {
        let (mut weighted, mut plain) = (Vec::new(), Vec::new());
        for seed in 0..trajectories {
            let config = ActiveConfig::new(1, 3, 10).with_risk(risk).with_seed(seed);
            let (_, h) = ActiveLearning::new(config)
                .run(
                    &mut acquisition,
                    x.clone(),
                    &mut Recorder::new(losses.clone()),
                )
                .unwrap();
            let last = &h.rounds.last().unwrap().metrics;
            weighted.push(last["weighted"]);
            plain.push(last["plain"]);
        }
        let stats = |v: &[f64]| {
            let m = v.iter().sum::<f64>() / v.len() as f64;
            let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
            (m, (var / v.len() as f64).sqrt())
        };
        let (w, w_se) = stats(&weighted);
        let (p, p_se) = stats(&plain);
        assert!(
            (w - truth).abs() < 4.0 * w_se,
            "{risk:?}: {w} ± {w_se} vs {truth}"
        );
        assert!(p - truth > 10.0 * p_se, "plain {p} ± {p_se} vs {truth}");
    }
}

#[test]
fn the_distance_score_is_the_total_squared_distance_over_its_largest() {
    let device = test_device();
    let pool = matrix(&[0.0, 0.0, 1.0, 0.0, 3.0, 4.0], 2, &device);
    let labelled = matrix(&[0.0, 0.0, 2.0, 0.0], 2, &device);
    let model = Counter {
        fits: Param::from_tensor(Tensor::from_data([1.0], &device)),
    };
    // Raw: 0 + 4 = 4; 1 + 1 = 2; 25 + 17 = 42.
    let s = Scorer::<Counter>::scores(&DistanceScorer, &model, pool, labelled).unwrap();
    let expected = [4.0 / 42.0, 2.0 / 42.0, 1.0];
    for (a, b) in s.iter().zip(expected) {
        assert!((a - b).abs() < 1e-6, "{s:?}");
    }
}

#[test]
fn clt_scores_match_their_closed_form_and_a_monte_carlo_bald() {
    let device = test_device();
    // Three rows, two classes: (g, h) from confident to uncertain.
    let g = [2.5, -1.0, 0.3, 0.0, -0.2, 1.5];
    let h = [0.01, 0.5, 2.0, 4.0, 0.0, 9.0];
    let m = crate::dist::Moments::new(matrix(&g, 2, &device), matrix(&h, 2, &device));
    let entropy = to_vec(super::score::clt_scores(m.clone(), false, 32));
    let bald = to_vec(super::score::clt_scores(m, true, 32));
    let xlnx = |p: f64| if p > 0.0 { p * p.ln() } else { 0.0 };
    let hb = |p: f64| -(xlnx(p) + xlnx(1.0 - p));
    let phi = crate::metrics::standard_normal_cdf;
    let mut rng = crate::host::HostNormals::new(5);
    let draws = 200_000;
    for row in 0..3 {
        let (mut want_h, mut want_b, mut se2) = (0.0, 0.0, 0.0);
        for c in 0..2 {
            let (g, h) = (g[2 * row + c], h[2 * row + c]);
            let p = phi(g / (1.0 + h).sqrt());
            want_h += hb(p);
            let v: Vec<f64> = (0..draws)
                .map(|_| hb(phi(g + h.sqrt() * rng.next())))
                .collect();
            let mean = v.iter().sum::<f64>() / draws as f64;
            let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (draws - 1) as f64;
            want_b += hb(p) - mean;
            se2 += var / draws as f64;
        }
        assert!(
            (entropy[row] - want_h).abs() < 1e-5,
            "row {row}: {entropy:?} vs {want_h}"
        );
        let tol = 5.0 * se2.sqrt() + 1e-5;
        assert!(
            (bald[row] - want_b).abs() < tol,
            "row {row}: {bald:?} vs {want_b} ± {tol}"
        );
        assert!(bald[row] <= entropy[row] + 1e-6);
    }
}

#[test]
fn the_clt_scorer_reads_a_clt_nets_moments() {
    use crate::likelihood::MultiLabelProbit;
    use crate::nets::{MlpConfig, MomentConfig};
    let device = test_device();
    let _guard = crate::testing::seeded(&device, 31);
    let net = MlpConfig::new(2, vec![8], 3)
        .init(MultiLabelProbit, &device)
        .unwrap()
        .with_moments(MomentConfig::clt())
        .unwrap();
    let pool = matrix(&[0.0, 1.0, -2.0, 0.5, 3.0, -1.0, 0.2, 0.2], 2, &device);
    let labelled = pool.clone().slice([0..1, 0..2]);
    let entropy = CltScorer::new(false)
        .scores(&net, pool.clone(), labelled.clone())
        .unwrap();
    let bald = CltScorer::new(true).scores(&net, pool, labelled).unwrap();
    assert_eq!((entropy.len(), bald.len()), (4, 4));
    for (h, b) in entropy.iter().zip(&bald) {
        assert!(
            h.is_finite() && *h <= 3.0 * std::f64::consts::LN_2 + 1e-6,
            "{entropy:?}"
        );
        assert!(*b >= 0.0 && *b <= h + 1e-6, "{bald:?} vs {entropy:?}");
    }
}

#[test]
fn active_testing_is_unbiased_and_scores_that_track_the_loss_shrink_its_error() {
    // A test pool with skewed losses: few large ones. Scores proportional to the loss
    // (an ideal proposal) against uniform picks: both LURE estimates unbiased, the scored one
    // with a far smaller mean squared error; the plain mean of scored picks is biased up.
    let n = 200;
    let losses: Vec<f64> = (0..n)
        .map(|i| {
            if i % 20 == 0 {
                3.0 + (i % 7) as f64
            } else {
                0.05 * (i % 5) as f64
            }
        })
        .collect();
    let truth = losses.iter().sum::<f64>() / n as f64;
    let top = losses.iter().cloned().fold(0.0, f64::max);
    let scores: Vec<f64> = losses.iter().map(|l| l / top).collect();
    let (m, runs) = (20, 3000);
    let mut stats = Vec::new();
    for selection in [
        Selection::Boltzmann { temperature: 4.0 },
        Selection::Random,
        Selection::Proportional { floor: 0.01 },
    ] {
        let mut rng = crate::host::HostNormals::new(17);
        let (mut lure, mut plain) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let t = active_test(selection, &scores, m, |r| losses[r], &mut rng).unwrap();
            assert_eq!(t.losses.len(), m);
            lure.push(t.lure);
            plain.push(t.plain);
        }
        let (mean, se) = crate::metrics::mean_and_standard_error(&lure);
        assert!(
            (mean - truth).abs() < 4.0 * se.unwrap(),
            "{selection:?}: {mean} vs {truth}"
        );
        let mse = lure.iter().map(|v| (v - truth).powi(2)).sum::<f64>() / runs as f64;
        let (plain_mean, plain_se) = crate::metrics::mean_and_standard_error(&plain);
        stats.push((mse, plain_mean, plain_se.unwrap()));
    }
    assert!(
        stats[0].0 < 0.5 * stats[1].0,
        "MSE scored {} vs uniform {}",
        stats[0].0,
        stats[1].0
    );
    assert!(
        stats[0].1 - truth > 10.0 * stats[0].2,
        "plain mean of scored picks"
    );
    // q ∝ loss (plus a floor) is the better proposal still.
    assert!(
        stats[2].0 < 0.5 * stats[0].0,
        "MSE proportional {} vs Boltzmann {}",
        stats[2].0,
        stats[0].0
    );
    let negative = active_test(
        Selection::Proportional { floor: 0.0 },
        &[0.5, -0.1],
        1,
        |_| 1.0,
        &mut HostNormals::new(1),
    )
    .unwrap_err();
    assert_eq!(negative.field, "scores");
    let err = active_test(
        Selection::Random,
        &scores,
        3,
        |_| f64::NAN,
        &mut HostNormals::new(1),
    )
    .unwrap_err();
    assert_eq!(err.field, "loss");
}

/// Two draws' Gaussians per input: means `x ± c`, noise variances `v₁, v₂` from the columns.
struct TwoDraws;

impl Predict for TwoDraws {
    type Input = Tensor<2>;
    type Prediction = crate::predict::GaussianPrediction;

    fn predict(
        &self,
        input: Tensor<2>,
        _: PredictMode,
    ) -> Result<crate::predict::GaussianPrediction, PredictError> {
        // Columns: x, c, v₁, v₂; one output.
        let col = |j: usize| input.clone().narrow(1, j, 1).unsqueeze::<3>();
        let mean = Tensor::cat(vec![col(0) + col(1), col(0) - col(1)], 0);
        let var = Tensor::cat(vec![col(2), col(3)], 0);
        Ok(crate::predict::GaussianPrediction::Samples(
            crate::predict::GaussianSamples { mean, var },
        ))
    }
}

/// A regression's scores: the moment-matched Gaussian's entropy `½ ln(2πe (E[σ²] + Var[μ]))`
/// and the epistemic variance `Var[μ]`, by hand for two draws; a GP's entropy grows away from
/// its data.
#[test]
fn regression_scores_match_their_closed_form() {
    let device = test_device();
    let pool = matrix(
        &[0.0, 0.5, 1.0, 1.0, 2.0, 0.0, 0.5, 1.5, -1.0, 2.0, 0.1, 0.3],
        4,
        &device,
    );
    let score = |s: RegressionScore| {
        let scorer = RegressionScorer::new(s, PredictMode::Samples(2));
        Scorer::<TwoDraws>::scores(&scorer, &TwoDraws, pool.clone(), pool.clone()).unwrap()
    };
    let entropy = score(RegressionScore::Entropy);
    let epistemic = score(RegressionScore::EpistemicVariance);
    let two_pi_e = 2.0 * std::f64::consts::PI * std::f64::consts::E;
    // (c, v₁, v₂) per row: Var[μ] = c², E[σ²] = (v₁ + v₂)/2.
    for (i, (c, v1, v2)) in [(0.5, 1.0, 1.0), (0.0, 0.5, 1.5), (2.0, 0.1, 0.3)]
        .into_iter()
        .enumerate()
    {
        let total: f64 = c * c + (v1 + v2) / 2.0;
        assert!((epistemic[i] - c * c).abs() < 1e-6, "{epistemic:?}");
        assert!(
            (entropy[i] - 0.5 * (two_pi_e * total).ln()).abs() < 1e-5,
            "{entropy:?}"
        );
    }

    let gp_device = crate::training_device();
    let _guard = crate::testing::seeded(&gp_device, 133);
    let mut noise = HostNormals::new(3);
    let x: Vec<f64> = (0..60).map(|i| -1.0 + 2.0 * i as f64 / 59.0).collect();
    let y: Vec<f64> = x.iter().map(|v| v.sin() + 0.1 * noise.next()).collect();
    let gp = crate::gp::RandomFeatureGpConfig::new()
        .fit(matrix(&x, 1, &gp_device), matrix(&y, 1, &gp_device))
        .unwrap();
    let scorer = RegressionScorer::new(RegressionScore::Entropy, PredictMode::Samples(400));
    let far = matrix(&[0.0, 0.9, 2.0, 4.0], 1, &gp_device);
    let s = Scorer::<crate::nets::Regressor>::scores(&scorer, &gp.model, far.clone(), far).unwrap();
    assert!(s[0] < s[2] && s[1] < s[2] && s[2] < s[3], "{s:?}");
}
