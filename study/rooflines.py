"""Rooflines per precision that use the whole plane: every kernel at several shapes, from decode
GEMMs in the memory-bound half (M = 1, 16 and 128 tokens against a 4096 x 4096 weight) to the
squares in the compute-bound half, under the ceilings measured in the same run (solid) and the
datasheet's (dotted). Colour says the family, the marker the shape, the text the stage number
("cB" cuBLAS, "In" Inductor). Labels are placed so that none covers another label or a point
(place_labels: a greedy search over offsets around each point, leader line when far).
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .plan import FAST_ACCUM  # noqa: E402
from .registry import PRECISIONS  # noqa: E402
from .roofline import ceiling_values, datasheet  # noqa: E402

FAMILY_COLOR = {"cuda": "#1f77b4", "triton": "#ff7f0e", "cublas": "#222222", "inductor": "#2ca02c"}
SHORT = {"cublas": "cB", "inductor": "In"}
# (M, N, K, marker, legend text): decode shapes first (memory-bound), then squares (compute-bound)
SHAPES = ((1, 4096, 4096, "<", "1 x 4096 x 4096 (decode)"), (16, 4096, 4096, "v", "16 x 4096 x 4096"), (128, 4096, 4096, "^", "128 x 4096 x 4096"),
          (1024, 1024, 1024, "s", "1024^3"), (4096, 4096, 4096, "o", "4096^3"), (8192, 8192, 8192, "D", "8192^3"))
FONT = 6.5          # label font size, points
DPI = 110


def name(precision: str) -> str:
    return f"roofline_{precision}.png"


def points(results: pd.DataFrame, precision: str) -> pd.DataFrame:
    """The ok rows drawn for one precision: stages and baselines (no findings, no fast-accumulation
    or per-row fp8 variants: one point per kernel and shape), at the SHAPES, with their marker."""
    df = results[(results["dtype"] == precision) & (results["status"] == "ok") & results["tflops"].notna()
                 & results["intensity"].notna() & results["kind"].isin(["stage", "baseline"])]
    df = df[df["kind"] != FAST_ACCUM]
    if "scaling" in df and precision == "fp8":
        df = df[df["scaling"].fillna("tensor") == "tensor"]
    marker = {(m, n, k): mk for m, n, k, mk, _ in SHAPES}
    keys = list(zip(df["M"], df["N"], df["K"]))
    df = df.loc[pd.Series([key in marker for key in keys], index=df.index, dtype=bool)].copy()
    df["marker"] = [marker[key] for key in zip(df["M"], df["N"], df["K"])]
    # one point per family, stage and shape: the primary layout (the fastest if several)
    return df.sort_values("tflops", ascending=False).drop_duplicates(["family", "stage", "M", "N", "K"])


def label(r) -> str:
    return SHORT.get(r["family"], str(r["stage"])[1:3])


def place_labels(ax, xy_px: np.ndarray, texts: list, colors: list):
    """Annotate point i (pixel coordinates xy_px[i]) with texts[i] where its box overlaps no placed
    label and no point: candidates on rings of growing radius around the point, first free wins;
    a label placed more than one ring out gets a thin leader line. Points go in the given order."""
    px = DPI / 72.0
    w_char, h = 0.62 * FONT * px, 1.25 * FONT * px
    boxes = []                                  # placed label boxes (x0, y0, x1, y1), pixels
    pts = [(x - 3.5 * px, y - 3.5 * px, x + 3.5 * px, y + 3.5 * px) for x, y in xy_px]

    def free(b):
        return all(b[2] <= o[0] or b[0] >= o[2] or b[3] <= o[1] or b[1] >= o[3] for o in boxes + pts)

    angles = np.deg2rad([30, -30, 150, -150, 90, -90, 0, 180, 60, -60, 120, -120])
    for (x, y), text, color in zip(xy_px, texts, colors):
        w = w_char * len(text)
        chosen = None
        for ring, r in enumerate((6, 11, 17, 24, 32, 42)):
            for a in angles:
                cx, cy = x + r * px * np.cos(a), y + r * px * np.sin(a)
                b = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
                if free(b):
                    chosen = (cx, cy, b, ring)
                    break
            if chosen:
                break
        if chosen is None:                      # crowded beyond every ring: stack above the point
            cy = y + 6 * px
            while not free((x - w / 2, cy - h / 2, x + w / 2, cy + h / 2)):
                cy += h
            chosen = (x, cy, (x - w / 2, cy - h / 2, x + w / 2, cy + h / 2), 9)
        cx, cy, b, ring = chosen
        boxes.append(b)
        ax.annotate(text, (x, y), xycoords="figure pixels", xytext=(cx, cy), textcoords="figure pixels",
                    fontsize=FONT, color=color, ha="center", va="center", zorder=4,
                    arrowprops=dict(arrowstyle="-", color=color, lw=0.4, alpha=0.7) if ring >= 2 else None)
    return boxes


def roofline(results: pd.DataFrame, ceilings: pd.DataFrame, precision: str, path: Path, gpu: str = ""):
    """One precision's roofline (see the module docstring) written to `path`."""
    df = points(results, precision)
    meas, ds = ceiling_values(ceilings, ""), datasheet(gpu)
    fig, ax = plt.subplots(figsize=(8, 6.0), dpi=DPI)
    fig.subplots_adjust(left=0.09, right=0.97, top=0.94, bottom=0.23)   # the legend goes below the plot
    xs = np.logspace(-0.5, 3.8, 200)
    for source, vals, style in (("measured", meas, "-"), ("datasheet", ds, ":")):
        if precision in vals and "bandwidth" in vals and math.isfinite(vals[precision]):
            ax.plot(xs, np.minimum(vals[precision], xs * vals["bandwidth"]), style, color="gray",
                    lw=1.2 if source == "measured" else 1, label=f"roof, {source}: {vals[precision]:.0f} TFLOP/s, "
                    f"{vals['bandwidth']:.2f} TB/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(xs[0], xs[-1])
    tops = [v[precision] for v in (meas, ds) if precision in v and math.isfinite(v[precision])]
    low = df["tflops"].min() if len(df) else 1.0
    ax.set_ylim(max(min(low / 2, (tops or [1e3])[0] / 20), 1e-2), max(tops + [df["tflops"].max() if len(df) else 1]) * 2)
    # cuBLAS first (placed first, nearest its point), then by shape and speed
    order = df.assign(_b=df["family"] != "cublas").sort_values(["_b", "M", "tflops"], ascending=[True, True, False])
    for _, r in order.iterrows():
        ax.scatter(r["intensity"], r["tflops"], marker=r["marker"], s=26, zorder=3,
                   color=FAMILY_COLOR.get(r["family"], "#9467bd"),
                   facecolors="none" if r.get("intensity_source") != "ncu" else None)
    fig.canvas.draw()                            # fixes the transform from data to pixels
    if len(order):
        xy = ax.transData.transform(np.column_stack([order["intensity"], order["tflops"]]))
        place_labels(ax, xy, [label(r) for _, r in order.iterrows()],
                     [FAMILY_COLOR.get(f, "#9467bd") for f in order["family"]])
    for fam, color in FAMILY_COLOR.items():
        if fam in set(df["family"]):
            ax.scatter([], [], color=color, marker="s", label={"cublas": "cuBLAS", "inductor": "Inductor"}.get(fam, fam))
    for m, n, k, mk, text in SHAPES:
        if ((df["M"] == m) & (df["N"] == n) & (df["K"] == k)).any():
            ax.scatter([], [], color="gray", marker=mk, label=text)
    if df.empty:
        ax.text(0.5, 0.5, f"no {precision} measurement at these shapes", transform=ax.transAxes, ha="center")
    src = set(df.get("intensity_source", pd.Series(dtype=str)))
    how = "ncu DRAM bytes" if src == {"ncu"} else "modelled compulsory traffic" if src <= {"modelled"} else \
        "ncu DRAM bytes (filled) / modelled (hollow)"
    ax.set_xlabel(f"arithmetic intensity, FLOP per DRAM byte ({how})")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{precision} roofline: each kernel at decode and square shapes (label = stage)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=3, frameon=False)
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def precisions(results: pd.DataFrame) -> list:
    return [p for p in PRECISIONS if p in set(results["dtype"])] if len(results) else []


def draw(results: pd.DataFrame, ceilings: pd.DataFrame, fig_dir: Path, gpu: str = "") -> list:
    fig_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for p in precisions(results):
        roofline(results, ceilings, p, fig_dir / name(p), gpu)
        out.append(fig_dir / name(p))
    return out
