#!/usr/bin/env bash
# Makes scratch/s62/old/s14_stream_k.cu, the A/B baseline of call1.sh: s14 as it was before session
# 62 (ed4ffcd), the source with one k box per stage in every unswapped tile. Run it here (the device
# copy has no .git) before a call that carries scratch/s62.
cd "$(dirname "$0")/../.."
mkdir -p scratch/s62/old && git show ed4ffcd:cuda_src/s14_stream_k.cu > scratch/s62/old/s14_stream_k.cu
# and scratch/s62/var/s14_stream_k.cu, the "new" side as call1.sh timed it: the same with KSUB_AB = 2
# (two k boxes per stage in every unswapped one-wave width; the tree keeps two for 64-wide only).
# To repeat the call: cp scratch/s62/var/s14_stream_k.cu cuda_src/ first.
mkdir -p scratch/s62/var && sed 's/^constexpr int KSUB_AB = 1; /constexpr int KSUB_AB = 2; /' \
  scratch/s62/old/s14_stream_k.cu > scratch/s62/var/s14_stream_k.cu
