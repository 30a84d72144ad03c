"""s13_warp_specialized: persistent programs over TMA descriptors, one flattened pipeline

Change: vs s12, one program per SM (grid = number of SMs) loops over C tiles in grouped order,
        and the tile loop and its K loop are flattened into one software-pipelined loop
        (tl.range(..., flatten=True)): the TMA loads of tile i+1's first K steps are in flight
        while tile i's last wgmmas and its epilogue run. Not warp-specialised: Triton 3.6's
        automatic Hopper warp specialisation (warp_specialize=True, num_warps=4 -> 1 TMA
        producer + 2 wgmma consumer warpgroups, setmaxnreg 40/232 in the SASS) compiled but hung
        on the H100 at 4096^3 fp16, and Triton's own tutorial enables it on Blackwell only. The
        CUDA pair does the producer/consumer split by hand.
Why:    s12 at 4096^3 launches cdiv(4096,128)*cdiv(4096,256) = 512 programs = 3.9 waves of 132
        SMs. A 128x256 tile is 2*128*256*4096 = 268 MFLOP, ~55 us at ~4.9 TFLOP/s per SM (650
        TFLOP/s / 132); each program spends ~1-2 us filling its pipeline from empty and ~1-2 us
        storing 64 KiB of C while its tensor cores idle: ~4-7% of the tile. Persistent and
        flattened, the fill happens once per SM (~4 tiles per SM at 4096^3, ~16 at 8192^3) and
        the next tile's loads overlap the current epilogue; the epilogue itself still runs on
        the MMA warps (what warp specialisation would take off them).
Expect: ~1.03x s12 at 4096^3; ~90-95% of cuBLAS FP16/BF16 (NT) at 4096^3 and 8192^3
        (first H100 study run: 1.07x / 1.11x s12 at 4096^3 fp16 / bf16, 95-96% of cuBLAS
        there and 101% at 8192^3)
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

from study.tritonlib import (INTERPRET, autotune_do_bench, autotune_prune, c_vector_width, grouped_tile,
                             store_c_tile, tma_config, tma_unsupported)

GROUP_M = 8   # tile rows per group: tiles in flight at once reuse the same B tiles from L2


def _config(bm, bn, bk, stages, warps):
    return tma_config(bm, bn, bk, stages, warps, GROUP_M)


# Hopper tile shapes (BM, BN, BK, stages, warps); smem = stages * (BM + BN) * BK * 2 B plus
# a 32 KiB buffer the epilogue uses to change the accumulator's layout for coalesced stores.
CONFIGS = [
    _config(128, 256, 64, 3, 8),   # 144 KiB; 2 warpgroups of 64x256 wgmma, 128 acc regs each
    _config(128, 256, 64, 4, 8),   # 192 KiB (+32 KiB epilogue buffer: 224 of 227 KiB)
    _config(256, 128, 64, 3, 8),   # 144 KiB; tall tile (s12's pick at 4096^3 fp16)
    _config(128, 128, 64, 4, 8),   # 128 KiB; 2 warpgroups of 64x128, more tiles per SM
]


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
                                NUM_SMS: tl.constexpr, C_VEC: tl.constexpr, BETA_ZERO: tl.constexpr):
    # --- tile assignment: persistent; program p takes tiles p, p + NUM_SMS, ... -------------
    # Tiles are numbered in grouped order (GROUP_M tile rows per group, as s11/s12), so the
    # NUM_SMS tiles in flight at one time share A and B strips in L2.
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)

    # flatten: the compiler fuses this loop with the K loop below into one loop of
    # tiles_per_program * k_steps iterations and pipelines it num_stages deep across tile
    # boundaries. (warp_specialize=True here hung on the H100 with Triton 3.6: see header.)
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = grouped_tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N

        # --- operand staging: TMA boxes A [BLOCK_M, BLOCK_K], B [BLOCK_N, BLOCK_K] ----------
        # Flattened, the pipeline does not drain at a tile boundary: the next tile's first
        # num_stages-1 boxes are requested before this tile's epilogue runs.
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)

        # --- loop over K: wait on a slot's mbarrier, wgmma from smem, free the slot --------
        for k0 in range(0, K, BLOCK_K):
            a = a_desc.load([off_m, k0])     # [BLOCK_M, BLOCK_K], zero-filled past M / K
            b = b_desc.load([off_n, k0])     # [BLOCK_N, BLOCK_K], zero-filled past N / K
            acc = tl.dot(a, b.T, acc)

        # --- epilogue: alpha/beta in fp32, masked pointer stores (any ldc) -----------------
        store_c_tile(c_ptr, acc, off_m, off_n, M, N, ldc, alpha, beta, BLOCK_M, BLOCK_N, C_VEC, BETA_ZERO)


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
                                      C_VEC=c_vector_width(c), BETA_ZERO=(beta == 0))
    return c


unsupported = tma_unsupported   # TMA: 16-byte aligned a, b and row strides
