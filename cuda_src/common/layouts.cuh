// common/layouts.cuh: which dimension of each operand is contiguous, per gemm::Layout, and the
// host-side dispatch of a launch to one instantiation per layout.
//
// Used by the stages that take NN, NT and TN (the fp32 SIMT stages s01-s08, the 16-bit
// tensor-core stages s10-s14). Each layout gets its own kernel instantiation (the layout is a
// template parameter), so the primary layout's kernel is the same code as before the others
// were added and no layout pays a runtime branch:
//            A stored          B stored          A is          B is
//   NN       [M][K] row-major  [K][N] row-major  K-major       N-major (MN-major)
//   NT       [M][K] row-major  [N][K] row-major  K-major       K-major
//   TN       [K][M] row-major  [K][N] row-major  M-major       N-major
// "K-major": K is the contiguous dimension (what mma/wgmma read without a transpose);
// "MN-major": M (of A) or N (of B) is, and the hardware's transposing path reads it
// (WMMA col_major fragments, ldmatrix .trans, wgmma's tnspA / tnspB bits). The SIMT stages
// have no such path: they transpose a K-major operand between global and shared memory
// (common/simt_ldg.cuh, common/simt_cp_async.cuh).
#pragma once
#include <type_traits>
#include "gemm.cuh"

namespace gemm {

template <Layout L>
struct Majors {
  static constexpr bool A_MN = L == Layout::TN;  // A's contiguous dimension is M
  static constexpr bool B_MN = L != Layout::NT;  // B's contiguous dimension is N
};

// Where layout L stores A(m, k) and B(k, n), in elements from the base pointer: for the scalar
// stages (s01-s03) that address the operands one element at a time.
template <Layout L>
__host__ __device__ __forceinline__ int a_offset(int m, int k, int lda) {
  return Majors<L>::A_MN ? k * lda + m : m * lda + k;
}
template <Layout L>
__host__ __device__ __forceinline__ int b_offset(int k, int n, int ldb) {
  return Majors<L>::B_MN ? k * ldb + n : n * ldb + k;
}

// Host: calls f(std::integral_constant<Layout, L>{}) for the problem's layout, so each layout
// runs its own instantiation; a value outside the enum (the binding refuses those) is an error.
template <class F>
inline cudaError_t with_layout(Layout l, F&& f) {
  switch (l) {
    case Layout::NN: return f(std::integral_constant<Layout, Layout::NN>{});
    case Layout::NT: return f(std::integral_constant<Layout, Layout::NT>{});
    case Layout::TN: return f(std::integral_constant<Layout, Layout::TN>{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace gemm
