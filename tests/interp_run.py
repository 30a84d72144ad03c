"""Run Triton stage files under the Triton interpreter on CPU and print the results as JSON.

    TRITON_INTERPRET=1 python tests/interp_run.py triton_kernels/s04_vectorized.py [...]

tests/test_interp.py starts this in subprocesses: TRITON_INTERPRET must be set before any
Triton kernel is imported, which the pytest process (it compiles the same kernels ahead of time
for sm_90) cannot do. Each stage runs every test class of the "interp" platform
(gemm_checks.PLATFORM_CLASSES: shapes, alpha_beta, ints, seeds, nonfinite, views, int32) for
every precision its header names, through gemm_checks.run_cases (a case the stage refuses by its
declared limits runs at its fitted shape; C inside a guard band). bf16 is skipped (its tl.dot is
broken in the interpreter, triton issue 11584). fp8 (gemm_checks.variants: K fitted to 16-byte
rows, both scalings, scales as keywords, bf16 C, dequantised fp64 reference) also on
INTERP_SHAPES_FP8 (more than one 128-deep K block), and every class again with fast_accum=True
(its own, looser bound); fp8 NaN propagation is skipped here (FP8_NAN_REASON) and checked on the
GPU. Output: one JSON object per line, {"stem", "path", "precision", "class", "case", "ran",
"status": pass|fail|refused|skip, "check", "error", "message", "seconds"} (run_cases' records);
a fast_accum case's name ends in "-fast"; a stage that does not import gives one record of class
and case "load".
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

BF16_REASON = "bf16 tl.dot returns garbage in the Triton interpreter (triton issue 11584)"
FP8_NAN_REASON = ("the Triton interpreter's e4m3 conversion (interpreter._convert_float) reads NaN (0x7f) as "
                  "480, so NaN cannot propagate through its fp8 tl.dot; checked on the GPU (test_gpu.py)")


def main(paths) -> int:
    if os.environ.get("TRITON_INTERPRET") != "1":
        print("interp_run.py: set TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    import gemm_checks as gc
    from study.kernels import TritonKernel
    from study.registry import SCALED, parse_header

    def emit(rec):
        print(json.dumps(rec), flush=True)

    for path in paths:
        stage = parse_header(Path(path), "triton")
        base = {"stem": stage.stem, "path": str(path)}
        try:
            kern = TritonKernel(stage)
        except Exception as exc:  # import errors are this stage's failure, not the run's
            emit({**base, "precision": "-", "class": "load", "case": "load", "ran": "", "status": "fail",
                  "check": "", "error": type(exc).__name__, "message": f"{type(exc).__name__}: {exc}", "seconds": 0})
            continue
        for prec in stage.precisions:
            scaled = prec in SCALED
            kerns = [(kern, "")] + ([(TritonKernel(stage, fast_accum=True), "-fast")] if scaled else [])
            for k, suffix in kerns:
                align = gc.alignment(k, prec)
                for cls in gc.PLATFORM_CLASSES["interp"]:
                    cases = gc.class_cases(cls, "interp", prec, stage.layout, align)
                    skip = BF16_REASON if prec == "bf16" else \
                        FP8_NAN_REASON if scaled and cls == "nonfinite" else None
                    if skip:
                        for case in cases:
                            emit({**base, "precision": prec, "class": cls, "case": case.id + suffix, "ran": "",
                                  "status": "skip", "check": "", "error": "", "message": skip, "seconds": 0})
                        continue
                    for rec in gc.run_cases(k, cls, cases, prec, "cpu"):
                        emit({**base, "precision": prec, **rec, "case": rec["case"] + suffix})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
