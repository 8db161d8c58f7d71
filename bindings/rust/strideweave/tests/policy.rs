#![allow(clippy::type_complexity)]
//! Residency policies written in Rust (trait objects and closures), a
//! failing and a panicking one, and the built-in LRU policy.
mod common;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use common::*;
use strideweave::*;

/// Plans to promote what is required (or what `make` says); records calls.
struct Recorder {
    calls: Mutex<Vec<(Vec<Vec<i64>>, Purpose)>>,
    outcomes: Mutex<Vec<(bool, bool, Vec<Vec<i64>>)>>,
    make: Box<dyn Fn(&TileSet, Purpose) -> Result<ResidencyPlan> + Send + Sync>,
}

impl Recorder {
    fn new() -> Arc<Recorder> {
        Recorder::with(|r, _| ResidencyPlan::promote_only(r))
    }
    fn with(make: impl Fn(&TileSet, Purpose) -> Result<ResidencyPlan> + Send + Sync + 'static) -> Arc<Recorder> {
        Arc::new(Recorder { calls: Mutex::new(Vec::new()), outcomes: Mutex::new(Vec::new()), make: Box::new(make) })
    }
    fn calls(&self) -> Vec<(Vec<Vec<i64>>, Purpose)> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

impl ResidencyPolicy for Recorder {
    fn plan(&self, required: &TileSet, purpose: Purpose) -> Result<ResidencyPlan> {
        self.calls.lock().unwrap().push((required.coordinates(), purpose));
        (self.make)(required, purpose)
    }
    fn outcome(&self, o: &Outcome) {
        self.outcomes.lock().unwrap().push((o.plan.is_some(), o.committed, o.promoted.coordinates()));
    }
}

fn make(rt: &Runtime, policy: impl Into<Policy>) -> (TiledEvictable, Vec<f32>) {
    let values = arange(8);
    (seeded(rt, &values, &[4], &[2], policy), values)
}

fn all4() -> Vec<Vec<i64>> {
    vec![vec![0], vec![1], vec![2], vec![3]]
}

#[test]
fn the_policy_gets_the_required_tiles_and_the_purpose() {
    let rt = Runtime::new().unwrap();
    let rec = Recorder::new();
    let (te, logical) = make(&rt, Policy::Custom(rec.clone()));
    assert!(te.has_policy().unwrap());
    assert!(te.policy().is_some());
    let full = te.full_tensor().unwrap();
    let s = TileSelection::new([[3, 1]]).unwrap();
    let got = te.project(&full, &s, None).unwrap().wait().unwrap();
    assert_eq!(got.to_vec::<f32>().unwrap(), vec![logical[6], logical[7], logical[2], logical[3]]);
    assert_eq!(rec.calls(), vec![(vec![vec![1], vec![3]], Purpose::Projection)]);
    // Its outcome: the plan committed, promoting tiles 1 and 3.
    assert!(rec.outcomes.lock().unwrap().contains(&(true, true, vec![vec![1], vec![3]])));
    full.sum().unwrap();
    assert_eq!(rec.calls(), vec![(all4(), Purpose::Operation)]);
    let zeros = Tensor::zeros(&rt, DType::F32, &[2]).unwrap();
    te.scatter(&zeros, &full, &TileSelection::new([[0]]).unwrap(), Reduction::Replace).unwrap().wait().unwrap();
    assert_eq!(rec.calls().iter().map(|c| c.1).collect::<Vec<_>>(), vec![Purpose::Scatter]);
    assert_eq!(Purpose::Backward.name(), "backward");
}

#[test]
fn backward_purpose_and_no_call_for_an_unreachable_branch() {
    let rt = Runtime::new().unwrap();
    let (rec_a, rec_b) = (Recorder::new(), Recorder::new());
    let (a, logical) = make(&rt, Policy::Custom(rec_a.clone()));
    let (b, _) = make(&rt, Policy::Custom(rec_b.clone()));
    let w = Tensor::from_slice(&rt, &[8], &[1f32; 8]).unwrap().requires_grad_().unwrap();
    let ya = a.full_tensor().unwrap().elementwise_mul(&w).unwrap(); // saves a's tiles
    let _yb = b.full_tensor().unwrap().elementwise_mul(&w).unwrap(); // never reached by the loss
    a.evict(&TileSet::new((0..4).map(|i| [i])).unwrap()).unwrap();
    rec_a.calls();
    rec_b.calls();
    ya.sum().unwrap().backward(None, false).unwrap();
    assert_eq!(rec_a.calls(), vec![(all4(), Purpose::Backward)]);
    assert_eq!(rec_b.calls(), vec![]);
    assert_eq!(w.grad().unwrap().unwrap().to_vec::<f32>().unwrap(), logical);
}

#[test]
fn a_closure_policy_promotes_retains_and_evicts() {
    let rt = Runtime::new().unwrap();
    let planner = |required: &TileSet, _: Purpose| {
        let mut promote = required.coordinates();
        promote.push(vec![0]);
        ResidencyPlan::new(Some(&TileSet::new(promote)?), None, Some(&TileSet::new([[3]])?))
    };
    let (te, _) = make(&rt, Policy::custom(planner));
    te.promote(&TileSet::new([[3]]).unwrap()).unwrap();
    te.project(&te.full_tensor().unwrap(), &TileSelection::new([[1]]).unwrap(), None).unwrap().wait().unwrap();
    assert_eq!(te.tile_state(&[0]).unwrap().location, TileLocation::Primary);
    assert_eq!(te.tile_state(&[1]).unwrap().location, TileLocation::Primary);
    assert_eq!(te.tile_state(&[3]).unwrap().location, TileLocation::Secondary);
}

#[test]
fn a_failing_policy_refuses_the_request_with_its_own_error_before_any_work() {
    let rt = Runtime::new().unwrap();
    let (te, _) = make(
        &rt,
        Policy::custom(|_: &TileSet, _: Purpose| -> Result<ResidencyPlan> {
            Err(Error::new(ErrorCode::Unsupported, "no plan today"))
        }),
    );
    let before = states(&te);
    let full = te.full_tensor().unwrap();
    let zeros = Tensor::zeros(&rt, DType::F32, &[2]).unwrap();
    for r in [
        te.project(&full, &TileSelection::new([[1]]).unwrap(), None).map(|_| ()),
        full.sum().map(|_| ()),
        te.scatter(&zeros, &full, &TileSelection::new([[0]]).unwrap(), Reduction::Replace).map(|_| ()),
    ] {
        let e = r.unwrap_err();
        assert_eq!((e.code(), e.message()), (ErrorCode::Unsupported, "no plan today"));
    }
    assert_eq!(states(&te), before);
}

#[test]
fn a_plan_that_does_not_fit_the_grid_is_value() {
    let rt = Runtime::new().unwrap();
    let (te, _) =
        make(&rt, Policy::custom(|_: &TileSet, _: Purpose| ResidencyPlan::promote_only(&TileSet::new([[9]])?)));
    expect_code(te.project(&te.full_tensor().unwrap(), &TileSelection::new([[1]]).unwrap(), None), ErrorCode::Value);
    let (te, _) =
        make(&rt, Policy::custom(|_: &TileSet, _: Purpose| ResidencyPlan::promote_only(&TileSet::new([[0, 0]])?)));
    expect_code(te.project(&te.full_tensor().unwrap(), &TileSelection::new([[1]]).unwrap(), None), ErrorCode::Value);
    expect_code(
        ResidencyPlan::new(Some(&TileSet::new([[1]]).unwrap()), None, Some(&TileSet::new([[1]]).unwrap())),
        ErrorCode::Value,
    );
}

#[derive(Debug, PartialEq)]
struct Boom(&'static str);

/// The documented behaviour: a panic in `plan` never unwinds through C; the
/// request is refused (nothing changes) and the policy's own panic payload
/// is re-raised in the caller, on its thread, after the C call returned.
#[test]
fn a_panic_in_plan_surfaces_in_the_caller_and_changes_nothing() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = make(
        &rt,
        Policy::custom(|_: &TileSet, _: Purpose| -> Result<ResidencyPlan> { panic::panic_any(Boom("no plan today")) }),
    );
    let before = states(&te);
    let full = te.full_tensor().unwrap();
    let zeros = Tensor::zeros(&rt, DType::F32, &[2]).unwrap();
    let calls: Vec<Box<dyn Fn()>> = vec![
        Box::new(|| drop(te.project(&full, &TileSelection::new([[1]]).unwrap(), None))),
        Box::new(|| drop(full.sum())),
        Box::new(|| drop(te.scatter(&zeros, &full, &TileSelection::new([[0]]).unwrap(), Reduction::Replace))),
    ];
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {})); // keep the expected panics out of the output
    for call in &calls {
        let payload = panic::catch_unwind(AssertUnwindSafe(call)).expect_err("the policy's panic");
        assert_eq!(payload.downcast_ref::<Boom>(), Some(&Boom("no plan today")));
    }
    panic::set_hook(hook);
    assert_eq!(states(&te), before);
    // The carrier is fine afterwards; a direct read consults no policy.
    assert_eq!(full.to_vec::<f32>().unwrap(), logical);
}

/// A panic in `outcome` on the calling thread (a synchronous promote)
/// surfaces there too; one on the loop thread surfaces at the await.
#[test]
fn a_panic_in_outcome_surfaces_in_the_caller_or_at_the_await() {
    struct PanicsInOutcome;
    impl ResidencyPolicy for PanicsInOutcome {
        fn plan(&self, required: &TileSet, _: Purpose) -> Result<ResidencyPlan> {
            ResidencyPlan::promote_only(required)
        }
        fn outcome(&self, o: &Outcome) {
            if o.committed {
                panic::panic_any(Boom("outcome"));
            }
        }
    }
    let rt = Runtime::new().unwrap();
    let (te, _) = make(&rt, Policy::custom(PanicsInOutcome));
    let full = te.full_tensor().unwrap();
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let payload = panic::catch_unwind(AssertUnwindSafe(|| {
        let pending = te.project(&full, &TileSelection::new([[2]]).unwrap(), None);
        // Wherever outcome ran (this thread or the loop thread), the panic
        // comes out of the call or of the await.
        let _ = pending.map(|p| p.wait());
    }))
    .expect_err("the policy's panic");
    panic::set_hook(hook);
    assert_eq!(payload.downcast_ref::<Boom>(), Some(&Boom("outcome")));
    // The request itself committed: outcome runs after the commit.
    assert_eq!(te.tile_state(&[2]).unwrap().location, TileLocation::Primary);
}

#[test]
fn the_policy_is_dropped_with_the_last_tiled_evictable() {
    let rt = Runtime::new().unwrap();
    let rec = Recorder::new();
    let (te, _) = make(&rt, Policy::Custom(rec.clone()));
    te.project(&te.full_tensor().unwrap(), &TileSelection::new([[0]]).unwrap(), None).unwrap().wait().unwrap();
    assert!(Arc::strong_count(&rec) > 1);
    drop(te);
    // The library calls destroy when the last reference goes; a reference
    // may be dropped on the loop thread, so allow it to get there.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while Arc::strong_count(&rec) > 1 {
        assert!(std::time::Instant::now() < deadline, "the policy was never dropped");
        std::thread::yield_now();
    }
}

#[test]
fn the_builtin_lru_policy_keeps_a_budget() {
    let rt = Runtime::new().unwrap();
    let lru = LruPolicy::new(2).unwrap();
    let (te, logical) = make(&rt, &lru);
    assert!(te.has_policy().unwrap() && te.policy().is_none());
    let full = te.full_tensor().unwrap();
    for tile in [0, 1, 2, 0, 3] {
        te.project(&full, &TileSelection::new([[tile]]).unwrap(), None).unwrap().wait().unwrap();
        assert!(te.primary_tiles().unwrap().len() <= 2);
    }
    let s = lru.stats().unwrap();
    assert_eq!(s.requests, 5);
    assert_eq!((s.hits, s.misses), (0, 5)); // 0 was evicted before it came back
    assert!(s.evicted >= 3, "{s:?}");
    lru.hint(&TileSet::new([[1]]).unwrap()).unwrap();
    let plan = lru.plan(&TileSet::new([[2]]).unwrap(), Purpose::Projection).unwrap();
    assert!(plan.promote().contains(&[2]));
    expect_code(LruPolicy::new(0), ErrorCode::Value);
    assert_eq!(full.to_vec::<f32>().unwrap(), logical);
}

#[test]
fn a_rust_policy_from_several_threads() {
    let rt = Runtime::new().unwrap();
    let rec = Recorder::new();
    let values = arange(32);
    let te = seeded(&rt, &values, &[8], &[4], Policy::Custom(rec.clone()));
    let full = te.full_tensor().unwrap();
    std::thread::scope(|s| {
        for k in 0..4 {
            let (te, full, values) = (&te, &full, &values);
            s.spawn(move || {
                for i in 0..20 {
                    let tile = (k + i) % 8;
                    let got = te.project(full, &TileSelection::new([[tile]]).unwrap(), None).unwrap().wait().unwrap();
                    assert_eq!(got.to_vec::<f32>().unwrap(), values[4 * tile as usize..4 * tile as usize + 4]);
                }
            });
        }
    });
    assert_eq!(rec.calls().len(), 80);
}
