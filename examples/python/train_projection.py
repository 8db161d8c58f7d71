"""Training through projection: an embedding-style table whose rows live in
a TiledEvictable (one row per tile) with a scratch file as its secondary tier.

Each step projects only the rows a batch uses (promoting them from the file),
computes a squared-error loss against targets, and runs backward through the
projection: the gradient is a fresh TiledEvictable whose untouched tiles are
implicit zeros. SGD then writes `-lr * grad` into the table with
scatter(..., reduction="add"), which returns the updated table as a new
TiledEvictable; its tiles go back to the file and the old table is released.
The loss goes down.

    python examples/python/train_projection.py --steps 30
"""
import argparse

import numpy as np

import strideweave as sw
from strideweave.carriers import CPU, File


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--per-step", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    R, W = args.rows, args.width
    target = rng.standard_normal((R, W)).astype(np.float32)
    # Start from zeros: a full primary seed, nothing in the file yet.
    table = sw.TiledEvictable(CPU(R * W), File(0), (R, 1), (1, W))
    weights = table.full_tensor()
    everything = sw.TileSelection([range(R), [0]])
    losses = []
    for step in range(args.steps):
        rows = [int(r) for r in rng.choice(R, size=args.per_step, replace=False)]
        weights.requires_grad = True
        compact = table.project(weights, sw.TileSelection([rows, [0]])).wait()  # (per_step, W)
        diff = compact - sw.from_numpy(target[rows])
        loss = sw.reduce_sum(diff * diff)
        loss.backward()
        losses.append(loss.item())
        grad = weights.grad  # full-shaped, tiled; only `rows` are non-zero
        assert grad is not None and isinstance(grad.carrier, sw.TiledEvictable)
        with sw.no_grad():
            step_grad = grad.carrier.project(grad, everything).wait()
            updated = table.scatter(step_grad * -args.lr, weights, everything, reduction="add").wait()
        new_table = updated.carrier  # the scatter's result lives on a new TiledEvictable
        assert isinstance(new_table, sw.TiledEvictable)
        new_table.evict(everything)  # the updated rows go to the file tier
        table.release()
        table, weights = new_table, updated
        if step % 5 == 0 or step == args.steps - 1:
            print(f"step {step:3d}: loss {losses[-1]:.4f} rows {rows} "
                  f"(primary {len(table.primary_tiles)}, secondary {len(table.secondary_tiles)})")
    final = np.abs(weights.numpy() - target).mean()
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}; mean |w - target| {final:.4f}")
    if not losses[-1] < losses[0]:
        raise SystemExit("the loss did not decrease")
    return losses


if __name__ == "__main__":
    main()
