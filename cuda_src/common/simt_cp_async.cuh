// common/simt_cp_async.cuh: cp.async (LDGSTS) staging of SIMT tiles, global -> shared directly.
//
// Born in s06 (multi-stage pipeline) and reused by the warp-tiled kernel of s07/s08. The
// shared-memory layouts are those of s04/s05 (common/simt_ldg.cuh), in every gemm::Layout:
//   As: [BK][BM + A_PAD]     transposed, so the inner loop reads 4 rows of A as one LDS.128
//   Bs: [BK][BN + B_PAD<L>]  (B_PAD is 0 in NN and TN)
// Each operand is copied in the order it is stored, by one of two copiers:
//   KMajorCopy  (A in NN/NT, B in NT: K contiguous): cp.async cannot transpose a 16-byte chunk,
//               so the slice moves as 4-byte copies (MN*BK/NT per thread and slice: 4 for a
//               128x8 slice and 256 threads) into the transposed, padded tile;
//   MNMajorCopy (A in TN, B in NN/TN: M or N contiguous): already in the tile's order, it
//               moves as 16-byte copies (1 per thread for 128x8).
//
// A copier is built once per thread and keeps its global pointer, row stride and bounds
// predicates in registers, so a slice costs ~3 instructions per copy (pointer step, predicate,
// LDGSTS), not the ~20 of recomputing row * ld + k and all bounds per copy (measured in SASS:
// 110 -> ~30 non-FFMA instructions per 128x128x8 slice). Out-of-range elements are
// zero-filled by the copy itself (src_bytes 0: nothing is read), never branched around, so a
// tail tile adds zeros to the sums. Only the last slice of K checks k. Such a copy's source
// address may point past the tensor: it is never dereferenced (ptxas turns src_bytes 0 into
// LDGSTS's ignore-source predicate), which saves a pointer select per copy.
#pragma once
#include <type_traits>
#include "common/cp_async.cuh"
#include "common/gemm.cuh"
#include "common/layouts.cuh"
#include "common/simt_ldg.cuh"

namespace simt {

// An MN x BK slice of an operand whose rows (MN of them, m of A or n of B) run along K in
// global memory (row r at src + r * ld), into the transposed tile T[BK][LD] (T[k][r]).
// Element e = tid + c*NT of a slice is
//   row r = tid/8 + (c * ROWS) % MN,  column k = 8 * ((c * ROWS) / MN) + tid % 8
// so a warp copies 4 rows x 8 consecutive k (4 full 32-byte sectors of global memory) and,
// with the padded row stride LD (LD = 4 mod 32 words), writes 32 different banks (bank = 4k + r mod 32).
template <int MN, int BK, int NT, int LD>
struct KMajorCopy {
  static constexpr int ROWS = NT / 8;          // rows covered by one pass of the block
  static constexpr int COPIES = MN * BK / NT;  // 4-byte copies per thread per slice
  static constexpr int GROUPS = MN / ROWS;     // distinct row offsets a thread visits
  static_assert(BK % 8 == 0, "K-contiguous copies run along k in groups of 8 (one 32-byte sector)");
  static_assert(NT % 8 == 0 && MN % ROWS == 0 && (MN * BK) % NT == 0,
                "the slice must split into whole passes of NT/8 rows x 8 columns");
  static_assert(GROUPS <= 32, "row predicates are kept as bits of one word");
  static_assert(LD % 32 == 4, "the transposed stores need rows 4 banks apart to avoid conflicts");

  const float* src;  // element c = 0 of the current slice (row tid/8, column k0 + tid%8)
  int step;          // ROWS * ld: from one row group to the next
  int rows_ok;       // bit g: row tid/8 + g*ROWS of the tile is inside the operand
  int dst;           // this thread's first shared-memory word in the tile (within a stage)

  __device__ __forceinline__ KMajorCopy(const float* base, int ld, int r0, int rows, int tid) {
    const int r = tid / 8, k = tid % 8;
    src = base + (r0 + r) * ld + k;
    step = ROWS * ld;
    rows_ok = 0;
#pragma unroll
    for (int g = 0; g < GROUPS; ++g) rows_ok |= (r0 + r + g * ROWS < rows) << g;
    dst = k * LD + r;
  }

  template <bool kTail>
  __device__ __forceinline__ void copy(float* T, int k_left) const {
    const int k = threadIdx.x % 8;
#pragma unroll
    for (int c = 0; c < COPIES; ++c) {
      const int g = c % GROUPS, kg = c / GROUPS;  // row group, k group of copy c
      const bool ok = ((rows_ok >> g) & 1) && (!kTail || 8 * kg + k < k_left);
      gemm::cp_async_4(T + dst + 8 * kg * LD + g * ROWS, src + g * step + 8 * kg, ok ? 4 : 0);
    }
  }

  __device__ __forceinline__ void advance(int /*ld*/) { src += BK; }  // BK columns on
};

// A BK x MN slice of an operand stored [K][MN] (row k at src + k * ld), into T[BK][LD] in the
// same order. Chunk c of a thread is row k = tid/(MN/4) + c * ROWS, columns 4 * (tid % (MN/4)):
// for MN = 128 a warp copies 512 consecutive bytes of one row, into 512 consecutive bytes.
template <int MN, int BK, int NT, int LD, bool kVec>
struct MNMajorCopy {
  static constexpr int ROWS = NT / (MN / 4);        // rows of k covered by one pass of the block
  static constexpr int COPIES = BK * MN / 4 / NT;   // 16-byte chunks per thread per slice
  static_assert(MN % 4 == 0 && NT % (MN / 4) == 0 && BK % ROWS == 0,
                "the slice must split into whole passes of rows");
  static_assert(LD % 4 == 0, "tile rows must stay 16-byte aligned for 16-byte copies");

  const float* src;  // chunk c = 0 of the current slice (row k0 + tid/(MN/4))
  int step;          // ROWS * ld
  int cols_ok;       // kVec: in-range bytes of this thread's 16-byte chunk (0..16);
                     // !kVec: bit j: column j of the chunk is inside the operand
  int dst;           // this thread's first shared-memory word in the tile (within a stage)

  __device__ __forceinline__ MNMajorCopy(const float* base, int ld, int c0, int cols, int tid) {
    const int k = tid / (MN / 4), c = 4 * (tid % (MN / 4));
    src = base + k * ld + c0 + c;
    step = ROWS * ld;
    const int n = min(max(cols - c0 - c, 0), 4);
    cols_ok = kVec ? 4 * n : (1 << n) - 1;
    dst = k * LD + c;
  }

  template <bool kTail>
  __device__ __forceinline__ void copy(float* T, int k_left) const {
    const int k = threadIdx.x / (MN / 4);
#pragma unroll
    for (int c = 0; c < COPIES; ++c) {
      const bool k_ok = !kTail || k + c * ROWS < k_left;
      float* d = T + dst + c * ROWS * LD;
      const float* s = src + c * step;
      if (kVec) {
        gemm::cp_async_16(d, s, k_ok ? cols_ok : 0);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) gemm::cp_async_4(d + j, s + j, k_ok && ((cols_ok >> j) & 1) ? 4 : 0);
      }
    }
  }

  __device__ __forceinline__ void advance(int ld) { src += BK * ld; }  // BK rows down
};

// Both operands' slices for layout L: one copier each, picked by which dimension is contiguous.
template <gemm::Layout L, int BM, int BN, int BK, int NT, bool kVec>
struct CpAsyncTiles {
  static constexpr int AS_LD = BM + A_PAD, BS_LD = BN + B_PAD<L>;  // tile row strides (words)
  using ACopy = std::conditional_t<gemm::Majors<L>::A_MN, MNMajorCopy<BM, BK, NT, AS_LD, kVec>,
                                   KMajorCopy<BM, BK, NT, AS_LD>>;
  using BCopy = std::conditional_t<gemm::Majors<L>::B_MN, MNMajorCopy<BN, BK, NT, BS_LD, kVec>,
                                   KMajorCopy<BN, BK, NT, BS_LD>>;
  ACopy a;  // A: rows m (K-contiguous) or rows k (TN)
  BCopy b;  // B: rows k (NN, TN) or rows n (NT)

  __device__ __forceinline__ CpAsyncTiles(const gemm::Problem<float>& p, int m0, int n0, int tid)
      : a(p.A, p.lda, m0, p.M, tid), b(p.B, p.ldb, n0, p.N, tid) {}

  // Copies the current slice into As/Bs (one stage). k_left = K - k0: only the last slice of
  // K passes k_left < BK and pays for a k check per copy.
  __device__ __forceinline__ void copy(float* As, float* Bs, int k_left) const {
    if (k_left >= BK) { a.template copy<false>(As, k_left); b.template copy<false>(Bs, k_left); }
    else              { a.template copy<true>(As, k_left);  b.template copy<true>(Bs, k_left); }
  }

  // The next slice: BK further along K in both operands.
  __device__ __forceinline__ void advance(const gemm::Problem<float>& p) { a.advance(p.lda); b.advance(p.ldb); }
};

}  // namespace simt
