"""Block-quantized dtypes against llama.cpp's own Python package, gguf-py:
dequantization equals gguf.quants.dequantize bit for bit on every format
(Q4_K and Q6_K on blocks of random bytes), quantization of Q8_0, Q4_0 and
MXFP4 equals gguf.quants.quantize byte for byte. gguf-py has no Q4_K or Q6_K
quantizer: those equal ggml's own (ggml_quantize_chunk of the libggml that
llama-cpp-python bundles, or of STRIDEWEAVE_TEST_LIBGGML) byte for byte when
one is there,
and are checked against their defining properties always (every value at
the nearest point of its sub-block's stored grid, the bound that gives,
exact grids kept exactly, hand-computed blocks in tests/c/test_quant.c).
They are not idempotent: like ggml's, quantizing the values of their own
blocks may choose other grids. The layouts: gguf-py's arrays are row-major with
ggml's ne[0] last; a StrideWeave tensor's first mode is ne[0], so t.numpy()
of a quantized tensor is the transpose of gguf-py's byte array."""
import ctypes
import os
import pathlib
import zlib

import numpy as np
import pytest

import strideweave as sw

gguf = pytest.importorskip("gguf", reason="the gguf package (llama.cpp's gguf-py) is not installed; "
                                          "tools/install_deps.sh installs it")
from gguf import GGMLQuantizationType as Q  # noqa: E402

FORMATS = [("q8_0", Q.Q8_0), ("q4_0", Q.Q4_0), ("q4_k", Q.Q4_K), ("q6_k", Q.Q6_K), ("mxfp4", Q.MXFP4)]
QUANTIZERS = [("q8_0", Q.Q8_0), ("q4_0", Q.Q4_0), ("mxfp4", Q.MXFP4)]  # gguf-py quantizes these
K_QUANTS = [("q4_k", Q.Q4_K), ("q6_k", Q.Q6_K)]
# Byte offsets of each format's f16 fields (d, dmin), kept finite in random blocks.
HALF_FIELDS = {"q8_0": [0], "q4_0": [0], "q4_k": [0, 2], "q6_k": [208], "mxfp4": []}


def random_blocks(name, rows, blocks_per_row, seed):
    """gguf-py's row-major byte array of random blocks with finite f16 scales."""
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[dict(FORMATS)[name]]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(rows, blocks_per_row, block_bytes), dtype=np.uint8)
    for at in HALF_FIELDS[name]:
        halves = rng.standard_normal((rows, blocks_per_row)).astype(np.float16)
        raw[:, :, at:at + 2] = halves.view(np.uint8).reshape(rows, blocks_per_row, 2)
    return raw.reshape(rows, blocks_per_row * block_bytes)


def test_dtype_facts():
    for name, qtype in FORMATS:
        d = getattr(sw, name)
        assert d.name == name
        assert (d.block_elements, d.block_bytes) == gguf.GGML_QUANT_SIZES[qtype]
        assert d.is_quantized and not d.is_floating
    assert not sw.float32.is_quantized


@pytest.mark.parametrize("name,qtype", FORMATS)
def test_dequantize_equals_gguf(name, qtype, runtime):
    raw = random_blocks(name, rows=5, blocks_per_row=3, seed=zlib.crc32(name.encode()))
    t = sw.from_blocks(raw.T, name, runtime=runtime)
    block_elems, _ = gguf.GGML_QUANT_SIZES[qtype]
    assert t.dtype is getattr(sw, name)
    assert t.shape == (3 * block_elems, 5)
    assert np.array_equal(t.numpy(), raw.T)
    with np.errstate(over="ignore"):  # random MXFP4 exponents reach infinity
        want = gguf.quants.dequantize(raw, qtype)  # (rows, elements), f32
        got = t.astype("float32").numpy()
        assert got.dtype == np.float32
        assert np.array_equal(got.T.view(np.uint32), want.view(np.uint32))
        # f16 results are the f32 values rounded once.
        half = t.astype(sw.float16).numpy()
        assert np.array_equal(half.T.view(np.uint16), want.astype(np.float16).view(np.uint16))


@pytest.mark.parametrize("name,qtype", QUANTIZERS)
def test_quantize_equals_gguf(name, qtype, runtime):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((6, 256)) * rng.uniform(0.01, 100, size=(6, 1))).astype(np.float32)
    x[0, :32] = 0.0  # an all-zero block
    x[1, 32:64] = np.float32(-3.0)  # a constant block
    want = gguf.quants.quantize(x, qtype)
    t = sw.tensor(x.T, dtype=name, runtime=runtime)
    assert t.dtype is getattr(sw, name)
    assert np.array_equal(t.numpy().T, want)
    # From bf16: the bf16 values widened exactly, then quantized.
    xb = sw.tensor(x.T, runtime=runtime).astype(sw.bfloat16)
    widened = xb.astype(sw.float32).numpy().T
    assert np.array_equal(xb.astype(name).numpy().T, gguf.quants.quantize(widened, qtype))


def test_conversions_and_refusals(runtime):
    x = np.linspace(-4, 4, 256 * 2, dtype=np.float32).reshape(2, 256)
    q = sw.tensor(x.T, dtype="q8_0", runtime=runtime)
    assert q.to(sw.q4_0).dtype is sw.q4_0
    assert np.array_equal(q.astype(sw.q4_0).astype(sw.float32).numpy(),
                          sw.tensor(q.astype(sw.float32).numpy(), dtype="q4_0").astype(sw.float32).numpy())
    with pytest.raises(TypeError, match="q8_0"):
        q + q
    with pytest.raises(ValueError, match="splits a block"):
        q[:16]
    assert np.array_equal(q[32:64, 1].numpy(), q.numpy()[34:68, 1])
    # Every quantized dtype has a quantizer: q8_0 -> q4_k goes through f32.
    k = q.astype("q4_k")
    assert k.dtype is sw.q4_k and k.shape == (256, 2)
    assert np.array_equal(k.numpy(), sw.tensor(q.astype(sw.float32).numpy(), dtype="q4_k").numpy())
    with pytest.raises(ValueError, match="whole"):
        sw.from_blocks(np.zeros((33, 1), dtype=np.uint8), "q8_0", runtime=runtime)


# ---- Q4_K and Q6_K quantizers ---------------------------------------------------------------------

def k_quant_rows(seed, elements):
    """Rows of f32 values (gguf-py's layout: row-major, blocks along the last
    axis) that reach every branch of the k-quant quantizers: Gaussian rows
    of several magnitudes, an all-zero block, one huge outlier, a
    negative-only row, a positive-only row (its minimum above 0), a
    constant row, values below 1e-15, all-zero sub-blocks inside a block."""
    rng = np.random.default_rng(seed)
    rows = []
    for magnitude in (1e-3, 1.0, 250.0):
        rows.append(rng.standard_normal(elements) * magnitude)
    special = rng.standard_normal(elements)
    special[:256] = 0.0                                      # an all-zero block
    rows.append(special)
    outlier = rng.standard_normal(elements)
    outlier[rng.integers(0, elements)] = 3e4                 # one huge outlier
    rows.append(outlier)
    rows.append(-np.abs(rng.standard_normal(elements)) * 7)  # negative only
    rows.append(rng.uniform(0.5, 2.0, elements))             # positive only, min above 0
    rows.append(np.full(elements, -1.25))                    # constant
    rows.append(rng.standard_normal(elements) * 1e-17)       # below 1e-15 throughout
    mixed = rng.standard_normal(elements) * 1e-17
    mixed[16:48] = rng.standard_normal(32)                   # tiny and ordinary sub-blocks in a block
    rows.append(mixed)
    holes = rng.standard_normal(elements)
    holes[32:64] = 0.0                                       # all-zero sub-blocks
    holes[128:144] = 0.0
    rows.append(holes)
    return np.stack(rows).astype(np.float32)


def quantize_sw(x, name, runtime):
    """StrideWeave's blocks of the rows of `x`, in gguf-py's layout."""
    return sw.tensor(x.T, dtype=name, runtime=runtime).numpy().T


@pytest.fixture(scope="module")
def ggml():
    """ggml_quantize_chunk of the libggml (libggml-base) named by
    STRIDEWEAVE_TEST_LIBGGML, from any llama.cpp build, else of the one
    tools/bench/build_ggml.sh leaves in ~/.cache/strideweave (the test
    command builds it), else of the libggml llama-cpp-python bundles: ggml's
    reference Q4_K and Q6_K quantizers (no importance matrix)."""
    named = os.environ.get("STRIDEWEAVE_TEST_LIBGGML")
    cached = sorted(pathlib.Path.home().glob(".cache/strideweave/ggml-*/lib/libggml-base.so"))
    if named:
        candidates = [pathlib.Path(named)]
    elif cached:
        candidates = cached
    else:
        llama_cpp = pytest.importorskip(
            "llama_cpp", reason="no libggml-base: STRIDEWEAVE_TEST_LIBGGML is not set, tools/bench/build_ggml.sh "
                                "--base-only has not built one, and llama-cpp-python is not installed; ggml holds "
                                "the reference Q4_K and Q6_K quantizers that the byte-for-byte comparison needs "
                                "(gguf-py has none)")
        candidates = sorted(pathlib.Path(llama_cpp.__file__).parent.rglob("libggml*.so*"))
    for path in candidates:
        lib = ctypes.CDLL(str(path))
        if not hasattr(lib, "ggml_quantize_chunk"):
            continue
        lib.ggml_quantize_init.argtypes = [ctypes.c_int]
        lib.ggml_quantize_init.restype = None
        lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                            ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
        lib.ggml_quantize_chunk.restype = ctypes.c_size_t
        return lib
    pytest.skip(f"no ggml_quantize_chunk in {', '.join(map(str, candidates)) or 'llama-cpp-python'}")


def quantize_ggml(lib, x, qtype):
    x = np.ascontiguousarray(x, dtype=np.float32)
    rows, n = x.shape
    elements, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    out = np.zeros((rows, n // elements * nbytes), dtype=np.uint8)
    lib.ggml_quantize_init(int(qtype))
    assert lib.ggml_quantize_chunk(int(qtype), x.ctypes.data, out.ctypes.data, 0, rows, n, None) == out.size
    return out


@pytest.mark.parametrize("seed,elements", [(0, 256), (1, 512), (2, 768), (3, 1024)])
@pytest.mark.parametrize("name,qtype", K_QUANTS)
def test_k_quantize_equals_ggml(name, qtype, seed, elements, ggml, runtime):
    x = k_quant_rows(seed, elements)
    got = quantize_sw(x, name, runtime)
    want = quantize_ggml(ggml, x, qtype)
    assert got.shape == want.shape
    mismatched = sorted({(r, c // gguf.GGML_QUANT_SIZES[qtype][1]) for r, c in zip(*np.nonzero(got != want))})
    assert not mismatched, f"(row, block) pairs that differ: {mismatched[:10]}"
    # From bf16: the bf16 values widened exactly, then quantized.
    xb = sw.tensor(x.T, runtime=runtime).astype(sw.bfloat16)
    widened = xb.astype(sw.float32).numpy().T
    assert np.array_equal(xb.astype(name).numpy().T, quantize_ggml(ggml, widened, qtype))


def k_quant_grids(name, blocks):
    """Per element of each block (rows of gguf-py's byte array): the step D
    and offset M of its sub-block's stored grid {D * q - M}, and the q range."""
    rows, nbytes = blocks.shape
    b = blocks.reshape(rows, -1, {"q4_k": 144, "q6_k": 210}[name])
    if name == "q4_k":
        d = b[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
        dmin = b[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
        s = b[..., 4:16].astype(np.int32)
        sc = np.concatenate([s[..., 0:4] & 63, (s[..., 8:12] & 0x0f) | ((s[..., 0:4] >> 6) << 4)], axis=-1)
        mn = np.concatenate([s[..., 4:8] & 63, (s[..., 8:12] >> 4) | ((s[..., 4:8] >> 6) << 4)], axis=-1)
        step = d[..., None] * sc.astype(np.float32)
        offset = dmin[..., None] * mn.astype(np.float32)
        return np.repeat(step, 32, axis=-1).reshape(rows, -1), np.repeat(offset, 32, axis=-1).reshape(rows, -1), 0, 15
    d = b[..., 208:210].copy().view(np.float16)[..., 0].astype(np.float32)
    step = d[..., None] * b[..., 192:208].view(np.int8).astype(np.float32)
    return np.repeat(step, 16, axis=-1).reshape(rows, -1), np.zeros((rows, nbytes // 210 * 256), np.float32), -32, 31


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name,qtype", K_QUANTS)
def test_k_quantize_rounds_to_the_nearest_grid_point(name, qtype, seed, runtime):
    """Each value dequantizes to the point of its sub-block's stored grid
    nearest to it: with step D (Q4_K: d * sc, Q6_K: d * scale) and offset M
    (Q4_K: dmin * m, Q6_K: 0), the grid is {D * q - M} for q in [0, 15]
    (Q4_K) or [-32, 31] (Q6_K), so a value inside the grid's span is within
    D / 2 of its dequantized value, and one beyond it dequantizes to the
    grid's end. (A sub-block whose stored step is 0 dequantizes to -M.)"""
    x = k_quant_rows(seed, 512)
    blocks = quantize_sw(x, name, runtime)
    y = gguf.quants.dequantize(blocks, qtype)
    assert np.array_equal(sw.from_blocks(blocks.T, name, runtime=runtime).astype(sw.float32).numpy().T, y)
    D, M, lo, hi = k_quant_grids(name, blocks)
    live = D != 0
    assert np.all(y[~live] == -M[~live])
    x64, y64, D64, M64 = (a.astype(np.float64) for a in (x, y, D, M))
    grid = D64[..., None] * np.arange(lo, hi + 1, dtype=np.float64) - M64[..., None]
    nearest = np.abs(grid - x64[..., None]).min(axis=-1)
    # f32 rounding of (x + M) / D and of D * q - M: a few ulps of the operands.
    ulps = 4 * np.finfo(np.float32).eps * (np.abs(x64) + np.abs(M64) + max(abs(lo), hi) * np.abs(D64))
    err = np.abs(y64 - x64)
    assert np.all((err <= nearest + ulps)[live])
    ratio = (x64 + M64) / np.where(live, D64, 1)  # the unclamped level
    inside = live & (ratio >= lo) & (ratio <= hi)
    assert np.all((err <= np.abs(D64) / 2 + ulps)[inside])
    # Beyond the span, the grid's end.
    ends = np.where(ratio < lo, D64 * lo - M64, D64 * hi - M64)
    assert np.all((np.abs(y64 - ends) <= ulps)[live & ~inside])


def exact_grid_rows(seed, rows):
    """Blocks whose sub-blocks lie exactly on grids the k-quant search finds
    and the stored scales reproduce: per block, levels L and sub-block
    scales 2^-s. Q4_K: L in 0..15 with a 0 and a 15 in each 32-element
    sub-block, x = 2^-s * L (s = 0..7). Q6_K: L in -31..31 after a first
    element of -32 in each 16-element sub-block, x = 2^-(s % 8) * L."""
    rng = np.random.default_rng(seed)
    q4 = rng.integers(0, 16, (rows, 8, 32))
    q4[:, :, 0], q4[:, :, 1] = 0, 15
    x4 = (q4 * np.exp2(-np.arange(8.0))[None, :, None]).reshape(rows, 256).astype(np.float32)
    q6 = rng.integers(-31, 32, (rows, 16, 16))
    q6[:, :, 0] = -32
    x6 = (q6 * np.exp2(-(np.arange(16.0) % 8))[None, :, None]).reshape(rows, 256).astype(np.float32)
    return q4, x4, q6, x6


def test_k_quantize_keeps_exact_grids(runtime):
    """Q4_K: each sub-block's fit is exact (scale 2^-s, min 0); the scales
    round to sc = 63, 32, 16, 8, 4, 2, 1, 0 against d = f16(1/63), every
    value requantizes to its level, and sub-block 7 (sc = 0) keeps the
    fit's levels: the nibbles are L. Q6_K: the fit is exact, the scales
    round to -128 >> s against d = -1/128, so the values dequantize exactly
    back (and the nibbles are L + 32)."""
    q4, x4, q6, x6 = exact_grid_rows(17, 6)
    b4 = quantize_sw(x4, "q4_k", runtime).reshape(6, 144)
    assert np.all(b4[:, 0:2].copy().view(np.uint16) == 0x2410) and np.all(b4[:, 2:4] == 0)
    assert np.all(b4[:, 4:16] == np.array([63, 32, 16, 8, 0, 0, 0, 0, 4, 2, 1, 0], np.uint8))
    nib = b4[:, 16:].reshape(6, 4, 32)
    levels = np.stack([nib & 0x0f, nib >> 4], axis=2).reshape(6, 8, 32)
    assert np.array_equal(levels, q4)
    b6 = quantize_sw(x6, "q6_k", runtime).reshape(6, 210)
    assert np.all(b6[:, 208:210].copy().view(np.uint16) == 0xa000)
    assert np.all(b6[:, 192:208].view(np.int8) == np.array([-(128 >> (s % 8)) for s in range(16)], np.int8))
    assert gguf.quants.dequantize(b6, Q.Q6_K).tobytes() == x6.tobytes()


@pytest.mark.parametrize("name,qtype", K_QUANTS)
def test_k_quantize_bf16_f16_and_layouts(name, qtype, runtime):
    """bf16 and f16 inputs quantize as their f32 values; a permuted f32 source
    quantizes its first-mode runs; the quantizer sees each block alone."""
    x = k_quant_rows(7, 512)
    want = quantize_sw(x, name, runtime)
    xb = sw.tensor(x.T, runtime=runtime).astype(sw.bfloat16)
    assert np.array_equal(xb.astype(name).numpy().T, quantize_sw(xb.astype(sw.float32).numpy().T, name, runtime))
    xh = sw.tensor(x.T.astype(np.float16), runtime=runtime)
    assert np.array_equal(xh.astype(name).numpy().T, quantize_sw(x.astype(np.float16).astype(np.float32), name,
                                                                 runtime))
    permuted = sw.tensor(np.ascontiguousarray(x), runtime=runtime).permute(1, 0)
    assert np.array_equal(permuted.astype(name).numpy().T, want)
    one_by_one = np.concatenate([quantize_sw(x[:, 256 * i:256 * (i + 1)], name, runtime) for i in range(2)], axis=1)
    assert np.array_equal(one_by_one, want)
