#!/usr/bin/env bash
# H200 only: CUDA and Triton s15 beside cuBLAS FP8 at 4096^3 and 8192^3 (a filtered run merged into the
# H200 tables); the tables come back as a tarball.
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name"
case "$name" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0 ;; esac
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 STUDY_GIT_COMMIT=$(cat scratch/commit.txt)
t0=$(date +%s)
timeout 135 python3 -m study reports --families cuda triton cublas --stages s15 --precisions fp8 --shapes 4096x4096x4096 8192x8192x8192 --no-ncu --no-model > $OUT/fp8.log 2>&1
rc=$?; echo "fp8 rc=$rc $(( $(date +%s) - t0 )) s"; tail -4 $OUT/fp8.log
[ $rc -eq 0 ] && tar czf $OUT/reports.tgz reports
