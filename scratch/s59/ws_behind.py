"""CPU only: does Triton 3.6 keep a promoted fp8 chain in flight in the warp-specialised loop when the
add is written one K block behind? Compiles three 128x128x256 WS loops for sm_90 (as Triton s15's
promoted WS config: 4 warps, 3 stages, TMA descriptors, C by TMA store) and prints each consumer
loop's wgmma waits, QGMMA, FADD and registers.

    PYTHONPATH=. python scratch/s59/ws_behind.py
"""
import re
import sys
from pathlib import Path

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import test_static as ts  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ws_sass import KINDS, loops  # noqa: E402


@triton.jit
def ws_loop(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, MODE: tl.constexpr, NUM_SMS: tl.constexpr,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [lda, 1], [BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [ldb, 1], [BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [ldc, 1], [BLOCK_M, BLOCK_N])
    tiles_n = tl.cdiv(N, BLOCK_N)
    num_tiles = tl.cdiv(M, BLOCK_M) * tiles_n
    k_steps = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_SMS, warp_specialize=True):
        off_m = (tile // tiles_n) * BLOCK_M
        off_n = (tile % tiles_n) * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if MODE == 0:     # the stage's: add each block's chain at once
            for ki in range(k_steps):
                a = a_desc.load([off_m, ki * BLOCK_K])
                b = b_desc.load([off_n, ki * BLOCK_K])
                acc += tl.dot(a, b.T)
        elif MODE == 1:   # the add one block behind the dot
            part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for ki in range(k_steps):
                a = a_desc.load([off_m, ki * BLOCK_K])
                b = b_desc.load([off_n, ki * BLOCK_K])
                nxt = tl.dot(a, b.T)
                acc += part
                part = nxt
            acc += part
        else:             # fast accumulation (one chain over K), for reference
            for ki in range(k_steps):
                a = a_desc.load([off_m, ki * BLOCK_K])
                b = b_desc.load([off_n, ki * BLOCK_K])
                acc = tl.dot(a, b.T, acc)
        c_desc.store([off_m, off_n], acc.to(tl.bfloat16))


sig = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32",
       "lda": "i32", "ldb": "i32", "ldc": "i32", "MODE": "constexpr", "NUM_SMS": "constexpr",
       "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"}
attrs = {(i,): [["tt.divisibility", 16]] for i in range(9)}
for mode, what in ((0, "add at once (the stage's)"), (1, "add one block behind"), (2, "fast accumulation")):
    consts = {"MODE": mode, "NUM_SMS": 132, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 256}
    try:
        ck = triton.compile(ASTSource(ws_loop, sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": 4, "num_stages": 3})
    except Exception as e:   # noqa: BLE001
        print(f"== {what}: compile failed: {str(e).splitlines()[0][:200]}")
        continue
    sass = ts._cuobjdump(["-sass"], ck.asm["cubin"])
    res = ts._cuobjdump(["-res-usage"], ck.asm["cubin"])
    regs, local = re.findall(r"REG:(\d+)", res), re.findall(r"(?:LOCAL|STACK):(\d+)", res)
    print(f"== {what}: regs {regs}, local {local}, shared {ck.metadata.shared}")
    for name, lo, hi, body in loops(sass):
        n = {k: sum(bool(re.search(rx, t)) for t in body) for k, rx in KINDS}
        if n["QGMMA"]:
            waits = [t.split("DEPBAR")[1].strip() for t in body if "DEPBAR" in t]
            print(f"   loop {lo:#x}-{hi:#x}: {len(body)} ins, " + ", ".join(f"{k} {v}" for k, v in n.items() if v)
                  + f"; waits {waits}")
