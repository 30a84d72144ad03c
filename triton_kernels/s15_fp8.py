"""s15_fp8: FP8 e4m3 tl.dot over tensor descriptors, scales in the epilogue

Change: vs s13, e4m3 operands; promoted, each 256-element K chain (one dot of BLOCK_K = 256
        bytes, two TMA swizzle rows; flattened also two chained 128 dots) is added into fp32
        accumulators, on 128x128 tiles: warp-specialised (C a TMA target) or flattened, autotuned.
Why:    FP8 wgmma runs at 2x bf16 per cycle but keeps ~14 mantissa bits of a long accumulate
        chain; Triton 3.6 chains over all of K (fast_accum=True keeps that). Warp-specialised,
        each consumer warpgroup adds its chain on its own; the flattened loop syncs the CTA
        around each K block's TMA issue. Triton 3.6's WS computed wrong results for two dots
        per K block (so one 256-wide dot) and offset `off_m + arange` twice (so row scales
        are loaded from the tile's scalar base).
Expect: ~90% (per tensor) / ~95% (per row) of cuBLAS FP8 promoted at 4096^3 (H100 study)
Limits: a and b 16-byte aligned, lda and ldb multiples of 16 elements (TMA: 16-byte rows of
        1-byte e4m3; a contiguous a or b needs K % 16 == 0), else ValueError; scales fp32 on
        a's device: 1 element, or M (per row of a) / N (per column of b), contiguous
Dtype:  fp8 in / fp32 acc / bf16 out        Arch: sm_90a      Layout: NT
Pair:   cuda_src/s15_fp8.cu
Log:    docs/stages/s15_fp8.md
"""
import functools

import torch
import triton
import triton.language as tl

from study.tritonepilogue import update_c_in_parts
from study.tritonlib import INTERPRET, autotune_do_bench, autotune_prune, c_vector_width, grouped_tile
from study.tritonlaunch import cdiv, replay, use_scratch

GROUP_M = 8   # tile rows per group: tiles in flight at once reuse the same B tiles from L2


def _config(bm, bn, bk, stages, warps, c_tile=True, ws=False):
    """A tile config of the warp-specialised (ws) or the flattened loop: smem = stages * (bm + bn)
    * bk B (1-byte e4m3), + bm * bn * 2 B for C where the config's loop stages C for a TMA store."""
    assert bk <= 256, "BLOCK_K bytes: one or two 128-byte TMA swizzle rows"
    assert bm <= 256 and bn <= 256 and bm % 64 == 0 and bn % 8 == 0, "TMA box / wgmma tile limits"
    assert stages * (bm + bn) * bk + (bm * bn * 2 if c_tile else 0) <= 227 * 1024, "ring (+ C tile) must fit 227 KiB"
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": GROUP_M, "WS": ws},
                         num_stages=stages, num_warps=warps)


# Warp-specialised (WS) tiles: num_warps=4 is the consumer side (Triton splits it into 2 wgmma
# warpgroups of BLOCK_M / 2 rows). Promoted, each consumer thread holds the accumulator and
# the chain's partial sum: 2 x 64 registers at 128x128, 2 x 128 (spills) at 128x256. Promoted
# tiles take BLOCK_K = 256: one dot, one 256-element chain per K block (two dots per K block, or
# two 128-column halves, computed wrong results in the WS loop: H100, Triton 3.6).
WS_CONFIGS = [
    _config(128, 256, 128, 3, 4, ws=True),   # 144 KiB ring + 64 KiB C: fast accumulation
    _config(128, 128, 256, 3, 4, ws=True),   # 192 KiB ring + 32 KiB C
    _config(128, 128, 256, 2, 4, ws=True),   # 128 KiB ring + 32 KiB C
]
# The flattened loop (C that TMA cannot store, vector scales, beta != 0): 8 warps = 2 warpgroups of
# wgmma. Promoted: 128x128 tiles, a 256-element chain per step (one BLOCK_K = 256 dot, or two
# 128 dots).
FLAT_CONFIGS = [
    _config(128, 256, 128, 3, 8),
    _config(128, 128, 256, 3, 8),
    _config(128, 128, 128, 3, 8),
]


def _prune(configs, named_args, **kwargs):
    """The configs this call may run. WS configs only where the call allows them (WS_OK, in the
    autotune key); fast accumulation then runs warp-specialised only. Promoted: the 128x128
    tiles, WS and flattened: the autotuner picks the loop per shape. The flattened loop with per-tensor scales and
    fast accumulation keeps 128x128 (it spills at 128x256). beta != 0 into a C of unaligned rows
    (C_VEC == 1): one stage fewer, as the layout change of the quarter-row update takes 32 KiB
    beside the ring, live across the persistent loop (262168 B > 227 KiB at 128x128x128, 3
    stages; H100, Triton 3.6). Interpreter: the first."""
    ws_ok = bool(kwargs.get("WS_OK"))
    if kwargs.get("PROMOTE"):
        # 128x128 (one chain beside a 128x256 accumulator spills); WS only where the call allows it
        mine = [c for c in configs if c.kwargs["BLOCK_N"] == 128 and (ws_ok or not c.kwargs["WS"])]
    elif ws_ok:
        mine = [c for c in configs if c.kwargs["WS"]]
    elif not (kwargs.get("SA_ROW") or kwargs.get("SB_COL")):
        # the flattened loop with scalar scales at 128x256 needs 255 registers + 432 B of spills
        mine = [c for c in configs if not c.kwargs["WS"] and c.kwargs["BLOCK_N"] <= 128]
    else:
        mine = [c for c in configs if not c.kwargs["WS"] and c.num_stages < 4]
    mine = mine or configs
    if not kwargs.get("BETA_ZERO", True) and kwargs.get("C_VEC", 1) == 1:
        mine = [triton.Config(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages - 1) for c in mine]
    return autotune_prune(mine, named_args, **kwargs)


@functools.lru_cache(maxsize=None)
def _num_sms(device_index):
    return torch.cuda.get_device_properties(device_index).multi_processor_count


# WS (which loop) comes from the config; WS_OK (which loops the call allows) only keys the
# autotuner and its prune, the kernel body never reads it.
@triton.autotune(configs=WS_CONFIGS + FLAT_CONFIGS,
                 key=["M", "N", "K", "WS_OK", "PROMOTE", "SA_ROW", "SB_COL", "BETA_ZERO", "C_VEC"], restore_value=["c_ptr"],
                 do_bench=autotune_do_bench, prune_configs_by={"early_config_prune": _prune})
@triton.jit
def s15_fp8_kernel(a_ptr, b_ptr, c_ptr, sa_ptr, sb_ptr, sa_inc, sb_inc, M, N, K, lda, ldb, ldc, alpha, beta,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, C_VEC: tl.constexpr,
                   BETA_ZERO: tl.constexpr, WS_OK: tl.constexpr, WS: tl.constexpr,
                   PROMOTE: tl.constexpr, SA_ROW: tl.constexpr, SB_COL: tl.constexpr):
    # --- operand staging: TMA descriptors over A [M, K] and B stored [N, K], both K-major ----
    # (FP8 wgmma reads only K-major smem operands); zero fill past M, N and K.
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [lda, 1], [BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [ldb, 1], [BLOCK_N, BLOCK_K])
    if WS:
        c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [ldc, 1], [BLOCK_M, BLOCK_N])

    # --- tile assignment: persistent, grouped order (as s13) ---------------------------------
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=not WS, warp_specialize=WS):
        pid_m, pid_n = grouped_tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N

        # --- loop over K: TMA boxes of A and B per step, e4m3 wgmma from smem -----------------
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if PROMOTE and (WS or BLOCK_K >= 256):   # a fresh one-dot chain per K block, added in fp32
            for ki in range(k_steps):
                a = a_desc.load([off_m, ki * BLOCK_K])
                b = b_desc.load([off_n, ki * BLOCK_K])
                acc += tl.dot(a, b.T)
        elif PROMOTE:   # a fresh chain over two K blocks (TMA zero-fills the one past K), added in fp32
            for ki in range(0, k_steps, 2):
                a0 = a_desc.load([off_m, ki * BLOCK_K])
                b0 = b_desc.load([off_n, ki * BLOCK_K])
                a1 = a_desc.load([off_m, (ki + 1) * BLOCK_K])
                b1 = b_desc.load([off_n, (ki + 1) * BLOCK_K])
                part = tl.dot(a0, b0.T)
                part = tl.dot(a1, b1.T, part)
                acc += part
        else:
            for ki in range(k_steps):
                a = a_desc.load([off_m, ki * BLOCK_K])     # [BLOCK_M, BLOCK_K] e4m3
                b = b_desc.load([off_n, ki * BLOCK_K])     # [BLOCK_N, BLOCK_K] e4m3
                acc = tl.dot(a, b.T, acc)
        s15_fp8_epilogue_kernel(acc, c_ptr, c_desc if WS else c_ptr, sa_ptr, sb_ptr, sa_inc, sb_inc, off_m, off_n,
                                M, N, ldc, alpha, beta, BLOCK_M, BLOCK_N, C_VEC, BETA_ZERO, WS, SA_ROW, SB_COL)


@triton.jit
def s15_fp8_epilogue_kernel(acc, c_ptr, c_desc, sa_ptr, sb_ptr, sa_inc, sb_inc, off_m, off_n, M, N, ldc, alpha,
                            beta, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, C_VEC: tl.constexpr,
                            BETA_ZERO: tl.constexpr, WS: tl.constexpr, SA_ROW: tl.constexpr,
                            SB_COL: tl.constexpr):
    """The [BLOCK_M, BLOCK_N] block of C at (off_m, off_n) from its fp32 sum (inlined). sa_inc / sb_inc:
    1 for a scale per row / column, 0 for one per tensor read as a vector (the WS loop)."""
    # --- epilogue: scales, alpha/beta in fp32, one rounding to C's dtype -----------------
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    # Vector loads: per row / column, and in the WS loop per tensor too (a stride-0 vector there
    # ran up to 13 points faster than scalar loads: H100, Triton 3.6). Rows from the tile's scalar
    # base: WS splits the rows between two consumers and offset both off_m and the arange of
    # `off_m + arange` (rows 64-127 of a tile read the scales of rows 128-191).
    if SA_ROW or WS:
        r = tl.arange(0, BLOCK_M)
        row = alpha * tl.load(sa_ptr + off_m * sa_inc + r * sa_inc, mask=r < M - off_m, other=0.0)
    else:
        row = tl.zeros((BLOCK_M,), tl.float32) + alpha * tl.load(sa_ptr)
    if SB_COL or WS:
        cn = tl.arange(0, BLOCK_N)
        col = tl.load(sb_ptr + off_n * sb_inc + cn * sb_inc, mask=cn < N - off_n, other=0.0)
        out = acc * row[:, None] * col[None, :]
    else:        # per tensor: one multiply per element
        out = acc * (row * tl.load(sb_ptr))[:, None]
    if WS:   # C through a TMA load (beta != 0) and a TMA store
        if not BETA_ZERO:
            out += beta * c_desc.load([off_m, off_n]).to(tl.float32)
        c_desc.store([off_m, off_n], out.to(c_ptr.dtype.element_ty))
    else:    # masked pointer stores at any ldc
        c_rows = offs_m * ldc
        n_lim = tl.full((BLOCK_N,), N, tl.int32)
        if C_VEC > 1:
            c_rows = tl.multiple_of(c_rows, C_VEC)
            n_lim = tl.multiple_of(n_lim, C_VEC)
        if BETA_ZERO:
            mask_c = (offs_m[:, None] < M) & (offs_n < n_lim)[None, :]
            tl.store(c_ptr + c_rows[:, None] + offs_n[None, :], out.to(c_ptr.dtype.element_ty), mask=mask_c)
        else:   # a quarter of the rows at a time (the whole tile of C spilled registers)
            update_c_in_parts(c_ptr, out, offs_m, offs_n, M, n_lim, ldc, beta, BLOCK_M, BLOCK_N, C_VEC)


def _tma_stores_c(c):
    """C can be a TMA store target: 16-byte aligned base and row stride, unit column stride, and
    rows of whole 16-byte units (N * 2 bytes): with N = 45 in a padded C the device-side
    descriptor's store wrote columns 45-47 too (H100, Triton 3.6, NT; docs/stages/s13)."""
    return (c.data_ptr() % 16 == 0 and c.stride(0) % 8 == 0 and c.stride(1) == 1
            and c.shape[1] * c.element_size() % 16 == 0)


def matmul(a, b, c, alpha=1.0, beta=0.0, *, scale_a, scale_b, fast_accum=False):
    """c = alpha * (scale_a * a) @ (b * scale_b) + beta * c; a (M, K) e4m3 row-major, b the
    (K, N) view of an (N, K) e4m3 tensor; scale_a fp32 of 1 or M elements, scale_b of 1 or N.
    fast_accum: one wgmma chain over all of K (faster, less accurate)."""
    M, K = a.shape
    N = b.shape[1]
    num_sms = 4 if INTERPRET else _num_sms(a.device.index or 0)
    use_scratch()   # device-side descriptors live in global scratch (unless the caller set an allocator)

    def grid(meta):   # persistent: never more programs than SMs or than tiles
        tiles = cdiv(M, meta["BLOCK_M"]) * cdiv(N, meta["BLOCK_N"])
        return (min(num_sms, tiles),)

    replay(s15_fp8_kernel)[grid](a, b, c, scale_a, scale_b, int(scale_a.numel() > 1), int(scale_b.numel() > 1),
                                 M, N, K, a.stride(0), b.stride(1), c.stride(0), float(alpha), float(beta),
                                 NUM_SMS=num_sms, C_VEC=c_vector_width(c), BETA_ZERO=(beta == 0),
                                 WS_OK=_tma_stores_c(c) and beta == 0, PROMOTE=not fast_accum,
                                 SA_ROW=scale_a.numel() > 1, SB_COL=scale_b.numel() > 1)
    return c


def unsupported(a, b, c, scale_a=None, scale_b=None):
    """None, or why this stage cannot run: TMA needs 16-byte aligned a and b and 16-byte rows
    (16 e4m3 elements); scales are fp32, contiguous, of 1 element or one per row / column."""
    for name, t, ld_name, ld in (("a", a, "lda", a.stride(0)), ("b", b, "ldb", b.stride(1))):
        if t.data_ptr() % 16 != 0:
            return f"{name} must be 16-byte aligned for TMA (data_ptr % 16 == {t.data_ptr() % 16})"
        if ld % 16 != 0 and t.shape[0 if name == "a" else 1] > 1:
            return (f"{ld_name} must be a multiple of 16 elements for TMA (16-byte row stride of "
                    f"1-byte e4m3), got {ld}")
    for name, s, n in (("scale_a", scale_a, a.shape[0]), ("scale_b", scale_b, b.shape[1])):
        if s is None:
            continue
        if s.dtype != torch.float32 or not s.is_contiguous() or s.numel() not in (1, n):
            return (f"{name} must be a contiguous fp32 tensor of 1 or {n} elements, got "
                    f"{s.dtype} {tuple(s.shape)}")
    return None
