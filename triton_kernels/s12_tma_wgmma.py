"""s12_tma_wgmma: tensor descriptors: TMA tile loads feeding wgmma

Change: vs s11, A and B tiles load through host-built tensor descriptors: on sm_90a one TMA copy
        per tile into swizzled smem, completed on an mbarrier; NT (B K-major) first, as the CUDA pair.
Why:    a 128x256x64 stage is (128+256)*64*2 B = 48 KiB: s11 moves it as 3072 16-byte cp.async
        (12 per thread at 8 warps) plus their address and mask math, TMA as 2 instructions from
        one thread, so the warps issue almost only wgmma; tails cost nothing (TMA zero-fills).
        Same tile area, pipeline depth and grouped order as s11 (85 FLOP/B either way), so the
        gain is issue slots and registers, not traffic.
Expect: ~95-99% of cuBLAS FP16/BF16 (NT) at 4096^3 and 8192^3, ~1.0x s11 (256x128x64 x 4 stages)
Limits: a and b 16-byte aligned, lda and ldb (row strides as stored: b.stride(1) in NT, a.stride(1)
        in TN) multiples of 8 elements (TMA: 16-byte aligned base and row strides; else ValueError
        naming the argument); any M, N, K >= 1 and any ldc (C goes through masked pointer stores)
Dtype:  fp16, bf16 in / fp32 acc / same as in out        Arch: sm_90a      Layout: NT, NN, TN
Pair:   cuda_src/s12_tma_wgmma.cu
Log:    docs/stages/s12_tma_wgmma.md
"""
import triton
import triton.language as tl

from study.operands import TRANSPOSED
from study.tritonlib import (autotune_do_bench, autotune_prune, c_vector_width, grouped_tile, store_c_tile,
                             tma_config, tma_unsupported)
from study.tritonlaunch import cdiv, descriptor, replay

GROUP_M = 8   # tile rows per group: programs in a group reuse the same B tiles from L2


def _config(bm, bn, bk, stages, warps):
    return tma_config(bm, bn, bk, stages, warps, GROUP_M)


# Hopper tile shapes (BM, BN, BK, stages, warps); smem = stages * (BM + BN) * BK * 2 B (the
# epilogue's layout-change buffer reuses the pipeline's shared memory). From an H100 sweep of 10
# tiles at 5 shapes (scratch/triton_s9), none spills; configs that never beat one below by more
# than the autotuner's timing noise (~5% on the H100) were left out (256x128 x 3 stages, 128x128
# with 8 warps). C stored by TMA was tried too, and not kept: docs/stages/s12_tma_wgmma.md.
CONFIGS = [
    _config(256, 128, 64, 4, 8),   # 192 KiB; 2 warpgroups of 128x128: won 4096^3, 8192^3 and
                                   # 2048x11008x4096 in both dtypes
    _config(128, 256, 64, 3, 8),   # 144 KiB; 2 warpgroups of 64x256, for wide problems
    _config(128, 128, 64, 4, 4),   # 128 KiB; one warpgroup: problems of 16-128 rows
    _config(128, 64, 64, 4, 4),    # 96 KiB; twice the programs: 1024^3 (fp16 84% of cuBLAS,
                                   # graph-timed; 128x128 77%)
]



# restore_value: autotune runs each config several times; with beta != 0 each run would
# accumulate into C, so C is saved before timing and restored after. The tritonlib hooks let
# the interpreter (no device timer) run configs[0] only.
@triton.autotune(configs=CONFIGS, key=["M", "N", "K", "LAYOUT"], restore_value=["c_ptr"],
                 do_bench=autotune_do_bench, prune_configs_by={"early_config_prune": autotune_prune})
@triton.jit
def s12_tma_wgmma_kernel(a_desc, b_desc, c_ptr, M, N, K, ldc, alpha, beta,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         GROUP_M: tl.constexpr, C_VEC: tl.constexpr, BETA_ZERO: tl.constexpr,
                         LAYOUT: tl.constexpr):
    # --- tile assignment: 1-D grid walked in groups of GROUP_M tile rows (as s11) -----------
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N

    # --- operand staging: TMA boxes of A and B as stored, one K step deep -------------------
    # No pointer tiles and no masks: the descriptor holds shape and strides, the copy engine
    # computes addresses and writes zeros for the out-of-bounds part of a box. The compiler
    # rings num_stages boxes of each through shared memory, one mbarrier per slot. A box of a
    # transposed operand (NT's B, TN's A) is fed to tl.dot as .T: a view of the same smem in
    # the other major order, which wgmma reads as it is for 16-bit types (no data movement).
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)

    # --- loop over K: one TMA box of A and of B per step, wgmma straight from smem ---------
    for k0 in range(0, K, BLOCK_K):
        if LAYOUT == "TN":
            a = a_desc.load([k0, off_m]).T    # box [BLOCK_K, BLOCK_M] (A stored K x M): M-major
        else:
            a = a_desc.load([off_m, k0])      # [BLOCK_M, BLOCK_K], K contiguous
        if LAYOUT == "NT":
            b = b_desc.load([off_n, k0]).T    # box [BLOCK_N, BLOCK_K] (B stored N x K): K-major
        else:
            b = b_desc.load([k0, off_n])      # [BLOCK_K, BLOCK_N], N contiguous
        acc = tl.dot(a, b, acc)

    # --- epilogue: alpha/beta in fp32, masked pointer stores (any ldc) ---------------------
    store_c_tile(c_ptr, acc, off_m, off_n, M, N, ldc, alpha, beta, BLOCK_M, BLOCK_N, C_VEC, BETA_ZERO)


def matmul(a, b, c, alpha=1.0, beta=0.0, layout="NT"):
    """c = alpha * a @ b + beta * c in `layout`: NT a (M, K) row-major, b the (K, N) view of an
    (N, K) tensor; NN both row-major; TN a the (M, K) view of a (K, M) tensor."""
    M, K = a.shape
    N = b.shape[1]
    a_t, b_t = TRANSPOSED[layout]   # descriptors on A and B as stored (row-major)
    # Box sizes are placeholders here: the chosen config's pre_hook sets them (per LAYOUT).
    a_desc, b_desc = descriptor(a, [64, 64], a_t), descriptor(b, [64, 64], b_t)

    def grid(meta):   # one program per C tile, 1-D so the kernel can regroup the order
        return (cdiv(M, meta["BLOCK_M"]) * cdiv(N, meta["BLOCK_N"]),)

    replay(s12_tma_wgmma_kernel)[grid](a_desc, b_desc, c, M, N, K, c.stride(0),
                                       float(alpha), float(beta), C_VEC=c_vector_width(c), BETA_ZERO=(beta == 0),
                                       LAYOUT=layout)
    return c


unsupported = tma_unsupported   # TMA: 16-byte aligned a, b and row strides, as stored in the layout
