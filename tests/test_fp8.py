"""The fp8 precision without a GPU: quantisation, argument checking (scales), the generated
binding, the tolerance model (a dropped K tile fails; FP8 fast accumulation is bounded apart),
cuBLAS's torch._scaled_mm path on CPU tensors, harness operands, the plan's fp8 group, and the
reports rendered from a recorded fixture with fp8 (and Inductor) rows."""
import math
import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch

import study
from study import binding, fp8, plan, registry, tolerance
from study.operands import check_operands

E4M3 = torch.float8_e4m3fn
FIXTURE = Path(__file__).parent / "data" / "reports_fixture"


def q(M, N, K, granularity="tensor", seed=0):
    """(a8, b = w8.t(), sa, sb) quantised from seeded randn."""
    g = torch.Generator().manual_seed(seed)
    a8, sa = study.quantize_fp8(torch.randn(M, K, generator=g), granularity)
    w8, sb = study.quantize_fp8(torch.randn(N, K, generator=g), granularity)
    return a8, w8.t(), sa, sb


# --- quantize_fp8 --------------------------------------------------------------------------

@pytest.mark.parametrize("granularity", ["tensor", "row"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_quantize_round_trip(granularity, dtype):
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(37, 200, generator=g) * torch.logspace(-3, 3, 37)[:, None]).to(dtype)
    x8, scale = study.quantize_fp8(x, granularity)
    assert x8.dtype == E4M3 and x8.shape == x.shape and scale.dtype == torch.float32
    assert scale.shape == ((37,) if granularity == "row" else ()) and scale.is_contiguous()
    # absmax lands on 448 (row by row for "row")
    amax = x8.float().abs().amax(dim=1) if granularity == "row" else x8.float().abs().amax()
    assert torch.all(amax == fp8.E4M3_MAX)
    back = fp8.dequantize(x8, scale)
    xd = x.double()
    # e4m3: 3 stored mantissa bits, round to nearest: |error| <= 2^-4 |x|, plus half the
    # smallest subnormal (2^-10) times the scale near zero
    s = scale.double().reshape(-1, 1) if granularity == "row" else scale.double()
    assert torch.all((back - xd).abs() <= 2.0**-4 * xd.abs() + 2.0**-10 * s + 1e-300)


def test_quantize_edge_cases():
    x = torch.zeros(3, 8)
    x[1] = torch.arange(8) - 3.0
    x8, s = study.quantize_fp8(x, "row")
    assert s[0] == 1.0 and s[2] == 1.0 and float(s[1]) == pytest.approx(4 / 448)   # all-zero rows: scale 1
    back = fp8.dequantize(x8, s)
    assert torch.equal(back[[0, 2]], torch.zeros(2, 8, dtype=torch.float64))
    assert float(back[1, -1]) == pytest.approx(4.0) and torch.allclose(back[1], x[1].double(), rtol=2.0**-4, atol=0)
    with pytest.raises(ValueError, match="granularity"):
        study.quantize_fp8(x, "column")
    with pytest.raises(TypeError, match="dtype"):
        study.quantize_fp8(x.double())
    with pytest.raises(ValueError, match="finite"):
        study.quantize_fp8(torch.tensor([[1.0, math.inf]]))
    with pytest.raises(ValueError, match="2-D"):
        study.quantize_fp8(torch.ones(2, 2, 2), "row")
    # a quotient a hair over 448 must clamp, not turn into NaN
    big = torch.tensor([448.0, 448.0 * (1 + 2**-20), 3.0])
    x8, s = study.quantize_fp8(big)
    assert torch.isfinite(x8.float()).all()


# --- argument checking -----------------------------------------------------------------------

FP8 = ("fp8",)


def ok(a, b, c=None, **kw):
    return check_operands(FP8, "NT", a, b, c, allow_cpu=True, **kw)


@pytest.mark.parametrize("sa_shape,sb_shape,flags", [
    ((), (), (0, 0)), ((1,), (1, 1), (0, 0)), ((5,), (7,), (1, 1)), ((5, 1), (1, 7), (1, 1)),
    ((5,), (), (1, 0)), ((1, 1), (7,), (0, 1))])
def test_good_scales(sa_shape, sb_shape, flags):
    a, b, _, _ = q(5, 7, 32)
    p = ok(a, b, scale_a=torch.ones(sa_shape), scale_b=torch.ones(sb_shape))
    assert (p.precision, p.M, p.N, p.K, p.ldb) == ("fp8", 5, 7, 32, 32)
    assert (p.scale_a_per_row, p.scale_b_per_col) == flags
    c = torch.empty(5, 7, dtype=torch.bfloat16)
    assert ok(a, b, c, scale_a=torch.ones(()), scale_b=torch.ones(())).ldc == 7


BAD_SCALES = [
    ("scale_a-missing", TypeError, r"^scale_a is required", dict(scale_a=None)),
    ("scale_b-missing", TypeError, r"^scale_b is required", dict(scale_b=None)),
    ("scale_a-not-tensor", TypeError, r"^scale_a must be a torch.Tensor", dict(scale_a=1.0)),
    ("scale_a-fp16", TypeError, r"^scale_a must have dtype float32, got float16", dict(scale_a=torch.ones((), dtype=torch.float16))),
    ("scale_b-fp64", TypeError, r"^scale_b must have dtype float32", dict(scale_b=torch.ones(7, dtype=torch.float64))),
    ("scale_a-row-vector", ValueError, r"^scale_a must have 1 element .* \(5,\) or \(5, 1\)", dict(scale_a=torch.ones(1, 5))),
    ("scale_b-column", ValueError, r"^scale_b must have 1 element .* \(7,\) or \(1, 7\)", dict(scale_b=torch.ones(7, 1))),
    ("scale_a-too-long", ValueError, r"^scale_a must have 1 element", dict(scale_a=torch.ones(6))),
    ("scale_b-of-M", ValueError, r"^scale_b must have 1 element", dict(scale_b=torch.ones(5))),
    ("scale_a-3d", ValueError, r"^scale_a must have 1 element", dict(scale_a=torch.ones(1, 1, 1))),
    ("scale_a-strided", ValueError, r"^scale_a must be contiguous", dict(scale_a=torch.ones(10)[::2])),
    ("scale_b-strided", ValueError, r"^scale_b must be contiguous", dict(scale_b=torch.ones(1, 14)[:, ::2])),
    ("scale_a-device", ValueError, r"^scale_a must be on the device of a", dict(scale_a=torch.empty((), device="meta"))),
]


@pytest.mark.parametrize("exc,pattern,kw", [pytest.param(*b[1:], id=b[0]) for b in BAD_SCALES])
def test_bad_scales(exc, pattern, kw):
    a, b, sa, sb = q(5, 7, 32)
    with pytest.raises(exc, match=pattern):
        ok(a, b, **{"scale_a": sa, "scale_b": sb, **kw})


def test_fp8_operands_refused():
    a, b, sa, sb = q(5, 7, 32)
    s = dict(scale_a=sa, scale_b=sb)
    with pytest.raises(TypeError, match=r"^c must have dtype bfloat16 \(this fp8 kernel's output type\), got float8"):
        ok(a, b, torch.empty(5, 7, dtype=E4M3), **s)
    with pytest.raises(TypeError, match=r"^c must have dtype float16 .*got bfloat16"):
        ok(a, b, torch.empty(5, 7, dtype=torch.bfloat16), out_dtype=torch.float16, **s)
    with pytest.raises(TypeError, match=r"^b must have the dtype of a"):
        ok(a, b.to(torch.bfloat16), **s)
    with pytest.raises(TypeError, match=r"^a must have dtype float8_e4m3fn"):
        ok(a.float(), b.float(), **s)
    with pytest.raises(ValueError, match=r"^b must be the transposed view"):
        ok(a, b.contiguous(), **s)      # NN: no FP8 kernel takes it, nothing is copied
    # scales given to a kernel of another precision: refused, never ignored
    x = torch.randn(5, 32)
    for name in ("scale_a", "scale_b"):
        with pytest.raises(ValueError, match=rf"^{name}: only fp8 kernels take scales"):
            check_operands(("bf16",), "NN", x.bfloat16(), x.t().contiguous().bfloat16()[:, :7], allow_cpu=True,
                           **{name: torch.ones(())})


def test_kernel_call_path_without_gpu():
    """Kernel.__call__ for fp8: checks, allocates C in bf16, passes the scales to _run; K == 0
    and empty problems never launch."""
    from study.kernels import Kernel

    class Fake(Kernel):
        family, name, precisions, layout = "test", "fake", ("fp8",), "NT"
        out_dtype = torch.bfloat16
        seen = []

        def _allow_cpu(self):
            return True

        def _run(self, p, a, b, c, alpha, beta, scales=None):
            self.seen.append((p, scales))
            c.copy_(fp8.dequantize(a, scales[0]) @ fp8.dequantize(b.t(), scales[1]).t())

    a, b, sa, sb = q(9, 16, 48, "row")
    f = Fake()
    c = f(a, b, scale_a=sa, scale_b=sb)
    assert c.dtype == torch.bfloat16 and c.shape == (9, 16)
    p, scales = f.seen[-1]
    assert scales[0] is sa and scales[1] is sb and (p.scale_a_per_row, p.scale_b_per_col) == (1, 1)
    with pytest.raises(TypeError, match="^scale_a is required"):
        f(a, b)
    n = len(f.seen)
    c0 = torch.ones(9, 16, dtype=torch.bfloat16)
    assert torch.equal(f(a[:, :0], b[:0], c0.clone(), beta=2.0, scale_a=sa, scale_b=sb), 2 * c0)   # K == 0
    assert len(f.seen) == n


def test_kernel_names_and_refusals(monkeypatch):
    from study import device
    from study.kernels import CublasKernel

    with pytest.raises(ValueError, match=r"^fast_accum: only fp8 kernels"):
        study.kernel("cuda", "s01", fast_accum=True)
    with pytest.raises(ValueError, match=r"^fast_accum: only fp8 kernels"):
        study.kernel("triton", "s10", fast_accum=True)
    with pytest.raises(ValueError, match=r"^layout: cublas fp8 takes NT only"):
        study.kernel("cublas", "fp8", layout="NN")
    with pytest.raises(ValueError, match=r"^config: only CUDA"):
        study.kernel("cublas", "fp8", config=1)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA GPU"):
            study.kernel("cublas", "fp8")
    monkeypatch.setattr(device, "capability", lambda: (9, 0))
    k = study.kernel("cublas", "fp8")
    assert (k.layout, k.fast_accum, k.out_dtype) == ("NT", False, torch.bfloat16)
    fast = study.kernel("cublas", "fp8_fast")
    assert isinstance(fast, CublasKernel) and fast.fast_accum and fast.name == "fp8"
    assert study.kernel("cublas", "fp8", fast_accum=True).fast_accum
    a, b, sa, sb = q(5, 7, 32)
    with pytest.raises(ValueError, match=r"^a must be a CUDA tensor"):   # CPU tensors: refused before any launch
        k(a, b, scale_a=sa, scale_b=sb)
    monkeypatch.setattr(device, "capability", lambda: (8, 0))
    with pytest.raises(RuntimeError, match="fp8 needs sm_89"):
        study.kernel("cublas", "fp8")


# --- cuBLAS's path (torch._scaled_mm runs on CPU tensors too) ---------------------------------

@pytest.mark.parametrize("granularity", ["tensor", "row"])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (1.5, 0.5), (-2.0, 1.0)])
def test_scaled_mm_path(granularity, alpha, beta):
    from conftest import cpu_rowwise_scaled_mm_unsupported

    why = granularity == "row" and cpu_rowwise_scaled_mm_unsupported()
    if why:
        pytest.skip(why)
    M, N, K = 33, 48, 160
    a, b, sa, sb = q(M, N, K, granularity)
    g = torch.Generator().manual_seed(3)
    c = torch.randn(M, N, generator=g).bfloat16() if beta else torch.full((M, N), math.nan).bfloat16()
    c0 = c.clone()
    flag = int(granularity == "row")
    fp8.scaled_mm(a, b, c, sa, sb, alpha, beta, flag, flag)
    A, B = fp8.dequantize(a, sa), fp8.dequantize(b.t(), sb).t()
    tolerance.check(c, A, B, c0 if beta else None, alpha, beta, "fp8", what=f"scaled_mm {granularity}")


def test_scaled_mm_limits():
    assert fp8.check_scaled_mm(4096, 4096, 0, 0) is None and fp8.check_scaled_mm(16, 16, 1, 1) is None
    assert "multiples of 16" in fp8.check_scaled_mm(4096, 1000, 0, 0)
    assert "multiples of 16" in fp8.check_scaled_mm(4100, 4096, 0, 0)
    assert "one of each" not in (fp8.check_scaled_mm(64, 64, 1, 0) or "") and fp8.check_scaled_mm(64, 64, 1, 0)


# --- the generated binding ---------------------------------------------------------------------

def test_binding_has_fp8_launchers():
    s15 = registry.find("cuda", "s15")
    src = binding.binding_source(s15)
    assert 'm.def("launch_fp8", &launch_fp8)' in src and 'm.def("check_fp8", &check_fp8)' in src
    assert "const char* unsupported(const gemm::ScaledProblem<__nv_bfloat16>& p);" in src
    assert "cudaError_t launch(const gemm::ScaledProblem<__nv_bfloat16>& p, cudaStream_t stream, int config);" in src
    assert "std::uintptr_t scale_a, std::uintptr_t scale_b, int scale_a_per_row, int scale_b_per_col" in src
    assert "reinterpret_cast<const __nv_fp8_e4m3*>(a)" in src and "reinterpret_cast<__nv_bfloat16*>(c)" in src
    assert 'm.def("configs", &configs)' in src and "torch" not in src
    half = replace(s15, dtype="fp8 in / fp32 acc / fp16 out")   # the output type follows the header
    assert "gemm::ScaledProblem<__half>" in binding.binding_source(half)
    assert binding.problem_type(half, "fp8") == "gemm::ScaledProblem<__half>"
    assert binding.problem_type(registry.find("cuda", "s10"), "bf16") == "gemm::Problem<__nv_bfloat16>"


def test_registry_reads_fp8_headers(tmp_path):
    for fam in registry.FAMILIES:
        s = registry.find(fam, "s15")
        assert s.precisions == ("fp8",) and s.out == "bf16" and s.layout == "NT"
    assert "fp8" in registry.PRECISIONS and registry.SCALED == ("fp8",)
    text = registry.find("cuda", "s15").path.read_text()
    for bad in ("fp8 in / fp32 acc / fp8 out", "fp8, bf16 in / fp32 acc / bf16 out"):
        p = tmp_path / "s15_fp8.cu"
        p.write_text(text.replace("fp8 in / fp32 acc / bf16 out", bad, 1))
        with pytest.raises(registry.HeaderError, match="stands alone"):
            registry.parse_header(p, "cuda")


# --- tolerance ---------------------------------------------------------------------------------

def _chain_sum(A, B, chain: int, bits: int = 14, k0: int = 32):
    """A @ B as FP8 wgmma does it (model): products exact, each k0-step added into a chain that
    keeps `bits` significant bits (truncated toward zero), the chain promoted into an exact sum
    every `chain` products."""
    M, K = A.shape
    out = torch.zeros(M, B.shape[1], dtype=torch.float64)
    for c0 in range(0, K, chain):
        acc = torch.zeros_like(out)
        for k in range(c0, min(K, c0 + chain), k0):
            acc = acc + A[:, k:k + k0] @ B[k:k + k0]
            m, e = torch.frexp(acc)                  # acc = m * 2^e, 0.5 <= |m| < 1
            acc = torch.ldexp(torch.trunc(m * 2.0**bits) / 2.0**bits, e)
        out += acc
    return out


@pytest.mark.parametrize("granularity", ["tensor", "row"])
def test_tolerance_fp8(granularity):
    """Promoted accumulation (chains of 128) passes the fp8 bound; chains over all of K pass the
    fast bound; dropping a K tile of 128 or one k-step of 32 fails both."""
    M, N, K = 48, 40, 2048
    a, b, sa, sb = q(M, N, K, granularity, seed=5)
    A, B = fp8.dequantize(a, sa), fp8.dequantize(b.t(), sb).t()
    promoted = _chain_sum(A, B, tolerance.FP8_PROMOTE).to(torch.bfloat16)
    tolerance.check(promoted, A, B, precision="fp8")
    fast = _chain_sum(A, B, K).to(torch.bfloat16)
    tolerance.check(fast, A, B, precision="fp8", fast_accum=True)
    for drop in (tolerance.K0_FP8, tolerance.FP8_PROMOTE):
        bad = (A[:, :-drop] @ B[:-drop]).to(torch.bfloat16)
        for fast_accum in (False, True):
            with pytest.raises(AssertionError):
                tolerance.check(bad, A, B, precision="fp8", fast_accum=fast_accum)
    assert tolerance.bound("fp8", 16384) == pytest.approx(tolerance.bound("fp8", 1000), rel=0.01)
    assert tolerance.bound("fp8", 16384, fast_accum=True) > 10 * tolerance.bound("fp8", 16384)


def test_harness_operands_fp8(monkeypatch):
    from study import harness

    monkeypatch.setattr(harness, "DEVICE", "cpu")
    for scaling, shapes in (("tensor", ((), ())), ("row", ((24,), (40,)))):
        ops = harness.Operands(24, 40, 64, "fp8", seed=2, scaling=scaling)
        assert ops.a.dtype == E4M3 and ops.w.dtype == E4M3 and ops.b("NT").stride() == (1, 64)
        sa, sb = ops.call_kwargs["scale_a"], ops.call_kwargs["scale_b"]
        assert (tuple(sa.shape), tuple(sb.shape)) == shapes
        ref = fp8.dequantize(ops.a, sa) @ fp8.dequantize(ops.w, sb).t()
        assert torch.equal(ops.reference, ref) and float(ref.std()) == pytest.approx(1.0, rel=0.3)
        c = ops.output()
        assert c.dtype == torch.bfloat16 and torch.isnan(c).all()
        assert ops.set_bytes == 24 * 64 + 40 * 64 + 24 * 40 * 2
    assert harness.Operands(8, 8, 8, "fp8").scaling == "tensor"
    assert harness.Operands(8, 8, 8, "bf16").call_kwargs == {}
    with pytest.raises(ValueError, match="scaling"):
        harness.Operands(8, 8, 8, "bf16", scaling="row")


# --- plan ----------------------------------------------------------------------------------------

def test_plan_fp8_group():
    groups = plan.plan()
    assert "fp8" in groups
    got = {(e.family, e.stage, e.kind, e.scaling, e.layout) for e in groups["fp8"]}
    for sc in plan.FP8_SCALINGS:
        assert ("cublas", "cublas", "baseline", sc, "NT") in got
        assert ("cublas", "cublas", plan.FAST_ACCUM, sc, "NT") in got
        for s in study.all_stages():
            if "fp8" in s.precisions:
                assert (s.family, s.stem, "stage", sc, "NT") in got
                assert (s.family, s.stem, plan.FAST_ACCUM, sc, "NT") in got
    assert all(e.layout == "NT" and e.scaling for e in groups["fp8"])
    labels = [e.label for e in groups["fp8"]]
    assert len(labels) == len(set(labels))          # the runner keys shapes by label
    assert all(not e.scaling for p, es in groups.items() if p != "fp8" for e in es)
    assert plan.plan(["fp8"], families=["cublas"])["fp8"][0].family == "cublas"


def test_plan_fp8_shapes():
    shapes = plan.default_shapes()
    mine = plan.with_k_sweep("fp8", shapes, defaults=True)
    sweep = [s for s in mine if s.set == "ksweep"]
    ks = {s.K for s in mine if (s.M, s.N) == (plan.FP8_K_SWEEP_MN,) * 2}
    assert ks >= set(plan.FP8_K_SWEEP) and all(s.M == s.N == plan.FP8_K_SWEEP_MN for s in sweep)
    assert len({(s.M, s.N, s.K) for s in mine}) == len(mine)       # 1024^3 once, as a square
    assert plan.with_k_sweep("bf16", shapes, True) == shapes and plan.with_k_sweep("fp8", shapes, False) == shapes
    fast = plan.Entry("cuda", "s15_fp8", "fp8", "NT", plan.FAST_ACCUM, scaling="row")
    assert plan.runs_at(fast, plan.Shape(4096, 4096, 4096)) and plan.runs_at(fast, sweep[0])
    assert not plan.runs_at(fast, plan.Shape(2048, 2048, 2048))
    fast_cublas = replace(fast, family="cublas", stage="cublas")
    assert plan.runs_at(fast_cublas, plan.Shape(2048, 2048, 2048))
    scope = plan.group_shapes("fp8", plan.plan(["fp8"])["fp8"], mine)
    assert plan.Shape(2048, 2048, 2048) not in scope[fast.label]
    assert set(sweep) <= set(scope[fast.label])


def test_merge_keeps_rows_recorded_before_fp8():
    from study.sweep import RESULT_KEY, merge

    old = pd.DataFrame([dict(family="cuda", stage="s01", kind="stage", dtype="fp32", layout="NN", M=64, N=64, K=64,
                             ms_median=1.0), dict(family="cuda", stage="s02", kind="stage", dtype="fp32", layout="NN",
                                                  M=64, N=64, K=64, ms_median=2.0)])
    new = pd.DataFrame([dict(family="cuda", stage="s01", kind="stage", dtype="fp32", layout="NN", scaling="",
                             M=64, N=64, K=64, ms_median=3.0),
                        dict(family="cuda", stage="s15_fp8", kind="stage", dtype="fp8", layout="NT", scaling="row",
                             M=64, N=64, K=64, ms_median=0.5)])
    got = merge(old, new, RESULT_KEY)
    assert sorted(got["ms_median"]) == [0.5, 2.0, 3.0]


def test_pct_cublas_within_scaling():
    from study.roofline import annotate

    def row(fam, stage, kind, sc, ms):
        return dict(gpu="G", family=fam, stage=stage, kind=kind, dtype="fp8", layout="NT", scaling=sc,
                    M=4096, N=4096, K=4096, ms_median=ms, status="ok")
    df = annotate(pd.DataFrame([row("cublas", "cublas", "baseline", "tensor", 1.0),
                                row("cublas", "cublas", "fast_accum", "tensor", 0.5),
                                row("cublas", "cublas", "baseline", "row", 2.0),
                                row("cuda", "s15_fp8", "stage", "tensor", 1.0),
                                row("cuda", "s15_fp8", "stage", "row", 1.0)]))
    pct = dict(zip(zip(df["family"], df["kind"], df["scaling"]), df["pct_cublas"]))
    assert pct[("cuda", "stage", "tensor")] == pytest.approx(100.0)
    assert pct[("cuda", "stage", "row")] == pytest.approx(200.0)
    assert pct[("cublas", "fast_accum", "tensor")] == pytest.approx(200.0)


# --- reports -------------------------------------------------------------------------------------

def fp8_fixture(root: Path) -> Path:
    """The reports fixture plus fp8 rows (both scalings, fast accumulation, the K sweep) and
    Inductor rows (fp8 and fp16), annotated; written under root."""
    from study import results
    from study.roofline import annotate

    shutil.copytree(FIXTURE, root, dirs_exist_ok=True)
    (gpu_dir,) = results.recorded(root)
    data = results.load(gpu_dir)
    kernels = [("cublas", "cublas", "baseline", 1300), ("cublas", "cublas", plan.FAST_ACCUM, 1450),
               ("cuda", "s15_fp8", "stage", 1250), ("triton", "s15_fp8", "stage", 1200),
               ("cuda", "s15_fp8", plan.FAST_ACCUM, 1400), ("triton", "s15_fp8", plan.FAST_ACCUM, 1350),
               ("inductor", "inductor", "baseline", 1320)]
    shapes = [(n, n, n, "square") for n in (1024, 4096, 8192)] + \
        [(1024, 1024, k, "ksweep") for k in plan.FP8_K_SWEEP if k != 1024]
    rows = []
    for fam, stage, kind, tf in kernels:
        for sc in plan.FP8_SCALINGS:
            for M, N, K, ss in shapes:
                if fam == "inductor" and M != K:
                    continue
                fast = kind == plan.FAST_ACCUM
                err = 1.7e-3 + (4e-6 * K if fast else 0)
                ms = 2 * M * N * K / (tf * (0.9 if sc == "row" else 1) * min(1, (M * N * K / 4096**3) ** 0.3)) / 1e9
                rows.append(dict(gpu=data.gpu, family=fam, stage=stage, kind=kind, dtype="fp8", layout="NT", scaling=sc,
                                 M=M, N=N, K=K, shape_set=ss, ms_median=ms, ms_q1=ms, ms_q3=ms, reps=10, graph=True,
                                 rel_err=err, tol=tolerance.bound("fp8", K, fast_accum=fast), status="ok", reason="",
                                 warmup_s=0.1, sm_mhz=1755.0, note=plan.FAST_ACCUM_NOTE if fast else ""))
    for n, tf in ((4096, 640), (8192, 660)):   # Inductor beside cuBLAS fp16 (NN here: the fixture's layout)
        ms = 2 * n ** 3 / (tf * 1e9)
        rows.append(dict(gpu=data.gpu, family="inductor", stage="inductor", kind="baseline", dtype="fp16", layout="NN",
                         scaling="", M=n, N=n, K=n, shape_set="square", ms_median=ms, ms_q1=ms, ms_q3=ms, reps=10,
                         graph=True, rel_err=2e-4, tol=tolerance.bound("fp16", n), status="ok", reason="",
                         warmup_s=9.0, sm_mhz=1755.0, note=""))
    res = pd.concat([data.results, pd.DataFrame(rows)], ignore_index=True)
    ceil = pd.concat([data.ceilings, pd.DataFrame([dict(gpu=data.gpu, name="cublas_fp8", source="measured",
                                                        precision="fp8", value=1450.0, unit="TFLOP/s", detail="x")])])
    data.results, data.ceilings = annotate(res, ceil, data.profile), ceil
    results.write(data, root)
    return root


@pytest.fixture(scope="module")
def rendered_fp8(tmp_path_factory):
    from study import report

    root = fp8_fixture(tmp_path_factory.mktemp("fp8_reports"))
    report.render(root)
    return root


def test_fp8_reports_render(rendered_fp8):
    from study import report, tables

    root = rendered_fp8
    (gpu_dir,) = report.recorded(root)
    data = report.load(gpu_dir)
    # the overview links the per-precision page; the fp8 content lives there
    assert f"{data.gpu}/fp8.md" in (root / "README.md").read_text()
    text = (root / data.gpu / "fp8.md").read_text().replace("../figures/", "figures/")
    assert "fp8" in text.splitlines()[0]
    for names in report.figure_names(data).values():
        for name in names:
            assert (root / "figures" / data.gpu / name).stat().st_size > 1000, name
    for name in ("ladder_fp8_4096.png", "ladder_fp8_8192.png", "size_fp8.png"):
        assert f"figures/{data.gpu}/{name}" in text
    t = tables.ladder_table(data, "fp8", 4096)
    stages = list(t["stage"])
    for label in ("s15_fp8 (tensor scales)", "s15_fp8 fast accum (tensor scales)", "s15_fp8 (row scales)",
                  "cuBLAS NT (tensor scales)", "cuBLAS NT fast accum (row scales)", "Inductor NT (row scales)"):
        assert label in stages, label
    r = t.set_index("stage")
    assert r.loc["cuBLAS NT (tensor scales)", "CUDA % cuBLAS"] == "100%"
    assert r.loc["s15_fp8 (tensor scales)", "CUDA % cuBLAS"] == "96%"          # 1250 / 1300
    assert r.loc["s15_fp8 (tensor scales)", "CUDA % best baseline"] == "95%"   # 1250 / max(1300, 1320)
    assert r.loc["s15_fp8 fast accum (tensor scales)", "CUDA speedup"] == "1.12x promoted"
    # fp16: Inductor measured beside cuBLAS: its row, and % of the faster baseline
    t16 = tables.ladder_table(data, "fp16", 4096).set_index("stage")
    assert "Inductor NN" in t16.index and t16.loc["s10_half_wmma", "Triton % best baseline"] == "82%"   # 560/680
    # the other precisions' tables have no such column (no Inductor rows)
    assert "CUDA % best baseline" not in tables.ladder_table(data, "fp32", 4096)
    assert "fp8" in tables.headline_table(data)


def test_scaled_mm_flags_one_row_is_row_wise():
    """M = 1 with row scales: scale_a has one element, like a per-tensor scale; beside per-column
    scales of B, torch._scaled_mm must still get both row-wise (found on the H100: the cuBLAS fp8
    wrapper refused M = 1 row-scaled problems)."""
    from study import fp8
    assert fp8.scaled_mm_flags(1, 16, 0, 1) == (1, 1)
    assert fp8.scaled_mm_flags(16, 1, 1, 0) == (1, 1)
    assert fp8.scaled_mm_flags(16, 16, 0, 1) == (0, 1)    # a true mix stays a mix: refused
    assert fp8.check_scaled_mm(16, 16, *fp8.scaled_mm_flags(16, 16, 0, 1))
    assert fp8.check_scaled_mm(16, 16, *fp8.scaled_mm_flags(1, 16, 0, 1)) is None
    a = torch.randn(1, 32).to(torch.float8_e4m3fn)
    w = torch.randn(16, 32).to(torch.float8_e4m3fn)
    sa, sb = torch.tensor([0.5]), torch.rand(16) + 0.5
    c = torch.empty(1, 16, dtype=torch.bfloat16)
    try:
        fp8.scaled_mm(a, w.t(), c, sa, sb, 1.0, 0.0, 0, 1)
    except RuntimeError as exc:   # a torch whose CPU _scaled_mm lacks the row-wise path
        pytest.skip(f"torch._scaled_mm on CPU: {exc}")
    ref = (a.double() * 0.5) @ (w.double() * sb.double()[:, None]).t()
    assert torch.allclose(c.double(), ref, rtol=2e-2, atol=1e-2)


@pytest.mark.parametrize("c_vec", [8, 1])
def test_triton_s15_prune_rules(monkeypatch, c_vec):
    """Triton s15's configs per call: promoted calls get the 128x128 tiles, flattened (a 256-element
    chain per step: one BLOCK_K = 256 dot or two of 128) and, where the call allows WS, warp-
    specialised with BLOCK_K = 256 (one dot per K block: two computed wrong results there); never a
    promoted 128x256 tile (its chain beside the accumulator spills). Fast accumulation runs WS only
    where allowed, else its 3-stage flattened configs (128x128 only with per-tensor scales)."""
    from study import tritonlib
    from study.kernels import _load_triton_module

    monkeypatch.setattr(tritonlib, "INTERPRET", False)   # the prune itself, not the interpreter's cut
    mod = _load_triton_module(registry.find("triton", "s15_fp8"))
    configs = mod.WS_CONFIGS + mod.FLAT_CONFIGS

    def tiles(**kw):
        kw = {"WS_OK": False, "PROMOTE": False, "SA_ROW": False, "SB_COL": False, "BETA_ZERO": True, "C_VEC": c_vec, **kw}
        return sorted({(c.kwargs["WS"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.num_stages, c.num_warps)
                       for c in mod._prune(configs, {}, **kw)})

    flat = [(False, 128, 128, 3, 8), (False, 128, 256, 3, 8)]
    assert tiles(PROMOTE=True) == flat
    assert tiles(PROMOTE=True, WS_OK=True) == sorted(flat + [(True, 128, 256, 2, 4), (True, 128, 256, 3, 4)])
    assert tiles(PROMOTE=True, SA_ROW=True, SB_COL=True) == flat
    assert all(not ws and s < 4 for ws, _, _, s, _ in tiles(SA_ROW=True, SB_COL=True))   # fast, vector scales
    assert tiles() == flat                                                             # fast, flattened, per tensor
    assert tiles(WS_OK=True) and all(ws and w == 4 for ws, _, _, _, w in tiles(WS_OK=True))   # fast, WS
