"""s95_reads_c_always: BROKEN ON PURPOSE (reads C when beta = 0), a fixture for tests/test_broken.py

Change: a 16x16x16 tiled tl.dot fp32 GEMM where the epilogue always computes alpha * acc + beta * C.
Why:    the test suite must flag this kernel: beta == 0 with C full of NaN gives NaN (0 * NaN).
Expect: test failures (never part of the ladder: tests/broken/ is not in the registry)
Limits: none (any M, N, K >= 1)
Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN
Pair:   tests/broken/s95_reads_c_always.cu
"""
import triton
import triton.language as tl

BLOCK = 16

# Tests of the tests (tests/test_broken.py reads these lines): every class has beta == 0 on a NaN C
# (the deterministic class compares NaN with NaN).
MUST_FAIL = {"shapes": "numeric", "alpha_beta": "numeric", "ints": "exact", "seeds": "numeric", "nonfinite": "nonfinite", "views": "numeric", "int32": "numeric"}
MUST_PASS = ["deterministic"]
MAY_FAIL = []


@triton.jit
def s95_reads_c_always_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                              BLOCK: tl.constexpr, BETA_ZERO: tl.constexpr):
    # --- tile assignment: program (pid_m, pid_n) owns a BLOCK x BLOCK tile of C --------------
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK + tl.arange(0, BLOCK)
    rn = pid_n * BLOCK + tl.arange(0, BLOCK)
    rk = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    ktiles = tl.cdiv(K, BLOCK)
    klim = K
    # --- loop over K, operand staging: masked loads of one A and one B tile -----------------
    for kt in range(0, ktiles):
        k = kt * BLOCK + rk
        a = tl.load(a_ptr + rm[:, None] * lda + k[None, :],
                    mask=(rm[:, None] < M) & (k[None, :] < klim), other=0.0)
        b = tl.load(b_ptr + k[:, None] * ldb + rn[None, :],
                    mask=(k[:, None] < klim) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    # --- epilogue ---------------------------------------------------------------------------
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    c_ptrs = c_ptr + rm[:, None] * ldc + rn[None, :]
    out = alpha * acc
    out += beta * tl.load(c_ptrs, mask=mask, other=0.0)  # even when beta == 0: the bug
    tl.store(c_ptrs, out, mask=mask)


def matmul(a, b, c, alpha=1.0, beta=0.0):
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))
    s95_reads_c_always_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                          float(alpha), float(beta), BLOCK=BLOCK, BETA_ZERO=(beta == 0))
    return c
