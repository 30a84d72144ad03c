"""Host overhead of calling a kernel through the public API, against torch's own calls.

    study.overhead.measure("cuda", "s13")     # pandas: us per call of each path, on the GPU

A tiny GEMM (default 64^3 bf16, NT: the nn.Linear layout), so the GPU finishes each launch
before the host issues the next: the time is the host's. Each path is called `calls` times back
to back with no synchronisation inside the loop; the host clock stops when the last call returns
(`us_host`, per call) and again after torch.cuda.synchronize() (`us_synced`: at most the GPU's
own time when that is longer, e.g. a Triton stage compiled for large tiles). `calls` stays below
the depth of the driver's launch queue (about 1000), which would otherwise block the host. Paths
run in rounds, interleaved, and each figure is the median over `rounds`.

Paths: "torch.mm" and "F.linear" (the baselines), "launch only" (the stage's launcher called with
pre-checked arguments: the raw-pointer binding, or the Triton file's matmul; what no wrapper can
save), "study.kernel" (every check, C allocated), "study.kernel, c given", "check_operands" alone,
"study.gemm" (the op's Python function: eager, it calls the implementation itself, ops.py),
"torch.ops.study.gemm" / "gemm_" (the custom ops called by name, through torch's dispatcher, as
compiled code without CUDA graphs calls them), "study.Linear" (no grad) and
"study.use F.linear" (a routed F.linear inside the mode). Three rows time torch's own machinery
that a path is built on, doing no GEMM, so that what the study adds can be told from what torch
costs: "nn.Linear" (torch's module, what study.Linear replaces), "torch.ops no-op" (an operator
with gemm_'s schema whose Python implementation returns at once: the dispatcher's price of any
operator implemented in Python) and "F.linear, pass-through mode" (F.linear inside a
TorchFunctionMode that hands every call to torch: the price of any such mode).

`us_over_torch` is the median over rounds of the path's time less that of torch's call doing the
same in the same round (REFERENCE: torch.mm; F.linear for study.use and the pass-through mode;
nn.Linear for study.Linear, its drop-in): paired within a round, the host clock's drift between
rounds cancels. `us_over_mm` is the same against torch.mm; `us_over_launch` against the
launch-only row.

Pairing does not cancel a host that runs slow for a whole measurement: every path slows, and the
differences grow with it (measured: torch.mm at 24-27 us a call for five stages of a full run,
15-18 for the other five, and check_operands, the same code for all, +4 to +10 us over it instead
of +0 to +2). `measure_steady` therefore compares torch.mm's time with the host's reference
(`torch_mm_us`: torch.mm alone, the fastest of a few loops) and measures again, up to `retries`
times, while it is more than SLOW_HOST times slower; it keeps the try whose torch.mm ran fastest.
"""
from __future__ import annotations

import contextlib
import statistics
import time

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from . import ops
from .nn import Linear
from .inmodel import SLOW_HOST
from .operands import DTYPES, check_operands
from .route import use


def _paths(k, family: str, name: str, a, w, c) -> dict:
    """name -> zero-argument call, every one computing a @ w.T on the same operands."""
    b = w.t()                                            # [K, N] view of the [N, K] weight: NT
    p = check_operands(k.precisions, getattr(k, "layouts", k.layout), a, b, c, allow_cpu=k._allow_cpu())
    if family == "cuda":
        launch = getattr(k.module, f"launch_{p.precision}")
        args = k._args(p, a, b, c, 1.0, 0.0)
        index = a.device.index

        def launch_only():
            launch(*args, ops.raw_stream(index), -1 if k.config is None else int(k.config))
    else:
        def launch_only():
            k._run(p, a, b, c, 1.0, 0.0)
    layer = Linear(w.shape[1], w.shape[0], bias=False, device=a.device, dtype=a.dtype, kernel=(family, name))
    torch_layer = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, device=a.device, dtype=a.dtype)
    with torch.no_grad():
        layer.weight.copy_(w)
        torch_layer.weight.copy_(w)
    noop = _noop_op()
    paths = {
        "torch.mm": lambda: torch.mm(a, b),
        "F.linear": lambda: F.linear(a, w),
        "nn.Linear": lambda: torch_layer(a),
        "torch.ops no-op": lambda: noop(family, name, a, b, c),
        "F.linear, pass-through mode": lambda: F.linear(a, w),   # inside _PassThrough (measure() enters it)
        "launch only": launch_only,
        "study.kernel": lambda: k(a, b),
        "study.kernel, c given": lambda: k(a, b, c),
        "check_operands": lambda: check_operands(k.precisions, getattr(k, "layouts", k.layout), a, b, None,
                                                 allow_cpu=k._allow_cpu()),
        "study.gemm": lambda: ops.gemm(family, name, a, b),
        "torch.ops.study.gemm": lambda: torch.ops.study.gemm(family, name, a, b),
        "torch.ops.study.gemm_": lambda: torch.ops.study.gemm_(family, name, a, b, c),
        "study.Linear": lambda: layer(a),
        "study.use F.linear": lambda: F.linear(a, w),   # called inside the mode (measure() enters it)
    }
    return paths


# Each path's reference: torch's call doing the same work (us_over_torch); torch.mm where unnamed.
REFERENCE = {"study.Linear": "nn.Linear", "nn.Linear": "F.linear", "study.use F.linear": "F.linear",
             "F.linear, pass-through mode": "F.linear"}


class _PassThrough(TorchFunctionMode):
    """A TorchFunctionMode that routes nothing: the floor of study.use's host cost."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


_NOOP = []   # the probe operator, defined once per process


def _noop_op():
    """torch.ops.study_overhead.noop_: gemm_'s schema, an implementation that returns at once."""
    if not _NOOP:
        lib = torch.library.Library("study_overhead", "DEF")
        lib.define(f"noop_({ops._ARGS.format(c='Tensor(a!) c')}) -> ()")
        for key in ("CPU", "CUDA"):
            lib.impl("noop_", lambda *args: None, key)
        _NOOP.append(lib)
    return torch.ops.study_overhead.noop_


def _sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def measure(family: str = "cuda", name="s13", shape=(64, 64, 64), precision: str = "bf16", *,
            calls: int = 200, rounds: int = 30, device="cuda"):
    """us per call of each path (see the module docstring) for `study.kernel(family, name)` at
    `shape` = (M, N, K) in `precision`; a pandas DataFrame, one row per path."""
    import pandas as pd

    if precision not in DTYPES or precision == "fp8":
        raise ValueError(f"precision must be one of {tuple(p for p in DTYPES if p != 'fp8')}, got {precision!r}")
    if not (isinstance(calls, int) and 0 < calls <= 1000):
        raise ValueError(f"calls must be an int in 1..1000 (the launch queue's depth), got {calls!r}")
    if not (isinstance(rounds, int) and rounds > 0):
        raise ValueError(f"rounds must be a positive int, got {rounds!r}")
    M, N, K = shape
    dev = torch.device(device)
    gen = torch.Generator(device="cpu").manual_seed(0)
    a = (torch.randn(M, K, generator=gen) / K ** 0.5).to(dev, DTYPES[precision])
    w = torch.randn(N, K, generator=gen).to(dev, DTYPES[precision])         # [N, K] weight
    c = torch.empty(M, N, device=dev, dtype=DTYPES[precision])
    k = ops.kernel_for(family, str(name))
    paths = _paths(k, family, str(name), a, w, c)
    mode = use(family, str(name))   # entered around the loop: a model enters it once, not per call
    context = {p: mode if p.startswith("study.use") else _PassThrough() if p.endswith("pass-through mode")
               else contextlib.nullcontext() for p in paths}
    with torch.no_grad():
        for p, f in paths.items():   # warm-up: compiles, autotunes, first-call allocations
            with context[p]:
                for _ in range(3):
                    f()
        _sync(dev)
        host = {p: [] for p in paths}
        synced = {p: [] for p in paths}
        for _ in range(rounds):
            for p, f in paths.items():
                _sync(dev)
                with context[p]:
                    t0 = time.perf_counter()
                    for _ in range(calls):
                        f()
                    t1 = time.perf_counter()
                _sync(dev)
                t2 = time.perf_counter()
                host[p].append((t1 - t0) / calls * 1e6)
                synced[p].append((t2 - t0) / calls * 1e6)
    rows = [{"path": p, "us_host": statistics.median(host[p]), "us_synced": statistics.median(synced[p])}
            for p in paths]
    if mode.counts["fallback"]:
        raise RuntimeError(f"study.use fell back to torch ({dict(mode.fallbacks)}): its row would time torch")
    df = pd.DataFrame(rows)

    def over(ref):   # paired within each round, so that the host's drift between rounds cancels
        return [statistics.median(x - y for x, y in zip(host[p], host[ref(p)])) for p in paths]
    df["us_over_torch"] = over(lambda p: REFERENCE.get(p, "torch.mm"))
    df["us_over_mm"] = over(lambda p: "torch.mm")
    df["us_over_launch"] = over(lambda p: "launch only")
    df.attrs["us_host_rounds"] = host   # path -> us_host of each round
    df.insert(0, "kernel", f"{family}:{k.name}")
    df.insert(1, "shape", f"{M}x{N}x{K} {precision}")
    return df


def torch_mm_us(shape=(64, 64, 64), precision: str = "bf16", *, calls: int = 200, loops: int = 5,
                device="cuda") -> float:
    """The host's reference: us per call of torch.mm (a @ b, b an NT view, `shape` = (M, N, K))
    called back to back, the fastest of `loops` loops of `calls` calls."""
    M, N, K = shape
    dev = torch.device(device)
    a = torch.randn(M, K).to(dev, DTYPES[precision])
    b = torch.randn(N, K).to(dev, DTYPES[precision]).t()   # NT, as measure()'s torch.mm row
    best = float("inf")
    with torch.no_grad():
        for _ in range(loops + 1):   # the first loop warms up
            _sync(dev)
            t0 = time.perf_counter()
            for _ in range(calls):
                torch.mm(a, b)
            best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        _sync(dev)
    return best


def measure_steady(family: str, name, reference_us: float, *, retries: int = 1, pause_s: float = 1.0, **kw):
    """measure(family, name, **kw) again, after pause_s, while torch.mm's median runs more than
    SLOW_HOST x reference_us (at most `retries` more times); the try whose torch.mm ran fastest,
    with attrs "tries" (measurements taken) and "reference_us"."""
    if not (isinstance(retries, int) and retries >= 0):
        raise ValueError(f"retries must be an int >= 0, got {retries!r}")
    best, tries = None, 0
    while True:
        df = measure(family, name, **kw)
        tries += 1
        mm = float(df.loc[df["path"] == "torch.mm", "us_host"].iloc[0])
        if best is None or mm < best[1]:
            best = (df, mm)
        if mm <= SLOW_HOST * reference_us or tries > retries:
            break
        time.sleep(pause_s)
    df = best[0]
    df.attrs.update(tries=tries, reference_us=reference_us)
    return df
