"""torch's global matmul flags, set for one baseline call (cuBLAS, Inductor) and restored after it.

TF32: torch >= 2.9 has two APIs for one setting, the legacy `allow_tf32` and `fp32_precision`
("tf32" / "ieee"); once a caller has used the new one, reading the legacy flag raises. So the
flag is set through the API the caller's state allows: the legacy flag while it can be read,
else `torch.backends.cuda.matmul.fp32_precision` (saved, set, and restored the same way).
"""
from __future__ import annotations

import torch


def _tf32_api(m) -> tuple:
    """(attribute, saved value) of the TF32 setting, through the API that may be used now."""
    try:
        return "allow_tf32", m.allow_tf32
    except RuntimeError:   # the caller set fp32_precision: legacy reads raise, use the new API
        return "fp32_precision", m.fp32_precision


def matmul_flags(precision: str):
    """Set TF32 and reduced-precision flags for one call; returns the saved values."""
    m = torch.backends.cuda.matmul
    api, tf32 = _tf32_api(m)
    saved = (api, tf32, m.allow_fp16_reduced_precision_reduction, m.allow_bf16_reduced_precision_reduction)
    if api == "allow_tf32":
        m.allow_tf32 = precision == "tf32"
    else:
        m.fp32_precision = "tf32" if precision == "tf32" else "ieee"
    # Our kernels accumulate in fp32 throughout: ask cuBLAS (and Inductor) for the same.
    m.allow_fp16_reduced_precision_reduction = False
    m.allow_bf16_reduced_precision_reduction = False
    return saved


def restore_flags(saved):
    """Put back what matmul_flags() saved."""
    m = torch.backends.cuda.matmul
    api, tf32, fp16, bf16 = saved
    setattr(m, api, tf32)
    m.allow_fp16_reduced_precision_reduction, m.allow_bf16_reduced_precision_reduction = fp16, bf16
