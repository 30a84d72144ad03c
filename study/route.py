"""`study.use(family, name)`: run torch's matrix products in a block on one kernel of the study.

    with study.use("cuda", "s13") as mode:
        logits = model(tokens)                      # F.linear, @, torch.mm, ... on s13
    mode.counts      # {"routed": 41, "fallback": 2}
    mode.fallbacks   # Counter({"shape": 2}): why each fallback went to torch

A TorchFunctionMode. It routes F.linear, torch.mm / Tensor.mm, torch.matmul / Tensor.matmul /
`@` (a [..., K] @ b [K, N]: a flattened as a view) and torch.addmm / Tensor.addmm to the kernel
when it can take them, and hands everything else to torch, counting each decision. Reasons:
"dtype" (not one of the stage's dtypes, e.g. fp32 on a 16-bit stage; mixed dtypes), "device"
(a CPU tensor for a GPU-only kernel, operands on two devices), "shape" (batched or vector
products, a bias torch would broadcast oddly), "layout" (strides the stage does not take,
an input that cannot be flattened as a view), "autograd" (a gradient the stage's layouts cannot
give: see nn.missing_grad_layouts; addmm with a gradient), "out" (an out= argument), "limits"
(the kernel's own checks refused it: alignment, int32 sizes; nothing was launched).

Products that need a gradient run through nn.MatmulFn (their backward on the kernel too); a
backward product the kernel refuses runs on torch and counts as a fallback ("backward_refused").
Under torch.compile the mode is traced once: counts then count call sites per compilation, not
calls, and the kernel's limits are checked when the compiled code runs (an error, not a fallback).
Eager F.linear without bias or gradient calls the kernel before the route's own checks (its
checks refuse the same products, before any launch); only a refusal runs them, to count why.
"""
from __future__ import annotations

import collections

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from . import ops
from .nn import MatmulFn, check_spec, kernel_layouts, missing_grad_layouts, pick_layout
from .operands import DTYPES, beta_is_zero
from .registry import SCALED


class _Fallback(Exception):
    """A product the kernel will not take; args[0] is the reason counted in use.fallbacks."""


class use(TorchFunctionMode):
    """Route torch's matrix products to `study.kernel(family, name)` inside a with block."""

    def __init__(self, family: str, name):
        super().__init__()
        family, name = check_spec((family, name))
        self.kernel = ops.kernel_for(family, name)   # study.kernel's errors if it cannot run here
        precisions = [p for p in self.kernel.precisions if p not in SCALED]
        if not precisions:
            raise ValueError(f"name: {family} {self.kernel.name} is an fp8 kernel (e4m3 operands with scales); "
                             f"study.use routes fp32/tf32/fp16/bf16 products")
        self.dtypes = frozenset(DTYPES[p] for p in precisions)
        self.layouts = kernel_layouts(self.kernel)
        self.allow_cpu = self.kernel._allow_cpu()
        self.counts = {"routed": 0, "fallback": 0}
        self.fallbacks = collections.Counter()

    def __repr__(self):
        return f"<study.use {self.kernel.family}:{self.kernel.name} {self.counts}>"

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        route = ROUTES.get(func)
        if route is None:
            return func(*args, **kwargs)
        try:
            out = route(self, *args, **kwargs)
        except _Fallback as why:
            self.counts["fallback"] += 1
            self.fallbacks[why.args[0]] += 1
            return func(*args, **kwargs)
        self.counts["routed"] += 1
        return out

    # --- the checks shared by every route ---------------------------------------------------
    def _operands(self, a, b, min_dim: int = 2):
        """a [..., K] as a [M, K] view and b [K, N], or _Fallback with the reason."""
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            raise _Fallback("type")
        if a.dtype not in self.dtypes or b.dtype != a.dtype:
            raise _Fallback("dtype")
        gpu = a.get_device()   # an int (-1 off the GPU): cheaper than comparing torch.device objects
        if gpu != b.get_device() or (gpu < 0 and not (self.allow_cpu and a.device.type == "cpu" == b.device.type)):
            raise _Fallback("device")
        if b.dim() != 2 or a.dim() < min_dim or a.shape[-1] != b.shape[0]:
            raise _Fallback("shape")
        if a.dim() == 2:
            return a, b
        try:
            return a.view(-1, a.shape[-1]), b
        except RuntimeError:   # not viewable: the kernels never copy
            raise _Fallback("layout") from None

    def _product(self, a2, b):
        """a2 @ b on the kernel; through MatmulFn when autograd needs its gradient."""
        grad = torch.is_grad_enabled() and (a2.requires_grad or b.requires_grad)
        if grad:
            grad_a, grad_b = a2.requires_grad, b.requires_grad
            layout = pick_layout(a2, b, self.layouts)
            if layout is None:
                raise _Fallback("layout")
            if missing_grad_layouts(layout, self.layouts, grad_a, grad_b):
                raise _Fallback("autograd")
        try:
            return MatmulFn.apply(a2, b, self.kernel, self) if grad else self.kernel(a2, b)
        except ValueError:   # the kernel's checks refused it before any launch (its layout check too)
            raise _Fallback("layout" if pick_layout(a2, b, self.layouts) is None else "limits") from None

    # --- one route per torch function -------------------------------------------------------
    def mm(self, a, b, *, out=None):
        if out is not None:
            raise _Fallback("out")
        if not (isinstance(a, torch.Tensor) and a.dim() == 2):
            raise _Fallback("shape")
        return self._product(*self._operands(a, b))

    def matmul(self, a, b, *, out=None):
        if out is not None:
            raise _Fallback("out")
        a2, b = self._operands(a, b)
        y = self._product(a2, b)
        return y if a.dim() == 2 else y.view(*a.shape[:-1], b.shape[1])   # a view op costs ~1 us

    def linear(self, x, weight, bias=None):
        if (bias is None and isinstance(x, torch.Tensor) and isinstance(weight, torch.Tensor) and x.dim() == 2
                and weight.dim() == 2 and not (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))
                and not torch.compiler.is_compiling()):   # traced, the kernel's checks run later: no fallback
            try:   # the common call first: the kernel's own checks refuse what the route's below would
                return self.kernel(x, weight.t())
            except (ValueError, TypeError):   # refused before any launch: classified below
                pass
        x2, w_t = self._operands(x, weight.t() if isinstance(weight, torch.Tensor) and weight.dim() == 2 else weight,
                                 min_dim=1)
        if bias is not None and (not isinstance(bias, torch.Tensor) or bias.dtype != x.dtype
                                 or tuple(bias.shape) not in ((w_t.shape[1],), ())):
            raise _Fallback("shape" if isinstance(bias, torch.Tensor) and bias.dtype == x.dtype else "dtype")
        y = self._product(x2, w_t)
        if bias is not None:
            y = y + bias if torch.is_grad_enabled() and (bias.requires_grad or y.requires_grad) else y.add_(bias)
        return y if x.dim() == 2 else y.view(*x.shape[:-1], w_t.shape[1])

    def addmm(self, c, a, b, *, beta=1, alpha=1, out=None):
        if out is not None:
            raise _Fallback("out")
        if not (isinstance(a, torch.Tensor) and a.dim() == 2):
            raise _Fallback("shape")
        a, b = self._operands(a, b)
        if torch.is_grad_enabled() and any(t.requires_grad for t in (a, b, c)):
            raise _Fallback("autograd")
        if c.dtype != a.dtype or c.device != a.device:
            raise _Fallback("dtype" if c.dtype != a.dtype else "device")
        M, N = a.shape[0], b.shape[1]
        try:
            if torch.broadcast_shapes(c.shape, (M, N)) != (M, N):
                raise _Fallback("shape")
        except RuntimeError:
            raise _Fallback("shape") from None
        if pick_layout(a, b, self.layouts) is None:
            raise _Fallback("layout")
        y = torch.empty((M, N), dtype=a.dtype, device=a.device)
        if not beta_is_zero(beta):   # beta == 0 never reads C (as the kernels, and as torch.addmm)
            y.copy_(c)
        try:
            return self.kernel(a, b, y, alpha=alpha, beta=beta)
        except (ValueError, TypeError):   # refused before any launch (TypeError: alpha/beta not real numbers)
            raise _Fallback("limits") from None


ROUTES = {torch.mm: use.mm, torch.Tensor.mm: use.mm, torch.matmul: use.matmul, torch.Tensor.matmul: use.matmul,
          torch.Tensor.__matmul__: use.matmul, F.linear: use.linear, torch.addmm: use.addmm,
          torch.Tensor.addmm: use.addmm}
