"""The decode sweep: x @ W.T with M tokens against an nn.Linear weight W [N, K] (plan.WEIGHTS,
M in plan.DECODE_TOKENS), the GEMMs of LLM inference. At small M a GEMM is memory-bound: the
weight must stream from HBM once, so a kernel is judged by the share of the copy bandwidth
(measured in the same run) at which it moves its compulsory bytes (A and W read once, C written
once). wins_table() names the fastest kernel of each family per shape; decompositions_table()
how the stages that choose per shape divided the work; figure() draws % of that roof against M,
one panel per weight.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .plan import DECODE_LAYOUT, DECODE_PRECISIONS, DECODE_TOKENS, TOKENS, WEIGHTS
from .results import Data
from .roofline import ceiling_values

IN_BYTES = {"fp16": 2, "bf16": 2, "fp8": 1}
OUT_BYTES = {"fp16": 2, "bf16": 2, "fp8": 2}     # fp8 GEMMs write bf16
FAMILIES = (("cublas", "cuBLAS"), ("inductor", "Inductor"), ("cuda", "CUDA"), ("triton", "Triton"))
COLORS = {"cublas": "#222222", "inductor": "#2ca02c", "cuda": "#1f77b4", "triton": "#ff7f0e"}  # as figures.py


def precisions(data: Data) -> list:
    """The decode precisions this run measured at a decode-only token count."""
    res = data.results
    if not len(res) or not {"M", "dtype"} <= set(res.columns):
        return []
    weights = set(WEIGHTS)
    on_weight = pd.Series([(n, k) in weights for n, k in zip(res["N"], res["K"])], index=res.index, dtype=bool)
    extra = res["M"].isin([m for m in DECODE_TOKENS if m not in TOKENS]) & on_weight
    return [p for p in DECODE_PRECISIONS if ((res["dtype"] == p) & extra).any()]


def roof_rows(data: Data, precision: str) -> pd.DataFrame:
    """The ok NT rows of the decode shapes at one precision, with bytes, TB/s and % of roof."""
    res = data.results
    weights = set(WEIGHTS)
    df = res[(res["dtype"] == precision) & (res["layout"] == DECODE_LAYOUT) & (res["status"] == "ok")
             & res["kind"].isin(["stage", "baseline"]) & res["ms_median"].notna()].copy()
    if "scaling" in df and precision == "fp8":   # fp8: per-tensor scales (the common case)
        df = df[df["scaling"] == "tensor"]
    keep = [(n, k) in weights and m in DECODE_TOKENS for m, n, k in zip(df["M"], df["N"], df["K"])]
    df = df.loc[pd.Series(keep, index=df.index, dtype=bool)]
    bw = ceiling_values(data.ceilings, data.gpu).get("bandwidth")
    df["bytes"] = (IN_BYTES[precision] * (df["M"] * df["K"] + df["N"] * df["K"])
                   + OUT_BYTES[precision] * df["M"] * df["N"])
    df["tbps"] = df["bytes"] / (df["ms_median"] * 1e-3) / 1e12
    df["pct_roof"] = 100.0 * df["tbps"] / bw if bw else float("nan")
    return df


def best(df: pd.DataFrame) -> pd.DataFrame:
    """The fastest row of each family at each shape."""
    if not len(df):
        return df
    idx = df.groupby(["family", "M", "N", "K"])["ms_median"].idxmin()
    return df.loc[idx].sort_values(["N", "K", "M", "family"])


def wins_table(data: Data, precision: str) -> pd.DataFrame:
    """Per weight and M: each family's fastest kernel (us, % of cuBLAS, % of the copy roof) and
    the winner."""
    b = best(roof_rows(data, precision))
    rows = []
    for (n, k, m), g in b.groupby(["N", "K", "M"]):
        by = {r["family"]: r for _, r in g.iterrows()}
        cub = by.get("cublas")
        row = {"weight N x K": f"{n} x {k}", "M": int(m)}
        for fam, label in FAMILIES:
            r = by.get(fam)
            if r is None:
                continue
            name = "" if fam in ("cublas", "inductor") else f"{r['stage'][:3]} "
            pct = f", {100 * cub['ms_median'] / r['ms_median']:.0f}% cuBLAS" if cub is not None and fam != "cublas" else ""
            row[label] = f"{name}{1e3 * r['ms_median']:.1f} us ({r['pct_roof']:.0f}% roof{pct})"
        win = g.loc[g["ms_median"].idxmin()]
        row["fastest"] = win["family"] if win["family"] in ("cublas", "inductor") else f"{win['family']} {win['stage'][:3]}"
        rows.append(row)
    return pd.DataFrame(rows)


def decompositions_table(data: Data, precision: str) -> pd.DataFrame:
    """Per weight and M: how each stage that names its division of the work (s14: data-parallel,
    split-K, stream-K, hybrid; results.csv's `decomposition`) divided it; empty for a run that
    recorded none."""
    df = roof_rows(data, precision)
    if "decomposition" not in df:
        return pd.DataFrame()
    df = df[df["decomposition"].astype(str) != ""]
    rows = []
    for (n, k, m), g in df.groupby(["N", "K", "M"]):
        row = {"weight N x K": f"{n} x {k}", "M": int(m)}
        for fam, label in FAMILIES:
            for _, r in g[g["family"] == fam].sort_values("stage").iterrows():
                row[f"{label} {r['stage'][:3]}"] = r["decomposition"]
        rows.append(row)
    return pd.DataFrame(rows)


def figure(data: Data, precision: str, path: Path):
    """% of the copy bandwidth against M, one panel per weight: cuBLAS, Inductor and each
    family's fastest stage at each M (the stage is written beside each point)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    b = best(roof_rows(data, precision))
    fig, axes = plt.subplots(1, len(WEIGHTS), figsize=(4.2 * len(WEIGHTS), 3.8), sharey=True, squeeze=False)
    for ax, (n, k) in zip(axes[0], WEIGHTS):
        w = b[(b["N"] == n) & (b["K"] == k)]
        for fam, label in FAMILIES:
            f = w[w["family"] == fam].sort_values("M")
            if not len(f):
                continue
            ax.plot(f["M"], f["pct_roof"], marker="o", ms=4, color=COLORS[fam],
                    label=label if fam in ("cublas", "inductor") else f"{label} (fastest stage)")
            if fam in ("cuda", "triton"):
                for m, y, st in zip(f["M"], f["pct_roof"], f["stage"]):
                    ax.annotate(st[1:3], (m, y), textcoords="offset points", xytext=(0, 5 if fam == "cuda" else -11),
                                fontsize=7, ha="center", color=COLORS[fam])
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(DECODE_TOKENS))
        ax.set_xticklabels([str(m) for m in DECODE_TOKENS], fontsize=8)
        ax.axhline(100, color="#999999", lw=0.8, ls="--")
        ax.set_title(f"W {n} x {k}", fontsize=10)
        ax.set_xlabel("M (tokens)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("% of measured copy bandwidth")
    axes[0][0].set_ylim(bottom=0)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=len(handles), fontsize=8, bbox_to_anchor=(0.5, -0.06))
    fig.suptitle(f"{precision} decode shapes (x @ W.T, NT): compulsory bytes / time against the copy roof "
                 f"(labels: stage number)", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
