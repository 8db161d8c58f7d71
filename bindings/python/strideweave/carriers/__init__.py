"""Carriers: where a tensor's physical slots live."""
from ._carrier import CPU, Carrier, File, Host, Vulkan, Zstd
from .tiled_evictable import TiledEvictable, TiledResidencyFacet

__all__ = ["Carrier", "CPU", "Host", "File", "Zstd", "Vulkan", "TiledEvictable", "TiledResidencyFacet"]
