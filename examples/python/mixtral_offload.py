#!/usr/bin/env python3
"""Offloaded decoding through a Mixtral-architecture stack of MoE blocks,
against what a user would otherwise run.

The model is a stack of Mixtral sparse-MoE FFN blocks (RMSNorm, router
linear, softmax, per-token top-k, renormalised gates, SwiGLU experts
w2(silu(w1 x) * w3 x), residual add), its weights in a .safetensors file laid
out as a Hugging Face Mixtral checkpoint (one tensor per expert and matrix,
model.layers.{l}.block_sparse_moe.experts.{e}.w1.weight and so on). The demo
writes that file itself (random weights from a fixed seed) and decodes a
token sequence through it, one token per step, five ways:

  pytorch    every weight resident in PyTorch, the same model in plain
             PyTorch ops: the speed peer and the correctness reference
  resident   StrideWeave with every expert primary (the ceiling)
  offloaded  StrideWeave, experts in the model file (read with direct I/O by
             default, bypassing the page cache as a model larger than RAM
             would be), an LRU budget of --budget of each layer's experts,
             one sw.expert_ffn call per layer computing every chosen
             expert's w2(silu(w1 x) * w3 x) on the cached tiles in place,
             a missing expert's products as its tiles land;
             the later layers' experts are predicted by applying their
             routers to the current hidden state (what a decoder knows
             before those layers run; never the future routing) and the
             predictions scored; with --prefetch they are also promoted
             ahead: every predicted expert of the next layer (promote_async),
             the likeliest --prefetch-experts of the layers after it
             (prefetch_async: reads that yield to the others), each layer
             waiting matrix by matrix for those it uses. Prefetch is off by
             default: on the reference machine its wrong guesses' reads cost
             more time than its overlap saves (docs/moe-offload.md, 4.)
  naive      on-demand loading: read the chosen experts' bytes from the file
             (direct I/O), compute, drop them
  mmap       the file memory-mapped, the page cache deciding (llama.cpp's CPU
             default); the page cache is not budgeted and grows to the file

With --batch B every run decodes B sequences together, one token of each
per step: a layer computes each expert the batch chose once, on the rows
that chose it, so the offloaded run reads the union of the batch's experts
once per layer (one sw.expert_ffn call over the B rows). tokens/s is then
the aggregate over the sequences, and every per-token figure counts the
tokens of all of them.

With --quant TYPE (q8_0, q4_0, q4_k, q6_k, mxfp4) the checkpoint's experts
are also quantized to TYPE by StrideWeave's quantizer (astype), one expert
matrix at a time, and written once as a GGUF file beside the model file
(llama.cpp's stacked blk.{l}.ffn_{gate,up,down}_exps.weight; reused while
its configuration matches), and three more runs decode from it:
q-offloaded (the offloaded run on the GGUF experts, same budget and tier,
sw.expert_ffn computing on the quantized tiles in place), q-naive (each
chosen expert's blocks read from the file on demand, sw.matmul on them) and
q-resident (every quantized expert primary). Their error against the
unquantized PyTorch reference is printed as max err and as rms err
(||difference|| / ||reference|| of the final hidden states), and checked
against a bound per layer (QUANT_ERROR_BOUND). The default runs are then
pytorch, resident, offloaded and the three q- runs.

With --tier remote the experts live on Valkey/Redis servers
(docs/remote-tier.md): the demo seeds each layer's w1, w2 and w3 into a
namespace of their own (one block per expert tile, placed over the
servers by rendezvous hashing), the runs open them read-only as the
secondary tier, and the namespaces are deleted at the end. Without
--remote-endpoints (or $STRIDEWEAVE_REMOTE_ENDPOINTS) it starts two
redis-servers of its own on unix sockets and stops them at the end.

The token stream: each step's input hidden state is x_t = rho x_{t-1} +
sqrt(1 - rho^2) eps_t (eps_t standard normal, rho = --rho): consecutive
tokens are correlated, as consecutive tokens of text are, so routing has
temporal locality. The LRU hit rate this gives is printed beside the run.

The offloaded run's lower bound, max(resident compute, bytes read / the
tier's bandwidth), is taken per --probe-every tokens: at each pause the
run's reads of the segment are read again, with preads and through
StrideWeave's file carrier, and the faster is the tier's bandwidth for that
segment (for zstd, --probe-mib decompressed). With --tier direct the
device's own count of its busy time (/proc/diskstats) gives a second bound.
Without --prefetch it also prints how long the offloaded run computed with no
read of its own in flight (the layers whose experts were all primary, and
the layers with misses after their last read landed), time the bound does
not pay for.

Each run decodes in a process of its own (forked, one after another, from
one that imported the modules: Workers), so that its peak resident set is
its own; the table gives it beside the run's expert budget (every expert for
pytorch and resident, the LRU budget for offloaded, none kept for naive;
mmap has none: "page cache, unbudgeted", not a same-memory comparison).

Prints a progress line per step, a table with a legend of its columns, and
one line SUMMARY_JSON {...}; writes the per-step figures to --csv and their
plot beside it (.png).

    python3 examples/python/mixtral_offload.py [--layers 4] [--experts 8]
        [--hidden 1024] [--ffn 2816] [--topk 2] [--tokens 48] [--batch 1] [--budget 0.25]
        [--tier direct|page-cache|zstd|remote] [--remote-endpoints URL,...]
        [--dtype bf16|f32] [--quant q8_0|q4_0|q4_k|q6_k|mxfp4] [--rho 0.8]
        [--prefetch] [--lookahead N] [--prefetch-experts N] [--[no-]poll]
        [--probe-every N] [--probe-mib N] [--dir DIR]
        [--csv FILE] [--quiet]
        [--save-stream FILE.npy] [--trace]

--save-stream writes the token stream as a (tokens, hidden) float32 .npy
(its values already rounded to --dtype, so exact), and --trace prints the
offloaded run's routing, final-state checksums and hit rate as TRACE lines:
the C twin, examples/c/mixtral_offload.c, reads the model file and that
stream and prints the same lines (docs/moe-offload.md, "The C twin").

With --train the demo trains the experts instead of decoding (train_main;
--runs and --csv do not apply):

  tier       the model file is read-only, so each layer's w1, w2 and w3 are
             copied once into a writable secondary tier: a scratch file in
             --dir (direct I/O with --tier direct, buffered with page-cache;
             removed at the end) or zstd-compressed memory (--tier zstd). The
             primary budget is --budget of each matrix's experts under an LRU
             policy, as when decoding.
  dtype      training is f32: a bf16 checkpoint is widened once (exactly) into
             f32 master weights. bf16 weights would round away every SGD step
             below half an ulp (2^-9 of the weight), and a comparison with
             PyTorch could then only be bounded by an ulp per weight, too
             loose to catch a wrong update; so bf16 updates are not offered.
  loss       the mean squared error of the stack's output over the token
             stream (one batch of --tokens tokens) against a fixed target,
             one N(0, 1) vector per token (seed + 2).
  graph      RMSNorm, the router linear, softmax, top-k and the renormalised
             gates are StrideWeave ops, differentiable in the hidden state,
             their weights frozen (neither the norms nor the routers train);
             every expert matrix goes through TiledEvictable.expert_matmul,
             differentiable in the experts, the activations and the gates, so
             an expert's gradient includes the paths through the later
             layers' norms, routers and gates.
  step       backward gives each matrix a tile-sparse gradient (a
             TiledEvictable holding only the experts some token used); SGD
             (--lr, --steps) adds -lr * grad into each such expert's tile in
             place (update_async "add"), one expert at a time, so the LRU
             evicts dirty experts to the writable tier and the next step reads
             them back. The gradients of one step are held in CPU memory
             (the used experts only, not under the budget) until applied.
  reference  the same model, loss and SGD in plain PyTorch autograd on
             resident f32 weights. After training every expert is evicted and
             read back from the tier: each matrix must equal PyTorch's within
             1e-4 of its largest weight and 1e-3 of the largest change
             training made to it (a skipped or wrong update cannot hide under
             the weights' size); every update must have reached the tier
             (writes = updates - updates onto an expert still dirty); and the
             loss after the last step must be below the first. Else the exit
             status is 1.
  --save     writes the trained model as a Mixtral-layout .safetensors in f32
             (norms and routers widened, experts as trained, each read tile by
             tile from its tier) and checks it by reading it back.

Prints a line per step, a table and one line SUMMARY_JSON {...}.

    python3 examples/python/mixtral_offload.py --train [--steps 4] [--lr 1.0]
        [--save PATH] [the model, --tier, --budget and --tokens options above]
"""
import argparse
import gc
import json
import math
import mmap
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

# The model file's request size and depth are the runtime's choice: with
# direct I/O it measures the device once (docs/model-files.md, "The device
# profile") and reads through io_uring where the kernel has it. A value set
# here would override the device's (0: the runtime's).
FILE_CHUNK, FILE_IN_FLIGHT = 0, 0

import strideweave as sw  # noqa: E402
from strideweave import carriers  # noqa: E402

MATRICES = ("w1", "w2", "w3")
RUN_NAMES = ("pytorch", "resident", "offloaded", "naive", "mmap", "q-offloaded", "q-naive", "q-resident")
QUANT_RUNS = ("q-offloaded", "q-naive", "q-resident")  # the runs on the --quant GGUF file
# The q- runs' max err (final hidden state against the unquantized PyTorch
# reference, relative to its largest magnitude) allowed per layer of the stack.
QUANT_ERROR_BOUND = {"q8_0": 0.02, "q6_k": 0.03, "q4_k": 0.1, "q4_0": 0.15, "mxfp4": 0.2}
# The block-quantized dtypes --quant writes, with the elements of a block
# (the first mode of each expert matrix, its input features, is a multiple).
QUANT_BLOCK = {"q8_0": 32, "q4_0": 32, "mxfp4": 32, "q4_k": 256, "q6_k": 256}
# Each matrix's stacked tensor in the GGUF file, by llama.cpp's names.
GGUF_NAMES = {"w1": "ffn_gate_exps", "w3": "ffn_up_exps", "w2": "ffn_down_exps"}
PRODUCT_ORDER = ("w1", "w3", "w2")  # the order a block multiplies them in


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--ffn", type=int, default=2816)
    p.add_argument("--topk", type=int, default=2)
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--batch", type=int, default=1,
                   help="sequences decoded together, each layer reading the union of their experts once (default 1)")
    p.add_argument("--warmup", type=int, default=2, help="untimed tokens decoded first by every run")
    p.add_argument("--budget", type=float, default=0.25, help="fraction of each layer's experts kept primary")
    p.add_argument("--tier", choices=("direct", "page-cache", "zstd", "remote"), default="direct")
    p.add_argument("--remote-endpoints", default=os.environ.get("STRIDEWEAVE_REMOTE_ENDPOINTS"),
                   help="--tier remote: comma-separated unix:///path or redis://host[:port] servers (default "
                        "$STRIDEWEAVE_REMOTE_ENDPOINTS; without either the demo starts two redis-servers of its own "
                        "on unix sockets)")
    p.add_argument("--dtype", choices=("bf16", "f32"), default="bf16")
    p.add_argument("--rho", type=float, default=0.8, help="correlation of consecutive input hidden states")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, default=0, help="compute threads (0: the machine's cores)")
    p.add_argument("--prefetch", action=argparse.BooleanOptionalAction, default=False,
                   help="prefetch the predicted experts ahead of their layer (default off: without it the "
                        "predictions are only scored)")
    p.add_argument("--lookahead", type=int, default=0,
                   help="layers ahead whose experts are predicted (default 0: every later layer of the stack)")
    p.add_argument("--prefetch-experts", type=int, default=1,
                   help="the most likely predicted experts prefetched per layer (default 1)")
    p.add_argument("--poll", action=argparse.BooleanOptionalAction, default=False,
                   help="wait for a layer's call by polling, yielding the core at each poll, instead of sleeping "
                        "(default off: the runtime's workers compute while the call waits)")
    p.add_argument("--probe-every", type=int, default=8,
                   help="tokens between the offloaded run's pauses to read its reads again, the tier's bandwidth (default 8)")
    p.add_argument("--probe-mib", type=int, default=128, help="MiB each zstd probe decompresses (default 128)")
    p.add_argument("--runs", default=None,
                   help="comma-separated runs (default pytorch,resident,offloaded,naive,mmap; with --quant "
                        "pytorch,resident,offloaded,q-offloaded,q-naive,q-resident)")
    p.add_argument("--quant", choices=tuple(QUANT_BLOCK), default=None,
                   help="also decode from the experts quantized to this dtype, written once as a GGUF file beside "
                        "the model file (the q- runs)")
    p.add_argument("--dir", default=os.environ.get("SW_RESULTS", "results"))
    p.add_argument("--csv", default=None)
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--save-stream", default=None, help="write the token stream to this .npy (float32)")
    p.add_argument("--trace", action="store_true", help="print the offloaded run's TRACE lines (the C twin's)")
    # The process main starts to fork each run's (Workers).
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    add_train_options(p)
    o = p.parse_args(argv)
    check_train_options(p, o)
    if not (0 < o.budget <= 1):
        p.error("--budget must be in (0, 1]")
    if not (1 <= o.topk <= o.experts):
        p.error("--topk must be between 1 and --experts")
    if min(o.layers, o.hidden, o.ffn, o.tokens, o.batch) < 1:
        p.error("--layers, --hidden, --ffn, --tokens and --batch must be at least 1")
    if o.train and o.tier == "remote":
        p.error("--train writes its experts to a tier of its own: --tier direct, page-cache or zstd")
    if o.batch > 1 and (o.train or o.trace or o.save_stream):
        p.error("--batch decodes several sequences; --train, --trace and --save-stream take one (--batch 1)")
    if not (0 <= o.rho < 1):
        p.error("--rho must be in [0, 1)")
    if o.lookahead < 0 or o.prefetch_experts < 1:
        p.error("--lookahead must be at least 0 and --prefetch-experts at least 1")
    if o.probe_every < 1 or o.probe_mib < 1:
        p.error("--probe-every and --probe-mib must be at least 1")
    o.lookahead = o.lookahead or max(1, o.layers - 1)
    if o.runs is None:
        o.runs = ("pytorch,resident,offloaded,q-offloaded,q-naive,q-resident" if o.quant
                  else "pytorch,resident,offloaded,naive,mmap")
    o.runs = [r for r in o.runs.split(",") if r]
    if o.quant:
        if o.train or o.trace or o.save_stream:
            p.error("--quant decodes; --train, --trace and --save-stream take the model file's experts as they are")
        if o.tier not in ("direct", "page-cache"):
            p.error("--quant reads its GGUF file: --tier direct or page-cache")
        block = QUANT_BLOCK[o.quant]
        if o.hidden % block or o.ffn % block:
            p.error(f"--quant {o.quant}: --hidden and --ffn must be multiples of its block of {block} elements")
    elif any(r in QUANT_RUNS for r in o.runs):
        p.error(f"the runs {', '.join(QUANT_RUNS)} decode from the quantized experts: they need --quant")
    for r in o.runs:
        if r not in RUN_NAMES:
            p.error(f"unknown run {r!r}")
    if o.trace and "offloaded" not in o.runs:
        p.error("--trace prints the offloaded run: --runs must include it")
    o.budget_tiles = max(1, round(o.budget * o.experts))
    if o.remote_endpoints is not None:
        o.remote_endpoints = [e for e in o.remote_endpoints.split(",") if e]
    o.torch_dtype = torch.bfloat16 if o.dtype == "bf16" else torch.float32
    o.csv = o.csv or os.path.join(o.dir, "mixtral_offload.csv")
    return o


def log(o, *args):
    if not o.quiet:
        print(*args, flush=True)


# ---- the model file ---------------------------------------------------------------------------

def expert_name(layer, e, w):
    return f"model.layers.{layer}.block_sparse_moe.experts.{e}.{w}.weight"


def gate_name(layer):
    return f"model.layers.{layer}.block_sparse_moe.gate.weight"


def norm_name(layer):
    return f"model.layers.{layer}.post_attention_layernorm.weight"


def config_of(o):
    return {"architecture": "MixtralSparseMoeBlock stack", "layers": o.layers, "experts": o.experts,
            "hidden": o.hidden, "ffn": o.ffn, "topk": o.topk, "dtype": o.dtype, "seed": o.seed}


def make_model(o, path):
    """Writes the checkpoint (random weights from the seed) unless a file
    with this configuration is there already. Weights are N(0, 1/fan_in),
    as nn.Linear's scale, so activations keep their size through the stack."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    cfg = json.dumps(config_of(o), sort_keys=True)
    if os.path.exists(path):
        try:
            with safe_open(path, "pt") as f:
                if (f.metadata() or {}).get("strideweave_config") == cfg:
                    return False
        except Exception:  # noqa: BLE001 - a broken or foreign file is rewritten
            pass
    g = torch.Generator().manual_seed(o.seed)
    H, Fd, E = o.hidden, o.ffn, o.experts
    tensors = {}
    for layer in range(o.layers):
        tensors[norm_name(layer)] = (1 + 0.1 * torch.randn(H, generator=g)).to(o.torch_dtype)
        tensors[gate_name(layer)] = (torch.randn(E, H, generator=g) / math.sqrt(H)).to(o.torch_dtype)
        for e in range(E):
            tensors[expert_name(layer, e, "w1")] = (torch.randn(Fd, H, generator=g) / math.sqrt(H)).to(o.torch_dtype)
            tensors[expert_name(layer, e, "w2")] = (torch.randn(H, Fd, generator=g) / math.sqrt(Fd)).to(o.torch_dtype)
            tensors[expert_name(layer, e, "w3")] = (torch.randn(Fd, H, generator=g) / math.sqrt(H)).to(o.torch_dtype)
    tmp = path + ".tmp"
    save_file(tensors, tmp, metadata={"format": "pt", "strideweave_config": cfg})
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return True


def tensor_regions(path):
    """{name: (byte offset, byte count)} of a safetensors file's tensors."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    base = 8 + n
    return {k: (base + v["data_offsets"][0], v["data_offsets"][1] - v["data_offsets"][0])
            for k, v in header.items() if k != "__metadata__"}


def drop_page_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def gguf_path_of(path, quant):
    """The quantized experts' GGUF file, beside the model file."""
    return path[:-len(".safetensors")] + f".{quant}.gguf"


def gguf_name(layer, w):
    return f"blk.{layer}.{GGUF_NAMES[w]}.weight"


def gguf_first_string(path):
    """The first metadata value of a GGUF file when it is a string (the
    configuration make_gguf writes first), else None."""
    try:
        with open(path, "rb") as f:
            head = f.read(24)
            if len(head) < 24 or head[:4] != b"GGUF":
                return None
            if int.from_bytes(head[16:24], "little") < 1:
                return None
            n = int.from_bytes(f.read(8), "little")
            f.read(n)  # the key
            if int.from_bytes(f.read(4), "little") != 8:  # GGUF_TYPE_STRING
                return None
            n = int.from_bytes(f.read(8), "little")
            return f.read(n).decode() if n < 1 << 20 else None
    except (OSError, UnicodeDecodeError):
        return None


def make_gguf(o, path, gpath):
    """Writes the checkpoint's experts quantized to --quant as a GGUF file
    (llama.cpp's stacked blk.{l}.ffn_{gate,up,down}_exps.weight, ggml shape
    [hidden, ffn, experts] for gate and up, [ffn, hidden, experts] for down)
    unless a file of this configuration is there already. StrideWeave's
    quantizer (astype) quantizes one expert matrix at a time, read from the
    model file; each quantized matrix goes into a TiledEvictable whose
    secondary tier is a scratch file in --dir and is evicted there at once,
    so no more than one layer's matrix of one expert is held in memory,
    quantized or not; sw.save_gguf then writes the file, reading the tiles
    from the scratch files."""
    from safetensors import safe_open

    cfg = json.dumps(config_of(o) | {"quant": o.quant}, sort_keys=True)
    if gguf_first_string(gpath) == cfg:
        return False
    E = o.experts
    everything = sw.TileSelection([[0], [0], list(range(E))])
    tiled = {}
    try:
        with safe_open(path, "pt") as f:
            for layer in range(o.layers):
                for w in PRODUCT_ORDER:
                    K, N = (o.hidden, o.ffn) if w != "w2" else (o.ffn, o.hidden)
                    te = sw.TiledEvictable(carriers.CPU(0, dtype=o.quant),
                                           carriers.File(K * N * E, dtype=o.quant, directory=o.dir), (1, 1, E),
                                           (K, N, 1))
                    tiled[gguf_name(layer, w)] = te
                    full = te.full_tensor()
                    for e in range(E):
                        t = f.get_tensor(expert_name(layer, e, w))  # (N, K) row-major: (K, N, 1) first mode fastest
                        q = sw.from_dlpack(t.unsqueeze(0).permute(2, 1, 0)).astype(o.quant)
                        te.update_async(full, q, sw.TileSelection([[0], [0], [e]])).wait()
                    te.evict(everything)
        sw.save_gguf(gpath, tiled, metadata={"strideweave.config": cfg, "general.architecture": "llama",
                                             "general.quantized_by": "StrideWeave astype"})
    finally:
        for te in tiled.values():
            te.release()
    return True


# ---- the remote tier ------------------------------------------------------------------------

def remote_namespace(o, layer, w):
    """The namespace of one layer's matrix on the servers, named by the
    model's configuration."""
    c = config_of(o)
    return f"sw-demo:{c['layers']}x{c['experts']}-{c['hidden']}-{c['ffn']}-{c['dtype']}-{c['seed']}:{layer}.{w}"


class LocalServers:
    """Two redis-servers of the demo's own, on unix sockets in a new
    directory under --dir (no port), stopped by stop(). Their endpoints are
    `endpoints`, comma-separated."""

    COUNT = 2

    def __init__(self, o):
        import shutil
        import socket

        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("--tier remote without --remote-endpoints starts redis-servers of its own: redis-server "
                             "is not on the PATH (Debian: apt-get install redis-server; tools/install_deps.sh)")
        self.dir = tempfile.mkdtemp(prefix="sw-demo-redis-", dir=os.path.abspath(o.dir))
        self.procs, socks = [], []
        for i in range(self.COUNT):
            sock = os.path.join(self.dir, f"redis{i}.sock")
            socks.append(sock)
            self.procs.append(subprocess.Popen(
                [binary, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700", "--save", "",
                 "--appendonly", "no", "--dir", self.dir, "--protected-mode", "yes",
                 "--maxmemory-policy", "noeviction", "--logfile", os.path.join(self.dir, f"redis{i}.log")]))
        deadline = time.monotonic() + 10
        for proc, sock in zip(self.procs, socks):
            while True:
                try:
                    with socket.socket(socket.AF_UNIX) as c:
                        c.connect(sock)
                        c.sendall(b"PING\r\n")
                        if c.recv(16).startswith(b"+PONG"):
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise SystemExit(f"redis-server did not start (see {self.dir}/redis*.log)")
                time.sleep(0.01)
        self.endpoints = ",".join(f"unix://{sock}" for sock in socks)

    def stop(self):
        import shutil

        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class RemoteSeed:
    """The experts seeded on the servers: per layer and matrix, a remote
    carrier of the experts' values in blocks of one expert tile, moved from
    the model file through the public API. The namespaces live as long as
    this object: release() deletes them."""

    def __init__(self, o, path):
        t0 = time.perf_counter()
        self.carriers = []
        total = 0
        for layer in range(o.layers):
            for w in MATRICES:
                ft = carriers.File.open_safetensors(path, [expert_name(layer, e, w) for e in range(o.experts)])
                n = ft.carrier.size()
                remote = carriers.Remote(0, endpoints=o.remote_endpoints, namespace=remote_namespace(o, layer, w),
                                         dtype=ft.dtype, block_elements=math.prod(ft.tile_shape))
                sw.move_async(sw.Tensor(ft.carrier, 0, sw.Layout.dense(n)), remote).wait()
                ft.carrier.release()
                self.carriers.append(remote)
                total += n * (2 if o.dtype == "bf16" else 4)
        servers = len(o.remote_endpoints)
        print(f"seeded {total / 2**20:.0f} MiB of experts into {servers} server{'s' * (servers > 1)} "
              f"({', '.join(o.remote_endpoints)}) in {time.perf_counter() - t0:.1f} s", flush=True)

    def release(self):
        for r in self.carriers:
            r.release()


# ---- the token stream and the shared block math ---------------------------------------------

def token_stream(o):
    """The decoded inputs, (tokens, hidden), or (tokens, batch, hidden)
    with --batch above 1: per sequence, x_t = rho x_{t-1} + sqrt(1 - rho^2)
    eps_t, each sequence from a seed of its own (the first's is the
    single-sequence stream's)."""
    seqs = []
    for b in range(o.batch):
        g = torch.Generator().manual_seed(o.seed + 1 + 7919 * b)
        x = torch.randn(o.hidden, generator=g)
        out = []
        for _ in range(o.tokens):
            out.append(x.clone())
            x = o.rho * x + math.sqrt(1 - o.rho * o.rho) * torch.randn(o.hidden, generator=g)
        seqs.append(torch.stack(out))
    return (seqs[0] if o.batch == 1 else torch.stack(seqs, 1)).to(o.torch_dtype)


def experts_of(ids):
    """A layer's chosen experts: one sequence's in top-k order; a batch's
    union, each once, in the order the rows name them."""
    return list(dict.fromkeys(int(e) for e in ids.flatten()))


def torch_experts(n, ids, gates, weights_of):
    """The MoE block's output in PyTorch ops: each chosen expert once, on
    the rows that chose it (weights_of(e) gives its w1, w3, w2), gated and
    summed."""
    y = torch.empty(ids.shape[0], ids.shape[1], n.shape[-1], dtype=n.dtype)
    for e in experts_of(ids):
        rows, js = (ids == e).nonzero(as_tuple=True)
        w1, w3, w2 = weights_of(e)
        x = n[rows]
        y[rows, js] = F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)
    return gated_sum(y, gates)


def rms_norm(h, weight, eps=1e-5):
    """Mixtral's RMSNorm: in f32, rounded back to the weights' dtype."""
    h32 = h.float()
    return (h32 * torch.rsqrt(h32.pow(2).mean(-1, keepdim=True) + eps)).to(weight.dtype) * weight


def route(n, gate, topk):
    """Router linear, softmax (f32), top-k, renormalised gates (as Mixtral).
    Equal probabilities (bf16 logits tie often) go to the lower expert
    index, as sw_topk and so the C twin break ties: torch.topk leaves the
    choice among equal values unspecified."""
    probs = torch.softmax(F.linear(n, gate).float(), dim=-1)
    values, ids = torch.sort(probs, dim=-1, descending=True, stable=True)
    values, ids = values[..., :topk], ids[..., :topk]
    return ids, values / values.sum(-1, keepdim=True)


def gated_sum(y, gates):
    """sum_j gates[:, j] * y[:, j] in f32, rounded to y's dtype."""
    return (gates[:, :, None] * y.float()).sum(1).to(y.dtype)


class Shared:
    """What every run reads once: the dense router and norm weights; with
    `experts` (the PyTorch peer) every tensor of the file, in memory."""

    def __init__(self, o, path, experts=True):
        from safetensors import safe_open
        from safetensors.torch import load_file

        if experts:
            # Read into memory (pread), every weight resident: the default
            # backend maps the file, and a tensor's pages would then fault
            # in from the page cache as the decoder first touches them.
            try:
                weights = load_file(path, backend="pread")
            except TypeError:  # a safetensors without backends
                weights = {k: v.clone() for k, v in load_file(path).items()}
        else:
            with safe_open(path, "pt") as f:
                weights = {name(layer): f.get_tensor(name(layer)) for layer in range(o.layers)
                           for name in (gate_name, norm_name)}
        self.gates = [weights[gate_name(layer)] for layer in range(o.layers)]
        self.norms = [weights[norm_name(layer)] for layer in range(o.layers)]
        self.experts = weights if experts else None  # the PyTorch peer keeps the expert tensors


# ---- the runs -------------------------------------------------------------------------------

class Stats:
    def __init__(self, name):
        self.name = name
        self.step_ms = []
        self.hits = 0
        self.required = 0
        self.predicted = 0
        self.predicted_right = 0
        self.bytes_read: int | None = 0  # None where the kernel does not count them
        self.wait_ms = 0.0
        self.prefetch_skipped = 0
        self.outputs = None
        self.step_hit_rate = []  # the running hit rate after each timed step
        self.step_wait_ms = []  # the offloaded run's wait ms in each timed step
        self.routes = []
        self.marks = {}
        self.probes = []  # (tokens decoded, bytes read so far, the tier bandwidth of the segment it ends) per pause
        self.device = []  # (tokens decoded, DiskActivity before the pause's probe, after it) per pause
        self.start_rss_bytes = None  # the run's process's resident set when the run began
        self.peak_rss_bytes = None  # its peak resident set
        self.budget_bytes = None  # the expert bytes it keeps in memory by design (None: unbudgeted)
        self.layer_times: list[Any] = []  # the offloaded run's per-layer times
        self.batch = 1  # sequences per step

    def reset(self):
        """Forgets the warm-up: counters restart."""
        self.hits = self.required = self.predicted = self.predicted_right = self.bytes_read = 0
        self.wait_ms = 0.0
        self.prefetch_skipped = 0
        if self.on_reset:
            self.on_reset()

    # Hooks the runs set: on_reset() after the warm-up, on_step() after each timed step.
    on_reset: Callable[[], None] | None = None
    on_step: Callable[..., Any] | None = None  # refreshes the counters after each timed step (policy statistics)

    @property
    def seconds(self):
        return sum(self.step_ms) / 1000

    @property
    def tokens_per_s(self):
        return self.batch * len(self.step_ms) / self.seconds if self.step_ms else 0.0

    @property
    def hit_rate(self):
        return self.hits / self.required if self.required else float("nan")


def decode(o, shared, stream, stats, moe, before_layer=None, pause=None):
    """Runs the stack over the stream; moe(layer, n, ids, gates) gives the
    block's MoE output (1, H). Returns the final hidden states (T, H). The
    first o.warmup tokens run untimed (first-use costs: kernel selection,
    the page cache's or the LRU's first fills), then the stream is decoded
    from its start, timed. pause(t), if given, runs before the first timed
    token and after every --probe-every tokens (t: the tokens decoded so
    far); it returns milliseconds to count in the last token's time."""
    def step(t):
        h = stream[t:t + 1] if o.batch == 1 else stream[t]  # (batch, hidden)
        for layer in range(o.layers):
            n = rms_norm(h, shared.norms[layer])
            ids, gates = route(n, shared.gates[layer], o.topk)
            if before_layer:
                before_layer(layer, h, ids)
            h = h + moe(layer, n, ids, gates)
            stats.routes[-1].append(experts_of(ids))
        return h[0] if o.batch == 1 else h

    stats.batch = o.batch

    with QuietCollector():
        return decode_steps(o, stream, stats, step, pause)


class QuietCollector:
    """Python's cycle collector kept out of the timed loop, for every run
    alike: what the process holds when decoding starts (PyTorch's and the
    model's objects) is frozen out of its reach and the collector is off
    until the run ends. Left on, the objects each call allocates (awaits,
    tensor wrappers) set off full collections over all of it, tens of
    milliseconds each at random tokens: the stall a serving process avoids
    the same way."""

    def __enter__(self):
        self.was_enabled = gc.isenabled()
        gc.collect()
        gc.freeze()
        gc.disable()

    def __exit__(self, *exc):
        gc.unfreeze()
        if self.was_enabled:
            gc.enable()


def decode_steps(o, stream, stats, step, pause):
    routes = stats.routes = []
    for t in range(min(o.warmup, o.tokens)):
        routes.append([])
        step(t)
    stats.reset()
    routes.clear()
    outs = []
    if pause:
        pause(0)
    for t in range(o.tokens):
        t0 = time.perf_counter()
        routes.append([])
        outs.append(step(t))
        stats.step_ms.append((time.perf_counter() - t0) * 1000)
        if stats.on_step:
            stats.on_step()
        if pause and ((t + 1) % o.probe_every == 0 or t + 1 == o.tokens):
            stats.step_ms[-1] += pause(t + 1)
        if not o.quiet and (t + 1) % max(1, o.tokens // 8) == 0:
            hr = "" if stats.required == 0 else f", hit rate {100 * stats.hit_rate:.0f}%"
            print(f"  {stats.name:9s} token {t + 1:3d}/{o.tokens}: {stats.step_ms[-1]:7.2f} ms{hr}", flush=True)
    stats.routes = routes
    return torch.stack(outs)


def run_pytorch(o, shared, stream):
    st = Stats("pytorch")
    w = shared.experts

    def moe(layer, n, ids, gates):
        return torch_experts(n, ids, gates, lambda e: [w[expert_name(layer, e, m)] for m in PRODUCT_ORDER])

    with torch.no_grad():
        st.outputs = decode(o, shared, stream, st, moe)
    return st


class StrideWeaveModel:
    """Each layer's w1, w2 and w3 as three TiledEvictables of one expert per
    tile over the model file's per-expert tensors (grid (1, 1, E), tile
    (K, N, 1): the file's row-major (N, K) weights as they lie)."""

    def __init__(self, o, path, policy_for=None, tier="direct", gguf=None):
        self.o = o
        self.gguf = gguf  # the --quant GGUF file: the experts are its stacked tensors, one expert per tile
        self.out_dtype = sw.bfloat16 if gguf and o.dtype == "bf16" else None
        self.budgeted = policy_for is not None
        self.after_submit = None  # called with the layer once its requests are submitted
        self.ahead = {}  # (layer, matrix) -> {expert: await}: promotions issued before the layer ran, not waited for
        self.wait_ms = 0.0  # spent waiting for them
        self.skipped = 0  # ahead promotions refused (a tile they would evict still loading)
        self.layers = []
        self.policies = []
        self.tile_bytes = {}
        for layer in range(o.layers):
            per = {}
            for w in MATRICES:
                if gguf:
                    ft = carriers.File.open_gguf(gguf, gguf_name(layer, w), direct_io=(tier == "direct"),
                                                 chunk_bytes=FILE_CHUNK, requests_in_flight=FILE_IN_FLIGHT)
                    policy = policy_for() if policy_for else None
                    te = ft.tiled(residency_policy=policy)
                    per[w] = (te, te.full_tensor())
                    if policy is not None:
                        self.policies.append((layer, w, policy))
                    self.tile_bytes[w] = ft.data_bytes // o.experts
                    continue
                names = [expert_name(layer, e, w) for e in range(o.experts)]
                ft = carriers.File.open_safetensors(path, names, direct_io=(tier == "direct"), chunk_bytes=FILE_CHUNK,
                                                    requests_in_flight=FILE_IN_FLIGHT)
                policy = policy_for() if policy_for else None
                if tier == "remote":
                    # The values seeded on the servers (RemoteSeed), read-only.
                    r = carriers.Remote.open(ft.carrier.size(), endpoints=o.remote_endpoints,
                                             namespace=remote_namespace(o, layer, w), dtype=ft.dtype, read_only=True,
                                             chunk_bytes=FILE_CHUNK, requests_in_flight=FILE_IN_FLIGHT)
                    te = sw.TiledEvictable(carriers.CPU(0, dtype=ft.dtype), r, ft.grid_shape, ft.tile_shape,
                                           residency_policy=policy)
                    ft.carrier.release()
                elif tier == "zstd":
                    # The same values, held compressed in memory instead of in the file.
                    src = ft.tiled()
                    z = carriers.Zstd(src.size(), dtype=ft.dtype, level=1)
                    te = sw.TiledEvictable(carriers.CPU(0, dtype=ft.dtype), z, ft.grid_shape, ft.tile_shape,
                                           residency_policy=policy)
                    everything = sw.TileSelection([[0], [0], list(range(o.experts))])
                    for e in range(o.experts):
                        one = sw.TileSelection([[0], [0], [e]])
                        part = src.project(src.full_tensor(), one).wait()
                        te.update_async(te.full_tensor(), part, one).wait()
                    te.evict(everything)
                    src.release()
                else:
                    te = ft.tiled(residency_policy=policy)
                per[w] = (te, te.full_tensor())
                if policy is not None:
                    self.policies.append((layer, w, policy))
            self.layers.append(per)
        if not gguf:
            self.tile_bytes = {w: o.hidden * o.ffn * (2 if o.dtype == "bf16" else 4) for w in MATRICES}
        self.explicit_bytes = 0  # read by explicit promotions (the LRU statistics count only its own plans)
        self.read_log = []  # the tensor names of the tiles read from the tier, in request order
        # Per layer of a budgeted run: (the most experts any of its three
        # matrices had to read, ms in its expert_ffn call, ms of glue since
        # the previous call returned: norms, routers, the predictions' and
        # the calls' set-up).
        self.layer_times = []
        self.last_return = None

    def settle(self, a):
        """a.wait(), with --poll polling a.done() first: the decoding thread
        stays runnable while a transfer completes instead of sleeping on it.
        Each poll yields the core (sched_yield), but on two cores the polling
        thread still takes time from the runtime's workers, which compute a
        layer's products as its tiles land (docs/moe-offload.md, 6.): off by
        default."""
        if self.o.poll:
            while not a.done():
                os.sched_yield()
        return a.wait()

    def wait_ahead(self, layer, w, experts=None):
        """Waits for the promotions issued ahead of these experts (every one,
        by default) of one matrix of a layer."""
        ahead = self.ahead.get((layer, w))
        if not ahead:
            return
        t0 = time.perf_counter()
        for e in list(ahead) if experts is None else [e for e in experts if e in ahead]:
            self.settle(ahead.pop(e))
        self.wait_ms += (time.perf_counter() - t0) * 1000

    def drain(self):
        for layer, w in list(self.ahead):
            self.wait_ahead(layer, w)

    def in_place(self, layer, w, e):
        """Expert e of that matrix is primary or on its way there."""
        a = self.ahead.get((layer, w), {}).get(e)
        if a is not None and a.done():
            self.wait_ahead(layer, w, [e])
            a = None
        return a is not None or self.layers[layer][w][0].tile_state((0, 0, e)).location == "primary"

    def promote_ahead(self, layer, w, experts, demand):
        """Promotes these experts of one matrix of a later layer together, in
        one request: promote_async when `demand` (the next layer's
        predictions: reads as urgent as the current layer's), else
        prefetch_async (farther layers: reads that yield to those). One
        request, so that the policy keeps every one of them: promoting a
        missing one alone could evict another predicted one that is
        resident. False when refused: a tile the policy would evict for
        them is still loading (a hint, skipped)."""
        if all(self.in_place(layer, w, e) for e in experts):
            return True
        ahead = self.ahead.setdefault((layer, w), {})
        experts = [e for e in experts if e not in ahead]  # those on their way are not requested again
        try:
            a = self.promote(layer, w, experts, prefetch=not demand)
        except sw.StrideWeaveRuntimeError:
            self.skipped += 1
            return False
        for e in experts:
            ahead[e] = a
        return True

    def promote(self, layer, w, experts, prefetch=False):
        """Promotes these experts of one matrix of a layer: promote_async, or
        with `prefetch` prefetch_async (its reads yield to the other
        requests'). Counts the bytes it reads from the tier."""
        te = self.layers[layer][w][0]
        missing = [int(e) for e in experts if te.tile_state((0, 0, int(e))).location != "primary"]
        tiles = sw.TileSet([(0, 0, int(e)) for e in experts])
        a = te.prefetch_async(tiles) if prefetch else te.promote_async(tiles)
        self.explicit_bytes += len(missing) * self.tile_bytes[w]
        self.read_log += [expert_name(layer, e, w) for e in missing]
        return a

    def moe(self, layer, n, ids, gates):
        """The layer's experts in one sw.expert_ffn call: every token's
        w2(silu(w1 x) * w3 x), gated and summed, each expert's products run
        on its tiles as they are there (a missing expert's w1, w3 and w2
        tiles are read in that order, each product starting as its tile
        lands). Logs the tiles the call reads (the chosen experts not
        primary in each matrix when it starts); the promotions issued ahead
        of the chosen experts are waited for first."""
        t_in = time.perf_counter()
        x = sw.from_dlpack(n)
        idt = sw.from_dlpack(ids)
        g = sw.from_dlpack(gates)
        chosen = sorted(experts_of(ids))
        per = self.layers[layer]
        t0 = time.perf_counter()
        for w in PRODUCT_ORDER:
            self.wait_ahead(layer, w, chosen)
        missing = 0
        reads = []
        if self.budgeted:
            for w in PRODUCT_ORDER:
                miss = [e for e in chosen if per[w][0].tile_state((0, 0, e)).location != "primary"]
                missing = max(missing, len(miss))
                reads += [expert_name(layer, e, w) for e in miss]
        if self.after_submit and not missing:
            # Nothing to read: the call computes before it returns, and the
            # later layers' promotions go first or the disk would idle through it.
            self.after_submit(layer)

        def start():
            return sw.expert_ffn(x, idt, per["w1"][1], per["w3"][1], per["w2"][1], g, out_dtype=self.out_dtype)

        a = self.submit(layer, start)
        self.read_log += reads
        if self.after_submit and missing:
            self.after_submit(layer)
        y = torch.from_dlpack(self.settle(a))
        t_out = time.perf_counter()
        if missing:
            self.wait_ms += (t_out - t0) * 1000
        if self.budgeted:
            glue = None if self.last_return is None else (t_in - self.last_return) * 1000
            self.layer_times.append((missing, (t_out - t_in) * 1000, glue))
        self.last_return = t_out
        return y

    def submit(self, layer, start):
        """start() the layer's call; when a promotion issued ahead still owns
        a tile its plan needs (STATE: an incomplete residency request), wait
        for the layer's promotions ahead and start it again."""
        try:
            return start()
        except sw.StrideWeaveRuntimeError as e:
            if "residency request" not in str(e) or not any(self.ahead.get((layer, w)) for w in MATRICES):
                raise
            for w in PRODUCT_ORDER:
                self.wait_ahead(layer, w)
            return start()

    def promote_all(self):
        everything = sw.TileSelection([[0], [0], list(range(self.o.experts))])
        for per in self.layers:
            for te, _ in per.values():
                te.promote(everything)

    def release(self):
        for per in self.layers:
            for te, _ in per.values():
                te.release()


class GlueOnOneThread:
    """PyTorch on one thread for the StrideWeave runs, whose PyTorch ops are
    only the glue (norms, routers, the residual add: microseconds each).
    Their experts' products run on StrideWeave's pool, as many threads as the
    cores; PyTorch's OpenMP threads would also stay awake after each glue op
    (libgomp spins before it sleeps) and take those cores from the pool: on
    a two-core machine that halved the resident run's speed."""

    def __enter__(self):
        self.saved = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.set_num_threads(self.saved)


def run_resident(o, shared, stream, path, gguf=None, name="resident"):
    st = Stats(name)
    model = StrideWeaveModel(o, path, tier="page-cache", gguf=gguf)
    model.promote_all()
    with GlueOnOneThread(), sw.no_grad():
        st.outputs = decode(o, shared, stream, st, model.moe)
    model.release()
    return st


def run_offloaded(o, shared, stream, path, probe=None, gguf=None, name="offloaded"):
    """probe: a TierProbe, measured at each pause of the run (st.probes:
    (tokens decoded, bytes read so far, bandwidth) at each). gguf: the
    experts from that --quant file instead of the model file."""
    st = Stats(name)
    model = StrideWeaveModel(o, path, policy_for=lambda: sw.LRUPolicy(o.budget_tiles), tier=o.tier, gguf=gguf)
    pending: dict[int, set[int]] = {}  # layer -> the experts predicted for it, not yet scored
    current = {}

    def before_layer(layer, h, ids):
        # Scores the layer's prediction; the promotions issued for it are
        # waited for matrix by matrix, by the layer's own requests.
        if layer in pending:
            predicted = pending.pop(layer)
            used = set(experts_of(ids))
            st.predicted += len(predicted)
            st.predicted_right += len(used & predicted)
        current["h"] = h

    def prefetch(layer):
        # Once this layer's requests are queued, predict the experts of the
        # next --lookahead layers from the current hidden state through their
        # routers (the residual stream changes little from layer to layer,
        # the premise of Pre-gated MoE and MoE-Infinity) and promote the
        # likeliest ahead: every predicted one for the next layer (as urgent
        # as this layer's own reads, promote_async), whose prediction is
        # redone here with the newer hidden state, and --prefetch-experts of
        # them for a farther layer (prefetch_async, yielding to the others).
        # Matrices in product order, w1 first; a layer's predicted experts in
        # one request per matrix. Without --prefetch the predictions are only
        # scored.
        for nxt in range(layer + 1, min(o.layers, layer + 1 + o.lookahead)):
            if nxt in pending and nxt != layer + 1:
                continue
            guess, _ = route(rms_norm(current["h"], shared.norms[nxt]), shared.gates[nxt], o.topk)
            ranked = experts_of(guess)
            count = len(ranked) if nxt == layer + 1 else o.prefetch_experts
            if o.prefetch:
                for w in PRODUCT_ORDER:
                    if not model.promote_ahead(nxt, w, ranked[:min(count, o.budget_tiles)], demand=nxt == layer + 1):
                        break
            pending[nxt] = set(ranked)

    # Without --prefetch the predictions are only scored, and nothing the
    # run does depends on them: the scoring replays after each token, out of
    # its time, in the order the calls came (with --prefetch they run inside).
    deferred: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
    if o.prefetch:
        model.after_submit, layer_hook = prefetch, before_layer
    else:
        model.after_submit = lambda layer: deferred.append((prefetch, (layer,)))
        layer_hook = lambda layer, h, ids: deferred.append((before_layer, (layer, h, ids)))  # noqa: E731

    before: dict[Any, Any] = {}

    def on_reset():
        before.update({(layer, w): dict(p.stats()) for layer, w, p in model.policies})
        before["explicit"] = model.explicit_bytes
        before["wait_ms"], before["skipped"] = model.wait_ms, model.skipped

    st.on_reset = on_reset

    def refresh():
        st.bytes_read = model.explicit_bytes - before["explicit"]
        st.wait_ms = model.wait_ms - before["wait_ms"]
        st.prefetch_skipped = model.skipped - before["skipped"]
        st.hits = st.required = 0
        for layer, w, p in model.policies:
            s, b = p.stats(), before[(layer, w)]
            st.bytes_read += (s["promoted"] - b["promoted"] + s["transient"] - b["transient"]) * model.tile_bytes[w]
            if w == "w1":
                st.hits += s["hits"] - b["hits"]
                st.required += (s["hits"] - b["hits"]) + (s["misses"] - b["misses"])

    def count():
        for f, args in deferred:
            f(*args)
        deferred.clear()
        waited = st.wait_ms
        refresh()
        st.step_hit_rate.append(st.hit_rate)
        st.step_wait_ms.append(st.wait_ms - waited)

    def pause(t):
        # The tier is probed with nothing of the run in flight: the wrong
        # guesses still loading are waited for, and that wait is the run's.
        # Then the segment's reads are read again without StrideWeave.
        t0 = time.perf_counter()
        model.drain()
        waited = (time.perf_counter() - t0) * 1000
        counted = st.wait_ms
        refresh()
        if st.step_wait_ms:  # the wait counts in the last token's time
            st.step_wait_ms[-1] += st.wait_ms - counted
        names = model.read_log
        model.read_log = []
        before = probe.disk.snapshot() if probe.disk else None
        st.probes.append((t, st.bytes_read, probe.measure(names) if t else None))
        if before:
            st.device.append((t, before, probe.disk.snapshot()))
        return waited

    st.on_step = count
    def reset_and_log():
        deferred.clear()  # the warm-up's predictions are not scored (no token starts with one pending)
        on_reset()
        model.read_log = []  # the warm-up's reads are not the run's
        model.layer_times = []

    st.on_reset = reset_and_log
    with GlueOnOneThread(), sw.no_grad():
        st.outputs = decode(o, shared, stream, st, model.moe, layer_hook, pause if probe else None)
    model.drain()
    refresh()
    st.layer_times = model.layer_times
    model.release()
    return st


def idle_disk(o, off):
    """Where the offloaded run's time goes, from its layers' expert_ffn
    calls: the layers whose chosen experts were all primary (the call
    computes with nothing to read, and the next layer's misses are unknown
    until its router runs: the disk idles through it), the layers with
    misses (their reads, the products computed as the tiles land), and the
    rest of each token outside the calls (norms, routers, the calls'
    set-up), during which no read of the run is in flight either. None
    without layer times, and with --prefetch (a layer's experts may then be
    on their way rather than primary)."""
    times = getattr(off, "layer_times", None)
    if not times or o.prefetch:
        return None
    primary = [ms for missing, ms, _ in times if not missing]
    misses = [ms for missing, ms, _ in times if missing]
    n = o.tokens * o.batch  # per token of any sequence: a step decodes --batch of them
    token_ms = 1000 * off.seconds / n
    return {"all_primary_layers_per_token": len(primary) / n,
            "all_primary_layer_ms": statistics.median(primary) if primary else None,
            "layers_with_misses_per_token": len(misses) / n,
            "miss_layer_ms": statistics.median(misses) if misses else None,
            "ms_per_token": sum(primary) / n,
            "miss_layers_ms_per_token": sum(misses) / n,
            "outside_calls_ms_per_token": token_ms - (sum(primary) + sum(misses)) / n}


class DiskActivity:
    """The block device under a file, as the kernel counts it
    (/proc/diskstats): the bytes read from it and the time it had requests
    in flight (io_ticks, in ms). Between two snapshots, the bytes over that
    time are the device's read bandwidth while it was busy, measured in the
    run itself; the time alone is how long the run kept the device busy.
    None (from open) when the file is on no block device the kernel counts."""

    @staticmethod
    def open(path):
        dev = os.stat(path).st_dev
        d = DiskActivity(os.major(dev), os.minor(dev))
        return d if d.snapshot() else None

    def __init__(self, major, minor):
        self.key = (str(major), str(minor))

    def snapshot(self):
        """(bytes read, busy seconds) so far, or None."""
        try:
            with open("/proc/diskstats") as f:
                for line in f:
                    v = line.split()
                    if (v[0], v[1]) == self.key and len(v) >= 13:
                        return int(v[5]) * 512, int(v[12]) / 1000
        except OSError:
            pass
        return None


class DirectReader:
    """Whole-region reads with O_DIRECT into one aligned buffer."""

    ALIGN = 4096

    def __init__(self, path, direct=True):
        flags = os.O_RDONLY | (getattr(os, "O_DIRECT", 0) if direct else 0)
        try:
            self.fd = os.open(path, flags)
        except OSError:
            self.fd = os.open(path, os.O_RDONLY)  # a file system without O_DIRECT
        self.buffers = {}

    def read(self, offset, count, slot=0):
        start = offset // self.ALIGN * self.ALIGN
        end = -(-(offset + count) // self.ALIGN) * self.ALIGN
        buf = self.buffers.get(slot)
        if buf is None or len(buf) < end - start:
            buf = self.buffers[slot] = mmap.mmap(-1, end - start)
        view = memoryview(buf)[:end - start]
        got = os.preadv(self.fd, [view], start)
        if got < offset + count - start:
            raise OSError(f"short read at byte {start} of the model file")
        return memoryview(buf)[offset - start:offset - start + count]

    def close(self):
        os.close(self.fd)


def run_naive(o, shared, stream, path, regions):
    st = Stats("naive")
    reader = DirectReader(path)

    def weights_of(layer, e):
        w = []
        for i, m in enumerate(PRODUCT_ORDER):
            off, count = regions[expert_name(layer, e, m)]
            raw = reader.read(off, count, slot=i)
            st.bytes_read += count
            shape = (o.ffn, o.hidden) if m != "w2" else (o.hidden, o.ffn)
            w.append(torch.frombuffer(raw, dtype=o.torch_dtype).view(shape))
        return w

    def moe(layer, n, ids, gates):
        return torch_experts(n, ids, gates, lambda e: weights_of(layer, e))

    with torch.no_grad():
        st.outputs = decode(o, shared, stream, st, moe)
    reader.close()
    return st


def gguf_regions(o, gguf):
    """{(layer, matrix): (byte offset of expert 0, bytes per expert)} of the
    --quant file's stacked expert tensors."""
    regions = {}
    for layer in range(o.layers):
        for w in MATRICES:
            ft = carriers.File.open_gguf(gguf, gguf_name(layer, w))
            regions[(layer, w)] = (ft.data_offset, ft.data_bytes // o.experts)
            ft.carrier.release()
    return regions


def run_q_naive(o, shared, stream, gguf):
    """On-demand loading of the quantized experts: each chosen expert's
    blocks of w1, w3 and w2 read from the GGUF file (direct I/O), made a
    quantized tensor (sw.from_blocks) and multiplied in place (sw.matmul of
    the f32 activations by the blocks), then dropped."""
    st = Stats("q-naive")
    regions = gguf_regions(o, gguf)
    reader = DirectReader(gguf)

    def weights_of(layer, e):
        w = []
        for i, m in enumerate(PRODUCT_ORDER):
            off, count = regions[(layer, m)]
            raw = reader.read(off + e * count, count, slot=i)
            st.bytes_read += count
            N = o.ffn if m != "w2" else o.hidden
            blocks = np.frombuffer(raw, dtype=np.uint8).reshape(N, count // N).T  # the first mode's blocks, (bytes, N)
            w.append(sw.from_blocks(blocks, o.quant))
        return w

    def moe(layer, n, ids, gates):
        y = torch.empty(ids.shape[0], ids.shape[1], n.shape[-1], dtype=n.dtype)
        for e in experts_of(ids):
            rows, js = (ids == e).nonzero(as_tuple=True)
            w1, w3, w2 = weights_of(layer, e)
            x = sw.from_dlpack(n[rows].float().contiguous())
            a = torch.from_dlpack(sw.matmul(x, w1))
            b = torch.from_dlpack(sw.matmul(x, w3))
            h = sw.from_dlpack((F.silu(a) * b).contiguous())
            y[rows, js] = torch.from_dlpack(sw.matmul(h, w2)).to(n.dtype)
        return gated_sum(y, gates)

    with GlueOnOneThread(), sw.no_grad():
        st.outputs = decode(o, shared, stream, st, moe)
    reader.close()
    return st


def run_mmap(o, shared, stream, path, regions):
    st = Stats("mmap")
    drop_page_cache(path)
    f = open(path, "rb")
    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    es = 2 if o.dtype == "bf16" else 4
    views = {}
    for name, (off, count) in regions.items():
        if ".experts." in name:
            views[name] = np.frombuffer(mm, dtype=np.uint16 if es == 2 else np.float32, count=count // es, offset=off)

    def weight(name, shape):
        return torch.from_numpy(views[name]).view(o.torch_dtype).view(shape)  # no copy: pages fault in

    def moe(layer, n, ids, gates):
        return torch_experts(n, ids, gates, lambda e: [weight(expert_name(layer, e, "w1"), (o.ffn, o.hidden)),
                                                       weight(expert_name(layer, e, "w3"), (o.ffn, o.hidden)),
                                                       weight(expert_name(layer, e, "w2"), (o.hidden, o.ffn))])

    # Its reads are the page faults': the bytes the kernel read from the
    # device for this process over the timed tokens (/proc/self/io), None
    # where the kernel does not count them.
    at: dict[str, int | None] = {}
    st.on_reset = lambda: at.update(start=storage_read_bytes())

    import warnings

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # read-only buffers: torch warns that it cannot write them
        st.outputs = decode(o, shared, stream, st, moe)
    end = storage_read_bytes()
    start = at.get("start")
    st.bytes_read = None if end is None or start is None else end - start
    views.clear()
    mm.close()
    f.close()
    return st


class TierProbe:
    """The tier's read bandwidth in bytes/s, measured at the offloaded run's
    pauses, for the segment just decoded (the speed of a shared virtual disk
    drifts from second to second, and it serves some regions faster than
    others, so the tier is measured on what the run read, where it read it).

    For the model file, measure(names) reads again the expert regions the
    segment read, twice, with nothing else running: once without StrideWeave,
    with preads as the file carrier issues them (1 MiB requests, the blocks
    enclosing a region's ends included, eight in flight, O_DIRECT for --tier
    direct, the page cache for page-cache), and once through StrideWeave's
    file carrier, promoting the same tiles of a second, unbudgeted copy of
    the model in batches of BATCH (a tile read twice in the segment is read
    twice). It returns the faster of the two: the bound is then the time the
    segment's bytes take to read the fastest way measured, and a slow reader
    on either side cannot loosen it (on the reference machine's virtual disk
    the file carrier read the same regions 30-45 % faster than the preads).
    `history` keeps both per pause. For the remote tier, the replay through
    a second copy of the model over the same namespaces (read-only) is the
    only measure (there is no reader without StrideWeave here; tools/bench
    has bench_remote for that). For zstd, it decompresses --probe-mib of
    the experts compressed at level 1 (the tier's level), on two threads as
    the runtime's workers; without the zstandard module there is no probe
    (measure() returns None)."""

    CHUNK, IN_FLIGHT = 1 << 20, 8  # the preads' requests: 1 MiB, eight threads
    BATCH = 12  # tiles the file-carrier replay promotes at once (two layers' misses)

    def __init__(self, o, path, regions):
        self.o, self.regions = o, regions
        self.replayed = 0  # bytes the file probes read (each replay)
        self.frames = self.disk = None
        self.readers: list[DirectReader] | None = None
        self.model: StrideWeaveModel | None = None
        self.history = []  # (the preads' bandwidth, the file carrier's) per measured pause
        self.local = threading.local()
        if o.tier == "zstd":
            try:
                import zstandard
            except ImportError:
                return
            names = [expert_name(layer, e, m) for layer in range(o.layers) for e in range(o.experts)
                     for m in MATRICES][:12]
            reader = DirectReader(path, direct=False)
            self.frames = [zstandard.ZstdCompressor(level=1).compress(bytes(reader.read(*regions[n]))) for n in names]
            reader.close()
            self.window = max(len(self.frames), (o.probe_mib << 20) // max(1, regions[names[0]][1]))
            self.pool = ThreadPoolExecutor(2)  # as many as the runtime has workers (2 by default)
        else:
            self.readers = [DirectReader(path, direct=o.tier == "direct") for _ in range(self.IN_FLIGHT)]
            self.lock, self.assigned = threading.Lock(), 0
            self.pool = ThreadPoolExecutor(self.IN_FLIGHT)
        # With direct I/O the run's reads reach the device, and the kernel's
        # count of its busy time is a second measure of the tier's bandwidth.
        self.disk = DiskActivity.open(path) if o.tier == "direct" else None
        if self.readers or o.tier == "remote":  # the replay through the file (or remote) carrier
            self.model = StrideWeaveModel(o, path, tier=o.tier)
            self.where = {expert_name(layer, e, w): (layer, w, e) for layer in range(o.layers)
                          for e in range(o.experts) for w in MATRICES}
            # Its tile buffers come from the runtime's pool: one untimed batch
            # first, so the timed ones find them allocated, as the run's do.
            self.replay(list(self.where)[:self.BATCH])

    def measure(self, names):
        if self.frames is not None:
            import zstandard

            def decompress(f):
                if not hasattr(self.local, "d"):
                    self.local.d = zstandard.ZstdDecompressor()
                return len(self.local.d.decompress(f))

            frames = [self.frames[i % len(self.frames)] for i in range(self.window)]
            t0 = time.perf_counter()
            total = sum(self.pool.map(decompress, frames))
            return total / (time.perf_counter() - t0)
        if self.o.tier == "remote":
            if not names:
                return None
            carrier = self.replay(names)
            self.replayed += sum(self.regions[n][1] for n in names)
            self.history.append((None, carrier))
            return carrier
        if self.readers is None or not names:
            return None
        pieces = []
        for n in names:
            off, count = self.regions[n]
            pieces += [(at, min(self.CHUNK, off + count - at)) for at in range(off, off + count, self.CHUNK)]
            self.replayed += count

        readers = self.readers

        def read(piece):
            r = getattr(self.local, "reader", None)
            if r is None:  # one reader (one buffer) per pool thread
                with self.lock:
                    r = self.local.reader = readers[self.assigned]
                    self.assigned += 1
            return len(r.read(*piece))

        t0 = time.perf_counter()
        total = sum(self.pool.map(read, pieces))
        preads = total / (time.perf_counter() - t0)
        carrier = self.replay(names)
        self.history.append((preads, carrier))
        return max(b for b in (preads, carrier) if b)

    def replay(self, names):
        """The bandwidth at which StrideWeave's file carrier reads these
        experts again: promoted BATCH at a time (a batch ends early at a
        tile it already holds), waited for, then evicted untimed."""
        model = self.model
        assert model is not None  # the file tiers replay through the file carrier
        batches: list[list[str]] = []
        batch: list[str] = []
        for n in names:
            if n in batch or len(batch) == self.BATCH:
                batches.append(batch)
                batch = []
            batch.append(n)
        batches.append(batch)
        total, seconds = 0, 0.0
        for batch in batches:
            groups: dict[tuple[int, str], list[int]] = {}
            for n in batch:
                layer, w, e = self.where[n]
                groups.setdefault((layer, w), []).append(e)
            t0 = time.perf_counter()
            awaits = [model.layers[layer][w][0].promote_async(sw.TileSet([(0, 0, e) for e in es]))
                      for (layer, w), es in groups.items()]
            for a in awaits:
                a.wait()
            seconds += time.perf_counter() - t0
            total += sum(self.regions[n][1] for n in batch)
            for (layer, w), es in groups.items():
                model.layers[layer][w][0].evict(sw.TileSelection([[0], [0], es]))
        return total / seconds if seconds > 0 else None

    def close(self):
        self.pool.shutdown()
        for r in self.readers or ():
            r.close()
        if self.model:
            self.model.release()


# ---- each run in a process of its own -------------------------------------------------------

SCRIPT = os.path.abspath(__file__)
READY, DONE = "MIXTRAL_OFFLOAD_READY", "MIXTRAL_OFFLOAD_DONE"


def proc_status(field):
    """A field of /proc/self/status in bytes (VmRSS, VmHWM); None without /proc."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def rss_bytes():
    """This process's resident set now."""
    return proc_status("VmRSS")


def peak_rss_bytes():
    """This process's peak resident set: VmHWM, the high-water mark of its
    own address space (not its children's, nor, as ru_maxrss can be after
    an exec, the process it was started from); ru_maxrss without /proc."""
    peak = proc_status("VmHWM")
    if peak is None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak = peak if sys.platform == "darwin" else peak * 1024
    return peak


def storage_read_bytes():
    """The bytes the kernel has read from storage for this process
    (/proc/self/io read_bytes: its reads and its page faults, not what the
    page cache served); None where the kernel does not count them."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Workers:
    """Runs each decoding run in a process of its own, so that its peak
    resident set (which no process can lower once reached) is that run's
    alone: the interpreter, PyTorch and StrideWeave, the weights it loads,
    its buffers and the file pages it maps. One process, started with this
    script's options and --worker, imports the modules once and creates no
    runtime and no thread of its own; for each run it forks a child, which
    decodes, pickles its Stats to the file the parent named and exits. The
    runs follow one another: no run is timed while another works. Their
    progress lines come back through its stdout."""

    def __init__(self, argv):
        env = dict(os.environ)
        package = os.path.dirname(os.path.dirname(os.path.abspath(sw.__file__)))
        env["PYTHONPATH"] = package + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen([sys.executable, SCRIPT, *argv, "--worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        self.started = False

    def run(self, name):
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both are pipes
        if not self.started:
            if self.proc.stdout.readline().strip() != READY:
                raise RuntimeError(f"the runs' process did not start (exit status {self.proc.wait()})")
            self.started = True
        fd, out = tempfile.mkstemp(prefix=f"mixtral-offload-{name}-", suffix=".pickle")
        os.close(fd)
        try:
            self.proc.stdin.write(json.dumps({"run": name, "out": out}) + "\n")
            self.proc.stdin.flush()
            status = None
            for line in self.proc.stdout:
                if line.startswith(DONE + " "):
                    status = int(line.split()[1])
                    break
                print(line, end="", flush=True)
            if status != 0:
                raise RuntimeError(f"the {name} run failed (exit status {status})")
            with open(out, "rb") as f:
                fields = pickle.load(f)
        finally:
            os.unlink(out)
        st = Stats(name)
        st.__dict__.update(fields)
        return st

    def stop(self):
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()


def forked(work):
    """Runs work() in a child forked from this process; the child's exit
    status is its return value (1 if it raised). Returns the child's pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = work()
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def workers_main(o, path):
    """--worker: forks a child per run the parent asks for (a JSON line:
    the run and the file for its Stats) and answers DONE with its exit
    status when it has ended."""
    print(READY, flush=True)
    while True:
        line = sys.stdin.readline()
        if not line:
            return 0
        job = json.loads(line)
        pid = forked(lambda: run_worker(o, job["run"], path, job["out"]))
        _, status = os.waitpid(pid, 0)
        print(f"{DONE} {os.waitstatus_to_exitcode(status)}", flush=True)


def run_worker(o, name, path, out):
    """One run in this process (a forked child): its Stats, with its
    resident set when the run began and its peak, pickled to `out`."""
    if o.threads:
        torch.set_num_threads(o.threads)
    probe = ProbeProcess(o, path) if name == "offloaded" else None
    start = rss_bytes()
    st = run_one(o, name, path, probe)
    st.start_rss_bytes = start
    st.peak_rss_bytes = peak_rss_bytes()
    with open(out, "wb") as f:
        pickle.dump({k: v for k, v in vars(st).items() if not callable(v)}, f)
    return 0


class ProbeProcess:
    """The offloaded run's TierProbe in a process of its own (forked before
    the run starts its runtime), with TierProbe's interface (measure,
    history, replayed, disk, close): the probe's buffers (a second model's
    tiles, the preads' buffers) are not the run's and would count in its
    peak resident set. One JSON line each way per measure."""

    def __init__(self, o, path):
        self.o = o
        self.history, self.replayed, self.disk = [], 0, None
        down, up = os.pipe(), os.pipe()

        def serve():
            os.close(down[1])
            os.close(up[0])
            with os.fdopen(down[0]) as inp, os.fdopen(up[1], "w") as outp:
                return probe_serve(o, path, inp, outp)

        self.pid = forked(serve)
        os.close(down[0])
        os.close(up[1])
        self.to, self.back = os.fdopen(down[1], "w"), os.fdopen(up[0])

    def ask(self, line):
        self.to.write(line + "\n")
        self.to.flush()
        reply = self.back.readline()
        if not reply:
            raise RuntimeError("the tier probe's process ended")
        return json.loads(reply)

    def start(self, path):
        """Opens the probe on the model file (its untimed first replay)."""
        self.disk = DiskActivity.open(path) if self.o.tier == "direct" else None
        self.ask("go")

    def measure(self, names):
        r = self.ask(json.dumps(names))
        self.history = [tuple(h) for h in r["history"]]
        self.replayed = r["replayed"]
        return r["bandwidth"]

    def close(self):
        self.to.close()
        os.waitpid(self.pid, 0)
        self.back.close()


def probe_serve(o, path, inp, outp):
    """The probe's process: a TierProbe measuring the names each line asks for."""
    if inp.readline().strip() != "go":
        return 0
    probe = TierProbe(o, path, tensor_regions(path))

    def reply(value):
        outp.write(json.dumps(value) + "\n")
        outp.flush()

    reply({"started": True})
    for line in iter(inp.readline, ""):
        bandwidth = probe.measure(json.loads(line))
        reply({"bandwidth": bandwidth, "history": probe.history, "replayed": probe.replayed})
    probe.close()
    return 0


def run_one(o, name, path, probe=None):
    """Decodes the stream one way, in this process; the Stats."""
    regions = tensor_regions(path)
    shared = Shared(o, path, experts=name == "pytorch")
    stream = token_stream(o)
    if name == "pytorch":
        return run_pytorch(o, shared, stream)
    if name == "resident":
        return run_resident(o, shared, stream, path)
    if name == "offloaded":
        probe.start(path)
        st = run_offloaded(o, shared, stream, path, probe)
        st.probe_bytes = probe.replayed
        st.probe_history = probe.history
        probe.close()
        return st
    if name == "naive":
        return run_naive(o, shared, stream, path, regions)
    if name == "q-offloaded":
        return run_offloaded(o, shared, stream, path, gguf=gguf_path_of(path, o.quant), name=name)
    if name == "q-resident":
        return run_resident(o, shared, stream, path, gguf=gguf_path_of(path, o.quant), name=name)
    if name == "q-naive":
        return run_q_naive(o, shared, stream, gguf_path_of(path, o.quant))
    return run_mmap(o, shared, stream, path, regions)


def lru_hit_rate(o, routing):
    """Hit rate a plain LRU of budget_tiles experts per layer gives this
    routing (no prefetch): routing[t][layer] is a list of expert ids."""
    hits = total = 0
    for layer in range(o.layers):
        cache: list[int] = []
        for t in range(len(routing)):
            for e in routing[t][layer]:
                total += 1
                if e in cache:
                    hits += 1
                    cache.remove(e)
                cache.append(e)
            while len(cache) > o.budget_tiles:
                cache.pop(0)
    return hits / total if total else float("nan")


# ---- report ---------------------------------------------------------------------------------

def segments_bound(res, segments):
    """The sum over segments (first token, end token, transfer seconds) of
    max(the resident run's compute time of the same tokens, the transfer);
    with the two terms' totals."""
    lower = compute = transfer = 0.0
    for t0, t1, x in segments:
        c = sum(res.step_ms[t0:t1]) / 1000 if res else 0.0
        lower += max(c, x)
        compute += c
        transfer += x
    return lower, compute, transfer


def lower_bound(o, off, res):
    """The offloaded run's lower bound in seconds, the sum over the segments
    between its pauses of max(the resident run's compute time of the same
    tokens, the bytes the segment read / the tier's bandwidth probed for it
    at its end); with the two terms' totals. Without a bandwidth (a segment
    that read nothing, or no zstd probe) its transfer term is 0."""
    lower, compute, transfer = segments_bound(res, [(t0, t1, (b1 - b0) / w1 if w1 else 0.0)
                                                    for (t0, b0, _), (t1, b1, w1) in zip(off.probes, off.probes[1:])])
    if not off.probes:  # not probed: the compute term alone
        compute = lower = res.seconds if res else 0.0
    return lower, compute, transfer


def device_bound(o, off, res):
    """The lower bound again with the device's own measure of the
    segments' transfers: per segment, max(the resident run's compute time
    of the same tokens, the time the device was busy in the segment). With
    the totals of the two terms, the bytes the device read and the seconds
    it was busy; None without device counts (not --tier direct)."""
    if len(off.device) < 2:
        return None
    pairs = list(zip(off.device, off.device[1:]))
    lower, compute, busy = segments_bound(res, [(t0, t1, before[1] - after[1])
                                                for (t0, _, after), (t1, before, _) in pairs])
    dev_bytes = sum(before[0] - after[0] for (_, _, after), (_, before, _) in pairs)
    # The probes' own reads as the device counted them.
    probe_busy = sum(after[1] - before[1] for _, before, after in off.device[1:])
    probe_bytes = sum(after[0] - before[0] for _, before, after in off.device[1:])
    return lower, compute, busy, dev_bytes, probe_busy, probe_bytes


def write_csv(o, runs):
    os.makedirs(os.path.dirname(os.path.abspath(o.csv)), exist_ok=True)
    with open(o.csv, "w") as f:
        f.write("run,batch,latency_ms,wait_ms,hit_rate\n")
        for st in runs:
            for i, ms in enumerate(st.step_ms):
                hr = f"{st.step_hit_rate[i]:.4f}" if i < len(st.step_hit_rate) else ""
                wait = f"{st.step_wait_ms[i]:.4f}" if i < len(st.step_wait_ms) else ""
                f.write(f"{st.name},{i},{ms:.4f},{wait},{hr}\n")


def plot(o, runs):
    """Speed beside memory: tokens/s per token with the offloaded run's
    running hit rate (top), each run's tokens/s (bottom left) and its peak
    resident set with the expert budget (bottom right; mmap's bar hatched:
    unbudgeted). Legends outside the data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    png = os.path.splitext(o.csv)[0] + ".png"
    fig = plt.figure(figsize=(13, 9))
    grid = fig.add_gridspec(2, 2, height_ratios=(1, 1))
    ax1 = fig.add_subplot(grid[0, :])
    ax2, ax3 = fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])
    colours = {st.name: f"C{i}" for i, st in enumerate(runs)}
    for st in runs:
        tps = [1000 * st.batch / ms for ms in st.step_ms]
        ax1.plot(range(1, len(tps) + 1), tps, label=st.name, color=colours[st.name])
    ax1.set_xlabel("token")
    ax1.set_ylabel("tokens/s (log)")
    ax1.set_yscale("log")
    ax1.set_title("decode speed per token; running hit rate (dashed, right axis)")
    hit = ax1.twinx()
    for st in runs:
        if st.step_hit_rate:
            hit.plot(range(1, len(st.step_hit_rate) + 1), [100 * h for h in st.step_hit_rate], "--",
                     color=colours[st.name], label=f"{st.name} hit rate")
    hit.set_ylabel("hit rate (%)")
    hit.set_ylim(0, 100)
    lines, labels = ax1.get_legend_handles_labels()
    more, more_labels = hit.get_legend_handles_labels()
    ax1.legend(lines + more, labels + more_labels, fontsize="small", loc="upper left", bbox_to_anchor=(1.07, 1),
               borderaxespad=0)
    names = [st.name for st in runs]
    x = range(len(runs))
    ax2.bar(x, [st.tokens_per_s for st in runs], color=[colours[n] for n in names])
    for i, st in enumerate(runs):
        label = f"{st.tokens_per_s:.1f}" + ("" if st.required == 0 or math.isnan(st.hit_rate) or st.name == "naive"
                                            else f"\nhit {100 * st.hit_rate:.0f}%")
        ax2.text(i, st.tokens_per_s, label, ha="center", va="bottom", fontsize="small")
    ax2.set_xticks(list(x), names)
    ax2.set_ylim(0, 1.25 * max(st.tokens_per_s for st in runs))
    ax2.set_ylabel("tokens/s")
    ax2.set_title(f"{o.layers}x{o.experts} experts, budget {100 * o.budget:.1f}%, tier {o.tier}")
    mib = [st.peak_rss_bytes / 2**20 for st in runs]
    bars = ax3.bar(x, mib, color=[colours[n] for n in names])
    for i, st in enumerate(runs):
        if st.budget_bytes is None:
            bars[i].set_hatch("//")
            bars[i].set_edgecolor("black")
        if st.start_rss_bytes is not None:
            ax3.hlines(st.start_rss_bytes / 2**20, i - 0.4, i + 0.4, colors="black", linestyles=":")
        budget = budget_cell(o, st.name, st.budget_bytes, expert_bytes_of(o)).replace(", ", ",\n").replace(" (", "\n(")
        ax3.text(i, mib[i], f"{mib[i]:.0f} MiB\nbudget:\n{budget}", ha="center", va="bottom", fontsize="x-small")
    ax3.set_xticks(list(x), names)
    ax3.set_ylim(0, 1.45 * max(mib))
    ax3.set_ylabel("peak RSS of the run's process (MiB)")
    ax3.set_title("memory: peak RSS (dotted: at the run's start); hatched: unbudgeted")
    fig.tight_layout()
    fig.savefig(png, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return png


def print_trace(o, st):
    """The run's TRACE lines, as examples/c/mixtral_offload.c prints them:
    per token its experts per layer (top-k order) and the sum and absolute
    sum of its final hidden state (in double, element by element), then the
    totals with the FNV-1a hash of the final states' bytes (tokens x hidden,
    row-major, the dtype's little-endian bytes), then the hit rate."""
    rows = st.outputs.float().tolist()
    total = total_abs = 0.0
    for t, row in enumerate(rows):
        for layer, ids in enumerate(st.routes[t]):
            print(f"TRACE route token={t} layer={layer} experts={','.join(str(e) for e in ids)}")
        s = a = 0.0
        for v in row:
            s += v
            a += abs(v)
        print(f"TRACE final token={t} sum={s:.17g} abs={a:.17g}")
        total += s
        total_abs += a
    h = 0xcbf29ce484222325
    for byte in st.outputs.contiguous().view(torch.uint8).numpy().tobytes():
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    print(f"TRACE checksum tokens={len(rows)} hidden={o.hidden} dtype={o.dtype} sum={total:.17g} "
          f"abs={total_abs:.17g} fnv1a={h:016x}")
    rate = st.hits / st.required if st.required else 0.0
    print(f"TRACE hit_rate hits={st.hits} required={st.required} rate={rate:.6f}", flush=True)


# ---- --train: SGD into the offloaded experts -------------------------------------------------

def add_train_options(p):
    g = p.add_argument_group("training (--train; the module docstring describes it)")
    g.add_argument("--train", action="store_true",
                   help="train the experts with SGD through the offloaded layers instead of decoding")
    g.add_argument("--steps", type=int, default=4, help="SGD steps, each over the whole token stream")
    g.add_argument("--lr", type=float, default=TRAIN_LR, help="SGD learning rate of the mean squared error")
    g.add_argument("--save", metavar="PATH", help="with --train: write the trained model as a Mixtral-layout "
                                                  ".safetensors and check it by reading it back")


def check_train_options(p, o):
    if o.steps < 1:
        p.error("--steps must be at least 1")
    if not (o.lr > 0 and math.isfinite(o.lr)):
        p.error("--lr must be a positive finite number")
    if o.save and not o.train:
        p.error("--save writes the trained model: it needs --train")


TRAIN_LR = 1.0
TRAIN_BOUND = 1e-4  # the trained experts against PyTorch's, relative to the largest weight (f32)
UPDATE_BOUND = 1e-3  # the same difference relative to the largest change training made


def train_target(o):
    """The fixed regression target of the stack's output: one N(0, 1) vector
    per token of the stream (seed + 2), f32."""
    g = torch.Generator().manual_seed(o.seed + 2)
    return torch.randn(o.tokens, o.hidden, generator=g)


class TrainingTier:
    """One matrix of one layer, trained: a TiledEvictable of f32 master
    weights with the model file's geometry (one expert per tile) over a
    writable secondary tier (a scratch file in --dir, with direct I/O for
    --tier direct; zstd-compressed memory for --tier zstd), filled once from
    the read-only model file, under an LRU budget of --budget of the experts.
    observe() follows every tile that left the dirty set: a dirty expert
    evicted, i.e. written to the secondary tier."""

    def __init__(self, o, path, layer, w):
        self.o, self.layer, self.w = o, layer, w
        names = [expert_name(layer, e, w) for e in range(o.experts)]
        ft = carriers.File.open_safetensors(path, names, direct_io=(o.tier == "direct"))
        src = ft.tiled()
        K, N = ft.tile_shape[0], ft.tile_shape[1]
        self.K, self.N, self.tile_bytes = K, N, K * N * 4
        secondary: carriers.Carrier
        if o.tier == "zstd":
            secondary = carriers.Zstd(src.size(), dtype=sw.float32, level=1, frame_elements=K * N)
        else:
            secondary = carriers.File(src.size(), dtype=sw.float32, directory=o.dir, direct_io=(o.tier == "direct"))
        self.lru = sw.LRUPolicy(o.budget_tiles)
        self.te = sw.TiledEvictable(carriers.CPU(0, dtype=sw.float32), secondary, ft.grid_shape, ft.tile_shape,
                                    residency_policy=self.lru)
        self.full = self.te.full_tensor()
        with sw.no_grad():
            for e in range(o.experts):  # one expert at a time: within any budget
                one = self.one(e)
                part = src.project(src.full_tensor(), one).wait()
                self.te.update_async(self.full, part.astype(sw.float32), one).wait()  # bf16 widens exactly
                src.evict(one)
                del part
        self.te.evict(self.everything())
        src.release()
        self.full.requires_grad = True
        self.dirty, self.primary, self.written_back = set(), set(), set()
        self.written = self.reloaded = self.updates = self.coalesced = self.max_primary = 0
        self.base = dict(self.lru.stats())

    def one(self, e):
        return sw.TileSelection([[0], [0], [e]])

    def everything(self):
        return sw.TileSelection([[0], [0], list(range(self.o.experts))])

    def observe(self):
        """Counts what changed since the last call: dirty experts written
        back, written-back experts read again (reloaded), the primary count."""
        dirty, primary = set(self.te.dirty_tiles), set(self.te.primary_tiles)
        cleaned = self.dirty - dirty
        self.written += len(cleaned)
        self.reloaded += len((primary - self.primary) & self.written_back)
        self.written_back |= cleaned
        self.dirty, self.primary = dirty, primary
        self.max_primary = max(self.max_primary, len(primary))

    def stats(self):
        s = self.lru.stats()
        return {k: s[k] - self.base[k] for k in s}

    def sgd(self, lr):
        """w -= lr * grad on the experts the gradient holds (a tile-sparse
        TiledEvictable: the experts no token used are implicit zeros), one
        expert at a time into the tiles in place (update_async "add").
        Returns how many experts it updated."""
        grad = self.full.grad  # on a TiledEvictable of the experts' geometry, as the experts
        assert grad is not None and isinstance(grad.carrier, sw.TiledEvictable)
        touched = [e for e in range(self.o.experts) if grad.carrier.tile_state((0, 0, e)).location != "implicit"]
        with sw.no_grad():
            for e in touched:
                one = self.one(e)
                g = grad.carrier.project(grad, one).wait()
                if self.te.tile_state((0, 0, e)).dirty:
                    self.coalesced += 1  # its previous update is still primary: one write will carry both
                self.te.update_async(self.full, g * -lr, one, "add").wait()
                self.updates += 1
                self.observe()
                del g
        self.full.grad = None
        del grad
        return len(touched)

    def expert(self, e):
        """Expert e as the checkpoint indexes it, (N, K) = nn.Linear's (out, in), read from its tier."""
        with sw.no_grad():
            compact = self.te.project(self.full, self.one(e)).wait()  # (K, N, 1)
        value = torch.from_dlpack(compact)[:, :, 0].T.clone()
        self.observe()
        return value

    def file_view(self, e):
        """Expert e's slots of the TiledEvictable as the checkpoint lays them out: (N, K), row-major."""
        return sw.Tensor(self.te, e * self.K * self.N, sw.Layout((self.N, self.K), (self.K, 1)))

    def release(self):
        self.te.release()


def sw_rms_norm(h, weight, eps=1e-5):
    return h * sw.rsqrt((h * h).mean(axis=-1, keepdims=True) + eps) * weight


def train_forward_sw(o, tiers, frozen, x):
    """The stack on the training tiers, recorded by StrideWeave's autograd:
    RMSNorm, router, softmax, top-k and renormalised gates as StrideWeave ops
    (differentiable in the hidden state; their weights frozen), the experts
    through expert_matmul (differentiable in the experts, the activations and
    the gates). Returns the output (T, H) and each layer's routing."""
    h, routes = x, []
    for layer in range(o.layers):
        t = tiers[layer]
        norm, router = frozen[layer]
        n = sw_rms_norm(h, norm)
        top, ids = sw.topk(sw.softmax(n @ router, axis=-1), o.topk, axis=-1)
        gates = top / top.sum(axis=-1, keepdims=True)
        a = t["w1"].te.expert_matmul(t["w1"].full, n, ids).wait()
        t["w1"].observe()
        b = t["w3"].te.expert_matmul(t["w3"].full, n, ids).wait()
        t["w3"].observe()
        y = t["w2"].te.expert_matmul(t["w2"].full, sw.silu(a) * b, ids, gates).wait()  # (T, H): the gated sum
        t["w2"].observe()
        h = h + y
        routes.append(ids.numpy().copy())
    return h, routes


class TorchTraining:
    """The correctness reference: the same model, loss and SGD in plain
    PyTorch autograd on resident f32 weights, one parameter per expert and
    matrix as in the checkpoint."""

    def __init__(self, o, shared):
        self.o = o
        self.norms = [w.float() for w in shared.norms]
        self.gates = [w.float() for w in shared.gates]
        self.w = {}
        for layer in range(o.layers):
            for m in MATRICES:
                # Copies (float() of an f32 tensor is the tensor): the checkpoint's values stay as they were.
                self.w[(layer, m)] = [shared.experts[expert_name(layer, e, m)].to(torch.float32, copy=True)
                                      .requires_grad_(True) for e in range(o.experts)]

    def forward(self, x):
        o, h, routes = self.o, x, []
        for layer in range(o.layers):
            n = rms_norm(h, self.norms[layer])
            ids, gates = route(n, self.gates[layer], o.topk)
            w1, w3, w2 = (self.w[(layer, m)] for m in ("w1", "w3", "w2"))
            ys = torch.zeros(h.shape[0], o.topk, o.hidden)
            for e in range(o.experts):
                t, j = torch.where(ids == e)
                if len(t):
                    ne = n[t]
                    ys = ys.index_put((t, j), F.linear(F.silu(F.linear(ne, w1[e])) * F.linear(ne, w3[e]), w2[e]))
            h = h + gated_sum(ys, gates)
            routes.append(ids.numpy().copy())
        return h, routes

    def sgd(self, lr):
        with torch.no_grad():
            for experts in self.w.values():
                for p in experts:
                    if p.grad is not None:  # an expert no token used has no gradient
                        p -= lr * p.grad
                        p.grad = None


def train_step(o, tiers, frozen, xs, ys, ref, x, target, learn):
    """One step on both sides: the loss of the current experts and, when
    `learn`, backward and the SGD update. Returns the step's figures."""
    every = [t for per in tiers for t in per.values()]
    before = [dict(t.stats(), written=t.written, reloaded=t.reloaded) for t in every]
    t0 = time.perf_counter()
    with GlueOnOneThread(), sw.enable_grad() if learn else sw.no_grad():
        h, routes = train_forward_sw(o, tiers, frozen, xs)
        diff = h - ys
        loss = (diff * diff).mean()
        value = loss.item()
        updated = 0
        if learn:
            loss.backward()
            for t in every:
                t.observe()  # the backward read the experts again (dx = dY W^T)
            updated = sum(t.sgd(o.lr) for t in every)
    sw_ms = (time.perf_counter() - t0) * 1000
    del h, diff, loss
    t0 = time.perf_counter()
    with torch.enable_grad() if learn else torch.no_grad():
        h, torch_routes = ref.forward(x)
        loss = F.mse_loss(h, target)
        if learn:
            loss.backward()
            ref.sgd(o.lr)
    torch_ms = (time.perf_counter() - t0) * 1000
    after = [dict(t.stats(), written=t.written, reloaded=t.reloaded) for t in every]
    row = {k: sum(a[k] - b[k] for a, b in zip(after, before)) for k in ("hits", "misses", "transient", "written",
                                                                       "reloaded")}
    row.update(loss=value, pytorch_loss=loss.item(), sw_ms=sw_ms, pytorch_ms=torch_ms, updated=updated,
               same_routing=all(np.array_equal(a, b) for a, b in zip(routes, torch_routes)))
    row["hit_rate"] = row["hits"] / (row["hits"] + row["misses"]) if row["hits"] + row["misses"] else float("nan")
    return row


def verify_trained(o, shared, ref, every):
    """Evicts every expert (the dirty ones are written to the secondary
    tier), reads each back from there and compares it with PyTorch's."""
    written_in_training = sum(t.written for t in every)
    for t in every:
        t.te.evict(t.everything())
        t.observe()
    v = {"dirty_evictions": written_in_training, "final_writes": sum(t.written for t in every) - written_in_training,
         "still_dirty": sum(len(t.te.dirty_tiles) for t in every),
         "still_primary": sum(len(t.te.primary_tiles) for t in every)}
    errors, update_errors, changes = [], [], []
    for t in every:
        pt = torch.stack([p.detach() for p in ref.w[(t.layer, t.w)]])
        w0 = torch.stack([shared.experts[expert_name(t.layer, e, t.w)].float() for e in range(o.experts)])
        got = torch.stack([t.expert(e) for e in range(o.experts)])
        diff, change, largest = (float(d.abs().max()) for d in (got - pt, pt - w0, pt))
        errors.append(diff / largest)
        update_errors.append(diff / change if change else math.inf)
        changes.append(change / largest)
        del pt, w0, got
    v.update(max_error=max(errors), max_update_error=max(update_errors), min_change=min(changes))
    return v


def train_main(o, path):
    """--train: returns 0 when the loss fell, every update reached the
    secondary tier and every trained expert read back from it equals
    PyTorch's."""
    print(f"StrideWeave {sw.__version__}: training the experts of a Mixtral-architecture MoE stack, {o.layers} "
          f"layers x {o.experts} experts (top-{o.topk}), hidden {o.hidden}, ffn {o.ffn}; checkpoint {o.dtype}, "
          f"f32 master weights on a writable {'zstd' if o.tier == 'zstd' else 'scratch file'} tier, primary budget "
          f"{o.budget_tiles} of {o.experts} experts per matrix; {o.steps} SGD steps (lr {o.lr:g}) over {o.tokens} "
          f"tokens; {torch.get_num_threads()} threads", flush=True)
    t0 = time.perf_counter()
    if make_model(o, path):
        print(f"wrote {path} ({os.path.getsize(path) / 2**20:.0f} MiB) in {time.perf_counter() - t0:.1f} s", flush=True)
    shared = Shared(o, path)
    x, target = token_stream(o).float(), train_target(o)
    t0 = time.perf_counter()
    tiers = [{m: TrainingTier(o, path, layer, m) for m in MATRICES} for layer in range(o.layers)]
    every = [t for per in tiers for t in per.values()]
    log(o, f"filled {len(every)} training tiers ({len(every) * o.experts * every[0].tile_bytes / 2**20:.0f} MiB of "
           f"f32 experts) from the model file in {time.perf_counter() - t0:.1f} s")
    frozen = [(sw.from_dlpack(shared.norms[layer].float()), sw.from_dlpack(shared.gates[layer].float().t()))
              for layer in range(o.layers)]
    xs, ys = sw.from_dlpack(x), sw.from_dlpack(target)
    ref = TorchTraining(o, shared)
    total = len(every) * o.experts

    rows = []
    for step in range(o.steps + 1):  # the last pass only measures the trained experts' loss
        learn = step < o.steps
        r = train_step(o, tiers, frozen, xs, ys, ref, x, target, learn)
        r["step"] = step + 1 if learn else "end"
        rows.append(r)
        label = f"step {step + 1}/{o.steps}" if learn else "trained"
        log(o, f"  {label}: loss {r['loss']:.6f} (PyTorch {r['pytorch_loss']:.6f}), {r['updated']} of {total} "
               f"expert gradients, {r['written']} dirty experts written back, {r['reloaded']} reloaded, hit rate "
               f"{100 * r['hit_rate']:.0f}%, {r['sw_ms']:.0f} ms")
    stats = {k: sum(t.stats()[k] for t in every) for k in ("requests", "hits", "misses", "transient")}
    hit_rate = stats["hits"] / (stats["hits"] + stats["misses"]) if stats["hits"] + stats["misses"] else None
    max_primary = max(t.max_primary for t in every)
    v = verify_trained(o, shared, ref, every)
    updates, coalesced = sum(t.updates for t in every), sum(t.coalesced for t in every)
    writes = v["dirty_evictions"] + v["final_writes"]

    print()
    print(f"{'step':>4s} {'loss':>12s} {'PyTorch':>12s} {'routing':>8s} {'expert grads':>12s} {'hit rate':>9s} "
          f"{'streamed':>9s} {'written':>8s} {'reloaded':>9s} {'ms':>8s} {'PyTorch ms':>10s}")
    for r in rows:
        grads = f"{r['updated']} of {total}" if r["step"] != "end" else "-"
        print(f"{r['step']:>4} {r['loss']:12.6f} {r['pytorch_loss']:12.6f} "
              f"{'same' if r['same_routing'] else 'DIFFERS':>8s} {grads:>12s} {100 * r['hit_rate']:8.1f}% "
              f"{r['transient']:9d} {r['written']:8d} {r['reloaded']:9d} {r['sw_ms']:8.0f} {r['pytorch_ms']:10.0f}")
    print()
    first, last = rows[0]["loss"], rows[-1]["loss"]
    fell = last < first
    print(f"loss {first:.6f} before training, {last:.6f} after {o.steps} steps"
          + ("" if fell else ": ERROR: it did not fall"))
    accounted = writes == updates - coalesced and v["still_dirty"] == 0 and v["still_primary"] == 0
    print(f"write-back: {updates} expert updates ({coalesced} onto an expert still dirty from its previous update); "
          f"{v['dirty_evictions']} dirty experts written to the secondary tier by evictions under the budget (at most "
          f"{max_primary} of {o.budget_tiles} experts primary), {v['final_writes']} by the final eviction; "
          f"{v['still_dirty']} still dirty" + ("" if accounted else
                                                ": ERROR: the writes do not account for every update"))
    close = v["max_error"] <= TRAIN_BOUND and v["max_update_error"] <= UPDATE_BOUND
    print(f"every trained expert, read back from the tier, vs PyTorch autograd: max error {v['max_error']:.2e} of the "
          f"largest weight (bound {TRAIN_BOUND:.0e}) and {v['max_update_error']:.2e} of the largest change training "
          f"made (bound {UPDATE_BOUND:.0e}); training changed every matrix by at least {v['min_change']:.2e} of its "
          f"largest weight" + ("" if close else ": ERROR: the experts differ from PyTorch's"))
    ok = fell and accounted and close
    saved = None
    if o.save:
        saved = save_trained(o, path, shared, tiers)
        ok = ok and saved["identical"]
    summary = {"mode": "train",
               "config": config_of(o) | {"tokens": o.tokens, "budget": o.budget, "budget_tiles": o.budget_tiles,
                                         "tier": o.tier, "steps": o.steps, "lr": o.lr, "train_dtype": "f32"},
               "loss_first": first, "loss_last": last, "losses": [r["loss"] for r in rows],
               "pytorch_losses": [r["pytorch_loss"] for r in rows],
               "same_routing": all(r["same_routing"] for r in rows),
               "max_error_vs_pytorch": v["max_error"], "max_update_error_vs_pytorch": v["max_update_error"],
               "error_bound": TRAIN_BOUND, "update_error_bound": UPDATE_BOUND, "min_relative_change": v["min_change"],
               "updates": updates, "updates_per_step": [r["updated"] for r in rows[:-1]],
               "coalesced_updates": coalesced, "dirty_evictions": v["dirty_evictions"],
               "final_writes": v["final_writes"], "dirty_writes": writes, "still_dirty": v["still_dirty"],
               "reloads": sum(r["reloaded"] for r in rows), "bytes_written": writes * every[0].tile_bytes,
               "max_primary": max_primary, "hit_rate": hit_rate, "requests": stats["requests"],
               "transient": stats["transient"], "saved": saved, "ok": ok}
    print("training verified: the loss fell, every update reached the secondary tier and the experts equal "
          "PyTorch's" if ok else "TRAINING CHECK FAILED")
    print("SUMMARY_JSON " + json.dumps(summary, sort_keys=True))
    for t in every:
        t.release()
    return 0 if ok else 1


def save_trained(o, path, shared, tiers):
    """--save: the trained model as a Mixtral-layout .safetensors in f32
    (norms and routers widened, experts as trained), each expert read tile
    by tile from its tier; then read back with safetensors and compared with
    the tiers' values."""
    from safetensors import safe_open

    tensors = {}
    for layer in range(o.layers):
        tensors[norm_name(layer)] = sw.from_dlpack(shared.norms[layer].float())
        tensors[gate_name(layer)] = sw.from_dlpack(shared.gates[layer].float())
        for e in range(o.experts):
            for m in MATRICES:
                tensors[expert_name(layer, e, m)] = tiers[layer][m].file_view(e)
    meta = {"format": "pt", "strideweave_trained": json.dumps(
        {"from": os.path.basename(path), "steps": o.steps, "lr": o.lr, "tokens": o.tokens, "seed": o.seed})}
    sw.save_safetensors(o.save, tensors, metadata=meta)
    wrong = 0
    with safe_open(o.save, "pt") as f:
        names_ok = set(f.keys()) == set(tensors)
        for layer in range(o.layers):
            for m in MATRICES:
                for e in range(o.experts):
                    saved = f.get_tensor(expert_name(layer, e, m))
                    wrong += not (saved.dtype == torch.float32 and torch.equal(saved, tiers[layer][m].expert(e)))
        meta_ok = (f.metadata() or {}).get("strideweave_trained") == meta["strideweave_trained"]
    identical = names_ok and meta_ok and wrong == 0
    print(f"saved {o.save} ({os.path.getsize(o.save) / 2**20:.0f} MiB, {len(tensors)} tensors): read back, "
          + ("every expert identical to its tier" if identical else f"{wrong} experts DIFFER"
             + ("" if names_ok else ", tensor names differ") + ("" if meta_ok else ", metadata differs")))
    return {"path": o.save, "tensors": len(tensors), "identical": identical}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    o = parse(argv)
    path = os.path.join(o.dir, f"mixtral-{o.layers}x{o.experts}-{o.hidden}-{o.ffn}-{o.dtype}.safetensors")
    if o.worker:
        return workers_main(o, path)
    if o.threads:
        torch.set_num_threads(o.threads)
    os.makedirs(o.dir, exist_ok=True)
    if o.train:
        return train_main(o, path)
    servers = None
    if o.tier == "remote" and not o.remote_endpoints:
        servers = LocalServers(o)
        argv += ["--remote-endpoints", servers.endpoints]  # the runs' processes parse them
        o.remote_endpoints = servers.endpoints.split(",")
        print(f"started {LocalServers.COUNT} redis-servers: {servers.endpoints}", flush=True)
    try:
        # The runs' process imports its modules while the checkpoint is
        # checked (or written).
        workers = Workers(argv)
        try:
            return decode_main(o, path, workers)
        finally:
            workers.stop()
    finally:
        if servers:
            servers.stop()


def budget_of(o, name, expert_bytes):
    """The expert bytes a run keeps in its own memory by design: every
    expert (pytorch, resident), the LRU budget (offloaded: budget_tiles of
    each layer's experts in each matrix), none (naive: it drops each expert
    after use); None for mmap, whose experts the page cache holds, with no
    limit but the machine's memory."""
    q = getattr(o, "q_expert_bytes", 0)  # the --quant file's expert bytes
    return {"pytorch": expert_bytes, "resident": expert_bytes, "naive": 0, "mmap": None,
            "offloaded": expert_bytes * o.budget_tiles // o.experts, "q-resident": q, "q-naive": 0,
            "q-offloaded": q * o.budget_tiles // o.experts}[name]


def size_text(n):
    if n >= 10 << 20:
        return f"{n / 2**20:.0f} MiB"
    return f"{n / 2**20:.1f} MiB" if n >= 1 << 20 else f"{n / 2**10:.0f} KiB"


def budget_cell(o, name, budget, expert_bytes):
    if budget is None:
        return "page cache, unbudgeted"
    if budget == 0:
        return "0 (none kept)"
    if name in ("offloaded", "q-offloaded"):
        return f"{size_text(budget)} ({100 * o.budget_tiles / o.experts:.1f}%)"
    return size_text(budget) + (" (all)" if budget in (expert_bytes, getattr(o, "q_expert_bytes", 0)) else "")


# The table's columns, as the legend under it explains them (docs/moe-offload.md, 5.).
LEGEND = (
    ("run", "how the stream was decoded (each run in a process of its own, one after another)"),
    ("tokens/s", "timed tokens / their seconds (after --warmup untimed tokens)"),
    ("ms/token", "1000 / tokens/s"),
    ("hit rate", "offloaded: share of the chosen experts (w1 tiles) already primary when their layer ran"),
    ("predicted", "offloaded: share of the experts a later layer's router predicted on the current hidden state "
                  "that the layer chose"),
    ("MiB read", "read from the model file over the timed tokens (naive: every chosen expert; mmap: its page "
                 "faults); 0: loaded before timing"),
    ("wait ms", "offloaded: ms in the layers' calls that had to read, plus waits for promotions issued ahead"),
    ("peak RSS", "MiB, peak resident set of the run's process (VmHWM): libraries, weights, buffers, mapped file pages"),
    ("start RSS", "MiB, that process's resident set when the run began, before it read the checkpoint"),
    ("vs resident", "this run's tokens/s / resident's tokens/s (pytorch's row: PyTorch against StrideWeave resident)"),
    ("vs naive", "this run's tokens/s / naive's tokens/s"),
    ("max err", "max |final hidden state - PyTorch's| / max |PyTorch's|"),
    ("expert budget", "expert bytes kept in memory by design: all, the LRU budget, or none kept; mmap: none set, "
                      "the page cache holds what it touches"),
)


def expert_bytes_of(o):
    return o.layers * o.experts * 3 * o.hidden * o.ffn * (2 if o.dtype == "bf16" else 4)


def decode_main(o, path, workers):
    expert_bytes = expert_bytes_of(o)
    n_tok = o.tokens * o.batch  # the timed tokens of every sequence
    print(f"StrideWeave {sw.__version__}: Mixtral-architecture MoE decoding, {o.layers} layers x {o.experts} "
          f"experts (top-{o.topk}), hidden {o.hidden}, ffn {o.ffn}, {o.dtype}; expert bytes "
          f"{expert_bytes / 2**20:.0f} MiB, primary budget {100 * o.budget:.1f}% ({o.budget_tiles} of {o.experts} "
          f"experts per layer, {expert_bytes * o.budget_tiles / o.experts / 2**20:.0f} MiB); tier {o.tier}; "
          f"{o.tokens} tokens" + (f" in each of {o.batch} sequences decoded together" if o.batch > 1 else "")
          + f", input correlation rho {o.rho}; {torch.get_num_threads()} threads", flush=True)
    t0 = time.perf_counter()
    if make_model(o, path):
        print(f"wrote {path} ({os.path.getsize(path) / 2**20:.0f} MiB) in {time.perf_counter() - t0:.1f} s", flush=True)
    quant = None
    if o.quant:
        gpath = gguf_path_of(path, o.quant)
        t0 = time.perf_counter()
        wrote = make_gguf(o, path, gpath)
        o.q_expert_bytes = sum(n for _, n in gguf_regions(o, gpath).values()) * o.experts
        quant = {"type": o.quant, "file": gpath, "file_bytes": os.path.getsize(gpath),
                 "expert_bytes": o.q_expert_bytes, "vs_bf16_bytes": o.q_expert_bytes / expert_bytes,
                 "written": wrote, "quantizer": "StrideWeave (astype), one expert matrix at a time"}
        print(f"{'wrote' if wrote else 'reusing'} {gpath}: the experts quantized to {o.quant} by StrideWeave's "
              f"quantizer (astype, one expert matrix at a time), {os.path.getsize(gpath) / 2**20:.1f} MiB, expert "
              f"bytes {o.q_expert_bytes / 2**20:.1f} MiB = {o.q_expert_bytes / expert_bytes:.3f}x the {o.dtype} "
              f"experts'" + (f"; in {time.perf_counter() - t0:.1f} s" if wrote else ""), flush=True)
    if o.save_stream:
        stream = token_stream(o)
        np.save(o.save_stream, stream.float().numpy())
        print(f"wrote the token stream to {o.save_stream} ({o.tokens} x {o.hidden} float32)", flush=True)
    runs = []
    seeded = RemoteSeed(o, path) if o.tier == "remote" else None
    try:
        for name in o.runs:
            log(o, f"== {name}")
            st = workers.run(name)
            st.budget_bytes = budget_of(o, name, expert_bytes)
            runs.append(st)
    finally:
        if seeded:
            seeded.release()
    by = {st.name: st for st in runs}
    off, res = by.get("offloaded"), by.get("resident")
    bandwidths = [b for _, _, b in off.probes if b] if off else []
    bandwidth = None
    if off and bandwidths:  # over the whole run: the bytes read / the time the probes' bandwidths give them
        segs = [(b1 - b0, w1) for (_, b0, _), (_, b1, w1) in zip(off.probes, off.probes[1:]) if w1]
        bandwidth = sum(b for b, _ in segs) / sum(b / w for b, w in segs) if sum(b for b, _ in segs) else None
        what = {"zstd": "decompressing",
                "remote": "reading again each segment's reads through a second, read-only remote carrier"}.get(
            o.tier, "reading again each segment's reads")
        print(f"{o.tier} tier read bandwidth, measured at the offloaded run's pauses "
              f"(every {o.probe_every} tokens), {what}: " + " ".join(f"{b / 1e9:.2f}" for b in bandwidths)
              + (f" GB/s (over the run {bandwidth / 1e9:.2f})" if bandwidth else " GB/s"))
        history = getattr(off, "probe_history", [])
        if history and o.tier != "remote":
            print("  the faster of two replays: preads without StrideWeave " +
                  " ".join(f"{p / 1e9:.2f}" for p, _ in history) + " GB/s; StrideWeave's file carrier " +
                  " ".join(f"{c / 1e9:.2f}" if c else "-" for _, c in history) + " GB/s")
    elif off:
        print(f"{o.tier} tier bandwidth: not measured (no zstandard module); no bound is computed")
    if o.trace:
        print_trace(o, by["offloaded"])
    lru = lru_hit_rate(o, runs[0].routes)
    print(f"\nthe routing's hit rate under a plain LRU of {o.budget_tiles} experts per layer (no prefetch): "
          f"{100 * lru:.1f}%")
    ref = by.get("pytorch")
    scale = float(ref.outputs.float().abs().max()) if ref else 1.0
    for st in runs:
        st.max_error = float((st.outputs.float() - ref.outputs.float()).abs().max()) / scale if ref else float("nan")
        st.rms_error = (float((st.outputs.float() - ref.outputs.float()).norm() / ref.outputs.float().norm())
                        if ref else float("nan"))
    # bf16: each layer rounds its expert outputs and its residual sum once (2^-8 relative each).
    bound = 1e-4 if o.dtype == "f32" else 2 * o.layers * 2.0**-8
    q_bound = QUANT_ERROR_BOUND[o.quant] * o.layers if o.quant else None

    print()
    print(f"{'run':10s} {'tokens/s':>9s} {'ms/token':>9s} {'hit rate':>9s} {'predicted':>9s} {'MiB read':>9s} "
          f"{'wait ms':>8s} {'peak RSS':>9s} {'start RSS':>10s} {'vs resident':>12s} {'vs naive':>9s} "
          f"{'max err':>9s}  expert budget")
    res, nav = by.get("resident"), by.get("naive")
    for st in runs:
        hr = "-" if st.required == 0 or st.name == "naive" else f"{100 * st.hit_rate:.1f}%"
        pr = "-" if st.predicted == 0 else f"{100 * st.predicted_right / st.predicted:.1f}%"
        mib = "-" if st.bytes_read is None else f"{st.bytes_read / 2**20:.0f}"
        wait = f"{st.wait_ms:.0f}" if st.name in ("offloaded", "q-offloaded") else "-"
        start = "-" if st.start_rss_bytes is None else f"{st.start_rss_bytes / 2**20:.0f}"
        vr = f"{st.tokens_per_s / res.tokens_per_s:.2f}x" if res else "-"
        vn = f"{st.tokens_per_s / nav.tokens_per_s:.2f}x" if nav else "-"
        print(f"{st.name:10s} {st.tokens_per_s:9.2f} {1000 / st.tokens_per_s:9.2f} {hr:>9s} {pr:>9s} "
              f"{mib:>9s} {wait:>8s} {st.peak_rss_bytes / 2**20:9.0f} {start:>10s} {vr:>12s} {vn:>9s} "
              f"{st.max_error:9.2e}  {budget_cell(o, st.name, st.budget_bytes, expert_bytes)}")
    print()
    for column, text in LEGEND:
        print(f"  {column + ':':14s} {text}")
    if any(st.budget_bytes is None for st in runs):
        print("  mmap is not a same-memory comparison: no budget bounds it; the page cache keeps every expert it "
              "touched, up to the whole file (its peak RSS counts the pages it mapped)")
    summary = {"config": config_of(o) | {"tokens": o.tokens, "batch": o.batch, "budget": o.budget, "tier": o.tier,
                                         "rho": o.rho},
               "runs": {st.name: {"tokens_per_s": st.tokens_per_s, "hit_rate": None if st.required == 0 or
                                  st.name == "naive" else st.hit_rate, "bytes_read": st.bytes_read,
                                  "max_error_vs_pytorch": st.max_error, "rms_error_vs_pytorch": st.rms_error,
                                  "peak_rss_bytes": st.peak_rss_bytes,
                                  "start_rss_bytes": st.start_rss_bytes, "budget_bytes": st.budget_bytes,
                                  "bytes_per_token": None if st.bytes_read is None else st.bytes_read / n_tok,
                                  "budgeted": st.budget_bytes is not None} for st in runs},
               "expert_bytes": expert_bytes,
               "tier_bandwidth": bandwidth, "tier_bandwidths": bandwidths, "lru_hit_rate": lru,
               "tier_probe_bytes": getattr(off, "probe_bytes", 0) if off else 0,
               "tier_probe_replays": [list(h) for h in getattr(off, "probe_history", [])] if off else [],
               "error_bound": bound, "quant": quant, "quant_error_bound": q_bound}
    ok = True
    if off:
        lower, compute_s, transfer_s = lower_bound(o, off, res)
        summary["bound_ratio"] = off.seconds / lower if lower > 0 else None
        summary["vs_naive"] = off.tokens_per_s / nav.tokens_per_s if nav else None
        summary["vs_resident"] = off.tokens_per_s / res.tokens_per_s if res else None
        summary["prediction_accuracy"] = off.predicted_right / off.predicted if off.predicted else None
        print()
        if nav:
            ratio = off.tokens_per_s / nav.tokens_per_s
            if abs(ratio - 1) < 0.005:
                print("offloaded is as fast as naive on-demand loading")
            else:
                word = "faster" if ratio >= 1 else "slower"
                shown = ratio if ratio >= 1 else 1 / ratio
                print(f"offloaded is {shown:.2f}x {word} than naive on-demand loading")
        if summary["bound_ratio"] is not None and bandwidth:
            print(f"offloaded time per token is {summary['bound_ratio']:.2f}x its lower bound "
                  f"{1000 * lower / n_tok:.2f} ms, the sum over its {o.probe_every}-token segments of "
                  f"max(resident compute, bytes read / the bandwidth probed after the segment) (in all: compute "
                  f"{1000 * compute_s / n_tok:.2f} ms, transfer {1000 * transfer_s / n_tok:.2f} ms per token)")
            if summary["bound_ratio"] < 1:
                print("(below 1: the run read faster than the probes after its segments read the same bytes; "
                      "the tier's speed drifts)")
        idle = summary["offloaded_layers"] = idle_disk(o, off)
        if idle:
            parts = []
            if idle["all_primary_layer_ms"] is not None:
                parts.append(f"{idle['ms_per_token']:.2f} ms in the {idle['all_primary_layers_per_token']:.2f} layers "
                             f"per token whose chosen experts were all primary ({idle['all_primary_layer_ms']:.2f} ms "
                             f"each, median: computed with nothing to read, the next layer's misses unknown until its "
                             f"router runs)")
            if idle["miss_layer_ms"] is not None:
                parts.append(f"{idle['miss_layers_ms_per_token']:.2f} ms in the "
                             f"{idle['layers_with_misses_per_token']:.2f} layers with misses "
                             f"({idle['miss_layer_ms']:.2f} ms each: their reads, each product computed as its tile "
                             f"lands)")
            parts.append(f"{idle['outside_calls_ms_per_token']:.2f} ms outside the calls (norms, routers, the calls' "
                         f"set-up), with no read in flight")
            print(f"of the offloaded run's {1000 * off.seconds / n_tok:.2f} ms per token: " + "; ".join(parts))
        dev = device_bound(o, off, res)
        summary["device_bound_ratio"] = summary["device_read_bandwidth"] = None
        if dev and dev[0] > 0:
            d_lower, _, d_busy, d_bytes, p_busy, p_bytes = dev
            summary["device_bound_ratio"] = off.seconds / d_lower
            summary["device_read_bandwidth"] = d_bytes / d_busy if d_busy else None
            rate = f"{d_bytes / d_busy / 1e9:.2f} GB/s while busy" if d_busy else "idle"
            probed = f", the probes {bandwidth / 1e9:.2f} GB/s" if bandwidth else ""
            if p_busy:
                probed += f", {p_bytes / p_busy / 1e9:.2f} GB/s while the device was busy with them"
            print(f"by the device's own count (/proc/diskstats) the run kept it busy {1000 * d_busy / n_tok:.2f} "
                  f"ms per token reading {d_bytes / n_tok / 2**20:.1f} MiB ({rate}{probed}): offloaded time "
                  f"per token is {summary['device_bound_ratio']:.2f}x the sum over the segments of max(resident "
                  f"compute, device busy), {1000 * d_lower / n_tok:.2f} ms")
    qoff = by.get("q-offloaded")
    if qoff and off:
        summary["q_vs_offloaded_tps"] = qoff.tokens_per_s / off.tokens_per_s
        summary["q_vs_offloaded_bytes"] = (qoff.bytes_read / off.bytes_read) if off.bytes_read else None
        bytes_text = ("" if summary["q_vs_offloaded_bytes"] is None else
                      f"reads {summary['q_vs_offloaded_bytes']:.2f}x the bytes per token "
                      f"({qoff.bytes_read / n_tok / 2**10:.0f} against {off.bytes_read / n_tok / 2**10:.0f} KiB) and ")
        print(f"{o.quant} offloaded (q-offloaded) {bytes_text}runs at {summary['q_vs_offloaded_tps']:.2f}x the "
              f"tokens/s of {o.dtype} offloaded, at the same budget of {o.budget_tiles} of {o.experts} experts per "
              f"layer")
    summary["max_error_vs_pytorch"] = max((st.max_error for st in runs if st.name not in ("pytorch", *QUANT_RUNS)),
                                          default=0.0)
    if ref:
        exact = [st for st in runs if st.name not in QUANT_RUNS]
        bad = [st.name for st in exact if st.max_error > bound]
        if bad:
            ok = False
            print(f"ERROR: {', '.join(bad)} differ from the PyTorch reference by more than {bound:.2e}")
        else:
            print(f"every run equals the PyTorch reference within {bound:.2e} (max relative error "
                  f"{summary['max_error_vs_pytorch']:.2e})")
        quantized = [st for st in runs if st.name in QUANT_RUNS]
        if quantized:
            print(f"the {o.quant} runs against the {o.dtype} PyTorch reference (final hidden states; max err: max "
                  f"|difference| / max |reference|, rms err: ||difference|| / ||reference||): " +
                  ", ".join(f"{st.name} max {st.max_error:.2e} rms {st.rms_error:.2e}" for st in quantized) +
                  f"; bound on max err {q_bound:.2e} ({QUANT_ERROR_BOUND[o.quant]:.2e} per layer)")
            bad = [st.name for st in quantized if not st.max_error <= q_bound]
            if bad:
                ok = False
                print(f"ERROR: {', '.join(bad)} differ from the PyTorch reference by more than {q_bound:.2e}")
    write_csv(o, runs)
    png = plot(o, runs)
    print(f"per-token figures: {o.csv}\nplot:              {png}")
    print("SUMMARY_JSON " + json.dumps(summary, sort_keys=True))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
