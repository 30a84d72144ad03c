// s03_register_tiling: 128x128 block tiles, 8x8 outputs per thread in registers
//
// Change: vs s02, each block computes a 128x128 tile of C and each thread an 8x8 block of outputs in
//         registers, built from outer products of 8 A and 8 B values per k step.
// Why:    s02 issues 2 shared-memory loads per FMA, so shared memory, not the FMA units, sets
//         its speed. Here a thread loads 8 + 8 values per k step and does 64 FMAs with them:
//         0.25 loads per FMA, 8x fewer. From global memory a 128x128 tile reads
//         (128 + 128) * 4 B per k for 2 * 128 * 128 FLOPs: 64 FLOP/B, vs 16 FLOP/B for 32x32
//         tiles, well right of the FP32 ridge (~22 FLOP/B) so L2/DRAM stop mattering.
// Expect: ~3x s02 at 4096^3 fp32, ~40% of cuBLAS FP32 (H100: 20.4 TFLOP/s, 39% of cuBLAS)
// Limits: none (any M, N, K >= 1, any leading dimension)
// Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
// Pair:   triton_kernels/s03_register_tiling.py
// Log:    docs/stages/s03_register_tiling.md
#include "common/gemm.cuh"
#include "common/layouts.cuh"
#include "common/simt_grid.cuh"

namespace s03_register_tiling {

constexpr int BM = 128, BN = 128, BK = 8;  // block tile of C, and K depth staged per step
constexpr int TM = 8, TN = 8;              // outputs per thread: TM rows x TN columns
constexpr int TX = BN / TN, TY = BM / TM;  // 16 x 16 threads
constexpr int NT = TX * TY;                // 256 threads
static_assert(TX == 16 && TY == 16, "the strided micro-tile mapping below assumes 16x16 threads");
static_assert((BM * BK) % NT == 0 && (BK * BN) % NT == 0, "each thread must load whole tiles' shares");
static_assert(NT % BK == 0 && NT % BN == 0, "a load pass must cover whole rows of the tile");
static_assert(BK == 8 && BM % 8 == 0, "TN's A mapping: a warp covers 8 m x 4 k, two warps all 8 k");

// One instantiation per layout L. Each operand is read along its contiguous dimension, so a
// tile stored the other way round is written across its rows and gets a padded row stride:
// As rows +4 in TN (a warp writes 8 rows m x 4 columns k: stride 12 words, bank 12m + k, 32
// banks; rows stay 16-byte aligned for the LDS.128 that read a row of As), Bs rows +4 in NT (a
// warp writes 4 columns n x 8 rows k: bank 4k + n, 32 banks). NN's tiles are unpadded as before.
template <gemm::Layout L>
__global__ void __launch_bounds__(NT) kernel(gemm::Problem<float> p) {
  // --- tile assignment: block (bx, by) owns C[by*BM .. +BM][bx*BN .. +BN] -----------------
  // Thread (ty, tx) owns rows ty + 16*i and columns tx + 16*j (i, j < 8): strided, so that the
  // 16 threads of a half-warp read 16 consecutive words of Bs (no bank conflicts) and write 16
  // consecutive floats of C (coalesced).
  const int tid = threadIdx.x;
  const int tx = tid % TX, ty = tid / TX;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

  // --- operand staging: As [BM][BK], Bs [BK][BN]: 2 * 4 KiB of shared memory (+ padding) ---
  constexpr int A_PAD = gemm::Majors<L>::A_MN ? 4 : 0, B_PAD = gemm::Majors<L>::B_MN ? 0 : 4;
  __shared__ float As[BM][BK + A_PAD];
  __shared__ float Bs[BK][BN + B_PAD];

  float acc[TM][TN] = {};

  // --- loop over K: stage one BK slice of A and B, then BK rank-1 updates of the 8x8 tile ----
  for (int k0 = 0; k0 < p.K; k0 += BK) {
    // Each thread loads 4 elements of A and 4 of B. A pass of 256 threads covers 32 rows x 8
    // columns of A (each warp reads 4 rows x 32 B: whole sectors) and 2 rows x 128 columns of
    // B (each warp reads 128 consecutive bytes). Out-of-range elements become 0. An operand
    // stored the other way (A in TN, B in NT) swaps the two mappings.
#pragma unroll
    for (int r = 0; r < BM * BK / NT; ++r) {
      if constexpr (gemm::Majors<L>::A_MN) {
        // TN: A stored [K][M]. Element e = 4BM*kh + 32*mb + 8*kl + ml is m = 8*mb + ml,
        // k = 4*kh + kl: a warp reads 4 rows k x 32 B (whole sectors, as A in NN).
        const int e = tid + r * NT, m = e % 8 + 8 * (e / 32 % (BM / 8)), k = e / 8 % 4 + 4 * (e / (4 * BM));
        const int gm = m0 + m, gk = k0 + k;
        As[m][k] = (gm < p.M && gk < p.K) ? p.A[gk * p.lda + gm] : 0.f;
      } else {
        const int e = tid + r * NT, m = e / BK, k = e % BK;
        const int gm = m0 + m, gk = k0 + k;
        As[m][k] = (gm < p.M && gk < p.K) ? p.A[gm * p.lda + gk] : 0.f;
      }
    }
#pragma unroll
    for (int r = 0; r < BK * BN / NT; ++r) {
      if constexpr (gemm::Majors<L>::B_MN) {
        const int e = tid + r * NT, k = e / BN, n = e % BN;
        const int gk = k0 + k, gn = n0 + n;
        Bs[k][n] = (gk < p.K && gn < p.N) ? p.B[gk * p.ldb + gn] : 0.f;
      } else {                                // NT: B stored [N][K], 32 rows n x 8 k per pass
        const int e = tid + r * NT, n = e / BK, k = e % BK;
        const int gk = k0 + k, gn = n0 + n;
        // gn * ldb is written as the thread's first row plus r passes: as gn * ldb + gk, ptxas
        // (CUDA 13.0, sm_90a) held this kernel to 128 registers by spilling one.
        Bs[k][n] = (gk < p.K && gn < p.N) ? p.B[(n0 + tid / BK) * p.ldb + r * (NT / BK) * p.ldb + gk] : 0.f;
      }
    }
    __syncthreads();  // the tile is complete before anyone reads it

#pragma unroll
    for (int k = 0; k < BK; ++k) {
      // 8 + 8 scalar shared loads feed 64 FMAs (s02: 2 loads per FMA).
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[ty + i * TY][k];  // 2 addresses per warp: broadcast
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx + j * TX];  // 16 consecutive words: no conflict
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();  // everyone is done reading before the next slice overwrites the tile
  }

  // --- epilogue: predicated scalar stores; beta == 0 never reads C -------------------------
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = m0 + ty + i * TY;
    if (row >= p.M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int col = n0 + tx + j * TX;
      if (col >= p.N) continue;
      float* c = p.C + row * p.ldc + col;
      *c = p.beta == 0.f ? p.alpha * acc[i][j] : p.alpha * acc[i][j] + p.beta * *c;
    }
  }
}

const char* unsupported(const gemm::Problem<float>& p) { return simt::unsupported_grid_y<BM>(p); }

cudaError_t launch(const gemm::Problem<float>& p, cudaStream_t stream) {
  const dim3 grid(gemm::cdiv(p.N, BN), gemm::cdiv(p.M, BM));
  return gemm::with_layout(p.layout, [&](auto l) {
    kernel<decltype(l)::value><<<grid, NT, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace s03_register_tiling
