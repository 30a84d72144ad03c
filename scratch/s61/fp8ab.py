"""CUDA s15 (promoted) against cuBLAS FP8 (promoted) at SHAPES (default 4096^3 and 8192^3), per tensor and per row:
CUDA graphs over operand copies past 128 MB (the weight and activation read from HBM), 21 shuffled
rounds, median per call. Prints % of cuBLAS, tagged with argv[1] (which source version is built)."""
import math, os, random, sys
import torch, study
from study.fp8 import quantize_fp8, scaled_mm

tag = sys.argv[1]
s15 = study.kernel("cuda", "s15")
ROUNDS = 21
SHAPES = os.environ.get("SHAPES", "4096x4096x4096 8192x8192x8192").split()
for shape in SHAPES:
    M, N, K = map(int, shape.split("x"))
    for gran in ("tensor", "row"):
        copies = max(2, math.ceil(128e6 / ((M + N) * K)))
        ops = []
        for _ in range(copies):
            a, sa = quantize_fp8(torch.randn(M, K, device="cuda"), gran)
            b, sb = quantize_fp8(torch.randn(N, K, device="cuda"), gran)
            ops.append((a, b.t(), sa, sb))
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        pr = int(gran == "row")
        calls = {"cublas": lambda a, b, sa, sb: scaled_mm(a, b, c, sa, sb, 1.0, 0.0, pr, pr),
                 "s15": lambda a, b, sa, sb: s15(a, b, c, scale_a=sa, scale_b=sb)}
        a, b, sa, sb = ops[0]
        ref = (a.double() * (sa.double().reshape(-1, 1) if pr else sa.double())) @ (b.double() * (sb.double().reshape(1, -1) if pr else sb.double()))
        graphs = {}
        for name, f in calls.items():
            c.fill_(float("nan")); f(*ops[0]); torch.cuda.synchronize()
            err = ((c.double() - ref).norm() / ref.norm()).item()
            assert err < 1e-2, (name, shape, gran, err)
            s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for o in ops: f(*o)
            torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for o in ops: f(*o)
            graphs[name] = g
        ev = {k: [] for k in graphs}
        rng = random.Random(1)
        for _ in range(ROUNDS):
            order = list(graphs); rng.shuffle(order)
            torch.cuda._sleep(1_000_000)
            for k in order:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record(); graphs[k].replay(); e1.record(); ev[k].append((e0, e1))
        torch.cuda.synchronize()
        med = {k: sorted(x.elapsed_time(y) for x, y in v)[ROUNDS // 2] / copies for k, v in ev.items()}
        tf = {k: 2 * M * N * K / (t * 1e-3) / 1e12 for k, t in med.items()}
        print(f"{tag} {shape} per {gran}: cuBLAS {tf['cublas']:.0f} TFLOP/s, s15 {tf['s15']:.0f} "
              f"({100 * tf['s15'] / tf['cublas']:.1f}%)", flush=True)
        del ops, graphs
        torch.cuda.empty_cache()
