"""Tensor: (carrier, offset, layout), the autograd identity.

The class here holds the structure, element access and autograd. It knows
neither the ops nor the carrier classes: a tensor finds its carrier's class
through the registry in strideweave._handles, and the modules above attach
the rest of its surface: strideweave._ops the operators (+, *, @, ...) and
relu() / sum(), strideweave._interop numpy(), from_numpy() and the NumPy
and DLPack protocols."""
import numbers
import weakref

import numpy as np

from . import _dtypes
from . import _handles
from ._checks import integer
from ._errors import StrideWeaveIndexError, StrideWeaveTypeError, StrideWeaveValueError
from ._layout import Layout
from ._lib import native as N

_tensor_release = N.sw_tensor_release
_new = object.__new__
# One wrapper per tensor handle that comes back from the library where
# identity matters (await results, gradients).
_tensors = weakref.WeakValueDictionary()


class Tensor:
    """Element `c` of a tensor lives at slot `offset + layout.index(c)` of
    its carrier. Float tensors take part in autograd."""

    __slots__ = ("_h", "_rt", "_carrier", "_layout", "_shape", "_dtype", "__weakref__")

    def __init__(self, carrier, offset, layout):
        if not _handles.is_carrier(carrier):
            raise StrideWeaveTypeError(f"carrier must be a strideweave Carrier, not {type(carrier).__name__}")
        offset = integer(offset, "offset")
        if not isinstance(layout, Layout):
            raise StrideWeaveTypeError(f"layout must be a strideweave.Layout, not {type(layout).__name__}")
        self._h = N.sw_tensor_create(carrier._h, offset, layout._h)
        self._rt = carrier._rt
        self._carrier = carrier
        self._layout = layout
        _tensors[int(self._h)] = self

    @classmethod
    def _adopt(cls, h, rt):
        t = _new(cls)
        t._h = h
        t._rt = rt
        return t

    def __del__(self):
        try:
            _tensor_release(self._h)
        except Exception:
            pass

    # ---- structure ----

    @property
    def carrier(self):
        """The carrier holding the tensor's slots."""
        try:
            return self._carrier
        except AttributeError:
            c = self._carrier = _handles.adopt_carrier(N.sw_tensor_carrier(self._h), self._rt)
            return c

    @property
    def offset(self):
        """The slot of the carrier where coordinate (0, ...) lives."""
        return N.sw_tensor_offset(self._h)

    @property
    def layout(self):
        """The Layout mapping coordinates to slots of the carrier."""
        try:
            return self._layout
        except AttributeError:
            layout = self._layout = Layout._adopt(N.sw_tensor_layout(self._h))
            return layout

    @property
    def shape(self):
        """The top-level extents, a tuple."""
        try:
            return self._shape
        except AttributeError:
            s = self._shape = N.tensor_shape(self._h)
            return s

    @property
    def ndim(self):
        """The rank: the number of top-level modes."""
        return len(self.shape)

    def dim(self):
        """The rank (PyTorch's Tensor.dim(); the ndim property)."""
        return len(self.shape)

    def numel(self):
        """The number of elements."""
        return N.sw_tensor_numel(self._h)

    @property
    def size(self):
        """The number of elements as an int (NumPy's ndarray.size) that can
        also be called as PyTorch's Tensor.size(): t.size() is the shape
        tuple, t.size(dim) one extent (negative dims count from the end)."""
        return Size(self.shape)

    def __len__(self):
        shape = self.shape
        if not shape:
            raise StrideWeaveTypeError("len() of a rank-0 tensor")
        return shape[0]

    @property
    def dtype(self):
        """The element type, a strideweave DType."""
        try:
            return self._dtype
        except AttributeError:
            d = self._dtype = _dtypes.by_code(N.sw_tensor_dtype(self._h))
            return d

    @property
    def version(self):
        """The carrier's version counter: +1 per write."""
        return N.sw_tensor_version(self._h)

    # ---- elements ----

    def __getitem__(self, coord):
        value = N.sw_tensor_get(self._h, _coord(coord))
        return _to_python(value, self.dtype)

    def __setitem__(self, coord, value):
        if isinstance(value, Tensor) or not isinstance(value, (numbers.Real, np.generic)):
            raise StrideWeaveTypeError(f"tensor elements are set from numbers, not {type(value).__name__}")
        N.sw_tensor_set(self._h, _coord(coord), float(value))

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self.numel() != 1:
            raise StrideWeaveValueError(f"item() needs a one-element tensor; this one has {self.numel()}")
        return self[(0,) * self.ndim]

    def tolist(self):
        """The values as nested Python lists."""
        return self.numpy().tolist()

    def permute(self, *perm):
        """The view with the modes in the order `perm`."""
        if len(perm) == 1 and isinstance(perm[0], (list, tuple)):
            perm = tuple(perm[0])
        perm = [integer(p, "permutation entry") for p in perm]
        return Tensor._adopt(N.tensor_permute(self._h, perm), self._rt)

    def transpose(self, axis0, axis1):
        """The view with modes `axis0` and `axis1` swapped."""
        a0 = integer(axis0, "axis0")
        a1 = integer(axis1, "axis1")
        n = self.ndim
        a0, a1 = a0 + n if a0 < 0 else a0, a1 + n if a1 < 0 else a1
        if not (0 <= a0 < n and 0 <= a1 < n):
            raise StrideWeaveIndexError(f"axes ({axis0}, {axis1}) are out of range for rank {n}")
        return Tensor._adopt(N.sw_tensor_transpose(self._h, a0, a1), self._rt)

    @property
    def T(self):
        """The view with the modes reversed (a transpose for rank 2)."""
        return self.permute(tuple(reversed(range(self.ndim))))

    # ---- autograd ----

    @property
    def requires_grad(self):
        """Whether autograd records ops on this tensor; set it (a bool) on a floating leaf."""
        return N.sw_tensor_requires_grad(self._h)

    @requires_grad.setter
    def requires_grad(self, value):
        if not isinstance(value, (bool, np.bool_)):
            raise StrideWeaveTypeError(f"requires_grad must be a bool, not {type(value).__name__}")
        N.sw_tensor_set_requires_grad(self._h, bool(value))

    def __reduce__(self):
        raise StrideWeaveTypeError("a strideweave.Tensor cannot be pickled: it is a view of library memory; "
                                   "pickle t.numpy() and rebuild it with sw.tensor()")

    def requires_grad_(self, requires_grad=True):
        """Sets requires_grad (a bool) and returns the tensor."""
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self):
        """Whether the tensor was not produced by a recorded op."""
        return N.sw_tensor_is_leaf(self._h)

    @property
    def grad(self):
        """The accumulated gradient (a Tensor), or None; assign None to clear it."""
        return adopt_tensor(N.sw_tensor_grad(self._h), self._rt)

    @grad.setter
    def grad(self, value):
        if value is not None:
            raise StrideWeaveTypeError("grad can only be cleared (set to None)")
        N.sw_tensor_clear_grad(self._h)

    def backward(self, cotangent=None, retain_graph=False):
        """Reverse mode from this tensor; no cotangent only for one element."""
        if cotangent is not None and not isinstance(cotangent, Tensor):
            raise StrideWeaveTypeError(f"cotangent must be a Tensor or None, not {type(cotangent).__name__}")
        N.sw_backward(self._h, None if cotangent is None else cotangent._h, bool(retain_graph))

    def __repr__(self):
        try:
            values = self.numpy() if self.numel() <= 64 else None
        except Exception:
            values = None
        head = f"shape={self.shape}, dtype={self.dtype.name}"
        if values is not None:
            body = np.array2string(np.asarray(values), separator=", ", prefix="Tensor(")
            return f"Tensor({body}, {head})"
        return f"Tensor({head})"


class Size(int):
    """The number of elements of a shape (an int, NumPy's ndarray.size),
    callable as PyTorch's Tensor.size: size() is the shape tuple, size(dim)
    the extent of mode `dim`."""

    def __new__(cls, shape):
        n = 1
        for extent in shape:
            n *= extent
        obj = int.__new__(cls, n)
        obj._shape = tuple(shape)
        return obj

    def __call__(self, dim=None):
        """The shape (a tuple of ints), or with `dim` the extent of that mode."""
        shape = self._shape
        if dim is None:
            return shape
        d = integer(dim, "dim")
        n = len(shape)
        if not shape:
            raise StrideWeaveIndexError(f"dimension specified as {d} but the tensor has no dimensions")
        if not -n <= d < n:
            raise StrideWeaveIndexError(f"dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                                        f"but got {d})")
        return shape[d]

    def __reduce__(self):
        return int, (int(self),)


def adopt_tensor(h, rt):
    """The wrapper for a new tensor reference `h` (None for a NULL handle),
    reusing a live wrapper of the same handle."""
    if h is None:
        return None
    existing = _tensors.get(int(h))
    if existing is not None:
        _tensor_release(h)
        return existing
    t = Tensor._adopt(h, rt)
    _tensors[int(h)] = t
    return t


def _coord(coord):
    if isinstance(coord, tuple):
        return coord
    if isinstance(coord, list):
        return tuple(coord)
    return (coord,)


def _to_python(value, dtype):
    if dtype is _dtypes.bool_:
        return bool(value)
    if dtype.is_floating:
        return value
    return int(value)
