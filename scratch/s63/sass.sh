#!/bin/bash
# SASS of one s14 source (argv[1], default the tree's): compiles for sm_90a with the build's flags
# into /tmp/s63/<name>.cubin and prints the k-step loop of the 64-wide unswapped KS2 NT bf16 kernel.
set -e
src=${1:-cuda_src/s14_stream_k.cu}; name=$(basename $src .cu); mkdir -p /tmp/s63
nvcc -cubin -O3 -std=c++17 -lineinfo --expt-relaxed-constexpr -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ \
  -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ -gencode=arch=compute_90a,code=sm_90a -Icuda_src \
  -Xptxas=-v -o /tmp/s63/$name.cubin $src > /tmp/s63/$name.ptxas 2>&1 || { cat /tmp/s63/$name.ptxas; exit 1; }
$(.venv/bin/python -c "import study.build as b; print(b.cuobjdump())") -sass /tmp/s63/$name.cubin > /tmp/s63/$name.sass
grep -c 'spill' /tmp/s63/$name.ptxas | xargs echo "ptxas lines mentioning spill:"; grep 'spill' /tmp/s63/$name.ptxas | grep -v ' 0 bytes spill stores, 0 bytes spill loads' | head -3 || true
