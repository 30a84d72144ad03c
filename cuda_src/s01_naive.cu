// s01_naive: one thread per element of C
//
// Change: the starting point: each thread walks one row of A and one column of B.
// Why:    to compute one output we load a row of A and a column of B (2K floats) for 2K FLOPs:
//         intensity 0.25 FLOP/B from L1/L2, far left of the FP32 ridge (~22 FLOP/B). threadIdx.x
//         runs along N, so a warp reads B and writes C coalesced while A is one broadcast word
//         (in NT, B stored [N][K], a warp's 32 B words lie in 32 rows: one sector each).
// Expect: ~12% of cuBLAS FP32 at 4096^3 (H100 study at 7417859: 6.0 TFLOP/s; predicted 2-4%)
// Limits: M <= 524280 (grid.y holds M/8 blocks), else ValueError
// Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
// Pair:   triton_kernels/s01_naive.py
// Log:    docs/stages/s01_naive.md
#include "common/gemm.cuh"
#include "common/layouts.cuh"

namespace s01_naive {

constexpr int BX = 32;  // threads along N: one warp covers 32 consecutive columns (coalesced B, C)
constexpr int BY = 8;   // threads along M
static_assert(BX == 32, "a warp must span consecutive columns so B and C accesses coalesce");

// One instantiation per layout L: only where A and B are read from changes.
template <gemm::Layout L>
__global__ void __launch_bounds__(BX * BY) kernel(gemm::Problem<float> p) {
  // --- tile assignment: one thread, one C element --------------------------------------
  const int n = blockIdx.x * BX + threadIdx.x;
  const int m = blockIdx.y * BY + threadIdx.y;
  if (m >= p.M || n >= p.N) return;

  // --- operand staging: none; every operand comes straight from global memory -----------

  // --- loop over K: a dot product of row m of A and column n of B -----------------------
  // A(m, k) is the same word for the whole warp in every layout (m is fixed per warp). B(k, n):
  // NN and TN store B [K][N], 32 consecutive words per warp; NT stores it [N][K], so the warp
  // reads 32 rows, 4 bytes of a 32-byte sector each (L1 can serve the next 7 k from them).
  float acc = 0.f;
  for (int k = 0; k < p.K; ++k)
    acc = fmaf(p.A[gemm::a_offset<L>(m, k, p.lda)], p.B[gemm::b_offset<L>(k, n, p.ldb)], acc);

  // --- epilogue: beta == 0 must not read C (it may be uninitialised) --------------------
  float* c = p.C + m * p.ldc + n;
  *c = p.beta == 0.f ? p.alpha * acc : p.alpha * acc + p.beta * *c;
}

const char* unsupported(const gemm::Problem<float>& p) {
  if (gemm::cdiv(p.M, BY) > 65535) return "M must be <= 524280: grid.y holds M/8 blocks (limit 65535)";
  return nullptr;
}

cudaError_t launch(const gemm::Problem<float>& p, cudaStream_t stream) {
  const dim3 block(BX, BY);
  const dim3 grid(gemm::cdiv(p.N, BX), gemm::cdiv(p.M, BY));
  return gemm::with_layout(p.layout, [&](auto l) {
    kernel<decltype(l)::value><<<grid, block, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace s01_naive
