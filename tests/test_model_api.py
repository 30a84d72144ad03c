"""The drop-in API and the model group: study.gemm / gemm_ (torch.library ops), study.Linear,
study.use, torch.compile(fullgraph=True), CUDA graphs, the GPT trained through a stage, and the
"in a model" page.

CPU: each check of model_checks.py runs on Triton s10 (fp16: the interpreter's bf16 dot is
wrong) under TRITON_INTERPRET=1 in a subprocess; the page is rendered from made-up rows.
GPU (marker gpu): the same checks on every fp16/bf16 stage of both families, in bf16, and those
that hold for any dtype on every fp32 stage, in fp32.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys

import pandas as pd
import pytest

import study
from conftest import HERE, ROOT, interp_unusable

CPU_CHECKS = ["ops_layouts", "no_silent_grad", "ops_fake", "linear_grads", "use_routes", "compile_fullgraph", "model_group"]
GPU_CHECKS = ["ops_layouts", "no_silent_grad", "ops_fake", "linear_grads", "use_routes", "compile_fullgraph", "cuda_graph",
              "model_group"]
HALF_STAGES = [s for s in study.all_stages() if set(s.precisions) & {"fp16", "bf16"} and s.number >= 10]
# The fp32 stages (s01-s08 of both families take NN, NT and TN): the checks that hold for any dtype.
# use_routes and model_group are 16-bit checks (they count an fp32 product as a fallback; the GPT
# trains in bf16).
FP32_STAGES = [s for s in study.all_stages() if "fp32" in s.precisions]
FP32_CHECKS = ["ops_layouts", "linear_grads", "cuda_graph", "compile_fullgraph"]


@pytest.mark.parametrize("check", CPU_CHECKS)
def test_interp(check):
    why = interp_unusable()
    if why:
        pytest.skip(why)
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.run([sys.executable, str(HERE / "interp_model.py"), check, "triton", "s10", "float16"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_linear_refusals(monkeypatch):
    """What study.Linear cannot do is refused when the module is made, naming the argument."""
    from dataclasses import replace

    from study import nn as study_nn

    with pytest.raises(TypeError, match="kernel must be a \\(family, name\\) tuple"):
        study.Linear(8, 4, kernel="cuda:s13")
    # Every stage of both families takes NT since the CUDA fp32 stages took NN, NT and TN (issue
    # 22), so the NN-only stage is CUDA s03 as its header read before (Layout: NN).
    real_find = study_nn.find
    monkeypatch.setattr(study_nn, "find", lambda family, name: (
        replace(real_find(family, name), layouts=("NN",)) if (family, name) == ("cuda", "s03")
        else real_find(family, name)))
    with pytest.raises(ValueError, match="takes layout\\(s\\) NN; study.Linear's forward x @ W.T is NT"):
        study.Linear(8, 4, kernel=("cuda", "s03"))
    monkeypatch.undo()
    with pytest.raises(ValueError, match="fp8 stage"):
        study.Linear(8, 4, kernel=("cuda", "s15"))
    with pytest.raises(ValueError, match="no cuda stage 's99'"):
        study.Linear(8, 4, kernel=("cuda", "s99"))
    layer = study.Linear(8, 4, kernel=("cuda", "s13"))   # made on the CPU (e.g. to load a state_dict)
    assert set(layer.state_dict()) == {"weight", "bias"} and "kernel=('cuda', 's13')" in repr(layer)


def test_model_options_checked():
    from study.inmodel import ModelOptions

    for bad, match in (({"steps": 0}, "steps must be a positive int"), ({"families": ("cublas",)}, "families"),
                       ({"stages": ("s09",)}, "16-bit stages"), ({"parts": ()}, "parts"),
                       ({"device": "cpu", "parts": ("mlp",)}, "only 'train' runs"), ({"dtype": "fp32"}, "dtype")):
        with pytest.raises(ValueError, match=match):
            ModelOptions(**bad)
    assert ModelOptions(stages=("13", "stream_k")).stages == ("s13", "s14")


def test_yardstick_timed_in_rounds_of_its_own():
    """The MLP block's and the GPT's timing rounds interleave torch and the stages, each round in
    a new seeded order (no variant always follows the same one); the fp32 yardstick (12 ms a
    repeat at M = 2048) runs after them, so it cannot cool the GPU between their repeats
    (modelbench.time_variants)."""
    from study.inmodel import TORCH, YARDSTICK
    from study.modelbench import repeat_order

    cuda, triton = ("cuda", "s14_stream_k"), ("triton", "s14_stream_k")
    names = [TORCH, YARDSTICK, cuda, triton]
    order = repeat_order(names, 12)
    rounds = [order[i:i + 3] for i in range(0, 36, 3)]
    assert all(sorted(r, key=str) == sorted([TORCH, cuda, triton], key=str) for r in rounds)
    assert order[36:] == [YARDSTICK] * 12
    assert len({tuple(map(str, r)) for r in rounds}) > 1           # not one fixed order
    predecessors = {order[i - 1] for i in range(1, 36) if order[i] == cuda}
    assert len(predecessors) > 1
    assert order == repeat_order(names, 12)                          # seeded: the same every run
    assert repeat_order(names, 12, seed=1) != order
    both = repeat_order([TORCH, YARDSTICK], 4, apart=())
    assert sorted(both, key=str) == sorted([TORCH, YARDSTICK] * 4, key=str)


def _rows() -> pd.DataFrame:
    """Model rows as modelrun writes them: torch, the yardstick, two stages (one off the bound),
    inference, MLP, overhead and a failure."""
    rows = []
    for v, drift in (("torch:cublas", 0.0), ("torch:fp32_gemm", 0.01), ("cuda:s13_warp_specialized", 0.015),
                     ("triton:s12_tma_wgmma", 0.2)):
        fam, stage = v.split(":")
        for step in (0, 10, 19):
            rows.append((fam, stage, "loss", step, 5.5 - 0.1 * step + drift * step / 19, "nats", ""))
        rows += [(fam, stage, "grad_err_fp64", 0, 3e-3, "rel", ""), (fam, stage, "gemm_err_over_bound", 0, 0.4, "x", ""),
                 (fam, stage, "train_s", 20, 4.0, "s", "")]
        if fam != "torch":
            rows += [(fam, stage, "routed_calls", 20, 580, "calls", ""), (fam, stage, "fallback_calls", 20, 0, "calls", "")]
        for M, ms in ((16, 0.1), (2048, 1.0)):
            rows.append((fam, stage, "mlp_ms", M, ms * {"cuda": 0.9, "triton": 1.1}.get(fam, 1.0), "ms", "graph"))
        rows.append((fam, stage, "decode_tokens_per_s", 16, 1e5, "tokens/s", "graph"))
        if fam != "torch":
            rows += [(fam, stage, "host_us_over_torch", 64, 3.5, "us per call", "study.kernel"),
                     (fam, stage, "host_us_over_torch", 64, 1.5, "us per call", "launch only"),
                     (fam, stage, "host_us_over_torch", 64, {"cuda": 4.5, "triton": 12.0}[fam], "us per call",
                      "study.use F.linear"),
                     (fam, stage, "host_us_over_torch", 64, 11.0, "us per call", "torch.ops.study.gemm"),
                     (fam, stage, "host_us", 64, {"cuda": 3.0, "triton": 4.0}[fam], "us per call", "torch.ops no-op")]
    rows.append(("triton", "s14_stream_k", "failed", math.nan, math.nan, "", "train: ValueError: refused"))
    df = pd.DataFrame(rows, columns=["family", "stage", "what", "size", "value", "unit", "note"])
    df.insert(0, "gpu", "NVIDIA_H100_80GB_HBM3")
    return df


def test_model_page_from_rows():
    from study import modelpage, pages
    from study.results import Data

    m = _rows()
    assert modelpage.loss_bound(m) == pytest.approx(modelpage.LOSS_ABS + modelpage.LOSS_FACTOR * 0.01)
    train = modelpage.training(m).set_index("variant")
    assert train.loc["cuda s13_warp_specialized", "within bound"] == "yes"
    assert train.loc["triton s12_tma_wgmma", "within bound"] == "**no**"
    data = Data("NVIDIA_H100_80GB_HBM3", pd.DataFrame(), model=m, environment={"gpu_full_name": "NVIDIA H100"})
    text = modelpage.page(data, pages.table)
    for want in ("## Training", "## Inference: one decode step", "## Llama MLP block", "### Fastest stage per family",
                 "## Host overhead per call", "## What did not run", "train: ValueError: refused", "(1.11x)"):
        assert want in text, want
    assert not any(bad in text for bad in pages.BAD_CELLS if bad != "-"), text
    # _rows' notes say "graph": timed before the shuffled rounds, and the captions say so
    assert "every round in the same order" in text and "each round in a new order" not in text
    shuffled = m.assign(note=m["note"].where(m["note"] != "graph", "graph, shuffled rounds"))
    text2 = modelpage.page(Data("NVIDIA_H100_80GB_HBM3", pd.DataFrame(), model=shuffled,
                                environment={"gpu_full_name": "NVIDIA H100"}), pages.table)
    assert "each round in a new order" in text2 and "every round in the same order" not in text2
    assert "quiet host" not in text, "a run that does not say how its overhead was timed claims nothing"
    quiet = Data("NVIDIA_H100_80GB_HBM3", pd.DataFrame(), model=m, environment={
        "gpu_full_name": "NVIDIA H100", "overhead_timed": "after every GPU's other work, on a quiet host"})
    assert "is measured, after every GPU's other work, on a quiet host. Target" in modelpage.page(quiet, pages.table)
    best = modelpage.mlp_best(m)
    assert set(best["family"]) == {"cuda", "triton"} and (best[best["family"] == "cuda"]["x torch"] > 1).all()
    assert ("The public API's slowest path is study.use F.linear on triton s12_tma_wgmma at +12.0 us, **over** "
            "the target; the operators called by name") in text
    assert "take up to +11.0 us, 3.0-4.0 us of it torch's dispatcher (the no-op's own time)." in text
    fast = m[~((m["what"] == "host_us_over_torch") & (m["value"] > 10))]
    assert "at +4.5 us, within the target" in modelpage.overhead_verdict(fast)
    assert "reference on this host" not in text, "a run that recorded no tries says nothing about them"
    assert modelpage.overhead_verdict(m[m["what"] != "host_us_over_torch"]) == ""
    found = modelpage.findings(data)
    assert found[0].startswith("A Llama MLP block (bf16) through the fastest stage runs at 1.11x torch at M = 16")
    assert "1 of 2 stay within" in found[1] and "(NVIDIA_H100_80GB_HBM3/model.md)" in found[1]


def test_overhead_verdict_names_a_slow_host():
    """The overhead sentence says how many rows were measured again because torch.mm ran slow
    against the host's reference, and names any row that stayed slow."""
    from study import modelpage

    rows = []
    for stage, tries, mm in (("s10_half_wmma", 1, 15.5), ("s11_mma_pipeline", 2, 16.0), ("s12_tma_wgmma", 2, 26.0)):
        rows += [("cuda", stage, "host_us_over_torch", 64, 3.0, "us per call", "study.gemm"),
                 ("cuda", stage, "host_us", 64, mm, "us per call", "torch.mm"),
                 ("cuda", stage, "host_tries", 64, tries, "measurements", "torch.mm over its reference"),
                 ("cuda", stage, "host_reference_us", 64, 15.0, "us per call", "torch.mm alone")]
    m = pd.DataFrame(rows, columns=["family", "stage", "what", "size", "value", "unit", "note"])
    m.insert(0, "gpu", "NVIDIA_H100_80GB_HBM3")
    got = modelpage.overhead_verdict(m)
    assert ("torch.mm's reference on this host was 15.0 us a call (the fastest of its own loops and of the rows' "
            "medians); 2 of 3 rows were measured again because torch.mm ran more than 1.25x the reference of the "
            "time, each keeping its fastest try; 1 stayed slow (torch.mm 26.0-26.0 us: cuda s12_tma_wgmma), and "
            "their figures are inflated with it.") in got, got


def test_measure_steady_keeps_the_fastest_try(monkeypatch):
    """overhead.measure_steady measures again while torch.mm runs slow against the reference, at
    most `retries` more times, and keeps the try whose torch.mm was fastest."""
    from study import overhead

    times = iter([30.0, 20.0, 25.0, 14.0])
    calls = []

    def fake(family, name, **kw):
        calls.append(kw)
        return pd.DataFrame({"path": ["torch.mm", "study.gemm"], "us_host": [next(times), 1.0]})
    monkeypatch.setattr(overhead, "measure", fake)
    df = overhead.measure_steady("cuda", "s13", 15.0, retries=2, pause_s=0, rounds=3)
    assert df["us_host"].iloc[0] == 20.0 and df.attrs == {"tries": 3, "reference_us": 15.0}
    assert calls == [{"rounds": 3}] * 3
    df = overhead.measure_steady("cuda", "s13", 15.0, retries=2, pause_s=0)   # 14.0: within at once
    assert df.attrs["tries"] == 1
    with pytest.raises(ValueError, match="retries"):
        overhead.measure_steady("cuda", "s13", 15.0, retries=-1)


@pytest.mark.gpu
@pytest.mark.parametrize("check", GPU_CHECKS)
@pytest.mark.parametrize("stage", HALF_STAGES, ids=lambda s: f"{s.family}-{s.stem}")
def test_gpu(stage, check):
    import torch

    import model_checks

    why = stage.unavailable_reason(study.device.capability())
    if why:
        pytest.skip(why)
    kw = {"backend": "inductor"} if check == "compile_fullgraph" else {}
    getattr(model_checks, check)(stage.family, stage.short, "cuda", torch.bfloat16, **kw)


@pytest.mark.gpu
@pytest.mark.parametrize("check", FP32_CHECKS)
@pytest.mark.parametrize("stage", FP32_STAGES, ids=lambda s: f"{s.family}-{s.stem}")
def test_gpu_fp32(stage, check):
    """study.gemm / gemm_ in every layout, study.Linear forward and backward (NT, NN, TN), a CUDA
    graph and torch.compile(fullgraph=True) through each fp32 stage, in fp32 against fp64."""
    import torch

    import model_checks

    kw = {"backend": "inductor"} if check == "compile_fullgraph" else {}
    getattr(model_checks, check)(stage.family, stage.short, "cuda", torch.float32, **kw)


def test_overhead_rows_measure_a_slow_stage_again(monkeypatch):
    """modelrun.overhead_rows: the reference falls with every faster row; a stage measured before it
    fell and still slow against the final one is measured once more, keeping the faster try."""
    from study import modelrun, overhead

    mms = {("cuda", "s10"): [20.0, 19.0], ("cuda", "s11"): [13.0], ("triton", "s10"): [12.0]}
    calls = []

    def fake(family, name, ref, retries=1, **kw):
        calls.append((family, name, retries, ref))
        mm = mms[(family, name)].pop(0)
        df = pd.DataFrame({"path": ["torch.mm", "study.gemm"], "us_host": [mm, mm + 3], "us_over_torch": [0.0, 3.0]})
        df.attrs.update(tries=1, reference_us=ref)
        return df
    monkeypatch.setattr(overhead, "measure_steady", fake)
    monkeypatch.setattr(overhead, "torch_mm_us", lambda device: 19.0)
    starts = []
    stages = [("cuda", "s10"), ("cuda", "s11"), ("triton", "s10")]
    rows = pd.DataFrame(modelrun.overhead_rows(stages, "cpu", starts.append))
    assert starts == stages + [("cuda", "s10")]
    assert [c[2] for c in calls] == [1, 1, 1, 0] and calls[-1][3] == 12.0
    first = rows[(rows["family"] == "cuda") & (rows["stage"] == "s10")].set_index("what")
    assert first.loc["host_tries", "value"] == 2 and first.loc["host_reference_us", "value"] == 12.0
    mm = first[first["note"] == "torch.mm"]
    assert mm.loc["host_us", "value"] == 19.0


def test_model_rows_name_the_run_they_came_from(tmp_path):
    """A run that does not run the model group keeps the recorded model rows and names their run
    in environment "model_run" (the recorded one's, else the recorded tables' own run); a run that
    ran the group, or merged tables whose model rows are their own, names none; the page says
    which run measured its rows."""
    from study import modelpage, pages, results
    from study.results import Data
    from study.sweep import _model

    def _model_run(env, old, ran):
        return _model(env, old, [] if ran else None)[1]

    res = pd.DataFrame({"family": ["cublas"], "stage": ["cublas"], "M": [64], "N": [64], "K": [64]})
    old_env = {"git_commit": "aaa", "date_utc": "2026-11-27 10:00 UTC", "driver": "580"}
    results.write(Data("G", res, environment=old_env, model=_rows()), tmp_path)
    old = results.data_dir("G", tmp_path)
    fresh = {"git_commit": "bbb", "date_utc": "2026-11-27 12:00 UTC"}
    assert _model_run(fresh, old, ran=True) == fresh
    kept_rows, _ = _model(fresh, old)
    assert len(kept_rows) == len(_rows())                     # the recorded rows are kept
    kept = _model_run(fresh, old, ran=False)["model_run"]
    assert (kept["git_commit"], kept["date_utc"], kept["mode"]) == ("aaa", "2026-11-27 10:00 UTC",
                                                                    "the run that wrote the earlier tables")
    merged = {**old_env, "merged_runs": [fresh]}   # a filtered run: the recorded run's environment
    assert "model_run" not in _model_run(merged, old, ran=False)
    standalone = {"git_commit": "ccc", "date_utc": "2026-11-27 11:00 UTC", "mode": "python -m study model"}
    results.write(Data("G", res, environment={**old_env, "model_run": standalone}, model=_rows()), tmp_path)
    assert _model_run(fresh, old, ran=False)["model_run"] == standalone
    assert _model_run({**old_env, "model_run": standalone}, old, ran=False)["model_run"] == standalone
    assert _model_run(fresh, tmp_path / "nothing", ran=False) == fresh

    def text(env):
        return modelpage.page(Data("G", pd.DataFrame(), model=_rows(), environment=env), pages.table)
    assert "Measured in the run that wrote the tables (commit aaa, 2026-11-27 10:00 UTC)" in text(old_env)
    assert ("Measured by a later `python -m study model` at commit ccc (2026-11-27 11:00 UTC), not in the run "
            "that wrote the tables (commit aaa" in text({**old_env, "model_run": standalone}))
