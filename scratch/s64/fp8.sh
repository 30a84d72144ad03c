#!/usr/bin/env bash
# Session 64, one H200: the whole fp8 precision group in one filtered study run (CUDA and Triton s15,
# cuBLAS, Inductor: every family compared there, so no row is read against another run's baseline),
# merged into the recorded tables. Tables back as reports.tgz; a cut run sends its journal.
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $name"
case "$name" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0 ;; esac
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 STUDY_GIT_COMMIT=$(cat scratch/commit.txt)
[ -f scratch/s64/journal.tgz ] && tar xzf scratch/s64/journal.tgz && echo "journal restored"
t0=$(date +%s)
timeout ${LIMIT:-520} python3 -m study reports --families cuda triton cublas inductor --stages s15 --precisions fp8 \
  --no-ncu --no-model > $OUT/study.log 2>&1
rc=$?; echo "study rc=$rc $(( $(date +%s) - t0 )) s"
grep -E 'took|done|where the time|Error|error' $OUT/study.log | tail -15
if [ $rc -eq 0 ]; then tar czf $OUT/reports.tgz reports; else tar czf $OUT/journal.tgz build/journal 2>/dev/null; fi
