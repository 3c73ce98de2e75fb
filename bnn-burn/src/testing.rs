//! Helpers shared by the crate's tests (and usable by downstream tests).
//!
//! burn's random number generator is global on some backends, so a test that needs a
//! reproducible draw takes [`seeded`], which serialises such tests and seeds the device.

use burn::tensor::Device;
use std::sync::{Mutex, MutexGuard};

static RNG_LOCK: Mutex<()> = Mutex::new(());

/// The device the tests run on: the one the cargo features select.
pub fn test_device() -> Device {
    crate::device()
}

/// Holds the global RNG lock and seeds `device`; keep the guard alive while sampling.
pub fn seeded(device: &Device, seed: u64) -> MutexGuard<'static, ()> {
    let guard = RNG_LOCK.lock().unwrap_or_else(|poison| poison.into_inner());
    device.seed(seed);
    guard
}

pub use crate::host::to_vec;
