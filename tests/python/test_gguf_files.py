"""GGUF files as tiers: files written by gguf-py's GGUFWriter (llama.cpp's own
package) opened with File.open_gguf and read back bit for bit through the
file-indexed view and through tiled projection (a stacked expert tensor one
expert per tile); files written by save_gguf read back by gguf-py's
GGUFReader; errors. Skips when gguf-py is not installed."""
import struct

import numpy as np
import pytest

import strideweave as sw
from strideweave.carriers import File

gguf = pytest.importorskip("gguf", reason="gguf-py (pip install gguf) writes and reads the test files")


def write_gguf(path, tensors, metadata=None):
    """A GGUF file written by gguf-py: `tensors` maps names to (array,
    raw_dtype or None)."""
    w = gguf.GGUFWriter(str(path), "llama")
    for key, value in (metadata or {}).items():
        w.add_key_value(key, value, gguf.GGUFValueType.get_type(value))
    for name, (array, raw) in tensors.items():
        if raw is None:
            w.add_tensor(name, array)
        else:
            w.add_tensor(name, array, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def bf16_bits(a):
    """float32 values rounded to bfloat16 by truncation: (bits, values)."""
    bits = (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return bits, (bits.astype(np.uint32) << 16).view(np.float32)


def read_view(ft):
    return ft.view(ft.tiled().full_tensor()).numpy()


@pytest.mark.parametrize("direct_io", [False, True])
def test_gguf_writer_f32_f16_bf16_bit_exact(tmp_path, direct_io):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    a[0, 0] = -0.0
    a[1, 1] = np.float32(1e-40)  # a subnormal
    h = rng.standard_normal((3, 4, 6)).astype(np.float16)
    bits, b_values = bf16_bits(rng.standard_normal((4, 8)))
    path = tmp_path / "model.gguf"
    write_gguf(path, {"a": (a, None), "h": (h, None), "b": (bits, gguf.GGMLQuantizationType.BF16)},
               {"llama.block_count": 2})

    ft = File.open_gguf(path, "a", direct_io=direct_io)
    assert ft.dtype is sw.float32
    assert ft.shape == (5, 7) and ft.order == "C"
    assert ft.logical_shape == (7, 5)  # ggml's ne
    assert ft.grid_shape == (1, 5) and ft.tile_shape == (7, 1)
    got = read_view(ft)
    assert got.view(np.uint32).tobytes() == a.view(np.uint32).tobytes()

    ft = File.open_gguf(path, "h", direct_io=direct_io)
    assert ft.dtype is sw.float16
    got = read_view(ft)
    assert got.dtype == np.float16 and got.view(np.uint16).tobytes() == h.view(np.uint16).tobytes()

    ft = File.open_gguf(path, "b", direct_io=direct_io)
    assert ft.dtype is sw.bfloat16
    assert ft.shape == (4, 8)
    got = read_view(ft)
    assert got.view(np.uint32).tobytes() == b_values.view(np.uint32).tobytes()
    # The same bytes gguf-py's reader finds.
    reader = gguf.GGUFReader(str(path))
    t = next(t for t in reader.tensors if t.name == "b")
    assert ft.data_offset == t.data_offset
    assert ft.data_bytes == t.n_bytes


def test_gguf_stacked_experts_one_per_tile(tmp_path):
    """llama.cpp's ffn_*_exps tensor: NumPy shape (n_expert, n_ff, n_embd),
    ne (n_embd, n_ff, n_expert), one expert per tile."""
    n_expert, n_ff, n_embd = 4, 6, 40
    rng = np.random.default_rng(7)
    experts = rng.standard_normal((n_expert, n_ff, n_embd)).astype(np.float32)
    path = tmp_path / "experts.gguf"
    write_gguf(path, {"blk.0.ffn_up_exps.weight": (experts, None),
                      "blk.0.ffn_gate_inp.weight": (rng.standard_normal((n_expert, n_embd)).astype(np.float32),
                                                    None)})
    reader = gguf.GGUFReader(str(path))
    t = next(t for t in reader.tensors if t.name == "blk.0.ffn_up_exps.weight")
    assert list(t.shape) == [n_embd, n_ff, n_expert]

    ft = File.open_gguf(path, "blk.0.ffn_up_exps.weight", direct_io=True)
    assert ft.shape == (n_expert, n_ff, n_embd)
    assert ft.logical_shape == tuple(int(d) for d in t.shape)
    assert ft.grid_shape == (1, 1, n_expert) and ft.tile_shape == (n_embd, n_ff, 1)
    tiled = ft.tiled()
    full = tiled.full_tensor()
    compact = tiled.project(full, sw.TileSelection([[0], [0], [1, 3]])).wait()
    assert compact.shape == (n_embd, n_ff, 2)
    got = np.transpose(compact.numpy(), (2, 1, 0))
    assert got.tobytes() == experts[[1, 3]].tobytes()
    # Only the two experts were read.
    assert tiled.tile_state((0, 0, 0)).location == "secondary"
    assert ft.view(full).numpy().tobytes() == experts.tobytes()


@pytest.mark.parametrize("name", ["Q8_0", "Q4_0", "MXFP4", "Q4_K", "Q6_K"])
def test_gguf_quantized_experts_open_as_their_dtype_and_dequantize_as_gguf_py(tmp_path, name):
    """A stacked expert tensor of a quantized type, written by gguf-py (its
    quantizer where it has one, arbitrary blocks for the k-quants), opens one
    expert per tile; its dequantized values equal gguf-py's bit for bit."""
    qtype = getattr(gguf.GGMLQuantizationType, name)
    block, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    n_expert, n_ff, n_embd = 3, 2, 2 * max(block, 32)
    rng = np.random.default_rng(11)
    if name in ("Q4_K", "Q6_K"):
        q = rng.integers(0, 256, (n_expert, n_ff, n_embd // block * nbytes), dtype=np.uint8)
        # Finite f16 scales (d and dmin lead a Q4_K block; d ends a Q6_K block).
        blocks = q.reshape(-1, nbytes)
        at = [0, 2] if name == "Q4_K" else [nbytes - 2]
        for o in at:
            blocks[:, o:o + 2] = np.frombuffer(rng.uniform(-2, 2, len(blocks)).astype(np.float16).tobytes(),
                                              np.uint8).reshape(-1, 2)
    else:
        q = gguf.quants.quantize(rng.standard_normal((n_expert, n_ff, n_embd)).astype(np.float32), qtype)
    path = tmp_path / "q.gguf"
    write_gguf(path, {"blk.0.ffn_down_exps.weight": (q, qtype), "a": (np.ones(4, np.float32), None)})
    ft = File.open_gguf(path, "blk.0.ffn_down_exps.weight", direct_io=True)
    assert ft.dtype is getattr(sw, name.lower())
    assert ft.logical_shape == (n_embd, n_ff, n_expert)
    assert ft.grid_shape == (1, 1, n_expert) and ft.tile_shape == (n_embd, n_ff, 1)
    tiled = ft.tiled()
    compact = tiled.project(tiled.full_tensor(), sw.TileSelection([[0], [0], list(range(n_expert))])).wait()
    assert compact.dtype is ft.dtype
    got = np.transpose(compact.astype(sw.float32).numpy(), (2, 1, 0))
    want = gguf.quants.dequantize(q, qtype)
    assert got.shape == want.shape
    assert got.tobytes() == want.astype(np.float32).tobytes()


def test_gguf_other_quantized_types_refused_naming_the_type(tmp_path):
    q = gguf.quants.quantize(np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32), gguf.GGMLQuantizationType.Q8_0)
    q41 = np.zeros((2, 20), np.uint8)
    path = tmp_path / "q.gguf"
    write_gguf(path, {"q": (q41, gguf.GGMLQuantizationType.Q4_1), "q8": (q, gguf.GGMLQuantizationType.Q8_0),
                      "a": (np.ones(4, np.float32), None)})
    with pytest.raises(NotImplementedError, match=r"tensor 'q' type: unsupported dtype: ggml type Q4_1 has no"):
        File.open_gguf(path, "q")
    assert File.open_gguf(path, "q8").dtype is sw.q8_0
    assert File.open_gguf(path, "a").shape == (4,)
    with pytest.raises(ValueError, match="holds no tensor named 'missing'"):
        File.open_gguf(path, "missing")
    with pytest.raises(TypeError):
        File.open_gguf(path, 3)


def test_gguf_lying_header_names_file_and_tensor(tmp_path):
    path = tmp_path / "lying.gguf"
    write_gguf(path, {"a": (np.arange(8, dtype=np.float32), None)})
    data = bytearray(path.read_bytes())
    # The tensor info's offset made misaligned, then past the end.
    at = bytes(data).index(b"\x01\x00\x00\x00\x00\x00\x00\x00a") + 9  # name length 1, "a"
    at += 4 + 8 + 4  # n_dims, ne[0], type
    data[at:at + 8] = struct.pack("<Q", 4)
    path.write_bytes(bytes(data))
    with pytest.raises(sw.DataCorruptError, match=r"GGUF file '.*lying.gguf': tensor 'a' offset: 4 is not a multiple"):
        File.open_gguf(path, "a")
    data[at:at + 8] = struct.pack("<Q", 1 << 40)
    path.write_bytes(bytes(data))
    with pytest.raises(sw.DataCorruptError, match="passes the end of the file's data"):
        File.open_gguf(path, "a")


def test_save_gguf_read_by_gguf_reader(tmp_path):
    rng = np.random.default_rng(11)
    a = rng.standard_normal((3, 5)).astype(np.float32)
    h = rng.standard_normal((2, 3, 4)).astype(np.float16)
    bits, b_values = bf16_bits(rng.standard_normal((6,)))
    ta = sw.from_numpy(a)
    th = sw.from_numpy(h)
    tb = sw.from_numpy(b_values).astype(sw.bfloat16)
    path = tmp_path / "saved.gguf"
    sw.save_gguf(path, {"a": ta, "h": th, "b": tb},
                 metadata={"general.architecture": "llama", "llama.block_count": 2, "llama.rope.freq_base": 10000.0,
                           "x.neg": -3, "x.big": 2 ** 40, "x.flag": True, "x.f64": np.float64(0.1),
                           "x.u8": np.uint8(7)},
                 alignment=64)
    reader = gguf.GGUFReader(str(path))
    assert reader.alignment == 64
    fields = reader.fields
    assert fields["general.architecture"].contents() == "llama"
    expect = {"llama.block_count": (2, gguf.GGUFValueType.UINT32),
              "llama.rope.freq_base": (10000.0, gguf.GGUFValueType.FLOAT32),
              "x.neg": (-3, gguf.GGUFValueType.INT32), "x.big": (2 ** 40, gguf.GGUFValueType.UINT64),
              "x.flag": (True, gguf.GGUFValueType.BOOL), "x.f64": (0.1, gguf.GGUFValueType.FLOAT64),
              "x.u8": (7, gguf.GGUFValueType.UINT8), "general.alignment": (64, gguf.GGUFValueType.UINT32)}
    for key, (value, vtype) in expect.items():
        assert fields[key].types == [vtype], key
        assert fields[key].contents() == value, key
    tensors = {t.name: t for t in reader.tensors}
    assert list(tensors) == ["a", "h", "b"]
    assert tensors["a"].tensor_type == gguf.GGMLQuantizationType.F32
    assert list(tensors["a"].shape) == [5, 3]  # ne: the shape reversed
    assert tensors["a"].data.tobytes() == a.tobytes()
    assert tensors["h"].data.tobytes() == h.tobytes()
    assert tensors["b"].tensor_type == gguf.GGMLQuantizationType.BF16
    assert tensors["b"].data.tobytes() == bits.tobytes()
    for t in reader.tensors:
        assert t.data_offset % 64 == 0
    # And back through the opener.
    assert File.open_gguf(path, "h").view(File.open_gguf(path, "h").tiled().full_tensor()).numpy().tobytes() \
        == h.tobytes()


def test_save_gguf_tiled_keeps_the_files_ne(tmp_path):
    n_expert, n_ff, n_embd = 3, 4, 8
    experts = np.arange(n_expert * n_ff * n_embd, dtype=np.float32).reshape(n_expert, n_ff, n_embd)
    src = tmp_path / "src.gguf"
    write_gguf(src, {"blk.0.ffn_down_exps.weight": (experts, None)})
    ft = File.open_gguf(src, "blk.0.ffn_down_exps.weight")
    tiled = ft.tiled()
    out = tmp_path / "out.gguf"
    sw.save_gguf(out, {"blk.0.ffn_down_exps.weight": ft.view(tiled.full_tensor()), "full": tiled})
    reader = gguf.GGUFReader(str(out))
    t = {t.name: t for t in reader.tensors}
    assert list(t["blk.0.ffn_down_exps.weight"].shape) == [n_embd, n_ff, n_expert]
    assert t["blk.0.ffn_down_exps.weight"].data.tobytes() == experts.tobytes()
    # The TiledEvictable saves its full tensor (n_embd, n_ff, n_expert).
    assert list(t["full"].shape) == [n_expert, n_ff, n_embd]
    assert t["full"].data.tobytes() == np.ascontiguousarray(experts.transpose(2, 1, 0)).tobytes()
    # Nothing was promoted.
    assert tiled.tile_state((0, 0, 0)).location == "secondary"


def test_save_gguf_errors(tmp_path):
    t = sw.from_numpy(np.ones((2, 2), np.float32))
    path = tmp_path / "bad.gguf"
    with pytest.raises(TypeError, match="which GGUF cannot hold"):
        sw.save_gguf(path, {"u": sw.from_numpy(np.ones(3, np.uint8))})
    with pytest.raises(NotImplementedError, match="array values are not written"):
        sw.save_gguf(path, {"t": t}, metadata={"tokens": ["a", "b"]})
    with pytest.raises(ValueError, match="alignment 48 is not a power of two"):
        sw.save_gguf(path, {"t": t}, alignment=48)
    with pytest.raises(ValueError, match="'general.alignment' is written from the alignment"):
        sw.save_gguf(path, {"t": t}, metadata={"general.alignment": 64})
    with pytest.raises(ValueError, match="fits no GGUF integer type"):
        sw.save_gguf(path, {"t": t}, metadata={"k": 2 ** 64})
    with pytest.raises(TypeError, match="a value must be"):
        sw.save_gguf(path, {"t": t}, metadata={"k": object()})
    assert not path.exists()


QUANTIZED = ["Q8_0", "Q4_0", "Q4_K", "Q6_K", "MXFP4"]


@pytest.mark.parametrize("name", QUANTIZED)
def test_save_gguf_quantized_read_back_by_gguf_reader_and_open_gguf(tmp_path, name):
    """A quantized tensor of shape (K, N) is GGUF's tensor of its ggml type
    with ne (K, N) and its blocks as they are stored: gguf-py reads the
    same type, shape and bytes and dequantizes them to StrideWeave's values;
    File.open_gguf opens the same blocks. A strided view saves its own
    blocks."""
    qtype = getattr(gguf.GGMLQuantizationType, name)
    block, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    K, N = 2 * block if block == 256 else 4 * block, 5
    rng = np.random.default_rng(21)
    x = rng.standard_normal((N, K)).astype(np.float32)
    q = sw.tensor(x.T, dtype=name.lower())
    assert q.shape == (K, N)
    view = q[block:, 1::2]  # a view: the second block onward of columns 1 and 3
    path = tmp_path / "q.gguf"
    sw.save_gguf(path, {"w": q, "bias": sw.from_numpy(np.arange(3, dtype=np.float32)), "view": view}, alignment=64)

    reader = gguf.GGUFReader(str(path))
    t = {t.name: t for t in reader.tensors}
    assert t["w"].tensor_type == qtype
    assert list(t["w"].shape) == [K, N]  # ne: ne[0] is the first mode, the blocks' mode
    assert t["w"].data.shape == (N, K // block * nbytes)
    assert t["w"].data.tobytes() == np.ascontiguousarray(q.numpy().T).tobytes()
    want = q.astype(sw.float32).numpy().T
    assert gguf.quants.dequantize(t["w"].data, qtype).tobytes() == want.tobytes()
    assert list(t["view"].shape) == [K - block, 2]
    assert t["view"].data.tobytes() == np.ascontiguousarray(q.numpy()[nbytes:, 1::2].T).tobytes()
    assert t["bias"].data.tobytes() == np.arange(3, dtype=np.float32).tobytes()
    assert all(tt.data_offset % 64 == 0 for tt in reader.tensors)

    ft = File.open_gguf(path, "w")
    assert ft.dtype is getattr(sw, name.lower())
    assert ft.logical_shape == (K, N)
    tiled = ft.tiled()
    full = tiled.full_tensor()
    assert full.shape == (K, N)
    assert np.array_equal(full.numpy(), q.numpy())
    compact = tiled.project(full, sw.TileSelection([[0], list(range(N))])).wait()
    assert compact.astype(sw.float32).numpy().tobytes() == q.astype(sw.float32).numpy().tobytes()


@pytest.mark.parametrize("name", ["Q4_K", "Q8_0"])
def test_save_gguf_quantized_stacked_experts_round_trip(tmp_path, name):
    """A stacked expert tensor of shape (K, N, E), ne (K, N, E) as llama.cpp's
    ffn_*_exps: saved from a CPU tensor, read by gguf-py as its (E, N, K)
    blocks, opened one expert per tile, and saved again from that
    TiledEvictable (tile by tile, nothing promoted) to the same bytes."""
    qtype = getattr(gguf.GGMLQuantizationType, name)
    block, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    K, N, E = 2 * block, 3, 4
    rng = np.random.default_rng(5)
    experts = rng.standard_normal((E, N, K)).astype(np.float32)
    q = sw.tensor(np.transpose(experts, (2, 1, 0)), dtype=name.lower())
    assert q.shape == (K, N, E)
    path = tmp_path / "experts.gguf"
    sw.save_gguf(path, {"blk.0.ffn_up_exps.weight": q})
    t = gguf.GGUFReader(str(path)).tensors[0]
    assert t.tensor_type == qtype and list(t.shape) == [K, N, E]
    assert t.data.shape == (E, N, K // block * nbytes)
    assert t.data.tobytes() == np.ascontiguousarray(np.transpose(q.numpy(), (2, 1, 0))).tobytes()
    assert gguf.quants.dequantize(t.data, qtype).tobytes() == \
        np.ascontiguousarray(np.transpose(q.astype(sw.float32).numpy(), (2, 1, 0))).tobytes()

    ft = File.open_gguf(path, "blk.0.ffn_up_exps.weight")
    assert ft.logical_shape == (K, N, E)
    assert ft.grid_shape == (1, 1, E) and ft.tile_shape == (K, N, 1)
    tiled = ft.tiled()
    again = tmp_path / "again.gguf"
    sw.save_gguf(again, {"blk.0.ffn_up_exps.weight": tiled})
    assert all(tiled.tile_state((0, 0, e)).location == "secondary" for e in range(E))
    t2 = gguf.GGUFReader(str(again)).tensors[0]
    assert t2.tensor_type == qtype and list(t2.shape) == [K, N, E]
    assert t2.data.tobytes() == t.data.tobytes()
    compact = tiled.project(tiled.full_tensor(), sw.TileSelection([[0], [0], [2, 0]])).wait()
    assert np.array_equal(compact.numpy(), q.numpy()[:, :, [2, 0]])


def test_save_gguf_quantized_errors_name_the_tensor_and_file(tmp_path):
    """A quantized tensor always keeps whole blocks along its first mode (GGUF's
    ne[0]): one that would not is refused where it would be made. A rank
    above GGUF's 4 is refused naming the tensor and the file, and nothing
    is written."""
    with pytest.raises(ValueError, match="whole"):
        sw.from_blocks(np.zeros((17, 2), np.uint8), sw.q8_0)
    q = sw.from_blocks(np.zeros((34, 2), np.uint8), sw.q8_0)
    with pytest.raises(ValueError, match="splits a block"):
        q[16:]
    path = tmp_path / "bad.gguf"
    deep = sw.from_blocks(np.zeros((34, 1, 1, 1, 2), np.uint8), sw.q8_0)
    with pytest.raises(ValueError, match=r"saving GGUF file '.*bad\.gguf': tensor 'deep' has 5 modes"):
        sw.save_gguf(path, {"ok": q, "deep": deep})
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []
