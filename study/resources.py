"""Per-kernel resources: registers, shared memory, spills and the key SASS instruction counts.

CUDA stages: nvcc to a cubin with the build's flags (ptxas -v for resources, cuobjdump for SASS);
works without a GPU. Triton stages: the kernels compiled during a run (registers and spills from
the loaded binary, shared memory and warps from the metadata, SASS from the cubin).
One row per GPU kernel function (a stage may have several: one per element type or variant).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
import threading
from collections import Counter
from pathlib import Path

import pandas as pd

from . import build, device
from .registry import STATE_ROOT, Stage

# Opcodes counted per kernel: the instruction mix each stage claims in its header.
SASS_KEYS = ("FFMA", "HMMA", "HGMMA", "QGMMA", "LDG128", "LDS128", "LDGSTS", "LDSM", "UTMALDG", "STS128", "BAR")
_INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)")
_FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)")


def count_opcodes(opcodes) -> dict:
    c = Counter()
    for op in opcodes:
        base = op.split(".")[0]
        if base in ("FFMA", "HMMA", "HGMMA", "QGMMA", "LDGSTS", "LDSM", "UTMALDG", "BAR"):
            c[base] += 1
        if base == "LDG" and ".128" in op:
            c["LDG128"] += 1
        if base == "LDS" and ".128" in op:
            c["LDS128"] += 1
        if base == "STS" and ".128" in op:
            c["STS128"] += 1
        c["instructions"] += 1
    return {k: c.get(k, 0) for k in SASS_KEYS + ("instructions",)}


def sass_by_function(sass: str) -> dict:
    """{function name: [opcode, ...]} from cuobjdump -sass text."""
    out, func = {}, None
    for line in sass.splitlines():
        if m := _FUNC.match(line):
            func = m.group(1)
            out[func] = []
        elif func and (m := _INSN.search(line)):
            out[func].append(m.group(1))
    return out


def cuda_stage(stage: Stage, out_dir: Path) -> list:
    arch = device.arch_flag(stage.arch)
    cubin, res, _ = build.compile_cubin(stage, out_dir, arch)
    ops = sass_by_function(build.sass(cubin))
    rows = []
    for r in res:
        rows.append({"family": "cuda", "stage": stage.stem, "kernel": r.function, "variant": "",
                     "registers": r.registers, "shared_bytes": r.shared_bytes, "stack_bytes": r.stack_bytes,
                     "spill_bytes": r.spill_stores + r.spill_loads, "num_warps": None, "num_stages": None,
                     **count_opcodes(ops.get(r.function, [])), "lines_of_code": stage.lines_of_code})
    return rows


def cuda_stages(stages, out_dir: Path, jobs: int = 8) -> pd.DataFrame:
    """Resources of every CUDA stage, compiled in parallel; a failing stage gets an error row."""
    from concurrent.futures import ThreadPoolExecutor

    def one(st):
        try:
            return cuda_stage(st, out_dir)
        except Exception as exc:
            return [{"family": "cuda", "stage": st.stem, "kernel": "", "error": str(exc)[:300],
                     "lines_of_code": st.lines_of_code}]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        rows = [r for rs in pool.map(one, stages) for r in rs]
    return pd.DataFrame(rows)


def _jit_functions(module):
    """The @triton.jit functions defined in a stage module (unwrapping autotune/heuristics)."""
    import triton

    seen = []
    for obj in vars(module).values():
        fn = obj
        while hasattr(fn, "fn") and not isinstance(fn, triton.runtime.jit.JITFunction):
            fn = fn.fn
        if isinstance(fn, triton.runtime.jit.JITFunction) and fn not in seen:
            seen.append(fn)
    return seen


def sass_cache_dir() -> Path:
    """SASS counts of Triton cubins already read, one JSON file per cubin's SHA-1 (the study's
    build cache, as runner.triton_cache_dir): a precision group compiles tens of variants per
    stage, and cuobjdump took ~0.5 s each on the H100 machine (fp16 at three shapes: 27.6 s for 57;
    every child, GPU and run read them again)."""
    return Path(os.environ.get("STUDY_CACHE_DIR", STATE_ROOT / "build")) / "sass"


def sass_counts(cubin: bytes) -> dict:
    """count_opcodes over every function of a cubin, from the cache when this cubin was read
    before; {} when cuobjdump cannot read it."""
    key = hashlib.sha1(cubin).hexdigest()
    path = sass_cache_dir() / f"{key}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        try:
            ops = sass_by_function(build.sass(Path(f.name)))
        except (subprocess.CalledProcessError, FileNotFoundError):
            return {}
    counts = count_opcodes([op for v in ops.values() for op in v])
    try:   # written whole, then renamed: a reader in another process never sees half a file
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(counts))
        os.replace(tmp, path)
    except OSError:
        pass
    return counts


def triton_stage(stage: Stage, module, precision: str = "", jobs: int = 8) -> list:
    """Resources of the kernels this process compiled for a Triton stage module; their SASS read
    by `jobs` threads (cuobjdump runs outside the GIL), each cubin once (sass_counts)."""
    from concurrent.futures import ThreadPoolExecutor

    found = []
    for fn in _jit_functions(module):
        for dev_cache in getattr(fn, "device_caches", {}).values():
            kernels = dev_cache[0] if isinstance(dev_cache, tuple) else {}
            for i, (key, k) in enumerate(kernels.items()):
                try:
                    k._init_handles()
                except Exception:
                    pass
                found.append((fn, i, key, k))
    cubins = [k.asm.get("cubin") if hasattr(k, "asm") else None for _, _, _, k in found]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        counts = list(pool.map(lambda c: sass_counts(c) if c else {}, cubins))
    rows = []
    for (fn, i, key, k), sass in zip(found, counts):
        md = k.metadata
        rows.append({"family": "triton", "stage": stage.stem, "kernel": fn.__name__,
                     "variant": f"{precision}#{i}" if precision else str(i),
                     "registers": getattr(k, "n_regs", None), "shared_bytes": getattr(md, "shared", None),
                     # Triton's n_spills is the kernel's local memory in 4-byte words
                     # (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES / 4): report bytes.
                     "stack_bytes": None,
                     "spill_bytes": None if getattr(k, "n_spills", None) is None else 4 * k.n_spills,
                     "num_warps": getattr(md, "num_warps", None), "num_stages": getattr(md, "num_stages", None),
                     # the JIT's specialisation key (argument types, 16-divisibility,
                     # constexprs): which call compiled this variant
                     "specialization": str(key)[:400],
                     **(sass or count_opcodes([])), "lines_of_code": stage.lines_of_code})
    return rows


def summary(resources: pd.DataFrame) -> pd.DataFrame:
    """One row per (family, stage): the largest registers/shared memory, total spills, SASS counts."""
    if resources is None or resources.empty:
        return pd.DataFrame(columns=["family", "stage", "registers", "shared_bytes", "spill_bytes", "lines_of_code"])
    df = resources.copy()
    for col in ("registers", "shared_bytes", "spill_bytes", "lines_of_code", *SASS_KEYS):
        if col not in df:
            df[col] = float("nan")
        df[col] = pd.to_numeric(df[col], errors="coerce")
    agg = {"registers": "max", "shared_bytes": "max", "spill_bytes": "max", "lines_of_code": "max",
           **{k: "max" for k in SASS_KEYS}}
    return df.groupby(["family", "stage"], as_index=False).agg(agg)
