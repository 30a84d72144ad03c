"""Static checks without a GPU: every CUDA stage compiled by nvcc for sm_90a, every Triton stage
compiled ahead of time for sm_90 in every layout its header lists, with resources and the SASS
instruction mix checked.

What a stage claims (the rule, from the stage contract's table, generalised so that future
stages are covered without test code; header words are used only where the contract gives no
number, because Change lines also name what a stage replaces, e.g. "no ldmatrix"):

  SIMT     precisions == {fp32}: FFMA present, no HMMA/HGMMA/QGMMA (the math is FFMA only)
  vector   SIMT and stage number >= 4 (CUDA): LDS.128, and 128-bit global loads
           (LDG.E.128, or LDGSTS...128 once the global loads are cp.async)
  cp.async CUDA, Arch sm_80+ and (stage number >= 6 or the Change line says cp.async):
           LDGSTS
  mma      CUDA, a tensor-core precision (tf32/fp16/bf16), Arch sm_80+: HMMA
  ldmatrix CUDA, Arch sm_80+ and the Change line says ldmatrix (not "no ldmatrix"): LDSM
  wgmma    Arch sm_90a (CUDA), or a Triton tensor-core stage whose title/Change says wgmma:
           HGMMA for 16-bit/tf32 operands; for fp8 (e4m3) QGMMA and no HGMMA (the operands
           are not widened); any Triton tensor-core stage: HGMMA or HMMA, fp8 QGMMA
  TMA      Arch sm_90a (CUDA), or a Triton stage whose title/Change says TMA or tensor
           descriptors: UTMALDG
  spills   every kernel: 0 bytes spill stores/loads (ptxas -v for CUDA; cuobjdump -res-usage
           LOCAL = STACK = 0 for Triton, whose metadata n_spills is only filled in when loaded
           on a GPU: spills show up as a stack frame), for Triton also at ragged sizes (1000^3,
           4095^3), whose specialisations (no divisibility by 16, VEC == 1) need more registers
"""
from __future__ import annotations

import hashlib
import inspect
import re
import subprocess
import tempfile
import types
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

import gemm_checks as gc
import study
from study import build
from study.registry import ROOT, find

ARCH_FLAG = "-gencode=arch=compute_90a,code=sm_90a"
TENSOR = {"tf32", "fp16", "bf16"}
FP8 = {"fp8"}   # e4m3 tensor cores: wgmma shows as QGMMA (e.g. QGMMA.64x128x32.F32.E4M3.E4M3)
CACHE = ROOT / "build" / "static"


def _said(stage, *words) -> bool:
    """The stage's title or Change line names one of `words`, not negated ("no X", "without X")."""
    text = f"{stage.title} {stage.change}".lower()
    for w in words:
        for m in re.finditer(re.escape(w.lower()), text):
            before = text[max(0, m.start() - 12):m.start()]
            if not re.search(r"\b(no|without|not|instead of|replaces)\s+(the\s+)?$", before):
                return True
    return False


def cuda_claims(stage) -> dict:
    """{name: (check on SASS counts, what it means)} for one CUDA stage."""
    simt = set(stage.precisions) == {"fp32"}
    tensor = bool(set(stage.precisions) & TENSOR)
    c = {}
    if simt:
        c["FFMA only"] = _ffma_only()
        if stage.number >= 4:
            c["128-bit loads"] = (lambda n: n["LDS.128"] > 0 and (n["LDG.E.128"] + n["LDGSTS.128"]) > 0,
                                  "LDS.128 and LDG.E.128 (or 16-byte LDGSTS)")
    if stage.arch == "sm_80+" and (stage.number >= 6 or _said(stage, "cp.async")):
        c["cp.async"] = (lambda n: n["LDGSTS"] > 0, "LDGSTS")
    if tensor and stage.arch == "sm_80+":
        c["mma"] = (lambda n: n["HMMA"] > 0, "HMMA")
    if stage.arch == "sm_80+" and _said(stage, "ldmatrix"):
        c["ldmatrix"] = (lambda n: n["LDSM"] > 0, "LDSM")
    if stage.arch == "sm_90a":
        c["wgmma"] = _wgmma(stage)
        c["TMA"] = (lambda n: n["UTMALDG"] > 0, "UTMALDG")
    c.update(_warp_specialised(stage))
    return c


def _ffma_only():
    return (lambda n: n["FFMA"] > 0 and n["HMMA"] == 0 and n["HGMMA"] == 0 and n["QGMMA"] == 0,
            "FFMA present, no HMMA/HGMMA/QGMMA")


def _wgmma(stage):
    """wgmma of the stage's operands: QGMMA (and no 16-bit HGMMA) for fp8, else HGMMA."""
    if set(stage.precisions) & FP8:
        return (lambda n: n["QGMMA"] > 0 and n["HGMMA"] == 0, "QGMMA (e4m3 wgmma), no HGMMA")
    return (lambda n: n["HGMMA"] > 0, "HGMMA")


def _warp_specialised(stage) -> dict:
    """A warp-specialised stage moves registers between its warpgroups: setmaxnreg (USETMAXREG)."""
    if _said(stage, "warp-specialised", "warp_specialize", "setmaxnreg"):
        return {"warp specialisation": (lambda n: n["USETMAXREG"] > 0, "USETMAXREG (setmaxnreg)")}
    return {}


def triton_claims(stage) -> dict:
    fp8 = bool(set(stage.precisions) & FP8)
    tensor = bool(set(stage.precisions) & TENSOR) or fp8
    c = {}
    if not tensor:
        c["FFMA only"] = _ffma_only()
    else:
        c["tensor cores"] = ((lambda n: n["QGMMA"] > 0, "QGMMA") if fp8 else
                             (lambda n: n["HGMMA"] + n["HMMA"] > 0, "HGMMA or HMMA"))
        if _said(stage, "wgmma") or stage.arch == "sm_90a":
            c["wgmma"] = _wgmma(stage)
    if _said(stage, "TMA", "tensor descriptor"):
        c["TMA"] = (lambda n: n["UTMALDG"] > 0, "UTMALDG")
    c.update(_warp_specialised(stage))
    return c


def sass_counts(sass: str) -> dict:
    ops = [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass)]
    n = {k: 0 for k in ("FFMA", "HMMA", "HGMMA", "QGMMA", "LDG.E.128", "LDS.128", "LDGSTS", "LDGSTS.128",
                        "LDSM", "UTMALDG", "USETMAXREG")}
    for op in ops:
        parts = op.split(".")
        head = parts[0]
        if head in ("FFMA", "HMMA", "HGMMA", "QGMMA", "LDGSTS", "LDSM", "UTMALDG", "USETMAXREG"):
            n[head] += 1
        if head == "LDG" and "128" in parts:
            n["LDG.E.128"] += 1
        if head == "LDS" and "128" in parts:
            n["LDS.128"] += 1
        if head == "LDGSTS" and "128" in parts:
            n["LDGSTS.128"] += 1
    return n


# --- CUDA ------------------------------------------------------------------------------------

def _cuda_key(stage) -> str:
    h = hashlib.sha1()
    for p in build.included_sources(stage.path):
        h.update(p.read_bytes())
    h.update(" ".join(build.NVCC_FLAGS + build.TORCH_NVCC_DEFINES + [ARCH_FLAG]).encode())
    return h.hexdigest()[:12]


def _compile_one(stage):
    """(sass, resources, log) of one stage, cached under build/static by source hash."""
    d = CACHE / f"{stage.stem}-{_cuda_key(stage)}"
    sass_file, log_file = d / "sass.txt", d / "ptxas.log"
    if not (sass_file.exists() and log_file.exists()):
        cubin, _, log = build.compile_cubin(stage, d, ARCH_FLAG)
        sass_file.write_text(build.sass(cubin))
        log_file.write_text(log)
    log = log_file.read_text()
    return sass_file.read_text(), build.parse_ptxas(log), log


@pytest.fixture(scope="session")
def cuda_static():
    """Every CUDA stage compiled in parallel once per session: {stem: (sass, resources, log) or
    the exception}."""
    stages = study.all_stages("cuda")

    def one(st):
        try:
            return _compile_one(st)
        except Exception as exc:
            return exc
    with ThreadPoolExecutor(max_workers=8) as pool:
        out = list(pool.map(one, stages))
    return {st.stem: r for st, r in zip(stages, out)}


CUDA_PARAMS = [pytest.param(s, id=s.stem) for s in study.all_stages("cuda")]


def _cuda_result(cuda_static, stage):
    r = cuda_static[stage.stem]
    if isinstance(r, Exception):
        pytest.fail(f"{stage.stem} does not compile for sm_90a:\n{str(r)[-3000:]}")
    return r


@pytest.mark.parametrize("stage", CUDA_PARAMS)
def test_cuda_compiles_without_spills(stage, cuda_static):
    sass, res, log = _cuda_result(cuda_static, stage)
    assert res, f"{stage.stem}: ptxas reported no kernels"
    spills = [(r.function, r.spill_stores, r.spill_loads) for r in res if r.spill_stores or r.spill_loads]
    assert not spills, f"{stage.stem}: register spills (function, store bytes, load bytes): {spills}"


@pytest.mark.parametrize("stage", CUDA_PARAMS)
def test_cuda_sass_mix(stage, cuda_static):
    sass, res, log = _cuda_result(cuda_static, stage)
    n = sass_counts(sass)
    wrong = [f"{name}: needs {what}" for name, (ok, what) in cuda_claims(stage).items() if not ok(n)]
    assert not wrong, f"{stage.stem}: SASS does not show what the stage claims: {wrong}; counts {n}"


def test_claim_rule_covers_the_ladder():
    """The rule gives the contract's table on the contract's stems (guards the rule itself)."""
    from study.registry import Stage

    def fake(stem, prec, arch="sm_80+", change=""):
        return Stage("cuda", stem, Path(stem), "t", change, "", "", "none", "", prec, arch, "NN", "none: x")
    assert set(cuda_claims(fake("s03_x", ("fp32",)))) == {"FFMA only"}
    assert set(cuda_claims(fake("s04_x", ("fp32",)))) == {"FFMA only", "128-bit loads"}
    assert set(cuda_claims(fake("s06_x", ("fp32",)))) == {"FFMA only", "128-bit loads", "cp.async"}
    assert set(cuda_claims(fake("s09_x", ("tf32",)))) == {"cp.async", "mma"}
    assert "ldmatrix" in cuda_claims(fake("s11_x", ("fp16", "bf16"), change="vs s10, ldmatrix loads"))
    c12 = cuda_claims(fake("s12_x", ("fp16",), "sm_90a", "TMA and wgmma (no ldmatrix); replaces cp.async"))
    assert set(c12) == {"wgmma", "TMA"}
    zero = dict.fromkeys(sass_counts(""), 0)
    hgmma, qgmma = {**zero, "HGMMA": 8, "UTMALDG": 1}, {**zero, "QGMMA": 8, "UTMALDG": 1}
    assert c12["wgmma"][0](hgmma) and not c12["wgmma"][0](qgmma)
    c15 = cuda_claims(fake("s15_x", ("fp8",), "sm_90a", "e4m3 operands through wgmma"))
    assert set(c15) == {"wgmma", "TMA"}
    assert c15["wgmma"][0](qgmma) and not c15["wgmma"][0](hgmma)
    assert not c15["wgmma"][0]({**qgmma, "HGMMA": 1})   # widened to 16-bit wgmma: not fp8
    t15 = triton_claims(fake("s15_x", ("fp8",), "sm_90a", "e4m3 tl.dot over tensor descriptors"))
    assert set(t15) == {"tensor cores", "wgmma", "TMA"}
    assert all(ok(qgmma) for ok, _ in t15.values()) and not t15["tensor cores"][0](hgmma)
    n = sass_counts("        /*0ff0*/                   QGMMA.64x256x32.F32.E4M3.E4M3 R24, gdesc[UR20], R24, UP0 ;")
    assert n["QGMMA"] == 1 and n["HGMMA"] == 0


# --- Triton ------------------------------------------------------------------------------------

class _Captured(Exception):
    pass


@contextmanager
def _capture_launches(calls: list):
    """Patch JITFunction.run / Autotuner.run so that a stage's matmul() records its launches
    (function, bound arguments, configs) instead of running them: no GPU needed."""
    import torch
    from triton.runtime import autotuner, jit

    orig_jit, orig_auto = jit.JITFunction.run, autotuner.Autotuner.run
    orig_props = torch.cuda.get_device_properties

    def jit_run(self, *args, grid, warmup, **kwargs):
        calls.append((self, args, kwargs, None))

    def auto_run(self, *args, **kwargs):   # the configs this call would tune over (after pruning)
        self.nargs = dict(zip(self.arg_names, args))
        # the stage's own config list: tests/test_gpu.py trims `configs` to the first one for
        # speed (keeping the list in `all_configs`) in the same xdist worker
        trimmed, self.configs = self.configs, getattr(self, "all_configs", self.configs)
        try:
            configs = self.prune_configs(kwargs) if self.early_config_prune else list(self.configs)
        finally:
            self.nargs, self.configs = None, trimmed
        calls.append((self.fn, args, kwargs, list(configs)))

    jit.JITFunction.run, autotuner.Autotuner.run = jit_run, auto_run
    torch.cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(
        multi_processor_count=132, name="NVIDIA H100 80GB HBM3", major=9, minor=0)
    try:
        yield
    finally:
        jit.JITFunction.run, autotuner.Autotuner.run = orig_jit, orig_auto
        torch.cuda.get_device_properties = orig_props


_TT = {"torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16",
       "torch.float8_e4m3fn": "fp8e4nv"}


def _matmul_calls(stage, precision: str, shape, layout: str | None = None) -> list:
    """[(args, kwargs)]: the matmul() calls whose launches cover what the stage compiles at an
    M x N x K problem in `layout` (default the primary; CPU tensors, never read; a stage of
    several layouts is told which, as study.kernels does): one call; for fp8 (e4m3 A and B, C
    in the stage's output type, fp32 scales) one per scaling (per tensor: 1-element scales; per
    row of A / column of B: M and N) and accumulation (promoted, fast_accum), each a separate
    variant; each also with beta != 0 (the epilogue that reads C)."""
    import torch

    from study.kernels import DTYPES
    from study.operands import OUT_DTYPES, TRANSPOSED

    layout = layout or stage.layout
    M, N, K = shape
    dt = DTYPES[precision]
    a_t, b_t = TRANSPOSED[layout]
    a = torch.randn(K, M).to(dt).t() if a_t else torch.randn(M, K).to(dt)
    b = torch.randn(N, K).to(dt).t() if b_t else torch.randn(K, N).to(dt)
    told = {"layout": layout} if len(stage.layouts) > 1 else {}
    if precision not in gc.SCALED:   # beta = 0 (timed) and beta != 0 (the study's alpha/beta check)
        return [((a, b, torch.empty(M, N, dtype=dt)), dict(alpha=1.0, beta=beta, **told)) for beta in (0.0, 0.5)]
    c = torch.empty(M, N, dtype=OUT_DTYPES[stage.out])
    calls = []
    for scaling in gc.FP8_SCALINGS:
        sa, sb = (torch.ones(M), torch.ones(N)) if scaling == "row" else (torch.ones(()), torch.ones(()))
        for fast, beta in ((False, 0.0), (True, 0.0), (False, 0.5)):
            calls.append(((a, b, c), dict(alpha=1.0, beta=beta, scale_a=sa, scale_b=sb, fast_accum=fast, **told)))
    return calls


def _aot_variants(stage, precision: str, all_configs: bool, shape=(512, 512, 512), layout: str | None = None):
    """[(JITFunction, signature, constexprs, attrs, options)] for the matmul() calls of
    _matmul_calls() at an M x N x K problem in `layout` (default the primary)."""
    import torch

    from study.kernels import _load_triton_module
    from triton.runtime import autotuner, jit

    mod = _load_triton_module(stage)
    calls: list = []
    with _capture_launches(calls):
        for args, kwargs in _matmul_calls(stage, precision, shape, layout):
            mod.matmul(*args, **kwargs)
    out = []
    for fn, args, kwargs, configs in calls:
        heuristics = []   # @triton.heuristics between autotune and jit: applied after the config
        while not isinstance(fn, jit.JITFunction):
            if isinstance(fn, autotuner.Heuristics):
                heuristics.append(fn.values)
            fn = fn.fn
        cfgs = configs if configs else [None]
        if not all_configs:
            cfgs = cfgs[:1]
        for cfg in cfgs:
            bound = dict(zip(fn.arg_names, args))
            bound.update({k: v for k, v in kwargs.items() if k in fn.arg_names})
            opts = {k: v for k, v in kwargs.items() if k not in fn.arg_names}
            if cfg is not None:
                bound.update(cfg.kwargs)
                opts.update(num_warps=cfg.num_warps, num_stages=cfg.num_stages, num_ctas=cfg.num_ctas)
                if cfg.maxnreg:
                    opts["maxnreg"] = cfg.maxnreg
                if cfg.pre_hook:
                    cfg.pre_hook(dict(bound))
            for values in heuristics:
                for name, h in values.items():
                    bound[name] = h(dict(bound))
            for p in fn.params:   # defaults of unbound parameters
                if p.name not in bound and p.default is not inspect.Parameter.empty:
                    bound[p.name] = p.default
            sig, consts, attrs = {}, {}, {}
            for i, p in enumerate(fn.params):
                v = bound.get(p.name)
                if p.is_constexpr:
                    sig[p.name] = "constexpr"
                    consts[p.name] = v
                elif isinstance(v, torch.Tensor):
                    sig[p.name] = "*" + _TT[str(v.dtype)]
                    if v.data_ptr() % 16 == 0:
                        attrs[(i,)] = [["tt.divisibility", 16]]
                elif hasattr(v, "block_shape") and hasattr(v, "base"):   # TensorDescriptor
                    sig[p.name] = f"tensordesc<{_TT[str(v.base.dtype)]}{list(v.block_shape)}>"
                elif isinstance(v, bool):
                    sig[p.name] = "i1"
                elif isinstance(v, int) and v == 1:   # the JIT makes an int equal to 1 a constant
                    sig[p.name] = "constexpr"
                    consts[p.name] = 1
                elif isinstance(v, int):
                    sig[p.name] = "i32" if abs(v) < 2**31 else "i64"
                    if v % 16 == 0 and v != 0:
                        attrs[(i,)] = [["tt.divisibility", 16]]
                elif isinstance(v, float):
                    sig[p.name] = "fp32"
                elif v is None:
                    sig[p.name] = "constexpr"
                    consts[p.name] = None
                else:
                    raise TypeError(f"{stage.stem}: cannot type argument {p.name}={v!r} for AOT compile")
            out.append((fn, sig, consts, attrs, opts))
    if not out:
        raise AssertionError(f"{stage.stem}: matmul() launched no Triton kernel")
    return out


def _cuobjdump(args, data: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(data)
        f.flush()
        return subprocess.run([build.cuobjdump(), *args, f.name], capture_output=True, text=True,
                              check=True).stdout


SM90_SMEM = 227 * 1024   # shared memory one block may opt into on sm_90 (H100, H200)


def _too_much_smem(ck, tag) -> list:
    """A launch of this kernel would fail with OutOfResources on an H100: more shared memory than
    a block may have (a layout change in the epilogue of a persistent kernel adds its scratch to
    the ring, live across the tile loop: Triton s15's beta != 0 update at C_VEC == 1 asked 262168 B)."""
    shared = ck.metadata.shared
    return [f"{tag}: {shared} bytes of shared memory > {SM90_SMEM}"] if shared > SM90_SMEM else []


TRITON_PARAMS = [pytest.param(s, p, lay, id=f"{s.stem}-{p}-{lay}") for s in study.all_stages("triton")
                 for p in s.precisions for lay in s.layouts]


@pytest.mark.parametrize("stage,precision,layout", TRITON_PARAMS)
def test_triton_aot_sm90(stage, precision, layout):
    """Compile the kernels matmul() launches in each layout the header lists (every autotune
    config for the stage's first precision, the first config otherwise; beta = 0 and beta != 0)
    for sm_90; no spills; the claimed instructions (beta = 0, the timed path)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    variants = _aot_variants(stage, precision, all_configs=(precision == stage.precisions[0]), layout=layout)
    problems = []
    for fn, sig, consts, attrs, opts in variants:
        tag = {k: v for k, v in consts.items() if k.isupper()} | {k: v for k, v in opts.items()}
        ck = triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                            options=opts)
        res = _cuobjdump(["-res-usage"], ck.asm["cubin"])
        local = [int(x) for x in re.findall(r"(?:LOCAL|STACK):(\d+)", res)]
        if any(local):
            problems.append(f"{tag}: {max(local)} bytes of local memory (spills): {res.strip()[-300:]}")
        problems += _too_much_smem(ck, tag)
        if consts.get("BETA_ZERO") is False:   # the alpha/beta check's variant: spills only (s13 has no
            continue                           # warp specialisation there), the claims are the timed path's
        n = sass_counts(_cuobjdump(["-sass"], ck.asm["cubin"]))
        claims = triton_claims(stage)
        if consts.get("WS") is False:   # a kernel with a WS switch: its flattened loop has no setmaxnreg
            claims.pop("warp specialisation", None)
        wrong = [f"{name}: needs {what}" for name, (ok, what) in claims.items() if not ok(n)]
        if wrong:
            problems.append(f"{tag}: {wrong}; counts {n}")
    assert not problems, f"{stage.stem} {precision} {layout}:\n" + "\n".join(problems)


def _refused(stage, precision, shape, layout) -> bool:
    """The stage refuses (its unsupported()) one of the matmul() calls at this shape."""
    from study.kernels import _load_triton_module

    unsupported = getattr(_load_triton_module(stage), "unsupported", None)
    return bool(unsupported) and any(
        unsupported(*args, **{k: v for k, v in kw.items() if k.startswith("scale_") or k == "layout"})
        for args, kw in _matmul_calls(stage, precision, shape, layout))


@pytest.mark.parametrize("stage,layout", [pytest.param(s, lay, id=f"{s.stem}-{lay}")
                                          for s in study.all_stages("triton") for lay in s.layouts])
def test_triton_aot_sm90_ragged_sizes_do_not_spill(stage, layout):
    """At 1000^3 (sizes and leading dimensions divisible by 8, not 16: no Triton divisibility
    specialisation), 4095^3 (not even 16-byte rows: VEC == 1, 2- or 4-byte loads) and 1000 x 1001
    x 1000 (C's rows alone unaligned: what the TMA stages take in NT, C_VEC == 1) every config the
    call would tune over compiles for sm_90 without local memory, in each layout,
    with beta = 0 and beta != 0 (the study checks alpha/beta at every shape it times).
    fp8 takes K up to 16-byte rows (gemm_checks.fit_shape: 1000 x 1000 x 1008, 4095 x 4095 x
    4096; M, N and ldc stay ragged). Sizes a stage refuses (its unsupported()) are skipped."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    precision = stage.precisions[0]
    problems, tried = [], 0
    for size in ((1000, 1000, 1000), (4095, 4095, 4095), (1000, 1001, 1000)):
        shape = gc.fit_shape(size, precision)
        if _refused(stage, precision, shape, layout):
            continue
        for fn, sig, consts, attrs, opts in _aot_variants(stage, precision, all_configs=True, shape=shape,
                                                          layout=layout):
            tried += 1
            ck = triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                                options=opts)
            res = _cuobjdump(["-res-usage"], ck.asm["cubin"])
            local = max(int(x) for x in re.findall(r"(?:LOCAL|STACK):(\d+)", res))
            tag = {k: v for k, v in consts.items() if k.isupper()} | opts
            if local:
                problems.append(f"{'x'.join(map(str, shape))} {tag}: {local} bytes of local memory")
            problems += _too_much_smem(ck, f"{'x'.join(map(str, shape))} {tag}")
    assert tried, f"{stage.stem} {layout}: no ragged size was compiled"
    assert not problems, f"{stage.stem} {precision} {layout}:\n" + "\n".join(problems)


def test_resource_table_counts_fp8_wgmma():
    """The resources table (study/resources.py) counts e4m3 wgmma (QGMMA) apart from 16-bit HGMMA:
    s15's row showed no tensor-core instruction at all before."""
    from study.resources import SASS_KEYS, count_opcodes

    n = count_opcodes(["QGMMA.64x256x32.F32.E4M3.E4M3", "HGMMA.64x128x16.F32.BF16", "UTMALDG.2D", "FFMA"])
    assert "QGMMA" in SASS_KEYS and n["QGMMA"] == 1 and n["HGMMA"] == 1 and n["UTMALDG"] == 1


def test_sass_counts_read_each_cubin_once(tmp_path, monkeypatch):
    """A Triton cubin's SASS is read by cuobjdump once and then served from the cache keyed by its
    bytes (every child, GPU and run used to read each again: ~0.5 s a variant); a different cubin
    is read afresh, and one cuobjdump cannot read gives no counts rather than an exception."""
    import subprocess

    from study import build, resources

    monkeypatch.setenv("STUDY_CACHE_DIR", str(tmp_path))
    calls = []

    def fake_sass(path):
        data = path.read_bytes()
        calls.append(data)
        if data == b"broken":
            raise subprocess.CalledProcessError(1, "cuobjdump")
        return ("\tFunction : kern\n        /*0000*/                   HGMMA.64x128x16.F32.BF16 R0, gdesc[UR4], R0 ;\n"
                "        /*0010*/                   FFMA R1, R2, R3, R4 ;\n")
    monkeypatch.setattr(build, "sass", fake_sass)
    first = resources.sass_counts(b"cubin-a")
    assert first["HGMMA"] == 1 and first["FFMA"] == 1 and first["instructions"] == 2
    assert resources.sass_counts(b"cubin-a") == first and len(calls) == 1
    assert resources.sass_counts(b"cubin-b") == first and len(calls) == 2
    assert resources.sass_counts(b"broken") == {} and not list(tmp_path.glob("sass/*.tmp"))
    assert len(list((tmp_path / "sass").glob("*.json"))) == 2


# Triton s14's decode plans: a shape for each tile config its plan() can pick (TILES by token
# count, WAVE_TILES, DP_TILES, PAIR_TILE, WIDE_TILES, WIDE_ONE), M a multiple of 8 and N, K of 8 so every layout takes them; the
# generic sizes above run s13's tiles or the large-M config only.
S14_DECODE = [(8, 4096, 4096), (32, 4096, 4096), (40, 4104, 4104), (104, 4104, 4104), (200, 4104, 4104),
              (64, 4096, 4096), (128, 4096, 4096), (256, 4096, 4096), (16, 11008, 4096), (32, 11008, 4096),
              (64, 14336, 4096), (300, 1000, 2056),   # M > 256: stream-K's 256 x 64 tiles (beta != 0)
              (128, 9216, 4096),    # PAIR_TILE: two programs per SM
              (256, 11008, 4096), (200, 14336, 4096),   # WIDE_TILES: 128 + 64 and 128 + 128-row dots
              (256, 13000, 4096),                       # and 128 + 64 + 32
              (128, 11008, 4096),   # WIDE_ONE: one 128-row dot
              (72, 4096, 4096), (136, 11008, 4096)]   # x's ragged 128-token tile by masked loads (X_PTR):
                                                      # swapped, wide (K-major x: NT, NN)
SM90_SMEM_PER_SM = 233472   # 228 KB an SM, of which 1 KB is reserved per resident block


@pytest.mark.parametrize("layout", find("triton", "s14").layouts)
def test_triton_s14_decode_configs_compile_without_spills(layout):
    """Every tile config of Triton s14's plan() compiles for sm_90 without local memory and within
    the shared memory a block may have, with beta = 0 and beta != 0, in each layout; a config added
    to the plan's tables without a shape here fails."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from study.kernels import _load_triton_module

    stage = find("triton", "s14")
    mod = _load_triton_module(stage)
    problems, done, compiled, masked = [], set(), set(), set()
    for shape in S14_DECODE:
        for fn, sig, consts, attrs, opts in _aot_variants(stage, "bf16", all_configs=True, shape=shape, layout=layout):
            key = (fn.__name__, repr(sorted(consts.items(), key=str)), repr(sorted(opts.items(), key=str)), repr(attrs))
            if key in done:
                continue
            done.add(key)
            if fn.__name__ == "s14_stream_k_kernel":
                compiled.add((consts["BLOCK_N"], consts["BLOCK_T"], consts["BLOCK_K"], opts["num_stages"],
                              opts["num_warps"]))
            if fn.__name__ == "s14_stream_k_wide_kernel":
                compiled.add(tuple(w for w in (consts["W0"], consts["W1"], consts["W2"]) if w))
            if consts.get("X_PTR"):
                masked.add(fn.__name__)
            ck = triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32), options=opts)
            res = _cuobjdump(["-res-usage"], ck.asm["cubin"])
            local = max(int(x) for x in re.findall(r"(?:LOCAL|STACK):(\d+)", res))
            tag = f"{'x'.join(map(str, shape))} {fn.__name__} " + str({k: v for k, v in consts.items() if k.isupper()})
            if local:
                problems.append(f"{tag}: {local} bytes of local memory")
            problems += _too_much_smem(ck, tag)
            cfg = (consts.get("BLOCK_N"), consts.get("BLOCK_T"), consts.get("BLOCK_K"), opts["num_stages"],
                   opts["num_warps"])
            if fn.__name__ == "s14_stream_k_kernel" and cfg == mod.PAIR_TILE \
                    and 2 * (ck.metadata.shared + 1024) > SM90_SMEM_PER_SM:
                problems.append(f"{tag}: {ck.metadata.shared} bytes of shared memory: two programs do not fit an SM")
    tables = ({cfg for _, cfg in mod.TILES} | set(mod.WAVE_TILES) | {cfg for _, cfg in mod.DP_TILES}
              | {mod.PAIR_TILE} | {t for t, _ in mod.WIDE_TILES} | {mod.WIDE_ONE})
    assert tables <= compiled, f"plan configs no shape here compiles: {sorted(tables - compiled)}"
    if layout != "TN":   # x K-major: both kernels' masked-load loops are compiled too
        assert masked == {"s14_stream_k_kernel", "s14_stream_k_wide_kernel"}, masked
    assert not problems, f"s14 {layout}:\n" + "\n".join(problems)

