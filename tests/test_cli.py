"""The command line and the library's edges without a GPU (CPU only): messages instead of
tracebacks, arguments checked before anything runs, output that fits a terminal, --help without
torch; rows that were not measured never read "ok"; ragged sizes drawn and stated apart."""
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

import study
from study import build, cli, device, figures, measure, plan, report, results, tables
from study.operands import check_operands

ROOT = Path(__file__).resolve().parent.parent
NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU behaviour")


def run(*args, flags=()):
    """`python [flags] -m study ARGS` in a fresh process: (returncode, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, *flags, "-m", "study", *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def one_line_error(capsys, code, want_code, *words):
    out, err = capsys.readouterr()
    assert code == want_code, (code, out, err)
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, lines
    for w in words:
        assert w in lines[0], (w, lines[0])


# --- 3. `stages` fits a terminal ----------------------------------------------------------------

@pytest.mark.parametrize("cap", [None, (8, 0), (9, 0)], ids=["no-gpu", "sm80", "sm90"])
def test_stages_output_fits_120_columns(cap, capsys, monkeypatch):
    monkeypatch.setattr(device, "capability", lambda: cap)
    assert cli.main(["stages"]) == 0
    out = capsys.readouterr().out
    assert max(len(ln) for ln in out.splitlines()) <= 120
    for s in study.all_stages("cuda"):   # the table shows the CUDA header's Expect (Triton's if none)
        assert s.stem in out and tables.expect_brief(s.expect)[:40] in out
    if cap is None:
        assert "no CUDA GPU" in out


# --- 4. `build` without a CUDA toolkit ----------------------------------------------------------

def test_build_without_toolkit_raises_once_before_any_worker(monkeypatch):
    monkeypatch.setattr(build, "toolkit_missing", lambda: "no CUDA toolkit found: nvcc is not on PATH")
    monkeypatch.setattr(build, "_so_path", lambda s: None)
    monkeypatch.setattr(build, "_build_in_subprocess", lambda s: pytest.fail("a worker was started"))
    with pytest.raises(build.ToolkitError, match=r"^cannot compile the CUDA stages here: no CUDA toolkit"):
        study.build_all()


def test_cli_build_without_toolkit_says_so_once(monkeypatch, capsys):
    monkeypatch.setattr(build, "toolkit_missing", lambda: "no CUDA toolkit found: nvcc is not on PATH")
    monkeypatch.setattr(build, "_so_path", lambda s: None)
    one_line_error(capsys, cli.main(["build"]), 1, "nvcc")


@pytest.mark.skipif(build.toolkit_missing() is None, reason="this machine can compile CUDA stages")
def test_python_m_study_build_here():
    code, out, err = run("build")
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1, lines
    assert "Traceback" not in err and "RuntimeWarning" not in err and build.toolkit_missing() in lines[0]


def test_build_workers_start_without_runpy_warning(monkeypatch):
    seen = []
    monkeypatch.setattr(build.subprocess, "run", lambda cmd, **kw: seen.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0, "", ""))
    build._build_in_subprocess(build.spec(study.all_stages("cuda")[0]))
    monkeypatch.undo()   # build.subprocess is the subprocess module itself
    assert seen[0][1:4] == ["-m", "study.worker", "build"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "study.worker"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "measure SPEC.json" in p.stderr and "Warning" not in p.stderr, p.stderr


# --- 5. `bench`, check_operands and kernel() ----------------------------------------------------

@NO_GPU
def test_bench_cublas_without_gpu_is_one_line():
    code, out, err = run("bench", "cublas", "fp32")
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1 and "Traceback" not in err, lines
    assert "no CUDA GPU" in lines[0]


@pytest.mark.parametrize("argv,words", [
    (["bench", "cuda", "s01", "--shape", "foo"], ["--shape", "'foo'"]),
    (["bench", "cuda", "s01", "--shape", "0x4x4"], ["--shape", "0x4x4"]),
    (["bench", "cuda", "s99"], ["s99", "s01"]),
    (["bench", "cublas", "fp33"], ["fp33", "fp32"]),
    (["bench", "cuda", "s01", "--precision", "fp16"], ["fp16", "fp32"]),
    (["bench", "triton", "s01", "--layout", "NT"], ["--layout"]),
])
def test_bench_arguments_checked_before_the_gpu(argv, words, capsys, monkeypatch):
    monkeypatch.setattr(device, "capability", lambda: pytest.fail("GPU checked before the arguments"))
    one_line_error(capsys, cli.main(argv), 2, *words)


def test_check_operands_names_a_bad_precision():
    a = torch.randn(2, 3)
    with pytest.raises(ValueError, match=r"^precisions must name one or more of \('fp32', .*got \('fp33',\)"):
        check_operands(("fp33",), "NN", a, a.t().contiguous(), allow_cpu=True)
    with pytest.raises(ValueError, match=r"^layout must be one of"):
        check_operands(("fp32",), "TT", a, a.t().contiguous(), allow_cpu=True)
    assert check_operands("fp32", "NN", a, a.t().contiguous(), allow_cpu=True).precision == "fp32"


@NO_GPU
def test_cublas_refuses_like_the_stages_without_gpu():
    with pytest.raises(RuntimeError, match=r"cublas fp32 cannot run here: no CUDA GPU"):
        study.kernel("cublas", "fp32")
    with pytest.raises(RuntimeError, match=r"cannot run here: no CUDA GPU"):
        study.kernel("cuda", "s01")
    with pytest.raises(RuntimeError, match=r"study.bench .* no(ne)? .*GPU|there is none here"):
        study.bench(lambda a, b, c: None, [64], "fp32")
    with pytest.raises(ValueError, match=r"precisions must name"):
        study.bench(lambda a, b, c: None, [64], "fp33")


# --- 6. `reports` filters -----------------------------------------------------------------------

@pytest.mark.parametrize("argv,words", [
    (["--shapes", "bogus"], ["shapes", "'bogus'"]),
    (["--stages", "s99"], ["stages", "'s99'"]),
    (["--stages", "s01", "--precisions", "fp16"], ["nothing to measure"]),
    (["--redraw", "--stages", "s01"], ["--redraw", "--stages s01"]),
])
@pytest.mark.parametrize("cap", [None, (9, 0)], ids=["no-gpu", "gpu"])
def test_reports_rejects_bad_filters(argv, words, cap, capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(device, "capability", lambda: cap)
    one_line_error(capsys, cli.main(["reports", *argv, "--out", str(tmp_path)]), 2, *words)
    assert not any(tmp_path.iterdir())


def test_reports_without_gpu_refuses_filters(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(device, "capability", lambda: None)
    one_line_error(capsys, cli.main(["reports", "--stages", "s08", "--out", str(tmp_path)]), 1,
                   "no CUDA GPU", "--stages s08")
    assert not any(tmp_path.iterdir())
    assert "refused" in " ".join(cli.parser()._subparsers._group_actions[0].choices["reports"].format_help().split())


# --- 9. --help does not import torch ------------------------------------------------------------

@pytest.mark.parametrize("argv", [["--help"], ["reports", "--help"], ["bench", "--help"], ["stages", "--help"],
                                  ["build", "--help"]], ids=lambda a: " ".join(a))
def test_help_imports_no_torch(argv):
    code, out, err = run(*argv, flags=("-X", "importtime"))
    assert code == 0 and "usage: python -m study" in out
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in err.splitlines() if ln.startswith("import time:")}
    assert not {m for m in imported if m.split(".")[0] in ("torch", "triton", "matplotlib")}
    if argv[0] == "stages":
        assert "Expect" in out
    if argv[0] == "build":
        assert "parallel compiler processes" in out


# --- 10. a row that was not measured never says ok ----------------------------------------------

def _row(fam, stage, **kw):
    r = dict(gpu="G", family=fam, stage=stage, kind="baseline" if fam == "cublas" else "stage", dtype="fp32",
             layout="NN", M=64, N=64, K=64, shape_set="square", ms_median=1.0, reps=5, rel_err=1e-7, status="ok",
             reason="", note="")
    r.update(kw)
    return r


def test_committed_ok_rows_without_timing_read_as_not_timed(tmp_path):
    from study.roofline import annotate

    res = annotate(pd.DataFrame([_row("cublas", "cublas"), _row("cuda", "s01_naive", ms_median=math.nan, reps=0),
                                 _row("triton", "s01_naive", ms_median=0.5)]))
    results.write(results.Data("G", res), tmp_path)
    data = results.load(tmp_path / "data" / "G")
    r = data.results.set_index("family").loc["cuda"]
    assert r["status"] == "skipped" and r["reason"] == results.NOT_TIMED
    table = tables.ladder_table(data, "fp32", 64)
    cells = " ".join(map(str, table.to_numpy().ravel()))
    assert "nan" not in cells.lower() and "not timed" in cells
    assert table.iloc[0]["rel. err CUDA / Triton"].startswith("1.0e-07")   # it was checked


def test_harness_never_writes_ok_without_timing(monkeypatch):
    """A call over the per-call budget is checked but not timed: skipped, saying why."""
    from study import harness

    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None, raising=False)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)

    class SlowTimer:
        def __init__(self, call, ops, layout, flush):
            self.graph, self.calls_per_rep, self.samples, self._pending = None, 1, [], []

        def warm(self):
            return 0.0

        def check(self):
            return 1e-7, 1e-5, []

        def single_ms(self):
            return 5000.0

    monkeypatch.setattr(harness, "Timer", SlowTimer)
    monkeypatch.setattr(harness, "Operands", lambda *a, **k: None)
    skip = {}
    e = plan.Entry("cuda", "s01_naive", "fp32", "NN")
    (row,) = measure.measure_shape([(e, None)], plan.Shape(8192, 8192, 8192), "fp32", None, measure.Settings(), skip)
    assert row["status"] == "skipped" and row["reps"] == 0 and row["reason"].startswith("not timed: 5000 ms")
    assert row["rel_err"] == 1e-7 and e in skip


# --- 11. ragged sizes apart in the figure, and stated in the text --------------------------------

def _sizes_frame():
    rows = []
    for n, cub, cuda in ((2048, 600.0, 500.0), (4095, 150.0, 400.0), (4096, 750.0, 520.0)):
        for fam, stage, tf in (("cublas", "cublas", cub), ("cuda", "s13_warp_specialized", cuda)):
            rows.append(_row(fam, stage, dtype="bf16", M=n, N=n, K=n, ms_median=2 * n ** 3 / (tf * 1e9)))
    from study.roofline import annotate

    return annotate(pd.DataFrame(rows))


def test_size_figure_draws_ragged_sizes_unconnected(monkeypatch, tmp_path):
    figs = []
    monkeypatch.setattr(figures, "_save", lambda fig, path: figs.append(fig))
    figures.tflops_vs_size(_sizes_frame(), "bf16", tmp_path / "x.png")
    lines = figs[0].axes[0].get_lines()
    joined = [ln for ln in lines if ln.get_linestyle() not in ("None", "none", "")]
    apart = [ln for ln in lines if ln.get_linestyle() in ("None", "none", "") and len(ln.get_xdata())]
    assert joined and all(4095 not in list(ln.get_xdata()) for ln in joined)
    assert sorted(x for ln in apart for x in ln.get_xdata()) == [4095, 4095]


def test_ragged_finding_is_computed_from_the_data():
    data = results.Data("G", _sizes_frame())
    assert tables.ragged_pairs(data, "bf16") == [(4095, 4096)]
    table, text = tables.ragged_table(data, "bf16")
    assert "5.0x" in text and "4095^3" in text and "150 TFLOP/s against 750 at 4096^3" in text
    assert table.iloc[0].tolist() == ["cuBLAS NN", "150.0 vs 750.0 (5.00x)"]
    assert table.iloc[1].tolist() == ["CUDA s13 (its fastest)", "400.0 vs 520.0 (1.30x)"]


# --- an installed package never writes a project README -----------------------------------------

def test_project_readme_only_in_a_checkout(monkeypatch, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"x\n{report.HEADLINE_START}\nold\n{report.HEADLINE_END}\ny\n")
    monkeypatch.setattr(report, "ROOT", tmp_path)
    data = results.Data("G", _sizes_frame())
    monkeypatch.setattr(report, "IN_CHECKOUT", False)
    assert report.update_project_readme(data) == [] and "old" in readme.read_text()
    monkeypatch.setattr(report, "IN_CHECKOUT", True)
    assert report.update_project_readme(data) == [readme] and "old" not in readme.read_text()


def test_a_bad_stage_header_is_one_line(capsys, monkeypatch):
    from study import registry

    def broken(*a, **k):
        raise registry.HeaderError("cuda_src/s99_x.cu: header misses Expect")
    monkeypatch.setattr(registry, "discover", broken)
    one_line_error(capsys, cli.main(["stages"]), 1, "s99_x.cu", "Expect")


# --- --allow-partial --------------------------------------------------------------------------

def test_reports_help_documents_allow_partial():
    code, out, err = run("reports", "--help")
    assert code == 0 and "--allow-partial" in out and "untouched" in out


@NO_GPU
def test_allow_partial_without_gpu_is_refused(capsys):
    one_line_error(capsys, cli.main(["reports", "--allow-partial"]), 1, "--allow-partial", "no CUDA GPU")
    one_line_error(capsys, cli.main(["reports", "--redraw", "--allow-partial"]), 2, "--allow-partial", "--redraw")
