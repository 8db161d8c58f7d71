"""Element types: sw.float32 ... sw.bool_, and bfloat16's conversions (NumPy
has no bfloat16: its values travel as uint16 bits)."""
import numpy as np

from ._errors import StrideWeaveTypeError


class DType:
    """One StrideWeave element type. Compare with `is` or `==`."""

    __slots__ = ("name", "code", "itemsize", "numpy", "is_floating", "dlpack")

    def __init__(self, name, code, itemsize, numpy_dtype, is_floating, dlpack):
        self.name = name
        self.code = code
        self.itemsize = itemsize
        # The NumPy dtype of the same bits; None for bfloat16, which NumPy lacks.
        self.numpy = None if numpy_dtype is None else np.dtype(numpy_dtype)
        self.is_floating = is_floating
        self.dlpack = dlpack  # (type code, bits)

    def __repr__(self):
        return f"strideweave.{self.name if self.name != 'bool' else 'bool_'}"

    def __reduce__(self):
        return (by_name, (self.name,))


float32 = DType("float32", 1, 4, np.float32, True, (2, 32))
float64 = DType("float64", 2, 8, np.float64, True, (2, 64))
float16 = DType("float16", 3, 2, np.float16, True, (2, 16))
bfloat16 = DType("bfloat16", 4, 2, None, True, (4, 16))
int32 = DType("int32", 5, 4, np.int32, False, (0, 32))
int64 = DType("int64", 6, 8, np.int64, False, (0, 64))
uint8 = DType("uint8", 7, 1, np.uint8, False, (1, 8))
bool_ = DType("bool", 8, 1, np.bool_, False, (6, 8))

ALL = (float32, float64, float16, bfloat16, int32, int64, uint8, bool_)
_BY_CODE = {d.code: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_NUMPY = {d.numpy: d for d in ALL if d.numpy is not None}
_BY_DLPACK = {d.dlpack: d for d in ALL}


def by_code(code):
    return _BY_CODE[code]


def by_name(name):
    return _BY_NAME[name]


def from_numpy_dtype(dtype):
    """The DType for a NumPy dtype, or None."""
    return _BY_NUMPY.get(np.dtype(dtype).newbyteorder("="))


def from_dlpack_dtype(code, bits, lanes):
    if lanes != 1:
        return None
    return _BY_DLPACK.get((code, bits))


def as_dtype(value):
    """A DType from a DType, a NumPy dtype or a name; TypeError otherwise."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    if value is bool:
        return bool_
    try:
        found = from_numpy_dtype(value)
    except TypeError:
        found = None
    if found is None:
        raise StrideWeaveTypeError(f"{value!r} is not a StrideWeave dtype")
    return found


def bf16_to_float32(bits):
    """float32 values of bfloat16 bits (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def bf16_bits(values):
    """Rounds float values to bfloat16 bits (round to nearest even)."""
    f = np.asarray(values, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(f)
    return np.where(nan, 0x7FC0, rounded).astype(np.uint16)
