"""CUDA s15's promoted tile width (promoted_width in cuda_src/s15_fp8.cu) without a GPU: a small host
program compiled by nvcc prints the width the rule picks for each M x N on a given SM count, and
the tests check the shapes its comment names and that the GPU suite's fp8 shapes take both widths
(a rule change that moves them fails here, on CPU)."""
from __future__ import annotations

import subprocess

import pytest

import gemm_checks as gc
from study.registry import find

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include "%(path)s"
int main(int argc, char** argv) {
  for (int i = 1; i + 2 < argc; i += 3) {  // M N sms, repeated
    const int M = atoi(argv[i]), N = atoi(argv[i + 1]), sms = atoi(argv[i + 2]);
    printf("%%d %%d %%d %%d\n", M, N, sms, s15_fp8::promoted_width(M, N, sms));
  }
}
"""


@pytest.fixture(scope="module")
def width(tmp_path_factory):
    """width(shapes, sms=132) -> {(M, N): promoted tile width}."""
    stage = find("cuda", "s15")
    exe = gc.host_program(PROGRAM % {"path": stage.path}, tmp_path_factory.mktemp("width_s15"))

    def run(shapes, sms=132):
        args = [str(v) for (m, n) in shapes for v in (m, n, sms)]
        out = subprocess.run([str(exe), *args], capture_output=True, text=True, check=True).stdout
        return {(int(m), int(n)): int(w) for m, n, _, w in (line.split() for line in out.splitlines())}
    return run


def test_widths_of_the_studied_shapes(width):
    """On 132 SMs: 192 wide at 8192^3, 6144^3 and 4096 x 14336 (its waves fill within 2% of 128's);
    128 wide where both fill alike (4096^3, the M = 2048 layer shapes) and at the decode shapes."""
    got = width([(8192, 8192), (6144, 6144), (4096, 14336), (4096, 4096), (2048, 4096), (2048, 11008),
                 (2048, 14336), (1024, 4096), (1, 4096), (16, 11008), (128, 14336), (256, 4096)])
    assert {s for s, w in got.items() if w == 192} == {(8192, 8192), (6144, 6144), (4096, 14336)}
    assert all(w in (128, 192) for w in got.values())


def test_one_partial_wave_takes_the_narrower_tile(width):
    """Fewer tiles than SMs (one partial wave): 128-wide tiles occupy more SMs whatever N is."""
    got = width([(1, n) for n in range(8, 16384, 184)] + [(128, n) for n in range(8, 16384, 184)], sms=132)
    assert set(got.values()) == {128}


def test_gpu_suite_shapes_take_both_widths(width):
    """tests/test_gpu_fp8.py's shapes run both promoted tiles on a 132-SM GPU (H100 SXM, H200)."""
    import test_gpu_fp8

    got = width([(m, n) for m, n, _ in test_gpu_fp8.SHAPES])
    assert got[(1000, 2600)] == 192       # N ragged against 192
    assert got[(900, 3112)] == 128        # M and N ragged
    assert set(got.values()) == {128, 192}
