"""A run never loses the recorded reports (CPU only, fake group results, no GPU): an incomplete run
writes nothing unless allowed, a failure while writing leaves the old files, one run at a time,
and a table file is whole or absent."""
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from study import atomic, distrun, plan, publish, report, results, runner, sweep

FIXTURE = Path(__file__).parent / "data" / "reports_fixture"
ROOT = Path(__file__).resolve().parent.parent


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(Path(root).rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def recorded_tree(tmp_path_factory):
    """A reports tree as committed: the fixture's tables, drawn."""
    root = tmp_path_factory.mktemp("recorded")
    shutil.copytree(FIXTURE / "data", root / "data")
    report.render(root)
    return root


@pytest.fixture
def tree(recorded_tree, tmp_path):
    root = tmp_path / "reports"
    shutil.copytree(recorded_tree, root)
    return root


def fake_run(groups_kept=None):
    """A quick fp32 + fp16 plan and the rows its groups would send (only those of groups_kept)."""
    groups, shapes = plan.select(True, (), (), ("fp32", "fp16"), ())
    _, scope = publish.schedule(groups, shapes)
    rows = [{"family": e.family, "stage": e.stage, "kind": e.kind, "dtype": e.precision, "layout": e.layout,
             "scaling": e.scaling, "M": s.M, "N": s.N, "K": s.K, "status": "ok"}
            for p, es in groups.items() if groups_kept is None or p in groups_kept
            for e in es for s in scope[p][e.label]]
    return groups, shapes, rows


def new_data(gpu: str) -> results.Data:
    """What the run would record: the fixture's tables with a changed note (so a write shows)."""
    data = results.load(FIXTURE / "data" / gpu)
    data.results = data.results.assign(note="new run")
    data.environment = dict(data.environment, date_utc="2099-01-01 00:00")
    return data


def gpu_name():
    (d,) = results.recorded(FIXTURE)
    return d.name


def test_complete_plan_has_no_problems():
    groups, shapes, rows = fake_run()
    assert publish.missing(rows, groups, shapes, []) == []
    label = groups["fp16"][0].label
    assert publish.missing(pd.DataFrame(rows), groups, shapes, [f"{label}: crashed the CUDA context"]) == [], \
        "a kernel's isolated crash (its rows say so) is not a lost group"


def test_crashed_groups_and_missing_rows_leave_reports_untouched(tree, capsys):
    groups, shapes, rows = fake_run(groups_kept={"fp16"})
    crashes = ["fp32: child exited 1 before any kernel ran"]
    problems = publish.missing(rows, groups, shapes, crashes)
    assert any("group crashed: fp32" in p for p in problems)
    assert any(p.startswith("fp32: ") and "have no row" in p for p in problems)
    before = snapshot(tree)
    assert publish.commit(new_data(gpu_name()), tree, problems) != 0
    assert snapshot(tree) == before
    assert "nothing written" in capsys.readouterr().err
    # rows missing without any crash are refused too
    assert publish.missing(rows[:-1], groups, shapes, []) != []


def test_allow_partial_writes(tree):
    groups, shapes, rows = fake_run(groups_kept={"fp16"})
    problems = publish.missing(rows, groups, shapes, ["fp32: child exited 1 before any kernel ran"])
    before = snapshot(tree)
    assert publish.commit(new_data(gpu_name()), tree, problems, allow_partial=True) == 0
    after = snapshot(tree)
    assert after != before and set(before) <= set(after)
    assert "new run" in (tree / "data" / gpu_name() / "results.csv").read_text()
    assert "2099-01-01" in (tree / "README.md").read_text()
    assert not list(tree.glob(".staging-*")) and not list(tree.rglob("*.tmp"))


def test_one_gpu_run_refuses_a_run_that_lost_groups(tree, monkeypatch, capsys):
    """distrun.alone (the one-GPU path, journaled) end to end with the GPU work faked: the fp32
    group's child died before any kernel ran, so nothing is written."""
    monkeypatch.setenv("STUDY_JOURNAL_DIR", str(tree.parent / "journal"))
    monkeypatch.setattr(sweep.environment, "collect", lambda: {})
    monkeypatch.setattr(sweep.environment, "ClockSampler", lambda: type("C", (), {
        "start": lambda s: s, "latest": lambda s: {}, "stop": lambda s: {}})())
    monkeypatch.setattr(sweep.build, "build_dir", lambda: tree.parent / "build" / "cuda")
    monkeypatch.setattr(sweep, "_build", lambda groups: ([], None))
    monkeypatch.setattr(sweep.ceilings, "measure", lambda gpu, quick: pd.DataFrame(
        columns=["name", "value", "unit", "source"]))
    groups, shapes, rows = fake_run(groups_kept={"fp16"})

    def work(precision, entries, shapes, settings, on_row=None, **kw):
        g = runner.GroupResult(precision)
        for r in rows:
            if r["dtype"] == precision and any((s.M, s.N, s.K) == (r["M"], r["N"], r["K"]) for s in shapes):
                on_row(dict(r), None)
        if precision == "fp32":
            g.crashes = ["fp32: child exited 1 before any kernel ran"]
        return g
    rig = distrun.Rig(gpu_name=gpu_name, uuid=lambda: "GPU-fake-0", work=work, ceilings_s=0.0)
    before = snapshot(tree)
    assert distrun.alone(sweep.Options(quick=True, precisions=("fp32", "fp16"), root=tree), rig=rig) == 1
    assert snapshot(tree) == before
    err = capsys.readouterr().err
    assert re.search(r"fp32: (\d+) of \1 planned kernel-shapes have no row", err), err
    assert "fp16:" not in err and "incomplete run: nothing written" in err


def test_the_newest_whole_run_leads_the_overview(tree):
    """Two GPUs recorded: rows merged into the older GPU's run (a filtered run, a model group) leave
    the newer GPU's run first in the overview and its detail list; a whole run of the older GPU,
    dated now, takes the lead."""
    other = tree / "data" / "NVIDIA_OTHER"
    shutil.copytree(tree / "data" / gpu_name(), other)
    env = json.loads((other / "environment.json").read_text())
    (other / "environment.json").write_text(json.dumps(dict(env, date_utc="2098-01-01 00:00", gpu_full_name="OTHER")))

    def first_listed():
        readme = (tree / "README.md").read_text()
        details = readme[readme.index("## Detail pages"):]
        return "OTHER" if details.index("NVIDIA_OTHER/") < details.index(f"{gpu_name()}/") else "merged-into"

    merged = results.load(tree / "data" / gpu_name())
    merged.results = merged.results.assign(note="merged rows")
    merged.environment = dict(merged.environment, merged_runs=[{"date_utc": "2099-01-01 00:00", "rows": 1}])
    assert publish.commit(merged, tree, []) == 0
    assert "merged rows" in (tree / "data" / gpu_name() / "results.csv").read_text()
    assert first_listed() == "OTHER"
    assert publish.commit(new_data(gpu_name()), tree, []) == 0   # a whole run, dated 2099
    assert first_listed() == "merged-into"


def test_failure_while_writing_leaves_old_files(tree, monkeypatch):
    before = snapshot(tree)

    def boom(*a, **k):
        raise RuntimeError("disk full")
    monkeypatch.setattr(report, "draw", boom)   # tables staged, figures fail
    with pytest.raises(RuntimeError, match="disk full"):
        publish.commit(new_data(gpu_name()), tree, [])
    assert snapshot(tree) == before
    with pytest.raises(RuntimeError, match="disk full"):   # a redraw as well
        report.render(tree)
    assert snapshot(tree) == before
    assert not list(tree.glob(".staging-*"))


def test_second_lock_holder_is_refused(tmp_path):
    code = textwrap.dedent(f"""
        import sys, time
        from study import atomic
        with atomic.locked({str(tmp_path)!r}):
            print("held", flush=True)
            time.sleep(60)
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(atomic.Busy, match=rf"pid {holder.pid}\b"):
            with atomic.locked(tmp_path):
                pass
        shutil.copytree(FIXTURE / "data", tmp_path / "data")   # the CLI's redraw is refused as well
        p = subprocess.run([sys.executable, "-m", "study", "reports", "--redraw", "--out", str(tmp_path)], capture_output=True, text=True, env=env,
                           cwd=ROOT, timeout=300)
        lines = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip() and not ln.startswith("[study]")]
        assert p.returncode == 1 and len(lines) == 1 and f"pid {holder.pid}" in lines[0], (p.returncode, lines)
        assert not (tmp_path / "README.md").exists()
    finally:
        holder.kill()
        holder.wait()
    with atomic.locked(tmp_path):   # released when its holder died
        pass


def test_results_write_interrupted_leaves_no_partial_file(tmp_path, monkeypatch):
    data = new_data(gpu_name())
    results.write(data, tmp_path)
    out = results.data_dir(data.gpu, tmp_path)
    before = snapshot(out)

    def half_then_interrupt(self, path, *a, **k):
        Path(path).write_text("gpu,family\nhalf")
        raise KeyboardInterrupt
    monkeypatch.setattr(pd.DataFrame, "to_csv", half_then_interrupt)
    data.results = data.results.assign(note="changed")
    with pytest.raises(KeyboardInterrupt):
        results.write(data, tmp_path)
    assert snapshot(out) == before, "a table was left half written"
    fresh = tmp_path / "fresh"
    monkeypatch.setattr(pd.DataFrame, "to_csv", half_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        results.write(data, fresh)
    assert not [p for p in fresh.rglob("*") if p.is_file()], "a partial file was left where none was"


def test_named_sets_schedule_what_a_full_run_does_at_their_shapes():
    """--shapes decode (a set) schedules each kernel what a full run schedules it at those shapes,
    so a filtered run's rows are a subset of a full run's: cuBLAS NN and the NN stages skip the
    decode-only token counts. A shape named on its own (64x4096x4096) runs for every kernel that
    runs there at all (Inductor and a stage's other layouts keep their own shapes)."""
    groups, full_shapes = plan.select(False, (), (), ("fp16",), ())
    _, full = publish.schedule(groups, full_shapes)
    specs = ["decode"]
    groups, shapes = plan.select(False, (), (), ("fp16",), specs)
    assert not plan.names_single_shapes(specs)
    _, named = publish.schedule(groups, shapes, True, plan.names_single_shapes(specs))
    assert sweep.Options(precisions=("fp16",), shapes=tuple(specs)).scope(groups, shapes) == named   # what runs use
    for label, got in named["fp16"].items():
        assert set(got) == set(full["fp16"][label]) & set(shapes), label
    nn = [e.label for e in groups["fp16"] if e.layout == "NN" and e.kind != plan.LAYOUT]   # (LAYOUT: its own shapes)
    assert nn and all(not any(plan.is_decode_only(s) for s in named["fp16"][lb]) for lb in nn)
    specs = ["decode", "64x4096x4096"]
    assert plan.names_single_shapes(specs) and plan.names_single_shapes(["4096"])
    groups, shapes = plan.select(False, (), (), ("fp16",), specs)
    _, single = publish.schedule(groups, shapes, True, plan.names_single_shapes(specs))
    assert sweep.Options(precisions=("fp16",), shapes=tuple(specs)).scope(groups, shapes) == single
    one = next(s for s in shapes if (s.M, s.N, s.K) == (64, 4096, 4096))
    assert all(one in single["fp16"][lb] for lb in nn)
