"""Triton s14 (working tree) with X_PTR_MAX_FILL forced to 0 (x always through its descriptor:
main's behaviour) and 1 (masked loads in every program touching a part-filled token tile), beside
CUDA s14 and cuBLAS: bf16 NT, CUDA graphs over weight copies past 256 MB, 21 shuffled rounds,
median per call (us). Usage: tvtime3.py MxNxK,..."""
import math, random, sys
import torch, study
from study.kernels import _load_triton_module
from study.registry import find

mod = _load_triton_module(find("triton", "s14"))
shapes = [tuple(int(v) for v in s.split("x")) for s in sys.argv[1].split(",")]
tri = study.kernel("triton", "s14")
fams = {"cublas": (None, None), "cuda": (study.kernel("cuda", "s14"), None), "tri_desc": (tri, 0.0),
        "tri_ptr": (tri, 1.0)}
ROUNDS = 21
print("us per call (median of %d rounds); %% = cuBLAS time / time" % ROUNDS)
print("shape | tail | " + " | ".join(fams))
for M, N, K in shapes:
    copies = max(2, math.ceil(256e6 / (N * K * 2)))
    x = torch.randn(M, K, device="cuda").bfloat16()
    ws = [torch.randn(N, K, device="cuda").mul_(K ** -0.5).bfloat16() for _ in range(copies)]
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    ref = x.double() @ ws[0].double().t()
    graphs = {}
    for name, (f, fill) in fams.items():
        if fill is not None:
            mod.X_PTR_MAX_FILL = fill
        call = (lambda w: torch.mm(x, w.t(), out=c)) if f is None else (lambda w, f=f: f(x, w.t(), c))
        c.fill_(float("nan")); call(ws[0]); torch.cuda.synchronize()
        err = ((c.double() - ref).norm() / ref.norm()).item()
        assert err < 1e-2, (name, M, N, K, err)
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for w in ws: call(w)
        torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for w in ws: call(w)
        graphs[name] = g
    mod.X_PTR_MAX_FILL = 1.0
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
    p = mod.plan(M, N, K, torch.cuda.get_device_properties(0).multi_processor_count)
    print(f"{M}x{N}x{K} | {M % p.block_t}/{p.block_t}{'w' if p.pieces else 's'} | "
          + " | ".join(f"{t:.2f} ({100 * med['cublas'] / t:.1f}%)" for n, t in med.items()), flush=True)
    del ws, graphs
    torch.cuda.empty_cache()
