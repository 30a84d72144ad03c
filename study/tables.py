"""Tables from the tidy rows: the ladder per precision and size, the README headline, findings,
problems, ragged sizes, and the stages table of `python -m study stages`.

Each function takes results.Data (or the registry's pairing table) and returns a DataFrame or
text; markdown() renders a frame as a pipe table. A cell of a row that was not measured says
its status (wrong, error, skipped, unsupported, not timed), never a number or "nan".
"""
from __future__ import annotations

import math
import re

import pandas as pd

from .plan import FAST_ACCUM, FINDING_NN, is_ragged
from .registry import PRECISIONS, all_stages
from .resources import summary
from .results import Data, checked_not_timed, load, recorded, status_label
from .variants import BASELINE_FAMILIES, best_baselines, blocks, pct_best, scaled, scalings, tag

TABLE_SIZES = (4096, 8192)


def markdown(df: pd.DataFrame) -> str:
    """A pipe table (no dependency on tabulate)."""
    if df.empty:
        return "_(no rows)_\n"
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(str(v).replace("|", "/").replace("\n", " ") for v in row) + " |")
    return "\n".join(lines) + "\n"


def config_text(configs: pd.Series) -> pd.Series:
    """Triton autotune configs as the pages show them: without the unset register cap ("maxnreg: None")."""
    return configs.astype(str).str.replace(", maxnreg: None", "", regex=False)


def fmt(x, spec=".1f", empty="-") -> str:
    try:
        return empty if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)
    except (TypeError, ValueError):
        return str(x)


def _cell(r, value_fmt) -> str:
    """The cell of one measurement: its value if ok, else its status."""
    if r is None:
        return ""
    if r["status"] != "ok":
        return status_label(r)
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
    """One row per stage of the precision group at n^3 (both families), then cuBLAS (and Inductor
    where measured: then "% best baseline" columns, of the faster of the two). fp8: a block per
    scaling, its stages promoted then with fast accumulation (labels "(tensor scales)", ...)."""
    res = data.results
    df = res[(res["dtype"] == precision) & (res["M"] == n) & (res["N"] == n) & (res["K"] == n)]
    if df.empty:
        return pd.DataFrame()
    meta = _stage_meta()
    summ = summary(data.resources).set_index(["family", "stage"]) if len(data.resources) else pd.DataFrame()
    best = best_baselines(df)
    rows = []
    for scaling, kind in blocks(df):   # one block, or fp8's (scaling, promoted / fast accumulation)
        rows += _stage_rows(scaled(df, scaling), res, precision, n, meta, summ, scaling, kind, best)
    for scaling, fam, kind, layout in [(s, f, k, lay) for s in scalings(df) for f in ("cublas", "inductor")
                                       for k in ("baseline", FAST_ACCUM) for lay in ("NN", "NT")]:
        r = _pick(scaled(df, scaling), family=fam, layout=layout, kind=kind)
        if r is not None:
            pct = "100%" if (fam, kind) == ("cublas", "baseline") else _cell(r, lambda r: f"{r['pct_cublas']:.0f}%")
            name = f"{'cuBLAS' if fam == 'cublas' else 'Inductor'} {layout}{tag(scaling, kind)}"
            rows.append({"stage": name, "CUDA TFLOP/s": _cell(r, lambda r: f"{r['tflops']:.1f}"), "CUDA % cuBLAS": pct,
                         **({"CUDA % best baseline": pct_best(r, best, scaling)} if best else {}),
                         "rel. err CUDA / Triton": _cell(r, lambda r: f"{r['rel_err']:.1e}")})
    return pd.DataFrame(rows).astype(object).fillna("")


def _stage_rows(df, res, precision, n, meta, summ, scaling, kind, best) -> list:
    """The rows of one block of a ladder table: each stage, both families side by side."""
    rows = []
    for stage in sorted(df.loc[(df["kind"] == kind) & ~df["family"].isin(BASELINE_FAMILIES), "stage"].unique()):
        cells = {}
        for fam in ("cuda", "triton"):
            r = _pick(df, family=fam, stage=stage, kind=kind)
            ok = r is not None and r["status"] == "ok"
            if kind == FAST_ACCUM:   # against the same stage promoted
                prev = _pick(df, family=fam, stage=stage, kind="stage", status="ok") if ok else None
                speed = f"{r['tflops'] / prev['tflops']:.2f}x promoted" if prev is not None else ""
            else:
                prev = _previous(res, fam, stage, precision, n, n, n) if ok else None
                speed = f"{r['tflops'] / prev['tflops']:.2f}x {prev['stage'][:3]}" if prev is not None else ""
            res_txt = ""
            # Lines of code as recorded with the measurement (the file may have changed since).
            loc = meta[(fam, stage)].lines_of_code if (fam, stage) in meta else ""
            if (fam, stage) in getattr(summ, "index", []):
                s = summ.loc[(fam, stage)]
                res_txt = f"{fmt(s['registers'], '.0f')} / {fmt(s['shared_bytes'] / 1024, '.0f')} KB / {fmt(s['spill_bytes'], '.0f')}"
                if "lines_of_code" in s and pd.notna(s["lines_of_code"]):
                    loc = int(s["lines_of_code"])
            expect = expect_brief(meta[(fam, stage)].expect) if (fam, stage) in meta else ""
            cells[fam] = dict(
                tf=_cell(r, lambda r: f"{r['tflops']:.1f}"), pct=_cell(r, lambda r: f"{r['pct_cublas']:.0f}%"),
                speed=speed, err=(f"{r['rel_err']:.1e}" if checked_not_timed(r) else _cell(r, lambda r: f"{r['rel_err']:.1e}"))
                if r is not None else "",
                res=res_txt if r is not None else "", loc=loc if r is not None else "",
                expect=expect if r is not None else "", best=pct_best(r, best, scaling))
        c, t = cells["cuda"], cells["triton"]
        both_best = {"CUDA % best baseline": c["best"], "Triton % best baseline": t["best"]} if best else {}
        rows.append({
            "stage": stage + tag(scaling, kind), "CUDA TFLOP/s": c["tf"], "CUDA % cuBLAS": c["pct"],
            **{k: v for k, v in both_best.items() if k.startswith("CUDA")}, "CUDA speedup": c["speed"],
            "Triton TFLOP/s": t["tf"], "Triton % cuBLAS": t["pct"],
            **{k: v for k, v in both_best.items() if k.startswith("Triton")}, "Triton speedup": t["speed"],
            "Expect (header, first sentence; CUDA / Triton)": " / ".join(x for x in (c["expect"], t["expect"]) if x),
            "rel. err CUDA / Triton": f"{c['err']} / {t['err']}",
            "regs / smem / spill B (CUDA; Triton)": "; ".join(x for x in (c["res"], t["res"]) if x),
            "LOC CUDA / Triton": f"{c['loc']} / {t['loc']}",
        })
    return rows


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
                     "note": FINDING_NN})   # the plan's wording, also for rows recorded with an older one
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
        df = scaled(df, scalings(df)[0])   # fp8: per-tensor scales
        cb = {lay: _pick(df, family="cublas", layout=lay, kind="baseline") for lay in ("NN", "NT")}
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


def problems(data: Data) -> pd.DataFrame:
    """Wrong, failed, refused and skipped measurements: one row per kernel and status."""
    res = data.results
    bad = res[res["status"].isin(["wrong", "error", "skipped", "unsupported"])].copy()
    if bad.empty:
        return pd.DataFrame()
    bad["shape"] = [f"{m}x{n}x{k}" for m, n, k in zip(bad["M"], bad["N"], bad["K"])]
    return bad.groupby(["family", "stage", "dtype", "layout", "status"], as_index=False, sort=True).agg(
        shapes=("shape", lambda s: ", ".join(s)), first_reason=("reason", "first"))


def _ok_at(res, n: int) -> pd.DataFrame:
    return res[(res["status"] == "ok") & (res["M"] == n) & (res["N"] == n) & (res["K"] == n) & res["tflops"].notna()]


def ragged_pairs(data: Data, precision: str, near: float = 0.05) -> list:
    """[(ragged n, aligned n)]: each ragged square size measured at this precision, with the
    nearest aligned square size within `near` of it (4095 with 4096, 1000 with 1024)."""
    res = data.results[data.results["dtype"] == precision]
    sizes = sorted({int(m) for m, n, k in zip(res["M"], res["N"], res["K"]) if m == n == k})
    aligned = [n for n in sizes if not is_ragged(n)]
    pairs = []
    for r in (n for n in sizes if is_ragged(n)):
        a = min(aligned, key=lambda n: abs(n - r), default=None)
        if a is not None and abs(a - r) <= near * a:
            pairs.append((r, a))
    return pairs


def ragged_table(data: Data, precision: str) -> tuple:
    """(table, sentence) comparing ragged sizes with their aligned neighbours, per FLOP
    (TFLOP/s): cuBLAS in each layout and each family's fastest stage at the aligned size.
    The sentence states cuBLAS's largest loss; ("", empty frame) without such pairs."""
    res = data.results[data.results["dtype"] == precision]
    pairs = ragged_pairs(data, precision)
    if not pairs:
        return pd.DataFrame(), ""
    top = _ok_at(res, max(a for _, a in pairs))
    layouts = sorted(set(top.loc[top["family"] == "cublas", "layout"]))
    kernels = [("cublas", "cublas", lay, f"cuBLAS {lay}") for lay in layouts]
    for fam, name in (("cuda", "CUDA"), ("triton", "Triton")):
        st = top[(top["family"] == fam) & (top["kind"] == "stage")]
        if len(st):
            best = st.loc[st["tflops"].idxmax()]
            kernels.append((fam, best["stage"], best["layout"], f"{name} {best['stage'][:3]} (its fastest)"))
    rows, worst = [], None
    for fam, stage, lay, label in kernels:
        row = {"kernel": label}
        for r, a in pairs:
            got = [_pick(res, family=fam, stage=stage, layout=lay, kind="stage" if fam != "cublas" else "baseline",
                         M=n, N=n, K=n) for n in (r, a)]
            cell = "; ".join(f"{_cell(g, lambda g: '')} at {n}^3" for g, n in zip(got, (r, a))
                             if g is not None and g["status"] != "ok") or "-"
            if all(g is not None and g["status"] == "ok" for g in got):
                tr, ta = float(got[0]["tflops"]), float(got[1]["tflops"])
                cell = f"{tr:.1f} vs {ta:.1f} ({ta / tr:.2f}x)"
                if fam == "cublas" and (worst is None or ta / tr > worst[0]):
                    worst = (ta / tr, lay, r, a, tr, ta)
            row[f"{r}^3 vs {a}^3 TFLOP/s"] = cell
        rows.append(row)
    text = ""
    if worst is not None:
        cost, lay, r, a, tr, ta = worst
        text = (f"A ragged size costs cuBLAS {precision} up to {cost:.1f}x per FLOP here: {r}^3 ({lay}) runs at "
                f"{tr:.0f} TFLOP/s against {ta:.0f} at {a}^3.")
    return pd.DataFrame(rows), text


def _fit(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 3].rstrip() + "..."


def stages_text(table: pd.DataFrame, width: int = 120) -> str:
    """The registry's pairing table (registry.stages()) for a terminal: one line per stage
    (precisions, layout, arch, which families run here, title), then each stage's Expect, first
    sentence; no line wider than `width`. The full headers are in the stage files."""
    import textwrap

    fams = [f for f in ("cuda", "triton") if f in table]

    def both(row, key):
        return "/".join(dict.fromkeys(str(row[f"{f}_{key}"]) for f in fams if isinstance(row[f], str)))
    fmt = "{:<22} {:<10} {:<8} {:<7} {:<13} {}"
    lines, reasons = [fmt.format("stage", "precision", "layout", "arch", "runs here", "title")], {}
    for _, row in table.iterrows():
        have = [f for f in fams if isinstance(row[f], str)]
        for f in have:
            if not row[f"{f}_available"]:
                reasons.setdefault(row[f"{f}_reason"], {}).setdefault(row["stage"][:3], []).append(f)
        here = ", ".join(f for f in have if row[f"{f}_available"]) or "-"
        lines.append(_fit(fmt.format(row["stage"], both(row, "precisions"), both(row, "layout"),
                                     both(row, "arch"), here, row["title"]), width))
    lines += ["", "Expect (first sentence of the header; the full text is in the stage files):"]
    lines += [_fit(f"  {row['stage'][:3]}  {expect_brief(str(row['expect']))}", width) for _, row in table.iterrows()]
    for why, who in reasons.items():
        names = "every stage" if len(who) == len(table) else ", ".join(who)
        lines += textwrap.wrap(f"Not runnable here ({names}): {why}", width, subsequent_indent="  ")
    return "\n".join(lines) + "\n"
