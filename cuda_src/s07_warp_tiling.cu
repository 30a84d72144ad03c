// s07_warp_tiling: warp tiles with conflict-free float4 broadcasts, grouped block order
//
// Change: vs s06, threads are mapped to outputs through warp tiles: each warp owns a 32x64
//         piece of the 128x128 block tile, its lanes a 4x8 grid of 8x8 micro-tiles (2x2 groups of
//         4x4 at strides 16 and 32); and blocks are launched in grouped order (8 block rows per
//         group) instead of row-major.
// Why:    in s06 a half-warp's B reads cover 16 distinct float4 (2 wavefronts per LDS.128):
//         6 shared-memory wavefronts per k step per warp. Warp tiling makes every LDS.128 read 4
//         (A) or 8 (B) distinct float4 within 128 bytes: 1 wavefront each, 4 per k step, and the
//         epilogue writes 128 consecutive bytes per row per instruction. Grouped order keeps the
//         ~264 co-resident blocks on 8 A panels and ~33 B panels, cutting L2 misses for large N
//         (at 8192^3 row-major order co-schedules 4 block rows and all 64 B panels).
// Expect: ~1.0x s06 at 4096^3 fp32, not faster (H100: 43.4 vs 44.4 TFLOP/s, 0.98x). The 8x8
//         kernel is issue-bound (ncu: issue slots 77% busy, FMA pipe 68%, L1 64%, DRAM 5%), so
//         fewer shared-memory wavefronts and L2 misses buy nothing yet (row-major order measured
//         the same: 43.4); warp tiles are what let s08 grow thread tiles to 16x8 (6 LDS.128 per
//         128 FFMA, still one wavefront each) and, with its cross-slice prefetch, reach 96-98% of
//         cuBLAS.
// Limits: none (any M, N, K >= 1, any leading dimension: tails are zero-filled by the copies;
//         misaligned B or C, or leading dims not multiple of 4, use 4-byte copies and stores)
// Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN
// Pair:   triton_kernels/s07_warp_tiling.py
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
