"""Devices of the device bridge (sw_device_t): host, fake and Vulkan memory
with allocations of an object spec (dtype, shape), exact-range copies and
views (the Vulkan device is also the one behind carriers.Vulkan)."""
import threading

from . import _dtypes, _runtime
from ._checks import finite, nonnegative
from ._errors import StrideWeaveTypeError
from ._lib import native as N

_KINDS = {N.SW_DEVICE_HOST: "host", N.SW_DEVICE_FAKE: "fake", N.SW_DEVICE_VULKAN: "vulkan"}


def _shape(shape):
    """A spec shape: a tuple of ints >= 0 (an int is a rank-1 shape)."""
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    return tuple(nonnegative(n, "a shape extent") for n in finite(shape, "shape"))


class Device:
    """A backend's memory behind the device bridge, with a generation that
    every restart (or device loss) bumps. Created with Device.host(),
    Device.fake() or Device.vulkan()."""

    __slots__ = ("_h", "_rt", "__weakref__")

    def __init__(self, *args, **kwargs):
        raise StrideWeaveTypeError("use Device.host(), Device.fake() or Device.vulkan() to get a device")

    @classmethod
    def _adopt(cls, h, rt):
        obj = object.__new__(cls)
        obj._h = h
        obj._rt = rt
        return obj

    @classmethod
    def host(cls, *, runtime=None):
        """A new device over host memory (sw_device_create_host): copies
        are memcpy and every view is host visible."""
        rt = _runtime.resolve(runtime)
        return cls._adopt(N.sw_device_create_host(rt._h), rt)

    @classmethod
    def fake(cls, *, runtime=None, host_visible=True):
        """A new fake device (sw_device_create_fake), which logs every
        backend call. Its memory is host memory; with host_visible=False
        the host cannot address it, as device-local GPU memory: views have
        no host pointer and copies fail (OSError)."""
        rt = _runtime.resolve(runtime)
        if not isinstance(host_visible, bool):
            raise StrideWeaveTypeError(f"host_visible must be a bool, not {type(host_visible).__name__}")
        return cls._adopt(N.device_create_fake(rt._h, host_visible), rt)

    @classmethod
    def vulkan(cls, *, runtime=None):
        """The runtime's default Vulkan device (created on first use; the
        library picks the first physical device)."""
        rt = _runtime.resolve(runtime)
        with _lock:
            device = _vulkan_devices.get(rt)
            if device is None:
                device = _vulkan_devices[rt] = cls._adopt(N.sw_device_create_vulkan(rt._h, None), rt)
            return device

    def __del__(self):
        try:
            N.sw_device_release(self._h)
        except Exception:
            pass

    @property
    def kind(self):
        """The device kind (sw_device_kind_t): "host", "fake" or "vulkan"."""
        return _KINDS.get(N.sw_device_kind(self._h), "unknown")

    @property
    def generation(self):
        """The device generation: 1 at creation, bumped by every restart (handles of an older one are stale)."""
        return N.sw_device_generation(self._h)

    def restart(self):
        """Restarts the device (sw_device_restart): abandons pending copies,
        frees every allocation's memory and bumps the generation, so every
        allocation and view made before is stale (StaleHandleError)."""
        N.sw_device_restart(self._h)

    def alloc(self, shape, dtype=_dtypes.float32, *, extent_bytes=None, alignment=0):
        """A DeviceAllocation for an object of `shape` and `dtype`, its
        object spec (sw_device_alloc). `extent_bytes` defaults to the
        object's bytes (at least 1); `alignment` is a power of two, 0 for
        16. TypeError for a dtype that is not one; ValueError for a negative
        extent, an extent below the object's bytes, a bad alignment;
        MemoryError when the backend fails."""
        dtype = _dtypes.as_dtype(dtype)
        shape = _shape(shape)
        need = dtype.itemsize
        for n in shape:
            need *= n
        extent = max(need, 1) if extent_bytes is None else nonnegative(extent_bytes, "extent_bytes")
        alignment = nonnegative(alignment, "alignment")
        h = N.device_alloc(self._h, dtype.code, shape, extent, 0, alignment)
        return DeviceAllocation._adopt(h, self, dtype, shape)

    def __repr__(self):
        return f"<strideweave.Device {self.kind} generation {self.generation}>"


class DeviceAllocation:
    """Memory on a device for one object spec (dtype, shape), made by
    Device.alloc. Holds its device; freed when the last handle goes (or by
    free()). Bytes are laid out as the view describes them: dense, first
    mode fastest (a NumPy array in Fortran order)."""

    __slots__ = ("_h", "_device", "_dtype", "_shape", "__weakref__")

    def __init__(self, *args, **kwargs):
        raise StrideWeaveTypeError("use Device.alloc(shape, dtype) to allocate")

    @classmethod
    def _adopt(cls, h, device, dtype, shape):
        obj = object.__new__(cls)
        obj._h = h
        obj._device = device
        obj._dtype = dtype
        obj._shape = shape
        return obj

    def __del__(self):
        try:
            N.sw_device_allocation_release(self._h)
        except Exception:
            pass

    @property
    def device(self):
        """The Device it was allocated on."""
        return self._device

    @property
    def dtype(self):
        """The object spec's dtype."""
        return self._dtype

    @property
    def shape(self):
        """The object spec's shape, first mode fastest."""
        return self._shape

    @property
    def extent_bytes(self):
        """The allocation's size in bytes."""
        return N.sw_device_allocation_extent(self._h)

    @property
    def generation(self):
        """The device generation it was made in (stale once the device's moves on)."""
        return N.sw_device_allocation_generation(self._h)

    def host_to_device(self, data, offset=0):
        """Copies the bytes of `data` (bytes, a NumPy array or another
        contiguous buffer) into the allocation at byte `offset`, and returns
        when done. IndexError when the range passes the extent;
        StaleHandleError after a restart; RuntimeError when freed; OSError
        when the copy fails."""
        N.device_copy(self._h, nonnegative(offset, "offset"), data, True)

    def device_to_host(self, out, offset=0):
        """Copies len(out) bytes from byte `offset` of the allocation into
        `out` (a writable contiguous buffer: a NumPy array, a bytearray) and
        returns it, with the checks of host_to_device."""
        N.device_copy(self._h, nonnegative(offset, "offset"), out, False)
        return out

    def view(self, dtype=None, shape=None):
        """A DeviceView of the allocation (sw_device_view): dtype and shape
        default to the object spec's and must be its. TypeError for another
        dtype, ValueError for another shape; StaleHandleError after a
        restart; RuntimeError when freed; OSError when the backend cannot
        provide the view."""
        dtype = self._dtype if dtype is None else _dtypes.as_dtype(dtype)
        shape = self._shape if shape is None else _shape(shape)
        h = N.sw_device_view(self._h, dtype.code, shape)
        return DeviceView._adopt(h, self)

    def free(self):
        """Frees the memory now (sw_device_free). RuntimeError while a
        view, a copy or compute uses it, or when already freed."""
        N.sw_device_free(self._h)

    def __repr__(self):
        return (f"<strideweave.DeviceAllocation {self._dtype.name}{list(self._shape)} on a "
                f"{self._device.kind} device>")


class DeviceView:
    """A view of a DeviceAllocation as a dense first-mode-fastest tensor of
    its object spec (sw_device_view): what strideweave.interop.to_tinygrad
    lends. A live view holds its allocation (and device) and counts as a
    use of it: free() is refused while it lives."""

    __slots__ = ("_h", "_allocation", "_strides", "__weakref__")

    def __init__(self, *args, **kwargs):
        raise StrideWeaveTypeError("use DeviceAllocation.view() to get a view")

    @classmethod
    def _adopt(cls, h, allocation):
        obj = object.__new__(cls)
        obj._h = h
        obj._allocation = allocation
        try:
            obj._strides = obj._describe()[3]
        except BaseException:
            N.sw_device_view_release(h)
            obj._h = None
            raise
        return obj

    def __del__(self):
        try:
            if self._h is not None:
                N.sw_device_view_release(self._h)
        except Exception:
            pass

    def _describe(self):
        """(host address or 0, dtype, shape, byte strides) from the library
        (sw_device_view_describe); StaleHandleError after a restart."""
        pointer, code, shape, strides = N.device_view_describe(self._h)
        return pointer, _dtypes.by_code(code), shape, strides

    @property
    def allocation(self):
        """The DeviceAllocation viewed."""
        return self._allocation

    @property
    def device(self):
        """The Device of the allocation."""
        return self._allocation._device

    @property
    def dtype(self):
        """The element dtype (the object spec's)."""
        return self._allocation._dtype

    @property
    def shape(self):
        """The shape (the object spec's), first mode fastest."""
        return self._allocation._shape

    @property
    def strides(self):
        """Byte strides: dense, first mode fastest (stride i is the product
        of the extents before it, times the item size)."""
        return self._strides

    @property
    def pointer(self):
        """The host address of element 0, or None when the memory is not
        host visible. StaleHandleError after a restart."""
        return self._describe()[0] or None

    @property
    def host_visible(self):
        """Whether the host can address the memory (pointer is not None)."""
        return self.pointer is not None

    @property
    def generation(self):
        """The device generation the view belongs to."""
        return self._allocation.generation

    def __repr__(self):
        a = self._allocation
        return f"<strideweave.DeviceView {a._dtype.name}{list(a._shape)} on a {a._device.kind} device>"


_lock = threading.Lock()
_vulkan_devices = {}
