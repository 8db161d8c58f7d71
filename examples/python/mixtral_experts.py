"""Open a Mixtral-layout checkpoint's experts as one TiledEvictable over the
.safetensors file, and project two experts.

    python3 mixtral_experts.py [--file PATH] [--layer L] [--experts E] [--matrix w1|w2|w3]

A Hugging Face Mixtral checkpoint stores each expert's matrices as their own
row-major (O, I) tensors, model.layers.{L}.block_sparse_moe.experts.{e}.w1.weight.
File.open_safetensors(path, names) opens layer L's E tensors as one read-only
File carrier over their E file regions: the stack (E, O, I), which as it lies
in the file is the first-mode-fastest tensor (I, O, E). Its geometry, grid
(1, 1, E) and tile (I, O, 1), makes tile e exactly expert e's bytes, so a
projection of S experts is one block copy each, the compact (I, O, S) a
matmul takes directly; permuted by ft.permutation it indexes as the
checkpoint does, [s, o, i].

Without --file a small synthetic checkpoint of that layout is written first
(sw.save_safetensors) to a temporary directory. Every projected value is
checked against the checkpoint read without StrideWeave (the safetensors
package, or the file's own tensors opened one by one), so the script is a
test as well as an example. See docs/model-files.md.
"""
import argparse
import os
import tempfile

import numpy as np

import strideweave as sw
from strideweave.carriers import File


def expert_name(layer, expert, matrix):
    return f"model.layers.{layer}.block_sparse_moe.experts.{expert}.{matrix}.weight"


def write_checkpoint(path, experts, out_dim=8, in_dim=6, seed=0):
    """Layers 0 and 1 of a Mixtral-layout checkpoint; returns its arrays."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for layer in range(2):
        for e in range(experts):
            for m in ("w1", "w2", "w3"):
                arrays[expert_name(layer, e, m)] = rng.standard_normal((out_dim, in_dim)).astype(np.float32)
    # sw.from_numpy keeps NumPy's indexing, so each saves as the (O, I) it is.
    sw.save_safetensors(path, {name: sw.from_numpy(a) for name, a in arrays.items()}, metadata={"format": "pt"})
    return arrays


def reference(path, name):
    """Tensor `name` of the checkpoint as NumPy, read without the stack."""
    try:
        from safetensors import safe_open
    except ImportError:
        ft = File.open_safetensors(path, name)
        return ft.view(ft.tiled().full_tensor()).numpy()
    with safe_open(path, framework="np") as f:
        return f.get_tensor(name)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--file", help="a Mixtral-layout .safetensors file (default: write a synthetic one)")
    parser.add_argument("--layer", type=int, default=1)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--matrix", choices=("w1", "w2", "w3"), default="w1")
    o = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = o.file
        if path is None:
            path = os.path.join(tmp, "model.safetensors")
            write_checkpoint(path, o.experts)

        # 1. Layer L's experts, in expert order: tile e is names[e].
        names = [expert_name(o.layer, e, o.matrix) for e in range(o.experts)]
        ft = File.open_safetensors(path, names)
        print(f"layer {o.layer} {o.matrix}: {ft.segments} experts, file-order shape {ft.shape} {ft.dtype.name}")
        print(f"full tensor {ft.logical_shape}, grid {ft.grid_shape}, tile {ft.tile_shape}")

        # 2. A TiledEvictable: an empty CPU primary, the file as the secondary.
        tiled = ft.tiled()
        full = tiled.full_tensor()  # (I, O, E): for project, scatter and ops

        # 3. Project two experts: the compact (I, O, 2).
        chosen = [1, o.experts - 1]
        compact = tiled.project(full, sw.TileSelection([[0], [0], chosen])).wait()
        experts = compact.permute(ft.permutation)  # (2, O, I), as the checkpoint indexes

        # 4. Check against the checkpoint read another way.
        wrong = 0
        for s, e in enumerate(chosen):
            want = reference(path, names[e])
            wrong += int(np.count_nonzero(experts.numpy()[s] != want))
        # The file-order view of the full tensor reads single weights too.
        view = ft.view(full)
        last = reference(path, names[-1])
        wrong += int(view[o.experts - 1, 2, 3] != last[2, 3])
        print(f"projected experts {chosen[0]} and {chosen[1]}: compact {compact.shape}, "
              f"{2 * ft.shape[1] * ft.shape[2]} values checked, {wrong} wrong")
        tiled.release()
        ft.carrier.release()
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
