// s05_double_buffer: two shared-memory buffers, next tile prefetched into registers
//
// Change: vs s04, two K slices in shared memory: the next slice's float4 loads fly into registers
//         during the math and go to the other buffer after it; one barrier per slice, not two.
// Why:    in s04 every slice costs a full global-memory round trip (~600-800 cycles from L2/DRAM)
//         with the whole block parked at a barrier, then the math (8 k steps x 64 FFMA = 512
//         FFMA per thread, ~1000 cycles for 2 warps per scheduler); overlapping the two hides the
//         load latency behind the math. Cost: 8 more registers for the in-flight float4s and
//         2x the tile memory (16.5 KiB).
// Expect: ~1.2x s04 at 4096^3 fp32 (H100: 45.4 TFLOP/s, 88% of cuBLAS FP32)
// Limits: none (any M, N, K >= 1, any leading dimension: tails, and misaligned pointers or
//         leading dims not multiple of 4, take predicated scalar loads and stores)
// Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
// Pair:   triton_kernels/s05_double_buffer.py
// Log:    docs/stages/s05_double_buffer.md
#include "common/gemm.cuh"
#include "common/layouts.cuh"
#include "common/simt_epilogue.cuh"
#include "common/simt_grid.cuh"
#include "common/simt_ldg.cuh"
#include "common/simt_microtile.cuh"

namespace s05_double_buffer {

constexpr int BM = 128, BN = 128, BK = 8;  // block tile of C, and K depth staged per step
constexpr int TM = 8, TN = 8;              // outputs per thread: 2x2 groups of 4x4
constexpr int TX = BN / TN, TY = BM / TM;  // 16 x 16 threads
constexpr int NT = TX * TY;                // 256 threads
constexpr int AS_LD = BM + simt::A_PAD;    // row stride of the transposed A tile (words)
static_assert(TM == 8 && TN == 8, "the micro-tile is 2x2 float4 groups: rows ty*4 + {0, BM/2}");
static_assert(BM * BK / 4 == NT && BK * BN / 4 == NT, "one float4 of A and one of B per thread per tile");
static_assert(AS_LD % 4 == 0, "As rows must stay 16-byte aligned for LDS.128");

// __launch_bounds__(NT, 2): registers capped at 128 so two blocks (16 warps) share an SM; the
// prefetch registers would otherwise push it to 133 and leave one block per SM. One
// instantiation per layout (L, staging as s04's) and load width (kVec).
template <gemm::Layout L, bool kVec>
__global__ void __launch_bounds__(NT, 2) kernel(gemm::Problem<float> p) {
  // --- tile assignment: as s04 (rows ty*4 + {0..3, 64..67}, columns tx*4 + {0..3, 64..67}) --
  const int tid = threadIdx.x;
  const int tx = tid % TX, ty = tid / TX;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

  // --- operand staging: 2 x (As [BK][BM+4] transposed, Bs [BK][BN] (NT: [BK][BN+4])): 16.3 KiB
  constexpr int BS_LD = BN + simt::B_PAD<L>;  // row stride of Bs (words)
  __shared__ __align__(16) float As[2][BK * AS_LD];
  __shared__ __align__(16) float Bs[2][BK * BS_LD];

  float acc[TM][TN] = {};
  const int KT = gemm::cdiv(p.K, BK);  // number of K slices

  // Prologue: slice 0 goes straight to buffer 0.
  float4 ra[1], rb[1];
  simt::ldg_a<L, BM, BK, NT, kVec>(ra, p, m0, 0, tid);
  simt::ldg_b<L, BK, BN, NT, kVec>(rb, p, 0, n0, tid);
  simt::sts_a<L, BM, BK, NT>(As[0], ra, tid);
  simt::sts_b<L, BK, BN, NT>(Bs[0], rb, tid);
  __syncthreads();

  // --- loop over K: issue slice kt+1's loads, compute slice kt, then park kt+1 in the other buffer
  for (int kt = 0; kt < KT; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < KT;
    // The loads only need registers: they complete while the FFMAs below run.
    if (more) {
      simt::ldg_a<L, BM, BK, NT, kVec>(ra, p, m0, (kt + 1) * BK, tid);
      simt::ldg_b<L, BK, BN, NT, kVec>(rb, p, (kt + 1) * BK, n0, tid);
    }

#pragma unroll
    for (int k = 0; k < BK; ++k) {
      // s04's k step. Its loads stay written out: through simt::load_fragments (as in s04, s06)
      // this kernel compiles to a reshuffled schedule, and these are the instructions measured.
      const float* as = As[cur] + k * AS_LD + ty * 4;
      const float* bs = Bs[cur] + k * BS_LD + tx * 4;
      const float4 a0 = *reinterpret_cast<const float4*>(as);
      const float4 a1 = *reinterpret_cast<const float4*>(as + BM / 2);
      const float4 b0 = *reinterpret_cast<const float4*>(bs);
      const float4 b1 = *reinterpret_cast<const float4*>(bs + BN / 2);
      const float a[TM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[TN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
      simt::outer_product(acc, a, b);
    }

    if (more) {
      // Buffer cur^1 was last read in iteration kt-1, which every thread finished before the
      // barrier that ended it, so it can be overwritten without a barrier here.
      simt::sts_a<L, BM, BK, NT>(As[cur ^ 1], ra, tid);
      simt::sts_b<L, BK, BN, NT>(Bs[cur ^ 1], rb, tid);
    }
    __syncthreads();  // slice kt+1 is complete, and nobody still reads buffer cur
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

}  // namespace s05_double_buffer
