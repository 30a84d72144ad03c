"""The "in a model" page, reports/<gpu>/model.md, from model.csv (modelrun.py's rows) alone.

    page(data)        the markdown: training against torch, one step's gradients against fp64,
                      GPT inference tokens/s, the Llama MLP block, host overhead per call, failures
    findings(data)    one-sentence findings for the overview (MLP block, training agreement)
    loss_bound(m)     the training agreement bound, computed from torch and the fp32 yardstick

The training bound, stated before any stage is looked at: two valid 16-bit GEMMs (torch's
cuBLAS, and the yardstick that sums in fp32 and rounds once) already give different loss curves,
because every rounding difference feeds back through 200 optimiser steps. A stage agrees with
torch when at every logged step |loss - torch's loss| <= LOSS_ABS + LOSS_FACTOR x the largest
torch-to-yardstick gap over the logged steps.
"""
from __future__ import annotations

import pandas as pd

from .inmodel import SLOW_HOST
from .results import Data
from .tables import fmt

LOSS_ABS = 0.05      # nats: a floor, so that a yardstick that happens to track torch closely is no trap
LOSS_FACTOR = 2.0
HOST_TARGET_US = 10.0    # a call through the public API: at most this much more host time than torch.mm
PUBLIC_PATHS = ("study.kernel", "study.kernel, c given", "study.gemm", "study.Linear", "study.use F.linear")
BY_NAME = ("torch.ops.study.gemm", "torch.ops.study.gemm_")   # the ops as compiled code calls them
TORCH, YARD = "torch:cublas", "torch:fp32_gemm"


def _v(df: pd.DataFrame) -> pd.Series:
    return df["family"] + ":" + df["stage"]


def _rows(m: pd.DataFrame, what: str) -> pd.DataFrame:
    out = m[m["what"] == what].copy()
    out["variant"] = _v(out)
    out["value"] = pd.to_numeric(out["value"], errors="coerce")
    out["size"] = pd.to_numeric(out["size"], errors="coerce")
    return out


def _name(v: str) -> str:
    return {TORCH: "torch (cuBLAS)", YARD: "torch, GEMMs in fp32 (yardstick)"}.get(v, v.replace(":", " "))


def loss_bound(m: pd.DataFrame) -> float | None:
    """LOSS_ABS + LOSS_FACTOR x max |yardstick - torch| over the logged steps; None without both."""
    loss = _rows(m, "loss").pivot_table(index="size", columns="variant", values="value")
    if TORCH not in loss or YARD not in loss:
        return None
    return LOSS_ABS + LOSS_FACTOR * float((loss[YARD] - loss[TORCH]).abs().max())


def training(m: pd.DataFrame) -> pd.DataFrame:
    """Per variant: first and last logged loss, the worst gap to torch, within the bound or not,
    GEMMs routed / fallen back, seconds, and one step's gradient checks."""
    loss = _rows(m, "loss").pivot_table(index="size", columns="variant", values="value")
    if TORCH not in loss:
        return pd.DataFrame()
    bound = loss_bound(m)
    extra = {w: _rows(m, w).set_index("variant")["value"] for w in
             ("routed_calls", "fallback_calls", "train_s", "grad_err_fp64", "gemm_err_over_bound")}
    rows = []
    for v in loss.columns:
        gap = float((loss[v] - loss[TORCH]).abs().max())
        ok = "" if v == TORCH or bound is None else ("yes" if gap <= bound else "**no**")
        g = extra["gemm_err_over_bound"].get(v)
        rows.append({"variant": _name(v), f"loss step {int(loss.index.min())}": fmt(loss[v].iloc[0], ".3f"),
                     f"loss step {int(loss.index.max())}": fmt(loss[v].iloc[-1], ".3f"),
                     "worst gap to torch": fmt(gap, ".3f") if v != TORCH else "", "within bound": ok,
                     "GEMMs routed / fallback": (f"{extra['routed_calls'].get(v, 0):.0f} / "
                                                 f"{extra['fallback_calls'].get(v, 0):.0f}"
                                                 if v in extra["routed_calls"] else ""),
                     "grad error vs fp64": fmt(extra["grad_err_fp64"].get(v), ".2e"),
                     "worst GEMM / bound": fmt(g, ".2f") + ("" if g is None or g <= 1 else " **over**"),
                     "train s": fmt(extra["train_s"].get(v), ".1f")})
    return pd.DataFrame(rows)


def _per_size(m: pd.DataFrame, what: str, higher_better: bool, digits: str) -> pd.DataFrame:
    """Variant x size of `what`, each cell "value (x.xx torch)"; wrong rows say so."""
    df = _rows(m, what)
    if df.empty:
        return df
    out = {}
    for size, g in df.groupby("size"):
        base = g.loc[g["variant"] == TORCH, "value"]
        for r in g.itertuples():
            cell = fmt(r.value, digits)
            if len(base) and r.variant != TORCH and pd.notna(r.value) and r.value > 0:
                ratio = r.value / base.iloc[0] if higher_better else base.iloc[0] / r.value
                cell += f" ({ratio:.2f}x)"
            if str(r.note).startswith("wrong"):
                cell += " wrong"
            out.setdefault(_name(r.variant), {})[int(size)] = cell
    table = pd.DataFrame(out).T
    table.columns = [str(c) for c in table.columns]
    return table.reset_index(names="variant")


def mlp_best(m: pd.DataFrame) -> pd.DataFrame:
    """Per M and family: the fastest stage of the MLP block and its speed against torch."""
    df = _rows(m, "mlp_ms")
    df = df[~df["note"].astype(str).str.startswith("wrong")]
    rows = []
    for size, g in df.groupby("size"):
        base = g.loc[g["variant"] == TORCH, "value"]
        for fam in ("cuda", "triton"):
            f = g[g["family"] == fam]
            if len(f) and len(base):
                best = f.loc[f["value"].idxmin()]
                rows.append({"M": int(size), "family": fam, "stage": best["stage"], "ms": best["value"],
                             "x torch": base.iloc[0] / best["value"]})
    return pd.DataFrame(rows)


def overhead(m: pd.DataFrame) -> pd.DataFrame:
    df = _rows(m, "host_us_over_torch")
    if df.empty:
        return df
    t = df.pivot_table(index="variant", columns="note", values="value", sort=False)
    t = t.map(lambda v: fmt(v, "+.1f"))
    return t.reset_index().rename(columns={"variant": "stage"})


def overhead_verdict(m: pd.DataFrame) -> str:
    """One sentence: the public API's slowest path against HOST_TARGET_US, then the ops called by
    name and the dispatcher's own price (the no-op's time) where recorded; "" without those rows."""
    df = _rows(m, "host_us_over_torch")
    pub = df[df["note"].isin(PUBLIC_PATHS)].dropna(subset=["value"])
    if pub.empty:
        return ""
    worst = pub.loc[pub["value"].idxmax()]
    out = (f"The public API's slowest path is {worst['note']} on {_name(worst['variant'])} at "
           f"{worst['value']:+.1f} us, {'within' if worst['value'] <= HOST_TARGET_US else '**over**'} the target")
    named = df[df["note"].isin(BY_NAME)]["value"].dropna()
    if len(named):
        noop = _rows(m, "host_us").query("note == 'torch.ops no-op'")["value"].dropna()
        price = f", {noop.min():.1f}-{noop.max():.1f} us of it torch's dispatcher (the no-op's own time)" if len(noop) else ""
        out += (f"; the operators called by name (`torch.ops.study.gemm` / `gemm_`, as compiled code without CUDA "
                f"graphs calls them) take up to {named.max():+.1f} us{price}")
    return out + "." + _host_note(m)


def _host_note(m: pd.DataFrame) -> str:
    """A sentence on the host: torch.mm's reference time, how many rows were measured again because
    the host ran slow, and which stayed slow (their figures inflated); "" for runs without tries."""
    tries = _rows(m, "host_tries").set_index("variant")["value"]
    if tries.empty:
        return ""
    ref = _rows(m, "host_reference_us").set_index("variant")["value"]
    mm = _rows(m, "host_us").query("note == 'torch.mm'").set_index("variant")["value"]
    slow = [v for v in tries.index if mm.get(v, 0.0) > SLOW_HOST * ref.get(v, float("inf"))]
    again = int((tries > 1).sum())
    out = (f" torch.mm's reference on this host was {ref.min():.1f} us a call (the fastest of its own loops and of "
           f"the rows' medians); {again} of {len(tries)} {'row was' if again == 1 else 'rows were'} measured again "
           f"because torch.mm ran more than {SLOW_HOST:g}x the reference of the time, each keeping its fastest try")
    if slow:
        out += (f"; {len(slow)} stayed slow (torch.mm {mm[slow].min():.1f}-{mm[slow].max():.1f} us: "
                f"{', '.join(_name(v) for v in slow)}), and their figures are inflated with it")
    return out + "."


def failures(m: pd.DataFrame) -> pd.DataFrame:
    f = m[m["what"] == "failed"]
    return pd.DataFrame({"variant": _v(f), "what failed": f["note"]}) if len(f) else pd.DataFrame()


def _provenance(env: dict) -> str:
    """Which run measured the page's rows: the tables' own, or a later `python -m study model`."""
    run = env.get("model_run")
    if not run:
        return (f"\nMeasured in the run that wrote the tables (commit {env.get('git_commit', 'unknown')}, "
                f"{env.get('date_utc', 'date unknown')}).\n")
    dirty = " with uncommitted changes" if run.get("git_dirty") else ""
    return (f"\nMeasured by a later `{run.get('mode', 'python -m study model')}` at commit "
            f"{run.get('git_commit', 'unknown')}{dirty} ({run.get('date_utc', 'date unknown')}), not in the run "
            f"that wrote the tables (commit {env.get('git_commit', 'unknown')}, {env.get('date_utc', 'date unknown')}).\n")


def page(data: Data, table) -> str:
    """The page's markdown; `table` is pages.table (no nan cells)."""
    m, gpu = data.model, data.environment.get("gpu_full_name", data.gpu)
    out = [f"# {gpu}: the kernels in a model\n",
           "Generated by `make reports` (or `python -m study model`) from `model.csv`. A byte-level GPT (4 layers, "
           "d_model 256, 4 heads, context 128, no biases; the repository's own text as its corpus) is trained "
           "200 steps with AdamW in bf16, once with torch's matmuls, once with every 2-D GEMM summed in fp32 and "
           "rounded once (the yardstick), and once through each 16-bit stage with `study.use(family, stage)`: "
           "every `nn.Linear` forward (NT) and its backward (dX in NN, dW in TN) run on the stage; attention's "
           "batched matmuls stay on torch.\n" + _provenance(data.environment)]
    bound = loss_bound(m)
    train = training(m)
    if len(train):
        said = (f"A stage agrees with torch when at every logged step its loss is within {LOSS_ABS} nats + "
                f"{LOSS_FACTOR:g} x the largest torch-to-yardstick gap = **{bound:.3f} nats** of torch's. "
                if bound is not None else "")
        out.append("## Training\n\n" + said + "The gradient check runs step 0 through the variant and in fp64 on "
                   "the same bf16 weights: the worst relative error over the parameters' gradients, and every GEMM "
                   "of the step against fp64 from its own inputs, as a multiple of the tolerance policy's bound "
                   "(<= 1 passes).\n\n" + table(train))
    for what, title, hb, digits in (("prefill_tokens_per_s", "Inference: prefill, tokens/s (batch x 128 tokens)",
                                     True, ".3g"),
                                    ("decode_tokens_per_s", "Inference: one decode step, tokens/s (batch tokens "
                                     "against a full KV cache)", True, ".3g"),
                                    ("mlp_ms", "Llama MLP block, ms (d_model 4096, hidden 11008, bf16; L2 flushed)",
                                     False, ".3f")):
        t = _per_size(m, what, hb, digits)
        if len(t):
            order = ("each round in a new order" if _rows(m, what)["note"].astype(str).str.contains("shuffled").any()
                     else "every round in the same order (a run before the shuffled rounds)")
            out.append(f"## {title}\n\nColumns: {'batch size' if 'tokens' in what else 'M tokens'}; in brackets the "
                       f"speed against torch (> 1 faster). CUDA-graph replays in rounds over the variants, {order}; "
                       "median of the repeats.\n\n" + table(t))
    best = mlp_best(m)
    if len(best):
        best = best.assign(ms=best["ms"].map(lambda v: fmt(v, ".3f")), **{"x torch": best["x torch"].map(
            lambda v: fmt(v, ".2f"))})
        out.append("### Fastest stage per family, MLP block\n\n" + table(best))
    ov = overhead(m)
    if len(ov):
        when = data.environment.get("overhead_timed")   # a full run since 2026-11-27: on a quiet host
        floors = "nn.Linear" in ov.columns   # recorded since the floors were added (older runs: F.linear)
        ref = "`F.linear` for study.use, `nn.Linear` for study.Linear, its drop-in" if floors else \
            "`F.linear` for the study.Linear and study.use rows"
        out.append(f"## Host overhead per call\n\nMicroseconds of host time per call more than torch's own call "
                   f"doing the same (`torch.mm`; {ref}), a 64^3 bf16 NT GEMM called back to back so that the host's "
                   f"time is what is measured{', ' + when if when else ''}. Target for a public-API call: at most {HOST_TARGET_US:g} us."
                   + (" Each figure is the median over rounds of the difference within a round (the paths run in "
                      "turn in every round). Three columns time torch's own machinery under a path, with no GEMM: "
                      "`nn.Linear` (over `F.linear`), `torch.ops no-op` (an operator with the study op's schema "
                      "and a Python implementation that returns at once: the dispatcher's price, over `torch.mm`) and "
                      "`F.linear, pass-through mode` (F.linear inside a mode that routes nothing, over `F.linear`)."
                      if floors else "") + "\n\n" + table(ov)
                   + (f"\n\n{verdict}" if (verdict := overhead_verdict(m)) else ""))
    fails = failures(m)
    if len(fails):
        out.append("## What did not run\n\n" + table(fails))
    return "\n".join(out)


def findings(data: Data) -> list:
    """One-sentence findings for the overview, each linking to the page."""
    m, link = data.model, f"[in a model]({data.gpu}/model.md)"
    if m is None or m.empty:
        return []
    out = []
    best = mlp_best(m)
    if len(best):
        top = best.loc[best.groupby("M")["x torch"].idxmax()]
        out.append("A Llama MLP block (bf16) through the fastest stage runs at "
                   + ", ".join(f"{r['x torch']:.2f}x torch at M = {r['M']} ({r['family']} {r['stage'][:3]})"
                               for _, r in top.iterrows()) + f" ({link}).")
    train, bound = training(m), loss_bound(m)
    if len(train) and bound is not None:
        stages = train[~train["variant"].str.startswith("torch")]
        ok = (stages["within bound"] == "yes").sum()
        gaps = exact_gaps(m)
        same = [v for v, g in gaps.items() if g == 0]
        drift = {v: g for v, g in gaps.items() if g > 0 and v != YARD}
        tail = (f"; {len(same)} of them give exactly torch's loss at every logged step (all but the stages that "
                f"split K), while " + ", ".join(_name(v) for v in drift) + " and the fp32 yardstick "
                f"drift up to {max(list(drift.values()) + [gaps.get(YARD, 0)]):.2f} nats"
                if same and drift else "")
        out.append(f"Training a small GPT through each 16-bit stage: {ok} of {len(stages)} stay within "
                   f"{bound:.3f} nats of torch's loss at every logged step{tail} ({link}).")
    return out


def exact_gaps(m: pd.DataFrame) -> dict:
    """{variant: largest |loss - torch's loss| over the logged steps}, as recorded (0: identical)."""
    loss = _rows(m, "loss").pivot_table(index="size", columns="variant", values="value")
    if TORCH not in loss:
        return {}
    return {v: float((loss[v] - loss[TORCH]).abs().max()) for v in loss.columns if v != TORCH}
