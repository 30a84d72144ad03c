"""`python -m study ...`: reports, bench, stages, build; thin wrappers over the library.

    python -m study reports [--quick] [--families cuda triton cublas] [--stages s01 s09]
                            [--precisions fp32 tf32] [--shapes squares 1000x4096x4096] [--no-ncu]
                            [--redraw] [--out DIR] [--allow-partial]
                            [--no-model] [--gpus N] [--replicate] [--fresh]
    torchrun --nnodes N --nproc-per-node gpu --rdzv-backend c10d --rdzv-endpoint HOST:PORT \
        --module study reports ...   (several hosts: README)
    python -m study model [--steps 200] [--families cuda triton] [--stages s10 s13] [--parts train mlp]
    python -m study bench cuda s04 [--shape 4096x4096x4096] [--precision fp32]
    python -m study stages
    python -m study build [--jobs N]

Arguments are checked before anything heavy is imported or run: a bad value exits 2 with one
line saying which and what is valid; a machine that cannot do what was asked (no GPU, no CUDA
toolkit) exits 1 with one line saying what is missing. `--help` imports neither torch nor Triton.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .registry import FAMILIES, LAYOUTS, PRECISIONS

REPORTS_HELP = """\
With a CUDA GPU: measure every kernel (or those the filters select) and write reports/: tables
in reports/data/<gpu>/, figures, reports/README.md. A filtered run merges its rows into the
tables already recorded. Without a GPU, or with --redraw: redraw every table and figure from
reports/data/; the filters (--families, --stages, --precisions, --shapes) only select what to
measure, so they are refused there (exit 1) rather than silently ignored.

A measured run is checked against its plan (a filtered run against its filtered plan): if a
precision group crashed or planned kernel-shapes have no row, it exits 1 and leaves the recorded
reports untouched, unless --allow-partial. Tables and pages are written to a temporary directory
and moved into place only when complete; one run at a time holds a lock on the reports
directory (a second exits 1 naming the first one's pid).

With several GPUs visible, one worker per GPU (PyTorch's torchrun, started for you) measures a
share of the work, each precision group at each shape on one GPU beside its cuBLAS baseline, and
the first worker writes the merged tables (node, device_index and device_uuid columns). Every
worker appends its rows to a journal as they come (one GPU too): a run that lost a worker or was
stopped writes nothing (unless --allow-partial) and the same command measures only what is
missing. Several hosts:
the same arguments under `torchrun --nnodes N ... --module study reports` (README)."""


def _error(cmd: str, msg: str, code: int = 2) -> int:
    print(f"python -m study {cmd}: error: {msg}", file=sys.stderr, flush=True)
    return code


def _say(msg: str):
    print(f"[study] {msg}", file=sys.stderr, flush=True)


def _root(args) -> Path:
    """Where a run writes: --out, else reports/quick/ for --quick, else reports/."""
    from .results import reports_root

    return reports_root(args.quick, args.out)


def _filters(args) -> str:
    return " ".join(f"--{k} {' '.join(v)}" for k in ("families", "stages", "precisions", "shapes")
                    if (v := getattr(args, k)))


def cmd_reports(args) -> int:
    from . import launch

    if launch.under_torchrun():
        try:
            launch.pin_gpu()   # before anything asks CUDA: this worker's GPU becomes its device 0
        except RuntimeError as exc:
            return _error("reports", str(exc), 1)
    from . import device
    from .plan import select

    filters = _filters(args)
    if args.redraw and filters:
        return _error("reports", f"--redraw redraws everything from reports/data/, and {filters} selects what to "
                                 "measure: leave one out")
    try:
        select(args.quick, args.families or (), args.stages or (), args.precisions or (), args.shapes or ())
    except ValueError as exc:
        return _error("reports", str(exc))
    for flag in ("allow_partial", "replicate", "gpus", "fresh"):
        if getattr(args, flag) and args.redraw:
            return _error("reports", f"--{flag.replace('_', '-')} is for a measured run, and --redraw measures "
                                     "nothing: leave one out")
    if args.gpus is not None and args.gpus < 1:
        return _error("reports", f"--gpus takes a number of GPUs >= 1, got {args.gpus}")
    from .atomic import Busy

    try:
        return _reports(args, filters, device.capability() is not None and not args.redraw)
    except Busy as exc:
        return _error("reports", str(exc), 1)


def _reports(args, filters: str, measure: bool) -> int:
    if measure:
        from . import launch
        from .sweep import Options

        opts = Options(args.quick, tuple(args.families or ()), tuple(args.stages or ()), tuple(args.precisions or ()),
                       tuple(args.shapes or ()), args.ncu, args.no_ncu, _root(args),
                       allow_partial=args.allow_partial, model=not args.no_model)
        if launch.under_torchrun():   # one worker of several (distrun.py)
            from .distrun import rank_main

            return rank_main(opts, replicate=args.replicate, fresh=args.fresh)
        have = launch.visible_gpus()
        if (args.gpus or 0) > have:
            return _error("reports", f"--gpus {args.gpus}: this process sees {have} CUDA GPU(s)", 1)
        if (args.gpus or have) > 1:   # one worker per GPU under torchrun, each running these arguments
            from .distrun import host

            return host(opts, args.argv, args.gpus or have, args.replicate)
        if args.replicate:
            _say("--replicate: one GPU, nothing to compare it with; measuring as usual")
        from .distrun import alone

        return alone(opts, fresh=args.fresh)
    if filters:
        return _error("reports", f"no CUDA GPU here, so nothing can be measured ({filters} selects what to "
                                 "measure); without filters this command redraws reports/ from reports/data/", 1)
    for flag in ("allow_partial", "replicate", "gpus", "fresh"):
        if getattr(args, flag):
            return _error("reports", f"no CUDA GPU here, so nothing is measured and --{flag.replace('_', '-')} has "
                                     "nothing to do; without it this command redraws reports/ from reports/data/", 1)
    from . import report
    from .atomic import locked
    from .results import load, recorded

    root = _root(args)
    dirs = recorded(root)
    if not dirs:
        return _error("reports", f"no CUDA GPU here and nothing recorded under {root / 'data'}: nothing to draw", 1)
    why = "--redraw" if args.redraw else "No CUDA GPU here"
    for d in dirs:
        env = load(d).environment
        _say(f"{why}: redrawing reports from reports/data/{d.name} "
             f"(measured on {env.get('gpu_full_name', d.name)}, {env.get('date_utc', 'date unknown')})")
    with locked(root):
        written = report.render(root)
    _say(f"wrote {len(written)} files under {root}")
    return 0


def cmd_model(args) -> int:
    from . import device
    from .inmodel import ModelOptions

    try:
        opts = ModelOptions(**{k: tuple(v) if isinstance(v, list) else v for k in ("steps", "families", "stages", "parts")
                               if (v := getattr(args, k)) is not None})
    except ValueError as exc:
        return _error("model", str(exc))
    if device.capability() is None:
        return _error("model", "no CUDA GPU here: the model group trains and times on the GPU", 1)
    from .atomic import Busy
    from .modelrun import record

    try:
        return record(opts, _root(args))
    except Busy as exc:
        return _error("model", str(exc), 1)


def cmd_bench(args) -> int:
    from .plan import parse_shapes
    from .registry import find

    try:
        try:
            shapes = parse_shapes(args.shape or ["4096"])
        except ValueError as exc:
            raise ValueError(f"--shape: {exc}") from None
        if args.family == "cublas":
            if args.name not in PRECISIONS:
                raise ValueError(f"cuBLAS is named by a precision, one of {PRECISIONS}; got {args.name!r}")
            if args.precision not in (None, args.name):
                raise ValueError(f"--precision {args.precision} contradicts cublas {args.name}")
            prec, layout, name = args.name, args.layout or ("NT" if args.name == "fp8" else "NN"), args.name
        else:
            if args.layout:
                raise ValueError("--layout is for cublas only; a stage's layout is in its header")
            stage = find(args.family, args.name)
            prec, layout, name = args.precision or stage.precisions[0], stage.layout, stage.stem
            if prec not in stage.precisions:
                raise ValueError(f"{args.family} {stage.stem} takes {', '.join(stage.precisions)}, not {prec}")
    except ValueError as exc:
        return _error("bench", str(exc))
    from . import device

    if device.capability() is None:
        return _error("bench", "no CUDA GPU here (torch.cuda.is_available() is False): nothing to time", 1)
    import pandas as pd

    from .kernels import kernel
    from .measure import bench

    try:
        fn = kernel(args.family, name, layout=layout if args.family == "cublas" else None)
    except RuntimeError as exc:  # cannot run here (architecture), or a failed build
        return _error("bench", str(exc).strip().splitlines()[0], 1)
    df = bench(lambda a, b, c, **scales: fn(a, b, c, **scales), shapes, prec, layout=layout,   # fp8: + scales
               name=f"{args.family}:{args.name}",
               baseline=args.family != "cublas")
    cols = ["family", "stage", "dtype", "layout", "M", "N", "K", "ms_median", "ms_q1", "ms_q3", "reps", "graph",
            "tflops", "pct_cublas", "rel_err", "status", "reason"]
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(df[cols].to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    return 0 if (df["status"] == "ok").all() else 1


def cmd_stages(args) -> int:
    from .registry import stages
    from .tables import stages_text

    print(stages_text(stages()), end="")
    return 0


def cmd_sources(args) -> int:
    from .journal import sources_digest

    print(sources_digest()[:16])
    return 0


def cmd_build(args) -> int:
    from . import build

    try:
        df = build.build_all(jobs=args.jobs)
    except build.ToolkitError as exc:
        return _error("build", str(exc), 1)
    print(df[["stem", "seconds", "cached", "ok"]].to_string(index=False))
    for row in df[~df["ok"]].itertuples():
        print(f"\n--- {row.stem} failed ---\n{row.error[-3000:]}")
    return 0 if df["ok"].all() else 1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m study", description="GEMM ladder study: every stage of the CUDA "
                                "and Triton ladders, and cuBLAS, measured on this GPU.")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("reports", help="measure everything on this GPU and write reports/ (no GPU: redraw)",
                       description=REPORTS_HELP)
    r.add_argument("--quick", action="store_true",
                   help="3 shapes, fp32/tf32/fp16 (every stage once), fewer repeats, no ncu, written to "
                        "reports/quick/ (< 2 min on an H100)")
    r.add_argument("--families", nargs="+", choices=[*FAMILIES, "cublas", "inductor"],
                   help="measure only these families")
    r.add_argument("--stages", nargs="+", help="measure only these stages (s04, 4, vectorized, s04_vectorized)")
    r.add_argument("--precisions", nargs="+", choices=list(PRECISIONS), help="measure only these precisions")
    r.add_argument("--shapes", nargs="+", help="measure only these shapes: squares, layers, decode (M = 1-2048 x the layer weights), N (square) or "
                   "MxNxK; a set keeps each kernel to the shapes a full run gives it there, a shape named on "
                   "its own runs for every kernel")
    r.add_argument("--no-ncu", action="store_true", help="no Nsight Compute; modelled roofline traffic")
    r.add_argument("--ncu", action="store_true", help="with --quick: profile with Nsight Compute all the same")
    r.add_argument("--redraw", action="store_true", help="only redraw tables and figures from reports/data/")
    r.add_argument("--allow-partial", action="store_true",
                   help="write a measured run even if a precision group crashed or planned kernel-shapes have no "
                        "row (default: exit 1 and leave the recorded reports untouched)")
    r.add_argument("--no-model", action="store_true",
                   help="leave out the kernels-in-a-model group (training, inference, MLP block, overhead); "
                        "it runs in a full, unfiltered run")
    r.add_argument("--gpus", type=int, metavar="N", help="measure on N of the visible GPUs, one torchrun worker "
                   "each, the work sharded by cost (default: all; 1: this process alone, as on a one-GPU machine, "
                   "its rows journaled as well)")
    r.add_argument("--replicate", action="store_true", help="every GPU measures the same kernel-shapes: the "
                   "report adds the GPU-to-GPU spread (reports/<gpu>/spread.md)")
    r.add_argument("--fresh", action="store_true", help="forget the rows an earlier, failed or interrupted run of "
                   "the same command left (by default it resumes them)")
    r.add_argument("--out", help="reports directory (default: <repo>/reports; reports/quick with --quick)")
    r.set_defaults(func=cmd_reports)
    m = sub.add_parser("model", help="the kernels in a model: a GPT trained through each 16-bit stage, inference, "
                       "MLP block, host overhead", description="Train a small byte-level GPT through each 16-bit "
                       "stage (study.use) and with torch, check one step's gradients against fp64, time its "
                       "inference, a Llama MLP block and the host overhead per call; recorded as model.csv beside "
                       "this GPU's run and shown on reports/<gpu>/model.md.")
    m.add_argument("--steps", type=int, help="training steps (default 200)")
    m.add_argument("--families", nargs="+", choices=list(FAMILIES), help="default: cuda triton")
    m.add_argument("--stages", nargs="+", help="16-bit stages (default: s10-s14)")
    m.add_argument("--parts", nargs="+", choices=["train", "bench", "mlp", "overhead"], help="default: all")
    m.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)   # _root() reads it
    m.add_argument("--out", help="reports directory (default: <repo>/reports)")
    m.set_defaults(func=cmd_model)
    b = sub.add_parser("bench", help="time one kernel beside cuBLAS", description="Time one kernel on this GPU "
                       "the way the study does, beside cuBLAS at the same precision and layout.")
    b.add_argument("family", choices=[*FAMILIES, "cublas"])
    b.add_argument("name", help="stage (s04, 4, vectorized) or, for cublas, a precision")
    b.add_argument("--shape", action="append", help="MxNxK or N (square); repeatable; default 4096")
    b.add_argument("--precision", choices=list(PRECISIONS), help="default: the stage's first precision")
    b.add_argument("--layout", choices=list(LAYOUTS), help="cublas only (default NN)")
    b.set_defaults(func=cmd_bench)
    s = sub.add_parser("stages", help="the pairing table from the stage headers",
                       description="Every stage of both families from the stage headers: precisions, layout, "
                                   "architecture, whether it runs on this machine, and its Expect (first sentence).")
    s.set_defaults(func=cmd_stages)
    sub.add_parser("sources", help="the digest of this tree's stage files and study/ (a run's sources_sha1)",
                   description="The digest a measured run records as sources_sha1 in environment.json: sha1 of "
                               "cuda_src/, triton_kernels/ and study/*.py, names and bytes.").set_defaults(func=cmd_sources)
    bl = sub.add_parser("build", help="compile every CUDA stage (cached)",
                        description="Compile every CUDA stage with nvcc through torch's load_inline, in parallel; "
                                    "cached under build/cuda. Needs a CUDA build of torch and a CUDA toolkit.")
    bl.add_argument("--jobs", type=int, metavar="N", help="parallel compiler processes (default: one per CPU core)")
    bl.set_defaults(func=cmd_build)
    return p


def main(argv=None) -> int:
    from .registry import HeaderError

    args = parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)   # passed on to torchrun's workers (distrun.host)
    try:
        return args.func(args)
    except HeaderError as exc:  # a stage file's header the registry cannot read: say which, once
        return _error(args.cmd, str(exc), 1)
