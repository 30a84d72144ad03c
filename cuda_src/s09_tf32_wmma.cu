// s09_tf32_wmma: TF32 tensor cores through WMMA fragments
//
// Change: vs s08, TF32 tensor cores: 16x16x8 WMMA fragments, loaded with ldmatrix from a 4-stage
//         cp.async ring, each multiplied as two mma.sync m16n8k8; B is read K-major (layout NT).
// Why:    H100 FP32 FFMA peaks at ~65 TFLOP/s (measured); cuBLAS TF32 (wgmma) reaches ~340-400.
//         nvcc lowers tf32 wmma::mma_sync to four HMMA.1684 (k = 4), ~244 TFLOP/s in register-only
//         chains; two HMMA.1688 (k = 8) on the same fragments reach ~317. A 128x256x32 tile loads
//         48 KiB per 2 MFLOP (43 FLOP/B from L2); one LDSM.x4 per 16x8 fragment quarter, double-
//         buffered across k8 steps; operands go in as raw fp32 bits (TF32 truncation).
// Expect: ~53% of cuBLAS TF32 (NT) at 4096^3 and 8192^3, ~1.3x wmma::mma_sync (H100: 200-219 TFLOP/s)
// Limits: lda and ldb multiples of 4 and A, B 16-byte aligned (16-byte cp.async rows; for
//         contiguous tensors: K a multiple of 4), and a GPU that gives a block 216 KiB of shared
//         memory (sm_90 class), else ValueError; any M, N, K >= 1 otherwise
// Dtype:  tf32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NT
// Pair:   triton_kernels/s09_tf32_wmma.py
// Log:    docs/stages/s09_tf32_wmma.md
#include <mma.h>
#include <cstdint>
#include "common/gemm.cuh"
#include "common/cp_async.cuh"
#include "common/ldmatrix.cuh"
#include "common/block_order.cuh"
#include "common/tc_epilogue.cuh"
#include "common/tc_tiling.cuh"

namespace s09_tf32_wmma {

using namespace nvcuda;

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;
static_assert(FragA::num_elements == 4 && FragB::num_elements == 4, "tf32 fragments hold 4 registers");

// Fragment loads. nvcc lowers the tf32 load_matrix_sync builtin to 4 scalar loads per fragment
// (generic ones, even from __shared__ arrays). Its register order, read from the SASS of
// wmma.load.{a.row,b.col}.m16n16k8.shared.tf32 and checked on the H100 against fp64, is with
// g = lane / 4, t = lane % 4:
//   A (16 rows x 8 k):  x[0..3] = (row g, k t), (g+8, t), (g, t+4), (g+8, t+4)
//   B (8 k x 16 cols), stored [n][k]: x[0..3] = (n g, k t), (g, t+4), (g+8, t), (g+8, t+4)
// ldmatrix.x4 on 32-bit data delivers exactly that: each "8x8 b16" matrix is 8 rows x 4
// floats (16 B per row), lane l gets row l / 4, float l % 4 of each, and lanes 8q..8q+7 give
// the row addresses of matrix q. So one LDSM.x4 fills a fragment if matrix q is the q-th
// 8 x 4 quarter in that order. The 4 registers land in consecutive registers, the pairs
// HMMA.1688 takes as its A operand, so no moves are needed either.
__device__ __forceinline__ void ldsm_x4(float (&x)[4], const float* p) {
  uint32_t r[4];
  gemm::ldmatrix_x4(r, gemm::smem_u32(p));  // common/ldmatrix.cuh
#pragma unroll
  for (int e = 0; e < 4; ++e) x[e] = __uint_as_float(r[e]);
}

// The multiply. wmma::mma_sync on these fragments compiles (nvcc 13, sm_80 to sm_90a) to four
// HMMA.1684 (m16n8k4): in its SASS, accumulator registers x[0..3] are the n-half 0..7 and
// x[4..7] the n-half 8..15, in mma.sync's C layout ((g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1));
// A pairs x[0..1] (k 0-3) and x[2..3] (k 4-7) go with B registers x[0] / x[1] (half 0) and x[2]
// / x[3] (half 1). Those are exactly the operands of mma.sync.m16n8k8.tf32, whose A fragment is
// (g, t), (g+8, t), (g, t+4), (g+8, t+4) and B fragment (k t, n g), (k t+4, n g). So the same
// fragments feed two HMMA.1688 (k = 8) instead: half the tensor-core instructions for the same
// FLOPs, and the k8 form runs at ~317 TFLOP/s in register-only chains on the H100 against ~244
// for WMMA's lowering.
__device__ __forceinline__ void mma_tf32(FragC& c, const FragA& a, const FragB& b) {
  const uint32_t* ua = reinterpret_cast<const uint32_t*>(a.x);
  const uint32_t* ub = reinterpret_cast<const uint32_t*>(b.x);
#pragma unroll
  for (int h = 0; h < 2; ++h)
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c.x[4 * h]), "+f"(c.x[4 * h + 1]), "+f"(c.x[4 * h + 2]), "+f"(c.x[4 * h + 3])
        : "r"(ua[0]), "r"(ua[1]), "r"(ua[2]), "r"(ua[3]), "r"(ub[2 * h]), "r"(ub[2 * h + 1]));
}

// Tile configuration: the block / warp grid of common/tc_tiling.cuh (BM, BN, BK, WARPS_M,
// WARPS_N, STAGES, GROUP_M, THREADS, WM, WN) plus this stage's fragments and padded staging.
// The default is the one launch() uses; other instantiations exist only so a tuning script can
// compare shapes without editing this file.
template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int GROUP_M_>
struct Config : gemm::WarpGrid<BM_, BN_, BK_, WARPS_M_, WARPS_N_, STAGES_, GROUP_M_> {
  using G = gemm::WarpGrid<BM_, BN_, BK_, WARPS_M_, WARPS_N_, STAGES_, GROUP_M_>;
  static constexpr int FM = G::WM / 16, FN = G::WN / 16;           // 16x16 accumulators per warp
  static constexpr int KSTEPS = G::BK / 8;                         // k8 steps per K tile
  static constexpr int LDS = G::BK + 4;                            // padded shared row (floats)
  static constexpr int CPR = G::BK / 4;                            // 16-byte chunks per tile row
  static constexpr int ROWSTEP = G::THREADS / CPR;                 // rows one pass of copies covers
  static constexpr int STAGE_FLOATS = (G::BM + G::BN) * LDS;       // As [BM][LDS] + Bs [BN][LDS]
  static constexpr int PIPE_BYTES = G::STAGES * STAGE_FLOATS * 4;
  static constexpr int EPI_BYTES = G::WARPS_M * G::WARPS_N * 16 * (G::WN + 4) * 4;  // per-warp slabs
  static constexpr int SMEM_BYTES = PIPE_BYTES > EPI_BYTES ? PIPE_BYTES : EPI_BYTES;

  static_assert(G::BM % (16 * G::WARPS_M) == 0 && G::BN % (16 * G::WARPS_N) == 0,
                "each warp tile must be whole 16x16 WMMA fragments");
  static_assert(G::BK % 16 == 0, "a K tile must be an even number of 8-deep steps (2 fragment buffers)");
  static_assert(LDS % 32 == 4, "rows 4 banks apart: the 8 rows of an ldmatrix quarter hit 8 bank quads");
  static_assert(G::THREADS % CPR == 0 && G::BM % ROWSTEP == 0 && G::BN % ROWSTEP == 0,
                "every thread must issue the same number of 16-byte copies per tile");
  static_assert(G::STAGES >= 3, "copies into tile kt-1's slot overlap the wait for tile kt+1");
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per block is at most 227 KiB on H100");
};

// 128x256x32, 8 warps of 64x64 (2 x 4), 4 stages: 4 * 384 * 36 * 4 B = 216 KiB, one block per
// SM; 16 accumulator fragments = 128 fp32 registers per thread, 2 x 32 for fragments. Fastest
// of the tiles measured (docs/stages/s09_tf32_wmma.md).
using Default = Config<128, 256, 32, 2, 4, 4, 16>;

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1) kernel(const gemm::Problem<float> p) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, LDS = Cfg::LDS, CPR = Cfg::CPR;
  constexpr int FM = Cfg::FM, FN = Cfg::FN, STAGES = Cfg::STAGES, KSTEPS = Cfg::KSTEPS;
  constexpr int ROWSTEP = Cfg::ROWSTEP;
  extern __shared__ float4 smem4[];  // float4: 16-byte alignment for cp.async and ldmatrix
  float* smem = reinterpret_cast<float*>(smem4);

  // --- tile assignment: grouped order of 128x256 C tiles; warp (wm, wn) owns a 64x64 piece --
  const int tiles_m = gemm::cdiv(p.M, BM), tiles_n = gemm::cdiv(p.N, BN);
  const gemm::TileCoord tile = gemm::grouped_tile(blockIdx.x, tiles_m, tiles_n, Cfg::GROUP_M);
  const int m0 = tile.m * BM, n0 = tile.n * BN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / Cfg::WARPS_N, wn = warp % Cfg::WARPS_N;

  // --- operand staging: K-tile kt -> stage s. As: [BM][LDS] rows of A, Bs: [BN][LDS] rows of
  // the [N][K] B; both K-contiguous, copied as 16-byte chunks (4 floats): thread -> chunk
  // column c4 of rows r0, r0 + ROWSTEP, ... (a warp covers 4 full 128 B rows). One running
  // source offset per operand, so the copies do not pin a 64-bit address per chunk in
  // registers. Chunks past M, N or K are zero-filled (src size 0..16 bytes), so the tensor
  // cores see exact zeros in the tails.
  const int c4 = (threadIdx.x % CPR) * 4, r0 = threadIdx.x / CPR;
  const int a_rows = p.M - m0 - r0, b_rows = p.N - n0 - r0;  // copy i is in range if i*ROWSTEP < rows
  const int a_step = ROWSTEP * p.lda, b_step = ROWSTEP * p.ldb;
  const float* gA = p.A + (m0 + r0) * p.lda + c4;
  const float* gB = p.B + (n0 + r0) * p.ldb + c4;
  auto load_stage = [&](int s, int kt) {
    float* As = smem + s * Cfg::STAGE_FLOATS + r0 * LDS + c4;
    float* Bs = As + BM * LDS;
    const int k0 = kt * BK;
    const int kbytes = max(0, min(16, 4 * (p.K - k0 - c4)));
#pragma unroll
    for (int i = 0; i < BM / ROWSTEP; ++i) {
      const int bytes = i * ROWSTEP < a_rows ? kbytes : 0;
      gemm::cp_async_16(As + i * ROWSTEP * LDS, bytes ? gA + i * a_step + k0 : p.A, bytes);
    }
#pragma unroll
    for (int i = 0; i < BN / ROWSTEP; ++i) {
      const int bytes = i * ROWSTEP < b_rows ? kbytes : 0;
      gemm::cp_async_16(Bs + i * ROWSTEP * LDS, bytes ? gB + i * b_step + k0 : p.B, bytes);
    }
  };

  const int KT = gemm::cdiv(p.K, BK);
  // Prologue: STAGES-1 tiles in flight before the first multiply. One commit per stage, even
  // when empty, so wait<STAGES-2> below always means "the next tile has landed".
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

  // ldmatrix row addresses of this lane (matrix q = lane / 8, row lane % 8 of it), in the
  // fragment orders above. A quarters: (rows 0-7 | 8-15) x (k 0-3 | 4-7), rows first;
  // B quarters: k first. 8 rows 144 B apart start on 8 different bank quads: conflict-free.
  const int q = lane / 8, r8 = lane % 8;
  const int a_off = (wm * Cfg::WM + r8 + 8 * (q & 1)) * LDS + 4 * (q >> 1);
  const int b_off = BM * LDS + (wn * Cfg::WN + r8 + 8 * (q >> 1)) * LDS + 4 * (q & 1);
  FragA a[2][FM];  // two fragment buffers: step ks multiplies buffer ks % 2 ...
  FragB b[2][FN];  // ... while step ks + 1's fragments load into the other
  auto load_frags = [&](int buf, const float* st, int kk) {
#pragma unroll
    for (int i = 0; i < FM; ++i) ldsm_x4(a[buf][i].x, st + a_off + i * 16 * LDS + kk);
#pragma unroll
    for (int j = 0; j < FN; ++j) ldsm_x4(b[buf][j].x, st + b_off + j * 16 * LDS + kk);
  };

  // --- loop over K: per k8 step, load the next step's fragments, then 32 products ----------
  gemm::cp_async_wait<STAGES - 2>();  // tile 0 has landed (this thread's copies) ...
  __syncthreads();                    // ... and everyone's
  int read_s = 0, write_s = STAGES - 1;
  const float* cur = smem;            // stage being multiplied
  load_frags(0, cur, 0);
  for (int kt = 0; kt < KT; ++kt) {
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      if (ks == KSTEPS - 1) {
        // Before the last step's products: tile kt+1 must have landed for the prefetch below.
        // The barrier also certifies that every warp has finished reading tile kt (its last
        // read was the prefetch at step KSTEPS-2), whose slot step 0 of tile kt+1 refills.
        gemm::cp_async_wait<STAGES - 2>();
        __syncthreads();
        read_s = read_s + 1 == STAGES ? 0 : read_s + 1;
      }
      const float* nxt = smem + read_s * Cfg::STAGE_FLOATS;
      // Fragments of step ks+1: this tile's, or at the last step the next tile's first.
      if (ks < KSTEPS - 1 || kt + 1 < KT)
        load_frags((ks + 1) % 2, ks == KSTEPS - 1 ? nxt : cur, ((ks + 1) % KSTEPS) * 8);
      if (ks == 0) {
        // Refill the slot of tile kt-1 (free since the previous tile's last-step barrier).
        if (kt + STAGES - 1 < KT) load_stage(write_s, kt + STAGES - 1);
        gemm::cp_async_commit();
        write_s = write_s + 1 == STAGES ? 0 : write_s + 1;
      }
      // FM*FN = 16 fragment products per 8 loaded fragments: each A fragment is reused FN times.
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) mma_tf32(acc[i][j], a[ks % 2][i], b[ks % 2][j]);
      if (ks == KSTEPS - 1) cur = nxt;
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
  return gemm::launch_tiles<Cfg>(kernel<Cfg>, p, stream);  // 1-D grid in grouped order
}

// The 4-stage 128x256x32 ring (216 KiB) fits only sm_90-class GPUs (227 KiB per block); on
// sm_80 (163 KiB) and sm_86/sm_89 (99 KiB) the stage refuses instead of failing to launch.
const char* unsupported(const gemm::Problem<float>& p) {
  const char* why = gemm::unsupported_16byte_rows(p);
  return why ? why : gemm::unsupported_shared_memory(
      Default::SMEM_BYTES, "this GPU gives a block less shared memory than s09's 128x256x32 4-stage "
                           "tiles need (216 KiB: sm_90 class GPUs have it, sm_80/sm_86/sm_89 do not)");
}

cudaError_t launch(const gemm::Problem<float>& p, cudaStream_t stream) {
  return launch_cfg<Default>(p, stream);
}

}  // namespace s09_tf32_wmma
