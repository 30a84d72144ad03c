"""The package carries its kernels (CPU): `pip install .` from the repository gives an `import
study` that finds cuda_src/ and triton_kernels/ from any working directory, and runs a Triton
stage there (interpreter, CPU tensors) without the source tree on the path."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import interp_unusable
from study.registry import PACKAGE_PARENT, all_stages

PROBE = r"""
import json, os, sys
import torch
import study
from study import registry
err = None
if os.environ.get("PROBE_RUN_KERNEL") == "1":   # the Triton interpreter, on CPU tensors
    a = torch.randn(24, 20, dtype=torch.float32)
    b = torch.randn(20, 17, dtype=torch.float32)
    c = study.kernel("triton", "s03")(a, b)
    err = float((c.double() - a.double() @ b.double()).abs().max())
print(json.dumps({
    "file": study.__file__, "in_checkout": registry.IN_CHECKOUT, "root": str(registry.ROOT),
    "state_root": str(registry.STATE_ROOT), "reports_root": str(registry.REPORTS_ROOT),
    "stages": sorted(f"{s.family}:{s.stem}" for s in study.all_stages()),
    "gemm_cuh": (registry.CUDA_DIR / "common" / "gemm.cuh").is_file(),
    "max_err": err, "sys_path": sys.path,
}))
"""


def _setuptools_builds_wheels() -> bool:
    try:
        from setuptools.command import bdist_wheel  # noqa: F401  (setuptools >= 70.1)
        return True
    except ImportError:
        try:
            import wheel  # noqa: F401
            return True
        except ImportError:
            return False


@pytest.mark.skipif(not _setuptools_builds_wheels(),
                    reason="installing without build isolation needs setuptools >= 70.1 or wheel "
                           "(requirements.txt pins one; the GPU box's python3 may lack it)")
def test_pip_install_carries_the_kernels(tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(PACKAGE_PARENT)],
        capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "STUDY_"))}
    # where the interpreter cannot run (numpy >= 2.4 on the GPU machine) the install is still
    # checked, without the kernel call; CI runs the call
    run_kernel = interp_unusable() is None
    env.update(PYTHONPATH=str(site), TRITON_INTERPRET="1", XDG_CACHE_HOME=str(tmp_path / "cache"),
               PROBE_RUN_KERNEL="1" if run_kernel else "0")
    run = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         cwd=elsewhere, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert Path(got["file"]).is_relative_to(site), f"imported the checkout, not the install: {got['file']}"
    assert str(PACKAGE_PARENT) not in got["sys_path"]
    assert not got["in_checkout"]
    assert Path(got["root"]).is_relative_to(site) and got["gemm_cuh"]
    assert Path(got["state_root"]).is_relative_to(tmp_path / "cache")
    assert got["reports_root"] == str(elsewhere / "reports")
    assert got["stages"] == sorted(f"{s.family}:{s.stem}" for s in all_stages())
    if run_kernel:
        assert got["max_err"] < 1e-3
