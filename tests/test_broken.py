"""Tests of the tests: deliberately broken kernels (tests/broken/, never in the registry) must
fail the very checks the stage tests run (gemm_checks.class_cases / run_cases), each for the
right reason, and pass the others.

  s90_m_tile_floor     grid of M // 16 tile rows: the last partial tile row is never computed
  s91_skip_last_tile   K loop stops one tile early
  s92_k_tail_short     K-tail predicate drops the last k when K % 16 != 0
  s93_ignores_beta     epilogue never adds beta * C
  s94_missing_barrier  (CUDA) no barrier between staging a tile and reading it: a race
  s95_reads_c_always   epilogue reads C even when beta == 0 (NaN-poisoned C leaks through)
  s96_nt_row_major     (Triton, NT) addresses the NT operand with the NN formula
  s96_int32_bytes      (CUDA) byte offsets in 32-bit registers: wrong past 4 GiB (int32 class)
  s97_no_store_mask    stores C without the M/N predicate: caught by the guard band only
  s98_lda_as_k         (Triton, fp16 tensor cores) the vector path indexes A's rows with K, not
                       lda: caught by padded, aligned leading dimensions only
  s98_ring_race        (CUDA) cp.async ring waits one group too few: tiles read before they land
  s99_alpha_on_c       epilogue computes alpha * (acc + beta * C)

Each fixture declares, per test class (gemm_checks.CLASSES), what must happen, in lines this
file reads from the source (Python assignments, or `//` comments in a .cu file):

  MUST_FAIL = {"views": "numeric", ...}   class -> the check (gemm_checks.CHECKS; or a list of
                                          them) that must fail it: at least one case fails, and
                                          every failure is a CheckFailure of that check (an
                                          AssertionError of the check, never a ValueError, a
                                          crash or an import error)
  MUST_PASS = ["shapes", ...]             no case fails, and one ran
  MAY_FAIL  = [...]                       a race: failures allowed (CheckFailures only); with an
                                          empty MUST_FAIL at least one of these must fail

Together they name every class once. Triton versions run on CPU in the interpreter
(conftest.interp_results: the classes of gemm_checks.PLATFORM_CLASSES["interp"]); CUDA versions
compile here (nvcc, sm_90a) and run, with the Triton ones again, on the GPU (every class; the
int32 class needs ~8.6 GB of GPU memory for its fp32 cases). s96_int32_bytes and s98_ring_race
are GPU-only checks; the int32 class's address arithmetic also runs on CPU for every Triton
stage (leading dimensions near 2^31 / rows over unwritten virtual memory)."""
import ast
import hashlib
import re
import shutil

import pytest

import gemm_checks as gc
from conftest import ROOT, broken_stages
from study import build
from study.kernels import CudaKernel, TritonKernel

TRITON = [pytest.param(s, id=s.stem) for s in broken_stages("triton")]
CUDA = [pytest.param(s, id=s.stem) for s in broken_stages("cuda")]
ALL = [pytest.param(s, id=f"{s.family}-{s.stem}") for s in broken_stages("cuda") + broken_stages("triton")]
BUGS = {"s90_m_tile_floor", "s91_skip_last_tile", "s92_k_tail_short", "s93_ignores_beta", "s94_missing_barrier",
        "s95_reads_c_always", "s96_nt_row_major", "s96_int32_bytes", "s97_no_store_mask", "s98_lda_as_k",
        "s98_ring_race", "s99_alpha_on_c"}
KEYS = ("MUST_FAIL", "MUST_PASS", "MAY_FAIL")
_DECL = re.compile(r"^(?://\s*)?(MUST_FAIL|MUST_PASS|MAY_FAIL)\s*=\s*(.+?)\s*$", re.M)
ARCH_FLAG = "-gencode=arch=compute_90a,code=sm_90a"


def declarations(stage) -> dict:
    """{"MUST_FAIL": {class: (checks,)}, "MUST_PASS": [classes], "MAY_FAIL": [classes]} from
    the fixture's source; ValueError if a line is missing, repeated or not a literal."""
    found = {}
    for key, value in _DECL.findall(stage.path.read_text()):
        if key in found:
            raise ValueError(f"{stage.path.name}: {key} given twice")
        found[key] = ast.literal_eval(value)
    missing = [k for k in KEYS if k not in found]
    if missing:
        raise ValueError(f"{stage.path.name}: no {', '.join(missing)} line")
    must_fail = {cls: (chk,) if isinstance(chk, str) else tuple(chk) for cls, chk in found["MUST_FAIL"].items()}
    return {"MUST_FAIL": must_fail, "MUST_PASS": list(found["MUST_PASS"]), "MAY_FAIL": list(found["MAY_FAIL"])}


def verdict(decl: dict, records, classes) -> list:
    """What contradicts the declarations in one platform's records (run_cases records of the
    classes `classes`); [] when the fixture failed as declared."""
    problems, failed_any = [], False
    for cls in classes:
        recs = [r for r in records if r["class"] == cls]
        fails = [r for r in recs if r["status"] == "fail"]
        failed_any |= bool(fails)
        show = lambda rs: "; ".join(f"{r['case']}: {r['message'][:200]}" for r in rs[:3])  # noqa: E731
        wrong = [r for r in fails if r["error"] != "CheckFailure"]
        if wrong:
            problems.append(f"[{cls}] failed by {sorted({r['error'] for r in wrong})}, not by a check: {show(wrong)}")
        if not recs:
            problems.append(f"[{cls}] no case ran")
        elif cls in decl["MUST_FAIL"]:
            want = decl["MUST_FAIL"][cls]
            if not fails:
                problems.append(f"[{cls}] passed every case: it must fail ({' or '.join(want)} check)")
            off = [r for r in fails if r["error"] == "CheckFailure" and r["check"] not in want]
            if off:
                problems.append(f"[{cls}] failed by the {sorted({r['check'] for r in off})} check, not "
                                f"{' or '.join(want)}: {show(off)}")
        elif cls in decl["MUST_PASS"]:
            if fails:
                problems.append(f"[{cls}] must pass, but {len(fails)} case(s) failed: {show(fails)}")
            elif not any(r["status"] == "pass" for r in recs):
                problems.append(f"[{cls}] must pass, but no case ran: {show(recs)}")
    if not decl["MUST_FAIL"] and not failed_any:
        problems.append(f"nothing failed: at least one of {decl['MAY_FAIL']} must")
    return problems


def test_every_bug_has_a_fixture():
    stems = {s.stem for s in broken_stages("cuda")} | {s.stem for s in broken_stages("triton")}
    assert BUGS <= stems
    import study
    real = {s.stem[:3] for s in study.all_stages()}
    assert not real & {s[:3] for s in stems}, "broken fixtures must not reuse a real stage number"
    for family in ("cuda", "triton"):   # a number names one fixture per family (pairs share it)
        numbers = [s.short for s in broken_stages(family)]
        assert len(numbers) == len(set(numbers)), f"{family}: a fixture number is used twice: {numbers}"


@pytest.mark.parametrize("stage", ALL)
def test_declarations_name_every_class_once(stage):
    decl = declarations(stage)
    named = list(decl["MUST_FAIL"]) + decl["MUST_PASS"] + decl["MAY_FAIL"]
    assert sorted(named) == sorted(gc.CLASSES), \
        f"{stage.path.name}: MUST_FAIL, MUST_PASS and MAY_FAIL must name each of {gc.CLASSES} once, got {named}"
    bad = {c: v for c, v in decl["MUST_FAIL"].items() if not v or set(v) - set(gc.CHECKS)}
    assert not bad, f"{stage.path.name}: MUST_FAIL names checks that do not exist ({gc.CHECKS}): {bad}"


def _rec(cls, status="pass", check="", error=""):
    return {"class": cls, "case": "1x1x1", "status": status, "check": check, "error": error, "message": "m"}


def test_verdict_rules():
    """The rules themselves: a failure by a ValueError or by the wrong check, a MUST_FAIL class
    that passed, a MUST_PASS class that failed or never ran, a race that failed nowhere."""
    decl = {"MUST_FAIL": {"views": ("numeric",)}, "MUST_PASS": ["shapes"], "MAY_FAIL": []}
    ok = [_rec("shapes"), _rec("views", "fail", "numeric", "CheckFailure"), _rec("views")]
    assert verdict(decl, ok, ["shapes", "views"]) == []
    for recs in ([_rec("shapes"), _rec("views")],                                          # passed
                 [_rec("shapes"), _rec("views", "fail", "", "ValueError")],                # refused
                 [_rec("shapes"), _rec("views", "fail", "guard", "CheckFailure")],         # other check
                 [_rec("shapes"), _rec("views", "fail", "", "ImportError")],               # crashed
                 [_rec("shapes", "fail", "numeric", "CheckFailure"), *ok[1:]],             # must pass
                 [_rec("shapes", "refused", "", "ValueError"), *ok[1:]],                   # ran nothing
                 ok[1:]):                                                                  # no records
        assert verdict(decl, recs, ["shapes", "views"]), recs
    race = {"MUST_FAIL": {}, "MUST_PASS": [], "MAY_FAIL": ["shapes"]}
    assert verdict(race, [_rec("shapes")], ["shapes"])
    assert not verdict(race, [_rec("shapes", "fail", "deterministic", "CheckFailure")], ["shapes"])


def _cubin(stage) -> str:
    """nvcc the fixture to a cubin for sm_90a with the build's flags, cached under
    build/static/broken by source hash; returns ptxas's log."""
    h = hashlib.sha1()
    for p in build.included_sources(stage.path):
        h.update(p.read_bytes())
    h.update(" ".join(build.NVCC_FLAGS + build.TORCH_NVCC_DEFINES + [ARCH_FLAG]).encode())
    d = ROOT / "build" / "static" / "broken" / f"{stage.stem}-{h.hexdigest()[:12]}"
    log = d / "ptxas.log"
    if not log.exists():
        _, _, text = build.compile_cubin(stage, d, ARCH_FLAG)
        log.write_text(text)
    return log.read_text()


@pytest.mark.parametrize("stage", CUDA)
def test_cuda_fixture_compiles(stage):
    """Every CUDA fixture compiles here (it runs only on a GPU): nvcc for sm_90a, one kernel in
    its namespace, and study generates its binding from the header."""
    if not shutil.which("nvcc"):
        pytest.skip("no nvcc on PATH")
    res = build.parse_ptxas(_cubin(stage))
    assert res and all(stage.stem in r.function for r in res), f"{stage.stem}: kernels {res}"
    from study import binding
    assert f"{stage.stem}::launch" in binding.binding_source(stage)


@pytest.mark.parametrize("stage", TRITON)
def test_interpreter_flags_broken_triton(stage, interp_results):
    recs = interp_results.get(str(stage.path), [])
    assert recs, f"{stage.stem}: no interpreter results"
    assert not any(r["class"] == "load" for r in recs), f"{stage.stem} failed to load: {recs}"
    problems = verdict(declarations(stage), recs, gc.PLATFORM_CLASSES["interp"])
    assert not problems, f"{stage.stem} did not fail as declared in the interpreter:\n" + "\n".join(problems)


def _gpu_records(kern, stage) -> list:
    prec = stage.precisions[0]
    align = gc.alignment(kern, prec)
    return [r for cls in gc.PLATFORM_CLASSES["gpu"]
            for r in gc.run_cases(kern, cls, gc.class_cases(cls, "gpu", prec, stage.layout, align), prec, "cuda")]


@pytest.mark.gpu
@pytest.mark.parametrize("stage", CUDA)
def test_gpu_flags_broken_cuda(stage, cuda_built):
    assert cuda_built[stage.stem].ok, f"{stage.stem} failed to build:\n{cuda_built[stage.stem].error[-3000:]}"
    problems = verdict(declarations(stage), _gpu_records(CudaKernel(stage), stage), gc.PLATFORM_CLASSES["gpu"])
    assert not problems, f"{stage.stem} did not fail as declared on the GPU:\n" + "\n".join(problems)


@pytest.mark.gpu
@pytest.mark.parametrize("stage", TRITON)
def test_gpu_flags_broken_triton(stage):
    problems = verdict(declarations(stage), _gpu_records(TritonKernel(stage), stage), gc.PLATFORM_CLASSES["gpu"])
    assert not problems, f"{stage.stem} did not fail as declared on the GPU:\n" + "\n".join(problems)
