"""s05_double_buffer: num_stages=2, the next K tile loads while this one is multiplied

Change: vs s04, num_stages=2: Triton's pipeliner issues the cp.async loads of K tile k+1 into
        shared memory while the FFMAs of tile k run from registers (so this stage emits LDGSTS).
Why:    at num_stages=1 each K step exposes a full global-load latency (~1 us from HBM) behind
        a barrier; with one tile in flight the wait hides behind the previous tile's 2048
        FFMAs per thread. Cost: operand registers (166 -> 204 per thread, 3 -> 2 programs of
        4 warps per SM), which removes about as much latency hiding as the prefetch adds;
        shared memory stays 24 KB per program.
Expect: ~0.95-1.0x s04 at 4096^3 fp32 (H100 run 1: 0.94x, 37.3 vs 39.6 TFLOP/s; 7417859: 0.93-0.94x)
Limits: none (any M, N, K >= 1; unaligned inputs run with VEC=1, scalar loads)
Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
Pair:   cuda_src/s05_double_buffer.cu
Log:    docs/stages/s05_double_buffer.md
"""
import triton
import triton.language as tl

from study.tritonlib import hinted_tile, launch_tile

BLOCK_M = 128  # rows of C per program
BLOCK_N = 64   # cols of C per program: 128 x 64 fp32 acc = 64 floats per thread (no spills)
BLOCK_K = 32   # K step: (128 + 64) * 32 * 4 B = 24 KB of tiles per step
NUM_WARPS = 4  # 128 threads
NUM_WARPS_UNALIGNED = {"NN": 8, "NT": 8}  # VEC == 1 (4-byte loads): 4 warps spill 8 B at 4095^3
                                          # (sm_90); TN spills 16 B at 8 warps, none at 4
NUM_STAGES = 2  # one tile in flight (cp.async into one shared buffer) while one is in registers


@triton.jit
def s05_double_buffer_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
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
    return launch_tile(s05_double_buffer_kernel, a, b, c, alpha, beta, layout=layout, BLOCK_M=BLOCK_M,
                       BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=NUM_WARPS, num_stages=NUM_STAGES,
                       num_warps_unaligned=NUM_WARPS_UNALIGNED)
