// s95_reads_c_always: BROKEN ON PURPOSE (reads C when beta = 0), a fixture for tests/test_broken.py
//
// Change: a 16x16 shared-memory tiled fp32 GEMM where the epilogue always computes alpha * acc + beta * C.
// Why:    the test suite must flag this kernel: beta == 0 with C full of NaN gives NaN (0 * NaN).
// Expect: test failures (never part of the ladder: tests/broken/ is not in the registry)
// Limits: M <= 1048560 (grid.y holds M/16 blocks), else ValueError
// Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN
// Pair:   tests/broken/s95_reads_c_always.py

// Tests of the tests (tests/test_broken.py reads these lines): every class has beta == 0 on a NaN C
// (the deterministic class compares NaN with NaN).
// MUST_FAIL = {"shapes": "numeric", "alpha_beta": "numeric", "ints": "exact", "seeds": "numeric", "nonfinite": "nonfinite", "views": "numeric", "int32": "numeric"}
// MUST_PASS = ["deterministic"]
// MAY_FAIL = []

#include "common/gemm.cuh"

namespace s95_reads_c_always {

constexpr int TILE = 16;   // 16x16 threads, one output each; K moves in steps of TILE

__global__ void s95_reads_c_always_kernel(gemm::Problem<float> p) {
  // --- tile assignment: block (bx, by) owns C[by*16 .. +16][bx*16 .. +16] -----------------
  __shared__ float As[TILE][TILE];   // As[m][k]
  __shared__ float Bs[TILE][TILE];   // Bs[k][n]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  const int ktiles = gemm::cdiv(p.K, TILE);
  const int klim = p.K;
  float acc = 0.f;
  // --- loop over K, operand staging: one 16x16 tile of A and of B per step ---------------
  for (int kt = 0; kt < ktiles; ++kt) {
    const int ka = kt * TILE + tx, kb = kt * TILE + ty;
    As[ty][tx] = (row < p.M && ka < klim) ? p.A[(size_t)row * p.lda + ka] : 0.f;
    Bs[ty][tx] = (kb < klim && col < p.N) ? p.B[(size_t)kb * p.ldb + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  // --- epilogue ---------------------------------------------------------------------------
  if (row < p.M && col < p.N) {
    float* c = p.C + (size_t)row * p.ldc + col;
    *c = p.alpha * acc + p.beta * *c;
  }
}

const char* unsupported(const gemm::Problem<float>& p) {
  return gemm::cdiv(p.M, TILE) > 65535 ? "M must be <= 1048560 (grid.y holds M/16 blocks)" : nullptr;
}

cudaError_t launch(const gemm::Problem<float>& p, cudaStream_t stream) {
  dim3 block(TILE, TILE), grid(gemm::cdiv(p.N, TILE), gemm::cdiv(p.M, TILE));
  s95_reads_c_always_kernel<<<grid, block, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace s95_reads_c_always
