//! The expert-indexed matmul (`TiledEvictable::expert_matmul`) against a
//! plain Rust reference: ungated and gated, shared and per-choice inputs,
//! an LRU-budgeted carrier over a file tier, autograd in x and the gates,
//! the await as a future and from several threads, a call held in flight
//! (with the `testing` feature), and its errors (each refused before any
//! work, no state changed). Weights and inputs are small
//! integers and the gates dyadic, so every f32 sum is exact.
mod common;
use common::*;
use strideweave::*;

const E: i64 = 6;
const N: i64 = 5;
const K: i64 = 7;
const T: i64 = 4;
const CHOICES: i64 = 2;
/// Token t's choices; token 3 picks expert 5 twice, experts 2 and 4 are unused.
const IDS: [[i64; 2]; 4] = [[0, 3], [3, 5], [1, 0], [5, 5]];

/// Expert e's weight at (input kk, output n): a small integer.
fn weight(e: i64, kk: i64, n: i64) -> f32 {
    ((e * 7 + n * 3 + kk * 5) % 9 - 4) as f32
}

/// The secondary tier's values: expert after expert, each its (K, N)
/// matrix first mode fastest (a row-major (E, N, K) weights file).
fn weights() -> Vec<f32> {
    let mut v = Vec::with_capacity((E * N * K) as usize);
    for e in 0..E {
        for n in 0..N {
            for kk in 0..K {
                v.push(weight(e, kk, n));
            }
        }
    }
    v
}

/// A tensor of `shape` whose value at each coordinate is `f(coord)`.
fn tensor_of<T: Element>(rt: &Runtime, shape: &[i64], f: impl Fn(&[i64]) -> T) -> Tensor {
    let n: i64 = shape.iter().product();
    let values: Vec<T> = (0..n).map(|o| f(&decode(o, shape))).collect();
    Tensor::from_slice(rt, shape, &values).unwrap()
}

/// Token t's input at kk (choice j's for a per-choice input).
fn input(t: i64, j: i64, kk: i64) -> f32 {
    ((t * 3 + j * 5 + kk * 2) % 7 - 3) as f32
}

fn gate(t: i64, j: i64) -> f32 {
    [0.5, 0.25, 1.5, -0.75][((t + 3 * j) % 4) as usize]
}

fn ids_tensor(rt: &Runtime, ids: &[[i64; 2]]) -> Tensor {
    tensor_of(rt, &[ids.len() as i64, CHOICES], |c| ids[c[0] as usize][c[1] as usize] as i32)
}

/// The reference: y[t, j, n] = sum over kk of x[t, (j,) kk] * W_{ids[t, j]}[kk, n],
/// as a function of (t, j, n).
fn reference(ids: &[[i64; 2]], per_choice: bool) -> impl Fn(i64, i64, i64) -> f32 + '_ {
    move |t, j, n| {
        let e = ids[t as usize][j as usize];
        (0..K).map(|kk| input(t, if per_choice { j } else { 0 }, kk) * weight(e, kk, n)).sum()
    }
}

/// The ungated result's values (T, k, N) first mode fastest.
fn expected_ungated(ids: &[[i64; 2]], per_choice: bool) -> Vec<f32> {
    let y = reference(ids, per_choice);
    let shape = [ids.len() as i64, CHOICES, N];
    (0..shape.iter().product::<i64>()).map(|o| decode(o, &shape)).map(|c| y(c[0], c[1], c[2])).collect()
}

/// The gated result's values (T, N): sum over j of gate(t, j) * y[t, j, n].
fn expected_gated(ids: &[[i64; 2]], per_choice: bool) -> Vec<f32> {
    let y = reference(ids, per_choice);
    let shape = [ids.len() as i64, N];
    (0..shape.iter().product::<i64>())
        .map(|o| decode(o, &shape))
        .map(|c| (0..CHOICES).map(|j| gate(c[0], j) * y(c[0], j, c[1])).sum())
        .collect()
}

fn shared_x(rt: &Runtime) -> Tensor {
    tensor_of(rt, &[T, K], |c| input(c[0], 0, c[1]))
}

fn gates(rt: &Runtime) -> Tensor {
    tensor_of(rt, &[T, CHOICES], |c| gate(c[0], c[1]))
}

fn experts(rt: &Runtime, policy: impl Into<Policy>) -> (TiledEvictable, Tensor) {
    let te = seeded(rt, &weights(), &[1, 1, E], &[K, N, 1], policy);
    let full = te.full_tensor().unwrap();
    (te, full)
}

fn coords(experts: &[i64]) -> Vec<Vec<i64>> {
    experts.iter().map(|&e| vec![0, 0, e]).collect()
}

#[test]
fn each_token_is_multiplied_by_its_experts() {
    let rt = Runtime::new().unwrap();
    let (te, full) = experts(&rt, Policy::None);
    let ids = ids_tensor(&rt, &IDS);
    let y = te.expert_matmul(&full, &shared_x(&rt), &ids, None, None).unwrap().wait().unwrap();
    assert_eq!(y.shape().unwrap(), vec![T, CHOICES, N]);
    assert_eq!(y.dtype().unwrap(), DType::F32);
    assert_eq!(y.carrier().unwrap().kind().unwrap(), CarrierKind::Cpu);
    assert_eq!(y.to_vec::<f32>().unwrap(), expected_ungated(&IDS, false));
    // The experts used are primary now (no policy: as a projection); the others never moved.
    assert_eq!(te.primary_tiles().unwrap().coordinates(), coords(&[0, 1, 3, 5]));
    assert_eq!(te.secondary_tiles().unwrap().coordinates(), coords(&[2, 4]));
    assert!(te.dirty_tiles().unwrap().is_empty());
    // Again with every used expert resident: the same values; i64 ids too.
    let ids64 = tensor_of(&rt, &[T, CHOICES], |c| IDS[c[0] as usize][c[1] as usize]);
    let again = te.expert_matmul(&full, &shared_x(&rt), &ids64, None, None).unwrap().wait().unwrap();
    assert_eq!(again.to_vec::<f32>().unwrap(), expected_ungated(&IDS, false));
}

#[test]
fn gates_weight_the_sum_of_a_tokens_experts() {
    let rt = Runtime::new().unwrap();
    let (te, full) = experts(&rt, Policy::None);
    let ids = ids_tensor(&rt, &IDS);
    let y = te.expert_matmul(&full, &shared_x(&rt), &ids, Some(&gates(&rt)), None).unwrap().wait().unwrap();
    assert_eq!(y.shape().unwrap(), vec![T, N]);
    assert_eq!(y.to_vec::<f32>().unwrap(), expected_gated(&IDS, false));
    // out_dtype f32 of f32 experts is the default.
    let y32 = te.expert_matmul(&full, &shared_x(&rt), &ids, Some(&gates(&rt)), Some(DType::F32)).unwrap();
    assert_eq!(y32.wait().unwrap().to_vec::<f32>().unwrap(), expected_gated(&IDS, false));
}

#[test]
fn one_input_row_per_choice() {
    let rt = Runtime::new().unwrap();
    let (te, full) = experts(&rt, Policy::None);
    let ids = ids_tensor(&rt, &IDS);
    let x = tensor_of(&rt, &[T, CHOICES, K], |c| input(c[0], c[1], c[2]));
    let y = te.expert_matmul(&full, &x, &ids, None, None).unwrap().wait().unwrap();
    assert_eq!(y.shape().unwrap(), vec![T, CHOICES, N]);
    assert_eq!(y.to_vec::<f32>().unwrap(), expected_ungated(&IDS, true));
    let g = te.expert_matmul(&full, &x, &ids, Some(&gates(&rt)), None).unwrap().wait().unwrap();
    assert_eq!(g.to_vec::<f32>().unwrap(), expected_gated(&IDS, true));
}

#[test]
fn bf16_experts_give_exact_f32_sums() {
    let rt = Runtime::new().unwrap();
    let w: Vec<BF16Bits> = weights().into_iter().map(BF16Bits::from_f32).collect();
    let sec = Carrier::host(&rt, DType::BF16, w.len()).unwrap();
    sec.write(0, &w).unwrap();
    let te =
        TiledEvictable::new(&Carrier::cpu(&rt, DType::BF16, 0).unwrap(), &sec, &[1, 1, E], &[K, N, 1], Policy::None)
            .unwrap();
    let full = te.full_tensor().unwrap();
    let x = tensor_of(&rt, &[T, K], |c| BF16Bits::from_f32(input(c[0], 0, c[1])));
    let ids = ids_tensor(&rt, &IDS);
    let y = te.expert_matmul(&full, &x, &ids, None, Some(DType::F32)).unwrap().wait().unwrap();
    assert_eq!(y.dtype().unwrap(), DType::F32);
    assert_eq!(y.to_vec::<f32>().unwrap(), expected_ungated(&IDS, false));
    // The gated sum in f32 too.
    let g = te.expert_matmul(&full, &x, &ids, Some(&gates(&rt)), Some(DType::F32)).unwrap().wait().unwrap();
    assert_eq!(g.to_vec::<f32>().unwrap(), expected_gated(&IDS, false));
}

#[test]
fn under_an_lru_budget_over_a_file_tier_every_step_is_exact() {
    let rt = Runtime::new().unwrap();
    let lru = LruPolicy::new(3).unwrap();
    let te = seeded_file(&rt, &weights(), &[1, 1, E], &[K, N, 1], &lru);
    assert_eq!(te.secondary().unwrap().kind().unwrap(), CarrierKind::File);
    let full = te.full_tensor().unwrap();
    let mut state = 12345u64;
    for step in 0..12 {
        let ids: Vec<[i64; 2]> = (0..2)
            .map(|_| {
                let mut next = || {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    ((state >> 33) % E as u64) as i64
                };
                [next(), next()]
            })
            .collect();
        let x = tensor_of(&rt, &[2, K], |c| input(c[0] + step, 0, c[1]));
        let y = te.expert_matmul(&full, &x, &ids_tensor(&rt, &ids), None, None).unwrap().wait().unwrap();
        let expect: Vec<f32> = (0..2 * CHOICES * N)
            .map(|o| decode(o, &[2, CHOICES, N]))
            .map(|c| {
                let e = ids[c[0] as usize][c[1] as usize];
                (0..K).map(|kk| input(c[0] + step, 0, kk) * weight(e, kk, c[2])).sum()
            })
            .collect();
        assert_eq!(y.to_vec::<f32>().unwrap(), expect, "step {step}");
        assert!(te.primary_tiles().unwrap().len() <= 3, "step {step}: the budget holds");
    }
    let stats = lru.stats().unwrap();
    assert_eq!(stats.requests, 12);
    assert!(stats.hits + stats.misses > 0);
    // Nothing was written: the file tier still holds every expert as seeded.
    assert!(te.dirty_tiles().unwrap().is_empty());
    assert_eq!(te.secondary().unwrap().to_vec::<f32>(0, (E * N * K) as usize).unwrap(), weights());
}

#[test]
fn gradients_reach_the_inputs_and_the_gates() {
    let rt = Runtime::new().unwrap();
    let (te, full) = experts(&rt, Policy::None);
    let ids = ids_tensor(&rt, &IDS);
    let x = shared_x(&rt).requires_grad_().unwrap();
    let g = gates(&rt).requires_grad_().unwrap();
    let y = te.expert_matmul(&full, &x, &ids, Some(&g), None).unwrap().wait().unwrap();
    y.sum().unwrap().backward(None, false).unwrap();
    // d sum / d x[t, kk] = sum over j, n of gate(t, j) * W_{ids[t, j]}[kk, n].
    let dx: Vec<f32> = (0..T * K)
        .map(|o| decode(o, &[T, K]))
        .map(|c| {
            let (t, kk) = (c[0], c[1]);
            (0..CHOICES)
                .map(|j| gate(t, j) * (0..N).map(|n| weight(IDS[t as usize][j as usize], kk, n)).sum::<f32>())
                .sum()
        })
        .collect();
    assert_eq!(x.grad().unwrap().unwrap().to_vec::<f32>().unwrap(), dx);
    // d sum / d gates[t, j] = sum over n of y[t, j, n].
    let yj = reference(&IDS, false);
    let dg: Vec<f32> =
        (0..T * CHOICES).map(|o| decode(o, &[T, CHOICES])).map(|c| (0..N).map(|n| yj(c[0], c[1], n)).sum()).collect();
    assert_eq!(g.grad().unwrap().unwrap().to_vec::<f32>().unwrap(), dg);
}

#[test]
fn the_await_is_a_future_and_calls_run_from_several_threads() {
    let rt = Runtime::new().unwrap();
    let (te, full) = experts(&rt, Policy::None);
    let (y, _) = block_on(te.expert_matmul(&full, &shared_x(&rt), &ids_tensor(&rt, &IDS), None, None).unwrap());
    assert_eq!(y.unwrap().to_vec::<f32>().unwrap(), expected_ungated(&IDS, false));
    te.evict(&te.primary_tiles().unwrap()).unwrap();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let ids = ids_tensor(&rt, &IDS);
                let pending = te.expert_matmul(&full, &shared_x(&rt), &ids, Some(&gates(&rt)), None).unwrap();
                // The await moves to another thread to be waited for.
                let y = std::thread::spawn(move || pending.wait()).join().unwrap().unwrap();
                assert_eq!(y.to_vec::<f32>().unwrap(), expected_gated(&IDS, false));
            });
        }
    });
}

#[test]
fn bad_arguments_are_refused_before_any_work() {
    let rt = Runtime::new().unwrap();
    let (te, full) = experts(&rt, Policy::None);
    let x = shared_x(&rt);
    let ids = ids_tensor(&rt, &IDS);
    let g = gates(&rt);
    // One expert resident, so that "no state changed" covers both tiers.
    te.promote(&TileSet::new([[0, 0, 1]]).unwrap()).unwrap();
    let before = states(&te);
    let refused = |r: Result<AwaitProjection>, code: ErrorCode, needle: &str| {
        let message = expect_code(r, code);
        assert!(message.contains(needle), "{code:?} message {message:?} lacks {needle:?}");
        assert_eq!(states(&te), before, "state changed by a refused call ({message})");
    };

    // INDEX: an id outside [0, E), naming token and slot.
    let mut bad = IDS;
    bad[1][1] = E;
    refused(
        te.expert_matmul(&full, &x, &ids_tensor(&rt, &bad), None, None),
        ErrorCode::Index,
        "expert id 6 at (token 1, slot 1) is outside [0, 6)",
    );
    refused(te.expert_matmul(&full, &x, &ids_tensor(&rt, &[[-1, 0]; 4]), None, None), ErrorCode::Index, "expert id -1");

    // TYPE: x of another dtype than the experts; ids not integer; gates not float; out_dtype.
    let x64 = tensor_of(&rt, &[T, K], |c| input(c[0], 0, c[1]) as f64);
    refused(te.expert_matmul(&full, &x64, &ids, None, None), ErrorCode::Type, "x is f64, the experts f32");
    let float_ids = Tensor::zeros(&rt, DType::F32, &[T, CHOICES]).unwrap();
    refused(te.expert_matmul(&full, &x, &float_ids, None, None), ErrorCode::Type, "ids must be i32 or i64, not f32");
    refused(te.expert_matmul(&full, &x, &ids, Some(&ids), None), ErrorCode::Type, "gates must be a float tensor");
    refused(te.expert_matmul(&full, &x, &ids, None, Some(DType::F16)), ErrorCode::Type, "not f16");
    // Experts that are not this TiledEvictable's tensor.
    let loose = Tensor::from_slice(&rt, &[K, N, E], &weights()).unwrap();
    refused(te.expert_matmul(&loose, &x, &ids, None, None), ErrorCode::Type, "not by this TiledEvictable");

    // VALUE: shapes of x, gates and ids; a view instead of the full tensor.
    let narrow = Tensor::zeros(&rt, DType::F32, &[T, K - 1]).unwrap();
    refused(te.expert_matmul(&full, &narrow, &ids, None, None), ErrorCode::Value, "x must be (tokens, K) = (4, 7)");
    let one_gate = Tensor::zeros(&rt, DType::F32, &[T, 1]).unwrap();
    refused(
        te.expert_matmul(&full, &x, &ids, Some(&one_gate), None),
        ErrorCode::Value,
        "gates must be (tokens, k) = (4, 2), not (4, 1)",
    );
    let flat_ids = Tensor::from_slice(&rt, &[2], &[0i32, 1]).unwrap();
    refused(te.expert_matmul(&full, &x, &flat_ids, None, None), ErrorCode::Value, "ids must be (tokens, k)");
    let transposed = Tensor::new(te.carrier(), 0, &Layout::new(&[K, N, E], &[N, 1, K * N]).unwrap()).unwrap();
    refused(te.expert_matmul(&transposed, &x, &ids, None, None), ErrorCode::Value, "not a view of it");

    // VALUE: a TiledEvictable of another geometry (experts interleaved, tile (1, N, K)).
    let other = seeded(&rt, &weights(), &[E, 1, 1], &[1, N, K], Policy::None);
    let other_before = states(&other);
    let message =
        expect_code(other.expert_matmul(&other.full_tensor().unwrap(), &x, &ids, None, None), ErrorCode::Value);
    assert!(
        message
            .contains("grid (1, 1, E) and tile (K, N, 1); this TiledEvictable has grid (6, 1, 1) and tile (1, 5, 7)"),
        "{message}"
    );
    assert_eq!(states(&other), other_before);

    // Nothing was lost: a good call afterwards gives the exact values.
    let y = te.expert_matmul(&full, &x, &ids, Some(&g), None).unwrap().wait().unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), expected_gated(&IDS, false));
}

#[test]
fn a_disposed_carrier_is_state() {
    let rt = Runtime::new().unwrap();
    let (te, full) = experts(&rt, Policy::None);
    te.dispose().unwrap();
    expect_code(te.expert_matmul(&full, &shared_x(&rt), &ids_tensor(&rt, &IDS), None, None), ErrorCode::State);
}

/// With the first expert read held in flight over a file tier: the call is
/// pending, disposal is STATE, an eviction of a used expert waits for it.
#[cfg(feature = "testing")]
#[test]
fn a_pending_call_follows_the_projection_rules() {
    use strideweave::testing::Fault;
    let rt = Runtime::new().unwrap();
    let te = seeded_file(&rt, &weights(), &[1, 1, E], &[K, N, 1], Policy::None);
    let full = te.full_tensor().unwrap();
    let ids = ids_tensor(&rt, &IDS);
    let (pending, eviction) = rt
        .with_hold(Fault::Read, |caught| {
            let pending = te.expert_matmul(&full, &shared_x(&rt), &ids, None, None).unwrap();
            caught().unwrap();
            assert!(!pending.is_done().unwrap());
            let message = expect_code(te.dispose(), ErrorCode::State);
            assert!(message.contains("not terminal"), "{message}");
            let eviction = te.evict_async(&TileSet::new([[0, 0, 0]]).unwrap()).unwrap();
            assert!(!eviction.is_done().unwrap());
            (pending, eviction)
        })
        .unwrap();
    let y = pending.wait().unwrap();
    eviction.wait().unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), expected_ungated(&IDS, false));
    assert_eq!(te.tile_state(&[0, 0, 0]).unwrap().location, TileLocation::Secondary);
}

/// An expert owned by an incomplete residency request is STATE, nothing changed.
#[cfg(feature = "testing")]
#[test]
fn an_expert_owned_by_a_residency_request_is_refused() {
    use strideweave::testing::Fault;
    let rt = Runtime::new().unwrap();
    let te = seeded_file(&rt, &weights(), &[1, 1, E], &[K, N, 1], Policy::None);
    let full = te.full_tensor().unwrap();
    let promotion = rt
        .with_hold(Fault::Read, |caught| {
            let promotion = te.promote_async(&TileSet::new([[0, 0, 3]]).unwrap()).unwrap();
            caught().unwrap();
            let before = states(&te);
            let message = expect_code(
                te.expert_matmul(&full, &shared_x(&rt), &ids_tensor(&rt, &IDS), None, None),
                ErrorCode::State,
            );
            assert!(message.contains("residency request"), "{message}");
            assert_eq!(states(&te), before);
            promotion
        })
        .unwrap();
    promotion.wait().unwrap();
    let y = te.expert_matmul(&full, &shared_x(&rt), &ids_tensor(&rt, &IDS), None, None).unwrap().wait().unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), expected_ungated(&IDS, false));
}
