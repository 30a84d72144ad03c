// common/simt_grid.cuh: host side of the SIMT stages that launch a 2-D grid of 128x128 tiles.
//
// Born in s03 (block (bx, by) owns C[by*BM .. +BM][bx*BN .. +BN]) and shared by s04-s06, which
// keep its grid and add the choice between the float4 (kVec) and the scalar instantiation of
// their kernel (simt::float4_ok, common/simt_epilogue.cuh); the stage passes the two
// instantiations of the problem's layout (gemm::with_layout). grid.x runs along N (up to
// 2^31-1 blocks); grid.y along M holds at most 65535 blocks, which is what limits M.
#pragma once
#include "common/gemm.cuh"
#include "common/simt_epilogue.cuh"

namespace simt {

// nullptr, or the refusal when M needs more than 65535 rows of BM-row blocks.
template <int BM>
inline const char* unsupported_grid_y(const gemm::Problem<float>& p) {
  static_assert(BM == 128, "the refusal below spells out BM = 128");
  if (gemm::cdiv(p.M, BM) > 65535) return "M must be <= 8388480: grid.y holds M/128 blocks (limit 65535)";
  return nullptr;
}

// One NT-thread block per BM x BN tile of C; `vec` runs when every operand may move as float4,
// `scalar` otherwise.
template <int BM, int BN, int NT>
cudaError_t launch_grid_2d(const gemm::Problem<float>& p, cudaStream_t stream,
                           void (*vec)(gemm::Problem<float>), void (*scalar)(gemm::Problem<float>)) {
  const dim3 grid(gemm::cdiv(p.N, BN), gemm::cdiv(p.M, BM));
  if (float4_ok(p)) vec<<<grid, NT, 0, stream>>>(p);
  else              scalar<<<grid, NT, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace simt
