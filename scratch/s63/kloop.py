"""The consumer k-step loops of s14 kernels in a cuobjdump -sass file (argv[1]); argv[2:]: kernel
name fragments (default the 64-wide unswapped KS2 NT bf16 one). Prints, per loop holding HGMMAs,
its instruction count and mix."""
import re, sys, collections
text = open(sys.argv[1]).read()
frags = sys.argv[2:] or ["I13__nv_bfloat16LN4gemm6LayoutE1ELb0ELi64ELi2ELi128ELb0E"]
funcs = re.split(r"\n\s*Function : ", text)[1:]
ins = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
for f in funcs:
    name = f.split("\n", 1)[0].strip()
    if not any(fr in name for fr in frags):
        continue
    code = [(int(a, 16), i) for a, i in ins.findall(f)]
    addr = {a: n for n, (a, _) in enumerate(code)}
    print(name[:110])
    for n, (a, i) in enumerate(code):
        m = re.search(r"BRA (?:`\(\.L_x_\d+\) )?0x([0-9a-f]+)", i)
        if not m: continue
        tgt = int(m.group(1), 16)
        if tgt >= a or tgt not in addr: continue
        body = [x for _, x in code[addr[tgt]:n + 1]]
        if not any("GMMA" in x for x in body): continue
        ops = collections.Counter(re.sub(r"^@!?U?P\w+ ", "", x).split()[0].split(".")[0] for x in body)
        print(f"  loop {tgt:#x}-{a:#x}: {len(body)} instr, GMMA {ops['HGMMA'] + ops['QGMMA']}, R2UR {ops['R2UR']}, "
              f"MOV-like {ops['IMAD'] + ops['MOV']}, " + " ".join(f"{k}:{v}" for k, v in ops.most_common(8)))
