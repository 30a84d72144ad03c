"""The checks every kernel goes through: the stage tests, the interpreter runs and the tests of
the tests (tests/broken/) all call these same functions, so a check that lets a broken kernel
through fails test_broken.py.

Operands are seeded randn (never zeros), made directly in the kernel's dtype; tf32 operands are
pre-rounded to tf32 (study.tolerance.round_inputs) so that the kernel's own rounding is exact and
the tight bound applies. The output is poisoned with NaN before every run when beta == 0 (every
element must be written, and C must not be read); with beta != 0 it holds random values that
the result must scale.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from study import tolerance
from study.kernels import DTYPES

# --- shapes --------------------------------------------------------------------------------
# Interpreter (CPU): ~4 ms per program per K step, so tiny and ragged only; 17x24x40 has N and K
# multiples of 8 (16-byte rows for fp16/bf16, 4 floats for fp32), so the wrappers take their
# vector-hinted path (VEC > 1) with a ragged M.
INTERP_SHAPES = [(1, 1, 1), (1, 19, 23), (17, 1, 23), (17, 19, 1), (17, 19, 23), (17, 24, 40), (33, 47, 65)]
# GPU: degenerate dims, K below any K tile, primes, exact tile multiples, ragged, large K.
GPU_SHAPES = [(1, 1, 1), (1, 131, 257), (127, 1, 257), (127, 131, 1), (67, 45, 3), (67, 45, 7),
              (127, 131, 257), (128, 128, 128), (256, 256, 256), (1000, 1000, 1000)]
GPU_LARGE = [(4095, 4097, 1031), (67, 45, 16384)]
INTERP_AB_SHAPE = (17, 19, 23)
GPU_AB_SHAPE = (127, 131, 257)
# Decode shapes (x @ W.T, M tokens against an nn.Linear weight), for the stages that divide K
# among CTAs (s14 on, NT fp16/bf16): every M the swap-AB tile widths meet (1..256), against a
# ragged weight whose K (4104 = 64 x 64 + 8) is no multiple of any split, and shapes that take
# the other decompositions (4096 x 4096: equal splits; 1100 x 8192 tiles in 1.5 waves: hybrid;
# 300 rows: stream-K without swapping; 1 x 64 x 72: one CTA).
DECODE_MS = (1, 3, 16, 64, 128, 256)
DECODE_NK = (4100, 4104)
DECODE_EXTRA = [(16, 4096, 4096), (256, 4096, 4096), (300, 1000, 520), (1100, 8192, 136), (1, 64, 72)]
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
        return s


def int_range(precision: str, K: int) -> int:
    """Largest |value| of integer operands whose sums of K products stay exact in the output
    format: |C| <= K r^2 (+|beta C0|) must stay below 2^(significand bits) of the output."""
    limit = {"fp32": 2**24, "tf32": 2**24, "fp16": 2**11, "bf16": 2**8}[precision]
    r = int(math.isqrt(max(1, limit // (4 * max(K, 1)))))
    return max(1, min(r, 4))


def make_operands(case: Case, precision: str, device):
    """(a, b, c0): a (M, K), b (K, N) (for NT the transposed view of a contiguous (N, K)
    tensor), c0 (M, N) random (not used by the kernel when beta == 0)."""
    dtype = DTYPES[precision]
    g = torch.Generator(device="cpu").manual_seed(1000 + case.seed)
    M, N, K = case.M, case.N, case.K

    def rnd(*shape):
        if case.ints:
            r = int_range(precision, K)
            return torch.randint(-r, r + 1, shape, generator=g).float()
        return torch.randn(*shape, generator=g)

    a = tolerance.round_inputs(rnd(M, K), precision).to(dtype)
    bt = tolerance.round_inputs(rnd(N, K) if case.layout == "NT" else rnd(K, N), precision).to(dtype)
    c0 = rnd(M, N).to(dtype)
    a, bt, c0 = a.to(device), bt.to(device), c0.to(device)
    b = bt.t() if case.layout == "NT" else bt
    return a, b, c0


def _sync(t):
    if t.device.type == "cuda":
        torch.cuda.synchronize(t.device)


def run_case(kern, case: Case, precision: str, device, *, a=None, b=None, c0=None):
    """Run kern on the case's operands; returns (out, a, b, c0). C is NaN-poisoned when
    beta == 0."""
    if a is None:
        a, b, c0 = make_operands(case, precision, device)
    c = torch.full_like(c0, math.nan) if case.beta == 0 else c0.clone()
    out = kern(a, b, c, alpha=case.alpha, beta=case.beta)
    _sync(out)
    if out is not c and out.data_ptr() != c.data_ptr():
        raise AssertionError("the kernel must write into the c it was given and return it")
    return out, a, b, c0


def check_case(kern, case: Case, precision: str, device) -> float:
    """Run and check one case (exact for integer inputs, tolerance policy otherwise).
    Returns the relative error; AssertionError on any failure."""
    out, a, b, c0 = run_case(kern, case, precision, device)
    what = f"{getattr(kern, 'name', kern)} {precision} {case.id}"
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
                           inputs_rounded=(precision == "tf32"), what=what)


def check_deterministic(kern, case: Case, precision: str, device, runs: int = 4):
    """Bitwise identical output run after run (a moving result is a race)."""
    a, b, c0 = make_operands(case, precision, device)
    first, *_ = run_case(kern, case, precision, device, a=a, b=b, c0=c0)
    first = first.clone()
    for i in range(runs - 1):
        out, *_ = run_case(kern, case, precision, device, a=a, b=b, c0=c0)
        if not torch.equal(torch.nan_to_num(out, nan=7.0), torch.nan_to_num(first, nan=7.0)):
            n = int((out != first).sum())
            raise AssertionError(f"{getattr(kern, 'name', kern)} {precision} {case.id}: run {i + 2} "
                                 f"differs from run 1 in {n} elements (a race?)")


def check_nonfinite(kern, precision: str, device, layout: str = "NN"):
    """NaN and Inf in A or B propagate to the rows/columns they touch, like the reference."""
    case = Case(37, 29, 41, layout=layout)
    a, b, c0 = make_operands(case, precision, device)
    a = a.clone()
    a[3, 5] = math.nan
    a[7, 2] = math.inf
    a[11, 0] = -math.inf
    bb = (b.t().contiguous().clone() if layout == "NT" else b.clone())
    if layout == "NT":
        bb[4, 6] = math.nan          # (N, K) storage: column 4 of B
        b = bb.t()
    else:
        bb[6, 4] = math.nan
        b = bb
    out, *_ = run_case(kern, case, precision, device, a=a, b=b, c0=c0)
    ref = tolerance.reference(a, b, None, 1.0, 0.0, precision)
    bad = tolerance.nonfinite_mismatch(out, ref)
    if bad:
        raise AssertionError(f"{getattr(kern, 'name', kern)} {precision}: {bad} elements differ "
                             f"from the reference in their NaN/Inf pattern")
    finite = torch.isfinite(ref)
    err = tolerance.rel_error(torch.where(finite, out.double(), 0.0), torch.where(finite, ref, 0.0))
    lim = tolerance.bound(precision, case.K, inputs_rounded=(precision == "tf32"))
    if not err <= lim:
        raise AssertionError(f"finite elements off: rel. error {err:.3e} > {lim:.3e}")


def battery(precision: str, layout: str, shapes, ab_shape) -> list:
    """The standard list of cases (the tests of the tests run exactly this list): every shape,
    then the alpha/beta combinations, integer inputs and a second seed on ab_shape."""
    cases = [Case(*s, layout=layout) for s in shapes]
    M, N, K = ab_shape
    cases += [Case(M, N, K, alpha=al, beta=be, layout=layout) for al, be in ALPHA_BETA[1:]]
    cases += [Case(M, N, K, ints=True, layout=layout), Case(M, N, K, seed=1, layout=layout)]
    return cases


def failures(kern, precision: str, device, cases) -> list:
    """Run a list of cases; the (case id, message) of each that fails its check."""
    out = []
    for case in cases:
        try:
            check_case(kern, case, precision, device)
        except (AssertionError, ValueError, RuntimeError) as exc:
            out.append((case.id, str(exc).splitlines()[0][:300]))
    return out
