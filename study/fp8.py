"""FP8 (e4m3) operands: absmax quantisation, dequantisation, and cuBLAS through torch._scaled_mm.

The fp8 precision is C = alpha * (Sa A) @ (B Sb) + beta * C with A and B in e4m3 and fp32 scales
per tensor or per row of A / column of B (B = w.t() of an [N, K] weight, so the rows of w give
B's column scales). quantize_fp8 is the usual recipe: scale = absmax / 448 (e4m3's largest
finite value), x8 = round_to_nearest(x / scale), so the largest |x| lands on 448.

    a8, sa = study.quantize_fp8(x, "row")          # x: [M, K] bf16/fp32 -> a8 e4m3, sa [M]
    w8, sb = study.quantize_fp8(w, "row")          # w: [N, K] -> w8 e4m3, sb [N] (B = w8.t())
    c = study.kernel("cuda", "s15")(a8, w8.t(), scale_a=sa, scale_b=sb)    # bf16 [M, N]
"""
from __future__ import annotations

import torch

E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0          # largest finite e4m3 (fn: no infinities; 0x7f/0xff are NaN)
GRANULARITIES = ("tensor", "row")


def quantize_fp8(x: torch.Tensor, granularity: str = "tensor") -> tuple:
    """(x_e4m3, scale) with x ~= x_e4m3 * scale: absmax scaling, scale = absmax / 448 in fp32.

    x: a float32/bfloat16/float16 tensor (2-D for "row"). granularity "tensor": one scale, shape
    (); "row": one per row, shape [rows] (a [M, K] activation gives A's per-row scales, a [N, K]
    weight B's per-column scales). An all-zero row gets scale 1. Refuses non-finite input
    (ValueError): an infinite absmax would zero the whole row. Values are rounded to nearest
    (x / scale, clamped to +-448 so an fp32 quotient a hair over 448 cannot become NaN)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"x must have dtype float32, bfloat16 or float16, got {str(x.dtype).replace('torch.', '')}")
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    if granularity == "row" and x.dim() != 2:
        raise ValueError(f"x must be 2-D for per-row scales, got shape {tuple(x.shape)}")
    xf = x.float()
    amax = xf.abs().amax(dim=1) if granularity == "row" else xf.abs().amax()
    if not bool(torch.isfinite(amax).all()):
        raise ValueError("x must be finite (its absmax sets the scale)")
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax)).contiguous()
    div = scale[:, None] if granularity == "row" else scale
    x8 = (xf / div).clamp_(-E4M3_MAX, E4M3_MAX).to(E4M3)
    return x8, scale


def dequantize(x8: torch.Tensor, scale: torch.Tensor, dtype=torch.float64) -> torch.Tensor:
    """x8 * scale in `dtype` (exact in float64): one scale, or one per row of x8."""
    s = scale.to(dtype)
    return x8.to(dtype) * (s.reshape(()) if s.numel() == 1 else s.reshape(-1, 1))


def scaled_mm_flags(M: int, N: int, per_row: int, per_col: int) -> tuple:
    """(per_row, per_col) as torch._scaled_mm must see them: its row-wise path takes both scales
    row-wise. A one-element scale of a one-row A (or of a one-column B) is per tensor and per row
    at once, so beside a row-wise other side it counts as row-wise ([1, 1] either way)."""
    if per_row != per_col:
        per_row = per_row or int(M == 1)
        per_col = per_col or int(N == 1)
    return per_row, per_col


def check_scaled_mm(N: int, K: int, per_row: int, per_col: int) -> str | None:
    """Why torch._scaled_mm cannot take this problem, or None: its operands need 16-element
    multiples (K and N), and its row-wise path takes both scales row-wise, never one of each."""
    if K % 16 or N % 16:
        return f"torch._scaled_mm needs K and N multiples of 16, got K = {K}, N = {N}"
    if per_row != per_col:
        return ("torch._scaled_mm takes both scales per tensor or both per row of A / column of B; got "
                f"scale_a per {'row' if per_row else 'tensor'}, scale_b per {'column' if per_col else 'tensor'}")
    return None


def scaled_mm(a, b, c, scale_a, scale_b, alpha: float, beta: float, per_row: int, per_col: int,
              fast_accum: bool = False):
    """cuBLAS FP8 into c (a checked problem): torch._scaled_mm with the scales reshaped as it
    wants them (views, no copies: () per tensor, [M, 1] / [1, N] row-wise).

    _scaled_mm has no alpha or beta: with alpha == 1 and beta == 0 (what the study times) it
    writes c directly; otherwise the product comes out in fp32 (bf16 for row-wise scales, the only
    output that path has) and a second op forms alpha * product + beta * c in fp32, rounded once
    to c's dtype. fast_accum: use_fast_accum=True (one FP8 accumulate chain over all of K)."""
    M, N = c.shape
    per_row, per_col = scaled_mm_flags(M, N, per_row, per_col)
    sa = scale_a.reshape(M, 1) if per_row else scale_a.reshape(())
    sb = scale_b.reshape(1, N) if per_col else scale_b.reshape(())
    if alpha == 1.0 and beta == 0.0 and c.is_contiguous():
        torch._scaled_mm(a, b, sa, sb, out_dtype=c.dtype, use_fast_accum=fast_accum, out=c)
        return c
    prod = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16 if per_row else torch.float32,
                            use_fast_accum=fast_accum).float()
    if alpha != 1.0:
        prod.mul_(alpha)
    if beta != 0.0:
        prod.add_(c.float(), alpha=beta)
    c.copy_(prod)
    return c
