"""The study on several GPUs, on the CPU: shards (every unit once, deterministic, balanced by
cost), the journal's merge, the GPU-to-GPU spread, the CLI's hand-over to torchrun, and the
multi-GPU run itself: `python -m torch.distributed.run --nproc-per-node 2` on gloo with
tests/dist_run.py (the real process group, shards, journals, gather, merge, commit and resume;
the GPU's name, uuid, ceilings and timings stood in for on the CPU), a worker killed mid-run
included."""
import json
import os
import random
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest

from study import cli, device, distrun, journal, launch, pages, plan, publish, runner, shard, spread
from study.measure import Settings, result_row
from study.sweep import Options

ROOT = Path(__file__).resolve().parent.parent
SHAPES = ["16", "32", "48", "64", "80", "96"]
LABELS = 2   # cuBLAS and Triton s03 at each shape (tests/dist_run.py's plan)


def quick_work():
    groups, shapes = plan.select(True)
    return shard.units(publish.schedule(groups, shapes)[1]), groups, shapes


# --- shards -------------------------------------------------------------------------------------

def test_units_keep_every_kernel_of_a_shape_together():
    work, groups, shapes = quick_work()
    _, scope = publish.schedule(groups, shapes)
    assert sum(map(len, work.values())) == sum(len(v) for sc in scope.values() for v in sc.values())
    for u, labels in work.items():
        assert set(labels) == {lb for lb, ss in scope[u.precision].items() if u.shape in ss}
        assert any(lb.startswith("cublas:") for lb in labels), f"{u.name} has no cuBLAS baseline"


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_every_unit_exactly_once_and_the_same_on_every_rank(n):
    work, groups, _ = quick_work()
    cost = shard.costs(work, Settings.quick())
    shards = shard.assign(cost, n)
    flat = [u for s in shards for u in s]
    assert len(flat) == len(set(flat)) == len(work) and set(flat) == set(work)
    shuffled = list(cost.items())
    random.Random(n).shuffle(shuffled)
    assert shard.assign(dict(shuffled), n) == shards, "another rank, another dict order: the same shards"
    by = [shard.by_precision(s, groups) for s in shards]
    assert all(list(b) == [p for p in groups if p in b] for b in by), "precisions in the plan's order"


@pytest.mark.parametrize("n", [2, 3, 4])
def test_shards_finish_together(n):
    work, _, _ = quick_work()
    cost = shard.costs(work, Settings())
    loads = shard.loads(shard.assign(cost, n), cost)
    mean, biggest = sum(cost.values()) / n, max(cost.values())
    assert max(loads) <= mean + biggest, "greedy longest-first: never worse than the mean plus one unit"
    naive = shard.loads([list(work)[r::n] for r in range(n)], cost)   # round robin in plan order
    assert max(loads) <= max(naive)
    start = {0: 0.5 * mean}   # the leader's ceilings: it gets less
    lead = shard.loads(shard.assign(cost, n, start), cost, start)
    assert lead[0] - start[0] < min(lead[1:]) and max(lead) <= mean + 0.5 * mean / n + biggest


def test_costs_come_from_the_previous_run_where_it_has_the_rows():
    work, _, _ = quick_work()
    u = next(iter(work))
    prev = pd.DataFrame([dict(dtype=u.precision, M=u.shape.M, N=u.shape.N, K=u.shape.K, ms_median=100.0, reps=10)])
    cost, model = shard.costs(work, Settings(), prev), shard.costs(work, Settings())
    assert cost[u] == pytest.approx(shard.ROW_S + 0.1 * (10 + shard.EXTRA_CALLS))
    assert all(cost[v] == model[v] for v in work if v != u)
    big, small = max(work, key=lambda v: v.shape.flops), min(work, key=lambda v: v.shape.flops)
    assert model[big] / len(work[big]) > model[small] / len(work[small]), "more FLOPs, more seconds"
    warm = prev.assign(warmup_s=12.5)   # a recorded warm-up (Inductor's autotuning) counts too
    assert shard.costs(work, Settings(), warm)[u] == pytest.approx(cost[u] + 12.5)
    assert shard.costs(work, Settings(), prev.assign(warmup_s=float("nan")))[u] == pytest.approx(cost[u])


def test_a_groups_time_beyond_its_rows_is_spread_over_its_units():
    """Rows that say 15 s of an fp32 group that took 120 s: the 105 s rest goes evenly to its
    three units, so cheap units no longer pile up on one GPU beside a dear one (two H200s,
    2026-11-26: 113 and 13 of 126 units)."""
    work, _, _ = quick_work()
    fp32 = [u for u in work if u.precision == "fp32"]
    dear = next(u for u in work if u.precision == "tf32")
    ms = {u: (5.0 - shard.ROW_S) / shard.EXTRA_CALLS * 1e3 for u in fp32}   # 5 s a unit, as recorded
    ms[dear] = (60.0 - shard.ROW_S) / shard.EXTRA_CALLS * 1e3                # 60 s
    prev = pd.DataFrame([dict(dtype=u.precision, M=u.shape.M, N=u.shape.N, K=u.shape.K, ms_median=v, reps=0)
                         for u, v in ms.items()])
    plain, cost = shard.costs(work, Settings(), prev), shard.costs(work, Settings(), prev, {"fp32": 120.0, "tf32": 1.0})
    assert len(fp32) == 3 and all(plain[u] == pytest.approx(5.0) and cost[u] == pytest.approx(40.0) for u in fp32)
    assert cost[dear] == pytest.approx(60.0), "a group that took less than its rows say: as recorded"
    assert sorted(len(s) for s in shard.assign({u: plain[u] for u in ms}, 2)) == [1, 3]
    assert sorted(len(s) for s in shard.assign({u: cost[u] for u in ms}, 2)) == [2, 2]


def test_group_walls_from_attempts_or_a_one_gpu_runs_phases():
    runs = [{"groups_s": {"fp32": 10.0}}, {"groups_s": {"fp32": 5.0, "tf32": 7.0}}]
    assert shard.group_walls({"attempts": runs, "phases_s": {"measure fp32": 99.0}}) == {"fp32": 15.0, "tf32": 7.0}
    assert shard.group_walls({"mode": "full", "phases_s": {"measure fp16": 116.5, "plots": 40.0}}) == {"fp16": 116.5}
    assert shard.group_walls({"mode": "full; sharded over 2 GPUs (torchrun)", "phases_s": {"measure fp16": 60.0}}) == {}


# --- the journal's merge and the spread -----------------------------------------------------------

def rows_of(unit, labels, **kw):
    entries = [e for es in plan.plan((unit.precision,)).values() for e in es if e.label in labels]
    return [dict(result_row(e, unit.shape, status="ok", ms_median=1.0, reps=5), **kw) for e in entries]


def test_pick_takes_the_latest_complete_attempt_and_names_what_is_missing(tmp_path):
    work, _, _ = quick_work()
    (u1, l1), (u2, l2) = list(work.items())[:2]
    jr = journal.Journal(tmp_path, "GPU-a", 1.0)
    jr.append("assigned", device={"node": 0, "device_index": 3}, units=[u1.key, u2.key])
    for r in rows_of(u1, l1, note="first"):
        jr.append("row", unit=list(u1.key), row=r)
    jr.append("row", unit=list(u2.key), row=rows_of(u2, l2)[0])   # then it died
    jr.close()
    with open(jr.path, "a") as f:
        f.write('{"t": "row", "a": 1.0, "dev": "GPU-a", "unit": [')   # a line cut short by the kill
    later = journal.Journal(tmp_path, "GPU-b", 2.0)
    for r in rows_of(u1, l1, note="second")[:-1]:   # a later, incomplete attempt at u1
        later.append("row", unit=list(u1.key), row=r)
    picked = journal.pick(journal.read(tmp_path), {u1: l1, u2: l2})
    assert picked.done == {(u1.key, "")}
    assert {r["note"] for r in picked.rows[(u1.key, "")]} == {"first"}
    lines = picked.lost({u1: l1, u2: l2}, False, tmp_path)
    assert len(lines) == 1 and "node 0 GPU 3 (GPU-a)" in lines[0] and u2.name in lines[0] and u1.name not in lines[0]


def test_spread_table_per_kernel_shape():
    rows = []
    for dev, base in (("GPU-0", 10.0), ("GPU-1", 11.0), ("GPU-2", 12.0)):
        for fam, stage, kind, tf in (("cublas", "cublas", "baseline", base), ("triton", "s03", "stage", 5.0)):
            rows.append(dict(device_uuid=dev, node=0, device_index=int(dev[-1]), family=fam, stage=stage, kind=kind,
                             dtype="fp32", layout="NN", scaling="", M=4096, N=4096, K=4096, status="ok", tflops=tf,
                             pct_cublas=100.0 * tf / base))
    sp = spread.spread_table(pd.DataFrame(rows))
    tri = sp[sp["family"] == "triton"].iloc[0]
    assert tri["gpus"] == 3 and tri["pct_min"] == pytest.approx(100 * 5 / 12) and tri["pct_max"] == pytest.approx(50)
    assert sp[sp["family"] == "cublas"].iloc[0]["tflops_spread_pct"] == pytest.approx(20)
    assert list(sp.columns) == spread.COLUMNS and spread.spread_table(pd.DataFrame()).empty


# --- the CLI hands over to torchrun -------------------------------------------------------------

def test_several_gpus_start_torchrun_with_the_same_arguments(monkeypatch, tmp_path):
    monkeypatch.setattr(device, "capability", lambda: (9, 0))
    monkeypatch.setattr(launch, "visible_gpus", lambda: 2)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    seen = []
    monkeypatch.setattr(distrun, "host", lambda opts, argv, n, replicate: seen.append((argv, n, replicate)) or 0)
    argv = ["reports", "--quick", "--replicate", "--out", str(tmp_path)]
    assert cli.main(argv) == 0 and seen == [(argv, 2, True)]
    cmd = launch.command(argv, 2)
    assert cmd[1:3] == ["-m", "torch.distributed.run"] and "--nproc-per-node=2" in cmd
    assert cmd[-len(argv) - 2:] == ["--module", "study", *argv]
    assert cli.main(["reports", "--gpus", "3", "--out", str(tmp_path)]) == 1   # more than it sees
    assert cli.main(["reports", "--replicate", "--redraw"]) == 2


def test_a_torchrun_worker_pins_its_gpu_before_cuda(monkeypatch, tmp_path):
    for k, v in (("TORCHELASTIC_RUN_ID", "x"), ("LOCAL_RANK", "1"), ("CUDA_VISIBLE_DEVICES", "3,5")):
        monkeypatch.setenv(k, v)
    monkeypatch.setenv(launch.PINNED, "")   # restored (removed) after the test, like the others
    monkeypatch.setattr(launch, "_pinned", [])
    asked = []
    monkeypatch.setattr(device, "capability", lambda: asked.append(os.environ["CUDA_VISIBLE_DEVICES"]) or (9, 0))
    monkeypatch.setattr(distrun, "rank_main", lambda opts, replicate, fresh: 0)
    assert cli.main(["reports", "--quick", "--out", str(tmp_path)]) == 0
    assert asked and asked[0] == "5" and os.environ[launch.PINNED] == "5"


# --- the run itself under torchrun (2 workers, gloo) ---------------------------------------------

def torchrun(tmp_path, name, **cfg):
    cfg = {"root": str(tmp_path / "reports"), "shapes": SHAPES, "gpus": ["FAKE_GPU", "FAKE_GPU"], **cfg}
    (tmp_path / f"{name}.json").write_text(json.dumps(cfg))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1", OMP_NUM_THREADS="1",
               STUDY_JOURNAL_DIR=str(tmp_path / "journal"), STUDY_BUILD_DIR=str(tmp_path / "build" / "cuda"))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        str(ROOT / "tests" / "dist_run.py"), str(tmp_path / f"{name}.json")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    return p


def options(root: Path, shapes=SHAPES) -> Options:
    return Options(families=("triton", "cublas"), stages=("s03",), precisions=("fp32",), shapes=tuple(shapes),
                   no_ncu=True, root=root, model=False)


def test_lost_worker_keeps_its_rows_and_the_same_command_resumes(tmp_path, monkeypatch, capsys):
    root = tmp_path / "reports"
    # rank 0 slowed, so that rank 1 surely claims the two units it dies in (first come, first served)
    p = torchrun(tmp_path, "die", die={"rank": 1, "after_rows": 3}, slow={"rank": 0, "s": 0.5})
    assert p.returncode != 0, p.stderr[-3000:]
    assert not (root / "data").exists(), "a run that lost a worker writes nothing"
    (folder,) = (tmp_path / "journal" / "FAKE_GPU").iterdir()
    recs = journal.read(folder)
    dead = [r["row"] for r in recs if r["t"] == "row" and r["dev"] == "GPU-fake-1"]
    assert len(dead) == 3, "every row appended before the kill is kept"
    by_shape = pd.DataFrame(dead).groupby("M").size()
    whole, cut = set(by_shape[by_shape == LABELS].index), set(by_shape[by_shape < LABELS].index)
    assert whole and cut
    monkeypatch.setenv("STUDY_JOURNAL_DIR", str(tmp_path / "journal"))
    assert distrun.salvage(options(root)) == 1
    err = capsys.readouterr().err
    assert "shard of node 0 GPU 1 (GPU-fake-1)" in err and "missing" in err and "nothing written" in err
    assert not (root / "data").exists()
    assert distrun.salvage(replace(options(root), allow_partial=True)) == 0   # what came, written as it is
    part = pd.read_csv(root / "data" / "FAKE_GPU" / "results.csv")
    kept = {(r["row"]["M"], r["row"]["family"]) for r in recs if r["t"] == "row"}
    assert set(zip(part["M"], part["family"])) == kept and len(part) == len(kept) < len(SHAPES) * LABELS
    env = json.loads((root / "data" / "FAKE_GPU" / "environment.json").read_text())
    assert any("GPU-fake-1" in m for m in env["missing"]), "the written tables name the missing shard"
    p = torchrun(tmp_path, "resume")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "resuming" in p.stderr
    res = pd.read_csv(root / "data" / "FAKE_GPU" / "results.csv")
    assert len(res) == len(SHAPES) * LABELS and not res.duplicated(["family", "M"]).any()
    assert {"node", "device_index", "device_uuid"} <= set(res.columns)
    assert set(res["device_uuid"]) == {"GPU-fake-0", "GPU-fake-1"}
    assert (res.groupby("M")["device_uuid"].nunique() == 1).all(), "a stage beside its cuBLAS, on one GPU"
    dead_pid = dead[0]["pid"]
    assert set(res.loc[res["pid"] == dead_pid, "M"]) == whole, "whole units kept, the cut one measured again"
    assert (res["status"] == "ok").all() and (root / "README.md").exists()
    assert not (tmp_path / "journal" / "FAKE_GPU").exists(), "a written run removes its journals"


def test_the_model_group_runs_on_the_last_gpu_beside_the_leaders_ncu(tmp_path):
    """A full run on two GPUs: the model group's GPU-timed parts run on rank 1 after its units, at the
    same time as Nsight Compute on the leader (each stood in for by a 3 s sleep); its host-timed part
    (the overhead per call) runs after both, on a quiet host; all is gathered through the journal and
    the leader writes it; every unit was claimed by one GPU and measured there alone."""
    p = torchrun(tmp_path, "model", model=True, tail_s=3.0)
    assert p.returncode == 0, p.stderr[-3000:]
    model = pd.read_csv(tmp_path / "reports" / "data" / "FAKE_GPU" / "model.csv").set_index("what")
    prof = pd.read_csv(tmp_path / "reports" / "data" / "FAKE_GPU" / "profile.csv")
    m_rank, m0, m1 = model.loc["mlp_ms", "note"].split()[2:]   # "model rank R start end"
    q_rank, q0, q1 = model.loc["host_us", "note"].split()[2:]
    p_rank, p0, p1 = prof["note"].item().split()[2:]
    assert (m_rank, q_rank, p_rank) == ("1", "1", "0"), (model["note"].tolist(), prof["note"].item())
    assert float(p0) < float(m1) and float(m0) < float(p1), "ncu and the GPU-timed parts overlap"
    assert float(q0) >= max(float(p1), float(m1)), "the host-timed part waits for ncu and the rest"
    res = pd.read_csv(tmp_path / "reports" / "data" / "FAKE_GPU" / "results.csv")
    assert len(res) == len(SHAPES) * LABELS and not res.duplicated(["family", "M"]).any(), "each unit once"
    tuned = pd.read_csv(tmp_path / "reports" / "data" / "FAKE_GPU" / "autotune.csv")
    assert len(tuned) == len(SHAPES) and tuned["device_uuid"].notna().all(), "one choice per shape, and whose"
    assert (res.groupby("M")["device_uuid"].nunique() == 1).all(), "a stage beside its cuBLAS, on one GPU"
    env = json.loads((tmp_path / "reports" / "data" / "FAKE_GPU" / "environment.json").read_text())
    assert env["phases_s"]["model"] >= 6 and env["phases_s"]["ncu"] >= 3
    assert "quiet host" in env["overhead_timed"], "the model page says how the overhead was timed"


def test_a_slow_gpu_measures_fewer_units_the_fast_one_takes_the_rest(tmp_path):
    """Units go to whichever GPU claims them first: with rank 0 taking 2 s per unit, rank 1 measures
    the units rank 0 has not reached (a fixed shard would have given each half and waited on the
    slow one), and every unit is still measured once, beside its cuBLAS."""
    p = torchrun(tmp_path, "slow", slow={"rank": 0, "s": 2.0})
    assert p.returncode == 0, p.stderr[-3000:]
    res = pd.read_csv(tmp_path / "reports" / "data" / "FAKE_GPU" / "results.csv")
    assert len(res) == len(SHAPES) * LABELS and not res.duplicated(["family", "M"]).any()
    units = res.groupby("device_uuid")["M"].nunique()
    assert units.get("GPU-fake-0", 0) <= 2 and units["GPU-fake-1"] >= len(SHAPES) - 2, units.to_dict()
    assert (res.groupby("M")["device_uuid"].nunique() == 1).all()


def test_replicate_gives_every_gpus_rows_and_the_spread(tmp_path):
    p = torchrun(tmp_path, "rep", shapes=SHAPES[:3], replicate=True)
    assert p.returncode == 0, p.stderr[-3000:]
    data = tmp_path / "reports" / "data" / "FAKE_GPU"
    res, rep = pd.read_csv(data / "results.csv"), pd.read_csv(data / "replicas.csv")
    assert len(res) == 3 * LABELS and set(res["device_uuid"]) == {"GPU-fake-0"}
    assert len(rep) == 2 * len(res) and set(rep["device_uuid"]) == {"GPU-fake-0", "GPU-fake-1"}
    assert (rep.loc[rep["family"] == "cublas", "pct_cublas"] == 100).all(), "each GPU against its own cuBLAS"
    assert (spread.spread_table(rep)["gpus"] == 2).all()
    page = (tmp_path / "reports" / "FAKE_GPU" / "spread.md").read_text()
    assert "GPU-fake-1" in page
    tuned = pd.read_csv(data / "autotune.csv")   # each GPU's choice kept; the page names where they differ
    assert len(tuned) == 2 * 3 and set(tuned["device_uuid"]) == {"GPU-fake-0", "GPU-fake-1"}
    diff = spread.autotune_differences(tuned)
    assert set(diff["shape_class"]) == {"16x16x16"} and set(diff["config"]) == {"BLOCK_M: 16", "BLOCK_M: 32"}
    assert "differ between the GPUs" in page and "BLOCK_M: 32" in page


def test_two_gpu_models_write_their_own_tables_from_one_run(tmp_path):
    p = torchrun(tmp_path, "mixed", shapes=SHAPES[:2], gpus=["FAKE_A", "FAKE_B"])
    assert p.returncode == 0, p.stderr[-3000:]
    for rank, gpu in enumerate(["FAKE_A", "FAKE_B"]):
        res = pd.read_csv(tmp_path / "reports" / "data" / gpu / "results.csv")
        assert len(res) == 2 * LABELS and set(res["device_uuid"]) == {f"GPU-fake-{rank}"}
    assert {"FAKE_A", "FAKE_B"} <= {d.name for d in (tmp_path / "reports").iterdir()}


# --- one GPU: the same journaled path in this process (distrun.alone) ----------------------------

def test_one_gpu_run_cut_short_keeps_its_rows_and_the_same_command_resumes(tmp_path, monkeypatch, capsys):
    """`python -m study reports` on one GPU appends every row to the journal as it comes: a run
    stopped mid-way (a time limit, ^C) writes nothing, and the same command measures only the
    units it had not finished, then writes the whole table and removes the journal."""
    from study import runner

    monkeypatch.setenv("STUDY_JOURNAL_DIR", str(tmp_path / "journal"))
    root = tmp_path / "reports"
    opts = Options(families=("cublas",), precisions=("fp32",), shapes=tuple(SHAPES[:3]), no_ncu=True, root=root,
                   model=False)
    measured = []

    def rig(stop_after=None):
        def work(precision, entries, shapes, settings, on_row=None, **kw):
            g = runner.GroupResult(precision)
            for s in shapes:
                for e in entries:
                    if len(measured) == stop_after:
                        raise KeyboardInterrupt   # the run is stopped here
                    row = result_row(e, s, ms_median=1.0, ms_q1=1.0, ms_q3=1.0, reps=1, rel_err=0.0, tol=1e-4,
                                     status="ok", warmup_s=0.0)
                    measured.append((s.M, e.label))
                    g.rows.append(row)
                    on_row(row, None)
            g.split = {"timed repeats": 0.5}
            return g
        return distrun.Rig(gpu_name=lambda: "FAKE_GPU", uuid=lambda: "GPU-fake-0", work=work, ceilings_s=0.0,
                           ceilings=lambda gpu, quick: pd.DataFrame([dict(gpu=gpu, name="fp32_fma_chain",
                               source="measured", precision="fp32", value=1.0, unit="TFLOP/s", detail="test")]))
    per_shape = len(plan.select(families=("cublas",), precisions=("fp32",))[0]["fp32"])
    with pytest.raises(KeyboardInterrupt):
        distrun.alone(opts, rig=rig(stop_after=per_shape))   # shape 16 done, stopped at 32
    assert not (root / "data").exists(), "a run cut short writes nothing"
    first = list(measured)
    assert distrun.alone(opts, rig=rig()) == 0
    again = measured[len(first):]
    assert {m for m, _ in again} == {32, 48}, "the finished shape is kept, the rest measured"
    assert "resuming" in capsys.readouterr().err
    data = root / "data" / "FAKE_GPU"
    res = pd.read_csv(data / "results.csv")
    assert len(res) == 3 * per_shape and not res.duplicated(["M", "layout"]).any()
    env = json.loads((data / "environment.json").read_text())
    assert env["mode"].endswith("one GPU, journaled") and env["measure_split_s"] == {"fp32": {"timed repeats": 0.5}}
    assert not (tmp_path / "journal" / "FAKE_GPU").exists(), "a written run removes its journal"


def test_a_resumed_run_keeps_what_its_earlier_attempts_recorded(tmp_path, monkeypatch):
    """The fp32 group ends in the first attempt, which is stopped in tf32; the second measures
    tf32. The written run has both groups' autotune rows, time splits and attempts (the first
    attempt's used to be dropped: seen on the H100 and the H200, 2026-11-26)."""
    monkeypatch.setenv("STUDY_JOURNAL_DIR", str(tmp_path / "journal"))
    root = tmp_path / "reports"
    opts = Options(families=("cublas",), precisions=("fp32", "tf32"), shapes=("16",), no_ncu=True, root=root,
                   model=False)

    def rig(stop_in=None):
        def work(precision, entries, shapes, settings, on_row=None, **kw):
            if precision == stop_in:
                raise KeyboardInterrupt   # the time limit
            g = runner.GroupResult(precision, seconds=2.0 if precision == "fp32" else 3.0,
                                   split={"timed repeats": 0.5},
                                   autotune=[dict(family="triton", stage="s08", precision=precision,
                                                  shape_class="16x16x16", config=f"cfg-{precision}", ms=0.1)])
            for s in shapes:
                for e in entries:
                    row = result_row(e, s, ms_median=1.0, ms_q1=1.0, ms_q3=1.0, reps=1, rel_err=0.0, tol=1e-4,
                                     status="ok", warmup_s=0.0)
                    g.rows.append(row)
                    on_row(row, None)
            return g
        return distrun.Rig(gpu_name=lambda: "FAKE_GPU", uuid=lambda: "GPU-fake-0", work=work, ceilings_s=0.0,
                           ceilings=lambda gpu, quick: pd.DataFrame([dict(gpu=gpu, name="fp32_fma_chain",
                               source="measured", precision="fp32", value=1.0, unit="TFLOP/s", detail="test")]))
    with pytest.raises(KeyboardInterrupt):
        distrun.alone(opts, rig=rig(stop_in="tf32"))
    assert distrun.alone(opts, rig=rig()) == 0
    data = root / "data" / "FAKE_GPU"
    tuned = pd.read_csv(data / "autotune.csv")
    assert sorted(tuned["config"]) == ["cfg-fp32", "cfg-tf32"]
    env = json.loads((data / "environment.json").read_text())
    assert set(env["measure_split_s"]) == {"fp32", "tf32"}
    assert [a["groups_s"] for a in env["attempts"]] == [{"fp32": 2.0}, {"tf32": 3.0}]
    assert all(a["gpu"].endswith("(GPU-fake-0)") and a["journaled_s"] >= 0 for a in env["attempts"])
    assert "The run was resumed" in pages._phases(env) and "fp32 2" in pages._phases(env)


def test_a_resumed_full_run_keeps_its_model_group_and_ncu(tmp_path, monkeypatch):
    """Nsight Compute and the model group ran, then the attempt died before writing (a time
    limit): the same command writes the tables without running either again."""
    monkeypatch.setenv("STUDY_JOURNAL_DIR", str(tmp_path / "journal"))
    monkeypatch.setattr(Options, "runs_model", lambda self: True)
    monkeypatch.setattr(Options, "runs_ncu", lambda self: True)
    opts = Options(families=("cublas",), precisions=("fp32",), shapes=("16",), no_ncu=True, root=tmp_path / "r")
    ran = []

    def model(parts):
        ran.append(parts)
        return pd.DataFrame([dict(gpu="FAKE_GPU", what="mlp_ms", family="torch", stage="cublas", size=16,
                                  value=0.1, unit="ms", note="")])

    def work(precision, entries, shapes, settings, on_row=None, **kw):
        g = runner.GroupResult(precision)
        for s in shapes:
            for e in entries:
                on_row(result_row(e, s, ms_median=1.0, ms_q1=1.0, ms_q3=1.0, reps=1, rel_err=0.0, tol=1e-4,
                                  status="ok", warmup_s=0.0), None)
        return g
    def ncu(opts, groups, rows, gpu, logs):
        ran.append(2)
        return pd.DataFrame([dict(gpu=gpu, family="cublas", stage="cublas", kind="gemm", dtype="fp32", layout="NN",
                                  scaling="", M=4096, N=4096, K=4096, dram_bytes=1.0)])
    rig = distrun.Rig(gpu_name=lambda: "FAKE_GPU", uuid=lambda: "GPU-fake-0", work=work, ceilings_s=0.0, model=model,
                      profile=ncu,
                      ceilings=lambda gpu, quick: pd.DataFrame([dict(gpu=gpu, name="fp32_fma_chain",
                          source="measured", precision="fp32", value=1.0, unit="TFLOP/s", detail="test")]))
    real = distrun.finish

    def dies(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(distrun, "finish", dies)
    with pytest.raises(KeyboardInterrupt):
        distrun.alone(opts, rig=rig)
    monkeypatch.setattr(distrun, "finish", real)
    assert distrun.alone(opts, rig=rig) == 0
    assert ran == [2, ("train", "bench", "mlp"), ("overhead",)], "ncu, then the model group's two halves, once"
    assert len(pd.read_csv(tmp_path / "r" / "data" / "FAKE_GPU" / "model.csv")) == 2
    assert len(pd.read_csv(tmp_path / "r" / "data" / "FAKE_GPU" / "profile.csv")) == 1


def test_one_gpu_cli_takes_the_journaled_path(monkeypatch, tmp_path):
    monkeypatch.setattr(device, "capability", lambda: (9, 0))
    monkeypatch.setattr(launch, "visible_gpus", lambda: 1)
    seen = []
    monkeypatch.setattr(distrun, "alone", lambda opts, fresh=False: seen.append((opts.precisions, fresh)) or 0)
    assert cli.main(["reports", "--precisions", "fp32", "--fresh", "--out", str(tmp_path)]) == 0
    assert seen == [(("fp32",), True)]


def test_a_unit_goes_to_its_first_claimant_and_back_to_it_after_a_restart(monkeypatch):
    """claims.py over a real TCPStore: the first rank to ask gets the shape, another rank is refused,
    the owner asking again (its child restarted) gets it back; keys are per precision; without
    torchrun's store (one GPU) every shape is taken."""
    import torch.distributed as dist

    from study import claims

    server = dist.TCPStore("127.0.0.1", 0, 1, True, timedelta(seconds=10), wait_for_workers=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(server.port))
    monkeypatch.setenv("WORLD_SIZE", "2")
    a, b = (claims.Claimer(claims.spec("study/plan/1", f"GPU-{x}")) for x in "ab")
    assert a.take("fp16", "4096^3") and not b.take("fp16", "4096^3") and a.take("fp16", "4096^3")
    assert b.take("bf16", "4096^3") and not a.take("bf16", "4096^3")
    other_attempt = claims.Claimer(claims.spec("study/plan/2", "GPU-b"))
    assert other_attempt.take("fp16", "4096^3"), "a new attempt claims afresh"
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert claims.spec("study/plan/1", "GPU-a") is None and claims.Claimer(None).take("fp16", "x")
