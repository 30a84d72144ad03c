"""s08_autotuned: @triton.autotune over tile shape, warps, stages and group size, per shape

Change: vs s07, the fixed (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages) becomes a
        list of candidate configs timed on first use for each (M, N, K) and cached; where the
        chosen tile divides M, N and K (EVEN, set per config by tritonlib.even_tiles, as in
        s09/s11) the K loop loads without masks.
Why:    the best SIMT tile trades registers (accumulators per thread: BM * BN / threads, must
        stay under 255 with operands, no spills), shared memory (stages * (BM + BN) * BK * 4 B
        <= 227 KB) and occupancy (programs per SM by registers and smem) against FLOP/B per K
        step ((2 * BM * BN) / (4 * (BM + BN)) per K column) and tail waste on ragged shapes.
        These interact nonlinearly; measuring a short list beats modelling them. Triton's FMA
        dot cannot hold more than 64 accumulators per thread without spilling (128x128 at 4
        warps, 256x128 or 128x256 at 8: 64-128 B of spills), so the tile cannot grow the way
        CUDA s08's 16x8 thread tiles do; what is left is latency hiding and issue slots. The
        masks cost 44 of 2316 SASS instructions per 256x64x32 K step (SEL/ISETP for the
        predicated cp.async); unmasked, the FFMA share of the loop is 90%. With EVEN the
        64x128x32 tile at 4 warps and 4 stages (168 registers, 3 programs per SM) wins at
        4096^3 and 8192^3; the 8-warp 256x64 and 128x128 tiles (1 program per SM) fall to 83%.
Expect: ~88% of cuBLAS FP32 (TF32 off) at 4096^3 and ~92% at 8192^3 (H100 studies at 460ff6c,
        ce5c79a, 81cbf86 and 7417859: 45.2-45.4 / 47.3-47.7 TFLOP/s, 88.0-88.2% / 91.7-91.9%;
        study.bench: 87.9-88.1% and 91.6-91.7%; with masks everywhere the study read 84.7% / 85.9%),
        ~1.05-1.1x s07. The 90% aim holds at 8192^3 and is missed at 4096^3, where 2048 tiles make
        5.2 waves of 396 programs; the last 68 run alone, one per SM, and that partial round costs
        about the same whatever its size: with the same config, M = 3968 / 4096 / 4224 at N = K =
        4096 (1984 / 2048 / 2112 tiles, 4 / 68 / 132 past 5 full waves) took 3.007 / 3.027 / 3.040
        ms, 88.2-88.6% / 88.0% / 91.8-91.9% of cuBLAS (study.bench, 2 rounds at 3cec410), and M =
        7936 at N = K = 8192 (20.04 waves) 90.9%. Smaller tiles quantize better and lose more per SM
        (study.bench, one run, 4096^3 / 8192^3): 64x64x32 at 2 warps (190 registers, 4 programs and
        8 warps per SM, 15.5 waves) 84.6% / 86.0%, the same with 5 stages (3 programs per SM) 73% /
        76%, 64x64x16 x 6 stages 84.1% / 85.7%, 128x32 72% / 75%, 64x64x64 58% / 59%. Two programs
        per SM, held there by shared memory (7.8 waves at 4096^3), lose more still (study.bench at
        5c5a8f9): 64x128x32 x 5 stages 83.1% / 84.6%, 128x64x32 x 5 stages 80.8% / 81.6%, 64x128x16
        x 8 stages 77.7% / 78.3%. Four 64x128 programs per SM need <= 128 registers: maxnreg 128 or
        136 spills 72-144 B. Unrolling the K loop (x2, x4) spills 2.1-2.5 KB (AOT, sm_90); a
        streaming (.cs) C store reads the same 88.0% (study.bench at 03fe786).
Limits: none (any M, N, K >= 1; unaligned inputs run with VEC=1, scalar loads)
Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN
Pair:   cuda_src/s08_autotuned.cu
"""
import triton
import triton.language as tl

from study.tritonlib import autotune_do_bench, even_tiles, grouped_tile, hinted_tile, prune_unaligned, vector_width


def _cfg(bm, bn, bk, warps, stages, group=8):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group},
                         num_warps=warps, num_stages=stages)


# Candidates (BM, BN, BK, warps, stages): each compiles for sm_90 with no spills (checked ahead
# of time); accumulators per thread = BM * BN / (32 * warps), smem = (stages - 1) * (BM + BN) * BK * 4 B.
CONFIGS = [
    _cfg(256, 64, 32, 8, 3),    # s07's config: 204 regs, 80 KB smem (42.1 TFLOP/s at 4096^3, run 1)
    _cfg(256, 64, 32, 8, 4),    # 204 regs, 120 KB
    _cfg(128, 64, 32, 4, 3),    # s06's config: 210 regs, 2 programs / SM (41.5)
    _cfg(64, 128, 32, 4, 4),    # 168 regs, 3 programs / SM; unmasked (EVEN) the best at 4096^3
                                # and 8192^3 (45.4, 47.3; masked: 41.2, 43.8)
    _cfg(64, 64, 32, 4, 3),     # 96 regs, 32 acc / thread, 5 programs / SM (41.4)
    _cfg(128, 128, 32, 8, 4),   # 188 regs (41.4)
    _cfg(128, 128, 32, 16, 3),  # 32 acc / thread, 106 regs, 512 threads (41.2)
    _cfg(128, 128, 32, 8, 3),   # (40.9)
]


# Unaligned calls (VEC == 1: 4-byte loads) leave the 128x128 tiles at 8 warps short of registers
# (8-24 bytes of spills at 4095^3, sm_90): those calls choose among the rest.
UNALIGNED_CONFIGS = [c for c in CONFIGS if not (c.kwargs["BLOCK_M"] == c.kwargs["BLOCK_N"] == 128
                                                and c.num_warps == 8)]


@triton.autotune(configs=CONFIGS, key=["M", "N", "K", "VEC"], restore_value=["c_ptr"], do_bench=autotune_do_bench,
                 prune_configs_by={"early_config_prune": prune_unaligned(UNALIGNED_CONFIGS)})
@even_tiles   # EVEN: this config's tile divides M, N and K
@triton.jit
def s08_autotuned_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr,
                          VEC: tl.constexpr, BETA_ZERO: tl.constexpr, EVEN: tl.constexpr):
    # --- tile assignment: 1-D grid, grouped order (bands of GROUP_M tile rows) -------------
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    # --- operand staging, loop over K, epilogue: study.tritonlib.hinted_tile (s04's tile) ----
    hinted_tile(pid_m, pid_n, a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                BLOCK_M, BLOCK_N, BLOCK_K, VEC, BETA_ZERO, EVEN)


def matmul(a, b, c, alpha=1.0, beta=0.0):
    """c = alpha * a @ b + beta * c on checked fp32 tensors (study validates the arguments)."""
    M, K = a.shape
    N = b.shape[1]
    # the grid depends on the config the autotuner picks: a function of its meta-parameters
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    s08_autotuned_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                               float(alpha), float(beta), VEC=vector_width(a, b, c),
                               BETA_ZERO=(beta == 0))
    return c
