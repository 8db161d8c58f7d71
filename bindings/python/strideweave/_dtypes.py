"""Element types: sw.float32 ... sw.bool_, and bfloat16's conversions (NumPy
has no bfloat16: its values travel as uint16 bits)."""
import numpy as np

from ._errors import StrideWeaveTypeError


class DType:
    """One StrideWeave element type. Compare with `is` or `==`."""

    __slots__ = ("name", "code", "itemsize", "numpy", "is_floating", "dlpack", "block_elements", "block_bytes")

    def __init__(self, name, code, itemsize, numpy_dtype, is_floating, dlpack, block=None):
        self.name = name
        self.code = code
        # Bytes per element; 0 for a block-quantized dtype, whose elements
        # share their block's bytes (block_bytes bytes per block_elements).
        self.itemsize = itemsize
        self.block_elements, self.block_bytes = block if block is not None else (1, itemsize)
        # The NumPy dtype of the same bits; None for bfloat16, which NumPy lacks.
        self.numpy = None if numpy_dtype is None else np.dtype(numpy_dtype)
        self.is_floating = is_floating
        self.dlpack = dlpack  # (type code, bits)

    @property
    def is_quantized(self):
        """Whether this is a block-quantized dtype (q8_0, q4_0, q4_k, q6_k, mxfp4)."""
        return self.block_elements > 1

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

# GGUF's block-quantized dtypes: (elements, bytes) per block, along the first mode.
q8_0 = DType("q8_0", 9, 0, None, False, None, (32, 34))
q4_0 = DType("q4_0", 10, 0, None, False, None, (32, 18))
q4_k = DType("q4_k", 11, 0, None, False, None, (256, 144))
q6_k = DType("q6_k", 12, 0, None, False, None, (256, 210))
mxfp4 = DType("mxfp4", 13, 0, None, False, None, (32, 17))

ALL = (float32, float64, float16, bfloat16, int32, int64, uint8, bool_, q8_0, q4_0, q4_k, q6_k, mxfp4)
QUANTIZED = (q8_0, q4_0, q4_k, q6_k, mxfp4)
_BY_CODE = {d.code: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_NUMPY = {d.numpy: d for d in ALL if d.numpy is not None}
_BY_DLPACK = {d.dlpack: d for d in ALL if d.dlpack is not None}


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
