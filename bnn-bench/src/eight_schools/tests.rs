use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    options: EightSchoolsOptions,
}

fn options(args: &[&str]) -> EightSchoolsOptions {
    let mut all = vec!["eight-schools", "--out"];
    let dir = std::env::temp_dir().join(format!("bnn-es-{}", std::process::id()));
    let dir = dir.to_string_lossy().to_string();
    let dir: &'static str = Box::leak(dir.into_boxed_str());
    all.push(dir);
    all.extend_from_slice(args);
    Cli::parse_from(all).options
}

#[test]
fn bad_choices_fail_before_any_work_naming_the_flag() {
    for (args, flag) in [
        (vec!["--model", "centered"], "--model"),
        (vec!["--family", "flow"], "--family"),
        (vec!["--steps", "0"], "--steps"),
        (vec!["--replicates", "0"], "--replicates"),
        (vec!["--eval-draws", "10"], "--eval-draws"),
        (vec!["--lr=-1"], "--lr"),
    ] {
        let err = run(&options(&args)).unwrap_err().to_string();
        assert!(err.contains(flag), "{args:?}: {err}");
    }
}

#[test]
fn tasks_cover_every_family_length_and_replicate_and_the_table_reads_the_printed_rows() {
    let o = options(&["--model", "centred", "--steps", "4", "--steps", "8"]);
    let h = EightSchoolsHarness { options: &o };
    let tasks = h.tasks();
    // mean-field, full-rank: 1 row each; 3 flows × 2 lengths; × 3 replicates; + NUTS.
    assert_eq!(tasks.len(), (2 + 3 * 2) * 3 + 1);
    let row = |family: &str, steps, elbo, k_hat| {
        Row::Vi(ViRow {
            model: "centred".into(),
            family: String::from(family),
            steps,
            replicate: 0,
            params: 20,
            elbo,
            elbo_se: 0.01,
            k_hat,
            log_evidence_is: -31.3,
            final_train_elbo: elbo,
            dropped_draws: 0,
            zeroed_gradient_steps: 0,
            seconds: 1.0,
        })
    };
    let rows = vec![row("mean-field", 0, -33.0, 0.9), row("IAF", 4, -32.5, 0.3)];
    let md = table(&rows, "centred").unwrap();
    // Printed mean-field: −33.41, k̂ 0.87 (bad band): within 0.5 and in its band.
    assert!(md.contains("| mean-field | – | 20 (20) | -33.00 ± 0.00 (n = 1) | -33.41 | 0.90 ± 0.00 | 0.87 | yes | yes |"), "{md}");
    // Printed IAF K = 4: −31.53, k̂ 0.57: more than 0.5 nats below, and another band.
    assert!(md.contains("| no | no |"), "{md}");
    let bad = vec![row("mean-field", 0, f64::NAN, 0.9)];
    assert!(table(&bad, "centred").unwrap_err().contains("ELBO"));
}

#[test]
fn a_quick_run_fits_reports_and_resumes() {
    let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 102);
    let dir = std::env::temp_dir().join(format!("bnn-es-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.to_string_lossy().to_string();
    let args = [
        "--out",
        &out,
        "--model",
        "non-centred",
        "--family",
        "mean-field",
        "--family",
        "planar",
        "--steps",
        "2",
        "--replicates",
        "1",
        "--iterations",
        "200",
        "--eval-draws",
        "2000",
        "--nuts-draws",
        "200",
    ];
    let mut all = vec!["eight-schools"];
    all.extend_from_slice(&args);
    let o = Cli::parse_from(all.clone()).options;
    let rows = run(&o).unwrap();
    assert_eq!(rows.len(), 3);
    let evidence = EightSchools::default().log_evidence();
    for r in &rows {
        match r {
            Row::Vi(v) => {
                // No ELBO above the evidence (beyond its Monte Carlo error).
                assert!(v.elbo < evidence + 4.0 * v.elbo_se, "{v:?}");
                assert!(v.k_hat.is_finite());
            }
            Row::Nuts(n) => {
                assert_eq!(n.params.len(), 10);
                assert_eq!(n.derived.len(), 9);
            }
            Row::Peer(_) => unreachable!("no peer without --peer-python"),
        }
    }
    let md = std::fs::read_to_string(dir.join("eight-schools.md")).unwrap();
    assert!(
        md.contains("## non-centred") && md.contains("NUTS, 4 chains"),
        "{md}"
    );
    // Resuming reuses every row.
    all.push("--resume");
    let again = run(&Cli::parse_from(all).options).unwrap();
    assert_eq!(again.len(), 3);
    let _ = std::fs::remove_dir_all(&dir);
}
