// common/cp_async.cuh: cp.async (sm_80+) wrappers: global -> shared copies that bypass registers.
//
// A cp.async copy is issued by one thread and lands in shared memory asynchronously (SASS
// LDGSTS). Copies are grouped with commit(); wait<N>() blocks until at most N of this thread's
// most recent groups are still in flight. Other threads see the data only after a barrier.
// Used by every pipelined stage (s06 onwards), so the PTX lives here once.
#pragma once
#include <cstdint>
#include "gemm.cuh"

namespace gemm {

// Shared-memory address of a generic pointer, as the 32-bit value PTX shared-state ops take.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte copy with zero fill to the shared-state address smem_dst (smem_u32 of a shared
// pointer): reads src_bytes (0..16) bytes from gmem_src and writes zeros to the rest of the 16
// destination bytes. src_bytes == 0 reads nothing (the address must still be a valid pointer:
// pass the tensor base), which is how tiles past M, N or K become zeros without a branch. Both
// addresses must be 16-byte aligned. .cg: cache in L2 only, since each tile is read once per
// block from global memory and then re-read from shared memory.
__device__ __forceinline__ void cp_async_16_u32(uint32_t smem_dst, const void* gmem_src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(smem_dst), "l"(gmem_src), "r"(src_bytes));
}
// The same from a generic pointer to shared memory (s06-s10); s11 computes swizzled
// destinations as shared offsets and calls cp_async_16_u32 directly.
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src, int src_bytes) {
  cp_async_16_u32(smem_u32(smem_dst), gmem_src, src_bytes);
}

// 4-byte copy with zero fill (src_bytes 0 or 4); .ca because 4-byte copies may not use .cg.
__device__ __forceinline__ void cp_async_4(void* smem_dst, const void* gmem_src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
               :: "r"(smem_u32(smem_dst)), "l"(gmem_src), "r"(src_bytes));
}

// Close the current group of copies issued by this thread (an empty group is legal and keeps
// the group count in step with the pipeline's stage count).
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Wait until at most N committed groups of this thread are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

// Host-side limits of a stage that moves every row of A and B as 16-byte cp.async chunks
// (s09-s11): each row must start 16-byte aligned, so the leading dimensions must be multiples of
// 16 / sizeof(T) elements and the base pointers 16-byte aligned. nullptr, or the refusal
// naming the argument.
template <typename T>
inline const char* unsupported_16byte_rows(const Problem<T>& p) {
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  static_assert(VEC == 4 || VEC == 8, "16-byte chunks hold 4 floats or 8 halves");
  auto misaligned = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15) != 0; };
  if (p.lda % VEC != 0)
    return VEC == 4 ? "lda must be a multiple of 4 (rows of a move as 16-byte cp.async chunks)"
                    : "lda must be a multiple of 8 (rows of a move as 16-byte cp.async chunks)";
  if (p.ldb % VEC != 0)
    return VEC == 4 ? "ldb must be a multiple of 4 (rows of b move as 16-byte cp.async chunks)"
                    : "ldb must be a multiple of 8 (rows of b move as 16-byte cp.async chunks)";
  if (misaligned(p.A)) return "a must be 16-byte aligned (its rows move as 16-byte cp.async chunks)";
  if (misaligned(p.B)) return "b must be 16-byte aligned (its rows move as 16-byte cp.async chunks)";
  return nullptr;
}

// Host-side limit of a stage whose tile ring needs more dynamic shared memory per block than
// some GPUs of its Arch give (sm_80: 163 KiB, sm_86/sm_89: 99 KiB, sm_90: 227 KiB): nullptr
// when the current device lets a block opt in to `bytes`, else `refusal`, so the stage raises
// a clear error there instead of failing at launch.
inline const char* unsupported_shared_memory(int bytes, const char* refusal) {
  int dev = 0, optin = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
    return nullptr;  // no answer: launch() reports the CUDA error itself
  return optin >= bytes ? nullptr : refusal;
}

}  // namespace gemm
