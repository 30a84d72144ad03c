// s06_cp_async: 3-stage cp.async pipeline (global -> shared without registers)
//
// Change: vs s05, tiles are copied global -> shared with cp.async (LDGSTS) into a ring of 3 slices:
//         slice kt+2's copies fly while slice kt is computed; no register staging, no late STS.
// Why:    s05 holds its prefetch in 8 registers, looks one slice (8 k, ~1000 cycles of FFMA) ahead,
//         and its STS run after the math. cp.async lands data in shared memory by itself: 2 slices
//         (16 k) in flight for free registers. Cost: a K-contiguous operand (A; B too in NT) cannot be
//         transposed in 16-byte pieces: 4-byte copies (4 LDGSTS vs 1 LDG.128 + 4 STS); 24.4 KiB.
//         With two blocks per SM s05 already hides the latency: the pipeline pays off in s08.
// Expect: ~1.0x s05 at 4096^3 fp32, not faster (H100: 44.4 vs 45.4 TFLOP/s, 0.98x)
// Limits: none (any M, N, K >= 1, any leading dimension: tails are zero-filled by the copies;
//         misaligned A, B or C, or leading dims not multiple of 4, use 4-byte copies and stores)
// Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
// Pair:   triton_kernels/s06_cp_async.py
// Log:    docs/stages/s06_cp_async.md
#include "common/cp_async.cuh"
#include "common/gemm.cuh"
#include "common/layouts.cuh"
#include "common/simt_cp_async.cuh"
#include "common/simt_epilogue.cuh"
#include "common/simt_grid.cuh"
#include "common/simt_microtile.cuh"

namespace s06_cp_async {

constexpr int BM = 128, BN = 128, BK = 8;  // block tile of C, and K depth per slice
constexpr int STAGES = 3;                  // slices resident in shared memory
constexpr int TM = 8, TN = 8;              // outputs per thread: 2x2 groups of 4x4
constexpr int TX = BN / TN, TY = BM / TM;  // 16 x 16 threads
constexpr int NT = TX * TY;                // 256 threads
constexpr int AS_LD = BM + simt::A_PAD;    // row stride of the transposed A tile (words)
static_assert(TM == 8 && TN == 8, "the micro-tile is 2x2 float4 groups: rows ty*4 + {0, BM/2}");
static_assert(STAGES >= 2, "a pipeline needs one slice computing and one landing");
static_assert(STAGES * BK * (AS_LD + BN + simt::B_PAD<gemm::Layout::NT>) * 4 <= 48 * 1024,
              "static shared memory is capped at 48 KiB (NT's padded Bs rows included)");

// __launch_bounds__(NT, 2): registers capped at 128 so two blocks (16 warps) share an SM.
// One instantiation per layout (L) and copy width (kVec).
template <gemm::Layout L, bool kVec>
__global__ void __launch_bounds__(NT, 2) kernel(gemm::Problem<float> p) {
  // --- tile assignment: as s05 (rows ty*4 + {0..3, 64..67}, columns tx*4 + {0..3, 64..67}) --
  const int tid = threadIdx.x;
  const int tx = tid % TX, ty = tid / TX;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

  // --- operand staging: ring of STAGES x (As [BK][BM+4], Bs [BK][BN] (NT: [BK][BN+4])) -------
  // A K-contiguous operand (A in NN/NT, B in NT) moves as 4-byte copies into its transposed
  // tile, an M- or N-contiguous one (A in TN, B in NN/TN) as 16-byte copies.
  using Tiles = simt::CpAsyncTiles<L, BM, BN, BK, NT, kVec>;
  constexpr int BS_LD = Tiles::BS_LD;  // row stride of Bs (words)
  __shared__ __align__(16) float As[STAGES][BK * AS_LD];
  __shared__ __align__(16) float Bs[STAGES][BK * BS_LD];

  float acc[TM][TN] = {};
  const int KT = gemm::cdiv(p.K, BK);

  // Prologue: slices 0 .. STAGES-2 in flight. One commit group per slice, empty groups included,
  // so "slice kt has landed" always means "at most STAGES-2 groups are still pending".
  Tiles tiles(p, m0, n0, tid);
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) {
      tiles.copy(As[s], Bs[s], p.K - s * BK);
      tiles.advance(p);
    }
    gemm::cp_async_commit();
  }

  // --- loop over K: wait for slice kt, refill the slot freed by kt-1, compute slice kt -------
  for (int kt = 0; kt < KT; ++kt) {
    gemm::cp_async_wait<STAGES - 2>();  // this thread's copies of slice kt have landed
    __syncthreads();                    // ... everyone's have, and everyone finished slice kt-1

    const int next = kt + STAGES - 1;   // goes into the slot slice kt-1 used
    if (next < KT) {
      tiles.copy(As[next % STAGES], Bs[next % STAGES], p.K - next * BK);
      tiles.advance(p);
    }
    gemm::cp_async_commit();

    const float* as_base = As[kt % STAGES] + ty * 4;
    const float* bs_base = Bs[kt % STAGES] + tx * 4;
#pragma unroll
    for (int k = 0; k < BK; ++k) {  // s04's k step (common/simt_microtile.cuh)
      float a[TM], b[TN];
      simt::load_fragments<BM / 2, BN / 2>(a, b, as_base + k * AS_LD, bs_base + k * BS_LD);
      simt::outer_product(acc, a, b);
    }
  }
  gemm::cp_async_wait<0>();  // no copy may outlive the block (only empty groups remain)

  // --- epilogue: float4 stores where C allows, predicated scalars at tails ----------------
  simt::store_c<TM, TN, BM / 2, BN / 2, kVec>(p, acc, m0 + ty * 4, n0 + tx * 4);
}

// s03's grid of BM x BN tiles; the layout's instantiation, 16-byte copies and float4 stores
// where every operand allows them.
const char* unsupported(const gemm::Problem<float>& p) { return simt::unsupported_grid_y<BM>(p); }

cudaError_t launch(const gemm::Problem<float>& p, cudaStream_t stream) {
  return gemm::with_layout(p.layout, [&](auto l) {
    constexpr gemm::Layout L = decltype(l)::value;
    return simt::launch_grid_2d<BM, BN, NT>(p, stream, kernel<L, true>, kernel<L, false>);
  });
}

}  // namespace s06_cp_async
