//! The gated expert feed-forward (`TiledEvictable::expert_ffn`): relu
//! values against a plain Rust reference (small integer weights and inputs,
//! dyadic gates: every f32 value is exact) with the experts partly resident
//! over file and host tiers and under LRU budgets smaller than the experts
//! a call uses; every activation bit for bit against the unfused layer
//! through this crate (three expert matmuls, the unary op, mul, the gated
//! sum in f32 in choice order), f32 and bf16 (whose mul is `sw_binary`);
//! the await's kind and the result shapes; a panic of any of the three policies re-raised; and its
//! errors, each refused before any work with no state changed. The fused
//! gate_up form (`expert_ffn_fused`) gives the three-matrix values bit for
//! bit.
mod common;
use common::*;
use strideweave::*;

const E: i64 = 5;
const H: i64 = 4;
const F: i64 = 3;
const T: i64 = 4;
const CHOICES: i64 = 2;
/// Token t's choices; token 3 picks expert 4 twice, expert 2 is unused.
const IDS: [[i64; 2]; 4] = [[0, 3], [3, 4], [1, 0], [4, 4]];
const USED: [i64; 4] = [0, 1, 3, 4];

/// The three weights of an expert.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Which {
    Gate,
    Up,
    Down,
}
use Which::*;

/// (rows, columns) of an expert's matrix: (H, F) for gate and up, (F, H) for down.
fn dims(w: Which) -> (i64, i64) {
    match w {
        Down => (F, H),
        _ => (H, F),
    }
}

/// Expert e's weight at (row i, column o) of its gate, up or down matrix: a small integer.
fn weight(w: Which, e: i64, i: i64, o: i64) -> f32 {
    let s = match w {
        Gate => 0,
        Up => 1,
        Down => 2,
    };
    ((e * 7 + i * 3 + o * 5 + s * 4) % 7 - 3) as f32
}

/// A secondary tier's values: expert after expert, each its matrix first
/// mode fastest (a row-major (E, columns, rows) weights file).
fn weights(w: Which) -> Vec<f32> {
    let (rows, cols) = dims(w);
    let mut v = Vec::with_capacity((E * rows * cols) as usize);
    for e in 0..E {
        for o in 0..cols {
            for i in 0..rows {
                v.push(weight(w, e, i, o));
            }
        }
    }
    v
}

/// Token t's input at h (choice j's for a per-choice input).
fn input(t: i64, j: i64, h: i64) -> f32 {
    ((t * 3 + j * 5 + h * 2) % 7 - 3) as f32
}

fn gate_value(t: i64, j: i64) -> f32 {
    [0.5, 0.25, 1.5, -0.75][((t + 3 * j) % 4) as usize]
}

/// A tensor of `shape` whose value at each coordinate is `f(coord)`.
fn tensor_of<V: Element>(rt: &Runtime, shape: &[i64], f: impl Fn(&[i64]) -> V) -> Tensor {
    let n: i64 = shape.iter().product();
    let values: Vec<V> = (0..n).map(|o| f(&decode(o, shape))).collect();
    Tensor::from_slice(rt, shape, &values).unwrap()
}

fn ids_tensor(rt: &Runtime, ids: &[[i64; 2]]) -> Tensor {
    tensor_of(rt, &[ids.len() as i64, CHOICES], |c| ids[c[0] as usize][c[1] as usize] as i32)
}

fn shared_x(rt: &Runtime) -> Tensor {
    tensor_of(rt, &[T, H], |c| input(c[0], 0, c[1]))
}

fn per_choice_x(rt: &Runtime) -> Tensor {
    tensor_of(rt, &[T, CHOICES, H], |c| input(c[0], c[1], c[2]))
}

fn gates(rt: &Runtime) -> Tensor {
    tensor_of(rt, &[T, CHOICES], |c| gate_value(c[0], c[1]))
}

/// The relu reference: Y[t, j, :] of token t's j-th choice, its input row
/// `x(t, j, h)`.
fn reference_y(ids: &[[i64; 2]], x: impl Fn(i64, i64, i64) -> f32) -> impl Fn(i64, i64, i64) -> f32 {
    let ids = ids.to_vec();
    move |t, j, out| {
        let e = ids[t as usize][j as usize];
        (0..F)
            .map(|f| {
                let a: f32 = (0..H).map(|h| x(t, j, h) * weight(Gate, e, h, f)).sum();
                let b: f32 = (0..H).map(|h| x(t, j, h) * weight(Up, e, h, f)).sum();
                a.max(0.0) * b * weight(Down, e, f, out)
            })
            .sum()
    }
}

/// The ungated result's values (T, k, H) first mode fastest.
fn expected_ungated(ids: &[[i64; 2]], x: impl Fn(i64, i64, i64) -> f32) -> Vec<f32> {
    let y = reference_y(ids, x);
    let shape = [ids.len() as i64, CHOICES, H];
    (0..shape.iter().product::<i64>()).map(|o| decode(o, &shape)).map(|c| y(c[0], c[1], c[2])).collect()
}

/// The gated result's values (T, H): the sum over j of gate(t, j) * Y[t, j, h].
fn expected_gated(ids: &[[i64; 2]], x: impl Fn(i64, i64, i64) -> f32) -> Vec<f32> {
    let y = reference_y(ids, x);
    let shape = [ids.len() as i64, H];
    (0..shape.iter().product::<i64>())
        .map(|o| decode(o, &shape))
        .map(|c| (0..CHOICES).map(|j| gate_value(c[0], j) * y(c[0], j, c[1])).sum())
        .collect()
}

fn shared(t: i64, _: i64, h: i64) -> f32 {
    input(t, 0, h)
}

/// A TiledEvictable of one expert per tile seeded with `w`'s weights over a
/// file (`file`) or host secondary tier, with its full tensor.
fn experts(rt: &Runtime, w: Which, file: bool, policy: impl Into<Policy>) -> (TiledEvictable, Tensor) {
    let (rows, cols) = dims(w);
    let te = if file {
        seeded_file(rt, &weights(w), &[1, 1, E], &[rows, cols, 1], policy)
    } else {
        seeded(rt, &weights(w), &[1, 1, E], &[rows, cols, 1], policy)
    };
    let full = te.full_tensor().unwrap();
    (te, full)
}

/// A TiledEvictable's primary, secondary, valid and dirty tiles and its version.
type State = (Vec<Vec<i64>>, Vec<Vec<i64>>, Vec<Vec<i64>>, Vec<Vec<i64>>, u64);

/// The three TiledEvictables of one layer's experts.
struct Layer {
    gate: (TiledEvictable, Tensor),
    up: (TiledEvictable, Tensor),
    down: (TiledEvictable, Tensor),
}

impl Layer {
    /// Gate and down over file tiers, up over a host tier, no policy.
    fn new(rt: &Runtime) -> Layer {
        Layer {
            gate: experts(rt, Gate, true, Policy::None),
            up: experts(rt, Up, false, Policy::None),
            down: experts(rt, Down, true, Policy::None),
        }
    }

    fn all(&self) -> [&TiledEvictable; 3] {
        [&self.gate.0, &self.up.0, &self.down.0]
    }

    fn ffn(
        &self,
        x: &Tensor,
        ids: &Tensor,
        gates: Option<&Tensor>,
        options: &ExpertFfnOptions,
    ) -> Result<AwaitProjection> {
        TiledEvictable::expert_ffn(
            (&self.gate.0, &self.gate.1),
            (&self.up.0, &self.up.1),
            (&self.down.0, &self.down.1),
            x,
            ids,
            gates,
            options,
        )
    }

    /// The layer unfused, through this crate: Y (T, k, H) of the three
    /// expert matmuls, the activation and mul.
    fn unfused(&self, x: &Tensor, ids: &Tensor, activation: UnaryOp, out_dtype: Option<DType>) -> Tensor {
        let a = self.gate.0.expert_matmul(&self.gate.1, x, ids, None, None).unwrap().wait().unwrap();
        let b = self.up.0.expert_matmul(&self.up.1, x, ids, None, None).unwrap().wait().unwrap();
        let h = mul(&a.unary(activation).unwrap(), &b);
        self.down.0.expert_matmul(&self.down.1, &h, ids, None, out_dtype).unwrap().wait().unwrap()
    }

    /// Every tile of the three back in the secondary tier only.
    fn evict_all(&self) {
        for te in self.all() {
            te.evict(&te.primary_tiles().unwrap()).unwrap();
        }
    }

    /// `states` of the three: residency and version.
    fn states(&self) -> Vec<State> {
        self.all().into_iter().map(states).collect()
    }
}

/// a * b elementwise as the unfused layer multiplies: `Tensor::mul` for
/// f32 and f64; `sw_binary` MUL (computed in f32, rounded once) for the
/// 16-bit dtypes, which `Tensor::mul` (`sw_mul`) does not take.
fn mul(a: &Tensor, b: &Tensor) -> Tensor {
    if matches!(a.dtype().unwrap(), DType::F32 | DType::F64) {
        return a.mul(b).unwrap();
    }
    let mut out = std::ptr::null_mut();
    // SAFETY: two live tensors and an out-parameter; on success `out` is a
    // new reference that the returned Tensor takes over.
    let err = unsafe { sys::sw_binary(sys::sw_binary_op_t::SW_BINARY_MUL, a.as_raw(), b.as_raw(), &mut out) };
    if !err.is_null() {
        unsafe { sys::sw_error_free(err) };
        panic!("sw_binary MUL failed");
    }
    unsafe { Tensor::from_raw(out) }
}

fn coords(experts: &[i64]) -> Vec<Vec<i64>> {
    experts.iter().map(|&e| vec![0, 0, e]).collect()
}

fn relu() -> ExpertFfnOptions {
    ExpertFfnOptions { activation: UnaryOp::Relu, ..Default::default() }
}

/// The gated sum of `y` (T, k, H) f32: the sum over j of gates[t, j] * y[t, j, h], in f32, j in order.
fn gated_sum(y: &[f32], t_count: i64) -> Vec<f32> {
    let shape = [t_count, H];
    (0..t_count * H)
        .map(|o| decode(o, &shape))
        .map(|c| {
            let (t, h) = (c[0], c[1]);
            (0..CHOICES)
                .fold(0f32, |s, j| s + gate_value(t, j) * y[encode(&[t, j, h], &[t_count, CHOICES, H]) as usize])
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn relu_values_are_exact_with_the_experts_partly_resident() {
    let rt = Runtime::new().unwrap();
    let layer = Layer::new(&rt);
    assert_eq!(layer.gate.0.secondary().unwrap().kind().unwrap(), CarrierKind::File);
    assert_eq!(layer.up.0.secondary().unwrap().kind().unwrap(), CarrierKind::Host);
    // Some used experts resident in each, the others in the secondary tier only.
    layer.gate.0.promote(&TileSet::new([[0, 0, 0], [0, 0, 3]]).unwrap()).unwrap();
    layer.up.0.promote(&TileSet::new([[0, 0, 4]]).unwrap()).unwrap();
    layer.down.0.promote(&TileSet::new([[0, 0, 1], [0, 0, 2]]).unwrap()).unwrap();
    let ids = ids_tensor(&rt, &IDS);

    let y = layer.ffn(&shared_x(&rt), &ids, None, &relu()).unwrap().wait().unwrap();
    assert_eq!(y.shape().unwrap(), vec![T, CHOICES, H]);
    assert_eq!(y.dtype().unwrap(), DType::F32);
    assert_eq!(y.carrier().unwrap().kind().unwrap(), CarrierKind::Cpu);
    let expect = expected_ungated(&IDS, shared);
    assert!(expect.iter().any(|&v| v != 0.0) && expect.contains(&0.0), "relu cuts some and not all");
    assert_eq!(y.to_vec::<f32>().unwrap(), expect);
    // The used experts are primary now in all three (no policy: as a
    // projection); expert 2 moved only where it was promoted; nothing dirty.
    assert_eq!(layer.gate.0.primary_tiles().unwrap().coordinates(), coords(&USED));
    assert_eq!(layer.up.0.primary_tiles().unwrap().coordinates(), coords(&USED));
    assert_eq!(layer.down.0.primary_tiles().unwrap().coordinates(), coords(&[0, 1, 2, 3, 4]));
    for te in layer.all() {
        assert!(te.dirty_tiles().unwrap().is_empty());
    }

    // Gated, now with every used expert resident; i64 ids too.
    let g = layer.ffn(&shared_x(&rt), &ids, Some(&gates(&rt)), &relu()).unwrap().wait().unwrap();
    assert_eq!(g.shape().unwrap(), vec![T, H]);
    assert_eq!(g.to_vec::<f32>().unwrap(), expected_gated(&IDS, shared));
    let ids64 = tensor_of(&rt, &[T, CHOICES], |c| IDS[c[0] as usize][c[1] as usize]);
    let g64 = layer.ffn(&shared_x(&rt), &ids64, Some(&gates(&rt)), &relu()).unwrap().wait().unwrap();
    assert_eq!(g64.to_vec::<f32>().unwrap(), expected_gated(&IDS, shared));

    // One input row per choice, gated and not, from the secondary tiers again.
    layer.evict_all();
    let x = per_choice_x(&rt);
    let y = layer.ffn(&x, &ids, None, &relu()).unwrap().wait().unwrap();
    assert_eq!(y.shape().unwrap(), vec![T, CHOICES, H]);
    assert_eq!(y.to_vec::<f32>().unwrap(), expected_ungated(&IDS, input));
    layer.evict_all();
    let g = layer.ffn(&x, &ids, Some(&gates(&rt)), &relu()).unwrap().wait().unwrap();
    assert_eq!(g.shape().unwrap(), vec![T, H]);
    assert_eq!(g.to_vec::<f32>().unwrap(), expected_gated(&IDS, input));
    // Nothing was written: the tiers still hold the weights as seeded.
    for (te, w) in layer.all().into_iter().zip([Gate, Up, Down]) {
        assert!(te.dirty_tiles().unwrap().is_empty());
        assert_eq!(te.secondary().unwrap().to_vec::<f32>(0, (E * H * F) as usize).unwrap(), weights(w));
    }
}

#[test]
fn under_lru_budgets_smaller_than_the_experts_used_every_step_is_exact() {
    let rt = Runtime::new().unwrap();
    const BUDGET: usize = 2;
    let lrus = [LruPolicy::new(BUDGET).unwrap(), LruPolicy::new(BUDGET).unwrap(), LruPolicy::new(BUDGET).unwrap()];
    let layer = Layer {
        gate: experts(&rt, Gate, true, &lrus[0]),
        up: experts(&rt, Up, false, &lrus[1]),
        down: experts(&rt, Down, true, &lrus[2]),
    };
    let mut state = 2024u64;
    let mut over_budget = 0;
    const STEPS: u64 = 12;
    for step in 0..STEPS as i64 {
        let ids: Vec<[i64; 2]> = (0..3)
            .map(|_| {
                let mut next = || {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    ((state >> 33) % E as u64) as i64
                };
                [next(), next()]
            })
            .collect();
        let mut distinct: Vec<i64> = ids.iter().flatten().copied().collect();
        distinct.sort();
        distinct.dedup();
        if distinct.len() > BUDGET {
            over_budget += 1;
        }
        let x_of = move |t: i64, _: i64, h: i64| input(t + step, 0, h);
        let x = tensor_of(&rt, &[3, H], |c| x_of(c[0], 0, c[1]));
        let g = tensor_of(&rt, &[3, CHOICES], |c| gate_value(c[0], c[1]));
        let ids_t = ids_tensor(&rt, &ids);
        if step % 2 == 0 {
            let y = layer.ffn(&x, &ids_t, None, &relu()).unwrap().wait().unwrap();
            assert_eq!(y.to_vec::<f32>().unwrap(), expected_ungated(&ids, x_of), "step {step}");
        } else {
            let y = layer.ffn(&x, &ids_t, Some(&g), &relu()).unwrap().wait().unwrap();
            assert_eq!(y.to_vec::<f32>().unwrap(), expected_gated(&ids, x_of), "step {step}");
        }
        for te in layer.all() {
            assert!(te.primary_tiles().unwrap().len() <= BUDGET, "step {step}: the budget holds");
        }
    }
    assert!(over_budget > 0, "some call uses more experts than the budget");
    for lru in &lrus {
        let stats = lru.stats().unwrap();
        assert_eq!(stats.requests, STEPS, "each call consults each policy once");
        assert!(stats.misses > 0);
    }
    for (te, w) in layer.all().into_iter().zip([Gate, Up, Down]) {
        assert!(te.dirty_tiles().unwrap().is_empty());
        assert_eq!(te.secondary().unwrap().to_vec::<f32>(0, (E * H * F) as usize).unwrap(), weights(w));
    }
}

#[test]
fn every_activation_is_the_unfused_layer_bit_for_bit() {
    let rt = Runtime::new().unwrap();
    let layer = Layer::new(&rt);
    let ids = ids_tensor(&rt, &IDS);
    let g = gates(&rt);
    for activation in [UnaryOp::Silu, UnaryOp::Gelu, UnaryOp::Relu, UnaryOp::Sigmoid, UnaryOp::Tanh] {
        let options = ExpertFfnOptions { activation, ..Default::default() };
        for (x, form) in [(shared_x(&rt), "shared"), (per_choice_x(&rt), "per-choice")] {
            let unfused = layer.unfused(&x, &ids, activation, None).to_vec::<f32>().unwrap();
            let unfused_gated = gated_sum(&unfused, T);
            // From the secondary tiers (the reads' path) and all resident (inline).
            for cold in [true, false] {
                let what = format!("{activation:?}, {form} x, cold {cold}");
                if cold {
                    layer.evict_all();
                }
                let y = layer.ffn(&x, &ids, None, &options).unwrap().wait().unwrap();
                assert_eq!(y.shape().unwrap(), vec![T, CHOICES, H]);
                assert_eq!(bits(&y.to_vec::<f32>().unwrap()), bits(&unfused), "{what}");
                if cold {
                    layer.evict_all();
                }
                let s = layer.ffn(&x, &ids, Some(&g), &options).unwrap().wait().unwrap();
                assert_eq!(s.shape().unwrap(), vec![T, H]);
                assert_eq!(bits(&s.to_vec::<f32>().unwrap()), bits(&unfused_gated), "{what}, gated");
            }
        }
    }
    // The default is silu, and silu is not the identity here.
    assert_eq!(ExpertFfnOptions::default().activation, UnaryOp::Silu);
    let y = layer.ffn(&shared_x(&rt), &ids, None, &Default::default()).unwrap().wait().unwrap();
    let silu = layer.unfused(&shared_x(&rt), &ids, UnaryOp::Silu, None).to_vec::<f32>().unwrap();
    assert_eq!(bits(&y.to_vec::<f32>().unwrap()), bits(&silu));
    assert_ne!(silu, expected_ungated(&IDS, shared));
}

/// bf16 experts: a, b, act(a) and h rounded to bf16 as the unfused layer
/// rounds them; Y rounded to bf16 or, with `out_dtype` f32, kept.
#[test]
fn bf16_experts_round_where_the_unfused_layer_rounds() {
    let rt = Runtime::new().unwrap();
    let bf16_experts = |w: Which| {
        let v: Vec<BF16Bits> = weights(w).into_iter().map(BF16Bits::from_f32).collect();
        let sec = Carrier::host(&rt, DType::BF16, v.len()).unwrap();
        sec.write(0, &v).unwrap();
        let (rows, cols) = dims(w);
        let cpu = Carrier::cpu(&rt, DType::BF16, 0).unwrap();
        let te = TiledEvictable::new(&cpu, &sec, &[1, 1, E], &[rows, cols, 1], Policy::None).unwrap();
        let full = te.full_tensor().unwrap();
        (te, full)
    };
    let layer = Layer { gate: bf16_experts(Gate), up: bf16_experts(Up), down: bf16_experts(Down) };
    let x = tensor_of(&rt, &[T, H], |c| BF16Bits::from_f32(input(c[0], 0, c[1]) * 0.375));
    let ids = ids_tensor(&rt, &IDS);
    let g = gates(&rt);

    // out_dtype f32: Y and the gated sum unrounded.
    let f32_out = ExpertFfnOptions { out_dtype: Some(DType::F32), ..Default::default() };
    let unfused = layer.unfused(&x, &ids, UnaryOp::Silu, Some(DType::F32));
    assert_eq!(unfused.dtype().unwrap(), DType::F32);
    let unfused = unfused.to_vec::<f32>().unwrap();
    layer.evict_all();
    let y = layer.ffn(&x, &ids, None, &f32_out).unwrap().wait().unwrap();
    assert_eq!(y.dtype().unwrap(), DType::F32);
    assert_eq!(bits(&y.to_vec::<f32>().unwrap()), bits(&unfused));
    let s = layer.ffn(&x, &ids, Some(&g), &f32_out).unwrap().wait().unwrap();
    assert_eq!(s.dtype().unwrap(), DType::F32);
    assert_eq!(bits(&s.to_vec::<f32>().unwrap()), bits(&gated_sum(&unfused, T)));

    // The default: the experts' dtype, each Y[t, j] rounded, the gated sum of
    // the rounded values in f32 rounded once.
    let unfused = layer.unfused(&x, &ids, UnaryOp::Silu, None);
    assert_eq!(unfused.dtype().unwrap(), DType::BF16);
    let unfused = unfused.to_vec::<BF16Bits>().unwrap();
    layer.evict_all();
    let y = layer.ffn(&x, &ids, None, &Default::default()).unwrap().wait().unwrap();
    assert_eq!(y.dtype().unwrap(), DType::BF16);
    assert_eq!(y.to_vec::<BF16Bits>().unwrap(), unfused);
    let widened: Vec<f32> = unfused.iter().map(|v| v.to_f32()).collect();
    let s = layer.ffn(&x, &ids, Some(&g), &Default::default()).unwrap().wait().unwrap();
    assert_eq!(s.dtype().unwrap(), DType::BF16);
    let expect: Vec<BF16Bits> = gated_sum(&widened, T).into_iter().map(BF16Bits::from_f32).collect();
    assert_eq!(s.to_vec::<BF16Bits>().unwrap(), expect);
}

#[test]
fn the_await_is_a_projection_and_the_result_has_the_documented_shape() {
    let rt = Runtime::new().unwrap();
    let layer = Layer::new(&rt);
    let ids = ids_tensor(&rt, &IDS);
    // Experts to read: the call returns at once, pending or not.
    let pending = layer.ffn(&shared_x(&rt), &ids, None, &relu()).unwrap();
    assert_eq!(pending.kind().unwrap(), AwaitKind::Projection);
    let y = pending.wait().unwrap();
    assert_eq!(y.shape().unwrap(), vec![T, CHOICES, H]);
    // Every used expert resident in all three, nothing to move: computed on
    // this thread, the await already done on return, still a projection.
    let done = layer.ffn(&shared_x(&rt), &ids, Some(&gates(&rt)), &relu()).unwrap();
    assert!(done.is_done().unwrap());
    assert_eq!(done.kind().unwrap(), AwaitKind::Projection);
    assert_eq!(done.wait().unwrap().shape().unwrap(), vec![T, H]);
    // As a future, with another k and T: (T, k, H) and (T, H).
    let ids3 = tensor_of(&rt, &[1, 3], |c| [4i32, 2, 4][c[1] as usize]);
    let x1 = tensor_of(&rt, &[1, H], |c| input(0, 0, c[1]));
    let (y, _) = block_on(layer.ffn(&x1, &ids3, None, &relu()).unwrap());
    assert_eq!(y.unwrap().shape().unwrap(), vec![1, 3, H]);
    let g3 = Tensor::from_slice(&rt, &[1, 3], &[0.5f32, 0.25, 1.0]).unwrap();
    let (y, _) = block_on(layer.ffn(&x1, &ids3, Some(&g3), &relu()).unwrap());
    assert_eq!(y.unwrap().shape().unwrap(), vec![1, H]);
    // out_dtype f32 of f32 experts is the default.
    let f32_out = ExpertFfnOptions { activation: UnaryOp::Relu, out_dtype: Some(DType::F32) };
    let y = layer.ffn(&shared_x(&rt), &ids, None, &f32_out).unwrap().wait().unwrap();
    assert_eq!(y.dtype().unwrap(), DType::F32);
    assert_eq!(y.to_vec::<f32>().unwrap(), expected_ungated(&IDS, shared));
}

#[derive(Debug, PartialEq)]
struct Boom(&'static str);

/// A policy panic of any of the three TiledEvictables comes out of the
/// call or of its await, on the caller's thread.
#[test]
fn a_panic_in_any_of_the_three_policies_surfaces_in_the_caller() {
    use std::panic::{self, AssertUnwindSafe};
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
    for which in [Gate, Up, Down] {
        let rt = Runtime::new().unwrap();
        let te = |w: Which| {
            if w == which {
                experts(&rt, w, true, Policy::custom(PanicsInOutcome))
            } else {
                experts(&rt, w, true, Policy::None)
            }
        };
        let layer = Layer { gate: te(Gate), up: te(Up), down: te(Down) };
        let ids = ids_tensor(&rt, &IDS);
        let hook = panic::take_hook();
        panic::set_hook(Box::new(|_| {}));
        let payload = panic::catch_unwind(AssertUnwindSafe(|| {
            let pending = layer.ffn(&shared_x(&rt), &ids, None, &relu());
            let _ = pending.map(|p| p.wait());
        }))
        .expect_err("the policy's panic");
        panic::set_hook(hook);
        assert_eq!(payload.downcast_ref::<Boom>(), Some(&Boom("outcome")), "{which:?}");
    }
}

/// transformers' fused gate_up weights: expert after expert, its gate
/// matrix then its up matrix (tile (H, 2F, 1)).
fn gate_up_weights() -> Vec<f32> {
    let (g, u, n) = (weights(Gate), weights(Up), (H * F) as usize);
    (0..E as usize).flat_map(|e| g[e * n..(e + 1) * n].iter().chain(&u[e * n..(e + 1) * n]).copied()).collect()
}

#[test]
fn the_fused_gate_up_form_gives_the_three_matrix_values_bit_for_bit() {
    let rt = Runtime::new().unwrap();
    let layer = Layer::new(&rt);
    let gate_up = seeded_file(&rt, &gate_up_weights(), &[1, 1, E], &[H, 2 * F, 1], Policy::None);
    let gate_up_full = gate_up.full_tensor().unwrap();
    let (x, ids, g) = (shared_x(&rt), ids_tensor(&rt, &IDS), gates(&rt));
    let fused = |gated: Option<&Tensor>, options: &ExpertFfnOptions| {
        let (gu, d) = ((&gate_up, &gate_up_full), (&layer.down.0, &layer.down.1));
        TiledEvictable::expert_ffn_fused(gu, d, &x, &ids, gated, options)
            .unwrap()
            .wait()
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    };
    // Exact relu values, every expert read, then resident.
    assert_eq!(fused(None, &relu()), expected_ungated(&IDS, shared));
    assert_eq!(fused(Some(&g), &relu()), expected_gated(&IDS, shared));
    for options in [relu(), ExpertFfnOptions::default()] {
        for gated in [None, Some(&g)] {
            let want = layer.ffn(&x, &ids, gated, &options).unwrap().wait().unwrap().to_vec::<f32>().unwrap();
            assert_eq!(bits(&fused(gated, &options)), bits(&want));
        }
    }
    // VALUE: the gate's (H, F) = (4, 3) as a gate_up.
    let message = expect_code(
        TiledEvictable::expert_ffn_fused(
            (&layer.gate.0, &layer.gate.1),
            (&layer.down.0, &layer.down.1),
            &x,
            &ids,
            None,
            &Default::default(),
        ),
        ErrorCode::Value,
    );
    assert!(message.contains("an odd second extent"), "{message}");
}

#[test]
fn bad_arguments_are_refused_before_any_work_with_nothing_changed() {
    let rt = Runtime::new().unwrap();
    let layer = Layer::new(&rt);
    let x = shared_x(&rt);
    let ids = ids_tensor(&rt, &IDS);
    let g = gates(&rt);
    // Some experts resident, so that "nothing changed" covers both tiers.
    layer.gate.0.promote(&TileSet::new([[0, 0, 1]]).unwrap()).unwrap();
    layer.down.0.promote(&TileSet::new([[0, 0, 3], [0, 0, 4]]).unwrap()).unwrap();
    let before = layer.states();
    let refused = |r: Result<AwaitProjection>, code: ErrorCode, needle: &str| {
        let message = expect_code(r, code);
        assert!(message.contains(needle), "{code:?} message {message:?} lacks {needle:?}");
        assert_eq!(layer.states(), before, "state changed by a refused call ({message})");
    };

    // VALUE: an activation outside silu, gelu, relu, sigmoid and tanh.
    for activation in [UnaryOp::Exp, UnaryOp::Neg, UnaryOp::Abs] {
        refused(
            layer.ffn(&x, &ids, Some(&g), &ExpertFfnOptions { activation, ..Default::default() }),
            ErrorCode::Value,
            "the activation must be silu, gelu, relu, sigmoid or tanh",
        );
    }

    // VALUE: a down TiledEvictable whose tile is the gate's (H, F), not transposed.
    let untransposed = seeded(&rt, &weights(Down), &[1, 1, E], &[H, F, 1], Policy::None);
    let untransposed_full = untransposed.full_tensor().unwrap();
    let untransposed_before = states(&untransposed);
    refused(
        TiledEvictable::expert_ffn(
            (&layer.gate.0, &layer.gate.1),
            (&layer.up.0, &layer.up.1),
            (&untransposed, &untransposed_full),
            &x,
            &ids,
            None,
            &Default::default(),
        ),
        ErrorCode::Value,
        "the down experts must be grid (1, 1, 5) and tile (3, 4, 1)",
    );
    assert_eq!(states(&untransposed), untransposed_before);
    // VALUE: up of another geometry than gate (its down experts, say).
    refused(
        TiledEvictable::expert_ffn(
            (&layer.gate.0, &layer.gate.1),
            (&layer.down.0, &layer.down.1),
            (&layer.down.0, &layer.down.1),
            &x,
            &ids,
            None,
            &Default::default(),
        ),
        ErrorCode::Value,
        "the up experts must have the gate experts' geometry",
    );
    // VALUE: shapes of x and gates.
    let narrow = Tensor::zeros(&rt, DType::F32, &[T, H - 1]).unwrap();
    refused(layer.ffn(&narrow, &ids, None, &relu()), ErrorCode::Value, "x must be (tokens, H) = (4, 4)");
    let one_gate = Tensor::zeros(&rt, DType::F32, &[T, 1]).unwrap();
    refused(layer.ffn(&x, &ids, Some(&one_gate), &relu()), ErrorCode::Value, "gates must be (tokens, k) = (4, 2)");

    // INDEX: an id outside [0, E), naming token and slot.
    let mut bad = IDS;
    bad[1][1] = E;
    refused(
        layer.ffn(&x, &ids_tensor(&rt, &bad), Some(&g), &relu()),
        ErrorCode::Index,
        "expert id 5 at (token 1, slot 1) is outside [0, 5)",
    );
    refused(layer.ffn(&x, &ids_tensor(&rt, &[[-1, 0]; 4]), None, &relu()), ErrorCode::Index, "expert id -1");

    // TYPE: x of another dtype than the experts; out_dtype; ids not integer.
    let x64 = tensor_of(&rt, &[T, H], |c| input(c[0], 0, c[1]) as f64);
    refused(layer.ffn(&x64, &ids, None, &relu()), ErrorCode::Type, "x is f64, the experts f32");
    let f16_out = ExpertFfnOptions { out_dtype: Some(DType::F16), ..Default::default() };
    refused(layer.ffn(&x, &ids, None, &f16_out), ErrorCode::Type, "not f16");
    let float_ids = Tensor::zeros(&rt, DType::F32, &[T, CHOICES]).unwrap();
    refused(layer.ffn(&x, &float_ids, None, &relu()), ErrorCode::Type, "ids must be i32 or i64, not f32");

    // Nothing was lost: a good call afterwards gives the exact values.
    let y = layer.ffn(&x, &ids, Some(&g), &relu()).unwrap().wait().unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), expected_gated(&IDS, shared));
}

#[test]
fn a_disposed_carrier_is_state() {
    let rt = Runtime::new().unwrap();
    let layer = Layer::new(&rt);
    layer.up.0.dispose().unwrap();
    expect_code(layer.ffn(&shared_x(&rt), &ids_tensor(&rt, &IDS), None, &relu()), ErrorCode::State);
}
