"""Figures across GPUs and from the clock columns (no GPU): H200 against H100, power and clock.

    compare(datas, path)     per stage and precision at 4096^3 / 8192^3 and at decode (M <= 16, the
                             median over the weights), TFLOP/s(H200) / TFLOP/s(H100), beside the
                             ratios of the two GPUs' measured copy bandwidth and cuBLAS peaks
    power_clock(data, path)  the large shapes of each tensor-core precision: TFLOP/s against board power
                             and SM clock (the power limit drawn), and energy per PFLOP by kernel
    draw(datas, root)        both, where the data has them; the paths written

power_w and sm_mhz are medians over a shape's timed rounds, in which all kernels of the shape
and layout run interleaved: a kernel's energy is that shared power over its own speed.
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from . import sourcedigest
from .figures import FAMILY_COLOR, PREC_MARKER, _save
from .registry import PRECISIONS
from .results import Data, figures_dir
from .tables import TABLE_SIZES

COMPARE = ("H200", "H100")          # (numerator, denominator): looked up in the data dirs' names
COMPARE_NAME = "compare_h200_h100.png"
POWER_NAME = "power_clock.png"
TENSOR = ("tf32", "fp16", "bf16", "fp8")
KINDS = ("stage", "baseline")
KEY = ["family", "stage", "kind", "layout", "scaling"]
DECODE_M = 16                       # decode token counts beside the squares: memory-bound shapes
DECODE_AT = f"decode M <= {DECODE_M}"


def pair(datas: list):
    """(H200 data, H100 data) when both GPUs are recorded, else None (the first dir matching each)."""
    found = [next((d for d in datas if tag in d.gpu.upper()), None) for tag in COMPARE]
    return tuple(found) if all(f is not None for f in found) else None


def _rows(data: Data, prec: str, n: int | None) -> pd.DataFrame:
    """ok rows of stages and baselines at n^3, or (n None) at the decode shapes M <= DECODE_M
    against the layer weights (fp8: per-tensor scales), scaling filled with ""."""
    r = data.results
    at = (r["M"] == n) & (r["N"] == n) & (r["K"] == n) if n else \
        (r["M"] <= DECODE_M) & (r.get("shape_set", pd.Series("", index=r.index)) == "layer")
    df = r[(r["dtype"] == prec) & at & (r["status"] == "ok") & r["tflops"].notna() & r["kind"].isin(KINDS)].copy()
    df["scaling"] = df["scaling"].fillna("") if "scaling" in df else ""
    return df[df["scaling"].isin(["", "tensor"])]


def _ceiling(data: Data, name: str) -> float:
    c = data.ceilings
    v = c[(c["name"] == name) & (c["source"] == "measured")]["value"] if len(c) else pd.Series(dtype=float)
    return float(v.iloc[0]) if len(v) else math.nan


def ceiling_ratio(datas: list, name: str) -> float:
    """A measured ceiling of the H200 over the H100's (nan if either lacks it)."""
    got = pair(datas)
    return _ceiling(got[0], name) / _ceiling(got[1], name) if got else math.nan


def left_out(datas: list) -> list | None:
    """Stages (family, stem) whose code differs between the two GPUs' runs (sourcedigest.changed):
    the comparison leaves them out; None when a run predates the digests."""
    got = pair(datas)
    return sourcedigest.changed(*got) if got else []


def ratios(datas: list) -> pd.DataFrame:
    """One row per kernel, precision and size both GPUs measured, with the same code (left_out):
    ratio = TFLOP/s(H200) / TFLOP/s(H100); `at` is "4096^3", "8192^3" or DECODE_AT (the median
    over those shapes)."""
    got = pair(datas)
    out = []
    if got is None:
        return pd.DataFrame(columns=KEY + ["dtype", "at", "ratio"])
    a, b = got
    skip = set(left_out(datas) or [])
    for prec in PRECISIONS:
        for n in (*TABLE_SIZES, None):
            m = _rows(a, prec, n).merge(_rows(b, prec, n), on=KEY + ["M", "N", "K"], suffixes=("_a", "_b"))
            m["ratio"] = m["tflops_a"] / m["tflops_b"]
            for k, r in m.groupby(KEY, sort=True)["ratio"].median().items():
                if (k[0], k[1]) in skip:
                    continue
                out.append({**dict(zip(KEY, k)), "dtype": prec, "at": f"{n}^3" if n else DECODE_AT, "ratio": r})
    return pd.DataFrame(out, columns=KEY + ["dtype", "at", "ratio"])


def provenance(datas: list) -> str:
    """Which code the two runs measured, in words: the commits, and the stages left out."""
    a, b = pair(datas)
    ca, cb = (str(d.environment.get("git_commit", "?"))[:7] for d in (a, b))
    gone = left_out(datas)
    if ca == cb and not gone:   # one commit: the same code (a dirty tree's digests would differ)
        return f"both runs at commit {ca}"
    if gone is None:
        return (f"runs at commits {ca} and {cb}, before per-stage source digests: a stage changed in between "
                "is compared as each run measured it")
    return f"runs at commits {ca} and {cb}" + (
        "; left out, changed in between: " + ", ".join(f"{f} {s[:3]}" for f, s in gone) if gone else
        ", every stage's code the same")


def compare(datas: list, path: Path) -> pd.DataFrame:
    """A panel per precision: bars per kernel (4096^3 solid, 8192^3 hatched), reference lines at the
    measured copy-bandwidth ratio and the cuBLAS-peak ratio of that precision. Returns ratios()."""
    a, b = pair(datas)
    df = ratios(datas)
    precs = [p for p in PRECISIONS if p in set(df["dtype"])]
    bw = ceiling_ratio(datas, "copy_bandwidth")
    fig, axes = plt.subplots(len(precs) or 1, 1, figsize=(12, 2.7 * max(1, len(precs))), squeeze=False)
    for ax, prec in zip(axes[:, 0], precs):
        d = df[df["dtype"] == prec]
        kernels = list(dict.fromkeys(zip(d["family"], d["stage"], d["kind"], d["layout"])))
        kernels.sort(key=lambda k: (k[0] == "cublas", k[0] == "inductor", k[0], k[1], k[3]))
        x = np.arange(len(kernels))
        for j, (at, hatch) in enumerate(zip((*[f"{n}^3" for n in TABLE_SIZES], DECODE_AT), (None, "//", ".."))):
            for i, (fam, st, kind, lay) in enumerate(kernels):
                r = d[(d["family"] == fam) & (d["stage"] == st) & (d["kind"] == kind) & (d["layout"] == lay) & (d["at"] == at)]
                if len(r):
                    ax.bar(x[i] + (j - 1) * 0.28, r["ratio"].iloc[0], 0.28, color=FAMILY_COLOR.get(fam, "gray"),
                           hatch=hatch, edgecolor="black" if hatch else "white", alpha=0.55 if hatch else 1.0,
                           label=at + (f" ({hatch})" if hatch else ""))
        peak = ceiling_ratio(datas, f"cublas_{prec}")
        for val, style, what in ((bw, "--", "copy bandwidth"), (peak, ":", f"cuBLAS {prec} peak"), (1.0, "-", "")):
            if math.isfinite(val):
                ax.axhline(val, color="dimgray" if what else "lightgray", linestyle=style, linewidth=1.2 if what else 0.8)
                if what:
                    ax.text(len(kernels) - 0.5, val, f"{what} ratio {val:.2f}", ha="right", va="bottom",
                            fontsize=7, color="dimgray")
        ax.set_xticks(x)
        ax.set_xticklabels([("cuBLAS" if f == "cublas" else "Inductor" if f == "inductor" else f"{f} {s[:3]}")
                            + f" {lay}" for f, s, _, lay in kernels], fontsize=7, rotation=30, ha="right")
        top = max([bw if math.isfinite(bw) else 1.0, 1.0] + list(d["ratio"]))
        ax.set_ylim(0, top * 1.15)
        ax.set_ylabel(f"{prec}\nTFLOP/s ratio")
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(list(dict(zip(labels, handles)).values()), list(dict(zip(labels, handles)).keys()),
                  fontsize=7, loc="lower left")
    axes[0, 0].set_title(f"{a.environment.get('gpu_full_name', a.gpu)} / {b.environment.get('gpu_full_name', b.gpu)}:"
                         " TFLOP/s ratio per kernel (colour: family; lines: ratios of the measured ceilings)\n"
                         + provenance(datas), fontsize=9)
    fig.tight_layout()   # room for each panel's rotated kernel labels
    _save(fig, path)
    return df


def power_rows(data: Data) -> pd.DataFrame:
    """ok stage/baseline rows of the tensor-core precisions at the large sizes with power, clock and
    J per PFLOP (W / (TFLOP/s) = J/TFLOP; x 1000 = J/PFLOP)."""
    r = data.results
    if "power_w" not in r or "sm_mhz" not in r:
        return pd.DataFrame()
    df = pd.concat([_rows(data, p, n) for p in TENSOR for n in TABLE_SIZES if p in set(r["dtype"])] or [r.iloc[:0]])
    for col in ("power_w", "sm_mhz"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    # Inductor's rows carry samples not of its own interleaved rounds (163-184 W at ~600 TFLOP/s on the H100,
    # against cuBLAS's 690 W): left out rather than drawn as the most efficient kernel
    df = df[df["power_w"].notna() & df["sm_mhz"].notna() & (df["family"] != "inductor")].copy()
    df["j_per_pflop"] = df["power_w"] / df["tflops"] * 1e3
    return df.sort_values(["dtype", "M", "family", "stage", "kind", "layout"])


def _num(env: dict, key: str) -> float:
    return float(pd.to_numeric(pd.Series([env.get(key)]), errors="coerce").iloc[0])


def power_clock(data: Data, path: Path) -> pd.DataFrame:
    """Top: TFLOP/s against power (the power limit dashed) and against SM clock (the maximum
    dashed), colour = family, marker = precision, hollow = 4096^3; bottom: J per PFLOP at the
    largest size, a bar per kernel grouped by precision. Returns power_rows()."""
    df = power_rows(data)
    fig = plt.figure(figsize=(12, 8.2))
    ax1, ax2, ax3 = fig.add_subplot(2, 2, 1), fig.add_subplot(2, 2, 2), fig.add_subplot(2, 1, 2)
    for ax, col, ref, what in ((ax1, "power_w", _num(data.environment, "power_limit_w"), "power limit"),
                               (ax2, "sm_mhz", _num(data.environment, "sm_clock_max_mhz"), "max SM clock")):
        for _, r in df.iterrows():
            c = FAMILY_COLOR.get(r["family"], "gray")
            ax.scatter(r[col], r["tflops"], color=c, marker=PREC_MARKER.get(r["dtype"], "o"), s=26,
                       facecolors=c if r["M"] == max(TABLE_SIZES) else "none", linewidths=1)
        if math.isfinite(ref):
            ax.axvline(ref, color="red", linestyle="--", linewidth=1)
            ax.text(ref, ax.get_ylim()[1], f" {what} {ref:.0f}", color="red", fontsize=7, ha="right", va="top",
                    rotation=90)
        ax.set_xlabel("board power, W (median over the shape's rounds)" if col == "power_w" else "SM clock, MHz")
        ax.set_ylabel("TFLOP/s")
    for fam in [f for f in FAMILY_COLOR if f in set(df["family"])]:
        ax1.scatter([], [], color=FAMILY_COLOR[fam], label=fam)
    for prec in [p for p in TENSOR if p in set(df["dtype"])]:
        ax1.scatter([], [], color="gray", marker=PREC_MARKER[prec], label=prec)
    ax1.scatter([], [], color="gray", facecolors="none", label=f"{min(TABLE_SIZES)}^3 (hollow)")
    ax1.legend(fontsize=7, loc="upper left", ncol=2)
    n = int(df["M"].max()) if len(df) else max(TABLE_SIZES)
    big = df[df["M"] == n]
    big = big.assign(order=big["dtype"].map({p: i for i, p in enumerate(TENSOR)})).sort_values(
        ["order", "family", "stage", "layout"])
    x = np.arange(len(big))
    ax3.bar(x, big["j_per_pflop"], color=[FAMILY_COLOR.get(f, "gray") for f in big["family"]])
    ax3.set_xticks(x)
    ax3.set_xticklabels([f"{p} " + ("cuBLAS" if f == "cublas" else "Inductor" if f == "inductor" else f"{f} {s[:3]}")
                         + f" {lay}" for p, f, s, lay in zip(big["dtype"], big["family"], big["stage"], big["layout"])],
                        fontsize=6, rotation=60, ha="right")
    ax3.set_ylabel("J per PFLOP")
    ax3.set_title(f"energy per operation at {n}^3 (shape's median power / kernel's TFLOP/s)", fontsize=9)
    if len(big):
        ax3.set_ylim(0, big["j_per_pflop"].max() * 1.12)
    fig.suptitle(f"{data.environment.get('gpu_full_name', data.gpu)}: speed against power and clock, "
                 f"{', '.join(f'{m}^3' for m in TABLE_SIZES)}", fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    return df


def has_power(data: Data) -> bool:
    return len(power_rows(data)) > 0


def draw(datas: list, root: Path) -> list:
    """compare_h200_h100.png under root/figures/ when both GPUs are recorded and share a kernel; each
    GPU's power_clock.png where its rows carry power and clock; the paths written."""
    out = []
    if pair(datas) is not None and len(ratios(datas)):
        path = Path(root) / "figures" / COMPARE_NAME
        compare(datas, path)
        out.append(path)
    for d in datas:
        if has_power(d):
            path = figures_dir(d.gpu, root) / POWER_NAME
            power_clock(d, path)
            out.append(path)
    return out
