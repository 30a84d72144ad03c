#!/usr/bin/env bash
# One H100: Triton s14 ragged-x branch timed beside main's file, CUDA s14 and cuBLAS; then the Triton
# s14 GPU tests, the model-API and graph-replay GPU tests (not rerun since session 57's CUDA changes).
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
t0=$(date +%s)
timeout 230 python3 scratch/s57/tvtime.py scratch/s57/tvars/old \
  65x4096x4096,100x4096x4096,129x4096x4096,192x4096x4096,129x11008x4096,200x14336x4096,1x4096x4096,64x4096x4096,256x4096x4096,40x14336x4096 > $OUT/tvtime.log 2>&1
echo "tvtime rc=$? $(( $(date +%s) - t0 )) s"
timeout $(( 570 - ($(date +%s) - t0) )) python3 -m pytest -q -m gpu -n 12 -p no:cacheprovider tests/test_gpu.py tests/test_model_api.py tests/test_gpu_replay.py -k "((triton and s14) or test_model_api or test_gpu_replay) and not another_gpu" > $OUT/gpu.log 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s"; tail -5 $OUT/gpu.log
grep -v Warning $OUT/tvtime.log
