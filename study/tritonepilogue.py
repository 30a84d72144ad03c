"""The epilogues shared by the Triton stages that store C through pointers a part at a time.

`update_c_in_parts`: C = out + beta * C over a tile, a quarter of its rows at a time. With the
whole tile's C values and addresses live beside the accumulators, the beta != 0 variants that the
study's alpha/beta check compiles at every timed shape spilled registers on sm_90 (8-2080 bytes
of local memory at 512^3, 1000^3 and 4095^3 in s03-s11 and s15; tests/test_static.py compiles
both beta cases of every config for sm_90 on the CPU). `store_c_in_parts`: the same with a
BETA_ZERO switch, for tritonlib.store_c_tile (s12-s14), which also takes it for beta == 0 when
C's rows are not 16-byte aligned (VEC == 1: an address per element; 24-560 bytes of local memory
at N = 1001 in s12 and s13). beta == 0 with aligned C keeps each stage's own one-line store: that
is the timed path.
"""
import triton
import triton.language as tl


@triton.jit
def update_c_in_parts(c_ptr, out, offs_m, offs_n, M, n_lim, ldc, beta,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, VEC: tl.constexpr):
    """C = out + beta * C (beta != 0) over the BLOCK_M x BLOCK_N tile of rows offs_m and columns
    offs_n, a quarter of the rows at a time (halves below 64 rows): C's values and addresses for
    the whole tile beside the accumulators spilled registers at unaligned sizes (VEC == 1: one
    address per element). The rows come split from offs_m, live through the K loop anyway:
    a row index kept for the epilogue alone was spilled across the loop."""
    store_c_in_parts(c_ptr, out, offs_m, offs_n, M, n_lim, ldc, beta, BLOCK_M, BLOCK_N, VEC, False)


@triton.jit
def store_c_in_parts(c_ptr, out, offs_m, offs_n, M, n_lim, ldc, beta,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, VEC: tl.constexpr, BETA_ZERO: tl.constexpr):
    """C = out (BETA_ZERO: C is never read) or out + beta * C, a quarter of the rows at a time
    (halves below 64 rows), as update_c_in_parts."""
    top, bottom = _halves(out, BLOCK_M, BLOCK_N)
    top_m, bottom_m = _halves_1d(offs_m, BLOCK_M)
    if BLOCK_M >= 64:
        _update_halves(c_ptr, top, top_m, offs_n, M, n_lim, ldc, beta, BLOCK_M // 2, BLOCK_N, VEC, BETA_ZERO)
        _update_halves(c_ptr, bottom, bottom_m, offs_n, M, n_lim, ldc, beta, BLOCK_M // 2, BLOCK_N, VEC, BETA_ZERO)
    else:
        _axpby_rows(c_ptr, top, top_m, offs_n, M, n_lim, ldc, beta, VEC, BETA_ZERO)
        _axpby_rows(c_ptr, bottom, bottom_m, offs_n, M, n_lim, ldc, beta, VEC, BETA_ZERO)


@triton.jit
def _halves(x, ROWS: tl.constexpr, COLS: tl.constexpr):
    """The top and bottom halves of the rows of a 2-D tile."""
    return tl.split(tl.permute(tl.reshape(x, (2, ROWS // 2, COLS)), (1, 2, 0)))


@triton.jit
def _halves_1d(x, ROWS: tl.constexpr):
    """The first and second halves of a 1-D tensor."""
    return tl.split(tl.permute(tl.reshape(x, (2, ROWS // 2)), (1, 0)))


@triton.jit
def _update_halves(c_ptr, out, offs_m, offs_n, M, n_lim, ldc, beta,
                   ROWS: tl.constexpr, BLOCK_N: tl.constexpr, VEC: tl.constexpr, BETA_ZERO: tl.constexpr):
    top, bottom = _halves(out, ROWS, BLOCK_N)
    top_m, bottom_m = _halves_1d(offs_m, ROWS)
    _axpby_rows(c_ptr, top, top_m, offs_n, M, n_lim, ldc, beta, VEC, BETA_ZERO)
    _axpby_rows(c_ptr, bottom, bottom_m, offs_n, M, n_lim, ldc, beta, VEC, BETA_ZERO)


@triton.jit
def _axpby_rows(c_ptr, out, rows, offs_n, M, n_lim, ldc, beta, VEC: tl.constexpr, BETA_ZERO: tl.constexpr):
    c_rows = rows * ldc
    if VEC > 1:
        c_rows = tl.multiple_of(c_rows, VEC)
    c_ptrs = c_ptr + c_rows[:, None] + offs_n[None, :]
    mask = (rows < M)[:, None] & (offs_n < n_lim)[None, :]
    if not BETA_ZERO:
        out += beta * tl.load(c_ptrs, mask=mask, other=0.0).to(tl.float32)
    tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=mask)
