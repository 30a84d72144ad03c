"""fp8 on the GPU (marker gpu): every fp8 kernel (the stages whose Dtype names fp8, both families;
cuBLAS through torch._scaled_mm; Inductor) against the fp64 product of the dequantised operands,
at ragged shapes within the Limits, per-tensor and per-row scales, alpha/beta, promoted and fast
accumulation; bad scales refused before any launch; bitwise determinism; a kernel that drops a
K tile fails the check; the study's own path (harness operands, Timer.check) passes."""
import math

import pytest
import torch

import study
from study import fp8, plan, tolerance

pytestmark = pytest.mark.gpu
DEV = "cuda"
# Within s15's Limits (K % 16 == 0 for 16-byte TMA rows of a contiguous A and B; any M, N) and
# cuBLAS's (K and N multiples of 16 too): ragged M and N where the kernel allows them.
SHAPES = [(1, 16, 16), (67, 45, 48), (129, 131, 272), (255, 257, 1024), (1000, 1000, 1008), (67, 45, 16384),
          (3, 4100, 1040),   # decode-like: CUDA s15 picks its 128x128 tiles (as at 1000^3)
          (1000, 2600, 272),  # its 128x192 tiles on 132 SMs (H100, H200): N ragged against 192
          (900, 3112, 272)]   # and its 128x128 tiles there: M and N ragged
CUBLAS_SHAPES = [(1, 16, 16), (67, 48, 48), (129, 144, 272), (1000, 1008, 1008), (67, 64, 16384)]
ALPHA_BETA = [(1.0, 0.0), (1.5, 0.5), (-2.0, 1.0)]


def stages():
    return [s for s in study.all_stages() if "fp8" in s.precisions]


def kernels():
    out = []
    for s in stages():
        for fast in (False, True):
            out.append(pytest.param((s.family, s.stem, fast), id=f"{s.family}-{s.stem}{'-fast' if fast else ''}"))
    return out


def make(M, N, K, granularity, seed=0):
    g = torch.Generator(device=DEV).manual_seed(seed)
    a8, sa = study.quantize_fp8(torch.randn(M, K, device=DEV, generator=g) * K ** -0.25, granularity)
    w8, sb = study.quantize_fp8(torch.randn(N, K, device=DEV, generator=g) * K ** -0.25, granularity)
    return a8, w8.t(), sa, sb


def run_checked(f, M, N, K, granularity, alpha=1.0, beta=0.0, seed=0):
    a, b, sa, sb = make(M, N, K, granularity, seed)
    g = torch.Generator(device=DEV).manual_seed(seed + 1)
    c = (torch.randn(M, N, device=DEV, generator=g).to(torch.bfloat16) if beta
         else torch.full((M, N), math.nan, device=DEV, dtype=torch.bfloat16))
    c0 = c.clone()
    out = f(a, b, c, alpha=alpha, beta=beta, scale_a=sa, scale_b=sb)
    torch.cuda.synchronize()
    assert out is c
    A, B = fp8.dequantize(a, sa), fp8.dequantize(b.t(), sb).t()
    return tolerance.check(c, A, B, c0 if beta else None, alpha, beta, "fp8", fast_accum=f.fast_accum,
                           what=f"{f!r} {M}x{N}x{K} {granularity} a{alpha} b{beta}")


def kernel_of(spec):
    family, stem, fast = spec
    try:
        return study.kernel(family, stem, fast_accum=fast)
    except RuntimeError as exc:
        pytest.skip(str(exc).splitlines()[0])


@pytest.mark.parametrize("spec", kernels())
@pytest.mark.parametrize("granularity", plan.FP8_SCALINGS)
def test_stage_fp8(spec, granularity):
    f = kernel_of(spec)
    for M, N, K in SHAPES:
        run_checked(f, M, N, K, granularity)
    for alpha, beta in ALPHA_BETA[1:]:
        run_checked(f, 129, 131, 272, granularity, alpha, beta, seed=2)


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("granularity", plan.FP8_SCALINGS)
def test_cublas_fp8(fast, granularity):
    f = study.kernel("cublas", "fp8", fast_accum=fast)
    for M, N, K in CUBLAS_SHAPES:
        run_checked(f, M, N, K, granularity)
    for alpha, beta in ALPHA_BETA[1:]:
        run_checked(f, 129, 144, 272, granularity, alpha, beta, seed=3)
    a, b, sa, sb = make(64, 40, 64, granularity)   # N = 40: torch._scaled_mm's limit, refused up front
    with pytest.raises(ValueError, match="multiples of 16"):
        f(a, b, scale_a=sa, scale_b=sb)


@pytest.mark.parametrize("granularity", plan.FP8_SCALINGS)
def test_inductor_fp8(granularity):
    f = study.kernel("inductor", "fp8")
    run_checked(f, 256, 512, 1024, granularity)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_inductor_half(precision):
    """Inductor's Triton GEMM (max-autotune, Triton templates) on NT bf16/fp16, vs fp64."""
    f = study.kernel("inductor", precision, layout="NT")
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    g = torch.Generator(device=DEV).manual_seed(0)
    a = torch.randn(256, 512, device=DEV, generator=g).to(dt)
    w = torch.randn(384, 512, device=DEV, generator=g).to(dt)
    c = f(a, w.t())
    tolerance.check(c, a, w.t(), precision=precision)
    c0 = torch.randn(256, 384, device=DEV, generator=g).to(dt)
    c = c0.clone()
    f(a, w.t(), c, alpha=1.5, beta=0.5)
    tolerance.check(c, a, w.t(), c0, 1.5, 0.5, precision)


def test_bad_scales_refused_on_gpu():
    k = study.kernel("cublas", "fp8")
    a, b, sa, sb = make(64, 64, 64, "row")
    for kw, exc, pattern in [
            (dict(scale_a=sa.cpu()), ValueError, "^scale_a must be on the device of a"),
            (dict(scale_b=sb.double()), TypeError, "^scale_b must have dtype float32"),
            (dict(scale_a=sa[::2]), ValueError, "^scale_a must have 1 element"),
            (dict(scale_b=torch.ones(128, device=DEV)[::2]), ValueError, "^scale_b must be contiguous"),
            (dict(scale_a=None), TypeError, "^scale_a is required")]:
        for f in [k] + [kernel_of((s.family, s.stem, False)) for s in stages()]:
            with pytest.raises(exc, match=pattern):
                f(a, b, **{"scale_a": sa, "scale_b": sb, **kw})
    with pytest.raises(ValueError, match="^scale_a: only fp8 kernels take scales"):
        study.kernel("cublas", "bf16")(a.bfloat16(), b.bfloat16(), scale_a=sa)


@pytest.mark.parametrize("spec", kernels())
def test_fp8_deterministic(spec):
    f = kernel_of(spec)
    a, b, sa, sb = make(1000, 1000, 4096, "row")
    first = f(a, b, scale_a=sa, scale_b=sb)
    for _ in range(4):
        assert torch.equal(f(a, b, scale_a=sa, scale_b=sb), first)


@pytest.mark.parametrize("spec", [p for p in kernels() if not p.values[0][2]])
def test_dropped_k_tile_fails(spec):
    """A kernel that drops one K tile of 128 (the real kernel run on K - 128, checked against the
    full product) fails the fp8 check: the tolerance is tight enough to see it."""
    f = kernel_of(spec)
    M, N, K = 256, 256, 2048
    a, b, sa, sb = make(M, N, K, "tensor")
    c = f(a[:, :K - 128], b[:K - 128], scale_a=sa, scale_b=sb)
    A, B = fp8.dequantize(a, sa), fp8.dequantize(b.t(), sb).t()
    with pytest.raises(AssertionError):
        tolerance.check(c, A, B, precision="fp8")


def test_cuda_configs():
    cuda = [s for s in stages() if s.family == "cuda"]
    if not cuda:
        pytest.skip("no CUDA fp8 stage")
    k = kernel_of(("cuda", cuda[0].stem, False))
    names = k.configs()
    assert "fast_accum" in names and k.config is None and not k.fast_accum
    fast = study.kernel("cuda", cuda[0].stem, fast_accum=True)
    assert fast.config == names.index("fast_accum") and fast.fast_accum
    assert study.kernel("cuda", cuda[0].stem, config=names.index("fast_accum")).fast_accum


def test_study_path_fp8():
    """The sweep's own path: harness Operands (quantised randn, both scalings) and Timer.check
    with the bound of each entry's accumulation."""
    from study.harness import L2Flush, Operands, Timer
    from study.measure import make_call

    flush = L2Flush()
    entries = [e for e in plan.plan(["fp8"])["fp8"] if e.family != "inductor"]
    for sc in plan.FP8_SCALINGS:
        ops = Operands(1024, 1024, 4096, "fp8", scaling=sc)
        for e in (e for e in entries if e.scaling == sc):
            try:
                call = make_call(e)
            except RuntimeError as exc:
                pytest.skip(str(exc).splitlines()[0])
            t = Timer(call, ops, e.layout, flush)
            t.warm()
            err, tol, problems = t.check()
            assert err <= tol and not problems, (e.label, err, tol, problems)
            assert tol == tolerance.bound("fp8", 4096, fast_accum=e.kind == plan.FAST_ACCUM)
            t.release()
