#!/usr/bin/env bash
# Session 63, one GPU: racecheck of CUDA s14's uniform-register k-loop, bf16, one shape per process
# (the child mode of tests/sanitize_run.py under compute-sanitizer, its [done] lines kept), beside the
# Triton s08 / s13 GPU tests, whose autotuners now time with study.tunetimer.
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t0=$(date +%s)
timeout 150 python3 -c "import study; study.kernel('cuda', 's14')" > $OUT/build.log 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
san=$(which compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for sh in 250x4000x936 3x1024x520 200x11008x264; do
  (SANITIZE_TOOL=racecheck SANITIZE_SHAPES=$sh timeout 230 $san --tool=racecheck --error-exitcode=99 --print-limit=20 \
     python3 tests/sanitize_run.py --child cuda s14_stream_k bf16 > $OUT/race_$sh.log 2>&1; echo "rc=$? $(( $(date +%s) - t0 )) s" >> $OUT/race_$sh.log) &
done
timeout 220 python3 -m pytest -q -m gpu -n 4 -p no:cacheprovider tests/test_gpu.py -k "triton and (s08 or s13) and not another_gpu" > $OUT/triton_tests.log 2>&1
echo "triton tests rc=$? $(( $(date +%s) - t0 )) s"; tail -2 $OUT/triton_tests.log
wait
for sh in 250x4000x936 3x1024x520 200x11008x264; do echo "== $sh"; grep -E '^\[done\]|^\[skip\]|SUMMARY|^rc=' $OUT/race_$sh.log | tail -8; done
