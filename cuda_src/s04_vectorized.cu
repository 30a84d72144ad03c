// s04_vectorized: 128-bit loads from global and shared memory
//
// Change: vs s03, tiles move from global memory as float4 (LDG.E.128); A is stored transposed
//         (As[k][m]) and the 8x8 micro-tile becomes 2x2 groups of 4, so LDS and C stores are float4.
// Why:    s03 spends 16 scalar LDS per 64 FFMA (and 8 scalar LDG per tile); issue slots, not
//         bandwidth, limit it. float4 cuts the inner loop to 4 LDS.128 per 64 FFMA (94% of
//         issued instructions are FFMA) and the tile loads to 1 + 1 LDG.E.128 per thread.
//         Bytes moved are unchanged (64 FLOP/B per 128x128 tile): this is instruction count.
// Expect: ~1.8x s03 at 4096^3 fp32, ~70% of cuBLAS FP32 (H100: 38.0 TFLOP/s)
// Limits: none (any M, N, K >= 1, any leading dimension: tails, and misaligned pointers or
//         leading dims not multiple of 4, take predicated scalar loads and stores)
// Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
// Pair:   triton_kernels/s04_vectorized.py
// Log:    docs/stages/s04_vectorized.md
#include "common/gemm.cuh"
#include "common/layouts.cuh"
#include "common/simt_epilogue.cuh"
#include "common/simt_grid.cuh"
#include "common/simt_ldg.cuh"
#include "common/simt_microtile.cuh"

namespace s04_vectorized {

constexpr int BM = 128, BN = 128, BK = 8;  // block tile of C, and K depth staged per step
constexpr int TM = 8, TN = 8;              // outputs per thread: 2x2 groups of 4x4
constexpr int TX = BN / TN, TY = BM / TM;  // 16 x 16 threads
constexpr int NT = TX * TY;                // 256 threads
constexpr int AS_LD = BM + simt::A_PAD;    // row stride of the transposed A tile (words)
static_assert(TM == 8 && TN == 8, "the micro-tile is 2x2 float4 groups: rows ty*4 + {0, BM/2}");
static_assert(BM * BK / 4 == NT && BK * BN / 4 == NT, "one float4 of A and one of B per thread per tile");
static_assert(AS_LD % 4 == 0, "As rows must stay 16-byte aligned for LDS.128");

// One instantiation per layout (L) and per load width (kVec: float4 where the problem allows).
template <gemm::Layout L, bool kVec>
__global__ void __launch_bounds__(NT) kernel(gemm::Problem<float> p) {
  // --- tile assignment: block (bx, by) owns C[by*BM .. +BM][bx*BN .. +BN] -----------------
  // Thread (ty, tx) owns rows ty*4 + {0..3, 64..67} and columns tx*4 + {0..3, 64..67}: a
  // half-warp's float4 reads of Bs cover 256 consecutive bytes (2 wavefronts, the minimum),
  // its As reads are 2 broadcast float4s.
  const int tid = threadIdx.x;
  const int tx = tid % TX, ty = tid / TX;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

  // --- operand staging: As [BK][BM+4] (transposed), Bs [BK][BN] (NT: [BK][BN+4]): 4.1 + 4 KiB
  // Each operand's float4 runs along its contiguous dimension; a K-contiguous one (A in NN/NT,
  // B in NT) is transposed on its way to shared memory (common/simt_ldg.cuh).
  constexpr int BS_LD = BN + simt::B_PAD<L>;  // row stride of Bs (words)
  __shared__ __align__(16) float As[BK * AS_LD];
  __shared__ __align__(16) float Bs[BK * BS_LD];

  float acc[TM][TN] = {};

  // --- loop over K: one float4 of A and one of B per thread, then BK rank-1 updates ---------
  for (int k0 = 0; k0 < p.K; k0 += BK) {
    float4 ra[1], rb[1];
    simt::ldg_a<L, BM, BK, NT, kVec>(ra, p, m0, k0, tid);
    simt::ldg_b<L, BK, BN, NT, kVec>(rb, p, k0, n0, tid);
    simt::sts_a<L, BM, BK, NT>(As, ra, tid);  // As[k][m]
    simt::sts_b<L, BK, BN, NT>(Bs, rb, tid);  // Bs[k][n]
    __syncthreads();  // the tile is complete before anyone reads it

    // 4 LDS.128 feed 64 FFMA per k (s03: 16 scalar LDS): rows ty*4 + {0, BM/2} of the
    // transposed As, columns tx*4 + {0, BN/2} of Bs (common/simt_microtile.cuh).
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
      simt::load_fragments<BM / 2, BN / 2>(a, b, As + k * AS_LD + ty * 4, Bs + k * BS_LD + tx * 4);
      simt::outer_product(acc, a, b);
    }
    __syncthreads();  // everyone is done reading before the next slice overwrites the tile
  }

  // --- epilogue: float4 stores where C allows, predicated scalars at tails ----------------
  simt::store_c<TM, TN, BM / 2, BN / 2, kVec>(p, acc, m0 + ty * 4, n0 + tx * 4);
}

// s03's grid of BM x BN tiles; the layout's instantiation, float4 where every operand allows it.
const char* unsupported(const gemm::Problem<float>& p) { return simt::unsupported_grid_y<BM>(p); }

cudaError_t launch(const gemm::Problem<float>& p, cudaStream_t stream) {
  return gemm::with_layout(p.layout, [&](auto l) {
    constexpr gemm::Layout L = decltype(l)::value;
    return simt::launch_grid_2d<BM, BN, NT>(p, stream, kernel<L, true>, kernel<L, false>);
  });
}

}  // namespace s04_vectorized
