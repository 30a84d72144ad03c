"""The checks every kernel goes through: the stage tests, the interpreter runs and the tests of
the tests (tests/broken/) all call these same functions, so a check that lets a broken kernel
through fails test_broken.py.

Operands are seeded randn (never zeros), made directly in the kernel's dtype; tf32 operands are
pre-rounded to tf32 (study.tolerance.round_inputs) so that the kernel's own rounding is exact and
the tight bound applies. The output is poisoned with NaN before every run when beta == 0 (every
element must be written, and C must not be read); with beta != 0 it holds random values that
the result must scale.

fp8 (a scaled precision): A and B are seeded randn quantised to e4m3 with study.quantize_fp8,
per tensor or per row of A / column of B (Case.scaling; variants() runs both), the scales go to
the kernel as keywords, C has the kernel's output dtype (bf16), and the reference is the fp64
product of the dequantised operands (study.fp8.dequantize, exact), checked with the fp8 bound of
the kernel's accumulation (tolerance.check(..., fast_accum=kern.fast_accum)). Every fp8 kernel
needs 16-byte rows of its 1-byte operands, so fit_shape() rounds K up to a multiple of 16: the
fp8 cases run at shapes the kernels take (M and N stay ragged) instead of being refused.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

from study import fp8, tolerance
from study.kernels import DTYPES
from study.registry import SCALED

FP8_SCALINGS = fp8.GRANULARITIES   # ("tensor", "row"): scales per tensor, per row of A / column of B
FP8_K_MULTIPLE = 16                # 16-byte rows of 1-byte e4m3 (TMA; torch._scaled_mm alike)

# --- shapes --------------------------------------------------------------------------------
# Interpreter (CPU): ~4 ms per program per K step, so tiny and ragged only; 17x24x40 has N and K
# multiples of 8 (16-byte rows for fp16/bf16, 4 floats for fp32), so the wrappers take their
# vector-hinted path (VEC > 1) with a ragged M. TN stores A as (K, M): 24x40x17 (ragged K) and
# 24x40x56 have the 16-byte rows the TMA stages need there (lda = M), the latter also the
# vector-hinted TN path of the pointer stages (M, N, K multiples of 8).
INTERP_SHAPES = [(1, 1, 1), (1, 19, 23), (17, 1, 23), (17, 19, 1), (17, 19, 23), (17, 24, 40), (33, 47, 65),
                 (24, 40, 17), (24, 40, 56)]
# GPU: degenerate dims, K below any K tile, primes, exact tile multiples, ragged, large K.
GPU_SHAPES = [(1, 1, 1), (1, 131, 257), (127, 1, 257), (127, 131, 1), (67, 45, 3), (67, 45, 7),
              (127, 131, 257), (128, 128, 128), (256, 256, 256), (1000, 1000, 1000)]
GPU_LARGE = [(4095, 4097, 1031), (67, 45, 16384)]
INTERP_AB_SHAPE = (17, 19, 23)
# fp8 on the interpreter: its K blocks are 128 deep (the promotion interval, tolerance.FP8_PROMOTE),
# which the fitted INTERP_SHAPES (K <= 80) never leave: two full blocks and a 16-deep tail.
INTERP_SHAPES_FP8 = [(33, 47, 272)]
GPU_AB_SHAPE = (127, 131, 257)
# Decode shapes (x @ W.T, M tokens against an nn.Linear weight), for the stages that divide K
# among CTAs (s14 on, fp16/bf16): every M the swap-AB tile widths meet (1..256; 8 and 40: token
# tiles TN can store, 16-byte rows of A stored (K, M)), against a ragged weight whose K (4104 =
# 64 x 64 + 8) is no multiple of any split, and shapes that take the other decompositions (4096
# x 4096: equal splits; 1100 x 8192 tiles in 1.5 waves: hybrid; 300 rows: stream-K without
# swapping; 1 x 64 x 72: one CTA; 1104 and 304 rows: the same in TN, whose A is stored (K, M)).
# DECODE_NK_BY_LAYOUT: (N, K) per layout, ragged where the layout's stored rows allow (NT: N;
# NN: neither, B stored (K, N) needs N % 8 == 0; TN: K).
DECODE_MS = (1, 3, 8, 16, 40, 64, 128, 256)
DECODE_NK = (4100, 4104)
DECODE_NK_BY_LAYOUT = {"NT": DECODE_NK, "NN": (4104, 4104), "TN": (4104, 4100)}
DECODE_EXTRA = [(16, 4096, 4096), (256, 4096, 4096), (300, 1000, 520), (1100, 8192, 136), (1, 64, 72),
                (304, 1000, 520), (1104, 8192, 136)]
# alpha/beta combinations: (alpha, beta); beta == 0 runs on a NaN-filled C.
ALPHA_BETA = [(1.0, 0.0), (2.0, 0.0), (-1.5, 0.5), (1.0, 1.0), (0.0, 2.0), (0.0, 0.0), (0.5, -1.0)]


@dataclass
class Case:
    """One run of one kernel: shape, scalars, operand kind, layout and seed."""

    M: int
    N: int
    K: int
    alpha: float = 1.0
    beta: float = 0.0
    seed: int = 0
    ints: bool = False        # small integers: every sum is exact, compare bit for bit
    layout: str = "NN"
    scaling: str = ""         # fp8: "tensor" or "row" (see FP8_SCALINGS); "" = "tensor"
    extra: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        s = f"{self.M}x{self.N}x{self.K}"
        if (self.alpha, self.beta) != (1.0, 0.0):
            s += f"-a{self.alpha:g}b{self.beta:g}"
        if self.ints:
            s += "-int"
        if self.seed:
            s += f"-seed{self.seed}"
        if self.scaling:
            s += f"-{self.scaling}"
        return s


def fit_shape(shape, precision: str) -> tuple:
    """The shape as a kernel of this precision can take it: fp8 rounds K up to a multiple of
    FP8_K_MULTIPLE (K = 0 stays 0); other precisions keep the shape."""
    M, N, K = shape
    if precision in SCALED:
        K = -(-K // FP8_K_MULTIPLE) * FP8_K_MULTIPLE
    return (M, N, K)


def variants(case: Case, precision: str) -> list:
    """The runs a case stands for at this precision: itself, or for fp8 the fitted shape
    (fit_shape) in both scalings (only the one it names if case.scaling is set)."""
    if precision not in SCALED:
        return [case]
    M, N, K = fit_shape((case.M, case.N, case.K), precision)
    return [replace(case, M=M, N=N, K=K, scaling=sc) for sc in ((case.scaling,) if case.scaling else FP8_SCALINGS)]


def int_range(precision: str, K: int) -> int:
    """Largest |value| of integer operands whose sums of K products stay exact in the output
    format: |C| <= K r^2 (+|beta C0|) must stay below 2^(significand bits) of the output."""
    limit = {"fp32": 2**24, "tf32": 2**24, "fp16": 2**11, "bf16": 2**8, "fp8": 2**8}[precision]   # fp8: bf16 out
    r = int(math.isqrt(max(1, limit // (4 * max(K, 1)))))
    return max(1, min(r, 4))


def _fp8_int_scales(M: int, N: int, scaling: str, device) -> tuple:
    """Powers of two for integer fp8 operands (every product and sum stays exact; a kernel that
    ignores a scale, or applies the wrong row's, is off): 0.5 and 0.25 per tensor, per row of A
    2^-(i % 2), per column of B 2^-(1 + j % 3)."""
    if scaling == "row":
        sa = torch.pow(2.0, -(torch.arange(M) % 2).float())
        sb = torch.pow(2.0, -(1 + torch.arange(N) % 3).float())
    else:
        sa, sb = torch.tensor(0.5), torch.tensor(0.25)
    return sa.to(device), sb.to(device)


def _quantize(x: torch.Tensor, scaling: str) -> tuple:
    """study.quantize_fp8, also for empty operands (no absmax: zeros with unit scales)."""
    if x.numel() == 0:
        n = x.shape[0] if scaling == "row" else None
        return x.to(fp8.E4M3), torch.ones(n) if n is not None else torch.ones(())
    return fp8.quantize_fp8(x, scaling)


def out_dtype(kern, precision: str):
    """The dtype of C for this kernel: its own output type for fp8 (Stage.out, bf16 by default),
    the operands' dtype otherwise."""
    if precision in SCALED:
        return getattr(kern, "out_dtype", None) or tolerance.OUT_DTYPE[precision]
    return DTYPES[precision]


def make_operands(case: Case, precision: str, device, c_dtype=None):
    """(a, b, c0, scales): a (M, K) (for TN the transposed view of a contiguous (K, M) tensor),
    b (K, N) (for NT the transposed view of a contiguous (N, K) tensor), c0 (M, N) random (not
    used by the kernel when beta == 0) in c_dtype (default: the operands' dtype; fp8: bf16),
    scales the keyword arguments of the call: {} or, for fp8, {"scale_a", "scale_b"}
    (quantize_fp8 of randn per case.scaling; integer operands are stored exactly in e4m3 with
    power-of-two scales, _fp8_int_scales)."""
    dtype = DTYPES[precision]
    scaled = precision in SCALED
    if c_dtype is None:
        c_dtype = tolerance.OUT_DTYPE[precision] if scaled else dtype
    g = torch.Generator(device="cpu").manual_seed(1000 + case.seed)
    M, N, K = case.M, case.N, case.K

    def rnd(*shape):
        if case.ints:
            r = int_range(precision, K)
            return torch.randint(-r, r + 1, shape, generator=g).float()
        return torch.randn(*shape, generator=g)

    scales = {}
    if scaled:
        scaling = case.scaling or FP8_SCALINGS[0]
        x, w = rnd(M, K), rnd(N, K)   # B's columns are the rows of w: per-row scales of w
        if case.ints:
            a, bt = x.to(fp8.E4M3), w.to(fp8.E4M3)   # |values| <= 4: exact in e4m3
            sa, sb = _fp8_int_scales(M, N, scaling, "cpu")
        else:
            (a, sa), (bt, sb) = _quantize(x, scaling), _quantize(w, scaling)
        if case.layout != "NT":
            bt = bt.t().contiguous()
        if case.layout == "TN":
            a = a.t().contiguous()
        scales = {"scale_a": sa.to(device), "scale_b": sb.to(device)}
    else:
        a = tolerance.round_inputs(rnd(K, M) if case.layout == "TN" else rnd(M, K), precision).to(dtype)
        bt = tolerance.round_inputs(rnd(N, K) if case.layout == "NT" else rnd(K, N), precision).to(dtype)
    c0 = rnd(M, N).to(c_dtype)
    a, bt, c0 = a.to(device), bt.to(device), c0.to(device)
    a = a.t() if case.layout == "TN" else a
    b = bt.t() if case.layout == "NT" else bt
    return a, b, c0, scales


def reference_operands(a, b, scales: dict) -> tuple:
    """(A, B) as the reference multiplies them: the operands themselves, or for fp8 the
    dequantised ones (e4m3 value * scale, exact in fp64)."""
    if not scales:
        return a, b
    return fp8.dequantize(a, scales["scale_a"]), fp8.dequantize(b.t(), scales["scale_b"]).t()


def _sync(t):
    if t.device.type == "cuda":
        torch.cuda.synchronize(t.device)


def run_case(kern, case: Case, precision: str, device, *, ops=None):
    """Run kern on the case's operands (or on ops, a make_operands() result); returns
    (out, A, B, c0) with A, B from reference_operands(). C is NaN-poisoned when beta == 0."""
    if ops is None:
        ops = make_operands(case, precision, device, out_dtype(kern, precision))
    a, b, c0, scales = ops
    c = torch.full_like(c0, math.nan) if case.beta == 0 else c0.clone()
    out = kern(a, b, c, alpha=case.alpha, beta=case.beta, **scales)
    _sync(out)
    if out is not c and out.data_ptr() != c.data_ptr():
        raise AssertionError("the kernel must write into the c it was given and return it")
    return (out, *reference_operands(a, b, scales), c0)


def _fast_accum(kern) -> bool:
    """fp8: the kernel chains FP8 accumulation over all of K (the looser bound applies)."""
    return bool(getattr(kern, "fast_accum", False))


def _what(kern, precision: str, case) -> str:
    fast = " fast_accum" if _fast_accum(kern) else ""
    return f"{getattr(kern, 'name', kern)} {precision}{fast} {case if isinstance(case, str) else case.id}"


def check_case(kern, case: Case, precision: str, device) -> float:
    """Run and check one case (exact for integer inputs, tolerance policy otherwise).
    Returns the relative error; AssertionError on any failure."""
    out, a, b, c0 = run_case(kern, case, precision, device)
    what = _what(kern, precision, case)
    if case.ints:
        ref = tolerance.reference(a, b, c0, case.alpha, case.beta, precision)
        # the exact result is representable in the output format by int_range's construction
        want = ref.to(out.dtype)
        if not torch.equal(out, want):
            diff = (out.double() - want.double()).abs()
            n = int((diff != 0).sum() + torch.isnan(out).sum())
            idx = int(torch.argmax(diff.nan_to_num(math.inf)).item())
            i, j = divmod(idx, out.shape[1])
            raise AssertionError(f"{what}: integer inputs must give the exact result; {n} of "
                                 f"{out.numel()} elements differ, e.g. [{i}, {j}]: "
                                 f"{float(out[i, j])} vs {float(want[i, j])}")
        return 0.0
    return tolerance.check(out, a, b, c0, case.alpha, case.beta, precision,
                           inputs_rounded=(precision == "tf32"), fast_accum=_fast_accum(kern), what=what)


def check_deterministic(kern, case: Case, precision: str, device, runs: int = 4):
    """Bitwise identical output run after run (a moving result is a race)."""
    ops = make_operands(case, precision, device, out_dtype(kern, precision))
    first, *_ = run_case(kern, case, precision, device, ops=ops)
    first = first.clone()
    for i in range(runs - 1):
        out, *_ = run_case(kern, case, precision, device, ops=ops)
        if not torch.equal(torch.nan_to_num(out, nan=7.0), torch.nan_to_num(first, nan=7.0)):
            n = int((out != first).sum())
            raise AssertionError(f"{_what(kern, precision, case)}: run {i + 2} "
                                 f"differs from run 1 in {n} elements (a race?)")


E4M3_NAN = 0x7F   # e4m3fn's NaN bit pattern (it has no infinities)


def check_nonfinite(kern, precision: str, device, layout: str = "NN"):
    """NaN and Inf in A or B propagate to the rows/columns they touch, like the reference.
    fp8: NaN only (e4m3fn has no Inf), in both scalings."""
    for case in variants(Case(37, 29, 41, layout=layout), precision):
        _check_nonfinite(kern, case, precision, device)


def _check_nonfinite(kern, case: Case, precision: str, device):
    a, b, c0, scales = make_operands(case, precision, device, out_dtype(kern, precision))
    scaled = precision in SCALED
    # a and b are fresh tensors in the case's layout: poisoned through their (M, K) / (K, N)
    # views, rows 3 / 7 / 11 of A and column 4 of B whichever way they are stored
    if scaled:
        a.view(torch.uint8)[3, 5] = E4M3_NAN
        b.view(torch.uint8)[6, 4] = E4M3_NAN
    else:
        a[3, 5] = math.nan
        a[7, 2] = math.inf
        a[11, 0] = -math.inf
        b[6, 4] = math.nan
    out, A, B, _ = run_case(kern, case, precision, device, ops=(a, b, c0, scales))
    ref = tolerance.reference(A, B, None, 1.0, 0.0, precision)
    bad = tolerance.nonfinite_mismatch(out, ref)
    if bad:
        raise AssertionError(f"{_what(kern, precision, case)}: {bad} elements differ "
                             f"from the reference in their NaN/Inf pattern")
    finite = torch.isfinite(ref)
    err = tolerance.rel_error(torch.where(finite, out.double(), 0.0), torch.where(finite, ref, 0.0))
    lim = tolerance.bound(precision, case.K, inputs_rounded=(precision == "tf32"), fast_accum=_fast_accum(kern))
    if not err <= lim:
        raise AssertionError(f"{_what(kern, precision, case)}: finite elements off: rel. error {err:.3e} > {lim:.3e}")


def battery(precision: str, layout: str, shapes, ab_shape) -> list:
    """The standard list of cases (the tests of the tests run exactly this list): every shape,
    then the alpha/beta combinations, integer inputs and a second seed on ab_shape; for fp8
    each at its fitted shape in both scalings (variants())."""
    cases = [Case(*s, layout=layout) for s in shapes]
    M, N, K = ab_shape
    cases += [Case(M, N, K, alpha=al, beta=be, layout=layout) for al, be in ALPHA_BETA[1:]]
    cases += [Case(M, N, K, ints=True, layout=layout), Case(M, N, K, seed=1, layout=layout)]
    out = [v for case in cases for v in variants(case, precision)]
    return list({c.id: c for c in out}.values())   # fitting K may make two fp8 shapes one


def failures(kern, precision: str, device, cases) -> list:
    """Run a list of cases; the (case id, message) of each that fails its check."""
    out = []
    for case in cases:
        try:
            check_case(kern, case, precision, device)
        except (AssertionError, ValueError, RuntimeError) as exc:
            out.append((case.id, str(exc).splitlines()[0][:300]))
    return out
