"""The targets of issues 20 (s14 decode) and 21 (s15 fp8) from one GPU's recorded tables.

    python scratch/s59/targets.py reports/data/NVIDIA_H100_80GB_HBM3

Issue 20: s14 over the decode layer shapes (NT, M <= 256, the four weights), % of cuBLAS (CUDA)
and % of the faster of cuBLAS and Inductor where Inductor was timed (Triton), geomean and min per
dtype, the copy-roof share at M <= 128, and s14 against s13 of its family at M = 2048 and the
squares. Issue 21: s15 promoted against cuBLAS FP8 (fast accumulation off) at the same scaling.
Every figure is read from results.csv (ms_median); nothing is edited.
"""
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

d = pd.read_csv(Path(sys.argv[1]) / "results.csv")
d = d[d["status"] == "ok"]
KEY = ["dtype", "layout", "M", "N", "K"]
WEIGHTS = {(4096, 4096), (4096, 11008), (11008, 4096), (14336, 4096)}


def ms(fam, stage=None, kind="stage", **eq):
    q = d[(d.family == fam) & (d.kind == kind)]
    if stage:
        q = q[q.stage == stage]
    for k, v in eq.items():
        q = q[q[k] == v]
    return q[q.dtype != "fp8"].groupby(KEY)["ms_median"].min()


def gm(x):
    return float(np.exp(np.log(np.asarray(x, float)).mean()))


env = json.loads((Path(sys.argv[1]) / "environment.json").read_text())
print(f"# {sys.argv[1]}: commit {env.get('git_commit')}, run {env.get('date_utc')}, merged {env.get('merged_runs', '-')}\n")
print("## issue 20: s14 at the decode layer shapes, NT, M <= 256")
cub = ms("cublas", kind="baseline", layout="NT")
ind = ms("inductor", kind="baseline", layout="NT")
for fam in ("cuda", "triton"):
    s14 = ms(fam, "s14_stream_k", layout="NT")
    for dt in ("bf16", "fp16"):
        rows = []
        for key, t in s14.items():
            _, _, m, n, k = key
            if key[0] != dt or (n, k) not in WEIGHTS or m > 256:
                continue
            base = cub.get(key, np.nan)
            if fam == "triton" and key in ind.index:
                base = min(base, ind[key])
            roof = d[(d.family == fam) & (d.stage == "s14_stream_k") & (d.dtype == dt) & (d.layout == "NT")
                     & (d.M == m) & (d.N == n) & (d.K == k)]["pct_roof"].max()
            rows.append((m, n, k, base / t, roof))
        if not rows:
            print(f"  {fam} {dt}: no rows")
            continue
        r = pd.DataFrame(rows, columns=["M", "N", "K", "x", "roof"])
        worst = r.loc[r.x.idxmin()]
        roof128 = r[r.M <= 128].roof
        print(f"  {fam:6s} {dt}: geomean {gm(r.x):.3f}, min {r.x.min():.2f} ({int(worst.M)}x{int(worst.N)}x{int(worst.K)}), "
              f"shapes >= 1.00: {(r.x >= 1).sum()}/{len(r)}, >= 0.95: {(r.x >= .95).sum()}/{len(r)}, "
              f"copy roof at M <= 128 {roof128.min():.0f}-{roof128.max():.0f}%")
        piv = r.pivot_table(index=["N", "K"], columns="M", values="x")
        print("    " + piv.map(lambda v: f"{100 * v:5.0f}").to_string().replace("\n", "\n    "))
    s13 = ms(fam, "s13_warp_specialized")
    s14all = ms(fam, "s14_stream_k")
    cmp = [(key, s13[key] / t) for key, t in s14all.items() if key in s13.index
           and (key[2] == 2048 and key[3:] in WEIGHTS or key[2] == key[3] == key[4] and key[2] >= 4096)]
    if cmp:
        v = [x for _, x in cmp]
        print(f"  {fam} s14 against s13 (M = 2048, 4096^3, 8192^3; time ratio s13/s14): {min(v):.2f}-{max(v):.2f} over {len(v)}")
print("\n## issue 21: s15 promoted against cuBLAS FP8 (fast accumulation off)")
f = d[d.dtype == "fp8"]
for fam in ("cuda", "triton"):
    for sc in ("tensor", "row"):
        out = []
        for (m, n, k), g in f[f.scaling == sc].groupby(["M", "N", "K"]):
            c = g[(g.family == "cublas") & (g.kind == "baseline")]["ms_median"]
            s = g[(g.family == fam) & (g.kind == "stage")]["ms_median"]
            if len(c) and len(s) and (m == n == k and m >= 4096 or m == 2048 and (n, k) in WEIGHTS):
                out.append(f"{m}x{n}x{k} {100 * c.min() / s.min():.1f}")
        print(f"  {fam:6s} per {sc:6s}: " + ", ".join(out))
