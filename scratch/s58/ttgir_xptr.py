"""CPU only: compile Triton s14's swapped kernel for sm_90 at a plan's config with X_PTR forced on and
off, and print what the K loop of each does with x (TTGIR ops and the SASS counts that matter).
Usage: ttgir_xptr.py MxNxK"""
import re, sys
sys.path.insert(0, "tests")
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from study.registry import find
import test_static as ts

M, N, K = (int(v) for v in sys.argv[1].split("x"))
stage = find("triton", "s14")
for fn, sig, consts, attrs, opts in ts._aot_variants(stage, "bf16", all_configs=False, shape=(M, N, K), layout="NT"):
    if "BETA_ZERO" in consts and not consts["BETA_ZERO"]:
        continue
    for xp in (False, True):
        c = dict(consts, X_PTR=xp)
        ck = triton.compile(ASTSource(fn, sig, c, attrs), target=GPUTarget("cuda", 90, 32), options=opts)
        ttgir = ck.asm["ttgir"]
        sass = ts._cuobjdump(["-sass"], ck.asm["cubin"])
        ops = {k: len(re.findall(k, ttgir)) for k in ("async_copy_global_to_local", "async_wait", "async_commit_group",
                                                     "async_tma_copy_global_to_local", "tt.load ", "warp_group_dot ",
                                                     "warp_group_dot_wait", "local_alloc", "barrier_expect")}
        sops = {k: len(re.findall(r"\b" + k + r"\b", sass)) for k in ("LDGSTS", "LDG", "UTMALDG", "HGMMA", "BAR", "SYNCS", "DEPBAR", "STS", "LDS")}
        print(fn.__name__, {k: v for k, v in c.items() if k.isupper() and k in ("BLOCK_N", "BLOCK_T", "BLOCK_K", "X_PTR", "W0", "W1")},
              opts.get("num_stages"), opts.get("num_warps"), "shared", ck.metadata.shared)
        print("   ttgir", ops)
        print("   sass ", sops)
        open(f"/tmp/ttgir_{fn.__name__}_{M}_{xp}.mlir", "w").write(ttgir)
