"""Rows of one kernel in several variants, as the tables and figures group them (read side only).

fp8 rows carry a `scaling` ("tensor": one scale per operand; "row": one per row of A and column
of B) and its fast-accumulation variants have kind FAST_ACCUM; a table recorded before fp8 has no
`scaling` column at all. Where Inductor was measured beside cuBLAS, the faster of the two at a
shape is "the best baseline". Pure pandas: no torch, no GPU.
"""
from __future__ import annotations

import pandas as pd

from .plan import FAST_ACCUM, FP8_SCALINGS
from .results import status_label

BASELINE_FAMILIES = ("cublas", "inductor")


def scalings(df: pd.DataFrame) -> list:
    """fp8's scalings present in df, in FP8_SCALINGS order; [""] where there are none."""
    have = set(df["scaling"].fillna("")) if "scaling" in df else set()
    return [s for s in FP8_SCALINGS if s in have] or [""]


def scaled(df: pd.DataFrame, scaling: str) -> pd.DataFrame:
    """The rows of one scaling ("" : all rows, the precisions without scales)."""
    return df if not scaling else df[df["scaling"] == scaling]


def blocks(df: pd.DataFrame) -> list:
    """[(scaling, kind)]: the stages promoted, then (fp8) with fast accumulation, per scaling."""
    kinds = ["stage"] + ([FAST_ACCUM] if (df["kind"] == FAST_ACCUM).any() else [])
    return [(s, k) for s in scalings(df) for k in kinds]


def tag(scaling: str, kind: str) -> str:
    """" fast accum (row scales)": the variant part of a row's label ("" for a plain row)."""
    return (" fast accum" if kind == FAST_ACCUM else "") + (f" ({scaling} scales)" if scaling else "")


def best_baselines(df: pd.DataFrame) -> dict:
    """{(layout, scaling): TFLOP/s of the faster of cuBLAS and Inductor} over df's ok baseline
    rows, where df has an Inductor row (the "% best baseline" columns); {} where it has none."""
    base = df[df["family"].isin(BASELINE_FAMILIES) & (df["kind"] == "baseline") & (df["status"] == "ok")]
    if not (base["family"] == "inductor").any():
        return {}
    sc = base["scaling"].fillna("") if "scaling" in base else pd.Series("", index=base.index)
    return {k: float(v) for k, v in base.groupby([base["layout"], sc])["tflops"].max().items()}


def pct_best(r, best: dict, scaling: str) -> str:
    """A row's TFLOP/s as % of the best baseline at its layout and scaling ("" where none; its
    status where the row is not ok)."""
    top = best.get((r["layout"], scaling)) if r is not None else None
    if top is None:
        return ""
    return f"{100.0 * r['tflops'] / top:.0f}%" if r["status"] == "ok" else status_label(r)
