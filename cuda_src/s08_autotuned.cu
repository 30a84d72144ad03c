// s08_autotuned: s07's kernel over a menu of tile configurations, picked per GPU and shape
//
// Change: vs s07, the warp-tiled cp.async kernel comes as 9 configurations (tiles, stages, blocks per
//         SM, cross-slice prefetch); study times them per GPU and shape class and caches the winner.
// Why:    no tile wins everywhere. 128x256 / 256x128 tiles raise intensity (85 vs 64 FLOP/B from L2)
//         and FFMA per LDS (128 per 6 vs 64 per 4) but need ~215-245 registers (one block per SM, 2
//         warps per scheduler); small tiles (4 blocks per SM) fill 132 SMs on small problems. With 2
//         warps per scheduler every wait shows, so the prefetch knob (_pf1) moves a slice's barrier
//         before its last k step: the next slice's first fragments load under the last FFMAs.
// Expect: ~96-99% of cuBLAS FP32 at 4096^3 and 8192^3, ~1.14x s07 (H100 studies: 49.2-51.1 TFLOP/s)
// Limits: none (any M, N, K >= 1, any leading dimension: tails are zero-filled by the copies;
//         misaligned A, B or C, or leading dims not multiple of 4, use 4-byte copies and stores)
// Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
// Pair:   triton_kernels/s08_autotuned.py
// Log:    docs/stages/s08_autotuned.md
#include "common/gemm.cuh"
#include "common/simt_warp_tiled.cuh"

namespace s08_autotuned {

// The menu: WarpTiledConfig<BM, BN, BK, TM, TN, STAGES, MIN_BLOCKS, GROUP_M = 8, PREFETCH>.
// Threads follow from the tiles: NT = 32 * (BM / 4TM) * (BN / 8TN). Shared memory =
// STAGES * BK * (BM + 4 + BN) * 4 B (NT: BN + 4, its B tile is stored transposed and padded).
// Every entry runs in every layout (NN, NT, TN), each layout its own instantiation.
template <int BM, int BN, int BK, int TM, int TN, int STAGES, int MINB, int PF>
struct Config : simt::WarpTiledConfig<BM, BN, BK, TM, TN, STAGES, MINB, 8, PF != 0> {};

// Each entry is one instantiation; the name spells BMxBNxBK_TMxTN_sSTAGES_bMIN_BLOCKS_pfPREFETCH.
// Pruned to the configurations that won a shape class on the H100 (reports/, autotune.csv)
// plus the two tall/wide-C shapes: every entry costs ~2.5 s of cold compile (two kernels:
// 16-byte and 4-byte copy paths). What was dropped, and why: docs/stages/s08_autotuned.md.
#define S08_CONFIGS(X)                                                                           \
  X(128, 256, 32, 16, 8, 4, 1, 1)  /* 256 thr, 16x8, 243 regs, 1 block/SM, 194 KiB: default    */ \
  X(128, 256, 32, 16, 8, 3, 1, 1)  /* 146 KiB, within 0.5% of the default                    */ \
  X(128, 256, 16, 16, 8, 3, 1, 1)  /* 73 KiB: shallow K                                      */ \
  X(256, 128, 16, 16, 8, 3, 1, 0)  /* 256 thr, 16x8, 74 KiB: tall C                         */ \
  X(128, 128, 16,  8, 8, 4, 2, 1)  /* 256 thr, 8x8, 65 KiB, 2 blocks/SM                     */ \
  X( 64, 256, 16,  8, 8, 3, 2, 0)  /* 256 thr, 8x8, 62 KiB, 2 blocks/SM                     */ \
  X( 64, 128, 16,  8, 8, 3, 4, 0)  /* 128 thr, 37 KiB, 4 blocks/SM: small problems          */ \
  X( 64, 128, 16,  8, 8, 4, 4, 0)  /* 50 KiB                                                */ \
  X(128,  64, 16,  8, 8, 4, 4, 0)  /* 128 thr, 42 KiB: tall-skinny C                        */

#define S08_NAME(BM, BN, BK, TM, TN, S, B, PF) #BM "x" #BN "x" #BK "_" #TM "x" #TN "_s" #S "_b" #B "_pf" #PF,
#define S08_TYPE(BM, BN, BK, TM, TN, S, B, PF) Config<BM, BN, BK, TM, TN, S, B, PF>,

template <class... Cfgs> struct Menu {};
using Configs = Menu<S08_CONFIGS(S08_TYPE) void>;  // trailing void ends the list
constexpr const char* NAMES[] = {S08_CONFIGS(S08_NAME)};
constexpr int NUM_CONFIGS = sizeof(NAMES) / sizeof(NAMES[0]);

// Default for the two-argument launch(): 128x256x32_16x8_s4_b1_pf1, the best measured at 4096^3
// and 8192^3 on the H100.
constexpr int DEFAULT_CONFIG = 0;
static_assert(DEFAULT_CONFIG < NUM_CONFIGS, "the default must be on the menu");

int num_configs() { return NUM_CONFIGS; }

const char* config_name(int i) { return (i >= 0 && i < NUM_CONFIGS) ? NAMES[i] : nullptr; }

// Runs entry i of the menu: a compile-time walk down the type list.
template <class First, class... Rest>
cudaError_t launch_nth(const gemm::Problem<float>& p, cudaStream_t stream, int i, Menu<First, Rest...>) {
  if (i == 0) return simt::warp_tiled_launch<First>(p, stream);
  return launch_nth(p, stream, i - 1, Menu<Rest...>{});
}
inline cudaError_t launch_nth(const gemm::Problem<float>&, cudaStream_t, int, Menu<void>) {
  return cudaErrorInvalidValue;
}

const char* unsupported(const gemm::Problem<float>& p) {
  // The smallest tiles (64 rows or columns) give the largest grid: checking it covers all.
  return simt::warp_tiled_unsupported<Config<64, 64, 8, 8, 8, 2, 1, 0>>(p);
}

cudaError_t launch(const gemm::Problem<float>& p, cudaStream_t stream, int config) {
  if (config < 0 || config >= NUM_CONFIGS) return cudaErrorInvalidValue;
  return launch_nth(p, stream, config, Configs{});
}

cudaError_t launch(const gemm::Problem<float>& p, cudaStream_t stream) {
  return launch(p, stream, DEFAULT_CONFIG);
}

}  // namespace s08_autotuned
