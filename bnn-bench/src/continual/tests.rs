use super::*;
use burn::tensor::Tensor;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    o: ContinualOptions,
}

fn parse(args: &[&str]) -> ContinualOptions {
    let mut all = vec!["continual", "--out", "x"];
    all.extend_from_slice(args);
    Cli::parse_from(all).o
}

#[test]
fn bad_options_are_named_before_any_work() {
    for (args, flag) in [
        (&["--epochs", "0"][..], "--epochs 0"),
        (&["--seeds", "0"][..], "--seeds 0"),
        (&["--permuted-tasks", "1"][..], "--permuted-tasks 1"),
        (&["--learning-rate", "0"][..], "--learning-rate"),
        (&["--ewc-lambda=-1"][..], "--ewc-lambda"),
        (&["--train-images", "40"][..], "--coreset 40"),
        (
            &["--heads", "multi", "--sequence", "permuted-mnist"][..],
            "--heads multi",
        ),
    ] {
        let err = parse(args).check().unwrap_err();
        assert!(err.contains(flag), "{args:?}: {err}");
    }
    // The grid: EWC once per seed with a point net, multi-head without permuted or EWC.
    let o = parse(&["--heads", "single", "--heads", "multi", "--seeds", "2"]);
    let tasks = o.tasks();
    let count = |f: &dyn Fn(&Task) -> bool| tasks.iter().filter(|t| f(t)).count();
    assert_eq!(count(&|t| t.method == Strategy::Ewc), 3 * 2);
    assert!(
        tasks
            .iter()
            .all(|t| (t.method == Strategy::Ewc) == (t.family == Family::Point))
    );
    assert_eq!(count(&|t| t.heads == Heads::Multi), 2 * 3 * 2 * 2);
    assert_eq!(tasks.len(), 3 * (3 * 2 + 1) * 2 + 2 * 3 * 2 * 2);
}

/// Accuracy over all classes and over the task's own: the head renormalises each draw.
#[test]
fn a_heads_accuracy_renormalises_its_columns_per_draw() {
    let device = bnn_burn::device();
    // Two draws, one image of label 1; class 2 wins overall, class 1 within (0, 1).
    let probs = Tensor::<3>::from_floats([[[0.1, 0.3, 0.6]], [[0.2, 0.2, 0.6]]], &device);
    let (all, own) = sequence::accuracies(probs, &[1], &[0, 1]);
    assert_eq!((all, own), (0.0, 100.0));
}

/// Two-class images: class 2t + c is a bright block in quadrant c of a 4×4 image, task t's
/// pair; every image a little noise.
pub(crate) fn toy_family(n: usize, seed: u64) -> ImageSet {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (mut pixels, mut labels) = (Vec::new(), Vec::new());
    for i in 0..n {
        let label = (i % 10) as u8;
        let quadrant = (label / 2) as usize % 4;
        for p in 0..16 {
            let (r, c) = (p / 4, p % 4);
            let q = (r / 2) * 2 + c / 2;
            let on = q == quadrant && (c + r) % 2 == (label % 2) as usize;
            pixels.push(if on { 230 } else { rng.random_range(0..40) });
        }
        labels.push(label);
    }
    ImageSet::new(pixels, labels, [1, 4, 4], 10).unwrap()
}

#[test]
fn a_small_run_scores_every_task_after_each_and_reports_the_entropy() {
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
    let dir = std::env::temp_dir().join(format!("bnn-continual-bench-{}", std::process::id()));
    let mut o = ContinualOptions::new(dir.clone());
    o.sequences = vec![Sequence::SplitMnist, Sequence::PermutedMnist];
    o.strategies = vec![Strategy::Vcl, Strategy::CoresetOnly, Strategy::Ewc];
    o.families = vec![Family::MeanField];
    o.seeds = Some(1);
    o.epochs = Some(2);
    o.coreset = 4;
    o.permuted_tasks = 2;
    o.batch_size = 32;
    let train = toy_family(400, 1);
    let test = toy_family(100, 2);
    let rows = run_on(&o, &[(MnistFamily::Mnist, train, test)]).unwrap();
    assert_eq!(rows.len(), 2 * 3);
    for r in &rows {
        let tasks = r.train_images.len();
        assert_eq!(
            tasks,
            if r.task.sequence == Sequence::PermutedMnist {
                2
            } else {
                5
            }
        );
        // After task t, tasks 0..=t are scored, both ways.
        for (t, (row, own)) in r.scores.iter().zip(&r.known_task).enumerate() {
            assert_eq!((row.len(), own.len()), (t + 1, t + 1));
            assert!(row.iter().chain(own).all(|a| (0.0..=100.0).contains(a)));
        }
        assert!(
            r.second_task_entropy
                .is_some_and(|h| h.is_finite() && h >= 0.0)
        );
    }
    let md = std::fs::read_to_string(dir.join("continual.md")).unwrap();
    assert!(
        md.contains("split-mnist, single-head") && md.contains("| ewc | point |"),
        "{md}"
    );
    assert!(md.contains("| permuted-mnist | mean-field | 2 |"), "{md}");
}
