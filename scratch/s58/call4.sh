#!/usr/bin/env bash
# One H100: Triton s14 with the masked-x thresholds (X_PTR_TAIL 88, X_PTR_WIDE_TAIL 24) timed beside
# main's file; then every Triton s14 GPU test and CUDA s14 at the two new decode shapes.
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
t0=$(date +%s)
timeout 120 python3 scratch/s57/tvtime.py scratch/s57/tvars/old \
  65x4096x4096,80x4096x4096,88x4096x4096,96x4096x4096,129x11008x4096,140x11008x4096,160x11008x4096,129x14336x4096,140x14336x4096,40x4096x4096,129x4096x4096,1x4096x4096 > $OUT/tvtime.log 2>&1
echo "tvtime rc=$? $(( $(date +%s) - t0 )) s"
timeout $(( 540 - ($(date +%s) - t0) )) python3 -m pytest -q -m gpu -n 14 -p no:cacheprovider tests/test_gpu.py -k "((triton and s14) or (cuda and s14 and (72x4100x520 or 129x11008x264))) and not another_gpu" > $OUT/gpu.log 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s"; tail -3 $OUT/gpu.log
grep -v Warning $OUT/tvtime.log
