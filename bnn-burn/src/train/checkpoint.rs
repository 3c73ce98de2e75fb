//! Saving and loading every parameter of a model: a burnpack file (burn's record format) with a
//! checksum trailer ([`crate::integrity::seal_bytes`]), written whole and checked on load.

use crate::integrity::{self, IntegrityError};
use burn::module::Module;
use burn::store::ModuleRecord;
use std::path::Path;

/// Why a checkpoint could not be written or read.
#[derive(Debug, thiserror::Error)]
#[error("checkpoint {path}: {problem}")]
pub struct CheckpointError {
    /// The file.
    pub path: String,
    /// What went wrong.
    pub problem: CheckpointProblem,
}

/// What went wrong with a checkpoint file.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointProblem {
    /// The file could not be read or written (a missing folder, a full disk).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// burn's record format refused it (another architecture, a damaged header).
    #[error("{0}")]
    Record(#[from] burn::store::RecordError),
    /// The file's checksum does not match its content, or it has none.
    #[error("{0}")]
    Integrity(#[from] IntegrityError),
    /// The file's priors have another shape than the model's: one holds a prior per weight (a
    /// posterior as the prior) and the other a scalar one.
    #[error(
        "its priors do not have the model's shapes ({0}): a model trained under its posterior \
         as the prior loads into one built the same way (`.with_posterior_as_prior()` before \
         loading), a model with the configured prior into a freshly built one"
    )]
    PriorShape(String),
}

fn error(path: &Path, problem: impl Into<CheckpointProblem>) -> CheckpointError {
    CheckpointError {
        path: path.display().to_string(),
        problem: problem.into(),
    }
}

/// Saves every parameter of `model` to `path` (a burnpack file, full precision, with a checksum
/// trailer that burn's own loader ignores), replacing the file whole or not at all. The priors'
/// tensors are saved with them (constants of the module, never trained).
///
/// # Errors
/// A record that cannot be encoded, or a file that cannot be written (the path named).
pub fn save_checkpoint<M: Module>(
    model: &M,
    path: impl AsRef<Path>,
) -> Result<(), CheckpointError> {
    let path = path.as_ref();
    let bytes = model
        .clone()
        .into_record()
        .into_bytes()
        .map_err(|e| error(path, e))?;
    let sealed = integrity::seal_bytes(bytes.to_vec());
    integrity::write_atomic(path, &sealed).map_err(|e| error(path, e))
}

/// Loads parameters saved by [`save_checkpoint`] into `model` (which fixes the architecture),
/// after checking the file's checksum.
///
/// # Errors
/// A missing or unreadable file, a damaged one (its checksum differs), one without a checksum
/// (cut short, or not written by [`save_checkpoint`]: a plain burnpack file loads with burn's
/// `Module::try_load_file`), or a record of another architecture.
pub fn load_checkpoint<M: Module>(model: M, path: impl AsRef<Path>) -> Result<M, CheckpointError> {
    let path = path.as_ref();
    let sealed = std::fs::read(path).map_err(|e| error(path, e))?;
    let content = integrity::open_bytes(&sealed).map_err(|e| error(path, e))?;
    let record = ModuleRecord::from_bytes(burn::tensor::Bytes::from_bytes_vec(content.to_vec()))
        .map_err(|e| error(path, e))?;
    model.try_load_record(record).map_err(|e| match e {
        burn::store::RecordError::Validation(what) if what.contains("_prior.") => {
            error(path, CheckpointProblem::PriorShape(what))
        }
        e => error(path, e),
    })
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
