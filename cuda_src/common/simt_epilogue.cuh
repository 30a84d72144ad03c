// common/simt_epilogue.cuh: write a thread's register tile of C (alpha/beta, tails, float4 stores).
//
// Born in s04 (float4 micro-tiles) and shared by every SIMT stage after it (s05-s08): those
// stages differ in how tiles are staged and scheduled, not in how a finished tile leaves.
// A thread owns TM x TN outputs laid out as groups of 4 consecutive rows / columns:
//   row(i) = row0 + (i / 4) * ROW_STEP + i % 4        i in [0, TM)
//   col(j) = col0 + (j / 4) * COL_STEP + j % 4        j in [0, TN)
// so each group of 4 columns is one float4 store when C allows it.
#pragma once
#include "common/gemm.cuh"

namespace simt {

// True when every operand may move as float4: 16-byte aligned bases and leading dimensions that
// are multiples of 4 floats, so every 4-aligned column of every stored row starts on a 16-byte
// boundary. One rule in every layout: a float4 (or 16-byte cp.async) always runs along an
// operand's stored rows (its contiguous dimension: K or M for A, N or K for B, N for C), whose
// stride is the leading dimension. Stages pick their vector (kVec) or scalar instantiation of
// the problem's layout from this at launch (study.autotune.vector_path mirrors it).
inline bool float4_ok(const gemm::Problem<float>& p) {
  auto aligned = [](const void* q) { return (reinterpret_cast<size_t>(q) & 15) == 0; };
  return aligned(p.A) && aligned(p.B) && aligned(p.C) &&
         p.lda % 4 == 0 && p.ldb % 4 == 0 && p.ldc % 4 == 0;
}

// One output: beta == 0 means C is write-only (it may hold NaN), so it is never read.
__device__ __forceinline__ float axpby(float acc, const float* c, float alpha, float beta) {
  return beta == 0.f ? alpha * acc : alpha * acc + beta * *c;
}

template <int TM, int TN, int ROW_STEP, int COL_STEP, bool kVec>
__device__ __forceinline__ void store_c(const gemm::Problem<float>& p, const float (&acc)[TM][TN],
                                        int row0, int col0) {
  static_assert(TM % 4 == 0 && TN % 4 == 0, "the micro-tile must be whole float4 groups");
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = row0 + (i / 4) * ROW_STEP + i % 4;
    if (row >= p.M) continue;  // M tail
#pragma unroll
    for (int jg = 0; jg < TN / 4; ++jg) {
      const int col = col0 + jg * COL_STEP;
      float* c = p.C + row * p.ldc + col;
      if (kVec && col + 3 < p.N) {
        // One 128-bit store (and, only if beta != 0, one 128-bit load) per 4 outputs.
        float4 v = make_float4(p.alpha * acc[i][jg * 4 + 0], p.alpha * acc[i][jg * 4 + 1],
                               p.alpha * acc[i][jg * 4 + 2], p.alpha * acc[i][jg * 4 + 3]);
        if (p.beta != 0.f) {
          const float4 old = *reinterpret_cast<const float4*>(c);
          v.x += p.beta * old.x; v.y += p.beta * old.y; v.z += p.beta * old.z; v.w += p.beta * old.w;
        }
        *reinterpret_cast<float4*>(c) = v;
      } else {
        // N tail or misaligned C: scalar stores, each one predicated.
#pragma unroll
        for (int jj = 0; jj < 4; ++jj)
          if (col + jj < p.N) c[jj] = axpby(acc[i][jg * 4 + jj], c + jj, p.alpha, p.beta);
      }
    }
  }
}

}  // namespace simt
