"""s01_naive: one program per strip of C, scalar loop over K

Change: the starting point: each program owns BLOCK_N consecutive elements of one row of C and
        walks K one step at a time, multiplying a scalar of A by a row segment of B.
Why:    no tile reuse: every step loads 1 float of A and BLOCK_N floats of B for 2*BLOCK_N FLOPs,
        intensity ~0.5 FLOP/B, deep in the memory-bound region like the CUDA naive kernel.
Expect: ~12% of cuBLAS FP32 at 4096^3 (H100 study at 7417859: 5.9 TFLOP/s; predicted 2-5%)
Limits: N <= 8388480 (grid axis 1 holds N/128 programs, limit 65535), else ValueError
Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
Pair:   cuda_src/s01_naive.cu
Log:    docs/stages/s01_naive.md
"""
import triton
import triton.language as tl

from study.tritonlaunch import cdiv, replay

BLOCK_N = 128  # columns of C per program: 128 consecutive floats, coalesced loads of B


@triton.jit
def s01_naive_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, ldc,
                     alpha, beta, BLOCK_N: tl.constexpr, BETA_ZERO: tl.constexpr):
    # --- tile assignment: program (n-strip, row m) -------------------------------------
    m = tl.program_id(0)       # axis 0 holds up to 2^31-1 programs: any M
    pid_n = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # [BLOCK_N]
    mask_n = offs_n < N

    # --- operand staging: none; a scalar of A and a row segment of B per step ------------
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)

    # --- loop over K -------------------------------------------------------------------
    # Element strides of A and B as views (NN: (lda, 1), (ldb, 1); NT's B (1, ldb); TN's A
    # (1, lda)): Triton specialises a stride of 1 to a constant, so the unit axis is known.
    for k in range(0, K):
        a = tl.load(a_ptr + m * stride_am + k * stride_ak)                           # scalar
        b = tl.load(b_ptr + k * stride_bk + offs_n * stride_bn, mask=mask_n, other=0.0)  # [BLOCK_N]
        acc += a * b

    # --- epilogue: beta == 0 never reads C ---------------------------------------------
    c_ptrs = c_ptr + m * ldc + offs_n
    out = alpha * acc
    if not BETA_ZERO:
        out += beta * tl.load(c_ptrs, mask=mask_n, other=0.0)
    tl.store(c_ptrs, out, mask=mask_n)


def matmul(a, b, c, alpha=1.0, beta=0.0, layout="NN"):
    """c = alpha * a @ b + beta * c on checked fp32 tensors (study validates the arguments); the
    kernel reads a and b through their strides, so every `layout` (NN, NT, TN) is the same call."""
    M, K = a.shape
    N = b.shape[1]
    grid = (M, cdiv(N, BLOCK_N))
    replay(s01_naive_kernel)[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), c.stride(0),
                                   float(alpha), float(beta), BLOCK_N=BLOCK_N, BETA_ZERO=(beta == 0))
    return c


def unsupported(a, b, c, layout="NN"):
    """None, or why this stage cannot run the problem (study raises it as ValueError)."""
    if cdiv(b.shape[1], BLOCK_N) > 65535:
        return "N must be <= 8388480: grid axis 1 holds N/128 programs (limit 65535)"
    return None
