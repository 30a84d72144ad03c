// s09_tf32_wmma: TF32 tensor cores through WMMA
//
// Change: vs s08, the inner product leaves the FP32 pipes: each warp multiplies 16x16x8 TF32
//         fragments on the tensor cores (nvcuda::wmma, precision::tf32), loaded from padded
//         shared tiles that a 3-stage cp.async pipeline fills; B is read K-major (layout NT).
// Why:    H100 FP32 FFMA peaks at ~65 TFLOP/s (measured); TF32 tensor cores run ~6x that
//         (cuBLAS TF32 364). Feeding them: a 128x128x32 block tile loads (128+128)*32*4 B =
//         32 KiB per 2*128*128*32 = 1 MFLOP (32 FLOP/B from L2), and a 64x64 warp tile reads
//         (64+64)*8*4 B = 4 KiB of shared memory per 64x64x8 step = 64 KFLOP (16 FLOP/B), so
//         at 128 B/clk the shared-memory ceiling is 2048 FLOP/clk/SM, above the ~860 FLOP/clk/SM
//         (at ~1.6 GHz, 132 SMs) that 182 TFLOP/s (half of cuBLAS) needs. Rows padded by 4
//         floats (144 B) put the 8 rows a fragment load touches on 8 different bank quads.
//         NT: with B stored [N][K], both tiles are K-contiguous, so both move as 16 B cp.async
//         rows, and B fragments load col_major straight from them. What holds it near 30%:
//         a tf32 m16n8k8 runs as two HMMA.1684 (k = 4 each) in SASS, each k8 step issues
//         32 LDS.32 + 32 rounding adds per 64 HMMAs, and the barrier at the top of each K tile
//         idles every warp's tensor pipe at once.
// Expect: ~2.5x s08 at 4096^3 (~110 TFLOP/s, ~30-35% of cuBLAS TF32 at 4096^3 and 8192^3);
//         rel. error vs fp64 ~3e-4 (10-bit TF32 mantissas, inputs rounded to nearest)
// Limits: lda and ldb multiples of 4 and A, B 16-byte aligned (16-byte cp.async rows; for
//         contiguous tensors: K a multiple of 4), else ValueError; any M, N, K >= 1 otherwise
// Dtype:  tf32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NT
// Pair:   triton_kernels/s09_tf32_wmma.py
#include <mma.h>
#include <cstdint>
#include "common/gemm.cuh"
#include "common/cp_async.cuh"
#include "common/block_order.cuh"
#include "common/tc_epilogue.cuh"

namespace s09_tf32_wmma {

using namespace nvcuda;

// nvcc 13 lowers the tf32 load_matrix_sync builtin to *generic* loads (LD.E with 64-bit
// addresses, extra latency and registers) even from __shared__ arrays: unlike f16 it does not
// infer the state space. These issue the same PTX wmma.load with .shared stated, filling the
// fragment's registers in the order the builtin would.
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;
static_assert(FragA::num_elements == 4 && FragB::num_elements == 4, "tf32 fragments hold 4 registers");

// Both loaders also round each operand to the nearest TF32 (10-bit mantissa, ties away from
// zero, like cvt.rna): they add half a TF32 ulp (bit 12) to the raw bits, and the tensor core,
// which ignores the low 13 bits, completes the rounding by truncation. One integer add instead
// of cvt.rna's compare/add/select per element; finite values and infinities come out exactly
// as with cvt.rna (only a NaN whose payload sits in the low 13 bits would read as inf).
template <class Frag>
__device__ __forceinline__ void set_rounded(Frag& f, const uint32_t (&r)[4]) {
#pragma unroll
  for (int e = 0; e < 4; ++e) f.x[e] = __uint_as_float(r[e] + 0x1000u);
}
__device__ __forceinline__ void load_a_shared(FragA& f, const float* p, int ldm) {
  uint32_t r[4];
  asm volatile("wmma.load.a.sync.aligned.row.m16n16k8.shared.tf32 {%0,%1,%2,%3}, [%4], %5;\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(gemm::smem_u32(p)), "r"(ldm));
  set_rounded(f, r);
}
__device__ __forceinline__ void load_b_shared(FragB& f, const float* p, int ldm) {
  uint32_t r[4];
  asm volatile("wmma.load.b.sync.aligned.col.m16n16k8.shared.tf32 {%0,%1,%2,%3}, [%4], %5;\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(gemm::smem_u32(p)), "r"(ldm));
  set_rounded(f, r);
}

// Tile configuration. The default is the one launch() uses; other instantiations exist only so
// a tuning script can compare shapes without editing this file.
template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int GROUP_M_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;               // block tile of C / K step
  static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;     // warp grid in the block
  static constexpr int STAGES = STAGES_;                           // cp.async pipeline depth
  static constexpr int GROUP_M = GROUP_M_;                         // tile rows per L2 group
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;       // warp tile of C
  static constexpr int FM = WM / 16, FN = WN / 16;                 // 16x16 accumulators per warp
  static constexpr int LDS = BK + 4;                               // padded shared row (floats)
  static constexpr int CPR = BK / 4;                               // 16-byte chunks per tile row
  static constexpr int STAGE_FLOATS = (BM + BN) * LDS;             // As [BM][LDS] + Bs [BN][LDS]
  static constexpr int PIPE_BYTES = STAGES * STAGE_FLOATS * 4;
  static constexpr int EPI_BYTES = WARPS_M * WARPS_N * 16 * (WN + 4) * 4;  // per-warp slabs
  static constexpr int SMEM_BYTES = PIPE_BYTES > EPI_BYTES ? PIPE_BYTES : EPI_BYTES;

  static_assert(BM % (16 * WARPS_M) == 0 && BN % (16 * WARPS_N) == 0,
                "each warp tile must be whole 16x16 WMMA fragments");
  static_assert(BK % 8 == 0, "the K step must be whole 16x16x8 TF32 fragments");
  static_assert(LDS % 4 == 0, "WMMA leading dimensions must be multiples of 16 bytes");
  static_assert((BM * CPR) % THREADS == 0 && (BN * CPR) % THREADS == 0,
                "every thread must issue the same number of 16-byte copies per tile");
  static_assert(STAGES >= 2, "a pipeline needs at least two stages");
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per block is at most 227 KiB on H100");
};

// 128x128x32, 4 warps of 64x64, 3 stages: 3 * 256 * 36 * 4 B = 108 KiB, so two blocks fit per SM
// (8 warps); 16 accumulator fragments = 128 fp32 registers per thread.
using Default = Config<128, 128, 32, 2, 2, 3, 8>;

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) kernel(const gemm::Problem<float> p) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, LDS = Cfg::LDS, CPR = Cfg::CPR;
  constexpr int FM = Cfg::FM, FN = Cfg::FN, STAGES = Cfg::STAGES, THREADS = Cfg::THREADS;
  extern __shared__ float4 smem4[];  // float4: 16-byte alignment for cp.async and WMMA
  float* smem = reinterpret_cast<float*>(smem4);

  // --- tile assignment: grouped order of 128x128 C tiles; warp (wm, wn) owns a 64x64 piece --
  const int tiles_m = gemm::cdiv(p.M, BM), tiles_n = gemm::cdiv(p.N, BN);
  const gemm::TileCoord tile = gemm::grouped_tile(blockIdx.x, tiles_m, tiles_n, Cfg::GROUP_M);
  const int m0 = tile.m * BM, n0 = tile.n * BN;
  const int warp = threadIdx.x / 32;
  const int wm = warp / Cfg::WARPS_N, wn = warp % Cfg::WARPS_N;

  // --- operand staging: K-tile kt -> stage s. As: [BM][LDS] rows of A, Bs: [BN][LDS] rows of
  // the [N][K] B; both K-contiguous, copied as 16-byte chunks (4 floats). Chunks past M, N or
  // K are zero-filled (src size 0..16 bytes), so the tensor cores see exact zeros in the tails.
  auto load_stage = [&](int s, int kt) {
    float* As = smem + s * Cfg::STAGE_FLOATS;
    float* Bs = As + BM * LDS;
    const int k0 = kt * BK;
#pragma unroll
    for (int i = 0; i < BM * CPR / THREADS; ++i) {
      const int id = threadIdx.x + i * THREADS;
      const int r = id / CPR, k = k0 + (id % CPR) * 4;  // a warp covers 4 full 128 B rows
      const int bytes = m0 + r < p.M ? max(0, min(16, 4 * (p.K - k))) : 0;
      gemm::cp_async_16(As + r * LDS + k - k0, bytes ? p.A + (m0 + r) * p.lda + k : p.A, bytes);
    }
#pragma unroll
    for (int i = 0; i < BN * CPR / THREADS; ++i) {
      const int id = threadIdx.x + i * THREADS;
      const int r = id / CPR, k = k0 + (id % CPR) * 4;
      const int bytes = n0 + r < p.N ? max(0, min(16, 4 * (p.K - k))) : 0;
      gemm::cp_async_16(Bs + r * LDS + k - k0, bytes ? p.B + (n0 + r) * p.ldb + k : p.B, bytes);
    }
  };

  const int KT = gemm::cdiv(p.K, BK);
  // Prologue: STAGES-1 tiles in flight before the first multiply. One commit per stage, even
  // when empty, so wait<STAGES-2> below always means "tile kt has landed".
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_stage(s, s);
    gemm::cp_async_commit();
  }

  FragC acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  // --- loop over K: wait for tile kt, refill the slot freed last iteration, multiply ---------
  int read_s = 0, write_s = STAGES - 1;
  for (int kt = 0; kt < KT; ++kt) {
    gemm::cp_async_wait<STAGES - 2>();  // this thread's copies of tile kt are done ...
    __syncthreads();                    // ... and everyone's; all warps also left tile kt-1
    if (kt + STAGES - 1 < KT) load_stage(write_s, kt + STAGES - 1);
    gemm::cp_async_commit();
    write_s = write_s + 1 == STAGES ? 0 : write_s + 1;

    const float* As = smem + read_s * Cfg::STAGE_FLOATS + wm * Cfg::WM * LDS;
    const float* Bs = smem + read_s * Cfg::STAGE_FLOATS + BM * LDS + wn * Cfg::WN * LDS;
    read_s = read_s + 1 == STAGES ? 0 : read_s + 1;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
      // A fragment: 16 rows x 8 k, row-major in As. B fragment: 8 k x 16 columns; Bs holds B
      // as [n][k], which is exactly WMMA's col_major view of the (k, n) fragment.
      FragA a[FM];
      FragB b[FN];
#pragma unroll
      for (int i = 0; i < FM; ++i)
        load_a_shared(a[i], As + i * 16 * LDS + kk, LDS);
#pragma unroll
      for (int j = 0; j < FN; ++j)
        load_b_shared(b[j], Bs + j * 16 * LDS + kk, LDS);
      // FM*FN = 16 fragment products per 8 loaded fragments: each A fragment is reused FN times.
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }

  // --- epilogue: the pipeline's shared memory becomes per-warp staging for the fragments ----
  gemm::cp_async_wait<0>();  // only empty groups can remain, but make it explicit
  __syncthreads();           // every warp has finished reading the last tile
  float* stage = smem + warp * 16 * (Cfg::WN + 4);
  gemm::wmma_store_tile<FM, FN>(p, acc, stage, m0 + wm * Cfg::WM, n0 + wn * Cfg::WN);
}

template <class Cfg>
cudaError_t launch_cfg(const gemm::Problem<float>& p, cudaStream_t stream) {
  const auto k = kernel<Cfg>;
  // Over 48 KiB of dynamic shared memory needs an explicit opt-in.
  cudaError_t err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::SMEM_BYTES);
  if (err != cudaSuccess) return err;
  const int blocks = gemm::cdiv(p.M, Cfg::BM) * gemm::cdiv(p.N, Cfg::BN);  // 1-D: grouped order
  k<<<blocks, Cfg::THREADS, Cfg::SMEM_BYTES, stream>>>(p);
  return cudaGetLastError();
}

const char* unsupported(const gemm::Problem<float>& p) { return gemm::unsupported_16byte_rows(p); }

cudaError_t launch(const gemm::Problem<float>& p, cudaStream_t stream) {
  return launch_cfg<Default>(p, stream);
}

}  // namespace s09_tf32_wmma
