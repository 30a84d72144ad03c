"""How a stage divided a call's work, for stages that choose per shape (s14: data-parallel,
split-K, stream-K or hybrid): recorded in each measured row (results.csv's `decomposition`)
and shown beside the decode sweep.

    of(kernel, a, b, beta=0.0) -> str     "" for a kernel that does not say

A stage says it by defining, beside its launcher: CUDA, `const char* decomposition(const
gemm::Problem<T>& p)` (the binding then exposes decomposition_<precision>, binding.py);
Triton, a module-level `decomposition(a, b, beta=0.0) -> str`. Either describes the plan the
stage's launch takes for these operands on the current GPU, and launches nothing.
"""
from __future__ import annotations

from .operands import check_operands
from .registry import LAYOUTS


def of(k, a, b, beta: float = 0.0) -> str:
    """The division `k(a, b, beta=beta)` takes on a's GPU, as the stage names it ("" for a kernel
    whose stage names none). The operands are checked as a call checks them (ValueError naming
    the argument)."""
    family = getattr(k, "family", "")
    if family == "cuda":
        says = any(hasattr(k.module, f"decomposition_{prec}") for prec in k.precisions)
    else:
        says = family == "triton" and hasattr(k.module, "decomposition")
    if not says:
        return ""
    p = check_operands(k.precisions, getattr(k, "layouts", k.layout), a, b, None, allow_cpu=k._allow_cpu())
    if family == "triton":
        return str(k.module.decomposition(a, b, beta))
    from . import ops
    with ops.on_gpu(a.get_device()):   # the plan reads the current GPU's SMs and L2
        return str(getattr(k.module, f"decomposition_{p.precision}")(
            a.data_ptr(), b.data_ptr(), 0, p.M, p.N, p.K, p.lda, p.ldb, p.ldc, 1.0, float(beta), LAYOUTS.index(p.layout)))
