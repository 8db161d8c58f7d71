"""Model files as tiers: .npy and .safetensors files written by NumPy, the
safetensors package and PyTorch, opened with File.open_npy /
open_safetensors / open_raw, read back through tiled projection and through
the file-indexed view; saving with save_safetensors / save_npy; errors."""
import json
import pathlib
import struct

import numpy as np
import pytest

import strideweave as sw
from strideweave.carriers import CPU, File

safetensors_numpy = pytest.importorskip("safetensors.numpy")

DTYPES = [(np.float32, sw.float32), (np.float64, sw.float64), (np.float16, sw.float16), (np.int32, sw.int32),
          (np.int64, sw.int64), (np.uint8, sw.uint8), (np.bool_, sw.bool_)]
SHAPES = [(3, 4, 5), (1, 1, 1), (2, 7, 3), (5,), (6, 3), (2, 3, 1, 5), (4, 1, 9)]


def sample(shape, np_dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np_dtype is np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(np_dtype, np.integer):
        info = np.iinfo(np_dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), size=shape, endpoint=True).astype(np_dtype)
    return rng.standard_normal(shape).astype(np_dtype)


def view_values(view):
    """Every element of a file-indexed view through tensor[coord]."""
    out = np.empty(view.shape, dtype=np.float64)
    for coord in np.ndindex(*view.shape):
        out[coord] = view[coord]
    return out


def check_tiled(ft, expected):
    """The file tensor read three ways equals `expected` (the array as the
    file indexes it): the view's elements, the view as NumPy, and a tiled
    projection of the first and last tiles."""
    assert ft.shape == expected.shape
    tiled = ft.tiled()
    full = tiled.full_tensor()
    assert full.shape == ft.logical_shape
    view = ft.view(full)
    assert view.shape == expected.shape
    np.testing.assert_array_equal(view_values(view), expected.astype(np.float64))
    np.testing.assert_array_equal(view.numpy(), expected)
    # Tiles of the file's slowest mode (its first index, the full tensor's
    # last mode): project the first and the last.
    assert ft.order == "C"
    chosen = sorted({0, expected.shape[0] - 1}) if expected.ndim > 1 else [0]
    per_axis = [list(range(g)) for g in ft.grid_shape]
    per_axis[-1] = chosen
    compact = tiled.project(full, sw.TileSelection(per_axis)).wait()
    got = np.transpose(compact.numpy(), tuple(reversed(range(expected.ndim))))
    np.testing.assert_array_equal(got, expected[chosen] if expected.ndim > 1 else expected)
    return tiled


@pytest.mark.parametrize("np_dtype,sw_dtype", DTYPES, ids=[d[1].name for d in DTYPES])
@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
def test_npy_c_order_every_dtype(tmp_path, np_dtype, sw_dtype, shape):
    a = sample(shape, np_dtype)
    path = tmp_path / "w.npy"
    np.save(path, a)
    ft = File.open_npy(path)
    assert ft.dtype is sw_dtype
    assert ft.order == "C"
    assert ft.logical_shape == tuple(reversed(shape))
    assert ft.permutation == tuple(reversed(range(len(shape))))
    assert ft.data_bytes == a.nbytes
    assert ft.segments == 1
    assert ft.carrier.is_read_only()
    check_tiled(ft, a)


def test_npy_expert_geometry(tmp_path):
    a = sample((4, 3, 5), np.float32)
    np.save(tmp_path / "e.npy", a)
    ft = File.open_npy(tmp_path / "e.npy")
    # docs/matmul.md: (E, O, I) row-major is (I, O, E); tile (I, O, 1).
    assert ft.grid_shape == (1, 1, 4)
    assert ft.tile_shape == (5, 3, 1)
    tiled = ft.tiled()
    full = tiled.full_tensor()
    compact = tiled.project(full, sw.TileSelection([[0], [0], [1, 3]])).wait()
    assert compact.shape == (5, 3, 2)
    # The compact (I, O, S) permuted indexes as the file does: (S, O, I).
    np.testing.assert_array_equal(compact.permute(2, 1, 0).numpy(), a[[1, 3]])
    v = ft.view(full)
    assert v[3, 2, 4] == a[3, 2, 4]
    assert v[1, 0, 2] == a[1, 0, 2]


@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 7), (2, 6), (2, 1, 3, 2)])
def test_npy_fortran_order_maps_as_is(tmp_path, shape):
    a = np.asfortranarray(sample(shape, np.float64, seed=3))
    path = tmp_path / "f.npy"
    np.save(path, a)
    ft = File.open_npy(path)
    assert ft.order == "F"
    assert ft.logical_shape == shape
    assert ft.permutation == tuple(range(len(shape)))
    tiled = ft.tiled()
    full = tiled.full_tensor()
    np.testing.assert_array_equal(ft.view(full).numpy(), a)
    np.testing.assert_array_equal(full.numpy(), a)
    for coord in [(0,) * len(shape), tuple(s - 1 for s in shape)]:
        assert ft.view(full)[coord] == a[coord]


@pytest.mark.parametrize("np_dtype,sw_dtype", DTYPES, ids=[d[1].name for d in DTYPES])
def test_safetensors_by_name_every_dtype(tmp_path, np_dtype, sw_dtype):
    tensors = {"a": sample((3, 5, 2), np_dtype, 1), "b.weight": sample((7, 3), np_dtype, 2),
               "odd": sample((1, 9, 1), np_dtype, 3)}
    path = tmp_path / "m.safetensors"
    safetensors_numpy.save_file(tensors, str(path), metadata={"format": "np"})
    for name, a in tensors.items():
        ft = File.open_safetensors(path, name)
        assert ft.dtype is sw_dtype
        assert ft.shape == a.shape
        check_tiled(ft, a)


def test_safetensors_bf16_and_f16_from_torch(tmp_path):
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    g = torch.Generator().manual_seed(5)
    w = {"bf": torch.randn(3, 4, 6, generator=g).to(torch.bfloat16), "h": torch.randn(2, 5, generator=g).half()}
    path = tmp_path / "t.safetensors"
    st_torch.save_file(w, str(path), metadata={"format": "pt"})
    ft = File.open_safetensors(path, "bf")
    assert ft.dtype is sw.bfloat16
    view = ft.view(ft.tiled().full_tensor())
    want = w["bf"].float().numpy()
    np.testing.assert_array_equal(view.numpy(), want)
    assert view[2, 3, 5] == want[2, 3, 5]
    ft = File.open_safetensors(path, "h")
    np.testing.assert_array_equal(ft.view(ft.tiled().full_tensor()).numpy(), w["h"].numpy())


def mixtral_layer(path, layer, experts, out_dim, in_dim, seed=0):
    """A Mixtral-layout checkpoint: one (O, I) tensor per expert and matrix."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for e in range(experts):
        for w in ("w1", "w2", "w3"):
            tensors[f"model.layers.{layer}.block_sparse_moe.experts.{e}.{w}.weight"] = \
                rng.standard_normal((out_dim, in_dim)).astype(np.float32)
    tensors[f"model.layers.{layer}.block_sparse_moe.gate.weight"] = rng.standard_normal((experts, in_dim)).astype(
        np.float32)
    safetensors_numpy.save_file(tensors, str(path), metadata={"format": "pt"})
    return tensors


@pytest.mark.parametrize("direct_io", [False, True])
def test_safetensors_per_expert_stack(tmp_path, direct_io):
    path = tmp_path / "model.safetensors"
    tensors = mixtral_layer(path, 1, 5, 6, 7)
    names = [f"model.layers.1.block_sparse_moe.experts.{e}.w1.weight" for e in range(5)]
    ft = File.open_safetensors(path, names, direct_io=direct_io)
    assert ft.shape == (5, 6, 7)
    assert ft.segments == 5
    assert ft.grid_shape == (1, 1, 5)
    assert ft.tile_shape == (7, 6, 1)
    stacked = np.stack([tensors[n] for n in names])
    check_tiled(ft, stacked)
    # Tile e is tensor names[e], in the order given.
    order = [4, 0, 2]
    ft = File.open_safetensors(path, [names[e] for e in order], direct_io=direct_io)
    tiled = ft.tiled()
    compact = tiled.project(tiled.full_tensor(), sw.TileSelection([[0], [0], [0, 2]])).wait()
    np.testing.assert_array_equal(compact.permute(2, 1, 0).numpy(), stacked[[4, 2]])


def test_direct_io_on_ext4_reads_through_o_direct(tmp_path):
    from strideweave import _native as N
    with open("/proc/mounts") as mounts:
        fstype = None
        best = ""
        for line in mounts:
            dev, mnt, typ = line.split()[:3]
            if str(tmp_path).startswith(mnt) and len(mnt) > len(best):
                best, fstype = mnt, typ
    if fstype != "ext4":
        pytest.skip(f"{tmp_path} is on {fstype}, not ext4")
    path = tmp_path / "big.safetensors"
    rng = np.random.default_rng(9)
    tensors = {f"e{e}": rng.standard_normal((40, 33)).astype(np.float32) for e in range(3)}
    safetensors_numpy.save_file(tensors, str(path))
    ft = File.open_safetensors(path, ["e0", "e1", "e2"], direct_io=True)
    stats = N.testing_file_io_stats(ft.carrier._h)
    assert stats["direct_open"]
    np.testing.assert_array_equal(ft.view(ft.tiled().full_tensor()).numpy(),
                                  np.stack([tensors["e0"], tensors["e1"], tensors["e2"]]))
    stats = N.testing_file_io_stats(ft.carrier._h)
    assert stats["buffered_bytes"] == 0
    assert stats["direct_bytes"] + stats["bounce_bytes"] == 3 * 40 * 33 * 4


def sharded_layer(tmp_path, layer, experts, out_dim, in_dim, shards=3, seed=0):
    """A Mixtral-layout checkpoint sharded over `shards` files as Hugging
    Face writes them (model-0000k-of-0000n.safetensors): expert e's tensors
    in shard (e * 2) % shards, each shard's experts in reverse order, with
    the gate in the last shard. Returns the shard paths, each tensor and the
    shard holding it."""
    rng = np.random.default_rng(seed)
    paths = [tmp_path / f"model-{k + 1:05d}-of-{shards:05d}.safetensors" for k in range(shards)]
    per_shard = [{} for _ in paths]
    tensors, where = {}, {}
    for e in reversed(range(experts)):
        for w in ("w1", "w2", "w3"):
            name = f"model.layers.{layer}.block_sparse_moe.experts.{e}.{w}.weight"
            tensors[name] = rng.standard_normal((out_dim, in_dim)).astype(np.float32)
            where[name] = (e * 2) % shards
            per_shard[where[name]][name] = tensors[name]
    per_shard[-1][f"model.layers.{layer}.block_sparse_moe.gate.weight"] = \
        rng.standard_normal((experts, in_dim)).astype(np.float32)
    for path, shard in zip(paths, per_shard):
        safetensors_numpy.save_file(shard, str(path), metadata={"format": "pt"})
    return paths, tensors, where


@pytest.mark.parametrize("direct_io", [False, True])
def test_safetensors_sharded_stack(tmp_path, direct_io):
    """Tensors of one layer spread over three files open as one stack: a
    list of paths parallel to the names, in no file's order, str and
    pathlib paths mixed; exact values through the view, projection and a
    promoted TiledEvictable, against the safetensors package's reading."""
    paths, tensors, where = sharded_layer(tmp_path, 0, 6, 24, 40)
    names = [f"model.layers.0.block_sparse_moe.experts.{e}.w1.weight" for e in range(6)]
    files = [paths[where[n]] for n in names]
    assert len(set(files)) == 3 and files != sorted(files)
    files = [str(p) if i % 2 else p for i, p in enumerate(files)]
    ft = File.open_safetensors(files, names, direct_io=direct_io)
    assert ft.shape == (6, 24, 40)
    assert ft.segments == 6
    assert ft.grid_shape == (1, 1, 6)
    assert ft.tile_shape == (40, 24, 1)
    assert ft.logical_shape == (40, 24, 6)
    assert ft.permutation == (2, 1, 0)
    assert ft.data_bytes == 6 * 24 * 40 * 4
    # data_offset is names[0]'s offset in its file.
    with safetensors_numpy.safe_open(str(paths[where[names[0]]]), "np") as f:
        assert f.get_tensor(names[0]).shape == (24, 40)
    body = paths[where[names[0]]].read_bytes()
    n = struct.unpack("<Q", body[:8])[0]
    header = json.loads(body[8:8 + n])
    assert ft.data_offset == 8 + n + header[names[0]]["data_offsets"][0]
    loaded = {}
    for p in paths:
        loaded.update(safetensors_numpy.load_file(str(p)))
    stacked = np.stack([loaded[n] for n in names])
    np.testing.assert_array_equal(stacked, np.stack([tensors[n] for n in names]))
    check_tiled(ft, stacked)
    # Projection of experts from every file, then everything promoted.
    ft = File.open_safetensors(files, names, direct_io=direct_io)
    tiled = ft.tiled()
    full = tiled.full_tensor()
    chosen = [5, 1, 2, 4]
    compact = tiled.project(full, sw.TileSelection([[0], [0], chosen])).wait()
    np.testing.assert_array_equal(compact.permute(*ft.permutation).numpy(), stacked[chosen])
    tiled.promote(sw.TileSet([(0, 0, e) for e in range(6)]))
    np.testing.assert_array_equal(ft.view(full).numpy(), stacked)
    if direct_io:
        from strideweave import _native as N
        stats = N.testing_file_io_stats(ft.carrier._h)
        total = stats["direct_bytes"] + stats["bounce_bytes"] + stats["buffered_bytes"]
        assert total >= stacked.nbytes
        if stats["direct_open"]:
            assert stats["buffered_bytes"] == 0


def test_safetensors_sharded_stack_one_file_per_name_or_one_path(tmp_path):
    """A list of paths naming one file throughout is the one-file stack; a
    tuple and a generator of paths work as a list does."""
    paths, tensors, where = sharded_layer(tmp_path, 2, 4, 3, 5, shards=2)
    names = [n for n in tensors if n.endswith("w2.weight") and where[n] == 0]
    one = File.open_safetensors(paths[0], names)
    many = File.open_safetensors([paths[0]] * len(names), names)
    for ft in (one, many):
        assert ft.data_offset == one.data_offset
        np.testing.assert_array_equal(ft.view(ft.tiled().full_tensor()).numpy(), np.stack([tensors[n] for n in names]))
    names = [f"model.layers.2.block_sparse_moe.experts.{e}.w3.weight" for e in range(4)]
    expected = np.stack([tensors[n] for n in names])
    for files in (tuple(paths[where[n]] for n in names), (paths[where[n]] for n in names)):
        ft = File.open_safetensors(files, names)
        np.testing.assert_array_equal(ft.view(ft.tiled().full_tensor()).numpy(), expected)


def test_safetensors_sharded_stack_errors(tmp_path):
    paths, tensors, where = sharded_layer(tmp_path, 0, 4, 3, 5)
    names = [f"model.layers.0.block_sparse_moe.experts.{e}.w1.weight" for e in range(4)]
    files = [paths[where[n]] for n in names]
    # Lists of different lengths, a list of paths with one name, bad items.
    with pytest.raises(sw.StrideWeaveValueError, match="3 paths for 4 tensor names"):
        File.open_safetensors(files[:3], names)
    with pytest.raises(sw.StrideWeaveValueError, match="5 paths for 4 tensor names"):
        File.open_safetensors(files + files[:1], names)
    with pytest.raises(sw.StrideWeaveTypeError, match="list of paths"):
        File.open_safetensors(files, names[0])
    with pytest.raises(sw.StrideWeaveTypeError, match=r"path\[1\] must be a str or os.PathLike, not int"):
        File.open_safetensors([files[0], 7, files[2], files[3]], names)
    with pytest.raises(sw.StrideWeaveTypeError, match="path must be"):
        File.open_safetensors(3.5, names)
    with pytest.raises(sw.StrideWeaveTypeError):
        File.open_safetensors(files, [names[0], 1, names[2], names[3]])
    with pytest.raises(sw.StrideWeaveValueError, match="no tensor names"):
        File.open_safetensors([], [])
    # A name its file lacks: expert 1 lies in shard 2, not shard 0.
    wrong = [files[0], paths[0], files[2], files[3]]
    with pytest.raises(sw.StrideWeaveValueError) as caught:
        File.open_safetensors(wrong, names)
    assert str(caught.value) == f"safetensors file '{paths[0]}' holds no tensor named '{names[1]}'"
    # The same tensor of the same file twice; one name in two files is fine
    # unless the tensors differ.
    with pytest.raises(sw.StrideWeaveValueError, match=f"'{names[2]}' is named twice .*{paths[where[names[2]]].name}"):
        File.open_safetensors(files[:3] + [files[2]], names[:3] + [names[2]])
    gate = "model.layers.0.block_sparse_moe.gate.weight"
    with pytest.raises(sw.StrideWeaveValueError, match=f"'{gate}' of safetensors file '{paths[2]}' has shape "
                                                       r"\(4, 5\), but .* has \(3, 5\)"):
        File.open_safetensors(files[:1] + [paths[2]], names[:1] + [gate])
    # A file that cannot be opened or parsed.
    missing = tmp_path / "model-00004-of-00003.safetensors"
    with pytest.raises(sw.StrideWeaveOSError, match=f"cannot open '{missing}'"):
        File.open_safetensors(files[:3] + [missing], names)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(struct.pack("<Q", 5) + b"{nope")
    with pytest.raises(sw.DataCorruptError, match="junk.safetensors"):
        File.open_safetensors([files[0], junk], names[:2])


def test_open_raw(tmp_path):
    a = sample((3, 4, 2), np.int32)
    path = tmp_path / "w.bin"
    path.write_bytes(b"\0" * 24 + a.tobytes())
    ft = File.open_raw(path, (3, 4, 2), dtype=sw.int32, offset=24)
    check_tiled(ft, a)
    ft = File.open_raw(path, (2, 4, 3), dtype=sw.int32, offset=24, order="F")
    np.testing.assert_array_equal(ft.view(ft.tiled().full_tensor()).numpy(),
                                  a.reshape(-1).reshape((2, 4, 3), order="F"))
    with pytest.raises(sw.StrideWeaveValueError, match="order"):
        File.open_raw(path, (3, 4, 2), dtype=sw.int32, order="K")
    with pytest.raises(sw.StrideWeaveValueError, match="passes the end of .*w.bin"):
        File.open_raw(path, (3, 4, 3), dtype=sw.int32, offset=24)


# ---- writing ----------------------------------------------------------------

@pytest.mark.parametrize("np_dtype,sw_dtype", DTYPES, ids=[d[1].name for d in DTYPES])
def test_save_safetensors_reads_back_with_numpy(tmp_path, np_dtype, sw_dtype):
    a = sample((3, 4, 5), np_dtype, 4)
    b = sample((2, 9), np_dtype, 5)
    np.save(tmp_path / "a.npy", a)
    ft = File.open_npy(tmp_path / "a.npy")
    view = ft.view(ft.tiled().full_tensor())
    out = tmp_path / "out.safetensors"
    sw.save_safetensors(out, {"experts": view, "b": sw.from_numpy(b)}, metadata={"format": "pt"})
    back = safetensors_numpy.load_file(str(out))
    assert back["experts"].dtype == a.dtype and back["experts"].shape == a.shape
    np.testing.assert_array_equal(back["experts"], a)
    # from_numpy keeps the array's indexing.
    np.testing.assert_array_equal(back["b"], b)
    header = json.loads(out.read_bytes()[8:8 + struct.unpack("<Q", out.read_bytes()[:8])[0]])
    assert header["__metadata__"] == {"format": "pt"}
    assert list(k for k in header if k != "__metadata__") == ["experts", "b"]


def test_save_bf16_reads_back_with_torch(tmp_path):
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    w = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    src = tmp_path / "src.safetensors"
    st_torch.save_file({"w": w}, str(src))
    ft = File.open_safetensors(src, "w")
    out = tmp_path / "out.safetensors"
    sw.save_safetensors(out, {"w": ft.view(ft.tiled().full_tensor())})
    back = st_torch.load_file(str(out))["w"]
    assert back.dtype == torch.bfloat16
    assert torch.equal(back, w)
    with pytest.raises(sw.StrideWeaveNotImplementedError, match="bf16|bfloat16"):
        sw.save_npy(tmp_path / "w.npy", ft.view(ft.tiled().full_tensor()))


def test_save_tiled_streams_dirty_values_without_promotion(tmp_path):
    a = sample((4, 3, 5), np.float32, 6)
    np.save(tmp_path / "a.npy", a)
    ft = File.open_npy(tmp_path / "a.npy")
    # A writable tier: copy the file tensor into a Host carrier.
    host = sw.carriers.Host(a.size, dtype=sw.float32)
    tiled_file = ft.tiled()
    full_file = tiled_file.full_tensor()
    tiled = sw.TiledEvictable(CPU(0), host, ft.grid_shape, ft.tile_shape)
    full = tiled.full_tensor()
    src = full_file.numpy()
    for coord in np.ndindex(*src.shape):
        full[coord] = float(src[coord])
    tiled.evict(tiled.primary_tiles)
    tiled.promote(sw.TileSet([(0, 0, 2)]))
    view = ft.view(full)
    view[2, 1, 3] = 1234.5          # a dirty primary value
    view[0, 2, 4] = -7.25           # a write to a tile in the secondary tier
    expected = a.copy()
    expected[2, 1, 3] = 1234.5
    expected[0, 2, 4] = -7.25
    before = {k: tiled.tile_state((0, 0, k)).location for k in range(4)}
    out = tmp_path / "t.safetensors"
    sw.save_safetensors(out, {"w": view, "logical": tiled})
    after = {k: tiled.tile_state((0, 0, k)).location for k in range(4)}
    assert before == after  # no promotion, no eviction
    assert tiled.tile_state((0, 0, 2)).dirty
    back = safetensors_numpy.load_file(str(out))
    np.testing.assert_array_equal(back["w"], expected)
    np.testing.assert_array_equal(back["logical"], np.transpose(expected, (2, 1, 0)))
    sw.save_npy(tmp_path / "t.npy", view)
    np.testing.assert_array_equal(np.load(tmp_path / "t.npy"), expected)


@pytest.mark.parametrize("np_dtype,sw_dtype", DTYPES, ids=[d[1].name for d in DTYPES])
def test_save_npy_roundtrip(tmp_path, np_dtype, sw_dtype):
    a = sample((2, 7, 3), np_dtype, 7)
    np.save(tmp_path / "a.npy", a)
    ft = File.open_npy(tmp_path / "a.npy")
    sw.save_npy(tmp_path / "b.npy", ft.view(ft.tiled().full_tensor()))
    b = np.load(tmp_path / "b.npy")
    assert b.dtype == a.dtype and b.shape == a.shape
    np.testing.assert_array_equal(b, a)


def test_save_errors(tmp_path):
    t = sw.from_numpy(np.zeros((2, 2), np.float32))
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.save_safetensors(tmp_path / "x.safetensors", [t])
    with pytest.raises(sw.StrideWeaveTypeError):
        sw.save_safetensors(tmp_path / "x.safetensors", {"a": 3})
    with pytest.raises(sw.StrideWeaveValueError, match="__metadata__"):
        sw.save_safetensors(tmp_path / "x.safetensors", {"__metadata__": t})
    with pytest.raises(sw.StrideWeaveValueError):
        sw.save_safetensors(tmp_path / "x.safetensors", {"": t})
    with pytest.raises(sw.StrideWeaveOSError):
        sw.save_safetensors(tmp_path / "missing" / "x.safetensors", {"a": t})
    assert not (tmp_path / "x.safetensors").exists()


# ---- errors -----------------------------------------------------------------

def test_open_errors_name_the_file_and_field(tmp_path):
    a = sample((3, 4), np.float32)
    good = tmp_path / "good.npy"
    np.save(good, a)
    raw = good.read_bytes()

    bad = tmp_path / "magic.npy"
    bad.write_bytes(b"\x93NUMPX" + raw[6:])
    with pytest.raises(sw.DataCorruptError, match="magic.npy.*magic|magic.*magic.npy"):
        File.open_npy(bad)

    short = tmp_path / "short.npy"
    short.write_bytes(raw[:-3])
    with pytest.raises(sw.DataCorruptError, match="short.npy"):
        File.open_npy(short)

    with pytest.raises(sw.StrideWeaveOSError, match="nothere.npy"):
        File.open_npy(tmp_path / "nothere.npy")

    st = tmp_path / "m.safetensors"
    safetensors_numpy.save_file({"w": a}, str(st))
    with pytest.raises(sw.StrideWeaveValueError, match="m.safetensors.*'nope'"):
        File.open_safetensors(st, "nope")
    with pytest.raises(sw.StrideWeaveValueError):
        File.open_safetensors(st, [])
    with pytest.raises(sw.StrideWeaveValueError):
        File.open_safetensors(st, ["w", "w"])
    with pytest.raises(sw.StrideWeaveTypeError):
        File.open_safetensors(st, [1])

    body = st.read_bytes()
    n = struct.unpack("<Q", body[:8])[0]
    header = json.loads(body[8:8 + n])
    header["w"]["dtype"] = "I8"
    text = json.dumps(header).encode()
    i8 = tmp_path / "i8.safetensors"
    i8.write_bytes(struct.pack("<Q", len(text)) + text + body[8 + n:])
    with pytest.raises(sw.StrideWeaveNotImplementedError, match="i8.safetensors.*I8"):
        File.open_safetensors(i8, "w")

    header["w"]["dtype"] = "F32"
    header["w"]["data_offsets"] = [0, 44]
    text = json.dumps(header).encode()
    lie = tmp_path / "lie.safetensors"
    lie.write_bytes(struct.pack("<Q", len(text)) + text + body[8 + n:])
    with pytest.raises(sw.DataCorruptError, match="lie.safetensors.*data_offsets"):
        File.open_safetensors(lie, "w")

    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(struct.pack("<Q", 5) + b"{nope")
    with pytest.raises(sw.DataCorruptError, match="junk.safetensors"):
        File.open_safetensors(junk, "w")
    huge = tmp_path / "huge.safetensors"
    huge.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(sw.DataCorruptError, match="huge.safetensors"):
        File.open_safetensors(huge, "w")


@pytest.mark.parametrize("kind", ["index.json", "npy", "text"])
def test_safetensors_opener_refuses_other_files(tmp_path, kind):
    """A sharded checkpoint's index.json, an .npy or a text file opened as
    safetensors is DataCorruptError saying so and naming the file, not a
    report of the absurd header length its first 8 bytes would give."""
    if kind == "index.json":
        path = tmp_path / "model.safetensors.index.json"
        path.write_text(json.dumps({"metadata": {"total_size": 16},
                                    "weight_map": {"w": "model-00001-of-00001.safetensors"}}))
    elif kind == "npy":
        path = tmp_path / "w.npy"
        np.save(path, np.arange(4, dtype=np.float32))
    else:
        path = tmp_path / "notes.txt"
        path.write_text("weights go here\n")
    for open_it in (lambda: File.open_safetensors(path, "w"), lambda: File.open_safetensors(path, ["w"])):
        with pytest.raises(sw.Error) as caught:
            open_it()
        assert type(caught.value) is sw.DataCorruptError
        assert caught.value.code == sw.ErrorCode.DATA_CORRUPT
        message = str(caught.value)
        assert message.startswith(f"'{path}' is not a safetensors file: "), message
        assert "not a safetensors file" in message
    if kind == "npy":
        assert File.open_npy(path).shape == (4,)  # the file itself is fine


def test_header_parser_hooks_replay_corpus():
    from strideweave import _native as N
    corpus = pathlib.Path(__file__).resolve().parents[1] / "corpus"
    kinds = {"OK": None, "DATA_CORRUPT": sw.DataCorruptError, "UNSUPPORTED": sw.StrideWeaveNotImplementedError}
    seen = 0
    for sub, parse in (("npy", lambda b: N.testing_parse_npy_header(b, 0)),
                       ("safetensors", lambda b: N.testing_parse_safetensors_header(b, 0, None))):
        for f in sorted((corpus / sub).iterdir()):
            expect = kinds[f.name.split(".")[-2]]
            if expect is None:
                parse(f.read_bytes())
            else:
                with pytest.raises(expect):
                    parse(f.read_bytes())
            seen += 1
    assert seen >= 40


def reads_of(rt, te, tile):
    """The file read requests promoting `tile` issues: arming an injected
    read fault at the n-th request fails the promotion for every n up to
    that count (changing nothing) and not after it."""
    N = sw._native
    for n in range(1, 64):
        N.sw_testing_inject_fault(rt._h, N.SW_FAULT_READ, n)
        try:
            te.promote_async(sw.TileSet([tile])).wait()
        except sw.StrideWeaveOSError:
            assert te.tile_state(tile).location == "secondary"
            continue
        finally:
            N.sw_testing_inject_fault(rt._h, N.SW_FAULT_READ, 0)
        te.evict(sw.TileSelection([[c] for c in tile]))
        return n - 1
    raise AssertionError("more than 63 requests")


@pytest.mark.parametrize("direct_io", [False, True])
def test_request_options_split_a_tile_read(tmp_path, direct_io):
    path = tmp_path / "model.safetensors"
    rng = np.random.default_rng(3)
    tensors = {f"e{e}": rng.standard_normal((40, 33)).astype(np.float32) for e in range(3)}  # 5280 bytes each
    safetensors_numpy.save_file(tensors, str(path))
    names = ["e0", "e1", "e2"]
    rt = sw.Runtime()
    try:
        counts, direct = {}, False
        for chunk, in_flight in ((0, 0), (1024, 2), (4096, 1)):
            ft = File.open_safetensors(path, names, direct_io=direct_io, chunk_bytes=chunk,
                                       requests_in_flight=in_flight, runtime=rt)
            te = ft.tiled()
            counts[chunk] = reads_of(rt, te, (0, 0, 1))
            direct = sw._native.testing_file_io_stats(ft.carrier._h)["direct_open"]
            np.testing.assert_array_equal(ft.view(te.full_tensor()).numpy(), np.stack([tensors[n] for n in names]))
            te.release()
        # One request by default (4 MiB); 1024-byte ones split the tile's 5280
        # bytes into six, 4096-byte ones into two. With O_DIRECT (where the
        # file system takes it) a whole request is one or more 4 KiB blocks:
        # 1024 becomes 4096.
        assert counts == ({0: 1, 1024: 2, 4096: 2} if direct else {0: 1, 1024: 6, 4096: 2})
    finally:
        rt.shutdown()


def test_request_options_are_checked(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.arange(12, dtype=np.float32).reshape(3, 4))
    with pytest.raises(sw.StrideWeaveValueError, match="chunk_bytes must be >= 0"):
        File.open_npy(path, chunk_bytes=-1)
    with pytest.raises(sw.StrideWeaveValueError, match="requests_in_flight must be at most 4294967295"):
        File.open_raw(path, (4, 3), offset=128, requests_in_flight=2**32)
    with pytest.raises(sw.StrideWeaveTypeError, match="requests_in_flight"):
        File.open_safetensors(path, "x", requests_in_flight=1.5)
    with pytest.raises(sw.StrideWeaveTypeError, match="chunk_bytes"):
        File(16, chunk_bytes="1 MiB")
    with pytest.raises(sw.StrideWeaveValueError, match="chunk_bytes"):
        File.open(path, 0, 4, chunk_bytes=-4096)
    # Accepted: a scratch file and a window written and read in 4-byte requests.
    f = File(8, chunk_bytes=4, requests_in_flight=3)
    te = sw.TiledEvictable(CPU(0), f, (4,), (2,))
    te.update_async(te.full_tensor(), sw.tensor(np.arange(8, dtype=np.float32)), sw.TileSelection([[0, 1, 2, 3]])).wait()
    te.evict(sw.TileSelection([[0, 1, 2, 3]]))
    np.testing.assert_array_equal(te.full_tensor().numpy(), np.arange(8, dtype=np.float32))
    te.release()
    g = File.open(path, 128, 12, chunk_bytes=8, requests_in_flight=1)
    assert g.size() == 12
