"""s07_warp_tiling: more warps per program tile, grouped program order for L2 reuse

Change: vs s06, (1) a 256 x 64 program tile split over 8 warps (num_warps=8) instead of
        128 x 64 over 4: each thread keeps 64 accumulators, the program is twice as tall; the
        assignment of warps to sub-tiles is the compiler's, the knob is num_warps;
        (2) programs walk C in bands of GROUP_M = 8 tile rows (study.tritonlib.grouped_tile)
        instead of row by row.
Why:    (1) a 256 x 64 tile loads (256 + 64) * 32 floats per K step for 2 * 256 * 64 * 32
        FLOPs: 25.6 FLOP/B from shared memory / L2 vs 21.3 for 128 x 64, and B is read by half
        as many programs. (2) 132 SMs run ~132 tiles at once and these walk K in step, so HBM
        traffic per wave ~ distinct panels touched (2-4 MB each at 4096^2): bands of 8 tile
        rows touch ~8 A + ~17 B panels instead of ~5 A + all 64 B panels in row order. Either
        way a wave does > 200 FLOP per HBM byte vs a ~22 FLOP/B FP32 ridge: the SIMT kernel is
        FMA-issue bound, so (2) buys little here and is kept for the tensor-core stages.
Expect: ~1.0-1.05x s06 at 4096^3 fp32 (in run 1's autotune timings 256 x 64 x 8 warps beat
        128 x 64 x 4 warps by 1.4%: Triton's FMA dot issues ~87% FFMA in its K loop whatever the
        warp count, so warp tiling has little left to win in Triton)
Limits: none (any M, N, K >= 1; unaligned inputs run with VEC=1, scalar loads)
Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN
Pair:   cuda_src/s07_warp_tiling.cu
"""
import triton
import triton.language as tl

from study.tritonlib import grouped_tile

BLOCK_M = 256  # rows of C per program
BLOCK_N = 64   # cols of C per program: 256 x 64 fp32 acc = 64 floats per thread at 8 warps
BLOCK_K = 32   # K step: (256 + 64) * 32 * 4 B = 40 KB of tiles per step (2 buffers: 80 KB)
GROUP_M = 8    # tile rows per band of the grouped program order
NUM_WARPS = 8  # 256 threads
NUM_STAGES = 3  # two tiles in flight (Triton allocates num_stages - 1 shared buffers for an FMA dot)


@triton.jit
def s07_warp_tiling_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, alpha, beta,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr,
                          VEC: tl.constexpr, BETA_ZERO: tl.constexpr):
    tl.static_assert(BLOCK_K >= 16, "tl.dot needs a K tile of at least 16")
    tl.static_assert(BLOCK_M >= 16 and BLOCK_N >= 16, "tl.dot needs M and N tiles of at least 16")
    tl.static_assert(VEC == 1 or VEC == 4, "VEC is 4 (16-byte aligned rows, K and N) or 1")
    tl.static_assert(BLOCK_K % VEC == 0 and BLOCK_N % VEC == 0, "tiles must hold whole vectors")

    # --- tile assignment: 1-D grid, grouped order (bands of GROUP_M tile rows) -------------
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    # runs of BLOCK_N consecutive columns starting at a multiple of BLOCK_N (always true)
    offs_n = tl.max_contiguous(tl.multiple_of(pid_n * BLOCK_N + tl.arange(0, BLOCK_N), BLOCK_N), BLOCK_N)
    offs_k = tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK_K), BLOCK_K), BLOCK_K)

    # --- operand staging: hinted pointer tiles -----------------------------------------------
    # True because the wrapper checked it: with VEC == 4 every row start is a multiple of 4
    # floats (16 B), and the K / N bounds are multiples of 4, so a mask is constant over each
    # group of 4 elements and one predicated 128-bit access serves the group.
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
    a_ptrs = a_ptr + a_rows[:, None] + offs_k[None, :]    # [BM, BK], 4-float vectors along K
    b_ptrs = b_ptr + b_rows[:, None] + offs_n[None, :]    # [BK, BN], 4-float vectors along N
    mask_m = offs_m[:, None] < M
    mask_n = (offs_n < n_lim)[None, :]          # compare in 1-D: the hint on n_lim survives
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)

    # --- loop over K: masked tails read 0 --------------------------------------------------
    for k0 in range(0, K, BLOCK_K):
        in_k = (k0 + offs_k) < k_lim             # k0 is a multiple of BLOCK_K: still VEC-aligned
        a = tl.load(a_ptrs, mask=mask_m & in_k[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=in_k[:, None] & mask_n, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * ldb

    # --- epilogue: 128-bit stores of C too; beta == 0 never reads C ------------------------
    c_ptrs = c_ptr + c_rows[:, None] + offs_n[None, :]
    mask_c = mask_m & mask_n
    out = alpha * acc
    if not BETA_ZERO:
        out += beta * tl.load(c_ptrs, mask=mask_c, other=0.0)
    tl.store(c_ptrs, out, mask=mask_c)


def vector_width(a, b, c):
    """4 when every hint in the kernel holds (16-byte aligned rows, K and N multiples of 4), else 1."""
    K, N = a.shape[1], b.shape[1]
    aligned = all(t.data_ptr() % 16 == 0 for t in (a, b, c))
    mult4 = all(x % 4 == 0 for x in (a.stride(0), b.stride(0), c.stride(0), K, N))
    return 4 if aligned and mult4 else 1


def matmul(a, b, c, alpha=1.0, beta=0.0):
    """c = alpha * a @ b + beta * c on checked fp32 tensors (study validates the arguments)."""
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    s07_warp_tiling_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                float(alpha), float(beta), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, VEC=vector_width(a, b, c), BETA_ZERO=(beta == 0),
                                num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return c
