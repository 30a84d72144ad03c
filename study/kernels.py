"""Every kernel as a plain function on torch tensors: `f(a, b, c=None, *, alpha=1.0, beta=0.0)`.

CUDA stages (compiled by build.py), Triton stages (their file's `matmul`) and cuBLAS (torch.mm)
behind one interface. One checker (operands.py) serves all families, so a bad argument gets the
same message whichever kernel it reaches, before any launch. A kernel that cannot run on this
machine (no GPU, wrong architecture) refuses at construction with RuntimeError saying why.
"""
from __future__ import annotations

import contextlib
import importlib.util
import sys

import torch

from . import build, device, registry
from .operands import DTYPES, Problem, check_operands
from .registry import Stage

class Kernel:
    """A GEMM callable: `f(a, b, c=None, *, alpha=1.0, beta=0.0) -> c` with C = alpha*A@B + beta*C."""

    family: str
    name: str
    precisions: tuple
    layout: str

    def __call__(self, a, b, c=None, *, alpha=1.0, beta=0.0):
        p = check_operands(self.precisions, self.layout, a, b, c, alpha, beta, allow_cpu=self._allow_cpu())
        if c is None:
            c = torch.empty((p.M, p.N), dtype=a.dtype, device=a.device)
        if p.M == 0 or p.N == 0:
            return c
        if p.K == 0:  # A @ B is all zeros: C = beta * C, and beta == 0 never reads C
            return c.zero_() if beta == 0 else c.mul_(beta)
        self._check_limits(p, a, b, c)
        # launch (and autotune) on the operands' GPU, not the current one
        with torch.cuda.device(a.device) if a.device.type == "cuda" else contextlib.nullcontext():
            self._run(p, a, b, c, float(alpha), float(beta))
        return c

    def _allow_cpu(self) -> bool:
        return False

    def _check_limits(self, p: Problem, a, b, c):
        """Raise ValueError if this kernel's own limits refuse the problem."""

    def _run(self, p: Problem, a, b, c, alpha: float, beta: float):
        raise NotImplementedError

    def __repr__(self):
        return f"<study kernel {self.family}:{self.name} {'/'.join(self.precisions)} {self.layout}>"


class CudaKernel(Kernel):
    """A hand-written CUDA stage, compiled on first use."""

    family = "cuda"

    def __init__(self, stage: Stage, config: int | None = None):
        self.stage, self.name = stage, stage.stem
        self.precisions, self.layout = stage.precisions, stage.layout
        self.config = config  # None: the stage's default (or the autotuner's choice)
        why = stage.unavailable_reason(device.capability())
        if why:
            raise RuntimeError(f"cuda stage {stage.stem} cannot run here: {why}")
        self.module = build.module(stage)

    def configs(self) -> list:
        """Configuration names of an autotuned stage ([] for a fixed one)."""
        return list(self.module.configs()) if hasattr(self.module, "configs") else []

    def _args(self, p, a, b, c, alpha, beta):
        return (a.data_ptr(), b.data_ptr(), c.data_ptr(), p.M, p.N, p.K, p.lda, p.ldb, p.ldc, alpha, beta)

    def _check_limits(self, p, a, b, c):
        why = getattr(self.module, f"check_{p.precision}")(*self._args(p, a, b, c, 1.0, 0.0))
        if why:
            raise ValueError(f"{self.name}: {why}")

    def _run(self, p, a, b, c, alpha, beta):
        config = self.config
        if config is None and self.configs():
            from . import autotune

            config = autotune.choose(self, p, a, b, c)
        stream = torch.cuda.current_stream(a.device).cuda_stream
        getattr(self.module, f"launch_{p.precision}")(*self._args(p, a, b, c, alpha, beta), stream,
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
    """A Triton stage: its file's `matmul(a, b, c, alpha, beta)` behind the common checks."""

    family = "triton"

    def __init__(self, stage: Stage):
        self.stage, self.name = stage, stage.stem
        self.precisions, self.layout = stage.precisions, stage.layout
        why = stage.unavailable_reason(device.capability())
        if why:
            raise RuntimeError(f"triton stage {stage.stem} cannot run here: {why}")
        self.module = _load_triton_module(stage)

    def _allow_cpu(self):
        return registry._interpreting()

    def _check_limits(self, p, a, b, c):
        unsupported = getattr(self.module, "unsupported", None)
        why = unsupported(a, b, c) if unsupported else None
        if why:
            raise ValueError(f"{self.name}: {why}")

    def _run(self, p, a, b, c, alpha, beta):
        self.module.matmul(a, b, c, alpha=alpha, beta=beta)


class CublasKernel(Kernel):
    """cuBLAS through torch at one precision; the global TF32/reduced-precision flags are set
    for the call and restored after it. Takes NN or NT (b may be a transposed view)."""

    family = "cublas"

    def __init__(self, precision: str, layout: str = "NN"):
        if precision not in DTYPES:
            raise ValueError(f"name: cuBLAS precision must be one of {tuple(DTYPES)}, got {precision!r}")
        if layout not in registry.LAYOUTS:
            raise ValueError(f"layout must be one of {registry.LAYOUTS}, got {layout!r}")
        if device.capability() is None:  # as the stages: refuse here, not at the first call
            raise RuntimeError(f"cublas {precision} cannot run here: no CUDA GPU")
        self.name, self.precisions, self.layout = precision, (precision,), layout

    def _run(self, p, a, b, c, alpha, beta):
        m = torch.backends.cuda.matmul
        saved = (m.allow_tf32, m.allow_fp16_reduced_precision_reduction, m.allow_bf16_reduced_precision_reduction)
        try:
            m.allow_tf32 = p.precision == "tf32"
            # Our kernels accumulate in fp32 throughout: ask cuBLAS for the same.
            m.allow_fp16_reduced_precision_reduction = False
            m.allow_bf16_reduced_precision_reduction = False
            if beta == 0 and alpha == 1:
                torch.mm(a, b, out=c)
            else:
                c.addmm_(a, b, beta=beta, alpha=alpha)
        finally:
            m.allow_tf32, m.allow_fp16_reduced_precision_reduction, m.allow_bf16_reduced_precision_reduction = saved


def kernel(family: str, name, *, config: int | None = None, layout: str | None = None) -> Kernel:
    """`study.kernel("cuda" | "triton" | "cublas", name)`: a GEMM function on torch tensors.

    name: a stage ("s04", 4, "s04_vectorized", "vectorized") or, for cublas, a precision
    ("fp32", "tf32", "fp16", "bf16"). config: a CUDA autotuned stage's configuration index
    (default: tuned per shape class). layout: for cublas only, "NN" (default) or "NT"."""
    if family == "cublas":
        return CublasKernel(str(name), layout or "NN")
    if layout is not None:
        raise ValueError("layout: only cublas kernels take a layout; a stage's layout is in its header")
    stage = registry.find(family, name)
    if family == "cuda":
        return CudaKernel(stage, config)
    if config is not None:
        raise ValueError("config: only CUDA autotuned stages take a config index")
    return TritonKernel(stage)
