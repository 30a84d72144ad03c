// common/simt_warp_tiled.cuh: the warp-tiled, cp.async-pipelined SIMT GEMM kernel.
//
// Born in s07 (warp tiling + grouped block order, one configuration) and reused by s08, which
// instantiates it over several tile configurations. A stage passes its own Config type (derived
// from WarpTiledConfig) so that the kernel symbol carries the stage's namespace in profiles.
// The layout (gemm::Layout) is a template parameter of the kernel, not of the Config: one
// configuration runs in every layout, each its own instantiation (warp_tiled_launch picks it).
//
// PREFETCH (a Config knob, off in s07, tuned in s08) moves each slice's barrier before its last
// k step and loads the next slice's first fragments there, under the last step's FFMAs.
//
// Work decomposition (numbers for BM = BN = 128, TM = TN = 8):
//   block  BM x BN            (128 x 128)   NT = 32 * WARPS_M * WARPS_N threads (256)
//   warp   WM x WN = 4TM x 8TN  (32 x 64)   warps arranged WARPS_M x WARPS_N (4 x 2)
//   lanes  4 (M) x 8 (N)
//   thread TM x TN = (TM/4 x TN/4) groups of 4x4: rows lm*4 + 16*g, columns ln*4 + 32*g
// Per k step a lane reads TM/4 float4 of A and TN/4 float4 of B from shared memory. Within a
// warp the A reads touch 4 distinct float4 (64 consecutive bytes) and the B reads 8 distinct
// float4 (128 consecutive bytes): each LDS.128 is one shared-memory wavefront, the others are
// broadcasts, whatever the row strides of As and Bs. Shared-memory layouts and the cp.async
// tile copies are s06's (common/simt_cp_async.cuh): Bs rows are padded in NT, where B is
// copied transposed, so the shared-memory sizes below depend on the layout too.
#pragma once
#include "common/block_order.cuh"
#include "common/cp_async.cuh"
#include "common/gemm.cuh"
#include "common/layouts.cuh"
#include "common/simt_cp_async.cuh"
#include "common/simt_epilogue.cuh"
#include "common/simt_ldg.cuh"
#include "common/simt_microtile.cuh"

namespace simt {

template <int BM_, int BN_, int BK_, int TM_, int TN_, int STAGES_, int MIN_BLOCKS_, int GROUP_M_ = 8,
          bool PREFETCH_ = false>
struct WarpTiledConfig {
  static constexpr bool PREFETCH = PREFETCH_;          // next slice's k = 0 fragments before the barrier
  static constexpr int BM = BM_, BN = BN_, BK = BK_;   // block tile, K depth per slice
  static constexpr int TM = TM_, TN = TN_;             // outputs per thread
  static constexpr int STAGES = STAGES_;               // slices resident in shared memory
  static constexpr int MIN_BLOCKS = MIN_BLOCKS_;       // __launch_bounds__ occupancy target
  static constexpr int GROUP_M = GROUP_M_;             // block rows per group of the launch order
  static constexpr int LANES_M = 4, LANES_N = 8;       // lane grid of a warp
  static constexpr int WM = LANES_M * TM, WN = LANES_N * TN;  // warp tile
  static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
  static constexpr int NT = 32 * WARPS_M * WARPS_N;
  static constexpr int AS_LD = BM + A_PAD;             // row stride of the transposed A tile
  static constexpr int SMEM_A = BK * AS_LD;            // words of A per stage
  // Words of B per stage, and bytes of the ring, in layout L (Bs rows: BN + B_PAD<L>).
  template <gemm::Layout L> static constexpr int smem_b() { return BK * (BN + B_PAD<L>); }
  template <gemm::Layout L> static constexpr int smem_bytes() { return STAGES * (SMEM_A + smem_b<L>()) * 4; }

  static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tiles are whole 4x4 groups (one float4 each way)");
  static_assert(BM % WM == 0 && BN % WN == 0, "the block tile must be whole warp tiles");
  static_assert(NT >= 64 && NT <= 1024, "between 2 and 32 warps per block");
  static_assert(BK % 8 == 0, "K-contiguous copies run along k in groups of 8 (one 32-byte sector)");
  static_assert((BM * BK / 4) % NT == 0 && (BK * BN / 4) % NT == 0,
                "tile copies must split evenly over threads in every layout (16-byte or 4-byte)");
  static_assert(STAGES >= 2, "a pipeline needs one slice computing and one landing");
  static_assert(STAGES * (SMEM_A + BK * (BN + A_PAD)) * 4 <= 227 * 1024,
                "shared memory per block is capped at 227 KiB (in NT too, whose Bs rows are padded)");
  static_assert(MIN_BLOCKS * NT * 64 <= 65536, "MIN_BLOCKS blocks must fit the register file at >= 64 regs/thread");
};

template <class Cfg, gemm::Layout L, bool kVec>
__global__ void __launch_bounds__(Cfg::NT, Cfg::MIN_BLOCKS) warp_tiled_kernel(gemm::Problem<float> p) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN;
  constexpr int STAGES = Cfg::STAGES, NT = Cfg::NT, AS_LD = Cfg::AS_LD;
  using Tiles = CpAsyncTiles<L, BM, BN, BK, NT, kVec>;
  constexpr int BS_LD = Tiles::BS_LD, SMEM_B = Cfg::template smem_b<L>();  // Bs row stride, words per stage

  // --- tile assignment: grouped launch order, then warp tile, then lane tile --------------
  // Consecutive block ids walk down a group of GROUP_M block rows before moving one block column
  // right (common/block_order.cuh), so co-resident blocks share GROUP_M panels of A and few
  // panels of B in L2 (row-major order shares one A panel and streams every B panel).
  const gemm::TileCoord tile = gemm::grouped_tile(blockIdx.x, gemm::cdiv(p.M, BM), gemm::cdiv(p.N, BN),
                                                  Cfg::GROUP_M);
  const int m0 = tile.m * BM, n0 = tile.n * BN;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / Cfg::WARPS_N, wn = warp % Cfg::WARPS_N;
  const int lm = lane / Cfg::LANES_N, ln = lane % Cfg::LANES_N;
  const int a_col = wm * Cfg::WM + lm * 4;  // this thread's first row of A, as a column of As
  const int b_col = wn * Cfg::WN + ln * 4;  // this thread's first column of B
  // A k step's fragments of a lane (common/simt_microtile.cuh): TM/4 float4 of A, groups 16 rows
  // apart, and TN/4 float4 of B, groups 32 columns apart.
  constexpr int A_GS = 4 * Cfg::LANES_M, B_GS = 4 * Cfg::LANES_N;

  // --- operand staging: ring of STAGES x (As [BK][BM+4] transposed, Bs [BK][BN] (NT: BN+4)) --
  // K-contiguous operands (A in NN/NT, B in NT) arrive by 4-byte copies into their transposed
  // tiles, M- or N-contiguous ones (A in TN, B in NN/TN) by 16-byte copies.
  extern __shared__ float4 smem4[];
  float* const As = reinterpret_cast<float*>(smem4);  // [STAGES][BK][AS_LD]
  float* const Bs = As + STAGES * Cfg::SMEM_A;        // [STAGES][BK][BS_LD]

  float acc[TM][TN] = {};
  const int KT = gemm::cdiv(p.K, BK);

  // Prologue: slices 0 .. STAGES-2 in flight, one commit group per slice (empty ones too).
  Tiles tiles(p, m0, n0, tid);
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) {
      tiles.copy(As + s * Cfg::SMEM_A, Bs + s * SMEM_B, p.K - s * BK);
      tiles.advance(p);
    }
    gemm::cp_async_commit();
  }

  // Both loops below: at slice kt, refill a ring slot with slice kt + STAGES - 1 (none past the
  // last slice; the commit still closes a group, so wait<STAGES-2> keeps meaning "the next
  // slice has landed").
  auto refill = [&](int slot, int kt) {
    const int next = kt + STAGES - 1;
    if (next < KT) {
      tiles.copy(As + slot * Cfg::SMEM_A, Bs + slot * SMEM_B, p.K - next * BK);
      tiles.advance(p);
    }
    gemm::cp_async_commit();
  };

  if constexpr (Cfg::PREFETCH) {
    // --- loop over K with register double-buffering across slices: the barrier sits before
    // the last k step, so slice kt+1's first fragments load while slice kt's last FFMAs run
    // (no LDS latency bubble after the barrier). At that barrier every warp has read all of
    // slice kt (its last fragments were fetched during step BK-2), so its slot is refilled
    // at the top of slice kt+1.
    static_assert(BK % 2 == 0 && STAGES >= 3, "fragment buffers alternate per k step; 3+ slots");
    gemm::cp_async_wait<STAGES - 2>();  // slice 0 has landed (this thread's copies) ...
    __syncthreads();                    // ... and everyone's
    float a[2][TM], b[2][TN];  // fragments of steps k (buffer k % 2) and k + 1
    int read = 0, write = STAGES - 1;
    load_fragments<A_GS, B_GS>(a[0], b[0], As + a_col, Bs + b_col);
    for (int kt = 0; kt < KT; ++kt) {
      refill(write, kt);
      const int nread = read + 1 == STAGES ? 0 : read + 1;
      const float* as = As + read * Cfg::SMEM_A + a_col;
      const float* bs = Bs + read * SMEM_B + b_col;
#pragma unroll
      for (int k = 0; k < BK; ++k) {
        if (k == BK - 1) {
          gemm::cp_async_wait<STAGES - 2>();  // slice kt+1 has landed ...
          __syncthreads();                    // ... for everyone, and slice kt is fully read
          // k = 0 of slice kt+1 (after the last slice: a stale slot, read and never used)
          load_fragments<A_GS, B_GS>(a[0], b[0], As + nread * Cfg::SMEM_A + a_col,
                                     Bs + nread * SMEM_B + b_col);
        } else {
          load_fragments<A_GS, B_GS>(a[(k + 1) % 2], b[(k + 1) % 2], as + (k + 1) * AS_LD, bs + (k + 1) * BS_LD);
        }
        outer_product(acc, a[k % 2], b[k % 2]);
      }
      read = nread;
      write = write + 1 == STAGES ? 0 : write + 1;
    }
    gemm::cp_async_wait<0>();
    store_c<TM, TN, 16, 32, kVec>(p, acc, m0 + a_col, n0 + b_col);
    return;
  }

  // --- loop over K: wait for slice kt, refill the slot freed by kt-1, compute slice kt -------
  int read = 0, write = STAGES - 1;  // ring slots of slice kt and of slice kt + STAGES - 1
  for (int kt = 0; kt < KT; ++kt) {
    gemm::cp_async_wait<STAGES - 2>();  // this thread's copies of slice kt have landed
    __syncthreads();                    // ... everyone's have, and everyone finished slice kt-1

    refill(write, kt);

    const float* as = As + read * Cfg::SMEM_A + a_col;
    const float* bs = Bs + read * SMEM_B + b_col;
    // TM/4 + TN/4 LDS.128 (one wavefront each) feed TM*TN FFMA: 4 per 64 for 8x8.
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
      load_fragments<A_GS, B_GS>(a, b, as + k * AS_LD, bs + k * BS_LD);
      outer_product(acc, a, b);
    }
    read = read + 1 == STAGES ? 0 : read + 1;
    write = write + 1 == STAGES ? 0 : write + 1;
  }
  gemm::cp_async_wait<0>();  // no copy may outlive the block (only empty groups remain)

  // --- epilogue: float4 stores (8 lanes write 128 consecutive bytes of a row), tails scalar --
  store_c<TM, TN, 16, 32, kVec>(p, acc, m0 + a_col, n0 + b_col);
}

// Host side: grid size, the > 48 KiB opt-in, layout and kVec dispatch.
template <class Cfg>
const char* warp_tiled_unsupported(const gemm::Problem<float>& p) {
  if (static_cast<long long>(gemm::cdiv(p.M, Cfg::BM)) * gemm::cdiv(p.N, Cfg::BN) > 0x7fffffffLL)
    return "M and N too large: the grid holds (M/BM)*(N/BN) blocks in one dimension (limit 2^31-1)";
  return nullptr;
}

template <class Cfg, gemm::Layout L, bool kVec>
cudaError_t warp_tiled_launch_as(const gemm::Problem<float>& p, cudaStream_t stream) {
  auto* k = &warp_tiled_kernel<Cfg, L, kVec>;
  constexpr int SMEM_BYTES = Cfg::template smem_bytes<L>();
  if (SMEM_BYTES > 48 * 1024) {
    // Once per instantiation (a function-local static is initialised exactly once).
    static const cudaError_t attr =
        cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (attr != cudaSuccess) return attr;
  }
  const int blocks = gemm::cdiv(p.M, Cfg::BM) * gemm::cdiv(p.N, Cfg::BN);
  k<<<blocks, Cfg::NT, SMEM_BYTES, stream>>>(p);
  return cudaGetLastError();
}

template <class Cfg>
cudaError_t warp_tiled_launch(const gemm::Problem<float>& p, cudaStream_t stream) {
  return gemm::with_layout(p.layout, [&](auto l) {
    constexpr gemm::Layout L = decltype(l)::value;
    return float4_ok(p) ? warp_tiled_launch_as<Cfg, L, true>(p, stream)
                        : warp_tiled_launch_as<Cfg, L, false>(p, stream);
  });
}

}  // namespace simt
