#!/usr/bin/env bash
# Session 63, one GPU: (1) CUDA s14 with the uniform-register k-loop (the tree) against 94310bd's
# (scratch/s63/old/, from prep.sh): both built into one cache, then old / new x 3 timing processes
# beside cuBLAS (ab.py); (2) the tunetimer patch: its GPU test, then tunepick (Triton s15's picks
# over four tunings per shape).
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $name"
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $OUT/env.txt
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t0=$(date +%s)
cp cuda_src/s14_stream_k.cu /tmp/new.cu
(timeout 240 python3 scratch/s62/var_build.py scratch/s63/old/s14_stream_k.cu s14_stream_k.cu > $OUT/old_build.log 2>&1; echo "old build rc=$?" >> $OUT/old_build.log) &
timeout 240 python3 -c "import study; study.kernel('cuda', 's14')" > $OUT/build.log 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
# the Triton side meanwhile: the tunetimer test and tunepick need no CUDA build
(timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_tunetimer.py > $OUT/tunetimer_test.log 2>&1; echo "rc=$?" >> $OUT/tunetimer_test.log) 
wait; tail -1 $OUT/old_build.log; echo "builds + tunetimer test $(( $(date +%s) - t0 )) s"; tail -3 $OUT/tunetimer_test.log
for v in old new old new old new; do
  cp $([ $v = new ] && echo /tmp/new.cu || echo scratch/s63/old/s14_stream_k.cu) cuda_src/s14_stream_k.cu
  timeout 100 python3 scratch/s63/ab.py $v >> $OUT/ab.log 2>&1
done
cp /tmp/new.cu cuda_src/s14_stream_k.cu
echo "A/B done $(( $(date +%s) - t0 )) s"
timeout 120 python3 scratch/s62/tunepick.py > $OUT/tunepick.log 2>&1; echo "tunepick rc=$? $(( $(date +%s) - t0 )) s"
python3 scratch/s63/summ.py $OUT/ab.log | tee $OUT/ab_summary.txt
grep -c . $OUT/tunepick.log; awk '{print $1, $2, $3, $5}' $OUT/tunepick.log
