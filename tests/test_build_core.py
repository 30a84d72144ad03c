"""The CUDA build machinery, without a GPU: generated bindings, module names, the build cache."""
import os
import subprocess
from dataclasses import replace

import pytest

from study import binding, build, registry


def cuda_stages():
    return registry.all_stages("cuda")


@pytest.mark.parametrize("stage", cuda_stages(), ids=lambda s: s.stem)
def test_binding_declares_every_precision(stage):
    src = binding.binding_source(stage)
    assert "torch" not in src, "the binding must not include torch headers (35 s of compile each)"
    for prec in stage.precisions:
        assert f'm.def("launch_{prec}"' in src and f'm.def("check_{prec}"' in src
        assert binding.problem_type(stage, prec) in src   # gemm::Problem<T>; fp8: gemm::ScaledProblem<OutT>
    assert ('m.def("configs"' in src) == binding.has_configs(stage)


def test_bindings_compile_on_host(tmp_path):
    """g++ accepts every generated binding against the stage's declarations (no GPU needed).
    One g++ per stage, all at once: each spends ~7 s in pybind11's headers."""
    import sysconfig

    from torch.utils.cpp_extension import include_paths

    cuda_inc = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include")
    procs = {}
    for stage in cuda_stages():
        cpp = tmp_path / f"{stage.stem}.cpp"
        cpp.write_text(binding.binding_source(stage))
        cmd = ["g++", "-fsyntax-only", "-std=c++17", "-DTORCH_EXTENSION_NAME=probe",
               *(f"-I{p}" for p in include_paths()), f"-I{sysconfig.get_paths()['include']}",
               f"-I{cuda_inc}", f"-I{registry.CUDA_DIR}", str(cpp)]
        procs[stage.stem] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    failed = {stem: p.communicate()[0][-2000:] for stem, p in procs.items()}
    failed = {stem: out for stem, out in failed.items() if procs[stem].returncode != 0}
    assert not failed, failed


def test_module_name_changes_with_source(tmp_path):
    stage = registry.find("cuda", "s01")
    copy = tmp_path / stage.path.name
    copy.write_text(stage.path.read_text())
    a = build.spec(replace(stage, path=copy)).name
    copy.write_text(stage.path.read_text() + "\n// a comment changes the hash\n")
    b = build.spec(replace(stage, path=copy)).name
    assert a != b and a.startswith("study_s01_naive_")
    assert build.spec(stage).name == build.spec(stage).name


def test_included_headers_are_hashed():
    stage = registry.find("cuda", "s01")
    names = [p.name for p in build.included_sources(stage.path)]
    assert "gemm.cuh" in names


def test_stale_torch_lock_is_cleared_under_our_lock(tmp_path, monkeypatch):
    """torch's `lock` left by a killed build is removed by the next holder of our OS lock (no
    pid files: the flock is the proof that nobody else builds). More in test_build_cache.py."""
    monkeypatch.setenv("STUDY_BUILD_DIR", str(tmp_path))
    s = build.spec(registry.find("cuda", "s01"))
    (s.directory / "partial").mkdir(parents=True)
    (s.directory / "partial" / "lock").write_text("")

    def compile_into(aside):
        assert not (aside / "lock").exists()
        (aside / f"{s.name}.so").write_bytes(b"so")
        return "module"
    assert build.buildcache.build_once(s.directory, s.name, compile_into, lambda so: None) == "module"
    assert build._so_path(s).read_bytes() == b"so"


def test_ptxas_resources_parse():
    log = """ptxas info    : Compiling entry function '_ZN9s01_naive6kernelEN4gemm7ProblemIfEE' for 'sm_90a'
ptxas info    : Function properties for _ZN9s01_naive6kernelEN4gemm7ProblemIfEE
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 8320 bytes smem, 400 bytes cmem[0]"""
    (r,) = build.parse_ptxas(log)
    assert (r.registers, r.shared_bytes, r.stack_bytes, r.spill_stores, r.spill_loads) == (40, 8320, 8, 4, 12)
