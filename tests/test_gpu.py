"""Every kernel on the GPU against an fp64 reference (marker `gpu`; skipped without CUDA).

Kernels: every CUDA and Triton stage the registry finds, at every precision and in every layout
its header names (Stage.layouts, primary first), and cuBLAS at every precision in NN, NT and TN.
Test ids: family-stem-precision-layout[-case].
All comparisons go through gemm_checks (the same functions the tests of the tests use) and
study.tolerance (the one tolerance policy).

fp8 stages run every test here through the fp8-aware checks: each case at gemm_checks.variants()
(K rounded up to 16-byte e4m3 rows, scales per tensor and per row/column, passed as keywords),
C in the stage's output type, the dequantised fp64 reference and the bound of the kernel's
accumulation (a CUDA stage's fast_accum configuration in test_every_config). cuBLAS and Inductor
fp8, fast accumulation of every fp8 kernel, scale refusals and the study's own fp8 path are in
test_gpu_fp8.py, not repeated here.

Every test class of gemm_checks (shapes, alpha_beta, ints, seeds, nonfinite, views, int32,
deterministic: gemm_checks.class_cases) runs on every kernel through gemm_checks.run_cases: a case
a stage refuses by its declared limits runs at its fitted shape (the dimensions its layout
stores as rows rounded up to its alignment, gemm_checks.fit_case) instead of being skipped, C
sits in a guard band checked after every call, and a class of which no case ran fails (only a
GPU without the stage's shared memory skips, saying so).
"""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys

import pytest
import torch

import gemm_checks as gc
import study
from study import registry
from study.kernels import DTYPES

pytestmark = pytest.mark.gpu
DEV = "cuda"


def _kernels():
    out = []
    for s in study.all_stages():
        for p in s.precisions:
            for layout in s.layouts:
                out.append(pytest.param((s.family, s.stem, p, layout), id=f"{s.family}-{s.stem}-{p}-{layout}"))
    for p in ("fp32", "tf32", "fp16", "bf16"):
        for layout in registry.LAYOUTS:
            out.append(pytest.param(("cublas", p, p, layout), id=f"cublas-{p}-{layout}"))
    return out


KERNELS = _kernels()
_cache: dict = {}


@pytest.fixture(scope="session")
def triton_warm():
    """Triton compiles each kernel once per argument specialisation (ints == 1 or % 16, pointer
    alignment) and BETA_ZERO: ~200 compiles of ~1 s for the sweep below. They are single-threaded,
    so this fixture first runs the Triton part of this file in parallel subprocesses, which fill
    the on-disk Triton cache; the tests here then hit it. Results of the warm-up runs are
    ignored (these tests report). Under pytest-xdist the workers already compile in parallel,
    and a warm-up per worker would start workers x jobs compiling processes: skipped there."""
    if os.environ.get("STUDY_TEST_WARM") or os.environ.get("PYTEST_XDIST_WORKER") or not torch.cuda.is_available():
        return
    stems = sorted({s.stem for s in study.all_stages("triton")})
    jobs = max(1, min(len(stems), (os.cpu_count() or 2) // 2, 8))
    env = dict(os.environ, STUDY_TEST_WARM="1")
    procs = []
    for i in range(jobs):
        group = stems[i::jobs]
        expr = "(" + " or ".join(f"triton-{st}-" for st in group) + ") and (test_shapes or test_views)"
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", expr],
            cwd=study.registry.ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for p in procs:
        try:
            p.wait(timeout=600)
        except subprocess.TimeoutExpired:
            p.kill()


@pytest.fixture(scope="session")
def fast_triton_autotune(triton_warm):
    """Correctness does not need a careful config search: a quick timer for @triton.autotune,
    and (see kernel()) the first config only for the shape sweep; test_triton_every_config
    runs every config."""
    import triton.testing

    orig = triton.testing.do_bench

    def quick(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        fn()
        torch.cuda.synchronize()
        return [0.0] * len(quantiles) if quantiles else 0.0
    triton.testing.do_bench = quick
    yield
    triton.testing.do_bench = orig


def _stage_prune(at):
    """The autotuner's own prune (its class's method), whatever the tests set on the instance."""
    return type(at).prune_configs.__get__(at)


def _first_of_prune(at):
    """Run only the first config the stage's prune keeps for each call. The list itself is not
    cut: an autotuner with one config skips the prune and runs it in whichever loop the call
    takes (Triton s15's warp-specialised 128x256 tile in its flattened promoted loop: 303-360 KB
    of shared memory, every launch refused)."""
    prune = _stage_prune(at)
    at.prune_configs = lambda kwargs: prune(kwargs)[:1]


def _autotuners(module):
    from triton.runtime.autotuner import Autotuner

    return [v for v in vars(module).values() if isinstance(v, Autotuner)]


def kernel(spec):
    """The study kernel for a (family, name, precision, layout) spec, made once per session (a
    stage's kernel takes all its layouts: one per stage; cuBLAS: one per primary layout)."""
    family, name, prec, layout = spec
    key = (family, name, layout if family == "cublas" else None)
    if key not in _cache:
        if family == "cublas":
            _cache[key] = study.kernel("cublas", prec, layout=layout)
        else:
            k = study.kernel(family, name)
            if family == "triton":
                for at in _autotuners(k.module):
                    _first_of_prune(at)
            _cache[key] = k
    return _cache[key]


@pytest.fixture
def kern(request, cuda_built, fast_triton_autotune):
    family, name, prec, layout = request.param
    if family != "cublas":
        from study import device

        why = study.registry.find(family, name).unavailable_reason(device.capability())
        if why:
            pytest.skip(why)
        if family == "cuda" and not cuda_built[name].ok:
            pytest.fail(f"{name} failed to build:\n{cuda_built[name].error[-3000:]}")
    return kernel(request.param), prec, layout


def _assert_valid_refusal(k, exc):
    """A ValueError from a stage's own limits is allowed only if its header declares limits
    and the message names an argument."""
    msg = str(exc)
    stage = getattr(k, "stage", None)
    if stage is None or stage.limits.lower().startswith("none"):
        pytest.fail(f"{k.name}: header says Limits: none, but it refused the problem: {msg}")
    assert re.search(r"\b(M|N|K|a|b|c|lda|ldb|ldc|alpha|beta)\b", msg), \
        f"{k.name}: a refusal must name the argument: {msg!r}"


def _device_skip(k, exc):
    """A refusal of a fitted case: a skip only where this GPU lacks the stage's shared memory,
    else a failure (the stage refuses a shape at its own alignment)."""
    if "shared memory" in str(exc):
        pytest.skip(f"this GPU cannot run {k.name}: {exc}")
    pytest.fail(f"{k.name} refused a case fitted to its alignment: {exc}")


def run_checked(k, case, prec, check=None):
    """Check a case (fp8: each of its gc.variants), at its fitted shape where the stage refuses
    it (gc.run_fitted); a refusal of the fitted case fails (or skips: _device_skip)."""
    for v in gc.variants(case, prec):
        try:
            gc.run_fitted(k, v, prec, DEV, check=check)
        except ValueError as exc:
            _assert_valid_refusal(k, exc)
            _device_skip(k, exc)


def check_records(k, recs, cls):
    """Fail on any failure of a class's run_cases records and on a class of which no case ran;
    refusals (allowed only for unaligned views of a stage with declared limits) must name the
    argument; a class all skipped for the GPU's shared memory skips."""
    for r in recs:
        if r["status"] == "refused":
            assert re.search(r"\b(a|b|c|lda|ldb|ldc|M|N|K)\b", r["message"]), \
                f"{k.name} {r['case']}: a refusal must name the argument: {r['message']}"
    problems = gc.class_problems(recs, cls)
    assert not problems, f"{k.name} [{cls}]: " + "\n".join(problems)
    if recs and all(r["status"] == "skip" for r in recs):
        pytest.skip(recs[0]["message"])


def run_class(k, cls, prec, layout):
    """Every case of test class `cls` (gc.class_cases, GPU platform) through gc.run_cases."""
    cases = gc.class_cases(cls, "gpu", prec, layout, gc.alignment(k, prec))
    recs = gc.run_cases(k, cls, cases, prec, DEV)
    check_records(k, recs, cls)
    return recs


SHAPES = gc.GPU_SHAPES + gc.GPU_LARGE


@pytest.mark.parametrize("kern", KERNELS, indirect=True)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES])
def test_shapes(kern, shape):
    k, prec, layout = kern
    recs = gc.run_cases(k, "shapes", gc.variants(gc.Case(*shape, layout=layout), prec), prec, DEV)
    check_records(k, recs, "shapes")


@pytest.mark.parametrize("kern", KERNELS, indirect=True)
def test_alpha_beta(kern):
    """Every alpha/beta combination (beta == 0 on a NaN-filled C, alpha == 0) on a ragged shape."""
    k, prec, layout = kern
    run_class(k, "alpha_beta", prec, layout)


@pytest.mark.parametrize("kern", KERNELS, indirect=True)
def test_integer_inputs_exact(kern):
    """Small integer inputs: every partial sum is exact, so the output must equal the reference
    bit for bit (int_range keeps |C| inside the output format's exact integers; fp8: integers
    stored exactly in e4m3, power-of-two scales); with alpha/beta too, and C once contiguous."""
    k, prec, layout = kern
    run_class(k, "ints", prec, layout)


@pytest.mark.parametrize("kern", KERNELS, indirect=True)
def test_seeds(kern):
    k, prec, layout = kern
    run_class(k, "seeds", prec, layout)


@pytest.mark.parametrize("kern", KERNELS, indirect=True)
def test_deterministic(kern):
    k, prec, layout = kern
    run_class(k, "deterministic", prec, layout)


@pytest.mark.parametrize("kern", KERNELS, indirect=True)
def test_nonfinite_propagate(kern):
    k, prec, layout = kern
    run_class(k, "nonfinite", prec, layout)


def _operands(layout, prec, M=67, N=45, K=77, seed=5, scaling=""):
    """(a, b, c0, scales) of gc.make_operands; fp8 at the fitted shape (K to 16-byte rows)."""
    M, N, K = gc.fit_shape((M, N, K), prec)
    return gc.make_operands(gc.Case(M, N, K, seed=seed, layout=layout, scaling=scaling), prec, DEV)


@pytest.mark.parametrize("kern", KERNELS, indirect=True)
def test_views_work_or_refuse(kern):
    """Operand views (offset by one element, odd and aligned padded leading dimensions, a
    16-byte aligned offset) and C views (offset, padded, aligned padded ldc), at a ragged shape
    and at it rounded up to the stage's alignment (gc.class_cases "views"): the right answer, or
    for storage that is not 16-byte aligned, a ValueError naming the argument from a stage that
    declares limits; every aligned view must run (vector and TMA paths see a padded ld)."""
    k, prec, layout = kern
    recs = run_class(k, "views", prec, layout)
    aligned = [r for r in recs if "aligned" in r["case"] and r["status"] != "pass"]
    assert not aligned, f"{k.name}: aligned views did not run: {aligned}"


@pytest.mark.parametrize("kern", KERNELS, indirect=True)
def test_int32_offsets(kern):
    """A, B and C in turn with a leading dimension whose last row's offsets reach int32's limit
    (what study.operands.check_int32 allows; ~2^31 elements allocated, the rows written): the
    kernel's address arithmetic at the edge (gc.class_cases "int32")."""
    k, prec, layout = kern
    run_class(k, "int32", prec, layout)


@pytest.mark.parametrize("kern", KERNELS, indirect=True)
def test_bad_layouts_raise(kern):
    """Operands in a layout the kernel does not list (TT always: both transposed views), strided
    both ways and overlapping operands raise ValueError before any launch; a refused layout's
    message names the layouts the kernel takes."""
    k, prec, layout = kern
    a, b, c0, kw = _operands(layout, prec)   # kw: fp8's scales, so that only the layout is wrong
    plural = "s" if len(k.layouts) > 1 else ""
    takes = re.escape(f"this kernel takes layout{plural} {', '.join(k.layouts)})")
    for other in [x for x in registry.LAYOUTS if x not in k.layouts] + ["TT"]:
        a2 = a.t().contiguous().t() if other[0] == "T" else a.contiguous()
        b2 = b.t().contiguous().t() if other[1] == "T" else b.contiguous()
        with pytest.raises(ValueError, match=rf"^[ab] must be .*{takes}"):
            k(a2, b2, **kw)
    with pytest.raises(ValueError, match=r"^a must be"):
        k(torch.empty(2 * a.shape[0], 2 * a.shape[1], device=DEV, dtype=a.dtype)[::2, ::2], b, **kw)
    with pytest.raises(ValueError, match=r"^b must be"):
        k(a, torch.empty(2 * b.shape[0], 2 * b.shape[1], device=DEV, dtype=b.dtype)[::2, ::2], **kw)
    with pytest.raises(ValueError, match=r"^c must not overlap"):
        # C (the kernel's output dtype) and A share one buffer (fp8: A is its bytes seen as e4m3)
        buf = torch.empty(a.shape[0], max(a.shape[1], b.shape[1]) * 2, device=DEV, dtype=gc.out_dtype(k, prec))
        aa = buf.view(a.dtype)[:, :a.shape[1]]
        aa.copy_(a)
        k(aa, b, buf[:, 1:1 + b.shape[1]], **kw)
    with pytest.raises(ValueError, match=r"^a has overlapping rows"):
        k(a.as_strided((a.shape[0], a.shape[1]), (1, 1)), b, **kw)


@pytest.mark.parametrize("kern", [k for k in KERNELS if k.values[0][0] == "cuda"], indirect=True)
def test_call_from_a_fresh_thread(kern):
    """A thread that has made no CUDA call yet (torch's autograd thread at a backward's first
    GEMM) gets the same C as this one. CUDA s14 failed there ('invalid argument': the driver's
    tensor-map encoder found no current context); common/hopper.cuh now binds it."""
    import threading

    k, prec, layout = kern
    a, b, _, kw = _operands(layout, prec, 24, 24, 16)
    dt = gc.out_dtype(k, prec)
    here = k(a, b, torch.empty(a.shape[0], b.shape[1], device=DEV, dtype=dt), **kw)
    there = torch.full_like(here, math.nan)
    errors = []

    def call():
        try:
            k(a, b, there, **kw)
        except Exception as exc:   # reported below, in the test's own thread
            errors.append(exc)

    t = threading.Thread(target=call)
    t.start()
    t.join()
    assert not errors, f"{k.name} {prec} {layout} from a fresh thread: {errors[0]}"
    torch.cuda.synchronize()
    assert torch.equal(here, there), f"{k.name} {prec} {layout}: a fresh thread's C differs"


@pytest.mark.parametrize("kern", KERNELS, indirect=True)
def test_empty_problems(kern):
    """M, N or K == 0 never reach the kernel: C = beta * C (K = 0), nothing (M or N = 0)."""
    k, prec, layout = kern
    dt = gc.out_dtype(k, prec)
    a, b, _, kw = _operands(layout, prec, 5, 6, 0)
    c = torch.full((5, 6), math.nan, device=DEV, dtype=dt)
    assert torch.equal(k(a, b, c, **kw), torch.zeros(5, 6, device=DEV, dtype=dt))
    c = torch.ones(5, 6, device=DEV, dtype=dt)
    assert torch.equal(k(a, b, c, beta=2.0, **kw), torch.full((5, 6), 2.0, device=DEV, dtype=dt))
    a, b, _, kw = _operands(layout, prec, 0, 6, 4)
    out = k(a, b, **kw)
    assert out.shape == (0, 6) and out.dtype == dt


_LIMIT = re.compile(r"\b([MNK])\s*<=\s*(\d+)")


def _limit_params():
    out = []
    for s in study.all_stages():
        for dim, val in _LIMIT.findall(s.limits):
            for layout in s.layouts:
                out.append(pytest.param(((s.family, s.stem, s.precisions[0], layout), dim, int(val)),
                                        id=f"{s.family}-{s.stem}-{layout}-{dim}<={val}"))
    return out


@pytest.mark.parametrize("spec", _limit_params())
def test_declared_size_limits_both_sides(spec, cuda_built, fast_triton_autotune):
    """Limits like 'M <= 524280' from both sides: at the limit the kernel is right, one past it
    raises ValueError naming the dimension (other dimensions 1-2, so the tensors stay small)."""
    (family, name, prec, layout), dim, val = spec
    from study import device
    why = study.registry.find(family, name).unavailable_reason(device.capability())
    if why:
        pytest.skip(why)
    k = kernel((family, name, prec, layout))
    sizes = {"M": 2, "N": 2, "K": 2}
    sizes[dim] = val
    if val * 2 * torch.finfo(DTYPES[prec]).bits // 8 > 2**31:
        pytest.skip("limit too large to allocate")
    gc.check_case(k, gc.Case(sizes["M"], sizes["N"], sizes["K"], layout=layout), prec, DEV)
    sizes[dim] = val + 1
    with pytest.raises(ValueError, match=rf"\b{dim}\b"):
        gc.check_case(k, gc.Case(sizes["M"], sizes["N"], sizes["K"], layout=layout), prec, DEV)


def _decode_params():
    """Stages that divide K among CTAs (s14 on) taking NT fp16/bf16: the decode tests below, in
    every layout the stage lists."""
    out = []
    for s in study.all_stages():
        if s.number >= 14 and "NT" in s.layouts and set(s.precisions) <= {"fp16", "bf16"}:
            for p in s.precisions:
                for layout in s.layouts:
                    out.append(pytest.param((s.family, s.stem, p, layout), id=f"{s.family}-{s.stem}-{p}-{layout}"))
    return out


DECODE = _decode_params()


@pytest.mark.parametrize("kern", DECODE, indirect=True)
@pytest.mark.parametrize("M", gc.DECODE_MS)
def test_decode_shapes(kern, M):
    """Decode shapes x @ W.T: M tokens against a ragged weight (NT: N = 4100, K = 4104, no
    multiple of any split of K; other layouts gc.DECODE_NK_BY_LAYOUT), beta = 0 on a NaN-filled
    C, alpha/beta with beta != 0 on a finite C, and integer inputs (every partial sum exact: the
    fixup must add each partial exactly once)."""
    k, prec, layout = kern
    N, K = gc.DECODE_NK_BY_LAYOUT[layout]
    run_checked(k, gc.Case(M, N, K, layout=layout), prec)
    run_checked(k, gc.Case(M, N, K, alpha=1.5, beta=0.5, layout=layout, seed=1), prec)
    run_checked(k, gc.Case(M, N, K, alpha=-2.0, beta=1.0, layout=layout, seed=2), prec)
    run_checked(k, gc.Case(M, N, K, ints=True, layout=layout), prec)


@pytest.mark.parametrize("kern", DECODE, indirect=True)
@pytest.mark.parametrize("shape", gc.DECODE_EXTRA, ids=[f"{m}x{n}x{k}" for m, n, k in gc.DECODE_EXTRA])
def test_decode_decompositions(kern, shape):
    """Shapes that take each decomposition (equal splits, stream-K with and without swapping
    A and B, hybrid data-parallel + stream-K, a single CTA), plain and with alpha/beta."""
    k, prec, layout = kern
    run_checked(k, gc.Case(*shape, layout=layout), prec)
    run_checked(k, gc.Case(*shape, alpha=0.5, beta=-1.0, layout=layout, seed=3), prec)


@pytest.mark.parametrize("kern", DECODE, indirect=True)
def test_decode_deterministic(kern):
    """Bitwise the same output run after run at decode shapes, where partials from several CTAs
    are summed (their order must not depend on which CTA finishes first)."""
    k, prec, layout = kern
    N, K = gc.DECODE_NK_BY_LAYOUT[layout]
    runs = [(gc.Case(M, N, K, layout=layout), 5) for M in (1, 8, 16, 128, 256)]
    runs += [(gc.Case(16, N, K, alpha=1.5, beta=0.5, layout=layout), 3),
             (gc.Case(1100, 8192, 136, layout=layout), 3), (gc.Case(1104, 8192, 136, layout=layout), 3)]
    for case, n in runs:   # a refused shape (TN: M % 8 != 0) runs fitted
        run_checked(k, case, prec, check=lambda kk, c, p, d, n=n: gc.check_deterministic(kk, c, p, d, runs=n))


def _config_params():
    out = []
    for s in study.all_stages("cuda"):
        if "num_configs" in s.path.read_text():
            for p in s.precisions:
                for layout in s.layouts:
                    out.append(pytest.param((s.family, s.stem, p, layout), id=f"cuda-{s.stem}-{p}-{layout}"))
    for s in study.all_stages("triton"):
        if "autotune" in s.path.read_text():
            for p in s.precisions:
                for layout in s.layouts:
                    out.append(pytest.param((s.family, s.stem, p, layout), id=f"triton-{s.stem}-{p}-{layout}"))
    return out


def _check_config(k, cases, prec, label):
    """Every case (fp8: each of its gc.variants) on one configuration, at its fitted shape where
    the stage refuses it (gc.run_fitted); a refusal of the fitted case fails."""
    for case in [v for c in cases for v in gc.variants(c, prec)]:
        try:
            gc.run_fitted(k, case, prec, DEV)
        except ValueError as exc:
            _assert_valid_refusal(k, exc)
            _device_skip(k, exc)
        except AssertionError as exc:
            raise AssertionError(f"{label}: {exc}") from None


@pytest.mark.parametrize("kern", _config_params(), indirect=True)
def test_every_config(kern):
    """Autotuned stages, in each layout: every configuration on ragged shapes, beta = 0 (NaN C)
    and beta != 0; the third shape has 16-byte rows (N, K multiples of 8), so stages that refuse
    the first two (TMA, 16-byte cp.async) and the paths they take only for aligned rows run too,
    the fourth such rows in every layout (TN stores A as (K, M): M too), ragged against every
    tile; the last is a multiple of every tile (the unmasked EVEN path of Triton s09/s11)."""
    k, prec, layout = kern
    cases = [gc.Case(131, 137, 259, layout=layout), gc.Case(67, 45, 77, alpha=2.0, beta=0.5, layout=layout),
             gc.Case(131, 136, 72, alpha=1.5, beta=0.5, layout=layout),
             gc.Case(136, 200, 72, alpha=1.5, beta=0.5, layout=layout),
             gc.Case(256, 256, 256, alpha=1.5, beta=0.5, layout=layout)]
    if k.family == "cuda":
        from study.kernels import CudaKernel
        names = k.configs()
        assert names, f"{k.name}: defines num_configs() but lists no configuration"
        for i, cname in enumerate(names):
            _check_config(CudaKernel(k.stage, config=i), cases, prec, f"config {i} ({cname})")
    else:
        for at in _autotuners(k.module):
            prune = _stage_prune(at)
            try:
                for cfg in at.configs:   # cfg where the stage's prune keeps it, else its first there
                    at.prune_configs = lambda kwargs, cfg=cfg: (
                        [c for c in prune(kwargs) if c.kwargs == cfg.kwargs and c.num_warps == cfg.num_warps]
                        or prune(kwargs)[:1])
                    at.cache.clear()
                    _check_config(k, cases, prec, f"config {cfg}")
            finally:
                _first_of_prune(at)
                at.cache.clear()


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs")
@pytest.mark.parametrize("kern", KERNELS, indirect=True)
def test_operands_on_another_gpu(kern):
    """Operands on cuda:1 while cuda:0 is current: the kernel runs (and tunes) on cuda:1 and
    leaves the current device as it was. 16-byte rows, beta != 0, so TMA stages run too."""
    k, prec, layout = kern
    assert torch.cuda.current_device() == 0
    for v in gc.variants(gc.Case(131, 136, 72, alpha=1.5, beta=0.5, layout=layout), prec):
        try:
            gc.run_fitted(k, v, prec, "cuda:1")
        except ValueError as exc:
            _assert_valid_refusal(k, exc)
            _device_skip(k, exc)
    assert torch.cuda.current_device() == 0


def test_one_timing_mode_per_shape():
    """study.bench times every kernel of a shape the same way. The user kernel spins ~1.5 ms
    before a correct torch.mm, so alone it would be a plain launch (>= 1 ms); at 256^3 fp32,
    where cuBLAS takes ~10 us, it is graph-replayed beside cuBLAS; at 4096^3 (cuBLAS ~2.7 ms)
    both are plain launches. The rows say which mode timed them."""
    from study.measure import Settings

    def user(a, b, c):
        torch.cuda._sleep(3_000_000)   # ~1.5 ms at H100 clocks
        torch.mm(a, b, out=c)

    rows = study.bench(user, [256, 4096], "fp32", settings=Settings(budget_s=0.05, min_reps=3, max_reps=5))
    shown = ["M", "family", "ms_median", "graph", "status", "reason"]
    user_ms = rows[(rows.M == 256) & (rows.family == "user")].ms_median.iloc[0]
    assert 1.0 < user_ms < 5.0, f"the user call should take 1-5 ms here: the test needs it\n{rows[shown]}"
    for n, graphed in ((256, True), (4096, False)):
        at = rows[rows.M == n]
        assert len(at) == 2 and set(at.status) == {"ok"}, rows[shown]
        assert list(at.graph) == [graphed, graphed], rows[shown]
