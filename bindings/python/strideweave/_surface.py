"""The tensor surface beyond the six central ops: constructors, dtype
conversion, views and indexing, unary / binary / comparison ops with
NumPy-PyTorch type promotion, reductions, softmax, top-k, index ops,
cat / stack and in-place forms, as functions (sw.exp(t)) and as Tensor
methods and operators (t.exp(), t - u, t / 2, t < 0, t += 1).

Axis keywords: every function taking one axis accepts ``axis=`` (NumPy) or
``dim=`` (PyTorch); reductions take ``keepdims=`` or ``keepdim=``.

Element order: ``reshape``, ``view`` and ``flatten`` read and place the
elements in row-major order, as NumPy's and PyTorch's do: ``t.reshape(3, 2)``
matches ``a.reshape(3, 2)``. ``order="F"`` takes the first-mode-fastest order
of the C ABI's sw_tensor_reshape instead (NumPy's ``order='F'``)."""
import builtins
import collections
import numbers

import numpy as np

from . import _dtypes
from . import _runtime
from ._checks import finite, integer
from ._coerce import as_tensor
from ._errors import (StrideWeaveIndexError, StrideWeaveNotImplementedError, StrideWeaveRuntimeError,
                      StrideWeaveTypeError, StrideWeaveValueError)
from ._interop import from_numpy
from ._layout import flat_strides
from ._lib import native as N
from ._ops import _is_number, _wrap, add, mul, reduce_sum
from ._ops import relu as _relu
from ._tensor import Tensor, element_get, element_set, provide
from .carriers import TiledEvictable

MinMax = collections.namedtuple("MinMax", ["values", "indices"])
TopK = collections.namedtuple("TopK", ["values", "indices"])


# ---- argument helpers ------------------------------------------------------------------------


def _tensor(x, op):
    return x if type(x) is Tensor else as_tensor(x, op)


def _one_axis(axis, dim, default, op):
    if axis is not None and dim is not None:
        raise StrideWeaveTypeError(f"{op}: pass axis= or dim=, not both")
    value = axis if axis is not None else dim
    if value is None:
        return default
    return integer(value, f"{op}: axis")


def _keep(keepdims, keepdim):
    if keepdims is not None and keepdim is not None:
        raise StrideWeaveTypeError("pass keepdims= or keepdim=, not both")
    value = keepdims if keepdims is not None else keepdim
    if value is None:
        return False
    if not isinstance(value, (bool, np.bool_, numbers.Integral)):
        raise StrideWeaveTypeError(f"keepdims must be a bool, not {type(value).__name__}")
    return bool(value)


def _axes(axis, dim, op):
    if axis is not None and dim is not None:
        raise StrideWeaveTypeError(f"{op}: pass axis= or dim=, not both")
    value = axis if axis is not None else dim
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return tuple(integer(a, f"{op}: axis") for a in value)
    return (integer(value, f"{op}: axis"),)


def _shape_args(shape, what):
    """shape given as f(2, 3) or f((2, 3)) / f([2, 3])."""
    if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
        shape = finite(shape[0], what)
    return tuple(integer(n, what) for n in shape)


def _dtype_or(dtype, default):
    return default if dtype is None else as_dtype(dtype)


def as_dtype(value):
    """A StrideWeave dtype from a StrideWeave dtype, a NumPy dtype or type
    (np.float32), a name ("float32"), a torch dtype (torch.float32) or a
    Python type (float: float64, int: int64, bool: bool_); TypeError naming
    the value otherwise."""
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        name = str(value).rpartition(".")[2]
        name = {"bool": "bool", "half": "float16", "float": "float32", "double": "float64",
                "long": "int64", "int": "int32"}.get(name, name)
        try:
            return _dtypes.by_name(name)
        except KeyError:
            raise StrideWeaveTypeError(f"{value!r} has no StrideWeave counterpart") from None
    if value is float:
        return _dtypes.float64
    if value is int:
        return _dtypes.int64
    if value is None or isinstance(value, (numbers.Number, Tensor)):
        raise StrideWeaveTypeError(f"dtype must be a StrideWeave, NumPy or torch dtype or a dtype name, "
                                   f"not {value!r}")
    return _dtypes.as_dtype(value)


# ---- constructors ---------------------------------------------------------------------------


def zeros(*shape, dtype=None, runtime=None):
    """A zero-filled CPU tensor: zeros(2, 3) or zeros((2, 3)); dtype float32
    by default."""
    d = _dtype_or(dtype, _dtypes.float32)
    rt = _runtime.resolve(runtime)
    return Tensor._adopt(N.sw_tensor_zeros(rt._h, d.code, _shape_args(shape, "shape")), rt)


def empty(*shape, dtype=None, runtime=None):
    """A new CPU tensor (zero-filled: StrideWeave never hands out
    uninitialised memory)."""
    return zeros(*shape, dtype=dtype, runtime=runtime)


def ones(*shape, dtype=None, runtime=None):
    """A CPU tensor of ones; dtype float32 by default."""
    return full(_shape_args(shape, "shape"), 1, dtype=_dtype_or(dtype, _dtypes.float32), runtime=runtime)


def full(shape, fill_value, *, dtype=None, runtime=None):
    """A CPU tensor of `shape` with every element `fill_value`. The default
    dtype follows the value as PyTorch's: bool, int64 for an int, float32
    for a float."""
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    shape = _shape_args((shape,), "shape")
    if dtype is None:
        if isinstance(fill_value, (bool, np.bool_)):
            dtype = _dtypes.bool_
        elif isinstance(fill_value, numbers.Integral):
            dtype = _dtypes.int64
        else:
            dtype = _dtypes.float32
    d = as_dtype(dtype)
    if not isinstance(fill_value, (numbers.Real, np.generic)):
        raise StrideWeaveTypeError(f"full: fill_value must be a number, not {type(fill_value).__name__}")
    rt = _runtime.resolve(runtime)
    return Tensor._adopt(N.sw_tensor_full(rt._h, d.code, shape, float(fill_value)), rt)


def arange(start, stop=None, step=1, *, dtype=None, runtime=None):
    """start, start + step, ... before stop (arange(n) is 0 .. n - 1), as
    NumPy's and PyTorch's; int64 when every argument is an int, else
    float32, unless `dtype` says otherwise."""
    if stop is None:
        start, stop = 0, start
    for name, v in (("start", start), ("stop", stop), ("step", step)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, np.generic)):
            raise StrideWeaveTypeError(f"arange: {name} must be a number, not {type(v).__name__}")
    if dtype is None:
        ints = all(isinstance(v, numbers.Integral) for v in (start, stop, step))
        dtype = _dtypes.int64 if ints else _dtypes.float32
    d = as_dtype(dtype)
    rt = _runtime.resolve(runtime)
    return Tensor._adopt(N.sw_tensor_arange(rt._h, d.code, float(start), float(stop), float(step)), rt)


def tensor(data, *, dtype=None, runtime=None):
    """A new CPU tensor holding a copy of `data` (nested lists, a NumPy
    array, a number or a Tensor). Without `dtype`, Python floats give
    float32, ints int64 and bools bool_ (PyTorch's defaults); a NumPy array
    keeps its dtype."""
    if isinstance(data, Tensor):
        return data.clone().detach() if dtype is None else data.astype(dtype).clone().detach()
    array = np.array(data, copy=True)
    if dtype is None:
        if array.dtype == np.float64 and not isinstance(data, np.ndarray):
            array = array.astype(np.float32)
        elif array.dtype.kind in "iu" and array.dtype != np.uint8 and not isinstance(data, np.ndarray):
            array = array.astype(np.int64)
        d = None
    else:
        d = as_dtype(dtype)
    if array.dtype.kind not in "biuf":
        raise StrideWeaveTypeError(f"tensor: data of NumPy dtype {array.dtype} has no StrideWeave counterpart")
    if d is not None and d.is_quantized:
        # Quantized from float32 values (the quantizers' input).
        return from_numpy(np.asfortranarray(array, dtype=np.float32), runtime=runtime).astype(d)
    if d is not None and d is not _dtypes.bfloat16:
        array = array.astype(d.numpy)
        d = None
    if d is _dtypes.bfloat16:
        t = from_numpy(array.astype(np.float32), runtime=runtime)
        return t.astype(_dtypes.bfloat16)
    return from_numpy(array, runtime=runtime)


def _random(shape, dist, p0, p1, seed, dtype, runtime):
    shape = _shape_args(shape, "shape")
    seed = integer(seed, "seed")
    if not 0 <= seed < 1 << 64:
        raise StrideWeaveValueError(f"seed must be in [0, 2**64), got {seed}")
    d = _dtype_or(dtype, _dtypes.float32)
    rt = _runtime.resolve(runtime)
    return Tensor._adopt(N.tensor_random(rt._h, dist, d.code, seed, float(p0), float(p1), shape), rt)


def rand(*shape, seed=0, low=0.0, high=1.0, dtype=None, runtime=None):
    """Uniform values in [low, high) of a floating dtype (float32 by
    default). The generator is counter based: a seed gives the same values
    on every machine and thread count (not NumPy's or PyTorch's values)."""
    return _random(shape, N.SW_RANDOM_UNIFORM, low, high, seed, dtype, runtime)


def randn(*shape, seed=0, mean=0.0, std=1.0, dtype=None, runtime=None):
    """Normal values (mean, std) of a floating dtype (float32 by default);
    seeded as rand()."""
    return _random(shape, N.SW_RANDOM_NORMAL, mean, std, seed, dtype, runtime)


# ---- conversions, views, copies ---------------------------------------------------------------


def astype(t, dtype):
    """The values converted to `dtype`: `t` itself when it has that dtype,
    else a copy (floating to integer truncates toward zero; see
    sw_tensor_to_dtype). Differentiable between floating dtypes."""
    d = as_dtype(dtype)
    t = _tensor(t, "astype")
    return _wrap(N.sw_tensor_to_dtype(t._h, d.code), t)


_DEVICE_NAMES = {N.SW_CARRIER_CPU: "cpu", N.SW_CARRIER_HOST: "cpu", N.SW_CARRIER_FILE: "file",
                 N.SW_CARRIER_ZSTD: "zstd", N.SW_CARRIER_VULKAN: "vulkan:0", N.SW_CARRIER_REMOTE: "remote"}


def _device(self):
    """Where the tensor's values are computed, as a string: "cpu" (a CPU or
    Host carrier), "vulkan:0" (a Vulkan carrier), "file" or "zstd" (a
    storage carrier); a TiledEvictable tensor names its primary tier's."""
    carrier = self.carrier
    if isinstance(carrier, TiledEvictable):
        carrier = carrier.primary
    return _DEVICE_NAMES.get(carrier._kind, "cpu")


def _order(order, op):
    if isinstance(order, str) and order.upper() in ("C", "F"):
        return order.upper()
    raise StrideWeaveValueError(f"{op}: order must be 'C' (row-major, NumPy's and PyTorch's default) or 'F' "
                                f"(first mode fastest, the C ABI's order), not {order!r}")


def _target_shape(t, shape, op):
    """`shape` with its -1 inferred from t's element count; ValueError when
    the counts differ or the shape is not valid."""
    numel = t.numel()
    unknown = [i for i, n in enumerate(shape) if n == -1]
    if len(unknown) > 1:
        raise StrideWeaveValueError(f"{op}: only one extent can be -1, got shape {shape}")
    for n in shape:
        if n < -1:
            raise StrideWeaveValueError(f"{op}: invalid extent {n} in shape {shape}")
    known = 1
    for n in shape:
        known *= n if n != -1 else 1
    if unknown:
        if known == 0 or numel % known:
            raise StrideWeaveValueError(f"cannot reshape a tensor of size {numel} into shape {shape}")
        i = unknown[0]
        return shape[:i] + (numel // known,) + shape[i + 1:]
    if known != numel:
        raise StrideWeaveValueError(f"cannot reshape a tensor of size {numel} into shape {shape}")
    return shape


def _view_strides(old_shape, old_strides, new_shape):
    """The row-major (C order) strides of a view of `new_shape` over a
    tensor of `old_shape` and `old_strides` (element strides), or None when
    no such view exists: PyTorch's computeStride (NumPy's
    _attempt_nocopy_reshape). Modes of the new shape are laid over chunks of
    old modes that walk one progression."""
    if not old_shape:
        return (1,) * len(new_shape)
    numel = 1
    for n in old_shape:
        numel *= n
    if numel == 0:
        if tuple(old_shape) == tuple(new_shape):
            return tuple(old_strides)
        strides = [1] * len(new_shape)
        for d in range(len(new_shape) - 2, -1, -1):
            strides[d] = builtins.max(new_shape[d + 1], 1) * strides[d + 1]
        return tuple(strides)
    strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = old_strides[-1]
    tensor_numel = view_numel = 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (old_shape[tensor_d - 1] != 1
                             and old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_strides[tensor_d - 1]
                tensor_numel = view_numel = 1
    if view_d != -1:
        return None
    return tuple(strides)


def _reversed_modes(t):
    """The view of `t` with its modes in reverse order: first-mode-fastest
    operations on it act in t's row-major order."""
    n = t.ndim
    if n < 2:
        return t
    return _wrap(N.tensor_permute(t._h, list(range(n - 1, -1, -1))), t)


def _no_view(t, shape, order):
    strides = flat_strides(t.layout)
    held = f"strides {strides}" if strides is not None else f"layout {t.layout}"
    return StrideWeaveRuntimeError(
        f"view size is not compatible with input tensor's size and stride (at least one dimension spans across "
        f"two contiguous subspaces): shape {t.shape} with {held} cannot be viewed as {shape} in {order} order. "
        "Use .reshape(...) instead.")


def _reshaped(t, shape, order, copy_ok, op):
    """t's elements in `order` as a tensor of `shape` (-1 inferred): a view
    where one exists over t's slots, else a dense copy (copy_ok) or
    RuntimeError."""
    shape = _target_shape(t, _shape_args(shape, "shape"), op)
    if order == "F" or (t.ndim < 2 and len(shape) < 2):
        # The C ABI's own order (the only one when no rank reaches 2).
        return _first_mode_fastest(t, shape, order, copy_ok)
    try:
        return _row_major(t, shape, copy_ok)
    except (StrideWeaveNotImplementedError, StrideWeaveRuntimeError):
        if isinstance(t.carrier, TiledEvictable):  # the C ABI's refusal, which says to project
            _first_mode_fastest(t, shape, order, copy_ok)
        raise


def _first_mode_fastest(t, shape, order, copy_ok):
    if copy_ok:
        return _wrap(N.sw_tensor_reshape(t._h, shape), t)
    try:
        return _wrap(N.sw_tensor_view(t._h, shape), t)
    except StrideWeaveValueError:
        raise _no_view(t, shape, order) from None


def _row_major(t, shape, copy_ok):
    strides = flat_strides(t.layout)
    if strides is not None and _view_strides(t.shape, strides, shape) is None:
        if not copy_ok:
            raise _no_view(t, shape, "C")
        # PyTorch's reshape: a row-major copy, viewed.
        source = _reversed_modes(t)
        dense = _wrap(N.sw_tensor_clone(source._h), t)
        return _reversed_modes(_wrap(N.sw_tensor_view(dense._h, shape[::-1]), t))
    # A row-major view exists (or, for a nested layout, the C ABI decides).
    source = _reversed_modes(t)
    if copy_ok:
        return _reversed_modes(_wrap(N.sw_tensor_reshape(source._h, shape[::-1]), t))
    try:
        return _reversed_modes(_wrap(N.sw_tensor_view(source._h, shape[::-1]), t))
    except StrideWeaveValueError:
        raise _no_view(t, shape, "C") from None


def reshape(t, *shape, order="C"):
    """The elements of `t` as a tensor of `shape` (reshape(2, 3) or
    reshape((2, 3)); one entry may be -1), as NumPy's and PyTorch's reshape:
    read and placed in row-major order (order="C", the default), or first
    mode fastest (order="F", the C ABI's sw_tensor_reshape). A view where
    one exists over t's strides, else a copy."""
    t = _tensor(t, "reshape")
    return _reshaped(t, shape, _order(order, "reshape"), True, "reshape")


def view(t, *shape, order="C"):
    """As reshape, but always a view of t's slots, as torch.Tensor.view:
    RuntimeError ("... Use .reshape(...) instead") where the shape cannot
    be laid over t's strides without a copy."""
    t = _tensor(t, "view")
    return _reshaped(t, shape, _order(order, "view"), False, "view")


def flatten(t, start_dim=0, end_dim=-1, *, order="C"):
    """reshape merging modes start_dim .. end_dim into one (in row-major
    order by default, as PyTorch's flatten; order="F": first mode fastest).
    A rank-0 tensor flattens to rank 1."""
    t = _tensor(t, "flatten")
    order = _order(order, "flatten")
    start, end = integer(start_dim, "start_dim"), integer(end_dim, "end_dim")
    if order == "F":
        return _wrap(N.sw_tensor_flatten(t._h, start, end), t)
    shape = t.shape
    n = builtins.max(len(shape), 1)
    for what, d in (("start_dim", start), ("end_dim", end)):
        if not -n <= d < n:
            raise StrideWeaveIndexError(f"flatten: {what} {d} is out of range for a tensor of rank {len(shape)} "
                                        f"(expected in [{-n}, {n - 1}])")
    start, end = start % n, end % n
    if start > end:
        raise StrideWeaveValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    if not shape:
        return _reshaped(t, (1,), order, True, "flatten")
    merged = 1
    for extent in shape[start:end + 1]:
        merged *= extent
    return _reshaped(t, shape[:start] + (merged,) + shape[end + 1:], order, True, "flatten")


def unsqueeze(t, axis=None, *, dim=None):
    """The view with a mode of extent 1 inserted before `axis`."""
    a = _one_axis(axis, dim, None, "unsqueeze")
    if a is None:
        raise StrideWeaveTypeError("unsqueeze: an axis is required")
    t = _tensor(t, "unsqueeze")
    return _wrap(N.sw_tensor_unsqueeze(t._h, a), t)


def squeeze(t, axis=None, *, dim=None):
    """The view without modes of extent 1 (only the listed ones, if any)."""
    axes = _axes(axis, dim, "squeeze")
    t = _tensor(t, "squeeze")
    return _wrap(N.sw_tensor_squeeze(t._h, () if axes is None else axes), t)


def expand(t, *shape):
    """The broadcast view of `shape` (-1 keeps a mode); in-place writes to it
    are refused (ValueError)."""
    t = _tensor(t, "expand")
    return _wrap(N.sw_tensor_expand(t._h, _shape_args(shape, "shape")), t)


def contiguous(t):
    """`t` itself when dense, else a dense copy."""
    t = _tensor(t, "contiguous")
    return _wrap(N.sw_tensor_contiguous(t._h), t)


def clone(t):
    """A dense copy (differentiable)."""
    t = _tensor(t, "clone")
    return _wrap(N.sw_tensor_clone(t._h), t)


def detach(t):
    """A view outside autograd (no history, no requires_grad)."""
    t = _tensor(t, "detach")
    return _wrap(N.sw_tensor_detach(t._h), t)


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def _index_view(t, key):
    """The view t[key] for ints, slices, Ellipsis and None; None when `key`
    is a full integer coordinate (an element)."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(isinstance(k, Tensor) for k in key):
        raise StrideWeaveTypeError("indexing with a Tensor: use index_select or gather")
    ints = builtins.sum(1 for k in key if isinstance(k, numbers.Integral) and not isinstance(k, (bool, np.bool_)))
    if ints == len(key) and ints == t.ndim:
        return None
    ellipses = builtins.sum(1 for k in key if k is Ellipsis)
    if ellipses > 1:
        raise StrideWeaveIndexError("an index can only have a single ellipsis ('...')")
    consumed = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > t.ndim:
        raise StrideWeaveIndexError(f"too many indices for a tensor of rank {t.ndim}: {consumed}")
    if ellipses:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (t.ndim - consumed) + key[i + 1:]
    else:
        key = key + (slice(None),) * (t.ndim - consumed)
    h = t._h
    N.sw_tensor_retain(h)
    out = Tensor._adopt(h, t._rt)
    axis = 0
    for k in key:
        if k is None:
            out = _wrap(N.sw_tensor_unsqueeze(out._h, axis), t)
            axis += 1
        elif isinstance(k, slice):
            step = 1 if k.step is None else k.step
            back = isinstance(step, numbers.Integral) and step < 0
            start = ((1 << 63) - 1 if back else 0) if k.start is None else k.start
            stop = (-(1 << 63) if back else (1 << 63) - 1) if k.stop is None else k.stop
            # Python clamps slice bounds of any size; so does this.
            start, stop = (builtins.max(_I64_MIN, builtins.min(_I64_MAX, integer(v, what)))
                           for v, what in ((start, "slice start"), (stop, "slice stop")))
            out = _wrap(N.sw_tensor_slice(out._h, axis, start, stop, integer(step, "slice step")), t)
            axis += 1
        elif isinstance(k, numbers.Integral) and not isinstance(k, (bool, np.bool_)):
            if not _I64_MIN <= k <= _I64_MAX:
                raise StrideWeaveIndexError(f"index {k} is out of range for axis {axis} of extent {out.shape[axis]}")
            out = _wrap(N.sw_tensor_select(out._h, axis, int(k)), t)
        else:
            raise StrideWeaveTypeError(f"tensor indices are ints, slices, ... or None, not {type(k).__name__}")
    return out


def _tiled_index_error(t, key):
    """The error for indexing a tensor on a TiledEvictable with `key`:
    NotImplementedError saying how to project the tiles it names."""
    te = t.carrier
    grid, tile, shape = te.grid_shape, te.tile_shape, t.shape
    keys = key if isinstance(key, tuple) else (key,)
    if Ellipsis in keys and keys.count(Ellipsis) == 1:
        i = keys.index(Ellipsis)
        keys = keys[:i] + (slice(None),) * (len(shape) - len(keys) + 1) + keys[i + 1:]
    keys = keys + (slice(None),) * (len(shape) - len(keys))
    per_axis, picks = [], []
    for k, n, g, w in zip(keys, shape, grid, tile):
        if isinstance(k, numbers.Integral) and not isinstance(k, (bool, np.bool_)) and -n <= k < n:
            k %= n
            per_axis.append([k // w])
            picks.append(str(k % w))
        elif isinstance(k, slice) and k == slice(None):
            per_axis.append(list(range(g)))
            picks.append(":")
        else:
            per_axis = None
            break
    how = None
    if per_axis is not None and len(keys) == len(shape):
        while picks and picks[-1] == ":":
            picks.pop()
        how = (f"te.project(full, sw.TileSelection({per_axis})).wait()[{', '.join(picks)}] is "
               f"full[{_key_text(key)}]")
    if how is None:
        how = ("te.project(full, sw.TileSelection([...])).wait(), with one list of tile coordinates per axis, "
               "then index the compact tensor")
    return StrideWeaveNotImplementedError(
        f"a tensor on a TiledEvictable cannot be indexed: its tiles are moved between tiers and read by "
        f"projection. Project the tiles you need into a compact tensor first (te = full.carrier): {how}")


def _key_text(key):
    def one(k):
        if k is Ellipsis:
            return "..."
        if isinstance(k, slice):
            parts = ["" if v is None else str(v) for v in (k.start, k.stop, k.step)]
            return ":".join(parts[:2] if k.step is None else parts)
        return repr(k)

    return ", ".join(one(k) for k in key) if isinstance(key, tuple) else one(key)


def _getitem(self, key):
    try:
        v = _index_view(self, key)
    except StrideWeaveNotImplementedError:
        if not isinstance(self.carrier, TiledEvictable):
            raise
        raise _tiled_index_error(self, key) from None
    return element_get(self, key) if v is None else v


def _setitem(self, key, value):
    v = _index_view(self, key)
    if v is None:
        return element_set(self, key, value)
    if isinstance(value, Tensor):
        N.sw_tensor_copy_from(v._h, value._h)
    elif isinstance(value, (numbers.Real, np.generic)):
        N.sw_tensor_fill(v._h, float(value))
    else:
        raise StrideWeaveTypeError(f"a tensor slice is assigned a Tensor or a number, not {type(value).__name__}")


# ---- elementwise ---------------------------------------------------------------------------


def _unary(code, name):
    def f(t):
        t = _tensor(t, name)
        return _wrap(N.sw_unary(code, t._h), t)

    f.__name__ = f.__qualname__ = name
    return f


neg = _unary(N.SW_UNARY_NEG, "neg")
neg.__doc__ = "-t elementwise (every dtype but bool; unsigned wraps)."
abs = _unary(N.SW_UNARY_ABS, "abs")  # noqa: A001 - the NumPy and PyTorch name
abs.__doc__ = "|t| elementwise (every dtype but bool)."
exp = _unary(N.SW_UNARY_EXP, "exp")
exp.__doc__ = "e**t elementwise; integer and bool tensors give float32."
log = _unary(N.SW_UNARY_LOG, "log")
log.__doc__ = "The natural logarithm elementwise; integer and bool tensors give float32."
sqrt = _unary(N.SW_UNARY_SQRT, "sqrt")
sqrt.__doc__ = "The square root elementwise; integer and bool tensors give float32."
rsqrt = _unary(N.SW_UNARY_RSQRT, "rsqrt")
rsqrt.__doc__ = "1 / sqrt(t) elementwise; integer and bool tensors give float32."
silu = _unary(N.SW_UNARY_SILU, "silu")
silu.__doc__ = "t * sigmoid(t) elementwise (PyTorch's silu)."
gelu = _unary(N.SW_UNARY_GELU, "gelu")
gelu.__doc__ = "t * Phi(t) elementwise, the exact erf form (PyTorch's approximate='none')."
sigmoid = _unary(N.SW_UNARY_SIGMOID, "sigmoid")
sigmoid.__doc__ = "1 / (1 + exp(-t)) elementwise."
tanh = _unary(N.SW_UNARY_TANH, "tanh")
tanh.__doc__ = "tanh(t) elementwise."
_relu_any = _unary(N.SW_UNARY_RELU, "relu")


def relu(t):
    """max(t, 0) elementwise (every dtype but bool); float32 and float64
    take the spec's direct op, which also serves TiledEvictable tensors."""
    t = _tensor(t, "relu")
    if t.dtype not in _SIX_DTYPES:
        return _relu_any(t)
    return _relu(t)


_FLOATY = (float, np.floating)
_SIX_DTYPES = (_dtypes.float32, _dtypes.float64)


def _scalar_target(t, s):
    """The tensor a Python number combines with, as PyTorch promotes: a
    float with an integer or bool tensor computes in float32, an int with a
    bool tensor in int64."""
    d = t.dtype
    if isinstance(s, _FLOATY) and not d.is_floating:
        return astype(t, _dtypes.float32)
    if d is _dtypes.bool_ and isinstance(s, numbers.Integral) and s not in (0, 1):
        return astype(t, _dtypes.int64)
    return t


def _binary(code, name):
    def f(a, b):
        ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
        if not ta and not _is_number(a):
            a, ta = _tensor(a, f"{name}: a"), True
        if not tb and not _is_number(b):
            b, tb = _tensor(b, f"{name}: b"), True
        if ta and tb:
            return _wrap(N.sw_binary(code, a._h, b._h), a)
        if ta and _is_number(b):
            a = _scalar_target(a, b)
            return _wrap(N.sw_binary_scalar(code, a._h, float(b)), a)
        if tb and _is_number(a):
            b = _scalar_target(b, a)
            return _wrap(N.sw_scalar_binary(code, float(a), b._h), b)
        raise StrideWeaveTypeError(f"{name}: a or b must be a Tensor; got two numbers")

    f.__name__ = f.__qualname__ = name
    return f


sub = _binary(N.SW_BINARY_SUB, "sub")
sub.__doc__ = "a - b, broadcast and promoted (either side may be a number)."
div = _binary(N.SW_BINARY_DIV, "div")
div.__doc__ = "a / b, true division: integer and bool operands give float32."
pow = _binary(N.SW_BINARY_POW, "pow")  # noqa: A001
pow.__doc__ = "a ** b elementwise (integers exact; a negative integer exponent is ValueError)."
maximum = _binary(N.SW_BINARY_MAXIMUM, "maximum")
maximum.__doc__ = "max(a, b) elementwise, NaN if either is."
minimum = _binary(N.SW_BINARY_MINIMUM, "minimum")
minimum.__doc__ = "min(a, b) elementwise, NaN if either is."
eq = _binary(N.SW_BINARY_EQ, "eq")
eq.__doc__ = "a == b elementwise, a bool tensor."
ne = _binary(N.SW_BINARY_NE, "ne")
ne.__doc__ = "a != b elementwise, a bool tensor."
lt = _binary(N.SW_BINARY_LT, "lt")
lt.__doc__ = "a < b elementwise, a bool tensor."
le = _binary(N.SW_BINARY_LE, "le")
le.__doc__ = "a <= b elementwise, a bool tensor."
gt = _binary(N.SW_BINARY_GT, "gt")
gt.__doc__ = "a > b elementwise, a bool tensor."
ge = _binary(N.SW_BINARY_GE, "ge")
ge.__doc__ = "a >= b elementwise, a bool tensor."
_add_promoting = _binary(N.SW_BINARY_ADD, "add")
_mul_promoting = _binary(N.SW_BINARY_MUL, "mul")


def _operands(a, b, op):
    """a and b with each side that is neither a Tensor nor a number taken as
    a Tensor (NumPy arrays, CPU DLPack tensors)."""
    if not isinstance(a, Tensor) and not _is_number(a):
        a = _tensor(a, f"{op}: a")
    if not isinstance(b, Tensor) and not _is_number(b):
        b = _tensor(b, f"{op}: b")
    return a, b


def _six_op_path(a, b):
    """Whether a op b can take the six ops' path (which also serves tiled
    tensors): f32 / f64 tensors of one dtype, or one with a number."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return a.dtype is b.dtype and a.dtype in _SIX_DTYPES
    t = a if isinstance(a, Tensor) else b
    return isinstance(t, Tensor) and t.dtype in _SIX_DTYPES


def _add(a, b):
    """a + b, broadcast and promoted (either side may be a number)."""
    a, b = _operands(a, b, "add")
    return add(a, b) if _six_op_path(a, b) else _add_promoting(a, b)


def _mul(a, b):
    """a * b elementwise, broadcast and promoted (either side may be a number)."""
    a, b = _operands(a, b, "mul")
    return mul(a, b) if _six_op_path(a, b) else _mul_promoting(a, b)


def _operator_eq(self, other):
    """self == other elementwise (a bool tensor); with an object that is
    neither a Tensor nor a number, False, as Python's default."""
    if isinstance(other, Tensor) or _is_number(other):
        return eq(self, other)
    return NotImplemented


def _operator_ne(self, other):
    """self != other elementwise (a bool tensor); with an object that is
    neither a Tensor nor a number, True."""
    if isinstance(other, Tensor) or _is_number(other):
        return ne(self, other)
    return NotImplemented


def _operator_sub(a, b):
    """a - b. A TiledEvictable tensor, which takes only the six direct ops,
    computes it as a + (-1 * b), as the operator always has."""
    a, b = _operands(a, b, "sub")
    try:
        return sub(a, b)
    except StrideWeaveNotImplementedError:
        if not _six_op_path(a, b):
            raise
        if isinstance(b, Tensor):
            return add(a, mul(b, -1.0))
        return add(a, -b)


def _operator_neg(t):
    """-t; a TiledEvictable tensor computes it as -1 * t."""
    try:
        return neg(t)
    except StrideWeaveNotImplementedError:
        if not _six_op_path(t, -1.0):
            raise
        return mul(t, -1.0)


def _scalar_tensor_for(x, like):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, np.bool_)):
        return full((), bool(x), dtype=_dtypes.bool_, runtime=like._rt)
    if _is_number(x):
        d = like.dtype if (like.dtype.is_floating or not isinstance(x, _FLOATY)) else _dtypes.float32
        if d is _dtypes.bool_ and not isinstance(x, _FLOATY):
            d = _dtypes.int64
        return full((), x, dtype=d, runtime=like._rt)
    raise StrideWeaveTypeError(f"where: expected a Tensor or a number, not {type(x).__name__}")


def where(condition, a, b):
    """condition ? a : b elementwise, broadcast together; `condition` is a
    bool tensor (no gradient), `a` or `b` may be a number (a rank-0 tensor
    of the other's dtype)."""
    condition = _tensor(condition, "where: condition")
    if not isinstance(a, Tensor) and not _is_number(a) and not isinstance(a, (bool, np.bool_)):
        a = _tensor(a, "where: a")
    if not isinstance(b, Tensor) and not _is_number(b) and not isinstance(b, (bool, np.bool_)):
        b = _tensor(b, "where: b")
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise StrideWeaveTypeError("where: a or b must be a Tensor")
    if not isinstance(a, Tensor):
        a = _scalar_tensor_for(a, b)
    if not isinstance(b, Tensor):
        b = _scalar_tensor_for(b, a)
    return _wrap(N.sw_where(condition._h, a._h, b._h), condition)


# ---- reductions, softmax, selection ----------------------------------------------------------


def _reduce(code, name):
    def f(t, axis=None, keepdims=None, *, dim=None, keepdim=None):
        axes = _axes(axis, dim, name)
        t = _tensor(t, name)
        return _wrap(N.sw_reduce(code, t._h, () if axes is None else axes, _keep(keepdims, keepdim)), t)

    f.__name__ = f.__qualname__ = name
    return f


mean = _reduce(N.SW_REDUCE_MEAN, "mean")
mean.__doc__ = "The mean over `axis` (all axes when None; floating dtypes)."
amax = _reduce(N.SW_REDUCE_MAX, "amax")
amax.__doc__ = "The max over `axis` (all axes when None), values only (NumPy's max, PyTorch's amax)."
amin = _reduce(N.SW_REDUCE_MIN, "amin")
amin.__doc__ = "The min over `axis` (all axes when None), values only."


def sum(t, axis=None, keepdims=None, *, dim=None, keepdim=None, axes=None):  # noqa: A001
    """The sum over `axis` (all axes when None). float32 and float64 keep
    their dtype; integer and bool sums are int64, half sums round once."""
    if axes is not None:
        axis = axes
    picked = _axes(axis, dim, "sum")
    keep = _keep(keepdims, keepdim)
    t = _tensor(t, "sum")
    if t.dtype is _dtypes.float32 or t.dtype is _dtypes.float64:
        return reduce_sum(t, picked, keep)
    return _wrap(N.sw_reduce(N.SW_REDUCE_SUM, t._h, () if picked is None else picked, keep), t)


def _minmax(code, name, values_only):
    def f(t, axis=None, keepdims=None, *, dim=None, keepdim=None):
        keep = _keep(keepdims, keepdim)
        if dim is not None and axis is not None:
            raise StrideWeaveTypeError(f"{name}: pass axis= or dim=, not both")
        if dim is None:
            # NumPy: values only, over one axis, several or all.
            return (amax if code == N.SW_REDUCE_MAX else amin)(t, axis, keep)
        # PyTorch: (values, indices) along one dim.
        t = _tensor(t, name)
        v, i = N.sw_reduce_index(code, t._h, integer(dim, f"{name}: dim"), keep)
        return MinMax(_wrap(v, t), _wrap(i, t))

    f.__name__ = f.__qualname__ = name
    return f


max = _minmax(N.SW_REDUCE_MAX, "max", False)  # noqa: A001
max.__doc__ = """The max: over `axis` (None: all) as NumPy's, values only; with dim= as
PyTorch's, a (values, indices) pair along that dim (first index reaching it)."""
min = _minmax(N.SW_REDUCE_MIN, "min", False)  # noqa: A001
min.__doc__ = """The min: over `axis` (None: all) as NumPy's, values only; with dim= as
PyTorch's, a (values, indices) pair along that dim."""


def argmax(t, axis=None, keepdims=None, *, dim=None, keepdim=None):
    """The int64 index of the first max along `axis` (the flat row-major
    index of the flattened tensor when None, as NumPy's and PyTorch's)."""
    a = _one_axis(axis, dim, None, "argmax")
    t = _tensor(t, "argmax")
    if a is None:
        t, a = flatten(t), 0
    return _wrap(N.sw_reduce_index(N.SW_REDUCE_MAX, t._h, a, _keep(keepdims, keepdim))[1], t)


def argmin(t, axis=None, keepdims=None, *, dim=None, keepdim=None):
    """The int64 index of the first min along `axis` (flattened when None)."""
    a = _one_axis(axis, dim, None, "argmin")
    t = _tensor(t, "argmin")
    if a is None:
        t, a = flatten(t), 0
    return _wrap(N.sw_reduce_index(N.SW_REDUCE_MIN, t._h, a, _keep(keepdims, keepdim))[1], t)


def softmax(t, axis=None, *, dim=None):
    """exp(t) / sum(exp(t)) along `axis` (default the last), computed
    stably; floating dtypes."""
    t = _tensor(t, "softmax")
    return _wrap(N.sw_softmax(t._h, _one_axis(axis, dim, -1, "softmax")), t)


def log_softmax(t, axis=None, *, dim=None):
    """log(softmax(t)) along `axis` (default the last), computed as
    (t - max) - log(sum(exp(t - max)))."""
    t = _tensor(t, "log_softmax")
    return _wrap(N.sw_log_softmax(t._h, _one_axis(axis, dim, -1, "log_softmax")), t)


def topk(t, k, axis=None, *, dim=None):
    """The k largest values along `axis` (default the last), sorted
    descending, ties to the lower index, and their int64 indices: a
    (values, indices) pair."""
    t = _tensor(t, "topk")
    v, i = N.sw_topk(t._h, integer(k, "k"), _one_axis(axis, dim, -1, "topk"))
    return TopK(_wrap(v, t), _wrap(i, t))


def index_select(t, axis, index):
    """The rows of `t` along `axis` picked by `index` (an int32 / int64
    tensor of rank 0 or 1), as PyTorch's index_select."""
    t, index = _tensor(t, "index_select"), _tensor(index, "index_select: index")
    return _wrap(N.sw_index_select(t._h, integer(axis, "axis"), index._h), t)


def gather(t, axis, index):
    """out[c] = t[c with c[axis] = index[c]] (PyTorch's gather)."""
    t, index = _tensor(t, "gather"), _tensor(index, "gather: index")
    return _wrap(N.sw_gather(t._h, integer(axis, "axis"), index._h), t)


def index_add(t, axis, index, source):
    """A copy of `t` with the rows of `source` added at the rows `index`
    picks along `axis` (repeated indices accumulate)."""
    t, index = _tensor(t, "index_add"), _tensor(index, "index_add: index")
    source = _tensor(source, "index_add: source")
    return _wrap(N.sw_index_add(t._h, integer(axis, "axis"), index._h, source._h), t)


def scatter_add(t, axis, index, source):
    """A copy of `t` with source[c] added at c with c[axis] = index[c]
    (PyTorch's scatter_add; the adjoint of gather)."""
    t, index = _tensor(t, "scatter_add"), _tensor(index, "scatter_add: index")
    source = _tensor(source, "scatter_add: source")
    return _wrap(N.sw_scatter_add(t._h, integer(axis, "axis"), index._h, source._h), t)


def _join(tensors, axis, dim, stack_, op):
    ts = tuple(_tensor(x, f"{op}: tensors[{i}]") for i, x in enumerate(finite(tensors, f"{op}: tensors")))
    if not ts:
        raise StrideWeaveValueError(f"{op}: needs at least one tensor")
    return _wrap(N.tensors_join([x._h for x in ts], _one_axis(axis, dim, 0, op), stack_), ts[0])


def cat(tensors, axis=None, *, dim=None):
    """The tensors joined along an existing `axis` (default 0), promoted to
    one dtype (NumPy's concatenate, PyTorch's cat)."""
    return _join(tensors, axis, dim, False, "cat")


def stack(tensors, axis=None, *, dim=None):
    """The tensors (one shape) joined along a new `axis` (default 0)."""
    return _join(tensors, axis, dim, True, "stack")


# ---- in-place ---------------------------------------------------------------------------------


def _inplace(code, name):
    def f(self, other):
        self = _tensor(self, name)
        if _is_number(other):
            N.sw_binary_scalar_inplace(code, self._h, float(other))
        else:
            other = _tensor(other, f"{name}: other")
            N.sw_binary_inplace(code, self._h, other._h)
        return self

    f.__name__ = f.__qualname__ = name
    return f


add_ = _inplace(N.SW_BINARY_ADD, "add_")
add_.__doc__ = "self += other in place (one version step); see sw_binary_inplace for the rules."
sub_ = _inplace(N.SW_BINARY_SUB, "sub_")
sub_.__doc__ = "self -= other in place."
mul_ = _inplace(N.SW_BINARY_MUL, "mul_")
mul_.__doc__ = "self *= other in place."
div_ = _inplace(N.SW_BINARY_DIV, "div_")
div_.__doc__ = "self /= other in place (TypeError for an integer tensor)."
pow_ = _inplace(N.SW_BINARY_POW, "pow_")
pow_.__doc__ = "self **= other in place."


def fill_(self, value):
    """Every element = value, in place (one version step)."""
    if not isinstance(value, (numbers.Real, np.generic)):
        raise StrideWeaveTypeError(f"fill_: value must be a number, not {type(value).__name__}")
    self = _tensor(self, "fill_")
    N.sw_tensor_fill(self._h, float(value))
    return self


def zero_(self):
    """Every element = 0, in place."""
    return fill_(self, 0.0)


def copy_(self, source):
    """self = source (broadcast, converted to self's dtype), in place;
    differentiable with respect to `source`."""
    self, source = _tensor(self, "copy_"), _tensor(source, "copy_: source")
    N.sw_tensor_copy_from(self._h, source._h)
    return self


# ---- Python protocol ----------------------------------------------------------------------------


def _bool(self):
    """bool(t): the one element's truth; ValueError (ambiguous) for more elements."""
    n = self.numel()
    if n != 1:
        raise StrideWeaveValueError(f"the truth value of a tensor with {n} elements is ambiguous; "
                                    "use .any() or .all() of a comparison")
    return bool(self.item())


def _float(self):
    """float(t) of a one-element tensor."""
    if self.numel() != 1:
        raise StrideWeaveValueError(f"only one-element tensors convert to float; this one has {self.numel()}")
    return float(self.item())


def _int(self):
    """int(t) of a one-element tensor."""
    if self.numel() != 1:
        raise StrideWeaveValueError(f"only one-element tensors convert to int; this one has {self.numel()}")
    return int(self.item())


def _index(self):
    """operator.index(t) of a one-element integer tensor."""
    if self.dtype.is_floating or self.dtype is _dtypes.bool_ or self.numel() != 1:
        raise StrideWeaveTypeError("only one-element integer tensors can be used as an index")
    return int(self.item())


def _any(self):
    """Whether any element is nonzero (True)."""
    return bool(amax(astype(self, _dtypes.bool_)).item()) if self.numel() else False


def _all(self):
    """Whether every element is nonzero (True)."""
    return bool(amin(astype(self, _dtypes.bool_)).item()) if self.numel() else True


# The functions behind Tensor's methods and operators (strideweave._tensor):
# t[key] (__getitem__, __setitem__), +, -, *, the in-place forms (__iadd__, add_, ...)
# and the named methods.
provide(
    getitem=_getitem, setitem=_setitem, add=_add, mul=_mul, operator_sub=_operator_sub, operator_neg=_operator_neg,
    operator_eq=_operator_eq, operator_ne=_operator_ne, add_=add_, sub_=sub_, mul_=mul_, div_=div_, pow_=pow_,
    fill_=fill_, zero_=zero_, copy_=copy_, to_bool=_bool, to_float=_float, to_int=_int, to_index=_index, any=_any,
    all=_all, device=_device, relu=relu, neg=neg, abs=abs, exp=exp, log=log, sqrt=sqrt, rsqrt=rsqrt, silu=silu,
    gelu=gelu, sigmoid=sigmoid, tanh=tanh, sub=sub, div=div, pow=pow, maximum=maximum, minimum=minimum, eq=eq,
    ne=ne, lt=lt, le=le, gt=gt, ge=ge, mean=mean, amax=amax, amin=amin, max=max, min=min, argmax=argmax,
    argmin=argmin, softmax=softmax, log_softmax=log_softmax, topk=topk, index_select=index_select, gather=gather,
    index_add=index_add, scatter_add=scatter_add, astype=astype, reshape=reshape, view=view, flatten=flatten,
    unsqueeze=unsqueeze, squeeze=squeeze, expand=expand, contiguous=contiguous, clone=clone, detach=detach, sum=sum)
