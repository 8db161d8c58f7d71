"""MoE expert offloading with StrideWeave: the Python twin of examples/c/moe_offload.c.

A synthetic mixture-of-experts feed-forward layer keeps its expert weights
(experts x dim x dim) in one TiledEvictable, one expert per tile. The
secondary tier (a file, zstd-compressed memory or host memory) holds every
expert; the primary tier (CPU memory, or with --compute vulkan the memory of
a Vulkan device, where the experts are gathered and multiplied) holds at
most a budget of them. A
router picks top-k experts per token batch from a skewed, repeatable
distribution (the C demo's generator: both route the same experts). The
built-in LRU policy decides what stays resident and prefetches the next
batch's experts, and the projection of batch b+1's experts runs while batch
b computes.

The same router sequence then runs with every expert resident and with naive
synchronous loading (project, wait, compute, evict), and the final table
compares them. With --train the layer is trained instead: backward through
the projection gives tile-sparse expert gradients, an SGD step adds them back
into the tiles in place, and evicted dirty experts are verified after
reloading them from the secondary tier.

    PYTHONPATH=build/bindings/python python3 examples/python/moe_offload.py
        [--experts 64] [--dim 1024] [--topk 4] [--tokens 32] [--batches 48]
        [--tier file|zstd|host] [--budget 0.25] [--dtype f32|bf16]
        [--policy lru|none] [--train] [--compute cpu|vulkan] [--csv FILE]
        [--dir DIR] [--quiet]

(the build tree's package; an installed strideweave needs no PYTHONPATH).
--csv writes the same columns as the C demo's, which tools/plot_moe.py plots.

Weights and tokens come from NumPy's generator rather than the C demo's, so
the checksums differ from the C demo's; the routing, sizes and table do not.
"""
import argparse
import math
import sys
import time

import numpy as np

import strideweave as sw
from strideweave.carriers import CPU, File, Host, Vulkan, Zstd

MASK64 = (1 << 64) - 1
RUN_NAMES = ("offloaded", "resident", "naive")


class XorShift:
    """The C demo's xorshift64* generator, so both route the same experts."""

    def __init__(self, seed):
        self.state = seed & MASK64

    def uniform(self):
        s = self.state
        s ^= s >> 12
        s ^= (s << 25) & MASK64
        s ^= s >> 27
        self.state = s
        return (((s * 2685821657736338717) & MASK64) >> 11) / 9007199254740992.0


def route_all(o):
    """Top-k distinct experts per batch, Zipf-skewed (exponent 1.1) over a
    fixed shuffle of the experts: a list of o.batches lists."""
    rng = XorShift(0x5EED1234ABCD)
    order = list(range(o.experts))
    for e in range(o.experts - 1, 0, -1):
        j = int(rng.uniform() * (e + 1))
        order[e], order[j] = order[j], order[e]
    weight = [1.0 / math.pow(r + 1.0, 1.1) for r in range(o.experts)]
    total = sum(weight)
    picks = []
    for _ in range(o.batches):
        chosen: list[int] = []
        while len(chosen) < o.topk:
            u, acc, r = rng.uniform() * total, 0.0, 0
            while r < o.experts - 1:
                acc += weight[r]
                if acc >= u:
                    break
                r += 1
            if order[r] not in chosen:
                chosen.append(order[r])
        picks.append(chosen)
    return picks


def bf16_bits(values):
    """float32 values rounded to bfloat16 (nearest even), as uint16 bits."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def as_tensor(values, dtype):
    """A CPU tensor of float32 `values` in `dtype` (sw.float32 or sw.bfloat16)."""
    if dtype is sw.bfloat16:
        return sw.from_numpy(bf16_bits(values).reshape(values.shape, order="A"), dtype=sw.bfloat16)
    return sw.from_numpy(values)


def on_compute(o, t):
    """`t` on the primary tier's compute carrier, where the projected experts
    are: ops take operands of one carrier kind."""
    return sw.move_async(t, Vulkan(0, dtype=t.dtype)).wait() if o.compute == "vulkan" else t


def expert_values(o, seed=0xA11CE5):
    """Every expert's weights, tile after tile, each first mode fastest: the
    secondary tier's contents. Uniform in +-1/sqrt(dim)."""
    rng = np.random.default_rng(seed)
    scale = np.float32(1.0 / math.sqrt(o.dim))
    return (rng.random(o.experts * o.dim * o.dim, dtype=np.float32) * 2 - 1) * scale


def make_secondary(o):
    """The secondary tier holding every expert (moved in from a CPU tensor)."""
    total, tile = o.experts * o.dim * o.dim, o.dim * o.dim
    carrier: sw.carriers.Carrier
    if o.tier == "file":
        carrier = File(total, dtype=o.dtype, directory=o.dir)
    elif o.tier == "zstd":
        carrier = Zstd(total, dtype=o.dtype, frame_elements=tile)
    else:
        carrier = Host(total, dtype=o.dtype)
    sw.move_async(as_tensor(expert_values(o), o.dtype), carrier).wait()
    return carrier


def make_tokens(o, batch):
    """x: (1, dim, tokens), broadcast over the selected experts."""
    rng = np.random.default_rng(0x70C3E5 + batch * 7919)
    x = np.asfortranarray(rng.random((1, o.dim, o.tokens), dtype=np.float32) * 2 - 1)
    return on_compute(o, as_tensor(x, o.dtype))


def make_target(o, batch):
    rng = np.random.default_rng(0x7A26E7 + batch * 104729)
    return on_compute(o, sw.from_numpy(np.asfortranarray(rng.random((o.dim, o.tokens), dtype=np.float32) - 0.5)))


def expert_layer(w, x):
    """y = sum over the selected experts of W_e @ x -> (dim, tokens), float32:
    bfloat16 weights and tokens give their float32 sums (the elementwise ops
    and reduce_sum take float32 and float64)."""
    wide = None if w.dtype is sw.float64 else sw.float32
    return sw.reduce_sum(sw.matmul(w, x, out_dtype=wide), axes=0)


def selection_for(experts):
    return sw.TileSelection([experts, [0], [0]])


def resident_count(weights, experts):
    """How many of a batch's experts are primary-resident as its projection
    is issued: the hits of a run without the LRU policy."""
    return sum(weights.tile_state((e, 0, 0)).location == "primary" for e in experts)


def take_lru_counters(lru, st):
    """Makes the LRU policy's counters the run's; returns the hits since the last call."""
    s = lru.stats()
    hits = s["hits"] - st["hits"]
    st.update(hits=s["hits"], misses=s["misses"], promoted=s["promoted"], evicted=s["evicted"])
    return hits


def project_batch(weights, full, experts, lru):
    """Issues the projection of a batch's experts; returns (its await, how
    many of the experts were hits without a policy: those already
    primary-resident). The LRU policy counts hits when a request commits:
    those are read once the projection is waited for."""
    resident = 0 if lru is not None else resident_count(weights, experts)
    pending = weights.project(full, selection_for(experts))
    return pending, resident


def make_weights(o, policy):
    primary = Vulkan(0, dtype=o.dtype) if o.compute == "vulkan" else CPU(0, dtype=o.dtype)
    return sw.TiledEvictable(primary, make_secondary(o), (o.experts, 1, 1), (1, o.dim, o.dim),
                             residency_policy=policy)


def budget_tiles(o):
    return math.ceil(o.budget * o.experts)


def run(o, picks, mode, csv=None):
    """One pass over the router's batches: "offloaded" (projection of batch
    b+1 overlapping batch b's compute, LRU policy unless --policy none),
    "resident" (every expert promoted first) or "naive" (project, wait,
    compute, evict). Returns its figures as a dict."""
    st = {"name": mode, "seconds": 0.0, "wait_seconds": 0.0, "checksum": 0.0, "hits": 0, "misses": 0,
          "promoted": 0, "evicted": 0}
    lru = sw.LRUPolicy(budget_tiles(o)) if mode == "offloaded" and o.use_policy else None
    weights = make_weights(o, lru)
    full = weights.full_tensor()
    if mode == "resident":
        weights.promote(weights.valid_tiles)

    t0 = time.perf_counter()
    pending_next, next_hits = None, 0
    for b, experts in enumerate(picks):
        tb = time.perf_counter()
        pending, hits = pending_next, next_hits
        if pending is None:
            pending, hits = project_batch(weights, full, experts, lru)
        pending_next = None
        tw = time.perf_counter()
        w = pending.wait()
        waited = time.perf_counter() - tw
        if lru is not None:
            # This batch's request is the last one committed: the next is issued below.
            hits = take_lru_counters(lru, st)
        if mode == "offloaded" and b + 1 < len(picks):
            # Start the next batch's gather now, and hint the one after it.
            if lru is not None and b + 2 < len(picks):
                lru.hint(sw.TileSet((e, 0, 0) for e in picks[b + 2]))
            pending_next, next_hits = project_batch(weights, full, picks[b + 1], lru)
        x = make_tokens(o, b)
        st["checksum"] += sw.reduce_sum(expert_layer(w, x)).item()
        del w, x
        if mode == "naive":
            weights.evict(selection_for(experts))
        latency = time.perf_counter() - tb
        st["wait_seconds"] += waited
        hits_now = hits
        if lru is None:
            # Without a policy a projection promotes what it misses and nothing
            # is evicted but what the naive run evicts after each batch.
            st["hits"] += hits
            st["misses"] += o.topk - hits
            st["promoted"] += o.topk - hits
            if mode == "naive":
                st["evicted"] += o.topk
        if not o.quiet:
            second = experts[min(1, o.topk - 1)]
            print(f"[{mode:<9}] batch {b + 1:3d}/{o.batches}  experts {experts[0]:2d},{second:2d},...  "
                  f"latency {latency * 1e3:7.2f} ms  waited {waited * 1e3:6.2f} ms  hits {hits_now}/{o.topk}",
                  flush=True)
        if csv is not None:
            csv.write(f"{mode},{b},{latency * 1e3:.4f},{waited * 1e3:.4f},{hits_now / o.topk:.4f}\n")
    st["seconds"] = time.perf_counter() - t0
    if lru is not None:
        take_lru_counters(lru, st)  # promotions the last hint started
    del full
    weights.release()
    return st


def scaled(o, g, factor):
    """factor * g. The CPU carrier's elementwise ops take float32 and float64,
    so a bfloat16 gradient is scaled in NumPy in float32 and rounded once."""
    if g.dtype is sw.bfloat16:
        return on_compute(o, as_tensor(g.numpy() * np.float32(factor), sw.bfloat16))
    return g * factor


def train(o, picks):
    """loss = 0.5 * || sum_e W_e x - target ||^2 with a fixed target per input
    batch; SGD on the touched experts only. Returns 0 when the loss fell and
    every update survived eviction."""
    # An optimiser step updates a batch's experts together, so the budget
    # holds at least those (the LRU refuses an update larger than its budget).
    lru = sw.LRUPolicy(max(budget_tiles(o), o.topk))
    weights = make_weights(o, lru)
    full = weights.full_tensor()
    full.requires_grad = True
    lr = 1.0 / (o.dim * o.topk)
    window = max(o.batches // 4, 1)
    losses = []
    for b, experts in enumerate(picks):
        sel = selection_for(experts)
        w = weights.project(full, sel).wait()
        y = expert_layer(w, make_tokens(o, b % 8))
        diff = y - make_target(o, b % 8)
        loss_t = sw.reduce_sum(diff * diff * 0.5)
        loss = loss_t.item()
        loss_t.backward()
        # The gradient is a tiled tensor whose untouched tiles are implicit zeros.
        grad = full.grad
        with sw.no_grad():
            g = grad.carrier.project(grad, sel).wait()
            weights.update_async(full, scaled(o, g, -lr), sel, "add").wait()
        full.grad = None
        losses.append(loss)
        if not o.quiet:
            print(f"[train    ] batch {b + 1:3d}/{o.batches}  loss {loss:.6f}", flush=True)
        del grad, g, w, y, diff, loss_t
    # Dirty experts must survive eviction: read every weight, evict all, and
    # read them again from the secondary tier.
    with sw.no_grad():
        dirty = len(weights.dirty_tiles)
        values_before = full.numpy().copy()
        weights.evict(weights.primary_tiles)
        still = len(weights.dirty_tiles)
        values_after = full.numpy()
    identical = np.array_equal(values_before, values_after)
    before, after = float(values_before.sum(dtype=np.float64)), float(values_after.sum(dtype=np.float64))
    early, late = sum(losses[:window]) / window, sum(losses[-window:]) / window
    print(f"\ntraining: loss {losses[0]:.6f} -> {losses[-1]:.6f} (mean of first {window} batches {early:.6f}, "
          f"last {window} {late:.6f})")
    print(f"write-back: {dirty} dirty experts evicted, {still} still dirty, weight sum {before:.6f} before and "
          f"{after:.6f} after reload, {'every value identical' if identical else 'VALUES DIFFER'}")
    ok = late < early and still == 0 and identical
    print("training verified: loss fell and every update survived eviction" if ok else "TRAINING CHECK FAILED")
    del full
    weights.release()
    return 0 if ok else 1


def table(o, r):
    """Prints the comparison table; returns 0 when the outputs agree."""
    tile_mib = o.dim * o.dim * o.dtype.itemsize / (1 << 20)
    print(f"\n{'run':<10} {'tokens/s':>12} {'hit rate':>10} {'wait s':>10} {'promoted MiB':>14} {'evicted MiB':>14} "
          f"{'vs resident':>12}")
    for s in r:
        total = s["hits"] + s["misses"]
        print(f"{s['name']:<10} {o.batches * o.tokens / s['seconds']:12.0f} "
              f"{100.0 * s['hits'] / total if total else 0.0:9.1f}% {s['wait_seconds']:10.3f} "
              f"{s['promoted'] * tile_mib:14.1f} {s['evicted'] * tile_mib:14.1f} "
              f"{r[1]['seconds'] / s['seconds']:11.2f}x")
    ref = r[1]["checksum"]
    same = all(abs(s["checksum"] - ref) <= 1e-6 * abs(ref) for s in r)
    print(f"\noffloaded is {r[2]['seconds'] / r[0]['seconds']:.2f}x faster than naive loading; outputs "
          f"{'identical across runs' if same else 'DIFFER'} (checksum {ref:.6g})")
    return 0 if same else 1


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--experts", type=int, default=64)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--topk", type=int, default=4)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--batches", type=int, default=48)
    p.add_argument("--tier", choices=("file", "zstd", "host"), default="file")
    p.add_argument("--budget", type=float, default=0.25, help="fraction of the experts the primary tier holds")
    p.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    p.add_argument("--policy", choices=("lru", "none"), default="lru")
    p.add_argument("--train", action="store_true")
    p.add_argument("--compute", choices=("cpu", "vulkan"), default="cpu",
                   help="the primary tier's compute carrier: CPU memory or a Vulkan device")
    p.add_argument("--csv", metavar="FILE", help="write per-batch latency, wait and hit rate of the three runs")
    p.add_argument("--dir", metavar="DIR", help="directory of the file tier's scratch file")
    p.add_argument("--quiet", action="store_true", help="no line per batch")
    o = p.parse_args(argv)
    if (o.experts < 1 or o.dim < 1 or o.topk < 1 or o.topk > o.experts or o.tokens < 1 or o.batches < 1
            or not 0 < o.budget <= 1):
        p.error("need experts, dim, tokens, batches >= 1, 1 <= topk <= experts and 0 < budget <= 1")
    o.dtype = sw.bfloat16 if o.dtype == "bf16" else sw.float32
    o.use_policy = o.policy == "lru"
    return o


def main(argv=None):
    o = parse_args(argv)
    mib = o.experts * o.dim * o.dim * o.dtype.itemsize / (1 << 20)
    print(f"StrideWeave {sw.__version__} MoE offload (Python): {o.experts} experts of {o.dim}x{o.dim} "
          f"{'bf16' if o.dtype is sw.bfloat16 else 'f32'} ({mib:.0f} MiB) on the {o.tier} tier, top-{o.topk} of "
          f"{o.tokens} tokens per batch, primary budget {o.budget * 100:.0f}% ({budget_tiles(o)} experts) in "
          f"{'Vulkan device' if o.compute == 'vulkan' else 'CPU'} memory, "
          f"policy {'LRU + prefetch' if o.use_policy else 'none'}\n")
    if o.compute == "vulkan":
        try:
            Vulkan(0)
        except NotImplementedError as e:
            print(f"moe_offload: no Vulkan device for --compute vulkan ({e})", file=sys.stderr)
            return 77  # a skip, for test runners
    picks = route_all(o)
    if o.train:
        return train(o, picks)
    csv = None
    if o.csv:
        csv = open(o.csv, "w")
        csv.write("run,batch,latency_ms,wait_ms,hit_rate\n")
    try:
        results = [run(o, picks, mode, csv) for mode in RUN_NAMES]
    finally:
        if csv is not None:
            csv.close()
    return table(o, results)


if __name__ == "__main__":
    sys.exit(main())
