"""Model files as secondary tiers: .npy, .safetensors, GGUF and raw tensors
opened as File carriers with the TiledEvictable geometry that makes each tile
one expert as the file stores it, and tensors saved to .safetensors / .npy /
GGUF.

A model file indexes its tensors row-major (the last index fastest);
StrideWeave's dense layouts are first mode fastest. So a row-major
(E, O, I) file is, as it lies, the tensor (I, O, E): FileTensor describes
that tensor (`logical_shape`), the geometry (`grid_shape`, `tile_shape`) and
the permutation back to the file's own indexing (`view`). See
docs/model-files.md."""
import os
import struct

from . import _dtypes
from . import _handles
from . import _runtime
from ._checks import file_io, finite, nonnegative
from ._errors import StrideWeaveTypeError, StrideWeaveValueError
from ._lib import native as N
from ._tensor import Tensor


class FileTensor:
    """What File.open_npy / open_safetensors / open_gguf / open_raw found: the read-only
    File `carrier` and how to use it.

    - `shape`: the shape as the file indexes it (NumPy's shape; a stack of
      tensors puts their count first), `dtype`, `order` ("C" or "F"),
      `data_offset`, `data_bytes`, `segments` (file regions read);
    - `logical_shape`: the first-mode-fastest shape of the full tensor
      (`shape` reversed for a C-order file);
    - `grid_shape`, `tile_shape`: the TiledEvictable geometry giving each
      tile one index of the file's slowest mode (one expert);
    - `permutation`: mode i of the file's indexing is mode permutation[i] of
      the full tensor.

    `tiled()` builds the TiledEvictable; `view(full)` indexes its full tensor
    as the file does. Pass the full tensor (`tiled.full_tensor()`) to
    project, scatter and ops; use the view to read elements by the file's
    indices and to save."""

    __slots__ = ("carrier", "dtype", "shape", "order", "data_offset", "data_bytes", "segments", "logical_shape",
                 "grid_shape", "tile_shape", "permutation")

    def __init__(self, carrier, info):
        self.carrier = carrier
        self.dtype = _dtypes.by_code(info["dtype"])
        for key in ("shape", "order", "data_offset", "data_bytes", "segments", "logical_shape", "grid_shape",
                    "tile_shape", "permutation"):
            setattr(self, key, info[key])

    def tiled(self, primary=None, *, residency_policy=None):
        """A TiledEvictable over the file with this geometry; `primary`
        defaults to an empty CPU carrier of the file's dtype. All tiles start
        in the file (secondary); promote or project to read them."""
        if primary is None:
            primary = _handles.carrier_class(N.SW_CARRIER_CPU)(0, dtype=self.dtype, runtime=self.carrier._rt)
        return _handles.carrier_class(N.SW_CARRIER_TILED)(primary, self.carrier, self.grid_shape, self.tile_shape,
                              residency_policy=residency_policy)

    def view(self, tensor):
        """`tensor` (the full tensor of `tiled()`, or any tensor of this
        rank) indexed as the file does: view[e, o, i] is
        numpy.load(path)[e, o, i]. A layout permutation, no copy, not
        recorded for autograd."""
        if not isinstance(tensor, Tensor):
            raise StrideWeaveTypeError(f"tensor must be a strideweave.Tensor, not {type(tensor).__name__}")
        t = Tensor._adopt(N.file_tensor_view(tensor._h, list(self.permutation)), tensor._rt)
        t._carrier = tensor._carrier
        return t

    def __repr__(self):
        return (f"FileTensor(shape={self.shape}, dtype={self.dtype.name}, order={self.order!r}, "
                f"logical_shape={self.logical_shape}, grid_shape={self.grid_shape}, tile_shape={self.tile_shape})")


def _opened(result, cls, rt):
    h, info = result
    obj = object.__new__(cls)
    obj._init(h, rt)
    return FileTensor(obj, info)


def open_npy(cls, path, *, direct_io=False, chunk_bytes=0, requests_in_flight=0, runtime=None):
    io = file_io(chunk_bytes, requests_in_flight)
    rt = _runtime.resolve(runtime)
    return _opened(N.carrier_open_npy(rt._h, os.fspath(path), bool(direct_io), *io), cls, rt)


def _is_one_path(path):
    return isinstance(path, (str, bytes, os.PathLike))


def open_safetensors(cls, path, name, *, direct_io=False, chunk_bytes=0, requests_in_flight=0, runtime=None):
    io = file_io(chunk_bytes, requests_in_flight)
    rt = _runtime.resolve(runtime)
    if isinstance(name, str):
        if not _is_one_path(path):
            raise StrideWeaveTypeError(f"path must be a str or os.PathLike for one tensor name, not "
                                       f"{type(path).__name__}; give a list of names with a list of paths")
        return _opened(N.carrier_open_safetensors(rt._h, os.fspath(path), name, bool(direct_io), *io), cls, rt)
    if isinstance(name, (bytes, bytearray)):
        raise StrideWeaveTypeError("a tensor name must be str, not bytes")
    names = finite(name, "names")
    if _is_one_path(path):
        return _opened(N.carrier_open_safetensors_stack(rt._h, os.fspath(path), names, bool(direct_io), *io), cls, rt)
    if isinstance(path, (bytearray, memoryview)):
        raise StrideWeaveTypeError(f"path must be a str, os.PathLike or a sequence of them, not {type(path).__name__}")
    try:
        paths = finite(path, "path")
    except StrideWeaveTypeError:
        raise StrideWeaveTypeError(f"path must be a str, os.PathLike or a sequence of them, not "
                                   f"{type(path).__name__}") from None
    if len(paths) != len(names):
        raise StrideWeaveValueError(f"{len(paths)} paths for {len(names)} tensor names: path must be one file, or "
                                    "one path per name")
    files = []
    for i, p in enumerate(paths):
        if not _is_one_path(p):
            raise StrideWeaveTypeError(f"path[{i}] must be a str or os.PathLike, not {type(p).__name__}")
        files.append(os.fspath(p))
    return _opened(N.carrier_open_safetensors_stack_files(rt._h, files, names, bool(direct_io), *io), cls, rt)


def open_gguf(cls, path, name, *, direct_io=False, chunk_bytes=0, requests_in_flight=0, runtime=None):
    io = file_io(chunk_bytes, requests_in_flight)
    rt = _runtime.resolve(runtime)
    if not isinstance(name, str):
        raise StrideWeaveTypeError(f"name must be a str, not {type(name).__name__}")
    return _opened(N.carrier_open_gguf(rt._h, os.fspath(path), name, bool(direct_io), *io), cls, rt)


_ORDERS = {"C": N.SW_FILE_ORDER_ROW_MAJOR, "F": N.SW_FILE_ORDER_FIRST_MODE_FASTEST}


def open_raw(cls, path, shape, *, dtype=_dtypes.float32, offset=0, order="C", direct_io=False, chunk_bytes=0,
             requests_in_flight=0, runtime=None):
    io = file_io(chunk_bytes, requests_in_flight)
    rt = _runtime.resolve(runtime)
    if order not in _ORDERS:
        raise StrideWeaveValueError(f"order must be 'C' (row-major) or 'F' (first mode fastest), not {order!r}")
    shape = finite(shape, "shape")
    return _opened(N.carrier_open_raw_tensor(rt._h, os.fspath(path), _dtypes.as_dtype(dtype).code,
                                             nonnegative(offset, "offset"), shape, _ORDERS[order], bool(direct_io),
                                             *io),
                   cls, rt)


def _as_tensor(value, what):
    if isinstance(value, _handles.carrier_class(N.SW_CARRIER_TILED)):
        return value.full_tensor()
    if isinstance(value, Tensor):
        return value
    raise StrideWeaveTypeError(f"{what} must be a strideweave.Tensor or TiledEvictable, not {type(value).__name__}")


def save_safetensors(path, tensors, *, metadata=None):
    """Saves `tensors` (a dict of name -> Tensor or TiledEvictable, written in
    its order) to a .safetensors file, each with its shape and its own
    indexing: `safetensors.numpy.load_file(path)[name][c]` is element c of the
    tensor (save `FileTensor.view(full)` to keep a file's (E, O, I)
    indexing). A TiledEvictable saves its full tensor, read tile by tile from
    the tier each tile is in (dirty values included, no promotion).
    `metadata` is a dict of str -> str written as "__metadata__". The file is
    written under a temporary name and renamed over `path` at the end."""
    if not isinstance(tensors, dict):
        raise StrideWeaveTypeError(f"tensors must be a dict of name -> tensor, not {type(tensors).__name__}")
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, dict):
        raise StrideWeaveTypeError(f"metadata must be a dict of str -> str, not {type(metadata).__name__}")
    names = list(tensors)
    values = [_as_tensor(tensors[n], f"tensors[{n!r}]") for n in names]
    N.save_safetensors(os.fspath(path), names, [t._h for t in values], list(metadata), list(metadata.values()))


def save_npy(path, tensor):
    """Saves one Tensor or TiledEvictable (its full tensor) to a .npy file
    (format 1.0, C order) that numpy.load reads back with the tensor's shape
    and indexing. NotImplementedError for bfloat16, which NumPy lacks."""
    N.save_npy(os.fspath(path), _as_tensor(tensor, "tensor")._h)


# numpy scalar types -> GGUF value types and their struct formats.
_GGUF_NUMPY = {"uint8": (N.SW_GGUF_TYPE_UINT8, "<B"), "int8": (N.SW_GGUF_TYPE_INT8, "<b"),
               "uint16": (N.SW_GGUF_TYPE_UINT16, "<H"), "int16": (N.SW_GGUF_TYPE_INT16, "<h"),
               "uint32": (N.SW_GGUF_TYPE_UINT32, "<I"), "int32": (N.SW_GGUF_TYPE_INT32, "<i"),
               "uint64": (N.SW_GGUF_TYPE_UINT64, "<Q"), "int64": (N.SW_GGUF_TYPE_INT64, "<q"),
               "float32": (N.SW_GGUF_TYPE_FLOAT32, "<f"), "float64": (N.SW_GGUF_TYPE_FLOAT64, "<d"),
               "bool": (N.SW_GGUF_TYPE_BOOL, "<?"), "bool_": (N.SW_GGUF_TYPE_BOOL, "<?")}


def _gguf_value(key, value):
    """(type, bytes) of one metadata value, as sw_save_gguf takes it."""
    if isinstance(value, str):
        if "\0" in value:
            raise StrideWeaveValueError(f"metadata {key!r}: a string value must not contain NUL")
        return N.SW_GGUF_TYPE_STRING, value.encode() + b"\0"
    if isinstance(value, bool):
        return N.SW_GGUF_TYPE_BOOL, struct.pack("<?", value)
    numpy_type = type(value).__name__
    if type(value).__module__ == "numpy" and numpy_type in _GGUF_NUMPY:
        code, fmt = _GGUF_NUMPY[numpy_type]
        return code, struct.pack(fmt, value.item())
    if isinstance(value, int):
        for code, fmt, lo, hi in ((N.SW_GGUF_TYPE_UINT32, "<I", 0, 2 ** 32), (N.SW_GGUF_TYPE_INT32, "<i", -2 ** 31, 0),
                                  (N.SW_GGUF_TYPE_UINT64, "<Q", 0, 2 ** 64), (N.SW_GGUF_TYPE_INT64, "<q", -2 ** 63, 0)):
            if lo <= value < hi:
                return code, struct.pack(fmt, value)
        raise StrideWeaveValueError(f"metadata {key!r}: {value} fits no GGUF integer type")
    if isinstance(value, float):
        return N.SW_GGUF_TYPE_FLOAT32, struct.pack("<f", value)
    if isinstance(value, (list, tuple)):
        raise NotImplementedError(f"metadata {key!r}: array values are not written")
    raise StrideWeaveTypeError(f"metadata {key!r}: a value must be str, bool, int, float or a numpy scalar, not "
                               f"{type(value).__name__}")


def save_gguf(path, tensors, *, metadata=None, alignment=32):
    """Saves `tensors` (a dict of name -> Tensor or TiledEvictable, written in
    its order) to a GGUF (version 3) file that gguf-py's GGUFReader and
    llama.cpp read, as save_safetensors saves them: each tensor with its own
    indexing, GGUFReader's `data` giving it back with the tensor's shape (its
    ggml ne is the shape reversed; save `FileTensor.view(full)` of a file
    opened with File.open_gguf to keep that file's ne). float32, float16,
    bfloat16, float64, int32 and int64 tensors of at most 4 modes, and the
    block-quantized q8_0, q4_0, q4_k, q6_k and mxfp4 ones as their ggml
    types: ne is then the shape as it is (the blocks run along the first
    mode, ggml's ne[0]) and the data their blocks as GGUF stores them, so
    GGUFReader's `data` is the transpose of t.numpy().
    `metadata` maps keys to str (STRING), bool (BOOL), int (UINT32, INT32 when
    negative, UINT64 / INT64 when it does not fit), float (FLOAT32) or numpy
    scalars (their own type: numpy.float64(x) is FLOAT64); arrays are not
    written (NotImplementedError). Each tensor's data starts at a multiple of
    `alignment` (a power of two; another than 32 is written as
    "general.alignment"). The file is written under a temporary name and
    renamed over `path` at the end."""
    if not isinstance(tensors, dict):
        raise StrideWeaveTypeError(f"tensors must be a dict of name -> tensor, not {type(tensors).__name__}")
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, dict):
        raise StrideWeaveTypeError(f"metadata must be a dict of str -> value, not {type(metadata).__name__}")
    names = list(tensors)
    values = [_as_tensor(tensors[n], f"tensors[{n!r}]") for n in names]
    keys, types, packed = [], [], []
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise StrideWeaveTypeError(f"a metadata key must be str, not {type(key).__name__}")
        code, data = _gguf_value(key, value)
        keys.append(key)
        types.append(code)
        packed.append(data)
    if isinstance(alignment, bool) or not isinstance(alignment, int) or not 0 < alignment < 2 ** 32:
        raise StrideWeaveValueError(f"alignment must be a power of two below 2**32, not {alignment!r}")
    N.save_gguf(os.fspath(path), names, [t._h for t in values], keys, types, packed, alignment)
