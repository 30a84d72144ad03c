"""Triton s14 (stream-K / split-K) under the Triton interpreter on CPU: the generic interpreter
shapes never split a tile, so this forces every decomposition (uneven stream-K shares, split-K,
data-parallel, one K step per program, ragged N and K tails, two token tiles) and checks the
result against fp64 (the tolerance policy), bitwise repeatability, and that the fixup leaves
its tile counters at zero."""
import json
import os
import subprocess
import sys

import pytest

from conftest import interp_unusable
from study.registry import PACKAGE_PARENT

CHILD = r"""
import json, math, sys
import torch
from study import tolerance
from study.kernels import _load_triton_module
from study.registry import find
mod = _load_triton_module(find("triton", "s14"))
cases = [  # M, N, K, forced programs (None: the stage's own plan), alpha, beta
    (3, 256, 1024, None, 1.0, 0.0), (3, 256, 1024, 5, 2.0, 0.5), (3, 256, 1024, 8, 1.0, 0.0),
    (3, 256, 1024, 2, 1.0, 1.0), (3, 256, 1024, 32, -1.5, 0.5), (1, 136, 200, 7, 0.5, -1.0),
    (150, 24, 136, 3, 2.0, 0.5)]
g = torch.Generator().manual_seed(0)
out = []
for M, N, K, progs, al, be in cases:
    a = torch.randn(M, K, generator=g).half()
    w = torch.randn(N, K, generator=g).half()
    c0 = torch.randn(M, N, generator=g).half()
    p = mod.plan(M, N, K, 3)
    if progs is not None:
        p = mod.Plan("forced", p.block_t, progs, p.stages, p.warps, p.block_n, p.block_k)
    res = []
    for _ in range(2):
        c = torch.full_like(c0, math.nan) if be == 0 else c0.clone()
        mod.launch(a, w.t(), c, al, be, p)
        res.append(c)
    cnt = mod._workspace[torch.device("cpu")][:mod.COUNTERS].view(torch.int32)
    try:
        tolerance.check(res[0], a, w.t(), c0, al, be, "fp16", what=f"{M}x{N}x{K}")
        err = ""
    except AssertionError as e:
        err = str(e)[:300]
    out.append({"case": f"{M}x{N}x{K} programs={progs} alpha={al} beta={be}", "err": err,
                "repeat": torch.equal(res[0], res[1]), "counters": int((cnt != 0).sum())})
print(json.dumps(out))
"""


def test_s14_decompositions_in_interpreter():
    why = interp_unusable()
    if why:
        pytest.skip(why)
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=str(PACKAGE_PARENT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cases = json.loads(proc.stdout.strip().splitlines()[-1])
    bad = [c for c in cases if c["err"] or not c["repeat"] or c["counters"]]
    assert len(cases) == 7 and not bad, bad
