#!/usr/bin/env bash
# Session 61, one H100: the fp8 group at the current s15 (CUDA and Triton s15 beside cuBLAS FP8, every
# fp8 shape of the plan, no Inductor: its rows stay from the last full run), merged into the H100
# tables; they come back as reports.tgz.
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $name"
case "$name" in *H100*) ;; *) echo "not an H100: nothing run"; exit 0 ;; esac
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 STUDY_GIT_COMMIT=$(cat scratch/commit.txt)
t0=$(date +%s)
timeout ${LIMIT:-400} python3 -m study reports --families cuda triton cublas --stages s15 --precisions fp8 --no-ncu --no-model > $OUT/fp8.log 2>&1
rc=$?; echo "fp8 rc=$rc $(( $(date +%s) - t0 )) s"; grep -E "wrote|fp8 [0-9]+ s" $OUT/fp8.log | tail -4
[ $rc -eq 0 ] && tar czf $OUT/reports.tgz reports
