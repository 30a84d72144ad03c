#!/usr/bin/env bash
# Session 64, one GPU: is the x-multicast loss the multicast or the cluster launch? ac91521's s14
# (old) against the same file with its one-wave tiles launched in 2-CTA clusters that share
# nothing (clonly.patch, new), old / new x 3 (scratch/s63/ab.py, AB_SET=wave).
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $name"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t0=$(date +%s)
patch -p1 < scratch/s64/clonly.patch; cp cuda_src/s14_stream_k.cu /tmp/new.cu
(timeout 240 python3 scratch/s62/var_build.py scratch/s64/old/s14_stream_k.cu s14_stream_k.cu > $OUT/old_build.log 2>&1; echo "old build rc=$?" >> $OUT/old_build.log) &
timeout 240 python3 -c "import study; study.kernel('cuda', 's14')" > $OUT/build.log 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
wait; tail -1 $OUT/old_build.log
for v in new old new old new old; do
  cp $([ $v = new ] && echo /tmp/new.cu || echo scratch/s64/old/s14_stream_k.cu) cuda_src/s14_stream_k.cu
  AB_SET=wave timeout 100 python3 scratch/s63/ab.py $v >> $OUT/ab.log 2>&1; echo "$v rc=$? $(( $(date +%s) - t0 )) s"
done
grep -h "max active\|not resident" $OUT/ab.log | sort | uniq -c
python3 scratch/s63/summ.py $OUT/ab.log | tee $OUT/ab_summary.txt
