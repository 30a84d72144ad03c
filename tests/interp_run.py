"""Run Triton stage files under the Triton interpreter on CPU and print the results as JSON.

    TRITON_INTERPRET=1 python tests/interp_run.py triton_kernels/s04_vectorized.py [...]

tests/test_interp.py starts this in subprocesses: TRITON_INTERPRET must be set before any
Triton kernel is imported, which the pytest process (it compiles the same kernels ahead of time
for sm_90) cannot do. Each stage runs gemm_checks.battery() on the interpreter shapes for every
precision its header names (bf16 skipped: its tl.dot is broken in the interpreter, triton issue
11584), plus NaN/Inf propagation. fp8 (gemm_checks.variants: K fitted to 16-byte rows, both
scalings, scales as keywords, bf16 C, dequantised fp64 reference) also on INTERP_SHAPES_FP8 (more
than one 128-deep K block), and the battery again with fast_accum=True (its own, looser bound);
fp8 NaN propagation is skipped here (FP8_NAN_REASON) and checked on the GPU. Output: one JSON
object per line, {"stem", "path", "precision", "case", "status": pass|fail|skip, "message",
"seconds"}; a fast_accum case's name ends in "-fast".
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
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

    for path in paths:
        stage = parse_header(Path(path), "triton")
        base = {"stem": stage.stem, "path": str(path)}
        try:
            kern = TritonKernel(stage)
        except Exception as exc:  # import errors are this stage's failure, not the run's
            print(json.dumps({**base, "precision": "-", "case": "load", "status": "fail",
                              "message": f"{type(exc).__name__}: {exc}", "seconds": 0}), flush=True)
            continue
        for prec in stage.precisions:
            scaled = prec in SCALED
            shapes = gc.INTERP_SHAPES + (gc.INTERP_SHAPES_FP8 if scaled else [])
            cases = gc.battery(prec, stage.layout, shapes, gc.INTERP_AB_SHAPE)
            runs = [(kern, "", case) for case in cases + ["nonfinite"]]
            if scaled:   # the fast-accumulation path: the same cases, the fast_accum bound
                fast = TritonKernel(stage, fast_accum=True)
                runs += [(fast, "-fast", case) for case in cases + ["nonfinite"]]
            for k, suffix, case in runs:
                name = (case if isinstance(case, str) else case.id) + suffix
                rec = {**base, "precision": prec, "case": name}
                skip = BF16_REASON if prec == "bf16" else \
                    FP8_NAN_REASON if scaled and case == "nonfinite" else None
                if skip:
                    print(json.dumps({**rec, "status": "skip", "message": skip, "seconds": 0}), flush=True)
                    continue
                t = time.perf_counter()
                try:
                    if case == "nonfinite":
                        gc.check_nonfinite(k, prec, "cpu", stage.layout)
                    else:
                        gc.check_case(k, case, prec, "cpu")
                    status, msg = "pass", ""
                except AssertionError as exc:
                    status, msg = "fail", str(exc)
                except ValueError as exc:   # a declared limit (unsupported()) is a skip, not a bug
                    declared = not stage.limits.lower().startswith("none")
                    status, msg = ("skip" if declared else "fail"), f"ValueError: {exc}"
                except Exception as exc:
                    status = "fail"
                    msg = f"{type(exc).__name__}: {exc}\n" + traceback.format_exc(limit=3)[-1500:]
                print(json.dumps({**rec, "status": status, "message": msg[:2000],
                                  "seconds": round(time.perf_counter() - t, 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
