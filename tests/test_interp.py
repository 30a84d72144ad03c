"""Every Triton stage under the Triton interpreter on CPU (TRITON_INTERPRET=1, in subprocesses):
every test class of gemm_checks (shapes, alpha_beta, ints, seeds, nonfinite, views, int32) at
tiny and ragged shapes vs fp64: alpha/beta, NaN-poisoned C with beta = 0, integer inputs compared
exactly, NaN/Inf propagation, operand and C views (padded leading dimensions, aligned and not),
leading dimensions at int32's limit, C in a guard band; fp8 with both scalings, promoted and fast
accumulation. See interp_run.py and gemm_checks.class_cases(). A case a stage refuses by its
declared limits runs at its fitted shape (gemm_checks.fit_case); a class of which no case ran
(all refused or skipped, but for a documented interpreter skip) fails: every class runs on every
stage. Every layout the header lists runs: the primary in conftest.interp_results, each other
one here (interp_run.py with that layout made the stage's first, so that the operands are built,
and read back by study, in it). A layout the header does not list is refused before any launch."""
import json
import os
import re
import subprocess
import sys

import pytest
import torch

import gemm_checks as gc
import study
from conftest import HERE, ROOT, interp_unusable
from interp_run import BF16_REASON
from study import registry
from study.kernels import DTYPES, TritonKernel

PARAMS = [pytest.param(s, p, lay, id=f"{s.stem}-{p}-{lay}") for s in study.all_stages("triton")
          for p in s.precisions for lay in s.layouts]

# interp_run.py with each (layout, path) pair's layout put first in that stage's header: the
# test classes build their operands in stage.layout, and study infers the layout primary first
CHILD = r"""
import dataclasses, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from study import registry
import interp_run
wanted = dict(arg.split(":", 1)[::-1] for arg in sys.argv[3:])   # path -> layout
parse = registry.parse_header
def parse_with_layout_first(path, family):
    st = parse(path, family)
    lay = wanted[str(path)]
    return dataclasses.replace(st, layout=lay, layouts=(lay,) + tuple(x for x in st.layouts if x != lay))
registry.parse_header = parse_with_layout_first
sys.exit(interp_run.main(list(wanted)))
"""


@pytest.fixture(scope="session")
def interp_other_layouts():
    """{(path, layout): [records]} of interp_run.py for every layout but the primary of each
    Triton stage of several layouts, in parallel subprocesses (one per position after the
    primary in the Layout lists), with TRITON_INTERPRET=1 set before any import."""
    why = interp_unusable()
    if why:
        pytest.skip(why)
    # child i runs layouts[i] of every stage that has one (a child takes one layout per stage)
    stages = study.all_stages("triton")
    groups = [[f"{s.layouts[i]}:{s.path}" for s in stages if len(s.layouts) > i]
              for i in range(1, max(len(s.layouts) for s in stages))]
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    procs = [(g, subprocess.Popen([sys.executable, "-c", CHILD, str(HERE), str(ROOT), *g], cwd=ROOT, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
             for g in groups]
    results: dict = {}
    errors = []
    for group, proc in procs:
        layout_of = dict(p.split(":", 1)[::-1] for p in group)
        out, err = proc.communicate(timeout=900)
        for line in out.splitlines():
            if line.startswith("{"):
                rec = json.loads(line)
                results.setdefault((rec["path"], layout_of[rec["path"]]), []).append(rec)
        if proc.returncode != 0:
            errors.append(err[-3000:])
    if errors:
        raise RuntimeError("interp_run.py failed:\n" + "\n".join(errors))
    return results


@pytest.mark.parametrize("stage,precision,layout", PARAMS)
def test_triton_interpreter(stage, precision, layout, request):
    if precision == "bf16":
        pytest.skip(BF16_REASON)
    if layout == stage.layout:
        results = request.getfixturevalue("interp_results").get(str(stage.path), [])
    else:
        results = request.getfixturevalue("interp_other_layouts").get((str(stage.path), layout), [])
    recs = [r for r in results if r["precision"] in (precision, "-")]
    what = f"{stage.stem} {precision} {layout}"
    assert recs, f"{what}: the interpreter run produced no results (crashed?)"
    load = [r["message"] for r in recs if r["class"] == "load"]
    assert not load, f"{what} failed to load: {load}"
    problems = [f"[{cls}] {p}" for cls in gc.PLATFORM_CLASSES["interp"] for p in gc.class_problems(recs, cls)]
    assert not problems, f"{what}: {len(problems)} interpreter problem(s):\n" + "\n".join(problems)


def _operands(layout: str, dtype, M=24, N=40, K=56):
    """a (M, K) and b (K, N) in `layout`, "TT" included (both transposed views); every
    dimension > 1, so that no tensor fits two forms."""
    a = torch.randn(K, M).to(dtype).t() if layout[0] == "T" else torch.randn(M, K).to(dtype)
    b = torch.randn(N, K).to(dtype).t() if layout[1] == "T" else torch.randn(K, N).to(dtype)
    return a, b


@pytest.mark.parametrize("stage", [pytest.param(s, id=s.stem) for s in study.all_stages("triton")])
def test_unlisted_layout_is_refused(stage, monkeypatch):
    """Operands in a layout the header does not list (TT for every stage) raise ValueError
    naming the layouts the stage takes, before any launch (study.operands.infer_layout)."""
    # the kernel is made as under the interpreter (no GPU needed; nothing is launched), but
    # TRITON_INTERPRET stays unset: the stage module must load as the compiler sees it
    monkeypatch.setattr(registry, "_interpreting", lambda: True)
    kern = TritonKernel(stage)
    plural = "s" if len(stage.layouts) > 1 else ""
    takes = re.escape(f"this kernel takes layout{plural} {', '.join(stage.layouts)})")
    for layout in [x for x in registry.LAYOUTS if x not in stage.layouts] + ["TT"]:
        a, b = _operands(layout, DTYPES[stage.precisions[0]])
        with pytest.raises(ValueError, match=rf"^[ab] must be .*{takes}"):
            kern(a, b)


def test_interpreter_usable_or_skipped_for_a_reason():
    """Documents the skip: the GPU machine's numpy 2.5 cannot run the interpreter."""
    why = interp_unusable()
    if why:
        pytest.skip(why)
