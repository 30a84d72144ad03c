#!/usr/bin/env bash
# Session 60, one H100: CUDA s14 with its consumer k-step's descriptors and barrier addresses formed
# once (65 instructions per k-step, from 96). Its GPU tests, the raggedn timing beside cuBLAS (compare
# with this session's run before the change, same script), then the decode sweep (bf16, s14 of both
# families and cuBLAS) merged into the H100 tables.
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $name"
case "$name" in *H100*) ;; *) echo "not an H100: nothing run"; exit 0 ;; esac
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 STUDY_GIT_COMMIT=$(cat scratch/commit.txt)
t0=$(date +%s)
timeout 150 python3 -c "import study; study.kernel('cuda', 's14')" > $OUT/build.log 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
timeout 240 python3 -m pytest -q -m gpu -n 14 -p no:cacheprovider tests/test_gpu.py tests/test_decomposition.py tests/test_gpu_replay.py \
  -k "s14 and not triton and not another_gpu" > $OUT/gpu.log 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s"; tail -3 $OUT/gpu.log
last=$(tail -1 $OUT/gpu.log); echo "$last" | grep -q " passed" && ! echo "$last" | grep -q "failed\|error" || { echo "tests not clean: stop"; exit 1; }
timeout 100 python3 scratch/s58/raggedn.py > $OUT/raggedn.log 2>&1; echo "raggedn rc=$? $(( $(date +%s) - t0 )) s"; grep -v Warn $OUT/raggedn.log
left=$(( 575 - ($(date +%s) - t0) )); echo "left for the sweep: $left s"
timeout $left python3 -m study reports --families cuda triton cublas --stages s14 --precisions bf16 --shapes decode --no-ncu --no-model > $OUT/decode.log 2>&1
rc=$?; echo "decode rc=$rc $(( $(date +%s) - t0 )) s"; tail -4 $OUT/decode.log
[ $rc -eq 0 ] && tar czf $OUT/reports.tgz reports
