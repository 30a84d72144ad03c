"""CUDA s14's host-side plan (make_plan in cuda_src/s14_stream_k.cu) without a GPU: a small host
program compiled by nvcc prints the decomposition of each shape for an H100 (132 SMs, 50 MiB of
L2), and the tests check the heuristic's rules and that the GPU suite's decode shapes take the
decompositions its docstrings name (a heuristic change that moves them fails here, on CPU)."""
from __future__ import annotations

import subprocess

import pytest

import gemm_checks as gc
from study.registry import find

SMS, L2 = 132, 50 * 2**20
PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include "%(path)s"
int main(int argc, char** argv) {
  for (int i = 1; i + 3 < argc; i += 4) {  // M N K l2, repeated
    const int M = atoi(argv[i]), N = atoi(argv[i + 1]), K = atoi(argv[i + 2]);
    const double l2 = atof(argv[i + 3]);
    gemm::Problem<__nv_bfloat16> p{nullptr, nullptr, nullptr, M, N, K, K, K, N, 1.f, 0.f, gemm::Layout::NT};
    const auto pl = s14_stream_k::make_plan(p, %(sms)d, -1, -1, 0, l2);
    printf("%%d %%d %%d %%.0f %%s %%d %%d %%d %%d %%d %%d\n", M, N, K, l2, s14_stream_k::plan_kind(pl), pl.swap,
           pl.s.pm, pl.bn, pl.s.sk_tiles, pl.grid, pl.ks);
  }
}
"""


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    """plans(shapes, l2=L2) -> {(M, N, K): (kind, swapped, P rows, BN, stream-K tiles, CTAs)};
    with ks=True, {(M, N, K): 64-wide k boxes per ring stage} instead."""
    stage = find("cuda", "s14")
    exe = gc.host_program(PROGRAM % {"path": stage.path, "sms": SMS}, tmp_path_factory.mktemp("plan_s14"))

    def run(shapes, l2=L2, ks=False):
        args = [str(v) for (m, n, k) in shapes for v in (m, n, k, l2)]
        out = subprocess.run([str(exe), *args], capture_output=True, text=True, check=True).stdout
        res = {}
        for line in out.splitlines():
            m, n, k, _, kind, swap, pm, bn, sk, grid, boxes = line.split()
            res[(int(m), int(n), int(k))] = (int(boxes) if ks else
                                             (kind, bool(int(swap)), int(pm), int(bn), int(sk), int(grid)))
        return res
    return run


def test_decode_plans(plans):
    """The decode division: two splits of 128-row weight tiles at M <= 16, 64-row tiles (consumers on
    the token halves) at M = 33-128, 64-row token tiles (consumers on the weight's halves) at
    M = 129-256 where no one-wave weight width fits; 128 CTAs at N = 4096."""
    got = plans([(1, 4096, 4096), (16, 4096, 4096), (64, 4096, 4096), (128, 4096, 4096), (256, 4096, 8192)])
    assert got[(1, 4096, 4096)] == ("split-k", True, 128, 16, 32, 64)
    assert got[(16, 4096, 4096)] == ("split-k", True, 128, 16, 32, 64)
    assert got[(64, 4096, 4096)] == ("split-k", True, 64, 64, 64, 128)
    assert got[(128, 4096, 4096)] == ("split-k", True, 64, 128, 64, 128)
    assert got[(256, 4096, 8192)] == ("split-k", False, 64, 256, 64, 128)   # 128 k-steps: no wave tiles


def test_one_wave_weight_tiles(plans):
    """NT, 64 < M <= 256, K <= 4096: x in 128-row tiles, the weight in the narrowest of 64, 88, 112
    and 168 rows that gives one tile per SM at most, taken where that fills >= 90% of the SMs."""
    got = plans([(256, 4096, 4096), (128, 11008, 4096), (100, 11008, 4096), (128, 14336, 4096),
                 (256, 11008, 4096), (256, 14336, 4096), (128, 4096, 4096), (64, 11008, 4096),
                 (128, 11008, 4160), (257, 4096, 4096)])
    assert got[(256, 4096, 4096)] == ("data-parallel", False, 128, 64, 0, 128)
    assert got[(128, 11008, 4096)] == ("data-parallel", False, 128, 88, 0, 126)
    assert got[(100, 11008, 4096)] == ("data-parallel", False, 128, 88, 0, 126)
    assert got[(128, 14336, 4096)] == ("data-parallel", False, 128, 112, 0, 128)
    assert got[(256, 11008, 4096)] == ("data-parallel", False, 128, 168, 0, 132)
    assert got[(256, 14336, 4096)][3] == 256      # 2 x 86 tiles at 168: more than one wave
    assert got[(128, 4096, 4096)][1]              # 64 tiles at 64 wide: too few, swapped
    assert got[(64, 11008, 4096)][1]              # M <= 64: swapped
    assert got[(128, 11008, 4160)][1]             # 65 k-steps
    assert got[(257, 4096, 4096)][3] == 256       # M > 256


def test_k_boxes_per_ring_stage(plans):
    """Swapped tiles take four 64-wide k boxes per ring stage, the 64-wide one-wave weight tile two,
    every other unswapped tile one (88-168 wide one-wave tiles: two would leave 3-4 stages)."""
    got = plans([(16, 4096, 4096), (256, 4096, 4096), (250, 4000, 936), (128, 11008, 4096),
                 (128, 14336, 4096), (256, 11008, 4096), (2048, 4096, 4096)], ks=True)
    assert got == {(16, 4096, 4096): 4, (256, 4096, 4096): 2, (250, 4000, 936): 2, (128, 11008, 4096): 1,
                   (128, 14336, 4096): 1, (256, 11008, 4096): 1, (2048, 4096, 4096): 1}


def test_split_lengths_count_64_wide_k_boxes(plans):
    """MIN_ITERS counts 64-wide k boxes whatever the ring stage holds (four boxes on the swapped
    path): 1 x 1024 x 4096 still splits each of its 8 tiles 8 ways (512 k each), 1 x 64 x 4096 16
    ways (256 k each, the shortest split), as when a stage held one box."""
    got = plans([(1, 1024, 4096), (1, 64, 4096), (1, 64, 1000)])
    assert got[(1, 1024, 4096)] == ("split-k", True, 128, 16, 8, 64)
    assert got[(1, 64, 4096)] == ("split-k", True, 128, 16, 1, 16)
    assert got[(1, 64, 1000)] == ("split-k", True, 128, 16, 1, 4)   # 4 steps of 256 (the last 232)


def test_hybrid_only_while_its_tiles_fit_in_l2(plans):
    """Stream-K CTAs sweep their tiles' K out of step, so the hybrid's stream-K part is taken only
    while those tiles' operands fit in 90% of the L2: 38 MB at 2048 x 11008 x 4096, 65 MB at M = 1024."""
    got = plans([(2048, 11008, 4096), (1024, 11008, 4096), (1024, 14336, 4096)])
    assert got[(2048, 11008, 4096)][:2] == ("hybrid", False)
    assert got[(1024, 11008, 4096)][0] == "data-parallel"
    assert got[(1024, 14336, 4096)][0] == "data-parallel"
    big = plans([(1024, 11008, 4096)], l2=128 * 2**20)   # the same shape on a GPU with a 128 MiB L2
    assert big[(1024, 11008, 4096)][0] == "hybrid"
    none = plans([(2048, 11008, 4096)], l2=0)            # L2 size unknown: never hybrid
    assert none[(2048, 11008, 4096)][0] == "data-parallel"


def test_no_short_unswapped_splits(plans):
    """Unswapped splits keep >= 16 k-steps (a 128 x 256 fp32 partial's round trip): the small
    squares run data-parallel as s13 does."""
    got = plans([(512, 512, 512), (1000, 1000, 1000), (1024, 1024, 1024)])
    for shape, plan in got.items():
        assert plan[0] == "data-parallel" and plan[4] == 0, (shape, plan)


def test_gpu_suite_shapes_take_their_decompositions(plans):
    """tests/test_gpu.py's decode shapes cover each decomposition of the CUDA stage (NT): equal
    splits, stream-K swapped and not (ranges crossing tiles), both kinds of 64-row tiles, hybrid,
    a single CTA, each one-wave weight width."""
    N, K = gc.DECODE_NK
    got = plans(list(gc.DECODE_EXTRA) + [(M, N, K) for M in gc.DECODE_MS])
    kinds = {plan[:3] for plan in got.values()}
    assert ("split-k", True, 128) in kinds
    assert ("stream-k", True, 128) in kinds          # M = 3 x 4100 x 4104
    assert ("stream-k", True, 64) in kinds           # M = 40-128: 64-row weight tiles
    assert ("stream-k", False, 64) in kinds          # M = 256: 64-row token tiles
    assert ("stream-k", False, 128) in kinds         # 300 x 1000 x 2056
    assert ("hybrid", False, 128) in kinds           # 1100 x 8192 x 136
    assert got[(1, 64, 72)][0] == "data-parallel" and got[(1, 64, 72)][5] == 1
    waves = {plan[3] for plan in got.values() if plan[:3] == ("data-parallel", False, 128)}
    assert waves >= {64, 88, 112, 168}


DIVISIONS = r"""
#include <cstdio>
#include "%(path)s"
using namespace s14_stream_k;
int main() {
  long long checks = 0, bad = 0;
  const int big[] = {0, 1, 2, 3, 1000, 65535, 65536, 1 << 20, 123456789, (1 << 30) + 7, 2147483646, 2147483647};
  for (int d = 1; d <= 3000; ++d) {  // FastDiv against the division, near every multiple and far out
    const FastDiv f(d);
    for (int k = 0; k <= 300; ++k)
      for (int e = -1; e <= 1; ++e) {
        const int n = k * d + e;
        if (n >= 0) { ++checks; bad += f(n) != n / d; }
      }
    for (int n : big) { ++checks; bad += f(n) != n / d; }
  }
  for (int d : {65537, 1 << 20, 999999937, (1 << 30) + 1, 2147483647})
    for (int n : big) { ++checks; bad += FastDiv(d)(n) != n / d; }
  for (int tp = 1; tp <= 40; ++tp)  // range_lo and tile_coords against their direct formulas
    for (int tq = 1; tq <= 6; ++tq)
      for (int kt : {1, 3, 16, 64, 257}) {
        Schedule s{tp, tq, kt, tp * tq, tp * tq * kt, 64};
        for (int grid : {1, 2, 7, 64, 128, 131, 132})
          if (grid <= s.sk_iters) {
            s.prepare(grid);
            for (int j = 0; j <= grid; ++j) {
              ++checks;
              bad += range_lo(s, j) != static_cast<int>(static_cast<long long>(j) * s.sk_iters / grid);
            }
          }
        for (int t = 0; t < tp * tq; ++t) {
          const int per = GROUP_M * tq, first = t / per * GROUP_M, rows = tp - first < GROUP_M ? tp - first : GROUP_M;
          int p0, qt;
          tile_coords(t, s, p0, qt);
          ++checks;
          bad += p0 != (first + t %% per %% rows) * 64 || qt != t %% per / rows;
        }
      }
  printf("%%lld %%lld\n", checks, bad);
}
"""


def test_device_divisions(tmp_path):
    """The kernel's divisions by run-time values are multiply-shifts prepared on the host (FastDiv):
    exact for every dividend in [0, 2^31) (checked near each multiple of 3000 divisors and at the
    range's ends), and the shared ranges and grouped tile order they compute equal the direct formulas."""
    exe = gc.host_program(DIVISIONS % {"path": find("cuda", "s14").path}, tmp_path)
    checks, bad = map(int, subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split())
    assert checks > 2_000_000 and bad == 0, (checks, bad)


@pytest.fixture(scope="module")
def triton_s14():
    from study.kernels import _load_triton_module

    return _load_triton_module(find("triton", "s14"))


def test_triton_plan_rules(triton_s14):
    """Triton s14's plan(): one wave of token tiles at M = 64-256 against N = 4096; s13 itself where
    a split would leave fewer than 16 K steps per program (M > 128, beta == 0), its own division
    with beta != 0; split-K at decode sizes."""
    plan = triton_s14.plan
    assert plan(256, 4096, 4096, SMS).name == "data-parallel" and plan(256, 4096, 4096, SMS).programs == 128
    assert plan(128, 4096, 4096, SMS).name == "data-parallel"
    assert plan(16, 4096, 4096, SMS).name == "split-k"
    for n in (256, 512, 1000, 1024):
        assert plan(n, n, n, SMS).name == "data-parallel (s13)", n
        assert plan(n, n, n, SMS, beta=0.5).name != "data-parallel (s13)", n
    p = plan(256, 4100, 4104, SMS)   # the GPU suite's M = 256 decode shape: 33 x 4 tiles, one wave
    assert (p.name, p.programs, p.block_n, p.block_t) == ("data-parallel", 132, 128, 64)


def test_triton_data_parallel_weight_tiles(triton_s14):
    """M <= 64 (one token tile) against 128-row weight tiles that alone fill 60-100% of the SMs:
    data-parallel, one tile per program; fewer or more tiles keep the split or stream-K."""
    plan = triton_s14.plan
    for (M, N, K), (programs, bt) in {(1, 11008, 4096): (86, 16), (16, 14336, 4096): (112, 16),
                                      (32, 11008, 4096): (86, 32), (64, 14336, 4096): (112, 64),
                                      (1, 11001, 520): (86, 16), (24, 11000, 1000): (86, 32),
                                      (40, 14300, 264): (112, 64)}.items():   # the last three: the GPU suite's
        p = plan(M, N, K, SMS)
        assert (p.name, p.programs, p.block_n, p.block_t) == ("data-parallel", programs, 128, bt), (M, N, K, p)
    for shape in ((16, 4096, 11008), (16, 20000, 4096)):   # 32 tiles: 24% of the SMs; 157: over a wave
        assert plan(*shape, SMS).block_n == 64 and plan(*shape, SMS).programs == SMS, shape
    assert plan(136, 11008, 4096, SMS).pieces == (128, 64)               # M > 128: the wide tiles


def test_triton_pair_tiles(triton_s14):
    """M = 65-128 where no wave or one-dot wide tile fits: 128-row x 64-token tiles, one per program
    (two per SM), where they make 1-2 x the SMs' count; s13 above that (or at M > 128), the wave below it."""
    plan = triton_s14.plan
    for (M, N, K), programs in {(128, 9216, 4096): 144, (100, 10112, 4096): 158, (65, 8449, 64): 134,
                                (100, 9001, 520): 142}.items():   # the last: the GPU suite's
        assert not plan(M, N, K, SMS).pieces
        for beta in (0.0, 0.5):
            p = plan(M, N, K, SMS, beta)
            assert (p.name, p.programs, p.block_n, p.block_t, p.block_k) == ("data-parallel", programs, 128, 64, 64), (
                M, N, K, p)
    assert plan(128, 20000, 4096, SMS).name == "data-parallel (s13)"     # 314 tiles: over two per SM
    assert plan(128, 4096, 4096, SMS).programs == 128                    # one wave of 64 x 64 tiles
    assert plan(64, 11008, 4096, SMS).block_t == 64 and plan(64, 11008, 4096, SMS).programs == 86
    assert plan(128, 11008, 4096, SMS).pieces == (128,)                 # 86 tiles of 128: the wide kernel


def test_triton_part_filled_token_tiles(triton_s14):
    """M = 129-256: one wave of token tiles whose last one is part-filled (or whole, at 70-90% of
    the SMs), before s13 and stream-K, which ran these shapes at 0.43-0.71x cuBLAS (log, session
    43); M <= 128 and fills under 70% keep their rules."""
    plan = triton_s14.plan
    for (M, N, K), (programs, bn) in {(136, 4096, 4096): (96, 128), (192, 4096, 4096): (96, 128),
                                      (200, 4096, 11008): (128, 128), (250, 4096, 4096): (128, 128),
                                      (160, 2048, 4096): (96, 64), (136, 4100, 520): (99, 128),
                                      (160, 2050, 264): (99, 64), (250, 4000, 1000): (128, 128)}.items():
        for beta in (0.0, 0.5):
            p = plan(M, N, K, SMS, beta)
            assert (p.name, p.programs, p.block_n, p.block_t) == ("data-parallel", programs, bn, 64), (M, N, K, p)
    assert plan(100, 2048, 4096, SMS).block_t == 128       # M <= 128: no part-filled token tile
    assert plan(100, 4096, 11008, SMS).block_t == 128
    p = plan(136, 1024, 4096, SMS)                           # 48 / 80 tiles: under 70% of the SMs
    assert p.programs == SMS and p.block_n == 256, p
    assert plan(200, 11008, 4096, SMS).pieces == (128, 64)   # 4 x 86 token tiles: over a wave; wide tiles


def test_triton_wide_weight_tiles(triton_s14, monkeypatch):
    """M = 129-256 where no wave of token tiles fits: 128 tokens x 192 / 256 / 224 weight rows as
    128 + 64 / 128 + 128 / 128 + 64 + 32-row dots, one tile per program, the first of them in that
    order whose tiles fill 84-100% of the SMs; M = 65-128: one 128-row dot where its tiles fill
    60-100%; beta != 0 alike; other M, and N whose tiles fill less, keep their rules."""
    plan = triton_s14.plan
    for (M, N, K), (programs, pieces) in {(256, 11008, 4096): (116, (128, 64)), (129, 11008, 4096): (116, (128, 64)),
                                          (256, 14336, 4096): (112, (128, 128)), (200, 14336, 64): (112, (128, 128)),
                                          (256, 13000, 4096): (118, (128, 64, 32)), (256, 16384, 4096): (128, (128, 128)),
                                          (128, 11008, 4096): (86, (128,)), (128, 14336, 4096): (112, (128,)),
                                          (65, 16896, 64): (132, (128,)), (100, 10113, 4096): (80, (128,)),
                                          (200, 11001, 264): (116, (128, 64)),   # the GPU suite's
                                          (100, 11001, 520): (86, (128,)), (120, 14300, 264): (112, (128,))}.items():
        for beta in (0.0, 0.5):
            p = plan(M, N, K, SMS, beta)
            assert (p.name, p.programs, p.block_t, p.block_n, p.block_k, p.pieces) == (
                "data-parallel", programs, 128, sum(pieces), 64, pieces), (M, N, K, p)
    for shape in ((64, 11008, 4096), (257, 11008, 4096),    # DP_TILES' token tile; three
                  (128, 10112, 4096), (128, 16897, 4096),   # 79 / 133 tiles of 128: under 60% / over a wave
                  (256, 8192, 4096), (256, 10000, 4096),    # 86 / 106 tiles of 192: under 84% of the SMs
                  (256, 17000, 4096)):                      # 178 / 134 / 152 tiles: over a wave
        assert not plan(*shape, SMS).pieces, shape
    import torch

    monkeypatch.setattr(triton_s14, "_sms", lambda a: SMS)
    assert triton_s14.decomposition(torch.empty(256, 4096), torch.empty(4096, 11008)) == \
        "data-parallel, A-B, 128x192x64 tiles (M x N x K) as 128 + 64-row dots, 116 programs"
    assert triton_s14.decomposition(torch.empty(128, 4096), torch.empty(4096, 14336)) == \
        "data-parallel, A-B, 128x128x64 tiles (M x N x K), 112 programs"


def test_triton_masked_x_rule(triton_s14):
    """x's part-filled last 128-token tile by masked loads (not the descriptor's zero fill) only
    where x is K-major, the tail is short enough for its kernel, and K and lda are multiples of 16
    (else Triton cannot prove 16-byte runs and the loads are synchronous LDG + STS); the GPU suite's
    two masked-load shapes take it, a K of 4104 does not."""
    import torch

    plan, x_ptr = triton_s14.plan, triton_s14._x_ptr
    swapped = triton_s14.Plan("forced", 128, 5, 2, 4, 64, 64)
    for M, K, want in ((72, 4096, True), (72, 528, True), (72, 4104, False), (72, 520, False),
                       (128 + triton_s14.X_PTR_TAIL, 4096, True), (129 + triton_s14.X_PTR_TAIL, 4096, False),
                       (128, 4096, False)):   # no part-filled tile
        assert x_ptr(torch.empty(M, K), swapped, False) == want, (M, K)
    assert not x_ptr(torch.empty(72, 4096), swapped, True)                       # TN: x stored (K, M)
    padded = torch.empty(72, 4104)[:, :4096]                                       # K = 4096, lda = 4104
    assert not x_ptr(padded, swapped, False)
    for M, N, K in ((72, 4100, 528), (129, 11008, 272)):   # tests/gemm_checks.DECODE_EXTRA's
        p = plan(M, N, K, SMS)
        assert p.block_t == 128 and x_ptr(torch.empty(M, K), p, False), (M, N, K, p)
    wide = plan(129, 11008, 4096, SMS)
    assert wide.pieces and x_ptr(torch.empty(129, 4096), wide, False)
    assert not x_ptr(torch.empty(128 + triton_s14.X_PTR_WIDE_TAIL + 1, 4096), wide, False)


def test_racecheck_shapes_take_the_paths_they_stand_for(plans):
    """tests/sanitize_run.py's racecheck shapes reach CUDA s14's flag fixups at few k-steps (a
    three-way split, stream-K over A-B token tiles), the one-wave 168-row tiles (ragged N and 16-byte
    C rows) and one CTA, and no cluster pair (every tile split in two, grid = 2 x tiles: racecheck
    does not finish there);
    RACE_PAIR_SHAPES, for a run that names them, are pairs: at 128 x 16 tiles and narrow at 64 /
    128 tokens."""
    import sanitize_run

    got = plans(sanitize_run.RACE_DECODE_SHAPES)
    assert got[(3, 1024, 520)] == ("split-k", True, 128, 16, 8, 24)
    assert got[(200, 1024, 1032)] == ("stream-k", False, 64, 256, 16, 17)
    assert got[(200, 11001, 264)] == ("data-parallel", False, 128, 168, 0, 132)   # register stores
    assert got[(200, 11008, 264)] == ("data-parallel", False, 128, 168, 0, 132)   # staged: ldc % 8 == 0
    assert got[(1, 64, 72)][5] == 1
    assert all(grid != 2 * sk for (_, _, _, _, sk, grid) in got.values())
    pairs = plans(sanitize_run.RACE_PAIR_SHAPES)
    assert pairs[(3, 512, 264)] == ("split-k", True, 128, 16, 4, 8)
    assert pairs[(40, 1024, 520)] == ("stream-k", True, 64, 64, 16, 32)
    assert pairs[(100, 1024, 520)] == ("stream-k", True, 64, 128, 16, 32)
