"""The stage registry: stage files' headers are the only list of stages.

A stage is `cuda_src/sNN_slug.cu` and/or `triton_kernels/sNN_slug.py`; equal stems are pairs.
Each file opens with a header (CUDA: `//` lines; Triton: the module docstring):

    sNN_slug: title
    Change: ...   Why: ...   Expect: ...   Limits: ...
    Dtype:  fp32 in / fp32 acc / fp32 out        Arch: sm_80+      Layout: NN, NT, TN
    Pair:   triton_kernels/sNN_slug.py

Layout lists the operand layouts the stage takes (LAYOUTS), comma separated; the first is its
primary layout, the one the study times by default.

Nothing else in the project lists stages: report rows, test ids and CLI names come from here.
"""
from __future__ import annotations

import ast
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

# Where the stage files live. In a source checkout (or an editable install) the package sits
# beside cuda_src/ and triton_kernels/; a regular install (`pip install .`) carries them inside
# the package as study/_stages/, so `import study` finds its kernels from any directory.
PACKAGE_PARENT = Path(__file__).resolve().parent.parent   # on PYTHONPATH of child processes
IN_CHECKOUT = (PACKAGE_PARENT / "cuda_src").is_dir() and (PACKAGE_PARENT / "triton_kernels").is_dir()
ROOT = PACKAGE_PARENT if IN_CHECKOUT else Path(__file__).resolve().parent / "_stages"
CUDA_DIR = ROOT / "cuda_src"
TRITON_DIR = ROOT / "triton_kernels"
# Where compiled stages and autotune choices go: build/ of the checkout, else a per-user cache.
STATE_ROOT = (PACKAGE_PARENT if IN_CHECKOUT else
              Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gemm-ladder-study")
# Where `make reports` / `python -m study reports` write: reports/ of the checkout, else ./reports.
REPORTS_ROOT = PACKAGE_PARENT / "reports" if IN_CHECKOUT else Path.cwd() / "reports"

FAMILIES = ("cuda", "triton")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")
# Precisions whose operands carry scales (C = alpha * (Sa A) @ (B Sb) + beta * C): fp8 is e4m3
# A and B with fp32 scales per tensor or per row of A / column of B; its output type is the
# Dtype line's "<out> out" (one of SCALED_OUT), not the input type.
SCALED = ("fp8",)
SCALED_OUT = ("bf16", "fp16")
# For C[M,N] = A[M,K] @ B[K,N]: NN both row-major; NT B the transposed view of a row-major [N, K]
# (x @ W.T); TN A the transposed view of a row-major [K, M] (dY^T @ X). TT is not supported.
LAYOUTS = ("NN", "NT", "TN")
ARCHES = ("sm_80+", "sm_90a")
KEYS = ("Change", "Why", "Expect", "Limits", "Dtype", "Arch", "Layout", "Pair")
OPTIONAL_KEYS = ("Log",)   # Log: docs/stages/sNN_slug.md, the stage's experiment log
DOCS_DIR = ROOT / "docs" / "stages"

_STEM = re.compile(r"^s(\d{2})_([a-z0-9]+(?:_[a-z0-9]+){0,2})$")
_KEY_LINE = re.compile(r"^(\w+):\s*(.*)$")


class HeaderError(ValueError):
    """A stage file's header is missing a key or has a value the registry cannot read."""


@dataclass(frozen=True)
class Stage:
    """One stage file of one family, as its header describes it."""

    family: str          # "cuda" or "triton"
    stem: str            # "s04_vectorized"
    path: Path
    title: str           # "128-bit loads"
    change: str
    why: str
    expect: str
    limits: str
    dtype: str           # the Dtype line as written
    precisions: tuple    # ("fp32",) or ("fp16", "bf16") ...
    arch: str            # "sm_80+" or "sm_90a"
    layout: str          # the primary layout: layouts[0]
    pair: str            # "triton_kernels/s04_vectorized.py" or "none: <reason>"
    log: str = ""        # "docs/stages/s04_vectorized.md" (the Log key), or "" if none
    layouts: tuple = ()  # every layout the header lists, primary first; () means (layout,)

    def __post_init__(self):
        # a Stage built by hand with one layout (tests) takes just that one
        if not self.layouts:
            object.__setattr__(self, "layouts", (self.layout,))
        if self.layouts[0] != self.layout:
            raise ValueError(f"layouts must start with the primary layout {self.layout!r}, got {self.layouts}")

    @property
    def number(self) -> int:
        return int(self.stem[1:3])

    @property
    def short(self) -> str:
        """"s04": the name users type."""
        return self.stem[:3]

    @property
    def slug(self) -> str:
        return self.stem[4:]

    @property
    def lines_of_code(self) -> int:
        """Non-blank lines of the stage file (comments included: they are part of the lesson)."""
        return sum(1 for line in self.path.read_text().splitlines() if line.strip())

    @property
    def out(self) -> str:
        """The output precision the Dtype line names ("bf16" in "fp8 in / fp32 acc / bf16 out")."""
        return out_precision(self.dtype)

    def min_capability(self) -> tuple:
        return (9, 0) if self.arch == "sm_90a" else (8, 0)

    def unavailable_reason(self, capability: tuple | None) -> str | None:
        """None if a GPU of this compute capability runs the stage, else why not."""
        if capability is None:
            if self.family == "triton" and _interpreting():
                return None
            return "no CUDA GPU"
        if self.arch == "sm_90a" and tuple(capability) != (9, 0):
            return f"needs sm_90a (Hopper, compute capability 9.0); this GPU is sm_{capability[0]}{capability[1]}"
        if tuple(capability) < self.min_capability():
            return f"needs {self.arch}; this GPU is sm_{capability[0]}{capability[1]}"
        return None


def _interpreting() -> bool:
    import os

    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def out_precision(dtype: str) -> str:
    """The "<out> out" word of a Dtype line ("" if it names none)."""
    m = re.search(r"/\s*([a-z0-9]+)\s+out\s*$", dtype)
    return m.group(1) if m else ""


def _header_text(path: Path) -> str:
    """The raw header text of a stage file, comment markers removed."""
    text = path.read_text()
    if path.suffix == ".cu":
        lines = []
        for line in text.splitlines():
            if not line.startswith("//"):
                break
            lines.append(line[3:] if line.startswith("// ") else line[2:])
        return "\n".join(lines)
    doc = ast.get_docstring(ast.parse(text), clean=True)
    if doc is None:
        raise HeaderError(f"{path}: no module docstring (the stage header)")
    return doc


def _split_inline_keys(value: str) -> dict:
    """The Dtype line carries Arch and Layout on the same line: split them out."""
    out = {}
    parts = re.split(r"\s{2,}(?=(?:Arch|Layout):)", value)
    out["Dtype"] = parts[0].strip()
    for part in parts[1:]:
        key, _, val = part.partition(":")
        out[key.strip()] = val.strip()
    return out


def parse_header(path: Path, family: str) -> Stage:
    """Read one stage file's header into a Stage; HeaderError names what is wrong."""
    path = Path(path)
    stem = path.stem
    if not _STEM.match(stem):
        raise HeaderError(f"{path}: file stem must look like sNN_slug (slug of 1-3 lowercase words)")
    lines = _header_text(path).splitlines()
    if not lines:
        raise HeaderError(f"{path}: empty header")
    first_stem, sep, title = lines[0].partition(":")
    if first_stem.strip() != stem or not sep or not title.strip():
        raise HeaderError(f"{path}: header must open with '{stem}: <title>', found {lines[0]!r}")
    fields: dict = {}
    last = None
    for line in lines[1:]:
        m = _KEY_LINE.match(line)
        if m and m.group(1) in KEYS + OPTIONAL_KEYS:
            last = m.group(1)
            if last == "Dtype":
                fields.update(_split_inline_keys(m.group(2)))
            else:
                fields[last] = m.group(2).strip()
        elif line.strip() and last is not None and line.startswith(" "):
            fields[last] = (fields[last] + " " + line.strip()).strip()  # continuation line
        elif not line.strip():
            last = None
    missing = [k for k in KEYS if not fields.get(k)]
    if missing:
        raise HeaderError(f"{path}: header misses {', '.join(missing)}")
    precs = fields["Dtype"].split(" in")[0]
    precisions = tuple(p.strip() for p in precs.split(",") if p.strip())
    bad = [p for p in precisions if p not in PRECISIONS]
    if not precisions or bad:
        raise HeaderError(f"{path}: Dtype must start with precisions from {PRECISIONS}, got {precs!r}")
    if set(precisions) & set(SCALED) and (len(precisions) > 1 or out_precision(fields["Dtype"]) not in SCALED_OUT):
        raise HeaderError(f"{path}: a scaled precision ({', '.join(SCALED)}) stands alone in Dtype and names "
                          f"its output, one of {SCALED_OUT} ('fp8 in / fp32 acc / bf16 out'), got {fields['Dtype']!r}")
    if fields["Arch"] not in ARCHES:
        raise HeaderError(f"{path}: Arch must be one of {ARCHES}, got {fields['Arch']!r}")
    layouts = parse_layouts(fields["Layout"], path)
    return Stage(
        family=family, stem=stem, path=path, title=title.strip(),
        change=fields["Change"], why=fields["Why"], expect=fields["Expect"],
        limits=fields["Limits"], dtype=fields["Dtype"], precisions=precisions,
        arch=fields["Arch"], layout=layouts[0], pair=fields["Pair"],
        log=fields.get("Log", ""), layouts=layouts,
    )


def parse_layouts(value: str, path="Layout") -> tuple:
    """("NT", "NN", "TN") from a header's "NT, NN, TN": each from LAYOUTS, once; HeaderError if not."""
    layouts = tuple(x.strip() for x in value.split(","))
    bad = [x for x in layouts if x not in LAYOUTS]
    if bad or len(set(layouts)) != len(layouts):
        raise HeaderError(f"{path}: Layout must list distinct layouts from {LAYOUTS}, comma separated "
                          f"(the first is the primary one), got {value!r}")
    return layouts


@functools.lru_cache(maxsize=None)
def discover(cuda_dir: Path = CUDA_DIR, triton_dir: Path = TRITON_DIR) -> tuple:
    """Every stage file of both families, sorted by stem then family."""
    found = [parse_header(p, "cuda") for p in sorted(Path(cuda_dir).glob("s[0-9][0-9]_*.cu"))]
    found += [parse_header(p, "triton") for p in sorted(Path(triton_dir).glob("s[0-9][0-9]_*.py"))]
    return tuple(sorted(found, key=lambda s: (s.stem, s.family)))


def all_stages(family: str | None = None) -> list:
    return [s for s in discover() if family is None or s.family == family]


def find(family: str, name) -> Stage:
    """The stage of `family` named by "s04", "04", 4, "s04_vectorized" or "vectorized"."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES + ('cublas', 'inductor')}, got {family!r}")
    stages = all_stages(family)
    key = str(name).strip().lower()
    if isinstance(name, int) or key.isdigit():
        key = f"s{int(key):02d}"
    for s in stages:
        if key in (s.stem, s.short, s.slug):
            return s
    names = ", ".join(s.short for s in stages)
    raise ValueError(f"name: no {family} stage {name!r}; {family} stages are: {names}")


def stages(capability: tuple | None = "auto") -> pd.DataFrame:
    """The pairing table: one row per stem, both families side by side."""
    if capability == "auto":
        from . import device

        capability = device.capability()
    rows = {}
    for s in discover():
        row = rows.setdefault(s.stem, {"stage": s.stem, "title": s.title, "cuda": None, "triton": None})
        row[s.family] = str(s.path.relative_to(ROOT))
        row[f"{s.family}_precisions"] = ",".join(s.precisions)
        row[f"{s.family}_layout"] = ",".join(s.layouts)   # "NN,NT,TN": primary first
        row[f"{s.family}_arch"] = s.arch
        why_not = s.unavailable_reason(capability)
        row[f"{s.family}_available"] = why_not is None
        row[f"{s.family}_reason"] = why_not or ""
        if s.family == "cuda" or not row.get("expect"):
            row["expect"] = s.expect
    return pd.DataFrame(list(rows.values()))
