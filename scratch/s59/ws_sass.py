"""CPU only: compile Triton s15's promoted kernels for sm_90 (the configs the autotuner may pick at
8192^3, per tensor and per row) and print, for each loop of the SASS (a backward branch), how many
QGMMA, FADD/FFMA, wgmma waits (WARPGROUP.DEPBAR), warpgroup arrives, mbarrier waits/arrives,
named barriers (BAR) and instructions it holds, plus registers and the kernel's warp count.

    PYTHONPATH=. python scratch/s59/ws_sass.py [dump_dir]
"""
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import study  # noqa: E402
import test_static as ts  # noqa: E402

KINDS = [("QGMMA", r"\bQGMMA\b"), ("HGMMA", r"\bHGMMA\b"), ("FADD", r"\bFADD\b"), ("FFMA", r"\bFFMA\b"),
         ("FMUL", r"\bFMUL\b"), ("DEPBAR", r"WARPGROUP\.DEPBAR"), ("WG.ARRIVE", r"WARPGROUP\.ARRIVE"),
         ("SYNCS.WAIT", r"SYNCS\.PHASECHK|SYNCS\.WAIT"), ("SYNCS.ARRIVE", r"SYNCS\.ARRIVE"),
         ("BAR", r"\bBAR\.(SYNC|ARV|RED)"), ("UTMALDG", r"UTMALDG"), ("R2UR", r"\bR2UR\b")]


def loops(sass: str):
    """(function name, [instruction lines]) of each backward-branch range in each function."""
    out = []
    for fn in re.split(r"\n\s*Function : ", sass)[1:]:
        name = fn.split("\n", 1)[0].strip()
        ins = re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", fn)
        addr = {int(a, 16): i for i, (a, _) in enumerate(ins)}
        for i, (a, text) in enumerate(ins):
            m = re.search(r"\bBRA\b.*?(0x[0-9a-f]+)", text)
            if m and int(m.group(1), 16) < int(a, 16) and int(m.group(1), 16) in addr:
                out.append((name, int(m.group(1), 16), int(a, 16), [t for _, t in ins[addr[int(m.group(1), 16)]:i + 1]]))
    return out


if __name__ == "__main__":
    stage = next(s for s in study.all_stages("triton") if s.stem == "s15_fp8")
    dump = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    for shape in ((8192, 8192, 8192), (4096, 4096, 4096)):
        for fn, sig, consts, attrs, opts in ts._aot_variants(stage, "fp8", True, shape=shape):
            if not consts.get("PROMOTE") or consts.get("BETA_ZERO") is False:
                continue
            tag = f"{shape[0]} WS={consts['WS']} SA_ROW={consts['SA_ROW']} {consts['BLOCK_M']}x{consts['BLOCK_N']}x{consts['BLOCK_K']} " \
                  f"warps={opts['num_warps']} stages={opts['num_stages']}"
            ck = triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32), options=opts)
            sass = ts._cuobjdump(["-sass"], ck.asm["cubin"])
            res = ts._cuobjdump(["-res-usage"], ck.asm["cubin"])
            regs = re.findall(r"REG:(\d+)", res)
            print(f"== {tag}: regs {regs}, threads {ck.metadata.num_warps * 32}, shared {ck.metadata.shared}")
            if dump:
                dump.mkdir(parents=True, exist_ok=True)
                (dump / (re.sub(r"[^A-Za-z0-9]+", "_", tag) + ".sass")).write_text(sass)
                (dump / (re.sub(r"[^A-Za-z0-9]+", "_", tag) + ".ttgir")).write_text(ck.asm["ttgir"])
            for name, lo, hi, body in loops(sass):
                c = Counter()
                for t in body:
                    for k, rx in KINDS:
                        if re.search(rx, t):
                            c[k] += 1
                if c["QGMMA"] or c["UTMALDG"] or len(body) > 40:
                    waits = [t.split("DEPBAR")[1].strip() for t in body if "DEPBAR" in t]
                    print(f"   loop {lo:#x}-{hi:#x}: {len(body)} ins, " + ", ".join(f"{k} {v}" for k, v in c.items())
                          + (f"; waits {waits}" if waits else ""))
