//! The one place where cargo features become a [`Device`]: `wgpu` before `ndarray` before
//! `flex` (the default) when several are on. One build can carry several backends and pick one at
//! run time with [`BACKEND_ENV`] (`BNN_BURN_BACKEND=flex|ndarray|wgpu`); naming one the build does
//! not carry stops at the first [`device()`] call, naming the variable and the feature. Guide: the
//! book's *Backends* page.

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
    pub fn device(self) -> Device {
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

/// Marks a draw from, or a seeding of, the device's generator. Every such call in this crate
/// passes here first. In the crate's own tests it panics unless the calling thread holds
/// `testing::seeded`'s lock (burn's generator is global on some backends, so an unlocked draw
/// in one test shifts the stream of another). With the `testing` feature (the workspace's
/// other crates) it checks the same on a thread whose name is neither absent nor `main`: the
/// test harness runs each test on a thread named after it, while a program's main thread and
/// unnamed threads are never checked. In every other build it is nothing.
#[inline(always)]
#[track_caller]
pub(crate) fn uses_generator() {
    #[cfg(test)]
    crate::testing::assert_holds_rng_lock();
    #[cfg(all(feature = "testing", not(test)))]
    if std::thread::current().name().is_some_and(|n| n != "main") {
        crate::testing::assert_holds_rng_lock();
    }
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
    /// `MIN_POSITIVE/4`: a subnormal unless the modes flush it (through `black_box`, so the
    /// product is computed at run time under the thread's modes).
    #[cfg(target_arch = "x86_64")]
    fn quarter_of_the_smallest_normal() -> f32 {
        std::hint::black_box(f32::MIN_POSITIVE) * std::hint::black_box(0.25f32)
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn subnormal_guards_flush_on_every_thread_and_restore_the_callers_modes() {
        use super::{SubnormalsFlushed, flushes_subnormals};
        assert!(
            !flushes_subnormals(),
            "a fresh test thread has the IEEE modes"
        );
        assert!(quarter_of_the_smallest_normal() > 0.0);
        {
            let _outer = SubnormalsFlushed::enter();
            assert_eq!(quarter_of_the_smallest_normal(), 0.0);
            {
                let _inner = SubnormalsFlushed::enter();
                let pool = rayon::broadcast(|_| quarter_of_the_smallest_normal());
                assert!(pool.iter().all(|&x| x == 0.0), "{pool:?}");
            }
            // The inner guard's drop keeps the outer one's modes.
            assert!(flushes_subnormals());
            assert_eq!(quarter_of_the_smallest_normal(), 0.0);
        }
        assert!(!flushes_subnormals());
        assert!(quarter_of_the_smallest_normal() > 0.0);
    }

    use super::*;

    /// The allocator's settings take where there is glibc (the process keeps them, which
    /// changes no result of the other tests).
    #[test]
    fn keeping_freed_memory_takes_on_glibc() {
        let glibc = cfg!(all(target_os = "linux", target_env = "gnu"));
        assert_eq!(keep_freed_memory(), glibc);
    }

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

/// MXCSR bit 15 (flush to zero) and bit 6 (denormals are zero).
#[cfg(target_arch = "x86_64")]
const FTZ_DAZ: u32 = (1 << 15) | (1 << 6);

/// The calling thread's SSE control register.
#[cfg(target_arch = "x86_64")]
fn mxcsr() -> u32 {
    let mut csr = 0u32;
    // SAFETY: stmxcsr stores this thread's SSE control register into `csr`.
    unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack)) };
    csr
}

/// Sets or clears the two modes on the calling thread.
#[cfg(target_arch = "x86_64")]
fn set_thread_flush(on: bool) {
    let csr = mxcsr();
    let csr = if on { csr | FTZ_DAZ } else { csr & !FTZ_DAZ };
    // SAFETY: ldmxcsr loads this thread's SSE control register; only the flush modes change
    // (rounding and exception masks stay as they were).
    unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack)) };
}

/// Asks glibc's allocator to keep freed memory instead of returning it to the kernel (no heap
/// trimming, no `mmap` per large buffer) for the rest of the process; returns whether the
/// settings took (false off Linux with glibc, where it does nothing). Call it once at the start
/// of a program that trains: with glibc's defaults a training step that frees a few MiB at the
/// top of the heap gives the pages back and faults them in again on the next step. On the
/// 2-core development machine that moved burn's deterministic MLP step of `bnn-bench perf`
/// between 6 and 13 ms from one run to the next and cost a third of the wall time of a BNN+LV
/// step on naval; how much a program gains depends on its buffers' sizes and order (none for
/// some). `bnn-bench` and the examples call it; the environment variables
/// `MALLOC_TRIM_THRESHOLD_=2147483647 MALLOC_MMAP_THRESHOLD_=1073741824` do the same from
/// outside. The cost: freed memory stays with the process (its peak heap, not more).
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // mallopt(3) parameters.
        const M_TRIM_THRESHOLD: i32 = -1;
        const M_MMAP_THRESHOLD: i32 = -3;
        unsafe extern "C" {
            fn mallopt(param: i32, value: i32) -> i32;
        }
        // SAFETY: mallopt only changes allocator tunables; both values are in range.
        unsafe {
            mallopt(M_TRIM_THRESHOLD, i32::MAX) == 1 && mallopt(M_MMAP_THRESHOLD, 1 << 30) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Whether the calling thread flushes subnormals (see [`flush_subnormals`]).
pub fn flushes_subnormals() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        mxcsr() & FTZ_DAZ == FTZ_DAZ
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Sets (or clears) the CPU's flush-to-zero and denormals-are-zero modes on the calling thread
/// and on every thread of rayon's global pool, where the CPU backends (Flex, NdArray) and the
/// fused kernels do their arithmetic; returns whether the CPU has the modes (x86-64 only; a
/// no-op elsewhere; GPU backends are not affected). PyTorch's `torch.set_flush_denormal`.
///
/// `f32` values below `1.2·10⁻³⁸` (subnormals) then read and compute as 0. Moment propagation
/// through a trained net multiplies small variances together (`E[h²]·Var[w]`), and x86
/// processors run each operation with a subnormal operand or result through a microcode assist,
/// tens of times slower: without the modes, the moment prediction of a trained MLP
/// 1-200-200-1 on 5 000 points took 516 ms, with them 35 ms (`bnn-bench perf-predict`).
/// [`crate::train::train`] and [`crate::predict::Predict::predict`] of the networks turn
/// them on for their duration ([`SubnormalsFlushed`]).
pub fn flush_subnormals(on: bool) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        set_thread_flush(on);
        rayon::broadcast(|_| set_thread_flush(on));
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = on;
        false
    }
}

/// Guards alive, and the lock under which the pool's modes change with them.
static GUARDS: std::sync::Mutex<usize> = std::sync::Mutex::new(0);

/// [`flush_subnormals`] for a scope: on from [`SubnormalsFlushed::enter`] until the guard
/// drops. The calling thread gets its previous modes back; rayon's pool keeps the modes while
/// any guard lives (guards nest, and overlap across threads), and is cleared after the last
/// unless it had them before the first.
#[derive(Debug)]
#[must_use = "the modes are restored when the guard drops"]
pub struct SubnormalsFlushed {
    /// The thread's own mode before (only x86-64 has one to restore).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    thread_had: bool,
}

/// Whether the pool had the modes before the first live guard.
static POOL_HAD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl SubnormalsFlushed {
    /// Turns the modes on (on this thread, and on the pool for the first live guard).
    pub fn enter() -> Self {
        let thread_had = flushes_subnormals();
        let mut guards = GUARDS.lock().unwrap_or_else(|e| e.into_inner());
        if *guards == 0 {
            let pool_had = pool_flushes();
            POOL_HAD.store(pool_had, std::sync::atomic::Ordering::Relaxed);
            if !pool_had {
                flush_subnormals(true);
            }
        }
        *guards += 1;
        drop(guards);
        #[cfg(target_arch = "x86_64")]
        set_thread_flush(true);
        Self { thread_had }
    }
}

impl Drop for SubnormalsFlushed {
    fn drop(&mut self) {
        let mut guards = GUARDS.lock().unwrap_or_else(|e| e.into_inner());
        *guards -= 1;
        if *guards == 0 && !POOL_HAD.load(std::sync::atomic::Ordering::Relaxed) {
            flush_subnormals(false);
        }
        drop(guards);
        #[cfg(target_arch = "x86_64")]
        set_thread_flush(self.thread_had);
    }
}

/// Whether every thread of rayon's pool flushes subnormals.
fn pool_flushes() -> bool {
    rayon::broadcast(|_| flushes_subnormals())
        .into_iter()
        .all(|on| on)
}
