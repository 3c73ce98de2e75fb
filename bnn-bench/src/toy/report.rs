//! The report: the table, the BNN+LV section, the record and the figures.

use super::*;

pub(crate) fn lv_markdown(m: &lv::WetChickenMaps, draws: Draws) -> String {
    format!(
        "\n## {BNN_LV} decomposition\n\n{BNN_LV} rows: 2×20 units, black-box α = 1, K = 25 draws \
         per step, batch N/25 (Depeweg 2019 §6.1; the other rows: 2×50, heteroscedastic head). \
         Decomposition from {} weight draws × {} latent draws, k-NN entropies with k = {}: \
         `toy.svg` shows its variance form, `toy-lv.svg` both forms over the training inputs.\n\n\
         Wet-chicken (`wet-chicken.svg`): {} random-policy transitions, the next y-coordinate \
         at a = (0, 0) on a {}×{} grid of states; test LL {:.3}, {:.0} s of training.\n\n\
         | mean over states | epistemic entropy I(y'; W) | aleatoric entropy E_W H[y'|W] |\n\
         |---|---:|---:|\n\
         | x > 2.5 and y > 2.5 (the waterfall's corner) | {:.3} | |\n\
         | elsewhere | {:.3} | |\n\
         | x < 2.5 (little drift, strong turbulence) | | {:.3} |\n\
         | x > 2.5 | | {:.3} |\n",
        draws.n_w,
        draws.n_z,
        draws.k,
        m.n_train,
        m.side,
        m.side,
        m.test_ll,
        m.train_seconds,
        m.epistemic_top_right,
        m.epistemic_elsewhere,
        m.aleatoric_left,
        m.aleatoric_right,
    )
}

pub(crate) fn markdown(
    options: &ToyOptions,
    epochs: usize,
    results: &[ToyResult],
    wall: f64,
) -> String {
    let mut md = format!(
        "# Toy decomposition\n\n{N_TRAIN} training and {N_TEST} test points per toy (Depeweg \
         2019 §6.1.3); 2×50 ReLU nets with a heteroscedastic head, {epochs} epochs, Adam lr \
         3·10⁻³, batch 100; {} prediction samples; seed {}{}, backend `{}`, wall time {wall:.0} \
         s.\n\nEpistemic std: √Var_w[μ(x, w)] averaged over grid points with ≥ 5 % of the \
         training inputs within ±{WINDOW} (dense) and with none (sparse).\n\n\
         PSIS k̂: of each posterior with a density against the log joint on the training \
         rows ({} joint draws; above 0.7 its importance weights are not to be trusted).\n\n\
         | toy | method | test LL | oracle LL | test RMSE | epistemic std dense | epistemic std \
         sparse | aleatoric std dense | k̂ | train s |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        decomposition::PRED_SAMPLES,
        options.exp.seed,
        if options.exp.quick { " (--quick)" } else { "" },
        bnn_burn::backend_name(),
        decomposition::K_HAT_DRAWS,
    );
    for r in results {
        md.push_str(&format!(
            "| {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {:.1} |\n",
            r.toy,
            r.row.method,
            r.row.test_ll,
            r.oracle_ll,
            r.row.test_rmse,
            r.epistemic_dense,
            r.epistemic_sparse,
            r.aleatoric_dense,
            r.row.k_hat.map_or(String::from("–"), |k| format!("{k:.2}")),
            r.row.train_seconds
        ));
    }
    md
}

/// Writes `toy.md`, `toy.json` and `toy.svg` from `rows` (toy by toy), and with BNN+LV's rows
/// `toy-lv.svg`, with its wet-chicken maps `wet-chicken.svg`.
pub(crate) fn write_report(
    harness: &harness::ToyHarness,
    rows: &[&ToyRow],
    wet_chicken: Option<&lv::WetChickenMaps>,
    out: &crate::runner::OutFolder,
    wall: f64,
) -> Result<(), Box<dyn Error>> {
    let (options, toys) = (harness.options(), harness.toys());
    let toy_of = |name: &str| toys.iter().find(|t| t.name == name).expect("a row's toy");
    let mut results = Vec::new();
    let mut curves = Vec::new();
    let mut lv_curves = Vec::new();
    for row in rows {
        match row {
            ToyRow::Fit { result, curves: c } => {
                results.push(result.clone());
                curves.push(c);
            }
            ToyRow::Lv {
                result,
                curves: c,
                lv,
            } => {
                results.push(result.clone());
                curves.push(c);
                // The rug's training inputs are not in the record: the toy's seed gives them.
                let mut lv = lv.clone();
                lv.train_x = toy_of(&lv.toy).train.x.clone();
                lv_curves.push(lv);
            }
            ToyRow::WetChicken(_) => {}
        }
    }
    let (epochs, draws) = (options.epochs(), options.draws());
    let mut md = markdown(options, epochs, &results, wall);
    if let Some(m) = wet_chicken {
        md.push_str(&lv_markdown(m, draws));
    }
    let record = experiment::record(
        "toy",
        options,
        wall,
        &results,
        serde_json::json!({
            "epochs": epochs,
            "n_train": N_TRAIN,
            "n_test": N_TEST,
            "prediction_samples": decomposition::PRED_SAMPLES,
            "bnn_lv_draws": draws,
            "bnn_lv_curves": lv_curves,
            "wet_chicken": wet_chicken,
        }),
    );
    out.write_record("toy.json", &record)?;
    out.write("toy.md", md.as_bytes())?;
    let panels: Vec<Panel> = results
        .iter()
        .zip(&curves)
        .map(|(r, c)| {
            let t = toy_of(&r.toy);
            Panel {
                title: format!("{}: {}", r.toy, r.row.method),
                data: &t.train,
                curves: c,
                x_range: t.x_range,
                y_range: t.y_range,
            }
        })
        .collect();
    // One column per method of the widest toy.
    let cols = toys
        .iter()
        .map(|t| results.iter().filter(|r| r.toy == t.name).count())
        .max()
        .unwrap_or(1);
    use crate::plots::write_svg;
    write_svg(out, "toy.svg", |p| decomposition::plot(p, &panels, cols))?;
    if !lv_curves.is_empty() {
        write_svg(out, "toy-lv.svg", |p| lv::plot_curves(p, &lv_curves))?;
    }
    if let Some(m) = wet_chicken {
        write_svg(out, "wet-chicken.svg", |p| lv::plot_wet_chicken(p, m))?;
    }
    println!("{md}");
    *harness.results.borrow_mut() = results;
    Ok(())
}
