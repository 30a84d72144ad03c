"""Timing and checking one GEMM on the GPU: inputs, fp64 reference, L2 flush, events, graphs.

The rules (DESIGN.md "Measuring"):
- inputs are seeded randn scaled by K**-0.25 each, so every output element has variance ~1;
  fp8 quantises them (fp8.quantize_fp8: absmax scales per tensor or per row of A / column of B,
  the `scaling`), and every call gets the scales;
- the reference is torch.matmul on float64 copies of the very inputs the kernel reads (for
  fp16/bf16 the rounded ones, for fp8 the dequantised e4m3 values), computed on the GPU in the
  same run;
- each timed repeat starts with a 256 MB write that evicts L2 (50 MB on H100), then device
  events bracket the call; the median and quartiles of the repeats are kept;
- at a shape whose fastest call is short enough that launch latency would show (< GRAPH_BELOW_MS),
  every call (up to GRAPH_MAX_MS) is captured GRAPH_CALLS times into one CUDA graph over rotated
  copies of its operands (each call reads inputs that no earlier call of the replay touched),
  and one repeat = flush + one replay / GRAPH_CALLS: one mode for all kernels of a shape;
- warm-up (JIT compile, autotune, module load) happens before any timed repeat.
"""
from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field

import torch

from .operands import DTYPES
from .registry import SCALED

FLUSH_BYTES = 256 << 20     # > 5x the H100's 50 MB L2
GRAPH_BELOW_MS = 1.0        # a shape whose fastest call is shorter is timed from CUDA graphs
GRAPH_MAX_MS = 5.0          # ... for its calls shorter than this (launch gap < 0.1% beyond)
GRAPH_CALLS = 16            # calls per graph replay
HEAD_START_CYCLES = 400_000 # GPU spin before each timed repeat: ~0.2-0.3 ms of host head start
ROTATE_BYTES = 2 << 30      # at most this much memory for rotated operand copies
DEVICE = "cuda"             # where operands live (CPU only for the harness's own smoke tests)


def flops(M: int, N: int, K: int) -> int:
    return 2 * M * N * K


@dataclass
class Operands:
    """One problem's inputs at one precision. B exists as w, a contiguous (N, K) tensor: the NT
    operand is its transposed view, the NN operand a contiguous (K, N) copy, both equal to B.
    TN's A is a_tn, a transposed view of a [K, M] copy of a.
    fp8: a and w are e4m3 with fp32 scales per tensor or per row (`scaling`, default "tensor");
    call_kwargs holds the scales every call passes (empty for the other precisions)."""

    M: int
    N: int
    K: int
    precision: str
    seed: int = 0
    scaling: str = ""
    a: torch.Tensor = field(init=False)
    w: torch.Tensor = field(init=False)
    call_kwargs: dict = field(init=False, default_factory=dict)

    def __post_init__(self):
        gen = torch.Generator(device=DEVICE).manual_seed(self.seed)
        scale = self.K ** -0.25  # each product term has variance 1/K: outputs have variance ~1
        dtype = DTYPES[self.precision]
        if self.precision in SCALED:   # quantised from the same seeded randn
            from .fp8 import quantize_fp8

            self.scaling = self.scaling or "tensor"
            self.a, sa = quantize_fp8(torch.randn(self.M, self.K, device=DEVICE, generator=gen) * scale, self.scaling)
            self.w, sb = quantize_fp8(torch.randn(self.N, self.K, device=DEVICE, generator=gen) * scale, self.scaling)
            self.call_kwargs = {"scale_a": sa, "scale_b": sb}
            return
        if self.scaling:
            raise ValueError(f"scaling: only fp8 operands carry scales, got {self.scaling!r} for {self.precision}")
        self.a = (torch.randn(self.M, self.K, device=DEVICE, generator=gen) * scale).to(dtype)
        self.w = (torch.randn(self.N, self.K, device=DEVICE, generator=gen) * scale).to(dtype)

    @functools.cached_property
    def b_nn(self) -> torch.Tensor:
        return self.w.t().contiguous()

    def b(self, layout: str) -> torch.Tensor:
        return self.w.t() if layout == "NT" else self.b_nn

    @functools.cached_property
    def a_tn(self) -> torch.Tensor:
        return self.a.t().contiguous().t()   # the same values stored [K][M]: a transposed view

    def a_of(self, layout: str) -> torch.Tensor:
        """A as a layout's kernel reads it: row-major, or (TN) the transposed view of a [K, M]."""
        return self.a_tn if layout == "TN" else self.a

    @functools.cached_property
    def reference(self) -> torch.Tensor:
        """A @ B in float64 on the GPU, from the inputs exactly as the kernels see them (fp8:
        the e4m3 values times their scales, exact in float64)."""
        if self.call_kwargs:
            from .fp8 import dequantize

            return dequantize(self.a, self.call_kwargs["scale_a"]) @ dequantize(self.w, self.call_kwargs["scale_b"]).t()
        return self.a.double() @ self.w.double().t()

    @functools.cached_property
    def abs_scale(self) -> torch.Tensor:
        """|A| @ |B| in float64: the per-element scale of the rounding errors (tolerance.abs_scale)."""
        if self.call_kwargs:
            from .fp8 import dequantize

            return dequantize(self.a, self.call_kwargs["scale_a"]).abs() @ \
                dequantize(self.w, self.call_kwargs["scale_b"]).abs().t()
        return self.a.double().abs() @ self.w.double().abs().t()

    @property
    def out_dtype(self) -> torch.dtype:
        from .tolerance import OUT_DTYPE

        return OUT_DTYPE[self.precision] if self.precision in SCALED else self.a.dtype

    def output(self) -> torch.Tensor:
        """A fresh C full of NaN: a kernel that skips an element cannot pass the check."""
        return torch.full((self.M, self.N), float("nan"), dtype=self.out_dtype, device=DEVICE)

    @property
    def set_bytes(self) -> int:
        c_bytes = self.M * self.N * torch.empty((), dtype=self.out_dtype).element_size()
        return (self.a.numel() + self.w.numel()) * self.a.element_size() + c_bytes


class L2Flush:
    """Writing a buffer larger than L2 evicts every line an earlier call left there."""

    def __init__(self, nbytes: int = FLUSH_BYTES):
        self.buf = torch.empty(nbytes, dtype=torch.int8, device=DEVICE)

    def __call__(self):
        self.buf.zero_()


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Relative Frobenius error through the project's tolerance module."""
    from . import tolerance

    return float(tolerance.rel_error(out, ref))


def bound(precision: str, K: int, fast_accum: bool = False) -> float:
    from . import tolerance

    return float(tolerance.bound(precision, K, fast_accum=fast_accum))


@dataclass
class Timing:
    ms_median: float
    ms_q1: float
    ms_q3: float
    reps: int
    graph: bool


def quantiles(samples: list) -> tuple:
    t = torch.tensor(samples, dtype=torch.float64)
    q = torch.quantile(t, torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
    return float(q[1]), float(q[0]), float(q[2])


ALPHA, BETA = 1.5, 0.5   # the scalars of the study's second check (alpha/beta epilogues)


class Timer:
    """Times one kernel on one problem. `call(a, b, c, **ops.call_kwargs)` launches on the
    current stream (fp8: the scales as keywords); a call with `fast_accum = True` set on it is
    checked against tolerance's fast-accumulation fp8 bound.

    warm() makes the first call (compile, autotune, load), check() compares a fresh output with
    the fp64 reference, single_ms() times one flushed call, use_graph() switches to graph
    replays; queue() enqueues one timed repeat (flush, start event, run, end event) without
    waiting, so the caller can queue repeats of several kernels, synchronise once and collect()."""

    def __init__(self, call, ops: Operands, layout: str, flush: L2Flush):
        self.call, self.ops, self.layout, self.flush = call, ops, layout, flush
        self.c = ops.output()
        self.graph = None
        self.calls_per_rep = 1
        self.samples: list = []
        self._pending: list = []

    def warm(self) -> float:
        """The first call (compile, autotune, load); wall seconds, synchronised."""
        t0 = time.perf_counter()
        self.call(self.ops.a_of(self.layout), self.ops.b(self.layout), self.c, **self.ops.call_kwargs)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    def single_ms(self) -> float:
        """One flushed, event-timed plain call (the estimate that sizes the repeats)."""
        start, end = self.sample_events(plain=True)
        end.synchronize()
        return start.elapsed_time(end)

    def use_graph(self):
        """Capture GRAPH_CALLS calls over rotated operand copies into one graph."""
        ops, n_sets = self.ops, GRAPH_CALLS
        if ops.set_bytes * GRAPH_CALLS > ROTATE_BYTES:
            # Too big to rotate: one set reused; it exceeds L2 several times over by then.
            n_sets = max(1, min(GRAPH_CALLS, math.ceil((128 << 20) / ops.set_bytes)))
        b = ops.b(self.layout)
        sets = [(ops.a_of(self.layout), b, self.c)]
        for _ in range(n_sets - 1):
            bw, aw = ops.w.clone(), ops.a.clone()
            sets.append((aw.t().contiguous().t() if self.layout == "TN" else aw,
                         bw.t() if self.layout == "NT" else bw.t().contiguous(),
                         torch.empty_like(self.c)))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm every set outside capture
            for s in sets:
                self.call(*s, **ops.call_kwargs)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(GRAPH_CALLS):
                self.call(*sets[i % n_sets], **ops.call_kwargs)
        torch.cuda.synchronize()
        self.graph, self.calls_per_rep, self._sets = g, GRAPH_CALLS, sets

    def sample_events(self, plain: bool = False):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        # Keep the GPU busy while Python enqueues the call: after a synchronize the GPU is idle,
        # and a start event recorded on an idle GPU would time the host's launch overhead
        # (~0.1 ms through the argument checks) as if it were kernel time. Measured on the H100:
        # without this, the first kernel of each round (cuBLAS) read 0.14 ms instead of 0.017.
        torch.cuda._sleep(HEAD_START_CYCLES)
        self.flush()
        start.record()
        if self.graph is not None and not plain:
            self.graph.replay()
        else:
            self.call(self.ops.a_of(self.layout), self.ops.b(self.layout), self.c, **self.ops.call_kwargs)
        end.record()
        return start, end

    def queue(self):
        self._pending.append(self.sample_events())

    def collect(self):
        for start, end in self._pending:
            self.samples.append(start.elapsed_time(end) / self.calls_per_rep)
        self._pending = []

    def timing(self) -> Timing:
        med, q1, q3 = quantiles(self.samples)
        return Timing(med, q1, q3, len(self.samples), self.graph is not None)

    def check(self) -> tuple:
        """(rel_err, bound, problems) of a fresh call against the fp64 reference, by the test
        suite's policy: the relative Frobenius error within its bound (rel_err, bound), every
        element within the elementwise bound, and (calls marked `alpha_beta`: the study's
        kernels, not fp8) C = ALPHA A B + BETA C0 on a finite C0 likewise; problems lists what
        failed ([] if nothing)."""
        fast = getattr(self.call, "fast_accum", False)
        lim = bound(self.ops.precision, self.ops.K, fast)
        c = self.ops.output()
        self.call(self.ops.a_of(self.layout), self.ops.b(self.layout), c, **self.ops.call_kwargs)
        torch.cuda.synchronize()
        err = rel_error(c, self.ops.reference)
        problems = self._elementwise(c, self.ops.reference, self.ops.abs_scale, "")
        if getattr(self.call, "alpha_beta", False) and not self.ops.call_kwargs:
            gen = torch.Generator(device=DEVICE).manual_seed(self.ops.seed + 1)
            c0 = torch.randn(self.ops.M, self.ops.N, device=DEVICE, generator=gen).to(self.ops.out_dtype)
            c = c0.clone()
            self.call(self.ops.a_of(self.layout), self.ops.b(self.layout), c, alpha=ALPHA, beta=BETA)
            torch.cuda.synchronize()
            ref = ALPHA * self.ops.reference + BETA * c0.double()
            e2 = rel_error(c, ref)
            if not e2 <= lim:
                problems.append(f"alpha/beta ({ALPHA}, {BETA}): relative error {e2:.3g} > {lim:.3g}")
            problems += self._elementwise(c, ref, abs(ALPHA) * self.ops.abs_scale + abs(BETA) * c0.double().abs(),
                                          f"alpha/beta ({ALPHA}, {BETA}): ")
        return err, lim, problems

    def check_replay(self) -> list:
        """After use_graph: one replay's output against the reference (Frobenius and elementwise);
        what failed, or []."""
        self.c.fill_(float("nan"))
        self.graph.replay()
        torch.cuda.synchronize()
        err, lim = rel_error(self.c, self.ops.reference), bound(self.ops.precision, self.ops.K,
                                                               getattr(self.call, "fast_accum", False))
        out = [] if err <= lim else [f"graph replay: relative error {err:.3g} > {lim:.3g}"]
        return out + self._elementwise(self.c, self.ops.reference, self.ops.abs_scale, "graph replay: ")

    def _elementwise(self, out, ref, scale, what: str) -> list:
        from . import tolerance

        n, worst = tolerance.max_elem_violations(out, ref, scale, self.ops.precision, self.ops.K,
                                                 fast_accum=getattr(self.call, "fast_accum", False))
        return [f"{what}{n} of {out.numel()} elements past the elementwise bound (worst {worst:.1f}x)"] if n else []

    def release(self):
        self.graph, self._sets, self.c = None, None, None


def repeats(single_ms: float, budget_s: float, min_reps: int, max_reps: int) -> int:
    """How many timed repeats fit the time budget of one kernel-shape (flush ~0.1 ms each)."""
    per = single_ms + 0.1
    n = int(budget_s * 1e3 / per)
    if single_ms * min_reps > 2e3 * budget_s:  # very slow kernel: as many as fit, at least 1
        return max(1, n)
    return max(min_reps, min(max_reps, n))
