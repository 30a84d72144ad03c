#!/usr/bin/env bash
# Makes scratch/s64/old/s14_stream_k.cu, the A/B baseline of call1.sh: s14 before session 64's
# x multicast (ac91521). Run it here (the device copy has no .git) before a call that carries
# scratch/s64.
cd "$(dirname "$0")/../.."
mkdir -p scratch/s64/old && git show ac91521:cuda_src/s14_stream_k.cu > scratch/s64/old/s14_stream_k.cu
