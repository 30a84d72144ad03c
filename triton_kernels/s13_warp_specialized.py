"""s13_warp_specialized: persistent programs, warp-specialised TMA producer / wgmma consumers

Change: vs s12, one program per SM (grid = number of SMs) loops over C tiles in grouped order,
        and the tile loop is tl.range(..., warp_specialize=True): Triton splits each program
        into a producer warpgroup that only issues TMA copies (setmaxnreg down to 40 registers)
        and 2 consumer warpgroups (232 registers) that each run wgmma on half the tile's rows
        and its epilogue, handing smem slots over on mbarriers.
Why:    s12 at 4096^3 launches cdiv(4096,128)*cdiv(4096,256) = 512 programs = 3.9 waves of 132
        SMs. A 128x256 tile is 2*128*256*4096 = 268 MFLOP, ~55 us at ~4.9 TFLOP/s per SM (650
        TFLOP/s / 132); each program spends ~1-2 us filling its pipeline from empty and ~1-2 us
        storing 64 KiB of C while its tensor cores idle: ~4-7% of the tile. Persistent and
        specialised, the producer runs ahead into tile i+1 while the consumers store tile i, so
        the tensor cores see one continuous stream of K steps (~4 tiles per SM at 4096^3, ~16
        at 8192^3), and load issue slots and address registers leave the MMA warps entirely.
Expect: ~1.05x s12 at 4096^3; >= 95% of cuBLAS FP16/BF16 (NT) at 4096^3 and 8192^3
Limits: a and b 16-byte aligned, lda and ldb multiples of 8 elements (TMA: 16-byte aligned
        base and row strides; else ValueError naming the argument); any M, N, K >= 1 and any
        ldc (C goes through masked pointer stores)
Dtype:  fp16, bf16 in / fp32 acc / same as in out        Arch: sm_90a      Layout: NT
Pair:   cuda_src/s13_warp_specialized.cu
"""
import functools

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from study.tritonlib import INTERPRET, autotune_do_bench, autotune_prune, grouped_tile

GROUP_M = 8   # tile rows per group: tiles in flight at once reuse the same B tiles from L2


def _set_block_shapes(nargs):
    # The descriptors are built before the autotuner picks a tile: each config stamps its
    # TMA box sizes on them just before launch (host-side descriptors are plain Python data).
    nargs["a_desc"].block_shape = [nargs["BLOCK_M"], nargs["BLOCK_K"]]
    nargs["b_desc"].block_shape = [nargs["BLOCK_N"], nargs["BLOCK_K"]]


def _config(bm, bn, bk, stages, warps):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": GROUP_M},
                         num_stages=stages, num_warps=warps, pre_hook=_set_block_shapes)


# Hopper tile shapes (BM, BN, BK, stages, warps); smem = stages * (BM + BN) * BK * 2 B plus
# the epilogue's layout-conversion buffer. num_warps must be 4: Triton 3.6's Hopper warp
# specialisation then runs 3 warpgroups (12 warps): the 4 requested warps become the TMA
# producer and 2 consumer warpgroups each take half of the tile's rows. With num_warps=8
# it silently falls back to an unspecialised loop (checked in the ttgir). 256x128 is left out:
# its consumers (128x128 fp32 each, 232 registers) spill 8 words when beta != 0.
CONFIGS = [
    _config(128, 256, 64, 3, 4),   # 144 KiB; consumers: 2 x (64x256 wgmma), 128 acc regs each
    _config(128, 256, 64, 4, 4),   # 192 KiB (+32 KiB epilogue buffer: 224 of 227 KiB)
    _config(128, 128, 64, 4, 4),   # 128 KiB; consumers: 2 x (64x128), more tiles per SM
    _config(128, 128, 64, 5, 4),   # 160 KiB; deeper ring
]
for _c in CONFIGS:
    _bk, _bm, _bn = _c.kwargs["BLOCK_K"], _c.kwargs["BLOCK_M"], _c.kwargs["BLOCK_N"]
    assert _bk * 2 <= 128, "BLOCK_K * 2 B must fit one 128-byte TMA swizzle row"
    assert _bm <= 256 and _bn <= 256, "a TMA box is at most 256 rows"
    assert _bm % 128 == 0 and _bn % 8 == 0, "tile must split over 2 consumer wgmma groups (M % 128, N % 8)"
    assert _c.num_warps == 4, "Hopper warp specialisation needs num_warps=4 (1 producer + 2 consumers)"
    assert _c.num_stages * (_bm + _bn) * _bk * 2 <= 227 * 1024, "pipeline must fit 227 KiB of smem"



@functools.lru_cache(maxsize=None)
def _num_sms(device_index):
    return torch.cuda.get_device_properties(device_index).multi_processor_count


# restore_value: autotune runs each config several times; with beta != 0 each run would
# accumulate into C, so C is saved before timing and restored after. The tritonlib hooks let
# the interpreter (no device timer) run configs[0] only.
@triton.autotune(configs=CONFIGS, key=["M", "N", "K"], restore_value=["c_ptr"],
                 do_bench=autotune_do_bench, prune_configs_by={"early_config_prune": autotune_prune})
@triton.jit
def s13_warp_specialized_kernel(a_desc, b_desc, c_ptr, M, N, K, ldc, alpha, beta,
                                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                                NUM_SMS: tl.constexpr, BETA_ZERO: tl.constexpr):
    # --- tile assignment: persistent; program p takes tiles p, p + NUM_SMS, ... -------------
    # Tiles are numbered in grouped order (GROUP_M tile rows per group, as s11/s12), so the
    # NUM_SMS tiles in flight at one time share A and B strips in L2.
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)

    # warp_specialize: the compiler partitions this loop nest into a producer warpgroup (the
    # TMA loads below) and consumer warpgroups (wgmma + epilogue), linked by mbarriers.
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_SMS, warp_specialize=True):
        pid_m, pid_n = grouped_tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N

        # --- operand staging: TMA boxes A [BLOCK_M, BLOCK_K], B [BLOCK_N, BLOCK_K] ----------
        # The producer partition owns these loads; it runs ahead into the next tile while
        # the consumers are in this tile's epilogue (num_stages smem slots between them).
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)

        # --- loop over K: the consumer partition waits on a slot, wgmma, releases it -------
        for k0 in range(0, K, BLOCK_K):
            a = a_desc.load([off_m, k0])     # [BLOCK_M, BLOCK_K], zero-filled past M / K
            b = b_desc.load([off_n, k0])     # [BLOCK_N, BLOCK_K], zero-filled past N / K
            acc = tl.dot(a, b.T, acc)

        # --- epilogue: alpha/beta in fp32, masked pointer stores (any ldc) -----------------
        offs_m = off_m + tl.arange(0, BLOCK_M)
        offs_n = off_n + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + offs_m[:, None] * ldc + offs_n[None, :]
        mask_c = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        out = alpha * acc
        if not BETA_ZERO:   # beta == 0: C is write-only and never loaded (it may hold NaN)
            out += beta * tl.load(c_ptrs, mask=mask_c, other=0.0).to(tl.float32)
        tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=mask_c)


def matmul(a, b, c, alpha=1.0, beta=0.0):
    """c = alpha * a @ b + beta * c; a (M, K) row-major, b the (K, N) view of an (N, K) tensor."""
    M, K = a.shape
    N = b.shape[1]
    bt = b.t()   # (N, K) with unit stride along K: the tensor B was stored as
    # Box sizes are placeholders here: the chosen config's pre_hook sets them.
    a_desc = TensorDescriptor(a, [M, K], [a.stride(0), 1], [64, 64])
    b_desc = TensorDescriptor(bt, [N, K], [bt.stride(0), 1], [64, 64])
    num_sms = 4 if INTERPRET else _num_sms(a.device.index or 0)

    def grid(meta):   # persistent: never more programs than SMs or than tiles
        tiles = triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])
        return (min(num_sms, tiles),)

    s13_warp_specialized_kernel[grid](a_desc, b_desc, c, M, N, K, c.stride(0),
                                      float(alpha), float(beta), NUM_SMS=num_sms,
                                      BETA_ZERO=(beta == 0))
    return c


def unsupported(a, b, c):
    """None, or why this stage cannot run the problem (study raises it as ValueError)."""
    for name, t, ld_name, ld in (("a", a, "lda", a.stride(0)), ("b", b, "ldb", b.stride(1))):
        if t.data_ptr() % 16 != 0:
            return f"{name} must be 16-byte aligned for TMA (data_ptr % 16 == {t.data_ptr() % 16})"
        if ld % 8 != 0:
            return (f"{ld_name} must be a multiple of 8 elements for TMA (16-byte row stride), "
                    f"got {ld}")
    return None
