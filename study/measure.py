"""Timing every kernel of a precision group at one shape: the measurement inside a child.

At each shape every kernel is warmed, checked against the fp64 reference (harness.py) and
sized, then the timed repeats of all kernels are queued in rounds, so clock drift hits every
family alike. Each kernel-shape gives one tidy row; a row without a timing never says "ok":
its status says why (skipped, unsupported, error, wrong). `bench(fn, shapes, precision)` times
a user's own kernel the same way, beside cuBLAS.
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

from .plan import FAST_ACCUM, Entry, Shape
from .registry import SCALED

ROUND_HEAD_START_CYCLES = 4_000_000  # ~2 ms GPU spin before each round of timed repeats
NOT_RUNNABLE = "not runnable: "


@dataclass
class Settings:
    """Time budgets. A kernel-shape gets `budget_s` of timed repeats (between min and max
    repeats); a kernel whose call exceeds `slow_call_s`, or whose next shape is predicted to
    exceed `max_call_s`, is skipped at bigger shapes."""

    budget_s: float = 0.25
    min_reps: int = 5
    max_reps: int = 30
    slow_call_s: float = 0.1
    max_call_s: float = 0.5
    seed: int = 0

    @classmethod
    def quick(cls):
        return cls(budget_s=0.15, min_reps=3, max_reps=15, slow_call_s=0.05, max_call_s=0.2)


def make_call(entry: Entry):
    """`call(a, b, c, **scales)` for an entry; a finding row calls the stage module's matmul
    directly. A fast-accumulation fp8 entry's call carries `fast_accum = True` (its bound)."""
    from . import decomposition
    from .kernels import BASELINES, TritonKernel, kernel
    from .registry import find

    if entry.kind == "finding":
        module = TritonKernel(find("triton", entry.stage)).module

        def finding(a, b, c, alpha=1.0, beta=0.0):
            return module.matmul(a, b, c, alpha=alpha, beta=beta)
        finding.alpha_beta = True
        return finding
    fast = entry.kind == FAST_ACCUM
    if entry.family in BASELINES:   # cuBLAS, Inductor: named by precision
        k = kernel(entry.family, entry.precision, layout=entry.layout, fast_accum=fast)
    else:
        k = kernel(entry.family, entry.stage, fast_accum=fast)

    def call(a, b, c, alpha=1.0, beta=0.0, **scales):
        return k(a, b, c, alpha=alpha, beta=beta, **scales)
    call.fast_accum = fast
    call.describe = lambda a, b: decomposition.of(k, a, b)   # the stage's division of the work, if it says
    # the second check (harness.Timer.check): the study's kernels and cuBLAS; not fp8 (scaled_mm's
    # alpha/beta is a torch epilogue), nor Inductor (alpha/beta would compile and autotune a second
    # template per shape)
    call.alpha_beta = entry.precision not in SCALED and entry.family != "inductor"
    return call


def result_row(entry: Entry, shape: Shape, **kw) -> dict:
    row = {"family": entry.family, "stage": entry.stage, "kind": entry.kind, "dtype": entry.precision,
           "layout": entry.layout, "scaling": entry.scaling, "M": shape.M, "N": shape.N, "K": shape.K, "shape_set": shape.set,
           "ms_median": math.nan, "ms_q1": math.nan, "ms_q3": math.nan, "reps": 0, "graph": False,
           "rel_err": math.nan, "tol": math.nan, "status": "", "reason": "", "warmup_s": math.nan,
           "decomposition": "", "note": entry.note}
    row.update(kw)
    return row


def short_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) > 1 and "error" in text.lower():  # compiler output: keep the first error line
        errs = [ln for ln in lines if "error" in ln.lower()]
        lines = lines[:1] + errs[:2]
    return " | ".join(lines)[:300]


def context_alive() -> bool:
    import torch

    try:
        torch.cuda.synchronize()
        return True
    except Exception:
        return False


def measure_shape(calls: list, shape: Shape, precision: str, flush, settings: Settings,
                  skip: dict, emit=lambda event: None, alone: bool = False) -> list:
    """Time every (entry, call) at one shape; returns rows. `skip` maps an entry to the reason it
    is not run any more; updated here for errors and slow kernels. alone: each kernel's repeats
    run by themselves, announced (the re-run of a shape whose interleaved rounds faulted)."""
    import torch

    from .harness import GRAPH_BELOW_MS, GRAPH_MAX_MS, Operands, Timer, repeats

    operands = {}   # scaling ("" or fp8's "tensor" / "row") -> Operands, made on first use
    rows, timers, singles = {}, {}, {}
    spent: dict = {}   # seconds by step, sent as a "split" event: where the group's time goes

    def lap(step, t0):
        spent[step] = spent.get(step, 0.0) + time.perf_counter() - t0
        return time.perf_counter()
    for entry, call in calls:
        t0 = time.perf_counter()
        if entry.scaling not in operands:
            operands[entry.scaling] = Operands(shape.M, shape.N, shape.K, precision, seed=settings.seed,
                                               **({"scaling": entry.scaling} if entry.scaling else {}))
        ops = operands[entry.scaling]
        t0 = lap("inputs", t0)
        if entry in skip:
            why = skip[entry]
            status = "error" if why.startswith(NOT_RUNNABLE) else "skipped"
            rows[entry] = result_row(entry, shape, status=status, reason=why)
            continue
        emit({"event": "start", "entry": entry.label, "shape": shape.name})
        t = Timer(call, ops, entry.layout, flush)
        try:
            warm_s = t.warm()
            t0 = lap(f"warm-up {entry.family}", t0)
            err, tol, problems = t.check()
            t0 = lap("check (fp64 reference, alpha/beta)", t0)
            single = t.single_ms()
            if single < 2 * GRAPH_BELOW_MS:   # it may decide the shape's timing mode: best of 3
                single = min(single, t.single_ms(), t.single_ms())
            lap("sizing call", t0)
        except ValueError as exc:  # the kernel's Limits refuse this shape: not an error
            rows[entry] = result_row(entry, shape, status="unsupported", reason=short_error(exc))
            continue
        except Exception as exc:
            if not context_alive():
                raise
            reason = short_error(exc)
            rows[entry] = result_row(entry, shape, status="error", reason=reason)
            skip[entry] = f"failed at {shape.name}: {reason}"
            continue
        if not (math.isfinite(err) and err <= tol):
            problems.insert(0, f"relative error {err:.3g} > tolerance {tol:.3g}")
        ok = not problems
        rows[entry] = result_row(entry, shape, rel_err=err, tol=tol, warmup_s=warm_s,
                                 status="ok" if ok else "wrong", reason="; ".join(problems)[:300])
        if hasattr(call, "describe"):
            try:
                rows[entry]["decomposition"] = call.describe(ops.a_of(entry.layout), ops.b(entry.layout))
            except Exception as exc:   # informational: never fails the row
                rows[entry]["decomposition"] = f"unknown ({short_error(exc)[:80]})"
        if single < 1e3 * settings.slow_call_s:
            singles[entry] = (t, single)
        else:  # checked, but too slow to time here: its row has no timing, so it is not "ok"
            over = f"{single:.0f} ms per call > {settings.slow_call_s * 1e3:.0f} ms budget"
            if ok:
                rows[entry].update(status="skipped", reason=f"not timed: {over} (checked: rel. error {err:.2g})")
            skip[entry] = f"skipped after {shape.name}: {over}"
    # One timing mode per shape: where the fastest call (in practice cuBLAS's) is short enough
    # for the launch gap and the flush's write-back to show (~2-5 us, and up to 50 MB of dirty
    # L2 lines evicted by the call's first loads: ~15 us at 3.35 TB/s; >= 1% of a call under
    # ~1-2 ms), every kernel of the shape is replayed from a CUDA graph, so no kernel is
    # compared with cuBLAS across the two modes. (Deciding per kernel, at 0.2 ms, put Triton
    # s12 at 4096^3 fp16, 0.202 ms, in plain launches beside cuBLAS, 0.187 ms, in graph
    # replays: 92.7% of cuBLAS in that run, 94.8% with both graph-timed in the next.) The
    # 1 ms line keeps the headline shapes away from the border: fp16/bf16 4096^3 ~0.19 ms
    # and tf32 ~0.35 ms are graph-timed, fp32 4096^3 (~2.7 ms) and 8192^3 (>= 1.5 ms) plain.
    # Calls longer than GRAPH_MAX_MS stay plain: the launch gap is < 0.1% of them.
    graphed = bool(singles) and min(s for _, s in singles.values()) < GRAPH_BELOW_MS
    for entry, (t, single) in singles.items():
        t0 = time.perf_counter()
        if graphed and single < GRAPH_MAX_MS:
            # capture (and the replay check) synchronise: a fault here is this kernel's
            emit({"event": "start", "entry": entry.label, "shape": shape.name, "phase": "capture"})
            try:
                t.use_graph()
                bad = t.check_replay()   # a replay computes what a plain call does
                if bad and rows[entry]["status"] == "ok":
                    rows[entry].update(status="wrong", reason="; ".join(bad)[:300])
            except Exception as exc:  # not capturable: plain launches still time it
                if not context_alive():
                    raise
                rows[entry]["reason"] = (rows[entry]["reason"] + "; " if rows[entry]["reason"] else "") + \
                    f"no CUDA graph ({short_error(exc)[:80]})"
                t.graph = None
            lap("graph capture and replay check", t0)
        # a repeat replays calls_per_rep calls: size the repeats by what one repeat costs
        timers[entry] = (t, repeats(single * t.calls_per_rep, settings.budget_s, settings.min_reps,
                                    settings.max_reps))
    # Timed repeats in rounds: every kernel once per round, then one synchronise. Each round
    # runs the kernels in a new (seeded) order: after the synchronise the GPU has idled, and on
    # the H100 the first kernels of a round read up to ~10% slow (cuBLAS fp32 4096^3: 47 TFLOP/s
    # first in every round vs 52 back to back); at the 700 W cap a kernel also runs faster after
    # a light one than after a heavy one. A fixed order, even rotated, gives each kernel the same
    # predecessor in every round; shuffling spreads both effects over every kernel's repeats,
    # where the median discards them. A ~2 ms spin at the start of a round lets the clocks come
    # back up before timing.
    todo = {} if alone else dict(timers)
    order = random.Random(settings.seed)
    if timers and not alone:   # from here every kernel of the shape runs interleaved, asynchronously:
        emit({"event": "rounds", "shape": shape.name})   # a fault cannot be pinned on the last one started
    timed_from = time.time()  # the parent reads the SM clock and board power over this window
    for entry, (t, n) in (timers.items() if alone else ()):   # a fault here is this kernel's
        emit({"event": "start", "entry": entry.label, "shape": shape.name, "phase": "timed alone"})
        torch.cuda._sleep(ROUND_HEAD_START_CYCLES)
        for _ in range(n):
            t.queue()
        torch.cuda.synchronize()
        t.collect()
        rows[entry]["note"] = (rows[entry]["note"] + "; " if rows[entry]["note"] else "") + \
            "timed alone: the shape's interleaved rounds faulted once"
    while todo:
        items = list(todo.items())
        order.shuffle(items)
        torch.cuda._sleep(ROUND_HEAD_START_CYCLES)
        for entry, (t, n) in items:
            t.queue()
            if len(t.samples) + len(t._pending) >= n:
                del todo[entry]
        torch.cuda.synchronize()
        for t, _ in timers.values():
            t.collect()
    if timers:
        emit({"event": "timed", "shape": shape.name, "t0": timed_from, "t1": time.time()})
        spent["timed repeats"] = time.time() - timed_from
    t0 = time.perf_counter()
    for entry, (t, _) in timers.items():
        tm = t.timing()
        rows[entry].update(ms_median=tm.ms_median, ms_q1=tm.ms_q1, ms_q3=tm.ms_q3, reps=tm.reps,
                           graph=tm.graph)
        t.release()
    for r in rows.values():
        if r["status"] == "ok" and not (r["reps"] > 0 and math.isfinite(r["ms_median"])):
            r.update(status="skipped", reason=r["reason"] or "not timed")   # never "ok" without a time
    ops = None
    del operands, timers, singles
    torch.cuda.empty_cache()
    lap("bookkeeping (medians, freeing memory)", t0)
    out = [rows[e] for e, _ in calls if e in rows]
    emit({"event": "split", "s": spent})
    for r in out:
        emit({"event": "row", "row": r})
    return out


def predict_skips(entries, done_rows: list, next_shape: Shape, settings: Settings, skip: dict):
    """Skip a kernel at the next shape if its time scaled by FLOPs would pass max_call_s."""
    last = {}
    for r in done_rows:
        if r["status"] in ("ok", "wrong") and math.isfinite(r["ms_median"]):
            last[(r["family"], r["stage"], r["layout"], r["kind"], r.get("scaling", ""))] = r
    for e in entries:
        r = last.get((e.family, e.stage, e.layout, e.kind, e.scaling))
        if r is None or e in skip:
            continue
        predicted = r["ms_median"] * next_shape.flops / (2 * r["M"] * r["N"] * r["K"])
        if predicted > 1e3 * settings.max_call_s:
            skip[e] = (f"skipped from {next_shape.name}: ~{predicted:.0f} ms per call predicted "
                       f"(> {settings.max_call_s * 1e3:.0f} ms budget)")


def bench(fn, shapes, precision: str = "fp32", *, layout: str = "NN", name: str = "user",
          settings: Settings | None = None, baseline: bool = True, scaling: str = ""):
    """Time `fn(a, b, c)` (C = A @ B into the given c) at each shape like the study does, beside
    cuBLAS at the same precision and layout. shapes: ints (squares), (M, N, K) tuples or Shapes.
    fp8: layout NT, `fn(a, b, c, scale_a=, scale_b=)` with e4m3 a, b and bf16 c, scales per
    `scaling` ("tensor", the default, or "row"). Returns the tidy rows (pandas DataFrame) with
    tflops and pct_cublas."""
    import pandas as pd
    import torch

    from .device import capability, gpu_name
    from .harness import L2Flush
    from .kernels import kernel
    from .operands import check_precisions
    from .roofline import annotate

    (precision,) = check_precisions(precision)
    if layout not in ("NN", "NT"):
        raise ValueError(f"layout must be NN or NT, got {layout!r}")
    from .plan import FP8_SCALINGS

    if precision in SCALED:
        scaling = scaling or FP8_SCALINGS[0]
        if layout != "NT" or scaling not in FP8_SCALINGS:
            raise ValueError(f"layout/scaling: fp8 is timed in layout NT with scaling in {FP8_SCALINGS}, "
                             f"got {layout!r} / {scaling!r}")
    elif scaling:
        raise ValueError(f"scaling: only fp8 operands carry scales, got {scaling!r} for {precision}")
    norm = [s if isinstance(s, Shape) else Shape(s, s, s) if isinstance(s, int) else Shape(*s) for s in shapes]
    bad = [s for s in norm if min(s.M, s.N, s.K) < 1]
    if bad:
        raise ValueError(f"shapes must have M, N, K >= 1, got {bad[0].name}")
    if capability() is None:
        raise RuntimeError("study.bench times kernels on a CUDA GPU, and there is none here "
                           "(torch.cuda.is_available() is False)")
    settings = settings or Settings()
    user = Entry("user", name, precision, layout, "stage", scaling=scaling)
    calls = [(user, lambda a, b, c, **scales: fn(a, b, c, **scales))]
    if baseline:
        k = kernel("cublas", precision, layout=layout)
        calls.insert(0, (Entry("cublas", "cublas", precision, layout, "baseline", scaling=scaling),
                         lambda a, b, c, **scales: k(a, b, c, **scales)))
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        flush, skip, rows = L2Flush(), {}, []
        for s in norm:
            rows += measure_shape(calls, s, precision, flush, settings, skip)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    df = pd.DataFrame(rows)
    df.insert(0, "gpu", gpu_name())
    return annotate(df)
