#!/usr/bin/env bash
# Session 61, one H100: the s15 change A/B in the study's own method. The fp8 group (CUDA s15 and
# cuBLAS, every fp8 shape) is measured twice, first with the s15 source before this session
# (scratch/s61/old/, made by prep.sh), then with the current one; each run's results.csv comes back (old.csv, new.csv).
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $name"
case "$name" in *H100*) ;; *) echo "not an H100: nothing run"; exit 0 ;; esac
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 STUDY_GIT_COMMIT=$(cat scratch/commit.txt)
cp cuda_src/s15_fp8.cu /tmp/new.cu
for v in old new; do
  t0=$(date +%s)
  cp $([ $v = new ] && echo /tmp/new.cu || echo scratch/s61/old/s15_fp8.cu) cuda_src/s15_fp8.cu
  timeout 140 python3 -m study reports --families cuda cublas --stages s15 --precisions fp8 --no-ncu --no-model > $OUT/$v.log 2>&1
  echo "$v rc=$? $(( $(date +%s) - t0 )) s"
  cp reports/data/NVIDIA_H100_80GB_HBM3/results.csv $OUT/$v.csv
done
