"""Shape, Stride and Layout: CuTe-style trees of ints, first mode fastest."""
import math
import re

from ._checks import integer
from ._errors import StrideWeaveIndexError, StrideWeaveValueError
from ._lib import native as N


def _tree(mode, what, nonnegative):
    if isinstance(mode, (list, tuple)):
        if not mode:
            raise StrideWeaveValueError(f"{what}: a nested mode must not be empty")
        return tuple(_tree(m, what, nonnegative) for m in mode)
    value = integer(mode, f"{what} entry")
    if nonnegative and value < 0:
        raise StrideWeaveValueError(f"{what}: extents must be >= 0, got {value}")
    return value


def _extent(mode):
    return math.prod(_extent(m) for m in mode) if isinstance(mode, tuple) else mode


def _leaves(mode):
    if isinstance(mode, tuple):
        for m in mode:
            yield from _leaves(m)
    else:
        yield mode


def _text(mode):
    return "(" + ",".join(_text(m) for m in mode) + ")" if isinstance(mode, tuple) else str(mode)


def _congruent(a, b):
    if isinstance(a, tuple) != isinstance(b, tuple):
        return False
    return not isinstance(a, tuple) or (len(a) == len(b) and all(map(_congruent, a, b)))


def _encode_mode(mode, c, what):
    """The within-mode ordinal of coordinate c (an int or a congruent tuple)."""
    if isinstance(c, (list, tuple)):
        if not isinstance(mode, tuple) or len(c) != len(mode):
            raise StrideWeaveValueError(f"{what}: coordinate {c!r} is not congruent with mode {mode!r}")
        ordinal, scale = 0, 1
        for m, ci in zip(mode, c):
            ordinal += _encode_mode(m, ci, what) * scale
            scale *= _extent(m)
        return ordinal
    value = integer(c, f"{what} coordinate")
    extent = _extent(mode)
    if not 0 <= value < extent:
        raise StrideWeaveIndexError(f"{what}: coordinate {value} is out of range for extent {extent}")
    return value


class _IntTree:
    """Shared by Shape and Stride: an immutable tuple of modes."""

    __slots__ = ("_modes",)
    _nonnegative = True

    def __init__(self, *modes):
        object.__setattr__(self, "_modes", tuple(_tree(m, type(self).__name__, self._nonnegative) for m in modes))

    @classmethod
    def _of(cls, modes):
        obj = object.__new__(cls)
        object.__setattr__(obj, "_modes", modes)
        return obj

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    @property
    def modes(self):
        """The top-level modes: ints and nested trees."""
        return self._modes

    @property
    def rank(self):
        """The number of top-level modes."""
        return len(self._modes)

    def __len__(self):
        return len(self._modes)

    def __iter__(self):
        return iter(self._modes)

    def __getitem__(self, i):
        """The top-level mode `i` (an int or a nested tree)."""
        return self._modes[i]

    def __eq__(self, other):
        if type(other) is type(self):
            return self._modes == other._modes
        if isinstance(other, tuple):
            return self._modes == other
        return NotImplemented

    def __hash__(self):
        return hash((type(self).__name__, self._modes))

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(map(repr, self._modes))})"


class Shape(_IntTree):
    """`Shape(2, [3, 4])`: top-level modes, each an extent or a nested tuple."""

    __slots__ = ()

    @property
    def extents(self):
        """The extent of each top-level mode."""
        return tuple(_extent(m) for m in self._modes)

    @property
    def size(self):
        """The number of coordinates: the product of the extents."""
        return math.prod(_extent(m) for m in self._modes)

    def encode(self, coord):
        """First-mode-fastest ordinal of a per-mode coordinate."""
        coord = _coordinate(coord, self.rank, "Shape.encode")
        ordinal, scale = 0, 1
        for mode, c in zip(self._modes, coord):
            ordinal += _encode_mode(mode, c, "Shape.encode") * scale
            scale *= _extent(mode)
        return ordinal

    def decode(self, ordinal):
        """The per-mode coordinate of a first-mode-fastest ordinal."""
        ordinal = integer(ordinal, "ordinal")
        if not 0 <= ordinal < self.size:
            raise StrideWeaveIndexError(f"ordinal {ordinal} is out of range for size {self.size}")
        out = []
        for e in self.extents:
            out.append(ordinal % e)
            ordinal //= e
        return tuple(out)


class Stride(_IntTree):
    """`Stride(1, [2, 8])`: congruent with a Shape; strides may be negative."""

    __slots__ = ()
    _nonnegative = False


def _coordinate(coord, rank, what):
    if isinstance(coord, (list, tuple)):
        coord = tuple(coord)
    else:
        coord = (coord,)
    if len(coord) != rank:
        raise StrideWeaveValueError(f"{what}: coordinate has {len(coord)} entries; the rank is {rank}")
    return coord


_TOKEN = re.compile(r"\s*(-?\d+|[(),:])")


def _parse_tree(text):
    """Parses the C library's layout text "(4,(2,2)):(1,(4,8))" into trees."""
    tokens = _TOKEN.findall(text)
    pos = 0

    def tree():
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok != "(":
            return int(tok)
        children = []
        while tokens[pos] != ")":
            children.append(tree())
            if tokens[pos] == ",":
                pos += 1
        pos += 1
        return tuple(children)

    shape = tree()
    pos += 1  # ':'
    stride = tree()
    return shape, stride


class Layout:
    """`Layout(shape, stride)`: index(coord) = sum of leaf coordinate * stride."""

    __slots__ = ("_h", "_shape", "_stride", "__weakref__")

    def __init__(self, shape, stride=None):
        if not isinstance(shape, Shape):
            shape = Shape(*shape) if isinstance(shape, (list, tuple)) else Shape(shape)
        if stride is None:
            stride = _dense_strides(shape)
        elif not isinstance(stride, Stride):
            stride = Stride(*stride) if isinstance(stride, (list, tuple)) else Stride(stride)
        if len(shape.modes) != len(stride.modes) or not all(map(_congruent, shape.modes, stride.modes)):
            raise StrideWeaveValueError(f"shape {shape!r} and stride {stride!r} are not congruent")
        object.__setattr__(self, "_shape", shape)
        object.__setattr__(self, "_stride", stride)
        object.__setattr__(self, "_h", _make_handle(shape.modes, stride.modes))

    @classmethod
    def _flat(cls, shape, stride):
        """Layout(shape, stride) for tuples of ints already known to be
        valid (extents >= 0, one stride each): no checks."""
        obj = object.__new__(cls)
        object.__setattr__(obj, "_shape", Shape._of(shape))
        object.__setattr__(obj, "_stride", Stride._of(stride))
        object.__setattr__(obj, "_h", N.layout_create(shape, stride))
        return obj

    @classmethod
    def _adopt(cls, h):
        """A Layout over a new sw_layout_t reference."""
        shape, stride = _parse_tree(N.layout_to_string(h))
        obj = object.__new__(cls)
        if isinstance(shape, tuple):
            shape_modes, stride_modes = shape, stride
        else:
            shape_modes, stride_modes = (shape,), (stride,)
        object.__setattr__(obj, "_shape", Shape._of(shape_modes))
        object.__setattr__(obj, "_stride", Stride._of(stride_modes))
        object.__setattr__(obj, "_h", h)
        return obj

    @staticmethod
    def dense(*extents):
        """First-mode-fastest strides: dense(4, 4) is (4, 4):(1, 4)."""
        if len(extents) == 1 and isinstance(extents[0], (list, tuple)):
            extents = tuple(extents[0])
        return Layout(Shape(*extents))

    def __setattr__(self, name, value):
        raise AttributeError("Layout is immutable")

    def __del__(self):
        try:
            N.sw_layout_release(self._h)
        except Exception:
            pass

    @property
    def shape(self):
        """The Shape tree of the layout."""
        return self._shape

    @property
    def stride(self):
        """The Stride tree of the layout."""
        return self._stride

    @property
    def rank(self):
        """The number of top-level modes."""
        return self._shape.rank

    @property
    def size(self):
        """The number of coordinates (elements)."""
        return self._shape.size

    @property
    def cosize(self):
        """One past the largest slot index the layout reaches (0 when empty)."""
        return N.sw_layout_cosize(self._h)

    @property
    def is_injective(self):
        """Whether no two coordinates reach the same slot."""
        return N.sw_layout_is_injective(self._h)

    def index(self, coord):
        """The slot index of coordinate `coord` (one int per mode, or an ordinal)."""
        coord = _coordinate(coord, self.rank, "Layout.index")
        if all(type(c) is int for c in coord):
            return N.sw_layout_index(self._h, coord)
        leaves = []
        for mode, c in zip(self._shape.modes, coord):
            leaves.extend(_leaf_coordinate(mode, _encode_mode(mode, c, "Layout.index")))
        return N.sw_layout_index(self._h, leaves)

    def __eq__(self, other):
        if not isinstance(other, Layout):
            return NotImplemented
        return self._shape == other._shape and self._stride == other._stride

    def __hash__(self):
        return hash((self._shape, self._stride))

    def __repr__(self):
        return f"Layout({self._shape!r}, {self._stride!r})"

    def __str__(self):
        return N.layout_to_string(self._h)


def _leaf_coordinate(mode, ordinal):
    """Decodes a within-mode ordinal into the mode's leaf coordinates."""
    if not isinstance(mode, tuple):
        return [ordinal]
    out = []
    for m in mode:
        e = _extent(m)
        out.extend(_leaf_coordinate(m, ordinal % e))
        ordinal //= e
    return out


def _dense_strides(shape):
    scale = 1

    def build(mode):
        nonlocal scale
        if isinstance(mode, tuple):
            return tuple(build(m) for m in mode)
        s = scale
        scale *= mode
        return s

    return Stride._of(tuple(build(m) for m in shape.modes))


def _make_handle(shape_modes, stride_modes):
    if all(type(m) is int for m in shape_modes):
        return N.layout_create(shape_modes, stride_modes)
    return N.sw_layout_parse(f"{_text(shape_modes)}:{_text(stride_modes)}")


def flat_strides(layout):
    """One element stride per top-level mode, or None when a nested mode is not
    a single arithmetic progression (NumPy and DLPack views need one)."""
    shapes, strides = layout.shape.modes, layout.stride.modes
    if all(type(m) is int for m in shapes):
        return tuple(0 if e == 1 else s for e, s in zip(shapes, strides))
    out = []
    for shape, stride in zip(shapes, strides):
        leaves = [(e, s) for e, s in zip(_leaves(shape), _leaves(stride)) if e != 1]
        if not leaves:
            out.append(0)
            continue
        for (e0, s0), (_, s1) in zip(leaves, leaves[1:]):
            if s1 != s0 * e0:
                return None
        out.append(leaves[0][1])
    return tuple(out)
