"""Carriers: where a tensor's physical slots live."""
from .. import _handles
from ._carrier import CPU, Carrier, File, Host, Vulkan, Zstd
from .tiled_evictable import TiledEvictable, TiledResidencyFacet

for _cls in (CPU, Host, File, Zstd, Vulkan, TiledEvictable):
    _handles.carrier_classes[_cls._kind] = _cls
del _cls

__all__ = ["Carrier", "CPU", "Host", "File", "Zstd", "Vulkan", "TiledEvictable", "TiledResidencyFacet"]
