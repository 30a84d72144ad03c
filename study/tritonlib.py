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
  config) and limits.
- `even_tiles`: EVEN = the chosen tile divides M, N and K, so the autotuned pointer stages
  (s08, s09, s11) load without masks there.
- `autotune_do_bench` / `autotune_prune`: let @triton.autotune run under TRITON_INTERPRET=1 on a
  CPU (the interpreter has no device timer: take the first config and time nothing), and time
  with triton.testing.do_bench on a GPU. `prune_unaligned`: the configs an unaligned (VEC == 1)
  call may use, where the others would spill registers.
"""
import os

import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


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
    """do_bench for @triton.autotune: median device time on a GPU, a no-op timer in the interpreter."""
    if INTERPRET:
        kernel_call()  # run once so a bad config still fails loudly
        return [0.0 for _ in quantiles]
    # 5 ms warm-up + 25 ms of repeats per config: the study tunes ~20 shapes per stage, and
    # the ranking of configs is stable at this length (their gaps are several percent).
    return triton.testing.do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


def autotune_prune(configs, named_args, **kwargs):
    """early_config_prune: the interpreter (~4 ms per program per K step) only tries configs[0]."""
    return configs[:1] if INTERPRET else configs


def prune_unaligned(unaligned_configs):
    """early_config_prune for a stage whose VEC == 1 path (rows not 16-byte aligned: 2- or 4-byte
    loads whose addresses stay in registers) needs more registers than some of its configs
    leave: with VEC == 1 only `unaligned_configs` are tried (checked spill-free for sm_90 by
    tests/test_static.py at a 4095^3 call). The autotune key must include VEC."""
    def prune(configs, named_args, **kwargs):
        out = list(unaligned_configs) if kwargs.get("VEC", 1) == 1 else configs
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
    """Epilogue of the TMA stages (s12, s13): C = alpha * acc (+ beta * C) in fp32, one rounding
    to C's dtype, masked pointer stores at any ldc. C_VEC = 8 passes on what the wrapper checked
    (C 16-byte aligned, ldc and N multiples of 8): without it ldc = 1000 gives 2-byte stores
    whose addresses spill registers. beta == 0 never reads C (it may hold NaN)."""
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = tl.max_contiguous(tl.multiple_of(off_n + tl.arange(0, BLOCK_N), BLOCK_N), BLOCK_N)
    c_rows = offs_m * ldc
    n_lim = tl.full((BLOCK_N,), N, tl.int32)
    if C_VEC > 1:
        c_rows = tl.multiple_of(c_rows, C_VEC)
        n_lim = tl.multiple_of(n_lim, C_VEC)
    c_ptrs = c_ptr + c_rows[:, None] + offs_n[None, :]
    mask_c = (offs_m[:, None] < M) & (offs_n < n_lim)[None, :]
    out = alpha * acc
    if not BETA_ZERO:
        out += beta * tl.load(c_ptrs, mask=mask_c, other=0.0).to(tl.float32)
    tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=mask_c)


def tile_config(bm, bn, bk, stages, warps, group_m=8, pre_hook=None):
    """An autotune config of a tiled stage: BM x BN tiles of C over BK-deep K steps, GROUP_M tile
    rows per band of the grouped order (s08, s09, s11; through tma_config s12, s13)."""
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m},
                         num_stages=stages, num_warps=warps, pre_hook=pre_hook)


def _set_tma_block_shapes(nargs):
    # The descriptors are built before the autotuner picks a tile: each config stamps its
    # TMA box sizes on them just before launch (host-side descriptors are plain Python data).
    nargs["a_desc"].block_shape = [nargs["BLOCK_M"], nargs["BLOCK_K"]]
    nargs["b_desc"].block_shape = [nargs["BLOCK_N"], nargs["BLOCK_K"]]


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


def tma_unsupported(a, b, c):
    """None, or why a TMA stage cannot load a and b (NT: b is the (K, N) view of an (N, K)
    tensor, so its row stride is b.stride(1)): TMA needs 16-byte aligned bases and rows."""
    for name, t, ld_name, ld in (("a", a, "lda", a.stride(0)), ("b", b, "ldb", b.stride(1))):
        if t.data_ptr() % 16 != 0:
            return f"{name} must be 16-byte aligned for TMA (data_ptr % 16 == {t.data_ptr() % 16})"
        if ld % 8 != 0:
            return (f"{ld_name} must be a multiple of 8 elements for TMA (16-byte row stride), "
                    f"got {ld}")
    return None


def c_vector_width(c):
    """8 when C's rows are 16-byte runs of halves (aligned base, ldc and N multiples of 8), else 1."""
    return 8 if c.data_ptr() % 16 == 0 and c.stride(0) % 8 == 0 and c.shape[1] % 8 == 0 else 1


@triton.jit
def hinted_tile(pid_m, pid_n, a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                VEC: tl.constexpr, BETA_ZERO: tl.constexpr, EVEN: tl.constexpr,
                DOT_PRECISION: tl.constexpr):
    """One BLOCK_M x BLOCK_N tile of C = alpha*A@B + beta*C, fp32 accumulate, its loads and
    stores hinted to 128 bits when VEC > 1 (VEC elements = 16 bytes). Born in s04_vectorized
    (fp32, DOT_PRECISION="ieee"); s05-s08 differ only in the program order around it and in the
    launch knobs (num_warps, num_stages, autotuning), s10-s11 feed it fp16/bf16
    (DOT_PRECISION=None: 16-bit inputs go to the tensor cores as they are).
    EVEN (the tile divides M, N and K; s08, s11 set it per config with even_tiles): no masks."""
    tl.static_assert(BLOCK_K >= 16, "tl.dot needs a K tile of at least 16")
    tl.static_assert(BLOCK_M >= 16 and BLOCK_N >= 16, "tl.dot needs M and N tiles of at least 16")
    tl.static_assert(VEC == 1 or VEC * a_ptr.dtype.element_ty.primitive_bitwidth == 128,
                     "VEC is 16 bytes of elements (16-byte aligned rows, K and N) or 1")
    tl.static_assert(BLOCK_K % VEC == 0 and BLOCK_N % VEC == 0, "tiles must hold whole vectors")

    # --- tile offsets and operand staging: hinted pointer tiles (VEC > 1: 16-byte runs) -----
    offs_m, offs_n, offs_k, a_rows, b_rows, c_rows, k_lim, n_lim = hinted_offsets(
        pid_m, pid_n, N, K, lda, ldb, ldc, BLOCK_M, BLOCK_N, BLOCK_K, VEC)
    a_ptrs = a_ptr + a_rows[:, None] + offs_k[None, :]    # [BM, BK], 16-byte vectors along K
    b_ptrs = b_ptr + b_rows[:, None] + offs_n[None, :]    # [BK, BN], 16-byte vectors along N
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
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * ldb

    # --- epilogue: 128-bit stores of C too; alpha/beta in fp32, one rounding to C's dtype
    # (no-op casts for fp32); beta == 0 never reads C (it may hold NaN) ----------------------
    c_ptrs = c_ptr + c_rows[:, None] + offs_n[None, :]
    mask_c = mask_m & mask_n
    out = alpha * acc
    if not BETA_ZERO:
        out += beta * tl.load(c_ptrs, mask=mask_c, other=0.0).to(tl.float32)
    tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=mask_c)


def vector_width(a, b, c):
    """Elements per 16 bytes (4 fp32, 8 fp16/bf16) when every hint in the kernel holds: 16-byte
    aligned a, b, c and leading dimensions, K and N multiples of that width; else 1."""
    vec = 16 // a.element_size()
    K, N = a.shape[1], b.shape[1]
    aligned = all(t.data_ptr() % 16 == 0 for t in (a, b, c))
    whole = all(x % vec == 0 for x in (a.stride(0), b.stride(0), c.stride(0), K, N))
    return vec if aligned and whole else 1


def launch_tile(kernel, a, b, c, alpha, beta, grid=None, num_warps_unaligned=None, **meta):
    """c = alpha * a @ b + beta * c by a pointer stage (s04-s08, s10, s11): launches
    kernel(a, b, c, M, N, K, lda, ldb, ldc, alpha, beta, VEC=, BETA_ZERO=, **meta). The default
    grid is one program per BLOCK_M x BLOCK_N tile of C on a 1-D grid (a function of the
    config's meta-parameters when the autotuner picks BLOCK_M / BLOCK_N); num_warps_unaligned,
    if given, replaces num_warps when VEC == 1 (addresses in registers need more of them)."""
    M, K = a.shape
    N = b.shape[1]
    vec = vector_width(a, b, c)
    if vec == 1 and num_warps_unaligned:
        meta["num_warps"] = num_warps_unaligned
    if grid is None:
        tiles = lambda m: (triton.cdiv(M, m["BLOCK_M"]) * triton.cdiv(N, m["BLOCK_N"]),)
        grid = tiles(meta) if "BLOCK_M" in meta else tiles
    kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0), float(alpha), float(beta),
                 VEC=vec, BETA_ZERO=(beta == 0), **meta)
    return c


# --- stream-K helpers of s14_stream_k ---------------------------------------------------------
# Program p of P owns iterations [p*T//P, (p+1)*T//P) of T = tiles * k_steps; a piece of a tile is
# stored at workspace slot 2p (p's first segment) or 2p+1 (its last).


@triton.jit
def stream_k_owner(i, T, P):
    """The program whose share [p*T//P, (p+1)*T//P) holds iteration i (P <= T: none is empty)."""
    return ((i + 1) * P - 1) // T


@triton.jit
def stream_k_piece(ws_ptr, offs, q, q_last, t0, T, P, BLOCK_N: tl.constexpr,
                   BLOCK_T: tl.constexpr):
    """Program q's partial of the tile starting at iteration t0 (zeros if q > q_last)."""
    slot = 2 * q + ((q * T) // P < t0).to(tl.int32)   # 0: q's first segment, 1: its last
    # .cg: read from L2, where the other SMs' partials are (never a stale L1 line)
    return tl.load(ws_ptr + slot * (BLOCK_N * BLOCK_T) + offs, mask=q <= q_last, other=0.0,
                   cache_modifier=".cg")


@triton.jit
def stream_k_fixup(tile, ws_ptr, cnt_ptr, c_ptr, M, N, ldc, alpha, beta, T, P, k_steps, tiles_t,
                   BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr, C_VEC: tl.constexpr,
                   BETA_ZERO: tl.constexpr, FIX_BATCH: tl.constexpr):
    """Finish a tile shared by programs q_first..q_last (s14_stream_k; C^T tiles [BLOCK_N weight
    rows, BLOCK_T tokens]): sum its pieces in program order, so the bits never depend on which
    program arrived last, then the epilogue. Runs in the last program to arrive at the tile."""
    t0 = tile * k_steps
    q_first = stream_k_owner(t0, T, P)
    q_last = stream_k_owner(t0 + k_steps - 1, T, P)
    offs = tl.arange(0, BLOCK_N)[:, None] * BLOCK_T + tl.arange(0, BLOCK_T)[None, :]
    acc = tl.zeros((BLOCK_N, BLOCK_T), dtype=tl.float32)
    for q in range(q_first, q_last + 1, FIX_BATCH):
        # FIX_BATCH (1, 2 or 4) independent loads in flight, then added in q order (a
        # zero-filled missing piece adds exactly nothing): one SM reads every piece of the
        # tile, so it should not wait out an L2 round trip per piece
        p0 = stream_k_piece(ws_ptr, offs, q, q_last, t0, T, P, BLOCK_N, BLOCK_T)
        if FIX_BATCH >= 2:
            p1 = stream_k_piece(ws_ptr, offs, q + 1, q_last, t0, T, P, BLOCK_N, BLOCK_T)
        if FIX_BATCH == 4:
            p2 = stream_k_piece(ws_ptr, offs, q + 2, q_last, t0, T, P, BLOCK_N, BLOCK_T)
            p3 = stream_k_piece(ws_ptr, offs, q + 3, q_last, t0, T, P, BLOCK_N, BLOCK_T)
        acc += p0
        if FIX_BATCH >= 2:
            acc += p1
        if FIX_BATCH == 4:
            acc += p2
            acc += p3
    tile_n = tile // tiles_t
    tile_t = tile - tile_n * tiles_t
    store_c_tile(c_ptr, tl.trans(acc), tile_t * BLOCK_T, tile_n * BLOCK_N, M, N, ldc, alpha, beta,
                 BLOCK_T, BLOCK_N, C_VEC, BETA_ZERO)
    tl.store(cnt_ptr + tile, 0)   # every contributor has arrived: reset for the next launch
