"""Summarises ab.log (argv[1]): per shape, median over processes of s14 us and % cuBLAS, old vs new."""
import re, sys, statistics as st, collections
d = collections.defaultdict(lambda: collections.defaultdict(list))
for l in open(sys.argv[1]):
    m = re.match(r"(old|new) (\S+) (\S+) (.*?)\| cuBLAS ([\d.]+) us \| s14 ([\d.]+) us \(([\d.]+)%\)", l)
    if m:
        d[(m[2], m[3])][m[1]].append((float(m[6]), float(m[7]), m[4].strip()))
print(f"{'shape':22s} {'plan':28s} {'old us':>7s} {'new us':>7s} {'new/old':>7s} {'old %':>6s} {'new %':>6s}")
for k, v in d.items():
    o, n = v.get("old", []), v.get("new", [])
    if not o or not n: continue
    ou, nu = st.median(x[0] for x in o), st.median(x[0] for x in n)
    print(f"{k[0] + ' ' + k[1]:22s} {n[0][2][:28]:28s} {ou:7.2f} {nu:7.2f} {nu / ou:7.3f} {st.median(x[1] for x in o):6.1f} {st.median(x[1] for x in n):6.1f}")
