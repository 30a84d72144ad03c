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

// A chunk e = tid + i * NT. K-contiguous A: row m = e / (BK/4), columns k = 4 * (e % (BK/4)) ..
// (a warp reads 16 rows x 32 bytes, whole sectors). M-contiguous A (TN, stored [K][M]): row
// k = e / (BM/4), columns m = 4 * (e % (BM/4)) .. (a warp reads 512 consecutive bytes).
template <gemm::Layout L, int BM, int BK, int NT, bool kVec>
__device__ __forceinline__ void ldg_a(float4 (&r)[a_chunks<BM, BK, NT>()], const gemm::Problem<float>& p,
                                      int m0, int k0, int tid) {
  static_assert(BK % 4 == 0 && BM % 4 == 0 && (BM * BK / 4) % NT == 0,
                "A tile must split into whole float4s per thread");
#pragma unroll
  for (int i = 0; i < a_chunks<BM, BK, NT>(); ++i) {
    const int e = tid + i * NT;
    if constexpr (gemm::Majors<L>::A_MN) {
      const int k = e / (BM / 4), m = 4 * (e % (BM / 4));
      const int gm = m0 + m, gk = k0 + k;
      r[i] = load4<kVec>(p.A + gk * p.lda + gm, gk < p.K, p.M - gm);
    } else {
      const int m = e / (BK / 4), k = 4 * (e % (BK / 4));
      const int gm = m0 + m, gk = k0 + k;
      r[i] = load4<kVec>(p.A + gm * p.lda + gk, gm < p.M, p.K - gk);
    }
  }
}

// K-contiguous A: a transposing store, 4 scalar STS per float4 (the price of float4 reads in
// the inner loop). M-contiguous A is already in As's order: one STS.128, consecutive lanes.
template <gemm::Layout L, int BM, int BK, int NT>
__device__ __forceinline__ void sts_a(float* As, const float4 (&r)[a_chunks<BM, BK, NT>()], int tid) {
#pragma unroll
  for (int i = 0; i < a_chunks<BM, BK, NT>(); ++i) {
    const int e = tid + i * NT;
    if constexpr (gemm::Majors<L>::A_MN) {
      const int k = e / (BM / 4), m = 4 * (e % (BM / 4));
      *reinterpret_cast<float4*>(As + k * (BM + A_PAD) + m) = r[i];
    } else {
      const int m = e / (BK / 4), k = 4 * (e % (BK / 4));
      As[(k + 0) * (BM + A_PAD) + m] = r[i].x;
      As[(k + 1) * (BM + A_PAD) + m] = r[i].y;
      As[(k + 2) * (BM + A_PAD) + m] = r[i].z;
      As[(k + 3) * (BM + A_PAD) + m] = r[i].w;
    }
  }
}

// B chunk e. N-contiguous B (NN, TN): row k = e / (BN/4), columns n = 4 * (e % (BN/4)) ..: a
// warp reads 512 consecutive bytes of one row of B. K-contiguous B (NT, stored [N][K]): row
// n = e / (BK/4), columns k = 4 * (e % (BK/4)) .., as A in NN.
template <gemm::Layout L, int BK, int BN, int NT, bool kVec>
__device__ __forceinline__ void ldg_b(float4 (&r)[b_chunks<BK, BN, NT>()], const gemm::Problem<float>& p,
                                      int k0, int n0, int tid) {
  static_assert(BN % 4 == 0 && BK % 4 == 0 && (BK * BN / 4) % NT == 0,
                "B tile must split into whole float4s per thread");
#pragma unroll
  for (int i = 0; i < b_chunks<BK, BN, NT>(); ++i) {
    const int e = tid + i * NT;
    if constexpr (gemm::Majors<L>::B_MN) {
      const int k = e / (BN / 4), n = 4 * (e % (BN / 4));
      const int gk = k0 + k, gn = n0 + n;
      r[i] = load4<kVec>(p.B + gk * p.ldb + gn, gk < p.K, p.N - gn);
    } else {
      const int n = e / (BK / 4), k = 4 * (e % (BK / 4));
      const int gk = k0 + k, gn = n0 + n;
      r[i] = load4<kVec>(p.B + gn * p.ldb + gk, gn < p.N, p.K - gk);
    }
  }
}

// N-contiguous B: STS.128, consecutive lanes, no conflict. K-contiguous B: transposed like A,
// into rows padded by B_PAD (bank = 4k + n: 32 banks for a warp's 16 rows n x 2 chunks of k).
template <gemm::Layout L, int BK, int BN, int NT>
__device__ __forceinline__ void sts_b(float* Bs, const float4 (&r)[b_chunks<BK, BN, NT>()], int tid) {
  constexpr int LD = BN + B_PAD<L>;  // row stride of Bs (words)
#pragma unroll
  for (int i = 0; i < b_chunks<BK, BN, NT>(); ++i) {
    const int e = tid + i * NT;
    if constexpr (gemm::Majors<L>::B_MN) {
      const int k = e / (BN / 4), n = 4 * (e % (BN / 4));
      *reinterpret_cast<float4*>(Bs + k * LD + n) = r[i];
    } else {
      const int n = e / (BK / 4), k = 4 * (e % (BK / 4));
      Bs[(k + 0) * LD + n] = r[i].x;
      Bs[(k + 1) * LD + n] = r[i].y;
      Bs[(k + 2) * LD + n] = r[i].z;
      Bs[(k + 3) * LD + n] = r[i].w;
    }
  }
}

}  // namespace simt
