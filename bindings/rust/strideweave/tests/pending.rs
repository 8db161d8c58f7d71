//! Work observed while it is in flight, made deterministic by the testing
//! holds (a storage transfer's completion held back until released): eager
//! projection, refused overlapping requests, refused release, timeouts, and
//! awaits as futures woken by the completion callback, dropped early too.
#![cfg(feature = "testing")]
mod common;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use common::*;
use strideweave::testing::Fault;
use strideweave::*;

const T: i64 = 4096; // elements per tile

fn line(rt: &Runtime, tiles: i64) -> TiledEvictable {
    seeded_file(rt, &vec![1f32; (tiles * T) as usize], &[tiles], &[T], Policy::None)
}

fn sel(axes: &[&[i64]]) -> TileSelection {
    TileSelection::new(axes.iter().copied()).unwrap()
}

#[test]
fn overlap_projection_with_computation() {
    let rt = Runtime::new().unwrap();
    let te = line(&rt, 4);
    let full = te.full_tensor().unwrap();
    rt.with_hold(Fault::Read, |caught| {
        let h = te.project(&full, &sel(&[&[3, 1]]), None).unwrap();
        caught().unwrap();
        assert!(!h.is_done().unwrap()); // project started the fetch and returned
                                        // Unrelated work meanwhile.
        let other = Tensor::from_slice(&rt, &[1000], &[1f32; 1000]).unwrap().sum().unwrap();
        assert_eq!(other.item().unwrap(), 1000.0);
        expect_code(h.wait_timeout(Duration::from_millis(1)), ErrorCode::Timeout);
        assert!(!h.is_done().unwrap()); // a timeout leaves the work pending
        expect_code(h.result(), ErrorCode::State);
        h
    })
    .map(|h| {
        let compact = h.wait().unwrap();
        assert_eq!(compact.shape().unwrap(), vec![2 * T]);
        assert_eq!(compact.sum().unwrap().item().unwrap(), (2 * T) as f64);
    })
    .unwrap();
}

#[test]
fn refuse_hidden_waiting_on_an_external_transition() {
    let rt = Runtime::new().unwrap();
    let te = line(&rt, 16);
    let full = te.full_tensor().unwrap();
    let all = TileSet::new((0..16).map(|i| [i])).unwrap();
    let p = rt
        .with_hold(Fault::Read, |caught| {
            let p = te.promote_async(&all).unwrap();
            caught().unwrap();
            assert!(!p.is_done().unwrap());
            // An op and a projection needing covered tiles are refused, not queued.
            expect_code(full.sum(), ErrorCode::State);
            expect_code(te.project(&full, &sel(&[&[0]]), None), ErrorCode::State);
            // So is an overlapping residency request.
            expect_code(te.evict_async(&TileSet::new([[3]]).unwrap()), ErrorCode::State);
            expect_code(te.promote_async(&TileSet::new([[0]]).unwrap()), ErrorCode::State);
            p
        })
        .unwrap();
    p.wait().unwrap();
    assert_eq!(full.sum().unwrap().item().unwrap(), (16 * T) as f64);
}

#[test]
fn a_pending_prefetch_owns_its_tiles_and_holds_up_no_other_read() {
    let rt = Runtime::new().unwrap();
    let te = line(&rt, 8);
    let full = te.full_tensor().unwrap();
    let ahead = TileSet::new((0..4).map(|i| [i])).unwrap();
    let p = rt
        .with_hold(Fault::Read, |caught| {
            let p = te.prefetch_async(&ahead).unwrap();
            caught().unwrap();
            assert!(!p.is_done().unwrap());
            expect_code(te.promote_async(&TileSet::new([[2]]).unwrap()), ErrorCode::State);
            // A projection of another tile reads it while the prefetch is held.
            let c = te.project(&full, &sel(&[&[6]]), None).unwrap().wait().unwrap();
            assert_eq!(c.sum().unwrap().item().unwrap(), T as f64);
            assert!(!p.is_done().unwrap());
            p
        })
        .unwrap();
    p.wait().unwrap();
    assert_eq!(te.primary_tiles().unwrap(), TileSet::new([[0], [1], [2], [3], [6]]).unwrap());
}

#[test]
fn eviction_races_with_execution() {
    let rt = Runtime::new().unwrap();
    let te = line(&rt, 4);
    let full = te.full_tensor().unwrap();
    let s = sel(&[&[0, 1]]);
    let (h, e) = rt
        .with_hold(Fault::Read, |caught| {
            let h = te.project(&full, &s, None).unwrap();
            caught().unwrap();
            assert!(!h.is_done().unwrap());
            // Accepted (the projection owns no residency request): the
            // eviction waits for the projection before it evicts anything.
            let e = te.evict_async(&s).unwrap();
            assert!(!e.is_done().unwrap());
            (h, e)
        })
        .unwrap();
    let compact = h.wait().unwrap();
    e.wait().unwrap();
    assert_eq!(compact.sum().unwrap().item().unwrap(), (2 * T) as f64);
    assert_eq!(te.primary_tiles().unwrap(), TileSet::empty());
}

#[test]
fn release_refuses_while_work_is_pending() {
    let rt = Runtime::new().unwrap();
    let te = line(&rt, 4);
    let h = rt
        .with_hold(Fault::Read, |caught| {
            let h = te.project(&te.full_tensor().unwrap(), &sel(&[&[0, 1, 2]]), None).unwrap();
            caught().unwrap();
            assert!(!h.is_done().unwrap());
            let msg = expect_code(te.dispose(), ErrorCode::State);
            assert!(!msg.is_empty());
            assert!(!te.is_disposed().unwrap());
            h
        })
        .unwrap();
    assert_eq!(h.wait().unwrap().sum().unwrap().item().unwrap(), (3 * T) as f64);
    te.dispose().unwrap();
    assert!(te.is_disposed().unwrap());
}

#[derive(Default)]
struct CountWakes(AtomicUsize);
impl Wake for CountWakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn an_await_is_a_future_woken_by_its_completion_callback() {
    let rt = Runtime::new().unwrap();
    let te = line(&rt, 4);
    let full = te.full_tensor().unwrap();
    let h = rt
        .with_hold(Fault::Read, |caught| {
            let h = te.project(&full, &sel(&[&[2]]), None).unwrap();
            caught().unwrap();
            h
        })
        .unwrap();
    // Released when with_hold returned; the future is woken from the loop
    // thread's callback (or finds the work done at its first poll).
    let (compact, polls) = block_on(h);
    assert!(polls >= 1);
    assert_eq!(compact.unwrap().sum().unwrap().item().unwrap(), T as f64);

    // A future that must really wait: pending at its first poll (the read
    // is held), woken by the completion callback once released.
    rt.hold(Fault::Read, 1).unwrap();
    let mut pending = Box::pin(te.project(&full, &sel(&[&[3]]), None).unwrap());
    rt.wait_held(Some(Duration::from_secs(60))).unwrap();
    let wakes = Arc::new(CountWakes::default());
    let waker = Waker::from(wakes.clone());
    let mut cx = Context::from_waker(&waker);
    assert!(pending.as_mut().poll(&mut cx).is_pending());
    assert_eq!(wakes.0.load(Ordering::SeqCst), 0);
    rt.release_hold().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while wakes.0.load(Ordering::SeqCst) == 0 {
        assert!(std::time::Instant::now() < deadline, "the completion callback never woke the future");
        std::thread::yield_now();
    }
    match pending.as_mut().poll(&mut cx) {
        Poll::Ready(compact) => assert_eq!(compact.unwrap().to_vec::<f32>().unwrap(), vec![1.0; T as usize]),
        Poll::Pending => panic!("woken but still pending"),
    }
    assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
    // A residency await is a Future<Output = Result<()>>.
    let (done, _) = block_on(te.evict_async(&TileSet::new([[3]]).unwrap()).unwrap());
    done.unwrap();
}

#[test]
fn a_future_dropped_before_completion_leaves_the_callback_nothing_freed() {
    let rt = Runtime::new().unwrap();
    let te = line(&rt, 4);
    let full = te.full_tensor().unwrap();
    rt.hold(Fault::Read, 1).unwrap();
    let mut pending = Box::pin(te.project(&full, &sel(&[&[1]]), None).unwrap());
    rt.wait_held(Some(Duration::from_secs(60))).unwrap();
    // Poll once (installing the callback), then drop the future, then let
    // the work complete: the callback fires into state it owns.
    let mut cx = Context::from_waker(Waker::noop());
    assert!(matches!(pending.as_mut().poll(&mut cx), Poll::Pending));
    drop(pending);
    rt.release_hold().unwrap();
    // The work completed anyway (in-flight work retains what it touches).
    te.promote(&TileSet::new([[1]]).unwrap()).unwrap();
    assert_eq!(te.primary_tiles().unwrap(), TileSet::new([[1]]).unwrap());
    // And a shutdown with awaits still subscribed fires their callbacks
    // (CANCELLED) without touching dropped futures.
    rt.hold(Fault::Read, 1).unwrap();
    let mut pending = Box::pin(te.project(&full, &sel(&[&[2]]), None).unwrap());
    rt.wait_held(Some(Duration::from_secs(60))).unwrap();
    assert!(matches!(pending.as_mut().poll(&mut cx), Poll::Pending));
    drop(pending);
    rt.shutdown().unwrap();
}

#[test]
fn shutdown_cancels_pending_work_and_wakes_its_futures() {
    let rt = Runtime::new().unwrap();
    let te = line(&rt, 4);
    let full = te.full_tensor().unwrap();
    rt.hold(Fault::Read, 1).unwrap();
    let pending = te.project(&full, &sel(&[&[0]]), None).unwrap();
    rt.wait_held(Some(Duration::from_secs(60))).unwrap();
    let mut pending = Box::pin(pending);
    let mut cx = Context::from_waker(Waker::noop());
    assert!(pending.as_mut().poll(&mut cx).is_pending());
    rt.shutdown().unwrap();
    let (result, _) = block_on(pending);
    expect_code(result, ErrorCode::Cancelled);
    // The carrier is usable and unchanged; asynchronous calls now fail CANCELLED.
    assert_eq!(te.tile_state(&[0]).unwrap().location, TileLocation::Secondary);
    expect_code(te.project(&full, &sel(&[&[0]]), None), ErrorCode::Cancelled);
}
