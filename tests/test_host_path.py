"""The host path's shortcuts on the CPU, with a recording stand-in kernel: what a repeated call
skips must not change what it computes (kernels.Kernel.__call__'s checked signature, study.Linear's
kept W.T view), and study.overhead's rows and references."""
from __future__ import annotations

import statistics
import warnings

import pytest
import torch

from study import kernels, ops
from study.nn import Linear

SPEC = ("triton", "s11")   # a real NT stage name: study.Linear reads its header's layouts


class Recording(kernels.Kernel):
    """C = alpha * A @ B + beta * C on the CPU; records the operands of each launch."""
    family, name = "triton", "s11_mma_pipeline"
    precisions, layout, layouts = ("bf16", "fp16"), "NT", ("NT", "NN", "TN")

    def __init__(self):
        self.seen = []

    def _allow_cpu(self):
        return True

    def _run(self, p, a, b, c, alpha, beta, scales=None):
        self.seen.append((a, b, c))
        # through .data: a raw launch's write, which does not bump c's version counter
        c.data.copy_((alpha * (a.double() @ b.double()) + (beta * c.double() if beta else 0)).to(c.dtype))


@pytest.fixture
def k(monkeypatch):
    rec = Recording()
    for key in ((*SPEC, False, -1), ("triton", "s11_mma_pipeline", False, -1)):
        monkeypatch.setitem(ops._KERNELS, key, rec)
    return rec


@pytest.mark.parametrize("shape", [(1, 1, 8), (1, 24, 8), (24, 1, 8), (5, 24, 16)])
def test_repeated_call_allocates_c_as_the_first(k, shape):
    """The checked signature's C (empty_like of a one-element stand-in) is a fresh row-major
    [M, N] tensor of a's dtype, as the first call's torch.empty, and holds A @ B; a C passed in
    has its version bumped on either path."""
    M, N, K = shape
    a, w = torch.randn(M, K, dtype=torch.bfloat16), torch.randn(N, K, dtype=torch.bfloat16)
    first, again = k(a, w.t()), k(a, w.t())
    for c in (first, again):
        assert c.shape == (M, N) and c.dtype == a.dtype and c.is_contiguous() and c.stride() == (N, 1)
        torch.testing.assert_close(c, (a.double() @ w.double().t()).to(c.dtype))
    assert again.data_ptr() != first.data_ptr()
    c = torch.empty(M, N, dtype=a.dtype)
    for n in (1, 2, 3):   # a given C's version is bumped by each call, checked or repeated
        k(a, w.t(), c)
        assert c._version == n


def test_linear_keeps_the_weight_view_only_while_the_weight_is_unchanged(k):
    layer = Linear(16, 8, bias=True, dtype=torch.bfloat16, kernel=SPEC)
    x = torch.randn(3, 16, dtype=torch.bfloat16)
    with torch.no_grad():
        y1, y2 = layer(x), layer(x)
    (_, b1, _), (_, b2, _) = k.seen
    assert b1 is b2, "no gradient flows: W.T is kept"
    ref = lambda: (x.double() @ layer.weight.double().t()).to(x.dtype) + layer.bias  # noqa: E731 (as forward rounds)
    torch.testing.assert_close(y2, ref())
    with torch.no_grad():
        layer.weight.data = torch.randn(8, 16, dtype=torch.bfloat16)   # new memory under the same Parameter
        y3 = layer(x)
    assert k.seen[-1][1] is not b1 and k.seen[-1][1].data_ptr() == layer.weight.data_ptr()
    torch.testing.assert_close(y3, ref())
    layer.weight = torch.nn.Parameter(torch.randn(8, 16, dtype=torch.bfloat16))   # a new Parameter
    with torch.no_grad():
        torch.testing.assert_close(layer(x), ref())
    y = layer(x)   # the weight requires grad: the view that carries it, not the kept one
    assert y.requires_grad and k.seen[-1][1] is not k.seen[-2][1]
    y.float().sum().backward()
    assert layer.weight.grad is not None and layer.weight.grad.shape == (8, 16)


def test_linear_reads_a_parametrised_weight(k):
    from torch.nn.utils import parametrize

    class Doubled(torch.nn.Module):
        def forward(self, w):
            return 2 * w

    layer = Linear(16, 8, bias=False, dtype=torch.bfloat16, kernel=SPEC).requires_grad_(False)
    parametrize.register_parametrization(layer, "weight", Doubled())
    x = torch.randn(3, 16, dtype=torch.bfloat16)
    torch.testing.assert_close(layer(x), (x.double() @ layer.weight.double().t()).to(x.dtype))
    assert torch.equal(k.seen[-1][1], layer.weight.t())   # 2 * the stored weight


def test_overhead_rows_and_references(k):
    from study import overhead

    df = overhead.measure(*SPEC, shape=(8, 8, 8), calls=3, rounds=3, device="cpu").set_index("path")
    assert {"nn.Linear", "torch.ops no-op", "F.linear, pass-through mode", "study.Linear", "study.use F.linear",
            "torch.ops.study.gemm", "study.gemm"} <= set(df.index)
    rounds = df.attrs["us_host_rounds"]

    def paired(path, ref):   # the median over rounds of the difference within each round
        return statistics.median(x - y for x, y in zip(rounds[path], rounds[ref]))
    for path, ref in (("study.Linear", "nn.Linear"), ("study.use F.linear", "F.linear"),
                      ("torch.ops.study.gemm", "torch.mm"), ("study.gemm", "torch.mm"),
                      ("F.linear, pass-through mode", "F.linear")):
        assert len(rounds[path]) == 3 and df.loc[path, "us_host"] == pytest.approx(statistics.median(rounds[path]))
        assert df.loc[path, "us_over_torch"] == pytest.approx(paired(path, ref))
        assert df.loc[path, "us_over_mm"] == pytest.approx(paired(path, "torch.mm"))


def test_use_linear_tries_the_kernel_first_and_still_counts_why_it_falls_back(k):
    """study.use's F.linear calls the kernel at once for the common call; what the kernel's own
    checks refuse goes to torch with the same reason the route's checks give."""
    import torch.nn.functional as F

    from study.route import use

    x, w = torch.randn(4, 16, dtype=torch.bfloat16), torch.randn(8, 16, dtype=torch.bfloat16)
    odd = torch.randn(8, 32, dtype=torch.bfloat16)[:, ::2]        # [8, 16], column stride 2: no layout
    with use(*SPEC) as mode:
        y = F.linear(x, w)
        y_nn = F.linear(x, w.t().contiguous().t())             # W.T row-major: NN, routed
        y32 = F.linear(x.float(), w.float())                    # fp32: not the stage's dtype
        y_odd = F.linear(x, odd)
    for got, weight in ((y, w), (y_nn, w)):
        torch.testing.assert_close(got, (x.double() @ weight.double().t()).to(got.dtype))
    torch.testing.assert_close(y32, x.float() @ w.float().t())
    torch.testing.assert_close(y_odd, F.linear(x, odd))
    assert mode.counts == {"routed": 2, "fallback": 2} and mode.fallbacks == {"dtype": 1, "layout": 1}, \
        (mode.counts, dict(mode.fallbacks))


def test_linear_without_grad_compiles_fullgraph(k):
    """The kept W.T is eager-only: a traced forward without gradients (inference under
    torch.compile) makes its view in the graph and leaves the module's state alone."""
    layer = Linear(16, 8, bias=True, dtype=torch.bfloat16, kernel=SPEC)
    x = torch.randn(5, 16, dtype=torch.bfloat16)
    torch._dynamo.reset()
    compiled = torch.compile(layer, fullgraph=True, backend="eager")
    with torch.no_grad():
        y = compiled(x)
        assert "_kept_t" not in layer.__dict__
        y_eager = layer(x)
    assert torch.equal(y, y_eager) and "_kept_t" in layer.__dict__
    torch.testing.assert_close(y, (x.double() @ layer.weight.double().t()).to(x.dtype) + layer.bias)


def test_study_gemm_calls_the_implementation_directly_only_where_the_operator_would(k, monkeypatch):
    """study.gemm / gemm_ skip torch's dispatcher for a plain eager call (same result as the op),
    and go through torch.ops.study.* wherever a mode or the profiler would see the operator."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    import study

    a, b = torch.randn(4, 16, dtype=torch.bfloat16), torch.randn(16, 8, dtype=torch.bfloat16)
    want = (a.double() @ b.double()).to(a.dtype)
    direct = []   # ops._direct's answers, in call order
    monkeypatch.setattr(ops, "_direct", lambda t, _real=ops._direct: direct.append(_real(t)) or direct[-1])
    torch.testing.assert_close(study.gemm(*SPEC, a, b), want)
    c = torch.empty(4, 8, dtype=torch.bfloat16)
    assert study.gemm_(*SPEC, a, b, c) is c
    torch.testing.assert_close(c, want)
    torch.testing.assert_close(study.gemm(*SPEC, torch.nn.Parameter(a, requires_grad=False), b), want)
    assert direct == [True, True, True]

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    class Passing(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Seen() as seen:
        torch.testing.assert_close(study.gemm(*SPEC, a, b), want)
    assert "study.gemm.default" in seen.ops
    with Passing():
        c.zero_()
        study.gemm_(*SPEC, a, b, c)
    torch.testing.assert_close(c, want)
    with torch.autograd.profiler.profile() as prof:
        study.gemm(*SPEC, a, b)
    assert "study::gemm" in {e.name for e in prof.function_events}
    with warnings.catch_warnings():   # torch.jit.trace is deprecated, and still traces
        warnings.simplefilter("ignore", DeprecationWarning)
        traced = torch.jit.trace(lambda x: study.gemm(*SPEC, x, b), (a,), check_trace=False)
    assert "study::gemm" in str(traced.graph)
    try:   # the op has no batching rule: vmap may refuse it, but must not bypass it
        torch.func.vmap(lambda x: study.gemm(*SPEC, x, b))(a[None])
    except Exception:
        pass
    assert direct == [True, True, True, False, False, False, False, False]


@pytest.mark.parametrize("kw, msg", [({"fast_accum": 1}, "fast_accum must be a bool"),
                                     ({"config": "3"}, "config must be None or an int"),
                                     ({"config": -2}, "config must be None or an int")])
def test_study_gemm_refuses_mistyped_options(k, kw, msg):
    import study

    a = torch.randn(4, 16, dtype=torch.bfloat16)
    for call in (lambda: study.gemm(*SPEC, a, a.t(), **kw), lambda: study.gemm_(*SPEC, a, a.t(), torch.empty(4, 4), **kw)):
        with pytest.raises(TypeError, match=msg):
            call()
    with pytest.raises(TypeError, match="family must be a str"):
        study.gemm(None, "s11", a, a.t())
