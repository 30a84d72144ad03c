// s96_int32_bytes: BROKEN ON PURPOSE (32-bit byte offsets), a fixture for tests/test_broken.py
//
// Change: a 16x16 shared-memory tiled fp32 GEMM that addresses A and B through byte offsets held
//         in 32-bit unsigned registers ((row * lda + k) * 4): they wrap past 4 GiB.
// Why:    the test suite must flag this kernel: element offsets fit int32 (study checks that), byte
//         offsets do not; only the int32 class (leading dimensions near 2^31 / rows) reaches them:
//         a wrapped offset reads another row of the same buffer (no fault, a wrong value).
// Expect: test failures (never part of the ladder: tests/broken/ is not in the registry)
// Limits: M <= 1048560 (grid.y holds M/16 blocks), else ValueError
// Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN
// Pair:   none: Triton offsets are element counts (its pointer arithmetic scales them), no byte math

// Tests of the tests (tests/test_broken.py reads these lines): GPU only (CUDA); the int32 class
// with a huge lda or ldb of fp32 (3 rows of ~2^29 elements: 8.6 GB of GPU memory) catches it.
// MUST_FAIL = {"int32": "numeric"}
// MUST_PASS = ["shapes", "alpha_beta", "ints", "seeds", "nonfinite", "views", "deterministic"]
// MAY_FAIL = []

#include "common/gemm.cuh"

namespace s96_int32_bytes {

constexpr int TILE = 16;   // 16x16 threads, one output each; K moves in steps of TILE

__global__ void s96_int32_bytes_kernel(gemm::Problem<float> p) {
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
    // BUG: byte offsets in 32-bit registers: (row * lda + ka) fits int32, 4x that need not
    const unsigned a_byte = static_cast<unsigned>((row * p.lda + ka) * sizeof(float));
    const unsigned b_byte = static_cast<unsigned>((kb * p.ldb + col) * sizeof(float));
    const char* a_base = reinterpret_cast<const char*>(p.A);
    const char* b_base = reinterpret_cast<const char*>(p.B);
    As[ty][tx] = (row < p.M && ka < klim) ? *reinterpret_cast<const float*>(a_base + a_byte) : 0.f;
    Bs[ty][tx] = (kb < klim && col < p.N) ? *reinterpret_cast<const float*>(b_base + b_byte) : 0.f;
    __syncthreads();
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
  s96_int32_bytes_kernel<<<grid, block, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace s96_int32_bytes
