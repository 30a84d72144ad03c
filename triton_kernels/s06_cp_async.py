"""s06_cp_async: num_stages=3, a multi-stage cp.async pipeline

Change: vs s05, num_stages=3: two shared-memory buffers per operand, two K tiles in flight
        (cp.async groups, waited on one stage behind) instead of one.
Why:    one tile in flight hides a load only if it returns within one tile of math: 2048 FFMAs
        per thread per K step, at 2 programs of 4 warps per SM ~4000 issue cycles per scheduler
        (~2 us), longer than an HBM miss (~1 us). The second tile in flight absorbs jitter (L2
        misses queued behind other SMs' traffic). Cost: 2 x 24 KB = 48 KB of shared memory per
        program, which still fits 2 programs per SM.
Expect: ~1.0-1.1x s05 at 4096^3 fp32 (H100 study at 7417859: 1.11-1.15x, 42.6 TFLOP/s)
Limits: none (any M, N, K >= 1; unaligned inputs run with VEC=1, scalar loads)
Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
Pair:   cuda_src/s06_cp_async.cu
Log:    docs/stages/s06_cp_async.md
"""
import triton
import triton.language as tl

from study.tritonlib import hinted_tile, launch_tile

BLOCK_M = 128  # rows of C per program
BLOCK_N = 64   # cols of C per program: 128 x 64 fp32 acc = 64 floats per thread (no spills)
BLOCK_K = 32   # K step: (128 + 64) * 32 * 4 B = 24 KB of tiles per step
NUM_WARPS = 4  # 128 threads
NUM_STAGES = 3  # two tiles in flight (Triton allocates num_stages - 1 shared buffers for an FMA dot)
NUM_WARPS_UNALIGNED = {"NT": 8}   # VEC == 1: NT's K-major B tile at 4 warps spills 8 B (sm_90)


@triton.jit
def s06_cp_async_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          VEC: tl.constexpr, BETA_ZERO: tl.constexpr, LAYOUT: tl.constexpr):
    # --- tile assignment: 1-D grid, row-major program order --------------------------------
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // grid_n
    pid_n = pid % grid_n
    # --- operand staging, loop over K, epilogue: study.tritonlib.hinted_tile (s04's tile) ----
    hinted_tile(pid_m, pid_n, a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                BLOCK_M, BLOCK_N, BLOCK_K, VEC, BETA_ZERO, False, "ieee", LAYOUT)


def matmul(a, b, c, alpha=1.0, beta=0.0, layout="NN"):
    """c = alpha * a @ b + beta * c on checked fp32 tensors (study validates the arguments) in
    `layout` (NN, NT or TN: which of a, b is a transposed view, as study read it)."""
    return launch_tile(s06_cp_async_kernel, a, b, c, alpha, beta, layout=layout, BLOCK_M=BLOCK_M,
                       BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=NUM_WARPS, num_stages=NUM_STAGES,
                       num_warps_unaligned=NUM_WARPS_UNALIGNED)
