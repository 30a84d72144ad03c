#!/usr/bin/env bash
# Makes the two s15 sources the A/B scripts of session 61 time beside the tree's own (run here, in
# the checkout, before a device call that carries scratch/s61; the device copy has no .git):
#   scratch/s61/old/s15_fp8.cu     the source before this session (c7b36b6)
#   scratch/s61/var_it/s15_fp8.cu  06d3d34's source with the pair loop's stage from it % STAGES
cd "$(dirname "$0")/../.."
mkdir -p scratch/s61/old scratch/s61/var_it
git show c7b36b6:cuda_src/s15_fp8.cu > scratch/s61/old/s15_fp8.cu
git show 06d3d34:cuda_src/s15_fp8.cu > scratch/s61/var_it/s15_fp8.cu
patch -s scratch/s61/var_it/s15_fp8.cu scratch/s61/var_it.patch
