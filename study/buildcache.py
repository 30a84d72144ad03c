"""The build cache's safety: what a module's name must hash, whose directory it is, one
builder per module, and a `.so` that exists only when it is complete.

- **Key.** `toolchain()` lists what changes the compiled code besides the sources and flags:
  torch and its CUDA version, `nvcc --version`, the host compiler's `--version` (torch's CXX),
  and the environment variables nvcc and torch's builder read (KEY_ENV). A `-G` build made
  through NVCC_APPEND_FLAGS gets its own name, never the release one.
- **Directory.** `unsafe_dir()` refuses a build directory owned by another user or writable by
  group or others (anyone who can write there chooses the code we import); `make_dir()`
  creates ours 0700.
- **Lock.** `module_lock()` holds an OS file lock (flock on `<name>.lock`) for a module's
  whole build; the kernel releases it when the holder dies, so no pid files and no guessing
  whether a lock is stale. Lock files are never deleted (a deleted lock file lets two builders
  hold locks on different inodes).
- **Atomic .so.** `build_once()` builds into `<module>/partial` and `os.replace`s the `.so`
  into place when complete; a killed compile or link leaves only `partial`, which the next
  holder of the lock wipes (torch's own `lock` inside it included: provably stale then).
"""
from __future__ import annotations

import fcntl
import os
import shutil
import stat
import subprocess
from contextlib import contextmanager
from pathlib import Path

# Environment variables that change what nvcc / torch's builder compile.
KEY_ENV = ("NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "CXXFLAGS", "TORCH_CUDA_ARCH_LIST")
_versions: dict = {}    # command -> its `--version` output, once per process


def tool_version(cmd: str) -> str:
    """`cmd --version` (stdout + stderr), cached per process; a missing tool is a version too."""
    if cmd not in _versions:
        try:
            proc = subprocess.run([cmd, "--version"], capture_output=True, text=True, timeout=120)
            _versions[cmd] = proc.stdout + proc.stderr
        except (OSError, subprocess.SubprocessError) as exc:
            _versions[cmd] = f"{cmd}: unavailable ({type(exc).__name__})"
    return _versions[cmd]


def toolchain() -> list:
    """Everything besides sources and flags that the module name must hash (strings)."""
    import torch
    from torch.utils import cpp_extension as ext

    nvcc = str(Path(ext.CUDA_HOME) / "bin" / "nvcc") if ext.CUDA_HOME else "nvcc"
    return [f"torch {torch.__version__}", f"torch cuda {torch.version.cuda}",
            tool_version(nvcc), tool_version(ext.get_cxx_compiler()),
            *(f"{k}={os.environ[k]}" for k in KEY_ENV if k in os.environ)]


def unsafe_dir(path: Path) -> str | None:
    """Why `path` must not hold builds we import (another user's, or group/world-writable),
    or None (also when it does not exist yet)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != os.getuid():
        return f"it is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (f"it is writable by {'group' if st.st_mode & stat.S_IWGRP else 'others'} "
                f"(mode {stat.S_IMODE(st.st_mode):o}); chmod go-w it or choose another")
    return None


def make_dir(path: Path) -> None:
    """Create a directory of the cache 0700 (parents as the umask says)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            return
        os.chmod(path, 0o700)


@contextmanager
def module_lock(root: Path, name: str):
    """Hold the exclusive OS lock of module `name` (blocks while another process builds it)."""
    fd = os.open(root / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)    # releases the lock; so does the holder's death


def build_once(directory: Path, name: str, compile_into, load):
    """Under the module's lock: `load(so)` if `<directory>/<name>.so` exists (complete by
    construction), else `compile_into(partial)` (which must leave `<name>.so` in `partial` and
    return the loaded module), then move the `.so` into place. The caller checked the root."""
    make_dir(directory.parent)
    make_dir(directory)
    with module_lock(directory.parent, name):
        final = directory / f"{name}.so"
        if final.exists():
            return load(final)
        aside = directory / "partial"
        clear_aside(aside)
        aside.mkdir(mode=0o700)
        module = compile_into(aside)
        os.replace(aside / f"{name}.so", final)
        shutil.rmtree(aside, ignore_errors=True)
        return module


def clear_aside(aside: Path) -> None:
    """Remove a killed build's leftovers, torch's stale `lock` first (call only under the lock:
    then no live builder can be using it)."""
    (aside / "lock").unlink(missing_ok=True)
    shutil.rmtree(aside, ignore_errors=True)
