// s11_mma_pipeline: mma.sync + ldmatrix on XOR-swizzled tiles, shared-memory-staged epilogue
//
// Change: vs s10, WMMA gives way to ldmatrix + mma.sync.m16n8k16 on unpadded XOR-swizzled tiles,
//         fragments double-buffered across k16 steps, 128x256x64 tiles, a smem-staged epilogue.
// Why:    per k16 step a warp issues 4 LDSM (A), 4 LDSM.T (B) and 32 MMAs; chunk c of row r stored
//         at c ^ (r % 8) puts an ldmatrix phase's 8 rows on 8 bank groups (0 conflicts). 128
//         accumulator + 64 fragment registers x 256 threads fill the register file: 8 warps of
//         64x64. The tensor pipe binds (78.5% busy at 2 warps per scheduler); a branch-free loop
//         body lets the refill's copies fill the HMMAs' stall slots (72.7% -> 78.5%).
// Expect: ~58-61% of cuBLAS FP16/BF16 at 4096^3 and 8192^3, ~1.45x s10 (~405-465 TFLOP/s)
// Limits: lda and ldb multiples of 8 and A, B 16-byte aligned (16-byte cp.async rows along each
//         operand's contiguous dimension: for contiguous tensors K and N in NN, K in NT, M and N
//         in TN multiples of 8), and a GPU that gives a block 144 KiB of shared memory (not
//         sm_86/sm_89), else ValueError; any M, N, K >= 1 otherwise
// Dtype:  fp16, bf16 in / fp32 acc / same as in out        Arch: sm_80+      Layout: NN, NT, TN
// Pair:   triton_kernels/s11_mma_pipeline.py
// Log:    docs/stages/s11_mma_pipeline.md
#include <cstdint>
#include <type_traits>
#include "common/gemm.cuh"
#include "common/cp_async.cuh"
#include "common/ldmatrix.cuh"
#include "common/block_order.cuh"
#include "common/tc_epilogue.cuh"
#include "common/tc_tiling.cuh"
#include "common/layouts.cuh"

namespace s11_mma_pipeline {

// --- PTX wrappers (only this stage uses mma.sync.m16n8k16 and ldmatrix.trans; the plain
// ldmatrix_x4, shared with s09, is in common/ldmatrix.cuh) ---------------------------------

// gemm::ldmatrix_x4 with each matrix transposed on the way: rows given are K rows of a
// row-major B, and a lane receives 2 consecutive-K elements of one column, which is mma's B
// fragment layout.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// D (16x8 fp32) += A (16x16, row) * B (16x8, col). Per lane: a = 4 regs of 2 elements,
// b = 2 regs, d = rows lane/4 and lane/4 + 8, columns 2*(lane%4) + 0..1.
template <typename T> __device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4],
                                                                uint32_t b0, uint32_t b1);
template <> __device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const uint32_t (&a)[4],
                                                              uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <> __device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4],
                                                                     uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two adjacent outputs as one 32-bit store (and load, only when beta != 0).
__device__ __forceinline__ uint32_t pack2(float x, float y, __half) {
  __half2 h = __floats2half2_rn(x, y);
  return *reinterpret_cast<uint32_t*>(&h);
}
__device__ __forceinline__ uint32_t pack2(float x, float y, __nv_bfloat16) {
  __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<uint32_t*>(&h);
}
__device__ __forceinline__ float2 unpack2(uint32_t v, __half) {
  return __half22float2(*reinterpret_cast<__half2*>(&v));
}
__device__ __forceinline__ float2 unpack2(uint32_t v, __nv_bfloat16) {
  return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&v));
}

// Physical 16-byte chunk of logical chunk c in row r of a tile with CPR chunks per row.
// ldmatrix reads 8 consecutive rows at one logical chunk per phase; the XOR makes those
// 8 chunks land on 8 different 16-byte bank groups. Rows of >= 8 chunks: c ^ (r % 8).
// Rows of 4 chunks (64 B, two rows per 128 B line): c ^ ((r / 2) % 4), so the 4 row pairs
// use 4 different chunk columns and the two rows of a pair the two halves of the line.
template <int CPR>
__device__ __forceinline__ int swizzle(int r, int c) {
  static_assert(CPR == 4 || CPR % 8 == 0, "swizzle defined for rows of 4 or a multiple of 8 chunks");
  if constexpr (CPR == 4) return c ^ ((r >> 1) & 3);
  else return c ^ (r & 7);
}

// Copy plan of one operand tile, fixed once per block. A thread copies COPIES chunks of one
// chunk column c, rows r0, r0 + RSTEP, ... of the staged tile.
//   K-major operand (rows = M or N index, chunks along K): `ok` bit i says copy i's row is
//     inside the matrix; goff = element offset of copy 0 at k = 0 (row clamped: a row past the
//     edge is never read, and the clamp keeps the offset arithmetic inside the operand).
//   MN-major operand (rows = k, chunks along M or N): `ok` = bytes of this thread's chunk
//     column inside the MN extent (its tail); goff = copy 0's offset at k0 = 0.
// Copy i adds i * rstep elements.
struct OperandPlan {
  int goff, rstep;
  uint32_t ok;
};
template <bool MN_MAJOR, int COPIES, int RSTEP>
__device__ __forceinline__ OperandPlan operand_plan(int c, int r0, int mn0, int mn_extent, int ld) {
  OperandPlan o;
  if constexpr (MN_MAJOR) {
    const int mn = mn0 + c * 8;
    o.ok = max(0, min(16, 2 * (mn_extent - mn)));
    o.goff = r0 * ld + (o.ok ? mn : 0);
  } else {
    o.ok = 0;
#pragma unroll
    for (int i = 0; i < COPIES; ++i) o.ok |= (mn0 + r0 + i * RSTEP < mn_extent ? 1u : 0u) << i;
    o.goff = min(mn0 + r0, mn_extent - 1) * ld + c * 8;
  }
  o.rstep = RSTEP * ld;
  return o;
}
// The copies of a K tile wholly inside K (k0 + BK <= K): bytes depend on M / N only. `sdst`:
// shared address of copy 0; copy i lands SSTEP bytes further.
template <bool MN_MAJOR, int COPIES, int SSTEP, typename T>
__device__ __forceinline__ void copy_full(uint32_t sdst, const T* base, const OperandPlan& o, int k0, int ld) {
  const T* src = base + o.goff + (MN_MAJOR ? k0 * ld : k0);
#pragma unroll
  for (int i = 0; i < COPIES; ++i, src += o.rstep) {
    if constexpr (MN_MAJOR) {
      gemm::cp_async_16_u32(sdst + i * SSTEP, src, o.ok);
    } else {
      const bool ok = (o.ok >> i) & 1;
      gemm::cp_async_16_u32(sdst + i * SSTEP, ok ? src : base, ok ? 16 : 0);
    }
  }
}
// The K tile that crosses K (kleft = K - k0 < BK): per-chunk byte counts along K as well.
template <bool MN_MAJOR, int COPIES, int SSTEP, int RSTEP, typename T>
__device__ __forceinline__ void copy_tail(uint32_t sdst, const T* base, const OperandPlan& o, int k0, int kleft,
                                          int ld, int c, int r0) {
  const int kbytes = max(0, min(16, 2 * (kleft - c * 8)));  // K-major: this chunk column's K tail
#pragma unroll
  for (int i = 0; i < COPIES; ++i) {
    const int bytes = MN_MAJOR ? (r0 + i * RSTEP < kleft ? static_cast<int>(o.ok) : 0)
                               : ((o.ok >> i) & 1 ? kbytes : 0);
    const int off = o.goff + (MN_MAJOR ? k0 * ld : k0) + i * o.rstep;
    gemm::cp_async_16_u32(sdst + i * SSTEP, bytes ? base + off : base, bytes);
  }
}

// Tile configuration: s09's block / warp grid (common/tc_tiling.cuh) plus this stage's
// occupancy, fragment buffering, epilogue and swizzled staging constants. The default is the
// one launch() uses; other instantiations exist only so a tuning script can compare shapes
// without editing this file.
template <gemm::Layout L, int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int GROUP_M_,
          int MIN_BLOCKS_, int FRAG_BUFS_ = 2, bool SMEM_EPI_ = false>
struct Config : gemm::WarpGrid<BM_, BN_, BK_, WARPS_M_, WARPS_N_, STAGES_, GROUP_M_> {
  using G = gemm::WarpGrid<BM_, BN_, BK_, WARPS_M_, WARPS_N_, STAGES_, GROUP_M_>;
  static constexpr int MIN_BLOCKS = MIN_BLOCKS_;                   // resident blocks per SM asked for
  static constexpr int FRAG_BUFS = FRAG_BUFS_;                     // ldmatrix fragment buffers
  static constexpr bool SMEM_EPI = SMEM_EPI_;                      // stage C through shared memory
  static constexpr int MT = G::WM / 16, NT = G::WN / 8;            // m16n8 accumulators per warp
  static constexpr int KS = G::BK / 16;                            // k16 MMA steps per K tile
  // Each operand tile is staged in its own major order, rows of 16-byte chunks along the
  // contiguous dimension: As [BM][BK] (K-major) or [BK][BM] (M-major, TN); Bs [BK][BN]
  // (N-major, NN/TN) or [BN][BK] (K-major, NT). ldmatrix reads a K-major tile as is and an
  // MN-major one with .trans: no operand is transposed by a copy.
  static constexpr bool A_MN = gemm::Majors<L>::A_MN, B_MN = gemm::Majors<L>::B_MN;
  static constexpr int A_CPR = (A_MN ? G::BM : G::BK) / 8;         // 16-byte chunks per tile row
  static constexpr int B_CPR = (B_MN ? G::BN : G::BK) / 8;
  static constexpr int A_ELEMS = G::BM * G::BK, B_ELEMS = G::BK * G::BN;
  static constexpr int A_COPIES = A_ELEMS / 8 / G::THREADS, B_COPIES = B_ELEMS / 8 / G::THREADS;
  static constexpr int STAGE_BYTES = (A_ELEMS + B_ELEMS) * 2;
  static constexpr int SMEM_BYTES = G::STAGES * STAGE_BYTES;

  static_assert(G::WM % 16 == 0 && G::WN % 16 == 0, "a warp tile is whole m16 rows and n16 column pairs");
  static_assert(G::BM == G::WM * G::WARPS_M && G::BN == G::WN * G::WARPS_N, "warps must tile the block exactly");
  static_assert(G::BK % 32 == 0, "the K step must be an even number of k16 MMAs, so the double-"
                                 "buffered fragments alternate at the same indices in every tile");
  static_assert(FRAG_BUFS == 1 || FRAG_BUFS == 2, "fragments single- or double-buffered");
  static_assert((A_CPR == 4 || A_CPR % 8 == 0) && (B_CPR == 4 || B_CPR % 8 == 0),
                "tile rows of 4 or a multiple of 8 chunks (swizzle)");
  static_assert(A_COPIES * 8 * G::THREADS == A_ELEMS && B_COPIES * 8 * G::THREADS == B_ELEMS,
                "every thread must issue the same number of 16-byte copies per tile");
  static_assert(G::THREADS % A_CPR == 0 && G::THREADS % B_CPR == 0,
                "a thread's copies must all sit at one chunk column of their rows");
  static_assert((G::THREADS / A_CPR) % 8 == 0 && (G::THREADS / B_CPR) % 8 == 0,
                "a thread's copies must be a multiple of 8 rows apart (one swizzle term for all)");
  static_assert(G::STAGES >= 3, "wait_group<STAGES-2> with the refill after the barrier needs 3+ stages");
  static_assert(SMEM_BYTES * MIN_BLOCKS <= 227 * 1024, "shared memory per SM is at most 227 KiB on H100");
  static_assert(!SMEM_EPI || (G::WN == 64 && G::BM * G::BN * 2 <= SMEM_BYTES),
                "the staged epilogue swizzles 8-chunk (64-column) warp rows and puts all warp tiles in the ring");
};

// 128x256x64, 8 warps (2 x 4) of 64x64, 3 stages of 48 KiB = 144 KiB, one block of 256 threads
// per SM. Accumulators 128 + double-buffered fragments 64 registers per thread; 256 threads
// x 255 registers is the whole 64 Ki register file, so 64x64 is the largest warp tile and
// 8 warps of it the largest block. 144 KiB needs sm_80/sm_90-class shared memory (sm_86 and
// sm_89 allow 99 KiB per block; there Config<L, 128, 128, 32, 2, 2, 4, 8, 2>, 64 KiB and two
// blocks per SM, would be the one to launch). The staged epilogue reuses 64 KiB of the ring
// (8 KiB per warp) after the K loop. GROUP_M 16: at 8192^3 a wave of 132 blocks spans 16 A and
// ~9 B strips instead of 8 and 17 (68 vs 84 MiB). Measurements: docs/stages/s11_mma_pipeline.md.
template <gemm::Layout L>
using Default = Config<L, 128, 256, 64, 2, 4, 3, 16, 1, 2, true>;

template <typename T, class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
kernel(const gemm::Problem<T> p, bool pair_store, bool vec_store) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, STAGES = Cfg::STAGES;
  constexpr int MT = Cfg::MT, NT = Cfg::NT, KS = Cfg::KS, THREADS = Cfg::THREADS;
  constexpr int A_CPR = Cfg::A_CPR, B_CPR = Cfg::B_CPR;
  extern __shared__ float4 smem4[];  // float4: 16-byte alignment for cp.async and ldmatrix
  T* smem = reinterpret_cast<T*>(smem4);

  // --- tile assignment: grouped order of BM x BN C tiles; warp (wm, wn) owns a WM x WN piece
  const int tiles_m = gemm::cdiv(p.M, BM), tiles_n = gemm::cdiv(p.N, BN);
  const gemm::TileCoord tile = gemm::grouped_tile(blockIdx.x, tiles_m, tiles_n, Cfg::GROUP_M);
  const int m0 = tile.m * BM, n0 = tile.n * BN;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp / Cfg::WARPS_N, wn = warp % Cfg::WARPS_N;

  // --- operand staging: K-tile kt -> stage s. As and Bs (Config) unpadded, 16-byte chunks
  // placed by swizzle(). Chunks past M, N or K are zero-filled (src size 0..16 bytes, a 0-byte
  // copy reads from the base pointer), so the tails multiply as zeros. A thread's copies sit at
  // one chunk column (THREADS % CPR == 0) and rows THREADS / CPR apart, so the copy plan is
  // fixed once here (operand_plan: row validity or MN-tail bytes, first offset) and a tile adds
  // only k0 (~8 SASS instructions per copy instead of ~22). Only a K tile that crosses K takes
  // the per-chunk byte path.
  constexpr int A_RSTEP = THREADS / A_CPR, B_RSTEP = THREADS / B_CPR;
  const int a_c = threadIdx.x % A_CPR, a_r0 = threadIdx.x / A_CPR;
  const int b_c = threadIdx.x % B_CPR, b_r0 = threadIdx.x / B_CPR;
  const OperandPlan a_plan = operand_plan<Cfg::A_MN, Cfg::A_COPIES, A_RSTEP>(a_c, a_r0, m0, p.M, p.lda);
  const OperandPlan b_plan = operand_plan<Cfg::B_MN, Cfg::B_COPIES, B_RSTEP>(b_c, b_r0, n0, p.N, p.ldb);

  // Shared destinations: copy i sits RSTEP rows below copy 0 and RSTEP is a multiple of 8, so
  // the swizzle term is the same for all of a thread's copies (one register, i adds an immediate).
  const uint32_t a_sdst = (a_r0 * A_CPR + swizzle<A_CPR>(a_r0, a_c)) * 16;
  const uint32_t b_sdst = Cfg::A_ELEMS * 2 + (b_r0 * B_CPR + swizzle<B_CPR>(b_r0, b_c)) * 16;
  constexpr int A_SSTEP = A_RSTEP * A_CPR * 16, B_SSTEP = B_RSTEP * B_CPR * 16;  // bytes per copy

  // A K tile wholly inside K: bytes depend on M / N only.
  auto load_full = [&](int s, int kt) {
    const uint32_t stage = gemm::smem_u32(smem) + s * Cfg::STAGE_BYTES;
    const int k0 = kt * BK;
    copy_full<Cfg::A_MN, Cfg::A_COPIES, A_SSTEP>(stage + a_sdst, p.A, a_plan, k0, p.lda);
    copy_full<Cfg::B_MN, Cfg::B_COPIES, B_SSTEP>(stage + b_sdst, p.B, b_plan, k0, p.ldb);
  };
  auto load_stage = [&](int s, int kt) {
    const uint32_t stage = gemm::smem_u32(smem) + s * Cfg::STAGE_BYTES;
    const int k0 = kt * BK;
    if (k0 + BK <= p.K) {
      load_full(s, kt);
    } else {  // the K tail: per-chunk byte counts, zero-byte copies read from the base pointer
      const int kleft = p.K - k0;
      copy_tail<Cfg::A_MN, Cfg::A_COPIES, A_SSTEP, A_RSTEP>(stage + a_sdst, p.A, a_plan, k0, kleft, p.lda, a_c, a_r0);
      copy_tail<Cfg::B_MN, Cfg::B_COPIES, B_SSTEP, B_RSTEP>(stage + b_sdst, p.B, b_plan, k0, kleft, p.ldb, b_c, b_r0);
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

  // ldmatrix.x4 addressing. A K-major tile (A in NN/NT, B in NT) is read as is: lane l points
  // at row l % 16 of a 16-row slab, chunk l / 16 of a chunk pair. For A that yields the 4
  // registers of an m16k16 fragment (rows 0-7 / 8-15 x k 0-7 / 8-15); for a K-major B (rows =
  // n) it yields b0b1 of n rows 0-7, then of n rows 8-15, so the lane order differs (frag_lane).
  // An MN-major tile (rows = k: B in NN/TN, A in TN) is read with .trans, which hands each
  // lane 2 consecutive-k elements of one m or n: lanes point at k rows and MN chunks, again in
  // the order of the registers. The swizzle term depends only on the row % 8 of the lane
  // (slabs start on multiples of 8 rows), so each operand needs one register per index that
  // moves along its chunk columns: per k16 step for a K-major tile (the m16 / n16 slab adds an
  // immediate), per m16 / n16 slab for an MN-major one (the k16 step adds an immediate).
  const int lrow = lane % 16, lchunk = lane / 16;
  constexpr int A_OFFS = Cfg::A_MN ? MT : KS, B_OFFS = Cfg::B_MN ? NT / 2 : KS;
  uint32_t a_off[A_OFFS], b_off[B_OFFS];
#pragma unroll
  for (int i = 0; i < A_OFFS; ++i) {
    if constexpr (Cfg::A_MN) {  // i = m16 slab; rows k: lanes 0-7/16-23 k 0-7/8-15, 8-15/24-31 m + 8
      const int r = lane % 8 + (lane / 16) * 8;
      a_off[i] = (r * A_CPR + swizzle<A_CPR>(r, (wm * Cfg::WM + i * 16) / 8 + (lane / 8) % 2)) * 16;
    } else {                    // i = k16 step
      const int r = wm * Cfg::WM + lrow;
      a_off[i] = (r * A_CPR + swizzle<A_CPR>(r, i * 2 + lchunk)) * 16;
    }
  }
#pragma unroll
  for (int i = 0; i < B_OFFS; ++i) {
    if constexpr (Cfg::B_MN) {  // i = n16 pair of n8 tiles; rows k
      const int c = (wn * Cfg::WN + i * 16) / 8 + lchunk;
      b_off[i] = Cfg::A_ELEMS * 2 + (lrow * B_CPR + swizzle<B_CPR>(lrow, c)) * 16;
    } else {                    // i = k16 step; rows n: lanes 0-7/16-23 n 0-7/8-15, 8-15/24-31 k + 8
      const int r = wn * Cfg::WN + lane % 8 + (lane / 16) * 8;
      b_off[i] = Cfg::A_ELEMS * 2 + (r * B_CPR + swizzle<B_CPR>(r, i * 2 + (lane / 8) % 2)) * 16;
    }
  }

  // With FRAG_BUFS == 2, fragments are double-buffered across k16 steps: step ks+1's ldmatrix
  // is issued before step ks's MMAs, so shared-memory latency hides behind 32 MMAs.
  constexpr int FB = Cfg::FRAG_BUFS;
  uint32_t af[FB][MT][4], bf[FB][NT / 2][4];
  auto load_frags = [&](int buf, uint32_t stage, int ks) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if constexpr (Cfg::A_MN) ldmatrix_x4_trans(af[buf][mt], stage + a_off[mt] + ks * 16 * A_CPR * 16);
      else gemm::ldmatrix_x4(af[buf][mt], stage + a_off[ks] + mt * 16 * A_CPR * 16);
    }
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      if constexpr (Cfg::B_MN) ldmatrix_x4_trans(bf[buf][np], stage + b_off[np] + ks * 16 * B_CPR * 16);
      else gemm::ldmatrix_x4(bf[buf][np], stage + b_off[ks] + np * 16 * B_CPR * 16);
    }
  };
  float acc[MT][NT][4] = {};  // WM x WN fp32 per warp: MT*NT*4 registers per thread
  // Serpentine order: odd m16 rows walk the n8 columns backwards, so consecutive MMAs always
  // share an operand (the A fragment along a row, the B fragment at a row change).
  auto mmas = [&](int buf) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int nt = mt % 2 ? NT - 1 - j : j;
        mma_16816<T>(acc[mt][nt], af[buf][mt], bf[buf][nt / 2][(nt % 2) * 2],
                     bf[buf][nt / 2][(nt % 2) * 2 + 1]);
      }
  };

  // --- loop over K. wait<STAGES-2>: at most STAGES-2 younger groups pending, i.e. the tile
  // about to be read has landed for this thread; the barrier makes it so for all threads and
  // also proves every warp has left the slot that the refill then overwrites.
  const uint32_t smem_base = gemm::smem_u32(smem);
  int read_s = 0, write_s = STAGES - 1;
  if constexpr (FB == 2) {
    // Double-buffered: the barrier for tile kt+1 sits before the LAST k16 step of tile kt, so
    // that step's MMAs run while tile kt+1's first fragments load (CUTLASS's multistage
    // order); the refill of the slot freed by tile kt-1 goes out at step 0.
    uint32_t stage = smem_base;
    gemm::cp_async_wait<STAGES - 2>();
    __syncthreads();
    load_frags(0, stage, 0);
    auto tile = [&](int kt, auto whole_refill) {  // std::bool_constant: refill wholly inside K
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        if (ks == KS - 1) {
          gemm::cp_async_wait<STAGES - 2>();
          __syncthreads();
          read_s = read_s + 1 == STAGES ? 0 : read_s + 1;
          stage = smem_base + read_s * Cfg::STAGE_BYTES;
        }
        load_frags((ks + 1) % 2, stage, (ks + 1) % KS);  // past the last tile: harmless stale read
        if (ks == 0) {
          if constexpr (decltype(whole_refill)::value) load_full(write_s, kt + STAGES - 1);
          else if (kt + STAGES - 1 < KT) load_stage(write_s, kt + STAGES - 1);
          gemm::cp_async_commit();
          write_s = write_s + 1 == STAGES ? 0 : write_s + 1;
        }
        mmas(ks % 2);
      }
    };
    // Two bodies of the same loop. Every tile but the last STAGES-1 (and one more when K % BK
    // != 0) refills a whole K tile, so its body is one basic block: no end-of-K test, no
    // K-tail bytes, and ptxas spreads the copies and their address math over step 0's 32
    // HMMAs. Behind those branches the copies were a ~75-instruction block (kernel parameters
    // reloaded from constant memory under 255-register pressure) that all 8 warps ran at
    // once after the barrier while the tensor pipe drained.
    const int kt_whole = max(0, p.K / BK - (STAGES - 1));  // tiles whose refill lies inside K
    int kt = 0;
    for (; kt < kt_whole; ++kt) tile(kt, std::true_type());
    for (; kt < KT; ++kt) tile(kt, std::false_type());
  } else {
    // Single-buffered (large warp tiles, no registers to spare): barrier at the top of each
    // tile, refill, then load-and-multiply each k16 step.
    for (int kt = 0; kt < KT; ++kt) {
      gemm::cp_async_wait<STAGES - 2>();
      __syncthreads();
      if (kt + STAGES - 1 < KT) load_stage(write_s, kt + STAGES - 1);
      gemm::cp_async_commit();
      write_s = write_s + 1 == STAGES ? 0 : write_s + 1;
      const uint32_t stage = smem_base + read_s * Cfg::STAGE_BYTES;
      read_s = read_s + 1 == STAGES ? 0 : read_s + 1;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        load_frags(0, stage, ks);
        mmas(0);
      }
    }
  }
  gemm::cp_async_wait<0>();  // only empty groups remain; leave none pending at exit

  // --- epilogue, staged (beta == 0, whole tile inside C, 16-byte C rows): each warp rounds
  // alpha * acc to T into its own WM x WN slice of the (now idle) tile ring, then writes it
  // back as 16-byte row chunks, 4 full 128 B rows per warp instruction instead of 32-bit
  // stores that fill half a 32 B sector each. Same rounding as the register path. Staging
  // layout: row r holds 8 chunks of 8 outputs, chunk c stored at c ^ (r % 8), so the 8 row
  // groups g of one 32-bit write land on 8 different chunks (32 banks) and a read of 8 chunks
  // of one row is one 128 B line. The condition is block-uniform, so the barrier is safe.
  if constexpr (Cfg::SMEM_EPI) {
    if (vec_store && p.beta == 0.f && m0 + BM <= p.M && n0 + BN <= p.N) {
      __syncthreads();  // every warp has finished its ldmatrix reads of the ring
      const uint32_t wbase = smem_base + warp * (Cfg::WM * Cfg::WN * 2);
      const int g = lane / 4, t = lane % 4;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = mt * 16 + g + h * 8;
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const uint32_t v = pack2(p.alpha * acc[mt][nt][2 * h], p.alpha * acc[mt][nt][2 * h + 1], T());
            const uint32_t a = wbase + (r * 8 + (nt ^ (r & 7))) * 16 + t * 4;
            asm volatile("st.shared.b32 [%0], %1;\n" :: "r"(a), "r"(v));
          }
        }
      __syncwarp();
      const int rr = lane / 8, cc = lane % 8;
      T* crow = p.C + (m0 + wm * Cfg::WM + rr) * p.ldc + n0 + wn * Cfg::WN + cc * 8;
#pragma unroll
      for (int i = 0; i < Cfg::WM / 4; ++i) {
        const int r = i * 4 + rr;
        uint4 v;
        asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(wbase + (r * 8 + (cc ^ (r & 7))) * 16));
        *reinterpret_cast<uint4*>(crow + i * 4 * p.ldc) = v;
      }
      return;
    }
  }

  // --- epilogue: straight from registers. Lane owns rows g and g+8 of each m16n8 tile,
  // columns 2t and 2t+1 (g = lane/4, t = lane%4): one 32-bit store per pair when C allows
  // it (pair_store: ldc even and C 4-byte aligned), predicated scalars on the N tail.
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = m0 + wm * Cfg::WM + mt * 16 + g + h * 8;
      if (row >= p.M) continue;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int col = n0 + wn * Cfg::WN + nt * 8 + 2 * t;
        const float v0 = acc[mt][nt][2 * h], v1 = acc[mt][nt][2 * h + 1];
        T* c = p.C + row * p.ldc + col;
        if (pair_store && col + 1 < p.N) {
          float x = p.alpha * v0, y = p.alpha * v1;
          if (p.beta != 0.f) {  // beta == 0 never reads C
            const float2 old = unpack2(*reinterpret_cast<const uint32_t*>(c), T());
            x += p.beta * old.x;
            y += p.beta * old.y;
          }
          *reinterpret_cast<uint32_t*>(c) = pack2(x, y, T());
        } else {
          if (col < p.N) gemm::store_scaled(c, v0, p.alpha, p.beta);
          if (col + 1 < p.N) gemm::store_scaled(c + 1, v1, p.alpha, p.beta);
        }
      }
    }
  }
}

template <typename T, class Cfg>
cudaError_t launch_cfg(const gemm::Problem<T>& p, cudaStream_t stream) {
  const bool pair_store = p.ldc % 2 == 0 && (reinterpret_cast<uintptr_t>(p.C) & 3) == 0;
  const bool vec_store = p.ldc % 8 == 0 && (reinterpret_cast<uintptr_t>(p.C) & 15) == 0;
  return gemm::launch_tiles<Cfg>(kernel<T, Cfg>, p, stream, pair_store, vec_store);  // 1-D, grouped order
}

// The 144 KiB tile ring fits the sm_80 and sm_90 classes (163 / 227 KiB per block) but not
// sm_86/sm_89 (99 KiB): there the stage refuses with a message instead of failing to launch.
template <typename T>
const char* unsupported_any(const gemm::Problem<T>& p) {
  const char* why = gemm::unsupported_16byte_rows(p);
  return why ? why : gemm::unsupported_shared_memory(
      Default<gemm::Layout::NN>::SMEM_BYTES, "this GPU gives a block less shared memory than s11's 128x256x64 3-stage "
                           "tiles need (144 KiB; sm_80 and sm_90 class GPUs have it, sm_86/sm_89 do not)");
}
const char* unsupported(const gemm::Problem<__half>& p) { return unsupported_any(p); }
const char* unsupported(const gemm::Problem<__nv_bfloat16>& p) { return unsupported_any(p); }

// One instantiation per layout (common/layouts.cuh): NN's kernel is the code it always was.
template <typename T>
cudaError_t launch_t(const gemm::Problem<T>& p, cudaStream_t stream) {
  return gemm::with_layout(p.layout, [&](auto l) { return launch_cfg<T, Default<decltype(l)::value>>(p, stream); });
}
cudaError_t launch(const gemm::Problem<__half>& p, cudaStream_t stream) { return launch_t(p, stream); }
cudaError_t launch(const gemm::Problem<__nv_bfloat16>& p, cudaStream_t stream) { return launch_t(p, stream); }

}  // namespace s11_mma_pipeline
