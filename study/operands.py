"""Checking a GEMM's arguments before any launch: one checker for every family.

`check_operands` turns (a, b, c, alpha, beta) into a `Problem` (sizes, leading dimensions,
precision, layout) or raises ValueError/TypeError naming the argument and what was expected. Nothing
is copied or converted: a tensor a kernel cannot take as it is, is refused. The layout (registry.
LAYOUTS) is read from the operands' strides (infer_layout): NN both row-major, NT b the transposed
view of a row-major [N, K], TN a the transposed view of a row-major [K, M]; a kernel names the
layouts it takes, primary first, and a tensor that fits several (a [1, K] row) counts as the
first of them that the kernel takes. A scaled precision (fp8:
e4m3 A and B, C in the stage's output type) also takes scale_a and scale_b (check_scales); any
other kernel refuses them.

beta == 0 is decided once, with the value the kernels compute with: the launchers take alpha and
beta as float32, so beta counts as zero iff float32(beta) == 0 (|beta| <= 2**-150, e.g. 1e-46),
and then no family reads c (kernel_beta() gives what every family is passed: 0.0 or beta).
Offsets are bounded by int32: every offset a kernel forms from a tensor's rows and leading
dimension, up to the row pointer one past the end (rows * ld), must fit (check_int32).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import torch

from .registry import LAYOUTS, SCALED

# The operands' dtype per precision (fp8: e4m3 A and B; its C is OUT_DTYPES' bf16 or fp16).
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
          "fp8": torch.float8_e4m3fn}
OUT_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}   # the output types a scaled precision names
INT32_MAX = 2**31 - 1
F32_ZERO_BELOW = 2.0**-150   # |x| <= this rounds to 0 in float32 (half the smallest subnormal, ties to even)


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
    layout: str                # the layout read from the strides: "NN", "NT" or "TN"
    scale_a_per_row: int = 0   # fp8: scale_a holds M values (one per row of A), else 1
    scale_b_per_col: int = 0   # fp8: scale_b holds N values (one per column of B), else 1


# Per layout: (a is the transposed view, b is the transposed view) of a row-major tensor.
TRANSPOSED = {"NN": (False, False), "NT": (False, True), "TN": (True, False)}


def _fits(t: torch.Tensor, transposed: bool) -> bool:
    """t's columns (rows when `transposed`) are contiguous; a single column (row) always is."""
    dim = 0 if transposed else 1
    return t.shape[dim] <= 1 or t.stride(dim) == 1


def _form(name: str, transposed: bool) -> str:
    rows, cols = ("M", "K") if name == "a" else ("K", "N")
    return (f"the transposed view of a contiguous ({cols}, {rows}) tensor, stride (1, ld)" if transposed
            else "row-major, stride (ld, 1)")


def _whole_rows(t: torch.Tensor, transposed: bool) -> bool:
    """Read in that orientation, t's rows as stored start on 16-byte boundaries (or it has one)."""
    rows, cols = t.shape[::-1] if transposed else t.shape
    return rows <= 1 or (t.stride(1 if transposed else 0) * t.element_size()) % 16 == 0


def infer_layout(layouts: tuple, a: torch.Tensor, b: torch.Tensor) -> str:
    """The first of `layouts` (a kernel's, primary first) that a's and b's strides fit, preferring
    one where both operands' stored rows start on 16-byte boundaries: an operand with a dimension
    of 1 (K = 1, a single token, one output column) fits both orders, and only the order in which
    that dimension counts the rows leaves nothing to align (x [M, 1] read as NN has 2-byte rows,
    as TN one row of M). Else a ValueError naming the operand that fits none of them, the forms
    it could take and the layouts."""
    fit = [lay for lay in layouts if _fits(a, TRANSPOSED[lay][0]) and _fits(b, TRANSPOSED[lay][1])]
    whole = [lay for lay in fit if _whole_rows(a, TRANSPOSED[lay][0]) and _whole_rows(b, TRANSPOSED[lay][1])]
    if fit:
        return (whole or fit)[0]
    takes = f"this kernel takes layout{'s' if len(layouts) > 1 else ''} {', '.join(layouts)}"
    fit_a = [lay for lay in layouts if _fits(a, TRANSPOSED[lay][0])]
    name, t, options = ("b", b, fit_a) if fit_a else ("a", a, layouts)
    forms = {}   # form -> the layouts that need it
    for lay in options:
        forms.setdefault(_form(name, TRANSPOSED[lay]["ab".index(name)]), []).append(lay)
    want = " or ".join(f"{form} ({', '.join(lays)})" if len(forms) > 1 else form for form, lays in forms.items())
    raise ValueError(f"{name} must be {want}; got stride {tuple(t.stride())} ({takes}). "
                     f"This kernel does not copy its inputs: pass a tensor in that layout")


def check_layouts(layouts) -> tuple:
    """The layouts a kernel takes as a tuple ("NT" alone is one layout), primary first; ValueError
    naming the argument and the valid ones for anything else."""
    lays = (layouts,) if isinstance(layouts, str) else tuple(layouts)
    if not lays or any(x not in LAYOUTS for x in lays) or len(set(lays)) != len(lays):
        raise ValueError(f"layout must be one of {LAYOUTS} (or a tuple of distinct ones), got {layouts!r}")
    return lays


def _leading_dim(t: torch.Tensor, name: str, rows_name: str, cols_name: str, transposed=False) -> int:
    """Leading dimension of a 2-D tensor stored row-major (or column-major when `transposed`);
    infer_layout has checked that the contiguous dimension is."""
    rows, cols = t.shape
    s_row, s_col = t.stride()
    if transposed:  # e.g. the (K, N) view of an (N, K) row-major tensor: stride (1, ldb)
        rows, cols, s_row, s_col = cols, rows, s_col, s_row
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


def beta_is_zero(beta) -> bool:
    """True iff float32(beta) == 0: the kernels take beta as float32, so this is the value they see."""
    return abs(float(beta)) <= F32_ZERO_BELOW


def kernel_beta(beta) -> float:
    """The beta every family is passed: 0.0 when float32(beta) == 0 (then c is never read), else beta."""
    return 0.0 if beta_is_zero(beta) else float(beta)


def check_int32(name: str, rows: int, cols: int, ld: int):
    """ValueError naming the tensor if an offset a kernel forms from it passes int32: the last
    element ((rows - 1) * ld + cols - 1) and a row pointer one past the end (rows * ld)."""
    if rows and cols and max((rows - 1) * ld + cols - 1, rows * ld) > INT32_MAX:
        raise ValueError(f"{name} is too large: its offsets pass int32 indexing ({rows} x {cols}, leading "
                         f"dimension {ld}: {rows} * {ld} = {rows * ld} > {INT32_MAX}); the kernels index with int32")


def check_precisions(precisions) -> tuple:
    """The precisions a kernel takes as a tuple ("fp16" alone is one precision); ValueError
    naming the argument and the valid ones for anything else."""
    precs = (precisions,) if isinstance(precisions, str) else tuple(precisions)
    bad = [p for p in precs if p not in DTYPES]
    if not precs or bad:
        raise ValueError(f"precisions must name one or more of {tuple(DTYPES)}, got {precisions!r}")
    return precs


def check_scales(M: int, N: int, a, scale_a, scale_b) -> tuple:
    """(scale_a_per_row, scale_b_per_col) of an fp8 problem, or ValueError/TypeError naming the
    scale: each an fp32 tensor on a's device, contiguous, of 1 element (shape (), (1,) or (1, 1):
    per tensor) or of one element per row of A (scale_a: (M,) or (M, 1)) / per column of B
    (scale_b: (N,) or (1, N)). Values are not inspected (that would synchronise)."""
    flags = []
    for name, s, n, shapes in (("scale_a", scale_a, M, ((M,), (M, 1))), ("scale_b", scale_b, N, ((N,), (1, N)))):
        if s is None:
            raise TypeError(f"{name} is required: an fp8 kernel computes C = alpha * (scale_a A) @ (B scale_b) "
                            f"+ beta * C, with fp32 scales (see study.quantize_fp8)")
        if not isinstance(s, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(s).__name__}")
        if s.dtype != torch.float32:
            raise TypeError(f"{name} must have dtype float32, got {str(s.dtype).replace('torch.', '')}")
        one = s.numel() == 1 and s.dim() <= 2
        if not one and tuple(s.shape) not in shapes:
            raise ValueError(f"{name} must have 1 element (per tensor) or shape {' or '.join(map(str, shapes))} "
                             f"(one per {'row of a' if name == 'scale_a' else 'column of b'}), got {tuple(s.shape)}")
        if not s.is_contiguous():
            raise ValueError(f"{name} must be contiguous, got stride {tuple(s.stride())}")
        if s.device != a.device:
            raise ValueError(f"{name} must be on the device of a ({a.device}), got {s.device}")
        flags.append(0 if one else 1)
    return tuple(flags)


def check_operands(precisions, layouts, a, b, c=None, alpha=1.0, beta=0.0, allow_cpu=False, *,
                   scale_a=None, scale_b=None, out_dtype=None) -> Problem:
    """Validate C = alpha*A@B + beta*C for a kernel taking `precisions` in `layouts` (one layout or
    a tuple, primary first; the problem's layout is inferred from the strides). For a
    scaled precision (fp8), C = alpha * (scale_a A) @ (B scale_b) + beta * C with C of
    `out_dtype` (default bf16) and the scales checked by check_scales().

    Order: types, ranks, dtypes, shapes, layout and int32 range, then devices, so that sizes past
    int32 indexing can be checked on meta tensors without allocating them."""
    precisions = check_precisions(precisions)
    if not set(precisions) & set(SCALED) and (scale_a is not None or scale_b is not None):
        raise ValueError(f"{'scale_a' if scale_a is not None else 'scale_b'}: only fp8 kernels take scales "
                         f"(this kernel takes {', '.join(precisions)})")
    layouts = check_layouts(layouts)
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
    scaled = allowed[a.dtype] in SCALED
    out = (out_dtype or torch.bfloat16) if scaled else a.dtype
    M, K = a.shape
    if b.shape[0] != K:
        raise ValueError(f"b must have K = {K} rows to match a of shape {tuple(a.shape)}, got shape {tuple(b.shape)}")
    N = b.shape[1]
    layout = infer_layout(layouts, a, b)
    a_t, b_t = TRANSPOSED[layout]
    lda = _leading_dim(a, "a", "M", "K", transposed=a_t)
    ldb = _leading_dim(b, "b", "K", "N", transposed=b_t)
    ldc = N
    if c is not None:
        if not isinstance(c, torch.Tensor):
            raise TypeError(f"c must be a torch.Tensor or None, got {type(c).__name__}")
        if c.dtype != out and not scaled:
            raise TypeError(f"c must have the dtype of a ({a.dtype}), got {c.dtype}")
        if c.dtype != out:
            raise TypeError(f"c must have dtype {str(out).replace('torch.', '')} (this fp8 kernel's output "
                            f"type), got {str(c.dtype).replace('torch.', '')}")
        if tuple(c.shape) != (M, N):
            raise ValueError(f"c must have shape (M, N) = ({M}, {N}), got {tuple(c.shape)}")
        if not _fits(c, False):   # C is row-major in every layout
            raise ValueError(f"c must be row-major, stride (ld, 1); got stride {tuple(c.stride())}. "
                             f"This kernel does not copy its output: pass a tensor in that layout")
        ldc = _leading_dim(c, "c", "M", "N")
    elif not beta_is_zero(beta):
        raise ValueError("beta must be 0 when c is None (there is no C to scale)")
    # rows and columns as stored: TN's a is a (K, M) tensor, NT's b an (N, K) one
    for name, rows, cols, ld in (("a", *((K, M) if a_t else (M, K)), lda), ("b", *((N, K) if b_t else (K, N)), ldb),
                                 ("c", M, N, ldc)):
        check_int32(name, rows, cols, ld)
    for name, t in (("b", b), ("c", c)):
        if t is not None and t.device != a.device:
            raise ValueError(f"{name} must be on the device of a ({a.device}), got {t.device}")
    if a.device.type != "cuda" and not (allow_cpu and a.device.type == "cpu"):
        raise ValueError(f"a must be a CUDA tensor, got device {a.device}")
    if c is not None and (_overlap(c, a) or _overlap(c, b)):
        raise ValueError("c must not overlap a or b in memory (the kernel writes c while reading them)")
    flags = check_scales(M, N, a, scale_a, scale_b) if scaled else (0, 0)
    return Problem(M, N, K, lda, ldb, ldc, allowed[a.dtype], layout, *flags)


def signature(a, b, c, alpha, beta, scale_a, scale_b):
    """What every check of a call depends on, as a hashable key, or None for calls that always
    take the full path (fp8 scales, non-float scalars, tensor subclasses): shapes, strides,
    dtypes, device, 16-byte alignment of a and b, alpha and beta; with C given also C's shape,
    strides, dtype and device and the three addresses (C's overlap with a and b depends on them).
    Calls of one signature pass or fail the checks alike, so the host cost of checking is paid
    once per signature (a model's layers repeat a handful of them)."""
    if scale_a is not None or scale_b is not None or type(alpha) is not float or type(beta) is not float \
            or type(a) is not torch.Tensor or type(b) is not torch.Tensor:
        return None
    key = (a.shape, a.stride(), a.dtype, a.device, a.data_ptr() & 15, b.shape, b.stride(), b.dtype, b.device,
           b.data_ptr() & 15, alpha, beta)
    if c is None:
        return key
    if type(c) is not torch.Tensor:
        return None
    return key + (c.shape, c.stride(), c.dtype, c.device, c.data_ptr(), a.data_ptr(), b.data_ptr())
