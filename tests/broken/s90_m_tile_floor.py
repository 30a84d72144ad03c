"""s90_m_tile_floor: BROKEN ON PURPOSE (wrong only when M is not a multiple of the tile), a fixture for tests/test_broken.py

Change: a 16x16x16 tiled tl.dot fp32 GEMM whose grid has M // 16 tile rows (floor, not cdiv):
        the last partial tile row of C is never computed.
Why:    the test suite must flag this kernel: right whenever 16 divides M, so every test class
        needs a ragged M; rows past the last whole tile keep NaN (beta = 0) or the old C.
Expect: test failures (never part of the ladder: tests/broken/ is not in the registry)
Limits: none (any M, N, K >= 1)
Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN
Pair:   tests/broken/s90_m_tile_floor.cu
"""
import triton
import triton.language as tl

BLOCK = 16

# Tests of the tests (tests/test_broken.py reads these lines): every class has a ragged M (the
# deterministic class's missing rows are missing alike in every run).
MUST_FAIL = {"shapes": "numeric", "alpha_beta": "numeric", "ints": "exact", "seeds": "numeric", "nonfinite": "nonfinite", "views": "numeric", "int32": "numeric"}
MUST_PASS = ["deterministic"]
MAY_FAIL = []


@triton.jit
def s90_m_tile_floor_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
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
        b = tl.load(b_ptr + k[:, None] * ldb + rn[None, :],
                    mask=(k[:, None] < K) & (rn[None, :] < N), other=0.0)
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
    grid = (M // BLOCK, triton.cdiv(N, BLOCK))   # BUG: floor: a partial last tile row gets no program
    s90_m_tile_floor_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                  float(alpha), float(beta), BLOCK=BLOCK, BETA_ZERO=(beta == 0))
    return c
