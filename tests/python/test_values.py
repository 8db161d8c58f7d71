"""TileSelection, TileSet, ResidencyPlan: immutable values checked before C."""
import itertools

import numpy as np
import pytest

import strideweave as sw
from strideweave.carriers import tiled_evictable as te_mod
from conftest import exact


def test_importable_from_both_paths_as_the_same_objects():
    for name in ("TiledEvictable", "TileSelection", "TileSet", "ResidencyPlan", "ResidencyPolicy",
                 "AwaitProjection", "AwaitResidency", "AwaitMove", "AwaitResult", "TiledResidencyFacet"):
        assert getattr(sw, name) is getattr(te_mod, name), name


# ---- TileSelection ------------------------------------------------------------

def test_select_three_experts_in_router_order():
    sel = sw.TileSelection([[2, 7, 19], [0], [0]])
    assert sel.per_axis == ((2, 7, 19), (0,), (0,))
    assert [c[0] for c in sel.coordinates] == [2, 7, 19]
    assert sel.rank == 3
    assert sel.compact_grid_shape == (3, 1, 1)


def test_include_every_recombined_corner():
    sel = sw.TileSelection([[0, 1], [0, 1]])
    assert set(sel.coordinates) == {(0, 0), (1, 0), (0, 1), (1, 1)}


def test_enumerate_multi_axis_selection_first_mode_fastest():
    sel = sw.TileSelection([[7, 2], [4, 9]])
    assert sel.coordinates == ((7, 4), (2, 4), (7, 9), (2, 9))
    # The same ordinal authority as Shape.encode/decode.
    shape = sw.Shape(*sel.compact_grid_shape)
    for ordinal, coord in enumerate(sel.coordinates):
        c = shape.decode(ordinal)
        assert tuple(sel.per_axis[i][c[i]] for i in range(sel.rank)) == coord


def test_selection_accepts_any_finite_iterable_and_keeps_order():
    gen = (x for x in [5, 1, 3])
    sel = sw.TileSelection(iter([gen, range(2), np.array([4, 0])]))
    assert sel.per_axis == ((5, 1, 3), (0, 1), (4, 0))
    assert all(type(c) is int for axis in sel.per_axis for c in axis)


def test_selection_tile_set_holds_unique_coordinates():
    sel = sw.TileSelection([[1, 0], [2]])
    assert isinstance(sel.tile_set, sw.TileSet)
    assert sel.tile_set == sw.TileSet([(0, 2), (1, 2)])


@pytest.mark.parametrize("per_axis", [
    5, None, itertools.count(), [itertools.count()], [5], [[1.0]], [[True]], [[np.bool_(True)]],
    [["a"]], [[1, 2.5]], "ab", [b"\x01"], [itertools.cycle([1])], [itertools.repeat(1)],
])
def test_selection_type_errors(per_axis):
    with pytest.raises(TypeError) as e:
        sw.TileSelection(per_axis)
    exact(e, sw.StrideWeaveTypeError)


def test_selection_rejects_an_endless_generator():
    def endless():
        while True:
            yield 1

    with pytest.raises(sw.StrideWeaveTypeError):
        sw.TileSelection([endless()])


@pytest.mark.parametrize("per_axis", [[], [[]], [[1, 1]], [[0, -1]], [[0], []]])
def test_selection_value_errors(per_axis):
    with pytest.raises(ValueError) as e:
        sw.TileSelection(per_axis)
    exact(e, sw.StrideWeaveValueError)


def test_selection_is_immutable_hashable_and_equal_by_value():
    axis = [2, 7]
    a = sw.TileSelection([axis])
    axis.append(9)  # mutating the caller's input changes nothing
    b = sw.TileSelection(([2, 7],))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != sw.TileSelection([[7, 2]])
    with pytest.raises(AttributeError):
        a.per_axis = ((1,),)
    with pytest.raises(AttributeError):
        a._per_axis = ()
    assert repr(a) == "TileSelection(per_axis=((2, 7),))"
    assert eval(repr(a), {"TileSelection": sw.TileSelection}) == a


def test_selection_exposes_no_index_map():
    for name in ("Product", "Permutation", "IndexMap", "from_coordinates", "sparse"):
        assert not hasattr(sw.TileSelection, name)


# ---- TileSet -------------------------------------------------------------------

def test_non_product_cache_set_is_valid():
    ts = sw.TileSet([(0, 0), (0, 1), (1, 0)])
    assert len(ts) == 3 and (1, 1) not in ts and (0, 1) in ts


def test_tile_set_orders_first_coordinate_fastest():
    ts = sw.TileSet([(1, 1), (0, 1), (1, 0), (0, 0)])
    assert ts.coordinates == ((0, 0), (1, 0), (0, 1), (1, 1))
    assert ts.coordinates == tuple(sorted(ts.coordinates, key=lambda c: c[::-1]))


def test_empty_tile_set_is_rank_agnostic():
    assert sw.TileSet() == sw.TileSet([]) == sw.TileSet(iter(()))
    assert sw.TileSet().coordinates == () and sw.TileSet().rank is None


@pytest.mark.parametrize("coords", [
    5, [5], [(1.0, 2)], [(True,)], [("a",)], itertools.count(), [itertools.count()], [(0, 1.5)],
    [(np.float32(1),)],
])
def test_tile_set_type_errors(coords):
    with pytest.raises(TypeError) as e:
        sw.TileSet(coords)
    exact(e, sw.StrideWeaveTypeError)


@pytest.mark.parametrize("coords", [[(0,), (0, 1)], [(0, -1)], [(1, 2), (1, 2)], [()]])
def test_tile_set_value_errors(coords):
    with pytest.raises(ValueError) as e:
        sw.TileSet(coords)
    exact(e, sw.StrideWeaveValueError)


def test_tile_set_value_semantics():
    a = sw.TileSet([(1, 0), (0, 0)])
    b = sw.TileSet(iter([[0, 0], np.array([1, 0])]))
    assert a == b and hash(a) == hash(b)
    assert repr(a) == "TileSet(coordinates=((0, 0), (1, 0)))"
    assert eval(repr(a), {"TileSet": sw.TileSet}) == a
    with pytest.raises(AttributeError):
        a.coordinates = ()
    assert a | sw.TileSet([(2, 0)]) == sw.TileSet([(0, 0), (1, 0), (2, 0)])
    assert a - sw.TileSet([(0, 0)]) == sw.TileSet([(1, 0)])


# ---- ResidencyPlan -------------------------------------------------------------

def test_plan_defaults_and_fields():
    p = sw.ResidencyPlan()
    assert p.promote == p.retain == p.evict == sw.TileSet()
    q = sw.ResidencyPlan(promote=sw.TileSet([(1,)]), evict=sw.TileSet([(0,)]))
    assert q.promote == sw.TileSet([(1,)]) and q.retain == sw.TileSet() and q.evict == sw.TileSet([(0,)])
    assert q == sw.ResidencyPlan(sw.TileSet([(1,)]), None, sw.TileSet([(0,)]))
    assert hash(q) == hash(sw.ResidencyPlan(sw.TileSet([(1,)]), None, sw.TileSet([(0,)])))
    assert repr(q) == ("ResidencyPlan(promote=TileSet(coordinates=((1,),)), retain=TileSet(coordinates=()), "
                       "evict=TileSet(coordinates=((0,),)))")
    with pytest.raises(AttributeError):
        q.promote = sw.TileSet()


@pytest.mark.parametrize("kwargs", [
    {"promote": [(1,)]}, {"retain": sw.TileSelection([[1]])}, {"evict": 3},
])
def test_plan_rejects_non_tile_sets(kwargs):
    with pytest.raises(TypeError) as e:
        sw.ResidencyPlan(**kwargs)
    exact(e, sw.StrideWeaveTypeError)


def test_plan_rejects_a_tile_in_two_fields():
    with pytest.raises(ValueError) as e:
        sw.ResidencyPlan(promote=sw.TileSet([(1,)]), retain=sw.TileSet([(1,), (2,)]))
    exact(e, sw.StrideWeaveValueError)


def test_residency_policy_is_a_runtime_checkable_protocol():
    class Mine:
        def plan(self, required, purpose):
            return sw.ResidencyPlan()

    assert isinstance(Mine(), sw.ResidencyPolicy)
    assert not isinstance(object(), sw.ResidencyPolicy)
    assert isinstance(sw.LRUPolicy(2), sw.ResidencyPolicy)
