"""What a type checker sees of strideweave's public surface: checked by mypy
(tools/typecheck/run_mypy.sh), never run. Each assert_type is a promise of
the stubs beside the package (bindings/python/strideweave/*.pyi)."""
import asyncio
from asyncio import CancelledError
from typing import Any, Literal

import numpy as np
from typing_extensions import assert_type

import strideweave as sw
from strideweave import *  # noqa: F401,F403 - what a star import binds
from strideweave.carriers import CPU, File, Host, TiledEvictable, Zstd
from strideweave.interop import to_tinygrad


def star_import_keeps_asyncio_cancelled_error() -> None:
    # The star import above comes after asyncio's CancelledError: strideweave's
    # __all__ leaves its own out, so the name is still asyncio's.
    assert_type(CancelledError, type[asyncio.CancelledError])
    assert_type(sw.CancelledError, type[sw.StrideWeaveCancelledError])
    assert_type(StrideWeaveCancelledError, type[sw.StrideWeaveCancelledError])  # noqa: F405


def context_managers(path: str) -> None:
    with sw.Runtime(compute_threads=2) as rt:
        assert_type(rt, sw.Runtime)
        with CPU(4, dtype=sw.float32, runtime=rt) as c:
            assert_type(c, CPU)
        with Zstd(4, level=3, runtime=rt) as z:
            assert_type(z, Zstd)
        with TiledEvictable(CPU(0, runtime=rt), Host(8, runtime=rt), (2,), (4,)) as te:
            assert_type(te, TiledEvictable)
        with File.open(path, 0, 4, runtime=rt) as f:
            assert_type(f, File)
        with sw.no_grad():
            pass


def tensors(a: np.ndarray[Any, Any]) -> None:
    t = sw.from_numpy(a)
    assert_type(t, sw.Tensor)
    assert_type(t + 1, sw.Tensor)
    assert_type(2.0 * t, sw.Tensor)
    assert_type(t @ a, sw.Tensor)
    assert_type(t == 0, sw.Tensor)
    assert_type(t[0, :], sw.Tensor)
    assert_type(t[...], sw.Tensor)
    assert_type(t.shape, tuple[int, ...])
    assert_type(t.size(), tuple[int, ...])
    assert_type(t.size(0), int)
    assert_type(t.max(), sw.Tensor)
    values, indices = t.max(dim=1)
    assert_type(values, sw.Tensor)
    assert_type(sw.topk(t, 2).indices, sw.Tensor)
    assert_type(sw.max(t, axis=(0, 1), keepdims=True), sw.Tensor)
    assert_type(t.grad, sw.Tensor | None)
    assert_type(t.requires_grad_(), sw.Tensor)
    assert_type(t.add_(1), sw.Tensor)
    assert_type(t.numpy(), np.ndarray[Any, np.dtype[Any]])
    assert_type(sw.zeros(2, 3, dtype="bfloat16"), sw.Tensor)
    assert_type(sw.zeros((2, 3)), sw.Tensor)
    assert_type(sw.matmul(t, t, out_dtype=sw.float32), sw.Tensor)
    assert_type(sw.as_dtype(np.float32), sw.DType)
    assert_type(t.reshape(6), sw.Tensor)
    assert_type(t.permute(1, 0), sw.Tensor)
    assert_type(t.permute((1, 0)), sw.Tensor)
    assert_type(to_tinygrad(t), Any)


async def handles(te: TiledEvictable, t: sw.Tensor) -> None:
    sel = sw.TileSelection([[0, 1]])
    assert_type(te.project(te.full_tensor(), sel).wait(), sw.Tensor)
    assert_type(await te.project(te.full_tensor(), sel), sw.Tensor)
    assert_type(te.promote_async(sel).wait(), None)
    assert_type(te.scatter(t, te.full_tensor(), sel, "add").wait(timeout=1.5), sw.Tensor)
    assert_type(te.update_async(te.full_tensor(), t, sel).wait(), None)
    assert_type(sw.move_async(t, Host(4)).wait(), sw.Tensor)
    assert_type(sw.expert_ffn(t, t, t, None, t, activation="gelu").wait(), sw.Tensor)
    assert_type(te.tile_state(0).location, Literal["primary", "secondary", "implicit", "invalid"])
    ft = File.open_safetensors("m.safetensors", ["a", "b"])
    assert_type(ft.tiled(residency_policy=sw.LRUPolicy(2)), TiledEvictable)
    assert_type(te.require_facet(sw.TiledResidencyFacet), sw.TiledResidencyFacet)


class MyPolicy:
    def plan(self, required: sw.TileSet, purpose: str) -> sw.ResidencyPlan:
        return sw.ResidencyPlan(promote=required)


def policies() -> None:
    policy: sw.ResidencyPolicy = MyPolicy()
    TiledEvictable(CPU(0), Host(8), (2,), (4,), residency_policy=policy)
    TiledEvictable(CPU(0), Host(8), (2,), (4,), residency_policy=sw.LRUPolicy(budget_bytes=1 << 20))
