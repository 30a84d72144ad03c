"""GPU-to-GPU spread of a --replicate run: the same kernel-shapes timed on every GPU of one model.

    spread_table(replicas)  per kernel-shape: how many GPUs timed it, min / median / max of % of
                            cuBLAS (each GPU against its own cuBLAS row) and of TFLOP/s
    autotune_differences()  the shape classes whose autotuned configuration differs between GPUs
    page(data)              reports/<gpu>/spread.md: the devices, then the table per precision at
                            the ladder sizes (tables.TABLE_SIZES), then the autotune differences

replicas.csv (results.Data.replicas) holds every GPU's rows; results.csv holds one GPU's (the
first rank's), so the ladder tables and figures stay one row per kernel-shape.
"""
from __future__ import annotations

import pandas as pd

from .results import AUTOTUNE_KEY
from .tables import TABLE_SIZES, config_text, fmt, markdown

KEY = ["dtype", "family", "stage", "kind", "layout", "scaling", "M", "N", "K"]
COLUMNS = KEY + ["gpus", "pct_min", "pct_median", "pct_max", "tflops_min", "tflops_median", "tflops_max",
                 "tflops_spread_pct"]


def spread_table(replicas: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel-shape timed ok on at least one GPU (COLUMNS); tflops_spread_pct is
    max / min - 1 in percent (cuBLAS's own spread: its % of cuBLAS is 100 on every GPU)."""
    if replicas is None or replicas.empty or "device_uuid" not in replicas:
        return pd.DataFrame(columns=COLUMNS)
    ok = replicas[replicas["status"] == "ok"]
    ok = ok.assign(scaling=ok["scaling"].astype(object).where(ok["scaling"].notna(), "").astype(str))
    out = ok.groupby(KEY, sort=True).agg(
        gpus=("device_uuid", "nunique"), pct_min=("pct_cublas", "min"), pct_median=("pct_cublas", "median"),
        pct_max=("pct_cublas", "max"), tflops_min=("tflops", "min"), tflops_median=("tflops", "median"),
        tflops_max=("tflops", "max")).reset_index()
    out["tflops_spread_pct"] = 100.0 * (out["tflops_max"] / out["tflops_min"] - 1.0)
    return out[COLUMNS]


def autotune_differences(autotune: pd.DataFrame) -> pd.DataFrame:
    """Shape classes whose autotuned configuration differs between the GPUs of a --replicate run
    (autotune.csv keeps each GPU's choice there): one row per GPU's choice."""
    key = AUTOTUNE_KEY
    if autotune is None or autotune.empty or not {"device_uuid", "config", *key} <= set(autotune):
        return pd.DataFrame(columns=key + ["device_uuid", "config"])
    at = autotune.assign(config=config_text(autotune["config"]))
    differ = at.groupby(key)["config"].transform("nunique") > 1
    return at.loc[differ, key + ["device_uuid", "config"]].sort_values(key + ["device_uuid"]).reset_index(drop=True)


def devices(replicas: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in ("node", "device_index", "device_uuid") if c in replicas]
    return replicas[cols].drop_duplicates().sort_values(cols).reset_index(drop=True)


def page(data, table=markdown) -> str:
    """reports/<gpu>/spread.md of a run with replicas (results.Data); table renders a frame."""
    rep = data.replicas
    sp = spread_table(rep)
    env = data.environment
    cmd = "python -m study reports" + (" --quick" if str(env.get("mode", "")).startswith("quick") else "") + " --replicate"
    when = f" of {env['date_utc']}" + (f", commit {str(env['git_commit'])[:12]}" if env.get("git_commit") else "") \
        if env.get("date_utc") else ""
    lines = [f"# GPU-to-GPU spread: {env.get('gpu_full_name', data.gpu)}", "",
             f"The same kernel-shapes timed on each of {len(devices(rep))} GPUs (`{cmd}`, run{when}); % of cuBLAS "
             f"is each GPU's kernel against that GPU's cuBLAS. Every size and kernel: `data/{data.gpu}/replicas.csv`.",
             "", table(devices(rep)), ""]
    for prec in dict.fromkeys(sp["dtype"]):
        at = sp[(sp["dtype"] == prec) & (sp["M"] == sp["N"]) & (sp["N"] == sp["K"]) & sp["M"].isin(TABLE_SIZES)]
        if at.empty:
            continue
        rows = pd.DataFrame({
            "kernel": [f"{f} {s} {lay}" + (f" {sc}" if sc else "") + (f" ({k})" if k not in ("stage", "baseline") else "")
                       for f, s, lay, sc, k in zip(at["family"], at["stage"], at["layout"], at["scaling"], at["kind"])],
            "size": [f"{m}^3" for m in at["M"]], "GPUs": at["gpus"],
            "% cuBLAS min / median / max": [f"{fmt(a, '.1f')} / {fmt(b, '.1f')} / {fmt(c, '.1f')}"
                                            for a, b, c in zip(at["pct_min"], at["pct_median"], at["pct_max"])],
            "TFLOP/s min / max": [f"{fmt(a, '.1f')} / {fmt(b, '.1f')}" for a, b in zip(at["tflops_min"], at["tflops_max"])],
            "spread": [f"{fmt(x, '.1f')}%" for x in at["tflops_spread_pct"]]})
        lines += [f"## {prec}", "", table(rows), ""]
    diff = autotune_differences(data.autotune)
    lines += ["## Autotune choices that differ between the GPUs", "",
              "Where the GPUs' children ended with different configurations (each tunes, or reads the "
              "host's Triton autotune cache), a kernel's spread above is partly its configuration's:" if len(diff) else "Every autotuned kernel chose the same "
              "configuration on every GPU." if "device_uuid" in data.autotune else
              "This run did not record which GPU chose each configuration.", ""]
    return "\n".join(lines + ([table(diff), ""] if len(diff) else []))
