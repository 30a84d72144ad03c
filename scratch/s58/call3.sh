#!/usr/bin/env bash
# One H100: Triton s14's GPU tests with X_PTR_MAX_FILL = 1 (the masked-load path in every ragged
# program), then the two x paths timed per shape (tvtime3.py) to set the threshold.
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
t0=$(date +%s)
timeout 250 python3 -m pytest -q -m gpu -n 12 -p no:cacheprovider tests/test_gpu.py -k "triton and s14 and not another_gpu" > $OUT/gpu.log 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s"; tail -3 $OUT/gpu.log
S=""
for m in 65 66 72 80 88 96 112; do S="$S,${m}x4096x4096"; done
for m in 72 88 100 129 140 160 176 200; do S="$S,${m}x11008x4096"; done
for m in 72 140 160 176 200 240; do S="$S,${m}x14336x4096"; done
timeout $(( 560 - ($(date +%s) - t0) )) python3 scratch/s58/tvtime3.py ${S#,} > $OUT/tvtime.log 2>&1
echo "tvtime rc=$? $(( $(date +%s) - t0 )) s"
grep -v Warning $OUT/tvtime.log
