"""NumPy and DLPack interop.

StrideWeave layouts are first mode fastest, so a Fortran-ordered array maps
to a dense layout and a C-ordered array to the permuted-stride layout with
the same strides. tensor.numpy(), __array_interface__ and __dlpack__ share the
carrier's memory when it is host addressable and every top-level mode is one
arithmetic progression; otherwise they copy.

Imports share memory too: from_numpy and from_dlpack onto a CPU carrier wrap
the source's memory in a CPU carrier over external memory
(sw_carrier_create_cpu_external) whenever the array is in native byte order,
aligned to its element size and strided in whole elements, which covers
C- and Fortran-ordered arrays, slices, transposes, negative and zero strides.
The carrier keeps the source object alive until it drops the memory (release
or its last reference). A read-only array gives a read-only carrier. Other
arrays, empty ones and other carrier classes are copied.
"""
import numpy as np

from . import _coerce
from . import _dtypes
from . import _runtime
from ._errors import StrideWeaveNotImplementedError, StrideWeaveTypeError, StrideWeaveValueError
from ._layout import Layout, Stride, flat_strides
from ._lib import native as N
from ._tensor import Tensor, provide
from .carriers import CPU

_UNSUPPORTED = N.SW_ERROR_UNSUPPORTED


class _ArrayView:
    """The base object of an exported view: holds the interface dict and keeps
    what owns the memory alive; counts as an export of its carrier (which
    then refuses release())."""

    __slots__ = ("__array_interface__", "_owner", "_carrier", "__weakref__")

    def __init__(self, interface, owner, carrier=None):
        self.__array_interface__ = interface
        self._owner = owner
        self._carrier = carrier
        if carrier is not None:
            carrier._exports += 1

    def __del__(self):
        c = self._carrier
        if c is not None:
            c._exports -= 1


def _interface(address, shape, byte_strides, typestr, read_only=False):
    return {"version": 3, "shape": tuple(shape), "typestr": typestr, "data": (address, read_only),
            "strides": None if byte_strides is None else tuple(byte_strides)}


def _view_params(t, numpy=True):
    """(carrier, address, element strides, read_only) for a zero-copy view,
    or None. NumPy views need a NumPy dtype (not bfloat16); DLPack does not."""
    dtype = t.dtype
    if (numpy and dtype.numpy is None) or dtype.is_quantized:
        return None
    strides = flat_strides(t.layout)
    if strides is None:
        return None
    carrier = t.carrier
    if carrier.size() == 0 or t.numel() == 0:
        return None
    try:
        base = N.sw_carrier_host_pointer(carrier._h)
    except StrideWeaveNotImplementedError:
        return None
    if not base:
        return None
    return carrier, base + t.offset * dtype.itemsize, strides, N.sw_carrier_is_read_only(carrier._h)


def can_view(t):
    return _view_params(t) is not None


def array_interface(t):
    params = _view_params(t)
    if params is None:
        raise AttributeError("this tensor's memory cannot be viewed in place; use tensor.numpy()")
    _, address, strides, read_only = params
    item = t.dtype.itemsize
    return _interface(address, t.shape, [s * item for s in strides], t.dtype.numpy.str, read_only)


def to_numpy(t):
    """A NumPy array sharing memory where the carrier and layout allow,
    else a copy (tiled or compressed carriers, nested modes, bfloat16).
    A view of a read-only carrier is read-only."""
    params = _view_params(t)
    dtype = t.dtype
    if params is not None:
        carrier, address, strides, read_only = params
        item = dtype.itemsize
        view = _ArrayView(_interface(address, t.shape, [s * item for s in strides], dtype.numpy.str, read_only), t,
                          carrier)
        return np.asarray(view)
    return _copy_out(t)


def _copy_out(t, raw=False):
    """Every element, read first mode fastest into a Fortran-ordered array;
    bfloat16 as float32 values, or as its uint16 bits with raw=True. A
    block-quantized tensor gives its blocks' bytes as uint8, its first extent
    counted in bytes (the transpose is gguf-py's row-major byte array)."""
    dtype = t.dtype
    if dtype.is_quantized:
        shape = (t.shape[0] // dtype.block_elements * dtype.block_bytes, *t.shape[1:])
        out = np.empty(shape, dtype=np.uint8, order="F")
        if out.size:
            N.tensor_read_into(t._h, out.T)
        return out
    out = np.empty(t.shape, dtype=dtype.numpy if dtype.numpy is not None else np.uint16, order="F")
    if out.size:
        N.tensor_read_into(t._h, out.T)
    if dtype is _dtypes.bfloat16 and not raw:
        out = _dtypes.bf16_to_float32(out)
    return out


def _numpy_dtype_of(array):
    if array.dtype.name == "bfloat16":  # ml_dtypes, if the caller uses it
        return _dtypes.bfloat16
    found = _dtypes.from_numpy_dtype(array.dtype)
    if found is None:
        raise StrideWeaveTypeError(f"NumPy dtype {array.dtype} has no StrideWeave counterpart")
    return found


def _span(shape, strides):
    """(lowest, highest) offset from the first element that a non-empty
    strided array reaches, in the strides' units."""
    lo = hi = 0
    for n, s in zip(shape, strides):
        reach = (n - 1) * s
        lo, hi = (lo + reach, hi) if reach < 0 else (lo, hi + reach)
    return lo, hi


def _shared_layout(array):
    """(address, bytes, first slot, element strides) of the memory `array`
    spans, for a carrier over it; None when it cannot be shared."""
    item = array.itemsize
    # A mode of extent 1 is never stepped along: whatever NumPy says its stride is does not matter.
    strides = [0 if n == 1 else s for n, s in zip(array.shape, array.strides)]
    if array.size == 0 or not array.flags.aligned or any(s % item for s in strides):
        return None
    lo, hi = _span(array.shape, strides)
    address = array.__array_interface__["data"][0] + lo
    return address, hi - lo + item, -lo // item, tuple(s // item for s in strides)


def _shared_dlpack(address, shape, strides, item):
    """_shared_layout for a DLPack tensor: (address, bytes, first slot,
    element strides) of the memory it spans, strides None meaning row-major
    compact; None when it is empty or its address is not aligned to its
    elements (from_numpy copies it then)."""
    if 0 in shape or address % item:
        return None
    if strides is None:
        strides, step = [0] * len(shape), 1
        for i in range(len(shape) - 1, -1, -1):
            strides[i], step = step, step * shape[i]
    # A mode of extent 1 is never stepped along: its stride does not matter.
    strides = tuple(0 if n == 1 else s for n, s in zip(shape, strides))
    lo, hi = _span(shape, strides)
    return address + lo * item, (hi - lo + 1) * item, -lo, strides


def from_numpy(array, carrier_class=None, *, runtime=None, dtype=None):
    """A tensor over `array`'s memory, or over a copy of it.

    With `carrier_class` None or carriers.CPU (the default) the tensor shares
    the array's memory whenever the array is in native byte order, aligned
    and strided in whole elements: writes through either side are seen by
    the other (NumPy's writes bypass the version counter), and the carrier
    keeps the array alive until it is released. A read-only array gives a
    read-only carrier (writes raise RuntimeError). Otherwise, and for other
    carrier classes, the values are copied onto a new carrier, keeping the
    strides of a C- or Fortran-contiguous array and packing any other first
    mode fastest. Like torch.from_numpy."""
    carrier_class = CPU if carrier_class is None else carrier_class
    rt = _runtime.resolve(runtime)
    array = np.asarray(array)
    sw_dtype = _numpy_dtype_of(array) if dtype is None else dtype
    if sw_dtype.itemsize != array.itemsize:
        raise StrideWeaveTypeError(f"{sw_dtype.name} elements are {sw_dtype.itemsize} bytes; the array's "
                                   f"are {array.itemsize}")
    if array.ndim > N.SW_MAX_RANK:
        raise StrideWeaveValueError(f"rank {array.ndim} exceeds the maximum of {N.SW_MAX_RANK}")
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    if carrier_class is CPU:
        shared = _shared_layout(array)
        if shared is not None:
            address, nbytes, first, strides = shared
            carrier = CPU._over(array, address, nbytes, sw_dtype, not array.flags.writeable, rt)
            return Tensor(carrier, first, Layout(array.shape, Stride(*strides)))
    item = array.itemsize
    if array.flags.f_contiguous or array.flags.c_contiguous:
        strides = tuple(s // item for s in array.strides)
        if array.flags.f_contiguous:
            layout = Layout.dense(*array.shape)
        else:
            layout = Layout(array.shape, Stride(*strides))
    else:
        array = np.asfortranarray(array)
        layout = Layout.dense(*array.shape)
    flat = array.ravel(order="K")
    if array.ndim == 0:
        flat = array.reshape(1)
    carrier = carrier_class._from_host(flat.view(np.uint8) if flat.size else b"", sw_dtype, flat.size, rt)
    return Tensor(carrier, 0, layout)


# ---- DLPack ----------------------------------------------------------------

_DL_CPU = 1


def dlpack_export(t, *, stream=None, max_version=None, dl_device=None, copy=None):
    """The DLPack capsule of the array-API protocol, made by the library's
    export (sw_tensor_to_dlpack_versioned for a consumer that reads DLPack
    1.0 or later: a "dltensor_versioned" capsule; otherwise
    sw_tensor_to_dlpack: "dltensor"). It shares the carrier's memory where
    the carrier is host addressable and the layout allows, and counts as an
    export of the carrier until the consumer deletes it; else, or with
    copy=True, it exports a copy (copy=False refuses one: BufferError)."""
    if stream is not None and stream != -1:
        raise BufferError("a CPU tensor takes no stream")
    if dl_device is not None and tuple(dl_device) != (_DL_CPU, 0):
        raise BufferError(f"cannot export to device {tuple(dl_device)}; this tensor is on the CPU")
    version = None if max_version is None else tuple(max_version)
    params = None if copy else _view_params(t, numpy=False)
    if params is not None:
        source, owner, copied = t, _ArrayView(None, None, params[0]), False
    else:
        if copy is False:
            raise BufferError("this tensor cannot be exported without a copy (carrier or layout)")
        # A CPU tensor over a first-mode-fastest copy, which the export alone keeps.
        source = from_numpy(_copy_out(t, raw=True), runtime=t._rt, dtype=t.dtype)
        owner, copied = None, True
    if version is not None and version[0] >= 1:
        major, minor = (min(int(v), _U32_MAX) for v in version[:2])
        return N.tensor_dlpack_versioned(source._h, major, minor, owner, copied)
    return N.tensor_dlpack(source._h, owner)


_U32_MAX = (1 << 32) - 1


def from_dlpack(x, carrier_class=None, *, runtime=None):
    """A tensor over a DLPack producer's CPU tensor (an object with
    __dlpack__, or a capsule), sharing its memory as from_numpy does (the
    producer's tensor stays alive until the carrier releases it; a read-only
    export gives a read-only carrier), or a copy where that is impossible or
    `carrier_class` is not carriers.CPU."""
    if hasattr(x, "__dlpack__"):
        if hasattr(x, "__dlpack_device__"):
            device = tuple(x.__dlpack_device__())
            if device[0] != _DL_CPU:
                raise StrideWeaveNotImplementedError(
                    f"from_dlpack takes CPU tensors; this one is on DLPack device {device}")
        try:
            capsule = x.__dlpack__(max_version=(1, 0))
        except TypeError:
            capsule = x.__dlpack__()
    elif type(x).__name__ == "PyCapsule":
        capsule = x
    else:
        raise StrideWeaveTypeError(f"from_dlpack needs an object with __dlpack__ or a capsule, "
                                   f"not {type(x).__name__}")
    address, device_type, _, code, bits, lanes, shape, strides, read_only, keeper = N.dlpack_import(capsule)
    if device_type != _DL_CPU:
        raise StrideWeaveNotImplementedError(f"from_dlpack takes CPU tensors, not DLPack device type {device_type}")
    dtype = _dtypes.from_dlpack_dtype(code, bits, lanes)
    if dtype is None:
        raise StrideWeaveTypeError(f"DLPack dtype (code {code}, {bits} bits, {lanes} lanes) has no "
                                   "StrideWeave counterpart")
    if carrier_class is None or carrier_class is CPU:
        shared = _shared_dlpack(address, shape, strides, dtype.itemsize)
        if shared is not None:  # the common case, without a NumPy array in between
            if len(shape) > N.SW_MAX_RANK:
                raise StrideWeaveValueError(f"rank {len(shape)} exceeds the maximum of {N.SW_MAX_RANK}")
            base, nbytes, first, element_strides = shared
            carrier = CPU._over(keeper, base, nbytes, dtype, read_only, _runtime.resolve(runtime))
            return Tensor(carrier, first, Layout._flat(tuple(shape), element_strides))
    raw = dtype.numpy if dtype.numpy is not None else np.dtype(np.uint16)
    if 0 in shape:
        array = np.empty(shape, dtype=raw)
    else:
        byte_strides = None if strides is None else [s * raw.itemsize for s in strides]
        array = np.asarray(_ArrayView(_interface(address, shape, byte_strides, raw.str, read_only), keeper))
    tensor = from_numpy(array, carrier_class, runtime=runtime, dtype=dtype)
    del array
    return tensor


# ---- Tensor's NumPy and DLPack surface ----------------------------------------------------


def _array(t, dtype=None, copy=None):
    if copy is False and not can_view(t):
        raise ValueError("this tensor cannot be viewed without a copy (its carrier or layout)")
    a = to_numpy(t)
    if copy:
        a = a.copy()
    return a if dtype is None else a.astype(dtype, copy=bool(copy))


# The functions behind Tensor's numpy(), from_numpy() and NumPy and DLPack
# protocols (strideweave._tensor).
provide(to_numpy=to_numpy, from_numpy=from_numpy, array=_array, array_interface=array_interface,
        dlpack_export=dlpack_export)
_coerce.register_importers(from_numpy, from_dlpack)


def from_blocks(blocks, dtype, *, runtime=None):
    """A CPU tensor of the block-quantized `dtype` holding a copy of
    `blocks`: a uint8 array whose first axis holds whole blocks' bytes (as
    t.numpy() of such a tensor gives them; the transpose of gguf-py's
    row-major byte array). The tensor's first extent counts elements."""
    dtype = _dtypes.as_dtype(dtype)
    if not dtype.is_quantized:
        raise StrideWeaveTypeError(f"from_blocks: {dtype.name} is not a block-quantized dtype")
    array = np.asarray(blocks)
    if array.dtype != np.uint8:
        raise StrideWeaveTypeError(f"from_blocks: the blocks are uint8 bytes, not {array.dtype}")
    if array.ndim == 0 or array.shape[0] % dtype.block_bytes:
        raise StrideWeaveValueError(f"from_blocks: the first axis holds whole {dtype.block_bytes}-byte {dtype.name} "
                                    f"blocks; got shape {array.shape}")
    rt = _runtime.resolve(runtime)
    shape = (array.shape[0] // dtype.block_bytes * dtype.block_elements, *array.shape[1:])
    out = Tensor._adopt(N.sw_tensor_zeros(rt._h, dtype.code, list(shape)), rt)
    if array.size:
        N.tensor_write_from(out._h, np.asfortranarray(array).T)
    return out
