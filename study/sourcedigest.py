"""Which code a stage's numbers came from: a digest per stage, recorded in builds.csv ("source"),
so that two runs (the two GPUs' pages, or two dates) compare a stage only where it ran the same
code. The environment's sources_sha1 covers the whole tree: any change anywhere changes it.

    source_files(stage)   the files that decide what a stage runs
    stage_digest(stage)   sha1 (12 hex digits) of their names and bytes
    changed(a, b)         (family, stage) pairs whose digests differ between two runs' builds, or
                          None when either run's builds.csv predates the column
    blank_mixed(prev, new, out, res)  a filtered run's merged builds, blank where a stage's rows
                          now come from both runs and its code differed between them
"""
from __future__ import annotations

import re
from pathlib import Path

from .journal import files_digest
from .registry import PACKAGE_PARENT, all_stages

_STUDY_IMPORT = re.compile(r"^\s*(?:from\s+(?:study)?\.(\w+)\s+import|import\s+study\.(\w+))", re.M)


def _study_modules(path: Path, seen: set) -> list:
    """The study modules `path` imports (`from study.x import`, `from .x import`), transitively."""
    out = []
    for a, b in _STUDY_IMPORT.findall(path.read_text()):
        mod = PACKAGE_PARENT / "study" / f"{a or b}.py"
        if mod.is_file() and mod not in seen:
            seen.add(mod)
            out += [mod] + _study_modules(mod, seen)
    return out


def source_files(stage) -> list:
    """A CUDA stage: its file, the project headers it includes (the build's own list) and the
    modules that write its binding and choose its nvcc flags (binding.py, build.py). A Triton
    stage: its file, the study modules it imports (its launch path and helpers, transitively) and
    every other stage file of its family it names (Triton s14 runs s13's kernel at some shapes)."""
    if stage.family == "cuda":
        from .build import included_sources
        return included_sources(stage.path) + [PACKAGE_PARENT / "study" / f for f in ("binding.py", "build.py")]
    text = stage.path.read_text()
    others = [s.path for s in all_stages() if s.family == stage.family and s.stem != stage.stem and s.stem in text]
    return [stage.path] + _study_modules(stage.path, {stage.path}) + others


def stage_digest(stage) -> str:
    return files_digest(source_files(stage))[:12]


def _digests(data) -> dict | None:
    """{(family, stage): digest, or None for a row without one (merged from an older run)}; None
    when the run has no digest at all."""
    b = data.builds
    if not len(b) or "source" not in b or not (b["source"].notna() & (b["source"] != "")).any():
        return None
    b = b.drop_duplicates(["family", "stage"])
    return {(f, st): (d if isinstance(d, str) and d else None) for f, st, d in zip(b["family"], b["stage"], b["source"])}


def changed(a, b) -> list | None:
    """(family, stage) recorded by both runs whose digests differ, or are missing from either
    (a filtered run merged with an older one), sorted; None when either run has no digests at all
    (then which stages changed between them is not known)."""
    da, db = _digests(a), _digests(b)
    if da is None or db is None:
        return None
    return sorted(k for k in set(da) & set(db) if da[k] is None or da[k] != db[k])


def blank_mixed(prev, new, out, res):
    """The builds to record when a filtered run is merged over recorded tables: `out`, the merge
    of its builds (`new`) over the recorded ones (`prev`), with one change. `res` is the merged
    results with a boolean "new" column. A stage new built that still has recorded rows from the
    older run (the filter took only some of its precisions or shapes) ran two versions of its code
    if the digests differ: its digest is then blank ("mixed"), so changed() leaves it out of every
    comparison instead of vouching for rows its digest does not describe."""
    if out is None or out.empty or "source" not in out or new is None or new.empty:
        return out
    was = dict(zip(zip(prev["family"], prev["stage"]), prev["source"])) if prev is not None and \
        not prev.empty and "source" in prev else {}
    old = res[~res["new"].astype(bool)]
    kept = set(zip(old["family"], old["stage"]))
    built = set(zip(new["family"], new["stage"]))
    out = out.copy()
    for i, (f, st, d) in enumerate(zip(out["family"], out["stage"], out["source"])):
        if (f, st) in built and (f, st) in kept and was.get((f, st)) != d:
            out.iloc[i, out.columns.get_loc("source")] = ""
    return out
