"""Hugging Face MoE checkpoints, as they are, inside transformers.

    import strideweave.hf as swhf
    model = swhf.from_pretrained("path/to/checkpoint", budget=0.25)
    out = model.generate(input_ids, max_new_tokens=32, do_sample=False)
    print(swhf.stats(model)["total"])

`from_pretrained` returns the transformers model class that config.json
names (MixtralForCausalLM, Qwen2MoeForCausalLM, ...), with every weight but
the routed experts loaded as transformers loads it. Each MoE layer's expert
weights stay in the checkpoint's safetensors files (single or sharded, the
per-expert Hub keys or transformers' fused gate_up_proj/down_proj) as
TiledEvictable secondary tiers; an LRU policy keeps `budget` of each layer's
experts in memory, and the layer's experts are computed with the expert
feed-forward (sw.expert_ffn) on the cached tiles, a missing expert's
products starting as its tiles land. Routing, shared experts, attention, the
KV cache and sampling stay transformers' own code: only the experts
module's weights and forward are replaced, through transformers' experts
interface (transformers.integrations.moe). See docs/transformers.md.
"""
import errno
import math
import numbers
import os
import re
import time
from contextlib import contextmanager

import torch
import transformers
from transformers.conversion_mapping import get_model_conversion_mapping
from transformers.core_model_loading import WeightRenaming, rename_source_key
from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

from .. import _lib, _runtime
from .._surface import tensor as _sw_tensor
from .._errors import StrideWeaveNotImplementedError
from . import _gguf
from ._checkpoint import Checkpoint, matrix_of, per_expert_pattern
from ._experts import ACTIVATIONS, TIERS, GgufSource, MatrixTier, OffloadedExperts

__all__ = ["from_pretrained", "offload_experts", "quantize_experts", "stats", "release", "IMPLEMENTATION",
           "MEMORY_SLACK_BYTES", "QUANTIZED_TYPES"]

# The name StrideWeave's experts forward is registered under in
# transformers' experts interface (config._experts_implementation).
IMPLEMENTATION = "strideweave"

# What loading and generating holds beyond the non-expert weights, the
# experts budget and the top-k experts one call reads (docs/transformers.md),
# measured by tests/python/test_hf.py in a fresh process: the runtime's read
# buffers, the KV cache and activations of a short generation, transformers'
# first-call caches, and allocator slack.
MEMORY_SLACK_BYTES = 128 << 20

_FLOAT_STORAGE = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def _remote_endpoints(tier, remote_endpoints):
    """The servers of tier "remote" (else None): from the argument (a list
    or a comma-separated string) or $STRIDEWEAVE_REMOTE_ENDPOINTS."""
    if tier != "remote":
        if remote_endpoints is not None:
            raise ValueError(f"remote_endpoints applies to tier='remote', not tier={tier!r}")
        return None
    if remote_endpoints is None:
        remote_endpoints = os.environ.get("STRIDEWEAVE_REMOTE_ENDPOINTS", "")
    if isinstance(remote_endpoints, str):
        remote_endpoints = [e for e in remote_endpoints.split(",") if e]
    elif not isinstance(remote_endpoints, (list, tuple)) or not all(isinstance(e, str) for e in remote_endpoints):
        raise TypeError(f"remote_endpoints must be a list of str or a comma-separated str, not "
                        f"{type(remote_endpoints).__name__}")
    if not remote_endpoints:
        raise ValueError("tier='remote' needs servers: pass remote_endpoints (unix:///path or redis://host[:port]) "
                         "or set STRIDEWEAVE_REMOTE_ENDPOINTS")
    return list(remote_endpoints)


def _remote_of(tier, remote_endpoints):
    """(endpoints, a namespace prefix of this load's own) for tier
    "remote", else None."""
    endpoints = _remote_endpoints(tier, remote_endpoints)
    if endpoints is None:
        return None
    global _loads
    _loads += 1
    return endpoints, f"strideweave-hf:{os.getpid()}.{_loads}"


_loads = 0  # loads onto a remote tier in this process, for their namespaces


def _check_options(budget, tier, prefetch):
    if isinstance(budget, bool) or not isinstance(budget, numbers.Real):
        raise TypeError(f"budget must be a float in (0, 1] (a fraction of each layer's experts) or an int count of "
                        f"experts per layer, not {type(budget).__name__}")
    if isinstance(budget, numbers.Integral):
        if budget < 1:
            raise ValueError(f"budget must be at least 1 expert per layer (and at least top-k), got {budget}")
    elif not (0.0 < float(budget) <= 1.0) or math.isnan(budget):
        raise ValueError(f"budget must be a fraction in (0, 1] of each layer's experts, got {budget}")
    if not isinstance(tier, str) or tier not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(map(repr, TIERS))}, not {tier!r}")
    if prefetch is not None and not isinstance(prefetch, bool):
        raise TypeError(f"prefetch must be None, True or False, not {type(prefetch).__name__}")


def _budget_tiles(budget, experts, top_k):
    """Experts of a layer kept primary: an int count (at least top-k, at
    most every expert), or the fraction rounded, raised to top-k."""
    if isinstance(budget, numbers.Integral):
        if budget < top_k:
            raise ValueError(f"budget must be at least top-k = {top_k} experts per layer, got {budget}")
        return min(int(budget), experts)
    return min(experts, max(top_k, round(float(budget) * experts)))


def _as_torch_dtype(dtype):
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        name = {"bf16": "bfloat16", "f16": "float16", "fp16": "float16", "half": "float16", "f32": "float32",
                "fp32": "float32", "float": "float32"}.get(dtype, dtype)
        value = getattr(torch, name, None)
        if isinstance(value, torch.dtype) and value in (torch.float32, torch.float16, torch.bfloat16):
            return value
    raise ValueError(f"dtype must be None, torch.float32, torch.float16 or torch.bfloat16, not {dtype!r}")


@contextmanager
def _parameters_on_meta():
    """Modules built inside get their parameters on the meta device (no
    memory) and their buffers as usual (rotary frequencies are computed, not
    loaded)."""
    register = torch.nn.Module.register_parameter

    def on_meta(module, name, param):
        register(module, name, param)
        if param is not None and param.device.type != "meta":
            p = module._parameters[name]
            module._parameters[name] = type(p)(p.to("meta"), requires_grad=p.requires_grad)

    torch.nn.Module.register_parameter = on_meta
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register


def from_pretrained(model_dir, *, budget=0.25, tier="direct", dtype=None, prefetch=None, runtime=None,
                    remote_endpoints=None, experts_gguf=None):
    """The transformers model of the checkpoint in `model_dir` (the class
    config.json names), its routed experts offloaded: see the module's doc.

    budget: a float in (0, 1], the fraction of each layer's experts kept in
      memory (rounded, at least top-k), or an int count of experts >= top-k.
    tier: "direct" (the checkpoint files read with O_DIRECT, bypassing the
      page cache; the default), "page-cache" (buffered reads), "zstd"
      (the experts read once and held zstd-compressed in memory) or
      "remote" (the experts read once and held on Valkey/Redis servers,
      remote_endpoints or $STRIDEWEAVE_REMOTE_ENDPOINTS, in namespaces of
      this load's own, deleted by release(); docs/remote-tier.md).
    dtype: the model's dtype (torch.bfloat16, torch.float16, torch.float32 or
      their names); None takes config.json's, else the experts' stored one.
      The experts compute in their stored dtype.
    prefetch: None (the default: off, docs/transformers.md says where it
      wins), True or False: before a MoE layer's attention runs, apply its
      router to the layer's input and read the experts it predicts into
      idle disk time.
    experts_gguf: a GGUF file of the model's routed experts in llama.cpp's
      stacked tensors (as `python -m strideweave.hf quantize` writes it):
      the experts are read from it, as the tier ("direct" or "page-cache"),
      and computed on its quantized blocks in place; every other weight
      comes from the checkpoint, whose own expert weights are then not
      read. The file must match the model: its layers, expert count and
      shapes (ValueError naming the file and the tensor otherwise).

    FileNotFoundError for a missing directory, config.json, index, shard or
    experts_gguf; DataCorruptError for a corrupted or truncated shard or
    index; ValueError for a model without routed experts, a bad budget or
    tier, an experts_gguf that does not match the model; TypeError for a
    budget of another type; NotImplementedError for an experts layout or
    activation StrideWeave cannot compute. Nothing is left open on error."""
    _check_options(budget, tier, prefetch)
    _check_gguf_tier(experts_gguf, tier)
    _remote_endpoints(tier, remote_endpoints)  # checked before any work
    dtype = _as_torch_dtype(dtype)
    ckpt = Checkpoint(model_dir)
    config = transformers.AutoConfig.from_pretrained(ckpt.dir)
    if dtype is None:
        dtype = _as_torch_dtype(getattr(config, "dtype", None) or getattr(config, "torch_dtype", None))
    if dtype is None:
        dtype = _stored_expert_dtype(ckpt)
    with _parameters_on_meta():
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.eval()
    offload_experts(model, ckpt, budget=budget, tier=tier, dtype=dtype, prefetch=prefetch, runtime=runtime,
                    remote_endpoints=remote_endpoints, experts_gguf=experts_gguf)
    return model


# The block-quantized types `quantize_experts` writes.
QUANTIZED_TYPES = ("q8_0", "q4_0", "q4_k", "q6_k", "mxfp4")

# llama.cpp's architecture names (general.architecture) of transformers' model types.
_LLAMA_ARCH = {"mixtral": "llama", "qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe", "olmoe": "olmoe",
               "deepseek_v2": "deepseek2", "deepseek_v3": "deepseek2"}

_GGUF_MATRICES = ("gate", "up", "down")


def _gguf_name(layer, matrix):
    return f"blk.{layer}.ffn_{matrix}_exps.weight"


def _check_gguf_tier(experts_gguf, tier):
    if experts_gguf is None:
        return
    if not isinstance(experts_gguf, (str, os.PathLike)):
        raise TypeError(f"experts_gguf must be a str or os.PathLike, not {type(experts_gguf).__name__}")
    if tier not in ("direct", "page-cache"):
        raise ValueError(f"experts_gguf reads the experts from the GGUF file itself: tier must be 'direct' or "
                         f"'page-cache' with it, not {tier!r}")


def _experts_file(path, modules, model):
    """{experts module name: ({"gate"/"up"/"down": GgufSource}, compute
    dtype)} for a GGUF file of llama.cpp's stacked expert tensors, checked
    against the model's MoE layers: every layer's three tensors present
    with ne (H, F, E) for gate and up and (F, H, E) for down, of a type
    StrideWeave computes, no experts of layers the model lacks, and the
    file's expert and block counts (when it states them) the model's."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, "no such experts GGUF file", path)
    header = _gguf.Header(path)
    config = model.config
    cls = type(model).__name__
    by_layer = {}
    for name, module in modules:
        E, F2, H = module._parameters["gate_up_proj"].shape
        by_layer[_layer_of(name)] = (name, E, F2 // 2, H)
    for tensor in header.tensors:
        m = re.fullmatch(r"blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight", tensor)
        if m and int(m.group(1)) not in by_layer:
            raise ValueError(f"{path}: tensor {tensor!r} holds experts of layer {m.group(1)}, which is not a MoE "
                             f"layer of the model ({cls}: {config.num_hidden_layers} layers, MoE layers "
                             f"{sorted(by_layer)})")
    arch = header.metadata.get("general.architecture")
    model_type = getattr(config, "model_type", None)
    if isinstance(arch, str) and model_type in _LLAMA_ARCH and arch != _LLAMA_ARCH[model_type]:
        raise ValueError(f"{path}: general.architecture is {arch!r}, the model ({cls}) is llama.cpp's "
                         f"{_LLAMA_ARCH[model_type]!r}")
    experts = {e for _, e, _, _ in by_layer.values()}
    for key, want in ((f"{arch}.expert_count", experts), (f"{arch}.block_count", {config.num_hidden_layers})):
        value = header.metadata.get(key)
        if value is not None and value not in want:
            raise ValueError(f"{path}: {key} is {value}, the model ({cls}) has {min(want)}")
    out = {}
    for layer, (name, E, F, H) in sorted(by_layer.items()):
        sources, types = {}, set()
        for matrix in _GGUF_MATRICES:
            tensor = _gguf_name(layer, matrix)
            if tensor not in header.tensors:
                raise ValueError(f"{path}: no tensor {tensor!r}, the experts' {matrix} weights of the model's layer "
                                 f"{layer} ({name})")
            ggml_type, ne = header.tensors[tensor]
            want = (F, H, E) if matrix == "down" else (H, F, E)
            if ne != want:
                raise ValueError(f"{path}: tensor {tensor!r} has ne {list(ne)}, the model's {name} expects "
                                 f"{list(want)} ({'n_ff, n_embd' if matrix == 'down' else 'n_embd, n_ff'}, "
                                 f"n_expert)")
            if ggml_type not in _gguf.TYPE_NAMES:
                raise ValueError(f"{path}: tensor {tensor!r} is of ggml type {ggml_type}, which StrideWeave's expert "
                                 f"feed-forward does not compute (it computes "
                                 f"{', '.join(sorted(_gguf.GGML_TYPES))})")
            types.add(_gguf.TYPE_NAMES[ggml_type])
            sources[matrix] = GgufSource(path, tensor)
        floats = types - set(QUANTIZED_TYPES)
        if floats and (len(floats) > 1 or len(types) > 1):
            raise ValueError(f"{path}: the experts of layer {layer} mix the types {sorted(types)}; a float layer "
                             f"must be of one type")
        dtype = torch.float32 if not floats else {"f32": torch.float32, "f16": torch.float16,
                                                  "bf16": torch.bfloat16}[floats.pop()]
        out[name] = (sources, dtype)
    return out


def _expert_weight(ckpt, sources, matrix, e, F):
    """Expert e's `matrix` ("gate", "up" or "down") from the checkpoint, as
    a torch (rows, K) tensor of its stored dtype: one expert read."""
    if "gate_up" in sources:
        if matrix == "down":
            return ckpt.read(sources["down"][1], e)
        gate_up = ckpt.read(sources["gate_up"][1], e)
        return gate_up[:F] if matrix == "gate" else gate_up[F:]
    return ckpt.read(sources[matrix][e][1])


def _quantized_bytes(weight, qtype):
    """The GGUF bytes of a (rows, K) weight quantized along K: each row's
    blocks in turn, as llama.cpp stores a row."""
    rows = weight.float().numpy()
    q = _sw_tensor(rows.T, dtype=qtype)  # (K, rows), first mode fastest: each row's values in a column
    return q.numpy().T.tobytes()


def quantize_experts(model_dir, qtype, *, out=None, force=False, progress=None):
    """Writes the routed experts of the checkpoint in `model_dir` as one GGUF
    file of `qtype` (q8_0, q4_0, q4_k, q6_k or mxfp4) and returns its path:
    `out`, by default MODEL_DIR/experts-<qtype>.gguf. Each MoE layer's
    experts are llama.cpp's stacked tensors, blk.{l}.ffn_gate_exps.weight
    and ffn_up_exps (ne n_embd, n_ff, n_expert) and ffn_down_exps (n_ff,
    n_embd, n_expert), gate and up apart even where the checkpoint fuses
    them; shared experts and every other weight stay in the checkpoint.
    The experts are read and quantized one at a time (memory holds one
    expert's matrix, never a layer), written as they are quantized, and the
    file is renamed onto `out` once complete. `progress`, if given, is
    called with a line of text after each layer.

    ValueError for an unknown qtype, a model without routed experts or
    rows that qtype's block does not divide; FileExistsError for an existing
    `out` unless `force`; the checkpoint's errors as from_pretrained's."""
    if not isinstance(qtype, str) or qtype.lower() not in QUANTIZED_TYPES:
        raise ValueError(f"unknown quantized type {qtype!r}: one of {', '.join(QUANTIZED_TYPES)}")
    qtype = qtype.lower()
    ckpt = Checkpoint(model_dir)
    config = transformers.AutoConfig.from_pretrained(ckpt.dir)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    modules = _experts_modules(model)
    if not modules:
        raise ValueError(f"{ckpt.dir}: {type(model).__name__} has no routed experts (no experts module with "
                         f"gate_up_proj and down_proj parameters): nothing to quantize")
    out = os.path.join(ckpt.dir, f"experts-{qtype}.gguf") if out is None else os.fspath(out)
    if os.path.exists(out) and not force:
        raise FileExistsError(errno.EEXIST, "the output file exists (force=True, or --force, replaces it)", out)
    block = _gguf.BLOCKS[qtype][0]
    renamed = _renamed_keys(model, ckpt)
    layers, tensors = [], []
    for name, module in modules:
        E, F2, H = shape = tuple(module._parameters["gate_up_proj"].shape)
        F = F2 // 2
        sources = _expert_sources(name, shape, renamed, ckpt)
        for matrix, k in (("gate and up", H), ("down", F)):
            if k % block:
                raise ValueError(f"{ckpt.dir}: the {matrix} rows of {name} have {k} values, which {qtype}'s blocks "
                                 f"of {block} do not divide")
        layer = _layer_of(name)
        layers.append((layer, name, sources, E, F, H))
        tensors += [(_gguf_name(layer, "gate"), qtype, (H, F, E)), (_gguf_name(layer, "up"), qtype, (H, F, E)),
                    (_gguf_name(layer, "down"), qtype, (F, H, E))]
    arch = _LLAMA_ARCH.get(config.model_type, config.model_type)
    E, F, H = layers[0][3], layers[0][4], layers[0][5]
    top_k = int(getattr(config, "num_experts_per_tok", None) or getattr(config, "top_k", None) or 1)
    version = _lib.native.sw_version_string()
    metadata = {
        "general.architecture": arch,
        "general.name": os.path.basename(os.path.abspath(ckpt.dir)),
        "general.quantization_version": 2,
        "general.quantized_by": f"StrideWeave {version}",
        f"{arch}.block_count": int(config.num_hidden_layers),
        f"{arch}.expert_count": E,
        f"{arch}.expert_used_count": top_k,
        f"{arch}.embedding_length": H,
        f"{arch}.expert_feed_forward_length": F,
        "strideweave.experts.source": os.path.abspath(ckpt.dir),
        "strideweave.experts.source_model_type": config.model_type,
        "strideweave.experts.type": qtype,
        "strideweave.experts.quantizer": f"StrideWeave {version} astype({qtype!r}): ggml's reference "
                                         f"rounding, no importance matrix",
        "strideweave.experts.layer_count": len(layers),
    }
    tmp = f"{out}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            writer = _gguf.Writer(f, metadata, tensors)
            for i, (layer, name, sources, E, F, H) in enumerate(layers):
                t0 = time.perf_counter()
                before = after = 0
                for matrix in _GGUF_MATRICES:
                    for e in range(E):
                        weight = _expert_weight(ckpt, sources, matrix, e, F)
                        data = _quantized_bytes(weight, qtype)
                        before += weight.numel() * weight.element_size()
                        after += len(data)
                        writer.write(data)
                if progress is not None:
                    progress(f"layer {layer} ({i + 1}/{len(layers)} MoE layers): {E} experts, "
                             f"{before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB of {qtype} in "
                             f"{time.perf_counter() - t0:.2f} s")
            writer.close()
        os.replace(tmp, out)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return out


def _stored_expert_dtype(ckpt):
    for key, entry in ckpt.entries.items():
        if ".experts." in key and entry.dtype in _FLOAT_STORAGE:
            return getattr(torch, _FLOAT_STORAGE[entry.dtype])
    return torch.float32


def _experts_modules(model):
    found = []
    for name, module in model.named_modules():
        gu = module._parameters.get("gate_up_proj") if hasattr(module, "_parameters") else None
        down = module._parameters.get("down_proj") if gu is not None else None
        if isinstance(gu, torch.nn.Parameter) and isinstance(down, torch.nn.Parameter) and gu.dim() == 3:
            found.append((name, module))
    return found


def _renamed_keys(model, ckpt):
    """{the model's name of a checkpoint tensor: the checkpoint's key},
    through transformers' own renamings of the model's checkpoint format
    (Mixtral's block_sparse_moe -> mlp, ...)."""
    renamings = [t for t in get_model_conversion_mapping(model) if isinstance(t, WeightRenaming)]
    out = {}
    for key in ckpt.entries:
        new = rename_source_key(key, renamings, [])[0] if renamings else key
        out[new] = key
    return out


def _layer_of(name):
    parts = name.split(".")
    for i, p in enumerate(parts[:-1]):
        if p == "layers" and parts[i + 1].isdigit():
            return int(parts[i + 1])
    return None


def _check_module(name, module, config):
    for flag, want, what in (("has_bias", False, "biases"), ("is_transposed", False, "a transposed layout"),
                             ("is_concatenated", True, "an interleaved gate_up layout"),
                             ("has_gate", True, "no gate projection")):
        if getattr(module, flag, want) != want:
            raise StrideWeaveNotImplementedError(
                f"{name}: experts with {what} ({type(module).__name__}.{flag}={not want}) are not supported by "
                f"StrideWeave's expert feed-forward")
    act = getattr(config, "hidden_act", None) or getattr(config, "hidden_activation", None) or "silu"
    if act not in ACTIVATIONS:
        raise StrideWeaveNotImplementedError(
            f"{name}: the activation {act!r} is not one of the expert feed-forward's "
            f"({', '.join(sorted(ACTIVATIONS))})")
    return ACTIVATIONS[act]


def _expert_sources(prefix, shape, renamed, ckpt):
    """The checkpoint tensors holding the experts module `prefix` whose
    gate_up_proj has `shape` (E, 2F, H): {"gate_up": (path, key), "down":
    (path, key)} for the fused layout, {"gate"/"up"/"down": [(path, key)
    per expert]} for the per-expert keys."""
    E, F2, H = shape
    gu, dn = renamed.get(prefix + ".gate_up_proj"), renamed.get(prefix + ".down_proj")
    if gu is not None and dn is not None:
        for key, want in ((gu, (E, F2, H)), (dn, (E, H, F2 // 2))):
            entry = ckpt.entries[key]
            if entry.shape != want:
                raise ValueError(f"{entry.path}: tensor {key!r} has shape {list(entry.shape)}, the model's "
                                 f"{prefix} expects {list(want)}")
        return {"gate_up": (ckpt.entries[gu].path, gu), "down": (ckpt.entries[dn].path, dn)}
    pattern = per_expert_pattern(prefix)
    found = {"gate": {}, "up": {}, "down": {}}
    for new, key in renamed.items():
        m = pattern.fullmatch(new)
        if m:
            found[matrix_of(m.group(2))][int(m.group(1))] = key
    if not any(found.values()):
        raise ValueError(f"{ckpt.dir}: the checkpoint has no weights for the experts of {prefix} (neither "
                         f"{prefix}.gate_up_proj/down_proj nor per-expert gate/up/down keys)")
    out = {}
    for matrix, want in (("gate", (F2 // 2, H)), ("up", (F2 // 2, H)), ("down", (H, F2 // 2))):
        keys = found[matrix]
        missing = [e for e in range(E) if e not in keys]
        if missing:
            raise ValueError(f"{ckpt.dir}: the checkpoint lacks the {matrix} weights of expert(s) {missing} of "
                             f"{prefix}")
        for e in range(E):
            entry = ckpt.entries[keys[e]]
            if entry.shape != want:
                raise ValueError(f"{entry.path}: tensor {keys[e]!r} has shape {list(entry.shape)}, the model's "
                                 f"{prefix} expects {list(want)}")
        out[matrix] = [(ckpt.entries[keys[e]].path, keys[e]) for e in range(E)]
    return out


def _register_interface():
    if IMPLEMENTATION not in ALL_EXPERTS_FUNCTIONS:
        ALL_EXPERTS_FUNCTIONS.register(IMPLEMENTATION, _experts_forward)


def _experts_forward(module, hidden_states, top_k_index, top_k_weights):
    """transformers' experts interface: the experts module's forward."""
    state = getattr(module, "_strideweave", None)
    if state is None:
        raise RuntimeError(f"{type(module).__name__}: config._experts_implementation is {IMPLEMENTATION!r} but this "
                           f"module's experts were not offloaded with strideweave.hf")
    return _NoGrad.apply(hidden_states, top_k_index, top_k_weights, state)


class _NoGrad(torch.autograd.Function):
    """The offloaded experts' forward; their backward is not provided
    (inference only) and says so instead of giving wrong gradients."""

    @staticmethod
    def forward(ctx, hidden_states, top_k_index, top_k_weights, state):
        return state.forward(hidden_states, top_k_index, top_k_weights)

    @staticmethod
    def backward(ctx, grad):
        raise StrideWeaveNotImplementedError(
            "strideweave.hf: the offloaded experts are inference-only; run under torch.no_grad() or "
            "model.generate()")


def _set_tensor(model, name, value):
    owner_name, _, attr = name.rpartition(".")
    owner = model.get_submodule(owner_name) if owner_name else model
    if attr in owner._parameters:
        old = owner._parameters[attr]
        owner._parameters[attr] = torch.nn.Parameter(value, requires_grad=old.requires_grad)
    else:
        owner._buffers[attr] = value


def offload_experts(model, model_dir, *, budget=0.25, tier="direct", dtype=None, prefetch=None, runtime=None,
                    remote_endpoints=None, experts_gguf=None):
    """Offloads the routed experts of `model`, a transformers MoE model the
    caller built (for example with its parameters on the meta device), to
    the checkpoint in `model_dir`, and loads every other weight still on the
    meta device from it. Options and errors as for from_pretrained. Returns
    `model`."""
    _check_options(budget, tier, prefetch)
    _check_gguf_tier(experts_gguf, tier)
    remote = _remote_of(tier, remote_endpoints)
    dtype = _as_torch_dtype(dtype)
    ckpt = model_dir if isinstance(model_dir, Checkpoint) else Checkpoint(model_dir)
    rt = _runtime.resolve(runtime)
    modules = _experts_modules(model)
    if not modules:
        raise ValueError(f"{type(model).__name__} has no routed experts (no experts module with gate_up_proj and "
                         f"down_proj parameters): load it with transformers itself")
    config = model.config
    top_k = int(getattr(config, "num_experts_per_tok", None) or getattr(config, "top_k", None) or 1)
    renamed = _renamed_keys(model, ckpt)
    gguf = None if experts_gguf is None else _experts_file(experts_gguf, modules, model)
    plans = []
    for name, module in modules:
        activation = _check_module(name, module, getattr(module, "config", config))
        shape = tuple(module._parameters["gate_up_proj"].shape)
        if gguf is not None:
            sources, compute_dtype = gguf[name]
            plans.append((name, module, activation, sources, compute_dtype, shape))
            continue
        sources = _expert_sources(name, shape, renamed, ckpt)
        storage = {ckpt.entries[(v[1] if isinstance(v, tuple) else v[0][1])].dtype for v in sources.values()}
        if len(storage) != 1 or next(iter(storage)) not in _FLOAT_STORAGE:
            raise StrideWeaveNotImplementedError(
                f"{name}: experts stored as {sorted(storage)}; StrideWeave computes F32, F16 and BF16 experts")
        plans.append((name, module, activation, sources, getattr(torch, _FLOAT_STORAGE[storage.pop()]), shape))
    opened = []
    try:
        states = []
        for name, module, activation, sources, compute_dtype, shape in plans:
            n = _budget_tiles(budget, shape[0], top_k)
            matrices = {}
            for matrix, src in sources.items():
                mt = MatrixTier(matrix, src, tier=tier, budget_tiles=n, runtime=rt,
                                remote=remote and (remote[0], f"{remote[1]}:{name}.{matrix}"))
                opened.append(mt)
                matrices[matrix] = mt
            states.append(OffloadedExperts(_layer_of(name), name, matrices, activation=activation,
                                           compute_dtype=compute_dtype, top_k=top_k, budget_tiles=n))
        _load_dense(model, ckpt, renamed, {name for name, *_ in plans}, dtype)
    except BaseException:
        for mt in opened:
            mt.release()
        raise
    _register_interface()
    for (name, module, *_), state in zip(plans, states):
        del module._parameters["gate_up_proj"]
        del module._parameters["down_proj"]
        module._strideweave = state
        getattr(module, "config", config)._experts_implementation = IMPLEMENTATION
    config._experts_implementation = IMPLEMENTATION
    model._strideweave_layers = states
    if prefetch:
        _install_prefetch(model, states)
    return model


def _load_dense(model, ckpt, renamed, expert_modules, dtype):
    """Loads every parameter and persistent buffer outside the experts
    modules that the checkpoint holds; a parameter still on the meta device
    afterwards (and not tied) is an error naming it."""
    inside = tuple(m + "." for m in expert_modules)
    names = dict(model.named_parameters(remove_duplicate=False))
    names.update(dict(model.named_buffers(remove_duplicate=False)))
    for name, current in names.items():
        if name.startswith(inside):
            continue
        key = renamed.get(name)
        if key is None:
            continue
        value = ckpt.read(key)
        if tuple(value.shape) != tuple(current.shape):
            raise ValueError(f"{ckpt.entries[key].path}: tensor {key!r} has shape {list(value.shape)}, the model's "
                             f"{name} expects {list(current.shape)}")
        target = current.dtype if not current.is_floating_point() or dtype is None else dtype
        if value.is_floating_point() and current.is_floating_point():
            value = value.to(target)
        _set_tensor(model, name, value)
    if getattr(model.config, "tie_word_embeddings", False):
        model.tie_weights()
    still = [n for n, p in model.named_parameters() if p.is_meta and not n.startswith(inside)]
    if still:
        raise ValueError(f"{ckpt.dir}: the checkpoint lacks {len(still)} weight(s) of the model, e.g. {still[:3]}")


def _install_prefetch(model, states):
    """Before each MoE layer's decoder layer runs (its attention first), its
    router applied to the layer's input predicts the experts the layer will
    use; those not in memory are read as prefetches (reads that yield to
    demand reads). Only for decode steps: a prefill's prediction would cover
    most experts."""
    by_layer = {s.layer: s for s in states}
    for name, module in model.named_modules():
        layer = _layer_of(name + ".x")
        if layer is None or not name.endswith(f"layers.{layer}") or layer not in by_layer:
            continue
        state = by_layer[layer]
        block = module.get_submodule(state.module_name[len(name) + 1:].rpartition(".")[0])
        router = getattr(block, "gate", None)
        weight = getattr(router, "weight", None)
        norm = getattr(module, "post_attention_layernorm", None)
        if weight is None or weight.dim() != 2 or norm is None:
            continue

        def hook(mod, args, kwargs, state=state, weight=weight, norm=norm):
            h = args[0] if args else kwargs.get("hidden_states")
            if h is None:
                return None
            rows = h.reshape(-1, h.shape[-1])
            if rows.shape[0] * state.top_k > state.budget_tiles:
                return None
            with torch.no_grad():
                logits = torch.nn.functional.linear(norm(rows), weight)
                guess = logits.topk(state.top_k, dim=-1).indices.reshape(-1).tolist()
            state.prefetch(set(guess))
            return None

        module.register_forward_pre_hook(hook, with_kwargs=True)


def _policy_stats(state):
    out = {"hits": 0, "misses": 0, "bytes_read": 0}
    for mt in state.matrices.values():
        s = mt.policy.stats()
        out["hits"] += s["hits"]
        out["misses"] += s["misses"]
        out["bytes_read"] += s["misses"] * mt.tile_bytes
    return out


def stats(model):
    """{"layers": [per MoE layer], "total": {...}}: tile hits and misses
    (each expert matrix a tile), bytes read from the tier (demand reads and
    prefetches), prefetches issued/used/wasted (in tiles), predictions made
    and right, seconds spent in the layer's expert calls (computing and
    waiting for reads), calls and tokens."""
    states = getattr(model, "_strideweave_layers", None)
    if not states:
        raise ValueError(f"{type(model).__name__} has no experts offloaded by strideweave.hf")
    layers = []
    for s in states:
        row = {"layer": s.layer, "module": s.module_name, "experts": s.experts, "budget_experts": s.budget_tiles}
        row.update(_policy_stats(s))
        st = s.stats
        row["bytes_read"] += st.prefetch_bytes
        row.update(prefetch_issued=st.prefetch_issued, prefetch_used=st.prefetch_used,
                   prefetch_wasted=st.prefetch_issued - st.prefetch_used, predicted=st.predicted,
                   predicted_right=st.predicted_right, wait_s=st.wait_s, calls=st.calls, tokens=st.tokens)
        layers.append(row)
    total = {}
    for key in ("hits", "misses", "bytes_read", "prefetch_issued", "prefetch_used", "prefetch_wasted", "predicted",
                "predicted_right", "wait_s", "calls", "tokens"):
        total[key] = sum(r[key] for r in layers)
    requests = total["hits"] + total["misses"]
    total["hit_rate"] = total["hits"] / requests if requests else 0.0
    total["prediction_accuracy"] = total["predicted_right"] / total["predicted"] if total["predicted"] else None
    return {"layers": layers, "total": total}


def release(model):
    """Releases the offloaded experts' carriers now (they are otherwise
    released when collected); the model cannot run afterwards."""
    states = getattr(model, "_strideweave_layers", None) or []
    for s in states:
        s.release()
    model._strideweave_layers = []
