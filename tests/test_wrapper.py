"""The kernel wrapper (kernels.Kernel.__call__) without a GPU, issue 19's "Wrapper" findings:
c's version counter bumped after a raw-pointer write, one beta == 0 rule (float32) for every
family, limits and architecture checked on the operands' GPU, the TF32 flag set through the API
the caller uses, and int32 bounds on every offset a kernel forms. CUDA paths are driven with fake
modules and a fake `torch.cuda.device`; the Triton stage runs under the interpreter in a
subprocess."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from study import device, kernels, registry
from study.kernels import CublasKernel, CudaKernel, InductorKernel, TritonKernel
from study.operands import INT32_MAX, Problem, check_operands

ROOT = Path(__file__).resolve().parent.parent
TINY = 1e-46   # nonzero in double, 0 in float32


def fake(cls, name="s01_naive", precision="fp32", layout="NN", **attrs):
    """A kernel of `cls` without construction (no build, no GPU), taking CPU tensors."""
    k = object.__new__(cls)
    if cls in (CudaKernel, TritonKernel):
        k.stage = registry.find(cls.family, name)
        k.name, k.precisions, k.layout, k.config = k.stage.stem, k.stage.precisions, k.stage.layout, None
        k.layouts = k.stage.layouts
    else:
        k.name, k.precisions, k.layout, k.layouts = precision, (precision,), layout, (layout,)
    k._allow_cpu = lambda: True
    for key, value in attrs.items():
        setattr(k, key, value)
    return k


@pytest.fixture
def no_stream(monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_stream", lambda dev=None: SimpleNamespace(cuda_stream=0))


def fake_cuda(launches, why=""):
    module = SimpleNamespace(check_fp32=lambda *args: why, launch_fp32=lambda *args: launches.append(args))
    return fake(CudaKernel, module=module)


def fake_triton(calls):
    return fake(TritonKernel, module=SimpleNamespace(matmul=lambda a, b, c, **kw: calls.append(kw)))


def operands(M=3, K=4, N=5, c_fill=0.0):
    return torch.randn(M, K), torch.randn(K, N), torch.full((M, N), c_fill)


# --- 1. the version counter -------------------------------------------------------------------

def test_raw_pointer_writes_bump_the_version(no_stream):
    for k in (fake_cuda([]), fake_triton([])):
        a, b, c = operands()
        before = c._version
        k(a, b, c)
        assert c._version > before, f"{k.family}: c's version counter unchanged after the call"


TRITON_PROBE = """
import json, torch, study
k = study.kernel("triton", "s01")
g = torch.Generator().manual_seed(0)
a, b = torch.randn(5, 7, generator=g), torch.randn(7, 6, generator=g)
c = torch.zeros(5, 6)
v = c._version
k(a, b, c)
bumped = c._version > v
nan = torch.full((5, 6), float("nan"))
k(a, b, nan, beta=1e-46)   # 0 in float32: C must not be read
print(json.dumps({"bumped": bumped, "finite": bool(torch.isfinite(nan).all()),
                  "err": float((nan - a @ b).abs().max())}))
"""


def test_triton_stage_under_interpreter_bumps_version_and_skips_c(tmp_path):
    pytest.importorskip("triton")
    from conftest import interp_unusable

    if interp_unusable():
        pytest.skip(interp_unusable())
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONPATH=str(ROOT), TRITON_INTERPRET="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-c", TRITON_PROBE], capture_output=True, text=True, cwd=ROOT,
                         env=env, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["bumped"], "triton: c's version counter unchanged after the call"
    assert got["finite"] and got["err"] < 1e-4, "triton read C with beta = 1e-46 (0 in float32)"


# --- 2. one beta == 0 rule: float32(beta) == 0 --------------------------------------------------

@pytest.mark.parametrize("beta", [0.0, -0.0, 1e-46, -1e-46, 2.0**-150, 2.0**-149, 1e-45, 1e-30, 0.5, 1e40])
def test_beta_is_zero_is_float32_rounding(beta):
    from study.operands import beta_is_zero

    assert beta_is_zero(beta) == (torch.tensor(beta, dtype=torch.float64).float().item() == 0)


def test_every_family_gets_the_float32_decision(no_stream):
    launches, calls, seen = [], [], []
    inductor = fake(InductorKernel, compiled=lambda a, b, c, alpha, beta, scales=None: seen.append(beta))
    for beta, want in ((TINY, 0.0), (1e-30, 1e-30), (0.5, 0.5)):
        a, b, c = operands()
        fake_cuda(launches)(a, b, c, beta=beta)
        fake_triton(calls)(a, b, c, beta=beta)
        inductor(a, b, c, beta=beta)
        assert launches[-1][10] == want and calls[-1]["beta"] == want and seen[-1] == want, beta


def test_cublas_path_and_k0_do_not_read_c_when_beta_rounds_to_zero():
    a, b, c = operands(c_fill=float("nan"))
    fake(CublasKernel)(a, b, c, beta=TINY)
    assert torch.isfinite(c).all() and torch.allclose(c, a @ b, atol=1e-5)
    a0, b0, c0 = operands(K=0, c_fill=float("nan"))
    fake(CublasKernel)(a0, b0, c0, beta=TINY)   # K == 0: C = beta * C, and beta is 0
    assert (c0 == 0).all()
    # and c=None takes it as 0, as every kernel would
    assert check_operands(("fp32",), "NN", a, b, None, 1.0, TINY, allow_cpu=True).M == 3


# --- 3. limits and architecture checked on the operands' GPU -------------------------------------

@pytest.fixture
def two_gpus(monkeypatch, no_stream):
    """GPU 0 and GPU 1 as far as the wrapper can see: a fake torch.cuda.device that records the
    current index, capabilities per index, operands a and b that say they live on cuda:1."""
    current = []

    @contextlib.contextmanager
    def cuda_device(dev):
        current.append(torch.device(dev).index)
        try:
            yield
        finally:
            current.pop()

    caps = {0: (9, 0), 1: (9, 0)}
    monkeypatch.setattr(torch.cuda, "device", cuda_device)
    monkeypatch.setattr(device, "capability", lambda index=0: caps[index])
    monkeypatch.setattr(kernels, "check_operands", lambda precs, layouts, *args, **kw: Problem(
        2, 2, 2, 2, 2, 2, precs[0], layouts[0]))
    on1 = SimpleNamespace(device=torch.device("cuda", 1), data_ptr=lambda: 0)
    return SimpleNamespace(current=current, caps=caps, a=on1, b=on1)


def test_limits_are_checked_on_the_operands_gpu(two_gpus):
    seen = []
    k = fake(CudaKernel, module=SimpleNamespace(
        check_fp32=lambda *args: seen.append(two_gpus.current[-1] if two_gpus.current else None) or "too big"))
    with pytest.raises(ValueError, match="too big"):
        k(two_gpus.a, two_gpus.b, torch.zeros(2, 2))
    t = fake(TritonKernel, module=SimpleNamespace(
        unsupported=lambda *args, **kw: seen.append(two_gpus.current[-1] if two_gpus.current else None) or "too big"))
    with pytest.raises(ValueError, match="too big"):
        t(two_gpus.a, two_gpus.b, torch.zeros(2, 2))
    assert seen == [1, 1], "limits checked with GPU 0 current, not the operands' GPU 1"


def test_architecture_is_the_operands_gpus(two_gpus):
    launches = []
    two_gpus.caps[1] = (8, 0)
    with pytest.raises(RuntimeError, match=r"cannot run on cuda:1: it is compiled for GPU 0 \(sm_90\)"):
        fake_cuda(launches)(two_gpus.a, two_gpus.b, torch.zeros(2, 2))
    calls = []
    with pytest.raises(RuntimeError, match=r"cannot run on cuda:1: needs sm_90a"):
        fake(TritonKernel, "s12_tma_wgmma", module=SimpleNamespace(matmul=lambda *a, **kw: calls.append(kw)))(
            two_gpus.a, two_gpus.b, torch.zeros(2, 2))
    with pytest.raises(RuntimeError, match=r"cannot run on cuda:1: fp8 needs sm_89"):
        fake(CublasKernel, precision="fp8", layout="NT")(two_gpus.a, two_gpus.b, torch.zeros(2, 2))
    assert not launches and not calls
    two_gpus.caps[1] = (9, 0)   # the same architecture as GPU 0: runs, with GPU 1 current
    seen = []
    k = fake(CudaKernel, module=SimpleNamespace(check_fp32=lambda *args: "",
                                                launch_fp32=lambda *args: seen.append(two_gpus.current[-1])))
    k(two_gpus.a, two_gpus.b, torch.zeros(2, 2))
    assert seen == [1]


# --- 4. the TF32 flag, whichever API the caller uses ---------------------------------------------

@pytest.fixture
def fp32_precision_api():
    m = torch.backends.cuda.matmul
    if not hasattr(m, "fp32_precision"):
        pytest.skip("torch < 2.9: no fp32_precision API")
    m.fp32_precision = "tf32"   # the caller moved to the new API: reading allow_tf32 now raises
    yield m
    m.fp32_precision = "none"


@pytest.mark.parametrize("precision,want", [("tf32", "tf32"), ("fp32", "ieee")])
def test_flags_after_fp32_precision(fp32_precision_api, precision, want):
    from study.torchflags import matmul_flags, restore_flags

    m = fp32_precision_api
    saved = matmul_flags(precision)
    assert m.fp32_precision == want
    assert not m.allow_fp16_reduced_precision_reduction and not m.allow_bf16_reduced_precision_reduction
    restore_flags(saved)
    assert m.fp32_precision == "tf32"


def test_cublas_call_after_fp32_precision(fp32_precision_api):
    a, b, c = operands()
    fake(CublasKernel)(a, b, c, alpha=2.0, beta=0.5)
    assert fp32_precision_api.fp32_precision == "tf32"


# --- 5. int32: every offset a kernel forms, up to the row pointer one past the end --------------

def meta(*shape, stride=None):
    return torch.empty_strided(shape, stride or (shape[1], 1), dtype=torch.float32, device="meta")


OVER = [  # rows * ld = 2**31 while the last element, (rows - 1) * ld + cols - 1, is still <= INT32_MAX
    ("a", lambda: (meta(2**15, 2**16), meta(2**16, 4), None), "NN"),
    ("a", lambda: (meta(2**14, 100, stride=(2**17, 1)), meta(100, 4), None), "NN"),  # padded rows
    ("b", lambda: (meta(8, 2**15), meta(2**15, 2**16), None), "NN"),
    ("b", lambda: (meta(8, 2**16), meta(2**15, 2**16).t(), None), "NT"),
    ("c", lambda: (meta(2**15, 4), meta(4, 2**16), meta(2**15, 2**16)), "NN"),
    ("c", lambda: (meta(2**15, 4), meta(4, 100), meta(2**15, 100, stride=(2**16, 1))), "NN"),
]


@pytest.mark.parametrize("which,make,layout", OVER)
def test_int32_bound_covers_the_row_past_the_end(which, make, layout):
    a, b, c = make()
    t = {"a": a, "b": b, "c": c}[which]
    rows, cols = t.shape if not (which == "b" and layout == "NT") else t.t().shape
    assert (rows - 1) * max(t.stride()) + cols - 1 <= INT32_MAX < rows * max(t.stride())
    with pytest.raises(ValueError, match=rf"^{which} is too large: .*int32"):
        check_operands(("fp32",), layout, a, b, c, allow_cpu=False)


def test_int32_bound_just_inside():
    a, b, c = meta(2**15 - 1, 2**16), meta(2**16, 2**15 - 1), meta(2**15 - 1, 2**15 - 1)
    with pytest.raises(ValueError, match=r"^a must be a CUDA tensor"):   # past the size checks
        check_operands(("fp32",), "NN", a, b, c, allow_cpu=False)


# --- on a GPU (next GPU session): the same rules through the real launchers ----------------------

@pytest.mark.gpu
@pytest.mark.parametrize("family,name", [("cuda", "s01"), ("triton", "s01"), ("cublas", "fp32")])
def test_gpu_tiny_beta_skips_c_and_bumps_version(family, name):
    import study

    k = study.kernel(family, name)
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(33, 17, generator=g).cuda(), torch.randn(17, 29, generator=g).cuda()
    c = torch.full((33, 29), float("nan"), device="cuda")
    before = c._version
    k(a, b, c, beta=TINY)   # 0 in float32: no family reads the NaNs
    assert c._version > before
    torch.testing.assert_close(c.cpu(), a.cpu() @ b.cpu(), rtol=1e-4, atol=1e-4)


def test_checks_paid_once_per_signature(monkeypatch, no_stream):
    """A second call with operands of the same shapes, strides, dtypes, device and 16-byte
    alignment (and, with C given, the same three addresses) skips the checks that passed for the
    first; anything else (another alignment, shape or C, a non-float scalar) takes the full path
    again, so a refusal is never skipped."""
    launches, seen = [], []
    k = fake_cuda(launches)
    real = kernels.check_operands
    monkeypatch.setattr(kernels, "check_operands", lambda *a, **kw: seen.append(1) or real(*a, **kw))
    a, b, c = operands(M=8, K=8, N=8)
    k(a, b)
    k(a.clone(), b.clone())
    assert len(seen) == 1 and len(launches) == 2
    k(a, b, c)                                    # C given: checked once for these addresses
    k(a, b, c, beta=0.5)
    assert k(a, b, c, beta=0.5) is c and len(seen) == 3
    k(a, b, c.clone())                            # another C: its overlap is checked again
    k(a, b, alpha=2)                              # an int alpha
    k(torch.randn(8, 9)[:, 1:], b)                # another 16-byte alignment of a
    k(torch.randn(16, 8), b)                      # another shape
    assert len(seen) == 7 and len(launches) == 9
    with pytest.raises(ValueError, match="overlap"):
        k(a, b, a)                                # C on top of A: refused, and never cached
    with pytest.raises(ValueError, match="requires grad"):
        k(a.clone().requires_grad_(True), b)      # refused before the cache is looked at
    refusing = fake_cuda(launches, why="lda must be a multiple of 4")
    for _ in range(2):                            # a refusal is never cached
        with pytest.raises(ValueError, match="lda must be a multiple of 4"):
            refusing(a, b)
