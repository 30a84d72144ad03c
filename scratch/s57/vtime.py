"""Time CUDA s14 variants (VARDIR/<name>/s14_stream_k.cu) beside the committed stage, cuBLAS and
Triton s14: bf16 NT, CUDA graphs over weight copies past 256 MB, rounds in a new order each,
median per call (us). Variants named 'nostore*' are timing bounds (their output is not checked)."""
import math, random, sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import torch, study
from study import build, registry, kernels

vardir = Path(sys.argv[1])
names = sys.argv[2].split(",")
shapes = [tuple(int(v) for v in s.split("x")) for s in sys.argv[3].split(",")]
stages = {n: registry.parse_header(vardir / n / "s14_stream_k.cu", "cuda") for n in names}
specs = [build.spec(st) for st in stages.values()]
with ThreadPoolExecutor(len(specs) + 1) as ex:
    fut = ex.submit(lambda: study.kernel("cuda", "s14"))
    res = list(ex.map(build._build_in_subprocess, specs))
    committed = fut.result()
for (ok, out), n in zip(res, names):
    assert ok, (n, out[-2000:])
fams = {"cublas": None, "triton": study.kernel("triton", "s14"), "cuda": committed}
for n, st in stages.items():
    build._modules.pop(st.stem, None)
    fams[n] = kernels.CudaKernel(st)
ROUNDS = 21
print("us per call (median of %d rounds); %% = cuBLAS time / time" % ROUNDS)
print("shape | " + " | ".join(fams))
for M, N, K in shapes:
    copies = max(2, math.ceil(256e6 / (N * K * 2)))
    x = torch.randn(M, K, device="cuda").bfloat16()
    ws = [torch.randn(N, K, device="cuda").mul_(K ** -0.5).bfloat16() for _ in range(copies)]
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    ref = x.double() @ ws[0].double().t()
    graphs = {}
    for name, f in fams.items():
        call = (lambda w: torch.mm(x, w.t(), out=c)) if f is None else (lambda w, f=f: f(x, w.t(), c))
        c.fill_(float("nan")); call(ws[0]); torch.cuda.synchronize()
        err = ((c.double() - ref).norm() / ref.norm()).item()
        if not name.startswith("nostore"):
            assert err < 1e-2, (name, M, N, K, err)
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for w in ws: call(w)
        torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for w in ws: call(w)
        graphs[name] = g
    ev = {n: [] for n in graphs}
    rng = random.Random(1)
    for _ in range(ROUNDS):
        order = list(graphs); rng.shuffle(order)
        torch.cuda._sleep(2_000_000)
        for n in order:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); graphs[n].replay(); b.record(); ev[n].append((a, b))
    torch.cuda.synchronize()
    med = {n: sorted(a.elapsed_time(b) for a, b in v)[ROUNDS // 2] * 1e3 / copies for n, v in ev.items()}
    print(f"{M}x{N}x{K} | " + " | ".join(f"{t:.2f} ({100 * med['cublas'] / t:.1f}%)" for n, t in med.items()), flush=True)
    del ws, graphs
    torch.cuda.empty_cache()
