"""A GGUF (version 3) file of a checkpoint's routed experts, written as a
stream (its header first, every tensor's size being known from the model's
shapes, then the tensors' blocks layer by layer), and a GGUF header read
back: the metadata's scalars and strings and each tensor's ggml type and ne.
The tensors' data are read by StrideWeave's own opener (File.open_gguf)."""
import struct

from .._errors import DataCorruptError

MAGIC = b"GGUF"
ALIGNMENT = 32

# ggml tensor types of the dtypes written and read here.
GGML_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8, "q4_k": 12, "q6_k": 14, "bf16": 30, "mxfp4": 39}
TYPE_NAMES = {v: k for k, v in GGML_TYPES.items()}
# (elements, bytes) of a block of each.
BLOCKS = {"f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "q4_0": (32, 18), "q8_0": (32, 34), "q4_k": (256, 144),
          "q6_k": (256, 210), "mxfp4": (32, 17)}

# GGUF metadata value types.
_UINT8, _INT8, _UINT16, _INT16, _UINT32, _INT32, _FLOAT32, _BOOL, _STRING, _ARRAY, _UINT64, _INT64, _FLOAT64 = range(13)
_SCALARS = {_UINT8: "<B", _INT8: "<b", _UINT16: "<H", _INT16: "<h", _UINT32: "<I", _INT32: "<i", _FLOAT32: "<f",
            _BOOL: "<?", _UINT64: "<Q", _INT64: "<q", _FLOAT64: "<d"}


def tensor_bytes(type_name, ne):
    elements, nbytes = BLOCKS[type_name]
    count = 1
    for d in ne[1:]:
        count *= d
    return ne[0] // elements * nbytes * count


def _string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _value(value):
    if isinstance(value, str):
        return struct.pack("<I", _STRING) + _string(value)
    if isinstance(value, bool):
        return struct.pack("<I?", _BOOL, value)
    if isinstance(value, int):
        if 0 <= value < 2 ** 32:
            return struct.pack("<II", _UINT32, value)
        return struct.pack("<Iq", _INT64, value)
    if isinstance(value, float):
        return struct.pack("<If", _FLOAT32, value)
    raise TypeError(f"a GGUF metadata value must be str, bool, int or float, not {type(value).__name__}")


class Writer:
    """Writes `tensors` ([(name, type name, ne)], in file order) with
    `metadata` ({key: str, bool, int or float}): the header at once, then
    each tensor's bytes through write(), in the same order, each tensor
    whole before the next. close() checks every byte was written."""

    def __init__(self, f, metadata, tensors):
        self.f = f
        self.sizes = []
        head = [MAGIC, struct.pack("<IQQ", 3, len(tensors), len(metadata))]
        for key, value in metadata.items():
            head.append(_string(key) + _value(value))
        offset = 0
        for name, type_name, ne in tensors:
            head.append(_string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne) +
                        struct.pack("<IQ", GGML_TYPES[type_name], offset))
            size = tensor_bytes(type_name, ne)
            self.sizes.append(size)
            offset += -(-size // ALIGNMENT) * ALIGNMENT
        raw = b"".join(head)
        f.write(raw + b"\0" * (-len(raw) % ALIGNMENT))
        self.tensor = 0
        self.written = 0

    def write(self, data):
        if self.tensor >= len(self.sizes) or self.written + len(data) > self.sizes[self.tensor]:
            raise RuntimeError("more tensor bytes written than the header announced")
        self.f.write(data)
        self.written += len(data)
        if self.written == self.sizes[self.tensor]:
            self.f.write(b"\0" * (-self.written % ALIGNMENT))
            self.tensor += 1
            self.written = 0

    def close(self):
        if self.tensor != len(self.sizes):
            raise RuntimeError(f"{len(self.sizes) - self.tensor} tensor(s) of the header were not written")


class Header:
    """A GGUF file's metadata (`metadata`: {key: value}, arrays as lists)
    and tensors (`tensors`: {name: (ggml type, ne)}). DataCorruptError
    naming the file for what is not GGUF or is cut short."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self._f = f
            if f.read(4) != MAGIC:
                raise DataCorruptError(f"{path}: not a GGUF file (no GGUF magic)")
            version, n_tensors, n_kv = self._unpack("<IQQ")
            if version not in (2, 3):
                raise DataCorruptError(f"{path}: GGUF version {version}, not 2 or 3")
            self.metadata = {}
            for _ in range(n_kv):
                key = self._str()
                (kind,) = self._unpack("<I")
                self.metadata[key] = self._read_value(kind)
            self.tensors = {}
            for _ in range(n_tensors):
                name = self._str()
                (dims,) = self._unpack("<I")
                if dims > 4:
                    raise DataCorruptError(f"{path}: tensor {name!r} has {dims} dimensions")
                ne = self._unpack(f"<{dims}Q")
                ggml_type, _ = self._unpack("<IQ")
                self.tensors[name] = (ggml_type, tuple(ne))
        del self._f

    def _unpack(self, fmt):
        size = struct.calcsize(fmt)
        raw = self._f.read(size)
        if len(raw) != size:
            raise DataCorruptError(f"{self.path}: the GGUF header is cut short")
        return struct.unpack(fmt, raw)

    def _str(self):
        (n,) = self._unpack("<Q")
        if n > 1 << 30:
            raise DataCorruptError(f"{self.path}: a GGUF header string of {n} bytes")
        raw = self._f.read(n)
        if len(raw) != n:
            raise DataCorruptError(f"{self.path}: the GGUF header is cut short")
        return raw.decode("utf-8", "replace")

    def _read_value(self, kind):
        if kind in _SCALARS:
            return self._unpack(_SCALARS[kind])[0]
        if kind == _STRING:
            return self._str()
        if kind == _ARRAY:
            item, n = self._unpack("<IQ")
            if item in _SCALARS and n > 1 << 28 or n > 1 << 30:
                raise DataCorruptError(f"{self.path}: a GGUF metadata array of {n} values")
            return [self._read_value(item) for _ in range(n)]
        raise DataCorruptError(f"{self.path}: unknown GGUF metadata value type {kind}")
