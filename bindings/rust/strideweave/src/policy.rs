//! Residency policies: a Rust [`ResidencyPolicy`] (a trait object or a
//! closure) or the built-in [`LruPolicy`].
//!
//! # Panics in a policy
//!
//! The library calls a policy from C. A panic never unwinds through C: the
//! trampoline catches it (`catch_unwind`) and
//! - in `plan`, which the library calls on the thread making the request,
//!   refuses the request (the library then changes nothing) and keeps the
//!   panic; the binding's call re-raises it with `resume_unwind` on that
//!   thread as soon as the C call returns, so the caller of `project`,
//!   `reduce_sum`, `backward`, ... sees the policy's own panic;
//! - in `outcome`, on the calling thread the same happens; on the runtime's
//!   loop thread the panic is stored with the policy and re-raised by the
//!   next [`Await::wait`](crate::Await::wait) or `result` of an await the
//!   TiledEvictable returned, or by its next request.
use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::{Arc, Mutex};

use strideweave_sys as sys;

use crate::error::{static_str, Error, ErrorCode, Result};
use crate::ffi::{self, call, handle};
use crate::tiles::{ResidencyPlan, TileSet};

/// Why a request needs its tiles (`sw_residency_purpose_t`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// An op on the full tensor.
    Operation,
    /// A projection.
    Projection,
    /// A scatter.
    Scatter,
    /// A backward pass reading saved tiles.
    Backward,
    /// A purpose this crate does not name.
    Other(u32),
}

impl Purpose {
    fn from_raw(raw: sys::sw_residency_purpose_t) -> Purpose {
        use sys::sw_residency_purpose_t as C;
        match raw {
            C::SW_PURPOSE_OPERATION => Purpose::Operation,
            C::SW_PURPOSE_PROJECTION => Purpose::Projection,
            C::SW_PURPOSE_SCATTER => Purpose::Scatter,
            C::SW_PURPOSE_BACKWARD => Purpose::Backward,
            other => Purpose::Other(other.0),
        }
    }

    fn to_raw(self) -> sys::sw_residency_purpose_t {
        use sys::sw_residency_purpose_t as C;
        match self {
            Purpose::Operation => C::SW_PURPOSE_OPERATION,
            Purpose::Projection => C::SW_PURPOSE_PROJECTION,
            Purpose::Scatter => C::SW_PURPOSE_SCATTER,
            Purpose::Backward => C::SW_PURPOSE_BACKWARD,
            Purpose::Other(n) => C(n as _),
        }
    }

    /// "operation", "projection", "scatter", "backward" ("unknown" otherwise).
    pub fn name(self) -> &'static str {
        // SAFETY: returns static storage.
        unsafe { static_str(sys::sw_residency_purpose_name(self.to_raw())) }
    }
}

/// How a planned request ended, or a residency change outside planned
/// requests (`plan` is then `None`): given to [`ResidencyPolicy::outcome`].
#[derive(Debug)]
pub struct Outcome {
    /// The plan this outcome reports on; `None` for changes outside planned
    /// requests (promote/evict by hand, public writes, a primary seed).
    pub plan: Option<ResidencyPlan>,
    /// Whether the request succeeded (its changes committed).
    pub committed: bool,
    /// The tiles it made primary (empty when it failed).
    pub promoted: TileSet,
    /// The tiles it dropped from primary (empty when it failed).
    pub evicted: TileSet,
}

/// A residency policy: given the tiles a request must read or write and
/// why, returns a [`ResidencyPlan`]. It can only optimise: required tiles
/// are made available whatever it plans, and evictions wait for the work
/// that needs the tiles. An `Err` refuses the request before any work, and
/// the caller gets the same code and message.
///
/// `Send + Sync` because the library calls `plan` on whichever thread
/// makes a request (several at once) and `outcome` on the loop thread too.
/// Closures `Fn(&TileSet, Purpose) -> Result<ResidencyPlan>` are policies.
pub trait ResidencyPolicy: Send + Sync + 'static {
    /// The plan for a request needing `required` for `purpose`.
    fn plan(&self, required: &TileSet, purpose: Purpose) -> Result<ResidencyPlan>;

    /// Called once for every plan `plan` returned, when its request is
    /// terminal (or refused), and for residency changes outside planned
    /// requests. It must not block on this TiledEvictable's requests.
    fn outcome(&self, outcome: &Outcome) {
        let _ = outcome;
    }
}

impl<F> ResidencyPolicy for F
where
    F: Fn(&TileSet, Purpose) -> Result<ResidencyPlan> + Send + Sync + 'static,
{
    fn plan(&self, required: &TileSet, purpose: Purpose) -> Result<ResidencyPlan> {
        self(required, purpose)
    }
}

handle!(
    /// The built-in LRU policy: keeps at most a budget of tiles primary,
    /// promotes what a request needs, evicts the least recently used tiles
    /// no request needs, and promotes prefetch hints while the budget
    /// allows. Its view and statistics follow committed requests only.
    LruPolicy,
    sys::sw_lru_policy_t,
    sw_lru_policy_retain,
    sw_lru_policy_release
);

// SAFETY: the LRU policy is called by the library from every thread that
// makes a request (plan) and from the loop thread (outcome), per
// sw_residency_policy_t's notes, so its state is synchronised internally
// (docs/architecture.md: "the policy's own state" carries its own lock);
// hint and stats take the same lock. Reference counting is thread-safe.
unsafe impl Send for LruPolicy {}
// SAFETY: as above.
unsafe impl Sync for LruPolicy {}

/// Statistics of the LRU policy's committed requests (`sw_lru_stats_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LruStats {
    /// Planned requests that committed.
    pub requests: u64,
    /// Required tiles already primary when planned.
    pub hits: u64,
    /// Required tiles it had to promote.
    pub misses: u64,
    /// Tiles planned for promotion (misses and prefetches).
    pub promoted: u64,
    /// Tiles its plans evicted.
    pub evicted: u64,
}

impl LruPolicy {
    /// An LRU policy keeping at most `budget_tiles` tiles primary; VALUE for 0.
    pub fn new(budget_tiles: usize) -> Result<LruPolicy> {
        let mut out = ptr::null_mut();
        call(|| unsafe { sys::sw_lru_policy_create(budget_tiles, &mut out) })?;
        Ok(unsafe { LruPolicy::from_raw(out) })
    }

    /// Tiles expected soon (the next batch's experts): promoted by the next
    /// plan while the budget allows. Replaces earlier hints.
    pub fn hint(&self, tiles: &TileSet) -> Result<()> {
        call(|| unsafe { sys::sw_lru_policy_hint(self.as_raw(), tiles.as_raw()) })
    }

    /// Its statistics.
    pub fn stats(&self) -> Result<LruStats> {
        let mut s = sys::sw_lru_stats_t::default();
        unsafe { sys::sw_lru_stats_init(&mut s) };
        call(|| unsafe { sys::sw_lru_policy_stats(self.as_raw(), &mut s) })?;
        Ok(LruStats { requests: s.requests, hits: s.hits, misses: s.misses, promoted: s.promoted, evicted: s.evicted })
    }

    /// The vtable the library calls (retaining the policy until its destroy).
    fn vtable(&self) -> Result<sys::sw_residency_policy_t> {
        let mut vt = sys::sw_residency_policy_t::default();
        call(|| unsafe { sys::sw_lru_policy_as_residency_policy(self.as_raw(), &mut vt) })?;
        Ok(vt)
    }

    /// What the policy would plan now for `required` (as the library asks
    /// it); this does not count as a request.
    pub fn plan(&self, required: &TileSet, purpose: Purpose) -> Result<ResidencyPlan> {
        let vt = self.vtable()?;
        let mut out = ptr::null_mut();
        let planned = match vt.plan {
            Some(plan) => call(|| unsafe { plan(vt.user_data, required.as_raw(), purpose.to_raw(), &mut out) }),
            None => Err(Error::new(ErrorCode::Internal, "the LRU policy has no plan function")),
        };
        if let Some(destroy) = vt.destroy {
            // SAFETY: ends the reference sw_lru_policy_as_residency_policy took.
            unsafe { destroy(vt.user_data) };
        }
        planned?;
        Ok(unsafe { ResidencyPlan::from_raw(out) })
    }
}

/// The residency policy a TiledEvictable is created with.
#[derive(Clone, Default)]
pub enum Policy {
    /// No policy: every request makes its tiles available on demand.
    #[default]
    None,
    /// The built-in LRU policy.
    Lru(LruPolicy),
    /// A Rust policy.
    Custom(Arc<dyn ResidencyPolicy>),
}

impl Policy {
    /// A Rust policy (a type implementing [`ResidencyPolicy`], or a closure).
    pub fn custom(policy: impl ResidencyPolicy) -> Policy {
        Policy::Custom(Arc::new(policy))
    }
}

impl From<LruPolicy> for Policy {
    fn from(lru: LruPolicy) -> Policy {
        Policy::Lru(lru)
    }
}

impl From<&LruPolicy> for Policy {
    fn from(lru: &LruPolicy) -> Policy {
        Policy::Lru(lru.clone())
    }
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Policy::None => f.write_str("Policy::None"),
            Policy::Lru(_) => f.write_str("Policy::Lru"),
            Policy::Custom(_) => f.write_str("Policy::Custom"),
        }
    }
}

/// What a TiledEvictable, its awaits and the policy's trampolines share: a
/// panic the policy raised where no binding call could re-raise it.
#[derive(Default)]
pub(crate) struct PolicyShared {
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

impl PolicyShared {
    /// Re-raises a stored policy panic on this thread.
    pub(crate) fn rethrow(&self) {
        let payload = self.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(p) = payload {
            panic::resume_unwind(p);
        }
    }

    fn keep(&self, payload: Box<dyn Any + Send>) {
        if ffi::in_call() {
            ffi::stash_panic(payload);
        } else {
            let mut slot = self.panic.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = Some(payload);
            }
        }
    }
}

/// The `user_data` of a Rust policy's vtable: freed by `destroy`.
struct PolicyBox {
    policy: Arc<dyn ResidencyPolicy>,
    shared: Arc<PolicyShared>,
}

unsafe extern "C" fn plan_trampoline(
    user_data: *mut std::ffi::c_void,
    required: *const sys::sw_tile_set_t,
    purpose: sys::sw_residency_purpose_t,
    out_plan: *mut *mut sys::sw_residency_plan_t,
) -> *mut sys::sw_error_t {
    // SAFETY: user_data is the PolicyBox this vtable was made with; the
    // library keeps it alive until destroy.
    let b = unsafe { &*(user_data as *const PolicyBox) };
    let run = AssertUnwindSafe(|| {
        // SAFETY: `required` is borrowed for the call; retain it to own one.
        let required = unsafe { TileSet::from_borrowed(required) };
        b.policy.plan(&required, Purpose::from_raw(purpose))
    });
    match panic::catch_unwind(run) {
        Ok(Ok(plan)) => {
            // SAFETY: out_plan is the library's out-parameter; it takes over
            // the reference.
            unsafe { *out_plan = plan.into_raw() };
            ptr::null_mut()
        }
        Ok(Err(e)) => e.to_raw(),
        Err(payload) => {
            let message = format!("residency policy panicked: {}", ffi::panic_message(&*payload));
            b.shared.keep(payload);
            Error::new(ErrorCode::State, message).to_raw()
        }
    }
}

unsafe extern "C" fn outcome_trampoline(
    user_data: *mut std::ffi::c_void,
    plan: *const sys::sw_residency_plan_t,
    committed: bool,
    promoted: *const sys::sw_tile_set_t,
    evicted: *const sys::sw_tile_set_t,
) {
    // SAFETY: as in plan_trampoline.
    let b = unsafe { &*(user_data as *const PolicyBox) };
    let run = AssertUnwindSafe(|| {
        // SAFETY: every handle is borrowed for the call; retained to own one.
        let outcome = unsafe {
            Outcome {
                plan: if plan.is_null() { None } else { Some(ResidencyPlan::from_borrowed(plan)) },
                committed,
                promoted: if promoted.is_null() { TileSet::empty() } else { TileSet::from_borrowed(promoted) },
                evicted: if evicted.is_null() { TileSet::empty() } else { TileSet::from_borrowed(evicted) },
            }
        };
        b.policy.outcome(&outcome);
    });
    if let Err(payload) = panic::catch_unwind(run) {
        b.shared.keep(payload);
    }
}

unsafe extern "C" fn destroy_trampoline(user_data: *mut std::ffi::c_void) {
    // SAFETY: called once, when the last TiledEvictable using the vtable is
    // gone: the box is ours again. Dropping a policy must not unwind into C.
    let b = unsafe { Box::from_raw(user_data as *mut PolicyBox) };
    let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(b)));
}

/// A vtable ready for `sw_tiled_create`, and what to do if creation fails.
pub(crate) struct PolicyVtable {
    pub(crate) vtable: sys::sw_residency_policy_t,
    pub(crate) shared: Option<Arc<PolicyShared>>,
}

impl PolicyVtable {
    pub(crate) fn new(policy: &Policy) -> Result<Option<PolicyVtable>> {
        Ok(match policy {
            Policy::None => None,
            Policy::Lru(lru) => Some(PolicyVtable { vtable: lru.vtable()?, shared: None }),
            Policy::Custom(p) => {
                let shared = Arc::new(PolicyShared::default());
                let b = Box::new(PolicyBox { policy: p.clone(), shared: shared.clone() });
                let mut vt = sys::sw_residency_policy_t::default();
                unsafe { sys::sw_residency_policy_init(&mut vt) };
                vt.user_data = Box::into_raw(b) as *mut _;
                vt.plan = Some(plan_trampoline);
                vt.outcome = Some(outcome_trampoline);
                vt.destroy = Some(destroy_trampoline);
                Some(PolicyVtable { vtable: vt, shared: Some(shared) })
            }
        })
    }

    /// The library did not take the vtable (creation failed): release what
    /// it would have released with destroy.
    pub(crate) fn abandon(self) {
        if let Some(destroy) = self.vtable.destroy {
            // SAFETY: the library never took user_data, so it is still ours.
            unsafe { destroy(self.vtable.user_data) };
        }
    }
}

impl std::fmt::Debug for LruPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LruPolicy").field(&self.stats().ok()).finish()
    }
}
