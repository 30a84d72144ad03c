#!/usr/bin/env bash
# Session 64, one GPU: ncu (time, L2 / DRAM / SM throughput, L2 sectors read) of ac91521's s14 (old)
# and a variant (PATCH, default mc2.patch, the x multicast: new) at 256 x 11008 x 4096 and 256 x 4096 x
# 4096, with cuBLAS; AB=1: then the old / new A/B x 3 (scratch/s63/ab.py, AB_SET=wave).
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $name"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t0=$(date +%s)
mkdir -p $OUT; cp scratch/s64/old/s14_stream_k.cu cuda_src/s14_stream_k.cu; patch -p1 < scratch/s64/${PATCH:-mc2.patch}; cp cuda_src/s14_stream_k.cu /tmp/new.cu
(timeout 240 python3 scratch/s62/var_build.py scratch/s64/old/s14_stream_k.cu s14_stream_k.cu > $OUT/old_build.log 2>&1; echo "old build rc=$?" >> $OUT/old_build.log) &
timeout 240 python3 -c "import study; study.kernel('cuda', 's14')" > $OUT/build.log 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
wait; tail -1 $OUT/old_build.log
M="gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hgmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__m_xbar2l1tex_read_bytes.sum,smsp__average_warp_latency_issue_stalled_barrier.ratio,lts__t_sector_hit_rate.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__m_l1tex2xbar_write_bytes.sum"
ncu --query-metrics > $OUT/metrics.txt 2>&1
M=$(python3 -c "
import sys
have = {l.split()[0] for l in open('$OUT/metrics.txt') if l.strip() and '__' in l.split()[0]}
want = '$M'.split(',')
print(','.join(m for m in want if m.split('.')[0] in have))
print('left out:', [m for m in want if m.split('.')[0] not in have], file=sys.stderr)")
echo "metrics: $M"
for v in old new; do
  cp $([ $v = new ] && echo /tmp/new.cu || echo scratch/s64/old/s14_stream_k.cu) cuda_src/s14_stream_k.cu
  timeout 200 ncu --clock-control none --kernel-name-base mangled --kernel-name regex:"s14_stream_k|nvjet" --metrics $M --csv --page raw \
    python3 scratch/s64/prof.py > $OUT/ncu_$v.csv 2> $OUT/ncu_$v.err; echo "$v ncu rc=$? $(( $(date +%s) - t0 )) s"
done
python3 - <<'PY'
import csv, os, io
out = os.environ["OUT"]
for v in ("old", "new"):
    txt = open(f"{out}/ncu_{v}.csv").read()
    lines = [l for l in txt.splitlines() if l.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    for r in rows[1:]:
        name = r.get("Kernel Name", "").replace("_ZN12s14_stream_k6kernelI13__nv_bfloat16LN4gemm6LayoutE1E", "s14")[:44]
        def g(k):
            try: return float(r[k].replace(",", ""))
            except Exception: return float("nan")
        print(v, name, f"t={g('gpu__time_duration.sum')/1e3:.2f}us clk={g('sm__cycles_elapsed.avg.per_second')/1e6:.0f}MHz",
              f"dram={g('dram__bytes_read.sum')/1e6:.0f}MB l2rd={g('lts__t_sectors_srcunit_tex_op_read.sum')*32/1e6:.0f}MB",
              f"lts={g('lts__t_bytes.sum')/1e6:.0f}MB l2%={g('lts__throughput.avg.pct_of_peak_sustained_elapsed'):.0f}",
              f"dram%={g('dram__throughput.avg.pct_of_peak_sustained_elapsed'):.0f} sm%={g('sm__throughput.avg.pct_of_peak_sustained_elapsed'):.0f}",
              f"xbar={g('l1tex__m_xbar2l1tex_read_bytes.sum')/1e6:.0f}MB hit={g('lts__t_sector_hit_rate.pct'):.0f}")
PY
[ "${AB:-0}" = 1 ] || exit 0
for v in new old new old new old; do
  cp $([ $v = new ] && echo /tmp/new.cu || echo scratch/s64/old/s14_stream_k.cu) cuda_src/s14_stream_k.cu
  AB_SET=wave timeout 100 python3 scratch/s63/ab.py $v >> $OUT/ab.log 2>&1; echo "$v rc=$? $(( $(date +%s) - t0 )) s"
done
python3 scratch/s63/summ.py $OUT/ab.log | tee $OUT/ab_summary.txt
