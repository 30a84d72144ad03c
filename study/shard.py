"""The sweep's work split over GPUs: units, their cost, and shards that would finish together.

Several GPUs of one model measure their units as they claim them (claims.py); these shards say
what each GPU compiles ahead (prewarm.py), so each Triton kernel-shape is compiled once.

A unit is one precision group at one shape: every kernel the plan times there (cuBLAS and the
stages, plan.group_shapes), so each row is timed beside its cuBLAS baseline on the same GPU and
the families stay interleaved shape by shape (measure.py). Units are never split.

Cost, in seconds: the previous run's times where reports/data/<gpu>/results.csv has the row
(its timed repeats, the check and sizing calls, its warm-up, a fixed overhead per row, and an
equal share of the rest of its group's recorded wall time), else a model from
FLOPs: a nominal rate per precision, repeats as measure.Settings sizes them. Shards come from
longest-processing-time-first: units in falling cost (ties broken by precision and shape, so
every rank computes the same shards), each to the least loaded rank (ties: the lowest rank);
its longest shard is within 4/3 of the best possible plus one unit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .plan import Shape

# Nominal FLOP/s of a kernel of each precision when no earlier run says better: a stage
# typically below cuBLAS (H100 cuBLAS: fp32 52, tf32 364, fp16 681 TFLOP/s; GPU_NOTES.md).
RATE = {"fp32": 20e12, "tf32": 100e12, "fp16": 300e12, "bf16": 300e12, "fp8": 500e12}
ROW_S = 0.05          # per row outside the timed repeats: operands, fp64 reference share, warm-up
EXTRA_CALLS = 3       # warm-up, the check and the sizing call, beside the timed repeats


@dataclass(frozen=True, order=True)
class Unit:
    """One precision group at one shape: the smallest piece of work a GPU is given."""

    precision: str
    shape: Shape

    @property
    def key(self) -> tuple:
        return (self.precision, self.shape.M, self.shape.N, self.shape.K)

    @property
    def name(self) -> str:
        return f"{self.precision} {self.shape.name}"


def units(scope: dict) -> dict:
    """{Unit: [entry labels timed there]} from publish.schedule's scope ({precision: {label:
    [shapes]}}), in the plan's order: precisions as planned, shapes smallest first."""
    out: dict = {}
    for prec, by_label in scope.items():
        shapes = sorted({s for ss in by_label.values() for s in ss}, key=lambda s: (s.flops, s))
        for s in shapes:
            out[Unit(prec, s)] = [lb for lb, ss in by_label.items() if s in ss]
    return out


def model_seconds(unit: Unit, n_rows: int, settings) -> float:
    """Seconds of `n_rows` kernels at the unit's shape by the FLOPs model: one call at the
    precision's nominal rate, repeated as Settings sizes the repeats (within its budget)."""
    call = unit.shape.flops / RATE.get(unit.precision, RATE["fp32"])
    reps = min(settings.max_reps, max(settings.min_reps, settings.budget_s / max(call, 1e-9)))
    return n_rows * (ROW_S + min(call, settings.max_call_s) * (reps + EXTRA_CALLS))


def row_seconds(ms_median, reps, warmup_s=0.0) -> float:
    """Seconds one recorded row took: its timed repeats, the calls beside them and its warm-up
    (Inductor's autotuning is ~10 s a shape: two GPUs of one run finished 197 s and 366 s apart
    when the cost left it out)."""
    def finite(x):
        return float(x) if x is not None and math.isfinite(float(x)) else 0.0
    return ROW_S + finite(ms_median) / 1e3 * (finite(reps) + EXTRA_CALLS) + finite(warmup_s)


def costs(work: dict, settings, previous=None, walls=None) -> dict:
    """{Unit: seconds}. previous: the model's earlier results.csv (a DataFrame) or None; a unit
    takes the recorded rows' seconds when the earlier run timed it, else the FLOPs model.
    walls: {precision: seconds} the earlier run's groups took in all (group_walls); what they
    took beyond their rows' seconds (child start-ups, inputs, compiles outside the warm-ups:
    55 of the fp16 group's 192 s on the H100, 2026-11-26) is spread evenly over that
    precision's recorded units. Without it two H200s got 113 and 13 of 126 units (> 330 s
    against 81 s)."""
    seen: dict = {}
    if previous is not None and len(previous) and {"dtype", "M", "N", "K", "ms_median", "reps"} <= set(previous):
        prev = previous.assign(warmup_s=previous["warmup_s"] if "warmup_s" in previous else 0.0)
        for d, m, n, k, ms, reps, warm in prev[["dtype", "M", "N", "K", "ms_median", "reps", "warmup_s"]].itertuples(
                index=False, name=None):
            key = (d, int(m), int(n), int(k))
            seen[key] = seen.get(key, 0.0) + row_seconds(ms, reps, warm)
    for p, wall in (walls or {}).items():
        mine = [k for k in seen if k[0] == p]
        if mine and math.isfinite(wall):
            extra = max(0.0, wall - sum(seen[k] for k in mine)) / len(mine)
            seen.update({k: seen[k] + extra for k in mine})
    return {u: seen[u.key] if u.key in seen else model_seconds(u, len(labels), settings)
            for u, labels in work.items()}


def group_walls(env: dict) -> dict:
    """{precision: seconds} an earlier run's groups took, summed over its GPUs and attempts
    (environment.json's attempts), or a one-GPU run's 'measure <precision>' phases."""
    walls: dict = {}
    for a in env.get("attempts") or ():
        for p, sec in a.get("groups_s", {}).items():
            walls[p] = walls.get(p, 0.0) + float(sec)
    if not walls and "sharded" not in str(env.get("mode", "")) and "replicated" not in str(env.get("mode", "")):
        walls = {k.split(" ", 1)[1]: float(v) for k, v in env.get("phases_s", {}).items() if k.startswith("measure ")}
    return walls


def assign(cost: dict, n: int, start: dict | None = None) -> list:
    """[[Unit] for rank 0..n-1]: longest first to the least loaded rank (start: seconds a rank
    is busy with before its units, e.g. the ceilings on the rank that writes). Deterministic:
    the same costs give the same shards on every rank. Each shard in the plan's order."""
    if n < 1:
        raise ValueError(f"n: at least one rank, got {n}")
    load = [float((start or {}).get(r, 0.0)) for r in range(n)]
    shards: list = [[] for _ in range(n)]
    for u in sorted(cost, key=lambda u: (-cost[u], u)):
        r = min(range(n), key=lambda i: (load[i], i))
        shards[r].append(u)
        load[r] += cost[u]
    return [sorted(s, key=lambda u: (u.precision, u.shape.flops, u.shape)) for s in shards]


def loads(shards: list, cost: dict, start: dict | None = None) -> list:
    """Seconds of each shard (with its start)."""
    return [float((start or {}).get(r, 0.0)) + sum(cost[u] for u in s) for r, s in enumerate(shards)]


def by_precision(shard: list, order) -> dict:
    """{precision: [Shape]} of a shard, precisions in `order` (the plan's), shapes smallest first."""
    out: dict = {}
    for p in order:
        got = sorted((u.shape for u in shard if u.precision == p), key=lambda s: (s.flops, s))
        if got:
            out[p] = got
    return out
