// s13_warp_specialized: persistent, warp-specialised producer/consumer warpgroups
//
// Change: vs s12, one persistent CTA per SM walks a grouped tile order; inside it a producer
//         warpgroup only issues TMA (setmaxnreg down to 40 registers) and two consumer
//         warpgroups only issue wgmma m64n256k16 (setmaxnreg up to 232), on 128x256x64 tiles
//         through a 4-stage ring of full/empty mbarriers that runs on across tile boundaries.
// Why:    a 128x256 tile moves (128+256)*64*2 = 48 KB per k-step for 2*128*256*64 = 4.2 MFLOP:
//         85 FLOP/B of L2 traffic against s12's 64, and each wgmma is twice as wide (n256),
//         so the tensor cores idle less between issues. 128 fp32 accumulators per consumer
//         thread only fit because the producer hands its registers over: 128*40 + 256*232 =
//         64512 <= 65536. With the producer decoupled, the loads for the next tile stream in
//         while the consumers run their epilogue, and persistence removes the per-CTA prologue
//         (132 CTAs instead of 512-2048 at 4096^3-8192^3). Ring: 4 x 48 KB = 192 KB.
// Expect: ~85-95% of cuBLAS FP16/BF16 at 4096^3 and 8192^3 (~1.2x s12)
// Limits: A and B 16-byte aligned and lda, ldb multiples of 8 elements (TMA: 16-byte aligned
//         base, 16-byte row strides; else ValueError naming the argument); any M, N, K >= 1
//         and any ldc (tails: TMA zero fill in, predicated stores out)
// Dtype:  fp16, bf16 in / fp32 acc / same as in out        Arch: sm_90a      Layout: NT
// Pair:   triton_kernels/s13_warp_specialized.py
#include "common/gemm.cuh"
#include "common/hopper.cuh"

// Measured (H100 SXM, 3 runs, do_bench median, cuBLAS = torch.matmul(a, w.t()) same dtype):
//   4096^3: fp16 611-641 TFLOP/s (84-88% of cuBLAS, 719-752),  bf16 640-646 (86-89%, 724-754)
//   8192^3: fp16 604-659 (90-104% of cuBLAS, 636-675),          bf16 649-664 (95-111%, 583-696)
//   (cuBLAS itself moved by up to 16% between runs: percentages are per run.)
//   rel. Frobenius error vs fp64 at 4096^3: fp16 2.1e-4, bf16 1.7e-3 (the output rounding).
// Not used: 2x1 clusters sharing the B tile through TMA multicast (+ cluster-wide empty
// barriers) were correct but ran at ~300 TFLOP/s, half of this; the cause was not found in the
// time available, so this stage stays at one CTA per cluster.

namespace s13_warp_specialized {

constexpr int BM = 128;              // CTA tile rows: two consumer warpgroups x 64 (wgmma M)
constexpr int BN = 256;              // CTA tile cols: one m64n256k16 per consumer per k16 step
constexpr int BK = 64;               // 64 x 2 B = one 128-byte swizzle line per tile row
constexpr int STAGES = 4;            // ring depth: 4 x 48 KB = 192 KB of the 227 KB
constexpr int CONSUMERS = 2;         // wgmma warpgroups; warpgroup 0 is the producer
constexpr int THREADS = (CONSUMERS + 1) * 128;
constexpr int GROUP_M = 8;           // tile rows per group of the persistent tile order; 4 and 16
                                     // measured within run-to-run noise of 8 on the H100
                                     // (launch_g<T, G> takes another value for such checks)
constexpr int PRODUCER_REGS = 40;    // setmaxnreg targets: 128*40 + 256*232 = 64512 <= 64K
constexpr int CONSUMER_REGS = 232;
constexpr int WG_M = BM / CONSUMERS;
constexpr int A_TILE = BM * BK;      // elements per stage of A
constexpr int B_TILE = BN * BK;      // elements per stage of B
constexpr int STAGE_BYTES = (A_TILE + B_TILE) * 2;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;  // + room to align the ring to 1024 B
static_assert(WG_M == 64, "each consumer warpgroup covers exactly one wgmma M of 64 rows");
static_assert(BK * 2 == 128, "a tile row must be exactly one 128-byte swizzle line (BK = 64)");
static_assert((A_TILE * 2) % 1024 == 0 && (B_TILE * 2) % 1024 == 0,
              "every tile must start on a 1024-byte swizzle atom");
static_assert(BM <= 256 && BN <= 256, "a TMA box dimension is at most 256 elements");
static_assert(SMEM_BYTES <= 227 * 1024, "the ring must fit in 227 KB of shared memory");
static_assert(128 * PRODUCER_REGS + CONSUMERS * 128 * CONSUMER_REGS <= 65536,
              "register budgets after setmaxnreg must fit the 64K-register file");

// Grouped tile order: GROUP_M tile rows sweep the N tiles together, so the 132 tiles in flight
// at once share ~8 row panels of A and ~17 column panels of B in L2.
template <int G>
__device__ __forceinline__ void tile_coords(int tile, int tiles_m, int tiles_n, int& m0, int& n0) {
  const int per_group = G * tiles_n;
  const int first_m = (tile / per_group) * G;
  const int group_rows = min(tiles_m - first_m, G);
  m0 = (first_m + (tile % per_group) % group_rows) * BM;
  n0 = ((tile % per_group) / group_rows) * BN;
}

template <typename T, int G>
__global__ void __launch_bounds__(THREADS, 1)
kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
       gemm::Problem<T> p, int vec2_ok) {
  // Shared memory: [STAGES][BM][BK] A tiles and [STAGES][BN][BK] B tiles (B stored [N][K]),
  // 1024-byte aligned for the 128B swizzle; the barriers live in static shared memory.
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  T* sA = reinterpret_cast<T*>(smem);
  T* sB = reinterpret_cast<T*>(smem + STAGES * A_TILE * 2);
  __shared__ uint64_t full[STAGES];   // producer -> consumers: the stage's TMA bytes landed
  __shared__ uint64_t empty[STAGES];  // consumers -> producer: all 8 consumer warps are done

  // --- tile assignment: persistent CTA takes tiles blockIdx.x, +gridDim.x, ... ---------------
  const int tiles_m = gemm::cdiv(p.M, BM), tiles_n = gemm::cdiv(p.N, BN);
  const int tiles = tiles_m * tiles_n;
  const int KT = gemm::cdiv(p.K, BK);  // K tail: TMA zero-fills columns k >= K
  const int tid = threadIdx.x;
  const int wg = tid / 128;

  if (tid == 0) {
    hopper::tma_prefetch_desc(&tmap_a);
    hopper::tma_prefetch_desc(&tmap_b);
    for (int s = 0; s < STAGES; ++s) {
      hopper::mbar_init(&full[s], 1);                   // the producer's arrive.expect_tx
      hopper::mbar_init(&empty[s], CONSUMERS * 4);      // one arrival per consumer warp
    }
    hopper::fence_barrier_init();
  }
  __syncthreads();  // the last CTA-wide barrier: from here on the roles never meet at one

  if (wg == 0) {
    // --- operand staging (producer warpgroup): one thread streams k-steps into the ring ------
    // The ring position `it` runs on across tiles, so the next tile's first stages load while
    // the consumers are still in this tile's epilogue.
    hopper::setmaxnreg_dec<PRODUCER_REGS>();
    if (tid == 0) {
      int it = 0;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int m0, n0;
        tile_coords<G>(tile, tiles_m, tiles_n, m0, n0);
        for (int kt = 0; kt < KT; ++kt, ++it) {
          const int s = it % STAGES;
          hopper::mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);  // first lap: free at once
          hopper::mbar_arrive_expect_tx(&full[s], STAGE_BYTES);   // zero-filled bytes count too
          hopper::tma_load_2d(sA + s * A_TILE, &tmap_a, &full[s], kt * BK, m0);
          hopper::tma_load_2d(sB + s * B_TILE, &tmap_b, &full[s], kt * BK, n0);
        }
      }
    }
  } else {
    // --- loop over K (consumer warpgroups): wait full -> 4 wgmma -> release the older stage --
    hopper::setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = wg - 1;                   // rows cw*64 .. cw*64+63 of each tile
    const int warp = (tid % 128) / 32, lane = tid % 32;
    float acc[BN / 2];                       // 64 x 256 fp32 = 128 registers per thread
    int it = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      int m0, n0;
      tile_coords<G>(tile, tiles_m, tiles_n, m0, n0);
      for (int kt = 0; kt < KT; ++kt, ++it) {
        const int s = it % STAGES;
        hopper::mbar_wait(&full[s], (it / STAGES) & 1);
        const T* a = sA + s * A_TILE + cw * WG_M * BK;
        const T* b = sB + s * B_TILE;
        hopper::wgmma_fence();
#pragma unroll
        for (int k = 0; k < BK / 16; ++k)  // +16 elements = +32 B inside the swizzled line
          hopper::Wgmma<T, BN>::mma(acc, hopper::desc_sw128(a + k * 16),
                                    hopper::desc_sw128(b + k * 16), kt > 0 || k > 0);
        hopper::wgmma_commit();
        // Keep this k-step's batch queued on the tensor cores; the previous one is finished,
        // so its stage goes back to the producer.
        hopper::wgmma_wait<1>();
        if (kt > 0 && lane == 0) hopper::mbar_arrive(&empty[(it - 1) % STAGES]);
      }
      hopper::wgmma_wait<0>();
      hopper::fence_regs(acc);
      if (lane == 0) hopper::mbar_arrive(&empty[(it - 1) % STAGES]);

      // --- epilogue: alpha/beta, convert, predicated stores straight from the fragment -------
      // 64 KB of bf16 C per tile against 48 KB x KT of operand traffic: direct 32-bit stores
      // cost ~1-2% at K = 4096; the producer keeps loading the next tile meanwhile.
      hopper::store_acc<T, BN>(acc, p, m0 + cw * WG_M + warp * 16 + lane / 4,
                               n0 + 2 * (lane % 4), vec2_ok);
    }
  }
}

template <typename T>
const char* unsupported_t(const gemm::Problem<T>& p) {
  return hopper::tma_operand_problem(p.A, p.M, p.lda, p.B, p.N, p.ldb);
}

// G: tile rows per group of the tile order (GROUP_M by default; others only for measuring).
template <typename T, int G = GROUP_M>
cudaError_t launch_g(const gemm::Problem<T>& p, cudaStream_t stream) {
  CUtensorMap ta, tb;
  cudaError_t e = hopper::make_tmap_kmajor(&ta, p.A, p.M, p.K, p.lda, BM);  // A: [M][K]
  if (e != cudaSuccess) return e;
  e = hopper::make_tmap_kmajor(&tb, p.B, p.N, p.K, p.ldb, BN);              // B: [N][K]
  if (e != cudaSuccess) return e;
  e = cudaFuncSetAttribute(kernel<T, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
  if (e != cudaSuccess) return e;
  static int sms = 0;  // multiprocessor count of the current device, read once
  if (!sms) {
    int dev = 0;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess) return e;
    if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess) return e;
  }
  const int vec2_ok = p.ldc % 2 == 0 && reinterpret_cast<uintptr_t>(p.C) % 4 == 0;
  const int tiles = gemm::cdiv(p.M, BM) * gemm::cdiv(p.N, BN);
  kernel<T, G><<<min(tiles, sms), THREADS, SMEM_BYTES, stream>>>(ta, tb, p, vec2_ok);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_t(const gemm::Problem<T>& p, cudaStream_t stream) { return launch_g<T>(p, stream); }

const char* unsupported(const gemm::Problem<__half>& p) { return unsupported_t(p); }
const char* unsupported(const gemm::Problem<__nv_bfloat16>& p) { return unsupported_t(p); }
cudaError_t launch(const gemm::Problem<__half>& p, cudaStream_t s) { return launch_t(p, s); }
cudaError_t launch(const gemm::Problem<__nv_bfloat16>& p, cudaStream_t s) { return launch_t(p, s); }

}  // namespace s13_warp_specialized
