"""reports/: the tidy tables in reports/data/<gpu>/, the figures, and the generated README.

Everything here reads only the tables, so `make reports` without a GPU redraws every figure and
table from reports/data/. `headline_table()` renders the ladder at 4096^3 for the project README.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from . import plots
from .registry import PRECISIONS, REPORTS_ROOT, ROOT, all_stages
from .resources import summary

REPORTS = REPORTS_ROOT
RESULT_COLUMNS = ["gpu", "family", "stage", "kind", "dtype", "layout", "M", "N", "K", "shape_set",
                  "ms_median", "ms_q1", "ms_q3", "reps", "graph", "tflops", "pct_cublas", "pct_roof",
                  "intensity", "intensity_source", "rel_err", "tol", "status", "reason", "warmup_s",
                  "sm_mhz", "power_w", "note"]
TABLE_SIZES = (4096, 8192)
PROFILE_SIZE = 4096


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

    TABLES = ("results", "ceilings", "resources", "builds", "profile", "autotune")


def data_dir(gpu: str, root: Path = REPORTS) -> Path:
    return Path(root) / "data" / gpu


def figures_dir(gpu: str, root: Path = REPORTS) -> Path:
    return Path(root) / "figures" / gpu


def write(data: Data, root: Path = REPORTS) -> Path:
    out = data_dir(data.gpu, root)
    out.mkdir(parents=True, exist_ok=True)
    for name in Data.TABLES:
        df = getattr(data, name)
        if name == "results":
            df = df[[c for c in RESULT_COLUMNS if c in df] + [c for c in df if c not in RESULT_COLUMNS]]
        df.to_csv(out / f"{name}.csv", index=False, float_format="%.6g")
    (out / "environment.json").write_text(json.dumps(data.environment, indent=1, sort_keys=True, default=str) + "\n")
    return out


def _read(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path, keep_default_na=True)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def load(directory: Path) -> Data:
    directory = Path(directory)
    frames = {name: _read(directory / f"{name}.csv") for name in Data.TABLES}
    for col in ("reason", "note"):
        if col in frames["results"]:
            frames["results"][col] = frames["results"][col].astype(object).fillna("")
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


# --------------------------------------------------------------------------------------------
# Markdown tables.

def markdown(df: pd.DataFrame) -> str:
    """A pipe table (no dependency on tabulate)."""
    if df.empty:
        return "_(no rows)_\n"
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(str(v).replace("|", "/").replace("\n", " ") for v in row) + " |")
    return "\n".join(lines) + "\n"


def _fmt(x, spec=".1f", empty="-") -> str:
    try:
        return empty if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)
    except (TypeError, ValueError):
        return str(x)


def _cell(r, value_fmt) -> str:
    """The cell of one measurement: its value if ok, else its status."""
    if r is None:
        return ""
    if r["status"] != "ok":
        return str(r["status"])
    return value_fmt(r)


def expect_brief(text: str) -> str:
    """A header's Expect as the ladder tables show it: its first sentence, parenthesised notes
    left out. The rest (the measurements behind the prediction, what was tried) stays in the
    stage header, where the tables point."""
    kept, depth = [], 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
        elif depth == 0:
            kept.append(ch)
    flat = re.sub(r"\s+", " ", "".join(kept))
    flat = re.sub(r"\s+([,;:.])", r"\1", flat)            # "x (note), y" -> "x, y"
    # A sentence ends at a period after a word and before a capital: "1.45x" and "e.g. 4100" go on.
    first = re.split(r"(?<=[^\s.])\.\s+(?=[A-Z])", flat, maxsplit=1)[0]
    return first.strip().rstrip(".:;, ")


def _stage_meta() -> dict:
    return {(s.family, s.stem): s for s in all_stages()}


def _pick(df, **kw):
    sel = df
    for k, v in kw.items():
        sel = sel[sel[k] == v]
    return None if sel.empty else sel.iloc[0]


def _previous(results, fam, stage, precision, M, N, K):
    """The nearest lower stage of the same family at the same shape (same precision first)."""
    cand = results[(results["family"] == fam) & (results["kind"] == "stage") & (results["status"] == "ok")
                   & (results["M"] == M) & (results["N"] == N) & (results["K"] == K) & (results["stage"] < stage)]
    if cand.empty:
        return None
    top = cand["stage"].max()
    cand = cand[cand["stage"] == top]
    same = cand[cand["dtype"] == precision]
    return (same if len(same) else cand).iloc[0]


def ladder_table(data: Data, precision: str, n: int) -> pd.DataFrame:
    """One row per stage of the precision group at n^3 (both families), then cuBLAS."""
    res = data.results
    df = res[(res["dtype"] == precision) & (res["M"] == n) & (res["N"] == n) & (res["K"] == n)]
    if df.empty:
        return pd.DataFrame()
    meta = _stage_meta()
    summ = summary(data.resources).set_index(["family", "stage"]) if len(data.resources) else pd.DataFrame()
    rows = []
    for stage in sorted(df.loc[df["kind"] == "stage", "stage"].unique()):
        cells = {}
        for fam in ("cuda", "triton"):
            r = _pick(df, family=fam, stage=stage, kind="stage")
            prev = _previous(res, fam, stage, precision, n, n, n) if r is not None and r["status"] == "ok" else None
            speed = f"{r['tflops'] / prev['tflops']:.2f}x {prev['stage'][:3]}" if prev is not None else ""
            res_txt = ""
            # Lines of code as recorded with the measurement (the file may have changed since).
            loc = meta[(fam, stage)].lines_of_code if (fam, stage) in meta else ""
            if (fam, stage) in getattr(summ, "index", []):
                s = summ.loc[(fam, stage)]
                res_txt = f"{_fmt(s['registers'], '.0f')} / {_fmt(s['shared_bytes'] / 1024, '.0f')} KB / {_fmt(s['spill_bytes'], '.0f')}"
                if "lines_of_code" in s and pd.notna(s["lines_of_code"]):
                    loc = int(s["lines_of_code"])
            expect = expect_brief(meta[(fam, stage)].expect) if (fam, stage) in meta else ""
            cells[fam] = dict(
                tf=_cell(r, lambda r: f"{r['tflops']:.1f}"), pct=_cell(r, lambda r: f"{r['pct_cublas']:.0f}%"),
                speed=speed, err=_cell(r, lambda r: f"{r['rel_err']:.1e}") if r is not None else "",
                res=res_txt if r is not None else "", loc=loc if r is not None else "",
                expect=expect if r is not None else "")
        c, t = cells["cuda"], cells["triton"]
        rows.append({
            "stage": stage, "CUDA TFLOP/s": c["tf"], "CUDA % cuBLAS": c["pct"], "CUDA speedup": c["speed"],
            "Triton TFLOP/s": t["tf"], "Triton % cuBLAS": t["pct"], "Triton speedup": t["speed"],
            "Expect (header, first sentence; CUDA / Triton)": " / ".join(x for x in (c["expect"], t["expect"]) if x),
            "rel. err CUDA / Triton": f"{c['err']} / {t['err']}",
            "regs / smem / spill B (CUDA; Triton)": "; ".join(x for x in (c["res"], t["res"]) if x),
            "LOC CUDA / Triton": f"{c['loc']} / {t['loc']}",
        })
    for layout in ("NN", "NT"):
        r = _pick(df, family="cublas", layout=layout)
        if r is not None:
            rows.append({"stage": f"cuBLAS {layout}", "CUDA TFLOP/s": _cell(r, lambda r: f"{r['tflops']:.1f}"),
                         "CUDA % cuBLAS": "100%", "rel. err CUDA / Triton": _cell(r, lambda r: f"{r['rel_err']:.1e}")})
    return pd.DataFrame(rows).astype(object).fillna("")


def clock_note(data: Data, precision: str, n: int) -> str:
    """The clock line above a ladder table, e.g. "SM clock 1650 MHz, board 610 W": medians over
    the rows of the precision at n^3, each the median of nvidia-smi samples during its shape's
    timed rounds; "" where none were recorded."""
    res = data.results
    sel = res[(res["dtype"] == precision) & (res["M"] == n) & (res["N"] == n) & (res["K"] == n)]
    parts = []
    for col, fmt in (("sm_mhz", "SM clock {:.0f} MHz"), ("power_w", "board {:.0f} W")):
        vals = pd.to_numeric(sel[col], errors="coerce").dropna() if col in sel else pd.Series(dtype=float)
        if len(vals):
            parts.append(fmt.format(vals.median()))
    return ", ".join(parts)


def findings_table(data: Data) -> pd.DataFrame:
    res = data.results
    f = res[res["kind"] == "finding"]
    rows = []
    for _, r in f.sort_values(["dtype", "stage", "M", "N", "K"]).iterrows():
        same = _pick(res, family=r["family"], stage=r["stage"], dtype=r["dtype"], kind="stage",
                     M=r["M"], N=r["N"], K=r["K"])
        rows.append({"kernel": f"{r['family']} {r['stage']} {r['dtype']}", "shape": f"{r['M']}x{r['N']}x{r['K']}",
                     "layout": r["layout"], "TFLOP/s": _cell(r, lambda r: f"{r['tflops']:.1f}"),
                     "% cuBLAS (same layout)": _cell(r, lambda r: f"{r['pct_cublas']:.0f}%"),
                     f"header layout {same['layout'] if same is not None else ''} TFLOP/s":
                         _cell(same, lambda r: f"{r['tflops']:.1f}") if same is not None else "",
                     "note": r["note"]})
    return pd.DataFrame(rows)


def headline_table(data: Data | None = None, n: int = 4096) -> str:
    """The project README's headline: every stage at n^3, CUDA and Triton TFLOP/s with % of cuBLAS
    at the same precision, one block per precision; markdown. Default: the newest recorded run."""
    if data is None:
        dirs = recorded()
        if not dirs:
            return "_No measurements recorded yet: run `make reports` on a GPU._\n"
        data = load(dirs[0])
    res = data.results
    rows = []
    for prec in PRECISIONS:
        df = res[(res["dtype"] == prec) & (res["M"] == n) & (res["N"] == n) & (res["K"] == n)]
        if df.empty:
            continue
        cb = {lay: _pick(df, family="cublas", layout=lay) for lay in ("NN", "NT")}
        for stage in sorted(df.loc[df["kind"] == "stage", "stage"].unique()):
            cell = {}
            for fam in ("cuda", "triton"):
                r = _pick(df, family=fam, stage=stage, kind="stage")
                cell[fam] = _cell(r, lambda r: f"{r['tflops']:.1f} ({r['pct_cublas']:.0f}%)")
            lay = _pick(df, stage=stage, kind="stage")["layout"]
            cbr = cb.get(lay)
            rows.append({"precision": prec, "stage": stage, "CUDA TFLOP/s (% cuBLAS)": cell["cuda"],
                         "Triton TFLOP/s (% cuBLAS)": cell["triton"],
                         "cuBLAS TFLOP/s": f"{_cell(cbr, lambda r: format(r['tflops'], '.1f'))} ({lay})" if cbr is not None else ""})
    env = data.environment
    head = (f"Measured on {env.get('gpu_full_name', data.gpu)} ({env.get('date_utc', 'date unknown')}, "
            f"commit {env.get('git_commit', '?')}), M = N = K = {n}; % of cuBLAS at the same precision and layout.\n\n")
    return head + markdown(pd.DataFrame(rows))


# --------------------------------------------------------------------------------------------
# Figures and README.

def figure_names(data: Data) -> dict:
    """{section: [file names]} for this run's figures (fixed names)."""
    precs = [p for p in PRECISIONS if p in set(data.results["dtype"])]
    return {"ladder": [f"ladder_{p}_{n}.png" for p in precs for n in TABLE_SIZES],
            "size": [f"size_{p}.png" for p in precs],
            "roofline": ["roofline_fp32.png", "roofline_tensor.png"], "error": ["error_vs_k.png"]}


def draw(data: Data, root: Path = REPORTS) -> list:
    fig_dir = figures_dir(data.gpu, root)
    res = data.results
    out = []
    for p in [p for p in PRECISIONS if p in set(res["dtype"])]:
        for n in TABLE_SIZES:
            plots.ladder(res, p, n, fig_dir / f"ladder_{p}_{n}.png")
            out.append(fig_dir / f"ladder_{p}_{n}.png")
        plots.tflops_vs_size(res, p, fig_dir / f"size_{p}.png")
        out.append(fig_dir / f"size_{p}.png")
    plots.roofline(res, data.ceilings, ["fp32"], PROFILE_SIZE, fig_dir / "roofline_fp32.png", "FP32 (SIMT) roofline")
    plots.roofline(res, data.ceilings, ["tf32", "fp16", "bf16"], PROFILE_SIZE, fig_dir / "roofline_tensor.png",
                   "Tensor-core roofline")
    plots.error_vs_k(res, fig_dir / "error_vs_k.png")
    out += [fig_dir / "roofline_fp32.png", fig_dir / "roofline_tensor.png", fig_dir / "error_vs_k.png"]
    return out


def _env_table(env: dict) -> str:
    keys = ["gpu_full_name", "compute_capability", "sms", "l2_mib", "driver", "cuda_torch", "nvcc", "torch",
            "triton", "python", "git_commit", "git_dirty", "date_utc", "sm_clock_max_mhz", "sm_clock_min_mhz",
            "sm_clock_median_mhz", "sm_clock_max_mhz_seen", "mode", "wall_s"]
    rows = [{"key": k, "value": env[k]} for k in keys if k in env]
    return markdown(pd.DataFrame(rows))


def _phases(env: dict) -> str:
    ph = env.get("phases_s", {})
    if not ph:
        return ""
    return "Where the run's time went (seconds): " + ", ".join(f"{k} {v:.0f}" for k, v in ph.items()) + ".\n"


def _problems(data: Data) -> pd.DataFrame:
    """Wrong, failed, refused and skipped measurements: one row per kernel and status."""
    res = data.results
    bad = res[res["status"].isin(["wrong", "error", "skipped", "unsupported"])].copy()
    if bad.empty:
        return pd.DataFrame()
    bad["shape"] = [f"{m}x{n}x{k}" for m, n, k in zip(bad["M"], bad["N"], bad["K"])]
    return bad.groupby(["family", "stage", "dtype", "layout", "status"], as_index=False, sort=True).agg(
        shapes=("shape", lambda s: ", ".join(s)), first_reason=("reason", "first"))


METHOD = """\
- Inputs: seeded `randn`, each operand scaled by K^-1/4 so every output element has variance ~1
  (never zeros); B is held as a contiguous N x K tensor `w`: stages with `Layout: NT` get
  `w.t()`, stages with `Layout: NN` a contiguous K x N copy, prepared outside the timed region.
  cuBLAS (torch.mm; FP32 with TF32 off) is timed in every layout its precision's stages use.
- Accuracy: relative Frobenius error against `torch.matmul` of float64 copies of the very inputs
  (rounded fp16/bf16 inputs for those precisions), on the GPU in the same run, from a fresh
  output filled with NaN. Tolerances come from `study/tolerance.py`; a kernel above it is
  `wrong` and never counted as fast (no % columns, no bars).
- Timing: one warm-up call (JIT compile, autotune, module load) excluded; each repeat writes a
  256 MB buffer (evicts L2) and brackets the call with CUDA events; median and quartiles.
  At a shape whose fastest call takes under 1 ms, every call under 5 ms is replayed from a
  CUDA graph of 16 calls over rotated operand copies (each call reads inputs no earlier call of
  the replay touched); one repeat = one replay / 16. One mode per shape, so no kernel is
  compared with cuBLAS across modes (the `graph` column of results.csv says which).
  Repeats fit a time budget per kernel and shape; a kernel whose call takes too long is skipped
  at bigger shapes (the reason is in the table). Within a shape, repeats of all kernels run in
  rounds, so clock drift hits every family alike; each precision runs in its own process.
- Clocks are not locked: the GPU sets its SM clock from its power draw. Interleaved, the kernels
  of a shape run near the clock their mix sets: `sm_mhz` and `power_w` are the medians of
  nvidia-smi samples (every 0.1 s) taken during the shape's timed rounds, shown above each ladder
  table. A kernel timed alone settles at its own clock, higher when it draws less power, so its
  share of cuBLAS measured alone can differ by several points (the CUDA s11 header records a
  case).
- Ladder tables: the Expect column is the first sentence of each stage header's `Expect`, its
  parenthesised notes left out; the full text, with the measurements behind the prediction, is
  in the stage files (`cuda_src/<stage>.cu`, `triton_kernels/<stage>.py`).
- Ceilings, same run: device copy bandwidth (read + write bytes), a Triton FP32 FMA-chain kernel,
  cuBLAS TF32/FP16/BF16 best of 4096^3 and 8192^3. Datasheet values are drawn dotted, labelled.
- Roofline intensity: 2MNK / DRAM bytes (read + write) counted by Nsight Compute for one call
  per kernel at 4096^3 (profile.csv); elsewhere modelled as compulsory traffic (marked hollow).
"""


def readme(datas: list, root: Path = REPORTS) -> str:
    """The generated reports/README.md: the newest run first, then any other recorded GPU."""
    out = ["# GEMM ladder: measured reports\n",
           "Generated by `make reports` (`python -m study reports`) from `reports/data/`; do not edit by hand.\n"]
    for data in datas:
        env = data.environment
        out.append(f"## {env.get('gpu_full_name', data.gpu)}: {env.get('date_utc', '')}\n")
        out.append(f"Data: [`data/{data.gpu}/`](data/{data.gpu}/) (results.csv: one row per measurement). "
                   f"{_phases(env)}\n")
        out.append("### Environment\n\n" + _env_table(env))
        if len(data.builds):
            b = data.builds
            out.append("\nBuilds (CUDA: load_inline, seconds, cached = loaded from the build cache; "
                       "Triton: first call incl. JIT compile and autotune):\n\n" + markdown(b.astype(object).fillna("")))
        if len(data.ceilings):
            c = data.ceilings[["name", "source", "precision", "value", "unit", "detail"]].copy()
            c["value"] = c["value"].map(lambda v: _fmt(v, ".2f" if v < 10 else ".1f"))
            out.append("\n### Ceilings\n\n" + markdown(c))
        figs = figure_names(data)
        for prec in [p for p in PRECISIONS if p in set(data.results["dtype"])]:
            out.append(f"\n### {prec}\n")
            for n in TABLE_SIZES:
                t = ladder_table(data, prec, n)
                if len(t):
                    clk = clock_note(data, prec, n)
                    out.append(f"\n{n}^3 (speedup: over the family's previous stage at the same shape"
                               + (f"; during the timed rounds: {clk}" if clk else "") + "):\n\n" + markdown(t))
                    out.append(f"\n![{prec} ladder {n}](figures/{data.gpu}/ladder_{prec}_{n}.png)\n")
            out.append(f"\n![{prec} TFLOP/s vs size](figures/{data.gpu}/size_{prec}.png)\n")
        f = findings_table(data)
        if len(f):
            out.append("\n### Findings (not stages)\n\n" + markdown(f))
        out.append("\n### Rooflines\n\n" + "".join(f"![{n}](figures/{data.gpu}/{n})\n" for n in figs["roofline"]))
        if len(data.profile):
            cols = [c for c in ("family", "stage", "dtype", "layout", "M", "dram_bytes", "intensity",
                                "flops_ncu_over_2mnk", "launches", "kernel_names") if c in data.profile]
            p = data.profile[cols].copy()
            if "dram_bytes" in p:
                p["dram_bytes"] = (p["dram_bytes"] / 1e6).map(lambda v: _fmt(v, ".0f"))
                p = p.rename(columns={"dram_bytes": "DRAM MB"})
            for col in ("intensity", "flops_ncu_over_2mnk"):
                if col in p:
                    p[col] = p[col].map(lambda v: _fmt(v, ".2f"))
            out.append("\nNsight Compute, one call per kernel (DRAM MB read + written):\n\n" + markdown(p))
        out.append("\n### Accuracy\n\n" + f"![error vs K](figures/{data.gpu}/error_vs_k.png)\n")
        if len(data.resources):
            s = summary(data.resources)
            out.append("\n### Resources (per stage: largest over its kernels)\n\n" + markdown(s.astype(object).fillna("")))
        if len(data.autotune):
            out.append("\n### Autotune choices\n\n" + markdown(data.autotune))
        pr = _problems(data)
        if len(pr):
            out.append("\n### Not measured, wrong or skipped\n\n" + markdown(pr))
    out.append("\n## Method\n\n" + METHOD)
    return "\n".join(out)


def render(root: Path = REPORTS, gpus: list | None = None) -> list:
    """Redraw figures and README from reports/data/ (every recorded GPU, or those named)."""
    dirs = recorded(root)
    if gpus:
        dirs = [d for d in dirs if d.name in gpus] + [d for d in dirs if d.name not in gpus]
    datas = [load(d) for d in dirs]
    written = []
    for d in datas:
        written += draw(d, root)
    (Path(root) / "README.md").write_text(readme(datas, root))
    written.append(Path(root) / "README.md")
    if datas and Path(root).resolve() == REPORTS.resolve():
        written += update_project_readme(datas[0])
    return written


HEADLINE_START, HEADLINE_END = "<!-- headline:start -->", "<!-- headline:end -->"


def update_project_readme(data: Data, path: Path = ROOT / "README.md") -> list:
    """Rewrite the generated headline block of the project README (between its markers)."""
    text = path.read_text()
    if HEADLINE_START not in text or HEADLINE_END not in text:
        return []
    head, rest = text.split(HEADLINE_START, 1)
    _, tail = rest.split(HEADLINE_END, 1)
    block = (f"{HEADLINE_START}\n<!-- generated by `make reports` from reports/data/: do not edit -->\n"
             f"{headline_table(data)}\n{HEADLINE_END}")
    path.write_text(head + block + tail)
    return [path]
