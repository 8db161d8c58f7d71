//! The runtime: worker threads, the host buffer pool, the libuv loop.
use std::ptr;

use strideweave_sys as sys;

use crate::error::Result;
use crate::ffi::{call, handle};

handle!(
    /// A runtime owns the worker threads, the host buffer pool and the loop
    /// thread that completes asynchronous work. Every carrier and tensor
    /// belongs to one runtime and keeps it alive; releasing the last handle
    /// (of the runtime and of everything made in it) shuts it down.
    Runtime,
    sys::sw_runtime_t,
    sw_runtime_retain,
    sw_runtime_release
);

// SAFETY: the header: "A runtime ... Thread-safe." and "Reference counting
// is thread-safe for every handle": any thread may use and release it.
unsafe impl Send for Runtime {}
// SAFETY: as above; every function taking a runtime may be called from
// several threads at once.
unsafe impl Sync for Runtime {}

/// Options of [`Runtime::with_options`] (`sw_runtime_desc_t`).
#[derive(Clone, Debug, Default)]
pub struct RuntimeOptions {
    /// Threads computing kernels, the caller included; 0 = one per core.
    pub compute_threads: u32,
    /// Threads for background work (decompression, copies); 0 = 2.
    pub worker_threads: u32,
    /// Bytes of freed host buffers kept for reuse; `None` = the default (1 GiB).
    pub pool_limit_bytes: Option<usize>,
}

impl Runtime {
    /// A runtime with the default options.
    pub fn new() -> Result<Runtime> {
        Runtime::with_options(&RuntimeOptions::default())
    }

    /// A runtime with `options`.
    pub fn with_options(options: &RuntimeOptions) -> Result<Runtime> {
        let mut desc = sys::sw_runtime_desc_t::default();
        // SAFETY: desc is a valid struct to fill.
        unsafe { sys::sw_runtime_desc_init(&mut desc) };
        desc.compute_threads = options.compute_threads;
        desc.worker_threads = options.worker_threads;
        if let Some(limit) = options.pool_limit_bytes {
            desc.pool_limit_bytes = limit;
        }
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_runtime_create(&desc, &mut out) })?;
        // SAFETY: on success out is a new reference we own.
        Ok(unsafe { Runtime::from_raw(out) })
    }

    /// The number of compute threads, the caller included.
    pub fn compute_threads(&self) -> Result<u32> {
        let mut n = 0;
        call(|| unsafe { sys::sw_runtime_compute_threads(self.as_raw(), &mut n) })?;
        Ok(n)
    }

    /// Completes every pending await with [`ErrorCode::Cancelled`] (their
    /// carriers usable and unchanged), fires the callbacks still owed and
    /// joins the runtime's threads. Later asynchronous calls fail CANCELLED;
    /// synchronous ones keep working. Idempotent. Must not be called from
    /// an await callback.
    ///
    /// [`ErrorCode::Cancelled`]: crate::ErrorCode::Cancelled
    pub fn shutdown(&self) -> Result<()> {
        call(|| unsafe { sys::sw_runtime_shutdown(self.as_raw()) })
    }

    /// A file descriptor readable while completions wait to be processed by
    /// [`process_events`](Self::process_events) (for poll/epoll or an async
    /// reactor). Owned by the runtime: do not close it.
    pub fn event_fd(&self) -> Result<i32> {
        let mut fd = -1;
        call(|| unsafe { sys::sw_runtime_event_fd(self.as_raw(), &mut fd) })?;
        Ok(fd)
    }

    /// Fires the waiting-thread callbacks owed for completed awaits on this
    /// thread and drains the event fd; returns how many fired. Non-blocking.
    pub fn process_events(&self) -> Result<usize> {
        let mut fired = 0;
        call(|| unsafe { sys::sw_runtime_process_events(self.as_raw(), &mut fired) })?;
        Ok(fired)
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Runtime({:p})", self.as_raw())
    }
}

/// The version of the loaded library, packed as `major << 22 | minor << 12 | patch`.
pub fn version() -> u32 {
    // SAFETY: no arguments, no state.
    unsafe { sys::sw_version() }
}

/// The version of the loaded library as "major.minor.patch".
pub fn version_string() -> &'static str {
    // SAFETY: returns static storage.
    unsafe { crate::error::static_str(sys::sw_version_string()) }
}
