#!/usr/bin/env bash
# Session 61, one H100: CUDA s15 with its consumer's descriptors, barrier addresses and ring slot
# formed once (scratch/s61/old/, made by prep.sh, holds the source before). GPU tests of the new code, compute-
# sanitizer at a ragged shape, then new / old / new / old timings beside cuBLAS (fp8ab.py).
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $name"
case "$name" in *H100*) ;; *) echo "not an H100: nothing run"; exit 0 ;; esac
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t0=$(date +%s)
timeout 200 python3 -c "import study; study.kernel('cuda', 's15')" > $OUT/build.log 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
cp cuda_src/s15_fp8.cu /tmp/new.cu
(timeout 200 python3 scratch/s61/old_build.py > $OUT/old_build.log 2>&1; echo "old build rc=$?" >> $OUT/old_build.log) &
timeout 200 python3 -m pytest -q -m gpu -n 12 -p no:cacheprovider tests/test_gpu_fp8.py tests/test_gpu.py tests/test_gpu_replay.py \
  -k "fp8 or s15 and not triton and not another_gpu" > $OUT/gpu.log 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s"; tail -3 $OUT/gpu.log
timeout 90 compute-sanitizer --tool memcheck --print-limit 5 python3 -c "
import torch, study
from study.fp8 import quantize_fp8
f = study.kernel('cuda', 's15')
for M, N, K in ((129, 200, 272), (1, 67, 48)):
    for g in ('tensor', 'row'):
        a, sa = quantize_fp8(torch.randn(M, K, device='cuda'), g); b, sb = quantize_fp8(torch.randn(N, K, device='cuda'), g)
        f(a, b.t(), scale_a=sa, scale_b=sb)
torch.cuda.synchronize(); print('sanitizer run done')" > $OUT/sanitizer.log 2>&1; echo "sanitizer rc=$?"; tail -2 $OUT/sanitizer.log
wait; cat $OUT/old_build.log | tail -1
for v in new old new old; do
  cp $([ $v = new ] && echo /tmp/new.cu || echo scratch/s61/old/s15_fp8.cu) cuda_src/s15_fp8.cu
  timeout 100 python3 scratch/s61/fp8ab.py $v >> $OUT/ab.log 2>&1
done
cp /tmp/new.cu cuda_src/s15_fp8.cu
echo "total $(( $(date +%s) - t0 )) s"; grep -v Warn $OUT/ab.log | sort -k2,4 -s
