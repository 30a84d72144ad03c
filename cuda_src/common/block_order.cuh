// common/block_order.cuh: grouped ("swizzled") order of C tiles over a 1-D grid, for L2 reuse.
//
// Blocks are scheduled roughly in blockIdx order. Row-major tile order makes one wave of
// resident blocks touch a few A strips but *every* B strip; walking GROUP tile rows down
// before moving one tile column right makes a wave touch GROUP A strips and only
// wave/GROUP B strips, so far fewer operand bytes must come from DRAM instead of L2.
// Example, 8192^3 fp16, 128x256 tiles, 132 blocks per wave: row-major touches 4 A strips
// (2 MiB each) + 32 B strips (4 MiB each) = 136 MiB; GROUP = 8 touches 8 A + 17 B = 84 MiB.
#pragma once

namespace gemm {

struct TileCoord { int m, n; };  // tile row and tile column of C

// Tile of linear block id `pid` for a grid of tiles_m x tiles_n tiles, GROUP tile rows per group.
__device__ __forceinline__ TileCoord grouped_tile(int pid, int tiles_m, int tiles_n, int group) {
  const int per_group = group * tiles_n;                   // blocks in one full group
  const int first_m = (pid / per_group) * group;           // first tile row of this group
  const int rows = min(tiles_m - first_m, group);          // the last group may be shorter
  const int in_group = pid % per_group;
  return {first_m + in_group % rows, in_group / rows};     // down the group's rows first
}

}  // namespace gemm
