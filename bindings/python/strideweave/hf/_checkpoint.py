"""A Hugging Face checkpoint directory read as it lies: config.json, one
model.safetensors or shards named by model.safetensors.index.json. Only
headers are read here; a tensor's bytes are read when it is loaded."""
import errno
import json
import os
import re
import struct

import torch

from .._errors import DataCorruptError, StrideWeaveNotImplementedError

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"

# safetensors dtype names and their element sizes.
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
               "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}
# Header lengths above this are refused as corrupt (safetensors' own limit is 100 MB).
_MAX_HEADER = 100 * 1024 * 1024


class TensorEntry:
    """One tensor of a shard: its file, dtype, shape and absolute byte range."""

    __slots__ = ("path", "dtype", "shape", "offset", "nbytes")

    def __init__(self, path, dtype, shape, offset, nbytes):
        self.path, self.dtype, self.shape, self.offset, self.nbytes = path, dtype, shape, offset, nbytes


def _corrupt(path, what):
    return DataCorruptError(f"{path}: {what}")


def read_header(path):
    """{name: TensorEntry} of a .safetensors file, every entry checked
    against the file's size (DataCorruptError naming the file and the tensor
    for a bad header or a truncated file; OSError if it cannot be read)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _corrupt(path, f"not a safetensors file: {size} bytes, shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        if n > _MAX_HEADER or 8 + n > size:
            raise _corrupt(path, f"not a safetensors file or truncated: header length {n} with {size} bytes in "
                                 f"the file")
        raw = f.read(n)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _corrupt(path, f"bad header JSON: {e}") from None
    if not isinstance(header, dict):
        raise _corrupt(path, "the header is not a JSON object")
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], list(info["shape"]), info["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise _corrupt(path, f"tensor {name!r}: missing or mistyped dtype, shape or data_offsets") from None
        if dtype not in DTYPE_BYTES:
            raise _corrupt(path, f"tensor {name!r}: unknown dtype {dtype!r}")
        count = 1
        for d in shape:
            if not isinstance(d, int) or d < 0:
                raise _corrupt(path, f"tensor {name!r}: bad dimension {d!r}")
            count *= d
        if not (isinstance(begin, int) and isinstance(end, int)) or begin < 0 or end < begin:
            raise _corrupt(path, f"tensor {name!r}: bad data_offsets {[begin, end]}")
        if end - begin != count * DTYPE_BYTES[dtype]:
            raise _corrupt(path, f"tensor {name!r}: data_offsets {[begin, end]} disagree with shape {shape} of "
                                 f"{dtype}")
        if base + end > size:
            raise _corrupt(path, f"truncated: tensor {name!r} ends at byte {base + end} of a {size}-byte file")
        out[name] = TensorEntry(path, dtype, tuple(shape), base + begin, end - begin)
    return out


class Checkpoint:
    """The tensors of a checkpoint directory: `entries` maps each tensor
    name to its TensorEntry. FileNotFoundError for a missing directory,
    config.json or shard (naming it); DataCorruptError for a bad index or
    shard header."""

    def __init__(self, model_dir):
        self.dir = os.fspath(model_dir)
        if not os.path.isdir(self.dir):
            raise FileNotFoundError(errno.ENOENT, "no such model directory", self.dir)
        config = os.path.join(self.dir, "config.json")
        if not os.path.isfile(config):
            raise FileNotFoundError(errno.ENOENT, "the model directory has no config.json", config)
        index = os.path.join(self.dir, INDEX_NAME)
        single = os.path.join(self.dir, SINGLE_NAME)
        if os.path.isfile(index):
            try:
                with open(index, encoding="utf-8") as f:
                    weight_map = json.load(f)["weight_map"]
                if not isinstance(weight_map, dict):
                    raise TypeError
            except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
                raise DataCorruptError(f"{index}: not a safetensors index (no \"weight_map\" object)") from None
            files = sorted(set(weight_map.values()))
        elif os.path.isfile(single):
            weight_map, files = None, [SINGLE_NAME]
        else:
            raise FileNotFoundError(errno.ENOENT, f"the model directory has neither {INDEX_NAME} nor {SINGLE_NAME}",
                                    self.dir)
        self.entries = {}
        for name in files:
            path = os.path.join(self.dir, name)
            if not os.path.isfile(path):
                raise FileNotFoundError(errno.ENOENT, f"{INDEX_NAME} names a shard that is missing", path)
            for key, entry in read_header(path).items():
                if weight_map is not None and weight_map.get(key) != name:
                    continue  # the index is authoritative for where a tensor lives
                self.entries[key] = entry
        if weight_map is not None:
            for key, name in weight_map.items():
                if key not in self.entries:
                    raise DataCorruptError(f"{os.path.join(self.dir, name)}: has no tensor {key!r}, which "
                                           f"{INDEX_NAME} places there")

    def read(self, key, index=None):
        """The tensor `key` as a torch tensor of its stored dtype (one pread,
        no mapping of the file); with `index`, only `key[index]` (one slice
        along its first dimension, an expert of a stacked tensor)."""
        entry = self.entries[key]
        if entry.dtype not in TORCH_DTYPES:
            raise StrideWeaveNotImplementedError(f"{entry.path}: tensor {key!r} is {entry.dtype}, which "
                                                 f"strideweave.hf does not load")
        dtype = TORCH_DTYPES[entry.dtype]
        shape, offset, nbytes = entry.shape, entry.offset, entry.nbytes
        if index is not None:
            if not shape or not 0 <= index < shape[0]:
                raise IndexError(f"{entry.path}: tensor {key!r} of shape {list(shape)} has no slice {index}")
            nbytes //= shape[0]
            offset += index * nbytes
            shape = shape[1:]
        buf = bytearray(nbytes)
        with open(entry.path, "rb", buffering=0) as f:
            got = f.readinto(memoryview(buf)) if f.seek(offset) == offset else 0
        if got != nbytes:
            raise DataCorruptError(f"{entry.path}: truncated while reading tensor {key!r}")
        if nbytes == 0:
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(buf, dtype=dtype).reshape(shape)


TORCH_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                "BOOL": torch.bool}


# The per-expert Hub keys of a routed experts module at `prefix`:
# Mixtral's w1/w3/w2 and the gate_proj/up_proj/down_proj of Qwen-MoE,
# OLMoE and DeepSeek.
_PER_EXPERT = {"w1": "gate", "gate_proj": "gate", "w3": "up", "up_proj": "up", "w2": "down", "down_proj": "down"}


def per_expert_pattern(prefix):
    return re.compile(re.escape(prefix) + r"\.(\d+)\.(" + "|".join(_PER_EXPERT) + r")\.weight")


def matrix_of(suffix):
    return _PER_EXPERT[suffix]
