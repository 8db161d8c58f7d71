//! The device bridge: one backend's memory (host, fake or Vulkan) with
//! allocations, exact-range copies, views, and generations that a restart
//! bumps (every older handle then fails STALE_HANDLE).
use std::ptr;

use strideweave_sys as sys;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ffi::{call, handle, rank_error};
use crate::runtime::Runtime;

handle!(
    /// A device: one backend's memory seen through the bridge. Keeps its
    /// runtime alive.
    Device,
    sys::sw_device_t,
    sw_device_retain,
    sw_device_release
);
handle!(
    /// A device allocation; its last release frees the memory once nothing
    /// uses it.
    DeviceAllocation,
    sys::sw_device_allocation_t,
    sw_device_allocation_retain,
    sw_device_allocation_release
);
handle!(
    /// A view over an allocation as a dense first-mode-fastest tensor; a
    /// live view counts as a use of its allocation.
    DeviceView,
    sys::sw_device_view_t,
    sw_device_view_retain,
    sw_device_view_release
);

// SAFETY (all three): the header: "Thread-safe: any thread may call any
// function below" (Devices), "A device allocation ... Thread-safe", "A view
// ... Thread-safe", and reference counting is thread-safe for every handle.
unsafe impl Send for Device {}
// SAFETY: see above.
unsafe impl Sync for Device {}
// SAFETY: see above.
unsafe impl Send for DeviceAllocation {}
// SAFETY: see above.
unsafe impl Sync for DeviceAllocation {}
// SAFETY: see above.
unsafe impl Send for DeviceView {}
// SAFETY: see above.
unsafe impl Sync for DeviceView {}

/// A device's backend.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// Host memory behind the bridge.
    Host,
    /// The fake backend (tests; logs every call).
    Fake,
    /// A Vulkan device.
    Vulkan,
    /// A kind this crate does not name.
    Other(u32),
}

/// What an allocation holds (`sw_object_spec_t`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectSpec {
    /// Element type.
    pub dtype: DType,
    /// The object's shape (at most `SW_MAX_RANK` modes).
    pub shape: Vec<i64>,
    /// Largest extent an allocation of this object may have, in bytes.
    pub max_extent_bytes: u64,
    /// Alignment of the allocation's start, a power of two; 0 = 16.
    pub alignment: u64,
}

/// A copy event `{generation, id}`: plain data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CopyEvent {
    /// The device generation it belongs to.
    pub generation: u64,
    /// Its id.
    pub id: u64,
}

impl CopyEvent {
    fn to_raw(self) -> sys::sw_copy_event_t {
        let mut e = sys::sw_copy_event_t::default();
        unsafe { sys::sw_copy_event_init(&mut e) };
        e.generation = self.generation;
        e.id = self.id;
        e
    }
}

/// A view's description (`sw_view_info_t`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewInfo {
    /// The host address of element 0, or NULL when not host visible.
    pub pointer: *mut std::ffi::c_void,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<i64>,
    /// Strides in bytes, first mode fastest.
    pub strides_bytes: Vec<i64>,
}

/// The state of a copy event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyStatus {
    /// The host bytes may be released (reused or freed).
    pub host_released: bool,
    /// The copy is complete.
    pub complete: bool,
}

/// The fake backend's hooks (`sw_fake_device_vtable_t`) are not exposed:
/// the fake device here is the built-in one, in host memory.
impl Device {
    fn made(f: impl FnOnce(*mut *mut sys::sw_device_t) -> *mut sys::sw_error_t) -> Result<Device> {
        let mut out = ptr::null_mut();
        call(|| f(&mut out))?;
        Ok(unsafe { Device::from_raw(out) })
    }

    /// Host memory behind the bridge (copies are memcpy).
    pub fn host(runtime: &Runtime) -> Result<Device> {
        Device::made(|o| unsafe { sys::sw_device_create_host(runtime.as_raw(), o) })
    }

    /// The built-in fake backend: logs every call, fails one armed call, and
    /// performs an asynchronous copy only when told to (the testing hooks).
    pub fn fake(runtime: &Runtime) -> Result<Device> {
        Device::made(|o| unsafe { sys::sw_device_create_fake(runtime.as_raw(), ptr::null(), o) })
    }

    /// The library's own Vulkan device on the first physical device;
    /// UNSUPPORTED, naming the missing part, without Vulkan or a driver.
    pub fn vulkan(runtime: &Runtime) -> Result<Device> {
        Device::made(|o| unsafe { sys::sw_device_create_vulkan(runtime.as_raw(), ptr::null(), o) })
    }

    /// The backend.
    pub fn kind(&self) -> Result<DeviceKind> {
        let mut k = sys::sw_device_kind_t(0);
        call(|| unsafe { sys::sw_device_kind(self.as_raw(), &mut k) })?;
        use sys::sw_device_kind_t as K;
        Ok(match k {
            K::SW_DEVICE_HOST => DeviceKind::Host,
            K::SW_DEVICE_FAKE => DeviceKind::Fake,
            K::SW_DEVICE_VULKAN => DeviceKind::Vulkan,
            other => DeviceKind::Other(other.0),
        })
    }

    /// The generation: 1 at creation, +1 per restart.
    pub fn generation(&self) -> Result<u64> {
        let mut g = 0;
        call(|| unsafe { sys::sw_device_generation(self.as_raw(), &mut g) })?;
        Ok(g)
    }

    /// Abandons every pending copy, frees every allocation in the backend
    /// and bumps the generation.
    pub fn restart(&self) -> Result<()> {
        call(|| unsafe { sys::sw_device_restart(self.as_raw()) })
    }

    /// Allocates `extent_bytes` for an object of `spec`. VALUE for extent 0,
    /// below the spec's element bytes, above its max, or a bad alignment;
    /// TYPE for an invalid dtype; OUT_OF_MEMORY when the backend fails.
    pub fn alloc(&self, spec: &ObjectSpec, extent_bytes: u64) -> Result<DeviceAllocation> {
        if spec.shape.len() > sys::SW_MAX_RANK as usize {
            return Err(rank_error("ObjectSpec::shape", spec.shape.len()));
        }
        let mut s = sys::sw_object_spec_t::default();
        unsafe { sys::sw_object_spec_init(&mut s) };
        s.dtype = spec.dtype.to_raw();
        s.rank = spec.shape.len();
        s.shape[..spec.shape.len()].copy_from_slice(&spec.shape);
        s.max_extent_bytes = spec.max_extent_bytes;
        s.alignment = spec.alignment;
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_device_alloc(self.as_raw(), &s, extent_bytes, &mut out) })?;
        Ok(unsafe { DeviceAllocation::from_raw(out) })
    }

    /// The state of a copy event (non-blocking). STALE_HANDLE for an event of
    /// an older generation, VALUE for an unknown id, IO when the copy failed.
    pub fn event_query(&self, event: CopyEvent) -> Result<CopyStatus> {
        let e = event.to_raw();
        let (mut released, mut complete) = (false, false);
        call(|| unsafe { sys::sw_device_event_query(self.as_raw(), &e, &mut released, &mut complete) })?;
        Ok(CopyStatus { host_released: released, complete })
    }

    /// Blocks until the event is complete, or `timeout_ns` passes (negative:
    /// no limit): TIMEOUT then.
    pub fn event_wait(&self, event: CopyEvent, timeout_ns: i64) -> Result<()> {
        let e = event.to_raw();
        call(|| unsafe { sys::sw_device_event_wait(self.as_raw(), &e, timeout_ns) })
    }
}

impl DeviceAllocation {
    /// Frees the memory now (the handle stays). STATE "in use" while compute,
    /// a pending copy or a live view uses it, STATE when already freed,
    /// STALE_HANDLE for an older generation.
    pub fn free(&self) -> Result<()> {
        call(|| unsafe { sys::sw_device_free(self.as_raw()) })
    }

    /// The allocation's extent in bytes.
    pub fn extent(&self) -> Result<u64> {
        let mut n = 0;
        call(|| unsafe { sys::sw_device_allocation_extent(self.as_raw(), &mut n) })?;
        Ok(n)
    }

    /// The generation it was made in.
    pub fn generation(&self) -> Result<u64> {
        let mut g = 0;
        call(|| unsafe { sys::sw_device_allocation_generation(self.as_raw(), &mut g) })?;
        Ok(g)
    }

    /// Marks compute work using the allocation (free is refused until
    /// [`compute_end`](Self::compute_end)).
    pub fn compute_begin(&self) -> Result<()> {
        call(|| unsafe { sys::sw_device_compute_begin(self.as_raw()) })
    }

    /// Ends a [`compute_begin`](Self::compute_begin).
    pub fn compute_end(&self) -> Result<()> {
        call(|| unsafe { sys::sw_device_compute_end(self.as_raw()) })
    }

    /// Copies `host` into `[device_offset, device_offset + host.len())`,
    /// synchronously: on return the copy is complete. INDEX past the
    /// extent, VALUE for 0 bytes, STATE when freed, STALE_HANDLE for an
    /// older generation, IO when the copy fails.
    pub fn host_to_device(&self, device_offset: u64, host: &[u8]) -> Result<()> {
        call(|| unsafe {
            sys::sw_device_host_to_device(
                self.as_raw(),
                device_offset,
                host.as_ptr().cast(),
                host.len() as u64,
                false,
                ptr::null_mut(),
            )
        })
    }

    /// Copies `[device_offset, device_offset + host.len())` into `host`,
    /// synchronously, with the same checks.
    pub fn device_to_host(&self, device_offset: u64, host: &mut [u8]) -> Result<()> {
        call(|| unsafe {
            sys::sw_device_device_to_host(
                self.as_raw(),
                device_offset,
                host.as_mut_ptr().cast(),
                host.len() as u64,
                false,
                ptr::null_mut(),
            )
        })
    }

    /// Starts an asynchronous host-to-device copy of `bytes` bytes at `host`.
    ///
    /// # Safety
    /// The `bytes` bytes at `host` must stay valid and untouched until the
    /// event reports `host_released` (or the device restarts, abandoning it).
    pub unsafe fn host_to_device_async(&self, device_offset: u64, host: *const u8, bytes: u64) -> Result<CopyEvent> {
        let mut e = CopyEvent { generation: 0, id: 0 }.to_raw();
        call(|| unsafe {
            sys::sw_device_host_to_device(self.as_raw(), device_offset, host.cast(), bytes, true, &mut e)
        })?;
        Ok(CopyEvent { generation: e.generation, id: e.id })
    }

    /// Starts an asynchronous device-to-host copy into `bytes` bytes at `host`.
    ///
    /// # Safety
    /// The `bytes` bytes at `host` must stay valid, and not be read, until
    /// the event reports `complete`, and must not be freed before
    /// `host_released` (or a restart).
    pub unsafe fn device_to_host_async(&self, device_offset: u64, host: *mut u8, bytes: u64) -> Result<CopyEvent> {
        let mut e = CopyEvent { generation: 0, id: 0 }.to_raw();
        call(|| unsafe {
            sys::sw_device_device_to_host(self.as_raw(), device_offset, host.cast(), bytes, true, &mut e)
        })?;
        Ok(CopyEvent { generation: e.generation, id: e.id })
    }

    /// A view as a dense first-mode-fastest tensor of the spec's dtype and
    /// shape: TYPE for another dtype, then VALUE for another shape; IO when
    /// the backend cannot map the memory.
    pub fn view(&self, dtype: DType, shape: &[i64]) -> Result<DeviceView> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_device_view(self.as_raw(), dtype.to_raw(), shape.as_ptr(), shape.len(), &mut out) })?;
        Ok(unsafe { DeviceView::from_raw(out) })
    }
}

impl DeviceView {
    /// Exports a host-visible view as a legacy `DLManagedTensor*`
    /// (`sw_device_view_to_dlpack`), keeping the view, a use of its
    /// allocation, alive until the consumer calls its deleter.
    pub fn to_dlpack(&self) -> Result<*mut std::ffi::c_void> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_device_view_to_dlpack(self.as_raw(), &mut out) })?;
        Ok(out)
    }

    /// The same as a `DLManagedTensorVersioned*` (`sw_device_view_to_dlpack_versioned`).
    pub fn to_dlpack_versioned(&self, max_major: u32, max_minor: u32) -> Result<*mut std::ffi::c_void> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_device_view_to_dlpack_versioned(self.as_raw(), max_major, max_minor, &mut out) })?;
        Ok(out)
    }

    /// The view's description.
    pub fn describe(&self) -> Result<ViewInfo> {
        let mut info = sys::sw_view_info_t::default();
        unsafe { sys::sw_view_info_init(&mut info) };
        call(|| unsafe { sys::sw_device_view_describe(self.as_raw(), &mut info) })?;
        let rank = info.rank.min(sys::SW_MAX_RANK as usize);
        Ok(ViewInfo {
            pointer: info.pointer,
            dtype: DType::from_raw(info.dtype).map_err(|e| Error::type_(e.message().to_owned()))?,
            shape: info.shape[..rank].to_vec(),
            strides_bytes: info.strides_bytes[..rank].to_vec(),
        })
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").field("kind", &self.kind().ok()).field("generation", &self.generation().ok()).finish()
    }
}

impl std::fmt::Debug for DeviceAllocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceAllocation")
            .field("extent", &self.extent().ok())
            .field("generation", &self.generation().ok())
            .finish()
    }
}

impl std::fmt::Debug for DeviceView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DeviceView").field(&self.describe().ok()).finish()
    }
}
