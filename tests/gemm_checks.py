"""The checks every kernel goes through: the stage tests, the interpreter runs and the tests of
the tests (tests/broken/) all call these same functions, so a check that lets a broken kernel
through fails test_broken.py.

Test classes (CLASSES): shapes, alpha_beta, ints, seeds, nonfinite, views, int32 and (GPU only)
deterministic; class_cases() gives each class's cases per platform ("interp": the Triton
interpreter on CPU, tiny shapes; "gpu") and run_cases() runs them into records. Every class runs
on every stage at shapes derived from the stage's own alignment: a case a stage refuses by its
declared limits is run with the offending dimensions rounded up (fit_case(): the dimensions its
layout stores as rows, to alignment(), e.g. 8 halves or 4 floats for 16-byte rows) rather than
skipped; only a refusal of the fitted case is one (a failure, except views of unaligned storage
and a GPU that lacks the stage's shared memory).

Operands are seeded randn (never zeros), made directly in the kernel's dtype; tf32 operands are
pre-rounded to tf32 (study.tolerance.round_inputs) so that the kernel's own rounding is exact and
the tight bound applies. Case.a_view / b_view place an operand inside a larger buffer (offset,
padded leading dimension of odd or aligned width, or a leading dimension near int32's limit).

Guard bands: C is always a view inside a larger buffer (GuardedC): a canary row before it, canary
columns after N (ldc padded by the alignment unless Case.c_view says otherwise: "tight" is C's
storage as a contiguous tensor with the canary right after it) and canary rows after M, all
holding a sentinel; after every call a changed canary fails the case (check "guard"), so a store
to rows >= M or columns >= N is caught even where the result is right. C itself is poisoned with
NaN before every run when beta == 0 (every element must be written, and C must not be read); with
beta != 0 it holds random values that the result must scale.

Failures are CheckFailure (an AssertionError) naming the check that caught them: "numeric" (the
tolerance policy, NaN pattern included), "exact" (integer inputs), "nonfinite" (NaN/Inf
propagation), "guard", "deterministic", "contract" (the kernel must write into the c it was
given). tests/broken/ fixtures declare per class which check must catch them.

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
import re
import subprocess
import time
import traceback
from dataclasses import dataclass, field, replace

import torch

from study import build, fp8, tolerance
from study.kernels import DTYPES
from study.operands import INT32_MAX
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
# The views class: a ragged shape, and the same rounded up to the stage's alignment in every
# dimension (where the vector-hinted pointer paths run, and so see the padded leading dimension).
VIEW_SHAPE = {"interp": (17, 19, 23), "gpu": (67, 45, 77)}
NONFINITE_SHAPE = (37, 29, 41)
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
DECODE_EXTRA = [(16, 4096, 4096), (256, 4096, 4096), (300, 1000, 2056), (1100, 8192, 136), (1, 64, 72),
                (304, 1000, 2056), (1104, 8192, 136),
                # CUDA s14's one-wave weight tiles, 64 / 88 / 112 / 168 rows, ragged N (and M)
                (250, 4000, 1000), (100, 11001, 520), (120, 14300, 264), (200, 11001, 264),
                # the 64-row one's two k boxes per stage, the last one wholly past K (15 boxes)
                (250, 4000, 936),
                # the same with 16-byte C rows (N % 8 == 0): their staged epilogue, ragged M
                (100, 11008, 520), (120, 14336, 264), (200, 11008, 264),
                # Triton s14's wide tiles of 128 + 128 and 128 + 64 + 32 rows
                (200, 14300, 264), (200, 13001, 264),
                # Triton s14's data-parallel 128-row weight tiles, one token tile (16 / 32 / 64 wide)
                (1, 11001, 520), (24, 11000, 1000), (40, 14300, 264),
                # Triton s14's 128-row x 64-token tiles, two per SM (100 x 11001 / 120 x 14300 above: one 128-row dot)
                (100, 9001, 520),
                # Triton s14's part-filled last token tile (M = 129-256), 128- and 64-row weight tiles
                (136, 4100, 520), (160, 2050, 264),
                # Triton s14's masked x loads in the part-filled 128-token tile (K a multiple of 16):
                # swapped stream-K, wide tiles
                (72, 4100, 528), (129, 11008, 272)]
# alpha/beta combinations: (alpha, beta); beta == 0 runs on a NaN-filled C.
ALPHA_BETA = [(1.0, 0.0), (2.0, 0.0), (-1.5, 0.5), (1.0, 1.0), (0.0, 2.0), (0.0, 0.0), (0.5, -1.0)]

# --- test classes and the checks that fail them ----------------------------------------------
CLASSES = ("shapes", "alpha_beta", "ints", "seeds", "nonfinite", "views", "int32", "deterministic")
PLATFORM_CLASSES = {"interp": CLASSES[:-1], "gpu": CLASSES}   # the interpreter is deterministic
CHECKS = ("numeric", "exact", "nonfinite", "guard", "deterministic", "contract")

# The dimensions each layout stores as rows (16-byte row limits fall on them): A (M, K) or TN's
# (K, M), B (K, N) or NT's (N, K); fit_case() rounds these up, nothing else.
FIT_DIMS = {"NN": ("K", "N"), "NT": ("K",), "TN": ("M", "N")}
# Operand and C views (Case.a_view / b_view / c_view); a refusal of the unaligned ones is allowed
# to a stage that declares limits, every other must run (aligned rows are within every stage's).
OPERAND_VIEWS = ("offset", "padded-odd", "padded-aligned", "offset-aligned", "huge-ld")
C_VIEWS = ("padded", "tight", "offset", "padded-odd", "padded-aligned", "huge-ld")
UNALIGNED_VIEWS = ("offset", "padded-odd")
GUARD_ROWS = 16        # canary rows after M (>= the 16-row tiles of the fixtures; see GuardedC)
HUGE_ROWS = {"a": 3, "b": 3, "c": 16}   # rows stored by the int32 class's huge-ld operand / C
SENTINEL = -777.0      # canary value (the comparison is bitwise against a snapshot)


class CheckFailure(AssertionError):
    """A case failed a check: .check names which (CHECKS)."""

    def __init__(self, check: str, message: str):
        super().__init__(message)
        self.check = check


@dataclass
class Case:
    """One run of one kernel: shape, scalars, operand kind, layout, seed and storage views."""

    M: int
    N: int
    K: int
    alpha: float = 1.0
    beta: float = 0.0
    seed: int = 0
    ints: bool = False        # small integers: every sum is exact, compare bit for bit
    layout: str = "NN"
    scaling: str = ""         # fp8: "tensor" or "row" (see FP8_SCALINGS); "" = "tensor"
    a_view: str = ""          # "" (contiguous) or one of OPERAND_VIEWS: how A is stored
    b_view: str = ""          # the same for B
    c_view: str = "padded"    # one of C_VIEWS: C's place in its guarded buffer
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
        for name, view in (("a", self.a_view), ("b", self.b_view)):
            if view:
                s += f"-{name}:{view}"
        if self.c_view != "padded":
            s += f"-c:{self.c_view}"
        return s


def host_program(source: str, directory):
    """Compile `source` (a host program that #includes a CUDA stage file to call its host-side
    heuristics) with the build's flags into `directory`; the stage's kernels go to PTX only, so
    this takes seconds, not a full build. Returns the executable's path."""
    src, exe = directory / "prog.cu", directory / "prog"
    src.write_text(source)
    cmd = ["nvcc", *build.NVCC_FLAGS, *build.TORCH_NVCC_DEFINES, "-gencode=arch=compute_90a,code=compute_90a",
           f"-I{build.CUDA_DIR}", "-o", str(exe), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return exe


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


def _up(x: int, m: int) -> int:
    return -(-x // m) * m


def alignment(kern, precision: str) -> int:
    """Elements per 16-byte row chunk of the operands (4 fp32/tf32, 8 fp16/bf16, 16 fp8), or the
    'multiples of N' the stage's header Limits ask for where that is more."""
    n = 16 // DTYPES[precision].itemsize
    stage = getattr(kern, "stage", None)
    for m in re.findall(r"multiples? of (\d+)", stage.limits if stage is not None else ""):
        n = max(n, int(m))
    return n


def declares_limits(kern) -> bool:
    """The kernel may refuse problems: a stage whose header Limits are not 'none', or a baseline."""
    stage = getattr(kern, "stage", None)
    return stage is None or not stage.limits.lower().startswith("none")


def fit_case(case: Case, align: int) -> Case:
    """The case with the dimensions its layout stores as rows (FIT_DIMS) rounded up to `align`."""
    return replace(case, **{d: _up(getattr(case, d), align) for d in FIT_DIMS[case.layout]})


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


def _view_layout(kind: str, rows: int, cols: int, align: int) -> tuple:
    """(storage offset, leading dimension) of a (rows, cols) row-major view of kind `kind`:
    offset by one element (misaligned base); padded to an odd leading dimension (+9); padded to
    an aligned one (cols rounded up to `align`, + align); offset by `align` elements (a 16-byte
    aligned base that is not the allocation's) with an aligned padded leading dimension; or the
    largest aligned leading dimension whose offsets, one row past the end included, fit int32
    (study.operands.check_int32: rows * ld <= INT32_MAX)."""
    up = _up(cols, align)
    return {"offset": (1, cols + 9), "padded-odd": (0, cols + 9), "padded-aligned": (0, up + align),
            "offset-aligned": (align, up + 2 * align),
            "huge-ld": (0, max(cols, INT32_MAX // max(rows, 1) // align * align))}[kind]


def _place(t: torch.Tensor, kind: str, align: int, device, seed: int) -> torch.Tensor:
    """A copy of the row-major tensor t (on the CPU) as a view of kind `kind` (_view_layout) on
    `device`; "" gives t itself, moved. Padding holds seeded randn values (finite: a kernel that
    reads it by mistake gives a wrong result); a huge-ld buffer is left unwritten between rows
    (its size is ~2^31 elements: only the view's rows are touched, on the CPU not even allocated)."""
    if not kind:
        return t.to(device)
    rows, cols = t.shape
    off, ld = _view_layout(kind, rows, cols, align)
    size = off + (rows - 1) * ld + cols if rows else off
    if kind == "huge-ld":
        buf = torch.empty(size, dtype=t.dtype, device=device)
    else:
        g = torch.Generator(device="cpu").manual_seed(7000 + seed)
        buf = torch.randn(size, generator=g).to(t.dtype).to(device)
    view = buf.as_strided((rows, cols), (ld, 1), off)
    view.copy_(t.to(device))
    return view


def make_operands(case: Case, precision: str, device, c_dtype=None, align: int | None = None):
    """(a, b, c0, scales): a (M, K) (for TN the transposed view of a contiguous (K, M) tensor),
    b (K, N) (for NT the transposed view of a contiguous (N, K) tensor), c0 (M, N) random (not
    used by the kernel when beta == 0) in c_dtype (default: the operands' dtype; fp8: bf16),
    scales the keyword arguments of the call: {} or, for fp8, {"scale_a", "scale_b"}
    (quantize_fp8 of randn per case.scaling; integer operands are stored exactly in e4m3 with
    power-of-two scales, _fp8_int_scales). case.a_view / b_view place the stored tensor inside a
    larger buffer (_place), aligned to `align` elements (default: 16 bytes of the dtype); the
    values are those of the contiguous case."""
    dtype = DTYPES[precision]
    align = align or 16 // dtype.itemsize
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
    a = _place(a, case.a_view, align, device, case.seed)
    bt = _place(bt, case.b_view, align, device, case.seed + 1)
    c0 = c0.to(device)
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


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class GuardedC:
    """C (M, N) as a view inside a larger buffer whose other elements are canaries (SENTINEL),
    snapshotted before the call and compared bitwise after it (check()).

    kind (Case.c_view): "padded" ldc = N + align (the default: ldc % align == N % align, so the
    kernel sees the alignment a contiguous C would have), "tight" ldc = N (C's storage exactly
    as a contiguous tensor, the canaries right before and after it), "offset" (base one element
    in, ldc = N + 9), "padded-odd" (ldc = N + 9), "padded-aligned" (ldc = N rounded up to align,
    + align). Canaries: one row before C, the columns after N of each row, and GUARD_ROWS rows
    (+ enough to hold a 16-column overrun of a narrow C) after M. "huge-ld": ldc as large as
    int32 offsets allow (the int32 class): canaries are 64 elements after N in each row only."""

    def __init__(self, init: torch.Tensor, kind: str, align: int):
        M, N = init.shape
        dev, dt = init.device, init.dtype
        if kind == "huge-ld":
            ldc = _view_layout(kind, M, N, align)[1]
            pad = 64
            self.buf = torch.empty((M - 1) * ldc + N + pad, dtype=dt, device=dev)
            self.c = self.buf.as_strided((M, N), (ldc, 1), 0)
            self.canaries = [self.buf.as_strided((M, pad), (ldc, 1), N)]
            self.where = lambda i, j: f"C[{i}, {N + j}] (past N)"
            self.canaries[0].fill_(SENTINEL)
        else:
            off, width = {"padded": (0, N + align), "tight": (0, N), "offset": (1, N + 9),
                          "padded-odd": (0, N + 9), "padded-aligned": (0, _up(N, align) + align)}[kind]
            rows = 1 + M + GUARD_ROWS + -(-2 * GUARD_ROWS // width)
            self.buf = torch.full((rows, width), SENTINEL, dtype=dt, device=dev)
            self.c = self.buf[1:1 + M, off:off + N]
            # (canary, its first element's (row, column) relative to C, where it is)
            parts = [(self.buf[:1], -1, -off, "the row before C"), (self.buf[1:1 + M, :off], 0, -off, "before column 0"),
                     (self.buf[1:1 + M, off + N:], 0, N, "past N"), (self.buf[1 + M:], M, -off, "past M")]
            self.canaries = [p[0] for p in parts]
            self._where = [p[1:] for p in parts]
            self.where = None
        self.c.copy_(init)
        self.snapshot = [v.clone() for v in self.canaries]

    def check(self, what: str):
        """CheckFailure("guard") if any canary changed."""
        total, first = 0, None
        for idx, (now, before) in enumerate(zip(self.canaries, self.snapshot)):
            if now.numel() == 0:
                continue
            bits = _BITS[now.element_size()]
            diff = now.view(bits) != before.view(bits)
            n = int(diff.sum())
            if n and first is None:
                i, j = (int(x) for x in diff.nonzero()[0])
                if self.where is not None:
                    at = self.where(i, j)
                else:
                    r0, c0, name = self._where[idx]
                    at = f"C[{r0 + i}, {c0 + j}] ({name})"
                first = f"{at}: {float(now[i, j])} (was {float(before[i, j])})"
            total += n
        if total:
            raise CheckFailure("guard", f"{what}: wrote outside C: {total} canary element(s) changed, "
                                        f"the first at {first}")


def run_case(kern, case: Case, precision: str, device, *, ops=None):
    """Run kern on the case's operands (or on ops, a make_operands() result) with C inside a
    guard band (GuardedC, checked after the call); returns (out, A, B, c0) with A, B from
    reference_operands(). C is NaN-poisoned when beta == 0."""
    align = alignment(kern, precision)
    if ops is None:
        ops = make_operands(case, precision, device, out_dtype(kern, precision), align)
    a, b, c0, scales = ops
    guarded = GuardedC(torch.full_like(c0, math.nan) if case.beta == 0 else c0, case.c_view, align)
    c = guarded.c
    out = kern(a, b, c, alpha=case.alpha, beta=case.beta, **scales)
    _sync(out)
    if out is not c and out.data_ptr() != c.data_ptr():
        raise CheckFailure("contract", "the kernel must write into the c it was given and return it")
    guarded.check(_what(kern, precision, case))
    return (out, *reference_operands(a, b, scales), c0)


def _fast_accum(kern) -> bool:
    """fp8: the kernel chains FP8 accumulation over all of K (the looser bound applies)."""
    return bool(getattr(kern, "fast_accum", False))


def _what(kern, precision: str, case) -> str:
    fast = " fast_accum" if _fast_accum(kern) else ""
    return f"{getattr(kern, 'name', kern)} {precision}{fast} {case if isinstance(case, str) else case.id}"


def check_case(kern, case: Case, precision: str, device) -> float:
    """Run and check one case (exact for integer inputs, tolerance policy otherwise).
    Returns the relative error; CheckFailure (an AssertionError) on any failure."""
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
            raise CheckFailure("exact", f"{what}: integer inputs must give the exact result; {n} of "
                                        f"{out.numel()} elements differ, e.g. [{i}, {j}]: "
                                        f"{float(out[i, j])} vs {float(want[i, j])}")
        return 0.0
    try:
        return tolerance.check(out, a, b, c0, case.alpha, case.beta, precision,
                               inputs_rounded=(precision == "tf32"), fast_accum=_fast_accum(kern), what=what)
    except CheckFailure:
        raise
    except AssertionError as exc:
        raise CheckFailure("numeric", str(exc)) from None


def run_fitted(kern, case: Case, precision: str, device, check=None) -> Case:
    """check(kern, case, precision, device) (default check_case); if the kernel refuses the case
    by its declared limits (ValueError), the case again at fit_case()'s shape. Returns the case
    that ran; a refusal of the fitted case (or of a case fitting does not change) propagates."""
    check = check or check_case
    try:
        check(kern, case, precision, device)
        return case
    except ValueError:
        fitted = fit_case(case, alignment(kern, precision))
        if not declares_limits(kern) or fitted == case:
            raise
    check(kern, fitted, precision, device)
    return fitted


def check_deterministic(kern, case: Case, precision: str, device, runs: int = 4):
    """Bitwise identical output run after run (a moving result is a race)."""
    ops = make_operands(case, precision, device, out_dtype(kern, precision), alignment(kern, precision))
    first, *_ = run_case(kern, case, precision, device, ops=ops)
    first = first.clone()
    for i in range(runs - 1):
        out, *_ = run_case(kern, case, precision, device, ops=ops)
        if not torch.equal(torch.nan_to_num(out, nan=7.0), torch.nan_to_num(first, nan=7.0)):
            n = int((out != first).sum())
            raise CheckFailure("deterministic", f"{_what(kern, precision, case)}: run {i + 2} "
                                                f"differs from run 1 in {n} elements (a race?)")


E4M3_NAN = 0x7F   # e4m3fn's NaN bit pattern (it has no infinities)


def check_nonfinite(kern, precision: str, device, layout: str = "NN"):
    """NaN and Inf in A or B propagate to the rows/columns they touch, like the reference
    (at the fitted shape where the stage refuses NONFINITE_SHAPE). fp8: NaN only (e4m3fn has
    no Inf), in both scalings."""
    for case in variants(Case(*NONFINITE_SHAPE, layout=layout), precision):
        run_fitted(kern, case, precision, device, check=check_nonfinite_case)


def check_nonfinite_case(kern, case: Case, precision: str, device):
    """One NaN/Inf propagation case (check_nonfinite); CheckFailure("nonfinite") on failure."""
    a, b, c0, scales = make_operands(case, precision, device, out_dtype(kern, precision), alignment(kern, precision))
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
        raise CheckFailure("nonfinite", f"{_what(kern, precision, case)}: {bad} elements differ "
                                        f"from the reference in their NaN/Inf pattern")
    finite = torch.isfinite(ref)
    err = tolerance.rel_error(torch.where(finite, out.double(), 0.0), torch.where(finite, ref, 0.0))
    lim = tolerance.bound(precision, case.K, inputs_rounded=(precision == "tf32"), fast_accum=_fast_accum(kern))
    if not err <= lim:
        raise CheckFailure("nonfinite", f"{_what(kern, precision, case)}: finite elements off: "
                                        f"rel. error {err:.3e} > {lim:.3e}")


# --- the classes' cases ------------------------------------------------------------------------

def _view_cases(platform: str, layout: str, align: int) -> list:
    """Views of A, B and C at VIEW_SHAPE (ragged) and at it rounded up to `align` in every
    dimension: misaligned and odd-padded storage (may be refused), aligned padded leading
    dimensions (must run: vector-hinted and TMA paths see an ld that is not the row length),
    a 16-byte aligned base that is not the allocation's. beta == 0 (NaN C) for operand views;
    C views with beta = 0.5, alpha = 1.5 (C is read through the view too)."""
    ragged = VIEW_SHAPE[platform]
    aligned = tuple(_up(x, align) for x in ragged)
    cases = []
    for name in ("a", "b"):
        for shape, views in ((ragged, ("offset", "padded-odd", "padded-aligned")),
                             (aligned, ("padded-aligned", "offset-aligned"))):
            cases += [Case(*shape, layout=layout, **{f"{name}_view": v}) for v in views]
    for shape, views in ((ragged, ("offset", "padded-odd", "padded-aligned")), (aligned, ("padded-aligned",))):
        cases += [Case(*shape, alpha=1.5, beta=0.5, layout=layout, c_view=v) for v in views]
    return cases


def _int32_cases(layout: str, align: int) -> list:
    """A, B and C in turn with a leading dimension so large that the last row's offsets reach
    int32's limit (HUGE_ROWS rows stored, ld ~ INT32_MAX / rows; ~2^31 elements of virtual
    storage, of which only the rows are written): the kernel's address arithmetic at the edge
    study.operands.check_int32 allows. The other dimensions are small multiples of `align`
    (vector paths run); C's case with beta != 0, so C is read there too."""
    w = 2 * align
    a_rows = {"M": HUGE_ROWS["a"], "K": 2 * w, "N": w} if layout != "TN" else {"M": w, "K": HUGE_ROWS["a"], "N": w}
    b_rows = {"M": w, "K": HUGE_ROWS["b"], "N": w} if layout != "NT" else {"M": w, "K": 2 * w, "N": HUGE_ROWS["b"]}
    return [Case(**a_rows, layout=layout, a_view="huge-ld"), Case(**b_rows, layout=layout, b_view="huge-ld"),
            Case(HUGE_ROWS["c"], w, 2 * w, beta=0.5, seed=1, layout=layout, c_view="huge-ld")]


def class_cases(cls: str, platform: str, precision: str, layout: str, align: int) -> list:
    """The cases of test class `cls` on `platform` ("interp" or "gpu") for a kernel of this
    precision in `layout` whose alignment() is `align`; fp8 cases at their variants()."""
    gpu = platform == "gpu"
    ab = GPU_AB_SHAPE if gpu else INTERP_AB_SHAPE
    if cls == "shapes":
        shapes = GPU_SHAPES + GPU_LARGE if gpu else INTERP_SHAPES + (INTERP_SHAPES_FP8 if precision in SCALED else [])
        cases = [Case(*s, layout=layout) for s in shapes]
    elif cls == "alpha_beta":
        cases = [Case(*ab, alpha=al, beta=be, layout=layout) for al, be in ALPHA_BETA[1:]]
    elif cls == "ints":   # a contiguous C ("tight") for the plain one
        cases = [Case(*ab, ints=True, layout=layout, c_view="tight"),
                 Case(*ab, ints=True, alpha=2.0, beta=-1.0, layout=layout)]
        cases += [Case(256, 256, 64, ints=True, layout=layout)] if gpu else []
    elif cls == "seeds":
        shape, seeds = ((257, 263, 509), (1, 2, 3)) if gpu else (ab, (1,))
        cases = [Case(*shape, seed=s, layout=layout, c_view="tight") for s in seeds]
    elif cls == "nonfinite":
        cases = [Case(*NONFINITE_SHAPE, layout=layout)]
    elif cls == "views":
        cases = _view_cases(platform, layout, align)
    elif cls == "int32":
        cases = _int32_cases(layout, align)
    elif cls == "deterministic":
        cases = [Case(1000, 1000, 1000, layout=layout, c_view="tight", extra={"runs": 3}),
                 Case(513, 769, 2049, beta=0.5, layout=layout, extra={"runs": 2})] if gpu else []
    else:
        raise ValueError(f"cls must be one of {CLASSES}, got {cls!r}")
    out = [v for case in cases for v in variants(case, precision)]
    return list({c.id: c for c in out}.values())   # fitting K may make two fp8 shapes one


def _class_check(cls: str):
    """The check function of a class: check_case, or the nonfinite / deterministic checks."""
    if cls == "nonfinite":
        return check_nonfinite_case
    if cls == "deterministic":
        return lambda k, case, p, dev: check_deterministic(k, case, p, dev, runs=case.extra.get("runs", 3))
    return check_case


def refusal_allowed(kern, case: Case) -> bool:
    """A refusal (after fitting) that is no failure: storage no stage need take (an unaligned
    view of A, B or C) refused by a stage that declares limits."""
    unaligned = {case.a_view, case.b_view, case.c_view} & set(UNALIGNED_VIEWS)
    return bool(unaligned) and declares_limits(kern)


def run_cases(kern, cls: str, cases, precision: str, device) -> list:
    """Run a class's cases and return one record per case: {"class", "case" (its id), "ran" (the
    fitted case's id where the case was refused and fit_case() ran instead, else ""), "status":
    pass | fail | refused | skip, "check" (one of CHECKS when a check failed it), "error" (the
    exception's type), "message", "seconds"}. A refused unaligned view (refusal_allowed) is
    "refused"; a GPU without the stage's shared memory a "skip"; every other refusal of a
    fitted case, and any exception other than a CheckFailure, a failure. A case (or fitted case)
    already run is not run again: its record is repeated."""
    check = _class_check(cls)
    align = alignment(kern, precision)
    out, seen = [], {}
    for case in cases:
        base = {"class": cls, "case": case.id}
        if (case.id, case.layout) in seen:
            out.append({**seen[(case.id, case.layout)], **base, "seconds": 0.0})
            continue
        rec = {**base, "ran": "", "status": "pass", "check": "", "error": "", "message": "", "seconds": 0.0}
        t = time.perf_counter()
        ran = case
        try:
            try:
                check(kern, case, precision, device)
            except ValueError:
                fitted = fit_case(case, align)
                if not declares_limits(kern) or fitted == case:
                    raise
                ran = fitted
                if (fitted.id, fitted.layout) not in seen:
                    check(kern, fitted, precision, device)
        except CheckFailure as exc:
            rec.update(status="fail", check=exc.check, error="CheckFailure", message=str(exc))
        except ValueError as exc:
            status = "refused" if refusal_allowed(kern, case) else \
                "skip" if "shared memory" in str(exc) else "fail"
            rec.update(status=status, error="ValueError", message=f"ValueError: {exc}")
        except Exception as exc:  # noqa: BLE001 (an AssertionError not from a check, a crash: this case's failure)
            rec.update(status="fail", error=type(exc).__name__,
                       message=f"{type(exc).__name__}: {exc}\n" + traceback.format_exc(limit=4)[-1500:])
        if ran is not case:
            rec["ran"] = ran.id
            if (ran.id, ran.layout) in seen and rec["status"] == "pass":   # fitted to a case already run
                rec.update({k: v for k, v in seen[(ran.id, ran.layout)].items() if k not in ("class", "case", "ran")})
        rec["seconds"] = round(time.perf_counter() - t, 3)
        rec["message"] = rec["message"][:2000]
        seen[(case.id, case.layout)] = seen.setdefault((ran.id, ran.layout), rec)
        out.append(rec)
        if cls == "int32" and str(device).startswith("cuda"):
            torch.cuda.empty_cache()   # ~2^31-element buffers: give them back before the next
    return out


def class_problems(records, cls: str) -> list:
    """What is wrong with a real kernel's records of one class: failures, and no case run."""
    recs = [r for r in records if r["class"] == cls]
    bad = [f"{r['case']}{' (ran ' + r['ran'] + ')' if r['ran'] else ''}: {r['message'][:600]}"
           for r in recs if r["status"] == "fail"]
    if not bad and recs and not any(r["status"] == "pass" for r in recs) and \
            not all(r["status"] == "skip" for r in recs):
        bad.append(f"no case of class {cls} ran: " + "; ".join(f"{r['case']}: {r['status']} {r['message'][:200]}"
                                                              for r in recs))
    if not recs:
        bad.append(f"no case of class {cls} ran (none recorded)")
    return bad
