"""Pages: the generated reports/README.md of every recorded GPU, and the project README's headline.

render() is the whole read side: load each GPU's tables (results.py), draw its figures
(figures.py), lay out its tables (tables.py) into one markdown page. It reads only
reports/data/, so `make reports` without a GPU redraws everything from the recorded runs.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import decode
from .atomic import staging, swap_in, write_text
from .figures import draw, figure_names
from .plan import RAGGED_MULTIPLE, SQUARES, is_ragged
from .registry import IN_CHECKOUT, PRECISIONS, ROOT
from .resources import summary
from .results import REPORTS, Data, load, recorded
from .tables import (TABLE_SIZES, fmt, clock_note, findings_table, headline_table, ladder_table, markdown,
                     problems, ragged_table)


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
  Repeats fit a time budget per kernel and shape; a kernel whose call takes too long is checked
  but `not timed` at that shape and skipped at bigger ones (the reason is in the table). Within a
  shape, repeats of all kernels run in rounds, so clock drift hits every family alike; each
  precision runs in its own process.
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
            c["value"] = c["value"].map(lambda v: fmt(v, ".2f" if v < 10 else ".1f"))
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
            rag, finding = ragged_table(data, prec)
            if len(rag):
                out.append(f"\nRagged sizes (hollow markers above) against their aligned neighbours, TFLOP/s "
                           f"(how much more time per FLOP the ragged size takes). {finding}\n\n" + markdown(rag))
        for prec in decode.precisions(data):
            out.append(f"\n### {prec} decode sweep (x @ W.T, M tokens against nn.Linear weights, NT)\n\n"
                       "Each kernel's compulsory bytes (A and W read once, C written once) over its time, "
                       "as a share of the copy bandwidth measured in this run; per shape the fastest stage "
                       "of each family:\n\n" + markdown(decode.wins_table(data, prec))
                       + f"\n\n![{prec} decode](figures/{data.gpu}/decode_{prec}.png)\n")
        f = findings_table(data)
        if len(f):
            out.append("\n### Findings (not stages)\n\n" + markdown(f))
        out.append("\n### Rooflines\n\n" + "".join(f"![{n}](figures/{data.gpu}/{n})\n" for n in figs["roofline"]))
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
            out.append("\nNsight Compute, one call per kernel (DRAM MB read + written):\n\n" + markdown(p))
        out.append("\n### Accuracy\n\n" + f"![error vs K](figures/{data.gpu}/error_vs_k.png)\n")
        if len(data.resources):
            s = summary(data.resources)
            out.append("\n### Resources (per stage: largest over its kernels)\n\n" + markdown(s.astype(object).fillna("")))
        if len(data.autotune):
            out.append("\n### Autotune choices\n\n" + markdown(data.autotune.astype(object).fillna("")))
        pr = problems(data)
        if len(pr):
            out.append("\n### Not measured, wrong or skipped\n\n" + markdown(pr))
    ragged = ", ".join(f"{n}^3" for n in SQUARES if is_ragged(n))
    out.append("\n## Method\n\n" + METHOD.format(ragged=ragged, ragged_multiple=RAGGED_MULTIPLE))
    return "\n".join(out)


def pages(dirs: list, out: Path, gpus: list | None = None, figures: bool = True) -> list:
    """Load each recorded data directory (those of `gpus` first), draw its figures under
    out/figures/ (unless figures is False) and write out/README.md; the loaded Data, in order."""
    if gpus:
        dirs = [d for d in dirs if d.name in gpus] + [d for d in dirs if d.name not in gpus]
    datas = [load(d) for d in dirs]
    if figures:
        for d in datas:
            draw(d, out)
    (Path(out) / "README.md").write_text(readme(datas, out))
    return datas


def render(root: Path = REPORTS, gpus: list | None = None) -> list:
    """Redraw figures and README from root/data/ (every recorded GPU, those named first). They are
    drawn into a temporary directory under root and swapped in only once all are drawn, so a
    failure or an interrupt leaves the previous pages; then the project README's headline."""
    root = Path(root)
    with staging(root) as stage:
        datas = pages(recorded(root), stage, gpus)
        headline = headline_text(datas[0]) if datas and root.resolve() == REPORTS.resolve() else None
        written = swap_in(stage, root, ["figures", "README.md"])
    return written + (write_headline(*headline) if headline else [])


HEADLINE_START, HEADLINE_END = "<!-- headline:start -->", "<!-- headline:end -->"


def headline_text(data: Data, path: Path | None = None) -> tuple | None:
    """(path, new text) of the project README with its generated headline block (between its
    markers) rewritten from `data`; None outside a source checkout unless `path` is given (an
    installed package has no project README), or when the README has no markers."""
    if path is None and not IN_CHECKOUT:
        return None
    path = Path(path) if path is not None else ROOT / "README.md"
    if not path.exists():
        return None
    text = path.read_text()
    if HEADLINE_START not in text or HEADLINE_END not in text:
        return None
    head, rest = text.split(HEADLINE_START, 1)
    _, tail = rest.split(HEADLINE_END, 1)
    block = (f"{HEADLINE_START}\n<!-- generated by `make reports` from reports/data/: do not edit -->\n"
             f"{headline_table(data)}\n{HEADLINE_END}")
    return path, head + block + tail


def write_headline(path: Path, text: str) -> list:
    """The project README replaced whole (a temporary beside it, then os.replace)."""
    write_text(path, text)
    return [path]


def update_project_readme(data: Data, path: Path | None = None) -> list:
    """Rewrite the generated headline block of the project README; the paths written."""
    new = headline_text(data, path)
    return write_headline(*new) if new else []
