"""Helpers shared by the Triton stages (owned by the Triton stages s03-s11).

- `grouped_tile`: the grouped ("swizzled") program order of s07 onwards, as a @triton.jit helper.
- `hinted_tile` / `vector_width`: the tile of s04 (128-bit hinted loads and stores) that
  s05-s08 reuse in fp32 and s10-s11 in fp16/bf16: those stages change only knobs around it
  (s08 and s11 also turn on its EVEN path, unmasked loads; DOT_PRECISION "ieee" for fp32).
  `hinted_offsets`: its hinted row starts and bounds. `launch_tile`: the `matmul` of those
  stages (strides, VEC, BETA_ZERO, one program per C tile). `tile_config`: the autotune
  configs of the pointer stages s08, s09, s11 (argument order as `tma_config`).
- `store_c_tile` / `c_vector_width`: the hinted C epilogue of the TMA stages s12-s13;
  `tma_config` / `tma_unsupported`: their tile configs (host-side TMA box sizes stamped per
  config and layout) and limits; `stored_operands`: A and B as stored (row-major) per layout.
- Layouts (study.operands.TRANSPOSED): NN, NT (b the view of a row-major (N, K)) and TN (a the
  view of a row-major (K, M)). `hinted_tile` reads each through strides (LAYOUT constexpr,
  default NN: s04-s09 compile as before); the TMA stages put their descriptors on the tensors
  as stored and feed `.T` of a transposed box to tl.dot (wgmma reads either major order of
  16-bit operands from smem).
- `even_tiles`: EVEN = the chosen tile divides M, N and K, so the autotuned pointer stages
  (s08, s09, s11) load without masks there.
- `autotune_do_bench` / `autotune_prune`: let @triton.autotune run under TRITON_INTERPRET=1 on a
  CPU (the interpreter has no device timer: take the first config and time nothing), and time
  with study.tunetimer.queued_bench on a GPU. `prune_unaligned`: the configs an unaligned (VEC == 1)
  call may use, where the others would spill registers.
"""
import triton
import triton.language as tl

from study.operands import TRANSPOSED
from study.tritonepilogue import store_c_in_parts, update_c_in_parts
from study.tritonlaunch import INTERPRET, cdiv, replay, stored_layout  # noqa: F401 (INTERPRET: stages import it)
from study.tunetimer import queued_bench


@triton.jit
def grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Map a 1-D program id to (pid_m, pid_n) walking C in bands of GROUP_M tile rows.

    Inside a band, consecutive programs go down a column of GROUP_M tiles before moving right, so
    the programs resident at one time share GROUP_M A row-panels and ~#resident/GROUP_M B column
    panels instead of 1 A panel and #resident B panels: fewer distinct panels -> more L2 hits.
    GROUP_M == 1 gives plain row-major order. The last band may hold fewer than GROUP_M rows.
    """
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    progs_per_band = GROUP_M * grid_n
    band = pid // progs_per_band
    first_m = band * GROUP_M
    band_rows = min(grid_m - first_m, GROUP_M)  # short last band
    pid_m = first_m + (pid % progs_per_band) % band_rows
    pid_n = (pid % progs_per_band) // band_rows
    return pid_m, pid_n


def _tiles_divide(args):
    return (args["M"] % args["BLOCK_M"] == 0 and args["N"] % args["BLOCK_N"] == 0
            and args["K"] % args["BLOCK_K"] == 0)


# @triton.heuristics under @triton.autotune: evaluated after the autotuner has put a config's
# BLOCK_M/N/K into the arguments, so EVEN is exact for the tile that runs (one more kernel
# specialisation per config).
even_tiles = triton.heuristics({"EVEN": _tiles_divide})


def autotune_do_bench(kernel_call, quantiles):
    """do_bench for @triton.autotune: GPU time (study.tunetimer), a no-op timer in the interpreter."""
    if INTERPRET:
        kernel_call()  # run once so a bad config still fails loudly
        return [0.0 for _ in quantiles]
    # ~25 ms of repeats per config, each queued behind a GPU spin: no host time in the events
    return queued_bench(kernel_call, quantiles=quantiles)


def autotune_prune(configs, named_args, **kwargs):
    """early_config_prune: the interpreter (~4 ms per program per K step) only tries configs[0]."""
    return configs[:1] if INTERPRET else configs


def prune_unaligned(unaligned_configs):
    """early_config_prune for a stage whose VEC == 1 path (rows not 16-byte aligned: 2- or 4-byte
    loads whose addresses stay in registers) needs more registers than some of its configs
    leave: with VEC == 1 only `unaligned_configs` are tried (checked spill-free for sm_90 by
    tests/test_static.py at a 4095^3 call): a list, or a dict of lists by the kernel's LAYOUT
    argument (s11). The autotune key must include VEC (and LAYOUT)."""
    def prune(configs, named_args, **kwargs):
        out = configs
        if kwargs.get("VEC", 1) == 1:
            out = unaligned_configs
            out = list(out[kwargs.get("LAYOUT", "NN")] if isinstance(out, dict) else out)
        return autotune_prune(out, named_args, **kwargs)
    return prune


@triton.jit
def hinted_offsets(pid_m, pid_n, N, K, lda, ldb, ldc,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   VEC: tl.constexpr):
    """Offsets of a row-major (NN) tile, hinted to VEC-element (16-byte) runs when VEC > 1:
    (offs_m, offs_n, offs_k, a_rows, b_rows, c_rows, k_lim, n_lim). True because the wrapper
    checked it (vector_width): with VEC > 1 every row start is a multiple of VEC elements and
    the K / N bounds are multiples of VEC, so a mask is constant over each group of VEC elements
    and one predicated 16-byte access serves the group. Triton infers this itself only for
    arguments divisible by 16 (lda = 1000 would give 4- or 2-byte accesses)."""
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    # runs of BLOCK_N consecutive columns starting at a multiple of BLOCK_N (always true)
    offs_n = tl.max_contiguous(tl.multiple_of(pid_n * BLOCK_N + tl.arange(0, BLOCK_N), BLOCK_N), BLOCK_N)
    offs_k = tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK_K), BLOCK_K), BLOCK_K)
    a_rows = offs_m * lda                     # [BM] row starts of A
    b_rows = offs_k * ldb                     # [BK] row starts of B
    c_rows = offs_m * ldc                     # [BM] row starts of C
    k_lim = tl.full((BLOCK_K,), K, tl.int32)  # [BK], all == K: a tensor so it can carry a hint
    n_lim = tl.full((BLOCK_N,), N, tl.int32)  # [BN], all == N
    if VEC > 1:  # no hint at all for VEC == 1: a hint of 1 would erase Triton's own inference
        a_rows = tl.multiple_of(a_rows, VEC)
        b_rows = tl.multiple_of(b_rows, VEC)
        c_rows = tl.multiple_of(c_rows, VEC)
        k_lim = tl.multiple_of(k_lim, VEC)
        n_lim = tl.multiple_of(n_lim, VEC)
    return offs_m, offs_n, offs_k, a_rows, b_rows, c_rows, k_lim, n_lim


@triton.jit
def store_c_tile(c_ptr, acc, off_m, off_n, M, N, ldc, alpha, beta,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, C_VEC: tl.constexpr,
                 BETA_ZERO: tl.constexpr):
    """Epilogue of the TMA stages (s12-s14): C = alpha * acc (+ beta * C) in fp32, one rounding
    to C's dtype, masked pointer stores at any ldc. C_VEC = 8 passes on what the wrapper checked
    (C 16-byte aligned, ldc and N multiples of 8) to one store of the whole tile; beta != 0 or
    C_VEC < 8 store a part of the rows at a time (tritonepilogue: the whole tile's C values or
    2-byte store addresses spilled registers). beta == 0 never reads C (it may hold NaN)."""
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = tl.max_contiguous(tl.multiple_of(off_n + tl.arange(0, BLOCK_N), BLOCK_N), BLOCK_N)
    c_rows = offs_m * ldc
    n_lim = tl.full((BLOCK_N,), N, tl.int32)
    if C_VEC > 1:
        c_rows = tl.multiple_of(c_rows, C_VEC)
        n_lim = tl.multiple_of(n_lim, C_VEC)
    c_ptrs = c_ptr + c_rows[:, None] + offs_n[None, :]
    mask_c = (offs_m[:, None] < M) & (offs_n < n_lim)[None, :]
    if BETA_ZERO and C_VEC > 1:   # the timed path: one store
        tl.store(c_ptrs, (alpha * acc).to(c_ptr.dtype.element_ty), mask=mask_c)
    else:   # C read, or an address per element: part of the rows at a time (no spills)
        store_c_in_parts(c_ptr, alpha * acc, offs_m, offs_n, M, n_lim, ldc, beta, BLOCK_M, BLOCK_N, C_VEC, BETA_ZERO)


def tile_config(bm, bn, bk, stages, warps, group_m=8, pre_hook=None):
    """An autotune config of a tiled stage: BM x BN tiles of C over BK-deep K steps, GROUP_M tile
    rows per band of the grouped order (s08, s09, s11; through tma_config s12, s13)."""
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m},
                         num_stages=stages, num_warps=warps, pre_hook=pre_hook)


def _set_tma_block_shapes(nargs):
    # The descriptors are built before the autotuner picks a tile: each config stamps its
    # TMA box sizes on them just before launch (host-side descriptors are plain Python data).
    # A box spans one K step in the operand's stored order: (K, M) for TN's A, (N, K) for NT's B.
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    a_t, b_t = TRANSPOSED[nargs.get("LAYOUT", "NT")]
    nargs["a_desc"].block_shape = [bk, bm] if a_t else [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk] if b_t else [bk, bn]


def tma_config(bm, bn, bk, stages, warps, group_m, host_descriptors=True):
    """A tile config of the TMA stages (s12, s13): with host_descriptors, a_desc / b_desc get its
    box sizes before launch (s13 builds its descriptors on the device from the BLOCK sizes).
    Checked against the TMA and wgmma limits; smem = stages * (bm + bn) * bk * 2 B."""
    assert bk * 2 <= 128, "BLOCK_K * 2 B must fit one 128-byte TMA swizzle row"
    assert bm <= 256 and bn <= 256, "a TMA box is at most 256 rows"
    assert bm % 64 == 0 and bn % 8 == 0, "tile must fit wgmma (M % 64, N % 8)"
    assert stages * (bm + bn) * bk * 2 <= 227 * 1024, "pipeline must fit 227 KiB of smem"
    return tile_config(bm, bn, bk, stages, warps, group_m,
                       pre_hook=_set_tma_block_shapes if host_descriptors else None)


def stored_operands(a, b, layout):
    """(A, B) as stored, both row-major: A (M, K), or (K, M) for TN (a's transpose); B (K, N), or
    (N, K) for NT. Views, never copies: a TMA descriptor goes on these."""
    a_t, b_t = TRANSPOSED[layout]
    return _one_row((a.t() if a_t else a)), _one_row((b.t() if b_t else b))


def _one_row(t):
    """t, or for a single stored row whose row stride is not a 16-byte multiple the same view
    with the row stride rounded up to one (tritonlaunch.stored_layout says why)."""
    ld = stored_layout(t)[2]
    return t if ld == t.stride(0) else t.as_strided(t.shape, (ld, t.stride(1)))


def tma_unsupported(a, b, c, layout="NT"):
    """None, or why a TMA stage cannot load a and b in `layout`: TMA needs 16-byte aligned
    bases and row strides of each operand as stored (stored_operands: NT's b is an (N, K)
    tensor, so its row stride is b.stride(1); TN's a a (K, M) one, row stride a.stride(1))."""
    a_t, b_t = TRANSPOSED[layout]
    sa, sb = stored_operands(a, b, layout)
    for name, t, ld_name, transposed, stored in (("a", sa, "lda", a_t, "(K, M)"),
                                                 ("b", sb, "ldb", b_t, "(N, K)")):
        ld = t.stride(0)
        if t.data_ptr() % 16 != 0:
            return f"{name} must be 16-byte aligned for TMA (data_ptr % 16 == {t.data_ptr() % 16})"
        if ld % 8 != 0:
            where = f" ({name}.stride(1): the view of a row-major {stored} tensor)" if transposed else ""
            return f"{ld_name} must be a multiple of 8 elements for TMA (16-byte row stride), got {ld}{where}"
    return None


def c_vector_width(c):
    """8 when C's rows are 16-byte runs of halves (aligned base, ldc and N multiples of 8), else 1."""
    return 8 if c.data_ptr() % 16 == 0 and c.stride(0) % 8 == 0 and c.shape[1] % 8 == 0 else 1


@triton.jit
def hinted_tile(pid_m, pid_n, a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                VEC: tl.constexpr, BETA_ZERO: tl.constexpr, EVEN: tl.constexpr,
                DOT_PRECISION: tl.constexpr, LAYOUT: tl.constexpr = tl.constexpr("NN")):
    """One BLOCK_M x BLOCK_N tile of C = alpha*A@B + beta*C, fp32 accumulate, its loads and
    stores hinted to 128 bits when VEC > 1 (VEC elements = 16 bytes). Born in s04_vectorized
    (fp32, DOT_PRECISION="ieee"); s05-s08 differ only in the program order around it and in the
    launch knobs (num_warps, num_stages, autotuning), s10-s11 feed it fp16/bf16
    (DOT_PRECISION=None: 16-bit inputs go to the tensor cores as they are).
    EVEN (the tile divides M, N and K; s08, s11 set it per config with even_tiles): no masks.
    LAYOUT (s10, s11; default NN): lda / ldb are the row strides of A and B as stored; NT's B
    (stored N x K) is read in 16-byte runs along K, TN's A (stored K x M) along M."""
    tl.static_assert(BLOCK_K >= 16, "tl.dot needs a K tile of at least 16")
    tl.static_assert(BLOCK_M >= 16 and BLOCK_N >= 16, "tl.dot needs M and N tiles of at least 16")
    tl.static_assert(VEC == 1 or VEC * a_ptr.dtype.element_ty.primitive_bitwidth == 128,
                     "VEC is 16 bytes of elements (16-byte aligned rows, K and N) or 1")
    tl.static_assert(BLOCK_K % VEC == 0 and BLOCK_N % VEC == 0, "tiles must hold whole vectors")
    tl.static_assert(LAYOUT == "NN" or LAYOUT == "NT" or LAYOUT == "TN", "LAYOUT is NN, NT or TN")

    # --- tile offsets and operand staging: hinted pointer tiles (VEC > 1: 16-byte runs) -----
    offs_m, offs_n, offs_k, a_rows, b_rows, c_rows, k_lim, n_lim = hinted_offsets(
        pid_m, pid_n, N, K, lda, ldb, ldc, BLOCK_M, BLOCK_N, BLOCK_K, VEC)
    if LAYOUT == "TN":   # a[m, k] at k * lda + m (A stored K x M): 16-byte vectors along M
        offs_am = tl.max_contiguous(tl.multiple_of(offs_m, BLOCK_M), BLOCK_M)
        a_ks = offs_k * lda                   # [BK] starts of A's stored rows
        m_lim = tl.full((BLOCK_M,), M, tl.int32)
        if VEC > 1:   # true: the wrapper checked lda and M (vector_width)
            a_ks = tl.multiple_of(a_ks, VEC)
            m_lim = tl.multiple_of(m_lim, VEC)
        a_ptrs = a_ptr + offs_am[:, None] + a_ks[None, :]  # [BM, BK], 16-byte vectors along M
    else:
        a_ptrs = a_ptr + a_rows[:, None] + offs_k[None, :]  # [BM, BK], 16-byte vectors along K
    if LAYOUT == "NT":   # b[k, n] at n * ldb + k (B stored N x K): 16-byte vectors along K
        b_ns = offs_n * ldb                   # [BN] starts of B's stored rows
        if VEC > 1:
            b_ns = tl.multiple_of(b_ns, VEC)
        b_ptrs = b_ptr + offs_k[:, None] + b_ns[None, :]    # [BK, BN], 16-byte vectors along K
    else:
        b_ptrs = b_ptr + b_rows[:, None] + offs_n[None, :]  # [BK, BN], 16-byte vectors along N
    if LAYOUT == "TN":
        mask_m = (offs_m < m_lim)[:, None]     # compare in 1-D: the hint on m_lim survives
    else:
        mask_m = offs_m[:, None] < M
    mask_n = (offs_n < n_lim)[None, :]          # compare in 1-D: the hint on n_lim survives
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)

    # --- loop over K: masked tails read 0 --------------------------------------------------
    for k0 in range(0, K, BLOCK_K):
        if EVEN:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            in_k = (k0 + offs_k) < k_lim         # k0 is a multiple of BLOCK_K: still VEC-aligned
            a = tl.load(a_ptrs, mask=mask_m & in_k[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=in_k[:, None] & mask_n, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        if LAYOUT == "TN":
            a_ptrs += BLOCK_K * lda
        else:
            a_ptrs += BLOCK_K
        if LAYOUT == "NT":
            b_ptrs += BLOCK_K
        else:
            b_ptrs += BLOCK_K * ldb

    # --- epilogue: 128-bit stores of C too; alpha/beta in fp32, one rounding to C's dtype
    # (no-op casts for fp32); beta == 0 never reads C (it may hold NaN) ----------------------
    if BETA_ZERO:
        c_ptrs = c_ptr + c_rows[:, None] + offs_n[None, :]
        tl.store(c_ptrs, (alpha * acc).to(c_ptr.dtype.element_ty), mask=mask_m & mask_n)
    else:
        update_c_in_parts(c_ptr, alpha * acc, offs_m, offs_n, M, n_lim, ldc, beta, BLOCK_M, BLOCK_N, VEC)


def leading_dims(a, b, layout="NN"):
    """(lda, ldb): the row strides of A and B as stored (stored_operands)."""
    a_t, b_t = TRANSPOSED[layout]
    return a.stride(1 if a_t else 0), b.stride(1 if b_t else 0)


def vector_width(a, b, c, layout="NN"):
    """Elements per 16 bytes (4 fp32, 8 fp16/bf16) when every hint in the kernel holds: 16-byte
    aligned a, b, c and leading dimensions (as stored), K and N multiples of that width (and M
    for TN, whose A runs along M); else 1."""
    vec = 16 // a.element_size()
    M, K = a.shape
    N = b.shape[1]
    dims = (K, N, M) if layout == "TN" else (K, N)
    aligned = all(t.data_ptr() % 16 == 0 for t in (a, b, c))
    whole = all(x % vec == 0 for x in (*leading_dims(a, b, layout), c.stride(0), *dims))
    return vec if aligned and whole else 1


def launch_tile(kernel, a, b, c, alpha, beta, grid=None, num_warps_unaligned=None, layout=None, **meta):
    """c = alpha * a @ b + beta * c by a pointer stage (s04-s08, s10, s11): launches
    kernel(a, b, c, M, N, K, lda, ldb, ldc, alpha, beta, VEC=, BETA_ZERO=, **meta). The default
    grid is one program per BLOCK_M x BLOCK_N tile of C on a 1-D grid (a function of the
    config's meta-parameters when the autotuner picks BLOCK_M / BLOCK_N); num_warps_unaligned,
    if given (a number, or a dict by layout), replaces num_warps when VEC == 1 (addresses in
    registers need more of them).
    layout (a stage of several layouts: its kernel takes LAYOUT=): lda, ldb as stored."""
    M, K = a.shape
    N = b.shape[1]
    vec = vector_width(a, b, c, layout or "NN")
    if isinstance(num_warps_unaligned, dict):   # by layout (fp32 stages: NT / TN spill otherwise)
        num_warps_unaligned = num_warps_unaligned.get(layout or "NN")
    if vec == 1 and num_warps_unaligned:
        meta["num_warps"] = num_warps_unaligned
    if layout is not None:
        meta["LAYOUT"] = layout
    if grid is None:
        tiles = lambda m: (cdiv(M, m["BLOCK_M"]) * cdiv(N, m["BLOCK_N"]),)
        grid = tiles(meta) if "BLOCK_M" in meta else tiles
    lda, ldb = leading_dims(a, b, layout or "NN")
    replay(kernel)[grid](a, b, c, M, N, K, lda, ldb, c.stride(0), float(alpha), float(beta),
                         VEC=vec, BETA_ZERO=(beta == 0), **meta)
    return c
