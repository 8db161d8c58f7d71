"""StrideWeave: tensors that do not fit where they are computed.

A thin Python layer over libstrideweave's C ABI (through the private SWIG
module strideweave._native). See docs/quickstart-python.md for a tour of
the surface and bindings/python/README.md for how the package is built.
"""
from . import _lib, carriers, interop
from ._autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from ._awaits import AwaitMove, AwaitProjection, AwaitResidency, AwaitResult
from ._device import Device, DeviceAllocation, DeviceView
from ._dtypes import DType, bfloat16, bool_, float16, float32, float64, int32, int64, mxfp4, q4_0, q4_k, q6_k, q8_0, uint8
from ._errors import (CancelledError, DataCorruptError, DeviceLostError, Error, ErrorCode, InternalError,
                      StaleHandleError, StrideWeaveCancelledError, StrideWeaveIndexError, StrideWeaveMemoryError,
                      StrideWeaveNotImplementedError, StrideWeaveOSError, StrideWeaveRuntimeError,
                      StrideWeaveTimeoutError, StrideWeaveTypeError, StrideWeaveValueError)
from ._interop import from_blocks, from_dlpack, from_numpy
from ._layout import Layout, Shape, Stride
from ._model_files import FileTensor, save_gguf, save_npy, save_safetensors
from ._move import move_async
from ._ops import add, elementwise_mul, matmul, mul, reduce_sum
from ._runtime import Runtime, default_runtime
from ._surface import (  # noqa: A004 - NumPy's names (sw.sum, sw.max, ...)
    relu, zeros, empty, ones, full, arange, tensor, rand, randn, as_dtype, astype, reshape, view, flatten,
    unsqueeze, squeeze, expand, contiguous, clone, detach, neg, abs, exp, log, sqrt, rsqrt, silu, gelu, sigmoid,
    tanh, sub, div, pow, maximum, minimum, eq, ne, lt, le, gt, ge, where, mean, amax, amin, sum, max, min, argmax,
    argmin, softmax, log_softmax, topk, index_select, gather, index_add, scatter_add, cat, stack)
from ._tensor import Tensor
from ._tiles import LRUPolicy, ResidencyPlan, ResidencyPolicy, TileSelection, TileSet
from .carriers.tiled_evictable import TiledEvictable, TiledResidencyFacet, TileState, expert_ffn

__version__ = _lib.native.sw_version_string()

__all__ = [
    "Error", "ErrorCode", "StrideWeaveTypeError", "StrideWeaveValueError", "StrideWeaveRuntimeError",
    "StrideWeaveNotImplementedError", "StrideWeaveIndexError", "StrideWeaveMemoryError", "StrideWeaveOSError",
    "DataCorruptError", "DeviceLostError", "StaleHandleError", "StrideWeaveTimeoutError", "StrideWeaveCancelledError",
    "InternalError",
    "DType", "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool_",
    "q8_0", "q4_0", "q4_k", "q6_k", "mxfp4", "from_blocks",
    "Runtime", "default_runtime", "Shape", "Stride", "Layout", "Tensor",
    "add", "elementwise_mul", "mul", "relu", "reduce_sum", "matmul", "move_async",
    "zeros", "empty", "ones", "full", "arange", "tensor", "rand", "randn", "as_dtype", "astype", "reshape", "view",
    "flatten", "unsqueeze", "squeeze", "expand", "contiguous", "clone", "detach", "neg", "abs", "exp", "log",
    "sqrt", "rsqrt", "silu", "gelu", "sigmoid", "tanh", "sub", "div", "pow", "maximum", "minimum", "eq", "ne", "lt",
    "le", "gt", "ge", "where", "mean", "amax", "amin", "sum", "max", "min", "argmax", "argmin", "softmax",
    "log_softmax", "topk", "index_select", "gather", "index_add", "scatter_add", "cat", "stack",
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "from_numpy", "from_dlpack",
    "AwaitResult", "AwaitMove", "AwaitProjection", "AwaitResidency",
    "TileSelection", "TileSet", "ResidencyPlan", "ResidencyPolicy", "LRUPolicy",
    "TiledEvictable", "TiledResidencyFacet", "TileState", "expert_ffn", "Device", "DeviceAllocation",
    "DeviceView", "carriers", "interop",
    "FileTensor", "save_safetensors", "save_npy", "save_gguf",
]
