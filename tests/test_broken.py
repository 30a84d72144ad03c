"""Tests of the tests: deliberately broken kernels (tests/broken/, never in the registry) must
fail the very checks the stage tests run (gemm_checks.battery / check_deterministic).

  s91_skip_last_tile   K loop stops one tile early
  s92_k_tail_short     K-tail predicate drops the last k when K % 16 != 0
  s93_ignores_beta     epilogue never adds beta * C
  s94_missing_barrier  (CUDA only) no barrier between staging a tile and reading it: a race
  s95_reads_c_always   epilogue reads C even when beta == 0 (NaN-poisoned C leaks through)
  s96_nt_row_major     (Triton, NT) addresses the NT operand with the NN formula

Triton versions run on CPU in the interpreter (conftest.interp_results), CUDA versions (and the
Triton ones again) on the GPU."""
import pytest

import gemm_checks as gc
from conftest import broken_stages
from study.kernels import CudaKernel, TritonKernel

TRITON = [pytest.param(s, id=s.stem) for s in broken_stages("triton")]
CUDA = [pytest.param(s, id=s.stem) for s in broken_stages("cuda")]


def test_every_bug_has_a_fixture():
    stems = {s.stem for s in broken_stages("cuda")} | {s.stem for s in broken_stages("triton")}
    assert {"s91_skip_last_tile", "s92_k_tail_short", "s93_ignores_beta", "s94_missing_barrier",
            "s95_reads_c_always", "s96_nt_row_major"} <= stems
    import study
    real = {s.stem[:3] for s in study.all_stages()}
    assert not real & {s[:3] for s in stems}, "broken fixtures must not reuse a real stage number"


@pytest.mark.parametrize("stage", TRITON)
def test_interpreter_flags_broken_triton(stage, interp_results):
    recs = interp_results.get(str(stage.path), [])
    assert recs, f"{stage.stem}: no interpreter results"
    assert not any(r["case"] == "load" for r in recs), f"{stage.stem} failed to load: {recs}"
    failed = [r["case"] for r in recs if r["status"] == "fail"]
    assert failed, f"{stage.stem} is broken on purpose but passed every interpreter check: the checks are too weak"


def _gpu_failures(kern):
    cases = gc.battery("fp32", kern.layout, gc.GPU_SHAPES, gc.GPU_AB_SHAPE)
    fails = gc.failures(kern, "fp32", "cuda", cases)
    try:
        gc.check_deterministic(kern, gc.Case(1000, 1000, 1000, layout=kern.layout), "fp32", "cuda", runs=5)
    except AssertionError as exc:
        fails.append(("deterministic", str(exc)))
    return fails


@pytest.mark.gpu
@pytest.mark.parametrize("stage", CUDA)
def test_gpu_flags_broken_cuda(stage, cuda_built):
    fails = _gpu_failures(CudaKernel(stage))
    assert fails, f"{stage.stem} is broken on purpose but passed every GPU check: the checks are too weak"


@pytest.mark.gpu
@pytest.mark.parametrize("stage", TRITON)
def test_gpu_flags_broken_triton(stage):
    fails = _gpu_failures(TritonKernel(stage))
    assert fails, f"{stage.stem} is broken on purpose but passed every GPU check: the checks are too weak"
