//! Training state saved between epochs, so that a run stopped at any time resumes where it stood
//! and ends exactly where an uninterrupted run ends ([`super::Trainer::with_resume`]). A state is
//! the parameters, the optimiser's record, the model's own optimiser state, the epochs done and
//! their history, each file sealed with a checksum and named by `state.json`, written last; the
//! shuffles and the device generator are replayed from `(seed, epoch)` ([`epoch_seed`]). The
//! state's fingerprint includes a digest of the training data. Guide: the book's *Callbacks and
//! resume* page.

use super::data::{LocalState, Model};
use super::{EpochStats, TrainConfig, TrainError, load_checkpoint, save_checkpoint};
use crate::integrity::{self, Digest};
use burn::module::{ModuleVisitor, Param, ParamId};
use burn::optim::ModuleOptimizer;
use burn::tensor::Tensor;
use std::path::{Path, PathBuf};
use std::time::Duration;
use web_time::Instant;

/// Version of the state format (2: checksums, and the data's digest in the fingerprint).
const FORMAT: u32 = 2;

/// The device RNG's seed for `epoch` of a run seeded `seed` (splitmix64 of both).
pub(super) fn epoch_seed(seed: u64, epoch: usize) -> u64 {
    let mut z = seed ^ (epoch as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What `state.json` holds.
#[derive(serde::Serialize, serde::Deserialize)]
struct Saved {
    format: u32,
    /// What must agree for the state to belong to this run ([`fingerprint`]).
    fingerprint: String,
    epochs_done: usize,
    global_step: usize,
    /// The objective per point of the untrained model on the check's rows (the divergence
    /// check's reference, `L₀`).
    initial_loss: Option<f64>,
    /// Training seconds before this process.
    seconds: f64,
    history: Vec<EpochStats>,
    /// The checksum of each file of the state, by file name.
    files: std::collections::BTreeMap<String, String>,
}

/// Where a run stands after loading its saved state.
pub(super) struct Resumed<M> {
    pub model: M,
    pub optim: ModuleOptimizer,
    pub epochs_done: usize,
    pub global_step: usize,
    pub initial_loss: Option<f64>,
    pub seconds: f64,
    pub history: Vec<EpochStats>,
}

/// The run's saved state in `dir`, saved at most every `interval` (and after the last epoch).
pub(super) struct TrainState {
    dir: PathBuf,
    interval: Duration,
    fingerprint: String,
    last_save: Instant,
    saved_epoch: Option<usize>,
}

impl TrainState {
    /// The state folder of a run with `config` on `n` examples (`n_val` held out) of `model`,
    /// whose data's content has the digest `data`; the folder is created when missing.
    ///
    /// # Errors
    /// [`TrainError::Resume`] when `dir` cannot be created or is a file.
    pub fn new<M: Model>(
        dir: PathBuf,
        interval: Duration,
        config: &TrainConfig,
        (n, n_val): (usize, usize),
        data: &str,
        model: &M,
    ) -> Result<Self, TrainError> {
        std::fs::create_dir_all(&dir).map_err(|e| resume_error(&dir, e))?;
        Ok(Self {
            fingerprint: fingerprint(config, n, n_val, data, model),
            dir,
            interval,
            last_save: Instant::now(),
            saved_epoch: None,
        })
    }

    /// Whether the folder holds a saved state.
    pub fn exists(&self) -> bool {
        self.dir.join("state.json").is_file()
    }

    /// The saved state, loaded into `model` and `optim`.
    ///
    /// # Errors
    /// [`TrainError::Resume`] when the state is missing, unreadable or belongs to another run.
    pub fn load<M: Model>(
        &mut self,
        model: M,
        optim: ModuleOptimizer,
    ) -> Result<Resumed<M>, TrainError> {
        let path = self.dir.join("state.json");
        let text = std::fs::read_to_string(&path).map_err(|e| resume_error(&path, e))?;
        let value = integrity::open_json(&text).map_err(|e| resume_error(&path, e))?;
        let saved: Saved = serde_json::from_value(value).map_err(|e| resume_error(&path, e))?;
        if saved.format != FORMAT {
            return Err(resume_error(
                &path,
                format!("format {} (this build reads {FORMAT})", saved.format),
            ));
        }
        if saved.fingerprint != self.fingerprint {
            return Err(resume_error(
                &path,
                format!(
                    "it belongs to another run (saved: {}; this run: {}); remove the folder or \
                     train into another one",
                    saved.fingerprint, self.fingerprint
                ),
            ));
        }
        let e = saved.epochs_done;
        let model_path = self.file("model", e, "bpk");
        self.check_listed(&saved, &model_path)?;
        // A record of other parameters is refused by the loader, naming the file.
        let model = load_checkpoint(model, &model_path)?;
        let optim_path = self.file("optim", e, "bpk");
        let optim = self.check_listed(&saved, &optim_path).and_then(|bytes| {
            let content =
                integrity::open_bytes(&bytes).map_err(|err| resume_error(&optim_path, err))?;
            optim
                .from_bytes(burn::tensor::Bytes::from_bytes_vec(content.to_vec()))
                .map_err(|err| resume_error(&optim_path, err))
        })?;
        let local_path = self.file("local", e, "json");
        let model = match saved.files.contains_key(&file_name(&local_path)) {
            true => {
                let bytes = self.check_listed(&saved, &local_path)?;
                let local: LocalState =
                    serde_json::from_slice(&bytes).map_err(|err| resume_error(&local_path, err))?;
                model
                    .with_local_state(local)
                    .map_err(|err| resume_error(&local_path, err))?
            }
            false => model,
        };
        self.saved_epoch = Some(e);
        Ok(Resumed {
            model,
            optim,
            epochs_done: e,
            global_step: saved.global_step,
            initial_loss: saved.initial_loss,
            seconds: saved.seconds,
            history: saved.history,
        })
    }

    /// Saves the state after `epochs_done` epochs when `interval` has passed since the last
    /// save, or when `force` (the last epoch).
    ///
    /// # Errors
    /// [`TrainError::Resume`] or [`TrainError::Checkpoint`] when a file cannot be written.
    #[allow(clippy::too_many_arguments)]
    pub fn save<M: Model>(
        &mut self,
        force: bool,
        model: &M,
        optim: &ModuleOptimizer,
        epochs_done: usize,
        global_step: usize,
        initial_loss: Option<f64>,
        seconds: f64,
        history: &[EpochStats],
    ) -> Result<(), TrainError> {
        if !force && self.last_save.elapsed() < self.interval {
            return Ok(());
        }
        let e = epochs_done;
        let mut files = std::collections::BTreeMap::new();
        let model_path = self.file("model", e, "bpk");
        save_checkpoint(model, &model_path)?;
        let bytes = std::fs::read(&model_path).map_err(|err| resume_error(&model_path, err))?;
        files.insert(file_name(&model_path), Digest::new().update(&bytes).hex());
        let optim_path = self.file("optim", e, "bpk");
        let bytes = optim
            .into_bytes()
            .map_err(|err| resume_error(&optim_path, err))?;
        let sealed = integrity::seal_bytes(bytes.to_vec());
        integrity::write_atomic(&optim_path, &sealed)
            .map_err(|err| resume_error(&optim_path, err))?;
        files.insert(file_name(&optim_path), Digest::new().update(&sealed).hex());
        let local = model.local_state();
        if !local.is_empty() {
            let path = self.file("local", e, "json");
            let text = serde_json::to_string(&local).map_err(|err| resume_error(&path, err))?;
            integrity::write_atomic(&path, text.as_bytes())
                .map_err(|err| resume_error(&path, err))?;
            files.insert(
                file_name(&path),
                Digest::new().update(text.as_bytes()).hex(),
            );
        }
        let saved = Saved {
            format: FORMAT,
            fingerprint: self.fingerprint.clone(),
            epochs_done,
            global_step,
            initial_loss,
            seconds,
            history: history.to_vec(),
            files,
        };
        let path = self.dir.join("state.json");
        let value = serde_json::to_value(&saved).map_err(|err| resume_error(&path, err))?;
        integrity::write_atomic(&path, integrity::seal_json(&value).as_bytes())
            .map_err(|err| resume_error(&path, err))?;
        if let Some(old) = self.saved_epoch.replace(e).filter(|&old| old != e) {
            for (name, ext) in [("model", "bpk"), ("optim", "bpk"), ("local", "json")] {
                let _ = std::fs::remove_file(self.file(name, old, ext));
            }
        }
        self.last_save = Instant::now();
        Ok(())
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, name: &str, epochs_done: usize, ext: &str) -> PathBuf {
        self.dir.join(format!("{name}-{epochs_done:05}.{ext}"))
    }

    /// The bytes of `path`, a file `saved` lists, checked against its listed checksum.
    fn check_listed(&self, saved: &Saved, path: &Path) -> Result<Vec<u8>, TrainError> {
        let Some(listed) = saved.files.get(&file_name(path)) else {
            return Err(resume_error(
                path,
                "state.json does not list this file: the saved state is incomplete",
            ));
        };
        let bytes = std::fs::read(path).map_err(|err| resume_error(path, err))?;
        let found = Digest::new().update(&bytes).hex();
        if &found != listed {
            return Err(resume_error(
                path,
                integrity::IntegrityError::Damaged {
                    saved: listed.clone(),
                    found,
                },
            ));
        }
        Ok(bytes)
    }
}

/// The file name of `path`, as `state.json` lists it.
fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Checks that every learning-rate and weight-decay group selects the same parameters of
/// `model` by its loaded ids as by the ids it had when the groups were made (`fresh`): a group
/// chosen by id ([`burn::module::ParamGroup::ids_from_module`]) would silently miss the loaded
/// parameters.
pub(super) fn check_groups<M: Model>(
    config: &TrainConfig,
    fresh: &[ParamId],
    model: &M,
    dir: &Path,
) -> Result<(), TrainError> {
    let loaded = ids(model);
    let groups = config
        .param_groups
        .iter()
        .map(|g| (&g.group, "learning-rate"));
    let decays = config
        .decay_groups
        .iter()
        .map(|g| (&g.group, "weight-decay"));
    for (group, kind) in groups.chain(decays) {
        if fresh
            .iter()
            .zip(&loaded)
            .any(|(f, l)| group.matches(f, None) != group.matches(l, None))
        {
            return Err(resume_error(
                dir,
                format!(
                    "a {kind} group selects parameters by id, and resumed parameters keep \
                     their saved ids: select the group by module path instead"
                ),
            ));
        }
    }
    Ok(())
}

/// The ids of `model`'s float parameters, in visiting order.
pub(super) fn ids<M: burn::module::Module>(model: &M) -> Vec<ParamId> {
    struct Ids(Vec<ParamId>);
    impl ModuleVisitor for Ids {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(param.id);
        }
    }
    let mut v = Ids(Vec::new());
    model.visit(&mut v);
    v.0
}

/// What must agree between a saved state and the run resuming it: every setting of the
/// configuration but the epoch count and the progress bar (a run may be extended), the data's
/// size, content (its digest) and validation split, and the shapes of the model's parameters.
fn fingerprint<M: Model>(
    config: &TrainConfig,
    n: usize,
    n_val: usize,
    data: &str,
    model: &M,
) -> String {
    struct Shapes(Vec<Vec<usize>>);
    impl ModuleVisitor for Shapes {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(param.dims().to_vec());
        }
    }
    let mut shapes = Shapes(Vec::new());
    model.visit(&mut shapes);
    let mut c = config.clone();
    c.epochs = 1;
    c.progress = true;
    let groups: Vec<f64> = c.param_groups.drain(..).map(|g| g.learning_rate).collect();
    let decays: Vec<f64> = c.decay_groups.drain(..).map(|g| g.weight_decay).collect();
    format!(
        "{c:?}; groups {groups:?}; decays {decays:?}; n {n}; data {data}; validation {n_val}; \
         parameters {:?}",
        shapes.0
    )
}

fn resume_error(path: &Path, reason: impl std::fmt::Display) -> TrainError {
    TrainError::Resume {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

#[cfg(test)]
#[path = "resume_tests.rs"]
mod tests;
