//! Tables taken from a harness's own report, rebuilt in memory from its records: the book
//! shows the report's table, never a copy of it.

use std::error::Error;
use std::path::Path;

/// The first table after the line `heading` of the Markdown report `md`, and after the line
/// `then` below it when given.
///
/// # Errors
/// No such heading, or no table after it.
pub(super) fn table_after(md: &str, heading: &str, then: Option<&str>) -> Result<String, String> {
    let mut lines = md.lines().skip_while(|l| *l != heading);
    if lines.next().is_none() {
        return Err(format!("the report has no `{heading}`"));
    }
    if let Some(then) = then
        && !lines.any(|l| l == then)
    {
        return Err(format!("the report has no `{then}` under `{heading}`"));
    }
    let table: Vec<&str> = lines
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    if table.is_empty() {
        return Err(format!("the report has no table under `{heading}`"));
    }
    Ok(table.join("\n") + "\n")
}

/// The UCI report of the full protocol's record (`assets/uci/uci.json`).
fn uci(assets: &Path) -> Result<String, Box<dyn Error>> {
    uci_report(assets, "uci")
}

/// The UCI report of the record in `assets/<folder>/uci.json`.
fn uci_report(assets: &Path, folder: &str) -> Result<String, Box<dyn Error>> {
    let record = assets.join(folder).join("uci.json");
    let (options, rows, wall) = crate::uci::joined(&[record], &assets.join(folder))?;
    Ok(crate::uci::markdown(&options, &rows, wall))
}

/// Test LL of the post-hoc methods (`assets/uci-posthoc`), the full protocol.
pub(super) fn uci_posthoc_ll(assets: &Path) -> Result<String, Box<dyn Error>> {
    Ok(table_after(
        &uci_report(assets, "uci-posthoc")?,
        "## Test log-likelihood (higher is better)",
        None,
    )?)
}

/// Test RMSE of the post-hoc methods (`assets/uci-posthoc`), the full protocol.
pub(super) fn uci_posthoc_rmse(assets: &Path) -> Result<String, Box<dyn Error>> {
    Ok(table_after(
        &uci_report(assets, "uci-posthoc")?,
        "## Test RMSE (lower is better)",
        None,
    )?)
}

/// 90 % interval coverage of the post-hoc methods (`assets/uci-posthoc`).
pub(super) fn uci_posthoc_coverage(assets: &Path) -> Result<String, Box<dyn Error>> {
    Ok(table_after(
        &uci_report(assets, "uci-posthoc")?,
        "## Coverage of the central 90 % predictive interval (nominal 0.90)",
        None,
    )?)
}

/// Test LL of mean-field VI with and without the empirical-Bayes prior scale
/// (`assets/uci-eb`, 5 splits per set).
pub(super) fn uci_eb_ll(assets: &Path) -> Result<String, Box<dyn Error>> {
    Ok(table_after(
        &uci_report(assets, "uci-eb")?,
        "## Test log-likelihood (higher is better)",
        None,
    )?)
}

/// Test LL of the late empirical-Bayes prior on the protocol's splits (`assets/uci-eb-full`).
pub(super) fn uci_eb_full_ll(assets: &Path) -> Result<String, Box<dyn Error>> {
    Ok(table_after(
        &uci_report(assets, "uci-eb-full")?,
        "## Test log-likelihood (higher is better)",
        None,
    )?)
}

/// 90 % interval coverage of the same rows (`assets/uci-eb`).
pub(super) fn uci_eb_coverage(assets: &Path) -> Result<String, Box<dyn Error>> {
    Ok(table_after(
        &uci_report(assets, "uci-eb")?,
        "## Coverage of the central 90 % predictive interval (nominal 0.90)",
        None,
    )?)
}

/// Test LL of KFAC Laplace with one λ per layer (`assets/uci-kfac-layer`).
pub(super) fn uci_kfac_layer_ll(assets: &Path) -> Result<String, Box<dyn Error>> {
    Ok(table_after(
        &uci_report(assets, "uci-kfac-layer")?,
        "## Test log-likelihood (higher is better)",
        None,
    )?)
}

/// Raw and split-conformal 90 % coverage of the same rows (`assets/uci-kfac-layer`).
pub(super) fn uci_kfac_layer_coverage(assets: &Path) -> Result<String, Box<dyn Error>> {
    let report = uci_report(assets, "uci-kfac-layer")?;
    let raw = table_after(
        &report,
        "## Coverage of the central 90 % predictive interval (nominal 0.90)",
        None,
    )?;
    let conformal = table_after(&report, "## Split-conformal coverage (nominal 0.90)", None)?;
    Ok(format!("Raw:\n\n{raw}\nSplit-conformal:\n\n{conformal}"))
}

/// Test LL of every method and published column, the full protocol.
pub(super) fn uci_ll(assets: &Path) -> Result<String, Box<dyn Error>> {
    Ok(table_after(
        &uci(assets)?,
        "## Test log-likelihood (higher is better)",
        None,
    )?)
}

/// Test RMSE of every method and published column, the full protocol.
pub(super) fn uci_rmse(assets: &Path) -> Result<String, Box<dyn Error>> {
    Ok(table_after(
        &uci(assets)?,
        "## Test RMSE (lower is better)",
        None,
    )?)
}

/// The test LL's difference to each published counterpart in combined standard errors.
pub(super) fn uci_z(assets: &Path) -> Result<String, Box<dyn Error>> {
    Ok(table_after(
        &uci(assets)?,
        "## Difference to the published counterpart, in combined standard errors",
        Some("Test log-likelihood:"),
    )?)
}

/// One method's rows in the `uci` records of `folders` against one published column: per data
/// set and epoch budget, the splits, test LL and RMSE (mean ± s.e. over splits) beside the
/// published cell (± s.e.), the LL's difference, and z in combined standard errors (positive:
/// ours better; [`crate::uci::z_score`], the published cell's rounding included).
fn uci_against(
    assets: &Path,
    folders: &[&str],
    method: &str,
    column: &str,
) -> Result<String, Box<dyn Error>> {
    use crate::uci::{MethodResult, fmt_mean_se, z_score};
    let published = crate::published::uci::all();
    let theirs = published
        .iter()
        .find(|c| c.column.name == column)
        .ok_or_else(|| format!("no published UCI column {column:?}"))?;
    let mut rows: Vec<MethodResult> = Vec::new();
    for folder in folders {
        let path = assets.join(folder).join("uci.json");
        let record = super::read_json(&path)?;
        let results: Vec<MethodResult> = serde_json::from_value(record["results"].clone())
            .map_err(|e| format!("{}: unreadable results ({e})", path.display()))?;
        rows.extend(results.into_iter().filter(|r| r.method == method));
    }
    if rows.is_empty() {
        return Err(format!("no {method} rows in {folders:?}").into());
    }
    let order = |r: &MethodResult| {
        (
            crate::uci::published_index(&r.dataset).unwrap_or(usize::MAX),
            r.budget.epochs,
        )
    };
    rows.sort_by_key(order);
    let mut md = format!(
        "| data set | epochs | splits | test LL | {column} | difference | z | test RMSE | \
         {column} | z |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for r in &rows {
        let i = crate::uci::published_index(&r.dataset);
        let (ll, rmse) = (r.ll(), r.rmse());
        let p_ll = i.and_then(|i| theirs.test_ll[i]);
        let p_rmse = i.and_then(|i| theirs.test_rmse[i]);
        let cell =
            |c: Option<(f64, f64)>| c.map_or("–".into(), |(m, s)| fmt_mean_se(m, Some(s), 2));
        let z = |ours, c: Option<(f64, f64)>, higher| {
            c.and_then(|c| z_score(ours, c, higher))
                .map_or("–".into(), |z| format!("{z:+.1}"))
        };
        let _ = std::fmt::Write::write_fmt(
            &mut md,
            format_args!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                r.dataset.name(),
                r.budget.epochs,
                r.splits.len(),
                fmt_mean_se(ll.0, ll.1, 2),
                cell(p_ll),
                p_ll.map_or("–".into(), |(m, _)| format!("{:+.2}", ll.0 - m)),
                z(ll, p_ll, true),
                fmt_mean_se(rmse.0, rmse.1, 3),
                cell(p_rmse),
                z(rmse, p_rmse, false),
            ),
        );
    }
    Ok(md)
}

/// MC dropout under Gal's protocol, at the stated 400 epochs and at his 4 000.
pub(super) fn uci_mc_dropout(assets: &Path) -> Result<String, Box<dyn Error>> {
    uci_against(
        assets,
        &["uci-mc-dropout", "uci-mc-dropout-100x"],
        "MC dropout",
        "MC dropout (Gal, updated)",
    )
}

/// VBP against Haußmann's Table 3.1.
pub(super) fn uci_vbp(assets: &Path) -> Result<String, Box<dyn Error>> {
    uci_against(assets, &["uci-vbp"], "VBP", "VBP (Haußmann)")
}

/// DVI against Wu et al.'s column of Haußmann's Table 3.1.
pub(super) fn uci_dvi(assets: &Path) -> Result<String, Box<dyn Error>> {
    uci_against(assets, &["uci-dvi-clt"], "DVI", "DVI (Wu et al.)")
}

/// BEDL against Haußmann's Table 5.1.
pub(super) fn uci_bedl(assets: &Path) -> Result<String, Box<dyn Error>> {
    uci_against(assets, &["uci-bedl"], "BEDL", "BEDL (Haußmann)")
}

/// BEDL-PAC against Haußmann's Table 5.1.
pub(super) fn uci_bedl_pac(assets: &Path) -> Result<String, Box<dyn Error>> {
    uci_against(assets, &["uci-bedl"], "BEDL-PAC", "BEDL-PAC (Haußmann)")
}

/// BEDL-Hyper against Haußmann's Table 5.1.
pub(super) fn uci_bedl_hyper(assets: &Path) -> Result<String, Box<dyn Error>> {
    uci_against(assets, &["uci-bedl"], "BEDL-Hyper", "BEDL-Hyper (Haußmann)")
}

/// The BNN+LV MNIST record's models (`assets/lv-mnist-quick/lv-mnist.json`).
fn lv_mnist(assets: &Path) -> Result<serde_json::Value, Box<dyn Error>> {
    super::read_json(&assets.join("lv-mnist-quick/lv-mnist.json"))
}

/// The three BNN+LV models on MNIST at the quick budget.
pub(super) fn lv_mnist_models(assets: &Path) -> Result<String, Box<dyn Error>> {
    let scenarios: Vec<crate::lv_mnist::ScenarioResult> =
        serde_json::from_value(lv_mnist(assets)?["scenarios"].clone())
            .map_err(|e| format!("lv-mnist-quick: unreadable scenarios ({e})"))?;
    Ok(crate::lv_mnist::models_table(&scenarios))
}

/// Depeweg's three patterns of the decomposition on MNIST, as measured.
pub(super) fn lv_mnist_patterns(assets: &Path) -> Result<String, Box<dyn Error>> {
    let findings: crate::lv_mnist::Findings =
        serde_json::from_value(lv_mnist(assets)?["findings"].clone())
            .map_err(|e| format!("lv-mnist-quick: unreadable findings ({e})"))?;
    Ok(crate::lv_mnist::patterns_table(&findings))
}

/// The rows of the Depeweg record in `assets/<folder>/depeweg.json` and its split count.
fn depeweg(
    assets: &Path,
    folder: &str,
) -> Result<(Vec<crate::depeweg::TableRow>, usize), Box<dyn Error>> {
    let path = assets.join(folder).join("depeweg.json");
    let record = super::read_json(&path)?;
    let rows = serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: unreadable results ({e})", path.display()))?;
    let splits = record["options"]["splits"]
        .as_u64()
        .ok_or_else(|| format!("{}: no options.splits", path.display()))?;
    Ok((rows, splits as usize))
}

/// Depeweg's Tables 5.1/5.2: every finished (set, model) beside the published cells.
pub(super) fn depeweg_table(assets: &Path) -> Result<String, Box<dyn Error>> {
    let (rows, splits) = depeweg(assets, "depeweg")?;
    Ok(crate::depeweg::main_table(&rows, splits))
}

/// Table 5.2's MLP ensemble column (`assets/depeweg-mlp-ens`) beside the published cells.
pub(super) fn depeweg_mlp_ens(assets: &Path) -> Result<String, Box<dyn Error>> {
    let (rows, splits) = depeweg(assets, "depeweg-mlp-ens")?;
    Ok(crate::depeweg::main_table(&rows, splits))
}

/// Per model, the sets at or above the published test LL within one combined s.e.
pub(super) fn depeweg_targets(assets: &Path) -> Result<String, Box<dyn Error>> {
    let (rows, splits) = depeweg(assets, "depeweg")?;
    Ok(crate::depeweg::targets_table(&rows, splits))
}

/// Table 5.2's ranking of the α columns per set, ours beside the thesis's.
pub(super) fn depeweg_alpha(assets: &Path) -> Result<String, Box<dyn Error>> {
    let (rows, splits) = depeweg(assets, "depeweg")?;
    Ok(crate::depeweg::alpha_table(&rows, splits))
}

/// The same nets' test LL under the wider mixture.
pub(super) fn depeweg_wide(assets: &Path) -> Result<String, Box<dyn Error>> {
    Ok(crate::depeweg::wide_table(&depeweg(assets, "depeweg")?.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_found_under_its_heading_only() {
        let md = "# r\n\n## a\n\n| x |\n|---|\n| 1 |\n\n## b\n\nText:\n\n| y |\n|---|\n| 2 |\n";
        assert_eq!(
            table_after(md, "## a", None).unwrap(),
            "| x |\n|---|\n| 1 |\n"
        );
        assert_eq!(
            table_after(md, "## b", Some("Text:")).unwrap(),
            "| y |\n|---|\n| 2 |\n"
        );
        assert!(table_after(md, "## c", None).unwrap_err().contains("## c"));
        assert!(table_after("## a\n\nno table\n", "## a", None).is_err());
    }
}
