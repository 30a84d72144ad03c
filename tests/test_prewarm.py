"""Compiling a run's Triton kernels ahead of measuring (study/prewarm.py).

CPU: which kernel-shapes are compiled, how they are shared out, and that nothing starts without
a GPU. GPU: after the compile-only pass, the measuring call compiles nothing more (the cache
directory gains no kernel binary), and the pass itself never runs a kernel (C stays as given).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from study import prewarm
from study.plan import Entry, Shape
from study.publish import schedule
from study.sweep import check, Options

ROOT = Path(__file__).resolve().parents[1]


def test_triples_cover_the_triton_kernel_shapes_of_the_plan():
    groups, shapes = check(Options(quick=True))
    scope = schedule(groups, shapes)[1]
    triples = prewarm.triples_of(groups, scope)
    assert triples, "the quick plan has Triton stages"
    assert all(e.family == "triton" or e.kind == "finding" for _, e, _ in triples)
    want = sum(len(scope[p][e.label]) for p, es in groups.items() for e in es
               if e.family == "triton" or e.kind == "finding")
    assert len(triples) == want
    assert not any(e.family in ("cuda", "cublas", "inductor") for _, e, _ in triples)


def test_shares_keep_a_kernel_together_and_balance():
    e1, e2, e3 = (Entry("triton", f"s1{i}_x", "bf16", "NT") for i in range(3))
    triples = [("bf16", e1, Shape(n, n, n)) for n in (64, 128, 256, 512)] + \
              [("bf16", e2, Shape(n, n, n)) for n in (64, 128)] + [("bf16", e3, Shape(64, 64, 64))]
    out = prewarm.shares(triples, 2)
    assert len(out) == 2
    assert sorted(len(o) for o in out) == [3, 4]
    for e in (e1, e2, e3):   # each kernel's shapes in one list
        assert sum(any(t[1] == e for t in o) for o in out) == 1
    assert sorted(map(str, sum(out, []))) == sorted(map(str, triples))
    assert prewarm.shares(triples, 16) and len(prewarm.shares(triples, 16)) == 3   # no empty lists


def test_alongside_without_gpu_only_runs_the_work(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    started = []
    monkeypatch.setattr(prewarm, "start", lambda *a, **k: started.append(a))
    phases, said = {}, []
    out = prewarm.alongside([("bf16", Entry("triton", "s12_tma_wgmma", "bf16", "NT"), Shape(64, 64, 64))],
                            lambda: "built", phases, said.append)
    assert out == "built" and "build" in phases and "prewarm" not in phases
    assert not started and not said


@pytest.mark.gpu
def test_compile_only_pass_leaves_nothing_to_compile(tmp_path):
    """A compile-only pass over one autotuned stage at one shape, then the real call in a fresh
    process: the second adds no binary to the cache (every config was compiled ahead, beta = 0
    and alpha/beta alike)."""
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs a Hopper GPU (s12's TMA)")
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "cache"), TRITON_CACHE_AUTOTUNING="0",
               PYTHONPATH=str(ROOT))
    entry = Entry("triton", "s12_tma_wgmma", "bf16", "NT")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps([{"precision": "bf16", "entry": entry.__dict__, "shape": Shape(256, 384, 512).__dict__}]))
    out = subprocess.run([sys.executable, "-m", "study.worker", "prewarm", str(spec)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "FAILED" not in out.stdout, out.stdout + out.stderr[-2000:]
    before = {p for p in (tmp_path / "cache").rglob("*.cubin")}
    assert before, "the pass compiled nothing"
    probe = (
        "import torch, study\n"
        "from study.harness import Operands, ALPHA, BETA\n"
        "ops = Operands(256, 384, 512, 'bf16')\n"
        "k = study.kernel('triton', 's12_tma_wgmma')\n"
        "c = ops.output(); k(ops.a, ops.b('NT'), c); k(ops.a, ops.b('NT'), c, alpha=ALPHA, beta=BETA)\n"
        "torch.cuda.synchronize(); print('ran', bool(torch.isfinite(c).all()))\n")
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert "ran True" in run.stdout, run.stderr[-2000:]
    after = {p for p in (tmp_path / "cache").rglob("*.cubin")}
    assert after == before, f"{len(after - before)} binaries compiled by the measuring call"


@pytest.mark.gpu
def test_compile_only_launches_nothing():
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs a Hopper GPU (s12's TMA)")
    probe = (
        "import torch, study\n"
        "from study import prewarm\n"
        "k = study.kernel('triton', 's12_tma_wgmma')\n"
        "prewarm.compile_only([k.module])\n"
        "a = torch.randn(128, 64, device='cuda', dtype=torch.bfloat16); w = torch.randn(96, 64, device='cuda', dtype=torch.bfloat16)\n"
        "c = torch.full((128, 96), 7.0, device='cuda', dtype=torch.bfloat16)\n"
        "k(a, w.t(), c); torch.cuda.synchronize(); print('untouched', bool((c == 7).all()))\n")
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=str(ROOT), TRITON_CACHE_AUTOTUNING="0"))
    assert "untouched True" in run.stdout, run.stdout + run.stderr[-2000:]
