// common/tc_tiling.cuh: block and warp tiling, and the launch, of the mma.sync-era tensor-core
// stages (s09-s11).
//
// Born in s09 and kept by s10 and s11, which change operand types, fragment loads and staging
// layouts but not how a block's tile of C splits over warps or how blocks are launched:
//   block  BM x BN of C; K in BK steps through a STAGES-deep cp.async ring
//   warps  WARPS_M x WARPS_N, each owning a WM x WN piece; THREADS = 32 * WARPS_M * WARPS_N
//   grid   1-D, one block per tile of C, mapped to tiles in grouped order (GROUP_M tile rows,
//          common/block_order.cuh) so that co-resident blocks share operand strips in L2
// A stage derives its own Config from WarpGrid, adding its fragment and staging constants; its
// kernel is templated on that Config, so the kernel symbol keeps the stage's namespace.
#pragma once
#include "common/gemm.cuh"

namespace gemm {

template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int GROUP_M_>
struct WarpGrid {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;               // block tile of C / K step
  static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;     // warp grid in the block
  static constexpr int STAGES = STAGES_;                           // cp.async pipeline depth
  static constexpr int GROUP_M = GROUP_M_;                         // tile rows per L2 group
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;       // warp tile of C
};

// Host side: opts the kernel in to Cfg::SMEM_BYTES of dynamic shared memory (more than 48 KiB
// needs it) and launches one Cfg::THREADS block per BM x BN tile of C on a 1-D grid, passing
// the problem and then `args`.
template <class Cfg, class Kernel, typename T, class... Args>
cudaError_t launch_tiles(Kernel k, const Problem<T>& p, cudaStream_t stream, Args... args) {
  const cudaError_t err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::SMEM_BYTES);
  if (err != cudaSuccess) return err;
  const int blocks = cdiv(p.M, Cfg::BM) * cdiv(p.N, Cfg::BN);
  k<<<blocks, Cfg::THREADS, Cfg::SMEM_BYTES, stream>>>(p, args...);
  return cudaGetLastError();
}

}  // namespace gemm
