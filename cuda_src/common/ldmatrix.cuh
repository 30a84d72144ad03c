// common/ldmatrix.cuh: ldmatrix (sm_75+), the warp-wide shared-memory -> fragment load.
//
// Used by the mma.sync-era tensor-core stages: s09 (32-bit TF32 data read as b16 pairs) and
// s11 (fp16/bf16). One instruction moves four 8x8 matrices of 16-bit elements (16 bytes per
// matrix row): lanes 8i .. 8i+7 give the shared-memory addresses of the 8 rows of matrix i, and
// register i of every lane receives its 2 elements of matrix i (row lane / 4, elements
// 2 * (lane % 4) + 0..1). Rows need 16-byte alignment; which bank groups the 8 rows of one matrix
// hit is the caller's layout (padding in s09, XOR swizzle in s11).
#pragma once
#include <cstdint>

namespace gemm {

// `addr`: this lane's row address as a 32-bit shared-state address (gemm::smem_u32).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

}  // namespace gemm
