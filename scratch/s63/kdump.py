"""Prints the k-step loop (first HGMMA loop) of the kernel fragment argv[2] in SASS file argv[1]."""
import re, sys
text = open(sys.argv[1]).read()
frag = sys.argv[2] if len(sys.argv) > 2 else "I13__nv_bfloat16LN4gemm6LayoutE1ELb0ELi64ELi2ELi128ELb0E"
ins = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
for f in re.split(r"\n\s*Function : ", text)[1:]:
    if frag not in f.split("\n", 1)[0]: continue
    code = [(int(a, 16), i) for a, i in ins.findall(f)]
    addr = {a: n for n, (a, _) in enumerate(code)}
    for n, (a, i) in enumerate(code):
        m = re.search(r"BRA (?:`\(\.L_x_\d+\) )?0x([0-9a-f]+)", i)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in addr:
            body = code[addr[int(m.group(1), 16)]:n + 1]
            if any("HGMMA" in x for _, x in body):
                s = addr[int(m.group(1), 16)]
                for a2, x in code[max(0, s - int(sys.argv[3]) if len(sys.argv) > 3 else s):n + 1]: print(f"{a2:05x} {x}")
                sys.exit()
