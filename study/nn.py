"""`study.Linear`: nn.Linear whose products run on one kernel of the study, forward and backward.

    layer = study.Linear(4096, 11008, bias=False, device="cuda", dtype=torch.bfloat16,
                         kernel=("cuda", "s13"))        # same args and state_dict keys as nn.Linear
    y = layer(x)                                        # x [..., 4096] -> y [..., 11008]

Forward y = x @ W.T (+ bias): x flattened to [M, K] as a view, W.T the transposed view of the
[N, K] weight, so the stage runs in NT. Backward (MatmulFn): dX = dY @ W (NN), dW = dY^T @ X (TN),
each through the same kernel; the bias gradient is torch's (a sum over rows, no GEMM).

Layouts. NT is checked when the module is made (ValueError naming the stage's layouts if it lacks
it). NN and TN are needed only when a gradient flows through the product: a stage without them
(s09 tf32, NT only) still serves a frozen module or inference under torch.no_grad(), and a forward
that needs a backward it cannot give raises ValueError naming the missing layout, before any
launch. The kernel is made with the module where a GPU (or Triton's interpreter) is there, so a
later torch.compile traces a forward that only looks it up; without one the module is still
constructible (e.g. on the CPU, to load a state_dict) and its kernel is made at the first forward
(study.kernel's RuntimeError if this machine cannot run it).
Nothing is converted: an input of a dtype the stage does not take is a TypeError, one that cannot
be flattened as a view a ValueError; autograd's dY alone is made row-major (contiguous()), since
autograd picks its strides (e.g. the expanded gradient of y.sum()).
"""
from __future__ import annotations

import torch
from torch import nn

from . import kernels, ops  # noqa: F401 (kernels: hands the ops their kernel factory)
from .operands import DTYPES
from .registry import FAMILIES, SCALED, _interpreting, find

# The layout of each gradient's product for a forward in layout L (C = A @ B, dC row-major):
# dA = dC @ B^T and dB = A^T @ dC, each computed in the memory order of the input it belongs to.
GRAD_A_LAYOUT = {"NN": "NT", "NT": "NN", "TN": "NT"}
GRAD_B_LAYOUT = {"NN": "TN", "NT": "TN", "TN": "NN"}


def kernel_layouts(k) -> tuple:
    """The layouts a kernel takes (Kernel.layouts; a kernel of one layout has only .layout)."""
    return tuple(getattr(k, "layouts", (k.layout,)))


def _row_major(t) -> bool:
    return t.shape[1] <= 1 or t.stride(1) == 1


def _col_major(t) -> bool:
    """A transposed view of a row-major tensor (a [1, K] row or [K, 1] column is both)."""
    return t.shape[0] <= 1 or t.stride(0) == 1


def layouts_of(a, b) -> tuple:
    """The layouts that 2-D a's and b's strides fit, as operands.py infers them: NN (both
    row-major), NT (b a transposed view), TN (a a transposed view). Empty: TT or strided."""
    ar, br = _row_major(a), _row_major(b)
    return tuple(lay for lay, ok in (("NN", ar and br), ("NT", ar and _col_major(b)), ("TN", _col_major(a) and br))
                 if ok)


def pick_layout(a, b, takes) -> str | None:
    """The first of the kernel's layouts `takes` that a and b fit, or None."""
    fits = layouts_of(a, b)
    return next((lay for lay in takes if lay in fits), None)


def missing_grad_layouts(layout: str, takes, grad_a: bool, grad_b: bool) -> list:
    """The backward layouts a kernel lacks for the gradients asked of a forward in `layout`."""
    need = ([GRAD_A_LAYOUT[layout]] if grad_a else []) + ([GRAD_B_LAYOUT[layout]] if grad_b else [])
    return [lay for lay in dict.fromkeys(need) if lay not in takes]


def _mm(k, x, y, stats):
    """x @ y through kernel k. With `stats` (a study.use: .counts, .fallbacks), a product the
    kernel refuses runs on torch instead, counted; without (study.Linear), the refusal is the error."""
    if stats is None:
        return k(x, y)
    try:
        return k(x, y)
    except ValueError:   # raised by the checks before any launch: nothing was written
        stats.counts["fallback"] += 1
        stats.fallbacks["backward_refused"] += 1
        with torch._C.DisableTorchFunction():   # not routed again by a study.use still active
            return torch.mm(x, y)


def _grad(k, x, y, like, stats):
    """x @ y in the memory order of `like`, the input it is the gradient of: a transposed view
    gets (y^T @ x^T)^T, a transposed view too, as torch.mm's backward gives."""
    if _col_major(like) and not _row_major(like):
        return _mm(k, y.t(), x.t(), stats).t()
    return _mm(k, x, y, stats)


class MatmulFn(torch.autograd.Function):
    """C = A @ B through kernel k, differentiable: dA = dC @ B^T and dB = A^T @ dC through k too.
    `stats`: the study.use routing it (backward refusals fall back to torch, counted) or None."""

    @staticmethod
    def forward(ctx, a, b, k, stats):
        ctx.save_for_backward(a, b)
        ctx.kernel, ctx.stats = k, stats
        return k(a, b)

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        dc = dc.contiguous()   # dC: [M, N] row-major whatever strides autograd chose
        da = _grad(ctx.kernel, dc, b.t(), a, ctx.stats) if ctx.needs_input_grad[0] else None
        db = _grad(ctx.kernel, a.t(), dc, b, ctx.stats) if ctx.needs_input_grad[1] else None
        return da, db, None, None


def check_spec(kernel) -> tuple:
    """(family, name) from study.Linear's / study.use's kernel argument, or TypeError."""
    if not (isinstance(kernel, tuple) and len(kernel) == 2 and isinstance(kernel[0], str)
            and isinstance(kernel[1], (str, int))):
        raise TypeError(f"kernel must be a (family, name) tuple such as ('cuda', 's13'), got {kernel!r}")
    return kernel[0], str(kernel[1])


def stage_layouts(family: str, name: str) -> tuple | None:
    """A stage's layouts from its header (no build, no GPU); None for a baseline (cuBLAS,
    Inductor), whose layouts its kernel object gives. ValueError for an fp8 stage: study.Linear
    and study.use take tensors, not e4m3 operands with scales."""
    if family not in FAMILIES:
        return None
    stage = find(family, name)
    if set(stage.precisions) <= set(SCALED):
        raise ValueError(f"kernel: {family} {stage.stem} is an fp8 stage (e4m3 operands with scales); "
                         f"study.Linear and study.use route fp32/tf32/fp16/bf16 products")
    return tuple(getattr(stage, "layouts", (stage.layout,)))


class Linear(nn.Linear):
    """nn.Linear (same constructor arguments, parameters and state_dict keys) whose x @ W.T and
    its gradients run on `kernel=(family, name)` (default CUDA s13): see the module docstring."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None, *,
                 kernel=("cuda", "s13")):
        super().__init__(in_features, out_features, bias, device, dtype)
        self.family, self.name = check_spec(kernel)
        takes = stage_layouts(self.family, self.name)
        if takes is not None and "NT" not in takes:
            raise ValueError(f"kernel: {self.family} {self.name} takes layout(s) {', '.join(takes)}; study.Linear's "
                             f"forward x @ W.T is NT (W.T a transposed view of the [out, in] weight)")
        if torch.cuda.is_available() or _interpreting():
            # made (and compiled) now where it can run, so that torch.compile later traces a forward
            # that only looks the kernel up; elsewhere (a CPU machine loading a state_dict) at the
            # first forward
            ops.kernel_for(self.family, self.name)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, kernel=({self.family!r}, {self.name!r})"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = ops.kernel_for(self.family, self.name)
        if x.dtype not in _dtypes(k):
            raise TypeError(f"input: {self.family} {k.name} takes "
                            f"{', '.join(dict.fromkeys(str(DTYPES[p])[6:] for p in k.precisions))}, "
                            f"got {str(x.dtype)[6:]} (convert the module and its input, e.g. .to(torch.bfloat16))")
        x2 = flat_view(x, self.in_features, "input")              # [M, K]
        w, bias = _param(self, "weight"), _param(self, "bias")
        if torch.is_grad_enabled() and (x.requires_grad or w.requires_grad):
            missing = missing_grad_layouts("NT", kernel_layouts(k), x.requires_grad, w.requires_grad)
            if missing:
                raise ValueError(f"kernel: {self.family} {k.name} lacks layout {' and '.join(missing)}, needed for "
                                 f"the backward (dX = dY @ W is NN, dW = dY^T @ X is TN); freeze the module "
                                 f"(requires_grad_(False)) or run it under torch.no_grad()")
            y = MatmulFn.apply(x2, w.t(), k, None)               # W.T [K, N]: NT
        else:
            y = k(x2, self._weight_t(w))
        if bias is not None:
            y = y + bias if torch.is_grad_enabled() and bias.requires_grad else y.add_(bias)
        return y if x.dim() == 2 else y.view(*x.shape[:-1], self.out_features)   # a view op costs ~1 us

    def _weight_t(self, w):
        """w.t() for a product no gradient flows through, kept while the weight is the same tensor
        at the same address, shape and requires_grad (a view of a Parameter costs ~1.5 us;
        `weight.data = ...` or a new weight makes a new one). Never handed to autograd (a
        gradient's product takes a fresh view). Holds the weight's memory until the next forward."""
        if torch.compiler.is_compiling():   # traced: a view in the graph costs nothing per call
            return w.t()
        kept = self.__dict__.get("_kept_t")
        if (kept is not None and kept[0] is w and kept[1] == w.data_ptr() and kept[2] == w.shape
                and kept[3] == w.requires_grad):
            return kept[4]
        w_t = w.t()
        self.__dict__["_kept_t"] = (w, w.data_ptr(), w.shape, w.requires_grad, w_t)
        return w_t


def _param(module, name):
    """module.<name>: a registered parameter (or None) read from its dict, skipping
    nn.Module.__getattr__ (~0.6 us), else the attribute (a parametrisation's property)."""
    params = module._parameters
    return params[name] if name in params else getattr(module, name)


def _dtypes(k) -> frozenset:
    """The torch dtypes kernel k takes, worked out once per kernel object."""
    got = k.__dict__.get("_torch_dtypes")
    if got is None:
        got = k.__dict__["_torch_dtypes"] = frozenset(DTYPES[p] for p in k.precisions)
    return got


def flat_view(x: torch.Tensor, K: int, name: str) -> torch.Tensor:
    """x [..., K] as a [M, K] view (ValueError rather than a copy when its strides forbid it)."""
    if x.dim() < 1 or x.shape[-1] != K:
        raise ValueError(f"{name} must have shape [..., {K}], got {tuple(x.shape)}")
    if x.dim() == 2:
        return x
    try:
        return x.view(-1, K)
    except RuntimeError:
        raise ValueError(f"{name} of shape {tuple(x.shape)} and stride {tuple(x.stride())} cannot be flattened "
                         f"to [-1, {K}] as a view; the kernels do not copy their inputs: pass x.contiguous()") from None
