"""One MoE layer's routed experts kept in the checkpoint's files as
TiledEvictable secondary tiers and computed with the expert feed-forward on
the cached tiles, behind transformers' experts interface."""
import math
import time

import torch

from .. import _dtypes
from .. import carriers
from .._coerce import as_tensor
from .._errors import StrideWeaveRuntimeError
from .._layout import Layout
from .._move import move_async
from .._tensor import Tensor
from .._tiles import LRUPolicy, TileSelection, TileSet
from ..carriers.tiled_evictable import TiledEvictable, expert_ffn

# transformers' hidden_act names and the expert feed-forward's activations.
ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh"}

TIERS = ("direct", "page-cache", "zstd", "remote")

_SW_DTYPES = {torch.float32: _dtypes.float32, torch.float16: _dtypes.float16, torch.bfloat16: _dtypes.bfloat16}


class GgufSource:
    """One stacked expert tensor of a GGUF file (llama.cpp's
    blk.{l}.ffn_{gate,up,down}_exps.weight), one expert per tile."""

    __slots__ = ("path", "name")

    def __init__(self, path, name):
        self.path, self.name = path, name


class MatrixTier:
    """One matrix kind (gate_up, gate, up or down) of a layer's experts: a
    TiledEvictable of one expert per tile over the checkpoint file(s), its
    full tensor and its LRU policy."""

    __slots__ = ("name", "tiled", "full", "policy", "tile_bytes")

    def __init__(self, name, sources, *, tier, budget_tiles, runtime, remote=None):
        """`sources`: (path, key) of a fused tensor holding every expert, a
        list of (path, key), one tensor per expert in expert order (the
        per-expert Hub keys, possibly spread over several shards), or a
        GgufSource. `remote`: with tier "remote", (endpoints, namespace) of
        the servers the experts are seeded into."""
        self.name = name
        direct = tier == "direct"
        if isinstance(sources, GgufSource):
            ft = carriers.File.open_gguf(sources.path, sources.name, direct_io=direct, runtime=runtime)
        else:
            if isinstance(sources, tuple):
                path, names = sources
            else:
                paths = [p for p, _ in sources]
                names = [k for _, k in sources]
                path = paths[0] if len(set(paths)) == 1 else paths
            ft = carriers.File.open_safetensors(path, names, direct_io=direct, runtime=runtime)
        self.policy = LRUPolicy(budget_tiles)
        if tier == "zstd":
            self.tiled = _compressed(ft, self.policy)
        elif tier == "remote":
            self.tiled = _seeded(ft, self.policy, *remote)
        else:
            self.tiled = ft.tiled(residency_policy=self.policy)
        self.full = self.tiled.full_tensor()
        tile = self.tiled.tile_shape
        dt = ft.dtype
        self.tile_bytes = tile[0] // dt.block_elements * dt.block_bytes * tile[1]

    @property
    def experts(self):
        return self.tiled.grid_shape[2]

    def missing(self, chosen):
        return [e for e in chosen if self.tiled.tile_state((0, 0, e)).location != "primary"]

    def release(self):
        self.tiled.release()


def _compressed(ft, policy):
    """The file tensor's values held zstd-compressed in memory instead: each
    expert read once from the file, written into a TiledEvictable over a
    Zstd carrier and evicted to it."""
    src = ft.tiled()
    experts = ft.grid_shape[2]
    z = carriers.Zstd(src.size(), dtype=ft.dtype, level=1)
    te = TiledEvictable(carriers.CPU(0, dtype=ft.dtype, runtime=ft.carrier._rt), z, ft.grid_shape, ft.tile_shape,
                        residency_policy=policy)
    full = te.full_tensor()
    try:
        for e in range(experts):
            one = TileSelection([[0], [0], [e]])
            part = src.project(src.full_tensor(), one).wait()
            te.update_async(full, part, one).wait()
            te.evict(one)
    finally:
        src.release()
    return te


def _seeded(ft, policy, endpoints, namespace):
    """The file tensor's values on Valkey/Redis servers instead: copied
    once into a remote carrier of one block per expert tile in `namespace`
    (deleted with the carrier), the secondary tier of the TiledEvictable."""
    n = ft.carrier.size()
    remote = carriers.Remote(0, endpoints=endpoints, namespace=namespace, dtype=ft.dtype,
                             block_elements=math.prod(ft.tile_shape), runtime=ft.carrier._rt)
    try:
        move_async(Tensor(ft.carrier, 0, Layout.dense(n)), remote).wait()
        return TiledEvictable(carriers.CPU(0, dtype=ft.dtype, runtime=ft.carrier._rt), remote, ft.grid_shape,
                              ft.tile_shape, residency_policy=policy)
    except BaseException:
        remote.release()  # its namespace with it
        raise
    finally:
        ft.carrier.release()


class LayerStats:
    """Counters of one layer's expert calls."""

    __slots__ = ("calls", "tokens", "wait_s", "prefetch_issued", "prefetch_used", "prefetch_bytes",
                 "predicted", "predicted_right")

    def __init__(self):
        for k in self.__slots__:
            setattr(self, k, 0)


class OffloadedExperts:
    """The state StrideWeave attaches to one transformers experts module."""

    def __init__(self, layer, module_name, matrices, *, activation, compute_dtype, top_k, budget_tiles):
        self.layer = layer
        self.module_name = module_name
        self.matrices = matrices  # {"gate_up", "down"} or {"gate", "up", "down"}
        self.fused = "gate_up" in matrices
        self.activation = activation
        self.compute_dtype = compute_dtype
        self.top_k = top_k
        self.budget_tiles = budget_tiles
        self.stats = LayerStats()
        self.ahead = {}  # matrix name -> {expert: AwaitResidency} prefetches not yet waited for
        self.predicted = None  # the experts predicted for the next call, set by the prefetcher

    @property
    def experts(self):
        return self.matrices["down"].experts

    def forward(self, hidden_states, top_k_index, top_k_weights):
        shape = hidden_states.shape
        x = hidden_states.detach().reshape(-1, shape[-1])
        out_dtype = x.dtype
        if x.dtype != self.compute_dtype:
            x = x.to(self.compute_dtype)
        x = x.contiguous()
        ids = top_k_index.reshape(x.shape[0], -1).contiguous()
        weights = top_k_weights.detach().reshape(x.shape[0], -1).contiguous()
        if ids.dtype not in (torch.int64, torch.int32):
            ids = ids.to(torch.int64)
        if weights.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            weights = weights.float()
        st = self.stats
        st.calls += 1
        st.tokens += x.shape[0]
        chosen = sorted(set(ids.reshape(-1).tolist()))
        if self.predicted is not None:
            st.predicted += len(self.predicted)
            st.predicted_right += len(self.predicted & set(chosen))
            self.predicted = None
        t0 = time.perf_counter()
        self._settle_ahead(chosen)
        if len(chosen) <= self.budget_tiles:
            y = torch.from_dlpack(self._call(x, ids, weights))
        else:
            y = self._waves(x, ids, weights, chosen)
        st.wait_s += time.perf_counter() - t0
        if y.dtype != out_dtype:
            y = y.to(out_dtype)
        return y.reshape(shape)

    def _call(self, x, ids, weights):
        """expert_ffn on the layer's experts, waited for: (T, H) with
        `weights`, else (T, k, H)."""
        m = self.matrices
        sx, sids = as_tensor(x, "hidden_states"), as_tensor(ids, "top_k_index")
        sg = None if weights is None else as_tensor(weights, "top_k_weights")
        gate, up = (m["gate_up"].full, None) if self.fused else (m["gate"].full, m["up"].full)
        try:
            a = expert_ffn(sx, sids, gate, up, m["down"].full, sg, activation=self.activation)
        except StrideWeaveRuntimeError as e:
            # A prefetch still owns a tile the call's plan touches: let the
            # layer's prefetches finish and start the call again.
            if "residency request" not in str(e) or not any(self.ahead.values()):
                raise
            self._settle_ahead(None)
            a = expert_ffn(sx, sids, gate, up, m["down"].full, sg, activation=self.activation)
        return a.wait()

    def _waves(self, x, ids, weights, chosen):
        """The layer for a call choosing more experts than the budget holds
        (a prompt's prefill): the chosen experts in waves of at most the
        budget, each wave one expert_ffn on the (token, choice) pairs routed
        to it, so that no more tiles than the budget are ever held (the LRU
        policy evicts the last wave's to read the next). Each expert's output
        rounded to the dtype, then gated and summed in f32 and rounded once,
        as the one-call form does."""
        tokens, k = ids.shape
        acc = torch.zeros(tokens, k, x.shape[-1], dtype=torch.float32)
        n = self.budget_tiles
        # The cached experts first: they are hits before a wave evicts them.
        missing = set(self.matrices["down"].missing(chosen))
        chosen = [e for e in chosen if e not in missing] + [e for e in chosen if e in missing]
        for i in range(0, len(chosen), n):
            t, j = torch.isin(ids, torch.tensor(chosen[i:i + n], dtype=ids.dtype)).nonzero(as_tuple=True)
            y = torch.from_dlpack(self._call(x[t].unsqueeze(1).contiguous(), ids[t, j].unsqueeze(1).contiguous(),
                                             None))
            acc[t, j] = y[:, 0].float() * weights[t, j].float().unsqueeze(-1)
        return acc.sum(dim=1).to(x.dtype)

    # ---- prefetch ----

    def prefetch(self, experts):
        """Starts reading `experts` (a set of expert ids) of every matrix
        that does not hold them, as prefetches: reads that yield to the
        demand reads of a running call."""
        self.predicted = set(experts)
        for name, mt in self.matrices.items():
            pending = self.ahead.setdefault(name, {})
            todo = [e for e in mt.missing(sorted(experts)) if e not in pending]
            if not todo:
                continue
            tiles = TileSet([(0, 0, e) for e in todo])
            try:
                pending_await = mt.tiled.prefetch_async(tiles)
            except StrideWeaveRuntimeError:
                continue  # a tile it would evict is still in use: skip this guess
            for e in todo:
                pending[e] = pending_await
            self.stats.prefetch_issued += len(todo)
            self.stats.prefetch_bytes += len(todo) * mt.tile_bytes

    def _settle_ahead(self, chosen):
        """Waits for the prefetches a call needs (a prefetch owns its tiles
        until it completes) and forgets the rest once they are done: a guess
        expires with the layer's call."""
        everything = chosen is None
        chosen = set(chosen or ())
        for name, pending in self.ahead.items():
            if not pending:
                continue
            waited = set()
            for e, aw in list(pending.items()):
                if everything or e in chosen:
                    if id(aw) not in waited:
                        aw.wait()
                        waited.add(id(aw))
                    if e in chosen:
                        self.stats.prefetch_used += 1
                    del pending[e]
                elif aw.done():
                    del pending[e]
            # Unneeded prefetches still loading: wait only if they own a tile the call uses.
            for e, aw in list(pending.items()):
                if id(aw) in waited:
                    del pending[e]

    def release(self):
        for pending in self.ahead.values():
            for aw in pending.values():
                try:
                    aw.wait()
                except Exception:
                    pass
        self.ahead.clear()
        for mt in self.matrices.values():
            mt.release()
