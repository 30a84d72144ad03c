"""Every kernel as a torch operator: `torch.ops.study.gemm` and its in-place twin `gemm_`.

    study::gemm(str family, str name, Tensor a, Tensor b, Tensor? c=None, float alpha=1.0,
                float beta=0.0, Tensor? scale_a=None, Tensor? scale_b=None, bool fast_accum=False,
                int config=-1) -> Tensor                        # alpha * A @ B + beta * C, new
    study::gemm_(..., Tensor(a!) c, ...) -> ()                  # the same, written into c

One operator for every family and stage, named by strings, rather than one per kernel: the stage
files stay the only list of stages (an op per kernel would be a second list, registered at
import, that a new stage file must join), and torch.compile bakes the strings into the graph as
constants, so the choice costs nothing at run time. `study.kernel(...)` objects called inside a
compiled region go through these ops too (Kernel.__call__), and so do study.Linear and study.use.

The fake (meta) implementation gives the output's shape, dtype (a's; fp8: the kernel's output
type) and row-major strides, so `torch.compile(fullgraph=True)` traces a model that calls the op;
it checks ranks and shapes only: every other check runs, with the same messages, when the op runs.
The real implementation is the kernel's own call (kernels.Kernel.__call__, every check first),
launched on the current device's current stream, so CUDA-graph capture records it. Defined with
torch.library.Library rather than torch.library.custom_op: custom_op wraps every call in a
Python autograd layer (about 8 us more per call, measured on the CPU machine with torch 2.13);
these ops have no autograd formula: study.Linear and study.use differentiate through
nn.MatmulFn. Functional gemm with c copies c into its fresh output first (an operator may not
return an alias of its input); gemm_ writes c in place (torch.compile functionalises it).

`study.gemm` / `study.gemm_` (the Python functions below) call the implementation directly where
the dispatcher would only hand it over unchanged: not under torch.compile, no torch function or
dispatch mode active, no profiler recording, no torch.jit.trace or torch.func transform, plain
tensors (or Parameters). That skips the 3-6 us of host time a Python-implemented operator costs
per call (overhead.py's `torch.ops no-op`); anywhere else, and for `torch.ops.study.*` called by
name, the call goes through the operator.
"""
from __future__ import annotations

import contextlib

import torch

from .operands import OUT_DTYPES, beta_is_zero
from .registry import FAMILIES, SCALED, find

LIB = torch.library.Library("study", "DEF")   # the "study" operator namespace, owned by this module
_ARGS = ("str family, str name, Tensor a, Tensor b, {c}, float alpha=1.0, float beta=0.0, "
         "Tensor? scale_a=None, Tensor? scale_b=None, bool fast_accum=False, int config=-1")
LIB.define(f"gemm({_ARGS.format(c='Tensor? c=None')}) -> Tensor")
LIB.define(f"gemm_({_ARGS.format(c='Tensor(a!) c')}) -> ()")

_KERNELS: dict = {}      # (family, name, fast_accum, config) -> Kernel, made once per process
_factory = None          # kernels.kernel, handed over by define() (kernels imports this module)


def current_gpu() -> int:
    """Index of the current CUDA device, or -1 where torch has no CUDA (a CPU build)."""
    get = getattr(torch._C, "_cuda_getDevice", None)
    return get() if get else -1


_NO_GUARD = contextlib.nullcontext()   # reusable: it holds no state


def on_gpu(index: int):
    """Make GPU `index` (a tensor's get_device(); -1 off the GPU) current for a check and launch:
    a no-op when it already is (entering torch.cuda.device costs microseconds of host time per
    call) or for a CPU tensor."""
    if index < 0 or index == current_gpu():
        return _NO_GUARD
    return torch.cuda.device(torch.device("cuda", index))


def raw_stream(index: int) -> int:
    """The cudaStream_t of GPU `index`'s current stream (what a capture or a user's
    torch.cuda.stream(...) set), without building a torch.cuda.Stream object per call."""
    get = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return get(index) if get else torch.cuda.current_stream(index).cuda_stream


def kernel_for(family: str, name: str, fast_accum: bool = False, config: int = -1):
    """The kernel an op call names, made on first use (study.kernel's errors if it cannot)."""
    k = _KERNELS.get((family, name, fast_accum, config))   # as given: an op call passes bool and int
    if k is None:
        key = (family, name, bool(fast_accum), int(config))
        if _factory is None:
            raise RuntimeError("study.ops: no kernel factory; import study.kernels (study.kernel does)")
        k = _KERNELS.get(key) or _factory(family, name, fast_accum=fast_accum, config=None if config < 0 else config)
        _KERNELS[key] = k
    return k


def _spec(k) -> tuple:
    """(family, name, fast_accum, config) of a kernel object, as the op takes them."""
    config = getattr(k, "config", None)
    return k.family, k.name, bool(k.fast_accum), -1 if config is None else int(config)


def traced(k, a, b, c, alpha, beta, scale_a, scale_b):
    """Kernel.__call__ under torch.compile: the same call as an opaque op (Dynamo cannot trace
    a raw-pointer or Triton launch), naming k by its spec; the op's implementation makes (once)
    an equal kernel from it. Nothing is written here: tracing inside an autograd.Function's
    backward (study.Linear's) may not mutate state outside it."""
    family, name, fast_accum, config = _spec(k)
    if c is None:
        return torch.ops.study.gemm(family, name, a, b, None, alpha, beta, scale_a, scale_b, fast_accum, config)
    torch.ops.study.gemm_(family, name, a, b, c, alpha, beta, scale_a, scale_b, fast_accum, config)
    return c


def _gemm(family, name, a, b, c=None, alpha=1.0, beta=0.0, scale_a=None, scale_b=None, fast_accum=False,
          config=-1):
    k = kernel_for(family, name, fast_accum, config)
    out = None
    if c is not None:   # a fresh row-major output holding C (only read when beta != 0)
        out = torch.empty(c.shape, dtype=c.dtype, device=c.device)
        if not beta_is_zero(beta):
            out.copy_(c)
    return k(a, b, out, alpha=alpha, beta=beta, scale_a=scale_a, scale_b=scale_b)


def _gemm_(family, name, a, b, c, alpha=1.0, beta=0.0, scale_a=None, scale_b=None, fast_accum=False, config=-1):
    kernel_for(family, name, fast_accum, config)(a, b, c, alpha=alpha, beta=beta, scale_a=scale_a, scale_b=scale_b)


def out_dtype(family: str, name: str, a: torch.Tensor) -> torch.dtype:
    """The dtype of C: a's, except for an fp8 kernel (its stage's output type; baselines bf16)."""
    if family in FAMILIES:
        stage = find(family, name)
        return OUT_DTYPES[stage.out] if set(stage.precisions) & set(SCALED) else a.dtype
    return torch.bfloat16 if str(name) in ("fp8", "fp8_fast") else a.dtype


def _shapes(a, b, c):
    """(M, N) after the rank and shape checks that need no data (as operands.check_operands)."""
    for arg, t in (("a", a), ("b", b)):
        if t.dim() != 2:
            raise ValueError(f"{arg} must be 2-D, got {t.dim()}-D with shape {tuple(t.shape)}")
    if b.shape[0] != a.shape[1]:
        raise ValueError(f"b must have K = {a.shape[1]} rows to match a of shape {tuple(a.shape)}, "
                         f"got shape {tuple(b.shape)}")
    M, N = a.shape[0], b.shape[1]
    if c is not None and tuple(c.shape) != (M, N):
        raise ValueError(f"c must have shape (M, N) = ({M}, {N}), got {tuple(c.shape)}")
    return M, N


@torch.library.register_fake("study::gemm", lib=LIB)
def _gemm_fake(family, name, a, b, c=None, alpha=1.0, beta=0.0, scale_a=None, scale_b=None, fast_accum=False,
               config=-1):
    M, N = _shapes(a, b, c)
    return a.new_empty((M, N), dtype=c.dtype if c is not None else out_dtype(family, name, a))


@torch.library.register_fake("study::gemm_", lib=LIB)
def _gemm__fake(family, name, a, b, c, alpha=1.0, beta=0.0, scale_a=None, scale_b=None, fast_accum=False,
                config=-1):
    _shapes(a, b, c)


for _key in ("CPU", "CUDA"):   # CPU: Triton's interpreter
    LIB.impl("gemm", _gemm, _key)
    LIB.impl("gemm_", _gemm_, _key)


def define(factory):
    """Hand the ops the factory their implementations make kernels with (kernels.kernel: it
    imports this module, so it hands itself over when imported)."""
    global _factory
    _factory = factory


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _direct(tensors) -> bool:
    """Whether the operator would hand this call to its implementation unchanged (module docstring):
    then study.gemm / gemm_ call the implementation themselves."""
    return (not torch.compiler.is_compiling() and not torch._C._len_torch_dispatch_stack()
            and not torch._C._has_torch_function(tensors) and not torch._C._autograd._profiler_enabled()
            and torch._C._get_tracing_state() is None and not torch._C._are_functorch_transforms_active()
            and all(t is None or type(t) in _PLAIN for t in tensors))


def _config(family, fast_accum, config) -> int:
    """config as the ops take it (-1: the stage's default), after the type checks their schema would
    make (and stricter: fast_accum a bool, not any int)."""
    if not isinstance(family, str):
        raise TypeError(f"family must be a str, got {type(family).__name__}")
    if type(fast_accum) is not bool:
        raise TypeError(f"fast_accum must be a bool, got {type(fast_accum).__name__}")
    if config is not None and (type(config) is not int or config < 0):
        raise TypeError(f"config must be None or an int >= 0 (a stage's config index), got {config!r}")
    return -1 if config is None else config


def gemm(family: str, name, a, b, c=None, *, alpha=1.0, beta=0.0, scale_a=None, scale_b=None,
         fast_accum=False, config=None):
    """`torch.ops.study.gemm`: alpha * A @ B + beta * C as a new tensor, traceable by torch.compile."""
    config = _config(family, fast_accum, config)
    if _direct((a, b, c, scale_a, scale_b)):
        return _gemm(family, str(name), a, b, c, alpha, beta, scale_a, scale_b, fast_accum, config)
    return torch.ops.study.gemm(family, str(name), a, b, c, alpha, beta, scale_a, scale_b, fast_accum, config)


def gemm_(family: str, name, a, b, c, *, alpha=1.0, beta=0.0, scale_a=None, scale_b=None, fast_accum=False,
          config=None):
    """`torch.ops.study.gemm_`: C = alpha * A @ B + beta * C in place; returns c."""
    config = _config(family, fast_accum, config)
    if _direct((a, b, c, scale_a, scale_b)):
        _gemm_(family, str(name), a, b, c, alpha, beta, scale_a, scale_b, fast_accum, config)
    else:
        torch.ops.study.gemm_(family, str(name), a, b, c, alpha, beta, scale_a, scale_b, fast_accum, config)
    return c
