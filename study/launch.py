"""Starting `python -m study reports` on every GPU of a host: PyTorch's elastic launcher.

With more than one visible GPU (or --gpus N), the CLI runs

    python -m torch.distributed.run --standalone --nproc-per-node N --module study reports ARGS

and waits: torchrun starts one worker per GPU, each the same command, and each worker (which
finds TORCHELASTIC_RUN_ID set) runs its shard (distrun.py). Across hosts the user starts torchrun
on every host with the same ARGS (README). Nothing here imports torch at module level:
`python -m study --help` must stay light, and pin_gpu() must run before CUDA is initialised.
"""
from __future__ import annotations

import os
import subprocess
import sys

from .registry import PACKAGE_PARENT

PINNED = "STUDY_DEVICE_INDEX"   # set by pin_gpu: the GPU as the host listed it (index or UUID)
_pinned: list = []              # this process's pin (an inherited PINNED is a parent's, not ours)


def under_torchrun() -> bool:
    """True in a worker that torchrun (torch.distributed.run) started."""
    return "TORCHELASTIC_RUN_ID" in os.environ and "LOCAL_RANK" in os.environ


def pin_gpu() -> str:
    """Make the local rank's GPU this process's only CUDA device, before anything initialises
    CUDA: the measuring children, ncu and the compiler inherit it, and device 0 is ours
    everywhere. LOCAL_RANK indexes CUDA_VISIBLE_DEVICES as the launcher saw it (all GPUs when
    unset). Returns that entry; idempotent."""
    if _pinned:
        return _pinned[0]
    local = int(os.environ["LOCAL_RANK"])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [x.strip() for x in visible.split(",") if x.strip()] if visible is not None else None
    if ids is not None and local >= len(ids):
        raise RuntimeError(f"LOCAL_RANK {local} but CUDA_VISIBLE_DEVICES={visible!r} lists {len(ids)} GPU(s): "
                           "start at most one worker per visible GPU (--nproc-per-node)")
    index = ids[local] if ids is not None else str(local)
    os.environ["CUDA_VISIBLE_DEVICES"] = os.environ[PINNED] = index
    _pinned.append(index)
    return index


def visible_gpus() -> int:
    """How many CUDA GPUs this process sees (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def command(argv: list, nproc: int, max_restarts: int = 0) -> list:
    """The torchrun command line that runs `python -m study ARGV` once per GPU of this host.
    A worker that dies ends the run (max_restarts 0); the rows it appended are kept and the
    same command resumes what is missing (journal.py)."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            f"--max-restarts={max_restarts}", "--module", "study", *argv]


def relaunch(argv: list, nproc: int) -> int:
    """Run command(argv, nproc) with the package importable; its exit status."""
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_PARENT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.setdefault("OMP_NUM_THREADS", "1")   # torchrun's default, said here so it does not print a banner
    return subprocess.run(command(argv, nproc), env=env).returncode
