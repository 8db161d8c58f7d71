"""strideweave.hf: Hugging Face MoE checkpoints inside transformers, checked
against transformers itself on tiny random models it builds and saves
(sharded so that a layer's experts span shards, in the per-expert Hub keys
and in the fused gate_up_proj/down_proj layout)."""
import gc
import json
import os
import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if int(transformers.__version__.split(".")[0]) < 5:
    pytest.skip("strideweave.hf needs transformers 5", allow_module_level=True)

import strideweave as sw  # noqa: E402
import strideweave.hf as swhf  # noqa: E402

COMMON = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=128)
DEEPSEEK = dict(moe_intermediate_size=48, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
                first_k_dense_replace=1, n_group=2, topk_group=1, routed_scaling_factor=2.5, kv_lora_rank=16,
                q_lora_rank=24, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, intermediate_size=96)


def _configs():
    return {
        "mixtral": lambda: transformers.MixtralConfig(intermediate_size=96, num_local_experts=4,
                                                      num_experts_per_tok=2, **COMMON),
        # A shared expert with its sigmoid gate; the top-k weights not renormalised.
        "qwen2_moe": lambda: transformers.Qwen2MoeConfig(intermediate_size=96, moe_intermediate_size=48,
                                                         shared_expert_intermediate_size=80, num_experts=4,
                                                         num_experts_per_tok=2, norm_topk_prob=False,
                                                         decoder_sparse_step=1, **COMMON),
        "qwen3_moe": lambda: transformers.Qwen3MoeConfig(intermediate_size=96, moe_intermediate_size=48, num_experts=4,
                                                         num_experts_per_tok=2, head_dim=16, **COMMON),
        "olmoe": lambda: transformers.OlmoeConfig(intermediate_size=48, num_experts=4, num_experts_per_tok=2,
                                                  eos_token_id=1, pad_token_id=0, **COMMON),
        # Grouped routing, routed_scaling_factor, shared experts, a dense first layer.
        "deepseek_v2": lambda: transformers.DeepseekV2Config(topk_method="group_limited_greedy", **DEEPSEEK,
                                                             **{**COMMON, "num_hidden_layers": 3}),
        "deepseek_v3": lambda: transformers.DeepseekV3Config(**DEEPSEEK, **{**COMMON, "num_hidden_layers": 3}),
    }


ARCHS = sorted(_configs())
LAYOUTS = ("hub", "fused")
PROMPT = [[1, 5, 9, 3, 17, 4]]
GREEDY = dict(max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=0)


def _save(model, path, layout, shard="40KB"):
    """Saves `model` as transformers does; the per-expert ("hub") layout is
    then re-sharded in key order, five tensors per file, as checkpoints
    written before transformers 5 are (transformers 5 keeps a layer's
    experts of one matrix in one shard, the Hub's files often do not)."""
    model.save_pretrained(path, max_shard_size=shard, save_original_format=(layout == "hub"))
    if layout == "hub":
        _reshard(path, 5)
    return str(path)


def _reshard(path, per_file):
    from safetensors.torch import load_file, save_file

    index_path = os.path.join(path, "model.safetensors.index.json")
    files = sorted(set(_index(path).values())) if os.path.exists(index_path) else ["model.safetensors"]
    tensors = {}
    for name in files:
        tensors.update(load_file(os.path.join(path, name)))
        os.unlink(os.path.join(path, name))
    keys = sorted(tensors)
    chunks = [keys[i:i + per_file] for i in range(0, len(keys), per_file)]
    weight_map = {}
    for n, chunk in enumerate(chunks):
        name = f"model-{n + 1:05d}-of-{len(chunks):05d}.safetensors"
        save_file({k: tensors[k].contiguous() for k in chunk}, os.path.join(path, name), metadata={"format": "pt"})
        weight_map.update({k: name for k in chunk})
    with open(index_path, "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """{(arch, layout): directory}, each a float32 model saved sharded."""
    out = {}
    root = tmp_path_factory.mktemp("hf")
    for arch, make in _configs().items():
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(make())
        for layout in LAYOUTS:
            out[arch, layout] = _save(model, root / f"{arch}-{layout}", layout)
    return out


@pytest.fixture(scope="module")
def references(checkpoints):
    cache = {}

    def get(key):
        if key not in cache:
            cache[key] = transformers.AutoModelForCausalLM.from_pretrained(checkpoints[key], dtype=torch.float32)
        return cache[key]

    return get


def _index(path):
    with open(os.path.join(path, "model.safetensors.index.json")) as f:
        return json.load(f)["weight_map"]


def test_the_hub_checkpoints_spread_a_layers_experts_over_shards(checkpoints):
    for arch in ARCHS:
        files = {}
        for key, name in _index(checkpoints[arch, "hub"]).items():
            if ".experts." in key and (key.endswith(".w1.weight") or key.endswith(".gate_proj.weight")):
                layer = key.split(".experts.")[0]
                files.setdefault(layer, set()).add(name)
        assert files, arch
        assert max(len(v) for v in files.values()) >= 2, f"{arch}: no layer's experts span two shards"


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("arch", ARCHS)
def test_generate_gives_transformers_tokens_and_logits(arch, layout, checkpoints, references):
    ref = references((arch, layout))
    model = swhf.from_pretrained(checkpoints[arch, layout], budget=0.5)
    assert type(model) is type(ref)
    assert isinstance(model, transformers.PreTrainedModel)
    ids = torch.tensor(PROMPT)
    with torch.no_grad():
        want, got = ref(ids).logits, model(ids).logits
    rel = ((want - got).abs().max() / want.abs().max()).item()
    assert rel <= 1e-4, rel
    assert ref.generate(ids, **GREEDY).tolist() == model.generate(ids, **GREEDY).tolist()
    s = swhf.stats(model)
    assert s["total"]["misses"] > 0 and s["total"]["calls"] == len(s["layers"]) * (1 + GREEDY["max_new_tokens"])
    # The experts' weights are nowhere in the model's memory.
    assert not [n for n, _ in model.named_parameters() if n.endswith(("gate_up_proj", "experts.down_proj"))]
    swhf.release(model)


@pytest.mark.parametrize("tier", ["direct", "page-cache", "zstd"])
def test_every_tier_and_budget_gives_the_same_tokens(tier, checkpoints, references):
    ref = references(("mixtral", "hub"))
    ids = torch.tensor(PROMPT)
    want = ref.generate(ids, **GREEDY).tolist()
    for layout in LAYOUTS:
        for budget in (2, 3, 4, 0.5, 1.0):
            model = swhf.from_pretrained(checkpoints["mixtral", layout], budget=budget, tier=tier)
            assert model.generate(ids, **GREEDY).tolist() == want, (layout, budget)
            s = swhf.stats(model)
            assert all(r["budget_experts"] == (budget if isinstance(budget, int) else round(budget * 4))
                       for r in s["layers"])
            if budget in (4, 1.0):  # everything fits: each expert tile read at most once
                assert s["total"]["bytes_read"] <= 4 * 3 * 64 * 96 * 4 * len(s["layers"])
            swhf.release(model)


def test_the_remote_tier_gives_the_same_tokens(checkpoints, references, redis_server, monkeypatch):
    """tier="remote": each layer's experts seeded into namespaces of the
    load's own on the server, read back as the TiledEvictables' secondary
    tier; the tokens are transformers' at every budget and layout, and
    release() deletes every key the load wrote."""
    from conftest import redis_command

    ref = references(("mixtral", "hub"))
    ids = torch.tensor(PROMPT)
    want = ref.generate(ids, **GREEDY).tolist()
    monkeypatch.delenv("STRIDEWEAVE_REMOTE_ENDPOINTS", raising=False)
    for layout in LAYOUTS:
        for budget in (2, 0.5):
            model = swhf.from_pretrained(checkpoints["mixtral", layout], budget=budget, tier="remote",
                                         remote_endpoints=[redis_server])
            assert redis_command(redis_server, "DBSIZE") != b":0\r\n"
            assert model.generate(ids, **GREEDY).tolist() == want, (layout, budget)
            assert swhf.stats(model)["total"]["bytes_read"] > 0
            swhf.release(model)
            gc.collect()
            assert redis_command(redis_server, "DBSIZE") == b":0\r\n", (layout, budget)
    # The endpoints from the environment, as a comma-separated list.
    monkeypatch.setenv("STRIDEWEAVE_REMOTE_ENDPOINTS", redis_server)
    model = swhf.from_pretrained(checkpoints["mixtral", "fused"], budget=2, tier="remote")
    assert model.generate(ids, **GREEDY).tolist() == want
    swhf.release(model)


def test_remote_tier_options_are_checked(checkpoints, monkeypatch):
    good = checkpoints["mixtral", "hub"]
    monkeypatch.delenv("STRIDEWEAVE_REMOTE_ENDPOINTS", raising=False)
    _fails(ValueError, "needs servers", good, tier="remote")
    _fails(ValueError, "needs servers", good, tier="remote", remote_endpoints="")
    _fails(ValueError, "applies to tier='remote'", good, tier="direct", remote_endpoints="unix:///x.sock")
    _fails(TypeError, "remote_endpoints", good, tier="remote", remote_endpoints=5)


def test_bf16_logits_agree_within_bf16_rounding(tmp_path):
    torch.manual_seed(1)
    cfg = _configs()["mixtral"]()
    model = transformers.AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
    path = _save(model, tmp_path / "bf16", "hub")
    ref = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
    ours = swhf.from_pretrained(path, budget=2)
    assert ours.dtype == torch.bfloat16
    ids = torch.tensor(PROMPT)
    with torch.no_grad():
        want, got = ref(ids).logits.float(), ours(ids).logits.float()
    # bf16 keeps 8 significant bits: the two round a layer's sum at
    # different points (transformers per expert, StrideWeave once), a few
    # units of 2^-8 of the logits' scale apart.
    assert ((want - got).abs().max() / want.abs().max()).item() <= 4 * 2.0 ** -8


def test_float16_checkpoint_runs(tmp_path):
    torch.manual_seed(2)
    model = transformers.AutoModelForCausalLM.from_config(_configs()["qwen3_moe"]()).to(torch.float16)
    path = _save(model, tmp_path / "f16", "fused")
    ours = swhf.from_pretrained(path, budget=2)
    ref = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float16)
    with torch.no_grad():
        want, got = ref(torch.tensor(PROMPT)).logits.float(), ours(torch.tensor(PROMPT)).logits.float()
    assert ((want - got).abs().max() / want.abs().max()).item() <= 4 * 2.0 ** -11


def test_offload_experts_on_a_model_built_on_meta(checkpoints, references):
    path = checkpoints["qwen2_moe", "hub"]
    config = transformers.AutoConfig.from_pretrained(path)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    # Buffers built on meta (rotary frequencies) are the caller's to make real.
    model.model.rotary_emb = type(model.model.rotary_emb)(config)
    assert swhf.offload_experts(model, path, budget=2) is model
    ids = torch.tensor(PROMPT)
    assert model.generate(ids, **GREEDY).tolist() == references(("qwen2_moe", "hub")).generate(ids, **GREEDY).tolist()


def _open_fds():
    return len(os.listdir("/proc/self/fd"))


def _fails(exc, match, *args, **kwargs):
    before = _open_fds()
    with pytest.raises(exc, match=match) as info:
        swhf.from_pretrained(*args, **kwargs)
    assert _open_fds() == before, "a failed load left files open"
    return info.value


def test_bad_input_names_the_problem(tmp_path, checkpoints):
    good = checkpoints["mixtral", "hub"]
    e = _fails(FileNotFoundError, "no such model directory", tmp_path / "missing")
    assert str(tmp_path / "missing") in str(e)
    (tmp_path / "empty").mkdir()
    _fails(FileNotFoundError, "config.json", tmp_path / "empty")
    for budget, exc, text in ((0, ValueError, "at least 1"), (1, ValueError, "top-k = 2"), (1.5, ValueError, r"\(0, 1\]"),
                              (0.0, ValueError, r"\(0, 1\]"), (float("nan"), ValueError, r"\(0, 1\]"),
                              ("all", TypeError, "budget"), (True, TypeError, "budget")):
        _fails(exc, text, good, budget=budget)
    _fails(ValueError, "tier", good, tier="ssd")
    _fails(TypeError, "prefetch", good, prefetch="yes")


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_a_model_without_routed_experts_is_refused(tmp_path):
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=4, num_key_value_heads=2)
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp_path / "llama")
    _fails(ValueError, "LlamaForCausalLM has no routed experts", tmp_path / "llama")


def test_damaged_checkpoints_fail_with_the_file_named(tmp_path, checkpoints):
    src = checkpoints["mixtral", "hub"]
    index = _index(src)
    shard = sorted(set(index.values()))[1]
    # Truncated shard.
    d = _copy(src, tmp_path / "truncated")
    p = d / shard
    p.write_bytes(p.read_bytes()[:-100])
    e = _fails(sw.DataCorruptError, "truncated", d)
    assert shard in str(e)
    # Corrupted header.
    d = _copy(src, tmp_path / "corrupt")
    p = d / shard
    raw = bytearray(p.read_bytes())
    raw[8:12] = b"\xff\xfe{["
    p.write_bytes(bytes(raw))
    e = _fails(sw.DataCorruptError, "JSON", d)
    assert shard in str(e)
    # Not a safetensors file at all.
    d = _copy(src, tmp_path / "notst")
    (d / shard).write_bytes(b"\x01\x00")
    _fails(sw.DataCorruptError, "not a safetensors file", d)
    # An index naming a missing file.
    d = _copy(src, tmp_path / "missing-shard")
    (d / shard).unlink()
    e = _fails(FileNotFoundError, "names a shard that is missing", d)
    assert shard in str(e)
    # An index placing a tensor in a shard that lacks it.
    d = _copy(src, tmp_path / "bad-index")
    with open(d / "model.safetensors.index.json") as f:
        data = json.load(f)
    key = next(k for k in data["weight_map"] if ".experts.0.w1" in k)
    other = next(n for n in sorted(set(index.values())) if n != index[key])
    data["weight_map"][key] = other
    with open(d / "model.safetensors.index.json", "w") as f:
        json.dump(data, f)
    _fails(sw.DataCorruptError, "has no tensor", d)


def test_the_experts_are_inference_only(checkpoints):
    model = swhf.from_pretrained(checkpoints["mixtral", "fused"], budget=2)
    for p in model.parameters():
        p.requires_grad_(True)
    out = model(torch.tensor(PROMPT)).logits.sum()
    with pytest.raises(NotImplementedError, match="inference-only"):
        out.backward()


def test_prefetch_predicts_and_keeps_the_tokens(checkpoints, references):
    ref = references(("olmoe", "hub"))
    model = swhf.from_pretrained(checkpoints["olmoe", "hub"], budget=2, prefetch=True)
    ids = torch.tensor(PROMPT)
    assert model.generate(ids, **GREEDY).tolist() == ref.generate(ids, **GREEDY).tolist()
    t = swhf.stats(model)["total"]
    assert t["predicted"] == 2 * GREEDY["max_new_tokens"] * 2 - 2 * 2  # decode steps x layers x top-k
    assert 0 <= t["predicted_right"] <= t["predicted"]
    assert t["prefetch_used"] <= t["prefetch_issued"]
    assert t["prefetch_wasted"] == t["prefetch_issued"] - t["prefetch_used"]


@pytest.mark.e2e
def test_the_command_line_generates_and_reports(checkpoints, references):
    path = checkpoints["deepseek_v3", "fused"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-m", "strideweave.hf", "generate", path, "--budget", "2",
                        "--max-new-tokens", "5", "--prompt-ids", "1,5,9,3,17,4", "--json"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "token 5/5" in r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    want = references(("deepseek_v3", "fused")).generate(torch.tensor(PROMPT), max_new_tokens=5, do_sample=False,
                                                           pad_token_id=0)
    assert report["tokens"] == want[0, len(PROMPT[0]):].tolist()
    assert report["stats"]["total"]["calls"] > 0
    r = subprocess.run([sys.executable, "-m", "strideweave.hf", "generate", path, "--budget", "1", "--prompt-ids", "1"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and "top-k = 2" in r.stderr


MEMORY_SCRIPT = r"""
import json, sys, torch, transformers
import strideweave.hf as swhf
def hwm():  # this process's peak resident set (ru_maxrss would carry the parent's over fork)
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM:"))
path, mode = sys.argv[1], sys.argv[2]
base = hwm()
if mode == "transformers":
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
else:
    model = swhf.from_pretrained(path, budget=0.25, tier="direct")
model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=6, do_sample=False, eos_token_id=None, pad_token_id=0)
print(json.dumps({"base": base, "peak": hwm()}))
"""


@pytest.mark.e2e
def test_peak_memory_stays_within_non_experts_plus_budget(tmp_path):
    """Loading and generating holds the non-expert weights, the budget and a
    fixed slack (docs/transformers.md), where transformers' own load holds
    every expert: checked in fresh processes."""
    cfg = transformers.MixtralConfig(vocab_size=256, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
                                     num_attention_heads=8, num_key_value_heads=4, num_local_experts=8,
                                     num_experts_per_tok=2, max_position_embeddings=64)
    with torch.device("meta"):
        shape_model = transformers.AutoModelForCausalLM.from_config(cfg)
    expert_bytes = sum(p.numel() * 2 for n, p in shape_model.named_parameters() if ".experts." in n)
    dense_bytes = sum(p.numel() * 2 for n, p in shape_model.named_parameters() if ".experts." not in n)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
    path = _save(model, tmp_path / "mem", "hub", shard="40MB")
    del model
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))

    def run(mode):
        r = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, path, mode], capture_output=True, text=True,
                           env=env, timeout=600)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])

    ours, theirs = run("strideweave"), run("transformers")
    budget = expert_bytes // 4
    # One call's reads: the top-k experts of a layer, held until the call's evictions commit.
    reads = expert_bytes // (cfg.num_hidden_layers * cfg.num_local_experts) * cfg.num_experts_per_tok
    slack = swhf.MEMORY_SLACK_BYTES
    grown = ours["peak"] - ours["base"]
    print(f"grown {grown >> 20} MiB: dense {dense_bytes >> 20} MiB + budget {budget >> 20} MiB + reads "
          f"{reads >> 20} MiB; transformers grew {(theirs['peak'] - theirs['base']) >> 20} MiB")
    assert grown <= dense_bytes + budget + reads + slack, (grown, dense_bytes, budget, reads, slack)
    # transformers' own load holds every expert.
    assert theirs["peak"] - theirs["base"] >= expert_bytes
    assert grown < theirs["peak"] - theirs["base"] - expert_bytes // 2


# ---- quantized experts: `quantize` writes a GGUF of the routed experts, experts_gguf= computes on it ----

# Wide enough for every block (Q4_K and Q6_K take rows of 256 values).
QUANT_COMMON = dict(vocab_size=128, hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    max_position_embeddings=128)


def _quant_configs():
    return {
        "mixtral": lambda: transformers.MixtralConfig(intermediate_size=256, num_local_experts=4, num_experts_per_tok=2,
                                                      **QUANT_COMMON),
        "qwen3_moe": lambda: transformers.Qwen3MoeConfig(intermediate_size=256, moe_intermediate_size=256,
                                                         num_experts=4, num_experts_per_tok=2, head_dim=64,
                                                         **QUANT_COMMON),
    }


# Mixtral in the per-expert Hub keys, Qwen3-MoE in transformers' fused gate_up_proj.
QUANT_CASES = [("mixtral", "hub"), ("qwen3_moe", "fused")]


@pytest.fixture(scope="module")
def quant_checkpoints(tmp_path_factory):
    out = {}
    root = tmp_path_factory.mktemp("hfq")
    for arch, layout in QUANT_CASES:
        torch.manual_seed(3)
        model = transformers.AutoModelForCausalLM.from_config(_quant_configs()[arch]())
        out[arch] = _save(model, root / f"{arch}-{layout}", layout, shard="400KB")
    return out


def _routed_experts(model):
    """{layer: experts module} of a transformers model."""
    out = {}
    for name, module in model.named_modules():
        if isinstance(module._parameters.get("gate_up_proj"), torch.nn.Parameter):
            out[int(name.split(".layers.")[1].split(".")[0])] = module
    return out


def _dequantized_reference(path, gguf_path):
    """transformers' own model of the checkpoint, its routed experts
    replaced by gguf-py's dequantization of the GGUF's blocks (f32)."""
    gguf = pytest.importorskip("gguf", reason="gguf-py dequantizes the reference's experts")
    ref = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    reader = gguf.GGUFReader(gguf_path)
    deq = {t.name: torch.from_numpy(gguf.quants.dequantize(t.data, t.tensor_type).astype("float32"))
           for t in reader.tensors}
    for layer, module in _routed_experts(ref).items():
        gate, up = deq[f"blk.{layer}.ffn_gate_exps.weight"], deq[f"blk.{layer}.ffn_up_exps.weight"]
        with torch.no_grad():
            module.gate_up_proj.copy_(torch.cat([gate, up], dim=1))
            module.down_proj.copy_(deq[f"blk.{layer}.ffn_down_exps.weight"])
    return ref


# Logits within this fraction of their largest magnitude of the dequantized
# model's: the kernels quantize each activation row to 8-bit blocks (32
# values; 256 for the K-quants) before the integer products, an error of at
# most half a step (1/254 of the block's largest value) per value, through
# two products per expert. These models measure at most 0.26 % (q8_0) and
# 0.41 % (q4_k); 1 % leaves room for other seeds and kernel sets.
QUANT_LOGIT_TOL = {"q8_0": 0.01, "q4_k": 0.01}


@pytest.mark.parametrize("qtype", ["q8_0", "q4_k"])
@pytest.mark.parametrize("arch", [a for a, _ in QUANT_CASES])
def test_quantized_experts_generate_the_dequantized_models_tokens(arch, qtype, quant_checkpoints, tmp_path):
    """Quantize, then generate from the GGUF, against transformers with the
    GGUF's dequantized experts loaded. The rule: (1) teacher-forced on the
    reference's greedy sequence, every logit is within QUANT_LOGIT_TOL of
    the largest logit magnitude, `bound`, of the reference's; (2) at every
    step where the reference's two best logits are more than 2 * bound
    apart (then no error within the bound can swap them) our argmax is the
    reference's token; (3) free-running greedy tokens equal the reference's
    up to the first step whose margin is within 2 * bound (all of them when
    none is). The test's model is chosen so that most steps are decided."""
    path = quant_checkpoints[arch]
    out = swhf.quantize_experts(path, qtype, out=tmp_path / f"{qtype}.gguf")
    assert out == str(tmp_path / f"{qtype}.gguf")
    ref = _dequantized_reference(path, out)
    model = swhf.from_pretrained(path, budget=2, experts_gguf=out)
    assert type(model) is type(ref)
    ids = torch.tensor(PROMPT)
    want = ref.generate(ids, **GREEDY)
    with torch.no_grad():
        lw, lg = ref(want).logits[0], model(want).logits[0]
    bound = QUANT_LOGIT_TOL[qtype] * lw.abs().max().item()
    err = (lw - lg).abs().max().item()
    assert err <= bound, (err, bound)
    p0 = len(PROMPT[0]) - 1
    top2 = lw[p0:-1].topk(2, dim=-1).values
    decided = ((top2[:, 0] - top2[:, 1]) > 2 * bound).tolist()
    assert sum(decided) >= len(decided) // 2, decided
    for i, ok in enumerate(decided):
        if ok:
            assert lg[p0 + i].argmax().item() == want[0, p0 + i + 1].item(), i
    prefix = len(PROMPT[0]) + (decided.index(False) if False in decided else len(decided))
    got = model.generate(ids, **GREEDY)
    assert got[0, :prefix].tolist() == want[0, :prefix].tolist()
    s = swhf.stats(model)
    assert s["total"]["misses"] > 0 and s["total"]["calls"] == 2 * (1 + GREEDY["max_new_tokens"])
    swhf.release(model)


@pytest.mark.parametrize("arch", ARCHS)
def test_every_architecture_quantizes_its_routed_experts(arch, tmp_path):
    """Each architecture (per-expert keys; shared experts, dense first
    layers and grouped routing left to the checkpoint) quantized to q8_0,
    widths of whole blocks: logits within QUANT_LOGIT_TOL of the model with
    the GGUF's experts dequantized, one GGUF layer per MoE layer."""
    cfg = _configs()[arch]()
    for attr in ("intermediate_size", "moe_intermediate_size"):
        if getattr(cfg, attr, 32) % 32:
            setattr(cfg, attr, 64)
    torch.manual_seed(6)
    path = _save(transformers.AutoModelForCausalLM.from_config(cfg), tmp_path / arch, "hub")
    out = swhf.quantize_experts(path, "q8_0")
    ref = _dequantized_reference(path, out)
    model = swhf.from_pretrained(path, budget=2, experts_gguf=out)
    with torch.no_grad():
        want, got = ref(torch.tensor(PROMPT)).logits, model(torch.tensor(PROMPT)).logits
    assert (want - got).abs().max().item() <= QUANT_LOGIT_TOL["q8_0"] * want.abs().max().item()
    layers = [r["layer"] for r in swhf.stats(model)["layers"]]
    assert layers == sorted(_routed_experts(ref))
    swhf.release(model)


def test_quantize_writes_llama_cpp_tensors_and_metadata(quant_checkpoints, tmp_path):
    gguf = pytest.importorskip("gguf", reason="gguf-py reads the file back")
    path = quant_checkpoints["qwen3_moe"]
    lines = []
    out = swhf.quantize_experts(path, "q6_k", progress=lines.append)
    try:
        assert out == os.path.join(path, "experts-q6_k.gguf")
        assert len(lines) == 2 and "layer 1 (2/2 MoE layers)" in lines[1]
        reader = gguf.GGUFReader(out)
        names = {t.name: t for t in reader.tensors}
        assert sorted(names) == sorted(f"blk.{l}.ffn_{m}_exps.weight" for l in (0, 1) for m in ("gate", "up", "down"))
        for name, t in names.items():
            assert t.tensor_type == gguf.GGMLQuantizationType.Q6_K
            assert [int(d) for d in t.shape] == [256, 256, 4]
        fields = {k: f.contents() for k, f in reader.fields.items()}
        assert fields["general.architecture"] == "qwen3moe"
        assert fields["qwen3moe.block_count"] == 2 and fields["qwen3moe.expert_count"] == 4
        assert fields["strideweave.experts.type"] == "q6_k"
        assert fields["strideweave.experts.source"] == os.path.abspath(path)
        assert "StrideWeave" in fields["strideweave.experts.quantizer"]
        # The blocks are StrideWeave's quantization of the checkpoint's expert, row by row.
        ckpt = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        up = _routed_experts(ckpt)[1].gate_up_proj.detach()[2, 256:]  # expert 2's up rows (F, H)
        want = sw.tensor(up.numpy().T.copy(order="F"), dtype="q6_k").numpy().T
        assert (names["blk.1.ffn_up_exps.weight"].data[2] == want).all()
        # The shared experts and the rest stay in the checkpoint: nothing else is written.
        assert not [n for n in names if "shexp" in n]
        # An existing output is kept unless forced.
        with pytest.raises(FileExistsError, match="experts-q6_k.gguf"):
            swhf.quantize_experts(path, "q6_k")
        assert swhf.quantize_experts(path, "q6_k", force=True) == out
    finally:
        os.unlink(out)


def test_quantized_experts_read_only_the_chosen_experts(quant_checkpoints, tmp_path):
    """At a budget of top-k, one token reads exactly its top-k experts of
    each layer from the GGUF: three tiles each, their blocks' bytes."""
    path = quant_checkpoints["mixtral"]
    out = swhf.quantize_experts(path, "q4_k", out=tmp_path / "e.gguf")
    for tier in ("direct", "page-cache"):
        model = swhf.from_pretrained(path, budget=2, tier=tier, experts_gguf=out)
        with torch.no_grad():
            model(torch.tensor([[7]]))
        t = swhf.stats(model)["total"]
        tile = 256 // 256 * 144 * 256  # a (256, 256) q4_k expert matrix
        assert t["misses"] == 2 * 2 * 3 and t["hits"] == 0
        assert t["bytes_read"] == 2 * 2 * 3 * tile
        assert 2 * t["bytes_read"] <= os.path.getsize(out)  # 2 of 4 experts, none twice
        swhf.release(model)


def test_quantize_and_experts_gguf_refuse_what_does_not_fit(quant_checkpoints, checkpoints, tmp_path):
    path = quant_checkpoints["mixtral"]
    with pytest.raises(ValueError, match="unknown quantized type 'q5_k'"):
        swhf.quantize_experts(path, "q5_k")
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=4, num_key_value_heads=2)
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp_path / "llama")
    with pytest.raises(ValueError, match="no routed experts"):
        swhf.quantize_experts(tmp_path / "llama", "q8_0")
    # Rows of 64 values: not whole Q4_K blocks.
    with pytest.raises(ValueError, match="blocks of 256"):
        swhf.quantize_experts(checkpoints["mixtral", "hub"], "q4_k", out=tmp_path / "x.gguf")
    assert not os.path.exists(tmp_path / "x.gguf")
    # A missing file.
    e = _fails(FileNotFoundError, "no such experts GGUF file", path, experts_gguf=tmp_path / "none.gguf")
    assert str(tmp_path / "none.gguf") in str(e)
    good = swhf.quantize_experts(path, "q8_0", out=tmp_path / "good.gguf")
    _fails(ValueError, "tier must be 'direct' or 'page-cache'", path, experts_gguf=good, tier="zstd")
    # Another model's experts: the intermediate size differs.
    torch.manual_seed(4)
    other = transformers.AutoModelForCausalLM.from_config(
        transformers.MixtralConfig(intermediate_size=512, num_local_experts=4, num_experts_per_tok=2, **QUANT_COMMON))
    wide = swhf.quantize_experts(_save(other, tmp_path / "wide", "fused", shard="1MB"), "q8_0",
                                 out=tmp_path / "wide.gguf")
    e = _fails(ValueError, r"tensor 'blk.0.ffn_gate_exps.weight' has ne \[256, 512, 4\]", path, experts_gguf=wide)
    assert "wide.gguf" in str(e)
    # Another expert count.
    torch.manual_seed(5)
    other = transformers.AutoModelForCausalLM.from_config(
        transformers.MixtralConfig(intermediate_size=256, num_local_experts=8, num_experts_per_tok=2, **QUANT_COMMON))
    eight = swhf.quantize_experts(_save(other, tmp_path / "eight", "fused", shard="1MB"), "q8_0",
                                  out=tmp_path / "eight.gguf")
    _fails(ValueError, "llama.expert_count is 8, the model", path, experts_gguf=eight)
    # A layer missing, and a layer the model lacks.
    gate = sw.tensor(torch.zeros(4, 256, 256).numpy().T, dtype="q8_0")
    down = gate
    for layers, text in (((0,), "no tensor 'blk.1.ffn_gate_exps.weight'"),
                         ((0, 1, 2), "'blk.2.ffn_gate_exps.weight' holds experts of layer 2")):
        f = tmp_path / f"layers{len(layers)}.gguf"
        sw.save_gguf(f, {f"blk.{l}.ffn_{m}_exps.weight": (down if m == "down" else gate) for l in layers
                         for m in ("gate", "up", "down")})
        e = _fails(ValueError, text, path, experts_gguf=f)
        assert str(f) in str(e)


@pytest.mark.e2e
def test_the_command_line_quantizes_and_generates(quant_checkpoints, tmp_path):
    path = quant_checkpoints["qwen3_moe"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = str(tmp_path / "cli.gguf")
    cmd = [sys.executable, "-m", "strideweave.hf", "quantize", path, "--type", "q4_k", "--out", out]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "layer 1 (2/2 MoE layers)" in r.stderr and r.stdout.strip() == out
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and "--force" in r.stderr and out in r.stderr
    r = subprocess.run(cmd[:-4] + ["--type", "q3_k"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and "unknown quantized type 'q3_k'" in r.stderr
    r = subprocess.run([sys.executable, "-m", "strideweave.hf", "generate", path, "--budget", "2", "--experts-gguf",
                        out, "--max-new-tokens", "4", "--prompt-ids", "1,5,9,3,17,4", "--json"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    model = swhf.from_pretrained(path, budget=2, experts_gguf=out)
    want = model.generate(torch.tensor(PROMPT), max_new_tokens=4, do_sample=False, pad_token_id=0)
    assert report["tokens"] == want[0, len(PROMPT[0]):].tolist()
    assert report["stats"]["total"]["bytes_read"] > 0
