// s13_warp_specialized: persistent, warp-specialised producer/consumer warpgroups
//
// Change: vs s12, one persistent CTA per SM; a producer warpgroup (setmaxnreg 40) only issues TMA,
//         two consumers (232) only wgmma; C leaves through swizzled smem staging and TMA stores.
// Why:    s12 idles the tensor cores at every tile boundary: barrier setup and first TMA round trip,
//         then an epilogue of 64 STG.32 per thread (~8 L1 wavefronts each, ~4K cycles), a few % of a
//         64-k-step tile each. Here the ring runs on across tiles (the next tile loads during the
//         epilogue), 132 CTAs replace 512-2048, and the epilogue is 64 conflict-free STS.32 + 4 TMA
//         stores. Registers: 128*40 + 256*232 = 64512 <= 65536; smem 4 x 48 KB ring + 32 KB C.
// Expect: ~100% of cuBLAS FP16/BF16 (NT) at 4096^3 and 8192^3 (97-104% measured), ~1.1x s12
// Limits: A and B 16-byte aligned and lda, ldb multiples of 8 elements (TMA: 16-byte aligned
//         base, 16-byte row strides; else ValueError naming the argument); any M, N, K >= 1 and
//         any ldc (tails: TMA zero fill in; out by TMA stores, clipped at M and N, when beta == 0
//         and C is 16-byte aligned with ldc a multiple of 8, else by predicated register stores)
// Dtype:  fp16, bf16 in / fp32 acc / same as in out        Arch: sm_90a      Layout: NT, NN, TN
// Pair:   triton_kernels/s13_warp_specialized.py
// Log:    docs/stages/s13_warp_specialized.md
#include "common/gemm.cuh"
#include "common/hopper.cuh"
#include "common/layouts.cuh"

// Measured variants (GROUP_M, the register epilogue, 2x1 clusters with TMA multicast) and the
// error vs fp64: docs/stages/s13_warp_specialized.md.

namespace s13_warp_specialized {

constexpr int BM = 128;              // CTA tile rows: two consumer warpgroups x 64 (wgmma M)
constexpr int BN = 256;              // CTA tile cols: one m64n256k16 per consumer per k16 step
constexpr int BK = 64;               // 64 x 2 B = one 128-byte swizzle line per tile row
constexpr int STAGES = 4;            // ring depth: 4 x 48 KB = 192 KB of the 227 KB
constexpr int CONSUMERS = 2;         // wgmma warpgroups; warpgroup 0 is the producer
constexpr int THREADS = (CONSUMERS + 1) * 128;
constexpr int GROUP_M = 16;          // tile rows per group of the persistent tile order
                                     // (16 vs 8 vs 4: see the log); launch_g<T, L, G> takes
                                     // other values for checks
constexpr int PRODUCER_REGS = 40;    // setmaxnreg targets: 128*40 + 256*232 = 64512 <= 64K
constexpr int CONSUMER_REGS = 232;
constexpr int WG_M = BM / CONSUMERS;
constexpr int A_TILE = BM * BK;      // elements per stage of A
constexpr int B_TILE = BN * BK;      // elements per stage of B
constexpr int STAGE_BYTES = (A_TILE + B_TILE) * 2;
constexpr int C_BOX = 64;            // epilogue store box: 64 x 64 = one 128-byte swizzle line per row
constexpr int C_CHUNK = WG_M * C_BOX;  // elements per C staging buffer (8 KB)
constexpr int C_BUFS = 2;            // per consumer: fill one while the copy engine reads the other
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + CONSUMERS * C_BUFS * C_CHUNK * 2 + 1024;
                                     // ring + C staging (32 KB) + room to align to 1024 B
static_assert(WG_M == 64, "each consumer warpgroup covers exactly one wgmma M of 64 rows");
static_assert(BK * 2 == 128, "a tile row must be exactly one 128-byte swizzle line (BK = 64)");
static_assert((A_TILE * 2) % 1024 == 0 && (B_TILE * 2) % 1024 == 0,
              "every tile must start on a 1024-byte swizzle atom");
static_assert(BM <= 256 && BN <= 256, "a TMA box dimension is at most 256 elements");
static_assert(WG_M % 64 == 0 && BN % 64 == 0, "MN-major tiles (A in TN, B in NN/TN) are whole 64-wide boxes");
static_assert(SMEM_BYTES <= 227 * 1024, "ring + C staging must fit in 227 KB of shared memory");
static_assert(BN % C_BOX == 0 && C_BOX * 2 == 128,
              "the epilogue stores whole 64-column boxes, one 128-byte swizzle line per row");
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

template <typename T, gemm::Layout L, int G>
__global__ void __launch_bounds__(THREADS, 1)
kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
       const __grid_constant__ CUtensorMap tmap_c, gemm::Problem<T> p, int tma_store, int vec2_ok) {
  // Shared memory: [STAGES] A tiles of BM x BK and [STAGES] B tiles of BN x BK, 1024-byte
  // aligned for the 128B swizzle; the barriers live in static shared memory. Each tile keeps
  // its operand's major order (common/hopper.cuh): K-major (A in NN/NT, B in NT) or MN-major
  // 64-wide boxes (B in NN/TN, A in TN), read by wgmma with tnspA / tnspB set.
  constexpr bool A_MN = gemm::Majors<L>::A_MN, B_MN = gemm::Majors<L>::B_MN;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  T* sA = reinterpret_cast<T*>(smem);
  T* sB = reinterpret_cast<T*>(smem + STAGES * A_TILE * 2);
  T* sC = reinterpret_cast<T*>(smem + STAGES * STAGE_BYTES);  // [CONSUMERS][C_BUFS][64][64]
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
    if (tma_store) hopper::tma_prefetch_desc(&tmap_c);
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
          hopper::tma_load_operand<A_MN, BM>(sA + s * A_TILE, &tmap_a, &full[s], kt * BK, m0);
          hopper::tma_load_operand<B_MN, BN>(sB + s * B_TILE, &tmap_b, &full[s], kt * BK, n0);
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
        const T* a = sA + s * A_TILE + cw * WG_M * BK;  // rows cw*64.. or box cw: same offset
        const T* b = sB + s * B_TILE;
        hopper::wgmma_fence();
#pragma unroll
        for (int k = 0; k < BK / 16; ++k)  // K-major: +32 B inside the swizzled line; MN-major: +16 lines
          hopper::Wgmma<T, BN, A_MN, B_MN>::mma(acc, hopper::desc_k16<A_MN>(a, k),
                                                hopper::desc_k16<B_MN>(b, k), kt > 0 || k > 0);
        hopper::wgmma_commit();
        // Keep this k-step's batch queued on the tensor cores; the previous one is finished,
        // so its stage goes back to the producer.
        hopper::wgmma_wait<1>();
        if (kt > 0 && lane == 0) hopper::mbar_arrive(&empty[(it - 1) % STAGES]);
      }
      hopper::wgmma_wait<0>();
      hopper::fence_regs(acc);
      if (lane == 0) hopper::mbar_arrive(&empty[(it - 1) % STAGES]);

      // --- epilogue: alpha, convert, stage in shared memory, TMA store -------------------
      // Storing 64 KB of C per tile straight from the fragment takes 64 STG.32 per thread whose
      // warp-wide footprint is 8 rows x 16 B: ~8 L1 wavefronts each, ~4K cycles per tile with
      // the tensor cores idle (~5% of a 64-k-step tile). Instead each consumer writes its 64 x
      // 256 half in four 64 x 64 boxes into a swizzled staging buffer (one wavefront per warp
      // store: the 8 rows of a store land in 8 different 16-byte chunks) and one thread hands
      // each box to the copy engine, which writes it out (and clips at M and N) while the
      // warpgroup goes on to the next tile. Two buffers per consumer: box q is filled while box
      // q-1 is still being read by the copy engine.
      if (tma_store) {
        const bool issuer = tid % 128 == 0;
        const uint32_t buf0 = hopper::smem_u32(sC + cw * C_BUFS * C_CHUNK);
#pragma unroll
        for (int q = 0; q < BN / C_BOX; ++q) {
          const uint32_t buf = buf0 + (q % C_BUFS) * C_CHUNK * 2;
          // The store that last read this buffer (two boxes ago, maybe the previous tile's)
          // must be done reading it before anyone overwrites it.
          if (issuer) hopper::bulk_wait_read<C_BUFS - 1>();
          hopper::named_bar_sync(1 + cw, 128);
#pragma unroll
          for (int jj = 0; jj < C_BOX / 8; ++jj) {
            const int j = q * (C_BOX / 8) + jj;  // 8-column group of the fragment
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int r = warp * 16 + lane / 4 + 8 * h;  // row in the 64-row box; r % 8 = lane / 4
              const uint32_t off = r * 128 + ((jj ^ (r % 8)) * 16) + 4 * (lane % 4);  // SW128
              hopper::st_shared_u32(buf + off, hopper::Cvt<T>::bits(p.alpha * acc[4 * j + 2 * h],
                                                                    p.alpha * acc[4 * j + 2 * h + 1]));
            }
          }
          hopper::fence_proxy_async_smem();        // the copy engine must see these stores
          hopper::named_bar_sync(1 + cw, 128);
          if (issuer) {
            hopper::tma_store_2d(&tmap_c, sC + cw * C_BUFS * C_CHUNK + (q % C_BUFS) * C_CHUNK,
                                 n0 + q * C_BOX, m0 + cw * WG_M);
            hopper::bulk_commit();
          }
        }
      } else {
        // beta != 0 (C is read) or C not TMA-able (unaligned base, ldc not a multiple of 8):
        // predicated stores straight from the fragment.
        hopper::store_acc<T, BN>(acc, p, m0 + cw * WG_M + warp * 16 + lane / 4,
                                 n0 + 2 * (lane % 4), vec2_ok);
      }
    }
    // Outstanding TMA stores read this CTA's shared memory: they must have read it before the
    // CTA exits; their global writes complete with the grid (.read: no wait for the write-back).
    if (tma_store && tid % 128 == 0) hopper::bulk_wait_read<0>();
  }
}

template <typename T>
const char* unsupported_t(const gemm::Problem<T>& p) {
  return hopper::tma_operand_problem(p);  // per layout: the strided dimension of each operand
}

// G: tile rows per group of the tile order (GROUP_M by default; others only for measuring).
template <typename T, gemm::Layout L, int G = GROUP_M>
cudaError_t launch_g(const gemm::Problem<T>& p, cudaStream_t stream) {
  CUtensorMap ta, tb;
  cudaError_t e = hopper::make_tmap_operand(&ta, p.A, gemm::Majors<L>::A_MN, p.M, p.K, p.lda, BM);
  if (e != cudaSuccess) return e;
  e = hopper::make_tmap_operand(&tb, p.B, gemm::Majors<L>::B_MN, p.N, p.K, p.ldb, BN);
  if (e != cudaSuccess) return e;
  // C through TMA stores when the epilogue only writes it (beta == 0) and TMA can address it
  // (16-byte aligned base, 16-byte row stride); else the register epilogue, and the kernel
  // never touches the (zeroed) map.
  const int tma_store = p.beta == 0.f && reinterpret_cast<uintptr_t>(p.C) % 16 == 0 &&
                        (p.M == 1 || p.ldc % 8 == 0);
  CUtensorMap tc = {};
  if (tma_store && (e = hopper::make_tmap_kmajor(&tc, p.C, p.M, p.N, p.ldc, WG_M)) != cudaSuccess)
    return e;                                                               // C: [M][N], 64x64 boxes
  e = cudaFuncSetAttribute(kernel<T, L, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
  if (e != cudaSuccess) return e;
  int dev = 0;
  if ((e = cudaGetDevice(&dev)) != cudaSuccess) return e;
  const int sms = hopper::sm_count(dev);  // of the launching GPU
  if (!sms) return cudaErrorInvalidDevice;
  const int vec2_ok = p.ldc % 2 == 0 && reinterpret_cast<uintptr_t>(p.C) % 4 == 0;
  const int tiles = gemm::cdiv(p.M, BM) * gemm::cdiv(p.N, BN);
  kernel<T, L, G><<<min(tiles, sms), THREADS, SMEM_BYTES, stream>>>(ta, tb, tc, p, tma_store, vec2_ok);
  return cudaGetLastError();
}

// One instantiation per layout (common/layouts.cuh): NT's kernel is the code it always was.
template <typename T>
cudaError_t launch_t(const gemm::Problem<T>& p, cudaStream_t stream) {
  return gemm::with_layout(p.layout, [&](auto l) { return launch_g<T, decltype(l)::value>(p, stream); });
}

const char* unsupported(const gemm::Problem<__half>& p) { return unsupported_t(p); }
const char* unsupported(const gemm::Problem<__nv_bfloat16>& p) { return unsupported_t(p); }
cudaError_t launch(const gemm::Problem<__half>& p, cudaStream_t s) { return launch_t(p, s); }
cudaError_t launch(const gemm::Problem<__nv_bfloat16>& p, cudaStream_t s) { return launch_t(p, s); }

}  // namespace s13_warp_specialized
