//! The tables of a `continual` run: average accuracy after each task, the test-time-knowledge
//! score, and the second task's predictive entropy beside Fig. 5.1's numbers.

use super::*;
use crate::uci::fmt_mean_se;
use bnn_burn::metrics::mean_and_standard_error as mean_se;

/// Fig. 5.1's mean predictive entropy on the second task: permuted and split MNIST.
pub const PUBLISHED_ENTROPY: [(Sequence, f64); 2] = [
    (Sequence::PermutedMnist, 0.45),
    (Sequence::SplitMnist, 0.003),
];

/// The groups of `rows` in first-seen order of `key`.
fn groups<K: PartialEq + Copy>(
    rows: &[ContinualRow],
    key: impl Fn(&ContinualRow) -> K,
) -> Vec<(K, Vec<&ContinualRow>)> {
    let mut out: Vec<(K, Vec<&ContinualRow>)> = Vec::new();
    for r in rows {
        let k = key(r);
        match out.iter_mut().find(|g| g.0 == k) {
            Some(g) => g.1.push(r),
            None => out.push((k, vec![r])),
        }
    }
    out
}

/// The mean accuracy over the tasks seen after each task (% ± s.e. over seeds), one table per
/// sequence and heads, one row per strategy and family; the last column is the final average
/// over each task's own classes (test-time knowledge for a single head).
pub fn continual_table(rows: &[ContinualRow]) -> String {
    let mut md = String::new();
    for ((sequence, heads), group) in groups(rows, |r| (r.task.sequence, r.task.heads)) {
        let tasks = group.iter().map(|r| r.scores.len()).max().unwrap_or(0);
        let own = match heads {
            Heads::Single => "test-time knowledge, final",
            Heads::Multi => "own head, final",
        };
        md.push_str(&format!(
            "**{}, {}-head** (average test accuracy % over the tasks seen, after each task)\n\n\
             | strategy | family | seeds |{} {own} |\n|---|---|---:|{}---:|\n",
            sequence.name(),
            match heads {
                Heads::Single => "single",
                Heads::Multi => "multi",
            },
            (1..=tasks).map(|t| format!(" {t} |")).collect::<String>(),
            "---:|".repeat(tasks),
        ));
        let owned: Vec<ContinualRow> = group.iter().map(|r| (*r).clone()).collect();
        let mut by_method = groups(&owned, |r| (r.task.method, r.task.family));
        // In the command line's order: strategy, then family.
        by_method.sort_by_key(|((s, f), _)| (*s as usize, *f as usize));
        for ((strategy, family), runs) in by_method {
            let cells: String = (0..tasks)
                .map(|t| {
                    let v: Vec<f64> = runs
                        .iter()
                        .filter_map(|r| r.average().get(t).copied())
                        .collect();
                    let (m, se) = mean_se(&v);
                    format!(" {} |", fmt_mean_se(m, se, 1))
                })
                .collect();
            let finals: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.known_task.last())
                .map(|row| row.iter().sum::<f64>() / row.len() as f64)
                .collect();
            let (m, se) = mean_se(&finals);
            md.push_str(&format!(
                "| {} | {} | {} |{cells} {} |\n",
                strategy.name(),
                family.name(),
                runs.len(),
                fmt_mean_se(m, se, 1)
            ));
        }
        md.push('\n');
    }
    md
}

/// The first task's model's mean predictive entropy on the second task's test images (nats,
/// ± s.e. over the single-head sequences that trained it), per sequence and family, beside
/// Fig. 5.1's. (A multi-head model's other heads are untrained: its ten-way entropy says
/// nothing.)
pub fn entropy_table(rows: &[ContinualRow]) -> String {
    let single: Vec<ContinualRow> = rows
        .iter()
        .filter(|r| r.task.heads == Heads::Single)
        .cloned()
        .collect();
    let rows = &single[..];
    let mut md = String::from(
        "| sequence | family | runs | entropy on task 2 (nats) | Farquhar (2022) Fig. 5.1 |\n\
         |---|---|---:|---:|---:|\n",
    );
    for ((sequence, family), group) in groups(rows, |r| (r.task.sequence, r.task.family)) {
        let v: Vec<f64> = group.iter().filter_map(|r| r.second_task_entropy).collect();
        if v.is_empty() {
            continue;
        }
        let (m, se) = mean_se(&v);
        let published = PUBLISHED_ENTROPY
            .iter()
            .find(|p| p.0 == sequence)
            .map_or("–".to_string(), |p| p.1.to_string());
        md.push_str(&format!(
            "| {} | {} | {} | {} | {published} |\n",
            sequence.name(),
            family.name(),
            v.len(),
            fmt_mean_se(m, se, 3)
        ));
    }
    md
}

/// The report of a run.
pub fn markdown(rows: &[ContinualRow], o: &ContinualOptions, wall: f64) -> String {
    let mut md = format!(
        "# Continual learning (Farquhar 2022 §5.1)\n\n\
         An MLP 784 → {} → 10 per sequence, {} epochs per task at batch {} (Adam {}), a \
         coreset of {} k-center images per task fine-tuned on for {} epochs (Adam {}) before \
         testing, EWC with λ = {}; {} posterior draws per test prediction. Mean ± standard \
         error over seeds.\n\n",
        HIDDEN.map(|h| h.to_string()).join(" → "),
        o.epochs(),
        o.batch_size,
        o.learning_rate,
        o.coreset,
        o.coreset_epochs(),
        o.coreset_learning_rate,
        o.ewc_lambda,
        o.samples,
    );
    md.push_str(&continual_table(rows));
    md.push_str("Fig. 5.1's diagnostic:\n\n");
    md.push_str(&entropy_table(rows));
    md.push_str(&format!("\nWall time {wall:.0} s.\n"));
    md
}
