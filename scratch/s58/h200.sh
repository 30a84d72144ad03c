#!/usr/bin/env bash
# H200 only (exits at once on any other GPU): s14 of both families beside cuBLAS over the decode set,
# bf16, merged into the H200 tables (a filtered run); the tables come back as a tarball.
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name"
case "$name" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0 ;; esac
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 STUDY_GIT_COMMIT=$(cat scratch/commit.txt)
t0=$(date +%s)
timeout 300 python3 -m study reports --families cuda triton cublas --stages s14 --precisions ${PREC:-bf16} --shapes decode --no-ncu --no-model > $OUT/decode.log 2>&1
rc=$?; echo "decode rc=$rc $(( $(date +%s) - t0 )) s"; tail -4 $OUT/decode.log
[ $rc -eq 0 ] && tar czf $OUT/reports.tgz reports
