// common/fp8.cuh: PTX wrappers and host helpers for FP8 (e4m3) operands on Hopper (s15).
//
// The 1-byte counterpart of hopper.cuh's 2-byte pieces, which it reuses (mbarriers, TMA loads
// and stores, fences, desc_sw128, setmaxnreg, Cvt):
//   - wgmma m64nNk32 e4m3 x e4m3 -> f32. FP8 wgmma reads both operands K-major from shared
//     memory only (no transpose bits: the instruction has none for 8-bit types), which is why
//     the FP8 stages take layout NT (B the transposed view of an [N][K] tensor) and nothing else.
//   - TMA maps of 1-byte K-major operands: boxes of rows x 128 elements, so that a tile row is
//     one 128-byte swizzle line, exactly the SW128 format of hopper.cuh (its descriptor serves
//     unchanged; one k32 step = 32 bytes = +2 in the descriptor's address field, as k16 of
//     2-byte types).
#pragma once
#include <cstdint>
#include <cuda_fp8.h>
#include "hopper.cuh"

namespace fp8 {

// D[64 x N] (+)= A[64 x 32] * B[32 x N], e4m3 operands as SW128 K-major tiles in shared memory,
// fp32 accumulators in registers (the same fragment layout as hopper::Wgmma: R = N / 2 per
// thread). `accumulate == 0` overwrites D. The tensor core keeps only ~14 mantissa bits of the
// running sum inside a chain of accumulating FP8 wgmmas (DeepSeek-V3 report, sec. 3.3.2): a
// caller that wants an fp32-accurate sum restarts D often (accumulate == 0) and adds it into
// registers of its own ("promotion").
template <int N>
struct WgmmaE4M3;
// The asm operand lists (accumulators %0..%(R-1), then the two descriptors and the flag),
// written once and chained by length.
#define FP8_WGMMA_D32 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define FP8_WGMMA_D48 FP8_WGMMA_D32 ", " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define FP8_WGMMA_D64 FP8_WGMMA_D48 ", " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define FP8_WGMMA_D96 FP8_WGMMA_D64 ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define FP8_WGMMA_D128 FP8_WGMMA_D96 ", " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define FP8_WGMMA_OUT32 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define FP8_WGMMA_OUT48 FP8_WGMMA_OUT32, \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define FP8_WGMMA_OUT64 FP8_WGMMA_OUT48, \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define FP8_WGMMA_OUT96 FP8_WGMMA_OUT64, \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define FP8_WGMMA_OUT128 FP8_WGMMA_OUT96, \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
#define FP8_WGMMA(N, R, DESC, FLAG)                                                                \
  template <> struct WgmmaE4M3<N> {                                                                \
    static __device__ __forceinline__ void mma(float (&d)[R], uint64_t da, uint64_t db, int accumulate) { \
      asm volatile("{\n.reg .pred p;\n"                                                             \
                   "setp.ne.b32 p, " FLAG ", 0;\n"                                                  \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 {"                     \
                   FP8_WGMMA_D##R "}, " DESC ", p, 1, 1;\n}\n"                                       \
                   : FP8_WGMMA_OUT##R                                                             \
                   : "l"(da), "l"(db), "r"(accumulate));                                          \
    }                                                                                             \
  };
FP8_WGMMA(64, 32, "%32, %33", "%34")
FP8_WGMMA(96, 48, "%48, %49", "%50")
FP8_WGMMA(128, 64, "%64, %65", "%66")
FP8_WGMMA(192, 96, "%96, %97", "%98")
FP8_WGMMA(256, 128, "%128, %129", "%130")
#undef FP8_WGMMA
#undef FP8_WGMMA_D32
#undef FP8_WGMMA_D48
#undef FP8_WGMMA_D64
#undef FP8_WGMMA_D96
#undef FP8_WGMMA_D128
#undef FP8_WGMMA_OUT32
#undef FP8_WGMMA_OUT48
#undef FP8_WGMMA_OUT64
#undef FP8_WGMMA_OUT96
#undef FP8_WGMMA_OUT128

// ---------------------------------------------------------------------------------------------
// Host side. Tensor map of a row-major [rows][k] e4m3 operand, leading dimension `ld` elements
// (= bytes), read in boxes of box_rows x 128 into SW128 tiles. TMA rules: base 16-byte aligned,
// row stride a multiple of 16 bytes (ld % 16 == 0; unused when rows == 1). Elements past `rows`
// or `k` arrive as zeros, which is what makes M/N/K tails exact (a zero byte is +0 in e4m3).
inline cudaError_t make_tmap_kmajor(CUtensorMap* map, const __nv_fp8_e4m3* base, int rows, int k,
                                    int ld, int box_rows) {
  if (!hopper::encode_tiled_fn()) return cudaErrorNotSupported;
  const uint64_t row_bytes = rows == 1 ? (uint64_t(k) + 15) / 16 * 16 : uint64_t(ld);
  const cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {row_bytes};
  const cuuint32_t box[2] = {128, cuuint32_t(box_rows)};
  const CUresult r = hopper::encode_2d_sw128(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, const_cast<__nv_fp8_e4m3*>(base),
                                             dims, strides, box);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// The TMA operand rules for 1-byte A and B as a check for unsupported(): nullptr or a message.
inline const char* tma_operand_problem(const __nv_fp8_e4m3* A, int M, int lda,
                                       const __nv_fp8_e4m3* B, int N, int ldb) {
  if (reinterpret_cast<uintptr_t>(A) % 16)
    return "a must be 16-byte aligned (TMA loads it: its base address needs 16-byte alignment)";
  if (reinterpret_cast<uintptr_t>(B) % 16)
    return "b must be 16-byte aligned (TMA loads it: its base address needs 16-byte alignment)";
  if (M > 1 && lda % 16)
    return "lda must be a multiple of 16 elements (TMA needs 16-byte row strides; fp8 is 1 byte)";
  if (N > 1 && ldb % 16)
    return "ldb must be a multiple of 16 elements (TMA needs 16-byte row strides; fp8 is 1 byte)";
  return nullptr;
}

}  // namespace fp8
