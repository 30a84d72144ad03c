// common/gemm.cuh: the one raw-pointer contract every CUDA stage implements.
//
// A stage file defines, inside `namespace sNN_slug`, for each element type T its header's
// Dtype line names (float for fp32/tf32, __half for fp16, __nv_bfloat16 for bf16):
//
//   const char* unsupported(const gemm::Problem<T>& p);   // nullptr, or why it cannot run p
//   cudaError_t launch(const gemm::Problem<T>& p, cudaStream_t stream);
//
// `study` generates the Python binding from the header, checks dtype/device/shape/aliasing
// itself, then calls unsupported() (its message becomes a ValueError) and launch().
// This header is included by host C++ (the generated binding) as well as by nvcc, so it holds
// plain data only: no kernels, no torch.
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace gemm {

// The operands' storage, for C[M][N] = A[M][K] @ B[K][N] (leading dimensions in elements):
//   NN: A [M][K] row-major, A[m][k] at A[m * lda + k];  B [K][N] row-major, B[k][n] at B[k * ldb + n]
//   NT: A [M][K] row-major, A[m][k] at A[m * lda + k];  B stored [N][K], B[k][n] at B[n * ldb + k]
//       (B is the transposed view of a row-major N x K tensor: nn.Linear's x @ W.T)
//   TN: A stored [K][M], A[m][k] at A[k * lda + m];      B [K][N] row-major, B[k][n] at B[k * ldb + n]
//       (A is the transposed view of a row-major K x M tensor: a backward pass's dY^T @ X)
// TT is not supported. C is always row-major: C[m][n] at C[m * ldc + n]. The values are the
// binding's `int layout` argument; a stage's header lists the layouts it takes, and the binding
// refuses any other before calling unsupported(), so a single-layout stage may ignore `layout`.
enum class Layout : int { NN = 0, NT = 1, TN = 2 };

// C = alpha * A @ B + beta * C with A, B stored as `layout` says (above), C row-major.
// M, N, K >= 1 when launch() is called (the binding handles empty problems).
// Every offset fits in int32: the binding refuses problems where it would not.
// beta == 0 means C is write-only: a stage must not read it (it may hold NaN).
template <typename T>
struct Problem {
  const T* A;
  const T* B;
  T* C;
  int M, N, K;
  int lda, ldb, ldc;
  float alpha, beta;
  Layout layout;  // how A and B are stored (see Layout); last, so positional initialisers stay valid
};

// Scaled FP8 GEMM (s15): C = alpha * (Sa A) @ (B Sb) + beta * C, A and B e4m3, C of type OutT
// (__nv_bfloat16 or __half). The fp32 scales dequantise the operands:
//   scale_a: device pointer to 1 float (per tensor) or, with scale_a_per_row, M floats,
//            scale_a[m] for row m of A (contiguous);
//   scale_b: 1 float or, with scale_b_per_col, N floats, scale_b[n] for column n of B (= row n
//            of the [N][K] tensor B is the transposed view of; contiguous).
// Layout NT only (FP8 wgmma reads K-major operands only): A [M][K] at A[m * lda + k], B [N][K] at
// B[n * ldb + k], C [M][N] at C[m * ldc + n]. The scales stay on the device (no host sync);
// the kernel reads them in its epilogue. Other rules as Problem (M, N, K >= 1; beta == 0 never
// reads C). A stage implements, per OutT:
//   const char* unsupported(const gemm::ScaledProblem<OutT>& p);
//   cudaError_t launch(const gemm::ScaledProblem<OutT>& p, cudaStream_t stream);
//   cudaError_t launch(const gemm::ScaledProblem<OutT>& p, cudaStream_t stream, int config);
template <typename OutT>
struct ScaledProblem {
  const __nv_fp8_e4m3* A;
  const __nv_fp8_e4m3* B;
  OutT* C;
  int M, N, K;
  int lda, ldb, ldc;
  float alpha, beta;
  const float* scale_a;
  const float* scale_b;
  int scale_a_per_row;  // 0: scale_a[0] for all rows; 1: scale_a[m]
  int scale_b_per_col;  // 0: scale_b[0] for all columns; 1: scale_b[n]
};

// Integer ceiling division, for grid sizes.
__host__ __device__ constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }

}  // namespace gemm
