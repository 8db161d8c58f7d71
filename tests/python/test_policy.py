"""Residency policies written in Python, and the built-in LRU policy."""
import numpy as np
import pytest

import strideweave as sw
from strideweave import carriers
from conftest import exact, seeded_tiled, tiles_to_logical


class Recorder:
    """Plans to promote what is required; remembers every call."""

    def __init__(self, make_plan=None):
        self.calls = []
        self.make_plan = make_plan or (lambda required, purpose: sw.ResidencyPlan(promote=required))

    def plan(self, required, purpose):
        self.calls.append((required, purpose))
        return self.make_plan(required, purpose)


def make(policy, grid=(4,), tile=(2,)):
    values = np.arange(int(np.prod(grid) * np.prod(tile)), dtype=np.float32)
    return seeded_tiled(values, grid, tile, policy=policy), tiles_to_logical(values, grid, tile)


def test_policy_is_called_with_required_tiles_and_purpose():
    rec = Recorder()
    te, logical = make(rec)
    assert te.residency_policy is rec
    with pytest.raises(AttributeError):
        te.residency_policy = None
    full = te.full_tensor()
    sel = sw.TileSelection([[3, 1]])
    np.testing.assert_array_equal(te.project(full, sel).wait().numpy(), logical[[6, 7, 2, 3]])
    assert rec.calls == [(sel.tile_set, "projection")]
    assert isinstance(rec.calls[0][0], sw.TileSet)
    rec.calls.clear()
    sw.reduce_sum(full)
    assert rec.calls == [(sw.TileSet([(0,), (1,), (2,), (3,)]), "operation")]
    rec.calls.clear()
    te.scatter(sw.from_numpy(np.zeros(2, np.float32)), full, sw.TileSelection([[0]])).wait()
    assert [p for _, p in rec.calls] == ["scatter"]


def test_backward_purpose_and_no_policy_call_for_an_unreachable_branch():
    rec_a, rec_b = Recorder(), Recorder()
    a, logical = make(rec_a)
    b, _ = make(rec_b)
    w = sw.from_numpy(np.ones(8, np.float32)).requires_grad_()
    ya = sw.elementwise_mul(a.full_tensor(), w)  # saves a's tiles for backward
    yb = sw.elementwise_mul(b.full_tensor(), w)  # a branch the loss never reaches
    a.evict(sw.TileSet([(i,) for i in range(4)]))
    rec_a.calls.clear()
    rec_b.calls.clear()
    sw.reduce_sum(ya).backward()
    assert rec_a.calls == [(sw.TileSet([(0,), (1,), (2,), (3,)]), "backward")]
    assert rec_b.calls == []
    np.testing.assert_array_equal(w.grad.numpy(), logical)
    assert yb.shape == (8,)


def test_valid_plan_promotes_retains_and_evicts():
    def planner(required, purpose):
        return sw.ResidencyPlan(promote=sw.TileSet([(0,)]) | required, evict=sw.TileSet([(3,)]))

    te, _ = make(Recorder(planner))
    te.promote(sw.TileSet([(3,)]))
    te.project(te.full_tensor(), sw.TileSelection([[1]])).wait()
    assert te.tile_state(0).location == "primary" and te.tile_state(1).location == "primary"
    assert te.tile_state(3).location == "secondary"


def test_policy_exception_propagates_unchanged_before_any_work():
    class Boom(Exception):
        pass

    raised = Boom("no plan today")

    def planner(required, purpose):
        raise raised

    te, _ = make(Recorder(planner))
    before = (te.primary_tiles, te.valid_tiles, te.version)
    full = te.full_tensor()
    for call in (lambda: te.project(full, sw.TileSelection([[1]])), lambda: sw.reduce_sum(full),
                 lambda: te.scatter(sw.from_numpy(np.zeros(2, np.float32)), full, sw.TileSelection([[0]]))):
        with pytest.raises(Boom) as e:
            call()
        assert e.value is raised
    assert (te.primary_tiles, te.valid_tiles, te.version) == before
    # A KeyboardInterrupt-like BaseException also comes through as itself.
    te2, _ = make(Recorder(lambda r, p: (_ for _ in ()).throw(KeyError("k"))))
    with pytest.raises(KeyError):
        te2.project(te2.full_tensor(), sw.TileSelection([[0]]))


def test_reject_an_invalid_policy_result_before_execution():
    te, _ = make(Recorder(lambda required, purpose: {"promote": required}))
    before = (te.primary_tiles, te.valid_tiles)
    with pytest.raises(TypeError) as e:
        te.project(te.full_tensor(), sw.TileSelection([[1]]))
    exact(e, sw.StrideWeaveTypeError)
    assert (te.primary_tiles, te.valid_tiles) == before
    te, _ = make(Recorder(lambda required, purpose: None))
    with pytest.raises(sw.StrideWeaveTypeError):
        te.project(te.full_tensor(), sw.TileSelection([[1]]))


def test_plan_incompatible_with_the_grid_is_value_error():
    te, _ = make(Recorder(lambda required, purpose: sw.ResidencyPlan(promote=sw.TileSet([(9,)]))))
    with pytest.raises(ValueError) as e:
        te.project(te.full_tensor(), sw.TileSelection([[1]]))
    exact(e, sw.StrideWeaveValueError)
    te, _ = make(Recorder(lambda required, purpose: sw.ResidencyPlan(promote=sw.TileSet([(0, 0)]))))
    with pytest.raises(sw.StrideWeaveValueError):
        te.project(te.full_tensor(), sw.TileSelection([[1]]))


@pytest.mark.parametrize("policy", [object(), 5, "lru", type("NoCall", (), {"plan": 3})()])
def test_non_policy_fails_construction(policy):
    with pytest.raises(TypeError) as e:
        sw.TiledEvictable(carriers.CPU(0), carriers.Host(8), (4,), (2,), residency_policy=policy)
    exact(e, sw.StrideWeaveTypeError)


def test_run_backward_without_a_policy_after_eviction():
    te, logical = make(None)
    full = te.full_tensor().requires_grad_()
    w_np = np.arange(8, dtype=np.float32) - 2
    w = sw.from_numpy(w_np).requires_grad_()
    loss = sw.reduce_sum(sw.elementwise_mul(full, w))  # saves full's tiles and w
    compact = te.project(full, sw.TileSelection([[2, 0]])).wait()
    loss2 = sw.reduce_sum(compact * compact)
    te.evict(sw.TileSet([(i,) for i in range(4)]))
    assert te.primary_tiles == sw.TileSet()
    loss.backward()
    loss2.backward()
    np.testing.assert_array_equal(w.grad.numpy(), logical)
    want = w_np.copy()
    want[[4, 5, 0, 1]] += 2 * logical[[4, 5, 0, 1]]
    np.testing.assert_array_equal(full.grad.numpy(), want)


def test_policy_object_is_released_with_the_carrier():
    import gc
    import time
    import weakref

    rec = Recorder()
    ref = weakref.ref(rec)
    te, _ = make(rec)
    te.project(te.full_tensor(), sw.TileSelection([[0]])).wait()
    del rec, te
    # The last reference may be dropped on the runtime's thread, which hands
    # the decref to the interpreter's pending calls: let them run.
    for _ in range(200):
        gc.collect()
        if ref() is None:
            break
        time.sleep(0.01)
    assert ref() is None


def test_builtin_lru_policy_keeps_a_budget():
    lru = sw.LRUPolicy(2)
    te, logical = make(lru)
    assert te.residency_policy is lru
    full = te.full_tensor()
    for tile in (0, 1, 2, 0, 3):
        te.project(full, sw.TileSelection([[tile]])).wait()
        assert len(te.primary_tiles) <= 2
    stats = lru.stats()
    assert stats["requests"] == 5 and stats["misses"] >= 4 and stats["evicted"] >= 2
    lru.hint(sw.TileSet([(1,)]))
    plan = lru.plan(sw.TileSet([(2,)]), "projection")
    assert isinstance(plan, sw.ResidencyPlan)
    with pytest.raises(sw.StrideWeaveValueError):
        sw.LRUPolicy(0)
    np.testing.assert_array_equal(full.numpy(), logical)


def test_lru_budget_holds_for_direct_ops_promotions_and_writes():
    lru = sw.LRUPolicy(2)
    te, logical = make(lru, grid=(6,), tile=(2,))
    full = te.full_tensor()
    # A direct op on all six tiles streams through a budget of two.
    assert float(sw.reduce_sum(full).numpy()) == float(logical.sum())
    assert len(te.primary_tiles) == 2
    stats = lru.stats()
    assert stats["misses"] == 6 and stats["promoted"] == 2 and stats["transient"] == 4
    # A promotion beyond the budget is refused and changes nothing.
    before = te.primary_tiles
    with pytest.raises(sw.StrideWeaveValueError, match="3 tiles exceed the LRU budget of 2 tiles"):
        te.promote(sw.TileSet([(0,), (1,), (2,)]))
    assert te.primary_tiles == before and lru.stats() == stats
    # One within it makes room, and counts as a use, not a miss.
    te.promote(sw.TileSet([(5,)]))
    assert sw.TileSet([(5,)]).coordinates[0] in te.primary_tiles.coordinates
    assert len(te.primary_tiles) == 2
    te.project(full, sw.TileSelection([[5]])).wait()
    assert lru.stats()["hits"] == stats["hits"] + 1 and lru.stats()["misses"] == 6
    # A write to a tile off the primary tier goes through to the secondary.
    off = next(k for k in range(6) if (k,) not in te.primary_tiles.coordinates)
    full[2 * off] = -7.5
    assert te.tile_state((off,)).location == "secondary"
    assert full[2 * off] == -7.5


def test_lru_byte_budget():
    with pytest.raises(sw.StrideWeaveValueError, match="exactly one"):
        sw.LRUPolicy()
    with pytest.raises(sw.StrideWeaveValueError, match="exactly one"):
        sw.LRUPolicy(2, budget_bytes=64)
    with pytest.raises(sw.StrideWeaveValueError, match="budget_bytes must be at least 1"):
        sw.LRUPolicy(budget_bytes=0)
    lru = sw.LRUPolicy(budget_bytes=20)  # two-element f32 tiles: 8 bytes each
    assert lru.budget_tiles == 0
    with pytest.raises(sw.StrideWeaveRuntimeError, match="attaches"):
        lru.plan(sw.TileSet([(0,)]), "projection")
    te, logical = make(lru)
    assert lru.budget_tiles == 2
    np.testing.assert_array_equal(te.full_tensor().numpy(), logical)
    assert len(te.primary_tiles) <= 2
    with pytest.raises(sw.StrideWeaveValueError, match="7 bytes holds no tile of 8 bytes"):
        make(sw.LRUPolicy(budget_bytes=7))
    # One policy serves one TiledEvictable at a time.
    with pytest.raises(sw.StrideWeaveRuntimeError, match="already serves a TiledEvictable"):
        make(lru)


def test_python_policy_from_several_threads():
    import threading

    rec = Recorder()
    te, logical = make(rec, grid=(8,), tile=(4,))
    full = te.full_tensor()
    errors = []

    def worker(k):
        try:
            for i in range(20):
                tile = (k + i) % 8
                got = te.project(full, sw.TileSelection([[tile]])).wait().numpy()
                np.testing.assert_array_equal(got, logical[4 * tile:4 * tile + 4])
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(rec.calls) == 80
