// s14_stream_k: split-K / stream-K work decomposition, swap-AB for decode shapes
//
// Change: vs s13, CTAs share a tile's k-steps when tiles are too few for the SMs: split-K,
//         stream-K or hybrid (data-parallel waves + stream-K rest) picked per shape, partials
//         summed in a fixed order (NT two-way splits: each pair a 2-CTA cluster, the partial
//         through shared memory); M <= 128 swaps A and B (C^T = W x^T) unless one-wave tiles fit.
// Why:    decode (x @ W.T, M <= 256) streams the weight once: at N = 4096, 32 tiles of 128 weight
//         rows keep s13 on 32 of 132 SMs (~30% of the copy rate). Two splits of K put 64 SMs on
//         it (~70%); each further split adds a partial's round trip (64 KB per CTA at M = 128).
//         NT, few tiles (swapped M = 33-128; M <= 256): 64-row P tiles, consumers on Q's halves.
//         NT, M = 65-256, K <= 4096: x unswapped, one wave of 64-168-row weight tiles.
//         Swapped: tokens on wgmma's 16..128-wide N side (on its 64-row side: up to 98% idle).
// Expect: 1.03-1.13x cuBLAS at M <= 16, 0.92-1.13x at M <= 256 (H100, NT, graph-timed); = s13 at 4096^3
// Limits: as s13: A and B 16-byte aligned, lda and ldb (row strides as stored) multiples of 8
//         elements: for contiguous tensors K in NT, K and N in NN, M and N in TN (else ValueError
//         naming the argument); any M, N, K >= 1, any ldc. Shared tiles use one workspace per
//         device, SMs x 128 KiB + flags (16.5 MiB on an H100), allocated by the first such call
//         (which must not be inside a CUDA-graph capture); such calls on one device must not
//         run concurrently on two streams.
// Dtype:  fp16, bf16 in / fp32 acc / same as in out        Arch: sm_90a      Layout: NT, NN, TN
// Pair:   triton_kernels/s14_stream_k.py
// Log:    docs/stages/s14_stream_k.md
#include <cstdio>
#include <mutex>
#include "common/gemm.cuh"
#include "common/hopper.cuh"
#include "common/layouts.cuh"

namespace s14_stream_k {

// Roles: the kernel computes D[p][q] = sum_k P[p][k] Q[q][k], P on wgmma's 64-row side (two
// consumers x 64 = 128 rows per tile), Q on its BN-wide side.
//   not swapped: P = A (x), Q = B^T (W): s13's tile, C[p][q];   swapped: P = B^T, Q = A, C[q][p].
// Each operand stays as stored (no copy): K-major, or MN-major and read through wgmma's
// transpose bits (Roles below, common/layouts.cuh).
constexpr int BM = 128;              // P rows per tile: two consumer warpgroups x 64 (wgmma M)
constexpr int BK = 64;               // 64 x 2 B = one 128-byte swizzle line per tile row
constexpr int CONSUMERS = 2;
constexpr int THREADS = (CONSUMERS + 1) * 128;
constexpr int GROUP_M = 16;          // s13's grouped tile order
constexpr int PRODUCER_REGS = 40;    // setmaxnreg targets, as s13: 128*40 + 256*232 <= 64K
constexpr int CONSUMER_REGS = 232;
constexpr int WG_M = BM / CONSUMERS;
constexpr int KSUB_SWAP = 4;         // 64-wide k boxes per ring stage, swapped (decode) path
                                     // (halved until 3 stages fit): 4 against 1, M <= 128,
                                     // +1.4 points of cuBLAS on average, -2..+5 (log, session 44)
constexpr int KSUB_AB = 1;           // and not swapped (s13's: one)
constexpr int KSUB_AB64 = 2;         // but two for the 64-wide one-wave weight tile: 256 x 4096^2
                                     // 20.3 -> 18.8 us on the H200; at 88-168 wide (3-4 stages
                                     // left) 1-8% slower (log, session 62)
constexpr int C_BOX = 64;            // s13's TMA-store epilogue: 64 x 64 boxes, two per consumer
constexpr int C_CHUNK = WG_M * C_BOX;
constexpr int C_BUFS = 2;
constexpr int SMEM_LIMIT = 227 * 1024;
constexpr int MAX_STAGES = 8;        // narrow tiles: 8 x 18-24 KB of weight in flight per SM
constexpr int EARLY_STAGES = MAX_STAGES;  // ring stages loaded before the block's first barrier
// Heuristic constants, from the H100 decode sweep (docs/stages/s14_stream_k.md):
constexpr int SWAP_MAX_M = 128;      // M <= 128 swaps; at 256 s13's 128x256 tiles (x as A) were
                                     // faster (half the x re-reads from L2 per weight byte)
constexpr float DP_MIN_FILL = 0.6f;  // tiles >= 60% of the SMs: data-parallel (86 or 112 CTAs
                                     // already stream the weight at 82-92% of the copy rate;
                                     // stream-K over 132 was 0-14% slower there)
constexpr float SPLIT_FILL_SWAP = 0.5f;  // split until ~half the SMs stream (2 x 32 tiles beat
                                     // 3x and 4x: each extra split costs a partial's round trip)
constexpr int MIN_ITERS = 4;         // 64-wide k boxes per split at least (swapped: 64 x BN partials)
constexpr int MIN_ITERS_AB = 16;     // not swapped (128 x 256 partials): 1024^3 split 4 ways was
                                     // 0.42 of cuBLAS against s13's 0.50, 512^3 0.38 vs 0.49
constexpr float SK_L2_FILL = 0.9f;   // hybrid/stream-K only while the shared tiles' operands fit
                                     // in L2: their CTAs sweep K out of step, so a bigger set is
                                     // re-read from HBM (1024 x 11008 x 4096: 65 MB, 0.58 of
                                     // cuBLAS against data-parallel's 0.92; 2048 x: 38 MB, gains)
constexpr float DP_MIN_EFF = 0.9f;   // more tiles than SMs: tiles / (waves x SMs) below this
                                     // makes the last two waves hybrid
constexpr int MAX_BN = 256;          // widest tile: bounds a partial (64 x 256 fp32 per consumer)
constexpr int NARROW_PM = 64;        // NT where even 64-row P tiles are split over K: 64 rows
                                     // per CTA, the consumers on the two halves of Q (swapped,
                                     // M = 33-128: twice the CTAs on the weight, 4096 x 4096 at
                                     // M = 64-128: 0.77 -> 0.81, 0.68 -> 0.77 of cuBLAS; not
                                     // swapped, M = 129-256: half the splits, fewer partials)
constexpr int NARROW_AB_MAX_M = 256;
constexpr int NARROW_STAGES = 12;    // its ring: 12 x 16 KB at BN = 64, 9 x 24 KB at 128
// One-wave weight tiles (NT, 64 < M <= 256, K <= 64 k-steps): not swapped, x in 128-row tiles and
// the weight in tiles of the narrowest of these widths that give at most one tile per SM, if that
// fills >= WAVE_MIN_FILL of them (cuBLAS's widths: 128 x 11008 x 4096 at 88 wide 0.94 -> 0.99 of
// cuBLAS, 128 x 14336 at 112 0.93 -> 0.97, 256 x 4096 x 4096 at 64 0.83 -> 0.92). Not at M <= 64
// (half the tile idle: no gain), not past 64 k-steps (256 x 4096 x 11008: 0.94 vs split 1.03).
constexpr int WAVE_BN[] = {64, 88, 112, 168};
constexpr float WAVE_MIN_FILL = 0.9f;
constexpr int WAVE_MAX_KT = 64;
// Two-way split-K (NT, swapped): the two CTAs of a tile run as a 2-CTA cluster and the tail
// hands its fp32 partial to the head through distributed shared memory (st.async into the
// head's landing zone, counted on its mbarrier) instead of a workspace slot in L2 and a flag:
// 0.3-1.1 us less per call, 128 x 4096 x 4096 0.81 -> 0.85 of cuBLAS (log, session 48).
constexpr bool CLUSTER_FIXUP = true;
static_assert(WG_M == 64, "each consumer warpgroup covers exactly one wgmma M of 64 rows");
static_assert(BK * 2 == 128, "a tile row must be exactly one 128-byte swizzle line (BK = 64)");
static_assert(128 * PRODUCER_REGS + CONSUMERS * 128 * CONSUMER_REGS <= 65536,
              "register budgets after setmaxnreg must fit the 64K-register file");

// Which operand tile is MN-major (stored [k][rows]: 64-wide boxes, tnspA / tnspB set) for layout
// L. Not swapped, P = A and Q = B^T as in s13. Swapped, P = B^T takes B's major order and Q = A
// takes A's:  NT: both K-major (as always);  NN: P N-major, Q K-major;  TN: both MN-major.
template <gemm::Layout L, bool SWAP>
struct Roles {
  static constexpr bool P_MN = SWAP ? gemm::Majors<L>::B_MN : gemm::Majors<L>::A_MN;
  static constexpr bool Q_MN = SWAP ? gemm::Majors<L>::A_MN : gemm::Majors<L>::B_MN;
};
// Narrowest Q tile: an MN-major Q (swapped TN: x stored [K][M]) is whole 64-wide TMA boxes, one
// 128-byte swizzle line of m per k, so M <= 32 runs 64-wide tiles there (zero fill past M).
constexpr int MN_Q_MIN = 64;

// k boxes per stage for a tile width: the setting above, halved until 3 stages fit.
constexpr int ksub_for(bool swap, int bn) {
  int ks = swap ? KSUB_SWAP : bn == 64 ? KSUB_AB64 : KSUB_AB;
  while (ks > 1 && 3 * ks * (BM + bn) * BK * 2 + 1024 > SMEM_LIMIT) ks /= 2;
  return ks;
}

// Rows of C per pass of the staged register epilogue (Cfg) in `left` bytes (CL: in a consumer's
// slice of the landing zone, `land` bytes), multiples of 8 up to the tile's `rmax`.
constexpr int stg_rows(int left, bool cl, int land, int pitch, int rmax) {
  const int fit = (cl ? land : left / CONSUMERS) / (pitch * 2) / 8 * 8;
  return fit < rmax ? fit : rmax;
}

// PM: P rows per tile. BM = two consumers x 64 rows; 64 (narrow, NT only) = both consumers on
// the same 64 P rows, each on its own half of the BN Q rows.
template <bool SWAP, int BN, int KS, int PM = BM, bool CL = false>
struct Cfg {
  static constexpr int Q_TILE = BN * BK;             // one BN x 64 Q box
  static constexpr int P_STAGE = KS * PM * BK, Q_STAGE = KS * Q_TILE;
  static constexpr int QN = PM == BM ? BN : BN / 2;  // Q rows of one consumer (its wgmma N)
  static constexpr int XT = SWAP ? BN : PM;          // rows of x (A) per tile: Q swapped, else P
  static_assert(PM == BM || (PM == 64 && QN % 16 == 0), "narrow P: QN a wgmma N >= 16");
  static constexpr int STAGE_BYTES = (P_STAGE + Q_STAGE) * 2;
  // C staging for the TMA-store epilogue; the swapped epilogue writes C^T from registers.
  // (odd widths, QN not whole 64-wide boxes, store from registers: no staging)
  static constexpr int C_BYTES = SWAP || QN % C_BOX ? 0 : CONSUMERS * C_BUFS * C_CHUNK * 2;
  // CL: the head's landing zone for its peer's partial, 64 x QN fp32 per consumer
  static constexpr int LAND_BYTES = CL ? CONSUMERS * WG_M * QN * 4 : 0;
  static constexpr int FIT = (SMEM_LIMIT - 1024 - C_BYTES - LAND_BYTES) / STAGE_BYTES;
  static constexpr int CAP = PM == BM ? MAX_STAGES : NARROW_STAGES;
  static constexpr int RING = FIT < CAP ? FIT : CAP;  // 4 at BN = 256 (= s13)
  // Register epilogues (swapped: C^T; widths that are not whole 64-wide boxes) stage C as stored
  // in shared memory, STG_ROWS of its rows (tokens, swapped) per pass, and write it in 16-byte
  // row chunks: each warp store covers whole row segments, not 8 rows x 16 bytes. Row pitch
  // 8 mod 64 elements: conflict-free fragment writes. The staging takes what the ring leaves
  // (CL: the head's own slice of the landing zone, free once the partial is added); where not
  // even 8 rows fit, the register stores remain, as in the swapped 256-wide tile (forced plans
  // only; staging spilled there).
  static constexpr bool REG_EPI = SWAP ? QN <= 128 : QN % C_BOX != 0;
  static constexpr int STG_COLS = SWAP ? WG_M : QN;  // C columns of one consumer's tile
  static constexpr int STG_RMAX = SWAP ? QN : WG_M;  // C rows of one consumer's tile
  static constexpr int STG_PITCH = STG_COLS + ((8 - STG_COLS) % 64 + 64) % 64;
  static constexpr int LEFT = SMEM_LIMIT - 1024 - C_BYTES - LAND_BYTES;
  static constexpr int MIN_ROWS = STG_RMAX < 16 ? STG_RMAX : 16;
  // the ring gives up one stage (4 remain) where the staging would otherwise take more than one
  // pass (not swapped: 88 / 112-wide tiles, +3 points of cuBLAS at 128 x 11008 / 14336 x 4096)
  // or under 16 rows a pass (swapped)
  static constexpr bool SHORT =
      REG_EPI && RING > 4 &&
      stg_rows(LEFT - RING * STAGE_BYTES, CL, WG_M * QN * 4, STG_PITCH, STG_RMAX) < (SWAP ? MIN_ROWS : STG_RMAX);
  static constexpr int STAGES = SHORT ? RING - 1 : RING;
  static constexpr int STG_ROWS =
      REG_EPI ? stg_rows(LEFT - STAGES * STAGE_BYTES, CL, WG_M * QN * 4, STG_PITCH, STG_RMAX) : 0;
  static constexpr int STG_BYTES = CL ? 0 : CONSUMERS * STG_ROWS * STG_PITCH * 2;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + C_BYTES + LAND_BYTES + STG_BYTES + 1024;
  static_assert(BN % 8 == 0 && BN <= MAX_BN, "wgmma N: a multiple of 8 up to 256");
  static_assert((Q_TILE * 2) % 1024 == 0, "every tile must start on a 1024-byte swizzle atom");
  static_assert(STAGES >= 2 && SMEM_BYTES <= SMEM_LIMIT, "ring (+ C staging) must fit in 227 KB");
};

// n / d for 0 <= n < 2^31 and 1 <= d < 2^31 as a multiply-high, an add and a shift (Granlund and
// Montgomery's round-up method: l = ceil(log2 d), m = floor(2^32 (2^l - d) / d) + 1), m and l
// prepared on the host: the producer's path to its first TMA was five run-time divisions of ~20
// dependent instructions each, one of them 64-bit (log, session 57).
struct FastDiv {
  uint32_t m = 1, l = 0;
  FastDiv() = default;
  explicit FastDiv(int d) {
    while ((1u << l) < static_cast<uint32_t>(d)) ++l;
    m = static_cast<uint32_t>((((uint64_t{1} << l) - static_cast<uint64_t>(d)) << 32) / static_cast<uint64_t>(d) + 1);
  }
  __host__ __device__ __forceinline__ int operator()(int n) const {
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi(static_cast<uint32_t>(n), m);
#else
    const uint32_t hi = static_cast<uint32_t>(static_cast<uint64_t>(static_cast<uint32_t>(n)) * m >> 32);
#endif
    return static_cast<int>((hi + static_cast<uint32_t>(n)) >> l);
  }
};

// The work of one launch (host-computed, identical in every CTA). Tiles are numbered in s13's
// grouped order. The first sk_tiles tiles form an iteration space of sk_tiles * KT k-steps
// (tile-major) cut into gridDim.x contiguous ranges of equal length +-1; the rest go whole,
// strided, as in s13. sk_tiles = 0: data-parallel (= s13); = tiles with ranges that fall on
// k-step multiples of KT / S: split-K; otherwise stream-K, or hybrid if tiles remain.
struct Schedule {
  int tiles_p, tiles_q;  // tile grid over P rows x Q rows
  int KT;                // k-steps of 64 per tile (the K tail is TMA zero fill)
  int sk_tiles;
  int sk_iters;          // sk_tiles * KT
  int pm;                // P rows per tile (BM, or 64: narrow)
  // the device's divisions (prepare(), once the grid is known): sk_iters = sk_q x grid + sk_r
  int sk_q, sk_r;
  FastDiv by_grid, by_kt, by_group, by_last;  // grid, KT, GROUP_M x tiles_q, last group's P rows
  void prepare(int grid) {
    sk_q = sk_iters / grid;
    sk_r = sk_iters % grid;
    by_grid = FastDiv(grid);
    by_kt = FastDiv(KT);
    by_group = FastDiv(GROUP_M * tiles_q);
    by_last = FastDiv(tiles_p % GROUP_M ? tiles_p % GROUP_M : GROUP_M);
  }
};

// Range j of the shared iteration space. CTA b takes range gridDim-1-b: a tile cut between two
// CTAs has its head (k-step 0) in the higher-numbered one, which finishes the tile, so a CTA
// only ever waits on lower-numbered CTAs (dispatched first: no wait can deadlock), and it waits
// at the end of its range for partials the others computed at the start of theirs.
// floor(j x sk_iters / grid) = j x sk_q + floor(j x sk_r / grid), with j x sk_r < grid^2.
__host__ __device__ __forceinline__ int range_lo(const Schedule& s, int j) {
  return j * s.sk_q + s.by_grid(j * s.sk_r);
}

// This CTA's pieces of work (tile, k_begin, k_end), in order: its shared range, cut at tile
// boundaries, then its data-parallel tiles. Only the first piece can start mid-tile (its partial
// goes to this CTA's workspace slot); only the last piece of the range can start a tile without
// finishing it (this CTA then adds the others' partials and stores the tile).
struct Pieces {
  int it, hi, dp;  // next shared k-step, end of this CTA's range, next data-parallel tile
  __device__ __forceinline__ explicit Pieces(const Schedule& s) {
    const int j = gridDim.x - 1 - blockIdx.x;
    it = range_lo(s, j);
    hi = range_lo(s, j + 1);
    dp = s.sk_tiles + blockIdx.x;
  }
  __device__ __forceinline__ bool next(const Schedule& s, int& tile, int& kb, int& ke) {
    if (it < hi) {
      tile = s.by_kt(it);
      kb = it - tile * s.KT;
      ke = min(s.KT, kb + (hi - it));
      it += ke - kb;
      return true;
    }
    if (dp < s.tiles_p * s.tiles_q) {
      tile = dp;
      kb = 0;
      ke = s.KT;
      dp += gridDim.x;
      return true;
    }
    return false;
  }
};

// s13's grouped order: GROUP_M tile rows of P sweep the Q tiles together (L2 reuse).
// p0: first P row of the tile; qt: its tile index along Q.
__host__ __device__ __forceinline__ void tile_coords(int tile, const Schedule& s, int& p0, int& qt) {
  const int g = s.by_group(tile);
  const int first = g * GROUP_M;
  const unsigned in = tile - g * GROUP_M * s.tiles_q;  // the tile's place in its group
  if (first + GROUP_M <= s.tiles_p) {                  // a whole group: GROUP_M rows
    p0 = (first + static_cast<int>(in % GROUP_M)) * s.pm;
    qt = static_cast<int>(in / GROUP_M);
  } else {                                             // the last group: tiles_p % GROUP_M rows
    qt = s.by_last(static_cast<int>(in));
    p0 = (first + static_cast<int>(in) - qt * (s.tiles_p - first)) * s.pm;
  }
}

// Inter-CTA flags: integer release/acquire at GPU scope (ordering only; no float atomics).
__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(int* p, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed(int* p, int v) {
  asm volatile("st.relaxed.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// 2-CTA clusters (CL): the peer CTA's shared memory, its barriers, the cluster barrier.
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t peer_addr(const void* local, uint32_t rank) {  // mapa
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(hopper::smem_u32(local)), "r"(rank));
  return r;
}
// An asynchronous store into the peer's shared memory that counts its 16 bytes against the
// peer's barrier `bar` (complete_tx): the barrier's phase completes once every byte has landed.
__device__ __forceinline__ void st_async_peer(uint32_t addr, float4 v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];"
               ::"r"(addr), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait_acquire() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

template <typename T, gemm::Layout L, bool SWAP, int BN, int KS, int PM, bool CL>
__global__ void __launch_bounds__(THREADS, 1)
kernel(const __grid_constant__ CUtensorMap tmap_p, const __grid_constant__ CUtensorMap tmap_q,
       const __grid_constant__ CUtensorMap tmap_c, const __grid_constant__ CUtensorMap tmap_xt, gemm::Problem<T> p,
       Schedule sched, float* __restrict__ partials, int* __restrict__ flags, int x_tail, int tma_store, int vec2_ok,
       int vec16_ok) {
  using S = Cfg<SWAP, BN, KS, PM, CL>;
  constexpr int STAGES = S::STAGES, Q_TILE = S::Q_TILE, QN = S::QN, R = QN / 2;
  constexpr bool P_MN = Roles<L, SWAP>::P_MN, Q_MN = Roles<L, SWAP>::Q_MN;
  static_assert(PM == BM || (!P_MN && !Q_MN), "narrow P: K-major P and Q (NT)");
  static_assert(!Q_MN || BN % MN_Q_MIN == 0, "an MN-major Q tile is whole 64-wide TMA boxes");
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  // Tiles of 128 P rows / BN Q rows x 64 k: K-major [rows][64] or MN-major [rows / 64] boxes of
  // [64 k][64 rows]; either way rows 64j.. start 64j x 64 elements into the tile.
  T* sP = reinterpret_cast<T*>(smem);                                   // [STAGES][KS] P tiles
  T* sQ = reinterpret_cast<T*>(smem + STAGES * S::P_STAGE * 2);         // [STAGES][KS] Q tiles
  T* sC = reinterpret_cast<T*>(smem + STAGES * S::STAGE_BYTES);         // not swapped only
  __shared__ uint64_t full[STAGES];
  __shared__ uint64_t empty[STAGES];
  __shared__ uint64_t landed[CONSUMERS];  // CL: the peer's partial is in `land`
  float4* const land = reinterpret_cast<float4*>(smem + STAGES * S::STAGE_BYTES + S::C_BYTES);

  // --- tile assignment: this CTA's pieces (tile, k range), from Pieces in both roles ----------
  const int tid = threadIdx.x;
  const int wg = hopper::warp_uniform(tid / 128);
  // ring slot s <- k-step kt of the tile at P row p0, Q tile qt (the producer, thread 0). x's
  // ragged last tile (x_tail > 0: its rows, x K-major) comes through tmap_xt, a box of those rows
  // alone: TMA's zero fill of out-of-bounds rows cost up to 2x the call (129 x 4096 x 4096: 34
  // against 21 us, log, session 57). The tile's other rows keep stale data, which reaches only
  // output rows past M, never stored.
  constexpr int XT = S::XT;
  auto load = [&](int s, int kt, int p0, int qt) {
    const bool tail = x_tail > 0 && (SWAP ? qt * BN : p0) + XT > p.M;
    hopper::mbar_arrive_expect_tx(&full[s], S::STAGE_BYTES - (tail ? KS * (XT - x_tail) * BK * 2 : 0));
#pragma unroll
    for (int u = 0; u < KS; ++u) {
      hopper::tma_load_operand<P_MN, PM>(sP + s * S::P_STAGE + u * PM * BK, !SWAP && tail ? &tmap_xt : &tmap_p,
                                         &full[s], (kt * KS + u) * BK, p0);
      hopper::tma_load_operand<Q_MN, BN>(sQ + s * S::Q_STAGE + u * Q_TILE, SWAP && tail ? &tmap_xt : &tmap_q,
                                         &full[s], (kt * KS + u) * BK, qt * BN);
    }
  };
  int early = 0;  // k-steps of the first piece loaded before the block's barrier
  if (tid == 0) {
    hopper::tma_prefetch_desc(&tmap_p);
    hopper::tma_prefetch_desc(&tmap_q);
    if (tma_store) hopper::tma_prefetch_desc(&tmap_c);
    if (x_tail) hopper::tma_prefetch_desc(&tmap_xt);
    for (int s = 0; s < STAGES; ++s) {
      hopper::mbar_init(&full[s], 1);
      hopper::mbar_init(&empty[s], CONSUMERS * 4);
    }
    if (CL)
      for (int c = 0; c < CONSUMERS; ++c) hopper::mbar_init(&landed[c], 1);
    hopper::fence_barrier_init();
    if (CL)  // the one arrival: the phase then waits for the partial's bytes alone
      for (int c = 0; c < CONSUMERS; ++c) hopper::mbar_arrive_expect_tx(&landed[c], WG_M * QN * 4);
    // The ring's first round needs no wait: the first piece's first k-steps go out before the
    // block's barrier (only this thread's barriers and this CTA's shared memory are involved;
    // the consumers wait on `full` after it).
    int tile, kb, ke, p0, qt;
    if (EARLY_STAGES > 0 && Pieces(sched).next(sched, tile, kb, ke)) {
      hopper::fence_proxy_async_smem();  // the barriers' initialisation, before the TMA unit's use
      tile_coords(tile, sched, p0, qt);
      for (; early < EARLY_STAGES && early < STAGES && kb + early < ke; ++early) load(early, kb + early, p0, qt);
    }
  }
  __syncthreads();
  // this CTA's barriers exist (the tail waits on it); their initialisation is already released
  // to the cluster by fence.mbarrier_init (the .release form cost ~0.8 us per CTA before the
  // first TMA: log, session 55)
  if constexpr (CL) cluster_arrive_relaxed();

  if (wg == 0) {
    // --- operand staging (producer warpgroup): as s13, over the pieces' k ranges -------------
    hopper::setmaxnreg_dec<PRODUCER_REGS>();
    if (tid == 0) {
      int it = 0, tile, kb, ke;
      for (Pieces w(sched); w.next(sched, tile, kb, ke);) {
        int p0, qt;
        tile_coords(tile, sched, p0, qt);
        for (int kt = kb; kt < ke; ++kt, ++it) {
          if (it < early) continue;  // loaded before the barrier
          const int s = it % STAGES;
          hopper::mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);
          load(s, kt, p0, qt);
        }
      }
    }
  } else {
    hopper::setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = wg - 1;
    const int t = tid % 128, warp = t / 32, lane = t % 32;
    float acc[R];
    int it = 0, tile, kb, ke;
    // This consumer's slice of a partial: [R / 4][128 threads] float4s, 64 x BN fp32. Fragment
    // order, so writer and reader (same thread of the same consumer) need no layout change, and
    // each warp moves 512 contiguous bytes per float4 store or load.
    float4* const slots = reinterpret_cast<float4*>(partials) + cw * (R / 4) * 128 + t;
    constexpr int SLOT = CONSUMERS * (R / 4) * 128;  // float4s per CTA slot
    // BM rows: consumer cw takes rows cw*64.. (or MN-major box cw) and every Q row; narrow: the
    // same 64 P rows, Q rows cw*QN... The k-step's descriptors and barriers are these plus
    // constants (desc_k16_at): formed once, not per k-step from pointers.
    const uint64_t dP = hopper::opaque_desc(hopper::desc_k16<P_MN>(sP + (PM == BM ? cw * WG_M * BK : 0), 0));
    const uint64_t dQ = hopper::opaque_desc(hopper::desc_k16<Q_MN>(sQ + (PM == BM ? 0 : cw * QN * BK), 0));
    const uint32_t full0 = hopper::opaque(hopper::smem_u32(full)), empty0 = hopper::opaque(hopper::smem_u32(empty));
    for (Pieces w(sched); w.next(sched, tile, kb, ke);) {
      int p0, qt;
      tile_coords(tile, sched, p0, qt);
      const int q0 = qt * BN;
      // --- loop over K: as s13, over this piece's k-steps only ------------------------------
      for (int kt = kb; kt < ke; ++kt, ++it) {
        const unsigned s = unsigned(it) % STAGES;
        hopper::mbar_wait_warp(full0 + 8 * s, (unsigned(it) / STAGES) & 1);
        hopper::wgmma_fence();
        // the stage's descriptors, then immediates per wgmma (uniform registers: log, session 63)
        const uint64_t dPs = hopper::desc_at(dP, s * (S::P_STAGE * 2)), dQs = hopper::desc_at(dQ, s * (S::Q_STAGE * 2));
#pragma unroll
        for (int u = 0; u < KS; ++u) {
#pragma unroll
          for (int k = 0; k < BK / 16; ++k)  // K-major: +32 B inside the line; MN-major: +16 lines
            hopper::Wgmma<T, QN, P_MN, Q_MN>::mma(acc, hopper::desc_k16_at<P_MN>(dPs, u * PM * BK, k),
                                                  hopper::desc_k16_at<Q_MN>(dQs, u * Q_TILE, k),
                                                  kt > kb || u > 0 || k > 0);
        }
        hopper::wgmma_commit();
        hopper::wgmma_wait<1>();
        if (kt > kb && lane == 0) hopper::mbar_arrive(empty0 + 8 * (unsigned(it - 1) % STAGES));
      }
      hopper::wgmma_wait<0>();
      hopper::fence_regs(acc);
      if (lane == 0) hopper::mbar_arrive(empty0 + 8 * (unsigned(it - 1) % STAGES));

      // --- epilogue, part 1: pieces of a shared tile ----------------------------------------
      if (CL && kb > 0) {
        // The tail of a two-way split, in a 2-CTA cluster with the head: its partial goes
        // straight into the head's landing zone (fragment order, as the slots below) by
        // asynchronous stores that count their bytes on the head's barrier (once the cluster
        // barrier says the head's barriers are initialised).
        cluster_wait_acquire();
        const uint32_t peer = cluster_rank() ^ 1;
        const uint32_t dst = peer_addr(land + cw * (R / 4) * 128 + t, peer);
        const uint32_t bar = peer_addr(&landed[cw], peer);
#pragma unroll
        for (int i = 0; i < R / 4; ++i)
          st_async_peer(dst + i * 128 * 16, make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]),
                        bar);
        continue;
      }
      if (kb > 0) {
        // Not the tile's head: park the fp32 partial in this CTA's slot (L2: st.cg), then
        // raise this consumer's flag. The barrier orders all 128 threads' stores before the
        // one release store (CUTLASS's semaphore pattern): PTX's causality order is transitive
        // through bar.sync (CTA scope) and st.release / ld.acquire (GPU scope), so no fence is
        // needed between them (a __threadfence here cost 0.2-0.4 us per call, log session 46).
        float4* dst = slots + static_cast<size_t>(blockIdx.x) * SLOT;
#pragma unroll
        for (int i = 0; i < R / 4; ++i)
          __stcg(dst + i * 128, make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
        hopper::named_bar_sync(1 + cw, 128);
        if (t == 0) {
          st_release(flags + blockIdx.x * CONSUMERS + cw, 1);
        }
        continue;
      }
      if (CL && ke < sched.KT) {
        // The head of a two-way split in a cluster: its peer's partial lands in shared memory.
        hopper::mbar_wait<true>(&landed[cw], 0);   // acquire.cluster: the peer released
        const float4* src = land + cw * (R / 4) * 128 + t;
#pragma unroll
        for (int i = 0; i < R / 4; ++i) {
          const float4 v = src[i * 128];
          acc[4 * i] += v.x;
          acc[4 * i + 1] += v.y;
          acc[4 * i + 2] += v.z;
          acc[4 * i + 3] += v.w;
        }
      } else if (ke < sched.KT) {
        // The head of a shared tile: the rest of its k-steps belong to CTAs blockIdx-1, -2, ...
        // (ranges j+1, j+2, ...), down to `last`. One thread waits for all their flags (and
        // clears them for the next launch), then their partials are added in that fixed order:
        // the sum does not depend on which CTA finished first (bitwise-reproducible).
        const int tile_end = (tile + 1) * sched.KT;
        int last = blockIdx.x - 1;
        while (last > 0 && range_lo(sched, gridDim.x - last) < tile_end) --last;
        if (t == 0) {
          for (int d = blockIdx.x - 1; d >= last; --d) {
            int* f = flags + d * CONSUMERS + cw;
            while (ld_acquire(f) == 0) {
            }
            st_relaxed(f, 0);
          }
        }
        hopper::named_bar_sync(1 + cw, 128);
        for (int d = blockIdx.x - 1; d >= last; --d) {
          const float4* src = slots + static_cast<size_t>(d) * SLOT;
#pragma unroll
          for (int i = 0; i < R / 4; ++i) {
            const float4 v = __ldcg(src + i * 128);
            acc[4 * i] += v.x;
            acc[4 * i + 1] += v.y;
            acc[4 * i + 2] += v.z;
            acc[4 * i + 3] += v.w;
          }
        }
      }

      // --- epilogue, part 2: alpha (beta), convert, store ------------------------------------
      if (S::STG_ROWS && vec16_ok) {
        // Staged (beta == 0, C rows 16-byte aligned): C as stored, rows gr0.. and columns gc0..
        // of this consumer's tile; swapped, acc[4j + 2h + e] is C[m = 8j + 2(lane%4) + e][n =
        // warp*16 + lane/4 + 8h], else C[warp*16 + lane/4 + 8h][8j + 2(lane%4) + e].
        const int gr0 = SWAP ? q0 + (PM == BM ? 0 : cw * QN) : p0 + (PM == BM ? cw * WG_M : 0);
        const int gc0 = SWAP ? p0 + (PM == BM ? cw * WG_M : 0) : q0 + (PM == BM ? 0 : cw * QN);
        constexpr int PITCH = S::STG_PITCH, ROWS = S::STG_ROWS, CPR = S::STG_COLS / 8;
        T* const stg = CL ? reinterpret_cast<T*>(land + cw * (R / 4) * 128)
                          : reinterpret_cast<T*>(smem + STAGES * S::STAGE_BYTES + S::C_BYTES) + cw * ROWS * PITCH;
#pragma unroll
        for (int r0 = 0; r0 < S::STG_RMAX; r0 += ROWS) {
          hopper::named_bar_sync(1 + cw, 128);  // the previous pass's (or tile's) chunks are out
#pragma unroll
          for (int j = 0; j < QN / 8; ++j) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              if constexpr (SWAP) {
                if (8 * j < r0 || 8 * j >= r0 + ROWS) continue;
                const int n = warp * 16 + lane / 4 + 8 * h;
#pragma unroll
                for (int e = 0; e < 2; ++e)
                  stg[(8 * j + 2 * (lane % 4) + e - r0) * PITCH + n] = hopper::Cvt<T>::one(p.alpha * acc[4 * j + 2 * h + e]);
              } else {
                const int r = warp * 16 + lane / 4 + 8 * h - r0;
                if (r >= 0 && r < ROWS)
                  hopper::st_shared_u32(hopper::smem_u32(stg + r * PITCH + 8 * j + 2 * (lane % 4)),
                                        hopper::Cvt<T>::bits(p.alpha * acc[4 * j + 2 * h], p.alpha * acc[4 * j + 2 * h + 1]));
              }
            }
          }
          hopper::named_bar_sync(1 + cw, 128);
          const int rows = min(ROWS, S::STG_RMAX - r0);
          for (int i = t; i < rows * CPR; i += 128) {
            const int r = i / CPR, c = i % CPR * 8;
            const int gr = gr0 + r0 + r, gc = gc0 + c;
            if (gr >= p.M || gc >= p.N) continue;
            const uint4 v = *reinterpret_cast<const uint4*>(stg + r * PITCH + c);
            T* const dst = p.C + static_cast<size_t>(gr) * p.ldc + gc;
            if (gc + 8 <= p.N) {
              *reinterpret_cast<uint4*>(dst) = v;
            } else {  // the ragged right edge
              const T* const e = reinterpret_cast<const T*>(&v);
#pragma unroll
              for (int k = 0; k < 8; ++k)
                if (gc + k < p.N) dst[k] = e[k];
            }
          }
        }
      } else if constexpr (SWAP) {
        // (beta != 0 or C's rows not 16-byte aligned) acc holds C^T: fragment row = weight row n,
        // column = token m; a warp's store covers 8 consecutive n (16 B) in each of 4 rows m.
        const int n = p0 + (PM == BM ? cw * WG_M : 0) + warp * 16 + lane / 4;
        const int qc = q0 + (PM == BM ? 0 : cw * QN);
#pragma unroll
        for (int j = 0; j < QN / 8; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int m = qc + 8 * j + 2 * (lane % 4) + e;
            if (m >= p.M) continue;
            T* crow = p.C + static_cast<size_t>(m) * p.ldc;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int nn = n + 8 * h;
              if (nn >= p.N) continue;
              float v = p.alpha * acc[4 * j + 2 * h + e];
              if (p.beta != 0.f) v += p.beta * hopper::Cvt<T>::load(crow[nn]);
              crow[nn] = hopper::Cvt<T>::one(v);
            }
          }
        }
      } else if (tma_store) {
        // s13's epilogue: 64 x 64 boxes staged in SW128 shared memory, written by TMA stores.
        const bool issuer = t == 0;
        const uint32_t buf0 = hopper::smem_u32(sC + cw * C_BUFS * C_CHUNK);
#pragma unroll
        for (int q = 0; q < QN / C_BOX; ++q) {
          const uint32_t buf = buf0 + (q % C_BUFS) * C_CHUNK * 2;
          if (issuer) hopper::bulk_wait_read<C_BUFS - 1>();
          hopper::named_bar_sync(1 + cw, 128);
#pragma unroll
          for (int jj = 0; jj < C_BOX / 8; ++jj) {
            const int j = q * (C_BOX / 8) + jj;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int r = warp * 16 + lane / 4 + 8 * h;
              const uint32_t off = r * 128 + ((jj ^ (r % 8)) * 16) + 4 * (lane % 4);
              hopper::st_shared_u32(buf + off, hopper::Cvt<T>::bits(p.alpha * acc[4 * j + 2 * h],
                                                                    p.alpha * acc[4 * j + 2 * h + 1]));
            }
          }
          hopper::fence_proxy_async_smem();
          hopper::named_bar_sync(1 + cw, 128);
          if (issuer) {
            hopper::tma_store_2d(&tmap_c, sC + cw * C_BUFS * C_CHUNK + (q % C_BUFS) * C_CHUNK,
                                 q0 + (PM == BM ? 0 : cw * QN) + q * C_BOX, p0 + (PM == BM ? cw * WG_M : 0));
            hopper::bulk_commit();
          }
        }
      } else {
        hopper::store_acc<T, QN>(acc, p, p0 + (PM == BM ? cw * WG_M : 0) + warp * 16 + lane / 4,
                                 q0 + (PM == BM ? 0 : cw * QN) + 2 * (lane % 4), vec2_ok);
      }
    }
    // the last TMA stores must have read their staging before the CTA's shared memory goes; their
    // writes complete with the grid (waiting for them here cost 0.2-1.9 points of cuBLAS at
    // decode shapes: log, session 55)
    if (!SWAP && tma_store && t == 0) hopper::bulk_wait_read<0>();
  }
}

// ---------------------------------------------------------------------------------------------
// Host: the plan (orientation, tile width, schedule), the workspace, the launch.

struct Plan {
  bool swap;
  int bn;
  int ks;  // 64-wide k boxes per k-step
  int grid;
  Schedule s;
};

// Swapped tile width: the tokens rounded up to a wgmma N, at least q_min (MN_Q_MIN for TN).
inline int swap_bn(int M, int q_min) {
  const int bn = M <= 16 ? 16 : M <= 32 ? 32 : M <= 64 ? 64 : M <= 128 ? 128 : 256;
  return bn < q_min ? q_min : bn;
}

// Bytes of operand tiles that the first n tiles (grouped order) read over all of K: stream-K
// CTAs work on them at different k at once, so all of it is live in L2.
inline double sk_bytes(const Schedule& s, int n, int bn, int K, int elem) {
  const int rows = min(s.tiles_p, GROUP_M);
  const int dq = min(s.tiles_q, gemm::cdiv(n, rows));
  const int dp = min(s.tiles_p, rows * gemm::cdiv(n, rows * s.tiles_q));
  return (static_cast<double>(dp) * s.pm + static_cast<double>(dq) * bn) * K * elem;
}

// One-wave weight tile width (WAVE_BN) for p, or 0 where the rule does not apply.
template <typename T>
int wave_bn(const gemm::Problem<T>& p, int sms) {
  if (p.layout != gemm::Layout::NT || p.M <= 64 || p.M > 256 || gemm::cdiv(p.K, BK) > WAVE_MAX_KT) return 0;
  for (int bn : WAVE_BN) {
    const int tiles = gemm::cdiv(p.M, BM) * gemm::cdiv(p.N, bn);
    if (tiles <= sms) return tiles >= WAVE_MIN_FILL * sms ? bn : 0;
  }
  return 0;
}

// The heuristic. force_*: -1 / 0 = decide here (for measuring other choices, see launch_with).
//   tiles: 128 rows of P, or NARROW_PM (NT; swapped with BN 64-128, or not swapped with
//     M <= NARROW_AB_MAX_M) where even 64-row tiles are too few for data-parallel;
//   tiles >= SMs: data-parallel (s13) if the last wave is full enough (DP_MIN_EFF), else hybrid:
//     all but two waves data-parallel, the rest (1-2 tiles per SM) stream-K over every SM, if
//     those tiles' operands fit in SK_L2_FILL of the L2 (l2_bytes; else data-parallel);
//   tiles >= DP_MIN_FILL x SMs: data-parallel, one tile per CTA;
//   fewer: S splits of each tile's k-steps, S = round(target / tiles) with target = SMs / 2
//     swapped (memory-bound: half the SMs stream the weight) or all SMs not swapped, S >= 2,
//     tiles x S <= SMs, >= MIN_ITERS (not swapped: MIN_ITERS_AB) k boxes per split. Split-K
//     when S divides the k-steps, else the same ranges cross tile boundaries (stream-K over
//     tiles x S CTAs); if no S fits, stream-K over all SMs.
template <typename T>
Plan make_plan(const gemm::Problem<T>& p, int sms, int force_swap = -1, int force_sk = -1,
               int force_grid = 0, double l2_bytes = 0) {
  Plan pl;
  // one-wave weight tiles: >= 90% of the SMs, so the rules below run them data-parallel
  const int wave = force_swap < 0 && force_sk < 0 ? wave_bn(p, sms) : 0;
  pl.swap = wave ? false : force_swap >= 0 ? force_swap != 0 : p.M <= SWAP_MAX_M;
  const bool a_mn = p.layout == gemm::Layout::TN;  // swapped, Q = A: M-major in TN (Roles)
  pl.bn = wave ? wave : pl.swap ? swap_bn(p.M, a_mn ? MN_Q_MIN : 16) : 256;
  pl.ks = ksub_for(pl.swap, pl.bn);
  Schedule& s = pl.s;
  const bool narrow =
      p.layout == gemm::Layout::NT &&
      (pl.swap ? pl.bn >= 64 && pl.bn <= 128 && gemm::cdiv(p.N, NARROW_PM) < DP_MIN_FILL * sms
               : p.M <= NARROW_AB_MAX_M && gemm::cdiv(p.M, NARROW_PM) * gemm::cdiv(p.N, pl.bn) < DP_MIN_FILL * sms);
  s.pm = narrow ? NARROW_PM : BM;
  s.tiles_p = gemm::cdiv(pl.swap ? p.N : p.M, s.pm);
  s.tiles_q = gemm::cdiv(pl.swap ? p.M : p.N, pl.bn);
  s.KT = gemm::cdiv(p.K, BK * pl.ks);
  const int tiles = s.tiles_p * s.tiles_q;
  int grid = min(tiles, sms), sk = 0;
  if (force_sk >= 0) {
    sk = min(force_sk, tiles);
    grid = force_grid > 0 ? min(force_grid, sms) : sms;
  } else if (tiles >= sms) {
    const int waves = gemm::cdiv(tiles, sms);
    const int hy = tiles - (waves - 2) * sms;
    if (tiles < DP_MIN_EFF * waves * sms && sk_bytes(s, hy, pl.bn, p.K, sizeof(T)) <= SK_L2_FILL * l2_bytes)
      sk = hy;  // hybrid
  } else if (tiles < DP_MIN_FILL * sms) {
    const float target = pl.swap ? SPLIT_FILL_SWAP * sms : sms;
    const int min_iters = max(1, (pl.swap ? MIN_ITERS : MIN_ITERS_AB) / pl.ks);  // in k-steps of pl.ks boxes
    const int S = min(max(2, static_cast<int>(target / tiles + 0.5f)), min(sms / tiles, s.KT / min_iters));
    const int g = S >= 2 ? tiles * S : min(sms, s.KT * tiles / min_iters);
    if (g > tiles) {
      sk = tiles;
      grid = g;
    }
  }
  // A shared range shorter than one k-step would leave a CTA idle: at most sk_iters CTAs.
  s.sk_tiles = sk;
  s.sk_iters = sk * s.KT;
  if (sk > 0) grid = min(grid, s.sk_iters);
  pl.grid = max(grid, 1);
  s.prepare(pl.grid);
  return pl;
}

inline const char* plan_kind(const Plan& pl) {
  const int tiles = pl.s.tiles_p * pl.s.tiles_q;
  if (pl.s.sk_tiles == 0) return "data-parallel";
  if (pl.s.sk_tiles < tiles) return "hybrid";
  if (pl.grid % tiles == 0 && pl.s.KT % (pl.grid / tiles) == 0) return "split-k";
  return "stream-k";
}

// Workspace: partial slots [SMs][CONSUMERS][64 x 256] fp32 (128 KiB per SM; a launch uses
// grid <= SMs slots of 64 x BN) after flags [SMs][CONSUMERS] int, one buffer per device,
// allocated at its bound on first use and zeroed once; the kernel leaves every flag at 0.
struct Workspace {
  float* partials = nullptr;
  int* flags = nullptr;
};
inline size_t flag_bytes(int sms) { return (static_cast<size_t>(sms) * CONSUMERS * sizeof(int) + 255) / 256 * 256; }
inline size_t workspace_bytes(int sms) {
  return flag_bytes(sms) + static_cast<size_t>(sms) * CONSUMERS * WG_M * MAX_BN * sizeof(float);
}

inline cudaError_t workspace(int dev, int sms, cudaStream_t stream, Workspace* out) {
  static std::mutex mu;
  static void* bufs[64] = {};
  if (dev < 0 || dev >= 64) return cudaErrorInvalidDevice;
  std::lock_guard<std::mutex> lock(mu);
  if (!bufs[dev]) {
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(stream, &cap);
    if (e != cudaSuccess) return e;
    if (cap != cudaStreamCaptureStatusNone) return cudaErrorStreamCaptureUnsupported;
    void* b = nullptr;
    if ((e = cudaMalloc(&b, workspace_bytes(sms))) != cudaSuccess) return e;
    if ((e = cudaMemset(b, 0, flag_bytes(sms))) != cudaSuccess || (e = cudaDeviceSynchronize()) != cudaSuccess) {
      cudaFree(b);
      return e;
    }
    bufs[dev] = b;
  }
  out->flags = static_cast<int*>(bufs[dev]);
  out->partials = reinterpret_cast<float*>(static_cast<char*>(bufs[dev]) + flag_bytes(sms));
  return cudaSuccess;
}

// A plan whose every tile is cut in two between CTAs 2i and 2i + 1 (split-K, S = 2): the
// cluster-pair fixup applies (CL). Range j = grid-1-b covers half j % 2 of tile j / 2.
inline bool pairs(const Plan& pl) {
  const int tiles = pl.s.tiles_p * pl.s.tiles_q;
  return CLUSTER_FIXUP && pl.s.sk_tiles == tiles && pl.grid == 2 * tiles && pl.s.KT >= 2;
}

template <typename T, gemm::Layout L, bool SWAP, int BN, int PM = BM, bool CL = false, int KS = ksub_for(SWAP, BN)>
cudaError_t run(const gemm::Problem<T>& p, const Plan& pl, const Workspace& ws, cudaStream_t stream) {
  using S = Cfg<SWAP, BN, KS, PM, CL>;
  using Mj = gemm::Majors<L>;
  // Each operand's map in its stored order (K-major: [rows][K] boxes of rows x 64; MN-major:
  // [K][rows], boxes of 64 x 64), whichever role it takes: P = B (W) swapped, else A.
  CUtensorMap tp, tq;
  cudaError_t e = SWAP ? hopper::make_tmap_operand(&tp, p.B, Mj::B_MN, p.N, p.K, p.ldb, PM)
                       : hopper::make_tmap_operand(&tp, p.A, Mj::A_MN, p.M, p.K, p.lda, PM);
  if (e != cudaSuccess) return e;
  e = SWAP ? hopper::make_tmap_operand(&tq, p.A, Mj::A_MN, p.M, p.K, p.lda, BN)
           : hopper::make_tmap_operand(&tq, p.B, Mj::B_MN, p.N, p.K, p.ldb, BN);
  if (e != cudaSuccess) return e;
  // beta = 0 and C's rows in 16-byte units: the TMA-store epilogue (whole 64-wide boxes) or the
  // staged register epilogue's 16-byte row chunks (Cfg::STG_ROWS)
  const int vec16_ok = p.beta == 0.f && reinterpret_cast<uintptr_t>(p.C) % 16 == 0 && (p.M == 1 || p.ldc % 8 == 0);
  const int tma_store = !SWAP && S::QN % C_BOX == 0 && vec16_ok;
  CUtensorMap tc = {};
  if (tma_store && (e = hopper::make_tmap_kmajor(&tc, p.C, p.M, p.N, p.ldc, WG_M)) != cudaSuccess)
    return e;
  // x (A) K-major with a ragged last tile: that tile's rows as their own box (the kernel's load)
  const int x_tail = (SWAP ? Roles<L, SWAP>::Q_MN : Roles<L, SWAP>::P_MN) ? 0 : p.M % S::XT;
  CUtensorMap txt = {};
  if (x_tail && (e = hopper::make_tmap_kmajor(&txt, p.A, p.M, p.K, p.lda, x_tail)) != cudaSuccess) return e;
  auto* const fn = kernel<T, L, SWAP, BN, KS, PM, CL>;
  e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, S::SMEM_BYTES);
  if (e != cudaSuccess) return e;
  const int vec2_ok = p.ldc % 2 == 0 && reinterpret_cast<uintptr_t>(p.C) % 4 == 0;
  if constexpr (CL) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 2;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(pl.grid);
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = S::SMEM_BYTES;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    // every pair resident at once (the head waits for its peer), else the flag fixup; the
    // occupancy query once per device (host time: it is not free)
    static int resident[64] = {};  // clusters + 1; 0 = not asked yet
    int dev = 0;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess) return e;
    int clusters = dev >= 0 && dev < 64 ? resident[dev] - 1 : -1;
    if (clusters < 0) {
      if ((e = cudaOccupancyMaxActiveClusters(&clusters, fn, &cfg)) != cudaSuccess) return e;
      if (dev >= 0 && dev < 64) resident[dev] = clusters + 1;
    }
    if (2 * clusters < pl.grid) return run<T, L, SWAP, BN, PM, false>(p, pl, ws, stream);
    if ((e = cudaLaunchKernelEx(&cfg, fn, tp, tq, tc, txt, p, pl.s, ws.partials, ws.flags, x_tail, tma_store, vec2_ok,
                                vec16_ok)) !=
        cudaSuccess)
      return e;
    return cudaGetLastError();
  } else {
    fn<<<pl.grid, THREADS, S::SMEM_BYTES, stream>>>(tp, tq, tc, txt, p, pl.s, ws.partials, ws.flags, x_tail, tma_store,
                                                    vec2_ok,
                                                    vec16_ok);
    return cudaGetLastError();
  }
}

// One instantiation per layout (common/layouts.cuh): NT's kernels are the code they always were.
template <typename T, gemm::Layout L>
cudaError_t launch_layout(const gemm::Problem<T>& p, const Plan& pl, const Workspace& ws, cudaStream_t stream) {
  if (!pl.swap) {
    if constexpr (L == gemm::Layout::NT) {
      if (pl.s.pm == NARROW_PM) return run<T, L, false, 256, NARROW_PM>(p, pl, ws, stream);
      switch (pl.bn) {  // one-wave widths (WAVE_BN)
        case 64: return run<T, L, false, 64>(p, pl, ws, stream);
        case 88: return run<T, L, false, 88>(p, pl, ws, stream);
        case 112: return run<T, L, false, 112>(p, pl, ws, stream);
        case 168: return run<T, L, false, 168>(p, pl, ws, stream);
        default: break;
      }
    }
    return run<T, L, false, 256>(p, pl, ws, stream);
  }
  // An MN-major Q (TN) never gets 16 or 32 from make_plan: those cases fold onto the 64-wide
  // kernel, so no narrow MN-major Q tile is ever instantiated.
  constexpr int Q_MIN = Roles<L, true>::Q_MN ? MN_Q_MIN : 16;
  if constexpr (L == gemm::Layout::NT) {  // narrow P tiles: make_plan gives them BN 64 or 128
    const bool cl = pairs(pl);
    if (pl.s.pm == NARROW_PM) {
      if (cl)
        return pl.bn == 64 ? run<T, L, true, 64, NARROW_PM, true>(p, pl, ws, stream)
                           : run<T, L, true, 128, NARROW_PM, true>(p, pl, ws, stream);
      return pl.bn == 64 ? run<T, L, true, 64, NARROW_PM>(p, pl, ws, stream)
                         : run<T, L, true, 128, NARROW_PM>(p, pl, ws, stream);
    }
    if (cl && pl.bn == 16) return run<T, L, true, 16, BM, true>(p, pl, ws, stream);
    if (cl && pl.bn == 32) return run<T, L, true, 32, BM, true>(p, pl, ws, stream);
  }
  switch (pl.bn) {
    case 16: return run<T, L, true, (16 > Q_MIN ? 16 : Q_MIN)>(p, pl, ws, stream);
    case 32: return run<T, L, true, (32 > Q_MIN ? 32 : Q_MIN)>(p, pl, ws, stream);
    case 64: return run<T, L, true, 64>(p, pl, ws, stream);
    case 128: return run<T, L, true, 128>(p, pl, ws, stream);
    default: return run<T, L, true, 256>(p, pl, ws, stream);
  }
}

template <typename T>
cudaError_t launch_plan(const gemm::Problem<T>& p, const Plan& pl, cudaStream_t stream) {
  Workspace ws;
  if (pl.s.sk_tiles > 0) {
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    if ((e = workspace(dev, hopper::sm_count(dev), stream, &ws)) != cudaSuccess) return e;
  }
  return gemm::with_layout(p.layout, [&](auto l) { return launch_layout<T, decltype(l)::value>(p, pl, ws, stream); });
}

inline int current_sms() {
  int dev = 0;
  return cudaGetDevice(&dev) == cudaSuccess ? hopper::sm_count(dev) : 0;
}

// L2 bytes of the current device, read once per device (0 if the query fails: no hybrid).
inline double current_l2() {
  static int l2[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 0;
  if (!l2[dev] && cudaDeviceGetAttribute(&l2[dev], cudaDevAttrL2CacheSize, dev) != cudaSuccess) l2[dev] = 0;
  return l2[dev];
}

template <typename T>
cudaError_t launch_t(const gemm::Problem<T>& p, cudaStream_t stream) {
  const int sms = current_sms();
  if (!sms) return cudaErrorInvalidDevice;
  return launch_plan(p, make_plan(p, sms, -1, -1, 0, current_l2()), stream);
}

// For measuring other decompositions than the heuristic's: swap 0/1, sk_tiles (0 = data-
// parallel, >= tiles = all tiles stream-K), grid (0 = all SMs); -1 = the heuristic's choice.
template <typename T>
cudaError_t launch_with_t(const gemm::Problem<T>& p, cudaStream_t stream, int swap, int sk_tiles, int grid) {
  const int sms = current_sms();
  if (!sms) return cudaErrorInvalidDevice;
  return launch_plan(p, make_plan(p, sms, swap, sk_tiles, grid, current_l2()), stream);
}

// What launch() does with p on the current device, e.g. "split-k, swap-AB, 128x16x256 tiles
// (N x M x K), 32 tiles x 16 k-steps, 64 CTAs" (for reports; the string lives until the next call).
template <typename T>
const char* decomposition_t(const gemm::Problem<T>& p) {
  thread_local char buf[160];
  const int sms = current_sms();
  if (!sms) return "unknown (no CUDA device)";
  const Plan pl = make_plan(p, sms, -1, -1, 0, current_l2());
  // tiles as P x Q x k-step, named like Triton s14's: swapped, P is the weight's N side
  const int tiles = pl.s.tiles_p * pl.s.tiles_q;
  char sk[40] = "";
  if (pl.s.sk_tiles > 0 && pl.s.sk_tiles < tiles) snprintf(sk, sizeof sk, " (%d stream-k)", pl.s.sk_tiles);
  snprintf(buf, sizeof buf, "%s, %s, %dx%dx%d tiles (%s), %d tiles x %d k-steps%s, %d CTAs", plan_kind(pl),
           pl.swap ? "swap-AB" : "A-B", pl.s.pm, pl.bn, BK * pl.ks, pl.swap ? "N x M x K" : "M x N x K", tiles,
           pl.s.KT, sk, pl.grid);
  return buf;
}

template <typename T>
const char* unsupported_t(const gemm::Problem<T>& p) {
  return hopper::tma_operand_problem(p);  // per layout: the strided dimension of each operand
}

const char* unsupported(const gemm::Problem<__half>& p) { return unsupported_t(p); }
const char* unsupported(const gemm::Problem<__nv_bfloat16>& p) { return unsupported_t(p); }
cudaError_t launch(const gemm::Problem<__half>& p, cudaStream_t s) { return launch_t(p, s); }
cudaError_t launch(const gemm::Problem<__nv_bfloat16>& p, cudaStream_t s) { return launch_t(p, s); }
const char* decomposition(const gemm::Problem<__half>& p) { return decomposition_t(p); }
const char* decomposition(const gemm::Problem<__nv_bfloat16>& p) { return decomposition_t(p); }
cudaError_t launch_with(const gemm::Problem<__half>& p, cudaStream_t s, int swap, int sk, int grid) {
  return launch_with_t(p, s, swap, sk, grid);
}
cudaError_t launch_with(const gemm::Problem<__nv_bfloat16>& p, cudaStream_t s, int swap, int sk, int grid) {
  return launch_with_t(p, s, swap, sk, grid);
}

}  // namespace s14_stream_k
