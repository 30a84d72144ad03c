"""Provenance (issue 19), without a GPU: the tests' autotune cache is not the study's, caches are
per GPU model, environment.json names cuBLAS, the GPU's UUID, the settings and the seed, an
untracked stage file makes the tree dirty, the clock sampler reads the measured GPU, and each
stage's builds row carries the digest of the code it ran (sourcedigest.py)."""
from __future__ import annotations

import io
import subprocess
from dataclasses import asdict
from types import SimpleNamespace

import pytest
import torch

from study import autotune, device, environment, runner
from study.measure import Settings
from study.plan import Shape
from study.registry import STATE_ROOT

UUID = "5d0a1c2e-0000-1111-2222-333344445555"   # torch's spelling; nvidia-smi's has "GPU-"


def test_tests_have_their_own_autotune_cache():
    """conftest points STUDY_CACHE_DIR elsewhere before study is imported (xdist workers
    inherit it): no search timed under the tests' GPU contention lands in the study's cache."""
    assert autotune.cache_path() != STATE_ROOT / "build" / "autotune.json"
    assert "test" in autotune.cache_path().parent.name
    assert runner.triton_cache_dir().parent.parent == autotune.cache_path().parent


def test_autotune_cache_is_per_gpu_model_and_keeps_other_writers(tmp_path, monkeypatch):
    from study.operands import Problem

    kern, a = SimpleNamespace(name="cuda:s08_autotuned"), torch.empty(64, 64)
    p = Problem(64, 64, 64, 64, 64, 64, "fp32", "NN")
    keys = {}
    for gpu in ("NVIDIA_H100_80GB_HBM3", "NVIDIA_H200"):
        monkeypatch.setattr(device, "gpu_name", lambda gpu=gpu: gpu)
        keys[gpu] = autotune._key(kern, p, a, a, a)
        assert keys[gpu].startswith(gpu + "|")
    assert len(set(keys.values())) == 2
    # another process saved meanwhile: its entry survives this one's save
    monkeypatch.setenv("STUDY_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "_cache", {"mine": {"config": 0}})
    autotune.cache_path().write_text('{"theirs": {"config": 1}}')
    autotune._save()
    import json
    assert set(json.loads(autotune.cache_path().read_text())) == {"mine", "theirs"}


class FakeProc:
    def __init__(self, cmd, env=None, stdout=None, lines="", **kw):
        self.cmd, self.env, self.returncode = cmd, env, 0
        self.stdout = io.StringIO(lines)

    def wait(self, timeout=None):
        return 0

    def terminate(self):
        pass


def test_children_get_a_triton_cache_per_gpu_model(monkeypatch):
    """Triton keys its autotune cache by arch (sm_90 for H100 and H200): the study's children
    get a directory per GPU model unless the user chose TRITON_CACHE_DIR."""
    seen = []

    def popen(cmd, **kw):
        seen.append(FakeProc(cmd, lines='{"event": "done"}\n', **kw))
        return seen[-1]
    monkeypatch.setattr(runner.subprocess, "Popen", popen)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    dirs = []
    for gpu in ("NVIDIA_H100_80GB_HBM3", "NVIDIA_H200"):
        monkeypatch.setattr(device, "gpu_name", lambda gpu=gpu: gpu)
        runner.run_group("fp32", [], [Shape(128, 128, 128)], Settings())
        env = seen[-1].env
        assert env["TRITON_CACHE_AUTOTUNING"] == "1"
        assert env["TRITON_CACHE_DIR"].endswith(gpu) and "triton" in env["TRITON_CACHE_DIR"]
        dirs.append(env["TRITON_CACHE_DIR"])
    assert dirs[0] != dirs[1]
    monkeypatch.setenv("TRITON_CACHE_DIR", "/mine")
    runner.run_group("fp32", [], [Shape(128, 128, 128)], Settings())
    assert seen[-1].env["TRITON_CACHE_DIR"] == "/mine"


def fake_gpu(monkeypatch):
    """torch.cuda as on a box whose CUDA device 0 is nvidia-smi's second GPU."""
    monkeypatch.setattr(device, "capability", lambda: (9, 0))
    monkeypatch.setattr(device, "gpu_name", lambda: "NVIDIA_H200")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: SimpleNamespace(
        name="NVIDIA H200", major=9, minor=0, multi_processor_count=132, total_memory=140 * 2**30,
        L2_cache_size=60 * 2**20, uuid=UUID))


SMI = f"GPU-ffffffff-0000-1111-2222-333344445555, 550.54, 1980, 700\nGPU-{UUID}, 550.54, 1830, 600\n"


def test_environment_names_cublas_uuid_settings_and_seed(monkeypatch):
    fake_gpu(monkeypatch)
    real_out = environment._out
    monkeypatch.setattr(environment, "_out", lambda cmd: SMI if cmd[0] == "nvidia-smi" else real_out(cmd))
    env = environment.collect(settings=Settings(seed=7))
    assert env["gpu_uuid"] == f"GPU-{UUID}"
    assert (env["driver"], env["sm_clock_max_mhz"], env["power_limit_w"]) == ("550.54", "1830", "600")
    assert env["settings"] == asdict(Settings(seed=7)) and env["seed"] == 7
    assert env.get("cublas") or "cublas_unknown_cuda_runtime_torch" in env
    assert "settings" not in environment.collect()   # the old call still works


def test_a_run_records_the_digest_of_the_sources_it_measured(capsys):
    """git_commit can lag the files (a copied tree whose .git is older): sources_sha1 is the
    digest of the bytes themselves, and `python -m study sources` prints the tree's."""
    from study import cli, journal

    assert environment.collect()["sources_sha1"] == journal.sources_digest()[:16]
    assert cli.main(["sources"]) == 0
    assert capsys.readouterr().out.strip() == journal.sources_digest()[:16]


def test_cublas_version_sources(monkeypatch):
    from importlib import metadata

    monkeypatch.setattr(environment, "_loaded", lambda name: [])

    def version(dist):
        if dist == "nvidia-cublas-cu12":
            return "12.4.5.8"
        raise metadata.PackageNotFoundError(dist)
    monkeypatch.setattr(metadata, "version", version)
    assert environment.cublas_version() == {"cublas": "12.4.5.8", "cublas_source": "pip package nvidia-cublas-cu12"}
    monkeypatch.setattr(metadata, "version", lambda d: (_ for _ in ()).throw(metadata.PackageNotFoundError(d)))
    assert environment.cublas_version() == {"cublas_unknown_cuda_runtime_torch": torch.version.cuda}


def test_sweep_records_settings_and_seed(tmp_path, monkeypatch):
    from study import sweep

    from study import distrun, runner

    env = {}
    monkeypatch.setenv("STUDY_JOURNAL_DIR", str(tmp_path / "journal"))
    monkeypatch.setattr(sweep.environment, "collect", lambda: env)
    monkeypatch.setattr(sweep.environment, "ClockSampler", lambda: type("C", (), {
        "start": lambda s: s, "latest": lambda s: {}, "stop": lambda s: {}})())
    monkeypatch.setattr(sweep.build, "build_dir", lambda: tmp_path / "build" / "cuda")
    monkeypatch.setattr(sweep, "_build", lambda groups: ([], None))
    monkeypatch.setattr(sweep.ceilings, "measure", lambda gpu, quick: __import__("pandas").DataFrame(
        columns=["name", "value", "unit", "source"]))
    rig = distrun.Rig(gpu_name=lambda: "FAKE_GPU", uuid=lambda: "GPU-fake-0", ceilings_s=0.0,
                      work=lambda precision, *a, **k: runner.GroupResult(precision))   # no row comes back
    assert distrun.alone(sweep.Options(quick=True, precisions=("fp32",), root=tmp_path / "reports"), rig=rig) == 1
    assert env["settings"] == asdict(Settings.quick()) and env["seed"] == Settings.quick().seed


def git(repo, *args):
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.mark.parametrize("untracked, dirty", [
    ("study/new_helper.py", True), ("cuda_src/s99_new.cu", True), ("triton_kernels/s99_new.py", True),
    ("study/__pycache__/x.pyc", False),   # ignored
    ("notes.txt", False),                 # outside the stages and the harness
    (None, False)])
def test_untracked_stage_files_make_the_tree_dirty(tmp_path, monkeypatch, untracked, dirty):
    repo = tmp_path / "repo"
    (repo / "study").mkdir(parents=True)
    (repo / "study" / "a.py").write_text("x = 1\n")
    (repo / ".gitignore").write_text("__pycache__/\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    if untracked:
        (repo / untracked).parent.mkdir(parents=True, exist_ok=True)
        (repo / untracked).write_text("new\n")
    monkeypatch.setattr(environment, "ROOT", repo)
    monkeypatch.delenv("STUDY_GIT_COMMIT", raising=False)
    assert environment.collect()["git_dirty"] is dirty


def test_clock_sampler_reads_the_measured_gpu(monkeypatch):
    """nvidia-smi's GPU 0 is another board here: the sampler keeps the line whose UUID is the
    CUDA device's, whatever nvidia-smi's order."""
    fake_gpu(monkeypatch)
    procs = []

    def popen(cmd, **kw):
        procs.append(FakeProc(cmd, lines="".join(
            f"GPU-ffffffff-0000-1111-2222-333344445555, 1410, 300.5\nGPU-{UUID}, {1980 - i}, 650.0\n"
            for i in range(3)), **kw))
        return procs[-1]
    monkeypatch.setattr(environment.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(environment.subprocess, "Popen", popen)
    monkeypatch.setattr(environment.ClockSampler, "_power_query", staticmethod(lambda smi: "power.draw"))
    clock = environment.ClockSampler().start()
    clock._thread.join(timeout=10)
    assert [m for _, m, _ in clock.samples] == [1980.0, 1979.0, 1978.0]
    assert clock.latest()["power_w"] == 650.0
    assert "-i" not in procs[0].cmd
    assert clock.stop()["sm_clock_median_mhz"] == 1979.0


def test_clock_samples_take_nvidia_smis_time_and_instant_power(monkeypatch):
    """Each sample is stamped with nvidia-smi's own timestamp (a line can reach us late), and the
    power field is the instantaneous one where the driver has it (plain power.draw is a one-second
    average on recent drivers: 8192^3 rounds of ~0.6 s read ~380 W beside 690 W at 4096^3)."""
    fake_gpu(monkeypatch)
    procs = []

    def popen(cmd, **kw):
        procs.append(FakeProc(cmd, lines=f"GPU-{UUID}, 1755, 697.5, 2026/11/26 01:29:55.250\n"
                                         f"GPU-{UUID}, 1740, 699.0, not a time\n", **kw))
        return procs[-1]

    class Probe:
        def __init__(self, rc, out):
            self.returncode, self.stdout = rc, out
    monkeypatch.setattr(environment.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(environment.subprocess, "Popen", popen)
    monkeypatch.setattr(environment.subprocess, "run", lambda cmd, **kw: Probe(0, "512.34\n"))
    clock = environment.ClockSampler().start()
    clock._thread.join(timeout=10)
    assert "--query-gpu=uuid,clocks.sm,power.draw.instant,timestamp" in procs[0].cmd
    import datetime
    assert clock.samples[0] == (datetime.datetime(2026, 11, 26, 1, 29, 55, 250000).timestamp(), 1755.0, 697.5)
    assert abs(clock.samples[1][0] - environment.time.time()) < 60, "an unreadable stamp: the time it came"
    assert clock.stop()["power_field"] == "power.draw.instant"
    for probe in (Probe(6, "Field \"power.draw.instant\" is not a valid field to query.\n"), Probe(0, "[N/A]\n")):
        monkeypatch.setattr(environment.subprocess, "run", lambda cmd, probe=probe, **kw: probe)
        assert environment.ClockSampler._power_query("/usr/bin/nvidia-smi") == "power.draw"


def test_autotune_saves_nothing_from_a_dead_context(tmp_path, monkeypatch):
    """A configuration that faults (the context dies) fails the search instead of being skipped
    as 'cannot launch here', and nothing is written to the autotune cache."""
    import pytest
    import torch

    from study import autotune
    from study.operands import Problem

    monkeypatch.setenv("STUDY_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "_cache", None)
    monkeypatch.setattr(autotune.device, "gpu_name", lambda: "GPU")
    kern = SimpleNamespace(name="s08_autotuned", configs=lambda: ["a", "b"])

    def faulting(kern, p, a, b, c, i, reps=9):
        if i == 1:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return 1.0
    monkeypatch.setattr(autotune, "time_config", faulting)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: (_ for _ in ()).throw(
        RuntimeError("CUDA error: an illegal memory access was encountered")))
    a = torch.zeros(8, 8)
    p = Problem(8, 8, 8, 8, 8, 8, "fp32", "NN")
    with pytest.raises(RuntimeError, match="context died during the configuration search"):
        autotune.choose(kern, p, a, a, a)
    assert not (tmp_path / "autotune.json").exists()
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)   # a config that only cannot launch
    assert autotune.choose(kern, p, a, a, a) == 0 and (tmp_path / "autotune.json").exists()


def test_stage_digest_covers_the_code_a_stage_runs(tmp_path, monkeypatch):
    """CUDA: the file, its headers, the binding and flags; Triton: the file, the study modules
    it imports (transitively) and a stage file it names (s14 runs s13's kernel). A byte changed
    in any of them changes the digest; changed() names the stage, or says None without digests."""
    import pandas as pd

    from study import sourcedigest
    from study.registry import find
    from study.results import Data

    names = {f: [p.name for p in sourcedigest.source_files(find(f, "s14"))] for f in ("cuda", "triton")}
    assert {"s14_stream_k.cu", "hopper.cuh", "binding.py", "build.py"} <= set(names["cuda"])
    assert {"s14_stream_k.py", "tritonlaunch.py", "tritonlib.py", "s13_warp_specialized.py"} <= set(names["triton"])
    stage = find("triton", "s14")
    before = sourcedigest.stage_digest(stage)
    assert len(before) == 12 and before == sourcedigest.stage_digest(stage)
    copy = tmp_path / "s13_warp_specialized.py"
    copy.write_text(find("triton", "s13").path.read_text() + "\n# one more line\n")
    real = sourcedigest.source_files
    monkeypatch.setattr(sourcedigest, "source_files",
                        lambda st: [copy if p.name == copy.name else p for p in real(st)])
    assert sourcedigest.stage_digest(stage) != before

    def run(digests):
        rows = [{"family": f, "stage": s, "source": d} for (f, s), d in digests.items()]
        return Data("gpu", pd.DataFrame(), builds=pd.DataFrame(rows))
    a = run({("cuda", "s13"): "x", ("cuda", "s14"): "y", ("triton", "s14"): "z"})
    b = run({("cuda", "s13"): "x", ("cuda", "s14"): "w"})
    assert sourcedigest.changed(a, b) == [("cuda", "s14")]
    assert sourcedigest.changed(a, Data("gpu", pd.DataFrame())) is None
    merged = run({("cuda", "s13"): None, ("cuda", "s14"): "y"})   # s13's row from a run before digests
    assert sourcedigest.changed(a, merged) == [("cuda", "s13")]


def test_a_filtered_run_blanks_the_digest_of_a_stage_it_measured_in_part():
    """A filtered run over some of a stage's rows, with changed code, leaves that stage's table
    holding two versions' rows: its merged digest is blank (changed() then leaves it out of the
    two-GPU comparison); a stage it re-measured whole, or whose code did not change, keeps the
    digest, and a stage it did not build keeps the recorded one."""
    import pandas as pd

    from study import sourcedigest
    from study.publish import merge
    from study.results import Data

    def builds(digests):
        return pd.DataFrame([{"family": f, "stage": s, "source": d} for (f, s), d in digests.items()])
    prev = builds({("cuda", "s13"): "a", ("cuda", "s14"): "b", ("triton", "s14"): "c", ("cuda", "s15"): "d"})
    new = builds({("cuda", "s14"): "B", ("triton", "s14"): "c", ("cuda", "s15"): "D"})
    res = pd.DataFrame([  # merged results: s14's fp16 rows are the older run's, s15's all new
        ("cuda", "s13", False), ("cuda", "s14", False), ("cuda", "s14", True), ("triton", "s14", False),
        ("triton", "s14", True), ("cuda", "s15", True)], columns=["family", "stage", "new"])
    got = sourcedigest.blank_mixed(prev, new, merge(prev, new, ["family", "stage"]), res)
    digest = dict(zip(zip(got["family"], got["stage"]), got["source"]))
    assert digest == {("cuda", "s13"): "a", ("cuda", "s14"): "", ("triton", "s14"): "c", ("cuda", "s15"): "D"}
    other = Data("gpu", pd.DataFrame(), builds=prev)
    assert sourcedigest.changed(Data("gpu", pd.DataFrame(), builds=got), other) == [("cuda", "s14"), ("cuda", "s15")]
    assert sourcedigest.blank_mixed(None, new, new, res[res["new"]]).equals(new)
