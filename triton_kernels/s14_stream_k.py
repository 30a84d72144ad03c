"""s14_stream_k: stream-K / split-K division of the K loop, swap AB for decode shapes

Change: vs s13, the unit of work is one K step of one TMA tile: P persistent programs take an
        equal contiguous share each of all (tile, K step) iterations (stream-K; split-K when shares
        fall on tile boundaries), and a tile shared by several programs is summed in a fixup.
        C^T = W @ x^T (swap AB): weight rows fill the 64-row wgmma side, tokens the 16-128 side;
        M = 65-256 against 10-17k weight rows: one wave of unswapped 128-token tiles (1-3 dots).
Why:    x @ W.T, M = 1..64, W [4096, 4096] bf16: 32 MB to stream once; s13's 128x256 tiles give
        16 programs, 12% of 132 SMs pulling HBM. Here 64 tiles x 16 K steps (BK 256) / 128 programs:
        each SM streams 256 KB in 512-byte runs, 4 x 40 KB in flight, 2 x 4 KB of fp32 partials.
Expect: 0.94-1.09x cuBLAS on the decode layer shapes at M <= 256, 0.98-1.09x at M <= 64 (bf16 NT)
Limits: a and b 16-byte aligned, lda and ldb (row strides as stored: b.stride(1) in NT,
        a.stride(1) in TN) multiples of 8 elements (TMA; else ValueError); any M, N, K >= 1,
        any ldc. Bitwise deterministic: the last program to reach a shared tile (int32 counter)
        sums its pieces in program order. Workspace per device, grown and reused: 256 KB of
        counters + 2 x P x BN x BT fp32 (<= 18 MB at 132 SMs), one stream at a time. Where no
        one-wave tiling (128-token tiles at M = 65-256, not swapped) or two-per-SM tiling fits and
        beta == 0, M > 64 with >= 40 s13 tiles or M > 128 with < 16 K steps a program runs s13
Dtype:  fp16, bf16 in / fp32 acc / same as in out        Arch: sm_90a      Layout: NT, NN, TN
Pair:   cuda_src/s14_stream_k.cu
Log:    docs/stages/s14_stream_k.md
"""
import functools
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import triton
import triton.language as tl

from study.operands import TRANSPOSED
from study.tritonepilogue import store_c_in_parts
from study.tritonlib import INTERPRET, c_vector_width, store_c_tile, tma_unsupported
from study.tritonlaunch import cdiv, descriptor, replay

# Tile configs by token count (H100 sweep, docs/stages/s14_stream_k.md): M <= this -> (weight rows
# BN, token tile BT, K step BK, stages, warps); smem = stages * (BN + BT) * BK * 2 B + epilogue.
# Narrow weight tiles with long K steps win at decode sizes: 64 rows x 512 B (BK 256) per TMA
# box keeps 4 x 40 KB of HBM reads in flight per SM in long contiguous runs (~23 GB/s per SM x
# ~1 us latency needs >= 25 KB); 128 x 64 boxes (s13's) read 128 B runs: 4-8% slower.
TILES = [(16, (64, 16, 256, 4, 4)),      # 160 KB
         (32, (64, 32, 128, 6, 4)),      # 144 KB
         (64, (64, 64, 128, 6, 4)),      # 192 KB
         (128, (64, 128, 128, 4, 4)),    # 192 KB
         (None, (256, 64, 64, 4, 8))]    # 160 KB; more tokens: several 64-token tiles
# One wave of whole tiles, the tokens split over them before K is (cuBLAS's choice at M = 64-256):
# at M <= 256, where one of these tiles cuts the problem into 90-100% of the SMs' count with >= 2
# full token tiles, every program runs one tile (no partials); the first that fills best wins.
# M = 64, 128, 256 against N = 4096 take 64x32, 64x64, 128x64 (128 programs): H100 bf16, 4096 x
# 4096, 0.86 -> 1.00x, 0.81 -> 0.98x, 0.68 -> 1.01x cuBLAS. A part-filled last token tile lost at
# M = 100 x 4096 x 11008 (1.03 -> 0.83x): not taken (docs/stages/s14_stream_k.md, "One wave of
# token tiles").
WAVE_TILES = [(64, 32, 256, 4, 4),       # 196 KB
              (128, 64, 128, 4, 4),      # 196 KB
              (64, 64, 128, 6, 4)]       # 196 KB
WAVE_FILL = 0.9
WAVE_MAX_M = 256
# M = 129-256: the same tiles with a part-filled last token tile, from 70% of the SMs, before s13
# and stream-K (several token tiles sharing a weight tile ran 0.43-0.71x cuBLAS there; H100 bf16,
# 136-250 x 4096 x 4096 -> 0.79-1.05x, 160 x 2048 x 4096 0.52 -> 0.99x: the log, session 43).
WAVE_PART_MIN_M = 128
WAVE_PART_FILL = 0.7
# One token tile (M <= 64) against 128-row weight tiles, data-parallel, where those tiles alone
# give 60-100% of the SMs (N = 11008 / 14336: 86 / 112 tiles): H100 bf16, K = 4096, 0.89-0.99 ->
# 0.99-1.07x cuBLAS; stream-K over every SM lost (docs/stages/s14_stream_k.md, session 42).
DP_TILES = [(16, (128, 16, 256, 3, 4)),      # 216 KB
            (32, (128, 32, 128, 5, 4)),      # 200 KB
            (64, (128, 64, 128, 4, 4))]      # 192 KB
DP_FILL = 0.6
# M = 65-128 where no wave or WIDE_ONE fits and s13 would run: 128-row x 64-token tiles, one per
# program, two programs per SM (112 KB of smem each, a 96 KB ring + the epilogue; tests/test_static.py
# checks that two fit), where they make 1-2 x the SMs' count (N = 8449-10112 on 132 SMs).
# H100 bf16, 128 x 11008 / 14336 x 4096: s13 0.91 / 0.93-0.96 -> 0.94-0.95 / 0.96-0.98x cuBLAS;
# stream-K over these tiles 0.46-0.52x (docs/stages/s14_stream_k.md, session 45).
PAIR_TILE = (128, 64, 64, 4, 4)
# M = 129-256 (two token tiles of 128, the last part-filled) against ~11-15k weight rows, where no
# wave of token tiles fits: x as wgmma's A (not swapped), weight tiles of 192-256 rows as one
# dot per power-of-two piece (Triton tiles are powers of two; CUDA s14 runs 168-row tiles here),
# one tile per program where one of them makes WIDE_FILL-100% of the SMs (11008 rows: 2 x 58 =
# 116 tiles of 192, 14336: 2 x 64 = 128 of 224; 256, below). Each program then reads its x and
# weight tiles once (the study's decode shapes are bound by each SM's ingest from L2: 128x256 tiles
# keep 86 SMs busy at 256 x 11008). H100 bf16, 256 x 11008 / 14336 x 4096: s13 0.77 / 0.86 ->
# 0.96 / 0.91x cuBLAS, 200 x 14336 0.85 -> 0.90, 160 x 11008 0.74 -> 0.82; pieces of 32 and 16
# rows (128 + 32 + 16, 126 tiles) ran 0.54-0.78, 64 + 64 + 64 below 128 + 64 (log, session 52).
# M = 65-128 (one token tile) where DP_TILES' 128-row weight tiles fill DP_FILL-100% of the SMs: the
# same kernel with one 128-row dot, 128 x 128 tiles (N = 11008 / 14336: 86 / 112 programs). H100
# bf16, K = 4096, 128 x 11008 / 14336 and 100 x 11008: PAIR_TILE 0.92 / 0.98 / 0.94 -> 0.98 / 1.01 /
# 1.01x cuBLAS; 64 + 32-row dots 0.74-0.96, 64-row tiles 0.78-0.93 (log, session 53).
WIDE_ONE = (128,)
# Two 128-row dots (256 rows, 4 stages: 5 do not fit) beat 128 + 64 + 32 where both fit one wave:
# 256 / 200 x 14336, 112 tiles, 0.92 / 0.90 -> 0.94 / 0.93x cuBLAS (one 256-row dot 0.87; log,
# session 53); so the first of these in order that fills WIDE_FILL-100% of the SMs wins.
WIDE_TILES = [((128, 64), 5), ((128, 128), 4), ((128, 64, 32), 5)]   # (weight rows per dot, stages)
WIDE_BLOCK = (128, 64, 5, 8)              # tokens, K step, stages (WIDE_ONE; 160-220 KB), warps
WIDE_FILL = 0.84
# x's part-filled last token tile of 128 (K-major x): the descriptor's zero fill of the rows past
# M costs more the more rows are missing (H100 bf16, K = 4096: 65 / 88 / 100 / 120 tokens against
# 4096 weight rows 23.9 / 20.9 / 19.4 / 19.2 us; 129 / 160 / 200 against 11008, 54.7 / 46.9 / 42.0),
# while masked pointer loads cost about the same at any tail (19.4-20.2 / 45.5-49.4 us). So programs
# whose share touches that tile load x by masked loads up to these tails (rows in the tile):
# 65 x 4096 0.64 -> 0.77x cuBLAS, 80 x 4096 0.72 -> 0.80, 129 / 140 x 11008 0.68 -> 0.75 / 0.77,
# 129 x 14336 0.84 -> 0.89 (K a multiple of 16: s14_stream_k's _x_ptr). 64-token and narrower tiles lost at every tail tried (40-250 x 4096:
# -4 to -30 points), so they keep the descriptor (docs/stages/s14_stream_k.md, session 58).
X_PTR_TAIL = 88        # swapped kernel (x as wgmma's B)
X_PTR_WIDE_TAIL = 24   # WIDE_TILES / WIDE_ONE (x as A)
COUNTERS = 1 << 16     # tile counters at the workspace's front (stream-K runs < 65536 tiles)
S13_TILES = 40         # M > 64 and >= this many of s13's 128x256 tiles (beta == 0): s13 itself
SPLIT_MIN_STEPS = 16   # M > 128: a split of fewer K steps per program runs s13 instead (beta == 0;
                       # 256^3-1024^3 split 2 ways or more: 0.28-0.60x cuBLAS, s13 0.49-0.70x)


@dataclass(frozen=True)
class Plan:
    """How one call divides its work: `name` is what decomposition() reports."""
    name: str        # "split-k", "stream-k" or "data-parallel (s13)"
    block_t: int     # token tile (the N side of wgmma)
    programs: int    # persistent programs (grid size)
    stages: int
    warps: int
    block_n: int     # weight rows per tile (the M side of wgmma; the N side where `pieces`)
    block_k: int
    pieces: tuple = ()   # WIDE_TILES: not swapped, one dot per piece of block_n weight rows


# --- stream-K helpers: who owns an iteration, a piece, the fixup of a shared tile ---------------
# @triton.jit functions inlined into s14_stream_k_kernel (named sNN_slug_<role>_kernel, as every
# jitted symbol of a stage file). Program p of P owns iterations [p*T//P, (p+1)*T//P) of T = tiles
# * k_steps; a piece of a tile is stored at workspace slot 2p (p's first segment) or 2p+1 (its last).


@triton.jit
def s14_stream_k_owner_kernel(i, T, P):
    """The program whose share [p*T//P, (p+1)*T//P) holds iteration i (P <= T: none is empty)."""
    return ((i + 1) * P - 1) // T


@triton.jit
def s14_stream_k_piece_kernel(ws_ptr, offs, q, q_last, t0, T, P, BLOCK_N: tl.constexpr,
                               BLOCK_T: tl.constexpr):
    """Program q's partial of the tile starting at iteration t0 (zeros if q > q_last)."""
    slot = 2 * q + ((q * T) // P < t0).to(tl.int32)   # 0: q's first segment, 1: its last
    # .cg: read from L2, where the other SMs' partials are (never a stale L1 line)
    return tl.load(ws_ptr + slot * (BLOCK_N * BLOCK_T) + offs, mask=q <= q_last, other=0.0,
                   cache_modifier=".cg")


@triton.jit
def s14_stream_k_fixup_kernel(tile, ws_ptr, cnt_ptr, c_ptr, M, N, ldc, alpha, beta, T, P, k_steps,
                               tiles_t, BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr,
                               C_VEC: tl.constexpr, BETA_ZERO: tl.constexpr, FIX_BATCH: tl.constexpr):
    """Finish a tile shared by programs q_first..q_last (s14_stream_k; C^T tiles [BLOCK_N weight
    rows, BLOCK_T tokens]): sum its pieces in program order, so the bits never depend on which
    program arrived last, then the epilogue. Runs in the last program to arrive at the tile."""
    t0 = tile * k_steps
    q_first = s14_stream_k_owner_kernel(t0, T, P)
    q_last = s14_stream_k_owner_kernel(t0 + k_steps - 1, T, P)
    offs = tl.arange(0, BLOCK_N)[:, None] * BLOCK_T + tl.arange(0, BLOCK_T)[None, :]
    acc = tl.zeros((BLOCK_N, BLOCK_T), dtype=tl.float32)
    for q in range(q_first, q_last + 1, FIX_BATCH):
        # FIX_BATCH (1, 2 or 4) independent loads in flight, then added in q order (a
        # zero-filled missing piece adds exactly nothing): one SM reads every piece of the
        # tile, so it should not wait out an L2 round trip per piece
        p0 = s14_stream_k_piece_kernel(ws_ptr, offs, q, q_last, t0, T, P, BLOCK_N, BLOCK_T)
        if FIX_BATCH >= 2:
            p1 = s14_stream_k_piece_kernel(ws_ptr, offs, q + 1, q_last, t0, T, P, BLOCK_N, BLOCK_T)
        if FIX_BATCH == 4:
            p2 = s14_stream_k_piece_kernel(ws_ptr, offs, q + 2, q_last, t0, T, P, BLOCK_N, BLOCK_T)
            p3 = s14_stream_k_piece_kernel(ws_ptr, offs, q + 3, q_last, t0, T, P, BLOCK_N, BLOCK_T)
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


@triton.jit
def s14_stream_k_x_rows_kernel(x_ptr, lda, m0, k0, M, K, ROWS: tl.constexpr, BLOCK_K: tl.constexpr):
    """x[m0:m0+ROWS, k0:k0+BLOCK_K] (K-major x) by masked loads: rows past M are never fetched.
    Taken where M is ragged against the token tile: TMA's zero fill of a box's out-of-bounds
    rows cost up to 2x the call (CUDA s14, docs/stages/s14_stream_k.md, session 57)."""
    rows = m0 + tl.arange(0, ROWS)
    ks = k0 + tl.arange(0, BLOCK_K)
    return tl.load(x_ptr + rows[:, None] * lda + ks[None, :], mask=(rows[:, None] < M) & (ks[None, :] < K),
                   other=0.0)


@triton.jit
def s14_stream_k_loop_kernel(w_desc, x_desc, x_ptr, lda, c_ptr, ws_ptr, cnt_ptr, M, N, K, ldc, alpha, beta,
                             pid, start, end, k_steps, tiles_t, T, P, BLOCK_N: tl.constexpr,
                             BLOCK_T: tl.constexpr, BLOCK_K: tl.constexpr, C_VEC: tl.constexpr,
                             BETA_ZERO: tl.constexpr, THREADS: tl.constexpr, LAYOUT: tl.constexpr,
                             X_PTR: tl.constexpr):
    """s14_stream_k_kernel's main loop over iterations [start, end); returns the tiles this program
    completes from partials afterwards (or -1). X_PTR: x by masked pointer loads, not x_desc."""
    acc = tl.zeros((BLOCK_N, BLOCK_T), dtype=tl.float32)   # C^T tile: [weight rows, tokens]
    fix_first = -1   # the tile this program completes from partials after its loop, or -1
    fix_last = -1

    # --- loop over K: one flat loop over this program's iterations -------------------------
    # Flat (not tile loop + K loop) so the compiler's num_stages-deep TMA ring runs straight
    # across tile boundaries: the next tile's weight is in flight during this tile's epilogue.
    for i in tl.range(start, end):
        tile = i // k_steps
        kk = i - tile * k_steps
        tile_n = tile // tiles_t
        tile_t = tile - tile_n * tiles_t
        if LAYOUT == "NT":
            w = w_desc.load([tile_n * BLOCK_N, kk * BLOCK_K])     # [BLOCK_N, BLOCK_K]
        else:
            w = w_desc.load([kk * BLOCK_K, tile_n * BLOCK_N]).T   # box [BLOCK_K, BLOCK_N]: N-major
        if X_PTR:
            xt = s14_stream_k_x_rows_kernel(x_ptr, lda, tile_t * BLOCK_T, kk * BLOCK_K, M, K, BLOCK_T, BLOCK_K).T
        elif LAYOUT == "TN":
            xt = x_desc.load([kk * BLOCK_K, tile_t * BLOCK_T])    # [BLOCK_K, BLOCK_T]
        else:
            xt = x_desc.load([tile_t * BLOCK_T, kk * BLOCK_K]).T  # box [BLOCK_T, BLOCK_K]: K-major
        acc = tl.dot(w, xt, acc)

        # --- epilogue: a whole tile goes to C; a piece goes to the workspace ---------------
        if (kk == k_steps - 1) | (i == end - 1):
            t0 = tile * k_steps
            if (start <= t0) & (kk == k_steps - 1):   # this program did every K step
                store_c_tile(c_ptr, tl.trans(acc), tile_t * BLOCK_T, tile_n * BLOCK_N, M, N, ldc,
                             alpha, beta, BLOCK_T, BLOCK_N, C_VEC, BETA_ZERO)
            else:
                first = start >= t0          # this piece is the program's first segment
                slot = 2 * pid + (1 - first.to(tl.int32))
                offs = tl.arange(0, BLOCK_N)[:, None] * BLOCK_T + tl.arange(0, BLOCK_T)[None, :]
                tl.store(ws_ptr + slot * (BLOCK_N * BLOCK_T) + offs, acc)
                # Every thread adds 1 with release semantics after its own partial stores (one
                # thread behind a CTA barrier would do, but a barrier stops the compiler from
                # pipelining this loop): a tile is complete at contributors * THREADS.
                arrived = tl.atomic_add(cnt_ptr + tile + tl.zeros([THREADS], tl.int32),
                                        tl.full([THREADS], 1, tl.int32), sem="acq_rel")
                contributors = (s14_stream_k_owner_kernel(t0 + k_steps - 1, T, P)
                                - s14_stream_k_owner_kernel(t0, T, P) + 1)
                if tl.max(arrived, 0) == contributors * THREADS - 1:   # last: no one to wait for
                    if first:
                        fix_first = tile
                    else:
                        fix_last = tile
            acc = tl.zeros((BLOCK_N, BLOCK_T), dtype=tl.float32)

    return fix_first, fix_last


@triton.jit
def s14_stream_k_kernel(w_desc, x_desc, x_ptr, lda, c_ptr, buf_ptr, M, N, K, ldc, alpha, beta,
                        COUNTERS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr,
                        BLOCK_K: tl.constexpr, C_VEC: tl.constexpr, BETA_ZERO: tl.constexpr,
                        THREADS: tl.constexpr, FIX_BATCH: tl.constexpr, LAYOUT: tl.constexpr,
                        X_PTR: tl.constexpr):
    # --- tile assignment: an equal share of all (tile, K step) iterations per program --------
    # Iterations run tile-major: i = tile * k_steps + k step. Program p takes [p*T//P,
    # (p+1)*T//P): shares differ by at most one step, so no SM idles in a last wave. A share
    # may start or end inside a tile (stream-K); when T/P is a whole fraction of k_steps every
    # share is one aligned piece of one tile (split-K). Tiles: weight-row blocks x token blocks.
    pid = tl.program_id(0)
    P = tl.num_programs(0)
    k_steps = tl.cdiv(K, BLOCK_K)
    tiles_t = tl.cdiv(M, BLOCK_T)
    T = tl.cdiv(N, BLOCK_N) * tiles_t * k_steps
    start = (pid * T) // P
    end = ((pid + 1) * T) // P
    cnt_ptr = buf_ptr.to(tl.pointer_type(tl.int32))   # [COUNTERS] int32, one per tile
    ws_ptr = buf_ptr + COUNTERS                        # [2 * P, BLOCK_N, BLOCK_T] fp32 partials

    # --- operand staging: host-built TMA descriptors, swap AB ------------------------------
    # w_desc: W = B^T, boxes of B as stored -> the wgmma A operand [BLOCK_N, BLOCK_K] (64-256
    # rows, m64 per warpgroup step): NT's W [N, K] (as nn.Linear keeps it) box by box; NN/TN's B
    # [K, N] as boxes [BLOCK_K, BLOCK_N] seen through .T (N-major). x_desc: A = x, boxes as
    # stored -> the wgmma B operand x^T [BLOCK_K, BLOCK_T] (n = BLOCK_T >= 16 tokens): NN/NT's x
    # [M, K] as boxes [BLOCK_T, BLOCK_K] through .T (K-major), TN's A stored [K, M] box by box.
    # The swapped problem C^T = B^T A^T reads each operand in the other major order; wgmma
    # takes 16-bit smem either way. TMA zero-fills rows past M or N and columns past K; the
    # compiler rings num_stages boxes through smem.
    # A program whose share touches the last token tile, part-filled (X_PTR: the host's choice),
    # reads x by masked loads: the descriptor's zero fill of the rows past M cost more (the log,
    # session 58). The branch is uniform per program, so each loop keeps one kind of load.
    ragged = False
    if X_PTR:
        t_first = start // k_steps
        ragged = t_first + (tiles_t - 1 - t_first % tiles_t) <= (end - 1) // k_steps
    if ragged:
        fix_first, fix_last = s14_stream_k_loop_kernel(
            w_desc, x_desc, x_ptr, lda, c_ptr, ws_ptr, cnt_ptr, M, N, K, ldc, alpha, beta, pid, start, end,
            k_steps, tiles_t, T, P, BLOCK_N, BLOCK_T, BLOCK_K, C_VEC, BETA_ZERO, THREADS, LAYOUT, True)
    else:
        fix_first, fix_last = s14_stream_k_loop_kernel(
            w_desc, x_desc, x_ptr, lda, c_ptr, ws_ptr, cnt_ptr, M, N, K, ldc, alpha, beta, pid, start, end,
            k_steps, tiles_t, T, P, BLOCK_N, BLOCK_T, BLOCK_K, C_VEC, BETA_ZERO, THREADS, LAYOUT, False)

    # fixups after the loop, so the pipelined loop carries no inner loop; at most 2 per program
    if fix_first >= 0:
        s14_stream_k_fixup_kernel(fix_first, ws_ptr, cnt_ptr, c_ptr, M, N, ldc, alpha, beta, T, P,
                                  k_steps, tiles_t, BLOCK_N, BLOCK_T, C_VEC, BETA_ZERO, FIX_BATCH)
    if fix_last >= 0:
        s14_stream_k_fixup_kernel(fix_last, ws_ptr, cnt_ptr, c_ptr, M, N, ldc, alpha, beta, T, P,
                                  k_steps, tiles_t, BLOCK_N, BLOCK_T, C_VEC, BETA_ZERO, FIX_BATCH)


@triton.jit
def s14_stream_k_wide_dot_kernel(acc, x, w_desc, n0, k0, LAYOUT: tl.constexpr):
    """acc += x @ (this piece of the weight tile)^T: NT's W [N, K] box by box; NN/TN's B [K, N]."""
    if LAYOUT == "NT":
        w = w_desc.load([n0, k0]).T      # box [W, BLOCK_K]
    else:
        w = w_desc.load([k0, n0])        # box [BLOCK_K, W]
    return tl.dot(x, w, acc)


@triton.jit
def s14_stream_k_wide_store_kernel(c_ptr, acc, m0, n0, M, N, ldc, alpha, beta, BLOCK_M: tl.constexpr,
                                   W: tl.constexpr, C_VEC: tl.constexpr, BETA_ZERO: tl.constexpr):
    """store_c_tile's epilogue for one piece, whose first column n0 is a multiple of 32, not of W."""
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_n = tl.max_contiguous(tl.multiple_of(n0 + tl.arange(0, W), 32), W)
    c_rows = offs_m * ldc
    n_lim = tl.full((W,), N, tl.int32)
    if C_VEC > 1:
        c_rows = tl.multiple_of(c_rows, C_VEC)
        n_lim = tl.multiple_of(n_lim, C_VEC)
    if BETA_ZERO and C_VEC > 1:
        mask = (offs_m[:, None] < M) & (offs_n < n_lim)[None, :]
        tl.store(c_ptr + c_rows[:, None] + offs_n[None, :], (alpha * acc).to(c_ptr.dtype.element_ty), mask=mask)
    else:
        store_c_in_parts(c_ptr, alpha * acc, offs_m, offs_n, M, n_lim, ldc, beta, BLOCK_M, W, C_VEC, BETA_ZERO)


@triton.jit
def s14_stream_k_wide_loop_kernel(x_desc, x_ptr, lda, w0_desc, w1_desc, w2_desc, m0, n0, M, K,
                                  BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, W0: tl.constexpr,
                                  W1: tl.constexpr, W2: tl.constexpr, LAYOUT: tl.constexpr, X_PTR: tl.constexpr):
    """s14_stream_k_wide_kernel's K loop; X_PTR: x by masked pointer loads, not x_desc."""
    acc0 = tl.zeros((BLOCK_M, W0), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK_M, W1 if W1 > 0 else 16), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_M, W2 if W2 > 0 else 16), dtype=tl.float32)
    for kk in range(0, tl.cdiv(K, BLOCK_K)):
        k0 = kk * BLOCK_K
        if X_PTR:
            x = s14_stream_k_x_rows_kernel(x_ptr, lda, m0, k0, M, K, BLOCK_M, BLOCK_K)
        elif LAYOUT == "TN":
            x = x_desc.load([k0, m0]).T                      # A stored (K, M): box [BLOCK_K, BLOCK_M]
        else:
            x = x_desc.load([m0, k0])                        # box [BLOCK_M, BLOCK_K]
        acc0 = s14_stream_k_wide_dot_kernel(acc0, x, w0_desc, n0, k0, LAYOUT)
        if W1 > 0:
            acc1 = s14_stream_k_wide_dot_kernel(acc1, x, w1_desc, n0 + W0, k0, LAYOUT)
        if W2 > 0:
            acc2 = s14_stream_k_wide_dot_kernel(acc2, x, w2_desc, n0 + W0 + W1, k0, LAYOUT)
    return acc0, acc1, acc2


@triton.jit
def s14_stream_k_wide_kernel(x_desc, x_ptr, lda, w0_desc, w1_desc, w2_desc, c_ptr, M, N, K, ldc, alpha, beta,
                             BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, W0: tl.constexpr, W1: tl.constexpr,
                             W2: tl.constexpr, C_VEC: tl.constexpr, BETA_ZERO: tl.constexpr, LAYOUT: tl.constexpr,
                             X_PTR: tl.constexpr):
    # WIDE_TILES: one tile of BLOCK_M tokens x (W0 + W1 + W2) weight rows per program, x as wgmma's
    # A (not swapped), a dot per piece (W2 or W1 and W2 may be 0: no piece). The token tiles of one
    # weight tile are neighbouring programs, so the weight streams from HBM once.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    m0 = (pid % tiles_m) * BLOCK_M
    n0 = (pid // tiles_m) * (W0 + W1 + W2)
    # The part-filled last token tile reads x by masked loads where the host chose it (X_PTR; see
    # s14_stream_k_kernel); m0 is uniform per program, so each loop keeps one kind of load.
    if X_PTR:
        if m0 + BLOCK_M > M:
            acc0, acc1, acc2 = s14_stream_k_wide_loop_kernel(x_desc, x_ptr, lda, w0_desc, w1_desc, w2_desc, m0, n0,
                                                             M, K, BLOCK_M, BLOCK_K, W0, W1, W2, LAYOUT, True)
        else:
            acc0, acc1, acc2 = s14_stream_k_wide_loop_kernel(x_desc, x_ptr, lda, w0_desc, w1_desc, w2_desc, m0, n0,
                                                             M, K, BLOCK_M, BLOCK_K, W0, W1, W2, LAYOUT, False)
    else:
        acc0, acc1, acc2 = s14_stream_k_wide_loop_kernel(x_desc, x_ptr, lda, w0_desc, w1_desc, w2_desc, m0, n0, M,
                                                         K, BLOCK_M, BLOCK_K, W0, W1, W2, LAYOUT, False)
    s14_stream_k_wide_store_kernel(c_ptr, acc0, m0, n0, M, N, ldc, alpha, beta, BLOCK_M, W0, C_VEC, BETA_ZERO)
    if W1 > 0:
        s14_stream_k_wide_store_kernel(c_ptr, acc1, m0, n0 + W0, M, N, ldc, alpha, beta, BLOCK_M, W1, C_VEC,
                                       BETA_ZERO)
    if W2 > 0:
        s14_stream_k_wide_store_kernel(c_ptr, acc2, m0, n0 + W0 + W1, M, N, ldc, alpha, beta, BLOCK_M, W2, C_VEC,
                                       BETA_ZERO)


@functools.lru_cache(maxsize=None)
def _num_sms(device_index):
    return torch.cuda.get_device_properties(device_index).multi_processor_count


@functools.lru_cache(maxsize=4096)   # a pure function, called on every launch
def plan(M, N, K, num_sms, beta=0.0):
    """The decomposition of an (M, N, K) problem on num_sms SMs (a pure function of its inputs,
    so the same shape always runs the same programs and sums partials in the same order)."""
    bn, bt, bk, stages, warps = next(cfg for m, cfg in TILES if m is None or M <= m)
    if K == 1:   # nothing to divide; Triton 3.6 fails to compile this kernel for K == 1 (its
        return Plan("data-parallel (s13)", bt, num_sms, stages, warps, bn, bk)   # constant 1: PassManager)
    wave = _wave(M, N, num_sms) or _wide(M, N, num_sms)
    if wave:
        return wave
    pair = _pair(M, N, num_sms)
    if pair:
        return pair
    own = divide(M, N, K, num_sms, Plan("", bt, num_sms, stages, warps, bn, bk))
    tiles = cdiv(N, bn) * cdiv(M, bt)
    # beta != 0 stays here where it can (s13 failed a beta != 0 check at 2048x4096x4096, see the
    # log), unless the counters or int32 iteration indices would overflow
    fits = tiles <= COUNTERS and (tiles * cdiv(K, bk) + 1) * own.programs < 2**31
    short = M > 128 and tiles < own.programs and tiles * cdiv(K, bk) < SPLIT_MIN_STEPS * own.programs
    if M > 64 and (cdiv(M, 128) * cdiv(N, 256) >= S13_TILES or short) and (beta == 0 or not fits):
        return Plan("data-parallel (s13)", bt, num_sms, stages, warps, bn, bk)
    dp = next((cfg for m, cfg in DP_TILES if M <= m), None)
    if dp and DP_FILL * num_sms <= cdiv(N, dp[0]) <= num_sms:
        bn, bt, bk, stages, warps = dp
        return Plan("data-parallel", bt, cdiv(N, bn), stages, warps, bn, bk)
    return own


def _wave(M, N, num_sms):
    """One wave of WAVE_TILES, one whole tile per program, or None: the config with the most tiles
    among those with >= 2 token tiles that fill WAVE_FILL-100% of the SMs, whole token tiles only;
    above WAVE_PART_MIN_M tokens also a part-filled last one, from WAVE_PART_FILL. (No config fits
    where s13's own rule would take M <= 128: its >= 40 tiles of 128 x 256 are > 132 of these.)"""
    part = M > WAVE_PART_MIN_M
    fits = [(cdiv(N, w[0]) * cdiv(M, w[1]), -i, w) for i, w in enumerate(WAVE_TILES)
            if M <= WAVE_MAX_M and M >= 2 * w[1] and (part or M % w[1] == 0)]
    fits = [t for t in fits if (WAVE_PART_FILL if part else WAVE_FILL) * num_sms <= t[0] <= num_sms]
    if not fits:
        return None
    tiles, _, (bn, bt, bk, stages, warps) = max(fits)
    return Plan("data-parallel", bt, tiles, stages, warps, bn, bk)


def _wide(M, N, num_sms):
    """WIDE_TILES data-parallel at M = 129-256, the first in order that fills WIDE_FILL-100% of
    the SMs, WIDE_ONE at M = 65-128 where it fills DP_FILL-100%, or None."""
    bm, bk, stages, warps = WIDE_BLOCK
    if not bm // 2 < M <= 2 * bm:
        return None
    if M <= bm:
        tiles = cdiv(N, sum(WIDE_ONE))
        if DP_FILL * num_sms <= tiles <= num_sms:
            return Plan("data-parallel", bm, tiles, stages, warps, sum(WIDE_ONE), bk, WIDE_ONE)
        return None
    for pieces, stages in WIDE_TILES:
        tiles = cdiv(M, bm) * cdiv(N, sum(pieces))
        if WIDE_FILL * num_sms <= tiles <= num_sms:
            return Plan("data-parallel", bm, tiles, stages, warps, sum(pieces), bk, pieces)
    return None


def _pair(M, N, num_sms):
    """PAIR_TILE data-parallel (two programs per SM) at M = 65-128 where its tiles make more than
    one and at most two programs per SM, or None."""
    bn, bt, bk, stages, warps = PAIR_TILE
    tiles = cdiv(N, bn) * cdiv(M, bt)
    if 64 < M <= 128 and num_sms < tiles <= 2 * num_sms:
        return Plan("data-parallel", bt, tiles, stages, warps, bn, bk)
    return None


def divide(M, N, K, num_sms, tile):
    """Programs for a tile config (a Plan whose name and programs are ignored): stream-K over
    num_sms programs, or split-K where whole tiles cut in equal pieces fill >= 95% of them."""
    bn, bt, bk = tile.block_n, tile.block_t, tile.block_k
    tiles = cdiv(N, bn) * cdiv(M, bt)
    k_steps = cdiv(K, bk)
    T = tiles * k_steps
    # a piece costs a bn x bt fp32 write and read: give each program at least as many K steps
    # as it takes for the tile loads to outweigh that
    min_iters = max(1, (bn * bt * 4 * 2) // ((bn + bt) * bk * 2))
    programs = max(1, min(num_sms, T // min_iters))
    split = programs // tiles
    if tiles <= programs and k_steps % split == 0 and tiles * split >= 0.95 * programs:
        programs = tiles * split
    per = T // programs   # K steps per program when T % programs == 0
    name = ("stream-k" if T % programs else "data-parallel" if per % k_steps == 0
            else "split-k" if k_steps % per == 0 else "stream-k")
    return Plan(name, bt, programs, tile.stages, tile.warps, bn, bk)


_workspace = {}   # device -> fp32 buffer: [tile counters (int32 bits) | partials]; grows only


def _buffer(device, counters, partials):
    """The device's workspace with room for `counters` int32 tile counters at its front (zero
    between launches: every fixup resets its tile's) and `partials` fp32 after them."""
    ws = _workspace.get(device)
    if ws is None or ws.numel() < COUNTERS + partials or counters > COUNTERS:
        assert counters <= COUNTERS, f"{counters} tiles: more than the workspace's {COUNTERS} counters"
        ws = torch.zeros(COUNTERS + partials, dtype=torch.float32, device=device)
        _workspace[device] = ws
    return ws


def _sms(a):
    return 3 if INTERPRET else _num_sms(a.device.index or 0)   # 3: uneven shares in the interpreter


def decomposition(a, b, beta=0.0):
    """How matmul(a, b, c, alpha, beta) divides its work: 'split-k', 'stream-k', 'data-parallel'
    (every program whole tiles) or 'data-parallel (s13)' (s13's kernel runs the call), then its
    tile (N x M x K) and program count, e.g. 'split-k, 64x16x256 tiles (N x M x K), 128 programs'."""
    M, K, N = a.shape[0], a.shape[1], b.shape[1]
    p = plan(M, N, K, _sms(a), beta)
    if p.name.endswith("(s13)"):   # s13's own (autotuned) tiles
        return p.name
    programs = min(p.programs, cdiv(N, p.block_n) * cdiv(M, p.block_t) * cdiv(K, p.block_k))   # as launch()
    if p.pieces:
        dots = f" as {' + '.join(map(str, p.pieces))}-row dots" if len(p.pieces) > 1 else ""
        return f"{p.name}, A-B, {p.block_t}x{p.block_n}x{p.block_k} tiles (M x N x K){dots}, {p.programs} programs"
    return f"{p.name}, {p.block_n}x{p.block_t}x{p.block_k} tiles (N x M x K), {programs} programs"


def _s13():
    """s13's module, under the name study.kernel("triton", "s13") gives it (one autotune cache)."""
    name = "study_triton_s13_warp_specialized"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(name[13:] + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


def _fix_batch(p):
    """Partials a fixup loads at once: 4, or fewer where a piece takes >= 32 registers a thread."""
    regs = p.block_n * p.block_t // (32 * p.warps)
    return 4 if regs <= 16 else 2 if regs <= 32 else 1


def _x_ptr(a, p, a_t):
    """Whether the part-filled last token tile reads x by masked loads (K-major x only). K and lda
    multiples of 16 elements: Triton specialises them, and only then are the loads cp.async in
    the pipelined loop (otherwise LDG + STS, synchronous: 72 x 4104 x 4104's SASS)."""
    M, K = a.shape
    tail = M % p.block_t
    return (not a_t and p.block_t == 128 and 0 < tail <= (X_PTR_WIDE_TAIL if p.pieces else X_PTR_TAIL)
            and K % 16 == 0 and a.stride(0) % 16 == 0)


def launch(a, b, c, alpha, beta, p, layout="NT"):
    """Run plan p (tests and benchmarks may pass a plan of their own) in `layout`."""
    M, K = a.shape
    N = b.shape[1]
    if p.name == "data-parallel (s13)":
        return _s13().matmul(a, b, c, alpha=alpha, beta=beta, layout=layout)
    a_t, b_t = TRANSPOSED[layout]   # as stored: x (M, K) or TN's (K, M); W (N, K) for NT, else (K, N)
    if p.pieces:
        return _launch_wide(a, b, c, alpha, beta, p, layout, a_t, b_t)
    tiles = cdiv(N, p.block_n) * cdiv(M, p.block_t)
    T = tiles * cdiv(K, p.block_k)
    programs = min(p.programs, T)   # no empty shares: s14_stream_k_owner_kernel relies on it
    assert (T + 1) * programs < 2**31, "iteration indices must fit int32"
    ws = _buffer(a.device, tiles, 2 * programs * p.block_n * p.block_t)
    w_desc = descriptor(b, [p.block_n, p.block_k] if b_t else [p.block_k, p.block_n], b_t)
    x_desc = descriptor(a, [p.block_k, p.block_t] if a_t else [p.block_t, p.block_k], a_t)
    replay(s14_stream_k_kernel)[(programs,)](w_desc, x_desc, a, a.stride(0), c, ws, M, N, K, c.stride(0),
                                             float(alpha), float(beta), COUNTERS=COUNTERS, BLOCK_N=p.block_n,
                                             BLOCK_T=p.block_t, BLOCK_K=p.block_k, C_VEC=c_vector_width(c),
                                             BETA_ZERO=(beta == 0), THREADS=32 * p.warps, FIX_BATCH=_fix_batch(p),
                                             LAYOUT=layout, X_PTR=_x_ptr(a, p, a_t),
                                             num_warps=p.warps, num_stages=p.stages)
    return c


def _launch_wide(a, b, c, alpha, beta, p, layout, a_t, b_t):
    """A WIDE_TILES plan: one program per tile, a weight descriptor per piece (an absent piece
    passes the first one, unread)."""
    M, K = a.shape
    N = b.shape[1]
    w = [descriptor(b, [wi, p.block_k] if b_t else [p.block_k, wi], b_t) for wi in p.pieces]
    widths = list(p.pieces) + [0] * (3 - len(p.pieces))
    w += [w[0]] * (3 - len(w))
    x_desc = descriptor(a, [p.block_k, p.block_t] if a_t else [p.block_t, p.block_k], a_t)
    replay(s14_stream_k_wide_kernel)[(cdiv(M, p.block_t) * cdiv(N, p.block_n),)](
        x_desc, a, a.stride(0), *w, c, M, N, K, c.stride(0), float(alpha), float(beta), BLOCK_M=p.block_t,
        BLOCK_K=p.block_k, W0=widths[0], W1=widths[1], W2=widths[2], C_VEC=c_vector_width(c),
        BETA_ZERO=(beta == 0), LAYOUT=layout, X_PTR=_x_ptr(a, p, a_t), num_warps=p.warps,
        num_stages=p.stages)
    return c


def matmul(a, b, c, alpha=1.0, beta=0.0, layout="NT"):
    """c = alpha * a @ b + beta * c in `layout`: NT a (M, K) row-major (tokens), b the (K, N)
    view of an (N, K) weight; NN both row-major; TN a the (M, K) view of a (K, M) tensor."""
    M, K = a.shape
    return launch(a, b, c, alpha, beta, plan(M, b.shape[1], K, _sms(a), beta), layout)


unsupported = tma_unsupported   # TMA: 16-byte aligned a, b and row strides, as stored in the layout
