"""Shared fixtures: stage parametrisation from the registry, the interpreter subprocess runs,
the `gpu` marker's skip, the session's CUDA builds.

Every stage test is parametrised over study.all_stages(): a new stage file is tested by adding
it, with no test code. Test ids are the stage stems (plus precision / case)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))   # gemm_checks, interp_run

# The tests' own autotune caches (CUDA s08's autotune.json, the study children's Triton cache),
# set before study is imported and inherited by pytest-xdist's workers: a search timed while 4
# workers share the GPU is never reused by `make reports`, nor one of theirs by the tests.
TEST_CACHE_DIR = ROOT / "build" / "test-cache"
os.environ["STUDY_CACHE_DIR"] = str(TEST_CACHE_DIR)

import study  # noqa: E402
from study.registry import parse_header  # noqa: E402

BROKEN_DIR = HERE / "broken"


def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if has_cuda():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def broken_stages(family: str) -> list:
    """The deliberately broken kernels of tests/broken/ (never in the registry)."""
    ext = {"cuda": "cu", "triton": "py"}[family]
    return [parse_header(p, family) for p in sorted(BROKEN_DIR.glob(f"s9[0-9]_*.{ext}"))]


def interp_unusable() -> str | None:
    """Why the Triton interpreter cannot run here, or None."""
    import numpy

    major, minor = (int(x) for x in numpy.__version__.split(".")[:2])
    if (major, minor) >= (2, 4):
        return (f"the Triton interpreter breaks with numpy >= 2.4 (here {numpy.__version__}: "
                "'only 0-dimensional arrays can be converted to Python scalars')")
    return None


@pytest.fixture(scope="session")
def interp_results():
    """{(stem, path): [records]} from interp_run.py over every Triton stage and broken Triton
    kernel, run in 2 parallel subprocesses with TRITON_INTERPRET=1 set before any import."""
    why = interp_unusable()
    if why:
        pytest.skip(why)
    paths = [str(s.path) for s in study.all_stages("triton")] + \
            [str(s.path) for s in broken_stages("triton")]
    groups = [paths[i::2] for i in range(2)]
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    procs = [subprocess.Popen([sys.executable, str(HERE / "interp_run.py"), *g], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for g in groups if g]
    results: dict = {}
    errors = []
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        for line in out.splitlines():
            if line.startswith("{"):
                rec = json.loads(line)
                results.setdefault(rec["path"], []).append(rec)
        if proc.returncode != 0:
            errors.append(err[-3000:])
    if errors:
        raise RuntimeError("interp_run.py failed:\n" + "\n".join(errors))
    return results


@pytest.fixture(scope="session")
def cuda_built():
    """Every CUDA stage and broken CUDA fixture built once, in parallel, before the GPU tests
    (a failed build is reported by the tests of that stage)."""
    from study import build

    if os.environ.get("STUDY_TEST_WARM"):   # test_gpu.triton_warm's subprocesses: Triton only
        return {}
    stages = study.all_stages("cuda") + broken_stages("cuda")
    return {r.stem: r for r in build.build(stages, jobs=min(16, os.cpu_count() or 1))}


def cpu_rowwise_scaled_mm_unsupported() -> str | None:
    """Why torch._scaled_mm cannot take row-wise scales on CPU tensors here, or None. torch 2.13's
    CPU kernel takes them; torch 2.11's (the pinned set's) takes per-tensor scales only."""
    import torch

    a = torch.zeros(16, 16).to(torch.float8_e4m3fn)
    try:
        torch._scaled_mm(a, a.t(), torch.ones(16, 1), torch.ones(1, 16), out_dtype=torch.bfloat16)
    except RuntimeError:
        return f"torch {torch.__version__}: _scaled_mm on CPU takes per-tensor scales only (the GPU tests cover row-wise)"
    return None


def _cuda_context_error() -> str | None:
    """Why the CUDA context is dead (a kernel fault is sticky: every later CUDA call fails), or
    None; None too where CUDA was never initialised in this process."""
    import torch

    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    try:
        torch.cuda.synchronize()
    except RuntimeError as exc:
        return str(exc).splitlines()[0][:200]
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that killed the CUDA context takes its process down with it, rather than failing
    every later test of that process: under pytest-xdist the worker exits (xdist reports this test
    as the one it crashed in and starts a fresh worker for the rest); in a single process the
    session stops, naming the test."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call" or not rep.failed:
        return
    dead = _cuda_context_error()
    if dead is None:
        return
    msg = f"{item.nodeid} killed the CUDA context ({dead})"
    if os.environ.get("PYTEST_XDIST_WORKER"):
        print(f"\n{msg}: this worker exits", file=sys.stderr, flush=True)
        os._exit(3)
    pytest.exit(f"{msg}; the remaining tests would fail on the dead context", returncode=1)
