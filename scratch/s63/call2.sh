#!/usr/bin/env bash
# Session 63, one GPU: GPU tests and compute-sanitizer for CUDA s14's uniform-register k-loop.
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $name"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t0=$(date +%s)
timeout 150 python3 -c "import study; study.kernel('cuda', 's14')" > $OUT/build.log 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
timeout 270 python3 -m pytest -q -m gpu -n 12 -p no:cacheprovider tests/test_gpu.py tests/test_decomposition.py tests/test_gpu_replay.py \
  -k "s14 and not triton and not another_gpu or decode_decompositions and 250x4000x936" > $OUT/gpu_tests.log 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s"; tail -3 $OUT/gpu_tests.log
timeout 240 python3 tests/sanitize_run.py s14_stream_k --families cuda --jobs 8 --timeout 200 --shapes 250x4000x936 16x4096x520 120x11008x264 > $OUT/sanitize.log 2>&1
echo "sanitize rc=$? $(( $(date +%s) - t0 )) s"; tail -14 $OUT/sanitize.log
