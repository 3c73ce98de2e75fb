//! Depeweg (2019) Tables 5.1 and 5.2 beside ours ([`crate::published::depeweg`]).

use super::*;

pub use crate::published::depeweg::Published;

/// Published test LL and RMSE (mean ± s.e. over 5 runs) of model `model` on `set`: Tables 5.1
/// (BNN, and BNN+LV at α = 1) and 5.2 (BNN+LV at VB and α = ½); RMSE in original units.
pub fn published(set: DepewegSet, model: &DepewegModel) -> Option<Published> {
    crate::published::depeweg::cells(set.name(), model.name)
}
