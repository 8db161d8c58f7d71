"""Carrier base class and the ordinary carriers: CPU, Host, File (with its
FileIO), Zstd and Vulkan, each registered for its kind (strideweave._handles)
as it is defined."""
import numbers
import os
from collections.abc import Mapping

import numpy as np

from .. import _dtypes
from .. import _handles
from .. import _model_files
from .. import _runtime
from .._checks import file_io, finite, integer, nonnegative
from .._device import Device
from .._errors import StrideWeaveIndexError, StrideWeaveRuntimeError, StrideWeaveTypeError, StrideWeaveValueError
from .._lib import native as N

_carrier_release = N.sw_carrier_release


class Carrier:
    """A flat run of physical slots of one dtype, with a version counter,
    an ownership state and release()."""

    __slots__ = ("_h", "_rt", "_exports", "__weakref__")

    _kind = None  # set by _handles.carrier_kind on each concrete class

    def __reduce__(self):
        raise StrideWeaveTypeError(f"a strideweave {type(self).__name__} carrier cannot be pickled: it holds "
                                   "library memory; pickle tensor.numpy() instead")

    def __init__(self, *args, **kwargs):
        raise StrideWeaveTypeError("Carrier is abstract; use one of strideweave.carriers' classes")

    @classmethod
    def _adopt(cls, h, rt):
        """The wrapper for a new carrier reference."""
        obj = object.__new__(cls)
        obj._h = h
        obj._rt = rt
        obj._exports = 0
        _handles.register_carrier(obj)
        return obj

    def _init(self, h, rt):
        self._h = h
        self._rt = rt
        self._exports = 0
        _handles.register_carrier(self)

    @classmethod
    def _from_host(cls, data, dtype, size, rt):
        """A carrier of this class holding `size` elements copied from bytes."""
        carrier = cls(size, dtype=dtype, runtime=rt)
        if size:
            N.carrier_write_from(carrier._h, 0, size, data)
        return carrier

    def __del__(self):
        try:
            _carrier_release(self._h)
        except Exception:
            pass

    def size(self):
        """Number of slots (still answers after release)."""
        return N.sw_carrier_size(self._h)

    def __len__(self):
        return self.size()

    @property
    def dtype(self):
        """The element type of every slot."""
        return _dtypes.by_code(N.sw_carrier_dtype(self._h))

    @property
    def version(self):
        """+1 per successful public write; residency moves never change it."""
        return N.sw_carrier_version(self._h)

    def stored_bytes(self):
        """Bytes the storage occupies now (compressed bytes for Zstd)."""
        return N.sw_carrier_stored_bytes(self._h)

    def is_mutable(self):
        """Whether the carrier accepts writes (not read-only, owned or released)."""
        return N.sw_carrier_is_mutable(self._h)

    def is_owned(self):
        """Whether a TiledEvictable (or another owner) owns the carrier."""
        return N.sw_carrier_is_owned(self._h)

    def is_read_only(self):
        """Refuses writes for good: File.open, a read-only array imported by
        from_numpy / from_dlpack."""
        return N.sw_carrier_is_read_only(self._h)

    def is_released(self):
        """Whether release() has run."""
        return N.sw_carrier_is_disposed(self._h)

    def release(self):
        """Frees the values; idempotent. RuntimeError while the carrier is
        owned (in-flight work, a composite) or viewed by an exported array."""
        if self._exports:
            raise StrideWeaveRuntimeError(
                f"the carrier's memory is shared with {self._exports} exported view(s) (NumPy, DLPack, tinygrad); "
                "drop them before release()")
        N.sw_carrier_dispose(self._h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        """`with carrier:` releases it at the end."""
        self.release()
        return False

    def _slot(self, slot):
        slot = integer(slot, "slot")
        size = self.size()
        if slot < 0:
            slot += size
        if not 0 <= slot < size:
            raise StrideWeaveIndexError(f"slot {slot} is out of range for a carrier of {size} slots")
        return slot

    def __getitem__(self, slot):
        """carrier[slot]: the value of one slot as a Python number."""
        dtype = self.dtype
        raw = dtype.numpy if dtype.numpy is not None else np.dtype(np.uint16)
        out = np.empty(1, dtype=raw)
        N.carrier_read_into(self._h, self._slot(slot), 1, out)
        if dtype is _dtypes.bfloat16:
            return float(_dtypes.bf16_to_float32(out)[0])
        return out[0].item()

    def __setitem__(self, slot, value):
        """carrier[slot] = value: writes one slot (one version step)."""
        if not isinstance(value, (numbers.Real, np.generic)):
            raise StrideWeaveTypeError(f"carrier slots are set from numbers, not {type(value).__name__}")
        dtype = self.dtype
        data = _dtypes.bf16_bits([value]) if dtype is _dtypes.bfloat16 else np.asarray([value], dtype=dtype.numpy)
        N.carrier_write_from(self._h, self._slot(slot), 1, data)

    def require_facet(self, facet):
        """The facet object of class `facet` this carrier provides; TypeError
        for a facet it does not provide."""
        raise StrideWeaveTypeError(f"a {type(self).__name__} carrier provides no {getattr(facet, '__name__', facet)}")

    def __repr__(self):
        state = ", released" if self.is_released() else ""
        return f"{type(self).__name__}(size={self.size()}, dtype={self.dtype.name}{state})"


@_handles.carrier_kind(N.SW_CARRIER_CPU)
class CPU(Carrier):
    """Aligned host memory, the compute carrier. Zero-filled.

    A CPU carrier made by from_numpy / from_dlpack instead lends the source's
    memory (no copy) and keeps the source alive until release()."""

    __slots__ = ()

    def __init__(self, size, *, dtype=_dtypes.float32, runtime=None):
        rt = _runtime.resolve(runtime)
        self._init(N.sw_carrier_create_cpu(rt._h, _dtypes.as_dtype(dtype).code, nonnegative(size, "size")), rt)

    @classmethod
    def _from_host(cls, data, dtype, size, rt):
        obj = object.__new__(cls)
        obj._init(N.carrier_create_cpu_from(rt._h, dtype.code, data, size), rt)
        return obj

    @classmethod
    def _over(cls, owner, address, nbytes, dtype, read_only, rt):
        """A CPU carrier over `nbytes` of host memory at `address`, which
        `owner` keeps alive; the carrier holds `owner` until it drops the
        memory."""
        obj = object.__new__(cls)
        obj._init(N.carrier_create_cpu_external(rt._h, dtype.code, owner, address, nbytes, bool(read_only)), rt)
        return obj

    @classmethod
    def from_values(cls, iterable, *, dtype=_dtypes.float32, runtime=None):
        """A CPU carrier holding `iterable`'s values in order."""

        dtype = _dtypes.as_dtype(dtype)
        values = finite(iterable, "values")
        for v in values:
            if not isinstance(v, (numbers.Real, np.generic)):
                raise StrideWeaveTypeError(f"values must be numbers, not {type(v).__name__}")
        data = _dtypes.bf16_bits(values) if dtype is _dtypes.bfloat16 else np.asarray(values, dtype=dtype.numpy)
        return cls._from_host(data.reshape(-1).view(np.uint8) if len(values) else b"", dtype, len(values),
                              _runtime.resolve(runtime))


@_handles.carrier_kind(N.SW_CARRIER_HOST)
class Host(Carrier):
    """Plain host memory that is not a compute carrier: a secondary tier."""

    __slots__ = ()

    def __init__(self, size, *, dtype=_dtypes.float32, runtime=None):
        rt = _runtime.resolve(runtime)
        self._init(N.sw_carrier_create_host(rt._h, _dtypes.as_dtype(dtype).code, nonnegative(size, "size")), rt)


_IO_SOURCES = {N.SW_IO_PROFILE_DEFAULT: "default", N.SW_IO_PROFILE_PROBED: "probed",
               N.SW_IO_PROFILE_CACHED: "cached"}


class FileIO:
    """How a File carrier moves its bytes (sw_file_carrier_io): chunk_bytes
    per request and requests_in_flight per transfer as its transfers use
    them; direct_io, whether every file reads through O_DIRECT; source,
    where the device profile came from: "default" (no measure of the device:
    the defaults), "probed" (measured by this process when the carrier
    opened) or "cached" (measured earlier, by this process or read from the
    cache file); device, the st_dev of the (first) file; and
    device_read_bytes_per_second, the profile's measured rate (0.0 when not
    measured)."""

    __slots__ = ("chunk_bytes", "requests_in_flight", "direct_io", "source", "device",
                 "device_read_bytes_per_second")

    def __init__(self, chunk_bytes, requests_in_flight, direct_io, source, device, device_read_bytes_per_second):
        object.__setattr__(self, "chunk_bytes", chunk_bytes)
        object.__setattr__(self, "requests_in_flight", requests_in_flight)
        object.__setattr__(self, "direct_io", direct_io)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "device", device)
        object.__setattr__(self, "device_read_bytes_per_second", device_read_bytes_per_second)

    def _values(self):
        return (self.chunk_bytes, self.requests_in_flight, self.direct_io, self.source, self.device,
                self.device_read_bytes_per_second)

    def __setattr__(self, name, value):
        raise AttributeError("FileIO is immutable")

    def __eq__(self, other):
        if not isinstance(other, FileIO):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self):
        return hash(self._values())

    def __repr__(self):
        return (f"FileIO(chunk_bytes={self.chunk_bytes}, requests_in_flight={self.requests_in_flight}, "
                f"direct_io={self.direct_io}, source={self.source!r}, device={self.device}, "
                f"device_read_bytes_per_second={self.device_read_bytes_per_second})")


@_handles.carrier_kind(N.SW_CARRIER_FILE)
class File(Carrier):
    """A secondary tier in a scratch file (removed on release), or with
    File.open a read-only window on an existing file. Every constructor
    takes `chunk_bytes` (bytes per read or write request) and
    `requests_in_flight` (requests outstanding per transfer), 0 for the
    runtime's defaults (4 MiB, 4; with direct_io, the best pair measured for
    the file's device where one is known): a tier of tiles of a few MiB
    that a caller waits on one at a time lands each tile sooner with 1 MiB
    requests and as many in flight as the runtime has file request slots
    (docs/moe-offload.md, section 6). `io` says what the carrier uses."""

    __slots__ = ()

    def __init__(self, size, *, dtype=_dtypes.float32, directory=None, direct_io=False, chunk_bytes=0,
                 requests_in_flight=0, runtime=None):
        io = file_io(chunk_bytes, requests_in_flight)
        rt = _runtime.resolve(runtime)
        if directory is not None:
            directory = os.fspath(directory)
        self._init(N.carrier_create_file(rt._h, _dtypes.as_dtype(dtype).code, nonnegative(size, "size"), directory,
                                         bool(direct_io), *io), rt)

    @property
    def io(self):
        """The FileIO of the carrier: the chunk size and requests in flight
        its transfers use, whether it reads through O_DIRECT, and where the
        settings came from."""
        chunk_bytes, requests_in_flight, direct_io, source, device, rate = N.file_carrier_io(self._h)
        return FileIO(chunk_bytes, requests_in_flight, direct_io, _IO_SOURCES[source], device, rate)

    @classmethod
    def open(cls, path, offset, size, *, dtype=_dtypes.float32, direct_io=False, chunk_bytes=0, requests_in_flight=0,
             runtime=None):
        """A read-only carrier over `size` elements at byte `offset` of `path`."""
        io = file_io(chunk_bytes, requests_in_flight)
        rt = _runtime.resolve(runtime)
        offset = nonnegative(offset, "offset")
        obj = object.__new__(cls)
        obj._init(N.carrier_open_file(rt._h, _dtypes.as_dtype(dtype).code, os.fspath(path), offset, nonnegative(size, "size"),
                                      bool(direct_io), *io), rt)
        return obj

    # ---- model files (strideweave._model_files, docs/model-files.md) ----

    @classmethod
    def open_npy(cls, path, *, direct_io=False, chunk_bytes=0, requests_in_flight=0, runtime=None):
        """The array of a .npy file (format 1.0 or 2.0, C or Fortran order)
        as a read-only carrier: a FileTensor with the carrier, the full
        tensor's first-mode-fastest shape, the TiledEvictable geometry that
        makes each tile one index of the file's slowest mode (one expert) and
        the view back to the file's indexing. DataCorruptError for a bad
        header or a truncated file, NotImplementedError for a dtype
        StrideWeave lacks, OSError for an unreadable file (each naming the
        file and the field)."""
        return _model_files.open_npy(cls, path, direct_io=direct_io, chunk_bytes=chunk_bytes,
                                     requests_in_flight=requests_in_flight, runtime=runtime)

    @classmethod
    def open_safetensors(cls, path, name, *, direct_io=False, chunk_bytes=0, requests_in_flight=0, runtime=None):
        """Tensor `name` of a .safetensors file as open_npy does; with a list
        of names, those tensors (one dtype and shape S, e.g. one per expert of
        a Hugging Face checkpoint) as one carrier over their file regions: the
        stack of shape (len(names), *S), tile i being tensor names[i].
        With a list of names, `path` may also be a list of paths of the same
        length, tensor names[i] then lying in file path[i] (a checkpoint
        sharded over several files; paths may repeat, each file is opened
        once). ValueError for a name its file lacks, tensors that differ, the
        same tensor of one file twice or lists of different lengths;
        TypeError for a list of paths with one name."""
        return _model_files.open_safetensors(cls, path, name, direct_io=direct_io, chunk_bytes=chunk_bytes,
                                             requests_in_flight=requests_in_flight, runtime=runtime)

    @classmethod
    def open_gguf(cls, path, name, *, direct_io=False, chunk_bytes=0, requests_in_flight=0, runtime=None):
        """Tensor `name` of a GGUF file (llama.cpp's format, versions 2 and 3)
        as open_npy does. ggml lists a tensor's dimensions ne fastest first:
        `shape` is NumPy's (ne reversed, "C" order) and `logical_shape` is ne,
        so a stacked expert tensor (blk.L.ffn_up_exps.weight, ne (n_embd,
        n_ff, n_expert)) tiles one expert per tile. F32, F16, BF16, F64, I32,
        I64, Q8_0, Q4_0, Q4_K, Q6_K and MXFP4 tensors open;
        NotImplementedError ("unsupported dtype") names another ggml type
        StrideWeave lacks (Q4_1, Q5_K, ...); DataCorruptError for a lying header (offsets past the end,
        overlapping or misaligned tensors, a block that does not divide the
        first dimension, absurd counts), naming the file and the tensor."""
        return _model_files.open_gguf(cls, path, name, direct_io=direct_io, chunk_bytes=chunk_bytes,
                                      requests_in_flight=requests_in_flight, runtime=runtime)

    @classmethod
    def open_raw(cls, path, shape, *, dtype=_dtypes.float32, offset=0, order="C", direct_io=False, chunk_bytes=0,
                 requests_in_flight=0, runtime=None):
        """A raw tensor of `shape` and `dtype` at byte `offset` of `path`,
        in `order` "C" (row-major) or "F" (first mode fastest), as open_npy
        does."""
        return _model_files.open_raw(cls, path, shape, dtype=dtype, offset=offset, order=order, direct_io=direct_io,
                                     chunk_bytes=chunk_bytes, requests_in_flight=requests_in_flight, runtime=runtime)


@_handles.carrier_kind(N.SW_CARRIER_REMOTE)
class Remote(Carrier):
    """A secondary tier on Valkey or Redis servers (docs/remote-tier.md):
    fixed-size blocks of `block_elements` slots, one key each in
    `namespace`, each with a CRC-32C. Remote(size, ...) makes a new
    zero-filled namespace (its keys are deleted with the carrier unless
    `persistent`); Remote.open(size, ...) opens an existing one, whose header
    must match the dtype, size, block size, endpoint count and placement seed.
    `endpoints` are "unix:///path" or "redis://host[:port]"; a non-loopback
    redis:// host needs allow_plaintext (no TLS in this build). The password
    is read from `password_file`, which only its owner may read.

    A carrier opened read_only may name read `replicas`: a mapping from an
    endpoint to a server (or a list of servers) holding a copy of its
    blocks, such as a redis-server started with `replicaof` that endpoint.
    Reads go to a block's endpoint first and, when it cannot be reached or
    its connection is lost mid-read, to its replicas in order.

    A carrier that can write (made, or opened without read_only) holds the
    namespace's writer lease for `lease_ms` (0: 15 s), renewed while it
    lives: a second writer is refused (RuntimeError naming the holder)."""

    __slots__ = ()

    def __init__(self, size, *, endpoints, namespace, dtype=_dtypes.float32, user=None, password_file=None,
                 allow_plaintext=False, block_elements=0, placement_seed=0, deadline_ms=0, chunk_bytes=0,
                 requests_in_flight=0, persistent=False, lease_ms=0, runtime=None):
        rt = _runtime.resolve(runtime)
        self._init(_remote(rt, True, size, endpoints, namespace, dtype, user, password_file, allow_plaintext, False,
                           block_elements, placement_seed, deadline_ms, chunk_bytes, requests_in_flight,
                           persistent, None, lease_ms), rt)

    @classmethod
    def open(cls, size, *, endpoints, namespace, dtype=_dtypes.float32, user=None, password_file=None,
             allow_plaintext=False, read_only=False, block_elements=0, placement_seed=0, deadline_ms=0,
             chunk_bytes=0, requests_in_flight=0, replicas=None, lease_ms=0, runtime=None):
        """A carrier over the existing namespace `namespace`; `replicas`
        (read_only only, ValueError otherwise) maps an endpoint to its read
        replicas."""
        rt = _runtime.resolve(runtime)
        obj = object.__new__(cls)
        obj._init(_remote(rt, False, size, endpoints, namespace, dtype, user, password_file, allow_plaintext,
                          read_only, block_elements, placement_seed, deadline_ms, chunk_bytes, requests_in_flight,
                          False, replicas, lease_ms), rt)
        return obj


def _remote(rt, create, size, endpoints, namespace, dtype, user, password_file, allow_plaintext, read_only,
            block_elements, placement_seed, deadline_ms, chunk_bytes, requests_in_flight, persistent, replicas,
            lease_ms):
    if isinstance(endpoints, (str, bytes)):
        endpoints = [endpoints]
    endpoints = list(endpoints)
    replica_endpoints, replica_of = _replica_lists(endpoints, replicas)
    if not isinstance(namespace, str):
        raise StrideWeaveTypeError(f"namespace must be str, not {type(namespace).__name__}")
    if password_file is not None:
        password_file = os.fspath(password_file)
    return N.carrier_remote(rt._h, bool(create), _dtypes.as_dtype(dtype).code, nonnegative(size, "size"),
                            list(endpoints), namespace, user, password_file, bool(allow_plaintext), bool(read_only),
                            nonnegative(block_elements, "block_elements"),
                            nonnegative(placement_seed, "placement_seed"), nonnegative(deadline_ms, "deadline_ms"),
                            nonnegative(chunk_bytes, "chunk_bytes"),
                            nonnegative(requests_in_flight, "requests_in_flight"), bool(persistent),
                            replica_endpoints, replica_of, nonnegative(lease_ms, "lease_ms"))


def _replica_lists(endpoints, replicas):
    """{endpoint: server or [servers]} as the C desc's two lists: the
    servers, and the index in `endpoints` of the endpoint each copies."""
    if replicas is None:
        return [], []
    if not isinstance(replicas, Mapping):
        raise StrideWeaveTypeError(f"replicas must be a mapping from an endpoint to its replicas, not "
                                   f"{type(replicas).__name__}")
    servers, of = [], []
    for endpoint, copies in replicas.items():
        if endpoint not in endpoints:
            raise StrideWeaveValueError(f"replicas: {endpoint!r} is not one of the endpoints {endpoints!r}")
        if isinstance(copies, str):
            copies = [copies]
        for server in copies:
            if not isinstance(server, str):
                raise StrideWeaveTypeError(f"replicas[{endpoint!r}]: a replica must be str, not "
                                           f"{type(server).__name__}")
            servers.append(server)
            of.append(endpoints.index(endpoint))
    return servers, of


@_handles.carrier_kind(N.SW_CARRIER_ZSTD)
class Zstd(Carrier):
    """Compressed host memory: checksummed zstd frames; a corrupt frame
    raises DataCorruptError, never returns garbage."""

    __slots__ = ()

    def __init__(self, size, *, dtype=_dtypes.float32, level=1, frame_elements=0, shuffle=None, runtime=None):
        rt = _runtime.resolve(runtime)
        level = integer(level, "level")
        frame_elements = integer(frame_elements, "frame_elements")
        shuffle = -1 if shuffle is None else int(bool(shuffle))
        self._init(N.carrier_create_zstd(rt._h, _dtypes.as_dtype(dtype).code, nonnegative(size, "size"), level,
                                         frame_elements, shuffle), rt)


@_handles.carrier_kind(N.SW_CARRIER_VULKAN)
class Vulkan(Carrier):
    """Device-local memory of a Vulkan device: a compute carrier whose ops,
    and their backward, run as SPIR-V shaders on the device, batched until a
    value is read. dtypes as on the CPU carrier: float32 for every op,
    float64 where the device has shaderFloat64, float16 and bfloat16 stored
    16-bit (matmul of two gives their dtype, rounded once from float32 sums,
    or float32 with out_dtype=sw.float32). `device` defaults to the runtime's default
    Vulkan device (Device.vulkan). NotImplementedError, naming the missing
    part, when the library was built without Vulkan or no Vulkan driver is
    present."""

    __slots__ = ("_device",)

    def __init__(self, size, *, dtype=_dtypes.float32, device=None, runtime=None):
        rt = _runtime.resolve(runtime)
        if device is None:
            device = Device.vulkan(runtime=rt)
        elif not isinstance(device, Device):
            raise StrideWeaveTypeError(f"device must be a strideweave.Device, not {type(device).__name__}")
        self._init(N.sw_carrier_create_vulkan(rt._h, device._h, _dtypes.as_dtype(dtype).code, nonnegative(size, "size")), rt)
        self._device = device

    @classmethod
    def _adopt(cls, h, rt):
        obj = super()._adopt(h, rt)
        obj._device = None
        return obj
