// common/hopper.cuh: PTX wrappers and host helpers shared by the Hopper stages (s12, s13, s14).
//
// What lives here, and why each piece is needed:
//   - mbarrier wrappers: the copy engine (TMA) signals "tile landed" by completing transaction
//     bytes on an mbarrier; consumers signal "stage free" by arriving on another.
//   - TMA 2-D tile load (cp.async.bulk.tensor.2d): one thread moves a whole box of a K-major
//     operand into 128B-swizzled shared memory; out-of-bounds elements arrive as zeros, which is
//     how M/N/K tails are handled without a single predicate in the main loop.
//   - wgmma wrappers (sm_90a): descriptor builder for 128B-swizzled K-major tiles, fence /
//     commit / wait, and m64nNk16 with fp32 accumulators for fp16 and bf16 inputs.
//   - TMA 2-D tile store (cp.async.bulk.tensor shared -> global) with its bulk-group waits,
//     proxy fence and named barriers: an epilogue that stages C in shared memory and lets the
//     copy engine write it out while the warps go on to the next tile.
//   - setmaxnreg, for warp-specialised kernels that move registers between warpgroups.
//   - host: cuTensorMapEncodeTiled fetched through the runtime (cudaGetDriverEntryPointByVersion)
//     so that nothing links libcuda; cuda.h / cudaTypedefs.h are included for the types only.
//
// Shared-memory tile formats every helper below agrees on:
//   "SW128 K-major": a tile of R rows (M or N) x 64 k of a 2-byte type, one 128-byte line per
//   row, rows packed, the 16-byte chunks of row r XOR-swizzled by (r % 8): what TMA writes with
//   CU_TENSOR_MAP_SWIZZLE_128B and what wgmma reads with descriptor swizzle mode 1.
//   8 rows x 128 B = 1024 B is one swizzle atom, so every tile must start 1024-byte aligned.
//   "SW128 MN-major" (an operand whose M or N is contiguous: B in NN / TN, A in TN): the same
//   lines with the roles swapped, one 128-byte line = 64 m (or n) of one k; a tile of R rows x
//   64 k is R / 64 TMA boxes of [64 k][64 mn] (8 KB each) one after another. wgmma reads it
//   with its transpose bit set (tnspA / tnspB), no copy transposes anything.
#pragma once
#include <cstdint>
#include <cuda.h>          // CUtensorMap and enums: types only, libcuda is never linked
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "gemm.cuh"  // gemm::Problem, for the shared epilogue

namespace hopper {

// ---------------------------------------------------------------------------------------------
// Shared-memory addresses: PTX state-space instructions take 32-bit shared addresses.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------------------------------------
// mbarrier (64-bit object in shared memory). A phase completes when `count` arrivals have been
// made and every expected transaction byte has landed; waiters poll by phase parity.
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
}
// Makes the initialised barriers visible to the async proxy (the TMA unit) before first use.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// One arrival that also announces `bytes` of TMA traffic this phase must wait for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t addr) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(addr) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) { mbar_arrive(smem_u32(bar)); }
// Blocks until the phase with parity `parity` has completed. A freshly initialised barrier is
// in phase 0, so waiting on parity 1 returns at once ("the previous phase is complete"): a
// producer starts every ring slot as free by waiting on (phase ^ 1). CLUSTER: acquire at cluster
// scope, for a phase completed by another CTA of the cluster (st.async's complete_tx releases at
// cluster scope); the default acquires at CTA scope.
// The address form takes the barrier's 32-bit shared address, for loops that form it once;
// mbar_try_wait is one poll (1 once the phase is complete).
template <bool CLUSTER = false>
__device__ __forceinline__ uint32_t mbar_try_wait(uint32_t addr, uint32_t parity) {
  uint32_t done;
  if constexpr (CLUSTER)
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  else
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  return done;
}
template <bool CLUSTER = false>
__device__ __forceinline__ void mbar_wait(uint32_t addr, uint32_t parity) {
  while (!mbar_try_wait<CLUSTER>(addr, parity)) {
  }
}
template <bool CLUSTER = false>
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  mbar_wait<CLUSTER>(smem_u32(bar), parity);
}
// The same wait for a whole warp, ended by a vote: the loop's exit is then warp-uniform to the
// compiler, which can keep what a k-loop around it computes (stage offsets, wgmma descriptors)
// in uniform registers. Behind the plain wait's per-thread branch, every descriptor went through
// R2UR moves before each wgmma (s14 log, session 63). All 32 lanes must call it.
__device__ __forceinline__ void mbar_wait_warp(uint32_t addr, uint32_t parity) {
  while (!__all_sync(0xffffffffu, mbar_try_wait(addr, parity))) {
  }
}
// v broadcast from lane 0: the compiler then knows it is warp-uniform (a warpgroup's index from
// threadIdx, for one).
__device__ __forceinline__ int warp_uniform(int v) { return __shfl_sync(0xffffffffu, v, 0); }

// ---------------------------------------------------------------------------------------------
// TMA. The tensor map lives in kernel parameter space (__grid_constant__); its generic address
// is what the instruction takes. Coordinates are in elements, innermost (K) first.
__device__ __forceinline__ void tma_prefetch_desc(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                            int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
      : "memory");
}

// One operand tile of ROWS (M or N) x 64 k for k-step origin k0 and first row mn0: a K-major
// operand is one box of the map (make_tmap_operand); an MN-major one ROWS / 64 boxes of
// [64 k][64 mn], placed MN_BOX_BYTES apart (the descriptor's leading byte offset), so that
// row block j of the tile starts at dst + j * 64 * 64 elements in both formats.
template <bool MN_MAJOR, int ROWS, typename T>
__device__ __forceinline__ void tma_load_operand(T* dst, const CUtensorMap* map, uint64_t* bar, int k0, int mn0) {
  if constexpr (MN_MAJOR) {
    static_assert(ROWS % 64 == 0, "an MN-major tile is whole 64-wide boxes (one 128-byte swizzle line)");
#pragma unroll
    for (int j = 0; j < ROWS / 64; ++j) tma_load_2d(dst + j * 64 * 64, map, bar, mn0 + j * 64, k0);
  } else {
    tma_load_2d(dst, map, bar, k0, mn0);
  }
}

// TMA 2-D tile store (shared -> global), the reverse direction: one thread hands the copy engine
// a box staged in shared memory (same SW128 format); elements outside the tensor map's extent
// are not written, which clips M/N edges. Completion is tracked per thread by bulk async-groups:
// commit closes a group, wait_read<N> returns once all but the N newest groups have finished
// READING shared memory (the buffer may be rewritten), wait_all<0> once every write is done.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int c0,
                                             int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(smem_u32(src)), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
// Ordinary shared-memory stores become visible to the copy engine (the async proxy) only after
// this fence in each writing thread, followed by a barrier before the TMA store is issued.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// Named barrier `id` (1..15; 0 is __syncthreads) among `count` threads (a multiple of 32): lets
// one warpgroup synchronise without stopping the others.
__device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}

// ---------------------------------------------------------------------------------------------
// wgmma shared-memory matrix descriptor for an SW128 K-major tile (format above):
//   bits  0-13 start address >> 4
//   bits 16-29 leading-dimension byte offset >> 4: unused for swizzled K-major layouts (a 16-
//              element K slice never crosses a 128-byte line); 1 by convention
//   bits 32-45 stride-dimension byte offset >> 4: 1024 B from one 8-row core group to the next
//   bits 49-51 base offset: 0, because tiles are 1024-byte aligned
//   bits 62-63 swizzle mode: 1 = 128B
// Stepping K by 16 elements inside the 64-wide tile = +32 bytes on the start address (+2 in the
// encoded field): the hardware applies the swizzle XOR on the final address, as TMA did.
__device__ __forceinline__ uint64_t desc_sw128(const void* tile) {
  const uint64_t addr = smem_u32(tile);
  return ((addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}
// The same for an SW128 MN-major tile ([64 k][64 mn] boxes). For MN-major operands the PTX ISA
// ("Strides" of the wgmma shared-memory layout) gives both offsets other meanings: the canonical
// layout is ((8, 8, m), (8, k)) : ((1, 8, LBO), (64, SBO)) in elements, so
//   leading-dimension byte offset = from one 64-element MN atom to the next: the next box, 8 KB
//   stride-dimension byte offset  = from one group of 8 k rows to the next: 8 x 128 B = 1024 B.
// One wgmma k16 step spans two 8-row groups; stepping K by 16 = +16 rows = +2048 bytes, a whole
// number of swizzle atoms (base offset stays 0).
constexpr int MN_BOX = 64;                     // mn per box: one 128-byte line of 2-byte elements
constexpr int MN_BOX_BYTES = MN_BOX * 64 * 2;  // one [64 k][64 mn] box
__device__ __forceinline__ uint64_t desc_sw128_mn(const void* tile) {
  const uint64_t addr = smem_u32(tile);
  return ((addr & 0x3FFFF) >> 4) | (uint64_t(MN_BOX_BYTES >> 4) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}
// Descriptor of k16 step k (0..3) of a 2-byte operand tile that starts at `tile` (its first M or
// N row): K-major +16 elements along the line, MN-major +16 k rows of 64 elements.
template <bool MN_MAJOR, typename T>
__device__ __forceinline__ uint64_t desc_k16(const T* tile, int k) {
  if constexpr (MN_MAJOR) return desc_sw128_mn(tile + k * 16 * MN_BOX);
  else return desc_sw128(tile + k * 16);
}
// The descriptor of the tile `bytes` (a multiple of 16) past d's: the start-address field (bits
// 0-13) is linear in the address and, shared memory being below 256 KB, never carries out, so
// only the low word changes (a 32-bit add). Loops form d once and step it by constants.
constexpr uint64_t DESC_HI = 0xFFFFFFFF00000000ull;  // the fields a move leaves alone
__device__ __forceinline__ uint64_t desc_at(uint64_t d, uint32_t bytes) {
  return (d & DESC_HI) | (uint32_t(d) + (bytes >> 4));
}
// desc_k16(tile + elems, k) for 2-byte tiles from d = desc_k16(tile, 0).
template <bool MN_MAJOR>
__device__ __forceinline__ uint64_t desc_k16_at(uint64_t d, int elems, int k) {
  return desc_at(d, uint32_t((elems + k * 16 * (MN_MAJOR ? MN_BOX : 1)) * 2));
}
// Keeps a value computed once in a register: the compiler otherwise re-forms shared addresses
// (an S2R of the CTA's cluster slot and its arithmetic) inside the loops that use them.
__device__ __forceinline__ uint32_t opaque(uint32_t v) {
  asm volatile("" : "+r"(v));
  return v;
}
// A descriptor whose address word is kept in a register that way (for desc_at in a loop).
__device__ __forceinline__ uint64_t opaque_desc(uint64_t d) {
  return (d & DESC_HI) | opaque(uint32_t(d));
}

// Ordering rules for wgmma (PTX ISA, "asynchronous warpgroup level matrix" section):
//   fence  before the first wgmma of a batch, and whenever the accumulator registers were touched
//          by ordinary instructions since the last wgmma;
//   commit groups the wgmmas issued so far; wait<N> returns when at most N groups are pending.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// The compiler does not know wgmma writes the accumulators asynchronously: an empty asm that
// "reads and writes" each register pins it, so no accumulator access moves across a fence/wait.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Register reallocation between warpgroups (sm_90a). Only honoured in a kernel compiled with a
// register cap (__launch_bounds__(threads, 1)) where each role is one branch of an if/else.
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));
}

// D[64 x N] (+)= A[64 x 16] * B[16 x N], both operands SW128 tiles in shared memory, fp32
// accumulators in registers. `accumulate == 0` overwrites D (first K step: no zeroing pass).
// TA / TB: the instruction's imm-trans-a / imm-trans-b, 0 for a K-major tile, 1 for an
// MN-major one (16-bit types only: the hardware transposes on the way in).
// Register fragment (PTX ISA, wgmma D layout for .f32): warp w of the warpgroup owns rows
// 16w..16w+15; thread lane holds for i in [0, N/2):
//   row = 16w + lane/4 + 8*((i/2)%2),  col = 8*(i/4) + 2*(lane%4) + (i%2)
// i.e. pairs of adjacent columns, the mma.sync m16n8 C fragment repeated N/8 times along N.
// Instantiated for N in {16, 32, 64, 88, 112, 128, 168, 256} and T in {__half, __nv_bfloat16} by the macro below.
template <typename T, int N, int TA = 0, int TB = 0>
struct Wgmma;
// The asm operand lists are long and differ only in length, so they are written once here:
// %0..%(R-1) are the accumulators, then the two descriptors, the accumulate flag and the two
// transpose immediates.
#define HOPPER_WGMMA_D64 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define HOPPER_WGMMA_D128 HOPPER_WGMMA_D64 ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define HOPPER_WGMMA_OUT64 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define HOPPER_WGMMA_OUT128 HOPPER_WGMMA_OUT64, \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
// Shorter lists for the narrow tiles (N = 16, 32, 64: 8, 16, 32 accumulators) of s14's swap-AB
// decode path.
#define HOPPER_WGMMA_D8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define HOPPER_WGMMA_D16 HOPPER_WGMMA_D8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define HOPPER_WGMMA_D32 HOPPER_WGMMA_D16 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define HOPPER_WGMMA_OUT8 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define HOPPER_WGMMA_OUT16 HOPPER_WGMMA_OUT8, "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define HOPPER_WGMMA_OUT32 HOPPER_WGMMA_OUT16, "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
// Odd widths (N = 88, 112, 168: 44, 56, 84 accumulators) for s14's one-wave weight tiles.
#define HOPPER_WGMMA_D44 HOPPER_WGMMA_D32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43"
#define HOPPER_WGMMA_D56 HOPPER_WGMMA_D44 ", %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55"
#define HOPPER_WGMMA_D84 HOPPER_WGMMA_D64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, " \
    "%74, %75, %76, %77, %78, %79, %80, %81, %82, %83"
#define HOPPER_WGMMA_OUT44 HOPPER_WGMMA_OUT32, \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), \
    "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43])
#define HOPPER_WGMMA_OUT56 HOPPER_WGMMA_OUT44, \
    "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), \
    "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
#define HOPPER_WGMMA_OUT84 HOPPER_WGMMA_OUT64, \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), \
    "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), \
    "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83])
// One specialisation: T and its PTX type, N, the accumulator count R = N / 2, and the operand
// numbers of the descriptors (R, R + 1), of the flag (R + 2) and of the transpose bits
// (R + 3, R + 4) as strings.
#define HOPPER_WGMMA(T, PTX_T, N, R, DESC, FLAG, TRANS)                                            \
  template <int TA, int TB> struct Wgmma<T, N, TA, TB> {                                           \
    static_assert((TA == 0 || TA == 1) && (TB == 0 || TB == 1), "transpose bits are 0 or 1");    \
    static __device__ __forceinline__ void mma(float (&d)[R], uint64_t da, uint64_t db, int accumulate) { \
      asm volatile("{\n.reg .pred p;\n"                                                             \
                   "setp.ne.b32 p, " FLAG ", 0;\n"                                                  \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_T "." PTX_T " {"            \
                   HOPPER_WGMMA_D##R "}, " DESC ", p, 1, 1, " TRANS ";\n}\n"                        \
                   : HOPPER_WGMMA_OUT##R                                                          \
                   : "l"(da), "l"(db), "r"(accumulate), "n"(TA), "n"(TB));                        \
    }                                                                                             \
  };
HOPPER_WGMMA(__half, "f16", 128, 64, "%64, %65", "%66", "%67, %68")
HOPPER_WGMMA(__nv_bfloat16, "bf16", 128, 64, "%64, %65", "%66", "%67, %68")
HOPPER_WGMMA(__half, "f16", 256, 128, "%128, %129", "%130", "%131, %132")
HOPPER_WGMMA(__nv_bfloat16, "bf16", 256, 128, "%128, %129", "%130", "%131, %132")
HOPPER_WGMMA(__half, "f16", 16, 8, "%8, %9", "%10", "%11, %12")
HOPPER_WGMMA(__nv_bfloat16, "bf16", 16, 8, "%8, %9", "%10", "%11, %12")
HOPPER_WGMMA(__half, "f16", 32, 16, "%16, %17", "%18", "%19, %20")
HOPPER_WGMMA(__nv_bfloat16, "bf16", 32, 16, "%16, %17", "%18", "%19, %20")
HOPPER_WGMMA(__half, "f16", 64, 32, "%32, %33", "%34", "%35, %36")
HOPPER_WGMMA(__nv_bfloat16, "bf16", 64, 32, "%32, %33", "%34", "%35, %36")
HOPPER_WGMMA(__half, "f16", 88, 44, "%44, %45", "%46", "%47, %48")
HOPPER_WGMMA(__nv_bfloat16, "bf16", 88, 44, "%44, %45", "%46", "%47, %48")
HOPPER_WGMMA(__half, "f16", 112, 56, "%56, %57", "%58", "%59, %60")
HOPPER_WGMMA(__nv_bfloat16, "bf16", 112, 56, "%56, %57", "%58", "%59, %60")
HOPPER_WGMMA(__half, "f16", 168, 84, "%84, %85", "%86", "%87, %88")
HOPPER_WGMMA(__nv_bfloat16, "bf16", 168, 84, "%84, %85", "%86", "%87, %88")
#undef HOPPER_WGMMA
#undef HOPPER_WGMMA_D8
#undef HOPPER_WGMMA_D16
#undef HOPPER_WGMMA_D32
#undef HOPPER_WGMMA_D64
#undef HOPPER_WGMMA_D128
#undef HOPPER_WGMMA_OUT8
#undef HOPPER_WGMMA_OUT16
#undef HOPPER_WGMMA_OUT32
#undef HOPPER_WGMMA_OUT64
#undef HOPPER_WGMMA_OUT128
#undef HOPPER_WGMMA_D44
#undef HOPPER_WGMMA_OUT44
#undef HOPPER_WGMMA_D56
#undef HOPPER_WGMMA_OUT56
#undef HOPPER_WGMMA_D84
#undef HOPPER_WGMMA_OUT84

// ---------------------------------------------------------------------------------------------
// Output conversion for the epilogue (torch's flags disable the __half operators: intrinsics).
template <typename T> struct Cvt;
template <> struct Cvt<__half> {
  using T2 = __half2;
  static __device__ __forceinline__ __half2 pack(float a, float b) { return __floats2half2_rn(a, b); }
  static __device__ __forceinline__ __half one(float a) { return __float2half_rn(a); }
  static __device__ __forceinline__ float2 unpack(__half2 v) { return __half22float2(v); }
  static __device__ __forceinline__ float load(__half v) { return __half2float(v); }
  static __device__ __forceinline__ uint32_t bits(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
};
template <> struct Cvt<__nv_bfloat16> {
  using T2 = __nv_bfloat162;
  static __device__ __forceinline__ __nv_bfloat162 pack(float a, float b) { return __floats2bfloat162_rn(a, b); }
  static __device__ __forceinline__ __nv_bfloat16 one(float a) { return __float2bfloat16_rn(a); }
  static __device__ __forceinline__ float2 unpack(__nv_bfloat162 v) { return __bfloat1622float2(v); }
  static __device__ __forceinline__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ uint32_t bits(float a, float b) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
};

// Epilogue shared by the stages: one warp's share of a 64 x N wgmma accumulator fragment,
// C = alpha * acc + beta * C, stored as T. `row` is this thread's first row (lane/4 of its warp's
// 16) and `col` its first column (2*(lane%4)); acc[4j + 2h + {0,1}] sits at (row + 8h, col + 8j
// + {0,1}). Every store is predicated against M and N; beta == 0 never reads C. vec2_ok (ldc
// even and C 4-byte aligned) lets a column pair go out as one 32-bit store.
template <typename T, int N>
__device__ __forceinline__ void store_acc(const float (&acc)[N / 2], const gemm::Problem<T>& p,
                                          int row, int col, int vec2_ok) {
  using C = Cvt<T>;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = row + 8 * h;
    if (r >= p.M) continue;
    T* crow = p.C + static_cast<size_t>(r) * p.ldc;
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
      const int c = col + 8 * j;
      float v0 = p.alpha * acc[4 * j + 2 * h], v1 = p.alpha * acc[4 * j + 2 * h + 1];
      if (vec2_ok && c + 1 < p.N) {  // both columns in range and aligned: one 32-bit store
        auto* dst = reinterpret_cast<typename C::T2*>(crow + c);
        if (p.beta != 0.f) {
          const float2 old = C::unpack(*dst);
          v0 += p.beta * old.x;
          v1 += p.beta * old.y;
        }
        *dst = C::pack(v0, v1);
      } else {  // ragged right edge, odd ldc or unaligned C: element by element
        if (c < p.N) crow[c] = C::one(p.beta != 0.f ? v0 + p.beta * C::load(crow[c]) : v0);
        if (c + 1 < p.N)
          crow[c + 1] = C::one(p.beta != 0.f ? v1 + p.beta * C::load(crow[c + 1]) : v1);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host side: tensor maps.
template <typename T> constexpr CUtensorMapDataType tmap_dtype();
template <> constexpr CUtensorMapDataType tmap_dtype<__half>() { return CU_TENSOR_MAP_DATA_TYPE_FLOAT16; }
template <> constexpr CUtensorMapDataType tmap_dtype<__nv_bfloat16>() { return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; }

// cuTensorMapEncodeTiled is a driver API: fetched once through the runtime (torch links
// cudart, not libcuda). Null when the driver does not provide it.
inline PFN_cuTensorMapEncodeTiled_v12000 encode_tiled_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A 2-D SW128 tensor map (unit element strides, 256-byte L2 promotion, zero fill). The encoder
// needs the device's context current on the calling thread: a thread that has made no CUDA call
// yet (torch's autograd thread at a backward's first GEMM) gets CUDA_ERROR_INVALID_CONTEXT, so
// the runtime binds the context (cudaFree(nullptr)) and the encode runs again.
inline CUresult encode_2d_sw128(CUtensorMap* map, CUtensorMapDataType dtype, void* base, const cuuint64_t* dims,
                                const cuuint64_t* strides, const cuuint32_t* box) {
  auto encode = encode_tiled_fn();
  if (!encode) return CUDA_ERROR_NOT_SUPPORTED;
  const cuuint32_t elem_strides[2] = {1, 1};
  auto once = [&] {
    return encode(map, dtype, 2, base, dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  };
  CUresult r = once();
  if (r == CUDA_ERROR_INVALID_CONTEXT && cudaFree(nullptr) == cudaSuccess) r = once();
  return r;
}

// Tensor map of a row-major [rows][k] operand with leading dimension `ld` elements (K-major:
// K is the contiguous dimension), read in boxes of box_rows x 64 elements into SW128 tiles.
// TMA rules: base 16-byte aligned, row stride (ld * sizeof(T)) a multiple of 16 bytes; when
// rows == 1 the stride is never used, so any ld is accepted there. Out-of-bounds box elements
// (rows or k past the end) are filled with zeros, which makes M/N/K tails exact. The same map
// over C (rows = M, k = N, ld = ldc, box_rows = 64) serves a TMA store, which clips instead.
template <typename T>
inline cudaError_t make_tmap_kmajor(CUtensorMap* map, const T* base, int rows, int k, int ld,
                                    int box_rows) {
  static_assert(sizeof(T) == 2, "SW128 tiles of 64 elements assume a 2-byte type");
  if (!encode_tiled_fn()) return cudaErrorNotSupported;
  const uint64_t row_bytes = rows == 1 ? (uint64_t(k) * sizeof(T) + 15) / 16 * 16
                                       : uint64_t(ld) * sizeof(T);
  const cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {row_bytes};  // dimension 0 is implicitly contiguous
  const cuuint32_t box[2] = {64, cuuint32_t(box_rows)};
  const CUresult r = encode_2d_sw128(map, tmap_dtype<T>(), const_cast<T*>(base), dims, strides, box);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// Multiprocessors of device `dev`, read once per device: a persistent grid is sized for the GPU
// the launch runs on (the current device), also on a host with GPUs of different SM counts or
// after a cudaSetDevice. 0 if the query fails or dev is out of range.
inline int sm_count(int dev) {
  static int sms[64] = {};
  if (dev < 0 || dev >= 64) return 0;
  if (!sms[dev] && cudaDeviceGetAttribute(&sms[dev], cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    sms[dev] = 0;
  return sms[dev];
}

// Tensor map of one operand of extent mn (M of A, N of B) x k: K-major, boxes of box_rows x 64 k
// (SW128 K-major tiles); MN-major (stored [k][mn], mn contiguous), boxes of 64 k x 64 mn
// (SW128 MN-major boxes, tma_load_operand issues box_rows / 64 of them per tile).
template <typename T>
inline cudaError_t make_tmap_operand(CUtensorMap* map, const T* base, bool mn_major, int mn, int k, int ld,
                                     int box_rows) {
  return mn_major ? make_tmap_kmajor(map, base, k, mn, ld, 64) : make_tmap_kmajor(map, base, mn, k, ld, box_rows);
}

// The TMA operand rules as a check shared by the stages' unsupported(): nullptr or a message.
// a_rows / b_rows: the operand's extent along its strided dimension (M or N when K-major, K
// when MN-major); a single row has no stride to check.
template <typename T>
inline const char* tma_operand_problem(const T* A, int a_rows, int lda, const T* B, int b_rows, int ldb) {
  if (reinterpret_cast<uintptr_t>(A) % 16)
    return "a must be 16-byte aligned (TMA loads it: its base address needs 16-byte alignment)";
  if (reinterpret_cast<uintptr_t>(B) % 16)
    return "b must be 16-byte aligned (TMA loads it: its base address needs 16-byte alignment)";
  if (a_rows > 1 && lda % 8)
    return "lda must be a multiple of 8 elements (TMA needs 16-byte row strides)";
  if (b_rows > 1 && ldb % 8)
    return "ldb must be a multiple of 8 elements (TMA needs 16-byte row strides)";
  return nullptr;
}
// The same for a problem in any layout: A's rows are M (K-major) or K (M-major, TN), B's N
// (K-major, NT) or K (N-major, NN / TN).
template <typename T>
inline const char* tma_operand_problem(const gemm::Problem<T>& p) {
  const bool a_mn = p.layout == gemm::Layout::TN, b_mn = p.layout != gemm::Layout::NT;
  return tma_operand_problem(p.A, a_mn ? p.K : p.M, p.lda, p.B, b_mn ? p.K : p.N, p.ldb);
}

}  // namespace hopper
