"""The one conversion of tensor arguments that every entry point shares.

A strideweave Tensor is taken as it is. A NumPy array or a CPU tensor of
another library that speaks DLPack (a torch.Tensor, a JAX or CuPy host
array) is taken as a tensor over its memory, without a copy where the
memory can be shared (strideweave.from_numpy / strideweave.from_dlpack,
which strideweave._interop registers here). Anything else is a TypeError
naming what was passed and the conversion to use."""
import numpy as np

from ._awaits import AwaitResult
from ._errors import StrideWeaveNotImplementedError, StrideWeaveTypeError, StrideWeaveValueError
from ._tensor import Tensor

_DL_CPU = 1
_DL_DEVICES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi", 10: "rocm",
               11: "rocm_host", 13: "cuda_managed", 14: "oneapi", 15: "webgpu", 16: "hexagon", 17: "maia"}
_importers = {}


def register_importers(from_numpy, from_dlpack):
    """Sets the functions that import a NumPy array and a DLPack producer."""
    _importers["numpy"] = from_numpy
    _importers["dlpack"] = from_dlpack


def type_name(value):
    """The qualified name of `value`'s type, as a user would write it:
    int, numpy.ndarray, torch.Tensor, strideweave.Tensor."""
    cls = type(value)
    module = cls.__module__
    if module == "builtins":
        return cls.__qualname__
    if module.partition(".")[0] == "strideweave":
        module = "strideweave"
    return f"{module}.{cls.__qualname__}"


def _device_of(value):
    """A foreign tensor's device as its library names it (torch's "cuda:0"),
    else DLPack's (device type, id); None when it names none."""
    device = getattr(value, "device", None)
    if device is not None and not callable(device) and type(device).__module__.partition(".")[0] == "torch":
        return str(device)
    try:
        kind, index = value.__dlpack_device__()
    except Exception:
        return None
    return f"{_DL_DEVICES.get(int(kind), f'DLPack device type {int(kind)}')}:{int(index)}"


def _on_cpu(value):
    try:
        kind, _ = value.__dlpack_device__()
    except Exception:
        return True  # the import itself says what is wrong
    return int(kind) == _DL_CPU


def _refuse(what, value, why):
    raise StrideWeaveTypeError(f"{what} must be a strideweave.Tensor; got {type_name(value)}{why}")


def as_tensor(value, what):
    """`value` as a strideweave Tensor: itself, or a zero-copy import of a
    NumPy array or a CPU DLPack tensor; TypeError otherwise, saying which
    conversion to use. `what` names the argument in messages."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, AwaitResult):
        raise StrideWeaveTypeError(
            f"{what}: got an {type(value).__name__}, not a Tensor; call .wait() for its Tensor first")
    if isinstance(value, np.ndarray):
        try:
            return _importers["numpy"](value)
        except (StrideWeaveTypeError, StrideWeaveValueError) as e:
            _refuse(what, value, f" of dtype {value.dtype}, which strideweave.from_numpy cannot take ({e}); "
                                 "convert it first, e.g. with .astype(numpy.float32)")
    if hasattr(type(value), "__dlpack__"):
        if not _on_cpu(value):
            _refuse(what, value, f" on {_device_of(value)}: move it to the CPU first (e.g. with .cpu())")
        if getattr(value, "requires_grad", False) is True:
            _refuse(what, value, " with requires_grad=True, which DLPack does not export: pass .detach() of it "
                                 "(StrideWeave's autograd does not reach the other library's graph)")
        try:
            return _importers["dlpack"](value)
        except (StrideWeaveTypeError, StrideWeaveNotImplementedError, BufferError, RuntimeError) as e:
            _refuse(what, value, f", which strideweave.from_dlpack cannot take ({e}); convert it to a supported "
                                 "dtype first (e.g. .float())")
    _refuse(what, value, "; convert it with strideweave.tensor(...) (a copy), or pass a NumPy array or a CPU "
                         "DLPack tensor (e.g. a torch.Tensor), which are taken without a copy")
