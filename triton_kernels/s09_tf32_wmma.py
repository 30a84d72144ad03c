"""s09_tf32_wmma: tensor cores in TF32 (tl.dot input_precision="tf32"), B K-major

Change: vs s08, tl.dot runs on the tensor cores in TF32 (wgmma on sm_90, mma.sync elsewhere), B is
        read K-major (NT) and the autotune list holds tensor-core tiles; EVEN tiles load unmasked.
Why:    TF32 tensor cores peak ~8x the FP32 FMA pipe (cuBLAS TF32 ~364 vs FP32 ~52 TFLOP/s), so the
        ridge rises from ~22 to ~126 FLOP/B: a 128 x 256 x 32 step loads 48 KB for 2 MFLOP (43
        FLOP/B), fed by 3-4 cp.async stages (144-192 KB). wgmma reads smem operands transposed only
        for 16-bit types, so a TF32 B tile must be K-major: hence NT. A masked copy is a predicated
        cp.async with a per-step zero-fill size; unmasked, the loop ran 1.13x faster.
Expect: ~84-87% of cuBLAS TF32 (NT) at 4096^3 and 8192^3, ~7-7.5x s08 (H100 studies, unmasked loop)
Limits: none (any M, N, K >= 1, any strides of b; 128-bit loads need 16-byte aligned rows, K and
        N multiples of 4, else 4-byte loads)
Dtype:  tf32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NT
Pair:   cuda_src/s09_tf32_wmma.cu
Log:    docs/stages/s09_tf32_wmma.md
"""
import triton
import triton.language as tl

from study.tritonepilogue import update_c_in_parts
from study.tritonlib import autotune_do_bench, autotune_prune, even_tiles, grouped_tile, tile_config
from study.tritonlaunch import cdiv, replay


# Candidates tile_config(BM, BN, BK, stages, warps, GROUP_M = 8): smem = stages * (BM + BN) *
# BK * 4 B <= 227 KB; fp32 accumulators BM * BN / (32 * warps) per thread (wgmma keeps them in
# registers). From an H100 sweep of 18 configs at 5 shapes (scratch/triton_s9), none spills;
# what never won and was left out: docs/stages/s09_tf32_wmma.md.
CONFIGS = [
    tile_config(128, 256, 32, 3, 8, 16),  # 144 KB, 185 regs; groups of 16 tile rows: best at
                                          # 8192^3, ties the next at 4096^3
    tile_config(128, 256, 32, 4, 8),      # 192 KB; 4096^3 and 2048x11008x4096
    tile_config(128, 128, 64, 3, 8),      # 192 KB, 130 regs; problems of 16-128 rows
    tile_config(128, 64, 32, 4, 4),       # 96 KB, 115 regs; small problems (1024^3: ~84% of cuBLAS)
]


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"], restore_value=["c_ptr"],
                 do_bench=autotune_do_bench, prune_configs_by={"early_config_prune": autotune_prune})
@even_tiles   # EVEN: this config's tile divides M, N and K
@triton.jit
def s09_tf32_wmma_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, stride_bk, stride_bn, ldc, alpha, beta,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         GROUP_M: tl.constexpr, VEC: tl.constexpr, B_KMAJOR: tl.constexpr,
                         BETA_ZERO: tl.constexpr, EVEN: tl.constexpr):
    tl.static_assert(BLOCK_K >= 16 and BLOCK_K % 8 == 0, "TF32 mma takes K in steps of 8, tl.dot >= 16")
    tl.static_assert(BLOCK_M >= 16 and BLOCK_N >= 16, "tl.dot needs M and N tiles of at least 16")
    tl.static_assert(VEC == 1 or VEC == 4, "VEC is 4 (16-byte aligned rows, K and N) or 1")

    # --- tile assignment: 1-D grid, grouped order (bands of GROUP_M tile rows) -------------
    # The ridge is ~6x higher than FP32's, so L2 reuse from the grouped order now matters.
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.max_contiguous(tl.multiple_of(pid_n * BLOCK_N + tl.arange(0, BLOCK_N), BLOCK_N), BLOCK_N)
    offs_k = tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK_K), BLOCK_K), BLOCK_K)

    # --- operand staging: B through general strides; one of them is 1 in NN and NT ----------
    # Triton specialises a stride argument equal to 1 to a constant, so the unit-stride axis is
    # known contiguous: K for NT (b[k, n] at n * ldb + k), N for NN. The VEC hints (true: the
    # wrapper checked them) go only on the strided axis, i.e. on the starts of the rows
    # (NN) or columns (NT) of B.
    a_rows = offs_m * lda                     # [BM] row starts of A
    b_k = offs_k * stride_bk                  # [BK]
    b_n = offs_n * stride_bn                  # [BN]
    c_rows = offs_m * ldc                     # [BM]
    k_lim = tl.full((BLOCK_K,), K, tl.int32)  # [BK], all == K
    n_lim = tl.full((BLOCK_N,), N, tl.int32)  # [BN], all == N
    if VEC > 1:  # no hint at all for VEC == 1: a hint of 1 would erase Triton's own inference
        a_rows = tl.multiple_of(a_rows, VEC)
        c_rows = tl.multiple_of(c_rows, VEC)
        k_lim = tl.multiple_of(k_lim, VEC)
        n_lim = tl.multiple_of(n_lim, VEC)
        if B_KMAJOR:
            b_n = tl.multiple_of(b_n, VEC)    # column starts of B (stride_bk == 1)
        else:
            b_k = tl.multiple_of(b_k, VEC)    # row starts of B (stride_bn == 1)
    a_ptrs = a_ptr + a_rows[:, None] + offs_k[None, :]   # [BM, BK], K contiguous
    b_ptrs = b_ptr + b_k[:, None] + b_n[None, :]         # [BK, BN], K contiguous when NT
    mask_m = offs_m[:, None] < M
    mask_n = (offs_n < n_lim)[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # fp32 accumulators (wgmma registers)

    # --- loop over K: masked tails read 0; stages issue cp.async ahead of the wgmma ----------
    for k0 in range(0, K, BLOCK_K):
        if EVEN:   # the tile divides M, N and K: plain copies, no masks
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:      # masked copies (zero-fill past M, N, K)
            in_k = (k0 + offs_k) < k_lim
            a = tl.load(a_ptrs, mask=mask_m & in_k[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=in_k[:, None] & mask_n, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32")  # tensor cores, inputs rounded to TF32
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk

    # --- epilogue: C = alpha * acc (+ beta * C, a quarter of the rows at a time) in fp32;
    # beta == 0 never reads C ------------------------------------------------------------------
    if BETA_ZERO:
        tl.store(c_ptr + c_rows[:, None] + offs_n[None, :], alpha * acc, mask=mask_m & mask_n)
    else:
        update_c_in_parts(c_ptr, alpha * acc, offs_m, offs_n, M, n_lim, ldc, beta, BLOCK_M, BLOCK_N, VEC)


def b_is_kmajor(b):
    """True for the NT layout: b is the transposed view of a contiguous (N, K) tensor."""
    return b.stride(0) == 1 and b.stride(1) != 1


def vector_width(a, b, c):
    """4 when every hint in the kernel holds, else 1: 16-byte aligned pointers, B unit-stride
    along K (NT) or N (NN), every other stride and K, N multiples of 4."""
    K, N = a.shape[1], b.shape[1]
    kmajor = b_is_kmajor(b)
    unit_ok = b.stride(0) == 1 if kmajor else b.stride(1) == 1
    ldb = b.stride(1) if kmajor else b.stride(0)
    aligned = all(t.data_ptr() % 16 == 0 for t in (a, b, c))
    mult4 = all(x % 4 == 0 for x in (a.stride(0), ldb, c.stride(0), K, N))
    unit_a_c = a.stride(1) == 1 and c.stride(1) == 1
    return 4 if aligned and mult4 and unit_ok and unit_a_c else 1


def matmul(a, b, c, alpha=1.0, beta=0.0):
    """c = alpha * a @ b + beta * c, TF32 inputs; b NT (stride (1, ldb)) for speed, any strides work."""
    M, K = a.shape
    N = b.shape[1]
    grid = lambda meta: (cdiv(M, meta["BLOCK_M"]) * cdiv(N, meta["BLOCK_N"]),)
    replay(s09_tf32_wmma_kernel)[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), b.stride(1), c.stride(0),
                                       float(alpha), float(beta), VEC=vector_width(a, b, c),
                                       B_KMAJOR=b_is_kmajor(b), BETA_ZERO=(beta == 0))
    return c
