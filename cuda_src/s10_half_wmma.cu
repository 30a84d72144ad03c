// s10_half_wmma: FP16 / BF16 tensor cores through WMMA, fp32 accumulate
//
// Change: vs s09, the operands are 16-bit (fp16 or bf16, one template) and the fragments are
//         16x16x16; C is written in the input's type.
// Why:    16-bit operands double the tensor-core rate over TF32 (H100 dense: ~990 vs ~495 TFLOP/s)
//         and halve the bytes: a 128x128x32 tile loads 16 KiB per 1 MFLOP (64 FLOP/B from L2), a
//         64x64 warp tile reads 4 KiB of shared memory per 128 KFLOP (32 FLOP/B, 2x s09). Rows padded
//         by 8 elements (16 B) put the 8 rows of an ldmatrix phase on 8 different bank groups. fp32
//         accumulation keeps the K-sum exact to ~1e-6; only the final store rounds.
// Expect: ~40-43% of cuBLAS FP16/BF16 at 4096^3 and 8192^3 (~280-320 TFLOP/s; ~1.4x s09 at 7417859)
// Limits: lda and ldb multiples of 8 and A, B 16-byte aligned (16-byte cp.async rows along each
//         operand's contiguous dimension: for contiguous tensors K and N in NN, K in NT, M and N
//         in TN multiples of 8), else ValueError; any M, N, K >= 1 otherwise
// Dtype:  fp16, bf16 in / fp32 acc / same as in out        Arch: sm_80+      Layout: NN, NT, TN
// Pair:   triton_kernels/s10_half_wmma.py
// Log:    docs/stages/s10_half_wmma.md
#include <mma.h>
#include <cstdint>
#include <type_traits>
#include "common/gemm.cuh"
#include "common/cp_async.cuh"
#include "common/block_order.cuh"
#include "common/tc_epilogue.cuh"
#include "common/tc_tiling.cuh"
#include "common/layouts.cuh"

namespace s10_half_wmma {

using namespace nvcuda;

// Fragment loads from shared memory. For fp16, load_matrix_sync lowers to LDSM (ldmatrix).
// For bf16, nvcc 13 does not infer the .shared state space of the builtin and emits generic
// loads (LD.E, 64-bit addresses) plus MOVM transposes instead; the bf16 overloads issue the
// same PTX wmma.load with .shared stated (ptxas then emits LDSM), writing the fragment's 4
// registers in the order the builtin would. One overload per operand and fragment layout:
// row_major for a K-major A / N-major B tile, col_major for an M-major A / K-major B tile.
template <class Frag>
__device__ __forceinline__ void load_shared(Frag& f, const __half* p, int ldm) {
  wmma::load_matrix_sync(f, p, ldm);
}
#define S10_BF16_LOAD(USE, LAYOUT, PTX)                                                              \
  __device__ __forceinline__ void load_shared(                                                       \
      wmma::fragment<wmma::USE, 16, 16, 16, __nv_bfloat16, wmma::LAYOUT>& f, const __nv_bfloat16* p, \
      int ldm) {                                                                                     \
    uint32_t* r = reinterpret_cast<uint32_t*>(f.x); /* 8 bf16 = 4 registers */                     \
    asm volatile("wmma.load." PTX ".m16n16k16.shared.bf16 {%0,%1,%2,%3}, [%4], %5;\n"               \
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(gemm::smem_u32(p)), "r"(ldm)); \
  }
S10_BF16_LOAD(matrix_a, row_major, "a.sync.aligned.row")
S10_BF16_LOAD(matrix_a, col_major, "a.sync.aligned.col")
S10_BF16_LOAD(matrix_b, row_major, "b.sync.aligned.row")
S10_BF16_LOAD(matrix_b, col_major, "b.sync.aligned.col")
#undef S10_BF16_LOAD

// Tile configuration: s09's block / warp grid (common/tc_tiling.cuh) plus this stage's 16-bit
// fragments and padded staging, per layout. Each operand tile is staged in its own major order
// (rows of 16-byte cp.async chunks along the contiguous dimension) and read by the fragment
// layout that matches it: no operand is ever transposed by a copy. The default is the one
// launch() uses; other instantiations exist only so a tuning script can compare shapes without
// editing this file.
template <gemm::Layout L, int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int GROUP_M_>
struct Config : gemm::WarpGrid<BM_, BN_, BK_, WARPS_M_, WARPS_N_, STAGES_, GROUP_M_> {
  using G = gemm::WarpGrid<BM_, BN_, BK_, WARPS_M_, WARPS_N_, STAGES_, GROUP_M_>;
  static constexpr bool A_MN = gemm::Majors<L>::A_MN, B_MN = gemm::Majors<L>::B_MN;
  static constexpr int FM = G::WM / 16, FN = G::WN / 16;           // 16x16 accumulators per warp
  // As: [BM][BK] K-major or [BK][BM] M-major (TN); Bs: [BK][BN] N-major or [BN][BK] K-major (NT).
  static constexpr int A_ROWS = A_MN ? G::BK : G::BM, A_COLS = A_MN ? G::BM : G::BK;
  static constexpr int B_ROWS = B_MN ? G::BK : G::BN, B_COLS = B_MN ? G::BN : G::BK;
  static constexpr int LDA = A_COLS + 8, LDB = B_COLS + 8;         // padded shared rows (elements)
  static constexpr int A_CPR = A_COLS / 8, B_CPR = B_COLS / 8;     // 16-byte chunks per tile row
  static constexpr int STAGE_ELEMS = A_ROWS * LDA + B_ROWS * LDB;
  static constexpr int PIPE_BYTES = G::STAGES * STAGE_ELEMS * 2;
  static constexpr int EPI_BYTES = G::WARPS_M * G::WARPS_N * 16 * (G::WN + 4) * 4;  // per-warp fp32 slabs
  static constexpr int SMEM_BYTES = PIPE_BYTES > EPI_BYTES ? PIPE_BYTES : EPI_BYTES;

  static_assert(G::BM % (16 * G::WARPS_M) == 0 && G::BN % (16 * G::WARPS_N) == 0,
                "each warp tile must be whole 16x16 WMMA fragments");
  static_assert(G::BK % 16 == 0, "the K step must be whole 16x16x16 fragments");
  static_assert(LDA % 8 == 0 && LDB % 8 == 0, "WMMA leading dimensions must be multiples of 16 bytes");
  static_assert((A_ROWS * A_CPR) % G::THREADS == 0 && (B_ROWS * B_CPR) % G::THREADS == 0,
                "every thread must issue the same number of 16-byte copies per tile");
  static_assert(G::STAGES >= 2, "a pipeline needs at least two stages");
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per block is at most 227 KiB on H100");
};

// 128x128x32, 4 warps of 64x64, 4 stages: NN 4 * (128*40 + 32*136) * 2 B = 74 KiB, NT 80 KiB
// (B as [128][40]), TN 68 KiB (A as [32][136]): two blocks per SM in every layout.
// 16 accumulator fragments = 128 fp32 registers per thread, as in s09.
template <gemm::Layout L>
using Default = Config<L, 128, 128, 32, 2, 2, 4, 8>;

// One operand tile into padded shared rows: ROWS rows of CPR 16-byte chunks, from row row0 and
// column col0 of a matrix with `rows` rows of `cols` contiguous elements (leading dimension
// ld). Chunks past either edge are zero-filled (src size 0..16 bytes), so tails multiply as
// zeros. Consecutive threads take consecutive chunks of a row: a warp reads whole 128-byte
// lines of global memory.
template <int ROWS, int CPR, int LDS, int THREADS, typename T>
__device__ __forceinline__ void stage_tile(T* dst, const T* src, int ld, int row0, int rows, int col0, int cols) {
#pragma unroll
  for (int i = 0; i < ROWS * CPR / THREADS; ++i) {
    const int id = threadIdx.x + i * THREADS;
    const int r = id / CPR, c = col0 + (id % CPR) * 8;
    const int bytes = row0 + r < rows ? max(0, min(16, 2 * (cols - c))) : 0;
    gemm::cp_async_16(dst + r * LDS + c - col0, bytes ? src + (row0 + r) * ld + c : src, bytes);
  }
}

template <typename T, class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) kernel(const gemm::Problem<T> p) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, LDA = Cfg::LDA, LDB = Cfg::LDB;
  constexpr int FM = Cfg::FM, FN = Cfg::FN, STAGES = Cfg::STAGES, THREADS = Cfg::THREADS;
  constexpr bool A_MN = Cfg::A_MN, B_MN = Cfg::B_MN;
  extern __shared__ float4 smem4[];  // float4: 16-byte alignment for cp.async and WMMA
  T* smem = reinterpret_cast<T*>(smem4);

  // --- tile assignment: grouped order of 128x128 C tiles; warp (wm, wn) owns a 64x64 piece --
  const int tiles_m = gemm::cdiv(p.M, BM), tiles_n = gemm::cdiv(p.N, BN);
  const gemm::TileCoord tile = gemm::grouped_tile(blockIdx.x, tiles_m, tiles_n, Cfg::GROUP_M);
  const int m0 = tile.m * BM, n0 = tile.n * BN;
  const int warp = threadIdx.x / 32;
  const int wm = warp / Cfg::WARPS_N, wn = warp % Cfg::WARPS_N;

  // --- operand staging: K-tile kt -> stage s, each operand in its own major order (Config) ---
  auto load_stage = [&](int s, int kt) {
    T* As = smem + s * Cfg::STAGE_ELEMS;
    T* Bs = As + Cfg::A_ROWS * LDA;
    const int k0 = kt * BK;
    if constexpr (A_MN) stage_tile<BK, Cfg::A_CPR, LDA, THREADS>(As, p.A, p.lda, k0, p.K, m0, p.M);
    else stage_tile<BM, Cfg::A_CPR, LDA, THREADS>(As, p.A, p.lda, m0, p.M, k0, p.K);
    if constexpr (B_MN) stage_tile<BK, Cfg::B_CPR, LDB, THREADS>(Bs, p.B, p.ldb, k0, p.K, n0, p.N);
    else stage_tile<BN, Cfg::B_CPR, LDB, THREADS>(Bs, p.B, p.ldb, n0, p.N, k0, p.K);
  };

  const int KT = gemm::cdiv(p.K, BK);
  // Prologue: STAGES-1 tiles in flight before the first multiply. One commit per stage, even
  // when empty, so wait<STAGES-2> below always means "tile kt has landed".
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_stage(s, s);
    gemm::cp_async_commit();
  }

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  // Fragment layouts: row_major reads a K-major A / N-major B tile, col_major an M-major A /
  // K-major B tile (the same ldmatrix, addressed along the other dimension).
  using ALayout = std::conditional_t<A_MN, wmma::col_major, wmma::row_major>;
  using BLayout = std::conditional_t<B_MN, wmma::row_major, wmma::col_major>;
  // Element offsets inside a stage: this warp's first row / column, then per fragment (i or j)
  // and per k16 step (kk). M-major A: A(m, k) at As[k * LDA + m]; K-major B: B(k, n) at
  // Bs[n * LDB + k].
  constexpr int A_I = A_MN ? 16 : 16 * LDA, A_KK = A_MN ? LDA : 1;
  constexpr int B_J = B_MN ? 16 : 16 * LDB, B_KK = B_MN ? LDB : 1;
  const int a_warp = wm * (Cfg::WM / 16) * A_I;
  const int b_warp = Cfg::A_ROWS * LDA + wn * (Cfg::WN / 16) * B_J;

  // --- loop over K: wait for tile kt, refill the slot freed last iteration, multiply ---------
  int read_s = 0, write_s = STAGES - 1;
  for (int kt = 0; kt < KT; ++kt) {
    gemm::cp_async_wait<STAGES - 2>();  // this thread's copies of tile kt are done ...
    __syncthreads();                    // ... and everyone's; all warps also left tile kt-1
    if (kt + STAGES - 1 < KT) load_stage(write_s, kt + STAGES - 1);
    gemm::cp_async_commit();
    write_s = write_s + 1 == STAGES ? 0 : write_s + 1;

    const T* As = smem + read_s * Cfg::STAGE_ELEMS + a_warp;
    const T* Bs = smem + read_s * Cfg::STAGE_ELEMS + b_warp;
    read_s = read_s + 1 == STAGES ? 0 : read_s + 1;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      // A fragment: 16 rows x 16 k of As; B fragment: 16 k x 16 columns of Bs.
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, ALayout> a[FM];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, BLayout> b[FN];
#pragma unroll
      for (int i = 0; i < FM; ++i) load_shared(a[i], As + i * A_I + kk * A_KK, LDA);
#pragma unroll
      for (int j = 0; j < FN; ++j) load_shared(b[j], Bs + j * B_J + kk * B_KK, LDB);
      // FM*FN = 16 fragment products per 8 loaded fragments: each A fragment is reused FN times.
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }

  // --- epilogue: the pipeline's shared memory becomes per-warp fp32 staging; C is rounded to
  // T once, after alpha/beta (the same path as s09, common/tc_epilogue.cuh) ------------------
  gemm::cp_async_wait<0>();  // only empty groups can remain, but make it explicit
  __syncthreads();           // every warp has finished reading the last tile
  float* stage = reinterpret_cast<float*>(smem4) + warp * 16 * (Cfg::WN + 4);
  gemm::wmma_store_tile<FM, FN>(p, acc, stage, m0 + wm * Cfg::WM, n0 + wn * Cfg::WN);
}

template <typename T, class Cfg>
cudaError_t launch_cfg(const gemm::Problem<T>& p, cudaStream_t stream) {
  return gemm::launch_tiles<Cfg>(kernel<T, Cfg>, p, stream);  // 1-D grid in grouped order
}

// The 16-byte cp.async rows run along each operand's contiguous dimension in every layout, so
// the limits (leading dimensions multiples of 8, 16-byte aligned bases) are the same for all.
const char* unsupported(const gemm::Problem<__half>& p) { return gemm::unsupported_16byte_rows(p); }
const char* unsupported(const gemm::Problem<__nv_bfloat16>& p) { return gemm::unsupported_16byte_rows(p); }

template <typename T>
cudaError_t launch_t(const gemm::Problem<T>& p, cudaStream_t stream) {
  return gemm::with_layout(p.layout, [&](auto l) { return launch_cfg<T, Default<decltype(l)::value>>(p, stream); });
}
cudaError_t launch(const gemm::Problem<__half>& p, cudaStream_t stream) { return launch_t(p, stream); }
cudaError_t launch(const gemm::Problem<__nv_bfloat16>& p, cudaStream_t stream) { return launch_t(p, stream); }

}  // namespace s10_half_wmma
