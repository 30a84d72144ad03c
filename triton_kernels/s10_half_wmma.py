"""s10_half_wmma: tensor cores on fp16/bf16 tiles, fp32 accumulate

Change: vs s09, fp16 or bf16 operands: tl.dot on 16-bit tiles with an fp32 accumulator, one fixed
        tile (no autotune, no grouped order), Triton's default pipeline depth (num_stages=3).
Why:    half the bytes per operand and the full-rate tensor-core path: H100 dense fp16/bf16 runs
        at ~2x its tf32 rate (989 vs 495 TFLOP/s datasheet). A 128x128 tile with BK=32 loads
        (128+128)*32*2 B = 16 KiB per K step for 2*128*128*32 = 1 MFLOP: 64 FLOP/B, below the
        H100 DRAM ridge (~266 FLOP/B for BF16), so it runs near peak only while most tile loads
        hit L2; row-major program order gives no help there (s11 adds grouping).
Expect: ~65-70% of cuBLAS FP16/BF16 at 4096^3 and 8192^3 (H100 studies: 467-539 TFLOP/s)
Limits: none (any M, N, K >= 1, any leading dimensions as stored: 16-byte loads need aligned
        rows and K, N (TN: and M) multiples of 8, else 2-byte loads)
Dtype:  fp16, bf16 in / fp32 acc / same as in out        Arch: sm_80+      Layout: NN, NT, TN
Pair:   cuda_src/s10_half_wmma.cu
Log:    docs/stages/s10_half_wmma.md
"""
import triton
import triton.language as tl

from study.tritonlib import hinted_tile, launch_tile
from study.tritonlaunch import cdiv

# One configuration, chosen by rule of thumb for Hopper (not tuned: that is s11's job).
BLOCK_M = 128    # rows of C per program: two 64-row wgmma tiles for one warpgroup
BLOCK_N = 128    # columns of C per program
BLOCK_K = 32     # K step: 32 halves = 64 B per row, two k16 MMA steps per tile
NUM_WARPS = 4    # one warpgroup; fp32 acc 128*128/128 threads = 128 registers per thread
NUM_WARPS_UNALIGNED = 8  # rows not 16-byte aligned (VEC == 1): 2-byte loads keep their addresses
                         # in registers, and 4 warps spill 632 B at 4095^3 (sm_90); 8 do not
NUM_STAGES = 3   # Triton's default pipeline depth, written out so it is visible
# smem: NUM_STAGES * (BLOCK_M + BLOCK_N) * BLOCK_K * 2 B = 3 * 16 KiB = 48 KiB per program

assert BLOCK_K >= 16 and BLOCK_K % 16 == 0, "BLOCK_K must be a multiple of 16 (fp16 MMA k-step)"
assert BLOCK_M % 64 == 0, "BLOCK_M must be a multiple of 64 (wgmma M per warpgroup)"
assert BLOCK_N % 8 == 0 and BLOCK_N <= 256, "BLOCK_N must be a multiple of 8, at most 256 (wgmma N)"


@triton.jit
def s10_half_wmma_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         VEC: tl.constexpr, BETA_ZERO: tl.constexpr, LAYOUT: tl.constexpr):
    # --- tile assignment: program (pid_m, pid_n) in row-major order -------------------------
    pid_m = tl.program_id(0)   # axis 0 holds up to 2^31-1 programs: any M
    pid_n = tl.program_id(1)
    # --- operand staging, loop over K, epilogue: study.tritonlib.hinted_tile (s04's tile) on
    # fp16/bf16 tiles: A [BLOCK_M, BLOCK_K] and B [BLOCK_K, BLOCK_N] into tl.dot, which on
    # 16-bit inputs is a tensor-core MMA (DOT_PRECISION None); fp32 accumulator in registers;
    # alpha/beta in fp32, one rounding to the output dtype. Rows beyond M / columns beyond N
    # are masked to 0: they only feed C elements that are never stored, so the dot itself
    # needs no per-element test. Triton proves 16-byte copies only for arguments divisible by
    # 16; VEC = 8 passes on what the wrapper checked (row starts, K and N multiples of 8
    # halves), else lda = 1000 would load 2 bytes at a time. LAYOUT: NT's B tile is read
    # along K from B stored N x K, TN's A tile along M from A stored K x M (lda, ldb: row
    # strides as stored); tl.dot takes the tiles as they are, transposed smem reads included.
    hinted_tile(pid_m, pid_n, a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                BLOCK_M, BLOCK_N, BLOCK_K, VEC, BETA_ZERO, False, None, LAYOUT)


def matmul(a, b, c, alpha=1.0, beta=0.0, layout="NN"):
    """c = alpha * a @ b + beta * c on checked fp16/bf16 tensors (study validates them) in
    `layout` (NN, NT or TN: which of a, b is a transposed view, as study read it)."""
    grid = (cdiv(a.shape[0], BLOCK_M), cdiv(b.shape[1], BLOCK_N))   # 2-D, row-major
    return launch_tile(s10_half_wmma_kernel, a, b, c, alpha, beta, grid=grid, layout=layout,
                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=NUM_WARPS,
                       num_stages=NUM_STAGES, num_warps_unaligned=NUM_WARPS_UNALIGNED)


def unsupported(a, b, c, layout="NN"):
    """None, or why this stage cannot run the problem (study raises it as ValueError)."""
    if cdiv(b.shape[1], BLOCK_N) > 65535:
        return "N must be <= 8388480: grid axis 1 holds N/128 programs (limit 65535)"
    return None
