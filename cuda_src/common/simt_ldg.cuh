// common/simt_ldg.cuh: float4 global -> register -> shared staging of SIMT tiles.
//
// Born in s04 (128-bit loads, A stored transposed) and reused by s05 (which only changes when
// the loads are issued). A tile moves in two steps so the transposition of A happens between
// them: ldg_* fill registers, sts_* write them to shared memory.
//   As: [BK][BM + A_PAD]  (k-major: the inner loop reads 4 consecutive rows of A as one float4)
//   Bs: [BK][BN]
// kVec: the problem passed simt::float4_ok (aligned bases, leading dims multiple of 4), so any
// chunk of 4 columns starting at a multiple of 4 is one 16-byte aligned LDG.E.128. Chunks that
// run past K (for A) or N (for B), and every chunk when !kVec, fall back to predicated scalar
// loads; out-of-range elements become 0 so they add nothing to the sums.
#pragma once
#include "common/gemm.cuh"

namespace simt {

// Padding of the transposed A tile. The 4 scalar stores of a float4 of A go to rows k..k+3 of
// As; with a row stride of BM + 4 words, row k starts 4k banks further on, so the 32 lanes of a
// warp (16 rows m x 2 chunks of k) hit 32 different banks. BM + 4 keeps rows 16-byte aligned.
constexpr int A_PAD = 4;

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

// A chunks per thread: thread e (e = tid + r * NT) loads row e / (BK/4), columns 4 * (e % (BK/4))..
template <int BM, int BK, int NT>
constexpr int a_chunks() { return BM * BK / 4 / NT; }
template <int BK, int BN, int NT>
constexpr int b_chunks() { return BK * BN / 4 / NT; }

template <int BM, int BK, int NT, bool kVec>
__device__ __forceinline__ void ldg_a(float4 (&r)[a_chunks<BM, BK, NT>()], const gemm::Problem<float>& p,
                                      int m0, int k0, int tid) {
  static_assert(BK % 4 == 0 && (BM * BK / 4) % NT == 0, "A tile must split into whole float4s per thread");
#pragma unroll
  for (int i = 0; i < a_chunks<BM, BK, NT>(); ++i) {
    const int e = tid + i * NT, m = e / (BK / 4), k = 4 * (e % (BK / 4));
    const int gm = m0 + m, gk = k0 + k;
    r[i] = load4<kVec>(p.A + gm * p.lda + gk, gm < p.M, p.K - gk);
  }
}

// Transposing store: 4 scalar STS per float4 (the price of float4 reads in the inner loop).
template <int BM, int BK, int NT>
__device__ __forceinline__ void sts_a(float* As, const float4 (&r)[a_chunks<BM, BK, NT>()], int tid) {
#pragma unroll
  for (int i = 0; i < a_chunks<BM, BK, NT>(); ++i) {
    const int e = tid + i * NT, m = e / (BK / 4), k = 4 * (e % (BK / 4));
    As[(k + 0) * (BM + A_PAD) + m] = r[i].x;
    As[(k + 1) * (BM + A_PAD) + m] = r[i].y;
    As[(k + 2) * (BM + A_PAD) + m] = r[i].z;
    As[(k + 3) * (BM + A_PAD) + m] = r[i].w;
  }
}

// B chunks: thread e loads row e / (BN/4) of the slice, columns 4 * (e % (BN/4)): a warp reads
// 512 consecutive bytes of one row of B.
template <int BK, int BN, int NT, bool kVec>
__device__ __forceinline__ void ldg_b(float4 (&r)[b_chunks<BK, BN, NT>()], const gemm::Problem<float>& p,
                                      int k0, int n0, int tid) {
  static_assert(BN % 4 == 0 && (BK * BN / 4) % NT == 0, "B tile must split into whole float4s per thread");
#pragma unroll
  for (int i = 0; i < b_chunks<BK, BN, NT>(); ++i) {
    const int e = tid + i * NT, k = e / (BN / 4), n = 4 * (e % (BN / 4));
    const int gk = k0 + k, gn = n0 + n;
    r[i] = load4<kVec>(p.B + gk * p.ldb + gn, gk < p.K, p.N - gn);
  }
}

template <int BK, int BN, int NT>
__device__ __forceinline__ void sts_b(float* Bs, const float4 (&r)[b_chunks<BK, BN, NT>()], int tid) {
#pragma unroll
  for (int i = 0; i < b_chunks<BK, BN, NT>(); ++i) {
    const int e = tid + i * NT, k = e / (BN / 4), n = 4 * (e % (BN / 4));
    *reinterpret_cast<float4*>(Bs + k * BN + n) = r[i];  // STS.128, consecutive lanes: no conflict
  }
}

}  // namespace simt
