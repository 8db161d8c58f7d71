"""The six central operations. A Python number on either side is a weak
scalar that takes the tensor's dtype."""
import numbers

import numpy as np

from . import _native as N
from ._errors import StrideWeaveTypeError
from ._handles import integer

_add = N.sw_add
_emul = N.sw_elementwise_mul
_mul = N.sw_mul
_mul_scalar = N.sw_mul_scalar
_scalar_mul = N.sw_scalar_mul
_relu = N.sw_relu
_reduce_sum = N.sw_reduce_sum
_matmul = N.sw_matmul


# Python floats and ints are checked by exact type first: the abstract
# numbers.Real check costs more than the rest of a small op's call.
_PLAIN_NUMBERS = frozenset((float, int))


def _is_number(x):
    if type(x) in _PLAIN_NUMBERS:
        return True
    return isinstance(x, (numbers.Real, np.number)) and not isinstance(x, (bool, np.bool_))


def _reject(x, op):
    from ._awaits import AwaitResult

    if isinstance(x, AwaitResult):
        raise StrideWeaveTypeError(
            f"{op}: got an {type(x).__name__}, not a Tensor; call .wait() for its Tensor first")
    raise StrideWeaveTypeError(f"{op}: expected a Tensor, got {type(x).__name__}")


def _binary(a, b, op):
    if not isinstance(a, Tensor):
        if _is_number(a) and isinstance(b, Tensor):
            a = _scalar_tensor(a, b)
        else:
            _reject(a, op)
    if not isinstance(b, Tensor):
        if _is_number(b):
            b = _scalar_tensor(b, a)
        else:
            _reject(b, op)
    return a, b


def _wrap(h, like):
    t = _new(Tensor)
    t._h = h
    t._rt = like._rt
    return t


def add(a, b):
    """a + b, broadcasting NumPy style."""
    if type(a) is not Tensor or type(b) is not Tensor:
        a, b = _binary(a, b, "add")
    return _wrap(_add(a._h, b._h), a)


def elementwise_mul(a, b):
    """a * b elementwise, broadcasting NumPy style."""
    if type(a) is not Tensor or type(b) is not Tensor:
        a, b = _binary(a, b, "elementwise_mul")
    return _wrap(_emul(a._h, b._h), a)


def mul(a, b):
    """tensor * tensor (elementwise), tensor * number or number * tensor."""
    ta, tb = type(a) is Tensor, type(b) is Tensor
    if ta and tb:
        return _wrap(_mul(a._h, b._h), a)
    if ta and type(b) is float:
        return _wrap(_mul_scalar(a._h, b), a)
    if ta and _is_number(b):
        return _wrap(_mul_scalar(a._h, float(b)), a)
    if tb and _is_number(a):
        return _wrap(_scalar_mul(float(a), b._h), b)
    if not isinstance(a, Tensor) and not _is_number(a):
        _reject(a, "mul")
    _reject(b, "mul")


def relu(t):
    if type(t) is not Tensor:
        _reject(t, "relu")
    return _wrap(_relu(t._h), t)


def reduce_sum(t, axes=None, keepdims=False):
    """Sums over `axes` (all when None; negative counts from the end)."""
    if type(t) is not Tensor:
        _reject(t, "reduce_sum")
    if axes is None:
        axes = ()
    elif isinstance(axes, (list, tuple)):
        axes = tuple(integer(a, "axis") for a in axes)
    else:
        axes = (integer(axes, "axis"),)
    return _wrap(_reduce_sum(t._h, axes, bool(keepdims)), t)


def matmul(a, b, *, out_dtype=None):
    """NumPy matmul: (..., M, K) @ (..., K, N).

    The result has the operands' dtype, as in PyTorch (bfloat16 @ bfloat16 is
    bfloat16, rounded once from float32 sums); ``out_dtype=sw.float32`` with
    float16 or bfloat16 operands returns those float32 sums instead."""
    if type(a) is not Tensor:
        _reject(a, "matmul")
    if type(b) is not Tensor:
        _reject(b, "matmul")
    if out_dtype is None:
        return _wrap(_matmul(a._h, b._h), a)
    if not isinstance(out_dtype, DType):
        raise TypeError(f"matmul: out_dtype must be a strideweave dtype, not {type(out_dtype).__name__}")
    return _wrap(N.matmul_ex(a._h, b._h, out_dtype.code), a)


from ._dtypes import DType  # noqa: E402
from ._tensor import Tensor, _new  # noqa: E402
from ._interop import scalar_tensor as _scalar_tensor  # noqa: E402  (a rank-0 tensor in `like`'s dtype)
