// common/simt_cp_async.cuh: cp.async (LDGSTS) staging of SIMT tiles, global -> shared directly.
//
// Born in s06 (multi-stage pipeline) and reused by the warp-tiled kernel of s07/s08. The
// shared-memory layouts are those of s04/s05 (common/simt_ldg.cuh):
//   As: [BK][BM + A_PAD]  transposed, so the inner loop reads 4 rows of A as one LDS.128
//   Bs: [BK][BN]
// cp.async cannot transpose a 16-byte chunk, so A moves as 4-byte copies (BM*BK/NT per thread
// per slice: 4 for 128x8 and 256 threads) while B moves as 16-byte copies (1 per thread).
//
// The copier is built once per thread and keeps its global pointers, row strides and bounds
// predicates in registers, so a slice costs ~3 instructions per copy (pointer step, predicate,
// LDGSTS), not the ~20 of recomputing row * ld + k and all bounds per copy (measured in SASS:
// 110 -> ~30 non-FFMA instructions per 128x128x8 slice). Out-of-range elements are
// zero-filled by the copy itself (src_bytes 0: nothing is read), never branched around, so a
// tail tile adds zeros to the sums. Only the last slice of K checks k. Such a copy's source
// address may point past the tensor: it is never dereferenced (ptxas turns src_bytes 0 into
// LDGSTS's ignore-source predicate), which saves a pointer select per copy.
#pragma once
#include "common/cp_async.cuh"
#include "common/gemm.cuh"
#include "common/simt_ldg.cuh"

namespace simt {

template <int BM, int BN, int BK, int NT, bool kVec>
struct CpAsyncTiles {
  // A: element e = tid + r*NT of a slice is
  //   row m = tid/8 + (r * A_ROWS) % BM,  column k = 8 * ((r * A_ROWS) / BM) + tid % 8
  // so a warp copies 4 rows x 8 consecutive k (4 full 32-byte sectors of global memory) and,
  // with the A_PAD row stride, writes 32 different banks (bank = 4k + m mod 32).
  static constexpr int A_ROWS = NT / 8;            // rows of A covered by one pass of the block
  static constexpr int A_COPIES = BM * BK / NT;    // 4-byte copies per thread per slice
  static constexpr int A_GROUPS = BM / A_ROWS;     // distinct row offsets a thread visits
  // B: chunk e = tid + r*NT is row k = tid/(BN/4) + r * B_ROWS, columns 4 * (tid % (BN/4)):
  // a warp copies 512 consecutive bytes of one row of B.
  static constexpr int B_ROWS = NT / (BN / 4);
  static constexpr int B_COPIES = BK * BN / 4 / NT;
  static_assert(BK % 8 == 0, "A copies run along k in groups of 8 (one 32-byte sector)");
  static_assert(NT % 8 == 0 && BM % A_ROWS == 0 && (BM * BK) % NT == 0,
                "the A slice must split into whole passes of NT/8 rows x 8 columns");
  static_assert(A_GROUPS <= 32, "row predicates are kept as bits of one word");
  static_assert(NT % (BN / 4) == 0 && BK % B_ROWS == 0, "the B slice must split into whole passes of rows");

  const float* a_src;  // element r = 0 of the current slice (row tid/8, column k0 + tid%8)
  const float* b_src;  // chunk r = 0 of the current slice (row k0 + tid/(BN/4))
  int a_step;          // A_ROWS * lda: from one row group to the next
  int b_step;          // B_ROWS * ldb
  int a_rows_ok;       // bit g: row tid/8 + g*A_ROWS of the tile is < M
  int b_cols_ok;       // kVec: in-range bytes of this thread's 16-byte chunk (0..16);
                       // !kVec: bit j: column j of the chunk is < N
  int a_dst, b_dst;    // this thread's first shared-memory word in As / Bs (within a stage)

  __device__ __forceinline__ CpAsyncTiles(const gemm::Problem<float>& p, int m0, int n0, int tid) {
    const int am = tid / 8, ak = tid % 8;
    a_src = p.A + (m0 + am) * p.lda + ak;
    a_step = A_ROWS * p.lda;
    a_rows_ok = 0;
#pragma unroll
    for (int g = 0; g < A_GROUPS; ++g) a_rows_ok |= (m0 + am + g * A_ROWS < p.M) << g;
    a_dst = ak * (BM + A_PAD) + am;

    const int bk = tid / (BN / 4), bn = 4 * (tid % (BN / 4));
    b_src = p.B + bk * p.ldb + n0 + bn;
    b_step = B_ROWS * p.ldb;
    const int cols = min(max(p.N - n0 - bn, 0), 4);
    b_cols_ok = kVec ? 4 * cols : (1 << cols) - 1;
    b_dst = bk * BN + bn;
  }

  // Copies the current slice into As/Bs (one stage). k_left = K - k0: only the last slice of
  // K passes k_left < BK and pays for a k check per copy.
  __device__ __forceinline__ void copy(float* As, float* Bs, int k_left) const {
    if (k_left >= BK) copy_impl<false>(As, Bs, k_left);
    else              copy_impl<true>(As, Bs, k_left);
  }

  // The next slice: BK columns of A to the right, BK rows of B down.
  __device__ __forceinline__ void advance(int ldb) { a_src += BK; b_src += BK * ldb; }

 private:
  template <bool kTail>
  __device__ __forceinline__ void copy_impl(float* As, float* Bs, int k_left) const {
    const int ak = threadIdx.x % 8, bk = threadIdx.x / (BN / 4);
#pragma unroll
    for (int r = 0; r < A_COPIES; ++r) {
      const int g = r % A_GROUPS, kg = r / A_GROUPS;  // row group, k group of copy r
      const bool ok = ((a_rows_ok >> g) & 1) && (!kTail || 8 * kg + ak < k_left);
      gemm::cp_async_4(As + a_dst + 8 * kg * (BM + A_PAD) + g * A_ROWS,
                       a_src + g * a_step + 8 * kg, ok ? 4 : 0);
    }
#pragma unroll
    for (int r = 0; r < B_COPIES; ++r) {
      const bool k_ok = !kTail || bk + r * B_ROWS < k_left;
      float* dst = Bs + b_dst + r * B_ROWS * BN;
      const float* src = b_src + r * b_step;
      if (kVec) {
        gemm::cp_async_16(dst, src, k_ok ? b_cols_ok : 0);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) gemm::cp_async_4(dst + j, src + j, k_ok && ((b_cols_ok >> j) & 1) ? 4 : 0);
      }
    }
  }
};

}  // namespace simt
