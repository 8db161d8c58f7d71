"""The tiled-carrier-composition spec, scenario by scenario, through Python."""
import numpy as np
import pytest

import strideweave as sw
from strideweave import carriers
from conftest import held, exact, seeded_tiled, tiles_to_logical

E, O, I = 4, 2, 3  # experts, outputs, inputs: one expert per tile


def experts(secondary=carriers.Host, policy=None):
    values = np.arange(E * O * I, dtype=np.float32)
    te = seeded_tiled(values, (E, 1, 1), (1, O, I), secondary, policy)
    return te, tiles_to_logical(values, (E, 1, 1), (1, O, I))


def grid2d(grid=(2, 2), tile=(2, 2), secondary=carriers.Host, policy=None):
    n = int(np.prod(grid) * np.prod(tile))
    values = np.arange(n, dtype=np.float32) * 0.5 - 3
    te = seeded_tiled(values, grid, tile, secondary, policy)
    return te, tiles_to_logical(values, grid, tile)


def expected_projection(logical, per_axis, tile):
    """Blocks of `logical` at the selection's source tiles, packed compactly."""
    out = np.empty(tuple(len(a) * t for a, t in zip(per_axis, tile)), dtype=logical.dtype)
    for c in np.ndindex(*[len(a) for a in per_axis]):
        src = tuple(slice(per_axis[i][c[i]] * tile[i], (per_axis[i][c[i]] + 1) * tile[i]) for i in range(len(tile)))
        dst = tuple(slice(c[i] * tile[i], (c[i] + 1) * tile[i]) for i in range(len(tile)))
        out[dst] = logical[src]
    return out


def states(te):
    return te.primary_tiles, te.secondary_tiles, te.valid_tiles, te.dirty_tiles, te.version


BIG = 1 << 21  # elements per tile where a test needs work still pending


def big_tiled(secondary=carriers.File, tiles=4):
    return seeded_tiled(np.ones(tiles * BIG, np.float32), (tiles,), (BIG,), secondary)


# ---- one flat logical storage extent --------------------------------------------

def test_tiled_evictable_exposes_its_geometry():
    te, logical = experts()
    assert te.grid_shape == (E, 1, 1) and te.tile_shape == (1, O, I) and te.logical_shape == (E, O, I)
    assert te.size() == E * O * I and te.dtype is sw.float32 and te.residency_policy is None
    assert isinstance(te.primary, carriers.CPU) and isinstance(te.secondary, carriers.Host)
    assert te.primary.is_owned() and te.secondary.is_owned()
    full = te.full_tensor()
    assert full.carrier is te and full.shape == (E, O, I) and full.layout == sw.Layout.dense(E, O, I)
    np.testing.assert_array_equal(full.numpy(), logical)


def test_promote_one_expert_tile():
    te, logical = experts()
    full = te.full_tensor()
    layout, version = full.layout, full.version
    te.promote(sw.TileSelection([[2], [0], [0]]))
    assert te.primary_tiles == sw.TileSet([(2, 0, 0)])
    assert te.tile_state((2, 0, 0)).location == "primary" and te.tile_state((1, 0, 0)).location == "secondary"
    assert full.shape == (E, O, I) and full.layout == layout and full.carrier is te and full.version == version
    np.testing.assert_array_equal(full.numpy(), logical)


def test_construction_errors():
    with pytest.raises(TypeError) as e:
        sw.TiledEvictable(carriers.CPU(0), np.zeros(4), (2,), (2,))
    exact(e, sw.StrideWeaveTypeError)
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.TiledEvictable(carriers.Host(0), carriers.Host(4), (2,), (2,))  # primary must compute
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.TiledEvictable(carriers.CPU(0), carriers.Host(4, dtype=sw.float64), (2,), (2,))
    with pytest.raises(ValueError) as e:
        sw.TiledEvictable(carriers.CPU(0), carriers.Host(3), (2,), (2,))  # neither empty nor full
    exact(e, sw.StrideWeaveValueError)
    with pytest.raises(sw.StrideWeaveValueError):
        sw.TiledEvictable(carriers.CPU(0), carriers.Host(0), (2, 2), (2,))
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.TiledEvictable(carriers.CPU(0), carriers.Host(0), (2.0,), (2,))
    released = carriers.Host(4)
    released.release()
    with pytest.raises(RuntimeError) as e:
        sw.TiledEvictable(carriers.CPU(0), released, (2,), (2,))
    exact(e, sw.StrideWeaveRuntimeError)


def test_seeds_decide_the_initial_residency():
    both = sw.TiledEvictable(carriers.CPU(4), carriers.Host(4), (2,), (2,))
    assert both.dirty_tiles == both.primary_tiles == sw.TileSet([(0,), (1,)])
    empty = sw.TiledEvictable(carriers.CPU(0), carriers.Host(0), (2,), (2,))
    assert empty.valid_tiles == sw.TileSet() and empty.tile_state(0).location == "invalid"
    with pytest.raises(RuntimeError) as e:  # an invalid tile is not readable
        empty.project(empty.full_tensor(), sw.TileSelection([[0]]))
    exact(e, sw.StrideWeaveRuntimeError)


# ---- footprint compatibility ----------------------------------------------------

PERMUTED = sw.Layout(sw.Shape([2, 2], [2, 2]), sw.Stride([4, 2], [1, 8]))  # transposes within each 2x2 tile


def permuted_view(te, logical_slots):
    """The tensor over te with the within-tile permutation, and its values."""
    t = sw.Tensor(te, 0, PERMUTED)
    expected = np.empty((4, 4), np.float32)
    for i in range(4):
        for j in range(4):
            expected[i, j] = logical_slots[PERMUTED.index((i, j))]
    return t, expected


def test_accept_a_within_tile_permutation():
    te, logical = grid2d()
    slots = logical.reshape(-1, order="F")  # slot s holds the logical value at decode(s)
    t, expected = permuted_view(te, slots)
    np.testing.assert_array_equal(t.numpy(), expected)
    sel = sw.TileSelection([[1, 0], [1]])
    got = te.project(t, sel).wait()
    np.testing.assert_array_equal(got.numpy(), expected_projection(expected, sel.per_axis, (2, 2)))
    np.testing.assert_allclose(sw.reduce_sum(t).item(), expected.sum())
    np.testing.assert_array_equal(sw.add(t, t).numpy(), 2 * expected)
    t.requires_grad = True
    w = np.arange(8, dtype=np.float32).reshape(4, 2)
    sw.reduce_sum(te.project(t, sel).wait() * sw.from_numpy(w)).backward()
    grad = t.grad
    assert grad.layout == PERMUTED and isinstance(grad.carrier, sw.TiledEvictable) and grad.carrier is not te
    want = np.zeros((4, 4), np.float32)
    want[2:4, 2:4], want[0:2, 2:4] = w[0:2], w[2:4]
    np.testing.assert_array_equal(grad.numpy(), want)


@pytest.mark.parametrize("layout,offset", [
    (sw.Layout((4, 4), (4, 1)), 0),  # transposed: logical tiles reach other tiles' footprints
    (sw.Layout(sw.Shape([2, 2], [2, 2]), sw.Stride([1, 1], [4, 8])), 0),  # repeats and omits slots
    (sw.Layout((4, 4), (1, 4)), 0),  # fine for 2x2 tiles: the control case below
])
def test_reject_incompatible_tensors_before_any_change(layout, offset):
    te, _ = grid2d()
    t = sw.Tensor(te, offset, layout)
    before = states(te)
    sel = sw.TileSelection([[0], [1]])
    if layout == sw.Layout.dense(4, 4):
        te.project(t, sel).wait()
        return
    with pytest.raises(ValueError) as e:
        te.project(t, sel)
    exact(e, sw.StrideWeaveValueError)
    with pytest.raises(sw.StrideWeaveValueError):
        sw.reduce_sum(t)
    with pytest.raises(sw.StrideWeaveValueError):
        te.scatter(sw.from_numpy(np.zeros((2, 2), np.float32)), t, sel)
    assert states(te) == before


def test_reject_one_logical_tile_spanning_physical_tiles():
    te, _ = grid2d(grid=(2, 4), tile=(2, 1))
    t = sw.Tensor(te, 0, sw.Layout((4, 4), (4, 1)))
    before = states(te)
    with pytest.raises(sw.StrideWeaveValueError):
        te.project(t, sw.TileSelection([[0], [0]]))
    assert states(te) == before


def test_reject_tile_coordinate_remapping():
    # Logical tile (0, 1) of the transposed view reaches exactly carrier tile (1, 0).
    te, _ = grid2d()
    t = sw.Tensor(te, 0, sw.Layout((4, 4), (4, 1)))
    with pytest.raises(sw.StrideWeaveValueError):
        te.project(t, sw.TileSelection([[0], [1]]))


# ---- project -------------------------------------------------------------------------

def test_project_returns_the_same_compact_tensor_in_selection_order():
    te, logical = experts()
    full = te.full_tensor()
    h = te.project(full, sw.TileSelection([[2, 0, 3], [0], [0]]))
    assert isinstance(h, sw.AwaitProjection) and isinstance(h, sw.AwaitResult)
    compact = h.wait()
    assert compact is h.wait() is h.wait(timeout=1)
    assert compact.shape == (3, O, I) and compact.dtype is sw.float32
    assert compact.layout == sw.Layout.dense(3, O, I) and isinstance(compact.carrier, carriers.CPU)
    np.testing.assert_array_equal(compact.numpy(), logical[[2, 0, 3]])


def test_keep_the_full_tensor_unchanged():
    te, logical = experts()
    full = te.full_tensor()
    version, layout = full.version, full.layout
    te.project(full, sw.TileSelection([[1, 2, 3], [0], [0]])).wait()
    assert full.carrier is te and full.shape == (E, O, I) and full.layout == layout and full.version == version
    np.testing.assert_array_equal(full.numpy(), logical)


def test_overlap_projection_with_computation():
    te = big_tiled()
    full = te.full_tensor()
    h = te.project(full, sw.TileSelection([[3, 1]]))
    assert not h.done()  # transfers are in flight; project did not wait for them
    other = sw.reduce_sum(sw.from_numpy(np.ones(1000, np.float32)))  # unrelated work meanwhile
    assert other.item() == 1000
    compact = h.wait()
    assert compact.shape == (2 * BIG,) and float(compact.numpy().sum()) == 2 * BIG


def test_gather_a_permuted_selection():
    values = np.arange(20 * 2, dtype=np.float32)
    te = seeded_tiled(values, (20,), (2,))
    got = te.project(te.full_tensor(), sw.TileSelection([[7, 2, 19]])).wait().numpy()
    np.testing.assert_array_equal(got, np.concatenate([values[14:16], values[4:6], values[38:40]]))


def test_gather_a_multi_axis_selection():
    te, logical = grid2d(grid=(8, 10), tile=(1, 2))
    sel = sw.TileSelection([[7, 2], [4, 9]])
    assert sel.coordinates == ((7, 4), (2, 4), (7, 9), (2, 9))
    got = te.project(te.full_tensor(), sel).wait().numpy()
    np.testing.assert_array_equal(got, expected_projection(logical, sel.per_axis, (1, 2)))
    # successive compact tiles hold those source tiles in exactly that order
    tiles = [got[c0:c0 + 1, 2 * c1:2 * c1 + 2] for c1 in range(2) for c0 in range(2)]
    for tile, (g0, g1) in zip(tiles, sel.coordinates):
        np.testing.assert_array_equal(tile, logical[g0:g0 + 1, 2 * g1:2 * g1 + 2])


def test_project_argument_errors():
    te, _ = experts()
    other, _ = experts()
    full = te.full_tensor()
    sel = sw.TileSelection([[1], [0], [0]])
    cases = [
        (lambda: te.project(full.numpy(), sel), sw.StrideWeaveTypeError),
        (lambda: te.project(other.full_tensor(), sel), sw.StrideWeaveTypeError),
        (lambda: te.project(full, sel.tile_set), sw.StrideWeaveTypeError),
        (lambda: te.project(full, [[1], [0], [0]]), sw.StrideWeaveTypeError),
        (lambda: te.project(full, sw.TileSelection([[1], [0]])), sw.StrideWeaveValueError),
        (lambda: te.project(full, sw.TileSelection([[E], [0], [0]])), sw.StrideWeaveValueError),
        (lambda: te.project(full, sel, destination=other), sw.StrideWeaveTypeError),
        (lambda: te.project(full, sel, destination=carriers.Host(0)), sw.StrideWeaveTypeError),
        (lambda: te.project(full, sel, destination="cpu"), sw.StrideWeaveTypeError),
        (lambda: te.project(full, sel, destination=carriers.CPU(0, dtype=sw.float64)), sw.StrideWeaveTypeError),
        (lambda: te.project(full, sel, destination=carriers.CPU(3)), sw.StrideWeaveValueError),
    ]
    before = states(te)
    for call, cls in cases:
        with pytest.raises(cls.__mro__[2]) as e:
            call()
        exact(e, cls)
    released = carriers.CPU(O * I)
    released.release()
    with pytest.raises(RuntimeError) as e:
        te.project(full, sel, destination=released)
    exact(e, sw.StrideWeaveRuntimeError)
    claimed = carriers.CPU(O * I)
    sw._native.sw_testing_claim(claimed._h)
    with pytest.raises(sw.StrideWeaveRuntimeError):
        te.project(full, sel, destination=claimed)
    sw._native.sw_testing_unclaim(claimed._h)
    assert states(te) == before


def test_project_into_a_supplied_destination():
    te, logical = experts()
    full = te.full_tensor()
    for dest in (carriers.CPU(0), carriers.CPU(2 * O * I + 5)):
        compact = te.project(full, sw.TileSelection([[3, 1], [0], [0]]), destination=dest).wait()
        assert compact.carrier is dest
        np.testing.assert_array_equal(compact.numpy(), logical[[3, 1]])


# ---- autograd through projection ---------------------------------------------------------

def test_backpropagate_through_project_then_operation():
    te, logical = experts()
    full = te.full_tensor()
    full.requires_grad = True
    sel = sw.TileSelection([[2, 0], [0], [0]])
    h = te.project(full, sel)
    with pytest.raises(TypeError) as e:  # the handle is not a graph node nor an operand
        sw.mul(h, 2.0)
    exact(e, sw.StrideWeaveTypeError)
    compact = h.wait()
    assert not compact.is_leaf
    weights = np.random.default_rng(1).standard_normal((2, O, I)).astype(np.float32)
    sw.reduce_sum(sw.relu(compact) * sw.from_numpy(weights)).backward()
    grad = full.grad
    g = grad.carrier
    assert isinstance(g, sw.TiledEvictable) and g is not te
    assert g.grid_shape == te.grid_shape and g.tile_shape == te.tile_shape and grad.layout == full.layout
    assert g.tile_state((1, 0, 0)).location == "implicit" and g.tile_state((1, 0, 0)).valid
    want = np.zeros((E, O, I), np.float32)
    want[[2, 0]] = weights * (logical[[2, 0]] > 0)
    np.testing.assert_array_equal(grad.numpy(), want)


def test_accumulate_overlapping_projections():
    te, _ = experts()
    full = te.full_tensor().requires_grad_()
    a = te.project(full, sw.TileSelection([[0, 1], [0], [0]])).wait()
    b = te.project(full, sw.TileSelection([[1, 2], [0], [0]])).wait()
    sw.reduce_sum(a * 2.0 + sw.reduce_sum(b * 3.0)).backward()
    grad = full.grad.numpy()
    np.testing.assert_array_equal(grad[0], 2.0 * np.ones((O, I)))
    np.testing.assert_array_equal(grad[1], (2.0 + 3.0 * 2 * O * I) * np.ones((O, I)))
    np.testing.assert_array_equal(grad[2], 3.0 * 2 * O * I * np.ones((O, I)))
    np.testing.assert_array_equal(grad[3], 0)
    assert full.grad.carrier.tile_state((3, 0, 0)).location == "implicit"


# ---- residency ---------------------------------------------------------------------------

def test_cache_unrelated_tiles():
    te, logical = grid2d()
    cache = sw.TileSet([(0, 0), (0, 1), (1, 0)])
    te.promote(cache)
    assert te.primary_tiles == cache and te.secondary_tiles == sw.TileSet([(1, 1)])
    np.testing.assert_array_equal(te.full_tensor().numpy(), logical)


def test_residency_transitions_async_and_blocking():
    te, logical = experts()
    sel = sw.TileSelection([[1, 3], [0], [0]])
    h = te.promote_async(sel)
    assert isinstance(h, sw.AwaitResidency) and h.wait() is None and h.wait() is None
    assert te.primary_tiles == sel.tile_set
    assert te.promote(sel) is None and te.primary_tiles == sel.tile_set  # idempotent
    assert te.evict(sel.tile_set) is None and te.primary_tiles == sw.TileSet()
    assert te.evict(sel.tile_set) is None
    facet = te.require_facet(sw.TiledResidencyFacet)
    assert isinstance(facet, sw.TiledResidencyFacet)
    facet.promote_async(te, sel).wait()
    assert te.primary_tiles == sel.tile_set
    facet.evict(te, sel)
    assert te.primary_tiles == sw.TileSet()
    np.testing.assert_array_equal(te.full_tensor().numpy(), logical)
    with pytest.raises(sw.StrideWeaveTypeError):
        carriers.CPU(1).require_facet(sw.TiledResidencyFacet)
    with pytest.raises(sw.StrideWeaveTypeError):
        facet.promote(carriers.CPU(1), sel)


def test_prefetch_async_promotes_from_a_file_tier():
    # A promotion whose file reads yield to those of waited-for requests:
    # the same await, the same residency, the same values.
    te, logical = experts(secondary=carriers.File)
    sel = sw.TileSelection([[0, 2], [0], [0]])
    h = te.prefetch_async(sel)
    assert isinstance(h, sw.AwaitResidency)
    assert h.wait() is None and te.primary_tiles == sel.tile_set
    facet = te.require_facet(sw.TiledResidencyFacet)
    assert facet.prefetch_async(te, sw.TileSet([(3, 0, 0)])).wait() is None
    assert te.primary_tiles == sw.TileSet([(0, 0, 0), (2, 0, 0), (3, 0, 0)])
    np.testing.assert_array_equal(te.full_tensor().numpy(), logical)


def test_residency_argument_errors_change_nothing():
    te, _ = experts()
    before = states(te)
    for bad, cls in (([(1, 0, 0)], sw.StrideWeaveTypeError), (None, sw.StrideWeaveTypeError),
                     (sw.TileSet([(1, 0)]), sw.StrideWeaveValueError),
                     (sw.TileSet([(E, 0, 0)]), sw.StrideWeaveValueError)):
        for method in (te.promote_async, te.prefetch_async, te.evict_async, te.promote, te.evict):
            with pytest.raises(cls.__mro__[2]) as e:
                method(bad)
            exact(e, cls)
    assert states(te) == before


def test_evict_a_selected_dirty_tile_set():
    te, logical = experts()
    full = te.full_tensor()
    sel = sw.TileSelection([[0, 2], [0], [0]])
    compact = sw.from_numpy(np.full((2, O, I), 7.0, np.float32))
    result = te.scatter(compact, full, sel).wait()
    r = result.carrier
    assert r.dirty_tiles == sel.tile_set
    assert r.evict(sel) is None
    assert r.dirty_tiles == sw.TileSet() and r.secondary_tiles == sel.tile_set
    np.testing.assert_array_equal(r.project(result, sel).wait().numpy(), 7.0)


def test_prefetch_without_changing_autograd():
    te, _ = experts()
    full = te.full_tensor().requires_grad_()
    sel = sw.TileSelection([[1, 2], [0], [0]])
    te.promote_async(sel).wait()
    assert full.is_leaf and full.requires_grad and full.grad is None and full.carrier is te
    assert te.primary_tiles == sel.tile_set


def test_failed_residency_request_keeps_the_prior_state():
    rt = sw.Runtime()
    try:
        sec = carriers.Host(8, runtime=rt)
        te = sw.TiledEvictable(carriers.CPU(0, runtime=rt), sec, (4,), (2,))
        before = states(te)
        sw._native.sw_testing_inject_fault(rt._h, sw._native.SW_FAULT_ALLOCATION, 2)
        with pytest.raises(MemoryError):
            te.promote(sw.TileSet([(0,), (1,), (2,)]))
        assert states(te) == before
    finally:
        rt.shutdown()


def test_refuse_hidden_waiting_on_an_external_transition():
    te = big_tiled(tiles=16)
    full = te.full_tensor()
    h = te.evict_async(sw.TileSet([(0,)]))  # nothing primary: completes quickly, still a request
    h.wait()
    with held(te) as caught:  # the promotion's first read stays in flight
        p = te.promote_async(sw.TileSet([(i,) for i in range(16)]))
        caught()
        assert not p.done()
        with pytest.raises(RuntimeError) as e:
            sw.reduce_sum(full)
        exact(e, sw.StrideWeaveRuntimeError)
        with pytest.raises(sw.StrideWeaveRuntimeError):
            te.project(full, sw.TileSelection([[0]]))
    p.wait()
    assert sw.reduce_sum(full).item() == 16 * BIG


def test_eviction_races_with_execution():
    te = big_tiled()
    full = te.full_tensor()
    sel = sw.TileSelection([[0, 1]])
    with held(te) as caught:  # the projection's first fetch stays in flight
        h = te.project(full, sel)
        caught()
        assert not h.done()
        # Accepted (the projection does not own its tiles): it waits for the
        # projection before it evicts anything.
        e = te.evict_async(sel)
        assert not e.done()
    compact = h.wait()
    e.wait()
    assert float(compact.numpy().sum()) == 2 * BIG
    assert te.primary_tiles == sw.TileSet()


# ---- direct operations ---------------------------------------------------------------------

def test_execute_on_a_partially_resident_full_tensor():
    te, logical = grid2d()
    te.promote(sw.TileSet([(0, 1)]))
    full = te.full_tensor()
    np.testing.assert_allclose(sw.reduce_sum(full).item(), logical.sum())
    np.testing.assert_array_equal(sw.add(full, full).numpy(), 2 * logical)
    np.testing.assert_array_equal(sw.elementwise_mul(full, full).numpy(), logical * logical)
    np.testing.assert_array_equal(sw.mul(full, 3.0).numpy(), logical * 3)
    np.testing.assert_array_equal(sw.mul(3.0, full).numpy(), logical * 3)
    np.testing.assert_array_equal(sw.mul(full, full).numpy(), logical * logical)
    np.testing.assert_array_equal(sw.relu(full).numpy(), np.maximum(logical, 0))
    np.testing.assert_allclose(sw.matmul(full, full).numpy(), logical @ logical, rtol=1e-6)
    result = sw.add(full, full)
    assert isinstance(result.carrier, carriers.CPU) and result.layout == sw.Layout.dense(4, 4)


def test_execute_on_an_explicitly_projected_tensor():
    te, logical = experts()
    compact = te.project(te.full_tensor(), sw.TileSelection([[2, 7 % E, 1], [0], [0]])).wait()
    x = np.ones((I, 1), np.float32)
    y = sw.matmul(compact, sw.from_numpy(x))
    np.testing.assert_array_equal(y.numpy(), logical[[2, 3, 1]] @ x)


def test_direct_ops_with_autograd_on_the_full_tensor():
    te, logical = experts()
    full = te.full_tensor().requires_grad_()
    sw.reduce_sum(full * 2.0).backward()
    np.testing.assert_array_equal(full.grad.numpy(), np.full((E, O, I), 2.0))


# ---- scatter ---------------------------------------------------------------------------------

def test_scatter_a_compact_result_and_project_it_back():
    te, logical = experts()
    full = te.full_tensor()
    sel = sw.TileSelection([[3, 0, 2], [0], [0]])
    values = np.random.default_rng(2).standard_normal((3, O, I)).astype(np.float32)
    compact = sw.from_numpy(values)
    h = te.scatter(compact, full, sel)
    assert isinstance(h, sw.AwaitMove)
    result = h.wait()
    assert result is h.wait()
    r = result.carrier
    assert isinstance(r, sw.TiledEvictable) and r is not te
    assert result.shape == full.shape and result.layout == full.layout and result.dtype is full.dtype
    assert r.grid_shape == te.grid_shape and r.tile_shape == te.tile_shape
    assert isinstance(r.primary, carriers.CPU) and isinstance(r.secondary, carriers.Host)
    assert r.valid_tiles == r.dirty_tiles == sel.tile_set
    assert r.tile_state((1, 0, 0)) == sw.TileState("invalid", False, False)
    assert r.version == 1
    np.testing.assert_array_equal(r.project(result, sel).wait().numpy(), values)
    # neither input changed
    np.testing.assert_array_equal(compact.numpy(), values)
    np.testing.assert_array_equal(full.numpy(), logical)


def test_scatter_add_combines_with_the_template():
    te, logical = experts()
    full = te.full_tensor()
    sel = sw.TileSelection([[1], [0], [0]])
    result = te.scatter(sw.from_numpy(np.ones((1, O, I), np.float32)), full, sel, reduction="add").wait()
    np.testing.assert_array_equal(result.carrier.project(result, sel).wait().numpy(), logical[[1]] + 1)


def test_reject_a_compact_shape_mismatch_and_other_scatter_errors():
    te, _ = experts()
    other, _ = experts()
    full = te.full_tensor()
    sel = sw.TileSelection([[1, 2], [0], [0]])
    good = sw.from_numpy(np.zeros((2, O, I), np.float32))
    before = states(te)
    cases = [
        (lambda: te.scatter(sw.from_numpy(np.zeros((3, O, I), np.float32)), full, sel), sw.StrideWeaveValueError),
        (lambda: te.scatter(good.numpy().tolist(), full, sel), sw.StrideWeaveTypeError),
        (lambda: te.scatter(good, full.numpy(), sel), sw.StrideWeaveTypeError),
        (lambda: te.scatter(good, other.full_tensor(), sel), sw.StrideWeaveTypeError),
        (lambda: te.scatter(other.full_tensor(), full, sel), sw.StrideWeaveTypeError),
        (lambda: te.scatter(sw.from_numpy(np.zeros((2, O, I), np.float32), carriers.Host), full, sel),
         sw.StrideWeaveTypeError),
        (lambda: te.scatter(good, full, sel.tile_set), sw.StrideWeaveTypeError),
        (lambda: te.scatter(sw.from_numpy(np.zeros((2, O, I))), full, sel), sw.StrideWeaveTypeError),
        (lambda: te.scatter(good, full, sw.TileSelection([[1, 2], [0]])), sw.StrideWeaveValueError),
        (lambda: te.scatter(good, full, sw.TileSelection([[1, E], [0], [0]])), sw.StrideWeaveValueError),
        (lambda: te.scatter(good, full, sel, reduction="max"), sw.StrideWeaveValueError),
        (lambda: te.scatter(good, full, sel, reduction=None), sw.StrideWeaveValueError),
    ]
    for call, cls in cases:
        with pytest.raises(cls.__mro__[2]) as e:
            call()
        exact(e, cls)
    assert states(te) == before
    released = sw.from_numpy(np.zeros((2, O, I), np.float32))
    released.carrier.release()
    with pytest.raises(RuntimeError) as e:
        te.scatter(released, full, sel)
    exact(e, sw.StrideWeaveRuntimeError)


def test_differentiate_replace_scatter():
    te, _ = experts()
    full = te.full_tensor()
    sel = sw.TileSelection([[0, 3], [0], [0]])
    compact = sw.from_numpy(np.ones((2, O, I), np.float32)).requires_grad_()
    result = te.scatter(compact, full, sel).wait()
    weights = np.arange(2 * O * I, dtype=np.float32).reshape(2, O, I)
    gathered = result.carrier.project(result, sel).wait()
    sw.reduce_sum(gathered * sw.from_numpy(weights)).backward()
    np.testing.assert_array_equal(compact.grad.numpy(), weights)


# ---- release -----------------------------------------------------------------------------------

def test_release_after_completed_tiled_work():
    te, _ = experts()
    full = te.full_tensor()
    te.promote(sw.TileSet([(0, 0, 0)]))
    te.project(full, sw.TileSelection([[1], [0], [0]])).wait()
    assert te.release() is None and te.is_released()
    assert te.release() is None  # idempotent
    assert te.primary.is_released() and te.secondary.is_released()
    sel = sw.TileSelection([[0], [0], [0]])
    for call in (lambda: te.project(full, sel), lambda: te.promote(sel), lambda: te.evict(sel),
                 lambda: te.promote_async(sel), lambda: te.evict_async(sel), lambda: sw.reduce_sum(full),
                 lambda: te.scatter(sw.from_numpy(np.zeros((1, O, I), np.float32)), full, sel),
                 lambda: full.numpy(), lambda: te.full_tensor(), lambda: full[0, 0, 0]):
        with pytest.raises(RuntimeError) as e:
            call()
        exact(e, sw.StrideWeaveRuntimeError)


def test_release_refuses_while_work_is_pending():
    te = big_tiled()
    with held(te) as caught:
        h = te.project(te.full_tensor(), sw.TileSelection([[0, 1, 2]]))
        caught()
        assert not h.done()
        with pytest.raises(RuntimeError) as e:
            te.release()
        exact(e, sw.StrideWeaveRuntimeError)
        assert not te.is_released()
    assert float(h.wait().numpy().sum()) == 3 * BIG
    te.release()
    assert te.is_released()


# ---- in-place update ----------------------------------------------------------------------------

def test_update_in_place_adds_into_the_selected_tiles():
    te, logical = experts()
    full = te.full_tensor()
    sel = sw.TileSelection([[3, 1], [0], [0]])
    version = te.version
    h = te.update_async(full, sw.from_numpy(np.ones((2, O, I), np.float32)), sel, reduction="add")
    assert isinstance(h, sw.AwaitMove) and h.wait() is None
    assert te.version == version + 1 and te.dirty_tiles == sel.tile_set
    want = logical.copy()
    want[[3, 1]] += 1
    np.testing.assert_array_equal(full.numpy(), want)
    with pytest.raises(sw.StrideWeaveValueError):
        te.update_async(full, sw.from_numpy(np.ones((2, O, I), np.float32)), sel, reduction="mul")
    with pytest.raises(sw.StrideWeaveTypeError):
        te.update_async(full, np.ones((2, O, I), np.float32).tolist(), sel)


# ---- a Vulkan primary tier -------------------------------------------------------

def vulkan_primary_or_skip():
    try:
        return carriers.Vulkan(0)
    except NotImplementedError as e:  # no Vulkan in this build or no driver (ICD)
        pytest.skip(f"Vulkan unavailable: {e}")


def test_a_vulkan_primary_tier_projects_trains_and_evicts_like_a_cpu_one():
    primary = vulkan_primary_or_skip()
    values = np.arange(E * O * I, dtype=np.float32) - 7
    te = seeded_tiled(values, (E, 1, 1), (1, O, I), primary=primary)
    ref = seeded_tiled(values, (E, 1, 1), (1, O, I))
    logical = tiles_to_logical(values, (E, 1, 1), (1, O, I))
    assert te.primary is primary and primary.is_owned()
    sel = sw.TileSelection([[2, 0, 3], [0], [0]])
    full, ref_full = te.full_tensor(), ref.full_tensor()
    full.requires_grad = ref_full.requires_grad = True

    # Projection gathers on the device: the compact tensor is a Vulkan one.
    compact = te.project(full, sel).wait()
    assert isinstance(compact.carrier, carriers.Vulkan)
    np.testing.assert_array_equal(compact.numpy(), logical[[2, 0, 3]])
    assert te.primary_tiles == sel.tile_set and len(te.dirty_tiles) == 0

    # Backward through the projection gives the same tile-sparse gradient.
    w = np.random.default_rng(3).standard_normal((3, O, I)).astype(np.float32)
    wv = sw.move_async(sw.from_numpy(w), carriers.Vulkan(0)).wait()
    sw.reduce_sum(sw.relu(compact) * wv).backward()
    sw.reduce_sum(sw.relu(ref.project(ref_full, sel).wait()) * sw.from_numpy(w)).backward()
    assert isinstance(full.grad.carrier.primary, carriers.Vulkan)
    np.testing.assert_array_equal(full.grad.numpy(), ref_full.grad.numpy())

    # An in-place add, then eviction: the dirty tiles reach the secondary tier.
    with sw.no_grad():
        step = sw.move_async(sw.from_numpy(np.full((3, O, I), 0.5, np.float32)), carriers.Vulkan(0)).wait()
        te.update_async(full, step, sel, reduction="add").wait()
    want = logical.copy()
    want[[2, 0, 3]] += 0.5
    assert te.dirty_tiles == sel.tile_set
    te.evict(te.primary_tiles)
    assert len(te.primary_tiles) == 0 and len(te.dirty_tiles) == 0
    stored = np.array([te.secondary[i] for i in range(E * O * I)], np.float32)
    np.testing.assert_array_equal(tiles_to_logical(stored, (E, 1, 1), (1, O, I)), want)
    np.testing.assert_array_equal(full.numpy(), want)

    # A CPU compact tensor or destination is refused, naming the kind.
    with pytest.raises(sw.StrideWeaveTypeError, match="Vulkan"):
        te.project(full, sel, destination=carriers.CPU(0))
    with pytest.raises(sw.StrideWeaveTypeError, match="Vulkan"):
        te.scatter(sw.from_numpy(w), full, sel)


def test_a_claimed_seed_stays_a_carrier():
    seed = carriers.CPU.from_values(range(8), dtype=sw.float32)
    te = sw.TiledEvictable(seed, carriers.Host(0), (2,), (4,))
    assert seed.size() == 8 and seed.is_owned() and not seed.is_released()
    with pytest.raises(RuntimeError, match="owned by a TiledEvictable") as e:
        seed[0]
    exact(e, sw.StrideWeaveRuntimeError)
    with pytest.raises(RuntimeError, match="owned by a TiledEvictable"):
        seed[0] = 1.0
    np.testing.assert_array_equal(te.full_tensor().numpy(), np.arange(8, dtype=np.float32))
