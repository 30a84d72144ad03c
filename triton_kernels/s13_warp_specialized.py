"""s13_warp_specialized: persistent, warp-specialised programs over device-side TMA descriptors

Change: vs s12, one program per SM loops over C tiles in grouped order, warp-specialised
        (tl.range(..., warp_specialize=True)): a TMA producer warpgroup, two wgmma consumers.
Why:    s12 at 4096^3 runs 512 programs = 3.9 waves of 132 SMs; each spends ~1-2 us filling its
        pipeline and ~1-2 us storing 64 KiB of C while its tensor cores idle, ~4-7% of a 268
        MFLOP tile. Persistent, the fill happens once per SM; specialised, the producer loads the
        next tile during the epilogue (setmaxnreg gives consumers the registers). Descriptors are
        built on the device: host-side ones hung the warp-specialised loop (Triton 3.6).
Expect: ~95-99% of cuBLAS FP16/BF16 (NT) at 4096^3 and 8192^3, ~1.0x s12 (128x256x64 x 3 stages)
Limits: a and b 16-byte aligned, lda and ldb (row strides as stored: b.stride(1) in NT, a.stride(1)
        in TN) multiples of 8 elements (TMA: 16-byte aligned base and row strides; else ValueError
        naming the argument); any M, N, K >= 1 and any ldc (a C TMA cannot store, and beta != 0,
        go through masked pointer stores, not warp-specialised)
Dtype:  fp16, bf16 in / fp32 acc / same as in out        Arch: sm_90a      Layout: NT, NN, TN
Pair:   cuda_src/s13_warp_specialized.cu
Log:    docs/stages/s13_warp_specialized.md
"""
import functools

import torch
import triton
import triton.language as tl

from study.operands import TRANSPOSED
from study.tritonlib import (INTERPRET, autotune_do_bench, autotune_prune, c_vector_width, grouped_tile,
                             store_c_tile, tma_config, tma_unsupported)
from study.tritonlaunch import cdiv, replay, stored_layout, use_scratch

GROUP_M = 8   # tile rows per group: tiles in flight at once reuse the same B tiles from L2


def _config(bm, bn, bk, stages, warps):
    return tma_config(bm, bn, bk, stages, warps, GROUP_M, host_descriptors=False)


# Warp-specialised tiles (BM, BN, BK, stages, warps): num_warps=4 is the consumer side Triton
# splits in two (8 warps are not specialised on Hopper). smem = stages * (BM + BN) * BK * 2 B
# for the ring plus BM * BN * 2 B for the TMA store of C: 144 + 64 = 208 KiB at 128x256 x 3
# (4 stages would need 256 KiB).
WS_CONFIGS = [
    _config(128, 256, 64, 3, 4),   # 2 consumer warpgroups of 64x256: 4096^3, 8192^3
    _config(128, 128, 64, 4, 4),   # 2 of 64x128: more tiles for problems of few tile rows
]
# The flattened loop (C that TMA cannot store): 8 warps = 2 warpgroups of wgmma; smem = the
# ring plus a 32 KiB buffer the epilogue uses to change the accumulator's layout.
FLAT_CONFIGS = [
    _config(128, 256, 64, 3, 8),   # 144 KiB
    _config(128, 128, 64, 4, 8),   # 128 KiB
]


def _prune(configs, named_args, **kwargs):
    """The configs of the loop this call runs (WS and C_VEC are in the autotune key). C_VEC == 1
    (C's rows not 16-byte aligned): not the flattened 128x256, whose part-by-part C store adds a
    128 KiB layout change to its ring (272 KiB; a block may have 227). Interpreter: the first."""
    mine = [c for c in configs if (c in WS_CONFIGS) == bool(kwargs.get("WS"))
            and not (kwargs.get("C_VEC") == 1 and c is FLAT_CONFIGS[0])]
    return autotune_prune(mine or configs, named_args, **kwargs)


@functools.lru_cache(maxsize=None)
def _num_sms(device_index):
    return torch.cuda.get_device_properties(device_index).multi_processor_count


# restore_value: autotune runs each config several times; with beta != 0 each run would
# accumulate into C, so C is saved before timing and restored after. The tritonlib hooks let
# the interpreter (no device timer) run configs[0] only.
@triton.autotune(configs=WS_CONFIGS + FLAT_CONFIGS, key=["M", "N", "K", "WS", "C_VEC", "LAYOUT"],
                 restore_value=["c_ptr"], do_bench=autotune_do_bench,
                 prune_configs_by={"early_config_prune": _prune})
@triton.jit
def s13_warp_specialized_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                                NUM_SMS: tl.constexpr, C_VEC: tl.constexpr, BETA_ZERO: tl.constexpr,
                                WS: tl.constexpr, LAYOUT: tl.constexpr):
    # --- operand staging: TMA descriptors, built once per program on the device -----------
    # A and B as stored (NT: A [M, K] and B [N, K], both K-contiguous; NN: B [K, N]; TN: A
    # [K, M]); boxes of one K step. TMA zero-fills the part of a box past M, N or K and clips
    # stores at M and N: no masks anywhere.
    if LAYOUT == "TN":
        a_desc = tl.make_tensor_descriptor(a_ptr, [K, M], [lda, 1], [BLOCK_K, BLOCK_M])
    else:
        a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [lda, 1], [BLOCK_M, BLOCK_K])
    if LAYOUT == "NT":
        b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [ldb, 1], [BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [ldb, 1], [BLOCK_K, BLOCK_N])
    if WS:
        c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [ldc, 1], [BLOCK_M, BLOCK_N])

    # --- tile assignment: persistent; program p takes tiles p, p + NUM_SMS, ... -------------
    # Tiles are numbered in grouped order (GROUP_M tile rows per group, as s11/s12), so the
    # NUM_SMS tiles in flight at one time share A and B strips in L2.
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)

    # WS: the compiler splits this loop's body into a TMA producer partition and wgmma
    # consumer partitions joined by mbarrier rings. Not WS: it fuses this loop with the K loop
    # (flatten) and pipelines it num_stages deep across tile boundaries.
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=not WS, warp_specialize=WS):
        pid_m, pid_n = grouped_tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N

        # --- loop over K: one TMA box of A and of B per step, wgmma from smem -------------
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_steps):
            if LAYOUT == "TN":
                a = a_desc.load([ki * BLOCK_K, off_m]).T   # box [BLOCK_K, BLOCK_M]: an M-major view
            else:
                a = a_desc.load([off_m, ki * BLOCK_K])     # [BLOCK_M, BLOCK_K]
            if LAYOUT == "NT":
                b = b_desc.load([off_n, ki * BLOCK_K]).T   # box [BLOCK_N, BLOCK_K]: a K-major view
            else:
                b = b_desc.load([ki * BLOCK_K, off_n])     # [BLOCK_K, BLOCK_N]
            acc = tl.dot(a, b, acc)   # .T views: wgmma reads 16-bit smem in either major order

        # --- epilogue: alpha/beta in fp32, one rounding to C's dtype ------------------------
        if WS:   # C through a TMA load (beta != 0) and a TMA store from the consumer warps
            out = alpha * acc
            if not BETA_ZERO:
                out += beta * c_desc.load([off_m, off_n]).to(tl.float32)
            c_desc.store([off_m, off_n], out.to(c_ptr.dtype.element_ty))
        else:    # masked pointer stores at any ldc
            store_c_tile(c_ptr, acc, off_m, off_n, M, N, ldc, alpha, beta, BLOCK_M, BLOCK_N, C_VEC, BETA_ZERO)


def _tma_stores_c(c):
    """C can be a TMA store target: 16-byte aligned base and row stride, unit column stride, and
    rows of whole 16-byte units (N * 2 bytes): with N = 45 in a padded C the device-side
    descriptor's store wrote columns 45-47 too (H100, Triton 3.6, NT; docs/stages/s13)."""
    return (c.data_ptr() % 16 == 0 and c.stride(0) % 8 == 0 and c.stride(1) == 1
            and c.shape[1] * c.element_size() % 16 == 0)


def matmul(a, b, c, alpha=1.0, beta=0.0, layout="NT"):
    """c = alpha * a @ b + beta * c in `layout`: NT a (M, K) row-major, b the (K, N) view of an
    (N, K) tensor; NN both row-major; TN a the (M, K) view of a (K, M) tensor."""
    M, K = a.shape
    N = b.shape[1]
    a_t, b_t = TRANSPOSED[layout]   # row strides of A and B as stored (row-major)
    lda, ldb = stored_layout(a, a_t)[2], stored_layout(b, b_t)[2]
    num_sms = 4 if INTERPRET else _num_sms(a.device.index or 0)
    use_scratch()   # device-side descriptors live in global scratch (unless the caller set an allocator)

    def grid(meta):   # persistent: never more programs than SMs or than tiles
        tiles = cdiv(M, meta["BLOCK_M"]) * cdiv(N, meta["BLOCK_N"])
        return (min(num_sms, tiles),)

    replay(s13_warp_specialized_kernel)[grid](a, b, c, M, N, K, lda, ldb, c.stride(0),
                                              float(alpha), float(beta), NUM_SMS=num_sms, C_VEC=c_vector_width(c),
                                              BETA_ZERO=(beta == 0), WS=_tma_stores_c(c) and beta == 0, LAYOUT=layout)
    return c


unsupported = tma_unsupported   # TMA: 16-byte aligned a, b and row strides, as stored in the layout
