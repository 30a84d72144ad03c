"""s98_lda_as_k: BROKEN ON PURPOSE (vector path indexes A with K, not lda), a fixture for tests/test_broken.py

Change: a 16x16x16 tiled fp16 tl.dot GEMM (tensor cores, fp32 accumulate) with a 16-byte vector
        path (VEC = 8, taken when rows are 16-byte aligned: study.tritonlib.vector_width) whose A
        row starts are rm * K: the row length, not the leading dimension lda.
Why:    the test suite must flag this kernel: right on every contiguous A (lda == K) and on the
        scalar path, wrong only when a padded A with an aligned lda takes the vector path (the
        views and int32 classes).
Expect: test failures (never part of the ladder: tests/broken/ is not in the registry)
Limits: none (any M, N, K >= 1)
Dtype:  fp16 in / fp32 acc / fp16 out        Arch: sm_80+      Layout: NN
Pair:   none: the vector-path slip is shown once, in Triton, where the interpreter runs it on CPU
"""
import triton
import triton.language as tl

from study.tritonlib import vector_width

BLOCK = 16

# Tests of the tests (tests/test_broken.py reads these lines): only a padded, aligned lda on the
# vector path shows the bug.
MUST_FAIL = {"views": "numeric", "int32": "numeric"}
MUST_PASS = ["shapes", "alpha_beta", "ints", "seeds", "nonfinite", "deterministic"]
MAY_FAIL = []


@triton.jit
def s98_lda_as_k_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                        BLOCK: tl.constexpr, VEC: tl.constexpr, BETA_ZERO: tl.constexpr):
    # --- tile assignment: program (pid_m, pid_n) owns a BLOCK x BLOCK tile of C --------------
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK + tl.arange(0, BLOCK)
    rn = tl.max_contiguous(tl.multiple_of(pid_n * BLOCK + tl.arange(0, BLOCK), BLOCK), BLOCK)
    rk = tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK), BLOCK), BLOCK)
    # --- operand staging: row starts, hinted to 16-byte runs on the vector path --------------
    if VEC > 1:
        a_rows = tl.multiple_of(rm * K, VEC)   # BUG: K is the row length; rows are lda apart
        b_rows = tl.multiple_of(rk * ldb, VEC)
        c_rows = tl.multiple_of(rm * ldc, VEC)
    else:
        a_rows = rm * lda
        b_rows = rk * ldb
        c_rows = rm * ldc
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    # --- loop over K: masked loads of one A and one B tile, fp16 tl.dot -------------------
    for k0 in range(0, K, BLOCK):
        a = tl.load(a_ptr + a_rows[:, None] + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + b_rows[:, None] + k0 * ldb + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    # --- epilogue: alpha/beta in fp32, one rounding to fp16 ---------------------------------
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    c_ptrs = c_ptr + c_rows[:, None] + rn[None, :]
    out = alpha * acc
    if not BETA_ZERO:
        out += beta * tl.load(c_ptrs, mask=mask, other=0.0).to(tl.float32)
    tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=mask)


def matmul(a, b, c, alpha=1.0, beta=0.0):
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))
    s98_lda_as_k_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                              float(alpha), float(beta), BLOCK=BLOCK, VEC=vector_width(a, b, c),
                              BETA_ZERO=(beta == 0))
    return c
