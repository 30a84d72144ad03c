"""The tidy tables of one GPU's run, on disk in reports/data/<gpu>/: schema, write, load.

results.csv holds one row per measurement (measure.py makes them, roofline.annotate adds the
derived columns; a run over several GPUs adds node, device_index and device_uuid: distrun.py);
ceilings, resources, builds, profile, autotune and model (the kernels in a model: modelrun.py)
sit beside it, replicas.csv after a --replicate run (every GPU's rows), and environment.json
says where and when. Everything downstream (tables, figures, pages) reads
these files only, so a machine without a GPU redraws every report from them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .atomic import atomic_write, write_text
from .registry import REPORTS_ROOT

REPORTS = REPORTS_ROOT
AUTOTUNE_KEY = ["family", "stage", "precision", "shape_class"]   # one choice per shape class (Triton rows have no layout)
RESULT_COLUMNS = ["gpu", "node", "device_index", "device_uuid", "family", "stage", "kind", "dtype", "layout",
                  "scaling", "M", "N", "K", "shape_set",
                  "ms_median", "ms_q1", "ms_q3", "reps", "graph", "tflops", "pct_cublas", "pct_roof",
                  "intensity", "intensity_source", "rel_err", "tol", "status", "reason", "warmup_s",
                  "sm_mhz", "power_w", "decomposition", "note"]
# A row checked but never timed (one call over the per-call budget) that an older harness wrote
# as "ok" with reps = 0: read back as skipped, with this reason.
NOT_TIMED = "not timed: one call took longer than the per-call time budget (recorded as ok with no repeats)"


@dataclass
class Data:
    """The tables of one GPU's run (reports/data/<gpu>/)."""

    gpu: str
    results: pd.DataFrame
    ceilings: pd.DataFrame = field(default_factory=pd.DataFrame)
    resources: pd.DataFrame = field(default_factory=pd.DataFrame)
    builds: pd.DataFrame = field(default_factory=pd.DataFrame)
    profile: pd.DataFrame = field(default_factory=pd.DataFrame)
    autotune: pd.DataFrame = field(default_factory=pd.DataFrame)
    environment: dict = field(default_factory=dict)
    model: pd.DataFrame = field(default_factory=pd.DataFrame)   # the kernels in a model (inmodel.COLUMNS)
    replicas: pd.DataFrame = field(default_factory=pd.DataFrame)   # --replicate: every GPU's rows (spread.py)

    TABLES = ("results", "ceilings", "resources", "builds", "profile", "autotune", "model", "replicas")
    OPTIONAL = ("replicas",)   # written only when the run has them


def reports_root(quick: bool = False, out=None) -> Path:
    """Where a run writes: `out` if given, else reports/ (reports/quick/ for a quick run, so
    that a quick look never replaces the full study's tables)."""
    if out:
        return Path(out)
    return REPORTS / "quick" if quick else REPORTS


def data_dir(gpu: str, root: Path = REPORTS) -> Path:
    return Path(root) / "data" / gpu


def figures_dir(gpu: str, root: Path = REPORTS) -> Path:
    return Path(root) / "figures" / gpu


def write(data: Data, root: Path = REPORTS) -> Path:
    """root/data/<gpu>/: each table to a temporary beside its file, then os.replace'd, so an
    interrupt leaves each file whole (old or new), never a truncated CSV."""
    out = data_dir(data.gpu, root)
    out.mkdir(parents=True, exist_ok=True)
    for name in Data.TABLES:
        df = getattr(data, name)
        if name in Data.OPTIONAL and df.empty:
            continue
        if name in ("results", "replicas"):
            df = df[[c for c in RESULT_COLUMNS if c in df] + [c for c in df if c not in RESULT_COLUMNS]]
        atomic_write(out / f"{name}.csv", lambda tmp, df=df: df.to_csv(tmp, index=False, float_format="%.6g"))
    write_text(out / "environment.json", json.dumps(data.environment, indent=1, sort_keys=True, default=str) + "\n")
    return out


def _read(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path, keep_default_na=True)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def untimed_ok(results: pd.DataFrame) -> pd.Series:
    """Rows that say "ok" but carry no timing (reps == 0 or no median): never measured."""
    bad = pd.Series(False, index=results.index)
    if "status" not in results:
        return bad
    if "reps" in results:
        bad |= pd.to_numeric(results["reps"], errors="coerce").fillna(0) == 0
    if "ms_median" in results:
        bad |= pd.to_numeric(results["ms_median"], errors="coerce").isna()
    return (results["status"] == "ok") & bad


def not_measured_as_skipped(results: pd.DataFrame) -> pd.DataFrame:
    """A row that was not measured never reads "ok": such rows become skipped, saying why."""
    bad = untimed_ok(results)
    if bad.any():
        results = results.copy()
        results.loc[bad, "status"] = "skipped"
        results.loc[bad, "reason"] = NOT_TIMED
    return results


def checked_not_timed(row) -> bool:
    """A row whose result was checked (rel_err is valid) but whose call was never timed."""
    return row["status"] == "skipped" and str(row.get("reason", "")).startswith("not timed")


def status_label(row) -> str:
    """What a report shows instead of a number for a row that is not ok: its status
    (wrong, error, skipped, unsupported), or "not timed"."""
    return "not timed" if checked_not_timed(row) else str(row["status"])


def load(directory: Path) -> Data:
    directory = Path(directory)
    frames = {name: _read(directory / f"{name}.csv") for name in Data.TABLES}
    for name, col in (("results", "reason"), ("results", "note"), ("results", "scaling"), ("results", "decomposition"),
                      ("model", "note"), ("replicas", "reason"), ("replicas", "scaling")):
        if col in frames[name]:   # scaling: fp8's "tensor" / "row", else ""
            frames[name][col] = frames[name][col].astype(object).fillna("")
    frames["results"] = not_measured_as_skipped(frames["results"])
    env_path = directory / "environment.json"
    env = json.loads(env_path.read_text()) if env_path.exists() else {}
    return Data(gpu=directory.name, environment=env, **frames)


def recorded(root: Path = REPORTS) -> list:
    """Every recorded GPU's data directory, newest run first."""
    dirs = [d for d in (Path(root) / "data").glob("*") if (d / "results.csv").exists()]

    def date(d):
        try:
            return json.loads((d / "environment.json").read_text()).get("date_utc", "")
        except (FileNotFoundError, json.JSONDecodeError):
            return ""
    return sorted(dirs, key=date, reverse=True)
