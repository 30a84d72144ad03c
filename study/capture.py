"""What a sweep child reports besides its rows: the Triton kernels it compiled.

Triton compiles in the process that calls a kernel, so the registers, shared memory, spills and
SASS of the Triton stages (resources.triton_stage), and the configurations @triton.autotune
chose, exist only in the child that timed them: it sends them to the parent as JSON rows.
"""
from __future__ import annotations

import json
import sys

from .measure import short_error


def triton_resources(entries, precision: str) -> list:
    """Resources of the Triton kernels this child compiled (they live only in this process)."""
    from . import resources
    from .registry import find

    rows = []
    for stem in sorted({e.stage for e in entries if e.family == "triton"}):
        module = sys.modules.get(f"study_triton_{stem}")
        if module is not None:
            try:
                rows += resources.triton_stage(find("triton", stem), module, precision)
            except Exception as exc:  # resources are a report column, never a reason to stop
                rows.append({"family": "triton", "stage": stem, "error": short_error(exc)})
    return json.loads(json.dumps(rows, default=str))


def triton_autotune(entries, precision: str) -> list:
    """The configurations @triton.autotune chose in this child, per stage and tuning key."""
    rows = []
    for stem in sorted({e.stage for e in entries if e.family == "triton"}):
        module = sys.modules.get(f"study_triton_{stem}")
        for obj in vars(module).values() if module else ():
            for key, cfg in getattr(obj, "cache", {}).items() if hasattr(obj, "configs") else ():
                rows.append({"family": "triton", "stage": stem, "precision": precision,
                             "shape_class": "x".join(str(k) for k in key[:3]), "config": str(cfg)})
    return rows
