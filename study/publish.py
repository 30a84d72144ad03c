"""A measured run's check and commit: compare its rows with its plan, then swap its tables and
pages into the reports root whole, or leave the recorded ones untouched.

    schedule(groups, shapes, explicit, every_kernel)  {precision: {entry label: [shapes]}}: what the sweep runs
    missing(rows, groups, shapes, ...)  what the run lost against that plan: the planned
                                        kernel-shapes without a row, and each group that crashed
    merge(old, new, key)                a filtered run's rows over the recorded ones
    stamped(results, env)               rows with the run that measured them (run_utc)
    merged_environment(recorded, run, rows)  the recorded run's environment, this one listed in it
    commit(data, root, problems, ...)   refuse (1) on problems unless allow_partial; else write the
                                        tables, figures and pages into a staging directory under
                                        root and os.replace them in, then the project headline

A kernel that crashed its child is not a problem here: the runner restarts the child without
it and records its rows as skipped, saying why. A group whose child died outside any kernel
("before any kernel ran"), or rows the plan scheduled that never came, are.
"""
from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pandas as pd

from . import report, results
from .atomic import staging, swap_in
from .plan import group_shapes, with_k_sweep

ROW_KEY = ["family", "stage", "kind", "dtype", "layout", "scaling", "M", "N", "K"]


def say(msg: str):
    print(f"[study] {msg}", file=sys.stderr, flush=True)


def schedule(groups: dict, shapes: list, explicit: bool = False, every_kernel: bool | None = None) -> tuple:
    """(shapes of each group, {precision: {entry label: [shapes]}}) as the sweep runs them: fp8
    adds its K sweep to default shapes (explicit False: the user named no shapes); plan.group_shapes
    keeps each kernel to its shapes, unless every_kernel (a shape named on its own; default:
    explicit) runs every shape for every kernel."""
    own = {p: with_k_sweep(p, shapes, not explicit) for p in groups}
    every = explicit if every_kernel is None else every_kernel
    return own, {p: group_shapes(p, es, own[p], every) for p, es in groups.items()}


def missing(rows, groups: dict, shapes: list, crashes: list, explicit: bool = False,
            every_kernel: bool | None = None) -> list:
    """One line per problem of a run against its plan (empty: complete): each group that crashed
    outside any kernel, and the planned kernel-shapes (entries x plan.group_shapes) without a row.
    rows: the run's own rows (list of dicts or DataFrame), before any merge with older tables."""
    df = pd.DataFrame(rows)
    got = set()
    if len(df) and set(ROW_KEY) <= set(df.columns):
        df = df.assign(scaling=df["scaling"].astype(object).where(df["scaling"].notna(), ""))
        got = {tuple(r) for r in df[ROW_KEY].itertuples(index=False, name=None)}
    _, scope = schedule(groups, shapes, explicit, every_kernel)
    lost = {}
    for prec, entries in groups.items():
        for e in entries:
            for s in scope[prec][e.label]:
                if (e.family, e.stage, e.kind, e.precision, e.layout, e.scaling, s.M, s.N, s.K) not in got:
                    lost.setdefault(prec, []).append(f"{e.label} at {s.name}")
    labels = [e.label for es in groups.values() for e in es]
    out = [f"group crashed: {c}" for c in crashes if not any(c.startswith(f"{lb}: ") for lb in labels)]
    planned = sum(len(v) for sc in scope.values() for v in sc.values())
    for prec, what in lost.items():
        out.append(f"{prec}: {len(what)} of {sum(len(v) for v in scope[prec].values())} planned kernel-shapes "
                   f"have no row (e.g. {', '.join(what[:3])})")
    if lost:
        out.append(f"in all {sum(map(len, lost.values()))} of {planned} planned kernel-shapes missing")
    return out


def merge(old, new, key: list):
    """Rows of `new`, plus the rows of `old` whose key `new` does not have (filtered runs). A
    table recorded before fp8 has no `scaling` column: its rows have scaling "" (none)."""
    old, new = (d.assign(scaling=d["scaling"].fillna("") if "scaling" in d else "")
                if d is not None and not d.empty and "scaling" in key else d for d in (old, new))
    if old is None or old.empty or not set(key) <= set(old.columns):
        return new
    if new is None or new.empty or not set(key) <= set(new.columns):
        return old
    m = old[key].merge(new[key].drop_duplicates(), on=key, how="left", indicator=True)
    return pd.concat([old[(m["_merge"] == "left_only").to_numpy()], new], ignore_index=True)


def stamped(res: pd.DataFrame, env: dict) -> pd.DataFrame:
    """res with run_utc on every row: rows recorded before the column came from the run `env`
    describes (its date_utc)."""
    when = env.get("date_utc", "")
    if "run_utc" not in res:
        return res.assign(run_utc=when)
    return res.assign(run_utc=res["run_utc"].where(res["run_utc"].notna() & (res["run_utc"] != ""), when))


# What a merged filtered run's entry keeps of its environment (the GPU and its setup are the
# recorded run's: a data directory is one GPU model).
MERGED_FIELDS = ("date_utc", "mode", "git_commit", "git_dirty", "sources_sha1", "driver", "torch", "triton",
                 "cuda_torch", "sm_clock_median_mhz", "sm_clock_min_mhz", "sm_clock_max_mhz_seen")


def run_entry(env: dict, **extra) -> dict:
    """A run as the tables' environment names another one: its MERGED_FIELDS, then `extra`."""
    return {k: env[k] for k in MERGED_FIELDS if k in env} | extra


def merged_environment(recorded: dict, run: dict, rows: int) -> tuple:
    """(environment to record, this run's entry in it) for a filtered run merged into recorded
    tables: the recorded environment stays (its date, commit, clocks and phases describe its rows;
    the page says where other rows came from) and `merged_runs` gains this run: its MERGED_FIELDS
    and the number of rows it measured; commit() adds its phases there."""
    entry = run_entry(run, rows=int(rows))
    return {**recorded, "merged_runs": [*recorded.get("merged_runs", []), entry]}, entry


def refuse(problems: list, root: Path, allow_partial: bool) -> bool:
    """Say what is wrong; True if the run must not be written (problems and no allow_partial)."""
    for p in problems:
        say(p)
    if problems and not allow_partial:
        say(f"incomplete run: nothing written, {Path(root)} is as it was "
            "(`python -m study reports --allow-partial` writes a partial run all the same)")
        return True
    if problems:
        say("--allow-partial: writing the incomplete run")
    return False


def commit(data: results.Data, root: Path, problems: list, allow_partial: bool = False,
           phases: dict | None = None, t_all: float | None = None, record: dict | None = None) -> int:
    """Write `data` (the run's tables, merged as they are to be recorded) and the pages of every
    recorded GPU under root, all or nothing: 1 and root untouched if problems and not
    allow_partial; else everything goes into a staging directory under root (the other GPUs'
    tables copied in to draw from) and is os.replace'd into place once all is written, then the
    project README's headline; 0. The GPUs are laid out newest recorded run first (the date of
    each GPU's run, which a filtered run merged into it or a model group keeps), so the overview's
    findings and the headline come from the newest whole run, not from a few rows merged into an
    older one. phases/t_all: the run's phase times, with "plots" added, go
    into environment.json and the page: into `record` (a merged run's entry in it) if given."""
    root = Path(root)
    if refuse(problems, root, allow_partial):
        return 1
    t = time.perf_counter()
    with staging(root) as stage:
        results.write(data, stage)
        for d in results.recorded(root):
            if d.name != data.gpu:
                shutil.copytree(d, results.data_dir(d.name, stage))
        datas = report.pages(results.recorded(stage), stage)
        if phases is not None:
            phases["plots"] = time.perf_counter() - t
            run = data.environment if record is None else record
            run["phases_s"] = {k: round(v, 1) for k, v in phases.items()}
            if t_all is not None:
                run["wall_s"] = round(time.perf_counter() - t_all, 1)
            results.write(data, stage)
            datas = report.pages(results.recorded(stage), stage, figures=False)
        headline = report.headline_text(datas[0]) if root.resolve() == results.REPORTS.resolve() else None
        swap_in(stage, root, [f"data/{data.gpu}", *report.page_parts(datas)])
    if headline:
        report.write_headline(*headline)
    return 0
