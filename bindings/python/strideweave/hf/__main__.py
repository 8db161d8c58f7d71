"""python -m strideweave.hf generate MODEL_DIR [--budget 0.25] [--tier direct]
[--experts-gguf PATH] [--max-new-tokens N] (--prompt-ids 1,2,3 | --prompt "text")
python -m strideweave.hf quantize MODEL_DIR --type q4_k [--out PATH] [--force]

Greedy generation with transformers' generate() from a Hugging Face MoE
checkpoint whose routed experts stay in its files (or in a GGUF file of
them that quantize writes), with a progress line per token on stderr and
the offload statistics at the end."""
import argparse
import json
import os
import sys
import time

import torch
import transformers

from . import QUANTIZED_TYPES, from_pretrained, quantize_experts, stats


def _budget(text):
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _ids(text):
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--prompt-ids takes comma-separated integers, not {text!r}") from None


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m strideweave.hf", description=__doc__.split("\n\n")[1])
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="generate tokens from a checkpoint with its experts offloaded")
    g.add_argument("model_dir")
    g.add_argument("--budget", type=_budget, default=0.25,
                   help="fraction in (0, 1] of each layer's experts kept in memory, or an int count (default 0.25)")
    g.add_argument("--tier", choices=("direct", "page-cache", "zstd", "remote"), default="direct")
    g.add_argument("--remote-endpoints", default=None,
                   help="--tier remote: comma-separated unix:///path or redis://host[:port] servers "
                        "(default $STRIDEWEAVE_REMOTE_ENDPOINTS)")
    g.add_argument("--dtype", default=None, help="bfloat16, float16 or float32 (default: the checkpoint's)")
    g.add_argument("--prefetch", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--max-new-tokens", type=int, default=32)
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt-ids", type=_ids, help="comma-separated token ids")
    src.add_argument("--prompt", help="a prompt string (needs a tokenizer in MODEL_DIR)")
    g.add_argument("--experts-gguf", default=None, metavar="PATH",
                   help="read the routed experts from this GGUF file (as quantize writes it) instead of the "
                        "checkpoint, computed on its quantized blocks")
    g.add_argument("--json", action="store_true", help="print the statistics as one JSON line")
    q = sub.add_parser("quantize", help="write a checkpoint's routed experts as one quantized GGUF file")
    q.add_argument("model_dir")
    q.add_argument("--type", required=True, metavar="TYPE", help=f"one of {', '.join(QUANTIZED_TYPES)}")
    q.add_argument("--out", default=None, metavar="PATH", help="the GGUF file (default MODEL_DIR/experts-TYPE.gguf)")
    q.add_argument("--force", action="store_true", help="replace an existing output file")
    o = p.parse_args(argv)
    if o.command == "quantize":
        return _quantize(o)

    t0 = time.perf_counter()
    try:
        model = from_pretrained(o.model_dir, budget=o.budget, tier=o.tier, dtype=o.dtype, prefetch=o.prefetch,
                                remote_endpoints=o.remote_endpoints, experts_gguf=o.experts_gguf)
    except (OSError, ValueError, TypeError, NotImplementedError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    load_s = time.perf_counter() - t0
    tokenizer = None
    if o.prompt is not None:
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(o.model_dir)
        except Exception as e:  # no tokenizer files, or ones transformers cannot read
            print(f"error: --prompt needs a tokenizer in {o.model_dir}: {e}", file=sys.stderr)
            return 2
        ids = tokenizer(o.prompt, return_tensors="pt").input_ids
    else:
        ids = torch.tensor([o.prompt_ids], dtype=torch.long)
    where = f", from {o.experts_gguf}" if o.experts_gguf else ""
    print(f"loaded {type(model).__name__} from {o.model_dir} in {load_s:.2f} s "
          f"(experts offloaded{where}, budget {o.budget}, tier {o.tier})", file=sys.stderr)

    class Progress(transformers.generation.streamers.BaseStreamer):
        def __init__(self):
            self.n = -1
            self.start = time.perf_counter()

        def put(self, value):
            self.n += 1
            if self.n == 0:
                return  # the prompt
            dt = time.perf_counter() - self.start
            print(f"\rtoken {self.n}/{o.max_new_tokens}  {self.n / dt:.2f} tokens/s", end="", file=sys.stderr,
                  flush=True)

        def end(self):
            print(file=sys.stderr)

    t1 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=o.max_new_tokens, do_sample=False, streamer=Progress(),
                             pad_token_id=model.generation_config.pad_token_id or 0)
    gen_s = time.perf_counter() - t1
    new = out[0, ids.shape[1]:].tolist()
    print("token ids:", ",".join(map(str, new)))
    if tokenizer is not None:
        print("text:", tokenizer.decode(new, skip_special_tokens=True))
    s = stats(model)
    t = s["total"]
    print(f"{len(new)} tokens in {gen_s:.2f} s ({len(new) / gen_s:.2f} tokens/s); expert tiles: {t['hits']} hits, "
          f"{t['misses']} misses (hit rate {t['hit_rate']:.1%}), {t['bytes_read'] / 2**20:.1f} MiB read, "
          f"{t['wait_s']:.2f} s in expert calls; prefetch {t['prefetch_issued']} issued, {t['prefetch_used']} used")
    if o.json:
        print(json.dumps({"tokens": new, "seconds": gen_s, "load_seconds": load_s, "stats": s}))
    return 0


def _quantize(o):
    t0 = time.perf_counter()
    print(f"quantizing the routed experts of {o.model_dir} to {o.type}", file=sys.stderr)
    try:
        out = quantize_experts(o.model_dir, o.type, out=o.out, force=o.force,
                               progress=lambda line: print(line, file=sys.stderr, flush=True))
    except (OSError, ValueError, TypeError, NotImplementedError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out} ({os.path.getsize(out) / 2**20:.1f} MiB) in {time.perf_counter() - t0:.2f} s",
          file=sys.stderr)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
