"""CUDA s14 beside cuBLAS at decode shapes (NT), tagged with argv[1] (which source is built): CUDA
graphs over weight copies past 256 MB, 21 shuffled rounds, median per call (us); % = cuBLAS time /
s14 time. Every output checked against fp64 first. Prints the plan s14 ran. AB_SET=wave (session 64):
the one-wave tile shapes and controls instead, the plan as its tile plus " MC" where 2-CTA clusters
share an operand."""
import math, os, random, sys
import torch, study
from study import decomposition

tag = sys.argv[1]
s14 = study.kernel("cuda", "s14")
ROUNDS = 21
W = [(4096, 4096), (4096, 11008), (11008, 4096), (14336, 4096)]
SHAPES = [(M, N, K, "bf16") for M in (1, 16, 64, 128, 256) for N, K in W]
SHAPES += [(256, 4096, 4096, "fp16"), (192, 4096, 4096, "bf16"), (2048, 4096, 4096, "bf16")]
WAVE = os.environ.get("AB_SET") == "wave"
if WAVE:
    SHAPES = [(256, 4096, 4096, "bf16"), (256, 4096, 4096, "fp16"), (192, 4096, 4096, "bf16"), (150, 4096, 4096, "bf16")]
    SHAPES += [(M, N, 4096, "bf16") for N in (11008, 14336) for M in (100, 128, 200, 256)]
    SHAPES += [(16, 4096, 4096, "bf16"), (2048, 4096, 4096, "bf16")]
for M, N, K, dt in SHAPES:
    dtype = getattr(torch, {"bf16": "bfloat16", "fp16": "float16"}[dt])
    copies = max(2, math.ceil(256e6 / (N * K * 2)))
    x = torch.randn(M, K, device="cuda").to(dtype)
    ws = [torch.randn(N, K, device="cuda").mul_(K ** -0.5).to(dtype) for _ in range(copies)]
    c = torch.empty(M, N, device="cuda", dtype=dtype)
    ref = x.double() @ ws[0].double().t()
    calls = {"cublas": lambda w: torch.mm(x, w.t(), out=c), "s14": lambda w: s14(x, w.t(), c)}
    graphs = {}
    for name, f in calls.items():
        c.fill_(float("nan")); f(ws[0]); torch.cuda.synchronize()
        err = ((c.double() - ref).norm() / ref.norm()).item()
        assert err < 1e-2, (name, M, N, K, err)
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for w in ws: f(w)
        torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for w in ws: f(w)
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
    try:
        d = decomposition.of(s14, x, ws[0].t())
        plan = d.split(",")[2].strip()
        if WAVE:
            plan = plan.split(" ")[0] + (" MC" if "clusters share" in d else "")
    except Exception:
        plan = "?"
    print(f"{tag} {M}x{N}x{K} {dt} {plan} | cuBLAS {med['cublas']:.2f} us | s14 {med['s14']:.2f} us "
          f"({100 * med['cublas'] / med['s14']:.1f}%)", flush=True)
    del ws, graphs
    torch.cuda.empty_cache()
