#!/usr/bin/env bash
# Session 64, one GPU: weight (first: x) multicast with default-semantic remote arrivals (no MEMBAR.ALL.GPU per
# k-step): old / new A/B x 3 (scratch/s63/ab.py, AB_SET=wave), then the s14 GPU tests beside compute-sanitizer (memcheck,
# synccheck; racecheck in the child mode, bf16) at two multicast shapes.
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $name"
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $OUT/env.txt
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t0=$(date +%s)
cp cuda_src/s14_stream_k.cu /tmp/new.cu
(timeout 240 python3 scratch/s62/var_build.py scratch/s64/old/s14_stream_k.cu s14_stream_k.cu > $OUT/old_build.log 2>&1; echo "old build rc=$?" >> $OUT/old_build.log) &
timeout 240 python3 -c "import study; study.kernel('cuda', 's14')" > $OUT/build.log 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
wait; tail -1 $OUT/old_build.log
for v in new old new old new old; do
  cp $([ $v = new ] && echo /tmp/new.cu || echo scratch/s64/old/s14_stream_k.cu) cuda_src/s14_stream_k.cu
  AB_SET=wave timeout 100 python3 scratch/s63/ab.py $v >> $OUT/ab.log 2>&1; echo "$v rc=$? $(( $(date +%s) - t0 )) s"
done
cp /tmp/new.cu cuda_src/s14_stream_k.cu
python3 scratch/s63/summ.py $OUT/ab.log | tee $OUT/ab_summary.txt
# no tests if the multicast shapes got slower on the whole (geomean new / old over the MC rows)
awk '/ MC /{s+=log($7); n++} END{g=exp(s/n); print "MC geomean new/old", g; exit !(n > 0 && g < 1.0)}' $OUT/ab_summary.txt || exit 0
san=$(which compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(timeout 250 python3 tests/sanitize_run.py s14_stream_k --families cuda --tools memcheck,synccheck --jobs 4 --timeout 240 \
   --shapes 150x4096x936 200x11008x264 256x4096x4096 > $OUT/sanitize.log 2>&1; echo "rc=$?" >> $OUT/sanitize.log) &
for sh in 150x4096x936 200x11008x264; do
  (SANITIZE_TOOL=racecheck SANITIZE_SHAPES=$sh timeout 250 $san --tool=racecheck --error-exitcode=99 --print-limit=20 \
     python3 tests/sanitize_run.py --child cuda s14_stream_k bf16 > $OUT/race_$sh.log 2>&1; echo "rc=$? $(( $(date +%s) - t0 )) s" >> $OUT/race_$sh.log) &
done
left=$(( 585 - ($(date +%s) - t0) ))
echo "tests with ${left} s left"
timeout $left python3 -m pytest -q -m gpu -n 12 -p no:cacheprovider tests/test_gpu.py tests/test_decomposition.py tests/test_gpu_replay.py \
  -k "s14 and not triton and not another_gpu or decode_decompositions and (250x4000x936 or 150x4096x936)" > $OUT/gpu_tests.log 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s"; tail -3 $OUT/gpu_tests.log
wait
tail -9 $OUT/sanitize.log
for sh in 150x4096x936 200x11008x264; do echo "== $sh"; grep -E '^\[done\]|SUMMARY|^rc=' $OUT/race_$sh.log | tail -4; done
