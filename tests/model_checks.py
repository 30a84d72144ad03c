"""Checks of the drop-in API (study.gemm ops, study.Linear, study.use, torch.compile, the model
group), shared by the CPU tests (Triton's interpreter, in a subprocess: interp_model.py) and the
GPU tests (test_model_api.py, every 16-bit stage of both families).

Each check takes (family, name, device, dtype) and raises AssertionError with the figures when
something is off; every product is compared against fp64 with tolerance.py's policy.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

import study
from study import tolerance
from study.nn import Linear, flat_view  # noqa: F401

PREC = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}


def _rnd(*shape, device, dtype, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return (torch.randn(*shape, generator=g) / shape[-1] ** 0.25).to(device=device, dtype=dtype)


def operands(layout: str, M: int, N: int, K: int, device, dtype, seed=0):
    """(a, b) for C[M, N] = A @ B in `layout`: NN row-major, NT b = w.t() of a row-major [N, K],
    TN a = x.t() of a row-major [K, M]."""
    a = _rnd(K, M, device=device, dtype=dtype, seed=seed).t() if layout == "TN" else \
        _rnd(M, K, device=device, dtype=dtype, seed=seed)
    b = _rnd(N, K, device=device, dtype=dtype, seed=seed + 1).t() if layout == "NT" else \
        _rnd(K, N, device=device, dtype=dtype, seed=seed + 1)
    return a, b


def _check(out, a, b, dtype, c0=None, alpha=1.0, beta=0.0, what=""):
    return tolerance.check(out, a, b, c0, alpha, beta, PREC[dtype], what=what)


def ops_layouts(family, name, device, dtype, shapes=((24, 40, 56), (64, 40, 48), (8, 136, 72))):
    """torch.ops.study.gemm (new C) and gemm_ (in place) in every layout the stage lists, alpha/beta.
    Sizes are multiples of 8: every stored row of every layout then fits the 16-byte stride limits."""
    k = study.kernel(family, name)
    for layout in k.layouts:
        for M, N, K in shapes:
            a, b = operands(layout, M, N, K, device, dtype)
            _check(study.gemm(family, name, a, b), a, b, dtype, what=f"gemm {layout} {M}x{N}x{K}")
            c0 = _rnd(M, N, device=device, dtype=dtype, seed=7)
            c = c0.clone()
            out = study.gemm(family, name, a, b, c, alpha=1.5, beta=0.5)
            assert torch.equal(c, c0), "the functional op wrote its input c"
            _check(out, a, b, dtype, c0, 1.5, 0.5, what=f"gemm alpha/beta {layout}")
            ret = study.gemm_(family, name, a, b, c, alpha=1.5, beta=0.5)
            assert ret is c
            _check(c, a, b, dtype, c0, 1.5, 0.5, what=f"gemm_ {layout}")


def no_silent_grad(family, name, device, dtype):
    """A kernel call on an input that requires grad is refused (no gradient is dropped silently)."""
    a, b = operands("NT", 8, 16, 24, device, dtype)
    try:
        study.kernel(family, name)(a.requires_grad_(True), b)
    except ValueError as exc:
        assert "a requires grad" in str(exc), exc
    else:
        raise AssertionError("a kernel call took an input that requires grad")
    with torch.no_grad():
        study.kernel(family, name)(a, b)


def ops_fake(family, name, device, dtype):
    """The fake implementation: shape and dtype without running anything; shape errors are
    ValueErrors naming the argument."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a = torch.empty(5, 8, dtype=dtype, device=device)
        b = torch.empty(8, 3, dtype=dtype, device=device)
        out = torch.ops.study.gemm(family, name, a, b, None, 1.0, 0.0, None, None, False, -1)
        assert tuple(out.shape) == (5, 3) and out.dtype == dtype, (out.shape, out.dtype)
        try:
            torch.ops.study.gemm(family, name, a, torch.empty(7, 3, dtype=dtype, device=device),
                                 None, 1.0, 0.0, None, None, False, -1)
        except ValueError as exc:
            assert "b must have K = 8 rows" in str(exc), exc
        else:
            raise AssertionError("the fake gemm took mismatched shapes")


class Block(torch.nn.Module):
    """y = fc2(gelu(fc1(x))) + x @ W3 through a study.kernel object and the in-place op."""

    def __init__(self, family, name, d, device, dtype):
        super().__init__()
        self.family, self.name = family, name
        self.fc1 = Linear(d, 2 * d, bias=True, device=device, dtype=dtype, kernel=(family, name))
        self.fc2 = Linear(2 * d, d, bias=False, device=device, dtype=dtype, kernel=(family, name))
        self.w3 = torch.nn.Parameter(_rnd(d, d, device=device, dtype=dtype, seed=3), requires_grad=False)
        self.k = study.kernel(family, name)

    def forward(self, x):
        y = self.fc2(F.gelu(self.fc1(x)))
        xd = x.detach()                                 # a raw kernel call is not differentiable
        z = self.k(xd, self.w3.t())                     # NT, a kernel object inside the graph
        study.gemm_(self.family, self.name, xd, self.w3.t(), z, alpha=0.5, beta=1.0)   # z += 0.5 x W3^T
        return y + z


def compile_fullgraph(family, name, device, dtype, backend="aot_eager"):
    """torch.compile(fullgraph=True) of Block: same output and gradients as eager, and the
    same output under torch.no_grad()."""
    torch._dynamo.reset()
    block = Block(family, name, 32, device, dtype)
    x = _rnd(24, 32, device=device, dtype=dtype, seed=11).requires_grad_(True)
    eager = block(x)
    eager.float().square().sum().backward()
    g_eager = [p.grad.clone() for p in (x, block.fc1.weight, block.fc2.weight)]
    for p in (x, block.fc1.weight, block.fc2.weight, block.fc1.bias):
        p.grad = None
    compiled = torch.compile(block, fullgraph=True, backend=backend)
    out = compiled(x)
    out.float().square().sum().backward()
    g_comp = [p.grad for p in (x, block.fc1.weight, block.fc2.weight)]
    # aot_eager runs the same ops: bitwise equal. Inductor fuses the elementwise ops around the GEMMs
    # (gelu, bias, the sum) and rounds them differently: equal within a few 16-bit ulps.
    # A Triton stage may also be autotuned anew in the compiled graph (another BLOCK_K: another
    # summation order). So: within twice the GEMM bound of each other (two valid roundings).
    same = torch.equal if backend == "aot_eager" else (
        lambda x, y: tolerance.rel_error(x, y) <= 2 * tolerance.bound(PREC[dtype], 64))
    assert same(out, eager), f"compiled output differs: max {float((out - eager).abs().max()):.3g}"
    for ge, gc in zip(g_eager, g_comp):
        assert same(ge, gc), f"compiled gradient differs: max {float((ge - gc).abs().max()):.3g}"
    with torch.no_grad():   # inference: study.Linear's no-gradient forward traced too
        out, eager = compiled(x.detach()), block(x.detach())
    assert same(out, eager), f"compiled inference differs: max {float((out - eager).abs().max()):.3g}"


def linear_grads(family, name, device, dtype, bias=False):
    """study.Linear forward and backward against fp64: y = x W^T (+ b), dX = dY W, dW = dY^T X."""
    d_in, d_out = 40, 24
    layer = Linear(d_in, d_out, bias=bias, device=device, dtype=dtype, kernel=(family, name))
    with torch.no_grad():
        layer.weight.copy_(_rnd(d_out, d_in, device=device, dtype=dtype, seed=5))
    x = _rnd(3, 6, d_in, device=device, dtype=dtype, seed=6).requires_grad_(True)
    y = layer(x)
    assert tuple(y.shape) == (3, 6, d_out)
    x2, w = x.detach().reshape(-1, d_in), layer.weight.detach()
    if not bias:   # with a bias the sum rounds once more: its gradient is checked instead
        _check(y.detach().reshape(-1, d_out), x2, w.t(), dtype, what="forward (NT)")
    dy = _rnd(3, 6, d_out, device=device, dtype=dtype, seed=8)
    y.backward(dy)
    dy2 = dy.reshape(-1, d_out)
    _check(x.grad.reshape(-1, d_in), dy2, w, dtype, what="dX = dY W (NN)")
    _check(layer.weight.grad, dy2.t(), x2, dtype, what="dW = dY^T X (TN)")
    if bias:
        ref_b = dy2.double().sum(0)
        err = float((layer.bias.grad.double() - ref_b).abs().max())
        assert err <= 1e-2 * float(ref_b.abs().max()) + 1e-3, f"bias gradient off by {err:.3g}"


def use_routes(family, name, device, dtype):
    """study.use routes F.linear (NT), @ (NN), mm on a transposed view (TN) and addmm to the
    stage, gradients through the stage, and hands the rest to torch, counting why."""
    a, b = operands("NN", 24, 16, 24, device, dtype)
    w = _rnd(16, 24, device=device, dtype=dtype, seed=4)
    at = _rnd(24, 24, device=device, dtype=dtype, seed=9)        # at.t(): TN (M = 24: 16-byte rows)
    c0 = _rnd(24, 16, device=device, dtype=dtype, seed=10)
    with study.use(family, name) as mode:
        y_lin = F.linear(a, w)
        y_mat = a @ b
        y_tn = torch.mm(at.t(), b)
        y_add = torch.addmm(c0, a, b, beta=0.5, alpha=2.0)
        _ = a.float() @ b.float()                                 # fp32: not a 16-bit stage's dtype
        _ = torch.randn(2, 3, 4, device=device, dtype=dtype) @ torch.randn(2, 4, 5, device=device, dtype=dtype)
    assert mode.counts == {"routed": 4, "fallback": 2}, (mode.counts, dict(mode.fallbacks))
    assert mode.fallbacks == {"dtype": 1, "shape": 1}, dict(mode.fallbacks)
    _check(y_lin, a, w.t(), dtype, what="F.linear")
    _check(y_mat, a, b, dtype, what="@")
    _check(y_tn, at.t(), b, dtype, what="mm TN")
    _check(y_add, a, b, dtype, c0, 2.0, 0.5, what="addmm")
    # gradients through the routed F.linear
    x = a.clone().requires_grad_(True)
    wp = w.clone().requires_grad_(True)
    with study.use(family, name) as mode:
        F.linear(x, wp).backward(c0[:, :16])
    assert mode.counts["fallback"] == 0, dict(mode.fallbacks)
    _check(x.grad, c0[:, :16], w, dtype, what="use: dX")
    _check(wp.grad, c0[:, :16].t(), a, dtype, what="use: dW")


def cuda_graph(family, name, device, dtype):
    """A CUDA graph captures the op and study.Linear, and replays them right after new inputs."""
    layer = Linear(64, 48, bias=False, device=device, dtype=dtype, kernel=(family, name))
    x = _rnd(16, 64, device=device, dtype=dtype, seed=12)
    static = x.clone()
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):   # warm up (Triton's autotuning cannot run inside a capture)
            layer(static)
            study.gemm(family, name, static, static.t()[:, :16].contiguous())
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = layer(static)
            z = study.gemm(family, name, static, static.t()[:, :16].contiguous())
        static.copy_(_rnd(16, 64, device=device, dtype=dtype, seed=13))
        g.replay()
        torch.cuda.synchronize()
    _check(y, static, layer.weight.detach().t(), dtype, what="graph replay: Linear")
    _check(z, static, static.t()[:, :16].contiguous(), dtype, what="graph replay: gemm")


def model_group(family, name, device, dtype, steps=4):
    """The model group's child body (modelrun.run_child) on the tiny GPT: loss rows for torch,
    the yardstick and the stage, GEMMs routed through the stage, one step's GEMMs within the
    tolerance bound, the stage's loss within the page's bound of torch's."""
    from dataclasses import asdict

    import pandas as pd

    from study import modelpage, modelrun
    from study.inmodel import COLUMNS, ModelOptions

    opts = ModelOptions(steps=steps, batch=2, log_every=2, families=(family,), stages=(name,), parts=("train",),
                        device=device, dtype=PREC[dtype], tiny=True)
    events = []
    assert modelrun.run_child({"options": asdict(opts)}, events.append) == 0
    assert events[-1] == {"event": "done"}, events[-1]
    rows = pd.DataFrame([e["row"] for e in events if e["event"] == "row"], columns=COLUMNS[1:])
    bad = rows[rows["what"] == "failed"]
    assert bad.empty, bad["note"].tolist()
    variants = set(rows.loc[rows["what"] == "loss", "family"] + ":" + rows.loc[rows["what"] == "loss", "stage"])
    stem = study.kernel(family, name).name
    assert variants == {"torch:cublas", "torch:fp32_gemm", f"{family}:{stem}"}, variants
    routed = rows[(rows["what"] == "routed_calls")]
    assert float(routed["value"].iloc[0]) > 0, routed
    # Every GEMM of one step within the tolerance bound, or (fp16: without loss scaling its
    # gradients reach fp16's subnormals, where even torch's own GEMMs leave the elementwise
    # bound) no further from fp64 than torch's own GEMMs of the same step.
    over = rows[rows["what"] == "gemm_err_over_bound"].set_index("family")["value"]
    assert over.drop("torch").max() <= max(1.0, over.loc["torch"].max()), over
    rows.insert(0, "gpu", "cpu")
    table = modelpage.training(rows)
    stage_row = table[table["variant"] == f"{family} {stem}"].iloc[0]
    assert stage_row["within bound"] == "yes", table.to_dict("records")
    return rows
