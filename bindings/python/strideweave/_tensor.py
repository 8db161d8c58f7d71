"""Tensor: (carrier, offset, layout), the autograd identity.

The class here defines every method and property of a tensor. The structure,
element access and autograd are computed here; the ops and the NumPy and
DLPack protocols are computed by the modules above, which import this one
(strideweave._ops, _surface and _interop): a method of those calls the
function its module registered in `impl` when it was imported (the package
imports them all before a tensor can exist). A tensor finds its carrier's
class through the registry in strideweave._handles."""
import numbers
import types
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
_DL_CPU = 1  # DLPack's kDLCPU
# One wrapper per tensor handle that comes back from the library where
# identity matters (await results, gradients).
_tensors = weakref.WeakValueDictionary()
# The functions behind the methods computed above this module, by name
# (provide()): strideweave._ops gives matmul, strideweave._interop the NumPy
# and DLPack protocols, strideweave._surface the rest.
impl = types.SimpleNamespace()


def provide(**functions):
    """Registers the functions that Tensor's methods of those names call."""
    vars(impl).update(functions)


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

    def __getitem__(self, key):
        """t[...]: a full integer coordinate reads one element (a Python number);
ints, slices (with steps, negative indices), ... and None give a view."""
        return impl.getitem(self, key)

    def __setitem__(self, key, value):
        """t[...] = value: one element, or every element of the view t[...] (a
number, or a Tensor broadcast to it)."""
        impl.setitem(self, key, value)

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

    # ---- NumPy and DLPack (strideweave._interop) ----

    def numpy(self):
        """A NumPy array sharing memory where the carrier and layout allow,
        else a copy (tiled or compressed carriers, nested modes, bfloat16).
        A view of a read-only carrier is read-only."""
        return impl.to_numpy(self)

    @staticmethod
    def from_numpy(array, carrier_class=None, *, runtime=None):
        """strideweave.from_numpy: a tensor sharing the array's memory on a CPU
        carrier where the array allows, else a copy."""
        return impl.from_numpy(array, carrier_class, runtime=runtime)

    def __array__(self, dtype=None, copy=None):
        return impl.array(self, dtype, copy)

    @property
    def __array_interface__(self):
        return impl.array_interface(self)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """The DLPack capsule of the array-API protocol (strideweave._interop's dlpack_export)."""
        return impl.dlpack_export(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        return (_DL_CPU, 0)

    __array_priority__ = 1000  # NumPy defers binary operators with a Tensor to it

    # ---- operators (strideweave._surface; @ strideweave._ops) ----

    def __add__(self, other):
        """self + other, broadcast and promoted (either side may be a number)."""
        return impl.add(self, other)

    def __radd__(self, other):
        """other + self (the reflected form)."""
        return impl.add(other, self)

    def __mul__(self, other):
        """self * other elementwise, broadcast and promoted (either side may be a number)."""
        return impl.mul(self, other)

    def __rmul__(self, other):
        """other * self (the reflected form)."""
        return impl.mul(other, self)

    def __sub__(self, other):
        """self - other. A TiledEvictable tensor, which takes only the six direct ops,
        computes it as self + (-1 * other)."""
        return impl.operator_sub(self, other)

    def __rsub__(self, other):
        """other - self (the reflected form)."""
        return impl.operator_sub(other, self)

    def __truediv__(self, other):
        """self / other, true division (sw.div)."""
        return impl.div(self, other)

    def __rtruediv__(self, other):
        """other / self (the reflected form)."""
        return impl.div(other, self)

    def __pow__(self, other):
        """self ** other elementwise (sw.pow)."""
        return impl.pow(self, other)

    def __rpow__(self, other):
        """other ** self (the reflected form)."""
        return impl.pow(other, self)

    def __matmul__(self, b, *, out_dtype=None):
        """self @ b: sw.matmul(self, b)."""
        return impl.matmul(self, b, out_dtype=out_dtype)

    def __rmatmul__(self, other):
        """other @ self (the reflected form)."""
        return impl.matmul(other, self)

    def __neg__(self):
        """-self; a TiledEvictable tensor computes it as -1 * self."""
        return impl.operator_neg(self)

    def __abs__(self):
        """abs(self): |self| elementwise."""
        return impl.abs(self)

    def __eq__(self, other):
        """self == other elementwise (a bool tensor); with an object that is
        neither a Tensor nor a number, False, as Python's default."""
        return impl.operator_eq(self, other)

    def __ne__(self, other):
        """self != other elementwise (a bool tensor); with an object that is
        neither a Tensor nor a number, True."""
        return impl.operator_ne(self, other)

    def __lt__(self, other):
        return impl.lt(self, other)

    def __le__(self, other):
        return impl.le(self, other)

    def __gt__(self, other):
        return impl.gt(self, other)

    def __ge__(self, other):
        return impl.ge(self, other)

    # Elementwise == makes value hashing meaningless: tensors hash by identity, as in PyTorch.
    __hash__ = object.__hash__

    def __iadd__(self, other):
        return impl.add_(self, other)

    def __isub__(self, other):
        return impl.sub_(self, other)

    def __imul__(self, other):
        return impl.mul_(self, other)

    def __itruediv__(self, other):
        return impl.div_(self, other)

    def __ipow__(self, other):
        return impl.pow_(self, other)

    def __bool__(self):
        """bool(t): the one element's truth; ValueError (ambiguous) for more elements."""
        return impl.to_bool(self)

    def __float__(self):
        """float(t) of a one-element tensor."""
        return impl.to_float(self)

    def __int__(self):
        """int(t) of a one-element tensor."""
        return impl.to_int(self)

    def __index__(self):
        """operator.index(t) of a one-element integer tensor."""
        return impl.to_index(self)

    # ---- in place (strideweave._surface) ----

    def add_(self, other):
        """self += other in place (one version step); see sw_binary_inplace for the rules."""
        return impl.add_(self, other)

    def sub_(self, other):
        """self -= other in place."""
        return impl.sub_(self, other)

    def mul_(self, other):
        """self *= other in place."""
        return impl.mul_(self, other)

    def div_(self, other):
        """self /= other in place (TypeError for an integer tensor)."""
        return impl.div_(self, other)

    def pow_(self, other):
        """self **= other in place."""
        return impl.pow_(self, other)

    def fill_(self, value):
        """Every element = value, in place (one version step)."""
        return impl.fill_(self, value)

    def zero_(self):
        """Every element = 0, in place."""
        return impl.zero_(self)

    def copy_(self, source):
        """self = source (broadcast, converted to self's dtype), in place;
        differentiable with respect to `source`."""
        return impl.copy_(self, source)

    # ---- conversions, views, copies (strideweave._surface) ----

    @property
    def device(self):
        """Where the tensor's values are computed, as a string: "cpu" (a CPU or
        Host carrier), "vulkan:0" (a Vulkan carrier), "file" or "zstd" (a
        storage carrier); a TiledEvictable tensor names its primary tier's."""
        return impl.device(self)

    def astype(self, dtype):
        """The values converted to `dtype`: the tensor itself when it has that
        dtype, else a copy (floating to integer truncates toward zero; see
        sw_tensor_to_dtype). Differentiable between floating dtypes."""
        return impl.astype(self, dtype)

    def to(self, dtype):
        """t.to(dtype): as astype (carriers are changed with sw.move_async)."""
        return impl.astype(self, dtype)

    def float(self):
        """t.astype(sw.float32), as PyTorch's Tensor.float(): `t` itself when it already is."""
        return impl.astype(self, _dtypes.float32)

    def double(self):
        """t.astype(sw.float64), as PyTorch's Tensor.double(): `t` itself when it already is."""
        return impl.astype(self, _dtypes.float64)

    def half(self):
        """t.astype(sw.float16), as PyTorch's Tensor.half(): `t` itself when it already is."""
        return impl.astype(self, _dtypes.float16)

    def bfloat16(self):
        """t.astype(sw.bfloat16), as PyTorch's Tensor.bfloat16(): `t` itself when it already is."""
        return impl.astype(self, _dtypes.bfloat16)

    def reshape(self, *shape, order="C"):
        """The elements as a tensor of `shape` (reshape(2, 3) or reshape((2,
        3)); one entry may be -1), read and placed in row-major order
        (order="C", the default) or first mode fastest (order="F"); a view
        where one exists, else a copy (sw.reshape)."""
        return impl.reshape(self, *shape, order=order)

    def view(self, *shape, order="C"):
        """As reshape, but always a view of the tensor's slots, as
        torch.Tensor.view: RuntimeError where the shape cannot be laid over
        its strides without a copy (sw.view)."""
        return impl.view(self, *shape, order=order)

    def flatten(self, start_dim=0, end_dim=-1, *, order="C"):
        """reshape merging modes start_dim .. end_dim into one (sw.flatten)."""
        return impl.flatten(self, start_dim, end_dim, order=order)

    def unsqueeze(self, axis=None, *, dim=None):
        """The view with a mode of extent 1 inserted before `axis`."""
        return impl.unsqueeze(self, axis, dim=dim)

    def squeeze(self, axis=None, *, dim=None):
        """The view without modes of extent 1 (only the listed ones, if any)."""
        return impl.squeeze(self, axis, dim=dim)

    def expand(self, *shape):
        """The broadcast view of `shape` (-1 keeps a mode); in-place writes to it
        are refused (ValueError)."""
        return impl.expand(self, *shape)

    def contiguous(self):
        """The tensor itself when dense, else a dense copy."""
        return impl.contiguous(self)

    def clone(self):
        """A dense copy (differentiable)."""
        return impl.clone(self)

    def detach(self):
        """A view outside autograd (no history, no requires_grad)."""
        return impl.detach(self)

    # ---- elementwise (strideweave._surface) ----

    def relu(self):
        """max(t, 0) elementwise (every dtype but bool)."""
        return impl.relu(self)

    def neg(self):
        """-t elementwise (every dtype but bool; unsigned wraps)."""
        return impl.neg(self)

    def abs(self):
        """|t| elementwise (every dtype but bool)."""
        return impl.abs(self)

    def exp(self):
        """e**t elementwise; integer and bool tensors give float32."""
        return impl.exp(self)

    def log(self):
        """The natural logarithm elementwise; integer and bool tensors give float32."""
        return impl.log(self)

    def sqrt(self):
        """The square root elementwise; integer and bool tensors give float32."""
        return impl.sqrt(self)

    def rsqrt(self):
        """1 / sqrt(t) elementwise; integer and bool tensors give float32."""
        return impl.rsqrt(self)

    def silu(self):
        """t * sigmoid(t) elementwise (PyTorch's silu)."""
        return impl.silu(self)

    def gelu(self):
        """t * Phi(t) elementwise, the exact erf form (PyTorch's approximate='none')."""
        return impl.gelu(self)

    def sigmoid(self):
        """1 / (1 + exp(-t)) elementwise."""
        return impl.sigmoid(self)

    def tanh(self):
        """tanh(t) elementwise."""
        return impl.tanh(self)

    def sub(self, b):
        """self - b, broadcast and promoted (b may be a number)."""
        return impl.sub(self, b)

    def div(self, b):
        """self / b, true division: integer and bool operands give float32."""
        return impl.div(self, b)

    def pow(self, b):
        """self ** b elementwise (integers exact; a negative integer exponent is ValueError)."""
        return impl.pow(self, b)

    def maximum(self, b):
        """max(self, b) elementwise, NaN if either is."""
        return impl.maximum(self, b)

    def minimum(self, b):
        """min(self, b) elementwise, NaN if either is."""
        return impl.minimum(self, b)

    def eq(self, b):
        """self == b elementwise, a bool tensor."""
        return impl.eq(self, b)

    def ne(self, b):
        """self != b elementwise, a bool tensor."""
        return impl.ne(self, b)

    def lt(self, b):
        """self < b elementwise, a bool tensor."""
        return impl.lt(self, b)

    def le(self, b):
        """self <= b elementwise, a bool tensor."""
        return impl.le(self, b)

    def gt(self, b):
        """self > b elementwise, a bool tensor."""
        return impl.gt(self, b)

    def ge(self, b):
        """self >= b elementwise, a bool tensor."""
        return impl.ge(self, b)

    # ---- reductions, softmax, selection, index ops (strideweave._surface) ----

    def sum(self, axis=None, keepdims=None, *, dim=None, keepdim=None, axes=None):
        """The sum over `axis` (all axes when None). float32 and float64 keep
        their dtype; integer and bool sums are int64, half sums round once."""
        return impl.sum(self, axis, keepdims, dim=dim, keepdim=keepdim, axes=axes)

    def mean(self, axis=None, keepdims=None, *, dim=None, keepdim=None):
        """The mean over `axis` (all axes when None; floating dtypes)."""
        return impl.mean(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def amax(self, axis=None, keepdims=None, *, dim=None, keepdim=None):
        """The max over `axis` (all axes when None), values only (NumPy's max, PyTorch's amax)."""
        return impl.amax(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def amin(self, axis=None, keepdims=None, *, dim=None, keepdim=None):
        """The min over `axis` (all axes when None), values only."""
        return impl.amin(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def max(self, axis=None, keepdims=None, *, dim=None, keepdim=None):
        """The max: over `axis` (None: all) as NumPy's, values only; with dim= as
        PyTorch's, a (values, indices) pair along that dim (first index reaching it)."""
        return impl.max(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def min(self, axis=None, keepdims=None, *, dim=None, keepdim=None):
        """The min: over `axis` (None: all) as NumPy's, values only; with dim= as
        PyTorch's, a (values, indices) pair along that dim."""
        return impl.min(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def argmax(self, axis=None, keepdims=None, *, dim=None, keepdim=None):
        """The int64 index of the first max along `axis` (the flat row-major
        index of the flattened tensor when None, as NumPy's and PyTorch's)."""
        return impl.argmax(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def argmin(self, axis=None, keepdims=None, *, dim=None, keepdim=None):
        """The int64 index of the first min along `axis` (flattened when None)."""
        return impl.argmin(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def any(self):
        """Whether any element is nonzero (True)."""
        return impl.any(self)

    def all(self):
        """Whether every element is nonzero (True)."""
        return impl.all(self)

    def softmax(self, axis=None, *, dim=None):
        """exp(t) / sum(exp(t)) along `axis` (default the last), computed
        stably; floating dtypes."""
        return impl.softmax(self, axis, dim=dim)

    def log_softmax(self, axis=None, *, dim=None):
        """log(softmax(t)) along `axis` (default the last), computed as
        (t - max) - log(sum(exp(t - max)))."""
        return impl.log_softmax(self, axis, dim=dim)

    def topk(self, k, axis=None, *, dim=None):
        """The k largest values along `axis` (default the last), sorted
        descending, ties to the lower index, and their int64 indices: a
        (values, indices) pair."""
        return impl.topk(self, k, axis, dim=dim)

    def index_select(self, axis, index):
        """The rows along `axis` picked by `index` (an int32 / int64 tensor of
        rank 0 or 1), as PyTorch's index_select."""
        return impl.index_select(self, axis, index)

    def gather(self, axis, index):
        """out[c] = self[c with c[axis] = index[c]] (PyTorch's gather)."""
        return impl.gather(self, axis, index)

    def index_add(self, axis, index, source):
        """A copy with the rows of `source` added at the rows `index` picks
        along `axis` (repeated indices accumulate)."""
        return impl.index_add(self, axis, index, source)

    def scatter_add(self, axis, index, source):
        """A copy with source[c] added at c with c[axis] = index[c] (PyTorch's
        scatter_add; the adjoint of gather)."""
        return impl.scatter_add(self, axis, index, source)

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


def element_get(t, coord):
    """The element at a full integer coordinate, as a Python number."""
    value = N.sw_tensor_get(t._h, _coord(coord))
    return _to_python(value, t.dtype)


def element_set(t, coord, value):
    """Writes the element at a full integer coordinate (a number)."""
    if isinstance(value, Tensor) or not isinstance(value, (numbers.Real, np.generic)):
        raise StrideWeaveTypeError(f"tensor elements are set from numbers, not {type(value).__name__}")
    N.sw_tensor_set(t._h, _coord(coord), float(value))


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
