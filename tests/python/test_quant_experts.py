"""The expert ops on block-quantized experts: a GGUF file's stacked expert
tensors (written by gguf-py, llama.cpp's own package) as TiledEvictables,
expert_matmul and expert_ffn computed on their blocks, against the f32
products of gguf-py's dequantized weights within the bound that quantizing
the activations to 8-bit blocks of 32 gives (docs/quantization.md), on every
kernel set this CPU has (STRIDEWEAVE_QGEMM_ISA picks one per process)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import strideweave as sw
from strideweave.carriers import File

gguf = pytest.importorskip("gguf", reason="gguf-py (pip install gguf) writes the test files and dequantizes")
Q = gguf.GGMLQuantizationType

FORMATS = ["Q8_0", "Q4_0", "MXFP4", "Q4_K", "Q6_K"]
GROUP = {"Q4_K": 256, "Q6_K": 256}  # X's block for these weights; 32 otherwise


def quantized(name, w, rng):
    """gguf-py's blocks for the rows of w (..., K): its quantizer where it has
    one, else random blocks with moderate f16 scales."""
    qtype = getattr(Q, name)
    block, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    if name not in ("Q4_K", "Q6_K"):
        return gguf.quants.quantize(w.astype(np.float32), qtype)
    q = rng.integers(0, 256, w.shape[:-1] + (w.shape[-1] // block * nbytes,), dtype=np.uint8)
    blocks = q.reshape(-1, nbytes)
    for o in ([0, 2] if name == "Q4_K" else [nbytes - 2]):
        blocks[:, o:o + 2] = np.frombuffer(rng.uniform(-0.05, 0.05, len(blocks)).astype(np.float16).tobytes(),
                                          np.uint8).reshape(-1, 2)
    return q


def write(path, tensors):
    w = gguf.GGUFWriter(str(path), "llama")
    for name, (q, qtype) in tensors.items():
        w.add_tensor(name, q, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def bound(x, w, group=32):
    """The documented bound of (x @ w.T) against its exact value: x (T, K)
    quantized in blocks of `group` values (32; 256 for the K-quants; scale
    amax / 127, error <= scale / 2 per value), plus f32 rounding of the sums."""
    T, K = x.shape
    d = np.abs(x.reshape(T, K // group, group)).max(-1) / 127.0  # (T, K/group)
    aw = np.abs(w.astype(np.float64)).reshape(w.shape[0], K // group, group).sum(-1)  # (N, K/group)
    rounding = 1e-5 * (np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64)).T) + 1e-30
    return (d / 2) @ aw.T + rounding


def expert_layer(tmp_path, name, E, N, K, seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((E, N, K)).astype(np.float32) * 0.1
    q = quantized(name, w, rng)
    path = tmp_path / f"{name}.gguf"
    write(path, {"blk.0.ffn_down_exps.weight": (q, getattr(Q, name))})
    ft = File.open_gguf(path, "blk.0.ffn_down_exps.weight", direct_io=True)
    return ft, gguf.quants.dequantize(q, getattr(Q, name)).astype(np.float64)


@pytest.mark.parametrize("name", FORMATS)
def test_expert_matmul_within_the_activation_rounding_bound(tmp_path, name):
    E, N, K, T = 5, 37, 512, 6
    ft, wd = expert_layer(tmp_path, name, E, N, K, seed=3)
    tiled = ft.tiled()
    full = tiled.full_tensor()
    rng = np.random.default_rng(4)
    x = rng.standard_normal((T, K)).astype(np.float32)
    ids = np.array([[0, 3], [3, 4], [1, 0], [4, 4], [2, 1], [0, 4]], dtype=np.int64)
    gates = rng.uniform(size=ids.shape).astype(np.float32)
    y = tiled.expert_matmul(full, sw.tensor(x), sw.tensor(ids)).wait()
    assert y.dtype is sw.float32 and y.shape == (T, 2, N)
    got = y.numpy()
    for t in range(T):
        for j in range(2):
            e = ids[t, j]
            want = wd[e] @ x[t].astype(np.float64)
            err = np.abs(got[t, j] - want)
            assert np.all(err <= bound(x[t:t + 1], wd[e], GROUP.get(name, 32))[0]), (name, t, j, err.max())
    # Gated, into bf16: the gated f32 sum rounded once.
    g = tiled.expert_matmul(full, sw.tensor(x), sw.tensor(ids), sw.tensor(gates), out_dtype=sw.float32).wait().numpy()
    gb = tiled.expert_matmul(full, sw.tensor(x), sw.tensor(ids), sw.tensor(gates), out_dtype=sw.bfloat16).wait()
    assert gb.dtype is sw.bfloat16
    assert np.array_equal(gb.astype(sw.float32).numpy(), sw.tensor(g).astype(sw.bfloat16).astype(sw.float32).numpy())
    want = np.einsum("tj,tjn->tn", gates.astype(np.float64), got.astype(np.float64))
    assert np.allclose(g, want, rtol=1e-5, atol=1e-6)


def test_a_quantized_product_is_exact_when_x_is_on_its_grid(tmp_path):
    """x of small integers (each block's scale then maps them exactly) times
    Q8_0 codes: every product is an exact integer sum in f32."""
    E, N, K = 2, 9, 256
    rng = np.random.default_rng(5)
    codes = rng.integers(-127, 128, (E, N, K)).astype(np.int8)
    q = np.zeros((E, N, K // 32, 34), dtype=np.uint8)
    q[..., :2] = np.frombuffer(np.float16(1.0).tobytes(), np.uint8)  # d = 1
    q[..., 2:] = codes.reshape(E, N, K // 32, 32).view(np.uint8)
    path = tmp_path / "exact.gguf"
    write(path, {"e": (q.reshape(E, N, -1), Q.Q8_0)})
    tiled = File.open_gguf(path, "e").tiled()
    x = np.zeros((1, K), dtype=np.float32)
    x[0, ::32] = 127.0  # every block's largest value: scale 1
    x[0, 1::32] = -5.0
    y = tiled.expert_matmul(tiled.full_tensor(), sw.tensor(x), sw.tensor(np.array([[1]]))).wait().numpy()
    want = codes[1].astype(np.int64) @ x[0].astype(np.int64)
    assert np.array_equal(y[0, 0], want.astype(np.float32))


@pytest.mark.parametrize("name", ["Q8_0", "Q4_K"])
def test_expert_ffn_on_quantized_experts_matches_the_dequantized_layer(tmp_path, name):
    E, H, F, T, k = 4, 256, 512, 3, 2
    rng = np.random.default_rng(8)
    qtype = getattr(Q, name)
    ws = {}
    for part, shape in (("gate", (E, F, H)), ("up", (E, F, H)), ("down", (E, H, F))):
        ws[part] = quantized(name, rng.standard_normal(shape).astype(np.float32) * 0.1, rng)
    path = tmp_path / "ffn.gguf"
    write(path, {f"blk.0.ffn_{p}_exps.weight": (q, qtype) for p, q in ws.items()})
    tiles = {p: File.open_gguf(path, f"blk.0.ffn_{p}_exps.weight").tiled() for p in ws}
    x = rng.standard_normal((T, H)).astype(np.float32)
    ids = np.array([[0, 2], [2, 3], [1, 1]], dtype=np.int64)
    gates = rng.uniform(size=ids.shape).astype(np.float32)
    out = sw.expert_ffn(sw.tensor(x), sw.tensor(ids), tiles["gate"].full_tensor(), tiles["up"].full_tensor(),
                        tiles["down"].full_tensor(), sw.tensor(gates)).wait()
    assert out.dtype is sw.float32 and out.shape == (T, H)
    deq = {p: gguf.quants.dequantize(q, qtype).astype(np.float64) for p, q in ws.items()}
    want = np.zeros((T, H))
    for t in range(T):
        for j in range(k):
            e = ids[t, j]
            a, b = deq["gate"][e] @ x[t], deq["up"][e] @ x[t]
            h = a / (1 + np.exp(-a)) * b
            want[t] += gates[t, j] * (deq["down"][e] @ h)
    # Two products' activation rounding: a relative bound of a few 8-bit steps.
    scale = np.abs(want).max()
    assert np.abs(out.numpy() - want).max() <= 0.03 * scale


def test_quantized_experts_refuse_gradients_and_bad_dtypes(tmp_path):
    ft, _ = expert_layer(tmp_path, "Q8_0", 2, 4, 64, seed=9)
    tiled = ft.tiled()
    full = tiled.full_tensor()
    ids = sw.tensor(np.array([[0]]))
    x = sw.tensor(np.ones((1, 64), np.float32))
    x.requires_grad_(True)
    with pytest.raises(sw.StrideWeaveNotImplementedError, match="gradients through q8_0 experts"):
        tiled.expert_matmul(full, x, ids)
    assert tiled.tile_state((0, 0, 0)).location == "secondary"  # nothing read
    with pytest.raises(sw.StrideWeaveTypeError, match="x must be a float tensor"):
        tiled.expert_matmul(full, sw.tensor(np.ones((1, 64), np.int32)), ids)
    with pytest.raises(sw.StrideWeaveTypeError, match="f32, bf16 or f16, not f64"):
        tiled.expert_matmul(full, sw.tensor(np.ones((1, 64), np.float32)), ids, out_dtype=sw.float64)
    # bf16 x is widened: the same values as its f32 widening.
    xb = sw.tensor(np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 64)).astype(sw.bfloat16)
    a = tiled.expert_matmul(full, xb, ids).wait().numpy()
    b = tiled.expert_matmul(full, xb.astype(sw.float32), ids).wait().numpy()
    assert np.array_equal(a, b)


SCRIPT = r"""
import sys, numpy as np, strideweave as sw
from strideweave.carriers import File
tiled = File.open_gguf(sys.argv[1], "blk.0.ffn_down_exps.weight").tiled()
x = np.load(sys.argv[2])
ids = np.arange(x.shape[0] * 2, dtype=np.int64).reshape(-1, 2) % tiled.full_tensor().shape[2]
np.save(sys.argv[3], tiled.expert_matmul(tiled.full_tensor(), sw.tensor(x), sw.tensor(ids)).wait().numpy())
"""


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@pytest.mark.parametrize("name", ["Q4_K", "Q6_K", "Q4_0", "Q8_0", "MXFP4"])
def test_every_kernel_set_of_this_cpu_gives_values_within_the_bound(tmp_path, name):
    """Each kernel set (AVX-512 VNNI, AVX2, plain C++) in a process of its
    own, capped by STRIDEWEAVE_QGEMM_ISA, within the bound; the plain C++
    set sums in another order than the SIMD ones, so where the CPU has AVX2
    the two give different bits (the cap took effect). The blocks of 32 run
    25 to a row: six groups of four for the 512-bit steps, one block left."""
    E, N, T = 4, 21, 3
    K = 768 if name in GROUP else 800
    ft, wd = expert_layer(tmp_path, name, E, N, K, seed=12)
    x = np.random.default_rng(13).standard_normal((T, K)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    ids = np.arange(T * 2).reshape(-1, 2) % E
    results = {}
    for isa in ["avx512-vnni", "avx2", "portable"]:
        out = tmp_path / f"{isa}.npy"
        r = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / f"{name}.gguf"), str(tmp_path / "x.npy"),
                            str(out)], env=dict(os.environ, STRIDEWEAVE_QGEMM_ISA=isa, PYTHONPATH=os.pathsep.join(sys.path)), capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, (isa, r.stderr[-3000:])
        got = np.load(out)
        for t in range(T):
            for j in range(2):
                e = ids[t, j]
                err = np.abs(got[t, j] - wd[e] @ x[t].astype(np.float64))
                assert np.all(err <= bound(x[t:t + 1], wd[e], GROUP.get(name, 32))[0]), (isa, t, j)
        results[isa] = got
    flags = cpu_flags()
    if {"avx2", "fma", "f16c"} <= flags:
        assert not np.array_equal(results["avx2"], results["portable"])
    if {"avx512vnni", "avx512vl", "avx512bw"} <= flags:
        if name in GROUP:  # the K-quants: the same integer sums, in the same order
            assert np.array_equal(results["avx512-vnni"], results["avx2"])
        else:  # four blocks per 512-bit step: the f32 sums in another order
            assert not np.array_equal(results["avx512-vnni"], results["avx2"])
