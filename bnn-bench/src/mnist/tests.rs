//! Tests of the MNIST harness.

use super::*;
use bnn_burn::likelihood::LogitRule;

/// The smoke tests' budget: `epochs` in the protocol's batches, 4 prediction samples, seed 1.
fn budget(epochs: usize) -> RowBudget {
    RowBudget {
        epochs,
        batch_size: BATCH_SIZE,
        samples: 4,
        seed: 1,
    }
}

#[test]
fn histogram_bins_cover_the_range_and_keep_every_value() {
    let h = histogram(&[0.0, 0.1, 0.5, 0.99, 1.0, 1.5], 1.0, 4);
    assert_eq!(h, vec![2, 0, 1, 3]);
}

#[test]
fn arch_names_parse() {
    assert_eq!("MLP".parse::<Arch>().unwrap(), Arch::Mlp);
    assert_eq!("lenet5".parse::<Arch>().unwrap(), Arch::LeNet5);
    assert_eq!("LeNet5-pool".parse::<Arch>().unwrap(), Arch::LeNet5Pooled);
    assert_eq!("lenet5-sensoy".parse::<Arch>().unwrap(), Arch::LeNet5Sensoy);
    assert_eq!("Conv96".parse::<Arch>().unwrap(), Arch::Conv96);
    let err = "resnet".parse::<Arch>().unwrap_err();
    assert!(err.contains("lenet5-pool") && err.contains("lenet5-sensoy") && err.contains("conv96"));
}

/// A tiny synthetic "MNIST" (two shapes of 28×28 images) runs end to end for every
/// method and both architectures, writes its files, and scores the in-distribution set
/// better than chance.
#[test]
fn a_small_run_writes_its_table_and_figures() {
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
    let make = |n: usize, shift: usize| {
        let mut pixels = vec![0u8; n * 784];
        let mut labels = vec![0u8; n];
        for i in 0..n {
            let class = (i % 2) as u8;
            labels[i] = class;
            for r in 4..24 {
                // Class 0: a vertical bar; class 1: a horizontal bar; at one of 5
                // positions.
                let at = 11 + (i / 2 + shift) % 5;
                let (rr, cc) = if class == 0 { (r, at) } else { (at, r) };
                pixels[i * 784 + rr * 28 + cc] = 255;
            }
        }
        ImageSet::new(pixels, labels, [1, 28, 28], 10).unwrap()
    };
    let data = MnistData::new(make(200, 0), make(40, 1), {
        let mut s = make(40, 0);
        s.pixels
            .iter_mut()
            .enumerate()
            .for_each(|(i, p)| *p = (i * 37 % 256) as u8);
        s
    })
    .unwrap();
    let dir = std::env::temp_dir().join(format!("bnn-mnist-test-{}", std::process::id()));
    let options = MnistOptions {
        methods: vec![],
        archs: vec![],
        epochs: Some(5),
        exp: crate::runner::ExperimentArgs {
            seed: 0,
            quick: true,
        },
        prediction_samples: 4,
        batch_size: BATCH_SIZE,
        data_dir: None,
        family: TrainSet::Mnist,
        run: crate::runner::RunnerOptions::new(&dir),
    };
    let mut results = Vec::new();
    for arch in Arch::ALL {
        // Last-layer Laplace factorises a 4 010 x 4 010 (5 010 for LeNet5) precision: minutes
        // in a debug build; its numerics are tested in bnn-burn.
        use crate::catalogue::PostHoc::LastLayerLaplace;
        // MultiSWAG pools five SWAG fits, each estimating its SGD rate from 64 minibatch
        // gradients: the pooling does not depend on the body, so it runs on the MLP only (SWAG
        // runs on both).
        let cheap = methods().into_iter().filter(|m| {
            !matches!(m.posthoc, Some(LastLayerLaplace))
                && (arch == Arch::Mlp || m.name != "MultiSWAG")
        });
        for m in cheap {
            let r = run_one(arch, &m, &data, budget(5), None).unwrap();
            assert!(
                r.error_pct < 30.0,
                "{} {}: {}",
                arch.name(),
                m.name,
                r.error_pct
            );
            assert!(r.ecdf_area >= 0.0 && r.ecdf_area <= 10f64.ln() + 1e-9);
            // Half of the 40 test images calibrate, half are scored; only a Dirichlet
            // prediction (EDL's) has no draws to temper.
            let c = r.calibration.expect("every row calibrates");
            assert_eq!((c.calibration_images, c.scored_images), (20, 20));
            assert!((0.0..=1.0).contains(&c.conformal_coverage), "{c:?}");
            assert!(c.conformal_set_size >= 0.0 && c.conformal_set_size <= 10.0);
            let evidential = matches!(m.class_likelihood, ClassLikelihood::Evidential { .. });
            assert!(c.tempered.is_some() || evidential, "{}: {c:?}", m.name);
            assert!(c.tempered.is_none() || m.name != "EDL", "{c:?}");
            if let Some(t) = c.tempered {
                // The temperature minimises the calibration half's NLL, not the scored half's:
                // only finiteness and range are certain.
                assert!(t.temperature > 0.0 && t.nll.is_finite(), "{t:?}");
            }
            assert_eq!(r.entropy_hist_in.iter().sum::<usize>(), 40);
            // Two classes of 20 test images each: their errors average to the error, and the
            // eight classes without images have none.
            let e = &r.class_error_pct;
            assert_eq!(e.len(), 10);
            assert!(e[2..].iter().all(Option::is_none), "{e:?}");
            let mean = (e[0].unwrap() + e[1].unwrap()) / 2.0;
            assert!(
                (mean - r.error_pct).abs() < 1e-9,
                "{e:?} vs {}",
                r.error_pct
            );
            // Only the method trained on a PAC-Bayes bound reports one, with risks in [−1, 0].
            assert_eq!(r.pac.is_some(), m.name == "BEDL-PAC", "{}", m.name);
            if let Some(p) = r.pac {
                assert!((-1.0..=0.0).contains(&p.train_risk), "{p:?}");
                assert!((-1.0..=0.0).contains(&p.test_risk), "{p:?}");
                assert!(p.kl > 0.0 && p.bound >= p.bound_code, "{p:?}");
            }
            results.push(r);
        }
    }
    // The pooled LeNet5 (Sensoy's EDL net) trains EDL too, and the published table sets it
    // beside Table 5.2's EDL row when no strided row of EDL is there.
    let edl = methods().into_iter().find(|m| m.name == "EDL").unwrap();
    let pooled = run_one(Arch::LeNet5Pooled, &edl, &data, budget(5), None).unwrap();
    assert!(pooled.error_pct < 30.0, "pooled EDL: {}", pooled.error_pct);
    assert_eq!(pooled.arch, Arch::LeNet5Pooled);
    let table = report::published_table(&data, std::slice::from_ref(&pooled));
    let edl_row = table.lines().find(|l| l.starts_with("| EDL |")).unwrap();
    assert!(edl_row.contains("| LeNet5-pool |"), "{edl_row}");
    // Table 5.3's net trains BEDL-PAC by moments, and Table 5.3's row (0.63 %) is set beside
    // it, Table 5.2's (0.66 %) beside the strided LeNet5.
    let pac = methods()
        .into_iter()
        .find(|m| m.name == "BEDL-PAC")
        .unwrap();
    let wide = run_one(Arch::Conv96, &pac, &data, budget(5), None).unwrap();
    assert!(wide.error_pct < 30.0, "Conv96 BEDL-PAC: {}", wide.error_pct);
    assert!(wide.pac.is_some());
    let strided = results
        .iter()
        .find(|r| r.arch == Arch::LeNet5 && r.method == "BEDL-PAC")
        .unwrap()
        .clone();
    let table = report::published_table(&data, &[strided, wide]);
    let row = |start: &str| table.lines().find(|l| l.starts_with(start)).unwrap();
    assert!(row("| BEDL-PAC | 0.63 |").contains("| Conv96 |"), "{table}");
    assert!(row("| BEDL-PAC | 0.66 |").contains("| LeNet5 |"), "{table}");
    assert!(row("| BEDL | 0.91 |").contains("| – |"), "{table}");
    // Table 5.2's DVI row is set beside DVI-sampled, the recipe it was trained with, and
    // Table 3.2's DVI row beside DVI (their errors set apart here to tell the rows apart).
    let strided_with = |method: &str, error_pct: f64| {
        let mut r = results
            .iter()
            .find(|r| r.arch == Arch::LeNet5 && r.method == method)
            .unwrap()
            .clone();
        r.error_pct = error_pct;
        r
    };
    let rows = [strided_with("DVI", 12.5), strided_with("DVI-sampled", 3.25)];
    let table = report::published_table(&data, &rows);
    let row = |start: &str| table.lines().find(|l| l.starts_with(start)).unwrap();
    assert!(
        row("| DVI (ours: DVI-sampled) | 0.72 |").contains("| 3.25 |"),
        "{table}"
    );
    assert!(row("| DVI | 0.97 |").contains("| 12.50 |"), "{table}");
    // The same seed gives the same numbers.
    let again = run_one(Arch::LeNet5, &methods()[3], &data, budget(5), None).unwrap();
    let lenet = results.iter().position(|r| r.arch == Arch::LeNet5).unwrap();
    let first = &results[lenet + 3];
    assert_eq!(first.method, methods()[3].name);
    assert_eq!(
        (again.error_pct, again.nll, again.ecdf_area, again.auroc_mi),
        (first.error_pct, first.nll, first.ecdf_area, first.auroc_mi)
    );
    // A row stopped after 2 epochs and resumed from its saved training state scores what the
    // uninterrupted row scores; a finished state is reused without training.
    let state = dir.join("state-test");
    let _ = std::fs::remove_dir_all(&state);
    let stopped = run_one(Arch::LeNet5, &methods()[3], &data, budget(2), Some(&state)).unwrap();
    let this = crate::experiment::git_revision();
    assert_eq!(stopped.revisions, vec![this.clone()]);
    assert_eq!(first.revisions, vec![this.clone()]);
    // As if another build had trained its first epochs: the row names both builds.
    std::fs::write(state.join("revisions"), "0ldbu1d\n").unwrap();
    let resumed = run_one(Arch::LeNet5, &methods()[3], &data, budget(5), Some(&state)).unwrap();
    assert_eq!(resumed.revisions, vec!["0ldbu1d".to_string(), this.clone()]);
    assert_eq!(
        (
            resumed.error_pct,
            resumed.nll,
            resumed.ecdf_area,
            resumed.auroc_mi
        ),
        (first.error_pct, first.nll, first.ecdf_area, first.auroc_mi)
    );
    let saved = std::fs::read_to_string(state.join("state.json")).unwrap();
    assert!(saved.contains("\"epochs_done\": 5"), "{saved}");
    let reused = run_one(Arch::LeNet5, &methods()[3], &data, budget(5), Some(&state)).unwrap();
    assert_eq!(reused.error_pct, first.error_pct);
    assert_eq!(
        std::fs::read_to_string(state.join("state.json")).unwrap(),
        saved,
        "a finished state trains no further"
    );
    std::fs::remove_dir_all(&state).unwrap();
    // Every OOD set and rotation angle is scored; rotating by 0° is the test set itself, and
    // turning the bars by 90° swaps the classes: the error there is far above the upright one.
    for r in &results {
        let sets: Vec<&str> = r.ood_sets.iter().map(|o| o.set.as_str()).collect();
        assert_eq!(sets, ["Fashion-MNIST", "uniform noise", "inverted MNIST"]);
        assert_eq!(r.rotations.len(), ROTATION_ANGLES.len());
        assert_eq!(r.rotations[0].error_pct, r.error_pct);
        assert_eq!(r.rotations[0].auroc_entropy, 0.5);
        assert!(
            r.rotations[2].error_pct > r.error_pct + 40.0,
            "{} {}: {:?}",
            r.arch.name(),
            r.method,
            r.rotations[2]
        );
    }
    let folder = crate::runner::OutFolder::open(&dir, "--out").unwrap();
    write_report(&options, &data, &results, 1.0, &folder).unwrap();
    let md = std::fs::read_to_string(dir.join("mnist.md")).unwrap();
    assert!(md.contains("| LeNet5 (strided) | Radial |") && md.contains("BEDL-PAC"));
    // Every row trained by this build.
    let this = crate::experiment::git_revision();
    assert!(
        md.contains(&format!("Built from revision `{this}`.")),
        "{md}"
    );
    assert!(md.contains("## PAC-Bayes bound"), "{md}");
    assert!(md.contains("## Post-hoc calibration"), "{md}");
    // The header names the catalogue's moment methods and says how they predict, from the
    // library's default rule.
    assert!(
        md.contains(
            "VBP, DVI, CLT, DVI-sampled, BEDL and BEDL-PAC propagate moments and predict from 100 \
             logits drawn from the output moments"
        ),
        "{md}"
    );
    assert!(
        md.contains("Test error per true class") && md.contains("| 0 | 1 | 2 |"),
        "{md}"
    );
    assert!(md.contains("uniform noise AUROC H / MI") && md.contains("| 315° |"));
    for f in [
        "mnist.json",
        "reliability.svg",
        "entropy.svg",
        "rotation.svg",
    ] {
        assert!(dir.join(f).metadata().unwrap().len() > 100, "{f}");
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn misclassification_auroc_ranks_the_wrong_predictions_by_entropy() {
    // Three images all predicted class 0: two right (entropies 0.1, 0.3), one wrong (entropy
    // 0.2): AUROC 0.5.
    let predicted = [0, 0, 0];
    assert_eq!(
        misclassification_auroc(&predicted, &[0, 0, 1], &[0.1, 0.3, 0.2]),
        Some(0.5)
    );
    assert_eq!(
        misclassification_auroc(&predicted, &[0, 0, 1], &[0.1, 0.2, 0.3]),
        Some(1.0)
    );
    // No error at all: undefined.
    assert_eq!(
        misclassification_auroc(&predicted, &[0, 0, 0], &[0.1, 0.2, 0.3]),
        None
    );
}

#[test]
fn error_differences_use_binomial_standard_errors() {
    // 1.0 % vs 1.2 % on 10 000 images each: se = √(0.01·0.99/1e4 + 0.012·0.988/1e4).
    let se = (0.01f64 * 0.99 / 1e4 + 0.012 * 0.988 / 1e4).sqrt();
    let z = error_z(1.0, 10_000, 1.2, 10_000).unwrap();
    assert!((z - 0.002 / se).abs() < 1e-9, "{z}");
    assert_eq!(error_z(0.0, 10, 0.0, 10), None);
}

/// `--train-set` names either family; the report's published rows are those of the family
/// trained on, with Table 3.2's run-to-run deviation beside our row.
#[test]
fn the_training_family_picks_its_published_rows() {
    assert_eq!(parse_family("fashion-mnist"), Ok(TrainSet::FashionMnist));
    assert_eq!(parse_family("MNIST"), Ok(TrainSet::Mnist));
    assert_eq!(parse_family("cifar5"), Ok(TrainSet::Cifar5));
    assert!(parse_family("cifar").unwrap_err().contains("--train-set"));
    let set = || ImageSet::new(vec![0u8; 2 * 784], vec![0, 1], [1, 28, 28], 10).unwrap();
    let mut data = MnistData::new(set(), set(), set()).unwrap();
    assert_eq!(data.names(), ("MNIST", "Fashion-MNIST"));
    let table = published_table(&data, &[]);
    assert!(table.contains("| VBP | 0.85 | 0.06 | -0.03 |"), "{table}");
    assert!(!table.contains("10.10"), "{table}");
    data.family = TrainSet::FashionMnist;
    assert_eq!(data.names(), ("Fashion-MNIST", "MNIST"));
    let table = published_table(&data, &[]);
    assert!(table.contains("| VBP | 10.10 | 0.16 | -0.28 |"), "{table}");
    assert!(
        !table.contains("0.85") && !table.contains("BEDL"),
        "{table}"
    );
}

/// CIFAR-5 end to end on generated CIFAR-10 batch files of the real layout (label byte, then
/// the R, G, B planes of 32 × 32): the loader splits classes 0–4 from 5–9, the CIFAR LeNet5
/// (192/192/1000) trains and predicts on 5 classes (MAP, and EDL's Dirichlet head), entropies
/// live on `[0, ln 5]`, and the report carries Table 5.2's CIFAR rows. The MLP is refused.
/// (One step of Adam at 10⁻³ moves this wide net's outputs by several units: BEDL-PAC's
/// Dirichlet KL of `exp` evidence rises from 3.4 to 1.8·10³ and the trainer refuses the
/// result, as it should after a single update; the real set gives 250 steps per epoch.)
#[test]
fn cifar5_runs_end_to_end_on_generated_batches() {
    use bnn_datasets::cifar::CIFAR10_DIR;
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
    let root = std::env::temp_dir().join(format!("bnn-cifar5-test-{}", std::process::id()));
    let dir = root.join(CIFAR10_DIR);
    std::fs::create_dir_all(&dir).unwrap();
    // Class c: a bright square in one of ten places, colour by class.
    let record = |label: u8, k: usize| {
        let mut r = vec![label];
        let (y0, x0) = (2 + 3 * (label as usize % 5), 2 + 12 * (label as usize / 5));
        for c in 0..3 {
            for p in 0..1024 {
                let (y, x) = (p / 32, p % 32);
                let inside = (y0..y0 + 10).contains(&y) && (x0..x0 + 10).contains(&x);
                let v = if inside {
                    120 + 40 * c
                } else {
                    (p * 7 + k) % 60
                };
                r.push(v as u8);
            }
        }
        r
    };
    let batch = |n: usize, offset: usize| -> Vec<u8> {
        (0..n)
            .flat_map(|i| record((i % 10) as u8, i + offset))
            .collect()
    };
    for k in 1..=5 {
        std::fs::write(dir.join(format!("data_batch_{k}.bin")), batch(20, 100 * k)).unwrap();
    }
    std::fs::write(dir.join("test_batch.bin"), batch(30, 7)).unwrap();
    let out = root.join("out");
    let options = MnistOptions {
        methods: vec!["MAP".into(), "EDL".into()],
        archs: vec![],
        epochs: Some(1),
        exp: crate::runner::ExperimentArgs {
            seed: 0,
            quick: false,
        },
        prediction_samples: 4,
        batch_size: BATCH_SIZE,
        data_dir: Some(root.clone()),
        family: TrainSet::Cifar5,
        run: crate::runner::RunnerOptions::new(&out),
    };
    let results = run(&options).unwrap();
    assert_eq!(results.len(), 2);
    for r in &results {
        assert_eq!(r.arch, Arch::LeNet5);
        assert!(
            r.ecdf_area >= 0.0 && r.ecdf_area <= 5f64.ln() + 1e-9,
            "{r:?}"
        );
        assert!(r.mean_entropy_in <= 5f64.ln() + 1e-9);
        // 15 test images of classes 0–4, 15 OOD images of classes 5–9.
        assert_eq!(r.entropy_hist_in.iter().sum::<usize>(), 15);
        assert_eq!(r.entropy_hist_out.iter().sum::<usize>(), 15);
        assert!(r.pac.is_none());
    }
    let md = std::fs::read_to_string(out.join("mnist.md")).unwrap();
    assert!(md.starts_with("# CIFAR-5"), "{md}");
    assert!(md.contains("| BEDL-PAC | 20.02 |"), "{md}");
    assert!(!md.contains("| VBP | 0.85"), "{md}");
    // A user's own catalogue entry runs through the same harness under its own name; a name
    // none of the methods has (the error lists the user's) and two of one name are refused.
    let mine = || Method {
        name: "MAP, prior std 0.5",
        ..Method::map(0.5)
    };
    let own = MnistOptions {
        methods: vec![],
        run: crate::runner::RunnerOptions::new(root.join("own")),
        ..options.clone()
    };
    let rows = run_with(&own, vec![mine()]).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].method, "MAP, prior std 0.5");
    assert!(rows[0].error_pct.is_finite() && rows[0].entropy_hist_in.iter().sum::<usize>() == 15);
    let md = std::fs::read_to_string(root.join("own").join("mnist.md")).unwrap();
    assert!(md.contains("MAP, prior std 0.5"), "{md}");
    let unknown = MnistOptions {
        methods: vec!["MAP".into()],
        ..own.clone()
    };
    let err = run_with(&unknown, vec![mine()]).unwrap_err().to_string();
    assert!(
        err.contains("\"MAP\"") && err.contains("prior std 0.5"),
        "{err}"
    );
    let err = run_with(&own, vec![mine(), mine()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("two methods are named"), "{err}");
    let mlp = MnistOptions {
        archs: vec![Arch::Mlp],
        ..options
    };
    assert!(run(&mlp).unwrap_err().to_string().contains("--arch"));
    let no_batch = MnistOptions {
        batch_size: 0,
        archs: vec![Arch::LeNet5],
        ..mlp
    };
    assert!(
        run(&no_batch)
            .unwrap_err()
            .to_string()
            .contains("--batch-size")
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// Table 5.2's DVI (the thesis code's `DVINet`) is DVI trained by the sampled softmax over 20
/// draws of the logits, under the prior precision 10; Table 3.2's keeps the Taylor loss and 100.
#[test]
fn table_5_2_dvi_trains_by_the_sampled_softmax_under_precision_10() {
    let find = |name: &str| methods().into_iter().find(|m| m.name == name).unwrap();
    let (sampled, taylor) = (find("DVI-sampled"), find("DVI"));
    let rule = |m: &Method| m.moments.as_ref().unwrap().train_logits;
    assert_eq!(rule(&sampled), LogitRule::Sampled { samples: 20 });
    assert_eq!(rule(&taylor), LogitRule::Taylor);
    // Both clamp ln σ² inside the KL as the thesis code does.
    let (lo, hi) = bnn_burn::recipes::VBP_KL_LOG_VAR_RANGE;
    assert_eq!(
        sampled.weights.prior,
        bnn_burn::Prior::gaussian(1.0 / TABLE_5_2_DVI_PRIOR_PRECISION.sqrt()).clamped(lo, hi)
    );
    assert_eq!(
        taylor.weights.prior,
        bnn_burn::Prior::gaussian(1.0 / MOMENT_PRIOR_PRECISION.sqrt()).clamped(lo, hi)
    );
    // Both are the same net otherwise: diagonal CLT moments, trained and predicted by them.
    let moments = |m: &Method| {
        m.moments
            .clone()
            .unwrap()
            .with_train_logits(LogitRule::Taylor)
    };
    assert_eq!(moments(&sampled), moments(&taylor));
}

/// OOD or test images of another size than the training images are refused when the run's
/// data are assembled, before any training; so is a set without images.
#[test]
fn images_of_another_size_are_refused_before_training() {
    let set = |n: usize, side: usize| {
        ImageSet::new(vec![0; n * side * side], vec![0; n], [1, side, side], 10).unwrap()
    };
    let err = MnistData::new(set(4, 28), set(2, 28), set(2, 32))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("OOD images are [1, 32, 32]") && err.contains("[1, 28, 28]"),
        "{err}"
    );
    let err = MnistData::new(set(4, 28), set(0, 28), set(2, 28))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("test images: none"), "{err}");
    assert!(MnistData::new(set(4, 28), set(2, 28), set(2, 28)).is_ok());
    // The prediction memory follows the real layers: the strided LeNet5's widest are its first
    // maps (20 × 12 × 12), the padded one's (20 × 28 × 28); 20 samples keep 500 images.
    assert_eq!(widest_activation(Arch::LeNet5, [1, 28, 28]), 2880);
    assert_eq!(widest_activation(Arch::LeNet5Sensoy, [1, 28, 28]), 15_680);
    assert_eq!(images_per_chunk(20, 37_632), CHUNK);
    assert!(images_per_chunk(100_000, 2880) < 10);
    assert!(check_prediction_memory(1_000_000, 2880).is_err());
}
