"""The six central operations (Tensor's @ calls matmul; its +, -, *, unary -,
relu() and sum() reach add, mul, relu and reduce_sum through
strideweave._surface). A Python number on either side is a weak scalar that
takes the tensor's dtype."""
import numbers

import numpy as np

from . import _dtypes
from ._checks import integer
from ._coerce import as_tensor
from ._errors import StrideWeaveTypeError
from ._layout import Layout
from ._lib import native as N
from ._tensor import Tensor, _new, provide
from .carriers import CPU, Vulkan

_add = N.sw_add
_emul = N.sw_elementwise_mul
_mul = N.sw_mul
_mul_scalar = N.sw_mul_scalar
_scalar_mul = N.sw_scalar_mul
_relu = N.sw_relu
_reduce_sum = N.sw_reduce_sum
_matmul = N.matmul_rows  # sw_matmul / sw_matmul_ex; a row-major b computed transposed (native.i)


# Python floats and ints are checked by exact type first: the abstract
# numbers.Real check costs more than the rest of a small op's call.
_PLAIN_NUMBERS = frozenset((float, int))


def _is_number(x):
    if type(x) in _PLAIN_NUMBERS:
        return True
    return isinstance(x, (numbers.Real, np.number)) and not isinstance(x, (bool, np.bool_))


def _binary(a, b, op):
    if not isinstance(a, Tensor) and not _is_number(a):
        a = as_tensor(a, f"{op}: a")
    if not isinstance(b, Tensor) and not _is_number(b):
        b = as_tensor(b, f"{op}: b")
    if not isinstance(a, Tensor):
        if not isinstance(b, Tensor):
            raise StrideWeaveTypeError(f"{op}: a or b must be a Tensor; got two numbers")
        a = _scalar_tensor(a, b)
    if not isinstance(b, Tensor):
        b = _scalar_tensor(b, a)
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
    if not ta and not _is_number(a):
        a = as_tensor(a, "mul: a")
    if not tb and not _is_number(b):
        b = as_tensor(b, "mul: b")
    if type(a) is Tensor or type(b) is Tensor:
        return mul(a, b)
    raise StrideWeaveTypeError("mul: a or b must be a Tensor; got two numbers")


def relu(t):
    if type(t) is not Tensor:
        t = as_tensor(t, "relu")
    return _wrap(_relu(t._h), t)


def reduce_sum(t, axes=None, keepdims=False):
    """Sums over `axes` (all when None; negative counts from the end)."""
    if type(t) is not Tensor:
        t = as_tensor(t, "reduce_sum")
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
    float16 or bfloat16 operands returns those float32 sums instead.

    Operands are read where they lie, whatever their strides. When ``b`` is
    a row-major matrix (a NumPy array or PyTorch tensor as they come: a
    (K, N) weight) and the product is not tiny (M N K >= 2**15), it is
    computed transposed, into a dense first-mode-fastest (..., N, M) tensor
    returned as its transposed view: a row-major (M, N) result for
    matrices, as NumPy's and PyTorch's (docs/matmul.md). Otherwise the
    result is dense first mode fastest. The values are the same either
    way.

    ``b`` may be block-quantized (q8_0, q4_0, q4_k, q6_k, mxfp4; a (K, N)
    CPU tensor, blocks along K): ``a`` of any float dtype is taken as
    float32 and the blocks are multiplied where they lie, giving float32
    (or ``out_dtype`` bfloat16/float16); no gradients. docs/quantization.md
    gives the error bound."""
    if type(a) is not Tensor:
        a = as_tensor(a, "matmul: a")
    if type(b) is not Tensor:
        b = as_tensor(b, "matmul: b")
    if out_dtype is None:
        return _wrap(_matmul(a._h, b._h, 0), a)
    if not isinstance(out_dtype, _dtypes.DType):
        raise TypeError(f"matmul: out_dtype must be a strideweave dtype, not {type(out_dtype).__name__}")
    return _wrap(_matmul(a._h, b._h, out_dtype.code), a)



def _scalar_tensor(value, like):
    """A rank-0 tensor holding `value` in the dtype of `like`, on a carrier of
    its compute kind (a weak scalar for ops without a scalar form)."""
    dtype, rt = like.dtype, like._rt
    if dtype is _dtypes.float32 or dtype is _dtypes.float64:
        # The common case in a few C calls: this is on the path of `t + 1.0`.
        c = _tensor_carrier(like._h)
        try:
            on_cpu = _carrier_kind(c) == _CPU_KIND
        finally:
            _carrier_release(c)
        if on_cpu:
            h = _tensor_zeros(rt._h, dtype.code, ())
            try:
                _tensor_set(h, (), float(value))
            except BaseException:
                _tensor_release(h)
                raise
            return like._adopt(h, rt)
    if dtype is _dtypes.bfloat16:
        data = _dtypes.bf16_bits([value]).tobytes()
    else:
        data = np.asarray([value], dtype=dtype.numpy).tobytes()
    home = like.carrier
    if isinstance(home, Vulkan):
        carrier = Vulkan(1, dtype=dtype, device=home._device, runtime=rt)
        N.carrier_write_from(carrier._h, 0, 1, data)
    else:
        carrier = CPU._from_host(data, dtype, 1, rt)
    return Tensor(carrier, 0, _SCALAR_LAYOUT)


_SCALAR_LAYOUT = Layout(())
_tensor_carrier, _carrier_kind, _carrier_release = N.sw_tensor_carrier, N.sw_carrier_kind, N.sw_carrier_release
_tensor_zeros, _tensor_set, _tensor_release = N.sw_tensor_zeros, N.sw_tensor_set, N.sw_tensor_release
_CPU_KIND = N.SW_CARRIER_CPU


# The function behind Tensor.__matmul__ and __rmatmul__ (strideweave._tensor);
# strideweave._surface gives those of the other operators (__add__, __mul__, ...),
# which promote dtypes and take the six ops' path (add, mul, relu, reduce_sum)
# where they can.
provide(matmul=matmul)
