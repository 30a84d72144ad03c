"""Autotuning of CUDA stages that expose several tile configurations (s08).

The search is part of the product: the first call on a new shape class times every
configuration on the caller's operands (into a scratch output, so C is never touched), keeps the
fastest, and caches the choice per GPU, stage, precision, shape class and copy path (16-byte
or not: "unaligned" classes are searched apart) in a JSON file
(STUDY_CACHE_DIR, default <repo>/build). `study.autotune.table()` shows what was chosen.
The GPU model is in every key, so an H100's choices are never an H200's; the tests point
STUDY_CACHE_DIR at their own directory (tests/conftest.py), so a search timed while pytest-xdist
workers share the GPU is never the study's. Saves merge with what other processes wrote.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import torch

from . import device
from .operands import Problem
from .registry import STATE_ROOT

_lock = threading.Lock()
_cache: dict | None = None
_last_search: dict = {}


def cache_path() -> Path:
    return Path(os.environ.get("STUDY_CACHE_DIR", STATE_ROOT / "build")) / "autotune.json"


def shape_class(M: int, N: int, K: int) -> str:
    """Bucket each size to the next power of two: configs that win at 4000 win at 4096."""
    def up(x):
        return 1 << max(0, (x - 1).bit_length())
    return f"{up(M)}x{up(N)}x{up(K)}"


def vector_path(p, *tensors) -> bool:
    """True when the launcher takes its 16-byte copy kernel, by the launchers' own rule
    (simt::float4_ok): every pointer 16-byte aligned and the leading dimensions multiples of 16
    bytes' worth of elements; K and N tails are predicated inside that kernel. Otherwise it runs
    another kernel (4-byte copies), whose best tile differs: 4095^3 and 4096^3 share a shape
    class but not a path, so the path is part of the key."""
    vec = 16 // tensors[0].element_size()
    return (all(t.data_ptr() % 16 == 0 for t in tensors)
            and all(x % vec == 0 for x in (p.lda, p.ldb, p.ldc)))


def _key(kern, p, *tensors) -> str:
    cls = shape_class(p.M, p.N, p.K) + ("" if vector_path(p, *tensors) else " unaligned")
    return f"{device.gpu_name()}|{kern.name}|{p.precision}|{p.layout}|{cls}"


def _load() -> dict:
    global _cache
    if _cache is None:
        try:
            _cache = json.loads(cache_path().read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            _cache = {}
    return _cache


def _save():
    global _cache
    import fcntl

    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # one writer at a time; others' entries are kept
        try:
            disk = json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            disk = {}
        _cache = {**disk, **(_cache or {})}
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(_cache, indent=1, sort_keys=True))
        tmp.replace(path)


def time_config(kern, p, a, b, c, config: int, reps: int = 9) -> float:
    """Median milliseconds of one configuration (events, after one warm-up launch). A GPU
    spin before each launch keeps the host's launch overhead out of small problems' times."""
    args = kern._args(p, a, b, c, 1.0, 0.0)
    launch = getattr(kern.module, f"launch_{p.precision}")
    stream = torch.cuda.current_stream(a.device)
    launch(*args, stream.cuda_stream, config)
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(200_000)
        start.record(stream)
        launch(*args, stream.cuda_stream, config)
        end.record(stream)
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def _context_error() -> str | None:
    """The error a synchronise raises once a kernel has killed the CUDA context (sticky), or None."""
    try:
        torch.cuda.synchronize()
    except RuntimeError as exc:
        return str(exc).splitlines()[0][:200]
    return None


def choose(kern, p, a, b, c) -> int:
    """The cached best configuration for this problem's shape class and copy path (16-byte or
    not), searching if needed."""
    key = _key(kern, p, a, b, c)
    with _lock:
        cache = _load()
        names = kern.configs()
        hit = cache.get(key)
        # A cached index is trusted only while it still names the same configuration (a stage
        # whose menu was edited is searched again).
        if hit and 0 <= hit["config"] < len(names) and names[hit["config"]] == hit["name"]:
            return hit["config"]
        scratch = torch.empty((p.M, p.N), dtype=a.dtype, device=a.device)
        q = Problem(p.M, p.N, p.K, p.lda, p.ldb, p.N, p.precision, p.layout)
        times, failed = {}, False
        for i, name in enumerate(names):
            try:
                times[i] = time_config(kern, q, a, b, scratch, i)
            except RuntimeError:  # a configuration that cannot launch here is simply not chosen
                failed = True
        if failed and (dead := _context_error()):   # a fault, not a refusal: the search proves nothing
            raise RuntimeError(f"{kern.name}: the CUDA context died during the configuration search at "
                               f"{p.M}x{p.N}x{p.K} ({dead}); nothing was saved")
        if not times:
            raise RuntimeError(f"{kern.name}: no configuration could run {p.M}x{p.N}x{p.K}")
        best = min(times, key=times.get)
        cache[key] = {"config": best, "name": names[best], "ms": times[best],
                      "searched": {names[i]: t for i, t in times.items()}}
        _last_search[key] = cache[key]
        _save()
        return best


def table():
    """The cached choices as a DataFrame (gpu, stage, precision, layout, shape class, config)."""
    import pandas as pd

    rows = []
    for key, val in _load().items():
        gpu, stage, prec, layout, shape = key.split("|")
        rows.append({"gpu": gpu, "stage": stage, "precision": prec, "layout": layout,
                     "shape_class": shape, "config": val["name"], "ms": val["ms"]})
    return pd.DataFrame(rows)
