"""Reports render from recorded tables alone (no GPU): README, figures, headline table, % columns."""
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from study import report
from study.registry import all_stages
from study.roofline import annotate
from study.tables import expect_brief

FIXTURE = Path(__file__).parent / "data" / "reports_fixture"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    root = tmp_path_factory.mktemp("reports")
    shutil.copytree(FIXTURE, root, dirs_exist_ok=True)
    written = report.render(root)
    return root, written


def pages_text(root: Path) -> str:
    """The generated pages: the overview README.md, method.md and each GPU's detail pages."""
    pages = [root / "README.md", root / "method.md"] + sorted(p for d in report.recorded(root)
                                                            for p in (root / d.name).glob("*.md"))
    return "\n".join(p.read_text() for p in pages)


def test_figures_drawn_in_processes_are_the_serial_ones(rendered, tmp_path):
    """The figure parts drawn by a pool of fresh processes (report._draw_all, used where there are
    cores to spare) give the very bytes the serial drawing gives, and every part is drawn."""
    root, _ = rendered
    (gpu_dir,) = report.recorded(root)
    data = report.load(gpu_dir)
    report._draw_all([(report.draw, data, tmp_path, part) for part in report.figure_parts(data)], workers=3)
    made = sorted(p.relative_to(tmp_path) for p in (tmp_path / "figures").rglob("*.png"))
    serial = tmp_path / "serial"
    assert made and made == sorted(p.relative_to(serial) for p in report.draw(data, serial))
    for rel in made:
        assert (tmp_path / rel).read_bytes() == (root / rel).read_bytes(), rel


def test_fixture_is_complete():
    (gpu_dir,) = report.recorded(FIXTURE)
    data = report.load(gpu_dir)
    for col in ("gpu", "family", "stage", "dtype", "layout", "M", "N", "K", "ms_median", "ms_q1", "ms_q3",
                "tflops", "pct_cublas", "pct_roof", "rel_err", "status", "reason"):
        assert col in data.results, col
    assert {"measured", "datasheet"} <= set(data.ceilings["source"])


def test_readme_and_figures(rendered):
    root, written = rendered
    text = pages_text(root)
    (gpu_dir,) = report.recorded(root)
    data = report.load(gpu_dir)
    for section in ("### Environment", "### Ceilings", "### Rooflines", "### Accuracy", "## Method"):
        assert section in text
    for prec in set(data.results["dtype"]):
        assert f"### {prec}" in text
    for names in report.figure_names(data).values():
        for name in names:
            path = root / "figures" / data.gpu / name
            assert path.exists() and path.stat().st_size > 1000, name
            assert f"figures/{data.gpu}/{name}" in text, name


def test_render_is_deterministic(rendered, tmp_path):
    root, _ = rendered
    shutil.copytree(FIXTURE, tmp_path, dirs_exist_ok=True)
    report.render(tmp_path)
    assert (tmp_path / "README.md").read_text() == (root / "README.md").read_text()
    assert pages_text(tmp_path) == pages_text(root)


def test_datasheet_rows_name_their_gpu():
    from study.ceilings import datasheet_rows

    rows = {r["name"]: r for r in datasheet_rows("NVIDIA_H200")}
    assert rows["datasheet_bandwidth"]["value"] == 4.8 and rows["datasheet_fp16"]["value"] == 989.0
    assert {r["detail"] for r in rows.values()} == {"H200 SXM datasheet (dense)"}
    h100 = {r["name"]: r for r in datasheet_rows("NVIDIA_H100_80GB_HBM3")}
    assert h100["datasheet_bandwidth"]["value"] == 3.35
    assert h100["datasheet_bandwidth"]["detail"] == "H100 SXM5 datasheet (dense)"
    assert datasheet_rows("NVIDIA_A100-SXM4-80GB") == []  # no datasheet known: measured roofs only


def test_clock_sampler_window_medians():
    from study.environment import ClockSampler

    c = ClockSampler()
    assert math.isnan(c.latest()["sm_mhz"]) and math.isnan(c.during(0, 1)["power_w"])
    c.samples = [(0.0, 1980.0, 100.0), (1.0, 1500.0, 690.0), (1.1, 1600.0, 650.0), (1.2, 1550.0, math.nan),
                 (5.0, 1900.0, 300.0)]
    assert c.during(0.9, 1.3) == {"sm_mhz": 1550.0, "power_w": 670.0}
    assert c.during(2.0, 3.0) == c.latest() == {"sm_mhz": 1900.0, "power_w": 300.0}  # no sample inside


def test_ladder_tables_name_their_clock(rendered):
    root, _ = rendered
    text = pages_text(root)
    assert "4096^3 (speedup: over the family's previous stage at the same shape; during the timed " \
           "rounds: SM clock 1755 MHz):" in text  # the fixture records sm_mhz, no power_w


def test_expect_brief_is_the_first_sentence_without_notes():
    text = ("~1.8x s03 at 4096^3 fp32 (~70% of cuBLAS FP32; H100: 38.0 TFLOP/s (run 2)); still one\n"
            "        buffer, e.g. 4100^3 waits. The share depends on the clock (ncu: 1.42 GHz).")
    assert expect_brief(text) == "~1.8x s03 at 4096^3 fp32; still one buffer, e.g. 4100^3 waits"
    assert expect_brief("~1.45x s10; rel. error as s10 (2.1e-4)") == "~1.45x s10; rel. error as s10"
    assert expect_brief("~2-4% of cuBLAS FP32 at 4096^3 (memory-bound)") == "~2-4% of cuBLAS FP32 at 4096^3"
    assert expect_brief("") == ""


def test_ladder_tables_show_the_brief_expect(rendered):
    root, _ = rendered
    text = pages_text(root)
    (gpu_dir,) = report.recorded(root)
    data = report.load(gpu_dir)
    stages = {s.stem: s for s in all_stages() if s.family == "cuda"}
    res = data.results
    at_4096 = res[(res["M"] == 4096) & (res["N"] == 4096) & (res["K"] == 4096) & (res["family"] == "cuda")]
    shown = [st for st in set(at_4096["stage"]) if st in stages and stages[st].expect]
    assert shown
    for st in shown:
        full, brief = stages[st].expect, expect_brief(stages[st].expect)
        assert brief in text, st
        if brief != full:  # the notes stay in the header
            assert full not in text, st


def test_headline_table_is_markdown():
    (gpu_dir,) = report.recorded(FIXTURE)
    md = report.headline_table(report.load(gpu_dir))
    lines = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert len(lines) >= 3 and lines[1].startswith("|---")
    assert "cuBLAS" in lines[0]


def test_wrong_kernel_never_counted_fast():
    rows = [dict(gpu="G", family=f, stage=s, kind="stage" if f != "cublas" else "baseline", dtype="fp32",
                 layout="NN", M=64, N=64, K=64, ms_median=ms, status=st)
            for f, s, ms, st in (("cublas", "cublas", 1.0, "ok"), ("cuda", "s01", 0.5, "wrong"),
                                 ("cuda", "s02", 2.0, "ok"))]
    df = annotate(pd.DataFrame(rows))
    wrong = df[df["stage"] == "s01"].iloc[0]
    assert math.isnan(wrong["pct_cublas"]) and math.isnan(wrong["pct_roof"])
    assert df[df["stage"] == "s02"].iloc[0]["pct_cublas"] == pytest.approx(50.0)


FAKE_CHILD = '''
import json, sys, time
spec = json.loads(open(sys.argv[-1]).read())
skip = {json.dumps(e, sort_keys=True) for e, _ in spec["skip"]}
for shape in spec["shapes"]:
    rows = []
    for e in spec["entries"]:
        if json.dumps(e, sort_keys=True) in skip:
            rows.append(dict(stage=e["stage"], M=shape["M"], N=shape["N"], K=shape["K"], status="skipped"))
            continue
        label = f"{e['family']}:{e['stage']}:{e['precision']}:{e['layout']}"
        print(json.dumps({"event": "start", "entry": label, "shape": str(shape["M"])}), flush=True)
        print("{not json", flush=True)
        if e["stage"] == "s02" and shape["M"] == 128:
            sys.exit(3)
        if e["stage"] == "s03" and shape["M"] == 256:
            time.sleep(30)
        rows.append(dict(stage=e["stage"], M=shape["M"], N=shape["N"], K=shape["K"], status="ok"))
    print(json.dumps({"event": "timed", "shape": str(shape["M"]), "t0": shape["M"], "t1": shape["M"] + 1}))
    for r in rows:
        print(json.dumps({"event": "row", "row": r}), flush=True)
print(json.dumps({"event": "done"}))
'''


def test_crashing_and_hanging_kernels_are_dropped(tmp_path, monkeypatch):
    """A kernel that kills its child process, or hangs it, is recorded and the rest goes on."""
    import subprocess
    import sys

    from study import plan, runner
    from study.measure import Settings

    script = tmp_path / "fake_child.py"
    script.write_text(FAKE_CHILD)
    real = subprocess.Popen
    monkeypatch.setattr(runner.subprocess, "Popen",
                        lambda cmd, **kw: real([sys.executable, str(script), cmd[-1]], **kw))
    entries = [plan.Entry("cublas", "cublas", "fp32", "NN", "baseline")] + \
        [plan.Entry("cuda", s, "fp32", "NN") for s in ("s01", "s02", "s03")]
    shapes = plan.parse_shapes(["64", "128", "256", "512"])
    windows = []
    g = runner.run_group("fp32", entries, shapes, Settings(), stall_s=3,
                        on_row=lambda r, w: windows.append((r["M"], w)))
    assert len(g.rows) == len(entries) * len(shapes)
    assert windows and all(w == (m, m + 1) for m, w in windows)  # each row gets its shape's timed window
    status = {(r["stage"], r["M"]): r["status"] for r in g.rows}
    assert status[("s02", 64)] == "ok" and status[("s02", 128)] == "skipped"
    assert status[("s03", 128)] == "ok" and status[("s03", 256)] == "skipped"
    assert status[("s01", 512)] == "ok"
    assert any("crashed" in c for c in g.crashes) and any("hung" in c for c in g.crashes)


def test_reports_pipeline_without_gpu(tmp_path, monkeypatch):
    """`python -m study reports --quick` end to end with the GPU parts replaced by synthetic ones:
    plan from the headers, tables, merge of a filtered run, figures and README."""
    from study import build, ceilings, cli, device, environment, measure, plan, profile, resources, runner

    monkeypatch.setattr(device, "capability", lambda: (9, 0))
    monkeypatch.setattr(device, "gpu_name", lambda: "FAKE_GPU")
    monkeypatch.setattr(build, "build", lambda stems=None, **k: [build.BuildResult(s.stem, "m", 1.0, False, True)
                                                                 for s in stems])
    monkeypatch.setattr(resources, "cuda_stages", lambda stages, out, jobs=8: pd.DataFrame(
        [{"family": "cuda", "stage": s.stem, "kernel": "k", "registers": 64, "lines_of_code": 1} for s in stages]))
    fma = iter([65.0, 70.0, 75.0])   # each run measures its own
    monkeypatch.setattr(ceilings, "measure", lambda gpu, quick=False: pd.DataFrame([dict(
        gpu=gpu, name="fp32_fma_chain", source="measured", precision="fp32", value=next(fma), unit="TFLOP/s", detail="")]))
    dates = iter(["2026-01-01 00:00 UTC", "2026-01-02 00:00 UTC", "2026-01-03 00:00 UTC"])
    monkeypatch.setattr(environment, "collect", lambda: {"gpu": "FAKE_GPU", "date_utc": next(dates), "git_commit": "abc"})

    cublas_ms = [1.0]   # the filtered run below times a faster cuBLAS

    def fake_group(prec, entries, shapes, settings, on_row=None, **kw):
        g = runner.GroupResult(prec)
        for s in shapes:
            for i, e in enumerate(entries):
                ms = cublas_ms[0] if e.family == "cublas" else 1.0 + len(e.label) % 5   # per kernel, any run
                r = measure.result_row(e, s, ms_median=ms, ms_q1=0.9, ms_q3=1.1, reps=5, rel_err=1e-7, tol=1e-5,
                               status="ok", warmup_s=0.1)
                g.rows.append(r)
                on_row(r)
        return g
    monkeypatch.setattr(runner, "run_group", fake_group)
    ncu_calls = []

    def no_ncu(*a, **k):
        ncu_calls.append(a)
        raise RuntimeError("no ncu")
    monkeypatch.setattr(profile, "profile", no_ncu)
    assert cli.main(["reports", "--quick", "--out", str(tmp_path)]) == 0
    assert ncu_calls == []  # --quick skips Nsight Compute unless --ncu
    data = report.load(tmp_path / "data" / "FAKE_GPU")
    n_entries = sum(len(v) for v in plan.plan(plan.QUICK_PRECISIONS).values())
    assert len(data.results) == n_entries * len(plan.default_shapes(quick=True))
    assert (tmp_path / "README.md").exists()
    cublas_ms[0] = 0.5
    assert cli.main(["reports", "--quick", "--precisions", "fp32", "--stages", "s01", "--out", str(tmp_path)]) == 0
    again = report.load(tmp_path / "data" / "FAKE_GPU")
    key = ["family", "stage", "kind", "dtype", "layout", "M", "N", "K"]
    pct = again.results.merge(data.results, on=key, suffixes=("", "_was")).set_index(key)
    s01 = pct.index.get_level_values("stage") == "s01_naive"
    others = ~s01 & (pct.index.get_level_values("family") != "cublas") & (pct.index.get_level_values("dtype") == "fp32")
    assert others.any() and (pct.loc[others, "pct_cublas"] == pct.loc[others, "pct_cublas_was"]).all(), \
        "recorded rows keep their % of their own run's cuBLAS"
    assert s01.any() and pct.loc[s01, "pct_cublas"].to_numpy() == pytest.approx(
        pct.loc[s01, "pct_cublas_was"].to_numpy() / 2, rel=1e-4), "new rows: against the cuBLAS timed beside them"
    assert len(again.results) == len(data.results)  # filtered run replaced its rows, kept the rest
    # ... and says so: the recorded run's environment stays, the filtered run is listed in it with
    # the rows it measured, and each row names the run that measured it
    env = again.environment
    assert env["date_utc"] == "2026-01-01 00:00 UTC" and env["phases_s"] == data.environment["phases_s"]
    (later,) = env["merged_runs"]
    res = again.results
    assert later["date_utc"] == "2026-01-02 00:00 UTC" and later["mode"].startswith("quick, filtered: ") and "phases_s" in later
    mine = res["run_utc"] == "2026-01-02 00:00 UTC"   # s01's fp32 rows and the cuBLAS rows timed beside them
    assert later["rows"] == mine.sum() > 0 and set(res.loc[mine, "dtype"]) == {"fp32"}
    assert set(res.loc[mine, "stage"]) == {"s01_naive", "cublas"} and (res["stage"] == "s01_naive")[~mine & (res["dtype"] == "fp32")].sum() == 0
    assert set(res.loc[~mine, "run_utc"]) == {"2026-01-01 00:00 UTC"}
    assert "Rows from later filtered runs" in (tmp_path / "FAKE_GPU" / "environment.md").read_text()
    assert again.ceilings["value"].tolist() == [65.0], "a filtered run keeps the recorded run's ceilings"
    assert f"{mine.sum()} of its rows from later filtered runs" in (tmp_path / "FAKE_GPU" / "fp32.md").read_text()
    assert cli.main(["reports", "--quick", "--ncu", "--precisions", "fp32", "--out", str(tmp_path)]) == 0
    assert len(ncu_calls) == 1  # asked for: tried, failed, fell back to modelled traffic
    monkeypatch.setattr(device, "capability", lambda: None)
    assert cli.main(["reports", "--out", str(tmp_path)]) == 0  # no GPU: redraw


def test_quick_run_never_replaces_the_full_tables():
    """--quick writes to reports/quick/ unless --out says otherwise."""
    from study import cli

    p = cli.parser()
    assert cli._root(p.parse_args(["reports", "--quick"])) == report.REPORTS / "quick"
    assert cli._root(p.parse_args(["reports"])) == report.REPORTS
    assert cli._root(p.parse_args(["reports", "--quick", "--out", "/tmp/x"])) == Path("/tmp/x")


class _FakeTimer:
    """harness.Timer without a GPU: a passing check, fixed timings (tests override parts)."""

    def __init__(self, call, ops, layout, flush):
        self.call, self.graph, self.calls_per_rep, self.samples, self._pending = call, None, 1, [], []

    def warm(self):
        return 0.0

    def check(self):
        return 0.0, 1.0, []

    def check_replay(self):
        return []

    def use_graph(self):
        from study import harness

        self.graph, self.calls_per_rep = object(), harness.GRAPH_CALLS

    def queue(self):
        self._pending.append(1)

    def collect(self):
        self.samples += [1.0] * len(self._pending)
        self._pending = []

    def timing(self):
        from study import harness

        return harness.Timing(1.0, 1.0, 1.0, len(self.samples), self.graph is not None)

    def release(self):
        pass


def test_one_timing_mode_per_shape_rule(monkeypatch):
    """measure_shape's timing-mode rule without a GPU (Timer replaced by a fake that reports a
    fixed call time): where the shape's fastest call is under GRAPH_BELOW_MS every call under
    GRAPH_MAX_MS is graph-replayed, a longer one stays plain; where the fastest call is over
    the line, none is graphed. A first single time that is inflated (host hiccup) does not decide
    the mode: calls near the line are timed three times and the best counts."""
    import torch

    from study import harness
    from study import measure as m

    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)

    class FakeTimer(_FakeTimer):
        def __init__(self, call, ops, layout, flush):
            super().__init__(call, ops, layout, flush)
            self.singles = list(call.singles)

        def single_ms(self):
            return self.singles.pop(0) if len(self.singles) > 1 else self.singles[0]

    monkeypatch.setattr(harness, "Timer", FakeTimer)
    monkeypatch.setattr(harness, "Operands", lambda *a, **k: None)

    def call(*singles):
        f = lambda a, b, c: None   # noqa: E731
        f.singles = singles
        return f

    def modes(*calls):
        entries = [(m.Entry("cuda", f"k{i}", "fp32", "NN"), c) for i, c in enumerate(calls)]
        rows = m.measure_shape(entries, m.Shape(64, 64, 64), "fp32", None, m.Settings(), {})
        return [r["graph"] for r in rows]

    line, cap = harness.GRAPH_BELOW_MS, harness.GRAPH_MAX_MS
    assert modes(call(0.5 * line), call(1.5 * line), call(2 * cap)) == [True, True, False]
    assert modes(call(1.2 * line), call(3 * line)) == [False, False]
    # first single inflated past the line, the next two under it: graphed, and so is its neighbour
    assert modes(call(1.5 * line, 0.5 * line, 0.6 * line), call(3 * line)) == [True, True]


def test_verdict_uses_the_whole_check(monkeypatch):
    """A row is ok only if every part of the check passed: the plain call's Frobenius error, its
    elementwise bound, the alpha/beta call, and a graph replay's output; otherwise wrong, with
    what failed as the reason."""
    import torch

    from study import harness
    from study import measure as m

    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    verdicts = {"good": ([], []), "elementwise": (["3 of 4096 elements past the elementwise bound"], []),
                "replay": ([], ["graph replay: relative error 0.3 > 0.01"])}

    class FakeTimer(_FakeTimer):
        def check(self):
            return 1e-3, 1e-2, list(verdicts[self.call.name][0])

        def check_replay(self):
            return list(verdicts[self.call.name][1])

        def single_ms(self):
            return 0.01

    monkeypatch.setattr(harness, "Timer", FakeTimer)
    monkeypatch.setattr(harness, "Operands", lambda *a, **k: None)
    calls = []
    for name in verdicts:
        f = lambda a, b, c: None   # noqa: E731
        f.name = name
        calls.append((m.Entry("user", name, "fp32", "NN"), f))
    rows = {r["stage"]: r for r in m.measure_shape(calls, m.Shape(64, 64, 64), "fp32", None, m.Settings(), {})}
    assert rows["good"]["status"] == "ok" and rows["good"]["reason"] == ""
    assert rows["elementwise"]["status"] == "wrong" and "elementwise" in rows["elementwise"]["reason"]
    assert rows["replay"]["status"] == "wrong" and rows["replay"]["reason"].startswith("graph replay")


ROUNDS_CRASH_CHILD = '''
import json, sys
spec = json.loads(open(sys.argv[-1]).read())
for shape in spec["shapes"]:
    name = f"{shape['M']}^3"
    for e in spec["entries"]:
        label = f"{e['family']}:{e['stage']}:{e['precision']}:{e['layout']}"
        print(json.dumps({"event": "start", "entry": label, "shape": name}), flush=True)
    print(json.dumps({"event": "rounds", "shape": name}), flush=True)
    if shape["M"] == 128:
        sys.exit(3)          # a fault while every kernel of the shape runs interleaved
    print(json.dumps({"event": "timed", "shape": name, "t0": 0, "t1": 1}), flush=True)
    for e in spec["entries"]:
        print(json.dumps({"event": "row", "row": dict(stage=e["stage"], M=shape["M"], N=shape["N"], K=shape["K"],
                                                      status="ok")}), flush=True)
print(json.dumps({"event": "done"}))
'''


def _fake_child_group(tmp_path, monkeypatch, child_source: str):
    """runner.run_group over cuBLAS and CUDA s01 at 64^3, 128^3, 256^3 (fp32) with every child
    process replaced by the script `child_source` (it reads the same spec file)."""
    import subprocess
    import sys

    from study import plan, runner
    from study.measure import Settings

    script = tmp_path / "fake_child.py"
    script.write_text(child_source)
    real = subprocess.Popen
    monkeypatch.setattr(runner.subprocess, "Popen",
                        lambda cmd, **kw: real([sys.executable, str(script), cmd[-1]], **kw))
    entries = [plan.Entry("cublas", "cublas", "fp32", "NN", "baseline"), plan.Entry("cuda", "s01", "fp32", "NN")]
    return runner.run_group("fp32", entries, plan.parse_shapes(["64", "128", "256"]), Settings(), stall_s=5)


def test_crash_in_timed_rounds_blames_no_kernel(tmp_path, monkeypatch):
    """A fault during a shape's timed rounds (every kernel queued, asynchronous) is not pinned on
    the last kernel warmed: no kernel is skipped, that shape is recorded as lost, the others run."""
    g = _fake_child_group(tmp_path, monkeypatch, ROUNDS_CRASH_CHILD)
    assert {(r["stage"], r["M"]) for r in g.rows} == {(s, m) for s in ("cublas", "s01") for m in (64, 256)}
    assert all(r["status"] == "ok" for r in g.rows)
    assert len(g.crashes) == 1 and g.crashes[0].startswith("fp32: crashed the CUDA context (exit 3) in the timed "
                                                           "rounds at 128^3") and "no kernel is blamed" in g.crashes[0]


ISOLATING_CHILD = '''
import json, sys
spec = json.loads(open(sys.argv[-1]).read())
skipped = {f"{e['family']}:{e['stage']}:{e['precision']}:{e['layout']}" for e, _ in spec["skip"]}
for shape in spec["shapes"]:
    name = f"{shape['M']}^3"
    labels = [f"{e['family']}:{e['stage']}:{e['precision']}:{e['layout']}" for e in spec["entries"]]
    for lb in labels:
        print(json.dumps({"event": "start", "entry": lb, "shape": name}), flush=True)
    if name in spec["isolate"]:          # each kernel's repeats alone, announced
        for lb in labels:
            if lb in skipped:
                continue
            print(json.dumps({"event": "start", "entry": lb, "shape": name, "phase": "timed alone"}), flush=True)
            if shape["M"] == 128 and lb.startswith("cuda:s01"):
                sys.exit(3)              # the culprit, now caught alone
    else:
        print(json.dumps({"event": "rounds", "shape": name}), flush=True)
        if shape["M"] == 128:
            sys.exit(3)                  # interleaved: anyone's fault
    print(json.dumps({"event": "timed", "shape": name, "t0": 0, "t1": 1}), flush=True)
    for e in spec["entries"]:
        lb = f"{e['family']}:{e['stage']}:{e['precision']}:{e['layout']}"
        print(json.dumps({"event": "row", "row": dict(stage=e["stage"], M=shape["M"], N=shape["N"], K=shape["K"],
                                                      status="skipped" if lb in skipped else "ok")}), flush=True)
print(json.dumps({"event": "done"}))
'''


def test_crash_in_timed_rounds_is_rerun_alone_and_pinned(tmp_path, monkeypatch):
    """A fault in a shape's interleaved rounds re-runs that shape with each kernel's repeats alone
    (each announced): the kernel that faults again is blamed and skipped, the innocent one keeps
    its row at that shape, and the run says a shape was re-run."""
    g = _fake_child_group(tmp_path, monkeypatch, ISOLATING_CHILD)
    ok = {(r["stage"], r["M"]) for r in g.rows if r["status"] == "ok"}
    assert ok == {("cublas", 64), ("cublas", 128), ("cublas", 256), ("s01", 64)}
    assert len(g.crashes) == 1 and g.crashes[0].startswith("cuda:s01:fp32:NN: crashed the CUDA context at 128^3 "
                                                           "(timed alone)")
    assert len(g.recovered) == 1 and "re-run with each kernel timed alone" in g.recovered[0]
    assert "re-run" in g.where()


def test_measure_shape_alone_announces_each_kernel(monkeypatch):
    """The re-run of a shape whose rounds faulted: no "rounds" event; each kernel's repeats are
    announced by a "start" in phase "timed alone" (so a fault is pinned on it), then timed; its row
    says it was timed alone."""
    import torch

    from study import harness
    from study import measure as m

    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)

    class FakeTimer(_FakeTimer):
        def single_ms(self):
            return 2.0

    monkeypatch.setattr(harness, "Timer", FakeTimer)
    monkeypatch.setattr(harness, "Operands", lambda *a, **k: None)
    calls = [(m.Entry("cuda", f"k{i}", "fp32", "NN"), lambda a, b, c: None) for i in range(2)]
    for alone in (False, True):
        events = []
        rows = m.measure_shape(calls, m.Shape(64, 64, 64), "fp32", None, m.Settings(), {}, events.append, alone=alone)
        kinds = [(e["event"], e.get("phase")) for e in events if e["event"] in ("rounds", "start")]
        assert all(r["status"] == "ok" and r["reps"] > 0 for r in rows)
        if alone:
            assert ("rounds", None) not in kinds and kinds.count(("start", "timed alone")) == 2
            assert all("timed alone" in r["note"] for r in rows)
        else:
            assert ("rounds", None) in kinds and ("start", "timed alone") not in kinds
            assert not any("timed alone" in r["note"] for r in rows)


def test_a_stopped_run_takes_its_measuring_child_down():
    """^C or a time limit's SIGINT stops the parent while a child holds the GPU: the child is
    killed, not left running beside the next run (which resumes from the journal)."""
    import subprocess
    import sys as _sys

    from study import runner

    for stop in ("throw", "close"):
        proc = subprocess.Popen([_sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
                                stdout=subprocess.PIPE, text=True)
        lines = runner._lines(proc, 30.0)
        assert next(lines) == "ready\n"
        if stop == "throw":
            with pytest.raises(KeyboardInterrupt):
                lines.throw(KeyboardInterrupt)
        else:
            lines.close()
        assert proc.wait(timeout=10) != 0, stop
