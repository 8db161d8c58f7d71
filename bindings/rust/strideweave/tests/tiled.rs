//! The tiled-carrier-composition spec, scenario by scenario, through Rust:
//! geometry, residency and tile states, projection in router order and
//! multi-axis, footprint compatibility, scatter replace/add, direct ops on
//! partly resident tensors, autograd through projection, release.
mod common;
use common::*;
use strideweave::*;

const E: i64 = 4;
const O: i64 = 2;
const I: i64 = 3; // experts, outputs, inputs: one expert per tile

fn experts(rt: &Runtime, policy: impl Into<Policy>) -> (TiledEvictable, Vec<f32>) {
    let values = arange((E * O * I) as usize);
    let te = seeded(rt, &values, &[E, 1, 1], &[1, O, I], policy);
    (te, tiles_to_logical(&values, &[E, 1, 1], &[1, O, I]))
}

fn grid2d(rt: &Runtime, grid: &[i64], tile: &[i64]) -> (TiledEvictable, Vec<f32>) {
    let n = (grid.iter().product::<i64>() * tile.iter().product::<i64>()) as usize;
    let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
    let te = seeded(rt, &values, grid, tile, Policy::None);
    (te, tiles_to_logical(&values, grid, tile))
}

/// The logical block of experts `which` (each O*I values, first mode fastest
/// over (expert, out, in)) as the compact projection lays them out.
fn experts_of(logical: &[f32], which: &[i64]) -> Vec<f32> {
    expected_projection(logical, &[E, 1, 1], &[1, O, I], &[which.to_vec(), vec![0], vec![0]])
}

fn sel(axes: &[&[i64]]) -> TileSelection {
    TileSelection::new(axes.iter().copied()).unwrap()
}

fn set(coords: &[&[i64]]) -> TileSet {
    TileSet::new(coords.iter().copied()).unwrap()
}

// ---- one flat logical storage extent --------------------------------------------

#[test]
fn a_tiled_evictable_exposes_its_geometry() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = experts(&rt, Policy::None);
    assert_eq!(te.grid_shape().unwrap(), vec![E, 1, 1]);
    assert_eq!(te.tile_shape().unwrap(), vec![1, O, I]);
    assert_eq!(te.logical_shape().unwrap(), vec![E, O, I]);
    assert_eq!((te.size().unwrap(), te.dtype().unwrap()), ((E * O * I) as usize, DType::F32));
    assert_eq!(te.kind().unwrap(), CarrierKind::Tiled);
    assert!(!te.has_policy().unwrap());
    assert_eq!(te.primary().unwrap().kind().unwrap(), CarrierKind::Cpu);
    assert_eq!(te.secondary().unwrap().kind().unwrap(), CarrierKind::Host);
    assert!(te.primary().unwrap().is_owned().unwrap() && te.secondary().unwrap().is_owned().unwrap());
    let full = te.full_tensor().unwrap();
    assert!(full.carrier().unwrap().ptr_eq(te.carrier()));
    assert_eq!(full.shape().unwrap(), vec![E, O, I]);
    assert_eq!(full.layout().unwrap(), Layout::dense(&[E, O, I]).unwrap());
    assert_eq!(full.to_vec::<f32>().unwrap(), logical);
}

#[test]
fn promote_one_expert_tile() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap();
    let (layout, version) = (full.layout().unwrap(), full.version().unwrap());
    te.promote(&sel(&[&[2], &[0], &[0]])).unwrap();
    assert_eq!(te.primary_tiles().unwrap(), set(&[&[2, 0, 0]]));
    let state = te.tile_state(&[2, 0, 0]).unwrap();
    assert_eq!(state, TileState { location: TileLocation::Primary, valid: true, dirty: false });
    assert_eq!(te.tile_state(&[1, 0, 0]).unwrap().location, TileLocation::Secondary);
    assert_eq!(full.shape().unwrap(), vec![E, O, I]);
    assert_eq!(full.layout().unwrap(), layout);
    assert_eq!(full.version().unwrap(), version);
    assert!(full.carrier().unwrap().ptr_eq(te.carrier()));
    assert_eq!(full.to_vec::<f32>().unwrap(), logical);
}

#[test]
fn construction_errors_name_their_kind_and_claim_nothing() {
    let rt = Runtime::new().unwrap();
    let cpu0 = || Carrier::cpu(&rt, DType::F32, 0).unwrap();
    let host = |n| Carrier::host(&rt, DType::F32, n).unwrap();
    // The primary must compute; dtypes must agree.
    expect_code(TiledEvictable::new(&host(0), &host(4), &[2], &[2], Policy::None), ErrorCode::Type);
    let f64_host = Carrier::host(&rt, DType::F64, 4).unwrap();
    expect_code(TiledEvictable::new(&cpu0(), &f64_host, &[2], &[2], Policy::None), ErrorCode::Type);
    // A tier neither empty nor full; ranks that differ; an extent < 1.
    let three = host(3);
    expect_code(TiledEvictable::new(&cpu0(), &three, &[2], &[2], Policy::None), ErrorCode::Value);
    assert!(!three.is_owned().unwrap());
    expect_code(TiledEvictable::new(&cpu0(), &host(0), &[2, 2], &[2], Policy::None), ErrorCode::Value);
    expect_code(TiledEvictable::new(&cpu0(), &host(0), &[0], &[2], Policy::None), ErrorCode::Value);
    let released = host(4);
    released.dispose().unwrap();
    expect_code(TiledEvictable::new(&cpu0(), &released, &[2], &[2], Policy::None), ErrorCode::State);
    // A failed creation with a Rust policy hands the policy back (dropped, not leaked).
    let dropped = std::sync::Arc::new(());
    let witness = dropped.clone();
    let policy = move |r: &TileSet, _: Purpose| {
        let _ = &witness;
        ResidencyPlan::promote_only(r)
    };
    expect_code(TiledEvictable::new(&cpu0(), &three, &[2], &[2], Policy::custom(policy)), ErrorCode::Value);
    assert_eq!(std::sync::Arc::strong_count(&dropped), 1);
}

#[test]
fn seeds_decide_the_initial_residency() {
    let rt = Runtime::new().unwrap();
    let both = TiledEvictable::new(
        &Carrier::cpu(&rt, DType::F32, 4).unwrap(),
        &Carrier::host(&rt, DType::F32, 4).unwrap(),
        &[2],
        &[2],
        Policy::None,
    )
    .unwrap();
    assert_eq!(both.dirty_tiles().unwrap(), set(&[&[0], &[1]]));
    assert_eq!(both.primary_tiles().unwrap(), set(&[&[0], &[1]]));
    let empty = TiledEvictable::new(
        &Carrier::cpu(&rt, DType::F32, 0).unwrap(),
        &Carrier::host(&rt, DType::F32, 0).unwrap(),
        &[2],
        &[2],
        Policy::None,
    )
    .unwrap();
    assert_eq!(empty.valid_tiles().unwrap(), TileSet::empty());
    assert_eq!(
        empty.tile_state(&[0]).unwrap(),
        TileState { location: TileLocation::Invalid, valid: false, dirty: false }
    );
    // An invalid tile is not readable.
    expect_code(empty.project(&empty.full_tensor().unwrap(), &sel(&[&[0]]), None), ErrorCode::State);
}

#[test]
fn a_claimed_seed_stays_a_carrier() {
    let rt = Runtime::new().unwrap();
    let seed = Carrier::cpu_from(&rt, &arange(8)).unwrap();
    let te = TiledEvictable::new(&seed, &Carrier::host(&rt, DType::F32, 0).unwrap(), &[2], &[4], Policy::None).unwrap();
    assert_eq!(seed.size().unwrap(), 8);
    assert!(seed.is_owned().unwrap() && !seed.is_disposed().unwrap());
    let msg = expect_code(seed.to_vec::<f32>(0, 1), ErrorCode::State);
    assert!(msg.contains("owned by a TiledEvictable"), "{msg}");
    expect_code(seed.write(0, &[1f32]), ErrorCode::State);
    assert_eq!(te.full_tensor().unwrap().to_vec::<f32>().unwrap(), arange(8));
}

// ---- footprint compatibility ----------------------------------------------------

/// Transposes within each 2x2 tile of a (4, 4) tensor over 2x2 tiles.
fn permuted_layout() -> Layout {
    Layout::parse("((2,2),(2,2)):((4,2),(1,8))").unwrap()
}

#[test]
fn accept_a_within_tile_permutation() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = grid2d(&rt, &[2, 2], &[2, 2]);
    let layout = permuted_layout();
    let t = Tensor::new(&te, 0, &layout).unwrap();
    // Slot s holds the canonical logical value at decode(s).
    let expected: Vec<f32> = (0..16).map(|o| logical[layout.index(&decode(o, &[4, 4])).unwrap() as usize]).collect();
    assert_eq!(t.to_vec::<f32>().unwrap(), expected);
    let s = sel(&[&[1, 0], &[1]]);
    let got = te.project(&t, &s, None).unwrap().wait().unwrap();
    assert_eq!(got.to_vec::<f32>().unwrap(), expected_projection(&expected, &[2, 2], &[2, 2], &s.per_axis()));
    assert_eq!(t.sum().unwrap().item().unwrap(), expected.iter().map(|&v| v as f64).sum::<f64>());
    let doubled: Vec<f32> = expected.iter().map(|v| 2.0 * v).collect();
    assert_eq!(t.add(&t).unwrap().to_vec::<f32>().unwrap(), doubled);
    t.set_requires_grad(true).unwrap();
    let w: Vec<f32> = arange(8);
    let wt = Tensor::from_slice(&rt, &[4, 2], &w).unwrap();
    te.project(&t, &s, None).unwrap().wait().unwrap().mul(&wt).unwrap().sum().unwrap().backward(None, false).unwrap();
    let grad = t.grad().unwrap().unwrap();
    assert_eq!(grad.layout().unwrap(), layout);
    let g = TiledEvictable::of(&grad).unwrap();
    assert!(!g.carrier().ptr_eq(te.carrier()));
    // Compact tile 0 is source tile (1, 1), compact tile 1 is (0, 1).
    let mut want = vec![0f32; 16];
    for o in 0..8 {
        let c = decode(o, &[4, 2]);
        let src = [s.per_axis()[0][(c[0] / 2) as usize] * 2 + c[0] % 2, 2 + c[1]];
        want[encode(&src, &[4, 4]) as usize] = w[o as usize];
    }
    assert_eq!(grad.to_vec::<f32>().unwrap(), want);
}

#[test]
fn reject_incompatible_tensors_before_any_change() {
    let rt = Runtime::new().unwrap();
    let (te, _) = grid2d(&rt, &[2, 2], &[2, 2]);
    let s = sel(&[&[0], &[1]]);
    let compact = Tensor::zeros(&rt, DType::F32, &[2, 2]).unwrap();
    for layout in [
        Layout::new(&[4, 4], &[4, 1]).unwrap(), // transposed: other tiles' footprints
        Layout::parse("((2,2),(2,2)):((1,1),(4,8))").unwrap(), // repeats and omits slots
    ] {
        let t = Tensor::new(&te, 0, &layout).unwrap();
        let before = states(&te);
        expect_code(te.project(&t, &s, None), ErrorCode::Value);
        expect_code(t.sum(), ErrorCode::Value);
        expect_code(te.scatter(&compact, &t, &s, Reduction::Replace), ErrorCode::Value);
        assert_eq!(states(&te), before);
    }
    // The control: the dense layout is compatible.
    let t = Tensor::new(&te, 0, &Layout::new(&[4, 4], &[1, 4]).unwrap()).unwrap();
    te.project(&t, &s, None).unwrap().wait().unwrap();
}

#[test]
fn reject_one_logical_tile_spanning_physical_tiles_and_remapping() {
    let rt = Runtime::new().unwrap();
    let (te, _) = grid2d(&rt, &[2, 4], &[2, 1]);
    let t = Tensor::new(&te, 0, &Layout::new(&[4, 4], &[4, 1]).unwrap()).unwrap();
    let before = states(&te);
    expect_code(te.project(&t, &sel(&[&[0], &[0]]), None), ErrorCode::Value);
    assert_eq!(states(&te), before);
    // Logical tile (0, 1) of the transposed view reaches exactly carrier tile (1, 0).
    let (te, _) = grid2d(&rt, &[2, 2], &[2, 2]);
    let t = Tensor::new(&te, 0, &Layout::new(&[4, 4], &[4, 1]).unwrap()).unwrap();
    expect_code(te.project(&t, &sel(&[&[0], &[1]]), None), ErrorCode::Value);
}

// ---- project ---------------------------------------------------------------------

#[test]
fn project_returns_the_same_compact_tensor_in_selection_order() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap();
    let h = te.project(&full, &sel(&[&[2, 0, 3], &[0], &[0]]), None).unwrap();
    assert_eq!(h.kind().unwrap(), AwaitKind::Projection);
    let compact = h.wait().unwrap();
    assert!(compact.ptr_eq(&h.wait().unwrap()));
    assert!(compact.ptr_eq(&h.wait_timeout(std::time::Duration::from_secs(1)).unwrap()));
    assert_eq!(compact.shape().unwrap(), vec![3, O, I]);
    assert_eq!(compact.layout().unwrap(), Layout::dense(&[3, O, I]).unwrap());
    assert_eq!(compact.carrier().unwrap().kind().unwrap(), CarrierKind::Cpu);
    assert_eq!(compact.to_vec::<f32>().unwrap(), experts_of(&logical, &[2, 0, 3]));
}

#[test]
fn keep_the_full_tensor_unchanged() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap();
    let (version, layout) = (full.version().unwrap(), full.layout().unwrap());
    te.project(&full, &sel(&[&[1, 2, 3], &[0], &[0]]), None).unwrap().wait().unwrap();
    assert!(full.carrier().unwrap().ptr_eq(te.carrier()));
    assert_eq!((full.version().unwrap(), full.layout().unwrap()), (version, layout));
    assert_eq!(full.to_vec::<f32>().unwrap(), logical);
}

#[test]
fn select_three_experts_in_router_order() {
    let rt = Runtime::new().unwrap();
    let values = arange(20 * 2);
    let te = seeded(&rt, &values, &[20], &[2], Policy::None);
    let got = te.project(&te.full_tensor().unwrap(), &sel(&[&[7, 2, 19]]), None).unwrap().wait().unwrap();
    assert_eq!(got.to_vec::<f32>().unwrap(), [&values[14..16], &values[4..6], &values[38..40]].concat());
}

#[test]
fn gather_a_multi_axis_selection_first_mode_fastest() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = grid2d(&rt, &[8, 10], &[1, 2]);
    let s = sel(&[&[7, 2], &[4, 9]]);
    assert_eq!(s.coordinates(), vec![vec![7, 4], vec![2, 4], vec![7, 9], vec![2, 9]]);
    assert_eq!(s.compact_grid_shape(), vec![2, 2]);
    assert_eq!(s.len(), 4);
    let got = te.project(&te.full_tensor().unwrap(), &s, None).unwrap().wait().unwrap().to_vec::<f32>().unwrap();
    assert_eq!(got, expected_projection(&logical, &[8, 10], &[1, 2], &s.per_axis()));
    // Every recombined corner is included.
    assert_eq!(sel(&[&[0, 1], &[0, 1]]).tile_set().unwrap(), set(&[&[0, 0], &[1, 0], &[0, 1], &[1, 1]]));
}

#[test]
fn project_argument_errors_change_nothing() {
    let rt = Runtime::new().unwrap();
    let (te, _) = experts(&rt, Policy::None);
    let (other, _) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap();
    let s = sel(&[&[1], &[0], &[0]]);
    let before = states(&te);
    expect_code(te.project(&other.full_tensor().unwrap(), &s, None), ErrorCode::Type);
    expect_code(te.project(&full, &sel(&[&[1], &[0]]), None), ErrorCode::Value);
    expect_code(te.project(&full, &sel(&[&[E], &[0], &[0]]), None), ErrorCode::Value);
    expect_code(te.project(&full, &s, Some(&other)), ErrorCode::Type);
    expect_code(te.project(&full, &s, Some(&Carrier::host(&rt, DType::F32, 0).unwrap())), ErrorCode::Type);
    expect_code(te.project(&full, &s, Some(&Carrier::cpu(&rt, DType::F64, 0).unwrap())), ErrorCode::Type);
    expect_code(te.project(&full, &s, Some(&Carrier::cpu(&rt, DType::F32, 3).unwrap())), ErrorCode::Value);
    let released = Carrier::cpu(&rt, DType::F32, (O * I) as usize).unwrap();
    released.dispose().unwrap();
    expect_code(te.project(&full, &s, Some(&released)), ErrorCode::State);
    assert_eq!(states(&te), before);
    // The selection's own errors.
    expect_code(TileSelection::new(Vec::<Vec<i64>>::new()), ErrorCode::Value);
    expect_code(TileSelection::new([&[][..]]), ErrorCode::Value);
    expect_code(TileSelection::new([&[1, 1][..]]), ErrorCode::Value);
    expect_code(TileSelection::new([&[-1][..]]), ErrorCode::Value);
}

#[cfg(feature = "testing")]
#[test]
fn project_refuses_a_claimed_destination() {
    let rt = Runtime::new().unwrap();
    let (te, _) = experts(&rt, Policy::None);
    let claimed = Carrier::cpu(&rt, DType::F32, (O * I) as usize).unwrap();
    claimed.testing_claim().unwrap();
    expect_code(te.project(&te.full_tensor().unwrap(), &sel(&[&[1], &[0], &[0]]), Some(&claimed)), ErrorCode::State);
    claimed.testing_unclaim().unwrap();
}

#[test]
fn project_into_a_supplied_destination() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap();
    for size in [0, (2 * O * I + 5) as usize] {
        let dest = Carrier::cpu(&rt, DType::F32, size).unwrap();
        let compact = te.project(&full, &sel(&[&[3, 1], &[0], &[0]]), Some(&dest)).unwrap().wait().unwrap();
        assert!(compact.carrier().unwrap().ptr_eq(&dest));
        assert_eq!(compact.to_vec::<f32>().unwrap(), experts_of(&logical, &[3, 1]));
    }
}

// ---- autograd through projection ---------------------------------------------------

#[test]
fn backpropagate_through_project_then_operation() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap();
    full.set_requires_grad(true).unwrap();
    let compact = te.project(&full, &sel(&[&[2, 0], &[0], &[0]]), None).unwrap().wait().unwrap();
    assert!(!compact.is_leaf().unwrap());
    let weights: Vec<f32> = (0..2 * O * I).map(|i| (i as f32 - 5.0) * 0.25).collect();
    let w = Tensor::from_slice(&rt, &[2, O, I], &weights).unwrap();
    compact.relu().unwrap().mul(&w).unwrap().sum().unwrap().backward(None, false).unwrap();
    let grad = full.grad().unwrap().unwrap();
    let g = TiledEvictable::of(&grad).unwrap();
    assert!(!g.carrier().ptr_eq(te.carrier()));
    assert_eq!(g.grid_shape().unwrap(), te.grid_shape().unwrap());
    assert_eq!(g.tile_shape().unwrap(), te.tile_shape().unwrap());
    assert_eq!(grad.layout().unwrap(), full.layout().unwrap());
    assert_eq!(
        g.tile_state(&[1, 0, 0]).unwrap(),
        TileState { location: TileLocation::Implicit, valid: true, dirty: false }
    );
    let chosen = experts_of(&logical, &[2, 0]);
    let mut want = vec![0f32; (E * O * I) as usize];
    for (k, &e) in [2i64, 0].iter().enumerate() {
        for o in 0..O {
            for i in 0..I {
                let c = (k as i64 + 2 * o + 2 * O * i) as usize; // compact (k, o, i)
                let relu_grad = if chosen[c] > 0.0 { weights[c] } else { 0.0 };
                want[(e + E * o + E * O * i) as usize] = relu_grad;
            }
        }
    }
    assert_eq!(grad.to_vec::<f32>().unwrap(), want);
}

#[test]
fn accumulate_overlapping_projections() {
    let rt = Runtime::new().unwrap();
    let (te, _) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap().requires_grad_().unwrap();
    let a = te.project(&full, &sel(&[&[0, 1], &[0], &[0]]), None).unwrap().wait().unwrap();
    let b = te.project(&full, &sel(&[&[1, 2], &[0], &[0]]), None).unwrap().wait().unwrap();
    // sum(2a + sum(3b)): the inner sum broadcasts over a's elements.
    let inner = b.mul_scalar(3.0).unwrap().sum().unwrap();
    a.mul_scalar(2.0).unwrap().add(&inner).unwrap().sum().unwrap().backward(None, false).unwrap();
    let grad = full.grad().unwrap().unwrap();
    let g = grad.to_vec::<f32>().unwrap();
    let per_expert = |e: i64| -> Vec<f32> { (0..O * I).map(|k| g[(e + E * k) as usize]).collect() };
    let n = (2 * O * I) as f32; // elements of a: each sees every b element
    assert_eq!(per_expert(0), vec![2.0; (O * I) as usize]);
    assert_eq!(per_expert(1), vec![2.0 + 3.0 * n; (O * I) as usize]);
    assert_eq!(per_expert(2), vec![3.0 * n; (O * I) as usize]);
    assert_eq!(per_expert(3), vec![0.0; (O * I) as usize]);
    assert_eq!(TiledEvictable::of(&grad).unwrap().tile_state(&[3, 0, 0]).unwrap().location, TileLocation::Implicit);
}

#[test]
fn direct_ops_with_autograd_on_the_full_tensor() {
    let rt = Runtime::new().unwrap();
    let (te, _) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap().requires_grad_().unwrap();
    full.mul_scalar(2.0).unwrap().sum().unwrap().backward(None, false).unwrap();
    assert_eq!(full.grad().unwrap().unwrap().to_vec::<f32>().unwrap(), vec![2.0; (E * O * I) as usize]);
}

// ---- residency -----------------------------------------------------------------------

#[test]
fn cache_unrelated_tiles() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = grid2d(&rt, &[2, 2], &[2, 2]);
    let cache = set(&[&[0, 0], &[0, 1], &[1, 0]]);
    te.promote(&cache).unwrap();
    assert_eq!(te.primary_tiles().unwrap(), cache);
    assert_eq!(te.secondary_tiles().unwrap(), set(&[&[1, 1]]));
    assert_eq!(te.full_tensor().unwrap().to_vec::<f32>().unwrap(), logical);
}

#[test]
fn residency_transitions_async_and_blocking() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = experts(&rt, Policy::None);
    let s = sel(&[&[1, 3], &[0], &[0]]);
    let h = te.promote_async(&s).unwrap();
    assert_eq!(h.kind().unwrap(), AwaitKind::Residency);
    h.wait().unwrap();
    h.wait().unwrap();
    assert_eq!(te.primary_tiles().unwrap(), s.tile_set().unwrap());
    te.promote(&s).unwrap(); // idempotent
    assert_eq!(te.primary_tiles().unwrap(), s.tile_set().unwrap());
    te.evict(&s.tile_set().unwrap()).unwrap();
    assert_eq!(te.primary_tiles().unwrap(), TileSet::empty());
    te.evict(&s).unwrap();
    te.evict_async(&s).unwrap().wait().unwrap();
    assert_eq!(te.full_tensor().unwrap().to_vec::<f32>().unwrap(), logical);
}

#[test]
fn residency_argument_errors_change_nothing() {
    let rt = Runtime::new().unwrap();
    let (te, _) = experts(&rt, Policy::None);
    let before = states(&te);
    for (bad, code) in [(set(&[&[1, 0]]), ErrorCode::Value), (set(&[&[E, 0, 0]]), ErrorCode::Value)] {
        expect_code(te.promote_async(&bad), code);
        expect_code(te.evict_async(&bad), code);
        expect_code(te.promote(&bad), code);
        expect_code(te.evict(&bad), code);
    }
    expect_code(TileSet::new([&[0, 1][..], &[1]]), ErrorCode::Value);
    expect_code(TileSet::new([&[-1][..]]), ErrorCode::Value);
    expect_code(TileSet::new([&[1][..], &[1]]), ErrorCode::Value);
    assert_eq!(states(&te), before);
}

#[test]
fn evict_a_selected_dirty_tile_set() {
    let rt = Runtime::new().unwrap();
    let (te, _) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap();
    let s = sel(&[&[0, 2], &[0], &[0]]);
    let compact = Tensor::from_slice(&rt, &[2, O, I], &vec![7f32; (2 * O * I) as usize]).unwrap();
    let result = te.scatter(&compact, &full, &s, Reduction::Replace).unwrap().wait().unwrap();
    let r = TiledEvictable::of(&result).unwrap();
    assert_eq!(r.dirty_tiles().unwrap(), s.tile_set().unwrap());
    r.evict(&s).unwrap();
    assert_eq!(r.dirty_tiles().unwrap(), TileSet::empty());
    assert_eq!(r.secondary_tiles().unwrap(), s.tile_set().unwrap());
    let back = r.project(&result, &s, None).unwrap().wait().unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), vec![7.0; (2 * O * I) as usize]);
}

#[test]
fn prefetch_without_changing_autograd() {
    let rt = Runtime::new().unwrap();
    let (te, _) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap().requires_grad_().unwrap();
    let s = sel(&[&[1, 2], &[0], &[0]]);
    te.promote_async(&s).unwrap().wait().unwrap();
    assert!(full.is_leaf().unwrap() && full.requires_grad().unwrap());
    assert!(full.grad().unwrap().is_none());
    assert!(full.carrier().unwrap().ptr_eq(te.carrier()));
    assert_eq!(te.primary_tiles().unwrap(), s.tile_set().unwrap());
}

// ---- direct operations ------------------------------------------------------------------

#[test]
fn execute_on_a_partially_resident_full_tensor() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = grid2d(&rt, &[2, 2], &[2, 2]);
    te.promote(&set(&[&[0, 1]])).unwrap();
    let full = te.full_tensor().unwrap();
    let map = |f: &dyn Fn(f32) -> f32| logical.iter().map(|&v| f(v)).collect::<Vec<f32>>();
    assert_eq!(full.sum().unwrap().item().unwrap(), logical.iter().map(|&v| v as f64).sum::<f64>());
    assert_eq!(full.add(&full).unwrap().to_vec::<f32>().unwrap(), map(&|v| 2.0 * v));
    assert_eq!(full.elementwise_mul(&full).unwrap().to_vec::<f32>().unwrap(), map(&|v| v * v));
    assert_eq!(full.mul(&full).unwrap().to_vec::<f32>().unwrap(), map(&|v| v * v));
    assert_eq!(full.mul_scalar(3.0).unwrap().to_vec::<f32>().unwrap(), map(&|v| 3.0 * v));
    assert_eq!(Tensor::scalar_mul(3.0, &full).unwrap().to_vec::<f32>().unwrap(), map(&|v| 3.0 * v));
    assert_eq!(full.relu().unwrap().to_vec::<f32>().unwrap(), map(&|v| v.max(0.0)));
    // matmul (4x4 @ 4x4), first mode fastest: m[i + 4j].
    let mm = full.matmul(&full).unwrap().to_vec::<f32>().unwrap();
    for i in 0..4 {
        for j in 0..4 {
            let want: f32 = (0..4).map(|k| logical[i + 4 * k] * logical[k + 4 * j]).sum();
            assert!((mm[i + 4 * j] - want).abs() <= 1e-5 * want.abs().max(1.0));
        }
    }
    let result = full.add(&full).unwrap();
    assert_eq!(result.carrier().unwrap().kind().unwrap(), CarrierKind::Cpu);
    assert_eq!(result.layout().unwrap(), Layout::dense(&[4, 4]).unwrap());
    assert_eq!(te.primary_tiles().unwrap().len(), 4); // the ops made every tile available
}

#[test]
fn execute_on_an_explicitly_projected_tensor() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = experts(&rt, Policy::None);
    let compact =
        te.project(&te.full_tensor().unwrap(), &sel(&[&[2, 3, 1], &[0], &[0]]), None).unwrap().wait().unwrap();
    let x = Tensor::from_slice(&rt, &[I, 1], &[1f32; I as usize]).unwrap();
    let y = compact.matmul(&x).unwrap();
    assert_eq!(y.shape().unwrap(), vec![3, O, 1]);
    let c = experts_of(&logical, &[2, 3, 1]);
    let want: Vec<f32> = (0..3 * O).map(|ko| (0..I).map(|i| c[(ko + 3 * O * i) as usize]).sum()).collect();
    assert_eq!(y.to_vec::<f32>().unwrap(), want);
}

// ---- scatter ----------------------------------------------------------------------------

#[test]
fn scatter_a_compact_result_and_project_it_back() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap();
    let s = sel(&[&[3, 0, 2], &[0], &[0]]);
    let values: Vec<f32> = (0..3 * O * I).map(|i| (i as f32).sin()).collect();
    let compact = Tensor::from_slice(&rt, &[3, O, I], &values).unwrap();
    let h = te.scatter(&compact, &full, &s, Reduction::Replace).unwrap();
    assert_eq!(h.kind().unwrap(), AwaitKind::Move);
    let result = h.wait().unwrap();
    assert!(result.ptr_eq(&h.wait().unwrap()));
    let r = TiledEvictable::of(&result).unwrap();
    assert!(!r.carrier().ptr_eq(te.carrier()));
    assert_eq!(result.shape().unwrap(), full.shape().unwrap());
    assert_eq!(result.layout().unwrap(), full.layout().unwrap());
    assert_eq!(result.dtype().unwrap(), DType::F32);
    assert_eq!(r.grid_shape().unwrap(), te.grid_shape().unwrap());
    assert_eq!(r.primary().unwrap().kind().unwrap(), CarrierKind::Cpu);
    assert_eq!(r.secondary().unwrap().kind().unwrap(), CarrierKind::Host);
    assert_eq!(r.valid_tiles().unwrap(), s.tile_set().unwrap());
    assert_eq!(r.dirty_tiles().unwrap(), s.tile_set().unwrap());
    assert_eq!(
        r.tile_state(&[1, 0, 0]).unwrap(),
        TileState { location: TileLocation::Invalid, valid: false, dirty: false }
    );
    assert_eq!(r.version().unwrap(), 1);
    assert_eq!(r.project(&result, &s, None).unwrap().wait().unwrap().to_vec::<f32>().unwrap(), values);
    // Neither input changed.
    assert_eq!(compact.to_vec::<f32>().unwrap(), values);
    assert_eq!(full.to_vec::<f32>().unwrap(), logical);
}

#[test]
fn scatter_add_combines_with_the_template() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap();
    let s = sel(&[&[1], &[0], &[0]]);
    let ones = Tensor::from_slice(&rt, &[1, O, I], &vec![1f32; (O * I) as usize]).unwrap();
    let result = te.scatter(&ones, &full, &s, Reduction::Add).unwrap().wait().unwrap();
    let got = TiledEvictable::of(&result).unwrap().project(&result, &s, None).unwrap().wait().unwrap();
    let want: Vec<f32> = experts_of(&logical, &[1]).iter().map(|v| v + 1.0).collect();
    assert_eq!(got.to_vec::<f32>().unwrap(), want);
}

#[test]
fn reject_a_compact_shape_mismatch_and_other_scatter_errors() {
    let rt = Runtime::new().unwrap();
    let (te, _) = experts(&rt, Policy::None);
    let (other, _) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap();
    let s = sel(&[&[1, 2], &[0], &[0]]);
    let good = Tensor::zeros(&rt, DType::F32, &[2, O, I]).unwrap();
    let before = states(&te);
    expect_code(
        te.scatter(&Tensor::zeros(&rt, DType::F32, &[3, O, I]).unwrap(), &full, &s, Reduction::Replace),
        ErrorCode::Value,
    );
    expect_code(te.scatter(&good, &other.full_tensor().unwrap(), &s, Reduction::Replace), ErrorCode::Type);
    expect_code(te.scatter(&other.full_tensor().unwrap(), &full, &s, Reduction::Replace), ErrorCode::Type);
    let on_host = Carrier::host(&rt, DType::F32, (2 * O * I) as usize).unwrap();
    let host_compact = Tensor::new(&on_host, 0, &Layout::dense(&[2, O, I]).unwrap()).unwrap();
    expect_code(te.scatter(&host_compact, &full, &s, Reduction::Replace), ErrorCode::Type);
    expect_code(
        te.scatter(&Tensor::zeros(&rt, DType::F64, &[2, O, I]).unwrap(), &full, &s, Reduction::Replace),
        ErrorCode::Type,
    );
    expect_code(te.scatter(&good, &full, &sel(&[&[1, 2], &[0]]), Reduction::Replace), ErrorCode::Value);
    expect_code(te.scatter(&good, &full, &sel(&[&[1, E], &[0], &[0]]), Reduction::Replace), ErrorCode::Value);
    assert_eq!(states(&te), before);
    let released = Tensor::zeros(&rt, DType::F32, &[2, O, I]).unwrap();
    released.carrier().unwrap().dispose().unwrap();
    expect_code(te.scatter(&released, &full, &s, Reduction::Replace), ErrorCode::State);
}

#[test]
fn differentiate_replace_scatter() {
    let rt = Runtime::new().unwrap();
    let (te, _) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap();
    let s = sel(&[&[0, 3], &[0], &[0]]);
    let compact =
        Tensor::from_slice(&rt, &[2, O, I], &vec![1f32; (2 * O * I) as usize]).unwrap().requires_grad_().unwrap();
    let result = te.scatter(&compact, &full, &s, Reduction::Replace).unwrap().wait().unwrap();
    let weights = arange((2 * O * I) as usize);
    let gathered = TiledEvictable::of(&result).unwrap().project(&result, &s, None).unwrap().wait().unwrap();
    gathered
        .mul(&Tensor::from_slice(&rt, &[2, O, I], &weights).unwrap())
        .unwrap()
        .sum()
        .unwrap()
        .backward(None, false)
        .unwrap();
    assert_eq!(compact.grad().unwrap().unwrap().to_vec::<f32>().unwrap(), weights);
}

// ---- in-place update ---------------------------------------------------------------------

#[test]
fn update_in_place_adds_into_the_selected_tiles() {
    let rt = Runtime::new().unwrap();
    let (te, logical) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap();
    let s = sel(&[&[3, 1], &[0], &[0]]);
    let version = te.version().unwrap();
    let ones = Tensor::from_slice(&rt, &[2, O, I], &vec![1f32; (2 * O * I) as usize]).unwrap();
    te.update_async(&full, &ones, &s, Reduction::Add).unwrap().wait().unwrap();
    assert_eq!(te.version().unwrap(), version + 1);
    assert_eq!(te.dirty_tiles().unwrap(), s.tile_set().unwrap());
    let mut want = logical.clone();
    for e in [3, 1] {
        for k in 0..O * I {
            want[(e + E * k) as usize] += 1.0;
        }
    }
    assert_eq!(full.to_vec::<f32>().unwrap(), want);
    te.update_async(&full, &ones, &s, Reduction::Replace).unwrap().wait().unwrap();
    assert_eq!(te.project(&full, &s, None).unwrap().wait().unwrap().to_vec::<f32>().unwrap(), vec![1.0; 12]);
}

// ---- release -----------------------------------------------------------------------------

#[test]
fn release_after_completed_tiled_work() {
    let rt = Runtime::new().unwrap();
    let (te, _) = experts(&rt, Policy::None);
    let full = te.full_tensor().unwrap();
    te.promote(&set(&[&[0, 0, 0]])).unwrap();
    te.project(&full, &sel(&[&[1], &[0], &[0]]), None).unwrap().wait().unwrap();
    te.dispose().unwrap();
    assert!(te.is_disposed().unwrap());
    te.dispose().unwrap(); // idempotent
    assert!(te.primary().unwrap().is_disposed().unwrap() && te.secondary().unwrap().is_disposed().unwrap());
    let s = sel(&[&[0], &[0], &[0]]);
    expect_code(te.project(&full, &s, None), ErrorCode::State);
    expect_code(te.promote(&s), ErrorCode::State);
    expect_code(te.evict(&s), ErrorCode::State);
    expect_code(te.promote_async(&s), ErrorCode::State);
    expect_code(te.evict_async(&s), ErrorCode::State);
    expect_code(full.sum(), ErrorCode::State);
    expect_code(
        te.scatter(&Tensor::zeros(&rt, DType::F32, &[1, O, I]).unwrap(), &full, &s, Reduction::Replace),
        ErrorCode::State,
    );
    expect_code(full.to_vec::<f32>(), ErrorCode::State);
    expect_code(te.full_tensor(), ErrorCode::State);
    expect_code(full.get(&[0, 0, 0]), ErrorCode::State);
}
