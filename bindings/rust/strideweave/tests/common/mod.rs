//! Helpers shared by the suites: seeded TiledEvictables, the logical values
//! of a tile-major seed, exact error kinds, and transfer holds.
#![allow(dead_code, clippy::type_complexity)]

use strideweave::{Carrier, DType, ErrorCode, Policy, Result, Runtime, TiledEvictable};

/// Asserts that `r` failed with exactly `code`; returns the message.
#[track_caller]
pub fn expect_code<T: std::fmt::Debug>(r: Result<T>, code: ErrorCode) -> String {
    match r {
        Ok(v) => panic!("expected a {code:?} error, got Ok({v:?})"),
        Err(e) => {
            assert_eq!(e.code(), code, "wrong error kind: {e}");
            e.message().to_owned()
        }
    }
}

/// A TiledEvictable whose secondary tier (`secondary`: a host carrier
/// unless given) is seeded with `values` (tiles one after another, each
/// first mode fastest) and whose primary is an empty CPU carrier.
pub fn seeded(rt: &Runtime, values: &[f32], grid: &[i64], tile: &[i64], policy: impl Into<Policy>) -> TiledEvictable {
    let sec = Carrier::host(rt, DType::F32, values.len()).unwrap();
    if !values.is_empty() {
        sec.write(0, values).unwrap();
    }
    let primary = Carrier::cpu(rt, DType::F32, 0).unwrap();
    TiledEvictable::new(&primary, &sec, grid, tile, policy).unwrap()
}

/// The same over a file secondary tier (whose transfers the testing holds catch).
pub fn seeded_file(
    rt: &Runtime,
    values: &[f32],
    grid: &[i64],
    tile: &[i64],
    policy: impl Into<Policy>,
) -> TiledEvictable {
    let sec = Carrier::file(rt, DType::F32, values.len(), &Default::default()).unwrap();
    sec.write(0, values).unwrap();
    let primary = Carrier::cpu(rt, DType::F32, 0).unwrap();
    TiledEvictable::new(&primary, &sec, grid, tile, policy).unwrap()
}

/// First-mode-fastest decode of `ordinal` in `shape`.
pub fn decode(mut ordinal: i64, shape: &[i64]) -> Vec<i64> {
    shape
        .iter()
        .map(|&n| {
            let c = ordinal % n;
            ordinal /= n;
            c
        })
        .collect()
}

/// First-mode-fastest encode of `coord` in `shape`.
pub fn encode(coord: &[i64], shape: &[i64]) -> i64 {
    let (mut k, mut s) = (0, 1);
    for (c, n) in coord.iter().zip(shape) {
        k += c * s;
        s *= n;
    }
    k
}

/// The logical values (first mode fastest) of a tiled carrier seeded with
/// `values` in the canonical geometry.
pub fn tiles_to_logical(values: &[f32], grid: &[i64], tile: &[i64]) -> Vec<f32> {
    let logical: Vec<i64> = grid.iter().zip(tile).map(|(g, t)| g * t).collect();
    let per: i64 = tile.iter().product();
    let n: i64 = logical.iter().product();
    (0..n)
        .map(|o| {
            let x = decode(o, &logical);
            let t: Vec<i64> = x.iter().zip(tile).map(|(x, t)| x / t).collect();
            let w: Vec<i64> = x.iter().zip(tile).map(|(x, t)| x % t).collect();
            values[(encode(&t, grid) * per + encode(&w, tile)) as usize]
        })
        .collect()
}

/// The compact values of a projection of `logical` (shape `grid*tile`) at
/// `per_axis`: blocks packed in selection order.
pub fn expected_projection(logical: &[f32], grid: &[i64], tile: &[i64], per_axis: &[Vec<i64>]) -> Vec<f32> {
    let full: Vec<i64> = grid.iter().zip(tile).map(|(g, t)| g * t).collect();
    let compact: Vec<i64> = per_axis.iter().zip(tile).map(|(a, t)| a.len() as i64 * t).collect();
    let n: i64 = compact.iter().product();
    (0..n)
        .map(|o| {
            let c = decode(o, &compact);
            let src: Vec<i64> = c
                .iter()
                .enumerate()
                .map(|(i, &ci)| per_axis[i][(ci / tile[i]) as usize] * tile[i] + ci % tile[i])
                .collect();
            logical[encode(&src, &full) as usize]
        })
        .collect()
}

/// 0, 1, 2, ... as f32.
pub fn arange(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

/// A snapshot of a TiledEvictable's residency and version.
pub fn states(te: &TiledEvictable) -> (Vec<Vec<i64>>, Vec<Vec<i64>>, Vec<Vec<i64>>, Vec<Vec<i64>>, u64) {
    (
        te.primary_tiles().unwrap().coordinates(),
        te.secondary_tiles().unwrap().coordinates(),
        te.valid_tiles().unwrap().coordinates(),
        te.dirty_tiles().unwrap().coordinates(),
        te.version().unwrap(),
    )
}

/// A minimal executor: polls `f` on this thread, parking between polls
/// until its waker is woken. Returns the output and how many times it
/// polled.
pub fn block_on<F: std::future::Future>(f: F) -> (F::Output, usize) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread, AtomicBool);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.1.store(true, Ordering::SeqCst);
            self.0.unpark();
        }
    }
    let unpark = Arc::new(Unpark(std::thread::current(), AtomicBool::new(false)));
    let waker = Waker::from(unpark.clone());
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    let mut polls = 0;
    loop {
        polls += 1;
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return (v, polls);
        }
        while !unpark.1.swap(false, Ordering::SeqCst) {
            std::thread::park_timeout(std::time::Duration::from_secs(60));
        }
    }
}
