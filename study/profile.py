"""DRAM traffic and FLOPs per kernel from Nsight Compute, at one shape per precision.

The parent runs `ncu --profile-from-start off ... python -m study.worker profile SPEC ORDER` once. The
child warms every kernel (JIT, autotune, module load: not profiled), then between
cudaProfilerStart/Stop launches, for each kernel, a tiny marker kernel followed by one call:
everything after marker i and before marker i+1 belongs to kernel i (cuBLAS kernels are named
nvjet_*, and a call may launch more than one kernel). One launch per kernel is profiled.
Metrics not offered by this ncu/GPU are left out (asked with --query-metrics first).
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import triton
import triton.language as tl

from .registry import ROOT

BASE_METRICS = [
    "dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "sm__cycles_elapsed.avg.per_second",
]
# Tensor-core operation counters (FLOPs), one per source type; whichever this ncu knows.
TENSOR_METRICS = [
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum", "sm__ops_path_tensor_src_fp16_dst_fp32.sum",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp16.sum",
    "sm__ops_path_tensor_src_bf16.sum", "sm__ops_path_tensor_src_tf32.sum",
]
MARKER = "study_ncu_marker_kernel"


@triton.jit
def study_ncu_marker_kernel(x_ptr):
    """Launched before each profiled call: the boundary between kernels in ncu's launch list."""
    tl.store(x_ptr, 1.0)


def ncu_path() -> str | None:
    return shutil.which("ncu")


def available_metrics(ncu: str) -> set:
    proc = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120)
    return {line.split()[0] for line in proc.stdout.splitlines() if line.strip() and "__" in line.split()[0]}


def choose_metrics(ncu: str) -> list:
    """The wanted metrics this ncu lists; if its listing cannot be read, the base set as is."""
    try:
        have = available_metrics(ncu)
    except (OSError, subprocess.TimeoutExpired):
        have = set()
    chosen = [m for m in BASE_METRICS + TENSOR_METRICS if m.rsplit(".", 1)[0] in have]
    return chosen if any(m.startswith("dram__bytes") for m in chosen) else list(BASE_METRICS)


def _num(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return float("nan")


def parse_raw_csv(text: str) -> list:
    """ncu --csv --page raw --print-units base: header, units row, one row per kernel launch."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 2:
        return []
    head = rows[0]
    return [dict(zip(head, r)) for r in rows[2:] if len(r) == len(head)]


def attribute(launches: list, order: list, metrics: list) -> list:
    """Sum each metric over the launches between consecutive markers; one dict per kernel."""
    out, current = [], None
    for launch in launches:
        name = launch.get("Kernel Name", "")
        if MARKER in name:
            if len(out) < len(order):
                current = {"kernels": [], **{m: 0.0 for m in metrics}}
                out.append(current)
            continue
        if current is None:
            continue
        current["kernels"].append(name)
        for m in metrics:
            if m in launch:
                current[m] += _num(launch[m])
    rows = []
    for label, got in zip(order, out):
        rows.append({**label, "kernel_names": ";".join(sorted(set(got["kernels"])))[:300],
                     "launches": len(got["kernels"]), **{m: got[m] for m in metrics}})
    return rows


def profile(groups: dict, shapes: dict, out_dir: Path, timeout_s: int = 300) -> pd.DataFrame:
    """Profile {precision: [Entry]} at {precision: Shape}; a DataFrame with dram_bytes and FLOPs
    per kernel, or raises RuntimeError (the caller falls back to modelled traffic)."""
    ncu = ncu_path()
    if ncu is None:
        raise RuntimeError("ncu not found on PATH")
    metrics = choose_metrics(ncu)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="study_ncu_"))
    spec = {p: {"entries": [asdict(e) for e in es], "shape": asdict(shapes[p])} for p, es in groups.items()}
    (tmp / "spec.json").write_text(json.dumps(spec))
    rep = tmp / "profile"
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--metrics", ",".join(metrics),
           "--target-processes", "all", "-f", "-o", str(rep),
           sys.executable, "-m", "study.worker", "profile", str(tmp / "spec.json"), str(tmp / "order.json")]
    from .runner import child_env

    env = child_env()   # the bench children's Triton cache: reuse their autotune results
    # Own process group: on timeout ncu and the profiled python go together.
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        (out_dir / "ncu.log").write_text(" ".join(cmd) + "\n\n" + out[-20000:] + err[-20000:])
        raise RuntimeError(f"ncu took over {timeout_s} s and was stopped; see {out_dir / 'ncu.log'}")
    (out_dir / "ncu.log").write_text(" ".join(cmd) + "\n\n" + out[-20000:] + err[-20000:])
    report = rep.with_suffix(".ncu-rep")
    if not report.exists() or not (tmp / "order.json").exists():
        raise RuntimeError(f"ncu produced no report (exit {proc.returncode}); see {out_dir / 'ncu.log'}")
    imp = subprocess.run([ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"],
                         capture_output=True, text=True, timeout=timeout_s)
    launches = parse_raw_csv(imp.stdout)
    order = json.loads((tmp / "order.json").read_text())
    rows = attribute(launches, order, metrics)
    if not rows:
        raise RuntimeError(f"ncu report had no attributable launches ({len(launches)} launches)")
    shutil.rmtree(tmp, ignore_errors=True)
    return finish(pd.DataFrame(rows))


def finish(df: pd.DataFrame) -> pd.DataFrame:
    """Derived columns: dram_bytes, FLOPs counted by ncu, and their ratio to 2MNK."""
    get = lambda m: df[m] if m in df else 0.0  # noqa: E731
    df["dram_bytes"] = get("dram__bytes_read.sum") + get("dram__bytes_write.sum")
    simt = 2 * get("sm__sass_thread_inst_executed_op_ffma_pred_on.sum") + \
        get("sm__sass_thread_inst_executed_op_fadd_pred_on.sum") + get("sm__sass_thread_inst_executed_op_fmul_pred_on.sum")
    tensor = sum(get(m) for m in TENSOR_METRICS)
    df["flops_simt"] = simt
    df["flops_tensor"] = tensor
    model = 2.0 * df["M"] * df["N"] * df["K"]
    df["flops_ncu_over_2mnk"] = (simt + tensor) / model
    df["intensity"] = model / df["dram_bytes"].where(df["dram_bytes"] > 0)
    df["source"] = "ncu"
    return df


def child_main(spec_path, order_path) -> int:
    """`python -m study.worker profile SPEC.json ORDER.json` (under ncu)."""
    return run_child(json.loads(Path(spec_path).read_text()), order_path)


def run_child(spec: dict, order_path: str) -> int:
    """Under ncu: warm everything, then marker + one call per kernel inside the profiled range."""
    import torch

    from .harness import Operands
    from .measure import make_call
    from .plan import Entry, Shape

    marker_buf = torch.zeros(1, device="cuda")
    work, order = [], []
    for prec, g in spec.items():
        shape = Shape(**g["shape"])
        ops = Operands(shape.M, shape.N, shape.K, prec)
        for e in (Entry(**x) for x in g["entries"]):
            try:
                call = make_call(e)
                c = ops.output()
                call(ops.a, ops.b(e.layout), c, **ops.call_kwargs)   # fp8: the scales
                call(ops.a, ops.b(e.layout), c, **ops.call_kwargs)
                torch.cuda.synchronize()
            except Exception as exc:  # not profiled; the bench rows say why
                print(f"[profile] {e.label}: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
                continue
            work.append((call, ops, e.layout, c))
            order.append({"family": e.family, "stage": e.stage, "kind": e.kind, "dtype": e.precision,
                          "layout": e.layout, "M": shape.M, "N": shape.N, "K": shape.K})
    study_ncu_marker_kernel[(1,)](marker_buf)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for call, ops, layout, c in work:
        study_ncu_marker_kernel[(1,)](marker_buf)
        call(ops.a, ops.b(layout), c, **ops.call_kwargs)
    study_ncu_marker_kernel[(1,)](marker_buf)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    Path(order_path).write_text(json.dumps(order))
    return 0
