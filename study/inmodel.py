"""The kernels in a model: the variants of a comparison, their rows, and the training side.

    ModelOptions(...)         what to run: steps, batch, families, stages, parts ("train", "bench",
                              "mlp", "overhead"); validated at construction (ValueError naming the field)
    route(variant)            the context manager a variant's GEMMs run under: nothing (torch,
                              cuBLAS), gpt.Fp32Gemm (the loss bound's yardstick) or study.use(family,
                              stage) for a stage; inmodel never calls a kernel itself
    train_variant(...)        the byte-level GPT (gpt.py) trained through a variant: loss rows, the
                              routed and fallback GEMM counts, seconds
    grad_check(...)           one step's gradients against the same step in fp64, and every GEMM of
                              that step against fp64 within tolerance.py's policy

Rows (COLUMNS): `what` names the quantity, `size` is its step (loss), batch (tokens/s), M (MLP
block, modelbench.py) or M of the host-overhead GEMM (overhead.py; `note` names the call path).
What a stage cannot do is a `failed` row saying why, never a number. modelrun.py runs all of it in
a child process and writes reports/data/<gpu>/model.csv; modelpage.py turns the rows into the page.
"""
from __future__ import annotations

import contextlib
import math
import sys
import time
from dataclasses import dataclass

from .registry import find

COLUMNS = ["gpu", "what", "family", "stage", "size", "value", "unit", "note"]
FAMILIES = ("cuda", "triton")
STAGES = ("s10", "s11", "s12", "s13", "s14")
PARTS = ("train", "bench", "mlp", "overhead")
QUIET_PARTS = ("overhead",)   # host-timed: a full run gives them a quiet host, after every rank's other work
BUSY_PARTS = tuple(p for p in PARTS if p not in QUIET_PARTS)   # GPU-timed: they may run beside other work
SLOW_HOST = 1.25   # overhead: torch.mm this much slower than the host's reference is measured again
TORCH, YARDSTICK = ("torch", "cublas"), ("torch", "fp32_gemm")


@dataclass
class ModelOptions:
    steps: int = 200
    batch: int = 16
    log_every: int = 10
    families: tuple = FAMILIES
    stages: tuple = STAGES
    parts: tuple = PARTS
    reps: int = 30         # timed repeats per variant and size (graph replays, in rounds)
    device: str = "cuda"   # "cpu" and fp16 with tiny: the CPU tests (Triton's interpreter; its bf16 dot is wrong)
    dtype: str = "bf16"
    tiny: bool = False     # gpt.Config.tiny() instead of the 4-layer model

    def __post_init__(self):
        for k in ("steps", "batch", "log_every", "reps"):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{k} must be a positive int, got {v!r}")
        for k, valid in (("families", FAMILIES), ("parts", PARTS)):
            bad = [v for v in getattr(self, k) if v not in valid]
            if bad or not getattr(self, k):
                raise ValueError(f"{k} must be a non-empty subset of {valid}, got {tuple(getattr(self, k))}")
        if self.device not in ("cuda", "cpu") or self.dtype not in ("bf16", "fp16"):
            raise ValueError(f"device must be 'cuda' or 'cpu' and dtype 'bf16' or 'fp16', got {self.device!r}, "
                             f"{self.dtype!r}")
        if self.device == "cpu" and set(self.parts) - {"train"}:
            raise ValueError(f"parts: on the CPU only 'train' runs (timing needs CUDA events), got {self.parts}")
        self.families, self.parts = tuple(self.families), tuple(self.parts)
        self.stages = tuple(find("cuda", s).short for s in self.stages)   # ValueError naming a bad one
        bad = [s for s in self.stages if s not in STAGES]
        if bad or not self.stages:
            raise ValueError(f"stages must be a non-empty subset of the 16-bit stages {STAGES}, got {bad or '()'}")

    def spec(self):
        from . import gpt

        return gpt.TrainSpec(steps=self.steps, batch=self.batch, log_every=self.log_every,
                             cfg=gpt.Config.tiny() if self.tiny else gpt.Config())

    def torch_dtype(self):
        from .tolerance import OUT_DTYPE

        return OUT_DTYPE[self.dtype]

    def variants(self) -> list:
        """(family, stage stem) pairs: torch, its yardstick, then each family's stages."""
        return [TORCH, YARDSTICK] + [(f, find(f, s).stem) for f in self.families for s in self.stages]


def label(variant) -> str:
    return f"{variant[0]}:{variant[1]}"


def route(variant):
    """The context manager a variant's GEMMs run under (entered once around the work)."""
    from . import gpt

    if variant == TORCH:
        return contextlib.nullcontext()
    if variant == YARDSTICK:
        return gpt.Fp32Gemm()
    from .route import use   # study.use: F.linear / mm / matmul / @ on 16-bit 2-D operands -> the stage

    return use(*variant)


def say(msg: str):
    print(f"[model] {msg}", file=sys.stderr, flush=True)


def row(variant, what: str, size, value, unit: str, note: str = "") -> dict:
    return {"what": what, "family": variant[0], "stage": variant[1], "size": size, "value": value,
            "unit": unit, "note": note}


def failed(variant, part: str, why: str) -> dict:
    return row(variant, "failed", math.nan, math.nan, "", f"{part}: {why}"[:300])


# ---- training: the loss curve and one step's gradients ------------------------------------

def train_variant(variant, opts: ModelOptions, data) -> list:
    """Train through the variant's route; loss rows, routed/fallback counts (a stage that routed
    nothing is an error: the comparison would be torch against torch), wall seconds."""
    from . import gpt

    t0 = time.perf_counter()
    with route(variant) as mode:
        losses = gpt.train(opts.spec(), opts.torch_dtype(), opts.device, data=data)
    seconds = time.perf_counter() - t0
    out = [row(variant, "loss", s, v, "nats") for s, v in losses.items()]
    counts = getattr(mode, "counts", None)
    if variant[0] != "torch":
        if not counts or counts.get("routed", 0) == 0:
            raise AssertionError(f"study.use({variant[0]!r}, {variant[1]!r}) routed no GEMM (counts {counts})")
        out += [row(variant, "routed_calls", opts.steps, counts["routed"], "calls"),
                row(variant, "fallback_calls", opts.steps, counts.get("fallback", 0), "calls")]
    say(f"train {label(variant)}: {opts.steps} steps in {seconds:.1f} s, loss {losses[0]:.3f} -> "
        f"{losses[max(losses)]:.3f}" + (f", counts {counts}" if counts else ""))
    return out + [row(variant, "train_s", opts.steps, round(seconds, 2), "s")]


def grad_check(variant, opts: ModelOptions, data) -> list:
    """One training step (step 0's batch, initial weights) through the variant, against the same
    step in fp64 on the same bf16 weights: the worst relative Frobenius error over the parameters'
    gradients ("grad_err_fp64"), and every GEMM of the step (each nn.Linear's forward, dX = dY @ W
    and dW = dY^T X) against fp64 from its very inputs within tolerance.py's policy: the worst
    of (Frobenius error / bound, elementwise error / allowance) over them ("gemm_err_over_bound",
    <= 1 passes)."""
    import copy

    import torch

    from . import gpt, tolerance

    spec, precision, device = opts.spec(), opts.dtype, opts.device
    model = gpt.build(spec.cfg, spec.seed, opts.torch_dtype(), device)
    ref = copy.deepcopy(model).double()       # the same rounded weights, exactly, in fp64
    x, y = gpt.get_batch(data, gpt.plan_batches(len(data), 1, spec.batch, spec.cfg.ctx, spec.seed)[0], spec.cfg.ctx,
                         device)
    seen, hooks = {}, []
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Linear):
            hooks.append(m.register_forward_hook(
                lambda m, i, o, n=name: seen.setdefault(n, {}).update(x=i[0].detach(), y=o.detach())))
            hooks.append(m.register_full_backward_hook(
                lambda m, gi, go, n=name: seen[n].update(dx=gi[0], dy=go[0])))
    with route(variant):
        gpt.loss_of(model, x, y).backward()
    for h in hooks:
        h.remove()
    gpt.loss_of(ref, x, y).backward()
    g64 = dict(ref.named_parameters())
    worst_grad = max(tolerance.rel_error(p.grad, g64[n].grad) for n, p in model.named_parameters())
    worst, checked = 0.0, 0
    for name, m in model.named_modules():
        if name not in seen:
            continue
        s, w = seen[name], m.weight.detach()
        xs, dy = s["x"].reshape(-1, w.shape[1]), s["dy"].reshape(-1, w.shape[0])
        for out, a, b in ((s["y"].reshape(-1, w.shape[0]), xs, w.t()),          # Y = X W^T
                          (s["dx"].reshape(-1, w.shape[1]), dy, w),              # dX = dY W
                          (m.weight.grad, dy.t(), xs)):                          # dW = dY^T X
            K = a.shape[1]
            ref_out = tolerance.reference(a, b, precision=precision)
            frob = tolerance.rel_error(out, ref_out) / tolerance.bound(precision, K)
            _, elem = tolerance.max_elem_violations(out, ref_out, tolerance.abs_scale(a, b), precision, K)
            worst, checked = max(worst, frob, elem), checked + 1
    say(f"grad {label(variant)}: worst gradient error vs fp64 {worst_grad:.2e}, worst GEMM {worst:.2f}x its bound "
        f"({checked} GEMMs)")
    return [row(variant, "grad_err_fp64", 0, worst_grad, "rel. Frobenius, worst parameter"),
            row(variant, "gemm_err_over_bound", 0, worst, "x bound", f"{checked} GEMMs of one step")]




def context_alive(device: str) -> bool:
    """False once a CUDA error has killed the context (the child must die and be restarted)."""
    from .measure import context_alive as alive

    return device == "cpu" or alive()

