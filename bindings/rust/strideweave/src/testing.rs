//! The testing hooks of `strideweave_testing.h`: deterministic fault
//! injection, transfer holds, claims and the fake device's controls, for
//! tests of the library and of programs embedding it. Not for production
//! use; they may change between minor releases. Feature `testing`.
use std::time::Duration;

use strideweave_sys as sys;
use sys::testing as t;

use crate::carrier::Carrier;
use crate::device::{CopyEvent, Device};
use crate::error::Result;
use crate::ffi::call;
use crate::runtime::Runtime;

/// What a fault or hold catches (`sw_fault_kind_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// An allocation (carrier creation, a tile buffer, ...): OUT_OF_MEMORY.
    Allocation,
    /// One read request of a storage carrier, or one read of a model
    /// file's header by an opener: IO.
    Read,
    /// One write request of a storage carrier: IO.
    Write,
    /// One zstd frame decompression: DATA_CORRUPT.
    Decompress,
}

impl Fault {
    fn to_raw(self) -> t::sw_fault_kind_t {
        match self {
            Fault::Allocation => t::sw_fault_kind_t::SW_FAULT_ALLOCATION,
            Fault::Read => t::sw_fault_kind_t::SW_FAULT_READ,
            Fault::Write => t::sw_fault_kind_t::SW_FAULT_WRITE,
            Fault::Decompress => t::sw_fault_kind_t::SW_FAULT_DECOMPRESS,
        }
    }
}

/// One-shot failures of the fake device (`sw_fake_failure_t`), OR-able as bits.
pub mod fake_failure {
    /// Next allocation: OUT_OF_MEMORY.
    pub const ALLOCATION: u32 = 1;
    /// Next copy (sync: at the call; async: at completion): IO.
    pub const COPY: u32 = 2;
    /// Next view: IO.
    pub const VIEW: u32 = 4;
    /// Next backend call: DEVICE_LOST and a restart.
    pub const DEVICE_LOST: u32 = 8;
}

fn ns(timeout: Option<Duration>) -> i64 {
    timeout.map_or(-1, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

impl Runtime {
    /// Arms a one-shot fault: the `nth` (1 = next) operation of `kind` fails;
    /// 0 disarms.
    pub fn inject_fault(&self, kind: Fault, nth: u64) -> Result<()> {
        call(|| unsafe { t::sw_testing_inject_fault(self.as_raw(), kind.to_raw(), nth) })
    }

    /// Holds back the completion of the `nth` asynchronous storage transfer
    /// of `kind` (Read or Write) until [`release_hold`](Self::release_hold):
    /// work waiting for it stays pending, deterministically. 0 disarms.
    pub fn hold(&self, kind: Fault, nth: u64) -> Result<()> {
        call(|| unsafe { t::sw_testing_hold(self.as_raw(), kind.to_raw(), nth) })
    }

    /// Blocks until the armed hold caught its transfer; TIMEOUT after
    /// `timeout` (`None`: no limit).
    pub fn wait_held(&self, timeout: Option<Duration>) -> Result<()> {
        call(|| unsafe { t::sw_testing_wait_held(self.as_raw(), ns(timeout)) })
    }

    /// Lets the held completion run. STATE when none is held.
    pub fn release_hold(&self) -> Result<()> {
        call(|| unsafe { t::sw_testing_release_hold(self.as_raw()) })
    }

    /// Holds the next transfer of `kind` while `f` runs (which gets a
    /// function blocking until the transfer is caught), then releases it.
    pub fn with_hold<R>(&self, kind: Fault, f: impl FnOnce(&dyn Fn() -> Result<()>) -> R) -> Result<R> {
        struct Release<'a>(&'a Runtime, Fault);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                let _ = self.0.hold(self.1, 0);
                let _ = self.0.release_hold(); // STATE if never caught
            }
        }
        self.hold(kind, 1)?;
        let _release = Release(self, kind);
        let caught = || self.wait_held(Some(Duration::from_secs(600)));
        Ok(f(&caught))
    }
}

impl Carrier {
    /// Claims the carrier as in-flight work would. STATE if owned or disposed.
    pub fn testing_claim(&self) -> Result<()> {
        call(|| unsafe { t::sw_testing_claim(self.as_raw()) })
    }

    /// Ends a [`testing_claim`](Self::testing_claim). STATE if it holds none.
    pub fn testing_unclaim(&self) -> Result<()> {
        call(|| unsafe { t::sw_testing_unclaim(self.as_raw()) })
    }

    /// Flips a stored byte of zstd frame `frame`: its next read fails
    /// DATA_CORRUPT. UNSUPPORTED for other carriers.
    pub fn testing_corrupt_frame(&self, frame: usize) -> Result<()> {
        call(|| unsafe { t::sw_testing_corrupt_frame(self.as_raw(), frame) })
    }
}

impl Device {
    /// The fake backend's call log, one line per backend call ("alloc
    /// alloc=1 bytes=256 alignment=64", ...). TYPE for another device.
    pub fn fake_log(&self) -> Result<Vec<String>> {
        let mut count = 0;
        call(|| unsafe { t::sw_fake_device_log_count(self.as_raw(), &mut count) })?;
        (0..count)
            .map(|i| {
                let mut len = 0;
                let _ = call(|| unsafe {
                    t::sw_fake_device_log_entry(self.as_raw(), i, std::ptr::null_mut(), 0, &mut len)
                });
                let mut buf = vec![0u8; len + 1];
                call(|| unsafe {
                    t::sw_fake_device_log_entry(self.as_raw(), i, buf.as_mut_ptr().cast(), buf.len(), &mut len)
                })?;
                buf.truncate(len);
                Ok(String::from_utf8_lossy(&buf).into_owned())
            })
            .collect()
    }

    /// Clears the fake backend's log.
    pub fn fake_log_clear(&self) -> Result<()> {
        call(|| unsafe { t::sw_fake_device_log_clear(self.as_raw()) })
    }

    /// Arms one-shot failures ([`fake_failure`] bits).
    pub fn fake_arm_failure(&self, failures: u32) -> Result<()> {
        call(|| unsafe { t::sw_fake_device_arm_failure(self.as_raw(), failures) })
    }

    /// Performs one pending asynchronous copy now. VALUE when not pending.
    pub fn fake_complete(&self, event: CopyEvent) -> Result<()> {
        let mut e = sys::sw_copy_event_t::default();
        unsafe { sys::sw_copy_event_init(&mut e) };
        e.generation = event.generation;
        e.id = event.id;
        call(|| unsafe { t::sw_fake_device_complete(self.as_raw(), &e) })
    }

    /// Performs every pending asynchronous copy, oldest first; how many.
    pub fn fake_complete_all(&self) -> Result<usize> {
        let mut n = 0;
        call(|| unsafe { t::sw_fake_device_complete_all(self.as_raw(), &mut n) })?;
        Ok(n)
    }
}
