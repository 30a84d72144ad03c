"""The single tolerance policy: how far a GEMM result may sit from its fp64 reference.

Every check in tests/ and the error column of the reports use these functions, so a bound is
argued once, here. The model: C = alpha * A @ B + beta * C0 computed by a kernel that

  1. may round its operands (tf32 only: the kernel rounds fp32 inputs to a 10-bit mantissa
     itself; fp32/fp16/bf16 operands are used as stored, and the reference sees those same
     stored values, so they carry no input error),
  2. forms products exactly (an fp32 FFMA keeps the full product; fp16/bf16/tf32 products fit in
     fp32 exactly on tensor cores) and accumulates K of them in fp32,
  3. rounds the result once to the output format (fp32, or fp16/bf16 for the half stages).

Unit roundoffs (u = half a unit in the last place, relative):
  fp32 u = 2^-24 (24-bit significand)      tf32 u = 2^-11 (11-bit significand: 10 stored bits)
  fp16 u = 2^-11 (11-bit significand)      bf16 u = 2^-8  (8-bit significand)

Relative Frobenius error ||C - C_ref||_F / ||C_ref||_F for random zero-mean operands (the
tests' seeded randn inputs), as a root-mean-square estimate of each error source:

  input rounding (tf32): each product a*b becomes a(1+da) b(1+db); with rounding to nearest
      |d| <= u, but hardware fed raw fp32 may truncate (|d| < 2u). A truncation error is
      uniform on [0, 2u): RMS 2u/sqrt(3), and two operands give sqrt(2) * 2u/sqrt(3) = 1.63u
      per product. Products have random signs, so the relative error of their sum is the same
      1.63u, independent of K (the GPU notes measured 7.8e-4 = 1.6u for cuBLAS TF32 at 4096^3).
  accumulation in fp32: recursive (FMA) summation of K terms rounds each partial sum s_k with
      RMS error u|s_k|/sqrt(3); for a random walk |s_k|^2 ~ k, so the summed error over C's
      sqrt(K) scale is u * sqrt(K/6). We allow u * sqrt(K/3) (tiles summed in another order,
      split-K partials). Tensor cores add their products with truncation, not rounding
      (Fasi, Higham, Mikaitis, Pranesh 2021): a biased error of up to 2u per hardware step of
      k0 >= 4 products; for a random walk that grows as u * K / (k0 * sqrt(3)). It is added for
      the tensor-core precisions only (tf32, fp16, bf16).
  output rounding: one rounding to nearest of the result, RMS about u_out / sqrt(3) relative.

bound() = SAFETY * (sum of these terms). SAFETY = 3 because the Frobenius norm over many
elements concentrates near the RMS, and it still covers the one-element worst cases: a 1x1x1
tf32 product truncated in both operands is off by < 4u (bound 4.9u); an fp16/bf16 output is off
by <= u_out (bound 1.73 u_out).

How tight is that (K = 1000 / 16384):  fp32 3.4e-6 / 1.3e-5   tf32 2.4e-3 / 2.8e-3
(with inputs already tf32-representable: 2.9e-5 / 4.4e-4)   fp16 8.8e-4 / 1.3e-3
bf16 6.8e-3 / 7.2e-3 (measured on CPU with randn inputs: fp32 2e-7, fp16 2.1e-4, bf16 1.7e-3).
A kernel that drops one K tile of 32 at K = 1000 is off by
sqrt(32/1000) = 0.18; one that drops a single k step is off by 1/sqrt(K) = 0.032 / 0.0078;
all fail (tests/test_broken.py proves it with deliberately broken kernels).

fp8 (e4m3 A and B with fp32 scales, bf16 output). The reference is the fp64 product of the
dequantised operands (e4m3 value * scale, exact in fp64), so quantisation is no error of the
kernel's. e4m3 products (4-bit significands) are exact; the scales are applied in fp32 in the
epilogue (a few fp32 roundings, inside the fp32 terms). What remains is the accumulator: FP8
wgmma adds its products into a chain that keeps only ~14 significant bits (DeepSeek-V3 report,
sec. 3.3.2: "around 14 bits" on H800), truncating at each k-step of K0_FP8 = 32 products. We take
u_chain = FP8_U_CHAIN = 2^-13 (a factor 2 over 14 bits, for the alignment to the step's largest
addend) and the tensor-core truncation model above: u_chain * L / (K0_FP8 * sqrt(3)) for a chain
of L products. Promoted accumulation (s15 config 0, cuBLAS without fast accumulation) restarts the
chain every FP8_PROMOTE = 128 products and adds it into fp32 (L = min(K, 128): 2.8e-4, independent
of K; the chunks' errors add as a random walk, like their sums); fast accumulation chains over all
of K (L = K: 2.3e-3 at K = 1000, 3.7e-2 at 16384), a separate bound (`fast_accum=True`). Plus fp32
summation of the promoted partials and one bf16 output rounding: bound("fp8", 1000) = 7.6e-3.
A dropped K tile of 128 at K = 1000 is off by 0.36, one k-step of 32 by 0.18: both fail (the fast
bound too, 1.3e-2 at K = 1000; at K = 16384 its 0.12 no longer catches a lost 128-tile, 0.088).
Elementwise, each truncating step errs by at most 2 u_chain |partial| <= 2 u_chain (|A||B|)_ij:
gamma gains 2 u_chain L / K0_FP8 (9.8e-4 promoted) and 3 u for the scale multiplies.

The Frobenius norm dilutes a few wrong elements in a large matrix, so a second, elementwise
check bounds every element by the probabilistic dot-product bound of Higham and Mary (2019):
|c_ij - ref_ij| <= lambda * sqrt(K) * u_acc * (|A||B|)_ij + input and output terms, lambda = 5.
"""
from __future__ import annotations

import math

import torch

# Unit roundoff of each precision's operands as the kernel multiplies them.
U_IN = {"fp32": 2.0**-24, "tf32": 2.0**-11, "fp16": 2.0**-11, "bf16": 2.0**-8, "fp8": 2.0**-4}
# Unit roundoff of the stored output: fp32 stages (and tf32) write fp32, half stages their dtype,
# fp8 bf16 (an fp16 output is held to the looser bf16 bound).
U_OUT = {"fp32": 2.0**-24, "tf32": 2.0**-24, "fp16": 2.0**-11, "bf16": 2.0**-8, "fp8": 2.0**-8}
U_ACC = 2.0**-24          # every kernel accumulates in fp32
TENSOR_CORE = {"tf32", "fp16", "bf16"}
K0 = 4                    # products per truncating tensor-core addition (smallest seen: V100)
SAFETY = 3.0              # Frobenius norm: multiple of the RMS estimate
LAMBDA = 5.0              # elementwise: Higham-Mary probabilistic bound's lambda
OUT_DTYPE = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
             "fp8": torch.bfloat16}
FP8_U_CHAIN = 2.0**-13    # unit roundoff of FP8 wgmma's accumulate chain (~14 bits kept, truncated)
K0_FP8 = 32               # e4m3 products per wgmma k-step: one truncating addition each
FP8_PROMOTE = 128         # products per chain before promotion into fp32 (s15's BK; cuBLAS alike)


def _check_precision(precision: str):
    if precision not in U_IN:
        raise ValueError(f"precision must be one of {tuple(U_IN)}, got {precision!r}")


def _input_term(precision: str, inputs_rounded: bool) -> float:
    """RMS relative error from the kernel rounding its own operands (tf32 only)."""
    if precision != "tf32" or inputs_rounded:
        return 0.0
    return math.sqrt(2.0) * 2.0 * U_IN["tf32"] / math.sqrt(3.0)   # two truncated operands


def fp8_chain(K: int, fast_accum: bool) -> int:
    """Products per FP8 accumulate chain: all of K with fast accumulation, else FP8_PROMOTE."""
    return max(K, 1) if fast_accum else min(max(K, 1), FP8_PROMOTE)


def _accumulation_term(precision: str, K: int, fast_accum: bool = False) -> float:
    """RMS relative error of summing K products in fp32 (plus tensor-core truncation; for fp8 the
    truncating chains of ~14 bits, promoted into fp32 unless fast_accum)."""
    term = U_ACC * math.sqrt(max(K, 1) / 3.0)
    if precision == "fp8":
        term += FP8_U_CHAIN * fp8_chain(K, fast_accum) / (K0_FP8 * math.sqrt(3.0))
    elif precision in TENSOR_CORE:
        term += U_ACC * max(K, 1) / (K0 * math.sqrt(3.0))
    return term


def bound(precision: str, K: int, *, inputs_rounded: bool = False, fast_accum: bool = False) -> float:
    """Relative Frobenius error bound ||C - C_ref||_F / ||C_ref||_F for a K-deep product.

    inputs_rounded: the operands are already representable in the precision (tf32 inputs
    pre-rounded with round_inputs()), so the kernel's own operand rounding is exact.
    fast_accum (fp8 only): one FP8 accumulate chain over all of K, no promotion into fp32."""
    _check_precision(precision)
    if K < 1:
        raise ValueError(f"K must be >= 1, got {K}")
    out = U_OUT[precision] / math.sqrt(3.0)
    return SAFETY * (_input_term(precision, inputs_rounded) + _accumulation_term(precision, K, fast_accum) + out)


def max_elem_bound(precision: str, K: int, *, inputs_rounded: bool = False, fast_accum: bool = False) -> tuple:
    """(gamma, u_out): every element must satisfy
    |c - ref| <= gamma * scale + u_out * |ref|, scale = |alpha| (|A||B|) + |beta| |C0|.

    gamma: worst-case operand rounding (tf32 truncation: 2u per operand, 4u per product) plus
    the Higham-Mary probabilistic accumulation bound lambda * sqrt(K) * u (which also covers the
    biased tensor-core truncation: relative to |A||B| it grows as sqrt(K) u / k0 for random
    data), plus one fp32 rounding in the alpha/beta epilogue. u_out: the final rounding, 2u
    because the epilogue rounds alpha*acc + beta*c0 in fp32 before the output conversion."""
    _check_precision(precision)
    gamma = LAMBDA * math.sqrt(max(K, 1)) * U_ACC + 2 * U_ACC
    if precision == "tf32" and not inputs_rounded:
        gamma += 4.0 * U_IN["tf32"]
    if precision == "fp8":   # each truncating k-step: <= 2 u_chain (|A||B|)_ij; scale multiplies
        gamma += 2.0 * FP8_U_CHAIN * fp8_chain(K, fast_accum) / K0_FP8 + 3 * U_ACC
    return gamma, 2.0 * U_OUT[precision]


def round_inputs(t: torch.Tensor, precision: str) -> torch.Tensor:
    """The values a kernel of this precision multiplies: tf32 rounds fp32 to a 10-bit mantissa
    (to nearest, ties away, like cvt.rna.tf32.f32); other precisions use the stored values.
    Tests pre-round tf32 operands with this so that whatever rounding the kernel does is exact."""
    _check_precision(precision)
    if precision != "tf32":
        return t
    bits = t.contiguous().view(torch.int32)
    finite = torch.isfinite(t.contiguous())
    rounded = ((bits + 0x1000) & ~0x1FFF).view(torch.float32)
    return torch.where(finite, rounded, t.contiguous()).view(t.shape)


def reference(a, b, c=None, alpha=1.0, beta=0.0, precision: str = "fp32") -> torch.Tensor:
    """fp64 alpha * A @ B + beta * C0 from the very values the kernel received (a, b, c as
    stored, in their own dtype and layout). For tf32 the kernel rounds a and b itself: the
    reference keeps the fp32 values and bound() carries that rounding (or pass inputs made with
    round_inputs() and inputs_rounded=True). beta == 0 ignores c entirely (it may hold NaN)."""
    _check_precision(precision)
    ref = torch.mm(a.double(), b.double())
    if alpha != 1.0:
        ref = ref * alpha
    if beta != 0.0:
        if c is None:
            raise ValueError("c is needed when beta != 0")
        ref = ref + beta * c.double()
    return ref


def abs_scale(a, b, c=None, alpha=1.0, beta=0.0) -> torch.Tensor:
    """|alpha| (|A||B|) + |beta| |C0| in fp64: the per-element scale of the rounding errors."""
    s = torch.mm(a.double().abs(), b.double().abs()) * abs(alpha)
    if beta != 0.0 and c is not None:
        s = s + abs(beta) * c.double().abs()
    return s


def rel_error(out, ref) -> float:
    """||out - ref||_F / ||ref||_F in fp64 (||out||_F if ref is all zeros); inf if out has
    NaN/Inf where ref is finite (an element left unwritten or poisoned). A measurement: tensors
    that require grad (a gradient check's) are read detached."""
    o, r = out.detach().double(), ref.detach().double()
    bad = ~torch.isfinite(o) & torch.isfinite(r)
    if bool(bad.any()):
        return math.inf
    finite = torch.isfinite(r)
    diff = torch.where(finite, o - r, torch.zeros_like(r))
    den = float(torch.linalg.vector_norm(torch.where(finite, r, torch.zeros_like(r))))
    num = float(torch.linalg.vector_norm(diff))
    return num / den if den > 0 else num


def nonfinite_mismatch(out, ref) -> int:
    """Elements whose NaN/Inf pattern differs from the reference's (NaN where ref is NaN,
    +Inf where +Inf, ...). An fp16/bf16 output may overflow to Inf where the fp64 ref is
    finite but past the format's range: those count as matching Inf of the same sign."""
    o, r = out.double(), ref.double()
    fmax = torch.finfo(out.dtype).max
    r_stored = torch.where(r.abs() > fmax, torch.sign(r) * math.inf, r)
    same_nan = torch.isnan(o) == torch.isnan(r_stored)
    inf_o, inf_r = torch.isinf(o), torch.isinf(r_stored)
    same_inf = (inf_o == inf_r) & (~inf_o | (torch.sign(o) == torch.sign(r_stored)))
    return int((~(same_nan & same_inf)).sum())


def max_elem_violations(out, ref, scale, precision: str, K: int, *, inputs_rounded=False, fast_accum=False) -> tuple:
    """(number of elements past the elementwise bound, worst ratio error / allowed)."""
    gamma, u_out = max_elem_bound(precision, K, inputs_rounded=inputs_rounded, fast_accum=fast_accum)
    o, r = out.double(), ref.double()
    finite = torch.isfinite(r) & torch.isfinite(scale)
    # + one spacing of the output's subnormals: below its smallest normal a correctly rounded
    # output is off by up to half a subnormal step, not by u_out of its value (fp16 2^-24: a
    # K = 1 product of -1.98e-5 is stored 2.6e-8 away from it, 1.4x the relative allowance)
    f = torch.finfo(out.dtype) if out.dtype.is_floating_point else torch.finfo(torch.float64)
    allowed = gamma * scale + u_out * r.abs() + max(f.smallest_normal * f.eps, torch.finfo(torch.float64).tiny)
    err = (o - r).abs()
    err = torch.where(finite, torch.nan_to_num(err, nan=math.inf), torch.zeros_like(err))
    ratio = err / allowed
    return int((ratio > 1).sum()), float(ratio.max()) if ratio.numel() else 0.0


def check(out, a, b, c0=None, alpha=1.0, beta=0.0, precision: str = "fp32", *,
          inputs_rounded: bool = False, fast_accum: bool = False, ref=None, what: str = "") -> float:
    """Assert that `out` is a correct alpha * A @ B + beta * C0 (c0: C before the call). For fp8
    pass the dequantised operands (study.fp8.dequantize) as a and b.

    Checks: NaN/Inf pattern equal to the reference's, relative Frobenius error within bound(),
    every element within the elementwise bound. Returns the relative error; AssertionError
    with the figures otherwise."""
    K = a.shape[1]
    if ref is None:
        ref = reference(a, b, c0, alpha, beta, precision)
    tag = f"{what}: " if what else ""
    if tuple(out.shape) != tuple(ref.shape):
        raise AssertionError(f"{tag}output shape {tuple(out.shape)} != {tuple(ref.shape)}")
    bad = nonfinite_mismatch(out, ref)
    if bad:
        n_nan = int(torch.isnan(out).sum())
        raise AssertionError(f"{tag}{bad} of {out.numel()} elements differ from the reference in "
                             f"NaN/Inf ({n_nan} NaN in the output: unwritten or poisoned elements?)")
    err = rel_error(out, ref)
    lim = bound(precision, K, inputs_rounded=inputs_rounded, fast_accum=fast_accum)
    if not err <= lim:
        raise AssertionError(f"{tag}relative Frobenius error {err:.3e} > bound {lim:.3e} "
                             f"({precision}, K={K})")
    scale = abs_scale(a, b, c0, alpha, beta)
    n, worst = max_elem_violations(out, ref, scale, precision, K, inputs_rounded=inputs_rounded,
                                   fast_accum=fast_accum)
    if n:
        idx = int(torch.argmax(((out.double() - ref).abs() / (scale + 1e-300)).nan_to_num(0)).item())
        i, j = divmod(idx, out.shape[1])
        raise AssertionError(f"{tag}{n} of {out.numel()} elements past the elementwise bound "
                             f"(worst {worst:.1f}x the allowance, e.g. [{i}, {j}]: "
                             f"{float(out[i, j]):.6g} vs {float(ref[i, j]):.6g}); rel. error {err:.3e}")
    return err


def table(Ks=(1, 64, 1000, 4096, 16384)):
    """The policy as a DataFrame: bound per precision and K (for the reports and the README)."""
    import pandas as pd

    rows = []
    for p in U_IN:
        for K in Ks:
            rows.append({"precision": p, "K": K, "rel_frobenius_bound": bound(p, K),
                         "elementwise_gamma": max_elem_bound(p, K)[0]})
    return pd.DataFrame(rows)
