// common/simt_microtile.cuh: one k step of a thread's TM x TN micro-tile, read as float4.
//
// Born in s04 (float4 reads of the transposed A tile) and reused by s06 and by the warp-tiled
// kernel of s07/s08 (common/simt_warp_tiled.cuh); s05 takes outer_product and writes its two
// float4 loads out (its comment says why). Those stages change how tiles reach shared memory
// and which outputs a thread owns, not this step. Layouts (common/simt_ldg.cuh):
//   As: [BK][BM + A_PAD]  transposed: 4 consecutive rows of A are one float4 of an As row
//   Bs: [BK][BN]          (NT: rows padded to BN + 4; this step only follows the row pointers)
// A thread owns (TM/4) x (TN/4) groups of 4x4 outputs; its A groups lie A_GS rows apart and
// its B groups B_GS columns apart (s04-s06: BM/2 and BN/2; warp tiles: 16 and 32). Per k step
// TM/4 + TN/4 LDS.128 feed TM * TN FFMA (8x8: 4 per 64, where s03's scalar reads took 16).
#pragma once

namespace simt {

// This k step's operands: TM/4 float4 of the As row at `as`, TN/4 float4 of the Bs row at `bs`.
template <int A_GS, int B_GS, int TM, int TN>
__device__ __forceinline__ void load_fragments(float (&a)[TM], float (&b)[TN], const float* as, const float* bs) {
  static_assert(TM % 4 == 0 && TN % 4 == 0, "the micro-tile must be whole float4 groups");
#pragma unroll
  for (int g = 0; g < TM / 4; ++g)
    *reinterpret_cast<float4*>(a + 4 * g) = *reinterpret_cast<const float4*>(as + A_GS * g);
#pragma unroll
  for (int g = 0; g < TN / 4; ++g)
    *reinterpret_cast<float4*>(b + 4 * g) = *reinterpret_cast<const float4*>(bs + B_GS * g);
}

// acc += a (outer) b: TM * TN FFMA and nothing else.
template <int TM, int TN>
__device__ __forceinline__ void outer_product(float (&acc)[TM][TN], const float (&a)[TM], const float (&b)[TN]) {
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
}

}  // namespace simt
