"""The Triton stages' replayed launches (study.tritonlaunch, study.tritoncall; marker gpu): after the
first call of a launch signature, a call with new operands of the same signature skips Triton's
dispatch and gives the bits Triton's own path gives; a repeated call signature fires its recipe
(no stage Python) with the same bits; a new signature (16-byte alignment, beta != 0, another
shape), a cleared autotuner cache or a launch hook sends the call through Triton again."""
import pytest
import torch

import study
from study import tritonlaunch

pytestmark = pytest.mark.gpu
DEV = "cuda"
M, N, K = 67, 136, 96   # ragged M and N, K within every stage's Limits (TMA: 16-byte rows)


def triton_stages():
    return [pytest.param(s, id=s.stem) for s in study.all_stages() if s.family == "triton"]


def operands(stage, seed, beta=0.0):
    """(args, kwargs) of one call in the stage's first precision and primary layout."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    if stage.precisions[0] == "fp8":
        a, sa = study.quantize_fp8(torch.randn(M, K, device=DEV, generator=g), "tensor")
        w, sb = study.quantize_fp8(torch.randn(N, K, device=DEV, generator=g), "tensor")
        c = torch.randn(M, N, device=DEV, generator=g).to(torch.bfloat16)
        return (a, w.t(), c), {"scale_a": sa, "scale_b": sb, "beta": beta}
    dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[
        stage.precisions[0]]
    a = torch.randn(M, K, device=DEV, generator=g).to(dtype)
    b = torch.randn(N, K, device=DEV, generator=g).to(dtype).t() if stage.layout == "NT" else \
        torch.randn(K, N, device=DEV, generator=g).to(dtype)
    c = torch.randn(M, N, device=DEV, generator=g).to(dtype)
    return (a, b, c), {"beta": beta}


def through_triton(k, args, kwargs):
    """The same call on Triton's own path (every kept launch dropped first)."""
    tritonlaunch.forget()
    before = dict(tritonlaunch.counts)
    out = k(*args[:2], args[2].clone(), **kwargs)
    assert tritonlaunch.counts["replayed"] == before["replayed"], "forget() left a launch to replay"
    assert tritonlaunch.counts["recipe"] == before["recipe"], "forget() left a recipe to fire"
    return out


@pytest.mark.parametrize("stage", triton_stages())
def test_replayed_call_gives_tritons_bits(stage):
    k = study.kernel("triton", stage.stem)
    for beta in (0.0, 0.5):
        first, kw = operands(stage, 0, beta)
        k(*first, **kw)                              # goes through Triton, kept
        args, kwargs = operands(stage, 1, beta)      # new operands, the same signature
        c0 = args[2].clone()
        before = dict(tritonlaunch.counts)
        out = k(*args[:2], args[2], alpha=1.25, **kwargs)
        torch.cuda.synchronize()
        assert tritonlaunch.counts["replayed"] > before["replayed"], f"{stage.stem} beta={beta}: not replayed"
        assert tritonlaunch.counts["triton"] == before["triton"], f"{stage.stem} beta={beta}: went through Triton"
        ref = through_triton(k, (args[0], args[1], c0), dict(kwargs, alpha=1.25))
        torch.cuda.synchronize()
        assert torch.equal(out, ref), f"{stage.stem} beta={beta}: replayed launch differs from Triton's"


@pytest.mark.parametrize("stage", [p for p in triton_stages() if "fp8" not in p.values[0].precisions])
def test_repeated_call_signature_fires_its_recipe(stage):
    """C allocated (the signature holds no address): new operands fire the recipe. C given with
    beta != 0 (the signature holds every address): the same tensors with new contents do."""
    k = study.kernel("triton", stage.stem)
    for seed in (0, 1):   # the first call is checked, the second records the recipe
        k(*operands(stage, seed)[0][:2])
    a, b, _ = operands(stage, 2)[0]
    before = dict(tritonlaunch.counts)
    out = k(a, b)
    assert tritonlaunch.counts["recipe"] == before["recipe"] + 1, f"{stage.stem}: no recipe fired"
    assert tritonlaunch.counts["triton"] == before["triton"]
    assert torch.equal(out, through_triton(k, (a, b, torch.empty_like(out)), {}))
    a, b, c = operands(stage, 3)[0]
    buf = c.clone()
    for _ in range(2):
        buf.copy_(c)
        k(a, b, buf, alpha=1.5, beta=0.5)
    a.copy_(operands(stage, 4)[0][0])   # new contents, the same addresses
    buf.copy_(c)
    before = dict(tritonlaunch.counts)
    k(a, b, buf, alpha=1.5, beta=0.5)
    assert tritonlaunch.counts["recipe"] == before["recipe"] + 1, f"{stage.stem} beta: no recipe fired"
    assert torch.equal(buf, through_triton(k, (a, b, c), {"alpha": 1.5, "beta": 0.5}))


def test_new_alignment_goes_through_triton():
    """s11 specialises on 16-byte alignment (its VEC and Triton's pointer hints): an operand one
    element off is a new signature, and its result is Triton's."""
    k = study.kernel("triton", "s11")
    g = torch.Generator(device=DEV).manual_seed(3)
    a = torch.randn(M, K + 1, device=DEV, generator=g).to(torch.bfloat16)
    b = torch.randn(K, N, device=DEV, generator=g).to(torch.bfloat16)
    k(a[:, :K], b)
    before = dict(tritonlaunch.counts)
    out = k(a[:, 1:], b)   # the same shape and strides, base 2 bytes past a 16-byte boundary
    assert tritonlaunch.counts["triton"] > before["triton"] and tritonlaunch.counts["replayed"] == before["replayed"]
    ref = through_triton(k, (a[:, 1:], b, torch.empty(M, N, device=DEV, dtype=torch.bfloat16)), {})
    assert torch.equal(out, ref)


def test_cleared_autotuner_or_hook_goes_through_triton():
    from triton import knobs
    from triton.runtime.autotuner import Autotuner

    k = study.kernel("triton", "s12")
    args, kwargs = operands(k.stage, 0)
    k(*args, **kwargs)
    k(*args, **kwargs)
    tuners = [v for v in vars(k.module).values() if isinstance(v, Autotuner)]
    assert tuners
    for at in tuners:
        at.cache.clear()   # as the per-config GPU test does before forcing a config
    before = dict(tritonlaunch.counts)
    k(*args, **kwargs)
    assert tritonlaunch.counts["triton"] > before["triton"] and tritonlaunch.counts["replayed"] == before["replayed"]
    seen = []
    hook = lambda meta: seen.append(meta)   # noqa: E731
    chain = knobs.runtime.launch_enter_hook
    chain.add(hook)   # as a profiler does (Triton 3.6: a HookChain)
    try:
        k(*args, **kwargs)
    finally:
        chain.remove(hook)
    assert seen, "a launch hook added by a profiler must see the launch"
    knobs.runtime.launch_enter_hook = hook   # or set in place of the chain
    try:
        k(*args, **kwargs)
    finally:
        knobs.runtime.launch_enter_hook = chain
    assert len(seen) == 2
