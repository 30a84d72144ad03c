"""s08_autotuned: @triton.autotune over tile shape, warps, stages and group size, per shape

Change: vs s07, a list of candidate configs timed on first use per (M, N, K) and cached; where the
        tile divides M, N and K (EVEN, tritonlib.even_tiles) the K loop loads without masks.
Why:    the best SIMT tile trades registers (accumulators per thread, no spills), shared memory
        (stages * (BM + BN) * BK * 4 B <= 227 KB) and occupancy against FLOP/B per K step
        ((2 * BM * BN) / (4 * (BM + BN))) and tail waste: measuring a short list beats modelling.
        Triton's FMA dot spills beyond 64 accumulators per thread, so the tile cannot grow like
        CUDA s08's 16x8; what is left is latency hiding and issue slots (masks: 44 of 2316 SASS).
Expect: ~88% of cuBLAS FP32 at 4096^3 and ~92% at 8192^3, ~1.05-1.1x s07 (H100 studies, 64x128x32)
Limits: none (any M, N, K >= 1; unaligned inputs run with VEC=1, scalar loads)
Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
Pair:   cuda_src/s08_autotuned.cu
Log:    docs/stages/s08_autotuned.md
"""
import triton
import triton.language as tl

from study.tritonlib import (autotune_do_bench, autotune_prune, even_tiles, grouped_tile, hinted_tile,
                             launch_tile, tile_config)


# Candidates tile_config(BM, BN, BK, stages, warps), GROUP_M = 8: each compiles for sm_90 with
# no spills (checked ahead of time); accumulators per thread = BM * BN / (32 * warps),
# smem = (stages - 1) * (BM + BN) * BK * 4 B.
# What each config measured, and the tiles left out: docs/stages/s08_autotuned.md.
CONFIGS = [
    tile_config(256, 64, 32, 3, 8),    # s07's config: 204 regs, 80 KB smem
    tile_config(256, 64, 32, 4, 8),    # 204 regs, 120 KB
    tile_config(128, 64, 32, 3, 4),    # s06's config: 210 regs, 2 programs / SM
    tile_config(64, 128, 32, 4, 4),    # 168 regs, 3 programs / SM; unmasked (EVEN) the best at
                                       # 4096^3 and 8192^3
    tile_config(64, 64, 32, 3, 4),     # 96 regs, 32 acc / thread, 5 programs / SM
    tile_config(128, 128, 32, 4, 8),   # 188 regs
    tile_config(128, 128, 32, 3, 16),  # 32 acc / thread, 106 regs, 512 threads
    tile_config(128, 128, 32, 3, 8),
]


# Unaligned calls (VEC == 1: 4-byte loads) leave the 128x128 tiles at 8 warps short of registers
# (8-24 bytes of spills at 4095^3, sm_90): those calls choose among the rest.
UNALIGNED_CONFIGS = [c for c in CONFIGS if not (c.kwargs["BLOCK_M"] == c.kwargs["BLOCK_N"] == 128
                                                and c.num_warps == 8)]


def _tile(c):
    return c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_stages, c.num_warps


# The other layouts (sm_90 compiles at 1000^3 and 4095^3, tests/test_static.py): NT's K-major B
# tile with 4-byte loads spills 8-48 B in every config but 64 x 64; TN's M-major A tile spills
# 8-16 B at 256 x 64, 64 x 128 and 128 x 128 at 16 warps (unmasked at 512^3 or masked at 1000^3).
NT_UNALIGNED = [c for c in CONFIGS if _tile(c) == (64, 64, 3, 4)]
TN_CONFIGS = [c for c in CONFIGS if _tile(c)[:2] not in ((256, 64), (64, 128)) and c.num_warps != 16]


def _prune(configs, named_args, **kwargs):
    """early_config_prune: the configs that compile without spills for this call's VEC and LAYOUT."""
    layout, unaligned = kwargs.get("LAYOUT", "NN"), kwargs.get("VEC", 1) == 1
    if layout == "NT":
        out = NT_UNALIGNED if unaligned else configs
    elif layout == "TN":
        out = [c for c in TN_CONFIGS if c in UNALIGNED_CONFIGS] if unaligned else TN_CONFIGS
    else:
        out = UNALIGNED_CONFIGS if unaligned else configs
    return autotune_prune(out, named_args, **kwargs)


@triton.autotune(configs=CONFIGS, key=["M", "N", "K", "VEC", "LAYOUT"], restore_value=["c_ptr"], do_bench=autotune_do_bench,
                 prune_configs_by={"early_config_prune": _prune})
@even_tiles   # EVEN: this config's tile divides M, N and K
@triton.jit
def s08_autotuned_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr,
                          VEC: tl.constexpr, BETA_ZERO: tl.constexpr, EVEN: tl.constexpr,
                          LAYOUT: tl.constexpr):
    # --- tile assignment: 1-D grid, grouped order (bands of GROUP_M tile rows) -------------
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    # --- operand staging, loop over K, epilogue: study.tritonlib.hinted_tile (s04's tile) ----
    hinted_tile(pid_m, pid_n, a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                BLOCK_M, BLOCK_N, BLOCK_K, VEC, BETA_ZERO, EVEN, "ieee", LAYOUT)


def matmul(a, b, c, alpha=1.0, beta=0.0, layout="NN"):
    """c = alpha * a @ b + beta * c on checked fp32 tensors (study validates the arguments) in
    `layout` (NN, NT or TN: which of a, b is a transposed view, as study read it)."""
    # the autotuner picks BLOCK_M / BLOCK_N: launch_tile's grid is a function of the config
    return launch_tile(s08_autotuned_kernel, a, b, c, alpha, beta, layout=layout)
