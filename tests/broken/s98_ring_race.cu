// s98_ring_race: BROKEN ON PURPOSE (cp.async ring read before its copies land), a fixture for tests/test_broken.py
//
// Change: a 16x16 fp32 GEMM staging its tiles through a 3-slot cp.async ring whose wait is one
//         group too shallow (cp.async.wait_group 2, not 1): tile kt may still be in flight when
//         the barrier publishes it and the block reads its slot.
// Why:    the test suite must flag this kernel: reads see the slot's previous tile (or whatever
//         shared memory held) wherever a copy is late: wrong, and run to run different, values.
// Expect: test failures (never part of the ladder: tests/broken/ is not in the registry)
// Limits: M <= 1048560 (grid.y holds M/16 blocks), else ValueError
// Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN
// Pair:   none: Triton schedules its own cp.async waits (num_stages), so it has no ring to get wrong

// Tests of the tests (tests/test_broken.py reads these lines): a race. The first tile is read
// right after its copies are issued (nothing waits for it), so the shapes, alpha/beta, integer
// and seed classes fail; which of the others fail is up to timing.
// MUST_FAIL = {"shapes": "numeric", "alpha_beta": "numeric", "ints": "exact", "seeds": "numeric"}
// MUST_PASS = []
// MAY_FAIL = ["nonfinite", "views", "int32", "deterministic"]

#include "common/cp_async.cuh"
#include "common/gemm.cuh"

namespace s98_ring_race {

constexpr int TILE = 16;    // 16x16 threads, one output each; K moves in steps of TILE
constexpr int STAGES = 3;   // ring slots: STAGES - 1 tiles in flight while one is read

// One thread's share of tile kt: one element of A and one of B, 4-byte cp.async each. src_bytes
// 0 reads nothing and writes a zero, so tails past M, N and K become zeros without a branch.
__device__ __forceinline__ void stage_tile(const gemm::Problem<float>& p, float (&As)[TILE][TILE],
                                           float (&Bs)[TILE][TILE], int kt, int row, int col) {
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int ka = kt * TILE + tx, kb = kt * TILE + ty;
  const bool a_ok = row < p.M && ka < p.K, b_ok = kb < p.K && col < p.N;
  gemm::cp_async_4(&As[ty][tx], a_ok ? p.A + (size_t)row * p.lda + ka : p.A, a_ok ? 4 : 0);
  gemm::cp_async_4(&Bs[ty][tx], b_ok ? p.B + (size_t)kb * p.ldb + col : p.B, b_ok ? 4 : 0);
}

__global__ void s98_ring_race_kernel(gemm::Problem<float> p) {
  // --- tile assignment: block (bx, by) owns C[by*16 .. +16][bx*16 .. +16] -----------------
  __shared__ float As[STAGES][TILE][TILE];   // As[slot][m][k]
  __shared__ float Bs[STAGES][TILE][TILE];   // Bs[slot][k][n]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  const int ktiles = gemm::cdiv(p.K, TILE);
  float acc = 0.f;
  // --- operand staging: tiles 0 .. STAGES-2 in flight, one commit group each --------------
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles) stage_tile(p, As[s], Bs[s], s, row, col);
    gemm::cp_async_commit();   // an empty group keeps the count in step
  }
  // --- loop over K: tile kt in slot kt % STAGES ------------------------------------------
  for (int kt = 0; kt < ktiles; ++kt) {
    // BUG: kt + STAGES - 1 groups are committed; tile kt's is group kt, so at most STAGES - 2
    // may stay pending. wait<STAGES - 1> lets tile kt's copies be in flight still.
    gemm::cp_async_wait<STAGES - 1>();
    // publishes this thread's landed copies to the block, and every thread is past its reads
    // of slot (kt - 1) % STAGES, which the next tile overwrites
    __syncthreads();
    const int next = kt + STAGES - 1;
    if (next < ktiles) stage_tile(p, As[next % STAGES], Bs[next % STAGES], next, row, col);
    gemm::cp_async_commit();
    const int s = kt % STAGES;
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc = fmaf(As[s][ty][k], Bs[s][k][tx], acc);
  }
  gemm::cp_async_wait<0>();   // no copy may outlive the block
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
  s98_ring_race_kernel<<<grid, block, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace s98_ring_race
