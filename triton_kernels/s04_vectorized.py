"""s04_vectorized: alignment / contiguity hints so tile loads become 128-bit

Change: vs s03, the wrapper proves 16-byte alignment and passes VEC=4; study.tritonlib.hinted_tile
        (reused by s05-s08) then adds tl.multiple_of / tl.max_contiguous hints (VEC=1: as s03).
Why:    a 128 x 32 A tile plus a 32 x 64 B tile is 6144 floats per K step: 48 scalar loads per
        thread, or 12 with float4, a quarter of the load instructions and address arithmetic.
        Triton only proves alignment itself when an integer argument is a multiple of 16 (it
        specialises on that), so a lda of 4100 or a K of 1000 silently falls back to 4-byte
        loads in s03; the hint recovers float4 for every multiple of 4.
Expect: ~1.0x s03 at 4096^3, where s03 already gets 128-bit loads; the gain is at e.g. 4100^3
Limits: none (any M, N, K >= 1; unaligned inputs run with VEC=1, scalar loads)
Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
Pair:   cuda_src/s04_vectorized.cu
Log:    docs/stages/s04_vectorized.md
"""
import triton
import triton.language as tl

from study.tritonlib import hinted_tile, launch_tile

BLOCK_M = 128  # rows of C per program
BLOCK_N = 64   # cols of C per program: 128 x 64 fp32 acc = 64 floats per thread (no spills)
BLOCK_K = 32   # K step: (128 + 64) * 32 * 4 B = 24 KB of tiles per step
NUM_WARPS = 4  # 128 threads
NUM_STAGES = 1  # no software pipelining yet (Triton's default would be 3)
NUM_WARPS_UNALIGNED = {"NT": 8}   # VEC == 1: NT's K-major B tile at 4 warps spills 104-112 B (sm_90)


@triton.jit
def s04_vectorized_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
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
    return launch_tile(s04_vectorized_kernel, a, b, c, alpha, beta, layout=layout, BLOCK_M=BLOCK_M,
                       BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=NUM_WARPS, num_stages=NUM_STAGES,
                       num_warps_unaligned=NUM_WARPS_UNALIGNED)
