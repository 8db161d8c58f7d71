"""Seeding and checking a remote tier (docs/remote-tier.md).

    python -m strideweave.remote seed --endpoints unix:///run/a.sock [...] \\
        --namespace moe --from model.safetensors --tensor 'model.layers.*.experts.*'
    python -m strideweave.remote verify --endpoints ... --namespace moe \\
        --from model.safetensors --tensor PATTERN

`seed` copies every tensor of the checkpoint whose name matches PATTERN (a
shell-style pattern) into the namespace `<namespace>:<tensor name>`, one
block per tile of the tensor's TiledEvictable geometry (one expert of a
stacked tensor), through the public API: a persistent remote carrier that a
File carrier over the tensor is moved into. `verify` opens each of those
namespaces, reads every block (each read checks the block's CRC-32C) and
compares the values with the checkpoint's. Both print one line per tensor
and exit non-zero on the first failure.
"""
import argparse
import fnmatch
import json
import math
import struct
import sys

import numpy as np

from ._layout import Layout
from ._move import move_async
from ._tensor import Tensor
from .carriers import File, Remote

__all__ = ["seed", "verify", "tensor_names"]


def tensor_names(path, pattern="*"):
    """The names of the tensors of the .safetensors file `path` matching
    `pattern`, in the file's order."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError(f"'{path}' is too short for a .safetensors file")
        (length,) = struct.unpack("<Q", head)
        header = json.loads(f.read(length))
    return [name for name in header if name != "__metadata__" and fnmatch.fnmatchcase(name, pattern)]


def _flat(carrier, n):
    return Tensor(carrier, 0, Layout.dense(n))


def _connection(args):
    return {"endpoints": args.endpoints, "user": args.user, "password_file": args.password_file,
            "allow_plaintext": args.allow_plaintext}


def seed(path, pattern, namespace, *, endpoints, user=None, password_file=None, allow_plaintext=False,
         placement_seed=0, runtime=None, out=None):
    """Copies the matching tensors of `path` into `<namespace>:<name>`;
    returns the names."""
    names = tensor_names(path, pattern)
    for name in names:
        ft = File.open_safetensors(path, name, runtime=runtime)
        n = math.prod(ft.logical_shape)
        block = math.prod(ft.tile_shape)
        remote = Remote(0, endpoints=endpoints, namespace=f"{namespace}:{name}", dtype=ft.dtype, user=user,
                        password_file=password_file, allow_plaintext=allow_plaintext, block_elements=block,
                        placement_seed=placement_seed, persistent=True, runtime=runtime)
        move_async(_flat(ft.carrier, n), remote).wait()
        remote.release()
        if out is not None:
            print(f"seeded {namespace}:{name}: {n} {ft.dtype.name} values in blocks of {block}", file=out)
    return names


def verify(path, pattern, namespace, *, endpoints, user=None, password_file=None, allow_plaintext=False,
           placement_seed=0, runtime=None, out=None):
    """Reads every block of the matching tensors' namespaces (CRC-checked)
    and compares them with `path`; raises on the first difference."""
    names = tensor_names(path, pattern)
    for name in names:
        ft = File.open_safetensors(path, name, runtime=runtime)
        n = math.prod(ft.logical_shape)
        remote = Remote.open(n, endpoints=endpoints, namespace=f"{namespace}:{name}", dtype=ft.dtype, user=user,
                             password_file=password_file, allow_plaintext=allow_plaintext, read_only=True,
                             placement_seed=placement_seed, runtime=runtime)
        stored = np.asarray(_flat(remote, n).numpy())
        wanted = np.asarray(_flat(ft.carrier, n).numpy())
        if stored.tobytes() != wanted.tobytes():
            raise ValueError(f"the values of {namespace}:{name} differ from '{path}'")
        remote.release()
        ft.carrier.release()
        if out is not None:
            print(f"verified {namespace}:{name}: {n} {ft.dtype.name} values", file=out)
    return names


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m strideweave.remote", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["seed", "verify"])
    parser.add_argument("--endpoints", nargs="+", required=True, help="unix:///path or redis://host[:port]")
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--from", dest="checkpoint", required=True, help="a .safetensors file")
    parser.add_argument("--tensor", default="*", help="a shell-style pattern of tensor names (default: all)")
    parser.add_argument("--user", default=None)
    parser.add_argument("--password-file", default=None)
    parser.add_argument("--allow-plaintext", action="store_true")
    parser.add_argument("--placement-seed", type=int, default=0)
    args = parser.parse_args(argv)
    run = seed if args.command == "seed" else verify
    names = run(args.checkpoint, args.tensor, args.namespace, placement_seed=args.placement_seed, out=sys.stdout,
                **_connection(args))
    if not names:
        print(f"no tensor of '{args.checkpoint}' matches '{args.tensor}'", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
