"""The build cache without a GPU or a compiler: torch's load_inline is replaced by a fake that
behaves like it (torch's `lock` baton in the build directory, a `<name>.so` written there), in
this process or in builder subprocesses that get killed midway."""
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.utils.cpp_extension as ext

from study import build, registry

REPO = Path(__file__).resolve().parent.parent
# A builder process: `python -c BUILDER MODE` builds s01 with a fake load_inline.
# hang: holds the build forever; killed-link: dies (SIGKILL) halfway through writing the .so.
BUILDER = r'''
import os, signal, sys, time
import torch.utils.cpp_extension as ext
from study import build, registry
mode = sys.argv[1]
def fake(name, build_directory, **kw):
    lock = os.path.join(build_directory, "lock")
    while os.path.exists(lock):          # torch's FileBaton: wait while someone builds here
        time.sleep(0.05)
    open(lock, "w").close()
    so = os.path.join(build_directory, name + ".so")
    if mode == "hang":
        print("building", flush=True)
        time.sleep(3600)
    with open(so, "wb") as f:
        f.write(b"trunc" if mode == "killed-link" else b"complete")
    if mode == "killed-link":
        os.kill(os.getpid(), signal.SIGKILL)
    os.unlink(lock)
    return "module:" + mode
ext.load_inline = fake
s = build.spec(registry.find("cuda", "s01"))
print("ready", flush=True)
print(build._load_inline(s), flush=True)
'''


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("STUDY_BUILD_DIR", str(root))
    for k in ("NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "CXXFLAGS", "TORCH_CUDA_ARCH_LIST"):
        monkeypatch.delenv(k, raising=False)
    return root


def builder(mode: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-c", BUILDER, mode], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_for(proc: subprocess.Popen, line: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = proc.stdout.readline()
        if got.strip() == line:
            return
        assert got or proc.poll() is None, f"builder exited before {line!r}"
    raise AssertionError(f"no {line!r} from the builder")


def finish(proc: subprocess.Popen, timeout: float = 30) -> tuple:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"the builder was still waiting after {timeout} s")
    return proc.returncode, out


def s01():
    return build.spec(registry.find("cuda", "s01"))


def test_killed_lock_holder_does_not_block_the_next_builders(cache):
    """A holds the build; B waits for it; A is SIGKILLed: B builds, and the .so is in place."""
    a = builder("hang")
    wait_for(a, "building")
    b = builder("ok")
    wait_for(b, "ready")
    time.sleep(1.0)                      # B is now waiting behind A
    a.send_signal(signal.SIGKILL)
    a.wait()
    code, out = finish(b)
    assert code == 0 and "module:ok" in out, out
    so = build._so_path(s01())
    assert so is not None and so.read_bytes() == b"complete"


def test_killed_link_leaves_no_final_so(cache):
    code, out = finish(builder("killed-link"))
    assert code == -signal.SIGKILL, out
    assert build._so_path(s01()) is None, "a truncated .so would be imported from now on"
    code, out = finish(builder("ok"))    # the next build rebuilds (and is not stuck on torch's lock)
    assert code == 0 and "module:ok" in out, out
    assert build._so_path(s01()).read_bytes() == b"complete"


def version_script(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{text}'\n")
    path.chmod(0o755)
    return str(path)


def test_module_name_hashes_toolchain_and_env(cache, tmp_path, monkeypatch):
    names = {}
    monkeypatch.setenv("CXX", version_script(tmp_path / "cxx1", "fake c++ 1.0"))
    names["base"] = s01().name
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "-G")
    names["nvcc -G"] = s01().name
    monkeypatch.delenv("NVCC_APPEND_FLAGS")
    monkeypatch.setenv("NVCC_PREPEND_FLAGS", "-lineinfo")
    names["prepend"] = s01().name
    monkeypatch.delenv("NVCC_PREPEND_FLAGS")
    monkeypatch.setenv("CXXFLAGS", "-O0")
    names["CXXFLAGS"] = s01().name
    monkeypatch.delenv("CXXFLAGS")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    names["arch list"] = s01().name
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST")
    monkeypatch.setenv("CXX", version_script(tmp_path / "cxx2", "fake c++ 2.0"))
    names["c++ 2.0"] = s01().name
    monkeypatch.setenv("CXX", str(tmp_path / "cxx1"))
    assert s01().name == names["base"]
    monkeypatch.setattr(ext, "CUDA_HOME", str(tmp_path / "cuda"))
    version_script(tmp_path / "cuda" / "bin" / "nvcc", "Cuda compilation tools, release 99.9")
    names["nvcc 99.9"] = s01().name
    monkeypatch.setattr(torch.version, "cuda", "99.9")
    names["torch cuda"] = s01().name
    assert len(set(names.values())) == len(names), names


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_group_or_world_writable_build_dir_is_refused(cache, monkeypatch, mode):
    cache.mkdir()
    cache.chmod(mode)
    monkeypatch.setattr(build, "toolkit_missing", lambda: None)
    monkeypatch.setattr(build, "_build_in_subprocess", lambda s: pytest.fail("built in an unsafe dir"))
    with pytest.raises(build.ToolkitError, match=r"STUDY_BUILD_DIR.*writable by"):
        build.build(["s01"], quiet=True)
    with pytest.raises(build.ToolkitError, match="STUDY_BUILD_DIR"):   # the worker's path too
        build._load_inline(s01())


def test_foreign_owned_build_dir_is_refused(cache, monkeypatch):
    cache.mkdir(mode=0o700)
    uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: uid + 1)
    monkeypatch.setattr(build, "toolkit_missing", lambda: None)
    monkeypatch.setattr(build, "_build_in_subprocess", lambda s: pytest.fail("built in a foreign dir"))
    with pytest.raises(build.ToolkitError, match=r"STUDY_BUILD_DIR.*owned by uid"):
        build.build(["s01"], quiet=True)


def test_created_build_dir_is_private(cache, monkeypatch):
    monkeypatch.setattr(ext, "load_inline", lambda name, build_directory, **kw:
                        (Path(build_directory) / f"{name}.so").write_bytes(b"complete") and name)
    s = s01()
    try:
        assert build._load_inline(s) == s.name
    finally:
        sys.modules.pop(s.name, None)   # _load_inline registered the fake module there
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert build._so_path(s).read_bytes() == b"complete" and not (s.directory / "partial").exists()
