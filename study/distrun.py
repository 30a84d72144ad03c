"""The study on several GPUs: one worker per GPU under torchrun; shards, gather, merge, resume.

    rank_main(opts)   a torchrun worker (launch.under_torchrun): its GPU pinned (launch.pin_gpu),
                      a gloo process group, every rank's GPU model and uuid gathered. The ranks of
                      one model share that model's plan: its units (shard.py) not yet measured by
                      an earlier attempt (journal.py) are sharded by cost, or with replicate every
                      rank runs them all. Each rank measures its units with runner.run_group
                      (child processes: one GPU's CUDA error never reaches another's rows),
                      appending every row to its journal; then the rows are gathered over gloo and
                      the first rank of each model (its leader, which also measured the ceilings)
                      merges them and writes reports/data/<gpu>/ through sweep.finish, one model at
                      a time. A committed run removes its journals. One GPU: alone().
    host(opts, ...)   several GPUs here: torchrun, then, if a worker died, salvage() names the
                      missing units (the journals' rows are kept).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from contextlib import ExitStack, suppress
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from typing import Callable

import pandas as pd

from . import claims, journal, launch, prewarm, results, shard
from .atomic import Busy, locked
from .inmodel import BUSY_PARTS, QUIET_PARTS
from .journal import pick
from .measure import Settings
from .publish import merge
from .roofline import annotate
from .sweep import PROFILE_SIZE, RESULT_KEY, Options, Ready, check, finish, ncu_profile, prepare, say

TIMEOUT_S = float(os.environ.get("STUDY_DIST_TIMEOUT_S", 12 * 3600))   # the longest a rank waits for the others
LEADER_HEAD_S = 30.0   # the leader's ceilings, when no earlier run says how long they took


@dataclass
class Rig:
    """What touches the GPU in a rank; the tests swap in CPU stand-ins (None: the real one)."""

    gpu_name: Callable | None = None   # () -> file-system friendly GPU model (device.gpu_name)
    uuid: Callable | None = None       # () -> the GPU's UUID (environment.cuda_uuid)
    ceilings: Callable | None = None   # (gpu, quick) -> ceilings frame (ceilings.measure)
    work: Callable | None = None       # runner.run_group's signature
    ceilings_s: float | None = None    # what the ceilings cost the leader (None: the last run's, or LEADER_HEAD_S)
    model: Callable | None = None      # (parts) -> the model group's frame (modelrun.run_group)
    profile: Callable | None = None    # (opts, groups, rows, gpu, logs) -> ncu frame (sweep.ncu_profile)

    def __post_init__(self):
        from . import device, environment, modelrun, runner

        self.gpu_name = self.gpu_name or device.gpu_name
        self.uuid = self.uuid or environment.cuda_uuid
        self.work = self.work or runner.run_group
        self.model = self.model or (lambda parts: modelrun.run_group(modelrun.ModelOptions(parts=parts)))
        self.profile = self.profile or ncu_profile


def fingerprint(opts: Options, groups: dict, shapes: list, gpu: str, replicate: bool) -> str:
    """The journal key of a run: what decides its rows (journal.fingerprint adds the sources)."""
    settings = Settings.quick() if opts.quick else Settings()
    return journal.fingerprint(root=str(opts.out().resolve()), gpu=gpu, replicate=replicate,
                               groups={p: [e.label for e in es] for p, es in groups.items()},
                               shapes=[asdict(s) for s in shapes], explicit=bool(opts.shapes), every=opts.every_kernel(),
                               settings=asdict(settings))


def _all(obj) -> list:
    import torch.distributed as dist

    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def rank_main(opts: Options, replicate: bool = False, fresh: bool = False, rig: Rig | None = None, store=None) -> int:
    """One torchrun worker's share of `python -m study reports`; 0 if its GPU model's tables
    were written (by its leader), else 1. store: a one-member group's (launch.alone: one GPU)."""
    import torch.distributed as dist

    if store is None:
        launch.pin_gpu()
    groups, shapes = check(opts)
    rig = rig or Rig()
    dist.init_process_group("gloo", timeout=timedelta(seconds=TIMEOUT_S),
                            **({} if store is None else {"store": store, "rank": 0, "world_size": 1}))
    try:
        with ExitStack() as stack:
            busy = ""
            if dist.get_rank() == 0:   # one run at a time on this reports root (the single-GPU rule)
                try:
                    stack.enter_context(locked(opts.out()))
                except Busy as exc:
                    busy = str(exc)
            busy = _all(busy)[0]
            if busy:
                if dist.get_rank() == 0:
                    say(busy)
                return 1
            return _run(opts, groups, shapes, replicate, fresh, rig)
    finally:
        dist.destroy_process_group()


def alone(opts, fresh: bool = False, rig=None) -> int:
    """`python -m study reports` on one GPU, in this process, by a torchrun worker's path
    (rank_main) in a one-member gloo group: every row goes to the journal as it comes, so
    a run cut short (a time limit, a lost process) resumes what is missing when the same command
    runs again, and a full study can span several sessions of a time-limited machine."""
    import torch.distributed as dist

    with tempfile.TemporaryDirectory(prefix="study-store-") as d:
        return rank_main(opts, fresh=fresh, rig=rig, store=dist.FileStore(os.path.join(d, "store"), 1))


def _me(rig: Rig) -> dict:
    import torch.distributed as dist

    idx, rank = os.environ.get(launch.PINNED, os.environ.get("LOCAL_RANK", "0")), dist.get_rank()
    return {"rank": rank, "local_rank": int(os.environ.get("LOCAL_RANK", 0)), "node": int(os.environ.get("GROUP_RANK", 0)),
            "host": socket.gethostname(), "device_index": int(idx) if idx.isdigit() else idx,
            "device_uuid": rig.uuid() or f"rank{rank}", "gpu": rig.gpu_name(), "sources": journal.sources_digest()}


def _previous(opts: Options, gpu: str) -> tuple:
    """(the model's recorded results.csv or None, its groups' walls, its phases' seconds)."""
    d = results.data_dir(gpu, opts.out())
    if not (d / "results.csv").exists():
        return None, {}, {}
    old = results.load(d)
    return old.results, shard.group_walls(old.environment), old.environment.get("phases_s", {})


def _run(opts, groups, shapes, replicate, fresh, rig) -> int:
    import torch.distributed as dist

    me = _me(rig)
    team = _all(me)
    if len({m["sources"] for m in team}) > 1:   # hosts with different stage files or harness: no common table
        if me["rank"] == 0:
            say("the workers run different sources (stage files or study/): " + ", ".join(
                f"{m['host']}: {m['sources'][:12]}" for m in team) + "; check out the same tree on every host")
        return 1
    models = {g: [m for m in team if m["gpu"] == g] for g in dict.fromkeys(m["gpu"] for m in team)}   # in rank order
    mine, dev, gpu = models[me["gpu"]], me["device_uuid"], me["gpu"]
    lead = mine[0]["rank"] == me["rank"]
    work = shard.units(opts.scope(groups, shapes))
    folders = {g: journal.directory(g, fingerprint(opts, groups, shapes, g, replicate)) for g in models}
    if fresh and folders[gpu].is_dir():
        shutil.rmtree(folders[gpu], ignore_errors=True)
    dist.barrier()
    prior = journal.unique([r for g, recs in _all((gpu, journal.read(folders[gpu]))) if g == gpu for r in recs])
    done = pick(prior, work, replicate).done
    # the model group (a full run; journaled): the model's last GPU runs it after its shard, beside the
    # leader's ncu, but its host-timed parts (QUIET_PARTS) once every rank is done, on a quiet host
    model_by = mine[-1]["rank"] if opts.runs_model() and not any(r["t"] == "model" for r in prior) else None
    todo = [u for u in work if (u.key, dev if replicate else "") not in done]
    proposal = None
    if lead and not replicate:
        previous, walls, ph = _previous(opts, gpu)   # the leader's shard starts after its ceilings
        start = {0: float(ph.get("ceilings", LEADER_HEAD_S)) if rig.ceilings_s is None else rig.ceilings_s}
        proposal = shard.assign(shard.costs({u: work[u] for u in todo}, Settings.quick() if opts.quick else Settings(),
                                            previous, walls), len(mine), start=start)
    # the leader's shards, the same on every rank of the model: what each rank compiles ahead;
    # with several GPUs the units go to whichever rank claims them first (claims.py)
    proposal, stamp = _all((proposal, time.time()))[mine[0]["rank"]]
    mine_units = todo if replicate else proposal[[m["rank"] for m in mine].index(me["rank"])]
    shared = None if replicate or len(mine) < 2 else claims.spec(f"study/{folders[gpu].name}/{stamp:.6f}", dev)
    if prior and lead:
        say(f"{gpu}: resuming, {len(work) - len(todo) if not replicate else len(done)} unit(s) kept from an "
            f"earlier attempt ({folders[gpu]})")
    say(f"{gpu} GPU {me['device_index']} ({dev}): " + (f"{len(todo)} of {len(work)} units, each to the GPU that claims "
        f"it first" if shared else f"{len(mine_units)} of {len(work)} units " + ("(replicated)" if replicate else
                                   f"(sharded over {len(mine)} GPUs)" if len(team) > 1 else "")))
    jr = journal.Journal(folders[gpu], dev, time.time())
    jr.append("assigned", device=me, units=[] if shared else [u.key for u in mine_units])
    if me["local_rank"] == 0 and not lead and any(e.family == "cuda" for es in groups.values() for e in es):
        from .sweep import _build

        _build(groups)   # this host's CUDA builds, before its workers' children ask for them
    mine_scope: dict = {}   # the Triton kernel-shapes this rank compiles ahead (prewarm.py)
    for u, lb in ((u, lb) for u in mine_units for lb in work[u]):
        mine_scope.setdefault(u.precision, {}).setdefault(lb, []).append(u.shape)
    r = prepare(opts, groups, shapes, gpu, build_stages=lead, measure_ceilings=(rig.ceilings or True) if lead else False,
                warm=prewarm.triples_of(groups, mine_scope))
    if lead:
        jr.append("ceilings", rows=r.ceil.to_dict("records"))
        jr.append("env", env=r.env)
    _measure(opts, groups, todo if shared else mine_units, work, r, rig, jr, me, shared, len(mine))
    # ncu on the leader once every unit is measured, beside the model group; journaled as that is
    at = [x for g, recs in _all((gpu, [x for x in jr.records if _at_profile(x)])) if g == gpu for x in recs]
    if lead and opts.runs_ncu() and not any(x["t"] == "ncu" for x in prior):
        t, rows = time.perf_counter(), pd.DataFrame([x["row"] for x in prior + at if _at_profile(x)])
        prof = rig.profile(opts, groups, rows, gpu, r.logs)
        jr.append("ncu", rows=json.loads(prof.to_json(orient="records") if len(prof) else "[]"), seconds=time.perf_counter() - t)
    t, busy = time.perf_counter(), rig.model(BUSY_PARTS) if model_by == me["rank"] else None
    dist.barrier()   # every rank's units and ncu done: the host-timed parts run on a quiet host
    if model_by == me["rank"]:
        rows = pd.concat([busy, rig.model(QUIET_PARTS)], ignore_index=True)
        jr.append("model", rows=json.loads(rows.to_json(orient="records")), seconds=time.perf_counter() - t)
    now = [x for g, recs in _all((gpu, jr.records)) if g == gpu for x in recs]
    jr.close()
    rc = (0, True)
    for g in sorted(models):   # one model's commit at a time: they may share the reports root
        if g == gpu and lead:
            rc = _commit(opts, groups, shapes, r, journal.unique(prior + now), work, replicate, mine, folders[gpu])
        dist.barrier()
    if not lead and r.clock is not None:
        r.clock.stop()
    rcs = {m["gpu"]: c for m, c in zip(team, _all(rc)) if m["rank"] == models[m["gpu"]][0]["rank"]}
    if me["local_rank"] == 0:
        for g, (c, whole) in rcs.items():
            if c == 0 and whole:   # written whole: the journals are spent (an identical run starts afresh)
                shutil.rmtree(folders[g], ignore_errors=True)
                with suppress(OSError):
                    folders[g].parent.rmdir()   # the model's folder, if no other plan has journals there
    return rcs[gpu][0]


def _measure(opts, groups, units, work, r: Ready, rig: Rig, jr, me, shared=None, ranks=1):
    """This rank's units, one precision group at a time in the plan's order (runner.run_group);
    shared: the claim settings when `units` are every rank's, each measured by its first claimant."""
    total, seen, t0 = sum(len(work[u]) for u in units), [0], time.perf_counter()
    where = f"node {me['node']} GPU {me['device_index']}"
    if shared:   # this rank's share is known only at the end: progress against an even share
        total = max(1, round(total / ranks))

    def on_row(row, window=None):
        row.update(r.clock.during(*window) if window else r.clock.latest())
        row.update(node=me["node"], device_index=me["device_index"], device_uuid=me["device_uuid"])
        jr.append("row", unit=[row["dtype"], row["M"], row["N"], row["K"]], row=row)
        seen[0] += 1
        if seen[0] == total or seen[0] % max(1, total // 10) == 0:
            el = time.perf_counter() - t0
            say(f"{where}: {seen[0]}/{'~' if shared else ''}{total} kernel-shapes, {el:.0f} s, "
                f"ETA {el / seen[0] * max(0, total - seen[0]):.0f} s")
    for p, shapes_p in shard.by_precision(units, groups).items():
        g = rig.work(p, groups[p], shapes_p, r.settings, on_row=on_row, log_path=r.logs / f"bench_{p}_{me['rank']}.log",
                     explicit_shapes=opts.every_kernel(), **({"claims": shared} if shared else {}))
        for c in g.crashes:
            say(f"CRASH on {where}: {c}")
        jr.append("resources", rows=g.resources)
        jr.append("autotune", rows=[dict(a, device_uuid=me["device_uuid"]) for a in g.autotune] if ranks > 1
                  else g.autotune)   # several GPUs: which one chose it (a --replicate run keeps each one's)
        jr.append("crashes", rows=[f"{c} [{where}]" for c in g.crashes])
        jr.append("split", rows=[{"precision": p, **g.split}], seconds=g.seconds)   # where its time went (runner.py)
        say(f"{where}: {g.where()}")
        r.phases[f"measure {p}"] = r.phases.get(f"measure {p}", 0.0) + g.seconds


def _at_profile(rec: dict) -> bool:
    """A journaled row at the shape Nsight Compute profiles (sweep.ncu_profile)."""
    return rec["t"] == "row" and (rec["row"]["M"], rec["row"]["N"], rec["row"]["K"]) == (PROFILE_SIZE,) * 3


def _commit(opts, groups, shapes, r: Ready, records, work, replicate, mine, folder) -> tuple:
    """(finish's exit status, whether every unit came): the leader's merge and write."""
    picked = pick(records, work, replicate)
    order = [m["device_uuid"] for m in mine] + sorted(set(picked.devices) - {m["device_uuid"] for m in mine})
    got, every = journal.gathered(picked, records, replicate, order)
    r.env["devices"] = [{k: v for k, v in picked.devices[d].items() if k not in ("host", "sources")}
                        for d in order if d in picked.devices]   # no host names in the committed tables
    r.env["mode"] += "; one GPU, journaled" if not launch.under_torchrun() else \
        f"; {'replicated on' if replicate else 'sharded over'} {len(mine)} GPUs (torchrun)"
    r.env["missing"] = picked.lost(work, replicate, folder)   # written with --allow-partial only
    if got.get("model_s") is not None:   # where it ran: on one GPU after the shard, else beside; the overhead alone
        r.phases["model"], r.env["overhead_timed"] = got["model_s"], "after every GPU's other work, on a quiet host"
    return finish(opts, groups, shapes, r, got, r.env["missing"], _replicas(every, opts, r) if replicate else None), \
        not r.env["missing"]


def _replicas(rows, opts: Options, r: Ready) -> pd.DataFrame:
    """Every GPU's rows, each GPU's % of cuBLAS against its own cuBLAS rows; a filtered run
    keeps the earlier replicas of what it did not measure."""
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df.insert(0, "gpu", r.gpu)
    df = pd.concat([annotate(g, r.ceil) for _, g in df.groupby("device_uuid", sort=False)], ignore_index=True)
    old = results.data_dir(r.gpu, opts.out())
    prev = results.load(old).replicas if opts.filters() and (old / "results.csv").exists() else None
    return merge(prev, df, RESULT_KEY + ["device_uuid"])


def host(opts: Options, argv: list, nproc: int, replicate: bool = False) -> int:
    """`python -m study reports` with nproc GPUs on this host: torchrun (launch.py); if it failed,
    salvage() says what the journals kept and what is missing."""
    say(f"{nproc} GPUs: one worker each under torchrun ({' '.join(launch.command(argv, nproc)[1:6])} ...)")
    rc = launch.relaunch(argv, nproc)
    return rc if rc == 0 else salvage(opts, replicate)


def salvage(opts: Options, replicate: bool = False) -> int:
    """After workers died: for each GPU model with journals of this plan here, the rows kept and
    the units missing; with opts.allow_partial the kept rows are written (sweep.finish, no ncu,
    no model group). 0 if something was written, else 1."""
    groups, shapes = check(opts)
    work, rc = shard.units(opts.scope(groups, shapes)), 1
    for gdir in sorted(p for p in journal.journal_root().glob("*") if p.is_dir()):
        folder = journal.directory(gdir.name, fingerprint(opts, groups, shapes, gdir.name, replicate))
        records = journal.unique(journal.read(folder)) if folder.is_dir() else []
        if not records:
            continue
        picked = pick(records, work, replicate)
        problems = picked.lost(work, replicate, folder)
        say(f"{gdir.name}: {sum(map(len, picked.rows.values()))} rows kept in {folder}, "
            f"{len(picked.done)} unit(s) complete")
        if not opts.allow_partial:
            for p in problems:
                say(p)
            say("nothing written; run the same command again to measure only what is missing, or add --allow-partial")
            continue
        env = next((x["env"] for x in reversed(records) if x["t"] == "env"), {"gpu": gdir.name})
        ceil = pd.DataFrame(next((x["rows"] for x in reversed(records) if x["t"] == "ceilings"), []))
        r = Ready(gdir.name, Settings.quick() if opts.quick else Settings(), env, None, folder, [], None, ceil, {},
                  time.perf_counter())
        got, every = journal.gathered(picked, records, replicate, sorted(picked.devices))
        r.env["missing"] = problems
        part = replace(opts, no_ncu=True, model=False)
        with locked(opts.out()):
            if finish(part, groups, shapes, r, got, problems, _replicas(every, part, r) if replicate else None) == 0:
                rc = 0
    return rc
