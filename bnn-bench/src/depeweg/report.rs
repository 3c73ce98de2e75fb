//! The tables: every (set, model) over its finished splits, beside the published cells.

use super::*;
use std::path::Path;

/// A table row: one (data set, model) over its finished splits.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct TableRow {
    /// Data set name.
    pub dataset: String,
    /// Model name.
    pub model: String,
    /// Finished splits.
    pub splits: usize,
    /// Test LL, mean ± s.e. over splits (no s.e. for a single split).
    pub ll: MeanSe,
    /// Test RMSE, mean ± s.e.
    pub rmse: MeanSe,
    /// Published LL and RMSE.
    pub published_ll: Option<(f64, f64)>,
    /// Published RMSE.
    pub published_rmse: Option<(f64, f64)>,
    /// z of the LL against the published (higher is better; combined s.e.).
    pub z_ll: Option<f64>,
    /// z of the RMSE against the published (positive: ours lower).
    pub z_rmse: Option<f64>,
    /// `(T, LL mean ± s.e., z)` of the `T`-draw mixtures, when every split measured one of `T`.
    pub wide: Option<(usize, MeanSe, Option<f64>)>,
    /// Sum of the splits' seconds.
    pub seconds: f64,
}

/// The table rows of `rows` (every (set, model) present, in table order).
pub fn table(rows: &[SplitRow]) -> Result<Vec<TableRow>, String> {
    let mut out = Vec::new();
    for set in ALL_SETS {
        for model in MODELS {
            let mine: Vec<&SplitRow> = rows
                .iter()
                .filter(|r| r.dataset == set.name() && r.model == model.name)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let label = format!("{} / {}", set.name(), model.name);
            for r in &mine {
                experiment::check_finite(&label, "test LL", r.test_ll)?;
                experiment::check_finite(&label, "test RMSE", r.test_rmse)?;
            }
            let ll = mean_and_standard_error(&mine.iter().map(|r| r.test_ll).collect::<Vec<_>>());
            let rmse =
                mean_and_standard_error(&mine.iter().map(|r| r.test_rmse).collect::<Vec<_>>());
            let p = published(set, &model);
            let wide = match mine.iter().map(|r| r.wide).collect::<Option<Vec<_>>>() {
                Some(w) if w.iter().all(|&(t, _)| t == w[0].0) => {
                    let lls: Vec<f64> = w.iter().map(|&(_, ll)| ll).collect();
                    experiment::check_finite(&label, "wide test LL", lls.iter().sum())?;
                    let ll = mean_and_standard_error(&lls);
                    Some((w[0].0, ll, p.and_then(|p| z_score(ll, p.ll, true))))
                }
                _ => None,
            };
            out.push(TableRow {
                wide,
                dataset: set.name().into(),
                model: model.name.into(),
                splits: mine.len(),
                ll,
                rmse,
                published_ll: p.map(|p| p.ll),
                published_rmse: p.map(|p| p.rmse),
                z_ll: p.and_then(|p| z_score(ll, p.ll, true)),
                z_rmse: p.and_then(|p| z_score(rmse, p.rmse, false)),
                seconds: mine.iter().map(|r| r.seconds).sum(),
            });
        }
    }
    Ok(out)
}

/// The target of the issue: BNN+LV (α = 1, Table 5.1's column) at or above the published test
/// LL within one combined s.e. (`z ≥ −1`): (met, finished rows with a z). A row counts once
/// all `splits` of its splits are finished.
pub fn targets_met(rows: &[TableRow], splits: usize) -> (usize, usize) {
    count_met(rows, splits, MODELS[3].name, |r| r.z_ll)
}

/// [`targets_met`] with each row's z of its wide mixture ([`TableRow::wide`]) where it has one.
pub fn targets_met_wide(rows: &[TableRow], splits: usize) -> (usize, usize) {
    count_met(rows, splits, MODELS[3].name, wide_z)
}

/// A row's z of its wide mixture where it has one, else its own.
fn wide_z(r: &TableRow) -> Option<f64> {
    r.wide.and_then(|w| w.2).or(r.z_ll)
}

fn count_met(
    rows: &[TableRow],
    splits: usize,
    model: &str,
    z: impl Fn(&TableRow) -> Option<f64>,
) -> (usize, usize) {
    let zs: Vec<f64> = rows
        .iter()
        .filter(|r| r.model == model && r.splits >= splits)
        .filter_map(z)
        .collect();
    (zs.iter().filter(|&&z| z >= -1.0).count(), zs.len())
}

/// Per model with a finished set: the sets at or above the published test LL within one
/// combined s.e. (`z ≥ −1`), by the budget's mixture and with each row's widest one.
pub fn targets_table(rows: &[TableRow], splits: usize) -> String {
    let mut s = String::from(
        "| model | sets finished | at or above the published LL | with the widest mixtures |\n\
         |---|---:|---:|---:|\n",
    );
    for model in MODELS {
        let (met, of) = count_met(rows, splits, model.name, |r| r.z_ll);
        if of == 0 {
            continue;
        }
        let (wide, _) = count_met(rows, splits, model.name, wide_z);
        s.push_str(&format!("| {} | {of} | {met} | {wide} |\n", model.name));
    }
    s
}

fn cell(v: MeanSe, digits: usize) -> String {
    crate::uci::fmt_mean_se(v.0, v.1, digits)
}

fn opt_cell(v: Option<(f64, f64)>, digits: usize) -> String {
    v.map_or_else(|| "–".into(), |v| cell((v.0, Some(v.1)), digits))
}

fn z_cell(z: Option<f64>) -> String {
    z.map_or_else(|| "–".into(), |z| format!("{z:+.2}"))
}

/// The Markdown report of `rows` under `options`.
pub fn markdown(options: &DepewegOptions, rows: &[TableRow]) -> String {
    let b = &options.budget;
    let mut s = format!(
        "# Depeweg (2019) Tables 5.1 / 5.2: BNN and BNN+LV under black-box α\n\n\
         Random 90/10 splits (mean ± standard error over the finished splits, `± –` and no z \
         for a single one; the thesis: 5, its ± also s.e.); 2 hidden ReLU layers (50 units, 20 \
         for the toys and wet-chicken); {} epochs (the thesis: 5 000), Adam {}, minibatch N/{}, \
         K = {} draws per step, test mixture of {} draws. z = (ours − published) / √(s.e.² + \
         s.e.² + rounding²), signed so that positive is better. Naval RMSE ×100 as printed.\n\n",
        b.epochs, b.learning_rate, b.batches, b.train_samples, b.test_draws
    );
    let (met, of) = targets_met(rows, options.splits);
    s.push_str(&format!(
        "BNN+LV α = 1 at or above Table 5.1's BNN+LV test LL within one combined s.e.: {met} \
         of {of} sets with all {} split{} finished (the issue's target: 7 of 10). Rows with \
         fewer splits are marked *.\n\n",
        options.splits,
        if options.splits == 1 { "" } else { "s" }
    ));
    s.push_str(&main_table(rows, options.splits));
    if rows.iter().any(|r| r.wide.is_some()) {
        s.push_str(
            "\nThe same nets' test LL under wider mixtures (the first draws those above; the \
             estimate `ln (1/T) Σ_t p_t(y)` is biased low by an amount that shrinks with `T`, \
             most where the predictive is spiky). Rows whose every split measured it:\n\n",
        );
        s.push_str(&wide_table(rows));
        let (met, of) = targets_met_wide(rows, options.splits);
        s.push_str(&format!(
            "\nWith these estimates where a row has one (else the {}-draw one): {met} of {of} sets \
             at or above Table 5.1's BNN+LV test LL within one combined s.e.\n",
            b.test_draws
        ));
    }
    s.push_str(
        "\nPer model, the sets at or above the published test LL within one combined s.e.:\n\n",
    );
    s.push_str(&targets_table(rows, options.splits));
    let alpha = alpha_table(rows, options.splits);
    if alpha.lines().count() > 3 {
        s.push_str(
            "\nTable 5.2's finding that a lower α gives a lower test LL, set by set (the three \
             BNN+LV columns ranked by test LL, ours beside the thesis's):\n\n",
        );
        s.push_str(&alpha);
    }
    s
}

/// The main table: per data set and model, the test LL and RMSE (mean ± s.e. over the
/// finished splits; `*` marks a row with fewer than `splits`) beside Table 5.1/5.2 with z.
pub fn main_table(rows: &[TableRow], splits: usize) -> String {
    let mut s = String::from(
        "| data set | model | splits | test LL | published | z | test RMSE | published | z | s |\n",
    );
    s.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let scale = if r.dataset == "naval" { 100.0 } else { 1.0 };
        let sc = |v: (f64, f64)| (v.0 * scale, v.1 * scale);
        let sc_ours = |v: MeanSe| (v.0 * scale, v.1.map(|se| se * scale));
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} |\n",
            r.dataset,
            r.model,
            if r.splits < splits {
                format!("{}*", r.splits)
            } else {
                r.splits.to_string()
            },
            cell(r.ll, 3),
            opt_cell(r.published_ll, 2),
            z_cell(r.z_ll),
            cell(sc_ours(r.rmse), 3),
            opt_cell(r.published_rmse.map(sc), 2),
            z_cell(r.z_rmse),
            r.seconds
        ));
    }
    s
}

/// The rows' test LL under the wider mixture, where every split of a row measured it.
pub fn wide_table(rows: &[TableRow]) -> String {
    let mut s = String::from(
        "| data set | model | splits | T | test LL | published | z |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let Some((t, ll, z)) = r.wide else { continue };
        s.push_str(&format!(
            "| {} | {} | {} | {t} | {} | {} | {} |\n",
            r.dataset,
            r.model,
            r.splits,
            cell(ll, 3),
            opt_cell(r.published_ll, 2),
            z_cell(z)
        ));
    }
    s
}

/// Table 5.2's finding that lower α gives a lower test LL, set by set: the three BNN+LV
/// columns (VB, α = ½, α = 1) ranked by their test LL beside the thesis's ranking of its cells.
/// A set counts once all `splits` of the three are finished; each column's LL is its widest
/// mixture where all three have one. The orders agree when every pair the thesis orders
/// strictly is ordered the same way (a tie in the thesis allows either).
pub fn alpha_table(rows: &[TableRow], splits: usize) -> String {
    const COLUMNS: [(&str, &str); 3] = [
        (MODELS[1].name, "VB"),
        (MODELS[2].name, "½"),
        (MODELS[3].name, "1"),
    ];
    let mut s = String::from(
        "| data set | T | VB | α = ½ | α = 1 | ours | thesis | same order |\n\
         |---|---:|---:|---:|---:|---|---|---|\n",
    );
    let (mut same, mut sets) = (0, 0);
    let mut names: Vec<&str> = rows.iter().map(|r| r.dataset.as_str()).collect();
    names.dedup();
    for name in names {
        let found: Vec<&TableRow> = COLUMNS
            .iter()
            .filter_map(|(model, _)| {
                rows.iter()
                    .find(|r| r.dataset == name && r.model == *model && r.splits >= splits)
            })
            .collect();
        let Ok(three) = <[&TableRow; 3]>::try_from(found) else {
            continue;
        };
        let Some(published) = three
            .iter()
            .map(|r| r.published_ll.map(|p| p.0))
            .collect::<Option<Vec<f64>>>()
        else {
            continue;
        };
        let wide: Option<Vec<(usize, MeanSe)>> =
            three.iter().map(|r| r.wide.map(|w| (w.0, w.1))).collect();
        let (t, ours): (String, Vec<MeanSe>) = match wide {
            Some(w) if w.iter().all(|x| x.0 == w[0].0) => {
                (w[0].0.to_string(), w.iter().map(|x| x.1).collect())
            }
            _ => ("budget".into(), three.iter().map(|r| r.ll).collect()),
        };
        let values: Vec<f64> = ours.iter().map(|v| v.0).collect();
        let agree =
            (0..3).all(|i| (0..3).all(|j| published[i] <= published[j] || values[i] > values[j]));
        sets += 1;
        same += usize::from(agree);
        s.push_str(&format!(
            "| {name} | {t} | {} | {} | {} | {} | {} | {} |\n",
            cell(ours[0], 3),
            cell(ours[1], 3),
            cell(ours[2], 3),
            alpha_order(&values, &COLUMNS.map(|c| c.1)),
            alpha_order(&published, &COLUMNS.map(|c| c.1)),
            if agree { "yes" } else { "no" }
        ));
    }
    s.push_str(&format!(
        "| sets in the thesis's order | | | | | {same} of {sets} | | |\n"
    ));
    s
}

/// `labels` from the highest value to the lowest, `>` between them (`=` for equal values).
fn alpha_order(values: &[f64], labels: &[&str]) -> String {
    let mut at: Vec<usize> = (0..values.len()).collect();
    at.sort_by(|&i, &j| values[j].total_cmp(&values[i]));
    let mut s = labels[at[0]].to_string();
    for w in at.windows(2) {
        let sep = if values[w[0]] == values[w[1]] {
            " = "
        } else {
            " > "
        };
        s.push_str(sep);
        s.push_str(labels[w[1]]);
    }
    s
}

/// The rows in `out/rows` written before rows were records of the bench's runner (a file
/// per split named by set, model, budget, seed and split, without a checksum), under this
/// run's budget and seed: reported beside the runner's, never resumed (they name no data).
pub fn legacy_rows(out: &Path, options: &DepewegOptions) -> Result<Vec<SplitRow>, String> {
    let dir = out.join("rows");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let mut rows = Vec::new();
    for p in paths {
        if let crate::runner::ReadRecord::Intact(v) = crate::runner::read_record(&p, true)?
            && v.get("harness").is_none()
            && let Ok(row) = serde_json::from_value::<SplitRow>(v)
            && row.budget == options.budget
            && row.seed == options.seed
        {
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Writes `depeweg.md` and `depeweg.json` from `rows` (and the folder's legacy rows of other
/// splits, [`legacy_rows`]); returns the table.
pub(crate) fn write_report(
    options: &DepewegOptions,
    mut rows: Vec<SplitRow>,
    wall: f64,
    out: &crate::runner::OutFolder,
) -> Result<Vec<TableRow>, Box<dyn Error>> {
    for old in legacy_rows(out.path(), options)? {
        let same =
            |r: &SplitRow| r.dataset == old.dataset && r.model == old.model && r.split == old.split;
        if !rows.iter().any(same) {
            rows.push(old);
        }
    }
    let table = table(&rows)?;
    let md = markdown(options, &table);
    let record = experiment::record(
        "depeweg",
        options,
        wall,
        &table,
        serde_json::json!({ "splits_finished": rows }),
    );
    out.write_record("depeweg.json", &record)?;
    out.write("depeweg.md", md.as_bytes())?;
    println!("{md}");
    Ok(table)
}
