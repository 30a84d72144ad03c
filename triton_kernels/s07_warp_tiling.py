"""s07_warp_tiling: more warps per program tile, grouped program order for L2 reuse

Change: vs s06, (1) a 256 x 64 program tile over 8 warps (num_warps=8) instead of 128 x 64 over 4;
        (2) programs walk C in bands of GROUP_M = 8 tile rows (study.tritonlib.grouped_tile).
Why:    (1) a 256 x 64 tile loads (256 + 64) * 32 floats per K step for 2 * 256 * 64 * 32 FLOPs:
        25.6 FLOP/B vs 21.3 for 128 x 64, and B is read by half as many programs. (2) bands of 8
        tile rows touch ~8 A + ~17 B panels per wave of 132 tiles instead of ~5 A + all 64 B in row
        order. A wave does > 200 FLOP per HBM byte vs a ~22 FLOP/B ridge either way: the SIMT
        kernel is FMA-issue bound, so (2) buys little here and is kept for the tensor-core stages.
Expect: ~1.0-1.05x s06 at 4096^3 fp32 (run 1 autotune: 256 x 64 x 8 warps 1.4% ahead of 128 x 64)
Limits: none (any M, N, K >= 1; unaligned inputs run with VEC=1, scalar loads; NT's then on
        s06's 128 x 64 tile at 8 warps: 4-byte loads of its K-major B tile spill at 256 x 64)
Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
Pair:   cuda_src/s07_warp_tiling.cu
Log:    docs/stages/s07_warp_tiling.md
"""
import triton
import triton.language as tl

from study.tritonlib import grouped_tile, hinted_tile, launch_tile, vector_width

BLOCK_M = 256  # rows of C per program
BLOCK_N = 64   # cols of C per program: 256 x 64 fp32 acc = 64 floats per thread at 8 warps
BLOCK_K = 32   # K step: (256 + 64) * 32 * 4 B = 40 KB of tiles per step (2 buffers: 80 KB)
GROUP_M = 8    # tile rows per band of the grouped program order
NUM_WARPS = 8  # 256 threads
NUM_STAGES = 3  # two tiles in flight (Triton allocates num_stages - 1 shared buffers for an FMA dot)
NT_UNALIGNED = (128, 8)  # BLOCK_M, warps of an NT call with VEC == 1 (256 x 64 spills 40 B, sm_90)


@triton.jit
def s07_warp_tiling_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr,
                          VEC: tl.constexpr, BETA_ZERO: tl.constexpr, LAYOUT: tl.constexpr):
    # --- tile assignment: 1-D grid, grouped order (bands of GROUP_M tile rows) -------------
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    # --- operand staging, loop over K, epilogue: study.tritonlib.hinted_tile (s04's tile) ----
    hinted_tile(pid_m, pid_n, a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                BLOCK_M, BLOCK_N, BLOCK_K, VEC, BETA_ZERO, False, "ieee", LAYOUT)


def matmul(a, b, c, alpha=1.0, beta=0.0, layout="NN"):
    """c = alpha * a @ b + beta * c on checked fp32 tensors (study validates the arguments) in
    `layout` (NN, NT or TN: which of a, b is a transposed view, as study read it)."""
    bm, warps = BLOCK_M, NUM_WARPS
    if layout == "NT" and vector_width(a, b, c, layout) == 1:
        bm, warps = NT_UNALIGNED
    return launch_tile(s07_warp_tiling_kernel, a, b, c, alpha, beta, layout=layout, BLOCK_M=bm,
                       BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, num_warps=warps,
                       num_stages=NUM_STAGES)
