#!/usr/bin/env bash
# Session 64, one GPU: CUDA s14 with x multicast in 2-CTA clusters for the one-wave weight tiles (the
# tree) against ac91521's (scratch/s64/old/, from prep.sh): both built into one cache, then old /
# new x 3 timing processes beside cuBLAS (scratch/s63/ab.py, AB_SET=wave); the tunetimer GPU test (owed since 1848732); then
# the s14 GPU tests.
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $name"
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $OUT/env.txt
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t0=$(date +%s)
cp cuda_src/s14_stream_k.cu /tmp/new.cu
(timeout 240 python3 scratch/s62/var_build.py scratch/s64/old/s14_stream_k.cu s14_stream_k.cu > $OUT/old_build.log 2>&1; echo "old build rc=$?" >> $OUT/old_build.log) &
timeout 240 python3 -c "import study; study.kernel('cuda', 's14')" > $OUT/build.log 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
(timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_tunetimer.py > $OUT/tunetimer_test.log 2>&1; echo "rc=$?" >> $OUT/tunetimer_test.log)
wait; tail -1 $OUT/old_build.log; echo "builds + tunetimer test $(( $(date +%s) - t0 )) s"; tail -2 $OUT/tunetimer_test.log
for v in new old new old new old; do
  cp $([ $v = new ] && echo /tmp/new.cu || echo scratch/s64/old/s14_stream_k.cu) cuda_src/s14_stream_k.cu
  AB_SET=wave timeout 100 python3 scratch/s63/ab.py $v >> $OUT/ab.log 2>&1; echo "$v rc=$? $(( $(date +%s) - t0 )) s"
done
cp /tmp/new.cu cuda_src/s14_stream_k.cu
python3 scratch/s63/summ.py $OUT/ab.log | tee $OUT/ab_summary.txt
left=$(( 585 - ($(date +%s) - t0) ))
echo "tests with ${left} s left"
timeout $left python3 -m pytest -q -m gpu -n 12 -p no:cacheprovider tests/test_gpu.py tests/test_decomposition.py tests/test_gpu_replay.py \
  -k "s14 and not triton and not another_gpu or decode_decompositions and (250x4000x936 or 150x4096x936)" > $OUT/gpu_tests.log 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s"; tail -3 $OUT/gpu_tests.log
