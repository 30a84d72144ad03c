"""Inductor's autotuned Triton GEMM as a baseline, without a GPU: construction refuses clearly,
the compile options and flags are the ones the study promises, the cache goes under the build
directory unless the user chose one, and the plan times Inductor only at its bounded shapes."""
import os

import pytest
import torch

import study
from study import inductor, plan
from study.operands import Problem


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU refusal")
@pytest.mark.parametrize("precision", ["fp16", "bf16", "tf32", "fp32", "fp8"])
def test_refuses_without_gpu(precision):
    with pytest.raises(RuntimeError, match=rf"^inductor {precision} cannot run here: no CUDA GPU"):
        study.kernel("inductor", precision, layout="NT")


def test_bad_names():
    with pytest.raises(ValueError, match=r"^name: Inductor precision must be one of"):
        study.kernel("inductor", "fp64")
    with pytest.raises(ValueError, match=r"^layout must be one of"):
        study.kernel("inductor", "bf16", layout="TT")
    with pytest.raises(ValueError, match=r"^layout: inductor fp8 takes NT only"):
        study.kernel("inductor", "fp8", layout="NN")
    with pytest.raises(ValueError, match=r"^config: only CUDA"):
        study.kernel("inductor", "bf16", config=0)
    with pytest.raises(ValueError, match=r"^fast_accum: only fp8"):
        study.kernel("inductor", "bf16", fast_accum=True)


@pytest.fixture
def fake_gpu(monkeypatch):
    """A GPU as far as construction is concerned; Inductor's global state restored after."""
    import torch._dynamo

    from study import device

    monkeypatch.setattr(device, "capability", lambda: (9, 0))
    cfg = torch._dynamo.config   # a config module: monkeypatch's undo would delete its names
    saved = {n: getattr(cfg, n) for n in ("recompile_limit", "accumulated_recompile_limit") if hasattr(cfg, n)}
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    yield monkeypatch
    for name, value in saved.items():
        setattr(cfg, name, value)


def test_construction_and_cache_dir(fake_gpu):
    import torch._dynamo

    from study.registry import STATE_ROOT

    k = study.kernel("inductor", "bf16", layout="NT")
    assert (k.family, k.name, k.precisions, k.layout) == ("inductor", "bf16", ("bf16",), "NT")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(STATE_ROOT / "build" / "inductor")
    cfg = torch._dynamo.config
    limit = cfg.recompile_limit if hasattr(cfg, "recompile_limit") else cfg.cache_size_limit
    assert limit >= inductor.RECOMPILE_LIMIT
    assert study.kernel("inductor", "fp8").layout == "NT" and study.kernel("inductor", "fp16").layout == "NN"
    fake_gpu.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere/else")   # the user's choice is kept
    study.kernel("inductor", "fp16")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/somewhere/else"


def test_compile_options(fake_gpu):
    """Triton templates only, max-autotune, no Inductor CUDA graphs, fullgraph, static shapes."""
    seen = []
    fake_gpu.setattr(torch, "compile", lambda fn, **kw: seen.append(kw) or fn)
    k = study.kernel("inductor", "fp16", layout="NT")
    k.compiled.fn(True, True)
    k.compiled.fn(True, True)       # cached: one compile per kind of call
    k.compiled.fn(False, False)
    assert len(seen) == 2
    for kw in seen:
        assert kw["fullgraph"] is True and kw["dynamic"] is False
        assert kw["options"] == {"max_autotune": True, "max_autotune_gemm_backends": "TRITON",
                                 "triton.cudagraphs": False}


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
def test_tf32_flag_set_for_the_call_and_restored(fake_gpu, precision):
    k = study.kernel("inductor", precision, layout="NT")
    m = torch.backends.cuda.matmul
    during = []
    k.compiled = lambda a, b, c, alpha, beta, scales=None: during.append(
        (m.allow_tf32, m.allow_fp16_reduced_precision_reduction, m.allow_bf16_reduced_precision_reduction))
    before = (m.allow_tf32, m.allow_fp16_reduced_precision_reduction, m.allow_bf16_reduced_precision_reduction)
    k._run(Problem(2, 2, 2, 2, 2, 2, precision, "NT"), None, None, None, 1.0, 0.0)
    assert during == [(precision == "tf32", False, False)]
    assert (m.allow_tf32, m.allow_fp16_reduced_precision_reduction, m.allow_bf16_reduced_precision_reduction) == before


def test_gemm_bodies_on_cpu():
    """The functions Inductor compiles, run eagerly: C = alpha * A @ B + beta * C into c."""
    g = torch.Generator().manual_seed(0)
    a, b, c0 = (torch.randn(*s, generator=g) for s in ((5, 8), (8, 6), (5, 6)))
    for alpha_one, beta_zero, alpha, beta in ((True, True, 1.0, 0.0), (False, False, 1.5, -0.5)):
        c = c0.clone()
        inductor._gemm_fn(alpha_one, beta_zero)(a, b, c, alpha, beta)
        assert torch.allclose(c, alpha * (a @ b) + beta * c0, atol=1e-5)
    from conftest import cpu_rowwise_scaled_mm_unsupported

    # row-wise scales where this torch's CPU _scaled_mm takes them (2.13), else per tensor (2.11)
    gran = "tensor" if cpu_rowwise_scaled_mm_unsupported() else "row"
    a8, sa = study.quantize_fp8(torch.randn(5, 32, generator=g), gran)
    w8, sb = study.quantize_fp8(torch.randn(16, 32, generator=g), gran)
    sa_, sb_ = (sa.reshape(5, 1), sb.reshape(1, 16)) if gran == "row" else (sa.reshape(()), sb.reshape(()))
    ref = (a8.double() * sa.double().reshape(-1, 1)) @ (w8.double() * sb.double().reshape(-1, 1)).t()
    for alpha_one, beta_zero, alpha, beta in ((True, True, 1.0, 0.0), (False, False, 2.0, 0.5)):
        c = torch.ones(5, 16, dtype=torch.bfloat16)
        inductor._scaled_fn(alpha_one, beta_zero, False)(a8, w8.t(), c, sa_, sb_, alpha, beta)
        want = alpha * ref + beta * 1.0
        assert float((c.double() - want).norm() / want.norm()) < 1e-2


def test_plan_times_inductor_at_its_bounded_shapes_only():
    groups = plan.plan()
    ind = [e for es in groups.values() for e in es if e.family == "inductor"]
    assert {e.precision for e in ind} == set(plan.INDUCTOR_PRECISIONS) and all(e.layout == "NT" for e in ind)
    assert all(e.kind == "baseline" for e in ind)
    for explicit, shapes in ((False, plan.default_shapes()), (True, plan.parse_shapes(["squares", "layers", "2048"]))):
        for p, es in groups.items():
            scope = plan.group_shapes(p, es, plan.with_k_sweep(p, shapes, not explicit), explicit)
            for e in es:
                if e.family != "inductor":
                    continue
                allowed = set(plan.INDUCTOR_FP8_SHAPES if p == "fp8" else plan.INDUCTOR_SHAPES)
                got = {(s.M, s.N, s.K) for s in scope[e.label]}
                assert got <= allowed, (e.label, got - allowed)
                if not explicit:
                    assert got == allowed & {(s.M, s.N, s.K) for s in shapes}
    assert (4096, 4096, 4096) in plan.INDUCTOR_SHAPES and (8192, 8192, 8192) in plan.INDUCTOR_SHAPES
    assert {(m, n, k) for m in (1, 16, 128) for n, k in plan.WEIGHTS} <= set(plan.INDUCTOR_SHAPES)
    assert len(plan.INDUCTOR_SHAPES) == 14


def test_plan_filters_with_inductor():
    assert all(e.family != "inductor" for es in plan.plan(families=["cuda"]).values() for e in es)
    only = plan.plan(["bf16"], families=["inductor"])
    assert [e.family for e in only["bf16"]] == ["inductor"]
    groups, _ = plan.select(families=("inductor",), precisions=("fp16",))
    assert [e.family for e in groups["fp16"]] == ["inductor"]
    # a stage filter that picks nothing in a group adds no Inductor autotune there
    g = plan.plan(["fp16"], stages=["s01_naive"])
    assert all(e.family != "inductor" for e in g.get("fp16", []))
