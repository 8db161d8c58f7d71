"""Checks an installed strideweave wheel: what docs/quickstart-python.md does.

Run by tools/wheel/build_wheel.sh with the python of a fresh virtual
environment holding only the wheel (and numpy), from a directory outside the
source tree. Fails (an exception, exit status 1) when the package imports
from anywhere but that environment, when the native libraries it loads are
not the ones the wheel bundles, or when a value differs from the quickstart's.
"""

import os
import sys
import sysconfig

import numpy as np
import strideweave as sw
from strideweave.carriers import CPU, File

site = os.path.realpath(sysconfig.get_paths()["platlib"])
package_dir = os.path.realpath(os.path.dirname(sw.__file__))
assert package_dir.startswith(site + os.sep), f"strideweave imported from {package_dir}, not from {site}"

# Tensors, ops and autograd.
a = sw.from_numpy(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32))
a.requires_grad = True
loss = sw.reduce_sum(sw.relu(a @ a.T - 10.0))
loss.backward()
assert loss.item() == 115.0, loss.item()
assert np.array_equal(a.grad.numpy(), np.array([[10.0, 14.0, 18.0], [10.0, 14.0, 18.0]], dtype=np.float32)), a.grad.numpy()

# A TiledEvictable: 8 experts of 64x64 f32 in a scratch file, at most 2 in CPU memory.
experts, dim = 8, 64
weights = np.random.default_rng(0).standard_normal((experts, dim, dim)).astype(np.float32)
secondary = File(experts * dim * dim)
sw.move_async(sw.from_numpy(np.concatenate([w.ravel(order="F") for w in weights])), secondary).wait()
lru = sw.LRUPolicy(2)
table = sw.TiledEvictable(CPU(0), secondary, (1, 1, experts), (dim, dim, 1), residency_policy=lru)
full = table.full_tensor()

chosen = sw.TileSelection([[0], [0], [5, 2]])
pending = table.project(full, chosen)
x = sw.from_numpy(np.ones((dim, 4), dtype=np.float32))
compact = pending.wait()
w = compact.permute((2, 0, 1))
y = w @ x
assert tuple(w.shape) == (2, dim, dim) and tuple(y.shape) == (2, dim, 4), (w.shape, y.shape)
assert np.allclose(y.numpy()[0], weights[5] @ np.ones((dim, 4)), atol=1e-4)
assert np.allclose(y.numpy()[1], weights[2] @ np.ones((dim, 4)), atol=1e-4)
assert len(table.primary_tiles) == 2, table.primary_tiles
stats = lru.stats()
assert (stats["requests"], stats["misses"], stats["promoted"]) == (1, 2, 2), stats
table.release()

# The native libraries in use: libstrideweave and its dependencies must come
# from the installed wheel, not from the system or a build tree.
with open("/proc/self/maps") as maps:
    mapped = {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}
libraries = sorted(p for p in mapped if os.path.basename(p).startswith(("libstrideweave", "libdnnl", "libuv", "libzstd")))
outside = [p for p in libraries if not os.path.realpath(p).startswith(site + os.sep)]
assert not outside, f"loaded from outside the wheel: {outside}"
for name in ("libstrideweave", "libdnnl", "libuv", "libzstd"):
    assert any(os.path.basename(p).startswith(name) for p in libraries), f"{name} not loaded: {libraries}"

print("smoke: ok (Python %d.%d; %s)" % (sys.version_info[0], sys.version_info[1],
      ", ".join(os.path.relpath(p, site) for p in libraries)))
