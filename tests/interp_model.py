"""One check of tests/model_checks.py under Triton's interpreter on the CPU:

    TRITON_INTERPRET=1 python tests/interp_model.py CHECK FAMILY STAGE DTYPE

tests/test_model_api.py starts it in a subprocess (TRITON_INTERPRET must be set before Triton is
imported). Exit 0 and "ok" when the check passed; the AssertionError's message otherwise.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

import model_checks  # noqa: E402

if __name__ == "__main__":
    check, family, stage, dtype = sys.argv[1:5]
    getattr(model_checks, check)(family, stage, "cpu", getattr(torch, dtype))
    print("ok")
