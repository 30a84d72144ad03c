"""The measured study on this GPU, end to end: plan -> CUDA builds -> ceilings -> each precision
group in child processes (runner.py) -> Nsight Compute at one shape -> tidy tables (results.py) ->
figures and pages (report.py). `prepare` and `finish` serve distrun.py, which measures and journals
(one GPU: distrun.alone, as the CLI). A filtered run merges its rows into the tables
already recorded; one run at a time holds the reports root's lock; a run that lost rows or a
group writes nothing unless allow_partial."""
from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from . import autotune, build, ceilings, device, environment, prewarm, profile, resources, results, sourcedigest, tables
from .measure import Settings
from .plan import FAST_ACCUM, PROFILE_SIZE, Shape, names_single_shapes, select
from .publish import commit, merge, merged_environment, missing, refuse, run_entry, schedule, stamped
from .registry import find
from .roofline import annotate

RESULT_KEY = ["family", "stage", "kind", "dtype", "layout", "scaling", "M", "N", "K"]


@dataclass
class Options:
    """What to measure. Empty filters mean everything; root None means reports/ (reports/quick/
    for quick, so that a quick look never replaces the full study's tables)."""

    quick: bool = False
    families: tuple = ()
    stages: tuple = ()
    precisions: tuple = ()
    shapes: tuple = ()          # "squares", "layers", "4096", "MxNxK"
    ncu: bool = False           # with quick: profile with Nsight Compute all the same
    no_ncu: bool = False
    root: Path | None = None
    allow_partial: bool = False  # write a run that lost rows or a group all the same
    model: bool = True          # the kernels in a model (modelrun.py), in a full run only

    def filters(self) -> str:
        """The filters as flags ("--stages s08 --shapes 4096"), "" for none."""
        return " ".join(f"--{k} {' '.join(map(str, v))}" for k, v in (
            ("families", self.families), ("stages", self.stages), ("precisions", self.precisions),
            ("shapes", self.shapes)) if v)

    def every_kernel(self) -> bool:
        """Every kernel runs every shape: --shapes named one of its own, not only sets (plan.py)."""
        return names_single_shapes(self.shapes)

    def scope(self, groups: dict, shapes: list) -> dict:
        """{precision: {entry label: [shapes]}}: what this run measures (publish.schedule)."""
        return schedule(groups, shapes, bool(self.shapes), self.every_kernel())[1]

    def runs_ncu(self) -> bool:   # Nsight Compute: not with --no-ncu, nor --quick without --ncu
        return not self.no_ncu and (self.ncu or not self.quick)

    def runs_model(self) -> bool:   # the model group: a full run only
        return self.model and not (self.quick or self.filters())

    def out(self) -> Path:
        return Path(self.root) if self.root else results.reports_root(self.quick)


def check(opts: Options) -> tuple:
    """(groups, shapes) that opts selects; ValueError naming a filter that matches nothing."""
    return select(opts.quick, opts.families, opts.stages, opts.precisions, opts.shapes)


def say(msg: str):
    """One line on stderr, written whole (torchrun's workers share it), naming the worker's rank."""
    rank = f" r{os.environ['RANK']}" if "RANK" in os.environ and "TORCHELASTIC_RUN_ID" in os.environ else ""
    sys.stderr.write(f"[study{rank}] {msg}\n")
    sys.stderr.flush()


def _build(groups: dict):
    """Build the runnable CUDA stages (parallel, cached); their static resources start on the
    CPU in the background. Returns (build results, future of the resources frame)."""
    stages = [find("cuda", s) for s in sorted({e.stage for es in groups.values() for e in es if e.family == "cuda"})]
    runnable = [s for s in stages if s.unavailable_reason(device.capability()) is None]
    try:
        built = build.build(runnable) if runnable else []
    except build.ToolkitError as exc:  # the children record every CUDA row as not runnable
        say(f"{exc}; CUDA stages are not measured")
        built = []
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(resources.cuda_stages, stages, build.build_dir() / "cubin", 8)
    pool.shutdown(wait=False)
    return built, future


def ncu_profile(opts, groups, res: pd.DataFrame, gpu: str, logs: Path) -> pd.DataFrame:
    """Nsight Compute at PROFILE_SIZE^3 over the kernels measured there (res: rows); an empty
    frame (the roofline falls back to modelled traffic) if skipped or failed."""
    if not opts.runs_ncu():
        say("ncu: skipped (" + ("--no-ncu" if opts.no_ncu else "--quick without --ncu")
            + "); roofline intensities are modelled")
        return pd.DataFrame()
    shape = Shape(PROFILE_SIZE, PROFILE_SIZE, PROFILE_SIZE)
    at = res[(res["M"] == shape.M) & (res["N"] == shape.N) & (res["K"] == shape.K)
             & res["status"].isin(["ok", "wrong"])] if len(res) else pd.DataFrame(columns=RESULT_KEY)
    keep = set(zip(at["family"], at["stage"], at["dtype"], at["layout"], at["kind"]))
    # fp8: one profile per kernel (per-tensor scales, promoted): the profile's key has neither
    # scaling nor kind, and the other variants move the same bytes (their rows share it)
    pgroups = {p: [e for e in es if (e.family, e.stage, e.precision, e.layout, e.kind) in keep
                   and e.scaling in ("", "tensor") and e.kind != FAST_ACCUM]
               for p, es in groups.items()}
    pgroups = {p: es for p, es in pgroups.items() if es}
    if not pgroups:
        say(f"ncu: nothing measured at {shape.name}; roofline intensities are modelled")
        return pd.DataFrame()
    try:
        prof = profile.profile(pgroups, {p: shape for p in pgroups}, logs, timeout_s=150 if opts.quick else 300)
    except Exception as exc:
        say(f"ncu failed ({type(exc).__name__}: {str(exc)[:200]}); roofline intensities are modelled")
        return pd.DataFrame()
    prof.insert(0, "gpu", gpu)
    say(f"ncu: {len(prof)} kernels profiled at {shape.name}")
    return prof


def _build_rows(built: list, res: pd.DataFrame) -> list:
    """CUDA build times, and each Triton stage's first call (JIT compile + autotune); `source`: the
    digest of the code each stage ran (sourcedigest.py)."""
    rows = [{"family": "cuda", "stage": b.stem, "seconds": round(b.seconds, 2), "cached": b.cached, "ok": b.ok,
             "note": b.error.strip().splitlines()[-1][:200] if b.error else "",
             "source": _digest("cuda", b.stem)} for b in built]
    tri = res[(res["family"] == "triton") & res["warmup_s"].notna()]
    for (stage, prec), g in tri.groupby(["stage", "dtype"]):
        first = g.iloc[0]
        rows.append({"family": "triton", "stage": stage, "seconds": round(float(first["warmup_s"]), 2),
                     "cached": False, "ok": True,
                     "note": f"first call at {first['M']}x{first['N']}x{first['K']} {prec} (JIT compile + autotune; "
                             "Triton's disk cache may hold it)", "source": _digest("triton", stage)})
    return rows


def _digest(family: str, stem: str) -> str:
    try:
        return sourcedigest.stage_digest(find(family, stem))
    except (ValueError, OSError):   # a stage file gone since it was measured
        return ""


def _autotune_rows(gpu: str, triton_tuned: list) -> pd.DataFrame:
    """The CUDA autotuner's cached choices on this GPU, then Triton's from the children."""
    try:
        at = autotune.table()
        if len(at):
            at = at[at["gpu"] == gpu].drop(columns=["gpu"])
            at.insert(0, "family", "cuda")
    except Exception:
        at = pd.DataFrame()
    return pd.concat([at, pd.DataFrame(triton_tuned)], ignore_index=True)


def _model(env: dict, old: Path, rows=None) -> tuple:
    """(the model group's rows, env): `rows` if this run ran the group (distrun.py, journaled),
    else (quick, filtered, --no-model) the rows recorded before, if any, with env naming their
    run where it is not the one env describes: the recorded "model_run", else the recorded
    tables' own run (a filtered run's env is the recorded one: no entry)."""
    env = {k: v for k, v in env.items() if k != "model_run"}
    if rows is not None:
        return pd.DataFrame(rows), env
    if not (old / "results.csv").exists():
        return pd.DataFrame(), env
    recorded = results.load(old)
    prev = recorded.environment
    run = prev.get("model_run") or run_entry(prev, mode="the run that wrote the earlier tables")
    same = run.get("git_commit") == env.get("git_commit") and run.get("date_utc") == env.get("date_utc")
    return recorded.model, env if same or not len(recorded.model) else {**env, "model_run": run}


def _with_gpu(df: pd.DataFrame, gpu: str) -> pd.DataFrame:
    if len(df) and "gpu" not in df:
        df.insert(0, "gpu", gpu)
    return df


@dataclass
class Ready:
    """What a run has before it measures: CUDA builds, their resources (future or frame), ceilings."""

    gpu: str
    settings: Settings
    env: dict
    clock: object
    logs: Path
    built: list
    cuda_res: object
    ceil: pd.DataFrame
    phases: dict
    t_all: float


def prepare(opts: Options, groups: dict, shapes: list, gpu: str | None = None, build_stages: bool = True,
            measure_ceilings=True, warm: list | None = None) -> Ready:
    """Everything before measuring: environment, clock sampler, CUDA builds (build_stages) with
    the Triton kernel-shapes `warm` compiled alongside (prewarm.py; None: the plan's, if
    build_stages) and ceilings (measure_ceilings: True, or a function like ceilings.measure)."""
    t_all, phases, gpu = time.perf_counter(), {}, gpu or device.gpu_name()
    settings = Settings.quick() if opts.quick else Settings()
    env = environment.collect()
    env.update(environment.settings_fields(settings))   # the budgets and the operands' seed
    filters = opts.filters()   # a filtered run is not "full": its settings, then what it measured
    env["mode"] = (("quick, " if opts.quick else "") + f"filtered: {filters}") if filters else \
        ("quick" if opts.quick else "full")
    clock = environment.ClockSampler().start()
    logs = build.build_dir().parent / "reports_logs"
    logs.mkdir(parents=True, exist_ok=True)
    say(f"{gpu}: {sum(len(v) for v in groups.values())} kernels in {len(groups)} precision groups x "
        f"{len(shapes)} shapes ({env['mode']}); logs in {logs}")
    if warm is None:
        warm = prewarm.triples_of(groups, opts.scope(groups, shapes)) if build_stages else []
    built, cuda_res = prewarm.alongside(warm, lambda: _build(groups) if build_stages else ([], None), phases, say)
    ceil = pd.DataFrame()
    if measure_ceilings:
        t = time.perf_counter()
        ceil = (ceilings.measure if measure_ceilings is True else measure_ceilings)(gpu, opts.quick)
        phases["ceilings"] = time.perf_counter() - t
        say("ceilings: " + ", ".join(f"{r.name} {r.value:.1f} {r.unit}" for r in ceil.itertuples()
                                     if r.source == "measured"))
    return Ready(gpu, settings, env, clock, logs, built, cuda_res, ceil, phases, t_all)


def finish(opts: Options, groups: dict, shapes: list, r: Ready, got: dict, problems=(), replicas=None) -> int:
    """The measured rows (got: rows, resources, autotune, crashes; profile if journaled) checked against the plan
    (and `problems` the caller found), profiled, annotated, merged and committed. replicas: a
    --replicate run's rows of every GPU (distrun.py), annotated, for replicas.csv."""
    gpu, env, ceil, phases, logs, cuda_res = r.gpu, r.env, r.ceil, r.phases, r.logs, r.cuda_res
    res = pd.DataFrame(got["rows"])
    if res.empty:
        say("no measurement came back (see the bench logs); nothing written")
        return 1
    problems = missing(got["rows"], groups, shapes, got["crashes"], bool(opts.shapes), opts.every_kernel()) + list(problems)
    if refuse(problems, opts.out(), opts.allow_partial):
        return 1
    res.insert(0, "gpu", gpu)
    res["run_utc"] = env.get("date_utc", "")   # which run measured the row (filtered runs merge)
    t = time.perf_counter()
    prof = pd.DataFrame(got["profile"]) if "profile" in got else ncu_profile(opts, groups, res, gpu, logs)
    phases["ncu"] = (got.get("profile_s") or 0.0) if "profile" in got else time.perf_counter() - t   # journaled
    t = time.perf_counter()
    res = annotate(res, ceil, prof if len(prof) else None)
    try:
        cuda_res = cuda_res if isinstance(cuda_res, pd.DataFrame) else \
            cuda_res.result(timeout=300) if cuda_res is not None else pd.DataFrame()
    except Exception as exc:
        say(f"CUDA resources failed: {exc}")
        cuda_res = pd.DataFrame()
    res_df = _with_gpu(pd.concat([cuda_res, pd.DataFrame(got["resources"])], ignore_index=True), gpu)
    builds = _with_gpu(pd.DataFrame(_build_rows(r.built, res)), gpu)
    if r.clock is not None:
        env.update(r.clock.stop())
    env["crashes"], env["measure_split_s"], env["attempts"] = got["crashes"], got.get("split", {}), got.get("attempts", [])
    phases["tables"] = time.perf_counter() - t
    root = opts.out()
    old, record = results.data_dir(gpu, root), None
    if opts.filters() and (old / "results.csv").exists():
        prev = results.load(old)
        env, record = merged_environment(prev.environment, env, len(res))
        ceil = prev.ceilings if len(prev.ceilings) else ceil   # the recorded run's: every row's roof % alike
        res = merge(stamped(prev.results, prev.environment).assign(new=False), res.assign(new=True), RESULT_KEY)
        res_df = merge(prev.resources, res_df, ["family", "stage"])
        builds = sourcedigest.blank_mixed(prev.builds, builds, merge(prev.builds, builds, ["family", "stage"]), res)
        prof = merge(prev.profile, prof, RESULT_KEY)
        # this run's rows against the merged cuBLAS rows (those it timed beside them, else the recorded ones);
        # the recorded rows keep their % of the cuBLAS of their own run
        res = pd.concat([res[~res["new"]], annotate(res, ceil, prof if len(prof) else None)[res["new"]]],
                        ignore_index=True).drop(columns="new")
        say(f"filtered run: merged with the earlier tables in {old}")
    res = res.sort_values(["dtype", "M", "N", "K", "family", "stage", "layout", "kind"], kind="stable")
    tuned = _autotune_rows(gpu, got["autotune"])
    if opts.filters() and (old / "results.csv").exists():   # a filtered run keeps the other choices
        tuned = merge(prev.autotune, tuned, results.AUTOTUNE_KEY)
    model, env = _model(env, old, got.get("model"))
    data = results.Data(gpu, res, ceil, res_df, builds, prof, tuned, env, model=model)
    if replicas is not None:
        data.replicas = replicas
    commit(data, root, [], phases=phases, t_all=r.t_all, record=record)   # its problems were said (and refused) above
    ok, run = (res["status"] == "ok").sum(), record or env
    say(f"wrote {old} and {root / 'README.md'}: {len(res)} rows, {ok} ok; "
        + ", ".join(f"{k} {v:.0f} s" for k, v in run["phases_s"].items()) + f"; total {run['wall_s']:.0f} s")
    print(tables.headline_table(data))
    return 0

