"""Compiling CUDA stages: one load_inline module per stage, and cubins for the static checks.

Each stage becomes its own extension module, `study_<stem>_<hash of sources, flags,
toolchain>`, from the stage's pure-CUDA `.cu` and the binding binding.py generates from its
header; modules are cached under the build directory (STUDY_BUILD_DIR, default
<repo>/build/cuda; refused if another user's or group/world-writable) and built in parallel
worker processes (`python -m study.worker build`), one builder per module under an OS lock,
the `.so` moved into place only when complete (buildcache.py).
Without a CUDA build of torch and a CUDA toolkit, building raises ToolkitError once, saying
which is missing. The second half compiles a stage ahead of time to a cubin (no GPU needed)
and reads its resources (ptxas -v) and SASS (cuobjdump).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import buildcache, device
from .binding import binding_source
from .registry import CUDA_DIR, PACKAGE_PARENT, ROOT, STATE_ROOT, Stage, all_stages, find

NVCC_FLAGS = ["-O3", "-std=c++17", "-lineinfo", "--expt-relaxed-constexpr"]
CXX_FLAGS = ["-O2", "-std=c++17"]
# torch's cpp_extension adds these to every nvcc call; the CPU checks use the same set.
TORCH_NVCC_DEFINES = [
    "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
]
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def build_dir() -> Path:
    return Path(os.environ.get("STUDY_BUILD_DIR", STATE_ROOT / "build" / "cuda")).resolve()


def checked_build_dir(create: bool = False) -> Path:
    """build_dir(), refused (BuildDirError) if another user owns it or group/others can write
    it: we import the code it holds. With create, made 0700 if missing."""
    root = build_dir()
    why = buildcache.unsafe_dir(root)
    if why:
        raise BuildDirError(f"refusing the CUDA build directory {root} (STUDY_BUILD_DIR, default "
                            f"<state root>/build/cuda): {why}")
    if create:
        buildcache.make_dir(root)
    return root


def included_sources(path: Path, seen: set | None = None) -> list:
    """The stage file and every project header it includes, transitively (for the hash)."""
    seen = set() if seen is None else seen
    path = Path(path).resolve()
    if path in seen:
        return []
    seen.add(path)
    out = [path]
    for name in _INCLUDE.findall(path.read_text()):
        for base in (path.parent, CUDA_DIR):
            cand = base / name
            if cand.exists():
                out += included_sources(cand, seen)
                break
    return out


@dataclass
class BuildSpec:
    stage: Stage
    name: str           # module name, carries the hash
    directory: Path
    cpp: str
    cuda: str
    cuda_flags: list


def spec(stage: Stage) -> BuildSpec:
    cpp = binding_source(stage)
    cuda = stage.path.read_text()
    flags = NVCC_FLAGS + [device.arch_flag(stage.arch)]
    h = hashlib.sha1()
    for part in [cpp, *(p.read_text() for p in included_sources(stage.path)), *flags, *CXX_FLAGS,
                 sys.version, *buildcache.toolchain()]:
        h.update(part.encode() + b"\0")
    name = f"study_{stage.stem}_{h.hexdigest()[:12]}"
    return BuildSpec(stage, name, build_dir() / name, cpp, cuda, flags)


def _so_path(s: BuildSpec) -> Path | None:
    """The module's finished `.so` (only ever moved into place complete), or None."""
    so = s.directory / f"{s.name}.so"
    return so if so.exists() else None


def _load_inline(s: BuildSpec, verbose: bool = False):
    """Build the module (under its lock, aside, then moved into place) or load it if another
    process finished it meanwhile."""
    from torch.utils.cpp_extension import load_inline

    def compile_into(aside: Path):
        module = load_inline(
            name=s.name, cpp_sources=[s.cpp], cuda_sources=[s.cuda], functions=None,
            extra_cflags=CXX_FLAGS, extra_cuda_cflags=s.cuda_flags,
            extra_include_paths=[str(CUDA_DIR)], build_directory=str(aside),
            with_cuda=True, no_implicit_headers=True, verbose=verbose,
        )
        sys.modules[s.name] = module
        return module
    checked_build_dir(create=True)
    return buildcache.build_once(s.directory, s.name, compile_into, lambda so: _import_so(s, so))


def _import_so(s: BuildSpec, so: Path):
    if s.name in sys.modules:
        return sys.modules[s.name]
    mod_spec = importlib.util.spec_from_file_location(s.name, so)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    sys.modules[s.name] = module
    return module


class BuildError(RuntimeError):
    """A stage failed to compile; the message carries the compiler output."""


@dataclass
class BuildResult:
    stem: str
    module_name: str
    seconds: float
    cached: bool
    ok: bool
    error: str = ""


_modules: dict = {}     # stem -> loaded module
_failures: dict = {}    # stem -> compiler output of its failed build


def toolkit_missing() -> str | None:
    """Why CUDA stages cannot be compiled here, or None: torch must be a CUDA build, and the
    CUDA toolkit's nvcc must be where torch looks (CUDA_HOME, else nvcc on PATH)."""
    import torch

    if not torch.version.cuda:
        return (f"torch {torch.__version__} is a CPU-only build (torch.version.cuda is None), which "
                "cannot compile CUDA extensions; install a CUDA build of torch")
    from torch.utils.cpp_extension import CUDA_HOME

    if not CUDA_HOME or not (Path(CUDA_HOME) / "bin" / "nvcc").exists():
        return ("no CUDA toolkit found: nvcc is not on PATH and CUDA_HOME is not set "
                "(set CUDA_HOME to the toolkit's root, e.g. /usr/local/cuda)")
    return None


class ToolkitError(BuildError):
    """Nothing can be compiled here: the message says what is missing."""


class BuildDirError(ToolkitError):
    """The build directory is not safe to import code from: the message says why."""


def _build_in_subprocess(s: BuildSpec) -> tuple:
    """Build one module in a fresh process (parallel builds); returns (ok, output)."""
    cmd = [sys.executable, "-m", "study.worker", "build", str(s.stage.path)]
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_PARENT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    return proc.returncode == 0, (proc.stdout + proc.stderr)[-20000:]


def build(stems=None, jobs: int | None = None, quiet: bool = False) -> list:
    """Build (or load from cache) the named CUDA stages (names or Stage objects; all of
    cuda_src/ by default) in parallel. Returns a BuildResult per stage; a stage's failure is
    recorded, never raised here. ToolkitError if anything needs compiling and nothing can be."""
    stages = ([st if isinstance(st, Stage) else find("cuda", st) for st in stems] if stems
              else all_stages("cuda"))
    checked_build_dir()  # before anything is imported from it
    specs = [spec(st) for st in stages]
    todo = [s for s in specs if s.name not in _modules and _so_path(s) is None]
    why = toolkit_missing() if todo else None
    if why:  # once, before any worker starts (each would fail with the same traceback)
        raise ToolkitError(f"cannot compile the CUDA stages here: {why}")
    jobs = jobs or max(1, min(len(todo), os.cpu_count() or 1))
    t0 = time.perf_counter()
    timings = {}

    def one(s):
        t = time.perf_counter()
        ok, out = _build_in_subprocess(s)
        timings[s.name] = time.perf_counter() - t
        if not ok:
            _failures[s.stage.stem] = out
    if todo:
        if not quiet:
            print(f"[study] building {len(todo)} CUDA stage(s) in {min(jobs, len(todo))} processes ...",
                  file=sys.stderr, flush=True)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(one, todo))
    results = []
    for s in specs:
        stem = s.stage.stem
        t = time.perf_counter()
        if stem in _failures and s.name not in _modules:
            res = BuildResult(stem, s.name, timings.get(s.name, 0.0), False, False, _failures[stem])
        else:
            so = _so_path(s)
            try:
                _modules[stem] = _import_so(s, so) if so else _load_inline(s)
                res = BuildResult(stem, s.name, timings.get(s.name, time.perf_counter() - t),
                                  s.name not in timings, True)
            except Exception as exc:  # a broken stage leaves the others usable
                _failures[stem] = str(exc)
                res = BuildResult(stem, s.name, time.perf_counter() - t, False, False, str(exc))
        results.append(res)
    if not quiet and stages:
        wall = time.perf_counter() - t0
        bad = [r.stem for r in results if not r.ok]
        print(f"[study] CUDA stages ready in {wall:.1f} s ({len(todo)} compiled, "
              f"{len(specs) - len(todo)} cached){'; FAILED: ' + ', '.join(bad) if bad else ''}",
              file=sys.stderr, flush=True)
    return results


def build_all(jobs: int | None = None):
    """`study.build_all()`: compile every CUDA stage in parallel (cached); a DataFrame of build
    results (stem, seconds, cached, ok, error). ToolkitError if nothing can be compiled here."""
    import pandas as pd

    return pd.DataFrame([r.__dict__ for r in build(jobs=jobs)])


def module(stage: Stage):
    """The compiled module of a CUDA stage, building it if needed; BuildError if it fails."""
    if stage.stem not in _modules:
        build([stage], quiet=True)
    if stage.stem not in _modules:
        raise BuildError(f"CUDA stage {stage.stem} failed to build:\n{_failures.get(stage.stem, '')}")
    return _modules[stage.stem]


# --------------------------------------------------------------------------------------------
# Ahead-of-time compile for the static checks (works without a GPU): cubin, resources, SASS.

@dataclass
class KernelResources:
    function: str
    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int


_PTXAS_FUNC = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def cuobjdump() -> str:
    """Path of cuobjdump: the CUDA toolkit's, else the copy the Triton wheel carries."""
    import shutil

    found = shutil.which("cuobjdump")
    if found:
        return found
    import triton

    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if path.exists():
        return str(path)
    raise FileNotFoundError("cuobjdump: not on PATH and not in the triton wheel")


def compile_cubin(stage: Stage, out_dir: Path, arch_flag: str = "-gencode=arch=compute_90a,code=sm_90a"):
    """nvcc the stage's .cu into a cubin with the build's flags; returns (cubin, resources, log)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cubin = out_dir / f"{stage.stem}.cubin"
    cmd = ["nvcc", "-cubin", *NVCC_FLAGS, *TORCH_NVCC_DEFINES, arch_flag, f"-I{CUDA_DIR}",
           "-Xptxas=-v", "-o", str(cubin), str(stage.path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise BuildError(f"nvcc failed for {stage.stem}:\n{log}")
    return cubin, parse_ptxas(log), log


def parse_ptxas(log: str) -> list:
    """Per-kernel resources from `ptxas -v` output."""
    out, func, stack = [], None, (0, 0, 0)
    for line in log.splitlines():
        if m := _PTXAS_FUNC.search(line):
            func = m.group(1)
        elif (m := _PTXAS_STACK.search(line)) and func:
            stack = tuple(int(x) for x in m.groups())
        elif (m := _PTXAS_USED.search(line)) and func:
            out.append(KernelResources(func, int(m.group(1)), int(m.group(2) or 0), *stack))
            func = None
    return out


def sass(cubin: Path) -> str:
    proc = subprocess.run([cuobjdump(), "-sass", str(cubin)], capture_output=True, text=True, check=True)
    return proc.stdout


def build_one(path) -> int:
    """`python -m study.worker build PATH.cu`: the worker of the parallel build (one module)."""
    from .registry import parse_header

    s = spec(parse_header(Path(path), "cuda"))
    if _so_path(s) is None:
        _load_inline(s, verbose=True)
    return 0
