"""Carriers: where a tensor's physical slots live."""
from ._carrier import CPU, Carrier, File, FileIO, Host, Remote, Vulkan, Zstd
from .tiled_evictable import TiledEvictable, TiledResidencyFacet

__all__ = ["Carrier", "CPU", "Host", "File", "FileIO", "Zstd", "Remote", "Vulkan", "TiledEvictable",
           "TiledResidencyFacet"]
