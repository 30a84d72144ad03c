"""reports/README.md, the overview a first-time reader opens: findings first.

    headline(datas)   the best stage of each family against cuBLAS per precision, on each GPU
                      recorded, at 4096^3 (links to the precision pages)
    findings(datas)   one sentence each, its number computed from the recorded rows, and a link
                      to the page or figure that shows it; a finding the data cannot support
                      (a precision not recorded) is left out, never written with a placeholder
    overview(datas)   the page: headline, findings, key figures, then the list of detail pages

The detail pages themselves are pages.py's; this page stays small (under 25 KB).
"""
from __future__ import annotations

import re

import pandas as pd

from . import decode, figures_compare, modelpage
from .environment import power_averaged
from .figures import figure_names
from .pages import precisions, table, title
from .plan import FAST_ACCUM, FP8_K_SWEEP_MN
from .registry import PRECISIONS
from .results import Data
from .tables import ragged_table
from .variants import scalings

N = 4096           # the headline size
POWER_N, POWER_PREC = 8192, "bf16"
DECODE_SMALL_M = 64   # decode findings split the token counts here (memory-bound below)
FAMILIES = (("cuda", "CUDA"), ("triton", "Triton"))


def _at(data: Data, prec: str, n: int = N) -> pd.DataFrame:
    res = data.results
    df = res[(res["dtype"] == prec) & (res["M"] == n) & (res["N"] == n) & (res["K"] == n)]
    if len(df) and "scaling" in df and prec == "fp8":    # fp8: per-tensor scales, the common case
        df = df[df["scaling"].fillna("") == scalings(df)[0]]
    return df[(df["status"] == "ok") & df["tflops"].notna()]


def _best(df: pd.DataFrame, family: str, kind: str = "stage"):
    sel = df[(df["family"] == family) & (df["kind"] == kind)]
    return None if sel.empty else sel.loc[sel["tflops"].idxmax()]


def _short(data: Data) -> str:
    return title(data).replace("NVIDIA ", "")


def _page(data: Data, prec: str, text: str | None = None) -> str:
    return f"[{text or prec + ' page'}]({data.gpu}/{prec}.md)"


def headline(datas: list) -> pd.DataFrame:
    rows = []
    for data in datas:
        for prec in PRECISIONS:
            df = _at(data, prec)
            row = {"GPU": _short(data), "precision": _page(data, prec, prec) if len(df) else prec}
            cb = _best(df, "cublas", "baseline")
            row["cuBLAS TFLOP/s"] = f"{cb['tflops']:.1f} ({cb['layout']})" if cb is not None else "not measured"
            for fam, name in FAMILIES:
                r = _best(df, fam)
                row[f"best {name} stage: TFLOP/s (% cuBLAS)"] = (
                    f"{r['stage'][:3]}: {r['tflops']:.1f} ({r['pct_cublas']:.0f}%)" if r is not None
                    else "not measured" if df.empty else "no stage timed")
            rows.append(row)
    return pd.DataFrame(rows)


def _first(datas: list, fn):
    """fn(data) of the first recorded GPU (newest run first) where it says something."""
    for data in datas:
        text = fn(data)
        if text:
            return text
    return ""


def _top(data: Data, prec: str):
    """The faster family's best stage at N^3: (row, family label) or None."""
    df = _at(data, prec)
    got = [(r, name) for fam, name in FAMILIES if (r := _best(df, fam)) is not None]
    return max(got, key=lambda x: x[0]["tflops"]) if got else None


def simt(datas: list) -> str:
    parts = []
    for data in datas:
        if (t := _top(data, "fp32")) is not None:
            parts.append(f"{t[0]['pct_cublas']:.0f}% of cuBLAS FP32 on the {_short(data)} ({t[1]} {t[0]['stage'][:3]}, "
                         f"{_page(data, 'fp32', 'fp32 ladder')})")
    return f"At {N}^3 the best SIMT (fp32) stage reaches {' and '.join(parts)}." if parts else ""


def tensor(data: Data) -> str:
    parts = [f"{t[0]['pct_cublas']:.0f}% of cuBLAS {p} ({t[1]} {t[0]['stage'][:3]}, {t[0]['tflops']:.0f} TFLOP/s, "
             f"{_page(data, p, p + ' ladder')})" for p in ("tf32", "fp16", "bf16") if (t := _top(data, p)) is not None]
    parts = parts[:-2] + [" and ".join(parts[-2:])] if len(parts) > 1 else parts
    return f"At {N}^3 on the {_short(data)} the tensor-core ladder tops out at {', '.join(parts)}." if parts else ""


def decode_wins(data: Data) -> str:
    for prec in decode.precisions(data):
        w = decode.wins_table(data, prec)
        if not len(w):
            continue
        won = w[~w["fastest"].isin(["cublas", "inductor"])]
        if not len(won):
            return (f"In the {prec} decode sweep on the {_short(data)} no stage beats the baselines at any of "
                    f"{len(w)} shapes ({_page(data, prec, prec + ' decode sweep')}).")
        top = won["fastest"].value_counts()
        small = w["M"] <= DECODE_SMALL_M
        n_small, won_small = int(small.sum()), int((small & w.index.isin(won.index)).sum())
        return (f"In the {prec} decode sweep on the {_short(data)} a CUDA or Triton stage beats cuBLAS (and Inductor) "
                f"at {len(won)} of {len(w)} shapes, most often {top.index[0]} ({top.iloc[0]} shapes): {won_small} of "
                f"{n_small} at M <= {DECODE_SMALL_M}, where the weight's bytes dominate, and {len(won) - won_small} of "
                f"{len(w) - n_small} at larger M ({_page(data, prec, prec + ' decode sweep')}).")
    return ""


def fp8_speed(data: Data) -> str:
    df = _at(data, "fp8")
    got = [(r, name) for fam, name in FAMILIES if (r := _best(df, fam)) is not None]
    fast = [r for fam, _ in FAMILIES if (r := _best(df, fam, FAST_ACCUM)) is not None]
    if not got:
        return ""
    r, name = max(got, key=lambda x: x[0]["tflops"])
    f = max(fast, key=lambda x: x["tflops"]) if fast else None
    cf = df[(df["family"] == "cublas") & (df["kind"] == FAST_ACCUM) & (df["layout"] == f["layout"])] \
        if f is not None else df.iloc[:0]
    more = (f", and with fast accumulation ({f['family'].replace('cuda', 'CUDA').replace('triton', 'Triton')} "
            f"{f['stage'][:3]}) {100 * f['tflops'] / cf['tflops'].max():.0f}% of cuBLAS FP8 with fast accumulation"
            if len(cf) else "")
    return (f"The best fp8 stage ({name} {r['stage'][:3]}, per-tensor scales, promoted accumulation) reaches "
            f"{r['pct_cublas']:.0f}% of cuBLAS FP8 at {N}^3 on the {_short(data)}{more} ({_page(data, 'fp8', 'fp8 ladder')}).")


def fp8_error(data: Data) -> str:
    res = data.results
    k = res[(res["dtype"] == "fp8") & (res["M"] == FP8_K_SWEEP_MN) & (res["N"] == FP8_K_SWEEP_MN)
            & (res["family"] != "cublas") & (res["status"] == "ok") & res["rel_err"].notna()]
    if "scaling" in k:
        k = k[k["scaling"].fillna("") == scalings(k)[0]] if len(k) else k
    med = k.groupby(["kind", "K"])["rel_err"].median()
    if "stage" not in med.index.get_level_values(0) or FAST_ACCUM not in med.index.get_level_values(0):
        return ""
    pro, fast = med["stage"], med[FAST_ACCUM]
    lo, hi = int(min(pro.index)), int(max(set(pro.index) & set(fast.index)))
    return (f"fp8 error against K (M = N = {FP8_K_SWEEP_MN}, median over stages): promoted accumulation stays "
            f"flat ({pro[lo]:.1e} at K = {lo}, {pro[hi]:.1e} at K = {hi}) while fast accumulation grows to "
            f"{fast[hi]:.1e}, {fast[hi] / pro[hi]:.1f}x the promoted error at K = {hi} "
            f"([error vs K](figures/{data.gpu}/error_vs_k.png)).")


def ragged(data: Data) -> str:
    found = []
    for prec in precisions(data):
        _, text = ragged_table(data, prec)
        if (m := re.search(r"up to ([\d.]+)x", text)):
            found.append((float(m.group(1)), prec, text))
    if not found:
        return ""
    _, prec, text = max(found)
    return (text.rstrip(".").replace(" here:", f" on the {_short(data)}:")
            + f" ({_page(data, prec, prec + ' ragged sizes')}).")


def power(data: Data) -> str:
    res = data.results
    sel = res[(res["dtype"] == POWER_PREC) & (res["M"] == POWER_N) & (res["N"] == POWER_N) & (res["K"] == POWER_N)
              & (res["kind"] == "stage")]
    w = pd.to_numeric(sel.get("power_w", pd.Series(dtype=float)), errors="coerce").dropna()
    mhz = pd.to_numeric(sel.get("sm_mhz", pd.Series(dtype=float)), errors="coerce").dropna()
    limit = pd.to_numeric(pd.Series([data.environment.get("power_limit_w")]), errors="coerce").iloc[0]
    top = pd.to_numeric(pd.Series([data.environment.get("sm_clock_max_mhz")]), errors="coerce").iloc[0]
    if not len(w) or not len(mhz) or pd.isna(limit) or pd.isna(top):
        return ""
    avg, over = power_averaged(data.environment), w.median() > limit
    return (f"At {POWER_N}^3 {POWER_PREC} on the {_short(data)} the stages' timed rounds draw a median {w.median():.0f} W "
            + ("(nvidia-smi's one-second average, which also spans the lighter steps before the rounds) " if avg else
               "(instantaneous readings, which may pass the limit: the board holds it on average) " if over else "")
            + f"{'against' if over else 'of'} the {limit:.0f} W power limit, and the SM clock drops to a median "
            f"{mhz.median():.0f} MHz of its "
            f"{top:.0f} MHz maximum ({_page(data, POWER_PREC, POWER_PREC + ' ladder, clock line')}).")


def gpus(datas: list) -> str:
    """H200 against H100 at the decode shapes (16-bit stages): which stages follow the copy bandwidth."""
    df = figures_compare.ratios(datas)
    half = df[df["dtype"].isin(["fp16", "bf16"]) & (df["kind"] == "stage")]
    dec = half[half["at"] == figures_compare.DECODE_AT].groupby(["family", "stage"])["ratio"].median()
    sq = half.loc[half["at"] == f"{N}^3", "ratio"]
    cub = df.loc[df["dtype"].isin(["fp16", "bf16"]) & (df["family"] == "cublas") & (df["at"] == figures_compare.DECODE_AT),
                 "ratio"]
    bw, peak = (figures_compare.ceiling_ratio(datas, n) for n in ("copy_bandwidth", "cublas_bf16"))
    if len(dec) < 2 or not len(sq) or not len(cub) or pd.isna(bw) or pd.isna(peak):
        return ""
    (hf, hs), (lf, ls) = dec.idxmax(), dec.idxmin()
    return (f"From the H100 to the H200 (measured copy bandwidth {bw:.2f}x, cuBLAS bf16 peak {peak:.2f}x), at the "
            f"decode shapes (M <= {figures_compare.DECODE_M}, 16-bit, median over the weights) {hf} {hs[:3]} runs "
            f"{dec.max():.2f}x faster, following the bandwidth as cuBLAS does ({cub.median():.2f}x), while {lf} "
            f"{ls[:3]} gains {dec.min():.2f}x; at {N}^3 the stages gain {sq.median():.2f}x (median; "
            f"{figures_compare.provenance(datas)}) ([H200 against H100](figures/{figures_compare.COMPARE_NAME})).")


def findings(datas: list) -> list:
    out = [simt(datas)] + [_first(datas, fn) for fn in (tensor, decode_wins, fp8_speed, fp8_error, ragged, power)]
    out.append(gpus(datas))
    out += next((f for f in map(modelpage.findings, datas) if f), [])   # the newest run with a model group
    return [f for f in out if f]


def key_figures(data: Data) -> list:
    names = {n for ns in figure_names(data).values() for n in ns}
    want = [("ladder_fp32_4096.png", "fp32 ladder at 4096^3"), ("ladder_bf16_4096.png", "bf16 ladder at 4096^3"),
            ("roofline_bf16.png", "bf16 roofline, decode to 8192^3"), ("decode_fp16.png", "fp16 decode sweep"),
            ("error_vs_k.png", "error against K")]
    return [f"![{what}, {_short(data)}](figures/{data.gpu}/{n})" for n, what in want if n in names]


def overview(datas: list) -> str:
    out = ["# GEMM ladder: measured reports\n",
           "Generated by `make reports` (`python -m study reports`) from `reports/data/`; do not edit by hand. "
           "Each stage adds one optimisation to the one before it, in CUDA and in Triton; every number below is "
           "computed from the recorded rows, and each finding links to the page that shows it.\n"]
    if not datas:
        return "\n".join(out + ["_No measurements recorded yet: run `make reports` on a GPU._\n"])
    out.append(f"## Best stage of each family against cuBLAS, {N}^3\n\n"
               "% of cuBLAS at the same precision and layout; fp8 with per-tensor scales and promoted accumulation. "
               "A precision a GPU's run did not record reads \"not measured\".\n\n" + table(headline(datas)))
    out.append("## Findings\n\n" + "".join(f"- {f}\n" for f in findings(datas)))
    compare = ([f"![H200 against H100: TFLOP/s ratio per stage](figures/{figures_compare.COMPARE_NAME})"]
               if figures_compare.pair(datas) is not None and len(figures_compare.ratios(datas)) else [])
    out.append("## Key figures\n\n" + "\n\n".join(key_figures(datas[0]) + compare) + "\n")
    lines = []
    for data in datas:
        links = [_page(data, p, p) for p in precisions(data)]
        links += [f"[in a model]({data.gpu}/model.md)"] if len(data.model) else []
        links += [f"[GPU-to-GPU spread]({data.gpu}/spread.md)"] if len(data.replicas) else []
        links += [f"[autotune]({data.gpu}/autotune.md)", f"[environment, ceilings, resources]({data.gpu}/environment.md)",
                  f"[results.csv](data/{data.gpu}/results.csv)"]
        lines.append(f"- **{title(data)}** (run of {data.environment.get('date_utc', 'unknown date')}): "
                     + " · ".join(links))
    out.append("## Detail pages\n\n" + "\n".join(lines) + "\n- [Method: how everything was measured](method.md)\n")
    return "\n".join(out)
