// s12_tma_wgmma: Hopper TMA tile loads + wgmma from swizzled shared memory, mbarrier pipeline
//
// Change: vs s11, TMA moves whole operand tiles into 128B-swizzled smem; two warpgroups run wgmma
//         m64n256k16 from smem; a 4-stage full/empty mbarrier ring replaces cp.async groups.
// Why:    one thread issues 2 TMA instructions per 48 KB k-step instead of 256 threads issuing
//         3072 16-byte cp.async, and one wgmma does 64x256x16 per warpgroup (262k MACs) where
//         mma.sync did 16x8x16 per warp: issue slots stop being the limit. 128x256x64 stages:
//         4.2 MFLOP per 48 KB = 85 FLOP/B of L2 traffic, 128 accumulator registers per thread;
//         4 stages = 192 KB, one CTA per SM with three k-steps of loads in flight.
// Expect: ~85-95% of cuBLAS FP16/BF16 at 4096^3 and 8192^3, ~1.5x s11 (wgmma at the full tensor rate)
// Limits: A and B 16-byte aligned and lda, ldb multiples of 8 elements (TMA: 16-byte aligned
//         base, 16-byte row strides; else ValueError naming the argument); any M, N, K >= 1
//         and any ldc (tails: TMA zero fill in, predicated stores out)
// Dtype:  fp16, bf16 in / fp32 acc / same as in out        Arch: sm_90a      Layout: NT, NN, TN
// Pair:   triton_kernels/s12_tma_wgmma.py
// Log:    docs/stages/s12_tma_wgmma.md
#include "common/gemm.cuh"
#include "common/hopper.cuh"
#include "common/layouts.cuh"

// Tile shapes and depths measured against this default, and the error vs fp64:
// docs/stages/s12_tma_wgmma.md.

namespace s12_tma_wgmma {

constexpr int BM = 128;              // CTA tile rows: two warpgroups x 64 rows (wgmma M is 64)
constexpr int BK = 64;               // 64 x 2 B = one 128-byte swizzle line per tile row
constexpr int CONSUMERS = 2;         // warpgroups issuing wgmma
constexpr int THREADS = CONSUMERS * 128;
constexpr int GROUP_M = 8;           // tile rows per group of the L2-friendly launch order
constexpr int WG_M = BM / CONSUMERS; // rows per warpgroup
constexpr int A_TILE = BM * BK;      // elements per stage of A
// Tile width, ring depth and CTAs per SM are template knobs of the kernel so that other shapes can
// be measured against the default (launch_cfg); launch() runs the default.
constexpr int BN_DEF = 256;          // CTA tile cols: one m64n256k16 per warpgroup per k16 step
constexpr int STAGES_DEF = 4;        // ring depth: 4 x 48 KB = 192 KB, one CTA per SM
constexpr int CTAS_DEF = 1;          // CTAs per SM (__launch_bounds__ minimum)
template <int BN, int STAGES, int CTAS>
struct Shape {
  static_assert(BN % 64 == 0, "an N-major B tile (NN, TN) is whole 64-column TMA boxes");
  static constexpr int B_TILE = BN * BK;  // elements per stage of B
  static constexpr int STAGE_BYTES = (A_TILE + B_TILE) * 2;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;  // + room to align to 1024 B
  static_assert(BN % 8 == 0 && BN <= 256, "wgmma N is a multiple of 8, at most 256 (TMA box too)");
  static_assert((B_TILE * 2) % 1024 == 0, "every tile must start on a 1024-byte swizzle atom");
  static_assert(CTAS * SMEM_BYTES <= 227 * 1024, "CTAS rings must fit in 227 KB of shared memory");
  static_assert(CTAS * THREADS * (BN / 2 + 40) <= 65536, "accumulators + ~40 registers per thread");
};
static_assert(WG_M == 64, "each consumer warpgroup covers exactly one wgmma M of 64 rows");
static_assert(BK * 2 == 128, "a tile row must be exactly one 128-byte swizzle line (BK = 64)");
static_assert(BK % 16 == 0, "wgmma consumes K in steps of 16");
static_assert((A_TILE * 2) % 1024 == 0, "every tile must start on a 1024-byte swizzle atom");
static_assert(BM <= 256, "a TMA box dimension is at most 256 elements");

template <typename T, gemm::Layout L, int BN, int STAGES, int CTAS>
__global__ void __launch_bounds__(THREADS, CTAS)
kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
       gemm::Problem<T> p, int vec2_ok) {
  // Shared memory: [STAGES] A tiles of BM x BK, [STAGES] B tiles of BN x BK, each 1024-byte
  // aligned for the 128B swizzle; then the barriers. Each tile keeps its operand's major order
  // (common/hopper.cuh): K-major [rows][64 k] (A in NN/NT, B in NT) or MN-major, 64-wide boxes
  // of [64 k][64 mn] (B in NN/TN, A in TN), read by wgmma with tnspA / tnspB set.
  constexpr bool A_MN = gemm::Majors<L>::A_MN, B_MN = gemm::Majors<L>::B_MN;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  T* sA = reinterpret_cast<T*>(smem);
  using S = Shape<BN, STAGES, CTAS>;
  constexpr int B_TILE = S::B_TILE, STAGE_BYTES = S::STAGE_BYTES;
  T* sB = reinterpret_cast<T*>(smem + STAGES * A_TILE * 2);
  __shared__ uint64_t full[STAGES];   // completes when a stage's TMA bytes have all landed
  __shared__ uint64_t empty[STAGES];  // completes when all 8 warps finished reading a stage

  // --- tile assignment: grouped order (GROUP_M tile rows sweep N together) for L2 reuse --------
  const int tiles_m = gemm::cdiv(p.M, BM), tiles_n = gemm::cdiv(p.N, BN);
  const int per_group = GROUP_M * tiles_n;
  const int group = blockIdx.x / per_group;
  const int first_m = group * GROUP_M;
  const int group_rows = min(tiles_m - first_m, GROUP_M);
  const int tm = first_m + (blockIdx.x % per_group) % group_rows;
  const int tn = (blockIdx.x % per_group) / group_rows;
  const int m0 = tm * BM, n0 = tn * BN;

  const int tid = threadIdx.x;
  const int wg = tid / 128;            // consumer warpgroup: rows wg*64 .. wg*64+63 of the tile
  const int KT = gemm::cdiv(p.K, BK);  // K tail: TMA zero-fills columns k >= K

  if (tid == 0) {
    hopper::tma_prefetch_desc(&tmap_a);
    hopper::tma_prefetch_desc(&tmap_b);
    for (int s = 0; s < STAGES; ++s) {
      hopper::mbar_init(&full[s], 1);               // one arrive.expect_tx by the issuing thread
      hopper::mbar_init(&empty[s], THREADS / 32);   // one arrival per consumer warp
    }
    hopper::fence_barrier_init();
  }
  __syncthreads();

  // --- operand staging: thread 0 fills the ring; slots come back through `empty` -------------
  auto issue = [&](int kt) {
    const int s = kt % STAGES;
    hopper::mbar_arrive_expect_tx(&full[s], STAGE_BYTES);  // full box bytes, zero-fill included
    hopper::tma_load_operand<A_MN, BM>(sA + s * A_TILE, &tmap_a, &full[s], kt * BK, m0);
    hopper::tma_load_operand<B_MN, BN>(sB + s * B_TILE, &tmap_b, &full[s], kt * BK, n0);
  };
  if (tid == 0)
    for (int kt = 0; kt < min(STAGES, KT); ++kt) issue(kt);

  // --- loop over K: wait full -> 4 wgmma (k16 each) -> keep one batch in flight --------------
  float acc[BN / 2] = {};  // 64 x BN fp32 per warpgroup: 128 registers per thread at BN = 256
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % STAGES;
    hopper::mbar_wait(&full[s], (kt / STAGES) & 1);
    // This warpgroup's 64 rows of the A tile: rows wg*64.. (K-major) or box wg (M-major), the
    // same offset in both formats.
    const T* a = sA + s * A_TILE + wg * WG_M * BK;
    const T* b = sB + s * B_TILE;
    hopper::wgmma_fence();
#pragma unroll
    for (int k = 0; k < BK / 16; ++k)  // K-major: +32 B inside the swizzled line; MN-major: +16 lines
      hopper::Wgmma<T, BN, A_MN, B_MN>::mma(acc, hopper::desc_k16<A_MN>(a, k), hopper::desc_k16<B_MN>(b, k),
                                            kt > 0 || k > 0);
    hopper::wgmma_commit();
    // Batch kt may still run; batch kt-1 is done, so its stage can be refilled.
    hopper::wgmma_wait<1>();
    hopper::fence_regs(acc);
    if (kt > 0) {
      const int sp = (kt - 1) % STAGES;
      if (tid % 32 == 0) hopper::mbar_arrive(&empty[sp]);
      // Thread 0 refills that slot with k-step kt-1+STAGES once every warp has released it.
      if (tid == 0 && kt - 1 + STAGES < KT) {
        hopper::mbar_wait(&empty[sp], ((kt - 1) / STAGES) & 1);
        issue(kt - 1 + STAGES);
      }
    }
  }
  hopper::wgmma_wait<0>();
  hopper::fence_regs(acc);

  // --- epilogue: fp32 accumulators -> alpha/beta -> T, stores predicated against M and N ------
  // Straight from the wgmma fragment to global memory: a quad writes 16 contiguous bytes of a
  // row; C is 1/48 of the traffic of the main loop at K = 4096, not worth a staging pass here.
  const int warp = (tid % 128) / 32, lane = tid % 32;
  hopper::store_acc<T, BN>(acc, p, m0 + wg * WG_M + warp * 16 + lane / 4, n0 + 2 * (lane % 4),
                           vec2_ok);
}

template <typename T>
const char* unsupported_t(const gemm::Problem<T>& p) {
  return hopper::tma_operand_problem(p);  // per layout: the strided dimension of each operand
}

template <typename T, gemm::Layout L, int BN = BN_DEF, int STAGES = STAGES_DEF, int CTAS = CTAS_DEF>
cudaError_t launch_cfg(const gemm::Problem<T>& p, cudaStream_t stream) {
  using S = Shape<BN, STAGES, CTAS>;
  CUtensorMap ta, tb;
  cudaError_t e = hopper::make_tmap_operand(&ta, p.A, gemm::Majors<L>::A_MN, p.M, p.K, p.lda, BM);
  if (e != cudaSuccess) return e;
  e = hopper::make_tmap_operand(&tb, p.B, gemm::Majors<L>::B_MN, p.N, p.K, p.ldb, BN);
  if (e != cudaSuccess) return e;
  e = cudaFuncSetAttribute(kernel<T, L, BN, STAGES, CTAS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           S::SMEM_BYTES);
  if (e != cudaSuccess) return e;
  const int vec2_ok = p.ldc % 2 == 0 && reinterpret_cast<uintptr_t>(p.C) % 4 == 0;
  const int tiles = gemm::cdiv(p.M, BM) * gemm::cdiv(p.N, BN);
  kernel<T, L, BN, STAGES, CTAS><<<tiles, THREADS, S::SMEM_BYTES, stream>>>(ta, tb, p, vec2_ok);
  return cudaGetLastError();
}

// One instantiation per layout (common/layouts.cuh): NT's kernel is the code it always was.
template <typename T>
cudaError_t launch_t(const gemm::Problem<T>& p, cudaStream_t stream) {
  return gemm::with_layout(p.layout, [&](auto l) { return launch_cfg<T, decltype(l)::value>(p, stream); });
}

const char* unsupported(const gemm::Problem<__half>& p) { return unsupported_t(p); }
const char* unsupported(const gemm::Problem<__nv_bfloat16>& p) { return unsupported_t(p); }
cudaError_t launch(const gemm::Problem<__half>& p, cudaStream_t s) { return launch_t(p, s); }
cudaError_t launch(const gemm::Problem<__nv_bfloat16>& p, cudaStream_t s) { return launch_t(p, s); }

}  // namespace s12_tma_wgmma
