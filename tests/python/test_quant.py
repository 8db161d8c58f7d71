"""Block-quantized dtypes against llama.cpp's own Python package, gguf-py:
dequantization equals gguf.quants.dequantize bit for bit on every format
(Q4_K and Q6_K on blocks of random bytes), quantization of Q8_0, Q4_0 and
MXFP4 equals gguf.quants.quantize byte for byte. The layouts: gguf-py's
arrays are row-major with ggml's ne[0] last; a StrideWeave tensor's first
mode is ne[0], so t.numpy() of a quantized tensor is the transpose of
gguf-py's byte array."""
import zlib

import numpy as np
import pytest

import strideweave as sw

gguf = pytest.importorskip("gguf", reason="the gguf package (llama.cpp's gguf-py) is not installed; "
                                          "tools/install_deps.sh installs it")
from gguf import GGMLQuantizationType as Q  # noqa: E402

FORMATS = [("q8_0", Q.Q8_0), ("q4_0", Q.Q4_0), ("q4_k", Q.Q4_K), ("q6_k", Q.Q6_K), ("mxfp4", Q.MXFP4)]
QUANTIZERS = [("q8_0", Q.Q8_0), ("q4_0", Q.Q4_0), ("mxfp4", Q.MXFP4)]
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
    with pytest.raises(NotImplementedError, match="q4_k"):
        sw.tensor(x.T, runtime=runtime).astype("q4_k")
    with pytest.raises(ValueError, match="whole"):
        sw.from_blocks(np.zeros((33, 1), dtype=np.uint8), "q8_0", runtime=runtime)
