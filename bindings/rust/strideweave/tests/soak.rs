//! A bounded concurrency soak: several threads project, scatter, update,
//! promote and evict one shared TiledEvictable under the LRU policy. Each
//! refusal (STATE: a conflicting request) is counted, never a failure; at
//! the end the values equal a sequential reference: the seed plus every
//! update that committed, which survive eviction.
use std::sync::atomic::{AtomicU64, Ordering};

use strideweave::*;

const TILES: i64 = 8;
const T: i64 = 256;
const THREADS: u64 = 4;
const OPS: u64 = 60;

#[test]
fn threads_share_one_tiled_evictable_under_the_lru_policy() {
    let rt = Runtime::new().unwrap();
    let seed: Vec<f32> = (0..TILES * T).map(|i| (i / T * 1000) as f32).collect();
    let lru = LruPolicy::new(3).unwrap();
    let sec = Carrier::file(&rt, DType::F32, seed.len(), &Default::default()).unwrap();
    sec.write(0, &seed).unwrap();
    let te = TiledEvictable::new(&Carrier::cpu(&rt, DType::F32, 0).unwrap(), &sec, &[TILES], &[T], &lru).unwrap();
    let full = te.full_tensor().unwrap();
    let updates: Vec<AtomicU64> = (0..TILES).map(|_| AtomicU64::new(0)).collect();
    let (refused, done) = (AtomicU64::new(0), AtomicU64::new(0));
    let one = Tensor::from_slice(&rt, &[T], &vec![1f32; T as usize]).unwrap();

    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let (te, full, one, seed, updates, refused, done) = (&te, &full, &one, &seed, &updates, &refused, &done);
            s.spawn(move || {
                let mut state = 0x9e3779b97f4a7c15u64 ^ (thread + 1);
                let mut next = || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state
                };
                let refusal = |r: Result<()>| match r {
                    Ok(()) => done.fetch_add(1, Ordering::Relaxed),
                    Err(e) if e.code() == ErrorCode::State => refused.fetch_add(1, Ordering::Relaxed),
                    Err(e) => panic!("thread {thread}: {e}"),
                };
                for _ in 0..OPS {
                    let tile = (next() % TILES as u64) as i64;
                    let sel = TileSelection::new([[tile]]).unwrap();
                    match next() % 5 {
                        0 => refusal(te.project(full, &sel, None).and_then(|p| p.wait()).map(|compact| {
                            // Consistent per tile: one committed value, the seed
                            // plus a whole number of updates.
                            let v = compact.to_vec::<f32>().unwrap();
                            let k = v[0] - seed[(tile * T) as usize];
                            assert!(k >= 0.0 && k.fract() == 0.0, "tile {tile} reads {}", v[0]);
                            assert!(v.iter().all(|&x| x == v[0]), "tile {tile} mixes values");
                        })),
                        1 => {
                            refusal(te.update_async(full, one, &sel, Reduction::Add).and_then(|u| u.wait()).map(|()| {
                                updates[tile as usize].fetch_add(1, Ordering::Relaxed);
                            }))
                        }
                        2 => refusal(te.scatter(one, full, &sel, Reduction::Replace).and_then(|h| h.wait()).map(|r| {
                            let rte = TiledEvictable::of(&r).unwrap();
                            let back = rte.project(&r, &sel, None).unwrap().wait().unwrap();
                            assert_eq!(back.to_vec::<f32>().unwrap(), vec![1.0; T as usize]);
                        })),
                        3 => refusal(te.promote_async(&sel).and_then(|a| a.wait())),
                        _ => refusal(te.evict_async(&sel).and_then(|a| a.wait())),
                    };
                }
            });
        }
    });

    assert_eq!(done.load(Ordering::Relaxed) + refused.load(Ordering::Relaxed), THREADS * OPS);
    eprintln!("soak: {} requests done, {} refused", done.load(Ordering::Relaxed), refused.load(Ordering::Relaxed));
    let reference: Vec<f32> =
        (0..TILES * T).map(|i| seed[i as usize] + updates[(i / T) as usize].load(Ordering::Relaxed) as f32).collect();
    assert_eq!(full.to_vec::<f32>().unwrap(), reference);
    // Every committed update survives eviction and reloading.
    te.evict(&te.primary_tiles().unwrap()).unwrap();
    assert_eq!(te.dirty_tiles().unwrap(), TileSet::empty());
    assert_eq!(full.to_vec::<f32>().unwrap(), reference);
}
