//! The report: our table, the OOD and rotation tables, the published rows, the record.

use super::*;
use bnn_burn::likelihood::LogitRule;

/// How the moment methods' classifiers predict under the library's default logit rule, which
/// every one of them but CLT keeps.
fn moment_prediction() -> String {
    match bnn_burn::nets::MomentConfig::new().predict_logits {
        LogitRule::Sampled { samples } | LogitRule::SampledMarginal { samples } => {
            format!("{samples} logits drawn from the output moments")
        }
        rule => format!("the logit rule {rule:?}"),
    }
}

/// The catalogue's methods that train and predict by moments, as a list: "A, B and C".
fn moment_methods() -> String {
    let names: Vec<&str> = super::methods()
        .into_iter()
        .filter(|m| m.predicts_by_moments())
        .map(|m| m.name)
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => last.to_string(),
        None => String::new(),
    }
}

/// The Markdown report: our table, then the published rows.
pub fn markdown(
    options: &MnistOptions,
    data: &MnistData,
    results: &[MnistResult],
    wall: f64,
) -> String {
    let (name, ood_name) = data.names();
    let mut md = format!(
        "# {name}: classification, calibration and OOD ({ood_name}, noise, inverted, rotated)\n\n\
         {} training, {} {name} test and {} {ood_name} test images{}; {} epochs, Adam lr 10⁻³, \
         batch {}, 1 training sample; {} prediction samples (1 for MAP, the deterministic net; \
         {} propagate moments and predict from {}, CLT by its closed-form marginals); seed {}, \
         backend `{}`, wall time {:.0} s. {}\n\n\
         | architecture | method | error % | NLL | ECE | Brier | AUROC entropy | AUROC MI | \
         ECDF area ↓ | mean H in | mean H out | AUROC misclassified | train s |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        data.train.len(),
        data.test.len(),
        data.ood.len(),
        if options.exp.quick { " (--quick)" } else { "" },
        options.epochs(),
        // What ran: a batch larger than the training set is the whole set.
        match options.batch_size > data.train.len() {
            true => format!(
                "{} (--batch-size {} is more than the training images)",
                data.train.len(),
                options.batch_size
            ),
            false => options.batch_size.to_string(),
        },
        options.prediction_samples,
        moment_methods(),
        moment_prediction(),
        options.exp.seed,
        bnn_burn::backend_name(),
        wall,
        crate::experiment::revisions_line(
            &results
                .iter()
                .map(|r| (
                    format!("{} / {}", r.arch.name(), r.method),
                    r.revisions.clone()
                ))
                .collect::<Vec<_>>()
        )
    );
    for r in results {
        md.push_str(&format!(
            "| {} | {} | {:.2} | {:.4} | {:.4} | {:.4} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | \
             {} | {:.0} |\n",
            r.arch.name(),
            r.method,
            r.error_pct,
            r.nll,
            r.ece,
            r.brier,
            r.auroc_entropy,
            r.auroc_mi,
            r.ecdf_area,
            r.mean_entropy_in,
            r.mean_entropy_out,
            r.misclassification_auroc
                .map(|a| format!("{a:.3}"))
                .unwrap_or_else(|| "–".into()),
            r.train_seconds
        ));
    }
    md += &ood_tables(results, data);
    md += &class_error_table(results, data);
    md += &pac_table(results, data);
    md += &calibration_table(results, data);
    md.push_str(&format!(
        "\nECDF area: the area under the empirical CDF of predictive entropies on the OOD set \
         over [0, ln C] = ln C − mean entropy (Haußmann 2021 §5.7); 0 when every OOD \
         prediction is uniform, ln C = {:.3} when every one is certain. AUROC: OOD images are the \
         positives, scored by predictive entropy or by mutual information. AUROC misclassified: \
         the misclassified {name} test images are the positives, scored by predictive \
         entropy.\n\n\
         ## Published\n\n",
        (data.n_classes() as f64).ln()
    ));
    md += &published_table(data, results);
    md
}

/// The published rows of the run's training family, each beside our row of the method trained
/// as the published one was ([`crate::published::mnist::PublishedMnist::counterpart`]) on the
/// published net where we have one (for the strided LeNet5's rows: the strided one, else
/// Sensoy's, else the pooled one).
pub fn published_table(data: &MnistData, results: &[MnistResult]) -> String {
    let (name, ood_name) = data.names();
    let theirs_n = data.family.published_test_images();
    let mut md = format!(
        "Trained and tested on {name}. Beside each published row, our row of the same method \
         (or of the one named beside it, trained as the published one was) on the published \
         net where we have one (for the LeNet5 rows: the strided LeNet5, else Sensoy's, else \
         the pooled one; column net). z: \
         the difference in combined standard errors (binomial, `√(e(1−e)/n)` over the \
         {theirs_n} test images for theirs and our n for ours; positive: ours has the lower \
         error). d/sd: the difference in the published run-to-run standard \
         deviation of the error (one run of ours against the mean of theirs; positive: ours \
         lower). LL: test log-likelihood per image (−NLL).\n\n\
         | method | error % | ± sd | LL | {ood_name} ECDF area ↓ | ours: net | ours: error % \
         | ours: LL | ours: ECDF area | z (error) | d/sd | source |\n\
         |---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|\n"
    );
    let cell = |v: Option<f64>, digits: usize| {
        v.map(|v| format!("{v:.digits$}"))
            .unwrap_or_else(|| "–".into())
    };
    for p in crate::published::mnist::all()
        .into_iter()
        .filter(|p| p.family == data.family)
    {
        let on = |arch| {
            results
                .iter()
                .find(|r| r.arch == arch && r.method == p.counterpart)
        };
        let ours = match p.net {
            Arch::LeNet5 => on(Arch::LeNet5)
                .or_else(|| on(Arch::LeNet5Sensoy))
                .or_else(|| on(Arch::LeNet5Pooled)),
            net => on(net),
        };
        let z = ours.and_then(|r| error_z(r.error_pct, data.test.len(), p.error_pct, theirs_n));
        let d = ours
            .zip(p.error_std)
            .filter(|(_, sd)| *sd > 0.0)
            .map(|(r, sd)| (p.error_pct - r.error_pct) / sd);
        let method = if p.counterpart == p.method {
            p.method.to_string()
        } else {
            format!("{} (ours: {})", p.method, p.counterpart)
        };
        md.push_str(&format!(
            "| {} | {:.2} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            method,
            p.error_pct,
            cell(p.error_std, 2),
            cell(p.log_likelihood, 2),
            cell(p.ecdf_area, 3),
            ours.map_or("–", |r| super::plots::short(r.arch)),
            cell(ours.map(|r| r.error_pct), 2),
            cell(ours.map(|r| -r.nll), 3),
            cell(ours.map(|r| r.ecdf_area), 3),
            z.map(|z| format!("{z:+.1}")).unwrap_or_else(|| "–".into()),
            d.map(|d| format!("{d:+.1}")).unwrap_or_else(|| "–".into()),
            p.source
        ));
    }
    md
}

/// `(theirs − ours)/√(se_ours² + se_theirs²)` of two test errors in %, with binomial standard
/// errors over `n_ours` and `n_theirs` images: positive when ours is lower; `None` when both
/// standard errors are 0.
pub fn error_z(ours_pct: f64, n_ours: usize, theirs_pct: f64, n_theirs: usize) -> Option<f64> {
    let se = |pct: f64, n: usize| {
        let e = pct / 100.0;
        (e * (1.0 - e) / n.max(1) as f64).sqrt()
    };
    let s = se(ours_pct, n_ours).hypot(se(theirs_pct, n_theirs));
    (s > 0.0).then(|| (theirs_pct - ours_pct) / 100.0 / s)
}

/// The test error of each true class, for the runs that measured it (empty when none did):
/// a class the net never predicts stands out at 100 %.
fn class_error_table(results: &[MnistResult], data: &MnistData) -> String {
    let rows: Vec<_> = results
        .iter()
        .filter(|r| !r.class_error_pct.is_empty())
        .collect();
    let Some(classes) = rows.iter().map(|r| r.class_error_pct.len()).max() else {
        return String::new();
    };
    let (name, _) = data.names();
    let mut md = format!(
        "\nTest error per true class (% of the {name} test images of the class that the net \
         assigns to another):\n\n| architecture | method |"
    );
    md += &(0..classes).map(|c| format!(" {c} |")).collect::<String>();
    md += "\n|---|---|";
    md += &"---:|".repeat(classes);
    md.push('\n');
    for r in rows {
        md += &format!("| {} | {} |", r.arch.name(), r.method);
        for c in 0..classes {
            match r.class_error_pct.get(c).copied().flatten() {
                Some(e) => md += &format!(" {e:.1} |"),
                None => md += " – |",
            }
        }
        md.push('\n');
    }
    md
}

/// The PAC-Bayes bound of every run trained on one, on the training images, beside the risk
/// measured on the test images (empty when none was).
fn pac_table(results: &[MnistResult], data: &MnistData) -> String {
    let rows: Vec<_> = results
        .iter()
        .filter_map(|r| r.pac.map(|p| (r, p)))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let (name, _) = data.names();
    let mut md = format!(
        "\n## PAC-Bayes bound (Haußmann 2021 eq. 5.10)\n\nRisk = −mean p̄(y | x) of the \
         label, in [−1, 0]; the bound on the {} training images under the training objective \
         (δ = 0.1, the thesis's (ln max B)/N ≤ 1 and KL of the training set) and under the \
         reference code's settings (ln N / N, one point's KL), beside the risk measured on the \
         {} {name} test images. A bound holds when it is at least the test risk.\n\n\
         | architecture | method | train risk | mean KL | bound (thesis) | bound (code) | \
         test risk | holds |\n|---|---|---:|---:|---:|---:|---:|---|\n",
        data.train.len(),
        data.test.len()
    );
    for (r, p) in rows {
        let holds = if p.bound_code.min(p.bound) >= p.test_risk {
            "yes"
        } else {
            "no"
        };
        md += &format!(
            "| {} | {} | {:.4} | {:.3} | {:.4} | {:.4} | {:.4} | {holds} |\n",
            r.arch.name(),
            r.method,
            p.train_risk,
            p.kl,
            p.bound,
            p.bound_code,
            p.test_risk
        );
    }
    md
}

/// Temperature scaling and conformal sets beside the raw predictive, on the scored half of the
/// test images.
fn calibration_table(results: &[MnistResult], data: &MnistData) -> String {
    let Some(first) = results.iter().find_map(|r| r.calibration) else {
        return String::new();
    };
    let (name, _) = data.names();
    format!(
        "\n## Post-hoc calibration\n\nFitted on the {} even-numbered {name} test images, \
         scored on the {} odd-numbered ones: NLL and ECE of the raw predictive and of the \
         tempered one (temperature scaling; `–` for a Dirichlet head), and split-conformal \
         class sets (APS, randomised) at α = {}: coverage (nominal {}) and mean set size.\n\n{}",
        first.calibration_images,
        first.scored_images,
        first.conformal_alpha,
        1.0 - first.conformal_alpha,
        calibration_rows(results)
    )
}

/// The table of [`calibration_table`]: a row per result that has calibration scores.
pub(crate) fn calibration_rows(results: &[MnistResult]) -> String {
    let mut md = String::from(
        "| architecture | method | NLL raw | NLL tempered | ECE raw | ECE tempered | T | \
         set coverage | set size |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (r, c) in results.iter().filter_map(|r| r.calibration.map(|c| (r, c))) {
        let (nll_t, ece_t, t) = match c.tempered {
            Some(t) => (
                format!("{:.4}", t.nll),
                format!("{:.4}", t.ece),
                format!("{:.3}", t.temperature),
            ),
            None => ("–".into(), "–".into(), "–".into()),
        };
        md += &format!(
            "| {} | {} | {:.4} | {nll_t} | {:.4} | {ece_t} | {t} | {:.4} | {:.3} |\n",
            r.arch.name(),
            r.method,
            c.nll_raw,
            c.ece_raw,
            c.conformal_coverage,
            c.conformal_set_size
        );
    }
    md
}

/// The OOD table (every OOD set) and the rotation table (error % and mean entropy per angle).
fn ood_tables(results: &[MnistResult], data: &MnistData) -> String {
    let Some(first) = results.first() else {
        return String::new();
    };
    let (name, ood_name) = data.names();
    let mut md = format!(
        "\n## Out-of-distribution sets\n\nAUROC of predictive entropy / of mutual information \
         ({name} test images negative, the set's positive) and the entropy-ECDF area ↓; {} \
         {ood_name} test images (normalised with their own statistics), {} uniform-noise \
         images and the {} {name} test images with inverted pixels (both normalised as \
         {name}).\n\n\
         | architecture | method |",
        data.ood.len(),
        data.noise.len(),
        data.inverted.len()
    );
    for o in &first.ood_sets {
        md += &format!(" {} AUROC H / MI | {} ECDF area |", o.set, o.set);
    }
    md += "\n|---|---|";
    md += &"---:|---:|".repeat(first.ood_sets.len());
    md += "\n";
    for r in results {
        md += &format!("| {} | {} |", r.arch.name(), r.method);
        for o in &r.ood_sets {
            md += &format!(
                " {:.3} / {:.3} | {:.3} |",
                o.auroc_entropy, o.auroc_mi, o.ecdf_area
            );
        }
        md += "\n";
    }
    md += "\nAUPR / false-positive rate at 95 % true-positive rate (↓) of predictive entropy, the \
           same sets:\n\n| architecture | method |";
    for o in &first.ood_sets {
        md += &format!(" {} AUPR / FPR95 |", o.set);
    }
    md += "\n|---|---|";
    md += &"---:|".repeat(first.ood_sets.len());
    md += "\n";
    let opt = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.3}"));
    for r in results {
        md += &format!("| {} | {} |", r.arch.name(), r.method);
        for o in &r.ood_sets {
            md += &format!(" {} / {} |", opt(o.aupr_entropy), opt(o.fpr95_entropy));
        }
        md += "\n";
    }
    md += &format!(
        "\n## Rotated {name} test images\n\nTest error % / mean predictive entropy (nats) per \
         counter-clockwise rotation (bilinear, black outside); figure: `rotation.svg`.\n\n\
         | architecture | method |"
    );
    for a in &first.rotations {
        md += &format!(" {}° |", a.degrees);
    }
    md += "\n|---|---|";
    md += &"---:|".repeat(first.rotations.len());
    md += "\n";
    for r in results {
        md += &format!("| {} | {} |", r.arch.name(), r.method);
        for a in &r.rotations {
            md += &format!(" {:.1} / {:.3} |", a.error_pct, a.mean_entropy);
        }
        md += "\n";
    }
    md
}

pub(crate) fn write_report(
    options: &MnistOptions,
    data: &MnistData,
    results: &[MnistResult],
    wall: f64,
    out: &crate::runner::OutFolder,
) -> Result<(), Box<dyn Error>> {
    for r in results {
        r.check()?;
    }
    let md = markdown(options, data, results, wall);
    let record = experiment::record(
        "mnist",
        options,
        wall,
        &results,
        serde_json::json!({
            "epochs": options.epochs(),
            "n_train": data.train.len(),
            "n_test": data.test.len(),
            "n_ood": data.ood.len(),
            "n_noise": data.noise.len(),
            "rotation_angles": ROTATION_ANGLES,
        }),
    );
    out.write_record("mnist.json", &record)?;
    out.write("mnist.md", md.as_bytes())?;
    use crate::plots::write_svg;
    write_svg(out, "reliability.svg", |p| plot_reliability(p, results))?;
    write_svg(out, "entropy.svg", |p| plot_entropy(p, results, data))?;
    write_svg(out, "rotation.svg", |p| {
        plot_rotation(p, results, data.n_classes())
    })?;
    println!("{md}");
    Ok(())
}
