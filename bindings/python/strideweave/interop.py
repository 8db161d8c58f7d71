"""Zero-copy views for other frameworks: to_tinygrad.

tinygrad's Tensor.from_blob(ptr, shape, dtype=..., device=...) reads host
memory as one dense row-major array and does not own it. to_tinygrad hands
it a StrideWeave CPU tensor's memory, or a host-visible device view's, in
place and keeps the owner alive for as long as tinygrad holds the buffer.
tinygrad is imported on the first call only: StrideWeave does not depend on
it.
"""
import importlib
import weakref

from . import _dtypes
from ._device import DeviceView
from ._errors import StrideWeaveNotImplementedError, StrideWeaveTypeError, StrideWeaveValueError
from ._interop import _ArrayView
from ._layout import flat_strides
from ._lib import native as N
from ._tensor import Tensor

__all__ = ["to_tinygrad"]

# tinygrad's dtypes by name: every StrideWeave dtype has one.
_TINYGRAD_DTYPES = {
    _dtypes.float32: "float32", _dtypes.float64: "float64", _dtypes.float16: "float16",
    _dtypes.bfloat16: "bfloat16", _dtypes.int32: "int32", _dtypes.int64: "int64", _dtypes.uint8: "uint8",
    _dtypes.bool_: "bool",
}
# tinygrad devices whose buffers are host memory (from_blob takes a host
# address there; on a GPU device it would be read as a device address).
# Older releases call the C backend "CLANG"; "LLVM" is host memory too.
_HOST_DEVICES = ("CPU", "CLANG", "LLVM")


def _tinygrad():
    try:
        return importlib.import_module("tinygrad")
    except ImportError as e:
        raise ImportError("strideweave.interop.to_tinygrad needs tinygrad (pip install tinygrad)") from e


def _device(tg, device):
    registry = tg.Device
    if device is None:
        known = getattr(registry, "_devices", ())
        return next((name for name in _HOST_DEVICES if name in known), "CPU")
    if not isinstance(device, str):
        raise StrideWeaveTypeError(f"device must be a tinygrad device name (a str), not {type(device).__name__}")
    name = registry.canonicalize(device)
    if name.partition(":")[0] not in _HOST_DEVICES:
        raise StrideWeaveValueError(f"tinygrad device {device!r} does not address host memory; StrideWeave lends "
                                    "host memory: use the CPU device (device=None), then move the tinygrad "
                                    "tensor with .to()")
    return name


def _plan(shape, strides):
    """How a strided tensor is a view of one dense row-major buffer:
    (first slot, buffer shape, permutation, flipped axes, kept modes), or
    None when its elements are not one dense block (gaps or overlaps).

    Modes of extent 1 and broadcast modes (stride 0) are not in the buffer;
    the others, slowest first, are. A negative stride walks the mode
    backwards: the buffer starts at its last element and the mode is
    flipped."""
    first = 0
    modes = []
    for axis, (n, s) in enumerate(zip(shape, strides)):
        if n == 1 or s == 0:
            continue
        if s < 0:
            first += (n - 1) * s
        modes.append((abs(s), axis, n, s < 0))
    step = 1
    for s, _, n, _ in sorted(modes):
        if s != step:
            return None
        step *= n
    by_speed = sorted(modes, reverse=True)  # slowest first: row-major
    buffer_shape = tuple(n for _, _, n, _ in by_speed)
    slot_of = {axis: i for i, (_, axis, _, _) in enumerate(by_speed)}
    kept = [axis for _, axis, _, _ in modes]  # in axis order
    perm = tuple(slot_of[axis] for axis in kept)
    flipped = tuple(i for i, (_, _, _, negative) in enumerate(modes) if negative)
    return first, buffer_shape, perm, flipped, kept


def _keep_alive(tg_tensor, owner):
    """Ties `owner` to the tinygrad Buffer behind `tg_tensor`: every tinygrad
    tensor that may still read the memory holds that Buffer."""
    uop = getattr(tg_tensor, "uop", None)
    if uop is None:
        uop = tg_tensor.lazydata  # tinygrad releases before 0.11
    buffer = uop.buffer
    try:
        buffer._strideweave_owner = owner
    except AttributeError:
        weakref.finalize(buffer, _drop, owner)


def _drop(owner):
    del owner


def _tinygrad_dtype(tg, dtype):
    tg_dtype = getattr(tg.dtypes, _TINYGRAD_DTYPES.get(dtype, ""), None)
    if tg_dtype is None:
        raise StrideWeaveTypeError(f"tinygrad {getattr(tg, '__version__', '')} has no {dtype.name} dtype")
    return tg_dtype


def _lend(tg, address, itemsize, shape, strides, tg_dtype, name, owner):
    """from_blob over the dense block of items of `itemsize` bytes that
    element 0 at `address` and element `strides` span, held by `owner`, as a
    tinygrad tensor of `shape` (permuted, flipped, expanded as needed)."""
    first, buffer_shape, perm, flipped, kept = _plan(shape, strides)
    blob = tg.Tensor.from_blob(address + first * itemsize, buffer_shape, dtype=tg_dtype, device=name)
    _keep_alive(blob, owner)
    out = blob
    if perm != tuple(range(len(perm))):
        out = out.permute(perm)
    if flipped:
        out = out.flip(flipped)
    if len(kept) != len(shape):
        out = out.reshape(tuple(n if axis in kept else 1 for axis, n in enumerate(shape)))
        if out.shape != shape:
            out = out.expand(shape)
    return out


def _device_view_to_tinygrad(tg, view, device):
    """to_tinygrad of a DeviceView: the view as the library describes it now."""
    spec_dtype, spec_shape = view.allocation.dtype, view.allocation.shape
    tg_dtype = _tinygrad_dtype(tg, spec_dtype)
    name = _device(tg, device)
    pointer, dtype, shape, strides = view._describe()  # StaleHandleError after a restart
    if dtype is not spec_dtype:
        raise StrideWeaveTypeError(f"the device view's dtype {dtype.name} is not its object spec's "
                                   f"{spec_dtype.name}")
    if shape != spec_shape:
        raise StrideWeaveValueError(f"the device view's shape {shape} is not its object spec's {spec_shape}")
    if not pointer:
        raise StrideWeaveValueError(f"the device view is not host visible (the {view.device.kind} device's memory "
                                    "cannot be addressed by the host), which tinygrad's from_blob needs: copy it "
                                    "out with allocation.device_to_host(...) instead")
    if 0 in shape:
        return tg.Tensor.empty(*shape, dtype=tg_dtype, device=name)
    size = dtype.itemsize
    if any(s % size for s in strides):
        raise StrideWeaveValueError(f"the device view's byte strides {strides} are not whole {dtype.name} items")
    elements = tuple(s // size for s in strides)
    if _plan(shape, elements) is None:
        raise StrideWeaveValueError(f"the device view's strides {strides} are not one dense block of memory")
    # The view holds its allocation (a use of it: free() is refused) and device while tinygrad holds the buffer.
    return _lend(tg, pointer, size, shape, elements, tg_dtype, name, view)


def to_tinygrad(tensor_or_device_view, *, device=None):
    """A tinygrad Tensor over a StrideWeave CPU tensor's, or a host-visible
    device view's, memory, no copy.

    `tensor_or_device_view` is a strideweave.Tensor on a host-addressable
    carrier (carriers.CPU or carriers.Host) or a strideweave.DeviceView
    (DeviceAllocation.view()) whose memory is host visible. `device` is
    tinygrad's host device, "CPU" (or "CLANG" in older releases) by default.

    The result has the tensor's shape, dtype and values: element (i, j, ...)
    is t[i, j, ...], as in t.numpy(). A dense first-mode-fastest (M, N)
    tensor is the row-major (N, M) buffer, so the result is
    Tensor.from_blob(ptr, (N, M)).permute(1, 0); any permutation of a dense
    layout, negative strides and broadcast modes map the same way (permute,
    flip, expand). Writes are shared both ways: StrideWeave writes (t[...] =,
    in-place ops) are seen by what tinygrad realizes afterwards, and
    tinygrad's assign() writes the StrideWeave memory.

    The StrideWeave tensor stays alive, and its carrier counts it as an
    export (release() is refused), until tinygrad drops the buffer: deleting
    the StrideWeave handle is safe. Disposing the carrier or moving out of it
    frees the memory regardless; do not.

    A device view gives a tensor of the view's shape and dtype, which are
    its object spec's (checked again here), laid out as its byte strides
    say (dense, first mode fastest: the permuted row-major buffer, as
    above). Device copies (host_to_device, device_to_host) and tinygrad
    read and write the same bytes. The view, and with it its allocation
    (whose free() is refused) and device, stays alive until tinygrad drops
    the buffer. A device restart frees the memory regardless; realize what
    tinygrad needs first.

    An empty tensor gives an empty tinygrad tensor (nothing to share).

    TypeError: not a strideweave.Tensor or DeviceView, a dtype tinygrad
    lacks, or a device that is not a str. ValueError: a released carrier; a
    carrier whose memory is not host addressable (Vulkan, File, Zstd; a
    TiledEvictable's full tensor: project the tiles first); a read-only
    carrier (tinygrad has no read-only buffers); a layout that is not one
    dense block (slices with gaps, overlapping strides, nested modes: make it
    contiguous first); a device view that is not host visible (a fake
    device's with host_visible=False, device-local GPU memory); a tinygrad
    device that is not host memory. StaleHandleError: a device view made
    before its device restarted.
    """
    t = tensor_or_device_view
    if isinstance(t, DeviceView):
        return _device_view_to_tinygrad(_tinygrad(), t, device)
    if not isinstance(t, Tensor):
        raise StrideWeaveTypeError(f"to_tinygrad takes a strideweave.Tensor on a CPU or Host carrier or a "
                                   f"strideweave.DeviceView, not {type(t).__name__}")
    tg = _tinygrad()
    dtype = t.dtype
    tg_dtype = _tinygrad_dtype(tg, dtype)
    name = _device(tg, device)
    carrier = t.carrier
    kind = type(carrier).__name__
    if carrier.is_released():
        raise StrideWeaveValueError(f"the tensor's {kind} carrier has been released")
    shape = tuple(t.shape)
    if t.numel() == 0:
        return tg.Tensor.empty(*shape, dtype=tg_dtype, device=name)
    try:
        base = N.sw_carrier_host_pointer(carrier._h)
    except StrideWeaveNotImplementedError:
        base = None
    if not base:
        hint = ("project the tiles you need (TiledEvictable.project) and pass the compact tensor"
                if N.sw_carrier_kind(carrier._h) == N.SW_CARRIER_TILED else
                "move it to a CPU carrier (move_async) or copy it (t.numpy())")
        raise StrideWeaveValueError(f"the tensor's {kind} carrier is not host memory, which tinygrad's from_blob "
                                    f"needs: {hint}")
    if carrier.is_read_only():
        raise StrideWeaveValueError(f"the tensor's {kind} carrier is read-only and a tinygrad tensor can be "
                                    "written (assign): copy it first (sw.clone(t))")
    layout = t.layout
    strides = flat_strides(layout)
    if strides is None or _plan(shape, strides) is None:
        raise StrideWeaveValueError(f"layout {layout} is not one dense block of memory (a slice with gaps, "
                                    "overlapping strides or a nested mode), which tinygrad's from_blob cannot "
                                    "read: make it contiguous first (sw.contiguous(t))")
    # The owner holds the StrideWeave tensor and counts as an export of its carrier while it lives.
    owner = _ArrayView(None, t, carrier)
    return _lend(tg, base + t.offset * dtype.itemsize, dtype.itemsize, shape, strides, tg_dtype, name, owner)
