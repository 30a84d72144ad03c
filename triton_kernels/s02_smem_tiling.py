"""s02_smem_tiling: 32x32 tiles, reduced by broadcast multiply and sum

Change: vs s01, each program owns a 32x32 tile of C and walks K in slabs of 8: a [32, 8] tile of A
        and the transposed [32, 8] tile of B, reduced as (a[:, None, :] * bt[None, :, :]).sum(2).
Why:    every loaded element now serves 32 outputs: 2*32*8 floats for 2*32*32*8 FLOPs per step,
        8 FLOP/B instead of s01's ~0.5. Without tl.dot, Triton emits plain FFMAs on CUDA cores
        and stages operands the way it chooses (the counterpart of the CUDA shared tiles); the
        other form, (a[:, :, None] * b[None, :, :]).sum(1), is rewritten into a TF32 tl.dot.
Expect: ~0.5x s01 at 4096^3, ~6% of cuBLAS FP32 (H100 at 7417859: 3.2 TFLOP/s; predicted 2-5x s01)
Limits: N <= 2097120 (grid axis 1 holds N/32 programs, limit 65535), else ValueError
Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
Pair:   cuda_src/s02_smem_tiling.cu
Log:    docs/stages/s02_smem_tiling.md
"""
import triton
import triton.language as tl

from study.tritonlaunch import cdiv, replay

BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 8  # [32, 8, 32] product = 8192 values over 4 warps


@triton.jit
def s02_smem_tiling_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, ldc,
                           alpha, beta,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           BETA_ZERO: tl.constexpr):
    # --- tile assignment: program (pid_m, pid_n) owns a BLOCK_M x BLOCK_N tile of C -----
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)

    # --- operand staging: pointers to the first A [BM, BK] and B^T [BN, BK] tiles, through
    # the views' element strides (a stride of 1 is specialised to a constant: any layout) ----
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    bt_ptrs = b_ptr + offs_n[:, None] * stride_bn + offs_k[None, :] * stride_bk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)

    # --- loop over K: masked loads give zeros past the edges, which add nothing ---------
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + offs_k) < K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & k_ok[None, :], other=0.0)
        bt = tl.load(bt_ptrs, mask=(offs_n[:, None] < N) & k_ok[None, :], other=0.0)
        acc += tl.sum(a[:, None, :] * bt[None, :, :], axis=2)  # [BM, BN, BK] -> [BM, BN]
        a_ptrs += BLOCK_K * stride_ak
        bt_ptrs += BLOCK_K * stride_bk

    # --- epilogue: beta == 0 never reads C ------------------------------------------------
    c_ptrs = c_ptr + offs_m[:, None] * ldc + offs_n[None, :]
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    out = alpha * acc
    if not BETA_ZERO:
        out += beta * tl.load(c_ptrs, mask=c_mask, other=0.0)
    tl.store(c_ptrs, out, mask=c_mask)


def matmul(a, b, c, alpha=1.0, beta=0.0, layout="NN"):
    """c = alpha * a @ b + beta * c on checked fp32 tensors (study validates the arguments); the
    kernel reads a and b through their strides, so every `layout` (NN, NT, TN) is the same call."""
    M, K = a.shape
    N = b.shape[1]
    grid = (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N))
    replay(s02_smem_tiling_kernel)[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), c.stride(0),
                                         float(alpha), float(beta), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                         BLOCK_K=BLOCK_K, BETA_ZERO=(beta == 0))
    return c


def unsupported(a, b, c, layout="NN"):
    """None, or why this stage cannot run the problem (study raises it as ValueError)."""
    if cdiv(b.shape[1], BLOCK_N) > 65535:
        return "N must be <= 2097120: grid axis 1 holds N/32 programs (limit 65535)"
    return None
