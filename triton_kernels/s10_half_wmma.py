"""s10_half_wmma: tensor cores on fp16/bf16 tiles, fp32 accumulate

Change: vs s09, fp16 or bf16 operands: tl.dot on 16-bit tiles with an fp32 accumulator, one fixed
        tile (no autotune, no grouped order), Triton's default pipeline depth (num_stages=3).
Why:    half the bytes per operand and the full-rate tensor-core path: H100 dense fp16/bf16 runs
        at ~2x its tf32 rate (989 vs 495 TFLOP/s datasheet). A 128x128 tile with BK=32 loads
        (128+128)*32*2 B = 16 KiB per K step for 2*128*128*32 = 1 MFLOP: 64 FLOP/B, below the
        H100 DRAM ridge (~266 FLOP/B for BF16), so it runs near peak only while most tile loads
        hit L2; row-major program order gives no help there (s11 adds grouping).
Expect: ~65-70% of cuBLAS FP16/BF16 at 4096^3 and 8192^3 (H100 studies: 467-539 TFLOP/s)
Limits: none (any M, N, K >= 1)
Dtype:  fp16, bf16 in / fp32 acc / same as in out        Arch: sm_80+      Layout: NN
Pair:   cuda_src/s10_half_wmma.cu
Log:    docs/stages/s10_half_wmma.md
"""
import triton
import triton.language as tl

from study.tritonlib import hinted_offsets, vector_width

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
                         VEC: tl.constexpr, BETA_ZERO: tl.constexpr):
    tl.static_assert(VEC == 1 or VEC == 8, "VEC is 8 (16-byte aligned rows, K and N) or 1")
    # --- tile assignment: program (pid_m, pid_n) in row-major order -------------------------
    pid_m = tl.program_id(0)   # axis 0 holds up to 2^31-1 programs: any M
    pid_n = tl.program_id(1)
    # --- operand staging: pointer tiles, A [BLOCK_M, BLOCK_K] and B [BLOCK_K, BLOCK_N] ------
    # Rows beyond M / columns beyond N are masked to 0: they only feed C elements that are
    # never stored, so the dot itself needs no per-element test. Triton proves 16-byte copies
    # only for arguments divisible by 16; VEC = 8 passes on what the wrapper checked (row
    # starts, K and N multiples of 8 halves), else lda = 1000 would load 2 bytes at a time.
    offs_m, offs_n, offs_k, a_rows, b_rows, c_rows, k_lim, n_lim = hinted_offsets(
        pid_m, pid_n, N, K, lda, ldb, ldc, BLOCK_M, BLOCK_N, BLOCK_K, VEC)
    a_ptrs = a_ptr + a_rows[:, None] + offs_k[None, :]
    b_ptrs = b_ptr + b_rows[:, None] + offs_n[None, :]
    mask_m = offs_m < M
    mask_n = offs_n < n_lim
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)   # fp32 accumulator in registers

    # --- loop over K: fp16/bf16 tiles into tl.dot, fp32 accumulate -------------------------
    for k0 in range(0, K, BLOCK_K):
        in_k = (k0 + offs_k) < k_lim                      # the last step may be partial
        a = tl.load(a_ptrs, mask=mask_m[:, None] & in_k[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=in_k[:, None] & mask_n[None, :], other=0.0)
        acc = tl.dot(a, b, acc)                           # 16-bit inputs: tensor-core MMA
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * ldb

    # --- epilogue: alpha/beta in fp32, one rounding to the output dtype --------------------
    c_ptrs = c_ptr + c_rows[:, None] + offs_n[None, :]
    mask_c = mask_m[:, None] & mask_n[None, :]
    out = alpha * acc
    if not BETA_ZERO:   # beta == 0: C is write-only and never loaded (it may hold NaN)
        out += beta * tl.load(c_ptrs, mask=mask_c, other=0.0).to(tl.float32)
    tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=mask_c)


def matmul(a, b, c, alpha=1.0, beta=0.0):
    """c = alpha * a @ b + beta * c on checked fp16/bf16 tensors (study validates them)."""
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    vec = vector_width(a, b, c)
    s10_half_wmma_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                               float(alpha), float(beta),
                               BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, VEC=vec,
                               BETA_ZERO=(beta == 0), num_warps=NUM_WARPS if vec > 1 else NUM_WARPS_UNALIGNED,
                               num_stages=NUM_STAGES)
    return c


def unsupported(a, b, c):
    """None, or why this stage cannot run the problem (study raises it as ValueError)."""
    if triton.cdiv(b.shape[1], BLOCK_N) > 65535:
        return "N must be <= 8388480: grid axis 1 holds N/128 programs (limit 65535)"
    return None
