"""s11_mma_pipeline: deep pipeline, grouped order, autotuned fp16/bf16 tiles

Change: vs s10, a 4-5 stage K pipeline with BLOCK_K=64, GROUP_M-grouped program order, autotune
        over four Hopper tiles per (M, N, K) and dtype; EVEN tiles load without masks.
Why:    a 128x256 tile reaches 2*128*256 / ((128+256)*2) = 85 FLOP/B of loads (s10's 128x128:
        64), and 48 KiB stages x 3-4 (144-192 KiB of 227) keep 2-3 K steps of 4 MFLOP in flight,
        enough to cover DRAM latency at full MMA rate. At 8192^3 a wave of 132 programs touches
        136 MiB of A and B strips in row-major order, 84 MiB grouped by 8 tile rows. Unmasked
        loads cut a K step from 159 to 98 SASS instructions.
Expect: ~95-99% of cuBLAS FP16/BF16 at 4096^3 and 8192^3, ~1.4x s10 (H100 studies: 666-759 TFLOP/s)
Limits: none (any M, N, K >= 1, any leading dimensions as stored: 16-byte loads need aligned
        rows and K, N (TN: and M) multiples of 8, else 2-byte loads)
Dtype:  fp16, bf16 in / fp32 acc / same as in out        Arch: sm_80+      Layout: NN, NT, TN
Pair:   cuda_src/s11_mma_pipeline.cu
Log:    docs/stages/s11_mma_pipeline.md
"""
import triton
import triton.language as tl

from study.tritonlib import (autotune_do_bench, even_tiles, grouped_tile, hinted_tile, launch_tile,
                             prune_unaligned, tile_config)

GROUP_M = 8   # tile rows per group: programs in a group reuse the same B tiles from L2


# Hopper tile shapes tile_config(BM, BN, BK, stages, warps, GROUP_M); smem = stages * (BM + BN)
# * BK * 2 B. From an H100 sweep of 13 tiles at 5 shapes (scratch/triton_s9), none spills;
# configs within a few % of the winner everywhere were left out: the autotuner's 25 ms timing
# cannot rank them on the H100 (an example, and the sweeps: docs/stages/s11_mma_pipeline.md).
CONFIGS = [
    tile_config(128, 256, 64, 4, 8, GROUP_M),  # 192 KiB; 2 warpgroups of 64x256: 4096^3, 8192^3,
                                               # 2048x11008x4096
    tile_config(128, 128, 64, 5, 8, GROUP_M),  # 160 KiB; 2 warpgroups of 64x128: problems of 128 rows
    tile_config(128, 128, 64, 4, 4, GROUP_M),  # 128 KiB; one warpgroup: mid-size problems
    tile_config(128, 64, 64, 4, 4, GROUP_M),   # 96 KiB; 4x the programs of 128x256: 1024^3 fp16
                                               # (84% of cuBLAS, graph-timed; 128x128 77%) and
                                               # 16-row problems
]
for _c in CONFIGS:
    _bk, _bm, _bn = _c.kwargs["BLOCK_K"], _c.kwargs["BLOCK_M"], _c.kwargs["BLOCK_N"]
    assert _bk % 16 == 0, "BLOCK_K must be a multiple of 16 (fp16 MMA k-step)"
    assert _bm % 64 == 0 and _bn % 8 == 0 and _bn <= 256, "tile must fit wgmma (M % 64, N % 8, N <= 256)"
    assert _c.num_stages * (_bm + _bn) * _bk * 2 <= 227 * 1024, "pipeline must fit 227 KiB of smem"



# restore_value: autotune runs each config several times; with beta != 0 each run would
# accumulate into C, so C is saved before timing and restored after. The tritonlib hooks let
# the interpreter (no device timer) run configs[0] only.
# Unaligned calls (VEC == 1: 2-byte loads, addresses in registers) spill 0.7-1 KB with 4 warps
# or with 128x256 tiles (sm_90, 4095^3); 8 warps on 128x128 / 128x64 tiles do not. With one
# operand transposed (NT, TN) 128x128x64 spills 40-48 B too; 128x128x32 does not.
_NARROW = tile_config(128, 64, 64, 4, 8, GROUP_M)
_SHALLOW = tile_config(128, 128, 32, 5, 8, GROUP_M)
UNALIGNED_CONFIGS = {"NN": [CONFIGS[1], _NARROW], "NT": [_SHALLOW, _NARROW], "TN": [_SHALLOW, _NARROW]}


@triton.autotune(configs=CONFIGS, key=["M", "N", "K", "VEC", "LAYOUT"], restore_value=["c_ptr"],
                 do_bench=autotune_do_bench,
                 prune_configs_by={"early_config_prune": prune_unaligned(UNALIGNED_CONFIGS)})
@even_tiles   # EVEN: this config's tile divides M, N and K
@triton.jit
def s11_mma_pipeline_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                            GROUP_M: tl.constexpr, VEC: tl.constexpr, BETA_ZERO: tl.constexpr,
                            EVEN: tl.constexpr, LAYOUT: tl.constexpr):
    # --- tile assignment: 1-D grid walked in groups of GROUP_M tile rows --------------------
    # Consecutive programs (running at the same time) cover a GROUP_M x many block of C:
    # they share A strips within the group and B strips across it, both held in L2.
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)

    # --- operand staging, loop over K, epilogue: study.tritonlib.hinted_tile (s04's tile) on
    # fp16/bf16 tiles, fp32 accumulate, unmasked when EVEN. Its pointer tiles become a
    # num_stages-deep ring of async copies in smem (cp.async): while the tensor cores consume
    # stage s, stages s+1 .. s+num_stages-1 are in flight. Triton proves 16-byte copies only
    # for arguments divisible by 16; at lda = 1000 (divisible by 8) it would fall back to
    # 2-byte copies (23% of cuBLAS at 1000^3). VEC = 8 says what the wrapper checked: row
    # starts and the K, N limits are multiples of 8 halves (16 bytes). LAYOUT: NT's B tile is
    # read along K from B stored N x K, TN's A tile along M from A stored K x M (as s10).
    hinted_tile(pid_m, pid_n, a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                BLOCK_M, BLOCK_N, BLOCK_K, VEC, BETA_ZERO, EVEN, None, LAYOUT)


def matmul(a, b, c, alpha=1.0, beta=0.0, layout="NN"):
    """c = alpha * a @ b + beta * c on checked fp16/bf16 tensors (study validates them) in
    `layout` (NN, NT or TN: which of a, b is a transposed view, as study read it)."""
    # one program per C tile on a 1-D grid (so the kernel can regroup the order), sized by
    # the config the autotuner picks; LAYOUT is in the autotune key
    return launch_tile(s11_mma_pipeline_kernel, a, b, c, alpha, beta, layout=layout)
