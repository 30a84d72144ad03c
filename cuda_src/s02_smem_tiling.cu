// s02_smem_tiling: 32x32 tiles staged in shared memory
//
// Change: vs s01, a block of 32x32 threads first copies a 32x32 tile of A and of B into shared
//         memory, then every thread reads its row and column from there (one output per thread).
// Why:    each element loaded from global memory is now used by 32 threads: global traffic per
//         block and K step is 2*32*32 floats for 2*32^3 FLOPs, 8 FLOP/B instead of s01's 0.25.
//         The limit moves to shared memory: 2 LDS per FFMA, a rate ~1/4 of the FMA pipe.
// Expect: ~1.1x s01 at 4096^3, ~13% of cuBLAS FP32: LDS-bound (H100 at 7417859; predicted 1.3-2x)
// Limits: N <= 2097120 (grid.y holds N/32 blocks, limit 65535), else ValueError
// Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
// Pair:   triton_kernels/s02_smem_tiling.py
// Log:    docs/stages/s02_smem_tiling.md
#include "common/gemm.cuh"
#include "common/layouts.cuh"

namespace s02_smem_tiling {

constexpr int TILE = 32;  // 32x32 outputs per block, K advanced 32 at a time
constexpr int PAD = 1;    // +1 float per row of the A tile, see the bank note below
static_assert(TILE == 32, "threadIdx.x must span one warp of consecutive columns");

// Bank note: a warp is one row ty of the block (tx = 0..31). In the inner loop it reads
// As[ty][k] (one word, broadcast) and Bs[k][tx] (32 consecutive words, 32 banks): conflict-free.
// The padded A row costs 4 bytes a row and keeps As free of conflicts for the transposed
// mapping too (tx along M reads As[tx][k]: a column, 32 rows apart = stride 33 banks).
// Staging reads each operand along its contiguous dimension (coalesced) in every layout, so an
// operand stored the other way round is written to its tile as a column: A in TN (As[tx][ty],
// stride 33: 32 banks) and B in NT (Bs[tx][ty]: Bs rows get the same +1 pad there).

// One instantiation per layout L; NN's tiles and loads are the ones described above.
template <gemm::Layout L>
__global__ void __launch_bounds__(TILE * TILE) kernel(gemm::Problem<float> p) {
  constexpr int B_PAD = gemm::Majors<L>::B_MN ? 0 : PAD;  // Bs is written as columns only in NT
  __shared__ float As[TILE][TILE + PAD];    // As: [BM][BK] (+pad)  4.1 KB
  __shared__ float Bs[TILE][TILE + B_PAD];  // Bs: [BK][BN] (NT: +pad) 4 KB

  // --- tile assignment: block (bx, by) owns C[bx*32 .. +32][by*32 .. +32] ----------------
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int m = blockIdx.x * TILE + ty;  // M on grid.x (up to 2^31-1 blocks)
  const int n = blockIdx.y * TILE + tx;

  float acc = 0.f;
  // --- loop over K, one 32-wide slab at a time ----------------------------------------------
  for (int k0 = 0; k0 < p.K; k0 += TILE) {
    // --- operand staging: each thread copies one element of each tile; zeros past the edges
    //     so the inner loop needs no predicate (zeros add nothing to the dot product).
    const int ka = k0 + tx, kb = k0 + ty;
    if constexpr (gemm::Majors<L>::A_MN) {  // TN: A stored [K][M], a warp reads 32 consecutive m
      const int ma = blockIdx.x * TILE + tx;
      As[tx][ty] = (ma < p.M && kb < p.K) ? p.A[kb * p.lda + ma] : 0.f;
    } else {                                // a warp reads 32 consecutive k of row m
      As[ty][tx] = (m < p.M && ka < p.K) ? p.A[m * p.lda + ka] : 0.f;
    }
    if constexpr (gemm::Majors<L>::B_MN) {  // a warp reads 32 consecutive n of row kb
      Bs[ty][tx] = (kb < p.K && n < p.N) ? p.B[kb * p.ldb + n] : 0.f;
    } else {                                // NT: B stored [N][K], a warp reads 32 consecutive k
      const int nb = blockIdx.y * TILE + ty;
      Bs[tx][ty] = (ka < p.K && nb < p.N) ? p.B[nb * p.ldb + ka] : 0.f;
    }
    __syncthreads();  // tiles complete before anyone reads them

#pragma unroll
    for (int k = 0; k < TILE; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();  // everyone done reading before the next slab overwrites the tiles
  }

  // --- epilogue: beta == 0 must not read C --------------------------------------------------
  if (m < p.M && n < p.N) {
    float* c = p.C + m * p.ldc + n;
    *c = p.beta == 0.f ? p.alpha * acc : p.alpha * acc + p.beta * *c;
  }
}

const char* unsupported(const gemm::Problem<float>& p) {
  if (gemm::cdiv(p.N, TILE) > 65535) return "N must be <= 2097120: grid.y holds N/32 blocks (limit 65535)";
  return nullptr;
}

cudaError_t launch(const gemm::Problem<float>& p, cudaStream_t stream) {
  const dim3 block(TILE, TILE);
  const dim3 grid(gemm::cdiv(p.M, TILE), gemm::cdiv(p.N, TILE));
  return gemm::with_layout(p.layout, [&](auto l) {
    kernel<decltype(l)::value><<<grid, block, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace s02_smem_tiling
