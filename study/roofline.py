"""Roofs and the derived columns of results: TFLOP/s, % of cuBLAS, % of the roof.

roof(P, I) = min(compute ceiling of precision P, I * copy bandwidth), with the ceilings measured
in the same run (ceilings.csv; datasheet values only where a measurement is missing). I is the
arithmetic intensity in FLOP per DRAM byte: from ncu at the profiled shape (profile.csv), else
modelled as compulsory traffic (A and B read once, C written once). Real kernels move more than
that, so a modelled I is an upper bound and the roof drawn at it the highest it could be; rows
say which source their intensity has (intensity_source).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
OUT_BYTES = {"fp8": 2}   # C's element size where it differs from the operands' (fp8 writes bf16)
# Which measured ceiling bounds each precision's compute.
COMPUTE_CEILING = {"fp32": "fp32_fma_chain", "tf32": "cublas_tf32", "fp16": "cublas_fp16", "bf16": "cublas_bf16",
                   "fp8": "cublas_fp8"}
BANDWIDTH_CEILING = "copy_bandwidth"
# NVIDIA datasheets, dense (no sparsity), keyed by a part of the GPU's name: (label, values).
# The H200 has the H100's SMs and clocks with faster memory.
DATASHEET = {
    "H100": ("H100 SXM5", {"fp32": 67.0, "tf32": 495.0, "fp16": 989.0, "bf16": 989.0, "fp8": 1979.0,
                           "bandwidth": 3.35}),
    "H200": ("H200 SXM", {"fp32": 67.0, "tf32": 495.0, "fp16": 989.0, "bf16": 989.0, "fp8": 1979.0,
                          "bandwidth": 4.8}),
}


def datasheet_entry(gpu: str) -> tuple:
    """(label, {precision or "bandwidth": value}) of the GPU's datasheet; ("", {}) if unknown."""
    for key, entry in DATASHEET.items():
        if key in gpu.upper():
            return entry
    return "", {}


def datasheet(gpu: str) -> dict:
    return datasheet_entry(gpu)[1]


def modelled_bytes(M: int, N: int, K: int, precision: str) -> int:
    """Compulsory DRAM traffic: A and B read once, C written once."""
    return ELEMENT_BYTES[precision] * (M * K + K * N) + OUT_BYTES.get(precision, ELEMENT_BYTES[precision]) * M * N


def ceiling_values(ceilings: pd.DataFrame | None, gpu: str = "") -> dict:
    """{"fp32": TFLOP/s, ..., "bandwidth": TB/s}: measured where available, else datasheet."""
    out = dict(datasheet(gpu))
    if ceilings is not None and len(ceilings):
        measured = ceilings[ceilings["source"] == "measured"]
        by_name = {k: v for k, v in zip(measured["name"], measured["value"]) if pd.notna(v)}  # failed: datasheet
        for prec, name in COMPUTE_CEILING.items():
            if name in by_name:
                out[prec] = float(by_name[name])
        if BANDWIDTH_CEILING in by_name:
            out["bandwidth"] = float(by_name[BANDWIDTH_CEILING])
    return out


def roof_tflops(precision: str, intensity: float, ceil: dict) -> float:
    compute = ceil.get(precision, math.nan)
    bw = ceil.get("bandwidth", math.nan)  # TB/s = 1e12 B/s; FLOP/B * TB/s = TFLOP/s
    return min(compute, intensity * bw)


def annotate(results: pd.DataFrame, ceilings: pd.DataFrame | None = None,
             profile: pd.DataFrame | None = None) -> pd.DataFrame:
    """Add tflops, intensity (+ its source), pct_cublas and pct_roof to tidy result rows.
    Rows whose status is not "ok" get no % columns: a wrong kernel is never counted as fast."""
    df = results.copy()
    if df.empty:
        for col in ("tflops", "intensity", "intensity_source", "pct_cublas", "pct_roof"):
            df[col] = pd.Series(dtype=float)
        return df
    fl = 2.0 * df["M"] * df["N"] * df["K"]
    df["tflops"] = fl / (df["ms_median"] * 1e9)
    df["intensity"] = fl / [modelled_bytes(m, n, k, p) for m, n, k, p in zip(df["M"], df["N"], df["K"], df["dtype"])]
    df["intensity_source"] = "modelled"
    if profile is not None and len(profile) and "dram_bytes" in profile:
        prof = profile.dropna(subset=["dram_bytes"])
        key = ["family", "stage", "dtype", "layout", "M", "N", "K"]
        merged = df[key].merge(prof[key + ["dram_bytes"]], on=key, how="left")
        have = merged["dram_bytes"].to_numpy() > 0
        df.loc[have, "intensity"] = (fl[have] / merged["dram_bytes"].to_numpy()[have])
        df.loc[have, "intensity_source"] = "ncu"
    # % of cuBLAS: against the cuBLAS baseline of the same precision, layout, shape and (fp8)
    # scaling; never against cuBLAS's fast-accumulation fp8 (kind fast_accum, a variant)
    sc = df["scaling"].fillna("").astype(str) if "scaling" in df else pd.Series("", index=df.index)
    keyed = df.assign(_scaling=sc)
    cols = ["dtype", "layout", "_scaling", "M", "N", "K"]
    base = keyed[(keyed["family"] == "cublas") & (keyed["status"] == "ok") & (keyed["kind"] == "baseline")]
    base = base.set_index(cols)["tflops"]
    base = base[~base.index.duplicated(keep="last")]
    idx = pd.MultiIndex.from_frame(keyed[cols])
    df["pct_cublas"] = 100.0 * df["tflops"].to_numpy() / base.reindex(idx).to_numpy()
    gpu = str(df["gpu"].iloc[0]) if "gpu" in df else ""
    ceil = ceiling_values(ceilings, gpu)
    df["pct_roof"] = [100.0 * t / roof_tflops(p, i, ceil) if ceil else math.nan
                      for t, p, i in zip(df["tflops"], df["dtype"], df["intensity"])]
    bad = df["status"] != "ok"
    df.loc[bad, ["pct_cublas", "pct_roof"]] = np.nan
    return df
