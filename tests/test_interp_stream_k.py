"""Triton s14 (stream-K / split-K) under the Triton interpreter on CPU: the generic interpreter
shapes never split a tile, so this forces every decomposition (uneven stream-K shares, split-K,
data-parallel by each of plan()'s rules and the wide tiles, one K step per program, ragged N and K tails, two token
tiles) in every layout the header lists, and checks the result against fp64 (the tolerance policy), bitwise
repeatability, and that the fixup leaves its tile counters at zero. The small-M (swap AB) tiles
read each operand in the other major order than the unswapped problem; TN stores A as (K, M),
so its token counts are multiples of 8 (16-byte TMA rows) but ragged against the token tile,
and its K may be ragged (NN and NT need K % 8 == 0: A is stored (M, K))."""
import json
import os
import subprocess
import sys

import pytest

from conftest import interp_unusable
from study.registry import PACKAGE_PARENT, find

CHILD = r"""
import json, math, sys
import torch
from study import tolerance
from study.kernels import _load_triton_module
from study.registry import find
stage = find("triton", "s14")
mod = _load_triton_module(stage)
cases = [  # M, N, K, forced programs (None: the stage's own plan), alpha, beta
    (3, 256, 1024, None, 1.0, 0.0), (3, 256, 1024, 5, 2.0, 0.5), (3, 256, 1024, 8, 1.0, 0.0),
    (3, 256, 1024, 2, 1.0, 1.0), (3, 256, 1024, 32, -1.5, 0.5), (1, 136, 200, 7, 0.5, -1.0),
    (150, 24, 136, 3, 2.0, 0.5), (24, 136, 264, 4, 1.0, 0.0),
    (192, 128, 256, None, 1.0, 0.5),  # plan(): one wave of 128x64 token tiles (data-parallel)
    (8, 296, 520, None, 1.5, 0.5),  # plan(): 128-row weight tiles, one each (3 of 3 SMs), ragged N, K
    (136, 104, 72, None, 1.0, 0.0),  # plan(): 3 token tiles of 64, the last part-filled, ragged N
    (100, 264, 136, None, 1.0, 0.5),  # plan(): 128 x 64 tiles, two per SM (6 on 3 SMs), ragged N and M
    (200, 328, 136, (128, 64), 1.5, 0.5),  # WIDE_TILES (forced: 3 SMs never fit them): 128 + 64-row
    (136, 232, 80, (128, 64, 32), 1.0, 0.0),  # dots, ragged M and N; 128 + 64 + 32, the last piece part-filled
    (144, 304, 136, (128, 128), 2.0, 0.0),  # 128 + 128-row dots, the second part-filled
    (72, 200, 136, (128,), 1.0, 0.5),  # WIDE_ONE: one 128-row dot, one part-filled token tile, ragged N
    (200, 136, 144, "t128", 1.0, 0.5)]  # 128-token tiles, stream-K over 5 programs: x by masked loads in
                                        # the programs whose share touches the 72-row last tile (K-major x)
dp_fill = mod.DP_FILL   # the 128-row data-parallel rule: on for its own case only (the others keep
                        # the 64-row tiles they were written for)
# TN: M to 16-byte rows of A stored (K, M) (3 -> 8, 1 -> 8, 150 -> 152), K ragged where it was 200
tn = {(3, 256, 1024): (8, 256, 1024), (1, 136, 200): (8, 136, 196), (150, 24, 136): (152, 24, 136),
      (100, 264, 136): (104, 264, 136)}
g = torch.Generator().manual_seed(0)
out = []
for layout in stage.layouts:
    for M, N, K, progs, al, be in cases:
        if layout == "TN":
            M, N, K = tn.get((M, N, K), (M, N, K))
        a = torch.randn(K, M, generator=g).half().t() if layout == "TN" else torch.randn(M, K, generator=g).half()
        b = torch.randn(N, K, generator=g).half().t() if layout == "NT" else torch.randn(K, N, generator=g).half()
        c0 = torch.randn(M, N, generator=g).half()
        mod.DP_FILL = dp_fill if (M, N, K) == (8, 296, 520) else 2.0
        p = mod.plan.__wrapped__(M, N, K, 3)   # not the cached plan: DP_FILL changes between cases
        if (M, N, K) == (136, 232, 80) and layout != "TN":
            assert mod._x_ptr(a, mod.Plan("data-parallel", 128, 0, 2, 8, 232, 64, progs), False)  # masked x
        if (M, N, K) in ((8, 296, 520), (136, 104, 72)):
            assert (p.name, p.programs, p.block_n) == ("data-parallel", 3, 128), p
        if (M, N) in ((100, 264), (104, 264)):
            assert (p.name, p.programs, p.block_n, p.block_t) == ("data-parallel", 6, 128, 64), p
        if progs == "t128":
            p = mod.Plan("forced", 128, 5, 2, 4, 64, 64)
            assert mod._x_ptr(a, p, layout == "TN") == (layout != "TN")   # masked x where x is K-major
        elif isinstance(progs, tuple):
            p = mod.Plan("data-parallel", 128, 0, 2, 8, sum(progs), 64, progs)
        elif progs is not None:
            p = mod.Plan("forced", p.block_t, progs, p.stages, p.warps, p.block_n, p.block_k)
        why = mod.unsupported(a, b, c0, layout=layout)
        res = []
        for _ in range(2 if not why else 0):
            c = torch.full_like(c0, math.nan) if be == 0 else c0.clone()
            mod.launch(a, b, c, al, be, p, layout)
            res.append(c)
        cnt = mod._workspace[torch.device("cpu")][:mod.COUNTERS].view(torch.int32)
        try:
            assert not why, why
            tolerance.check(res[0], a, b, c0, al, be, "fp16", what=f"{layout} {M}x{N}x{K}")
            err = ""
        except AssertionError as e:
            err = str(e)[:300]
        out.append({"case": f"{layout} {M}x{N}x{K} programs={progs} alpha={al} beta={be}", "err": err,
                    "repeat": not why and torch.equal(res[0], res[1]), "counters": int((cnt != 0).sum())})
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
    assert len(cases) == 17 * len(find("triton", "s14").layouts) and not bad, bad
