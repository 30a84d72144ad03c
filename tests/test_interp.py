"""Every Triton stage under the Triton interpreter on CPU (TRITON_INTERPRET=1, in subprocesses):
tiny and ragged shapes vs fp64, alpha/beta, NaN-poisoned C with beta = 0, integer inputs
compared exactly, NaN/Inf propagation; fp8 with both scalings, promoted and fast accumulation.
See interp_run.py and gemm_checks.battery(). A precision whose cases were all refused or skipped
fails: a stage must run somewhere in its battery."""
import pytest

import study
from conftest import interp_unusable
from interp_run import BF16_REASON

PARAMS = [pytest.param(s, p, id=f"{s.stem}-{p}") for s in study.all_stages("triton") for p in s.precisions]


@pytest.mark.parametrize("stage,precision", PARAMS)
def test_triton_interpreter(stage, precision, interp_results):
    if precision == "bf16":
        pytest.skip(BF16_REASON)
    recs = [r for r in interp_results.get(str(stage.path), []) if r["precision"] in (precision, "-")]
    assert recs, f"{stage.stem}: the interpreter run produced no results (crashed?)"
    failed = [f"{r['case']}: {r['message']}" for r in recs if r["status"] == "fail"]
    assert not failed, f"{stage.stem} {precision} failed {len(failed)} interpreter case(s):\n" + \
        "\n".join(failed)
    passed = [r for r in recs if r["status"] == "pass"]
    assert passed, f"{stage.stem} {precision}: no interpreter case ran (all refused or skipped):\n" + \
        "\n".join(f"{r['case']}: {r['message'][:200]}" for r in recs)


def test_interpreter_usable_or_skipped_for_a_reason():
    """Documents the skip: the GPU machine's numpy 2.5 cannot run the interpreter."""
    why = interp_unusable()
    if why:
        pytest.skip(why)
