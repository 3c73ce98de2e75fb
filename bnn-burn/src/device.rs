//! The one place where cargo features become a [`Device`].
//!
//! | feature | device |
//! |---|---|
//! | `wgpu` | `Device::wgpu(DeviceKind::DefaultDevice)` (GPU, or a software Vulkan driver) |
//! | `ndarray` | `Device::ndarray()` (deprecated upstream, kept for users who ask for it) |
//! | `flex` (default) | `Device::flex()` |
//!
//! When several are enabled (cargo features are additive, and `flex` is on by default), the
//! order of the table decides: `--features wgpu` runs on wgpu, `--features ndarray` on ndarray.
//!
//! One build can carry several backends and pick one at run time: the environment variable
//! [`BACKEND_ENV`] (`BNN_BURN_BACKEND=flex|ndarray|wgpu`) names one of the compiled ones, so
//! `BNN_BURN_BACKEND=ndarray cargo test --features ndarray,wgpu` runs the suite on ndarray with
//! the same binaries that `BNN_BURN_BACKEND=wgpu` runs on wgpu. Naming a backend the build does
//! not carry stops at the first [`device()`] call with a message naming the variable and the
//! feature to enable.

use burn::tensor::Device;
use std::sync::OnceLock;

/// The environment variable that picks one of the compiled backends at run time.
pub const BACKEND_ENV: &str = "BNN_BURN_BACKEND";

/// A backend this crate can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// burn's flex CPU backend (the default feature).
    Flex,
    /// burn's ndarray CPU backend (feature `ndarray`).
    NdArray,
    /// burn's wgpu backend with fusion (feature `wgpu`).
    Wgpu,
}

impl BackendKind {
    /// Every backend, in the order in which the features take precedence.
    pub const ALL: [BackendKind; 3] = [BackendKind::Wgpu, BackendKind::NdArray, BackendKind::Flex];

    /// The name used by [`BACKEND_ENV`], run records and the cargo feature.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Flex => "flex",
            BackendKind::NdArray => "ndarray",
            BackendKind::Wgpu => "wgpu",
        }
    }

    /// Whether this build carries the backend (its cargo feature is on).
    pub fn compiled(self) -> bool {
        match self {
            BackendKind::Flex => cfg!(feature = "flex"),
            BackendKind::NdArray => cfg!(feature = "ndarray"),
            BackendKind::Wgpu => cfg!(feature = "wgpu"),
        }
    }

    /// The backend's default device.
    fn device(self) -> Device {
        match self {
            #[cfg(feature = "wgpu")]
            BackendKind::Wgpu => Device::wgpu(burn::tensor::DeviceKind::DefaultDevice),
            #[cfg(feature = "ndarray")]
            #[allow(deprecated)]
            BackendKind::NdArray => Device::ndarray(),
            #[cfg(feature = "flex")]
            BackendKind::Flex => Device::flex(),
            #[allow(unreachable_patterns)]
            other => unreachable!("{} is not compiled in", other.name()),
        }
    }
}

/// Why a [`BACKEND_ENV`] value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendChoiceError {
    /// The value names no backend.
    #[error(
        "{BACKEND_ENV}={value:?} names no backend: use one of flex, ndarray, wgpu (compiled in this build: {compiled})"
    )]
    Unknown {
        /// The variable's value.
        value: String,
        /// The compiled backends, comma-separated.
        compiled: String,
    },
    /// The backend's feature is off in this build.
    #[error(
        "{BACKEND_ENV}={name}: this build has no {name} backend; build with `--features {name}` (bnn-burn's feature; compiled in this build: {compiled})"
    )]
    NotCompiled {
        /// The backend's name.
        name: &'static str,
        /// The compiled backends, comma-separated.
        compiled: String,
    },
}

/// The compiled backends, in order of precedence.
pub fn compiled_backends() -> Vec<BackendKind> {
    BackendKind::ALL
        .into_iter()
        .filter(|b| b.compiled())
        .collect()
}

/// The backend for a [`BACKEND_ENV`] value: the named one if compiled, the first compiled one
/// (in the order of the module's table) when the value is absent or empty.
pub fn choose_backend(value: Option<&str>) -> Result<BackendKind, BackendChoiceError> {
    let compiled = compiled_backends();
    let list = || {
        compiled
            .iter()
            .map(|b| b.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let value = value.map(str::trim).unwrap_or("");
    if value.is_empty() {
        return Ok(compiled[0]);
    }
    let kind = BackendKind::ALL
        .into_iter()
        .find(|b| b.name().eq_ignore_ascii_case(value))
        .ok_or_else(|| BackendChoiceError::Unknown {
            value: value.to_string(),
            compiled: list(),
        })?;
    if kind.compiled() {
        Ok(kind)
    } else {
        Err(BackendChoiceError::NotCompiled {
            name: kind.name(),
            compiled: list(),
        })
    }
}

/// The backend of this process: [`choose_backend`] of [`BACKEND_ENV`], read once.
///
/// Programs that want a clean error instead of a panic call [`try_selected_backend`] first.
pub fn selected_backend() -> BackendKind {
    try_selected_backend().unwrap_or_else(|e| panic!("{e}"))
}

/// [`selected_backend`], with a bad [`BACKEND_ENV`] value as an error.
pub fn try_selected_backend() -> Result<BackendKind, BackendChoiceError> {
    static CHOICE: OnceLock<Result<BackendKind, BackendChoiceError>> = OnceLock::new();
    CHOICE
        .get_or_init(|| choose_backend(std::env::var(BACKEND_ENV).ok().as_deref()))
        .clone()
}

/// The compute device of the selected backend (see the module docs).
pub fn device() -> Device {
    #[cfg(not(any(feature = "flex", feature = "ndarray", feature = "wgpu")))]
    compile_error!("bnn-burn needs one backend feature: `flex` (default), `ndarray` or `wgpu`");
    selected_backend().device()
}

/// [`device()`] with autodiff enabled: the device to build models on for training.
pub fn training_device() -> Device {
    device().autodiff()
}

/// The name of the selected backend, for run records and progress output.
pub fn backend_name() -> &'static str {
    selected_backend().name()
}

/// Whether `device`'s `log1p` keeps the digits of small arguments. The CPU backends call the C
/// library's `log1pf`; the wgpu shaders evaluate `ln(1 + x)`, which returns 0 for
/// `|x| < 6e-8` (so `softplus(−30)` would be 0). [`crate::special::log1p`] compensates there.
pub fn accurate_log1p(device: &Device) -> bool {
    #[cfg(feature = "wgpu")]
    {
        !matches!(
            device.clone().without_autodiff().as_dispatch(),
            burn_dispatch::DispatchDevice::Cube(_)
        )
    }
    #[cfg(not(feature = "wgpu"))]
    {
        let _ = device;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backend_variable_picks_a_compiled_backend_or_names_the_feature() {
        let compiled = compiled_backends();
        assert!(compiled.contains(&BackendKind::Flex) || !cfg!(feature = "flex"));
        assert_eq!(choose_backend(None), Ok(compiled[0]));
        assert_eq!(choose_backend(Some(" ")), Ok(compiled[0]));
        for kind in BackendKind::ALL {
            let got = choose_backend(Some(&kind.name().to_uppercase()));
            if kind.compiled() {
                assert_eq!(got, Ok(kind));
            } else {
                let msg = got.unwrap_err().to_string();
                assert!(
                    msg.contains(BACKEND_ENV)
                        && msg.contains(&format!("--features {}", kind.name())),
                    "{msg}"
                );
            }
        }
        let msg = choose_backend(Some("cuda")).unwrap_err().to_string();
        assert!(
            msg.contains("\"cuda\"") && msg.contains("flex, ndarray, wgpu"),
            "{msg}"
        );
        // The tensors of the selected device know whether their log1p is accurate.
        assert_eq!(
            accurate_log1p(&device()),
            selected_backend() != BackendKind::Wgpu
        );
    }
}
