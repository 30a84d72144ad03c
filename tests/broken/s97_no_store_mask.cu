// s97_no_store_mask: BROKEN ON PURPOSE (stores without the M/N predicate), a fixture for tests/test_broken.py
//
// Change: a 16x16 shared-memory tiled fp32 GEMM whose loads are predicated but whose store of C is
//         not: the edge blocks' threads past M or N write C too.
// Why:    the test suite must flag this kernel: every element of C is right, so only the guard band
//         around C (gemm_checks.GuardedC) sees the stray writes, whenever M or N is ragged.
// Expect: test failures (never part of the ladder: tests/broken/ is not in the registry)
// Limits: M <= 1048560 (grid.y holds M/16 blocks), else ValueError
// Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN
// Pair:   tests/broken/s97_no_store_mask.py

// Tests of the tests (tests/test_broken.py reads these lines): every class has a ragged M or N,
// and the canaries fail it before any value is compared.
// MUST_FAIL = {"shapes": "guard", "alpha_beta": ["guard", "numeric"], "ints": "guard", "seeds": "guard", "nonfinite": "guard", "views": "guard", "int32": "guard", "deterministic": "guard"}
// MUST_PASS = []
// MAY_FAIL = []

#include "common/gemm.cuh"

namespace s97_no_store_mask {

constexpr int TILE = 16;   // 16x16 threads, one output each; K moves in steps of TILE

__global__ void s97_no_store_mask_kernel(gemm::Problem<float> p) {
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
  // BUG: no (row < M && col < N) predicate: threads past the edge store alpha * 0 (+ beta * C)
  float* c = p.C + (size_t)row * p.ldc + col;
  *c = p.beta == 0.f ? p.alpha * acc : p.alpha * acc + p.beta * *c;
}

const char* unsupported(const gemm::Problem<float>& p) {
  return gemm::cdiv(p.M, TILE) > 65535 ? "M must be <= 1048560 (grid.y holds M/16 blocks)" : nullptr;
}

cudaError_t launch(const gemm::Problem<float>& p, cudaStream_t stream) {
  dim3 block(TILE, TILE), grid(gemm::cdiv(p.N, TILE), gemm::cdiv(p.M, TILE));
  s97_no_store_mask_kernel<<<grid, block, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace s97_no_store_mask
