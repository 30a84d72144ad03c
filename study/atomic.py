"""Writing reports/ without losing what is there: whole files only, one run at a time.

    atomic_write(path, fill)   fill a temporary beside path, then os.replace it in place: an
                               interrupt leaves the old file or the new one, never half of one
    locked(root)               fcntl.flock on root/.study-reports.lock; a second holder gets
                               Busy naming the first one's pid (the kernel drops the lock when
                               its process dies)
    staging(root)              a temporary directory under root (same filesystem), removed after
    swap_in(stage, root, ...)  os.replace each staged file onto its place under root
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

LOCK_NAME = ".study-reports.lock"
STAGING_PREFIX = ".staging-"
_UMASK = os.umask(0o022)
os.umask(_UMASK)


class Busy(RuntimeError):
    """Another process holds the reports root's lock."""


def atomic_write(path, fill) -> Path:
    """fill(tmp) writes a temporary file beside `path` (same directory, so the same filesystem);
    it is synced and os.replace'd onto path. On any exception, KeyboardInterrupt included, the
    temporary is removed and path is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        fill(Path(tmp))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def write_text(path, text: str) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text))


@contextlib.contextmanager
def locked(root):
    """Hold the lock of the reports root `root` (created if missing) for the with-block; Busy,
    naming the holder's pid, if another process holds it. The lock file holds the pid and is
    removed on release; one a killed process left behind is taken over (flock died with it)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    path = root / LOCK_NAME
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise Busy(f"another run (pid {holder}) is writing {root} (lock file {path}); "
                       "wait for it to finish") from None
        try:    # the holder before us may have removed the file between our open and our flock
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)


@contextlib.contextmanager
def staging(root):
    """A new temporary directory under `root` (so os.replace from it never crosses filesystems);
    removed with whatever is left in it when the with-block ends, however it ends."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=root, prefix=STAGING_PREFIX))
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def swap_in(stage: Path, root: Path, parts) -> list:
    """os.replace every file under stage/<part> (a file or a directory, relative) onto the same
    place under root; files of root that the stage does not have stay. The paths written."""
    stage, root = Path(stage), Path(root)
    moved = []
    for part in parts:
        src = stage / part
        files = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
        for f in files:
            dst = root / f.relative_to(stage)
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(f, dst)
            moved.append(dst)
    return moved
