#!/usr/bin/env python3
"""How fast offloaded MoE decoding could be on this machine, whatever the
runtime did: an event model of the main job's decode (examples/python/
mixtral_offload.py) on its own routing, run under a few scheduling policies,
each against the lower bound the demo reports (max(resident compute, bytes
read / the tier's bandwidth)).

The model is deliberately generous to the decoder. One token goes through
the layers one after another (a layer's router needs the previous layer's
output); the disk reads one queue of requests at the tier's full bandwidth,
demand reads before speculative ones, with no latency and no ramp; the
compute runs each expert matrix's product in `--product-ms` as soon as its
tile is there, a layer's glue (norm, router, the call's set-up) takes
`--glue-ms`, and nothing else costs time. The cache is the demo's: an LRU of
--budget of each layer's experts (each expert's three matrices together).
The policies:

  lru          what a decoder that reads only what the router chose can do:
               the misses are read when the layer's router has chosen
  predict-h    also reads ahead, for the next layer, the experts its router
               gives for the current hidden state (the demo's predictor),
               evicting the cached expert it ranks lowest, when the guess is
               at least --min-prob likely and the victim at most --max-victim
  predict-top1 the same prediction made once the layer's top-1 expert's
               output is added to the hidden state (a better predictor, known
               only inside the layer's computation)
  oracle       reads ahead, for the next layer, its true experts (a decoder
               cannot know them): the floor of any prediction

Each prints ms per token and the ratio to its lower bound. The demo's
routing is recomputed here in PyTorch from its checkpoint and stream
(written by the demo under --dir), so the run needs the same model options.

    python3 tools/moe_floor.py [--dir results] [--product-ms 0.25] [--glue-ms 0.35]
        [--bandwidth-gbs 4.3] [the demo's model options: --layers, --hidden, ...]

Take --product-ms and --glue-ms from the demo's own figures on the machine
(its resident run's ms per token is about layers x (6 x product + glue) for
top-2) and --bandwidth-gbs from its probes (tier_bandwidth in SUMMARY_JSON).
Ends with one SUMMARY_JSON line.
"""
import argparse
import collections
import importlib.util
import itertools
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
MATRICES = ("w1", "w3", "w2")


def load_demo():
    path = ROOT / "examples" / "python" / "mixtral_offload.py"
    spec = importlib.util.spec_from_file_location("mixtral_offload", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def routing(demo, o):
    """Per token (warm-up tokens first, as the demo decodes them), per layer:
    the chosen experts in top-k order, and the next layer's router
    probabilities from the current hidden state ("h") and from it plus the
    top-1 expert's gated output ("top1")."""
    import torch
    import torch.nn.functional as F

    path = os.path.join(o.dir, f"mixtral-{o.layers}x{o.experts}-{o.hidden}-{o.ffn}-{o.dtype}.safetensors")
    if not os.path.exists(path):
        sys.exit(f"moe_floor: no checkpoint {path}; run the demo with the same options first")
    shared = demo.Shared(o, path)
    stream = demo.token_stream(o)
    w = shared.experts

    def probs(h, layer):
        n = demo.rms_norm(h, shared.norms[layer])
        return torch.softmax(F.linear(n, shared.gates[layer]).float(), -1)[0].tolist()

    tokens = list(range(min(o.warmup, o.tokens))) + list(range(o.tokens))
    out = []
    with torch.no_grad():
        for t in tokens:
            h = stream[t:t + 1]
            per = []
            for layer in range(o.layers):
                n = demo.rms_norm(h, shared.norms[layer])
                ids, gates = demo.route(n, shared.gates[layer], o.topk)
                ys = []
                for j in range(o.topk):
                    e = int(ids[0, j])
                    a = F.linear(n, w[demo.expert_name(layer, e, "w1")])
                    b = F.linear(n, w[demo.expert_name(layer, e, "w3")])
                    ys.append(F.linear(F.silu(a) * b, w[demo.expert_name(layer, e, "w2")]))
                y = torch.stack(ys, 1)
                nxt = layer + 1 < o.layers
                top1 = h + (gates[:, :1, None] * y[:, :1].float()).sum(1).to(h.dtype)
                per.append({"ids": [int(e) for e in ids[0]],
                            "h": probs(h, layer + 1) if nxt else None,
                            "top1": probs(top1, layer + 1) if nxt else None})
                h = h + demo.gated_sum(y, gates)
            out.append(per)
    return out, min(o.warmup, o.tokens)


class Disk:
    """One queue of tile reads at `bandwidth` bytes per ms, demand before
    speculation, in chunks (a speculative read yields between chunks)."""

    def __init__(self, bandwidth, tile, chunks=5):
        self.bandwidth, self.tile, self.chunks = bandwidth, tile, chunks
        self.t = 0.0
        self.demand, self.spec = collections.deque(), collections.deque()
        self.done = {}
        self.bytes = 0

    def issue(self, key, now, spec):
        self.advance(now)
        self.done.pop(key, None)
        (self.spec if spec else self.demand).append([key, self.chunks])
        self.bytes += self.tile

    def _queued(self, key):
        return any(item[0] == key for item in itertools.chain(self.demand, self.spec))

    def pending(self, key):
        return key not in self.done and self._queued(key)

    def urgent(self, key):
        for item in list(self.spec):
            if item[0] == key:
                self.spec.remove(item)
                self.demand.append(item)

    def cancel(self, key):
        for queue in (self.demand, self.spec):
            for item in list(queue):
                if item[0] == key:
                    queue.remove(item)
                    self.bytes -= item[1] * self.tile // self.chunks

    def _step(self):
        queue = self.demand if self.demand else self.spec
        item = queue[0]
        self.t += self.tile / self.chunks / self.bandwidth
        item[1] -= 1
        if item[1] == 0:
            queue.popleft()
            self.done[item[0]] = self.t

    def advance(self, now):
        while (self.demand or self.spec) and self.t < now:
            self._step()
        if self.t < now:
            self.t = now

    def wait(self, key, now):
        self.advance(now)
        if key not in self.done:
            self.urgent(key)
            while key not in self.done:
                self._step()
        return max(now, self.done[key])


def simulate(o, route, warm, policy, product_ms, glue_ms, bandwidth, min_prob=0.0, max_victim=1.0):
    L, E, K = o.layers, o.experts, o.topk
    cap = max(1, round(o.budget * E))
    tile = o.hidden * o.ffn * (2 if o.dtype == "bf16" else 4)
    disk = Disk(bandwidth, tile)
    cache = [dict() for _ in range(L)]  # expert -> last use (its three matrices together)
    stamp = itertools.count(1)
    now = start = 0.0
    hits = uses = 0
    bytes0 = 0

    def speculate(i, layer, probs):
        """Reads ahead the next layer's likeliest experts, each evicting the
        cached expert the prediction ranks lowest."""
        nxt = layer + 1
        if policy == "oracle":
            probs = [1.0 if e in route[i][nxt]["ids"] else 0.0 for e in range(E)]
        ranked = sorted(range(E), key=lambda e: -probs[e])
        for p in ranked[:K]:
            if p in cache[nxt] or probs[p] < min_prob:
                continue
            if len(cache[nxt]) >= cap:
                victims = [e for e in cache[nxt] if e not in ranked[:K]]
                if not victims:
                    return
                v = min(victims, key=lambda e: probs[e])
                if probs[v] > max_victim:
                    continue
                del cache[nxt][v]
                for m in MATRICES:
                    disk.cancel((nxt, v, m))
            for m in MATRICES:
                disk.issue((nxt, p, m), now, spec=True)
            cache[nxt][p] = 0  # the least recently used until a layer uses it

    for i, per in enumerate(route):
        if i == warm:
            disk.advance(now)
            start, bytes0, hits, uses = now, disk.bytes, 0, 0
        for layer in range(L):
            ids = per[layer]["ids"]
            now += glue_ms
            for e in ids:  # hits, including experts read ahead (still loading or not)
                uses += 1
                if e in cache[layer]:
                    hits += 1
                    cache[layer][e] = next(stamp)
            for e in ids:  # misses: read now, the least recently used evicted
                if e in cache[layer]:
                    continue
                while len(cache[layer]) >= cap:
                    v = min((x for x in cache[layer] if x not in ids), key=lambda x: cache[layer][x])
                    del cache[layer][v]
                    for m in MATRICES:
                        disk.cancel((layer, v, m))
                for m in MATRICES:
                    disk.issue((layer, e, m), now, spec=False)
                cache[layer][e] = next(stamp)
            for e in ids:  # a read ahead the layer now needs goes before any other guess
                for m in MATRICES:
                    disk.urgent((layer, e, m))
            if policy in ("predict-h", "oracle") and layer + 1 < L:
                speculate(i, layer, per[layer]["h"])
            # Each expert's products as its tiles are there, the expert ready first first.
            order = sorted(range(K), key=lambda j: (disk.pending((layer, ids[j], "w1")), j))
            for n_done, j in enumerate(order):
                e = ids[j]
                for m in MATRICES:
                    if disk.pending((layer, e, m)):
                        now = disk.wait((layer, e, m), now)
                    now += product_ms
                if n_done == 0 and policy == "predict-top1" and layer + 1 < L:
                    speculate(i, layer, per[layer]["top1" if j == 0 else "h"])
    disk.advance(now)
    tokens = len(route) - warm
    ms = (now - start) / tokens
    compute = L * (glue_ms + K * 3 * product_ms)
    transfer = (disk.bytes - bytes0) / bandwidth / tokens
    bound = max(compute, transfer)
    return {"ms_per_token": ms, "bound_ms": bound, "ratio": ms / bound, "hit_rate": hits / uses,
            "mib_per_token": (disk.bytes - bytes0) / 2**20 / tokens}


def main(argv=None):
    demo = load_demo()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--product-ms", type=float, default=0.25,
                   help="ms of one expert matrix's product for one token (default 0.25)")
    p.add_argument("--glue-ms", type=float, default=0.35, help="ms of a layer's glue (default 0.35)")
    p.add_argument("--bandwidth-gbs", type=float, default=4.3, help="the tier's read bandwidth, GB/s (default 4.3)")
    p.add_argument("--min-prob", type=float, default=0.2)
    p.add_argument("--max-victim", type=float, default=0.2)
    ours, rest = p.parse_known_args(argv)
    o = demo.parse(rest)
    route, warm = routing(demo, o)
    bandwidth = ours.bandwidth_gbs * 1e6  # bytes per ms
    results = {}
    print(f"moe_floor: {o.layers} layers x {o.experts} experts (top-{o.topk}), hidden {o.hidden}, ffn {o.ffn}, "
          f"{o.dtype}, budget {100 * o.budget:.1f}%, {o.tokens} tokens; product {ours.product_ms} ms, glue "
          f"{ours.glue_ms} ms, tier {ours.bandwidth_gbs} GB/s")
    for policy in ("lru", "predict-h", "predict-top1", "oracle"):
        r = simulate(o, route, warm, policy, ours.product_ms, ours.glue_ms, bandwidth, ours.min_prob,
                     ours.max_victim)
        results[policy] = r
        print(f"  {policy:13s} {r['ms_per_token']:7.2f} ms per token, {r['ratio']:.2f}x its bound "
              f"{r['bound_ms']:.2f} ms; hit rate {100 * r['hit_rate']:.1f}%, "
              f"{r['mib_per_token']:.1f} MiB read per token")
    print("SUMMARY_JSON " + json.dumps({"config": {"layers": o.layers, "experts": o.experts, "hidden": o.hidden,
                                                   "ffn": o.ffn, "dtype": o.dtype, "budget": o.budget,
                                                   "tokens": o.tokens, "product_ms": ours.product_ms,
                                                   "glue_ms": ours.glue_ms, "bandwidth_gbs": ours.bandwidth_gbs},
                                        "policies": results}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
