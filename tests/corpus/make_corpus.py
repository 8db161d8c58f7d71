#!/usr/bin/env python3
"""Writes the seed corpus of npy, safetensors and GGUF headers under tests/corpus/.

Each file is named NAME.EXPECTED.EXT, EXPECTED being the error code the
header parsers (sw_testing_parse_npy_header / _safetensors_header /
_gguf_header) must give the whole file: OK, DATA_CORRUPT or UNSUPPORTED.
tests/c/test_model_files.c replays the npy and safetensors files,
tests/c/test_gguf_files.c the GGUF ones; a fuzzer can start from them. The
valid files are written by NumPy, the safetensors package and gguf-py
(when installed) themselves; the others are made by hand. Rerun after changing this script: python3 tests/corpus/make_corpus.py
"""
import io
import json
import pathlib
import struct

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
NPY = HERE / "npy"
SAFETENSORS = HERE / "safetensors"
GGUF = HERE / "gguf"


def npy_bytes(header, data=b"", version=(1, 0)):
    """An npy file with the dictionary text `header` taken as it is."""
    text = header.encode("latin1") if isinstance(header, str) else header
    if version[0] == 1:
        prefix = b"\x93NUMPY" + bytes(version) + struct.pack("<H", len(text))
    else:
        prefix = b"\x93NUMPY" + bytes(version) + struct.pack("<I", len(text))
    return prefix + text + data


def numpy_file(array, **kwargs):
    out = io.BytesIO()
    np.lib.format.write_array(out, array, **kwargs)
    return out.getvalue()


def st_bytes(header, data=b""):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


# A sharded checkpoint's index, the file most often opened as safetensors by mistake.
INDEX_JSON = (b'{"metadata": {"total_size": 16}, '
              b'"weight_map": {"w": "model-00001-of-00001.safetensors"}}\n')


# GGUF's value type codes (gguf-py's GGUFValueType).
U8, I8, U16, I16, U32, I32, F32V, BOOL, STR, ARR, U64, I64, F64V = range(13)
SCALAR_FORMATS = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32V: "<f", BOOL: "<?",
                  U64: "<Q", I64: "<q", F64V: "<d"}


def gguf_string(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, value):
    if vtype == STR:
        return gguf_string(value)
    if vtype == ARR:
        etype, items = value
        return struct.pack("<IQ", etype, len(items)) + b"".join(gguf_value(etype, v) for v in items)
    return struct.pack(SCALAR_FORMATS[vtype], value)


def gguf_bytes(kvs=(), tensors=(), data=b"", version=3, alignment=32, magic=b"GGUF", tensor_count=None,
               kv_count=None):
    """A GGUF file made by hand: kvs are (key, type, value), tensors
    (name, ne, ggml type, relative offset); the data section starts at the
    next multiple of `alignment` after the infos."""
    out = magic + struct.pack("<IQQ", version, len(tensors) if tensor_count is None else tensor_count,
                              len(kvs) if kv_count is None else kv_count)
    for key, vtype, value in kvs:
        out += gguf_string(key) + struct.pack("<I", vtype) + gguf_value(vtype, value)
    for name, ne, gtype, offset in tensors:
        out += gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", e) for e in ne)
        out += struct.pack("<IQ", gtype, offset)
    out += bytes(-len(out) % alignment)
    return out + data


def gguf_writer_file(build):
    """The bytes gguf-py's GGUFWriter writes after build(writer)."""
    import tempfile
    import gguf
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "w.gguf"
        w = gguf.GGUFWriter(str(path), "llama")
        build(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return path.read_bytes()


def gguf_corpus(gg):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    try:
        import gguf

        def writer_tensors(w):
            w.add_uint32("llama.block_count", 2)
            w.add_float32("llama.rope.freq_base", 10000.0)
            w.add_array("tokenizer.ggml.tokens", ["<s>", "</s>", "a"])
            w.add_array("tokenizer.ggml.scores", [0.0, -1.0, -2.5])
            w.add_bool("general.flag", True)
            w.add_tensor("a", a)
            w.add_tensor("h", a.astype(np.float16))
            w.add_tensor("blk.0.ffn_gate_exps.weight", np.arange(2 * 3 * 8, dtype=np.float32).reshape(2, 3, 8))
            w.add_tensor("q", gguf.quants.quantize(np.arange(64, dtype=np.float32).reshape(2, 32),
                                                   gguf.GGMLQuantizationType.Q8_0),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)

        gg("gguf-py-writer", "OK", gguf_writer_file(writer_tensors))

        def writer_bf16(w):
            w.add_tensor("a", (np.arange(6, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16).reshape(2, 3),
                         raw_dtype=gguf.GGMLQuantizationType.BF16)

        gg("gguf-py-bf16", "OK", gguf_writer_file(writer_bf16))
    except ImportError:
        pass

    f32 = 0
    w = ("a", (4, 3), f32, 0)
    data = bytes(48)
    gg("minimal", "OK", gguf_bytes(tensors=[w], data=data))
    gg("version-2", "OK", gguf_bytes(tensors=[w], data=data, version=2))
    gg("no-tensors", "OK", gguf_bytes(kvs=[("general.architecture", STR, "llama")]))
    gg("empty", "OK", gguf_bytes())
    gg("every-value-type", "OK", gguf_bytes(kvs=[
        ("u8", U8, 1), ("i8", I8, -1), ("u16", U16, 2), ("i16", I16, -2), ("u32", U32, 3), ("i32", I32, -3),
        ("f32", F32V, 1.5), ("bool", BOOL, True), ("str", STR, "text"), ("u64", U64, 4), ("i64", I64, -4),
        ("f64", F64V, 2.5), ("arr", ARR, (U32, [1, 2, 3])), ("strs", ARR, (STR, ["x", "yz"])),
        ("nested", ARR, (ARR, [(I8, [1, 2]), (STR, ["n"])])), ("empty-arr", ARR, (F32V, []))],
        tensors=[w], data=data))
    gg("alignment-64", "OK", gguf_bytes(kvs=[("general.alignment", U32, 64)], tensors=[w, ("b", (2,), f32, 64)],
                                        data=bytes(72), alignment=64))
    gg("stacked-experts", "OK", gguf_bytes(tensors=[("a", (4, 3, 2), f32, 0)], data=bytes(96)))
    gg("bf16", "OK", gguf_bytes(tensors=[("a", (4, 3), 30, 0)], data=bytes(24)))
    gg("zero-size", "OK", gguf_bytes(tensors=[("a", (0, 3), f32, 0), ("b", (2,), f32, 0)], data=bytes(8)))
    gg("gap-between", "OK", gguf_bytes(tensors=[("a", (2,), f32, 0), ("b", (2,), f32, 64)], data=bytes(72)))
    gg("q4k-other", "OK", gguf_bytes(tensors=[("a", (4,), f32, 0), ("q", (256, 2), 12, 32)], data=bytes(32 + 288)))

    gg("bad-magic", "DATA_CORRUPT", gguf_bytes(tensors=[w], data=data, magic=b"GGUG"))
    gg("short-file", "DATA_CORRUPT", b"GGU")
    gg("truncated-counts", "DATA_CORRUPT", b"GGUF" + struct.pack("<IH", 3, 1))
    gg("npy-file", "DATA_CORRUPT", numpy_file(np.arange(4, dtype=np.float32)))
    gg("safetensors-file", "DATA_CORRUPT", st_bytes({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}},
                                                    bytes(8)))
    gg("offset-past-end", "DATA_CORRUPT", gguf_bytes(tensors=[w], data=bytes(40)))
    gg("offset-huge", "DATA_CORRUPT", gguf_bytes(tensors=[("a", (4, 3), f32, 2 ** 63)], data=data))
    gg("overlap", "DATA_CORRUPT", gguf_bytes(tensors=[w, ("b", (4,), f32, 32)], data=data))
    gg("misaligned", "DATA_CORRUPT", gguf_bytes(tensors=[("a", (2,), f32, 4)], data=bytes(12)))
    gg("block-not-dividing", "DATA_CORRUPT", gguf_bytes(tensors=[("a", (48, 2), 8, 0)], data=bytes(204)))
    gg("unknown-ggml-type", "DATA_CORRUPT", gguf_bytes(tensors=[("a", (4, 3), 4, 0)], data=data))
    gg("ggml-type-huge", "DATA_CORRUPT", gguf_bytes(tensors=[("a", (4, 3), 1000, 0)], data=data))
    gg("five-dims", "DATA_CORRUPT", gguf_bytes(tensors=[("a", (1, 1, 1, 1, 1), f32, 0)], data=bytes(4)))
    gg("dims-huge", "DATA_CORRUPT", b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + gguf_string("a") +
       struct.pack("<I", 2 ** 31) + bytes(64))
    gg("dim-above-int64", "DATA_CORRUPT", gguf_bytes(tensors=[("a", (2 ** 63,), f32, 0)]))
    gg("element-count-overflow", "DATA_CORRUPT", gguf_bytes(tensors=[("a", (2 ** 40, 2 ** 40), f32, 0)]))
    gg("byte-size-overflow", "DATA_CORRUPT", gguf_bytes(tensors=[("a", (2 ** 62,), f32, 0)]))
    gg("tensor-count-huge", "DATA_CORRUPT", gguf_bytes(tensors=[w], data=data, tensor_count=2 ** 60))
    gg("kv-count-huge", "DATA_CORRUPT", gguf_bytes(tensors=[w], data=data, kv_count=2 ** 62))
    gg("string-length-huge", "DATA_CORRUPT", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2 ** 62) + b"k")
    gg("array-count-huge", "DATA_CORRUPT", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("k") +
       struct.pack("<IIQ", ARR, U64, 2 ** 61) + bytes(16))
    gg("unknown-value-type", "DATA_CORRUPT", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("k") +
       struct.pack("<I", 13) + bytes(8))
    gg("unknown-element-type", "DATA_CORRUPT", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("k") +
       struct.pack("<IIQ", ARR, 77, 1) + bytes(8))
    deep = (U8, [1])
    for _ in range(12):
        deep = (ARR, [deep])
    gg("deep-arrays", "DATA_CORRUPT", gguf_bytes(kvs=[("k", ARR, deep)]))
    gg("duplicate-key", "DATA_CORRUPT", gguf_bytes(kvs=[("k", U8, 1), ("k", U8, 2)]))
    gg("duplicate-tensor", "DATA_CORRUPT", gguf_bytes(tensors=[w, ("a", (4, 3), f32, 64)], data=bytes(112)))
    gg("alignment-not-u32", "DATA_CORRUPT", gguf_bytes(kvs=[("general.alignment", U64, 64)], tensors=[w],
                                                       data=data, alignment=64))
    gg("alignment-zero", "DATA_CORRUPT", gguf_bytes(kvs=[("general.alignment", U32, 0)], tensors=[w], data=data))
    gg("alignment-not-power", "DATA_CORRUPT", gguf_bytes(kvs=[("general.alignment", U32, 48)], tensors=[w],
                                                         data=data, alignment=48))
    gg("truncated-infos", "DATA_CORRUPT", gguf_bytes(tensors=[w], data=data)[:40])

    gg("version-1", "UNSUPPORTED", gguf_bytes(tensors=[w], data=data, version=1))
    gg("version-4", "UNSUPPORTED", gguf_bytes(tensors=[w], data=data, version=4))
    gg("big-endian", "UNSUPPORTED", b"GGUF" + struct.pack(">IQQ", 3, 0, 0))


def main():
    NPY.mkdir(exist_ok=True)
    SAFETENSORS.mkdir(exist_ok=True)
    GGUF.mkdir(exist_ok=True)
    for old in list(NPY.iterdir()) + list(SAFETENSORS.iterdir()) + list(GGUF.iterdir()):
        old.unlink()

    def gg(name, code, content):
        (GGUF / f"{name}.{code}.gguf").write_bytes(content)

    gguf_corpus(gg)

    def npy(name, code, content):
        (NPY / f"{name}.{code}.npy").write_bytes(content)

    def st(name, code, content):
        (SAFETENSORS / f"{name}.{code}.safetensors").write_bytes(content)

    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    npy("f32-c-order", "OK", numpy_file(a))
    npy("f64-fortran-order", "OK", numpy_file(np.asfortranarray(a.astype(np.float64))))
    npy("f16", "OK", numpy_file(a.astype(np.float16)))
    npy("i32", "OK", numpy_file(a.astype(np.int32)))
    npy("i64", "OK", numpy_file(a.astype(np.int64)))
    npy("u8", "OK", numpy_file(a.astype(np.uint8)))
    npy("bool", "OK", numpy_file(a > 10))
    npy("scalar", "OK", numpy_file(np.float32(3.5)))
    npy("empty", "OK", numpy_file(np.zeros((0, 3), np.float32)))
    npy("version-2", "OK", numpy_file(a, version=(2, 0)))
    npy("python2-long", "OK", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }\n", bytes(24)))
    npy("no-trailing-comma", "OK", npy_bytes("{'shape': (3,), 'descr': '|u1', 'fortran_order': True}", bytes(3)))

    good = numpy_file(a)
    npy("bad-magic", "DATA_CORRUPT", b"\x93NUMPZ" + good[6:])
    npy("empty-file", "DATA_CORRUPT", b"")
    npy("five-bytes", "DATA_CORRUPT", b"\x93NUMP")
    npy("header-past-eof", "DATA_CORRUPT", good[:8] + struct.pack("<H", 60000) + good[10:80])
    npy("truncated-data", "DATA_CORRUPT", good[:-4])
    npy("non-ascii", "DATA_CORRUPT", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } \xe9\n".encode("latin1"), bytes(8)))
    npy("nul-byte", "DATA_CORRUPT", npy_bytes(b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\0\n", bytes(8)))
    npy("missing-shape", "DATA_CORRUPT", npy_bytes("{'descr': '<f4', 'fortran_order': False, }\n", bytes(8)))
    npy("extra-key", "DATA_CORRUPT", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1, }\n", bytes(8)))
    npy("duplicate-key", "DATA_CORRUPT", npy_bytes("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", bytes(8)))
    npy("shape-not-tuple", "DATA_CORRUPT", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }\n", bytes(8)))
    npy("shape-list", "DATA_CORRUPT", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }\n", bytes(8)))
    npy("negative-dim", "DATA_CORRUPT", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }\n", bytes(8)))
    npy("shape-overflow", "DATA_CORRUPT", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }\n"))
    npy("dim-overflow", "DATA_CORRUPT", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }\n"))
    npy("bad-descr", "DATA_CORRUPT", npy_bytes("{'descr': 'zz', 'fortran_order': False, 'shape': (2,), }\n", bytes(8)))
    npy("fortran-not-bool", "DATA_CORRUPT", npy_bytes("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }\n", bytes(8)))
    npy("unterminated-string", "DATA_CORRUPT", npy_bytes("{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}\n", bytes(8)))
    npy("text-after-dict", "DATA_CORRUPT", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x\n", bytes(8)))
    npy("not-a-dict", "DATA_CORRUPT", npy_bytes("('descr', '<f4')\n", bytes(8)))

    npy("version-3", "UNSUPPORTED", numpy_file(a, version=(3, 0)))
    npy("version-9", "UNSUPPORTED", good[:6] + b"\x09\x00" + good[8:])
    npy("big-endian", "UNSUPPORTED", numpy_file(a.astype(">f4")))
    npy("int16", "UNSUPPORTED", numpy_file(a.astype(np.int16)))
    npy("complex64", "UNSUPPORTED", numpy_file(a.astype(np.complex64)))
    npy("datetime", "UNSUPPORTED", numpy_file(np.zeros(2, "M8[ns]")))
    npy("structured", "UNSUPPORTED", numpy_file(np.zeros(2, [("x", "<f4"), ("y", "<i4")])))
    npy("rank-17", "UNSUPPORTED", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (" + "1, " * 17 + "), }\n", bytes(4)))

    from safetensors.numpy import save as st_save
    tensors = {"w": a, "b": np.arange(3, dtype=np.int64), "mask": a > 3, "h": a.astype(np.float16),
               "u": a.astype(np.uint8), "d": a.astype(np.float64), "i": a.astype(np.int32), "s": np.array(2.0, np.float32)}
    st("numpy-dtypes", "OK", st_save(tensors, metadata={"format": "np"}))
    try:
        import torch
        from safetensors.torch import save as st_torch_save
        st("torch-bf16", "OK", st_torch_save({"x": torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)}))
    except ImportError:
        pass
    st("empty-object", "OK", st_bytes(b"{}"))
    st("padded", "OK", st_bytes(b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}      ', b"\1\2"))
    st("zero-size", "OK", st_bytes({"a": {"dtype": "F32", "shape": [0, 3], "data_offsets": [0, 0]}}))
    st("gap-between", "OK", st_bytes({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                                      "b": {"dtype": "U8", "shape": [1], "data_offsets": [3, 4]}}, bytes(4)))

    w = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    st("short-file", "DATA_CORRUPT", b"\x10\0\0\0")
    st("length-past-eof", "DATA_CORRUPT", struct.pack("<Q", 1000) + b'{"a":1}')
    st("length-huge", "DATA_CORRUPT", struct.pack("<Q", 2 ** 63) + b"{}")
    st("zero-length", "DATA_CORRUPT", struct.pack("<Q", 0))
    # Other files opened as safetensors: "... is not a safetensors file".
    st("index-json", "DATA_CORRUPT", INDEX_JSON)
    st("npy-file", "DATA_CORRUPT", numpy_file(np.arange(4, dtype=np.float32)))
    st("text-file", "DATA_CORRUPT", b"weights go here\n")
    st("length-then-npy", "DATA_CORRUPT", struct.pack("<Q", 10) + b"\x93NUMPY\x01\x00v\x00")
    st("bad-json", "DATA_CORRUPT", st_bytes(b'{"a": {"dtype": "F32",, }}'))
    st("not-object", "DATA_CORRUPT", st_bytes(b"[]"))
    st("trailing-text", "DATA_CORRUPT", st_bytes(b'{} x'))
    st("unterminated", "DATA_CORRUPT", st_bytes(b'{"a": {"dtype": "F32"'))
    st("missing-dtype", "DATA_CORRUPT", st_bytes({"a": {"shape": [2], "data_offsets": [0, 8]}}, bytes(8)))
    st("missing-shape", "DATA_CORRUPT", st_bytes({"a": {"dtype": "F32", "data_offsets": [0, 8]}}, bytes(8)))
    st("missing-offsets", "DATA_CORRUPT", st_bytes({"a": {"dtype": "F32", "shape": [2]}}, bytes(8)))
    st("entry-not-object", "DATA_CORRUPT", st_bytes({"a": [1, 2]}))
    st("unknown-dtype", "DATA_CORRUPT", st_bytes({"a": dict(w, dtype="X9")}, bytes(8)))
    st("dtype-not-string", "DATA_CORRUPT", st_bytes({"a": dict(w, dtype=4)}, bytes(8)))
    st("offsets-disagree", "DATA_CORRUPT", st_bytes({"a": dict(w, data_offsets=[0, 12])}, bytes(12)))
    st("offsets-past-end", "DATA_CORRUPT", st_bytes({"a": w}, bytes(4)))
    st("offsets-reversed", "DATA_CORRUPT", st_bytes({"a": dict(w, data_offsets=[8, 0])}, bytes(8)))
    st("offsets-three", "DATA_CORRUPT", st_bytes({"a": dict(w, data_offsets=[0, 4, 8])}, bytes(8)))
    st("offsets-negative", "DATA_CORRUPT", st_bytes({"a": dict(w, data_offsets=[-8, 0])}, bytes(8)))
    st("offsets-fraction", "DATA_CORRUPT", st_bytes(b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0.0,8]}}', bytes(8)))
    st("overlap", "DATA_CORRUPT", st_bytes({"a": w, "b": dict(w, data_offsets=[4, 12])}, bytes(12)))
    st("duplicate-name", "DATA_CORRUPT", st_bytes(b'{"a":' + json.dumps(w).encode() + b',"a":' + json.dumps(w).encode() + b"}", bytes(8)))
    st("negative-dim", "DATA_CORRUPT", st_bytes({"a": dict(w, shape=[-2])}, bytes(8)))
    st("shape-overflow", "DATA_CORRUPT", st_bytes({"a": dict(w, shape=[2 ** 40, 2 ** 40], data_offsets=[0, 0])}))
    st("byte-size-overflow", "DATA_CORRUPT", st_bytes({"a": dict(w, shape=[2 ** 62], data_offsets=[0, 0])}))
    st("metadata-not-object", "DATA_CORRUPT", st_bytes({"__metadata__": "x"}))
    st("metadata-number", "DATA_CORRUPT", st_bytes({"__metadata__": {"k": 1}}))
    st("deep-nesting", "DATA_CORRUPT", st_bytes(b'{"a":' + b"[" * 200 + b"]" * 200 + b"}"))
    st("invalid-utf8", "DATA_CORRUPT", st_bytes(b'{"\xff\xfe":' + json.dumps(w).encode() + b"}", bytes(8)))
    st("overlong-utf8", "DATA_CORRUPT", st_bytes(b'{"\xc0\xaf":' + json.dumps(w).encode() + b"}", bytes(8)))
    st("lone-surrogate", "DATA_CORRUPT", st_bytes(b'{"\\ud800":' + json.dumps(w).encode() + b"}", bytes(8)))
    st("control-char", "DATA_CORRUPT", st_bytes(b'{"a\x01":' + json.dumps(w).encode() + b"}", bytes(8)))
    st("leading-zero", "DATA_CORRUPT", st_bytes(b'{"a":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}}', bytes(8)))

    st("int8", "UNSUPPORTED", st_bytes({"a": dict(w, dtype="I8", data_offsets=[0, 2])}, bytes(2)))
    st("float8", "UNSUPPORTED", st_bytes({"a": dict(w, dtype="F8_E4M3", data_offsets=[0, 2])}, bytes(2)))
    st("rank-17", "UNSUPPORTED", st_bytes({"a": dict(w, shape=[1] * 17, data_offsets=[0, 4])}, bytes(4)))


if __name__ == "__main__":
    main()
