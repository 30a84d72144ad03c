"""What the local GPU is, asked once."""
from __future__ import annotations

import functools

import torch


@functools.lru_cache(maxsize=None)
def capability(index: int = 0) -> tuple | None:
    """(major, minor) of GPU `index` (default GPU 0, what stages are compiled for), or None
    without a usable CUDA GPU. A call passes its operands' device index."""
    if not torch.cuda.is_available():
        return None
    return tuple(torch.cuda.get_device_capability(index))


@functools.lru_cache(maxsize=None)
def gpu_name() -> str:
    """A file-system friendly GPU name ("NVIDIA_H100_80GB_HBM3"), or "cpu"."""
    if capability() is None:
        return "cpu"
    name = torch.cuda.get_device_name(0)
    return "".join(ch if ch.isalnum() else "_" for ch in name).strip("_")


def arch_flag(stage_arch: str, cap: tuple | None = None) -> str:
    """The nvcc -gencode flag for a stage on this GPU (sm_90a for Hopper-only stages)."""
    cap = cap or capability() or (9, 0)
    if stage_arch == "sm_90a" or tuple(cap) == (9, 0):
        # sm_90a SASS runs on sm_90 only, and the Hopper stages need its wgmma/setmaxnreg.
        return "-gencode=arch=compute_90a,code=sm_90a"
    sm = f"{cap[0]}{cap[1]}"
    return f"-gencode=arch=compute_{sm},code=sm_{sm}"
