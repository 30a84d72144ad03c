#!/usr/bin/env bash
# Session 61, one H100, timing only: the 128-wide promoted loop (two temporaries) in three forms,
# old (before this session), new (ring counters) and var_it (new descriptors, stage from it % STAGES;
# both made by prep.sh),
# each built into the cache first, then timed in alternation beside cuBLAS FP8 (fp8ab.py).
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $name"
case "$name" in *H100*) ;; *) echo "not an H100: nothing run"; exit 0 ;; esac
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t0=$(date +%s)
cp cuda_src/s15_fp8.cu scratch/s61/new.cu
for v in old/s15_fp8.cu var_it/s15_fp8.cu new.cu; do
  (timeout 200 python3 scratch/s61/old_build.py scratch/s61/$v > $OUT/build_$(dirname $v | tr / _)$(basename $v .cu).log 2>&1; echo "$v build rc=$?") &
done
wait; echo "builds $(( $(date +%s) - t0 )) s"
export SHAPES="4096x4096x4096 2048x14336x4096"
for round in 1 2; do
  for v in new old var_it; do
    src=scratch/s61/$([ $v = new ] && echo new.cu || echo $v/s15_fp8.cu)
    cp $src cuda_src/s15_fp8.cu
    timeout 100 python3 scratch/s61/fp8ab.py $v >> $OUT/ab.log 2>&1
  done
done
cp scratch/s61/new.cu cuda_src/s15_fp8.cu
echo "total $(( $(date +%s) - t0 )) s"; grep -v Warn $OUT/ab.log | sort -k2,4 -s
