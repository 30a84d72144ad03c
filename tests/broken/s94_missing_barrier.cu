// s94_missing_barrier: BROKEN ON PURPOSE (races on a missing barrier), a fixture for tests/test_broken.py
//
// Change: a 16x16 shared-memory tiled fp32 GEMM where the barrier between staging a tile and reading it is gone.
// Why:    the test suite must flag this kernel: threads read B columns other warps have not written yet (or already overwrote): wrong and run-to-run varying results.
// Expect: test failures (never part of the ladder: tests/broken/ is not in the registry)
// Limits: M <= 1048560 (grid.y holds M/16 blocks), else ValueError
// Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN
// Pair:   none: Triton places its own barriers, so it has no missing-barrier version

// Tests of the tests (tests/test_broken.py reads these lines): a race: which classes fail is up
// to timing, but some must.
// MUST_FAIL = {}
// MUST_PASS = []
// MAY_FAIL = ["shapes", "alpha_beta", "ints", "seeds", "nonfinite", "views", "int32", "deterministic"]

#include "common/gemm.cuh"

namespace s94_missing_barrier {

constexpr int TILE = 16;   // 16x16 threads, one output each; K moves in steps of TILE

__global__ void s94_missing_barrier_kernel(gemm::Problem<float> p) {
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
    // (no __syncthreads() here: the bug)
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  // --- epilogue ---------------------------------------------------------------------------
  if (row < p.M && col < p.N) {
    float* c = p.C + (size_t)row * p.ldc + col;
    *c = p.beta == 0.f ? p.alpha * acc : p.alpha * acc + p.beta * *c;
  }
}

const char* unsupported(const gemm::Problem<float>& p) {
  return gemm::cdiv(p.M, TILE) > 65535 ? "M must be <= 1048560 (grid.y holds M/16 blocks)" : nullptr;
}

cudaError_t launch(const gemm::Problem<float>& p, cudaStream_t stream) {
  dim3 block(TILE, TILE), grid(gemm::cdiv(p.N, TILE), gemm::cdiv(p.M, TILE));
  s94_missing_barrier_kernel<<<grid, block, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace s94_missing_barrier
