"""A small byte-level GPT in plain torch, its corpus and its training loop: the study's kernels
in a real client (inmodel.py routes its matmuls through a stage with study.use).

    Config()                 4 layers, d_model 256, 4 heads, context 128, 256 byte tokens
    GPT(cfg)                 pre-norm blocks, GELU MLP, nn.Linear everywhere (no bias), explicit
                             attention matmuls (batched, so study.use leaves them to torch), an
                             optional KV cache for prefill/decode
    corpus()                 the repository's own text as bytes, in a fixed order (CORPUS_GLOBS)
    plan_batches(...)        every step's batch offsets from one seeded generator: each run of a
                             comparison sees the same batches in the same order
    train(...)               AdamW on 16-bit weights (no fp32 master copy, no autocast: autocast
                             hands F.linear fp32 operands, which a 16-bit stage cannot take), loss
                             read back every log_every steps
    Fp32Gemm()               a TorchFunctionMode computing every 2-D 16-bit GEMM in fp32 and
                             rounding it once: another valid bf16 GEMM, the yardstick of inmodel's
                             loss bound

Initial weights come from torch.manual_seed(seed) on the CPU in fp32 and are then converted,
so every run of a comparison starts from the same bits on any device.
"""
from __future__ import annotations

import contextlib
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from .registry import ROOT

# The training text, in this order; each glob's matches sorted by path (a deterministic list).
CORPUS_GLOBS = ("README.md", "docs/**/*.md", "cuda_src/*.cu", "triton_kernels/*.py")
HALF = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Config:
    n_layer: int = 4
    d_model: int = 256
    n_head: int = 4
    ctx: int = 128
    vocab: int = 256     # bytes

    def __post_init__(self):
        for k in ("n_layer", "d_model", "n_head", "ctx", "vocab"):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{k} must be a positive int, got {v!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of n_head ({self.n_head})")

    @classmethod
    def tiny(cls):
        """The CPU tests' model: 1 layer, d_model 32, 2 heads, context 16."""
        return cls(n_layer=1, d_model=32, n_head=2, ctx=16)


class Block(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.n_head = cfg.n_head
        self.ln1, self.ln2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.fc1 = nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=False)
        self.fc2 = nn.Linear(4 * cfg.d_model, cfg.d_model, bias=False)

    def attend(self, x, cache, pos: int):
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)                       # each [B, T, D]
        q, k, v = (t.view(B, T, self.n_head, D // self.n_head).transpose(1, 2) for t in (q, k, v))  # [B, H, T, hd]
        if cache is not None:   # write this call's keys/values at pos, attend to everything so far
            cache[0][:, :, pos:pos + T] = k
            cache[1][:, :, pos:pos + T] = v
            k, v = cache[0][:, :, :pos + T], cache[1][:, :, :pos + T]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))   # [B, H, T, pos + T]
        if T > 1:               # causal: query i (at pos + i) sees keys 0..pos + i
            keep = torch.ones(T, k.shape[2], dtype=torch.bool, device=x.device).tril(diagonal=pos)
            att = att.masked_fill(~keep, float("-inf"))
        att = torch.softmax(att.float(), dim=-1).to(x.dtype)        # softmax in fp32: bf16 sums drift
        y = (att @ v).transpose(1, 2).reshape(B, T, D)               # contiguous [B, T, D] for proj
        return self.proj(y)

    def forward(self, x, cache=None, pos: int = 0):
        x = x + self.attend(self.ln1(x), cache, pos)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.ctx, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        for m in self.modules():   # GPT-2's init: N(0, 0.02)
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx, cache=None, pos: int = 0):
        """idx [B, T] bytes -> logits [B, T, vocab]; with a cache (make_cache), the tokens sit at
        positions pos..pos+T-1 and attend to the cached ones before them."""
        B, T = idx.shape
        if pos + T > self.cfg.ctx:
            raise ValueError(f"pos + T ({pos} + {T}) exceeds the context ({self.cfg.ctx})")
        x = self.tok(idx) + self.pos(torch.arange(pos, pos + T, device=idx.device))
        for i, blk in enumerate(self.blocks):
            x = blk(x, None if cache is None else cache[i], pos)
        return self.head(self.ln_f(x))

    def make_cache(self, batch: int) -> list:
        """Per layer (keys, values), each [batch, heads, ctx, head_dim], in the model's dtype."""
        c, p = self.cfg, self.head.weight
        shape = (batch, c.n_head, c.ctx, c.d_model // c.n_head)
        return [(torch.zeros(shape, dtype=p.dtype, device=p.device),
                 torch.zeros(shape, dtype=p.dtype, device=p.device)) for _ in range(c.n_layer)]


def build(cfg: Config, seed: int, dtype: torch.dtype, device) -> GPT:
    """The model with the seed's initial weights (drawn on the CPU in fp32), then dtype/device."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT(cfg)
    return model.to(device=device, dtype=dtype)


def corpus_files(root: Path = ROOT) -> list:
    """The corpus's files, CORPUS_GLOBS in order, each glob's matches sorted by relative path."""
    out = []
    for pattern in CORPUS_GLOBS:
        out += sorted((p for p in Path(root).glob(pattern) if p.is_file()), key=lambda p: p.relative_to(root).as_posix())
    return out


def corpus(root: Path = ROOT) -> tuple:
    """(uint8 tensor of the files' bytes, concatenated; sha256 of them, first 12 hex digits)."""
    data = b"".join(p.read_bytes() for p in corpus_files(root))
    if not data:
        raise FileNotFoundError(f"no corpus files under {root} ({', '.join(CORPUS_GLOBS)})")
    return torch.frombuffer(bytearray(data), dtype=torch.uint8), hashlib.sha256(data).hexdigest()[:12]


def plan_batches(n_bytes: int, steps: int, batch: int, ctx: int, seed: int) -> torch.Tensor:
    """[steps, batch] start offsets drawn from one generator seeded with `seed`."""
    if n_bytes <= ctx + 1:
        raise ValueError(f"the corpus ({n_bytes} bytes) is shorter than the context + 1 ({ctx + 1})")
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, n_bytes - ctx - 1, (steps, batch), generator=gen)


def get_batch(data: torch.Tensor, offsets: torch.Tensor, ctx: int, device) -> tuple:
    """(x, y): [B, ctx] bytes at the offsets and the same shifted by one (next-byte targets)."""
    idx = offsets[:, None] + torch.arange(ctx + 1)[None, :]
    chunk = data[idx].long()
    return chunk[:, :-1].to(device), chunk[:, 1:].to(device)


def loss_of(model: GPT, x, y) -> torch.Tensor:
    logits = model(x)
    return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1))  # loss in fp32


@dataclass
class TrainSpec:
    """One training run: the same spec gives the same batches and initial weights."""

    steps: int = 200
    batch: int = 16
    log_every: int = 10
    lr: float = 1e-3
    seed: int = 0
    cfg: Config = Config()

    def __post_init__(self):
        for k in ("steps", "batch", "log_every"):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{k} must be a positive int, got {v!r}")
        if not (isinstance(self.lr, float) and self.lr > 0):
            raise ValueError(f"lr must be a positive float, got {self.lr!r}")

    def logged(self) -> list:
        """The steps whose loss is read back: 0, log_every, ..., and the last."""
        return sorted(set(range(0, self.steps, self.log_every)) | {self.steps - 1})


def train(spec: TrainSpec, dtype: torch.dtype, device, mode=None, data=None) -> dict:
    """Train from the spec's initial weights on its batches with AdamW; `mode` (a context
    manager such as study.use(...), or None for torch) is active around every step's forward,
    backward and update. {step: loss} of the logged steps."""
    if dtype not in HALF:
        raise TypeError(f"dtype must be torch.float16 or torch.bfloat16 (the 16-bit stages), got {dtype}")
    data = corpus()[0] if data is None else data
    offsets = plan_batches(len(data), spec.steps, spec.batch, spec.cfg.ctx, spec.seed)
    model = build(spec.cfg, spec.seed, dtype, device)
    # fp16 (the CPU tests: the interpreter's bf16 dot is wrong) keeps AdamW's state in fp16, where
    # grad^2 underflows to 0: eps 1e-4 bounds the step that 1e-8 (0 in fp16) would not
    eps = 1e-8 if dtype == torch.bfloat16 else 1e-4
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, betas=(0.9, 0.95), weight_decay=0.1, eps=eps)
    logged, losses = set(spec.logged()), {}
    for step in range(spec.steps):
        x, y = get_batch(data, offsets[step], spec.cfg.ctx, device)
        with mode if mode is not None else contextlib.nullcontext():
            loss = loss_of(model, x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if step in logged:    # the only host sync of a step
            losses[step] = float(loss.detach())
            if not math.isfinite(losses[step]):
                raise FloatingPointError(f"loss is {losses[step]} at step {step}")
    return losses


class Fp32Gemm(TorchFunctionMode):
    """Every F.linear / torch.mm / torch.matmul / @ on 2-D 16-bit operands computed in fp32 (TF32
    off) and rounded once to the operands' dtype: an exactly rounded GEMM, as valid as cuBLAS's
    bf16 one but summed differently. Batched matmuls (attention) stay as they are, as under
    study.use. Autograd flows through the casts, so the backward GEMMs are fp32 too."""

    LINEAR = {F.linear}
    MM = {torch.mm, torch.matmul, torch.Tensor.__matmul__, torch.Tensor.matmul, torch.Tensor.mm}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.LINEAR | self.MM and len(args) >= 2:
            a, b = args[0], args[1]
            two_d = b.dim() == 2 and (a.dim() == 2 or func in self.LINEAR)
            if two_d and a.dtype in HALF and b.dtype == a.dtype:
                flag = torch.backends.cuda.matmul.allow_tf32
                torch.backends.cuda.matmul.allow_tf32 = False
                try:
                    rest = [t.float() if isinstance(t, torch.Tensor) else t for t in args[2:]]
                    return func(a.float(), b.float(), *rest, **kwargs).to(a.dtype)
                finally:
                    torch.backends.cuda.matmul.allow_tf32 = flag
        return func(*args, **kwargs)
