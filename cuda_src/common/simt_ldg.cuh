// common/simt_ldg.cuh: float4 global -> register -> shared staging of SIMT tiles, per layout.
//
// Born in s04 (128-bit loads, A stored transposed) and reused by s05 (which only changes when
// the loads are issued). A tile moves in two steps so a transposition can happen between
// them: ldg_* fill registers, sts_* write them to shared memory. The shared-memory tiles are
// the same in every layout (gemm::Layout; the layout is a template parameter, one
// instantiation each):
//   As: [BK][BM + A_PAD]     (k-major: the inner loop reads 4 consecutive rows of A as one float4)
//   Bs: [BK][BN + B_PAD<L>]  (B_PAD is 0 in NN and TN)
// A float4 always runs along the operand's contiguous dimension (common/layouts.cuh):
//   K-contiguous (A in NN/NT, B in NT): 4 consecutive k, stored transposed as 4 scalar STS;
//   M- or N-contiguous (A in TN, B in NN/TN): 4 consecutive m or n, stored as one STS.128.
// kVec: the problem passed simt::float4_ok (aligned bases, leading dims multiple of 4), so any
// chunk of 4 elements starting at a multiple of 4 along a row is one 16-byte aligned
// LDG.E.128. Chunks that run past the contiguous dimension's end, and every chunk when !kVec,
// fall back to predicated scalar loads; out-of-range elements become 0 so they add nothing.
#pragma once
#include "common/gemm.cuh"
#include "common/layouts.cuh"

namespace simt {

// Padding of a transposed tile (As always; Bs in NT). The 4 scalar stores of a float4 that
// runs along k go to rows k..k+3; with a row stride of BM + 4 words (BM a multiple of 32), row
// k starts 4k banks further on, so the 32 lanes of a warp (16 rows m x 2 chunks of k, or
// 4 x 8 in the cp.async copies) hit 32 different banks. BM + 4 keeps rows 16-byte aligned.
constexpr int A_PAD = 4;
// Bs is written transposed only when B is K-contiguous (NT), and then needs the same padding;
// in NN and TN its rows are copied straight (consecutive float4s: no conflict without it).
template <gemm::Layout L>
constexpr int B_PAD = gemm::Majors<L>::B_MN ? 0 : A_PAD;

// 4 consecutive floats at src (src[0..avail-1] valid, avail may be <= 0 or > 4).
template <bool kVec>
__device__ __forceinline__ float4 load4(const float* src, bool row_ok, int avail) {
  if (kVec && row_ok && avail >= 4) return *reinterpret_cast<const float4*>(src);
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  if (row_ok) {
    if (avail > 0) v.x = src[0];
    if (avail > 1) v.y = src[1];
    if (avail > 2) v.z = src[2];
    if (avail > 3) v.w = src[3];
  }
  return v;
}

// float4 chunks per thread and tile: BM x BK of A, BK x BN of B, whichever way they run.
template <int BM, int BK, int NT>
constexpr int a_chunks() { return BM * BK / 4 / NT; }
template <int BK, int BN, int NT>
constexpr int b_chunks() { return BK * BN / 4 / NT; }

// One operand tile (A: X = M, B: X = N) of BX x BK elements, chunk e = tid + i * NT.
// X-contiguous (A in TN stored [K][M], B in NN/TN): row k = e / (BX/4), columns x = 4 * (e % (BX/4))
// .. (a warp reads 512 consecutive bytes). K-contiguous (A in NN/NT, B in NT stored [N][K]): row
// x = e / (BK/4), columns k = 4 * (e % (BK/4)) .. (a warp reads 16 rows x 32 bytes, whole sectors).
template <bool X_MAJOR, int BX, int BK, int NT, bool kVec>
__device__ __forceinline__ void ldg_tile(float4 (&r)[BX * BK / 4 / NT], const float* src, int ld, int x_end,
                                         int k_end, int x0, int k0, int tid) {
  static_assert(BK % 4 == 0 && BX % 4 == 0 && (BX * BK / 4) % NT == 0,
                "an operand tile must split into whole float4s per thread");
#pragma unroll
  for (int i = 0; i < BX * BK / 4 / NT; ++i) {
    const int e = tid + i * NT;
    if constexpr (X_MAJOR) {
      const int k = e / (BX / 4), x = 4 * (e % (BX / 4));
      const int gx = x0 + x, gk = k0 + k;
      r[i] = load4<kVec>(src + gk * ld + gx, gk < k_end, x_end - gx);
    } else {
      const int x = e / (BK / 4), k = 4 * (e % (BK / 4));
      const int gx = x0 + x, gk = k0 + k;
      r[i] = load4<kVec>(src + gx * ld + gk, gx < x_end, k_end - gk);
    }
  }
}

// Into the [BK][LD] tile: an X-contiguous float4 is already in the tile's order (one STS.128,
// consecutive lanes, no conflict); a K-contiguous one is stored transposed, 4 scalar STS (the
// price of float4 reads in the inner loop), conflict-free with the padded LD (A_PAD above).
template <bool X_MAJOR, int BX, int BK, int NT, int LD>
__device__ __forceinline__ void sts_tile(float* S, const float4 (&r)[BX * BK / 4 / NT], int tid) {
#pragma unroll
  for (int i = 0; i < BX * BK / 4 / NT; ++i) {
    const int e = tid + i * NT;
    if constexpr (X_MAJOR) {
      const int k = e / (BX / 4), x = 4 * (e % (BX / 4));
      *reinterpret_cast<float4*>(S + k * LD + x) = r[i];
    } else {
      const int x = e / (BK / 4), k = 4 * (e % (BK / 4));
      S[(k + 0) * LD + x] = r[i].x;
      S[(k + 1) * LD + x] = r[i].y;
      S[(k + 2) * LD + x] = r[i].z;
      S[(k + 3) * LD + x] = r[i].w;
    }
  }
}

// A's and B's tiles in layout L: As [BK][BM + A_PAD], Bs [BK][BN + B_PAD<L>].
template <gemm::Layout L, int BM, int BK, int NT, bool kVec>
__device__ __forceinline__ void ldg_a(float4 (&r)[a_chunks<BM, BK, NT>()], const gemm::Problem<float>& p,
                                      int m0, int k0, int tid) {
  ldg_tile<gemm::Majors<L>::A_MN, BM, BK, NT, kVec>(r, p.A, p.lda, p.M, p.K, m0, k0, tid);
}
template <gemm::Layout L, int BM, int BK, int NT>
__device__ __forceinline__ void sts_a(float* As, const float4 (&r)[a_chunks<BM, BK, NT>()], int tid) {
  sts_tile<gemm::Majors<L>::A_MN, BM, BK, NT, BM + A_PAD>(As, r, tid);
}
template <gemm::Layout L, int BK, int BN, int NT, bool kVec>
__device__ __forceinline__ void ldg_b(float4 (&r)[b_chunks<BK, BN, NT>()], const gemm::Problem<float>& p,
                                      int k0, int n0, int tid) {
  ldg_tile<gemm::Majors<L>::B_MN, BN, BK, NT, kVec>(r, p.B, p.ldb, p.N, p.K, n0, k0, tid);
}
template <gemm::Layout L, int BK, int BN, int NT>
__device__ __forceinline__ void sts_b(float* Bs, const float4 (&r)[b_chunks<BK, BN, NT>()], int tid) {
  sts_tile<gemm::Majors<L>::B_MN, BN, BK, NT, BN + B_PAD<L>>(Bs, r, tid);
}

}  // namespace simt
