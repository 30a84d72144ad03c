"""Inductor's autotuned Triton GEMM: the second baseline (kernels.InductorKernel calls this).

What a Triton user gets from `torch.compile(mode="max-autotune")` without writing a kernel:
Inductor's GEMM templates, autotuned per shape, with the Triton backend only (no cuBLAS/ATen
choice), no Inductor CUDA graphs (the harness captures calls into its own graphs, as for every
kernel), fullgraph, static shapes. fp8 goes through `torch._scaled_mm`, which Inductor lowers to
its Triton scaled-mm templates (scales applied in the template's epilogue).

The first call at a new shape compiles and autotunes (~10 s per shape on an H100); the choices
are cached on disk under TORCHINDUCTOR_CACHE_DIR (default STATE_ROOT/build/inductor, set only if
the user has not set it), so a later run, or child process, at the same shape reuses them.
"""
from __future__ import annotations

import os
from pathlib import Path

from .registry import STATE_ROOT

OPTIONS = {"max_autotune": True, "max_autotune_gemm_backends": "TRITON", "triton.cudagraphs": False}
RECOMPILE_LIMIT = 4096   # every shape, precision and alpha/beta kind is a recompile (dynamic=False)
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")


def cache_dir() -> Path:
    return Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR", STATE_ROOT / "build" / "inductor"))


def prepare():
    """Point Inductor's cache at the study's build directory (unless the user chose one) and
    raise dynamo's recompile limits: the study compiles one graph per shape."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(STATE_ROOT / "build" / "inductor"))
    import torch._dynamo

    cfg = torch._dynamo.config
    name = "recompile_limit" if hasattr(cfg, "recompile_limit") else "cache_size_limit"
    setattr(cfg, name, max(getattr(cfg, name), RECOMPILE_LIMIT))
    if hasattr(cfg, "accumulated_recompile_limit"):
        cfg.accumulated_recompile_limit = max(cfg.accumulated_recompile_limit, 4 * RECOMPILE_LIMIT)


def _gemm_fn(alpha_one: bool, beta_zero: bool):
    """C = alpha * A @ B + beta * C into c: the template's output, copied into c by the graph
    (Inductor fuses the copy and any alpha/beta into the template's epilogue)."""
    def gemm(a, b, c, alpha: float, beta: float):
        prod = a @ b
        if not alpha_one:
            prod = prod * alpha
        c.copy_(prod if beta_zero else prod + beta * c)
    return gemm


def _scaled_fn(alpha_one: bool, beta_zero: bool, fast_accum: bool):
    """fp8: torch._scaled_mm (scales already shaped as it wants them), then alpha/beta in fp32."""
    import torch

    def gemm8(a, b, c, sa, sb, alpha: float, beta: float):
        if alpha_one and beta_zero:
            c.copy_(torch._scaled_mm(a, b, sa, sb, out_dtype=c.dtype, use_fast_accum=fast_accum))
            return
        prod = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast_accum).float()
        if not alpha_one:
            prod = prod * alpha
        c.copy_(prod if beta_zero else prod + beta * c.float())
    return gemm8


class Compiled:
    """The compiled GEMM functions of one Inductor kernel, one per kind of call (alpha == 1 or
    not, beta == 0 or not); each recompiles per shape (dynamic=False) and autotunes there."""

    def __init__(self, scaled: bool = False, fast_accum: bool = False):
        prepare()
        self.scaled, self.fast_accum = scaled, fast_accum
        self._fns: dict = {}

    def fn(self, alpha_one: bool, beta_zero: bool):
        key = (alpha_one, beta_zero)
        if key not in self._fns:
            import torch

            body = (_scaled_fn(alpha_one, beta_zero, self.fast_accum) if self.scaled
                    else _gemm_fn(alpha_one, beta_zero))
            self._fns[key] = torch.compile(body, fullgraph=True, dynamic=False, options=dict(OPTIONS))
        return self._fns[key]

    def __call__(self, a, b, c, alpha: float, beta: float, scales=None):
        f = self.fn(alpha == 1.0, beta == 0.0)
        if self.scaled:
            f(a, b, c, *scales, alpha, beta)
        else:
            f(a, b, c, alpha, beta)
