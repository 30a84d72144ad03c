"""Every kernel as a plain function on torch tensors: `f(a, b, c=None, *, alpha=1.0, beta=0.0)`.

One checker serves all families, so a bad argument gets the same message whichever kernel it
reaches, before any launch. Nothing is copied or converted: a tensor the kernel cannot take as
it is raises ValueError/TypeError naming the argument and what was expected.
"""
from __future__ import annotations

import contextlib
import importlib.util
import numbers
import sys
from dataclasses import dataclass

import torch

from . import build, device, registry
from .registry import Stage

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Problem:
    """A checked problem: sizes, leading dimensions (elements) and the precision it runs at."""

    M: int
    N: int
    K: int
    lda: int
    ldb: int
    ldc: int
    precision: str
    layout: str


def _leading_dim(t: torch.Tensor, name: str, rows_name: str, cols_name: str, transposed=False) -> int:
    """Leading dimension of a 2-D tensor stored row-major (or column-major when `transposed`)."""
    rows, cols = t.shape
    s_row, s_col = t.stride()
    if transposed:  # the (K, N) view of an (N, K) row-major tensor: stride (1, ldb)
        rows, cols, s_row, s_col = cols, rows, s_col, s_row
    if cols > 1 and s_col != 1:
        want = (f"the transposed view of a contiguous ({cols_name}, {rows_name}) tensor, stride (1, ld)"
                if transposed else f"row-major, stride (ld, 1)")
        raise ValueError(f"{name} must be {want}; got stride {tuple(t.stride())}. "
                         f"This kernel does not copy its inputs: pass a tensor in that layout")
    if rows <= 1:
        return max(cols, 1)
    if s_row < cols:
        raise ValueError(f"{name} has overlapping rows (leading-dimension stride {s_row} < {cols} columns)")
    return s_row


def _extent(t: torch.Tensor) -> tuple:
    """[first byte, one past the last byte] that a strided tensor touches."""
    if t.numel() == 0:
        return (t.data_ptr(), t.data_ptr())
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return (t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size())


def _overlap(x: torch.Tensor, y: torch.Tensor) -> bool:
    (a0, a1), (b0, b1) = _extent(x), _extent(y)
    return x.device == y.device and a0 < b1 and b0 < a1


def _check_scalar(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real Python number, got {type(value).__name__}")
    return float(value)


def check_operands(precisions, layout: str, a, b, c=None, alpha=1.0, beta=0.0, allow_cpu=False) -> Problem:
    """Validate C = alpha*A@B + beta*C for a kernel taking `precisions` in `layout`.

    Order: types, ranks, dtypes, shapes, layout and int32 range, then devices, so that sizes past
    int32 indexing can be checked on meta tensors without allocating them."""
    _check_scalar(alpha, "alpha")
    _check_scalar(beta, "beta")
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{name} must be 2-D, got {t.dim()}-D with shape {tuple(t.shape)}")
    allowed = {DTYPES[p]: p for p in reversed(precisions)}
    if a.dtype not in allowed:
        names = ", ".join(dict.fromkeys(str(DTYPES[p]).replace("torch.", "") for p in precisions))
        raise TypeError(f"a must have dtype {names} for this kernel, got {str(a.dtype).replace('torch.', '')}")
    if b.dtype != a.dtype:
        raise TypeError(f"b must have the dtype of a ({a.dtype}), got {b.dtype}")
    M, K = a.shape
    if b.shape[0] != K:
        raise ValueError(f"b must have K = {K} rows to match a of shape {tuple(a.shape)}, got shape {tuple(b.shape)}")
    N = b.shape[1]
    lda = _leading_dim(a, "a", "M", "K")
    ldb = _leading_dim(b, "b", "K", "N", transposed=(layout == "NT"))
    ldc = N
    if c is not None:
        if not isinstance(c, torch.Tensor):
            raise TypeError(f"c must be a torch.Tensor or None, got {type(c).__name__}")
        if c.dtype != a.dtype:
            raise TypeError(f"c must have the dtype of a ({a.dtype}), got {c.dtype}")
        if tuple(c.shape) != (M, N):
            raise ValueError(f"c must have shape (M, N) = ({M}, {N}), got {tuple(c.shape)}")
        ldc = _leading_dim(c, "c", "M", "N")
    elif beta != 0:
        raise ValueError("beta must be 0 when c is None (there is no C to scale)")
    for name, rows, cols, ld in (("a", M, K, lda), ("b", *((N, K) if layout == "NT" else (K, N)), ldb),
                                 ("c", M, N, ldc)):
        if rows and cols and (rows - 1) * ld + cols - 1 > INT32_MAX:
            raise ValueError(f"{name} is too large: its last element sits past int32 indexing "
                             f"({rows} x {cols}, leading dimension {ld}); the kernels index with int32")
    for name, t in (("b", b), ("c", c)):
        if t is not None and t.device != a.device:
            raise ValueError(f"{name} must be on the device of a ({a.device}), got {t.device}")
    if a.device.type != "cuda" and not (allow_cpu and a.device.type == "cpu"):
        raise ValueError(f"a must be a CUDA tensor, got device {a.device}")
    if c is not None and (_overlap(c, a) or _overlap(c, b)):
        raise ValueError("c must not overlap a or b in memory (the kernel writes c while reading them)")
    return Problem(M, N, K, lda, ldb, ldc, allowed[a.dtype], layout)


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
