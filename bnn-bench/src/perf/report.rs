//! The training-step benchmark's report.

use super::*;

/// `perf.md`: one table per architecture, each row's ratio to both deterministic baselines and
/// to the PyTorch peers (bayesian-torch, PyTorch's deterministic step); and `perf.json` with
/// every round.
pub(crate) fn write_report(
    folder: &crate::runner::OutFolder,
    options: &PerfOptions,
    rows: &[PerfRow],
    notes: &[String],
    kept_freed_memory: bool,
    wall_seconds: f64,
) -> Result<(), Box<dyn Error>> {
    let mut table = format!(
        "# Training-step benchmark\n\nAdam, one posterior sample per step, loss = mean squared error \
         + KL/60000, random inputs and targets; the black-box α rows: Depeweg's weights, {} joint \
         weight draws per step with their ln q − ln p, black-box α = 1 with ℓ = −Σ(o − y)², \
         N = 60000; the MAP rows: bnn-burn's layers with point weights (the KL term is the \
         N(0, 1) prior's negative log density), one with train-time dropout of half the dense \
         layers' hidden units; the BEDL-PAC row: the evidential head trained by CLT moments under the \
         PAC-Bayes bound of eq. 5.10 (5 draws of the logits' moments), random labels, fused Adam; \
         the DVI row: the categorical head trained by CLT moments under the ELBO (Taylor logits, \
         Haußmann's moment weights, whose KL clamps ln σ², prior precision 100), random labels; \
         the VCL rows: MFVI and the low-rank Gaussian (rank 2) whose prior is a posterior, a mean \
         and a standard deviation per weight (the initial posterior's, as variational continual \
         learning takes the last task's); the peers: bayesian-torch's mean-field layers and PyTorch's \
         deterministic layers on the same net and step (`xcheck/perf_peers.py`). \
         Backend `{}`, built from revision `{}`; {} rounds of {} steps after \
         {WARMUP} warm-up steps, the rounds interleaved (each round times every workload once, the \
         peers included). ms/step: the median round; each ratio: the median over rounds of the two \
         times measured in the same round. Bayesian rows run the fused kernels and fused Adam (the \
         training loop's default) unless marked reference (burn ops, burn's Adam). Peak heap: the \
         most bytes live at once while the model was built and warmed up, above those live \
         before. {}\n",
        BLACK_BOX_DRAWS,
        bnn_burn::backend_name(),
        crate::experiment::git_revision(),
        options.rounds,
        options.steps,
        if kept_freed_memory {
            "glibc's heap trimming is off in this process (freed memory is kept, not faulted in \
             again each step)."
        } else {
            "The allocator runs with its defaults."
        }
    );
    let ratio = |v: Option<f64>| v.map_or_else(|| "–".into(), |v| format!("{v:.2}"));
    for &net in &options.nets {
        table.push_str(&format!(
            "\n## {}\n\n| method | ms/step | × det. (burn Adam) | × det. (fused Adam) | \
             × bayesian-torch | × PyTorch det. | × PyTorch BEDL-PAC | peak heap (MiB) |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|\n",
            net.name()
        ));
        let of_net = rows.iter().filter(|r| r.net == net);
        for r in of_net {
            let heap = r
                .peak_heap_bytes
                .map(|b| format!("{:.1}", b as f64 / (1 << 20) as f64))
                .unwrap_or_else(|| "–".into());
            table.push_str(&format!(
                "| {} | {:.2} | {} | {} | {} | {} | {} | {} |\n",
                r.method,
                r.ms_per_step,
                ratio(r.vs_deterministic),
                ratio(r.vs_deterministic_fused_adam),
                ratio(r.vs_bayesian_torch),
                ratio(r.vs_torch),
                ratio(r.vs_torch_bedl_pac),
                heap
            ));
        }
    }
    for note in notes {
        table.push_str(&format!("\n{note}\n"));
    }
    folder.write("perf.md", table.as_bytes())?;
    let extra = serde_json::json!({
        "warmup": WARMUP,
        "interleaved_rounds": true,
        "glibc_trimming_off": kept_freed_memory,
        "notes": notes,
    });
    let record = crate::experiment::record("perf", options, wall_seconds, &rows, extra);
    folder.write_record("perf.json", &record)?;
    println!("{table}");
    Ok(())
}
