#!/usr/bin/env bash
# One H100 (next session): where CUDA s14's warps wait at 256 x 4096 x 4096 bf16 NT beside cuBLAS's
# kernel (session 53's open item): ncu's warp-state, scheduler and memory sections at base clocks,
# the third launch of each kernel; the stall table is printed last.
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
python3 scratch/s58/ncu256.py 256 > $OUT/warm.log 2>&1   # builds the extension outside ncu
for k in "regex:s14" "regex:nvjet"; do
  n=$(echo $k | tr -dc 'a-z0-9'); 
  timeout 200 ncu --clock-control base --cache-control all -k "$k" -s 2 -c 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --section LaunchStats --section Occupancy --csv --page details \
    python3 scratch/s58/ncu256.py 256 > $OUT/ncu_$n.csv 2> $OUT/ncu_$n.err
  echo "$k rc=$?"
done
python3 - <<'PY'
import csv, glob, os
out = os.environ["OUT"]
for f in sorted(glob.glob(f"{out}/ncu_*.csv")):
    rows = [r for r in csv.reader(open(f)) if len(r) > 14]
    if not rows: print(f, "no rows"); continue
    h = rows[0]; im, iv, iu, ik = h.index("Metric Name"), h.index("Metric Value"), h.index("Metric Unit"), h.index("Kernel Name")
    print("==", os.path.basename(f), rows[1][ik][:90])
    for r in rows[1:]:
        if any(s in r[im] for s in ("Stall", "Duration", "Issued", "Eligible", "Active Warps", "Throughput", "Registers", "L2 Hit", "Mem Busy", "Max Bandwidth")):
            print(f"  {r[im][:60]:60s} {r[iv]:>12s} {r[iu]}")
PY
