// s11_mma_pipeline: mma.sync + ldmatrix on XOR-swizzled tiles, register epilogue
//
// Change: vs s10, WMMA gives way to the PTX it hides: ldmatrix (LDSM) loads fragments whose
//         register layout is now known, mma.sync.m16n8k16 multiplies them, and the epilogue
//         stores accumulators straight from registers. Known layouts allow unpadded tiles
//         with an XOR swizzle (chunk ^= row bits) instead of s10's padding. Same 128x128x32
//         block tile, 4 warps of 64x64, 4-stage cp.async pipeline, two blocks per SM.
// Why:    Per 16-wide K step a warp issues 4 LDSM for A (one m16k16 fragment each), 4 LDSM.T
//         for B (two k16n8 fragments each) and 32 MMAs: 8 shared loads per 32 MMAs, with no
//         opaque-fragment shuffles. Bank conflicts: an 8x8 ldmatrix phase reads 8 rows of 16 B
//         at one logical chunk; B rows are 256 B apart (all on one bank group), so storing
//         chunk c of row r at c ^ (r % 8) spreads them over the 8 groups of a 128 B line; A
//         rows are 64 B (4 chunks): c ^ ((r / 2) % 4) does the same for row pairs. Unpadded,
//         a stage is (128+128)*32*2 B = 16 KiB (s10: 18.5), 4 stages 64 KiB. The epilogue
//         needs no shared staging: each lane owns row pairs of 2 adjacent columns and stores
//         them as one 32-bit word. Still one block-wide barrier per 32-wide K tile, which
//         leaves every warp's tensor pipe idle at the same moment; the second block per SM
//         covers part of that (128x256 tiles with 8 warps, one block per SM, measured ~10%
//         slower on H100). s12's asynchronous wgmma + mbarrier ring removes the barrier.
// Expect: ~1.1x s10 at 4096^3; ~48-50% of cuBLAS FP16/BF16 at 4096^3 and 8192^3 (~330 TFLOP/s);
//         rel. error as s10 (set by the output rounding)
// Limits: lda and ldb multiples of 8 and A, B 16-byte aligned (16-byte cp.async rows; for
//         contiguous tensors: K and N multiples of 8), else ValueError; any M, N, K >= 1 otherwise
// Dtype:  fp16, bf16 in / fp32 acc / same as in out        Arch: sm_80+      Layout: NN
// Pair:   triton_kernels/s11_mma_pipeline.py
#include <cstdint>
#include "common/gemm.cuh"
#include "common/cp_async.cuh"
#include "common/block_order.cuh"
#include "common/tc_epilogue.cuh"

namespace s11_mma_pipeline {

// --- PTX wrappers (only this stage uses mma.sync / ldmatrix) ------------------------------

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the 8 row addresses of matrix i, and register i
// of every lane receives its 2 elements of matrix i (row lane/4, columns 2*(lane%4) + 0..1).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
// The same, each matrix transposed on the way: rows given are K rows of a row-major B, and a
// lane receives 2 consecutive-K elements of one column, which is mma's B fragment layout.
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
  static constexpr int MT = WM / 16, NT = WN / 8;                  // m16n8 accumulators per warp
  static constexpr int A_CPR = BK / 8, B_CPR = BN / 8;             // 16-byte chunks per tile row
  static constexpr int A_ELEMS = BM * BK, B_ELEMS = BK * BN;       // As [BM][BK], Bs [BK][BN]
  static constexpr int STAGE_BYTES = (A_ELEMS + B_ELEMS) * 2;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES;

  static_assert(WM % 16 == 0 && WN % 16 == 0, "a warp tile is whole m16 rows and n16 column pairs");
  static_assert(BM == WM * WARPS_M && BN == WN * WARPS_N, "warps must tile the block exactly");
  static_assert(BK % 16 == 0, "the K step must be whole k16 MMAs");
  static_assert((A_ELEMS / 8) % THREADS == 0 && (B_ELEMS / 8) % THREADS == 0,
                "every thread must issue the same number of 16-byte copies per tile");
  static_assert(STAGES >= 2, "a pipeline needs at least two stages");
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per block is at most 227 KiB on H100");
};

// 128x128x32, 4 warps (2 x 2) of 64x64, 4 stages of 16 KiB = 64 KiB: two blocks of 128 threads
// per SM, so one block's barrier wait is covered by the other's MMAs (accumulators alone are
// 4*8*4 = 128 fp32 registers per thread; 244 in all, 2 * 128 * 244 < 64 Ki).
using Default = Config<128, 128, 32, 2, 2, 4, 8>;

template <typename T, class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1) kernel(const gemm::Problem<T> p, bool pair_store) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, STAGES = Cfg::STAGES;
  constexpr int MT = Cfg::MT, NT = Cfg::NT, THREADS = Cfg::THREADS;
  constexpr int A_CPR = Cfg::A_CPR, B_CPR = Cfg::B_CPR;
  extern __shared__ float4 smem4[];  // float4: 16-byte alignment for cp.async and ldmatrix
  T* smem = reinterpret_cast<T*>(smem4);

  // --- tile assignment: grouped order of BM x BN C tiles; warp (wm, wn) owns a WM x WN piece
  const int tiles_m = gemm::cdiv(p.M, BM), tiles_n = gemm::cdiv(p.N, BN);
  const gemm::TileCoord tile = gemm::grouped_tile(blockIdx.x, tiles_m, tiles_n, Cfg::GROUP_M);
  const int m0 = tile.m * BM, n0 = tile.n * BN;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp / Cfg::WARPS_N, wn = warp % Cfg::WARPS_N;

  // --- operand staging: K-tile kt -> stage s. As: [BM][BK] rows of A, Bs: [BK][BN] rows of B,
  // unpadded, 16-byte chunks placed by swizzle(). Chunks past M, N or K are zero-filled
  // (src size 0..16 bytes), so the tails multiply as zeros without a branch in the K loop.
  auto load_stage = [&](int s, int kt) {
    T* As = smem + s * (Cfg::A_ELEMS + Cfg::B_ELEMS);
    T* Bs = As + Cfg::A_ELEMS;
    const int k0 = kt * BK;
#pragma unroll
    for (int i = 0; i < Cfg::A_ELEMS / 8 / THREADS; ++i) {
      const int id = threadIdx.x + i * THREADS;
      const int r = id / A_CPR, c = id % A_CPR, k = k0 + c * 8;
      const int bytes = m0 + r < p.M ? max(0, min(16, 2 * (p.K - k))) : 0;
      gemm::cp_async_16(As + (r * A_CPR + swizzle<A_CPR>(r, c)) * 8,
                        bytes ? p.A + (m0 + r) * p.lda + k : p.A, bytes);
    }
#pragma unroll
    for (int i = 0; i < Cfg::B_ELEMS / 8 / THREADS; ++i) {
      const int id = threadIdx.x + i * THREADS;
      const int r = id / B_CPR, c = id % B_CPR, n = n0 + c * 8;  // a warp: 2 rows of 256 B of B
      const int bytes = k0 + r < p.K ? max(0, min(16, 2 * (p.N - n))) : 0;
      gemm::cp_async_16(Bs + (r * B_CPR + swizzle<B_CPR>(r, c)) * 8,
                        bytes ? p.B + (k0 + r) * p.ldb + n : p.B, bytes);
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

  // ldmatrix.x4 addressing, the same for A and B: lane l points at row l % 16 of the 16-row
  // slab, chunk l / 16 of the chunk pair. For A that yields the 4 registers of an m16k16
  // fragment (rows 0-7 / 8-15 x k 0-7 / 8-15); for B (rows = k, .trans) it yields b0b1 and
  // b2b3 of two adjacent n8 fragments. Byte offsets within a stage are loop-invariant.
  const int lrow = lane % 16, lchunk = lane / 16;
  uint32_t a_off[BK / 16][MT], b_off[BK / 16][NT / 2];
#pragma unroll
  for (int ks = 0; ks < BK / 16; ++ks) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int r = wm * Cfg::WM + mt * 16 + lrow, c = ks * 2 + lchunk;
      a_off[ks][mt] = (r * A_CPR + swizzle<A_CPR>(r, c)) * 16;
    }
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      const int r = ks * 16 + lrow, c = (wn * Cfg::WN + np * 16) / 8 + lchunk;
      b_off[ks][np] = Cfg::A_ELEMS * 2 + (r * B_CPR + swizzle<B_CPR>(r, c)) * 16;
    }
  }

  float acc[MT][NT][4] = {};  // 64x64 fp32 per warp: 128 registers per thread

  // --- loop over K: wait for tile kt, refill the slot freed last iteration, multiply ---------
  const uint32_t smem_base = gemm::smem_u32(smem);
  int read_s = 0, write_s = STAGES - 1;
  for (int kt = 0; kt < KT; ++kt) {
    gemm::cp_async_wait<STAGES - 2>();  // this thread's copies of tile kt are done ...
    __syncthreads();                    // ... and everyone's; all warps also left tile kt-1
    if (kt + STAGES - 1 < KT) load_stage(write_s, kt + STAGES - 1);
    gemm::cp_async_commit();
    write_s = write_s + 1 == STAGES ? 0 : write_s + 1;

    const uint32_t stage = smem_base + read_s * Cfg::STAGE_BYTES;
    read_s = read_s + 1 == STAGES ? 0 : read_s + 1;
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {
      uint32_t a[MT][4], b[NT / 2][4];  // b[np]: {b0b1, b2b3} of n8 tile 2np, then of 2np+1
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) ldmatrix_x4(a[mt], stage + a_off[ks][mt]);
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) ldmatrix_x4_trans(b[np], stage + b_off[ks][np]);
      // MT*NT = 32 MMAs from 8 ldmatrix: each A fragment feeds 8 MMAs, each B fragment 4.
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          mma_16816<T>(acc[mt][nt], a[mt], b[nt / 2][(nt % 2) * 2], b[nt / 2][(nt % 2) * 2 + 1]);
    }
  }
  gemm::cp_async_wait<0>();  // only empty groups remain; leave none pending at exit

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
  const auto k = kernel<T, Cfg>;
  // Over 48 KiB of dynamic shared memory needs an explicit opt-in.
  cudaError_t err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::SMEM_BYTES);
  if (err != cudaSuccess) return err;
  const bool pair_store = p.ldc % 2 == 0 && (reinterpret_cast<uintptr_t>(p.C) & 3) == 0;
  const int blocks = gemm::cdiv(p.M, Cfg::BM) * gemm::cdiv(p.N, Cfg::BN);  // 1-D: grouped order
  k<<<blocks, Cfg::THREADS, Cfg::SMEM_BYTES, stream>>>(p, pair_store);
  return cudaGetLastError();
}

const char* unsupported(const gemm::Problem<__half>& p) { return gemm::unsupported_16byte_rows(p); }
const char* unsupported(const gemm::Problem<__nv_bfloat16>& p) { return gemm::unsupported_16byte_rows(p); }

cudaError_t launch(const gemm::Problem<__half>& p, cudaStream_t stream) {
  return launch_cfg<__half, Default>(p, stream);
}
cudaError_t launch(const gemm::Problem<__nv_bfloat16>& p, cudaStream_t stream) {
  return launch_cfg<__nv_bfloat16, Default>(p, stream);
}

}  // namespace s11_mma_pipeline
