"""GEMM ladder study: every stage of the CUDA and Triton ladders, and cuBLAS, as functions.

    import study
    f = study.kernel("cuda", "s06")          # or ("triton", "s06"), ("cublas", "fp32")
    c = f(a, b)                               # C = A @ B
    f(a, b, c, alpha=2.0, beta=0.5)           # C = alpha * A @ B + beta * C, in place
    study.stages()                            # the pairing table as a pandas DataFrame
"""
from .kernels import Kernel, check_operands, kernel
from .measure import bench
from .registry import Stage, all_stages, stages

__all__ = ["Kernel", "Stage", "all_stages", "bench", "check_operands", "kernel", "stages", "build_all"]


def build_all(jobs: int | None = None):
    """Compile every CUDA stage in parallel (cached); a DataFrame of build results."""
    import pandas as pd

    from . import build

    return pd.DataFrame([r.__dict__ for r in build.build(jobs=jobs)])
