"""s96_nt_row_major: BROKEN ON PURPOSE (indexes an NT operand as row-major B), a fixture for tests/test_broken.py

Change: a 16x16x16 tiled tl.dot fp32 GEMM declared `Layout: NT` (b is the (K, N) view of a
        contiguous (N, K) tensor, element (k, n) at b_ptr + n * ldb + k) whose B tile is
        addressed with the NN formula b_ptr + k * ldb + n: the layout mix-up of a stage ported
        from NN to NT.
Why:    the test suite must flag this kernel in the NT layout: it multiplies by a scrambled B
        (the right elements only where k == n), wrong on every non-trivial shape.
Expect: test failures (never part of the ladder: tests/broken/ is not in the registry)
Limits: none (any M, N, K >= 1)
Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NT
Pair:   none: the layout slip is shown once, in Triton, where the interpreter runs it on CPU
"""
import triton
import triton.language as tl

BLOCK = 16

# Tests of the tests (tests/test_broken.py reads these lines): every class has a shape where B's
# elements move.
MUST_FAIL = {"shapes": "numeric", "alpha_beta": "numeric", "ints": "exact", "seeds": "numeric", "nonfinite": "nonfinite", "views": "numeric", "int32": "numeric"}
MUST_PASS = ["deterministic"]
MAY_FAIL = []


@triton.jit
def s96_nt_row_major_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                                    BLOCK: tl.constexpr, BETA_ZERO: tl.constexpr):
    # --- tile assignment: program (pid_m, pid_n) owns a BLOCK x BLOCK tile of C --------------
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK + tl.arange(0, BLOCK)
    rn = pid_n * BLOCK + tl.arange(0, BLOCK)
    rk = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    # --- loop over K, operand staging: masked loads of one A and one B tile -----------------
    for k0 in range(0, K, BLOCK):
        k = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * lda + k[None, :],
                    mask=(rm[:, None] < M) & (k[None, :] < K), other=0.0)
        # BUG: NT stores element (k, n) at n * ldb + k; this is the NN address. The mask keeps
        # the (wrong) addresses inside the N x K buffer only when the shape happens to allow it,
        # so it is clamped to the stored tensor's extent ((N - 1) * ldb + K elements; int32
        # products that wrap negative excluded) to fail by value, not by a fault.
        off = k[:, None] * ldb + rn[None, :]
        ok = (k[:, None] < K) & (rn[None, :] < N) & (off >= 0) & (off < (N - 1) * ldb + K)
        b = tl.load(b_ptr + off, mask=ok, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    # --- epilogue ---------------------------------------------------------------------------
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    c_ptrs = c_ptr + rm[:, None] * ldc + rn[None, :]
    out = alpha * acc
    if not BETA_ZERO:
        out += beta * tl.load(c_ptrs, mask=mask, other=0.0)
    tl.store(c_ptrs, out, mask=mask)


def matmul(a, b, c, alpha=1.0, beta=0.0):
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))
    s96_nt_row_major_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(1), c.stride(0),
                                          float(alpha), float(beta), BLOCK=BLOCK, BETA_ZERO=(beta == 0))
    return c
