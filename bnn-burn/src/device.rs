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

use burn::tensor::Device;

/// The compute device selected by the enabled cargo features (see the module docs).
pub fn device() -> Device {
    #[cfg(feature = "wgpu")]
    {
        Device::wgpu(burn::tensor::DeviceKind::DefaultDevice)
    }
    #[cfg(all(feature = "ndarray", not(feature = "wgpu")))]
    {
        #[allow(deprecated)]
        Device::ndarray()
    }
    #[cfg(all(feature = "flex", not(any(feature = "ndarray", feature = "wgpu"))))]
    {
        Device::flex()
    }
    #[cfg(not(any(feature = "flex", feature = "ndarray", feature = "wgpu")))]
    {
        compile_error!("bnn-burn needs one backend feature: `flex` (default), `ndarray` or `wgpu`")
    }
}

/// [`device()`] with autodiff enabled: the device to build models on for training.
pub fn training_device() -> Device {
    device().autodiff()
}

/// The name of the selected backend, for run records and progress output.
pub fn backend_name() -> &'static str {
    if cfg!(feature = "wgpu") {
        "wgpu"
    } else if cfg!(feature = "ndarray") {
        "ndarray"
    } else {
        "flex"
    }
}

/// Whether the selected backend's `log1p` keeps the digits of small arguments. The CPU backends
/// call the C library's `log1pf`; the wgpu shaders evaluate `ln(1 + x)`, which returns 0 for
/// `|x| < 6e-8` (so `softplus(−30)` would be 0). [`crate::special::log1p`] compensates there.
pub const ACCURATE_LOG1P: bool = !cfg!(feature = "wgpu");
