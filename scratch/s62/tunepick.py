"""Why Triton s15's autotuner picks differently run to run (the H200 runs at 06d3d34 and 4800600
took WS and then the flattened loop at 2048 x 4096 x 4096, 97.6% then 82.4% of cuBLAS). One
process, one H200: for each shape and scaling, the GPU left idle 3 s, then the first call tunes
(cold); the autotuner's cache is then cleared and it tunes again three times (warm). Prints each
tuning's configs' median times (us) and its pick."""
import time
import torch, study
from study.fp8 import quantize_fp8

k = study.kernel("triton", "s15")
tuner = k.module.s15_fp8_kernel
def short(cfg):
    kw = cfg.kwargs
    return f"{'WS' if kw['WS'] else 'FL'}{kw['BLOCK_N']}x{kw['BLOCK_K']}s{cfg.num_stages}w{cfg.num_warps}"
for M, N, K in ((2048, 4096, 4096), (256, 4096, 4096), (1, 4096, 4096), (2048, 2048, 2048)):
    for gran in ("tensor", "row"):
        a, sa = quantize_fp8(torch.randn(M, K, device="cuda"), gran)
        b, sb = quantize_fp8(torch.randn(N, K, device="cuda"), gran)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        for trial in ("cold", "warm1", "warm2", "warm3"):
            tuner.cache.clear()
            torch.cuda.synchronize()
            if trial == "cold":
                time.sleep(3)
            k(a, b.t(), c, scale_a=sa, scale_b=sb)
            torch.cuda.synchronize()
            t = {short(cf): v[0] * 1e3 if isinstance(v, (list, tuple)) else v * 1e3 for cf, v in tuner.configs_timings.items()}
            pick = min(t, key=t.get)
            print(f"{M}x{N}x{K} {gran:6s} {trial:5s} pick {pick:14s} " + " ".join(f"{n} {v:.1f}" for n, v in sorted(t.items())), flush=True)
