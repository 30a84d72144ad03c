"""Running the sweep's precision groups in child processes: crash isolation and stall detection.

Each precision group runs in a child process (`python -m study.worker measure SPEC.json`) that
prints one JSON line per event:

    {"event": "start", "entry": label, "shape": name}   a kernel is about to run at a shape
                                                         (warm-up and check; "phase": "capture" before
                                                         its graph capture), synchronised: a fault
                                                         until the next event is this kernel's
    {"event": "rounds", "shape": name}                   the timed rounds begin: every kernel of the
                                                         shape interleaved, asynchronous; after a
                                                         fault there the shape is re-run with each
                                                         kernel's repeats alone, each announced by a
                                                         "start" ("phase": "timed alone"), so a
                                                         second fault is pinned; a shape that faults
                                                         in its rounds twice is lost, none blamed
    {"event": "timed", "shape": name, "t0": t, "t1": t}  the shape's timed rounds (time.time())
    {"event": "split", "s": {step: seconds}}             where the shape's time went (measure.py)
    {"event": "row", "row": {...}}                       one tidy row (measure.py)
    {"event": "resources" | "autotune", "rows": [...]}   what the child compiled (capture.py)
    {"event": "done"}

A kernel that kills the CUDA context kills only its child, and one that hangs (no event for
stall_s) is killed: the parent records it as crashed or hung and restarts the child without it,
at the shape where it happened. Shapes go smallest first.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .measure import (NOT_RUNNABLE, Settings, context_alive, make_call, measure_shape, predict_skips, result_row,
                      short_error)
from .plan import Entry, Shape, group_shapes
from .registry import PACKAGE_PARENT, ROOT, STATE_ROOT


def child_main(spec_path) -> int:
    """`python -m study.worker measure SPEC.json`: run_child on the spec the parent wrote."""
    return run_child(json.loads(Path(spec_path).read_text()))


def run_child(spec: dict) -> int:
    """Child process body: one precision group over its shapes, JSON lines on stdout."""
    t_start = time.perf_counter()
    import torch

    from .capture import triton_autotune, triton_resources
    from .claims import Claimer
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
            skip[e] = f"{NOT_RUNNABLE}{short_error(exc)}"
            calls.append((e, None))
    torch.backends.cuda.matmul.allow_tf32 = False
    flush = L2Flush()
    emit({"event": "split", "s": {"child start-up (imports, CUDA context, kernels loaded)": time.perf_counter() - t_start}})
    done = []
    in_scope = group_shapes(precision, entries, shapes, spec.get("explicit_shapes", False))
    claims = Claimer(spec.get("claims"))   # several GPUs: a shape is the first claimant's
    for i, shape in enumerate(shapes):
        here = [(e, c) for e, c in calls if shape in in_scope[e.label]]
        if not here or not claims.take(precision, shape.name):
            continue
        try:
            done += measure_shape(here, shape, precision, flush, settings, skip, emit,
                                  alone=shape.name in spec.get("isolate", ()))
        except Exception as exc:  # outside any one kernel (inputs, reference, memory): lose the shape only
            if not context_alive():
                raise
            import traceback

            traceback.print_exc()
            torch.cuda.empty_cache()
            rows = [result_row(e, shape, status="error", reason=f"shape failed: {short_error(exc)}") for e in entries]
            for r in rows:
                emit({"event": "row", "row": r})
            done += rows
        if i + 1 < len(shapes):
            predict_skips(entries, done, shapes[i + 1], settings, skip)
    emit({"event": "resources", "rows": triton_resources(entries, precision)})
    emit({"event": "autotune", "rows": triton_autotune(entries, precision)})
    emit({"event": "done"})
    return 0


def triton_cache_dir() -> Path:
    """Triton's on-disk cache for the study's children, one per GPU model: its autotune entries
    are keyed by arch, not model, so an H100's choices would be an H200's."""
    from . import device

    return Path(os.environ.get("STUDY_CACHE_DIR", STATE_ROOT / "build")) / "triton" / device.gpu_name()


def child_env(**extra) -> dict:
    """os.environ for a study child (bench or ncu): the package importable, @triton.autotune
    results on disk (later children and runs reuse the search) in triton_cache_dir() unless
    the user set TRITON_CACHE_DIR."""
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_PARENT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra)
    env.setdefault("TRITON_CACHE_AUTOTUNING", "1")
    env.setdefault("TRITON_CACHE_DIR", str(triton_cache_dir()))
    return env


@dataclass
class GroupResult:
    precision: str
    rows: list = field(default_factory=list)
    resources: list = field(default_factory=list)
    autotune: list = field(default_factory=list)
    seconds: float = 0.0
    crashes: list = field(default_factory=list)
    split: dict = field(default_factory=dict)   # seconds by step, summed over shapes and restarts
    recovered: list = field(default_factory=list)   # faults in interleaved rounds, re-run alone

    def where(self) -> str:
        """Where the group's time went, largest first; the rest is the children's start-up
        (imports, CUDA context, module loads) and the parent's bookkeeping."""
        rest = self.seconds - sum(self.split.values())
        parts = sorted(self.split.items(), key=lambda kv: -kv[1]) + [("start-up and other", rest)]
        return (f"{self.precision} {self.seconds:.0f} s: " + ", ".join(f"{k} {v:.0f} s" for k, v in parts)
                + "".join(f"; {r}" for r in self.recovered))


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
    try:
        while True:
            try:
                line = q.get(timeout=stall_s)
            except queue.Empty:
                yield None
                return
            if line == "":
                return
            yield line
    except BaseException:   # the run stopped (^C, a time limit): its child must not hold the GPU on
        proc.kill()
        raise


def run_group(precision: str, entries: list, shapes: list, settings: Settings, on_row=None,
              log_path: Path | None = None, max_restarts: int = 4, stall_s: float = 180.0,
              explicit_shapes: bool = False, claims: dict | None = None) -> GroupResult:
    """Measure one precision group in child processes; a kernel that crashes the child (or hangs:
    no event for stall_s) is dropped and the child restarted at the shape where it happened.
    on_row(row, window): each row as it arrives, with (t0, t1) in time.time() of its shape's
    timed rounds, or None for a row that was not timed. explicit_shapes: the user named a
    shape of its own, so every kernel runs at every one (else plan.group_shapes decides). claims: several
    GPUs share `shapes`, each measuring those it claims first (claims.py)."""
    res = GroupResult(precision)
    t0 = time.perf_counter()
    skip: dict = {}
    isolate: set = set()   # shapes whose interleaved rounds faulted: re-run, each kernel timed alone
    remaining = list(shapes)
    for _ in range(max_restarts + 1):
        if not remaining:
            break
        spec = {"precision": precision, "entries": [asdict(e) for e in entries],
                "shapes": [asdict(s) for s in remaining], "settings": asdict(settings),
                "skip": [[asdict(e), why] for e, why in skip.items()], "explicit_shapes": explicit_shapes,
                "isolate": sorted(isolate), "claims": claims}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(spec, f)
        env = child_env(PYTHONUNBUFFERED="1")
        err_file = open(log_path, "a") if log_path else subprocess.DEVNULL
        proc = subprocess.Popen([sys.executable, "-m", "study.worker", "measure", f.name], cwd=ROOT,
                                env=env, stdout=subprocess.PIPE, stderr=err_file, text=True)
        last_start, window, finished, hung, rounds_at = None, None, False, False, None
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
                last_start, window, rounds_at = ev, None, None
            elif ev["event"] == "rounds":   # the shape's kernels now run interleaved, asynchronously
                rounds_at = ev["shape"]
            elif ev["event"] == "timed":   # the shape's timed rounds, before its rows
                window, rounds_at = (ev["t0"], ev["t1"]), None
            elif ev["event"] == "row":
                res.rows.append(ev["row"])
                if on_row:
                    on_row(ev["row"], window)
            elif ev["event"] == "split":
                for k, v in ev["s"].items():
                    res.split[k] = res.split.get(k, 0.0) + v
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
        what = (f"hung (no progress for {stall_s:.0f} s; killed)" if hung else
                f"crashed the CUDA context (exit {proc.returncode})")
        if rounds_at is not None and rounds_at not in isolate:   # any kernel may have faulted: re-run
            isolate.add(rounds_at)                               # the shape with each one's repeats alone
            res.recovered.append(f"{precision}: {what} in the interleaved timed rounds at {rounds_at}; "
                                 "re-run with each kernel timed alone")
            continue
        if rounds_at is not None:   # it faulted interleaved twice: blame none, drop the shape
            res.crashes.append(f"{precision}: {what} in the timed rounds at {rounds_at}, where its kernels run "
                               f"interleaved: no kernel is blamed and that shape is not measured; see bench log")
            remaining = [s for s in remaining if s.name != rounds_at]
            continue
        bad = next((e for e in entries if e.label == last_start["entry"]), None)
        if bad is None:
            res.crashes.append(f"{precision}: child exited {proc.returncode} outside any kernel")
            break
        at = last_start["shape"] + (f" ({last_start['phase']})" if last_start.get("phase") else "")
        why = (f"hung at {at} (no progress for {stall_s:.0f} s; killed)" if hung else
               f"crashed the CUDA context at {at} (exit {proc.returncode}); see bench log")
        res.crashes.append(f"{bad.label}: {why}")
        skip[bad] = why
    res.seconds = time.perf_counter() - t0
    return res
