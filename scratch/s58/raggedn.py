"""Does the weight's ragged last tile cost what x's did (TMA's zero fill, session 57)? cuBLAS, CUDA s14
and Triton s14 at N = 4096 beside N a little past it (the last weight tile holding 4-64 rows), bf16
NT, CUDA graphs over weight copies past 256 MB, 21 shuffled rounds, median per call (us)."""
import math, random
import torch, study

fams = {"cublas": None, "cuda": study.kernel("cuda", "s14"), "triton": study.kernel("triton", "s14")}
ROUNDS = 21
print("us per call (median of %d rounds); %% = cuBLAS time / time" % ROUNDS)
print("shape | " + " | ".join(fams))
for M in (16, 128, 256):
    for N in (4096, 4100, 4160, 11008, 11012, 14336, 14340):
        K = 4096
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
