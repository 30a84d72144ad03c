#!/usr/bin/env bash
# Session 62, one H200: CUDA s14's one-wave weight tiles with two 64-wide k boxes per ring stage
# (KSUB_AB 2: scratch/s62/var/, copied to cuda_src/) against one (scratch/s62/old/); prep.sh
# makes both. Both built into one cache, then old / new / old / new
# / old / new timing processes beside cuBLAS (wave_ab.py).
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $name"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t0=$(date +%s)
cp cuda_src/s14_stream_k.cu /tmp/new.cu
(timeout 200 python3 scratch/s62/var_build.py scratch/s62/old/s14_stream_k.cu s14_stream_k.cu > $OUT/old_build.log 2>&1; echo "old build rc=$?" >> $OUT/old_build.log) &
timeout 200 python3 -c "import study; study.kernel('cuda', 's14')" > $OUT/build.log 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
wait; tail -1 $OUT/old_build.log; echo "builds $(( $(date +%s) - t0 )) s"
for v in old new old new old new; do
  cp $([ $v = new ] && echo /tmp/new.cu || echo scratch/s62/old/s14_stream_k.cu) cuda_src/s14_stream_k.cu
  timeout 100 python3 scratch/s62/wave_ab.py $v >> $OUT/ab.log 2>&1
done
cp /tmp/new.cu cuda_src/s14_stream_k.cu
echo "total $(( $(date +%s) - t0 )) s"; grep -v Warn $OUT/ab.log | sort -k2,3 -s
