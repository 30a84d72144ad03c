"""What the sweep measures: shapes, entries (one kernel of a precision group) and the plan.

The plan comes from the registry only: a stage joins a precision group when its header's Dtype
names that precision, and is timed in its primary layout (the first its header's Layout lists) and,
at LAYOUT_SHAPES, in the others; cuBLAS of the group is timed in every layout the group's stages
use (and NN). Filters (families, stages, precisions, shapes) are
validated here, before anything runs: a name that matches nothing is a ValueError.
"""
from __future__ import annotations

from dataclasses import dataclass

from .registry import FAMILIES, PRECISIONS, SCALED, all_stages, find

SQUARES = (256, 512, 1000, 1024, 2048, 4095, 4096, 8192)      # 1000 and 4095: ragged sizes
TOKENS = (16, 128, 2048)                                       # M of a transformer layer
DECODE_TOKENS = (1, 4, 16, 64, 128, 256, 1024, 2048)          # M of the decode sweep
DECODE_PRECISIONS = ("fp16", "bf16", "fp8")   # where the decode sweep runs (LLM inference dtypes)
DECODE_LAYOUT = "NT"                          # x @ W.T: the kernels that take nn.Linear's layout
WEIGHTS = ((4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096))  # (N, K) of nn.Linear
QUICK_SQUARES = (1024, 4096)                  # --quick: the headline size, a mid size and
QUICK_LAYERS = ((16, 4096, 4096),)            # one decode-like layer (CUDA-graph timed)
# --quick leaves out bf16: it runs the same stages as fp16 (s10-s13), so every stage still shows.
QUICK_PRECISIONS = ("fp32", "tf32", "fp16")
BASELINE_FAMILIES = ("cublas", "inductor")      # kernels named by precision, timed beside the stages
PLAN_FAMILIES = FAMILIES + BASELINE_FAMILIES
# fp8 (SCALED): every kernel in both scalings (scales per tensor, or per row of A / column of B),
# cuBLAS with fast accumulation off (the baseline) and on; the stages' fast-accumulation
# configurations (kind FAST_ACCUM) at the K sweep (error vs K) and the ladder sizes only.
FP8_SCALINGS = ("tensor", "row")
FAST_ACCUM = "fast_accum"                      # Entry.kind of an fp8 kernel run without promotion
FAST_ACCUM_NOTE = "fast accumulation: one FP8 accumulate chain over all of K (no promotion into fp32)"
FP8_K_SWEEP = (256, 512, 1024, 2048, 4096, 8192, 16384)   # K at M = N = FP8_K_SWEEP_MN, set "ksweep"
FP8_K_SWEEP_MN = 1024
FP8_FAST_SQUARES = (4096, 8192)                # the ladder sizes (tables.TABLE_SIZES)
# Inductor's autotuned Triton GEMM (max-autotune, Triton templates): a second baseline, NT. Its
# autotune costs ~10 s per shape on an H100 (cached on disk after), so it is timed only here:
INDUCTOR_PRECISIONS = ("fp16", "bf16", "fp8")
INDUCTOR_SQUARES = (4096, 8192)
INDUCTOR_TOKENS = (1, 16, 128)                 # decode-like M against each of WEIGHTS
INDUCTOR_SHAPES = tuple([(n, n, n) for n in INDUCTOR_SQUARES] + [(m, n, k) for m in INDUCTOR_TOKENS
                                                                for n, k in WEIGHTS])
INDUCTOR_FP8_SHAPES = tuple((n, n, n) for n in INDUCTOR_SQUARES)
FINDING_NN = "header layout NT, measured with a row-major B (NN)"
# A stage's other layouts (its header's Layout after the first): Entry.kind LAYOUT, timed beside
# cuBLAS in the same layout at LAYOUT_SHAPES only (cuBLAS in a layout no stage has as its primary
# one likewise, noted LAYOUT_NOTE), so the layout dimension costs a few kernel-shapes per stage.
LAYOUT = "layout"
LAYOUT_NOTE = "another layout of the stages, timed at the layout shapes"
LAYOUT_SHAPES = ((4096, 4096, 4096),)
PROFILE_SIZE = 4096                           # Nsight Compute profiles each kernel at this n^3
RAGGED_MULTIPLE = 128                         # a size that is not a multiple of this is ragged


def is_ragged(n: int) -> bool:
    """A ragged size leaves partial tiles (4095, 1000): the reports draw and compare it apart."""
    return int(n) % RAGGED_MULTIPLE != 0


@dataclass(frozen=True, order=True)
class Shape:
    M: int
    N: int
    K: int
    set: str = "square"   # "square" or "layer" (transformer layer: M tokens x (N, K) weight)

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    @property
    def name(self) -> str:
        if self.M == self.N == self.K:
            return f"{self.M}^3"
        return f"{self.M}x{self.N}x{self.K}"


def _ordered(shapes) -> list:
    return sorted(set(shapes), key=lambda s: (s.flops, s))


def default_shapes(quick: bool = False) -> list:
    if quick:
        return _ordered([Shape(n, n, n) for n in QUICK_SQUARES] + [Shape(*s, "layer") for s in QUICK_LAYERS])
    return _ordered([Shape(n, n, n) for n in SQUARES]
                    + [Shape(m, n, k, "layer") for m in DECODE_TOKENS for n, k in WEIGHTS])


def is_decode_only(shape: Shape) -> bool:
    """A layer shape of the decode sweep that the other precisions' layer set does not have."""
    return shape.set == "layer" and shape.M not in TOKENS


def group_shapes(precision: str, entries: list, shapes: list, explicit: bool = False) -> dict:
    """{entry label: [shapes]} for one precision group. By default (explicit False) the decode
    sweep's extra token counts run only in DECODE_PRECISIONS and only for the kernels that take
    nn.Linear's layout (NT) and the baselines in it: x @ W.T is that layout, and the NN stages
    would read a transposed copy of the weight no model keeps. explicit (the user named a shape of
    its own, names_single_shapes): every kernel runs every shape."""
    out = {}
    for e in entries:
        keep = explicit or (precision in DECODE_PRECISIONS and e.layout == DECODE_LAYOUT)
        out[e.label] = [s for s in shapes if (keep or not is_decode_only(s)) and runs_at(e, s)]
    return out


SHAPE_SETS = ("squares", "layers", "decode")


def names_single_shapes(specs) -> bool:
    """True if the --shapes specs name a shape of their own ("4096", "MxNxK"), not only sets: then
    every kernel runs every shape (group_shapes' explicit); a run naming sets keeps a full run's
    rules, so its rows are a subset of a full run's."""
    return any(x.strip().lower() not in SHAPE_SETS for s in specs for x in str(s).split(",") if x.strip())


def parse_shapes(specs) -> list:
    """"squares", "layers", "decode", "4096" (a square) or "MxNxK"; comma or space separated. ValueError
    naming the first spec that is none of these (sizes are integers >= 1)."""
    out = []
    for spec in (x for s in specs for x in str(s).split(",") if x.strip()):
        spec = spec.strip().lower()
        if spec == "squares":
            out += [Shape(n, n, n) for n in SQUARES]
        elif spec == "layers":
            out += [Shape(m, n, k, "layer") for m in TOKENS for n, k in WEIGHTS]
        elif spec == "decode":
            out += [Shape(m, n, k, "layer") for m in DECODE_TOKENS for n, k in WEIGHTS]
        else:
            try:
                dims = [int(x) for x in spec.split("x")]
            except ValueError:
                dims = []
            if len(dims) == 1:
                dims *= 3
            if len(dims) != 3 or min(dims) < 1:
                raise ValueError(f"{spec!r} is not a shape: squares, layers, decode, N or MxNxK (sizes >= 1)")
            m, n, k = dims
            layer = any((n, k) == w for w in WEIGHTS) and m in DECODE_TOKENS
            out.append(Shape(m, n, k, "layer" if layer else "square"))
    if not out:
        raise ValueError(f"no shape given in {list(specs)!r}")
    return _ordered(out)


def stage_stems(names) -> list:
    """The stems named by `names` (s04, 4, vectorized, s04_vectorized) in either family;
    ValueError naming the first that matches no stage."""
    stems = []
    for name in names:
        found = set()
        for fam in FAMILIES:
            try:
                found.add(find(fam, name).stem)
            except ValueError:
                pass
        if not found:
            known = ", ".join(sorted({s.short for s in all_stages()}))
            raise ValueError(f"{name!r} names no stage; stages are: {known}")
        stems += sorted(found)
    return sorted(set(stems))


@dataclass(frozen=True)
class Entry:
    """One kernel of a precision group as the study times it."""

    family: str       # "cuda", "triton", "cublas", "inductor" or "user"
    stage: str        # stem, "cublas", "inductor", or the user's name
    precision: str
    layout: str
    kind: str = "stage"   # "stage", "baseline", "finding" or FAST_ACCUM (fp8 without promotion)
    note: str = ""
    scaling: str = ""     # fp8: "tensor" or "row" (FP8_SCALINGS); "" for the other precisions

    @property
    def label(self) -> str:
        tail = (f":{self.scaling}" if self.scaling else "") + (f":{self.kind}" if self.kind == FAST_ACCUM else "")
        return f"{self.family}:{self.stage}:{self.precision}:{self.layout}{tail}"


def runs_at(entry: Entry, shape: Shape) -> bool:
    """Whether the sweep times `entry` at `shape`: Inductor only at INDUCTOR_SHAPES (fp8:
    INDUCTOR_FP8_SHAPES), an fp8 stage's fast-accumulation variant only at the K sweep and the
    FP8_FAST_SQUARES; every other kernel at every shape of its group."""
    mnk = (shape.M, shape.N, shape.K)
    if entry.family == "inductor":
        return mnk in (INDUCTOR_FP8_SHAPES if entry.precision in SCALED else INDUCTOR_SHAPES)
    if entry.kind == FAST_ACCUM and entry.family in FAMILIES:
        return shape.set == "ksweep" or mnk in {(n, n, n) for n in FP8_FAST_SQUARES}
    if entry.kind == LAYOUT or entry.note == LAYOUT_NOTE:
        return mnk in LAYOUT_SHAPES
    return True


def with_k_sweep(precision: str, shapes: list, defaults: bool) -> list:
    """The shapes of one precision group: `shapes`, plus (fp8, default shapes only) the K sweep at
    M = N = FP8_K_SWEEP_MN (error vs K), leaving out sizes already in `shapes`."""
    if precision not in SCALED or not defaults:
        return list(shapes)
    have = {(s.M, s.N, s.K) for s in shapes}
    n = FP8_K_SWEEP_MN
    return _ordered(list(shapes) + [Shape(n, n, k, "ksweep") for k in FP8_K_SWEEP if (n, n, k) not in have])


def _scaled_entries(s, p: str) -> list:
    """An fp8 stage in both scalings, promoted (its default) and with fast accumulation."""
    return ([Entry(s.family, s.stem, p, s.layout, scaling=sc) for sc in FP8_SCALINGS]
            + [Entry(s.family, s.stem, p, s.layout, FAST_ACCUM, FAST_ACCUM_NOTE, sc) for sc in FP8_SCALINGS])


def _baselines(family: str, p: str, layouts) -> list:
    """cuBLAS (or Inductor) of a precision group in each layout; fp8: NT in both scalings, and
    cuBLAS with fast accumulation too."""
    if p not in SCALED:
        return [Entry(family, family, p, lay, "baseline") for lay in layouts]
    out = [Entry(family, family, p, "NT", "baseline", scaling=sc) for sc in FP8_SCALINGS]
    if family == "cublas":
        out += [Entry(family, family, p, "NT", FAST_ACCUM, FAST_ACCUM_NOTE, sc) for sc in FP8_SCALINGS]
    return out


def plan(precisions=PRECISIONS, families=None, stages=None) -> dict:
    """{precision: [Entry]} from the stage headers, filtered by family and stage names (a
    stage named by stem, short name or slug); ValueError for an unknown precision or family."""
    bad = [p for p in precisions if p not in PRECISIONS] + [f for f in families or () if f not in PLAN_FAMILIES]
    if bad:
        raise ValueError(f"{bad[0]!r} is neither a precision {PRECISIONS} nor a family {PLAN_FAMILIES}")
    out = {}
    for p in precisions:
        entries = []
        for s in all_stages():
            if p not in s.precisions or (families and s.family not in families):
                continue
            if stages and not {s.stem, s.short, s.slug} & set(stages):
                continue
            if p in SCALED:
                entries += _scaled_entries(s, p)
                continue
            entries.append(Entry(s.family, s.stem, p, s.layout))
            entries += [Entry(s.family, s.stem, p, lay, LAYOUT) for lay in s.layouts[1:]]
            if s.family == "triton" and p == "tf32" and s.layout == "NT":
                entries.append(Entry(s.family, s.stem, p, "NN", "finding", FINDING_NN))
        picked = bool(entries)
        if not families or "cublas" in families:
            layouts = sorted({"NN"} | {e.layout for e in entries if e.kind != LAYOUT})
            extra = sorted({e.layout for e in entries if e.kind == LAYOUT} - set(layouts))
            entries = (_baselines("cublas", p, layouts) + [Entry("cublas", "cublas", p, lay, "baseline", LAYOUT_NOTE)
                                                           for lay in extra] + entries)
        if p in INDUCTOR_PRECISIONS and (not families or "inductor" in families) and (picked or not stages):
            entries = entries + _baselines("inductor", p, ["NT"])
        if entries:
            out[p] = entries
    return out


def select(quick=False, families=(), stages=(), precisions=(), shapes=()) -> tuple:
    """(plan, shapes) of a sweep with these filters (empty: everything; quick: the quick
    defaults); ValueError naming a filter that matches nothing, before anything runs."""
    try:
        shape_list = parse_shapes(shapes) if shapes else default_shapes(quick)
    except ValueError as exc:
        raise ValueError(f"shapes: {exc}") from None
    try:
        stems = stage_stems(stages) if stages else None
    except ValueError as exc:
        raise ValueError(f"stages: {exc}") from None
    groups = plan(precisions or (QUICK_PRECISIONS if quick else PRECISIONS), families or None, stems)
    picked = [e for es in groups.values() for e in es if e.family not in BASELINE_FAMILIES]
    if (stems or (families and not set(BASELINE_FAMILIES) & set(families))) and not picked:
        given = " ".join(f"{k} {' '.join(map(str, v))}" for k, v in (("families", families), ("stages", stages),
                                                                    ("precisions", precisions)) if v)
        raise ValueError(f"nothing to measure: no stage matches {given}")
    if not groups:
        raise ValueError("nothing to measure: the filters select no kernel")
    return groups, shape_list
