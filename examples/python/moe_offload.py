"""Mixture-of-experts weight offload with StrideWeave.

The expert weights (experts, d_out, d_in) live in one TiledEvictable, one
expert per tile: a scratch file is the secondary tier, CPU memory the primary
tier, and the built-in LRU policy keeps at most `--budget` experts resident.
For every token batch a router picks the top experts; the layer projects just
those experts into a compact tensor (promoting them from the file on demand),
applies them with matmul, and mixes the outputs by the router's weights.
Prefetch hints tell the policy which experts the next batch will want.

    python examples/python/moe_offload.py --experts 16 --batches 8
"""
import argparse
import os
import tempfile

import numpy as np

import strideweave as sw
from strideweave.carriers import CPU, File


def expert_weights(path, experts, d_out, d_in, rng):
    """Writes the experts to a weights file, one expert after another, each
    first mode fastest: the tile layout TiledEvictable reads seeds in."""
    weights = (rng.standard_normal((experts, d_out, d_in)) / np.sqrt(d_in)).astype(np.float32)
    with open(path, "wb") as f:
        for e in range(experts):
            f.write(np.asfortranarray(weights[e]).tobytes(order="F"))
    return weights


def route(tokens, router, top_k):
    """The top_k experts per batch by mean router score, and their mixing weights."""
    scores = (tokens @ router).mean(axis=0)
    chosen = np.argsort(-scores)[:top_k]
    weights = np.exp(scores[chosen] - scores[chosen].max())
    return [int(e) for e in chosen], weights / weights.sum()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--experts", type=int, default=16)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--budget", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    E, D = args.experts, args.d_model
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "experts.bin")
        reference = expert_weights(path, E, D, D, rng)
        # The weights file is the secondary tier as it is (read-only); a scratch
        # file beside it would do as well for weights that get updated.
        secondary = File.open(path, 0, E * D * D, dtype=sw.float32)
        lru = sw.LRUPolicy(args.budget)
        table = sw.TiledEvictable(CPU(0), secondary, (E, 1, 1), (1, D, D), residency_policy=lru)
        weights = table.full_tensor()
        router = rng.standard_normal((D, E)).astype(np.float32)

        batches = [rng.standard_normal((args.batch, D)).astype(np.float32) for _ in range(args.batches)]
        plans = [route(b, router, args.top_k) for b in batches]
        max_error = 0.0
        for step, (tokens, (chosen, mix)) in enumerate(zip(batches, plans)):
            if step + 1 < len(plans):  # prefetch what the next batch wants
                lru.hint(sw.TileSet((e, 0, 0) for e in plans[step + 1][0]))
            selection = sw.TileSelection([chosen, [0], [0]])
            pending = table.project(weights, selection)  # starts promotion and gather
            x = sw.from_numpy(tokens.T)  # (D, batch)
            compact = pending.wait()  # (top_k, D, D)
            y = sw.matmul(compact, x)  # (top_k, D, batch): every chosen expert on the batch
            out = sw.reduce_sum(sw.elementwise_mul(y, sw.from_numpy(mix.astype(np.float32).reshape(-1, 1, 1))),
                                axes=0)
            expected = sum(m * (reference[e] @ tokens.T) for e, m in zip(chosen, mix))
            error = float(np.abs(out.numpy() - expected).max())
            max_error = max(max_error, error)
            print(f"batch {step}: experts {chosen} resident {len(table.primary_tiles)}/{E} "
                  f"max |error| {error:.2e}")
        stats = lru.stats()
        print(f"lru: {stats['requests']} requests, {stats['hits']} hits, {stats['misses']} misses, "
              f"{stats['evicted']} evicted; max |error| {max_error:.2e}")
        table.release()
    if max_error > 1e-3:
        raise SystemExit(f"outputs differ from NumPy by {max_error}")
    return max_error


if __name__ == "__main__":
    main()
