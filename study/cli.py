"""`python -m study ...`: reports, bench, stages, build.

    python -m study reports [--quick] [--families cuda triton cublas] [--stages s01 s09]
                            [--precisions fp32 tf32] [--shapes squares 1000x4096x4096] [--no-ncu]
                            [--redraw] [--out DIR]
    (--quick: 3 shapes, fp32/tf32/fp16 unless --precisions says otherwise, no Nsight Compute
    unless --ncu; written to reports/quick/ unless --out says otherwise, so that a quick look
    never replaces the full study's tables)
    python -m study bench cuda s04 [--shape 4096x4096x4096] [--precision fp32]
    python -m study stages
    python -m study build
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .registry import PRECISIONS


def _progress(total: int, desc: str):
    """tqdm if installed, else a line every ~5% (the GPU machine has tqdm)."""
    try:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="kernel-shape", dynamic_ncols=True, file=sys.stderr)
    except ImportError:
        class Plain:
            def __init__(self):
                self.n, self.t0, self.desc = 0, time.perf_counter(), desc

            def update(self, k=1):
                self.n += k
                if self.n == total or self.n % max(1, total // 20) == 0:
                    el = time.perf_counter() - self.t0
                    eta = el / self.n * (total - self.n)
                    print(f"[study] {self.desc}: {self.n}/{total}, {el:.0f} s, ETA {eta:.0f} s", file=sys.stderr, flush=True)

            def set_description(self, d):
                self.desc = d

            def close(self):
                pass
        return Plain()


def _say(msg: str):
    print(f"[study] {msg}", file=sys.stderr, flush=True)


def _merge(old, new, key: list):
    """Rows of `new`, plus the rows of `old` whose key `new` does not have (filtered runs)."""
    import pandas as pd

    if old is None or old.empty or not set(key) <= set(old.columns):
        return new
    if new is None or new.empty or not set(key) <= set(new.columns):
        return old
    m = old[key].merge(new[key].drop_duplicates(), on=key, how="left", indicator=True)
    return pd.concat([old[(m["_merge"] == "left_only").to_numpy()], new], ignore_index=True)


def measure(args) -> int:
    """The measured study on this GPU: build, ceilings, each precision group, ncu, tables, figures."""
    import pandas as pd

    from . import autotune, build, ceilings, device, environment, measure as bench, profile, report, resources
    from .registry import find
    from .roofline import annotate

    t_all = time.perf_counter()
    phases = {}
    gpu = device.gpu_name()
    settings = bench.Settings.quick() if args.quick else bench.Settings()
    shapes = bench.parse_shapes(args.shapes) if args.shapes else bench.default_shapes(args.quick)
    default_precisions = bench.QUICK_PRECISIONS if args.quick else PRECISIONS
    groups = bench.plan(args.precisions or default_precisions, args.families, args.stages)
    filtered = bool(args.families or args.stages or args.precisions or args.shapes)
    env = environment.collect()
    env["mode"] = "quick" if args.quick else "full"
    if filtered:
        env["mode"] += " (filtered: " + " ".join(
            f"--{k} {' '.join(v)}" for k, v in (("families", args.families), ("stages", args.stages),
                                                ("precisions", args.precisions), ("shapes", args.shapes)) if v) + ")"
    clock = environment.ClockSampler().start()
    logs = build.build_dir().parent / "reports_logs"
    logs.mkdir(parents=True, exist_ok=True)
    _say(f"{gpu}: {sum(len(v) for v in groups.values())} kernels in {len(groups)} precision groups x "
         f"{len(shapes)} shapes ({env['mode']}); logs in {logs}")

    # 1. CUDA builds (parallel, cached), then their static resources on the CPU in the background.
    t = time.perf_counter()
    cuda_stems = sorted({e.stage for es in groups.values() for e in es if e.family == "cuda"})
    cuda_stages = [find("cuda", s) for s in cuda_stems]
    runnable = [s for s in cuda_stages if s.unavailable_reason(device.capability()) is None]
    built = build.build(runnable) if runnable else []
    phases["build"] = time.perf_counter() - t
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1)
    res_future = pool.submit(resources.cuda_stages, cuda_stages, build.build_dir() / "cubin", 8)

    # 2. Ceilings.
    t = time.perf_counter()
    ceil = ceilings.measure(gpu, args.quick)
    phases["ceilings"] = time.perf_counter() - t
    _say("ceilings: " + ", ".join(f"{r.name} {r.value:.1f} {r.unit}" for r in ceil.itertuples() if r.source == "measured"))

    # 3. Precision groups, each in its own child process.
    total = sum(len(es) * len(shapes) for es in groups.values())
    bar = _progress(total, "measuring")
    rows, triton_res, triton_tuned, crashes = [], [], [], []

    def on_row(r, window=None):  # SM clock and board power over the shape's timed rounds
        r.update(clock.during(*window) if window else clock.latest())
        bar.update(1)
    for prec, entries in groups.items():
        bar.set_description(f"measuring {prec}")
        g = bench.run_group(prec, entries, shapes, settings, on_row=on_row, log_path=logs / f"bench_{prec}.log")
        rows += g.rows
        triton_res += g.resources
        triton_tuned += g.autotune
        crashes += g.crashes
        phases[f"measure {prec}"] = g.seconds
    bar.close()
    for c in crashes:
        _say(f"CRASH: {c}")
    results = pd.DataFrame(rows)
    if results.empty:
        _say("no measurement came back (see the bench logs); nothing written")
        return 1
    results.insert(0, "gpu", gpu)

    # 4. Nsight Compute at one shape per precision (falls back to modelled traffic).
    prof = pd.DataFrame()
    t = time.perf_counter()
    if args.no_ncu or (args.quick and not args.ncu):
        _say("ncu: skipped (" + ("--no-ncu" if args.no_ncu else "--quick without --ncu")
             + "); roofline intensities are modelled")
    else:
        pshape = bench.Shape(report.PROFILE_SIZE, report.PROFILE_SIZE, report.PROFILE_SIZE)
        at = results[(results["M"] == pshape.M) & (results["N"] == pshape.N) & (results["K"] == pshape.K)
                     & results["status"].isin(["ok", "wrong"])]
        keep = set(zip(at["family"], at["stage"], at["dtype"], at["layout"], at["kind"]))
        pgroups = {p: [e for e in es if (e.family, e.stage, e.precision, e.layout, e.kind) in keep]
                   for p, es in groups.items()}
        pgroups = {p: es for p, es in pgroups.items() if es}
        if not pgroups:
            _say(f"ncu: nothing measured at {pshape.name}; roofline intensities are modelled")
        else:
            try:
                prof = profile.profile(pgroups, {p: pshape for p in pgroups}, logs,
                                       timeout_s=150 if args.quick else 300)
                prof.insert(0, "gpu", gpu)
                _say(f"ncu: {len(prof)} kernels profiled at {pshape.name}")
            except Exception as exc:
                _say(f"ncu failed ({type(exc).__name__}: {str(exc)[:200]}); roofline intensities are modelled")
    phases["ncu"] = time.perf_counter() - t

    # 5. Tables.
    t = time.perf_counter()
    results = annotate(results, ceil, prof if len(prof) else None)
    try:
        cuda_res = res_future.result(timeout=300)
    except Exception as exc:
        _say(f"CUDA resources failed: {exc}")
        cuda_res = pd.DataFrame()
    pool.shutdown(wait=False)
    res_df = pd.concat([cuda_res, pd.DataFrame(triton_res)], ignore_index=True)
    if len(res_df):
        res_df.insert(0, "gpu", gpu)
    build_rows = [{"family": "cuda", "stage": b.stem, "seconds": round(b.seconds, 2), "cached": b.cached,
                   "ok": b.ok, "note": b.error.strip().splitlines()[-1][:200] if b.error else ""} for b in built]
    tri = results[(results["family"] == "triton") & results["warmup_s"].notna()]
    for (stage, prec), g in tri.groupby(["stage", "dtype"]):
        first = g.iloc[0]
        build_rows.append({"family": "triton", "stage": stage, "seconds": round(float(first["warmup_s"]), 2),
                           "cached": False, "ok": True,
                           "note": f"first call at {first['M']}x{first['N']}x{first['K']} {prec} (JIT compile + autotune; Triton's disk cache may hold it)"})
    builds = pd.DataFrame(build_rows)
    if len(builds):
        builds.insert(0, "gpu", gpu)
    try:
        at_table = autotune.table()
        if len(at_table):
            at_table = at_table[at_table["gpu"] == gpu].drop(columns=["gpu"])
            at_table.insert(0, "family", "cuda")
    except Exception:
        at_table = pd.DataFrame()
    at_table = pd.concat([at_table, pd.DataFrame(triton_tuned)], ignore_index=True)
    env.update(clock.stop())
    env["crashes"] = crashes
    phases["tables"] = time.perf_counter() - t
    root = _root(args)
    old = report.data_dir(gpu, root)
    if filtered and (old / "results.csv").exists():
        prev = report.load(old)
        results = _merge(prev.results, results, ["family", "stage", "kind", "dtype", "layout", "M", "N", "K"])
        res_df = _merge(prev.resources, res_df, ["family", "stage"])
        builds = _merge(prev.builds, builds, ["family", "stage"])
        prof = _merge(prev.profile, prof, ["family", "stage", "kind", "dtype", "layout", "M", "N", "K"])
        results = annotate(results, ceil, prof if len(prof) else None)  # % columns against the merged cuBLAS rows
        _say(f"filtered run: merged with the earlier tables in {old}")
    results = results.sort_values(["dtype", "M", "N", "K", "family", "stage", "layout", "kind"], kind="stable")
    data = report.Data(gpu, results, ceil, res_df, builds, prof, at_table, env)

    # 6. Files and figures.
    t = time.perf_counter()
    env["phases_s"] = phases
    env["wall_s"] = round(time.perf_counter() - t_all, 1)
    out = report.write(data, root)
    report.render(root, gpus=[gpu])
    phases["plots"] = time.perf_counter() - t
    env["phases_s"] = {k: round(v, 1) for k, v in phases.items()}
    env["wall_s"] = round(time.perf_counter() - t_all, 1)
    report.write(data, root)  # environment.json with the final phase times
    report.render(root, gpus=[gpu])
    ok = (results["status"] == "ok").sum()
    _say(f"wrote {out} and {root / 'README.md'}: {len(results)} rows, {ok} ok; "
         + ", ".join(f"{k} {v:.0f} s" for k, v in env["phases_s"].items()) + f"; total {env['wall_s']:.0f} s")
    print(report.headline_table(data))
    return 0


def _root(args) -> Path:
    """Where a run writes: --out, else reports/quick/ for --quick, else reports/."""
    from . import report

    if args.out:
        return Path(args.out)
    return report.REPORTS / "quick" if args.quick else report.REPORTS


def cmd_reports(args) -> int:
    from . import device, report

    if device.capability() is not None and not args.redraw:
        return measure(args)
    root = _root(args)
    dirs = report.recorded(root)
    if not dirs:
        _say(f"no CUDA GPU here and nothing recorded under {root / 'data'}: nothing to draw")
        return 1
    why = "--redraw" if args.redraw else "No CUDA GPU here"
    for d in dirs:
        env = report.load(d).environment
        _say(f"{why}: redrawing reports from reports/data/{d.name} "
             f"(measured on {env.get('gpu_full_name', d.name)}, {env.get('date_utc', 'date unknown')})")
    written = report.render(root)
    _say(f"wrote {len(written)} files under reports/")
    return 0


def _shape(text: str):
    from .measure import parse_shapes

    return parse_shapes([text])[0]


def cmd_bench(args) -> int:
    import pandas as pd

    import study

    from .measure import bench
    from .registry import find

    if args.family == "cublas":
        prec, layout = args.name, args.layout or "NN"
        fn = study.kernel("cublas", prec, layout=layout)
        baseline = False
    else:
        stage = find(args.family, args.name)
        prec = args.precision or stage.precisions[0]
        layout = stage.layout
        fn = study.kernel(args.family, stage.stem)
        baseline = True
    shapes = [_shape(s) for s in (args.shape or ["4096"])]
    df = bench(lambda a, b, c: fn(a, b, c), shapes, prec, layout=layout, name=f"{args.family}:{args.name}",
               baseline=baseline)
    cols = ["family", "stage", "dtype", "layout", "M", "N", "K", "ms_median", "ms_q1", "ms_q3", "reps", "graph",
            "tflops", "pct_cublas", "rel_err", "status", "reason"]
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(df[cols].to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    return 0 if (df["status"] == "ok").all() else 1


def cmd_stages(args) -> int:
    import pandas as pd

    import study

    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_colwidth", 40):
        print(study.stages().to_string(index=False))
    return 0


def cmd_build(args) -> int:
    import study

    df = study.build_all(jobs=args.jobs)
    print(df[["stem", "seconds", "cached", "ok"]].to_string(index=False))
    for row in df[~df["ok"]].itertuples():
        print(f"\n--- {row.stem} failed ---\n{row.error[-3000:]}")
    return 0 if df["ok"].all() else 1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m study", description="GEMM ladder study")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("reports", help="measure everything on this GPU and write reports/ (no GPU: redraw)")
    r.add_argument("--quick", action="store_true",
                   help="3 shapes, fp32/tf32/fp16 (every stage once), fewer repeats, no ncu, written to "
                        "reports/quick/ (< 2 min on an H100)")
    r.add_argument("--families", nargs="+", choices=["cuda", "triton", "cublas"])
    r.add_argument("--stages", nargs="+", help="stage names (s04, vectorized, s04_vectorized)")
    r.add_argument("--precisions", nargs="+", choices=list(PRECISIONS))
    r.add_argument("--shapes", nargs="+", help="squares, layers, N (square) or MxNxK")
    r.add_argument("--no-ncu", action="store_true", help="no Nsight Compute; modelled roofline traffic")
    r.add_argument("--ncu", action="store_true", help="with --quick: profile with Nsight Compute all the same")
    r.add_argument("--redraw", action="store_true", help="only redraw tables and figures from reports/data/")
    r.add_argument("--out", help="reports directory (default: <repo>/reports)")
    r.set_defaults(func=cmd_reports)
    b = sub.add_parser("bench", help="time one kernel beside cuBLAS")
    b.add_argument("family", choices=["cuda", "triton", "cublas"])
    b.add_argument("name", help="stage (s04, 4, vectorized) or, for cublas, a precision")
    b.add_argument("--shape", action="append", help="MxNxK or N (square); repeatable; default 4096")
    b.add_argument("--precision", choices=list(PRECISIONS))
    b.add_argument("--layout", choices=["NN", "NT"], help="cublas only")
    b.set_defaults(func=cmd_bench)
    s = sub.add_parser("stages", help="the pairing table from the stage headers")
    s.set_defaults(func=cmd_stages)
    bl = sub.add_parser("build", help="compile every CUDA stage (cached)")
    bl.add_argument("--jobs", type=int)
    bl.set_defaults(func=cmd_build)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    return args.func(args)
