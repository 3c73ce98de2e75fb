use super::*;
use crate::error::ConfigError;

/// A model that remembers the tasks it was last trained or fine-tuned on; `prior` marks a
/// model made a prior.
#[derive(Debug, Clone, PartialEq)]
struct Memory {
    knows: Vec<usize>,
    prior: bool,
}

/// Three tasks of 6 one-dimensional rows each; a model scores 1 on a task it knows, ½ else.
#[derive(Default)]
struct Tasks {
    fits: Vec<(usize, Option<Memory>, Vec<usize>)>,
    priors: Vec<usize>,
    tunes: Vec<Vec<(usize, Vec<usize>)>>,
}

impl ContinualTask<Memory> for Tasks {
    type Error = ConfigError;

    fn tasks(&self) -> usize {
        3
    }

    fn inputs(&self, task: usize) -> (Vec<f64>, usize) {
        ((0..6).map(|i| (i * (task + 1)) as f64).collect(), 1)
    }

    fn fit(
        &mut self,
        task: usize,
        start: Option<Memory>,
        rows: &[usize],
    ) -> Result<Memory, ConfigError> {
        self.fits.push((task, start, rows.to_vec()));
        Ok(Memory {
            knows: vec![task],
            prior: false,
        })
    }

    fn next_prior(&mut self, task: usize, model: Memory) -> Result<Memory, ConfigError> {
        self.priors.push(task);
        Ok(Memory {
            prior: true,
            ..model
        })
    }

    fn fine_tune(
        &mut self,
        model: &Memory,
        coresets: &[(usize, Vec<usize>)],
    ) -> Result<Memory, ConfigError> {
        self.tunes.push(coresets.to_vec());
        let mut knows = model.knows.clone();
        knows.extend(coresets.iter().map(|c| c.0));
        Ok(Memory {
            knows,
            prior: model.prior,
        })
    }

    fn evaluate(&mut self, model: &Memory, task: usize) -> Result<f64, ConfigError> {
        Ok(if model.knows.contains(&task) {
            1.0
        } else {
            0.5
        })
    }
}

#[test]
fn a_sequence_forgets_without_a_coreset_and_keeps_its_bookkeeping() {
    // VCL without a coreset: only the last task is known, the average falls as 1, ¾, ⅔.
    let mut tasks = Tasks::default();
    let (last, h) = run_sequence(ContinualConfig::vcl(), &mut tasks).unwrap();
    assert_eq!(
        h.scores,
        vec![vec![1.0], vec![0.5, 1.0], vec![0.5, 0.5, 1.0]]
    );
    let avg = h.average();
    assert!((avg[1] - 0.75).abs() < 1e-12 && (avg[2] - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(last.knows, vec![2]);
    // Each task after the first starts from the last one made the prior; all rows train.
    assert_eq!(tasks.priors, vec![0, 1]);
    assert_eq!(tasks.fits[0].1, None);
    assert_eq!(
        tasks.fits[1].1,
        Some(Memory {
            knows: vec![0],
            prior: true
        })
    );
    assert!(tasks.fits.iter().all(|f| f.2 == (0..6).collect::<Vec<_>>()));
    assert!(tasks.tunes.is_empty() && h.coresets.iter().all(Vec::is_empty));
}

#[test]
fn coresets_are_held_out_and_fine_tuned_on_and_reset_starts_afresh() {
    let mut tasks = Tasks::default();
    let config = ContinualConfig::vcl()
        .with_coreset(2)
        .with_propagation(Propagation::Reset);
    let (_, h) = run_sequence(config, &mut tasks).unwrap();
    // k-center from row 0 on 0, s, 2s, …: row 0, then the farthest, row 5.
    assert!(h.coresets.iter().all(|c| *c == vec![0, 5]));
    assert!(
        tasks
            .fits
            .iter()
            .all(|f| f.1.is_none() && f.2 == vec![1, 2, 3, 4])
    );
    assert!(tasks.priors.is_empty(), "reset never makes a prior");
    // The fine-tune sees every coreset so far, and rescues every task.
    let seen: Vec<usize> = tasks.tunes.iter().map(Vec::len).collect();
    assert_eq!(seen, [1, 2, 3]);
    assert!(h.scores.iter().flatten().all(|s| *s == 1.0));
    let err = run_sequence(
        ContinualConfig::vcl().with_coreset(7),
        &mut Tasks::default(),
    )
    .unwrap_err();
    assert_eq!(err.field, "coreset");
}
