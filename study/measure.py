"""The measured study: which kernels run at which shapes, and the loop that times them.

- The plan comes from the registry only: a stage joins a precision group when its header's Dtype
  names that precision, and is timed in its header's Layout; cuBLAS of the group is timed in
  every layout the group's stages use (and NN).
- Each precision group runs in a child process (`python -m study.measure child SPEC`) that prints
  one JSON line per event. A kernel that kills the CUDA context kills only its child: the parent
  records it as crashed and restarts the child without it at the same shape.
- Inside a child, shapes go smallest first; at each shape every kernel is warmed, checked
  against the fp64 reference and sized, then the timed repeats of all kernels are queued in
  rounds, so clock drift hits every family alike.

`bench(fn, shapes, precision)` times a user's own kernel the same way, beside cuBLAS.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .registry import PACKAGE_PARENT, PRECISIONS, ROOT, all_stages

SQUARES = (256, 512, 1000, 1024, 2048, 4095, 4096, 8192)
TOKENS = (16, 128, 2048)                                       # M of a transformer layer
WEIGHTS = ((4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096))  # (N, K) of nn.Linear
QUICK_SQUARES = (1024, 4096)                  # --quick: the headline size, a mid size and
QUICK_LAYERS = ((16, 4096, 4096),)            # one decode-like layer (CUDA-graph timed)
# --quick leaves out bf16: it runs the same stages as fp16 (s10-s13), so every stage still shows.
QUICK_PRECISIONS = ("fp32", "tf32", "fp16")
ROUND_HEAD_START_CYCLES = 4_000_000  # ~2 ms GPU spin before each round of timed repeats


@dataclass(frozen=True, order=True)
class Shape:
    M: int
    N: int
    K: int
    set: str = "square"   # "square" or "layer" (transformer layer: M tokens x (N, K) weight)

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    @property
    def name(self) -> str:
        if self.M == self.N == self.K:
            return f"{self.M}^3"
        return f"{self.M}x{self.N}x{self.K}"


def default_shapes(quick: bool = False) -> list:
    if quick:
        out = [Shape(n, n, n) for n in QUICK_SQUARES] + [Shape(*s, "layer") for s in QUICK_LAYERS]
    else:
        out = [Shape(n, n, n) for n in SQUARES]
        out += [Shape(m, n, k, "layer") for m in TOKENS for n, k in WEIGHTS]
    return sorted(set(out), key=lambda s: (s.flops, s))


def parse_shapes(specs) -> list:
    """"squares", "layers", "4096" (a square) or "MxNxK"; comma or space separated."""
    out = []
    for spec in (x for s in specs for x in s.split(",") if x):
        if spec == "squares":
            out += [Shape(n, n, n) for n in SQUARES]
        elif spec == "layers":
            out += [Shape(m, n, k, "layer") for m in TOKENS for n, k in WEIGHTS]
        elif spec.isdigit():
            out.append(Shape(int(spec), int(spec), int(spec)))
        else:
            try:
                m, n, k = (int(x) for x in spec.lower().split("x"))
            except ValueError:
                raise SystemExit(f"--shapes: {spec!r} is not squares, layers, N or MxNxK") from None
            layer = any((n, k) == w for w in WEIGHTS) and m in TOKENS
            out.append(Shape(m, n, k, "layer" if layer else "square"))
    return sorted(set(out), key=lambda s: (s.flops, s))


@dataclass(frozen=True)
class Entry:
    """One kernel of a precision group as the study times it."""

    family: str       # "cuda", "triton", "cublas" or "user"
    stage: str        # stem, "cublas", or the user's name
    precision: str
    layout: str
    kind: str = "stage"   # "stage", "baseline" or "finding"
    note: str = ""

    @property
    def label(self) -> str:
        return f"{self.family}:{self.stage}:{self.precision}:{self.layout}"


NOT_RUNNABLE = "not runnable: "
FINDING_NN = "issue 6: header layout NT, measured here with a row-major B (NN)"


def plan(precisions=PRECISIONS, families=None, stages=None) -> dict:
    """{precision: [Entry]} from the stage headers, filtered by family and stage names."""
    out = {}
    for p in precisions:
        entries = []
        for s in all_stages():
            if p not in s.precisions or (families and s.family not in families):
                continue
            if stages and not {s.stem, s.short, s.slug} & set(stages):
                continue
            entries.append(Entry(s.family, s.stem, p, s.layout))
            if s.family == "triton" and p == "tf32" and s.layout == "NT":
                entries.append(Entry(s.family, s.stem, p, "NN", "finding", FINDING_NN))
        if not families or "cublas" in families:
            layouts = sorted({"NN"} | {e.layout for e in entries})
            entries = [Entry("cublas", "cublas", p, lay, "baseline") for lay in layouts] + entries
        if entries:
            out[p] = entries
    return out


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


# --------------------------------------------------------------------------------------------
# Inside a child: time one precision group.

def make_call(entry: Entry):
    """`call(a, b, c)` for an entry; a finding row calls the stage module's matmul directly."""
    import study
    from .kernels import TritonKernel
    from .registry import find

    if entry.kind == "finding":
        module = TritonKernel(find("triton", entry.stage)).module
        return lambda a, b, c: module.matmul(a, b, c)
    if entry.family == "cublas":
        k = study.kernel("cublas", entry.precision, layout=entry.layout)
    else:
        k = study.kernel(entry.family, entry.stage)
    return lambda a, b, c: k(a, b, c)


def _row(entry: Entry, shape: Shape, **kw) -> dict:
    row = {"family": entry.family, "stage": entry.stage, "kind": entry.kind, "dtype": entry.precision,
           "layout": entry.layout, "M": shape.M, "N": shape.N, "K": shape.K, "shape_set": shape.set,
           "ms_median": math.nan, "ms_q1": math.nan, "ms_q3": math.nan, "reps": 0, "graph": False,
           "rel_err": math.nan, "tol": math.nan, "status": "", "reason": "", "warmup_s": math.nan,
           "note": entry.note}
    row.update(kw)
    return row


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) > 1 and "error" in text.lower():  # compiler output: keep the first error line
        errs = [ln for ln in lines if "error" in ln.lower()]
        lines = lines[:1] + errs[:2]
    return " | ".join(lines)[:300]


def _context_alive() -> bool:
    import torch

    try:
        torch.cuda.synchronize()
        return True
    except Exception:
        return False


def measure_shape(calls: list, shape: Shape, precision: str, flush, settings: Settings,
                  skip: dict, emit=lambda event: None) -> list:
    """Time every (entry, call) at one shape; returns rows. `skip` maps an entry to the reason it
    is not run any more; updated here for errors and slow kernels."""
    import torch

    from .harness import GRAPH_BELOW_MS, GRAPH_MAX_MS, Operands, Timer, repeats

    ops = Operands(shape.M, shape.N, shape.K, precision, seed=settings.seed)
    rows, timers, singles = {}, {}, {}
    for entry, call in calls:
        if entry in skip:
            why = skip[entry]
            rows[entry] = _row(entry, shape, status="error" if why.startswith(NOT_RUNNABLE) else "skipped", reason=why)
            continue
        emit({"event": "start", "entry": entry.label, "shape": shape.name})
        t = Timer(call, ops, entry.layout, flush)
        try:
            warm_s = t.warm()
            err, tol = t.check()
            single = t.single_ms()
            if single < 2 * GRAPH_BELOW_MS:   # it may decide the shape's timing mode: best of 3
                single = min(single, t.single_ms(), t.single_ms())
        except ValueError as exc:  # the kernel's Limits refuse this shape: not an error
            rows[entry] = _row(entry, shape, status="unsupported", reason=_short(exc))
            continue
        except Exception as exc:
            if not _context_alive():
                raise
            reason = _short(exc)
            rows[entry] = _row(entry, shape, status="error", reason=reason)
            skip[entry] = f"failed at {shape.name}: {reason}"
            continue
        ok = math.isfinite(err) and err <= tol
        rows[entry] = _row(entry, shape, rel_err=err, tol=tol, warmup_s=warm_s,
                           status="ok" if ok else "wrong",
                           reason="" if ok else f"relative error {err:.3g} > tolerance {tol:.3g}")
        if single < 1e3 * settings.slow_call_s:
            singles[entry] = (t, single)
        else:
            skip[entry] = f"skipped after {shape.name}: {single:.0f} ms per call > {settings.slow_call_s * 1e3:.0f} ms budget"
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
        if graphed and single < GRAPH_MAX_MS:
            try:
                t.use_graph()
            except Exception as exc:  # not capturable: plain launches still time it
                if not _context_alive():
                    raise
                rows[entry]["reason"] = (rows[entry]["reason"] + "; " if rows[entry]["reason"] else "") + \
                    f"no CUDA graph ({_short(exc)[:80]})"
                t.graph = None
        # a repeat replays calls_per_rep calls: size the repeats by what one repeat costs
        timers[entry] = (t, repeats(single * t.calls_per_rep, settings.budget_s, settings.min_reps,
                                    settings.max_reps))
    # Timed repeats in rounds: every kernel once per round, then one synchronise. Each round
    # starts one kernel later in the list: after the synchronise the GPU has idled, and on the
    # H100 the first kernels of a round read up to ~10% slow (cuBLAS fp32 4096^3: 47 TFLOP/s
    # first in every round vs 52 back to back). Rotating spreads that over every kernel's
    # repeats, where the median discards it, instead of biasing whichever kernel comes first;
    # a ~2 ms spin at the start of a round also lets the clocks come back up before timing.
    todo = dict(timers)
    rnd = 0
    timed_from = time.time()  # the parent reads the SM clock and board power over this window
    while todo:
        items = list(todo.items())
        start = rnd % len(items)
        rnd += 1
        torch.cuda._sleep(ROUND_HEAD_START_CYCLES)
        for entry, (t, n) in items[start:] + items[:start]:
            t.queue()
            if len(t.samples) + len(t._pending) >= n:
                del todo[entry]
        torch.cuda.synchronize()
        for t, _ in timers.values():
            t.collect()
    if timers:
        emit({"event": "timed", "shape": shape.name, "t0": timed_from, "t1": time.time()})
    for entry, (t, _) in timers.items():
        tm = t.timing()
        rows[entry].update(ms_median=tm.ms_median, ms_q1=tm.ms_q1, ms_q3=tm.ms_q3, reps=tm.reps,
                           graph=tm.graph)
        t.release()
    del ops, timers
    torch.cuda.empty_cache()
    out = [rows[e] for e, _ in calls]
    for r in out:
        emit({"event": "row", "row": r})
    return out


def predict_skips(entries, done_rows: list, next_shape: Shape, settings: Settings, skip: dict):
    """Skip a kernel at the next shape if its time scaled by FLOPs would pass max_call_s."""
    last = {}
    for r in done_rows:
        if r["status"] in ("ok", "wrong") and math.isfinite(r["ms_median"]):
            last[(r["family"], r["stage"], r["layout"], r["kind"])] = r
    for e in entries:
        r = last.get((e.family, e.stage, e.layout, e.kind))
        if r is None or e in skip:
            continue
        predicted = r["ms_median"] * next_shape.flops / (2 * r["M"] * r["N"] * r["K"])
        if predicted > 1e3 * settings.max_call_s:
            skip[e] = (f"skipped from {next_shape.name}: ~{predicted:.0f} ms per call predicted "
                       f"(> {settings.max_call_s * 1e3:.0f} ms budget)")


def _triton_resources(entries, precision: str) -> list:
    """Resources of the Triton kernels this child compiled (they live only in this process)."""
    from . import resources
    from .registry import find

    rows = []
    for stem in sorted({e.stage for e in entries if e.family == "triton"}):
        module = sys.modules.get(f"study_triton_{stem}")
        if module is not None:
            try:
                rows += resources.triton_stage(find("triton", stem), module, precision)
            except Exception as exc:  # resources are a report column, never a reason to stop
                rows.append({"family": "triton", "stage": stem, "error": _short(exc)})
    return json.loads(json.dumps(rows, default=str))


def _triton_autotune(entries, precision: str) -> list:
    """The configurations @triton.autotune chose in this child, per stage and tuning key."""
    rows = []
    for stem in sorted({e.stage for e in entries if e.family == "triton"}):
        module = sys.modules.get(f"study_triton_{stem}")
        for obj in vars(module).values() if module else ():
            for key, cfg in getattr(obj, "cache", {}).items() if hasattr(obj, "configs") else ():
                rows.append({"family": "triton", "stage": stem, "precision": precision,
                             "shape_class": "x".join(str(k) for k in key[:3]), "config": str(cfg)})
    return rows


def run_child(spec: dict) -> int:
    """Child process body: one precision group over its shapes, JSON lines on stdout."""
    import torch

    from .harness import L2Flush

    def emit(event):
        print(json.dumps(event), flush=True)

    precision = spec["precision"]
    entries = [Entry(**e) for e in spec["entries"]]
    shapes = [Shape(**s) for s in spec["shapes"]]
    settings = Settings(**spec["settings"])
    skip = {Entry(**e): why for e, why in spec.get("skip", [])}
    calls = []
    for e in entries:
        if e in skip:
            calls.append((e, None))
            continue
        try:
            calls.append((e, make_call(e)))
        except Exception as exc:  # build failure, missing arch, import error: recorded, go on
            skip[e] = f"{NOT_RUNNABLE}{_short(exc)}"
            calls.append((e, None))
    torch.backends.cuda.matmul.allow_tf32 = False
    flush = L2Flush()
    done = []
    for i, shape in enumerate(shapes):
        try:
            done += measure_shape(calls, shape, precision, flush, settings, skip, emit)
        except Exception as exc:  # outside any one kernel (inputs, reference, memory): lose the shape only
            if not _context_alive():
                raise
            import traceback

            traceback.print_exc()
            torch.cuda.empty_cache()
            rows = [_row(e, shape, status="error", reason=f"shape failed: {_short(exc)}") for e in entries]
            for r in rows:
                emit({"event": "row", "row": r})
            done += rows
        if i + 1 < len(shapes):
            predict_skips(entries, done, shapes[i + 1], settings, skip)
    emit({"event": "resources", "rows": _triton_resources(entries, precision)})
    emit({"event": "autotune", "rows": _triton_autotune(entries, precision)})
    emit({"event": "done"})
    return 0


# --------------------------------------------------------------------------------------------
# In the parent: children per precision group, restarts after crashes, progress.

@dataclass
class GroupResult:
    precision: str
    rows: list = field(default_factory=list)
    resources: list = field(default_factory=list)
    autotune: list = field(default_factory=list)
    seconds: float = 0.0
    crashes: list = field(default_factory=list)


def _lines(proc, stall_s: float):
    """The child's stdout lines; None once no line came for stall_s seconds."""
    import queue
    import threading

    q: queue.Queue = queue.Queue()

    def pump():
        for line in proc.stdout:
            q.put(line)
        q.put("")  # EOF
    threading.Thread(target=pump, daemon=True).start()
    while True:
        try:
            line = q.get(timeout=stall_s)
        except queue.Empty:
            yield None
            return
        if line == "":
            return
        yield line


def run_group(precision: str, entries: list, shapes: list, settings: Settings, on_row=None,
              log_path: Path | None = None, max_restarts: int = 4, stall_s: float = 180.0) -> GroupResult:
    """Measure one precision group in child processes; a kernel that crashes the child (or hangs:
    no event for stall_s) is dropped and the child restarted at the shape where it happened.
    on_row(row, window): each row as it arrives, with (t0, t1) in time.time() of its shape's
    timed rounds, or None for a row that was not timed."""
    res = GroupResult(precision)
    t0 = time.perf_counter()
    skip: dict = {}
    remaining = list(shapes)
    for _ in range(max_restarts + 1):
        if not remaining:
            break
        spec = {"precision": precision, "entries": [asdict(e) for e in entries],
                "shapes": [asdict(s) for s in remaining], "settings": asdict(settings),
                "skip": [[asdict(e), why] for e, why in skip.items()]}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(spec, f)
        env = dict(os.environ, PYTHONPATH=str(PACKAGE_PARENT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   PYTHONUNBUFFERED="1")
        # @triton.autotune results on disk: later children (ncu) and runs reuse the search.
        env.setdefault("TRITON_CACHE_AUTOTUNING", "1")
        err_file = open(log_path, "a") if log_path else subprocess.DEVNULL
        proc = subprocess.Popen([sys.executable, "-m", "study.measure", "child", f.name], cwd=ROOT,
                                env=env, stdout=subprocess.PIPE, stderr=err_file, text=True)
        last_start, window, finished, hung = None, None, False, False
        for line in _lines(proc, stall_s):
            if line is None:  # no event for stall_s: a hung kernel; the child is killed
                hung = True
                proc.kill()
                break
            try:
                ev = json.loads(line) if line.startswith("{") else None
            except json.JSONDecodeError:
                ev = None
            if ev is None:
                continue
            if ev["event"] == "start":
                last_start, window = ev, None
            elif ev["event"] == "timed":   # the shape's timed rounds, before its rows
                window = (ev["t0"], ev["t1"])
            elif ev["event"] == "row":
                res.rows.append(ev["row"])
                if on_row:
                    on_row(ev["row"], window)
            elif ev["event"] == "resources":
                res.resources += ev["rows"]
            elif ev["event"] == "autotune":
                res.autotune += ev["rows"]
            elif ev["event"] == "done":
                finished = True
        proc.wait()
        os.unlink(f.name)
        if log_path:
            err_file.close()
        if finished and proc.returncode == 0:
            break
        done_shapes = {(r["M"], r["N"], r["K"]) for r in res.rows}
        remaining = [s for s in remaining if (s.M, s.N, s.K) not in done_shapes]
        if last_start is None or not remaining:
            res.crashes.append(f"{precision}: child exited {proc.returncode} before any kernel ran")
            break
        bad = next((e for e in entries if e.label == last_start["entry"]), None)
        if bad is None:
            res.crashes.append(f"{precision}: child exited {proc.returncode} outside any kernel")
            break
        why = (f"hung at {last_start['shape']} (no progress for {stall_s:.0f} s; killed)" if hung else
               f"crashed the CUDA context at {last_start['shape']} (exit {proc.returncode}); see bench log")
        res.crashes.append(f"{bad.label}: {why}")
        skip[bad] = why
    res.seconds = time.perf_counter() - t0
    return res


# --------------------------------------------------------------------------------------------
# A user's own kernel, timed the same way.

def bench(fn, shapes, precision: str = "fp32", *, layout: str = "NN", name: str = "user",
          settings: Settings | None = None, baseline: bool = True):
    """Time `fn(a, b, c)` (C = A @ B into the given c) at each shape like the study does, beside
    cuBLAS at the same precision and layout. shapes: ints (squares), (M, N, K) tuples or Shapes.
    Returns the tidy rows (pandas DataFrame) with tflops and pct_cublas."""
    import pandas as pd
    import torch

    from .harness import L2Flush
    from .roofline import annotate

    settings = settings or Settings()
    norm = []
    for s in shapes:
        norm.append(s if isinstance(s, Shape) else Shape(s, s, s) if isinstance(s, int) else Shape(*s))
    user = Entry("user", name, precision, layout, "stage")
    calls = [(user, lambda a, b, c: fn(a, b, c))]
    if baseline:
        import study

        k = study.kernel("cublas", precision, layout=layout)
        calls.insert(0, (Entry("cublas", "cublas", precision, layout, "baseline"), lambda a, b, c: k(a, b, c)))
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        flush, skip, rows = L2Flush(), {}, []
        for s in norm:
            rows += measure_shape(calls, s, precision, flush, settings, skip)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    from .device import gpu_name

    df = pd.DataFrame(rows)
    df.insert(0, "gpu", gpu_name())
    return annotate(df)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "child":
        sys.exit(run_child(json.loads(Path(sys.argv[2]).read_text())))
    sys.exit("usage: python -m study.measure child SPEC.json (used by `python -m study reports`)")
