"""The detail pages of the generated reports, one set per recorded GPU, and the method page.

    reports/<gpu>/<precision>.md   ladder tables at 4096^3 and 8192^3, ragged sizes, the size
                                   figure, the decode sweep and findings of that precision
    reports/<gpu>/autotune.md      the autotune choices of the run
    reports/<gpu>/environment.md   environment, builds, ceilings, rooflines, Nsight profile,
                                   accuracy, resources, and what was not measured
    reports/method.md              how everything was measured (METHOD)

Pages sit one directory below reports/, so their figures are ../figures/<gpu>/ and their data
../data/<gpu>/. table() is the one way a page renders a frame: a missing cell reads "-" and the
table then carries a legend line, never "nan", "None" or "<NA>".
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import decode, figures_compare, modelpage, rooflines, spread
from .plan import LAYOUT as LAYOUT_KIND
from .plan import LAYOUT_SHAPES, RAGGED_MULTIPLE, SQUARES, is_ragged
from .registry import LAYOUTS, PRECISIONS
from .environment import power_averaged
from .resources import summary
from .results import Data
from .tables import (TABLE_SIZES, clock_note, config_text, findings_table, fmt, ladder_table, markdown, problems,
                     ragged_table)

MISSING = "-"
LEGEND = f"\n{MISSING}: not measured or not applicable for this row.\n"
BAD_CELLS = ("nan", "None", "<NA>", "NaN", "NaT")


def table(df: pd.DataFrame) -> str:
    """markdown(df) with every missing cell (NaN, None, NA) shown as "-" and then a legend line."""
    if df.empty:
        return markdown(df)
    df = df.astype(object)
    gone = df.isna() | df.map(lambda v: str(v).strip() in BAD_CELLS)
    out = markdown(df.mask(gone, MISSING))
    return out + (LEGEND if gone.to_numpy().any() else "")


def precisions(data: Data) -> list:
    """The precisions this run recorded, in registry order: one detail page each."""
    return [p for p in PRECISIONS if p in set(data.results["dtype"])]


def title(data: Data) -> str:
    return data.environment.get("gpu_full_name", data.gpu)


def _env_table(env: dict) -> str:
    keys = ["gpu_full_name", "compute_capability", "sms", "l2_mib", "memory_gib", "driver", "cuda_torch", "nvcc",
            "torch", "triton", "python", "git_commit", "git_dirty", "sources_sha1", "date_utc", "power_limit_w", "power_field", "sm_clock_max_mhz",
            "sm_clock_min_mhz", "sm_clock_median_mhz", "sm_clock_max_mhz_seen", "mode", "wall_s"]
    return table(pd.DataFrame([{"key": k, "value": env[k]} for k in keys if k in env]))


def _phases(env: dict) -> str:
    ph = env.get("phases_s", {})
    if not ph:
        return ""
    out = "Where the run's time went (seconds): " + ", ".join(f"{k} {v:.0f}" for k, v in ph.items()) + ".\n"
    runs = env.get("attempts", [])
    if len(runs) > len({a["gpu"] for a in runs}):   # resumed after a time limit: every attempt's groups
        out += ("\nThe run was resumed; its attempts (per GPU: start, each precision group's seconds; the "
                "phases above are the last attempt's):\n\n" + "\n".join(
                    f"- {a['started_utc']} UTC, {a['gpu']}: " + (", ".join(f"{p} {s:.0f}" for p, s in a["groups_s"].items())
                                                               or "no group finished") for a in runs) + "\n")
    return out


def _merged_runs(env: dict) -> str:
    """The filtered runs merged into these tables since the run the environment describes, and
    the run of the model group's rows where that is another."""
    runs, model = env.get("merged_runs", []), env.get("model_run")
    out = (f"\nThe model group's rows ([model.md](model.md)) come from `{model.get('mode', '')}` at commit "
           f"{model.get('git_commit', '')} ({model.get('date_utc', '')}).\n") if model else ""
    if not runs:
        return out
    cols = ["date_utc", "mode", "git_commit", "git_dirty", "rows", "sm_clock_median_mhz", "wall_s"]
    return ("\n### Rows from later filtered runs\n\nThe environment above is the run these tables were first written by "
            f"({env.get('date_utc', 'date unknown')}). These filtered runs replaced the rows they measured "
            "(results.csv's run_utc names each row's run):\n\n"
            + table(pd.DataFrame([{c: r.get(c, "") for c in cols} for r in runs])) + out)


def later_rows(data: Data, prec: str) -> str:
    """"; N of its rows from later filtered runs (dates)" for a precision page, or ""."""
    res, when = data.results, data.environment.get("date_utc", "")
    if "run_utc" not in res:
        return ""
    runs = res.loc[(res["dtype"] == prec) & res["run_utc"].notna() & (res["run_utc"] != when), "run_utc"]
    if not len(runs):
        return ""
    return (f"; {len(runs)} of its rows from later filtered runs ({', '.join(sorted(set(runs)))}: "
            "[environment](environment.md))")


def _nav(data: Data) -> str:
    links = [f"[{p}]({p}.md)" for p in precisions(data)] + ["[autotune](autotune.md)",
                                                           "[environment](environment.md)"]
    return (f"[Overview](../README.md) · {title(data)}: " + " · ".join(links)
            + " · [method](../method.md)\n")


def decode_section(data: Data, prec: str, fig: str) -> str:
    """The decode sweep of one precision: the fastest kernel of each family per shape, its figure,
    and how the stages that choose per shape divided the work (where the run recorded it)."""
    out = (f"\n### {prec} decode sweep (x @ W.T, M tokens against nn.Linear weights, NT)\n\n"
           "Each kernel's compulsory bytes (A and W read once, C written once) over its time, as a share of "
           "the copy bandwidth measured in this run; per shape the fastest stage of each family:\n\n"
           + table(decode.wins_table(data, prec)) + f"\n\n![{prec} decode]({fig}/decode_{prec}.png)\n")
    dec = decode.decompositions_table(data, prec)
    if len(dec):
        out += (f"\n#### How the work was divided ({prec} decode)\n\nThe division each stage that chooses per "
                "shape took (data-parallel, split-K, stream-K or hybrid; its tiles and CTAs or programs), as the "
                "stage named it when measured:\n\n" + table(dec) + "\n")
    return out


def precision_page(data: Data, prec: str) -> str:
    fig = f"../figures/{data.gpu}"
    out = [f"# {prec} on {title(data)}\n", _nav(data),
           f"Run of {data.environment.get('date_utc', 'unknown date')}{later_rows(data, prec)}; data: "
           f"[`data/{data.gpu}/results.csv`](../data/{data.gpu}/results.csv) (one row per measurement).\n",
           f"### {prec} ladder"]
    for n in TABLE_SIZES:
        t = ladder_table(data, prec, n)
        if len(t):
            clk = clock_note(data, prec, n)
            out.append(f"\n{n}^3 (speedup: over the family's previous stage at the same shape"
                       + (f"; during the timed rounds: {clk}" if clk else "") + "):\n\n" + table(t))
            out.append(f"\n![{prec} ladder {n}]({fig}/ladder_{prec}_{n}.png)\n")
    out.append(f"\n### {prec} TFLOP/s against size\n\n![{prec} TFLOP/s vs size]({fig}/size_{prec}.png)\n")
    rag, finding = ragged_table(data, prec)
    if len(rag):
        out.append(f"\n### Ragged sizes\n\nRagged sizes (hollow markers above) against their aligned neighbours, "
                   f"TFLOP/s (how much more time per FLOP the ragged size takes). {finding}\n\n" + table(rag))
    out.append(f"\n### {prec} roofline\n\nEach kernel at decode and square shapes under the ceilings measured in "
               f"this run.\n\n![{prec} roofline]({fig}/{rooflines.name(prec)})\n")
    if prec in decode.precisions(data):
        out.append(decode_section(data, prec, fig))
    lay = layout_table(data, prec)
    if len(lay):
        out.append(f"\n### {prec} in each layout, {LAYOUT_SHAPES[0][0]}^3\n\nNN: A and B row-major; NT: B the "
                   "transposed view of a row-major [N, K] (x @ W.T); TN: A the transposed view of a row-major "
                   "[K, M] (dY^T @ X). TFLOP/s (% of cuBLAS in the same layout); * marks the stage's primary "
                   "layout, the one its ladder rows use.\n\n" + table(lay))
    f = findings_table(data)
    if len(f):
        f = f[f["kernel"].str.endswith(f" {prec}")]
    if len(f):
        out.append("\n### Findings (not stages)\n\n" + table(f))
    return "\n".join(out)


def layout_table(data: Data, prec: str) -> pd.DataFrame:
    """Per stage and family (and cuBLAS) at LAYOUT_SHAPES[0]: "TFLOP/s (% cuBLAS)" in each layout
    measured; empty unless some stage was measured in a layout besides its primary one."""
    M, N, K = LAYOUT_SHAPES[0]
    r = data.results
    r = r[(r["dtype"] == prec) & (r["M"] == M) & (r["N"] == N) & (r["K"] == K) & (r["status"] == "ok")
          & (r["kind"].isin(["stage", LAYOUT_KIND]) | (r["family"] == "cublas") & (r["kind"] == "baseline"))]
    if not (r["kind"] == LAYOUT_KIND).any():
        return pd.DataFrame()
    rows = {}
    for x in r.itertuples():
        key = ("cuBLAS", "") if x.family == "cublas" else (x.stage, x.family)
        cell = f"{x.tflops:.0f}" + ("" if x.family == "cublas" else f" ({x.pct_cublas:.0f}%)")
        rows.setdefault(key, {})[x.layout] = cell + ("*" if x.kind == "stage" else "")
    out = pd.DataFrame([{"stage": s, "family": f, **v} for (s, f), v in sorted(rows.items(), key=lambda kv: (
        kv[0][0] == "cuBLAS", kv[0]))])
    return out[["stage", "family"] + [lay for lay in LAYOUTS if lay in out]]


def autotune_page(data: Data) -> str:
    out = [f"# Autotune choices on {title(data)}\n", _nav(data)]
    if len(data.autotune):
        at = data.autotune.copy()
        if "config" in at:
            at["config"] = config_text(at["config"])
        out.append("The configuration each autotuned stage chose per shape class, and its time (ms):\n\n" + table(at))
    else:
        out.append("This run recorded no autotune choices (no autotuned stage was measured).\n")
    return "\n".join(out)


def environment_page(data: Data) -> str:
    env, fig = data.environment, f"../figures/{data.gpu}"
    out = [f"# {title(data)}: environment, ceilings and resources\n", _nav(data),
           f"Data: [`data/{data.gpu}/`](../data/{data.gpu}/results.csv) (results.csv: one row per measurement). "
           f"{_phases(env)}\n", "### Environment\n\n" + _env_table(env) + _merged_runs(env)]
    if len(data.builds):
        out.append("\n### Builds\n\nCUDA: load_inline, seconds, cached = loaded from the build cache; "
                   "Triton: first call incl. JIT compile and autotune.\n\n" + table(data.builds))
    if len(data.ceilings):
        c = data.ceilings[["name", "source", "precision", "value", "unit", "detail"]].copy()
        c["value"] = c["value"].map(lambda v: fmt(v, ".2f" if v < 10 else ".1f"))
        out.append("\n### Ceilings\n\n" + table(c))
    out.append("\n### Rooflines\n\n" + "".join(f"![{n}]({fig}/{n})\n" for n in map(rooflines.name, rooflines.precisions(data.results))))
    if len(data.profile):
        cols = [c for c in ("family", "stage", "dtype", "layout", "M", "dram_bytes", "intensity",
                            "flops_ncu_over_2mnk", "launches", "kernel_names") if c in data.profile]
        p = data.profile[cols].copy()
        if "dram_bytes" in p:
            p["dram_bytes"] = (p["dram_bytes"] / 1e6).map(lambda v: fmt(v, ".0f"))
            p = p.rename(columns={"dram_bytes": "DRAM MB"})
        for col in ("intensity", "flops_ncu_over_2mnk"):
            if col in p:
                p[col] = p[col].map(lambda v: fmt(v, ".2f"))
        out.append("\n### Nsight Compute profile\n\nOne call per kernel (DRAM MB read + written):\n\n" + table(p))
    if figures_compare.has_power(data):
        out.append("\n### Power and clock\n\nLarge shapes of each tensor-core precision: TFLOP/s against board power "
                   "and SM clock (medians over the shape's interleaved rounds, shared by its kernels), and energy per "
                   "PFLOP by kernel." + (" This run read nvidia-smi's power.draw, a one-second average: rounds shorter "
                   "than that (8192^3 takes ~0.6 s) also average in the lighter steps before them, so power and "
                   "energy read low there." if power_averaged(env) else "")
                   + f"\n\n![power and clock]({fig}/{figures_compare.POWER_NAME})\n")
    out.append(f"\n### Accuracy\n\n![error vs K]({fig}/error_vs_k.png)\n")
    if len(data.resources):
        out.append("\n### Resources (per stage: largest over its kernels)\n\n" + table(summary(data.resources)))
    pr = problems(data)
    if len(pr):
        out.append("\n### Not measured, wrong or skipped\n\n" + table(pr))
    return "\n".join(out)


def method_page() -> str:
    ragged = ", ".join(f"{n}^3" for n in SQUARES if is_ragged(n))
    return ("# How the study measures\n\n[Overview](README.md)\n\n## Method\n\n"
            + METHOD.format(ragged=ragged, ragged_multiple=RAGGED_MULTIPLE))


def detail_pages(datas: list) -> dict:
    """{path relative to the reports root: markdown} of every detail page."""
    out = {"method.md": method_page()}
    for data in datas:
        for prec in precisions(data):
            out[f"{data.gpu}/{prec}.md"] = precision_page(data, prec)
        out[f"{data.gpu}/autotune.md"] = autotune_page(data)
        out[f"{data.gpu}/environment.md"] = environment_page(data)
        if len(data.model):
            out[f"{data.gpu}/model.md"] = modelpage.page(data, table)
        if len(data.replicas):   # a --replicate run: the GPU-to-GPU spread
            out[f"{data.gpu}/spread.md"] = spread.page(data, table)
    return out


def write(pages: dict, out: Path) -> list:
    """Write {relative path: text} under out; the paths written."""
    written = []
    for rel, text in pages.items():
        path = Path(out) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written


METHOD = """\
- Inputs: seeded `randn`, each operand scaled by K^-1/4 so every output element has variance ~1
  (never zeros); B is held as a contiguous N x K tensor `w`. A kernel in NT gets `w.t()`, in NN
  and TN a contiguous K x N copy; in TN A is the transposed view of a contiguous K x M copy. The
  copies are made outside the timed region. A stage runs its header's first layout at every shape
  and its other layouts at 4096^3 (rows of kind `layout`). cuBLAS (torch.mm; FP32 with TF32 off)
  is timed in every layout its precision's stages use.
- Accuracy: relative Frobenius error against `torch.matmul` of float64 copies of the very inputs
  (rounded fp16/bf16 inputs for those precisions), on the GPU in the same run, from a fresh
  output filled with NaN. Tolerances come from `study/tolerance.py`; a kernel above it is
  `wrong` and never counted as fast (no % columns, no bars).
- Timing: one warm-up call (JIT compile, autotune, module load) excluded (the run first compiles
  every Triton kernel-shape in parallel processes, launching nothing, so warm-ups mostly load
  and tune); each repeat writes a
  256 MB buffer (evicts L2) and brackets the call with CUDA events; median and quartiles.
  At a shape whose fastest call takes under 1 ms, every call under 5 ms is replayed from a
  CUDA graph of 16 calls over rotated operand copies (each call reads inputs no earlier call of
  the replay touched); one repeat = one replay / 16. One mode per shape, so no kernel is
  compared with cuBLAS across modes (the `graph` column of results.csv says which).
  Repeats fit a time budget per kernel and shape; a kernel whose call takes too long is checked
  but `not timed` at that shape and skipped at bigger ones (the reason is in the table). Within a
  shape, repeats of all kernels run in rounds, each round in a new seeded order, so clock drift
  and the power headroom a lighter or heavier kernel before leaves hit every family alike (runs
  before commit 61a30e3 rotated one fixed order instead: each kernel always followed the same
  one); each precision runs in its own process.
- Decode sweep (fp16, bf16, fp8): x @ W.T with M = 1 to 2048 tokens against the nn.Linear
  weights 4096x4096, 11008x4096, 4096x11008 and 14336x4096 (N x K), for the NT kernels and the
  baselines. These calls are graph-timed over 16 rotated copies of A, W and C (a 32-117 MB
  weight does not stay in the 50 MB L2 from one call to the next), and each kernel's
  compulsory bytes (A and W read once, C written once) over its time are shown as a share of
  the copy bandwidth measured in the same run.
- fp8: inputs quantised to e4m3 from the same seeded randn (absmax scales per tensor, or per
  row of A and per column of B: both scalings are timed); the reference is float64 on the
  dequantised inputs. cuBLAS is `torch._scaled_mm` with fast accumulation off (the baseline)
  and on; each fp8 stage runs promoted (its default) and, at 4096^3/8192^3 and the K sweep,
  with fast accumulation.
- Inductor: `torch.compile(mode="max-autotune")` with Triton GEMM templates only, the GEMM a
  Triton user gets without writing a kernel, timed beside cuBLAS at a bounded shape list
  (its autotuning, about 10 s a shape, happens in the warm-up and is cached on disk); where it
  was measured the tables add "% of the faster baseline".
- Sizes: squares and transformer-layer shapes; square sizes that are not multiples of
  {ragged_multiple} ({ragged}) are ragged, partial tiles everywhere: the size figures draw them as hollow
  markers apart from the aligned sizes, and a table under each figure compares them with their
  nearest aligned size.
- Clocks are not locked: the GPU sets its SM clock from its power draw. Interleaved, the kernels
  of a shape run near the clock their mix sets: `sm_mhz` and `power_w` are the medians of
  nvidia-smi samples (every 0.1 s, by nvidia-smi's own timestamps; power is the instantaneous
  reading where the driver has one, `power_field` in the environment table: the plain reading is
  a one-second average) taken during the shape's timed rounds, shown above each ladder
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
- Two GPUs' runs: each GPU's pages come from its own run. Every stage's row in builds.csv carries
  a digest of the code it ran (its file with its headers or imported study modules, and a stage
  it hands calls to); the H200 / H100 comparison leaves out a stage whose digest differs between
  the two runs, and names the two commits where a run predates the digests.
"""
