"""Layout as a study dimension: a stage's other layouts are planned at the layout shapes beside
cuBLAS in the same layout, and the precision page tables them."""
from __future__ import annotations

import pandas as pd

from study import plan, registry
from study.plan import LAYOUT, LAYOUT_SHAPES, Shape, group_shapes, runs_at


def test_other_layouts_planned_at_layout_shapes_only():
    groups = plan.plan(("bf16",))
    entries = groups["bf16"]
    for s in registry.all_stages():
        if "bf16" not in s.precisions:
            continue
        mine = [e for e in entries if (e.family, e.stage) == (s.family, s.stem)]
        assert [e.layout for e in mine if e.kind == "stage"] == [s.layout]
        assert sorted(e.layout for e in mine if e.kind == LAYOUT) == sorted(s.layouts[1:])
    cublas = {e.layout: e for e in entries if e.family == "cublas"}
    assert set(cublas) == {"NN", "NT", "TN"}, cublas
    assert cublas["TN"].note == plan.LAYOUT_NOTE and not cublas["NN"].note
    square, other = Shape(*LAYOUT_SHAPES[0]), Shape(1024, 1024, 1024)
    tn = next(e for e in entries if e.kind == LAYOUT and e.layout == "TN")
    assert runs_at(tn, square) and not runs_at(tn, other) and not runs_at(cublas["TN"], other)
    assert runs_at(cublas["NN"], other)
    shapes = group_shapes("bf16", entries, [square, other, Shape(16, 4096, 4096, "layer")])
    assert shapes[tn.label] == [square]


def test_layout_table():
    from study.pages import layout_table
    from study.results import Data

    n = LAYOUT_SHAPES[0][0]
    rows = [("cublas", "cublas", "baseline", lay, 700.0, 100.0) for lay in ("NN", "NT", "TN")]
    rows += [("cuda", "s13_warp_specialized", "stage", "NT", 710.0, 101.0),
             ("cuda", "s13_warp_specialized", LAYOUT, "NN", 650.0, 93.0),
             ("cuda", "s13_warp_specialized", LAYOUT, "TN", 600.0, 86.0)]
    df = pd.DataFrame(rows, columns=["family", "stage", "kind", "layout", "tflops", "pct_cublas"])
    df = df.assign(dtype="bf16", M=n, N=n, K=n, status="ok")
    t = layout_table(Data("X", df), "bf16")
    assert list(t.columns) == ["stage", "family", "NN", "NT", "TN"]
    s13 = t[t["stage"] == "s13_warp_specialized"].iloc[0]
    assert (s13["NN"], s13["NT"], s13["TN"]) == ("650 (93%)", "710 (101%)*", "600 (86%)")
    assert t.iloc[-1]["stage"] == "cuBLAS"
    assert layout_table(Data("X", df[df["kind"] != LAYOUT]), "bf16").empty
