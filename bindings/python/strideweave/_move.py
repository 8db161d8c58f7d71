"""move_async: moving a tensor's values to another carrier."""
from ._awaits import AwaitMove, AwaitResult
from ._errors import StrideWeaveRuntimeError, StrideWeaveTypeError
from ._lib import native as N
from ._tensor import Tensor
from .carriers import Carrier


def move_async(tensor, destination):
    """Starts moving `tensor`'s values into `destination` (same dtype; empty
    or large enough). On success the result is a dense tensor at slot 0 of
    the destination and the source carrier is released, so, as release(),
    it is refused (RuntimeError) while a NumPy or DLPack view of the source
    carrier is alive."""
    if isinstance(tensor, AwaitResult) or not isinstance(tensor, Tensor):
        raise StrideWeaveTypeError(f"move_async needs a Tensor, not {type(tensor).__name__}")
    if not isinstance(destination, Carrier):
        raise StrideWeaveTypeError(f"destination must be a Carrier, not {type(destination).__name__}")
    exports = tensor.carrier._exports
    if exports:
        raise StrideWeaveRuntimeError(
            f"the source carrier's memory is shared with {exports} NumPy/DLPack view(s), and a move releases "
            "it; drop them first")
    return AwaitMove._adopt(N.sw_move_async(tensor._h, destination._h), tensor._rt)
