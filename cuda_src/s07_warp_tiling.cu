// s07_warp_tiling: warp tiles with conflict-free float4 broadcasts, grouped block order
//
// Change: vs s06, threads map to outputs through warp tiles (a warp owns 32x64 of the 128x128 tile,
//         its lanes 8x8 micro-tiles at strides 16 and 32), and blocks run in grouped order (8 rows).
// Why:    in s06 a half-warp's B reads cover 16 distinct float4 (2 wavefronts per LDS.128): 6
//         wavefronts per k step per warp; warp tiles make each LDS.128 one wavefront (4 per k step)
//         and the epilogue write 128 consecutive bytes per row. Grouped order keeps ~264 co-resident
//         blocks on 8 A and ~33 B panels. The 8x8 kernel is issue-bound, so neither pays yet; warp
//         tiles are what let s08 grow thread tiles to 16x8 (6 LDS.128 per 128 FFMA).
// Expect: ~1.0x s06 at 4096^3 fp32, not faster (H100: 43.4 vs 44.4 TFLOP/s, 0.98x)
// Limits: none (any M, N, K >= 1, any leading dimension: tails are zero-filled by the copies;
//         misaligned A, B or C, or leading dims not multiple of 4, use 4-byte copies and stores)
// Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
// Pair:   triton_kernels/s07_warp_tiling.py
// Log:    docs/stages/s07_warp_tiling.md
#include "common/gemm.cuh"
#include "common/simt_warp_tiled.cuh"

namespace s07_warp_tiling {

// s06's tile shapes and pipeline (128x128x8, 8x8 per thread, 3 stages, 2 blocks per SM);
// only the thread -> output mapping and the block order are new (common/simt_warp_tiled.cuh).
struct Config : simt::WarpTiledConfig</*BM*/ 128, /*BN*/ 128, /*BK*/ 8, /*TM*/ 8, /*TN*/ 8,
                                      /*STAGES*/ 3, /*MIN_BLOCKS*/ 2> {};
static_assert(Config::NT == 256 && Config::WM == 32 && Config::WN == 64, "4 x 2 warps of 32x64");

const char* unsupported(const gemm::Problem<float>& p) { return simt::warp_tiled_unsupported<Config>(p); }

cudaError_t launch(const gemm::Problem<float>& p, cudaStream_t stream) {
  return simt::warp_tiled_launch<Config>(p, stream);
}

}  // namespace s07_warp_tiling
