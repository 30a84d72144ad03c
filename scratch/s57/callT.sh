#!/usr/bin/env bash
# One H100 (next session, on branch s58-triton-ragged-x): Triton s14 with x by masked loads where M
# is ragged, beside main's file (tvars/old), CUDA s14 and cuBLAS; then the Triton s14 GPU tests.
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t0=$(date +%s)
timeout 240 python3 scratch/s57/tvtime.py scratch/s57/tvars/old \
  65x4096x4096,100x4096x4096,129x4096x4096,192x4096x4096,129x11008x4096,200x14336x4096,1x4096x4096,64x4096x4096,256x4096x4096,40x14336x4096 2>&1 | tee $OUT/tvtime.log | grep -v Warning
echo "tvtime done $(( $(date +%s) - t0 )) s"
timeout $(( 560 - ($(date +%s) - t0) )) python3 -m pytest -q -m gpu -n 12 -p no:cacheprovider tests/test_gpu.py tests/test_model_api.py -k "(triton and s14) and not another_gpu" 2>&1 | tail -4 | tee $OUT/gpu.log
echo "tests done $(( $(date +%s) - t0 )) s"
