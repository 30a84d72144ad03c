"""Figures from the tidy tables alone (no GPU): ladder bars, TFLOP/s vs size, error vs K (rooflines: rooflines.py).

draw() writes every figure of one run to reports/figures/<gpu>/ under fixed names
(figure_names()); each drawing function takes DataFrames as written to reports/data/<gpu>/ and
a path. A wrong, failed or skipped kernel never gets a bar or a point of speed.
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from . import decode, rooflines  # noqa: E402
from .plan import FAST_ACCUM, FP8_K_SWEEP_MN, RAGGED_MULTIPLE, is_ragged  # noqa: E402
from .registry import PRECISIONS, SCALED  # noqa: E402
from .results import Data, checked_not_timed, figures_dir, status_label  # noqa: E402
from .tables import TABLE_SIZES  # noqa: E402
from .variants import scaled, scalings, tag  # noqa: E402

FAMILY_COLOR = {"cuda": "#1f77b4", "triton": "#ff7f0e", "cublas": "#222222", "inductor": "#2ca02c",
                "user": "#9467bd"}
PREC_MARKER = {"fp32": "o", "tf32": "s", "fp16": "^", "bf16": "v", "fp8": "D"}


def _save(fig, path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["status"] == "ok") & df["tflops"].notna()]


def _size_rows(df: pd.DataFrame, n: int) -> pd.DataFrame:
    return df[(df["M"] == n) & (df["N"] == n) & (df["K"] == n)]


def ladder(results: pd.DataFrame, precision: str, n: int, path: Path, title_extra: str = ""):
    """Bars per stage at n^3: CUDA and Triton side by side; cuBLAS (and Inductor, green) as a
    horizontal line per layout, labelled, 15% below the top of the y axis. fp8: a bar group per stage and scaling, fast accumulation as a
    hatched half bar beside each (like a finding), a baseline line per scaling. Returns the y limits."""
    df = _size_rows(results[results["dtype"] == precision], n)
    stages = sorted(df.loc[df["family"].isin(["cuda", "triton"]), "stage"].unique())
    cats = [(st, sc) for st in stages for sc in scalings(df)]   # (stage, "") but for fp8
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(cats) + 2), 4.2))
    width = 0.38
    x = np.arange(len(cats))
    tops = [0.0]
    for j, fam in enumerate(("cuda", "triton")):
        for i, (st, sc) in enumerate(cats):
            for kind, hatch, shift in (("stage", None, 0.0), ("finding", "//", 0.0), (FAST_ACCUM, "..", 0.0)):
                d = scaled(df, sc)
                row = d[(d["family"] == fam) & (d["stage"] == st) & (d["kind"] == kind)]
                if row.empty:
                    continue
                r = row.iloc[0]
                xpos = x[i] + (j - 0.5) * width
                if kind != "stage":
                    xpos += width * 0.5
                if r["status"] == "ok" and math.isfinite(r["tflops"]):
                    tops.append(r["tflops"])
                    ax.bar(xpos, r["tflops"], width * (0.5 if kind != "stage" else 1.0), color=FAMILY_COLOR[fam],
                           hatch=hatch, edgecolor="white" if hatch is None else "black", alpha=0.6 if hatch else 1.0,
                           label=f"{fam} (finding: {r['layout']})" if kind == "finding" else
                           f"{fam} fast accum" if kind == FAST_ACCUM else fam)
                    ax.text(xpos, r["tflops"], f"{r['tflops']:.0f}", ha="center", va="bottom", fontsize=7)
                else:
                    ax.text(xpos, 0, status_label(r), ha="center", va="bottom", rotation=90, fontsize=7, color="red")
    for (fam, name), sc, (layout, style) in [(f, sc, ls) for f in (("cublas", "cuBLAS"), ("inductor", "Inductor"))
                                            for sc in scalings(df) for ls in (("NN", "-"), ("NT", "--"))]:
        d = scaled(df, sc)
        cb = d[(d["family"] == fam) & (d["layout"] == layout) & (d["status"] == "ok") & (d["kind"] == "baseline")]
        if len(cb):
            tops.append(cb["tflops"].iloc[0])
            if fam == "cublas":
                ax.text(len(cats) - 0.55, cb["tflops"].iloc[0], f"cuBLAS {layout}{tag(sc, 'baseline')}", fontsize=7,
                        ha="left", va="bottom" if layout == "NN" else "top")
            ax.axhline(cb["tflops"].iloc[0], color="black" if fam == "cublas" else FAMILY_COLOR[fam],
                       linestyle="-." if sc == "row" else style,
                       linewidth=1, label=f"{name} {precision} {layout}{tag(sc, 'baseline')}: {cb['tflops'].iloc[0]:.0f}")
    ax.set_xticks(x)
    ax.set_xticklabels([st.replace("_", "\n", 1) + (f"\n({sc})" if sc else "") for st, sc in cats], fontsize=8)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{precision} ladder at {n}^3{title_extra}")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), fontsize=8, loc="upper left")
    ax.set_xlim(-0.6, len(cats) + 0.4)            # the cuBLAS labels sit right of the last bars
    ax.set_ylim(0, max(1.0, max(tops) * 1.15))    # headroom: the cuBLAS line sits inside the frame
    ylim = ax.get_ylim()
    _save(fig, path)
    return ylim


def tflops_vs_size(results: pd.DataFrame, precision: str, path: Path):
    """Left: square sizes; right: transformer-layer shapes (lines join the M values of one weight
    shape). One colour per kernel, the same in both panels; Triton dashed, cuBLAS black. Ragged
    square sizes (4095, 1000) are hollow markers of the kernel's colour, never joined to their
    aligned neighbours: 4095 and 4096 sit at one x, and a line through both reads as a glitch."""
    df = _ok(results[results["dtype"] == precision])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [1, 1.3]})
    sq = df[df["shape_set"] == "square"]
    layer = df[df["shape_set"] == "layer"]
    cats = sorted({(m, n, k) for m, n, k in zip(layer["M"], layer["N"], layer["K"])}, key=lambda s: (s[1], s[2], s[0]))
    cat_pos = {c: i for i, c in enumerate(cats)}
    scs = df["scaling"].fillna("") if "scaling" in df else pd.Series("", index=df.index)   # fp8: tensor / row
    keys = sorted(set(zip(df["family"], df["stage"], df["layout"], df["kind"], scs)),
                  key=lambda k: (k[0] != "cublas", k[1], k[0], k[2], k[3], k[4]))  # total order: no set-order noise
    palette = plt.get_cmap("tab20").colors
    stages = sorted({k[1] for k in keys if k[0] not in ("cublas", "inductor")})
    for fam, st, lay, kind, sc in keys:
        if kind == FAST_ACCUM and fam != "cublas":   # the stages' fast accumulation: ladder sizes only, in the ladder
            continue
        if fam in ("cublas", "inductor"):
            color, style, lw = "black" if fam == "cublas" else FAMILY_COLOR[fam], "-" if lay == "NN" else ":", 2.2
            label = f"{'cuBLAS' if fam == 'cublas' else 'Inductor'} {lay}{tag(sc, kind)}"
            if kind == FAST_ACCUM or sc == "row":
                style, lw = ("-." if sc == "row" else ":"), (1.2 if kind == FAST_ACCUM else 2.2)
        else:
            color = palette[(2 * stages.index(st) + (fam == "triton")) % len(palette)]
            style, lw = ("--" if fam == "triton" else "-"), 1.1
            label = f"{fam} {st[:3]}" + (f" {lay} (finding)" if kind == "finding" else "") + tag(sc, kind)
            if kind == "finding":
                color, style = "tab:red", ":"
            if kind == FAST_ACCUM or sc == "row":
                style = ":" if kind == FAST_ACCUM else "-."
        def pick(d, fam=fam, st=st, lay=lay, kind=kind, sc=sc):
            d = scaled(d, sc)
            return d[(d["family"] == fam) & (d["stage"] == st) & (d["layout"] == lay) & (d["kind"] == kind)]
        s = pick(sq).sort_values("M")
        ragged = s["M"].map(is_ragged).astype(bool)
        if (~ragged).any():
            a1.plot(s.loc[~ragged, "M"], s.loc[~ragged, "tflops"], style, marker=".", lw=lw, label=label, color=color)
        if ragged.any():
            a1.plot(s.loc[ragged, "M"], s.loc[ragged, "tflops"], linestyle="none", marker="o", ms=5, mfc="none",
                    mec=color, label=None if (~ragged).any() else label)
        s = pick(layer)
        for (n, k), g in s.groupby(["N", "K"]):
            g = g.sort_values("M")
            a2.plot([cat_pos[(m, n, k)] for m in g["M"]], g["tflops"], style, marker=".", lw=lw, color=color)
    if sq["M"].map(is_ragged).astype(bool).any():
        a1.plot([], [], linestyle="none", marker="o", ms=5, mfc="none", mec="gray",
                label=f"ragged size (not a multiple of {RAGGED_MULTIPLE})")
    a1.set_xscale("log", base=2)
    a1.set_xlabel("M = N = K")
    a1.set_ylabel("TFLOP/s")
    a1.set_title(f"{precision}: square problems")
    a1.legend(fontsize=7, ncol=2)
    a2.set_xticks(range(len(cats)))
    a2.set_xticklabels([f"M={m}  {n}x{k}" for m, n, k in cats], fontsize=6, rotation=60, ha="right")
    a2.set_title(f"{precision}: transformer layers (M tokens x N x K weight)")
    _save(fig, path)


def _checked(g: pd.DataFrame) -> pd.DataFrame:
    """Rows whose result was checked and correct (ok, or checked but not timed)."""
    return g[[r["status"] == "ok" or checked_not_timed(r) for _, r in g.iterrows()]]


def _fp8_errors(ax, d: pd.DataFrame) -> bool:
    """fp8 panel: the K sweep at M = N = FP8_K_SWEEP_MN, a line per kernel, promoted solid and
    fast accumulation dotted, per-row scales hollow; each accumulation's bound. False if the
    run has no K sweep (the panel is then drawn like the others)."""
    d = d[(d["M"] == FP8_K_SWEEP_MN) & (d["N"] == FP8_K_SWEEP_MN)].assign(
        scaling=d["scaling"].fillna("") if "scaling" in d else "")
    if d["K"].nunique() < 3:
        return False
    for (fam, stage, kind, sc), g in d.groupby(["family", "stage", "kind", "scaling"]):
        ok, bad = _checked(g).sort_values("K"), g[g["status"] == "wrong"]
        color = FAMILY_COLOR.get(fam, "green")
        name = {"cublas": "cuBLAS", "inductor": "Inductor"}.get(fam, f"{fam} {stage[:3]}")
        ax.plot(ok["K"], ok["rel_err"], ":" if kind == FAST_ACCUM else "-", marker="o", ms=3, color=color,
                mfc="none" if sc == "row" else color, lw=1, label=f"{name}{tag(sc if sc == 'row' else '', kind)}")
        if len(bad):
            ax.scatter(bad["K"], bad["rel_err"], s=30, marker="x", color="red", label=f"{name} wrong")
    for fast, style, what in ((False, "k--", "tolerance"), (True, "k:", "tolerance, fast accum")):
        tol = d[(d["kind"] == FAST_ACCUM) == fast].dropna(subset=["tol"]).groupby("K")["tol"].max()
        if len(tol):
            ax.plot(tol.index, tol.values, style, lw=1, label=what)
    ax.set_title(f"fp8 (M = N = {FP8_K_SWEEP_MN})")
    return True


def error_vs_k(results: pd.DataFrame, path: Path):
    """Relative Frobenius error vs K per precision, with the tolerance bound (fp8: its K sweep,
    promoted and fast accumulation, _fp8_errors)."""
    df = results[results["rel_err"].notna()]
    precs = [p for p in PRECISIONS if p in set(df["dtype"])]
    fig, axes = plt.subplots(1, max(1, len(precs)), figsize=(4 * max(1, len(precs)), 3.6), squeeze=False)
    for ax, prec in zip(axes[0], precs):
        d = df[df["dtype"] == prec]
        if prec in SCALED and _fp8_errors(ax, d):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("K")
            ax.legend(fontsize=5)
            continue
        for fam, g in d.groupby("family"):
            ok = _checked(g)
            bad = g[g["status"] == "wrong"]
            ax.scatter(ok["K"], ok["rel_err"], s=10, color=FAMILY_COLOR.get(fam, "green"), label=fam, alpha=0.7)
            if len(bad):
                ax.scatter(bad["K"], bad["rel_err"], s=30, marker="x", color="red", label=f"{fam} wrong")
        tol = d.dropna(subset=["tol"]).groupby("K")["tol"].max()
        if len(tol):
            ax.plot(tol.index, tol.values, "k--", lw=1, label="tolerance")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("K")
        ax.set_title(prec)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("relative Frobenius error vs fp64")
    _save(fig, path)


def figure_names(data: Data) -> dict:
    """{section: [file names]} for this run's figures (fixed names)."""
    precs = [p for p in PRECISIONS if p in set(data.results["dtype"])]
    return {"ladder": [f"ladder_{p}_{n}.png" for p in precs for n in TABLE_SIZES],
            "size": [f"size_{p}.png" for p in precs],
            "roofline": [rooflines.name(p) for p in rooflines.precisions(data.results)],
            "error": ["error_vs_k.png"],
            "decode": [f"decode_{p}.png" for p in decode.precisions(data)]}


def draw(data: Data, root: Path, part: str | None = None) -> list:
    """Every figure of one run under root/figures/<gpu>/, or one part of them (parts()); the
    paths written."""
    fig_dir = figures_dir(data.gpu, root)
    res = data.results
    out = []
    for p in [p for p in PRECISIONS if p in set(res["dtype"]) and part in (None, p)]:
        for n in TABLE_SIZES:
            ladder(res, p, n, fig_dir / f"ladder_{p}_{n}.png")
            out.append(fig_dir / f"ladder_{p}_{n}.png")
        tflops_vs_size(res, p, fig_dir / f"size_{p}.png")
        out.append(fig_dir / f"size_{p}.png")
    if part in (None, "rooflines"):
        out += rooflines.draw(res, data.ceilings, fig_dir, data.gpu)
    if part in (None, "other"):
        error_vs_k(res, fig_dir / "error_vs_k.png")
        out.append(fig_dir / "error_vs_k.png")
        for p in decode.precisions(data):
            decode.figure(data, p, fig_dir / f"decode_{p}.png")
            out.append(fig_dir / f"decode_{p}.png")
    return out


def parts(data: Data) -> list:
    """draw()'s parts for one run, each drawable in its own process: a precision's ladders and
    size figure, the rooflines, the rest."""
    return [p for p in PRECISIONS if p in set(data.results["dtype"])] + ["rooflines", "other"]
