"""The concurrency soak from Python (tools/soak is the C one): threads share
TiledEvictables and run projections, scatters, promotions, evictions, direct
ops, updates and backward passes at once. The bindings release the GIL
around every blocking call, so the library sees the requests concurrently.
One carrier has an LRU policy, one none, and one a Python policy that
refuses every fourth plan by raising. Expected refusals (a request
overlapping another one, a refused plan) are counted, never failures; every value read is checked per tile, and at the end each carrier
equals the sequential replay of the committed updates (uniform additions
per tile, which commute)."""
import random
import threading

import numpy as np
import pytest
import strideweave as sw
from conftest import seeded_tiled

GRID, TILE = 8, 16
THREADS = 4
OPS_PER_THREAD = 60


def seeds():
    return np.array([(k + 1) * 1000 + w for k in range(GRID) for w in range(TILE)], dtype=np.float32)


def offsets_of(values, tiles):
    """Per tile: the one offset from its seed (a torn tile fails)."""
    seed = seeds().reshape(GRID, TILE)
    values = np.asarray(values).reshape(len(tiles), TILE)
    out = []
    for t, k in enumerate(tiles):
        diff = values[t] - seed[k]
        assert np.all(diff == diff[0]), f"tile {k} is torn: {diff}"
        out.append(float(diff[0]))
    return out


class Refused(Exception):
    """What RefusingPolicy raises: an expected refusal, not a failure."""


class RefusingPolicy:
    """Promotes what is required, but refuses every `every`-th plan by
    raising from the policy callback; the request it was planning must fail
    with that exception and change nothing."""

    def __init__(self, every=4):
        self.every = every
        self.calls = 0
        self.refusals = 0
        self.on = True
        self.lock = threading.Lock()

    def plan(self, required, purpose):
        with self.lock:
            self.calls += 1
            refuse = self.on and self.calls % self.every == 0
            self.refusals += refuse
        if refuse:
            raise Refused(f"plan {self.calls} refused")
        return sw.ResidencyPlan(promote=required)


class Soak:
    def __init__(self, carriers):
        self.carriers = carriers
        self.lock = threading.Lock()
        # Per carrier and tile: every offset it committed (commutative adds:
        # the sums of subsets are what a reader may see).
        self.total = [[0.0] * GRID for _ in carriers]
        self.low = [[0.0] * GRID for _ in carriers]
        self.high = [[0.0] * GRID for _ in carriers]
        self.done = {}
        self.refused = {}
        self.errors = []

    def count(self, table, op):
        with self.lock:
            table[op] = table.get(op, 0) + 1

    def check(self, c, tiles, offsets):
        # Additions of -4..4 only: an offset lies between the lowest and
        # highest sums the tile could have reached.
        with self.lock:
            for k, off in zip(tiles, offsets):
                assert self.low[c][k] <= off <= self.high[c][k], (c, k, off)

    def run(self, seed):
        rng = random.Random(seed)
        leaves = [te.full_tensor() for te, _ in self.carriers]
        for leaf in leaves:
            leaf.requires_grad = True
        grads = [[0] * GRID for _ in self.carriers]
        for _ in range(OPS_PER_THREAD):
            c = rng.randrange(len(self.carriers))
            te, full = self.carriers[c]
            tiles = sorted(rng.sample(range(GRID), rng.randint(1, 3)))
            sel = sw.TileSelection([tiles])
            op = rng.choice(["project", "project", "update", "update", "scatter", "promote", "evict", "direct",
                             "backward"])
            try:
                if op == "project":
                    got = te.project(full, sel).wait().numpy()
                    self.check(c, tiles, offsets_of(got, tiles))
                elif op == "update":
                    deltas = [float(rng.randint(-4, 4)) for _ in tiles]
                    compact = sw.from_numpy(np.repeat(np.array(deltas, np.float32), TILE))
                    with self.lock:  # bounds widen before the update can commit
                        for k, d in zip(tiles, deltas):
                            self.low[c][k] += min(d, 0.0)
                            self.high[c][k] += max(d, 0.0)
                    try:
                        te.update_async(full, compact, sel, "add").wait()
                    except (sw.StrideWeaveRuntimeError, Refused):
                        with self.lock:
                            for k, d in zip(tiles, deltas):
                                self.low[c][k] -= min(d, 0.0)
                                self.high[c][k] -= max(d, 0.0)
                        raise
                    with self.lock:
                        for k, d in zip(tiles, deltas):
                            self.total[c][k] += d
                elif op == "scatter":
                    compact = sw.from_numpy(np.ones(len(tiles) * TILE, np.float32))
                    result = te.scatter(compact, full, sel, "add").wait()
                    back = result.carrier.project(result, sel).wait().numpy()
                    self.check(c, tiles, [o - 1.0 for o in offsets_of(back, tiles)])
                elif op in ("promote", "evict"):
                    (te.promote_async if op == "promote" else te.evict_async)(sel).wait()
                elif op == "direct":
                    got = sw.mul(full, 1.0).numpy()
                    self.check(c, list(range(GRID)), offsets_of(got, list(range(GRID))))
                else:
                    projected = te.project(leaves[c], sel).wait()
                    sw.reduce_sum(projected).backward()
                    for k in tiles:
                        grads[c][k] += 1
                    grad = leaves[c].grad.numpy().reshape(GRID, TILE)
                    assert np.all(grad == np.array(grads[c], np.float32)[:, None]), (grad, grads[c])
                self.count(self.done, op)
            except Refused:
                self.count(self.refused, op)
            except sw.StrideWeaveRuntimeError as e:
                # Overlapping requests are refused, never queued; a backward
                # whose saved tensor an update changed is refused too.
                assert any(why in str(e) for why in ("incomplete residency request", "in use by pending",
                                                     "modified in-place")), e
                self.count(self.refused, op)


@pytest.mark.parametrize("secondary", [sw.carriers.Host, sw.carriers.Zstd])
def test_threads_share_tiled_carriers(secondary):
    carriers = []
    refusing = RefusingPolicy()
    for policy in (sw.LRUPolicy(3), None, refusing):
        te = seeded_tiled(seeds(), (GRID,), (TILE,), secondary=secondary, policy=policy)
        carriers.append((te, te.full_tensor()))
    soak = Soak(carriers)
    errors = []

    def body(seed):
        try:
            soak.run(seed)
        except BaseException as e:  # reported below, on the test's thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
        assert not t.is_alive(), "a soak thread did not finish (a deadlock?)"
    if errors:
        raise errors[0]
    assert sum(soak.done.values()) > 0
    assert refusing.refusals > 0
    refusing.on = False
    # No dirty value lost: evict everything, read it back, promote it again.
    for c, (te, full) in enumerate(carriers):
        expect = seeds().reshape(GRID, TILE) + np.array(soak.total[c], np.float32)[:, None]
        te.evict(te.valid_tiles)
        np.testing.assert_array_equal(full.numpy().reshape(GRID, TILE), expect)
        for first in range(0, GRID, 3):  # within the LRU's budget of three tiles
            te.promote(sw.TileSelection([list(range(first, min(first + 3, GRID)))]))
            np.testing.assert_array_equal(full.numpy().reshape(GRID, TILE), expect)
        te.release()
    print(f"python soak: {THREADS} threads, done {soak.done}, refused {soak.refused}, "
          f"{refusing.refusals} by the policy")
