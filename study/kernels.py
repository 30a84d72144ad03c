"""Every kernel as a plain function on torch tensors: `f(a, b, c=None, *, alpha=1.0, beta=0.0)`.

CUDA stages (compiled by build.py), Triton stages (their file's `matmul`), cuBLAS (torch.mm;
fp8: torch._scaled_mm) and Inductor's autotuned Triton GEMM (inductor.py) behind one interface.
One checker (operands.py) serves all families: a bad argument gets the same message whichever kernel
it reaches, before any launch. A kernel takes the layouts its .layouts lists (read from strides); one
that cannot run here (no GPU, wrong architecture) refuses at construction saying why; a call
makes the operands' GPU current, then checks its architecture and the kernel's limits. Every
family gets beta as the kernels see it (operands.kernel_beta); c's version counter is bumped after
the raw write. A Triton stage replays a checked call signature's launch (tritoncall).

fp8 kernels take the scales too: `f(a, b, c=None, *, scale_a, scale_b, alpha=1.0, beta=0.0)`,
a and b e4m3 (b the transposed view of a contiguous [N, K]), C in bf16 (the stage's output type),
C = alpha * (scale_a A) @ (B scale_b) + beta * C; see fp8.py and study.quantize_fp8.
"""
from __future__ import annotations

import importlib.util
import sys

import torch

from . import build, device, fp8, ops, registry
from .ops import gemm, gemm_  # noqa: F401 (study.gemm / study.gemm_: the ops, with this module's factory)
from .baselines import check_baseline, fp8_reason, refuse_scaled_mm
from .operands import DTYPES, OUT_DTYPES, Problem, check_operands, kernel_beta, signature  # noqa: F401 (DTYPES: study.kernels.DTYPES)
from .registry import SCALED, Stage
from .torchflags import matmul_flags, restore_flags


class Kernel:
    """A GEMM callable: `f(a, b, c=None, *, alpha=1.0, beta=0.0) -> c` with C = alpha*A@B + beta*C
    (fp8: also scale_a, scale_b; C = alpha * (scale_a A) @ (B scale_b) + beta * C)."""

    family: str
    name: str
    precisions: tuple
    layout: str           # the primary layout (layouts[0])
    layouts: tuple        # every layout it takes (registry.LAYOUTS), read per call; else .layout alone
    out_dtype = None      # fp8: the output dtype (C); None: C has a's dtype
    fast_accum = False    # fp8: one FP8 accumulate chain over all of K (no promotion into fp32)

    def __call__(self, a, b, c=None, *, alpha=1.0, beta=0.0, scale_a=None, scale_b=None):
        if torch.is_grad_enabled() and (getattr(a, "requires_grad", False) or getattr(b, "requires_grad", False)
                                        or getattr(c, "requires_grad", False)):
            for name, t in (("a", a), ("b", b), ("c", c)):   # a raw launch has no backward: say so
                if isinstance(t, torch.Tensor) and t.requires_grad:
                    raise ValueError(f"{name} requires grad, and a kernel call is not differentiable: use "
                                     f"study.Linear or study.use (autograd through the stage), or torch.no_grad()")
        if torch.compiler.is_compiling():   # Dynamo cannot trace a raw launch: run it as an opaque op
            return ops.traced(self, a, b, c, alpha, beta, scale_a, scale_b)
        key = signature(a, b, c, alpha, beta, scale_a, scale_b)
        hit = self.__dict__.setdefault("_passed", {}).get(key) if key is not None else None
        if hit is not None:   # every check below passed for operands of this signature: launch at once
            p, beta, like = hit   # beta as the kernels take it (kernel_beta: fixed by the signature)
            if c is None:   # like: C's shape, dtype, device over one element (cheaper than torch.empty);
                c = torch.empty_like(like, memory_format=torch.contiguous_format)   # new: no version to bump
            else:
                torch.autograd.graph.increment_version(c)   # the raw write below does not bump it
            with ops.on_gpu(a.get_device()):
                self._run_again(key, p, a, b, c, float(alpha), beta)
            return c
        p = check_operands(self.precisions, getattr(self, "layouts", self.layout), a, b, c, alpha, beta,
                           allow_cpu=self._allow_cpu(), scale_a=scale_a, scale_b=scale_b, out_dtype=self.out_dtype)
        if c is None:
            c = torch.empty((p.M, p.N), dtype=self.out_dtype if p.precision in SCALED else a.dtype, device=a.device)
        beta = kernel_beta(beta)  # one beta == 0 rule for all families: float32(beta) == 0
        if p.M == 0 or p.N == 0:
            return c
        if p.K == 0:  # A @ B is all zeros: C = beta * C, and beta == 0 never reads C
            return c.zero_() if beta == 0 else c.mul_(beta)
        scales = (scale_a, scale_b) if p.precision in SCALED else None
        # check and launch (and autotune) on the operands' GPU, not the current one
        with ops.on_gpu(a.device.index if a.device.type == "cuda" else -1):
            if a.device.type == "cuda":
                self._check_device(a.device, device.capability(a.device.index))
            self._check_limits(p, a, b, c, scales)
            self._run(p, a, b, c, float(alpha), beta, scales)
        torch.autograd.graph.increment_version(c)  # raw-pointer writes do not bump it themselves
        if key is not None and p.M and p.N and p.K:
            if len(passed := self._passed) >= 256:
                passed.clear()
            passed[key] = (p, beta, torch.empty_strided((p.M, p.N), (0, 0), dtype=a.dtype, device=a.device))
        return c

    def _allow_cpu(self) -> bool:
        return False

    def _check_device(self, dev, cap):
        """RuntimeError if the operands' GPU `dev` (compute capability `cap`) cannot run this kernel."""
        stage = getattr(self, "stage", None)
        why = stage.unavailable_reason(cap) if stage else fp8_reason(self.precisions[0], cap)
        if why:
            raise RuntimeError(f"{self.family} {'stage ' if stage else ''}{self.name} cannot run on {dev}: {why}")

    def _check_limits(self, p: Problem, a, b, c, scales=None):
        """Raise ValueError if this kernel's own limits refuse the problem."""

    def _run(self, p: Problem, a, b, c, alpha: float, beta: float, scales=None):
        raise NotImplementedError

    def _run_again(self, key, p: Problem, a, b, c, alpha: float, beta: float):   # key: a checked signature
        self._run(p, a, b, c, alpha, beta)

    def _init_precision(self, fast_accum: bool, out: str = "bf16"):
        """fp8 kernels: the output dtype, and whether fast accumulation may be asked for."""
        if fast_accum and not set(self.precisions) & set(SCALED):
            raise ValueError(f"fast_accum: only fp8 kernels accumulate in FP8 chains; {self.name} takes {', '.join(self.precisions)}")
        if set(self.precisions) & set(SCALED):
            self.out_dtype, self.fast_accum = OUT_DTYPES[out], bool(fast_accum)

    def __repr__(self):
        fast = " fast_accum" if self.fast_accum else ""
        return f"<study kernel {self.family}:{self.name} {'/'.join(self.precisions)} {','.join(getattr(self, 'layouts', (self.layout,)))}{fast}>"


class CudaKernel(Kernel):
    """A hand-written CUDA stage, compiled on first use. An fp8 stage's configurations are
    accumulation modes (promoted, fast_accum), not tiles: they are never autotuned; config None
    runs the stage's default (launch(p, stream)), fast_accum=True its "fast_accum" configuration."""

    family = "cuda"

    def __init__(self, stage: Stage, config: int | None = None, fast_accum: bool = False):
        self.stage, self.name = stage, stage.stem
        self.precisions, self.layout, self.layouts = stage.precisions, stage.layout, stage.layouts
        self._init_precision(fast_accum, stage.out)
        self.config = config  # None: the stage's default (or the autotuner's choice)
        why = stage.unavailable_reason(device.capability())
        if why:
            raise RuntimeError(f"cuda stage {stage.stem} cannot run here: {why}")
        self.module = build.module(stage)
        if fast_accum:
            names = self.configs()
            if "fast_accum" not in names:
                raise ValueError(f"fast_accum: cuda {stage.stem} has no fast_accum configuration (configs: {names})")
            if config not in (None, names.index("fast_accum")):
                raise ValueError(f"config: {config} contradicts fast_accum=True (configuration "
                                 f"{names.index('fast_accum')} of {stage.stem})")
            self.config = names.index("fast_accum")
        elif self.config is not None and self.configs() and self.configs()[self.config:self.config + 1] == ["fast_accum"]:
            self.fast_accum = True

    def _check_device(self, dev, cap):
        super()._check_device(dev, cap)
        built = device.capability()   # build.py compiles for GPU 0's architecture
        if cap is not None and built is not None and tuple(cap) != tuple(built):
            raise RuntimeError(f"cuda stage {self.name} cannot run on {dev}: it is compiled for GPU 0 "
                               f"(sm_{built[0]}{built[1]}), {dev} is sm_{cap[0]}{cap[1]}")

    def configs(self) -> list:
        """Configuration names of an autotuned stage ([] for a fixed one)."""
        return list(self.module.configs()) if hasattr(self.module, "configs") else []

    def _args(self, p, a, b, c, alpha, beta, scales=None):
        args = (a.data_ptr(), b.data_ptr(), c.data_ptr(), p.M, p.N, p.K, p.lda, p.ldb, p.ldc, alpha, beta,
                registry.LAYOUTS.index(p.layout))   # int layout: gemm::Layout's value
        if p.precision in SCALED:
            args += (scales[0].data_ptr(), scales[1].data_ptr(), p.scale_a_per_row, p.scale_b_per_col)
        return args

    def _check_limits(self, p, a, b, c, scales=None):
        why = getattr(self.module, f"check_{p.precision}")(*self._args(p, a, b, c, 1.0, 0.0, scales))
        if why:
            raise ValueError(f"{self.name}: {why}")

    def _run(self, p, a, b, c, alpha, beta, scales=None):
        config = self.config
        if config is None and self.configs() and p.precision not in SCALED:
            from . import autotune
            config = autotune.choose(self, p, a, b, c)
        stream = ops.raw_stream(a.device.index)
        getattr(self.module, f"launch_{p.precision}")(*self._args(p, a, b, c, alpha, beta, scales), stream,
                                                      -1 if config is None else int(config))


def _load_triton_module(stage: Stage):
    name = f"study_triton_{stage.stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, stage.path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception:
            del sys.modules[name]
            raise
    return sys.modules[name]


class TritonKernel(Kernel):
    """A Triton stage: its file's `matmul(a, b, c, alpha, beta)` behind the common checks (fp8:
    `matmul(a, b, c, alpha, beta, scale_a=, scale_b=, fast_accum=)`)."""

    family = "triton"

    def __init__(self, stage: Stage, fast_accum: bool = False):
        self.stage, self.name = stage, stage.stem
        self.precisions, self.layout, self.layouts = stage.precisions, stage.layout, stage.layouts
        self._init_precision(fast_accum, stage.out)
        why = stage.unavailable_reason(device.capability())
        if why:
            raise RuntimeError(f"triton stage {stage.stem} cannot run here: {why}")
        self.module = _load_triton_module(stage)
        from .tritoncall import Calls   # imports triton: only where a Triton stage is made
        self._calls = Calls()

    def _allow_cpu(self):
        return registry._interpreting()

    def _layout(self, p) -> dict:
        # a stage of several layouts is told the one check_operands read (a [1, K] row fits
        # several: the stage must not guess differently); a one-layout stage takes no argument
        return {"layout": p.layout} if len(self.layouts) > 1 else {}

    def _check_limits(self, p, a, b, c, scales=None):
        unsupported = getattr(self.module, "unsupported", None)
        why = unsupported(a, b, c, *(scales or ()), **self._layout(p)) if unsupported else None
        if why:
            raise ValueError(f"{self.name}: {why}")

    def _run_again(self, key, p, a, b, c, alpha, beta):   # its last launch again (tritoncall)
        self._calls.run(key, lambda: self._run(p, a, b, c, alpha, beta), (a, b, c))

    def _run(self, p, a, b, c, alpha, beta, scales=None):
        if scales:
            self.module.matmul(a, b, c, alpha=alpha, beta=beta, scale_a=scales[0], scale_b=scales[1],
                               fast_accum=self.fast_accum, **self._layout(p))
        else:
            self.module.matmul(a, b, c, alpha=alpha, beta=beta, **self._layout(p))


class CublasKernel(Kernel):
    """cuBLAS through torch at one precision; the global TF32/reduced-precision flags are set
    for the call and restored after it. Takes NN, NT and TN (a or b may be a transposed view).

    fp8 ("fp8", NT only): torch._scaled_mm with use_fast_accum=fast_accum (name "fp8_fast" for
    fast accumulation), C bf16. _scaled_mm has no alpha/beta: unless alpha == 1 and beta == 0 a
    second op forms alpha * product + beta * C (fp8.scaled_mm). Its limits: K and N multiples of
    16, and both scales per tensor or both row-wise (else ValueError)."""

    family = "cublas"

    def __init__(self, precision: str, layout: str = "NN", fast_accum: bool = False):
        if precision == "fp8_fast":
            precision, fast_accum = "fp8", True
        self.name, self.precisions, self.layout = precision, (precision,), layout
        self.layouts = check_baseline("cublas", precision, layout, fast_accum)
        self._init_precision(fast_accum)

    def _check_limits(self, p, a, b, c, scales=None):
        refuse_scaled_mm("cublas", p, scales)

    def _run(self, p, a, b, c, alpha, beta, scales=None):
        if scales:
            fp8.scaled_mm(a, b, c, *scales, alpha, beta, p.scale_a_per_row, p.scale_b_per_col, self.fast_accum)
            return
        saved = matmul_flags(p.precision)
        try:
            if beta == 0 and alpha == 1:
                torch.mm(a, b, out=c)
            else:
                c.addmm_(a, b, beta=beta, alpha=alpha)
        finally:
            restore_flags(saved)


class InductorKernel(Kernel):
    """Inductor's autotuned Triton GEMM (inductor.py): `torch.compile(mode="max-autotune")`, Triton
    backend only, no Inductor CUDA graphs, fullgraph, static shapes; compiles and autotunes at each
    new shape (cached on disk); TF32 flags as cuBLAS's; fp8 via torch._scaled_mm, NT only."""

    family = "inductor"

    def __init__(self, precision: str, layout: str = "NN", fast_accum: bool = False):
        from . import inductor

        self.name, self.precisions, self.layout = precision, (precision,), layout
        self.layouts = check_baseline("inductor", precision, layout, fast_accum)
        self._init_precision(fast_accum)
        self.compiled = inductor.Compiled(scaled=precision in SCALED, fast_accum=self.fast_accum)

    def _check_limits(self, p, a, b, c, scales=None):
        refuse_scaled_mm("inductor", p, scales)

    def _run(self, p, a, b, c, alpha, beta, scales=None):
        if scales:
            M, N = c.shape
            sa, sb = scales
            per_row, per_col = fp8.scaled_mm_flags(M, N, p.scale_a_per_row, p.scale_b_per_col)
            scales = (sa.reshape(M, 1) if per_row else sa.reshape(()),
                      sb.reshape(1, N) if per_col else sb.reshape(()))
        saved = matmul_flags(p.precision)
        try:
            self.compiled(a, b, c, alpha, beta, scales)
        finally:
            restore_flags(saved)


BASELINES = {"cublas": CublasKernel, "inductor": InductorKernel}


def kernel(family: str, name, *, config: int | None = None, layout: str | None = None,
           fast_accum: bool = False) -> Kernel:
    """`study.kernel("cuda" | "triton" | "cublas" | "inductor", name)`: a GEMM function on tensors.

    name: a stage ("s04", 4, "s04_vectorized", "vectorized") or, for cublas and inductor, a precision
    ("fp32", "tf32", "fp16", "bf16", "fp8"; "fp8_fast": fp8, fast_accum). config: a CUDA autotuned
    stage's configuration index (default: tuned per shape class; fp8: promoted accumulation).
    layout: cublas/inductor only, the primary layout (.layout), "NN" (default; fp8: "NT", its only
    layout), "NT" or "TN"; every kernel takes each layout its .layouts lists, read from the
    operands' strides. fast_accum: fp8 only, one FP8 accumulate chain over all of K (CUDA: the
    "fast_accum" configuration; Triton: matmul(fast_accum=True); cuBLAS: use_fast_accum=True)."""
    if family in BASELINES:
        if config is not None:
            raise ValueError("config: only CUDA autotuned stages take a config index")
        if str(name) == "fp8_fast":
            name, fast_accum = "fp8", True
        return BASELINES[family](str(name), layout or ("NT" if str(name) in SCALED else "NN"), fast_accum=fast_accum)
    if layout is not None:
        raise ValueError("layout: only cublas and inductor kernels take a layout; a stage's layout is in its header")
    stage = registry.find(family, name)
    if family == "cuda":
        return CudaKernel(stage, config, fast_accum=fast_accum)
    if config is not None:
        raise ValueError("config: only CUDA autotuned stages take a config index")
    return TritonKernel(stage, fast_accum=fast_accum)


ops.define(kernel)   # the ops' implementations make their kernels with kernel()
