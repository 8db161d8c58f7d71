"""Shape, Stride, Layout: trees of ints, first mode fastest."""
import pytest

import strideweave as sw
from conftest import exact


def test_shape_encode_decode_first_mode_fastest():
    s = sw.Shape(2, 3)
    assert s.size == 6 and s.rank == 2 and s.extents == (2, 3)
    assert s.encode((1, 0)) == 1 and s.encode((0, 1)) == 2
    assert [s.decode(k) for k in range(6)] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    assert all(s.encode(s.decode(k)) == k for k in range(6))


def test_nested_shape():
    s = sw.Shape(2, [3, 4])
    assert s.modes == (2, (3, 4)) and s.size == 24 and s.extents == (2, 12)
    assert s.encode((1, (2, 1))) == 1 + 2 * (2 + 3 * 1)
    assert s.encode((1, 5)) == 1 + 2 * 5
    assert repr(s) == "Shape(2, (3, 4))"


def test_shape_errors():
    with pytest.raises(IndexError) as e:
        sw.Shape(2, 3).encode((2, 0))
    exact(e, sw.StrideWeaveIndexError)
    with pytest.raises(IndexError):
        sw.Shape(2, 3).decode(6)
    with pytest.raises(ValueError):
        sw.Shape(2, 3).encode((1,))
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.Shape(2.0)
    with pytest.raises(sw.StrideWeaveValueError):
        sw.Shape(-1)


def test_dense_layout():
    layout = sw.Layout.dense(4, 4)
    assert layout.stride == sw.Stride(1, 4)
    assert layout.size == 16 and layout.cosize == 16 and layout.is_injective
    assert layout.index((1, 2)) == 9
    assert layout == sw.Layout(sw.Shape(4, 4), sw.Stride(1, 4))
    assert hash(layout) == hash(sw.Layout((4, 4), (1, 4)))
    assert str(layout) == "(4,4):(1,4)"


def test_within_tile_permutation_layout():
    # A 4x4 tensor in 2x2 tiles, each tile's values contiguous.
    layout = sw.Layout(sw.Shape([2, 2], [2, 2]), sw.Stride([4, 2], [1, 8]))
    assert layout.rank == 2 and layout.size == 16 and layout.is_injective and layout.cosize == 16
    assert layout.index((1, 0)) == 4 and layout.index((2, 0)) == 2 and layout.index((0, 1)) == 1
    assert layout.index(((1, 1), (0, 1))) == 4 + 2 + 8
    assert sorted(layout.index((i, j)) for i in range(4) for j in range(4)) == list(range(16))


def test_layout_properties_and_errors():
    broadcast = sw.Layout((3, 2), (0, 1))
    assert not broadcast.is_injective and broadcast.cosize == 2
    negative = sw.Layout((3,), (-1,))
    assert negative.cosize == 3
    with pytest.raises(sw.StrideWeaveValueError):
        sw.Layout(sw.Shape(2, 2), sw.Stride(1))
    with pytest.raises(sw.StrideWeaveValueError):
        sw.Layout(sw.Shape([2, 2]), sw.Stride(1))
    with pytest.raises(AttributeError):
        broadcast.shape = sw.Shape(1)


def test_rank_one_and_rank_zero_layouts():
    assert sw.Layout(sw.Shape([2, 2]), sw.Stride([1, 2])).rank == 1
    assert sw.Layout(()).size == 1 and sw.Layout(()).rank == 0
