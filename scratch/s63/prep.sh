#!/usr/bin/env bash
# Makes scratch/s63/old/s14_stream_k.cu, the A/B baseline of call1.sh: s14 before session 63's
# uniform-register k-loop (94310bd). Run it here (the device copy has no .git) before a call that
# carries scratch/s63.
cd "$(dirname "$0")/../.."
mkdir -p scratch/s63/old && git show 94310bd:cuda_src/s14_stream_k.cu > scratch/s63/old/s14_stream_k.cu
