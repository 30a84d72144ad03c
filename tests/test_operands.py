"""check_operands and kernel lookup, without a GPU: every bad input raises before any launch, with
a message that names the argument. Sizes past int32 are checked on meta tensors (no memory):
check_operands checks sizes before devices for exactly this."""
import math
import warnings

import pytest
import torch

import study
from study import registry, tolerance
from study.operands import INT32_MAX, check_operands

F32 = ("fp32",)


def t(*shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape).to(dtype) if device == "cpu" else torch.empty(*shape, dtype=dtype, device=device)


def expect(exc, pattern, *args, layout="NN", precisions=F32, allow_cpu=True, **kw):
    with pytest.raises(exc, match=pattern):
        check_operands(precisions, layout, *args, allow_cpu=allow_cpu, **kw)


BAD = [
    # id, exception, message pattern, (a, b, c) factory, kwargs, layout, precisions
    ("a-not-tensor", TypeError, r"^a must be a torch.Tensor", lambda: ([[1.0]], t(1, 1), None), {}, "NN", F32),
    ("b-not-tensor", TypeError, r"^b must be a torch.Tensor", lambda: (t(1, 1), 3.0, None), {}, "NN", F32),
    ("a-rank-3", ValueError, r"^a must be 2-D", lambda: (t(2, 3, 4), t(4, 5), None), {}, "NN", F32),
    ("b-rank-1", ValueError, r"^b must be 2-D", lambda: (t(3, 4), t(4), None), {}, "NN", F32),
    ("a-dtype-fp64", TypeError, r"^a must have dtype float32", lambda: (t(3, 4, dtype=torch.float64), t(4, 5, dtype=torch.float64), None), {}, "NN", F32),
    ("a-dtype-fp16-for-fp32", TypeError, r"^a must have dtype float32 .*got float16", lambda: (t(3, 4, dtype=torch.float16), t(4, 5, dtype=torch.float16), None), {}, "NN", F32),
    ("a-dtype-fp32-for-half", TypeError, r"^a must have dtype (float16, bfloat16|bfloat16, float16) for this kernel, got float32", lambda: (t(3, 4), t(4, 5), None), {}, "NN", ("fp16", "bf16")),
    ("b-dtype", TypeError, r"^b must have the dtype of a", lambda: (t(3, 4), t(4, 5, dtype=torch.float16), None), {}, "NN", F32),
    ("K-mismatch", ValueError, r"^b must have K = 4 rows", lambda: (t(3, 4), t(5, 5), None), {}, "NN", F32),
    ("c-not-tensor", TypeError, r"^c must be a torch.Tensor or None", lambda: (t(3, 4), t(4, 5), [0.0]), {}, "NN", F32),
    ("c-shape", ValueError, r"^c must have shape \(M, N\) = \(3, 5\)", lambda: (t(3, 4), t(4, 5), t(5, 3)), {}, "NN", F32),
    ("c-dtype", TypeError, r"^c must have the dtype of a", lambda: (t(3, 4), t(4, 5), t(3, 5, dtype=torch.float64)), {}, "NN", F32),
    ("beta-without-c", ValueError, r"^beta must be 0 when c is None", lambda: (t(3, 4), t(4, 5), None), {"beta": 1.0}, "NN", F32),
    ("alpha-not-number", TypeError, r"^alpha must be a real Python number", lambda: (t(3, 4), t(4, 5), None), {"alpha": "2"}, "NN", F32),
    ("alpha-bool", TypeError, r"^alpha must be a real Python number", lambda: (t(3, 4), t(4, 5), None), {"alpha": True}, "NN", F32),
    ("beta-tensor", TypeError, r"^beta must be a real Python number", lambda: (t(3, 4), t(4, 5), t(3, 5)), {"beta": torch.tensor(1.0)}, "NN", F32),
    ("a-column-major", ValueError, r"^a must be row-major", lambda: (t(4, 3).t(), t(4, 5), None), {}, "NN", F32),
    ("a-strided-columns", ValueError, r"^a must be row-major", lambda: (t(3, 8)[:, ::2], t(4, 5), None), {}, "NN", F32),
    ("b-transposed-for-NN", ValueError, r"^b must be row-major", lambda: (t(3, 4), t(5, 4).t(), None), {}, "NN", F32),
    ("b-row-major-for-NT", ValueError, r"^b must be the transposed view of a contiguous \(N, K\)", lambda: (t(3, 4), t(4, 5), None), {}, "NT", F32),
    ("c-column-major", ValueError, r"^c must be row-major", lambda: (t(3, 4), t(4, 5), t(5, 3).t()), {}, "NN", F32),
    ("a-overlapping-rows", ValueError, r"^a has overlapping rows", lambda: (torch.randn(64).as_strided((3, 4), (2, 1)), t(4, 5), None), {}, "NN", F32),
    ("c-overlaps-a", ValueError, r"^c must not overlap a or b", lambda: (lambda base: (base[:, :4], t(4, 4), base[:, 4:8]))(torch.randn(3, 8)), {}, "NN", F32),
    ("c-is-b", ValueError, r"^c must not overlap a or b", lambda: (lambda bb: (t(4, 4), bb, bb))(t(4, 4)), {}, "NN", F32),
]


@pytest.mark.parametrize("exc,pattern,make,kw,layout,precs", [pytest.param(*b[1:], id=b[0]) for b in BAD])
def test_bad_operands(exc, pattern, make, kw, layout, precs):
    a, b, c = make()
    expect(exc, pattern, a, b, c, layout=layout, precisions=precs, **kw)


def test_good_operands_nn_and_nt():
    p = check_operands(F32, "NN", t(3, 4), t(4, 5), t(3, 5), 1.0, 0.5, allow_cpu=True)
    assert (p.M, p.N, p.K, p.lda, p.ldb, p.ldc, p.precision) == (3, 5, 4, 4, 5, 5, "fp32")
    w = t(5, 4)   # (N, K) storage
    p = check_operands(("fp16",), "NT", t(3, 4, dtype=torch.float16), w.half().t(), None, allow_cpu=True)
    assert (p.ldb, p.precision, p.layout) == (4, "fp16", "NT")
    # a view into a wider tensor: the leading dimension is the row stride
    base = t(3, 10)
    p = check_operands(F32, "NN", base[:, 1:5], t(4, 5), None, allow_cpu=True)
    assert p.lda == 10


def test_precision_picked_from_dtype():
    p = check_operands(("fp16", "bf16"), "NN", t(2, 3, dtype=torch.bfloat16), t(3, 2, dtype=torch.bfloat16),
                       allow_cpu=True)
    assert p.precision == "bf16"
    assert check_operands(("tf32",), "NN", t(2, 3), t(3, 2), allow_cpu=True).precision == "tf32"


def test_device_checks():
    expect(ValueError, r"^a must be a CUDA tensor", t(3, 4), t(4, 5), None, allow_cpu=False)
    expect(ValueError, r"^b must be on the device of a", t(3, 4), t(4, 5, device="meta"), None)
    expect(ValueError, r"^c must be on the device of a", t(3, 4), t(4, 5), t(3, 5, device="meta"))


@pytest.mark.parametrize("which", ["a", "b", "c"])
def test_int32_limit_on_meta_tensors(which):
    """Past int32 indexing: refused before the device check, without allocating anything."""
    big, small = 2**16 + 1, 2**15
    assert (big - 1) * small + small > INT32_MAX
    shapes = {"a": ((big, small), (small, 8), None),
              "b": ((8, small), (small, big), None),
              "c": ((big, 4), (4, small), (big, small))}[which]
    a, b = t(*shapes[0], device="meta"), t(*shapes[1], device="meta")
    c = t(*shapes[2], device="meta") if shapes[2] else None
    expect(ValueError, rf"^{which} is too large: .*int32", a, b, c, allow_cpu=False)
    # just inside the limit passes the size check and stops at the device check
    a_ok = t(2**15, 2**16 - 1, device="meta")
    expect(ValueError, r"^a must be a CUDA tensor", a_ok, t(2**16 - 1, 1, device="meta"), None, allow_cpu=False)


def test_kernel_lookup_errors():
    with pytest.raises(ValueError, match=r"^family must be one of"):
        study.kernel("opencl", "s01")
    with pytest.raises(ValueError, match=r"^name: no cuda stage 's99'"):
        study.kernel("cuda", "s99")
    with pytest.raises(ValueError, match=r"^name: no triton stage 'nonexistent'"):
        study.kernel("triton", "nonexistent")
    with pytest.raises(ValueError, match=r"^name: cuBLAS precision must be one of"):
        study.kernel("cublas", "fp64")
    with pytest.raises(ValueError, match=r"^layout must be one of"):
        study.kernel("cublas", "fp32", layout="TT")
    with pytest.raises(ValueError, match=r"^layout: only cublas"):
        study.kernel("cuda", "s01", layout="NT")
    with pytest.raises(ValueError, match=r"^config: only CUDA autotuned"):
        study.kernel("triton", "s01", config=1)


@pytest.mark.parametrize("stage", [pytest.param(s, id=f"{s.family}-{s.stem}") for s in study.all_stages()])
def test_find_by_every_name(stage):
    for name in (stage.stem, stage.short, stage.slug, stage.short[1:], stage.number):
        assert registry.find(stage.family, name) == stage


def test_cublas_kernel_checks_before_launch(monkeypatch):
    from study import device

    monkeypatch.setattr(device, "capability", lambda: (9, 0))  # cuBLAS kernels, like stages, need a GPU
    f = study.kernel("cublas", "fp16")
    with pytest.raises(TypeError, match=r"^a must have dtype float16"):
        f(t(3, 4), t(4, 5))
    with pytest.raises(ValueError, match=r"^a must be a CUDA tensor"):
        f(t(3, 4, dtype=torch.float16), t(4, 5, dtype=torch.float16))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_stage_without_gpu_says_why():
    s = study.all_stages("cuda")[0]
    with pytest.raises(RuntimeError, match=r"cannot run here: no CUDA GPU"):
        study.kernel("cuda", s.stem)


# --- the tolerance module itself -------------------------------------------------------------

def test_tolerance_round_inputs_tf32():
    x = torch.tensor([1.0, 1.0 + 2**-11, 1.0 + 2**-10, 1.0 + 3 * 2**-11, math.inf, math.nan, -2.5])
    r = tolerance.round_inputs(x, "tf32")
    # ties round away from zero (cvt.rna); representable values are unchanged
    assert r[0] == 1.0 and r[1] == 1.0 + 2**-10 and r[2] == 1.0 + 2**-10 and r[3] == 1.0 + 2**-9
    assert math.isinf(r[4]) and math.isnan(r[5]) and r[6] == -2.5
    assert torch.allclose(tolerance.round_inputs(r, "tf32"), r, rtol=0, atol=0, equal_nan=True)


def test_tolerance_bounds_shape():
    for p in tolerance.U_IN:
        assert tolerance.bound(p, 1) <= tolerance.bound(p, 1000) <= tolerance.bound(p, 16384)
    assert tolerance.bound("fp32", 1000) < tolerance.bound("tf32", 1000, inputs_rounded=True) \
        < tolerance.bound("fp16", 1000) < tolerance.bound("tf32", 1000) < tolerance.bound("bf16", 1000)
    with pytest.raises(ValueError, match="precision"):
        tolerance.bound("fp64", 10)


def test_tolerance_rel_error_flags_unwritten():
    ref = torch.ones(4, 4, dtype=torch.float64)
    out = ref.float().clone()
    assert tolerance.rel_error(out, ref) == 0
    out[2, 3] = math.nan
    assert tolerance.rel_error(out, ref) == math.inf


def test_tolerance_rel_error_reads_grad_tensors_detached():
    """A gradient check's tensors require grad: measured without torch's warning about turning one
    into a Python scalar (the model API's GPU tests raised 12 of them)."""
    ref = torch.ones(4, 4, dtype=torch.float64, requires_grad=True)
    out = (ref.float() * 1.5).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tolerance.rel_error(out, ref) == pytest.approx(0.5)


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16", "bf16"])
def test_tolerance_catches_a_dropped_k_step(precision):
    """The bounds are tight enough that losing one K step (or one K tile) fails at K = 1000,
    while the correctly rounded result passes."""
    g = torch.Generator().manual_seed(0)
    dt = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    a = tolerance.round_inputs(torch.randn(64, 1000, generator=g), precision).to(dt)
    b = tolerance.round_inputs(torch.randn(1000, 48, generator=g), precision).to(dt)
    good = (a.double() @ b.double()).to(dt)
    tolerance.check(good, a, b, precision=precision, inputs_rounded=True)
    for drop in (1, 32):
        bad = (a[:, :-drop].double() @ b[:-drop].double()).to(dt)
        with pytest.raises(AssertionError):
            tolerance.check(bad, a, b, precision=precision, inputs_rounded=True)
    one = good.clone()
    one[5, 7] = one[5, 7] * 1.05 + 0.5   # one wrong element in 3072
    with pytest.raises(AssertionError, match="elementwise|Frobenius"):
        tolerance.check(one, a, b, precision=precision, inputs_rounded=True)


def test_autotune_key_separates_the_copy_paths():
    """4095^3 and 4096^3 share a shape class but run different kernels (4-byte vs 16-byte
    copies), so a CUDA stage's search at one must not choose for the other; 4000^3 (16-byte
    rows) shares 4096^3's search."""
    from types import SimpleNamespace

    from study import autotune
    from study.operands import Problem

    kern = SimpleNamespace(name="cuda:s08_autotuned")

    def key(n, ld=None, offset=0):
        ld = ld or n
        buf = torch.empty(n * ld + offset)
        a = buf[offset:offset + n * ld].view(n, ld)[:, :n]
        p = Problem(n, n, n, ld, ld, ld, "fp32", "NN")
        return autotune._key(kern, p, a, a, a)

    assert key(4096).endswith("|4096x4096x4096")
    assert key(4000) == key(4096)
    assert key(4095) == key(4096) + " unaligned"
    assert key(4096, ld=4100) == key(4096)
    assert key(4096, ld=4098).endswith(" unaligned")
    assert key(4096, offset=1).endswith(" unaligned")  # a 4-byte aligned base pointer
    assert key(4095, ld=4096) == key(4096)  # padded rows: the 16-byte kernel, K and N tails predicated


def test_fp8_and_inductor_lookup_errors():
    """fp8 and Inductor names: wrong layout, fast accumulation asked of a non-fp8 kernel, and a
    scale given to a kernel of another precision are refused before anything runs."""
    with pytest.raises(ValueError, match=r"^family must be one of .*'inductor'"):
        study.kernel("opencl", "s01")
    with pytest.raises(ValueError, match=r"^layout: cublas fp8 takes NT only"):
        study.kernel("cublas", "fp8", layout="NN")
    with pytest.raises(ValueError, match=r"^layout: inductor fp8 takes NT only"):
        study.kernel("inductor", "fp8", layout="NN")
    with pytest.raises(ValueError, match=r"^fast_accum: only fp8"):
        study.kernel("cublas", "bf16", fast_accum=True)
    with pytest.raises(ValueError, match=r"^scale_b: only fp8 kernels take scales"):
        check_operands(F32, "NN", t(3, 4), t(4, 5), None, allow_cpu=True, scale_b=torch.ones(()))
    assert "fp8" in study.operands.DTYPES and tolerance.bound("fp8", 1000) < tolerance.bound("fp8", 1000, fast_accum=True)


def test_a_dimension_of_one_reads_in_the_order_with_whole_rows():
    """An operand with a dimension of 1 fits both orders; the layout read from the strides is the
    first whose stored rows are 16-byte aligned, and a single stored row gets an aligned stride
    (nothing is addressed with it). Found on the H100: K = 1 in TN ([M, 1] views with stride
    (1, 1)) and N = 1 in NT were read as NN with 2-byte rows and refused."""
    from study.operands import infer_layout
    from study.tritonlib import stored_operands, tma_unsupported

    every = ("NN", "NT", "TN")
    a_tn = torch.empty(128, 1, dtype=torch.float16).t().contiguous().t()   # TN's A at K = 1: stride (1, 1)
    b_nn = torch.empty(1, 136, dtype=torch.float16)                # B [K = 1, N]
    assert a_tn.stride() == (1, 1)
    assert infer_layout(every, a_tn, b_nn) == "TN"
    assert infer_layout(("NN",), a_tn, b_nn) == "NN"               # a kernel that takes NN alone: as before
    p = check_operands(("fp16",), every, a_tn, b_nn, None, allow_cpu=True)
    assert (p.layout, p.lda, p.ldb) == ("TN", 128, 136)
    a = torch.empty(127, 264, dtype=torch.float16)
    b_nt = torch.empty(1, 264, dtype=torch.float16).t()            # NT's B at N = 1: [264, 1]
    assert infer_layout(every, a, b_nt) == "NT"
    assert check_operands(("fp16",), every, a, b_nt, None, allow_cpu=True).ldb == 264
    sa, sb = stored_operands(a_tn, b_nn, "TN")
    assert sa.shape == (1, 128) and sa.stride() == (128, 1) and sa.data_ptr() == a_tn.data_ptr()
    assert tma_unsupported(a_tn, b_nn, None, "TN") is None
    full = torch.empty(64, 48, dtype=torch.float16)                # no dimension of 1: strides decide
    assert infer_layout(every, full, torch.empty(48, 32, dtype=torch.float16)) == "NN"
    assert infer_layout(every, full, torch.empty(32, 48, dtype=torch.float16).t()) == "NT"


def test_tolerance_elementwise_allows_a_subnormal_outputs_rounding():
    """A correctly rounded fp16 output in the subnormal range (a K = 1 product seen on the H100:
    -1.97622e-05 stored as -1.97887e-05) is within the elementwise bound; twice the subnormal
    step off is not."""
    ref = torch.tensor([[-1.97622e-05]], dtype=torch.float64)
    scale = ref.abs()
    good = ref.to(torch.float16)
    assert float(good.double() - ref).__abs__() > 2.0**-11 * 2 * float(scale)   # past the relative part alone
    assert tolerance.max_elem_violations(good, ref, scale, "fp16", 1)[0] == 0
    bad = (good.double() + 2 * 2.0**-24).to(torch.float16)
    assert tolerance.max_elem_violations(bad, ref, scale, "fp16", 1)[0] == 1
