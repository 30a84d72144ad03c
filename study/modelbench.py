"""Timing the variants of inmodel.py on the GPU: the GPT's inference and a Llama MLP block.

    time_variants(fns, reps)  warmed callables captured into CUDA graphs under their routes and
                              replayed in rounds over the variants, each round in a new seeded
                              order (plain calls if a capture fails)
    bench_batch(...)          the GPT's prefill (batch x ctx tokens) and one decode step (batch x 1
                              token against a full KV cache): tokens/s per variant
    bench_mlp(...)            (silu(x W1^T) * (x W3^T)) W2^T, d_model 4096, hidden 11008, bf16, at M
                              tokens: error against fp64, then ms per variant with L2 flushed

Study's timer conventions (harness.py): warm-up excluded (Triton's autotune and JIT happen
there), CUDA events, the median of `reps` repeats, rounds interleaving the variants in a new
order each (as measure.py's timed rounds; the fp32 yardstick in rounds of its own, after the others).
"""
from __future__ import annotations

import random

from .inmodel import TORCH, YARDSTICK, context_alive, failed, label, route, row, say

BATCHES = (1, 16, 128)            # GPT inference batch sizes
MLP_M, MLP_D, MLP_H = (16, 128, 2048), 4096, 11008   # Llama-7B's MLP: d_model 4096, hidden 11008
MLP_ERR_FACTOR = 2.0   # a stage's block error may be twice torch's (independent roundings, same size)


def warm(fns: dict, on_start) -> dict:
    """Each fn called once (autotune, JIT) after on_start(name); {name: error text} of those that
    raised (dropped from fns), the CUDA context being alive."""
    import torch

    bad = {}
    for name, fn in list(fns.items()):
        on_start(name)
        try:
            fn()
            torch.cuda.synchronize()
        except Exception as exc:
            if not context_alive("cuda"):
                raise
            bad[name] = f"{type(exc).__name__}: {exc}"
            del fns[name]
    return bad


def time_variants(fns: dict, reps: int, flush=None, apart=(YARDSTICK,)) -> tuple:
    """({name: median ms}, "graph" | "plain", + SHUFFLED) of warmed fns: each is captured into a
    CUDA graph under its route; if any capture fails every fn is timed plainly (one mode per size,
    host launch time then included). Repeats run in rounds over the variants (repeat_order: a new
    order each round), so clock drift hits all alike; flush() (an L2 eviction) runs before each
    repeat if given. The `apart` variants (the fp32 yardstick: a reference, not a contender) get
    rounds of their own after the others: in the same rounds, its 12 ms repeats of the MLP block
    at M = 2048 let the GPU recover power between the others' ~0.8 ms ones (H100: torch 0.79 there
    against 0.83-0.84 ms in sustained rounds, and the stages' ratios move by up to 3 points;
    docs/stages/s14_stream_k.md, session 47)."""
    import torch

    cur = torch.cuda.current_stream()
    graphs = {}
    try:
        for name, fn in fns.items():
            side = torch.cuda.Stream()
            side.wait_stream(cur)
            with torch.cuda.stream(side):
                fn()
            cur.wait_stream(side)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn()
            graphs[name] = g
    except Exception as exc:
        say(f"graph capture failed ({type(exc).__name__}: {str(exc)[:120]}): timing plainly")
        graphs = {}
        torch.cuda.synchronize()
    events = {n: [] for n in fns}
    for name in repeat_order(list(fns), reps, apart):
        if flush:
            flush()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        graphs[name].replay() if graphs else fns[name]()
        e.record()
        events[name].append((s, e))
    torch.cuda.synchronize()
    med = {n: float(torch.tensor([s.elapsed_time(e) for s, e in ev]).median()) for n, ev in events.items()}
    return med, ("graph" if graphs else "plain") + SHUFFLED


ORDER_SEED = 0
SHUFFLED = ", shuffled rounds"   # the rows' note says so: runs before it timed rounds in one order


def repeat_order(names: list, reps: int, apart=(YARDSTICK,), seed: int = ORDER_SEED) -> list:
    """The order time_variants runs its repeats in: `reps` rounds over the names not in `apart`,
    then `reps` rounds over those in it; every round in a new order (random.Random(seed)). At the
    700 W cap a variant runs faster after a light predecessor than after a heavy one, and a fixed
    order gives each variant the same predecessor in every round (the MLP block: CUDA s14 always
    after CUDA s13, torch after Triton s14); shuffled, the effect spreads over every variant's
    repeats, where the median discards it (measure.py's rounds do the same)."""
    rng = random.Random(seed)
    out = []
    for group in ([n for n in names if n not in apart], [n for n in names if n in apart]):
        for _ in range(reps):
            rnd = list(group)
            rng.shuffle(rnd)
            out += rnd
    return out


def _routed(variant, work):
    def fn():
        with route(variant):
            return work()
    return fn


def bench_batch(variants: list, batch: int, reps: int, on_start) -> list:
    """GPT inference at one batch size: prefill (batch x ctx tokens into an empty KV cache) and one
    decode step (batch x 1 token at the last position of a full cache); tokens/s per variant.
    No L2 flush: a serving loop reads the same 6 MB of weights every step."""
    import torch

    from . import gpt

    cfg = gpt.Config()
    model = gpt.build(cfg, 0, torch.bfloat16, "cuda").eval()
    cache = model.make_cache(batch)
    idx = torch.randint(0, cfg.vocab, (batch, cfg.ctx), device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    out = []
    with torch.no_grad():
        for what, n_tok, work in (
                ("prefill_tokens_per_s", batch * cfg.ctx, lambda: model(idx, cache, 0)),
                ("decode_tokens_per_s", batch, lambda: model(idx[:, -1:], cache, cfg.ctx - 1))):
            fns = {v: _routed(v, work) for v in variants}
            out += [failed(v, f"bench:{batch}", why) for v, why in warm(fns, on_start).items()]
            ms, mode = time_variants(fns, reps)
            out += [row(v, what, batch, n_tok / (t * 1e-3), "tokens/s", mode) for v, t in ms.items()]
            say(f"{what} batch {batch}: " + ", ".join(f"{label(v)} {n_tok / t * 1e-3:.3g}M" for v, t in ms.items()))
    return out


def mlp_block(x, w1, w3, w2):
    """Llama's MLP: (silu(x W1^T) * (x W3^T)) W2^T; x [M, D], w1, w3 [H, D], w2 [D, H]."""
    import torch.nn.functional as F

    return F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)


def bench_mlp(variants: list, M: int, reps: int, on_start) -> list:
    """The MLP block at M tokens (bf16): each variant's output against fp64 of the block on the same
    bf16 inputs ("mlp_rel_err"; a variant more than MLP_ERR_FACTOR times torch's own error plus the
    GEMM bound at K = hidden is marked wrong), then its time with L2 flushed ("mlp_ms")."""
    import torch

    from . import tolerance
    from .harness import L2Flush

    gen = torch.Generator("cuda").manual_seed(M)
    x = torch.randn(M, MLP_D, device="cuda", generator=gen).bfloat16()
    w1, w3 = (torch.randn(MLP_H, MLP_D, device="cuda", generator=gen).mul_(MLP_D ** -0.5).bfloat16() for _ in range(2))
    w2 = torch.randn(MLP_D, MLP_H, device="cuda", generator=gen).mul_(MLP_H ** -0.5).bfloat16()
    with torch.no_grad():
        fns = {v: _routed(v, lambda: mlp_block(x, w1, w3, w2)) for v in variants}
        out = [failed(v, f"mlp:{M}", why) for v, why in warm(fns, on_start).items()]
        ref = mlp_block(*(t.double() for t in (x, w1, w3, w2)))
        errs = {v: tolerance.rel_error(fn(), ref) for v, fn in fns.items()}
        del ref
        allowed = MLP_ERR_FACTOR * errs[TORCH] + tolerance.bound("bf16", MLP_H)
        ms, mode = time_variants(fns, reps, L2Flush())
    for v in ms:
        note = mode if errs[v] <= allowed else f"wrong: error {errs[v]:.2e} > {allowed:.2e}"
        out += [row(v, "mlp_rel_err", M, errs[v], "rel. Frobenius vs fp64"), row(v, "mlp_ms", M, ms[v], "ms", note)]
    say(f"mlp M={M}: " + ", ".join(f"{label(v)} {t:.3f} ms" for v, t in ms.items()))
    return out

