#!/usr/bin/env bash
# One H100: Triton s14 with x by masked loads only in programs that touch the part-filled token
# tile (X_PTR_MAX_FILL = 1.0) beside main's file, over ragged M in all three kernel paths.
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
t0=$(date +%s)
S=""
for m in 1 4 24 40 65 80 100 120 129 160 200 250; do S="$S,${m}x4096x4096"; done
for m in 4 40 100 129 200 250; do S="$S,${m}x11008x4096"; done
for m in 1 40 100 129 200; do S="$S,${m}x14336x4096"; done
timeout 400 python3 scratch/s57/tvtime.py scratch/s57/tvars/old ${S#,} > $OUT/tvtime.log 2>&1
echo "tvtime rc=$? $(( $(date +%s) - t0 )) s"
grep -v Warning $OUT/tvtime.log
