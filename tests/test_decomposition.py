"""How a stage divided its work (study/decomposition.py): the CUDA binding exposes the stage's
`decomposition()` where it has one, the Triton stage names its plan, the measured rows carry it
and the decode section shows it. CPU, except the last test (GPU: both families' s14 name the
plan their launch takes)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from conftest import interp_unusable
from study import binding, decode, measure, pages, registry
from study.plan import DECODE_LAYOUT, Entry, Shape
from study.registry import PACKAGE_PARENT
from study.results import RESULT_COLUMNS, Data


@pytest.mark.parametrize("stage", registry.all_stages("cuda"), ids=lambda s: s.stem)
def test_binding_exposes_decomposition_where_the_stage_has_one(stage):
    src = binding.binding_source(stage)
    has = binding.has_decomposition(stage)
    for prec in stage.precisions:
        assert (f'm.def("decomposition_{prec}"' in src) == has
    assert has == (stage.short == "s14"), stage.stem   # s14 is the stage that chooses per shape


def test_result_rows_have_the_column():
    entry = Entry("cuda", "s14_stream_k", "stage", "bf16", DECODE_LAYOUT)
    row = measure.result_row(entry, Shape(16, 4096, 4096, "layer"))
    assert row["decomposition"] == "" and "decomposition" in RESULT_COLUMNS


CHILD = r"""
import json, torch
from study import decomposition
from study.kernels import kernel
k = kernel("triton", "s14")
out = {}
for m, n, kk in ((1, 1024, 4096), (16, 11008, 4096), (3, 256, 1024)):
    a = torch.randn(m, kk, dtype=torch.float16)
    w = torch.randn(n, kk, dtype=torch.float16)
    out[f"{m}x{n}x{kk}"] = [decomposition.of(k, a, w.t()), k.module.decomposition(a, w.t()),
                            k.module.plan(m, n, kk, 3).name]
out["s13"] = decomposition.of(kernel("triton", "s13"), a, w.t())
try:
    decomposition.of(k, a, torch.randn(kk + 8, n, dtype=torch.float16))
    out["bad"] = "no error"
except ValueError as exc:
    out["bad"] = str(exc)
print(json.dumps(out))
"""


def test_triton_s14_names_its_plan_in_the_interpreter():
    """On the interpreter's 3 SMs: the plan's name first, then its tile and program count; a
    stage without decomposition() gives ""; operands the kernel's checks refuse raise its error."""
    if (why := interp_unusable()):
        pytest.skip(why)
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(PACKAGE_PARENT))
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got.pop("s13") == ""
    bad = got.pop("bad")   # a refused operand is refused as a call refuses it, naming it
    assert bad.startswith("b must have K"), bad
    for shape, (via_study, direct, name) in got.items():
        assert via_study == direct and via_study.startswith(name), (shape, via_study, name)
        if not name.endswith("(s13)"):
            assert via_study.endswith(" programs") and "tiles (N x M x K)" in via_study, via_study


def _data(with_column: bool) -> Data:
    rows = []
    for fam, stage, plan in (("cublas", "cublas", ""), ("cuda", "s14_stream_k", "split-k, swap-AB, 128x16x256 tiles (N x M x K)"),
                             ("cuda", "s13_warp_specialized", ""), ("triton", "s14_stream_k", "data-parallel")):
        for m in (1, 16):
            rows.append({"gpu": "G", "family": fam, "stage": stage, "kind": "baseline" if fam == "cublas" else "stage",
                         "dtype": "bf16", "layout": "NT", "M": m, "N": 4096, "K": 4096, "status": "ok",
                         "ms_median": 0.02 if fam == "cublas" else 0.021, "decomposition": plan})
    df = pd.DataFrame(rows)
    if not with_column:
        df = df.drop(columns="decomposition")
    ceilings = pd.DataFrame([{"gpu": "G", "name": "copy_bandwidth", "source": "measured", "precision": "memory",
                              "value": 3.0, "unit": "TB/s", "detail": ""}])
    return Data(gpu="G", results=df, ceilings=ceilings)


def test_decode_section_shows_each_stages_division():
    table = decode.decompositions_table(_data(True), "bf16")
    assert list(table.columns) == ["weight N x K", "M", "CUDA s14", "Triton s14"]   # s13 named none
    assert table["CUDA s14"].tolist() == ["split-k, swap-AB, 128x16x256 tiles (N x M x K)"] * 2
    assert decode.decompositions_table(_data(False), "bf16").empty   # a run recorded before the column


def test_decode_page_renders_the_division():
    text = pages.decode_section(_data(True), "bf16", "fig")
    assert "How the work was divided" in text and "| split-k, swap-AB, 128x16x256 tiles (N x M x K) |" in text
    assert "How the work was divided" not in pages.decode_section(_data(False), "bf16", "fig")


@pytest.mark.gpu
@pytest.mark.parametrize("family", ["cuda", "triton"])
def test_s14_names_the_plan_its_launch_takes(family):
    import torch

    from study import decomposition
    from study.kernels import kernel

    k = kernel(family, "s14")
    x = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    text = decomposition.of(k, x, w.t())
    assert text.split(",")[0] in ("split-k", "stream-k", "data-parallel", "hybrid", "data-parallel (s13)"), text
    if family == "cuda":
        # test_plan_s14's decode plan at M = 16: 128 weight rows x 16 tokens, four 64-wide k boxes a step
        assert text.startswith("split-k, swap-AB, 128x16x256 tiles (N x M x K), ") and text.endswith(" CTAs"), text
