// common/tc_epilogue.cuh: element conversions and the WMMA epilogue of the tensor-core stages.
//
// torch builds with __CUDA_NO_HALF_OPERATORS__ / __CUDA_NO_HALF_CONVERSIONS__, so __half and
// __nv_bfloat16 have no implicit casts or arithmetic here: every conversion is an intrinsic
// (round-to-nearest-even), gathered in to_float / from_float overloads so kernels templated on
// the element type stay free of per-type branches.
#pragma once
#include <mma.h>
#include "common/gemm.cuh"

namespace gemm {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// C[row][col] = alpha * acc + beta * C[row][col]; beta == 0 never reads C (it may hold NaN).
template <typename T>
__device__ __forceinline__ void store_scaled(T* c, float acc, float alpha, float beta) {
  *c = from_float<T>(beta == 0.f ? alpha * acc : alpha * acc + beta * to_float(*c));
}

// WMMA epilogue. A warp owns FM x FN accumulator fragments (16x16 fp32 each) whose register
// layout is opaque, so they cannot be predicated element by element against the M/N tails.
// Each 16-row slab of fragments goes through a per-warp shared buffer `stage`
// ([16][FN * 16 + 4] floats, the +4 keeps the 16 row starts on different banks), and the warp
// then writes the slab row by row: lane l owns columns l, l + 32, ..., so each access is 32
// consecutive outputs (128 B fp32, 64 B fp16/bf16: coalesced, and conflict-free shared reads),
// with each element predicated.
template <int FM, int FN, typename T, typename Frag>
__device__ __forceinline__ void wmma_store_tile(const Problem<T>& p, const Frag (&acc)[FM][FN],
                                                float* stage, int row0, int col0) {
  constexpr int LD = FN * 16 + 4;  // floats per staged row; multiple of 4 as store_matrix_sync needs
  constexpr int COLS_PER_LANE = FN * 16 / 32;
  static_assert(FN * 16 % 32 == 0, "a staged row must split evenly over the 32 lanes");
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < FM; ++i) {
#pragma unroll
    for (int j = 0; j < FN; ++j)
      nvcuda::wmma::store_matrix_sync(stage + j * 16, acc[i][j], LD, nvcuda::wmma::mem_row_major);
    __syncwarp();  // the slab is complete before any lane reads another lane's fragment
#pragma unroll 4
    for (int r = 0; r < 16; ++r) {
      const int row = row0 + i * 16 + r;
      if (row >= p.M) break;  // M tail (rows only grow with r)
#pragma unroll
      for (int e = 0; e < COLS_PER_LANE; ++e) {
        const int cl = e * 32 + lane;
        const int col = col0 + cl;
        if (col < p.N) store_scaled(p.C + row * p.ldc + col, stage[r * LD + cl], p.alpha, p.beta);
      }
    }
    __syncwarp();  // every lane has read the slab before the next one overwrites it
  }
}

}  // namespace gemm
