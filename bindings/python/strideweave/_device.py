"""Devices of the device bridge (sw_device_t): the Vulkan device behind
carriers.Vulkan."""
import threading

from . import _runtime
from ._errors import StrideWeaveTypeError
from ._lib import native as N

_KINDS = {N.SW_DEVICE_HOST: "host", N.SW_DEVICE_FAKE: "fake", N.SW_DEVICE_VULKAN: "vulkan"}


class Device:
    """A backend's memory behind the device bridge, with a generation that
    every restart (or device loss) bumps. Created with Device.vulkan()."""

    __slots__ = ("_h", "_rt", "__weakref__")

    def __init__(self, *args, **kwargs):
        raise StrideWeaveTypeError("use Device.vulkan() to get a device")

    @classmethod
    def _adopt(cls, h, rt):
        obj = object.__new__(cls)
        obj._h = h
        obj._rt = rt
        return obj

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
        """The device kind (sw_device_kind_t), e.g. Vulkan."""
        return _KINDS.get(N.sw_device_kind(self._h), "unknown")

    @property
    def generation(self):
        """The device generation: 1 at creation, bumped by every restart (handles of an older one are stale)."""
        return N.sw_device_generation(self._h)

    def __repr__(self):
        return f"<strideweave.Device {self.kind} generation {self.generation}>"


_lock = threading.Lock()
_vulkan_devices = {}
