//! The boundary: every C call goes through [`call`], which turns the
//! returned `sw_error_t*` into a [`Result`] and re-raises a panic that a
//! Rust callback (a residency policy) caught while the library ran it on
//! this thread.
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic;
use std::sync::Mutex;

use strideweave_sys as sys;

use crate::error::{Error, Result};

thread_local! {
    /// How many C calls made through [`call`] are running on this thread:
    /// a callback that finds it above 0 runs inside one, on the caller's
    /// thread, and leaves its panic here for that call to re-raise.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// A panic caught in a callback during the C call running on this thread.
    static PANIC: RefCell<Option<Box<dyn Any + Send>>> = const { RefCell::new(None) };
}

/// Whether this thread is inside a C call made through [`call`].
pub(crate) fn in_call() -> bool {
    DEPTH.with(|d| d.get() > 0)
}

/// Keeps a panic caught in a callback for the C call running on this
/// thread; [`call`] re-raises it once the library returns.
pub(crate) fn stash_panic(payload: Box<dyn Any + Send>) {
    PANIC.with(|p| {
        let mut slot = p.borrow_mut();
        if slot.is_none() {
            *slot = Some(payload);
        }
    });
}

struct Depth;
impl Depth {
    fn enter() -> Depth {
        DEPTH.with(|d| d.set(d.get() + 1));
        Depth
    }
}
impl Drop for Depth {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get() - 1));
    }
}

/// Runs one C call returning `sw_error_t*`. A panic a callback stashed
/// during it is resumed here, on the thread that made the call, after the
/// library has returned (the error it returned for the panic is freed);
/// otherwise NULL is `Ok(())` and an error is taken over.
pub(crate) fn call(f: impl FnOnce() -> *mut sys::sw_error_t) -> Result<()> {
    let raw = {
        let _depth = Depth::enter();
        f()
    };
    if let Some(payload) = PANIC.with(|p| p.borrow_mut().take()) {
        if !raw.is_null() {
            // SAFETY: the library returned this error to us.
            unsafe { sys::sw_error_free(raw) };
        }
        panic::resume_unwind(payload);
    }
    check(raw)
}

/// NULL is success; an error is taken over and freed.
pub(crate) fn check(raw: *mut sys::sw_error_t) -> Result<()> {
    if raw.is_null() {
        Ok(())
    } else {
        // SAFETY: the library hands the caller ownership of a returned error.
        Err(unsafe { Error::from_raw(raw) })
    }
}

/// A message for a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_owned()
    }
}

/// Striped locks that serialise this binding's public writes to one
/// carrier (the header: "concurrent writes to the same carrier must be
/// serialised by the caller"). Keyed by the carrier's address, so every
/// handle of one carrier takes the same lock.
static WRITE_LOCKS: [Mutex<()>; 64] = [const { Mutex::new(()) }; 64];

thread_local! {
    /// The stripes this thread holds: a callback the library runs inside a
    /// serialised call (a policy's plan during a move) may write again on
    /// this thread without deadlocking on its own lock.
    static HELD: Cell<u64> = const { Cell::new(0) };
}

/// Runs `f` holding the write lock of the carrier at `carrier`.
pub(crate) fn serialised_write<R>(carrier: *const sys::sw_carrier_t, f: impl FnOnce() -> R) -> R {
    let stripe = ((carrier as usize) >> 4) % WRITE_LOCKS.len();
    let bit = 1u64 << stripe;
    if HELD.with(|h| h.get() & bit != 0) {
        return f(); // this thread already holds it, further up the stack
    }
    let _guard = WRITE_LOCKS[stripe].lock().unwrap_or_else(|e| e.into_inner());
    struct Held(u64);
    impl Drop for Held {
        fn drop(&mut self) {
            HELD.with(|h| h.set(h.get() & !self.0));
        }
    }
    HELD.with(|h| h.set(h.get() | bit));
    let _held = Held(bit);
    f()
}

/// Declares an owning, reference-counted handle type: `Drop` releases one
/// reference, `Clone` retains another. The raw pointer is never NULL and
/// never exposed mutably, so a handle cannot outlive its reference.
macro_rules! handle {
    ($(#[$meta:meta])* $name:ident, $raw:ty, $retain:ident, $release:ident) => {
        $(#[$meta])*
        pub struct $name {
            raw: std::ptr::NonNull<$raw>,
        }

        #[allow(dead_code)]
        impl $name {
            /// Takes over one reference to a raw handle.
            ///
            /// # Safety
            /// `raw` must be a live handle of this type whose reference the
            /// caller owns and hands over.
            pub unsafe fn from_raw(raw: *mut $raw) -> Self {
                $name { raw: std::ptr::NonNull::new(raw).expect(concat!(stringify!($name), ": NULL handle")) }
            }

            /// A new reference to a borrowed raw handle (retained).
            ///
            /// # Safety
            /// `raw` must be a live handle of this type.
            pub unsafe fn from_borrowed(raw: *const $raw) -> Self {
                strideweave_sys::$retain(raw as *mut $raw);
                Self::from_raw(raw as *mut $raw)
            }

            /// The raw handle, borrowed for as long as `self` lives.
            pub fn as_raw(&self) -> *mut $raw {
                self.raw.as_ptr()
            }

            /// Gives up this reference without releasing it.
            pub fn into_raw(self) -> *mut $raw {
                let raw = self.raw.as_ptr();
                std::mem::forget(self);
                raw
            }

            /// Whether both handles refer to the same object.
            pub fn ptr_eq(&self, other: &Self) -> bool {
                self.raw == other.raw
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: we own one reference; release never blocks.
                unsafe { strideweave_sys::$release(self.raw.as_ptr()) }
            }
        }

        impl Clone for $name {
            fn clone(&self) -> Self {
                // SAFETY: the handle is live while self is.
                unsafe { strideweave_sys::$retain(self.raw.as_ptr()) };
                $name { raw: self.raw }
            }
        }
    };
}
pub(crate) use handle;

/// Writes an `i64` slice length check's error.
pub(crate) fn rank_error(what: &str, got: usize) -> Error {
    Error::value(format!("{what} has {got} entries; at most {} are allowed", sys::SW_MAX_RANK))
}
