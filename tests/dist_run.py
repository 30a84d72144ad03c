"""A torchrun worker of tests/test_distributed.py: distrun.rank_main with CPU stand-ins for the GPU.

    TRITON_INTERPRET=1 python -m torch.distributed.run --nproc-per-node 2 tests/dist_run.py CONFIG.json

Everything of the multi-GPU run is the real code (process group, shards, journals, gather,
merge, commit of the tables and pages) except what needs a GPU (distrun.Rig): the GPU's name
and uuid come from CONFIG, the ceilings are one fixed row, and the work function times each
kernel of a unit once on the CPU: the Triton stage under the interpreter, cuBLAS as torch.matmul.
CONFIG: {"root", "shapes", "replicate", "gpus": [model per rank], "die": {"rank", "after_rows"}, "model"
(the model group and ncu run), "tail_s" (what each takes), "slow": {"rank", "s": seconds per shape}}.
Each row carries the worker's pid, so the test can tell which attempt measured it.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402
import torch  # noqa: E402

from study import claims, distrun, measure, plan, runner  # noqa: E402
from study.sweep import Options  # noqa: E402

RANK = int(os.environ["RANK"])
CFG = json.loads(Path(sys.argv[1]).read_text())
DIE = CFG.get("die") or {}
SLOW = CFG.get("slow") or {}
emitted = [0]


def kernel_call(entry, a, b):
    if entry.family == "cublas":
        return a @ b
    from study.kernels import TritonKernel
    from study.registry import find

    return TritonKernel(find("triton", entry.stage))(a, b)


def cpu_work(precision, entries, shapes, settings, on_row=None, log_path=None, explicit_shapes=False, **kw):
    """runner.run_group's contract on the CPU: every kernel of each shape, rows as they come."""
    g = runner.GroupResult(precision)
    t0 = time.perf_counter()
    taker = claims.Claimer(kw.get("claims"))   # as the real child: a shape another rank claimed is skipped
    for s in shapes:
        scope = plan.group_shapes(precision, entries, [s], explicit_shapes)
        if not any(s in scope[e.label] for e in entries) or not taker.take(precision, s.name):
            continue
        if SLOW.get("rank") == RANK:   # a slow GPU: the other claims what it has not reached
            time.sleep(SLOW["s"])
        torch.manual_seed(s.M)
        a, b = torch.randn(s.M, s.K), torch.randn(s.K, s.N)
        ref = a.double() @ b.double()
        for e in entries:
            if s not in scope[e.label]:
                continue
            t = time.perf_counter()
            c = kernel_call(e, a, b)
            ms = (time.perf_counter() - t) * 1e3
            err = float((c.double() - ref).norm() / ref.norm())
            row = measure.result_row(e, s, ms_median=ms, ms_q1=ms, ms_q3=ms, reps=1, rel_err=err, tol=1e-4,
                                     status="ok" if err < 1e-4 else "wrong", warmup_s=0.0)
            row["pid"] = os.getpid()
            g.rows.append(row)
            on_row(row, None)
            emitted[0] += 1
            if DIE.get("rank") == RANK and emitted[0] == DIE.get("after_rows"):
                os.kill(os.getpid(), signal.SIGKILL)   # a lost worker: no clean-up of any kind
        g.autotune.append({"family": "triton", "stage": "s03_register_tiling", "precision": precision,
                           "shape_class": f"{s.M}x{s.N}x{s.K}", "ms": 0.1,   # rank 1 tunes M = 16 otherwise
                           "config": f"BLOCK_M: {32 if RANK == 1 and s.M == 16 else 16}"})
    g.seconds = time.perf_counter() - t0
    return g


def ceilings(gpu, quick):
    return pd.DataFrame([dict(gpu=gpu, name="fp32_fma_chain", source="measured", precision="fp32", value=1.0,
                              unit="TFLOP/s", detail="test")])


def options() -> Options:
    return Options(families=("triton", "cublas"), stages=("s03",), precisions=("fp32",), shapes=tuple(CFG["shapes"]),
                   no_ncu=True, root=Path(CFG["root"]), model=False, allow_partial=CFG.get("allow_partial", False))


def _tail(what: str) -> tuple:
    """A tail step's stand-in takes CFG["tail_s"] seconds: (its note: rank, start and end time)."""
    t0 = time.time()
    time.sleep(CFG.get("tail_s", 0.0))
    return f"{what} rank {RANK} {t0:.3f} {time.time():.3f}"


def model_group(parts):
    """The model group's stand-in: one row per call that says which rank ran it, and when; `what` tells
    the GPU-timed parts (mlp_ms) from the host-timed ones (host_us)."""
    what = "host_us" if "overhead" in parts else "mlp_ms"
    return pd.DataFrame([dict(gpu=CFG["gpus"][RANK], what=what, family="torch", stage="cublas", size=16,
                              value=0.1, unit="ms", note=_tail("model"))])


def ncu(opts, groups, rows, gpu, logs):
    """Nsight Compute's stand-in: one profile row that says which rank ran it, and when."""
    return pd.DataFrame([dict(gpu=gpu, family="cublas", stage="cublas", kind="gemm", dtype="fp32", layout="NN",
                              scaling="", M=4096, N=4096, K=4096, dram_bytes=1.0, note=_tail("ncu"))])


if __name__ == "__main__":
    if CFG.get("model"):   # the model group and ncu as in a full run, over the small plan above
        Options.runs_model = Options.runs_ncu = lambda self: True
    rig = distrun.Rig(gpu_name=lambda: CFG["gpus"][RANK], uuid=lambda: f"GPU-fake-{RANK}", ceilings=ceilings,
                      work=cpu_work, ceilings_s=0.0, model=model_group, profile=ncu)
    sys.exit(distrun.rank_main(options(), replicate=CFG.get("replicate", False), rig=rig))
