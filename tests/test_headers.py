"""Stage headers and pairing (CPU): the header is the single source of truth, so it is checked
as data. Parametrised over the files on disk (a file whose header does not parse is a test
failure here, not a collection error)."""
import ast
import re
from pathlib import Path

import pytest

import study
from study import registry
from study.registry import CUDA_DIR, ROOT, TRITON_DIR, parse_header

FILES = [("cuda", p) for p in sorted(CUDA_DIR.glob("s*.cu"))] + \
        [("triton", p) for p in sorted(TRITON_DIR.glob("s*.py"))]
FILE_PARAMS = [pytest.param(f, p, id=f"{f}-{p.stem}") for f, p in FILES]
SECTIONS = ("tile assignment", "operand staging", "loop over k", "epilogue")


@pytest.mark.parametrize("family,path", FILE_PARAMS)
def test_header_parses(family, path):
    s = parse_header(path, family)
    assert s.title and s.stem == path.stem
    for key in registry.KEYS:   # parse_header already refuses empty keys; belt and braces
        assert getattr(s, key.lower()).strip(), f"{path.name}: {key} is empty"


HEADER_MAX_LINES = 22   # STYLE.md point 2: "about 20 lines"; the notebook goes to docs/stages/


def header_lines(path) -> list:
    """The header as written: the leading `//` block of a .cu file, or the module docstring of a
    .py file from its opening quotes through its closing quotes."""
    lines = path.read_text().splitlines()
    if path.suffix == ".cu":
        out = []
        for line in lines:
            if not line.startswith("//"):
                break
            out.append(line)
        return out
    assert lines and lines[0].startswith('"""'), f"{path.name}: the module docstring must open the file"
    if lines[0].count('"""') >= 2:
        return lines[:1]
    for i, line in enumerate(lines[1:], 1):
        if '"""' in line:
            return lines[:i + 1]
    raise AssertionError(f"{path.name}: the module docstring is never closed")


@pytest.mark.parametrize("family,path", FILE_PARAMS)
def test_header_names_its_log(family, path):
    """Every header carries every key, Log included, and Log names docs/stages/<stem>.md, which
    exists: the experiment log of the stage (both families share it)."""
    s = parse_header(path, family)
    for key in registry.KEYS + ("Log",):
        assert getattr(s, key.lower()).strip(), f"{path.name}: header key {key} is missing or empty"
    want = f"docs/stages/{path.stem}.md"
    assert s.log == want, f"{path.name}: Log must be {want!r}, got {s.log!r}"
    assert (ROOT / s.log).is_file(), f"{path.name}: Log names {s.log}, which does not exist"


@pytest.mark.parametrize("family,path", FILE_PARAMS)
def test_header_is_short(family, path):
    """STYLE.md point 2: a header states the one idea (Change 1-2 lines, Why up to ~5, Expect one
    line); what was tried and measured belongs in the stage's log, not here."""
    lines = header_lines(path)
    assert len(lines) <= HEADER_MAX_LINES, \
        f"{path.name}: header is {len(lines)} lines (at most {HEADER_MAX_LINES}); move the notebook to docs/stages/"
    text = "\n".join(lines)
    expect = re.findall(r"^(?://)?[ \t]*Expect:.*(?:\n(?://)? {2,}\S.*)*", text, re.M)
    assert len(expect) == 1 and "\n" not in expect[0], f"{path.name}: Expect must be one line"
    assert re.search(r"\d", expect[0]), f"{path.name}: Expect must carry a number"


@pytest.mark.parametrize("family,path", FILE_PARAMS)
def test_stem_zero_padded(family, path):
    assert re.fullmatch(r"s\d{2}_[a-z0-9]+(_[a-z0-9]+){0,2}", path.stem), \
        f"{path.name}: stem must be sNN_slug, NN zero-padded (s04, not s4), slug 1-3 lowercase words"


@pytest.mark.parametrize("family,path", FILE_PARAMS)
def test_header_values(family, path):
    s = parse_header(path, family)
    assert re.match(r"^[a-z0-9, ]+ in / \w+ acc / .+ out$", s.dtype), \
        f"{path.name}: Dtype must read '<precisions> in / <acc> acc / <out> out', got {s.dtype!r}"
    assert s.limits.lower().startswith("none") or "ValueError" in s.limits, \
        f"{path.name}: Limits must be 'none (...)' or say which inputs raise ValueError, got {s.limits!r}"
    assert not ({"fp32", "tf32"} <= set(s.precisions)), \
        f"{path.name}: fp32 and tf32 both take float32 tensors; a stage can run only one of them"
    assert len(set(s.precisions)) == len(s.precisions), f"{path.name}: repeated precision"


@pytest.mark.parametrize("family,path", FILE_PARAMS)
def test_pair(family, path):
    s = parse_header(path, family)
    if s.pair.startswith("none"):
        assert re.match(r"^none: \S", s.pair), f"{path.name}: an unpaired stage says 'none: <reason>'"
        return
    other_family = "triton" if family == "cuda" else "cuda"
    want = (TRITON_DIR / f"{s.stem}.py") if family == "cuda" else (CUDA_DIR / f"{s.stem}.cu")
    assert s.pair == str(want.relative_to(ROOT)), \
        f"{path.name}: Pair must name {want.relative_to(ROOT)} (same stem) or 'none: <reason>', got {s.pair!r}"
    assert want.exists(), f"{path.name}: Pair {s.pair} does not exist"
    o = parse_header(want, other_family)
    assert o.pair == str(path.relative_to(ROOT)), \
        f"{want.name}: its Pair must point back to {path.relative_to(ROOT)}, got {o.pair!r}"
    assert set(o.precisions) == set(s.precisions), \
        f"{s.stem}: the pair disagrees on precisions ({s.precisions} vs {o.precisions})"
    assert o.layout == s.layout, f"{s.stem}: the pair disagrees on layout ({s.layout} vs {o.layout})"


@pytest.mark.parametrize("family,path", FILE_PARAMS)
def test_unpaired_file_says_none(family, path):
    """A stem present in only one family must say why in Pair."""
    s = parse_header(path, family)
    other = (TRITON_DIR / f"{s.stem}.py") if family == "cuda" else (CUDA_DIR / f"{s.stem}.cu")
    if not other.exists():
        assert s.pair.startswith("none:"), f"{path.name}: no pair file on disk, so Pair must be 'none: <reason>'"


def test_names_unique():
    """One stem per stage number across both families; registry lookups are unambiguous."""
    by_number: dict = {}
    for family, path in FILES:
        by_number.setdefault(path.stem[:3], set()).add(path.stem)
    clashes = {n: sorted(st) for n, st in by_number.items() if len(st) > 1}
    assert not clashes, f"one stage number, different stems (pairs must share the stem): {clashes}"
    for family in registry.FAMILIES:
        stages = study.all_stages(family)
        slugs = [s.slug for s in stages]
        assert len(slugs) == len(set(slugs)), f"{family}: duplicate slugs {slugs}"


def test_registry_sees_every_file():
    assert {(s.family, s.path) for s in study.all_stages()} == {(f, p) for f, p in FILES}
    table = study.stages(capability=None)
    assert list(table["stage"]) == sorted({p.stem for _, p in FILES})


@pytest.mark.parametrize("family,path", FILE_PARAMS)
def test_section_comments(family, path):
    """STYLE.md: the four section comments in every kernel, in both families (a CUDA stage whose
    kernel body lives in a common/ header it includes counts that header's comments)."""
    from study.build import included_sources

    files = included_sources(path) if family == "cuda" else [path]
    text = "\n".join(f.read_text() for f in files).lower()
    missing = [sec for sec in SECTIONS if sec not in text]
    assert not missing, f"{path.name}: missing section comment(s) {missing}"


@pytest.mark.parametrize("family,path", [p for p in FILE_PARAMS if p.values[0] == "cuda"])
def test_cuda_file_contract(family, path):
    text = path.read_text()
    for inc in re.findall(r'^\s*#\s*include\s+[<"]([^>"]+)[>"]', text, re.M):
        assert not inc.startswith(("torch", "ATen", "c10", "pybind11")), \
            f"{path.name}: stage files are pure CUDA, found #include {inc}"
        if "/" in inc:
            assert inc.startswith("common/"), f"{path.name}: project includes come from common/, got {inc}"
    assert re.search(rf"\bnamespace\s+{path.stem}\b", text), f"{path.name}: everything inside namespace {path.stem}"
    assert re.search(r"\bunsupported\s*\(", text) and re.search(r"\blaunch\s*\(", text), \
        f"{path.name}: must define unsupported() and launch()"


@pytest.mark.parametrize("family,path", [p for p in FILE_PARAMS if p.values[0] == "triton"])
def test_triton_file_contract(family, path):
    tree = ast.parse(path.read_text())
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "matmul" in funcs, f"{path.name}: must define matmul(a, b, c, alpha=1.0, beta=0.0)"
    args = [a.arg for a in funcs["matmul"].args.args]
    assert args[:5] == ["a", "b", "c", "alpha", "beta"], f"{path.name}: matmul signature is {args}"
    jitted = [n for n, f in funcs.items()
              if any("jit" in ast.unparse(d) or "autotune" in ast.unparse(d) for d in f.decorator_list)]
    assert jitted, f"{path.name}: no @triton.jit kernel"
    for name in jitted:
        assert name.startswith(path.stem) and name.endswith("_kernel"), \
            f"{path.name}: kernel {name} must be named {path.stem}_kernel or {path.stem}_<role>_kernel"
    assert not (TRITON_DIR / "__init__.py").exists(), "triton_kernels/ must not be a package"


@pytest.mark.parametrize("family,path", FILE_PARAMS)
def test_scaled_precision_names_its_output(family, path):
    """A scaled precision (fp8) stands alone in Dtype and names its output type (bf16 or fp16):
    the generated binding and C's dtype come from it; a pair agrees on it."""
    s = parse_header(path, family)
    if not set(s.precisions) & set(registry.SCALED):
        return
    assert s.precisions == ("fp8",) and s.out in registry.SCALED_OUT, f"{path.name}: Dtype {s.dtype!r}"
    assert s.layout == "NT", f"{path.name}: FP8 tensor cores read K-major A and B only (layout NT)"
    if not s.pair.startswith("none"):
        other = parse_header(ROOT / s.pair, "triton" if family == "cuda" else "cuda")
        assert other.out == s.out, f"{s.stem}: the pair disagrees on the output type ({s.out} vs {other.out})"
