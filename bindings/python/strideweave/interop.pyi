# Type stubs of strideweave.interop (see strideweave/__init__.pyi).
from typing import Any

from . import DeviceView, Tensor

__all__ = ["to_tinygrad"]

# A tinygrad.Tensor (tinygrad is imported on the first call only, and is not
# a dependency of strideweave).
def to_tinygrad(tensor_or_device_view: Tensor | DeviceView, *, device: str | None = None) -> Any: ...
