#!/usr/bin/env python3
"""Writes the seed corpus of npy and safetensors headers under tests/corpus/.

Each file is named NAME.EXPECTED.EXT, EXPECTED being the error code the
header parsers (sw_testing_parse_npy_header / _safetensors_header) must
give the whole file: OK, DATA_CORRUPT or UNSUPPORTED. tests/c/test_model_files.c
replays every file; a fuzzer can start from them. The valid files are
written by NumPy and by the safetensors package themselves; the others are
made by hand. Rerun after changing this script: python3 tests/corpus/make_corpus.py
"""
import io
import json
import pathlib
import struct

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
NPY = HERE / "npy"
SAFETENSORS = HERE / "safetensors"


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


def main():
    NPY.mkdir(exist_ok=True)
    SAFETENSORS.mkdir(exist_ok=True)
    for old in list(NPY.iterdir()) + list(SAFETENSORS.iterdir()):
        old.unlink()

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
