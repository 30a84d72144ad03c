"""GEMM ladder study: every stage of the CUDA and Triton ladders, and cuBLAS, as functions.

    import study
    f = study.kernel("cuda", "s06")          # or ("triton", "s06"), ("cublas", "fp32")
    c = f(a, b)                               # C = A @ B
    f(a, b, c, alpha=2.0, beta=0.5)           # C = alpha * A @ B + beta * C, in place
    a8, sa = study.quantize_fp8(x, "row")     # fp8: e4m3 operands and their fp32 scales
    study.kernel("cuda", "s15")(a8, w8.t(), scale_a=sa, scale_b=sb)   # bf16 (scale_a A) @ (B scale_b)
    study.kernel("inductor", "bf16", layout="NT")   # Inductor's autotuned Triton GEMM (baseline)
    study.stages()                            # the pairing table as a pandas DataFrame
    study.bench(fn, [4096], "bf16")           # time your own kernel beside cuBLAS
    study.build_all()                         # compile every CUDA stage now (cached)
    study.Linear(4096, 11008, kernel=("cuda", "s13"))   # nn.Linear on a stage, forward and backward
    with study.use("triton", "s13"): model(x)  # torch's matmuls in the block on a stage
    study.gemm("cuda", "s13", a, b)           # the torch.ops.study.gemm custom op (torch.compile)

Names load on first use, so `import study` (and `python -m study --help`) imports neither
torch nor Triton until a kernel is asked for. docs/ARCHITECTURE.md maps the modules.
"""
import importlib
from pathlib import Path

# public name -> the module that defines it
_EXPORTS = {"Kernel": "kernels", "kernel": "kernels", "check_operands": "operands", "bench": "measure",
            "Stage": "registry", "all_stages": "registry", "stages": "registry", "build_all": "build",
            "quantize_fp8": "fp8", "Linear": "nn", "use": "route", "gemm": "kernels", "gemm_": "kernels"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    elif (Path(__file__).parent / f"{name}.py").exists():   # study.registry, study.build, ...
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'study' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
