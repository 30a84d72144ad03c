"""The model group in a child process: `python -m study.worker model SPEC.json`.

    run_child(spec, emit)  the child's body: training and gradient check per variant, then the
                           GPT inference and MLP block benchmarks (modelbench.py) and each stage's
                           host overhead per call (overhead.py); JSON events
                           ({"event": "start" | "row" | "finished" | "done"}) on stdout, progress
                           lines on stderr
    run_group(opts)        the parent: starts the child, reads its events with a stall timeout;
                           a variant the child dies in (a kernel that kills the CUDA context) or
                           hangs in gets a failed row, and a new child goes on without it from the
                           work not yet finished. The rows as a frame of inmodel.COLUMNS
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict

from .inmodel import (COLUMNS, SLOW_HOST, TORCH, ModelOptions, context_alive, failed, grad_check, label, row, say,
                      train_variant)
from .registry import ROOT


def run_child(spec: dict, emit) -> int:
    """The child's body: the parts of spec over its variants, skipping spec["skip"] variants and
    spec["finished"] work; {"event": "start" | "row" | "finished" | "done"} through emit."""
    import torch

    from . import gpt
    from .modelbench import BATCHES, MLP_M, bench_batch, bench_mlp

    opts = ModelOptions(**spec["options"])
    skip, finished = set(spec.get("skip", [])), set(spec.get("finished", []))
    variants = [v for v in opts.variants() if label(v) not in skip]
    data, digest = gpt.corpus()

    def one(key, variant, work):
        if key in finished:
            return
        emit({"event": "start", "key": key, "variant": label(variant)})
        try:
            rows = work()
        except Exception as exc:   # the stage refused or failed; the CUDA context lives on
            if not context_alive(opts.device):
                raise
            rows = [failed(variant, key.split(":")[0], f"{type(exc).__name__}: {exc}")]
        for r in rows:
            emit({"event": "row", "row": r})
        emit({"event": "finished", "key": key})

    if "train" in opts.parts:
        one("corpus", TORCH, lambda: [row(TORCH, "corpus_bytes", 0, len(data), "bytes", f"sha256 {digest}")])
        for v in variants:
            one(f"train:{label(v)}", v, lambda v=v: train_variant(v, opts, data))
            one(f"grad:{label(v)}", v, lambda v=v: grad_check(v, opts, data))
    for part, sizes, fn in (("bench", BATCHES, bench_batch), ("mlp", MLP_M, bench_mlp)):
        if part in opts.parts:
            for n in sizes:   # every variant interleaved at one size; a crash is pinned on the last warmed
                key = f"{part}:{n}"
                one(key, TORCH, lambda n=n, fn=fn, key=key: fn(
                    variants, n, opts.reps, lambda v: emit({"event": "start", "key": key, "variant": label(v)})))
    if "overhead" in opts.parts:   # the stages (torch and the yardstick are its baselines), one key:
        one("overhead", TORCH, lambda: overhead_rows(   # a crash is pinned on the stage being measured
            variants[2:], opts.device, lambda v: emit({"event": "start", "key": "overhead", "variant": label(v)})))
    if opts.device == "cuda":
        torch.cuda.synchronize()
    emit({"event": "done"})
    return 0


def overhead_rows(stages: list, device: str, on_start) -> list:
    """Host microseconds per call of each path to each stage (overhead.py) at 64^3 bf16, NT. Each
    stage is measured again while its torch.mm runs slow against the host's reference (torch.mm
    alone, lowered by every faster row); then a stage measured before the reference fell that is
    still slow against the final one gets one more try. Rows keep each stage's fastest try."""
    from . import overhead

    def mm(df):
        return float(df.loc[df["path"] == "torch.mm", "us_host"].iloc[0])

    ref, got = overhead.torch_mm_us(device=device), {}
    for again in (False, True):
        for v in stages:
            old = got.get(v)
            if again and (old is None or isinstance(old, dict) or mm(old) <= SLOW_HOST * ref):
                continue
            on_start(v)
            try:
                df = overhead.measure_steady(v[0], v[1], ref, retries=0 if again else 1, rounds=15)
            except Exception as exc:   # the stage refused or failed; the CUDA context lives on
                if not context_alive(device):
                    raise
                got[v] = failed(v, "overhead", f"{type(exc).__name__}: {exc}")
                continue
            if again:
                tries = old.attrs["tries"] + 1
                df = df if mm(df) < mm(old) else old
                df.attrs["tries"] = tries
            got[v], ref = df, min(ref, mm(df))
    out = []
    for v, df in got.items():
        if isinstance(df, dict):   # a failed row
            out.append(df)
            continue
        out += [row(v, "host_tries", 64, df.attrs["tries"], "measurements", "torch.mm over its reference"),
                row(v, "host_reference_us", 64, ref, "us per call", "torch.mm alone or a faster row's")]
        for r in df.itertuples():
            out += [row(v, "host_us", 64, r.us_host, "us per call", r.path),
                    row(v, "host_us_over_torch", 64, r.us_over_torch, "us per call", r.path)]
        say(f"overhead {label(v)} ({df.attrs['tries']} tries, torch.mm {mm(df):.1f} us, reference {ref:.1f}): "
            + ", ".join(f"{r.path} {r.us_over_torch:+.1f}" for r in df.itertuples()))
    return out


def child_main(spec_path) -> int:
    """`python -m study.worker model SPEC.json`."""
    return run_child(json.loads(open(spec_path).read()), lambda ev: print(json.dumps(ev), flush=True))


def run_group(opts: ModelOptions | None = None, stall_s: float = 900.0) -> "pd.DataFrame":  # noqa: F821
    """Run the parts (opts: ModelOptions(), a full run's, if None) in child processes (stderr: the
    child's progress, passed through); a variant the child dies in (or hangs in for stall_s) gets
    a failed row and the child restarts without it. The rows, with the GPU's name, as a frame of
    COLUMNS."""
    import pandas as pd

    from . import device
    from .runner import _lines, child_env

    opts = opts or ModelOptions()
    say("training, inference, MLP block, host overhead (modelrun.py)")
    rows, skip, finished = [], [], []
    for _ in range(len(opts.variants()) + 1):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"options": asdict(opts), "skip": skip, "finished": finished}, f)
        proc = subprocess.Popen([sys.executable, "-m", "study.worker", "model", f.name], cwd=ROOT,
                                env=child_env(PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE, text=True)
        last, done, hung = None, False, False
        for line in _lines(proc, stall_s):
            if line is None:
                hung = True
                proc.kill()
                break
            ev = json.loads(line) if line.startswith("{") else {}
            kind = ev.get("event")
            if kind == "start":
                last = ev
            elif kind == "row":
                rows.append(ev["row"])
            elif kind == "finished":
                finished.append(ev["key"])
            elif kind == "done":
                done = True
        proc.wait()
        os.unlink(f.name)
        if done and proc.returncode == 0:
            break
        why = f"hung (no progress for {stall_s:.0f} s; killed)" if hung else f"the child exited {proc.returncode}"
        bad = last["variant"] if last else None
        if bad is None or bad == label(TORCH):
            rows.append(failed(TORCH, last["key"] if last else "start", f"{why}; the group stopped"))
            break
        say(f"{bad} at {last['key']}: {why}; going on without it")
        rows.append(failed(tuple(bad.split(":", 1)), last["key"], why))
        skip.append(bad)
    df = pd.DataFrame(rows, columns=COLUMNS[1:])
    df.insert(0, "gpu", device.gpu_name())
    return df


def model_run_entry(opts: ModelOptions) -> dict:
    """environment.json's "model_run": the run a standalone `python -m study model` recorded its
    rows in (its commit, date and driver; the tables' own run is the environment around it), as
    a merged filtered run's entry (publish.run_entry); a full run's model rows are its own."""
    from .environment import collect
    from .publish import run_entry

    run = collect()
    parts = f"--parts {' '.join(opts.parts)} --families {' '.join(opts.families)} --stages {' '.join(opts.stages)}"
    return run_entry(run, mode=f"python -m study model {parts}")


def record(opts: ModelOptions, root) -> int:
    """`python -m study model`: run the group on this GPU and record its rows as model.csv beside
    this GPU's recorded run (publish.commit: staged, then swapped in with the pages); 1 without a
    recorded run of this GPU (the page sits beside its tables)."""
    from . import device, results
    from .atomic import locked
    from .publish import commit

    old = results.data_dir(device.gpu_name(), root)
    if not (old / "results.csv").exists():
        say(f"nothing recorded for {device.gpu_name()} under {old}: run `python -m study reports` first")
        return 1
    df = run_group(opts)
    with locked(root):
        data = results.load(old)
        data.model = df
        data.environment = {**data.environment, "model_run": model_run_entry(opts)}
        commit(data, root, [])
    say(f"wrote {old / 'model.csv'}: {len(df)} rows, {int((df['what'] == 'failed').sum())} failed")
    return 0
