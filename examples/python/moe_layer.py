"""A Mixtral-style mixture-of-experts layer written with StrideWeave's tensor
ops alone (router linear, softmax, top-2, renormalised gates, SwiGLU
experts, weighted sum), trained for a few SGD steps to fit a fixed target.

    python3 examples/python/moe_layer.py [--tokens 16] [--dim 8] [--hidden 16]
                                         [--experts 4] [--steps 20] [--lr 0.2]

Prints the loss every few steps; it falls as the experts and the router learn."""
import argparse
import sys

import strideweave as sw


def moe(x, router, w1, w3, w2, k=2):
    """x (T, D) -> (T, D); w1, w3 (E, D, H), w2 (E, H, D), router (D, E)."""
    probs = sw.softmax(x @ router, dim=-1)                # (T, E)
    top, idx = sw.topk(probs, k, dim=-1)                  # (T, k), int64 indices
    gates = top / top.sum(dim=-1, keepdim=True)           # renormalised gates
    tokens, experts = probs.shape
    dense = sw.scatter_add(sw.zeros(tokens, experts, dtype=x.dtype), 1, idx, gates)
    out = None
    for e in range(experts):
        y = (sw.silu(x @ w1[e]) * (x @ w3[e])) @ w2[e]    # SwiGLU expert
        part = y * dense[:, e].unsqueeze(1)
        out = part if out is None else out + part
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--dim", type=int, default=8)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--experts", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def main(argv=None):
    o = parse_args(sys.argv[1:] if argv is None else argv)
    T, D, H, E = o.tokens, o.dim, o.hidden, o.experts
    x = sw.randn(T, D, seed=1)
    target = sw.tanh(sw.randn(T, D, seed=2))
    params = {
        "router": sw.randn(D, E, seed=3),
        "w1": sw.randn(E, D, H, seed=4, std=D ** -0.5),
        "w3": sw.randn(E, D, H, seed=5, std=D ** -0.5),
        "w2": sw.randn(E, H, D, seed=6, std=H ** -0.5),
    }
    for p in params.values():
        p.requires_grad = True
    losses = []
    for step in range(o.steps):
        diff = moe(x, **params) - target
        loss = (diff * diff).mean()
        loss.backward()
        with sw.no_grad():
            for p in params.values():
                p -= o.lr * p.grad      # in place: a leaf is modified under no_grad
                p.grad = None
        losses.append(loss.item())
        if not o.quiet and (step % 5 == 0 or step == o.steps - 1):
            print(f"step {step:3d}  loss {losses[-1]:.6f}")
    return losses


if __name__ == "__main__":
    main()
