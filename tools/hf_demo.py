#!/usr/bin/env python3
"""The main demo: a Hugging Face Mixtral checkpoint run inside transformers 5
with its routed experts left in the checkpoint files (strideweave.hf), against
what a transformers user has instead, each in a fresh process under the same
memory.

    python3 tools/hf_demo.py [--dir results] [--tokens 32] [--slow-tokens 32]
        [--budget 0.25] [--runs resident,strideweave,...] [--no-limit]
        [--limit-mib M] [--threads N] [--seed 0]

1. The checkpoint. Written once with transformers under DIR/hf-mixtral-...
   (DIR: --dir, else $SW_RESULTS, else results/) and reused while its stamp
   (geometry, seed, every file's size) matches: MixtralConfig with 8 layers,
   hidden 1024, 8 experts of intermediate 2816, top-2, 16 attention heads (4
   of keys and values), vocabulary 32000, untied lm_head, bf16: 1056 MiB of
   routed experts and 165 MiB of everything else. The model is built on the
   meta device, its parameters filled tensor by tensor from one seeded
   generator (N(0, 1/fan_in), embeddings N(0, 1), norms 1) and saved with
   save_pretrained(max_shard_size="200MB"): seven shards in the Hub's
   per-expert layout (block_sparse_moe.experts.{j}.w1/w2/w3).

2. The runs, one after another, each in a fresh process, all decoding the same
   fixed prompt (16 token ids drawn from the seed) with transformers'
   generate(do_sample=False, eos_token_id=None) for --tokens new tokens
   (--slow-tokens for accelerate):

   resident     transformers' from_pretrained, every weight in memory: the
                ceiling and the correctness reference. Not memory-limited.
   strideweave  strideweave.hf.from_pretrained(budget=0.25, tier="direct"):
                2 of each layer's 8 experts kept (LRU), the rest read from the
                shards with O_DIRECT as the router asks for them.
   strideweave+prefetch   the same with prefetch=True.
   accelerate   from_pretrained(device_map="auto", max_memory={"cpu": non-expert
                bytes + 25 % of the experts}, offload_folder=...): accelerate's
                disk offload as a transformers user sets it up; transformers 5
                re-saves the offloaded (fused) weights into the folder and
                accelerate's hooks load each offloaded layer's weights from
                it at every forward. hf_device_map's "disk" entries are shown.
   naive        the same transformers model with the experts module's forward
                replaced (transformers.integrations.moe.ALL_EXPERTS_FUNCTIONS,
                config._experts_implementation) by one that reads each chosen
                expert's w1, w3, w2 from the shards with O_DIRECT preads into
                reused buffers, computes it with torch (transformers' eager
                expert code) and drops it.
   mmap         the experts as torch views of an mmap of the shards, computed
                by the same per-expert code: the page cache decides what stays
                (llama.cpp's default).

   Every run but resident runs in a memory cgroup (v1: memory.limit_in_bytes;
   page cache counts against it) limited to non-expert bytes + the 25 % expert
   budget + the top-k experts one call reads (held until its evictions
   commit) + a measured slack: the peak RSS of a process that imported torch,
   transformers and strideweave and built the model skeleton on the meta
   device, plus strideweave.hf.MEMORY_SLACK_BYTES (the working memory a
   generation needs: KV cache, activations, read buffers). Where no memory
   cgroup can be made (cgroup v2 without a delegated memory controller, no
   permission) the runs are unlimited and the table says so. (A cgroup is
   charged less than that RSS for the interpreter: the library pages cached
   before it are charged elsewhere. The difference, about 320 MiB here, is
   room for cached file pages that mmap and accelerate can use and
   StrideWeave's direct reads do not; the demo prints it.) The resident run
   has a cgroup without a limit, for its figures. The checkpoint's
   pages are dropped from the page cache (posix_fadvise DONTNEED) before each
   run.

3. A table with a legend, a SUMMARY_JSON {...} line, DIR/hf_demo.csv and
   DIR/hf_demo.png.

The old stack-of-blocks demo is examples/python/mixtral_offload.py (its
benchmark: tools/bench/bench_moe_decode.py).
"""
import argparse
import json
import math
import os
import pathlib
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]

GEOMETRY: dict[str, Any] = {"vocab": 32000, "hidden": 1024, "ffn": 2816, "layers": 8, "experts": 8, "top_k": 2,
                            "heads": 16, "kv_heads": 4, "dtype": "bfloat16", "max_shard_size": "200MB", "format": 1}
if os.environ.get("SW_HF_DEMO_TINY"):
    # A small model for the test suite's run of the whole demo (tests/python/test_hf_demo.py).
    GEOMETRY = dict(GEOMETRY, vocab=512, hidden=128, ffn=256, layers=2, experts=4, heads=4, kv_heads=2,
                    max_shard_size="1MB")
PROMPT_LEN = 16
STAMP = "hf_demo_stamp.json"
RUNS = ("resident", "strideweave", "strideweave+prefetch", "naive", "mmap", "accelerate")
SLOW_RUNS = ("accelerate",)
LIMITED_RUNS = ("strideweave", "strideweave+prefetch", "naive", "mmap", "accelerate")
NAIVE_IMPL, MMAP_IMPL = "demo_naive_odirect", "demo_mmap"


def log(msg):
    print(f"[hf_demo {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def mib(n):
    return None if n is None else n / (1 << 20)


# ---- /proc ---------------------------------------------------------------------------------------------------

def proc_status(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def read_bytes():
    """Bytes the kernel read from storage for this process (reads and page
    faults, not what the page cache served)."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def maxrss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def drop_page_cache(paths):
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# ---- the checkpoint ------------------------------------------------------------------------------------------

def checkpoint_dir(results, seed):
    g = GEOMETRY
    return pathlib.Path(results) / (f"hf-mixtral-{g['layers']}L-{g['experts']}x{g['hidden']}x{g['ffn']}-"
                                    f"{g['dtype']}-seed{seed}")


def stamp_of(seed):
    return {"geometry": GEOMETRY, "seed": seed}


def checkpoint_complete(path, seed):
    try:
        with open(path / STAMP) as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return False
    if {k: stamp.get(k) for k in ("geometry", "seed")} != stamp_of(seed):
        return False
    files = stamp.get("files") or {}
    return bool(files) and all((path / n).is_file() and (path / n).stat().st_size == s for n, s in files.items())


def mixtral_config(transformers):
    g = GEOMETRY
    return transformers.MixtralConfig(
        vocab_size=g["vocab"], hidden_size=g["hidden"], intermediate_size=g["ffn"], num_hidden_layers=g["layers"],
        num_attention_heads=g["heads"], num_key_value_heads=g["kv_heads"], num_local_experts=g["experts"],
        num_experts_per_tok=g["top_k"], max_position_embeddings=4096, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, dtype=g["dtype"])


def write_checkpoint(path, seed):
    """The demo's Mixtral checkpoint, written with transformers."""
    import torch
    import transformers

    transformers.utils.logging.set_verbosity_error()
    t0 = time.perf_counter()
    config = mixtral_config(transformers)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    params = list(model.named_parameters())
    total = sum(p.numel() for _, p in params)
    log(f"writing the checkpoint: {type(model).__name__}, {total / 1e6:.0f} M parameters "
        f"({total * 2 / (1 << 20):.0f} MiB bf16) into {path}")
    g = torch.Generator().manual_seed(seed)
    done, next_report = 0, 0.0
    for name, p in params:
        owner_name, _, attr = name.rpartition(".")
        owner = model.get_submodule(owner_name)
        if p.dim() == 1:
            value = torch.ones(p.shape, dtype=torch.bfloat16)
        else:
            std = 1.0 if name.endswith("embed_tokens.weight") else 1.0 / math.sqrt(p.shape[-1])
            value = torch.empty(p.shape, dtype=torch.float32).normal_(0.0, std, generator=g).to(torch.bfloat16)
        owner._parameters[attr] = torch.nn.Parameter(value, requires_grad=False)
        done += p.numel()
        if done / total >= next_report:
            log(f"  filled {100 * done / total:3.0f} % of the weights ({time.perf_counter() - t0:.0f} s)")
            next_report += 0.25
    partial = path.with_name(path.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(path, ignore_errors=True)
    log("  saving with save_pretrained ...")
    model.save_pretrained(partial, max_shard_size=GEOMETRY["max_shard_size"])
    del model, params
    os.sync()
    files = {p.name: p.stat().st_size for p in sorted(partial.iterdir()) if p.is_file()}
    with open(partial / STAMP, "w") as f:
        json.dump(dict(stamp_of(seed), files=files), f, indent=1)
    os.replace(partial, path)
    size = sum(files.values())
    log(f"  checkpoint written: {len([n for n in files if n.endswith('.safetensors')])} shards, "
        f"{size / (1 << 20):.0f} MiB, in {time.perf_counter() - t0:.0f} s")


def checkpoint_sizes(path):
    """(expert bytes, non-expert bytes, shard paths) from the shards' headers."""
    from_index = json.loads((path / "model.safetensors.index.json").read_text())["weight_map"]
    shards = sorted({path / v for v in from_index.values()})
    expert = other = 0
    for shard in shards:
        with open(shard, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
        for k, v in header.items():
            if k == "__metadata__":
                continue
            size = v["data_offsets"][1] - v["data_offsets"][0]
            if ".experts." in k:
                expert += size
            else:
                other += size
    return expert, other, shards


def inflight_bytes(expert_bytes):
    """What one experts call may hold beyond the budget (docs/transformers.md):
    the tiles of the top-k experts it reads, kept until its evictions commit
    with it."""
    g = GEOMETRY
    return expert_bytes // (g["layers"] * g["experts"]) * g["top_k"]


def prompt_ids(seed):
    import random

    r = random.Random(seed + 1)
    return [1] + [r.randrange(3, GEOMETRY["vocab"]) for _ in range(PROMPT_LEN - 1)]


# ---- memory cgroups ------------------------------------------------------------------------------------------

class MemoryCgroups:
    """Makes one memory cgroup per run under this process's own (cgroup v1's
    memory controller, or v2's where it is delegated); `available` False
    with `why` otherwise."""

    def __init__(self):
        self.available, self.version, self.base, self.why = False, None, None, ""
        v1 = pathlib.Path("/sys/fs/cgroup/memory")
        if (v1 / "memory.limit_in_bytes").exists():
            rel = "/"
            try:
                for line in pathlib.Path("/proc/self/cgroup").read_text().splitlines():
                    _, controllers, p = line.split(":", 2)
                    if "memory" in controllers.split(","):
                        rel = p
            except OSError:
                pass
            self._probe(1, v1 / rel.lstrip("/"))
        elif pathlib.Path("/sys/fs/cgroup/cgroup.controllers").exists():
            rel = "/"
            try:
                for line in pathlib.Path("/proc/self/cgroup").read_text().splitlines():
                    if line.startswith("0::"):
                        rel = line[3:]
            except OSError:
                pass
            base = pathlib.Path("/sys/fs/cgroup") / rel.lstrip("/")
            try:
                enabled = (base / "cgroup.subtree_control").read_text().split()
            except OSError:
                enabled = []
            if "memory" not in enabled:
                self.why = (f"cgroup v2 without the memory controller delegated to {base} "
                            f"(cgroup.subtree_control: {' '.join(enabled) or 'empty'})")
            else:
                self._probe(2, base)
        else:
            self.why = "no memory cgroup controller mounted"

    def _probe(self, version, base):
        probe = base / f"strideweave-hf-demo-probe-{os.getpid()}"
        try:
            probe.mkdir()
            try:
                (probe / ("memory.limit_in_bytes" if version == 1 else "memory.max")).write_text(str(1 << 30))
            finally:
                probe.rmdir()
        except OSError as e:
            self.why = f"cannot make a memory cgroup under {base}: {e.strerror}"
            return
        self.available, self.version, self.base = True, version, base

    def make(self, name, limit):
        assert self.base is not None  # made only once available
        path = self.base / f"strideweave-hf-demo-{os.getpid()}-{name.replace('+', '-')}"
        if path.exists():
            path.rmdir()
        path.mkdir()
        if limit is None:
            pass
        elif self.version == 1:
            (path / "memory.limit_in_bytes").write_text(str(limit))
        else:
            (path / "memory.max").write_text(str(limit))
            try:
                (path / "memory.swap.max").write_text("0")
            except OSError:
                pass
        return path

    def finish(self, path):
        """{peak, failcnt, oom_kills} of the group, then removes it."""
        out = {}
        try:
            if self.version == 1:
                out["peak"] = int((path / "memory.max_usage_in_bytes").read_text())
                out["failcnt"] = int((path / "memory.failcnt").read_text())
                for line in (path / "memory.oom_control").read_text().splitlines():
                    if line.startswith("oom_kill "):
                        out["oom_kills"] = int(line.split()[1])
            else:
                peak = path / "memory.peak"
                if peak.exists():
                    out["peak"] = int(peak.read_text())
                for line in (path / "memory.events").read_text().splitlines():
                    k, v = line.split()
                    if k == "oom_kill":
                        out["oom_kills"] = int(v)
                    if k == "max":
                        out["failcnt"] = int(v)
        except (OSError, ValueError):
            pass
        for _ in range(50):
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)
        return out


def join_cgroup(path):
    """Moves this process into the cgroup (before it imports anything big)."""
    with open(os.path.join(path, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))


# ---- the peers' experts (worker side) -----------------------------------------------------------------------

def expert_entries(ckpt_dir, layers, experts):
    """{(layer, expert, "w1"|"w2"|"w3"): (path, offset, nbytes, shape)} from the shards' headers."""
    weight_map = json.loads((ckpt_dir / "model.safetensors.index.json").read_text())["weight_map"]
    headers = {}
    out = {}
    for layer in range(layers):
        for e in range(experts):
            for w in ("w1", "w2", "w3"):
                key = f"model.layers.{layer}.block_sparse_moe.experts.{e}.{w}.weight"
                shard = ckpt_dir / weight_map[key]
                if shard not in headers:
                    with open(shard, "rb") as f:
                        n = int.from_bytes(f.read(8), "little")
                        headers[shard] = (8 + n, json.loads(f.read(n)))
                base, header = headers[shard]
                info = header[key]
                if info["dtype"] != "BF16":
                    raise ValueError(f"{shard}: {key} is {info['dtype']}, the demo's peers read BF16")
                begin, end = info["data_offsets"]
                out[(layer, e, w)] = (str(shard), base + begin, end - begin, tuple(info["shape"]))
    return out


class PeerTimer:
    __slots__ = ("read_s", "compute_s")

    def __init__(self):
        self.read_s = self.compute_s = 0.0


def compute_expert(torch, act, x, w1, w3, w2):
    """transformers' eager expert: w2(act(w1 x) * w3 x)."""
    F = torch.nn.functional
    return F.linear(act(F.linear(x, w1)) * F.linear(x, w3), w2)


def experts_loop(torch, module, hidden_states, top_k_index, top_k_weights, get):
    """transformers' eager experts loop over the chosen experts; get(e)
    returns (w1, w3, w2) of expert e of the module's layer."""
    timer = module._demo_timer
    final = torch.zeros_like(hidden_states)
    chosen = sorted(set(top_k_index.reshape(-1).tolist()))
    for e in chosen:
        token_idx, top_k_pos = torch.where(top_k_index == e)
        t0 = time.perf_counter()
        w1, w3, w2 = get(e)
        t1 = time.perf_counter()
        y = compute_expert(torch, module.act_fn, hidden_states[token_idx], w1, w3, w2)
        y = y * top_k_weights[token_idx, top_k_pos, None]
        final.index_add_(0, token_idx, y.to(final.dtype))
        t2 = time.perf_counter()
        timer.read_s += t1 - t0
        timer.compute_s += t2 - t1
    return final


class NaiveReader:
    """Reads one expert matrix at a time from the shards with O_DIRECT preads
    (plain reads and POSIX_FADV_DONTNEED where O_DIRECT is refused) into a
    reused page-aligned buffer per matrix kind."""

    def __init__(self, entries):
        import mmap

        self.entries = entries
        self.fds = {}
        self.direct = True
        biggest = max(n for _, _, n, _ in entries.values())
        self.bufs = {w: mmap.mmap(-1, biggest + 2 * 4096) for w in ("w1", "w2", "w3")}

    def _fd(self, path):
        fd = self.fds.get(path)
        if fd is None:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            except OSError:
                fd = os.open(path, os.O_RDONLY)
                self.direct = False
            self.fds[path] = fd
        return fd

    def read(self, torch, layer, e, w):
        path, offset, n, shape = self.entries[(layer, e, w)]
        fd = self._fd(path)
        start = offset & ~4095
        end = (offset + n + 4095) & ~4095
        buf = self.bufs[w]
        view = memoryview(buf)[:end - start]
        got = 0
        while got < offset + n - start:
            k = os.preadv(fd, [view[got:]], start + got)
            if k <= 0:
                raise OSError(f"{path}: short read at {start + got}")
            got += k
        if not self.direct:
            os.posix_fadvise(fd, start, end - start, os.POSIX_FADV_DONTNEED)
        return torch.frombuffer(buf, dtype=torch.bfloat16, count=n // 2, offset=offset - start).view(shape)


def naive_forward(module, hidden_states, top_k_index, top_k_weights):
    import torch

    reader, layer = module._demo_reader, module._demo_layer
    return experts_loop(torch, module, hidden_states, top_k_index, top_k_weights,
                        lambda e: tuple(reader.read(torch, layer, e, w) for w in ("w1", "w3", "w2")))


def mmap_forward(module, hidden_states, top_k_index, top_k_weights):
    import torch

    views = module._demo_views
    return experts_loop(torch, module, hidden_states, top_k_index, top_k_weights, lambda e: views[e])


def load_peer_model(torch, transformers, ckpt_dir, kind):
    """The transformers model with every weight but the experts loaded from
    the shards (safetensors' safe_open), and the experts module's forward
    replaced through transformers' experts interface."""
    import mmap

    from accelerate import init_empty_weights
    from safetensors import safe_open
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    config = transformers.AutoConfig.from_pretrained(ckpt_dir)
    with init_empty_weights(include_buffers=False):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.eval()
    weight_map = json.loads((ckpt_dir / "model.safetensors.index.json").read_text())["weight_map"]
    params = dict(model.named_parameters())
    by_shard: dict[str, list[str]] = {}
    for key, shard in weight_map.items():
        if ".experts." not in key:
            by_shard.setdefault(shard, []).append(key)
    for shard, keys in sorted(by_shard.items()):
        with safe_open(str(ckpt_dir / shard), framework="pt") as f:
            for key in keys:
                name = key.replace(".block_sparse_moe.", ".mlp.")
                value = f.get_tensor(key).to(torch.bfloat16).clone()
                owner_name, _, attr = name.rpartition(".")
                owner = model.get_submodule(owner_name)
                if tuple(params[name].shape) != tuple(value.shape):
                    raise ValueError(f"{key}: shape {tuple(value.shape)}, the model expects "
                                     f"{tuple(params[name].shape)}")
                owner._parameters[attr] = torch.nn.Parameter(value, requires_grad=False)
    g = GEOMETRY
    entries = expert_entries(ckpt_dir, g["layers"], g["experts"])
    ALL_EXPERTS_FUNCTIONS.register(NAIVE_IMPL, naive_forward)
    ALL_EXPERTS_FUNCTIONS.register(MMAP_IMPL, mmap_forward)
    reader = NaiveReader(entries) if kind == "naive" else None
    maps = {}
    timer = PeerTimer()
    for layer, block in enumerate(model.model.layers):
        experts = block.mlp.experts
        del experts._parameters["gate_up_proj"]
        del experts._parameters["down_proj"]
        experts._demo_layer, experts._demo_timer = layer, timer
        if kind == "naive":
            experts._demo_reader = reader
        else:
            views = []
            for e in range(g["experts"]):
                mats = []
                for w in ("w1", "w3", "w2"):
                    path, offset, n, shape = entries[(layer, e, w)]
                    if path not in maps:
                        with open(path, "rb") as fh:
                            # MAP_PRIVATE; only read, so every page stays the page cache's
                            maps[path] = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
                    mats.append(torch.frombuffer(maps[path], dtype=torch.bfloat16, count=n // 2,
                                                 offset=offset).view(shape))
                views.append(tuple(mats))
            experts._demo_views = views
    config._experts_implementation = NAIVE_IMPL if kind == "naive" else MMAP_IMPL
    left = [n for n, p in model.named_parameters() if p.is_meta]
    if left:
        raise ValueError(f"weights left on meta: {left[:3]}")
    model._demo_timer = timer
    model._demo_reader = reader
    return model


# ---- the worker ----------------------------------------------------------------------------------------------

def worker(o):
    spec = json.loads(pathlib.Path(o.spec).read_text())
    if spec.get("cgroup"):
        join_cgroup(spec["cgroup"])
    t_start = time.perf_counter()
    io_start = read_bytes()
    kind = spec["kind"]
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import torch
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    if kind.startswith("strideweave") or kind == "baseline":
        import strideweave.hf as swhf
    ckpt_dir = pathlib.Path(spec["checkpoint"])
    out = {"kind": kind, "torch_threads": torch.get_num_threads()}
    if kind == "baseline":
        config = transformers.AutoConfig.from_pretrained(ckpt_dir)
        with torch.device("meta"):
            transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        out.update(rss=proc_status("VmRSS"), hwm=proc_status("VmHWM"), maxrss=maxrss(),
                   memory_slack_bytes=swhf.MEMORY_SLACK_BYTES)
        pathlib.Path(spec["out"]).write_text(json.dumps(out))
        return 0
    print(f"    loading ({kind}) ...", file=sys.stderr, flush=True)
    rss_before_load = proc_status("VmRSS")
    maxrss_before_load = maxrss()  # as tests/python/test_hf.py measures the bound: from the peak after imports
    t_load0 = time.perf_counter()
    io_load0 = read_bytes()
    if kind == "resident":
        model = transformers.AutoModelForCausalLM.from_pretrained(ckpt_dir, dtype=torch.bfloat16)
    elif kind.startswith("strideweave"):
        rt = None
        if spec.get("threads"):
            import strideweave as sw

            rt = sw.Runtime(compute_threads=spec["threads"])
        model = swhf.from_pretrained(ckpt_dir, budget=spec["budget"], tier="direct",
                                     prefetch=True if kind.endswith("prefetch") else None, runtime=rt)
    elif kind == "accelerate":
        model = transformers.AutoModelForCausalLM.from_pretrained(
            ckpt_dir, device_map="auto", max_memory={"cpu": spec["accelerate_cpu_bytes"]},
            offload_folder=spec["offload_folder"], dtype=torch.bfloat16)
        device_map = getattr(model, "hf_device_map")  # set by accelerate's dispatch, not a declared attribute
        devices: dict[str, int] = {}
        for _, d in device_map.items():
            devices[str(d)] = devices.get(str(d), 0) + 1
        out["device_map"] = {k: str(v) for k, v in device_map.items()}
        out["device_counts"] = devices
        folder = pathlib.Path(spec["offload_folder"])
        out["offload_folder_bytes"] = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        out["offload_folder_files"] = len([p for p in folder.rglob("*") if p.is_file()])
    elif kind in ("naive", "mmap"):
        model = load_peer_model(torch, transformers, ckpt_dir, kind)
        if kind == "naive":
            out["naive_o_direct"] = True
    else:
        raise ValueError(kind)
    model.eval()
    out["experts_implementation"] = getattr(model.config, "_experts_implementation", None)
    out["load_s"] = time.perf_counter() - t_load0
    out["load_read_bytes"] = read_bytes() - io_load0
    out["rss_before_load"] = rss_before_load
    out["maxrss_before_load"] = maxrss_before_load
    out["rss_after_load"] = proc_status("VmRSS")
    print(f"    loaded in {out['load_s']:.1f} s, RSS {mib(out['rss_after_load']):.0f} MiB", file=sys.stderr, flush=True)

    # Time spent in the experts modules' calls.
    expert_time = [0.0]
    starts = {}

    def pre(mod, args, kwargs=None):
        starts[id(mod)] = time.perf_counter()

    def post(mod, args, *rest):
        expert_time[0] += time.perf_counter() - starts.pop(id(mod), time.perf_counter())

    for name, mod in model.named_modules():
        if name.endswith("mlp.experts"):
            mod.register_forward_pre_hook(pre)
            mod.register_forward_hook(post)

    n_new = spec["tokens"]
    stamps = []

    class Streamer:
        def put(self, value):
            stamps.append((time.perf_counter(), read_bytes(), expert_time[0], proc_status("VmRSS")))
            k = len(stamps) - 1
            if k and (k == 1 or k % 8 == 0 or k == n_new):
                print(f"    token {k}/{n_new}: {stamps[-1][0] - stamps[0][0]:.1f} s", file=sys.stderr, flush=True)

        def end(self):
            pass

    batch = spec.get("batch", 1)
    prompt = torch.tensor([spec["prompt"]] + spec.get("more_prompts", [])[:batch - 1])
    with torch.no_grad():
        t0 = time.perf_counter()
        res = model.generate(prompt, do_sample=False, max_new_tokens=n_new, min_new_tokens=n_new, eos_token_id=None,
                             pad_token_id=0, streamer=Streamer(), output_scores=True, return_dict_in_generate=True)
        t_end = time.perf_counter()
    tokens = res.sequences[0, prompt.shape[1]:].tolist()
    scores = torch.stack([s[0].float() for s in res.scores])
    top2 = scores.topk(2, dim=-1).values
    out["gaps"] = (top2[:, 0] - top2[:, 1]).tolist()
    scores_path = spec["out"] + ".scores.pt"
    torch.save(scores, scores_path)
    out["scores"] = scores_path
    # Teacher forcing: one forward over the prompt and the reference's greedy
    # tokens (the resident run's, passed to every later run; the resident
    # run forces its own), whose per-position top choices and top-2 gaps the
    # parent compares with the resident run's own forced pass: greedy tokens
    # from the first divergence on follow different prefixes, so this is
    # what checks every position on the same inputs.
    if batch == 1:
        forced = spec.get("reference_tokens") or tokens
        seq = torch.tensor([spec["prompt"] + forced[:-1]])
        with torch.no_grad():
            logits = model(seq).logits[0, len(spec["prompt"]) - 1:].float()
        top2f = logits.topk(2, dim=-1)
        out["forced_argmax"] = top2f.indices[:, 0].tolist()
        out["forced_gaps"] = (top2f.values[:, 0] - top2f.values[:, 1]).tolist()
    # stamps[0]: generate's start (the prompt), stamps[i]: token i.
    t_first = stamps[1][0]
    out.update(tokens=tokens, n_tokens=len(tokens), ttft_s=t_first - t0, total_s=t_end - t0,
               decode_s=stamps[-1][0] - t_first)
    out["decode_tps"] = (len(stamps) - 2) / out["decode_s"] if len(stamps) > 2 and out["decode_s"] > 0 else None
    out["batch"] = batch
    out["aggregate_tps"] = None if out["decode_tps"] is None else batch * out["decode_tps"]
    out["decode_read_bytes"] = stamps[-1][1] - stamps[1][1]
    out["prefill_read_bytes"] = stamps[1][1] - stamps[0][1]
    out["gen_read_bytes"] = stamps[-1][1] - stamps[0][1]
    out["decode_expert_s"] = stamps[-1][2] - stamps[1][2]
    out["prefill_expert_s"] = stamps[1][2] - stamps[0][2]
    out["step_s"] = [stamps[i][0] - stamps[i - 1][0] for i in range(1, len(stamps))]
    out["step_read_bytes"] = [stamps[i][1] - stamps[i - 1][1] for i in range(1, len(stamps))]
    out["step_expert_s"] = [stamps[i][2] - stamps[i - 1][2] for i in range(1, len(stamps))]
    out["max_rss_during_gen"] = max(s[3] for s in stamps)
    if kind.startswith("strideweave"):
        st = swhf.stats(model)
        out["sw_stats"] = st["total"]
        out["sw_layers"] = st["layers"]
        out["memory_slack_bytes"] = swhf.MEMORY_SLACK_BYTES
        swhf.release(model)
    timer = getattr(model, "_demo_timer", None)
    if timer is not None:
        out["peer_read_s"], out["peer_compute_s"] = timer.read_s, timer.compute_s
        if kind == "naive":
            out["naive_o_direct"] = getattr(model, "_demo_reader").direct
    out["read_bytes"] = read_bytes() - io_start
    out["wall_s"] = time.perf_counter() - t_start
    out["maxrss"] = maxrss()
    out["hwm"] = proc_status("VmHWM")
    pathlib.Path(spec["out"]).write_text(json.dumps(out))
    return 0


# ---- the parent ----------------------------------------------------------------------------------------------

def run_worker(kind, spec, workdir, cgroups=None, limit=None, env=None, label=None):
    spec = dict(spec, kind=kind)
    label = label or kind
    out_path = workdir / f"{label.replace('+', '-')}.json"
    spec["out"] = str(out_path)
    group = None
    if cgroups is not None:
        group = cgroups.make(label, limit)
        spec["cgroup"] = str(group)
    spec_path = workdir / f"{label.replace('+', '-')}.spec.json"
    spec_path.write_text(json.dumps(spec))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(pathlib.Path(__file__).resolve()), "--worker", "--spec",
                             str(spec_path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None  # a pipe
    lines = []
    for line in proc.stdout:  # the worker's progress lines, as they come
        lines.append(line)
        if line.startswith("    "):
            print(line, end="", file=sys.stderr, flush=True)
    returncode = proc.wait()
    wall = time.perf_counter() - t0
    cg = cgroups.finish(group) if group is not None else {}
    if returncode == 0 and out_path.exists():
        result = json.loads(out_path.read_text())
    else:
        if returncode < 0:
            why = f"killed by signal {signal.Signals(-returncode).name}"
            if cg.get("oom_kills"):
                why += " (out of memory: the cgroup's OOM killer)"
        else:
            why = f"exit status {returncode}"
        tail = "".join(lines[-15:])
        log(f"  {kind} failed: {why}\n{tail}")
        result = {"kind": kind, "failed": why}
    result["process_wall_s"] = wall
    result["cgroup"] = cg
    result["log"] = "".join(lines)
    return result


def first_divergence(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None


def fmt(v, spec, none="-"):
    if v is None:
        return none
    return format(v, spec)


def pct(v):
    return "-" if v is None else f"{100 * v:.0f}%"


def blank(v):
    return "" if v is None else v


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", default=os.environ.get("SW_RESULTS", "results"), help="results directory (default "
                   "$SW_RESULTS or results/)")
    p.add_argument("--tokens", type=int, default=32, help="new tokens each run generates (default 32)")
    p.add_argument("--slow-tokens", type=int, default=32,
                   help="new tokens for accelerate's disk offload, the slowest run (default 32, at most --tokens)")
    p.add_argument("--budget", type=float, default=0.25, help="fraction of each layer's experts kept (default 0.25)")
    p.add_argument("--runs", default=",".join(RUNS), help=f"runs to make (default {','.join(RUNS)})")
    p.add_argument("--no-limit", action="store_true", help="run without the memory cgroup")
    p.add_argument("--batches", default="1,4,8",
                   help="batch sizes StrideWeave also decodes at, B sequences together (default 1,4,8; 1: none)")
    p.add_argument("--limit-mib", type=float, default=None,
                   help="the memory limit in MiB instead of the computed one (for experiments)")
    p.add_argument("--threads", type=int, default=0, help="torch (and StrideWeave compute) threads; 0: the default")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--spec", help=argparse.SUPPRESS)
    o = p.parse_args(argv)
    if o.worker:
        return worker(o)

    t_demo = time.perf_counter()
    runs = [r.strip() for r in o.runs.split(",") if r.strip()]
    for r in runs:
        if r not in RUNS:
            p.error(f"unknown run {r!r}: choose among {', '.join(RUNS)}")
    if "resident" not in runs:
        runs.insert(0, "resident")
    results_dir = pathlib.Path(o.dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    log(f"{os.cpu_count()} CPUs, load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    if load0[0] > (os.cpu_count() or 1):
        log("  the machine is busy: other processes share the cores, and every figure below suffers from it")

    ckpt = checkpoint_dir(results_dir, o.seed)
    if checkpoint_complete(ckpt, o.seed):
        log(f"reusing the checkpoint {ckpt}")
    else:
        # In a child, so that the writer's memory is given back before the runs.
        r = subprocess.run([sys.executable, "-c", "import sys, pathlib; sys.path.insert(0, sys.argv[1]); "
                            "import hf_demo; hf_demo.write_checkpoint(pathlib.Path(sys.argv[2]), int(sys.argv[3]))",
                            str(ROOT / "tools"), str(ckpt), str(o.seed)])
        if r.returncode != 0 or not checkpoint_complete(ckpt, o.seed):
            log("writing the checkpoint failed")
            return 1
    expert_bytes, other_bytes, shards = checkpoint_sizes(ckpt)
    g = GEOMETRY
    budget_experts = min(g["experts"], max(g["top_k"], round(o.budget * g["experts"])))
    budget_bytes = expert_bytes * budget_experts // g["experts"]
    log(f"checkpoint: {len(shards)} shards, experts {mib(expert_bytes):.0f} MiB, the rest {mib(other_bytes):.0f} MiB; "
        f"budget {budget_experts} of {g['experts']} experts per layer = {mib(budget_bytes):.0f} MiB")

    workdir = pathlib.Path(tempfile.mkdtemp(prefix="hf-demo-", dir=results_dir))
    env = dict(os.environ)
    env.setdefault("TRANSFORMERS_VERBOSITY", "error")
    env.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    spec = {"checkpoint": str(ckpt), "tokens": o.tokens, "budget": o.budget, "prompt": prompt_ids(o.seed),
            "threads": o.threads}

    # The fixed slack: a process with torch, transformers and strideweave imported and the skeleton built.
    cgroups = None if o.no_limit else MemoryCgroups()
    enforced = bool(cgroups and cgroups.available)
    log("measuring the interpreter's own memory (torch + transformers + strideweave imported, model skeleton "
        "built on meta) ...")
    base = run_worker("baseline", spec, workdir, env=env)
    if base.get("failed"):
        log("the baseline process failed: " + base["failed"] + "\n" + base["log"][-2000:])
        return 1
    baseline_rss = max(base["hwm"] or 0, base["maxrss"])
    baseline = baseline_rss
    baseline_charge = None
    if enforced:
        # What a memory cgroup is charged for the same process: its anonymous memory and the page cache it
        # fills, not the library pages cached before it (charged where they were first read), which its RSS
        # counts. Measured again, libraries now cached, in a cgroup of its own without a limit: the difference
        # is room the limit leaves the page-cache peers (mmap, accelerate) for file pages.
        again = run_worker("baseline", spec, workdir, cgroups, None, env=env)
        if not again.get("failed") and again["cgroup"].get("peak"):
            baseline_charge = again["cgroup"]["peak"]
    slack_lib = base["memory_slack_bytes"]
    inflight = inflight_bytes(expert_bytes)
    limit = computed = other_bytes + budget_bytes + inflight + baseline + slack_lib
    if o.limit_mib:
        limit = int(o.limit_mib * (1 << 20))
        log(f"memory limit set by --limit-mib: {o.limit_mib:.0f} MiB (computed: {mib(computed):.0f})")
    if o.no_limit:
        limit_note = "not enforced (--no-limit)"
    elif not enforced:
        assert cgroups is not None
        limit_note = f"NOT enforced: {cgroups.why}; the runs are unlimited"
    else:
        assert cgroups is not None
        limit_note = f"enforced with a cgroup v{cgroups.version} memory limit under {cgroups.base}"
    log(f"  interpreter and libraries: peak RSS {mib(baseline_rss):.0f} MiB"
        + (f" (a memory cgroup is charged {mib(baseline_charge):.0f} MiB for it: the library pages cached before it "
           f"are not charged to it)" if baseline_charge else ""))
    log(f"memory limit {mib(limit):.0f} MiB = non-expert {mib(other_bytes):.0f} + expert budget "
        f"{mib(budget_bytes):.0f} + one call's reads {mib(inflight):.0f} + interpreter and libraries {mib(baseline):.0f} "
        f"+ strideweave.hf.MEMORY_SLACK_BYTES "
        f"{mib(slack_lib):.0f}: {limit_note}")

    results: dict[str, dict[str, Any]] = {}
    offload = None
    for i, kind in enumerate(runs):
        s = dict(spec)
        if kind in SLOW_RUNS:
            s["tokens"] = min(o.slow_tokens, o.tokens)
        if kind == "accelerate":
            offload = pathlib.Path(tempfile.mkdtemp(prefix="accelerate-offload-", dir=results_dir))
            s["offload_folder"] = str(offload)
            s["accelerate_cpu_bytes"] = other_bytes + budget_bytes
        ref_run = results.get("resident")
        if ref_run and not ref_run.get("failed"):
            s["reference_tokens"] = ref_run["tokens"]
        drop_page_cache(shards)
        lim = limit if (enforced and kind in LIMITED_RUNS) else None
        log(f"run {i + 1}/{len(runs)}: {kind}, {s['tokens']} tokens"
            + (f", memory limit {mib(lim):.0f} MiB" if lim else ", no memory limit"))
        r = run_worker(kind, s, workdir, cgroups if enforced else None, lim, env=env)
        if offload is not None:
            drop_page_cache([p for p in offload.rglob("*") if p.is_file()])
            shutil.rmtree(offload, ignore_errors=True)
            offload = None
        r["limit"] = lim
        results[kind] = r
        if not r.get("failed"):
            log(f"  {kind}: {fmt(r['decode_tps'], '.2f')} tokens/s decoding, first token {r['ttft_s']:.2f} s, "
                f"peak RSS {mib(r['maxrss']):.0f} MiB" + (f", cgroup peak {mib(r['cgroup'].get('peak')):.0f} MiB"
                                                           if r["cgroup"].get("peak") else ""))
        if kind == "accelerate" and not r.get("failed"):
            log(f"  accelerate's device map: {r['device_counts']} (offload folder: {r['offload_folder_files']} files, "
                f"{mib(r['offload_folder_bytes']):.0f} MiB)")

    # Batches: StrideWeave decoding B sequences together (B prompts; each
    # layer's call reads the union of their experts once).
    batches = {}
    if "strideweave" in results and not results["strideweave"].get("failed"):
        batches[1] = results["strideweave"]
        for b in sorted({int(x) for x in o.batches.split(",") if x.strip()} - {1}):
            s = dict(spec, batch=b, more_prompts=[prompt_ids(o.seed + 1000 + i) for i in range(b - 1)])
            drop_page_cache(shards)
            log(f"batch run: strideweave, {b} sequences of {s['tokens']} tokens"
                + (f", memory limit {mib(limit):.0f} MiB" if enforced else ""))
            r = run_worker("strideweave", s, workdir, cgroups if enforced else None, limit if enforced else None,
                           env=env, label=f"strideweave-B{b}")
            batches[b] = r
            if not r.get("failed"):
                log(f"  B={b}: {r['aggregate_tps']:.2f} tokens/s in all")

    report(o, results, ckpt, shards, expert_bytes, other_bytes, budget_bytes, budget_experts, baseline, slack_lib,
           limit, enforced, limit_note, results_dir, t_demo, load0, baseline_charge, batches)
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


def report(o, results, ckpt, shards, expert_bytes, other_bytes, budget_bytes, budget_experts, baseline, slack_lib,
           limit, enforced, limit_note, results_dir, t_demo, load0, baseline_charge, batches):
    import torch

    ref = results.get("resident")
    ref_ok = ref is not None and not ref.get("failed")
    ref_scores = torch.load(ref["scores"]) if ref_ok else None
    sw = results.get("strideweave")
    sw_ok = sw is not None and not sw.get("failed")

    for name, r in results.items():
        if r.get("failed"):
            continue
        r["tokens_equal"] = r["tokens"] == ref["tokens"][:len(r["tokens"])] if ref_ok else None
        d = first_divergence(r["tokens"], ref["tokens"]) if ref_ok else None
        r["first_divergence"] = d
        if ref_scores is not None and name != "resident":
            scores = torch.load(r["scores"])
            same = len(r["tokens"]) if d is None else d + 1  # steps whose inputs were identical
            diff = (scores[:same] - ref_scores[:same]).abs().max().item()
            r["max_logit_diff"] = diff
            if d is not None:
                r["ref_gap_at_divergence"] = ref["gaps"][d]
                r["own_gap_at_divergence"] = r["gaps"][d]
        if ref_ok and r.get("forced_argmax") is not None:
            n_forced = min(len(r["forced_argmax"]), len(ref["forced_argmax"]))
            differ = [i for i in range(n_forced) if r["forced_argmax"][i] != ref["forced_argmax"][i]]
            r["forced_positions"] = n_forced
            r["forced_differ"] = len(differ)
            # The widest margin the reference had where the two chose differently: a tie (0) or a step of bf16.
            r["forced_differ_max_ref_gap"] = max((ref["forced_gaps"][i] for i in differ), default=None)
        st = r.get("sw_stats")
        r["hit_rate"] = st["hit_rate"] if st else None
        r["prediction_accuracy"] = st["prediction_accuracy"] if st else None
        r["sw_bytes_read"] = st["bytes_read"] if st else None
        n = r["n_tokens"]
        r["decode_read_per_token"] = r["decode_read_bytes"] / (n - 1) if n > 1 else None
        r["decode_expert_s_per_token"] = r["decode_expert_s"] / (n - 1) if n > 1 else None
        r["decode_s_per_token"] = r["decode_s"] / (n - 1) if n > 1 else None
    sw_tps = sw["decode_tps"] if sw_ok else None

    names = list(results)
    header = ["run", "tokens", "tok/s", "TTFT s", "load s", "peak RSS", "cgroup peak", "hit rate", "pred acc",
              "read MiB", "read/tok MiB", "SW read MiB", "expert ms/tok", "other ms/tok", "SW÷run tok/s",
              "SW÷run RSS", "SW÷run read/tok", "tokens equal", "forced agree"]
    rows = []
    for name in names:
        r = results[name]
        if r.get("failed"):
            rows.append([name, "-", "FAILED"] + ["-"] * (len(header) - 3))
            continue
        n = r["n_tokens"]
        other_ms = None
        if r["decode_s_per_token"] is not None:
            other_ms = 1000 * (r["decode_s_per_token"] - r["decode_expert_s_per_token"])
        eq = "yes" if r["tokens_equal"] else (f"no (from token {r['first_divergence']})" if r["tokens_equal"] is False
                                              else "-")
        if name == "resident":
            eq = "reference"
        forced = "-"
        if r.get("forced_positions") is not None and name != "resident":
            forced = f"{r['forced_positions'] - r['forced_differ']}/{r['forced_positions']}"
            if r["forced_differ"]:
                forced += f" (ref gap <= {r['forced_differ_max_ref_gap']:.3f})"
        rows.append([
            name, str(n), fmt(r["decode_tps"], ".2f"), fmt(r["ttft_s"], ".2f"), fmt(r["load_s"], ".1f"),
            fmt(mib(r["maxrss"]), ".0f"),
            fmt(mib(r["cgroup"].get("peak")), ".0f", "no cgroup") + ("" if r.get("limit") or not r["cgroup"].get("peak")
                                                                     else " (no limit)"),
            pct(r["hit_rate"]),
            pct(r["prediction_accuracy"]),
            fmt(mib(r["read_bytes"]), ".0f"), fmt(mib(r["decode_read_per_token"]), ".1f"),
            fmt(mib(r["sw_bytes_read"]), ".0f"),
            fmt(None if r["decode_expert_s_per_token"] is None else 1000 * r["decode_expert_s_per_token"], ".0f"),
            fmt(other_ms, ".0f"),
            fmt(ratio(sw_tps, r["decode_tps"]), ".2f") if name != "strideweave" else "1",
            fmt(ratio(sw["maxrss"], r["maxrss"]), ".2f") if sw_ok and name != "strideweave" else "1",
            "1" if name == "strideweave" else
            fmt(ratio(sw["decode_read_per_token"], r["decode_read_per_token"])
                if sw_ok and (r["decode_read_per_token"] or 0) >= (1 << 20) else None, ".2f"),
            eq, forced])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = "  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths)))
    print()
    print(f"Mixtral-architecture checkpoint {ckpt.name}: {len(shards)} shards, experts {mib(expert_bytes):.0f} MiB "
          f"bf16, the rest {mib(other_bytes):.0f} MiB; prompt {PROMPT_LEN} tokens, greedy")
    if o.limit_mib:
        print(f"memory limit {mib(limit):.0f} MiB per run (all but resident), set by --limit-mib instead of: ", end="")
    inflight = inflight_bytes(expert_bytes)
    print(f"memory limit {mib(other_bytes + budget_bytes + inflight + baseline + slack_lib):.0f} MiB per run (all but "
          f"resident) "
          f"= non-expert {mib(other_bytes):.0f} + "
          f"budget {mib(budget_bytes):.0f} ({budget_experts}/{GEOMETRY['experts']} experts per layer) + one call's "
          f"reads {mib(inflight):.0f} ({GEOMETRY['top_k']} experts) + interpreter "
          f"{mib(baseline):.0f} + MEMORY_SLACK_BYTES {mib(slack_lib):.0f}: {limit_note}")
    print(line)
    print("-" * len(line))
    for cells in rows:
        print("  ".join(str(x).rjust(w) if i else str(x).ljust(w) for i, (x, w) in enumerate(zip(cells, widths))))
    print()
    legend = [
        ("run", "resident: transformers, every weight in memory (no limit; the reference). strideweave: "
                f"strideweave.hf.from_pretrained(budget={o.budget}, tier='direct'); +prefetch: prefetch=True. "
                "naive: experts read per call with O_DIRECT preads, computed by torch, dropped. mmap: experts as torch "
                "views of an mmap of the shards, the page cache decides. accelerate: "
                "from_pretrained(device_map='auto', max_memory={'cpu': non-expert + budget bytes}, "
                "offload_folder=...): disk offload"),
        ("tokens", "new tokens generated (the first from the prompt's prefill)"),
        ("tok/s", "decode speed: (tokens - 1) / time from the first token to the last"),
        ("TTFT s", "time to first token: generate() call to the first token (prefill of the prompt)"),
        ("load s", "from_pretrained (or the peer's loading) in the fresh process, page cache dropped before"),
        ("peak RSS", "MiB, the process's ru_maxrss: interpreter, libraries, weights, buffers, mapped file pages"),
        ("cgroup peak", "MiB, the run's memory cgroup's memory.max_usage_in_bytes: its anonymous memory and the page "
                        "cache it filled (checkpoint pages, accelerate's offload folder), what the limit bounds; RSS "
                        "also counts library pages cached before the run, which the cgroup is not charged for"),
        ("hit rate", "StrideWeave: expert tiles found in memory / tiles the router asked for (strideweave.hf.stats)"),
        ("pred acc", "StrideWeave with prefetch: predicted experts the router then chose / experts predicted"),
        ("read MiB", "bytes the kernel read from storage for the process (/proc/self/io read_bytes): loading and "
                     "generation"),
        ("read/tok MiB", "the same, per decoded token (after the first)"),
        ("SW read MiB", "StrideWeave's own count of expert bytes read (demand reads and prefetches)"),
        ("expert ms/tok", "time inside the experts modules' calls per decoded token, reads included: StrideWeave's "
                          "and naive's reads, mmap's page faults, accelerate's hook loading the module's offloaded "
                          "weights"),
        ("other ms/tok", "decode time per token outside the experts modules (attention, router, lm_head, hooks)"),
        ("SW÷run tok/s", "StrideWeave's decode tokens/s divided by this run's"),
        ("SW÷run RSS", "StrideWeave's peak RSS divided by this run's"),
        ("SW÷run read/tok", "StrideWeave's bytes read per decoded token divided by this run's"),
        ("forced agree", "teacher forcing: one forward pass over the prompt and resident's greedy tokens, each "
                         "position's top choice compared with resident's own forced pass (positions agreeing / "
                         "positions); where they differ, the largest top-2 gap resident had there: 0 is an exact tie "
                         "of bf16 logits, which any rounding difference upstream decides either way"),
        ("tokens equal", "greedy tokens identical to resident's (over this run's tokens); else the first token "
                         "that differs"),
    ]
    print("Legend:")
    for k, v in legend:
        print(textwrap.fill(v, 118, initial_indent=f"  {k:<16} ", subsequent_indent=" " * 19))

    # Notes: divergences, accelerate's map, targets.
    notes = []
    for name, r in results.items():
        if r.get("failed"):
            notes.append(f"{name} FAILED: {r['failed']}" + (f" at the {mib(r['limit']):.0f} MiB limit"
                                                             if r.get("limit") else ""))
        if r.get("failed") or name == "resident" or "max_logit_diff" not in r:
            continue
        if r.get("first_divergence") is not None:
            notes.append(f"{name}: tokens differ from resident's from token {r['first_divergence']}; there the "
                         f"reference's top-2 logits were {r['ref_gap_at_divergence']:.3f} apart and this run's "
                         f"{r['own_gap_at_divergence']:.3f} (bf16 logits: steps of 0.016-0.03 at these values); "
                         f"largest logit difference before it {r['max_logit_diff']:.3f}")
        else:
            notes.append(f"{name}: largest logit difference from resident's over the {r['n_tokens']} steps "
                         f"{r['max_logit_diff']:.3f}")
    acc = results.get("accelerate")
    if acc and not acc.get("failed"):
        disk = sorted(k for k, v in acc["device_map"].items() if v == "disk")
        notes.append(f"accelerate offloaded to disk: hf_device_map {acc['device_counts']}; on disk: {', '.join(disk)}; "
                     f"offload folder {acc['offload_folder_files']} files, {mib(acc['offload_folder_bytes']):.0f} MiB")
    if sw_ok:
        st = sw["sw_stats"]
        notes.append(f"strideweave: {st['hits']} hits, {st['misses']} misses, {mib(st['bytes_read']):.0f} MiB of "
                     f"experts read; {sw['decode_expert_s']:.2f} s of its {sw['decode_s']:.2f} s decode in the "
                     f"experts' calls")
        rss_over = sw["maxrss"] - sw["maxrss_before_load"]
        allowed = other_bytes + budget_bytes + inflight + slack_lib
        notes.append(f"strideweave peak RSS {mib(sw['maxrss']):.0f} MiB = {mib(sw['maxrss_before_load']):.0f} after "
                     f"its imports + {mib(rss_over):.0f} loading and generating; bound (docs/transformers.md): "
                     f"non-expert + budget + one call's reads + MEMORY_SLACK_BYTES = {mib(allowed):.0f} MiB -> "
                     f"{'within' if rss_over <= allowed else f'OVER by {mib(rss_over - allowed):.0f} MiB'}")
    if baseline_charge:
        notes.append(f"the limit counts the interpreter at its peak RSS, {mib(baseline):.0f} MiB; a cgroup is charged "
                     f"{mib(baseline_charge):.0f} MiB for it (library pages cached earlier are charged elsewhere), so "
                     f"the limit leaves about {mib(baseline - baseline_charge):.0f} MiB more than the budget for "
                     f"cached file pages: room that mmap and accelerate use and StrideWeave (direct I/O) does not")
    for n in notes:
        print(textwrap.fill(n, 118, initial_indent="note: ", subsequent_indent="      "))

    # Batches.
    batch_rows: dict[int, dict[str, Any]] = {}
    b1 = batches.get(1)
    for b, r in sorted(batches.items()):
        if r.get("failed"):
            batch_rows[b] = {"failed": r["failed"]}
            continue
        n = r["n_tokens"]
        seqs = r.get("batch", 1)
        st = r.get("sw_stats") or {}
        batch_rows[b] = {
            "aggregate_tps": r["aggregate_tps"],
            "vs_b1": ratio(r["aggregate_tps"], b1.get("aggregate_tps") if b1 and not b1.get("failed") else None),
            "decode_read_per_token": r["decode_read_bytes"] / (seqs * (n - 1)) if n > 1 else None,
            "hit_rate": st.get("hit_rate"), "sw_bytes_read": st.get("bytes_read"), "maxrss": r["maxrss"],
            "cgroup_peak_bytes": r["cgroup"].get("peak")}
    # What reading alone allows: decoding bound by its reads at one bandwidth
    # gains over B = 1 the ratio of bytes read per token (B sequences share a
    # layer's union of experts, which grows with B).
    b1_read = batch_rows.get(1, {}).get("decode_read_per_token")
    for b, row in batch_rows.items():
        if "failed" not in row:
            row["read_bound_vs_b1"] = ratio(b1_read, row["decode_read_per_token"])
    if len(batch_rows) > 1:
        print()
        print("StrideWeave decoding B sequences together (each layer's call reads the union of their experts once):")
        print(f"{'B':>3}  {'tok/s in all':>12}  {'vs B=1':>7}  {'read/tok MiB':>12}  {'read-bound vs B=1':>17}  "
              f"{'hit rate':>8}  {'peak RSS':>8}")
        for b, row in batch_rows.items():
            if "failed" in row:
                print(f"{b:>3}  FAILED: {row['failed']}")
                continue
            print(f"{b:>3}  {fmt(row['aggregate_tps'], '12.2f')}  {fmt(row['vs_b1'], '7.2f')}  "
                  f"{fmt(mib(row['decode_read_per_token']), '12.1f')}  {fmt(row['read_bound_vs_b1'], '17.2f')}  "
                  f"{pct(row['hit_rate']):>8}  "
                  f"{fmt(mib(row['maxrss']), '8.0f')}")

    def tps(name):
        r = results.get(name)
        return None if r is None or r.get("failed") else r["decode_tps"]

    swp = results.get("strideweave+prefetch")
    summary = {
        "checkpoint": str(ckpt), "geometry": GEOMETRY, "expert_bytes": expert_bytes, "non_expert_bytes": other_bytes,
        "budget": o.budget, "budget_bytes": budget_bytes, "memory_limit_bytes": limit, "limit_enforced": enforced,
        "limit_note": limit_note, "baseline_bytes": baseline, "baseline_cgroup_charge_bytes": baseline_charge,
        "memory_slack_bytes": slack_lib,
        "vs_accelerate": ratio(sw_tps, tps("accelerate")), "vs_naive": ratio(sw_tps, tps("naive")),
        "vs_mmap_budget": ratio(sw_tps, tps("mmap")), "vs_resident": ratio(sw_tps, tps("resident")),
        "prefetch_vs_no_prefetch": ratio(tps("strideweave+prefetch"), sw_tps),
        "tokens_equal": sw["tokens_equal"] if sw_ok else None,
        "forced_agree": (sw["forced_positions"] - sw["forced_differ"]) if sw_ok and "forced_differ" in sw else None,
        "forced_positions": sw.get("forced_positions") if sw_ok else None,
        "forced_differ_max_ref_gap": sw.get("forced_differ_max_ref_gap") if sw_ok else None,
        "prefetch_tokens_equal": swp.get("tokens_equal") if swp and not swp.get("failed") else None,
        "peak_rss_bytes": sw["maxrss"] if sw_ok else None,
        "peak_rss_above_interpreter_bytes": sw["maxrss"] - sw["maxrss_before_load"] if sw_ok else None,
        "peak_rss_bound_bytes": other_bytes + budget_bytes + inflight + slack_lib,
        "demo_seconds": time.perf_counter() - t_demo, "load_average_start": load0, "load_average_end": os.getloadavg(),
        "runs": {},
    }
    summary["batches"] = {str(b): row for b, row in batch_rows.items()}
    summary["b4_vs_b1"] = batch_rows.get(4, {}).get("vs_b1")
    summary["b4_read_bound_vs_b1"] = batch_rows.get(4, {}).get("read_bound_vs_b1")
    summary["targets"] = {
        "vs_accelerate>=5": None if summary["vs_accelerate"] is None else summary["vs_accelerate"] >= 5,
        "vs_naive>=1.5": None if summary["vs_naive"] is None else summary["vs_naive"] >= 1.5,
        "tokens_equal": summary["tokens_equal"],
        "peak_rss_within_bound": None if not sw_ok else summary["peak_rss_above_interpreter_bytes"]
        <= summary["peak_rss_bound_bytes"],
    }
    keep = ("n_tokens", "decode_tps", "ttft_s", "load_s", "maxrss", "hwm", "maxrss_before_load", "read_bytes",
            "decode_read_bytes", "decode_read_per_token", "prefill_read_bytes", "sw_bytes_read", "hit_rate",
            "prediction_accuracy", "decode_expert_s", "decode_s", "prefill_expert_s", "tokens_equal",
            "first_divergence", "max_logit_diff", "experts_implementation", "torch_threads", "limit", "peer_read_s",
            "peer_compute_s", "device_counts", "offload_folder_bytes", "naive_o_direct", "tokens", "forced_positions",
            "forced_differ", "forced_differ_max_ref_gap")
    for name, r in results.items():
        if r.get("failed"):
            summary["runs"][name] = {"failed": r["failed"], "limit": r.get("limit"), "cgroup": r.get("cgroup")}
            continue
        row = {k: r.get(k) for k in keep if k in r}
        row["cgroup_peak_bytes"] = r["cgroup"].get("peak")
        row["cgroup_failcnt"] = r["cgroup"].get("failcnt")
        row["sw_over_run_tps"] = ratio(sw_tps, r["decode_tps"])
        if r.get("sw_stats"):
            row["sw_stats"] = r["sw_stats"]
        summary["runs"][name] = row
    write_csv(results_dir / "hf_demo.csv", results, sw_tps)
    plot(results_dir / "hf_demo.png", results, limit, enforced)
    log(f"wrote {results_dir / 'hf_demo.csv'} and {results_dir / 'hf_demo.png'}; demo took "
        f"{summary['demo_seconds']:.0f} s")
    print("SUMMARY_JSON " + json.dumps(summary, separators=(",", ":")))


def write_csv(path, results, sw_tps):
    import csv

    cols = ["run", "tokens", "decode_tps", "ttft_s", "load_s", "peak_rss_bytes", "cgroup_peak_bytes",
            "memory_limit_bytes", "hit_rate", "prediction_accuracy", "read_bytes", "decode_read_bytes_per_token",
            "sw_bytes_read", "decode_expert_s", "decode_s", "sw_over_run_tps", "tokens_equal", "first_divergence",
            "failed"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for name, r in results.items():
            if r.get("failed"):
                w.writerow([name] + [""] * (len(cols) - 2) + [r["failed"]])
                continue
            w.writerow([name, r["n_tokens"], r["decode_tps"], r["ttft_s"], r["load_s"], r["maxrss"],
                        r["cgroup"].get("peak", ""), r.get("limit") or "", blank(r["hit_rate"]),
                        blank(r["prediction_accuracy"]), r["read_bytes"],
                        r["decode_read_per_token"], blank(r["sw_bytes_read"]),
                        r["decode_expert_s"], r["decode_s"], ratio(sw_tps, r["decode_tps"]), r["tokens_equal"],
                        "" if r["first_divergence"] is None else r["first_divergence"], ""])


def plot(path, results, limit, enforced):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is missing: no plot")
        return
    names = [n for n, r in results.items() if not r.get("failed")]
    if not names:
        return
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.8))
    colors = {"resident": "#7f7f7f", "strideweave": "#d62728", "strideweave+prefetch": "#ff9896", "naive": "#1f77b4",
              "mmap": "#2ca02c", "accelerate": "#9467bd"}
    x = range(len(names))
    tps = [results[n]["decode_tps"] or 0 for n in names]
    bars = a1.bar(x, tps, color=[colors.get(n, "#333") for n in names])
    for b, n in zip(bars, names):
        a1.annotate(f"{results[n]['decode_tps']:.2f}\n({results[n]['n_tokens']} tok)", (b.get_x() + b.get_width() / 2,
                    b.get_height()), ha="center", va="bottom", fontsize=8)
    a1.set_xticks(list(x), names, rotation=25, ha="right")
    a1.set_ylabel("decode tokens/s")
    a1.set_title("decode speed (greedy, same prompt)")
    a1.margins(y=0.2)
    w = 0.38
    rss = [mib(results[n]["maxrss"]) for n in names]
    cg = [mib(results[n]["cgroup"].get("peak") or 0) for n in names]
    a2.bar([i - w / 2 for i in x], rss, w, color="#555555", label="peak RSS (ru_maxrss)")
    a2.bar([i + w / 2 for i in x], cg, w, color="#bbbbbb",
           label="cgroup peak charge (its memory + the page cache it filled)")
    a2.axhline(mib(limit), color="k", ls="--", lw=1,
               label=f"memory limit {mib(limit):.0f} MiB" + ("" if enforced else " (not enforced)"))
    a2.set_xticks(list(x), names, rotation=25, ha="right")
    a2.set_ylabel("MiB")
    a2.set_title("memory (resident: no limit)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors.get(n, "#333")) for n in names]
    fig.legend(handles + a2.get_legend_handles_labels()[0], names + a2.get_legend_handles_labels()[1],
               loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
