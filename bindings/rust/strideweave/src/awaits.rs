//! Completion handles of asynchronous work: blocking [`Await::wait`] and
//! `std::future::Future`.
use std::future::Future;
use std::marker::PhantomData;
use std::os::raw::c_char;
use std::pin::Pin;
use std::ptr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use strideweave_sys as sys;

use crate::carrier::Carrier;
use crate::error::{Error, ErrorCode, Result};
use crate::ffi::{call, handle};
use crate::policy::PolicyShared;
use crate::tensor::Tensor;

handle!(
    /// The raw await handle behind an [`Await`].
    RawAwait,
    sys::sw_await_t,
    sw_await_retain,
    sw_await_release
);

// SAFETY: the header: "An await is reference counted and thread-safe: any
// number of threads may query or wait on it at once".
unsafe impl Send for RawAwait {}
// SAFETY: as above.
unsafe impl Sync for RawAwait {}

/// What an await's success gives: a [`Tensor`] (moves, projections,
/// scatters) or `()` (residency requests, in-place updates).
pub trait AwaitOutput: Sized + Send + 'static {
    #[doc(hidden)]
    fn from_result(result: Option<Tensor>) -> Result<Self>;
}

impl AwaitOutput for Tensor {
    fn from_result(result: Option<Tensor>) -> Result<Tensor> {
        result.ok_or_else(|| Error::new(ErrorCode::Internal, "the await succeeded without its result tensor"))
    }
}

impl AwaitOutput for () {
    fn from_result(_: Option<Tensor>) -> Result<()> {
        Ok(())
    }
}

/// The state an await's completion callback shares with its futures. The
/// callback owns one `Arc` of it (given to the library as `user_data`,
/// taken back when the callback fires), so it never points at an `Await`
/// or a future: dropping either early leaves the callback nothing freed to
/// touch.
#[derive(Default)]
struct Wake {
    state: Mutex<WakeState>,
}

#[derive(Default)]
struct WakeState {
    fired: bool,
    waker: Option<Waker>,
}

unsafe extern "C" fn on_complete(
    user_data: *mut std::ffi::c_void,
    _: *mut sys::sw_await_t,
    _: sys::sw_error_code_t,
    _: *const c_char,
) {
    // SAFETY: user_data is the Arc<Wake> leaked by Await::subscribe; the
    // callback fires exactly once (header), so it is taken back exactly once.
    let wake = unsafe { Arc::from_raw(user_data as *const Wake) };
    // No panic may cross into C: a poisoned lock is still usable.
    let waker = {
        let mut s = wake.state.lock().unwrap_or_else(|e| e.into_inner());
        s.fired = true;
        s.waker.take()
    };
    if let Some(w) = waker {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wake()));
    }
}

/// A handle on eagerly started work (`sw_await_t`). Each call that returns
/// one validated its arguments and started every transfer it could; the
/// work completes on the runtime's loop thread whether or not the handle is
/// kept (in-flight work retains what it touches).
///
/// [`wait`](Self::wait) blocks; `.await` (the `Future` impl) never blocks:
/// it is woken from the await's completion callback
/// (`sw_await_set_callback`, loop-thread mode). Every observation gives the
/// same result — the same tensor (see [`Tensor::ptr_eq`]) or the same
/// error.
pub struct Await<T: AwaitOutput> {
    raw: RawAwait,
    wake: Mutex<Option<Arc<Wake>>>,
    /// The Rust policies of the TiledEvictables the work runs on, whose
    /// panics on the loop thread this await re-raises.
    policies: Vec<Arc<PolicyShared>>,
    _output: PhantomData<fn() -> T>,
}

/// Completion of a move or a scatter: its result is a tensor.
pub type AwaitMove = Await<Tensor>;
/// Completion of a projection: its result is the compact tensor.
pub type AwaitProjection = Await<Tensor>;
/// Completion of a promotion or an eviction: no result.
pub type AwaitResidency = Await<()>;
/// Completion of an in-place update of a TiledEvictable: no result.
pub type AwaitUpdate = Await<()>;

/// What kind of work an await stands for.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AwaitKind {
    /// A move or scatter (or an update).
    Move,
    /// A projection.
    Projection,
    /// A promotion or eviction.
    Residency,
    /// A kind this crate does not name.
    Other(u32),
}

impl<T: AwaitOutput> Await<T> {
    /// Wraps a new await reference.
    pub(crate) fn adopt(raw: *mut sys::sw_await_t, policy: Option<Arc<PolicyShared>>) -> Await<T> {
        Await::adopt_policies(raw, policy.into_iter().collect())
    }

    /// Wraps a new await reference of work on several TiledEvictables,
    /// re-raising a panic of any of their policies.
    pub(crate) fn adopt_policies(raw: *mut sys::sw_await_t, policies: Vec<Arc<PolicyShared>>) -> Await<T> {
        // SAFETY: callers pass a reference the library just handed out.
        Await { raw: unsafe { RawAwait::from_raw(raw) }, wake: Mutex::new(None), policies, _output: PhantomData }
    }

    /// The raw handle, borrowed.
    pub fn as_raw(&self) -> *mut sys::sw_await_t {
        self.raw.as_raw()
    }

    /// Whether the work is terminal (succeeded or failed). Non-blocking.
    pub fn is_done(&self) -> Result<bool> {
        let mut status = sys::sw_await_status_t(0);
        call(|| unsafe { sys::sw_await_query(self.as_raw(), &mut status) })?;
        Ok(status != sys::sw_await_status_t::SW_AWAIT_PENDING)
    }

    /// The kind of work.
    pub fn kind(&self) -> Result<AwaitKind> {
        let mut k = sys::sw_await_kind_t(0);
        call(|| unsafe { sys::sw_await_kind(self.as_raw(), &mut k) })?;
        Ok(match k {
            sys::sw_await_kind_t::SW_AWAIT_MOVE => AwaitKind::Move,
            sys::sw_await_kind_t::SW_AWAIT_PROJECTION => AwaitKind::Projection,
            sys::sw_await_kind_t::SW_AWAIT_RESIDENCY => AwaitKind::Residency,
            other => AwaitKind::Other(other.0),
        })
    }

    /// Blocks until the work is terminal; its result or its error (the same
    /// every time). A panic that a residency policy raised on the loop
    /// thread while this work ran is re-raised here.
    pub fn wait(&self) -> Result<T> {
        self.wait_ns(-1)
    }

    /// Like [`wait`](Self::wait), giving up after `timeout` with TIMEOUT
    /// (the work stays pending; wait again later).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<T> {
        self.wait_ns(i64::try_from(timeout.as_nanos()).unwrap_or(i64::MAX))
    }

    fn wait_ns(&self, ns: i64) -> Result<T> {
        let waited = call(|| unsafe { sys::sw_await_wait(self.as_raw(), ns) });
        self.rethrow_policy_panic();
        waited?;
        self.result()
    }

    /// The result of terminal work: STATE while pending, the work's error
    /// if it failed.
    pub fn result(&self) -> Result<T> {
        self.rethrow_policy_panic();
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_await_result(self.as_raw(), &mut out) })?;
        // SAFETY: a non-NULL result is a new tensor reference.
        T::from_result(if out.is_null() { None } else { Some(unsafe { Tensor::from_raw(out) }) })
    }

    fn rethrow_policy_panic(&self) {
        for policy in &self.policies {
            policy.rethrow();
        }
    }

    /// Installs the completion callback once, waking `waker` from it.
    fn subscribe(&self, waker: &Waker) -> Result<()> {
        let mut slot = self.wake.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(wake) = slot.as_ref() {
            let mut s = wake.state.lock().unwrap_or_else(|e| e.into_inner());
            if !s.fired {
                match &s.waker {
                    Some(w) if w.will_wake(waker) => {}
                    _ => s.waker = Some(waker.clone()),
                }
            }
            return Ok(());
        }
        let wake = Arc::new(Wake::default());
        wake.state.lock().unwrap_or_else(|e| e.into_inner()).waker = Some(waker.clone());
        let mut info = sys::sw_await_callback_info_t::default();
        unsafe { sys::sw_await_callback_info_init(&mut info) };
        info.mode = sys::sw_callback_mode_t::SW_CALLBACK_MODE_LOOP_THREAD;
        info.callback = Some(on_complete);
        let user_data = Arc::into_raw(wake.clone());
        info.user_data = user_data as *mut _;
        if let Err(e) = call(|| unsafe { sys::sw_await_set_callback(self.as_raw(), &info) }) {
            // SAFETY: the library refused the callback, so it will never
            // take back the reference we gave it.
            drop(unsafe { Arc::from_raw(user_data) });
            return Err(e);
        }
        *slot = Some(wake);
        Ok(())
    }
}

impl<T: AwaitOutput> Future for Await<T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let this = self.get_mut();
        match this.is_done() {
            Ok(true) => return Poll::Ready(this.result()),
            Ok(false) => {}
            Err(e) => return Poll::Ready(Err(e)),
        }
        if let Err(e) = this.subscribe(cx.waker()) {
            return Poll::Ready(Err(e));
        }
        // The work may have completed between the query and the callback's
        // installation; a callback on a terminal await fires soon anyway,
        // but do not wait for it.
        match this.is_done() {
            Ok(true) => Poll::Ready(this.result()),
            Ok(false) => Poll::Pending,
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

impl<T: AwaitOutput> std::fmt::Debug for Await<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.is_done() {
            Ok(true) => "done",
            Ok(false) => "pending",
            Err(_) => "unknown",
        };
        write!(f, "Await({state})")
    }
}

/// Starts moving `tensor`'s values into `destination` (same dtype, at least
/// its element count, or empty: then allocated to fit). Both carriers are
/// claimed until the await is terminal; on success the result is a dense
/// tensor at slot 0 of the destination and the source carrier is disposed;
/// on failure both are usable and unchanged. Differentiable.
pub fn move_async(tensor: &Tensor, destination: &Carrier) -> Result<AwaitMove> {
    let mut out = ptr::null_mut();
    // The move claims the destination for its writes: no public write of
    // this binding may be halfway through it meanwhile.
    destination
        .serialised(|| call(|| unsafe { sys::sw_move_async(tensor.as_raw(), destination.as_raw(), &mut out) }))?;
    Ok(Await::adopt(out, None))
}
