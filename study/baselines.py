"""What the baselines (cuBLAS, Inductor; kernels.CublasKernel, kernels.InductorKernel) take: their
precision, their layouts and the GPU they need, checked when one is made and on each call.

A baseline takes every layout (registry.LAYOUTS: torch.mm and Inductor's templates read transposed
views without a copy); the one it is made with is its primary layout, the one the study times.
fp8 takes NT only: FP8 tensor cores read K-major A and B.
"""
from __future__ import annotations

from . import device, fp8
from .operands import DTYPES
from .registry import LAYOUTS, SCALED

FP8_CAPABILITY = (8, 9)   # e4m3 tensor cores: Ada and Hopper on


def fp8_reason(precision: str, cap) -> str | None:
    """Why a GPU of capability `cap` cannot run a baseline at `precision`, or None."""
    if precision in SCALED and cap is not None and tuple(cap) < FP8_CAPABILITY:
        return f"fp8 needs sm_89+; this GPU is sm_{cap[0]}{cap[1]}"
    return None


def check_baseline(family: str, precision: str, layout: str, fast_accum: bool = False) -> tuple:
    """The layouts of a baseline made with primary `layout` (it first); ValueError for a bad
    precision or layout, RuntimeError without a GPU that runs it."""
    if precision not in DTYPES:
        raise ValueError(f"name: {'cuBLAS' if family == 'cublas' else 'Inductor'} precision must be one of "
                         f"{tuple(DTYPES)}, got {precision!r}")
    if fast_accum and precision not in SCALED:
        raise ValueError(f"fast_accum: only fp8 kernels accumulate in FP8 chains; {family} {precision} does not")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if precision in SCALED and layout != "NT":
        raise ValueError(f"layout: {family} {precision} takes NT only (FP8 tensor cores read K-major A and B), "
                         f"got {layout!r}")
    if device.capability() is None:  # as the stages: refuse here, not at the first call
        raise RuntimeError(f"{family} {precision} cannot run here: no CUDA GPU")
    why = fp8_reason(precision, device.capability())
    if why:
        raise RuntimeError(f"{family} {precision} cannot run here: {why}")
    return ("NT",) if precision in SCALED else (layout,) + tuple(x for x in LAYOUTS if x != layout)


def refuse_scaled_mm(family: str, p, scales):
    """ValueError if torch._scaled_mm (the fp8 baselines' path) cannot take this problem."""
    if scales:
        why = fp8.check_scaled_mm(p.N, p.K, *fp8.scaled_mm_flags(p.M, p.N, p.scale_a_per_row, p.scale_b_per_col))
        if why:
            raise ValueError(f"{family} fp8: {why}")
